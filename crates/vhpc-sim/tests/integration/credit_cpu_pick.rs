//! Oracles for Credit's tick-time `_csched_cpu_pick` (`hypervisor.credit_cpu_pick`)
//! through the whole engine: two busy vCPUs that start on one socket of a
//! two-socket host are spread over both at the second tick (one move, then
//! balanced); on one socket, or with the pick off, nothing moves.

use vhpc_sim::metrics::Report;

use crate::util::{assert_invariants, run};

/// A domain of two vCPUs (placed on cores 0 and 1, socket 0) with one
/// compute-bound rank each (NPB EP class S, no jitter), on 4 cores.
fn two_ranks(sockets: usize, pick: bool) -> String {
    format!(
        r#"
name = "cpu-pick"
[host]
cores = 4
sockets = {sockets}
[hypervisor]
scheduler = "credit"
credit_cpu_pick = {pick}

[[domains]]
name = "d"
vcpus = 2

[[jobs]]
name = "ep"
workload = "npb.ep"
ranks = ["d", "d"]
params = {{ class = "S", jitter_ppm = 0 }}
"#
    )
}

fn moves(r: &Report) -> u64 {
    r.vcpus.iter().map(|v| v.migrations).sum()
}

#[test]
fn two_busy_vcpus_on_one_socket_spread_over_both() {
    let text = two_ranks(2, true);
    let out = run(&text, "pick-2s", None, false);
    assert_invariants("pick-2s", &text, &out);
    assert!(
        out.report.end_ns > 20_000_000,
        "the run must outlast two ticks"
    );
    // At 20 ms vCPU 0 (socket 0: itself idle against 2) moves to core 2;
    // vCPU 1's migration pick then ties and keeps it on core 1.
    assert_eq!(moves(&out.report), 1);
}

#[test]
fn nothing_moves_on_one_socket_or_with_the_pick_off() {
    for (sockets, pick) in [(1, true), (2, false)] {
        let r = run(&two_ranks(sockets, pick), "pick-still", None, false).report;
        assert_eq!(moves(&r), 0, "sockets {sockets}, pick {pick}");
    }
    // Off and on one socket, the runs are the same run.
    let a = run(&two_ranks(1, true), "a", None, false).report;
    let b = run(&two_ranks(1, false), "b", None, false).report;
    assert_eq!(a.end_ns, b.end_ns);
}
