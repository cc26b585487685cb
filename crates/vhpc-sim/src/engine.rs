//! The run loop: cores run vCPUs (chosen by the hypervisor scheduler), vCPUs
//! run tasks (chosen by the guest run queue), tasks run their programs.
//!
//! Cost model of the loop: an event is a *change* (a piece of work ends, a
//! slice ends, a packet lands, a poll window ends while someone could use the
//! CPU). A rank that busy-polls alone on its vCPU costs no events at all: its
//! spin is accounted when it stops. That is what lets one simulated hour of
//! 192 spinning vCPUs run in seconds, where per-poll simulation cannot.
//!
//! Every task on a CPU has `since`, the instant its current stretch began;
//! `settle` charges the stretch to debt (switch costs), to the work at the
//! front of its queue, or to spinning. Stale events are recognised by
//! generation counters rather than removed from the queue.
//!
//! This file holds the state, the run loop, and the hypervisor and guest
//! levels; `task` steps a task through its program, `messages` moves MPI
//! packets, `wait` implements the wait policies, `report` ends the run.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::guest::{GuestRunqueue, GuestScheduler, TaskId};
use crate::hypervisor::{
    self, CoreId, Leave, Scheduler, SchedulerParams, SedfParams, VcpuId, VcpuSpec,
};
use crate::metrics::{CoreReport, JobReport, RankReport, Report, VcpuReport};
use crate::mpi::{self, Kind, Packet, Protocol, RankMpi, Then, WaitPolicy};
use crate::queue::EventQueue;
use crate::scenario::{Channel, Scenario, TimedFrom};
use crate::time::SimTime;
use crate::trace::{Recorder, Sink, Slice};
use crate::workload::{self, Op, Program, Shape, Step};

#[cfg(feature = "event-counts")]
mod counts;
mod event;
mod fold;
pub mod footprint;
mod guest;
pub mod hints;
mod messages;
mod numa;
mod report;
mod task;
pub mod throttle;
mod tick;
mod wait;
mod wire;

#[cfg(feature = "event-counts")]
pub use counts::{EventCounts, ROWS as EVENT_ROWS};
use event::{Ev, PackedEv};
use messages::{Chan, CopyBuffer, Slab};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HvState {
    Blocked,
    Runnable,
    Running(CoreId),
}

#[derive(Debug)]
struct Core {
    vcpu: Option<VcpuId>,
    since: SimTime,
    /// When the current decision expires ([`SimTime::MAX`]: never).
    slice_end: SimTime,
    /// The earliest pending Slice event of this core. Decisions that end
    /// later reuse it (it re-arms itself), so a vCPU yielding every few
    /// microseconds does not leave a trail of stale slice events.
    timer_at: SimTime,
    last: Option<VcpuId>,
    busy: u64,
    idle: u64,
    switches: u64,
}

#[derive(Debug)]
struct Vcpu {
    domain: usize,
    /// Cores it may run on (its domain's pinning).
    affinity: Vec<CoreId>,
    index: u32,
    hv: HvState,
    guest: GuestRunqueue,
    last_core: Option<CoreId>,
    gen: u32,
    run_ns: u64,
    migrations: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskState {
    Runnable,
    Blocked,
    Sleeping,
    Done,
}

/// What a piece of CPU work leads to when done.
#[derive(Debug, Clone, Copy)]
enum After {
    Compute,
    /// A memory-aware phase (only with the memory model on): its remaining
    /// ns are wall time at the rank's current stretch.
    MemCompute,
    Mpi(Then),
    /// dom0 relayed this packet of `job`: forward it to its destination.
    Forward {
        job: u32,
        packet: Packet,
    },
    /// The sending rank did its NIC's transmit side itself
    /// (`tx_on_sender`): the packet leaves for the receiver's side.
    Transmit {
        job: u32,
        packet: Packet,
    },
    /// The VM's receive interrupt processed this packet (`rx_irq_*`): it
    /// reaches the receiving rank's socket.
    Deliver {
        job: u32,
        packet: Packet,
    },
}

#[derive(Debug, Clone, Copy)]
struct Work {
    ns: u64,
    after: After,
}

#[derive(Debug)]
enum Role {
    Rank {
        job: u32,
        rank: u32,
        program: Program,
        mpi: Box<RankMpi>,
        policy: WaitPolicy,
    },
    /// dom0's network back end on one of its vCPUs.
    Relay,
    /// The device thread of domain `domain`'s emulated or virtio NIC (QEMU's
    /// device model, vhost) on one of dom0's vCPUs: every packet the VM
    /// sends or receives over `net` passes it once.
    Device { domain: u32 },
    /// The receive interrupt of domain `domain`'s NIC inside the guest, on
    /// its interrupt vCPU (`domains.rx_irq_vcpu`): the driver, NAPI poll and
    /// IP/TCP receive work (`rx_irq_*`) of every packet the VM receives over
    /// `net`, before its rank sees it. It preempts whatever runs there and
    /// runs until no packet is left (a single-queue NIC: one per VM).
    RxIrq { domain: u32 },
    /// Kernel housekeeping of a vCPU: `work` every ~`interval` (mean);
    /// `busy` while a wake-up's work is queued.
    Background {
        interval: u64,
        work: u64,
        busy: bool,
    },
}

/// Where a task is inside a blocking MPI call.
#[derive(Debug, Default)]
struct Wait {
    active: bool,
    /// Spin time since the wait began (MPICH counts polls, not wall time).
    spun: u64,
    /// Whether a Poll event is pending for this wait.
    armed: bool,
    /// `adaptive`: consecutive yields that handed the CPU to nobody.
    futile: u32,
    /// Whether the last hypervisor yield came straight back to this vCPU.
    yield_was_futile: bool,
    /// `adaptive`: consecutive yields that handed the CPU to another vCPU or
    /// task while nothing arrived for this wait.
    idle: u32,
    sleep_ns: u64,
    /// When the wait began (`adaptive`'s spin budget learns from its length).
    began: SimTime,
    /// [`Engine::sched_calls`] after this wait's last futile yield (0:
    /// none): while it is unchanged, the next yield may fold (`fold`).
    fold_mark: u64,
}

/// libvhpc_wait's spin budget when time-shared (`learn_spin` in
/// runtime/wait.c): the full budget while at least half of the last
/// `LEARN_WINDOW` waits ended within it, else the short one.
#[derive(Debug, Default)]
struct SpinLearner {
    /// Whether this task learns (an `adaptive` rank that does not share its
    /// CPUs, in a scenario with `mpi.adaptive_spin_min_us`).
    on: bool,
    won: u32,
    lost: u32,
}

const LEARN_WINDOW: u32 = 32;

#[derive(Debug)]
struct Task {
    vcpu: VcpuId,
    /// Its vCPU's domain (channels are chosen by domain on every message).
    domain: usize,
    role: Role,
    state: TaskState,
    on_cpu: bool,
    since: SimTime,
    gen: u32,
    /// Switch costs to pay before anything else.
    debt: u64,
    /// Spin between yields: the policy's poll window, or about one poll and a
    /// yield's worth for an `adaptive` rank that knows it shares its CPUs
    /// (libvhpc_wait's shared mode: the peer cannot run while we poll).
    window: u64,
    spin: SpinLearner,
    work: VecDeque<Work>,
    wait: Wait,
    inbox: VecDeque<(u32, Packet)>,
    /// The channel to the peer rank it last named ([`Engine::peer_chan`]).
    peer_chan: (u32, Chan),
    rng: Pcg64,
    stats: RankReport,
}

/// A task's state for a migrating guest scheduler or cache refills, kept
/// beside `Task` (allocated only when used: the default path's tasks stay small).
#[derive(Debug, Clone, Copy)]
struct GuestTask {
    /// The physical core it last ran on (`guest.refill_ns`; NO_CORE: none).
    last_core: u32,
    /// `record_wakee`: the task it last woke, how often that changed (halved
    /// every second), and when it last halved.
    last_wakee: u32,
    wakee_flips: u32,
    flip_decay: SimTime,
}

impl Default for GuestTask {
    fn default() -> Self {
        GuestTask {
            last_core: NO_CORE,
            last_wakee: u32::MAX,
            wakee_flips: 0,
            flip_decay: SimTime::ZERO,
        }
    }
}

/// What a task does next, as seen by its vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// It keeps the CPU (an event is pending, or it spins).
    Keep,
    /// It stopped being runnable (blocked, sleeping, done).
    Leave,
}

/// What a vCPU does next, as seen by its core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VcpuNext {
    Keep,
    Halt,
}

#[derive(Debug)]
struct JobState {
    name: String,
    workload: String,
    policy: String,
    tasks: Vec<TaskId>,
    endless: bool,
    /// Relaunched at its end while other jobs' first runs go on.
    refill: bool,
    done_ranks: u32,
    /// The end of its first run.
    completion: Option<SimTime>,
    /// Runs started (1 + relaunches), and when the latest started.
    runs: u32,
    started: SimTime,
    /// When the first run's clock started (`start_us`, or once every rank
    /// reached its timed part: `timed_from`): completion counts from it.
    first_start: SimTime,
    /// Ranks not yet at their timed part while the clock waits for them
    /// (`timed_from = "all_ranks_ran"`; else empty).
    untimed: Vec<TaskId>,
}

#[derive(Debug)]
struct DomainInfo {
    name: String,
    native: bool,
    nic: Nic,
    /// Its ivshmem group's number, or `NO_GROUP`.
    group: u32,
    /// Its NIC's device thread, if it has one.
    device: Option<TaskId>,
    /// Its NIC's receive interrupt task (`rx_irq_*` on), if it has one.
    irq: Option<TaskId>,
    /// The machine its vCPUs run on (`host.machines`; dom0: its first vCPU's).
    machine: u32,
}

/// A domain's NIC kind (`domains.nic`), as the engine dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nic {
    Netfront,
    Bridge,
    Emulated,
    Virtio,
}

impl Nic {
    fn from_name(name: &str) -> Nic {
        match name {
            "bridge" => Nic::Bridge,
            "emulated" => Nic::Emulated,
            "virtio" => Nic::Virtio,
            _ => Nic::Netfront,
        }
    }
}

const NO_GROUP: u32 = u32::MAX;
const NO_CORE: u32 = u32::MAX;

/// Costs the engine applies, taken from the scenario once.
#[derive(Debug)]
struct Costs {
    vcpu_switch: u64,
    guest_switch: u64,
    guest_slice: SimTime,
    window: u64,
    poll: u64,
    futile_yields: u32,
    idle_yields: u32,
    sleep_min: u64,
    sleep_max: u64,
    /// What a sleep lasts beyond its request (the timer's overhead).
    sleep_extra: u64,
    /// `adaptive`'s short spin budget (None: it always spins `window`).
    spin_min: Option<u64>,
    proto: Protocol,
    /// Ranks in different domains talk through shared memory, not dom0.
    shm_between_domains: bool,
    shm: Channel,
    native: Channel,
    inter_vm: Channel,
    bridge: Channel,
    emulated: Channel,
    virtio: Channel,
    ivshmem: Channel,
    /// Native domains on different machines.
    tcp: Channel,
    /// `guest.wake_halted_ns`, `guest.refill_ns`, `guest.migration_cost_us`.
    wake_halted: u64,
    refill: u64,
    migration_cost: u64,
    /// `ivshmem` comes before `net` in `mpi.transports` (or net is absent):
    /// domains of one group talk through it.
    ivshmem_first: bool,
    /// Every domain's NIC is netfront, no ivshmem group is used and there is
    /// one machine: between domains, always dom0's relay (the old path, kept
    /// branch-light).
    netfront_only: bool,
}

/// One simulation, built from a validated scenario.
#[derive(Debug)]
pub struct Engine {
    now: SimTime,
    limit: SimTime,
    queue: EventQueue<PackedEv>,
    sched: Box<dyn Scheduler>,
    scheduler_name: String,
    cores: Vec<Core>,
    running: Vec<Option<VcpuId>>,
    vcpus: Vec<Vcpu>,
    tasks: Vec<Task>,
    jobs: Vec<JobState>,
    domains: Vec<DomainInfo>,
    relays: Vec<TaskId>,
    costs: Costs,
    live_jobs: usize,
    events: u64,
    tickle: Vec<CoreId>,
    /// Reused buffer for the cores' run times at a scheduler tick.
    ran_scratch: Vec<SimTime>,
    /// Packets on their way, referenced by Arrive events.
    in_flight: Slab<(u32, Packet)>,
    /// Copy buffers of rank pairs in use: (job, lower rank, higher rank).
    lmt: BTreeMap<(u32, u32, u32), CopyBuffer>,
    /// Reused buffer for the work an MPI call asks for.
    mpi_scratch: VecDeque<mpi::MpiWork>,
    trace: Option<Recorder>,
    /// Whether `advance` has woken the initial tasks, and whether the run
    /// is over.
    started: bool,
    /// When the live `Ev::Timer` fires (MAX: none is queued): a scheduler
    /// whose timers had stopped (nothing runnable) gets them back when a vCPU
    /// wakes, and one whose next decision moved earlier gets an earlier one
    /// (the later event is then stale and ignored).
    timer_at: SimTime,
    over: bool,
    name: String,
    seed: u64,
    /// The NUMA memory model (`[memory]`; None: off, nothing is charged).
    numa: Option<Box<crate::memory::Model>>,
    /// Reused buffer for the stretches a change of streaming ranks moved.
    numa_scratch: Vec<(usize, u64, u64)>,
    /// The network between machines (None: one machine).
    wire: Option<Box<wire::Wire>>,
    /// The guest scheduler that moves tasks (None: `fixed`).
    guest_sched: Option<Box<dyn GuestScheduler>>,
    /// Tasks a guest balancing pass moved: (task, to, became current).
    guest_moved: Vec<(TaskId, VcpuId, bool)>,
    /// Per domain: migrations at wake-up, newly idle, periodic.
    guest_migrations: Vec<[u64; 3]>,
    /// `guest.domains` (reported).
    guest_domains: String,
    /// Per task, with a migrating guest scheduler or `guest.refill_ns` (else empty).
    guest_tasks: Vec<GuestTask>,
    /// A migrating guest scheduler, `guest.wake_halted_ns` or
    /// `guest.refill_ns` is on (one test on the default path).
    guest_costs: bool,
    /// Timer ticks (`domains.tick`, `hypervisor.host_tick`; None: off).
    ticks: Option<Box<tick::Ticks>>,
    /// Hint-driven policies (`domains.hints`; None: no domain has one).
    hints: Option<Box<hints::Hints>>,
    /// Concurrency throttling per job (`jobs.throttle`; None: no job has it).
    throttle: Option<Box<[Option<throttle::Controller>]>>,
    /// Futile yields may be folded (`fold`); calls that changed the
    /// scheduler's state (from 1; a futile yield's are taken back, see
    /// `fold`); poll windows folded so far.
    fold_on: bool,
    sched_calls: u64,
    folded: u64,
    /// Events by kind (`counts`; profiling builds only).
    #[cfg(feature = "event-counts")]
    counts: counts::EventCounts,
}

/// The run was cancelled (its flag was set) before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the simulation was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// Items (vCPUs, tasks) built between two looks at the cancellation flag.
const BUILD_CHECK_EVERY: usize = 4096;

fn check(cancel: &AtomicBool, i: usize) -> Result<(), Cancelled> {
    if i % BUILD_CHECK_EVERY == 0 && cancel.load(Ordering::Relaxed) {
        return Err(Cancelled);
    }
    Ok(())
}

impl Engine {
    /// Builds the host, domains, tasks and scheduler of `sc`; `seed`
    /// overrides the scenario's; `trace` receives the run's trace as it goes.
    pub fn new(sc: &Scenario, seed: Option<u64>, trace: Option<Sink>) -> Engine {
        match Self::build(sc, seed, trace, &AtomicBool::new(false)) {
            Ok(engine) => engine,
            Err(Cancelled) => unreachable!("nobody sets a local flag"),
        }
    }

    /// [`Engine::new`] that stops, every few thousand vCPUs or tasks, if
    /// `cancel` is set: a large scenario takes a while to build.
    pub fn build(
        sc: &Scenario,
        seed: Option<u64>,
        trace: Option<Sink>,
        cancel: &AtomicBool,
    ) -> Result<Engine, Cancelled> {
        let seed = seed.unwrap_or(sc.seed);
        let hv = &sc.hypervisor;
        let params = SchedulerParams {
            cores: sc.host.cores,
            sockets: sc.host.sockets,
            tslice: SimTime::from_us(hv.tslice_us),
            tick: SimTime::from_us(hv.tick_us),
            ticks_per_acct: hv.ticks_per_acct,
            ratelimit: SimTime::from_us(hv.ratelimit_us),
            boost: hv.boost,
            cpu_pick: hv.credit_cpu_pick,
            extra_quantum: SimTime::from_us(hv.extra_quantum_us),
            slicer: hypervisor::slicer::SlicerParams {
                poll: SimTime::from_us(hv.slicer.poll_us),
                switch: SimTime::from_us(hv.slicer.switch_us),
                work_conserving: hv.slicer.work_conserving,
                by_weight: hv.slicer.by_weight,
                inner_slice: SimTime::from_us(hv.slicer.inner_slice_us),
                per_vcpu: hv.slicer.slicing == "vcpu",
                watchers: hv.slicer.watchers,
                look: SimTime::from_us(hv.slicer.look_us),
                idle_switch: SimTime::from_us(
                    hv.slicer.idle_switch_us.unwrap_or(hv.slicer.switch_us),
                ),
                idle_round: SimTime::from_us(hv.slicer.idle_round_us),
                idle_round_max: SimTime::from_us(hv.slicer.idle_round_max_us),
            },
            linux: hypervisor::linux::LinuxParams {
                slice: SimTime::from_us(hv.linux.slice_us),
                tick: SimTime::from_us(hv.linux.tick_us),
                wakeup_granularity: SimTime::from_us(hv.linux.wakeup_granularity_us),
                period: SimTime::from_us(hv.linux.period_us),
            },
            gang: hypervisor::gang::GangParams {
                skew: SimTime::from_us(hv.gang.skew_us),
                by_weight: hv.gang.by_weight,
            },
        };
        let info = hypervisor::by_name(&hv.scheduler).expect("validated scheduler name");
        let mut e = Engine {
            now: SimTime::ZERO,
            limit: SimTime::from_ms(sc.limit_ms),
            queue: EventQueue::with_capacity(1024),
            sched: (info.build)(&params),
            scheduler_name: info.name.to_string(),
            cores: (0..sc.host.cores)
                .map(|_| Core {
                    vcpu: None,
                    since: SimTime::ZERO,
                    slice_end: SimTime::MAX,
                    timer_at: SimTime::MAX,
                    last: None,
                    busy: 0,
                    idle: 0,
                    switches: 0,
                })
                .collect(),
            running: vec![None; sc.host.cores],
            vcpus: Vec::new(),
            tasks: Vec::new(),
            jobs: Vec::new(),
            domains: Vec::new(),
            relays: Vec::new(),
            costs: Costs {
                vcpu_switch: hv.vcpu_switch_ns,
                guest_switch: sc.guest.switch_ns,
                guest_slice: SimTime::from_us(sc.guest.slice_us),
                window: sc.mpi.poll_ns * sc.mpi.polls_before_yield,
                poll: sc.mpi.poll_ns,
                futile_yields: sc.mpi.adaptive_futile_yields,
                idle_yields: sc.mpi.adaptive_idle_yields,
                sleep_min: sc.mpi.adaptive_sleep_min_us * 1000,
                sleep_max: sc.mpi.adaptive_sleep_max_us * 1000,
                sleep_extra: sc.mpi.adaptive_sleep_extra_ns,
                spin_min: sc.mpi.adaptive_spin_min_us.map(|us| us * 1000),
                proto: Protocol {
                    eager_limit: sc.mpi.eager_limit,
                    local_send_limit: sc.mpi.local_send_limit.unwrap_or(sc.mpi.eager_limit),
                },
                shm_between_domains: sc.mpi.between_domains == "shm",
                shm: sc.mpi.shm.clone(),
                native: sc.mpi.native.clone(),
                inter_vm: sc.mpi.inter_vm.clone(),
                bridge: sc.mpi.bridge.clone(),
                emulated: sc.mpi.emulated.clone(),
                virtio: sc.mpi.virtio.clone(),
                ivshmem: sc.mpi.ivshmem.clone(),
                tcp: sc.mpi.tcp.clone(),
                wake_halted: sc.guest.wake_halted_ns,
                refill: sc.guest.refill_ns,
                migration_cost: sc.guest.migration_cost_us * 1000,
                ivshmem_first: {
                    let list = sc.transports();
                    let pos = |t: &str| list.iter().position(|&x| x == t);
                    match (pos("ivshmem"), pos("net")) {
                        (Some(a), Some(b)) => a < b,
                        (Some(_), None) => true,
                        _ => false,
                    }
                },
                netfront_only: sc.domains.iter().all(|d| d.nic == "netfront")
                    && (sc.mpi.transports.is_none()
                        || sc.domains.iter().all(|d| d.ivshmem.is_none()))
                    && sc.host.machine_count() == 1,
            },
            live_jobs: 0,
            events: 0,
            tickle: Vec::new(),
            ran_scratch: Vec::new(),
            mpi_scratch: VecDeque::new(),
            lmt: BTreeMap::new(),
            in_flight: Slab::default(),
            trace: None,
            started: false,
            timer_at: SimTime::MAX,
            over: false,
            name: sc.name.clone(),
            seed,
            numa: None,
            numa_scratch: Vec::new(),
            wire: wire::Wire::of(sc),
            guest_sched: None,
            guest_moved: Vec::new(),
            guest_migrations: Vec::new(),
            guest_domains: sc.guest.domains.clone(),
            guest_tasks: Vec::new(),
            guest_costs: false,
            ticks: tick::Ticks::of(sc),
            hints: hints::Hints::of(sc),
            throttle: None,
            fold_on: false,
            sched_calls: 1,
            folded: 0,
            #[cfg(feature = "event-counts")]
            counts: counts::EventCounts::default(),
        };
        e.build_domains(sc, seed, cancel)?;
        e.build_guest_scheduler(sc);
        e.build_jobs(sc, seed, cancel)?;
        e.build_throttle(sc);
        // After the ranks, so their random streams stay what they were.
        e.build_rx_irqs(sc);
        e.build_memory(sc);
        if e.guest_sched.is_some() || e.costs.refill > 0 {
            e.guest_tasks = vec![GuestTask::default(); e.tasks.len()];
        }
        e.guest_costs = e.guest_sched.is_some() || e.costs.refill > 0 || e.costs.wake_halted > 0;
        e.set_wait_windows();
        if let Some(sink) = trace {
            e.trace = Some(Recorder::new(sink, sc.host.cores, e.vcpu_names()));
        }
        e.fold_on = e.fold_allowed() && e.sched.folds_futile_yields();
        Ok(e)
    }

    /// libvhpc_wait's static evidence, from the CPU masks of a job's ranks
    /// (exchanged at MPI_Init): an `adaptive` rank shares its CPUs when more
    /// ranks of its job than CPUs can run where it can, or when another rank
    /// lives on its vCPU. It then yields after every unsuccessful poll.
    /// Ranks are grouped by mask, so the cost grows with the distinct masks;
    /// past `EXACT_MASKS` of them, the job as a whole is compared with the
    /// CPUs of all its masks.
    fn set_wait_windows(&mut self) {
        const EXACT_MASKS: usize = 256;
        for j in 0..self.jobs.len() {
            let tasks = &self.jobs[j].tasks;
            let adaptive = |t: TaskId| {
                matches!(
                    self.tasks[t].role,
                    Role::Rank {
                        policy: WaitPolicy::Adaptive,
                        ..
                    }
                )
            };
            if !tasks.iter().any(|&t| adaptive(t)) {
                continue;
            }
            let mut per_vcpu: BTreeMap<VcpuId, usize> = BTreeMap::new();
            let mut per_mask: BTreeMap<&[CoreId], usize> = BTreeMap::new();
            for &t in tasks {
                let v = self.tasks[t].vcpu;
                *per_vcpu.entry(v).or_default() += 1;
                *per_mask.entry(&self.vcpus[v].affinity).or_default() += 1;
            }
            let masks: Vec<(&[CoreId], usize)> = per_mask.into_iter().collect();
            // Ranks of the job that may run where `mine` may, against the CPUs
            // they may use between them.
            let crowded = |mine: Option<&[CoreId]>| -> bool {
                let (mut ranks, mut cpus) = (0usize, Vec::new());
                for &(theirs, n) in &masks {
                    if mine.map_or(true, |m| theirs.iter().any(|c| m.contains(c))) {
                        ranks += n;
                        cpus.extend_from_slice(theirs);
                    }
                }
                cpus.sort_unstable();
                cpus.dedup();
                ranks > cpus.len()
            };
            let whole_job = (masks.len() > EXACT_MASKS).then(|| crowded(None));
            let crowded_masks: BTreeMap<&[CoreId], bool> = masks
                .iter()
                .map(|&(m, _)| (m, whole_job.unwrap_or_else(|| crowded(Some(m)))))
                .collect();
            // (shared, learns its spin budget) per rank.
            let kind: Vec<(bool, bool)> = tasks
                .iter()
                .map(|&t| {
                    let v = self.tasks[t].vcpu;
                    let shared = adaptive(t)
                        && (per_vcpu[&v] > 1 || crowded_masks[&self.vcpus[v].affinity[..]]);
                    (
                        shared,
                        adaptive(t) && !shared && self.costs.spin_min.is_some(),
                    )
                })
                .collect();
            for (&t, (shared, learns)) in self.jobs[j].tasks.iter().zip(kind) {
                // A poll and a sched_yield syscall cost about ten polls: the shared
                // path's spin between yields (a yield storm between waiting vCPUs
                // then costs simulated time, as it costs the real ones CPU time).
                self.tasks[t].window = if shared {
                    (10 * self.costs.poll).min(self.costs.window)
                } else {
                    self.costs.window
                };
                self.tasks[t].spin.on = learns;
            }
        }
    }

    fn build_domains(
        &mut self,
        sc: &Scenario,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<(), Cancelled> {
        let cores = sc.host.cores;
        let mut groups: BTreeMap<&str, u32> = BTreeMap::new();
        for (d, dom) in sc.domains.iter().enumerate() {
            let next = groups.len() as u32;
            self.domains.push(DomainInfo {
                name: dom.name.clone(),
                native: dom.native,
                nic: Nic::from_name(&dom.nic),
                group: dom
                    .ivshmem
                    .as_deref()
                    .map_or(NO_GROUP, |g| *groups.entry(g).or_insert(next)),
                device: None,
                irq: None,
                machine: dom
                    .pin
                    .first()
                    .map_or(0, |cores| sc.host.machine_of_core(cores[0]) as u32),
            });
            for i in 0..dom.vcpus {
                let v = self.vcpus.len();
                check(cancel, v)?;
                let affinity = match dom.pin.len() {
                    0 => (0..cores).collect(),
                    1 => dom.pin[0].clone(),
                    _ => dom.pin[i].clone(),
                };
                let mut affinity: Vec<CoreId> = affinity;
                affinity.sort_unstable();
                affinity.dedup();
                // Xen places new vCPUs round robin over the allowed cores.
                let initial_core = affinity[v % affinity.len()];
                let sedf = SedfParams {
                    period: SimTime::from_us(dom.sedf.period_us),
                    slice: SimTime::from_us(dom.sedf.slice_us),
                    extratime: dom.sedf.extratime,
                };
                let spec = VcpuSpec {
                    domain: d,
                    weight: dom.weight,
                    cap: dom.cap,
                    affinity: affinity.clone(),
                    initial_core,
                    sedf,
                };
                self.sched.add_vcpu(v, &spec);
                self.vcpus.push(Vcpu {
                    domain: d,
                    affinity,
                    index: i as u32,
                    hv: HvState::Blocked,
                    guest: GuestRunqueue::default(),
                    last_core: None,
                    gen: 0,
                    run_ns: 0,
                    migrations: 0,
                });
                if dom.dom0 {
                    let t = self.new_task(v, Role::Relay, Pcg64::seed_from_u64(0));
                    self.relays.push(t);
                    // The back end sleeps until traffic arrives.
                    self.tasks[t].state = TaskState::Blocked;
                }
                if let Some(b) = &dom.background {
                    let role = Role::Background {
                        interval: b.interval_us * 1000,
                        work: b.work_us * 1000,
                        busy: false,
                    };
                    let rng = Pcg64::new(seed as u128, (v as u128) << 1);
                    let t = self.new_task(v, role, rng);
                    self.tasks[t].state = TaskState::Sleeping;
                    self.background_wake(t);
                }
            }
        }
        self.build_devices(sc);
        Ok(())
    }

    /// One device thread per VM with an emulated or virtio NIC, on dom0's
    /// vCPUs in turn (validation makes sure dom0 exists when one is used).
    fn build_devices(&mut self, sc: &Scenario) {
        if !sc.domains[0].dom0 {
            return;
        }
        let dom0_vcpus = sc.domains[0].vcpus;
        let mut k = 0;
        for (d, dom) in sc.domains.iter().enumerate() {
            if dom.dom0 || !dom.has_device_thread() {
                continue;
            }
            let role = Role::Device { domain: d as u32 };
            let t = self.new_task(k % dom0_vcpus, role, Pcg64::seed_from_u64(0));
            self.tasks[t].state = TaskState::Blocked; // until traffic arrives
            self.domains[d].device = Some(t);
            k += 1;
        }
    }

    /// One receive-interrupt task per VM whose NIC table has `rx_irq_*`
    /// on, on the VM's `rx_irq_vcpu` (only device-thread NICs take it).
    fn build_rx_irqs(&mut self, sc: &Scenario) {
        let first_vcpu = first_vcpus(sc);
        for (d, dom) in sc.domains.iter().enumerate() {
            if self.domains[d].device.is_none() || !self.nic_channel(d).has_rx_irq() {
                continue;
            }
            let v = first_vcpu[d] + dom.rx_irq_vcpu;
            let t = self.new_task(v, Role::RxIrq { domain: d as u32 }, Pcg64::seed_from_u64(0));
            self.tasks[t].state = TaskState::Blocked; // until a packet arrives
            self.domains[d].irq = Some(t);
        }
    }

    fn build_jobs(
        &mut self,
        sc: &Scenario,
        seed: u64,
        cancel: &AtomicBool,
    ) -> Result<(), Cancelled> {
        let by_name: BTreeMap<&str, usize> = sc
            .domains
            .iter()
            .enumerate()
            .map(|(d, dom)| (dom.name.as_str(), d))
            .collect();
        // Ranks of one domain go to its vCPUs round robin.
        let mut next_vcpu = vec![0usize; sc.domains.len()];
        let first_vcpu = first_vcpus(sc);
        for (j, job) in sc.jobs.iter().enumerate() {
            let info = workload::by_name(&job.workload).expect("validated workload");
            let policy = WaitPolicy::from_name(&job.wait_policy).expect("validated policy");
            let n = job.ranks.len() as u32;
            let start = SimTime::from_us(job.start_us);
            let mut tasks = Vec::new();
            for (r, dom_name) in job.ranks.iter().enumerate() {
                check(cancel, self.tasks.len())?;
                let d = *by_name.get(dom_name.as_str()).expect("validated domain");
                let v = first_vcpu[d] + next_vcpu[d] % sc.domains[d].vcpus;
                next_vcpu[d] += 1;
                let shape = Shape {
                    rank: r as u32,
                    ranks: n,
                };
                let program =
                    Program::new(timed_program(job, (info.build)(&job.params, shape)), shape);
                let role = Role::Rank {
                    job: j as u32,
                    rank: r as u32,
                    program,
                    mpi: Box::default(),
                    policy,
                };
                // One random stream per task, so a task's draws do not depend on others'.
                let rng = Pcg64::new(seed as u128, (self.tasks.len() as u128) << 1 | 1);
                let t = self.new_task(v, role, rng);
                if start > SimTime::ZERO {
                    // Asleep until its start, as a relaunched rank waits to be woken.
                    self.tasks[t].state = TaskState::Sleeping;
                    self.queue.push(start, Ev::Wake { task: t as u32 }.pack());
                }
                self.tasks[t].stats = RankReport {
                    job: job.name.clone(),
                    rank: r as u32,
                    domain: dom_name.clone(),
                    vcpu: self.vcpus[v].index,
                    ..Default::default()
                };
                tasks.push(t);
            }
            if !info.endless {
                self.live_jobs += 1;
            }
            let untimed = match job.timed_from {
                TimedFrom::Start => Vec::new(),
                TimedFrom::AllRanksRan => tasks.clone(),
            };
            self.jobs.push(JobState {
                name: job.name.clone(),
                workload: job.workload.clone(),
                policy: job.wait_policy.clone(),
                tasks,
                endless: info.endless,
                refill: job.refill,
                done_ranks: 0,
                completion: None,
                runs: 1,
                started: start,
                first_start: start,
                untimed,
            });
        }
        Ok(())
    }

    fn new_task(&mut self, vcpu: VcpuId, role: Role, rng: Pcg64) -> TaskId {
        self.tasks.push(Task {
            vcpu,
            domain: self.vcpus[vcpu].domain,
            role,
            state: TaskState::Runnable,
            on_cpu: false,
            since: SimTime::ZERO,
            gen: 0,
            debt: 0,
            window: self.costs.window,
            spin: SpinLearner::default(),
            work: VecDeque::new(),
            wait: Wait::default(),
            inbox: VecDeque::new(),
            peer_chan: (u32::MAX, Chan::Shm),
            rng,
            stats: RankReport::default(),
        });
        self.tasks.len() - 1
    }

    /// "domain.vN" for every vCPU, in id order (trace track names).
    pub fn vcpu_names(&self) -> Vec<String> {
        self.vcpus
            .iter()
            .map(|v| format!("{}.v{}", self.domains[v.domain].name, v.index))
            .collect()
    }

    /// Runs to the end (every finite job done, or the limit) and reports.
    pub fn run(mut self) -> (Report, Option<Recorder>) {
        while !self.advance(u64::MAX) {}
        self.finish()
    }

    /// Handles up to `budget` events (the first call also wakes the tasks
    /// that have work at time zero); `true` once the run is over. Lets a
    /// caller check for interruption between chunks of a long run.
    pub fn advance(&mut self, budget: u64) -> bool {
        if !self.started {
            for t in 0..self.tasks.len() {
                if self.tasks[t].state == TaskState::Runnable {
                    self.wake_task(t);
                }
            }
            // Once every initial task is awake: the scheduler's first timer.
            self.started = true;
            self.schedule_timer();
            if let Some(g) = &self.guest_sched {
                self.queue.push(self.now + g.tick(), Ev::GuestTick.pack());
            }
            if self.ticks.is_some() {
                for v in 0..self.vcpus.len() {
                    if self.vcpus[v].hv != HvState::Blocked {
                        self.tick_wake(v);
                    }
                }
            }
        }
        let mut left = budget;
        while !self.over && left > 0 {
            left -= 1;
            self.over = !self.next_event();
        }
        self.over
    }

    /// Handles the next event; `false` when the run is over: every finite
    /// job done, nothing left to happen, or the time limit reached.
    fn next_event(&mut self) -> bool {
        if self.live_jobs == 0 {
            return false;
        }
        let Some((time, ev)) = self.queue.pop() else {
            return false;
        };
        if time > self.limit {
            self.now = self.limit;
            return false;
        }
        #[cfg(feature = "event-counts")]
        let same_instant = time == self.now;
        self.now = time;
        let handled = self.dispatch(ev.unpack());
        if handled {
            self.events += 1;
        }
        #[cfg(feature = "event-counts")]
        self.count_event(ev.unpack(), handled, same_instant);
        true
    }

    /// Handles one event; `false` if it was stale (superseded, not counted).
    fn dispatch(&mut self, ev: Ev) -> bool {
        match ev {
            Ev::Slice { core } => return self.slice_timer(core as usize),
            Ev::Work { task, gen } if self.tasks[task as usize].gen == gen => {
                self.kick(self.tasks[task as usize].vcpu)
            }
            Ev::Poll { task, gen } if self.tasks[task as usize].gen == gen => {
                self.poll_window_end(task as usize)
            }
            Ev::Wake { task } if self.tasks[task as usize].state == TaskState::Sleeping => {
                self.wake_task(task as usize)
            }
            Ev::GuestSlice { vcpu, gen } if self.vcpus[vcpu as usize].gen == gen => {
                self.guest_slice_end(vcpu as usize)
            }
            Ev::Arrive { task, slot } => {
                let (job, packet) = self.in_flight.take(slot);
                self.arrive(task as usize, job, packet);
            }
            Ev::Timer if self.now == self.timer_at => {
                self.timer_at = SimTime::MAX;
                self.timer()
            }
            Ev::WireRx { slot } => self.wire_rx(slot),
            Ev::GuestTick => self.guest_tick(),
            Ev::Tick { domain } => self.domain_tick(domain as usize),
            Ev::HostTick => self.host_tick(),
            _ => return false,
        }
        true
    }

    // ---- hypervisor level -------------------------------------------------

    fn schedule_timer(&mut self) {
        let next = self.sched.next_timer();
        if next != SimTime::MAX {
            self.timer_at = next.max(self.now);
            self.queue.push(self.timer_at, Ev::Timer.pack());
        }
    }

    /// After a vCPU blocked: the scheduler may want to decide sooner (the
    /// slicer's watchers notice an idle domain).
    fn timer_sooner(&mut self) {
        if self.started && self.sched.next_timer() < self.timer_at {
            self.schedule_timer();
        }
    }

    fn timer(&mut self) {
        let mut ran = std::mem::take(&mut self.ran_scratch);
        ran.clear();
        ran.extend(self.cores.iter().map(|c| {
            if c.vcpu.is_some() {
                self.now - c.since
            } else {
                SimTime::ZERO
            }
        }));
        let mut tickle = std::mem::take(&mut self.tickle);
        self.sched_calls += 1;
        self.sched.timer(self.now, &self.running, &ran, &mut tickle);
        self.ran_scratch = ran;
        self.apply_tickles(&mut tickle);
        self.tickle = tickle;
        self.schedule_timer();
    }

    fn apply_tickles(&mut self, tickle: &mut Vec<CoreId>) {
        // Idle cores answer first (they wait in the idle loop and steal the
        // work; a busy core must reach a scheduling point), then busy ones;
        // ascending core order within each, no repeats: deterministic.
        tickle.sort_unstable_by_key(|&c| (self.cores[c].vcpu.is_some(), c));
        tickle.dedup();
        for c in tickle.drain(..) {
            self.resched(c);
        }
    }

    fn set_slice_end(&mut self, core: CoreId, end: SimTime) {
        let c = &mut self.cores[core];
        c.slice_end = end;
        if end < c.timer_at {
            c.timer_at = end;
            self.queue.push(end, Ev::Slice { core: core as u32 }.pack());
        }
    }

    /// A Slice event: the decision expires now, or it was extended and the
    /// timer follows it.
    fn slice_timer(&mut self, core: CoreId) -> bool {
        let c = &mut self.cores[core];
        if c.timer_at != self.now {
            return false; // superseded by an earlier timer that already re-armed
        }
        c.timer_at = SimTime::MAX;
        if c.slice_end == self.now {
            self.resched(core);
            return true;
        }
        if c.slice_end != SimTime::MAX {
            let end = c.slice_end;
            self.set_slice_end(core, end);
        }
        false
    }

    /// Re-decides `core`: its vCPU (if any) is preempted, then a new pick.
    fn resched(&mut self, core: CoreId) {
        #[cfg(feature = "event-counts")]
        {
            self.counts.redecisions += 1;
        }
        let prev = self.cores[core].vcpu;
        if let Some(v) = prev {
            self.take_off(core, v, Leave::Preempted);
        }
        self.decide(core);
        if let (Some(v), true) = (prev, self.hints.is_some()) {
            self.hint_preempted(v);
        }
    }

    /// Picks for an empty core until something keeps it (or it idles).
    /// A pick may ask for a timer sooner (credit2 tickles other cores from
    /// inside its pick through one).
    fn decide(&mut self, core: CoreId) {
        loop {
            self.sched_calls += 1;
            let pick = self.sched.pick(self.now, core, &self.running);
            // A zero slice would re-decide forever at one instant.
            let end = self.now.saturating_add(pick.slice.max(SimTime::from_ns(1)));
            self.set_slice_end(core, end);
            let Some(v) = pick.vcpu else { break };
            self.put_on(core, v);
            match self.run_guest(v) {
                VcpuNext::Keep => break,
                VcpuNext::Halt => self.take_off(core, v, Leave::Blocked),
            }
        }
        self.timer_sooner();
    }

    fn put_on(&mut self, core: CoreId, v: VcpuId) {
        let now = self.now;
        let c = &mut self.cores[core];
        c.idle += (now - c.since).as_ns();
        c.since = now;
        c.vcpu = Some(v);
        let switched = c.last != Some(v);
        if switched {
            c.switches += 1;
        }
        c.last = Some(v);
        self.running[core] = Some(v);
        let vc = &mut self.vcpus[v];
        debug_assert!(vc.hv != HvState::Blocked, "picked a blocked vCPU");
        if vc.last_core.is_some_and(|l| l != core) {
            vc.migrations += 1;
        }
        vc.last_core = Some(core);
        vc.hv = HvState::Running(core);
        let native = self.domains[vc.domain].native;
        if let Some(t) = vc.guest.current {
            if switched && !native {
                self.tasks[t].debt += self.costs.vcpu_switch;
            }
            self.start_task(t);
        }
        if self.vcpus[v].guest.contended() {
            self.arm_guest_slice(v);
        }
    }

    fn take_off(&mut self, core: CoreId, v: VcpuId, why: Leave) {
        let now = self.now;
        let c = &mut self.cores[core];
        let ran = now - c.since;
        c.busy += ran.as_ns();
        c.since = now;
        c.vcpu = None;
        c.slice_end = SimTime::MAX;
        self.running[core] = None;
        if let Some(trace) = &mut self.trace {
            if ran > SimTime::ZERO {
                trace.record(Slice {
                    core: core as u32,
                    vcpu: v as u32,
                    start_ns: (now - ran).as_ns(),
                    end_ns: now.as_ns(),
                });
            }
        }
        let vc = &mut self.vcpus[v];
        vc.run_ns += ran.as_ns();
        vc.gen = vc.gen.wrapping_add(1);
        vc.hv = if why == Leave::Blocked {
            HvState::Blocked
        } else {
            HvState::Runnable
        };
        if let Some(t) = vc.guest.current {
            self.stop_task(t);
        }
        self.sched_calls += 1;
        self.sched.deschedule(now, core, v, ran, why);
        if why == Leave::Blocked {
            self.timer_sooner();
        }
    }

    fn hv_wake(&mut self, v: VcpuId) {
        if self.vcpus[v].hv != HvState::Blocked {
            return;
        }
        #[cfg(feature = "event-counts")]
        {
            let c = &mut self.counts;
            *(if self.vcpus[v].domain == 0 {
                &mut c.wakes_domain0
            } else {
                &mut c.wakes_other
            }) += 1;
        }
        self.vcpus[v].hv = HvState::Runnable;
        if self.ticks.is_some() && self.started {
            self.tick_wake(v);
        }
        let mut tickle = std::mem::take(&mut self.tickle);
        self.sched_calls += 1;
        self.sched.wake(self.now, v, &self.running, &mut tickle);
        if self.hints.is_some() {
            self.hint_filter_tickles(v, &mut tickle);
        }
        self.apply_tickles(&mut tickle);
        self.tickle = tickle;
        // A wake after the start into a scheduler whose timers had stopped.
        if self.timer_at == SimTime::MAX && self.started {
            self.schedule_timer();
        }
    }

    // ---- guest level --------------------------------------------------------

    /// Lets the vCPU's tasks run until one keeps the CPU or none is left.
    fn run_guest(&mut self, v: VcpuId) -> VcpuNext {
        loop {
            let Some(t) = self.vcpus[v].guest.current else {
                if self.guest_sched.is_some() && self.guest_newidle(v) {
                    continue;
                }
                return VcpuNext::Halt;
            };
            match self.step(t) {
                Next::Keep => return VcpuNext::Keep,
                Next::Leave => {
                    self.stop_task(t);
                    let irq = matches!(self.tasks[t].role, Role::RxIrq { .. });
                    if let Some(n) = self.vcpus[v].guest.leave() {
                        if irq {
                            // The return from an interrupt: no process
                            // context switch (its entry and exit are part
                            // of `rx_irq_ns`).
                            self.start_task(n);
                        } else {
                            self.switch_to(n);
                        }
                    }
                }
            }
        }
    }

    /// A guest context switch to task `n` on a running vCPU.
    fn switch_to(&mut self, n: TaskId) {
        self.tasks[n].debt += self.costs.guest_switch;
        self.tasks[n].stats.context_switches += 1;
        self.start_task(n);
    }

    /// Something changed for a running vCPU's task: let the guest react and
    /// pass the outcome to the core.
    fn kick(&mut self, v: VcpuId) {
        let HvState::Running(core) = self.vcpus[v].hv else {
            return;
        };
        if self.run_guest(v) == VcpuNext::Halt {
            self.take_off(core, v, Leave::Blocked);
            self.decide(core);
        }
    }

    /// Re-decides a core after its vCPU yielded, and tells the yielding task
    /// whether the yield handed the core to anybody.
    fn decide_after_yield(&mut self, core: CoreId, v: VcpuId) {
        let before = self.cores[core].switches;
        self.decide(core);
        let futile = self.cores[core].vcpu == Some(v) && self.cores[core].switches == before;
        if let Some(t) = self.vcpus[v].guest.current {
            let w = &mut self.tasks[t].wait;
            w.yield_was_futile = futile;
            w.idle = if futile { w.idle } else { w.idle + 1 };
        }
    }

    fn guest_slice_end(&mut self, v: VcpuId) {
        let HvState::Running(_) = self.vcpus[v].hv else {
            return;
        };
        let Some(t) = self.vcpus[v].guest.current else {
            return;
        };
        self.settle(t);
        // An interrupt is not time-sliced: it runs until its packets are done.
        let irq = matches!(self.tasks[t].role, Role::RxIrq { .. });
        if let Some(n) = (!irq).then(|| self.vcpus[v].guest.rotate()).flatten() {
            self.stop_task(t);
            self.switch_to(n);
        }
        if self.vcpus[v].guest.contended() {
            self.arm_guest_slice(v);
        }
        self.kick(v);
    }

    fn arm_guest_slice(&mut self, v: VcpuId) {
        let vc = &mut self.vcpus[v];
        vc.gen = vc.gen.wrapping_add(1);
        let gen = vc.gen;
        let ev = Ev::GuestSlice {
            vcpu: v as u32,
            gen,
        };
        self.push_on_cpu(v, self.now + self.costs.guest_slice, ev);
    }

    /// Queues an event that matters only while vCPU `v` keeps its core: a
    /// task's work or poll window ending, a guest slice (each checks a
    /// generation that taking the vCPU off bumps). One due after the core's
    /// decision expires would be stale when popped, since an expiry always
    /// takes the vCPU off: it is not queued at all. Under SEDF's 500 us extra
    /// quanta most work items outlast their slice (a third of all events
    /// popped were such).
    fn push_on_cpu(&mut self, v: VcpuId, at: SimTime, ev: Ev) {
        if let HvState::Running(core) = self.vcpus[v].hv {
            if at > self.cores[core].slice_end {
                return;
            }
        }
        self.queue.push(at, ev.pack());
    }

    /// A receive interrupt `t` fires on vCPU `v`: it preempts the task
    /// running there (which resumes first when the interrupt is done) and
    /// starts at once if the vCPU runs, else when the vCPU next gets a core
    /// (a halted vCPU is woken). Entry costs no process context switch.
    fn raise_irq(&mut self, t: TaskId, v: VcpuId) {
        let running = matches!(self.vcpus[v].hv, HvState::Running(_));
        if running {
            if let Some(cur) = self.vcpus[v].guest.current {
                self.stop_task(cur);
            }
        }
        self.vcpus[v].guest.preempt(t);
        match self.vcpus[v].hv {
            HvState::Running(_) => {
                self.start_task(t);
                self.kick(v);
            }
            HvState::Blocked => self.hv_wake(v),
            HvState::Runnable => {}
        }
    }

    /// A blocked or sleeping task becomes runnable on its vCPU.
    fn wake_task(&mut self, t: TaskId) {
        self.wake_task_from(t, None);
    }

    /// [`Engine::wake_task`] by task `waker` of its domain (a message; None:
    /// a timer or another domain): a migrating guest scheduler may place it
    /// elsewhere.
    fn wake_task_from(&mut self, t: TaskId, waker: Option<TaskId>) {
        let task = &mut self.tasks[t];
        if task.state == TaskState::Done {
            return;
        }
        task.state = TaskState::Runnable;
        task.gen = task.gen.wrapping_add(1);
        let mut v = task.vcpu;
        if let Role::RxIrq { .. } = task.role {
            return self.raise_irq(t, v);
        }
        if self.guest_sched.is_some() {
            v = self.guest_place(t, waker);
        }
        let current = self.vcpus[v].guest.enqueue(t);
        self.after_enqueue(t, v, current);
    }

    /// What a task's arrival on vCPU `v` (as its `current` or queued) sets off.
    fn after_enqueue(&mut self, t: TaskId, v: VcpuId, current: bool) {
        if current {
            if self.guest_costs {
                self.guest_arrival(t, v);
            }
            match self.vcpus[v].hv {
                HvState::Blocked => self.hv_wake(v),
                HvState::Running(_) => self.kick(v),
                HvState::Runnable => {}
            }
            return;
        }
        if let HvState::Running(_) = self.vcpus[v].hv {
            if self.vcpus[v].guest.queue.len() == 1 {
                self.arm_guest_slice(v);
                // A lone spinner now has someone to yield to.
                let cur = self.vcpus[v]
                    .guest
                    .current
                    .expect("enqueue kept the current task");
                self.arm_poll_if_spinning(cur);
            }
        }
    }
}

/// Each domain's vCPUs as `(first, count)`: the dense ids `first..first + count`.
fn vcpu_ranges(sc: &Scenario) -> Vec<(usize, usize)> {
    first_vcpus(sc)
        .into_iter()
        .zip(&sc.domains)
        .map(|(first, d)| (first, d.vcpus))
        .collect()
}

/// The index of each domain's first vCPU (vCPUs are numbered domain by domain).
fn first_vcpus(sc: &Scenario) -> Vec<usize> {
    sc.domains
        .iter()
        .scan(0, |acc, d| {
            let first = *acc;
            *acc += d.vcpus;
            Some(first)
        })
        .collect()
}

/// A rank's program, behind its untimed set-up and the start of its job's
/// clock when the clock waits for the ranks (`timed_from = "all_ranks_ran"`).
fn timed_program(job: &crate::scenario::Job, steps: Vec<Step>) -> Vec<Step> {
    if job.timed_from == TimedFrom::Start {
        return steps;
    }
    let setup = (job.untimed_us > 0).then_some(Step::Compute {
        ns: job.untimed_us * 1000,
        jitter_ppm: 0,
    });
    setup
        .into_iter()
        .chain([Step::ClockStart])
        .chain(steps)
        .collect()
}
