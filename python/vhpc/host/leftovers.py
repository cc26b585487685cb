"""Owner files: whatever vhpc creates on the host is written down first, so that a
vhpc process that dies without cleaning up (SIGKILL, out of memory, a crash)
leaves a note of what is left and whose it was.

A record `<state dir>/<name>.json` names the creating process (pid, its start
time and the boot, so a reused pid is not mistaken for it) and the cgroups,
scratch directories and untracked processes it is about to create; it is
written before they exist and removed once they are gone. `cleanup()` takes the
records whose owner no longer runs, thaws, kills and removes what they name, and
says what it did. A group `vhpc-<pid>-...` that no record names (made by a vhpc
older than these records) is cleaned once no process <pid> runs; so is a network
namespace `vhpc-<pid>-...` (host/netns.py) that no record names.

Two things call cleanup(): every vhpc command, first; and a watchdog that the
first record of a process starts, which waits for that process to end (an end
of file on a pipe only the process holds) and cleans up after it at once, so a
SIGKILLed run does not leave a spinning peer until someone next types `vhpc`.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from vhpc.host import cgroups, netns, signals

STATE_ENV = "VHPC_STATE_DIR"
SCRATCH_PREFIX = "vhpc-"


def state_dir() -> Path:
    """Where owner files live: $VHPC_STATE_DIR, /run/vhpc for root, else a per-user temp dir."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    if os.access("/run", os.W_OK):
        return Path("/run/vhpc")
    return Path(tempfile.gettempdir()) / f"vhpc-state-{os.getuid()}"


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def running(pid: int, start: int | None, boot: str) -> bool:
    """Whether the process that was `pid` at `start` in boot `boot` still runs
    (a zombie does not: it has exited, its parent has not yet looked)."""
    if boot and boot != boot_id():
        return False
    now = start_time(pid)
    return now is not None and (start is None or now == start) and not zombie(pid)


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except (OSError, IndexError):
        return True


# Blocks until the watched process has exited (nobody else holds the pipe's other
# end), waits until it is really gone, then removes what it left.
_WATCHDOG = """\
import sys, time
sys.stdin.buffer.read()
from vhpc.host import leftovers
pid, start, boot = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 10
while leftovers.running(pid, start, boot) and time.monotonic() < deadline:
    time.sleep(0.01)
for line in leftovers.cleanup(owner=pid).cleaned:
    print(f"vhpc: cleaned up: {line}", file=sys.stderr)
"""
_watchdog: tuple[int, subprocess.Popen] | None = None


def watchdog() -> int | None:
    """The pid of this process's watchdog, started on first use (None if it cannot be)."""
    global _watchdog
    if _watchdog is not None and _watchdog[0] == os.getpid():
        return _watchdog[1].pid
    pid = os.getpid()
    # Its own session (a terminal's Ctrl-C or hangup does not reach it), a minimal
    # environment (not the workload's), vhpc importable from where this file is.
    env = {"PATH": os.environ.get("PATH", ""), STATE_ENV: str(state_dir()),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(pid), str(start_time(pid) or 0), boot_id()],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError:
        return None
    _watchdog = (pid, proc)  # kept: its pipe must stay open as long as this process runs
    return proc.pid


class Record:
    """One owner file; `add` before creating more, `release` once all is gone."""

    def __init__(self, name: str, *, cgroups: list[Path] = (), dirs: list[Path] = (),
                 procs: list[int] = (), netns: list[str] = ()) -> None:
        self.path = state_dir() / f"{name}.json"
        pid = os.getpid()
        self.data = {"pid": pid, "start": start_time(pid), "boot": boot_id(),
                     "argv": sys.argv[:8], "watchdog": watchdog(),
                     "cgroups": [], "dirs": [], "procs": [], "netns": []}
        self.add(cgroups=cgroups, dirs=dirs, procs=procs, netns=netns)

    def add(self, *, cgroups: list[Path] = (), dirs: list[Path] = (),
            procs: list[int] = (), netns: list[str] = ()) -> None:
        self.data["cgroups"] += [str(g) for g in cgroups]
        self.data["dirs"] += [str(d) for d in dirs]
        self.data["procs"] += [{"pid": p, "start": start_time(p)} for p in procs]
        self.data["netns"] += list(netns)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)  # never half a record

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


@contextmanager
def owned_groups(groups: list[Path]) -> Iterator[Record]:
    """Record `groups` (the caller creates them inside), and on the way out kill
    what runs in them and remove them. The record stays if that fails, for cleanup()."""
    record = Record(Path(groups[0]).name, cgroups=groups)
    try:
        yield record
    finally:
        with signals.deferred():
            cgroups.remove_all(groups)
            record.release()


@contextmanager
def scratch(prefix: str = "vhpc-lab-") -> Iterator[Path]:
    """A recorded temporary directory, removed on the way out."""
    assert prefix.startswith(SCRATCH_PREFIX)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    record = Record(path.name, dirs=[path])
    try:
        yield path
    finally:
        with signals.deferred():
            shutil.rmtree(path, ignore_errors=True)
            record.release()


@dataclass
class Report:
    cleaned: list[str] = field(default_factory=list)   # what was removed, one line per dead run
    problems: list[str] = field(default_factory=list)  # what could not be
    live: list[str] = field(default_factory=list)      # held by vhpc processes still running


def describe(data: dict) -> str:
    argv = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(data.get("argv") or []))
    return f"vhpc pid {data.get('pid')}" + (f" (`{argv}`)" if argv else "")


def cleanup(owner: int | None = None) -> Report:
    """Remove what dead vhpc processes left (only process `owner`'s, if given):
    thaw, kill and remove their groups, kill their untracked processes, delete
    their scratch directories."""
    report = Report()
    directory = state_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / ".cleanup.lock", "a")
    except OSError:
        lock = None  # nothing recorded here can be ours to clean; still look at the groups
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two vhpc commands at once: one cleans
        named: set[Path] = set()
        named_ns: set[str] = set()
        dead: dict[int, list[tuple[Path | None, dict]]] = {}
        for path in sorted(directory.glob("*.json")) if lock is not None else []:
            try:
                data = json.loads(path.read_text())
                who = (int(data["pid"]), data.get("start"), str(data.get("boot", "")))
            except FileNotFoundError:
                continue  # released meanwhile
            except (OSError, ValueError, KeyError, TypeError) as exc:
                report.problems.append(f"{path}: unreadable owner file ({exc}); remove it by hand")
                continue
            if owner is not None and who[0] != owner:
                continue
            named |= {Path(g) for g in data.get("cgroups", [])}
            named_ns |= set(data.get("netns", []))
            if running(*who):
                report.live.append(f"{describe(data)}: {', '.join(short(p) for p in things(data))}")
                continue
            dead.setdefault(who[0], []).append((path, data))
        for group in cgroups.top_level():
            pid = cgroups.owner_pid(group.name)
            if group in named or pid is None or (owner is not None and pid != owner):
                continue
            if start_time(pid) is not None and not zombie(pid):
                report.live.append(f"vhpc pid {pid}: {short(group)}")
                continue
            dead.setdefault(pid, []).append((None, {"pid": pid, "cgroups": [str(group)]}))
        for ns in netns.existing():
            pid = cgroups.owner_pid(ns)
            if ns in named_ns or pid is None or (owner is not None and pid != owner):
                continue
            if start_time(pid) is not None and not zombie(pid):
                report.live.append(f"vhpc pid {pid}: network namespace {ns}")
                continue
            dead.setdefault(pid, []).append((None, {"pid": pid, "netns": [ns]}))
        for records in dead.values():
            clean_owner(records, report)
    finally:
        if lock is not None:
            lock.close()
    return report


def things(data: dict) -> list[str]:
    return [*data.get("cgroups", []), *data.get("dirs", []),
            *(f"network namespace {ns}" for ns in data.get("netns", [])),
            *(f"process {p['pid']}" for p in data.get("procs", []))]


def short(path: str | Path) -> str:
    """A cgroup as `freezer/vhpc-1-2`, anything else as given."""
    path = Path(path)
    for root in cgroups.ROOTS:
        if root in path.parents:
            return f"{root.name}/{path.relative_to(root)}"
    return str(path)


def clean_owner(records: list[tuple[Path | None, dict]], report: Report) -> None:
    """Remove what one dead vhpc process left (its groups all frozen and killed
    together), say so in one line, and drop each record whose things all went."""
    done, problems = [], []
    groups = {Path(g): path for path, data in records for g in data.get("cgroups", [])}
    bad = [g for g in groups if not cgroups.is_ours(g)]
    problems += [f"{g}: not a vhpc cgroup, left alone" for g in bad]
    present = [g for g in groups if g not in bad and g.is_dir()]
    failed: set[Path | None] = {groups[g] for g in bad}
    if present:
        try:
            killed = cgroups.remove_all(present)
            what = ", ".join(short(g) for g in present)
            if killed.procs:
                what += (f" (killed {killed.procs} process{'es' if killed.procs != 1 else ''}"
                         + (f", {killed.frozen} of them frozen" if killed.frozen else "") + ")")
            done.append(f"removed {what}")
        except (OSError, RuntimeError) as exc:
            problems.append(f"cannot remove {', '.join(short(g) for g in present)}: {exc}")
            failed |= {groups[g] for g in present}
    for path, data in records:
        for proc in data.get("procs", []):
            pid, start = int(proc["pid"]), proc.get("start")
            if start_time(pid) is not None and start_time(pid) == start:
                done.append(f"killed process {pid} and its session ({kill_session(pid)} processes)")
        for ns in data.get("netns", []):
            if not ns.startswith(SCRATCH_PREFIX):
                problems.append(f"network namespace {ns}: not a vhpc one, left alone")
                failed.add(path)
            elif (netns.NETNS_DIR / ns).exists():
                if netns.delete(ns):
                    done.append(f"removed network namespace {ns}")
                else:
                    problems.append(f"cannot remove network namespace {ns}")
                    failed.add(path)
        for d in map(Path, data.get("dirs", [])):
            if not d.name.startswith(SCRATCH_PREFIX) or d.is_symlink():
                problems.append(f"{d}: not a vhpc scratch directory, left alone")
                failed.add(path)
            elif d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
                if d.exists():
                    problems.append(f"cannot remove {d}")
                    failed.add(path)
                else:
                    done.append(f"removed {d}")
    who = describe(records[0][1])
    if done:
        report.cleaned.append(f"{who} is gone; " + "; ".join(done))
    report.problems += [f"{who}: {p}" for p in problems]
    for path, _ in records:
        if path is not None and path not in failed:
            path.unlink(missing_ok=True)


def kill_session(sid: int) -> int:
    """SIGKILL every process of session `sid` (untracked processes start their own)."""
    victims = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat")
               if session_of(p) == sid]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(victims)


def session_of(stat: Path) -> int | None:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None
