"""Running one program with a deadline, leaving no process behind.

Shared by the runtime benchmark and `vhpc lab`: an MPI launcher starts ranks
that may leave its process group, so a timeout or Ctrl-C kills the whole tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def run_command(
    cmd: list[str], env: dict[str, str], timeout: float, cwd: Path | None = None
) -> tuple[str | None, str]:
    """(stdout, "") on success, else (None, what went wrong). Never hangs past `timeout`."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.communicate()
        return None, "timeout"
    except BaseException:  # Ctrl-C: leave no ranks behind
        kill_tree(proc.pid)
        proc.communicate()
        raise
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no message"])[-1]
        return None, f"exit {proc.returncode}: {last[:160]}"
    return out, ""


def kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant (MPI ranks may setpgid)."""
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
