"""How busy this machine is: the load average a benchmark refuses to start above,
and the hypervisor's steal time read from /proc/stat (this host is itself a guest)."""

from __future__ import annotations

from pathlib import Path

BUSY_LOAD = 0.5  # 1-minute load average above which the machine is not quiet


def cpu_times() -> list[int]:
    """The aggregate `cpu` line of /proc/stat (user nice system idle iowait irq softirq steal ...)."""
    try:
        return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return []


def steal_percent(before: list[int], after: list[int]) -> float:
    """Share of CPU time the hypervisor gave to others between two cpu_times()."""
    if len(before) < 8 or len(after) < 8:
        return float("nan")
    total = sum(after[:8]) - sum(before[:8])
    return 100 * (after[7] - before[7]) / total if total > 0 else 0.0
