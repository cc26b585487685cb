//! The lab's time slicer (`python/vhpc/host/timeslice.py`) as a hypervisor
//! scheduler: one domain at a time holds every core (the freezer stops and
//! resumes whole groups, so this is gang scheduling), for a slice, in turn or
//! by weight.
//!
//! The lab's controller is a loop that wakes every `poll` and looks at the
//! running domain: when its slice has expired, or (work-conserving) when none
//! of its tasks wants a CPU, it freezes that domain and thaws the next one.
//! So decisions happen only at poll instants, the next domain is chosen
//! without looking at whether it has work (an idle domain is left again at
//! the next poll), and a switch leaves every core idle for `switch` (the
//! freezer writes and the thaw). Inside the running domain its vCPUs run on
//! the cores their affinity allows; two of them on one core take turns every
//! `inner_slice`, as Linux would run two tasks of the thawed group.
//!
//! With `watchers`, the native slicer (crates/vhpc-slicer): a watcher thread
//! per CPU runs only while its CPU idles and reads the domain's tasks in
//! /proc, which takes `look` of that idle time. A look a waking task
//! interrupts starts over when the task sleeps again: the scan that sees a
//! task runnable ends busy, and the next one reads every task again (in the
//! lab a message under time slicing took 3-5 looks, docs/validation.md). An
//! idle domain is left when a look ends with the domain still idle, at the
//! cost `idle_switch` (freezing tasks that are asleep is cheaper than
//! stopping running ones, `switch`); the slice's end
//! is met on time, not at a poll; and a domain none of whose vCPUs ran since
//! its thaw (every domain asleep) is kept for an idle round first, doubling
//! from `idle_round` to `idle_round_max` while that goes on. The poll stays
//! as the driver's fallback.

use std::collections::VecDeque;

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// The slicer's own settings (scenario: `[hypervisor.slicer]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlicerParams {
    /// How often the controller looks at the running domain.
    pub poll: SimTime,
    /// Cores idle while one domain is frozen and the next thawed.
    pub switch: SimTime,
    /// Leave a domain early when none of its vCPUs wants a CPU.
    pub work_conserving: bool,
    /// Slices in proportion to domain weights (stride), not in turn.
    pub by_weight: bool,
    /// Turns between vCPUs of the running domain that share a core.
    pub inner_slice: SimTime,
    /// One controller per core over per-vCPU groups (`slicer_vcpu`), not gang.
    pub per_vcpu: bool,
    /// The native slicer's watchers notice idleness (see the module docs).
    pub watchers: bool,
    /// Idle CPU time a watcher's look takes.
    pub look: SimTime,
    /// Cores idle while an idle domain is frozen and the next thawed.
    pub idle_switch: SimTime,
    /// How long a domain that has not run since its thaw is kept, at first
    /// and at most (the native slicer's IDLE_ROUND_MIN_NS and _MAX_NS).
    pub idle_round: SimTime,
    pub idle_round_max: SimTime,
}

impl Default for SlicerParams {
    /// The lab's defaults: a 0.2 ms poll, work-conserving, in turn.
    fn default() -> Self {
        SlicerParams {
            poll: SimTime::from_us(200),
            switch: SimTime::from_us(100),
            work_conserving: true,
            by_weight: false,
            inner_slice: SimTime::from_ms(4),
            per_vcpu: false,
            watchers: false,
            look: SimTime::from_us(15),
            idle_switch: SimTime::from_us(100),
            idle_round: SimTime::from_us(25),
            idle_round_max: SimTime::from_us(500),
        }
    }
}

#[derive(Debug)]
pub struct Slicer {
    p: SlicerParams,
    slice: SimTime,
    domain_of: Vec<usize>,
    affinity: Vec<Vec<CoreId>>,
    /// Where each vCPU ran last: a core takes back its own vCPU first, as
    /// Linux keeps a task on its core (warm cache) when it can.
    last: Vec<Option<CoreId>>,
    /// Per domain: its weight, runnable vCPUs (FIFO), slices granted.
    weight: Vec<u32>,
    runnable: Vec<VecDeque<VcpuId>>,
    granted: Vec<u64>,
    /// The thawed domain (None before the first vCPU wakes).
    active: Option<usize>,
    /// When the thawed domain's slice started (after its switch).
    slice_start: SimTime,
    /// Until when every core is idle because of a switch.
    switching_until: SimTime,
    next_poll: SimTime,
    /// How much shorter the first slice is (a per-vCPU core's phase).
    head_start: SimTime,
    /// Per domain: its vCPUs on a core now.
    on_core: Vec<u32>,
    /// Watchers: since when the thawed domain has been idle (a look under
    /// way began then), whether a vCPU of it ran since the thaw, and the
    /// idle round of this slice.
    idle_since: Option<SimTime>,
    /// A look that found the domain idle before any vCPU of it ran, inside
    /// the idle round, parks its watcher until the round ends.
    parked_until: SimTime,
    ran: bool,
    round: SimTime,
    /// Domain switches, and those taken early because the domain was idle.
    pub switches: u64,
    pub early_switches: u64,
}

impl Slicer {
    pub fn new(p: &SchedulerParams) -> Self {
        Slicer {
            p: p.slicer,
            slice: p.tslice,
            domain_of: Vec::new(),
            affinity: Vec::new(),
            last: Vec::new(),
            weight: Vec::new(),
            runnable: Vec::new(),
            granted: Vec::new(),
            active: None,
            slice_start: SimTime::ZERO,
            switching_until: SimTime::ZERO,
            next_poll: p.slicer.poll,
            head_start: SimTime::ZERO,
            on_core: Vec::new(),
            idle_since: None,
            parked_until: SimTime::ZERO,
            ran: false,
            round: p.slicer.idle_round,
            switches: 0,
            early_switches: 0,
        }
    }

    /// The first slice ends `phase` early: controllers of different cores
    /// then switch at different instants, as Credit's per-core slices do.
    pub fn with_phase(mut self, phase: SimTime) -> Self {
        self.head_start = phase;
        self
    }

    pub fn poll(&self) -> SimTime {
        self.p.poll
    }

    /// Who gets the next slice: the following domain, or (by weight) the one
    /// furthest behind its weighted share, ties to the lower index.
    fn next_domain(&self, current: usize) -> usize {
        let n = self.weight.len();
        if !self.p.by_weight {
            return (current + 1) % n;
        }
        // (granted_i + 1) / w_i < (granted_j + 1) / w_j, in integers.
        (0..n)
            .min_by(|&i, &j| {
                let a = (self.granted[i] + 1) as u128 * self.weight[j] as u128;
                let b = (self.granted[j] + 1) as u128 * self.weight[i] as u128;
                a.cmp(&b).then(i.cmp(&j))
            })
            .expect("at least one domain")
    }

    /// No vCPU of domain `d` runs or waits to run.
    fn domain_idle(&self, d: usize) -> bool {
        self.runnable[d].is_empty() && self.on_core[d] == 0
    }

    fn thaw(&mut self, now: SimTime, d: usize, cost: SimTime) {
        self.active = Some(d);
        self.granted[d] += 1;
        self.switching_until = now + cost;
        self.slice_start = self.switching_until;
        self.parked_until = SimTime::ZERO;
        self.ran = false;
        self.idle_since = self.domain_idle(d).then_some(self.switching_until);
    }

    /// When a watcher will have found the thawed domain idle, if it stays so.
    fn watcher_due(&self) -> SimTime {
        let Some(since) = self.idle_since.filter(|_| self.p.watchers) else {
            return SimTime::MAX;
        };
        since.max(self.parked_until) + self.p.look
    }

    /// A look ended with the domain idle: whether it parks its watcher for the
    /// rest of the idle round instead of switching (no vCPU ran since the thaw).
    fn park(&mut self, now: SimTime) -> bool {
        let round_end = self.slice_start + self.round;
        if self.ran || now >= round_end {
            return false;
        }
        self.parked_until = round_end;
        true
    }
}

impl Scheduler for Slicer {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.domain_of.len());
        let d = spec.domain;
        while self.weight.len() <= d {
            self.weight.push(spec.weight.max(1));
            self.runnable.push(VecDeque::new());
            self.granted.push(0);
            self.on_core.push(0);
        }
        self.domain_of.push(d);
        self.affinity.push(spec.affinity.clone());
        self.last.push(None);
    }

    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let d = self.domain_of[v];
        self.runnable[d].push_back(v);
        if self.active == Some(d) {
            // A look under way ends busy; the next starts when it idles again.
            self.idle_since = None;
        }
        let active = match self.active {
            Some(a) => a,
            None => {
                // The controller starts by thawing the first domain in its order.
                let first = self.next_domain(self.weight.len() - 1);
                self.thaw(now, first, SimTime::ZERO);
                first
            }
        };
        if active == d && now >= self.switching_until {
            // An idle core takes it; else a core of the domain's own re-decides,
            // so that they take turns (a lone runner was picked without end).
            let aff = &self.affinity[v];
            let idle = aff.iter().find(|&&c| running[c].is_none());
            let own = aff
                .iter()
                .find(|&&c| running[c].is_some_and(|w| self.domain_of[w] == d));
            if let Some(&c) = idle.or(own) {
                tickle.push(c);
            }
        }
    }

    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, _ran: SimTime, why: Leave) {
        let d = self.domain_of[v];
        self.last[v] = Some(core);
        self.on_core[d] -= 1;
        if why != Leave::Blocked {
            self.runnable[d].push_back(v);
        } else if self.active == Some(d) && self.domain_idle(d) {
            self.idle_since = Some(now.max(self.switching_until));
        }
    }

    fn pick(&mut self, now: SimTime, core: CoreId, running: &[Option<VcpuId>]) -> Pick {
        let idle = |until: SimTime| Pick {
            vcpu: None,
            slice: until.saturating_sub(now).max(SimTime::from_ns(1)),
        };
        if now < self.switching_until {
            return idle(self.switching_until);
        }
        let Some(d) = self.active else {
            return idle(SimTime::MAX);
        };
        let queue = &mut self.runnable[d];
        let allowed = |v: VcpuId| self.affinity[v].contains(&core);
        // In FIFO order, a vCPU that last ran here, or whose last core is busy, or
        // that never ran; a vCPU whose own core is free is left to that core
        // unless nothing else fits (Linux keeps a task on its warm core).
        let here = || {
            queue.iter().position(|&v| {
                allowed(v) && self.last[v].map_or(true, |c| c == core || running[c].is_some())
            })
        };
        let any = || queue.iter().position(|&v| allowed(v));
        let Some(i) = here().or_else(any) else {
            return Pick {
                vcpu: None,
                slice: SimTime::MAX,
            };
        };
        let v = queue.remove(i).expect("position found it");
        // Another vCPU of the domain waiting for this core: take turns.
        let shared = queue.iter().any(|&w| self.affinity[w].contains(&core));
        self.on_core[d] += 1;
        self.ran = true;
        Pick {
            vcpu: Some(v),
            slice: if shared {
                self.p.inner_slice
            } else {
                SimTime::MAX
            },
        }
    }

    fn next_timer(&self) -> SimTime {
        if self.active.is_none() || self.weight.len() < 2 {
            return SimTime::MAX;
        }
        if !self.p.watchers {
            return self.next_poll;
        }
        let slice_end = (self.slice_start + self.slice).saturating_sub(self.head_start);
        self.next_poll
            .min(slice_end.max(self.switching_until))
            .min(self.watcher_due())
    }

    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        _ran_so_far: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        let polled = now >= self.next_poll;
        if polled {
            self.next_poll = now + self.p.poll;
        }
        let Some(current) = self.active else { return };
        if now < self.switching_until {
            return;
        }
        let expired = now - self.slice_start + self.head_start >= self.slice;
        let idle = self.p.work_conserving && self.domain_idle(current);
        let watched = idle && self.p.watchers && self.watcher_due() <= now;
        if watched && !expired && !polled && self.park(now) {
            return;
        }
        let early = !expired && (watched || (idle && polled));
        if !(expired || early) {
            return;
        }
        if watched {
            self.round = if self.ran {
                self.p.idle_round
            } else {
                (self.round + self.round).min(self.p.idle_round_max)
            };
        }
        self.head_start = SimTime::ZERO;
        let next = self.next_domain(current);
        if next == current {
            // A new slice of the same domain: looks start over.
            self.granted[current] += 1;
            self.slice_start = now;
            self.idle_since = self.idle_since.map(|_| now);
            return;
        }
        self.switches += 1;
        self.early_switches += early as u64;
        let cost = if self.domain_idle(current) {
            self.p.idle_switch
        } else {
            self.p.switch
        };
        self.thaw(now, next, cost);
        // Every core re-decides: the frozen domain's vCPUs leave, and the
        // cores idle through the switch before the next domain runs.
        tickle.extend(0..running.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::test_spec;

    fn spec(domain: usize, weight: u32, affinity: Vec<CoreId>) -> VcpuSpec {
        test_spec(domain, weight, 0, affinity)
    }

    fn slicer(cores: usize, by_weight: bool) -> Slicer {
        let mut p = SchedulerParams::xen_defaults(cores);
        p.slicer.by_weight = by_weight;
        Slicer::new(&p)
    }

    #[test]
    fn only_the_thawed_domain_runs_and_a_switch_idles_every_core() {
        let mut s = slicer(2, false);
        s.add_vcpu(0, &spec(0, 256, vec![0, 1]));
        s.add_vcpu(1, &spec(0, 256, vec![0, 1]));
        s.add_vcpu(2, &spec(1, 256, vec![0, 1]));
        let mut tickle = Vec::new();
        let none = [None, None];
        for v in 0..3 {
            s.wake(SimTime::ZERO, v, &none, &mut tickle);
        }
        assert_eq!(s.pick(SimTime::ZERO, 0, &none).vcpu, Some(0));
        assert_eq!(s.pick(SimTime::ZERO, 1, &none).vcpu, Some(1));
        let running = [Some(0), Some(1)];
        // Nothing of domain 1 runs before the slice ends, even on an idle core.
        assert_eq!(s.pick(SimTime::from_ms(1), 1, &[Some(0), None]).vcpu, None);
        let mut t = SimTime::ZERO;
        while s.active == Some(0) {
            t = s.next_timer();
            s.timer(t, &running, &[t, t], &mut tickle);
        }
        assert!(t >= SimTime::from_ms(30) && t < SimTime::from_ms(30) + s.p.poll);
        assert_eq!(tickle[tickle.len() - 2..], [0, 1]);
        s.deschedule(t, 0, 0, t, Leave::Preempted);
        s.deschedule(t, 1, 1, t, Leave::Preempted);
        let during = s.pick(t, 0, &none);
        assert_eq!(during.vcpu, None);
        assert_eq!(during.slice, s.p.switch);
        assert_eq!(s.pick(t + s.p.switch, 0, &none).vcpu, Some(2));
        assert_eq!(s.switches, 1);
        assert_eq!(s.early_switches, 0);
    }

    #[test]
    fn a_vcpu_waking_behind_a_lone_runner_of_its_domain_gets_turns() {
        let mut s = slicer(1, false);
        s.add_vcpu(0, &spec(0, 256, vec![0]));
        s.add_vcpu(1, &spec(0, 256, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        let alone = s.pick(SimTime::ZERO, 0, &[None]);
        assert_eq!((alone.vcpu, alone.slice), (Some(0), SimTime::MAX));
        tickle.clear();
        s.wake(SimTime::from_us(1), 1, &[Some(0)], &mut tickle);
        assert_eq!(tickle, vec![0], "the runner's core re-decides");
        s.deschedule(
            SimTime::from_us(1),
            0,
            0,
            SimTime::from_us(1),
            Leave::Preempted,
        );
        // FIFO: the woken vCPU runs for a turn, then the first one again.
        let p = s.pick(SimTime::from_us(1), 0, &[None]);
        assert_eq!((p.vcpu, p.slice), (Some(1), s.p.inner_slice));
        let end = SimTime::from_us(1) + p.slice;
        s.deschedule(end, 0, 1, p.slice, Leave::Preempted);
        assert_eq!(s.pick(end, 0, &[None]).vcpu, Some(0));
    }

    #[test]
    fn an_idle_domain_is_left_at_the_next_poll() {
        let mut s = slicer(1, false);
        s.add_vcpu(0, &spec(0, 256, vec![0]));
        s.add_vcpu(1, &spec(1, 256, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        s.wake(SimTime::ZERO, 1, &[None], &mut tickle);
        assert_eq!(s.pick(SimTime::ZERO, 0, &[None]).vcpu, Some(0));
        s.deschedule(
            SimTime::from_us(50),
            0,
            0,
            SimTime::from_us(50),
            Leave::Blocked,
        );
        let t = s.next_timer();
        assert_eq!(t, s.p.poll);
        s.timer(t, &[None], &[SimTime::ZERO], &mut tickle);
        assert_eq!(s.active, Some(1));
        assert_eq!((s.switches, s.early_switches), (1, 1));
    }

    /// Two one-vCPU domains on one core under the native slicer's watchers:
    /// look 10 µs, idle switch 4 µs, forced switch 40 µs, 1 ms fallback poll;
    /// domain 0 runs, domain 1's vCPU is runnable if `second_runnable`.
    fn watched_with(second_runnable: bool) -> Slicer {
        let mut p = SchedulerParams::xen_defaults(1);
        p.slicer.watchers = true;
        p.slicer.look = SimTime::from_us(10);
        p.slicer.idle_switch = SimTime::from_us(4);
        p.slicer.switch = SimTime::from_us(40);
        p.slicer.poll = SimTime::from_ms(1);
        let mut s = Slicer::new(&p);
        s.add_vcpu(0, &spec(0, 256, vec![0]));
        s.add_vcpu(1, &spec(1, 256, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        if second_runnable {
            s.wake(SimTime::ZERO, 1, &[None], &mut tickle);
        }
        assert_eq!(s.pick(SimTime::ZERO, 0, &[None]).vcpu, Some(0));
        s
    }

    fn watched() -> Slicer {
        watched_with(true)
    }

    fn us(n: u64) -> SimTime {
        SimTime::from_us(n)
    }

    #[test]
    fn a_watcher_leaves_a_blocked_domain_one_look_later_at_the_idle_cost() {
        let mut s = watched();
        s.deschedule(us(50), 0, 0, us(50), Leave::Blocked);
        assert_eq!(s.next_timer(), us(60));
        s.timer(us(60), &[None], &[us(50)], &mut Vec::new());
        assert_eq!(s.active, Some(1));
        assert_eq!(
            s.pick(us(60), 0, &[None]).slice,
            us(4),
            "idle through the idle switch"
        );
        assert_eq!(s.pick(us(64), 0, &[None]).vcpu, Some(1));
        assert_eq!((s.switches, s.early_switches), (1, 1));
    }

    #[test]
    fn a_look_a_waking_task_interrupts_starts_over_when_it_idles() {
        let mut s = watched();
        s.deschedule(us(50), 0, 0, us(50), Leave::Blocked);
        // Awake again after 6 µs of a 10 µs look: the next look is a whole one.
        s.wake(us(56), 0, &[None], &mut Vec::new());
        assert_eq!(s.next_timer(), s.p.poll, "no look under way");
        assert_eq!(s.pick(us(56), 0, &[None]).vcpu, Some(0));
        s.deschedule(us(70), 0, 0, us(14), Leave::Blocked);
        assert_eq!(s.next_timer(), us(80));
    }

    #[test]
    fn a_domain_that_never_ran_since_its_thaw_is_kept_for_an_idle_round() {
        let mut s = watched_with(false);
        s.deschedule(us(50), 0, 0, us(50), Leave::Blocked);
        s.timer(us(60), &[None], &[us(50)], &mut Vec::new());
        assert_eq!(s.active, Some(1), "thawed although asleep");
        // The look ends at 74 µs, inside the 25 µs round from 64 µs: the
        // watcher waits for the round, then looks again.
        assert_eq!(s.next_timer(), us(74));
        s.timer(us(74), &[None], &[us(0)], &mut Vec::new());
        assert_eq!(s.active, Some(1), "kept for the round");
        assert_eq!(s.next_timer(), us(64 + 25 + 10));
        // Even if it runs meanwhile: the parked watcher looks only after the round.
        s.wake(us(80), 1, &[None], &mut Vec::new());
        assert_eq!(s.pick(us(80), 0, &[None]).vcpu, Some(1));
        s.deschedule(us(82), 0, 1, us(2), Leave::Blocked);
        assert_eq!(s.next_timer(), us(64 + 25 + 10));
        s.timer(us(99), &[None], &[us(0)], &mut Vec::new());
        assert_eq!(s.active, Some(0));
        assert_eq!(s.round, us(25), "it ran: the round stays the shortest");
    }

    #[test]
    fn the_idle_round_doubles_while_no_domain_runs() {
        let mut s = watched_with(false);
        s.deschedule(us(50), 0, 0, us(50), Leave::Blocked);
        s.timer(us(60), &[None], &[us(50)], &mut Vec::new());
        s.timer(us(74), &[None], &[us(0)], &mut Vec::new());
        s.timer(us(99), &[None], &[us(0)], &mut Vec::new());
        assert_eq!((s.active, s.round), (Some(0), us(50)));
        // Domain 0 never ran since this thaw either: 50 µs, then a look.
        assert_eq!(
            s.next_timer(),
            us(103 + 10),
            "a look inside the round parks"
        );
        s.timer(us(113), &[None], &[us(0)], &mut Vec::new());
        assert_eq!(s.next_timer(), us(103 + 50 + 10));
    }

    #[test]
    fn with_watchers_a_slice_ends_on_time_at_the_forced_cost() {
        let mut s = watched();
        let end = s.slice;
        assert_eq!(s.next_timer(), end.min(s.p.poll));
        let mut t = s.next_timer();
        while t < end {
            s.timer(t, &[Some(0)], &[t], &mut Vec::new());
            t = s.next_timer();
        }
        assert_eq!(t, end);
        s.timer(t, &[Some(0)], &[t], &mut Vec::new());
        assert_eq!(s.active, Some(1));
        assert_eq!(s.switching_until, end + us(40));
        assert_eq!(s.early_switches, 0);
    }

    #[test]
    fn slices_by_weight_follow_the_weights() {
        let mut s = slicer(1, true);
        s.add_vcpu(0, &spec(0, 512, vec![0]));
        s.add_vcpu(1, &spec(1, 256, vec![0]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        s.wake(SimTime::ZERO, 1, &[None], &mut tickle);
        let mut order = vec![s.active.unwrap()];
        for _ in 0..5 {
            let current = s.active.unwrap();
            let next = s.next_domain(current);
            s.granted[next] += 1;
            s.active = Some(next);
            order.push(next);
        }
        assert_eq!(order.iter().filter(|&&d| d == 0).count(), 4);
        assert_eq!(order.iter().filter(|&&d| d == 1).count(), 2);
    }
}
