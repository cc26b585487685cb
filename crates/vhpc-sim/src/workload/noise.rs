//! A noise VM: an endless loop that uses every slice it is given.

use super::{known_params, Shape, Step, WorkloadInfo};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "noise",
    description: "endless CPU loop (a noise VM); the run ends when the other jobs do",
    check: |p, _| known_params(p, &[]),
    build,
    endless: true,
};

fn build(_: &toml::Table, _: Shape) -> Vec<Step> {
    // One-second chunks: long enough to cost nothing, short enough that the
    // loop never overflows simulated time.
    vec![
        Step::Loop {
            count: u64::MAX,
            len: 1,
        },
        Step::Compute {
            ns: 1_000_000_000,
            jitter_ppm: 0,
        },
    ]
}
