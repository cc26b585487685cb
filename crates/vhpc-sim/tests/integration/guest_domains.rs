//! Oracles for the `linux` guest scheduler (scheduling domains): a lone task
//! never migrates; a pipe pair's round trip in closed form under each domain
//! layout (hierarchical: the pair stays split over two sibling vCPUs and each
//! hop wakes a halted vCPU; flat: the pair shares the waker's vCPU and each
//! hop is a guest context switch); compute-bound tasks on as many vCPUs stay
//! put; determinism; validation errors naming the field; and the default
//! `fixed` scheduler reports no guest section.

use vhpc_sim::Scenario;

use crate::util::{assert_invariants, field_of, run};

const HOP_NS: u64 = 443;
const SWITCH_NS: u64 = 1339;
const WAKE_NS: u64 = 3857;
/// One poll (`mpi.poll_ns` 20 × `polls_before_yield` 1) before a read blocks.
const POLL_NS: u64 = 20;

/// A 16-vCPU domain on 16 cores (credit, no over-commitment) running `job`
/// under the `linux` guest scheduler with `domains`.
fn scenario(domains: &str, job: &str, limit_ms: u64) -> String {
    format!(
        r#"
name = "guest-domains"
limit_ms = {limit_ms}
[host]
cores = 16
sockets = 2
numa_nodes = 2
[hypervisor]
scheduler = "credit"
[guest]
scheduler = "linux"
domains = "{domains}"
topology = {{ smt = 2, llc = 8 }}
switch_ns = {SWITCH_NS}
wake_halted_ns = {WAKE_NS}
[mpi]
polls_before_yield = 1
shm = {{ latency_ns = 0, send_ns = 0, send_ns_per_kib = 0, recv_ns = 0, recv_ns_per_kib = 0 }}
[[domains]]
name = "dom0"
vcpus = 16
{job}
"#
    )
}

fn pipe_job(pairs: usize, trips: u64) -> String {
    let ranks = vec!["\"dom0\""; 2 * pairs].join(", ");
    format!(
        r#"[[jobs]]
name = "pipe"
workload = "pipe"
ranks = [{ranks}]
wait_policy = "block"
params = {{ round_trips = {trips}, hop_ns = {HOP_NS} }}"#
    )
}

fn guest(report: &vhpc_sim::metrics::Report) -> &vhpc_sim::metrics::GuestReport {
    &report.guest.as_ref().expect("a guest section")[0]
}

#[test]
fn a_lone_compute_bound_task_never_migrates() {
    for domains in ["hierarchical", "flat"] {
        let job = r#"[[jobs]]
name = "ep"
workload = "npb.ep"
ranks = ["dom0"]
params = { class = "S" }"#;
        let text = scenario(domains, job, 3_600_000);
        let out = run(&text, "lone", None, false);
        assert_invariants("lone", &text, &out);
        assert!(out.report.finished);
        assert_eq!(guest(&out.report).migrations, 0, "{domains}");
    }
}

/// Round trips of one pipe pair, closed form: hierarchical 2 (hop + wake),
/// flat 2 (hop + poll + switch) after the first round trip (which moves the
/// wakee onto the waker's vCPU).
#[test]
fn a_pipe_pair_round_trip_in_closed_form() {
    let trips = 1000;
    let hier = run(
        &scenario("hierarchical", &pipe_job(1, trips), 3_600_000),
        "h",
        None,
        false,
    );
    let flat = run(
        &scenario("flat", &pipe_job(1, trips), 3_600_000),
        "f",
        None,
        false,
    );
    assert!(hier.report.finished && flat.report.finished);
    // vCPUs 0 and 1 are believed SMT siblings: the wakee's idle previous
    // vCPU shares the cache, so it stays there; every hop wakes a halted
    // vCPU. Only the last wake-up, after the partner exited, lands on the
    // partner's then idle vCPU (select_idle_sibling's first choice).
    assert!(guest(&hier.report).migrations <= 1);
    let per_trip = 2 * (HOP_NS + WAKE_NS);
    let end = hier.report.end_ns;
    assert!(
        end.abs_diff(trips * per_trip) <= per_trip,
        "hierarchical: {end} ns for {trips} round trips of {per_trip}"
    );
    // Flat: no cache domain, no idle search: the wakee queues on the
    // waker's vCPU, once, and stays.
    assert!((1..=2).contains(&guest(&flat.report).migrations));
    let per_trip = 2 * (HOP_NS + POLL_NS + SWITCH_NS);
    let end = flat.report.end_ns;
    assert!(
        end.abs_diff(trips * per_trip) <= 2 * per_trip + WAKE_NS,
        "flat: {end} ns for {trips} round trips of {per_trip}"
    );
    // Each hop switches the reader out once, in both layouts.
    for r in [&hier.report, &flat.report] {
        let cs = guest(r).context_switches;
        assert!(
            cs.abs_diff(2 * trips) <= 2,
            "{cs} switches for {trips} round trips"
        );
    }
}

#[test]
fn as_many_compute_bound_tasks_as_vcpus_stay_put() {
    let ranks = vec!["\"dom0\""; 16].join(", ");
    let job = format!(
        r#"[[jobs]]
name = "ep"
workload = "npb.ep"
ranks = [{ranks}]
params = {{ class = "S" }}"#
    );
    for domains in ["hierarchical", "flat"] {
        let text = scenario(domains, &job, 3_600_000);
        let out = run(&text, "even", None, false);
        assert_invariants("even", &text, &out);
        assert_eq!(guest(&out.report).migrations, 0, "{domains}");
    }
}

#[test]
fn migrations_are_deterministic_for_a_seed() {
    let ranks = vec!["\"dom0\""; 16].join(", ");
    let job = format!(
        r#"[[jobs]]
name = "make"
workload = "build"
ranks = [{ranks}]
wait_policy = "block"
params = {{ jobs = 5, dirs = 2, job_us = 10000 }}"#
    );
    for domains in ["hierarchical", "flat"] {
        let text = scenario(domains, &job, 3_600_000);
        let a = run(&text, "det", Some(7), false);
        let b = run(&text, "det", Some(7), false);
        assert_invariants("det", &text, &a);
        assert!(a.report.finished);
        assert!(
            guest(&a.report).migrations > 0,
            "{domains}: a build migrates"
        );
        assert_eq!(a.report, b.report, "{domains}");
    }
}

#[test]
fn the_default_fixed_scheduler_reports_no_guest_section() {
    let text = scenario("flat", &pipe_job(1, 10), 3_600_000).replace("scheduler = \"linux\"\n", "");
    let sc = Scenario::from_toml(&text, "t").unwrap();
    assert_eq!(sc.guest.scheduler, "fixed");
    let out = run(&text, "fixed", None, false);
    assert!(out.report.guest.is_none());
    assert!(out.report.ranks.iter().all(|r| r.migrations == 0));
}

#[test]
fn bad_guest_fields_are_errors_naming_the_field() {
    let ok = scenario("hierarchical", &pipe_job(1, 10), 100);
    let bad = |from: &str, to: &str| {
        assert!(ok.contains(from), "{from}");
        field_of(&ok.replace(from, to))
    };
    assert_eq!(
        bad("scheduler = \"linux\"", "scheduler = \"cfs\""),
        "guest.scheduler"
    );
    assert_eq!(
        bad("domains = \"hierarchical\"", "domains = \"none\""),
        "guest.domains"
    );
    assert_eq!(bad("llc = 8 }", "llc = 6 }"), "guest.topology.llc");
    assert_eq!(bad("smt = 2,", "smt = 3,"), "guest.topology.smt");
    assert_eq!(
        bad("llc = 8 }", "llc = 8, numa_nodes = 3 }"),
        "guest.topology.numa_nodes"
    );
    assert_eq!(bad("[guest]\n", "[guest]\ntick_us = 0\n"), "guest.tick_us");
    assert_eq!(
        bad("topology = {", "topology = { cores = 2,"),
        "guest.topology.cores"
    );
}
