"""The slicer's switch latency: `make bench-slicer` (docs/slicer-bench.md).

A domain switch is the time the CPU runs no domain while the slicer hands it
from one domain to the next. bench/slicer_probe runs one process in each of two
freezer groups, both pinned to one CPU, under a `timeslice.Slicer`, and
timestamps with CLOCK_MONOTONIC what they see; two paths are measured:

* **block** (work-conserving, 30 ms slices): each process runs 3 ms, then
  sleeps 2 ms. The latency of a switch is from the last clock read before
  the running domain's only task blocks to the first clock read of the other
  domain's task after its sleep returns (it had been ready, frozen, for about
  1 ms). It holds the slicer noticing the idle domain, freezing it, thawing
  the other and the kernel running the thawed task. A slicer slower than the
  2 ms sleep misses the switch (the sleeper runs again first): such a switch
  counts as longer than 2 ms (`missed`), so percentiles are not flattered.
* **hint**: the block path with the hint channel: before it sleeps the
  process stores "waiting" in its slot of a hint file and rings the slicer's
  doorbell (a futex), as libvhpc_wait does; the slicer switches on that ring.
* **expiry** (5 ms slices, both processes always busy): from the last clock
  read of the domain whose slice ran out to the first clock read of the next.

Each switch is one sample; the table gives the median and the 99th percentile,
and the slicer's own CPU use over the run (the time on a CPU of its threads,
the driver and the per-CPU watchers, from /proc/self/task/<tid>/schedstat) as a
share of one CPU. The probe's processes run SCHED_FIFO at priority 5, below the
native driver's 10, so that other work on a shared machine does not queue ahead
of a thawed domain and the figure is the slicer's, not the load's.

The Python polling loop this native slicer replaced (timeslice.py as of
13f2363) was measured by this same code; its figures are kept in
bench/slicer-python-baseline.json and shown beside the native ones:

    git show 13f2363:python/vhpc/host/timeslice.py > /tmp/timeslice-13f2363.py
    .venv/bin/python -m vhpc.host.bench --slicer-from /tmp/timeslice-13f2363.py \
        --save-baseline bench/slicer-python-baseline.json

    .venv/bin/python -m vhpc.host.bench [--seconds 3] [--out docs/slicer-bench.md]
"""

from __future__ import annotations

import argparse
import csv
import io
import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

import numpy as np

from vhpc import paths, provenance
from vhpc.host import hints, load, placement, timeslice

BASELINE = paths.REPO / "bench" / "slicer-python-baseline.json"
WORK_US, SLEEP_US = 3000, 2000  # block path: each process runs, then sleeps
EXPIRY_SLICE_S = 0.005  # expiry path: short slices, many switches per second
WARMUP_NS = 100_000_000  # events in the first 0.1 s are dropped (processes joining)
MAX_SWITCH_NS = 5_000_000  # a longer pause is not one switch (something else ran)
CPU = 0
PROBE_PRIORITY = 5  # SCHED_FIFO, below the native slicer's 10: other work cannot delay the probe


@dataclass
class Figures:
    path: str  # block | expiry
    switches: int  # samples
    missed: int  # block path: the domain woke before the slicer switched (> SLEEP_US)
    median_us: float
    p99_us: float
    cpu_percent: float  # the slicer thread's CPU time over the run, % of one CPU
    # Block path, native slicer only: medians of where a switch's time goes (µs).
    detect_us: float | None = None  # the task blocks -> the slicer knows
    switch_us: float | None = None  # -> the next domain is thawed
    wake_us: float | None = None  # -> its task runs


def probe() -> Path:
    """bench/slicer_probe, built if needed."""
    subprocess.run(["make", "-s", "-C", str(paths.REPO / "bench"),
                    f"BUILD={paths.build_dir()}", f"{paths.build_dir()}/bench/slicer_probe"],
                   check=True)
    return paths.build_dir() / "bench" / "slicer_probe"


def threads_cpu_ns(tids: list[int]) -> int:
    """Time threads of this process have spent on a CPU, in nanoseconds."""
    return sum(int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
               for tid in tids)


def slicer_threads(slicer) -> list[int]:
    """The slicer's thread and the native slicer's per-CPU watchers (`vhpc-watch<cpu>`)."""
    watchers = [int(t.name) for t in Path("/proc/self/task").iterdir()
                if (t / "comm").read_text().startswith("vhpc-watch")]
    return [slicer.native_id, *watchers]


def run(impl: ModuleType, path: str, seconds: float
        ) -> tuple[list[dict[str, str]], float, int, list[tuple[int, int]]]:
    """One probe run under a fresh slicer of `impl` (a timeslice module): (CSV rows,
    slicer CPU %, probe start ns, the slicer's switch log if it keeps one). Path
    `hint` is the block path with the hint channel: the probe says it waits and
    rings the slicer before it sleeps."""
    block = path in ("block", "hint")
    slice_s = impl.SLICE_S if block else EXPIRY_SLICE_S
    logs = hasattr(impl.Slicer, "switch_log")
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups, \
            hints.hint_file(2) as page:
        extra = {"hints": timeslice.HintSpec(page, 0, (0, 1), (((0, 0),), ((1, 0),)), (0, 1))} \
            if path == "hint" else {}
        slicer = (impl.Slicer(groups, slice_s, work_conserving=block, log=True, **extra) if logs
                  else impl.Slicer(groups, slice_s, work_conserving=block))
        slicer.start()
        try:
            tids = slicer_threads(slicer)
            cpu0, wall0 = threads_cpu_ns(tids), time.monotonic_ns()
            args = ["-w", str(WORK_US), "-s", str(SLEEP_US)] if block else ["-G", "20"]
            if path == "hint":
                args += ["-H", str(page)]
            out = subprocess.run(
                [str(probe()), "block" if block else "spin", "-g", ",".join(str(g / "tasks") for g in groups),
                 "-c", str(CPU), "-r", str(PROBE_PRIORITY), "-t", str(seconds), *args],
                capture_output=True, text=True, check=True, timeout=seconds + 30).stdout
            cpu = 100 * (threads_cpu_ns(tids) - cpu0) / (time.monotonic_ns() - wall0)
        finally:
            slicer.stop()
    log = slicer.switch_log() if logs else []
    return list(csv.DictReader(io.StringIO(out))), cpu, wall0, log


def idle_cost(impl: ModuleType, seconds: float) -> tuple[float, float]:
    """Every domain asleep (a `sleep` process in each): (switches per second, the
    slicer's CPU %). A work-conserving slicer can only switch in vain there."""
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        procs = [subprocess.Popen(["sh", "-c", f"echo $$ > {g}/tasks; exec sleep {seconds + 30}"])
                 for g in groups]
        try:
            time.sleep(0.2)  # both joined
            slicer = impl.Slicer(groups, impl.SLICE_S)
            slicer.start()
            try:
                time.sleep(0.1)
                tids = slicer_threads(slicer)
                cpu0, wall0, n0 = threads_cpu_ns(tids), time.monotonic_ns(), slicer.switches
                time.sleep(seconds)
                wall = time.monotonic_ns() - wall0
                cpu = 100 * (threads_cpu_ns(tids) - cpu0) / wall
                rate = (slicer.switches - n0) / (wall / 1e9)
            finally:
                slicer.stop()
        finally:
            for p in procs:
                p.kill()
                p.wait()
    return rate, cpu


def block_switches(rows: list[dict[str, str]], since: int) -> list[tuple[int, float]]:
    """(block ns, latency ns) per switch: block of one domain's task to the next run
    of the other's, which was ready; infinite when the blocked task ran again first
    (the slicer missed the switch)."""
    events = sorted((int(r["t_ns"]), int(r["proc"]), r["event"]) for r in rows)
    events = [e for e in events if e[0] >= since]
    last_block: dict[int, int] = {}
    out = []
    for (t0, p0, e0), (t1, p1, e1) in zip(events, events[1:]):
        if e0 == "block":
            last_block[p0] = t0
        if e0 != "block" or e1 != "run" or last_block.get(1 - p0, t0) + SLEEP_US * 1000 >= t0:
            continue  # not a block, or the other domain was not ready yet
        if p0 != p1 and t1 - t0 < MAX_SWITCH_NS:
            out.append((t0, t1 - t0))
        elif p0 == p1:
            out.append((t0, float("inf")))
    return out


def block_latencies(rows: list[dict[str, str]], since: int) -> list[float]:
    return [lat for _, lat in block_switches(rows, since)]


def breakdown(rows: list[dict[str, str]], since: int, log: list[tuple[int, int]]
              ) -> tuple[float, float, float] | None:
    """Medians (µs) of block -> decided -> thawed -> run, over the block-path
    switches that one logged switch falls inside."""
    if not log:
        return None
    log = sorted(log)
    decided = np.array([d for d, _ in log])
    parts = []
    for block, lat in block_switches(rows, since):
        if lat == float("inf"):
            continue
        i = int(np.searchsorted(decided, block))
        if i < len(log) and log[i][1] <= block + lat:
            d, t = log[i]
            parts.append((d - block, t - d, block + lat - t))
    if not parts:
        return None
    med = np.median(np.array(parts), axis=0) / 1e3
    return float(med[0]), float(med[1]), float(med[2])


def expiry_latencies(rows: list[dict[str, str]], since: int) -> list[float]:
    """End of one domain's run to the start of the other's next one."""
    runs = sorted((int(r["start_ns"]), int(r["end_ns"]), int(r["proc"])) for r in rows)
    runs = [r for r in runs if r[0] >= since]
    return [s1 - e0 for (_, e0, p0), (s1, _, p1) in zip(runs, runs[1:])
            if p0 != p1 and 0 <= s1 - e0 < MAX_SWITCH_NS]


def measure(impl: ModuleType, seconds: float) -> list[Figures]:
    paths_ = [("block", block_latencies), ("expiry", expiry_latencies)]
    if impl is timeslice:  # the hint channel exists in the native slicer only
        paths_.insert(1, ("hint", block_latencies))
    figures = []
    for path, latencies in paths_:
        rows, cpu, start, log = run(impl, path, seconds)
        lat = np.array(latencies(rows, start + WARMUP_NS)) / 1e3
        if len(lat) == 0:
            raise RuntimeError(f"{path}: the probe saw no switch")
        parts = breakdown(rows, start + WARMUP_NS, log) if path in ("block", "hint") else None
        figures.append(Figures(path, len(lat), int(np.isinf(lat).sum()),
                               float(np.percentile(lat, 50, method="higher")),
                               float(np.percentile(lat, 99, method="higher")), cpu,
                               *(parts or ())))
    return figures


def host() -> dict[str, str]:
    rev, dirty = provenance.git_revision()
    return {"commit": rev + (" (uncommitted changes)" if dirty else ""),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": provenance.cpu_model(), "kernel": provenance.kernel(),
            "load": Path("/proc/loadavg").read_text().split()[0]}


def table(rows: list[tuple[str, Figures]]) -> str:
    def us(v: float) -> str:
        return f"> {SLEEP_US}" if v == float("inf") else f"{v:.1f}"

    lines = ["| slicer | path | switches | missed | median µs | p99 µs | "
             "slicer CPU, % of one CPU |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, f in rows:
        lines.append(f"| {name} | {f.path} | {f.switches} | {f.missed} | {us(f.median_us)} | "
                     f"{us(f.p99_us)} | {f.cpu_percent:.1f} |")
    return "\n".join(lines)


def markdown(figures: list[Figures], idle: tuple[float, float], info: dict[str, str],
             steal: float, native: str, baseline: dict | None) -> str:
    rows = [("native", f) for f in figures]
    how = {"block": "a watcher's look, or a poll", "hint": "the probe's ring of the doorbell"}
    parts = "".join(
        f"\nWhere a native {f.path}-path switch's time goes (medians, from the slicer's own "
        f"log of each switch): {f.detect_us:.1f} µs from the task blocking to the slicer "
        f"knowing ({how[f.path]}), {f.switch_us:.1f} µs to the next domain "
        f"thawed (freezing the idle one first), {f.wake_us:.1f} µs to its task running.\n"
        for f in figures if f.detect_us is not None)
    old = old_idle = ""
    if baseline and "idle" in baseline:
        old_idle = (f", the Python loop {baseline['idle'][0]:.0f} at "
                    f"{baseline['idle'][1]:.1f} %")
    if baseline:
        rows += [("Python (old)", Figures(**f)) for f in baseline["figures"]]
        old = (f"\nThe Python rows are the polling loop the native slicer replaced (a "
               f"`threading.Thread` looking every {baseline['poll_us']:g} µs; "
               f"{baseline['slicer']}), measured by this code at commit {baseline['commit']} "
               f"on {baseline['date']}, load average {baseline['load']} after the run "
               f"(bench/slicer-python-baseline.json, `--save-baseline`).\n")
    return f"""# The lab slicer's switch latency

Written by `make bench-slicer` (`python -m vhpc.host.bench`, which says how it
measures); do not edit by hand. Commit {info['commit']}, {info['date']},
{info['cpu']}, {info['kernel']}; load average {info['load']} after the run
(2 CPUs), steal time during it {steal:.1f} %.

Native slicer: {native}.

A switch is the time no domain runs while the slicer hands one CPU from one
domain to the next: **block**, from the running domain's only task blocking to
the other domain's (ready) task running, 30 ms slices, work-conserving;
**hint**, the block path with the hint channel (docs/runtime.md): before it
blocks, the task says it waits in its slot of the hint page and rings the slicer's
doorbell, as libvhpc_wait does when every rank of its domain waits, and the slicer
switches on that, not on a watcher's look at /proc (it freezes the domain: the
probe does not wait in libvhpc_wait's loop, so it cannot be parked);
**expiry**, from the last instant the domain whose slice ran out ran to the first
instant of the next, 5 ms slices. Both domains' processes are pinned to CPU {CPU}
and run SCHED_FIFO at priority {PROBE_PRIORITY} (so the machine's other work does
not queue ahead of them); the slicer's CPU share is its threads' CPU time over the
run, in % of one CPU. `missed`: block switches not made by the time the blocked
task's {SLEEP_US // 1000} ms sleep ended (it ran again first); they count as longer than
{SLEEP_US // 1000} ms in the percentiles.

{table(rows)}
{parts}
With every domain asleep (a `sleep` process in each, 30 ms slices), a
work-conserving slicer can only switch in vain: the native one made
{idle[0]:.0f} switches per second at {idle[1]:.1f} % of one CPU{old_idle}.
{old}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vhpc.host.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="per path (default 3)")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    parser.add_argument("--save-baseline", type=Path,
                        help="record these figures as the Python loop's (JSON)")
    parser.add_argument("--slicer-from", type=Path, metavar="FILE",
                        help="measure the Slicer of this copy of timeslice.py instead "
                             "(e.g. `git show REV:python/vhpc/host/timeslice.py`)")
    args = parser.parse_args(argv)
    impl = timeslice
    if args.slicer_from:
        spec = importlib.util.spec_from_file_location("measured_timeslice", args.slicer_from)
        assert spec and spec.loader
        impl = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(impl)
    ok, reason = placement.freezer_available()
    if not ok:
        print(f"bench-slicer skipped: the cgroup v1 freezer is unavailable ({reason})")
        return 0
    before = load.cpu_times()
    figures = measure(impl, args.seconds)
    steal = load.steal_percent(before, load.cpu_times())
    info = host()
    idle = idle_cost(impl, min(args.seconds, 3.0))
    print(table([("this", f) for f in figures]))
    print(f"all domains asleep: {idle[0]:.0f} switches/s, {idle[1]:.1f} % of one CPU")
    for f in figures:
        if f.detect_us is not None:
            print(f"{f.path}: blocked -> decided {f.detect_us:.1f} µs, -> thawed "
                  f"{f.switch_us:.1f} µs, -> running {f.wake_us:.1f} µs (medians)")
    if args.save_baseline:
        args.save_baseline.write_text(json.dumps(
            {**info, "slicer": args.slicer_from.name if args.slicer_from else "timeslice.py",
             "poll_us": impl.POLL_S * 1e6, "idle": list(idle), "steal_percent": round(steal, 2),
             "figures": [asdict(f) for f in figures]}, indent=2) + "\n")
        return 0
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else None
    if baseline:
        print(table([("Python (old)", Figures(**f)) for f in baseline["figures"]]))
    if args.out:
        args.out.write_text(markdown(figures, idle, info, steal, timeslice.describe(), baseline))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
