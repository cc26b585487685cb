"""The runtime benchmark table: what each wait policy costs and saves.

One run measures every installed MPI × rank placement × wait policy with
bench/pingpong (8-byte half round trip, 1 MiB unidirectional bandwidth), plus
the floor set by two processes bouncing a byte over pipes on one core. The
machine is noisy, so every configuration runs `reps` times, the order
shuffled each round, and the table shows medians with min–max.
"""

from __future__ import annotations

import csv
import io
import os
import random
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vhpc import mpi, paths, placement, provenance, timeslice
from vhpc.process import run_command
from vhpc import runtime as rt

LAT_SIZE = 8
BW_SIZE = 1 << 20
MEASURE_S = 0.2
# Capped groups are throttled per 100 ms CFS period: measure across several.
CAPPED_MEASURE_S = 0.5
RUN_TIMEOUT_S = 120.0
SEED = 20240601
VHPC_POLICIES = ("spin", "yield", "sleep", "adaptive")
COMMAND = "make bench-runtime"
BUSY_LOAD = 0.5  # 1-minute load average above which the machine is not quiet


class BenchError(RuntimeError):
    """The benchmark cannot run (programs missing and not buildable)."""


@dataclass(frozen=True)
class Config:
    """One row of the table: an MPI, a placement and a wait policy."""

    impl: mpi.MpiImpl
    place: placement.Placement
    policy: str  # default | mpi-yield | one of VHPC_POLICIES

    def rank_env(self) -> tuple[dict[str, str], Path | None]:
        """Environment for the ranks and the library to preload, if any."""
        if self.policy == "default":
            return {}, None
        if self.policy == "mpi-yield":
            # An MCA parameter in the ranks' environment is read by each rank's MPI_Init.
            return {"OMPI_MCA_mpi_yield_when_idle": "1"}, None
        return {"VHPC_WAIT": self.policy}, rt.lib_path(self.impl.name)


@dataclass
class Cell:
    """Samples of one configuration and what went wrong in the other runs."""

    lat: list[float] = field(default_factory=list)
    bw: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    timed_out: set[str] = field(default_factory=set)


def placements() -> list[placement.Placement]:
    return [
        placement.spread(2),
        placement.shared_core(2),
        placement.shared_core(4),
        placement.capped_cgroups(2),
        placement.timesliced(2),
    ]


def tests_for(place: placement.Placement) -> tuple[str, ...]:
    """Under time slicing a 1 MiB transfer needs a domain switch per chunk the MPI
    copies, up to a 30 ms slice each with busy-polling: latency only."""
    return ("lat",) if place.kind == "timesliced" else ("lat", "bw")


def policies(impl: mpi.MpiImpl) -> list[str]:
    extra = ["mpi-yield"] if impl.name == "openmpi" else []
    return ["default", *extra, *VHPC_POLICIES]


def pingpong(impl: mpi.MpiImpl) -> Path:
    return paths.build_dir() / "bench" / impl.name / "pingpong"


def pipe_pingpong() -> Path:
    return paths.build_dir() / "bench" / "pipe_pingpong"


def build_bench() -> None:
    """Build bench/ into the build directory (a no-op when up to date)."""
    cmd = ["make", "-s", "-C", str(paths.REPO / "bench"), f"BUILD={paths.build_dir()}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed:\n{proc.stdout}{proc.stderr}")


# ---------------------------------------------------------------- running


def parse_csv(text: str, test: str, size: int) -> dict[str, float]:
    """The row of `test` at `size` from bench CSV output."""
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("test") == test and int(row["size"]) == size:
            return {k: float(row[k]) for k in ("iters", "usec", "MBps")}
    raise ValueError(f"no {test} row for size {size} in output: {text[-200:]!r}")


def measure(config: Config, test: str) -> tuple[float | None, str]:
    """One pingpong run: latency in µs (lat) or bandwidth in MB/s (bw)."""
    size = LAT_SIZE if test == "lat" else BW_SIZE
    seconds = CAPPED_MEASURE_S if config.place.kind == "capped_cgroups" else MEASURE_S
    argv = [str(pingpong(config.impl)), "-s", str(size), "-T", test, "-t", str(seconds)]
    env, preload = config.rank_env()
    with config.place.command(config.impl, argv, env=env, preload=preload) as cmd:
        out, problem = run_command(cmd, config.impl.launcher_env(), RUN_TIMEOUT_S)
    if out is None:
        return None, problem
    try:
        row = parse_csv(out, test, size)
    except ValueError as exc:
        return None, str(exc)
    return (row["usec"] if test == "lat" else row["MBps"]), ""


def measure_pipe() -> tuple[float | None, str]:
    cmd = ["taskset", "-c", "0", str(pipe_pingpong()), "-t", str(MEASURE_S)]
    out, problem = run_command(cmd, dict(os.environ), RUN_TIMEOUT_S)
    if out is None:
        return None, problem
    return parse_csv(out, "pipe", 1)["usec"], ""


# ---------------------------------------------------------------- the table


PIPE = "pipe"


def plan() -> tuple[list[Config], list[dict]]:
    """Configurations to run, and rows skipped with the reason."""
    configs, skipped = [], []
    for impl in mpi.available():
        for place in placements():
            ok, reason = place.available()
            for policy in policies(impl):
                config = Config(impl, place, policy)
                _, lib = config.rank_env()
                if not ok:
                    skipped.append(row_of(config, Cell(), f"skipped: {reason}"))
                elif lib is not None and not lib.is_file():
                    skipped.append(row_of(config, Cell(), f"skipped: {lib} not built"))
                else:
                    configs.append(config)
    return configs, skipped


def run_bench(out: Path | None, reps: int = 5, console: Console | None = None) -> list[dict]:
    """Measure the whole table in one run; print it, and write Markdown to `out` if given."""
    console = console or Console()
    if not mpi.available():
        raise BenchError("no MPI installed (looked for mpicc.mpich, mpicc.openmpi)")
    build_bench()
    configs, skipped = plan()
    started, cpu_before, load_before = time.monotonic(), cpu_times(), os.getloadavg()[0]
    if load_before >= BUSY_LOAD:
        console.print(f"[yellow]warning:[/] load average {load_before:.2f}: other work on this "
                      "machine will disturb the figures (recorded with the results)")
    cells = measure_all(configs, reps, console)
    conditions = {
        "steal time during the run": f"{steal_percent(cpu_before, cpu_times()):.1f} % of CPU time",
        "load average (1 min) before / after": f"{load_before:.2f} / {os.getloadavg()[0]:.2f}",
    }
    rows = [row_of(c, cells[c], note_of(cells[c])) for c in configs] + skipped
    rows.sort(key=sort_key)
    rows.insert(0, row_of(None, cells[PIPE], note_of(cells[PIPE])))
    checks = target_checks(rows)
    minutes = (time.monotonic() - started) / 60
    console.print(rich_table(rows, f"vhpc runtime bench — {reps} reps, {minutes:.1f} min"))
    for check in checks:
        console.print(check_line(check, markup=True))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown(rows, checks, reps, minutes, conditions))
        console.print(f"wrote {out}")
    return rows


def measure_all(configs: list[Config], reps: int, console: Console) -> dict:
    """Samples per configuration; rounds in a seeded shuffled order."""
    jobs: list[tuple[Config | str, str]] = [(c, t) for c in configs for t in tests_for(c.place)]
    jobs.append((PIPE, "lat"))
    cells: dict = {key: Cell() for key in [*configs, PIPE]}
    rng = random.Random(SEED)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[now]}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("runtime bench", total=len(jobs) * reps, now="")
        for rep in range(reps):
            order = jobs[:]
            rng.shuffle(order)
            for key, test in order:
                cell = cells[key]
                progress.update(task, description=f"round {rep + 1}/{reps}", now=job_name(key, test))
                if test in cell.timed_out:  # one timeout is enough: don't spend 2 min again
                    cell.problems.append("timeout")
                else:
                    value, problem = measure_pipe() if key == PIPE else measure(key, test)
                    record(cell, test, value, problem)
                progress.advance(task)
    return cells


def record(cell: Cell, test: str, value: float | None, problem: str) -> None:
    if value is not None:
        (cell.lat if test == "lat" else cell.bw).append(value)
        return
    cell.problems.append(f"{test}: {problem}")
    if problem == "timeout":
        cell.timed_out.add(test)


def job_name(key: Config | str, test: str) -> str:
    if key == PIPE:
        return "pipe floor"
    return f"{key.impl.name} · {key.place.label} · {key.policy} · {test}"


def summary(samples: list[float]) -> dict | None:
    if not samples:
        return None
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def row_of(config: Config | None, cell: Cell, note: str) -> dict:
    if config is None:
        head = {"mpi": "—", "placement": "2 processes on 1 core", "placement_id": "pipe",
                "policy": "pipe floor"}
    else:
        head = {"mpi": config.impl.name, "placement": config.place.label,
                "placement_id": config.place.name, "policy": config.policy}
    return {**head, "lat_us": summary(cell.lat), "bw_MBps": summary(cell.bw),
            "lat_samples": cell.lat, "bw_samples": cell.bw, "note": note,
            "timed_out": sorted(cell.timed_out)}


def note_of(cell: Cell) -> str:
    if not cell.problems:
        return ""
    if cell.timed_out:
        which = " and ".join(cell.timed_out)
        return f"{which} timed out (> {RUN_TIMEOUT_S:.0f} s); not repeated"
    distinct = sorted(set(cell.problems))
    return f"{len(cell.problems)} runs failed: " + "; ".join(distinct)[:200]


def sort_key(row: dict) -> tuple:
    place_order = [p.name for p in placements()]
    policy_order = ["default", "mpi-yield", *VHPC_POLICIES]
    return (list(mpi.MPIS).index(row["mpi"]), place_order.index(row["placement_id"]),
            policy_order.index(row["policy"]))


# ---------------------------------------------------------------- target checks


def find(rows: list[dict], mpi_name: str, place: str, policy: str) -> dict | None:
    for row in rows:
        if (row["mpi"], row["placement_id"], row["policy"]) == (mpi_name, place, policy):
            return row
    return None


def median(row: dict | None, key: str) -> float | None:
    if row is None or row[key] is None:
        return None
    return row[key]["median"]


def not_run(row: dict | None) -> str | None:
    """Why the adaptive row was never measured (skipped), else None (ran, maybe failed)."""
    if row is None:
        return "adaptive was not configured"
    if row["note"].startswith("skipped"):
        return f"adaptive {row['note']}"
    return None


def check(name: str, what: str, met: bool | None, detail: str) -> dict:
    return {"check": name, "what": what, "met": met, "detail": detail}


def target_checks(rows: list[dict]) -> list[dict]:
    names = [impl.name for impl in mpi.available()]
    checks = []
    for name in names:
        for place in ("shared_core-2", "shared_core-4"):
            checks.append(check_shared(rows, name, place))
    for name in names:
        checks.append(check_spread(rows, name))
    for name in names:
        checks.append(check_capped(rows, name))
    return checks


def check_shared(rows: list[dict], name: str, place: str) -> dict:
    """(a) ranks sharing one core: adaptive latency ≤ Open MPI mpi-yield latency."""
    label = placement.shared_core(int(place[-1])).label
    what = f"(a) {name}, {label}: adaptive latency ≤ Open MPI mpi-yield latency"
    if (why := not_run(find(rows, name, place, "adaptive"))) is not None:
        return check("a", what, None, why)
    if find(rows, name, place, "adaptive")["note"]:
        return check("a", what, False, f"adaptive: {find(rows, name, place, 'adaptive')['note']}")
    adaptive = median(find(rows, name, place, "adaptive"), "lat_us")
    reference = median(find(rows, "openmpi", place, "mpi-yield"), "lat_us")
    if reference is None:
        return check("a", what, None, "no Open MPI mpi-yield figure")
    if adaptive is None:
        return check("a", what, False, f"no adaptive figure; mpi-yield {fmt_lat(reference)} µs")
    samples = (find(rows, name, place, "adaptive")["lat_samples"],
               find(rows, "openmpi", place, "mpi-yield")["lat_samples"])
    return check("a", what, adaptive <= reference,
                 f"adaptive {fmt_lat(adaptive)} µs vs mpi-yield {fmt_lat(reference)} µs"
                 f"{welch(*samples)}")


def check_spread(rows: list[dict], name: str) -> dict:
    """(b) ranks on their own cores: adaptive no more than 2 % worse than default."""
    what = f"(b) {name}, 2 ranks on own cores: adaptive within 2 % of default"
    adaptive, default = (find(rows, name, "spread-2", p) for p in ("adaptive", "default"))
    return ratio_check("b", what, adaptive, {"default": default}, 0.02)


def check_capped(rows: list[dict], name: str) -> dict:
    """(c) capped cgroups: adaptive within 10 % of the best of spin/yield/sleep."""
    what = f"(c) {name}, cgroup-capped ranks: adaptive within 10 % of best of spin/yield/sleep"
    place = "capped_cgroups-2"
    adaptive = find(rows, name, place, "adaptive")
    others = {p: find(rows, name, place, p) for p in ("spin", "yield", "sleep")}
    return ratio_check("c", what, adaptive, others, 0.10)


def ratio_check(name: str, what: str, adaptive: dict | None, refs: dict, tol: float) -> dict:
    """Adaptive latency ≤ (1+tol)·best reference, bandwidth ≥ (1−tol)·best reference."""
    if (why := not_run(adaptive)) is not None:
        return check(name, what, None, why)
    if adaptive["note"]:  # a failed or timed-out adaptive run is a miss, whatever the medians
        return check(name, what, False, f"adaptive: {adaptive['note']}")
    lats = {k: median(r, "lat_us") for k, r in refs.items() if median(r, "lat_us") is not None}
    bws = {k: median(r, "bw_MBps") for k, r in refs.items() if median(r, "bw_MBps") is not None}
    if not lats or not bws:
        return check(name, what, None, f"no figures for {', '.join(refs)}")
    a_lat, a_bw = median(adaptive, "lat_us"), median(adaptive, "bw_MBps")
    best_lat = min(lats, key=lats.get)
    best_bw = max(bws, key=bws.get)
    if a_lat is None or a_bw is None:
        return check(name, what, False, "adaptive has no figure (failed or timed out)")
    lat_ok = a_lat <= (1 + tol) * lats[best_lat]
    bw_ok = a_bw >= (1 - tol) * bws[best_bw]
    detail = (
        f"latency {fmt_lat(a_lat)} µs vs {best_lat} {fmt_lat(lats[best_lat])} µs "
        f"({pct(a_lat, lats[best_lat])}, {'ok' if lat_ok else 'too slow'}"
        f"{welch(adaptive['lat_samples'], refs[best_lat]['lat_samples'])}); "
        f"bandwidth {a_bw:.0f} vs {best_bw} {bws[best_bw]:.0f} MB/s "
        f"({pct(a_bw, bws[best_bw])}, {'ok' if bw_ok else 'too low'}"
        f"{welch(adaptive['bw_samples'], refs[best_bw]['bw_samples'])})"
    )
    return check(name, what, lat_ok and bw_ok, detail)


def welch(a: list[float], b: list[float]) -> str:
    """Whether two sets of runs differ beyond their noise: Welch's t-test."""
    from scipy import stats  # here: importing scipy would slow every `vhpc` command

    if len(a) < 2 or len(b) < 2:
        return ""
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    verdict = "differ" if p < 0.05 else "no significant difference"
    return f"; Welch t-test p = {p:.2g}: {verdict} at 95 %"


def pct(value: float, reference: float) -> str:
    return f"{100 * (value / reference - 1):+.1f} %"


def check_line(c: dict, markup: bool = False) -> str:
    verdict = {True: "met", False: "NOT met", None: "not evaluated"}[c["met"]]
    if markup:
        colour = {True: "green", False: "red", None: "yellow"}[c["met"]]
        verdict = f"[{colour}]{verdict}[/]"
    return f"{c['what']}: {verdict} — {c['detail']}"


# ---------------------------------------------------------------- output


def fmt_lat(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_cell(s: dict | None, fmt) -> str:
    if s is None:
        return "—"
    if s["n"] == 1:
        return f"{fmt(s['median'])} (1 run)"
    return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"


def fmt_bw(v: float) -> str:
    return f"{v:.0f}"


HEADERS = ("MPI", "placement", "policy", "8 B latency µs", "1 MiB bandwidth MB/s", "note")


def cells_of(row: dict) -> tuple[str, ...]:
    return (row["mpi"], row["placement"], row["policy"], fmt_cell(row["lat_us"], fmt_lat),
            fmt_cell(row["bw_MBps"], fmt_bw), row["note"])


def rich_table(rows: list[dict], title: str) -> Table:
    table = Table(title=title, caption="median (min–max) over the repetitions")
    for header in HEADERS:
        table.add_column(header, justify="right" if "µs" in header or "MB/s" in header else "left")
    previous = None
    for row in rows:
        if previous is not None and (row["mpi"], row["placement"]) != previous:
            table.add_section()
        previous = (row["mpi"], row["placement"])
        table.add_row(*cells_of(row))
    return table


def host_facts() -> dict[str, str]:
    facts = {
        "CPU": provenance.cpu_model(),
        "CPUs allowed": str(len(placement.allowed_cpus())),
        "kernel": provenance.kernel(),
    }
    for impl in mpi.available():
        facts[impl.name] = impl.version
    facts["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rev, dirty = provenance.git_revision()
    facts["git revision"] = rev + (" (with uncommitted changes)" if dirty else "")
    return facts


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


def markdown(
    rows: list[dict], checks: list[dict], reps: int, minutes: float, conditions: dict[str, str]
) -> str:
    lines = [
        "# libvhpc_wait: runtime benchmark",
        "",
        f"Generated by `{COMMAND}` (`vhpc runtime bench --out docs/runtime-bench.md "
        f"--reps {reps}`); do not edit by hand.",
        "",
        f"bench/pingpong, ranks in pairs: 8-byte half round trip (`-T lat`) and "
        f"1 MiB unidirectional bandwidth (`-T bw`, window of 64, MB = 10^6 bytes), "
        f"about {MEASURE_S} s per measurement ({CAPPED_MEASURE_S} s under cgroup caps, to span "
        f"several 100 ms CFS periods). Every configuration ran {reps} times, in a shuffled "
        f"order each round (seed {SEED}); cells show the median (min–max). A run taking over "
        f"{RUN_TIMEOUT_S:.0f} s is recorded as a timeout and not repeated. The pipe floor is "
        f"bench/pipe_pingpong under `taskset -c 0`: two processes bouncing one byte over pipes "
        f"on one core. Whole run: {minutes:.1f} min.",
        "",
        "Placements: *own cores* — no confinement (2 ranks, 2 CPUs); *1 core* — the "
        "launcher under `taskset -c 0` (4 ranks = 2 pairs at once, the slower pair "
        "reported); *½-core caps* — each rank in its own cgroup v1 `cpu` group with "
        f"cfs_quota_us={placement.QUOTA_US}, cfs_period_us={placement.PERIOD_US}, pinned to "
        "CPU rank % ncpus; *time-sliced domains* — each rank a single-vCPU domain (its own "
        "cgroup v1 `freezer` group, pinned to CPU rank % ncpus) and only one domain thawed "
        f"at a time, {timeslice.SLICE_S * 1000:.0f} ms slices in turn, switching early when "
        "every task of the running domain sleeps (vhpc/timeslice.py): a yield cannot reach "
        "the peer, as in brief S0 (latency only: a 1 MiB transfer would need a switch per "
        "copied chunk). Policies: *default* — no preload; *mpi-yield* — "
        "Open MPI's `mpi_yield_when_idle=1`; the others preload libvhpc_wait with "
        "`VHPC_WAIT=<policy>`.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---:" if ("µs" in h or "MB/s" in h) else "---" for h in HEADERS) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells_of(row)) + " |" for row in rows]
    lines += ["", "## Target checks (medians of this run)", ""]
    lines += [f"- {check_line(c)}" for c in checks]
    lines += ["", "## Host", ""]
    lines += [f"- {k}: {v}" for k, v in {**host_facts(), **conditions}.items()]
    lines += ["", f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- demo


def run_demo(console: Console | None = None) -> list[dict]:
    """Quick look (< 30 s): 2 ranks on one core, MPI default vs adaptive, and the pipe floor."""
    console = console or Console()
    build_bench()
    table = Table(title="2 ranks sharing one core: 8-byte half round trip")
    for header in ("MPI", "policy", "latency µs", "vs default"):
        table.add_column(header, justify="right" if header in ("latency µs", "vs default") else "left")
    results = []
    place = placement.shared_core(2)
    with console.status("measuring…"):
        for impl in mpi.available():
            default = demo_point(Config(impl, place, "default"))
            results.append({"mpi": impl.name, "policy": "default", "lat_us": default})
            table.add_row(impl.name, "default", demo_fmt(default), "")
            lib = rt.lib_path(impl.name)
            if not lib.is_file():
                table.add_row(impl.name, "adaptive", f"not built ({lib})", "")
                continue
            adaptive = demo_point(Config(impl, place, "adaptive"))
            results.append({"mpi": impl.name, "policy": "adaptive", "lat_us": adaptive})
            speedup = f"{default / adaptive:.0f}× faster" if default and adaptive else ""
            table.add_row(impl.name, "VHPC_WAIT=adaptive", demo_fmt(adaptive), speedup)
        floor, _ = measure_pipe()
        results.append({"mpi": "—", "policy": "pipe floor", "lat_us": floor})
        table.add_row("—", "pipe floor (2 processes, 1 core)", demo_fmt(floor), "")
    console.print(table)
    console.print(
        "With both ranks on one core, an MPI that waits by polling keeps the CPU until "
        "the kernel's scheduler takes it away, so every message costs a scheduler time "
        "slice (milliseconds) before the peer runs and answers. libvhpc_wait's adaptive "
        "policy sees that the ranks share a CPU and gives it up while waiting, so a message "
        "costs about one context switch. The pipe line is the same hand-over done through "
        "the kernel by two plain processes (a blocking read woken by a write); giving the CPU "
        "away with sched_yield needs no wake-up and can come out below it."
    )
    return results


def demo_point(config: Config) -> float | None:
    value, _ = measure(config, "lat")
    return value


def demo_fmt(value: float | None) -> str:
    return "failed" if value is None else fmt_lat(value)
