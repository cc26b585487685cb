//! Python bindings of `vhpc-sim`, compiled as the private module `vhpc._core`
//! and re-exported by the `vhpc` package (`vhpc.sim` wraps it).
//!
//! The boundary is coarse: Python hands over scenario text and gets the
//! report back as one JSON document, with no Python callback per event. The
//! GIL is released while a simulation runs, and [`run_many`] runs a batch in
//! parallel on rayon's pool. Scenario errors become `ValueError` carrying the
//! simulator's message ("file: field `x.y`: message").
//!
//! Simulations run on a worker thread while the calling thread waits with
//! the GIL released and looks for signals every [`POLL`]: on Ctrl-C (or any
//! signal whose Python handler raises) it sets the simulation's cancellation
//! flag and raises the handler's exception (KeyboardInterrupt), during
//! parsing, building or running alike.
//!
//! It also carries the lab's native time slicer (crate vhpc-slicer) as the
//! class `Slicer` (module `slicer`), which `vhpc.host.timeslice` wraps.

mod slicer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use vhpc_sim::footprint::{self, Trace};
use vhpc_sim::{Scenario, ScenarioError, Stop};

/// The version of the native core (the crate version, which is also the
/// package version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One scenario's report as JSON and, if asked for, its Chrome trace as JSON.
#[cfg(test)]
fn to_json(out: vhpc_sim::RunOutput) -> (String, Option<String>) {
    let report = serde_json::to_string(&out.report).expect("reports serialise");
    let trace = out
        .trace
        .map(|t| serde_json::to_string(&t).expect("traces serialise"));
    (report, trace)
}

/// How often a waiting call looks for signals.
const POLL: Duration = Duration::from_millis(20);

/// How long an interrupted call waits for its worker to notice the flag
/// (it looks every few milliseconds) before it returns anyway.
const GRACE: Duration = Duration::from_millis(500);

/// Why a batch stopped.
#[derive(Debug)]
enum BatchError {
    Invalid(ScenarioError),
    Stopped(Stop),
}

/// Validates every scenario first (the first invalid one in input order is
/// the error), then runs them in parallel; reports in input order. Stops
/// soon after `cancel` is set.
fn run_many_cancellable(
    items: &[(String, String, Option<u64>)],
    cancel: &AtomicBool,
) -> Result<Vec<String>, BatchError> {
    // The seeds of one scenario share its text: each text is parsed once
    // (`vhpc reproduce s0` has 876 runs of 250 scenarios).
    let mut parsed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut scenarios = Vec::new();
    let mut scenario_of = Vec::with_capacity(items.len());
    for (text, origin, _) in items {
        if cancel.load(Ordering::Relaxed) {
            return Err(BatchError::Stopped(Stop::Cancelled));
        }
        let i = match parsed.get(text.as_str()) {
            Some(&i) => i,
            None => {
                scenarios.push(Scenario::from_toml(text, origin).map_err(BatchError::Invalid)?);
                parsed.insert(text, scenarios.len() - 1);
                scenarios.len() - 1
            }
        };
        scenario_of.push(i);
    }
    // Runs differ by orders of magnitude in cost: each thread of rayon's pool
    // takes the next item in input order when it is free (callers put their
    // long runs first), so a batch does not end on one thread's last long
    // run while the other idles, as halving the index range can.
    let next = AtomicUsize::new(0);
    let stopped: Mutex<Option<Stop>> = Mutex::new(None);
    let done: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::with_capacity(items.len()));
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads() {
            s.spawn(|_| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                match vhpc_sim::simulate(&scenarios[scenario_of[i]], items[i].2, None, cancel) {
                    Ok((report, _)) => {
                        let json = serde_json::to_string(&report).expect("reports serialise");
                        lock(&done).push((i, json));
                    }
                    Err(stop) => {
                        lock(&stopped).get_or_insert(stop);
                        // Nobody takes another item.
                        next.store(items.len(), Ordering::Relaxed);
                        break;
                    }
                }
            });
        }
    });
    if let Some(stop) = stopped.into_inner().unwrap_or_else(PoisonError::into_inner) {
        return Err(BatchError::Stopped(stop));
    }
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_unstable_by_key(|&(i, _)| i);
    Ok(done.into_iter().map(|(_, json)| json).collect())
}

/// A lock nobody holds across a panic (a simulation's panic reaches the
/// caller through `rayon::scope` anyway).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
fn run_many_json(items: &[(String, String, Option<u64>)]) -> Result<Vec<String>, ScenarioError> {
    match run_many_cancellable(items, &AtomicBool::new(false)) {
        Ok(reports) => Ok(reports),
        Err(BatchError::Invalid(e)) => Err(e),
        Err(BatchError::Stopped(stop)) => unreachable!("nobody stops a local flag: {stop}"),
    }
}

/// Runs `work` on a thread of its own while this one waits without the GIL,
/// looking for signals every [`POLL`]. A Python exception from a signal
/// handler sets `cancel`, waits up to [`GRACE`] for the worker to stop, and
/// is returned; a panic of the worker is resumed here.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    cancel: &Arc<AtomicBool>,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    let (tx, mut rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("vhpc-sim".into())
        // As the main thread's (a reserve of address space, not memory).
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| PyOSError::new_err(format!("cannot start the simulation thread: {e}")))?;
    loop {
        let (got, back) = py.allow_threads(move || (rx.recv_timeout(POLL), rx));
        rx = back;
        match got {
            Ok(value) => {
                let _ = worker.join();
                return Ok(value);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The worker died without an answer: it panicked.
                match worker.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => unreachable!("the worker always answers"),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(err) = py.check_signals() {
            cancel.store(true, Ordering::Relaxed);
            py.allow_threads(move || {
                let _ = rx.recv_timeout(GRACE);
            });
            return Err(err);
        }
    }
}

fn stop_error(stop: Stop, trace_file: Option<&PathBuf>) -> PyErr {
    match (stop, trace_file) {
        (Stop::Trace(e), Some(path)) => {
            PyOSError::new_err(format!("{}: cannot write the trace: {e}", path.display()))
        }
        (stop, _) => PyOSError::new_err(stop.to_string()),
    }
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

/// run(scenario_toml, origin, seed=None, trace=False, trace_file=None) -> tuple[str, str | None]
///
/// Parses, validates and runs one scenario. `origin` (usually the file path)
/// is named in errors; `seed` overrides the scenario's. Returns the report as
/// JSON and the Chrome/Perfetto trace as JSON (None unless `trace`). With
/// `trace_file`, the trace is streamed to that file as the run goes instead
/// (and None returned for it). Raises ValueError for an invalid scenario,
/// OSError if the trace cannot be written, and KeyboardInterrupt (or what the
/// signal handler raises) within a fraction of a second of Ctrl-C.
#[pyfunction]
#[pyo3(signature = (scenario_toml, origin, seed = None, trace = false, trace_file = None))]
fn run(
    py: Python<'_>,
    scenario_toml: String,
    origin: String,
    seed: Option<u64>,
    trace: bool,
    trace_file: Option<PathBuf>,
) -> PyResult<(String, Option<String>)> {
    let sink = match &trace_file {
        Some(path) => Some(vhpc_sim::trace::Sink::file(
            std::fs::File::create(path).map_err(|e| {
                PyOSError::new_err(format!("{}: cannot write the trace: {e}", path.display()))
            })?,
        )),
        None => trace.then(|| vhpc_sim::trace::Sink::Memory(Vec::new())),
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let got = interruptible(py, &cancel, move || {
        let scenario = Scenario::from_toml(&scenario_toml, &origin).map_err(Err)?;
        let (report, sink) = vhpc_sim::simulate(&scenario, seed, sink, &flag).map_err(Ok)?;
        let report = serde_json::to_string(&report).expect("reports serialise");
        let trace = sink
            .and_then(vhpc_sim::trace::Sink::into_bytes)
            .map(|b| String::from_utf8(b).expect("traces are UTF-8"));
        Ok::<_, Result<Stop, ScenarioError>>((report, trace))
    })?;
    got.map_err(|e| match e {
        Err(invalid) => value_error(invalid),
        Ok(stop) => stop_error(stop, trace_file.as_ref()),
    })
}

/// run_many(items) -> list[str]
///
/// Runs many scenarios, given as (scenario_toml, origin, seed or None), in
/// parallel; returns their reports as JSON in input order. Every scenario is
/// validated before any runs; the first invalid one raises ValueError
/// naming its origin. Ctrl-C stops the whole batch within a fraction of a
/// second.
#[pyfunction]
fn run_many(py: Python<'_>, items: Vec<(String, String, Option<u64>)>) -> PyResult<Vec<String>> {
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    interruptible(py, &cancel, move || run_many_cancellable(&items, &flag))?.map_err(|e| match e {
        BatchError::Invalid(e) => value_error(e),
        BatchError::Stopped(stop) => stop_error(stop, None),
    })
}

/// estimate_memory(scenario_toml, origin, trace="off") -> list[tuple[str, int]]
///
/// The memory (bytes) simulating the scenario is estimated to need, by
/// contributor, largest first (`vhpc_sim::footprint`); `trace` is "off",
/// "file" (streamed) or "memory". Nothing is built. Raises ValueError for an
/// invalid scenario.
#[pyfunction]
#[pyo3(signature = (scenario_toml, origin, trace = "off"))]
fn estimate_memory(
    py: Python<'_>,
    scenario_toml: String,
    origin: String,
    trace: &str,
) -> PyResult<Vec<(&'static str, u64)>> {
    let trace = match trace {
        "off" => Trace::Off,
        "file" => Trace::File,
        "memory" => Trace::Memory,
        other => {
            return Err(PyValueError::new_err(format!(
                "trace must be \"off\", \"file\" or \"memory\", got {other:?}"
            )))
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let got = interruptible(py, &cancel, move || {
        let scenario = Scenario::from_toml(&scenario_toml, &origin)?;
        Ok(footprint::estimate(&scenario, trace))
    })?;
    let estimate = got.map_err(value_error)?;
    Ok(estimate.parts.iter().map(|p| (p.what, p.bytes)).collect())
}

/// resolve_scenario(scenario_toml, origin) -> str
///
/// What the simulator makes of a scenario's host and jobs, as JSON: `host`
/// (`cores`, `sockets`, `nodes` with their `cores`, `mem_mib` and
/// `bandwidth_mb_s`, and `distance`: a preset filled in, the defaults
/// applied) and `jobs` (per job its `name` and `footprint_kib`, the memory
/// each rank touches for the memory model, or null for a workload the model
/// does not know) and `mpi` (the `[mpi]` section with every default
/// applied: the channels' cost tables). `vhpc plan` cuts the host and sizes
/// VMs along it. Raises
/// ValueError for an invalid scenario.
#[pyfunction]
fn resolve_scenario(py: Python<'_>, scenario_toml: String, origin: String) -> PyResult<String> {
    let cancel = Arc::new(AtomicBool::new(false));
    let got = interruptible(py, &cancel, move || {
        let scenario = Scenario::from_toml(&scenario_toml, &origin)?;
        let topo = vhpc_sim::host::Topology::of(&scenario.host);
        let nodes: Vec<serde_json::Value> = topo
            .nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "cores": n.cores,
                    "mem_mib": n.mem_mib,
                    "bandwidth_mb_s": n.bandwidth_mb_s,
                })
            })
            .collect();
        let jobs: Vec<serde_json::Value> = scenario
            .jobs
            .iter()
            .map(|j| {
                let profile = vhpc_sim::workload::memory_profile(
                    &j.workload,
                    &j.params,
                    j.ranks.len() as u32,
                );
                serde_json::json!({
                    "name": j.name,
                    "footprint_kib": profile.map(|p| p.footprint_kib),
                })
            })
            .collect();
        Ok(serde_json::json!({
            "host": {
                "cores": scenario.host.cores,
                "sockets": scenario.host.sockets,
                "nodes": nodes,
                "distance": topo.distance,
            },
            "jobs": jobs,
            "mpi": scenario.mpi,
        })
        .to_string())
    })?;
    got.map_err(value_error)
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

/// hint_policies() -> list[tuple[str, str]]
///
/// The hint-driven control policies (`domains.hints`): (name, one-line description).
#[pyfunction]
fn hint_policies() -> Vec<(&'static str, &'static str)> {
    vhpc_sim::engine::hints::HINT_POLICIES
        .iter()
        .map(|p| (p.name, p.description))
        .collect()
}

/// hosts() -> list[tuple[str, str]]
///
/// The named hosts (`host.preset`): (name, one-line description).
#[pyfunction]
fn hosts() -> Vec<(&'static str, &'static str)> {
    vhpc_sim::host::presets::PRESETS
        .iter()
        .map(|p| (p.name, p.description))
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
    m.add_function(wrap_pyfunction!(estimate_memory, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(schedulers, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(hosts, m)?)?;
    m.add_function(wrap_pyfunction!(wait_policies, m)?)?;
    m.add_function(wrap_pyfunction!(hint_policies, m)?)?;
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
        // Two scenarios interleaved, each with several seeds and a repeat
        // (a text is parsed once for all its runs).
        let longer = PINGPONG.replace("iterations = 20", "iterations = 30");
        let items: Vec<_> = [1, 1, 2, 2, 3, 3, 1]
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let text = if i % 2 == 0 { PINGPONG } else { &longer };
                (text.to_string(), format!("t{i}.toml"), Some(s))
            })
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
