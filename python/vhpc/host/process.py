"""Running programs with a deadline and bounded output, leaving no process behind.

Shared by the runtime benchmark and `vhpc lab`. Each launch runs in a freezer
group of its own, `vhpc-<pid>-run<n>` (recorded first, host/leftovers.py): the
launcher joins it before it execs, and everything it starts stays in it whatever
session it makes, so a timeout, a stop signal or the end of the run kills the
whole tree by membership (host/cgroups.py). Without a writable freezer the
launcher starts its own session and the tree is killed by session and parentage,
which a grandchild calling setsid() escapes.

Output is read as bytes and bounded: the first and the last HEAD_BYTES and
TAIL_BYTES of each stream are kept and the bytes in between only counted; text
is decoded leniently (an invalid byte becomes U+FFFD).
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
import selectors
import signal
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from vhpc.host import cgroups, leftovers, signals

HEAD_BYTES = 1 << 20
TAIL_BYTES = 1 << 20
GRACE_S = 0.2  # once every launcher has exited: how long others holding its pipes may go on
DRAIN_S = 1.0  # after the kill: how long to read what is still in the pipes

# Joins the freezer group named by $1, then execs the rest; if the group is gone
# (its run is over) it never runs the program.
_JOIN = 'echo $$ > "$1" && shift && exec "$@"'

_launches = itertools.count()


class Capture:
    """One output stream: its head and tail kept, its length counted."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self._tail.append(data)
            self._tail_len += len(data)
            # drop whole chunks from the front while the rest still fills the tail
            while self._tail_len - len(self._tail[0]) >= self.tail_limit:
                self._tail_len -= len(self._tail.popleft())

    @property
    def tail(self) -> bytes:
        return b"".join(self._tail)[-self.tail_limit:] if self.tail_limit else b""

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept bytes decoded leniently, with a marker where bytes were dropped."""
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes dropped ...]\n{tail}"
        return head + tail


@dataclass
class Outcome:
    returncode: int | None  # None: still running at the deadline, killed
    stdout: Capture = field(default_factory=Capture)
    stderr: Capture = field(default_factory=Capture)

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def problem(self) -> str:
        """What went wrong, in one line; "" for a clean exit."""
        if self.timed_out:
            return "timeout"
        if self.returncode == 0:
            return ""
        if self.returncode < 0:
            try:
                return f"killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        lines = self.stderr.text().strip().splitlines()
        return f"exit {self.returncode}: {(lines or ['no message'])[-1][:160]}"


@functools.cache
def tracking_available() -> bool:
    """Whether launches can be tracked by a freezer group here (probed once)."""
    root = cgroups.FREEZER
    probe = root / f"{cgroups.PREFIX}{os.getpid()}-probe-run"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def run_commands(cmds: list[list[str]], env: dict[str, str], timeout: float,
                 cwds: list[Path | None] | None = None) -> list[Outcome]:
    """Start every command at once, wait for all under one deadline, kill what remains.

    Never hangs past `timeout` (plus the kill); never keeps more than the bounded
    output in memory; on any exception (a stop signal) kills everything first.
    """
    cwds = cwds or [None] * len(cmds)
    name = f"{cgroups.PREFIX}{os.getpid()}-run{next(_launches)}"
    procs: list[subprocess.Popen] = []
    outcomes = [Outcome(None) for _ in cmds]
    with ExitStack() as stack:
        group = cgroups.FREEZER / name if tracking_available() else None
        if group is not None:
            stack.enter_context(leftovers.owned_groups([group]))
            group.mkdir()
            record = None
        else:
            record = leftovers.Record(name)
        sel = selectors.DefaultSelector()
        stack.callback(sel.close)
        try:
            for cmd, cwd, out in zip(cmds, cwds, outcomes):
                argv = (["/bin/sh", "-c", _JOIN, "vhpc-join", str(group / "tasks"), *cmd]
                        if group is not None else list(cmd))
                # stdin from /dev/null: mpiexec forwards its stdin to rank 0, and a
                # terminal's belongs to vhpc, not to the workload.
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        cwd=cwd, start_new_session=True)
                procs.append(proc)
                if record is not None:
                    record.add(procs=[proc.pid])
                for pipe, capture in ((proc.stdout, out.stdout), (proc.stderr, out.stderr)):
                    os.set_blocking(pipe.fileno(), False)
                    sel.register(pipe, selectors.EVENT_READ, capture)
            _pump(sel, procs, time.monotonic() + timeout)
            for proc, out in zip(procs, outcomes):
                out.returncode = proc.poll()
        finally:
            with signals.deferred():
                if group is not None:
                    cgroups.kill([group])  # whoever still holds a pipe goes too
                else:
                    for proc in procs:
                        kill_tree(proc.pid)
                for proc in procs:
                    proc.wait()
                _drain(sel, time.monotonic() + DRAIN_S)
                for proc in procs:
                    proc.stdout.close()
                    proc.stderr.close()
                if record is not None:
                    record.release()
    return outcomes


def _read(sel: selectors.BaseSelector, timeout: float) -> None:
    for key, _ in sel.select(timeout):
        try:
            data = os.read(key.fd, 1 << 16)
        except BlockingIOError:
            continue
        if data:
            key.data.feed(data)
        else:
            sel.unregister(key.fileobj)


def _pump(sel: selectors.BaseSelector, procs: list[subprocess.Popen], deadline: float) -> None:
    """Read until every process exited and its pipes closed (or GRACE_S passed), or the deadline."""
    all_exited_at = None
    while (now := time.monotonic()) < deadline:
        if not sel.get_map():  # every pipe closed: only the exits are left to wait for
            try:
                for proc in procs:
                    proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            return
        if all_exited_at is None and all(p.poll() is not None for p in procs):
            all_exited_at = now
        if all_exited_at is not None and now - all_exited_at > GRACE_S:
            return
        _read(sel, min(deadline - now, 0.05))


def _drain(sel: selectors.BaseSelector, deadline: float) -> None:
    while sel.get_map() and (now := time.monotonic()) < deadline:
        _read(sel, deadline - now)


def run_command(cmd: list[str], env: dict[str, str], timeout: float,
                cwd: Path | None = None) -> tuple[str | None, str]:
    """(stdout, "") on success, else (None, what went wrong). Never hangs past `timeout`."""
    (outcome,) = run_commands([cmd], env, timeout, [cwd])
    if outcome.problem():
        return None, outcome.problem()
    return outcome.stdout.text(), ""


def kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant (untracked launches only)."""
    victims = [pid, *descendants(pid)]
    for target in victims:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
