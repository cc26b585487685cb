"""The CI-runner benchmark (`make bench-ci`, docs/ci-bench.md): a real MPI test suite
as a project's CI runs it, on 2 CPUs and on 1.

The suite is mpi4py's own (`test/` of the mpi4py sdist from PyPI, the version the
wheel MPIs' virtualenvs hold): the widest MPI test suite that users run in CI
(point-to-point, every collective, communicators and topologies, one-sided, I/O,
threads), installable with pip, and the one whose CI times the public reports
quote. Every module runs as its own job (`mpiexec -n RANKS python test/main.py
-q MODULE`) with a time cap, so a module that busy-polls for an hour costs the cap
and is marked, and the others still run. For every MPI, CPU count and setting (the
MPI as is, the MPI's own oversubscription settings, `vhpc run`) the table gives the
wall time summed over modules and the suite's counts on rank 0 (tests run, failed
or errored, skipped).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vhpc import paths, provenance
from vhpc import runtime as rt
from vhpc.host.process import run_commands
from vhpc.runtime import launch, wheels

COMMAND = "make bench-ci"
RANKS = 4
#: Placement label -> CPUs the job is confined to.
PLACEMENTS = {"2 CPUs": "0-1", "1 CPU": "0"}
CAP_S = 120.0
SLOWEST = 5
#: Modules that start processes (MPI_Comm_spawn): left out, as CI setups do when
#: the launcher has no slots to spare.
SKIP = ("test_spawn", "test_dynproc")

_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_END = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$", re.M)


def suite_dir() -> Path:
    """mpi4py's test/ directory, from its sdist (downloaded once, cached)."""
    version = wheels.MPI4PY.split("==")[1]
    root = wheels.cache_dir() / f"mpi4py-{version}-sdist"
    test = root / f"mpi4py-{version}" / "test"
    if (test / "main.py").exists():
        return test
    root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
           "-d", str(root), wheels.MPI4PY]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        failure = proc.stderr.strip()[-300:] if proc.returncode else ""
    except subprocess.TimeoutExpired:
        failure = "pip took over 600 s"
    if failure:
        raise rt.Error(f"cannot download the {wheels.MPI4PY} sdist (its test suite) from "
                       f"PyPI (unreachable?): {failure}")
    sdist = next(root.glob("mpi4py-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/test/" in m.name]
        tar.extractall(root, members=members, filter="data")
    return test


def modules(test: Path) -> list[str]:
    return sorted(p.stem for p in test.glob("test_*.py") if p.stem not in SKIP)


@dataclass
class Counts:
    ran: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def passed(self) -> int:
        return self.ran - self.failed - self.skipped


def parse(stderr: str) -> Counts | None:
    """Rank 0's unittest summary (every rank prints one; the first is enough, the
    ranks run the same tests)."""
    ran, end = _RAN.search(stderr), _END.search(stderr)
    if not ran or not end:
        return None
    fields = dict(kv.split("=") for kv in (end.group(2) or "").split(", ") if "=" in kv)
    return Counts(int(ran.group(1)),
                  int(fields.get("failures", 0)) + int(fields.get("errors", 0)),
                  int(fields.get("skipped", 0)))


@dataclass
class Cell:
    mpi: wheels.WheelMpi
    place: str
    setting: str  #: "default", an MPI_POLICIES name, or "vhpc run"
    seconds: float = 0.0
    counts: Counts = field(default_factory=Counts)
    capped: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    module_s: dict[str, float] = field(default_factory=dict)
    module_counts: dict[str, Counts] = field(default_factory=dict)

    def finished(self) -> set[str]:
        """Modules that ended with a summary, not capped."""
        return set(self.module_counts) - set(self.capped)


def command(cell: Cell, test: Path, module: str) -> tuple[list[str], dict[str, str]]:
    """(argv, launcher environment) of one module under one cell's setting."""
    prog = [str(cell.mpi.python), str(test / "main.py"), "-q", module]
    env = {k: v for k, v in cell.mpi.launcher_env().items()
           if not k.startswith(("VHPC_", "MPIR_CVAR_", "I_MPI_", "OMPI_MCA_")) and k != "LD_PRELOAD"}
    if cell.setting == "vhpc run":
        base = cell.mpi.launch(RANKS, prog)
        plan = launch.plan(base, environ=env, cpus=len(_cpus(cell.place)))
        argv, env = plan.argv, {**env, **plan.launcher_env}
    else:
        rank_env = rt.MPI_POLICIES.get(cell.setting, {})
        argv = cell.mpi.launch(RANKS, prog, env=rank_env)
    return ["taskset", "-c", PLACEMENTS[cell.place], *argv], env


def _cpus(place: str) -> list[int]:
    lo, _, hi = PLACEMENTS[place].partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run_module(cell: Cell, test: Path, module: str, cap: float) -> None:
    argv, env = command(cell, test, module)
    start = time.monotonic()
    (out,) = run_commands([argv], env, cap, [test])
    took = time.monotonic() - start
    cell.seconds += took
    cell.module_s[module] = took
    counts = parse(out.stderr.text())
    if out.timed_out:
        cell.capped.append(module)
    elif counts is None:
        cell.broken.append(f"{module}: {out.problem() or 'no summary'}")
    if counts is not None:
        cell.module_counts[module] = counts
        cell.counts.ran += counts.ran
        cell.counts.failed += counts.failed
        cell.counts.skipped += counts.skipped


def _kind(setting: str) -> str:
    """default, own (the MPI's own settings) or vhpc."""
    return setting if setting == "default" else "vhpc" if setting == "vhpc run" else "own"


def settings(m: wheels.WheelMpi) -> list[str]:
    return ["default", *rt.library.own_policies(m.family, m.version), "vhpc run"]


def run_bench(out: Path | None, *, mpis: list[str] | None = None, only: list[str] | None = None,
              places: list[str] | None = None, kinds: list[str] | None = None,
              cap: float = CAP_S, console: Console | None = None) -> list[Cell]:
    console = console or Console()
    mpis = mpis or [*wheels.DEBIAN, *wheels.SPECS]
    found, missing = wheels.debian_mpis([m for m in mpis if m in wheels.DEBIAN])
    wheel_found, wheel_missing = wheels.mpis([m for m in mpis if m in wheels.SPECS]) \
        if any(m in wheels.SPECS for m in mpis) else ([], {})
    found, missing = found + wheel_found, {**missing, **wheel_missing}
    for name, why in missing.items():
        console.print(f"[yellow]skipping {name}: {why}[/yellow]")
    rt.build([m.name for m in found], prefixes=wheels.prefixes(wheel_found))
    test = suite_dir()
    mods = only or modules(test)
    cells = [Cell(m, p, s) for m in found for p in (places or list(PLACEMENTS))
             for s in settings(m) if not kinds or _kind(s) in kinds]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ci bench", total=len(cells) * len(mods))
        for cell in cells:
            for module in mods:
                progress.update(task, description=f"{cell.mpi.name} · {cell.place} · "
                                f"{cell.setting} · {module}")
                run_module(cell, test, module, cap)
                progress.advance(task)
    text = markdown(cells, mods, cap)
    console.print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(f"wrote {out}")
    return cells


def markdown(cells: list[Cell], mods: list[str], cap: float) -> str:
    rev, dirty = provenance.git_revision()
    lines = [
        "# The CI-runner benchmark: mpi4py's test suite",
        "",
        f"Generated by `{COMMAND}`; do not edit by hand. {RANKS} ranks; {len(mods)} modules of mpi4py "
        f"{wheels.MPI4PY.split('==')[1]}'s test suite, each its own job capped at "
        f"{cap:.0f} s (a capped module counts its cap and no tests). Counts are rank 0's.",
        "",
        "The last columns compare a row with the MPI as is: its wall time over the "
        "row's (a capped module counted at its cap, so the as-is time is a lower bound), "
        "the same over only the modules that finished in both rows, and the modules that "
        "finished in both with different counts.",
        "",
        "| MPI | CPUs | setting | wall s | tests run | passed | failed | skipped "
        "| capped modules | vs default | vs default, both finished | counts differ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        base = next((x for x in cells if (x.mpi.name, x.place, x.setting)
                     == (c.mpi.name, c.place, "default")), None)
        gain = both = differ = ""
        if base not in (None, c) and c.seconds:
            gain = f"{base.seconds / c.seconds:.1f}×"
            common = c.finished() & base.finished()
            mine = sum(c.module_s[m] for m in common)
            both = f"{sum(base.module_s[m] for m in common) / mine:.1f}× ({len(common)})" \
                if mine else ""
            differ = ", ".join(m.removeprefix("test_") for m in sorted(common)
                               if c.module_counts[m] != base.module_counts[m]) or "none"
        capped = ", ".join(m.removeprefix("test_") for m in c.capped) or "–"
        lines.append(f"| {c.mpi.inst.identity} | {c.place} | {c.setting} | {c.seconds:.0f} "
                     f"| {c.counts.ran} | {c.counts.passed} | {c.counts.failed} "
                     f"| {c.counts.skipped} | {capped} | {gain} | {both} | {differ} |")
    slow = [f"- {c.mpi.inst.identity} · {c.place} · {c.setting}: " + ", ".join(
        f"{m.removeprefix('test_')} {t:.0f} s" for m, t in
        sorted(c.module_s.items(), key=lambda kv: -kv[1])[:SLOWEST]) for c in cells]
    lines += ["", f"The {SLOWEST} slowest modules of each row:", "", *slow]
    broken = [f"- {c.mpi.name} · {c.place} · {c.setting}: {b}" for c in cells for b in c.broken]
    if broken:
        lines += ["", "Modules that ended without a summary:", "", *broken]
    lines += ["", "## Host", "", f"- CPU: {provenance.cpu_model()}",
              f"- kernel: {provenance.kernel()}",
              f"- date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
              f"- git revision: {rev}{' (with uncommitted changes)' if dirty else ''}", "",
              f"Command: `{COMMAND}`", ""]
    return "\n".join(lines)
