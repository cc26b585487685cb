//! Point-to-point microbenchmarks between rank pairs (rank 2i with 2i+1).

use super::{even_ranks, int_param, known_params, Shape, Step, WorkloadInfo};

pub const PINGPONG: WorkloadInfo = WorkloadInfo {
    name: "pingpong",
    description: "ping-pong between rank pairs: `iterations` round trips of `bytes`",
    check: check_pingpong,
    build: build_pingpong,
    endless: false,
};

pub const EXCHANGE: WorkloadInfo = WorkloadInfo {
    name: "exchange",
    description: "rank pairs iterate: `compute_us` of work, then exchange `bytes` with the partner",
    check: check_exchange,
    build: build_exchange,
    endless: false,
};

fn check_pingpong(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(p, &["bytes", "iterations"])?;
    int_param(p, "bytes", 8, 0, 1 << 30)?;
    int_param(p, "iterations", 1000, 1, u64::MAX)?;
    even_ranks(ranks)
}

fn build_pingpong(p: &toml::Table, s: Shape) -> Vec<Step> {
    let bytes = int_param(p, "bytes", 8, 0, 1 << 30).expect("checked");
    let iterations = int_param(p, "iterations", 1000, 1, u64::MAX).expect("checked");
    let peer = s.rank ^ 1;
    let (first, second) = if s.rank % 2 == 0 {
        (Step::Send { peer, bytes }, Step::Recv { peer, bytes })
    } else {
        (Step::Recv { peer, bytes }, Step::Send { peer, bytes })
    };
    vec![
        Step::Loop {
            count: iterations,
            len: 2,
        },
        first,
        second,
    ]
}

fn check_exchange(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(
        p,
        &[
            "bytes",
            "iterations",
            "compute_us",
            "jitter_ppm",
            "mem_intensity_ppm",
            "footprint_mib",
        ],
    )?;
    int_param(p, "mem_intensity_ppm", 0, 0, 1_000_000)?;
    int_param(p, "footprint_mib", 64, 1, 1 << 20)?;
    int_param(p, "bytes", 64, 0, 1 << 30)?;
    int_param(p, "iterations", u64::MAX, 1, u64::MAX)?;
    int_param(p, "compute_us", 1000, 0, 1 << 40)?;
    int_param(p, "jitter_ppm", 0, 0, 1_000_000)?;
    even_ranks(ranks)
}

fn build_exchange(p: &toml::Table, s: Shape) -> Vec<Step> {
    let bytes = int_param(p, "bytes", 64, 0, 1 << 30).expect("checked");
    let iterations = int_param(p, "iterations", u64::MAX, 1, u64::MAX).expect("checked");
    let ns = int_param(p, "compute_us", 1000, 0, 1 << 40).expect("checked") * 1000;
    let jitter_ppm = int_param(p, "jitter_ppm", 0, 0, 1_000_000).expect("checked") as u32;
    // With `mem_intensity_ppm` the compute is memory-aware (the memory
    // model's benchmark row); without it, exactly the plain step.
    let mem_ppm = int_param(p, "mem_intensity_ppm", 0, 0, 1_000_000).expect("checked") as u32;
    let compute = if mem_ppm == 0 {
        Step::Compute { ns, jitter_ppm }
    } else {
        Step::MemCompute {
            ns,
            jitter_ppm,
            mem_ppm,
        }
    };
    vec![
        Step::Loop {
            count: iterations,
            len: 2,
        },
        compute,
        Step::Sendrecv {
            peer: s.rank ^ 1,
            bytes,
        },
    ]
}
