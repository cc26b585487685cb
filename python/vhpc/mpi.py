"""The MPI libraries installed here and how to launch programs with each.

Debian's alternatives point the generic `mpicc`/`mpiexec` at whichever MPI was
installed last, so every tool here names them explicitly (`mpicc.mpich`,
`mpiexec.openmpi`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class MpiNotFound(RuntimeError):
    """The requested MPI is not installed (its compiler wrapper is missing)."""


@dataclass(frozen=True)
class MpiImpl:
    name: str
    package_hint: str

    @property
    def mpicc(self) -> str:
        return f"mpicc.{self.name}"

    @property
    def mpif90(self) -> str:
        return f"mpif90.{self.name}"

    @property
    def mpiexec(self) -> str:
        return f"mpiexec.{self.name}"

    @property
    def family(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        """For tables: the version and where it comes from ("MPICH 4.0.2 (Debian)")."""
        return f"{self.version} (Debian)"

    def available(self) -> bool:
        return all(shutil.which(tool) for tool in (self.mpicc, self.mpiexec))

    def has_fortran(self) -> bool:
        return shutil.which(self.mpif90) is not None and shutil.which("gfortran") is not None

    @functools.cached_property
    def version(self) -> str:
        """Version string of the library, e.g. 'MPICH 4.0.2' or 'Open MPI 4.1.4'."""
        if self.name == "mpich":
            out = _run_text(["mpichversion"])
            m = re.search(r"MPICH Version:\s*(\S+)", out)
            return f"MPICH {m.group(1)}" if m else "MPICH unknown"
        out = _run_text([self.mpiexec, "--version"])
        m = re.search(r"\(Open(?:RTE| MPI)\)\s*([\d.]+)", out)
        return f"Open MPI {m.group(1)}" if m else "Open MPI unknown"

    def launch(
        self,
        n: int,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        preload: Path | str | None = None,
    ) -> list[str]:
        """Command line starting `n` ranks of `argv`.

        Placement is always left to whoever starts the command (taskset, cgroups):
        Open MPI would otherwise bind each rank to a core of its choosing.
        `env` and `preload` reach the ranks only, never the launcher itself.
        """
        rank_env = dict(env or {})
        if preload is not None:
            rank_env["LD_PRELOAD"] = str(preload)
        cmd = [self.mpiexec, "-n", str(n)]
        if self.name == "openmpi":
            cmd += ["--bind-to", "none", "--oversubscribe"]
        return cmd + forward_env(self.name, rank_env) + [str(a) for a in argv]

    def launcher_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for the launcher process (Open MPI refuses root without these)."""
        env = dict(os.environ if base is None else base)
        if self.name == "openmpi":
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            # No network fabrics here; keep Open MPI from probing and warning about them.
            env.setdefault("OMPI_MCA_btl", "self,vader")
            env.setdefault("OMPI_MCA_pml", "ob1")
        return env

    @functools.cached_property
    def device(self) -> str:
        """MPICH's device ("ch4:ucx" here), "" for Open MPI."""
        if self.name != "mpich":
            return ""
        m = re.search(r"MPICH Device:\s*(\S+)", _run_text(["mpichversion"]))
        return m.group(1) if m else "unknown"

    def channel_env(self, channel: str, device: str) -> tuple[dict[str, str] | None, str]:
        """Environment (for the launcher, which passes it to the ranks) making this MPI
        talk between ranks only over TCP on interface `device` (`channel` "net") or
        only through shared memory ("shm"); None and why when vhpc cannot force it."""
        if self.name == "mpich" and "ucx" not in self.device:
            return None, (f"MPICH device {self.device}: vhpc knows how to choose its "
                          "transports only with ch4:ucx")
        if channel not in CHANNEL_ENV:
            raise ValueError(f"channel {channel!r}: one of {', '.join(CHANNEL_ENV)}")
        env = dict(CHANNEL_ENV[channel][self.name])
        return {k: v.format(device=device) for k, v in env.items()}, ""

    def rank_env_names(self) -> tuple[str, str]:
        """Environment variables holding (world rank, local rank) inside a rank."""
        if self.name == "mpich":
            return ("PMI_RANK", "MPI_LOCALRANKID")
        return ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")


def forward_env(launcher: str, env: dict[str, str]) -> list[str]:
    """Launcher options passing `env` to every rank: Open MPI's (`launcher` "openmpi")
    `-x NAME=VALUE`, Hydra's (MPICH, Intel MPI) `-genv NAME VALUE`."""
    if launcher == "openmpi":
        return [opt for key, value in env.items() for opt in ("-x", f"{key}={value}")]
    return [opt for key, value in env.items() for opt in ("-genv", key, value)]


#: Transports between ranks, per channel and MPI. MPICH over UCX: `UCX_TLS` (tcp
#: with its interface list, or `sm`: sysv/posix shared memory and CMA copies);
#: Open MPI 4.1: the ob1 PML's BTLs (`tcp` on the named interface, or `vader`).
CHANNEL_ENV = {
    "net": {"mpich": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "{device}"},
            "openmpi": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "tcp,self",
                        "OMPI_MCA_btl_tcp_if_include": "{device}"}},
    "shm": {"mpich": {"UCX_TLS": "sm,self"},
            "openmpi": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "vader,self"}},
}

MPIS: dict[str, MpiImpl] = {
    "mpich": MpiImpl("mpich", "mpich libmpich-dev"),
    "openmpi": MpiImpl("openmpi", "openmpi-bin libopenmpi-dev"),
}


def find(name: str) -> MpiImpl:
    """The named MPI, or MpiNotFound with a message saying what to install."""
    if name not in MPIS:
        raise MpiNotFound(f"unknown MPI '{name}'; choose one of: {', '.join(MPIS)}")
    impl = MPIS[name]
    if not impl.available():
        raise MpiNotFound(
            f"MPI '{name}' is not installed ({impl.mpicc} not found); "
            f"install the Debian packages: {impl.package_hint}"
        )
    return impl


def available() -> list[MpiImpl]:
    return [impl for impl in MPIS.values() if impl.available()]


def _run_text(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
