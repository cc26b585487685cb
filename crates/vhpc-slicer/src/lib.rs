//! The lab's time slicer in native code: a hypervisor-like scheduler for
//! groups of processes emulating VMs ("domains"), each a cgroup v1 freezer
//! group. One domain of a slicer is thawed at a time, for a slice, in turn
//! or by weight (stride scheduling, [`pick`]); a work-conserving slicer
//! switches early when every task of the running domain is blocked, as a
//! hypervisor runs another vCPU when one halts.
//!
//! - [`pick`]: who gets the next slice (pure, deterministic).
//! - [`group`]: one freezer group: freeze, thaw, and whether a task wants a CPU.
//! - [`queue`]: one slicer's domains and its switch rule.
//! - [`driver`]: the single native thread that serves every slicer of the process.
//! - [`hints`]: the hint channel, a page per domain where the ranks say they wait.
//!
//! `vhpc._core.Slicer` (crates/vhpc-py) exposes [`driver::Slicer`] to Python,
//! where `vhpc.host.timeslice.Slicer` wraps it.

pub mod driver;
pub mod group;
pub mod hints;
pub mod pick;
pub mod queue;

pub use driver::{Slicer, DEFAULT_POLL};
pub use hints::HintConfig;
pub use queue::{Config, Stats, Switch};
