"""The MPI + OpenMP benchmark (`make bench-hybrid`, docs/hybrid-bench.md).

bench/hybrid, 2 ranks × 2 OpenMP threads, on both CPUs and confined to one
(`taskset -c 0`): µs per fork-join iteration (a parallel loop, its barrier, an
`MPI_Allreduce`). Four ways to run it separate what each runtime's waiting
costs: as is; with `OMP_WAIT_POLICY=PASSIVE` alone; with libvhpc_wait alone
(adaptive, OpenMP left spinning); and with `vhpc run`, which preloads the
library and sets the OpenMP runtime's waiting itself (runtime/openmp.py). Every
cell runs `reps` times in a seeded shuffled order; cells show median (min–max).
"""

from __future__ import annotations

import csv
import io
import random
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vhpc import mpi, paths, provenance
from vhpc import runtime as rt
from vhpc.host.process import run_command
from vhpc.runtime import launch
from vhpc.runtime.bench import build_bench

COMMAND = "make bench-hybrid"
RANKS, THREADS = 2, 2
ITERATIONS = 300
WORK = 20000  # integers summed per rank and iteration: little, so waiting dominates
TIMEOUT_S = 120.0
SEED = 20261125
SETTINGS = ("default", "OpenMP passive", "libvhpc_wait", "vhpc run")
#: Placement label -> CPUs the launcher is confined to (None: all).
PLACEMENTS = {"2 CPUs": None, "1 CPU": "0"}


@dataclass(frozen=True)
class Cell:
    impl: mpi.MpiImpl
    place: str
    setting: str


def program(impl: mpi.MpiImpl) -> Path:
    return paths.build_dir() / "bench" / impl.name / "hybrid"


def base_command(impl: mpi.MpiImpl) -> list[str]:
    """The job as a user would start it (Open MPI unbound and allowed to oversubscribe,
    the same for every setting)."""
    cmd = [impl.mpiexec, "-n", str(RANKS)]
    if impl.name == "openmpi":
        cmd += ["--bind-to", "none", "--oversubscribe"]
    return cmd + [str(program(impl)), "-n", str(ITERATIONS), "-w", str(WORK)]


def command(cell: Cell) -> tuple[list[str], dict[str, str]]:
    """(argv, launcher environment) of one cell."""
    env = cell.impl.launcher_env()
    env.pop("LD_PRELOAD", None)
    env = {k: v for k, v in env.items() if not k.startswith(("VHPC_", "OMP_", "GOMP_", "KMP_"))}
    env["OMP_NUM_THREADS"] = str(THREADS)
    base = base_command(cell.impl)
    if cell.setting == "OpenMP passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if cell.setting == "libvhpc_wait":
        rank_env, preload = rt.policy_env(cell.impl.name, "adaptive")
        base = cell.impl.launch(RANKS, base[base.index(str(program(cell.impl))):],
                                env=rank_env, preload=preload)
    if cell.setting == "vhpc run":
        cpus = 1 if PLACEMENTS[cell.place] else None
        plan = launch.plan(base, environ=env, cpus=cpus)
        base, env = plan.argv, {**env, **plan.launcher_env}
    taskset = PLACEMENTS[cell.place]
    return (["taskset", "-c", taskset, *base] if taskset else base), env


def measure(cell: Cell) -> tuple[float | None, str]:
    """µs per iteration of one run, or (None, what went wrong)."""
    argv, env = command(cell)
    out, problem = run_command(argv, env, TIMEOUT_S)
    if out is None:
        return None, problem
    for row in csv.DictReader(io.StringIO(out)):
        if row.get("test") == "hybrid":
            return float(row["usec"]), ""
    return None, f"no hybrid row in output: {out[-200:]!r}"


def run_bench(out: Path | None, reps: int = 5, console: Console | None = None) -> dict:
    console = console or Console()
    build_bench()
    cells = [Cell(impl, place, s) for impl in mpi.available() for place in PLACEMENTS
             for s in SETTINGS]
    samples: dict[Cell, list[float]] = {c: [] for c in cells}
    problems: dict[Cell, list[str]] = {c: [] for c in cells}
    rng = random.Random(SEED)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("hybrid bench", total=len(cells) * reps)
        for _ in range(reps):
            order = cells[:]
            rng.shuffle(order)
            for cell in order:
                progress.update(task, description=f"{cell.impl.name} · {cell.place} · {cell.setting}")
                value, problem = measure(cell)
                if value is not None:
                    samples[cell].append(value)
                else:
                    problems[cell].append(problem)
                progress.advance(task)
    rows = [row(c, samples[c], problems[c]) for c in cells]
    console.print(rich_table(rows, reps))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown(rows, reps))
        console.print(f"wrote {out}")
    return {"rows": rows}


def row(cell: Cell, samples: list[float], problems: list[str]) -> dict:
    return {"mpi": cell.impl.name, "placement": cell.place, "setting": cell.setting,
            "median": statistics.median(samples) if samples else None,
            "min": min(samples, default=None), "max": max(samples, default=None),
            "samples": samples, "note": "; ".join(sorted(set(problems)))[:200]}


def speedup(rows: list[dict], r: dict) -> str:
    """The row's gain over the same MPI and placement run as is."""
    base = next(x for x in rows if (x["mpi"], x["placement"], x["setting"])
                == (r["mpi"], r["placement"], "default"))
    if r["setting"] == "default" or not base["median"] or not r["median"]:
        return ""
    return f"{base['median'] / r['median']:.1f}×"


def fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def cells_of(rows: list[dict], r: dict) -> tuple[str, ...]:
    figure = "—" if r["median"] is None else f"{fmt(r['median'])} ({fmt(r['min'])}–{fmt(r['max'])})"
    return (r["mpi"], r["placement"], r["setting"], figure, speedup(rows, r), r["note"])


HEADERS = ("MPI", "CPUs", "setting", "µs per iteration", "vs as is", "note")


def rich_table(rows: list[dict], reps: int) -> Table:
    table = Table(title=f"bench/hybrid, {RANKS} ranks × {THREADS} threads — {reps} reps",
                  caption="median (min–max)")
    for h in HEADERS:
        table.add_column(h, justify="right" if h in ("µs per iteration", "vs as is") else "left")
    for r in rows:
        table.add_row(*cells_of(rows, r))
    return table


def markdown(rows: list[dict], reps: int) -> str:
    rev, dirty = provenance.git_revision()
    work = f"{WORK:,}".replace(",", " ")
    lines = [
        "# MPI + OpenMP: hybrid benchmark", "",
        f"Generated by `{COMMAND}` (`vhpc runtime bench-hybrid --out docs/hybrid-bench.md "
        f"--reps {reps}`); do not edit by hand.", "",
        f"bench/hybrid: {RANKS} ranks × {THREADS} OpenMP threads (`OMP_NUM_THREADS={THREADS}`), "
        f"{ITERATIONS} iterations of a parallel loop summing {work} integers per rank, its "
        "barrier, and an `MPI_Allreduce` of the sums; µs per iteration. *2 CPUs*: unconfined; "
        "*1 CPU*: the launcher under `taskset -c 0`. Settings: *default* — the MPI and the "
        "OpenMP runtime as they come; *OpenMP passive* — `OMP_WAIT_POLICY=PASSIVE` only; "
        "*libvhpc_wait* — the library preloaded (`VHPC_WAIT=adaptive`), OpenMP left as it comes; "
        "*vhpc run* — `vhpc run -- <the same command>`, which preloads the library and, seeing "
        f"{RANKS * THREADS} threads on the CPUs, sets the OpenMP runtime's waiting. Each cell "
        f"ran {reps} times in a shuffled order (seed {SEED}); median (min–max).", "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---:" if h in ("µs per iteration", "vs as is") else "---" for h in HEADERS) + "|",
    ]
    lines += ["| " + " | ".join(cells_of(rows, r)) + " |" for r in rows]
    lines += ["", "## Host", "", f"- CPU: {provenance.cpu_model()}",
              f"- kernel: {provenance.kernel()}"]
    lines += [f"- {impl.name}: {impl.version}" for impl in mpi.available()]
    lines += [f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"- git revision: {rev}{' (with uncommitted changes)' if dirty else ''}", "",
              f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)
