//! The physical network between machines (`host.machines` > 1, `[host.nic]`).
//!
//! A packet between ranks on different machines leaves its sender's side
//! (the rank, dom0's relay or the VM's device thread, as between VMs of one
//! machine), then crosses the sender machine's NIC, the wire and the
//! receiver machine's NIC, then goes on to the receiver's side as before.
//! Each NIC is a FIFO that serialises one packet at a time at the line rate,
//! once per direction (full duplex): it takes bandwidth, not CPU. A packet
//! is stored and forwarded by each NIC: one way costs `latency + 2 ×
//! wire_bytes / bandwidth` when both are idle, and k packets queued on one
//! NIC take k times one's serialisation. The switch between the NICs is
//! non-blocking and its delay part of `latency_ns`.

use super::*;
use crate::scenario::MachineNic;

#[derive(Debug)]
pub(super) struct Wire {
    nic: MachineNic,
    /// When each machine's NIC is free to send, and to receive, the next packet.
    tx_free: Vec<SimTime>,
    rx_free: Vec<SimTime>,
    /// Packets between the two NICs: (job, packet, the task it goes to
    /// after the receiving NIC, the latency of that last hop).
    flight: Slab<(u32, Packet, u32, u64)>,
}

impl Wire {
    /// The network of a host of several machines; None for one machine.
    pub(super) fn of(sc: &Scenario) -> Option<Box<Wire>> {
        let m = sc.host.machine_count();
        (m > 1).then(|| {
            Box::new(Wire {
                nic: sc.host.nic.clone().unwrap_or_default(),
                tx_free: vec![SimTime::ZERO; m],
                rx_free: vec![SimTime::ZERO; m],
                flight: Slab::default(),
            })
        })
    }

    /// Time one NIC takes to put `bytes` of payload on the wire: the
    /// payload in frames of `frame_bytes`, each with its overhead (at least
    /// one frame: a control message is a small frame).
    pub(super) fn serialise_ns(nic: &MachineNic, bytes: u64) -> u64 {
        let frames = bytes.div_ceil(nic.frame_bytes).max(1);
        let on_wire = bytes + frames * nic.frame_overhead_bytes;
        (on_wire * 1000).div_ceil(nic.bandwidth_mb_s)
    }
}

impl Engine {
    /// The machine of rank `r` of `job`.
    fn machine_of(&self, job: u32, r: u32) -> u32 {
        let t = self.jobs[job as usize].tasks[r as usize];
        self.domains[self.tasks[t].domain].machine
    }

    /// Whether domains `a` and `b` (distinct) are native OSes on different
    /// machines: they talk through the host kernels' TCP and the wire.
    pub(super) fn tcp_between(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.domains[a], &self.domains[b]);
        a.native && b.native && a.machine != b.machine
    }

    /// Packet `p` of `job` leaves its sender's side for task `next`, which
    /// it reaches `latency_ns` after the receiver's side gets it: across
    /// machines, both NICs and the wire come first.
    #[inline]
    pub(super) fn hop(&mut self, job: u32, p: Packet, latency_ns: u64, next: TaskId) {
        if self.wire.is_none() || self.machine_of(job, p.src) == self.machine_of(job, p.dst) {
            return self.send_packet(self.now + SimTime::from_ns(latency_ns), next, job, p);
        }
        self.wire_tx(job, p, latency_ns, next);
    }

    /// The sending machine's NIC takes the packet after those before it.
    #[inline(never)]
    fn wire_tx(&mut self, job: u32, p: Packet, latency_ns: u64, next: TaskId) {
        let from = self.machine_of(job, p.src) as usize;
        let now = self.now;
        let w = self.wire.as_mut().expect("only across machines");
        let ser = SimTime::from_ns(Wire::serialise_ns(&w.nic, p.payload()));
        let sent = w.tx_free[from].max(now) + ser;
        w.tx_free[from] = sent;
        let at = sent + SimTime::from_ns(w.nic.latency_ns);
        let slot = w.flight.put((job, p, next as u32, latency_ns));
        self.queue.push(at, Ev::WireRx { slot }.pack());
    }

    /// A packet reaches the receiving machine's NIC: it waits for the
    /// packets before it, is received, and goes on.
    pub(super) fn wire_rx(&mut self, slot: u32) {
        let now = self.now;
        let machine = {
            let w = self.wire.as_ref().expect("wire events need the wire");
            let (job, p, _, _) = *w.flight.peek(slot);
            self.machine_of(job, p.dst) as usize
        };
        let w = self.wire.as_mut().expect("checked above");
        let (job, p, next, latency_ns) = w.flight.take(slot);
        let ser = SimTime::from_ns(Wire::serialise_ns(&w.nic, p.payload()));
        let done = w.rx_free[machine].max(now) + ser;
        w.rx_free[machine] = done;
        self.send_packet(done + SimTime::from_ns(latency_ns), next as TaskId, job, p);
    }
}
