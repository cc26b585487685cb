"""Every VHPC_* knob of libvhpc_wait is validated at MPI_Init: a value that is
set must be well formed (finite, in range, not empty), or the rank stops with
exit code 2 and one line naming the variable, the value and what it must be,
before MPI starts. Values at the edges of the ranges run."""

from __future__ import annotations

import pytest

# (variable, value, what the message says it must be)
BAD = [
    ("VHPC_WAIT", "", "one of spin, yield, sleep, adaptive"),
    ("VHPC_WAIT", "Adaptive", "one of spin, yield, sleep, adaptive"),
    ("VHPC_COLLECTIVES", "", "one of blocking, nonblocking"),
    ("VHPC_COLLECTIVES", "auto", "one of blocking, nonblocking"),
    ("VHPC_STATS", "", "0 or 1"),
    ("VHPC_STATS", "yes", "0 or 1"),
    ("VHPC_VERBOSE", "2", "0 or 1"),
    ("VHPC_MPI_YIELD", "off", "0 or 1"),
    ("VHPC_SLEEP_MAX_US", "nan", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", "inf", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", "1e20", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", "", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", "0.5", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", " 100", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MAX_US", "0x10", "a number of microseconds from VHPC_SLEEP_MIN_US (1) to 1000000"),
    ("VHPC_SLEEP_MIN_US", "0", "a number of microseconds from 0.001 to 1000000"),
    ("VHPC_SLEEP_MIN_US", "-1", "a number of microseconds from 0.001 to 1000000"),
    ("VHPC_SPIN_US", "1e7", "a number of microseconds from 0 to 1000000"),
    ("VHPC_SPIN_US", "50us", "a number of microseconds from 0 to 1000000"),
    ("VHPC_SPIN_MIN_US", "100", "a number of microseconds from 0 to VHPC_SPIN_US (50)"),
    ("VHPC_SAMPLE_MS", "0", "a number of milliseconds from 1 to 60000"),
    ("VHPC_SAMPLE_MS", "-inf", "a number of milliseconds from 1 to 60000"),
    ("VHPC_TIMERSLACK_NS", "1.5", "a whole number of nanoseconds from 0 to 1000000000"),
    ("VHPC_TIMERSLACK_NS", "-3", "a whole number of nanoseconds from 0 to 1000000000"),
]


@pytest.mark.parametrize("var, value, expected", BAD,
                         ids=[f"{v}={val!r}" for v, val, _ in BAD])
def test_bad_value_stops_the_rank(mpirun, programs, var, value, expected):
    # The fixture sets VHPC_WAIT from `policy`.
    policy, env = (value, {}) if var == "VHPC_WAIT" else ("adaptive", {var: value})
    run = mpirun(1, [programs["progress"], 2], policy=policy, env=env, timeout=60)
    assert not run.timed_out and run.returncode != 0, run.describe()
    assert f"vhpc_wait: {var}='{value}' is not {expected}" in run.stderr.splitlines(), run.describe()
    assert not run.finalized("progress"), run.describe()


def test_values_at_the_edges_run(mpirun, programs, wait_policy):
    env = {"VHPC_SPIN_US": "0", "VHPC_SPIN_MIN_US": "0", "VHPC_SLEEP_MIN_US": "0.001",
           "VHPC_SLEEP_MAX_US": "1000000", "VHPC_SAMPLE_MS": "60000",
           "VHPC_TIMERSLACK_NS": "0", "VHPC_STATS": "1", "VHPC_VERBOSE": "0",
           "VHPC_MPI_YIELD": "0", "VHPC_COLLECTIVES": "nonblocking"}
    run = mpirun(2, [programs["progress"], 5], policy=wait_policy, env=env, timeout=60)
    run.assert_ok("progress", 2)
    assert sorted(run.stats()) == [0, 1], run.describe()


def test_unset_bounds_follow_the_set_ones(mpirun, programs):
    """A minimum above the other knob's default moves that default along instead
    of failing: VHPC_SPIN_US=1 (below VHPC_SPIN_MIN_US's 2) and
    VHPC_SLEEP_MIN_US=2000 (above VHPC_SLEEP_MAX_US's 1000)."""
    run = mpirun(2, [programs["progress"], 5], policy="sleep",
                 env={"VHPC_SPIN_US": "1", "VHPC_SLEEP_MIN_US": "2000"}, timeout=60)
    run.assert_ok("progress", 2)
