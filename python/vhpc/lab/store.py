"""The results dataset: one small Parquet file per finished run, long format.

`<dir>/run-<key>.parquet` holds one row per metric of one run. A file is written
under a temporary name, fsynced and renamed (and the directory fsynced), so an
interrupted experiment or a crashed machine keeps every finished run and never
leaves half a file; the key (a hash of experiment, cell and repetition) lets a
rerun skip what is already stored. A rerun verifies every file it skips (it
reads, its pages match their checksums, it has the schema and holds its own
key) and sets a damaged one aside in
`<dir>/.damaged/` to run it again; readers skip damaged files and say so.
One `vhpc lab run` at a time writes a directory: `<dir>/.lock` is flock()ed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from vhpc import durable, mpi as mpis
from vhpc.provenance import cpu_model, git_revision, kernel
from vhpc.lab import LabError
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
STATUSES = ("ok", "failed", "timeout", "invalid")
MESSAGE_LIMIT = 2000  # characters of a run's message kept
LOCK = ".lock"
DAMAGED = ".damaged"


class StoreError(Exception):
    """A finished run could not be written (disk full, directory gone, ...)."""


def run_key(experiment: str, cell: Cell, repetition: int) -> str:
    """Stable across runs and machines: a hash of what was asked for, not of when."""
    text = json.dumps([experiment, cell.as_dict(), repetition], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def path_of(out: Path, key: str) -> Path:
    return out / f"run-{key}.parquet"


def key_of(path: Path) -> str:
    return path.name.removeprefix("run-").removesuffix(".parquet")


def check(path: Path) -> str | None:
    """Why the run file at `path` cannot be trusted, or None if it can."""
    return load(path)[1]


def load(path: Path) -> tuple[pa.Table | None, str | None]:
    """(the run file's table, None) if it can be trusted, else (None, why not)."""
    try:
        schema = pq.read_schema(path)
        if not schema.equals(SCHEMA, check_metadata=False):
            return "not the results schema"
        table = pq.read_table(path, schema=SCHEMA, page_checksum_verification=True)
    except (OSError, pa.ArrowException, ValueError) as exc:
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return None, f"unreadable: {text}"
    if table.num_rows == 0:
        return None, "no rows"
    keys = set(table.column("run_key").to_pylist())
    if keys != {key_of(path)}:
        return None, f"holds run key {', '.join(sorted(map(str, keys)))}, not {key_of(path)}"
    statuses = set(table.column("status").to_pylist())
    if len(statuses) != 1 or not statuses <= set(STATUSES):
        return None, f"status {sorted(map(str, statuses))}"
    return table, None


def scan(out: Path) -> tuple[dict[str, Path], list[tuple[Path, str]]]:
    """({key: file} of the sound run files, [(file, why)] of the damaged ones)."""
    good, damaged = {}, []
    for path in sorted(Path(out).glob("run-*.parquet")):
        why = check(path)
        if why is None:
            good[key_of(path)] = path
        else:
            damaged.append((path, why))
    return good, damaged


def stored_keys(out: Path) -> set[str]:
    return set(scan(out)[0])


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
    """Write one finished run durably and atomically; a run without metrics still
    gets one row. StoreError if it cannot be written (nothing is left half-written)."""
    assert status in STATUSES, status
    key = run_key(experiment, cell, repetition)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + f" [... {len(message) - MESSAGE_LIMIT} more characters]"
    base = {"run_key": key, "experiment": experiment, "mpi": cell.mpi,
            "config": cell.config.name, "workload": cell.workload.name,
            "policy": cell.policy, "repetition": repetition, "status": status,
            "message": message, "wall_s": wall_s, "started_at": started_at,
            **provenance(cell.mpi), "cell": json.dumps(cell.as_dict(), sort_keys=True)}
    items = sorted(metrics.items()) or [("", (None, ""))]
    rows = [{**base, "metric": name, "value": value, "unit": unit}
            for name, (value, unit) in items]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    final = path_of(out, key)
    try:
        durable.write_parquet(table, final)
    except OSError as exc:
        raise StoreError(f"cannot store run {key} in {out}: {exc.strerror or exc}") from exc
    return final


class Writer:
    """The one `vhpc lab run` writing a results directory: holds `<out>/.lock` while
    open, checked writable on entry (LabError naming --out, before any run)."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self._lock: int | None = None

    def __enter__(self) -> "Writer":
        out = self.out
        try:
            out.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LabError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock, 64, 0).decode(errors="replace").strip() or "?"
            os.close(self._lock)
            raise LabError(f"--out {out}: another `vhpc lab run` (pid {holder}) is writing "
                           "there; wait for it to finish or choose another --out") from None
        try:
            os.ftruncate(self._lock, 0)
            os.pwrite(self._lock, f"{os.getpid()}\n".encode(), 0)
            probe = out / f".probe.{os.getpid()}"
            with open(probe, "wb") as f:
                f.write(b"\0" * 4096)
                f.flush()
                os.fsync(f.fileno())
            probe.unlink()
        except OSError as exc:
            self.__exit__()
            raise LabError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
        for stale in out.glob(".run-*.tmp"):  # a writer killed mid-write; we hold the lock
            stale.unlink(missing_ok=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def append(self, **run) -> Path:
        return append(self.out, **run)

    def verified_keys(self, console: Console) -> set[str]:
        """Keys of the sound stored runs; damaged files moved to .damaged/ to be rerun."""
        good, damaged = scan(self.out)
        if damaged:
            aside = self.out / DAMAGED
            aside.mkdir(exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%S")
            for path, why in damaged:
                os.replace(path, aside / f"{path.name}.{stamp}")
                console.print(f"[yellow]damaged:[/] {path.name} ({why}): moved to "
                              f"{aside.name}/, its run is done again", highlight=False)
        return set(good)


def read(out: Path, on_damaged: Callable[[Path, str], None] | None = None):
    """Every sound stored run as one pandas DataFrame (empty, with the columns, if
    none); each damaged file is skipped and passed to `on_damaged`."""
    tables = []
    for path in sorted(Path(out).glob("run-*.parquet")):
        table, why = load(path)
        if table is not None:
            tables.append(table)
        elif on_damaged is not None:
            on_damaged(path, why)
    if not tables:
        return SCHEMA.empty_table().to_pandas()
    return pa.concat_tables(tables).to_pandas()
