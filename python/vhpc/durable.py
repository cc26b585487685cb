"""Files that survive a crash: a Parquet table written whole or not at all.

The lab's results (lab/store.py) and the simulator's sweeps (sim/sweep_store.py)
keep one small Parquet file per finished run or point. Each is written under a
temporary name, fsynced and renamed, and the directory fsynced, so a SIGKILL or
a power cut leaves either the whole file or none, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def write_parquet(table: pa.Table, final: Path) -> Path:
    """Write `table` to `final` atomically and durably (parents created).

    Pages are checksummed and carry no statistics (which would repeat values
    outside them), so a reader can tell a stored value that changed on disk.
    OSError if it cannot be written; nothing is left half-written either way."""
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            pq.write_table(table, f, write_page_checksum=True, write_statistics=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
