//! Property tests: random valid scenarios run without panicking and keep
//! every invariant; random invalid ones are rejected with an error naming
//! the file and the field; arbitrary text never panics the parser.

use proptest::prelude::*;
use proptest::sample::select;
use toml::{Table, Value};
use vhpc_sim::Scenario;

use crate::util::{check_invariants, run_guarded};

/// `slicer-vcpu` is the slicer with `slicing = "vcpu"`: every vCPU pinned to one core.
const SCHEDULERS: [&str; 8] = [
    "credit",
    "credit2",
    "sedf",
    "linux",
    "slicer",
    "slicer-vcpu",
    "gang",
    "round_robin",
];
const POLICIES: [&str; 5] = ["busy_poll", "spin", "hv_yield", "block", "adaptive"];
const WORKLOADS: [&str; 5] = ["pingpong", "exchange", "npb.is", "beff", "noise"];
/// Message sizes around the protocol limits (eager limit, chunk size).
const BYTES: [i64; 7] = [0, 8, 1024, 32768, 65536, 65537, 150_000];

/// `cases` random cases, or `PROPTEST_CASES` for a deeper search.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        // A failing case is printed; no regression files in the source tree.
        failure_persistence: None,
        max_shrink_iters: 256,
        // A hang costs a RUN_TIMEOUT per shrink step: bound the search.
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

// ---- random valid scenarios -------------------------------------------------

#[derive(Debug, Clone)]
struct DomSpec {
    vcpus: usize,
    /// 0: no pinning, 1: one list for all vCPUs, 2: one list per vCPU.
    pin_mode: u8,
    /// Core subsets as bit masks (reduced modulo the host's cores).
    masks: [u8; 3],
    weight: u32,
    /// Percent of one core (0 = uncapped); scaled by the vCPU count.
    cap: u32,
    sedf_period_ms: u64,
    sedf_slice_pct: u64,
    extratime: bool,
    /// (interval_us, work_us).
    background: Option<(u64, u64)>,
}

#[derive(Debug, Clone)]
struct JobSpec {
    workload: usize,
    /// Chooses the rank count among the workload's legal ones.
    size: usize,
    /// Domain of each rank (reduced modulo the number of domUs).
    doms: [usize; 4],
    policy: usize,
    iterations: i64,
    bytes: i64,
    compute_us: i64,
    jitter_ppm: i64,
    log2: (i64, i64),
    reps: i64,
}

#[derive(Debug, Clone)]
struct Spec {
    cores: usize,
    scheduler: usize,
    tslice_ms: i64,
    limit_ms: i64,
    /// dom0 if wanted (forced when a job spans domains): (vcpus, pin mask).
    dom0: Option<(usize, u8)>,
    domus: Vec<DomSpec>,
    jobs: Vec<JobSpec>,
    /// (poll_ns, polls_before_yield): windows of 5 to 50 µs.
    poll: (i64, i64),
    /// (eager_limit, local_send_limit or -1 for none).
    eager_limit: (i64, i64),
    chunk_bytes: i64,
    window: i64,
    guest_slice_us: i64,
    knobs: Knobs,
}

/// Scheduler, guest and MPI settings beyond the defaults.
#[derive(Debug, Clone)]
struct Knobs {
    tick_us: i64,
    ticks_per_acct: i64,
    ratelimit_us: i64,
    boost: bool,
    extra_quantum_us: i64,
    vcpu_switch_ns: i64,
    guest_switch_ns: i64,
    futile_yields: i64,
    /// (adaptive_sleep_min_us, adaptive_sleep_max_us).
    sleep_us: (i64, i64),
    /// Zero latency and copy costs inside a domain.
    free_shm: bool,
    /// Makes the first domU a native OS.
    native: bool,
    /// Rendezvous transfers of a rank pair take turns in one copy buffer
    /// (inside a domain, and between domains).
    shared_copy_buffer: (bool, bool),
    seed: i64,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        select(vec![10_000i64, 1000, 7, 333]),
        1..=5i64,
        select(vec![0i64, 500, 30_000]),
        prop_oneof![3 => Just(true), 1 => Just(false)],
        select(vec![500i64, 100, 5000]),
        select(vec![2000i64, 0, 50_000]),
        select(vec![1500i64, 0, 20_000]),
        0..=8i64,
        (1..=100i64, 0..=2000i64),
        prop_oneof![4 => Just(false), 1 => Just(true)],
        (
            prop_oneof![6 => Just(false), 1 => Just(true)],
            any::<(bool, bool)>(),
        ),
        0..=i64::MAX,
    )
        .prop_map(
            |(
                tick_us,
                ticks_per_acct,
                ratelimit_us,
                boost,
                extra_quantum_us,
                vcpu_switch_ns,
                guest_switch_ns,
                futile_yields,
                sleep,
                free_shm,
                (native, shared_copy_buffer),
                seed,
            )| Knobs {
                tick_us,
                ticks_per_acct,
                ratelimit_us,
                boost,
                extra_quantum_us,
                vcpu_switch_ns,
                guest_switch_ns,
                futile_yields,
                sleep_us: (sleep.0, sleep.0 + sleep.1),
                free_shm,
                native,
                shared_copy_buffer,
                seed,
            },
        )
}

fn dom_spec() -> impl Strategy<Value = DomSpec> {
    (
        1..=3usize,
        0..3u8,
        any::<[u8; 3]>(),
        prop_oneof![Just(256u32), 1..=1024u32],
        prop_oneof![3 => Just(0u32), 1 => 10..=100u32],
        5..=100u64,
        0..=100u64,
        prop_oneof![4 => Just(true), 1 => Just(false)],
        proptest::option::weighted(0.3, (1000..=20_000u64, 1..=500u64)),
    )
        .prop_map(
            |(
                vcpus,
                pin_mode,
                masks,
                weight,
                cap,
                sedf_period_ms,
                sedf_slice_pct,
                extratime,
                background,
            )| DomSpec {
                vcpus,
                pin_mode,
                masks,
                weight,
                cap,
                sedf_period_ms,
                sedf_slice_pct,
                extratime,
                background,
            },
        )
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        prop_oneof![4 => 0..4usize, 1 => Just(4usize)],
        0..3usize,
        any::<[u8; 4]>(),
        0..POLICIES.len(),
        1..=20i64,
        select(BYTES.to_vec()),
        0..=2000i64,
        0..=100_000i64,
        (0..=12i64, 0..=12i64),
        1..=3i64,
    )
        .prop_map(
            |(
                workload,
                size,
                doms,
                policy,
                iterations,
                bytes,
                compute_us,
                jitter_ppm,
                log2,
                reps,
            )| JobSpec {
                workload,
                size,
                doms: doms.map(usize::from),
                policy,
                iterations,
                bytes,
                compute_us,
                jitter_ppm,
                log2,
                reps,
            },
        )
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        1..=4usize,
        0..SCHEDULERS.len(),
        1..=30i64,
        10..=1000i64,
        proptest::option::of((1..=2usize, any::<u8>())),
        proptest::collection::vec(dom_spec(), 1..=4),
        proptest::collection::vec(job_spec(), 1..=3),
        select(vec![(20i64, 1000i64), (5, 1000), (50, 100), (10, 5000)]),
        select(vec![
            (0i64, -1i64),
            (1024, -1),
            (65536, -1),
            (1024, 256),
            (65536, 0),
            (65536, 8192),
        ]),
        select(vec![1024i64, 32768]),
        1..=8i64,
        (select(vec![500i64, 4000]), knobs()),
    )
        .prop_map(
            |(
                cores,
                scheduler,
                tslice_ms,
                limit_ms,
                dom0,
                domus,
                jobs,
                poll,
                eager_limit,
                chunk_bytes,
                window,
                (guest_slice_us, knobs),
            )| Spec {
                cores,
                scheduler,
                tslice_ms,
                limit_ms,
                dom0,
                domus,
                jobs,
                poll,
                eager_limit,
                chunk_bytes,
                window,
                guest_slice_us,
                knobs,
            },
        )
}

/// A bit mask as a non-empty list of existing cores.
fn cores_of(mask: u8, cores: usize) -> Value {
    let set: Vec<Value> = (0..cores)
        .filter(|c| mask >> c & 1 == 1)
        .map(|c| Value::Integer(c as i64))
        .collect();
    if set.is_empty() {
        Value::Array(vec![Value::Integer(i64::from(mask) % cores as i64)])
    } else {
        Value::Array(set)
    }
}

/// One core per vCPU (the slicer's per-vCPU mode): the lowest core of its mask.
fn one_core_each(vcpus: usize, masks: &[u8; 3], cores: usize) -> Value {
    let first = |mask: u8| (0..cores).find(|c| mask >> c & 1 == 1).unwrap_or(0);
    Value::Array(
        (0..vcpus)
            .map(|v| Value::Array(vec![Value::Integer(first(masks[v % 3]) as i64)]))
            .collect(),
    )
}

fn table(pairs: Vec<(&str, Value)>) -> Table {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The rank count a job gets: what its workload accepts.
fn rank_count(workload: &str, size: usize) -> usize {
    match workload {
        "npb.is" => [1, 2, 4][size % 3],
        "noise" => [1, 2][size % 2],
        _ => [2, 4][size % 2],
    }
}

fn params(j: &JobSpec) -> Table {
    let int = Value::Integer;
    match WORKLOADS[j.workload] {
        "pingpong" => table(vec![
            ("iterations", int(j.iterations)),
            ("bytes", int(j.bytes)),
        ]),
        "exchange" => table(vec![
            ("iterations", int(j.iterations.min(10))),
            ("bytes", int(j.bytes)),
            ("compute_us", int(j.compute_us)),
            ("jitter_ppm", int(j.jitter_ppm)),
        ]),
        "npb.is" => table(vec![("class", Value::String("S".into()))]),
        "beff" => {
            let (a, b) = j.log2;
            table(vec![
                ("min_log2", int(a.min(b))),
                ("max_log2", int(a.max(b))),
                ("reps", int(j.reps)),
            ])
        }
        _ => Table::new(),
    }
}

/// The scenario document of a spec; valid by construction.
fn document(s: &Spec) -> Table {
    let int = |v: i64| Value::Integer(v);
    let string = |v: &str| Value::String(v.to_string());
    let cores = s.cores;
    let k = &s.knobs;
    let per_vcpu = SCHEDULERS[s.scheduler] == "slicer-vcpu";
    let domu_names: Vec<String> = (0..s.domus.len()).map(|i| format!("vm{i}")).collect();
    let jobs: Vec<(String, Vec<String>, &JobSpec)> = s
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let n = rank_count(WORKLOADS[j.workload], j.size);
            let ranks = (0..n)
                .map(|r| domu_names[j.doms[r] % domu_names.len()].clone())
                .collect();
            (format!("job{i}"), ranks, j)
        })
        .collect();
    let spans = jobs
        .iter()
        .any(|(_, ranks, _)| ranks.iter().any(|d| d != &ranks[0]));
    let dom0 = if spans {
        Some(s.dom0.unwrap_or((1, 0)))
    } else {
        s.dom0
    };

    let mut domains = Vec::new();
    if let Some((vcpus, mask)) = dom0 {
        let mut d = table(vec![
            ("name", string("dom0")),
            ("dom0", Value::Boolean(true)),
            ("vcpus", int(vcpus as i64)),
        ]);
        if per_vcpu {
            d.insert("pin".into(), one_core_each(vcpus, &[mask; 3], cores));
        } else if mask != 0 {
            d.insert("pin".into(), Value::Array(vec![cores_of(mask, cores)]));
        }
        domains.push(Value::Table(d));
    }
    for (i, (name, d)) in domu_names.iter().zip(&s.domus).enumerate() {
        let mut t = table(vec![
            ("name", string(name)),
            ("vcpus", int(d.vcpus as i64)),
            ("weight", int(i64::from(d.weight))),
        ]);
        if i == 0 && k.native {
            t.insert("native".into(), Value::Boolean(true));
        }
        match d.pin_mode {
            _ if per_vcpu => {
                t.insert("pin".into(), one_core_each(d.vcpus, &d.masks, cores));
            }
            1 => {
                t.insert(
                    "pin".into(),
                    Value::Array(vec![cores_of(d.masks[0], cores)]),
                );
            }
            2 => {
                t.insert(
                    "pin".into(),
                    Value::Array((0..d.vcpus).map(|v| cores_of(d.masks[v], cores)).collect()),
                );
            }
            _ => {}
        }
        if d.cap > 0 {
            t.insert("cap".into(), int(i64::from(d.cap) * d.vcpus as i64));
        }
        let period = d.sedf_period_ms * 1000;
        t.insert(
            "sedf".into(),
            Value::Table(table(vec![
                ("period_us", int(period as i64)),
                ("slice_us", int((period * d.sedf_slice_pct / 100) as i64)),
                ("extratime", Value::Boolean(d.extratime)),
            ])),
        );
        if let Some((interval, work)) = d.background {
            let work = work.min(interval - 1);
            t.insert(
                "background".into(),
                Value::Table(table(vec![
                    ("interval_us", int(interval as i64)),
                    ("work_us", int(work as i64)),
                ])),
            );
        }
        domains.push(Value::Table(t));
    }

    let jobs: Vec<Value> = jobs
        .into_iter()
        .map(|(name, ranks, j)| {
            Value::Table(table(vec![
                ("name", string(&name)),
                ("workload", string(WORKLOADS[j.workload])),
                (
                    "ranks",
                    Value::Array(ranks.into_iter().map(Value::String).collect()),
                ),
                ("wait_policy", string(POLICIES[j.policy])),
                ("params", Value::Table(params(j))),
                // About a third of the jobs are relaunched while others run.
                ("refill", Value::Boolean(j.iterations % 3 == 0)),
                // About a quarter start late (asleep until then), within the run.
                (
                    "start_us",
                    int(if j.iterations % 4 == 1 {
                        (j.iterations * 97).min(s.limit_ms * 1000 - 1)
                    } else {
                        0
                    }),
                ),
            ]))
        })
        .collect();

    let cost = |ns: i64| int(if k.free_shm { 0 } else { ns });
    let shm = table(vec![
        ("latency_ns", cost(300)),
        ("send_ns", cost(300)),
        ("send_ns_per_kib", cost(500)),
        ("recv_ns", cost(300)),
        ("recv_ns_per_kib", cost(500)),
        ("chunk_bytes", int(s.chunk_bytes)),
        ("window", int(s.window)),
        ("shared_copy_buffer", Value::Boolean(k.shared_copy_buffer.0)),
    ]);
    // The default inter-VM costs, with this run's copy buffer choice.
    let inter_vm = table(vec![
        ("latency_ns", int(5_000)),
        ("send_ns", int(8_000)),
        ("send_ns_per_kib", int(2_000)),
        ("recv_ns", int(8_000)),
        ("recv_ns_per_kib", int(2_000)),
        ("relay_ns", int(10_000)),
        ("relay_ns_per_kib", int(3_000)),
        ("chunk_bytes", int(65_536)),
        ("window", int(4)),
        ("shared_copy_buffer", Value::Boolean(k.shared_copy_buffer.1)),
    ]);
    table(vec![
        ("name", string("random")),
        ("seed", int(k.seed)),
        ("limit_ms", int(s.limit_ms)),
        (
            "host",
            Value::Table(table(vec![("cores", int(cores as i64))])),
        ),
        (
            "hypervisor",
            Value::Table(table(vec![
                (
                    "scheduler",
                    string(SCHEDULERS[s.scheduler].trim_end_matches("-vcpu")),
                ),
                (
                    "slicer",
                    Value::Table(table(vec![(
                        "slicing",
                        string(if per_vcpu { "vcpu" } else { "gang" }),
                    )])),
                ),
                ("tslice_us", int(s.tslice_ms * 1000)),
                ("tick_us", int(k.tick_us)),
                ("ticks_per_acct", int(k.ticks_per_acct)),
                ("ratelimit_us", int(k.ratelimit_us)),
                ("boost", Value::Boolean(k.boost)),
                ("extra_quantum_us", int(k.extra_quantum_us)),
                ("vcpu_switch_ns", int(k.vcpu_switch_ns)),
            ])),
        ),
        (
            "guest",
            Value::Table(table(vec![
                ("slice_us", int(s.guest_slice_us)),
                ("switch_ns", int(k.guest_switch_ns)),
            ])),
        ),
        (
            "mpi",
            Value::Table(table(
                [
                    ("poll_ns", int(s.poll.0)),
                    ("polls_before_yield", int(s.poll.1)),
                    ("eager_limit", int(s.eager_limit.0)),
                    ("adaptive_futile_yields", int(k.futile_yields)),
                    ("adaptive_sleep_min_us", int(k.sleep_us.0)),
                    ("adaptive_sleep_max_us", int(k.sleep_us.1)),
                    ("shm", Value::Table(shm)),
                    ("inter_vm", Value::Table(inter_vm)),
                ]
                .into_iter()
                .chain((s.eager_limit.1 >= 0).then(|| ("local_send_limit", int(s.eager_limit.1))))
                .collect(),
            )),
        ),
        ("domains", Value::Array(domains)),
        ("jobs", Value::Array(jobs)),
    ])
}

fn render(doc: &Table) -> String {
    toml::to_string(doc).expect("TOML serialises")
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn random_valid_scenarios_run_and_keep_the_invariants(s in spec()) {
        let text = render(&document(&s));
        let out = match run_guarded(&text, "random.toml", true) {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(TestCaseError::fail(format!("a generated scenario was rejected: {e}\n{text}"))),
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
        };
        let r = &out.report;
        prop_assert!(r.end_ns <= s.limit_ms as u64 * 1_000_000, "end_ns {} beyond limit_ms {}", r.end_ns, s.limit_ms);
        if !r.finished {
            prop_assert_eq!(r.end_ns, s.limit_ms as u64 * 1_000_000, "an unfinished run must stop at the limit");
        }
        let sc = Scenario::from_toml(&text, "random.toml").map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Err(e) = check_invariants(&sc, r, out.trace.as_ref()) {
            return Err(TestCaseError::fail(format!("{e}\n{text}")));
        }
    }
}

// ---- random invalid scenarios -------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Mutation {
    /// An unknown key in one of the tables (0: top level, 1: host,
    /// 2: hypervisor, 3: guest, 4: mpi, 5: a domain, 6: a job, 7: job params).
    UnknownField(u8),
    ZeroCores,
    PinToMissingCore,
    UnknownScheduler,
    UnknownWorkload,
    UnknownPolicy,
    OddPingpong,
    NonPowerOfTwoNpb,
    MissingJobs,
    EmptyJobs,
    ZeroVcpus,
    UnknownRankDomain,
    ZeroIterations,
    WrongType,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0..8u8).prop_map(Mutation::UnknownField),
        Just(Mutation::ZeroCores),
        Just(Mutation::PinToMissingCore),
        Just(Mutation::UnknownScheduler),
        Just(Mutation::UnknownWorkload),
        Just(Mutation::UnknownPolicy),
        Just(Mutation::OddPingpong),
        Just(Mutation::NonPowerOfTwoNpb),
        Just(Mutation::MissingJobs),
        Just(Mutation::EmptyJobs),
        Just(Mutation::ZeroVcpus),
        Just(Mutation::UnknownRankDomain),
        Just(Mutation::ZeroIterations),
        Just(Mutation::WrongType),
    ]
}

fn nth_table<'a>(doc: &'a mut Table, key: &str, i: usize) -> (usize, &'a mut Table) {
    let Some(Value::Array(items)) = doc.get_mut(key) else {
        panic!("document has {key}")
    };
    let i = i % items.len();
    let Value::Table(t) = &mut items[i] else {
        panic!("{key}[{i}] is a table")
    };
    (i, t)
}

/// Applies `m` to a valid document; returns the field names, any of which
/// the error must mention.
fn mutate(doc: &mut Table, m: Mutation, pick: usize) -> Vec<String> {
    const BOGUS: &str = "bogus_key_xyz";
    let bogus = || (BOGUS.to_string(), Value::Integer(1));
    let first_domu = usize::from(doc["domains"][0].get("dom0").is_some());
    let domu = |pick: usize, doc: &Table| {
        let n = doc["domains"].as_array().expect("domains").len();
        first_domu + pick % (n - first_domu)
    };
    match m {
        Mutation::UnknownField(at) => {
            let target: &mut Table = match at {
                0 => doc,
                1..=4 => {
                    let key = ["host", "hypervisor", "guest", "mpi"][usize::from(at) - 1];
                    doc.get_mut(key)
                        .and_then(Value::as_table_mut)
                        .expect("section")
                }
                5 => nth_table(doc, "domains", pick).1,
                6 => nth_table(doc, "jobs", pick).1,
                _ => nth_table(doc, "jobs", pick)
                    .1
                    .get_mut("params")
                    .and_then(Value::as_table_mut)
                    .expect("params"),
            };
            let (k, v) = bogus();
            target.insert(k, v);
            vec![BOGUS.into()]
        }
        Mutation::ZeroCores => {
            doc["host"]["cores"] = Value::Integer(0);
            vec!["host.cores".into()]
        }
        Mutation::PinToMissingCore => {
            let cores = doc["host"]["cores"].as_integer().expect("cores");
            let i = domu(pick, doc);
            let (_, d) = nth_table(doc, "domains", i);
            d.insert(
                "pin".into(),
                Value::Array(vec![Value::Array(vec![Value::Integer(cores)])]),
            );
            vec![format!("domains[{i}].pin[0]")]
        }
        Mutation::UnknownScheduler => {
            doc["hypervisor"]["scheduler"] = Value::String("fifo".into());
            vec!["hypervisor.scheduler".into()]
        }
        Mutation::UnknownWorkload => {
            let (i, j) = nth_table(doc, "jobs", pick);
            j.insert("workload".into(), Value::String("npb.zz".into()));
            j.insert("params".into(), Value::Table(Table::new()));
            vec![format!("jobs[{i}].workload")]
        }
        Mutation::UnknownPolicy => {
            let (i, j) = nth_table(doc, "jobs", pick);
            j.insert("wait_policy".into(), Value::String("spin_forever".into()));
            vec![format!("jobs[{i}].wait_policy")]
        }
        Mutation::OddPingpong | Mutation::NonPowerOfTwoNpb => {
            let workload = if matches!(m, Mutation::OddPingpong) {
                "pingpong"
            } else {
                "npb.is"
            };
            let (i, j) = nth_table(doc, "jobs", pick);
            let dom = j["ranks"][0].clone();
            j.insert("workload".into(), Value::String(workload.into()));
            j.insert("params".into(), Value::Table(Table::new()));
            j.insert(
                "ranks".into(),
                Value::Array(vec![dom.clone(), dom.clone(), dom]),
            );
            // The rank count is rejected by the workload's check.
            vec![format!("jobs[{i}].workload"), format!("jobs[{i}].ranks")]
        }
        Mutation::MissingJobs => {
            doc.remove("jobs");
            vec!["jobs".into()]
        }
        Mutation::EmptyJobs => {
            doc.insert("jobs".into(), Value::Array(Vec::new()));
            vec!["jobs".into()]
        }
        Mutation::ZeroVcpus => {
            let i = domu(pick, doc);
            let (_, d) = nth_table(doc, "domains", i);
            d.insert("vcpus".into(), Value::Integer(0));
            d.remove("pin");
            d.remove("cap");
            vec![format!("domains[{i}].vcpus")]
        }
        Mutation::UnknownRankDomain => {
            let (i, j) = nth_table(doc, "jobs", pick);
            let Some(Value::Array(ranks)) = j.get_mut("ranks") else {
                panic!("ranks")
            };
            let r = pick % ranks.len();
            ranks[r] = Value::String("nowhere".into());
            // Either this rank is named, or (ranks now span domains and
            // there is no dom0) the rank list as a whole.
            vec![format!("jobs[{i}].ranks")]
        }
        Mutation::ZeroIterations => {
            let (i, j) = nth_table(doc, "jobs", pick);
            let dom = j["ranks"][0].clone();
            j.insert("workload".into(), Value::String("pingpong".into()));
            j.insert("ranks".into(), Value::Array(vec![dom.clone(), dom]));
            j.insert(
                "params".into(),
                Value::Table(table(vec![("iterations", Value::Integer(0))])),
            );
            vec![format!("jobs[{i}].params.iterations")]
        }
        Mutation::WrongType => {
            doc["host"]["cores"] = Value::String("two".into());
            vec!["cores".into()]
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn random_invalid_scenarios_are_rejected_naming_file_and_field(
        s in spec(),
        m in mutation(),
        pick in any::<usize>(),
        dir in "[a-z]{1,8}",
    ) {
        let mut doc = document(&s);
        let fields = mutate(&mut doc, m, pick);
        let text = render(&doc);
        let origin = format!("{dir}/case.toml");
        let err = match Scenario::from_toml(&text, &origin) {
            Ok(_) => return Err(TestCaseError::fail(format!("{m:?} was accepted:\n{text}"))),
            Err(e) => e,
        };
        let shown = err.to_string();
        prop_assert_eq!(&err.origin, &origin);
        prop_assert!(shown.starts_with(&format!("{origin}: ")), "error does not start with the origin: {}", shown);
        prop_assert!(
            fields.iter().any(|f| shown.contains(f.as_str())),
            "{:?}: error should name one of {:?}, got: {}\n{}", m, fields, shown, text
        );
        // run_toml reports the same error.
        prop_assert_eq!(vhpc_sim::run_toml(&text, &origin, None, false).err(), Some(err));
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        let _ = vhpc_sim::run_toml(&text, "arbitrary.toml", None, false);
    }

    #[test]
    fn arbitrary_toml_like_text_never_panics(text in "([a-z_\\[\\]=\"{}., 0-9-]{0,30}\n){0,12}") {
        if let Err(e) = Scenario::from_toml(&text, "toml-like.toml") {
            prop_assert!(e.to_string().starts_with("toml-like.toml: "));
        }
    }

    /// Byte-level damage to a valid scenario: cut a piece out, or splice in
    /// random text. Validation must answer (parse and validate only: a
    /// damaged number could make a valid but endless run).
    #[test]
    fn damaged_valid_scenarios_never_panic_the_parser(
        s in spec(),
        at in any::<usize>(),
        len in 0..40usize,
        insert in "[ -~\n]{0,12}",
    ) {
        let text = render(&document(&s));
        let mut at = at % (text.len() + 1);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let mut end = (at + len).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let damaged = format!("{}{}{}", &text[..at], insert, &text[end..]);
        if let Err(e) = Scenario::from_toml(&damaged, "damaged.toml") {
            prop_assert!(e.to_string().starts_with("damaged.toml: "));
        }
    }
}
