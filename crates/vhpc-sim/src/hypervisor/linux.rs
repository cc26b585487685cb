//! Linux's fair scheduler as the host scheduler: KVM's case (each vCPU is a
//! host thread) and the lab's own host (each rank is a task, each cgroup a
//! domain).
//!
//! Modelled after `kernel/sched/fair.c`: one run queue per core; two levels,
//! as with cgroups: the domain (a task group, `cpu.shares` from its weight)
//! and its vCPUs (tasks of equal nice), each level picking the smallest
//! virtual runtime, which advances by `ran × 1024 / weight` for a group and
//! by `ran` for a task. A picked task runs for the base slice (EEVDF's
//! `sched_base_slice`), rounded up to the next scheduler tick, because the
//! tick is where the kernel checks it (a busy-polling task sharing a core
//! with HZ = 250 keeps it 4 ms). A waking task is placed at most a slice
//! behind the queue's minimum (sleeper credit, so sleeping does not bank
//! unlimited credit) and preempts the current one when it is behind it by
//! more than the wake-up granularity. `sched_yield` skips the yielder at the
//! next pick if anything else can run (CFS's skip buddy; EEVDF pushes its
//! deadline, with the same first-order effect). A domain's `cap` is a CFS
//! bandwidth quota: `cap` % of one core per period, summed over its vCPUs;
//! a group that used its quota is throttled until the period ends. A waking
//! vCPU goes to its last core if idle, else to an idle core it may use, else
//! back to its last core; a core with nothing to run pulls a waiting vCPU
//! from another core (new-idle balancing). Periodic load balancing, NUMA,
//! nice levels and EEVDF's eligibility rule are not modelled.

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// Linux's settings (scenario: `[hypervisor.linux]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinuxParams {
    /// EEVDF's base slice (`/sys/kernel/debug/sched/base_slice_ns`).
    pub slice: SimTime,
    /// The scheduler tick (1 / HZ): slices end on ticks.
    pub tick: SimTime,
    /// How far behind the current task a waking one must be to preempt it.
    pub wakeup_granularity: SimTime,
    /// CFS bandwidth period (`cpu.cfs_period_us`).
    pub period: SimTime,
}

impl Default for LinuxParams {
    /// Linux 6.6+ defaults with HZ = 250 (Debian's).
    fn default() -> Self {
        LinuxParams {
            slice: SimTime::from_us(3_000),
            tick: SimTime::from_us(4_000),
            wakeup_granularity: SimTime::from_us(1_000),
            period: SimTime::from_ms(100),
        }
    }
}

/// `cpu.shares` of nice-0 tasks and of a group of Xen's default weight 256.
const NICE_0: u64 = 1024;

#[derive(Debug)]
struct Group {
    shares: u64,
    /// Quota per period (None: uncapped), and what was used of it.
    quota: Option<u64>,
    used: u64,
    throttled: bool,
    /// Virtual runtime of the group's entity on each core.
    vruntime: Vec<u64>,
}

#[derive(Debug)]
pub struct Linux {
    p: LinuxParams,
    domain_of: Vec<usize>,
    affinity: Vec<Vec<CoreId>>,
    vruntime: Vec<u64>,
    /// Run time of a running vCPU already charged by a period's end, so that
    /// its deschedule charges only the rest.
    precharged: Vec<u64>,
    /// The core whose run queue holds (or last held) each vCPU.
    core_of: Vec<CoreId>,
    groups: Vec<Group>,
    /// Runnable vCPUs waiting on each core (not the running one).
    rq: Vec<Vec<VcpuId>>,
    /// A vCPU that just yielded on this core: passed over at the next pick.
    skip: Vec<Option<VcpuId>>,
    next_period: SimTime,
}

impl Linux {
    pub fn new(p: &SchedulerParams) -> Self {
        Linux {
            p: p.linux,
            domain_of: Vec::new(),
            affinity: Vec::new(),
            vruntime: Vec::new(),
            precharged: Vec::new(),
            core_of: Vec::new(),
            groups: Vec::new(),
            rq: vec![Vec::new(); p.cores],
            skip: vec![None; p.cores],
            next_period: p.linux.period,
        }
    }

    fn capped(&self) -> bool {
        self.groups.iter().any(|g| g.quota.is_some())
    }

    /// The smallest group and task virtual runtimes on `core` (queued, or
    /// `current`, as CFS's min_vruntime counts the running entity).
    fn min_vruntimes(
        &self,
        core: CoreId,
        d: usize,
        current: Option<VcpuId>,
    ) -> (Option<u64>, Option<u64>) {
        let on_core = || self.rq[core].iter().copied().chain(current);
        let group = on_core()
            .map(|v| self.groups[self.domain_of[v]].vruntime[core])
            .min();
        let task = on_core()
            .filter(|&v| self.domain_of[v] == d)
            .map(|v| self.vruntime[v])
            .min();
        (group, task)
    }

    /// Sleeper credit: a waking entity is placed at most a slice behind.
    fn place(&mut self, v: VcpuId, core: CoreId, current: Option<VcpuId>) {
        let d = self.domain_of[v];
        let credit = self.p.slice.as_ns();
        let (group_min, task_min) = self.min_vruntimes(core, d, current);
        if let Some(m) = group_min {
            let g = &mut self.groups[d].vruntime[core];
            *g = (*g).max(m.saturating_sub(credit));
        }
        if let Some(m) = task_min {
            self.vruntime[v] = self.vruntime[v].max(m.saturating_sub(credit));
        }
    }

    /// Where a waking vCPU goes: its last core if idle, else an idle core it
    /// may use, else its last core.
    fn select_core(&self, v: VcpuId, running: &[Option<VcpuId>]) -> CoreId {
        let last = self.core_of[v];
        let idle = |c: CoreId| running[c].is_none() && self.rq[c].is_empty();
        if idle(last) {
            return last;
        }
        self.affinity[v]
            .iter()
            .copied()
            .find(|&c| idle(c))
            .unwrap_or(last)
    }

    /// The entity order of a pick: group virtual runtime, then the task's,
    /// then the vCPU id (deterministic ties).
    fn key(&self, v: VcpuId, core: CoreId) -> (u64, u64, VcpuId) {
        let d = self.domain_of[v];
        (self.groups[d].vruntime[core], self.vruntime[v], v)
    }

    fn eligible(&self, v: VcpuId) -> bool {
        !self.groups[self.domain_of[v]].throttled
    }

    /// Moves the best vCPU another core has waiting, that may run here.
    fn pull(&mut self, core: CoreId) -> bool {
        let found = (0..self.rq.len())
            .filter(|&c| c != core)
            .flat_map(|c| self.rq[c].iter().map(move |&v| (c, v)))
            .filter(|&(_, v)| self.affinity[v].contains(&core) && self.eligible(v))
            .min_by_key(|&(c, v)| (self.key(v, c), c));
        let Some((from, v)) = found else { return false };
        self.rq[from].retain(|&w| w != v);
        self.core_of[v] = core;
        self.place(v, core, None);
        self.rq[core].push(v);
        true
    }

    /// When a slice that starts `now` ends: a base slice later, on a tick.
    fn slice_end(&self, now: SimTime) -> SimTime {
        let tick = self.p.tick.as_ns().max(1);
        let end = now.as_ns() + self.p.slice.as_ns();
        SimTime::from_ns(end.div_ceil(tick) * tick)
    }

    fn charge(&mut self, v: VcpuId, core: CoreId, ran: SimTime) {
        let d = self.domain_of[v];
        let ns = ran.as_ns();
        self.vruntime[v] += ns;
        let g = &mut self.groups[d];
        g.vruntime[core] += ns * NICE_0 / g.shares;
        if let Some(q) = g.quota {
            g.used += ns;
            g.throttled = g.used >= q;
        }
    }
}

impl Scheduler for Linux {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.domain_of.len());
        let cores = self.rq.len();
        let period = self.p.period.as_ns();
        while self.groups.len() <= spec.domain {
            self.groups.push(Group {
                shares: 0,
                quota: None,
                used: 0,
                throttled: false,
                vruntime: vec![0; cores],
            });
        }
        let g = &mut self.groups[spec.domain];
        // Xen's default weight 256 is Linux's default 1024 shares.
        g.shares = u64::from(spec.weight).max(1) * NICE_0 / 256;
        if spec.cap > 0 {
            g.quota = Some(period * u64::from(spec.cap) / 100);
        }
        self.domain_of.push(spec.domain);
        self.affinity.push(spec.affinity.clone());
        self.vruntime.push(0);
        self.precharged.push(0);
        self.core_of.push(spec.initial_core);
    }

    fn wake(
        &mut self,
        _now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let core = self.select_core(v, running);
        self.core_of[v] = core;
        self.place(v, core, running[core]);
        self.rq[core].push(v);
        if !self.eligible(v) {
            return;
        }
        match running[core] {
            None => tickle.push(core),
            Some(cur) => {
                // Wake-up preemption, compared at the level where they differ;
                // a re-pick also gives a lone runner its finite slice.
                let gran = self.p.wakeup_granularity.as_ns();
                let (a, b) = (self.key(v, core), self.key(cur, core));
                let behind = if self.domain_of[v] == self.domain_of[cur] {
                    a.1 + gran < b.1
                } else {
                    a.0 + gran < b.0
                };
                let alone = !self.rq[core].iter().any(|&w| w != v);
                if behind || alone {
                    tickle.push(core);
                }
            }
        }
    }

    fn deschedule(&mut self, _now: SimTime, core: CoreId, v: VcpuId, ran: SimTime, why: Leave) {
        let rest = ran
            .as_ns()
            .saturating_sub(std::mem::take(&mut self.precharged[v]));
        self.charge(v, core, SimTime::from_ns(rest));
        self.core_of[v] = core;
        match why {
            Leave::Blocked => {}
            Leave::Preempted => self.rq[core].push(v),
            Leave::Yielded => {
                self.rq[core].push(v);
                self.skip[core] = Some(v);
            }
        }
    }

    fn pick(&mut self, now: SimTime, core: CoreId, _running: &[Option<VcpuId>]) -> Pick {
        if !self.rq[core].iter().any(|&v| self.eligible(v)) {
            self.pull(core);
        }
        let skip = self.skip[core].take();
        let best = |avoid: Option<VcpuId>| {
            self.rq[core]
                .iter()
                .copied()
                .filter(|&v| self.eligible(v) && Some(v) != avoid)
                .min_by_key(|&v| self.key(v, core))
        };
        let Some(v) = best(skip).or_else(|| best(None)) else {
            return Pick {
                vcpu: None,
                slice: SimTime::MAX,
            };
        };
        self.rq[core].retain(|&w| w != v);
        let contended = self.rq[core].iter().any(|&w| self.eligible(w));
        let mut slice = if contended {
            self.slice_end(now) - now
        } else {
            SimTime::MAX
        };
        let g = &self.groups[self.domain_of[v]];
        if let Some(q) = g.quota {
            // Run no further than the quota left (throttling, below).
            slice = slice.min(SimTime::from_ns(q.saturating_sub(g.used).max(1)));
        }
        Pick {
            vcpu: Some(v),
            slice,
        }
    }

    fn next_timer(&self) -> SimTime {
        if self.capped() {
            self.next_period
        } else {
            SimTime::MAX
        }
    }

    /// The bandwidth period ends: quotas refill, throttled groups run again.
    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        ran_so_far: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        self.next_period = now + self.p.period;
        // What the running vCPUs used belongs to the period that ends.
        for (c, v) in running.iter().enumerate() {
            if let Some(v) = *v {
                let ran = ran_so_far[c].as_ns();
                let extra = ran.saturating_sub(self.precharged[v]);
                self.charge(v, c, SimTime::from_ns(extra));
                self.precharged[v] = ran;
            }
        }
        for g in self.groups.iter_mut().filter(|g| g.quota.is_some()) {
            g.used = 0;
            g.throttled = false;
        }
        // Capped runners get a slice from the new quota, runners with refilled
        // vCPUs queued behind them share the core again, and idle cores look
        // for refilled work, here or (pulling) elsewhere.
        let waiting = self.rq.iter().any(|q| !q.is_empty());
        for (c, v) in running.iter().enumerate() {
            let refill = match v {
                Some(v) => {
                    self.groups[self.domain_of[*v]].quota.is_some() || !self.rq[c].is_empty()
                }
                None => waiting,
            };
            if refill {
                tickle.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::hypervisor::test_spec as spec;

    #[test]
    fn slices_end_on_ticks_and_alone_a_task_keeps_the_core() {
        let mut s = Linux::new(&SchedulerParams::xen_defaults(1));
        s.add_vcpu(0, &spec(0, 256, 0, vec![0]));
        s.add_vcpu(1, &spec(1, 256, 0, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        let alone = s.pick(SimTime::ZERO, 0, &[None]);
        assert_eq!((alone.vcpu, alone.slice), (Some(0), SimTime::MAX));
        s.wake(SimTime::from_us(500), 1, &[Some(0)], &mut tickle);
        assert_eq!(
            tickle,
            vec![0, 0],
            "the lone runner is re-picked for a finite slice"
        );
        s.deschedule(
            SimTime::from_us(500),
            0,
            0,
            SimTime::from_us(500),
            Leave::Preempted,
        );
        let p = s.pick(SimTime::from_us(500), 0, &[None]);
        // The woken task is placed at most a slice behind: 500 µs - 3 ms < 0,
        // so both are at 0 and 500 µs; vCPU 1 (0 µs) goes first.
        assert_eq!(p.vcpu, Some(1));
        // 0.5 ms + 3 ms = 3.5 ms, rounded up to the 4 ms tick.
        assert_eq!(p.slice, SimTime::from_us(3_500));
    }

    #[test]
    fn a_yield_hands_the_core_to_the_other_task_once() {
        let mut s = Linux::new(&SchedulerParams::xen_defaults(1));
        s.add_vcpu(0, &spec(0, 256, 0, vec![0]));
        s.add_vcpu(1, &spec(0, 256, 0, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        s.wake(SimTime::ZERO, 1, &[None], &mut tickle);
        assert_eq!(s.pick(SimTime::ZERO, 0, &[None]).vcpu, Some(0));
        s.deschedule(
            SimTime::from_ns(10),
            0,
            0,
            SimTime::from_ns(10),
            Leave::Yielded,
        );
        assert_eq!(s.pick(SimTime::from_ns(10), 0, &[None]).vcpu, Some(1));
        s.deschedule(
            SimTime::from_ns(20),
            0,
            1,
            SimTime::from_ns(10),
            Leave::Yielded,
        );
        assert_eq!(s.pick(SimTime::from_ns(20), 0, &[None]).vcpu, Some(0));
    }

    #[test]
    fn a_capped_group_is_throttled_until_the_period_ends() {
        let mut s = Linux::new(&SchedulerParams::xen_defaults(1));
        s.add_vcpu(0, &spec(0, 256, 50, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        let p = s.pick(SimTime::ZERO, 0, &[None]);
        assert_eq!(p.slice, SimTime::from_ms(50), "half of a 100 ms period");
        s.deschedule(p.slice, 0, 0, p.slice, Leave::Preempted);
        assert_eq!(s.pick(p.slice, 0, &[None]).vcpu, None, "throttled");
        assert_eq!(s.next_timer(), SimTime::from_ms(100));
        s.timer(
            SimTime::from_ms(100),
            &[None],
            &[SimTime::ZERO],
            &mut tickle,
        );
        assert_eq!(s.pick(SimTime::from_ms(100), 0, &[None]).vcpu, Some(0));
    }

    #[test]
    fn an_idle_core_pulls_a_waiting_vcpu() {
        let mut s = Linux::new(&SchedulerParams::xen_defaults(2));
        s.add_vcpu(0, &spec(0, 256, 0, vec![0, 1]));
        s.add_vcpu(1, &spec(0, 256, 0, vec![0, 1]));
        s.rq[0] = vec![0, 1];
        assert_eq!(s.pick(SimTime::ZERO, 1, &[None, None]).vcpu, Some(0));
        assert_eq!(s.core_of[0], 1);
    }
}
