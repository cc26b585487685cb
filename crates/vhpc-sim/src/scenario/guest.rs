//! `[guest]`'s scheduler fields: defaults and validation (the believed
//! topology must cover every domain's vCPUs when `linux` schedules them).

use serde::{Deserialize, Serialize};

use super::Scenario;
use crate::guest::{domains, SCHEDULERS};

/// What the guest believes about its vCPUs (`guest.topology`), in vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestTopology {
    /// vCPUs per core (SMT siblings); 1: no SMT level.
    #[serde(default = "one")]
    pub smt: u32,
    /// vCPUs per shared last-level cache; 0: all vCPUs of a node.
    #[serde(default)]
    pub llc: u32,
    /// NUMA nodes the vCPUs split into (even, contiguous).
    #[serde(default = "one")]
    pub numa_nodes: u32,
}

impl Default for GuestTopology {
    fn default() -> Self {
        GuestTopology {
            smt: 1,
            llc: 0,
            numa_nodes: 1,
        }
    }
}

impl From<GuestTopology> for domains::Topology {
    fn from(t: GuestTopology) -> Self {
        domains::Topology {
            smt: t.smt,
            llc: t.llc,
            numa_nodes: t.numa_nodes,
        }
    }
}

fn one() -> u32 {
    1
}
pub(super) fn default_scheduler() -> String {
    "fixed".into()
}
pub(super) fn default_domains() -> String {
    "hierarchical".into()
}
/// CONFIG_HZ=250, distributions' default (and the calibrated hosts' `hz`).
pub(super) fn default_tick_us() -> u64 {
    4_000
}
/// `sysctl_sched_migration_cost` = 500000 ns (kernel/sched/fair.c).
pub(super) fn default_migration_cost_us() -> u64 {
    500
}

/// (field under `guest.`, message) of the first problem.
pub(super) fn check(sc: &Scenario) -> Result<(), (String, String)> {
    let g = &sc.guest;
    if !SCHEDULERS.iter().any(|s| s.name == g.scheduler) {
        let names: Vec<_> = SCHEDULERS.iter().map(|s| s.name).collect();
        return Err((
            "guest.scheduler".into(),
            format!(
                "unknown guest scheduler {:?}; known: {}",
                g.scheduler,
                names.join(", ")
            ),
        ));
    }
    if g.domains != "hierarchical" && g.domains != "flat" {
        return Err((
            "guest.domains".into(),
            format!("must be \"hierarchical\" or \"flat\", got {:?}", g.domains),
        ));
    }
    if g.tick_us == 0 || g.tick_us > 1_000_000 {
        return Err((
            "guest.tick_us".into(),
            format!("must be between 1 and 1000000 µs, got {}", g.tick_us),
        ));
    }
    if g.migration_cost_us > 10_000_000 {
        return Err((
            "guest.migration_cost_us".into(),
            format!(
                "must be at most 10 s (10000000), got {}",
                g.migration_cost_us
            ),
        ));
    }
    for (field, v) in [
        ("wake_halted_ns", g.wake_halted_ns),
        ("refill_ns", g.refill_ns),
    ] {
        if v > 1_000_000_000 {
            return Err((
                format!("guest.{field}"),
                format!("must be at most 1 s (1000000000), got {v}"),
            ));
        }
    }
    if g.scheduler == "linux" && g.domains == "hierarchical" {
        for d in sc.domains.iter().filter(|d| d.vcpus > 1) {
            domains::covers(d.vcpus as u32, g.topology.into()).map_err(|(field, msg)| {
                (
                    format!("guest.topology.{field}"),
                    format!("{msg} (domain {:?})", d.name),
                )
            })?;
        }
    }
    Ok(())
}
