"""Measure: `vhpc lab`, real, repeated experiments on the machine at hand.

experiment.py reads and validates an experiment file, workloads.py turns a
program's output into metrics, runner.py runs the grid of cells, store.py keeps
every finished run in a Parquet dataset, compare.py summarises it with stats.py,
and report.py draws plots.py's figures into `vhpc report`. calibrate.py is
`vhpc calibrate`: probes.py's microbenchmarks of this host, written as a host
profile (host/profile.py); predict.py simulates an experiment's cells on such a profile.
What the lab promises when things go wrong (signals, full disks, damaged files,
wild output) is in docs/reliability.md.
"""


class LabError(Exception):
    """A failure to report to the user (bad experiment file, cells that cannot run)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
