//! The memory model's demand and loaded latency (docs/sim.md, "NUMA
//! memory"): a core streams its node's `core_mb_s` (not its fair share),
//! and with `memory.queueing` accesses wait at busy controllers; checked in
//! closed form, with the fields' validation.

use crate::util;
use vhpc_sim::metrics::Report;
use vhpc_sim::run_toml;

fn report(text: &str) -> Report {
    util::report_of(text, "numa-demand.toml")
}

/// Two nodes of 4 cores (0-3, 4-7), 8000 MB/s each, `extra` in each
/// `[[host.nodes]]`. The exchange pairs ranks, so "one stream per node" is
/// cores [0, 4]; first touch keeps every page local.
fn host(extra: &str) -> String {
    let node = format!("[[host.nodes]]\nbandwidth_mb_s = 8000\n{extra}");
    format!("cores = 8\nnuma_nodes = 2\nlatency_ns = 100\n{node}{node}")
}

fn run(host_extra: &str, native: bool, cores: &[usize], memory: &str) -> u64 {
    let text = util::pinned_exchange(&host(host_extra), native, cores, 1_000_000, memory);
    report(&text).jobs[0].useful_ns
}

const FIRST_TOUCH: &str = "[memory]\nplacement = \"first_touch\"\n";

#[test]
fn a_core_streams_its_own_bandwidth_not_its_fair_share() {
    let plain = run("", true, &[0, 4], "");
    let plain2 = run("", true, &[0, 1], "");
    // One stream of 6000 MB/s on an 8000 MB/s node: below the node, free.
    assert_eq!(run("core_mb_s = 6000\n", true, &[0, 4], FIRST_TOUCH), plain);
    // Two of them ask 12000: 1.5x, where two fair shares (2000 each) cost
    // nothing.
    assert_eq!(
        2 * run("core_mb_s = 6000\n", true, &[0, 1], FIRST_TOUCH),
        3 * plain2
    );
    assert_eq!(run("", true, &[0, 1], FIRST_TOUCH), plain2);
}

#[test]
fn a_vm_whose_pages_are_all_local_runs_as_native_whatever_the_demand() {
    // No HAP (no nested paging): the VM's only difference would be where
    // its pages are, and first touch on one node puts them all local.
    for cores in [&[0, 4][..], &[0, 1, 2, 3]] {
        for mem in [
            FIRST_TOUCH,
            "[memory]\nplacement = \"first_touch\"\nqueueing = true\n",
        ] {
            assert_eq!(
                run("core_mb_s = 6000\n", false, cores, mem),
                run("core_mb_s = 6000\n", true, cores, mem),
                "{cores:?} {mem:?}"
            );
        }
    }
}

#[test]
fn queueing_is_small_for_lone_streams_and_adds_below_saturation() {
    let queue = "[memory]\nplacement = \"first_touch\"\nqueueing = true\n";
    // One 3000 MB/s stream per node: U · L / s = 0.375 · 100 ns / 8 ns
    // ≈ 4.7 requests in flight, all its own. The single-queue MVA still
    // charges them a wait (a core's own misses share the controller), so
    // this is not free; what is checked is that it is small and that
    // queueing is off by default.
    let one = run("core_mb_s = 3000\n", true, &[0, 4], FIRST_TOUCH);
    assert_eq!(one, run("", true, &[0, 4], ""));
    let one_q = run("core_mb_s = 3000\n", true, &[0, 4], queue);
    assert!(one_q >= one && 10 * one_q < 11 * one, "{one_q} vs {one}");
    // Two streams, U = 0.75: the roofline charges nothing, queueing does,
    // and less than the saturated bound (U · L / s ≈ 9.4 requests; MVA's
    // wait at 9 to 10 requests of service L / 12.5 is well below L).
    let roof = run("core_mb_s = 3000\n", true, &[0, 1], FIRST_TOUCH);
    let queued = run("core_mb_s = 3000\n", true, &[0, 1], queue);
    assert_eq!(roof, run("", true, &[0, 1], ""));
    assert!(queued > roof && queued < 2 * roof, "{queued} vs {roof}");
    // More streams, more wait.
    let queued4 = run("core_mb_s = 1800\n", true, &[0, 1, 2, 3], queue);
    let roof4 = run("core_mb_s = 1800\n", true, &[0, 1, 2, 3], FIRST_TOUCH);
    assert_eq!(roof4, run("", true, &[0, 1, 2, 3], ""));
    assert!(queued4 > roof4);
}

#[test]
fn demand_and_queueing_fields_are_checked_naming_the_field() {
    let bad = |host: &str, memory: &str, field: &str| {
        let text = util::pinned_exchange(host, true, &[0, 1], 500_000, memory);
        let err = run_toml(&text, "bad.toml", None, false)
            .err()
            .unwrap_or_else(|| panic!("accepted {host:?} {memory:?}"));
        assert_eq!(err.field, field, "{err}");
    };
    bad(
        "cores = 4\n[[host.nodes]]\ncore_mb_s = 20000000\n",
        "",
        "host.nodes[0].core_mb_s",
    );
    bad("cores = 4\nlatency_ns = 2000000\n", "", "host.latency_ns");
    bad(
        "cores = 4\n",
        "[memory]\nqueueing = true\n",
        "memory.queueing",
    );
    bad(
        "preset = \"opteron-numa-4x4\"\nlatency_ns = 100\n",
        "",
        "host.latency_ns",
    );
    bad(
        "preset = \"opteron-numa-4x4\"\n[[host.nodes]]\ncore_mb_s = 1\n",
        "",
        "host.nodes[0].core_mb_s",
    );
    // A preset's own figures may be repeated, and give queueing its latency.
    let ok = util::pinned_exchange(
        "preset = \"opteron-numa-4x4\"\nlatency_ns = 113\n[[host.nodes]]\ncore_mb_s = 4531\n",
        true,
        &[0, 1],
        500_000,
        "[memory]\nqueueing = true\n",
    );
    assert!(run_toml(&ok, "ok.toml", None, false).is_ok());
}
