"""The `vhpc` command line: argument parsing and error display only.

Each face gets a subgroup of `main` (`runtime` now; `lab`, `sim`, `reproduce`,
`report` later) whose commands delegate to a module holding the logic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console

from vhpc import __version__, mpi, runtime as rt

F = TypeVar("F", bound=Callable[..., Any])

#: Exceptions that are user-facing failures: shown as a message, no traceback.
#: Each carries `message`, `exit_code` and optionally `output`.
USER_ERRORS: tuple[type[Exception], ...] = (rt.Error,)


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
    """libvhpc_wait: the adaptive MPI wait-policy library (build, locate)."""


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


if __name__ == "__main__":  # pragma: no cover
    main()
