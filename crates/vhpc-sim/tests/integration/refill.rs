//! Oracles for `refill` jobs (the lab's fully overlapped co-running jobs): a
//! job that ends while another's first run goes on is relaunched, its
//! completion stays its first run's, and the run ends with the last first run.

use vhpc_sim::metrics::Report;

use crate::util::{assert_invariants, run};

/// Two single-rank compute jobs (NPB EP without jitter): `short` (class S) and
/// `long` (class A), each in its own single-vCPU domain pinned to `cores`.
fn two_jobs(cores: (usize, usize), refill: bool) -> String {
    format!(
        r#"
name = "refill"
[host]
cores = 2
[hypervisor]
scheduler = "round_robin"
tslice_us = 1000
vcpu_switch_ns = 0

[[domains]]
name = "a"
pin = [[{}]]
[[domains]]
name = "b"
pin = [[{}]]

[[jobs]]
name = "short"
workload = "npb.ep"
ranks = ["a"]
refill = {refill}
params = {{ class = "S", jitter_ppm = 0 }}
[[jobs]]
name = "long"
workload = "npb.ep"
ranks = ["b"]
refill = {refill}
params = {{ class = "A", jitter_ppm = 0 }}
"#,
        cores.0, cores.1
    )
}

fn job<'a>(report: &'a Report, name: &str) -> &'a vhpc_sim::metrics::JobReport {
    report.jobs.iter().find(|j| j.name == name).expect("job")
}

fn completion(report: &Report, name: &str) -> u64 {
    job(report, name).completion_ns.expect("finished")
}

/// On cores of their own the jobs do not meet: the short one's completion is
/// its run alone, it is relaunched ⌊long / short⌋ times, and the simulation
/// ends with the long one's first run.
#[test]
fn a_short_job_is_relaunched_until_the_long_one_ends() {
    let alone = run(&two_jobs((0, 1), false), "alone", None, false).report;
    let (short, long) = (completion(&alone, "short"), completion(&alone, "long"));
    assert!(long > 2 * short, "class A must run longer than class S");
    let text = two_jobs((0, 1), true);
    let out = run(&text, "refill-apart", None, true);
    assert_invariants("refill-apart", &text, &out);
    let r = &out.report;
    assert_eq!(completion(r, "short"), short);
    assert_eq!(completion(r, "long"), long);
    assert_eq!(job(r, "short").runs, Some((long / short + 1) as u32));
    assert_eq!(job(r, "long").runs, None);
    assert_eq!(r.end_ns, long);
}

/// On one core, round robin shares it evenly while both run: without refill
/// the long job has the core to itself once the short one ends (it finishes
/// at long + short); with refill it shares the core to its end (2 × long),
/// within a quantum per start of the short job (a relaunched rank waits for
/// the running quantum to end).
#[test]
fn on_a_shared_core_the_long_job_shares_it_to_its_end() {
    let alone = run(&two_jobs((0, 1), false), "alone", None, false).report;
    let (short, long) = (completion(&alone, "short"), completion(&alone, "long"));
    let quantum = 1_000_000 * (2 * long / short + 1);
    for (refill, expected) in [(false, long + short), (true, 2 * long)] {
        let text = two_jobs((0, 0), refill);
        let out = run(&text, "refill-shared", None, true);
        assert_invariants("refill-shared", &text, &out);
        let got = completion(&out.report, "long");
        assert!(
            got.abs_diff(expected) <= quantum,
            "refill {refill}: long ended at {got} ns, expected {expected} ± {quantum}"
        );
    }
}
