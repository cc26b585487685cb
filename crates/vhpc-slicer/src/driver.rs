//! The one native thread that serves every running slicer of the process.
//!
//! Several slicers (one per set of CPUs, or one per vCPU) share it: each tick
//! looks at every queue, and the thread sleeps until the earliest moment one
//! of them needs it (an absolute CLOCK_MONOTONIC deadline: no drift, no
//! sleep-length arithmetic), so N slicers cost one thread's wake-ups, not N.
//! It runs SCHED_FIFO when the system lets it, so a busy domain cannot delay
//! a switch; the thread starts with the first slicer and ends after the last
//! stops. If it panics, a guard thaws every group before it goes.

use std::io;
use std::num::NonZeroU64;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::thread::ClockId;
use rustix::time::Timespec;
use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
};

use crate::queue::{Config, Queue, Stats};

/// How often a work-conserving slicer looks at its running domain by
/// default: half of it is the mean delay in noticing that a domain went idle.
pub const DEFAULT_POLL: Duration = Duration::from_micros(50);

/// The longest the thread sleeps (with only failed queues left, it still
/// wakes to see them stopped and end).
const IDLE_WAKE_NS: u64 = 10_000_000;

/// The SCHED_FIFO priority asked for (1..99): above every normal task, below
/// the kernel's own real-time threads.
const FIFO_PRIORITY: u8 = 10;

#[derive(Debug)]
struct Slot {
    id: u64,
    queue: Queue,
    /// Set when the queue failed: it is no longer sliced, all thawed.
    error: Option<String>,
}

#[derive(Debug, Default)]
struct Registry {
    slots: Vec<Slot>,
    next_id: u64,
    /// The running thread's generation and handle; a thread whose generation
    /// is no longer the registry's ends at its next wake-up.
    generation: u64,
    thread: Option<JoinHandle<()>>,
    thread_tid: Option<i32>,
    /// How the thread is scheduled (the last one started).
    policy: String,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    slots: Vec::new(),
    next_id: 0,
    generation: 0,
    thread: None,
    thread_tid: None,
    policy: String::new(),
});

/// The registry, also after a panic in the thread (its guard has thawed
/// every group and marked every queue failed by then).
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

fn timespec(ns: u64) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX),
        tv_nsec: i64::try_from(ns % 1_000_000_000).unwrap_or(0),
    }
}

/// A running slicer: its queue lives in the shared thread's registry.
#[derive(Debug)]
pub struct Slicer {
    id: u64,
    stopped: bool,
}

impl Slicer {
    /// Opens the groups, thaws the first domain and freezes the others, and
    /// hands the queue to the shared thread (started if need be). An error
    /// (a missing group, bad weights) leaves the groups as they were, or
    /// thawed if it came after the first write.
    pub fn start(config: &Config) -> io::Result<Self> {
        let mut queue = Queue::open(config)?;
        if let Err(e) = queue.begin(now_ns()) {
            let _ = queue.thaw_all();
            return Err(e);
        }
        let mut reg = registry();
        let id = reg.next_id;
        reg.next_id += 1;
        reg.slots.push(Slot {
            id,
            queue,
            error: None,
        });
        if reg.thread.is_none() {
            reg.generation += 1;
            let generation = reg.generation;
            let (tx, rx) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("vhpc-slicer".into())
                .spawn(move || serve(generation, tx));
            match spawned {
                Ok(handle) => {
                    // The thread says who it is before it first takes the registry.
                    if let Ok((tid, policy)) = rx.recv() {
                        reg.thread_tid = Some(tid);
                        reg.policy = policy;
                    }
                    reg.thread = Some(handle);
                }
                Err(e) => {
                    let slot = reg.slots.pop().expect("just pushed");
                    let _ = slot.queue.thaw_all();
                    return Err(e);
                }
            }
        }
        Ok(Self { id, stopped: false })
    }

    /// Slices and switches so far.
    pub fn stats(&self) -> Stats {
        let reg = registry();
        reg.slots
            .iter()
            .find(|s| s.id == self.id)
            .map(|s| s.queue.stats())
            .unwrap_or_default()
    }

    /// Why the slicer stopped on its own (every group thawed then), if it did.
    pub fn error(&self) -> Option<String> {
        let reg = registry();
        reg.slots
            .iter()
            .find(|s| s.id == self.id)
            .and_then(|s| s.error.clone())
    }

    /// Stops slicing and thaws every domain. Returns the final counters and
    /// the error that stopped the slicer earlier, or that thawing met.
    /// Joins the shared thread if this was the last slicer.
    pub fn stop(&mut self) -> (Stats, Option<String>) {
        if self.stopped {
            return (Stats::default(), None);
        }
        self.stopped = true;
        let mut reg = registry();
        let Some(i) = reg.slots.iter().position(|s| s.id == self.id) else {
            return (Stats::default(), None);
        };
        let slot = reg.slots.remove(i);
        let thawed = slot.queue.thaw_all().err().map(|e| format!("thawing: {e}"));
        let handle = if reg.slots.is_empty() {
            reg.generation += 1; // the thread ends at its next wake-up
            reg.thread_tid = None;
            reg.thread.take()
        } else {
            None
        };
        drop(reg);
        if let Some(handle) = handle {
            let _ = handle.join(); // a panic there was already turned into errors
        }
        (slot.queue.stats(), slot.error.or(thawed))
    }
}

impl Drop for Slicer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The shared thread's id (for its CPU time in /proc), while one runs.
pub fn thread_id() -> Option<i32> {
    registry().thread_tid
}

/// How the shared thread is scheduled: `SCHED_FIFO priority 10`, or why not.
pub fn policy() -> String {
    let reg = registry();
    if reg.policy.is_empty() {
        "not started yet".into()
    } else {
        reg.policy.clone()
    }
}

/// SCHED_FIFO if permitted, else the normal policy with the least timer
/// slack (a real-time thread has none).
fn realtime() -> String {
    let fifo = ThreadPriorityValue::try_from(FIFO_PRIORITY)
        .map_err(|e| format!("{e:?}"))
        .and_then(|value| {
            thread_priority::set_thread_priority_and_policy(
                thread_priority::thread_native_id(),
                ThreadPriority::Crossplatform(value),
                ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
            )
            .map_err(|e| format!("{e:?}"))
        });
    match fifo {
        Ok(()) => format!("SCHED_FIFO priority {FIFO_PRIORITY}"),
        Err(why) => {
            let slack = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
            format!(
                "normal priority (SCHED_FIFO refused: {why}){}",
                if slack.is_ok() {
                    ", 1 ns timer slack"
                } else {
                    ""
                }
            )
        }
    }
}

/// Thaws every queue's groups and marks them failed if the thread unwinds.
struct PanicGuard;

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut reg = registry();
            for slot in reg.slots.iter_mut().filter(|s| s.error.is_none()) {
                let _ = slot.queue.thaw_all();
                slot.error = Some("the slicer thread panicked".into());
            }
        }
    }
}

fn serve(generation: u64, hello: std::sync::mpsc::Sender<(i32, String)>) {
    let _guard = PanicGuard;
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    let _ = hello.send((tid, realtime()));
    loop {
        let wake = {
            let mut reg = registry();
            if reg.generation != generation {
                return;
            }
            let now = now_ns();
            for slot in reg.slots.iter_mut().filter(|s| s.error.is_none()) {
                if let Err(e) = slot.queue.tick(now) {
                    let _ = slot.queue.thaw_all();
                    slot.error = Some(e.to_string());
                }
            }
            let idle_wake = now.saturating_add(IDLE_WAKE_NS);
            reg.slots
                .iter()
                .filter(|s| s.error.is_none())
                .map(|s| s.queue.due())
                .min()
                .unwrap_or(idle_wake)
                .min(idle_wake)
        };
        // EINTR or a wake-up before the deadline just means an early look.
        let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &timespec(wake));
    }
}
