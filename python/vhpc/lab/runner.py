"""Running an experiment: the grid of cells, checked up front, repeated in a
seeded shuffled order, every finished run stored at once.
Before and after each measured run the host's state is probed (the cache-line hop
between the two CPUs, vhpc.lab.hop) and stored as the run's metrics `host_hop_ns`
and `host_hop_after_ns`.

Each cell (mpi × config × workload × policy) runs `warmup` unrecorded times,
then once per repetition round; the order of cells is shuffled each round so
that drift of a noisy machine does not bias one configuration.

Before the first run: the results directory is locked and checked writable,
what dead vhpc runs left on the host is removed (or the run refuses to start),
and stored runs are verified (a damaged file is set aside and its run redone).
SIGINT, SIGTERM and SIGHUP stop the experiment alike, keeping every finished run.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vhpc import mpi
from vhpc import runtime as rt
from vhpc.host import cgroups, domains, leftovers, netns, placement, process, signals
from vhpc.lab import LabError, experiment, hop, store, workloads
from vhpc.lab.experiment import Cell, Config, Experiment

PLACEMENT_OF = {"native": placement.spread, "native_up": placement.shared_core,
                "capped": placement.capped_cgroups, "timesliced": placement.timesliced}

@dataclass(frozen=True)
class Pinned:
    """Rank r on CPU cpus[r % len(cpus)], set by a wrapper before the program starts."""

    cpus: tuple[int, ...]
    nranks: int
    kind: str = "pinned"

    def available(self) -> tuple[bool, str]:
        missing = sorted(set(self.cpus) - set(placement.allowed_cpus()))
        if missing:
            return False, f"CPUs {missing} are not allowed here ({placement.allowed_cpus()})"
        return True, "pinned by sched_setaffinity"

    @contextmanager
    def command(self, impl, argv, *, env=None, preload=None) -> Iterator[list[str]]:
        ranks = {r: ([], [self.cpus[r % len(self.cpus)]]) for r in range(self.nranks)}
        yield placement.confined_launch(impl, ranks, argv, env=env, preload=preload)


def placement_for(config: Config, nranks: int):
    if config.kind == "pinned":
        return Pinned(tuple(config.cpus), nranks)
    if config.kind == "domains":
        return domains_for(config, nranks)
    if config.kind == "timesliced" and config.hints:
        return placement.timesliced(nranks, hints=True)
    return PLACEMENT_OF[config.kind](nranks)


def domains_for(config: Config, nranks: int) -> domains.Domains:
    def domain(d) -> domains.Domain:
        return domains.Domain(d.name, tuple(d.cpus), d.weight, d.cap,
                              None if d.ranks is None else tuple(d.ranks), d.job)
    noise = config.noise
    return domains.Domains(
        tuple(domain(d) for d in config.domain), nranks, config.jobs or 1,
        config.mode or "linux", (config.slice_ms or 30) / 1000,
        config.work_conserving is not False, config.slices == "weight",
        noise and domains.Domain("noise", tuple(noise.cpus), noise.weight),
        config.slicing or "gang", channel=config.channel, hints=bool(config.hints),
        cosched=bool(config.cosched))


@contextmanager
def launch_commands(place, impl, argv, *, env, preload, network=None
                    ) -> Iterator[list[list[str]]]:
    """One command per concurrent job (several only for `domains` with `jobs`)."""
    if isinstance(place, domains.Domains):
        with place.commands(impl, argv, env=env, preload=preload, network=network) as cmds:
            yield cmds
    else:
        with place.command(impl, argv, env=env, preload=preload) as cmd:
            yield [cmd]


def unavailable(cell: Cell) -> str | None:
    """Why this cell cannot run here, naming what is missing, or None."""
    impl = mpi.MPIS[cell.mpi]
    if not impl.available():
        return f"MPI {cell.mpi} not installed ({impl.mpicc}): apt-get install {impl.package_hint}"
    ok, reason = placement_for(cell.config, cell.workload.ranks).available()
    if not ok:
        return f"config {cell.config.name} ({cell.config.kind}): {reason}"
    if cell.config.channel is not None:
        chosen, why = impl.channel_env(cell.config.channel, "")
        if chosen is None:
            return f"config {cell.config.name}: channel {cell.config.channel}: {why}"
    if cell.policy == "mpi-yield" and cell.mpi != "openmpi":
        return "policy mpi-yield is an Open MPI parameter (mpi_yield_when_idle)"
    if cell.policy not in ("default", "mpi-yield") and not rt.lib_path(cell.mpi).is_file():
        return f"libvhpc_wait for {cell.mpi} not built (run `vhpc runtime build`)"
    return workloads.unavailable(cell.workload, cell.mpi)


@dataclass
class Plan:
    runnable: list[Cell]
    blocked: list[tuple[Cell, str]]


def plan(exp: Experiment) -> Plan:
    names = exp.experiment.mpis or [i.name for i in mpi.available()] or list(mpi.MPIS)
    runnable, blocked = [], []
    for cell in experiment.cells(exp, names):
        reason = unavailable(cell)
        if reason is None:
            runnable.append(cell)
        else:
            blocked.append((cell, reason))
    return Plan(runnable, blocked)


@dataclass
class RunResult:
    status: str  # ok | failed | timeout | invalid
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)
    message: str = ""


def run_once(cell: Cell, timeout_s: float) -> RunResult:
    """One run of a cell; never raises for a failing program or a run that cannot
    be set up, kills it on timeout. cgroups.Stuck if what it ran cannot be removed.

    Concurrent jobs overlap fully: a job whose measured (first) run has ended is
    rerun, unmeasured, while another job's measured run goes on (process.run_commands)."""
    impl = mpi.MPIS[cell.mpi]
    place = placement_for(cell.config, cell.workload.ranks)
    env, preload = rt.policy_env(impl.name, cell.policy)
    network: list[netns.Network] = []
    with leftovers.scratch("vhpc-lab-") as tmp, ExitStack() as stack:
        try:
            cmds = stack.enter_context(launch_commands(
                place, impl, workloads.argv(cell.workload, cell.mpi), env=env, preload=preload,
                network=network))
            workdirs, refill_dirs = job_dirs(cell, tmp, len(cmds))
            launcher = (place.launcher_env(impl) if isinstance(place, domains.Domains)
                        else impl.launcher_env())
            before = network[0].bytes() if network else 0
        except (OSError, placement.PlacementUnavailable, netns.NetnsUnavailable) as exc:
            return RunResult("failed", message=f"cannot set up the run: {exc}")
        try:
            outcomes = process.run_commands(cmds, launcher, timeout_s, workdirs, refill_dirs)
        except OSError as exc:  # its tracking group or the launcher itself
            return RunResult("failed", message=f"cannot start the run: {exc}")
        crossed = network[0].bytes() - before if network else None
        results = [result_of(cell, out, workdir) for out, workdir in zip(outcomes, workdirs)]
    result = results[0] if len(results) == 1 else with_fillers(combine(results), outcomes)
    if crossed is not None and result.status == "ok":
        # what crossed the bridge during the run: evidence of the channel in every run
        result.metrics[BRIDGE_METRIC] = (float(crossed), "B")
    return result


#: Bytes through the bridge during a run of a domains config with a `channel`.
BRIDGE_METRIC = "bridge_bytes"


def job_dirs(cell: Cell, tmp: Path, jobs: int) -> tuple[list[Path], list[Path] | None]:
    """Prepared working directories: one per job (an external program may write
    files) and, with several jobs, one per job for its unmeasured reruns."""
    if jobs == 1:
        workdirs, refill_dirs = [tmp], None
    else:
        workdirs = [tmp / f"job{j}" for j in range(jobs)]
        refill_dirs = [tmp / f"job{j}-refill" for j in range(jobs)]
    for workdir in workdirs + (refill_dirs or []):
        workdir.mkdir(exist_ok=True)
        workloads.prepare(cell.workload, workdir)
    return workdirs, refill_dirs


def with_fillers(result: RunResult, outcomes: list[process.Outcome]) -> RunResult:
    """`fillers.job<j>`: how often job j was rerun to overlap the others. A rerun
    that failed fails the run: the others' measured runs lost their load."""
    metrics = result.metrics | {f"fillers.job{j}": (float(out.fillers), "count")
                                for j, out in enumerate(outcomes)}
    broken = [f"job {j}: unmeasured {out.filler_problem}"
              for j, out in enumerate(outcomes) if out.filler_problem]
    if not broken:
        return RunResult(result.status, metrics, result.message)
    status = min((result.status, "failed"), key=WORST_FIRST.index)
    return RunResult(status, metrics, "; ".join([result.message, *broken]).lstrip("; "))


WORST_FIRST = ("timeout", "failed", "invalid", "ok")


def combine(results: list[RunResult]) -> RunResult:
    """One run of several concurrent jobs: the worst status; per metric `m`, each
    job's `m.job<j>`, their mean `m` and their sample standard deviation `m.sd_jobs`
    (S0 reports the mean time and its spread across the co-running domUs)."""
    status = min((r.status for r in results), key=WORST_FIRST.index)
    message = "; ".join(f"job {j}: {r.message}" for j, r in enumerate(results) if r.message)
    metrics: dict[str, tuple[float, str]] = {}
    for j, result in enumerate(results):
        metrics |= {f"{name}.job{j}": mu for name, mu in result.metrics.items()}
    if status == "ok":
        for name, (_, unit) in results[0].metrics.items():
            values = [r.metrics[name][0] for r in results if name in r.metrics]
            if len(values) == len(results):
                metrics[name] = (statistics.fmean(values), unit)
                metrics[f"{name}.sd_jobs"] = (statistics.stdev(values), unit)
    return RunResult(status, metrics, message)


def size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def result_of(cell: Cell, out: process.Outcome, workdir: Path) -> RunResult:
    dropped = out.stdout.dropped
    too_long = (f"output of {size(out.stdout.total)}: kept the first {size(len(out.stdout.head))} "
                f"and the last {size(len(out.stdout.tail))}, dropped {size(dropped)}")
    if out.timed_out:
        return RunResult("timeout", message="timeout" + (f"; {too_long}" if dropped else ""))
    if out.problem():
        return RunResult("failed", message=out.problem())
    if dropped:
        return RunResult("failed", message=too_long)  # metrics from part of the output: no
    try:
        metrics = workloads.parse(cell.workload, out.stdout.text(), workdir)
    except workloads.Invalid as exc:
        return RunResult("invalid", message=str(exc))
    except workloads.RunFailed as exc:
        return RunResult("failed", message=str(exc))
    except Exception as exc:  # a parser bug costs one run, not the experiment
        return RunResult("failed", message=f"cannot parse the output: {type(exc).__name__}: {exc}")
    bad = workloads.problems(metrics)
    if bad:
        return RunResult("invalid", metrics, "; ".join(bad))
    return RunResult("ok", metrics)


def run(path: Path, out: Path | None = None, *, reps: int | None = None,
        skip_unavailable: bool = False, console: Console | None = None) -> dict:
    """Run (or resume) the experiment in `path`; returns counts of what happened."""
    console = console or Console(stderr=True)
    counts = {"ran": 0, "skipped": 0, "ok": 0, "failed": 0, "timeout": 0, "invalid": 0}
    where = ""
    with signals.stopping():
        try:
            exp = experiment.load(path)
            out = out or Path("results") / exp.experiment.name
            where = f" in {out}"
            return run_experiment(path, exp, out, reps, skip_unavailable, console, counts)
        except KeyboardInterrupt as stop:  # Ctrl-C, or signals.Stopped for SIGTERM / SIGHUP
            signum = getattr(stop, "signum", 2)
            how = f" ({stop.name})" if isinstance(stop, signals.Stopped) else ""
            raise LabError(f"interrupted{how}: {counts['ran']} finished runs kept{where}; "
                           "run the same command again to resume", exit_code=128 + signum) from None


def run_experiment(path: Path, exp: Experiment, out: Path, reps: int | None,
                   skip_unavailable: bool, console: Console, counts: dict) -> dict:
    settings = exp.experiment
    reps = reps or settings.repetitions
    the_plan = plan(exp)
    report_blocked(the_plan, skip_unavailable, path, console)
    if not the_plan.runnable:
        raise LabError(f"{path}: no cell can run here")
    experiment.check_size(path, len(the_plan.runnable), reps, settings.warmup)
    with store.Writer(out) as writer:
        clear_leftovers(console)
        done = writer.verified_keys(console)
        jobs = pending(settings.name, the_plan.runnable, reps, settings.seed, done)
        skipped = len(the_plan.runnable) * reps - len(jobs)
        counts["skipped"] = skipped
        if skipped:
            console.print(f"resuming: {skipped} runs already stored in {out} are skipped")
        try:
            execute(exp, jobs, writer, counts, console)
        except store.StoreError as exc:
            raise LabError(f"{exc}; the experiment stops here: {counts['ran']} finished runs "
                           f"are kept in {out}; free space (or fix {out}) and run the same "
                           "command again to resume", exit_code=1) from None
        except cgroups.Stuck as exc:
            raise LabError(f"{exc}; the experiment stops here: {counts['ran']} finished runs "
                           f"are kept in {out}; `vhpc lab cleanup` says what is left",
                           exit_code=1) from None
    console.print(f"{counts['ran']} runs ({counts['ok']} ok, {counts['failed']} failed, "
                  f"{counts['timeout']} timed out, {counts['invalid']} invalid) stored in {out}")
    return counts


def clear_leftovers(console: Console) -> None:
    """Remove what dead vhpc runs left on this host, or refuse to measure beside it."""
    report = leftovers.cleanup()
    for line in report.cleaned:
        console.print(f"[yellow]cleaned up:[/] {line}", highlight=False)
    if report.problems:
        raise LabError("leftovers of dead vhpc runs could not be removed; measuring beside "
                       "them would be measuring them too:\n" +
                       "\n".join(f"  {p}" for p in report.problems))


def report_blocked(the_plan: Plan, skip: bool, path: Path, console: Console) -> None:
    if not the_plan.blocked:
        return
    lines = [f"  {cell.label}: {reason}" for cell, reason in the_plan.blocked]
    if not skip:
        raise LabError(f"{path}: {len(lines)} cells cannot run here "
                       "(--skip-unavailable drops them):\n" + "\n".join(lines))
    console.print(f"[yellow]skipping {len(lines)} cells that cannot run here:[/]")
    for line in lines:
        console.print(line, markup=False, highlight=False)


def pending(name: str, cells: list[Cell], reps: int, seed: int,
            done: set[str]) -> list[tuple[Cell, int]]:
    """(cell, repetition) still to run: rounds in order, cells shuffled in each round.

    Every round is shuffled whether or not it runs, so a resumed experiment keeps
    the order the uninterrupted one would have had.
    """
    rng = random.Random(seed)
    jobs = []
    for rep in range(reps):
        order = cells[:]
        rng.shuffle(order)
        jobs += [(c, rep) for c in order if store.run_key(name, c, rep) not in done]
    return jobs


def execute(exp: Experiment, jobs: list[tuple[Cell, int]], writer: store.Writer, counts: dict,
            console: Console) -> None:
    settings = exp.experiment
    warm = list({cell.label: cell for cell, _ in jobs}.values()) * settings.warmup
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[now]}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(settings.name, total=len(warm) + len(jobs), now="")
        for cell in warm:
            progress.update(task, now=f"warm-up: {cell.label}")
            run_once(cell, settings.timeout_s)
            progress.advance(task)
        for cell, rep in jobs:
            progress.update(task, now=f"rep {rep + 1}: {cell.label}")
            hop_ns = hop.now()
            started, t0 = datetime.now(timezone.utc), time.monotonic()
            result = run_once(cell, settings.timeout_s)
            after_ns = hop.now()
            for metric, value in ((hop.METRIC, hop_ns), (hop.METRIC_AFTER, after_ns)):
                if value is not None and result.status == "ok":
                    result.metrics[metric] = (value, "ns")
            writer.append(experiment=settings.name, cell=cell, repetition=rep,
                         status=result.status, metrics=result.metrics,
                         message=result.message, wall_s=time.monotonic() - t0,
                         started_at=started)
            counts["ran"] += 1
            counts[result.status] += 1
            if result.status != "ok":
                progress.console.print(f"[red]{result.status}[/] {cell.label} rep {rep + 1}: "
                                       f"{result.message}", highlight=False)
            progress.advance(task)
