"""`vhpc run -- LAUNCHER ARGS...`: an MPI job under libvhpc_wait, whatever the MPI.

Finds which MPI the program runs (the program's own libmpi, from its ELF
dependencies or, for `python x.py`, from the libmpi its mpi4py loads; else the
launcher's identity), picks the libvhpc_wait built for exactly that MPI, and
rewrites the command line the way that launcher forwards environment to the ranks
(Hydra: `-genv`, Open MPI: `-x`); lets Open MPI oversubscribe when there are more
ranks than CPUs. Refuses (exit code 2) when the MPI is unknown, the library is not
built, or it was built for another MPI.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from vhpc import mpi
from vhpc.runtime import discover as disc
from vhpc.runtime import library, openmp

POLICIES = ("adaptive", "spin", "yield", "sleep")

#: Launcher names (the command's or its real file's) and the MPI family they start.
HYDRA_NAMES = {"mpiexec.mpich", "mpirun.mpich", "mpiexec.hydra", "mpiexec.intel"}
OPENMPI_NAMES = {"mpiexec.openmpi", "mpirun.openmpi", "orterun", "prterun", "prun"}

#: Launcher options followed by one value, or by two (Hydra's -genv NAME VALUE).
ONE_VALUE = {
    "-n", "-np", "--np", "-c", "-N", "-ppn", "--ppn", "-host", "-hosts", "--host", "-H",
    "-f", "-hostfile", "--hostfile", "-machinefile", "--machinefile", "-wdir", "--wdir",
    "-genvlist", "-envlist", "-configfile", "-launcher", "-bootstrap", "-iface", "-x",
    "--map-by", "-map-by", "--bind-to", "-bind-to", "--rank-by", "-rank-by", "--prefix",
    "--npernode", "-npernode", "--report-bindings-file", "-binding", "-bind-to-core",
    "--personality", "--output", "--display", "--runtime-options", "-s", "--stdin",
    "--timeout", "-tune", "-perhost", "-rr",
}
TWO_VALUES = {"-genv", "-env", "--mca", "-mca", "--gmca", "-gmca", "--prtemca", "--pmixmca"}
RANK_COUNT = {"-n", "-np", "--np", "-c"}
#: libvhpc_wait's knobs (docs/runtime.md) that `vhpc run` forwards to the ranks when set.
KNOBS = ("VHPC_COLLECTIVES", "VHPC_STATS", "VHPC_VERBOSE", "VHPC_SPIN_US", "VHPC_SPIN_MIN_US",
         "VHPC_SLEEP_MIN_US", "VHPC_SLEEP_MAX_US", "VHPC_SAMPLE_MS", "VHPC_MPI_YIELD",
         "VHPC_TIMERSLACK_NS", "VHPC_DOORBELL")
#: Where a job's doorbell file goes (tmpfs: the ranks map it, nothing reaches a disk).
SHM = "/dev/shm"

_PYTHON_RE = re.compile(r"^python[0-9.]*$")
_LIBMPI_RE = re.compile(r"/lib(?:mpi|mpich|mpi_abi)\.so[.0-9]*$")

_MPI4PY_PROBE = r"""
import json, re, sys
try:
    import mpi4py
except ImportError:
    print(json.dumps({"error": "no mpi4py"})); sys.exit(0)
mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI
libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
               if re.search(r"/lib(mpi|mpich|mpi_abi)\.so[.0-9]*$", l.strip())})
print(json.dumps({"raw": MPI.Get_library_version(), "libs": libs, "mpi4py": mpi4py.__file__}))
"""


class RunError(library.Error):
    """`vhpc run` cannot run the command as asked (exit code 2)."""

    exit_code = 2


@dataclass
class Program:
    argv0: str
    path: str | None = None
    python: bool = False
    libs: list[str] = field(default_factory=list)  #: libmpi files it loads
    how: str = ""  #: where that was read


@dataclass
class Plan:
    argv: list[str]
    launcher_env: dict[str, str]  #: added to the launcher's own environment
    rank_env: dict[str, str]  #: reaches every rank
    mpi: disc.Installation
    lib: Path
    line: str  #: the one line saying what was chosen and why
    #: The job's doorbell file (runtime/doorbell.c): its ranks remove it once all have
    #: mapped it; whoever runs argv removes it too, for a job that dies before.
    doorbell: Path | None = None

    def remove_doorbell(self) -> None:
        if self.doorbell is not None:
            self.doorbell.unlink(missing_ok=True)

    def shell(self) -> str:
        """The command as one shell line, the launcher's added environment first."""
        env = [f"{k}={v}" for k, v in self.launcher_env.items()]
        return shlex.join(["env", *env, *self.argv] if env else self.argv)


def _program_index(args: list[str]) -> int | None:
    """Index in `args` (after the launcher) of the program, skipping launcher options."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1 if i + 1 < len(args) else None
        if a.startswith("-"):
            if "=" in a:
                i += 1
            elif a in TWO_VALUES:
                i += 3
            elif a in ONE_VALUE:
                i += 2
            else:
                i += 1
            continue
        if a == ":":  # MPMD separator before any program: skip
            i += 1
            continue
        return i
    return None


def _ranks(args: list[str]) -> int | None:
    total, i = 0, 0
    while i < len(args):
        a = args[i]
        if a in RANK_COUNT and i + 1 < len(args) and args[i + 1].isdigit():
            total += int(args[i + 1])
            i += 2
            continue
        m = re.match(r"^(?:-n|-np|--np)=(\d+)$", a)
        if m:
            total += int(m.group(1))
        i += 1
    return total or None


def _elf_libmpi(path: str) -> list[str]:
    """The libmpi files an executable loads, by ldd (its DT_NEEDED, resolved)."""
    return [lib for name, lib in disc.needed_libs(path) if _LIBMPI_RE.search("/" + name)]


def _program(args: list[str], environ: dict[str, str]) -> Program | None:
    at = _program_index(args)
    if at is None:
        return None
    argv0 = args[at]
    if _PYTHON_RE.match(Path(argv0).name):
        exe = shutil.which(argv0, path=environ.get("PATH")) or argv0
        prog = Program(argv0, exe, python=True)
        env = {k: v for k, v in environ.items() if k != "LD_PRELOAD"}
        try:
            out = subprocess.run([exe, "-c", _MPI4PY_PROBE], capture_output=True, text=True,
                                 timeout=60, env=env).stdout
            got = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
            got = {"error": "the interpreter did not answer"}
        if "error" in got:
            prog.how = f"{argv0}: {got['error']}"
        else:
            prog.libs = got["libs"]
            prog.how = f"{argv0}'s mpi4py loads {', '.join(got['libs']) or '?'}"
        return prog
    exe = argv0 if "/" in argv0 else shutil.which(argv0, path=environ.get("PATH"))
    prog = Program(argv0, exe)
    if exe and Path(exe).is_file():
        prog.libs = _elf_libmpi(exe)
        if prog.libs:
            prog.how = f"{argv0} links {', '.join(prog.libs)}"
    return prog


def _launcher(cmd: str, insts: list[disc.Installation],
              environ: dict[str, str]) -> tuple[str | None, disc.Installation | None, str]:
    """(family 'hydra'/'openmpi' or None, installation if known, resolved path)."""
    found = cmd if "/" in cmd else shutil.which(cmd, path=environ.get("PATH"))
    if not found:
        raise RunError(f"launcher '{cmd}' not found")
    real = Path(found).resolve()
    prefix = Path(os.path.abspath(found)).parent.parent.resolve()
    for inst in insts:
        if inst.source != "debian" and inst.family != "abi" and inst.prefix == prefix:
            return inst.launcher_family, inst, found
    names = {Path(found).name, real.name}
    debian = {i.key: i for i in insts if i.source == "debian"}
    if names & HYDRA_NAMES:
        return "hydra", debian.get("mpich") if str(real).startswith("/usr/") else None, found
    if names & OPENMPI_NAMES:
        return "openmpi", debian.get("openmpi") if str(real).startswith("/usr/") else None, found
    return None, None, found


def own_wait(family: str, policy: str, nranks: int | None, ncpus: int,
             environ: dict[str, str]) -> dict[str, str]:
    """The MPI's own wait setting that adaptive leaves shared-CPU waits to, for the ranks.
    Intel MPI's wait mode has an idle rank wait for the operating system instead of
    polling, collectives included, which beats any loop around its calls on a shared
    CPU (docs/runtime.md); it is read at MPI_Init, so it is set at launch, when ranks
    exceed CPUs (unless the user set it, or VHPC_MPI_YIELD=0 keeps the waits the
    library's)."""
    if (policy == "adaptive" and family == "impi" and nranks and nranks > ncpus
            and "I_MPI_WAIT_MODE" not in environ and environ.get("VHPC_MPI_YIELD") != "0"):
        return {"I_MPI_WAIT_MODE": "1"}
    return {}


def plan(command: list[str], *, policy: str = "adaptive", prefixes: list[Path] | None = None,
         environ: dict[str, str] | None = None, cpus: int | None = None) -> Plan:
    """What `vhpc run` runs for `command` (launcher and its arguments)."""
    if not command:
        raise RunError("no command: vhpc run [--policy P] -- LAUNCHER ARGS...")
    if policy not in POLICIES:
        raise RunError(f"unknown policy '{policy}'; valid: {', '.join(POLICIES)}")
    environ = dict(os.environ if environ is None else environ)
    launcher, args = command[0], list(command[1:])
    prog = _program(args, environ)
    # Where to look: the launcher's tree and the tree of the libmpi the program loads.
    where = [Path(p) for p in prefixes or []]
    found = launcher if "/" in launcher else shutil.which(launcher, path=environ.get("PATH"))
    if found:
        where.append(Path(os.path.abspath(found)).parent.parent)
    for lib in prog.libs if prog else []:
        where.append(Path(lib).parent.parent)
    where = [p for p in dict.fromkeys(p.resolve() for p in where) if p != Path("/usr")]
    insts = disc.discover(where)
    family, l_inst, l_path = _launcher(launcher, insts, environ)

    p_inst, p_name = None, None
    if prog and prog.libs:
        for lib in prog.libs:
            p_inst = disc.owner(lib, insts)
            if p_inst:
                break
        if p_inst is None:
            got = disc.identify(prog.libs[0])
            p_name = got[0] if got else prog.libs[0]
            raise RunError(f"the program runs {p_name} ({prog.libs[0]}), an MPI vhpc has no "
                           "libvhpc_wait for (it knows MPICH, Open MPI, Intel MPI and the MPI "
                           "standard ABI)")
    if family is None:
        raise RunError(
            f"'{launcher}' ({l_path}) is not an MPI launcher vhpc knows: name one of "
            f"{', '.join(sorted(HYDRA_NAMES | OPENMPI_NAMES))}, or an MPI's bin/mpiexec"
            + (f" (the program runs {p_inst.identity})" if p_inst else ""))
    inst = p_inst or l_inst
    if inst is None:
        raise RunError(
            f"cannot tell which MPI runs: the launcher {l_path} belongs to no MPI found "
            f"({', '.join(i.key for i in insts) or 'none'}) and "
            + (f"{prog.how or prog.argv0 + ' links no libmpi'}" if prog else "no program was found"))
    if p_inst is not None and (p_inst.launcher_family != family):
        raise RunError(
            f"the program runs {p_inst.identity} ({p_inst.prefix}) but {l_path} is "
            f"{'Open MPI' if family == 'openmpi' else 'Hydra (MPICH, Intel MPI)'}'s launcher: "
            "start it with its own MPI's launcher")
    lib = library.lib_path(inst.key)
    build_hint = (f"vhpc runtime build --mpi {inst.key}"
                  + ("" if inst.source == "debian" else f" --mpi-prefix {inst.prefix}"))
    if not lib.is_file():
        raise library.NotBuilt(
            f"libvhpc_wait for {inst.identity} ({inst.key}, {inst.prefix}) is not built; "
            f"run `{build_hint}`")
    made_for = library.built_for(lib)
    if made_for is not None and made_for != inst.identity:
        raise RunError(f"{lib} was built for {made_for}, the program runs {inst.identity} "
                       f"({inst.prefix}); rebuild: `{build_hint}`")

    preload = str(lib.resolve())
    python_ompi = bool(prog and prog.python and inst.family == "openmpi" and prog.libs)
    if python_ompi:
        # Open MPI opened by mpi4py after start-up is not intercepted (route.c):
        # preload it too, after the library (whose symbols must come first), so
        # that it is there when the library is loaded.
        preload = f"{preload} {prog.libs[0]}"
    if environ.get("LD_PRELOAD"):
        preload = f"{preload} {environ['LD_PRELOAD']}"
    rank_env = {"LD_PRELOAD": preload, "VHPC_WAIT": policy}
    # The library's other knobs, where set: Open MPI forwards no environment unasked.
    rank_env.update({k: environ[k] for k in KNOBS if k in environ})
    # Under adaptive, ranks asleep in a wait can be woken by a rank whose CPU is idle
    # (runtime/doorbell.c): one file per job, the ranks of a node share it.
    doorbell = None
    if policy == "adaptive" and "VHPC_DOORBELL" not in environ and os.path.isdir(SHM):
        doorbell = Path(SHM) / f"vhpc-bell-{secrets.token_hex(8)}"
        rank_env["VHPC_DOORBELL"] = str(doorbell)
    ncpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    nranks = _ranks(args)
    omp = openmp.decide(prog.path if prog and not prog.python else None, nranks, environ, ncpus)
    rank_env.update(omp.env)
    own = own_wait(inst.family, policy, nranks, ncpus, environ)
    rank_env.update(own)

    extra = mpi.forward_env(family, rank_env)
    forward = extra[0] if extra else ""
    over = ""
    launcher_env: dict[str, str] = {}
    if family == "openmpi":
        if nranks and nranks > ncpus:
            given = any("OVERSUBSCRIBE" in a.upper() for a in args)
            major = int(re.sub(r"\D.*", "", inst.identity.split()[-1]) or 0) \
                if inst.family == "openmpi" else 5
            if given:
                over = f"; {nranks} ranks on {ncpus} CPUs: oversubscription asked for already"
            elif major >= 5 and not any(a in ("--map-by", "-map-by") or a.startswith("--map-by=")
                                        for a in args):
                extra += ["--map-by", ":OVERSUBSCRIBE"]
                over = f"; {nranks} ranks on {ncpus} CPUs: --map-by :OVERSUBSCRIBE"
            else:
                extra += ["--oversubscribe"]
                over = f"; {nranks} ranks on {ncpus} CPUs: --oversubscribe"
        if os.geteuid() == 0:
            for k in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
                if k not in environ:
                    launcher_env[k] = "1"
    elif nranks and nranks > ncpus:
        over = f"; {nranks} ranks on {ncpus} CPUs: Hydra oversubscribes by itself" + (
            ", Intel MPI waits in its own wait mode (I_MPI_WAIT_MODE=1)" if own else "")

    why = []
    if prog and prog.how:
        why.append(prog.how)
    if l_inst is not None and l_inst is not inst and l_inst.key != inst.key:
        why.append(f"launcher {l_path} is {l_inst.identity}'s")
    else:
        why.append(f"launcher {l_path}")
    line = (f"vhpc run: {inst.identity} ({inst.key}; {'; '.join(why)}) -> "
            f"LD_PRELOAD={preload} VHPC_WAIT={policy}"
            + "".join(f" {k}={v}" for k, v in rank_env.items() if k in KNOBS)
            + f" via {forward}{over}{omp.line}"
            + (", as root: OMPI_ALLOW_RUN_AS_ROOT=1" if launcher_env else ""))
    return Plan(argv=[launcher, *extra, *args], launcher_env=launcher_env, rank_env=rank_env,
                mpi=inst, lib=lib, line=line, doorbell=doorbell)


def run(command: list[str], *, policy: str = "adaptive", dry_run: bool = False,
        prefixes: list[Path] | None = None, echo=print) -> int:
    """Plan and run (or with `dry_run` only show) the command; returns its exit code."""
    import sys

    p = plan(command, policy=policy, prefixes=prefixes)
    print(p.line, file=sys.stderr, flush=True)
    if dry_run:
        echo(p.shell())
        return 0
    env = {**os.environ, **p.launcher_env}
    sys.stdout.flush()
    try:
        return subprocess.call(p.argv, env=env)
    except KeyboardInterrupt:
        return 130
    finally:
        p.remove_doorbell()
