//! Oracles for the `linux` host scheduler: shares by weight, CFS quota
//! throttling, a busy-poll ping-pong that pays a tick-rounded slice per
//! message, and libvhpc_wait's shared mode handing the core over at once.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, busy_domains, run, run_ns};

fn parse(text: &str) -> Scenario {
    Scenario::from_toml(text, "linux").unwrap_or_else(|e| panic!("{e}"))
}

/// Two single-vCPU domains on one core, each with a compute-bound job (NPB
/// EP class A, one rank, no jitter), cut at `limit_ms` while both still run.
fn two_busy_domains(weights: (u32, u32), caps: (u32, u32), limit_ms: u64) -> String {
    busy_domains(
        "linux",
        &[(weights.0, caps.0), (weights.1, caps.1)],
        limit_ms,
    )
}

/// Group weights 512 : 256 (cpu.shares 2048 : 1024) share the core 2 : 1,
/// within one slice of the exact split; equal weights share it evenly.
#[test]
fn always_busy_groups_share_the_core_by_weight() {
    for (wa, wb) in [(256, 256), (512, 256)] {
        let text = two_busy_domains((wa, wb), (0, 0), 2_000);
        let sc = parse(&text);
        let slice = sc.hypervisor.linux.slice_us * 1000 + sc.hypervisor.linux.tick_us * 1000;
        let out = run(&text, "linux-weights", None, true);
        assert_invariants("linux-weights", &text, &out);
        let r = &out.report;
        assert!(!r.finished, "both jobs must still run at the limit");
        let (a, b) = (run_ns(r, "a"), run_ns(r, "b"));
        assert_eq!(r.cores[0].idle_ns, 0);
        let expected_a = r.end_ns * u64::from(wa) / u64::from(wa + wb);
        assert!(
            a.abs_diff(expected_a) <= slice,
            "weights {wa}:{wb}: a ran {a} ns, b {b} ns of {}; expected a ≈ {expected_a}",
            r.end_ns
        );
    }
}

/// A cap of 30 % is a CFS quota of 30 ms per 100 ms period: the capped
/// group runs exactly that (charged across period boundaries), and the other
/// one gets the rest, so the core never idles.
#[test]
fn a_quota_throttles_its_group_to_the_cap() {
    let text = two_busy_domains((256, 256), (30, 0), 1_000);
    let out = run(&text, "linux-quota", None, true);
    assert_invariants("linux-quota", &text, &out);
    let r = &out.report;
    let a = run_ns(r, "a");
    assert_eq!(r.end_ns, 1_000_000_000);
    assert!(
        a.abs_diff(300_000_000) <= 1_000_000,
        "capped at 30 %: ran {a} ns of 1 s"
    );
    assert_eq!(r.cores[0].idle_ns, 0, "the uncapped group takes the rest");

    let alone = run(
        &two_busy_domains((256, 256), (30, 30), 1_000),
        "linux-quota-2",
        None,
        false,
    );
    let idle = alone.report.cores[0].idle_ns;
    assert!(
        idle.abs_diff(400_000_000) <= 2_000_000,
        "two groups capped at 30 % leave 40 % idle, got {idle} ns"
    );
}

/// Two ranks, each its own task on one core: with `spin` a waiting rank
/// keeps the core until its slice ends on a tick, so every one-way message
/// costs one slice (3 ms rounded up to the 4 ms tick); with `adaptive` each
/// rank knows it shares the core (2 ranks, 1 CPU), yields after one poll, and
/// a message costs a switch plus the channel's costs.
#[test]
fn a_spinning_pair_pays_a_tick_slice_and_a_yielding_pair_a_switch() {
    let text = |policy: &str, n: u64| {
        format!(
            r#"
name = "linux-pingpong-{policy}"
[host]
cores = 1
[hypervisor]
scheduler = "linux"
vcpu_switch_ns = 1500
[mpi]
between_domains = "shm"
[[domains]]
name = "r0"
[[domains]]
name = "r1"
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["r0", "r1"]
wait_policy = "{policy}"
params = {{ iterations = {n}, bytes = 8 }}
"#
        )
    };
    let n = 50;
    let spin = run(&text("spin", n), "spin", None, true);
    assert_invariants("linux-spin", &text("spin", n), &spin);
    let per_message = spin.report.jobs[0].completion_ns.expect("finished") / (2 * n);
    let sc = parse(&text("spin", n));
    let tick = sc.hypervisor.linux.tick_us * 1000;
    assert!(
        per_message.abs_diff(tick) <= tick / 100,
        "spin: {per_message} ns per message, expected one {tick} ns tick slice"
    );

    let adaptive = run(&text("adaptive", n), "adaptive", None, true);
    assert_invariants("linux-adaptive", &text("adaptive", n), &adaptive);
    let per_message = adaptive.report.jobs[0].completion_ns.expect("finished") / (2 * n);
    let ch = &sc.mpi.shm;
    let floor = sc.hypervisor.vcpu_switch_ns + ch.send_ns + ch.recv_ns;
    let ceiling = floor + ch.latency_ns + 4 * sc.mpi.poll_ns;
    assert!(
        (floor..=ceiling).contains(&per_message),
        "adaptive: {per_message} ns per message, expected a switch plus copies ({floor}..{ceiling})"
    );
}
