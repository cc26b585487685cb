//! The MPI model: wait policies, and the point-to-point protocol state of one
//! rank (matching, eager sends, rendezvous with a window of chunks).
//!
//! Protocol: a message up to the eager limit travels as one packet. A larger
//! one sends a request-to-send; once the receiver has matched it, it answers
//! clear-to-send and the data follows in chunks, at most `window` chunks
//! unacknowledged (MPICH2 nemesis copies large messages through a few
//! fixed-size cells; TCP has its window). An eager send up to the local-send
//! limit completes once its data are copied out; a larger eager one completes
//! only when the receiver, having matched and copied it, answers with a fin
//! and the sender has handled that (Open MPI's ob1 over vader above 256 B:
//! the receiver hands the fragment back, and only then does the send
//! request complete). Every packet is handled by its rank only when that
//! rank runs inside MPI, which is why a descheduled peer stalls a transfer:
//! the heart of S0.

use std::collections::VecDeque;

use crate::scenario::Channel;

/// How a rank waits inside a blocking MPI call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Poll; every `polls_before_yield` polls call the guest's
    /// `sched_yield`, which only helps if another task shares the vCPU
    /// (MPICH2 nemesis, S0's "original" library).
    BusyPoll,
    /// Poll and never yield: today's MPICH (ch4) and Open MPI by default. A
    /// rank sharing its CPU keeps it until the scheduler preempts it.
    Spin,
    /// Poll, then give the vCPU back to the hypervisor (SCHEDOP_yield), S0's
    /// "revised" library.
    HvYield,
    /// Poll, then block until a message arrives (interrupt-driven wait).
    Block,
    /// libvhpc_wait: poll, yield while yielding hands the CPU over, then
    /// sleep with a bounded backoff.
    Adaptive,
}

impl WaitPolicy {
    pub const NAMES: [&'static str; 5] = ["busy_poll", "spin", "hv_yield", "block", "adaptive"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "busy_poll" => WaitPolicy::BusyPoll,
            "spin" => WaitPolicy::Spin,
            "hv_yield" => WaitPolicy::HvYield,
            "block" => WaitPolicy::Block,
            "adaptive" => WaitPolicy::Adaptive,
            _ => return None,
        })
    }
}

/// What a packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Eager,
    /// Eager data whose send completes only with the receiver's fin.
    EagerSync,
    /// The receiver has matched and copied an `EagerSync` message.
    Fin,
    /// Request to send `bytes`.
    Rts,
    /// Clear to send.
    Cts,
    /// `bytes` of rendezvous data.
    Chunk,
    /// A chunk has been copied out; the sender may reuse its cell.
    Ack,
    /// The receiver has read a rendezvous message straight from the
    /// sender's buffer (`rndv_pull`): the send is complete.
    Pulled,
}

/// A packet between two ranks of one job (ranks are job-local).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    pub kind: Kind,
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

impl Packet {
    /// Payload bytes it carries through a NIC, a relay or the wire: a
    /// request-to-send names its message's size (`bytes`) but carries none
    /// of it (the chunks do), as its send and receive costs already say.
    pub fn payload(&self) -> u64 {
        match self.kind {
            Kind::Rts => 0,
            _ => self.bytes,
        }
    }
}

/// What to do once a piece of MPI CPU work is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    Nothing,
    /// Hand the packet to the channel.
    Inject(Packet),
    /// A receive request completed.
    RecvDone,
    /// A rendezvous send to `dst` completed.
    SendDone {
        dst: u32,
    },
    /// An eager send completed by the receiver's fin.
    SyncSendDone,
}

/// CPU work MPI asks its rank to do (copies, protocol handling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MpiWork {
    pub ns: u64,
    pub then: Then,
}

#[derive(Debug, Clone, Copy)]
struct RndvSend {
    dst: u32,
    left: u64,
    in_flight: u32,
    cleared: bool,
}

#[derive(Debug, Clone, Copy)]
struct RndvRecv {
    src: u32,
    left: u64,
}

/// Protocol limits shared by a job's ranks.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    pub eager_limit: u64,
    /// Eager sends up to this size complete locally; larger ones (up to
    /// `eager_limit`) wait for the receiver's fin.
    pub local_send_limit: u64,
}

/// The MPI state of one rank.
#[derive(Debug, Default)]
pub struct RankMpi {
    /// Posted receives not yet matched: (source, bytes).
    posted: VecDeque<(u32, u64)>,
    /// Eager data and requests-to-send that arrived before their receive.
    unexpected: VecDeque<Packet>,
    sends: Vec<RndvSend>,
    recvs: Vec<RndvRecv>,
    /// Destinations of eager sends waiting for their fin, oldest first.
    sync_sends: VecDeque<u32>,
    /// Requests started and not completed.
    pub outstanding: u32,
}

fn cost(per_msg: u64, per_kib: u64, bytes: u64) -> u64 {
    per_msg + per_kib * bytes / 1024
}

impl RankMpi {
    /// The rendezvous send to `dst` still waiting for its clear-to-send
    /// (`cleared` false) or streaming (true); a packet for none is a bug.
    fn send_to(&self, dst: u32, cleared: bool, what: &str) -> usize {
        self.sends
            .iter()
            .position(|s| s.dst == dst && s.cleared == cleared)
            .expect(what)
    }

    /// `MPI_Isend`: eager sends up to the local-send limit complete after
    /// the copy, larger eager ones at the receiver's fin; rendezvous ones
    /// start with a request-to-send.
    pub fn isend(
        &mut self,
        me: u32,
        dst: u32,
        bytes: u64,
        proto: &Protocol,
        ch: &Channel,
        out: &mut VecDeque<MpiWork>,
    ) {
        if bytes <= proto.eager_limit {
            let kind = if bytes <= proto.local_send_limit {
                Kind::Eager
            } else {
                self.outstanding += 1;
                self.sync_sends.push_back(dst);
                Kind::EagerSync
            };
            let p = Packet {
                kind,
                src: me,
                dst,
                bytes,
            };
            out.push_back(MpiWork {
                ns: cost(ch.send_ns, ch.send_ns_per_kib, bytes),
                then: Then::Inject(p),
            });
            if ch.post_send_ns > 0 {
                out.push_back(MpiWork {
                    ns: ch.post_send_ns,
                    then: Then::Nothing,
                });
            }
            return;
        }
        self.outstanding += 1;
        self.sends.push(RndvSend {
            dst,
            left: bytes,
            in_flight: 0,
            cleared: false,
        });
        let p = Packet {
            kind: Kind::Rts,
            src: me,
            dst,
            bytes,
        };
        out.push_back(MpiWork {
            ns: ch.send_ns,
            then: Then::Inject(p),
        });
    }

    /// `MPI_Irecv`: matches the first unexpected packet from `src`, if any.
    pub fn irecv(
        &mut self,
        me: u32,
        src: u32,
        bytes: u64,
        ch: &Channel,
        out: &mut VecDeque<MpiWork>,
    ) {
        self.outstanding += 1;
        match self.unexpected.iter().position(|p| p.src == src) {
            Some(i) => {
                let p = self.unexpected.remove(i).expect("index from position");
                self.matched(me, p, ch, out);
            }
            None => self.posted.push_back((src, bytes)),
        }
    }

    /// Handles one arrived packet (the rank runs inside MPI).
    pub fn on_packet(&mut self, me: u32, p: Packet, ch: &Channel, out: &mut VecDeque<MpiWork>) {
        match p.kind {
            Kind::Eager | Kind::EagerSync | Kind::Rts => {
                match self.posted.iter().position(|&(src, _)| src == p.src) {
                    Some(i) => {
                        self.posted.remove(i);
                        self.matched(me, p, ch, out);
                    }
                    None => self.unexpected.push_back(p),
                }
            }
            Kind::Cts => {
                let i = self.send_to(p.src, false, "CTS for a pending rendezvous send");
                self.sends[i].cleared = true;
                out.push_back(MpiWork {
                    ns: ch.recv_ns,
                    then: Then::Nothing,
                });
                self.fill_window(i, me, ch, out);
            }
            Kind::Chunk => {
                let i = self
                    .recvs
                    .iter()
                    .position(|r| r.src == p.src)
                    .expect("chunk for a matched rendezvous receive");
                self.recvs[i].left -= p.bytes;
                let ack = Packet {
                    kind: Kind::Ack,
                    src: me,
                    dst: p.src,
                    bytes: 0,
                };
                out.push_back(MpiWork {
                    ns: ch.chunk_recv_ns(p.bytes),
                    then: Then::Inject(ack),
                });
                if self.recvs[i].left == 0 {
                    self.recvs.remove(i);
                    out.push_back(MpiWork {
                        ns: 0,
                        then: Then::RecvDone,
                    });
                }
            }
            Kind::Fin => {
                let i = self
                    .sync_sends
                    .iter()
                    .position(|&dst| dst == p.src)
                    .expect("fin for an eager send waiting for it");
                self.sync_sends.remove(i);
                out.push_back(MpiWork {
                    ns: ch.recv_ns,
                    then: Then::SyncSendDone,
                });
            }
            Kind::Pulled => {
                let i = self.send_to(p.src, false, "pulled: a pending rendezvous send");
                let dst = self.sends.remove(i).dst;
                out.push_back(MpiWork {
                    ns: ch.recv_ns,
                    then: Then::SendDone { dst },
                });
            }
            Kind::Ack => {
                let i = self.send_to(p.src, true, "ack for a streaming send");
                self.sends[i].in_flight -= 1;
                out.push_back(MpiWork {
                    ns: ch.recv_ns,
                    then: Then::Nothing,
                });
                if self.sends[i].left == 0 && self.sends[i].in_flight == 0 {
                    let dst = self.sends.remove(i).dst;
                    out.push_back(MpiWork {
                        ns: 0,
                        then: Then::SendDone { dst },
                    });
                } else {
                    self.fill_window(i, me, ch, out);
                }
            }
        }
    }

    /// A receive met its eager data or request-to-send.
    fn matched(&mut self, me: u32, p: Packet, ch: &Channel, out: &mut VecDeque<MpiWork>) {
        match p.kind {
            Kind::Eager => out.push_back(MpiWork {
                ns: cost(ch.recv_ns, ch.recv_ns_per_kib, p.bytes),
                then: Then::RecvDone,
            }),
            Kind::EagerSync => {
                // Copied out, the fragment goes back at once: the fin costs
                // the receiver nothing beyond the copy.
                let fin = Packet {
                    kind: Kind::Fin,
                    src: me,
                    dst: p.src,
                    bytes: 0,
                };
                out.push_back(MpiWork {
                    ns: cost(ch.recv_ns, ch.recv_ns_per_kib, p.bytes),
                    then: Then::Inject(fin),
                });
                out.push_back(MpiWork {
                    ns: 0,
                    then: Then::RecvDone,
                });
            }
            Kind::Rts if p.bytes == 0 => out.push_back(MpiWork {
                ns: ch.recv_ns,
                then: Then::RecvDone,
            }),
            Kind::Rts if ch.rndv_pull => {
                // One copy out of the sender's buffer, then one packet back.
                let pulled = Packet {
                    kind: Kind::Pulled,
                    src: me,
                    dst: p.src,
                    bytes: 0,
                };
                out.push_back(MpiWork {
                    ns: ch.rndv_ns + ch.chunk_recv_ns(p.bytes),
                    then: Then::Inject(pulled),
                });
                out.push_back(MpiWork {
                    ns: 0,
                    then: Then::RecvDone,
                });
            }
            Kind::Rts => {
                self.recvs.push(RndvRecv {
                    src: p.src,
                    left: p.bytes,
                });
                let cts = Packet {
                    kind: Kind::Cts,
                    src: me,
                    dst: p.src,
                    bytes: 0,
                };
                out.push_back(MpiWork {
                    ns: ch.recv_ns + ch.rndv_ns,
                    then: Then::Inject(cts),
                });
            }
            _ => unreachable!("only eager data and requests-to-send are matched"),
        }
    }

    fn fill_window(&mut self, i: usize, me: u32, ch: &Channel, out: &mut VecDeque<MpiWork>) {
        let s = &mut self.sends[i];
        while s.in_flight < ch.window && s.left > 0 {
            let bytes = s.left.min(ch.chunk_bytes);
            s.left -= bytes;
            s.in_flight += 1;
            let p = Packet {
                kind: Kind::Chunk,
                src: me,
                dst: s.dst,
                bytes,
            };
            out.push_back(MpiWork {
                ns: ch.chunk_send_ns(bytes),
                then: Then::Inject(p),
            });
        }
    }

    /// Whether nothing is left half-done (for the end-of-run check).
    pub fn is_idle(&self) -> bool {
        self.outstanding == 0
            && self.posted.is_empty()
            && self.unexpected.is_empty()
            && self.sends.is_empty()
            && self.recvs.is_empty()
            && self.sync_sends.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ch() -> Channel {
        Channel {
            latency_ns: 100,
            send_ns: 10,
            send_ns_per_kib: 1,
            recv_ns: 20,
            recv_ns_per_kib: 2,
            relay_ns: 0,
            relay_ns_per_kib: 0,
            chunk_bytes: 4096,
            window: 2,
            ..Channel::default()
        }
    }

    const PROTO: Protocol = Protocol {
        eager_limit: 1024,
        local_send_limit: 1024,
    };

    /// Delivers every injected packet at once and runs both ranks' protocol
    /// to completion; returns the completions seen.
    fn transfer(bytes: u64, recv_first: bool) -> (u32, u32, usize) {
        transfer_with(&PROTO, bytes, recv_first)
    }

    fn transfer_with(proto: &Protocol, bytes: u64, recv_first: bool) -> (u32, u32, usize) {
        let (counts, _) = run_transfer(proto, &ch(), bytes, recv_first);
        counts
    }

    /// (receives done, sends done, packets) and the CPU each rank spent.
    fn run_transfer(
        proto: &Protocol,
        ch: &Channel,
        bytes: u64,
        recv_first: bool,
    ) -> ((u32, u32, usize), [u64; 2]) {
        let mut ranks = [RankMpi::default(), RankMpi::default()];
        let mut work: [VecDeque<MpiWork>; 2] = Default::default();
        let mut cpu = [0u64; 2];
        if recv_first {
            ranks[1].irecv(1, 0, bytes, ch, &mut work[1]);
        }
        ranks[0].isend(0, 1, bytes, proto, ch, &mut work[0]);
        if !recv_first {
            ranks[1].irecv(1, 0, bytes, ch, &mut work[1]);
        }
        let (mut recv_done, mut send_done, mut packets) = (0, 0, 0);
        while work.iter().any(|w| !w.is_empty()) {
            for r in 0..2 {
                while let Some(w) = work[r].pop_front() {
                    cpu[r] += w.ns;
                    match w.then {
                        Then::Inject(p) => {
                            packets += 1;
                            let d = p.dst as usize;
                            let mut out = VecDeque::new();
                            ranks[d].on_packet(p.dst, p, ch, &mut out);
                            work[d].extend(out);
                        }
                        Then::RecvDone => {
                            recv_done += 1;
                            ranks[r].outstanding -= 1;
                        }
                        Then::SendDone { .. } | Then::SyncSendDone => {
                            send_done += 1;
                            ranks[r].outstanding -= 1;
                        }
                        Then::Nothing => {}
                    }
                }
            }
        }
        assert!(ranks.iter().all(RankMpi::is_idle));
        ((recv_done, send_done, packets), cpu)
    }

    #[test]
    fn eager_message_is_one_packet() {
        assert_eq!(transfer(100, true), (1, 0, 1));
        assert_eq!(transfer(100, false), (1, 0, 1));
    }

    #[test]
    fn eager_message_above_the_local_send_limit_waits_for_a_fin() {
        let proto = Protocol {
            eager_limit: 1024,
            local_send_limit: 256,
        };
        // Data, then the receiver's fin: the send completes with it.
        assert_eq!(transfer_with(&proto, 257, true), (1, 1, 2));
        assert_eq!(transfer_with(&proto, 1024, false), (1, 1, 2));
        // Up to the limit, as before; above the eager limit, the rendezvous.
        assert_eq!(transfer_with(&proto, 256, true), (1, 0, 1));
        assert_eq!(transfer_with(&proto, 10_000, true), (1, 1, 8));
    }

    #[test]
    fn rendezvous_streams_chunks_with_acks() {
        // RTS, CTS, 3 chunks (4096+4096+1808), 3 acks.
        assert_eq!(transfer(10_000, true), (1, 1, 8));
        assert_eq!(transfer(10_000, false), (1, 1, 8));
    }

    #[test]
    fn rendezvous_chunks_use_their_own_rates_and_setup() {
        // 8192 B in two 4096 B chunks. Sender: RTS, 2 chunks, CTS and 2 acks
        // received; receiver: CTS (with the setup), 2 chunks.
        let c = ch();
        let (_, eager_rates) = run_transfer(&PROTO, &c, 8192, true);
        assert_eq!(eager_rates, [10 + 2 * (10 + 4) + 3 * 20, 20 + 2 * (20 + 8)]);
        let single_copy = Channel {
            rndv_send_ns_per_kib: Some(0),
            rndv_recv_ns_per_kib: Some(50),
            rndv_ns: 700,
            ..c
        };
        let (_, own_rates) = run_transfer(&PROTO, &single_copy, 8192, true);
        assert_eq!(own_rates, [10 + 2 * 10 + 3 * 20, 20 + 700 + 2 * (20 + 200)]);
        // Eager messages keep the eager rates.
        let small = |ch: &Channel| run_transfer(&PROTO, ch, 1024, true).1;
        assert_eq!(small(&c), small(&single_copy));
    }

    #[test]
    fn a_pulled_rendezvous_is_one_copy_by_the_receiver_and_one_packet_back() {
        // 8192 B read straight from the sender's buffer: RTS, then the
        // receiver's copy and its `Pulled`, which completes the send.
        let pull = Channel {
            rndv_recv_ns_per_kib: Some(50),
            rndv_ns: 700,
            rndv_pull: true,
            ..ch()
        };
        let (counts, cpu) = run_transfer(&PROTO, &pull, 8192, true);
        assert_eq!(counts, (1, 1, 2));
        // sender: the RTS and taking the answer; receiver: matching, the setup
        // and one copy at the rendezvous rate
        assert_eq!(cpu, [10 + 20, 700 + 20 + 8 * 50]);
        // eager messages are unchanged
        assert_eq!(
            run_transfer(&PROTO, &pull, 1024, true),
            run_transfer(&PROTO, &ch(), 1024, true)
        );
    }

    #[test]
    fn an_eager_send_pays_its_post_send_work_after_the_packet_leaves() {
        let c = Channel {
            post_send_ns: 500,
            ..ch()
        };
        let (counts, cpu) = run_transfer(&PROTO, &c, 100, true);
        assert_eq!(counts, (1, 0, 1));
        assert_eq!(cpu, [10 + 500, 20]);
        let mut out = VecDeque::new();
        RankMpi::default().isend(0, 1, 100, &PROTO, &c, &mut out);
        assert!(matches!(out[0].then, Then::Inject(_)) && out[1].ns == 500);
    }

    #[test]
    fn policies_round_trip_their_names() {
        for name in WaitPolicy::NAMES {
            assert!(WaitPolicy::from_name(name).is_some());
        }
        assert_eq!(WaitPolicy::from_name("yield"), None);
    }
}
