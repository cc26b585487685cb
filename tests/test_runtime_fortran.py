"""The Fortran entry points (`use mpi`, include 'mpif.h' and `use mpi_f08`):
results checked against closed forms by tests/runtime/semantics_f.f90,
semantics_mpifh.f and semantics_f08.f90, and the calls must go through
libvhpc_wait.  Open MPI's Fortran bindings call PMPI_* directly, and so do
MPICH's mpi_f08 waits, barrier, init and finalize, so only a library that
intercepts the Fortran symbols themselves counts them in VHPC_STATS's calls=."""

from __future__ import annotations

import re

import pytest

PROGRAMS = ["semantics_f", "semantics_mpifh"]
F08 = "semantics_f08"


@pytest.mark.usefixtures("fortran")
@pytest.mark.parametrize("prog", PROGRAMS)
def test_fortran_semantics(mpirun, programs, policy, prog):
    n = 3
    run = mpirun(n, [programs[prog]], policy=policy, env={"VHPC_STATS": "1"})
    run.assert_ok(prog, n)
    made = run.rank_values(prog, "blocking")
    assert sorted(made) == list(range(n)), run.describe()
    if policy is None:
        return
    stats = run.stats()
    assert sorted(stats) == list(range(n)), run.describe()
    for rank, s in stats.items():
        assert s["policy"] == policy
        assert s["calls"] >= made[rank], (
            f"rank {rank}: the library counted {s['calls']} blocking calls but the Fortran "
            f"program made {made[rank]}: Fortran calls bypass libvhpc_wait\n{run.describe()}"
        )


@pytest.mark.usefixtures("fortran")
@pytest.mark.parametrize("prog", PROGRAMS)
def test_fortran_init_reads_policy(mpirun, programs, prog):
    """MPI_Init from Fortran must reach the library too: a bad VHPC_WAIT stops it."""
    run = mpirun(2, [programs[prog]], policy="bogus", timeout=60)
    assert run.returncode != 0, run.describe()
    message = "vhpc_wait: VHPC_WAIT='bogus' is not one of spin, yield, sleep, adaptive"
    assert message in run.stderr.splitlines(), run.describe()


# What the failed calls of semantics_f08 left (its "errors:" line per rank) in a run
# without the library, by (MPI, ranks).
_F08_UNPRELOADED: dict[tuple[str, int], dict[int, str]] = {}


def _failed_calls(run) -> dict[int, str]:
    pat = re.compile(rf"^{F08}: rank (\d+) errors: (.*)$", re.M)
    return {int(rank): line for rank, line in pat.findall(run.stdout)}


@pytest.mark.usefixtures("fortran08")
@pytest.mark.parametrize("n", [2, 4])
def test_f08_on_one_core(mpi_impl, mpirun, programs, policy, n):
    """`use mpi_f08`, every rank on CPU 0: the results are the closed forms and what
    failed calls leave is what the MPI leaves without the library; and every blocking
    call the program made, and only those, went through the library."""
    run = mpirun(n, [programs[F08]], policy=policy, env={"VHPC_STATS": "1"}, cpus="0",
                 timeout=180)
    run.assert_ok(F08, n)
    made = run.rank_values(F08, "blocking")
    assert sorted(made) == list(range(n)), run.describe()
    key = (mpi_impl.name, n)
    if key not in _F08_UNPRELOADED:
        plain = run if policy is None else mpirun(n, [programs[F08]], cpus="0", timeout=180)
        plain.assert_ok(F08, n)
        _F08_UNPRELOADED[key] = _failed_calls(plain)
    assert _failed_calls(run) == _F08_UNPRELOADED[key], (
        f"failed calls left other statuses, handles or indices than without the library "
        f"({_F08_UNPRELOADED[key]})\n{run.describe()}")
    if policy is None:
        assert not run.stats(), run.describe()
        return
    stats = run.stats()
    assert sorted(stats) == list(range(n)), (
        f"no VHPC_STATS line: MPI_Init/MPI_Finalize from `use mpi_f08` bypass the library\n"
        f"{run.describe()}")
    for rank, s in stats.items():
        assert s["policy"] == policy
        assert s["calls"] == made[rank], (
            f"rank {rank}: the library counted {s['calls']} blocking calls but the program "
            f"made {made[rank]}: `use mpi_f08` calls bypass libvhpc_wait (or are counted "
            f"twice)\n{run.describe()}")


@pytest.mark.usefixtures("fortran08")
def test_f08_init_reads_policy(mpirun, programs):
    """MPI_Init from `use mpi_f08` (here without ierror) reaches the library."""
    run = mpirun(2, [programs[F08]], policy="bogus", timeout=60)
    assert run.returncode != 0, run.describe()
    message = "vhpc_wait: VHPC_WAIT='bogus' is not one of spin, yield, sleep, adaptive"
    assert message in run.stderr.splitlines(), run.describe()
