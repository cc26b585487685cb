//! `vhpc._core.Slicer`: the native lab slicer (crate vhpc-slicer) for
//! `vhpc.host.timeslice.Slicer`, which wraps it. Slicing runs on one shared
//! native thread without the GIL; Python only starts, reads and stops.

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use vhpc_slicer::{driver, Config, HintConfig, Stats};

fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| PyValueError::new_err(format!("{name} must be positive, got {value}")))
}

/// Slicer(domains, slice_s, work_conserving=True, weights=None, poll_s=None, log=False, phase_s=0.0,
///        hint_file=None, hint_queue=0, hint_members=None, hint_slots=None, hint_domains=None,
///        hint_handover=True, hint_cosched=False, hint_cpus=None)
///
/// Thaws one freezer group of `domains` at a time (see vhpc.host.timeslice).
/// With `hint_file`, reads the ranks' states there (vhpc.host.hints): the
/// queue's index, each domain's member index in the file, its ranks' slots
/// as (page, slot), its domain page (for co-scheduling), and with
/// `hint_cpus` each domain's CPUs (a domain whose CPUs no other domain of the
/// slicer uses has its parked ranks poll for their turn before they sleep).
#[pyclass(module = "vhpc._core", name = "Slicer")]
#[derive(Debug)]
pub struct PySlicer {
    config: Config,
    running: Option<driver::Slicer>,
    last: Stats,
    last_log: Vec<(u64, u64)>,
}

#[pymethods]
impl PySlicer {
    #[new]
    #[pyo3(signature = (domains, slice_s, work_conserving = true, weights = None, poll_s = None, log = false, phase_s = 0.0, hint_file = None, hint_queue = 0, hint_members = None, hint_slots = None, hint_domains = None, hint_handover = true, hint_cosched = false, hint_cpus = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        domains: Vec<PathBuf>,
        slice_s: f64,
        work_conserving: bool,
        weights: Option<Vec<u64>>,
        poll_s: Option<f64>,
        log: bool,
        phase_s: f64,
        hint_file: Option<PathBuf>,
        hint_queue: u32,
        hint_members: Option<Vec<u32>>,
        hint_slots: Option<Vec<Vec<(u32, u32)>>>,
        hint_domains: Option<Vec<u32>>,
        hint_handover: bool,
        hint_cosched: bool,
        hint_cpus: Option<Vec<Vec<u32>>>,
    ) -> PyResult<Self> {
        if !(0.0..=slice_s).contains(&phase_s) {
            return Err(PyValueError::new_err(format!(
                "phase_s must be between 0 and slice_s ({slice_s}), got {phase_s}"
            )));
        }
        if domains.is_empty() {
            return Err(PyValueError::new_err("need at least one domain"));
        }
        if let Some(w) = &weights {
            if w.len() != domains.len() || w.contains(&0) {
                return Err(PyValueError::new_err(format!(
                    "need one positive weight per domain, got {w:?}"
                )));
            }
        }
        let n = domains.len();
        let hints = match hint_file {
            None => None,
            Some(file) => {
                let members = hint_members.unwrap_or_else(|| (0..n as u32).collect());
                let slots = hint_slots.unwrap_or_else(|| vec![Vec::new(); n]);
                let domains_of = hint_domains.unwrap_or_else(|| (0..n as u32).collect());
                if members.len() != n || slots.len() != n || domains_of.len() != n {
                    return Err(PyValueError::new_err(format!(
                        "need one hint member, slot list and domain per domain ({n}), got {}, {} and {}",
                        members.len(), slots.len(), domains_of.len()
                    )));
                }
                Some(HintConfig {
                    file,
                    queue: hint_queue,
                    members,
                    slots,
                    domains: domains_of,
                    handover: hint_handover,
                    cosched: hint_cosched,
                    cpus: hint_cpus.unwrap_or_default(),
                })
            }
        };
        Ok(Self {
            config: Config {
                domains,
                slice: seconds("slice_s", slice_s)?,
                work_conserving,
                weights,
                poll: poll_s.map_or(Ok(driver::DEFAULT_POLL), |p| seconds("poll_s", p))?,
                log,
                phase: Duration::from_secs_f64(phase_s),
                hints,
            },
            running: None,
            last: Stats {
                slices: vec![0; n],
                ..Stats::default()
            },
            last_log: Vec::new(),
        })
    }

    /// Thaws the first domain, freezes the others and starts slicing.
    /// OSError if a group cannot be written (it names the file).
    fn start(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.running.is_some() {
            return Err(PyRuntimeError::new_err("the slicer is already running"));
        }
        let config = &self.config;
        let slicer = py
            .allow_threads(|| driver::Slicer::start(config))
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidInput => PyValueError::new_err(e.to_string()),
                _ => PyOSError::new_err(e.to_string()),
            })?;
        self.running = Some(slicer);
        Ok(())
    }

    /// Stops slicing and thaws every domain. RuntimeError if the slicer had
    /// stopped on its own (a group could not be written; all thawed then) or
    /// a group could not be thawed now.
    fn stop(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(mut slicer) = self.running.take() else {
            return Ok(());
        };
        let (stats, log, error) = py.allow_threads(|| slicer.stop());
        (self.last, self.last_log) = (stats, log);
        match error {
            Some(e) => Err(PyRuntimeError::new_err(format!("slicer failed: {e}"))),
            None => Ok(()),
        }
    }

    /// switch_log() -> list[tuple[int, int]]
    ///
    /// With `log=True`: each switch so far as (decided_ns, thawed_ns),
    /// CLOCK_MONOTONIC: when the slicer knew it had to switch (a watcher
    /// found the domain idle, or a tick found it idle or its slice over) and
    /// when the next domain was thawed.
    fn switch_log(&self) -> Vec<(u64, u64)> {
        self.running
            .as_ref()
            .map_or_else(|| self.last_log.clone(), driver::Slicer::log)
    }

    /// Whether the slicer was started and not stopped.
    #[getter]
    fn running(&self) -> bool {
        self.running.is_some()
    }

    /// Why the running slicer stopped slicing on its own, or None.
    #[getter]
    fn error(&self) -> Option<String> {
        self.running.as_ref().and_then(driver::Slicer::error)
    }

    /// Slices granted to each domain so far.
    #[getter]
    fn slices(&self) -> Vec<u64> {
        self.stats().slices
    }

    /// Domain changes so far.
    #[getter]
    fn switches(&self) -> u64 {
        self.stats().switches
    }

    /// Of which before the slice ended (the running domain was idle).
    #[getter]
    fn early_switches(&self) -> u64 {
        self.stats().early_switches
    }

    /// Of the early switches, those a per-CPU watcher found (the rest, the
    /// driver's fallback poll).
    #[getter]
    fn watched_switches(&self) -> u64 {
        self.stats().watched_switches
    }

    /// Of the early switches, those the hint channel asked the slicer for.
    #[getter]
    fn hinted_switches(&self) -> u64 {
        self.stats().hinted_switches
    }

    /// Switches the ranks made themselves (a hand-over to a parked domain).
    #[getter]
    fn handovers(&self) -> u64 {
        self.stats().handovers
    }

    /// Co-scheduling: a vCPU brought in for its sibling's collective.
    #[getter]
    fn pulls(&self) -> u64 {
        self.stats().pulls
    }
}

impl PySlicer {
    fn stats(&self) -> Stats {
        self.running
            .as_ref()
            .map_or_else(|| self.last.clone(), driver::Slicer::stats)
    }
}

/// slicer_thread() -> tuple[int | None, str]
///
/// The shared slicer thread's id while one runs, and how it is (or was last)
/// scheduled: "SCHED_FIFO priority 10", or why not.
#[pyfunction]
pub fn slicer_thread() -> (Option<i32>, String) {
    (driver::thread_id(), driver::policy())
}

/// The default poll interval of a work-conserving slicer, in seconds.
pub fn default_poll_s() -> f64 {
    driver::DEFAULT_POLL.as_secs_f64()
}
