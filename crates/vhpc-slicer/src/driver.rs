//! The native threads that serve every running slicer of the process.
//!
//! One *driver* thread does every switch. Several slicers (one per set of
//! CPUs, or one per vCPU) share it: each tick looks at every queue, and the
//! thread sleeps until the earliest moment one of them needs it (a slice's
//! end, or a poll), so N slicers cost one thread's wake-ups, not N. It runs
//! SCHED_FIFO when the system lets it, so a busy domain cannot delay a switch.
//!
//! Noticing that a domain went idle by polling costs a timer wake-up each
//! time (about 20 µs of CPU in a VM), so the driver polls only as a fallback.
//! The quick path is one *watcher* thread per CPU, SCHED_IDLE and pinned: it
//! runs only when its CPU has nothing else to run, which is exactly when the
//! running domain's tasks there have all blocked, as a hypervisor gets the
//! CPU back when a vCPU halts. While a domain's task keeps its CPU busy the
//! watcher waits in `sched_yield`, runnable but not run (no timer at all);
//! the moment the task blocks, it runs, checks the domain's tasks in /proc,
//! and wakes the driver to switch. A watcher whose CPU holds no running
//! domain's task sleeps until the driver switches.
//!
//! The threads start with the first slicer and end after the last stops. If
//! the driver panics, a guard thaws every group before it goes.

use std::io;
use std::num::NonZeroU64;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::thread::ClockId;
use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
};

use crate::queue::{Config, Queue, Stats, Watch};

/// How often the driver itself looks at a work-conserving slicer's running
/// domain by default: the fallback when a watcher cannot run (its CPU busy
/// with work outside the domains).
pub const DEFAULT_POLL: Duration = Duration::from_micros(500);

/// How long a watcher sleeps when its CPU holds no running domain's task
/// (the driver wakes it at every switch).
const WATCH_IDLE: Duration = Duration::from_millis(1);

/// How long a watcher sleeps when no running slicer is work-conserving.
const WATCH_NOTHING: Duration = Duration::from_millis(100);

/// A watcher's `sched_yield` that returns sooner than this found nothing
/// else runnable on its CPU: it sleeps this long instead of spinning.
const WATCH_SPIN_NS: u64 = 20_000;

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
    watchers: Vec<JoinHandle<()>>,
    /// How the thread is scheduled (the last one started).
    policy: String,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    slots: Vec::new(),
    next_id: 0,
    generation: 0,
    thread: None,
    thread_tid: None,
    watchers: Vec::new(),
    policy: String::new(),
});

/// The registry, also after a panic in the thread (its guard has thawed
/// every group and marked every queue failed by then).
fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// CLOCK_MONOTONIC in nanoseconds (Python's `time.monotonic_ns()`).
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
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
                    reg.watchers = spawn_watchers(generation);
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

    /// The switches logged so far, as (decided, thawed) nanoseconds.
    pub fn log(&self) -> Vec<(u64, u64)> {
        let reg = registry();
        reg.slots
            .iter()
            .find(|s| s.id == self.id)
            .map(|s| {
                s.queue
                    .log()
                    .iter()
                    .map(|w| (w.decided, w.thawed))
                    .collect()
            })
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
        let handles: Vec<_> = if reg.slots.is_empty() {
            reg.generation += 1; // the threads end at their next wake-up
            reg.thread_tid = None;
            let watchers = std::mem::take(&mut reg.watchers);
            reg.thread.take().into_iter().chain(watchers).collect()
        } else {
            Vec::new()
        };
        drop(reg);
        for handle in handles {
            handle.thread().unpark();
            let _ = handle.join(); // a driver panic was already turned into errors
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
        let (wake, watchers) = {
            let mut reg = registry();
            if reg.generation != generation {
                return;
            }
            let now = now_ns();
            let mut switched = false;
            for slot in reg.slots.iter_mut().filter(|s| s.error.is_none()) {
                match slot.queue.tick(now) {
                    Ok(changed) => switched |= changed,
                    Err(e) => {
                        let _ = slot.queue.thaw_all();
                        slot.error = Some(e.to_string());
                    }
                }
            }
            let idle_wake = now.saturating_add(IDLE_WAKE_NS);
            let wake = reg
                .slots
                .iter()
                .filter(|s| s.error.is_none())
                .map(|s| s.queue.due())
                .min()
                .unwrap_or(idle_wake)
                .min(idle_wake);
            let watchers: Vec<_> = if switched {
                reg.watchers.iter().map(|h| h.thread().clone()).collect()
            } else {
                Vec::new()
            };
            (wake, watchers)
        };
        // The watchers look at the domains just thawed.
        for watcher in watchers {
            watcher.unpark();
        }
        // A watcher unparks this thread when it finds a domain idle.
        std::thread::park_timeout(Duration::from_nanos(wake.saturating_sub(now_ns())));
    }
}

/// One watcher per CPU this process may run on, each pinned there, SCHED_IDLE.
fn spawn_watchers(generation: u64) -> Vec<JoinHandle<()>> {
    let Ok(allowed) = rustix::thread::sched_getaffinity(None) else {
        return Vec::new();
    };
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .filter_map(|cpu| {
            std::thread::Builder::new()
                .name(format!("vhpc-watch{cpu}"))
                .spawn(move || watch(generation, cpu))
                .ok()
        })
        .collect()
}

fn watch(generation: u64, cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if rustix::thread::sched_setaffinity(None, &set).is_err() {
        return; // the CPU went away: the driver's polling covers it
    }
    let _ = thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Idle),
    );
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    loop {
        let (found, driver, any_wc) = {
            let Ok(mut reg) = REGISTRY.try_lock() else {
                // The driver is at work (or poisoned: it has thawed all).
                std::thread::park_timeout(Duration::from_nanos(WATCH_SPIN_NS));
                continue;
            };
            if reg.generation != generation {
                return;
            }
            let mut found = Watch::Elsewhere;
            let mut any_wc = false;
            for slot in reg.slots.iter_mut().filter(|s| s.error.is_none()) {
                any_wc |= slot.queue.work_conserving();
                match slot.queue.watch(cpu) {
                    Ok(Watch::Idle) => found = Watch::Idle,
                    Ok(Watch::BusyHere) if found == Watch::Elsewhere => found = Watch::BusyHere,
                    _ => {} // an error is the driver's to find and report
                }
            }
            (
                found,
                reg.thread.as_ref().map(|h| h.thread().clone()),
                any_wc,
            )
        };
        match found {
            Watch::Idle => {
                if let Some(driver) = driver {
                    driver.unpark();
                }
                std::thread::park_timeout(WATCH_IDLE);
            }
            Watch::BusyHere => {
                // Runnable but not run while the domain's task has the CPU.
                let before = now_ns();
                rustix::thread::sched_yield();
                if now_ns().saturating_sub(before) < WATCH_SPIN_NS {
                    std::thread::park_timeout(Duration::from_nanos(WATCH_SPIN_NS));
                }
            }
            Watch::Elsewhere if any_wc => std::thread::park_timeout(WATCH_IDLE),
            Watch::Elsewhere => std::thread::park_timeout(WATCH_NOTHING),
        }
    }
}
