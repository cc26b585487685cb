//! Runs with every channel kind at once are deterministic: the same scenario
//! and seed give the same report bytes, run after run.

use crate::util::run;

const MIXED: &str = r#"
name = "channels-mixed"
[host]
cores = 4
[mpi]
transports = ["sm", "ivshmem", "net"]
[[domains]]
name = "dom0"
dom0 = true
vcpus = 2
[[domains]]
name = "e"
vcpus = 2
nic = "emulated"
[[domains]]
name = "v"
vcpus = 2
nic = "virtio"
ivshmem = "g"
[[domains]]
name = "w"
nic = "virtio"
ivshmem = "g"
[[domains]]
name = "n"
nic = "netfront"
[[domains]]
name = "br"
nic = "bridge"
[[jobs]]
name = "is"
workload = "npb.is"
ranks = ["e", "e", "v", "v", "w", "n", "br", "br"]
wait_policy = "adaptive"
params = { class = "S" }
"#;

#[test]
fn mixed_channels_give_identical_reports() {
    let a = run(MIXED, "mixed", Some(7), false).report;
    let b = run(MIXED, "mixed", Some(7), false).report;
    let ja = serde_json::to_string(&a).unwrap();
    assert_eq!(ja, serde_json::to_string(&b).unwrap());
    assert!(a.jobs[0].completion_ns.is_some(), "the job finishes");
    let c = run(MIXED, "mixed", Some(8), false).report;
    assert!(c.jobs[0].completion_ns.is_some());
}
