"""The results dataset: one small Parquet file per finished run, long format.

`<dir>/run-<key>.parquet` holds one row per metric of one run. A file is written
under a temporary name and renamed, so an interrupted experiment keeps every
finished run and never leaves half a file; the key (a hash of experiment, cell
and repetition) lets a rerun skip what is already stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vhpc import mpi as mpis
from vhpc.provenance import cpu_model, git_revision, kernel
from vhpc.lab.experiment import Cell

SCHEMA = pa.schema([
    ("run_key", pa.string()), ("experiment", pa.string()), ("mpi", pa.string()),
    ("config", pa.string()), ("workload", pa.string()), ("policy", pa.string()),
    ("repetition", pa.int32()), ("metric", pa.string()), ("value", pa.float64()),
    ("unit", pa.string()), ("status", pa.string()), ("message", pa.string()),
    ("wall_s", pa.float64()), ("started_at", pa.timestamp("us", tz="UTC")),
    ("host", pa.string()), ("cpu_model", pa.string()), ("kernel", pa.string()),
    ("mpi_version", pa.string()), ("git_revision", pa.string()), ("git_dirty", pa.bool_()),
    ("cell", pa.string()),
])
STATUSES = ("ok", "failed", "timeout")


def run_key(experiment: str, cell: Cell, repetition: int) -> str:
    """Stable across runs and machines: a hash of what was asked for, not of when."""
    text = json.dumps([experiment, cell.as_dict(), repetition], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def path_of(out: Path, key: str) -> Path:
    return out / f"run-{key}.parquet"


def stored_keys(out: Path) -> set[str]:
    return {p.stem.removeprefix("run-") for p in out.glob("run-*.parquet")}


@cache
def provenance(mpi: str) -> dict:
    """Where and with what the runs were made (the same for every run of one invocation)."""
    rev, dirty = git_revision()
    return {"host": socket.gethostname(), "cpu_model": cpu_model(),
            "kernel": kernel(),
            "mpi_version": mpis.MPIS[mpi].version if mpi in mpis.MPIS else "",
            "git_revision": rev, "git_dirty": dirty}


def append(out: Path, *, experiment: str, cell: Cell, repetition: int, status: str,
           metrics: dict[str, tuple[float, str]], message: str, wall_s: float,
           started_at) -> Path:
    """Write one finished run atomically; a run without metrics still gets one row."""
    assert status in STATUSES, status
    key = run_key(experiment, cell, repetition)
    base = {"run_key": key, "experiment": experiment, "mpi": cell.mpi,
            "config": cell.config.name, "workload": cell.workload.name,
            "policy": cell.policy, "repetition": repetition, "status": status,
            "message": message, "wall_s": wall_s, "started_at": started_at,
            **provenance(cell.mpi), "cell": json.dumps(cell.as_dict(), sort_keys=True)}
    items = sorted(metrics.items()) or [("", (None, ""))]
    rows = [{**base, "metric": name, "value": value, "unit": unit}
            for name, (value, unit) in items]
    out.mkdir(parents=True, exist_ok=True)
    final = path_of(out, key)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp)
    os.replace(tmp, final)
    return final


def read(out: Path):
    """Every stored run as one pandas DataFrame (empty, with the columns, if none)."""
    files = sorted(Path(out).glob("run-*.parquet"))
    if not files:
        return SCHEMA.empty_table().to_pandas()
    return pa.concat_tables(pq.read_table(f, schema=SCHEMA) for f in files).to_pandas()
