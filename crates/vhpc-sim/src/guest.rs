//! The guest kernel's scheduler on one vCPU: which of the tasks (ranks,
//! dom0's relay) that live on it runs, round robin with a time slice.
//!
//! With `guest.scheduler = "fixed"` (the default) tasks are placed on vCPUs
//! once (ranks round robin over their domain's vCPUs) and never move: a
//! guest whose vCPUs all run has no reason to migrate, and S0's guests ran
//! one rank per vCPU. `sched_yield` here only rotates this vCPU's run queue;
//! it never reaches the hypervisor, which is why a lone polling rank's yield
//! is useless (S0). `"linux"` ([`linux`]) moves tasks between the vCPUs of a
//! domain by scheduling domains ([`domains`]): wake-up placement, newly-idle
//! and periodic load balancing.

use std::collections::VecDeque;

use crate::hypervisor::VcpuId;
use crate::time::SimTime;

pub mod domains;
pub mod linux;

/// Index of a task (a rank or a relay) in the engine.
pub type TaskId = usize;

/// A guest scheduler by name, with a one-line description.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerInfo {
    pub name: &'static str,
    pub description: &'static str,
}

pub const SCHEDULERS: &[SchedulerInfo] = &[
    SchedulerInfo {
        name: "fixed",
        description: "tasks stay on the vCPU they were placed on; one round-robin run queue per vCPU",
    },
    SchedulerInfo {
        name: "linux",
        description: "CFS-like: per-vCPU run queues, scheduling domains (guest.topology or guest.domains = \"flat\"), wake-up placement, newly-idle and periodic load balancing",
    },
];

/// Why a task moved to another vCPU (counted per domain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    Wake,
    NewIdle,
    Periodic,
}

/// What a guest scheduler sees of, and does to, the engine's vCPUs.
pub trait GuestOps {
    /// Runnable tasks on vCPU `v` (its current one and those queued).
    fn nr_running(&self, v: VcpuId) -> u32;
    /// Whether `v` holds a core now (a descheduled vCPU gets no tick).
    fn on_core(&self, v: VcpuId) -> bool;
    /// Moves one queued (not running) task from `src` to `dst`; a cache-hot
    /// one (ran within `migration_cost`) only if `hot`. Whether one moved.
    fn migrate(&mut self, src: VcpuId, dst: VcpuId, hot: bool, why: Why) -> bool;
}

/// A guest scheduler that moves tasks between vCPUs (`"fixed"` is the
/// engine without one).
pub trait GuestScheduler: std::fmt::Debug {
    /// The vCPU a waking task goes to: `prev` is where it last ran, `waker`
    /// the vCPU of the task that woke it (same domain), `sync` when the
    /// waker is about to sleep (a pipe write), `flips` the waker's and the
    /// wakee's `wakee_flips` (how often each switched whom it wakes).
    fn select_wake(
        &mut self,
        ops: &dyn GuestOps,
        prev: VcpuId,
        waker: Option<VcpuId>,
        sync: bool,
        flips: (u32, u32),
    ) -> VcpuId;
    /// `v`'s run queue just emptied: pull a task onto it (newly-idle
    /// balancing). Whether one moved.
    fn newidle(&mut self, now: SimTime, ops: &mut dyn GuestOps, v: VcpuId) -> bool;
    /// `v` went idle (nothing pulled).
    fn idle_start(&mut self, now: SimTime, v: VcpuId);
    /// A task arrived on idle `v`.
    fn idle_end(&mut self, now: SimTime, v: VcpuId);
    /// The period of [`GuestScheduler::balance`].
    fn tick(&self) -> SimTime;
    /// Periodic load balancing, every `tick`.
    fn balance(&mut self, now: SimTime, ops: &mut dyn GuestOps);
}

#[derive(Debug, Default)]
pub struct GuestRunqueue {
    /// The task the vCPU runs (or would run, when the vCPU is descheduled).
    pub current: Option<TaskId>,
    /// Other runnable tasks, in the order they will run.
    pub queue: VecDeque<TaskId>,
    /// Times a task was switched out (it left, or the slice rotated it):
    /// what `perf stat -e context-switches` counts for the tasks it watches.
    pub switches: u64,
}

impl GuestRunqueue {
    /// Adds a task that became runnable; `true` if it became current (the
    /// vCPU had nothing to run).
    pub fn enqueue(&mut self, t: TaskId) -> bool {
        if self.current.is_none() {
            self.current = Some(t);
            return true;
        }
        self.queue.push_back(t);
        false
    }

    /// The current task stops being runnable (blocks, sleeps, ends): the
    /// next one becomes current. Returns it, or `None` (the vCPU halts).
    pub fn leave(&mut self) -> Option<TaskId> {
        self.switches += 1;
        self.current = self.queue.pop_front();
        self.current
    }

    /// An interrupt: `t` becomes current at once, the task it interrupts
    /// goes to the front of the queue (it resumes when `t` leaves).
    pub fn preempt(&mut self, t: TaskId) {
        if let Some(cur) = self.current.replace(t) {
            self.queue.push_front(cur);
        }
    }

    /// `sched_yield` or the end of a guest slice: the current task goes to
    /// the back. Returns the new current if it changed.
    pub fn rotate(&mut self) -> Option<TaskId> {
        let next = self.queue.pop_front()?;
        self.switches += 1;
        self.queue.push_back(
            self.current
                .replace(next)
                .expect("a rotating vCPU runs a task"),
        );
        Some(next)
    }

    /// Whether another task waits for this vCPU.
    pub fn contended(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Runnable tasks here (current and queued).
    pub fn nr_running(&self) -> u32 {
        self.current.is_some() as u32 + self.queue.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yield_rotates_only_with_company() {
        let mut rq = GuestRunqueue::default();
        assert!(rq.enqueue(1));
        assert_eq!(rq.rotate(), None, "alone: sched_yield returns at once");
        assert!(!rq.enqueue(2));
        assert!(rq.contended());
        assert_eq!(rq.rotate(), Some(2));
        assert_eq!(rq.current, Some(2));
        assert_eq!(rq.leave(), Some(1));
        assert_eq!(rq.leave(), None);
        assert!(rq.current.is_none());
    }

    #[test]
    fn an_interrupt_runs_first_and_hands_back() {
        let mut rq = GuestRunqueue::default();
        rq.enqueue(1);
        rq.enqueue(2);
        rq.preempt(9);
        assert_eq!(rq.current, Some(9));
        assert_eq!(rq.leave(), Some(1), "the interrupted task resumes first");
        let mut idle = GuestRunqueue::default();
        idle.preempt(9);
        assert_eq!(idle.leave(), None);
    }
}
