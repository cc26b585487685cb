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
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

SLICE_S = 0.030
POLL_S = 0.0002  # how often the running domain is looked at: the switch latency


def set_state(domain: Path, state: str) -> None:
    (domain / "freezer.state").write_text(state)


def tasks(domain: Path) -> list[int]:
    try:
        return [int(t) for t in (domain / "tasks").read_text().split()]
    except FileNotFoundError:
        return []


def runnable(tid: int) -> bool:
    """Whether a task is running or waiting to run (state R in /proc)."""
    try:
        stat = Path(f"/proc/{tid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "R"


def idle(domain: Path) -> bool:
    """No task of the domain wants a CPU (every one blocked or sleeping, or none yet)."""
    return not any(runnable(tid) for tid in tasks(domain))


class Slicer(threading.Thread):
    """Thaws one domain at a time, in turn or by weight; thaws all when stopped."""

    def __init__(self, domains: list[Path], slice_s: float = SLICE_S,
                 work_conserving: bool = True, weights: list[int] | None = None) -> None:
        super().__init__(name="vhpc-timeslice", daemon=True)
        if weights is not None and (len(weights) != len(domains) or min(weights) <= 0):
            raise ValueError(f"need one positive weight per domain, got {weights}")
        self.domains = domains
        self.slice_s = slice_s
        self.work_conserving = work_conserving
        self.weights = weights
        self.slices = [0] * len(domains)  # slices granted to each domain so far
        self.switches = 0
        self.early_switches = 0
        self._halt = threading.Event()

    def next_domain(self, current: int) -> int:
        """Who gets the next slice: the following domain, or the one furthest
        behind its weighted share."""
        if self.weights is None:
            return (current + 1) % len(self.domains)
        return min(range(len(self.domains)),
                   key=lambda i: ((self.slices[i] + 1) / self.weights[i], i))

    def run(self) -> None:
        current = self.next_domain(-1)
        for i, domain in enumerate(self.domains):
            set_state(domain, "THAWED" if i == current else "FROZEN")
        self.slices[current] += 1
        started = time.monotonic()
        while not self._halt.wait(POLL_S):
            expired = time.monotonic() - started >= self.slice_s
            early = not expired and self.work_conserving and idle(self.domains[current])
            if expired or early:
                nxt = self.next_domain(current)
                if nxt != current:
                    set_state(self.domains[current], "FROZEN")
                    set_state(self.domains[nxt], "THAWED")
                    self.switches += 1
                    self.early_switches += early
                self.slices[nxt] += 1
                current, started = nxt, time.monotonic()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        for domain in self.domains:
            set_state(domain, "THAWED")
