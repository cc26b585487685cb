//! Several machines joined by a physical network (`host.machines`,
//! `[host.nic]`, `[mpi.tcp]`): closed-form ping-pongs across machines, k
//! senders sharing one NIC, determinism, validation naming the field, and
//! one machine (or a job inside one machine) unchanged.
//!
//! One way across machines, for an eager message of B bytes under
//! `busy_poll` (each rank spins on its own core), with ser(B) = ⌈(B + F ·
//! overhead) × 1000 / bandwidth⌉ ns, F = max(1, ⌈B / frame_bytes⌉):
//!
//! | ranks | one way |
//! |---|---|
//! | native OSes (TCP) | send + ser + λ_wire + ser + λ_tcp + recv (`mpi.tcp`) |
//! | VMs, emulated NIC | send + λ + relay(TX) + ser + λ_wire + ser + λ + relay(RX) + λ + recv (`mpi.emulated`) |
//!
//! T(2N) − T(N) = 2N · one way, as in `channels_pingpong`.

use vhpc_sim::scenario::{Channel, MachineNic};
use vhpc_sim::Scenario;

use crate::util::{self, assert_invariants, run};

const N: u64 = 40;

fn cost(ns: u64, per_kib: u64, bytes: u64) -> u64 {
    ns + per_kib * bytes / 1024
}

fn ends(ch: &Channel, bytes: u64) -> u64 {
    cost(ch.send_ns, ch.send_ns_per_kib, bytes) + cost(ch.recv_ns, ch.recv_ns_per_kib, bytes)
}

/// Serialisation on one NIC, written out from the field docs.
fn ser(nic: &MachineNic, bytes: u64) -> u64 {
    let frames = bytes.div_ceil(nic.frame_bytes).max(1);
    ((bytes + frames * nic.frame_overhead_bytes) * 1000).div_ceil(nic.bandwidth_mb_s)
}

/// Two native OSes, `a` on machine 0 and `b` on machine 1 (`cross`), or
/// both on machine 0; `nic` is the `[host.nic]` table's body (None: absent).
pub fn native_pair(iterations: u64, bytes: u64, nic: Option<&str>, cross: bool) -> String {
    let nic = nic.map_or(String::new(), |body| format!("[host.nic]\n{body}\n"));
    let b_core = if cross { 2 } else { 1 };
    format!(
        r#"
name = "wire-native"
[host]
cores = 4
machines = 2
{nic}
[hypervisor]
scheduler = "linux"
[[domains]]
name = "a"
native = true
nic = "bridge"
pin = [[0]]
[[domains]]
name = "b"
native = true
nic = "bridge"
pin = [[{b_core}]]
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "busy_poll"
params = {{ iterations = {iterations}, bytes = {bytes} }}
"#
    )
}

/// Two single-vCPU VMs with emulated NICs on two machines; dom0 (the
/// hosts' device threads) has a vCPU on each machine.
pub fn vm_pair(iterations: u64, bytes: u64) -> String {
    format!(
        r#"
name = "wire-emulated"
[host]
cores = 4
machines = 2
[hypervisor]
scheduler = "linux"
[[domains]]
name = "host"
dom0 = true
vcpus = 2
pin = [[1], [3]]
[[domains]]
name = "a"
nic = "emulated"
pin = [[0]]
[[domains]]
name = "b"
nic = "emulated"
pin = [[2]]
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "busy_poll"
params = {{ iterations = {iterations}, bytes = {bytes} }}
"#
    )
}

/// The first job's completion (ns) and the parsed scenario; the run's invariants hold.
pub fn completion(text: &str, origin: &str) -> (u64, Scenario) {
    let sc = Scenario::from_toml(text, origin).unwrap_or_else(|e| panic!("{e}"));
    let out = run(text, origin, None, true);
    assert_invariants(origin, text, &out);
    let t = out.report.jobs[0]
        .completion_ns
        .unwrap_or_else(|| panic!("{origin}: the job did not finish"));
    (t, sc)
}

/// T(2N) − T(N) of a scenario builder, and the parsed scenario.
fn per_round_trips(build: impl Fn(u64) -> String, label: &str) -> (u64, Scenario) {
    let (t1, sc) = completion(&build(N), &format!("{label}-{N}"));
    let (t2, _) = completion(&build(2 * N), &format!("{label}-{}", 2 * N));
    (t2 - t1, sc)
}

fn native_one_way(sc: &Scenario, bytes: u64) -> u64 {
    let nic = sc.host.nic.clone().unwrap_or_default();
    let tcp = &sc.mpi.tcp;
    ends(tcp, bytes) + 2 * ser(&nic, bytes) + nic.latency_ns + tcp.latency_ns
}

#[test]
fn native_ping_pong_crosses_both_nics_and_the_wire() {
    // Default gigabit NIC (frames with overhead), and a payload-only one.
    for (bytes, nic) in [
        (1024, None),
        (4000, None),
        (
            3000,
            Some("bandwidth_mb_s = 125\nlatency_ns = 7000\nframe_overhead_bytes = 0"),
        ),
    ] {
        let (dt, sc) = per_round_trips(|n| native_pair(n, bytes, nic, true), "native");
        let expected = 2 * N * native_one_way(&sc, bytes);
        assert_eq!(dt, expected, "{bytes} B, nic {nic:?}");
    }
    // 3000 B at 125 MB/s without overhead: 24 µs on each NIC.
    let sc = Scenario::from_toml(
        &native_pair(1, 3000, Some("frame_overhead_bytes = 0"), true),
        "x",
    )
    .unwrap();
    assert_eq!(ser(&sc.host.nic.unwrap(), 3000), 24_000);
}

#[test]
fn vm_ping_pong_puts_the_wire_between_the_device_threads() {
    let bytes = 2048;
    let (dt, sc) = per_round_trips(|n| vm_pair(n, bytes), "emulated");
    let e = &sc.mpi.emulated;
    let nic = MachineNic::default();
    let relay = cost(e.relay_ns, e.relay_ns_per_kib, bytes);
    let one_way =
        ends(e, bytes) + 3 * e.latency_ns + 2 * relay + 2 * ser(&nic, bytes) + nic.latency_ns;
    assert_eq!(dt, 2 * N * one_way);
}

#[test]
fn inside_one_machine_nothing_changes() {
    // Natives on one machine of two talk over their NIC's table (bridge),
    // exactly as on a host of one machine.
    let (t_two, sc) = completion(&native_pair(N, 1024, None, false), "same-machine");
    let one = native_pair(N, 1024, None, false).replace("machines = 2\n", "");
    let (t_one, _) = completion(&one, "one-machine");
    assert_eq!(t_two, t_one);
    let b = &sc.mpi.bridge;
    let with_machines_1 = native_pair(N, 1024, None, false).replace("machines = 2", "machines = 1");
    assert_eq!(completion(&with_machines_1, "machines-1").0, t_one);
    // ... and the bridge's closed form: no wire.
    let (dt, _) = per_round_trips(|n| native_pair(n, 1024, None, false), "same");
    assert_eq!(dt, 2 * N * (ends(b, 1024) + b.latency_ns));
}

/// `k` pairs ping-pong at once between machine 0 and machine 1, with every
/// CPU cost and latency zero: only the NICs take time. Each direction of
/// each NIC carries k packets per round, so a round takes k serialisations
/// once k reaches the ring of four NIC stages (tx 0, rx 1, tx 1, rx 0); one
/// pair alone takes four.
fn pairs(k: usize, iterations: u64, bytes: u64) -> String {
    let m0: Vec<String> = (0..k).map(|c| format!("[{c}]")).collect();
    let m1: Vec<String> = (k..2 * k).map(|c| format!("[{c}]")).collect();
    let ranks: Vec<&str> = (0..2 * k)
        .map(|r| if r % 2 == 0 { "\"m0\"" } else { "\"m1\"" })
        .collect();
    format!(
        r#"
name = "wire-pairs"
[host]
cores = {cores}
machines = 2
[host.nic]
latency_ns = 0
frame_overhead_bytes = 0
[hypervisor]
scheduler = "linux"
[mpi]
poll_ns = 1
[mpi.tcp]
latency_ns = 0
send_ns = 0
send_ns_per_kib = 0
recv_ns = 0
recv_ns_per_kib = 0
[[domains]]
name = "m0"
native = true
nic = "bridge"
vcpus = {k}
pin = [{m0}]
[[domains]]
name = "m1"
native = true
nic = "bridge"
vcpus = {k}
pin = [{m1}]
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = [{ranks}]
wait_policy = "busy_poll"
params = {{ iterations = {iterations}, bytes = {bytes} }}
"#,
        cores = 2 * k,
        m0 = m0.join(", "),
        m1 = m1.join(", "),
        ranks = ranks.join(", "),
    )
}

#[test]
fn concurrent_senders_share_one_nic() {
    let bytes = 1000; // 8 µs on a 125 MB/s NIC
    let s = ser(
        &MachineNic {
            frame_overhead_bytes: 0,
            ..MachineNic::default()
        },
        bytes,
    );
    assert_eq!(s, 8000);
    let (one, _) = per_round_trips(|n| pairs(1, n, bytes), "pairs-1");
    assert_eq!(
        one,
        N * 4 * s,
        "one pair: four store-and-forward stages per round"
    );
    for k in [4, 8, 16] {
        let (dt, _) = per_round_trips(|n| pairs(k, n, bytes), &format!("pairs-{k}"));
        assert_eq!(
            dt,
            N * k as u64 * s,
            "{k} pairs: k serialisations per round"
        );
    }
}

#[test]
fn runs_across_machines_are_deterministic() {
    for (label, text) in [
        ("vm", vm_pair(30, 100_000)),
        ("pairs", pairs(6, 30, 70_000)),
    ] {
        let a = run(&text, label, Some(3), false).report;
        let b = run(&text, label, Some(3), false).report;
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
            "{label}"
        );
        assert!(a.jobs[0].completion_ns.is_some(), "{label} finishes");
    }
}

#[test]
fn a_preset_repeats_per_machine() {
    let text = |machines: usize, pin: &str| {
        format!(
            "name = \"p\"\n[host]\npreset = \"opteron-numa-4x4\"\nmachines = {machines}\n\
             [hypervisor]\nscheduler = \"linux\"\n[memory]\nplacement = \"first_touch\"\n\
             [[domains]]\nname = \"vm\"\nvcpus = 4\npin = [{pin}]\nwarm = true\n\
             [[jobs]]\nname = \"cg\"\nworkload = \"npb.cg\"\nranks = [\"vm\", \"vm\", \"vm\", \"vm\"]\n\
             wait_policy = \"busy_poll\"\nparams = {{ class = \"S\" }}\n"
        )
    };
    let sc = Scenario::from_toml(&text(2, "[0, 4, 8, 12]"), "two").unwrap();
    let h = &sc.host;
    assert_eq!((h.cores, h.sockets, h.numa_nodes), (32, 8, 8));
    assert_eq!(h.nodes[5].cores, vec![20, 21, 22, 23]);
    assert_eq!(h.links.len(), 8);
    assert_eq!(h.links[4].nodes, [4, 5]);
    assert_eq!(h.distance[4][7], h.distance[0][3]);
    // A VM spanning machine 1's four nodes runs as one spanning machine 0's.
    let one = run(&text(1, "[0, 4, 8, 12]"), "one", None, false).report;
    let second = run(&text(2, "[16, 20, 24, 28]"), "second", None, false).report;
    assert_eq!(one.jobs[0].completion_ns, second.jobs[0].completion_ns);
    assert_eq!(one.jobs[0].remote_share, second.jobs[0].remote_share);
}

#[test]
fn invalid_machine_settings_name_the_field() {
    let good = native_pair(1, 8, None, true);
    Scenario::from_toml(&good, "t.toml").unwrap();
    let cases: Vec<(String, &str)> = vec![
        (good.replace("machines = 2", "machines = 3"), "host.machines"),
        (good.replace("machines = 2", "machines = 1000"), "host.machines"),
        (
            native_pair(1, 8, Some("bandwidth_mb_s = 0"), true),
            "host.nic.bandwidth_mb_s",
        ),
        (
            native_pair(1, 8, Some("frame_bytes = 0"), true),
            "host.nic.frame_bytes",
        ),
        (
            native_pair(1, 8, Some("latency_ns = 2000000000"), true),
            "host.nic.latency_ns",
        ),
        (
            native_pair(1, 8, Some("latency_ns = 1"), true).replace("machines = 2\n", ""),
            "host.nic",
        ),
        (good.replace("cores = 4\n", "cores = 4\nsockets = 1\n"), "host.sockets"),
        (good.replace("cores = 4\n", "cores = 4\nnuma_nodes = 1\n"), "host.numa_nodes"),
        (good.replace("pin = [[0]]\n", ""), "domains[0].pin"),
        (good.replace("pin = [[0]]", "pin = [[1, 2]]"), "domains[0].pin[0]"),
        (
            good.replace("name = \"a\"\nnative = true", "name = \"a\"\nvcpus = 2\nnative = true")
                .replace("pin = [[0]]", "pin = [[0], [3]]"),
            "domains[0].pin",
        ),
        (
            good.replace("[[domains]]\nname = \"b\"", "[mpi]\nbetween_domains = \"shm\"\n[[domains]]\nname = \"b\""),
            "mpi.between_domains",
        ),
        (
            good.replace("scheduler = \"linux\"", "scheduler = \"linux\"\n[mpi.tcp]\nlatency_ns = 0\nsend_ns = 0\nsend_ns_per_kib = 0\nrecv_ns = 0\nrecv_ns_per_kib = 0\nchunk_bytes = 0"),
            "mpi.tcp.chunk_bytes",
        ),
    ];
    for (text, field) in cases {
        assert_eq!(util::field_of(&text), field, "{text}");
    }
    // ivshmem groups are one machine's memory.
    let ivs = vm_pair(1, 8)
        .replace("nic = \"emulated\"", "ivshmem = \"g\"")
        .replace(
            "[hypervisor]",
            "[mpi]\ntransports = [\"sm\", \"ivshmem\", \"net\"]\n[hypervisor]",
        );
    assert_eq!(util::field_of(&ivs), "domains[2].ivshmem");
    // A preset: explicit fields must match the copies; links stay inside a
    // machine; Xen-like preallocation across machines is not modelled.
    let preset = "name = \"p\"\n[host]\npreset = \"nehalem-numa-2x4\"\nmachines = 2\n{extra}\n\
                  [[domains]]\nname = \"a\"\nnative = true\npin = [[0]]\n\
                  [[jobs]]\nname = \"j\"\nworkload = \"npb.ep\"\nranks = [\"a\"]\nparams = { class = \"S\" }\n";
    let p = |extra: &str| preset.replace("{extra}", extra);
    Scenario::from_toml(&p(""), "t.toml").unwrap();
    assert_eq!(util::field_of(&p("cores = 8")), "host.cores");
    assert_eq!(
        util::field_of(&p("links = [{ nodes = [0, 1], bandwidth_mb_s = 12800 }, { nodes = [1, 2], bandwidth_mb_s = 12800 }]")),
        "host.links"
    );
    let cross = "name = \"c\"\n[host]\ncores = 8\nmachines = 2\nnuma_nodes = 4\n\
                 links = [{ nodes = [0, 1], bandwidth_mb_s = 100 }, { nodes = [1, 2], bandwidth_mb_s = 100 }, \
                 { nodes = [2, 3], bandwidth_mb_s = 100 }]\n\
                 [[domains]]\nname = \"a\"\nnative = true\npin = [[0]]\n\
                 [[jobs]]\nname = \"j\"\nworkload = \"npb.ep\"\nranks = [\"a\"]\nparams = { class = \"S\" }\n";
    assert_eq!(util::field_of(cross), "host.links[1].nodes");
    let xen = p("[memory]\nplacement = \"preallocate\"");
    assert_eq!(util::field_of(&xen), "memory.placement");
}
