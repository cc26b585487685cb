//! Gang (co-)scheduling: all runnable vCPUs of a domain run at the same time
//! or not at all, in turns of `tslice`; with `skew > 0`, VMware's relaxed
//! co-scheduling (ESX 3.x–4.x) lets a vCPU run ahead of its waiting siblings
//! by at most `skew`.
//!
//! The model:
//!
//! * Turns. Every `tslice` (or as soon as no domain of the turn has a
//!   runnable vCPU left) a new turn starts. Its lead domain is the next one in
//!   turn after the previous lead that has a runnable vCPU (`by_weight`: the
//!   one with the least CPU-turn time per weight, a waking domain not behind
//!   the others). The lead gets a core for each runnable vCPU (its running
//!   vCPUs keep their cores, the others take a free core they may use, their
//!   last one first, least progressed vCPU first).
//! * Packing. Then, in turn order after the lead, every other domain whose
//!   runnable vCPUs *all* fit on the cores still free joins the turn; a
//!   domain whose vCPUs all fit on unreserved cores also joins in mid-turn
//!   when one of its vCPUs wakes. A domain is never split across turns.
//! * Strict (`skew = 0`). A core reserved for a vCPU that blocked stays idle
//!   (or goes to a runnable sibling that had no core); cores no domain of
//!   the turn uses stay idle; a vCPU that wakes in its domain's turn takes
//!   its core back or a free one; the others wait for a turn.
//! * Relaxed (`skew > 0`). Each vCPU has a progress clock that runs while it
//!   runs or is blocked (halted vCPUs make progress, as in VMware) and stops
//!   while it is runnable but not running. A vCPU may run only while it is
//!   less than `skew` ahead of the slowest runnable sibling (`co-stop`
//!   beyond that); its slice ends when it would get `skew` ahead. Cores left
//!   idle by the turn (free, or reserved by a blocked vCPU) are filled by
//!   runnable vCPUs of other domains under that rule, least progressed first,
//!   and a reserved vCPU that wakes takes its core back at once.
//! * A domain with more runnable vCPUs than cores, or with pins that collide,
//!   runs those that fit; the rest wait for a later turn (strict) or take
//!   turns within the bound (relaxed).
//!
//! Not modelled: VMware's per-vCPU skew sampling period (every 2 ms) and
//! co-start of a whole domain when its lagging vCPU is picked; switch costs
//! beyond the engine's vCPU switch.

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

/// The gang scheduler's own settings (scenario: `[hypervisor.gang]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GangParams {
    /// Most a vCPU may run ahead of a waiting sibling; 0 = strict.
    pub skew: SimTime,
    /// Turns in proportion to domain weights, not in turn.
    pub by_weight: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Blocked,
    /// Runnable, not running.
    Ready,
    Running,
}

#[derive(Debug)]
struct GVcpu {
    domain: usize,
    affinity: Vec<CoreId>,
    state: State,
    /// The core it runs on or last ran on.
    last: Option<CoreId>,
    /// Progress clock up to `since`.
    progress: u64,
    since: SimTime,
    /// The core the current turn holds for it.
    reserved: Option<CoreId>,
}

#[derive(Debug)]
struct GDom {
    weight: u64,
    vcpus: Vec<VcpuId>,
    /// Turn time per weight (by_weight), in ns × 2^16 / weight.
    vtime: u128,
    in_turn: bool,
}

#[derive(Debug)]
pub struct Gang {
    slice: SimTime,
    p: GangParams,
    vcpus: Vec<GVcpu>,
    doms: Vec<GDom>,
    /// Per core: the vCPU the turn holds it for.
    reserved: Vec<Option<VcpuId>>,
    /// Domains of the current turn, lead first.
    turn: Vec<usize>,
    turn_start: SimTime,
    turn_end: SimTime,
    /// Where the search for the next lead starts.
    next_lead: usize,
    /// Turns started so far.
    pub turns: u64,
}

impl Gang {
    pub fn new(p: &SchedulerParams) -> Self {
        Gang {
            slice: p.tslice,
            p: p.gang,
            vcpus: Vec::new(),
            doms: Vec::new(),
            reserved: vec![None; p.cores],
            turn: Vec::new(),
            turn_start: SimTime::ZERO,
            turn_end: SimTime::MAX,
            next_lead: 0,
            turns: 0,
        }
    }

    fn relaxed(&self) -> bool {
        self.p.skew > SimTime::ZERO
    }

    /// Brings `v`'s progress clock to `now` before its state changes.
    fn settle(&mut self, v: VcpuId, now: SimTime) {
        let g = &mut self.vcpus[v];
        if g.state != State::Ready {
            g.progress += now.saturating_sub(g.since).as_ns();
        }
        g.since = now;
    }

    fn progress(&self, v: VcpuId, now: SimTime) -> u64 {
        let g = &self.vcpus[v];
        let extra = if g.state == State::Ready {
            0
        } else {
            now.saturating_sub(g.since).as_ns()
        };
        g.progress + extra
    }

    /// How long runnable `v` may run now before it gets `skew` ahead of its
    /// slowest waiting sibling; `None` if it is that far ahead already
    /// (co-stopped). Strict mode: no limit.
    fn allowance(&self, v: VcpuId, now: SimTime) -> Option<SimTime> {
        if !self.relaxed() {
            return Some(SimTime::MAX);
        }
        let d = self.vcpus[v].domain;
        let slowest = self.doms[d]
            .vcpus
            .iter()
            .filter(|&&u| u != v && self.vcpus[u].state == State::Ready)
            .map(|&u| self.progress(u, now))
            .min();
        let Some(slowest) = slowest else {
            return Some(SimTime::MAX);
        };
        let ahead = self.progress(v, now) as i128 - slowest as i128;
        let left = self.p.skew.as_ns() as i128 - ahead;
        (left > 0).then(|| SimTime::from_ns(left as u64))
    }

    fn runnable(&self, d: usize) -> impl Iterator<Item = VcpuId> + '_ {
        self.doms[d]
            .vcpus
            .iter()
            .copied()
            .filter(|&v| self.vcpus[v].state != State::Blocked)
    }

    /// Cores for every runnable vCPU of `d` among `free` (running ones keep
    /// their own core, the others take their last core or the lowest one
    /// they may use, least progressed first). With `all`, either every one
    /// fits or nothing is placed.
    fn place(&mut self, d: usize, now: SimTime, all: bool) -> Vec<(VcpuId, CoreId)> {
        let mut vs: Vec<VcpuId> = self.runnable(d).collect();
        vs.sort_by_key(|&v| {
            (
                self.vcpus[v].state != State::Running,
                self.progress(v, now),
                v,
            )
        });
        let mut taken = Vec::new();
        for v in vs {
            let g = &self.vcpus[v];
            let free =
                |c: CoreId| self.reserved[c].is_none() && !taken.iter().any(|&(_, t)| t == c);
            let core = if g.state == State::Running {
                g.last.filter(|&c| free(c))
            } else {
                g.last
                    .filter(|&c| free(c) && g.affinity.contains(&c))
                    .or_else(|| g.affinity.iter().copied().find(|&c| free(c)))
            };
            match core {
                Some(c) => taken.push((v, c)),
                None if all => return Vec::new(),
                None => {}
            }
        }
        for &(v, c) in &taken {
            self.reserved[c] = Some(v);
            self.vcpus[v].reserved = Some(c);
        }
        if !taken.is_empty() {
            self.doms[d].in_turn = true;
            self.turn.push(d);
        }
        taken
    }

    /// The domain to lead the next turn, if any has a runnable vCPU.
    fn next_lead(&self) -> Option<usize> {
        let n = self.doms.len();
        let order = (0..n).map(|i| (self.next_lead + i) % n);
        let mut ready = order.filter(|&d| self.runnable(d).next().is_some());
        if self.p.by_weight {
            ready.min_by_key(|&d| self.doms[d].vtime)
        } else {
            ready.next()
        }
    }

    /// Ends the current turn and starts the next; tickles every core whose
    /// vCPU must change (and, relaxed, every idle core: it may backfill).
    fn begin_turn(&mut self, now: SimTime, running: &[Option<VcpuId>], tickle: &mut Vec<CoreId>) {
        let held = now.saturating_sub(self.turn_start).as_ns() as u128;
        for d in std::mem::take(&mut self.turn) {
            self.doms[d].in_turn = false;
            self.doms[d].vtime += (held << 16) / self.doms[d].weight as u128;
        }
        for r in &mut self.reserved {
            if let Some(v) = r.take() {
                self.vcpus[v].reserved = None;
            }
        }
        self.turn_start = now;
        self.turn_end = SimTime::MAX;
        if let Some(lead) = self.next_lead() {
            self.turns += 1;
            self.turn_end = now.saturating_add(self.slice);
            self.next_lead = (lead + 1) % self.doms.len();
            self.place(lead, now, false);
            let n = self.doms.len();
            for d in (1..n).map(|i| (lead + i) % n) {
                if !self.doms[d].in_turn && self.runnable(d).next().is_some() {
                    self.place(d, now, true);
                }
            }
        }
        for (c, &r) in running.iter().enumerate() {
            if r != self.reserved[c] || (self.relaxed() && r.is_none()) {
                tickle.push(c);
            }
        }
    }

    /// No domain of the turn has a runnable vCPU left.
    fn turn_idle(&self) -> bool {
        self.turn.iter().all(|&d| self.runnable(d).next().is_none())
    }

    /// What `core` runs now: its reserved vCPU; else a sibling of the turn
    /// without a core (which takes the reservation); else (relaxed) a vCPU
    /// of another domain, least progressed first, domains in turn order.
    fn choose(&mut self, now: SimTime, core: CoreId) -> Option<(VcpuId, SimTime)> {
        let ok = |s: &Self, v: VcpuId| {
            s.vcpus[v].state == State::Ready && s.vcpus[v].affinity.contains(&core)
        };
        if let Some(v) = self.reserved[core].filter(|&v| ok(self, v)) {
            if let Some(a) = self.allowance(v, now) {
                return Some((v, a));
            }
        }
        let mut best: Option<(u64, VcpuId, SimTime)> = None;
        for &d in &self.turn {
            for &v in &self.doms[d].vcpus {
                if !ok(self, v) || self.vcpus[v].reserved.is_some() {
                    continue;
                }
                if let Some(a) = self.allowance(v, now) {
                    let p = self.progress(v, now);
                    if best.map_or(true, |b| p < b.0) {
                        best = Some((p, v, a));
                    }
                }
            }
        }
        if let Some((_, v, a)) = best {
            if let Some(old) = self.reserved[core] {
                self.vcpus[old].reserved = None;
            }
            self.reserved[core] = Some(v);
            self.vcpus[v].reserved = Some(core);
            return Some((v, a));
        }
        if !self.relaxed() {
            return None;
        }
        let n = self.doms.len();
        let lead = self.turn.first().copied().unwrap_or(self.next_lead);
        for d in (0..n).map(|i| (lead + i) % n) {
            if self.doms[d].in_turn {
                continue;
            }
            let pick = self.doms[d]
                .vcpus
                .iter()
                .copied()
                .filter(|&v| ok(self, v))
                .filter_map(|v| {
                    self.allowance(v, now)
                        .map(|a| (self.progress(v, now), v, a))
                })
                .min();
            if let Some((_, v, a)) = pick {
                return Some((v, a));
            }
        }
        None
    }
}

impl Scheduler for Gang {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.vcpus.len());
        while self.doms.len() <= spec.domain {
            self.doms.push(GDom {
                weight: u64::from(spec.weight.max(1)),
                vcpus: Vec::new(),
                vtime: 0,
                in_turn: false,
            });
        }
        self.doms[spec.domain].vcpus.push(v);
        self.vcpus.push(GVcpu {
            domain: spec.domain,
            affinity: spec.affinity.clone(),
            state: State::Blocked,
            last: None,
            progress: 0,
            since: SimTime::ZERO,
            reserved: None,
        });
    }

    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        if self.vcpus[v].state != State::Blocked {
            return;
        }
        let d = self.vcpus[v].domain;
        let was_idle = self.runnable(d).next().is_none();
        self.settle(v, now);
        self.vcpus[v].state = State::Ready;
        if was_idle && self.p.by_weight {
            // A domain back from sleep starts level with the others.
            let floor = (0..self.doms.len())
                .filter(|&e| e != d && self.runnable(e).next().is_some())
                .map(|e| self.doms[e].vtime)
                .min();
            if let Some(f) = floor {
                self.doms[d].vtime = self.doms[d].vtime.max(f);
            }
        }
        if self.turn.is_empty() {
            return self.begin_turn(now, running, tickle);
        }
        let own = |s: &Self| {
            let g = &s.vcpus[v];
            g.reserved
                .or_else(|| {
                    g.affinity
                        .iter()
                        .copied()
                        .find(|&c| s.reserved[c].is_none())
                })
                .or_else(|| {
                    g.affinity.iter().copied().find(|&c| {
                        s.reserved[c].is_some_and(|r| r != v && s.vcpus[r].state == State::Blocked)
                    })
                })
        };
        if self.doms[d].in_turn {
            if let Some(c) = own(self) {
                if running[c] != Some(v) {
                    tickle.push(c);
                }
            }
        } else {
            // Joins the turn if its runnable vCPUs fit on unreserved cores.
            for (_, c) in self.place(d, now, true) {
                tickle.push(c);
            }
        }
        if self.relaxed() {
            // Idle cores may take it; its running siblings' bounds changed.
            let aff = &self.vcpus[v].affinity;
            tickle.extend(aff.iter().copied().filter(|&c| running[c].is_none()));
            for &u in &self.doms[d].vcpus {
                if let (State::Running, Some(c)) = (self.vcpus[u].state, self.vcpus[u].last) {
                    tickle.push(c);
                }
            }
        }
    }

    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, _ran: SimTime, why: Leave) {
        self.settle(v, now);
        self.vcpus[v].last = Some(core);
        self.vcpus[v].state = if why == Leave::Blocked {
            State::Blocked
        } else {
            State::Ready
        };
        // Work conservation: a turn nobody can use ends now.
        if why == Leave::Blocked && !self.turn.is_empty() && self.turn_idle() {
            self.turn_end = now;
        }
    }

    fn pick(&mut self, now: SimTime, core: CoreId, _running: &[Option<VcpuId>]) -> Pick {
        match self.choose(now, core) {
            Some((v, allowance)) => {
                self.settle(v, now);
                let g = &mut self.vcpus[v];
                g.state = State::Running;
                g.last = Some(core);
                Pick {
                    vcpu: Some(v),
                    slice: allowance,
                }
            }
            None => Pick {
                vcpu: None,
                slice: SimTime::MAX,
            },
        }
    }

    fn next_timer(&self) -> SimTime {
        self.turn_end
    }

    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        _ran: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        if now >= self.turn_end {
            self.begin_turn(now, running, tickle);
        }
    }
}
