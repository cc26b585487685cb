//! A rendezvous request-to-send names its message's size but carries none
//! of it (the chunks do): the device threads and the wire move it as a
//! control packet, as the ranks' own send and receive costs already did.
//!
//! Device threads, exactly: with `relay_ns_per_kib` = X, then 2X, the hosts'
//! device threads run longer by X per KiB they relay; a ping-pong of N
//! round trips of a B-byte rendezvous message (B > `mpi.eager_limit`, one chunk)
//! relays 2N messages through two threads each, 4N·B bytes, the
//! requests-to-send adding nothing. dom0's netfront relay likewise: one pass
//! per message, 2N·B bytes.
//!
//! The wire, bounded: on a 1 MB/s NIC a 48 KiB chunk takes ~51 ms per NIC,
//! far above every CPU cost and latency; one way crosses two NICs, so the
//! payload once costs 2·ser(B) and counting it again in the request-to-send
//! would make it 4·ser(B).

use vhpc_sim::scenario::MachineNic;

use crate::machines_wire::{native_pair, vm_pair};
use crate::util::{assert_invariants, run};

const N: u64 = 6;
/// One 64 KiB chunk's worth, sent by rendezvous (`EAGER`).
const BYTES: u64 = 48 * 1024;
const EAGER: &str = "\n[mpi]\neager_limit = 1024\n";

fn device_run_ns(per_kib: u64) -> u64 {
    let text = vm_pair(N, BYTES)
        + EAGER
        + &format!(
            "\n[mpi.emulated]\nlatency_ns = 2000\nsend_ns = 10000\nsend_ns_per_kib = 1000\n\
             recv_ns = 10000\nrecv_ns_per_kib = 1000\nrelay_ns = 25000\n\
             relay_ns_per_kib = {per_kib}\n"
        );
    let out = run(&text, "rts-device", None, true);
    assert_invariants("rts-device", &text, &out);
    assert!(out.report.jobs[0].completion_ns.is_some());
    out.report
        .vcpus
        .iter()
        .filter(|v| v.domain == "host")
        .map(|v| v.run_ns)
        .sum()
}

#[test]
fn device_threads_relay_the_payload_once() {
    let x = 10_000;
    let extra = device_run_ns(2 * x) - device_run_ns(x);
    assert_eq!(extra, x * 4 * N * BYTES / 1024);
}

/// Two netfront domUs on one host: every message crosses dom0's relay once.
fn dom0_run_ns(per_kib: u64) -> u64 {
    let text = format!(
        "name = \"rts-dom0\"\n[host]\ncores = 3\n[hypervisor]\nscheduler = \"credit\"\n\
         [[domains]]\nname = \"dom0\"\ndom0 = true\npin = [[2]]\n\
         [[domains]]\nname = \"a\"\npin = [[0]]\n[[domains]]\nname = \"b\"\npin = [[1]]\n\
         [[jobs]]\nname = \"pp\"\nworkload = \"pingpong\"\nranks = [\"a\", \"b\"]\n\
         wait_policy = \"busy_poll\"\nparams = {{ iterations = {N}, bytes = {BYTES} }}\n{EAGER}\
         between_domains = \"dom0\"\n\
         [mpi.inter_vm]\nlatency_ns = 2000\nsend_ns = 10000\nsend_ns_per_kib = 1000\n\
         recv_ns = 10000\nrecv_ns_per_kib = 1000\nrelay_ns = 25000\nrelay_ns_per_kib = {per_kib}\n"
    );
    let out = run(&text, "rts-dom0", None, true);
    assert_invariants("rts-dom0", &text, &out);
    assert!(out.report.jobs[0].completion_ns.is_some());
    out.report
        .vcpus
        .iter()
        .filter(|v| v.domain == "dom0")
        .map(|v| v.run_ns)
        .sum()
}

#[test]
fn dom0_relays_the_payload_once() {
    let x = 10_000;
    let extra = dom0_run_ns(2 * x) - dom0_run_ns(x);
    assert_eq!(extra, x * 2 * N * BYTES / 1024);
}

#[test]
fn the_wire_carries_the_payload_once() {
    let nic = "bandwidth_mb_s = 1\nlatency_ns = 1000";
    let one_way = |n: u64| {
        let text = native_pair(n, BYTES, Some(nic), true) + EAGER;
        let out = run(&text, "rts-wire", None, true);
        assert_invariants("rts-wire", &text, &out);
        out.report.jobs[0].completion_ns.expect("finished")
    };
    let per = (one_way(2 * N) - one_way(N)) / (2 * N);
    let m = MachineNic {
        bandwidth_mb_s: 1,
        ..MachineNic::default()
    };
    let ser = |b: u64| {
        let frames = b.div_ceil(m.frame_bytes).max(1);
        ((b + frames * m.frame_overhead_bytes) * 1000).div_ceil(m.bandwidth_mb_s)
    };
    // The chunk on both NICs, plus control packets' single frames ...
    let payload = ser(BYTES);
    assert!(
        per >= 2 * payload,
        "{per} ns one way, payload alone {}",
        2 * payload
    );
    // ... far below the payload counted again in the request (4 · ser).
    assert!(
        per < 3 * payload,
        "{per} ns one way: the payload crossed twice"
    );
}
