//! Python bindings of `vhpc-sim`, compiled as the private module `vhpc._core`
//! and re-exported by the `vhpc` package.
//!
//! The boundary is meant to stay coarse: Python hands over one validated
//! scenario and gets columnar results back, with no Python callback per event.
//! For now only the version is exposed.

use pyo3::prelude::*;

/// The version of the native core (the crate version, which is also the
/// package version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// version() -> str
///
/// The version of the native core.
#[pyfunction]
fn version() -> &'static str {
    VERSION
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add("__version__", VERSION)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_is_the_crate_version() {
        assert_eq!(super::VERSION, env!("CARGO_PKG_VERSION"));
        assert!(super::VERSION.split('.').count() >= 3);
    }
}
