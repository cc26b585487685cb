//! Xen's Credit2 scheduler, modelled on `xen/common/sched_credit2.c` of the
//! Xen 4.10 generation (the version with `opt_runqueue = socket` as default,
//! `CSCHED2_MIGRATE_RESIST`, ratelimit, and caps by budget; before 4.13's
//! core scheduling renamed vCPUs to units).
//!
//! What is modelled, in Xen's names:
//!
//! * Credit in nanoseconds of the runqueue's highest weight: the running vCPU
//!   burns `t2c` = time × `max_weight` / weight (remainder kept in
//!   `residual`), so a vCPU of half the top weight burns twice as fast.
//! * One runqueue per socket (`credit2_runqueue = socket`, Xen's default),
//!   the host's cores split evenly between `host.sockets`. Each runqueue
//!   keeps its vCPUs sorted by credit (`runq_insert`: after equal credit).
//! * Credit reset (`reset_credit`): when the vCPU picked next has credit
//!   ≤ `CSCHED2_CREDIT_RESET` (0) and nobody was skipped, every vCPU assigned
//!   to the runqueue gets `CSCHED2_CREDIT_INIT` (10 ms; × m if the picked one
//!   was below -INIT), clipped at INIT + `CSCHED2_CARRYOVER_MAX`.
//! * Pick (`csched2_schedule`, `runq_candidate`): the current vCPU if it is
//!   runnable, unless the first eligible queued vCPU has more credit (one
//!   queued on another core must beat it by `CSCHED2_MIGRATE_RESIST`,
//!   500 µs, and is paid `CSCHED2_MIGRATE_COMPENSATION`, 50 µs, on moving);
//!   vCPUs tickled for another core are left to it.
//! * Time slice (`csched2_runtime`): until its credit reaches the next
//!   queued vCPU's (or 0), clamped to [`CSCHED2_MIN_TIMER` 500 µs (or the
//!   rest of the ratelimit), `CSCHED2_MAX_TIMER` 10 ms], and to the budget
//!   if capped.
//! * Wake (`csched2_vcpu_wake`, `runq_tickle`): queued on its runqueue; an
//!   idle, untickled core of the runqueue is tickled (its own core first),
//!   else the busy core whose current vCPU it beats by the most credit (its
//!   own core first, others only by more than `CSCHED2_MIGRATE_RESIST`),
//!   unless that vCPU is still inside the ratelimit. There is no boost
//!   margin in this version: credit alone decides.
//! * Yield (`CSFLAG_vcpu_yield`): the yielder gives way to the first
//!   eligible queued vCPU whatever its credit, and the ratelimit does not
//!   hold it.
//! * Ratelimit (`sched_ratelimit_us`): the scenario's `ratelimit_us` (Xen
//!   4.10 boots with 1000 µs; the scenario default is 0).
//! * Load tracking (`update_runq_load`, `update_svc_load`: the decaying
//!   averages with Xen's shifts, 2^20 µs-ish window, 18 fractional bits),
//!   and `balance_load` at every credit reset: push, pull or swap the vCPUs
//!   that bring the two runqueues' loads closest, under Xen's thresholds. A
//!   running vCPU is marked and moved when it next leaves its core.
//!   New vCPUs go to the least loaded runqueue (`csched2_cpu_pick`), on its
//!   cores in turn (`pick_bias`).
//! * Caps (4.10's budgets): a capped domain gets `cap` % of
//!   `CSCHED2_BDGT_REPL_PERIOD` (10 ms) per period; a vCPU that starts
//!   running grabs the whole pool (`vcpu_grab_budget`: in 4.10 one vCPU of a
//!   capped domain runs at a time), returns what is left when it stops, and
//!   a vCPU that finds none is parked until budget is returned or
//!   replenished.
//!
//! Not modelled: soft affinity (every vCPU's is all cores, which makes the
//! `tickle_score` bonuses equal), SMT siblings (`smt_idle` equals `idle`),
//! tasklets, failed `trylock`s, and per-domain replenishment timers: every
//! capped domain is replenished on one 10 ms grid. Tickles raised where the
//! engine's trait has no tickle output (inside a pick, or when a stopping
//! vCPU returns budget) are delivered by a timer at the same instant.

use std::collections::VecDeque;

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// `CSCHED2_CREDIT_INIT`, and `CSCHED2_MAX_TIMER`.
const CREDIT_INIT: i64 = 10_000_000;
const MAX_TIMER: i64 = CREDIT_INIT;
/// `CSCHED2_MIN_TIMER`, and `CSCHED2_CARRYOVER_MAX`.
const MIN_TIMER: i64 = 500_000;
const CARRYOVER_MAX: i64 = MIN_TIMER;
/// `CSCHED2_MIGRATE_RESIST` (`sched_credit2_migrate_resist` = 500 µs).
const MIGRATE_RESIST: i64 = 500_000;
const MIGRATE_COMPENSATION: i64 = 50_000;
const CREDIT_RESET: i64 = 0;
/// `CSCHED2_IDLE_CREDIT`: what an idle core's "vCPU" has.
const IDLE_CREDIT: i64 = -(1 << 30);
const RATELIMIT_TICKLE_TOLERANCE: i64 = 50_000;
const BDGT_REPL_PERIOD: i64 = 10_000_000;
/// Load averages: time in 2^10 ns units, a 2^20-unit window, 18 bits of
/// fraction; balance tolerances `credit2_balance_under` / `_over`.
const GRANULARITY_SHIFT: u32 = 10;
const WINDOW_SHIFT: u32 = 20;
const PRECISION_SHIFT: u32 = 18;
const UNDERLOAD_TOLERANCE: i32 = 0;
const OVERLOAD_TOLERANCE: i32 = -3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Blocked,
    /// On its runqueue's `runq`.
    Queued,
    /// Current on `processor`.
    Running,
    /// Just taken off `processor`, still runnable, awaiting that core's pick
    /// (Xen: still `current` inside `csched2_schedule`).
    Current,
    /// Runnable but parked for lack of budget (`_VPF_parked`).
    Paused,
}

/// `struct csched2_vcpu`.
#[derive(Debug)]
struct Svc {
    sdom: usize,
    affinity: Vec<CoreId>,
    processor: CoreId,
    rqd: usize,
    credit: i64,
    weight: i64,
    residual: i64,
    start_time: i64,
    state: State,
    parked: bool,
    /// `CSFLAG_vcpu_yield`.
    yielded: bool,
    /// `budget` while running capped (`None`: `STIME_MAX`, no cap).
    budget: Option<i64>,
    avgload: i64,
    load_last_update: i64,
    /// `migrate_rqd` with `CSFLAG_runq_migrate_request`.
    migrate_to: Option<usize>,
    tickled_cpu: Option<CoreId>,
}

/// `struct csched2_dom`: budget pool of a capped domain.
#[derive(Debug, Default)]
struct Sdom {
    tot_budget: i64,
    budget: i64,
    parked_vcpus: Vec<VcpuId>,
}

/// `struct csched2_runqueue_data`.
#[derive(Debug)]
struct Rqd {
    /// `active`: its cores, ascending.
    cores: Vec<CoreId>,
    runq: VecDeque<VcpuId>,
    /// `svc`: vCPUs assigned to it, in assignment order.
    svc: Vec<VcpuId>,
    max_weight: i64,
    load: i64,
    load_last_update: i64,
    avgload: i64,
    b_avgload: i64,
    pick_bias: CoreId,
}

#[derive(Debug)]
pub struct Credit2 {
    ratelimit: i64,
    svcs: Vec<Svc>,
    sdoms: Vec<Sdom>,
    rqds: Vec<Rqd>,
    /// `runq_map`.
    runq_of: Vec<usize>,
    /// `curr_on_cpu`, as the scheduler sees it.
    curr: Vec<Option<VcpuId>>,
    /// `rqd->tickled` (also set while a core is between deschedule and pick).
    tickled: Vec<bool>,
    /// `runstate.state_entry_time` of each core's current vCPU.
    run_since: Vec<i64>,
    /// The still-runnable vCPU just taken off each core, until its pick.
    prev: Vec<Option<VcpuId>>,
    /// Tickles raised where the trait offers no output, delivered by a timer.
    pending: Vec<CoreId>,
    pending_at: SimTime,
    /// Next budget replenishment (all capped domains on one grid).
    next_repl: SimTime,
    capped: bool,
}

impl Credit2 {
    pub fn new(p: &SchedulerParams) -> Self {
        let per = p.cores_per_socket();
        let rqds = (0..p.sockets.clamp(1, p.cores.max(1)))
            .map(|s| {
                let cores: Vec<CoreId> = (s * per..((s + 1) * per).min(p.cores)).collect();
                Rqd {
                    pick_bias: cores.first().copied().unwrap_or(0),
                    cores,
                    runq: VecDeque::new(),
                    svc: Vec::new(),
                    max_weight: 1,
                    load: 0,
                    load_last_update: 0,
                    avgload: 0,
                    b_avgload: 0,
                }
            })
            .collect();
        Credit2 {
            ratelimit: to_i64(p.ratelimit),
            svcs: Vec::new(),
            sdoms: Vec::new(),
            rqds,
            runq_of: (0..p.cores).map(|c| c / per).collect(),
            curr: vec![None; p.cores],
            tickled: vec![false; p.cores],
            run_since: vec![0; p.cores],
            prev: vec![None; p.cores],
            pending: Vec::new(),
            pending_at: SimTime::MAX,
            next_repl: SimTime::MAX,
            capped: false,
        }
    }

    fn allowed(&self, v: VcpuId, core: CoreId) -> bool {
        self.svcs[v].affinity.binary_search(&core).is_ok()
    }

    /// `t2c_update` through `burn_credits`: charge a current vCPU up to `now`.
    fn burn_credits(&mut self, v: VcpuId, now: i64) {
        let max_weight = self.rqds[self.svcs[v].rqd].max_weight;
        let svc = &mut self.svcs[v];
        let delta = now - svc.start_time;
        if delta <= 0 {
            return;
        }
        let val = delta * max_weight + svc.residual;
        svc.residual = val % svc.weight;
        svc.credit -= val / svc.weight;
        if let Some(b) = &mut svc.budget {
            *b -= delta;
        }
        svc.start_time = now;
    }

    fn c2t(&self, rqd: usize, credit: i64, v: VcpuId) -> i64 {
        credit * self.svcs[v].weight / self.rqds[rqd].max_weight
    }

    /// `runq_insert`: after every vCPU with at least as much credit.
    fn runq_insert(&mut self, v: VcpuId) {
        let credit = self.svcs[v].credit;
        let svcs = &self.svcs;
        let q = &mut self.rqds[svcs[v].rqd].runq;
        let at = q
            .iter()
            .position(|&w| credit > svcs[w].credit)
            .unwrap_or(q.len());
        q.insert(at, v);
        self.svcs[v].state = State::Queued;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        let q = &mut self.rqds[self.svcs[v].rqd].runq;
        if let Some(at) = q.iter().position(|&w| w == v) {
            q.remove(at);
        }
    }

    /// `update_runq_load` (+ `update_svc_load` of `v` when given).
    fn update_load(&mut self, rqd: usize, v: Option<VcpuId>, change: i64, now: i64) {
        let now = now >> GRANULARITY_SHIFT;
        let r = &mut self.rqds[rqd];
        let load = r.load;
        if r.load_last_update + (1 << WINDOW_SHIFT) < now {
            r.avgload = load << PRECISION_SHIFT;
            r.b_avgload = load << PRECISION_SHIFT;
        } else {
            let delta = (now - r.load_last_update).max(0);
            r.avgload = decay(r.avgload, delta, load);
            r.b_avgload = decay(r.b_avgload, delta, load);
        }
        r.load += change;
        r.load_last_update = now;
        if let Some(v) = v {
            self.update_svc_load(v, change, now);
        }
    }

    /// `update_svc_load`; `now` already in load-granularity units.
    fn update_svc_load(&mut self, v: VcpuId, change: i64, now: i64) {
        let svc = &mut self.svcs[v];
        let vcpu_load = match change {
            -1 => 1,
            1 => 0,
            _ => i64::from(svc.state != State::Blocked && !svc.parked),
        };
        if svc.load_last_update + (1 << WINDOW_SHIFT) < now {
            svc.avgload = vcpu_load << PRECISION_SHIFT;
        } else {
            let delta = (now - svc.load_last_update).max(0);
            svc.avgload = decay(svc.avgload, delta, vcpu_load);
        }
        svc.load_last_update = now;
    }

    fn runq_assign(&mut self, v: VcpuId, rqd: usize) {
        self.svcs[v].rqd = rqd;
        let r = &mut self.rqds[rqd];
        r.svc.push(v);
        r.max_weight = r.max_weight.max(self.svcs[v].weight);
        r.b_avgload += self.svcs[v].avgload;
    }

    fn runq_deassign(&mut self, v: VcpuId) {
        let rqd = self.svcs[v].rqd;
        let weight = self.svcs[v].weight;
        let avgload = self.svcs[v].avgload;
        self.rqds[rqd].svc.retain(|&w| w != v);
        // `update_max_weight` with the old weight gone.
        if weight == self.rqds[rqd].max_weight {
            let svcs = &self.svcs;
            let r = &mut self.rqds[rqd];
            r.max_weight = r
                .svc
                .iter()
                .map(|&w| svcs[w].weight)
                .max()
                .unwrap_or(1)
                .max(1);
        }
        let r = &mut self.rqds[rqd];
        r.b_avgload = (r.b_avgload - avgload).max(0);
    }

    /// `cpumask_cycle(pick_bias, affinity ∩ rqd)`: the next allowed core of
    /// the runqueue after its bias, which then moves there.
    fn cycle_core(&mut self, v: VcpuId, rqd: usize) -> CoreId {
        let r = &self.rqds[rqd];
        let cores: Vec<CoreId> = r
            .cores
            .iter()
            .copied()
            .filter(|&c| self.allowed(v, c))
            .collect();
        let core = cores
            .iter()
            .copied()
            .find(|&c| c > r.pick_bias)
            .unwrap_or(cores[0]);
        self.rqds[rqd].pick_bias = core;
        core
    }

    fn tickle_cpu(&mut self, core: CoreId, tickle: &mut Vec<CoreId>) {
        self.tickled[core] = true;
        if !tickle.contains(&core) {
            tickle.push(core);
        }
    }

    /// `is_preemptable`: the current vCPU of `core` ran past the ratelimit.
    fn is_preemptable(&self, core: CoreId, now: i64) -> bool {
        self.ratelimit <= RATELIMIT_TICKLE_TOLERANCE
            || now - self.run_since[core] > self.ratelimit - RATELIMIT_TICKLE_TOLERANCE
    }

    /// `tickle_score` (soft affinity is every core, so its bonuses cancel).
    fn tickle_score(&mut self, now: i64, new: VcpuId, core: CoreId) -> i64 {
        let Some(cur) = self.curr[core] else {
            return -1;
        };
        if !self.is_preemptable(core, now) {
            return -1;
        }
        self.burn_credits(cur, now);
        let mut score = self.svcs[new].credit - self.svcs[cur].credit;
        if self.svcs[new].processor != core {
            score -= MIGRATE_RESIST;
        }
        score
    }

    /// `runq_tickle`: an idle untickled core of the runqueue (own core
    /// first, then cycling from it), else the busy core it beats by most.
    fn runq_tickle(&mut self, new: VcpuId, now: i64, tickle: &mut Vec<CoreId>) {
        let cpu = self.svcs[new].processor;
        let rqd = self.svcs[new].rqd;
        let mask: Vec<CoreId> = self.rqds[rqd]
            .cores
            .iter()
            .copied()
            .filter(|&c| self.allowed(new, c))
            .collect();
        let idle = |c: &CoreId| self.curr[*c].is_none() && !self.tickled[*c];
        let cycled = mask
            .iter()
            .filter(|&&c| c >= cpu)
            .chain(mask.iter().filter(|&&c| c < cpu));
        if let Some(&c) = cycled.clone().find(|c| idle(c)) {
            return self.tickle_for(new, c, tickle);
        }
        let busy: Vec<CoreId> = mask
            .iter()
            .copied()
            .filter(|&c| self.curr[c].is_some() && !self.tickled[c])
            .collect();
        let mut best: Option<(i64, CoreId)> = None;
        if busy.contains(&cpu) {
            let score = self.tickle_score(now, new, cpu);
            if score > 0 {
                // In its soft affinity (all cores): taken at once.
                return self.tickle_for(new, cpu, tickle);
            }
        }
        for c in busy.into_iter().filter(|&c| c != cpu) {
            let score = self.tickle_score(now, new, c);
            if score > best.map_or(0, |b| b.0) {
                best = Some((score, c));
            }
        }
        if let Some((_, c)) = best {
            self.tickle_for(new, c, tickle);
        }
    }

    fn tickle_for(&mut self, new: VcpuId, core: CoreId, tickle: &mut Vec<CoreId>) {
        self.tickle_cpu(core, tickle);
        self.svcs[new].tickled_cpu = Some(core);
    }

    /// Queues runnable `v` on its runqueue and tickles for it.
    fn enqueue(&mut self, v: VcpuId, now: i64, tickle: &mut Vec<CoreId>) {
        self.runq_insert(v);
        self.runq_tickle(v, now, tickle);
    }

    /// A tickle raised where the trait has no output: delivered by a timer now.
    fn enqueue_later(&mut self, v: VcpuId, now: SimTime) {
        let mut pending = std::mem::take(&mut self.pending);
        self.enqueue(v, to_i64(now), &mut pending);
        self.pending = pending;
        if !self.pending.is_empty() {
            self.pending_at = self.pending_at.min(now);
        }
    }

    /// `park_vcpu`.
    fn park(&mut self, v: VcpuId, now: i64) {
        self.svcs[v].parked = true;
        if self.svcs[v].state == State::Queued {
            self.runq_remove(v);
            self.update_load(self.svcs[v].rqd, Some(v), -1, now);
            self.svcs[v].state = State::Paused;
        }
        self.sdoms[self.svcs[v].sdom].parked_vcpus.push(v);
    }

    /// `vcpu_grab_budget`: a capped vCPU takes the domain's whole pool.
    fn grab_budget(&mut self, v: VcpuId, now: i64) -> bool {
        let Some(own) = self.svcs[v].budget else {
            return true;
        };
        if own > 0 {
            return true;
        }
        let sdom = &mut self.sdoms[self.svcs[v].sdom];
        sdom.budget += own;
        if sdom.budget > 0 {
            self.svcs[v].budget = Some(sdom.budget);
            sdom.budget = 0;
            true
        } else {
            self.svcs[v].budget = Some(0);
            self.park(v, now);
            false
        }
    }

    /// `vcpu_return_budget` + `unpark_parked_vcpus`.
    fn return_budget(&mut self, v: VcpuId, now: SimTime) {
        let Some(own) = self.svcs[v].budget.filter(|&b| b > 0) else {
            return;
        };
        self.svcs[v].budget = Some(0);
        let d = self.svcs[v].sdom;
        self.sdoms[d].budget += own;
        if self.sdoms[d].budget > 0 {
            self.unpark_all(d, now);
        }
    }

    fn unpark_all(&mut self, d: usize, now: SimTime) {
        for w in std::mem::take(&mut self.sdoms[d].parked_vcpus) {
            self.svcs[w].parked = false;
            if self.svcs[w].state == State::Paused {
                self.update_load(self.svcs[w].rqd, Some(w), 1, to_i64(now));
                self.enqueue_later(w, now);
            }
        }
    }

    /// `reset_credit`: everyone on the runqueue gets INIT (× m), clipped.
    fn reset_credit(&mut self, rqd: usize, now: i64, snext: VcpuId) {
        let mut m = 1;
        if self.svcs[snext].credit < -CREDIT_INIT {
            m += -self.svcs[snext].credit / CREDIT_INIT;
        }
        for i in 0..self.rqds[rqd].svc.len() {
            let v = self.rqds[rqd].svc[i];
            if matches!(self.svcs[v].state, State::Running | State::Current) {
                self.burn_credits(v, now);
                if self.svcs[v].budget.is_some_and(|b| b <= 0) {
                    let core = self.svcs[v].processor;
                    self.tickled[core] = true;
                    self.pending.push(core);
                    self.pending_at = self.pending_at.min(SimTime::from_ns(now as u64));
                }
            }
            let svc = &mut self.svcs[v];
            svc.credit = (svc.credit + m * CREDIT_INIT).min(CREDIT_INIT + CARRYOVER_MAX);
            svc.start_time = now;
        }
    }

    /// `balance_load`: even out the loads of this core's runqueue and the one
    /// furthest from it, by the best push, pull or swap.
    fn balance_load(&mut self, core: CoreId, now: i64) {
        let lrqd = self.runq_of[core];
        self.update_load(lrqd, None, 0, now);
        let mut load_delta = 0;
        let mut orqd = None;
        for o in 0..self.rqds.len() {
            if o == lrqd {
                continue;
            }
            self.update_load(o, None, 0, now);
            let delta = (self.rqds[lrqd].b_avgload - self.rqds[o].b_avgload).abs();
            if delta > load_delta {
                load_delta = delta;
                orqd = Some(o);
            }
        }
        let Some(orqd) = orqd else { return };
        let (l, o) = (&self.rqds[lrqd], &self.rqds[orqd]);
        let load_max = l.b_avgload.max(o.b_avgload);
        let cpus_max = l.cores.len().max(o.cores.len()) as i64;
        let tolerance = if load_max < cpus_max << PRECISION_SHIFT {
            UNDERLOAD_TOLERANCE
        } else {
            OVERLOAD_TOLERANCE
        };
        if load_delta < 1 << (PRECISION_SHIFT as i32 + tolerance) {
            return;
        }
        let now_units = now >> GRANULARITY_SHIFT;
        let (lsvc, osvc) = (self.rqds[lrqd].svc.clone(), self.rqds[orqd].svc.clone());
        for &v in lsvc.iter().chain(&osvc) {
            self.update_svc_load(v, 0, now_units);
        }
        let (lb, ob) = (self.rqds[lrqd].b_avgload, self.rqds[orqd].b_avgload);
        let mut best = (load_delta, None, None);
        let mut consider = |push: Option<VcpuId>, pull: Option<VcpuId>, svcs: &[Svc]| {
            let (mut l_load, mut o_load) = (lb, ob);
            if let Some(p) = push {
                l_load -= svcs[p].avgload;
                o_load += svcs[p].avgload;
            }
            if let Some(p) = pull {
                l_load += svcs[p].avgload;
                o_load -= svcs[p].avgload;
            }
            let delta = (l_load - o_load).abs();
            if delta < best.0 {
                best = (delta, push, pull);
            }
        };
        let migrateable = |v: VcpuId, to: usize| {
            self.svcs[v].migrate_to.is_none()
                && self.rqds[to].cores.iter().any(|&c| self.allowed(v, c))
        };
        for &push in lsvc.iter().filter(|&&v| migrateable(v, orqd)) {
            for &pull in osvc.iter().filter(|&&v| migrateable(v, lrqd)) {
                consider(Some(push), Some(pull), &self.svcs);
            }
            consider(Some(push), None, &self.svcs);
        }
        for &pull in osvc.iter().filter(|&&v| migrateable(v, lrqd)) {
            consider(None, Some(pull), &self.svcs);
        }
        let (_, push, pull) = best;
        if let Some(v) = push {
            self.migrate(v, orqd, now);
        }
        if let Some(v) = pull {
            self.migrate(v, lrqd, now);
        }
    }

    /// `migrate`: a scheduled vCPU is marked and moved when it leaves its
    /// core; a queued or blocked one moves now.
    fn migrate(&mut self, v: VcpuId, trqd: usize, now: i64) {
        match self.svcs[v].state {
            State::Running | State::Current => {
                self.svcs[v].migrate_to = Some(trqd);
                let core = self.svcs[v].processor;
                self.tickled[core] = true;
                self.pending.push(core);
                self.pending_at = self.pending_at.min(SimTime::from_ns(now as u64));
            }
            state => {
                let on_runq = state == State::Queued;
                if on_runq {
                    self.runq_remove(v);
                    self.update_load(self.svcs[v].rqd, None, -1, now);
                }
                self.move_to(v, trqd);
                if on_runq {
                    self.update_load(trqd, None, 1, now);
                    self.enqueue_later(v, SimTime::from_ns(now as u64));
                }
            }
        }
    }

    fn move_to(&mut self, v: VcpuId, trqd: usize) {
        self.runq_deassign(v);
        self.svcs[v].processor = self.cycle_core(v, trqd);
        self.runq_assign(v, trqd);
    }

    /// `runq_candidate`: who runs next on `core`, and how many queued vCPUs
    /// were passed over.
    fn runq_candidate(
        &mut self,
        core: CoreId,
        scurr: Option<VcpuId>,
        now: i64,
    ) -> (Option<VcpuId>, u32) {
        let rqd = self.runq_of[core];
        let yielded = scurr.is_some_and(|s| std::mem::take(&mut self.svcs[s].yielded));
        let runnable = scurr.filter(|&s| !self.svcs[s].parked && self.svcs[s].migrate_to.is_none());
        if let Some(s) = runnable {
            if !yielded && self.ratelimit > 0 && now - self.run_since[core] < self.ratelimit {
                return (Some(s), 0);
            }
        }
        let snext_credit = runnable.map_or(IDLE_CREDIT, |s| self.svcs[s].credit);
        let mut skipped = 0;
        let mut i = 0;
        while i < self.rqds[rqd].runq.len() {
            let v = self.rqds[rqd].runq[i];
            i += 1;
            let svc = &self.svcs[v];
            let elsewhere = svc
                .tickled_cpu
                .is_some_and(|t| t != core && self.tickled[t]);
            let resisted = svc.processor != core && snext_credit + MIGRATE_RESIST > svc.credit;
            if !self.allowed(v, core) || elsewhere || resisted {
                skipped += 1;
                continue;
            }
            let better = yielded || svc.credit > snext_credit;
            if better && self.grab_budget(v, now) {
                return (Some(v), skipped);
            }
            break;
        }
        (runnable, skipped)
    }

    /// `csched2_runtime`.
    fn runtime(&self, core: CoreId, snext: VcpuId, now: i64, continues: bool) -> i64 {
        let rqd = self.runq_of[core];
        let mut min_time = MIN_TIMER;
        if self.ratelimit > 0 {
            let ratelimit_min = if continues {
                self.run_since[core] + self.ratelimit - now
            } else {
                self.ratelimit
            };
            min_time = min_time.max(ratelimit_min);
        }
        let svc = &self.svcs[snext];
        let mut rt_credit = svc.credit;
        if let Some(&swait) = self.rqds[rqd].runq.front() {
            if self.svcs[swait].credit > 0 {
                rt_credit = svc.credit - self.svcs[swait].credit;
            }
        }
        let mut time = if rt_credit > 0 {
            self.c2t(rqd, rt_credit, snext)
        } else {
            0
        };
        if let Some(b) = svc.budget {
            time = time.min(b);
        }
        if time < min_time {
            min_time
        } else {
            time.min(MAX_TIMER)
        }
    }

    /// `csched2_context_saved` for the vCPU that just left `core` runnable,
    /// then its move if `balance_load` asked for one.
    fn context_saved(&mut self, v: VcpuId, now: SimTime) {
        let t = to_i64(now);
        self.return_budget(v, now);
        let svc = &self.svcs[v];
        if let Some(trqd) = svc.migrate_to {
            self.update_load(svc.rqd, Some(v), -1, t);
            self.svcs[v].migrate_to = None;
            self.move_to(v, trqd);
            if self.svcs[v].parked {
                self.svcs[v].state = State::Paused;
            } else {
                self.update_load(trqd, Some(v), 1, t);
                self.enqueue_later(v, now);
            }
        } else if svc.parked {
            self.update_load(svc.rqd, Some(v), -1, t);
            self.svcs[v].state = State::Paused;
        } else {
            self.enqueue_later(v, now);
        }
    }

    fn replenish(&mut self, now: SimTime) {
        let t = to_i64(now);
        while self.next_repl <= now {
            self.next_repl += SimTime::from_ns(BDGT_REPL_PERIOD as u64);
            for d in 0..self.sdoms.len() {
                self.sdoms[d].budget += self.sdoms[d].tot_budget;
            }
        }
        for d in 0..self.sdoms.len() {
            let sdom = &mut self.sdoms[d];
            if sdom.tot_budget == 0 || sdom.budget <= 0 {
                continue;
            }
            sdom.budget = sdom.budget.min(sdom.tot_budget);
            self.unpark_all(d, SimTime::from_ns(t as u64));
        }
    }
}

/// One step of Xen's decaying average: `avg + delta*load*P/W - delta*avg/W`.
fn decay(avg: i64, delta: i64, load: i64) -> i64 {
    avg + ((delta * (load << PRECISION_SHIFT)) >> WINDOW_SHIFT) - ((delta * avg) >> WINDOW_SHIFT)
}

impl Scheduler for Credit2 {
    /// `csched2_alloc_vdata` + `csched2_vcpu_insert`: INIT credit, 50 % load,
    /// on the least loaded runqueue it may use.
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.svcs.len());
        if self.sdoms.len() <= spec.domain {
            self.sdoms.resize_with(spec.domain + 1, Sdom::default);
        }
        let capped = spec.cap > 0;
        if capped {
            self.sdoms[spec.domain].tot_budget = i64::from(spec.cap) * BDGT_REPL_PERIOD / 100;
            self.sdoms[spec.domain].budget = self.sdoms[spec.domain].tot_budget;
            self.capped = true;
            self.next_repl = SimTime::from_ns(BDGT_REPL_PERIOD as u64);
        }
        self.svcs.push(Svc {
            sdom: spec.domain,
            affinity: spec.affinity.clone(),
            processor: spec.affinity[0],
            rqd: 0,
            credit: CREDIT_INIT,
            weight: i64::from(spec.weight.max(1)),
            residual: 0,
            start_time: 0,
            state: State::Blocked,
            parked: false,
            yielded: false,
            budget: capped.then_some(0),
            avgload: 1 << (PRECISION_SHIFT - 1),
            load_last_update: 0,
            migrate_to: None,
            tickled_cpu: None,
        });
        // `csched2_cpu_pick`: the runqueue with the lowest b_avgload that has
        // a core of its affinity, ties to the lower index.
        let rqd = (0..self.rqds.len())
            .filter(|&r| self.rqds[r].cores.iter().any(|&c| self.allowed(v, c)))
            .min_by_key(|&r| self.rqds[r].b_avgload)
            .expect("affinity names existing cores");
        self.svcs[v].processor = self.cycle_core(v, rqd);
        self.runq_assign(v, rqd);
    }

    /// `csched2_vcpu_wake`.
    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        _running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        if self.svcs[v].state != State::Blocked {
            return;
        }
        if self.svcs[v].parked {
            self.svcs[v].state = State::Paused;
            return;
        }
        let t = to_i64(now);
        self.update_load(self.svcs[v].rqd, Some(v), 1, t);
        self.enqueue(v, t, tickle);
    }

    /// The first part of `csched2_schedule`: charge the vCPU. A blocked one
    /// is done (`context_saved`); a runnable one waits for this core's pick.
    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, _ran: SimTime, why: Leave) {
        let t = to_i64(now);
        self.burn_credits(v, t);
        self.curr[core] = None;
        self.tickled[core] = true;
        match why {
            Leave::Blocked => {
                self.svcs[v].state = State::Blocked;
                self.return_budget(v, now);
                self.update_load(self.svcs[v].rqd, Some(v), -1, t);
                if let Some(trqd) = self.svcs[v].migrate_to.take() {
                    self.move_to(v, trqd);
                }
            }
            Leave::Preempted | Leave::Yielded => {
                self.svcs[v].state = State::Current;
                self.svcs[v].yielded = why == Leave::Yielded;
                self.prev[core] = Some(v);
            }
        }
    }

    /// The rest of `csched2_schedule`.
    fn pick(&mut self, now: SimTime, core: CoreId, _running: &[Option<VcpuId>]) -> Pick {
        let t = to_i64(now);
        self.tickled[core] = false;
        let scurr = self.prev[core].take();
        if let Some(s) = scurr {
            if self.svcs[s].budget.is_some_and(|b| b <= 0) {
                self.grab_budget(s, t);
            }
        }
        let (snext, skipped) = self.runq_candidate(core, scurr, t);
        let continues = snext.is_some() && snext == scurr;
        let mut slice = SimTime::MAX;
        if let Some(n) = snext {
            if !continues {
                self.runq_remove(n);
                self.run_since[core] = t;
            }
            self.svcs[n].state = State::Running;
            self.curr[core] = Some(n);
            if skipped == 0 && self.svcs[n].credit <= CREDIT_RESET {
                self.reset_credit(self.runq_of[core], t, n);
                self.balance_load(core, t);
            }
            let svc = &mut self.svcs[n];
            svc.start_time = t;
            svc.tickled_cpu = None;
            if svc.processor != core {
                svc.credit += MIGRATE_COMPENSATION;
                svc.processor = core;
            }
            slice = SimTime::from_ns(self.runtime(core, n, t, continues) as u64);
        } else {
            self.update_load(self.runq_of[core], None, 0, t);
        }
        if let Some(s) = scurr.filter(|_| !continues) {
            self.context_saved(s, now);
        }
        Pick { vcpu: snext, slice }
    }

    fn next_timer(&self) -> SimTime {
        let repl = if self.capped {
            self.next_repl
        } else {
            SimTime::MAX
        };
        repl.min(self.pending_at)
    }

    /// Delivers deferred tickles and replenishes capped domains' budgets.
    fn timer(
        &mut self,
        now: SimTime,
        _running: &[Option<VcpuId>],
        _ran: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        if self.capped && now >= self.next_repl {
            self.replenish(now);
        }
        self.pending_at = SimTime::MAX;
        for c in self.pending.drain(..) {
            if !tickle.contains(&c) {
                tickle.push(c);
            }
        }
    }
}

fn to_i64(t: SimTime) -> i64 {
    i64::try_from(t.as_ns()).expect("SimTime beyond i64 nanoseconds")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::test_spec;
    use crate::hypervisor::testbed::Bed;

    fn bed(cores: usize, sockets: usize, specs: &[VcpuSpec]) -> Bed<Credit2> {
        let mut p = SchedulerParams::xen_defaults(cores);
        p.sockets = sockets;
        Bed::new(Credit2::new(&p), cores, specs)
    }

    fn ms(t: SimTime) -> f64 {
        t.as_ns() as f64 / 1e6
    }

    #[test]
    fn credit_burns_inversely_to_weight() {
        for (wa, wb) in [(256, 256), (512, 256), (256, 512)] {
            let mut b = bed(
                1,
                1,
                &[test_spec(1, wa, 0, vec![0]), test_spec(2, wb, 0, vec![0])],
            );
            b.wake(0);
            b.wake(1);
            b.run_until(SimTime::from_s(3));
            let (x, y) = (ms(b.cpu_time(0)), ms(b.cpu_time(1)));
            let expected = 3000.0 * f64::from(wa) / f64::from(wa + wb);
            assert!((x - expected).abs() <= 10.0, "{wa}:{wb}: {x} ms vs {y} ms");
            assert_eq!(b.cpu_time(0) + b.cpu_time(1), SimTime::from_s(3));
        }
    }

    #[test]
    fn slices_stay_between_min_and_max_timer() {
        let mut b = bed(
            1,
            1,
            &[test_spec(1, 256, 0, vec![0]), test_spec(2, 512, 0, vec![0])],
        );
        b.wake(0);
        b.wake(1);
        b.run_until(SimTime::from_s(1));
        for &(_, _, start, end) in &b.runs {
            let len = to_i64(end - start);
            assert!((MIN_TIMER..=MAX_TIMER).contains(&len), "run of {len} ns");
        }
    }

    #[test]
    fn runtime_is_the_credit_gap_to_the_next_queued_vcpu() {
        let mut b = bed(
            1,
            1,
            &[test_spec(1, 256, 0, vec![0]), test_spec(2, 256, 0, vec![0])],
        );
        b.wake(0);
        b.s.svcs[1].credit = 4_000_000;
        b.wake(1);
        // vCPU 0 (10 ms of credit) runs until it is level with vCPU 1's 4 ms.
        assert_eq!(b.running[0], Some(0));
        b.redecide(0, Leave::Preempted);
        assert_eq!(b.running[0], Some(0), "still the one with more credit");
        assert_eq!(b.s.runtime(0, 0, 0, true), 6_000_000);
    }

    #[test]
    fn reset_adds_init_and_clips_at_the_carryover() {
        let mut b = bed(
            1,
            1,
            &[test_spec(1, 256, 0, vec![0]), test_spec(2, 256, 0, vec![0])],
        );
        b.s.svcs[0].credit = -200;
        b.s.svcs[1].credit = CREDIT_INIT;
        b.s.reset_credit(0, 0, 0);
        assert_eq!(b.s.svcs[0].credit, CREDIT_INIT - 200);
        assert_eq!(b.s.svcs[1].credit, CREDIT_INIT + CARRYOVER_MAX);
        // Far below -INIT: moved up by as many INITs as it takes.
        b.s.svcs[0].credit = -2 * CREDIT_INIT - 5;
        b.s.reset_credit(0, 0, 0);
        assert_eq!(b.s.svcs[0].credit, CREDIT_INIT - 5);
    }

    #[test]
    fn a_waking_vcpu_with_more_credit_preempts_and_one_with_less_does_not() {
        let mut b = bed(
            1,
            1,
            &[test_spec(1, 256, 0, vec![0]), test_spec(2, 256, 0, vec![0])],
        );
        b.wake(0);
        b.run_until(SimTime::from_ms(3));
        // vCPU 0 burned 3 ms: vCPU 1 (10 ms) beats it.
        assert_eq!(b.wake(1), vec![0]);
        assert_eq!(b.running[0], Some(1));
        b.run_until(SimTime::from_ms(4));
        b.block(0);
        assert_eq!(b.running[0], Some(0));
        b.run_until(SimTime::from_ms(5));
        // A waker with less credit than the running vCPU's 6 ms waits.
        b.s.svcs[1].credit = 1_000_000;
        assert_eq!(b.wake(1), Vec::<CoreId>::new(), "less credit: no tickle");
        assert_eq!(b.running[0], Some(0));
    }

    #[test]
    fn migration_resistance_keeps_a_vcpu_off_a_busy_core() {
        let both = vec![0, 1];
        let specs = [
            test_spec(1, 256, 0, both.clone()),
            test_spec(2, 256, 0, both.clone()),
            test_spec(3, 256, 0, both.clone()),
        ];
        let mut b = bed(2, 1, &specs);
        b.wake(0);
        b.wake(1);
        let on1 = b.running[1].unwrap();
        // A queued vCPU whose processor is core 0, with 300 µs more credit
        // than core 1's current: not worth a migration.
        b.s.svcs[2].processor = 0;
        b.s.svcs[2].credit = b.s.svcs[on1].credit + 300_000;
        b.s.runq_insert(2);
        b.redecide(1, Leave::Preempted);
        assert_eq!(b.running[1], Some(on1), "resisted");
        b.s.svcs[2].credit = b.s.svcs[on1].credit + 600_000;
        b.redecide(1, Leave::Preempted);
        assert_eq!(b.running[1], Some(2), "worth it");
        assert_eq!(b.s.svcs[2].processor, 1);
    }

    #[test]
    fn one_runqueue_per_socket_and_vcpus_spread_by_load() {
        let all: Vec<CoreId> = (0..4).collect();
        let specs: Vec<VcpuSpec> = (0..4).map(|d| test_spec(d, 256, 0, all.clone())).collect();
        let b = bed(4, 2, &specs);
        assert_eq!(b.s.rqds.len(), 2);
        assert_eq!(b.s.rqds[0].cores, vec![0, 1]);
        assert_eq!(b.s.rqds[1].cores, vec![2, 3]);
        let rqs: Vec<usize> = b.s.svcs.iter().map(|s| s.rqd).collect();
        assert_eq!(rqs, vec![0, 1, 0, 1]);
        assert_eq!(b.s.runq_of, vec![0, 0, 1, 1]);
    }

    #[test]
    fn balance_moves_load_to_the_idle_socket() {
        let all: Vec<CoreId> = (0..2).collect();
        let specs: Vec<VcpuSpec> = (0..4).map(|d| test_spec(d, 256, 0, all.clone())).collect();
        let mut b = bed(2, 2, &specs);
        // Everyone starts on socket 0's runqueue.
        for v in 0..4 {
            if b.s.svcs[v].rqd != 0 {
                b.s.move_to(v, 0);
            }
        }
        for v in 0..4 {
            b.wake(v);
        }
        b.run_until(SimTime::from_s(2));
        let on1 = b.s.svcs.iter().filter(|s| s.rqd == 1).count();
        assert_eq!(on1, 2, "two vCPUs moved to socket 1");
        for v in 0..4 {
            let share = ms(b.cpu_time(v));
            assert!(share > 700.0, "vCPU {v} ran {share} ms of 2 s on 2 cores");
        }
    }

    #[test]
    fn a_yielding_vcpu_gives_way_even_to_less_credit() {
        let mut b = bed(
            1,
            1,
            &[test_spec(1, 256, 0, vec![0]), test_spec(2, 256, 0, vec![0])],
        );
        b.wake(0);
        b.wake(1);
        let first = b.running[0].unwrap();
        b.now = SimTime::from_ms(1);
        b.redecide(0, Leave::Yielded);
        assert_ne!(b.running[0], Some(first));
        // Alone, a yield keeps the core.
        let mut b = bed(1, 1, &[test_spec(1, 256, 0, vec![0])]);
        b.wake(0);
        b.now = SimTime::from_ms(1);
        b.redecide(0, Leave::Yielded);
        assert_eq!(b.running[0], Some(0));
    }

    #[test]
    fn a_cap_limits_the_domain_to_its_budget() {
        let mut b = bed(
            1,
            1,
            &[
                test_spec(1, 256, 30, vec![0]),
                test_spec(2, 256, 0, vec![0]),
            ],
        );
        b.wake(0);
        b.wake(1);
        b.run_until(SimTime::from_s(1));
        let capped = ms(b.cpu_time(0));
        assert!(
            (capped - 300.0).abs() <= 10.0,
            "capped at 30 %: {capped} ms"
        );
        assert_eq!(b.cpu_time(0) + b.cpu_time(1), SimTime::from_s(1));
    }
}
