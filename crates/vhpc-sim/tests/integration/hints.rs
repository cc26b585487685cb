//! Hint-driven control (`domains.hints = "cosched"`): what the policy may and
//! may not change, from its mechanism.
//!
//! * With nobody else on the host the domain's vCPUs never wait for a core,
//!   so the policy never acts: the report is the same byte for byte.
//! * Shielding: another domain's wake-up does not preempt a computing vCPU,
//!   so on one core a domain that never synchronises gives the core up only
//!   when Credit's slice ends: at most two switches per 30 ms slice.
//! * Hand-over: threads that wait while dom0 waits for a core block (the
//!   ranks count `blocks`); a spinning wait policy blocks only then.

use vhpc_sim::metrics::Report;

use crate::invariants::{POLICIES, SCHEDULERS};
use crate::util::{run, run_guarded};

fn report(text: &str) -> Report {
    run(text, "hints", Some(2), false).report
}

fn json(r: &Report) -> String {
    serde_json::to_string(r).unwrap()
}

/// An OpenMP-style CG (class S) on a 4-vCPU domU of a 4-core host, its
/// threads spinning at barriers (`busy_poll`); `dom0`: a floating dom0 with
/// S0's housekeeping beside it.
fn omp(hints: bool, dom0: bool) -> String {
    let dom0 = if dom0 {
        "[[domains]]\nname = \"dom0\"\ndom0 = true\nvcpus = 4\n\
         background = { interval_us = 10000, work_us = 100 }\n"
    } else {
        ""
    };
    let hints = if hints { "hints = \"cosched\"\n" } else { "" };
    format!(
        "name = \"omp\"\n[host]\ncores = 4\n{dom0}\
         [[domains]]\nname = \"vm\"\nvcpus = 4\n{hints}\
         [[jobs]]\nname = \"cg\"\nworkload = \"npb.omp.cg\"\nranks = [\"vm\", \"vm\", \"vm\", \"vm\"]\n\
         wait_policy = \"busy_poll\"\nparams = {{ class = \"S\" }}\n"
    )
}

#[test]
fn without_anyone_else_the_policy_changes_nothing() {
    assert_eq!(
        json(&report(&omp(true, false))),
        json(&report(&omp(false, false)))
    );
}

#[test]
fn waiting_threads_hand_their_cores_over_while_dom0_waits() {
    let with = report(&omp(true, true));
    let without = report(&omp(false, true));
    let blocks = |r: &Report| r.ranks.iter().map(|x| x.blocks).sum::<u64>();
    // busy_poll never blocks by itself: every block is a hand-over.
    assert_eq!(blocks(&without), 0);
    assert!(blocks(&with) > 0);
    // Same seed, same result.
    assert_eq!(json(&with), json(&report(&omp(true, true))));
}

/// One core; domU `a` computes NPB EP class A (one rank, no synchronisation
/// until its end) beside dom0's housekeeping.
fn one_core(hints: bool) -> String {
    let hints = if hints { "hints = \"cosched\"\n" } else { "" };
    format!(
        "name = \"shield\"\n[host]\ncores = 1\n[hypervisor]\ntslice_us = 30000\n\
         [[domains]]\nname = \"dom0\"\ndom0 = true\n\
         background = {{ interval_us = 10000, work_us = 100 }}\n\
         [[domains]]\nname = \"a\"\n{hints}\
         [[jobs]]\nname = \"ep\"\nworkload = \"npb.ep\"\nranks = [\"a\"]\n\
         params = {{ class = \"A\", jitter_ppm = 0 }}\n"
    )
}

#[test]
fn a_computing_vcpu_is_preempted_only_when_its_slice_ends() {
    let with = report(&one_core(true));
    let without = report(&one_core(false));
    let end = with.jobs[0].completion_ns.expect("finished");
    let slices = end.div_ceil(30_000_000);
    // Each slice end may hand the core to dom0 and back.
    let bound = 2 * slices + 2;
    assert!(
        with.cores[0].vcpu_switches <= bound,
        "{} > {bound}",
        with.cores[0].vcpu_switches
    );
    // Without the policy dom0's every wake-up preempts it.
    assert!(without.cores[0].vcpu_switches > bound);
}

#[test]
fn bad_hints_name_their_field() {
    for (bad, field, domain) in [
        ("hints = \"nope\"", "domains[1].hints", "vm"),
        ("hints = \"cosched\"", "domains[0].hints", "dom0"),
    ] {
        let text = omp(false, true).replace(
            &format!("name = \"{domain}\"\n"),
            &format!("name = \"{domain}\"\n{bad}\n"),
        );
        let err = match run_guarded(&text, "bad.toml", false) {
            Ok(Err(e)) => e.to_string(),
            other => panic!("{bad} in {domain} must be refused, got {other:?}"),
        };
        assert!(err.contains(field) && err.contains("bad.toml"), "{err}");
    }
}

/// The oversubscribed mixed host of `invariants.rs` with both VMs under
/// `cosched`, guest ticks on every domain and the host's tick: under every
/// scheduler and wait policy the run's accounting invariants hold.
#[test]
fn invariants_hold_with_hints_and_ticks_under_every_scheduler_and_policy() {
    for scheduler in SCHEDULERS {
        for policy in POLICIES {
            let text = crate::invariants::mixed(scheduler, policy)
                .replace(
                    "tslice_us = 10000\n",
                    "tslice_us = 10000\nhost_tick = { hz = 250, cost_ns = 3000 }\n",
                )
                .replace(
                    "name = \"vm1\"\n",
                    "name = \"vm1\"\nhints = \"cosched\"\ntick = { hz = 1000, cost_ns = 5000 }\n",
                )
                .replace(
                    "name = \"vm2\"\n",
                    "name = \"vm2\"\nhints = \"cosched\"\ntick = { hz = 100, cost_ns = 5000 }\n",
                )
                .replace(
                    "name = \"noise\"\npin",
                    "name = \"noise\"\ntick = { hz = 300, cost_ns = 2000 }\npin",
                );
            assert_eq!(text.matches("hints").count(), 2, "{text}");
            let label = format!("mixed-hints-{scheduler}-{policy}");
            let out = match run_guarded(&text, &label, true) {
                Ok(Ok(out)) => out,
                other => panic!("{label}: {other:?}"),
            };
            crate::util::assert_invariants(&label, &text, &out);
            assert!(out.report.ranks.iter().any(|r| r.ticks > 0), "{label}");
        }
    }
}
