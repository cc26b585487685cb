//! Xen's SEDF ("Simple Earliest Deadline First", `xen/common/sched_sedf.c`),
//! as shipped in Xen 3.x with its compile-time choices `UNBLOCK_EXTRA_SUPPORT`
//! and `EXTRA_BLOCK_WEIGHT`.
//!
//! Each vCPU reserves `slice` of every `period`. Per core (SEDF never
//! migrates) there are four lists, like Xen's `sedf_cpu_info`:
//!
//! * `runq`: vCPUs whose current period has begun and that have slice left,
//!   sorted by absolute deadline (end of the period): EDF.
//! * `waitq`: runnable vCPUs whose next period has not begun yet, sorted by
//!   period begin. Zero-slice vCPUs always live here.
//! * `extraq[EXTRA_PEN_Q]` (L0): vCPUs that lost slice time by blocking
//!   (`EXTRA_WANT_PEN_Q`), sorted by penalty score; served first in slack.
//! * `extraq[EXTRA_UTIL_Q]` (L1): every runnable `extratime` vCPU, sorted by a
//!   virtual-finish score (weighted round robin); served in slack time.
//!
//! As in Xen, the running vCPU stays on its lists while it runs: the decision
//! is split into `deschedule` (first half of `sedf_do_schedule`:
//! `desched_edf_dom` / `desched_extra_dom`) and `pick` (`update_queues`, then
//! EDF on `runq`, else `sedf_do_extra_schedule`). Slack time is handed out in
//! whole `extra_quantum`s (`EXTRA_QUANTUM`); when less than a quantum is left
//! before the next period begins, the core idles until then, as Xen does.
//!
//! Simplifications (all parameters Xen 3.4 uses by default):
//! * `extraweight` is 1 for every vCPU (Xen's default; [`VcpuSpec`] carries no
//!   SEDF weight), so every L1 score is `(1 << 17) / 1`.
//! * No latency scaling / burst mode (`latency` hint is 0 by default), so
//!   `period == period_orig` always.
//! * Scores are `i64`, not C `int`, so they never truncate.
//! * A penalty (L0) vCPU gets one extra quantum and leaves L0 (the `#if 0`
//!   around the "fully compensated" check in `desched_extra_dom`).
//! * Yield: Xen 3.4 has no SEDF yield hook (`do_yield` only raises
//!   `SCHEDULE_SOFTIRQ`), so a yield is a plain reschedule, same as a
//!   preemption: a real-time vCPU keeps its slice and its place by deadline;
//!   an extra-time vCPU is requeued behind its peers.
//! * Nothing runnable: idle with [`SimTime::MAX`] instead of Xen's 1 s
//!   (nothing can change until a wake, which tickles).

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// Level 0 extra queue: vCPUs compensated for time lost by blocking.
const EXTRA_PEN_Q: usize = 0;
/// Level 1 extra queue: slack-time utilisation, weighted round robin.
const EXTRA_UTIL_Q: usize = 1;
/// L1 score after an extra run: `(1 << 17) / extraweight`, extraweight 1.
const UTIL_SCORE: i64 = 1 << 17;

/// How the vCPU runs right now (Xen's `get_run_type`; idle is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunType {
    /// Real-time mode (or not running at all).
    Edf,
    /// Extra time from the penalty queue (`EXTRA_RUN_PEN`).
    ExtraPen,
    /// Extra time from the utilisation queue (`EXTRA_RUN_UTIL`).
    ExtraUtil,
}

/// Which EDF list holds the vCPU (Xen's `list` member).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    Run,
    Wait,
}

/// Xen's `sedf_vcpu_info`, reduced to what the model uses.
#[derive(Debug, Clone)]
struct VcpuInfo {
    /// The core it lives on for the whole run.
    core: CoreId,
    period: SimTime,
    slice: SimTime,
    /// `EXTRA_AWARE`: may run in slack time.
    extra_aware: bool,
    /// `SEDF_ASLEEP`: blocked.
    asleep: bool,
    run: RunType,
    /// `EXTRA_WANT_PEN_Q`: owed compensation for a short block.
    want_pen: bool,
    /// End of the current period (`deadl_abs`).
    deadl_abs: SimTime,
    /// Whether `deadl_abs` was set up (Xen tests `deadl_abs == 0`).
    deadl_set: bool,
    /// Real-time service received in the current period.
    cputime: SimTime,
    /// Whether it ever blocked (Xen tests `block_abs != 0`).
    has_blocked: bool,
    score: [i64; 2],
    list: List,
    on_extra: [bool; 2],
}

impl VcpuInfo {
    /// `PERIOD_BEGIN`. A period that began before time zero reads as zero:
    /// it is only ever compared with `now >= 0`, where that is equivalent.
    fn period_begin(&self) -> SimTime {
        self.deadl_abs.saturating_sub(self.period)
    }

    /// Penalty score `(period << 10) / lost`: less lost, later served.
    fn pen_score(&self, lost: SimTime) -> i64 {
        let score = (u128::from(self.period.as_ns()) << 10) / u128::from(lost.as_ns());
        i64::try_from(score).unwrap_or(i64::MAX)
    }
}

/// Xen's `sedf_cpu_info`.
#[derive(Debug, Default)]
struct CpuInfo {
    runq: Vec<VcpuId>,
    waitq: Vec<VcpuId>,
    extraq: [Vec<VcpuId>; 2],
    current_slice_expires: SimTime,
    /// vCPUs living on this core (sizes the lists up front).
    nr_vcpus: usize,
}

#[derive(Debug)]
pub struct Sedf {
    extra_quantum: SimTime,
    vcpus: Vec<VcpuInfo>,
    cpus: Vec<CpuInfo>,
}

impl Sedf {
    pub fn new(p: &SchedulerParams) -> Self {
        assert!(
            p.extra_quantum > SimTime::ZERO,
            "SEDF needs a non-zero extra quantum"
        );
        Sedf {
            extra_quantum: p.extra_quantum,
            vcpus: Vec::new(),
            cpus: (0..p.cores).map(|_| CpuInfo::default()).collect(),
        }
    }

    /// Inserts `v` into a list sorted by `key`, behind equal keys (Xen's
    /// `list_insert_sort`). Returns its position.
    fn insert_sorted(q: &mut Vec<VcpuId>, v: VcpuId, key: impl Fn(VcpuId) -> SimTime) -> usize {
        let k = key(v);
        let pos = q.iter().position(|&w| k < key(w)).unwrap_or(q.len());
        q.insert(pos, v);
        pos
    }

    fn remove(q: &mut Vec<VcpuId>, v: VcpuId) {
        let pos = q
            .iter()
            .position(|&w| w == v)
            .expect("vCPU not on the SEDF list");
        q.remove(pos);
    }

    /// `__add_to_runqueue_sort`: EDF order. Returns the position.
    fn add_to_runq(&mut self, v: VcpuId) -> usize {
        let vcpus = &self.vcpus;
        let q = &mut self.cpus[vcpus[v].core].runq;
        let pos = Self::insert_sorted(q, v, |w| vcpus[w].deadl_abs);
        self.vcpus[v].list = List::Run;
        pos
    }

    /// `__add_to_waitqueue_sort`: by begin of the next period.
    fn add_to_waitq(&mut self, v: VcpuId) {
        let vcpus = &self.vcpus;
        let q = &mut self.cpus[vcpus[v].core].waitq;
        Self::insert_sorted(q, v, |w| vcpus[w].period_begin());
        self.vcpus[v].list = List::Wait;
    }

    /// `__del_from_queue`.
    fn del_from_queue(&mut self, v: VcpuId) {
        let cpu = &mut self.cpus[self.vcpus[v].core];
        match self.vcpus[v].list {
            List::Run => Self::remove(&mut cpu.runq, v),
            List::Wait => Self::remove(&mut cpu.waitq, v),
            List::None => panic!("vCPU {v} is on no SEDF list"),
        }
        self.vcpus[v].list = List::None;
    }

    fn extraq_del(&mut self, v: VcpuId, i: usize) {
        Self::remove(&mut self.cpus[self.vcpus[v].core].extraq[i], v);
        self.vcpus[v].on_extra[i] = false;
    }

    fn extraq_del_if_on(&mut self, v: VcpuId, i: usize) {
        if self.vcpus[v].on_extra[i] {
            self.extraq_del(v, i);
        }
    }

    /// `extraq_add_sort_update`: every queued vCPU's score drops by `sub` (the
    /// time the requeued one was served, in score units), then `v` goes in
    /// behind all scores not above its own: weighted round robin.
    fn extraq_add_sort_update(&mut self, v: VcpuId, i: usize, sub: i64) {
        debug_assert!(!self.vcpus[v].on_extra[i]);
        let q = &mut self.cpus[self.vcpus[v].core].extraq[i];
        let s = self.vcpus[v].score[i];
        // One pass: lower each score, and note the first one above `s`
        // (counting those not above it: no branch in the loop).
        let mut pos = 0;
        let mut above = false;
        for &w in q.iter() {
            let score = &mut self.vcpus[w].score[i];
            *score -= sub;
            above |= s < *score;
            pos += usize::from(!above);
        }
        if pos == q.len() {
            q.push(v);
        } else {
            q.insert(pos, v);
        }
        self.vcpus[v].on_extra[i] = true;
    }

    /// `extraq_check_add_unblocked`.
    fn extraq_add_unblocked(&mut self, v: VcpuId) {
        if self.vcpus[v].extra_aware {
            self.extraq_add_sort_update(v, EXTRA_UTIL_Q, 0);
        }
    }

    /// `desched_edf_dom`: charge real-time service; a finished slice moves
    /// the vCPU to its next period on the waitq.
    fn desched_edf_dom(&mut self, v: VcpuId, ran: SimTime) {
        let inf = &mut self.vcpus[v];
        debug_assert_eq!(inf.list, List::Run);
        inf.cputime += ran;
        if inf.cputime < inf.slice && !inf.asleep {
            return;
        }
        self.del_from_queue(v);
        let inf = &mut self.vcpus[v];
        if inf.cputime >= inf.slice {
            // Keep the overrun: it is charged to the next period.
            inf.cputime = inf.cputime - inf.slice;
            inf.deadl_abs += inf.period;
        }
        if !inf.asleep {
            self.add_to_waitq(v);
        } else {
            self.extraq_del_if_on(v, EXTRA_PEN_Q);
            self.extraq_del_if_on(v, EXTRA_UTIL_Q);
        }
    }

    /// `desched_extra_dom`: extra time is not charged; requeue by score.
    fn desched_extra_dom(&mut self, v: VcpuId) {
        let i = match self.vcpus[v].run {
            RunType::ExtraPen => EXTRA_PEN_Q,
            RunType::ExtraUtil => EXTRA_UTIL_Q,
            RunType::Edf => unreachable!("desched_extra_dom on a real-time vCPU"),
        };
        let inf = &mut self.vcpus[v];
        inf.run = RunType::Edf;
        inf.cputime = SimTime::ZERO;
        let oldscore = inf.score[i];
        if i == EXTRA_PEN_Q {
            // One penalty quantum settles the debt (Xen's `#if 0`: otherwise
            // dom0 could starve CPU-bound domains for seconds).
            inf.want_pen = false;
        } else {
            inf.score[EXTRA_UTIL_Q] = UTIL_SCORE;
        }
        self.extraq_del(v, i);
        let inf = &self.vcpus[v];
        if !inf.asleep {
            let requeue = if i == EXTRA_UTIL_Q {
                inf.extra_aware
            } else {
                inf.want_pen
            };
            if requeue {
                self.extraq_add_sort_update(v, i, oldscore);
            }
        } else {
            self.del_from_queue(v);
            self.extraq_del_if_on(v, 1 - i);
        }
    }

    /// Moves a zero-slice vCPU off the runq to its next period that does not
    /// begin before `now`: it only ever runs in extra time.
    fn postpone_empty_slice(&mut self, v: VcpuId, now: SimTime) {
        self.del_from_queue(v);
        let inf = &mut self.vcpus[v];
        inf.deadl_abs += inf.period;
        // PERIOD_BEGIN < now: skip whole periods, keeping them aligned.
        let next_begin_floor = now + inf.period;
        if inf.deadl_abs < next_begin_floor {
            let behind = (next_begin_floor - inf.deadl_abs).as_ns();
            inf.deadl_abs += periods_ns(behind, inf.period);
        }
        self.add_to_waitq(v);
    }

    /// Gives a vCPU that missed its deadline a fresh slice in the first period
    /// whose deadline is not before `now`. Returns its runq position, if any.
    fn renew_missed(&mut self, v: VcpuId, now: SimTime) -> Option<usize> {
        self.del_from_queue(v);
        let inf = &mut self.vcpus[v];
        inf.deadl_abs += inf.period;
        if inf.deadl_abs < now {
            let behind = (now - inf.deadl_abs).as_ns();
            inf.deadl_abs += periods_ns(behind, inf.period);
        }
        inf.cputime = SimTime::ZERO;
        if inf.period_begin() > now {
            self.add_to_waitq(v);
            None
        } else {
            Some(self.add_to_runq(v))
        }
    }

    /// `update_queues`: start periods that have begun, then clean the head of
    /// the runq of zero-slice vCPUs and missed deadlines.
    fn update_queues(&mut self, now: SimTime, core: CoreId) {
        while let Some(&v) = self.cpus[core].waitq.first() {
            if self.vcpus[v].period_begin() > now {
                break;
            }
            self.del_from_queue(v);
            self.add_to_runq(v);
        }
        // Walks the runq like Xen's list_for_each_safe: `i` is the next entry.
        let mut i = 0;
        while let Some(&v) = self.cpus[core].runq.get(i) {
            let inf = &self.vcpus[v];
            if inf.slice == SimTime::ZERO {
                self.postpone_empty_slice(v, now);
            } else if inf.deadl_abs < now || inf.cputime > inf.slice {
                if let Some(pos) = self.renew_missed(v, now) {
                    if pos <= i {
                        i += 1;
                    }
                }
            } else {
                break;
            }
        }
    }

    /// `sedf_do_extra_schedule`: slack until `end_xt` goes in whole quanta,
    /// penalty queue first.
    fn do_extra_schedule(&mut self, now: SimTime, end_xt: SimTime, core: CoreId) -> Pick {
        let idle = Pick {
            vcpu: None,
            slice: end_xt - now,
        };
        if end_xt - now < self.extra_quantum {
            return idle;
        }
        let cpu = &self.cpus[core];
        let (v, run) = match (
            cpu.extraq[EXTRA_PEN_Q].first(),
            cpu.extraq[EXTRA_UTIL_Q].first(),
        ) {
            (Some(&v), _) => (v, RunType::ExtraPen),
            (None, Some(&v)) => (v, RunType::ExtraUtil),
            (None, None) => return idle,
        };
        debug_assert!(!self.vcpus[v].asleep);
        self.vcpus[v].run = run;
        Pick {
            vcpu: Some(v),
            slice: self.extra_quantum,
        }
    }

    /// `should_switch`: must `other`, just woken on `core`, make the core
    /// re-decide? EDF > penalty extra time > utilisation extra time > idle.
    fn should_switch(&self, core: CoreId, cur: Option<VcpuId>, other: VcpuId) -> bool {
        let oth = &self.vcpus[other];
        if oth.period_begin() < self.cpus[core].current_slice_expires {
            return true;
        }
        let Some(cur) = cur else { return true };
        let cur = &self.vcpus[cur];
        match cur.run {
            RunType::Edf => false,
            RunType::ExtraPen => oth.want_pen && oth.score[EXTRA_PEN_Q] < cur.score[EXTRA_PEN_Q],
            RunType::ExtraUtil => oth.want_pen,
        }
    }

    /// `unblock_short_extra_support`: woken within its period, the vCPU gets
    /// no more real time in it; what it lost by blocking is owed back in
    /// priority extra time (L0 queue).
    fn unblock_short(&mut self, v: VcpuId) {
        let inf = &mut self.vcpus[v];
        inf.deadl_abs += inf.period;
        if inf.has_blocked {
            let lost = inf.slice.saturating_sub(inf.cputime);
            if lost > SimTime::ZERO {
                inf.score[EXTRA_PEN_Q] = inf.pen_score(lost);
                if inf.on_extra[EXTRA_PEN_Q] {
                    self.extraq_del(v, EXTRA_PEN_Q);
                } else {
                    self.vcpus[v].want_pen = true;
                }
                self.extraq_add_sort_update(v, EXTRA_PEN_Q, 0);
            }
        }
        self.vcpus[v].cputime = SimTime::ZERO;
    }
}

/// `DIV_UP(behind, period) * period` in nanoseconds.
fn periods_ns(behind: u64, period: SimTime) -> SimTime {
    let p = period.as_ns();
    SimTime::from_ns(behind.div_ceil(p) * p)
}

impl Scheduler for Sedf {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.vcpus.len());
        let p = spec.sedf;
        assert!(p.period > SimTime::ZERO, "SEDF period of vCPU {v} is zero");
        assert!(
            p.slice <= p.period,
            "SEDF slice of vCPU {v} exceeds its period"
        );
        assert!(
            spec.initial_core < self.cpus.len(),
            "vCPU {v} starts on a missing core"
        );
        debug_assert!(spec.affinity.contains(&spec.initial_core));
        self.vcpus.push(VcpuInfo {
            core: spec.initial_core,
            period: p.period,
            slice: p.slice,
            extra_aware: p.extratime,
            asleep: true,
            run: RunType::Edf,
            want_pen: false,
            deadl_abs: SimTime::ZERO,
            deadl_set: false,
            cputime: SimTime::ZERO,
            has_blocked: false,
            score: [0; 2],
            list: List::None,
            on_extra: [false; 2],
        });
        // Room for every vCPU of the core, so the lists never reallocate.
        let cpu = &mut self.cpus[spec.initial_core];
        cpu.nr_vcpus += 1;
        let n = cpu.nr_vcpus;
        let [pen, util] = &mut cpu.extraq;
        for q in [&mut cpu.runq, &mut cpu.waitq, pen, util] {
            q.reserve(n - q.len());
        }
    }

    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let inf = &mut self.vcpus[v];
        debug_assert!(
            inf.asleep && inf.list == List::None,
            "woke a runnable vCPU {v}"
        );
        inf.asleep = false;
        if !inf.deadl_set {
            inf.deadl_abs = now + inf.slice;
            inf.deadl_set = true;
        }
        if now < inf.period_begin() {
            // Woken in extra time, before its next period.
            if inf.want_pen {
                self.extraq_add_sort_update(v, EXTRA_PEN_Q, 0);
            }
        } else if now < inf.deadl_abs {
            self.unblock_short(v);
        } else {
            // Long block: the wake starts a new period (Conservative 2b).
            inf.deadl_abs = now + inf.period;
            inf.cputime = SimTime::ZERO;
        }
        self.extraq_add_unblocked(v);
        if self.vcpus[v].period_begin() > now {
            self.add_to_waitq(v);
        } else {
            self.add_to_runq(v);
        }
        let core = self.vcpus[v].core;
        if self.should_switch(core, running[core], v) {
            tickle.push(core);
        }
    }

    fn deschedule(&mut self, _now: SimTime, core: CoreId, v: VcpuId, ran: SimTime, why: Leave) {
        debug_assert_eq!(core, self.vcpus[v].core, "SEDF vCPU {v} migrated");
        if why == Leave::Blocked {
            self.vcpus[v].asleep = true;
            self.vcpus[v].has_blocked = true;
        }
        // Yielded and Preempted are the same reschedule in Xen 3.4.
        if self.vcpus[v].run == RunType::Edf {
            self.desched_edf_dom(v, ran);
        } else {
            self.desched_extra_dom(v);
        }
    }

    fn pick(&mut self, now: SimTime, core: CoreId, _running: &[Option<VcpuId>]) -> Pick {
        self.update_queues(now, core);
        let cpu = &self.cpus[core];
        let next_begin = cpu.waitq.first().map(|&w| self.vcpus[w].period_begin());
        let pick = match (cpu.runq.first(), next_begin) {
            (Some(&v), next) => {
                // EDF: run until the slice is used up or the next period begins.
                let inf = &self.vcpus[v];
                let left = inf.slice - inf.cputime;
                let slice = next.map_or(left, |b| left.min(b - now));
                Pick {
                    vcpu: Some(v),
                    slice,
                }
            }
            (None, Some(end_xt)) => self.do_extra_schedule(now, end_xt, core),
            (None, None) => Pick {
                vcpu: None,
                slice: SimTime::MAX,
            },
        };
        // Xen's "seriously BEHIND schedule" fallback; never a zero slice.
        let pick = if pick.slice == SimTime::ZERO {
            Pick {
                slice: self.extra_quantum,
                ..pick
            }
        } else {
            pick
        };
        self.cpus[core].current_slice_expires = now.saturating_add(pick.slice);
        pick
    }

    fn next_timer(&self) -> SimTime {
        SimTime::MAX
    }

    fn timer(&mut self, _: SimTime, _: &[Option<VcpuId>], _: &[SimTime], _: &mut Vec<CoreId>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::SedfParams;

    const Q: SimTime = SimTime::from_us(500);

    fn ms(x: u64) -> SimTime {
        SimTime::from_ms(x)
    }

    /// A vCPU on `core` (allowed on every core of a two-core host).
    fn spec(core: CoreId, period: SimTime, slice: SimTime, extratime: bool) -> VcpuSpec {
        VcpuSpec {
            domain: 0,
            weight: 256,
            cap: 0,
            affinity: vec![0, 1],
            initial_core: core,
            sedf: SedfParams {
                period,
                slice,
                extratime,
            },
        }
    }

    /// dom0's default reservation: 15 ms every 20 ms, with extra time.
    fn dom0(core: CoreId) -> VcpuSpec {
        spec(core, ms(20), ms(15), true)
    }

    /// A domU's default: extra time only.
    fn domu(core: CoreId) -> VcpuSpec {
        spec(core, ms(100), SimTime::ZERO, true)
    }

    /// Plays the engine: always-busy vCPUs that only block or yield when told.
    struct Harness {
        sched: Sedf,
        now: SimTime,
        running: Vec<Option<VcpuId>>,
        since: Vec<SimTime>,
        until: Vec<SimTime>,
        /// CPU time each vCPU got (descheduled runs only).
        got: Vec<SimTime>,
        /// Every finished run: (vCPU, core, how long, ran in extra time).
        runs: Vec<(VcpuId, CoreId, SimTime, bool)>,
        /// Every decision: (core, what it picked).
        picks: Vec<(CoreId, Option<VcpuId>)>,
        tickled: Vec<CoreId>,
    }

    impl Harness {
        fn new(cores: usize, specs: &[VcpuSpec]) -> Self {
            let mut sched = Sedf::new(&SchedulerParams::xen_defaults(cores));
            for (v, s) in specs.iter().enumerate() {
                sched.add_vcpu(v, s);
            }
            Harness {
                sched,
                now: SimTime::ZERO,
                running: vec![None; cores],
                since: vec![SimTime::ZERO; cores],
                until: vec![SimTime::MAX; cores],
                got: vec![SimTime::ZERO; specs.len()],
                runs: Vec::new(),
                picks: Vec::new(),
                tickled: Vec::new(),
            }
        }

        fn wake(&mut self, v: VcpuId) {
            let mut tickle = Vec::new();
            self.sched.wake(self.now, v, &self.running, &mut tickle);
            self.tickled.extend_from_slice(&tickle);
            for core in tickle {
                self.redecide(core, Leave::Preempted);
            }
        }

        fn redecide(&mut self, core: CoreId, why: Leave) {
            if let Some(v) = self.running[core].take() {
                let ran = self.now - self.since[core];
                let extra = self.sched.vcpus[v].run != RunType::Edf;
                self.sched.deschedule(self.now, core, v, ran, why);
                self.got[v] += ran;
                self.runs.push((v, core, ran, extra));
            }
            let p = self.sched.pick(self.now, core, &self.running);
            assert!(p.slice > SimTime::ZERO);
            self.picks.push((core, p.vcpu));
            self.running[core] = p.vcpu;
            self.since[core] = self.now;
            self.until[core] = self.now.saturating_add(p.slice);
        }

        /// Advances to the next slice end, if it comes no later than `end`.
        fn step(&mut self, end: SimTime) -> bool {
            let (core, &at) = self
                .until
                .iter()
                .enumerate()
                .min_by_key(|&(_, t)| *t)
                .unwrap();
            if at > end {
                self.now = end;
                return false;
            }
            self.now = at;
            self.redecide(core, Leave::Preempted);
            true
        }

        fn run_until(&mut self, end: SimTime) {
            while self.step(end) {}
        }

        /// Runs until `v` is on a core and returns that core.
        fn run_until_running(&mut self, v: VcpuId, limit: SimTime) -> CoreId {
            loop {
                if let Some(core) = self.running.iter().position(|&r| r == Some(v)) {
                    return core;
                }
                assert!(self.step(limit), "vCPU {v} never ran");
            }
        }

        fn first_run(&mut self) {
            for core in 0..self.running.len() {
                self.redecide(core, Leave::Preempted);
            }
        }
    }

    #[test]
    fn reservation_wins_over_extra_time() {
        let mut h = Harness::new(1, &[dom0(0), domu(0)]);
        h.wake(0);
        h.wake(1);
        h.run_until(SimTime::from_s(2));
        h.redecide(0, Leave::Preempted);
        assert!(h.got[0] >= ms(1500), "reserved vCPU got {}", h.got[0]);
        assert!(h.got[1] > SimTime::ZERO, "extra-only vCPU starved");
        assert_eq!(h.got[0] + h.got[1], SimTime::from_s(2), "slack was wasted");
        for &(v, _, ran, extra) in &h.runs {
            if v == 1 {
                assert!(
                    extra && ran <= Q,
                    "extra-only vCPU ran {ran} (extra: {extra})"
                );
            }
        }
        // The reservation is served in real time, not only in slack.
        let rt: SimTime = h
            .runs
            .iter()
            .filter(|r| r.0 == 0 && !r.3)
            .fold(SimTime::ZERO, |a, r| a + r.2);
        assert!(rt >= ms(1485), "real-time service {rt}");
    }

    #[test]
    fn extra_only_vcpus_alternate_in_quanta() {
        let mut h = Harness::new(1, &[domu(0), domu(0)]);
        h.wake(0);
        h.wake(1);
        h.run_until(SimTime::from_s(1));
        h.redecide(0, Leave::Preempted);
        let ran: Vec<_> = h.runs.iter().filter(|r| r.2 > SimTime::ZERO).collect();
        assert!(ran.len() >= 1999);
        for pair in ran.windows(2) {
            assert_ne!(pair[0].0, pair[1].0, "no alternation at {pair:?}");
        }
        assert!(ran.iter().all(|r| r.2 == Q && r.3));
        let diff = h.got[0].max(h.got[1]) - h.got[0].min(h.got[1]);
        assert!(diff <= Q, "unfair by {diff}");
    }

    #[test]
    fn never_migrates() {
        let mut h = Harness::new(2, &[dom0(0), domu(0), domu(0)]);
        for v in 0..3 {
            h.wake(v);
        }
        assert!(h.tickled.iter().all(|&c| c == 0));
        assert_eq!(
            h.sched.pick(h.now, 1, &h.running),
            Pick {
                vcpu: None,
                slice: SimTime::MAX
            }
        );
        h.first_run();
        h.run_until(SimTime::from_s(1));
        assert!(h.picks.iter().all(|&(core, v)| core == 0 || v.is_none()));
        assert!(h.picks.iter().filter(|p| p.0 == 0).all(|p| p.1.is_some()));
    }

    #[test]
    fn long_unblock_starts_a_period_and_preempts_extra_time() {
        let mut h = Harness::new(1, &[dom0(0), domu(0)]);
        h.wake(0);
        h.wake(1);
        h.run_until(ms(16));
        assert_eq!(h.running[0], Some(0), "the reservation runs from 15 ms on");
        h.redecide(0, Leave::Blocked);
        h.run_until(ms(50));
        assert_eq!(h.running[0], Some(1));
        h.tickled.clear();
        h.wake(0);
        assert_eq!(h.tickled, vec![0]);
        assert_eq!(h.running[0], Some(0));
        assert_eq!(h.sched.vcpus[0].run, RunType::Edf);
        assert_eq!(h.until[0] - h.now, ms(15), "a fresh slice");
    }

    #[test]
    fn short_unblock_is_owed_a_penalty_quantum() {
        let mut h = Harness::new(1, &[dom0(0), domu(0)]);
        h.wake(0);
        h.wake(1);
        h.run_until(ms(16));
        h.redecide(0, Leave::Blocked);
        h.run_until(ms(50));
        h.wake(0);
        // Real time 50..55 ms of the period 50..70 ms, then block.
        h.run_until(ms(55));
        h.redecide(0, Leave::Blocked);
        h.run_until(ms(60));
        assert_eq!(h.running[0], Some(1));
        h.tickled.clear();
        h.wake(0);
        assert_eq!(h.tickled, vec![0], "owed time beats utilisation extra time");
        assert_eq!(h.running[0], Some(0));
        assert_eq!(h.sched.vcpus[0].run, RunType::ExtraPen);
        assert_eq!(h.until[0] - h.now, Q);
        // One penalty quantum settles the debt; then plain utilisation extra time.
        h.run_until(h.now + Q);
        assert!(!h.sched.vcpus[0].want_pen);
        assert!(h.sched.cpus[0].extraq[EXTRA_PEN_Q].is_empty());
        assert_eq!(h.sched.vcpus[0].run, RunType::ExtraUtil);
    }

    #[test]
    fn blocked_vcpus_are_never_picked() {
        let mut h = Harness::new(1, &[dom0(0), domu(0), domu(0)]);
        for v in 0..3 {
            h.wake(v);
        }
        let core = h.run_until_running(1, ms(100));
        h.redecide(core, Leave::Blocked);
        let core = h.run_until_running(0, ms(100));
        h.redecide(core, Leave::Blocked);
        let from = h.picks.len();
        h.run_until(SimTime::from_s(1));
        assert!(
            h.picks[from..].iter().all(|p| p.1 == Some(2)),
            "{:?}",
            &h.picks[from..]
        );
        assert!(h.sched.cpus[0].extraq[EXTRA_PEN_Q].is_empty());
        assert_eq!(h.sched.cpus[0].extraq[EXTRA_UTIL_Q], [2]);
    }

    #[test]
    fn idles_until_the_next_period_without_extratime() {
        let mut h = Harness::new(1, &[spec(0, ms(20), ms(15), false)]);
        h.wake(0);
        // First wake: the first full period begins one slice later.
        assert_eq!((h.running[0], h.until[0]), (None, ms(15)));
        h.run_until(ms(15));
        assert_eq!((h.running[0], h.until[0]), (Some(0), ms(30)));
        h.run_until(ms(30));
        assert_eq!((h.running[0], h.until[0]), (None, ms(35)));
        h.run_until(ms(35));
        assert_eq!(h.running[0], Some(0));
    }

    #[test]
    fn yield_keeps_the_slice_but_gives_up_extra_time() {
        let mut h = Harness::new(1, &[dom0(0), domu(0), domu(0)]);
        for v in 0..3 {
            h.wake(v);
        }
        h.run_until(ms(20));
        assert_eq!(h.running[0], Some(0));
        h.redecide(0, Leave::Yielded);
        assert_eq!((h.running[0], h.until[0]), (Some(0), ms(30)));
        h.run_until(ms(30));
        let v = h.running[0].unwrap();
        h.redecide(0, Leave::Yielded);
        assert_ne!(
            h.running[0],
            Some(v),
            "a yield in extra time requeues behind peers"
        );
    }
}
