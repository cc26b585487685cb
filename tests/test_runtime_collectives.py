"""Blocking collectives: the MPI's own calls wherever waiting smarter does not pay,
else their nonblocking twins on a communicator of the library's own
(docs/runtime.md, "Blocking collectives").

tests/runtime/collorder.c starts an MPI_Iallreduce before an MPI_Barrier on
rank 0 and after it on rank 1: right without the library, since blocking and
nonblocking collectives do not match each other, and right with it wherever it
turns the barrier into an MPI_Ibarrier, which runs on the library's private
communicator (shadow.c) and so cannot match the program's MPI_Iallreduce.
adaptive keeps them blocking when every rank has a CPU of its own at MPI_Init,
or shares one with an MPI whose progress runs through the library's UCX hook
(MPICH's ch4:ucx), and VHPC_COLLECTIVES=blocking keeps them blocking under every
policy and placement. Where the library does turn them (spin, yield, sleep, adaptive with a
shared CPU under Open MPI), every rank does, so that they still match each other
(test_runtime_progress.py's unequal placement)."""

from __future__ import annotations

import os
import re
import subprocess

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


def test_adaptive_on_a_shared_core_turns_them_unless_the_mpi_yields_through_ucx(
        mpirun, programs, links_ucx):
    """Ranks sharing a core: the twins, except where the MPI's progress runs through
    the library's UCX hook, which hands the CPU over inside the MPI's own blocking
    collectives (faster than the twins there, docs/runtime.md)."""
    run = mpirun(N, [programs["collorder"]], policy="adaptive", cpus="0",
                 env={"VHPC_VERBOSE": "1"}, timeout=60)
    _assert_right(run)
    want = "blocking" if links_ucx else "nonblocking"
    assert _decisions(run) == {r: want for r in range(N)}, run.describe()
    whys = {why for _, _, why in DECISION.findall(run.stderr)}
    assert all(("UCX" in why) == links_ucx for why in whys), whys


TURNED = pytest.mark.parametrize("policy, cpus, env", [
    ("spin", None, {}),                                     # a fixed policy waits itself
    ("adaptive", None, {"VHPC_COLLECTIVES": "nonblocking"}),
    ("adaptive", "0", {"VHPC_COLLECTIVES": "nonblocking"}),  # shared core, twins forced
], ids=["spin", "knob-nonblocking", "knob-nonblocking-one-core"])


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


def test_a_tracking_group_is_not_taken_for_one_that_freezes(mpi_impl, wait_lib, programs,
                                                             launcher_env):
    """vhpc runs jobs in a freezer group of its own only to kill them together
    (host/process.py); the library knows it by its name and decides as outside it
    (blocking on own cores), while another freezer group below the root, as the lab's
    slicer makes, still turns them."""
    from vhpc.host import cgroups, process

    if len(os.sched_getaffinity(0)) < N:
        pytest.skip(f"needs {N} CPUs, one per rank")
    if not process.tracking_available():
        pytest.skip("no writable cgroup v1 freezer here to track runs with")
    argv = mpi_impl.launch(N, [str(programs["collorder"])], preload=wait_lib,
                           env={"VHPC_WAIT": "adaptive", "VHPC_VERBOSE": "1"})
    (tracked,) = process.run_commands([argv], launcher_env, 60)
    assert tracked.returncode == 0, tracked.problem()
    found = DECISION.findall(tracked.stderr.text())
    assert {mode for _, mode, _ in found} == {"blocking"} and len(found) == N, found

    group = cgroups.FREEZER / f"{cgroups.PREFIX}{os.getpid()}-domain-test"
    group.mkdir()
    try:
        join = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "tasks"), *argv]
        proc = subprocess.run(join, env=launcher_env, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        found = DECISION.findall(proc.stderr)
        assert {mode for _, mode, _ in found} == {"nonblocking"}, found
        assert all("freezer" in why for _, _, why in found), found
    finally:
        group.rmdir()
