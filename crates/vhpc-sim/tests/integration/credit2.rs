//! Oracles for the `credit2` scheduler (Xen 4.10's sched_credit2.c): shares
//! by weight on one core, a waking vCPU with more credit preempting at once,
//! and one runqueue per socket keeping every core busy.

use crate::util::{assert_invariants, busy_domains, run, run_ns};

/// Credit burns at max_weight / weight per ns and every reset hands out the
/// same 10 ms, so over a long run the core splits by weight: 256 : 512 is
/// 1 : 2, equal weights 1 : 1, within one `CSCHED2_MAX_TIMER` (10 ms).
#[test]
fn always_busy_vcpus_share_one_core_by_weight() {
    for (wa, wb) in [(256, 256), (256, 512)] {
        let text = busy_domains("credit2", &[(wa, 0), (wb, 0)], 3_000);
        let out = run(&text, "credit2-weights", None, true);
        assert_invariants("credit2-weights", &text, &out);
        let r = &out.report;
        assert!(!r.finished, "both jobs must still run at the limit");
        assert_eq!(r.cores[0].idle_ns, 0);
        let (a, b) = (run_ns(r, "a"), run_ns(r, "b"));
        let expected_a = r.end_ns * u64::from(wa) / u64::from(wa + wb);
        eprintln!(
            "credit2 weights {wa}:{wb}: shares {:.4} / {:.4}",
            a as f64 / r.end_ns as f64,
            b as f64 / r.end_ns as f64
        );
        assert!(
            a.abs_diff(expected_a) <= 10_000_000,
            "weights {wa}:{wb}: a ran {a} ns, b {b} ns of {}; expected a ≈ {expected_a}",
            r.end_ns
        );
    }
}

/// A ping-pong between two domains that block while they wait, on the core
/// of an always-busy domain: each woken vCPU has burned almost no credit, so
/// it beats the busy one and preempts it at once (`runq_tickle`). A message
/// then costs the channel and a vCPU switch, not a slice of the busy domain.
#[test]
fn a_waking_vcpu_with_more_credit_preempts_at_once() {
    let n = 200;
    let text = format!(
        r#"
name = "credit2-wake"
[host]
cores = 1
[hypervisor]
scheduler = "credit2"
[mpi]
between_domains = "shm"

[[domains]]
name = "busy"
[[domains]]
name = "a"
[[domains]]
name = "b"

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "block"
params = {{ iterations = {n}, bytes = 8 }}
[[jobs]]
name = "busy"
workload = "noise"
ranks = ["busy"]
"#
    );
    let out = run(&text, "credit2-wake", None, true);
    assert_invariants("credit2-wake", &text, &out);
    let r = &out.report;
    let t = r.jobs[0].completion_ns.expect("the ping-pong finishes");
    // The same ping-pong with the core to itself.
    let alone_text = text.replace(
        "[[jobs]]\nname = \"busy\"",
        "[[jobs]]\nname = \"busy\"\nstart_us = 3000000",
    );
    assert_ne!(alone_text, text);
    let alone = run(&alone_text, "credit2-alone", None, false).report.jobs[0]
        .completion_ns
        .expect("the ping-pong finishes");
    let (per, per_alone) = (t / (2 * n), alone / (2 * n));
    eprintln!(
        "credit2 wake-up: {per} ns per one-way message beside a busy vCPU, {per_alone} ns alone"
    );
    // Waiting for the busy vCPU's slice would cost 0.5 to 10 ms a message;
    // preempting it costs about a vCPU switch each way.
    assert!(
        per <= per_alone + 10_000,
        "{per} ns per message beside a busy vCPU, {per_alone} ns alone"
    );
    assert_eq!(r.cores[0].idle_ns, 0, "the busy vCPU takes the rest");
}

/// Two sockets of two cores, four always-busy single-vCPU domains: each
/// socket's runqueue keeps its cores busy and the four share them evenly.
#[test]
fn per_socket_runqueues_keep_every_core_busy() {
    let mut text = String::from(
        r#"
name = "credit2-sockets"
limit_ms = 2000
[host]
cores = 4
sockets = 2
[hypervisor]
scheduler = "credit2"
"#,
    );
    for d in 0..6 {
        text += &format!(
            "[[domains]]\nname = \"d{d}\"\n[[jobs]]\nname = \"j{d}\"\nworkload = \"npb.ep\"\n\
             ranks = [\"d{d}\"]\nparams = {{ class = \"A\", jitter_ppm = 0 }}\n"
        );
    }
    let out = run(&text, "credit2-sockets", None, true);
    assert_invariants("credit2-sockets", &text, &out);
    let r = &out.report;
    for c in &r.cores {
        assert!(
            c.idle_ns < r.end_ns / 100,
            "core {} idle {} ns",
            c.core,
            c.idle_ns
        );
    }
    let fair = 4 * r.end_ns / 6;
    for d in 0..6 {
        let ran = run_ns(r, &format!("d{d}"));
        assert!(
            ran.abs_diff(fair) <= fair / 5,
            "d{d} ran {ran} ns, fair share {fair}"
        );
    }
}
