//! The scenario schema: serde structs that are the single source of truth for
//! what a scenario TOML file may contain, plus the checks serde cannot express.
//!
//! Every time is an integer with its unit in the field name (`tslice_us`), so
//! a scenario never carries a float time. Every field has a default except
//! what a scenario must say (the host's cores, the domains, the jobs), so the
//! files under `scenarios/` stay short. Errors name the file and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

mod guest;
pub use guest::GuestTopology;
mod locate;
mod machines;
mod tick;
pub use tick::Tick;

pub use machines::MachineNic;

/// A validation or parse error: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub origin: String,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(
                f,
                "{}: field `{}`: {}",
                self.origin, self.field, self.message
            )
        }
    }
}

impl std::error::Error for ScenarioError {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in reports.
    #[serde(default)]
    pub name: String,
    /// Seed of the run's random stream (compute jitter); `--seed` overrides.
    #[serde(default = "one")]
    pub seed: u64,
    /// Stop the run at this simulated time even if jobs have not finished.
    #[serde(default = "default_limit_ms")]
    pub limit_ms: u64,
    pub host: Host,
    #[serde(default)]
    pub hypervisor: Hypervisor,
    #[serde(default)]
    pub guest: Guest,
    #[serde(default)]
    pub mpi: Mpi,
    /// The NUMA memory model; absent = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    pub domains: Vec<Domain>,
    pub jobs: Vec<Job>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// A named host from `vhpc sim hosts` ([`crate::host::presets`]): it
    /// fills `cores`, `sockets`, `numa_nodes`, `nodes` and `distance`;
    /// fields given beside it must agree with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Required unless a preset gives it (0 in a file = not given).
    #[serde(default)]
    pub cores: usize,
    /// Not given (0): the preset's, else one per machine. Credit2 keeps a run
    /// queue per socket.
    #[serde(default)]
    pub sockets: usize,
    /// Not given (0): the preset's, else the number of `nodes`, else one per
    /// machine.
    #[serde(default)]
    pub numa_nodes: usize,
    /// One entry per NUMA node (optional): its cores, memory, bandwidth.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NumaNode>,
    /// ACPI SLIT-style distances between nodes, 10 = local (default: 10
    /// local, 20 remote); the memory model reads d / 10 as a latency ratio.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distance: Vec<Vec<u32>>,
    /// The interconnect between nodes (`[[host.links]]`, e.g. HyperTransport
    /// or QPI): remote memory traffic uses the links on its route. Empty:
    /// the preset's, else unlimited (no link is modelled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Bandwidth of each socket's front-side bus (MB/s), which every memory
    /// access of the socket's cores crosses (0: the preset's, else none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bus_mb_s: u64,
    /// Whether the CPUs have hardware-assisted paging (AMD NPT, Intel EPT):
    /// VMs then pay the two-dimensional page walk on TLB misses. Not given:
    /// the preset's, else false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hap: Option<bool>,
    /// Idle latency of a local memory access, ns (0: the preset's, else
    /// unknown): the memory model's `memory.queueing` needs it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_ns: u64,
    /// Physical machines the cores are split into, contiguously and evenly
    /// (0 or 1: one machine, as before). Each has its own sockets and NUMA
    /// nodes (a preset describes one machine and is repeated); ranks on
    /// different machines talk over the network `nic` describes.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub machines: usize,
    /// Each machine's physical NIC and the wire between them (only with
    /// `machines` > 1; absent: gigabit Ethernet, see [`MachineNic`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<MachineNic>,
    /// A host profile (`vhpc calibrate`) and the MPI whose costs to take from
    /// it: vhpc replaces them with the profile's parameters before the run,
    /// so the native core only names them in an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<String>,
}

/// One NUMA node of the host (`[[host.nodes]]`); 0 or empty = the default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumaNode {
    /// Its cores (default: a contiguous, even split of the host's cores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<usize>,
    /// Its memory, MiB (default [`crate::host::DEFAULT_NODE_MEM_MIB`]).
    #[serde(default)]
    pub mem_mib: u64,
    /// Its memory bandwidth, MB/s (default [`crate::host::DEFAULT_NODE_BANDWIDTH_MB_S`]).
    #[serde(default)]
    pub bandwidth_mb_s: u64,
    /// What one of its cores streams from memory alone, MB/s (0: the
    /// preset's, else the core's fair share of `bandwidth_mb_s`). See
    /// docs/sim.md, "NUMA memory".
    #[serde(default, skip_serializing_if = "is_zero")]
    pub core_mb_s: u64,
}

/// One interconnect link (`[[host.links]]`): full duplex, `bandwidth_mb_s`
/// in each direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The two nodes it joins.
    pub nodes: [usize; 2],
    /// Bandwidth per direction, MB/s.
    pub bandwidth_mb_s: u64,
}

/// The memory model (`[memory]`); absent = off (compute costs what the
/// workload says, as before the model existed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// `preallocate` (Xen-like: the hypervisor places all guest memory at
    /// launch) or `first_touch` (KVM-like: at the host page fault, on the
    /// node of the faulting vCPU's core). See docs/sim.md, "NUMA memory".
    #[serde(default = "default_placement")]
    pub placement: String,
    /// `first_touch` in a warm domain: parts per million of a new
    /// application's memory that reach the host as fresh page faults; the
    /// rest reuses guest pages the previous application left, whose host
    /// node stays where that application's faults put it. S3: about 70 %
    /// of faults are handled in the guest, hence 300000.
    #[serde(default = "default_host_fault_share_ppm")]
    pub host_fault_share_ppm: u32,
    /// Whether remote traffic is limited by `host.links` and every access by
    /// its socket's `host.bus_mb_s` (false: only node bandwidth and distance,
    /// the model before links existed).
    #[serde(default = "yes")]
    pub interconnect: bool,
    /// Extra memory-stall time of a VM's memory-aware phase on a host with
    /// hardware-assisted paging (`host.hap`), ppm of the stalls: TLB misses
    /// walk two dimensions. 0 = off. Default: see
    /// [`crate::memory::DEFAULT_NESTED_PAGING_PPM`].
    #[serde(default = "default_nested_paging_ppm")]
    pub nested_paging_ppm: u32,
    /// Whether accesses wait in queues at busy memory controllers and
    /// links (loaded latency, [`crate::memory::queue`]; needs
    /// `host.latency_ns`). Default false: the model before queueing.
    #[serde(default)]
    pub queueing: bool,
}

impl Default for Memory {
    fn default() -> Self {
        toml::from_str("").expect("all memory fields have defaults")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hypervisor {
    /// A name from `vhpc sim schedulers`.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    #[serde(default = "default_tslice_us")]
    pub tslice_us: u64,
    #[serde(default = "default_tick_us")]
    pub tick_us: u64,
    #[serde(default = "three")]
    pub ticks_per_acct: u32,
    #[serde(default)]
    pub ratelimit_us: u64,
    #[serde(default = "yes")]
    pub boost: bool,
    /// Credit: Xen 3.4's `_csched_cpu_pick` at every tick, which moves a
    /// running vCPU to the socket with more idle cores. It moves nothing on
    /// one socket (no SMT is modelled) or without idle cores. Off by
    /// default: on multi-socket hosts with idle cores it changes what
    /// earlier scenarios print (`vhpc plan`'s rankings), which were
    /// validated without it; `vhpc reproduce s1` turns it on.
    #[serde(default, skip_serializing_if = "is_false")]
    pub credit_cpu_pick: bool,
    #[serde(default = "default_extra_quantum_us")]
    pub extra_quantum_us: u64,
    /// Cost of switching a core from one vCPU to another (save/restore,
    /// cache refill), paid by the incoming vCPU before it does any work.
    #[serde(default = "default_vcpu_switch_ns")]
    pub vcpu_switch_ns: u64,
    /// Settings of the `slicer` scheduler (its slice is `tslice_us`).
    #[serde(default)]
    pub slicer: Slicer,
    /// Settings of the `linux` scheduler.
    #[serde(default)]
    pub linux: Linux,
    /// Settings of the `gang` scheduler (its turn is `tslice_us`).
    #[serde(default)]
    pub gang: Gang,
    /// The hypervisor's own timer interrupt on every core: each costs the
    /// vCPU running there (none on an idle core). Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_tick: Option<Tick>,
}

/// Gang scheduling (`scheduler = "gang"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gang {
    /// 0: strict co-scheduling. Otherwise relaxed: a vCPU may run at most
    /// this far ahead of a sibling that waits for a core, and idle cores
    /// take other domains' vCPUs under that bound.
    #[serde(default)]
    pub skew_us: u64,
    /// Turns in proportion to domain weights instead of in turn.
    #[serde(default)]
    pub by_weight: bool,
}

impl Default for Gang {
    fn default() -> Self {
        toml::from_str("").expect("all gang fields have defaults")
    }
}

/// Linux's fair scheduler as the host (`scheduler = "linux"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linux {
    /// EEVDF's base slice (`sched_base_slice`; 3 ms by default).
    #[serde(default = "default_linux_slice_us")]
    pub slice_us: u64,
    /// The scheduler tick, 1 / HZ (Debian: HZ = 250, 4 ms): slices end on ticks.
    #[serde(default = "default_linux_tick_us")]
    pub tick_us: u64,
    /// How far behind the running task a waking one must be to preempt it.
    #[serde(default = "default_linux_wakeup_granularity_us")]
    pub wakeup_granularity_us: u64,
    /// CFS bandwidth period; a domain's `cap` is its quota per period.
    #[serde(default = "default_linux_period_us")]
    pub period_us: u64,
}

impl Default for Linux {
    fn default() -> Self {
        toml::from_str("").expect("all linux fields have defaults")
    }
}

/// The lab's freezer time slicer (`scheduler = "slicer"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slicer {
    /// How often the controller looks at the running domain.
    #[serde(default = "default_slicer_poll_us")]
    pub poll_us: u64,
    /// Every core idles this long when one domain is frozen and the next thawed.
    #[serde(default = "default_slicer_switch_us")]
    pub switch_us: u64,
    /// Leave a domain early (at the next poll) when none of its vCPUs wants a CPU.
    #[serde(default = "yes")]
    pub work_conserving: bool,
    /// Slices in proportion to domain weights instead of in turn.
    #[serde(default)]
    pub by_weight: bool,
    /// Turns between vCPUs of the running domain that share a core.
    #[serde(default = "default_slicer_inner_slice_us")]
    pub inner_slice_us: u64,
    /// `gang` (a domain on all its cores at once) or `vcpu` (each vCPU pinned
    /// to one core, each core sliced on its own, as the lab's per-vCPU mode).
    #[serde(default = "default_slicing")]
    pub slicing: String,
    /// The native slicer: per-CPU watchers notice an idle domain once its
    /// CPUs have idled `look_us` in all, and a slice ends on time; without
    /// them (the old Python controller) both wait for a poll.
    #[serde(default)]
    pub watchers: bool,
    #[serde(default = "default_slicer_look_us")]
    pub look_us: u64,
    /// Cores idle while an idle domain is frozen and the next thawed
    /// (absent: `switch_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_switch_us: Option<u64>,
    /// With watchers: a domain none of whose vCPUs ran since its thaw is kept
    /// this long, doubling while that goes on up to `idle_round_max_us`.
    #[serde(default = "default_slicer_idle_round_us")]
    pub idle_round_us: u64,
    #[serde(default = "default_slicer_idle_round_max_us")]
    pub idle_round_max_us: u64,
}

impl Default for Slicer {
    fn default() -> Self {
        toml::from_str("").expect("all slicer fields have defaults")
    }
}

impl Default for Hypervisor {
    fn default() -> Self {
        toml::from_str("").expect("all hypervisor fields have defaults")
    }
}

/// The guest kernel's scheduler, for ranks sharing a vCPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guest {
    /// Time slice between runnable tasks on one vCPU.
    #[serde(default = "default_guest_slice_us")]
    pub slice_us: u64,
    /// Cost of a process context switch inside the guest.
    #[serde(default = "default_guest_switch_ns")]
    pub switch_ns: u64,
    /// Which tasks run where: `fixed` (placed once, never move) or `linux`
    /// (scheduling domains, wake-up placement, load balancing).
    #[serde(default = "guest::default_scheduler")]
    pub scheduler: String,
    /// `linux`: `hierarchical` (levels from `topology`) or `flat` (one
    /// level over all vCPUs, S1's patch).
    #[serde(default = "guest::default_domains")]
    pub domains: String,
    /// `linux`: the topology the guest believes.
    #[serde(default)]
    pub topology: guest::GuestTopology,
    /// `linux`: the scheduler tick that drives periodic balancing (HZ=250).
    #[serde(default = "guest::default_tick_us")]
    pub tick_us: u64,
    /// `linux`: `sysctl_sched_migration_cost` (a task that ran within it is
    /// cache-hot; newly-idle balancing needs longer idle periods).
    #[serde(default = "guest::default_migration_cost_us")]
    pub migration_cost_us: u64,
    /// Extra latency of a wake-up onto a halted vCPU (IPI, hypervisor wake,
    /// exit from halt), charged to the woken task; 0: none (the old model).
    #[serde(default)]
    pub wake_halted_ns: u64,
    /// Cache refill a task pays when it resumes on another physical core
    /// than it last ran on; 0: none (the old model).
    #[serde(default)]
    pub refill_ns: u64,
}

impl Default for Guest {
    fn default() -> Self {
        toml::from_str("").expect("all guest fields have defaults")
    }
}

/// How MPI moves messages and waits for them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mpi {
    /// Messages up to this size are sent eagerly; larger ones use a
    /// rendezvous handshake (request, clear-to-send, data).
    #[serde(default = "default_eager_limit")]
    pub eager_limit: u64,
    /// Eager messages up to this size complete their send once the data are
    /// copied out (a local completion); a larger eager message's send
    /// completes only when the receiver has matched and copied it and the
    /// sender has seen the receiver's answer (Open MPI's ob1 over vader above
    /// 256 B: the fragment must come back). At most `eager_limit`; absent:
    /// `eager_limit` (every eager send is local, MPICH2 nemesis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_send_limit: Option<u64>,
    /// Cost of one poll of the progress engine.
    #[serde(default = "default_poll_ns")]
    pub poll_ns: u64,
    /// Polls before `busy_poll` calls `sched_yield` (MPICH2 nemesis: 1000)
    /// and before `hv_yield` gives up the vCPU.
    #[serde(default = "default_polls")]
    pub polls_before_yield: u64,
    /// `adaptive`: yields that switched nothing before it starts sleeping.
    #[serde(default = "default_futile_yields")]
    pub adaptive_futile_yields: u32,
    /// `adaptive`: yields in a row that handed the CPU to someone else while
    /// nothing arrived before it starts sleeping (libvhpc_wait's YIELD_IDLE:
    /// what runs instead does not move this wait).
    #[serde(default = "default_idle_yields")]
    pub adaptive_idle_yields: u32,
    /// `adaptive`: first and longest sleep of its backoff.
    #[serde(default = "default_sleep_min_us")]
    pub adaptive_sleep_min_us: u64,
    #[serde(default = "default_sleep_max_us")]
    pub adaptive_sleep_max_us: u64,
    /// `adaptive`: what a sleep costs beyond its backoff value (a nanosleep's
    /// timer and wake-up), as CPU time of the rank when it wakes.
    #[serde(default)]
    pub adaptive_sleep_extra_ns: u64,
    /// `adaptive`: the short spin budget of libvhpc_wait's timeshared mode,
    /// taken while fewer than half of a rank's last 32 waits ended within
    /// the full one (`poll_ns × polls_before_yield`). Absent: it always
    /// spins the full budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_spin_min_us: Option<u64>,
    /// How ranks in different domains talk: `dom0` (through the guests'
    /// network stacks and dom0's relay, the `inter_vm` channel) or `shm` (a
    /// shared-memory channel between the domains, the `shm` channel: the
    /// lab's cgroup domains, an ivshmem-like device).
    #[serde(default = "default_between_domains")]
    pub between_domains: String,
    #[serde(default = "Channel::shm")]
    pub shm: Channel,
    #[serde(default = "Channel::native")]
    pub native: Channel,
    #[serde(default = "Channel::inter_vm")]
    pub inter_vm: Channel,
    /// Transports in priority order, as Open MPI selects its BTLs: a rank
    /// pair uses the first listed one that reaches it. `sm` reaches ranks of
    /// the same domain, `ivshmem` ranks in another domain of the same
    /// `domains.ivshmem` group, `net` ranks in any other domain (through each
    /// side's `domains.nic`). Absent: `between_domains` decides, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transports: Option<Vec<String>>,
    /// `nic = "bridge"`: the host kernel's bridge and veth pairs.
    #[serde(default = "Channel::bridge")]
    pub bridge: Channel,
    /// `nic = "emulated"`: a fully emulated NIC (QEMU's e1000).
    #[serde(default = "Channel::emulated")]
    pub emulated: Channel,
    /// `nic = "virtio"`: virtio-net served by a vhost thread.
    #[serde(default = "Channel::virtio")]
    pub virtio: Channel,
    /// The `ivshmem` transport: shared memory between VMs.
    #[serde(default = "Channel::ivshmem")]
    pub ivshmem: Channel,
    /// The host kernel's TCP between native domains on different machines
    /// (`host.machines`), before and after the wire.
    #[serde(default = "Channel::tcp")]
    pub tcp: Channel,
}

/// Transport names of `mpi.transports`.
pub const TRANSPORTS: [&str; 3] = ["sm", "ivshmem", "net"];

/// NIC kinds of `domains.nic` (see docs/sim.md, "Channels between domains").
pub const NICS: [&str; 4] = ["netfront", "bridge", "emulated", "virtio"];

impl Default for Mpi {
    fn default() -> Self {
        toml::from_str("").expect("all mpi fields have defaults")
    }
}

/// A communication path's costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    /// Time from send to visibility at the receiver, excluding CPU costs.
    pub latency_ns: u64,
    /// CPU the sender spends per message and per KiB (copy in).
    pub send_ns: u64,
    pub send_ns_per_kib: u64,
    /// CPU the receiver spends per message and per KiB (copy out).
    pub recv_ns: u64,
    pub recv_ns_per_kib: u64,
    /// CPU dom0 spends relaying, per message and per KiB (inter-VM only).
    #[serde(default)]
    pub relay_ns: u64,
    #[serde(default)]
    pub relay_ns_per_kib: u64,
    /// Rendezvous data moves in chunks of this size ...
    #[serde(default = "default_chunk_bytes")]
    pub chunk_bytes: u64,
    /// ... at most this many unacknowledged (copy cells, TCP window).
    #[serde(default = "default_window")]
    pub window: u32,
    /// One copy buffer per rank pair, used by one rendezvous transfer at a
    /// time (MPICH2 nemesis LMT): transfers in opposite directions take
    /// turns instead of streaming at once.
    #[serde(default)]
    pub shared_copy_buffer: bool,
    /// Per-KiB costs of rendezvous data (its chunks) where they differ from
    /// the eager copies': today's MPIs move large messages with one copy
    /// (CMA, xpmem: the receiver reads the sender's buffer) or as a socket
    /// stream, at a rate of their own. Absent: the eager rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rndv_send_ns_per_kib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rndv_recv_ns_per_kib: Option<u64>,
    /// CPU the receiver spends setting up one rendezvous transfer beyond its
    /// handshake's messages (attaching the sender's buffer, a system call).
    #[serde(default)]
    pub rndv_ns: u64,
    /// Rendezvous by the receiver reading the sender's buffer (single copy:
    /// CMA, xpmem): on the request to send it copies the whole message itself
    /// (`rndv_ns`, then the rendezvous per-KiB rate) and answers with one
    /// packet that completes the send; no clear-to-send, no chunks, so the
    /// sender need not run meanwhile. Default false: the sender streams
    /// chunks after a clear-to-send.
    #[serde(default, skip_serializing_if = "is_false")]
    pub rndv_pull: bool,
    /// CPU the sender spends after an eager message has left, before its next
    /// step (a TCP stack finishing the send and taking the peer's
    /// acknowledgement): hidden in a ping-pong while the reply travels, paid
    /// when both sides send at once.
    #[serde(default)]
    pub post_send_ns: u64,
    /// Device-thread NICs (`emulated`, `virtio`): the sender's side of the
    /// device (its `relay_*` work) runs in the sending vCPU at the moment it
    /// transmits, not in the VM's device thread, which then does only the
    /// receive side. QEMU's e1000 does this: a write to the transmit tail
    /// register (TDT) exits to QEMU in the vCPU's thread, which walks the
    /// descriptors, segments (TSO) and writes each frame to the tap there
    /// (hw/e1000.c: `[TDT] = set_tctl` → `start_xmit`). Default false: the
    /// device thread does both sides, as before.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tx_on_sender: bool,
    /// Device-thread NICs (`emulated`, `virtio`): the guest's receive path
    /// below the socket (the NIC's interrupt, the NAPI poll, IP and TCP
    /// receive processing) per packet and per KiB, run on the VM's interrupt
    /// vCPU (`domains.rx_irq_vcpu`) for every packet the VM receives over
    /// `net`, before the receiving rank sees it. A 2010 guest NIC (e1000,
    /// virtio-net before multiqueue, Linux 3.8) had one receive queue and one
    /// interrupt, so one vCPU did this for all the VM's ranks. Both 0 (the
    /// default): off, the rank's `recv_*` is the whole receive side, as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_irq_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rx_irq_ns_per_kib: u64,
}

/// No costs, the serde defaults of `chunk_bytes` and `window`, and none of the
/// optional mechanisms (rendezvous rates, post-send work, transmit in the vCPU,
/// receive interrupts): the base of the tables below.
impl Default for Channel {
    fn default() -> Self {
        Channel {
            latency_ns: 0,
            send_ns: 0,
            send_ns_per_kib: 0,
            recv_ns: 0,
            recv_ns_per_kib: 0,
            relay_ns: 0,
            relay_ns_per_kib: 0,
            chunk_bytes: default_chunk_bytes(),
            window: default_window(),
            shared_copy_buffer: false,
            rndv_send_ns_per_kib: None,
            rndv_recv_ns_per_kib: None,
            rndv_ns: 0,
            rndv_pull: false,
            post_send_ns: 0,
            tx_on_sender: false,
            rx_irq_ns: 0,
            rx_irq_ns_per_kib: 0,
        }
    }
}

impl Channel {
    /// CPU to send or receive one rendezvous chunk of `bytes`.
    pub fn chunk_send_ns(&self, bytes: u64) -> u64 {
        self.send_ns + self.rndv_send_ns_per_kib.unwrap_or(self.send_ns_per_kib) * bytes / 1024
    }

    pub fn chunk_recv_ns(&self, bytes: u64) -> u64 {
        self.recv_ns + self.rndv_recv_ns_per_kib.unwrap_or(self.recv_ns_per_kib) * bytes / 1024
    }

    /// CPU time of one pass of a `bytes`-byte packet through a device
    /// thread (or dom0's relay).
    pub fn relay_cost(&self, bytes: u64) -> u64 {
        self.relay_ns + self.relay_ns_per_kib * bytes / 1024
    }

    /// CPU time of a `bytes`-byte packet's receive path on the VM's
    /// interrupt vCPU (`rx_irq_*`).
    pub fn rx_irq_cost(&self, bytes: u64) -> u64 {
        self.rx_irq_ns + self.rx_irq_ns_per_kib * bytes / 1024
    }

    /// Whether the receive path runs on the VM's interrupt vCPU.
    pub fn has_rx_irq(&self) -> bool {
        self.rx_irq_ns > 0 || self.rx_irq_ns_per_kib > 0
    }

    /// Shared memory inside one guest: two copies through a shared buffer
    /// (about 2 GB/s per copy on a 2007 Core 2). Large messages go through
    /// MPICH2 nemesis' LMT copy buffer: 8 cells of 32 KiB.
    fn shm() -> Self {
        Channel {
            latency_ns: 300,
            send_ns: 300,
            send_ns_per_kib: 500,
            recv_ns: 300,
            recv_ns_per_kib: 500,
            relay_ns: 0,
            relay_ns_per_kib: 0,
            chunk_bytes: 32 * 1024,
            window: 8,
            shared_copy_buffer: true,
            ..Channel::default()
        }
    }

    /// Shared memory on a native kernel: as `shm`.
    fn native() -> Self {
        Self::shm()
    }

    /// Through the guests' network stacks and dom0's bridge (netfront,
    /// netback): TCP costs on both guests and relay work in dom0.
    fn inter_vm() -> Self {
        Channel {
            latency_ns: 5_000,
            send_ns: 8_000,
            send_ns_per_kib: 2_000,
            recv_ns: 8_000,
            recv_ns_per_kib: 2_000,
            relay_ns: 10_000,
            relay_ns_per_kib: 3_000,
            chunk_bytes: 64 * 1024,
            window: 4,
            ..Channel::default()
        }
    }
}

/// Default costs of the NIC and ivshmem channels. They are order-of-magnitude
/// figures for the S3 machines' era (2008-2010 Xeon/Opteron/Nehalem, like
/// `inter_vm`'s), from published measurements where the comment names one
/// and labelled assumptions otherwise; `vhpc calibrate`/the lab measure a
/// real host's. `relay_ns` is one pass through a per-VM device thread.
impl Channel {
    /// Network namespaces joined by the host kernel's bridge and veth pairs:
    /// TCP on both ends, no back end. Assumption: a TCP send or receive
    /// system call and its stack costs ~4 µs per message and ~0.3 µs/KiB
    /// (one copy at ~3 GB/s), ~2 µs from sender to receiver (softirq and
    /// wake-up): netperf TCP_RR over veth gives round trips of ~15-30 µs.
    fn bridge() -> Self {
        Channel {
            latency_ns: 2_000,
            send_ns: 4_000,
            send_ns_per_kib: 300,
            recv_ns: 4_000,
            recv_ns_per_kib: 300,
            relay_ns: 0,
            relay_ns_per_kib: 0,
            chunk_bytes: 64 * 1024,
            window: 4,
            ..Channel::default()
        }
    }

    /// A fully emulated NIC (QEMU e1000): the guest's TCP stack plus a VM
    /// exit per register access (charged to the guest), and each packet
    /// handled by the VM's device-model thread on the host: tens of µs per
    /// packet (Menon et al., VEE 2005, and Russell's virtio paper, 2008,
    /// show emulated NICs an order of magnitude costlier per packet than
    /// paravirtual ones) and ~10 µs/KiB (~1500 B frames at tens of µs each:
    /// emulated e1000 moves ~100 MB/s). Assumption within that range.
    fn emulated() -> Self {
        Channel {
            latency_ns: 2_000,
            send_ns: 10_000,
            send_ns_per_kib: 1_000,
            recv_ns: 10_000,
            recv_ns_per_kib: 1_000,
            relay_ns: 25_000,
            relay_ns_per_kib: 10_000,
            chunk_bytes: 64 * 1024,
            window: 4,
            ..Channel::default()
        }
    }

    /// virtio-net with a vhost back end: the guest's TCP stack and a
    /// notification (kick) per batch, and the VM's vhost thread doing a few
    /// µs per packet and a copy (~3 GB/s): vhost-net reaches several Gb/s
    /// per VM. Assumption within the published range.
    fn virtio() -> Self {
        Channel {
            latency_ns: 1_000,
            send_ns: 5_000,
            send_ns_per_kib: 300,
            recv_ns: 5_000,
            recv_ns_per_kib: 300,
            relay_ns: 3_000,
            relay_ns_per_kib: 300,
            chunk_bytes: 64 * 1024,
            window: 4,
            ..Channel::default()
        }
    }

    /// Shared memory between VMs (ivshmem): `shm`'s copies plus a doorbell
    /// per message, an MMIO write that exits to the hypervisor and signals
    /// the peer (~1.5 µs: a VM exit round trip is ~1 µs on Nehalem-era
    /// VT-x; assumption).
    fn ivshmem() -> Self {
        Channel {
            send_ns: 300 + 1_500,
            ..Self::shm()
        }
    }

    /// The host kernel's TCP over a physical NIC, between native domains on
    /// different machines (the wire's own time is `host.nic`'s). Assumption,
    /// as `bridge`'s stack costs: a send or receive system call and the
    /// stack ~5 µs per message (a little above the veth path: the NIC
    /// driver's descriptor and interrupt work), ~1 µs/KiB per side (one
    /// copy plus per-segment protocol and driver work; segmentation and
    /// checksums offloaded, as gigabit NICs of 2008-2010 did); ~5 µs of
    /// interrupt, softirq and wake-up after the wire. With the wire's 20 µs,
    /// a small message takes ~35 µs one way, within the ~30-60 µs commonly
    /// reported for MPI over TCP on gigabit Ethernet of that era.
    fn tcp() -> Self {
        Channel {
            latency_ns: 5_000,
            send_ns: 5_000,
            send_ns_per_kib: 1_000,
            recv_ns: 5_000,
            recv_ns_per_kib: 1_000,
            relay_ns: 0,
            relay_ns_per_kib: 0,
            chunk_bytes: 64 * 1024,
            window: 4,
            ..Channel::default()
        }
    }
}

/// A virtual machine (or, with one domain and no hypervisor, a native OS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    pub name: String,
    #[serde(default = "one_usize")]
    pub vcpus: usize,
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Percent of one core; 0 = uncapped.
    #[serde(default)]
    pub cap: u32,
    /// Core pinning: one list of cores per vCPU, or a single list for all.
    /// Empty = any core.
    #[serde(default)]
    pub pin: Vec<Vec<usize>>,
    /// Whether this is dom0, the domain that relays inter-VM traffic.
    #[serde(default)]
    pub dom0: bool,
    /// A native OS rather than a VM: no vCPU switch cost, and its ranks talk
    /// through the `native` channel (S0's `native_up` reference).
    #[serde(default)]
    pub native: bool,
    #[serde(default)]
    pub sedf: Sedf,
    /// Kernel housekeeping on each vCPU (timers, daemons): it wakes after
    /// exponentially distributed intervals and does a little work.
    #[serde(default)]
    pub background: Option<Background>,
    /// The guest kernel's timer interrupt on each of its vCPUs (tickless
    /// idle: none on a halted vCPU). Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<Tick>,
    /// A hint-driven control policy (`vhpc_sim::engine::hints`) reading the
    /// phases its ranks publish. Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<String>,
    /// How its ranks reach other domains over `net`: `netfront` (dom0's
    /// relay, `mpi.inter_vm`), `bridge` (host bridge and veth, `mpi.bridge`),
    /// `emulated` or `virtio` (a device thread per VM on dom0's vCPUs,
    /// `mpi.emulated` / `mpi.virtio`).
    #[serde(default = "default_nic")]
    pub nic: String,
    /// Domains naming the same group share an ivshmem device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ivshmem: Option<String>,
    /// Guest memory, MiB (memory model; 0 = its ranks' footprint plus
    /// [`crate::memory::GUEST_OS_MIB`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mem_mib: u64,
    /// The guest sees the host's NUMA layout (vNUMA) and places its pages
    /// NUMA-aware, on the node of the vCPU that touches them.
    #[serde(default, skip_serializing_if = "is_false")]
    pub vnuma: bool,
    /// An earlier application already ran in this domain: with
    /// `first_touch`, pages the guest reuses keep the host node that
    /// application's faults gave them.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warm: bool,
    /// The vCPU its NIC's receive interrupt is routed to (the IRQ's
    /// `smp_affinity`): where its NIC table's `rx_irq_*` work runs.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub rx_irq_vcpu: usize,
}

impl Domain {
    /// Whether its NIC is served by a per-VM device thread on dom0.
    pub fn has_device_thread(&self) -> bool {
        matches!(self.nic.as_str(), "emulated" | "virtio")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Background {
    /// Mean time between wake-ups.
    pub interval_us: u64,
    /// CPU work per wake-up.
    pub work_us: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sedf {
    #[serde(default = "default_sedf_period_us")]
    pub period_us: u64,
    #[serde(default)]
    pub slice_us: u64,
    #[serde(default = "yes")]
    pub extratime: bool,
}

impl Default for Sedf {
    fn default() -> Self {
        toml::from_str("").expect("all sedf fields have defaults")
    }
}

/// One parallel program: its workload, where its ranks run, how it waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub name: String,
    /// A name from [`crate::workload::WORKLOADS`].
    pub workload: String,
    /// Domain of each rank, by name; the number of entries is the number of
    /// ranks. Inside a domain, ranks go to its vCPUs round robin.
    pub ranks: Vec<String>,
    /// `busy_poll`, `spin`, `hv_yield`, `block` or `adaptive`.
    #[serde(default = "default_wait_policy")]
    pub wait_policy: String,
    /// Workload parameters (see each workload's documentation).
    #[serde(default)]
    pub params: toml::Table,
    /// Relaunch the job whenever it ends while another job's first run is
    /// still going (the lab's co-running jobs overlap fully this way); its
    /// completion is its first run's. Later runs are load, not measured.
    #[serde(default)]
    pub refill: bool,
    /// When the job's ranks start, in µs of simulated time (default 0); its
    /// completion is counted from then. The lab's jobs start at an arbitrary
    /// moment of a slicer's round: several starts average that out.
    #[serde(default)]
    pub start_us: u64,
    /// When its completion clock starts: at `start_us` (`start`, the default)
    /// or once every rank has run and done its `untimed_us` (`all_ranks_ran`).
    #[serde(default)]
    pub timed_from: TimedFrom,
    /// With `timed_from = "all_ranks_ran"`: work each rank does before its
    /// program, outside the clock (a program's set-up), µs.
    #[serde(default)]
    pub untimed_us: u64,
    /// Concurrency throttling per parallel loop of an OpenMP-style job
    /// (`vhpc_sim::engine::throttle`): a policy name. Absent: every loop
    /// runs on the whole team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<String>,
}

/// When a job's completion clock starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimedFrom {
    /// At the job's `start_us`.
    #[default]
    Start,
    /// Once every rank has run: a program that starts its timer after
    /// MPI_Init and a barrier (NPB, the lab's kernels) never counts its wait
    /// for a first slice.
    AllRanksRan,
}

/// Most domains, jobs, vCPUs (over all domains) and ranks (over all jobs) a
/// scenario may have: past these, a scenario is a mistake or an attack, not
/// an experiment. What fits below them is for the memory estimate
/// ([`crate::footprint::estimate`]) to judge.
pub const MAX_DOMAINS: usize = 65_536;
pub const MAX_JOBS: usize = 65_536;
pub const MAX_VCPUS: usize = 1 << 20;
pub const MAX_RANKS: usize = 1 << 20;

impl Scenario {
    /// Parses and validates a scenario; `origin` (usually the file path) is
    /// named in every error.
    pub fn from_toml(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario =
            toml::from_str(text).map_err(|e| parse_error(origin, text, &e))?;
        scenario.resolve_host(origin)?;
        scenario.validate(origin)?;
        Ok(scenario)
    }

    /// The checks serde cannot express: ranges and cross-references.
    pub fn validate(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.to_string(),
            field,
            message,
        };
        let h = &self.host;
        if h.cores == 0 || h.cores > 4096 {
            return Err(err(
                "host.cores".into(),
                format!(
                    "must be between 1 and 4096, got {} (give it, or a host.preset)",
                    h.cores
                ),
            ));
        }
        machines::check_count(h).map_err(|(f, msg)| err(f, msg))?;
        if let Some(name) = &h.profile {
            return Err(err(
                "host.profile".into(),
                format!(
                    "names the host profile {name:?}, which vhpc resolves before a run \
                     (`vhpc sim run`, vhpc.sim.run_file); the native core reads no profiles"
                ),
            ));
        }
        if h.mpi.is_some() {
            return Err(err(
                "host.mpi".into(),
                "only means something beside host.profile".into(),
            ));
        }
        if h.sockets == 0 || h.cores % h.sockets != 0 {
            return Err(err(
                "host.sockets".into(),
                format!("must divide host.cores ({}), got {}", h.cores, h.sockets),
            ));
        }
        if h.numa_nodes == 0 || h.cores % h.numa_nodes != 0 {
            return Err(err(
                "host.numa_nodes".into(),
                format!("must divide host.cores ({}), got {}", h.cores, h.numa_nodes),
            ));
        }
        self.validate_topology(origin)?;
        if self.limit_ms == 0 || self.limit_ms > 1_000_000_000 {
            return Err(err(
                "limit_ms".into(),
                format!("must be between 1 and 1e9, got {}", self.limit_ms),
            ));
        }
        self.validate_hypervisor(origin)?;
        self.validate_guest(origin)?;
        self.validate_mpi(origin)?;
        self.validate_domains(origin)?;
        self.validate_jobs(origin)?;
        self.validate_machines(origin)?;
        tick::check(self).map_err(|(field, message)| err(field, message))?;
        crate::memory::check(self).map_err(|(field, message)| err(field, message))
    }

    /// Applies `host.preset` (fields given beside it must agree) and the
    /// defaults of `sockets` and `numa_nodes`.
    pub fn resolve_host(&mut self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.to_string(),
            field,
            message,
        };
        let h = &mut self.host;
        if h.machines > machines::MAX_MACHINES {
            return Err(err(
                "host.machines".into(),
                format!(
                    "must be between 1 and {}, got {}",
                    machines::MAX_MACHINES,
                    h.machines
                ),
            ));
        }
        let Some(name) = h.preset.clone() else {
            // Not given: one socket and one node per machine.
            if h.sockets == 0 {
                h.sockets = h.machine_count();
            }
            if h.numa_nodes == 0 {
                h.numa_nodes = if h.nodes.is_empty() {
                    h.machine_count()
                } else {
                    h.nodes.len()
                };
            }
            return Ok(());
        };
        let Some(p) = crate::host::presets::by_name(&name) else {
            let names: Vec<_> = crate::host::presets::PRESETS
                .iter()
                .map(|p| p.name)
                .collect();
            return Err(err(
                "host.preset".into(),
                format!("unknown host {name:?}; known: {}", names.join(", ")),
            ));
        };
        // A preset describes one machine; several are copies of it.
        let m = h.machine_count();
        let (p_cores, p_nodes) = (m * p.cores, m * p.numa_nodes);
        for (field, given, value) in [
            ("cores", &mut h.cores, p_cores),
            ("sockets", &mut h.sockets, m * p.sockets),
            ("numa_nodes", &mut h.numa_nodes, p_nodes),
        ] {
            if *given != 0 && *given != value {
                return Err(err(
                    format!("host.{field}"),
                    format!("is {given}, but host.preset = {name:?} has {value}"),
                ));
            }
            *given = value;
        }
        if h.nodes.len() > p_nodes {
            return Err(err(
                "host.nodes".into(),
                format!(
                    "has {} entries, but host.preset = {name:?} has {p_nodes} NUMA nodes",
                    h.nodes.len(),
                ),
            ));
        }
        h.nodes.resize(
            p_nodes,
            NumaNode {
                cores: Vec::new(),
                mem_mib: 0,
                bandwidth_mb_s: 0,
                core_mb_s: 0,
            },
        );
        for (i, node) in h.nodes.iter_mut().enumerate() {
            let cores = crate::host::default_cores(p_cores, p_nodes, i);
            for (field, agrees) in [
                ("cores", node.cores.is_empty() || node.cores == cores),
                (
                    "mem_mib",
                    node.mem_mib == 0 || node.mem_mib == p.node_mem_mib,
                ),
                (
                    "bandwidth_mb_s",
                    node.bandwidth_mb_s == 0 || node.bandwidth_mb_s == p.node_bandwidth_mb_s,
                ),
                (
                    "core_mb_s",
                    node.core_mb_s == 0 || node.core_mb_s == p.core_mb_s,
                ),
            ] {
                if !agrees {
                    return Err(err(
                        format!("host.nodes[{i}].{field}"),
                        format!("contradicts host.preset = {name:?} (`vhpc sim hosts`)"),
                    ));
                }
            }
            node.cores = cores;
            node.mem_mib = p.node_mem_mib;
            node.bandwidth_mb_s = p.node_bandwidth_mb_s;
            node.core_mb_s = p.core_mb_s;
        }
        let distance = machines::repeat_distance(p.distance, m);
        if !h.distance.is_empty() && h.distance != distance {
            return Err(err(
                "host.distance".into(),
                format!("contradicts host.preset = {name:?}, whose distances are {distance:?}"),
            ));
        }
        h.distance = distance;
        let links: Vec<Link> = (0..m)
            .flat_map(|k| {
                p.links.iter().map(move |&(a, b)| Link {
                    nodes: [a + k * p.numa_nodes, b + k * p.numa_nodes],
                    bandwidth_mb_s: p.link_mb_s,
                })
            })
            .collect();
        if !h.links.is_empty() && h.links != links {
            return Err(err(
                "host.links".into(),
                format!("contradicts host.preset = {name:?} (`vhpc sim hosts`)"),
            ));
        }
        h.links = links;
        for (field, given, value) in [
            ("bus_mb_s", &mut h.bus_mb_s, p.bus_mb_s),
            ("latency_ns", &mut h.latency_ns, p.latency_ns),
        ] {
            if *given != 0 && *given != value {
                return Err(err(
                    format!("host.{field}"),
                    format!("is {given}, but host.preset = {name:?} has {value}"),
                ));
            }
            *given = value;
        }
        if h.hap.is_some_and(|hap| hap != p.hap) {
            return Err(err(
                "host.hap".into(),
                format!(
                    "contradicts host.preset = {name:?}, whose CPUs {} hardware-assisted paging",
                    if p.hap { "have" } else { "lack" }
                ),
            ));
        }
        h.hap = Some(p.hap);
        Ok(())
    }

    /// NUMA nodes and distances: sizes, ranges, every core in one node.
    fn validate_topology(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.to_string(),
            field,
            message,
        };
        let h = &self.host;
        let n = h.numa_nodes;
        if !h.nodes.is_empty() && h.nodes.len() != n {
            return Err(err(
                "host.nodes".into(),
                format!(
                    "has {} entries, but host.numa_nodes = {n}: give one per node",
                    h.nodes.len()
                ),
            ));
        }
        let given: Vec<bool> = h.nodes.iter().map(|node| !node.cores.is_empty()).collect();
        if given.iter().any(|&g| g) && !given.iter().all(|&g| g) {
            return Err(err(
                "host.nodes".into(),
                "give `cores` for every node or for none (then they split evenly)".into(),
            ));
        }
        let mut owner = vec![None; h.cores];
        for (i, node) in h.nodes.iter().enumerate() {
            for &c in &node.cores {
                if c >= h.cores {
                    return Err(err(
                        format!("host.nodes[{i}].cores"),
                        format!("core {c} does not exist (host has {})", h.cores),
                    ));
                }
                if let Some(j) = owner[c].replace(i) {
                    return Err(err(
                        format!("host.nodes[{i}].cores"),
                        format!("core {c} is already in host.nodes[{j}]"),
                    ));
                }
            }
            if node.mem_mib > 1 << 30 {
                return Err(err(
                    format!("host.nodes[{i}].mem_mib"),
                    format!("must be at most 2^30 MiB, got {}", node.mem_mib),
                ));
            }
            if node.bandwidth_mb_s > 10_000_000 {
                return Err(err(
                    format!("host.nodes[{i}].bandwidth_mb_s"),
                    format!("must be at most 10000000 MB/s, got {}", node.bandwidth_mb_s),
                ));
            }
            if node.core_mb_s > 10_000_000 {
                return Err(err(
                    format!("host.nodes[{i}].core_mb_s"),
                    format!("must be at most 10000000 MB/s, got {}", node.core_mb_s),
                ));
            }
        }
        if given.first() == Some(&true) {
            if let Some(c) = owner.iter().position(Option::is_none) {
                return Err(err(
                    "host.nodes".into(),
                    format!("core {c} is in no node's `cores`"),
                ));
            }
        }
        self.validate_links(origin)?;
        if h.distance.is_empty() {
            return Ok(());
        }
        if h.distance.len() != n || h.distance.iter().any(|row| row.len() != n) {
            return Err(err(
                "host.distance".into(),
                format!("must be a {n} × {n} matrix (host.numa_nodes = {n})"),
            ));
        }
        for (i, row) in h.distance.iter().enumerate() {
            for (j, &d) in row.iter().enumerate() {
                let ok = if i == j {
                    d == 10
                } else {
                    (10..=254).contains(&d)
                };
                if !ok {
                    return Err(err(
                        format!("host.distance[{i}][{j}]"),
                        format!(
                            "must be 10 on the diagonal (local) and 10..254 elsewhere                              (ACPI SLIT), got {d}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `[[host.links]]` and `host.bus_mb_s`: existing, distinct nodes, no
    /// pair twice, bandwidths in range, every node reachable.
    fn validate_links(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.to_string(),
            field,
            message,
        };
        let h = &self.host;
        let n = h.numa_nodes;
        if h.bus_mb_s > 10_000_000 {
            return Err(err(
                "host.bus_mb_s".into(),
                format!("must be at most 10000000 MB/s, got {}", h.bus_mb_s),
            ));
        }
        if h.latency_ns > 1_000_000 {
            return Err(err(
                "host.latency_ns".into(),
                format!("must be at most 1000000 ns, got {}", h.latency_ns),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, l) in h.links.iter().enumerate() {
            let [a, b] = l.nodes;
            if a >= n || b >= n || a == b {
                return Err(err(
                    format!("host.links[{i}].nodes"),
                    format!(
                        "must name two different nodes below host.numa_nodes = {n}, got [{a}, {b}]"
                    ),
                ));
            }
            if !seen.insert((a.min(b), a.max(b))) {
                return Err(err(
                    format!("host.links[{i}].nodes"),
                    format!("joins nodes {a} and {b} a second time"),
                ));
            }
            if l.bandwidth_mb_s == 0 || l.bandwidth_mb_s > 10_000_000 {
                return Err(err(
                    format!("host.links[{i}].bandwidth_mb_s"),
                    format!(
                        "must be between 1 and 10000000 MB/s, got {}",
                        l.bandwidth_mb_s
                    ),
                ));
            }
        }
        // Several machines: each one's nodes are checked on their own
        // (machines.rs), as no link joins two machines.
        if !h.links.is_empty() && h.machines <= 1 {
            let edges: Vec<(usize, usize)> =
                h.links.iter().map(|l| (l.nodes[0], l.nodes[1])).collect();
            if let Some(lost) = crate::host::unreachable_node(n, &edges) {
                return Err(err(
                    "host.links".into(),
                    format!(
                        "leave node {lost} unreachable from node 0: remote traffic needs a route"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_hypervisor(&self, origin: &str) -> Result<(), ScenarioError> {
        let hv = &self.hypervisor;
        let err = |field: &str, message: String| ScenarioError {
            origin: origin.into(),
            field: format!("hypervisor.{field}"),
            message,
        };
        if crate::hypervisor::by_name(&hv.scheduler).is_none() {
            let names: Vec<_> = crate::hypervisor::SCHEDULERS
                .iter()
                .map(|s| s.name)
                .collect();
            return Err(err(
                "scheduler",
                format!(
                    "unknown scheduler {:?}; known: {}",
                    hv.scheduler,
                    names.join(", ")
                ),
            ));
        }
        for (field, value) in [
            ("tslice_us", hv.tslice_us),
            ("tick_us", hv.tick_us),
            ("extra_quantum_us", hv.extra_quantum_us),
        ] {
            if value == 0 || value > 10_000_000 {
                return Err(err(
                    field,
                    format!("must be between 1 and 10000000 µs, got {value}"),
                ));
            }
        }
        if hv.ticks_per_acct == 0 || hv.ticks_per_acct > 1000 {
            return Err(err(
                "ticks_per_acct",
                format!("must be between 1 and 1000, got {}", hv.ticks_per_acct),
            ));
        }
        let sl = &hv.slicer;
        for (field, value) in [
            ("slicer.poll_us", sl.poll_us),
            ("slicer.inner_slice_us", sl.inner_slice_us),
        ] {
            if value == 0 || value > 10_000_000 {
                return Err(err(
                    field,
                    format!("must be between 1 and 10000000 µs, got {value}"),
                ));
            }
        }
        let lx = &hv.linux;
        for (field, value) in [
            ("linux.slice_us", lx.slice_us),
            ("linux.tick_us", lx.tick_us),
            ("linux.period_us", lx.period_us),
        ] {
            if value == 0 || value > 10_000_000 {
                return Err(err(
                    field,
                    format!("must be between 1 and 10000000 µs, got {value}"),
                ));
            }
        }
        if lx.wakeup_granularity_us > 10_000_000 {
            return Err(err(
                "linux.wakeup_granularity_us",
                format!(
                    "must be at most 10000000 µs, got {}",
                    lx.wakeup_granularity_us
                ),
            ));
        }
        if !matches!(sl.slicing.as_str(), "gang" | "vcpu") {
            return Err(err(
                "slicer.slicing",
                format!("must be \"gang\" or \"vcpu\", got {:?}", sl.slicing),
            ));
        }
        for (field, value) in [
            ("slicer.look_us", sl.look_us),
            ("slicer.idle_switch_us", sl.idle_switch_us.unwrap_or(0)),
        ] {
            if value > 10_000_000 {
                return Err(err(
                    field,
                    format!("must be at most 10000000 µs, got {value}"),
                ));
            }
        }
        if sl.idle_round_us == 0
            || sl.idle_round_us > sl.idle_round_max_us
            || sl.idle_round_max_us > 10_000_000
        {
            return Err(err(
                "slicer.idle_round_us",
                format!(
                    "must be ≥ 1 and ≤ slicer.idle_round_max_us ≤ 10000000 µs, got {} and {}",
                    sl.idle_round_us, sl.idle_round_max_us
                ),
            ));
        }
        if hv.gang.skew_us > 10_000_000 {
            return Err(err(
                "gang.skew_us",
                format!(
                    "must be at most 10000000 µs (0 = strict co-scheduling), got {}",
                    hv.gang.skew_us
                ),
            ));
        }
        if sl.switch_us > 10_000_000 {
            return Err(err(
                "slicer.switch_us",
                format!("must be at most 10000000 µs, got {}", sl.switch_us),
            ));
        }
        if hv.vcpu_switch_ns > 1_000_000_000 || hv.ratelimit_us > 10_000_000 {
            return Err(err(
                "vcpu_switch_ns",
                "or ratelimit_us is absurdly large".into(),
            ));
        }
        Ok(())
    }

    fn validate_guest(&self, origin: &str) -> Result<(), ScenarioError> {
        let g = &self.guest;
        let err = |field: &str, message: String| ScenarioError {
            origin: origin.into(),
            field: format!("guest.{field}"),
            message,
        };
        guest::check(self).map_err(|(field, message)| ScenarioError {
            origin: origin.into(),
            field,
            message,
        })?;
        if g.switch_ns > 1_000_000_000 {
            return Err(err(
                "switch_ns",
                format!("must be at most 1 s (1000000000), got {}", g.switch_ns),
            ));
        }
        // A slice no longer than a switch would spend the vCPU switching.
        if g.slice_us == 0 || g.slice_us > 10_000_000 || g.slice_us * 1000 <= g.switch_ns {
            return Err(err(
                "slice_us",
                format!(
                    "must be between 1 and 10000000 µs and longer than guest.switch_ns, got {}",
                    g.slice_us
                ),
            ));
        }
        Ok(())
    }

    fn validate_mpi(&self, origin: &str) -> Result<(), ScenarioError> {
        let m = &self.mpi;
        let err = |field: &str, message: String| ScenarioError {
            origin: origin.into(),
            field: format!("mpi.{field}"),
            message,
        };
        if m.poll_ns == 0 || m.poll_ns > 1_000_000 {
            return Err(err(
                "poll_ns",
                format!("must be between 1 and 1000000, got {}", m.poll_ns),
            ));
        }
        if m.polls_before_yield == 0 || m.polls_before_yield > 1_000_000_000 {
            return Err(err(
                "polls_before_yield",
                format!("must be between 1 and 1e9, got {}", m.polls_before_yield),
            ));
        }
        if m.adaptive_sleep_min_us == 0
            || m.adaptive_sleep_min_us > m.adaptive_sleep_max_us
            || m.adaptive_sleep_max_us > 1_000_000
        {
            return Err(err(
                "adaptive_sleep_min_us",
                "must be ≥ 1 and ≤ adaptive_sleep_max_us ≤ 1000000".into(),
            ));
        }
        if m.adaptive_sleep_extra_ns > 1_000_000_000 {
            return Err(err(
                "adaptive_sleep_extra_ns",
                format!("must be at most 1 s, got {}", m.adaptive_sleep_extra_ns),
            ));
        }
        if let Some(us) = m.adaptive_spin_min_us {
            if us * 1000 > m.poll_ns.saturating_mul(m.polls_before_yield) {
                return Err(err(
                    "adaptive_spin_min_us",
                    format!(
                        "must be at most the full spin (poll_ns × polls_before_yield = {} µs), \
                         got {us}",
                        m.poll_ns.saturating_mul(m.polls_before_yield) / 1000
                    ),
                ));
            }
        }
        if !["dom0", "shm"].contains(&m.between_domains.as_str()) {
            return Err(err(
                "between_domains",
                format!("must be \"dom0\" or \"shm\", got {:?}", m.between_domains),
            ));
        }
        if let Some(list) = &m.transports {
            if m.between_domains != "dom0" {
                return Err(err(
                    "between_domains",
                    "is the old spelling of mpi.transports: give one or the other (\"shm\" \
                     between domains is transports = [\"sm\", \"ivshmem\"] with a common \
                     domains.ivshmem group)"
                        .into(),
                ));
            }
            if list.is_empty() {
                return Err(err("transports", "must list at least one transport".into()));
            }
            for (k, name) in list.iter().enumerate() {
                if !TRANSPORTS.contains(&name.as_str()) {
                    return Err(err(
                        &format!("transports[{k}]"),
                        format!(
                            "unknown transport {name:?}; known: {}",
                            TRANSPORTS.join(", ")
                        ),
                    ));
                }
                if list[..k].contains(name) {
                    return Err(err(
                        &format!("transports[{k}]"),
                        format!("{name:?} is listed twice"),
                    ));
                }
            }
        }
        if m.eager_limit > 1 << 30 {
            return Err(err(
                "eager_limit",
                format!("must be at most 2^30 bytes, got {}", m.eager_limit),
            ));
        }
        if let Some(limit) = m.local_send_limit {
            if limit > m.eager_limit {
                return Err(err(
                    "local_send_limit",
                    format!(
                        "must be at most mpi.eager_limit ({} bytes): larger messages use the \
                         rendezvous, whose send completes only with the receiver anyway; got {limit}",
                        m.eager_limit
                    ),
                ));
            }
        }
        for (name, ch) in [
            ("shm", &m.shm),
            ("native", &m.native),
            ("inter_vm", &m.inter_vm),
            ("bridge", &m.bridge),
            ("emulated", &m.emulated),
            ("virtio", &m.virtio),
            ("ivshmem", &m.ivshmem),
            ("tcp", &m.tcp),
        ] {
            if ch.chunk_bytes == 0
                || ch.chunk_bytes > 1 << 30
                || ch.window == 0
                || ch.window > 1 << 20
            {
                return Err(err(
                    &format!("{name}.chunk_bytes"),
                    "chunk_bytes must be 1..2^30 and window 1..2^20".into(),
                ));
            }
            if ch.rndv_pull && ch.shared_copy_buffer {
                return Err(err(
                    &format!("{name}.rndv_pull"),
                    "a receiver that reads the sender's buffer uses no shared copy buffer: \
                     set rndv_pull or shared_copy_buffer, not both"
                        .into(),
                ));
            }
            if ch.has_rx_irq() && !matches!(name, "emulated" | "virtio") {
                let field = if ch.rx_irq_ns > 0 {
                    "rx_irq_ns"
                } else {
                    "rx_irq_ns_per_kib"
                };
                return Err(err(
                    &format!("{name}.{field}"),
                    "only a VM's NIC (emulated, virtio) has a receive interrupt to route to \
                     one vCPU"
                        .into(),
                ));
            }
            if ch.tx_on_sender && !matches!(name, "emulated" | "virtio") {
                return Err(err(
                    &format!("{name}.tx_on_sender"),
                    "only the device-thread NICs (emulated, virtio) have a transmit side to move \
                     into the vCPU"
                        .into(),
                ));
            }
            // Costs stay below 1 s each, so cost × message size cannot overflow.
            let costs = [
                ("latency_ns", ch.latency_ns),
                ("send_ns", ch.send_ns),
                ("send_ns_per_kib", ch.send_ns_per_kib),
                ("recv_ns", ch.recv_ns),
                ("recv_ns_per_kib", ch.recv_ns_per_kib),
                ("relay_ns", ch.relay_ns),
                ("relay_ns_per_kib", ch.relay_ns_per_kib),
                ("rndv_send_ns_per_kib", ch.rndv_send_ns_per_kib.unwrap_or(0)),
                ("rndv_recv_ns_per_kib", ch.rndv_recv_ns_per_kib.unwrap_or(0)),
                ("rndv_ns", ch.rndv_ns),
                ("post_send_ns", ch.post_send_ns),
                ("rx_irq_ns", ch.rx_irq_ns),
                ("rx_irq_ns_per_kib", ch.rx_irq_ns_per_kib),
            ];
            if let Some((field, value)) = costs.iter().find(|(_, v)| *v > 1_000_000_000) {
                return Err(err(
                    &format!("{name}.{field}"),
                    format!("must be at most 1 s (1000000000 ns), got {value}"),
                ));
            }
        }
        Ok(())
    }

    fn validate_domains(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.into(),
            field,
            message,
        };
        if self.domains.is_empty() || self.domains.len() > MAX_DOMAINS {
            return Err(err(
                "domains".into(),
                format!(
                    "needs between 1 and {MAX_DOMAINS} domains, got {}",
                    self.domains.len()
                ),
            ));
        }
        let mut dom0s = 0;
        let mut names = BTreeSet::new();
        let mut vcpus = 0usize;
        for (i, d) in self.domains.iter().enumerate() {
            let f = |name: &str| format!("domains[{i}].{name}");
            if d.name.is_empty() || !names.insert(d.name.as_str()) {
                return Err(err(
                    f("name"),
                    format!("must be non-empty and unique, got {:?}", d.name),
                ));
            }
            if d.vcpus == 0 || d.vcpus > 1024 {
                return Err(err(
                    f("vcpus"),
                    format!("must be between 1 and 1024, got {}", d.vcpus),
                ));
            }
            vcpus += d.vcpus;
            if vcpus > MAX_VCPUS {
                return Err(err(
                    f("vcpus"),
                    format!(
                        "brings the domains' vCPUs to {vcpus} (domains[0..={i}]), more than \
                         the {MAX_VCPUS} a scenario may have"
                    ),
                ));
            }
            if d.weight == 0 || d.weight > 65535 {
                return Err(err(
                    f("weight"),
                    format!("must be between 1 and 65535, got {}", d.weight),
                ));
            }
            if d.cap > 100 * d.vcpus as u32 {
                return Err(err(
                    f("cap"),
                    format!(
                        "must be at most 100 × vcpus = {}, got {}",
                        100 * d.vcpus,
                        d.cap
                    ),
                ));
            }
            if !(d.pin.is_empty() || d.pin.len() == 1 || d.pin.len() == d.vcpus) {
                return Err(err(
                    f("pin"),
                    format!(
                        "needs one list per vCPU ({}) or a single list, got {}",
                        d.vcpus,
                        d.pin.len()
                    ),
                ));
            }
            for (j, cores) in d.pin.iter().enumerate() {
                if cores.is_empty() {
                    return Err(err(
                        format!("domains[{i}].pin[{j}]"),
                        "an empty core list pins to nothing".into(),
                    ));
                }
                if let Some(c) = cores.iter().find(|&&c| c >= self.host.cores) {
                    return Err(err(
                        format!("domains[{i}].pin[{j}]"),
                        format!("core {c} does not exist (host has {})", self.host.cores),
                    ));
                }
            }
            let per_vcpu =
                self.hypervisor.scheduler == "slicer" && self.hypervisor.slicer.slicing == "vcpu";
            if per_vcpu && (d.pin.is_empty() || d.pin.iter().any(|cores| cores.len() != 1)) {
                return Err(err(
                    f("pin"),
                    "the slicer's per-vCPU mode (hypervisor.slicer.slicing = \"vcpu\") needs \
                     every vCPU pinned to one core, as the lab pins vCPU k to cpus[k]"
                        .into(),
                ));
            }
            if let Some(b) = &d.background {
                if b.interval_us == 0 || b.work_us >= b.interval_us || b.interval_us > 1_000_000_000
                {
                    return Err(err(
                        f("background"),
                        format!(
                            "needs 0 < work_us < interval_us ≤ 1e9, got {} and {}",
                            b.work_us, b.interval_us
                        ),
                    ));
                }
            }
            let s = &d.sedf;
            if s.period_us == 0 || s.slice_us > s.period_us || s.period_us > 10_000_000 {
                return Err(err(
                    f("sedf"),
                    format!(
                        "needs 0 < period_us ≤ 10 s and slice_us ≤ period_us, got {}/{}",
                        s.slice_us, s.period_us
                    ),
                ));
            }
            if !NICS.contains(&d.nic.as_str()) {
                return Err(err(
                    f("nic"),
                    format!("unknown NIC {:?}; known: {}", d.nic, NICS.join(", ")),
                ));
            }
            if d.rx_irq_vcpu >= d.vcpus {
                return Err(err(
                    f("rx_irq_vcpu"),
                    format!(
                        "must name one of the domain's {} vCPUs (0 .. {}), got {}",
                        d.vcpus,
                        d.vcpus - 1,
                        d.rx_irq_vcpu
                    ),
                ));
            }
            if d.ivshmem.as_deref() == Some("") {
                return Err(err(f("ivshmem"), "a group needs a non-empty name".into()));
            }
            if d.dom0 && (d.nic != "netfront" || d.ivshmem.is_some()) {
                return Err(err(
                    f(if d.ivshmem.is_some() {
                        "ivshmem"
                    } else {
                        "nic"
                    }),
                    "dom0 runs no ranks: its own NIC and ivshmem are not modelled".into(),
                ));
            }
            if d.dom0 {
                dom0s += 1;
                if i != 0 {
                    return Err(err(f("dom0"), "dom0 must be the first domain".into()));
                }
            }
        }
        if dom0s > 1 {
            return Err(err("domains".into(), "only one domain can be dom0".into()));
        }
        Ok(())
    }

    fn validate_jobs(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.into(),
            field,
            message,
        };
        if self.jobs.is_empty() || self.jobs.len() > MAX_JOBS {
            return Err(err(
                "jobs".into(),
                format!(
                    "needs between 1 and {MAX_JOBS} jobs, got {}",
                    self.jobs.len()
                ),
            ));
        }
        let domains: BTreeMap<&str, &Domain> =
            self.domains.iter().map(|d| (d.name.as_str(), d)).collect();
        let mut ranks = 0usize;
        for (i, j) in self.jobs.iter().enumerate() {
            let f = |name: &str| format!("jobs[{i}].{name}");
            if j.ranks.is_empty() || j.ranks.len() > 100_000 {
                return Err(err(
                    f("ranks"),
                    format!("needs between 1 and 100000 entries, got {}", j.ranks.len()),
                ));
            }
            ranks += j.ranks.len();
            if ranks > MAX_RANKS {
                return Err(err(
                    f("ranks"),
                    format!(
                        "brings the jobs' ranks to {ranks} (jobs[0..={i}]), more than the \
                         {MAX_RANKS} a scenario may have"
                    ),
                ));
            }
            let first = &j.ranks[0];
            let netfront_only = j.ranks.iter().all(|r| {
                domains
                    .get(r.as_str())
                    .map_or(true, |d| d.nic == "netfront")
            });
            if j.ranks.iter().any(|d| d != first)
                && self.mpi.transports.is_none()
                && netfront_only
                && self.mpi.between_domains == "dom0"
                && !self.domains[0].dom0
            {
                return Err(err(
                    f("ranks"),
                    "ranks in different domains talk through dom0, but no domain has dom0 = true \
                     (or set mpi.between_domains = \"shm\")"
                        .into(),
                ));
            }
            for (r, dom) in j.ranks.iter().enumerate() {
                match domains.get(dom.as_str()) {
                    None => {
                        return Err(err(
                            format!("jobs[{i}].ranks[{r}]"),
                            format!("no domain named {dom:?}"),
                        ))
                    }
                    Some(d) if d.dom0 => {
                        return Err(err(
                            format!("jobs[{i}].ranks[{r}]"),
                            "ranks cannot run in dom0".into(),
                        ))
                    }
                    Some(_) => {}
                }
            }
            self.validate_job_transports(i, j, &domains, origin)?;
            if j.start_us >= self.limit_ms.saturating_mul(1000) {
                return Err(err(
                    f("start_us"),
                    format!(
                        "must be before the end of the run (limit_ms = {}), got {} µs",
                        self.limit_ms, j.start_us
                    ),
                ));
            }
            if j.untimed_us > 0 && j.timed_from == TimedFrom::Start {
                return Err(err(
                    f("untimed_us"),
                    "needs timed_from = \"all_ranks_ran\": with the clock at start_us, \
                     set-up work would be timed"
                        .into(),
                ));
            }
            if crate::mpi::WaitPolicy::from_name(&j.wait_policy).is_none() {
                return Err(err(
                    f("wait_policy"),
                    format!(
                        "unknown policy {:?}; known: {}",
                        j.wait_policy,
                        crate::mpi::WaitPolicy::NAMES.join(", ")
                    ),
                ));
            }
            let omp = crate::workload::memory_profile(&j.workload, &j.params, j.ranks.len() as u32)
                .is_some_and(|m| m.omp);
            if omp && j.ranks.iter().any(|d| d != first) {
                return Err(err(
                    f("ranks"),
                    format!(
                        "{} is OpenMP-style: its threads share memory, so they must all be in                          one domain",
                        j.workload
                    ),
                ));
            }
            if let Some(name) = &j.throttle {
                if crate::engine::throttle::by_name(name).is_none() {
                    return Err(err(
                        f("throttle"),
                        format!(
                            "unknown throttling policy {name:?}; known: {}",
                            crate::engine::throttle::names().join(", ")
                        ),
                    ));
                }
                if !omp {
                    return Err(err(
                        f("throttle"),
                        format!(
                            "throttles the threads of an OpenMP-style job, whose threads share \
                             the work of each loop; {}'s ranks each own their part",
                            j.workload
                        ),
                    ));
                }
            }
            crate::workload::check(&j.workload, &j.params, j.ranks.len()).map_err(
                |(field, message)| {
                    let field = if field.is_empty() {
                        f("workload")
                    } else {
                        f(&format!("params.{field}"))
                    };
                    err(field, message)
                },
            )?;
        }
        Ok(())
    }
}

impl Scenario {
    /// The transports `mpi.transports` lists, in priority order; absent,
    /// what `between_domains` means (`dom0`: sm, then net; `shm`: sm
    /// everywhere, handled by the engine as before).
    pub fn transports(&self) -> Vec<&str> {
        match &self.mpi.transports {
            Some(list) => list.iter().map(String::as_str).collect(),
            None => vec!["sm", "net"],
        }
    }

    /// Every rank pair of job `i` has a transport, and the domains it sends
    /// through over `net` have what their NIC needs (dom0 for the relay and
    /// the device threads). Called once the ranks' domains are known to exist.
    fn validate_job_transports(
        &self,
        i: usize,
        j: &Job,
        domains: &BTreeMap<&str, &Domain>,
        origin: &str,
    ) -> Result<(), ScenarioError> {
        if self.mpi.transports.is_none() && self.mpi.between_domains == "shm" {
            return Ok(()); // shared memory between all domains, as before
        }
        let err = |field: String, message: String| ScenarioError {
            origin: origin.into(),
            field,
            message,
        };
        let list = self.transports();
        let pos = |t: &str| list.iter().position(|&x| x == t);
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        let mut shared_domain = false;
        for (r, name) in j.ranks.iter().enumerate() {
            if !domains.contains_key(name.as_str()) {
                return Ok(()); // validate_jobs names the missing domain
            }
            shared_domain |= seen.insert(name, r).is_some();
        }
        if shared_domain && pos("sm").is_none() {
            return Err(err(
                "mpi.transports".into(),
                format!(
                    "jobs[{i}] has ranks sharing a domain, which only `sm` reaches \
                     (loopback TCP inside a guest is not modelled): list \"sm\""
                ),
            ));
        }
        if seen.len() < 2 {
            return Ok(());
        }
        // One ivshmem group for all the job's domains, ahead of net: net unused.
        let groups: BTreeSet<Option<&str>> =
            seen.keys().map(|n| domains[n].ivshmem.as_deref()).collect();
        let one_group = groups.len() == 1 && !groups.contains(&None);
        let ivshmem_first = match (pos("ivshmem"), pos("net")) {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            _ => false,
        };
        if one_group && ivshmem_first {
            return Ok(());
        }
        if pos("net").is_none() {
            // Some pair is in different groups (or none): name the first rank
            // that rank 0 cannot reach.
            let group = |n: &str| domains[n].ivshmem.as_deref();
            let g0 = group(&j.ranks[0]);
            let r = j
                .ranks
                .iter()
                .position(|n| *n != j.ranks[0] && (g0.is_none() || group(n) != g0))
                .unwrap_or(0);
            return Err(err(
                format!("jobs[{i}].ranks[{r}]"),
                "reaches another domain of its job through neither ivshmem (domains not all \
                 in one domains.ivshmem group) nor net (not in mpi.transports)"
                    .into(),
            ));
        }
        // Net is used by every domain of the job: if not all share a group,
        // each has a peer outside its own.
        if self.domains[0].dom0 {
            return Ok(());
        }
        if let Some(name) = seen.keys().find(|n| domains[*n].nic != "bridge") {
            let d = self
                .domains
                .iter()
                .position(|dom| dom.name == *name)
                .expect("a known domain");
            return Err(err(
                format!("domains[{d}].nic"),
                format!(
                    "{:?} needs a dom0 (the first domain, dom0 = true): its back end runs \
                     on dom0's vCPUs (on KVM, a `host` domain with dom0 = true stands for \
                     the host's cores), or use nic = \"bridge\"",
                    self.domains[d].nic
                ),
            ));
        }
        Ok(())
    }
}

/// A serde/TOML error, with the field it is about when its span tells
/// (for a missing field, the table's path plus the field's name).
fn parse_error(origin: &str, text: &str, e: &toml::de::Error) -> ScenarioError {
    let Some(span) = e.span() else {
        return ScenarioError {
            origin: origin.into(),
            field: String::new(),
            message: e.message().into(),
        };
    };
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let mut field = locate::field_at(text, span.start).unwrap_or_default();
    if let Some(missing) = e
        .message()
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next())
    {
        field = if field.is_empty() {
            missing.to_string()
        } else {
            format!("{field}.{missing}")
        };
    }
    let message = format!("{} (line {line})", e.message());
    if field.is_empty() {
        // Not a field (broken TOML): toml's own text shows the spot.
        let shown = e.to_string().trim_end().to_string();
        return ScenarioError {
            origin: origin.into(),
            field,
            message: shown,
        };
    }
    ScenarioError {
        origin: origin.into(),
        field,
        message,
    }
}

fn one() -> u64 {
    1
}
fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_zero_usize(v: &usize) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}
fn default_placement() -> String {
    "first_touch".into()
}
fn default_nested_paging_ppm() -> u32 {
    crate::memory::DEFAULT_NESTED_PAGING_PPM
}
fn default_host_fault_share_ppm() -> u32 {
    300_000
}
fn one_usize() -> usize {
    1
}
fn three() -> u32 {
    3
}
fn yes() -> bool {
    true
}
fn default_limit_ms() -> u64 {
    3_600_000
}
fn default_scheduler() -> String {
    "credit".into()
}
fn default_tslice_us() -> u64 {
    30_000
}
fn default_tick_us() -> u64 {
    10_000
}
fn default_between_domains() -> String {
    "dom0".into()
}
fn default_nic() -> String {
    "netfront".into()
}

fn default_linux_slice_us() -> u64 {
    3_000
}

fn default_linux_tick_us() -> u64 {
    4_000
}

fn default_linux_wakeup_granularity_us() -> u64 {
    1_000
}

fn default_linux_period_us() -> u64 {
    100_000
}

fn default_slicing() -> String {
    "gang".into()
}

fn default_slicer_poll_us() -> u64 {
    200
}

fn default_slicer_look_us() -> u64 {
    15
}

fn default_slicer_idle_round_us() -> u64 {
    25
}

fn default_slicer_idle_round_max_us() -> u64 {
    500
}

fn default_slicer_switch_us() -> u64 {
    100
}

fn default_slicer_inner_slice_us() -> u64 {
    4_000
}

fn default_extra_quantum_us() -> u64 {
    500
}
fn default_vcpu_switch_ns() -> u64 {
    2_000
}
fn default_guest_slice_us() -> u64 {
    4_000
}
fn default_guest_switch_ns() -> u64 {
    1_500
}
fn default_eager_limit() -> u64 {
    65_536
}
fn default_poll_ns() -> u64 {
    20
}
fn default_polls() -> u64 {
    1000
}
fn default_futile_yields() -> u32 {
    8
}
fn default_idle_yields() -> u32 {
    16
}
fn default_sleep_min_us() -> u64 {
    50
}
fn default_sleep_max_us() -> u64 {
    1_000
}
fn default_chunk_bytes() -> u64 {
    32 * 1024
}
fn default_window() -> u32 {
    2
}
fn default_weight() -> u32 {
    256
}
fn default_sedf_period_us() -> u64 {
    100_000
}
fn default_wait_policy() -> String {
    "busy_poll".into()
}
