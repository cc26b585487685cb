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
//! So far only the core (time and the event queue) exists; the engine, the
//! scenario schema and the models will be added on top of it.

pub mod queue;
pub mod time;

pub use queue::EventQueue;
pub use time::SimTime;
