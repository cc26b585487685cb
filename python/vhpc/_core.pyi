"""Type stub of the native module ``vhpc._core`` (built from crates/vhpc-py)."""

__version__: str

def version() -> str:
    """The version of the native core (the crate version)."""
