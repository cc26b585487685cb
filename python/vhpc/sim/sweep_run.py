"""`vhpc sim sweep`: every point of a sweep as one Dask task, stored as it finishes.

The client (this process) expands and validates the sweep, skips the points
already stored, and submits one task per remaining point to a Dask cluster: a
local one of one single-threaded worker process per core by default, or any
running scheduler (`--scheduler tcp://host:port`; docs/sim.md shows one on
Slurm through dask-jobqueue). A task runs the native engine (`simulate`, which
releases the GIL, so the worker keeps answering its scheduler) and returns the
point's metrics; the client writes each point's file as its task finishes, in
whatever order. Dask reruns a task whose worker died on another worker, and
the task is a pure function of its scenario, so a lost worker costs time, not
points. Workers never write: only the client does, one file per point.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhpc.sim.run import SimError, run_text
from vhpc.sim.sweep import Point, Sweep
from vhpc.sim import sweep_store

if TYPE_CHECKING:
    from distributed import Client
    from rich.console import Console

#: How long to wait for a `--scheduler` to answer, or for a worker to join it.
CONNECT_TIMEOUT_S = 30


def simulate(scenario: str, origin: str, max_memory: int | None = None) -> dict[str, Any]:
    """The task: run one point's scenario, return its metrics (not the whole
    report: a large host's report is megabytes the client does not need)."""
    run = run_text(scenario, origin, max_memory=max_memory)
    return {"metrics": sweep_store.metrics(run.report), "seed": run.report["seed"],
            "sim_wall_s": run.wall_s, "worker": f"{socket.gethostname()}:{os.getpid()}"}


@contextmanager
def client(scheduler: str | None, workers: int | None) -> Iterator["Client"]:
    """A Dask client: of `scheduler` if given, else of a local cluster of `workers`
    single-threaded worker processes (default one per core) on loopback."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            c = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise SimError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
        with c:
            yield c
        return
    n = workers or os.cpu_count() or 1
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            Client(cluster) as c:
        yield c


def task_key(point: Point) -> str:
    """Unique to the point's scenario, so a shared scheduler never confuses two
    sweeps' points, and the same on a resubmission."""
    return f"vhpc-point-{point.id}-{point.scenario_sha}"


@dataclass
class Outcome:
    total: int
    skipped: int
    ran: int
    wall_s: float
    workers: int


def run(sweep: Sweep, out: Path, *, scheduler: str | None = None, workers: int | None = None,
        max_memory: int | None = None, console: "Console | None" = None) -> Outcome:
    """Run (or resume) `sweep` into `out`; see the module's docstring."""
    from distributed import as_completed
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    points = sweep.points()
    sweep.validate(points, max_memory)
    start = time.perf_counter()
    with sweep_store.Store(sweep, out).locked() as store:
        store.write_manifest(len(points))
        done = store.done(points)
        todo = [p for p in points if p.id not in done]
        progress = Progress(TextColumn(f"{sweep.name}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("points"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=console, transient=False)
        n_workers = 0
        with progress:
            bar = progress.add_task("points", total=len(points), completed=len(done))
            if todo:
                with client(scheduler, workers) as c:
                    n_workers = wait_for_workers(c, scheduler)
                    by_key = {task_key(p): p for p in todo}
                    futures = [c.submit(simulate, p.scenario, p.origin, max_memory,
                                        key=k, pure=False)
                               for k, p in by_key.items()]
                    try:
                        for fut in as_completed(futures):
                            point = by_key[fut.key]
                            store.write(point, result_of(fut, point))
                            fut.release()
                            progress.advance(bar)
                    finally:
                        c.cancel(futures)
    return Outcome(len(points), len(done), len(todo), time.perf_counter() - start, n_workers)


def wait_for_workers(c: "Client", scheduler: str | None) -> int:
    """The number of workers once at least one has joined (SimError after CONNECT_TIMEOUT_S)."""
    try:
        c.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise SimError(f"--scheduler {scheduler}: no worker joined within "
                       f"{CONNECT_TIMEOUT_S} s") from None
    return len(c.scheduler_info(n_workers=-1)["workers"])


def result_of(fut, point: Point) -> dict[str, Any]:
    """The task's result; SimError naming the point if it failed (a worker that
    died too often under it, the memory limit on the worker's machine)."""
    try:
        return fut.result()
    except SimError:
        raise
    except Exception as exc:  # KilledWorker, a worker's import error, ...
        raise SimError(f"{point.origin}: the simulation failed on the cluster: "
                       f"{type(exc).__name__}: {exc}", exit_code=1) from None
