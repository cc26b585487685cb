//! Concurrency throttling per parallel loop (`jobs.throttle`), the run-time
//! half of brief S4's "Xen-adapt": an OpenMP-style job's runtime runs each
//! parallel loop on as many of its threads as make that loop fastest.
//!
//! A parallel loop is a compute step inside the program's iteration loop;
//! each pass through it is an instance, which every thread of the team
//! begins (threads share the loop's work: a thread's step is its part of an
//! even split). An instance run by `k` of the `team` threads gives threads
//! `0..k` a part `team / k` times their own and the others nothing: they go
//! on at once, to the next loop or to the barrier that closes the iteration,
//! where they wait as the job's wait policy says (and, with a hint policy,
//! give their cores up).
//! An instance takes from the last thread's start to the last thread's end
//! of its part: the loop's own work, also where no barrier separates it from
//! the loop before (a thread with no part there starts early). The decision
//! for an instance is taken when its first thread begins it and holds for
//! the whole team; the barrier at the end of each iteration (every
//! OpenMP-style workload has one) keeps the team in step.
//!
//! Policies, chosen by name:
//!
//! * `search`: the runtime measures, loop by loop, one instance at the whole
//!   team, then one thread fewer each instance while that is faster than
//!   every instance before it; from the first one that is not, the loop runs
//!   on the fastest count seen. Each try costs what it costs: a loop with
//!   few instances pays its search in full.

use std::mem::size_of;

use super::{Engine, Role, TaskId};
use crate::scenario::Scenario;
use crate::time::SimTime;

/// A registered throttling policy.
#[derive(Debug, Clone, Copy)]
pub struct ThrottlePolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
}

/// Every throttling policy, by name.
pub const THROTTLE_POLICIES: &[ThrottlePolicyInfo] = &[ThrottlePolicyInfo {
    name: "search",
    description: "per parallel loop: one instance on the whole team, then one thread fewer \
                  each instance while that is faster than all before; then the fastest count",
}];

pub fn by_name(name: &str) -> Option<&'static ThrottlePolicyInfo> {
    THROTTLE_POLICIES.iter().find(|p| p.name == name)
}

pub fn names() -> Vec<&'static str> {
    THROTTLE_POLICIES.iter().map(|p| p.name).collect()
}

/// What the report says about one parallel loop of a throttled job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoopReport {
    /// The loop's step in the rank's program.
    pub step: u32,
    /// Instances begun.
    pub instances: u64,
    /// The thread count the search settled on (None: still searching).
    pub threads: Option<u32>,
    /// Each measured try: (threads, how long the instance took, ns).
    pub tried: Vec<(u32, u64)>,
}

/// One instance under way.
#[derive(Debug, Clone, Copy)]
struct Instance {
    index: u64,
    threads: u32,
    /// When its last thread so far began.
    start: SimTime,
    /// Threads that have not finished their part yet.
    left: u32,
}

/// The `search` state of one parallel loop.
#[derive(Debug, Clone, Default)]
struct LoopCtl {
    begun: u64,
    current: Option<Instance>,
    /// The count the next instance tries while searching.
    next_try: u32,
    best: Option<u32>,
    tried: Vec<(u32, u64)>,
}

impl LoopCtl {
    fn learn(&mut self, threads: u32, took: u64) {
        let faster = self.tried.iter().all(|&(_, t)| took < t);
        self.tried.push((threads, took));
        if faster && threads > 1 {
            self.next_try = threads - 1;
        } else {
            // The fastest try; of equal ones, the one with more threads.
            let &(k, _) = self
                .tried
                .iter()
                .min_by_key(|&&(k, t)| (t, std::cmp::Reverse(k)))
                .expect("just pushed");
            self.best = Some(k);
        }
    }
}

/// One throttled job's controller.
#[derive(Debug)]
pub(super) struct Controller {
    team: u32,
    /// Per program step (only loop steps are used).
    loops: Vec<LoopCtl>,
    /// Per rank, per step: instances of that loop the thread has begun.
    seen: Vec<Vec<u64>>,
    /// Per rank: the loop instance its current part belongs to.
    open: Vec<Option<(usize, u64)>>,
}

impl Controller {
    /// Bytes a controller of `team` threads over `steps` steps holds (the
    /// memory estimate's; the tries, a few per loop, are left out).
    pub(super) fn bytes(team: u64, steps: u64) -> u64 {
        let per_rank = steps * size_of::<u64>() as u64 + size_of::<Vec<u64>>() as u64;
        steps * size_of::<LoopCtl>() as u64
            + team * (per_rank + size_of::<Option<(usize, u64)>>() as u64)
    }

    pub(super) fn new(team: u32, steps: usize) -> Self {
        Controller {
            team,
            loops: vec![
                LoopCtl {
                    next_try: team,
                    ..LoopCtl::default()
                };
                steps
            ],
            seen: vec![vec![0; steps]; team as usize],
            open: vec![None; team as usize],
        }
    }

    /// Thread `rank` begins its part (`ns` at the whole team) of loop `step`
    /// at `now`: the part it does under this instance's thread count.
    pub(super) fn begin(&mut self, rank: u32, step: usize, now: SimTime, ns: u64) -> u64 {
        let r = rank as usize;
        let index = self.seen[r][step];
        self.seen[r][step] += 1;
        let team = self.team;
        let l = &mut self.loops[step];
        let threads = if index == l.begun {
            l.begun += 1;
            let threads = l.best.unwrap_or(l.next_try);
            l.current = Some(Instance {
                index,
                threads,
                start: now,
                left: team,
            });
            threads
        } else {
            match l.current.as_mut() {
                Some(c) if c.index == index => {
                    // Threads begin in time order: the last one sets the start.
                    c.start = now;
                    c.threads
                }
                // Behind an instance already replaced (no barrier between
                // them): the whole team's share, not measured.
                _ => {
                    return ns;
                }
            }
        };
        self.open[r] = Some((step, index));
        if rank < threads {
            (u128::from(ns) * u128::from(team) / u128::from(threads)) as u64
        } else {
            0
        }
    }

    /// Thread `rank` finished its part of the instance it began last.
    pub(super) fn end(&mut self, rank: u32, now: SimTime) {
        let Some((step, index)) = self.open[rank as usize].take() else {
            return;
        };
        let l = &mut self.loops[step];
        let Some(c) = l.current.as_mut().filter(|c| c.index == index) else {
            return;
        };
        c.left -= 1;
        if c.left > 0 {
            return;
        }
        let (threads, took) = (c.threads, (now - c.start).as_ns());
        l.current = None;
        if l.best.is_none() {
            l.learn(threads, took);
        }
    }

    pub(super) fn report(&self) -> Vec<LoopReport> {
        self.loops
            .iter()
            .enumerate()
            .filter(|(_, l)| l.begun > 0)
            .map(|(step, l)| LoopReport {
                step: step as u32,
                instances: l.begun,
                threads: l.best,
                tried: l.tried.clone(),
            })
            .collect()
    }
}

impl Engine {
    /// A controller for every job with `throttle` (after the jobs are built).
    pub(super) fn build_throttle(&mut self, sc: &Scenario) {
        if sc.jobs.iter().all(|j| j.throttle.is_none()) {
            return;
        }
        let controllers = sc
            .jobs
            .iter()
            .zip(&self.jobs)
            .map(|(job, state)| {
                job.throttle.as_ref()?;
                let steps = state
                    .tasks
                    .iter()
                    .map(|&t| match &self.tasks[t].role {
                        Role::Rank { program, .. } => program.step_count(),
                        _ => unreachable!("a job's tasks are ranks"),
                    })
                    .max()
                    .unwrap_or(0);
                Some(Controller::new(state.tasks.len() as u32, steps))
            })
            .collect();
        self.throttle = Some(controllers);
    }

    /// The part task `t` does of the compute step it just fetched (`ns` at
    /// the whole team): `ns` unless its job throttles that loop. Inline is
    /// only the test, so runs without throttling keep their hot path.
    #[inline]
    pub(super) fn loop_part(&mut self, t: TaskId, ns: u64) -> u64 {
        if self.throttle.is_none() {
            return ns;
        }
        self.throttled_part(t, ns)
    }

    #[inline(never)]
    fn throttled_part(&mut self, t: TaskId, ns: u64) -> u64 {
        let Some(throttle) = self.throttle.as_deref_mut() else {
            return ns;
        };
        let Role::Rank {
            program, job, rank, ..
        } = &self.tasks[t].role
        else {
            unreachable!("only ranks compute program steps")
        };
        match (throttle[*job as usize].as_mut(), program.loop_step()) {
            (Some(c), Some(step)) => c.begin(*rank, step, self.now, ns),
            _ => ns,
        }
    }

    /// Task `t` finished a compute item: the end of its loop part, if any.
    #[inline]
    pub(super) fn loop_part_done(&mut self, t: TaskId) {
        if self.throttle.is_some() {
            self.throttled_part_done(t);
        }
    }

    #[inline(never)]
    fn throttled_part_done(&mut self, t: TaskId) {
        let Some(throttle) = self.throttle.as_deref_mut() else {
            return;
        };
        if let Role::Rank { job, rank, .. } = self.tasks[t].role {
            if let Some(c) = throttle[job as usize].as_mut() {
                c.end(rank, self.now);
            }
        }
    }

    /// Job `j`'s loops, if it throttles.
    pub(super) fn throttle_report(&self, j: usize) -> Option<Vec<LoopReport>> {
        self.throttle.as_ref()?[j].as_ref().map(Controller::report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> SimTime {
        SimTime::from_us(x)
    }

    /// One instance of loop 0 by the whole team of 4, every thread's part
    /// ending `took(k)` after the start, at `at`.
    fn instance(c: &mut Controller, at: SimTime, took: impl Fn(u32) -> u64) -> u32 {
        let parts: Vec<u64> = (0..4).map(|r| c.begin(r, 0, at, 1000)).collect();
        let threads = parts.iter().filter(|&&p| p > 0).count() as u32;
        assert!(parts
            .iter()
            .all(|&p| p == 0 || p == 4000 / u64::from(threads)));
        for r in 0..4 {
            c.end(r, at + us(took(threads)));
        }
        threads
    }

    #[test]
    fn a_loop_that_scales_keeps_its_whole_team_after_one_try() {
        let mut c = Controller::new(4, 1);
        let counts: Vec<u32> = (0..6)
            .map(|i| instance(&mut c, us(1000 * i), |k| 400 / u64::from(k)))
            .collect();
        assert_eq!(counts, [4, 3, 4, 4, 4, 4]);
        let [r] = &c.report()[..] else { panic!() };
        assert_eq!((r.instances, r.threads), (6, Some(4)));
        assert_eq!(r.tried, [(4, 100_000), (3, 133_000)]);
    }

    #[test]
    fn a_loop_that_runs_faster_on_fewer_threads_settles_there() {
        // Fastest on 2 threads: 4 -> 3 -> 2 -> 1 is slower, back to 2.
        let took = |k: u32| [0, 300, 100, 150, 200][k as usize];
        let mut c = Controller::new(4, 1);
        let counts: Vec<u32> = (0..7)
            .map(|i| instance(&mut c, us(1000 * i), took))
            .collect();
        assert_eq!(counts, [4, 3, 2, 1, 2, 2, 2]);
        assert_eq!(c.report()[0].threads, Some(2));
    }

    #[test]
    fn the_decision_is_taken_by_the_first_thread_and_held_for_the_team() {
        let mut c = Controller::new(2, 3);
        assert_eq!(c.begin(1, 2, us(0), 500), 500);
        c.end(1, us(0));
        assert_eq!(c.begin(0, 2, us(5), 500), 500, "same instance, same count");
        c.end(0, us(10));
        // From the last thread's start to the last end.
        assert_eq!(c.report()[0].tried, [(2, 5_000)]);
        // The next instance tries one thread: rank 0 does the team's work.
        assert_eq!(c.begin(1, 2, us(20), 500), 0);
        assert_eq!(c.begin(0, 2, us(20), 500), 1000);
    }
}
