"""SIGINT, SIGTERM and SIGHUP handled alike: the first one unwinds the program as
Ctrl-C does (every context manager removes what it made), later ones are ignored
so that this cleanup is not cut short, and one arriving while something is being
torn down waits until the teardown is over.

    with signals.stopping():       # around the whole command
        ...
        with signals.deferred():   # around a teardown that must run to its end
            ...
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; `signum` says which (exit status 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name


_depth = 0            # teardowns under way (deferred() nesting)
_pending: list[int] = []  # a signal that arrived during one
_fired = False        # Stopped already raised: ignore the rest


def _handler(signum, frame) -> None:
    global _fired
    if _fired:
        return
    if _depth:
        _pending.append(signum)
        return
    _fired = True
    raise Stopped(signum)


@contextmanager
def stopping() -> Iterator[None]:
    """Handle HANDLED signals as described above until the block ends (main thread only)."""
    global _fired
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in HANDLED}
    _fired = False
    _pending.clear()
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def deferred() -> Iterator[None]:
    """A signal arriving inside the block is raised when the block ends, not in it."""
    global _depth, _fired
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _pending and not _fired:
            signum = _pending[0]
            _pending.clear()
            _fired = True
            raise Stopped(signum)
