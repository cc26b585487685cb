"""VHPC_STATS reporting and VHPC_WAIT validation.

With VHPC_STATS=1 every rank prints exactly one well-formed line at
MPI_Finalize whose counters agree with the policy; without it libvhpc_wait
prints nothing; an invalid VHPC_WAIT stops every rank with the documented
message."""

from __future__ import annotations

N = 2
ITERATIONS = 50


def test_one_line_per_rank_consistent_with_policy(mpirun, mpi_impl, programs, wait_policy,
                                                  links_ucx):
    """2 ranks on one core, so waits cannot end at the first poll."""
    run = mpirun(N, [programs["progress"], ITERATIONS], policy=wait_policy,
                 env={"VHPC_STATS": "1"}, cpus="0")
    run.assert_ok("progress", N)
    ours = [ln for ln in run.stderr.splitlines() if ln.startswith("vhpc_wait:")]
    assert len(ours) == N, run.describe()
    stats = run.stats()
    assert sorted(stats) == list(range(N)), run.describe()
    made = run.rank_values("progress", "blocking")
    for rank, s in stats.items():
        ctx = f"rank {rank}: {s}"
        assert s["policy"] == wait_policy, ctx
        assert s["calls"] >= made[rank], f"{ctx}; the program made {made[rank]} blocking calls"
        assert s["waited_s"] >= 0, ctx
        assert s["native"] <= s["calls"], ctx
        # Every call not passed through is completed by polling at least once.
        assert s["polls"] >= s["calls"] - s["native"], ctx
        # Ranks sharing one core have no CPU of their own. Only where the MPI can be
        # told to yield by itself (Open MPI's yield_when_idle) does adaptive pass
        # calls straight to it; from its first sample on, i.e. every call. MPICH's
        # ch4:ucx keeps its blocking collectives (two an iteration), yielding through
        # the library's UCX hook; its ping-pong waits are the library's.
        if wait_policy == "adaptive" and mpi_impl.name == "openmpi":
            assert s["native"] == s["calls"], ctx
        elif wait_policy == "adaptive" and links_ucx:
            assert s["native"] == 2 * ITERATIONS, ctx
        else:
            assert s["native"] == 0, ctx
        if wait_policy == "spin":
            assert s["yields"] == 0 and s["sleeps"] == 0, ctx
        elif wait_policy == "yield":
            assert s["sleeps"] == 0 and s["yields"] > 0, ctx
        elif wait_policy == "sleep":
            assert s["yields"] == 0 and s["sleeps"] > 0, ctx


def test_silent_without_stats(mpirun, programs, wait_policy):
    run = mpirun(N, [programs["progress"], 10], policy=wait_policy)
    run.assert_ok("progress", N)
    assert "vhpc" not in run.stderr.lower() and "vhpc" not in run.stdout.lower(), run.describe()


def test_invalid_policy_is_refused(mpirun, programs):
    run = mpirun(N, [programs["progress"], 10], policy="bogus", timeout=60)
    assert not run.timed_out and run.returncode != 0, run.describe()
    message = "vhpc_wait: VHPC_WAIT='bogus' is not one of spin, yield, sleep, adaptive"
    assert message in run.stderr.splitlines(), run.describe()
    assert not run.finalized("progress"), run.describe()
