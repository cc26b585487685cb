//! Extreme values the schema accepts. Each must either be rejected by
//! validation, with an error naming its field, or run to completion (or to
//! its limit) without panicking or hanging.

use crate::util::{assert_invariants, run_guarded};

const BIG: i64 = i64::MAX; // the largest integer TOML can hold

/// Two ranks sharing the one vCPU of a native domain: a rendezvous
/// ping-pong, so guest switches, guest slices and copy costs all matter.
fn native_pair(top: &str, guest: &str, mpi: &str, domain: &str) -> String {
    format!(
        r#"
limit_ms = 100
{top}
[host]
cores = 1
[hypervisor]
scheduler = "round_robin"
[guest]
{guest}
[mpi]
{mpi}
[[domains]]
name = "native"
native = true
{domain}
[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["native", "native"]
params = {{ iterations = 3, bytes = 100000 }}
"#
    )
}

/// Either a validation error naming `field` or a clean run.
fn assert_rejected_or_runs(label: &str, text: &str, field: &str) {
    match run_guarded(text, label, true) {
        Ok(Err(e)) => assert!(
            e.to_string().contains(field),
            "{label}: rejected, but the error does not name {field}: {e}"
        ),
        Ok(Ok(out)) => assert_invariants(label, text, &out),
        Err(e) => panic!("{label}: {e}\n{text}"),
    }
}

#[test]
fn accepted_extremes_run() {
    let channel = |extra: &str| {
        format!("native = {{ latency_ns = 300, send_ns = 300, send_ns_per_kib = 500, recv_ns = 300, recv_ns_per_kib = 500{extra} }}")
    };
    let cases = [
        ("eager_limit", native_pair("", "", "eager_limit = 1073741824", "")),
        ("eager_limit 0", native_pair("", "", "eager_limit = 0", "")),
        ("chunk_bytes", native_pair("", "", &channel(", chunk_bytes = 1073741824"), "")),
        ("window", native_pair("", "", &channel(", window = 1048576"), "")),
        ("one-byte chunks", native_pair("", "", &channel(", chunk_bytes = 1, window = 1"), "").replace("bytes = 100000", "bytes = 70000")),
        ("free copies", native_pair("", "switch_ns = 0", "native = { latency_ns = 0, send_ns = 0, send_ns_per_kib = 0, recv_ns = 0, recv_ns_per_kib = 0 }", "")),
        ("seed", native_pair(&format!("seed = {BIG}"), "", "", "")),
        ("limit_ms", native_pair("", "", "", "").replace("limit_ms = 100", "limit_ms = 1000000000")),
        ("latency", native_pair("", "", "native = { latency_ns = 1000000000, send_ns = 1, send_ns_per_kib = 1, recv_ns = 1, recv_ns_per_kib = 1 }", "")),
        ("send_ns", native_pair("", "", "native = { latency_ns = 1, send_ns = 1000000000, send_ns_per_kib = 1000000000, recv_ns = 1, recv_ns_per_kib = 1 }", "")),
        ("one-poll window", native_pair("", "", "poll_ns = 1\npolls_before_yield = 1", "").replace("limit_ms = 100", "limit_ms = 1")),
        ("background", native_pair("", "", "", "background = { interval_us = 1, work_us = 0 }").replace("limit_ms = 100", "limit_ms = 1")),
        ("tiny quantum", native_pair("", "", "", "").replace("[hypervisor]", "[hypervisor]\ntslice_us = 1")),
        ("huge quantum", native_pair("", "", "", "").replace("[hypervisor]", "[hypervisor]\ntslice_us = 10000000")),
    ];
    for (label, text) in cases {
        match run_guarded(&text, label, true) {
            Ok(Ok(out)) => assert_invariants(label, &text, &out),
            Ok(Err(e)) => panic!("{label}: rejected: {e}"),
            Err(e) => panic!("{label}: {e}\n{text}"),
        }
    }
}

/// Credit with one-microsecond ticks, slices and rate limit, caps, and a
/// one-microsecond SEDF period: event storms, but finite ones.
#[test]
fn extreme_scheduler_parameters_run() {
    for scheduler in ["credit", "credit2", "sedf", "gang", "round_robin"] {
        for (tick, tslice, per_acct, ratelimit) in [
            (1, 1, 1, 0),
            (1, 30_000, 1000, 0),
            (10_000_000, 1, 1, 10_000_000),
            (7, 3, 2, 1),
        ] {
            let text = format!(
                r#"
limit_ms = 20
[host]
cores = 2
[hypervisor]
scheduler = "{scheduler}"
tick_us = {tick}
tslice_us = {tslice}
ticks_per_acct = {per_acct}
ratelimit_us = {ratelimit}
extra_quantum_us = 1
[[domains]]
name = "dom0"
dom0 = true
background = {{ interval_us = 100, work_us = 10 }}
sedf = {{ period_us = 1, slice_us = 1 }}
[[domains]]
name = "a"
vcpus = 3
cap = 50
sedf = {{ period_us = 3, slice_us = 1, extratime = false }}
[[domains]]
name = "b"
vcpus = 2
pin = [[1]]
sedf = {{ period_us = 10000000, slice_us = 0 }}
[[jobs]]
name = "is"
workload = "npb.is"
ranks = ["a", "b", "a", "b"]
wait_policy = "adaptive"
params = {{ class = "S" }}
[[jobs]]
name = "x"
workload = "exchange"
ranks = ["a", "a"]
wait_policy = "hv_yield"
params = {{ iterations = 5 }}
"#
            );
            let label = format!(
                "{scheduler} tick {tick} tslice {tslice} per_acct {per_acct} ratelimit {ratelimit}"
            );
            match run_guarded(&text, &label, true) {
                Ok(Ok(out)) => assert_invariants(&label, &text, &out),
                Ok(Err(e)) => panic!("{label}: rejected: {e}"),
                Err(e) => panic!("{label}: {e}"),
            }
        }
    }
}

// ---- engine bugs: accepted values that panic or hang -------------------------

/// `guest.slice_us = 0` passes validation; with two tasks on one vCPU every
/// guest slice ends at the instant it begins (`arm_guest_slice` pushes a
/// GuestSlice event at `now + 0`, `guest_slice_end` rotates and re-arms at
/// `now + 0`), so simulated time stops and `run` never returns, whatever
/// `limit_ms` says.
#[test]

fn guest_slice_zero_is_rejected_or_runs() {
    assert_rejected_or_runs(
        "guest-slice-0",
        &native_pair("", "slice_us = 0", "", "").replace("limit_ms = 100", "limit_ms = 1"),
        "guest.slice_us",
    );
}

/// `guest.slice_us` is not range-checked; `Engine::new` converts it with
/// `SimTime::from_us`, which panics ("SimTime overflow") above ~1.8e13 µs.
#[test]

fn huge_guest_slice_is_rejected_or_runs() {
    assert_rejected_or_runs(
        "guest-slice-huge",
        &native_pair("", &format!("slice_us = {BIG}"), "", ""),
        "guest.slice_us",
    );
}

/// `guest.switch_ns` is not range-checked; the switch cost becomes task
/// debt and `finish_work` panics computing `now + debt + work` (SimTime
/// overflow, engine.rs `finish_work`).
#[test]

fn huge_guest_switch_is_rejected_or_runs() {
    assert_rejected_or_runs(
        "guest-switch-huge",
        &native_pair("", &format!("switch_ns = {BIG}"), "", ""),
        "guest.switch_ns",
    );
}

/// Channel costs are not range-checked; `mpi::cost` computes
/// `per_kib * bytes` in u64 and overflows (a panic in debug builds, a
/// silently wrapped cost in release builds).
#[test]

fn huge_per_kib_cost_is_rejected_or_runs() {
    let mpi = format!("native = {{ latency_ns = 1, send_ns = 1, send_ns_per_kib = {BIG}, recv_ns = 1, recv_ns_per_kib = 1 }}");
    assert_rejected_or_runs(
        "per-kib-huge",
        &native_pair("", "", &mpi, ""),
        "send_ns_per_kib",
    );
}

/// `background` only checks 0 < work_us < interval_us; `build_domains`
/// multiplies both by 1000 in u64 and overflows above ~1.8e16 µs.
#[test]

fn huge_background_interval_is_rejected_or_runs() {
    let domain = format!("background = {{ interval_us = {BIG}, work_us = 10 }}");
    assert_rejected_or_runs(
        "background-huge",
        &native_pair("", "", "", &domain),
        "background",
    );
}
