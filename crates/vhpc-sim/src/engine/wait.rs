//! Waiting inside MPI: what each wait policy does when a rank has nothing
//! to do but wait (poll windows, guest and hypervisor yields, blocking,
//! adaptive sleeps).

use super::*;

impl Engine {
    /// Nothing to do but wait: what the policy does at this point.
    pub(super) fn keep_waiting(&mut self, t: TaskId) -> Next {
        if self.hints.is_some() && self.hint_wait_blocks(t) {
            let task = &mut self.tasks[t];
            task.state = TaskState::Blocked;
            task.stats.blocks += 1;
            return Next::Leave;
        }
        let task = &mut self.tasks[t];
        let Role::Rank { policy, .. } = task.role else {
            unreachable!()
        };
        let contended = self.vcpus[task.vcpu].guest.contended();
        match policy {
            WaitPolicy::BusyPoll => {
                if contended {
                    self.arm_poll(t);
                }
                Next::Keep
            }
            WaitPolicy::Spin => Next::Keep,
            WaitPolicy::HvYield | WaitPolicy::Block => {
                self.arm_poll(t);
                Next::Keep
            }
            WaitPolicy::Adaptive => {
                let w = &task.wait;
                if (w.futile >= self.costs.futile_yields && !contended)
                    || w.idle >= self.costs.idle_yields
                {
                    return self.sleep(t);
                }
                self.arm_poll(t);
                Next::Keep
            }
        }
    }

    /// Schedules the end of the current poll window (once per wait stretch).
    pub(super) fn arm_poll(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        let window = task.window;
        if task.wait.armed {
            return;
        }
        task.wait.armed = true;
        let left = window - task.wait.spun % window;
        let ev = Ev::Poll {
            task: t as u32,
            gen: task.gen,
        };
        let v = task.vcpu;
        self.push_on_cpu(v, self.now + SimTime::from_ns(left), ev);
    }

    pub(super) fn arm_poll_if_spinning(&mut self, t: TaskId) {
        let task = &self.tasks[t];
        let spins_only = matches!(
            task.role,
            Role::Rank {
                policy: WaitPolicy::Spin,
                ..
            }
        );
        if task.on_cpu && task.wait.active && task.work.is_empty() && task.debt == 0 && !spins_only
        {
            self.settle(t);
            self.arm_poll(t);
        }
    }

    /// A poll window ended while the task was spinning on a CPU.
    pub(super) fn poll_window_end(&mut self, t: TaskId) {
        self.settle(t);
        let task = &mut self.tasks[t];
        task.wait.armed = false;
        if !task.wait.active || !task.work.is_empty() || task.debt > 0 {
            // It found work meanwhile; the window restarts when it spins again.
            return;
        }
        let v = task.vcpu;
        let Role::Rank { policy, .. } = task.role else {
            unreachable!()
        };
        let contended = self.vcpus[v].guest.contended();
        match policy {
            WaitPolicy::BusyPoll if contended => self.guest_yield(t),
            WaitPolicy::BusyPoll | WaitPolicy::Spin => {}
            WaitPolicy::Block => {
                task.state = TaskState::Blocked;
                task.stats.blocks += 1;
                self.leave_cpu(t);
            }
            WaitPolicy::HvYield | WaitPolicy::Adaptive if contended => self.guest_yield(t),
            WaitPolicy::HvYield | WaitPolicy::Adaptive => {
                if policy == WaitPolicy::HvYield && self.fold_futile_yields(t) {
                    return;
                }
                let task = &mut self.tasks[t];
                let w = &mut task.wait;
                w.futile = if w.yield_was_futile { w.futile + 1 } else { 0 };
                task.stats.hv_yields += 1;
                let HvState::Running(core) = self.vcpus[v].hv else {
                    unreachable!("a polling task runs")
                };
                let calls = self.sched_calls;
                self.take_off(core, v, Leave::Yielded);
                self.decide_after_yield(core, v);
                if policy == WaitPolicy::HvYield && self.tasks[t].wait.yield_was_futile {
                    self.futile_yield_done(t, calls);
                }
                return;
            }
        }
        self.kick(v);
    }

    pub(super) fn guest_yield(&mut self, t: TaskId) {
        let v = self.tasks[t].vcpu;
        self.tasks[t].stats.guest_yields += 1;
        if let Some(n) = self.vcpus[v].guest.rotate() {
            self.tasks[t].wait.idle += 1;
            self.stop_task(t);
            self.switch_to(n);
        }
    }

    /// The current task of a running vCPU stops being runnable.
    pub(super) fn leave_cpu(&mut self, t: TaskId) {
        let v = self.tasks[t].vcpu;
        self.stop_task(t);
        if let Some(n) = self.vcpus[v].guest.leave() {
            self.switch_to(n);
        }
    }

    /// `adaptive`'s bounded sleep: the task (and, alone, its vCPU) goes idle.
    pub(super) fn sleep(&mut self, t: TaskId) -> Next {
        let (min, max) = (self.costs.sleep_min, self.costs.sleep_max);
        let task = &mut self.tasks[t];
        let w = &mut task.wait;
        w.sleep_ns = if w.sleep_ns == 0 {
            min
        } else {
            (w.sleep_ns * 2).min(max)
        };
        task.state = TaskState::Sleeping;
        task.stats.sleeps += 1;
        // The timer and the wake-up cost CPU time beyond the sleep asked for:
        // the vCPU is busy then, not idle (a slicer's watcher cannot look).
        task.debt += self.costs.sleep_extra;
        let at = self.now + SimTime::from_ns(w.sleep_ns);
        self.queue.push(at, Ev::Wake { task: t as u32 }.pack());
        Next::Leave
    }

    /// A learning task's wait ended after `waited`: spinning paid if it ended
    /// within the full budget (a wait that ended at its first poll is not
    /// counted, as libvhpc_wait counts only waits that reached its policy).
    pub(super) fn learn_spin(&mut self, t: TaskId, waited: SimTime) {
        let full = self.costs.window;
        let (task, short) = (&mut self.tasks[t], self.costs.spin_min);
        let (Some(short), true) = (short, task.spin.on) else {
            return;
        };
        if waited == SimTime::ZERO {
            return;
        }
        let l = &mut task.spin;
        if waited.as_ns() <= full {
            l.won += 1;
        } else {
            l.lost += 1;
        }
        if l.won + l.lost < LEARN_WINDOW {
            return;
        }
        task.window = if l.won * 2 >= LEARN_WINDOW {
            full
        } else {
            short.max(self.costs.poll)
        };
        (l.won, l.lost) = (0, 0);
    }
}
