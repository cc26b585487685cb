"""Fix: libvhpc_wait from Python.

library.py builds the PMPI wait-policy library in runtime/ once per installed MPI,
locates it, and says how ranks are launched under a wait policy; discover.py finds
the MPIs installed here (Debian's, a virtualenv's wheels, --mpi-prefix); launch.py is
`vhpc run`, openmp.py its OpenMP waiting for hybrid jobs; wheels.py installs PyPI's
MPI wheels into cached virtualenvs (the wheel tests and the benchmark use them);
bench.py is `vhpc runtime bench` and `vhpc runtime demo`, hybrid.py `vhpc runtime
bench-hybrid`. Other faces use only the names re-exported here.
"""

from vhpc.runtime.library import (
    LIBRARY,
    MPI_POLICIES,
    BuildFailed,
    Error,
    MpiNotInstalled,
    NotBuilt,
    UnknownMpi,
    build,
    built_for,
    lib_path,
    listing,
    names,
    own_policies,
    path,
    policy_env,
)

__all__ = [
    "LIBRARY",
    "MPI_POLICIES",
    "BuildFailed",
    "Error",
    "MpiNotInstalled",
    "NotBuilt",
    "UnknownMpi",
    "build",
    "built_for",
    "lib_path",
    "listing",
    "names",
    "own_policies",
    "path",
    "policy_env",
]
