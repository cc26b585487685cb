"""Predict: the simulator (the Rust crate vhpc-sim, through `vhpc._core`) from Python.

run.py runs scenario files and reads their reports, memory.py refuses a
scenario whose estimated memory exceeds the limit (`--max-memory`), profile.py
turns a host profile (`vhpc calibrate`) into scenario parameters, bench.py is `make bench-sim`,
sweep.py reads sweep files into points that sweep_run.py runs as Dask tasks (`vhpc sim sweep`),
sweep_store.py stores and sweep_report.py summarises and plots, reproduce/ reruns the published studies' experiments (s0.py). Other faces use only
the names re-exported here.
"""

from vhpc.sim.run import (
    PERFETTO_URL,
    SECTIONS,
    SimError,
    SimRun,
    catalogue,
    frame,
    frames,
    print_summary,
    read_scenario,
    run_file,
    run_many,
    run_text,
    run_texts,
)
from vhpc.sim import profile
from vhpc.sim.profile import ProfileMismatch, overlay

__all__ = [
    "PERFETTO_URL",
    "SECTIONS",
    "SimError",
    "SimRun",
    "catalogue",
    "frame",
    "frames",
    "print_summary",
    "read_scenario",
    "run_file",
    "run_many",
    "run_text",
    "run_texts",
    "ProfileMismatch",
    "overlay",
    "profile",
]
