//! Inter-VM channels, analytic ping-pong round trips: two single-vCPU
//! domains `a` and `b` on cores of their own, dom0's vCPUs on cores of their
//! own, `busy_poll` (a waiting rank spins on its core, so it sees a packet
//! the moment it arrives). A one-way eager message of B bytes then costs,
//! from the scenario's cost tables (send(B) = send_ns + send_ns_per_kib·B/1024,
//! recv and relay alike, λ = latency_ns):
//!
//! | channel | one way |
//! |---|---|
//! | sm (one domain, two vCPUs) | send + λ + recv |
//! | ivshmem | send + λ + recv (ivshmem table) |
//! | bridge | send + λ + recv (bridge table) |
//! | netfront (dom0 relay) | send + λ + relay + λ + recv |
//! | emulated, virtio | send + λ + relay(TX, sender's thread) + λ + relay(RX, receiver's thread) + λ + recv |
//!
//! Start-up costs (the first dispatch of each vCPU) are the same for N and 2N
//! iterations, so T(2N) − T(N) = 2N · one way exactly.

use vhpc_sim::scenario::Channel;
use vhpc_sim::Scenario;

use crate::machines_wire;

const N: u64 = 50;
const BYTES: u64 = 1024;

/// The ping-pong between `a` and `b` (or two vCPUs of `a` for `sm`).
pub fn scenario(nic: &str, ivshmem: bool, iterations: u64, bytes: u64) -> String {
    let (group, transports) = if ivshmem {
        (
            "ivshmem = \"g\"",
            "transports = [\"sm\", \"ivshmem\", \"net\"]",
        )
    } else {
        ("", "")
    };
    let (vcpus_a, ranks) = if nic == "sm" {
        (2, "[\"a\", \"a\"]")
    } else {
        (1, "[\"a\", \"b\"]")
    };
    let nic = if nic == "sm" { "netfront" } else { nic };
    format!(
        r#"
name = "channels-pingpong"
[host]
cores = 4
[hypervisor]
scheduler = "credit"
[mpi]
{transports}
[[domains]]
name = "dom0"
dom0 = true
vcpus = 2
pin = [[2], [3]]
[[domains]]
name = "a"
vcpus = {vcpus_a}
pin = [[0], [1]]
nic = "{nic}"
{group}
[[domains]]
name = "b"
pin = [[1]]
nic = "{nic}"
{group}
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = {ranks}
wait_policy = "busy_poll"
params = {{ iterations = {iterations}, bytes = {bytes} }}
"#
    )
    .replace("vcpus = 1\npin = [[0], [1]]", "vcpus = 1\npin = [[0]]")
}

fn cost(ns: u64, per_kib: u64, bytes: u64) -> u64 {
    ns + per_kib * bytes / 1024
}

fn ends(ch: &Channel, bytes: u64) -> u64 {
    cost(ch.send_ns, ch.send_ns_per_kib, bytes) + cost(ch.recv_ns, ch.recv_ns_per_kib, bytes)
}

fn relay(ch: &Channel, bytes: u64) -> u64 {
    cost(ch.relay_ns, ch.relay_ns_per_kib, bytes)
}

/// The closed form above, from the parsed scenario's tables.
fn one_way(kind: &str, sc: &Scenario, bytes: u64) -> u64 {
    let m = &sc.mpi;
    match kind {
        "sm" => ends(&m.shm, bytes) + m.shm.latency_ns,
        "ivshmem" => ends(&m.ivshmem, bytes) + m.ivshmem.latency_ns,
        "bridge" => ends(&m.bridge, bytes) + m.bridge.latency_ns,
        "netfront" => {
            ends(&m.inter_vm, bytes) + 2 * m.inter_vm.latency_ns + relay(&m.inter_vm, bytes)
        }
        "emulated" => {
            ends(&m.emulated, bytes) + 3 * m.emulated.latency_ns + 2 * relay(&m.emulated, bytes)
        }
        "virtio" => ends(&m.virtio, bytes) + 3 * m.virtio.latency_ns + 2 * relay(&m.virtio, bytes),
        _ => unreachable!(),
    }
}

fn completion(kind: &str, iterations: u64, bytes: u64) -> (u64, Scenario) {
    let ivshmem = kind == "ivshmem";
    let nic = if ivshmem { "bridge" } else { kind };
    let text = scenario(nic, ivshmem, iterations, bytes);
    machines_wire::completion(&text, &format!("channels-pingpong-{kind}-{iterations}"))
}

fn check(kind: &str) {
    let (t1, sc) = completion(kind, N, BYTES);
    let (t2, _) = completion(kind, 2 * N, BYTES);
    let expected = 2 * N * one_way(kind, &sc, BYTES);
    assert_eq!(
        t2 - t1,
        expected,
        "{kind}: {N} more round trips took {} ns, the closed form says {expected}",
        t2 - t1
    );
}

#[test]
fn shared_memory_inside_a_domain() {
    check("sm");
}

#[test]
fn ivshmem_between_domains_of_one_group() {
    check("ivshmem");
}

#[test]
fn host_bridge_costs_both_ends_and_no_back_end() {
    check("bridge");
}

#[test]
fn netfront_passes_dom0_relay_once() {
    check("netfront");
}

#[test]
fn emulated_nic_passes_both_device_threads() {
    check("emulated");
}

#[test]
fn virtio_passes_both_vhost_threads() {
    check("virtio");
}

/// The defaults order the kinds as the literature does: ivshmem near shared
/// memory, the emulated NIC far the costliest per message.
#[test]
fn default_costs_order_the_kinds() {
    let sc = Scenario::from_toml(&scenario("bridge", false, 1, 8), "order").unwrap();
    let w = |k: &str| one_way(k, &sc, BYTES);
    assert!(w("sm") < w("ivshmem"));
    assert!(w("ivshmem") < w("bridge"));
    assert!(w("virtio") < w("emulated"));
    assert!(w("netfront") < w("emulated"));
    assert!(
        w("emulated") > 4 * w("virtio"),
        "emulation costs tens of µs per packet"
    );
}
