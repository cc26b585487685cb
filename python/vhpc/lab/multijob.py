"""Several MPI launches at once (a `domains` config with `jobs = N`), with one
deadline for all and no process left behind.

Each job is started in its own session and drained by its own thread (a full
pipe would stall a rank); the main thread owns the processes, so a timeout or
Ctrl-C kills every job's whole tree, as process.run_command does for one.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from vhpc.host.process import kill_tree


def run_commands(cmds: list[list[str]], env: dict[str, str], timeout: float,
                 cwds: list[Path]) -> list[tuple[str | None, str]]:
    """Per command, (stdout, "") on success or (None, what went wrong), as run_command."""
    procs: list[subprocess.Popen] = []
    readers: list[threading.Thread] = []
    try:
        for cmd, cwd in zip(cmds, cwds):
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True,
                                          start_new_session=True, cwd=cwd))
        outputs: list[tuple[str, str]] = [("", "")] * len(procs)
        readers += [threading.Thread(target=_drain, args=(p, outputs, i), daemon=True)
                    for i, p in enumerate(procs)]
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + timeout
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
        late = {i for i, p in enumerate(procs) if p.poll() is None}
    finally:  # timeout, Ctrl-C or an error starting a job: leave no ranks behind
        for proc in procs:
            if proc.poll() is None:
                kill_tree(proc.pid)
        for proc in procs:
            proc.wait()
    for reader in readers:
        reader.join()
    return [outcome(p, outputs[i], i in late) for i, p in enumerate(procs)]


def _drain(proc: subprocess.Popen, outputs: list, i: int) -> None:
    outputs[i] = proc.communicate()


def outcome(proc: subprocess.Popen, output: tuple[str, str], late: bool) -> tuple[str | None, str]:
    if late:
        return None, "timeout"
    out, err = output
    if proc.returncode != 0:
        last = ((err or "").strip().splitlines() or ["no message"])[-1]
        return None, f"exit {proc.returncode}: {last[:160]}"
    return out, ""
