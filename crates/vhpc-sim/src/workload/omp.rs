//! OpenMP-style NPB kernels: the threads of one job live in one domain and
//! share the job's arrays, synchronising by barriers through shared memory
//! (the dissemination barrier over the domain's `shm` channel). A thread
//! does the same work per iteration as an MPI rank of the same count, but
//! moves no messages: the data it would receive it reads from the other
//! threads' parts of the arrays (`shared_ppm` of its accesses, see
//! [`Kernel::shared_ppm`]). `init = "master"` makes the master thread touch
//! all data first (a serial initialisation); the default, `"threads"`, has
//! each thread touch its own part, as NPB 3.3's OpenMP codes initialise in
//! parallel loops. The scenario checks require every thread in one domain.

use super::npb_memory::{common, is_log2_keys, Kernel};
use super::{cg, ft, mg, npb, Shape, Step, WorkloadInfo};

pub const CG: WorkloadInfo = WorkloadInfo {
    name: "npb.omp.cg",
    description: "NPB CG, OpenMP-style threads in one domain sharing the matrix and vectors; \
                  barriers where MPI reduces",
    check: |p, n| cg::check(p, n, true),
    build: |p, s| cg::build(p, s, true),
    endless: false,
};

pub const MG: WorkloadInfo = WorkloadInfo {
    name: "npb.omp.mg",
    description: "NPB MG, OpenMP-style threads in one domain sharing the grids; a barrier after \
                  every level visit",
    check: |p, n| mg::check(p, n, true),
    build: |p, s| mg::build(p, s, true),
    endless: false,
};

pub const FT: WorkloadInfo = WorkloadInfo {
    name: "npb.omp.ft",
    description: "NPB FT, OpenMP-style threads in one domain sharing the 3-D arrays; a barrier \
                  where MPI transposes",
    check: |p, n| ft::check(p, n, true),
    build: |p, s| ft::build(p, s, true),
    endless: false,
};

pub const IS: WorkloadInfo = WorkloadInfo {
    name: "npb.omp.is",
    description: "NPB IS, OpenMP-style threads in one domain: count keys, barrier, rank them \
                  against the shared buckets, barrier",
    check: |p, _| common(p, Kernel::Is, true).map(|_| ()),
    build: build_is,
    endless: false,
};

pub const EP: WorkloadInfo = WorkloadInfo {
    name: "npb.omp.ep",
    description:
        "NPB EP, OpenMP-style threads in one domain: Gaussian pairs, one barrier at the end",
    check: |p, _| common(p, Kernel::Ep, true).map(|_| ()),
    build: build_ep,
    endless: false,
};

fn build_is(p: &toml::Table, s: Shape) -> Vec<Step> {
    let c = common(p, Kernel::Is, true).expect("checked");
    let keys = (1u64 << is_log2_keys(c.class).expect("checked")) / s.ranks as u64;
    let per_iteration = (keys as f64 * npb::is_ns_per_key()) as u64;
    let mem = |ns| Step::MemCompute {
        ns,
        jitter_ppm: c.jitter_ppm,
        mem_ppm: c.mem_ppm,
    };
    vec![
        Step::Loop {
            count: c.iterations.unwrap_or(10),
            len: 4,
        },
        mem(per_iteration / 2),
        Step::Barrier,
        mem(per_iteration - per_iteration / 2),
        Step::Barrier,
    ]
}

fn build_ep(p: &toml::Table, s: Shape) -> Vec<Step> {
    let c = common(p, Kernel::Ep, true).expect("checked");
    let (log2_pairs, _) = npb::class_size("ep", c.class).expect("checked");
    let pairs = (1u64 << log2_pairs) / s.ranks as u64;
    vec![
        Step::MemCompute {
            ns: pairs * npb::EP_NS_PER_PAIR,
            jitter_ppm: c.jitter_ppm,
            mem_ppm: c.mem_ppm,
        },
        Step::Barrier,
    ]
}
