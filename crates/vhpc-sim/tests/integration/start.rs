//! Oracles for a job's `start_us`: its ranks sleep until then, and its
//! completion counts from then, so a job alone takes as long whenever it
//! starts, and under a rigid slicer its time is a closed form of where in the
//! slicer's round it starts (what `vhpc lab predict` averages over).

use vhpc_sim::metrics::Report;

use crate::util::{assert_invariants, run};

/// One single-rank compute job (NPB EP class S without jitter) in domain `a`,
/// starting at `start_us`, beside `noise` (an endless loop) in domain `b`, both
/// on one core under a slicer of 30 ms slices that never switches early (the
/// round is rigid: `a` runs [0, 30) ms, `b` [30, 60) ms, and so on) and
/// switches for free. Without `noise` the job is alone (no domain `b`).
fn job_beside_noise(start_us: u64, noise: bool) -> String {
    let (domain_b, noise) = if noise {
        (
            "[[domains]]\nname = \"b\"\n",
            "[[jobs]]\nname = \"noise\"\nworkload = \"noise\"\nranks = [\"b\"]\n",
        )
    } else {
        ("", "")
    };
    format!(
        r#"
name = "start-{start_us}"
[host]
cores = 1
[hypervisor]
scheduler = "slicer"
tslice_us = 30000
vcpu_switch_ns = 0
slicer = {{ poll_us = 100, switch_us = 0, work_conserving = false }}

[[domains]]
name = "a"
{domain_b}
[[jobs]]
name = "ep"
workload = "npb.ep"
ranks = ["a"]
start_us = {start_us}
params = {{ class = "S", jitter_ppm = 0 }}
{noise}"#
    )
}

fn completion(report: &Report) -> u64 {
    report.jobs[0].completion_ns.expect("the job finished")
}

/// Time to do `work` ns of computing from `start` when the job's domain runs
/// [k·round, k·round + slice) only.
fn sliced_time(work: u64, start: u64, slice: u64, round: u64) -> u64 {
    let (mut now, mut left) = (start, work);
    while left > 0 {
        let into = now % round;
        if into < slice {
            let run = left.min(slice - into);
            left -= run;
            now += run;
        } else {
            now += round - into;
        }
    }
    now - start
}

#[test]
fn a_job_alone_takes_as_long_whenever_it_starts() {
    let at0 = run(&job_beside_noise(0, false), "alone-0", None, false).report;
    let at7 = run(&job_beside_noise(7_000, false), "alone-7", None, false).report;
    assert_eq!(completion(&at0), completion(&at7));
    // The rank's finish is absolute: its start plus its completion.
    assert_eq!(at7.ranks[0].finish_ns, Some(7_000_000 + completion(&at7)));
}

#[test]
fn under_a_rigid_slicer_the_time_follows_the_start_in_the_round() {
    let work = completion(&run(&job_beside_noise(0, false), "alone", None, false).report);
    let (slice, round) = (30_000_000, 60_000_000);
    for start_us in [0, 10_000, 29_000, 30_000, 45_000] {
        let text = job_beside_noise(start_us, true);
        let out = run(&text, "beside-noise", None, false);
        assert_invariants("beside-noise", &text, &out);
        assert_eq!(
            completion(&out.report),
            sliced_time(work, start_us * 1000, slice, round),
            "start at {start_us} µs"
        );
    }
}

#[test]
fn a_start_after_the_runs_end_is_refused_naming_the_field() {
    let text = job_beside_noise(0, false)
        .replace("name = \"start-0\"", "name = \"late\"\nlimit_ms = 5")
        .replace("start_us = 0", "start_us = 5000");
    let err = vhpc_sim::Scenario::from_toml(&text, "late.toml").unwrap_err();
    assert_eq!(err.field, "jobs[0].start_us", "{err}");
}

/// The same job timed from its timed part: after `untimed_us` of set-up, once
/// its rank has run (`timed_from = "all_ranks_ran"`).
fn timed_part_beside_noise(start_us: u64, untimed_us: u64) -> String {
    job_beside_noise(start_us, true).replace(
        &format!("start_us = {start_us}\n"),
        &format!(
            "start_us = {start_us}\ntimed_from = \"all_ranks_ran\"\nuntimed_us = {untimed_us}\n"
        ),
    )
}

#[test]
fn a_timed_part_starts_after_its_set_up_not_while_the_job_waits_for_its_slice() {
    let work = completion(&run(&job_beside_noise(0, false), "alone", None, false).report);
    let (slice, round) = (30_000_000, 60_000_000);
    // Launched at 45 ms, in `b`'s slice: timed from launch it waits 15 ms first;
    // timed from its part it starts at 60 ms, when `a` runs, after no set-up.
    let out = run(
        &timed_part_beside_noise(45_000, 0),
        "timed-part",
        None,
        false,
    );
    assert_eq!(completion(&out.report), sliced_time(work, 0, slice, round));
    // After 10 ms of set-up the timed part starts 10 ms into `a`'s slice.
    for untimed_us in [10_000, 29_000] {
        let text = timed_part_beside_noise(45_000, untimed_us);
        let out = run(&text, "after-set-up", None, false);
        assert_invariants("after-set-up", &text, &out);
        assert_eq!(
            completion(&out.report),
            sliced_time(work, untimed_us * 1000, slice, round),
            "after {untimed_us} µs of set-up"
        );
    }
}

#[test]
fn set_up_work_outside_a_timed_part_is_refused_naming_the_field() {
    let text = job_beside_noise(0, false).replace("start_us = 0", "start_us = 0\nuntimed_us = 5");
    let err = vhpc_sim::Scenario::from_toml(&text, "setup.toml").unwrap_err();
    assert_eq!(err.field, "jobs[0].untimed_us", "{err}");
}
