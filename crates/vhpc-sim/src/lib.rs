//! `vhpc-sim`: a deterministic discrete-event simulator of virtualized
//! multi-core hosts running tightly coupled parallel programs (MPI, OpenMP).
//!
//! It is the "predict" face of vhpc: it models what the machine at hand cannot
//! run (hypervisor schedulers, large NUMA hosts, many VMs). This crate is pure
//! Rust; the Python bindings live in the `vhpc-py` crate.
//!
//! Ground rules the whole crate follows:
//!
//! * Time is an integer count of nanoseconds ([`time::SimTime`]), never a float.
//! * Events are ordered by `(time, insertion order)` ([`queue::EventQueue`]),
//!   so equal-time events are delivered in the order they were scheduled and a
//!   run is bit-for-bit reproducible.
//! * One simulation is sequential; parallelism belongs to sweeps.
//!
//! Entry points: [`run_toml`] (one scenario, as the CLI and Python use it),
//! [`simulate`] (cancellable, trace streamed to a file), [`footprint::estimate`]
//! (the memory a scenario needs, before building it) and [`engine::Engine`]
//! for finer control.

pub mod engine;
pub mod guest;
pub mod host;
pub mod hypervisor;
pub mod memory;
pub mod metrics;
pub mod mpi;
pub mod queue;
pub mod scenario;
pub mod time;
pub mod trace;
pub mod workload;

pub use queue::EventQueue;
pub use time::SimTime;

pub use engine::footprint::{self, Footprint};
pub use engine::Cancelled;
pub use scenario::{Scenario, ScenarioError};

use std::sync::atomic::{AtomicBool, Ordering};

/// The outcome of one run: its report, and the Chrome trace if asked for.
#[derive(Debug)]
pub struct RunOutput {
    pub report: metrics::Report,
    pub trace: Option<serde_json::Value>,
}

/// Parses, validates and runs one scenario. `origin` names the file in
/// errors; `seed` overrides the scenario's.
pub fn run_toml(
    text: &str,
    origin: &str,
    seed: Option<u64>,
    trace: bool,
) -> Result<RunOutput, ScenarioError> {
    let scenario = Scenario::from_toml(text, origin)?;
    Ok(run(&scenario, seed, trace))
}

/// Runs a validated scenario (the trace, if asked for, kept in memory).
pub fn run(scenario: &Scenario, seed: Option<u64>, trace: bool) -> RunOutput {
    let sink = trace.then(|| trace::Sink::Memory(Vec::new()));
    match simulate(scenario, seed, sink, &AtomicBool::new(false)) {
        Ok((report, sink)) => RunOutput {
            report,
            trace: sink.map(|s| {
                let bytes = s.into_bytes().expect("a memory sink");
                serde_json::from_slice(&bytes).expect("the trace is JSON")
            }),
        },
        Err(Stop::Cancelled) => unreachable!("nobody sets a local flag"),
        Err(Stop::Trace(e)) => unreachable!("a memory trace cannot fail: {e}"),
    }
}

/// Why [`simulate`] stopped without a report.
#[derive(Debug)]
pub enum Stop {
    /// The cancellation flag was set (Ctrl-C).
    Cancelled,
    /// The trace could not be written.
    Trace(std::io::Error),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Cancelled => Cancelled.fmt(f),
            Stop::Trace(e) => write!(f, "cannot write the trace: {e}"),
        }
    }
}

impl std::error::Error for Stop {}

impl From<Cancelled> for Stop {
    fn from(_: Cancelled) -> Self {
        Stop::Cancelled
    }
}

/// Events [`simulate`] handles between two looks at its cancellation flag
/// (a few milliseconds of work).
pub const CANCEL_CHECK_EVENTS: u64 = 50_000;

/// Builds and runs a validated scenario, streaming its trace (if any) to
/// `trace`; stops with [`Stop::Cancelled`] soon after `cancel` is set, while
/// building the engine or running it. Returns the report and the sink.
pub fn simulate(
    scenario: &Scenario,
    seed: Option<u64>,
    trace: Option<trace::Sink>,
    cancel: &AtomicBool,
) -> Result<(metrics::Report, Option<trace::Sink>), Stop> {
    let mut engine = engine::Engine::build(scenario, seed, trace, cancel)?;
    while !engine.advance(CANCEL_CHECK_EVENTS) {
        if cancel.load(Ordering::Relaxed) {
            return Err(Stop::Cancelled);
        }
    }
    let (report, recorder) = engine.finish();
    let sink = recorder.map(trace::Recorder::finish).transpose();
    Ok((report, sink.map_err(Stop::Trace)?))
}

/// Runs a validated scenario, letting `drive` advance the engine (in
/// chunks, with [`engine::Engine::advance`]) so it can stop a long run, for
/// instance on Ctrl-C: an error from `drive` ends the run without a report.
pub fn run_checked<E>(
    scenario: &Scenario,
    seed: Option<u64>,
    trace: bool,
    drive: impl FnOnce(&mut engine::Engine) -> Result<(), E>,
) -> Result<RunOutput, E> {
    let sink = trace.then(|| trace::Sink::Memory(Vec::new()));
    let mut engine = engine::Engine::new(scenario, seed, sink);
    drive(&mut engine)?;
    let (report, recorder) = engine.finish();
    let trace = recorder.map(|r| {
        let bytes = r.finish().expect("a memory trace cannot fail");
        let bytes = bytes.into_bytes().expect("a memory sink");
        serde_json::from_slice(&bytes).expect("the trace is JSON")
    });
    Ok(RunOutput { report, trace })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Two pairs exchanging forever on 64 unpinned vCPUs of a 4-core host,
    /// for a simulated day: minutes of work unless cancelled.
    fn endless() -> Scenario {
        let text = r#"
            limit_ms = 86400000
            [host]
            cores = 4
            [[domains]]
            name = "d"
            vcpus = 64
            [[jobs]]
            name = "x"
            workload = "exchange"
            ranks = ["d", "d", "d", "d"]
            params = { compute_us = 10 }
        "#;
        Scenario::from_toml(text, "endless.toml").unwrap()
    }

    #[test]
    fn a_set_flag_stops_the_build_at_once() {
        let cancel = AtomicBool::new(true);
        let got = simulate(&endless(), None, None, &cancel);
        assert!(matches!(got, Err(Stop::Cancelled)), "{got:?}");
    }

    #[test]
    fn setting_the_flag_stops_a_long_run_within_milliseconds() {
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::Relaxed);
            Instant::now()
        });
        let got = simulate(&endless(), None, None, &cancel);
        let stopped = Instant::now();
        let set = setter.join().unwrap();
        assert!(matches!(got, Err(Stop::Cancelled)), "{got:?}");
        // A chunk of CANCEL_CHECK_EVENTS takes milliseconds (more unoptimised).
        assert!(stopped.duration_since(set) < Duration::from_secs(2));
    }

    #[test]
    fn a_trace_streamed_to_a_file_is_the_one_kept_in_memory() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/s0-beff-intra-vm-credit-pin.toml"
        ))
        .unwrap();
        let sc = Scenario::from_toml(&text, "s0.toml").unwrap();
        let never = AtomicBool::new(false);
        let (kept, sink) =
            simulate(&sc, None, Some(trace::Sink::Memory(Vec::new())), &never).unwrap();
        let memory = sink.unwrap().into_bytes().unwrap();
        let path = std::env::temp_dir().join(format!("vhpc-stream-{}.json", std::process::id()));
        let file = trace::Sink::file(std::fs::File::create(&path).unwrap());
        let (streamed, sink) = simulate(&sc, None, Some(file), &never).unwrap();
        assert!(sink.unwrap().into_bytes().is_none());
        let on_disk = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(streamed, kept);
        assert!(on_disk.len() > 1000);
        assert_eq!(on_disk, memory);
        // And the Value form `run` gives is that document.
        let value: serde_json::Value = serde_json::from_slice(&on_disk).unwrap();
        assert_eq!(run(&sc, None, true).trace.unwrap(), value);
    }
}
