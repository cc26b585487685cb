//! Python bindings of `vhpc-sim`, compiled as the private module `vhpc._core`
//! and re-exported by the `vhpc` package (`vhpc.sim` wraps it).
//!
//! The boundary is coarse: Python hands over scenario text and gets the
//! report back as one JSON document, with no Python callback per event. The
//! GIL is released while a simulation runs, and [`run_many`] runs a batch in
//! parallel on rayon's pool. Scenario errors become `ValueError` carrying the
//! simulator's message ("file: field `x.y`: message").
//!
//! It also carries the lab's native time slicer (crate vhpc-slicer) as the
//! class `Slicer` (module `slicer`), which `vhpc.host.timeslice` wraps.

mod slicer;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use vhpc_sim::{Scenario, ScenarioError};

/// The version of the native core (the crate version, which is also the
/// package version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One scenario's report as JSON and, if asked for, its Chrome trace as JSON.
fn to_json(out: vhpc_sim::RunOutput) -> (String, Option<String>) {
    let report = serde_json::to_string(&out.report).expect("reports serialise");
    let trace = out
        .trace
        .map(|t| serde_json::to_string(&t).expect("traces serialise"));
    (report, trace)
}

/// Events `run` simulates without the GIL before it takes it back to see
/// Ctrl-C (a tenth of a second or so).
const CHUNK: u64 = 2_000_000;

/// Validates every scenario first (the first invalid one in input order is
/// the error), then runs them in parallel; reports in input order.
fn run_many_json(items: &[(String, String, Option<u64>)]) -> Result<Vec<String>, ScenarioError> {
    let scenarios = items
        .iter()
        .map(|(text, origin, _)| Scenario::from_toml(text, origin))
        .collect::<Result<Vec<_>, _>>()?;
    // One scenario per task: runs differ by orders of magnitude in cost, so
    // rayon must not hand a thread a long stretch of expensive ones.
    Ok(scenarios
        .par_iter()
        .zip(items.par_iter())
        .with_max_len(1)
        .map(|(scenario, (_, _, seed))| {
            let out = vhpc_sim::run(scenario, *seed, false);
            serde_json::to_string(&out.report).expect("reports serialise")
        })
        .collect())
}

fn value_error(err: ScenarioError) -> PyErr {
    PyValueError::new_err(err.to_string())
}

/// version() -> str
///
/// The version of the native core.
#[pyfunction]
fn version() -> &'static str {
    VERSION
}

/// run(scenario_toml, origin, seed=None, trace=False) -> tuple[str, str | None]
///
/// Parses, validates and runs one scenario. `origin` (usually the file path)
/// is named in errors; `seed` overrides the scenario's. Returns the report as
/// JSON and the Chrome/Perfetto trace as JSON (None unless `trace`). Raises
/// ValueError for an invalid scenario.
#[pyfunction]
#[pyo3(signature = (scenario_toml, origin, seed = None, trace = false))]
fn run(
    py: Python<'_>,
    scenario_toml: String,
    origin: String,
    seed: Option<u64>,
    trace: bool,
) -> PyResult<(String, Option<String>)> {
    let scenario = Scenario::from_toml(&scenario_toml, &origin).map_err(value_error)?;
    let out = vhpc_sim::run_checked(&scenario, seed, trace, |engine| {
        while !py.allow_threads(|| engine.advance(CHUNK)) {
            py.check_signals()?; // Ctrl-C stops a long run
        }
        Ok::<(), PyErr>(())
    })?;
    Ok(py.allow_threads(|| to_json(out)))
}

/// run_many(items) -> list[str]
///
/// Runs many scenarios, given as (scenario_toml, origin, seed or None), in
/// parallel; returns their reports as JSON in input order. Every scenario is
/// validated before any runs; the first invalid one raises ValueError
/// naming its origin.
#[pyfunction]
fn run_many(py: Python<'_>, items: Vec<(String, String, Option<u64>)>) -> PyResult<Vec<String>> {
    py.allow_threads(|| run_many_json(&items))
        .map_err(value_error)
}

/// schedulers() -> list[tuple[str, str]]
///
/// The hypervisor schedulers: (name, one-line description).
#[pyfunction]
fn schedulers() -> Vec<(&'static str, &'static str)> {
    vhpc_sim::hypervisor::SCHEDULERS
        .iter()
        .map(|s| (s.name, s.description))
        .collect()
}

/// workloads() -> list[tuple[str, str]]
///
/// The workloads a job can run: (name, one-line description).
#[pyfunction]
fn workloads() -> Vec<(&'static str, &'static str)> {
    vhpc_sim::workload::WORKLOADS
        .iter()
        .map(|w| (w.name, w.description))
        .collect()
}

/// wait_policies() -> list[str]
///
/// The MPI wait policies a job can use.
#[pyfunction]
fn wait_policies() -> Vec<&'static str> {
    vhpc_sim::mpi::WaitPolicy::NAMES.to_vec()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_many, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(wait_policies, m)?)?;
    m.add_class::<slicer::PySlicer>()?;
    m.add_function(wrap_pyfunction!(slicer::slicer_thread, m)?)?;
    m.add("SLICER_POLL_S", slicer::default_poll_s())?;
    m.add("__version__", VERSION)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PINGPONG: &str = r#"
        name = "t"
        [host]
        cores = 1
        [hypervisor]
        scheduler = "round_robin"
        [[domains]]
        name = "native"
        native = true
        [[jobs]]
        name = "pp"
        workload = "pingpong"
        ranks = ["native", "native"]
        params = { iterations = 20 }
    "#;

    #[test]
    fn version_is_the_crate_version() {
        assert_eq!(super::VERSION, env!("CARGO_PKG_VERSION"));
        assert!(super::VERSION.split('.').count() >= 3);
    }

    #[test]
    fn run_json_gives_a_report_and_a_trace_only_when_asked() {
        let (report, trace) = to_json(vhpc_sim::run_toml(PINGPONG, "t.toml", None, false).unwrap());
        let value: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(value["scenario"], "t");
        assert!(trace.is_none());
        let (_, trace) = to_json(vhpc_sim::run_toml(PINGPONG, "t.toml", None, true).unwrap());
        let trace: serde_json::Value = serde_json::from_str(&trace.unwrap()).unwrap();
        assert!(trace["traceEvents"].is_array());
    }

    #[test]
    fn run_many_keeps_input_order_and_matches_single_runs() {
        let items: Vec<_> = (1..=4)
            .map(|s| (PINGPONG.to_string(), format!("t{s}.toml"), Some(s)))
            .collect();
        let many = run_many_json(&items).unwrap();
        for ((text, origin, seed), got) in items.iter().zip(&many) {
            assert_eq!(
                &to_json(vhpc_sim::run_toml(text, origin, *seed, false).unwrap()).0,
                got
            );
        }
    }

    #[test]
    fn run_many_names_the_first_invalid_scenario() {
        let items = vec![
            (PINGPONG.to_string(), "good.toml".to_string(), None),
            (
                PINGPONG.replace("cores = 1", "cores = 0"),
                "bad.toml".to_string(),
                None,
            ),
            ("nonsense".to_string(), "worse.toml".to_string(), None),
        ];
        let err = run_many_json(&items).unwrap_err();
        assert_eq!(err.origin, "bad.toml");
        assert_eq!(err.field, "host.cores");
    }
}
