//! Gang (co-)scheduling: all runnable vCPUs of a domain run at the same time
//! or not at all, in turns of `tslice`; with `skew > 0`, VMware's relaxed
//! co-scheduling (ESX 3.x–4.x) lets a vCPU run ahead of its waiting siblings
//! by at most `skew`.
//!
//! The model:
//!
//! * Turns. Every `tslice` (or as soon as no domain of the turn has a
//!   runnable vCPU left) a new turn starts. Its lead domain is, among those
//!   with a runnable vCPU, the one whose last turn (as lead or packed) is
//!   oldest, ties in domain order after the previous lead (`by_weight`: the
//!   one with the least turn time per weight, a waking domain not behind the
//!   others). The lead gets a core for each runnable vCPU (running vCPUs keep
//!   their cores, the others take a free core they may use, their last one
//!   first, least progressed vCPU first).
//! * Packing. Then, in domain order after the lead, every other domain whose
//!   runnable vCPUs *all* fit on the cores still free joins the turn; a
//!   domain whose runnable vCPUs all fit on unreserved cores also joins in
//!   mid-turn when one of its vCPUs wakes.
//! * Strict (`skew = 0`). A core reserved for a vCPU that blocked stays idle
//!   (or goes to a runnable sibling that had no core); cores no domain of
//!   the turn uses stay idle; a vCPU that wakes in its domain's turn takes
//!   its core back or a free one. If there is none, the lead takes the cores
//!   of the last domain packed beside it (which leaves the turn), and a
//!   packed domain leaves the turn itself (co-stop): a domain never runs
//!   while one of its vCPUs waits for a core.
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
    /// The last turn it ran in (0: none yet).
    last_turn: u64,
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
            self.doms[d].last_turn = self.turns;
            self.turn.push(d);
        }
        taken
    }

    /// The domain to lead the next turn, if any has a runnable vCPU.
    fn next_lead(&self) -> Option<usize> {
        let n = self.doms.len();
        let order = (0..n).map(|i| (self.next_lead + i) % n);
        let ready = order.filter(|&d| self.runnable(d).next().is_some());
        if self.p.by_weight {
            ready.min_by_key(|&d| self.doms[d].vtime)
        } else {
            ready.min_by_key(|&d| self.doms[d].last_turn)
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

    /// Strict: `v` woke in its domain's turn and finds no core. The lead
    /// takes one from the last domain packed beside it (which leaves the
    /// turn); a packed domain leaves the turn itself (co-stop), so that no
    /// domain runs while one of its vCPUs waits.
    fn no_core_in_turn(&mut self, v: VcpuId, tickle: &mut Vec<CoreId>) {
        let d = self.vcpus[v].domain;
        let victim = if self.turn[0] == d {
            let aff = &self.vcpus[v].affinity;
            self.turn[1..].iter().rev().copied().find(|&e| {
                aff.iter()
                    .any(|&c| self.reserved[c].is_some_and(|r| self.vcpus[r].domain == e))
            })
        } else {
            Some(d)
        };
        let Some(e) = victim else { return };
        self.turn.retain(|&x| x != e);
        self.doms[e].in_turn = false;
        for c in 0..self.reserved.len() {
            if let Some(r) = self.reserved[c].filter(|&r| self.vcpus[r].domain == e) {
                self.reserved[c] = None;
                self.vcpus[r].reserved = None;
                tickle.push(c);
            }
        }
        if e != d {
            let c = self.vcpus[v]
                .affinity
                .iter()
                .copied()
                .find(|&c| self.reserved[c].is_none())
                .expect("the evicted domain held a core it may use");
            self.reserved[c] = Some(v);
            self.vcpus[v].reserved = Some(c);
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
                last_turn: 0,
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
            match own(self) {
                Some(c) if running[c] != Some(v) => tickle.push(c),
                Some(_) => {}
                None if !self.relaxed() => self.no_core_in_turn(v, tickle),
                None => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::test_spec;
    use crate::hypervisor::testbed::Bed;

    /// `doms[i]` vCPUs for domain i, each allowed on every core.
    fn bed(cores: usize, doms: &[usize], skew_us: u64, weights: &[u32]) -> Bed<Gang> {
        let mut p = SchedulerParams::xen_defaults(cores);
        p.gang.skew = SimTime::from_us(skew_us);
        p.gang.by_weight = !weights.is_empty();
        let all: Vec<CoreId> = (0..cores).collect();
        let specs: Vec<VcpuSpec> = doms
            .iter()
            .enumerate()
            .flat_map(|(d, &n)| {
                let w = weights.get(d).copied().unwrap_or(256);
                (0..n).map(move |_| d).map(move |d| (d, w))
            })
            .map(|(d, w)| test_spec(d, w, 0, all.clone()))
            .collect();
        let mut b = Bed::new(Gang::new(&p), cores, &specs);
        for v in 0..specs.len() {
            b.wake(v);
        }
        b
    }

    fn domains_running(b: &Bed<Gang>) -> Vec<Option<usize>> {
        b.running
            .iter()
            .map(|r| r.map(|v| b.s.vcpus[v].domain))
            .collect()
    }

    #[test]
    fn strict_runs_a_whole_domain_at_a_time_in_turn() {
        let mut b = bed(2, &[2, 2], 0, &[]);
        for step in 1..=48 {
            assert!(b.running.iter().all(Option::is_some));
            let doms = domains_running(&b);
            assert_eq!(doms[0], doms[1], "at {:?}: {doms:?}", b.now);
            b.run_until(SimTime::from_ms(5 * step));
        }
        // Every run of a vCPU starts and ends with its sibling's.
        for &(_, v, start, end) in &b.runs {
            let sib = v ^ 1;
            assert!(
                b.runs
                    .iter()
                    .any(|&(_, w, s, e)| w == sib && s == start && e == end),
                "vCPU {v} ran {start:?}..{end:?} alone"
            );
        }
        let a = b.cpu_time(0) + b.cpu_time(1);
        assert_eq!(a, SimTime::from_ms(240), "half of 2 cores × 240 ms");
    }

    #[test]
    fn strict_leaves_a_blocked_vcpus_core_idle() {
        let mut b = bed(2, &[2, 2], 0, &[]);
        b.run_until(SimTime::from_ms(1));
        let c = b.core_of(1).unwrap();
        b.block(c);
        assert_eq!(b.running[c], None, "domain 1 may not fill its core");
        b.run_until(SimTime::from_ms(2));
        assert_eq!(b.running[c], None);
        b.wake(1);
        assert_eq!(b.running[c], Some(1), "it gets its core back");
    }

    #[test]
    fn a_turn_ends_early_when_its_domain_blocks() {
        let mut b = bed(2, &[2, 2], 0, &[]);
        b.run_until(SimTime::from_ms(1));
        let (c0, c1) = (b.core_of(0).unwrap(), b.core_of(1).unwrap());
        b.block(c0);
        b.block(c1);
        assert_eq!(domains_running(&b), vec![Some(1), Some(1)]);
        assert_eq!(b.s.turns, 2);
    }

    #[test]
    fn small_domains_are_packed_onto_free_cores() {
        // Domains of 1, 1 and 2 vCPUs on 2 cores: 0 and 1 share a turn.
        let mut b = bed(2, &[1, 1, 2], 0, &[]);
        let mut doms = domains_running(&b);
        doms.sort();
        assert_eq!(doms, vec![Some(0), Some(1)]);
        b.run_until(SimTime::from_ms(31));
        assert_eq!(domains_running(&b), vec![Some(2), Some(2)]);
    }

    #[test]
    fn turns_by_weight() {
        let mut b = bed(1, &[1, 1], 0, &[512, 256]);
        b.run_until(SimTime::from_ms(900));
        let (x, y) = (b.cpu_time(0).as_ns(), b.cpu_time(1).as_ns());
        assert_eq!((x, y), (600_000_000, 300_000_000));
    }

    #[test]
    fn relaxed_fills_an_idle_core_within_the_skew() {
        let skew = SimTime::from_ms(2);
        let mut b = bed(3, &[2, 2], 2000, &[]);
        let mut t = SimTime::ZERO;
        while t < SimTime::from_ms(600) {
            t += SimTime::from_us(250);
            b.run_until(t);
            for d in 0..2 {
                let (x, y) = (b.cpu_time(2 * d), b.cpu_time(2 * d + 1));
                let gap = x.max(y) - x.min(y);
                assert!(gap <= skew, "domain {d} skewed by {gap:?} at {t:?}");
            }
        }
        let busy = SimTime::from_ns((0..4).map(|v| b.cpu_time(v).as_ns()).sum());
        // Strict would leave one core of three idle; relaxed keeps it busy.
        assert!(busy > SimTime::from_ms(1700), "{busy:?} of 1800 ms");
    }

    #[test]
    fn strict_leaves_a_core_idle_that_no_whole_domain_fits() {
        let mut b = bed(3, &[2, 2], 0, &[]);
        b.run_until(SimTime::from_ms(600));
        let busy = SimTime::from_ns((0..4).map(|v| b.cpu_time(v).as_ns()).sum());
        assert_eq!(busy, SimTime::from_ms(1200));
    }
}
