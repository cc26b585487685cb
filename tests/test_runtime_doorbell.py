"""The job's doorbell (runtime/doorbell.c): with VHPC_DOORBELL, a rank whose waits
find its CPU idle rings the ranks asleep in theirs, which then poll at once instead
of when their timers fire; the ranks remove the file once all have mapped it.
`vhpc run` names one per job under adaptive."""

from __future__ import annotations

import os

import pytest

from vhpc.runtime import launch

N = 2


def cpus() -> str:
    return "0-1" if len(os.sched_getaffinity(0)) >= 2 else "0"


def test_a_rank_polling_alone_wakes_the_sleeping_ranks(mpi_impl, mpirun, programs, tmp_path):
    if mpi_impl.name == "openmpi":
        pytest.skip("adaptive passes Open MPI's blocking calls to its own wait loop here "
                    "(native calls, its mpi_yield_when_idle when shared), which never sleeps")
    bell = tmp_path / "bell"
    # Both ranks on one CPU: adaptive's mode is shared from the CPU masks alone (on
    # CPUs of their own it may soon pass calls to the MPI's busy-poll, or judge a
    # noisy vCPU time-shared, and then never yields). Rank 0 computes 5 ms a round:
    # rank 1's wait yields to it, then sleeps; rank 0's own wait then finds the CPU
    # idle and rings.
    run = mpirun(N, [programs["doorbell"], 20, 5], policy="adaptive", cpus="0",
                 env={"VHPC_STATS": "1", "VHPC_DOORBELL": str(bell)})
    run.assert_counted("doorbell", N, "adaptive")
    stats = run.stats()
    assert stats[0]["rings"] > 0 and stats[1]["woken"] > 0, run.describe()
    assert stats[1]["sleeps"] >= stats[1]["woken"], run.describe()
    assert not bell.exists(), "the ranks remove the doorbell once all have mapped it"

    # Without one, nothing rings: every sleep ends on its timer.
    plain = mpirun(N, [programs["doorbell"], 20, 5], policy="adaptive", cpus="0",
                   env={"VHPC_STATS": "1"})
    plain.assert_counted("doorbell", N, "adaptive")
    assert all(s["rings"] == 0 and s["woken"] == 0 for s in plain.stats().values()), \
        plain.describe()


def test_a_doorbell_that_cannot_be_made_leaves_timers_and_says_so(mpirun, programs, tmp_path):
    bell = tmp_path / "no-such-dir" / "bell"
    run = mpirun(N, [programs["doorbell"], 5, 2], policy="adaptive", cpus=cpus(),
                 env={"VHPC_STATS": "1", "VHPC_DOORBELL": str(bell)})
    run.assert_counted("doorbell", N, "adaptive")
    assert run.stderr.count("cannot open it; sleeping ranks wait for their timers") == N, \
        run.describe()
    assert all(s["rings"] == 0 and s["woken"] == 0 for s in run.stats().values())


def test_vhpc_run_names_one_doorbell_per_job_under_adaptive_only(mpi_impl, programs):
    argv = [mpi_impl.mpiexec, "-n", str(N), str(programs["doorbell"])]
    plans = [launch.plan(argv, environ=dict(os.environ), cpus=2) for _ in range(2)]
    bells = [p.rank_env["VHPC_DOORBELL"] for p in plans]
    assert all(b.startswith(launch.SHM + "/vhpc-bell-") for b in bells) and bells[0] != bells[1]
    assert all(str(p.doorbell) == b for p, b in zip(plans, bells))
    assert any("VHPC_DOORBELL" in a for a in plans[0].argv), "forwarded to the ranks"
    for policy in ("spin", "yield", "sleep"):
        assert "VHPC_DOORBELL" not in launch.plan(argv, policy=policy, environ=dict(os.environ),
                                                  cpus=2).rank_env
