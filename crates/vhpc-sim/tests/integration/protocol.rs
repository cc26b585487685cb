//! The eager protocol's local-send limit (`mpi.local_send_limit`): an eager
//! send above it completes only when the receiver has matched and copied the
//! message and the sender has handled the receiver's fin (Open MPI's ob1 over
//! vader above 256 B). Analytic oracles with two ranks sharing one core, and
//! the field's validation.
//!
//! Setting: one domain with two vCPUs pinned to core 0 under round robin (a
//! 30 ms quantum the runs never reach), `hv_yield`: a waiting rank polls one
//! window W = poll_ns × polls_before_yield, then hands the core to its peer,
//! which pays a vCPU switch `sw`. Every hand-over is a yield, so the number of
//! hand-overs per message is read off the yields. Costs per message of B
//! bytes: `send` and `recv` (the copies), `f` = the shm channel's `recv_ns`
//! (the sender handling a fin). Closed forms, N iterations:
//!
//! | workload, messages | time | yields |
//! |---|---|---|
//! | exchange, local sends | 2N (send + recv) + N W + (N + 2) sw | N |
//! | exchange, above the limit | 2N (send + recv + f) + 2N W + (2N + 2) sw | 2N |
//! | ping-pong, local sends | 2N (send + recv) + (2N − 1) W + (2N + 1) sw | 2N − 1 |
//! | ping-pong, above the limit | 2N (send + recv + f) + 2N W + (2N + 2) sw | 2N |
//!
//! Exchange (both ranks MPI_Sendrecv at once), local sends: turn 1 rank 0
//! sends and waits; from turn 2 on, each turn the running rank receives the
//! peer's last two messages, completes two exchanges and sends twice (turn 2:
//! one receive); the last two turns only receive. N + 2 turns, each after a
//! switch (the first one the core's initial dispatch), N of them end in a
//! window and a yield: one hand-over per exchange.
//!
//! Exchange above the limit: a rank cannot start exchange k + 1 before the
//! peer has returned the fin of its message k, which the peer does in its next
//! turn; so each turn completes one exchange of the running rank: it handles
//! the fin of its previous message, receives the peer's (and sends its fin
//! back), sends its next message and waits. 2N + 2 turns, 2N windows: two
//! hand-overs per exchange, which is what Open MPI's b_eff shows from 512 B up
//! on one core (docs/validation.md).
//!
//! Ping-pong above the limit: the fin rides on the hand-over the reply needs
//! anyway; only the last message's fin costs one more turn (2N + 2 turns
//! instead of 2N + 1) and every message the fin's handling.

use vhpc_sim::metrics::Report;
use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run};

const N: u64 = 100;
const LIMIT: u64 = 256;

fn scenario(workload: &str, bytes: u64, iterations: u64, limit: Option<u64>) -> String {
    let params = match workload {
        "exchange" => format!("{{ iterations = {iterations}, bytes = {bytes}, compute_us = 0 }}"),
        _ => format!("{{ iterations = {iterations}, bytes = {bytes} }}"),
    };
    let limit = limit.map_or(String::new(), |l| format!("local_send_limit = {l}"));
    format!(
        r#"
name = "protocol-{workload}-{bytes}"
[host]
cores = 1
[hypervisor]
scheduler = "round_robin"
tslice_us = 30000
[mpi]
{limit}

[[domains]]
name = "d"
vcpus = 2
pin = [[0]]

[[jobs]]
name = "j"
workload = "{workload}"
ranks = ["d", "d"]
wait_policy = "hv_yield"
params = {params}
"#
    )
}

struct Costs {
    send: u64,
    recv: u64,
    fin: u64,
    window: u64,
    switch: u64,
    tslice: u64,
}

fn costs(text: &str, bytes: u64) -> Costs {
    let sc = Scenario::from_toml(text, "protocol").unwrap_or_else(|e| panic!("{e}"));
    let ch = &sc.mpi.shm;
    let window = sc.mpi.poll_ns * sc.mpi.polls_before_yield;
    assert!(
        window >= ch.latency_ns,
        "derivation assumes a message (and a fin) lands within one poll window"
    );
    Costs {
        send: ch.send_ns + ch.send_ns_per_kib * bytes / 1024,
        recv: ch.recv_ns + ch.recv_ns_per_kib * bytes / 1024,
        fin: ch.recv_ns,
        window,
        switch: sc.hypervisor.vcpu_switch_ns,
        tslice: sc.hypervisor.tslice_us * 1000,
    }
}

/// (completion of the job, hypervisor yields of its ranks)
fn outcome(label: &str, text: &str) -> (u64, u64) {
    let out = run(text, label, None, true);
    assert_invariants(label, text, &out);
    let r: &Report = &out.report;
    let t = r.jobs[0]
        .completion_ns
        .unwrap_or_else(|| panic!("{label}: the job did not finish"));
    (t, r.ranks.iter().map(|k| k.hv_yields).sum())
}

fn check(label: &str, text: &str, bytes: u64, exact: impl Fn(&Costs) -> u64, yields: u64) {
    let c = costs(text, bytes);
    let expected = exact(&c);
    assert!(
        expected < c.tslice,
        "derivation assumes no quantum ends during the run"
    );
    let (t, y) = outcome(label, text);
    assert_eq!(
        t, expected,
        "{label}: completion time against the closed form"
    );
    assert_eq!(y, yields, "{label}: hand-overs (hypervisor yields)");
}

#[test]
fn exchange_with_local_sends_costs_one_hand_over_per_exchange() {
    for (bytes, limit) in [(LIMIT, Some(LIMIT)), (512, None)] {
        let text = scenario("exchange", bytes, N, limit);
        check(
            &format!("exchange {bytes} B, limit {limit:?}"),
            &text,
            bytes,
            |c| 2 * N * (c.send + c.recv) + N * c.window + (N + 2) * c.switch,
            N,
        );
    }
}

#[test]
fn exchange_above_the_local_send_limit_costs_two_hand_overs_per_exchange() {
    for bytes in [LIMIT + 1, 512, 4096] {
        let text = scenario("exchange", bytes, N, Some(LIMIT));
        check(
            &format!("exchange {bytes} B above {LIMIT}"),
            &text,
            bytes,
            |c| 2 * N * (c.send + c.recv + c.fin) + 2 * N * c.window + (2 * N + 2) * c.switch,
            2 * N,
        );
    }
}

#[test]
fn ping_pong_above_the_local_send_limit_costs_one_more_turn_only() {
    let local = scenario("pingpong", 512, N, None);
    check(
        "ping-pong 512 B, local",
        &local,
        512,
        |c| 2 * N * (c.send + c.recv) + (2 * N - 1) * c.window + (2 * N + 1) * c.switch,
        2 * N - 1,
    );
    let sync = scenario("pingpong", 512, N, Some(LIMIT));
    check(
        "ping-pong 512 B above 256",
        &sync,
        512,
        |c| 2 * N * (c.send + c.recv + c.fin) + 2 * N * c.window + (2 * N + 2) * c.switch,
        2 * N,
    );
}

#[test]
fn local_send_limit_equal_to_the_eager_limit_changes_nothing() {
    // The default (absent) and an explicit limit equal to the eager limit
    // give the same run, byte for byte, for messages on both sides of it.
    for bytes in [512, 65_536, 100_000] {
        let plain = scenario("exchange", bytes, 20, None);
        let explicit = scenario("exchange", bytes, 20, Some(65_536));
        let a = run(&plain, "plain", None, false).report;
        let b = run(&explicit, "explicit", None, false).report;
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "{bytes} B");
    }
}

#[test]
fn local_send_limit_above_the_eager_limit_is_an_error_naming_the_field() {
    let text = scenario("exchange", 8, 1, Some(65_537));
    let err = Scenario::from_toml(&text, "bad.toml").expect_err("must be rejected");
    assert_eq!(err.field, "mpi.local_send_limit", "{err}");
    assert!(
        err.to_string().contains("mpi.eager_limit (65536 bytes)"),
        "{err}"
    );
    let text = text.replace("[mpi]", "[mpi]\neager_limit = 100000");
    Scenario::from_toml(&text, "ok.toml").unwrap_or_else(|e| panic!("{e}"));
}
