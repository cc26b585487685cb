//! What a run reports: per job, per rank, per core and per vCPU, as plain
//! records that serialise to JSON (and become columns in Python).
//!
//! Times are integer nanoseconds; the `_s` fields repeat them in seconds for
//! reading. CPU time of a rank splits into useful work, busy-poll waste
//! (spinning inside MPI) and overhead (MPI copies and protocol work, vCPU
//! and process switch costs).

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub scenario: String,
    pub scheduler: String,
    pub seed: u64,
    /// Simulated time when the run stopped.
    pub end_ns: u64,
    /// Whether every finite job finished before `limit_ms`.
    pub finished: bool,
    /// Events the engine handled, not counting stale ones it skipped
    /// (for throughput figures).
    pub events: u64,
    pub jobs: Vec<JobReport>,
    pub ranks: Vec<RankReport>,
    pub cores: Vec<CoreReport>,
    pub vcpus: Vec<VcpuReport>,
    /// Per domain, with a migrating guest scheduler only (`guest.scheduler`
    /// other than `fixed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guest: Option<Vec<GuestReport>>,
}

/// A domain's guest scheduling (`guest.scheduler = "linux"`).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct GuestReport {
    pub domain: String,
    pub scheduler: String,
    /// `hierarchical` or `flat`.
    pub domains: String,
    /// Tasks moved to another vCPU, all causes.
    pub migrations: u64,
    pub wake_migrations: u64,
    pub newidle_migrations: u64,
    pub balance_migrations: u64,
    /// Times a task of the domain was switched out (blocked, slept, ended
    /// or was preempted by the guest): `perf stat -e context-switches`.
    pub context_switches: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobReport {
    pub name: String,
    pub workload: String,
    pub wait_policy: String,
    pub ranks: u32,
    /// When its last rank finished (None: it did not finish, or is endless);
    /// for a `refill` job, the end of its first run.
    pub completion_ns: Option<u64>,
    pub completion_s: Option<f64>,
    /// Runs started, for a `refill` job that was relaunched (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
    pub useful_ns: u64,
    pub poll_ns: u64,
    pub overhead_ns: u64,
    /// Memory model only: share of the job's memory accesses (weighted by
    /// native stall time) that went to a node other than the accessing
    /// core's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_share: Option<f64>,
    /// Memory model only: wall time of its memory-aware phases over their
    /// native time, minus one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_slowdown: Option<f64>,
    /// `jobs.throttle` only: how many threads each parallel loop ran on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Vec<crate::engine::throttle::LoopReport>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RankReport {
    pub job: String,
    pub rank: u32,
    pub domain: String,
    pub vcpu: u32,
    pub finish_ns: Option<u64>,
    pub useful_ns: u64,
    pub poll_ns: u64,
    pub overhead_ns: u64,
    /// Guest context switches onto this rank.
    pub context_switches: u64,
    pub guest_yields: u64,
    pub hv_yields: u64,
    pub blocks: u64,
    pub sleeps: u64,
    pub messages_sent: u64,
    /// Moves to another vCPU (a migrating guest scheduler only).
    #[serde(skip_serializing_if = "is_zero")]
    pub migrations: u64,
    /// Timer ticks (guest or host) that hit it while it ran (ticks on only).
    #[serde(skip_serializing_if = "is_zero")]
    pub ticks: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CoreReport {
    pub core: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
    /// Times the core switched to a different vCPU.
    pub vcpu_switches: u64,
    pub utilisation: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct VcpuReport {
    pub domain: String,
    pub vcpu: u32,
    pub run_ns: u64,
    /// Times it started on a core other than the one it last ran on.
    pub migrations: u64,
}
