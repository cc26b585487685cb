//! Xen's Credit scheduler (credit1), modelled on `xen/common/sched_credit.c`
//! of Xen 3.4 (the `CSCHED_TICKS_PER_ACCT` / `burn_credits` version, before
//! cpupools and `CSCHED_FLAG_VCPU_YIELD`).
//!
//! What is modelled, in Xen's names:
//!
//! * Priorities BOOST > UNDER > OVER (> idle); one run queue per core, kept
//!   by `__runq_insert` (after every vCPU of equal or higher priority).
//!   `csched_acct` changes the priority of queued vCPUs in place;
//!   `csched_runq_sort`, at the tick right after it, moves UNDER/BOOST ahead
//!   of OVER again. A wake or an unpark between those may see a queue out of
//!   order, as in Xen.
//! * Debit (`burn_credits`, new in 3.4): the running vCPU is charged for the
//!   exact time it ran, 10 credits per ms rounded to the nearest credit,
//!   at every tick and whenever it is descheduled; the rounding remainder
//!   stays in `start_time`. (Xen 3.3 instead charged 100 credits to whoever
//!   ran at the tick.)
//! * Ticks (`csched_tick`): every `tick` on every core, all at the same
//!   instants. The running vCPU loses BOOST, is charged, and joins its
//!   domain's active list if it was not on it (the only way to become
//!   active: sampled at ticks).
//! * Accounting (`csched_acct`) every `ticks_per_acct` ticks, run before the
//!   per-core ticks of that instant (one of the interleavings Xen's
//!   independent timers produce): credit split by weight between active
//!   domains, evenly within a domain, caps, parking, clipping at
//!   -`CREDITS_PER_TSLICE`, and a vCPU above +`CREDITS_PER_TSLICE` leaves
//!   the active list with its credit reset to 0.
//! * Wake (`csched_vcpu_wake`), tickles (`__runq_tickle`), pick
//!   (`csched_schedule`) and stealing (`csched_load_balance`,
//!   `csched_runq_steal`) as in 3.4; see the functions below.
//! * Yield: a plain reschedule, as in 3.4 (see `deschedule`).
//! * `ratelimit` (0 in 3.4) follows Xen 4.2's `csched_schedule`: a vCPU
//!   preempted before it ran `ratelimit` is handed back by the next pick
//!   for the rest of it, then the preemption takes effect.
//!
//! * With `cpu_pick` (`hypervisor.credit_cpu_pick`): `_csched_cpu_pick`
//!   at every tick for the running vCPU (`csched_vcpu_acct`, once it is
//!   active), and when the pick names another core, the migration Xen
//!   does through `_VPF_migrating`: the vCPU leaves its core, which picks
//!   again, then `vcpu_migrate` picks (committing `idle_bias`) and wakes it
//!   there (`csched_vcpu_wake`: BOOST, queue, tickle). See `pick_cpu`.
//!   On one socket it never moves a vCPU (sibling groups of one core all
//!   tie), nor without idle cores. Off by default (`credit_cpu_pick = true`).
//!
//! Not modelled: SMT siblings (the host model has none: `cpu_pick` sees
//! each core as its own sibling group, sockets as `cpu_core_map`), the
//! cache-hot check (`vcpu_migration_delay` defaults to 0), and failed
//! `spin_trylock`s while stealing.

use std::collections::VecDeque;

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// `CSCHED_CREDITS_PER_MSEC`.
const CREDITS_PER_MSEC: i64 = 10;
const NS_PER_MS: i64 = 1_000_000;

/// `CSCHED_PRI_*`; the derived order is Xen's numeric order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Pri {
    /// The idle vCPU (an empty run queue).
    Idle,
    /// Time-share without credits.
    Over,
    /// Time-share with credits.
    Under,
    /// Time-share, just woken.
    Boost,
}

/// Where a vCPU is, from the scheduler's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Halted by the guest; held by nobody.
    Blocked,
    /// On the run queue of its `processor`.
    Queued,
    /// Current on its `processor` (also while a ratelimit hold keeps it).
    Running,
    /// Wants to run but is parked (`vcpu_pause_nosync` by a cap); it is
    /// queued again when `csched_acct` unparks it.
    Paused,
    /// Taken off its core with `_VPF_migrating` set; `vcpu_migrate` wakes it
    /// on its new core once the old one has picked again.
    Migrating,
}

/// `struct csched_vcpu`.
#[derive(Debug)]
struct CschedVcpu {
    sdom: usize,
    /// Hard affinity, ascending.
    affinity: Vec<CoreId>,
    /// The affinity is every core, `0..cores` (tickles scan the cores directly).
    every_core: bool,
    /// `vc->processor`: the core it runs on or last ran on.
    processor: CoreId,
    credit: i64,
    /// Xen's `start_time` in ns: absolute while running, otherwise the
    /// uncharged remainder relative to the deschedule instant.
    start_time: i64,
    pri: Pri,
    /// `CSCHED_FLAG_VCPU_PARKED`.
    parked: bool,
    /// On its domain's `active_vcpu` list.
    active: bool,
    /// `_VPF_migrating`: the tick's pick named another core.
    migrating: bool,
    state: State,
}

/// `struct csched_dom`.
#[derive(Debug, Default)]
struct CschedDom {
    weight: u32,
    cap: u32,
    /// `active_vcpu`, head first (`list_add` pushes at the front).
    active_vcpu: VecDeque<VcpuId>,
}

/// Xen 3.4's credit scheduler (`struct csched_private` plus the per-core
/// and per-vCPU data).
#[derive(Debug)]
pub struct Credit {
    tslice: SimTime,
    tick: SimTime,
    ticks_per_acct: u32,
    ratelimit: SimTime,
    boost: bool,
    /// `CSCHED_CREDITS_PER_ACCT`: one core's credits per period.
    credits_per_acct: i64,
    /// `CSCHED_CREDITS_PER_TSLICE`: the clip bound on credits.
    credits_per_tslice: i64,
    /// `csched_priv.credit`: credits of all cores per period.
    credit: i64,
    credit_balance: i64,
    /// `csched_priv.weight`: sum of the active domains' weights.
    weight: i64,
    /// `active_sdom`, head first.
    active_sdom: VecDeque<usize>,
    vcpus: Vec<CschedVcpu>,
    doms: Vec<CschedDom>,
    /// Per core; a Vec: queues are short and inserts land mid-queue, where
    /// VecDeque's insert costs more than a short move.
    runq: Vec<Vec<VcpuId>>,
    /// Ticks since the last `csched_acct`, which runs every `ticks_per_acct`.
    ticks: u32,
    next_tick: SimTime,
    /// A vCPU the ratelimit keeps on its core across a preemption.
    held: Vec<Option<VcpuId>>,
    /// When the current vCPU of each core started its uninterrupted run
    /// (Xen 4.2: `runstate.state_entry_time`, kept if it is picked again).
    run_since: Vec<SimTime>,
    /// The still runnable vCPU just taken off each core, until the pick.
    prev: Vec<Option<VcpuId>>,
    /// Snapshots for `list_for_each_safe` walks in `csched_acct`.
    sdom_scratch: Vec<usize>,
    vcpu_scratch: Vec<VcpuId>,
    /// `_csched_cpu_pick` at ticks (off: no vCPU ever leaves a core by it).
    cpu_pick: bool,
    /// `cpu_core_map` as a socket number per core (cores split evenly and
    /// contiguously, as `host::Topology` does).
    socket_of: Vec<usize>,
    /// `csched_pcpu.idle_bias`: where the last pick through this core
    /// landed, so that picks rotate over a socket's idle cores.
    idle_bias: Vec<CoreId>,
    /// The migrating vCPU just taken off each core, until its pick.
    leaving: Vec<Option<VcpuId>>,
    /// Cores to tickle for vCPUs `vcpu_migrate` woke inside `pick` (which
    /// has no tickle output), handed out by `timer` at `pending_at`.
    pending: Vec<CoreId>,
    pending_at: SimTime,
    /// Scratch: `running` as the old core's pick left it; `pick_cpu`'s
    /// candidate cores and idle cores per socket.
    view_scratch: Vec<Option<VcpuId>>,
    cpus_scratch: Vec<CoreId>,
    idle_scratch: Vec<usize>,
}

impl Credit {
    pub fn new(p: &SchedulerParams) -> Self {
        let credits = |t: SimTime| to_i64(t) * CREDITS_PER_MSEC / NS_PER_MS;
        let credits_per_acct = credits(p.tick) * i64::from(p.ticks_per_acct);
        Credit {
            tslice: p.tslice,
            tick: p.tick,
            ticks_per_acct: p.ticks_per_acct.max(1),
            ratelimit: p.ratelimit,
            boost: p.boost,
            credits_per_acct,
            credits_per_tslice: credits(p.tslice),
            credit: credits_per_acct * p.cores as i64,
            credit_balance: 0,
            weight: 0,
            active_sdom: VecDeque::new(),
            vcpus: Vec::new(),
            doms: Vec::new(),
            runq: vec![Vec::new(); p.cores],
            ticks: 0,
            next_tick: p.tick,
            held: vec![None; p.cores],
            run_since: vec![SimTime::ZERO; p.cores],
            prev: vec![None; p.cores],
            sdom_scratch: Vec::new(),
            vcpu_scratch: Vec::new(),
            cpu_pick: p.cpu_pick,
            socket_of: (0..p.cores).map(|c| c / p.cores_per_socket()).collect(),
            // `NR_CPUS - 1`: the first cycle starts at the lowest core.
            idle_bias: vec![p.cores.saturating_sub(1); p.cores],
            leaving: vec![None; p.cores],
            pending: Vec::new(),
            pending_at: SimTime::MAX,
            view_scratch: Vec::new(),
            cpus_scratch: Vec::new(),
            idle_scratch: Vec::new(),
        }
    }

    fn may_run_on(&self, v: VcpuId, core: CoreId) -> bool {
        self.vcpus[v].affinity.binary_search(&core).is_ok()
    }

    /// `__runq_insert`: after every vCPU of equal or higher priority.
    fn runq_insert(&mut self, v: VcpuId) {
        let pri = self.vcpus[v].pri;
        let core = self.vcpus[v].processor;
        let vcpus = &self.vcpus;
        let q = &mut self.runq[core];
        let at = q
            .iter()
            .position(|&w| pri > vcpus[w].pri)
            .unwrap_or(q.len());
        q.insert(at, v);
        self.vcpus[v].state = State::Queued;
    }

    /// `__runq_remove`.
    fn runq_remove(&mut self, v: VcpuId) {
        let q = &mut self.runq[self.vcpus[v].processor];
        if let Some(at) = q.iter().position(|&w| w == v) {
            q.remove(at);
        }
    }

    /// `csched_runq_sort`: a stable move of UNDER/BOOST ahead of OVER.
    fn runq_sort(&mut self, core: CoreId) {
        let vcpus = &self.vcpus;
        let overs = &mut self.vcpu_scratch;
        overs.clear();
        self.runq[core].retain(|&v| {
            let over = vcpus[v].pri == Pri::Over;
            if over {
                overs.push(v);
            }
            !over
        });
        self.runq[core].append(overs);
    }

    /// `__runq_tickle` (3.4): the vCPU's core if it beats what runs there;
    /// and if that core is busy, every idle core the vCPU may run on, so it
    /// can steal it.
    fn runq_tickle(&self, v: VcpuId, running: &[Option<VcpuId>], tickle: &mut Vec<CoreId>) {
        let core = self.vcpus[v].processor;
        let cur = running[core].map_or(Pri::Idle, |c| self.vcpus[c].pri);
        if self.vcpus[v].pri > cur {
            push_once(tickle, core);
        }
        if cur > Pri::Idle {
            let svc = &self.vcpus[v];
            if svc.every_core {
                // The same cores in the same order, without the indirection;
                // an overcommitted host seldom has an idle core, and a
                // branch-free count finds that out cheaply.
                if running
                    .iter()
                    .map(|r| usize::from(r.is_none()))
                    .sum::<usize>()
                    == 0
                {
                    return;
                }
                for (c, r) in running.iter().enumerate() {
                    if r.is_none() {
                        push_once(tickle, c);
                    }
                }
                return;
            }
            for &c in &svc.affinity {
                if running[c].is_none() {
                    push_once(tickle, c);
                }
            }
        }
    }

    /// `burn_credits` (3.4): charge the exact run time since `start_time`,
    /// rounded to the nearest credit; the remainder is carried over.
    fn burn_credits(&mut self, v: VcpuId, now: SimTime) {
        let svc = &mut self.vcpus[v];
        let delta = to_i64(now) - svc.start_time;
        if delta <= 0 {
            return;
        }
        let credits = (delta * CREDITS_PER_MSEC + NS_PER_MS / 2) / NS_PER_MS;
        svc.credit -= credits;
        svc.start_time += credits * NS_PER_MS / CREDITS_PER_MSEC;
    }

    /// `__csched_vcpu_acct_start`: the vCPU (and its domain) become active.
    fn acct_start(&mut self, v: VcpuId) {
        let d = self.vcpus[v].sdom;
        self.vcpus[v].active = true;
        let sdom = &mut self.doms[d];
        if sdom.active_vcpu.is_empty() {
            self.active_sdom.push_front(d);
            self.weight += i64::from(sdom.weight);
        }
        sdom.active_vcpu.push_front(v);
    }

    /// `__csched_vcpu_acct_stop_locked`: it stops earning; its domain too
    /// once no vCPU of it is active.
    fn acct_stop(&mut self, v: VcpuId) {
        let d = self.vcpus[v].sdom;
        self.vcpus[v].active = false;
        let sdom = &mut self.doms[d];
        remove_item(&mut sdom.active_vcpu, v);
        if sdom.active_vcpu.is_empty() {
            remove_item(&mut self.active_sdom, d);
            self.weight -= i64::from(sdom.weight);
        }
    }

    /// `csched_vcpu_acct`, for the vCPU running on `core` at a tick.
    fn vcpu_acct(
        &mut self,
        v: VcpuId,
        core: CoreId,
        now: SimTime,
        running: &[Option<VcpuId>],
        pick: bool,
        tickle: &mut Vec<CoreId>,
    ) {
        // It consumes real CPU, so it no longer deserves BOOST.
        if self.vcpus[v].pri == Pri::Boost {
            self.vcpus[v].pri = Pri::Under;
        }
        self.burn_credits(v, now);
        if !self.vcpus[v].active {
            self.acct_start(v);
        } else if pick && self.pick_cpu(v, running, false) != core {
            // Active a while and better off elsewhere: `_VPF_migrating`
            // makes it unrunnable, so its core reschedules without it.
            self.vcpus[v].migrating = true;
            push_once(tickle, core);
        }
    }

    /// `_csched_cpu_pick` (Xen 3.4): the vCPU's current core, unless an idle
    /// core has more idle neighbours: on the other socket, more idle cores
    /// in that socket than in this one (counting this core as idle); in
    /// this socket, more idle SMT siblings (none here: every core is its
    /// own sibling group, so two cores of a socket always tie). It moves to
    /// the next idle core of the winning socket after that core's
    /// `idle_bias`; `commit` (the migration's pick, not the tick's) records
    /// it. `view[c]` is what core `c` runs (`None`: in `idlers`).
    fn pick_cpu(&mut self, v: VcpuId, view: &[Option<VcpuId>], commit: bool) -> CoreId {
        let aff = &self.vcpus[v].affinity;
        let p = self.vcpus[v].processor;
        let first = if aff.binary_search(&p).is_ok() {
            p
        } else {
            cycle(p, aff)
        };
        // `idlers` with `first` set; `cpus` = affinity ∩ idlers − {first}.
        let idle = |c: CoreId| c == first || view[c].is_none();
        if !aff.iter().any(|&c| c != first && idle(c)) {
            return first;
        }
        let mut cpus = std::mem::take(&mut self.cpus_scratch);
        cpus.clear();
        cpus.extend(aff.iter().copied().filter(|&c| c != first && idle(c)));
        let mut idle_in = std::mem::take(&mut self.idle_scratch);
        idle_in.clear();
        idle_in.resize(self.socket_of.last().map_or(1, |&s| s + 1), 0);
        for c in (0..view.len()).filter(|&c| idle(c)) {
            idle_in[self.socket_of[c]] += 1;
        }
        let mut cpu = first;
        while !cpus.is_empty() {
            let nxt = cycle(cpu, &cpus);
            let (sc, sn) = (self.socket_of[cpu], self.socket_of[nxt]);
            // Same socket: sibling groups of one core each, always a tie.
            let (weight_cpu, weight_nxt) = if sc == sn {
                (1, 1)
            } else {
                (idle_in[sc], idle_in[sn])
            };
            if weight_cpu < weight_nxt {
                // `cycle_cpu(idle_bias, nxt_idlers)`; Xen 3.4 cycles over
                // all of the socket's idlers, which may lie outside the
                // affinity: the model keeps to the affinity (a deviation
                // only for affinities that split a socket).
                let socket_of = &self.socket_of;
                let idlers = || {
                    aff.iter()
                        .copied()
                        .filter(|&c| socket_of[c] == sn && idle(c))
                };
                let bias = self.idle_bias[nxt];
                cpu = idlers()
                    .find(|&c| c > bias)
                    .or_else(|| idlers().next())
                    .expect("nxt is one of them");
                if commit {
                    self.idle_bias[nxt] = cpu;
                }
                // `cpus_andnot(cpus, cpus, cpu_sibling_map[cpu])`.
                cpus.retain(|&c| c != cpu);
            } else {
                // `cpus_andnot(cpus, cpus, nxt_idlers)`.
                let socket_wide = sc != sn;
                let socket_of = &self.socket_of;
                cpus.retain(|&c| {
                    if socket_wide {
                        socket_of[c] != sn
                    } else {
                        c != nxt
                    }
                });
            }
        }
        self.cpus_scratch = cpus;
        self.idle_scratch = idle_in;
        cpu
    }

    /// `vcpu_migrate`, once `core` (where `v` ran) has picked `snext`: the
    /// pick again, committing, with `core` as its pick left it; then
    /// `vcpu_wake` on the new core if it is still runnable.
    fn migrate(
        &mut self,
        now: SimTime,
        v: VcpuId,
        core: CoreId,
        snext: Option<VcpuId>,
        running: &[Option<VcpuId>],
    ) {
        let mut view = std::mem::take(&mut self.view_scratch);
        view.clear();
        view.extend_from_slice(running);
        view[core] = snext;
        self.vcpus[v].migrating = false;
        self.vcpus[v].processor = self.pick_cpu(v, &view, true);
        if self.vcpus[v].state == State::Migrating {
            self.vcpus[v].state = State::Blocked;
            let mut pending = std::mem::take(&mut self.pending);
            self.wake(now, v, &view, &mut pending);
            self.pending = pending;
            if !self.pending.is_empty() {
                self.pending_at = self.pending_at.min(now);
            }
        }
        self.view_scratch = view;
    }

    /// `vcpu_pause_nosync` of a capped-out vCPU (`csched_vcpu_sleep`).
    fn park(&mut self, v: VcpuId, tickle: &mut Vec<CoreId>) {
        self.vcpus[v].parked = true;
        match self.vcpus[v].state {
            // Its core reschedules; `deschedule` then finds it parked.
            State::Running => push_once(tickle, self.vcpus[v].processor),
            State::Queued => {
                self.runq_remove(v);
                self.vcpus[v].state = State::Paused;
            }
            State::Blocked | State::Paused | State::Migrating => {}
        }
    }

    /// `vcpu_unpause`: a parked vCPU that wants to run is woken, without
    /// BOOST (the flag is cleared only after the wake, as in Xen).
    fn unpark(&mut self, v: VcpuId, running: &[Option<VcpuId>], tickle: &mut Vec<CoreId>) {
        if self.vcpus[v].state == State::Paused {
            self.runq_insert(v);
            self.runq_tickle(v, running, tickle);
        }
        self.vcpus[v].parked = false;
    }

    /// `csched_acct`: hand out one period's credits to the active domains.
    fn acct(&mut self, running: &[Option<VcpuId>], tickle: &mut Vec<CoreId>) {
        let weight_total = self.weight;
        let mut credit_total = self.credit;
        // Converge the balance towards 0 when it drops negative.
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance;
        }
        if weight_total == 0 {
            self.credit_balance = 0;
            return;
        }
        let mut weight_left = weight_total;
        let mut credit_balance = 0;
        let mut credit_xtra = false;
        let mut credit_cap = 0;
        let mut sdoms = std::mem::take(&mut self.sdom_scratch);
        sdoms.clear();
        sdoms.extend(self.active_sdom.iter().copied());
        for &d in &sdoms {
            let weight = i64::from(self.doms[d].weight);
            let cap = i64::from(self.doms[d].cap);
            let nr_active = self.doms[d].active_vcpu.len() as i64;
            weight_left -= weight;

            // At most a domain may run all its active vCPUs for a whole
            // period, more only while the system-wide balance is negative.
            let mut credit_peak = nr_active * self.credits_per_acct;
            if self.credit_balance < 0 {
                credit_peak += (-self.credit_balance * weight + (weight_total - 1)) / weight_total;
            }
            if cap != 0 {
                credit_cap = (cap * self.credits_per_acct + 99) / 100;
                credit_peak = credit_peak.min(credit_cap);
                credit_cap = (credit_cap + (nr_active - 1)) / nr_active;
            }
            let mut credit_fair = (credit_total * weight + (weight_total - 1)) / weight_total;
            if credit_fair < credit_peak {
                credit_xtra = true;
            } else {
                // Give the other domains a chance at the unused credits.
                if weight_left != 0 {
                    credit_total += ((credit_fair - credit_peak) * weight_total
                        + (weight_left - 1))
                        / weight_left;
                }
                // Lazily keep domains with extra credits at the head.
                if credit_xtra {
                    remove_item(&mut self.active_sdom, d);
                    self.active_sdom.push_front(d);
                }
                credit_fair = credit_peak;
            }
            let credit_fair = (credit_fair + (nr_active - 1)) / nr_active;
            credit_balance += self.acct_dom(d, credit_fair, credit_cap, running, tickle);
        }
        self.sdom_scratch = sdoms;
        self.credit_balance = credit_balance;
    }

    /// The per-vCPU half of `csched_acct` for domain `d`; returns the
    /// domain's contribution to the credit balance.
    fn acct_dom(
        &mut self,
        d: usize,
        credit_fair: i64,
        credit_cap: i64,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) -> i64 {
        let capped = self.doms[d].cap != 0;
        let mut balance = 0;
        let mut svcs = std::mem::take(&mut self.vcpu_scratch);
        svcs.clear();
        svcs.extend(self.doms[d].active_vcpu.iter().copied());
        for &v in &svcs {
            self.vcpus[v].credit += credit_fair;
            let credit = self.vcpus[v].credit;
            if credit < 0 {
                self.vcpus[v].pri = Pri::Over;
                // Park vCPUs of capped-out domains.
                if capped && credit < -credit_cap && !self.vcpus[v].parked {
                    self.park(v, tickle);
                }
                // Lower bound on credits.
                self.vcpus[v].credit = credit.max(-self.credits_per_tslice);
            } else {
                self.vcpus[v].pri = Pri::Under;
                if self.vcpus[v].parked {
                    self.unpark(v, running, tickle);
                }
                // Upper bound: a vCPU that does not use its credit stops
                // earning (this is how idle domains become inactive).
                if credit > self.credits_per_tslice {
                    self.acct_stop(v);
                    self.vcpus[v].credit = 0;
                }
            }
            balance += self.vcpus[v].credit;
        }
        self.vcpu_scratch = svcs;
        balance
    }

    /// `csched_runq_steal`: the first vCPU queued on `peer` that beats `pri`
    /// and may run on `core`. The queue is (mostly) sorted, so the walk stops
    /// at the first one that does not beat `pri`.
    fn runq_steal(&mut self, peer: CoreId, core: CoreId, pri: Pri) -> Option<VcpuId> {
        let at = self.runq[peer]
            .iter()
            .take_while(|&&v| self.vcpus[v].pri > pri)
            .position(|&v| self.may_run_on(v, core))?;
        let v = self.runq[peer].remove(at);
        self.vcpus[v].processor = core;
        Some(v)
    }

    /// `csched_load_balance`: look at busy peers, starting with the next
    /// core, for work more urgent than `local`; else run `local`.
    fn load_balance(
        &mut self,
        core: CoreId,
        local: Option<VcpuId>,
        running: &[Option<VcpuId>],
    ) -> Option<VcpuId> {
        let pri = local.map_or(Pri::Idle, |v| self.vcpus[v].pri);
        let n = self.runq.len();
        for peer in (1..n).map(|i| (core + i) % n) {
            // An idle peer is about to pick up its own work.
            if running[peer].is_none() {
                continue;
            }
            if let Some(v) = self.runq_steal(peer, core, pri) {
                return Some(v);
            }
        }
        pop_front(&mut self.runq[core])
    }

    /// A ratelimit hold (Xen 4.2+ `csched_schedule`): keep `v` for the rest
    /// of its minimum run, unless it got parked meanwhile.
    fn resume_held(&mut self, now: SimTime, core: CoreId, v: VcpuId) -> Option<Pick> {
        let ran = now.saturating_sub(self.run_since[core]);
        let left = self.ratelimit.saturating_sub(ran);
        if self.vcpus[v].parked {
            self.vcpus[v].state = State::Paused;
            return None;
        }
        if left == SimTime::ZERO {
            self.runq_insert(v);
            return None;
        }
        self.vcpus[v].start_time += to_i64(now);
        Some(Pick {
            vcpu: Some(v),
            slice: left,
        })
    }

    /// `v` becomes current on `core` for a full slice; `prev` was there
    /// just before.
    fn start(&mut self, now: SimTime, core: CoreId, v: VcpuId, prev: Option<VcpuId>) -> Pick {
        debug_assert!(self.may_run_on(v, core));
        let svc = &mut self.vcpus[v];
        svc.state = State::Running;
        svc.processor = core;
        svc.start_time += to_i64(now);
        // No context switch if it continues: its run goes on.
        if prev != Some(v) {
            self.run_since[core] = now;
        }
        Pick {
            vcpu: Some(v),
            slice: self.tslice,
        }
    }
}

impl Scheduler for Credit {
    /// `csched_dom_init` + `csched_vcpu_init`: credit 0, UNDER, inactive.
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.vcpus.len());
        if self.doms.len() <= spec.domain {
            self.doms.resize_with(spec.domain + 1, CschedDom::default);
        }
        let sdom = &mut self.doms[spec.domain];
        // Xen refuses weight 0; keep the sums well defined.
        sdom.weight = spec.weight.max(1);
        sdom.cap = spec.cap;
        let processor = if spec.affinity.contains(&spec.initial_core) {
            spec.initial_core
        } else {
            spec.affinity[0]
        };
        self.vcpus.push(CschedVcpu {
            sdom: spec.domain,
            affinity: spec.affinity.clone(),
            every_core: spec.affinity.iter().copied().eq(0..self.runq.len()),
            processor,
            credit: 0,
            start_time: 0,
            pri: Pri::Under,
            parked: false,
            active: false,
            migrating: false,
            state: State::Blocked,
        });
    }

    /// `csched_vcpu_wake`: UNDER vCPUs get BOOST (not parked ones), go on
    /// the queue of the core they last ran on, and tickle.
    fn wake(
        &mut self,
        _now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let svc = &mut self.vcpus[v];
        // Already running or queued: nothing to do (`vcpu_wake_running`,
        // `vcpu_wake_onrunq`).
        if svc.state != State::Blocked {
            return;
        }
        // A paused vCPU is not runnable: `vcpu_wake` does not call us.
        if svc.parked {
            svc.state = State::Paused;
            return;
        }
        if self.boost && svc.pri == Pri::Under {
            svc.pri = Pri::Boost;
        }
        self.runq_insert(v);
        self.runq_tickle(v, running, tickle);
    }

    /// The first half of `csched_schedule`: charge the vCPU, then requeue it
    /// if it is still runnable. A yield is a plain reschedule in Xen 3.4 (no
    /// `CSCHED_FLAG_VCPU_YIELD` yet): the vCPU goes back behind vCPUs of
    /// equal priority only, so it gives way to those and to higher ones.
    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, _ran: SimTime, why: Leave) {
        debug_assert_eq!(self.vcpus[v].processor, core);
        self.burn_credits(v, now);
        self.vcpus[v].start_time -= to_i64(now);
        let rate_limited = self.ratelimit > SimTime::ZERO
            && now.saturating_sub(self.run_since[core]) < self.ratelimit;
        self.prev[core] = (why != Leave::Blocked).then_some(v);
        if self.vcpus[v].migrating {
            // `context_saved` calls `vcpu_migrate` after this core's pick.
            self.leaving[core] = Some(v);
        }
        match why {
            Leave::Blocked => self.vcpus[v].state = State::Blocked,
            _ if self.vcpus[v].parked => self.vcpus[v].state = State::Paused,
            // Not runnable while `_VPF_migrating` is set: not requeued here.
            _ if self.vcpus[v].migrating => self.vcpus[v].state = State::Migrating,
            // Xen 4.2's ratelimit: a preempted vCPU that ran less than the
            // limit keeps the core (pick hands it back). Yields are not held.
            Leave::Preempted if rate_limited => self.held[core] = Some(v),
            Leave::Preempted | Leave::Yielded => self.runq_insert(v),
        }
    }

    /// The second half of `csched_schedule`: the local head if it is UNDER
    /// or BOOST; otherwise (OVER or nothing) try to steal better work.
    fn pick(&mut self, now: SimTime, core: CoreId, running: &[Option<VcpuId>]) -> Pick {
        let prev = self.prev[core].take();
        if let Some(v) = self.held[core].take() {
            if let Some(p) = self.resume_held(now, core, v) {
                // A held vCPU left without `_VPF_migrating`: nothing leaves.
                debug_assert!(self.leaving[core].is_none());
                return p;
            }
        }
        let head = self.runq[core].first().copied();
        let snext = match head {
            Some(v) if self.vcpus[v].pri > Pri::Over => pop_front(&mut self.runq[core]),
            local => self.load_balance(core, local, running),
        };
        if let Some(v) = self.leaving[core].take() {
            self.migrate(now, v, core, snext, running);
        }
        match snext {
            Some(v) => self.start(now, core, v, prev),
            None => Pick {
                vcpu: None,
                slice: SimTime::MAX,
            },
        }
    }

    fn next_timer(&self) -> SimTime {
        self.next_tick.min(self.pending_at)
    }

    /// The master ticker (`csched_acct`) when due, then every core's
    /// `csched_tick`: charge the running vCPU and sort the run queue.
    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        _ran_so_far: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        // Tickles of vCPUs that `vcpu_migrate` woke inside a pick.
        if now >= self.pending_at {
            self.pending_at = SimTime::MAX;
            for c in self.pending.drain(..) {
                push_once(tickle, c);
            }
        }
        if now < self.next_tick {
            return;
        }
        debug_assert_eq!(now, self.next_tick);
        self.next_tick = now + self.tick;
        self.ticks += 1;
        let acct_due = self.ticks == self.ticks_per_acct;
        if acct_due {
            self.ticks = 0;
            self.acct(running, tickle);
        }
        // With no idle core every pick keeps its vCPU where it is.
        let pick = self.cpu_pick && running.contains(&None);
        for (core, &cur) in running.iter().enumerate() {
            if let Some(v) = cur {
                self.vcpu_acct(v, core, now, running, pick, tickle);
            }
            // Xen sorts once per accounting period, after `csched_acct`.
            if acct_due {
                self.runq_sort(core);
            }
        }
    }

    /// A futile yield leaves every run queue as it was (the yielding vCPU
    /// is queued and taken back; had `pick` stolen anything, it would not
    /// be futile): only the yielding vCPU's own debit moved.
    fn folds_futile_yields(&self) -> bool {
        true
    }

    /// A yield that came straight back: `deschedule` burned the credits
    /// and queued `v`, `pick` found it at the head of its core's queue (or
    /// nothing to steal) and restarted it for a full slice. Nothing else
    /// moved since, so the next yield finds the same queues and does the
    /// same, and the only thing that depends on the instant is the debit.
    /// Burns compose: every burn keeps `credit * 100 000 + start_time`
    /// (ns) and leaves the uncharged rest within ±half a credit of the
    /// instant, so the burn at the last yield alone gives the same
    /// `credit` and `start_time` as one at each of them.
    fn repeat_futile_yields(
        &mut self,
        core: CoreId,
        v: VcpuId,
        first: SimTime,
        every: SimTime,
        n: u64,
    ) -> Option<SimTime> {
        let svc = &self.vcpus[v];
        let settled = svc.state == State::Running
            && svc.processor == core
            && !svc.migrating
            && !svc.parked
            && self.held[core].is_none()
            && self.prev[core].is_none()
            && self.leaving[core].is_none();
        if !settled || n == 0 {
            return None;
        }
        let last = SimTime::from_ns(first.as_ns() + every.as_ns() * (n - 1));
        self.burn_credits(v, last);
        Some(self.tslice)
    }
}

fn to_i64(t: SimTime) -> i64 {
    i64::try_from(t.as_ns()).expect("SimTime beyond i64 nanoseconds")
}

/// `cycle_cpu`: the first core of `set` (ascending) after `n`, wrapping.
fn cycle(n: CoreId, set: &[CoreId]) -> CoreId {
    set.iter().copied().find(|&c| c > n).unwrap_or(set[0])
}

fn push_once(tickle: &mut Vec<CoreId>, core: CoreId) {
    if !tickle.contains(&core) {
        tickle.push(core);
    }
}

fn pop_front(q: &mut Vec<VcpuId>) -> Option<VcpuId> {
    (!q.is_empty()).then(|| q.remove(0))
}

fn remove_item<T: PartialEq>(list: &mut VecDeque<T>, item: T) {
    if let Some(at) = list.iter().position(|x| *x == item) {
        list.remove(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::SedfParams;

    fn spec(domain: usize, weight: u32, cap: u32, affinity: &[CoreId], core: CoreId) -> VcpuSpec {
        VcpuSpec {
            domain,
            weight,
            cap,
            affinity: affinity.to_vec(),
            initial_core: core,
            sedf: SedfParams {
                period: SimTime::from_ms(100),
                slice: SimTime::ZERO,
                extratime: true,
            },
        }
    }

    /// A minimal engine: every awake vCPU is always busy; it keeps
    /// `running[]`, honours tickles at once and runs slices and ticks.
    struct Engine {
        s: Credit,
        now: SimTime,
        running: Vec<Option<VcpuId>>,
        picked_at: Vec<SimTime>,
        slice_end: Vec<SimTime>,
        cpu: Vec<SimTime>,
        tickle: Vec<CoreId>,
    }

    impl Engine {
        fn new(p: &SchedulerParams, specs: &[VcpuSpec]) -> Self {
            let mut s = Credit::new(p);
            for (v, sp) in specs.iter().enumerate() {
                s.add_vcpu(v, sp);
            }
            Engine {
                s,
                now: SimTime::ZERO,
                running: vec![None; p.cores],
                picked_at: vec![SimTime::ZERO; p.cores],
                slice_end: vec![SimTime::MAX; p.cores],
                cpu: vec![SimTime::ZERO; specs.len()],
                tickle: Vec::new(),
            }
        }

        fn wake(&mut self, v: VcpuId) {
            let mut tickle = std::mem::take(&mut self.tickle);
            self.s.wake(self.now, v, &self.running, &mut tickle);
            self.tickle = tickle;
            self.honour_tickles();
        }

        fn honour_tickles(&mut self) {
            while !self.tickle.is_empty() {
                let core = self.tickle.remove(0);
                self.redecide(core, Leave::Preempted);
            }
        }

        /// Takes the current vCPU off `core` (if any) and picks again.
        fn redecide(&mut self, core: CoreId, why: Leave) {
            if let Some(v) = self.running[core].take() {
                let ran = self.now - self.picked_at[core];
                self.cpu[v] += ran;
                self.s.deschedule(self.now, core, v, ran, why);
            }
            let p = self.s.pick(self.now, core, &self.running);
            if let Some(v) = p.vcpu {
                assert!(self.s.vcpus[v].affinity.contains(&core));
                assert!(!self.running.contains(&Some(v)));
            }
            self.running[core] = p.vcpu;
            self.picked_at[core] = self.now;
            self.slice_end[core] = self.now.saturating_add(p.slice);
        }

        fn run_until(&mut self, end: SimTime) {
            loop {
                let next_slice = self.slice_end.iter().copied().min().unwrap();
                let t = next_slice.min(self.s.next_timer());
                if t > end {
                    break;
                }
                self.now = t;
                if self.s.next_timer() == t {
                    let ran: Vec<SimTime> = self.picked_at.iter().map(|&p| t - p).collect();
                    let mut tickle = std::mem::take(&mut self.tickle);
                    self.s.timer(t, &self.running, &ran, &mut tickle);
                    self.tickle = tickle;
                    self.honour_tickles();
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
        fn cpu_time(&self, v: VcpuId) -> SimTime {
            let current = self.running.iter().position(|&r| r == Some(v));
            let extra = current.map_or(SimTime::ZERO, |c| self.now - self.picked_at[c]);
            self.cpu[v] + extra
        }

        fn runq_empty(&self) -> bool {
            self.s.runq.iter().all(Vec::is_empty)
        }
    }

    fn ms(t: SimTime) -> u64 {
        t.as_ns() / 1_000_000
    }

    #[test]
    fn equal_weights_alternate_slices() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.wake(0);
        e.wake(1);
        assert_eq!(e.running[0], Some(0));
        e.run_until(SimTime::from_ms(30));
        assert_eq!(e.running[0], Some(1), "the peer gets the next slice");
        e.run_until(SimTime::from_s(3));
        let (a, b) = (ms(e.cpu_time(0)), ms(e.cpu_time(1)));
        assert_eq!(a + b, 3000);
        assert!(
            a.abs_diff(1500) <= 30 && b.abs_diff(1500) <= 30,
            "{a} ms vs {b} ms"
        );
    }

    #[test]
    fn weights_split_cpu_in_proportion() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 512, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.wake(0);
        e.wake(1);
        e.run_until(SimTime::from_s(60));
        let (a, b) = (ms(e.cpu_time(0)), ms(e.cpu_time(1)));
        // 2:1 within 10%.
        assert!((18 * b..=22 * b).contains(&(10 * a)), "{a} ms vs {b} ms");
    }

    #[test]
    fn waking_vcpu_is_boosted_and_preempts() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.wake(0);
        // Past the first tick, so vCPU 0 has lost its wake-up BOOST.
        e.run_until(SimTime::from_ms(15));
        assert_eq!(e.s.vcpus[0].pri, Pri::Under);
        let mut tickle = Vec::new();
        e.s.wake(e.now, 1, &e.running, &mut tickle);
        assert_eq!(tickle, vec![0], "its core is tickled");
        assert_eq!(e.s.vcpus[1].pri, Pri::Boost);
        e.tickle = tickle;
        e.honour_tickles();
        assert_eq!(e.running[0], Some(1));
    }

    #[test]
    fn no_boost_without_the_knob() {
        let mut p = SchedulerParams::xen_defaults(1);
        p.boost = false;
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.wake(0);
        e.run_until(SimTime::from_ms(15));
        e.wake(1);
        assert_eq!(
            e.running[0],
            Some(0),
            "an UNDER waker does not preempt an UNDER vCPU"
        );
    }

    #[test]
    fn idle_core_steals_when_affinity_allows() {
        let p = SchedulerParams::xen_defaults(2);
        let both = [0, 1];
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &both, 0), spec(2, 256, 0, &both, 0)]);
        e.wake(0);
        e.wake(1);
        // vCPU 1 woke on busy core 0; idle core 1 was tickled and stole one.
        assert!(e.running[0].is_some() && e.running[1].is_some());
        assert!(e.runq_empty());
        let stolen = e.running[1].unwrap();
        assert_eq!(e.s.vcpus[stolen].processor, 1);
    }

    #[test]
    fn idle_core_does_not_steal_against_affinity() {
        let p = SchedulerParams::xen_defaults(2);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.wake(0);
        e.wake(1);
        e.redecide(1, Leave::Preempted);
        assert_eq!(e.running[1], None);
        assert_eq!(e.s.runq[0].len(), 1);
    }

    #[test]
    fn cap_limits_a_busy_vcpu() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 50, &[0], 0)]);
        e.wake(0);
        let mut idle_seen = false;
        let mut t = SimTime::ZERO;
        while t < SimTime::from_s(6) {
            t += SimTime::from_ms(5);
            e.run_until(t);
            idle_seen |= e.running[0].is_none();
        }
        assert!(idle_seen, "a parked vCPU leaves its core idle");
        let share = ms(e.cpu_time(0));
        assert!(share.abs_diff(3000) <= 120, "{share} ms of 6000");
    }

    #[test]
    fn yield_gives_way_to_equal_priority_only() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        // Alone: the yielder is picked again.
        e.wake(0);
        e.now = SimTime::from_ms(1);
        e.redecide(0, Leave::Yielded);
        assert_eq!(e.running[0], Some(0));
        // Both BOOST (woken, no tick yet): the yielder gives way.
        e.wake(1);
        assert_eq!(e.running[0], Some(0));
        e.now = SimTime::from_ms(2);
        e.redecide(0, Leave::Yielded);
        assert_eq!(e.running[0], Some(1));
        // vCPU 1 BOOST yields to an UNDER peer: it keeps the core.
        e.s.vcpus[0].pri = Pri::Under;
        e.now = SimTime::from_ms(3);
        e.redecide(0, Leave::Yielded);
        assert_eq!(e.running[0], Some(1));
    }

    #[test]
    fn idle_domain_becomes_inactive() {
        let p = SchedulerParams::xen_defaults(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0)]);
        e.wake(0);
        e.run_until(SimTime::from_ms(15));
        assert!(e.s.vcpus[0].active, "charged at a tick, so active");
        e.redecide(0, Leave::Blocked);
        e.run_until(SimTime::from_ms(300));
        assert!(!e.s.vcpus[0].active);
        assert_eq!(e.s.weight, 0);
        assert!(e.s.active_sdom.is_empty());
        assert_eq!(e.s.vcpus[0].credit, 0);
    }

    #[test]
    fn ratelimit_delays_preemption() {
        let mut p = SchedulerParams::xen_defaults(1);
        p.ratelimit = SimTime::from_ms(1);
        let mut e = Engine::new(&p, &[spec(1, 256, 0, &[0], 0), spec(2, 256, 0, &[0], 0)]);
        e.run_until(SimTime::from_ms(20));
        e.wake(0);
        e.s.vcpus[0].pri = Pri::Under;
        e.now = SimTime::from_us(20_400);
        e.wake(1);
        assert_eq!(e.running[0], Some(0), "ran only 400 us: kept");
        assert_eq!(e.slice_end[0], SimTime::from_ms(21));
        e.run_until(SimTime::from_ms(21));
        assert_eq!(e.running[0], Some(1), "preempted once its 1 ms is over");
        assert_eq!(e.cpu_time(0), SimTime::from_ms(1));
    }

    fn pick_params(cores: usize, sockets: usize, on: bool) -> SchedulerParams {
        let mut p = SchedulerParams::xen_defaults(cores);
        p.sockets = sockets;
        p.cpu_pick = on;
        p
    }

    /// Two busy vCPUs of one domain on cores 0 and 1, free to run anywhere.
    fn two_busy(p: &SchedulerParams) -> Engine {
        let all: Vec<CoreId> = (0..p.cores).collect();
        let mut e = Engine::new(p, &[spec(1, 256, 0, &all, 0), spec(1, 256, 0, &all, 1)]);
        e.wake(0);
        e.wake(1);
        assert_eq!((e.running[0], e.running[1]), (Some(0), Some(1)));
        e
    }

    #[test]
    fn cpu_pick_moves_a_running_vcpu_to_the_idle_socket() {
        // Sockets {0, 1} and {2, 3}. At 10 ms both vCPUs become active; at
        // 20 ms each counts 1 idle core on its socket (itself) against 2 on
        // the other: vCPU 0 moves to core 2 (the first after `idle_bias`).
        // vCPU 1's migration pick then sees cores 0 and 1 idle against 2
        // and 3 (core 2 stays in `idlers` until it schedules): a tie, so it
        // is woken back on core 1.
        let mut e = two_busy(&pick_params(4, 2, true));
        e.run_until(SimTime::from_ms(15));
        assert_eq!(
            (e.running[0], e.running[1]),
            (Some(0), Some(1)),
            "first tick: no pick"
        );
        e.run_until(SimTime::from_ms(25));
        assert_eq!(e.running, vec![None, Some(1), Some(0), None]);
        assert_eq!(e.s.vcpus[0].processor, 2);
        assert_eq!(e.s.idle_bias[2], 2, "the migration's pick commits");
        // Balanced: one busy core per socket, so nothing moves again.
        e.run_until(SimTime::from_s(1));
        assert_eq!(e.running, vec![None, Some(1), Some(0), None]);
        assert_eq!(e.cpu_time(0) + e.cpu_time(1), SimTime::from_ms(2000));
    }

    #[test]
    fn cpu_pick_never_moves_a_vcpu_on_one_socket_without_smt() {
        // Xen compares sibling groups inside a socket: one core each, a tie.
        let mut e = two_busy(&pick_params(4, 1, true));
        for ms in (5..1000).step_by(5) {
            e.run_until(SimTime::from_ms(ms));
            assert_eq!(e.running, vec![Some(0), Some(1), None, None], "at {ms} ms");
        }
        assert!(e.tickle.is_empty() && e.s.pending.is_empty());
    }

    #[test]
    fn without_cpu_pick_a_vcpu_stays_on_a_busy_socket() {
        let mut e = two_busy(&pick_params(4, 2, false));
        e.run_until(SimTime::from_s(1));
        assert_eq!(e.running, vec![Some(0), Some(1), None, None]);
    }

    #[test]
    fn cpu_pick_keeps_to_the_affinity() {
        // Pinned to socket 0's cores: the idle socket is out of reach.
        let p = pick_params(4, 2, true);
        let mut e = Engine::new(
            &p,
            &[spec(1, 256, 0, &[0, 1], 0), spec(1, 256, 0, &[0, 1], 1)],
        );
        e.wake(0);
        e.wake(1);
        e.run_until(SimTime::from_s(1));
        assert_eq!(e.running, vec![Some(0), Some(1), None, None]);
    }

    #[test]
    fn cpu_pick_prefers_the_socket_with_more_idle_cores() {
        // Sockets of 4: {0..3} busy with vCPU 0 on core 0 and two others,
        // {4..7} with one busy core. Asked directly (no commit): 1 + 1
        // idle against 3, so core 0's vCPU goes to socket 1's first idle
        // core after `idle_bias` (core 4 is busy: core 5).
        let p = pick_params(8, 2, true);
        let all: Vec<CoreId> = (0..8).collect();
        let mut s = Credit::new(&p);
        s.add_vcpu(0, &spec(1, 256, 0, &all, 0));
        let view = [Some(0), Some(1), Some(2), None, Some(3), None, None, None];
        assert_eq!(s.pick_cpu(0, &view, false), 5);
        assert_eq!(s.idle_bias[5], 7, "no commit: unchanged");
        // Equal counts (2 and 2): it stays.
        let view = [
            Some(0),
            Some(1),
            Some(2),
            None,
            Some(3),
            Some(4),
            None,
            None,
        ];
        assert_eq!(s.pick_cpu(0, &view, false), 0);
        // Committed picks rotate over the socket's idle cores.
        let view = [Some(0), Some(1), Some(2), Some(3), None, None, None, None];
        assert_eq!(s.pick_cpu(0, &view, true), 4);
        assert_eq!(s.idle_bias[4], 4);
        assert_eq!(s.pick_cpu(0, &view, true), 5);
    }

    /// Builds the same two-core history every time: vCPU 0 alone on core 0
    /// (UNDER), vCPUs 1 and 2 (one domain, weight 256) sharing core 1, so
    /// accounting runs and credits move; ends at `until`.
    fn futile_history(until: SimTime) -> Engine {
        let p = SchedulerParams::xen_defaults(2);
        let specs = [
            spec(0, 256, 0, &[0], 0),
            spec(1, 256, 0, &[1], 1),
            spec(1, 256, 0, &[1], 1),
        ];
        let mut e = Engine::new(&p, &specs);
        for v in 0..3 {
            e.wake(v);
        }
        e.run_until(until);
        e
    }

    #[test]
    fn folded_futile_yields_leave_the_state_of_yields_one_by_one() {
        // Several phases against the 100 us credit and the 10 ms tick, and
        // windows that do and do not divide them.
        for (start_ns, every_ns, n) in [
            (21_000_003, 7_777, 1000),
            (41_250_000, 10_000, 800),
            (52_000_001, 49_999, 150),
            (70_123_456, 1_000_001, 2),
        ] {
            let start = SimTime::from_ns(start_ns);
            let every = SimTime::from_ns(every_ns);
            let mut one = futile_history(start);
            let mut fold = futile_history(start);
            // Nothing else happens meanwhile: no tick, no slice end on core 1.
            let end = start + SimTime::from_ns(every_ns * n);
            assert!(end < one.s.next_timer() && end < one.slice_end[1], "case {start_ns}");
            // The yield that comes straight back, then n more one by one.
            for e in [&mut one, &mut fold] {
                e.redecide(0, Leave::Yielded);
                assert_eq!(e.running[0], Some(0), "nothing else may run on core 0");
            }
            for i in 1..=n {
                one.now = start + SimTime::from_ns(every_ns * i);
                one.redecide(0, Leave::Yielded);
                assert_eq!(one.running[0], Some(0));
            }
            let first = start + every;
            let slice = fold.s.repeat_futile_yields(0, 0, first, every, n);
            assert_eq!(slice, Some(fold.s.tslice));
            assert_eq!(format!("{:?}", one.s), format!("{:?}", fold.s), "at {start_ns} ns");
            // And they go on alike (ticks, accounting, the next yield).
            for e in [&mut one, &mut fold] {
                e.now = start + SimTime::from_ns(every_ns * n);
                e.picked_at[0] = e.now;
                e.slice_end[0] = e.now + e.s.tslice;
                e.run_until(start + SimTime::from_ms(35));
                e.redecide(0, Leave::Yielded);
            }
            assert_eq!(format!("{:?}", one.s), format!("{:?}", fold.s), "after {start_ns} ns");
        }
    }

    #[test]
    fn folding_refuses_a_vcpu_that_is_not_settled_on_its_core() {
        let mut e = futile_history(SimTime::from_ms(5));
        // vCPU 1 or 2 is queued on core 1, not running on core 0.
        let queued = if e.running[1] == Some(1) { 2 } else { 1 };
        let t = SimTime::from_ms(5);
        assert_eq!(e.s.repeat_futile_yields(1, queued, t, t, 3), None);
        assert_eq!(e.s.repeat_futile_yields(1, 0, t, t, 3), None, "vCPU 0 runs on core 0");
    }
}
