"""Building and locating libvhpc_wait, the PMPI wait-policy library in runtime/.

The library is built once per installed MPI, because an interposition library
must be compiled against the MPI it is preloaded into:
``<build>/runtime/<mpi>/libvhpc_wait.so``.

Functions here raise :class:`Error` subclasses carrying an ``exit_code``; the
command line (``vhpc runtime ...``) only displays them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console

from vhpc import mpi, paths

LIBRARY = "libvhpc_wait.so"

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


def policy_env(name: str, policy: str) -> tuple[dict[str, str], Path | None]:
    """Environment for ranks of MPI `name` waiting under `policy`, and the library to
    preload, if any: `default` is the MPI untouched, `mpi-yield` Open MPI's own
    idle-yield, anything else a VHPC_WAIT policy of libvhpc_wait."""
    if policy == "default":
        return {}, None
    if policy == "mpi-yield":
        # An MCA parameter in the ranks' environment is read by each rank's MPI_Init.
        return {"OMPI_MCA_mpi_yield_when_idle": "1"}, None
    return {"VHPC_WAIT": policy}, lib_path(name)


def _find(name: str) -> mpi.MpiImpl:
    if name not in mpi.MPIS:
        raise UnknownMpi(f"unknown MPI '{name}'; valid names: {', '.join(names())}")
    try:
        return mpi.find(name)
    except mpi.MpiNotFound as exc:
        raise MpiNotInstalled(str(exc)) from exc


def path(name: str) -> Path:
    """Absolute path of the built libvhpc_wait for MPI `name`.

    Raises UnknownMpi, MpiNotInstalled, or NotBuilt (all exit code 2).
    """
    _find(name)
    lib = lib_path(name)
    if not lib.is_file():
        raise NotBuilt(f"libvhpc_wait for {name} is not built; run `vhpc runtime build`")
    return lib.resolve()


def build(
    mpis: Iterable[str] | None = None, *, console: Console | None = None
) -> dict[str, Path]:
    """Build libvhpc_wait for each MPI in `mpis` (default: every installed one).

    Runs ``make -C <repo>/runtime MPI=<name> MPICC=... OUT=<build>/runtime/<name>``
    and returns ``{name: path of libvhpc_wait.so}``. Progress is shown on
    `console` if given. Raises MpiNotInstalled if no MPI is installed (or a
    named one is not), BuildFailed with make's output if a build fails.
    """
    if mpis is None:
        impls = mpi.available()
        if not impls:
            raise MpiNotInstalled(
                f"no MPI found (looked for {', '.join(f'mpicc.{n}' for n in names())}); "
                + INSTALL_HINT
            )
    else:
        impls = [_find(name) for name in dict.fromkeys(mpis)]

    built: dict[str, Path] = {}
    for impl in impls:
        if console is not None:
            with console.status(f"Building libvhpc_wait for {impl.name}…"):
                built[impl.name] = _build_one(impl)
            console.print(f"[green]✓[/] libvhpc_wait for {impl.name}: {built[impl.name]}")
        else:
            built[impl.name] = _build_one(impl)
    return built


def _build_one(impl: mpi.MpiImpl) -> Path:
    out = lib_path(impl.name).parent
    cmd = [
        "make",
        "-C",
        str(paths.REPO / "runtime"),
        f"MPI={impl.name}",
        f"MPICC={impl.mpicc}",
        f"OUT={out}",
    ]
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
            f"building libvhpc_wait for {impl.name} failed "
            f"(make exited with status {proc.returncode}): {' '.join(cmd)}",
            output=proc.stdout,
        )
    lib = out / LIBRARY
    if not lib.is_file():
        raise BuildFailed(
            f"make succeeded but did not produce {lib}: {' '.join(cmd)}", output=proc.stdout
        )
    return lib.resolve()
