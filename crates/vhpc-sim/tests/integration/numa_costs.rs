//! The memory model's physical costs beyond node bandwidth and distance
//! (docs/sim.md, "NUMA memory"), each checked in closed form: an
//! interconnect link on the route of remote traffic, a socket's front-side
//! bus, nested paging in a VM on a host with hardware-assisted paging; and
//! their off switches give exactly the result without them.

use crate::util;
use vhpc_sim::metrics::Report;
use vhpc_sim::run_toml;

/// The shared pinned exchange on a host of `cores_n` cores, `host_extra`
/// appended to `[host]`.
fn scenario(
    cores_n: usize,
    host_extra: &str,
    native: bool,
    cores: &[usize],
    mem: u32,
    memory: &str,
) -> String {
    util::pinned_exchange(
        &format!("cores = {cores_n}\n{host_extra}"),
        native,
        cores,
        mem,
        memory,
    )
}

fn report(text: &str) -> Report {
    util::report_of(text, "numa-costs.toml")
}

/// Two nodes of two cores, 10000 MB/s each, latency ratio 1, joined by
/// one link of `link` MB/s per direction (none if 0).
fn two_nodes(link: u64) -> String {
    let mut s = "numa_nodes = 2\ndistance = [[10, 10], [10, 10]]\n".to_string();
    if link > 0 {
        s += &format!("links = [{{ nodes = [0, 1], bandwidth_mb_s = {link} }}]\n");
    }
    s + "[[host.nodes]]\nbandwidth_mb_s = 10000\n[[host.nodes]]\nbandwidth_mb_s = 10000\n"
}

#[test]
fn remote_traffic_limited_by_one_link_slows_by_demand_over_link_bandwidth() {
    // Preallocation puts the guest on node 0; both ranks run on node 1.
    // Each asks its core's fair share, 10000 / 2 = 5000 MB/s: node 0 carries
    // 10000 (utilisation 1, no cost), the link 0 -> 1 10000 MB/s.
    let mem = "[memory]\nplacement = \"preallocate\"\n";
    let plain = report(&scenario(4, &two_nodes(0), false, &[2, 3], 1_000_000, ""));
    for (link, want) in [(2_500u64, 4u64), (5_000, 2), (20_000, 1)] {
        let on = report(&scenario(
            4,
            &two_nodes(link),
            false,
            &[2, 3],
            1_000_000,
            mem,
        ));
        assert_eq!(
            on.jobs[0].useful_ns,
            want * plain.jobs[0].useful_ns,
            "link {link} MB/s: demand 10000 / link = {want}"
        );
        assert_eq!(on.jobs[0].remote_share, Some(1.0));
    }
    // Half memory-bound: demand 5000 over a 2500 MB/s link, 0.5 + 0.5 × 2.
    let plain = report(&scenario(4, &two_nodes(0), false, &[2, 3], 500_000, ""));
    let on = report(&scenario(
        4,
        &two_nodes(2_500),
        false,
        &[2, 3],
        500_000,
        mem,
    ));
    assert_eq!(2 * on.jobs[0].useful_ns, 3 * plain.jobs[0].useful_ns);
}

#[test]
fn the_interconnect_switch_gives_exactly_the_model_without_links() {
    let mem = "[memory]\nplacement = \"preallocate\"\n";
    let off = "[memory]\nplacement = \"preallocate\"\ninterconnect = false\n";
    let without = report(&scenario(4, &two_nodes(0), false, &[2, 3], 1_000_000, mem));
    let switched = report(&scenario(
        4,
        &two_nodes(2_500),
        false,
        &[2, 3],
        1_000_000,
        off,
    ));
    let with = report(&scenario(
        4,
        &two_nodes(2_500),
        false,
        &[2, 3],
        1_000_000,
        mem,
    ));
    assert_eq!(
        serde_json::to_string(&without.jobs).unwrap(),
        serde_json::to_string(&switched.jobs).unwrap()
    );
    assert!(with.jobs[0].useful_ns > without.jobs[0].useful_ns);
}

#[test]
fn a_socket_bus_limits_every_access_of_its_cores_native_or_not() {
    // One node of 4 cores, 8000 MB/s (fair share 2000 per core), 2 sockets
    // with a 1000 MB/s bus each; two ranks on socket 0 ask 4000: 4×. The
    // bus is hardware, so a native domain pays it as a VM does.
    let host = "sockets = 2\nbus_mb_s = 1000\n[[host.nodes]]\nbandwidth_mb_s = 8000\n";
    let plain_host = "sockets = 2\n[[host.nodes]]\nbandwidth_mb_s = 8000\n";
    let mem = "[memory]\nplacement = \"first_touch\"\n";
    for native in [true, false] {
        let plain = report(&scenario(4, plain_host, native, &[0, 1], 1_000_000, ""));
        let on = report(&scenario(4, host, native, &[0, 1], 1_000_000, mem));
        assert_eq!(on.jobs[0].useful_ns, 4 * plain.jobs[0].useful_ns);
        assert_eq!(on.jobs[0].remote_share, Some(0.0));
    }
}

#[test]
fn nested_paging_costs_a_vm_its_share_of_the_memory_stalls() {
    // Local, uncontended, intensity 0.6: a VM on a host with HAP runs
    // 0.4 + 0.6 × (1 + h); a native domain, or a host without HAP, or
    // h = 0 runs exactly as without the model.
    let hap = "hap = true\n";
    let mem = |h: &str| format!("[memory]\nplacement = \"first_touch\"\n{h}");
    let plain = report(&scenario(4, "", false, &[0, 1], 600_000, ""));
    let base = plain.jobs[0].useful_ns;
    let vm = report(&scenario(4, hap, false, &[0, 1], 600_000, &mem("")));
    // Default h = 25 %: 0.4 + 0.75 = 1.15.
    assert_eq!(vm.jobs[0].useful_ns * 100, base * 115);
    assert!((vm.jobs[0].mem_slowdown.unwrap() - 0.15).abs() < 1e-9);
    let h = report(&scenario(
        4,
        hap,
        false,
        &[0, 1],
        600_000,
        &mem("nested_paging_ppm = 500000\n"),
    ));
    assert_eq!(h.jobs[0].useful_ns * 10, base * 13);
    for (host, native, m) in [
        (hap, true, mem("")),
        ("", false, mem("")),
        (hap, false, mem("nested_paging_ppm = 0\n")),
    ] {
        let on = report(&scenario(4, host, native, &[0, 1], 600_000, &m));
        let plain = report(&scenario(4, "", native, &[0, 1], 600_000, ""));
        assert_eq!(on.jobs[0].useful_ns, base, "{host:?} native={native} {m:?}");
        assert_eq!(on.jobs[0].completion_ns, plain.jobs[0].completion_ns);
    }
}

#[test]
fn preset_runs_with_links_and_nested_paging_are_deterministic() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/numa-opteron-span-kvm-warm.toml"),
    )
    .expect("scenario file");
    let run = || {
        let out = run_toml(&text, "numa-opteron-span-kvm-warm.toml", None, false).unwrap();
        serde_json::to_string(&out.report).unwrap()
    };
    assert_eq!(run(), run());
}

#[test]
fn invalid_links_bus_and_paging_settings_name_the_field() {
    let bad = |host: &str, memory: &str, field: &str| {
        let text = scenario(4, host, false, &[0, 1], 500_000, memory);
        let err = run_toml(&text, "bad.toml", None, false)
            .err()
            .unwrap_or_else(|| panic!("accepted {host:?} {memory:?}"));
        assert_eq!(err.field, field, "{err}");
    };
    let nodes2 = "numa_nodes = 2\n";
    bad(
        &format!("{nodes2}links = [{{ nodes = [0, 2], bandwidth_mb_s = 1 }}]"),
        "",
        "host.links[0].nodes",
    );
    bad(
        &format!("{nodes2}links = [{{ nodes = [1, 1], bandwidth_mb_s = 1 }}]"),
        "",
        "host.links[0].nodes",
    );
    bad(
        &format!("{nodes2}links = [{{ nodes = [0, 1], bandwidth_mb_s = 1 }}, {{ nodes = [1, 0], bandwidth_mb_s = 1 }}]"),
        "",
        "host.links[1].nodes",
    );
    bad(
        &format!("{nodes2}links = [{{ nodes = [0, 1], bandwidth_mb_s = 0 }}]"),
        "",
        "host.links[0].bandwidth_mb_s",
    );
    bad(
        "numa_nodes = 4\nlinks = [{ nodes = [0, 1], bandwidth_mb_s = 5 }]",
        "",
        "host.links",
    );
    bad("bus_mb_s = 20000000", "", "host.bus_mb_s");
    bad(
        "",
        "[memory]\nnested_paging_ppm = 20000000",
        "memory.nested_paging_ppm",
    );
    // A preset's links, bus and paging: given beside it, they must agree.
    let preset = |host: &str, field: &str| {
        let text = format!(
            "[host]\n{host}\n[[domains]]\nname = \"d\"\nnative = true\n[[jobs]]\nname = \"j\"\n\
             workload = \"npb.omp.ep\"\nranks = [\"d\"]\nparams = {{ class = \"S\" }}\n"
        );
        let Err(err) = run_toml(&text, "bad.toml", None, false) else {
            panic!("accepted {host:?}");
        };
        assert_eq!(err.field, field, "{err}");
    };
    preset("preset = \"nehalem-numa-2x4\"\nhap = false", "host.hap");
    preset(
        "preset = \"opteron-numa-4x4\"\nlinks = [{ nodes = [0, 1], bandwidth_mb_s = 5 }]",
        "host.links",
    );
    preset("preset = \"xeon-uma-4x4\"\nbus_mb_s = 1", "host.bus_mb_s");
}
