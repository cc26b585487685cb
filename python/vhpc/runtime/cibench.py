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

import itertools
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

from vhpc import bootstrap, paths, provenance
from vhpc import runtime as rt
from vhpc.host import signals
from vhpc.host.process import run_commands
from vhpc.runtime import cistore, launch, wheels

COMMAND = "make bench-ci"
RANKS = 4
#: Placement label -> CPUs the job is confined to.
PLACEMENTS = {"2 CPUs": "0-1", "1 CPU": "0"}
CAP_S = 100.0
#: Where a module capped in every setting is run once more, the MPI as is, to tell
#: the MPI's own hangs from waiting's: as many ranks as CPUs, nothing over-committed.
CHECK_PLACE, CHECK_RANKS = "2 CPUs", 2
SLOWEST = 5
#: Issue 11's rule for "at least as fast as the MPI's best own setting": the upper end
#: of the ratio's 95 % interval at most this (compared unrounded).
OWN_BEST_LIMIT = 1.10
#: Modules that start processes (MPI_Comm_spawn): left out, as CI setups do when
#: the launcher has no slots to spare.
SKIP = ("test_spawn", "test_dynproc")

#: Interleaved writes glue one rank's pieces to another's ("Ran 12 tests in
#: 1.2sRan 12 tests in 1.3s", "OKOK"): a summary piece starts a line or follows
#: another rank's piece, so neither is anchored to a line start alone.
_RAN = re.compile(r"Ran (\d+) tests? in ")
_END = re.compile(r"(?:^|(?<=OK)|(?<=FAILED)|(?<=\ds))(?:OK|FAILED)(?=OK|FAILED|[ (]|$)", re.M)
#: unittest's " (failures=1, skipped=12)" after OK or FAILED, a write of its own.
_FIELDS = re.compile(r"\(((?:[a-z ]+=\d+, )*[a-z ]+=\d+)\)$", re.M)


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
    """The suite's counts from every rank's unittest summary. The ranks run the same
    tests, but their summaries share one stream and may interleave: unittest writes
    "OK" and " (skipped=12)" separately, so another rank's line can come between. So
    each figure is the largest any rank printed, wherever its line was cut."""
    ran = [int(n) for n in _RAN.findall(stderr)]
    if not ran or not _END.search(stderr):
        return None
    seen: dict[str, int] = {}
    for group in _FIELDS.findall(stderr):
        for key, n in (kv.split("=") for kv in group.split(", ")):
            seen[key] = max(seen.get(key, 0), int(n))
    return Counts(max(ran), seen.get("failures", 0) + seen.get("errors", 0),
                  seen.get("skipped", 0))


@dataclass
class Outcome:
    """One module's job under one cell: its wall time, the suite's counts (None when
    it printed no summary), whether it hit the cap, and why it ended without a summary."""

    seconds: float
    counts: Counts | None
    capped: bool = False
    broken: str = ""
    finished_at: str = ""  #: when, for a job read back from the store
    revision: str = ""
    host: str = ""
    rerun: str = ""  #: why this is a second run: what the first one printed (SILENT)

    @classmethod
    def from_row(cls, row: dict) -> Outcome:
        counts = None if row["ran"] is None else Counts(row["ran"], row["failed"], row["skipped"])
        return cls(row["seconds"], counts, row["capped"], row["broken"], row["finished_at"],
                   row["git_revision"], row["host"] or "", row["rerun"] or "")


@dataclass
class Cell:
    mpi: wheels.WheelMpi
    place: str
    setting: str  #: "default", an MPI_POLICIES name, or "vhpc run"
    outcomes: dict[str, Outcome] = field(default_factory=dict)  #: each module's median run
    runs: dict[str, list[Outcome]] = field(default_factory=dict)  #: every run of a module

    def add(self, module: str, outcome: Outcome) -> None:
        """One more run of `module`; the module's outcome is its median run by wall time
        (the lower of two middle ones), a whole run, so its counts are that run's."""
        runs = self.runs.setdefault(module, [])
        runs.append(outcome)
        self.outcomes[module] = sorted(runs, key=lambda o: o.seconds)[(len(runs) - 1) // 2]

    def seconds(self, mods: list[str]) -> float:
        return sum(self.outcomes[m].seconds for m in mods)

    def counts(self, mods: list[str]) -> Counts:
        total = Counts()
        for c in (self.outcomes[m].counts for m in mods):
            if c is not None:
                total.ran, total.failed, total.skipped = (
                    total.ran + c.ran, total.failed + c.failed, total.skipped + c.skipped)
        return total

    def capped(self, mods: list[str]) -> list[str]:
        return [m for m in mods if self.outcomes[m].capped]

    def finished(self, mods: list[str]) -> set[str]:
        """Modules that ended with a summary, not capped."""
        return {m for m in mods if not self.outcomes[m].capped
                and self.outcomes[m].counts is not None}


def command(cell: Cell, test: Path, module: str,
            ranks: int = RANKS) -> tuple[list[str], dict[str, str], launch.Plan | None]:
    """(argv, launcher environment, vhpc run's plan, whose doorbell file is removed
    after) of one module under one cell's setting."""
    prog = [str(cell.mpi.python), str(test / "main.py"), "-q", module]
    env = {k: v for k, v in cell.mpi.launcher_env().items()
           if not k.startswith(("VHPC_", "MPIR_CVAR_", "I_MPI_", "OMPI_MCA_")) and k != "LD_PRELOAD"}
    plan = None
    if cell.setting == "vhpc run":
        base = cell.mpi.launch(ranks, prog)
        plan = launch.plan(base, environ=env, cpus=len(_cpus(cell.place)))
        argv, env = plan.argv, {**env, **plan.launcher_env}
    else:
        rank_env = rt.MPI_POLICIES.get(cell.setting, {})
        argv = cell.mpi.launch(ranks, prog, env=rank_env)
    return ["taskset", "-c", PLACEMENTS[cell.place], *argv], env, plan


def _cpus(place: str) -> list[int]:
    lo, _, hi = PLACEMENTS[place].partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run_module(cell: Cell, test: Path, module: str, cap: float, ranks: int = RANKS) -> Outcome:
    """Run one module as one job under the cell's setting; its outcome, also kept in
    cell.outcomes. A job whose launcher exits 0 without a unittest summary the parser
    can read is run once more, and the table names it with what its streams held. (The
    one such stream kept held the ranks' summaries glued together, which the parser
    now reads: the rule stays for a summary truly lost on its way out.)"""
    try:
        argv, env, plan = command(cell, test, module, ranks)
    except rt.Error as exc:  # vhpc run refuses this MPI: the cell's every module says why
        cell.outcomes[module] = Outcome(0.0, None, broken=f"vhpc run refused: {exc.message}")
        return cell.outcomes[module]
    outcome = _run_job(argv, env, plan, test, cap)
    if outcome.broken.startswith(SILENT):
        first = outcome.broken
        outcome = _run_job(*command(cell, test, module, ranks), test, cap)
        outcome.rerun = first
    cell.outcomes[module] = outcome
    return outcome


#: How a job that exited 0 without a summary is marked (and then run again).
SILENT = "no summary, exit 0"


def _run_job(argv: list[str], env: dict[str, str], plan: launch.Plan | None, test: Path,
             cap: float) -> Outcome:
    start = time.monotonic()
    try:
        (out,) = run_commands([argv], env, cap, [test])
    finally:  # the ranks remove it at MPI_Init: this is for a job that died before
        if plan is not None:
            plan.remove_doorbell()
    took = time.monotonic() - start
    counts = parse(out.stderr.text())
    broken = ""
    if not out.timed_out and counts is None:
        # What the streams held, to tell a lost summary from tests that never ran.
        tail = out.stderr.text()[-120:]
        broken = out.problem() or (f"{SILENT} (stderr {out.stderr.total} bytes, stdout "
                                   f"{out.stdout.total}; stderr ends {tail!r})")
    return Outcome(took, counts, out.timed_out, broken)


def _kind(setting: str) -> str:
    """default, own (the MPI's own settings) or vhpc."""
    return setting if setting == "default" else "vhpc" if setting == "vhpc run" else "own"


def settings(m: wheels.WheelMpi) -> list[str]:
    return ["default", *rt.library.own_policies(m.family, m.version), "vhpc run"]


def run_bench(out: Path | None, *, mpis: list[str] | None = None, only: list[str] | None = None,
              places: list[str] | None = None, kinds: list[str] | None = None,
              cap: float = CAP_S, ranks: int = RANKS, store: Path = cistore.ROOT,
              fresh: bool = False, kept_only: bool = False, command_line: str = COMMAND,
              console: Console | None = None, repeat: int = 1) -> list[Cell]:
    """Run every job not yet stored, in groups of one MPI and placement (2 CPUs first),
    module by module across the group's settings, so that an interrupted run leaves
    whole comparisons; then the table."""
    console = console or Console()
    mpis = mpis or [*wheels.DEBIAN, *wheels.SPECS]
    found, missing = wheels.debian_mpis([m for m in mpis if m in wheels.DEBIAN]) \
        if any(m in wheels.DEBIAN for m in mpis) else ([], {})
    wheel_found, wheel_missing = wheels.mpis([m for m in mpis if m in wheels.SPECS]) \
        if any(m in wheels.SPECS for m in mpis) else ([], {})
    found, missing = found + wheel_found, {**missing, **wheel_missing}
    for name, why in missing.items():
        console.print(f"[yellow]skipping {name}: {why}[/yellow]")
    if not kept_only:
        rt.build([m.name for m in found], prefixes=wheels.prefixes(wheel_found))
    test = suite_dir()
    mods = only or modules(test)
    if fresh:
        cistore.clear(store)
    groups = [g for g in ([Cell(m, p, s) for s in settings(m) if not kinds or _kind(s) in kinds]
                          for p in (places or list(PLACEMENTS)) for m in found) if g]
    checks = {m.name: Cell(m, CHECK_PLACE, "default") for m in found}
    run_jobs(groups, checks, mods, test, cap, store, console, ranks=ranks, run=not kept_only,
             repeat=repeat)
    text = markdown([c for g in groups for c in g], mods, cap, checks=list(checks.values()),
                    ranks=ranks, command_line=command_line)
    console.print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(f"wrote {out}")
    return [c for g in groups for c in g]


def run_jobs(groups: list[list[Cell]], checks: dict[str, Cell], mods: list[str], test: Path,
             cap: float, store: Path, console: Console, *, ranks: int = RANKS,
             run: bool = True, repeat: int = 1) -> None:
    """Every job of every group not yet stored (`repeat` runs of each), module by module
    across a group's settings; a module capped in every setting of a group is checked once
    without over-commitment (own_failures). With run=False, only the stored jobs are read.
    Every kept run counts, also beyond `repeat`."""
    jobs = _Jobs(test, cap, store, cistore.revision(), provenance.host(), run)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    try:  # SIGTERM and SIGHUP too: the running job's processes are killed, as for Ctrl-C
        with signals.stopping(), Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("ci bench",
                                     total=len(mods) * sum(map(len, groups)) * repeat)
            for group in groups:
                kept = reusable(group, mods, cap, ranks, store, jobs.host, run, repeat)
                for module in mods:
                    for cell in group:
                        cell.runs.pop(module, None)  # what is kept is the whole story
                        cell.outcomes.pop(module, None)
                        for row in kept.get((cell.setting, module), []):
                            cell.add(module, Outcome.from_row(row))
                    for again in range(repeat):  # the settings side by side, run by run
                        for cell in group:
                            if len(cell.runs.get(module, [])) <= again:
                                progress.update(task, description=f"{cell.mpi.name} · "
                                                f"{cell.place} · {cell.setting} · {module}")
                                jobs.job(cell, module, ranks)
                            progress.advance(task)
                    check = checks[group[0].mpi.name]
                    if all(module in c.outcomes and c.outcomes[module].capped for c in group) \
                            and module not in check.outcomes:
                        progress.update(task, description=f"{check.mpi.name} · {module} · "
                                        f"{CHECK_RANKS} ranks on {CHECK_PLACE}, as is")
                        # A one-job group: reused from any recorded host, as a whole group is.
                        rows = reusable([check], [module], cap, CHECK_RANKS, store, jobs.host,
                                        run)[(check.setting, module)][:1]
                        for row in rows:
                            check.add(module, Outcome.from_row(row))
                        if not rows:
                            jobs.job(check, module, CHECK_RANKS)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: every finished job is kept in {store}; run the "
                          "same command again to go on") from None


class Interrupted(rt.Error):
    exit_code = 130


def reusable(group: list[Cell], mods: list[str], cap: float, ranks: int, store: Path,
             here: str, run: bool = True, repeat: int = 1) -> dict[tuple[str, str], list[dict]]:
    """{(setting, module): kept runs} of one group (an MPI and placement) that this run
    reuses. A group compares its settings with each other, so its jobs must come from one
    machine: a whole group kept from one host (`repeat` runs of every job) is reused as it
    is (the table names the host); otherwise only the runs kept on this host, and the rest
    run here again. Runs kept before hosts were recorded are never reused. With run=False,
    everything kept."""
    rows = {(c.setting, m): cistore.load_runs(store, c, m, ranks=ranks, cap=cap)
            for c in group for m in mods}
    hosts = {row["host"] for runs in rows.values() for row in runs}
    whole = all(len(runs) >= repeat for runs in rows.values())
    if not run or (whole and len(hosts) == 1 and None not in hosts):
        return rows
    # Only the leading runs from here: a run is kept under its index, so a later one
    # would be overwritten by the first rerun.
    return {key: list(itertools.takewhile(lambda row: row["host"] == here, runs))
            for key, runs in rows.items()}


@dataclass
class _Jobs:
    """How this run gets a job's outcome: run here and kept (if `run`)."""

    test: Path
    cap: float
    store: Path
    revision: str  #: git's, read once: it takes about a second here
    host: str
    run: bool = True

    def job(self, cell: Cell, module: str, ranks: int) -> None:
        """Run the job once more and keep it as its next run."""
        if not self.run:
            return
        again = len(cell.runs.get(module, []))
        outcome = run_module(cell, self.test, module, self.cap, ranks)
        kept = cistore.save(self.store, cell, module, outcome, ranks=ranks, cap=self.cap,
                            revision=self.revision, host=self.host, run=again)
        outcome.finished_at, outcome.revision, outcome.host = (
            kept["finished_at"], kept["git_revision"], self.host)
        cell.add(module, outcome)


def own_failures(checks: list[Cell]) -> dict[str, dict[str, str]]:
    """{MPI key: {module: what happened}} for the modules that were capped in every
    setting of a group and also hang or fail with CHECK_RANKS ranks on CHECK_PLACE as
    is: nothing over-committed and nothing preloaded, so the MPI's (or the suite's)
    own problem, not waiting's. They are left out of the comparison."""
    found: dict[str, dict[str, str]] = {}
    for check in checks:
        for module, o in check.outcomes.items():
            if o.capped or o.broken or (o.counts and o.counts.failed):
                why = ("capped" if o.capped else o.broken or
                       f"{o.counts.failed} of {o.counts.ran} tests failed")
                found.setdefault(check.mpi.name, {})[module] = why
    return found


def vs_own_best(c: Cell, group: list[Cell], done: list[str]) -> str:
    """`vhpc run` over the MPI's best own setting, summed over the modules every one
    of them finished, with its paired bootstrap interval; '' for other rows, 'none' for an
    MPI without settings of its own."""
    if _kind(c.setting) != "vhpc":
        return ""
    owns = [x for x in group if _kind(x.setting) == "own"]
    if not owns:
        return "none"
    mods = sorted(c.finished(done).intersection(*(x.finished(done) for x in owns)))
    best = min(owns, key=lambda x: x.seconds(mods))
    mine = [c.outcomes[m].seconds for m in mods]
    theirs = [best.outcomes[m].seconds for m in mods]
    if not mods or not sum(theirs):
        return ""
    ci = bootstrap.paired_sum_ratio_interval(mine, theirs)
    interval = f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else ""
    verdict = "" if not ci else ": met" if ci[1] <= OWN_BEST_LIMIT else ": not met"
    return f"{sum(mine) / sum(theirs):.2f}{interval} `{best.setting}`, {len(mods)}{verdict}"


def hosts(cells: list[Cell]) -> list[str]:
    """The footer's host lines: one when every job ran on one machine, else one per
    group (an MPI and placement), which reusable() keeps to one machine each."""
    groups: dict[str, list[str]] = {}
    for c in cells:
        for h in sorted({o.host or "not recorded" for o in c.outcomes.values()}):
            label = f"{c.mpi.inst.identity} on {c.place}"
            if label not in groups.setdefault(h, []):
                groups[h].append(label)
    if len(groups) <= 1:
        return [f"- host: {next(iter(groups), provenance.host())}"]
    return [f"- host {h}: {', '.join(labels)}" for h, labels in groups.items()]


def markdown(cells: list[Cell], mods: list[str], cap: float, *,
             checks: list[Cell] | None = None, ranks: int = RANKS,
             command_line: str = COMMAND) -> str:
    """The table over the modules every cell of a group (one MPI and placement) has
    finished, less the MPI's own failures."""
    failures = own_failures(checks or [])
    lines = [
        "# The CI-runner benchmark: mpi4py's test suite",
        "",
        f"Generated by `{command_line}`; do not edit by hand. {ranks} ranks; {len(mods)} modules of mpi4py "
        f"{wheels.MPI4PY.split('==')[1]}'s test suite, each its own job capped at "
        f"{cap:.0f} s (a capped module counts its cap and no tests). Counts are the largest any rank printed (the ranks run the same tests; their summaries share one stream). "
        f"A row sums the modules that every setting of its MPI and placement has run "
        f"(the *modules* column), less those that fail without over-commitment (below).",
        "",
        "The last columns compare a row with the MPI as is: its wall time over the "
        "row's (a capped module counted at its cap, so the as-is time is a lower bound), "
        "the same over only the modules that finished in both rows, and the modules that "
        "finished in both with different counts.",
        "",
        "For `vhpc run`, *vs own best* is its wall time over that of the MPI's best own "
        "setting (the smallest sum), over the modules they all finished, with a 95 % paired "
        "bootstrap interval (modules resampled); the target is met where the interval's "
        f"upper end is at most {OWN_BEST_LIMIT:.2f}, unrounded (issue 11's rule for \"at least as "
        "fast\"), and the column says so.",
        "",
        "| MPI | CPUs | setting | modules | wall s | tests run | passed | failed | skipped "
        "| capped modules | vs default | vs default, both finished | counts differ "
        "| vs own best (95 % interval) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    waiting, partly = [], []
    for c in cells:
        group = [x for x in cells if (x.mpi.name, x.place) == (c.mpi.name, c.place)]
        done = [m for m in mods if all(m in x.outcomes for x in group)
                and m not in failures.get(c.mpi.name, {})]
        if not done:  # nothing run yet in this group: named below the table
            if c is group[0]:
                waiting.append(f"{c.mpi.inst.identity} on {c.place}")
            continue
        ran = len(done) + len(failures.get(c.mpi.name, {}))
        if c is group[0] and ran < len(mods):
            partly.append(f"{c.mpi.inst.identity} on {c.place} ({ran} of {len(mods)} modules)")
        base = next((x for x in group if x.setting == "default"), None)
        gain = both = differ = ""
        if base not in (None, c) and c.seconds(done):
            gain = f"{base.seconds(done) / c.seconds(done):.1f}×"
            common = sorted(c.finished(done) & base.finished(done))
            mine = c.seconds(common)
            both = f"{base.seconds(common) / mine:.1f}× ({len(common)})" if mine else ""
            differ = ", ".join(m.removeprefix("test_") for m in common
                               if c.outcomes[m].counts != base.outcomes[m].counts) or "none"
        n = c.counts(done)
        capped = ", ".join(m.removeprefix("test_") for m in c.capped(done)) or "–"
        lines.append(f"| {c.mpi.inst.identity} | {c.place} | {c.setting} | {len(done)} "
                     f"| {c.seconds(done):.0f} | {n.ran} | {n.passed} | {n.failed} "
                     f"| {n.skipped} | {capped} | {gain} | {both} | {differ} "
                     f"| {vs_own_best(c, group, done)} |")
    if partly:
        lines += ["", f"Run in part so far (`{command_line}` goes on with them): "
                  f"{', '.join(partly)}."]
    if waiting:
        lines += ["", f"Not run yet (`{command_line}` goes on with them): {', '.join(waiting)}."]
    if failures:
        lines += ["", f"Left out: modules capped in every setting of a placement that also "
                  f"hang or fail with {CHECK_RANKS} ranks on {CHECK_PLACE}, the MPI as is "
                  "(nothing over-committed, nothing preloaded):", ""]
        names = {c.mpi.name: c.mpi.inst.identity for c in cells}
        lines += [f"- {names.get(key, key)}: " + ", ".join(
            f"{m.removeprefix('test_')} ({why})" for m, why in sorted(mods_.items()))
            for key, mods_ in failures.items()]
    slow = [f"- {c.mpi.inst.identity} · {c.place} · {c.setting}: " + ", ".join(
        f"{m.removeprefix('test_')} {o.seconds:.0f} s" for m, o in
        sorted(c.outcomes.items(), key=lambda kv: -kv[1].seconds)[:SLOWEST])
        for c in cells if c.outcomes]
    lines += ["", f"The {SLOWEST} slowest modules of each row:", "", *slow]
    broken = [f"- {c.mpi.name} · {c.place} · {c.setting}: {m}: {o.broken}"
              for c in cells for m, o in c.outcomes.items() if o.broken]
    if broken:
        lines += ["", "Modules that ended without a summary:", "", *broken]
    repeated = [f"- {c.mpi.inst.identity} · {c.place} · {c.setting}: " + ", ".join(
        f"{m.removeprefix('test_')} " + " / ".join(f"{o.seconds:.1f}" for o in runs) + " s"
        for m, runs in c.runs.items() if len(runs) > 1) for c in cells
        if any(len(runs) > 1 for runs in c.runs.values())]
    if repeated:
        lines += ["", "Modules run more than once (`--repeat`): each counts its median run "
                  "(the lower middle one of an even number); every run's wall time:", "",
                  *repeated]
    rerun = [f"- {c.mpi.name} · {c.place} · {c.setting}: {m}: {o.rerun}"
             for c in cells for m, o in c.outcomes.items() if o.rerun]
    if rerun:
        lines += ["", "Modules run a second time, because the first run's launcher exited 0 "
                  "without a summary the parser could read (the rows count the second run):",
                  "", *rerun]
    every = [o for c in cells for runs in c.runs.values() for o in runs] or \
        [o for c in cells for o in c.outcomes.values()]  # cells filled by hand have no runs
    stamps = sorted(o.finished_at for o in every if o.finished_at)
    revs = sorted({o.revision for o in every if o.revision})
    ran = f"{stamps[0]} to {stamps[-1]}" if stamps else \
        datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines += ["", "## Host", "", *hosts(cells),
              f"- jobs finished: {ran}",
              f"- git revision of the jobs: {', '.join(revs) or cistore.revision()} "
              "(`+`: with uncommitted changes)", "",
              f"Command: `{command_line}`", ""]
    return "\n".join(lines)
