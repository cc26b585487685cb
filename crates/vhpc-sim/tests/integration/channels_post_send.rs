//! `post_send_ns`: CPU a sender spends after an eager message has left. Two
//! single-vCPU domains on a bridge, cores of their own, `busy_poll`; the
//! bridge table's S = send, R = recv (with their per-KiB parts), λ = latency,
//! X = post_send_ns.
//!
//! - A ping-pong never sees X while X ≤ the reply's way back (λ + R + S + λ):
//!   one way stays S + λ + R.
//! - An exchange (both ranks MPI_Sendrecv at once) pays it: each rank sends (S),
//!   finishes its send (X) and takes the peer's message, there after λ, so an
//!   iteration takes S + max(X, λ) + R.
//!
//! Start-up costs are the same for N and 2N iterations: T(2N) − T(N) is N
//! iterations exactly.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run};

const N: u64 = 40;
const BYTES: u64 = 8;

fn scenario(workload: &str, post_send_ns: u64, iterations: u64) -> String {
    let params = if workload == "exchange" {
        format!("{{ iterations = {iterations}, bytes = {BYTES}, compute_us = 0 }}")
    } else {
        format!("{{ iterations = {iterations}, bytes = {BYTES} }}")
    };
    format!(
        r#"
name = "post-send"
[host]
cores = 2
[hypervisor]
scheduler = "credit"
[mpi.bridge]
latency_ns = 2000
send_ns = 4000
send_ns_per_kib = 300
recv_ns = 4000
recv_ns_per_kib = 300
post_send_ns = {post_send_ns}
[[domains]]
name = "a"
nic = "bridge"
pin = [[0]]
[[domains]]
name = "b"
nic = "bridge"
pin = [[1]]
[[jobs]]
name = "j"
workload = "{workload}"
ranks = ["a", "b"]
wait_policy = "busy_poll"
params = {params}
"#
    )
}

/// T(2N) − T(N) and the parsed scenario.
fn per_n(workload: &str, post_send_ns: u64) -> (u64, Scenario) {
    let mut t = [0; 2];
    let mut sc = None;
    for (i, n) in [N, 2 * N].into_iter().enumerate() {
        let text = scenario(workload, post_send_ns, n);
        let origin = format!("post-send-{workload}-{post_send_ns}-{n}");
        sc = Some(Scenario::from_toml(&text, &origin).unwrap_or_else(|e| panic!("{e}")));
        let out = run(&text, &origin, None, true);
        assert_invariants(&origin, &text, &out);
        t[i] = out.report.jobs[0].completion_ns.expect("finished");
    }
    (t[1] - t[0], sc.expect("ran"))
}

#[test]
fn a_ping_pong_hides_the_post_send_work() {
    let (t, sc) = per_n("pingpong", 3000);
    let ch = &sc.mpi.bridge;
    let send = ch.send_ns + ch.send_ns_per_kib * BYTES / 1024;
    let recv = ch.recv_ns + ch.recv_ns_per_kib * BYTES / 1024;
    assert_eq!(t, 2 * N * (send + ch.latency_ns + recv));
    assert_eq!(per_n("pingpong", 0).0, t);
}

#[test]
fn an_exchange_pays_it() {
    for x in [0, 1000, 3000, 7000] {
        let (t, sc) = per_n("exchange", x);
        let ch = &sc.mpi.bridge;
        let send = ch.send_ns + ch.send_ns_per_kib * BYTES / 1024;
        let recv = ch.recv_ns + ch.recv_ns_per_kib * BYTES / 1024;
        assert_eq!(
            t,
            N * (send + x.max(ch.latency_ns) + recv),
            "post_send_ns = {x}"
        );
    }
}
