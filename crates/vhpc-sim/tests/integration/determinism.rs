//! Determinism: a scenario and a seed fix the run bit for bit, whatever
//! else runs in the process; the seed is what varies a jittered run.

use crate::golden::{ADAPTIVE_BEFF_CREDIT, NPB_IS_CREDIT_DOM0, SEDF_EXCHANGE_BLOCK};
use crate::util::{run, scenario_file};

/// Ranks in two domUs talk through dom0, whose kernel housekeeping is a
/// random (Poisson) stream: the only randomness of this run.
const BACKGROUND_PINGPONG: &str = r#"
name = "background-pingpong"
[host]
cores = 1
[hypervisor]
scheduler = "credit"

[[domains]]
name = "dom0"
dom0 = true
background = { interval_us = 1000, work_us = 50 }

[[domains]]
name = "a"

[[domains]]
name = "b"

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["a", "b"]
wait_policy = "block"
params = { iterations = 200, bytes = 1024 }
"#;

/// Nothing random at all: no jitter, no background activity.
const PLAIN_PINGPONG: &str = r#"
name = "plain-pingpong"
[host]
cores = 1
[hypervisor]
scheduler = "credit"

[[domains]]
name = "d"
vcpus = 2

[[jobs]]
name = "pp"
workload = "pingpong"
ranks = ["d", "d"]
wait_policy = "hv_yield"
params = { iterations = 200, bytes = 100000 }
"#;

/// The report and trace of one run, serialised.
fn fingerprint(text: &str, seed: Option<u64>) -> (String, String) {
    let out = run(text, "determinism", seed, true);
    let report = serde_json::to_string(&out.report).expect("report serialises");
    let trace =
        serde_json::to_string(&out.trace.expect("trace asked for")).expect("trace serialises");
    (report, trace)
}

/// A repository scenario cut at 500 ms, with `edit` applied to its text.
fn cut(file: &str, edit: (&str, &str)) -> String {
    let text = scenario_file(file).replace("limit_ms = 3600000", "limit_ms = 500");
    assert!(text.contains("limit_ms = 500") && text.contains(edit.0));
    text.replace(edit.0, edit.1)
}

fn scenarios() -> Vec<(&'static str, String)> {
    vec![
        (
            "credit2-pressure, two sockets",
            cut(
                "credit2-pressure.toml",
                ("cores = 2", "cores = 2\nsockets = 2"),
            ),
        ),
        (
            "gang-pressure, relaxed",
            cut("gang-pressure.toml", ("skew_us = 0", "skew_us = 500")),
        ),
        ("npb-is-credit-dom0", NPB_IS_CREDIT_DOM0.to_string()),
        ("sedf-exchange-block", SEDF_EXCHANGE_BLOCK.to_string()),
        ("adaptive-beff-credit", ADAPTIVE_BEFF_CREDIT.to_string()),
        ("background-pingpong", BACKGROUND_PINGPONG.to_string()),
    ]
}

#[test]
fn same_seed_gives_identical_report_and_trace() {
    for (name, text) in scenarios() {
        let a = fingerprint(&text, Some(3));
        let b = fingerprint(&text, Some(3));
        assert!(
            a.0 == b.0,
            "{name}: two runs at seed 3 gave different reports"
        );
        assert!(
            a.1 == b.1,
            "{name}: two runs at seed 3 gave different traces"
        );
    }
}

#[test]
fn concurrent_runs_match_a_sequential_run() {
    for (name, text) in scenarios() {
        let sequential = fingerprint(&text, Some(11));
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| fingerprint(&text, Some(11)));
            let y = s.spawn(|| fingerprint(&text, Some(11)));
            (x.join().expect("thread x"), y.join().expect("thread y"))
        });
        assert!(
            x == sequential && y == sequential,
            "{name}: runs in two threads differ from the sequential run"
        );
    }
}

#[test]
fn seed_override_equals_scenario_seed() {
    let with_seed = format!("seed = 5\n{NPB_IS_CREDIT_DOM0}");
    assert_eq!(
        fingerprint(&with_seed, None),
        fingerprint(NPB_IS_CREDIT_DOM0, Some(5))
    );
    assert_eq!(run(&with_seed, "seed", None, false).report.seed, 5);
    // The override wins over the scenario's seed.
    assert_eq!(
        fingerprint(&with_seed, Some(9)),
        fingerprint(NPB_IS_CREDIT_DOM0, Some(9))
    );
}

#[test]
fn different_seeds_vary_a_jittered_workload() {
    // npb.is jitters every compute phase by 1 % by default.
    let runs: Vec<_> = (1..=3)
        .map(|seed| run(NPB_IS_CREDIT_DOM0, "is", Some(seed), false).report)
        .collect();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            assert_ne!(
                a.jobs[0].useful_ns, b.jobs[0].useful_ns,
                "seeds {} and {}: same useful time",
                a.seed, b.seed
            );
            assert_ne!(
                a.end_ns, b.end_ns,
                "seeds {} and {}: same end time",
                a.seed, b.seed
            );
        }
    }
    // Jitter stays within its bounds: ±1 % of the unjittered compute.
    let flat = NPB_IS_CREDIT_DOM0.replace(
        r#"params = { class = "S" }"#,
        r#"params = { class = "S", jitter_ppm = 0 }"#,
    );
    assert_ne!(flat, NPB_IS_CREDIT_DOM0);
    let nominal = run(&flat, "is-flat", Some(1), false).report.jobs[0].useful_ns as f64;
    for r in &runs {
        let rel = (r.jobs[0].useful_ns as f64 - nominal).abs() / nominal;
        assert!(
            rel <= 0.01,
            "seed {}: useful time {} is {rel:.4} off the unjittered {nominal}",
            r.seed,
            r.jobs[0].useful_ns
        );
    }
}

#[test]
fn seed_does_not_matter_without_randomness() {
    let a = run(PLAIN_PINGPONG, "plain", Some(1), false).report;
    let mut b = run(PLAIN_PINGPONG, "plain", Some(99), false).report;
    assert_eq!(b.seed, 99);
    b.seed = a.seed;
    assert_eq!(a, b, "a run without randomness must not depend on the seed");
}

#[test]
fn different_seeds_vary_background_activity() {
    let (a, b) = (
        run(BACKGROUND_PINGPONG, "background", Some(1), false).report,
        run(BACKGROUND_PINGPONG, "background", Some(2), false).report,
    );
    let dom0 = |r: &vhpc_sim::metrics::Report| {
        r.vcpus
            .iter()
            .filter(|v| v.domain == "dom0")
            .map(|v| v.run_ns)
            .collect::<Vec<_>>()
    };
    assert_ne!(
        dom0(&a),
        dom0(&b),
        "dom0's background work should depend on the seed"
    );
    assert_ne!(
        a.jobs[0].completion_ns, b.jobs[0].completion_ns,
        "and so should the job that shares its core"
    );
}
