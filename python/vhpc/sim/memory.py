"""How much memory a simulation may take: the estimate, the limit, the refusal.

Before a scenario is built, the native core estimates the memory simulating it
needs (`vhpc._core.estimate_memory`, the Rust `vhpc_sim::footprint`), by
contributor. A scenario (or a batch run in parallel) whose estimate exceeds the
limit is refused with a `SimError` naming the estimate, the limit and the
largest contributors, before anything is allocated. The limit is
``--max-memory`` on the command line, `max_memory` in `vhpc.sim`; by default
half of this machine's memory (the smaller of MemTotal and the cgroup's
limit). docs/sim.md ("Memory") says how close the estimate comes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from vhpc import _core

#: Share of the machine's memory a simulation may take by default.
DEFAULT_SHARE = 0.5
#: The smallest limit accepted: less would refuse every scenario.
MIN_LIMIT = 1 << 20

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


class SizeError(ValueError):
    """A size that does not parse; its message says what is expected."""


def parse_size(text: str) -> int:
    """Bytes of a size such as ``2G``, ``500M``, ``1.5GiB`` or ``750MB``.

    K, M, G and T are powers of 1024 (with or without ``B`` / ``iB``); a bare
    number is bytes. Raises SizeError for anything else and below 1M.
    """
    match = _SIZE.match(text)
    if not match:
        raise SizeError(f"expected a size such as 2G or 500M (K, M, G, T: powers of 1024), "
                        f"got {text!r}")
    number, unit = match.groups()
    size = int(float(number) * _UNITS[unit.lower()])
    if size < MIN_LIMIT:
        raise SizeError(f"{text!r} is {size} bytes: the limit must be at least 1M")
    return size


def format_size(size: float) -> str:
    """``1.5 GiB``, ``312 MiB``, ``48 KiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(size)} B"


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def machine_memory() -> tuple[int, str]:
    """This machine's memory for vhpc, and what it is: MemTotal, or the
    memory cgroup's limit when that is smaller."""
    total = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if total is None:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    what = "memory"
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        limit = _read_int(path)
        if limit is not None and limit < total:
            total, what = limit, "cgroup memory limit"
    return total, what


def default_limit() -> tuple[int, str]:
    """The default limit and how it was found, for messages."""
    total, what = machine_memory()
    return int(total * DEFAULT_SHARE), f"half of this machine's {format_size(total)} {what}"


def _limit(max_memory: int | None) -> tuple[int, str]:
    if max_memory is None:
        return default_limit()
    return max_memory, "--max-memory"


def _estimate(text: str, origin: str, trace: str) -> list[tuple[str, int]]:
    from vhpc.sim.run import SimError

    try:
        return _core.estimate_memory(text, origin, trace)
    except ValueError as exc:
        raise SimError(str(exc)) from None


def _parts(parts: Sequence[tuple[str, int]], n: int = 3) -> str:
    """The `n` largest contributors (the allocator's share is no contributor)."""
    named = [(what, size) for what, size in parts if size and what != "allocator slack"]
    return ", ".join(f"{what} {format_size(size)}" for what, size in named[:n])


def _refuse(what: str, estimate: int, parts: str, limit: int, why: str):
    from vhpc.sim.run import SimError

    return SimError(f"{what} needs about {format_size(estimate)} of memory to simulate ({parts}), "
                    f"more than the limit of {format_size(limit)} ({why}); nothing was run. "
                    "Shrink the scenario, or raise the limit with --max-memory SIZE "
                    "(max_memory= in vhpc.sim) if the machine has the room")


def check(text: str, origin: str, max_memory: int | None = None, *, trace: str = "off",
          ) -> list[tuple[str, int]]:
    """The estimate of scenario `text` by contributor; SimError (exit 2) if it
    exceeds `max_memory` (None: the default limit) or the scenario is invalid."""
    parts = _estimate(text, origin, trace)
    estimate = sum(size for _, size in parts)
    limit, why = _limit(max_memory)
    if estimate > limit:
        raise _refuse(origin, estimate, _parts(parts), limit, why)
    return parts


def check_batch(batch: Sequence[tuple[str, str, int | None]], max_memory: int | None = None,
                *, threads: int | None = None) -> int:
    """Estimate of a batch run in parallel (`run_texts`): the largest `threads`
    scenarios (default: one per CPU) at once, and every report kept; SimError if
    it exceeds the limit, naming the largest scenario. Returns the estimate."""
    threads = threads or os.cpu_count() or 1
    limit, why = _limit(max_memory)
    totals, reports = [], 0
    largest: tuple[int, str, list[tuple[str, int]]] | None = None
    known: dict[str, list[tuple[str, int]]] = {}  # the seeds of one scenario share its text
    for text, origin, _ in batch:
        parts = known.get(text)
        if parts is None:
            parts = known[text] = _estimate(text, origin, "off")
        total = sum(size for _, size in parts)
        report = sum(size for what, size in parts if what == "report")
        totals.append(total - report)
        reports += report
        if largest is None or total > largest[0]:
            largest = (total, origin, parts)
    if largest is None:
        return 0
    estimate = reports + sum(sorted(totals)[-threads:])
    if estimate > limit:
        total, origin, parts = largest
        if len(batch) == 1:
            raise _refuse(origin, estimate, _parts(parts), limit, why)
        detail = (f"{min(threads, len(batch))} of {len(batch)} scenarios at a time; the largest, "
                  f"{origin}, about {format_size(total)}: {_parts(parts)}")
        raise _refuse("the batch", estimate, detail, limit, why)
    return estimate
