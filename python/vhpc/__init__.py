"""vhpc: run tightly coupled parallel programs well on virtualized hosts.

Three faces over one vocabulary: fix (``runtime/``, the libvhpc_wait PMPI
library), measure (``vhpc lab``) and predict (``vhpc sim``, the Rust simulator
exposed through the private native module ``vhpc._core``).
"""

from vhpc._core import version as _core_version

__version__: str = _core_version()

__all__ = ["__version__"]
