//! Messages between ranks: MPI calls into the protocol state, channels,
//! injection through dom0, arrival, and nemesis' shared copy buffer.

use super::*;

/// Values with a reusable slot number each (slots are reused last-freed
/// first, deterministically).
#[derive(Debug)]
pub(super) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    pub(super) fn put(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.items[slot as usize] = Some(item);
                slot
            }
            None => {
                self.items.push(Some(item));
                u32::try_from(self.items.len() - 1).expect("fewer than 2^32 packets in flight")
            }
        }
    }

    pub(super) fn peek(&self, slot: u32) -> &T {
        self.items[slot as usize].as_ref().expect("a live slot")
    }

    pub(super) fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.items[slot as usize]
            .take()
            .expect("a slot is taken once")
    }
}

/// A rank pair's shared copy buffer: who streams through it, who waits.
#[derive(Debug, Default)]
pub(super) struct CopyBuffer {
    pub(super) owner: Option<u32>,
    pub(super) parked: VecDeque<(TaskId, Packet)>,
}

/// A channel of the cost table, named without borrowing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chan {
    Native,
    Shm,
    Ivshmem,
    Tcp,
    Nic(Nic),
}

impl Costs {
    pub(super) fn channel(&self, chan: Chan) -> &Channel {
        match chan {
            Chan::Native => &self.native,
            Chan::Shm => &self.shm,
            Chan::Ivshmem => &self.ivshmem,
            Chan::Tcp => &self.tcp,
            Chan::Nic(Nic::Netfront) => &self.inter_vm,
            Chan::Nic(Nic::Bridge) => &self.bridge,
            Chan::Nic(Nic::Emulated) => &self.emulated,
            Chan::Nic(Nic::Virtio) => &self.virtio,
        }
    }
}

/// How a packet between two domains travels (see `Engine::path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    /// Inside one domain, or shared memory between every domain.
    Inside,
    /// Shared memory of an ivshmem group.
    Ivshmem,
    /// TCP between native OSes on two machines.
    Tcp,
    /// Through the sender's NIC (dom0's relay, a device thread, the bridge).
    Nic,
}

impl Engine {
    /// Runs an MPI call of task `t` over the channel `chan` (borrowed from
    /// the cost table, not copied: a channel is 136 bytes and every message
    /// makes a few calls).
    pub(super) fn mpi_call(
        &mut self,
        t: TaskId,
        chan: Chan,
        f: impl FnOnce(&mut RankMpi, &mut VecDeque<mpi::MpiWork>, &Protocol, &Channel),
    ) {
        let mut out = std::mem::take(&mut self.mpi_scratch);
        let Role::Rank { mpi, .. } = &mut self.tasks[t].role else {
            unreachable!()
        };
        f(mpi, &mut out, &self.costs.proto, self.costs.channel(chan));
        let work = &mut self.tasks[t].work;
        work.extend(out.drain(..).map(|w| Work {
            ns: w.ns,
            after: After::Mpi(w.then),
        }));
        self.mpi_scratch = out;
    }

    pub(super) fn on_packet(&mut self, t: TaskId, p: Packet) {
        let Role::Rank { job, rank, .. } = self.tasks[t].role else {
            unreachable!()
        };
        let chan = self.peer_chan(t, job, p.src);
        if p.kind == Kind::Cts
            && self.costs.channel(chan).shared_copy_buffer
            && !self.lmt_acquire(t, job, rank, p)
        {
            return; // parked until the pair's copy buffer is free
        }
        self.mpi_call(t, chan, |mpi, out, _, ch| mpi.on_packet(rank, p, ch, out));
    }

    /// The sender of a rendezvous transfer takes the pair's copy buffer, or
    /// parks its clear-to-send until the transfer that holds it is done.
    pub(super) fn lmt_acquire(&mut self, t: TaskId, job: u32, me: u32, cts: Packet) -> bool {
        let buf = self
            .lmt
            .entry((job, me.min(cts.src), me.max(cts.src)))
            .or_default();
        match buf.owner {
            None => {
                buf.owner = Some(me);
                true
            }
            Some(owner) if owner == me => true,
            Some(_) => {
                buf.parked.push_back((t, cts));
                false
            }
        }
    }

    /// A transfer from `me` to `dst` is done: hand the buffer to the next.
    pub(super) fn lmt_release(&mut self, job: u32, me: u32, dst: u32) {
        let key = (job, me.min(dst), me.max(dst));
        let Some(buf) = self.lmt.get_mut(&key) else {
            return;
        };
        match buf.parked.pop_front() {
            Some((next, cts)) => {
                buf.owner = Some(cts.dst);
                self.send_packet(self.now, next, job, cts);
            }
            None => {
                self.lmt.remove(&key);
            }
        }
    }

    /// [`Engine::chan`] through the task's one-entry cache: a rank talks
    /// to the same peer several times in a row (a receive, a send, their
    /// packets), and a rank's and its peer's domains never change.
    pub(super) fn peer_chan(&mut self, t: TaskId, job: u32, peer: u32) -> Chan {
        let (last, chan) = self.tasks[t].peer_chan;
        if last == peer {
            return chan;
        }
        let chan = self.chan(t, job, peer);
        self.tasks[t].peer_chan = (peer, chan);
        chan
    }

    /// The channel between task `t` and rank `peer` of its job.
    /// Between domains, each side pays its own NIC's costs (the sender's
    /// send costs and latency, the receiver's receive costs).
    pub(super) fn chan(&self, t: TaskId, job: u32, peer: u32) -> Chan {
        let other = self.jobs[job as usize].tasks[peer as usize];
        let (a, b) = (self.tasks[t].domain, self.tasks[other].domain);
        match self.path(a, b) {
            Path::Inside if self.domains[a].native => Chan::Native,
            Path::Inside => Chan::Shm,
            Path::Ivshmem => Chan::Ivshmem,
            Path::Tcp => Chan::Tcp,
            Path::Nic => Chan::Nic(self.domains[a].nic),
        }
    }

    /// How traffic from domain `a` to domain `b` travels: the one decision
    /// `chan` (its costs) and `inject` (its hops) share.
    fn path(&self, a: usize, b: usize) -> Path {
        if a == b || self.costs.shm_between_domains {
            Path::Inside
        } else if self.costs.netfront_only {
            // Every domain's NIC is netfront: skip the other checks.
            Path::Nic
        } else if self.via_ivshmem(a, b) {
            Path::Ivshmem
        } else if self.tcp_between(a, b) {
            Path::Tcp
        } else {
            Path::Nic
        }
    }

    /// Whether domains `a` and `b` (distinct) talk through their ivshmem group.
    fn via_ivshmem(&self, a: usize, b: usize) -> bool {
        let g = self.domains[a].group;
        self.costs.ivshmem_first && g != NO_GROUP && g == self.domains[b].group
    }

    /// The cost table of domain `d`'s NIC.
    pub(super) fn nic_channel(&self, d: usize) -> &Channel {
        self.costs.channel(Chan::Nic(self.domains[d].nic))
    }

    /// A packet leaves its sender: straight to the peer inside a domain and
    /// through shared memory; over `net`, through dom0's relay (netfront),
    /// through the sender's device thread (emulated, virtio), or straight
    /// (bridge), then through the receiver's device thread if it has one.
    pub(super) fn inject(&mut self, from: TaskId, job: u32, p: Packet) {
        let to = self.jobs[job as usize].tasks[p.dst as usize];
        let (src_dom, dst_dom) = (self.tasks[from].domain, self.tasks[to].domain);
        let chan = self.peer_chan(from, job, p.dst);
        let latency = self.costs.channel(chan).latency_ns;
        let target = match self.path(src_dom, dst_dom) {
            Path::Inside | Path::Ivshmem => to,
            // Native OSes on two machines: TCP, straight onto the wire.
            Path::Tcp => return self.hop(job, p, latency, to),
            Path::Nic => match self.domains[src_dom].nic {
                // Each guest's traffic is served by one back-end vCPU of dom0.
                Nic::Netfront => self.relays[src_dom % self.relays.len()],
                Nic::Bridge => return self.hop(job, p, latency, self.receive_hop(dst_dom, to)),
                Nic::Emulated | Nic::Virtio => {
                    let ch = self.nic_channel(src_dom);
                    if ch.tx_on_sender {
                        // The device's transmit side runs in the sending
                        // vCPU now, before anything else it does.
                        let ns = ch.relay_cost(p.payload());
                        self.tasks[from].work.push_front(Work {
                            ns,
                            after: After::Transmit { job, packet: p },
                        });
                        return;
                    }
                    self.domains[src_dom].device.expect("a device")
                }
            },
        };
        self.send_packet(self.now + SimTime::from_ns(latency), target, job, p);
    }

    /// Where a packet for rank task `to` in domain `d` goes from the
    /// network: its device thread, if its NIC has one, else the rank.
    pub(super) fn receive_hop(&self, d: usize, to: TaskId) -> TaskId {
        self.domains[d].device.unwrap_or(to)
    }

    pub(super) fn send_packet(&mut self, at: SimTime, task: TaskId, job: u32, packet: Packet) {
        let slot = self.in_flight.put((job, packet));
        let ev = Ev::Arrive {
            task: task as u32,
            slot,
        };
        self.queue.push(at, ev.pack());
    }

    pub(super) fn arrive(&mut self, t: TaskId, job: u32, p: Packet) {
        let task = &mut self.tasks[t];
        task.inbox.push_back((job, p));
        let v = task.vcpu;
        match task.state {
            TaskState::Blocked if self.guest_sched.is_some() => {
                // The sender wakes it (a pipe write: a sync wake-up), from
                // its vCPU if it is in the same domain.
                let src = self.jobs[job as usize].tasks[p.src as usize];
                let waker = (self.tasks[src].domain == self.tasks[t].domain).then_some(src);
                self.wake_task_from(t, waker)
            }
            TaskState::Blocked => self.wake_task(t),
            TaskState::Runnable if task.on_cpu && task.work.is_empty() && task.debt == 0 => {
                self.kick(v)
            }
            _ => {} // busy, descheduled, or asleep: seen at its next poll
        }
    }
}
