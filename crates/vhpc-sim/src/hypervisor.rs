//! Hypervisor schedulers: which vCPU runs on which physical core, and for how
//! long.
//!
//! A scheduler is a small state machine behind [`Scheduler`]; the engine owns
//! the cores and tells the scheduler what happened (a vCPU woke, blocked,
//! yielded, used up its slice), then asks it what to run next. Schedulers are
//! chosen by name ([`by_name`]) and listed with a one-line description
//! ([`SCHEDULERS`]).
//!
//! Contract between the engine and a scheduler:
//!
//! * A vCPU is in exactly one of three states: *running* on one core,
//!   *runnable* (the scheduler holds it in some run queue), or *blocked*
//!   (halted, held by nobody). All vCPUs start blocked; the engine wakes the
//!   ones that have work at time zero.
//! * [`Scheduler::pick`] must return a runnable vCPU (or `None` = idle) whose
//!   affinity allows `core`. Returning a vCPU that last ran elsewhere is a
//!   migration (Credit's idle cores stealing work do this). The returned vCPU
//!   becomes running on `core`; the scheduler no longer holds it as runnable.
//! * The engine calls [`Scheduler::deschedule`] exactly once for every vCPU it
//!   takes off a core, with the time it ran since it was picked, before it
//!   calls `pick` for that core again.
//! * Cores the scheduler lists in its `tickle` output are re-decided at once
//!   (the current vCPU is descheduled as preempted, then `pick` is called).
//! * The engine asks [`Scheduler::next_timer`] again after a vCPU blocks and
//!   after every core's decision, and arms a sooner timer if it moved
//!   earlier: a scheduler that must re-decide other cores where the trait
//!   has no `tickle` output (inside `pick` or `deschedule`) returns `now`
//!   and tickles them from [`Scheduler::timer`] (credit2 does, and credit
//!   for a vCPU it migrates).

use crate::time::SimTime;

pub mod credit;
pub mod credit2;
pub mod gang;
pub mod linux;
pub mod round_robin;
pub mod sedf;
pub mod slicer;
pub mod slicer_vcpu;
#[cfg(test)]
pub(crate) mod testbed;

/// Index of a physical core.
pub type CoreId = usize;
/// Index of a vCPU, dense over all domains (dom0's first).
pub type VcpuId = usize;

/// SEDF reservation of one vCPU: `slice` of every `period`, and whether it
/// may run in slack time beyond that (`extratime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SedfParams {
    pub period: SimTime,
    pub slice: SimTime,
    pub extratime: bool,
}

/// What a scheduler knows about a vCPU: set once, before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VcpuSpec {
    /// Owning domain (dom0 is 0).
    pub domain: usize,
    /// Credit weight of the domain (Xen's default is 256).
    pub weight: u32,
    /// Cap in percent of one core; 0 means uncapped.
    pub cap: u32,
    /// Cores this vCPU may run on, ascending; never empty.
    pub affinity: Vec<CoreId>,
    /// The core it starts on (Xen places vCPUs round-robin at creation).
    pub initial_core: CoreId,
    /// SEDF parameters of the domain.
    pub sedf: SedfParams,
}

/// Why a vCPU left its core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leave {
    /// Its slice ran out or a tickle preempted it; it is still runnable.
    Preempted,
    /// It yielded the core (SCHEDOP_yield); it is still runnable.
    Yielded,
    /// It halted (SCHEDOP_block); it is blocked until woken.
    Blocked,
}

/// A scheduling decision for one core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// The vCPU to run, or `None` to leave the core idle.
    pub vcpu: Option<VcpuId>,
    /// How long it may run before the engine asks again. [`SimTime::MAX`]
    /// means "until something happens" (an idle core waits for a tickle).
    pub slice: SimTime,
}

/// One pluggable hypervisor scheduling policy.
pub trait Scheduler: std::fmt::Debug + Send {
    /// Registers vCPU `v` (called for every vCPU in id order before the run).
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec);

    /// A blocked vCPU becomes runnable. Push cores that should re-decide now
    /// (to preempt their current vCPU, or idle cores that should pick it up)
    /// into `tickle`. `running[c]` is what core `c` runs right now.
    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    );

    /// The engine took running vCPU `v` off `core` after it ran `ran` since
    /// it was picked. For `Preempted` and `Yielded` the scheduler must hold it
    /// as runnable again; for `Blocked` it must forget it until `wake`.
    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, ran: SimTime, why: Leave);

    /// Chooses what `core` runs next. `running` shows the other cores.
    fn pick(&mut self, now: SimTime, core: CoreId, running: &[Option<VcpuId>]) -> Pick;

    /// The next time [`timer`](Self::timer) must be called (accounting
    /// ticks), or [`SimTime::MAX`] for none.
    fn next_timer(&self) -> SimTime;

    /// Periodic accounting at `now == next_timer()`. `running[c]` is what
    /// core `c` runs and `ran_so_far[c]` how long it has run since picked.
    /// Push cores whose current decision must be re-taken into `tickle`.
    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        ran_so_far: &[SimTime],
        tickle: &mut Vec<CoreId>,
    );

    /// Whether this scheduler folds futile yields
    /// ([`repeat_futile_yields`](Self::repeat_futile_yields)). One that does
    /// also promises that a futile yield (a `deschedule(.., Yielded)` and a
    /// `pick` that hands the core straight back to the same vCPU) changes
    /// nothing another core's pick depends on: the engine does not count
    /// such a pair as a change when it decides whether a yield may fold.
    fn folds_futile_yields(&self) -> bool {
        false
    }

    /// Closed-form futile yields (the engine's `fold`): `v` yielded on
    /// `core` and [`pick`](Self::pick) handed `core` straight back to it,
    /// and since then the scheduler saw no call but other vCPUs' futile
    /// yields (and folds). Account `n` more such pairs
    /// of `deschedule(.., Yielded)` and `pick`, the i-th at
    /// `first + i * every` (i = 0..n), each picking `v` again on `core`
    /// with nothing else happening in between, exactly as those calls
    /// would, and return the slice of the last pick (the same as the pick
    /// before them). `None`, the default: this scheduler cannot say in
    /// closed form (nothing changed); the engine then makes the calls one
    /// by one.
    fn repeat_futile_yields(
        &mut self,
        _core: CoreId,
        _v: VcpuId,
        _first: SimTime,
        _every: SimTime,
        _n: u64,
    ) -> Option<SimTime> {
        None
    }
}

/// Scheduler parameters a scenario may set; each scheduler reads the ones it
/// knows and ignores the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerParams {
    /// Number of physical cores.
    pub cores: usize,
    /// Sockets the cores are split into evenly (credit2: one runqueue each).
    pub sockets: usize,
    /// Credit: time slice (Xen: 30 ms). Round robin: its quantum.
    pub tslice: SimTime,
    /// Credit: accounting tick (Xen: 10 ms; credit is distributed every
    /// `ticks_per_acct` ticks, i.e. every 30 ms).
    pub tick: SimTime,
    /// Credit: ticks per accounting period (Xen: 3).
    pub ticks_per_acct: u32,
    /// Credit: minimum run time before a waking vCPU may preempt (Xen 4.2+
    /// `sched_ratelimit_us`; 0 in Xen 3.4, which S0 used).
    pub ratelimit: SimTime,
    /// Credit: whether waking vCPUs get BOOST priority.
    pub boost: bool,
    /// Credit: re-pick a running vCPU's core at every tick
    /// (`_csched_cpu_pick` from `csched_vcpu_acct`, Xen 3.4).
    pub cpu_pick: bool,
    /// SEDF: quantum handed out in slack ("extra") time.
    pub extra_quantum: SimTime,
    /// The lab's slicer: poll interval, switch cost, work conservation.
    /// Its slice is `tslice`.
    pub slicer: slicer::SlicerParams,
    /// Linux's fair scheduler: base slice, tick, wake-up granularity,
    /// bandwidth period.
    pub linux: linux::LinuxParams,
    /// Gang scheduling: skew bound (0 = strict), turns by weight.
    pub gang: gang::GangParams,
}

impl SchedulerParams {
    /// Cores per socket: the cores split into `sockets` contiguous runs, the
    /// last one shorter when they do not divide evenly.
    pub fn cores_per_socket(&self) -> usize {
        self.cores.div_ceil(self.sockets.clamp(1, self.cores.max(1))).max(1)
    }

    /// Xen 3.4's defaults on a host with `cores` cores.
    pub fn xen_defaults(cores: usize) -> Self {
        SchedulerParams {
            cores,
            sockets: 1,
            tslice: SimTime::from_ms(30),
            tick: SimTime::from_ms(10),
            ticks_per_acct: 3,
            ratelimit: SimTime::ZERO,
            boost: true,
            cpu_pick: false,
            extra_quantum: SimTime::from_us(500),
            slicer: slicer::SlicerParams::default(),
            linux: linux::LinuxParams::default(),
            gang: gang::GangParams::default(),
        }
    }
}

/// A registered scheduler: its name, a one-line description, and a builder.
#[derive(Debug, Clone, Copy)]
pub struct SchedulerInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub build: fn(&SchedulerParams) -> Box<dyn Scheduler>,
}

/// Every scheduler, in the order `vhpc sim schedulers` lists them.
pub const SCHEDULERS: &[SchedulerInfo] = &[
    SchedulerInfo {
        name: "credit",
        description:
            "Xen's credit1 (sched_credit.c, Xen 3.4): 30 ms slice, 10 ms accounting tick, \
                      credits by weight, BOOST/UNDER/OVER, caps, idle cores steal runnable vCPUs, \
                      running vCPUs move to the socket with more idle cores at ticks",
        build: |p| Box::new(credit::Credit::new(p)),
    },
    SchedulerInfo {
        name: "credit2",
        description: "Xen's credit2 (sched_credit2.c, Xen 4.10): one runqueue per socket sorted by \
                      credit burned inversely to weight, credit reset at 0, slices from the credit \
                      gap (0.5-10 ms), wake-up tickles, migration resistance, load balancing, caps",
        build: |p| Box::new(credit2::Credit2::new(p)),
    },
    SchedulerInfo {
        name: "sedf",
        description:
            "Xen's SEDF (sched_sedf.c): per-vCPU period and slice, earliest deadline first, \
                      slack time handed out in small extra quanta, no migration",
        build: |p| Box::new(sedf::Sedf::new(p)),
    },
    SchedulerInfo {
        name: "linux",
        description: "Linux's fair scheduler (CFS/EEVDF) as the host: per-core run queues, \
                      group then task virtual runtime, base slice ending on a tick, wake-up \
                      preemption, sched_yield, cgroup shares by weight, CFS quota by cap",
        build: |p| Box::new(linux::Linux::new(p)),
    },
    SchedulerInfo {
        name: "slicer",
        description: "vhpc lab's freezer time slicer: one domain at a time on every core (gang), \
                      or one vCPU at a time per core (slicing = \"vcpu\"), 30 ms slices in turn \
                      or by weight, left early when idle at the next poll, cores idle during a switch",
        build: |p| {
            if p.slicer.per_vcpu {
                Box::new(slicer_vcpu::VcpuSlicer::new(p))
            } else {
                Box::new(slicer::Slicer::new(p))
            }
        },
    },
    SchedulerInfo {
        name: "gang",
        description: "gang scheduling: all runnable vCPUs of a domain run together or not at all, \
                      turns of tslice in turn or by weight, small domains packed onto free cores; \
                      relaxed co-scheduling (VMware) with skew_us > 0",
        build: |p| Box::new(gang::Gang::new(p)),
    },
    SchedulerInfo {
        name: "round_robin",
        description: "plain per-core round robin with a fixed quantum, no priorities or migration \
                      (for analytic tests)",
        build: |p| Box::new(round_robin::RoundRobin::new(p)),
    },
];

/// The scheduler registered under `name`.
pub fn by_name(name: &str) -> Option<&'static SchedulerInfo> {
    SCHEDULERS.iter().find(|s| s.name == name)
}

/// A vCPU of `domain` for schedulers' unit tests (S0's SEDF defaults, first
/// allowed core as its initial one).
#[cfg(test)]
pub(crate) fn test_spec(domain: usize, weight: u32, cap: u32, affinity: Vec<CoreId>) -> VcpuSpec {
    VcpuSpec {
        domain,
        weight,
        cap,
        initial_core: affinity[0],
        affinity,
        sedf: SedfParams {
            period: SimTime::from_ms(100),
            slice: SimTime::ZERO,
            extratime: true,
        },
    }
}
