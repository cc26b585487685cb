"""Fix: libvhpc_wait from Python.

library.py builds the PMPI wait-policy library in runtime/ once per installed MPI,
locates it, and says how ranks are launched under a wait policy; bench.py is
`vhpc runtime bench` and `vhpc runtime demo`. Other faces use only the names
re-exported here.
"""

from vhpc.runtime.library import (
    LIBRARY,
    BuildFailed,
    Error,
    MpiNotInstalled,
    NotBuilt,
    UnknownMpi,
    build,
    lib_path,
    names,
    path,
    policy_env,
)

__all__ = [
    "LIBRARY",
    "BuildFailed",
    "Error",
    "MpiNotInstalled",
    "NotBuilt",
    "UnknownMpi",
    "build",
    "lib_path",
    "names",
    "path",
    "policy_env",
]
