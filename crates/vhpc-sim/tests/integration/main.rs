//! Integration tests of the simulator, one module per behaviour:
//!
//! * `oracles`: closed-form results (fair shares, ping-pong round trips under
//!   busy_poll, hv_yield and native_up), derived from the scenario's costs;
//! * `golden`: exact summaries of fixed scenarios in `tests/golden/`;
//! * `fold`: futile yields folded in closed form report what they report
//!   one by one;
//! * `determinism`: same scenario and seed, same bytes (also across threads);
//! * `invariants`: accounting invariants over schedulers, policies and the
//!   repository's scenarios (checked by `util::check_invariants`);
//! * `limits`: extreme values the schema accepts (and the engine bugs some
//!   of them expose, as ignored tests);
//! * `properties`: proptest over random valid and invalid scenarios;
//! * `slicer`: the lab's time slicer (gang, poll-granular, work-conserving);
//! * `linux`: the Linux host scheduler (weights, quota, tick slices, yields);
//! * `credit2`: Xen's credit2 (weights, wake-up preemption, per-socket runqueues);
//! * `gang`: gang scheduling (domains never split, turns, relaxed skew bound);
//! * `guest_domains`: the `linux` guest scheduler (closed-form pipe round
//!   trips with hierarchical and flat scheduling domains, lone and evenly
//!   loaded tasks stay put, determinism, validation);
//! * `ticks`: timer noise (closed forms of a compute job under guest and
//!   host ticks, tickless idle, validation);
//! * `hints`: hint-driven control (`cosched` changes nothing without
//!   intruders, shields computing vCPUs, hands cores over; validation);
//! * `refill`: jobs relaunched while other jobs' first runs go on;
//! * `channels_*`: inter-VM channels (closed-form ping-pongs per NIC kind,
//!   the emulated NIC transmitting in the sending vCPU,
//!   transport priority, one device thread per VM, validation, determinism);
//! * `numa`: the memory model's closed forms (local memory is free, a fully
//!   remote phase slows by the distance ratio, bandwidth shared by k ranks)
//!   and its determinism;
//! * `numa_demand`: per-core streaming demand and queueing (closed forms,
//!   validation);
//! * `numa_topology`: host presets, and topologies and memory settings the
//!   checks reject naming the field;
//! * `machines_wire`: several machines joined by a physical network
//!   (closed-form ping-pongs across machines, k senders sharing a NIC,
//!   presets repeated per machine, validation, determinism);
//! * `protocol`: eager sends above `mpi.local_send_limit` (closed forms of an
//!   exchange and a ping-pong on one core, and the field's validation);
//! * `throttle`: concurrency throttling per parallel loop (loops that scale
//!   keep their team after one try, determinism, validation).
//!
//! `VHPC_BLESS=1 cargo test -p vhpc-sim --test integration` rewrites the
//! golden files after an intended change; `PROPTEST_CASES=N` runs N random
//! cases per property instead of the default.

mod channels_determinism;
mod channels_device_thread;
mod channels_pingpong;
mod channels_post_send;
mod channels_rts_payload;
mod channels_rx_irq;
mod channels_selection;
mod channels_tx_on_sender;
mod channels_validation;
mod credit2;
mod credit_cpu_pick;
mod determinism;
mod gang;
mod fold;
mod golden;
mod guest_domains;
mod hints;
mod invariants;
mod limits;
mod linux;
mod machines_wire;
mod numa;
mod numa_costs;
mod numa_demand;
mod numa_topology;
mod oracles;
mod properties;
mod protocol;
mod refill;
mod slicer;
mod start;
mod throttle;
mod ticks;
mod util;
