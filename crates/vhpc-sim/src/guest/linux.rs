//! A CFS-like guest scheduler (Linux 3.x/4.x `kernel/sched/fair.c`): tasks
//! move between the vCPUs of their domain at wake-up (`select_task_rq_fair`:
//! `wake_affine`, then `select_idle_sibling`), when a vCPU's run queue
//! empties (`idle_balance`) and periodically per scheduling-domain level
//! (`rebalance_domains` / `load_balance`).
//!
//! Loads are run-queue lengths (every task weighs the same, nice 0) rather
//! than PELT's decayed averages; the running task is never pushed away
//! (no active balancing). Both are simplifications, stated in docs/sim.md.

use crate::hypervisor::VcpuId;
use crate::time::SimTime;

use super::domains::{self, Level, Topology, BUSY_FACTOR};
use super::{GuestOps, GuestScheduler, Why};

/// One domain's vCPUs and levels.
#[derive(Debug)]
struct Dom {
    first: VcpuId,
    n: u32,
    levels: Vec<Level>,
}

/// Per vCPU and level: `sd->balance_interval`, `sd->last_balance`,
/// `sd->nr_balance_failed`.
#[derive(Debug, Clone, Copy)]
struct LevelState {
    interval_ms: u64,
    last: SimTime,
    failed: u32,
}

#[derive(Debug)]
pub struct Linux {
    doms: Vec<Dom>,
    /// vCPU -> index in `doms`.
    dom_of: Vec<u32>,
    /// vCPU -> its levels' states (one per level of its domain).
    state: Vec<Vec<LevelState>>,
    /// `rq->avg_idle` and `rq->idle_stamp` per vCPU.
    avg_idle: Vec<u64>,
    idle_stamp: Vec<Option<SimTime>>,
    migration_cost: u64,
    tick: SimTime,
}

impl Linux {
    /// `domains`: (first vCPU, vCPUs) per domain, in id order.
    pub fn new(
        domains: &[(VcpuId, u32)],
        topo: Topology,
        flat: bool,
        migration_cost: SimTime,
        tick: SimTime,
    ) -> Linux {
        let mut s = Linux {
            doms: Vec::new(),
            dom_of: Vec::new(),
            state: Vec::new(),
            avg_idle: Vec::new(),
            idle_stamp: Vec::new(),
            migration_cost: migration_cost.as_ns(),
            tick,
        };
        for (d, &(first, n)) in domains.iter().enumerate() {
            let levels = if n > 1 {
                domains::levels(n, topo, flat)
            } else {
                Vec::new()
            };
            for _ in 0..n {
                s.dom_of.push(d as u32);
                s.state.push(
                    levels
                        .iter()
                        .map(|l| LevelState {
                            interval_ms: l.min_interval_ms,
                            last: SimTime::ZERO,
                            failed: 0,
                        })
                        .collect(),
                );
                // A new rq starts at twice the migration cost (sched_init).
                s.avg_idle.push(2 * s.migration_cost);
                s.idle_stamp.push(None);
            }
            s.doms.push(Dom { first, n, levels });
        }
        s
    }

    fn dom(&self, v: VcpuId) -> &Dom {
        &self.doms[self.dom_of[v] as usize]
    }

    /// The lowest level whose span holds both `a` and `b` (local indices).
    fn lowest_common(levels: &[Level], a: u32, b: u32) -> Option<usize> {
        levels
            .iter()
            .position(|l| l.span_start(a) == l.span_start(b))
    }

    /// `wake_wide` (fair.c, 3.12 to 4.2): no affine pull when the wakee
    /// switches wakees more often than the cache domain has vCPUs and the
    /// waker switches more than that many times as often (a 1:N waker such
    /// as make).
    fn wake_wide(llc_size: u32, waker_flips: u32, wakee_flips: u32) -> bool {
        wakee_flips > llc_size && waker_flips > llc_size * wakee_flips
    }

    /// `wake_affine` with unit loads: pull the wakee to the waker's vCPU
    /// unless that is loaded beyond `prev`'s by half the level's imbalance.
    fn wake_affine(level: &Level, this_load: u32, prev_load: u32, sync: bool) -> bool {
        let this_load = if sync {
            this_load.saturating_sub(1)
        } else {
            this_load
        };
        if this_load == 0 {
            return true;
        }
        let prev_pct = 100 + (level.imbalance_pct - 100) / 2;
        100 * u64::from(this_load + 1) <= u64::from(prev_pct) * u64::from(prev_load)
    }

    /// `select_idle_sibling`: `target` if idle; else `prev` if it shares a
    /// cache with target and is idle; else the first wholly idle group of
    /// the last-level-cache domain and the levels below it; else `target`.
    fn select_idle_sibling(dom: &Dom, ops: &dyn GuestOps, target: u32, prev: u32) -> u32 {
        let idle = |i: u32| ops.nr_running(dom.first + i as usize) == 0;
        if idle(target) {
            return target;
        }
        let llc = dom.levels.iter().rposition(|l| l.share_cache);
        let Some(llc) = llc else {
            return target; // no cache domain (flat): no search
        };
        let shares = dom.levels[llc].span_start(prev) == dom.levels[llc].span_start(target);
        if prev != target && shares && idle(prev) {
            return prev;
        }
        for level in dom.levels[..=llc].iter().rev() {
            let start = level.span_start(target);
            // Groups from the target's own (sd->groups) onwards, wrapping.
            let groups = level.span / level.group;
            let own = (target - start) / level.group;
            for k in 0..groups {
                let g = start + (own + k) % groups * level.group;
                let cpus = g..g + level.group;
                if cpus.clone().all(|i| i != target && idle(i)) {
                    return g;
                }
            }
        }
        target
    }

    /// `load_balance` of vCPU `this` (local index) at `level`: pull from the
    /// busiest vCPU of the busiest other group when that group is loaded
    /// beyond the local one by the level's imbalance. Whether a task moved.
    fn load_balance(
        &mut self,
        d: usize,
        li: usize,
        this: u32,
        ops: &mut dyn GuestOps,
        why: Why,
    ) -> bool {
        let dom = &self.doms[d];
        let level = &dom.levels[li];
        let first = dom.first;
        let nr = |ops: &dyn GuestOps, i: u32| ops.nr_running(first + i as usize);
        let start = level.span_start(this);
        let local = level.group_start(this);
        let group_load = |ops: &dyn GuestOps, g: u32| -> u64 {
            (g..g + level.group)
                .map(|i| u64::from(nr(ops, i)))
                .sum::<u64>()
                * 1024
                / u64::from(level.group)
        };
        let local_avg = group_load(ops, local);
        let mut busiest: Option<(u64, u32)> = None;
        let mut g = start;
        while g < start + level.span {
            let movable = (g..g + level.group).any(|i| nr(ops, i) >= 2);
            if g != local && movable {
                let avg = group_load(ops, g);
                if busiest.map_or(true, |(b, _)| avg > b) {
                    busiest = Some((avg, g));
                }
            }
            g += level.group;
        }
        let Some((busiest_avg, bg)) = busiest else {
            return false;
        };
        let this_idle = nr(ops, this) == 0;
        if busiest_avg <= local_avg
            || (!this_idle && 100 * busiest_avg <= u64::from(level.imbalance_pct) * local_avg)
        {
            return false;
        }
        let src = (bg..bg + level.group)
            .max_by_key(|&i| (nr(ops, i), std::cmp::Reverse(i)))
            .expect("a group has vCPUs");
        let hot = self.state[first + this as usize][li].failed > level.cache_nice_tries;
        let mut moved = false;
        while nr(ops, src) > nr(ops, this) + 1 {
            if !ops.migrate(first + src as usize, first + this as usize, hot, why) {
                break;
            }
            moved = true;
        }
        let st = &mut self.state[first + this as usize][li];
        st.failed = if moved { 0 } else { st.failed + 1 };
        moved
    }

    /// `should_we_balance`: in the local group, the first idle vCPU
    /// balances for all, or the first vCPU when none is idle.
    fn should_we_balance(dom: &Dom, level: &Level, ops: &dyn GuestOps, this: u32) -> bool {
        let g = level.group_start(this);
        let idle = (g..g + level.group).find(|&i| ops.nr_running(dom.first + i as usize) == 0);
        idle.unwrap_or(g) == this
    }
}

impl GuestScheduler for Linux {
    fn select_wake(
        &mut self,
        ops: &dyn GuestOps,
        prev: VcpuId,
        waker: Option<VcpuId>,
        sync: bool,
        flips: (u32, u32),
    ) -> VcpuId {
        let dom = self.dom(prev);
        if dom.levels.is_empty() {
            return prev;
        }
        let p = (prev - dom.first) as u32;
        let this = waker.map_or(p, |w| (w - dom.first) as u32);
        let mut target = p;
        let llc_size = dom
            .levels
            .iter()
            .rfind(|l| l.share_cache)
            .map_or(1, |l| l.span);
        if this != p && !Self::wake_wide(llc_size, flips.0, flips.1) {
            if let Some(li) = Self::lowest_common(&dom.levels, this, p) {
                let level = &dom.levels[li];
                let load = |i: u32| ops.nr_running(dom.first + i as usize);
                if Self::wake_affine(level, load(this), load(p), sync) {
                    target = this;
                }
            }
        }
        dom.first + Self::select_idle_sibling(dom, ops, target, p) as usize
    }

    fn newidle(&mut self, _now: SimTime, ops: &mut dyn GuestOps, v: VcpuId) -> bool {
        // idle_balance: not worth it when this rq's idle periods are short.
        if self.avg_idle[v] < self.migration_cost {
            return false;
        }
        let d = self.dom_of[v] as usize;
        let this = (v - self.doms[d].first) as u32;
        (0..self.doms[d].levels.len()).any(|li| self.load_balance(d, li, this, ops, Why::NewIdle))
    }

    fn idle_start(&mut self, now: SimTime, v: VcpuId) {
        self.idle_stamp[v] = Some(now);
    }

    fn idle_end(&mut self, now: SimTime, v: VcpuId) {
        // ttwu_do_wakeup's update of avg_idle, capped at twice the cost.
        let Some(since) = self.idle_stamp[v].take() else {
            return;
        };
        let delta = (now - since).as_ns();
        let max = 2 * self.migration_cost;
        let avg = self.avg_idle[v];
        self.avg_idle[v] = if avg > max {
            max
        } else if delta >= avg {
            avg + (delta - avg) / 8
        } else {
            avg - (avg - delta) / 8
        };
    }

    fn tick(&self) -> SimTime {
        self.tick
    }

    fn balance(&mut self, now: SimTime, ops: &mut dyn GuestOps) {
        for d in 0..self.doms.len() {
            let (first, n) = (self.doms[d].first, self.doms[d].n);
            if self.doms[d].levels.is_empty() {
                continue;
            }
            // NOHZ: idle vCPUs are balanced (by the idle load balancer)
            // only when some vCPU has more than one runnable task.
            let overloaded = (0..n).any(|i| ops.nr_running(first + i as usize) >= 2);
            for i in 0..n {
                let v = first + i as usize;
                let busy = ops.nr_running(v) > 0;
                if (busy && !ops.on_core(v)) || (!busy && !overloaded) {
                    continue;
                }
                for li in 0..self.doms[d].levels.len() {
                    let st = self.state[v][li];
                    let factor = if ops.nr_running(v) > 0 {
                        BUSY_FACTOR
                    } else {
                        1
                    };
                    let due = st.last + SimTime::from_ms(st.interval_ms * factor);
                    if now < due {
                        continue;
                    }
                    self.state[v][li].last = now;
                    let dom = &self.doms[d];
                    if !Self::should_we_balance(dom, &dom.levels[li], ops, i) {
                        continue;
                    }
                    let moved = self.load_balance(d, li, i, ops, Why::Periodic);
                    let level = &self.doms[d].levels[li];
                    let st = &mut self.state[v][li];
                    // Balanced: back off up to max_interval; moved: reset.
                    st.interval_ms = if moved {
                        level.min_interval_ms
                    } else {
                        (st.interval_ms * 2).min(2 * level.min_interval_ms)
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run-queue lengths only; migrations move one unit of load.
    struct Fake {
        nr: Vec<u32>,
        moves: Vec<(VcpuId, VcpuId)>,
    }

    impl GuestOps for Fake {
        fn nr_running(&self, v: VcpuId) -> u32 {
            self.nr[v]
        }
        fn on_core(&self, _: VcpuId) -> bool {
            true
        }
        fn migrate(&mut self, src: VcpuId, dst: VcpuId, _hot: bool, _why: Why) -> bool {
            if self.nr[src] < 2 {
                return false;
            }
            self.nr[src] -= 1;
            self.nr[dst] += 1;
            self.moves.push((src, dst));
            true
        }
    }

    const DOM0: Topology = Topology {
        smt: 2,
        llc: 8,
        numa_nodes: 1,
    };

    fn sched(flat: bool) -> Linux {
        Linux::new(
            &[(0, 16)],
            DOM0,
            flat,
            SimTime::from_us(500),
            SimTime::from_ms(4),
        )
    }

    #[test]
    fn hierarchical_wake_searches_the_cache_domain_flat_does_not() {
        // Waker on 0 (busy), wakee last ran on 9 (other cache, busy).
        let mut nr = vec![0; 16];
        nr[0] = 1;
        nr[9] = 1;
        let ops = Fake { nr, moves: vec![] };
        // Sync wake from a lone waker: affine to 0, busy; 0's core sibling
        // 1 is idle but its group {0,1} is not wholly idle: the first
        // wholly idle core of the cache, {2,3}.
        assert_eq!(sched(false).select_wake(&ops, 9, Some(0), true, (0, 0)), 2);
        // Flat: no cache domain, the wakee queues on the waker's vCPU.
        assert_eq!(sched(true).select_wake(&ops, 9, Some(0), true, (0, 0)), 0);
    }

    #[test]
    fn an_idle_previous_sibling_is_kept() {
        let mut nr = vec![0; 16];
        nr[0] = 1;
        let ops = Fake { nr, moves: vec![] };
        assert_eq!(sched(false).select_wake(&ops, 1, Some(0), true, (0, 0)), 1);
        assert_eq!(sched(true).select_wake(&ops, 1, Some(0), true, (0, 0)), 0);
        // A timer wake-up (no waker) of a task whose vCPU is idle stays.
        assert_eq!(sched(true).select_wake(&ops, 5, None, false, (0, 0)), 5);
    }

    #[test]
    fn a_one_to_many_waker_does_not_pull_its_wakees() {
        let mut nr = vec![0; 16];
        nr[0] = 1;
        nr[9] = 1;
        let ops = Fake { nr, moves: vec![] };
        // Flat (cache domain of 1): a wakee that flips more than once and a
        // waker flipping more than that: no affine pull, it stays.
        assert_eq!(sched(true).select_wake(&ops, 9, Some(0), true, (5, 2)), 9);
        assert_eq!(sched(true).select_wake(&ops, 9, Some(0), true, (2, 2)), 0);
    }

    #[test]
    fn periodic_balancing_spreads_n_tasks_over_n_vcpus() {
        for flat in [false, true] {
            let mut s = sched(flat);
            let mut nr = vec![0; 16];
            nr[0] = 16;
            let mut ops = Fake { nr, moves: vec![] };
            let mut now = SimTime::ZERO;
            for _ in 0..2000 {
                now += SimTime::from_ms(4);
                s.balance(now, &mut ops);
            }
            assert_eq!(ops.nr, vec![1; 16], "flat={flat}");
        }
    }

    #[test]
    fn newidle_pulls_only_after_long_idle_periods() {
        let mut s = sched(true);
        let mut nr = vec![0; 16];
        nr[3] = 2;
        let mut ops = Fake { nr, moves: vec![] };
        assert!(s.newidle(SimTime::ZERO, &mut ops, 0));
        assert_eq!(ops.moves, vec![(3, 0)]);
        // Short idle periods drive avg_idle below the migration cost.
        for k in 0..40 {
            let t = SimTime::from_us(100 * k);
            s.idle_start(t, 5);
            s.idle_end(t + SimTime::from_us(10), 5);
        }
        ops.nr[3] = 2;
        assert!(!s.newidle(SimTime::ZERO, &mut ops, 5));
    }
}
