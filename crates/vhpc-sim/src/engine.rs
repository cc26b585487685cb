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
//! [`Engine::settle`] charges the stretch to debt (switch costs), to the work
//! at the front of its queue, or to spinning. Stale events are recognised by
//! generation counters rather than removed from the queue.

use std::collections::{BTreeMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::guest::{GuestRunqueue, TaskId};
use crate::hypervisor::{self, CoreId, Leave, Scheduler, SchedulerParams, SedfParams, VcpuId, VcpuSpec};
use crate::metrics::{CoreReport, JobReport, RankReport, Report, VcpuReport};
use crate::mpi::{self, Kind, Packet, Protocol, RankMpi, Then, WaitPolicy};
use crate::queue::EventQueue;
use crate::scenario::{Channel, Scenario};
use crate::time::SimTime;
use crate::trace::Slice;
use crate::workload::{self, Op, Program, Shape};

#[derive(Debug, Clone, Copy)]
enum Ev {
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
}

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
    Mpi(Then),
    /// dom0 relayed this packet of `job`: forward it to its destination.
    Forward { job: u32, packet: Packet },
}

#[derive(Debug, Clone, Copy)]
struct Work {
    ns: u64,
    after: After,
}

#[derive(Debug)]
enum Role {
    Rank { job: u32, rank: u32, program: Program, mpi: Box<RankMpi>, policy: WaitPolicy },
    /// dom0's network back end on one of its vCPUs.
    Relay,
    /// Kernel housekeeping of a vCPU: `work` every ~`interval` (mean);
    /// `busy` while a wake-up's work is queued.
    Background { interval: u64, work: u64, busy: bool },
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
    sleep_ns: u64,
}

#[derive(Debug)]
struct Task {
    vcpu: VcpuId,
    role: Role,
    state: TaskState,
    on_cpu: bool,
    since: SimTime,
    gen: u32,
    /// Switch costs to pay before anything else.
    debt: u64,
    work: VecDeque<Work>,
    wait: Wait,
    inbox: VecDeque<(u32, Packet)>,
    rng: Pcg64,
    stats: RankReport,
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

/// Values with a reusable slot number each (slots are reused last-freed
/// first, deterministically).
#[derive(Debug)]
struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { items: Vec::new(), free: Vec::new() }
    }
}

impl<T> Slab<T> {
    fn put(&mut self, item: T) -> u32 {
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

    fn take(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.items[slot as usize].take().expect("a slot is taken once")
    }
}

/// A rank pair's shared copy buffer: who streams through it, who waits.
#[derive(Debug, Default)]
struct CopyBuffer {
    owner: Option<u32>,
    parked: VecDeque<(TaskId, Packet)>,
}

#[derive(Debug)]
struct JobState {
    name: String,
    workload: String,
    policy: String,
    tasks: Vec<TaskId>,
    endless: bool,
    done_ranks: u32,
    completion: Option<SimTime>,
}

#[derive(Debug)]
struct DomainInfo {
    name: String,
    native: bool,
}

/// Costs the engine applies, taken from the scenario once.
#[derive(Debug)]
struct Costs {
    vcpu_switch: u64,
    guest_switch: u64,
    guest_slice: SimTime,
    window: u64,
    futile_yields: u32,
    sleep_min: u64,
    sleep_max: u64,
    proto: Protocol,
    shm: Channel,
    native: Channel,
    inter_vm: Channel,
}

/// One simulation, built from a validated scenario.
#[derive(Debug)]
pub struct Engine {
    now: SimTime,
    limit: SimTime,
    queue: EventQueue<Ev>,
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
    /// Packets on their way, referenced by Arrive events.
    in_flight: Slab<(u32, Packet)>,
    /// Copy buffers of rank pairs in use: (job, lower rank, higher rank).
    lmt: BTreeMap<(u32, u32, u32), CopyBuffer>,
    /// Reused buffer for the work an MPI call asks for.
    mpi_scratch: VecDeque<mpi::MpiWork>,
    trace: Option<Vec<Slice>>,
    name: String,
    seed: u64,
}

impl Engine {
    /// Builds the host, domains, tasks and scheduler of `sc`; `seed`
    /// overrides the scenario's.
    pub fn new(sc: &Scenario, seed: Option<u64>, trace: bool) -> Engine {
        let seed = seed.unwrap_or(sc.seed);
        let hv = &sc.hypervisor;
        let params = SchedulerParams {
            cores: sc.host.cores,
            tslice: SimTime::from_us(hv.tslice_us),
            tick: SimTime::from_us(hv.tick_us),
            ticks_per_acct: hv.ticks_per_acct,
            ratelimit: SimTime::from_us(hv.ratelimit_us),
            boost: hv.boost,
            extra_quantum: SimTime::from_us(hv.extra_quantum_us),
        };
        let info = hypervisor::by_name(&hv.scheduler).expect("validated scheduler name");
        let mut e = Engine {
            now: SimTime::ZERO,
            limit: SimTime::from_ms(sc.limit_ms),
            queue: EventQueue::with_capacity(1024),
            sched: (info.build)(&params),
            scheduler_name: info.name.to_string(),
            cores: (0..sc.host.cores).map(|_| Core { vcpu: None, since: SimTime::ZERO, slice_end: SimTime::MAX, timer_at: SimTime::MAX, last: None, busy: 0, idle: 0, switches: 0 }).collect(),
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
                futile_yields: sc.mpi.adaptive_futile_yields,
                sleep_min: sc.mpi.adaptive_sleep_min_us * 1000,
                sleep_max: sc.mpi.adaptive_sleep_max_us * 1000,
                proto: Protocol { eager_limit: sc.mpi.eager_limit },
                shm: sc.mpi.shm.clone(),
                native: sc.mpi.native.clone(),
                inter_vm: sc.mpi.inter_vm.clone(),
            },
            live_jobs: 0,
            events: 0,
            tickle: Vec::new(),
            mpi_scratch: VecDeque::new(),
            lmt: BTreeMap::new(),
            in_flight: Slab::default(),
            trace: trace.then(Vec::new),
            name: sc.name.clone(),
            seed,
        };
        e.build_domains(sc, seed);
        e.build_jobs(sc, seed);
        e
    }

    fn build_domains(&mut self, sc: &Scenario, seed: u64) {
        let cores = sc.host.cores;
        for (d, dom) in sc.domains.iter().enumerate() {
            self.domains.push(DomainInfo { name: dom.name.clone(), native: dom.native });
            for i in 0..dom.vcpus {
                let v = self.vcpus.len();
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
                let spec = VcpuSpec { domain: d, weight: dom.weight, cap: dom.cap, affinity, initial_core, sedf };
                self.sched.add_vcpu(v, &spec);
                self.vcpus.push(Vcpu { domain: d, index: i as u32, hv: HvState::Blocked, guest: GuestRunqueue::default(), last_core: None, gen: 0, run_ns: 0, migrations: 0 });
                if dom.dom0 {
                    let t = self.new_task(v, Role::Relay, Pcg64::seed_from_u64(0));
                    self.relays.push(t);
                    // The back end sleeps until traffic arrives.
                    self.tasks[t].state = TaskState::Blocked;
                }
                if let Some(b) = &dom.background {
                    let role = Role::Background { interval: b.interval_us * 1000, work: b.work_us * 1000, busy: false };
                    let rng = Pcg64::new(seed as u128, (v as u128) << 1);
                    let t = self.new_task(v, role, rng);
                    self.tasks[t].state = TaskState::Sleeping;
                    self.background_wake(t);
                }
            }
        }
    }

    fn build_jobs(&mut self, sc: &Scenario, seed: u64) {
        // Ranks of one domain go to its vCPUs round robin.
        let mut next_vcpu = vec![0usize; sc.domains.len()];
        let first_vcpu: Vec<usize> = sc.domains.iter().scan(0, |acc, d| {
            let first = *acc;
            *acc += d.vcpus;
            Some(first)
        }).collect();
        for (j, job) in sc.jobs.iter().enumerate() {
            let info = workload::by_name(&job.workload).expect("validated workload");
            let policy = WaitPolicy::from_name(&job.wait_policy).expect("validated policy");
            let n = job.ranks.len() as u32;
            let mut tasks = Vec::new();
            for (r, dom_name) in job.ranks.iter().enumerate() {
                let d = sc.domains.iter().position(|d| &d.name == dom_name).expect("validated domain");
                let v = first_vcpu[d] + next_vcpu[d] % sc.domains[d].vcpus;
                next_vcpu[d] += 1;
                let shape = Shape { rank: r as u32, ranks: n };
                let program = Program::new((info.build)(&job.params, shape), shape);
                let role = Role::Rank { job: j as u32, rank: r as u32, program, mpi: Box::default(), policy };
                // One random stream per task, so a task's draws do not depend on others'.
                let rng = Pcg64::new(seed as u128, (self.tasks.len() as u128) << 1 | 1);
                let t = self.new_task(v, role, rng);
                self.tasks[t].stats = RankReport { job: job.name.clone(), rank: r as u32, domain: dom_name.clone(), vcpu: self.vcpus[v].index, ..Default::default() };
                tasks.push(t);
            }
            if !info.endless {
                self.live_jobs += 1;
            }
            self.jobs.push(JobState { name: job.name.clone(), workload: job.workload.clone(), policy: job.wait_policy.clone(), tasks, endless: info.endless, done_ranks: 0, completion: None });
        }
    }

    fn new_task(&mut self, vcpu: VcpuId, role: Role, rng: Pcg64) -> TaskId {
        self.tasks.push(Task {
            vcpu,
            role,
            state: TaskState::Runnable,
            on_cpu: false,
            since: SimTime::ZERO,
            gen: 0,
            debt: 0,
            work: VecDeque::new(),
            wait: Wait::default(),
            inbox: VecDeque::new(),
            rng,
            stats: RankReport::default(),
        });
        self.tasks.len() - 1
    }

    /// "domain.vN" for every vCPU, in id order (trace track names).
    pub fn vcpu_names(&self) -> Vec<String> {
        self.vcpus.iter().map(|v| format!("{}.v{}", self.domains[v.domain].name, v.index)).collect()
    }

    /// Runs to the end (every finite job done, or the limit) and reports.
    pub fn run(mut self) -> (Report, Option<Vec<Slice>>) {
        for t in 0..self.tasks.len() {
            if self.tasks[t].state == TaskState::Runnable {
                self.wake_task(t);
            }
        }
        self.schedule_timer();
        while self.live_jobs > 0 {
            let Some((time, ev)) = self.queue.pop() else { break };
            if time > self.limit {
                self.now = self.limit;
                break;
            }
            self.now = time;
            if self.dispatch(ev) {
                self.events += 1;
            }
        }
        self.finish()
    }

    /// Handles one event; `false` if it was stale (superseded, not counted).
    fn dispatch(&mut self, ev: Ev) -> bool {
        match ev {
            Ev::Slice { core } => return self.slice_timer(core as usize),
            Ev::Work { task, gen } if self.tasks[task as usize].gen == gen => self.kick(self.tasks[task as usize].vcpu),
            Ev::Poll { task, gen } if self.tasks[task as usize].gen == gen => self.poll_window_end(task as usize),
            Ev::Wake { task } if self.tasks[task as usize].state == TaskState::Sleeping => self.wake_task(task as usize),
            Ev::GuestSlice { vcpu, gen } if self.vcpus[vcpu as usize].gen == gen => self.guest_slice_end(vcpu as usize),
            Ev::Arrive { task, slot } => {
                let (job, packet) = self.in_flight.take(slot);
                self.arrive(task as usize, job, packet);
            }
            Ev::Timer => self.timer(),
            _ => return false,
        }
        true
    }

    // ---- hypervisor level -------------------------------------------------

    fn schedule_timer(&mut self) {
        let next = self.sched.next_timer();
        if next != SimTime::MAX {
            self.queue.push(next.max(self.now), Ev::Timer);
        }
    }

    fn timer(&mut self) {
        let ran: Vec<SimTime> = self.cores.iter().map(|c| if c.vcpu.is_some() { self.now - c.since } else { SimTime::ZERO }).collect();
        let mut tickle = std::mem::take(&mut self.tickle);
        self.sched.timer(self.now, &self.running, &ran, &mut tickle);
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
            self.queue.push(end, Ev::Slice { core: core as u32 });
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
        if let Some(v) = self.cores[core].vcpu {
            self.take_off(core, v, Leave::Preempted);
        }
        self.decide(core);
    }

    /// Picks for an empty core until something keeps it (or it idles).
    fn decide(&mut self, core: CoreId) {
        loop {
            let pick = self.sched.pick(self.now, core, &self.running);
            // A zero slice would re-decide forever at one instant.
            let end = self.now.saturating_add(pick.slice.max(SimTime::from_ns(1)));
            self.set_slice_end(core, end);
            let Some(v) = pick.vcpu else { return };
            self.put_on(core, v);
            match self.run_guest(v) {
                VcpuNext::Keep => return,
                VcpuNext::Halt => self.take_off(core, v, Leave::Blocked),
            }
        }
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
                trace.push(Slice { core: core as u32, vcpu: v as u32, start_ns: (now - ran).as_ns(), end_ns: now.as_ns() });
            }
        }
        let vc = &mut self.vcpus[v];
        vc.run_ns += ran.as_ns();
        vc.gen = vc.gen.wrapping_add(1);
        vc.hv = if why == Leave::Blocked { HvState::Blocked } else { HvState::Runnable };
        if let Some(t) = vc.guest.current {
            self.stop_task(t);
        }
        self.sched.deschedule(now, core, v, ran, why);
    }

    fn hv_wake(&mut self, v: VcpuId) {
        if self.vcpus[v].hv != HvState::Blocked {
            return;
        }
        self.vcpus[v].hv = HvState::Runnable;
        let mut tickle = std::mem::take(&mut self.tickle);
        self.sched.wake(self.now, v, &self.running, &mut tickle);
        self.apply_tickles(&mut tickle);
        self.tickle = tickle;
    }

    // ---- guest level --------------------------------------------------------

    /// Lets the vCPU's tasks run until one keeps the CPU or none is left.
    fn run_guest(&mut self, v: VcpuId) -> VcpuNext {
        loop {
            let Some(t) = self.vcpus[v].guest.current else { return VcpuNext::Halt };
            match self.step(t) {
                Next::Keep => return VcpuNext::Keep,
                Next::Leave => {
                    self.stop_task(t);
                    if let Some(n) = self.vcpus[v].guest.leave() {
                        self.switch_to(n);
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
        let HvState::Running(core) = self.vcpus[v].hv else { return };
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
            self.tasks[t].wait.yield_was_futile = futile;
        }
    }

    fn guest_slice_end(&mut self, v: VcpuId) {
        let HvState::Running(_) = self.vcpus[v].hv else { return };
        let Some(t) = self.vcpus[v].guest.current else { return };
        self.settle(t);
        if let Some(n) = self.vcpus[v].guest.rotate() {
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
        self.queue.push(self.now + self.costs.guest_slice, Ev::GuestSlice { vcpu: v as u32, gen });
    }

    /// A blocked or sleeping task becomes runnable on its vCPU.
    fn wake_task(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        if task.state == TaskState::Done {
            return;
        }
        task.state = TaskState::Runnable;
        task.gen = task.gen.wrapping_add(1);
        let v = task.vcpu;
        if self.vcpus[v].guest.enqueue(t) {
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
                let cur = self.vcpus[v].guest.current.expect("enqueue kept the current task");
                self.arm_poll_if_spinning(cur);
            }
        }
    }

    // ---- task level -------------------------------------------------------

    fn start_task(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        task.on_cpu = true;
        task.since = self.now;
        task.gen = task.gen.wrapping_add(1);
        task.wait.armed = false;
    }

    fn stop_task(&mut self, t: TaskId) {
        self.settle(t);
        let task = &mut self.tasks[t];
        task.on_cpu = false;
        task.gen = task.gen.wrapping_add(1);
        task.wait.armed = false;
    }

    /// Charges the time since `since` to debt, the front work item, or spin.
    fn settle(&mut self, t: TaskId) {
        let now = self.now;
        let task = &mut self.tasks[t];
        if !task.on_cpu {
            return;
        }
        let mut elapsed = (now - task.since).as_ns();
        task.since = now;
        let paid = elapsed.min(task.debt);
        task.debt -= paid;
        task.stats.overhead_ns += paid;
        elapsed -= paid;
        if elapsed == 0 {
            return;
        }
        if let Some(w) = task.work.front_mut() {
            let done = elapsed.min(w.ns);
            w.ns -= done;
            match w.after {
                After::Compute => task.stats.useful_ns += done,
                _ => task.stats.overhead_ns += done,
            }
            debug_assert_eq!(done, elapsed, "a work item outlived its event");
        } else if task.wait.active {
            task.stats.poll_ns += elapsed;
            task.wait.spun += elapsed;
        }
    }

    /// Advances a task that holds the CPU as far as it can go now.
    fn step(&mut self, t: TaskId) -> Next {
        self.settle(t);
        loop {
            if let Some(next) = self.finish_work(t) {
                return next;
            }
            let task = &mut self.tasks[t];
            if let Role::Background { work, busy, .. } = &mut task.role {
                *busy = !*busy;
                if *busy {
                    let ns = *work;
                    task.work.push_back(Work { ns, after: After::Compute });
                    continue;
                }
                // This wake-up's work is done: sleep until the next one.
                task.state = TaskState::Sleeping;
                self.background_wake(t);
                return Next::Leave;
            }
            if let Role::Relay = task.role {
                match task.inbox.pop_front() {
                    Some((job, packet)) => {
                        let ch = &self.costs.inter_vm;
                        let ns = ch.relay_ns + ch.relay_ns_per_kib * packet.bytes / 1024;
                        task.work.push_back(Work { ns, after: After::Forward { job, packet } });
                        continue;
                    }
                    None => {
                        task.state = TaskState::Blocked;
                        return Next::Leave;
                    }
                }
            }
            if task.wait.active {
                if let Some((_, packet)) = task.inbox.pop_front() {
                    self.on_packet(t, packet);
                    continue;
                }
                let Role::Rank { mpi, .. } = &task.role else { unreachable!() };
                if mpi.outstanding == 0 {
                    task.wait = Wait::default();
                    continue;
                }
                return self.keep_waiting(t);
            }
            if let Some(next) = self.next_op(t) {
                return next;
            }
        }
    }

    /// Runs completed work items' consequences; `Some(Keep)` if work remains
    /// (its event is scheduled).
    fn finish_work(&mut self, t: TaskId) -> Option<Next> {
        loop {
            let task = &mut self.tasks[t];
            match task.work.front() {
                Some(w) if w.ns == 0 && task.debt == 0 => {
                    let after = w.after;
                    task.work.pop_front();
                    self.after_work(t, after);
                }
                Some(w) => {
                    let at = self.now + SimTime::from_ns(task.debt + w.ns);
                    self.queue.push(at, Ev::Work { task: t as u32, gen: task.gen });
                    return Some(Next::Keep);
                }
                None if task.debt > 0 => {
                    let at = self.now + SimTime::from_ns(task.debt);
                    task.work.push_back(Work { ns: 0, after: After::Compute });
                    self.queue.push(at, Ev::Work { task: t as u32, gen: task.gen });
                    return Some(Next::Keep);
                }
                None => return None,
            }
        }
    }

    fn after_work(&mut self, t: TaskId, after: After) {
        match after {
            After::Compute | After::Mpi(Then::Nothing) => {}
            After::Mpi(Then::Inject(p)) => {
                let Role::Rank { job, .. } = self.tasks[t].role else { unreachable!() };
                self.tasks[t].stats.messages_sent += 1;
                self.inject(t, job, p);
            }
            After::Mpi(Then::RecvDone) => {
                if let Role::Rank { mpi, .. } = &mut self.tasks[t].role {
                    mpi.outstanding -= 1;
                }
            }
            After::Mpi(Then::SendDone { dst }) => {
                let Role::Rank { mpi, job, rank, .. } = &mut self.tasks[t].role else { unreachable!() };
                mpi.outstanding -= 1;
                let (job, rank) = (*job, *rank);
                if self.channel(t, job, dst).shared_copy_buffer {
                    self.lmt_release(job, rank, dst);
                }
            }
            After::Forward { job, packet } => {
                let dst = self.jobs[job as usize].tasks[packet.dst as usize];
                let at = self.now + SimTime::from_ns(self.costs.inter_vm.latency_ns);
                self.send_packet(at, dst, job, packet);
            }
        }
    }

    /// Fetches and starts the next program operation; `Some` when the task
    /// finished.
    fn next_op(&mut self, t: TaskId) -> Option<Next> {
        let task = &mut self.tasks[t];
        let Role::Rank { program, job, rank, .. } = &mut task.role else { unreachable!() };
        let (job, me) = (*job, *rank);
        match program.next_op(&mut task.rng) {
            Op::Compute(d) => task.work.push_back(Work { ns: d.as_ns(), after: After::Compute }),
            Op::Isend { peer, bytes } => {
                let ch = self.channel(t, job, peer).clone();
                self.mpi_call(t, |mpi, out, proto| mpi.isend(me, peer, bytes, proto, &ch, out));
            }
            Op::Irecv { peer, bytes } => {
                let ch = self.channel(t, job, peer).clone();
                self.mpi_call(t, |mpi, out, _| mpi.irecv(me, peer, bytes, &ch, out));
            }
            Op::WaitAll => task.wait = Wait { active: true, ..Wait::default() },
            Op::Done => {
                self.rank_done(t, job);
                return Some(Next::Leave);
            }
        }
        None
    }

    fn mpi_call(&mut self, t: TaskId, f: impl FnOnce(&mut RankMpi, &mut VecDeque<mpi::MpiWork>, &Protocol)) {
        let mut out = std::mem::take(&mut self.mpi_scratch);
        let proto = self.costs.proto;
        let Role::Rank { mpi, .. } = &mut self.tasks[t].role else { unreachable!() };
        f(mpi, &mut out, &proto);
        let work = &mut self.tasks[t].work;
        work.extend(out.drain(..).map(|w| Work { ns: w.ns, after: After::Mpi(w.then) }));
        self.mpi_scratch = out;
    }

    fn on_packet(&mut self, t: TaskId, p: Packet) {
        let Role::Rank { job, rank, .. } = self.tasks[t].role else { unreachable!() };
        let ch = self.channel(t, job, p.src).clone();
        if p.kind == Kind::Cts && ch.shared_copy_buffer && !self.lmt_acquire(t, job, rank, p) {
            return; // parked until the pair's copy buffer is free
        }
        self.mpi_call(t, |mpi, out, _| mpi.on_packet(rank, p, &ch, out));
    }

    /// The sender of a rendezvous transfer takes the pair's copy buffer, or
    /// parks its clear-to-send until the transfer that holds it is done.
    fn lmt_acquire(&mut self, t: TaskId, job: u32, me: u32, cts: Packet) -> bool {
        let buf = self.lmt.entry((job, me.min(cts.src), me.max(cts.src))).or_default();
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
    fn lmt_release(&mut self, job: u32, me: u32, dst: u32) {
        let key = (job, me.min(dst), me.max(dst));
        let Some(buf) = self.lmt.get_mut(&key) else { return };
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

    /// The channel between task `t` and rank `peer` of its job.
    fn channel(&self, t: TaskId, job: u32, peer: u32) -> &Channel {
        let other = self.jobs[job as usize].tasks[peer as usize];
        let (a, b) = (self.vcpus[self.tasks[t].vcpu].domain, self.vcpus[self.tasks[other].vcpu].domain);
        if a != b {
            &self.costs.inter_vm
        } else if self.domains[a].native {
            &self.costs.native
        } else {
            &self.costs.shm
        }
    }

    /// A packet leaves its sender: straight to the peer inside a domain,
    /// through dom0's back end between domains.
    fn inject(&mut self, from: TaskId, job: u32, p: Packet) {
        let to = self.jobs[job as usize].tasks[p.dst as usize];
        let (src_dom, dst_dom) = (self.vcpus[self.tasks[from].vcpu].domain, self.vcpus[self.tasks[to].vcpu].domain);
        let ch = self.channel(from, job, p.dst);
        let at = self.now + SimTime::from_ns(ch.latency_ns);
        let target = if src_dom == dst_dom {
            to
        } else {
            // Each guest's traffic is served by one back-end vCPU of dom0.
            self.relays[src_dom % self.relays.len()]
        };
        self.send_packet(at, target, job, p);
    }

    fn send_packet(&mut self, at: SimTime, task: TaskId, job: u32, packet: Packet) {
        let slot = self.in_flight.put((job, packet));
        self.queue.push(at, Ev::Arrive { task: task as u32, slot });
    }

    fn arrive(&mut self, t: TaskId, job: u32, p: Packet) {
        let task = &mut self.tasks[t];
        task.inbox.push_back((job, p));
        let v = task.vcpu;
        match task.state {
            TaskState::Blocked => self.wake_task(t),
            TaskState::Runnable if task.on_cpu && task.work.is_empty() && task.debt == 0 => self.kick(v),
            _ => {} // busy, descheduled, or asleep: seen at its next poll
        }
    }

    fn rank_done(&mut self, t: TaskId, job: u32) {
        self.tasks[t].state = TaskState::Done;
        self.tasks[t].stats.finish_ns = Some(self.now.as_ns());
        let j = &mut self.jobs[job as usize];
        j.done_ranks += 1;
        if j.done_ranks as usize == j.tasks.len() {
            j.completion = Some(self.now);
            if !j.endless {
                self.live_jobs -= 1;
            }
        }
    }

    /// Schedules a background task's next wake-up, exponentially
    /// distributed around its mean interval (a Poisson stream of timers).
    fn background_wake(&mut self, t: TaskId) {
        let task = &mut self.tasks[t];
        let Role::Background { interval, .. } = task.role else { unreachable!() };
        let u: f64 = task.rng.gen_range(f64::EPSILON..1.0);
        let delay = (-u.ln() * interval as f64) as u64;
        self.queue.push(self.now + SimTime::from_ns(delay.max(1)), Ev::Wake { task: t as u32 });
    }

    // ---- waiting ----------------------------------------------------------

    /// Nothing to do but wait: what the policy does at this point.
    fn keep_waiting(&mut self, t: TaskId) -> Next {
        let task = &mut self.tasks[t];
        let Role::Rank { policy, .. } = task.role else { unreachable!() };
        let contended = self.vcpus[task.vcpu].guest.contended();
        match policy {
            WaitPolicy::BusyPoll => {
                if contended {
                    self.arm_poll(t);
                }
                Next::Keep
            }
            WaitPolicy::HvYield | WaitPolicy::Block => {
                self.arm_poll(t);
                Next::Keep
            }
            WaitPolicy::Adaptive => {
                if task.wait.futile >= self.costs.futile_yields && !contended {
                    return self.sleep(t);
                }
                self.arm_poll(t);
                Next::Keep
            }
        }
    }

    /// Schedules the end of the current poll window (once per wait stretch).
    fn arm_poll(&mut self, t: TaskId) {
        let window = self.costs.window;
        let task = &mut self.tasks[t];
        if task.wait.armed {
            return;
        }
        task.wait.armed = true;
        let left = window - task.wait.spun % window;
        self.queue.push(self.now + SimTime::from_ns(left), Ev::Poll { task: t as u32, gen: task.gen });
    }

    fn arm_poll_if_spinning(&mut self, t: TaskId) {
        let task = &self.tasks[t];
        if task.on_cpu && task.wait.active && task.work.is_empty() && task.debt == 0 {
            self.settle(t);
            self.arm_poll(t);
        }
    }

    /// A poll window ended while the task was spinning on a CPU.
    fn poll_window_end(&mut self, t: TaskId) {
        self.settle(t);
        let task = &mut self.tasks[t];
        task.wait.armed = false;
        if !task.wait.active || !task.work.is_empty() || task.debt > 0 {
            // It found work meanwhile; the window restarts when it spins again.
            return;
        }
        let v = task.vcpu;
        let Role::Rank { policy, .. } = task.role else { unreachable!() };
        let contended = self.vcpus[v].guest.contended();
        match policy {
            WaitPolicy::BusyPoll if contended => self.guest_yield(t),
            WaitPolicy::BusyPoll => {}
            WaitPolicy::Block => {
                task.state = TaskState::Blocked;
                task.stats.blocks += 1;
                self.leave_cpu(t);
            }
            WaitPolicy::HvYield | WaitPolicy::Adaptive if contended => self.guest_yield(t),
            WaitPolicy::HvYield | WaitPolicy::Adaptive => {
                let w = &mut task.wait;
                w.futile = if w.yield_was_futile { w.futile + 1 } else { 0 };
                task.stats.hv_yields += 1;
                let HvState::Running(core) = self.vcpus[v].hv else { unreachable!("a polling task runs") };
                self.take_off(core, v, Leave::Yielded);
                self.decide_after_yield(core, v);
                return;
            }
        }
        self.kick(v);
    }

    fn guest_yield(&mut self, t: TaskId) {
        let v = self.tasks[t].vcpu;
        self.tasks[t].stats.guest_yields += 1;
        if let Some(n) = self.vcpus[v].guest.rotate() {
            self.stop_task(t);
            self.switch_to(n);
        }
    }

    /// The current task of a running vCPU stops being runnable.
    fn leave_cpu(&mut self, t: TaskId) {
        let v = self.tasks[t].vcpu;
        self.stop_task(t);
        if let Some(n) = self.vcpus[v].guest.leave() {
            self.switch_to(n);
        }
    }

    /// `adaptive`'s bounded sleep: the task (and, alone, its vCPU) goes idle.
    fn sleep(&mut self, t: TaskId) -> Next {
        let (min, max) = (self.costs.sleep_min, self.costs.sleep_max);
        let task = &mut self.tasks[t];
        let w = &mut task.wait;
        w.sleep_ns = if w.sleep_ns == 0 { min } else { (w.sleep_ns * 2).min(max) };
        task.state = TaskState::Sleeping;
        task.stats.sleeps += 1;
        let at = self.now + SimTime::from_ns(w.sleep_ns);
        self.queue.push(at, Ev::Wake { task: t as u32 });
        Next::Leave
    }

    // ---- the end --------------------------------------------------------

    fn finish(mut self) -> (Report, Option<Vec<Slice>>) {
        let end = self.now;
        for core in 0..self.cores.len() {
            match self.cores[core].vcpu {
                Some(v) => self.take_off(core, v, Leave::Preempted),
                None => {
                    let c = &mut self.cores[core];
                    c.idle += (end - c.since).as_ns();
                    c.since = end;
                }
            }
        }
        let names: Vec<String> = self.vcpus.iter().map(|v| self.domains[v.domain].name.clone()).collect();
        let jobs = self.jobs.iter().map(|j| {
            let sum = |f: fn(&RankReport) -> u64| j.tasks.iter().map(|&t| f(&self.tasks[t].stats)).sum();
            JobReport {
                name: j.name.clone(),
                workload: j.workload.clone(),
                wait_policy: j.policy.clone(),
                ranks: j.tasks.len() as u32,
                completion_ns: j.completion.map(SimTime::as_ns),
                completion_s: j.completion.map(|c| c.as_ns() as f64 / 1e9),
                useful_ns: sum(|s| s.useful_ns),
                poll_ns: sum(|s| s.poll_ns),
                overhead_ns: sum(|s| s.overhead_ns),
            }
        }).collect();
        let ranks = self.jobs.iter().flat_map(|j| j.tasks.iter().map(|&t| self.tasks[t].stats.clone())).collect();
        let cores = self.cores.iter().enumerate().map(|(i, c)| CoreReport {
            core: i as u32,
            busy_ns: c.busy,
            idle_ns: c.idle,
            vcpu_switches: c.switches,
            utilisation: if end > SimTime::ZERO { c.busy as f64 / end.as_ns() as f64 } else { 0.0 },
        }).collect();
        let vcpus = self.vcpus.iter().zip(&names).map(|(v, name)| VcpuReport { domain: name.clone(), vcpu: v.index, run_ns: v.run_ns, migrations: v.migrations }).collect();
        let report = Report {
            scenario: self.name.clone(),
            scheduler: self.scheduler_name.clone(),
            seed: self.seed,
            end_ns: end.as_ns(),
            finished: self.live_jobs == 0,
            events: self.events,
            jobs,
            ranks,
            cores,
            vcpus,
        };
        let trace = self.trace.take().map(|mut slices| {
            slices.sort_by_key(|s| (s.core, s.start_ns));
            slices
        });
        (report, trace)
    }
}
