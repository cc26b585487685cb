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
//! Entry points: [`run_toml`] (one scenario, as the CLI and Python use it)
//! and [`engine::Engine`] for finer control.

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

pub use scenario::{Scenario, ScenarioError};

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

/// Runs a validated scenario.
pub fn run(scenario: &Scenario, seed: Option<u64>, trace: bool) -> RunOutput {
    let never = run_checked(scenario, seed, trace, |engine| {
        while !engine.advance(u64::MAX) {}
        Ok::<(), std::convert::Infallible>(())
    });
    match never {
        Ok(out) => out,
        Err(infallible) => match infallible {},
    }
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
    let mut engine = engine::Engine::new(scenario, seed, trace);
    let names = engine.vcpu_names();
    let cores = scenario.host.cores;
    drive(&mut engine)?;
    let (report, slices) = engine.finish();
    let trace = slices.map(|r| r.into_chrome(cores, &names));
    Ok(RunOutput { report, trace })
}
