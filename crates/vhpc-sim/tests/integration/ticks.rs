//! Timer noise (`domains.tick`, `hypervisor.host_tick`): closed forms of a
//! compute-only job's time under periodic ticks, tickless idle, determinism
//! and validation.
//!
//! Oracle: a lone compute job of `W` ns on its own core, with ticks every
//! `T` ns on a grid from time zero each costing `c`, ends at the least `C`
//! with `C = W + c × #{k ≥ 1 : k·T < C}`: each tick that finds it running
//! delays it by `c`, so its slowdown is about `c / T`.

use crate::util::{run, run_guarded};

/// One rank of NPB EP class S (no jitter) in a one-vCPU domain on one core;
/// `domain_tick` / `host_tick`: (hz, cost_ns).
fn lone_ep(
    domain_tick: Option<(u32, u64)>,
    host_tick: Option<(u32, u64)>,
    start_us: u64,
) -> String {
    let tick = |(hz, cost): (u32, u64)| format!("{{ hz = {hz}, cost_ns = {cost} }}");
    let host = host_tick.map_or(String::new(), |t| format!("host_tick = {}\n", tick(t)));
    let dom = domain_tick.map_or(String::new(), |t| format!("tick = {}\n", tick(t)));
    format!(
        "name = \"ticks\"\n[host]\ncores = 1\n[hypervisor]\nvcpu_switch_ns = 0\n{host}\
         [[domains]]\nname = \"a\"\n{dom}\
         [[jobs]]\nname = \"ep\"\nworkload = \"npb.ep\"\nranks = [\"a\"]\nstart_us = {start_us}\n\
         params = {{ class = \"S\", jitter_ppm = 0 }}\n"
    )
}

fn completion(text: &str) -> u64 {
    run(text, "ticks", None, false).report.jobs[0]
        .completion_ns
        .expect("finished")
}

/// The oracle's fixed point: `work` plus `cost` per tick (period `period`)
/// strictly before the end, for ticks of every (period, cost) given.
fn ticked(work: u64, start: u64, rates: &[(u64, u64)]) -> u64 {
    let mut end = start + work;
    loop {
        let extra: u64 = rates
            .iter()
            .map(|&(period, cost)| {
                // Ticks k·period in (start, end).
                let n = (end - 1) / period - start / period;
                n * cost
            })
            .sum();
        let next = start + work + extra;
        if next == end {
            return end - start;
        }
        end = next;
    }
}

#[test]
fn a_compute_job_pays_each_guest_tick_it_runs_through() {
    let work = completion(&lone_ep(None, None, 0));
    for (hz, cost) in [(1000, 7_000), (250, 3_000), (100, 40_000)] {
        let got = completion(&lone_ep(Some((hz, cost)), None, 0));
        let period = 1_000_000_000 / u64::from(hz);
        assert_eq!(
            got,
            ticked(work, 0, &[(period, cost)]),
            "{hz} Hz, {cost} ns"
        );
        // The slowdown is about cost / period (within one tick's cost).
        let expect = work as f64 * cost as f64 / (period - cost) as f64;
        assert!(
            ((got - work) as f64 - expect).abs() <= cost as f64,
            "{hz} Hz"
        );
    }
}

#[test]
fn host_and_guest_ticks_add_up() {
    let work = completion(&lone_ep(None, None, 0));
    let host = completion(&lone_ep(None, Some((100, 5_000)), 0));
    assert_eq!(host, ticked(work, 0, &[(10_000_000, 5_000)]));
    let both = completion(&lone_ep(Some((1000, 7_000)), Some((100, 5_000)), 0));
    assert_eq!(
        both,
        ticked(work, 0, &[(1_000_000, 7_000), (10_000_000, 5_000)])
    );
}

#[test]
fn a_sleeping_domain_takes_no_ticks() {
    // Tickless idle: asleep for 3.5 ms before it starts, it pays only the
    // ticks after its start (the grid stays anchored at time zero).
    let work = completion(&lone_ep(None, None, 0));
    let out = run(
        &lone_ep(Some((1000, 7_000)), None, 3_500),
        "late",
        None,
        false,
    );
    let got = out.report.jobs[0].completion_ns.expect("finished");
    assert_eq!(got, ticked(work, 3_500_000, &[(1_000_000, 7_000)]));
    assert_eq!(out.report.ranks[0].ticks * 7_000, got - work);
}

#[test]
fn an_idle_vcpu_beside_a_busy_one_is_not_charged() {
    // Two vCPUs, one rank: the other vCPU halts; the rank's time is the
    // one-vCPU oracle's, on the busy core alone.
    let text = lone_ep(Some((1000, 7_000)), None, 0)
        .replace("cores = 1", "cores = 2")
        .replace(
            "name = \"a\"\n",
            "name = \"a\"\nvcpus = 2\npin = [[0], [1]]\n",
        );
    let work = completion(&lone_ep(None, None, 0));
    assert_eq!(completion(&text), ticked(work, 0, &[(1_000_000, 7_000)]));
}

#[test]
fn ticks_are_deterministic_in_a_threaded_job() {
    let text = r#"
name = "omp-ticks"
[host]
cores = 4
[hypervisor]
host_tick = { hz = 100, cost_ns = 2000 }
[[domains]]
name = "dom0"
dom0 = true
vcpus = 4
[[domains]]
name = "vm"
vcpus = 4
tick = { hz = 1000, cost_ns = 4000 }
[[jobs]]
name = "cg"
workload = "npb.omp.cg"
ranks = ["vm", "vm", "vm", "vm"]
wait_policy = "block"
params = { class = "S" }
"#;
    let a = serde_json::to_string(&run(text, "a", Some(3), false).report).unwrap();
    let b = serde_json::to_string(&run(text, "b", Some(3), false).report).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("\"ticks\""), "some rank took a tick");
}

#[test]
fn bad_ticks_name_their_field() {
    for (bad, field) in [
        ("tick = { hz = 0, cost_ns = 10 }", "domains[0].tick.hz"),
        (
            "tick = { hz = 1000, cost_ns = 1000000 }",
            "domains[0].tick.cost_ns",
        ),
        ("tick = { hz = 1000 }", "cost_ns"),
    ] {
        let text =
            lone_ep(None, None, 0).replace("name = \"a\"\n", &format!("name = \"a\"\n{bad}\n"));
        let err = match run_guarded(&text, "bad.toml", false) {
            Ok(Err(e)) => e.to_string(),
            other => panic!("{bad} must be refused, got {other:?}"),
        };
        assert!(
            err.contains(field) && err.contains("bad.toml"),
            "{bad}: {err}"
        );
    }
    let text = lone_ep(None, Some((200_000, 1)), 0);
    let err = match run_guarded(&text, "bad.toml", false) {
        Ok(Err(e)) => e.to_string(),
        other => panic!("must be refused, got {other:?}"),
    };
    assert!(err.contains("hypervisor.host_tick.hz"), "{err}");
}
