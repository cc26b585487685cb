"""The `vhpc` command line: argument parsing and error display only.

Each face gets a subgroup of `main` (`runtime` now; `lab`, `sim`, `reproduce`,
`report` later) whose commands delegate to a module holding the logic.
"""

from __future__ import annotations

import functools
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from vhpc import __version__, mpi, runtime_bench, runtime as rt

F = TypeVar("F", bound=Callable[..., Any])

#: Exceptions that are user-facing failures: shown as a message, no traceback.
#: Each carries `message`, `exit_code` and optionally `output`.
USER_ERRORS: tuple[type[Exception], ...] = (rt.Error, runtime_bench.BenchError)


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


@click.group(name="vhpc", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="vhpc")
def main() -> None:
    """Run tightly coupled parallel programs well on virtualized hosts."""


@main.group()
def runtime() -> None:
    """libvhpc_wait: the adaptive MPI wait-policy library (build, locate, measure)."""


@runtime.command()
@click.option(
    "--mpi",
    "mpis",
    multiple=True,
    type=click.Choice(list(mpi.MPIS)),
    help="Build only for this MPI (repeatable). Default: every installed MPI.",
)
@reports_errors
def build(mpis: tuple[str, ...]) -> None:
    """Build libvhpc_wait for each installed MPI."""
    rt.build(mpis or None, console=stderr_console())


@runtime.command()
@click.option(
    "--mpi",
    "name",
    required=True,
    type=click.Choice(list(mpi.MPIS)),
    help="Which MPI's build of the library.",
)
@reports_errors
def path(name: str) -> None:
    """Print the absolute path of libvhpc_wait built for an MPI (for LD_PRELOAD)."""
    click.echo(str(rt.path(name)))


@runtime.command()
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the table, host facts and target checks as Markdown here.")
@click.option("--reps", type=click.IntRange(min=1), default=5, show_default=True,
              help="Repetitions of every configuration (medians are reported).")
@reports_errors
def bench(out: Path | None, reps: int) -> None:
    """Measure MPI x placement x wait policy (8-byte latency, 1 MiB bandwidth) in one run."""
    runtime_bench.run_bench(out, reps=reps)


@runtime.command()
@reports_errors
def demo() -> None:
    """Two ranks sharing one core: MPI default against libvhpc_wait's adaptive policy."""
    runtime_bench.run_demo()


if __name__ == "__main__":  # pragma: no cover
    main()
