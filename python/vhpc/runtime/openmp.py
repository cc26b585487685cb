"""OpenMP waiting for hybrid MPI + OpenMP jobs under `vhpc run`.

OpenMP runtimes spin at barriers and at the end of parallel regions as MPIs
busy-poll (libgomp for up to 300 000 polls, LLVM's and Intel's for a 200 ms
block time), and the same way they burn the time slice of the thread they wait
for when there are more threads than CPUs or the CPU is time-shared. Each
runtime sees only its own process: libgomp throttles its spinning when *its*
threads exceed the CPUs, never when two ranks of two threads share two CPUs.
`vhpc run` sees the whole job, so it sets the standard `OMP_WAIT_POLICY` and the
program's runtime's own knob (libgomp's spin count, LLVM/Intel's block time) and
says so. Values the user set are kept.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from vhpc.runtime import discover as disc

#: OpenMP runtime libraries (by soname prefix) and the knob that bounds their spinning.
RUNTIMES = {
    "libgomp.so": ("GNU libgomp", "GOMP_SPINCOUNT", "0"),
    "libomp.so": ("LLVM libomp", "KMP_BLOCKTIME", "0"),
    "libiomp5.so": ("Intel libiomp5", "KMP_BLOCKTIME", "0"),
}
#: Steal time since boot above this share of CPU time counts as a time-shared CPU.
STEAL_SHARE = 0.05


@dataclass
class Decision:
    env: dict[str, str] = field(default_factory=dict)  #: to set in every rank
    line: str = ""  #: what was decided and why, for `vhpc run`'s line ("" when not OpenMP)


def runtime_of(exe: str | None) -> tuple[str, str, str] | None:
    """(name, knob, passive value) of the OpenMP runtime `exe` links, by ldd; None if none."""
    if not exe or not Path(exe).is_file():
        return None
    for name, _ in disc.needed_libs(exe):
        for prefix, runtime in RUNTIMES.items():
            if name.startswith(prefix):
                return runtime
    return None


def quota_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs our cgroup's CFS quota allows (cgroup v2 cpu.max or v1 cfs_quota_us), if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        rel = path.lstrip("/")
        if controllers == "":  # v2
            got = _read(root / rel / "cpu.max")
            if got and not got.startswith("max"):
                quota, period = got.split()[:2]
                return int(quota) / int(period)
        elif "cpu" in controllers.split(","):
            base = root / ("cpu,cpuacct" if (root / "cpu,cpuacct").is_dir() else "cpu") / rel
            quota, period = _read(base / "cpu.cfs_quota_us"), _read(base / "cpu.cfs_period_us")
            if quota and period and int(quota) > 0:
                return int(quota) / int(period)
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def steal_share() -> float:
    """Steal time since boot as a share of all CPU time (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0
    ticks = [int(x) for x in fields[:8]]
    return ticks[7] / sum(ticks) if len(ticks) == 8 and sum(ticks) else 0.0


def threads_per_rank(environ: dict[str, str], cpus: int) -> int:
    """OMP_NUM_THREADS' outer level, else the OpenMP default: a thread per CPU."""
    first = re.split(r"[,\s]", environ.get("OMP_NUM_THREADS", "").strip(), maxsplit=1)[0]
    return int(first) if first.isdigit() and int(first) > 0 else cpus


def decide(exe: str | None, nranks: int | None, environ: dict[str, str], cpus: int,
           *, quota: float | None = None, steal: float | None = None) -> Decision:
    """The OpenMP waiting for a job of `nranks` ranks of `exe` on `cpus` CPUs."""
    runtime = runtime_of(exe)
    if runtime is None:
        return Decision()
    name, knob, passive = runtime
    quota = quota_cpus() if quota is None else quota
    usable = min(cpus, math.ceil(quota)) if quota else cpus
    threads = (nranks or 1) * threads_per_rank(environ, cpus)
    steal = steal_share() if steal is None else steal
    if threads > usable:
        why = f"{nranks or 1} ranks × {threads // (nranks or 1)} threads on {usable} CPUs"
    elif quota and quota < cpus:
        why = f"a CPU quota of {quota:.2g} CPUs"
    elif steal >= STEAL_SHARE:
        why = f"{100 * steal:.0f} % steal time: the CPUs are time-shared"
    else:
        return Decision(line=f"; {name}: {threads} threads on {usable} CPUs, its own waiting kept")
    wanted = {"OMP_WAIT_POLICY": "PASSIVE", knob: passive}
    kept = {k: environ[k] for k in wanted if k in environ}
    env = {k: v for k, v in wanted.items() if k not in environ}
    said = " ".join(f"{k}={v}" for k, v in env.items())
    if kept:
        said += (" " if said else "") + "(kept " + " ".join(f"{k}={v}" for k, v in kept.items()) + ")"
    return Decision(env=env, line=f"; {name}, {why}: {said}")
