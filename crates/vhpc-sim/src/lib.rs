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
//! * Events are ordered by `(time, insertion sequence)` ([`queue::EventQueue`]),
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
pub mod hypervisor;
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
