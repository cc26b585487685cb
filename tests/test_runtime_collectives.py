"""Blocking collectives: the MPI's own calls wherever waiting smarter does not pay,
else their nonblocking twins on a communicator of the library's own
(docs/runtime.md, "Blocking collectives").

tests/runtime/collorder.c starts an MPI_Iallreduce before an MPI_Barrier on
rank 0 and after it on rank 1: right without the library, since blocking and
nonblocking collectives do not match each other, and right with it wherever it
turns the barrier into an MPI_Ibarrier, which runs on the library's private
communicator (shadow.c) and so cannot match the program's MPI_Iallreduce.
adaptive keeps them blocking when every rank has a CPU of its own at MPI_Init,
and VHPC_COLLECTIVES=blocking keeps them blocking under every policy and
placement. Where the library does turn them (spin, yield, sleep, adaptive with a
shared CPU), every rank does, so that they still match each other
(test_runtime_progress.py's unequal placement)."""

from __future__ import annotations

import os
import re

import pytest

N = 2
DECISION = re.compile(r"^vhpc_wait: rank=(\d+) collectives=(\w+) \((.*)\)$", re.M)


def _sums(run) -> dict[int, tuple[int, int]]:
    found = re.findall(r"^collorder: rank (\d+) sum=(-?\d+) want=(\d+)$", run.stdout, re.M)
    return {int(r): (int(s), int(w)) for r, s, w in found}


def _decisions(run) -> dict[int, str]:
    return {int(r): mode for r, mode, _ in DECISION.findall(run.stderr)}


def _assert_right(run) -> None:
    run.assert_ok("collorder", N)
    sums = _sums(run)
    assert sorted(sums) == list(range(N)), run.describe()
    assert all(s == w for s, w in sums.values()), run.describe()


def test_without_library(mpirun, programs):
    _assert_right(mpirun(N, [programs["collorder"]], timeout=60))


def test_adaptive_on_own_cores_keeps_them_blocking(mpirun, programs):
    if len(os.sched_getaffinity(0)) < N:
        pytest.skip(f"needs {N} CPUs, one per rank")
    run = mpirun(N, [programs["collorder"]], policy="adaptive", env={"VHPC_VERBOSE": "1"},
                 timeout=60)
    _assert_right(run)
    assert _decisions(run) == {r: "blocking" for r in range(N)}, run.describe()


@pytest.mark.parametrize("cpus", [None, "0"], ids=["own-cores", "one-core"])
def test_knob_keeps_them_blocking(mpirun, programs, wait_policy, cpus):
    run = mpirun(N, [programs["collorder"]], policy=wait_policy, cpus=cpus,
                 env={"VHPC_COLLECTIVES": "blocking", "VHPC_VERBOSE": "1"}, timeout=60)
    _assert_right(run)
    assert _decisions(run) == {r: "blocking" for r in range(N)}, run.describe()


TURNED = pytest.mark.parametrize("policy, cpus, env", [
    ("adaptive", "0", {}),                                  # ranks share a core: turned
    ("spin", None, {}),                                     # a fixed policy waits itself
    ("adaptive", None, {"VHPC_COLLECTIVES": "nonblocking"}),
], ids=["adaptive-one-core", "spin", "knob-nonblocking"])


@TURNED
def test_where_they_are_turned_the_programs_own_order_still_holds(
        mpirun, programs, policy, cpus, env):
    run = mpirun(N, [programs["collorder"]], policy=policy, cpus=cpus,
                 env={"VHPC_VERBOSE": "1", **env}, timeout=60)
    _assert_right(run)
    assert _decisions(run) == {r: "nonblocking" for r in range(N)}, run.describe()


@TURNED
def test_where_they_are_turned_every_rank_agrees(mpirun, programs, policy, cpus, env):
    """The progress program's collectives (in the same order on every rank) still
    complete with the right results, and every rank took the same decision."""
    run = mpirun(N, [programs["progress"], 20], policy=policy, cpus=cpus,
                 env={"VHPC_VERBOSE": "1", **env}, timeout=60)
    run.assert_ok("progress", N)
    assert _decisions(run) == {r: "nonblocking" for r in range(N)}, run.describe()
