"""A hypervisor-like scheduler for groups of processes: time-sliced domains.

Linux schedules every task of every cgroup itself, so two ranks in two groups on
one core still hand the CPU over with `sched_yield`. A hypervisor does not: it
runs one vCPU at a time for a slice, and a yield inside a guest never reaches it.
This controller reproduces that with the cgroup v1 freezer: only one domain is
thawed at a time, for `slice_s` (30 ms, Xen credit's slice), in turn; with
`work_conserving`, it switches early when every task of the running domain is
blocked or sleeping, as a hypervisor runs another vCPU when one halts.

With `weights`, domains get slices in proportion to their weights instead of in
turn, as Xen's credit scheduler shares a CPU by domain weight: the next slice
goes to the domain furthest behind its weighted share (stride scheduling, ties
to the earlier domain), which is deterministic. A domain that spans several CPUs
is thawed on all of them at once: the freezer stops and resumes a whole group,
so time slicing here is always gang scheduling.

The slicing itself is native (crates/vhpc-slicer, through `vhpc._core.Slicer`):
one driver thread, SCHED_FIFO when permitted, keeps the time for every Slicer
of the process. An idle domain is noticed by one SCHED_IDLE watcher thread per
CPU, which runs only when its CPU has nothing else to run, i.e. when the running
domain's tasks there have blocked (as a hypervisor gets the CPU back when a vCPU
halts), and switches at once (raised to SCHED_FIFO for the switch); the driver
itself looks every `POLL_S` (0.5 ms) in case a watcher cannot run. Both read the
tasks' /proc/<tid>/stat through handles kept open. `make bench-slicer` measures
the switch latency (docs/slicer-bench.md).

With `hints` (a HintSpec), the Slicer also reads the ranks' states in the hint
channel's file (vhpc.host.hints, runtime/hints.c): when every rank of the running
domain waits it switches at once, and ranks that wait in libvhpc_wait's loop are
parked there instead of frozen; the last rank to wait may make that switch itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vhpc import _core

SLICE_S = 0.030


@dataclass(frozen=True)
class HintSpec:
    """What one Slicer reads in a hint file (vhpc.host.hints): its queue index, and
    per domain it slices its member index in the file, its ranks' (page, slot)s
    and its domain page. `handover`: ranks may switch to a parked domain
    themselves; `cosched`: co-schedule a domain's vCPUs in its collectives.
    `cpus`: each member's CPUs (empty: not known); a member whose CPUs no other
    member uses has its parked ranks poll for their turn before they sleep (an
    idle CPU's halt polling: runtime/hints.c, vw_hint_gate)."""

    file: Path
    queue: int
    members: tuple[int, ...]
    slots: tuple[tuple[tuple[int, int], ...], ...]
    domains: tuple[int, ...]
    handover: bool = True
    cosched: bool = False
    cpus: tuple[tuple[int, ...], ...] = ()
POLL_S: float = _core.SLICER_POLL_S  # the driver's own look at the running domain (fallback)


class Slicer:
    """Thaws one domain at a time, in turn or by weight; thaws all when stopped.

    Several Slicers may run at once (one per set of CPUs, or per vCPU): they
    share one native thread. `phase_s` makes the first slice that much shorter:
    the per-CPU slicers of the per-vCPU mode are staggered with it. With `log`, every switch is timed (`switch_log()`,
    for the benchmark). `stop()` raises RuntimeError if the slicer had
    stopped on its own (a group could not be written); every domain is thawed
    either way.
    """

    def __init__(self, domains: list[Path], slice_s: float = SLICE_S,
                 work_conserving: bool = True, weights: list[int] | None = None,
                 log: bool = False, phase_s: float = 0.0,
                 hints: HintSpec | None = None) -> None:
        if weights is not None and (len(weights) != len(domains) or min(weights) <= 0):
            raise ValueError(f"need one positive weight per domain, got {weights}")
        self.domains = domains
        self.slice_s = slice_s
        self.work_conserving = work_conserving
        self.weights = weights
        self.hints = hints
        extra = {} if hints is None else {
            "hint_file": str(hints.file), "hint_queue": hints.queue,
            "hint_members": list(hints.members), "hint_slots": [list(s) for s in hints.slots],
            "hint_domains": list(hints.domains), "hint_handover": hints.handover,
            "hint_cosched": hints.cosched, "hint_cpus": [list(c) for c in hints.cpus]}
        self._native = _core.Slicer([str(d) for d in domains], slice_s, work_conserving,
                                    weights, log=log, phase_s=phase_s, **extra)

    @property
    def slices(self) -> list[int]:
        """Slices granted to each domain so far."""
        return self._native.slices

    @property
    def switches(self) -> int:
        return self._native.switches

    @property
    def early_switches(self) -> int:
        """Switches before the slice ended, the running domain being idle."""
        return self._native.early_switches

    @property
    def hinted_switches(self) -> int:
        """Early switches the hint channel asked the slicer for."""
        return self._native.hinted_switches

    @property
    def handovers(self) -> int:
        """Switches the ranks made themselves (to a parked domain)."""
        return self._native.handovers

    @property
    def pulls(self) -> int:
        """Co-scheduling: vCPUs brought in for a sibling's collective."""
        return self._native.pulls

    @property
    def native_id(self) -> int | None:
        """The id of the thread doing the slicing (shared), while it runs."""
        return _core.slicer_thread()[0]

    def switch_log(self) -> list[tuple[int, int]]:
        """With `log`: each switch as (decided, thawed) CLOCK_MONOTONIC ns: when the
        slicer knew it had to switch, and when the next domain was thawed."""
        return self._native.switch_log()

    def start(self) -> None:
        self._native.start()

    def stop(self) -> None:
        self._native.stop()


def describe() -> str:
    """How the native slicer's driver thread is scheduled and how often it polls."""
    return (f"driver {_core.slicer_thread()[1]}, polling every {POLL_S * 1e6:g} µs as a "
            "fallback; SCHED_IDLE watchers, one per CPU, that switch at SCHED_FIFO")
