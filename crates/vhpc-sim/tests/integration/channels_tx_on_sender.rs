//! `tx_on_sender`: a device-thread NIC whose transmit side runs in the
//! sending vCPU (QEMU's e1000: the write to the transmit tail register exits
//! to QEMU in the vCPU's own thread, which sends the frames there). The
//! ping-pong of `channels_pingpong` (busy_poll, every vCPU and dom0 vCPU on
//! a core of its own) then takes, one way, for a message of B bytes:
//!
//! send(B) + relay(B) on the sender's vCPU, λ to the receiver's device
//! thread, relay(B) there, λ to the receiver, recv(B)
//!
//! one λ fewer than through the sender's device thread (no hand-off to
//! another thread), the same CPU work, but the sender's part on its vCPU.
//! T(2N) − T(N) = 2N · one way exactly.

use vhpc_sim::Scenario;

use crate::channels_pingpong::scenario;
use crate::machines_wire::completion as completion_of;
use crate::util::{field_of, run};

const N: u64 = 40;
/// Several frames and a 64 KiB chunk boundary would not change the closed
/// form: one eager message of 2 KiB.
const BYTES: u64 = 2048;

/// The emulated table of this test (explicit, so the closed form does not
/// depend on the defaults), with or without `tx_on_sender`.
fn table(on_sender: bool) -> String {
    format!(
        "\n[mpi.emulated]\nlatency_ns = 2000\nsend_ns = 10000\nsend_ns_per_kib = 1000\n\
         recv_ns = 10000\nrecv_ns_per_kib = 1000\nrelay_ns = 25000\nrelay_ns_per_kib = 10000\n\
         tx_on_sender = {on_sender}\n"
    )
}

fn completion(on_sender: bool, iterations: u64) -> (u64, Scenario) {
    let text = scenario("emulated", false, iterations, BYTES) + &table(on_sender);
    completion_of(&text, &format!("tx-on-sender-{on_sender}-{iterations}"))
}

fn one_way(sc: &Scenario, on_sender: bool) -> u64 {
    let ch = &sc.mpi.emulated;
    let ends = ch.send_ns
        + ch.send_ns_per_kib * BYTES / 1024
        + ch.recv_ns
        + ch.recv_ns_per_kib * BYTES / 1024;
    let hops = if on_sender { 2 } else { 3 };
    ends + 2 * ch.relay_cost(BYTES) + hops * ch.latency_ns
}

fn check(on_sender: bool) {
    let (t1, sc) = completion(on_sender, N);
    let (t2, _) = completion(on_sender, 2 * N);
    assert_eq!(sc.mpi.emulated.tx_on_sender, on_sender);
    let expected = 2 * N * one_way(&sc, on_sender);
    assert_eq!(
        t2 - t1,
        expected,
        "tx_on_sender = {on_sender}: {N} more round trips took {} ns, the closed form says \
         {expected}",
        t2 - t1
    );
}

#[test]
fn transmit_in_the_sending_vcpu_skips_one_hand_off() {
    check(true);
}

#[test]
fn without_it_both_device_threads_relay_as_before() {
    check(false);
}

/// The sender's relay work lands on the sending rank's vCPU: the ranks'
/// overhead grows by one relay per message sent (N pings and N pongs).
#[test]
fn the_sender_pays_its_transmit_side() {
    let text = |on: bool| scenario("emulated", false, N, BYTES) + &table(on);
    let overhead = |on: bool| {
        let out = run(&text(on), "tx-overhead", None, false);
        out.report.ranks.iter().map(|r| r.overhead_ns).sum::<u64>()
    };
    let sc = Scenario::from_toml(&text(true), "t").unwrap();
    // Each rank sends N messages (pings or pongs): 2N relays in all.
    assert_eq!(
        overhead(true) - overhead(false),
        2 * N * sc.mpi.emulated.relay_cost(BYTES)
    );
}

#[test]
fn only_device_thread_nics_take_it() {
    let text = scenario("bridge", false, 1, 8)
        + "\n[mpi.bridge]\nlatency_ns = 1\nsend_ns = 1\nsend_ns_per_kib = 1\nrecv_ns = 1\n\
           recv_ns_per_kib = 1\ntx_on_sender = true\n";
    assert_eq!(field_of(&text), "mpi.bridge.tx_on_sender");
}
