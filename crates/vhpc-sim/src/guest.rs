//! The guest kernel's scheduler on one vCPU: which of the tasks (ranks,
//! dom0's relay) that live on it runs, round robin with a time slice.
//!
//! Tasks are placed on vCPUs once (ranks round robin over their domain's
//! vCPUs) and never move: a guest whose vCPUs all run has no reason to
//! migrate, and S0's guests ran one rank per vCPU. `sched_yield` here only
//! rotates this vCPU's run queue; it never reaches the hypervisor, which is
//! why a lone polling rank's yield is useless (S0).

use std::collections::VecDeque;

/// Index of a task (a rank or a relay) in the engine.
pub type TaskId = usize;

#[derive(Debug, Default)]
pub struct GuestRunqueue {
    /// The task the vCPU runs (or would run, when the vCPU is descheduled).
    pub current: Option<TaskId>,
    /// Other runnable tasks, in the order they will run.
    pub queue: VecDeque<TaskId>,
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
