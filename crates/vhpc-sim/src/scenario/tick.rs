//! Timer ticks (`domains.tick`, `hypervisor.host_tick`) and a domain's hint
//! policy (`domains.hints`, checked here beside them): the periodic timer
//! interrupt of a guest kernel or of the hypervisor, at `hz` per second, each
//! costing `cost_ns` of CPU on the vCPU it hits. Absent: no ticks (the
//! default, so older scenarios are unchanged).

use serde::{Deserialize, Serialize};

use super::Scenario;

/// A periodic timer interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tick {
    /// Interrupts per second (Linux's CONFIG_HZ: 100, 250, 300, 1000).
    pub hz: u32,
    /// CPU each interrupt takes from the vCPU it hits (handler, and for a
    /// guest the hypervisor's delivery of the virtual interrupt).
    pub cost_ns: u64,
}

impl Tick {
    /// The period, in ns (1e9 / hz, rounded down: 300 Hz ticks every 3333333 ns).
    pub fn interval_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz)
    }
}

fn check_one(field: String, t: &Tick) -> Result<(), (String, String)> {
    if t.hz == 0 || t.hz > 100_000 {
        return Err((
            format!("{field}.hz"),
            format!("must be between 1 and 100000, got {}", t.hz),
        ));
    }
    if t.cost_ns >= t.interval_ns() {
        return Err((
            format!("{field}.cost_ns"),
            format!(
                "must be below the tick's period ({} ns at {} Hz), got {}",
                t.interval_ns(),
                t.hz,
                t.cost_ns
            ),
        ));
    }
    Ok(())
}

/// (field, message) of the first problem.
pub(super) fn check(sc: &Scenario) -> Result<(), (String, String)> {
    if let Some(t) = &sc.hypervisor.host_tick {
        check_one("hypervisor.host_tick".into(), t)?;
    }
    for (i, d) in sc.domains.iter().enumerate() {
        if let Some(t) = &d.tick {
            check_one(format!("domains[{i}].tick"), t)?;
        }
        if let Some(name) = &d.hints {
            check_hints(format!("domains[{i}].hints"), name, d)?;
        }
    }
    Ok(())
}

/// `domains.hints`: a known policy, in a VM (a native OS has no hypervisor to hint).
fn check_hints(field: String, name: &str, d: &super::Domain) -> Result<(), (String, String)> {
    use crate::engine::hints::{by_name, HINT_POLICIES};
    if by_name(name).is_none() {
        let names: Vec<_> = HINT_POLICIES.iter().map(|p| p.name).collect();
        return Err((
            field,
            format!("unknown hint policy {name:?}; known: {}", names.join(", ")),
        ));
    }
    if d.native || d.dom0 {
        return Err((
            field,
            "hints are for a VM (not a native domain or dom0)".into(),
        ));
    }
    Ok(())
}
