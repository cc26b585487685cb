//! Analytic oracles: small scenarios whose outcome follows in closed form
//! from the model's rules and the scenario's costs. The costs are read back
//! from the parsed scenario (defaults included), so recalibrating a default
//! does not break the derivations; changing the rules does.

use vhpc_sim::metrics::Report;
use vhpc_sim::scenario::Channel;
use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run};

fn parse(text: &str, origin: &str) -> Scenario {
    Scenario::from_toml(text, origin).unwrap_or_else(|e| panic!("{e}"))
}

/// CPU cost of sending and of receiving one eager message of `bytes`.
fn copy_costs(ch: &Channel, bytes: u64) -> (u64, u64) {
    (
        ch.send_ns + ch.send_ns_per_kib * bytes / 1024,
        ch.recv_ns + ch.recv_ns_per_kib * bytes / 1024,
    )
}

fn completion(report: &Report, job: &str) -> u64 {
    let j = report
        .jobs
        .iter()
        .find(|j| j.name == job)
        .expect("job exists");
    j.completion_ns
        .unwrap_or_else(|| panic!("job {job} did not finish: {report:?}"))
}

fn assert_close(what: &str, actual: u64, expected: u64, rel_tol: f64) {
    let err = (actual as f64 - expected as f64).abs() / expected as f64;
    assert!(
        err <= rel_tol,
        "{what}: got {actual} ns, expected {expected} ns (relative error {err:.2e} > {rel_tol})"
    );
}

// ---- fair shares ----------------------------------------------------------

/// Two single-vCPU domains pinned to one core, each running a compute-only
/// job (one-rank NPB EP, no jitter; EP of class S is half the work of W).
fn fair_share_scenario(scheduler: &str) -> String {
    format!(
        r#"
name = "fair-{scheduler}"
[host]
cores = 1
[hypervisor]
scheduler = "{scheduler}"
tslice_us = 30000

[[domains]]
name = "a"
pin = [[0]]

[[domains]]
name = "b"
pin = [[0]]

[[jobs]]
name = "short"
workload = "npb.ep"
ranks = ["a"]
params = {{ class = "S", jitter_ppm = 0 }}

[[jobs]]
name = "long"
workload = "npb.ep"
ranks = ["b"]
params = {{ class = "W", jitter_ppm = 0 }}
"#
    )
}

fn check_fair_shares(scheduler: &str) {
    let text = fair_share_scenario(scheduler);
    let slice = parse(&text, scheduler).hypervisor.tslice_us * 1000;
    let out = run(&text, scheduler, None, true);
    assert_invariants(scheduler, &text, &out);
    let r = &out.report;
    assert!(r.finished);
    let core = &r.cores[0];
    assert_eq!(core.busy_ns + core.idle_ns, r.end_ns);
    assert_eq!(
        core.idle_ns, 0,
        "{scheduler}: two always-busy vCPUs leave the core no idle time"
    );

    // Both are busy until the short job ends; from then on b runs alone.
    let both_busy = completion(r, "short");
    assert_eq!(completion(r, "long"), r.end_ns);
    let run_a = r.vcpus.iter().find(|v| v.domain == "a").expect("a").run_ns;
    let run_b = r.vcpus.iter().find(|v| v.domain == "b").expect("b").run_ns;
    let run_b_while_both = run_b - (r.end_ns - both_busy);
    assert_eq!(run_a + run_b_while_both, both_busy);
    for (name, ran) in [("a", run_a), ("b", run_b_while_both)] {
        let off = ran.abs_diff(both_busy / 2);
        assert!(off <= slice, "{scheduler}: vCPU {name} ran {ran} ns of {both_busy}, {off} ns from a fair half (> one slice)");
    }

    // Not only at the end: at every slice boundary while both are busy, each
    // vCPU's cumulative run time stays within one slice of half the elapsed time.
    let events = out.trace.as_ref().expect("trace")["traceEvents"]
        .as_array()
        .expect("events")
        .clone();
    let mut slices: Vec<(u64, u64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let ns = |k: &str| (e[k].as_f64().expect("number") * 1e3).round() as u64;
            (
                ns("ts"),
                ns("dur"),
                e["name"].as_str().expect("name").to_string(),
            )
        })
        .collect();
    slices.sort();
    let (mut ran_a, mut ran_b) = (0u64, 0u64);
    for (start, dur, name) in slices {
        let end = start + dur;
        if end > both_busy {
            break;
        }
        match name.as_str() {
            "a.v0" => ran_a += dur,
            "b.v0" => ran_b += dur,
            other => panic!("unexpected vCPU {other}"),
        }
        for (v, ran) in [("a", ran_a), ("b", ran_b)] {
            assert!(
                ran.abs_diff(end / 2) <= slice,
                "{scheduler}: at {end} ns vCPU {v} had run {ran} ns, more than a slice off half"
            );
        }
    }
}

#[test]
fn fair_shares_round_robin() {
    check_fair_shares("round_robin");
}

#[test]
fn fair_shares_credit() {
    check_fair_shares("credit");
}

// ---- ping-pong round trips --------------------------------------------------

/// A ping-pong between the two vCPUs of one domain, both pinned to core 0.
fn pingpong_scenario(scheduler: &str, policy: &str, iterations: u64) -> String {
    format!(
        r#"
name = "pingpong-{scheduler}-{policy}"
[host]
cores = 1
[hypervisor]
scheduler = "{scheduler}"
tslice_us = 30000

[[domains]]
name = "d"
vcpus = 2
pin = [[0]]

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["d", "d"]
wait_policy = "{policy}"
params = {{ iterations = {iterations}, bytes = 8 }}
"#
    )
}

const ITERATIONS: u64 = 100;

/// busy_poll, round robin with quantum Q: a waiting rank spins until its
/// quantum ends, so message k is sent in quantum k and every one-way message
/// costs one quantum. Exactly: the last (2N-th) message leaves in quantum 2N
/// (switch + receive + send), then the first vCPU takes the core (switch +
/// receive), so the job takes (2N - 1) Q + 2 switch + 2 recv + send.
#[test]
fn busy_poll_round_trip_round_robin_costs_a_quantum_per_message() {
    let n = ITERATIONS;
    let text = pingpong_scenario("round_robin", "busy_poll", n);
    let sc = parse(&text, "rr-busy");
    let q = sc.hypervisor.tslice_us * 1000;
    let sw = sc.hypervisor.vcpu_switch_ns;
    let (send, recv) = copy_costs(&sc.mpi.shm, 8);
    let out = run(&text, "rr-busy", None, true);
    assert_invariants("rr-busy", &text, &out);
    let t = completion(&out.report, "pp");
    let exact = (2 * n - 1) * q + 2 * sw + 2 * recv + send;
    assert_close("round_robin busy_poll ping-pong vs derived", t, exact, 0.01);
    assert_close(
        "round_robin busy_poll ping-pong vs 2 N Q",
        t,
        2 * n * q,
        0.01,
    );
    let r = &out.report;
    assert_eq!(
        r.cores[0].vcpu_switches,
        2 * n + 1,
        "one vCPU switch per quantum"
    );
    assert!(r
        .ranks
        .iter()
        .all(|k| k.hv_yields == 0 && k.guest_yields == 0));
}

/// busy_poll under credit with its 30 ms slice: every one-way message costs
/// whole slices. Credit's priorities lag its debits (UNDER/OVER change only at
/// the 30 ms accounting, which falls on the slice ends here), so after the
/// first three slices each vCPU runs two slices in a row and a message costs
/// two slices: message k >= 3 leaves in slice 2k - 3, the last one (2N) in
/// slice 4N - 3, and the job takes (4N - 4) Q + 2 switch + 2 recv + send.
#[test]
fn busy_poll_round_trip_credit_costs_whole_slices() {
    let n = ITERATIONS;
    let text = pingpong_scenario("credit", "busy_poll", n);
    let sc = parse(&text, "credit-busy");
    let q = sc.hypervisor.tslice_us * 1000;
    let sw = sc.hypervisor.vcpu_switch_ns;
    let (send, recv) = copy_costs(&sc.mpi.shm, 8);
    let out = run(&text, "credit-busy", None, true);
    assert_invariants("credit-busy", &text, &out);
    let t = completion(&out.report, "pp");
    let tail = 2 * sw + 2 * recv + send;
    assert_eq!(
        (t - tail) % q,
        0,
        "credit busy_poll: {t} ns is not a whole number of slices plus the final copies"
    );
    let slices = (t - tail) / q;
    assert!(
        (2 * n - 1..=4 * n).contains(&slices),
        "{slices} slices for {} messages",
        2 * n
    );
    assert_close(
        "credit busy_poll ping-pong vs derived",
        t,
        (4 * n - 4) * q + tail,
        0.01,
    );
}

/// What one would expect from "each message waits for the polling vCPU's
/// 30 ms slice to end" (scenarios/s0-beff-intra-vm-credit-pin.toml): one
/// slice per one-way message under credit, as under round robin. The model
/// gives two (see the test above).
#[test]
#[ignore = "model question: under credit a busy-poll one-way message costs 2 slices (60 ms), not 1 (credit priority lag)"]
fn busy_poll_round_trip_credit_costs_one_slice_per_message() {
    let n = ITERATIONS;
    let text = pingpong_scenario("credit", "busy_poll", n);
    let q = parse(&text, "credit-busy").hypervisor.tslice_us * 1000;
    let t = completion(&run(&text, "credit-busy", None, false).report, "pp");
    assert_close("credit busy_poll ping-pong vs 2 N Q", t, 2 * n * q, 0.01);
}

/// hv_yield: a waiting rank polls one window W = poll_ns × polls_before_yield,
/// then yields the core to its peer, which pays a vCPU switch, receives,
/// sends, and waits in turn. Exactly: (2N + 1) switches, 2N sends, 2N
/// receives and (2N - 1) poll windows (the last two turns end the ranks).
fn check_hv_yield(scheduler: &str) {
    let n = ITERATIONS;
    let label = format!("{scheduler}-hv_yield");
    let text = pingpong_scenario(scheduler, "hv_yield", n);
    let sc = parse(&text, &label);
    let window = sc.mpi.poll_ns * sc.mpi.polls_before_yield;
    let sw = sc.hypervisor.vcpu_switch_ns;
    let (send, recv) = copy_costs(&sc.mpi.shm, 8);
    assert!(
        window >= sc.mpi.shm.latency_ns,
        "derivation assumes a message lands within one poll window"
    );
    let exact = (2 * n + 1) * sw + 2 * n * (send + recv) + (2 * n - 1) * window;
    // Under credit the run must end before the first 10 ms tick takes BOOST
    // away from one vCPU only (a BOOST vCPU's yield would come back to it).
    assert!(
        exact < sc.hypervisor.tick_us * 1000,
        "derivation assumes no credit tick during the run"
    );

    let out = run(&text, &label, None, true);
    assert_invariants(&label, &text, &out);
    let t = completion(&out.report, "pp");
    assert_close(&format!("{label} ping-pong vs derived"), t, exact, 0.01);
    let hv_yields: u64 = out.report.ranks.iter().map(|r| r.hv_yields).sum();
    assert_eq!(
        hv_yields,
        2 * n - 1,
        "{label}: one hypervisor yield per poll window"
    );

    let busy = completion(
        &run(
            &pingpong_scenario(scheduler, "busy_poll", n),
            &label,
            None,
            false,
        )
        .report,
        "pp",
    );
    assert!(
        busy >= 100 * t,
        "{label}: hv_yield ({t} ns) should be at least 100x faster than busy_poll ({busy} ns)"
    );
}

#[test]
fn hv_yield_round_trip_round_robin_costs_a_poll_window_per_message() {
    check_hv_yield("round_robin");
}

#[test]
fn hv_yield_round_trip_credit_costs_a_poll_window_per_message() {
    check_hv_yield("credit");
}

/// native_up (S0's reference): both ranks on the one vCPU of a native
/// domain. A waiting rank polls one window, then sched_yield hands the CPU to
/// its peer, which pays a guest context switch, receives and sends. No vCPU
/// switch cost (native). Exactly: 2N guest switches, 2N sends and receives,
/// (2N - 1) windows -- as long as the run stays inside one guest slice.
#[test]
fn native_up_message_costs_a_poll_window_and_a_guest_switch() {
    let n = 50;
    let text = format!(
        r#"
name = "native-up-pingpong"
[host]
cores = 1
[hypervisor]
scheduler = "round_robin"
[[domains]]
name = "native"
native = true
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["native", "native"]
wait_policy = "busy_poll"
params = {{ iterations = {n}, bytes = 8 }}
"#
    );
    let sc = parse(&text, "native-up");
    let window = sc.mpi.poll_ns * sc.mpi.polls_before_yield;
    let gs = sc.guest.switch_ns;
    let (send, recv) = copy_costs(&sc.mpi.native, 8);
    assert!(window >= sc.mpi.native.latency_ns);
    let exact = 2 * n * (gs + send + recv) + (2 * n - 1) * window;
    assert!(
        exact < sc.guest.slice_us * 1000,
        "derivation assumes no guest slice ends during the run"
    );

    let out = run(&text, "native-up", None, true);
    assert_invariants("native-up", &text, &out);
    let r = &out.report;
    let t = completion(r, "pp");
    assert_close("native_up ping-pong vs derived", t, exact, 0.01);
    let per_message = t as f64 / (2 * n) as f64;
    let expected = (window + gs + send + recv) as f64;
    assert!(
        (per_message - expected).abs() / expected < 0.01,
        "a message costs {per_message} ns, expected about {expected}"
    );
    let yields: u64 = r.ranks.iter().map(|k| k.guest_yields).sum();
    let switches: u64 = r.ranks.iter().map(|k| k.context_switches).sum();
    assert_eq!(yields, 2 * n - 1, "one sched_yield per poll window");
    assert_eq!(
        switches,
        2 * n,
        "one guest switch per hand-over, plus the last rank's exit"
    );
    assert_eq!(r.cores[0].vcpu_switches, 1);
    assert!(r.ranks.iter().all(|k| k.hv_yields == 0));
}
