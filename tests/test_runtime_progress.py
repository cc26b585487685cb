"""Progress when ranks share CPUs.

All ranks confined to one core (taskset -c 0 around the launcher) must finish
a mixed loop (ping-pong, allreduce, alltoall) with correct results under
every policy: only completion within a generous timeout is checked, never
speed (benchmarks report speed).

adaptive decides per rank from local evidence; when one rank's CPU is
contended and another's is not, their decisions differ.  MPI does not match a
blocking collective on one rank with a nonblocking one on another, so the run
only completes if the library never mixes them within one operation."""

from __future__ import annotations

import os

import pytest

ITERATIONS = 200


@pytest.mark.parametrize("n", [2, 4])
def test_one_core(mpirun, programs, policy, n):
    run = mpirun(n, [programs["progress"], ITERATIONS], policy=policy, cpus="0", timeout=120)
    run.assert_ok("progress", n)
    assert run.rank_values("progress", "iterations") == {r: ITERATIONS for r in range(n)}


def test_adaptive_with_unequal_placement(mpirun, mpi_impl, programs):
    """Ranks 0 and 1 share CPU 0, rank 2 has CPU 1 to itself: the first two
    must give their CPU away, the third may busy-poll, yet every collective
    must still match across all three."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    rank_var = mpi_impl.rank_env_names()[0]
    script = f'exec taskset -c "$(( ${rank_var} / 2 ))" "$0" "$1"'
    run = mpirun(3, ["sh", "-c", script, programs["progress"], 50], policy="adaptive",
                 env={"VHPC_STATS": "1", "VHPC_VERBOSE": "1"}, timeout=60)
    run.assert_ok("progress", 3)
