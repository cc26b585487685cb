//! Events by kind, for profiling (cargo feature `event-counts`, off by
//! default: the engine's code and reports are then what they are without
//! this file). Which events a run spends its time on decides what a
//! structural speed-up could fold:
//!
//!     cargo run --release -p vhpc-sim --features event-counts --example run -- SCENARIO.toml
//!
//! prints the table on stderr after the report.

use super::*;

/// The rows of [`EventCounts`]: an event kind, split by the role of the
/// task it concerns where that tells more (ranks against dom0's relay,
/// device threads and receive interrupts).
pub const ROWS: [&str; 14] = [
    "slice (decision expires, idle wake-up)",
    "work ends: rank",
    "work ends: relay, device thread, rx interrupt",
    "work ends: background",
    "poll window ends",
    "wake (sleep timer)",
    "guest slice ends",
    "packet lands: rank",
    "packet lands: relay, device thread, rx interrupt",
    "scheduler timer (accounting tick)",
    "packet reaches a machine's NIC",
    "guest scheduler tick",
    "domain timer tick",
    "host timer tick",
];

/// What a run's events were, counted as the engine pops them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Per row of [`ROWS`]: events handled (each counted in `events`).
    pub handled: [u64; ROWS.len()],
    /// Per row: stale events (superseded; not counted in `events`).
    pub stale: [u64; ROWS.len()],
    /// Events popped at the same instant as the event popped before them:
    /// their order is the queue's push order (FIFO), so handling any of
    /// them at another moment than the engine does may change a result.
    pub same_instant: u64,
    /// Blocked vCPUs woken: of domain 0 (dom0, when the scenario has one),
    /// and of the other domains.
    pub wakes_domain0: u64,
    pub wakes_other: u64,
    /// Cores re-decided at once (tickles, slice ends): each takes the
    /// running vCPU off, if any, and picks again.
    pub redecisions: u64,
    /// Poll windows folded with futile yields (counted in `events`, not
    /// handled one by one: see `fold`).
    pub folded: u64,
}

impl EventCounts {
    /// Events handled one by one (`events` less the folded poll windows).
    pub fn total_handled(&self) -> u64 {
        self.handled.iter().sum()
    }
}

impl std::fmt::Display for EventCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.total_handled().max(1) as f64;
        writeln!(
            f,
            "{:<50} {:>13} {:>6} {:>11}",
            "event", "handled", "%", "stale"
        )?;
        for (i, row) in ROWS.iter().enumerate() {
            if self.handled[i] + self.stale[i] == 0 {
                continue;
            }
            let share = 100.0 * self.handled[i] as f64 / total;
            writeln!(
                f,
                "{row:<50} {:>13} {share:>6.2} {:>11}",
                self.handled[i], self.stale[i]
            )?;
        }
        writeln!(
            f,
            "{:<50} {:>13}",
            "handled, all kinds",
            self.total_handled()
        )?;
        writeln!(f, "{:<50} {:>13}", "poll windows folded", self.folded)?;
        writeln!(
            f,
            "{:<50} {:>13}",
            "popped at the previous pop's instant", self.same_instant
        )?;
        writeln!(
            f,
            "{:<50} {:>13}",
            "vCPU wakes: domain 0", self.wakes_domain0
        )?;
        writeln!(
            f,
            "{:<50} {:>13}",
            "vCPU wakes: other domains", self.wakes_other
        )?;
        write!(
            f,
            "{:<50} {:>13}",
            "cores re-decided at once", self.redecisions
        )
    }
}

impl Engine {
    /// Counts event `ev`, popped at the previous pop's instant or not.
    pub(super) fn count_event(&mut self, ev: Ev, handled: bool, same_instant: bool) {
        let helper = |t: u32| !matches!(self.tasks[t as usize].role, Role::Rank { .. });
        let row = match ev {
            Ev::Slice { .. } => 0,
            Ev::Work { task, .. } => match self.tasks[task as usize].role {
                Role::Rank { .. } => 1,
                Role::Background { .. } => 3,
                _ => 2,
            },
            Ev::Poll { .. } => 4,
            Ev::Wake { .. } => 5,
            Ev::GuestSlice { .. } => 6,
            Ev::Arrive { task, .. } if helper(task) => 8,
            Ev::Arrive { .. } => 7,
            Ev::Timer => 9,
            Ev::WireRx { .. } => 10,
            Ev::GuestTick => 11,
            Ev::Tick { .. } => 12,
            Ev::HostTick => 13,
        };
        let c = &mut self.counts;
        if handled {
            c.handled[row] += 1;
        } else {
            c.stale[row] += 1;
        }
        c.same_instant += u64::from(same_instant);
    }

    /// The events of the run so far, by kind.
    pub fn event_counts(&self) -> EventCounts {
        EventCounts {
            folded: self.folded,
            ..self.counts.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    /// Every event `events` counts is in a row, or a folded poll window.
    #[test]
    fn rows_add_up_to_the_reports_events() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scenarios/scale-credit-48c-192dom.toml"
        ))
        .expect("the scale scenario")
        .replace("limit_ms = 3600000", "limit_ms = 2000");
        let sc = Scenario::from_toml(&text, "scale").expect("valid");
        let mut engine = super::Engine::new(&sc, None, None);
        while !engine.advance(u64::MAX) {}
        let counts = engine.event_counts();
        let (report, _) = engine.finish();
        assert_eq!(counts.total_handled() + counts.folded, report.events);
        // The scale scenario's packets all pass dom0's relay first: at the
        // end, at most one a rank is between the relay and its rank.
        let (ranks, relay) = (counts.handled[7], counts.handled[8]);
        assert!(ranks > 0 && relay >= ranks && relay - ranks <= 192);
        assert!(counts.wakes_domain0 > 0 && counts.redecisions > 0);
    }
}
