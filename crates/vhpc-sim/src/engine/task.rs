//! Task level: a task's CPU time (debt, work items, spinning), stepping
//! through its program, and what finished work leads to.

use super::*;

impl Engine {
    pub(super) fn start_task(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        task.on_cpu = true;
        task.since = self.now;
        task.gen = task.gen.wrapping_add(1);
        task.wait.armed = false;
        if self.guest_costs {
            self.refill(t);
        }
        if self.numa.is_some() {
            self.numa_resume(t);
        }
    }

    pub(super) fn stop_task(&mut self, t: TaskId) {
        self.settle(t);
        let task = &mut self.tasks[t];
        task.on_cpu = false;
        task.gen = task.gen.wrapping_add(1);
        task.wait.armed = false;
        if self.numa.is_some() {
            self.numa_pause(t);
        }
    }

    /// Charges the time since `since` to debt, the front work item, or spin.
    pub(super) fn settle(&mut self, t: TaskId) {
        let now = self.now;
        let task = &mut self.tasks[t];
        if !task.on_cpu {
            return;
        }
        let mut elapsed = (now - task.since).as_ns();
        task.since = now;
        let paid = elapsed.min(task.debt);
        task.debt -= paid;
        task.stats.overhead_ns += paid;
        elapsed -= paid;
        if elapsed == 0 {
            return;
        }
        if let Some(w) = task.work.front_mut() {
            let done = elapsed.min(w.ns);
            w.ns -= done;
            match w.after {
                After::Compute => task.stats.useful_ns += done,
                After::MemCompute => {
                    task.stats.useful_ns += done;
                    if let Some(numa) = self.numa.as_mut() {
                        numa.add_wall(t, done);
                    }
                }
                _ => task.stats.overhead_ns += done,
            }
            debug_assert_eq!(done, elapsed, "a work item outlived its event");
        } else if task.wait.active {
            task.stats.poll_ns += elapsed;
            task.wait.spun += elapsed;
        }
    }

    /// Advances a task that holds the CPU as far as it can go now.
    pub(super) fn step(&mut self, t: TaskId) -> Next {
        self.settle(t);
        loop {
            if let Some(next) = self.finish_work(t) {
                return next;
            }
            let task = &mut self.tasks[t];
            if let Role::Background { work, busy, .. } = &mut task.role {
                *busy = !*busy;
                if *busy {
                    let ns = *work;
                    task.work.push_back(Work {
                        ns,
                        after: After::Compute,
                    });
                    continue;
                }
                // This wake-up's work is done: sleep until the next one.
                task.state = TaskState::Sleeping;
                self.background_wake(t);
                return Next::Leave;
            }
            // dom0's relay and the device threads: one pass per packet.
            if let Role::Relay | Role::Device { .. } | Role::RxIrq { .. } = task.role {
                match task.inbox.pop_front() {
                    Some((job, packet)) if matches!(task.role, Role::RxIrq { .. }) => {
                        let Role::RxIrq { domain } = task.role else {
                            unreachable!()
                        };
                        let ns = self
                            .nic_channel(domain as usize)
                            .rx_irq_cost(packet.payload());
                        self.tasks[t].work.push_back(Work {
                            ns,
                            after: After::Deliver { job, packet },
                        });
                        continue;
                    }
                    Some((job, packet)) => {
                        // A request-to-send is a control packet: a device
                        // thread or dom0's relay moves its header, not the
                        // message it announces.
                        let ns = match task.role {
                            Role::Device { domain } => self
                                .nic_channel(domain as usize)
                                .relay_cost(packet.payload()),
                            _ => self.costs.inter_vm.relay_cost(packet.payload()),
                        };
                        self.tasks[t].work.push_back(Work {
                            ns,
                            after: After::Forward { job, packet },
                        });
                        continue;
                    }
                    None => {
                        task.state = TaskState::Blocked;
                        return Next::Leave;
                    }
                }
            }
            if task.wait.active {
                if let Some((_, packet)) = task.inbox.pop_front() {
                    // What it waits for moves: yielding pays again.
                    (task.wait.idle, task.wait.futile) = (0, 0);
                    self.on_packet(t, packet);
                    continue;
                }
                let Role::Rank { mpi, .. } = &task.role else {
                    unreachable!()
                };
                if mpi.outstanding == 0 {
                    let waited = self.now.saturating_sub(task.wait.began);
                    task.wait = Wait::default();
                    self.learn_spin(t, waited);
                    continue;
                }
                return self.keep_waiting(t);
            }
            if let Some(next) = self.next_op(t) {
                return next;
            }
        }
    }

    /// Runs completed work items' consequences; `Some(Keep)` if work remains
    /// (its event is scheduled).
    pub(super) fn finish_work(&mut self, t: TaskId) -> Option<Next> {
        loop {
            let task = &mut self.tasks[t];
            if task.work.is_empty() {
                if task.debt == 0 {
                    return None;
                }
                // Switch costs with nothing after them: a placeholder item
                // carries the event that ends them.
                task.work.push_back(Work {
                    ns: 0,
                    after: After::Compute,
                });
            }
            let ns = task.work.front().expect("not empty").ns;
            if ns == 0 && task.debt == 0 {
                let w = task.work.pop_front().expect("not empty");
                self.after_work(t, w.after);
                continue;
            }
            let at = self.now + SimTime::from_ns(task.debt + ns);
            let ev = Ev::Work {
                task: t as u32,
                gen: task.gen,
            };
            let v = task.vcpu;
            self.push_on_cpu(v, at, ev);
            return Some(Next::Keep);
        }
    }

    pub(super) fn after_work(&mut self, t: TaskId, after: After) {
        match after {
            After::Compute => self.loop_part_done(t),
            After::Mpi(Then::Nothing) => {}
            After::MemCompute => {
                self.numa_done(t);
                self.loop_part_done(t);
            }
            After::Mpi(Then::Inject(p)) => {
                let Role::Rank { job, .. } = self.tasks[t].role else {
                    unreachable!()
                };
                self.tasks[t].stats.messages_sent += 1;
                self.inject(t, job, p);
            }
            After::Mpi(Then::RecvDone | Then::SyncSendDone) => {
                if let Role::Rank { mpi, .. } = &mut self.tasks[t].role {
                    mpi.outstanding -= 1;
                }
            }
            After::Mpi(Then::SendDone { dst }) => {
                let Role::Rank { mpi, job, rank, .. } = &mut self.tasks[t].role else {
                    unreachable!()
                };
                mpi.outstanding -= 1;
                let (job, rank) = (*job, *rank);
                let chan = self.peer_chan(t, job, dst);
                if self.costs.channel(chan).shared_copy_buffer {
                    self.lmt_release(job, rank, dst);
                }
            }
            After::Forward { job, packet } => {
                let dst = self.jobs[job as usize].tasks[packet.dst as usize];
                match self.tasks[t].role {
                    Role::Device { domain } => {
                        let d = domain as usize;
                        let latency = self.nic_channel(d).latency_ns;
                        let src = self.jobs[job as usize].tasks[packet.src as usize];
                        if self.tasks[src].domain == d {
                            self.transmitted(job, packet, latency);
                        } else {
                            // Into the guest: its receive interrupt first,
                            // if it has one.
                            let at = self.now + SimTime::from_ns(latency);
                            let to = self.domains[d].irq.unwrap_or(dst);
                            self.send_packet(at, to, job, packet);
                        }
                    }
                    // dom0's relay: on to the receiver (the receiving
                    // machine's netback is not charged).
                    _ => self.hop(job, packet, self.costs.inter_vm.latency_ns, dst),
                }
            }
            After::Deliver { job, packet } => {
                let dst = self.jobs[job as usize].tasks[packet.dst as usize];
                self.send_packet(self.now, dst, job, packet);
            }
            After::Transmit { job, packet } => {
                let latency = self.nic_channel(self.tasks[t].domain).latency_ns;
                self.transmitted(job, packet, latency);
            }
        }
    }

    /// A packet has passed its sender VM's NIC (the device thread, or the
    /// sending vCPU with `tx_on_sender`): on to the receiver's side, over
    /// the wire if that is another machine, `latency_ns` after.
    fn transmitted(&mut self, job: u32, packet: Packet, latency_ns: u64) {
        let dst = self.jobs[job as usize].tasks[packet.dst as usize];
        let next = self.receive_hop(self.tasks[dst].domain, dst);
        self.hop(job, packet, latency_ns, next);
    }

    /// Fetches and starts the next program operation; `Some` when the task
    /// finished.
    pub(super) fn next_op(&mut self, t: TaskId) -> Option<Next> {
        let task = &mut self.tasks[t];
        let Role::Rank {
            program, job, rank, ..
        } = &mut task.role
        else {
            unreachable!()
        };
        let (job, me) = (*job, *rank);
        match program.next_op(&mut task.rng) {
            Op::Compute(d) => {
                let ns = self.loop_part(t, d.as_ns());
                self.tasks[t].work.push_back(Work {
                    ns,
                    after: After::Compute,
                })
            }
            Op::MemCompute(d, mem_ppm) => {
                let ns = self.loop_part(t, d.as_ns());
                self.numa_begin(t, ns, mem_ppm)
            }
            Op::Isend { peer, bytes } => {
                let chan = self.peer_chan(t, job, peer);
                self.mpi_call(t, chan, |mpi, out, proto, ch| {
                    mpi.isend(me, peer, bytes, proto, ch, out)
                });
            }
            Op::Irecv { peer, bytes } => {
                let chan = self.peer_chan(t, job, peer);
                self.mpi_call(t, chan, |mpi, out, _, ch| {
                    mpi.irecv(me, peer, bytes, ch, out)
                });
            }
            Op::WaitAll => {
                task.wait = Wait {
                    active: true,
                    began: self.now,
                    ..Wait::default()
                }
            }
            Op::ClockStart => self.clock_start(t, job),
            Op::Done => {
                self.rank_done(t, job);
                return Some(Next::Leave);
            }
        }
        None
    }

    /// A rank at its timed part: the last of its job's ranks to get there
    /// starts the job's clock (its first run only; a relaunch passes by).
    /// Cold: once per rank and run, kept out of the per-operation path.
    #[cold]
    fn clock_start(&mut self, t: TaskId, job: u32) {
        let j = &mut self.jobs[job as usize];
        if let Some(at) = j.untimed.iter().position(|&r| r == t) {
            j.untimed.swap_remove(at);
            if j.untimed.is_empty() {
                j.first_start = self.now;
            }
        }
    }

    pub(super) fn rank_done(&mut self, t: TaskId, job: u32) {
        self.tasks[t].state = TaskState::Done;
        // A relaunched rank keeps its first run's finish.
        let stats = &mut self.tasks[t].stats;
        stats.finish_ns = stats.finish_ns.or(Some(self.now.as_ns()));
        let j = &mut self.jobs[job as usize];
        j.done_ranks += 1;
        if j.done_ranks as usize != j.tasks.len() {
            return;
        }
        if j.completion.is_none() {
            j.completion = Some(self.now - j.first_start);
            if !j.endless {
                self.live_jobs -= 1;
            }
        }
        // A run that took no time loads nothing: relaunching it would loop.
        if j.refill && self.live_jobs > 0 && self.now > j.started {
            self.relaunch(job as usize);
        }
    }

    /// A new run of a finished job: every rank starts its program again, woken
    /// at once (it has left or is leaving its vCPU, as a blocking task does).
    fn relaunch(&mut self, job: usize) {
        let j = &mut self.jobs[job];
        j.done_ranks = 0;
        j.runs += 1;
        j.started = self.now;
        for i in 0..j.tasks.len() {
            let t = self.jobs[job].tasks[i];
            let task = &mut self.tasks[t];
            let Role::Rank { program, .. } = &mut task.role else {
                unreachable!("jobs hold ranks")
            };
            program.restart();
            task.wait = Wait::default();
            task.state = TaskState::Sleeping;
            self.queue
                .push(self.now, Ev::Wake { task: t as u32 }.pack());
        }
    }

    /// Schedules a background task's next wake-up, exponentially
    /// distributed around its mean interval (a Poisson stream of timers).
    pub(super) fn background_wake(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        let Role::Background { interval, .. } = task.role else {
            unreachable!()
        };
        let u: f64 = task.rng.gen_range(f64::EPSILON..1.0);
        let delay = (-u.ln() * interval as f64) as u64;
        self.queue.push(
            self.now + SimTime::from_ns(delay.max(1)),
            Ev::Wake { task: t as u32 }.pack(),
        );
    }
}
