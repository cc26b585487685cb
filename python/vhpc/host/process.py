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

Concurrent commands can be made to overlap fully (`run_commands(refill_cwds=...)`,
the lab's `jobs = N`): a command whose first run ends before the others' is run
again, unmeasured, until every first run has ended, so that no measured run
spends part of its time alone.
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from vhpc.host import cgroups, leftovers, signals

HEAD_BYTES = 1 << 20
TAIL_BYTES = 1 << 20
GRACE_S = 0.2  # once every launcher has exited: how long others holding its pipes may go on
DRAIN_S = 1.0  # after the kill: how long to read what is still in the pipes
FILLER_BYTES = 64 << 10  # of a refill's output (discarded): head and tail kept for its error

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
    fillers: int = 0  # unmeasured reruns while other commands' first runs went on
    filler_problem: str = ""  # what went wrong in the refill that stopped them, if any

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
                 cwds: list[Path | None] | None = None,
                 refill_cwds: list[Path | None] | None = None) -> list[Outcome]:
    """Start every command at once, wait for all under one deadline, kill what remains.

    With `refill_cwds` (one per command), the commands overlap fully: a command
    whose first run has ended while another's first run goes on is run again in
    its refill_cwds entry, unmeasured (its output bounded to FILLER_BYTES and
    discarded), until every first run has ended; then the refills are killed.
    Only first runs make the outcomes; each counts its refills (`fillers`), and a
    refill that fails stops that command's refills and is named (`filler_problem`).

    Never hangs past `timeout` (plus the kill); never keeps more than the bounded
    output in memory; on any exception (a stop signal) kills everything first.
    """
    cwds = cwds or [None] * len(cmds)
    outcomes = [Outcome(None) for _ in cmds]
    deadline = time.monotonic() + timeout
    with _tracked(env) as launches:
        firsts = [launches.start(cmd, cwd, out, measured=True)
                  for cmd, cwd, out in zip(cmds, cwds, outcomes)]
        refill = None
        if refill_cwds is not None:
            refill = _Refills(launches, cmds, refill_cwds, firsts, outcomes).step
        _pump(launches.sel, firsts, deadline, refill)
        for proc, out in zip(firsts, outcomes):
            out.returncode = proc.poll()
    return outcomes


class _Launches:
    """Processes started into one tracking group (or recorded and killed by tree),
    their pipes and exits watched by one selector."""

    def __init__(self, env: dict[str, str], group: Path | None,
                 record: leftovers.Record | None) -> None:
        self.env, self.group, self.record = env, group, record
        self.sel = selectors.DefaultSelector()
        self.procs: list[subprocess.Popen] = []
        self.pidfds: list[int] = []

    def start(self, cmd: list[str], cwd: Path | None, out: Outcome,
              measured: bool) -> subprocess.Popen:
        argv = (["/bin/sh", "-c", _JOIN, "vhpc-join", str(self.group / "tasks"), *cmd]
                if self.group is not None else list(cmd))
        # stdin from /dev/null: mpiexec forwards its stdin to rank 0, and a
        # terminal's belongs to vhpc, not to the workload.
        proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=cwd, start_new_session=True)
        self.procs.append(proc)
        if self.record is not None:
            self.record.add(procs=[proc.pid])
        for pipe, capture in ((proc.stdout, out.stdout), (proc.stderr, out.stderr)):
            os.set_blocking(pipe.fileno(), False)
            self.sel.register(pipe, selectors.EVENT_READ, _Stream(capture, measured))
        pidfd = os.pidfd_open(proc.pid)  # readable once it exits: wakes the pump at once
        self.pidfds.append(pidfd)
        self.sel.register(pidfd, selectors.EVENT_READ, None)
        return proc

    def kill(self) -> None:
        """Kill everything started (and whatever still holds a pipe), read what is
        left in the pipes, close them."""
        if self.group is not None:
            cgroups.kill([self.group])
        else:
            for proc in self.procs:
                if proc.poll() is None:
                    kill_tree(proc.pid)
                else:  # reaped: its pid may be reused, its process group is still its own
                    _kill_group(proc.pid)
        for proc in self.procs:
            proc.wait()
        _drain(self.sel, time.monotonic() + DRAIN_S)
        for proc in self.procs:
            proc.stdout.close()
            proc.stderr.close()
        for pidfd in self.pidfds:
            os.close(pidfd)
        self.sel.close()


@dataclass
class _Stream:
    capture: Capture
    measured: bool  # a first run's (refills' output does not hold the pump)


@contextmanager
def _tracked(env: dict[str, str]) -> Iterator[_Launches]:
    """A _Launches in a recorded tracking group of its own; everything killed on exit."""
    # libvhpc_wait knows this name (runtime/wait.c, tracking_group): a group that only
    # tracks is not one that may freeze its ranks, so it leaves their waits alone.
    name = f"{cgroups.PREFIX}{os.getpid()}-run{next(_launches)}"
    with ExitStack() as stack:
        group = cgroups.FREEZER / name if tracking_available() else None
        record = None
        if group is not None:
            stack.enter_context(leftovers.owned_groups([group]))
            group.mkdir()
        else:
            record = leftovers.Record(name)
        launches = _Launches(env, group, record)
        try:
            yield launches
        finally:
            with signals.deferred():
                launches.kill()
                if record is not None:
                    record.release()


class _Refills:
    """Reruns each command whose latest run has ended while a first run goes on."""

    def __init__(self, launches: _Launches, cmds: list[list[str]], cwds: list[Path | None],
                 firsts: list[subprocess.Popen], outcomes: list[Outcome]) -> None:
        self.launches, self.cmds, self.cwds = launches, cmds, cwds
        self.firsts, self.outcomes = firsts, outcomes
        self.latest = list(zip(firsts, outcomes))

    def step(self) -> None:
        for i, (proc, out) in enumerate(self.latest):
            if all(first.poll() is not None for first in self.firsts):
                return  # every first run has ended: nothing left to overlap
            code = proc.poll()
            if code is None or self.outcomes[i].filler_problem:
                continue
            if code != 0:  # a failed run is not rerun: it would only fail again, at once
                if out is not self.outcomes[i]:
                    out.returncode = code
                    self.outcomes[i].filler_problem = \
                        f"refill {self.outcomes[i].fillers}: {out.problem()}"
                continue
            filler = Outcome(None, Capture(FILLER_BYTES, FILLER_BYTES),
                             Capture(FILLER_BYTES, FILLER_BYTES))
            self.latest[i] = (self.launches.start(self.cmds[i], self.cwds[i], filler,
                                                  measured=False), filler)
            self.outcomes[i].fillers += 1


def _read(sel: selectors.BaseSelector, timeout: float) -> None:
    for key, _ in sel.select(timeout):
        if key.data is None:  # a pidfd: its process has exited
            sel.unregister(key.fileobj)
            continue
        try:
            data = os.read(key.fd, 1 << 16)
        except BlockingIOError:
            continue
        if data:
            key.data.capture.feed(data)
        else:
            sel.unregister(key.fileobj)


def _pump(sel: selectors.BaseSelector, procs: list[subprocess.Popen], deadline: float,
          refill: Callable[[], None] | None = None) -> None:
    """Read until every process of `procs` exited and its pipes closed (or GRACE_S
    passed), or the deadline; `refill` is called at every wake-up until they exited."""
    all_exited_at = None
    while (now := time.monotonic()) < deadline:
        exited = all(p.poll() is not None for p in procs)
        measured_open = any(key.data is not None and key.data.measured
                            for key in sel.get_map().values())
        if exited and not measured_open:
            return
        if exited and all_exited_at is None:
            all_exited_at = now
        if all_exited_at is not None and now - all_exited_at > GRACE_S:
            return
        if refill is not None and not exited:
            refill()
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


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
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
