//! The engine's side of a migrating guest scheduler (`guest.scheduler =
//! "linux"`): it asks the policy where a waking task goes, lets a vCPU whose
//! run queue emptied pull a task, runs periodic balancing on the guest tick,
//! moves tasks between run queues, and charges the physical costs (a cache
//! refill on another core, `guest.refill_ns`).

use super::*;
use crate::guest::{domains::Topology, linux::Linux, GuestOps, Why};
use crate::metrics::GuestReport;

impl Engine {
    pub(super) fn build_guest_scheduler(&mut self, sc: &Scenario) {
        if sc.guest.scheduler == "fixed" {
            return;
        }
        let mut first = 0;
        let spans: Vec<(VcpuId, u32)> = sc
            .domains
            .iter()
            .map(|d| {
                let span = (first, d.vcpus as u32);
                first += d.vcpus;
                span
            })
            .collect();
        let topo: Topology = sc.guest.topology.into();
        self.guest_sched = Some(Box::new(Linux::new(
            &spans,
            topo,
            sc.guest.domains == "flat",
            SimTime::from_us(sc.guest.migration_cost_us),
            SimTime::from_us(sc.guest.tick_us),
        )));
        self.guest_migrations = vec![[0; 3]; sc.domains.len()];
    }

    /// The vCPU waking task `t` goes to (moved there if it differs).
    // Off the default path: kept out of the hot loop's inlined code.
    #[cold]
    pub(super) fn guest_place(&mut self, t: TaskId, waker: Option<TaskId>) -> VcpuId {
        let flips = match waker {
            Some(w) => (self.record_wakee(w, t), self.guest_tasks[t].wakee_flips),
            None => (0, self.guest_tasks[t].wakee_flips),
        };
        let mut g = self.guest_sched.take().expect("a guest scheduler");
        let prev = self.tasks[t].vcpu;
        let from = waker.map(|w| self.tasks[w].vcpu);
        let v = g.select_wake(&*self, prev, from, waker.is_some(), flips);
        self.guest_sched = Some(g);
        if v != prev {
            self.moved(t, v, Why::Wake);
        }
        v
    }

    /// `record_wakee`: the waker's flips, halved once a second has passed,
    /// counted up when it wakes another task than last time. Its new value.
    fn record_wakee(&mut self, waker: TaskId, wakee: TaskId) -> u32 {
        let now = self.now;
        let w = &mut self.guest_tasks[waker];
        if now >= w.flip_decay + SimTime::from_s(1) {
            w.wakee_flips >>= 1;
            w.flip_decay = now;
        }
        if w.last_wakee != wakee as u32 {
            w.last_wakee = wakee as u32;
            w.wakee_flips += 1;
        }
        w.wakee_flips
    }

    /// Newly idle `v` (inside `run_guest`): pulls a task and switches to it.
    // Off the default path: kept out of the hot loop's inlined code.
    #[cold]
    pub(super) fn guest_newidle(&mut self, v: VcpuId) -> bool {
        let mut g = self.guest_sched.take().expect("a guest scheduler");
        let pulled = g.newidle(self.now, self, v);
        if !pulled {
            g.idle_start(self.now, v);
        }
        self.guest_sched = Some(g);
        let moved = std::mem::take(&mut self.guest_moved);
        for &(t, _, _) in &moved {
            debug_assert_eq!(self.vcpus[v].guest.current, Some(t));
            self.switch_to(t);
        }
        self.guest_moved = moved;
        self.guest_moved.clear();
        pulled
    }

    // Off the default path: kept out of the hot loop's inlined code.
    #[cold]
    /// A task became current on idle vCPU `v`: its idle period ends, and
    /// waking it there costs `wake_halted_ns` more if `v` is halted.
    pub(super) fn guest_arrival(&mut self, t: TaskId, v: VcpuId) {
        let now = self.now;
        if let Some(g) = self.guest_sched.as_mut() {
            g.idle_end(now, v);
        }
        if self.started && self.vcpus[v].hv == HvState::Blocked {
            self.tasks[t].debt += self.costs.wake_halted;
        }
    }

    /// The guest tick: periodic balancing, then the moved tasks' vCPUs react.
    // Off the default path: kept out of the hot loop's inlined code.
    #[cold]
    pub(super) fn guest_tick(&mut self) {
        let mut g = self.guest_sched.take().expect("a guest scheduler");
        g.balance(self.now, self);
        let next = self.now + g.tick();
        self.guest_sched = Some(g);
        self.queue.push(next, Ev::GuestTick.pack());
        let moved = std::mem::take(&mut self.guest_moved);
        for &(t, v, current) in &moved {
            self.after_enqueue(t, v, current);
        }
        self.guest_moved = moved;
        self.guest_moved.clear();
    }

    /// Bookkeeping of a move of `t` to `v`.
    fn moved(&mut self, t: TaskId, v: VcpuId, why: Why) {
        let task = &mut self.tasks[t];
        task.vcpu = v;
        task.stats.migrations += 1;
        let k = match why {
            Why::Wake => 0,
            Why::NewIdle => 1,
            Why::Periodic => 2,
        };
        self.guest_migrations[task.domain][k] += 1;
    }

    /// A task resuming on another physical core refills its cache there.
    // Off the default path: kept out of the hot loop's inlined code.
    #[cold]
    pub(super) fn refill(&mut self, t: TaskId) {
        if self.costs.refill == 0 {
            return;
        }
        let HvState::Running(core) = self.vcpus[self.tasks[t].vcpu].hv else {
            return;
        };
        let g = &mut self.guest_tasks[t];
        if g.last_core != NO_CORE && g.last_core != core as u32 {
            self.tasks[t].debt += self.costs.refill;
        }
        g.last_core = core as u32;
    }

    pub(super) fn guest_report(&self) -> Option<Vec<GuestReport>> {
        self.guest_sched.as_ref()?;
        let reports = self
            .domains
            .iter()
            .enumerate()
            .map(|(d, dom)| {
                let m = self.guest_migrations[d];
                GuestReport {
                    domain: dom.name.clone(),
                    scheduler: "linux".into(),
                    domains: self.guest_domains.clone(),
                    migrations: m.iter().sum(),
                    wake_migrations: m[0],
                    newidle_migrations: m[1],
                    balance_migrations: m[2],
                    context_switches: self
                        .vcpus
                        .iter()
                        .filter(|v| v.domain == d)
                        .map(|v| v.guest.switches)
                        .sum(),
                }
            })
            .collect();
        Some(reports)
    }
}

impl GuestOps for Engine {
    fn nr_running(&self, v: VcpuId) -> u32 {
        self.vcpus[v].guest.nr_running()
    }

    fn on_core(&self, v: VcpuId) -> bool {
        matches!(self.vcpus[v].hv, HvState::Running(_))
    }

    fn migrate(&mut self, src: VcpuId, dst: VcpuId, hot: bool, why: Why) -> bool {
        // detach_tasks walks the source's tasks from the least recently
        // queued; a task that ran within the migration cost is cache-hot.
        let now = self.now;
        let cost = self.costs.migration_cost;
        let q = &self.vcpus[src].guest.queue;
        let pick = q
            .iter()
            .position(|&t| hot || now.saturating_sub(self.tasks[t].since).as_ns() >= cost);
        let Some(i) = pick else {
            return false;
        };
        let t = self.vcpus[src]
            .guest
            .queue
            .remove(i)
            .expect("a queued task");
        self.moved(t, dst, why);
        let current = self.vcpus[dst].guest.enqueue(t);
        self.guest_moved.push((t, dst, current));
        true
    }
}
