"""Where vhpc's sources and build products live."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """Root of build products (libraries, benchmark binaries); `VHPC_BUILD_DIR` overrides."""
    return Path(os.environ.get("VHPC_BUILD_DIR", REPO / "build")).resolve()
