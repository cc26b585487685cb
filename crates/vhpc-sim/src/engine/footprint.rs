//! How much memory a scenario needs, estimated from the parsed scenario
//! before anything is built, so that vhpc can refuse what would not fit
//! instead of growing until the kernel kills it.
//!
//! The estimate adds up, per contributor, the engine's own records (their
//! sizes taken with `size_of`, so they follow the code), the scheduler's
//! per-vCPU and per-core state, the vCPUs' affinity lists (one entry per
//! allowed core, held by the engine and by most schedulers: the dominant term
//! of a large unpinned host), the ranks' programs at their widest (an
//! all-to-all expands into three operations per peer), the event queue, the
//! report as Rust records, as JSON text and as Python parses it, and the
//! trace. It is meant as an upper-ish bound of the peak resident memory the
//! simulation adds to its process: docs/sim.md ("Memory") compares it with
//! measured peaks.

use std::mem::size_of;

use crate::metrics::{CoreReport, JobReport, RankReport, VcpuReport};
use crate::mpi::{Packet, RankMpi};
use crate::scenario::{Domain, Job, Scenario};
use crate::trace::{BUFFER_BYTES, TRACE_LIMIT};
use crate::workload::{self, Op, Shape, Step};

use super::{Core, PackedEv, Task, Vcpu, Work};

/// The part of the estimate that is the report in Python (its text as a
/// `str`, and what `json.loads` makes of it), for callers that do not parse it.
pub const PYTHON_REPORT: &str = "report in Python";

/// Where the trace goes, for the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trace {
    Off,
    /// Streamed to a file: a write buffer and the track names.
    File,
    /// Kept in memory as text (up to [`TRACE_LIMIT`] slices).
    Memory,
}

/// One contributor to the estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub what: &'static str,
    pub bytes: u64,
}

/// A scenario's estimated memory, by contributor (largest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Footprint {
    pub parts: Vec<Part>,
}

impl Footprint {
    /// The estimate: the sum of the parts.
    pub fn total(&self) -> u64 {
        self.parts
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.bytes))
    }
}

/// Bytes of one heap allocation of `n` bytes: glibc's chunk header and
/// 16-byte rounding, at least its 32-byte minimum chunk.
fn alloc(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        (n + 8).next_multiple_of(16).max(32)
    }
}

/// A `Vec`/`VecDeque` of `n` items of `size` bytes filled by pushes, whose
/// capacity doubles (small ones: every byte of the capacity is touched).
fn grown(n: u64, size: usize) -> u64 {
    if n == 0 {
        0
    } else {
        alloc(n.next_power_of_two().max(4) * size as u64)
    }
}

/// A `String` of `len` bytes (its 24-byte header counted by its owner).
fn string(len: usize) -> u64 {
    alloc(len as u64)
}

/// Scheduler state per vCPU beyond its affinity list (Credit's
/// `csched_vcpu`, run-queue and domain-list slots; the others hold less).
const SCHED_PER_VCPU: u64 = 160;
/// Scheduler state per core (a run queue, held and previous vCPU, timers).
const SCHED_PER_CORE: u64 = 128;
/// Events pending per task, vCPU and core (with the stale ones the engine
/// leaves in the queue until their time comes).
const EVENTS_PER_ITEM: u64 = 4;
/// Packets in flight, unexpected or parked per rank.
const PACKETS_PER_RANK: u64 = 4;
/// JSON text per record of the report, beyond its names.
const JSON_RANK: u64 = 330;
const JSON_VCPU: u64 = 80;
const JSON_CORE: u64 = 120;
const JSON_JOB: u64 = 260;
/// What Python's `json.loads` makes of one record (a dict, its int and str
/// objects; the keys are shared), and of each byte of a name in it.
const PY_RANK: u64 = 1300;
const PY_VCPU: u64 = 520;
const PY_CORE: u64 = 560;
const PY_JOB: u64 = 1100;
/// Bytes of one slice event in the trace text, beyond its vCPU's name.
const TRACE_EVENT: u64 = 80;

/// Whether a scheduler keeps its own copy of every vCPU's affinity list.
fn copies_affinity(scheduler: &str) -> bool {
    !matches!(scheduler, "sedf" | "round_robin")
}

/// The cores a vCPU of `d` may run on (its pin list, or all of them).
fn affinity_len(d: &Domain, vcpu: usize, cores: usize) -> u64 {
    match d.pin.len() {
        0 => cores as u64,
        1 => d.pin[0].len().min(cores) as u64,
        _ => d.pin.get(vcpu).map_or(cores, |p| p.len().min(cores)) as u64,
    }
}

/// Operations a step expands into at once, and packets that may wait
/// unmatched while a rank is in it.
fn widest(step: &Step, ranks: u64) -> (u64, u64) {
    let log2 = 64 - ranks.saturating_sub(1).leading_zeros() as u64;
    match step {
        Step::Compute { .. } | Step::MemCompute { .. } | Step::Loop { .. } | Step::ClockStart => {
            (1, 0)
        }
        Step::Halo { .. } => (5, 2),
        Step::Send { .. } | Step::Recv { .. } => (2, 1),
        Step::Sendrecv { .. } => (3, 1),
        // Pairwise exchange: every peer's message may arrive before its round.
        Step::Alltoall { .. } => (3 * ranks.saturating_sub(1), ranks.saturating_sub(1)),
        Step::Allreduce { .. } => (3 * log2 + 4, log2 + 1),
        Step::Barrier => (3 * log2, log2),
    }
}

/// Memory for one job's ranks' programs at their widest.
fn programs(job: &Job) -> u64 {
    let ranks = job.ranks.len() as u64;
    let Some(info) = workload::by_name(&job.workload) else {
        return 0;
    };
    let shape = Shape {
        rank: 0,
        ranks: ranks as u32,
    };
    let steps = (info.build)(&job.params, shape);
    // Ranks at the ends of a line may have a few steps more or less.
    let per_rank_steps = alloc((steps.len() as u64 + 4) * size_of::<Step>() as u64);
    let (ops, unexpected) = steps
        .iter()
        .map(|s| widest(s, ranks))
        .fold((0, 0), |(a, b), (c, d)| (a.max(c), b.max(d)));
    let pending = grown(ops, size_of::<Op>());
    let waiting = grown(unexpected, size_of::<Packet>());
    let throttle = job.throttle.as_ref().map_or(0, |_| {
        super::throttle::Controller::bytes(ranks, steps.len() as u64 + 4)
    });
    ranks * (per_rank_steps + pending + waiting) + throttle
}

/// The estimated peak memory of simulating `sc` (validated) with `trace`.
pub fn estimate(sc: &Scenario, trace: Trace) -> Footprint {
    let cores = sc.host.cores as u64;
    let vcpus: u64 = sc.domains.iter().map(|d| d.vcpus as u64).sum();
    let ranks: u64 = sc.jobs.iter().map(|j| j.ranks.len() as u64).sum();
    let helpers: u64 = sc
        .domains
        .iter()
        .map(|d| {
            u64::from(d.dom0)
                + u64::from(d.has_device_thread() && !d.dom0)
                + if d.background.is_some() {
                    d.vcpus as u64
                } else {
                    0
                }
        })
        .sum();
    let tasks = ranks + helpers;
    let name_bytes = |len: usize| 24 + string(len);

    // Affinity lists: the engine's and the scheduler's copy (the one handed
    // to the scheduler while a vCPU is added lives only for that moment).
    let copies = 1 + u64::from(copies_affinity(&sc.hypervisor.scheduler));
    let mut affinity = 0u64;
    let mut vcpu_names = 0u64;
    let mut track_names = 0u64;
    for d in &sc.domains {
        for i in 0..d.vcpus {
            affinity =
                affinity.saturating_add(copies * alloc(8 * affinity_len(d, i, sc.host.cores)));
        }
        // The report's domain per vCPU, and the names `finish` collects.
        vcpu_names += 2 * d.vcpus as u64 * name_bytes(d.name.len());
        // "domain.vN": the trace's track names.
        track_names += d.vcpus as u64 * name_bytes(d.name.len() + 8);
    }
    let vcpu_state = vcpus
        * (size_of::<Vcpu>() as u64
            + SCHED_PER_VCPU
            + size_of::<VcpuReport>() as u64
            + grown(1, size_of::<usize>()));
    let core_state = cores
        * (size_of::<Core>() as u64
            + 2 * size_of::<Option<usize>>() as u64
            + SCHED_PER_CORE
            + size_of::<CoreReport>() as u64
            + 8);
    // Each rank: its task and MPI state, its report record and the clone
    // `finish` makes, the job and domain names in both.
    let rank_names: u64 = sc
        .jobs
        .iter()
        .map(|j| {
            j.ranks
                .iter()
                .map(|d| 2 * (string(j.name.len()) + string(d.len())))
                .sum::<u64>()
        })
        .sum();
    let task_state = tasks
        * (size_of::<Task>() as u64
            + alloc(size_of::<RankMpi>() as u64)
            + grown(4, size_of::<Work>())
            + size_of::<RankReport>() as u64)
        + rank_names;
    let program_state: u64 = sc.jobs.iter().map(programs).sum();
    // A queued event: its time and payload in a radix-heap bucket, and room
    // for the payload in the queue's current instant (buckets keep their room;
    // the factor 2 below is their spare).
    let entry = (size_of::<(u64, PackedEv)>() + size_of::<PackedEv>()) as u64;
    let events = 2 * EVENTS_PER_ITEM * (tasks + vcpus + cores) * entry
        + ranks * PACKETS_PER_RANK * (size_of::<(u32, Packet)>() as u64 + 16)
        + ranks * 64; // copy buffers of rank pairs (a BTreeMap entry each)

    // The report: records, their JSON text (in Rust, then as a Python str),
    // and Python's parse of it.
    let job_names: u64 = sc.jobs.iter().map(|j| j.name.len() as u64).sum();
    let domain_names: u64 = sc
        .domains
        .iter()
        .map(|d| d.vcpus as u64 * d.name.len() as u64)
        .sum();
    let rank_domain_names: u64 = sc
        .jobs
        .iter()
        .flat_map(|j| j.ranks.iter().map(move |d| (j.name.len() + d.len()) as u64))
        .sum();
    let json = ranks * JSON_RANK
        + rank_domain_names
        + vcpus * JSON_VCPU
        + domain_names
        + cores * JSON_CORE
        + sc.jobs.len() as u64 * JSON_JOB
        + 3 * job_names;
    let report = sc.jobs.len() as u64 * size_of::<JobReport>() as u64 + json;
    let python = json
        + ranks * PY_RANK
        + vcpus * PY_VCPU
        + cores * PY_CORE
        + sc.jobs.len() as u64 * PY_JOB
        + 2 * (rank_domain_names + domain_names);

    // The parsed scenario: rank lists by name, pin lists, job parameters.
    let scenario: u64 = sc
        .jobs
        .iter()
        .map(|j| {
            size_of::<Job>() as u64
                + j.ranks.iter().map(|d| name_bytes(d.len())).sum::<u64>()
                + 64 * j.params.len() as u64
        })
        .sum::<u64>()
        + sc.domains
            .iter()
            .map(|d| {
                size_of::<Domain>() as u64
                    + d.pin
                        .iter()
                        .map(|p| 24 + alloc(8 * p.len() as u64))
                        .sum::<u64>()
            })
            .sum::<u64>();

    let trace_bytes = match trace {
        Trace::Off => 0,
        Trace::File => BUFFER_BYTES as u64,
        Trace::Memory => {
            let longest = sc.domains.iter().map(|d| d.name.len()).max().unwrap_or(0);
            // The text, and its copy as a Python str.
            2 * TRACE_LIMIT as u64 * (TRACE_EVENT + longest as u64 + 8)
        }
    };
    let trace_part = if trace == Trace::Off {
        0
    } else {
        trace_bytes + track_names
    };
    let names_part = vcpu_names;

    let mut parts = vec![
        Part {
            what: "vCPU affinity lists",
            bytes: affinity,
        },
        Part {
            what: "vCPUs",
            bytes: vcpu_state + names_part,
        },
        Part {
            what: "cores",
            bytes: core_state,
        },
        Part {
            what: "ranks",
            bytes: task_state,
        },
        Part {
            what: "rank programs and collectives",
            bytes: program_state,
        },
        Part {
            what: "events and messages",
            bytes: events,
        },
        Part {
            what: "report",
            bytes: report,
        },
        Part {
            what: PYTHON_REPORT,
            bytes: python,
        },
        Part {
            what: "scenario",
            bytes: scenario,
        },
        Part {
            what: "trace",
            bytes: trace_part,
        },
    ];
    // The allocator's free lists and the heap's growth keep about this much
    // more than is live (measured: docs/sim.md, "Memory").
    let live: u64 = parts.iter().map(|p| p.bytes).sum();
    parts.push(Part {
        what: "allocator slack",
        bytes: live / 10,
    });
    parts.retain(|p| p.bytes > 0);
    parts.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.what.cmp(b.what)));
    Footprint { parts }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cores` cores; `domains` domains of `vcpus` vCPUs (pinned to one core
    /// each if `pin`), each running a `workload` job of `ranks` ranks.
    fn scenario(
        cores: usize,
        domains: usize,
        vcpus: usize,
        pin: bool,
        ranks: usize,
        workload: &str,
    ) -> Scenario {
        let mut text =
            format!("limit_ms = 10\n[host]\ncores = {cores}\n[mpi]\nbetween_domains = \"shm\"\n");
        for d in 0..domains {
            text += &format!("[[domains]]\nname = \"d{d}\"\nvcpus = {vcpus}\n");
            if pin {
                text += &format!("pin = [[{}]]\n", d % cores);
            }
        }
        for d in 0..domains {
            let list = vec![format!("\"d{d}\""); ranks].join(", ");
            text += &format!(
                "[[jobs]]\nname = \"j{d}\"\nworkload = \"{workload}\"\nranks = [{list}]\n"
            );
        }
        Scenario::from_toml(&text, "t.toml").unwrap()
    }

    fn part(f: &Footprint, what: &str) -> u64 {
        f.parts
            .iter()
            .find(|p| p.what == what)
            .map_or(0, |p| p.bytes)
    }

    #[test]
    fn parts_are_named_largest_first_and_add_up() {
        let f = estimate(&scenario(64, 4, 8, false, 2, "exchange"), Trace::Off);
        assert!(f.parts.windows(2).all(|w| w[0].bytes >= w[1].bytes));
        assert_eq!(f.total(), f.parts.iter().map(|p| p.bytes).sum::<u64>());
        assert!(f.parts.iter().all(|p| p.bytes > 0));
        assert!(f.parts.iter().any(|p| p.what == "allocator slack"));
        // A small scenario needs little.
        assert!(f.total() < 1 << 20, "{f:?}");
    }

    #[test]
    fn unpinned_vcpus_of_a_large_host_are_dominated_by_affinity() {
        // The hostile scenario, halved to pass validation: a million
        // vCPUs that may each run on 4096 cores.
        let big = scenario(4096, 1000, 1024, false, 2, "exchange");
        let start = std::time::Instant::now();
        let f = estimate(&big, Trace::Off);
        assert!(
            start.elapsed().as_secs_f64() < 2.0,
            "estimating must be quick"
        );
        assert_eq!(f.parts[0].what, "vCPU affinity lists");
        // 1024000 vCPUs x 4096 cores x 8 bytes, held by the engine and Credit.
        let exact = 1_024_000u64 * 2 * (4096 * 8 + 16);
        assert_eq!(part(&f, "vCPU affinity lists"), exact);
        assert!(f.total() > 64 << 30);
        // Pinned to one core each, the same vCPUs need a small fraction.
        let pinned = estimate(&scenario(4096, 1000, 1024, true, 2, "exchange"), Trace::Off);
        assert!(pinned.total() * 20 < f.total(), "{pinned:?}");
    }

    #[test]
    fn sedf_keeps_no_copy_of_the_affinity() {
        let mut sc = scenario(256, 2, 4, false, 2, "exchange");
        let credit = part(&estimate(&sc, Trace::Off), "vCPU affinity lists");
        sc.hypervisor.scheduler = "sedf".into();
        assert_eq!(
            part(&estimate(&sc, Trace::Off), "vCPU affinity lists") * 2,
            credit
        );
    }

    #[test]
    fn an_all_to_all_costs_the_square_of_its_ranks() {
        let is = |ranks| {
            let sc = scenario(8, 1, 8, false, ranks, "npb.is");
            part(&estimate(&sc, Trace::Off), "rank programs and collectives")
        };
        let (small, big) = (is(256), is(1024));
        assert!(big > 12 * small, "{small} -> {big}");
        // ... where pairwise exchanges cost a constant per rank.
        let ex = |ranks| {
            let sc = scenario(8, 1, 8, false, ranks, "exchange");
            part(&estimate(&sc, Trace::Off), "rank programs and collectives")
        };
        assert_eq!(ex(1024), 4 * ex(256));
    }

    #[test]
    fn a_streamed_trace_costs_a_buffer_and_a_kept_one_its_limit() {
        let sc = scenario(64, 4, 8, false, 2, "exchange");
        let off = estimate(&sc, Trace::Off).total();
        let file = estimate(&sc, Trace::File).total();
        let memory = estimate(&sc, Trace::Memory).total();
        assert!(
            file > off && file - off < 2 * BUFFER_BYTES as u64,
            "{off} {file}"
        );
        assert!(memory - off > TRACE_LIMIT as u64 * TRACE_EVENT);
    }

    #[test]
    fn the_estimate_grows_with_every_dimension() {
        let base = estimate(&scenario(64, 4, 8, false, 2, "exchange"), Trace::Off).total();
        for bigger in [
            scenario(128, 4, 8, false, 2, "exchange"),
            scenario(64, 8, 8, false, 2, "exchange"),
            scenario(64, 4, 16, false, 2, "exchange"),
            scenario(64, 4, 8, false, 4, "exchange"),
        ] {
            assert!(estimate(&bigger, Trace::Off).total() > base);
        }
    }
}
