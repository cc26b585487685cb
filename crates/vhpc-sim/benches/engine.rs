//! Engine throughput (`make bench-sim`, or `cargo bench -p vhpc-sim --bench engine`).
//!
//! Every group reports `Throughput::Elements(events)`, so criterion prints
//! events per second: for whole runs the events the engine handled
//! (`Report::events`, the same count `vhpc sim run` shows), for the queue one
//! pop and one push. Issue 15's target is 20 million events/s on the
//! scale scenario (measured whole by `make bench-sim`).
//!
//! * `pingpong_busy_poll_credit_2c`: a busy_poll ping-pong inside one VM on a
//!   2-core Credit host, each vCPU pinned to its own core (the message path:
//!   sends, arrivals, poll windows);
//! * `pressure_hv_yield_lu_w`: S0's pressure shape (`scenarios/s0-pressure.toml`)
//!   with 2 domUs running npb.lu class W under hv_yield (yields, Credit's
//!   accounting, dom0's background), one whole run;
//! * `scale_credit_48c_192dom_3s`: `scenarios/scale-credit-48c-192dom.toml`
//!   cut to 3 simulated seconds (many cores and vCPUs, slice timers);
//! * `event_queue_hold`: [`EventQueue`] alone, the classic hold model: with
//!   `n` events pending, pop the earliest and push one at a random later time.
//!
//! Scenarios are read from `scenarios/` and changed in code, then validated
//! again, so the benchmarks follow the files.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode, Throughput};
use vhpc_sim::scenario::Domain;
use vhpc_sim::{EventQueue, Scenario, SimTime};

/// Simulated seconds of the truncated scale scenario.
const SCALE_LIMIT_MS: u64 = 3_000;
const SEED: u64 = 1;

fn scenario_file(name: &str) -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (text, path.display().to_string())
}

fn load(name: &str) -> Scenario {
    let (text, origin) = scenario_file(name);
    Scenario::from_toml(&text, &origin).unwrap_or_else(|e| panic!("{e}"))
}

fn checked(scenario: Scenario, what: &str) -> Scenario {
    scenario.validate(what).unwrap_or_else(|e| panic!("{e}"));
    scenario
}

/// Events one run handles (runs are deterministic, so once is enough).
fn events_of(scenario: &Scenario) -> u64 {
    let report = vhpc_sim::run(scenario, Some(SEED), false).report;
    assert!(report.events > 0, "{}: no events", scenario.name);
    report.events
}

/// A 2-core Credit host, dom0 as in S0, one domU with two vCPUs pinned to
/// cores 0 and 1, two ranks ping-ponging 8 bytes with busy_poll.
fn pingpong_scenario() -> Scenario {
    let text = r#"
name = "bench-pingpong-busy-poll-credit-2c"

[host]
cores = 2

[hypervisor]
scheduler = "credit"

[[domains]]
name = "dom0"
dom0 = true
vcpus = 2
sedf = { period_us = 20000, slice_us = 15000, extratime = true }
background = { interval_us = 10000, work_us = 100 }

[[domains]]
name = "domU1"
vcpus = 2
pin = [[0], [1]]

[[jobs]]
name = "pingpong"
workload = "pingpong"
ranks = ["domU1", "domU1"]
wait_policy = "busy_poll"
params = { bytes = 8, iterations = 20000 }
"#;
    Scenario::from_toml(text, "benches/engine.rs: pingpong").unwrap_or_else(|e| panic!("{e}"))
}

/// `scenarios/s0-pressure.toml` with `domus` domUs, each running npb.lu
/// class W on its two vCPUs under hv_yield, as `vhpc reproduce s0` builds
/// its pressure cells (class W: 300 short iterations, about 1.5 million
/// events with 2 domUs, half of class A's).
fn pressure_scenario(domus: usize) -> Scenario {
    let mut sc = load("s0-pressure.toml");
    let template: Domain = sc.domains.iter().find(|d| !d.dom0).expect("a domU").clone();
    let job = sc.jobs[0].clone();
    sc.domains.retain(|d| d.dom0);
    sc.jobs.clear();
    for i in 1..=domus {
        let name = format!("domU{i}");
        sc.domains.push(Domain {
            name: name.clone(),
            ..template.clone()
        });
        let mut j = job.clone();
        j.name = name.clone();
        j.workload = "npb.lu".into();
        j.wait_policy = "hv_yield".into();
        j.ranks = vec![name; job.ranks.len()];
        j.params.insert("class".into(), "W".into());
        sc.jobs.push(j);
    }
    sc.name = format!("bench-pressure-{domus}domu-lu-w-hv-yield");
    checked(sc, "benches/engine.rs: pressure")
}

fn scale_scenario(limit_ms: u64) -> Scenario {
    let mut sc = load("scale-credit-48c-192dom.toml");
    sc.limit_ms = limit_ms;
    checked(sc, "benches/engine.rs: scale")
}

fn whole_run(c: &mut Criterion, name: &str, scenario: &Scenario, measurement_s: u64) {
    let events = events_of(scenario);
    let mut group = c.benchmark_group(name);
    // Flat sampling: every sample runs the same number of whole runs (a
    // run takes milliseconds to a tenth of a second, too long for criterion's
    // default 1, 2, .. n iterations per sample to fit the measurement time).
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(measurement_s))
        .throughput(Throughput::Elements(events));
    group.bench_function("run", |b| {
        b.iter(|| {
            let out = vhpc_sim::run(black_box(scenario), Some(SEED), false);
            debug_assert_eq!(out.report.events, events);
            black_box(out.report.events)
        })
    });
    group.finish();
}

fn engine_runs(c: &mut Criterion) {
    whole_run(c, "pingpong_busy_poll_credit_2c", &pingpong_scenario(), 3);
    whole_run(c, "pressure_hv_yield_lu_w", &pressure_scenario(2), 3);
    whole_run(
        c,
        "scale_credit_48c_192dom_3s",
        &scale_scenario(SCALE_LIMIT_MS),
        5,
    );
}

/// xorshift64: a fixed stream, no RNG state shared with anything.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// About the engine's event payload (an enum carrying a packet: 32 bytes).
type Payload = [u64; 4];

/// The hold model: `pending` events queued; each step pops the earliest and
/// pushes one at now + a random delay of up to 1 ms (as a simulation does).
fn event_queue(c: &mut Criterion) {
    const STEPS: u64 = 100_000;
    let mut group = c.benchmark_group("event_queue_hold");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(STEPS));
    for pending in [16usize, 256, 4096] {
        let setup = || {
            let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ pending as u64);
            let mut q: EventQueue<Payload> = EventQueue::with_capacity(pending + 1);
            for i in 0..pending as u64 {
                q.push(SimTime::from_ns(rng.next() % 1_000_000), [i; 4]);
            }
            (q, rng)
        };
        group.bench_function(format!("pending_{pending}"), |b| {
            b.iter_batched(
                setup,
                |(mut q, mut rng)| {
                    for _ in 0..STEPS {
                        let (now, ev) = q.pop().expect("hold keeps the queue full");
                        let delay = SimTime::from_ns(rng.next() % 1_000_000);
                        q.push(now + delay, black_box(ev));
                    }
                    q
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, engine_runs, event_queue);
criterion_main!(benches);
