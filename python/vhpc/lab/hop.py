"""The host state a cross-CPU message depends on: how long a cache line takes to
travel between the two CPUs the lab uses (bench/hop_probe).

On this kind of machine (a 2-vCPU guest) the host places the two vCPUs on one
core complex or on two and moves them: the hop is tens of ns or hundreds, and
with it every cross-CPU message (an 8-byte MPI ping-pong 0.17 or 0.65 µs here).
Nothing inside the guest can choose; it can only look. So `vhpc calibrate`
probes the hop before and after every probe and, when the calibration saw both
states, keeps the MPIs' figures per state (`measured.states`), and `vhpc lab run`
probes it before and after every run (the metrics `host_hop_ns`,
`host_hop_after_ns`), so that `vhpc lab predict` compares each run with the
prediction for the state it ran in. A probe or run whose state changed while it
ran belongs to neither state and is left out of both.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

from vhpc.lab import probes

#: The run metric: the hop just before the run, ns one way.
METRIC = "host_hop_ns"
#: The hop just after the run: a run whose state changed while it ran is neither
#: state's (its figures fall between the two).
METRIC_AFTER = "host_hop_after_ns"
#: Batches of the probe (16 round trips each): 2-10 ms in either state.
BATCHES = 2000
#: Two groups of hops are two host states when their medians differ this much: a
#: cache line within one core complex against one crossing the host's fabric
#: (30 against 150 ns here); run-to-run noise within one state is a few ns.
STATE_RATIO = 2.0
#: A state holds at least this share of the probes (and two): a few probes that
#: the kernel or the host stalled are not a state.
MIN_STATE_SHARE = 0.1
#: The states' names, lower hop first.
NAMES = ("near", "far")
#: A run's state when the profile saw one state and the run's hop is STATE_RATIO
#: away from it: a state the profile cannot speak for.
OTHER = "other"
#: A run or probe whose host state changed while it ran (before and after differ).
CHANGED = "changed"


def cpus() -> tuple[int, int] | None:
    """The two lowest CPUs this process may use, or None with only one."""
    allowed = sorted(os.sched_getaffinity(0))
    return (allowed[0], allowed[1]) if len(allowed) >= 2 else None


def measure(timeout: float = 10.0) -> float | None:
    """The median one-way hop between the two CPUs, ns; None with only one CPU."""
    pair = cpus()
    if pair is None:
        return None
    out = probes.run([str(probes.bench_binary("hop_probe")), "-c", f"{pair[0]},{pair[1]}",
                      "-b", str(BATCHES)], timeout=timeout)
    rows = [line.split(",") for line in out.strip().splitlines()]
    try:
        header, values = rows[0], rows[1]
        return float(values[header.index("median_ns")])
    except (IndexError, ValueError) as exc:
        raise probes.ProbeFailed(f"hop_probe: bad output {out[:200]!r}") from exc


def now() -> float | None:
    """`measure()`, or None when the probe failed: a run or probe goes on without
    its state (`vhpc lab predict` then compares it with every state's prediction)."""
    try:
        return measure()
    except probes.ProbeFailed:
        return None


def threshold(hops: Sequence[float]) -> float | None:
    """The hop that separates two host states in `hops`, or None for one state.

    Otsu's split of the log hops (the cut that leaves the least variance within
    the two groups); two states when each group holds at least two hops and
    MIN_STATE_SHARE of them, and their medians differ by STATE_RATIO. The threshold is the geometric mean of the
    groups' facing ends."""
    logs = sorted(math.log(h) for h in hops if h > 0)
    best: tuple[float, int] | None = None
    for i in range(2, len(logs) - 1):
        low, high = logs[:i], logs[i:]
        within = _ss(low) + _ss(high)
        if best is None or within < best[0]:
            best = (within, i)
    if best is None:
        return None
    low, high = logs[:best[1]], logs[best[1]:]
    if min(len(low), len(high)) < MIN_STATE_SHARE * len(logs):
        return None
    if math.exp(_median(high) - _median(low)) < STATE_RATIO:
        return None
    return math.exp((low[-1] + high[0]) / 2)


def state(hop: float | None, cut: float | None) -> str | None:
    """The state's name for a hop, given the profile's threshold; None when either is unknown."""
    if hop is None or cut is None or math.isnan(hop):
        return None
    return NAMES[int(float(hop) > cut)]


def across(before: float | None, after: float | None,
           states: Callable[[float | None], str | None]) -> str | None:
    """A run's state from its hops just before and just after it (`states` names a
    hop's state): CHANGED when the two name different states; with one hop
    unknown, the other's."""
    if before is None or (isinstance(before, float) and math.isnan(before)):
        return states(after)
    if after is None or (isinstance(after, float) and math.isnan(after)):
        return states(before)
    return states(before) if states(before) == states(after) else CHANGED


def unlike(hop: float | None, seen: float) -> bool:
    """Whether a hop is another state than `seen` (STATE_RATIO apart)."""
    if hop is None or math.isnan(hop) or hop <= 0 or seen <= 0:
        return False
    return max(hop, seen) / min(hop, seen) >= STATE_RATIO


def _ss(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values)


def _median(values: Sequence[float]) -> float:
    n = len(values)
    return (values[n // 2] + values[(n - 1) // 2]) / 2
