"""The hint channel's shared file: one 4 KiB page per domain under /dev/shm.

libvhpc_wait (runtime/hints.c) publishes each rank's state in its slot of its
domain's page; the native slicer (crates/vhpc-slicer/src/hints.rs) reads them and
hands the CPUs over at once when every rank of the running domain waits. This
module creates the file (zeroed, with the header's magic, version and page
count; the slicer fills in its queues and members when it starts), names each
rank's slot for the per-rank wrapper, and reads slots back (tests, diagnostics).
The layout is documented in docs/runtime.md ("The hint channel").
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vhpc.host import leftovers, signals

PAGE = 4096
MAGIC = 0x544E4948  # "HINT" in the file's first four bytes
VERSION = 1
SLOTS = 64          # ranks per domain page (64 bytes each)
QUEUES = 15         # slicers (sets of groups taking turns) per file
MEMBERS = 96        # freezer groups (domains, or vCPUs) per file
SHM = Path("/dev/shm")

KINDS = {0: "none", 1: "compute", 2: "wait", 3: "coll", 4: "done"}
KINDS_BY_NAME = {name: kind for kind, name in KINDS.items()}
SLEEP = 0x10
PARKABLE = 0x20


def describe_state(state: int) -> str:
    """`wait+parkable+sleep`-style name of a state word."""
    parts = [KINDS.get(state & 0xF, f"kind{state & 0xF}")]
    parts += [name for bit, name in ((PARKABLE, "parkable"), (SLEEP, "sleep")) if state & bit]
    return "+".join(parts)


def env_for(path: Path, domain: int, slot: int) -> dict[str, str]:
    """What libvhpc_wait reads: the file, the rank's domain page and slot."""
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot {slot} out of range: a domain page holds {SLOTS} ranks")
    return {"VHPC_HINTS": str(path), "VHPC_HINT_DOMAIN": str(domain),
            "VHPC_HINT_SLOT": str(slot)}


def write_header(path: Path, pages: int) -> None:
    """A zeroed file of 1 + `pages` pages with the header's magic, version and count."""
    with open(path, "wb") as f:
        f.truncate(PAGE * (1 + pages))
        f.write(struct.pack("<II", MAGIC, VERSION))
        f.seek(20)
        f.write(struct.pack("<I", pages))


@contextmanager
def hint_file(pages: int) -> Iterator[Path]:
    """A fresh hint file for `pages` domains in a recorded directory under /dev/shm
    (tmpfs: the pages are memory), removed on the way out."""
    base = SHM if SHM.is_dir() else None
    folder = Path(tempfile.mkdtemp(prefix="vhpc-hints-", dir=base))
    record = leftovers.Record(folder.name, dirs=[folder])
    try:
        path = folder / "page"
        write_header(path, pages)
        yield path
    finally:
        with signals.deferred():
            shutil.rmtree(folder, ignore_errors=True)
            record.release()


def read_slot(path: Path, domain: int, slot: int) -> tuple[int, int, int]:
    """(state, member + 1, pid) of a slot, as stored now."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return struct.unpack_from("<III", m, PAGE * (1 + domain) + 64 * slot)


def read_header(path: Path) -> dict[str, int]:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        magic, version, bell, listening, flags, pages = struct.unpack_from("<6I", m, 0)
    return {"magic": magic, "version": version, "bell": bell, "listening": listening,
            "flags": flags, "pages": pages}


def read_member(path: Path, member: int) -> dict[str, int]:
    """A member's words (docs/runtime.md, "The hint channel"), as stored now."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        words = struct.unpack_from("<7I", m, 1024 + 32 * member)
    return dict(zip(("run", "queue", "frozen", "granted", "domain", "poll", "sleepers"), words))


def file_size(path: Path) -> int:
    return os.stat(path).st_size
