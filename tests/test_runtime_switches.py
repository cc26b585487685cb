"""VHPC_STATS counts each rank's context switches (getrusage from MPI_Init to
MPI_Finalize): `ivcsw` grows when ranks sharing one core hand it over with a yield
that switched, `vcsw` when a rank sleeps."""

from __future__ import annotations

N = 2
ITERATIONS = 200


def test_yields_on_a_shared_core_switch(mpirun, programs):
    run = mpirun(N, [programs["progress"], ITERATIONS], policy="yield",
                 env={"VHPC_STATS": "1"}, cpus="0")
    run.assert_ok("progress", N)
    stats = run.stats()
    assert sorted(stats) == list(range(N)), run.describe()
    for rank, s in stats.items():
        # Every message needs the other rank to run on the one core.
        assert s["ivcsw"] > 0, f"rank {rank}: {s}"


def test_sleeps_switch_voluntarily(mpirun, programs):
    run = mpirun(N, [programs["progress"], ITERATIONS], policy="sleep",
                 env={"VHPC_STATS": "1"}, cpus="0")
    run.assert_ok("progress", N)
    stats = run.stats()
    assert sum(s["sleeps"] for s in stats.values()) > 0, run.describe()
    # Each sleep that really slept blocked the thread: a voluntary switch.
    assert sum(s["vcsw"] for s in stats.values()) > 0, run.describe()
