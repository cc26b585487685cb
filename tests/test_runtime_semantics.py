"""libvhpc_wait keeps MPI semantics: every intercepted C call, checked by
tests/runtime/semantics.c against closed forms, with 2, 3 and 4 ranks, under
each wait policy and without the library.  With VHPC_STATS=1 the library must
also have counted every blocking call the program made."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", [2, 3, 4])
def test_c_semantics(mpirun, programs, policy, n):
    run = mpirun(n, [programs["semantics"]], policy=policy, env={"VHPC_STATS": "1"})
    run.assert_ok("semantics", n)
    made = run.rank_values("semantics", "blocking")
    assert sorted(made) == list(range(n)), run.describe()
    if policy is None:
        assert "vhpc_wait" not in run.stderr, run.describe()
        return
    stats = run.stats()
    assert sorted(stats) == list(range(n)), run.describe()
    for rank, s in stats.items():
        assert s["policy"] == policy
        # Every blocking call the program made went through the library.
        assert s["calls"] >= made[rank], f"rank {rank}: {s} but made {made[rank]}\n{run.describe()}"
