//! Timer noise: the guest kernel's periodic tick on each vCPU of a domain
//! (`domains.tick`) and the hypervisor's on each core (`hypervisor.host_tick`).
//!
//! Ticks fall on a common grid (multiples of the period from time zero), as
//! Linux aligns its CPUs' ticks by default (no `skew_tick`). A tick that hits a
//! running vCPU costs its current task `cost_ns` of CPU before anything else
//! (the same debt a vCPU switch leaves), so the work, poll window or message
//! handling under way finishes that much later. Tickless idle: a halted vCPU
//! takes no tick, and a domain whose vCPUs are all halted stops its timer
//! until one wakes (NO_HZ; likewise the host's with every core idle). A vCPU
//! that is runnable but descheduled takes no tick either: Xen folds the
//! virtual timer interrupts it missed into the one it delivers next, which
//! the next tick charges (an under-count of at most one tick per
//! descheduling).

use super::*;

/// (period, cost per tick), both ns.
type Rate = (u64, u64);

#[derive(Debug)]
pub(super) struct Ticks {
    /// Per domain: its tick, and whether its next one is queued.
    domains: Vec<Option<Rate>>,
    armed: Vec<bool>,
    /// Per domain: its vCPUs (`first..first + count`).
    vcpus: Vec<(usize, usize)>,
    host: Option<Rate>,
    host_armed: bool,
}

/// The first grid point of `period` strictly after `now`.
fn next_on_grid(now: SimTime, period: u64) -> SimTime {
    SimTime::from_ns((now.as_ns() / period + 1) * period)
}

impl Ticks {
    /// None when no tick is configured (the engine's default path).
    pub(super) fn of(sc: &Scenario) -> Option<Box<Ticks>> {
        let rate = |t: &crate::scenario::Tick| (t.interval_ns(), t.cost_ns);
        let domains: Vec<Option<Rate>> = sc
            .domains
            .iter()
            .map(|d| d.tick.as_ref().map(rate))
            .collect();
        let host = sc.hypervisor.host_tick.as_ref().map(rate);
        if host.is_none() && domains.iter().all(Option::is_none) {
            return None;
        }
        Some(Box::new(Ticks {
            armed: vec![false; domains.len()],
            domains,
            vcpus: vcpu_ranges(sc),
            host,
            host_armed: false,
        }))
    }
}

impl Engine {
    /// Arms the timers of `v`'s domain and of the host if they had stopped
    /// (at the start, and when a vCPU wakes).
    pub(super) fn tick_wake(&mut self, v: VcpuId) {
        let Some(ticks) = self.ticks.as_mut() else {
            return;
        };
        let d = self.vcpus[v].domain;
        if let (Some((period, _)), false) = (ticks.domains[d], ticks.armed[d]) {
            ticks.armed[d] = true;
            let at = next_on_grid(self.now, period);
            self.queue.push(at, Ev::Tick { domain: d as u32 }.pack());
        }
        if let (Some((period, _)), false) = (ticks.host, ticks.host_armed) {
            ticks.host_armed = true;
            self.queue
                .push(next_on_grid(self.now, period), Ev::HostTick.pack());
        }
    }

    /// Domain `d`'s tick: every running vCPU of it pays; the timer goes on
    /// while any of its vCPUs is not halted.
    pub(super) fn domain_tick(&mut self, d: usize) {
        let ticks = self.ticks.as_ref().expect("a Tick event needs ticks");
        let (period, cost) = ticks.domains[d].expect("only ticking domains arm");
        let (first, count) = ticks.vcpus[d];
        let mut awake = false;
        for v in first..first + count {
            match self.vcpus[v].hv {
                HvState::Running(_) => {
                    awake = true;
                    self.charge_tick(v, cost);
                }
                HvState::Runnable => awake = true,
                HvState::Blocked => {}
            }
        }
        let ticks = self.ticks.as_mut().expect("checked");
        ticks.armed[d] = awake;
        if awake {
            let at = next_on_grid(self.now, period);
            self.queue.push(at, Ev::Tick { domain: d as u32 }.pack());
        }
    }

    /// The hypervisor's tick: every busy core's vCPU pays; the timer goes
    /// on while any core is busy or any vCPU waits for one.
    pub(super) fn host_tick(&mut self) {
        let ticks = self.ticks.as_ref().expect("a HostTick event needs ticks");
        let (period, cost) = ticks.host.expect("only a ticking host arms");
        for core in 0..self.cores.len() {
            if let Some(v) = self.cores[core].vcpu {
                self.charge_tick(v, cost);
            }
        }
        let awake = self.vcpus.iter().any(|v| v.hv != HvState::Blocked);
        let ticks = self.ticks.as_mut().expect("checked");
        ticks.host_armed = awake;
        if awake {
            self.queue
                .push(next_on_grid(self.now, period), Ev::HostTick.pack());
        }
    }

    /// A tick's handler runs on running vCPU `v` before its task goes on.
    fn charge_tick(&mut self, v: VcpuId, cost: u64) {
        let Some(t) = self.vcpus[v].guest.current else {
            return;
        };
        self.settle(t);
        let task = &mut self.tasks[t];
        task.debt += cost;
        task.stats.ticks += 1;
        // Its pending work or poll event moves later: supersede it.
        task.gen = task.gen.wrapping_add(1);
        task.wait.armed = false;
        self.kick(v);
    }
}
