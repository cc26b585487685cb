//! The native threads that serve every running slicer of the process.
//!
//! One *driver* thread owns the timing: several slicers (one per set of
//! CPUs, or one per vCPU) share it; each tick looks at every queue, and it
//! sleeps until the earliest moment one of them needs it (a slice's end, or
//! a poll), so N slicers cost one thread's wake-ups, not N. It runs
//! SCHED_FIFO when the system lets it, so a busy domain cannot delay a switch.
//!
//! Noticing that a domain went idle by polling costs a timer wake-up each
//! time (about 20 µs of CPU in a VM), so the driver polls only as a fallback.
//! The quick path is one *watcher* thread per CPU, SCHED_IDLE and pinned: it
//! runs only when its CPU has nothing else to run, which is when the running
//! domain's tasks there have blocked, as a hypervisor gets the CPU back when
//! a vCPU halts. While a domain's task keeps its CPU busy the watcher waits
//! in `sched_yield`, runnable but not run (no timer at all). When it runs, it
//! reads the domain's tasks in /proc through a published [`View`], without
//! the registry's lock (a SCHED_IDLE thread holding a lock can be preempted
//! for milliseconds), and if the domain is idle it raises itself to
//! SCHED_FIFO, takes the registry and switches on the spot, then drops back
//! to SCHED_IDLE, which lets the thawed domain run; no other CPU is woken.
//! Where SCHED_FIFO is refused it wakes the driver to switch instead. A
//! domain that has not run since its thaw (every domain asleep) is switched
//! away from only after an idle round (see `queue::IDLE_ROUND_MIN_NS`).
//!
//! The threads start with the first slicer and end after the last stops. If
//! the driver panics, a guard thaws every group before it goes.

use std::io;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::thread::ClockId;
use thread_priority::{
    RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
};

use crate::group;
use crate::hints::Doorbell;
use crate::queue::{Config, Queue, Stats, View};

/// How often the driver itself looks at a work-conserving slicer's running
/// domain by default: the fallback when a watcher cannot run (its CPU busy
/// with work outside the domains).
pub const DEFAULT_POLL: Duration = Duration::from_micros(500);

/// How long a watcher sleeps when its CPU holds no running domain's task
/// (the driver wakes it at every switch).
const WATCH_IDLE: Duration = Duration::from_millis(1);

/// How long a watcher sleeps when no running slicer is work-conserving.
const WATCH_NOTHING: Duration = Duration::from_millis(100);

/// How long a watcher sleeps instead of spinning when its `sched_yield`
/// switched to nothing (a domain's task it saw runnable here is not picked).
const WATCH_SPIN_NS: u64 = 20_000;

/// A watcher's `sched_yield` that returns sooner than this switched to
/// nothing (alone, a yield takes well under a µs here). One that took longer
/// ran someone, most often a domain's helper thread waking for a few µs: the
/// watcher looks again at once. Parking there (the bound was 20 µs) let an
/// otherwise idle vCPU halt, and a `sched_switch` trace showed its timer
/// waking it some 70 µs later, not 20, while the domain it watched sat idle.
const WATCH_QUICK_YIELD_NS: u64 = 2_000;

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

/// What the watchers look at, without the registry: (slot id, view) of each
/// work-conserving slicer's running domain. Its lock is held only to copy or
/// replace the list (a few Arc clones), and replaced only by a thread holding
/// the registry, so a watcher never waits for the registry at SCHED_IDLE.
/// Nobody waits for this lock either: a SCHED_IDLE watcher preempted while it
/// holds it (a thawed task wakes on its CPU just then) may not run again for
/// hundreds of ms beside a busy task, and the driver, waiting for it with the
/// registry held, stalled every slicer that long (a 0.1 s slice lasted up to
/// 0.57 s). So the driver publishes when the lock is free, else on its next
/// wake, soon ([`REPUBLISH_NS`]); a watcher that finds it taken looks later.
static VIEWS: Mutex<Vec<(u64, Arc<View>)>> = Mutex::new(Vec::new());

/// Views not yet published: the lock was taken when the driver tried.
static UNPUBLISHED: AtomicBool = AtomicBool::new(false);

/// How soon the driver tries again to publish views it could not.
const REPUBLISH_NS: u64 = 50_000;

/// Tries a watcher makes for the views in a row before it sleeps.
const VIEWS_TRIES: u32 = 64;

/// The CPUs that have a watcher, one bit each (CPUs < 64).
static WATCHED: AtomicU64 = AtomicU64::new(0);

/// The registry's generation, for the watchers to see that they must end.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn publish(reg: &Registry) {
    let views = reg
        .slots
        .iter()
        .filter(|s| s.error.is_none())
        .filter_map(|s| s.queue.view().map(|v| (s.id, Arc::new(v))))
        .collect();
    match VIEWS.try_lock() {
        Ok(mut held) => *held = views,
        Err(TryLockError::Poisoned(e)) => *e.into_inner() = views,
        Err(TryLockError::WouldBlock) => {
            UNPUBLISHED.store(true, Ordering::Release);
            return;
        }
    }
    UNPUBLISHED.store(false, Ordering::Release);
}

/// The published views, or None while another thread holds them.
fn views() -> Option<Vec<(u64, Arc<View>)>> {
    match VIEWS.try_lock() {
        Ok(held) => Some(held.clone()),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner().clone()),
        Err(TryLockError::WouldBlock) => None,
    }
}

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
        publish(&reg);
        if reg.thread.is_some() {
            // The driver may sleep without a doorbell yet: it waits on this one from now on.
            wake_driver(&reg).ring();
        }
        if reg.thread.is_none() {
            reg.generation += 1;
            let generation = reg.generation;
            GENERATION.store(generation, Ordering::Release);
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
                    publish(&reg);
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
            .map(|s| pairs(s.queue.log()))
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

    /// Stops slicing and thaws every domain. Returns the final counters, the
    /// final log (taken together, so that they agree), and the error that
    /// stopped the slicer earlier, or that thawing met. Joins the shared
    /// thread if this was the last slicer.
    pub fn stop(&mut self) -> (Stats, Vec<(u64, u64)>, Option<String>) {
        if self.stopped {
            return (Stats::default(), Vec::new(), None);
        }
        self.stopped = true;
        let mut reg = registry();
        let Some(i) = reg.slots.iter().position(|s| s.id == self.id) else {
            return (Stats::default(), Vec::new(), None);
        };
        let slot = reg.slots.remove(i);
        publish(&reg);
        let wake = wake_driver(&reg);
        let thawed = slot.queue.thaw_all().err().map(|e| format!("thawing: {e}"));
        let handles: Vec<_> = if reg.slots.is_empty() {
            reg.generation += 1; // the threads end at their next wake-up
            GENERATION.store(reg.generation, Ordering::Release);
            reg.thread_tid = None;
            let watchers = std::mem::take(&mut reg.watchers);
            reg.thread.take().into_iter().chain(watchers).collect()
        } else {
            Vec::new()
        };
        drop(reg);
        wake.ring();
        if let Some(h) = slot.queue.hints() {
            h.doorbell().ring(); // the driver may wait on this slot's bell
        }
        let caller = CallerPolicy::save();
        for handle in handles {
            hurry(&handle);
            handle.thread().unpark();
            let _ = handle.join(); // a driver panic was already turned into errors
        }
        caller.restore();
        let log = pairs(slot.queue.log());
        (slot.queue.stats(), log, slot.error.or(thawed))
    }
}

/// A log as (decided, thawed) pairs.
fn pairs(log: &[crate::queue::Switch]) -> Vec<(u64, u64)> {
    log.iter().map(|w| (w.decided, w.thawed)).collect()
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

/// Wakes the driver: unparks it, and rings the doorbells it may wait on
/// (returned, to ring once the registry is released).
#[derive(Debug, Default)]
struct Wake(Option<std::thread::Thread>, Vec<Doorbell>);

impl Wake {
    fn ring(self) {
        if let Some(driver) = self.0 {
            driver.unpark();
        }
        for bell in self.1 {
            bell.ring();
        }
    }
}

fn wake_driver(reg: &Registry) -> Wake {
    Wake(
        reg.thread.as_ref().map(|h| h.thread().clone()),
        reg.slots
            .iter()
            .filter_map(|s| s.queue.hints().map(crate::hints::Hints::doorbell))
            .collect(),
    )
}

fn serve(generation: u64, hello: std::sync::mpsc::Sender<(i32, String)>) {
    let _guard = PanicGuard;
    let tid = rustix::thread::gettid().as_raw_nonzero().get();
    let _ = hello.send((tid, realtime()));
    loop {
        let (wake, watchers, bell) = {
            let mut reg = registry();
            if reg.generation != generation {
                return;
            }
            // With hints the driver waits on the ranks' doorbell (the first
            // hint file's; others are seen at the next tick), read before
            // looking so that a ring meanwhile is not lost.
            let bell = reg
                .slots
                .iter()
                .filter(|s| s.error.is_none())
                .find_map(|s| s.queue.hints().map(|h| h.doorbell()))
                .map(|b| {
                    let seen = b.value();
                    (b, seen)
                });
            let now = now_ns();
            let switched = tick_all(&mut reg, now);
            let idle_wake = now.saturating_add(IDLE_WAKE_NS);
            let wake = reg
                .slots
                .iter()
                .filter(|s| s.error.is_none())
                .map(|s| s.queue.due())
                .min()
                .unwrap_or(idle_wake)
                .min(idle_wake)
                .min(if UNPUBLISHED.load(Ordering::Acquire) {
                    now.saturating_add(REPUBLISH_NS)
                } else {
                    u64::MAX
                });
            let watchers: Vec<_> = if switched {
                reg.watchers.iter().map(|h| h.thread().clone()).collect()
            } else {
                Vec::new()
            };
            (wake, watchers, bell)
        };
        // The watchers look at the domains just thawed.
        for watcher in watchers {
            watcher.unpark();
        }
        // A watcher unparks this thread when it finds a domain idle (and rings
        // the doorbell, if there is one); a rank rings it when all its member waits.
        let timeout = Duration::from_nanos(wake.saturating_sub(now_ns()));
        match bell {
            Some((bell, seen)) => bell.wait(seen, timeout),
            None => std::thread::park_timeout(timeout),
        }
    }
}

/// Ticks every queue that is due, then publishes the running domains to the
/// watchers; a queue that fails is thawed and keeps its error. Whether any
/// domain changed.
fn tick_all(reg: &mut Registry, now: u64) -> bool {
    let mut switched = cosched(reg, now);
    for slot in reg.slots.iter_mut().filter(|s| s.error.is_none()) {
        match slot.queue.tick(now) {
            Ok(changed) => switched |= changed,
            Err(e) => {
                let _ = slot.queue.thaw_all();
                slot.error = Some(e.to_string());
            }
        }
    }
    publish(reg);
    switched
}

/// Co-scheduling (per-vCPU slicing with hints): a member whose ranks all
/// wait, some in a collective, brings in its domain's vCPUs on the other
/// CPUs (the queues), and is held (not yielded) while one of them runs and
/// has yet to arrive. Whether any queue switched.
fn cosched(reg: &mut Registry, now: u64) -> bool {
    let wants: Vec<(usize, u32)> = reg
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.error.is_none())
        .filter_map(|(i, s)| s.queue.wants_sibling(now).map(|d| (i, d)))
        .collect();
    let mut switched = false;
    for (i, domain) in wants {
        let mut coming = false;
        for (j, slot) in reg.slots.iter_mut().enumerate() {
            if j == i || slot.error.is_some() {
                continue;
            }
            let pulls = slot.queue.stats().pulls;
            match slot.queue.pull(domain, now) {
                Ok(here) => {
                    coming |= here;
                    switched |= slot.queue.stats().pulls != pulls;
                }
                Err(e) => {
                    let _ = slot.queue.thaw_all();
                    slot.error = Some(e.to_string());
                }
            }
        }
        if coming {
            reg.slots[i].queue.hold(now);
        }
    }
    switched
}

/// The calling watcher's policy: SCHED_FIFO at the driver's priority while
/// it switches (so the domain it thaws cannot preempt it while it holds the
/// registry), SCHED_IDLE otherwise. Whether the change was allowed.
fn watcher_policy(switching: bool) -> bool {
    let (priority, policy) = if switching {
        let Ok(value) = ThreadPriorityValue::try_from(FIFO_PRIORITY) else {
            return false;
        };
        (
            ThreadPriority::Crossplatform(value),
            ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
        )
    } else {
        (
            ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Idle),
        )
    };
    // For a normal policy the crate also sets a nice value, which may fail
    // after the policy itself has changed: check the policy.
    let _ = thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        priority,
        policy,
    );
    thread_priority::thread_schedule_policy().is_ok_and(|p| p == policy)
}

/// Lets a thread that is to end run at once (SCHED_FIFO, where allowed): a
/// SCHED_IDLE watcher pinned to a CPU where a thawed task spins may never run
/// again otherwise (seen: a lab noise domain's spinner, thawed by `stop`, kept
/// the CPU-0 watcher, and so `stop`'s join, waiting for minutes).
fn hurry(handle: &JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    if let Ok(value) = ThreadPriorityValue::try_from(FIFO_PRIORITY) {
        let _ = thread_priority::set_thread_priority_and_policy(
            handle.as_pthread_t(),
            ThreadPriority::Crossplatform(value),
            ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
        );
    }
}

/// The calling thread's scheduling, put back by [`CallerPolicy::restore`] if
/// something changed it meanwhile. [`hurry`] raises threads that are ending,
/// and glibc's pthread_setschedparam (2.36 here) checks the target's kernel
/// thread id, then reads it again for the system call: a thread that exits in
/// between has left 0 there, which the kernel takes for the caller, now at
/// SCHED_FIFO. Likely how a test run was once left with pytest's main thread at
/// SCHED_FIFO 10, its MPI ranks inheriting it (tests/conftest.py). The policy
/// is read from the kernel (/proc/thread-self/stat): glibc's
/// pthread_getschedparam answers from the values it cached for the thread,
/// which that system call did not update.
#[derive(Debug)]
struct CallerPolicy {
    policy: Option<(u32, u32)>,
    nice: Option<i32>,
}

/// The calling thread's (policy, real-time priority) as the kernel has them:
/// fields 41 and 40 of /proc/thread-self/stat.
fn kernel_policy() -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // after the command: field 3 is index 0
    Some((
        fields.get(41 - 3)?.parse().ok()?,
        fields.get(40 - 3)?.parse().ok()?,
    ))
}

impl CallerPolicy {
    fn save() -> Self {
        Self {
            policy: kernel_policy(),
            nice: rustix::process::getpriority_process(None).ok(),
        }
    }

    fn restore(&self) {
        let Some((policy, priority)) = self.policy else {
            return;
        };
        if kernel_policy() == Some((policy, priority)) {
            return;
        }
        let (policy, value) = match policy {
            1 | 2 => (
                ThreadSchedulePolicy::Realtime(if policy == 1 {
                    RealtimeThreadSchedulePolicy::Fifo
                } else {
                    RealtimeThreadSchedulePolicy::RoundRobin
                }),
                ThreadPriority::from_posix(thread_priority::ScheduleParams {
                    sched_priority: i32::try_from(priority).unwrap_or(1),
                }),
            ),
            // a normal policy's static priority is 0; the crate sets a nice
            // value too, put back below
            3 => (
                ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Batch),
                ThreadPriority::Min,
            ),
            5 => (
                ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Idle),
                ThreadPriority::Min,
            ),
            _ => (
                ThreadSchedulePolicy::Normal(thread_priority::NormalThreadSchedulePolicy::Other),
                ThreadPriority::Min,
            ),
        };
        let _ = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            value,
            policy,
        );
        if let Some(nice) = self.nice {
            let _ = rustix::process::setpriority_process(None, nice);
        }
    }
}

/// One watcher per CPU this process may run on, each pinned there, SCHED_IDLE.
fn spawn_watchers(generation: u64) -> Vec<JoinHandle<()>> {
    let Ok(allowed) = rustix::thread::sched_getaffinity(None) else {
        return Vec::new();
    };
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect();
    let mask = cpus
        .iter()
        .filter(|&&c| c < 64)
        .fold(0, |m, c| m | 1u64 << c);
    WATCHED.store(mask, Ordering::Relaxed);
    let first = cpus.first().copied();
    cpus.into_iter()
        .filter_map(|cpu| {
            std::thread::Builder::new()
                .name(format!("vhpc-watch{cpu}"))
                .spawn(move || watch(generation, cpu, Some(cpu) == first))
                .ok()
        })
        .collect()
}

/// What a watcher found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// The running domain of this slot, in this slice, is idle: switch now.
    Idle { slot: u64, seq: u64, ran: bool },
    /// A running domain idle without having run since its thaw (every domain
    /// asleep): look again at this time, not before (see IDLE_ROUND_MIN_NS).
    NotYet(u64),
    /// A task of a running domain wants the watcher's CPU: look again when
    /// it blocks (the watcher runs only then).
    BusyHere,
    /// Nothing for this CPU (domains busy on others, or none to watch).
    Elsewhere,
}

/// Looks at every running work-conserving domain, without the registry. An
/// idle domain is this watcher's to switch if one of its tasks last ran on
/// this CPU, or (no task, or none on a CPU with a watcher) if this is the
/// first watcher.
fn look(
    stats: &mut group::StatFiles,
    views: &[(u64, Arc<View>)],
    cpu: usize,
    first: bool,
) -> Watch {
    let mut found = Watch::Elsewhere;
    let here = if cpu < 64 { 1u64 << cpu } else { 0 };
    for (slot, view) in views {
        let scan = stats.scan(&view.tids, &view.tasks_file);
        if scan.runnable {
            if scan.cpus & here != 0 {
                found = Watch::BusyHere;
            }
        } else if scan.last_cpus & here != 0
            || (first && scan.last_cpus & WATCHED.load(Ordering::Relaxed) == 0)
        {
            let ran = stats.runs(&view.tids) != view.runs_at_thaw;
            if !ran && now_ns() < view.idle_due {
                return Watch::NotYet(view.idle_due);
            }
            return Watch::Idle {
                slot: *slot,
                seq: view.seq,
                ran,
            };
        }
    }
    found
}

fn watch(generation: u64, cpu: usize, first: bool) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if rustix::thread::sched_setaffinity(None, &set).is_err() {
        return; // the CPU went away: the driver's polling covers it
    }
    watcher_policy(false);
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let mut stats = group::StatFiles::default();
    let mut taken = 0u32;
    loop {
        if GENERATION.load(Ordering::Acquire) != generation {
            return;
        }
        let Some(views) = views() else {
            // Another thread copies or replaces them just now (most often the
            // other CPUs' watchers): try again at once, this is idle time; a
            // holder that stays (preempted) is waited for by sleeping.
            taken += 1;
            if taken % VIEWS_TRIES == 0 {
                std::thread::park_timeout(Duration::from_nanos(WATCH_SPIN_NS));
            } else {
                rustix::thread::sched_yield();
            }
            continue;
        };
        taken = 0;
        let found = look(&mut stats, &views, cpu, first);
        let nothing = views.is_empty();
        drop(views);
        match found {
            Watch::Idle { slot, seq, ran } => {
                let at = now_ns();
                // Switch here, on the CPU the next domain will likely use, with
                // no cross-CPU wake-up; without SCHED_FIFO, the driver does.
                let fifo = watcher_policy(true);
                let (others, driver, wake) = {
                    let mut reg = registry();
                    if reg.generation != generation {
                        return;
                    }
                    let current = reg
                        .slots
                        .iter_mut()
                        .find(|s| s.id == slot)
                        .is_some_and(|s| s.queue.hint(seq, at, ran));
                    // A stale view (the driver switched meanwhile): nothing to do.
                    let others: Vec<_> = if current && fifo && tick_all(&mut reg, now_ns()) {
                        reg.watchers.iter().map(|h| h.thread().clone()).collect()
                    } else {
                        Vec::new()
                    };
                    let driver = reg.thread.as_ref().map(|h| h.thread().clone());
                    (others, driver, wake_driver(&reg))
                };
                if fifo {
                    watcher_policy(false); // the thawed domain runs from here
                } else if driver.is_some() {
                    wake.ring();
                    std::thread::park_timeout(WATCH_IDLE);
                }
                for watcher in others {
                    watcher.unpark();
                }
            }
            Watch::NotYet(due) => {
                std::thread::park_timeout(Duration::from_nanos(due.saturating_sub(now_ns())));
            }
            Watch::BusyHere => {
                // Runnable but not run while the domain's task has the CPU.
                let before = now_ns();
                rustix::thread::sched_yield();
                if now_ns().saturating_sub(before) < WATCH_QUICK_YIELD_NS {
                    std::thread::park_timeout(Duration::from_nanos(WATCH_SPIN_NS));
                }
            }
            Watch::Elsewhere => {
                std::thread::park_timeout(if nothing { WATCH_NOTHING } else { WATCH_IDLE });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_policy_is_put_back_whatever_changed_it() {
        let me = thread_priority::thread_native_id();
        let before = kernel_policy().unwrap();
        let nice = rustix::process::getpriority_process(None).unwrap();
        let saved = CallerPolicy::save();
        let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
        let value =
            ThreadPriority::Crossplatform(ThreadPriorityValue::try_from(FIFO_PRIORITY).unwrap());
        if thread_priority::set_thread_priority_and_policy(me, value, fifo).is_err() {
            return; // not permitted here: nothing can raise the caller either
        }
        assert_eq!(kernel_policy(), Some((1, u32::from(FIFO_PRIORITY))));
        saved.restore();
        assert_eq!(kernel_policy(), Some(before));
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), nice);
    }
}
