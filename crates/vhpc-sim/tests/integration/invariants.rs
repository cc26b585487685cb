//! Run invariants (see `util::check_invariants`) over every scheduler and
//! wait policy, the repository's scenarios, and the golden scenarios.

use crate::golden::{ADAPTIVE_BEFF_CREDIT, NPB_IS_CREDIT_DOM0, SEDF_EXCHANGE_BLOCK};
use crate::util::{assert_invariants, run, scenario_file};

pub(crate) const SCHEDULERS: [&str; 7] = [
    "credit",
    "credit2",
    "sedf",
    "linux",
    "slicer",
    "gang",
    "round_robin",
];
pub(crate) const POLICIES: [&str; 5] = ["busy_poll", "spin", "hv_yield", "block", "adaptive"];

/// An oversubscribed two-core host: dom0 with background activity relaying
/// an NPB IS job across two domUs, a rendezvous ping-pong and an exchange
/// sharing the domUs' vCPUs (two ranks per vCPU), and a noise VM.
pub(crate) fn mixed(scheduler: &str, policy: &str) -> String {
    format!(
        r#"
name = "mixed-{scheduler}-{policy}"
limit_ms = 4000
[host]
cores = 2
[hypervisor]
scheduler = "{scheduler}"
tslice_us = 10000

[[domains]]
name = "dom0"
dom0 = true
background = {{ interval_us = 5000, work_us = 50 }}
sedf = {{ period_us = 20000, slice_us = 5000, extratime = true }}

[[domains]]
name = "vm1"
vcpus = 2
sedf = {{ period_us = 10000, slice_us = 3000, extratime = true }}

[[domains]]
name = "vm2"
vcpus = 2
pin = [[1]]
cap = 150
background = {{ interval_us = 20000, work_us = 200 }}

[[domains]]
name = "noise"
pin = [[0]]
weight = 128

[[jobs]]
name = "is"
workload = "npb.is"
ranks = ["vm1", "vm2", "vm1", "vm2"]
wait_policy = "{policy}"
params = {{ class = "S" }}

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["vm1", "vm1"]
wait_policy = "{policy}"
params = {{ iterations = 30, bytes = 100000 }}

[[jobs]]
name = "ex"
workload = "exchange"
ranks = ["vm2", "vm2"]
wait_policy = "{policy}"
params = {{ iterations = 20, compute_us = 300, bytes = 64, jitter_ppm = 50000 }}

[[jobs]]
name = "noise"
workload = "noise"
ranks = ["noise"]
"#
    )
}

#[test]
fn invariants_hold_for_every_scheduler_and_policy() {
    for scheduler in SCHEDULERS {
        for policy in POLICIES {
            let text = mixed(scheduler, policy);
            let label = format!("mixed-{scheduler}-{policy}");
            let out = run(&text, &label, Some(1), true);
            assert_invariants(&label, &text, &out);
        }
    }
}

/// Relaxed gang scheduling on the mixed host: skew bounds, backfilled cores.
#[test]
fn invariants_hold_for_relaxed_gang_and_every_policy() {
    for policy in POLICIES {
        let text = mixed("gang", policy).replace(
            "tslice_us = 10000\n",
            "tslice_us = 10000\ngang = { skew_us = 300 }\n",
        );
        assert!(text.contains("skew_us"));
        let label = format!("mixed-gang-relaxed-{policy}");
        let out = run(&text, &label, Some(1), true);
        assert_invariants(&label, &text, &out);
    }
}

/// Every wait policy on the S0 intra-VM setup: the two ranks' vCPUs share
/// one core, and with every policy (but busy_poll) the job finishes fast.
#[test]
fn invariants_hold_for_every_policy_on_the_s0_intra_vm_setup() {
    let base = scenario_file("s0-beff-intra-vm-credit-pin.toml");
    for scheduler in SCHEDULERS {
        for policy in POLICIES {
            let text = edit(&base, |doc| {
                doc.insert("limit_ms".into(), 60_000.into());
                doc["hypervisor"]["scheduler"] = scheduler.into();
                doc["jobs"][0]["wait_policy"] = policy.into();
            });
            let label = format!("s0-intra-{scheduler}-{policy}");
            let out = run(&text, &label, Some(1), true);
            assert_invariants(&label, &text, &out);
        }
    }
}

#[test]
fn invariants_hold_for_the_repository_scenarios() {
    let dir = crate::util::crate_path("../../scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert!(
        names.iter().any(|n| n.starts_with("s0-")),
        "expected the S0 scenarios in {}",
        dir.display()
    );
    for name in names {
        let text = scenario_file(&name);
        // Big scenarios: only the first simulated half second (debug builds).
        let text = if name.starts_with("scale-") {
            with_limit(&text, 500)
        } else {
            text
        };
        let out = run(&text, &name, None, true);
        assert_invariants(&name, &text, &out);
    }
}

/// The scenario with its top-level `limit_ms` replaced.
fn with_limit(text: &str, limit_ms: u64) -> String {
    edit(text, |doc| {
        doc.insert("limit_ms".into(), toml::Value::Integer(limit_ms as i64));
    })
}

/// The scenario text after `f` changed its TOML document.
fn edit(text: &str, f: impl FnOnce(&mut toml::Table)) -> String {
    let mut doc: toml::Table = text.parse().expect("scenario is TOML");
    f(&mut doc);
    toml::to_string(&doc).expect("TOML serialises")
}

#[test]
fn invariants_hold_for_the_golden_scenarios_at_several_seeds() {
    for (name, text) in [
        ("sedf-exchange-block", SEDF_EXCHANGE_BLOCK),
        ("npb-is-credit-dom0", NPB_IS_CREDIT_DOM0),
        ("adaptive-beff-credit", ADAPTIVE_BEFF_CREDIT),
    ] {
        for seed in [1, 2, 3] {
            let out = run(text, name, Some(seed), true);
            assert_invariants(&format!("{name} seed {seed}"), text, &out);
        }
    }
}

/// A run cut short by `limit_ms` still accounts every nanosecond.
#[test]
fn invariants_hold_when_the_limit_stops_the_run() {
    let text = with_limit(&mixed("credit", "busy_poll"), 7);
    let out = run(&text, "limited", Some(1), true);
    assert_invariants("limited", &text, &out);
    let r = &out.report;
    assert!(!r.finished);
    assert_eq!(r.end_ns, 7_000_000);
    assert!(r
        .jobs
        .iter()
        .any(|j| j.completion_ns.is_none() && j.workload != "noise"));
}
