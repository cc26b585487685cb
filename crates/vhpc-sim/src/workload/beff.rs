//! b_eff-like ping-pong: round trips between rank pairs over message sizes
//! 2^`min_log2`, ..., 2^`max_log2` bytes (default 1 B to 1 MiB), `reps`
//! round trips each (b_eff's ping-pong pattern with its power-of-two sizes).

use super::{even_ranks, int_param, known_params, Shape, Step, WorkloadInfo};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "beff",
    description:
        "b_eff-like ping-pong over sizes 2^min_log2 .. 2^max_log2 B, `reps` round trips each",
    check,
    build,
    endless: false,
};

fn check(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(p, &["min_log2", "max_log2", "reps"])?;
    let max = int_param(p, "max_log2", 20, 0, 30)?;
    int_param(p, "min_log2", 0, 0, max)?;
    int_param(p, "reps", 10, 1, 1 << 32)?;
    even_ranks(ranks)
}

fn build(p: &toml::Table, s: Shape) -> Vec<Step> {
    let max_log2 = int_param(p, "max_log2", 20, 0, 30).expect("checked");
    let min_log2 = int_param(p, "min_log2", 0, 0, max_log2).expect("checked");
    let reps = int_param(p, "reps", 10, 1, 1 << 32).expect("checked");
    let peer = s.rank ^ 1;
    let mut steps = Vec::new();
    for log2 in min_log2..=max_log2 {
        let bytes = 1u64 << log2;
        let (a, b) = (Step::Send { peer, bytes }, Step::Recv { peer, bytes });
        steps.push(Step::Loop {
            count: reps,
            len: 2,
        });
        if s.rank % 2 == 0 {
            steps.extend([a, b]);
        } else {
            steps.extend([b, a]);
        }
    }
    steps
}
