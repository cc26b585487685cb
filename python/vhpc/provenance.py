"""Where and with what a measurement was made: host facts recorded with results."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from vhpc import paths


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def kernel() -> str:
    return f"{platform.system()} {platform.release()}"


def host() -> str:
    """The kind of machine, as results that must not be mixed across machines record it."""
    return f"{cpu_model()}, {os.cpu_count()} CPUs, {kernel()}"


def git_revision() -> tuple[str, bool]:
    """(short revision of the checkout, whether it has uncommitted changes)."""

    def git(*args: str) -> str:
        proc = subprocess.run(["git", "-C", str(paths.REPO), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    return git("rev-parse", "--short", "HEAD") or "no commit yet", bool(git("status", "--porcelain"))
