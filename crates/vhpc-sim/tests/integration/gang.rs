//! Oracles for the `gang` scheduler: in strict mode a domain's vCPUs start
//! and stop together (read from the trace), two 2-vCPU domains on two cores
//! get half the host each; in relaxed mode no vCPU gets more than `skew_us`
//! ahead of a sibling, and a core no whole domain fits on is not wasted.

use std::collections::BTreeMap;

use serde_json::Value;
use vhpc_sim::Scenario;

use crate::util::{assert_invariants, run, run_ns};

/// `domains` domains of two vCPUs, each with a compute-bound two-rank job
/// (NPB EP class A, no jitter), on `cores` cores, cut at `limit_ms`.
fn busy_pairs(cores: usize, domains: usize, skew_us: u64, limit_ms: u64) -> String {
    let mut text = format!(
        r#"
name = "gang-busy"
limit_ms = {limit_ms}
[host]
cores = {cores}
[hypervisor]
scheduler = "gang"
gang = {{ skew_us = {skew_us} }}
"#
    );
    for d in 0..domains {
        text += &format!(
            r#"
[[domains]]
name = "d{d}"
vcpus = 2
[[jobs]]
name = "d{d}"
workload = "npb.ep"
ranks = ["d{d}", "d{d}"]
params = {{ class = "A", jitter_ppm = 0 }}
"#
        );
    }
    text
}

/// The trace's slices per vCPU name ("d0.v1"), as (start, end) in ns.
fn slices(trace: &Value) -> BTreeMap<String, Vec<(u64, u64)>> {
    let ns = |e: &Value, k: &str| (e[k].as_f64().expect("number") * 1e3).round() as u64;
    let mut out: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for e in trace["traceEvents"].as_array().expect("events") {
        if e["ph"] == "X" {
            let name = e["name"].as_str().expect("name").to_string();
            out.entry(name)
                .or_default()
                .push((ns(e, "ts"), ns(e, "ts") + ns(e, "dur")));
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Strict: vCPUs that never block run in exactly the same intervals as
/// their sibling (a domain is never split across time), whole domains take
/// 30 ms turns, and two 2-vCPU domains on two cores get 50 % each, within a
/// turn.
#[test]
fn strict_never_splits_a_domain_and_shares_by_turns() {
    let text = busy_pairs(2, 2, 0, 1_000);
    let sc = Scenario::from_toml(&text, "gang").unwrap_or_else(|e| panic!("{e}"));
    let turn = sc.hypervisor.tslice_us * 1000;
    let out = run(&text, "gang-strict", None, true);
    assert_invariants("gang-strict", &text, &out);
    let s = slices(out.trace.as_ref().expect("trace"));
    for d in ["d0", "d1"] {
        let (v0, v1) = (&s[&format!("{d}.v0")], &s[&format!("{d}.v1")]);
        assert!(v0.len() > 10, "{d}: only {} slices", v0.len());
        assert_eq!(v0, v1, "{d}'s vCPUs ran at different times");
        for &(a, b) in v0 {
            assert!(b - a <= turn, "{d} ran {} ns at once, past a turn", b - a);
        }
    }
    let r = &out.report;
    assert!(r.cores.iter().all(|c| c.idle_ns == 0));
    let (a, b) = (run_ns(r, "d0"), run_ns(r, "d1"));
    eprintln!(
        "gang strict 2 x 2 vCPUs on 2 cores: shares {:.4} / {:.4}",
        a as f64 / (2 * r.end_ns) as f64,
        b as f64 / (2 * r.end_ns) as f64
    );
    assert!(a.abs_diff(b) <= 2 * turn, "d0 {a} ns, d1 {b} ns");
}

/// Relaxed (skew 2 ms) with two 2-vCPU domains on three cores: the core no
/// whole domain fits on runs the other domain's vCPUs, one at a time, each
/// at most 2 ms ahead of its waiting sibling. Read back from the trace:
/// at every slice boundary, the two vCPUs of a domain have run within 2 ms
/// of each other (they never block, so run time is their progress). Strict
/// mode leaves that core idle.
#[test]
fn relaxed_bounds_the_skew_and_fills_the_spare_core() {
    let skew = 2_000_000u64;
    let text = busy_pairs(3, 2, skew / 1000, 1_000);
    let out = run(&text, "gang-relaxed", None, true);
    assert_invariants("gang-relaxed", &text, &out);
    let s = slices(out.trace.as_ref().expect("trace"));
    let ran_by = |v: &[(u64, u64)], t: u64| -> u64 {
        v.iter().map(|&(a, b)| b.min(t).saturating_sub(a)).sum()
    };
    let mut worst = 0;
    for d in ["d0", "d1"] {
        let (v0, v1) = (&s[&format!("{d}.v0")], &s[&format!("{d}.v1")]);
        let instants = v0.iter().chain(v1).flat_map(|&(a, b)| [a, b]);
        for t in instants {
            let gap = ran_by(v0, t).abs_diff(ran_by(v1, t));
            worst = worst.max(gap);
            assert!(gap <= skew, "{d} skewed by {gap} ns at {t} ns");
        }
    }
    let r = &out.report;
    let busy: u64 = r.cores.iter().map(|c| c.busy_ns).sum();
    let strict = run(&busy_pairs(3, 2, 0, 1_000), "gang-strict-3", None, false);
    let strict_busy: u64 = strict.report.cores.iter().map(|c| c.busy_ns).sum();
    eprintln!(
        "gang relaxed 2 ms on 3 cores: worst skew {worst} ns, utilisation {:.4} (strict {:.4})",
        busy as f64 / (3 * r.end_ns) as f64,
        strict_busy as f64 / (3 * strict.report.end_ns) as f64
    );
    assert_eq!(
        strict_busy,
        2 * strict.report.end_ns,
        "strict: one core idle"
    );
    assert!(
        busy > 29 * r.end_ns / 10,
        "relaxed: {busy} ns busy of 3 cores"
    );
}

/// The repository's gang scenario runs both ways, and in strict mode each
/// domU's ranks' vCPUs never run apart while both want the CPU.
#[test]
fn gang_pressure_scenario_runs_strict_and_relaxed() {
    let base = crate::util::scenario_file("gang-pressure.toml")
        .replace("limit_ms = 3600000", "limit_ms = 2000");
    for skew in [0, 500] {
        let text = base.replace("skew_us = 0", &format!("skew_us = {skew}"));
        let out = run(&text, "gang-pressure", None, true);
        assert_invariants("gang-pressure", &text, &out);
        assert!(run_ns(&out.report, "domU1") > 0 && run_ns(&out.report, "domU2") > 0);
    }
}
