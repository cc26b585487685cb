//! The event queue: a priority queue keyed by `(time, insertion sequence)`.
//!
//! Events scheduled for the same instant are popped in the order they were
//! pushed (FIFO), so the order of a run never depends on heap internals and a
//! simulation is bit-for-bit reproducible.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::time::SimTime;

/// Orders by `(time, seq)` only, packed into one integer (time in the high
/// 64 bits) so that a heap comparison is a single compare; the payload takes
/// no part in the ordering.
#[derive(Debug)]
struct Entry<E> {
    key: Reverse<u128>,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key)
    }
}

/// A min-queue of events of type `E`, earliest time first, FIFO among equal
/// times.
///
/// ```
/// use vhpc_sim::{EventQueue, SimTime};
///
/// let mut q = EventQueue::new();
/// q.push(SimTime::from_ms(2), "late");
/// q.push(SimTime::from_ms(1), "first");
/// q.push(SimTime::from_ms(1), "second");
/// assert_eq!(q.peek_time(), Some(SimTime::from_ms(1)));
/// assert_eq!(q.pop(), Some((SimTime::from_ms(1), "first")));
/// assert_eq!(q.pop(), Some((SimTime::from_ms(1), "second")));
/// assert_eq!(q.pop(), Some((SimTime::from_ms(2), "late")));
/// assert_eq!(q.pop(), None);
/// ```
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// An empty queue with room for `capacity` events.
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            next_seq: 0,
        }
    }

    /// Schedules `event` at `time`. Returns the event's insertion sequence
    /// number, which is unique within this queue and increases with every push.
    pub fn push(&mut self, time: SimTime, event: E) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry {
            key: Reverse(pack(time, seq)),
            event,
        });
        seq
    }

    /// Removes and returns the earliest event (the first pushed among those
    /// with the earliest time), or `None` if the queue is empty.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let Entry {
            key: Reverse(key),
            event,
        } = self.heap.pop()?;
        Some((unpack_time(key), event))
    }

    /// The time of the event [`pop`](Self::pop) would return next.
    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|entry| unpack_time(entry.key.0))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

fn pack(time: SimTime, seq: u64) -> u128 {
    (u128::from(time.as_ns()) << 64) | u128::from(seq)
}

fn unpack_time(key: u128) -> SimTime {
    SimTime::from_ns((key >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<E>(q: &mut EventQueue<E>) -> Vec<(SimTime, E)> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn empty_queue() {
        let mut q: EventQueue<()> = EventQueue::new();
        assert!(q.is_empty());
        assert_eq!(q.len(), 0);
        assert_eq!(q.peek_time(), None);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn pops_in_time_order() {
        let mut q = EventQueue::new();
        for (t, name) in [(30, "c"), (10, "a"), (50, "e"), (20, "b"), (40, "d")] {
            q.push(SimTime::from_us(t), name);
        }
        assert_eq!(q.len(), 5);
        assert_eq!(q.peek_time(), Some(SimTime::from_us(10)));
        let names: Vec<_> = drain(&mut q).into_iter().map(|(_, n)| n).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        assert!(q.is_empty());
    }

    #[test]
    fn equal_times_pop_fifo() {
        let mut q = EventQueue::new();
        let t = SimTime::from_ms(5);
        // Enough equal keys that heap sifting would scramble them if the
        // sequence number were not part of the key.
        for i in 0..1000u32 {
            q.push(t, i);
        }
        q.push(SimTime::from_ms(1), u32::MAX);
        assert_eq!(q.pop(), Some((SimTime::from_ms(1), u32::MAX)));
        let got: Vec<u32> = drain(&mut q).into_iter().map(|(_, i)| i).collect();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn fifo_holds_across_interleaved_push_and_pop() {
        let mut q = EventQueue::new();
        let t = SimTime::from_ns(100);
        q.push(t, 'a');
        q.push(t, 'b');
        assert_eq!(q.pop(), Some((t, 'a')));
        q.push(t, 'c');
        q.push(SimTime::from_ns(99), 'z');
        assert_eq!(q.pop(), Some((SimTime::from_ns(99), 'z')));
        assert_eq!(q.pop(), Some((t, 'b')));
        assert_eq!(q.pop(), Some((t, 'c')));
    }

    #[test]
    fn push_returns_increasing_sequence() {
        let mut q = EventQueue::new();
        let seqs: Vec<u64> = (0..5)
            .map(|i| q.push(SimTime::from_ns(10 - i), ()))
            .collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn payload_needs_no_ordering() {
        #[derive(Debug, PartialEq)]
        struct NotOrd(f64);
        let mut q = EventQueue::new();
        q.push(SimTime::from_ns(2), NotOrd(2.0));
        q.push(SimTime::from_ns(1), NotOrd(1.0));
        assert_eq!(q.pop(), Some((SimTime::from_ns(1), NotOrd(1.0))));
    }

    /// A fixed pseudo-random schedule (xorshift, no global RNG) pushed into two
    /// queues gives identical pop sequences, sorted by (time, push order).
    #[test]
    fn deterministic_for_same_schedule() {
        fn schedule() -> Vec<(SimTime, usize)> {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            (0..5000)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (SimTime::from_ns(x % 64), i) // few distinct times: many ties
                })
                .collect()
        }
        let run = || {
            let mut q = EventQueue::with_capacity(16);
            for (t, i) in schedule() {
                q.push(t, i);
            }
            drain(&mut q)
        };
        let first = run();
        assert_eq!(first, run());

        let mut expected = schedule();
        expected.sort_by_key(|&(t, i)| (t, i)); // stable reference order
        assert_eq!(first, expected);
    }
}
