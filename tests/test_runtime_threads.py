"""MPI_THREAD_MULTIPLE under libvhpc_wait: four threads per rank ping-pong on
their own communicators and on MPI_COMM_WORLD (told apart by tag) and run
collectives concurrently (tests/runtime/threads.c), under every policy."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", [2, 3])
def test_threads(mpirun, programs, policy, n):
    run = mpirun(n, [programs["threads"], 20], policy=policy, env={"VHPC_STATS": "1"})
    if "threads: SKIP" in run.stdout:
        pytest.skip(run.stdout.strip().splitlines()[0])
    run.assert_ok("threads", n)
    if policy is not None:
        stats = run.stats()
        made = run.rank_values("threads", "blocking")
        assert sorted(stats) == list(range(n)), run.describe()
        for rank, s in stats.items():
            # Counters are per thread and summed: no call of any thread may be lost.
            assert s["calls"] >= made[rank], f"rank {rank}: {s}, made {made[rank]}"
