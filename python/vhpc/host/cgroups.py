"""cgroup v1 groups that vhpc creates: where they live, what runs in them, and
killing and removing them so that nothing survives.

Every group vhpc makes is named `vhpc-<pid>-<what>` under a controller's root,
<pid> being the process that made it. Killing goes by membership, not by
session or process tree: a task that calls setsid() or double-forks is still in
its group. Freezer groups are frozen first so that no task can fork while the
others are being killed, and thawed afterwards so the pending SIGKILLs land (a
frozen task never dies).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CPU = Path("/sys/fs/cgroup/cpu")
FREEZER = Path("/sys/fs/cgroup/freezer")
CPUSET = Path("/sys/fs/cgroup/cpuset")
ROOTS = (CPU, FREEZER, CPUSET)
PREFIX = "vhpc-"
_OWNER = re.compile(rf"^{PREFIX}(\d+)-")

FREEZE_WAIT_S = 1.0  # a task in uninterruptible sleep may hold FREEZING; go on after this


def is_ours(path: Path) -> bool:
    """A vhpc group somewhere below a controller root (never the root itself)."""
    path = Path(path)
    return (any(root in path.parents for root in ROOTS)
            and any(p.name.startswith(PREFIX) for p in [path, *path.parents]))


def owner_pid(name: str) -> int | None:
    """The pid in a top-level group's name `vhpc-<pid>-...`."""
    m = _OWNER.match(name)
    return int(m.group(1)) if m else None


def top_level() -> list[Path]:
    """Every vhpc group directly under a controller root, whoever made it."""
    return sorted(g for root in ROOTS if root.is_dir() for g in root.glob(f"{PREFIX}*"))


def below(group: Path, name: str = "") -> list[Path]:
    """`group`'s file `name` and that of every group below it, or with no name, the groups
    below it. Groups removed meanwhile are passed over (os.walk ignores them; Path.rglob
    raises): another vhpc command may be cleaning up while this one looks."""
    found = []
    for parent, dirs, files in os.walk(group):
        if not name:
            found += [Path(parent) / d for d in dirs]
        elif name in files:
            found.append(Path(parent) / name)
    return found


#: What a group's file answers once the group is gone, or going (a group being removed
#: answers ENODEV).
GONE = (errno.ENOENT, errno.ENODEV)


def _read(path: Path) -> str:
    """A group file's text, or "" when its group is gone."""
    try:
        return path.read_text()
    except OSError as exc:
        if exc.errno in GONE:
            return ""
        raise


def _ids(listing: Path) -> set[int]:
    try:
        return {int(t) for t in _read(listing).split()}
    except ValueError:
        return set()


def tasks(group: Path) -> set[int]:
    """Thread ids in `group` and every group below it."""
    return set().union(*map(_ids, below(group, "tasks")))


def procs(group: Path) -> set[int]:
    """Processes (thread group ids) in `group` and every group below it."""
    return set().union(*map(_ids, below(group, "cgroup.procs")))


def frozen_procs(group: Path) -> set[int]:
    """Processes of `group` whose freezer group (or one above it, inside `group`) is not thawed."""
    found: set[int] = set()
    for state in below(group, "freezer.state"):
        if freezer_state(state.parent) not in ("THAWED", ""):
            found |= procs(state.parent)
    return found


def freezer_state(group: Path) -> str:
    return _read(Path(group) / "freezer.state").strip()


def set_freezer(group: Path, state: str) -> None:
    try:
        (Path(group) / "freezer.state").write_text(state)
    except OSError as exc:
        if exc.errno not in GONE:
            raise


def thaw_all(group: Path) -> None:
    """Thaw `group` and every freezer group below it (the Slicer freezes the children)."""
    for state in sorted(below(group, "freezer.state"), key=lambda p: len(p.parts)):
        set_freezer(state.parent, "THAWED")


class Stuck(RuntimeError):
    """A vhpc group that cannot be emptied or removed (a task in uninterruptible sleep)."""


@dataclass
class Killed:
    procs: int = 0   # processes sent SIGKILL
    frozen: int = 0  # of which were frozen when found


def kill(groups: list[Path], timeout: float = 10.0) -> Killed:
    """SIGKILL every task in `groups` and below until none is left.

    Freezer groups are frozen first (no fork can escape the count), then every
    freezer group below them is thawed so that the signals are delivered.
    Stuck if tasks survive `timeout` (uninterruptible sleep).
    """
    groups = [Path(g) for g in groups if Path(g).is_dir()]
    freezers = [g for g in groups if (g / "freezer.state").exists()]
    result = Killed(frozen=len(set().union(*(frozen_procs(g) for g in groups))))
    for group in freezers:
        set_freezer(group, "FROZEN")
    deadline = time.monotonic() + FREEZE_WAIT_S
    while time.monotonic() < deadline and any(freezer_state(g) == "FREEZING" for g in freezers):
        time.sleep(0.001)
    deadline = time.monotonic() + timeout
    killed: set[int] = set()
    # `tasks`, not `cgroup.procs`: a thread group whose leader has exited is still there.
    while tids := set().union(*(tasks(g) for g in groups)):
        killed |= set().union(*(procs(g) for g in groups))
        for tid in tids:
            try:
                os.kill(tid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for group in freezers:
            thaw_all(group)
        if time.monotonic() > deadline:
            raise Stuck(f"processes {sorted(tids)} in {', '.join(map(str, groups))} "
                        "survive SIGKILL")
        time.sleep(0.005)
    for group in freezers:
        thaw_all(group)
    result.procs = len(killed)
    return result


def remove(group: Path, timeout: float = 10.0) -> Killed:
    """Kill what runs in `group`, then remove it and its children, deepest first."""
    return remove_all([group], timeout)


def remove_all(groups: list[Path], timeout: float = 10.0) -> Killed:
    """Kill what runs in any of `groups` (all frozen together), then remove them."""
    groups = [Path(g) for g in groups if Path(g).is_dir()]
    killed = kill(groups, timeout)
    deadline = time.monotonic() + timeout
    for group in groups:
        for sub in sorted(below(group), key=lambda p: -len(p.parts)):
            _rmdir(sub, deadline)
        _rmdir(group, deadline)
    return killed


def _rmdir(path: Path, deadline: float) -> None:
    # A killed task may leave its group a moment after it disappears from `tasks`.
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise Stuck(f"cannot remove {path}: {exc.strerror}") from exc
            time.sleep(0.01)
