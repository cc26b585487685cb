"""The blocking calls libvhpc_wait wraps from the MPI standard's API
(python/vhpc/runtime/wrappers.py): tests/runtime/standard.c checks each against a
closed form with 2, 3 and 4 ranks, under each wait policy and without the library,
and on one core, where adaptive turns them into their twins (or, for the
communicator and window constructors, waits in a barrier first). With
VHPC_STATS=1 the library must have counted every one of them."""

from __future__ import annotations

import pytest

from vhpc.runtime import wrappers


@pytest.mark.parametrize("n", [2, 3, 4])
def test_standard_calls(mpirun, programs, policy, n, tmp_path):
    run = mpirun(n, [programs["standard"], tmp_path], policy=policy, env={"VHPC_STATS": "1"})
    run.assert_counted("standard", n, policy)


def test_standard_calls_on_one_core(mpirun, programs, tmp_path):
    run = mpirun(4, [programs["standard"], tmp_path], policy="adaptive", cpus="0",
                 env={"VHPC_STATS": "1"}, timeout=120)
    run.assert_counted("standard", 4, "adaptive")


def test_the_standard_names_its_blocking_calls():
    """The rule finds the twins every MPI user knows, and only blocking calls."""
    calls = set(wrappers.blocking_calls())
    assert {"MPI_Send", "MPI_Recv", "MPI_Barrier", "MPI_Comm_dup", "MPI_Alltoallw",
            "MPI_Neighbor_alltoallw", "MPI_File_read_all", "MPI_Mrecv", "MPI_Mprobe",
            "MPI_Probe", "MPI_Wait", "MPI_Waitsome"} <= calls
    assert not calls & {"MPI_Isend", "MPI_Test", "MPI_Iprobe", "MPI_Comm_size"}
