//! The memory model's closed forms (docs/sim.md, "NUMA memory"): local,
//! uncontended memory costs nothing; a fully remote, memory-bound phase
//! slows by exactly the distance ratio; k ranks streaming from one node
//! share its bandwidth; and runs stay deterministic.

use crate::util;
use vhpc_sim::metrics::Report;
use vhpc_sim::{run_toml, Scenario};

/// The shared pinned exchange on a host of `cores_n` cores in two nodes of
/// `bw` MB/s each, with the SLIT `distance`.
fn scenario(
    cores_n: usize,
    distance: &str,
    bw: u64,
    cores: &[usize],
    mem: u32,
    memory: &str,
) -> String {
    let host = format!(
        "cores = {cores_n}\nnuma_nodes = 2\ndistance = {distance}\n\
         [[host.nodes]]\nbandwidth_mb_s = {bw}\n[[host.nodes]]\nbandwidth_mb_s = {bw}"
    );
    util::pinned_exchange(&host, false, cores, mem, memory)
}

fn report(text: &str) -> Report {
    util::report_of(text, "numa.toml")
}

#[test]
fn local_uncontended_memory_costs_nothing() {
    // Two ranks on node 0's two cores: first touch puts their pages there;
    // together they ask exactly node 0's bandwidth.
    let base = scenario(4, "[[10, 20], [20, 10]]", 10_000, &[0, 1], 1_000_000, "");
    let with = format!("{base}\n[memory]\nplacement = \"first_touch\"\n");
    let (off, on) = (report(&base), report(&with));
    assert_eq!(off.jobs[0].completion_ns, on.jobs[0].completion_ns);
    assert_eq!(off.jobs[0].useful_ns, on.jobs[0].useful_ns);
    assert_eq!(on.jobs[0].remote_share, Some(0.0));
    assert_eq!(on.jobs[0].mem_slowdown, Some(0.0));
    assert_eq!(off.jobs[0].mem_slowdown, None);
}

#[test]
fn a_fully_remote_memory_bound_phase_slows_by_the_distance_ratio() {
    // Ranks on node 1 (cores 2, 3); Xen-like preallocation puts the whole
    // guest on node 0 (no dom0: the builder's node is 0): every access is
    // remote at distance 30, a ratio of 3, and node 0 is loaded to 1.
    let base = scenario(4, "[[10, 30], [30, 10]]", 10_000, &[2, 3], 1_000_000, "");
    let with = format!("{base}\n[memory]\nplacement = \"preallocate\"\n");
    let (off, on) = (report(&base), report(&with));
    assert_eq!(on.jobs[0].useful_ns, 3 * off.jobs[0].useful_ns);
    assert_eq!(on.jobs[0].remote_share, Some(1.0));
    assert_eq!(on.jobs[0].mem_slowdown, Some(2.0));
    // Half memory-bound: half of each phase is stretched.
    let base = scenario(4, "[[10, 30], [30, 10]]", 10_000, &[2, 3], 500_000, "");
    let with = format!("{base}\n[memory]\nplacement = \"preallocate\"\n");
    let (off, on) = (report(&base), report(&with));
    assert_eq!(on.jobs[0].useful_ns, 2 * off.jobs[0].useful_ns);
}

#[test]
fn ranks_streaming_from_one_node_share_its_bandwidth() {
    // 8 cores, 4 per node, distance 10 everywhere (latency plays no part);
    // all memory on node 0. Each rank asks its core's fair share (a quarter
    // of a node's bandwidth): k of them load node 0 to k / 4.
    for (k, cores) in [(6usize, vec![0, 1, 2, 4, 5, 6]), (8, (0..8).collect())] {
        let base = scenario(8, "[[10, 10], [10, 10]]", 4_000, &cores, 1_000_000, "");
        let with = format!("{base}\n[memory]\nplacement = \"preallocate\"\n");
        let (off, on) = (report(&base), report(&with));
        let ratio = on.jobs[0].useful_ns as f64 / off.jobs[0].useful_ns as f64;
        let want = k as f64 / 4.0;
        assert!((ratio - want).abs() < 1e-6, "{k} ranks: {ratio} vs {want}");
    }
}

#[test]
fn a_numa_run_is_deterministic_and_follows_its_seed() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/numa-opteron-span-xen.toml"),
    )
    .expect("scenario file");
    let run = |seed| {
        let out = run_toml(&text, "numa-opteron-span-xen.toml", Some(seed), false).unwrap();
        serde_json::to_string(&out.report).unwrap()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn warm_vms_run_slower_than_cold_ones_and_xen_like_slower_than_kvm_like() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/numa-opteron-span-xen.toml"),
    )
    .unwrap();
    let sc = Scenario::from_toml(&text, "x").unwrap();
    let mut kvm = sc.clone();
    kvm.hypervisor.scheduler = "linux".into();
    kvm.memory.as_mut().unwrap().placement = "first_touch".into();
    kvm.domains.retain(|d| !d.dom0);
    let mut warm = kvm.clone();
    warm.domains[0].warm = true;
    let time = |s: &Scenario| {
        vhpc_sim::run(s, None, false).report.jobs[0]
            .completion_ns
            .unwrap()
    };
    assert!(time(&warm) > time(&kvm));
    assert!(time(&sc) > time(&warm));
}
