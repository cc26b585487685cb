"""One MPI_Waitall over thousands of requests (tests/runtime/waitall.c), as in
bench/sendflood's receiver: rank 0 waits for 4000 receives at once while rank 1
stays away for a while, then sends them in reverse order.

Every message, status and handle must come out as without the library, under
every policy. And a wait that finds nothing must give its CPU away: with both
ranks on one core, adaptive's receiver must sleep while the sender is away.
Intel MPI's idle progress call costs 0.5-0.9 µs, which the library once took
for work: each poll repeated it 64 times and looked productive, and the wait
never yielded nor slept (test_runtime_wheels.py runs the same on the wheel
MPIs)."""

from __future__ import annotations

REQUESTS = 4000
AWAY_MS = 300
# With sleeps of at most VHPC_SLEEP_MAX_US (1 ms) a wait through AWAY_MS makes
# about 300; a wait that never sleeps makes none.
MIN_SLEEPS = 20


def test_big_waitall_as_without_the_library(mpirun, programs, policy):
    run = mpirun(2, [programs["waitall"], REQUESTS, 20], policy=policy,
                 env={"VHPC_STATS": "1"}, timeout=120)
    run.assert_counted("waitall", 2, policy)
    assert run.rank_values("waitall", "requests") == {0: REQUESTS, 1: REQUESTS}


def test_big_waitall_sleeps_while_the_sender_is_away(mpirun, programs):
    # VHPC_MPI_YIELD=0: Open MPI's waits would be its own idle-yield otherwise.
    run = mpirun(2, [programs["waitall"], REQUESTS, AWAY_MS], policy="adaptive", cpus="0",
                 env={"VHPC_STATS": "1", "VHPC_MPI_YIELD": "0"}, timeout=120)
    run.assert_ok("waitall", 2)
    receiver = run.stats()[0]
    assert receiver["sleeps"] >= MIN_SLEEPS, f"{receiver}\n{run.describe()}"
