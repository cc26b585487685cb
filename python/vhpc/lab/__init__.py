"""`vhpc lab`: real, repeated experiments on the machine at hand.

experiment.py reads and validates an experiment file, workloads.py turns a
program's output into metrics, runner.py runs the grid of cells, store.py keeps
every finished run in a Parquet dataset, compare.py summarises it (with
vhpc.stats).
"""


class LabError(Exception):
    """A failure to report to the user (bad experiment file, cells that cannot run)."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
