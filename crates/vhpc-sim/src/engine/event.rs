//! The engine's events, and their packed form in the queue.
//!
//! The queue holds an event as one 64-bit word beside its time: entries are
//! 16 bytes, and a push stores a value built in a register. The 12-byte enum
//! was written to the stack field by field and read back whole, a load the
//! CPU could not serve from its store buffer: most of the queue's push time
//! (8 to 12 % of a run) stalled there; packed, runs take 4 to 5 % less.

/// What happens at an instant. Indices (task, vCPU, core) are below 2^28;
/// generations and packet slots are 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ev {
    /// The core's decision may expire (slice end, or an idle core's wake-up);
    /// valid only if the core's `slice_end` is this instant.
    Slice { core: u32 },
    /// The running task's debt and front work item are done.
    Work { task: u32, gen: u32 },
    /// A poll window of a spinning task ends.
    Poll { task: u32, gen: u32 },
    /// A sleeping task's timer fires (a sleeping task has exactly one).
    Wake { task: u32 },
    /// The guest slice of a vCPU with several runnable tasks ends.
    GuestSlice { vcpu: u32, gen: u32 },
    /// A packet (kept in `Engine::in_flight`, so events stay small) reaches
    /// a task's inbox.
    Arrive { task: u32, slot: u32 },
    /// The hypervisor scheduler's accounting tick.
    Timer,
    /// A packet (kept in the wire's `flight`) reaches the receiving
    /// machine's NIC.
    WireRx { slot: u32 },
    /// The guest scheduler's tick (`guest.scheduler = "linux"` only):
    /// periodic load balancing.
    GuestTick,
    /// A domain's guest timer tick (`domains.tick`).
    Tick { domain: u32 },
    /// The hypervisor's timer tick on every core (`hypervisor.host_tick`).
    HostTick,
}

/// An [`Ev`] as one word: its kind (0..=15) in the top 4 bits, its index in the next
/// 28, its generation or slot in the low 32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PackedEv(u64);

/// Indices fit in 28 bits: validation allows at most 2^20 vCPUs and 2^20
/// ranks (tasks: ranks, plus a relay and a background task per vCPU) and
/// 4096 cores.
const INDEX_BITS: u32 = 28;

impl Ev {
    pub(super) fn pack(self) -> PackedEv {
        let (kind, index, arg) = match self {
            Ev::Slice { core } => (0, core, 0),
            Ev::Work { task, gen } => (1, task, gen),
            Ev::Poll { task, gen } => (2, task, gen),
            Ev::Wake { task } => (3, task, 0),
            Ev::GuestSlice { vcpu, gen } => (4, vcpu, gen),
            Ev::Arrive { task, slot } => (5, task, slot),
            Ev::Timer => (6, 0, 0),
            Ev::WireRx { slot } => (7, 0, slot),
            Ev::GuestTick => (8, 0, 0),
            Ev::Tick { domain } => (9, domain, 0),
            Ev::HostTick => (10, 0, 0),
        };
        assert!(index < 1 << INDEX_BITS, "event index {index} too large");
        PackedEv(kind << 60 | u64::from(index) << 32 | u64::from(arg))
    }
}

impl PackedEv {
    pub(super) fn unpack(self) -> Ev {
        let index = (self.0 >> 32) as u32 & ((1 << INDEX_BITS) - 1);
        let arg = self.0 as u32;
        match self.0 >> 60 {
            0 => Ev::Slice { core: index },
            1 => Ev::Work {
                task: index,
                gen: arg,
            },
            2 => Ev::Poll {
                task: index,
                gen: arg,
            },
            3 => Ev::Wake { task: index },
            4 => Ev::GuestSlice {
                vcpu: index,
                gen: arg,
            },
            5 => Ev::Arrive {
                task: index,
                slot: arg,
            },
            6 => Ev::Timer,
            7 => Ev::WireRx { slot: arg },
            8 => Ev::GuestTick,
            9 => Ev::Tick { domain: index },
            _ => Ev::HostTick,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_at_its_limits() {
        let top = (1 << INDEX_BITS) - 1;
        for ev in [
            Ev::Slice { core: top },
            Ev::Work {
                task: top,
                gen: u32::MAX,
            },
            Ev::Poll {
                task: 0,
                gen: u32::MAX,
            },
            Ev::Wake { task: top },
            Ev::GuestSlice { vcpu: 7, gen: 0 },
            Ev::Arrive {
                task: top,
                slot: u32::MAX,
            },
            Ev::Timer,
            Ev::WireRx { slot: u32::MAX },
            Ev::GuestTick,
            Ev::Tick { domain: top },
            Ev::HostTick,
        ] {
            assert_eq!(ev.pack().unpack(), ev);
        }
    }

    #[test]
    #[should_panic(expected = "too large")]
    fn an_index_beyond_28_bits_is_refused() {
        Ev::Wake {
            task: 1 << INDEX_BITS,
        }
        .pack();
    }
}
