//! Oracles for the `slicer` scheduler (the lab's freezer time slicer) and the
//! waits it exposes: closed forms derived from the scenario's slice, poll and
//! switch settings, read back from the parsed scenario.

use serde_json::Value;
use vhpc_sim::metrics::Report;
use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run, run_ns};

fn parse(text: &str) -> Scenario {
    Scenario::from_toml(text, "slicer").unwrap_or_else(|e| panic!("{e}"))
}

fn completion(report: &Report) -> u64 {
    report.jobs[0]
        .completion_ns
        .unwrap_or_else(|| panic!("the job did not finish: {report:?}"))
}

/// Two single-vCPU domains on `cores` cores (shared memory between them), a
/// ping-pong of `n` round trips between them under `policy`.
fn pingpong(policy: &str, n: u64, work_conserving: bool) -> String {
    format!(
        r#"
name = "slicer-pingpong-{policy}"
[host]
cores = 1
[hypervisor]
scheduler = "slicer"
tslice_us = 30000
slicer = {{ poll_us = 200, switch_us = 100, work_conserving = {work_conserving} }}
[mpi]
between_domains = "shm"

[[domains]]
name = "a"
[[domains]]
name = "b"

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "{policy}"
params = {{ iterations = {n}, bytes = 8 }}
"#
    )
}

/// The instant a slice started at `start` is found expired: the first poll
/// (polls fall on multiples of `poll`) at least `slice` later.
fn expiry(start: u64, slice: u64, poll: u64) -> u64 {
    (start + slice).div_ceil(poll) * poll
}

/// A rank that never yields keeps its domain busy, so every one-way message
/// waits for the slice to expire: switch, then the slice, rounded up to the
/// next poll. With a 30 ms slice, 0.2 ms polls and a 0.1 ms switch, a
/// domain's turn lasts exactly 30.2 ms, so 2N messages take 2N turns, less
/// the last turn's unused part.
#[test]
fn spin_pays_one_slice_per_message() {
    let n = 20;
    let text = pingpong("spin", n, true);
    let sc = parse(&text);
    let (slice, poll, switch) = (
        sc.hypervisor.tslice_us * 1000,
        sc.hypervisor.slicer.poll_us * 1000,
        sc.hypervisor.slicer.switch_us * 1000,
    );
    let turn = expiry(switch, slice, poll);
    assert_eq!(turn, 30_200_000);
    let out = run(&text, "spin", None, true);
    assert_invariants("slicer-spin", &text, &out);
    let t = completion(&out.report);
    // The first domain's first turn starts at 0 without a switch: 30.2 ms too
    // (its expiry is the first poll past 30 ms).
    let lower = (2 * n - 1) * turn;
    assert!(
        t > lower && t < lower + turn,
        "{t} ns, expected within the {}-th turn after {lower} ns",
        2 * n
    );
    assert_eq!(out.report.ranks.iter().map(|r| r.hv_yields).sum::<u64>(), 0);
}

/// With `block`, a waiting rank halts its vCPU; the slicer notices at its
/// next poll and switches, so a message costs at most a poll plus a switch
/// (plus the tiny copy costs), never a slice. Without work conservation the
/// idle domain keeps its slice and the message costs a slice again.
#[test]
fn work_conservation_turns_slices_into_polls() {
    let n = 50;
    let text = pingpong("block", n, true);
    let sc = parse(&text);
    let (poll, switch) = (
        sc.hypervisor.slicer.poll_us * 1000,
        sc.hypervisor.slicer.switch_us * 1000,
    );
    let out = run(&text, "block", None, false);
    let t = completion(&out.report);
    let per_message = t / (2 * n);
    assert!(
        per_message > switch && per_message <= poll + switch + 10_000,
        "work-conserving: {per_message} ns per message, expected within a poll ({poll}) plus a switch ({switch})"
    );
    let strict = run(&pingpong("block", 5, false), "block-strict", None, false);
    let per_message = completion(&strict.report) / 10;
    assert!(
        per_message >= 29_000_000,
        "not work-conserving: {per_message} ns per message, expected about a 30 ms slice"
    );
}

/// Gang scheduling: two 2-vCPU domains of compute-bound ranks (NPB EP, cut
/// at 1 s) on two cores.
/// No two vCPUs of different domains ever run at the same time, every core
/// idles only during switches, and the domains share the time equally.
#[test]
fn gang_never_overlaps_domains_and_shares_fairly() {
    let text = r#"
name = "slicer-gang"
limit_ms = 1000
[host]
cores = 2
[hypervisor]
scheduler = "slicer"

[[domains]]
name = "a"
vcpus = 2
[[domains]]
name = "b"
vcpus = 2

[[jobs]]
name = "a"
workload = "npb.ep"
ranks = ["a", "a"]
params = { class = "A", jitter_ppm = 0 }
[[jobs]]
name = "b"
workload = "npb.ep"
ranks = ["b", "b"]
params = { class = "A", jitter_ppm = 0 }
"#;
    let out = run(text, "gang", None, true);
    assert_invariants("slicer-gang", text, &out);
    let events = out.trace.as_ref().expect("trace")["traceEvents"]
        .as_array()
        .expect("events")
        .clone();
    let ns = |e: &Value, k: &str| (e[k].as_f64().expect("number") * 1e3).round() as u64;
    let mut slices: Vec<(u64, u64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            let name = e["name"].as_str().expect("name");
            let domain = name.split('.').next().expect("domain.vN").to_string();
            (ns(e, "ts"), ns(e, "ts") + ns(e, "dur"), domain)
        })
        .collect();
    slices.sort();
    assert!(
        slices.len() > 20,
        "expected many slices, got {}",
        slices.len()
    );
    for (i, a) in slices.iter().enumerate() {
        for b in &slices[i + 1..] {
            if b.0 >= a.1 {
                break;
            }
            assert_eq!(a.2, b.2, "domains {} and {} overlap: {a:?} {b:?}", a.2, b.2);
        }
    }
    let run_of = |d: &str| -> u64 {
        let r = &out.report;
        r.vcpus
            .iter()
            .filter(|v| v.domain == d)
            .map(|v| v.run_ns)
            .sum()
    };
    let (a, b) = (run_of("a"), run_of("b"));
    let slice = 2 * 30_200_000u64; // one turn on both cores
    assert!(
        a.abs_diff(b) <= slice,
        "a ran {a} ns, b {b} ns: more than a turn apart"
    );
    let idle: u64 = out.report.cores.iter().map(|c| c.idle_ns).sum();
    let turns = out.report.end_ns / 30_200_000 + 1;
    assert!(
        idle <= turns * 2 * 100_000,
        "{idle} ns idle over {turns} turns: more than a switch per turn per core"
    );
}

// ---- per-vCPU mode -----------------------------------------------------------

/// Domain `a` (weight 512, two vCPUs: one on each core) and domain `b`
/// (weight 256, one vCPU on core 1), every vCPU computing without end (NPB EP,
/// cut at `limit_ms`).
fn lopsided(slicing: &str, limit_ms: u64) -> String {
    format!(
        r#"
name = "slicer-{slicing}-lopsided"
limit_ms = {limit_ms}
[host]
cores = 2
[hypervisor]
scheduler = "slicer"
slicer = {{ slicing = "{slicing}", by_weight = true }}

[[domains]]
name = "a"
vcpus = 2
weight = 512
pin = [[0], [1]]
[[domains]]
name = "b"
weight = 256
pin = [[1]]

[[jobs]]
name = "a"
workload = "npb.ep"
ranks = ["a", "a"]
params = {{ class = "B", jitter_ppm = 0 }}
[[jobs]]
name = "b"
workload = "npb.ep"
ranks = ["b"]
params = {{ class = "B", jitter_ppm = 0 }}
"#
    )
}

/// Per vCPU, each core is sliced on its own: `a`'s vCPU alone on core 0 runs
/// all the time, core 1 is shared 2 : 1 by weight, so `a` runs 5/3 of the
/// time and `b` 1/3. As a gang, `a` holds both cores for 2/3 of the time and
/// core 0 idles while `b` runs: `a` runs 4/3, `b` 1/3. Within two slices and
/// the switches' cost.
#[test]
fn per_vcpu_slices_each_core_on_its_own_and_a_gang_does_not() {
    let limit_ms = 3000;
    let l = limit_ms * 1_000_000;
    for (slicing, a_thirds) in [("vcpu", 5), ("gang", 4)] {
        let text = lopsided(slicing, limit_ms);
        let sc = parse(&text);
        let out = run(&text, slicing, None, true);
        assert_invariants(&format!("lopsided-{slicing}"), &text, &out);
        let slice = sc.hypervisor.tslice_us * 1000;
        let (a, b) = (run_ns(&out.report, "a"), run_ns(&out.report, "b"));
        let switches = l / slice * sc.hypervisor.slicer.switch_us * 1000;
        let tol = 2 * slice + switches;
        for (name, got, want) in [("a", a, a_thirds * l / 3), ("b", b, l / 3)] {
            assert!(
                got.abs_diff(want) <= tol,
                "{slicing}: {name} ran {got} ns, expected {want} ± {tol}"
            );
        }
    }
}

/// A vCPU not pinned to exactly one core cannot be sliced per vCPU: the error
/// names the domain's field.
#[test]
fn per_vcpu_needs_one_core_per_vcpu() {
    let text = lopsided("vcpu", 10).replace("pin = [[0], [1]]", "pin = [[0, 1]]");
    let err = Scenario::from_toml(&text, "lopsided.toml").unwrap_err();
    assert_eq!(err.field, "domains[0].pin", "{err}");
    let text = lopsided("cluster", 10);
    let err = Scenario::from_toml(&text, "lopsided.toml").unwrap_err();
    assert_eq!(err.field, "hypervisor.slicer.slicing", "{err}");
}

/// The ping-pong of [`pingpong`] under the native slicer's watchers: a look of
/// 10 µs, an idle switch of 4 µs, the fallback poll left at 200 µs.
fn watched_pingpong(policy: &str, n: u64) -> String {
    pingpong(policy, n, true).replace(
        "slicer = { poll_us = 200, switch_us = 100, work_conserving = true }",
        "slicer = { poll_us = 200, switch_us = 100, work_conserving = true, watchers = true, \
         look_us = 10, idle_switch_us = 4 }",
    )
}

/// With watchers a blocked rank's domain is left one look after it blocks, at
/// the idle switch's cost, not at the next poll with the forced switch's: a
/// one-way message costs a look plus an idle switch plus the copies.
#[test]
fn watchers_leave_a_blocked_domain_after_one_look() {
    let n = 50;
    let text = watched_pingpong("block", n);
    let sc = parse(&text);
    let sl = &sc.hypervisor.slicer;
    // `block` polls a window before it blocks.
    let window = sc.mpi.poll_ns * sc.mpi.polls_before_yield;
    let floor = window + (sl.look_us + sl.idle_switch_us.expect("set")) * 1000;
    let out = run(&text, "watched-block", None, false);
    assert_invariants("watched-block", &text, &out);
    let per_message = completion(&out.report) / (2 * n);
    assert!(
        per_message >= floor && per_message <= floor + 5_000,
        "{per_message} ns per message, expected a poll window, a look and an idle switch \
         ({floor} ns) plus copies"
    );
}

/// libvhpc_wait's learned spin budget: a time-sliced ping-pong's waits last a
/// switch each way, longer than the 50 µs budget, so after 32 waits a rank
/// spins the 2 µs budget instead; without `adaptive_spin_min_us` it spins 50 µs
/// every wait.
#[test]
fn adaptive_learns_the_short_spin_when_waits_outlast_the_full_one() {
    let n = 200;
    // A 50 µs look: every wait outlasts the 50 µs budget.
    // libvhpc_wait's defaults: a 50 µs spin, then sleeps from 1 µs; each rank
    // on a core of its own (it does not share its CPU: no yields).
    let slow = watched_pingpong("adaptive", n)
        .replace("cores = 1", "cores = 2")
        .replace("name = \"a\"", "name = \"a\"\npin = [[0]]")
        .replace("name = \"b\"", "name = \"b\"\npin = [[1]]")
        .replace("look_us = 10", "look_us = 50")
        .replace(
            "between_domains = \"shm\"",
            "between_domains = \"shm\"\npoll_ns = 20\npolls_before_yield = 2500\n\
             adaptive_futile_yields = 1\nadaptive_sleep_min_us = 1",
        );
    let fixed = run(&slow, "fixed", None, false);
    let text = slow.replace(
        "between_domains = \"shm\"",
        "between_domains = \"shm\"\nadaptive_spin_min_us = 2",
    );
    let learned = run(&text, "learned", None, false);
    assert_invariants("learned", &text, &learned);
    let spun = |out: &vhpc_sim::RunOutput| out.report.ranks.iter().map(|r| r.poll_ns).sum::<u64>();
    let waits = 2 * n;
    let (f, l) = (spun(&fixed), spun(&learned));
    assert!(
        f >= waits * 50_000 * 9 / 10,
        "fixed budget: {f} ns spun over {waits} waits"
    );
    // The first 32 waits of each rank spin as with the fixed budget, the rest
    // 2 µs and the polls between sleeps.
    assert!(
        l < 2 * 32 * (f / waits) + waits * 10_000,
        "learned budget: {l} ns spun over {waits} waits (fixed: {f})"
    );
}
