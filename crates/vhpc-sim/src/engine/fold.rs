//! Runs of futile hypervisor yields in closed form.
//!
//! An `hv_yield` rank waiting alone on its vCPU polls for its window, yields
//! to the hypervisor, and is very often picked straight back (nothing else
//! is runnable on that core): S0's npb.lu pressure runs under Credit spend
//! 60 to 80 % of their events on such rounds. Each round is a poll window's
//! event, a deschedule and a pick that change nothing but time-dependent
//! counts. Once one round came straight back and the scheduler saw nothing
//! since (but other cores' rounds that came straight back, which change
//! nothing this core's pick depends on), the next rounds do the same until
//! the next event in the queue
//! (the peer's packet, a tick, a slice end, a wake-up): they are accounted
//! at once, with the same CPU time, polls, yields, counters, generations
//! and scheduler state as one by one, and the engine goes on from the last
//! of them. Reports are identical, `events` included (it counts each
//! folded poll window as the event it stands for; [`Engine::folded`] says
//! how many were not handled one by one).

use super::*;

impl Engine {
    /// Whether the run may fold futile yields: none of the models that
    /// watch every stretch a task or vCPU runs is on (the trace's slices,
    /// the memory model, cache refills and guest balancing, hints, ticks).
    pub(super) fn fold_allowed(&self) -> bool {
        self.trace.is_none()
            && self.numa.is_none()
            && self.hints.is_none()
            && self.ticks.is_none()
            && self.guest_sched.is_none()
            && !self.guest_costs
    }

    /// `t`'s yield came straight back; `calls` is [`Engine::sched_calls`]
    /// before it. The scheduler promised (`folds_futile_yields`) that such
    /// a yield changes nothing another core's pick depends on: its calls
    /// are not counted, and `t`'s next yield may fold while no other call
    /// is made.
    pub(super) fn futile_yield_done(&mut self, t: TaskId, calls: u64) {
        if self.fold_on {
            self.sched_calls = calls;
            self.tasks[t].wait.fold_mark = calls;
        }
    }

    /// `t`'s poll window ended (settled) and it is about to yield again
    /// under `hv_yield`, alone on its vCPU: if its last yield came straight
    /// back and the scheduler saw no other call since (but other vCPUs'
    /// futile yields), folds this round and the next ones before the
    /// queue's next event; `true` if it did.
    pub(super) fn fold_futile_yields(&mut self, t: TaskId) -> bool {
        if !self.fold_on || self.tasks[t].wait.fold_mark != self.sched_calls {
            return false;
        }
        let task = &self.tasks[t];
        let v = task.vcpu;
        let HvState::Running(core) = self.vcpus[v].hv else {
            return false;
        };
        let w = task.window;
        let still = task.wait.yield_was_futile
            && task.debt == 0
            && task.work.is_empty()
            && task.inbox.is_empty()
            && self.vcpus[v].guest.current == Some(t);
        // Every window a full one: the rounds fall at now + i * w.
        if !still || w == 0 || task.wait.spun % w != 0 {
            return false;
        }
        let now = self.now.as_ns();
        // Rounds strictly before the next event (one at the same instant
        // may have been queued before this task's poll) and not past the
        // limit, where the run stops.
        let next = self.queue.peek_time().map_or(u64::MAX, SimTime::as_ns);
        if next <= now {
            return false;
        }
        let before_next = (next - now - 1) / w + 1;
        let to_limit = (self.limit.as_ns() - now) / w + 1;
        let n = before_next.min(to_limit);
        if n < 2 {
            return false;
        }
        let every = SimTime::from_ns(w);
        let Some(slice) = self
            .sched
            .repeat_futile_yields(core, v, self.now, every, n)
        else {
            return false;
        };
        let last = SimTime::from_ns(now + (n - 1) * w);
        self.now = last;
        // The spin up to the last yield, then what each round counted.
        self.settle(t);
        let task = &mut self.tasks[t];
        // Wrapping as n single increments of these u32 counters would.
        task.wait.futile = task.wait.futile.wrapping_add(n as u32);
        task.wait.armed = false;
        task.stats.hv_yields += n;
        // stop_task and start_task each round.
        task.gen = task.gen.wrapping_add((2 * n) as u32);
        let c = &mut self.cores[core];
        let ran = (last - c.since).as_ns();
        c.busy += ran;
        c.since = last;
        let vc = &mut self.vcpus[v];
        vc.run_ns += ran;
        vc.gen = vc.gen.wrapping_add(n as u32);
        self.set_slice_end(core, last.saturating_add(slice.max(SimTime::from_ns(1))));
        self.arm_poll(t);
        self.timer_sooner();
        // This event counts one round; the others are counted here.
        self.events += n - 1;
        self.folded += n - 1;
        true
    }

    /// Poll windows folded into another's event so far (counted in
    /// `events`, not handled one by one).
    pub fn folded(&self) -> u64 {
        self.folded
    }
}
