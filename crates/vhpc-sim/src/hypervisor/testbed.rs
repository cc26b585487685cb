//! A bare engine for schedulers' unit tests: every awake vCPU always wants
//! the CPU; it follows the trait contract (deschedule before pick, tickles
//! honoured at once, idle cores first), runs slices and timers, and counts
//! each vCPU's CPU time.

use super::{CoreId, Leave, Scheduler, VcpuId, VcpuSpec};
use crate::time::SimTime;

pub(crate) struct Bed<S: Scheduler> {
    pub s: S,
    pub now: SimTime,
    pub running: Vec<Option<VcpuId>>,
    since: Vec<SimTime>,
    slice_end: Vec<SimTime>,
    pub cpu: Vec<SimTime>,
    /// Every (core, vCPU, start, end) run, in order of ending.
    pub runs: Vec<(CoreId, VcpuId, SimTime, SimTime)>,
}

impl<S: Scheduler> Bed<S> {
    pub fn new(mut s: S, cores: usize, specs: &[VcpuSpec]) -> Self {
        for (v, spec) in specs.iter().enumerate() {
            s.add_vcpu(v, spec);
        }
        Bed {
            s,
            now: SimTime::ZERO,
            running: vec![None; cores],
            since: vec![SimTime::ZERO; cores],
            slice_end: vec![SimTime::MAX; cores],
            cpu: vec![SimTime::ZERO; specs.len()],
            runs: Vec::new(),
        }
    }

    /// Wakes `v` and honours the tickles; returns them.
    pub fn wake(&mut self, v: VcpuId) -> Vec<CoreId> {
        let mut tickle = Vec::new();
        self.s.wake(self.now, v, &self.running, &mut tickle);
        self.honour(tickle.clone());
        tickle
    }

    /// The vCPU on `core` halts.
    pub fn block(&mut self, core: CoreId) {
        self.redecide(core, Leave::Blocked);
    }

    pub fn core_of(&self, v: VcpuId) -> Option<CoreId> {
        self.running.iter().position(|&r| r == Some(v))
    }

    fn honour(&mut self, mut tickle: Vec<CoreId>) {
        tickle.sort_unstable_by_key(|&c| (self.running[c].is_some(), c));
        tickle.dedup();
        for c in tickle {
            self.redecide(c, Leave::Preempted);
        }
    }

    pub fn redecide(&mut self, core: CoreId, why: Leave) {
        if let Some(v) = self.running[core].take() {
            let ran = self.now - self.since[core];
            self.cpu[v] += ran;
            if ran > SimTime::ZERO {
                self.runs.push((core, v, self.since[core], self.now));
            }
            self.s.deschedule(self.now, core, v, ran, why);
        }
        let p = self.s.pick(self.now, core, &self.running);
        if let Some(v) = p.vcpu {
            assert!(!self.running.contains(&Some(v)), "{v} picked twice");
        }
        self.running[core] = p.vcpu;
        self.since[core] = self.now;
        self.slice_end[core] = self.now.saturating_add(p.slice.max(SimTime::from_ns(1)));
        self.fire_timer_now();
    }

    /// A timer the scheduler asked for at (or before) now.
    fn fire_timer_now(&mut self) {
        if self.s.next_timer() <= self.now {
            self.timer();
        }
    }

    fn timer(&mut self) {
        let ran: Vec<SimTime> = self.since.iter().map(|&s| self.now - s).collect();
        let mut tickle = Vec::new();
        self.s.timer(self.now, &self.running, &ran, &mut tickle);
        self.honour(tickle);
    }

    pub fn run_until(&mut self, end: SimTime) {
        loop {
            let slice = self.slice_end.iter().copied().min().unwrap_or(SimTime::MAX);
            let t = slice.min(self.s.next_timer()).max(self.now);
            if t > end {
                break;
            }
            self.now = t;
            if self.s.next_timer() <= t {
                self.timer();
            }
            for core in 0..self.running.len() {
                if self.slice_end[core] == t {
                    self.redecide(core, Leave::Preempted);
                }
            }
        }
        self.now = end;
    }

    /// CPU time of `v` so far, including its current run.
    pub fn cpu_time(&self, v: VcpuId) -> SimTime {
        let extra = self
            .core_of(v)
            .map_or(SimTime::ZERO, |c| self.now - self.since[c]);
        self.cpu[v] + extra
    }
}
