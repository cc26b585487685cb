"""A hypervisor-like scheduler for groups of processes: time-sliced domains.

Linux schedules every task of every cgroup itself, so two ranks in two groups on
one core still hand the CPU over with `sched_yield`. A hypervisor does not: it
runs one vCPU at a time for a slice, and a yield inside a guest never reaches it.
This controller reproduces that with the cgroup v1 freezer: only one domain is
thawed at a time, for `slice_s` (30 ms, Xen credit's slice), in turn; with
`work_conserving`, it switches early when every task of the running domain is
blocked or sleeping, as a hypervisor runs another vCPU when one halts.
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
    """Thaws one domain at a time, in turn; thaws all when stopped."""

    def __init__(self, domains: list[Path], slice_s: float = SLICE_S,
                 work_conserving: bool = True) -> None:
        super().__init__(name="vhpc-timeslice", daemon=True)
        self.domains = domains
        self.slice_s = slice_s
        self.work_conserving = work_conserving
        self.switches = 0
        self.early_switches = 0
        self._halt = threading.Event()

    def run(self) -> None:
        current = 0
        for i, domain in enumerate(self.domains):
            set_state(domain, "THAWED" if i == current else "FROZEN")
        started = time.monotonic()
        while not self._halt.wait(POLL_S):
            expired = time.monotonic() - started >= self.slice_s
            early = not expired and self.work_conserving and idle(self.domains[current])
            if expired or early:
                nxt = (current + 1) % len(self.domains)
                set_state(self.domains[current], "FROZEN")
                set_state(self.domains[nxt], "THAWED")
                current, started = nxt, time.monotonic()
                self.switches += 1
                self.early_switches += early

    def stop(self) -> None:
        self._halt.set()
        self.join()
        for domain in self.domains:
            set_state(domain, "THAWED")
