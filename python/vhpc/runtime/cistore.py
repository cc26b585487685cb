"""The CI-runner benchmark's finished jobs, kept on disk (`results/ci-bench/`).

`make bench-ci` takes hours on a 2-CPU machine. Every module's job under one MPI,
placement and setting is written as soon as it ends, one small Parquet file each
(vhpc.durable: whole or not at all), so an interrupted run keeps every finished job
and the next run goes on where it stopped. A stored job is reused only when it ran
with the same number of ranks and the same cap; a damaged file is run again. Every
job records its host (provenance.host), so that one comparison is never made of two
machines' jobs (cibench.run_jobs decides what is reused).
"""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vhpc import durable, paths, provenance

ROOT = paths.REPO / "results" / "ci-bench"

SCHEMA = pa.schema([
    ("mpi", pa.string()), ("mpi_key", pa.string()), ("place", pa.string()),
    ("setting", pa.string()), ("module", pa.string()), ("ranks", pa.int32()),
    ("cap_s", pa.float64()), ("seconds", pa.float64()), ("capped", pa.bool_()),
    ("broken", pa.string()), ("ran", pa.int32()), ("failed", pa.int32()),
    ("skipped", pa.int32()), ("finished_at", pa.string()), ("git_revision", pa.string()),
    ("host", pa.string()),  # None in jobs kept before hosts were recorded
    ("rerun", pa.string()),  # why the job ran twice (cibench.run_module); None: it did not
])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


def path(root: Path, mpi_key: str, place: str, setting: str, module: str, ranks: int,
         run: int = 0) -> Path:
    """Where a job's `run`-th run is kept (0: the first; more with bench-ci --repeat)."""
    again = f"-{run + 1}" if run else ""
    return root / _slug(mpi_key) / _slug(place) / _slug(setting) / f"{module}-{ranks}r{again}.parquet"


def revision() -> str:
    """The git revision jobs run now are kept with (`+`: with uncommitted changes)."""
    rev, dirty = provenance.git_revision()
    return rev + ("+" if dirty else "")


def save(root: Path, cell, module: str, outcome, *, ranks: int, cap: float,
         revision: str, host: str, run: int = 0) -> dict:
    """Keep one finished job (a cibench.Cell's outcome for `module`), run at `revision`
    on `host`; the row kept."""
    counts = outcome.counts
    row = {"mpi": cell.mpi.inst.identity, "mpi_key": cell.mpi.name, "place": cell.place,
           "setting": cell.setting, "module": module, "ranks": ranks, "cap_s": cap,
           "seconds": outcome.seconds, "capped": outcome.capped, "broken": outcome.broken,
           "ran": counts.ran if counts else None, "failed": counts.failed if counts else None,
           "skipped": counts.skipped if counts else None,
           "finished_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "git_revision": revision, "host": host, "rerun": outcome.rerun or None}
    table = pa.Table.from_pylist([row], schema=SCHEMA)
    durable.write_parquet(table, path(root, cell.mpi.name, cell.place, cell.setting, module,
                                      ranks, run))
    return row


def load_runs(root: Path, cell, module: str, *, ranks: int, cap: float) -> list[dict]:
    """Every kept run of this job, up to the first missing one."""
    rows: list[dict] = []
    while (row := load(root, cell, module, ranks=ranks, cap=cap, run=len(rows))) is not None:
        rows.append(row)
    return rows


def load(root: Path, cell, module: str, *, ranks: int, cap: float, run: int = 0) -> dict | None:
    """The stored row of this job's `run`-th run, or None: never run, run with another
    cap, or damaged (then it runs again and the new file replaces it)."""
    file = path(root, cell.mpi.name, cell.place, cell.setting, module, ranks, run)
    if not file.exists():
        return None
    try:
        rows = pq.read_table(file, schema=SCHEMA, page_checksum_verification=True).to_pylist()
    except (OSError, pa.ArrowException):
        return None
    if len(rows) != 1 or rows[0]["cap_s"] != cap or rows[0]["module"] != module:
        return None
    return rows[0]


def clear(root: Path) -> None:
    """Forget every stored job (`--fresh`)."""
    shutil.rmtree(root, ignore_errors=True)
