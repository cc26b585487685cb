"""The Fortran entry points (`use mpi` and include 'mpif.h'): results checked
against closed forms by tests/runtime/semantics_f.f90 and semantics_mpifh.f,
and the calls must go through libvhpc_wait.  Open MPI's Fortran bindings call
PMPI_* directly, so only a library that intercepts the Fortran symbols
themselves counts them in VHPC_STATS's calls=."""

from __future__ import annotations

import pytest

PROGRAMS = ["semantics_f", "semantics_mpifh"]


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
