//! UnixBench's "Pipe-based context switching": pairs of tasks (rank 2i and
//! 2i+1) bounce a token through two pipes; each hop is a write that wakes
//! the partner and a read that blocks. Throughput: round trips per second.
//! Run it with `wait_policy = "block"` (a pipe read sleeps at once; a short
//! `mpi.polls_before_yield` keeps the spin before blocking negligible).

use super::{even_ranks, int_param, known_params, Shape, Step, WorkloadInfo};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "pipe",
    description:
        "UnixBench pipe context switching: rank pairs bounce a token `round_trips` times, \
                  `hop_ns` of syscall work per hop",
    check,
    build,
    endless: false,
};

const KNOWN: &[&str] = &["round_trips", "hop_ns"];

fn check(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(p, KNOWN)?;
    int_param(p, "round_trips", 10_000, 1, u64::MAX)?;
    int_param(p, "hop_ns", 0, 0, 1_000_000_000)?;
    even_ranks(ranks)
}

fn build(p: &toml::Table, s: Shape) -> Vec<Step> {
    let trips = int_param(p, "round_trips", 10_000, 1, u64::MAX).expect("checked");
    let hop = int_param(p, "hop_ns", 0, 0, 1_000_000_000).expect("checked");
    let peer = s.rank ^ 1;
    // A 4-byte token (UnixBench's pipe test writes an int).
    let (send, recv) = (Step::Send { peer, bytes: 4 }, Step::Recv { peer, bytes: 4 });
    let work = Step::Compute {
        ns: hop,
        jitter_ppm: 0,
    };
    let body = if s.rank % 2 == 0 {
        vec![work, send, recv]
    } else {
        vec![recv, work, send]
    };
    let mut steps = vec![Step::Loop {
        count: trips,
        len: body.len() as u32,
    }];
    steps.extend(body);
    steps
}
