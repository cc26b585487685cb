//! The event queue: a priority queue keyed by `(time, insertion order)`.
//!
//! Events scheduled for the same instant are popped in the order they were
//! pushed (FIFO), so the order of a run never depends on the queue's
//! internals and a simulation is bit-for-bit reproducible.
//!
//! It is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990), which fits a
//! discrete-event simulation: nothing is scheduled before the last event
//! popped, so keys only grow. An event lands in the bucket of the highest
//! bit in which its time differs from that of the last pop; popping empties
//! the lowest bucket into lower ones around its earliest time. A push is a
//! few instructions, an event moves down at most once per bit, and nothing
//! is compared in a data-dependent branch as a binary heap's sifting is
//! (those mispredictions were a quarter of a run's time).
//!
//! Ties keep their push order without a sequence number: events of equal
//! time always share a bucket (the bucket depends on the time alone), every
//! bucket keeps its events in arrival order, and a bucket is emptied in order
//! into buckets that were empty.

use std::collections::VecDeque;

use crate::time::SimTime;

/// Buckets 1..=64: bucket `b` holds events whose time first differs from
/// `last` in bit `b - 1`.
const BUCKETS: usize = 64;

/// A min-queue of events of type `E`, earliest time first, FIFO among equal
/// times. Events may not be scheduled before the last one popped.
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
    /// The time of the last pop (0 before the first): no event is earlier.
    last: u64,
    /// Events at exactly `last`, in push order.
    now: VecDeque<E>,
    /// `buckets[b - 1]` is bucket `b`, each in push order among equal times.
    buckets: [Vec<(u64, E)>; BUCKETS],
    /// Bit `b - 1` set when bucket `b` is not empty.
    occupied: u64,
    len: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for `capacity` events at one instant (the
    /// buckets grow as needed and keep their room).
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue {
            last: 0,
            now: VecDeque::with_capacity(capacity),
            buckets: std::array::from_fn(|_| Vec::new()),
            occupied: 0,
            len: 0,
        }
    }

    /// Schedules `event` at `time`.
    ///
    /// # Panics
    ///
    /// If `time` is before the time of the last event popped.
    pub fn push(&mut self, time: SimTime, event: E) {
        let t = time.as_ns();
        assert!(
            t >= self.last,
            "event scheduled at {t} ns, before the last one popped ({} ns)",
            self.last
        );
        self.len += 1;
        self.insert(t, event);
    }

    /// Files an event at `t >= last` into its bucket.
    fn insert(&mut self, t: u64, event: E) {
        match bucket_of(t, self.last) {
            0 => self.now.push_back(event),
            b => {
                self.buckets[b - 1].push((t, event));
                self.occupied |= 1 << (b - 1);
            }
        }
    }

    /// Removes and returns the earliest event (the first pushed among those
    /// with the earliest time), or `None` if the queue is empty.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        let event = match self.now.pop_front() {
            Some(event) => event,
            None => self.advance()?,
        };
        self.len -= 1;
        Some((SimTime::from_ns(self.last), event))
    }

    /// Moves time on to the earliest pending event and takes it: empties the
    /// lowest non-empty bucket, in order, around its earliest time (a bucket
    /// of one event, the common case in a small queue, is simply taken).
    fn advance(&mut self) -> Option<E> {
        if self.occupied == 0 {
            return None;
        }
        let b = self.occupied.trailing_zeros() as usize;
        let bucket = &mut self.buckets[b];
        if bucket.len() == 1 {
            self.occupied &= !(1 << b);
            let (t, event) = bucket.pop().expect("one event");
            self.last = t;
            return Some(event);
        }
        self.occupied &= !(1 << b);
        let mut events = std::mem::take(bucket);
        let last = events.iter().map(|&(t, _)| t).min().expect("occupied");
        self.last = last;
        // The first event at `last` is the one to return; the rest at
        // `last` follow it into `now` (empty until here), in order.
        let mut first = None;
        for (t, event) in events.drain(..) {
            if t == last && first.is_none() {
                first = Some(event);
            } else {
                self.insert(t, event);
            }
        }
        self.buckets[b] = events; // keep its room
        first
    }

    /// The time of the event [`pop`](Self::pop) would return next.
    pub fn peek_time(&self) -> Option<SimTime> {
        if !self.now.is_empty() {
            return Some(SimTime::from_ns(self.last));
        }
        let b = self.occupied.trailing_zeros() as usize;
        let lowest = self.buckets.get(b)?;
        lowest.iter().map(|&(t, _)| t).min().map(SimTime::from_ns)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// 0 if `t == last`, else one more than the highest bit in which they differ.
fn bucket_of(t: u64, last: u64) -> usize {
    (u64::BITS - (t ^ last).leading_zeros()) as usize
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
        q.push(SimTime::from_ns(101), 'z');
        q.push(t, 'c');
        assert_eq!(q.pop(), Some((t, 'b')));
        assert_eq!(q.pop(), Some((t, 'c')));
        assert_eq!(q.pop(), Some((SimTime::from_ns(101), 'z')));
    }

    #[test]
    #[should_panic(expected = "before the last one popped")]
    fn refuses_the_past() {
        let mut q = EventQueue::new();
        q.push(SimTime::from_ns(100), ());
        q.pop();
        q.push(SimTime::from_ns(99), ());
    }

    /// The hold model against a sorted reference: pops interleaved with
    /// pushes at later times (as a simulation does), many ties, wide spans.
    #[test]
    fn hold_model_matches_sorted_order() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeMap::new();
        for i in 0..64u64 {
            let t = next() % 1000;
            q.push(SimTime::from_ns(t), i);
            reference.insert((t, i), ());
        }
        for i in 64..20_000u64 {
            let ((t, id), ()) = reference.pop_first().expect("hold keeps it full");
            assert_eq!(q.pop(), Some((SimTime::from_ns(t), id)));
            // Mostly small delays (ties included), sometimes huge ones.
            let delay = match next() % 8 {
                0 => 0,
                1 => next() >> 20,
                _ => next() % 64,
            };
            q.push(SimTime::from_ns(t + delay), i);
            reference.insert((t + delay, i), ());
            assert_eq!(q.len(), reference.len());
        }
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
