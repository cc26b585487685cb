"""libvhpc_wait keeps MPI semantics: every intercepted C call, checked by
tests/runtime/semantics.c against closed forms, with 2, 3 and 4 ranks, under
each wait policy and without the library.  With VHPC_STATS=1 the library must
also have counted every blocking call the program made."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("n", [2, 3, 4])
def test_c_semantics(mpirun, programs, policy, n):
    run = mpirun(n, [programs["semantics"]], policy=policy, env={"VHPC_STATS": "1"})
    # Every blocking call the program made went through the library.
    run.assert_counted("semantics", n, policy)
