//! One device thread per VM: an emulated NIC's traffic serialises through its
//! VM's device-model thread. k ping-pong pairs between two VMs of k vCPUs
//! each share the two VMs' threads; the same k pairs in 2k single-vCPU VMs
//! have a thread each (every dom0 vCPU and every vCPU on a core of its own).
//!
//! Closed forms, busy_poll, N round trips per pair, costs of `mpi.emulated`
//! (relay = relay_ns + relay_ns_per_kib·B/1024, w = one way of a lone pair,
//! see `channels_pingpong`): k VMs pairs take N · 2w each, as one pair does.
//! In the two big VMs, each device thread handles 2kN packets (every pair's
//! pings and pongs), so the run takes at least 2kN · relay, which exceeds
//! N · 2w once k · relay > w: the device thread is the bottleneck.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run};

const N: u64 = 30;
const BYTES: u64 = 1024;

/// k pairs; `big`: two VMs with k vCPUs each, else 2k VMs with one.
fn scenario(k: usize, big: bool) -> String {
    let cores = 4 * k;
    let mut text = format!(
        "name = \"channels-device-{k}-{big}\"\n[host]\ncores = {cores}\n\
         [[domains]]\nname = \"dom0\"\ndom0 = true\nvcpus = {}\npin = [{}]\n",
        2 * k,
        (2 * k..4 * k)
            .map(|c| format!("[{c}]"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let pins = |from: usize| {
        (from..from + k)
            .map(|c| format!("[{c}]"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if big {
        text += &format!(
            "[[domains]]\nname = \"A\"\nvcpus = {k}\npin = [{}]\nnic = \"emulated\"\n\
             [[domains]]\nname = \"B\"\nvcpus = {k}\npin = [{}]\nnic = \"emulated\"\n",
            pins(0),
            pins(k)
        );
    } else {
        for i in 0..k {
            text += &format!(
                "[[domains]]\nname = \"A{i}\"\npin = [[{i}]]\nnic = \"emulated\"\n\
                 [[domains]]\nname = \"B{i}\"\npin = [[{}]]\nnic = \"emulated\"\n",
                k + i
            );
        }
    }
    for i in 0..k {
        let (a, b) = if big {
            ("A".to_string(), "B".to_string())
        } else {
            (format!("A{i}"), format!("B{i}"))
        };
        text += &format!(
            "[[jobs]]\nname = \"pp{i}\"\nworkload = \"pingpong\"\nranks = [\"{a}\", \"{b}\"]\n\
             wait_policy = \"busy_poll\"\nparams = {{ iterations = {N}, bytes = {BYTES} }}\n"
        );
    }
    text
}

/// The last pair's completion.
fn makespan(k: usize, big: bool) -> (u64, Scenario) {
    let text = scenario(k, big);
    let origin = format!("device k={k} big={big}");
    let sc = Scenario::from_toml(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&text, &origin, None, false);
    assert_invariants(&origin, &text, &out);
    let t = out
        .report
        .jobs
        .iter()
        .map(|j| j.completion_ns.expect("finished"))
        .max()
        .unwrap();
    (t, sc)
}

#[test]
fn one_device_thread_serialises_a_big_vms_traffic() {
    let (lone, sc) = makespan(1, false);
    let ch = &sc.mpi.emulated;
    let relay = ch.relay_ns + ch.relay_ns_per_kib * BYTES / 1024;
    for k in [2, 4] {
        let (small, _) = makespan(k, false);
        let (big, _) = makespan(k, true);
        assert_eq!(
            small, lone,
            "k = {k} VM pairs: each pair as fast as a lone one"
        );
        let floor = 2 * k as u64 * N * relay;
        assert!(
            big >= floor,
            "k = {k} in one VM pair: {big} ns, below the device thread's busy time {floor} ns"
        );
        if k as u64 * relay > lone / (2 * N) {
            assert!(
                big > small,
                "k = {k}: the device thread must be the bottleneck"
            );
            // Within a few packets' latency of the bound: the thread stays busy.
            assert!(
                big < floor + 20 * relay,
                "k = {k}: {big} ns, far above the device-bound {floor} ns"
            );
        }
    }
}
