"""One run of a lab cell under the kernel's `sched_switch` tracepoint, told as
CPU time by kind of task: the ranks' main threads, the MPI's helper threads in
the ranks' processes, the lab slicer's watchers and driver, idle, and the rest.

It answers what a median cannot: where a time-sliced message's microseconds go
(docs/validation.md uses it for the misses of `vhpc lab predict`). Needs tracefs
(mounted here if it is not, as root) and owns the tracing instance it creates,
so whatever else traces on the machine is left alone.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from vhpc.lab import runner
from vhpc.lab.experiment import Cell, Workload

TRACEFS = Path("/sys/kernel/tracing")
INSTANCE = "vhpc-lab-trace"
BUFFER_KB = 65536  # per CPU: a second of switches every few µs fits
#: What the slicer's native threads call themselves (crates/vhpc-slicer/src/driver.rs).
WATCHER, DRIVER = "vhpc-watch", "vhpc-slicer"
KINDS = ("rank main", "rank helper", "slicer watcher", "slicer driver", "idle", "other")

# `comm-pid (tgid) [cpu] flags timestamp: sched_switch: prev_comm=... prev_pid=... ==> next_...`
LINE = re.compile(
    r"^\s*.+?-(?P<pid>\d+)\s+\(\s*(?P<tgid>[\d-]+)\)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
    r"(?P<ts>[\d.]+): sched_switch: prev_comm=(?P<prev>.*?) prev_pid=(?P<prev_pid>\d+) .*?"
    r"==> next_comm=(?P<next>.*?) next_pid=(?P<next_pid>\d+)")


class TraceUnavailable(RuntimeError):
    """tracefs cannot be used here; the message says why and what to do."""


@dataclass(frozen=True)
class Segment:
    """A task on a CPU from `start` to `end` (ns of the trace clock)."""

    cpu: int
    start: int
    end: int
    pid: int
    comm: str


@dataclass
class CpuTime:
    """Per CPU and kind: ns on the CPU and how many times it got the CPU."""

    ns: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    runs: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    window_ns: int = 0


def tracefs() -> Path:
    """The tracefs mount, mounting it (as root) where it is missing."""
    if (TRACEFS / "instances").is_dir():
        return TRACEFS
    if os.geteuid() != 0:
        raise TraceUnavailable(f"tracefs is not mounted at {TRACEFS} and mounting it needs root "
                               f"(mount -t tracefs nodev {TRACEFS})")
    done = subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not (TRACEFS / "instances").is_dir():
        raise TraceUnavailable(f"cannot mount tracefs at {TRACEFS}: "
                               f"{done.stderr.strip() or 'no instances directory'}")
    return TRACEFS


@contextmanager
def recording() -> Iterator[list[str]]:
    """Traces `sched_switch` (with thread group ids) on every CPU while the block
    runs; the list it yields holds the trace's lines afterwards."""
    base = tracefs()
    inst = base / "instances" / INSTANCE
    try:
        if inst.exists():  # a dead run's: start clean
            inst.rmdir()
        inst.mkdir()
    except OSError as exc:
        raise TraceUnavailable(f"cannot create the tracing instance {inst}: {exc}") from None
    lines: list[str] = []
    try:
        (inst / "buffer_size_kb").write_text(str(BUFFER_KB))
        (inst / "options" / "record-tgid").write_text("1")
        (inst / "events" / "sched" / "sched_switch" / "enable").write_text("1")
        (inst / "tracing_on").write_text("1")
        try:
            yield lines
        finally:
            (inst / "tracing_on").write_text("0")
            lines.extend((inst / "trace").read_text().splitlines())
    finally:
        inst.rmdir()


def segments(lines: Iterable[str]) -> tuple[list[Segment], dict[int, int]]:
    """Who ran on each CPU and when, from `sched_switch` lines; and the thread
    group of every task seen running (from record-tgid)."""
    out: list[Segment] = []
    tgid: dict[int, int] = {}
    last: dict[int, tuple[int, int, str]] = {}  # cpu -> (since, pid, comm)
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        cpu, ts = int(m["cpu"]), round(float(m["ts"]) * 1e9)
        if m["tgid"].strip("-"):
            tgid[int(m["pid"])] = int(m["tgid"])
        if cpu in last:
            since, pid, comm = last[cpu]
            out.append(Segment(cpu, since, ts, pid, comm))
        last[cpu] = (ts, int(m["next_pid"]), m["next"])
    return out, tgid


def kind_of(seg: Segment, tgid: dict[int, int], ranks: set[int]) -> str:
    """What the task of `seg` is: a rank's main thread or helper, the slicer's, idle."""
    if seg.pid == 0:
        return "idle"
    if tgid.get(seg.pid) in ranks:
        return "rank main" if seg.pid in ranks else "rank helper"
    if seg.comm.startswith(WATCHER):
        return "slicer watcher"
    if seg.comm == DRIVER:
        return "slicer driver"
    return "other"


def cpu_time(segs: list[Segment], tgid: dict[int, int], program: str,
             window_s: float) -> CpuTime:
    """CPU time by kind over the last `window_s` seconds the ranks ran (the
    measured part of a lab workload comes last), per CPU. The ranks are the
    processes whose main thread runs `program` (its name as the kernel keeps
    it: 15 characters)."""
    comm = Path(program).name[:15]
    ranks = {s.pid for s in segs if s.comm == comm and tgid.get(s.pid) == s.pid}
    if not ranks:
        raise TraceUnavailable(f"no process named {comm!r} ran while tracing")
    end = max(s.end for s in segs if s.pid in ranks)
    begin = end - round(window_s * 1e9)
    out = CpuTime(window_ns=end - begin)
    for s in segs:
        lo, hi = max(s.start, begin), min(s.end, end)
        if hi <= lo:
            continue
        kind = kind_of(s, tgid, ranks)
        out.ns[s.cpu][kind] = out.ns[s.cpu].get(kind, 0) + hi - lo
        if s.start >= begin:
            out.runs[s.cpu][kind] = out.runs[s.cpu].get(kind, 0) + 1
    return out


def trace_cell(cell: Cell, timeout_s: float, window_s: float
               ) -> tuple[runner.RunResult, CpuTime]:
    """One run of `cell`, traced: its result and the CPU time by kind."""
    with recording() as lines:
        result = runner.run_once(cell, timeout_s)
    if result.status != "ok":
        return result, CpuTime()
    segs, tgid = segments(lines)
    return result, cpu_time(segs, tgid, program_of(cell.workload), window_s)


def program_of(workload: Workload) -> str:
    """What a workload's ranks run: its bench program, or its command's first word."""
    return workload.program or workload.command[0]


def rows(ct: CpuTime) -> list[dict]:
    """One record per CPU and kind: ms, share of the window, times it got the CPU."""
    return [{"cpu": cpu, "kind": kind, "ms": ct.ns[cpu].get(kind, 0) / 1e6,
             "share": ct.ns[cpu].get(kind, 0) / ct.window_ns,
             "runs": ct.runs[cpu].get(kind, 0)}
            for cpu in sorted(ct.ns) for kind in KINDS if ct.ns[cpu].get(kind)]
