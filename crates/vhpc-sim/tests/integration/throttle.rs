//! Concurrency throttling per parallel loop (`jobs.throttle = "search"`),
//! from its mechanism:
//!
//! * On a host with a core per thread and nothing else, a loop's part on `k`
//!   threads is `team / k` times a thread's: 3 threads take 4/3 of 4
//!   threads' time (plus the same barrier), so every loop tries 3 once and
//!   settles on 4, and the job is slower than unthrottled by about the one
//!   slower instance per loop.
//! * Without `throttle` nothing changes (the goldens); with it, the same
//!   seed gives the same report.
//! * Only an OpenMP-style job can throttle, and only by a known policy.

use vhpc_sim::metrics::Report;

use crate::util::{run, run_guarded};

/// NPB OpenMP-style `kernel` (class S, no jitter) on a 4-vCPU domain of a
/// 4-core host, alone.
fn omp(kernel: &str, throttle: Option<&str>) -> String {
    let throttle = throttle.map_or(String::new(), |t| format!("throttle = \"{t}\"\n"));
    format!(
        "name = \"throttle\"\n[host]\ncores = 4\n\
         [[domains]]\nname = \"vm\"\nvcpus = 4\n\
         [[jobs]]\nname = \"k\"\nworkload = \"{kernel}\"\nranks = [\"vm\", \"vm\", \"vm\", \"vm\"]\n\
         wait_policy = \"busy_poll\"\n{throttle}params = {{ class = \"S\", jitter_ppm = 0 }}\n"
    )
}

fn report(text: &str) -> Report {
    run(text, "throttle", Some(1), false).report
}

#[test]
fn loops_that_scale_try_one_thread_fewer_once_and_keep_the_team() {
    for kernel in ["npb.omp.cg", "npb.omp.mg", "npb.omp.ft"] {
        let with = report(&omp(kernel, Some("search")));
        let without = report(&omp(kernel, None));
        let loops = with.jobs[0]
            .throttle
            .as_ref()
            .expect("a throttled job reports its loops");
        assert!(!loops.is_empty(), "{kernel}");
        for l in loops {
            assert_eq!(l.threads, Some(4), "{kernel} step {}", l.step);
            let [(4, t4), (3, t3)] = l.tried[..] else {
                panic!("{kernel} step {}: tried {:?}", l.step, l.tried)
            };
            // 4/3 of the parts, the same barrier: between 1 and 4/3 times.
            assert!(t3 > t4 && 3 * t3 <= 4 * t4 + 3_000, "{kernel}: {t4} {t3}");
        }
        let (w, wo) = (
            with.jobs[0].completion_ns.unwrap(),
            without.jobs[0].completion_ns.unwrap(),
        );
        assert!(w > wo, "{kernel}: the search's slower instances cost time");
        assert!(without.jobs[0].throttle.is_none());
    }
}

#[test]
fn the_same_seed_gives_the_same_throttled_run() {
    let text = omp("npb.omp.cg", Some("search"));
    let a = serde_json::to_string(&report(&text)).unwrap();
    let b = serde_json::to_string(&report(&text)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_throttles_name_their_field() {
    for (kernel, policy, says) in [
        ("npb.omp.cg", "nope", "unknown throttling policy"),
        ("npb.cg", "search", "OpenMP-style"),
    ] {
        let text = omp(kernel, Some(policy));
        let err = match run_guarded(&text, "bad.toml", false) {
            Ok(Err(e)) => e.to_string(),
            other => panic!("{kernel} with {policy} must be refused, got {other:?}"),
        };
        assert!(
            err.contains("jobs[0].throttle") && err.contains("bad.toml") && err.contains(says),
            "{err}"
        );
    }
}
