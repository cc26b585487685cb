//! Shared helpers: running a scenario, the run invariants every report must
//! satisfy, and the compact summary the golden files hold.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use vhpc_sim::metrics::{RankReport, Report};
use vhpc_sim::scenario::TimedFrom;
use vhpc_sim::{RunOutput, Scenario};

/// Ranks of `exchange` (1 ms compute, 0-byte exchange, 10 iterations, no
/// jitter, memory intensity `mem` ppm) in one domain `vm` (`native` or a
/// VM) whose vCPU k is pinned to `cores[k]`, round-robin host scheduler:
/// `host` is the body of `[host]`, `memory` is appended after the job.
/// The memory model's closed-form tests (numa, numa_costs) build on it.
pub fn pinned_exchange(
    host: &str,
    native: bool,
    cores: &[usize],
    mem: u32,
    memory: &str,
) -> String {
    let pins: Vec<String> = cores.iter().map(|c| format!("[{c}]")).collect();
    let ranks: Vec<&str> = cores.iter().map(|_| "\"vm\"").collect();
    format!(
        r#"
name = "pinned-exchange"
[host]
{host}
[hypervisor]
scheduler = "round_robin"
[[domains]]
name = "vm"
native = {native}
vcpus = {n}
pin = [{pins}]
[[jobs]]
name = "x"
workload = "exchange"
ranks = [{ranks}]
params = {{ compute_us = 1000, bytes = 0, iterations = 10, jitter_ppm = 0, mem_intensity_ppm = {mem} }}
{memory}
"#,
        n = cores.len(),
        pins = pins.join(", "),
        ranks = ranks.join(", "),
    )
}

/// The field a scenario the checks must reject is rejected for (its origin
/// named `t.toml`); the validation tests of channels and machines use it.
pub fn field_of(text: &str) -> String {
    match Scenario::from_toml(text, "t.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            assert_eq!(e.origin, "t.toml");
            e.field
        }
    }
}

/// The report of a scenario that must run.
pub fn report_of(text: &str, origin: &str) -> Report {
    run(text, origin, None, false).report
}

/// CPU time the vCPUs of `domain` ran.
pub fn run_ns(report: &Report, domain: &str) -> u64 {
    report
        .vcpus
        .iter()
        .filter(|v| v.domain == domain)
        .map(|v| v.run_ns)
        .sum()
}

/// Single-vCPU domains "a", "b", ... with the given (weight, cap) on one
/// core under `scheduler`, each with a compute-bound job (NPB EP class A, one
/// rank, no jitter), cut at `limit_ms` while all of them still run.
pub fn busy_domains(scheduler: &str, domains: &[(u32, u32)], limit_ms: u64) -> String {
    let mut text = format!(
        "name = \"{scheduler}-busy\"\nlimit_ms = {limit_ms}\n[host]\ncores = 1\n\
         [hypervisor]\nscheduler = \"{scheduler}\"\n"
    );
    for (i, (weight, cap)) in domains.iter().enumerate() {
        let name = char::from(b'a' + i as u8);
        text += &format!(
            "[[domains]]\nname = \"{name}\"\nweight = {weight}\ncap = {cap}\n\
             [[jobs]]\nname = \"{name}\"\nworkload = \"npb.ep\"\nranks = [\"{name}\"]\n\
             params = {{ class = \"A\", jitter_ppm = 0 }}\n"
        );
    }
    text
}

/// Parses, validates and runs `text`; panics with the scenario error.
pub fn run(text: &str, origin: &str, seed: Option<u64>, trace: bool) -> RunOutput {
    vhpc_sim::run_toml(text, origin, seed, trace)
        .unwrap_or_else(|e| panic!("{origin} must be valid: {e}"))
}

/// Wall-clock budget of one guarded run; more means the engine hangs.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(20);

/// What a guarded run ended with: the scenario's result, or `Err` with the
/// engine's panic message or a note that it did not end in [`RUN_TIMEOUT`]
/// (the run is then left behind on its thread).
pub type Guarded = Result<Result<RunOutput, vhpc_sim::ScenarioError>, String>;

/// Runs a scenario on a helper thread, so that a panic or a hang of the
/// engine becomes a test failure with a message instead of a stuck binary.
pub fn run_guarded(text: &str, origin: &str, trace: bool) -> Guarded {
    let (tx, rx) = mpsc::channel();
    let (text, origin) = (text.to_string(), origin.to_string());
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(|| vhpc_sim::run_toml(&text, &origin, None, trace));
        let _ = tx.send(out.map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        }));
    });
    match rx.recv_timeout(RUN_TIMEOUT) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(msg)) => Err(format!("the engine panicked: {msg}")),
        Err(_) => Err(format!(
            "the run did not end within {RUN_TIMEOUT:?} of wall time (hang?)"
        )),
    }
}

/// Path of a file under the crate directory.
pub fn crate_path(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A scenario file of the repository's `scenarios/` directory.
pub fn scenario_file(name: &str) -> String {
    let path = crate_path(&format!("../../scenarios/{name}"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks every invariant of a run of `sc`; `Err` names the first one
/// broken. `trace` is the Chrome trace of the same run, if it was asked for.
pub fn check_invariants(
    sc: &Scenario,
    report: &Report,
    trace: Option<&Value>,
) -> Result<(), String> {
    let end = report.end_ns;
    // A job's completion counts from its start (`start_us`), finishes from zero.
    let start_of = |name: &str| {
        sc.jobs
            .iter()
            .find(|x| x.name == name)
            .map_or(0, |x| x.start_us * 1000)
    };
    let timed_part = |name: &str| {
        sc.jobs
            .iter()
            .any(|x| x.name == name && x.timed_from == TimedFrom::AllRanksRan)
    };
    macro_rules! ensure {
        ($cond:expr, $($fmt:tt)*) => {
            if !$cond {
                return Err(format!($($fmt)*));
            }
        };
    }

    // Shape: what the scenario asked for.
    ensure!(
        report.cores.len() == sc.host.cores,
        "{} core records for {} cores",
        report.cores.len(),
        sc.host.cores
    );
    let vcpus: usize = sc.domains.iter().map(|d| d.vcpus).sum();
    ensure!(
        report.vcpus.len() == vcpus,
        "{} vCPU records for {vcpus} vCPUs",
        report.vcpus.len()
    );
    let ranks: usize = sc.jobs.iter().map(|j| j.ranks.len()).sum();
    ensure!(
        report.ranks.len() == ranks,
        "{} rank records for {ranks} ranks",
        report.ranks.len()
    );
    ensure!(
        report.jobs.len() == sc.jobs.len(),
        "{} job records for {} jobs",
        report.jobs.len(),
        sc.jobs.len()
    );

    // The limit: a run stops at it at the latest, and only there unfinished.
    let limit = sc.limit_ms * 1_000_000;
    ensure!(end <= limit, "end_ns {end} beyond limit_ms {}", sc.limit_ms);
    if !report.finished {
        ensure!(
            end == limit,
            "unfinished run stopped at {end}, before its limit {limit}"
        );
    }

    // Cores: every nanosecond of the run is either busy or idle.
    for c in &report.cores {
        ensure!(
            c.busy_ns + c.idle_ns == end,
            "core {}: busy {} + idle {} != end_ns {end}",
            c.core,
            c.busy_ns,
            c.idle_ns
        );
    }
    // What the cores ran is what the vCPUs ran.
    let core_busy: u64 = report.cores.iter().map(|c| c.busy_ns).sum();
    let vcpu_run: u64 = report.vcpus.iter().map(|v| v.run_ns).sum();
    ensure!(
        core_busy == vcpu_run,
        "sum of core busy_ns {core_busy} != sum of vCPU run_ns {vcpu_run}"
    );

    // Ranks: their CPU time fits into their vCPU's run time.
    let mut run_of: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    for v in &report.vcpus {
        ensure!(
            run_of
                .insert((v.domain.as_str(), v.vcpu), v.run_ns)
                .is_none(),
            "vCPU {}.v{} reported twice",
            v.domain,
            v.vcpu
        );
    }
    // A migrating guest scheduler moves ranks between their domain's vCPUs:
    // their CPU time then fits into the domain's (key vCPU u32::MAX).
    const WHOLE: u32 = u32::MAX;
    let migrating = report.guest.is_some();
    if migrating {
        for v in &report.vcpus {
            *run_of.entry((v.domain.as_str(), WHOLE)).or_default() += v.run_ns;
        }
    }
    let mut used: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    for r in &report.ranks {
        let key = (r.domain.as_str(), if migrating { WHOLE } else { r.vcpu });
        ensure!(
            run_of.contains_key(&key),
            "rank {}/{} runs on unknown vCPU {}.v{}",
            r.job,
            r.rank,
            r.domain,
            r.vcpu
        );
        *used.entry(key).or_default() += r.useful_ns + r.poll_ns + r.overhead_ns;
        if let Some(f) = r.finish_ns {
            ensure!(
                f <= end,
                "rank {}/{} finished at {f} after end_ns {end}",
                r.job,
                r.rank
            );
        }
    }
    for (key, cpu) in &used {
        let run = run_of[key];
        ensure!(
            *cpu <= run,
            "vCPU {}.v{}: its ranks used {cpu} ns of CPU but it ran only {run} ns",
            key.0,
            key.1
        );
    }

    // Jobs: completion, and their totals are their ranks' sums.
    let mut all_finished = true;
    for j in &report.jobs {
        let ranks: Vec<_> = report.ranks.iter().filter(|r| r.job == j.name).collect();
        ensure!(
            ranks.len() == j.ranks as usize,
            "job {}: {} rank records for {} ranks",
            j.name,
            ranks.len(),
            j.ranks
        );
        let sum = |f: fn(&RankReport) -> u64| ranks.iter().map(|r| f(r)).sum::<u64>();
        ensure!(
            j.useful_ns == sum(|r| r.useful_ns),
            "job {}: useful_ns is not its ranks' sum",
            j.name
        );
        ensure!(
            j.poll_ns == sum(|r| r.poll_ns),
            "job {}: poll_ns is not its ranks' sum",
            j.name
        );
        ensure!(
            j.overhead_ns == sum(|r| r.overhead_ns),
            "job {}: overhead_ns is not its ranks' sum",
            j.name
        );
        let start = start_of(&j.name);
        match j.completion_ns.map(|c| c + start) {
            Some(c) => {
                ensure!(
                    c <= end,
                    "job {}: start + completion_ns {c} > end_ns {end}",
                    j.name
                );
                let last = ranks
                    .iter()
                    .map(|r| r.finish_ns)
                    .collect::<Option<Vec<u64>>>();
                let Some(last) = last else {
                    return Err(format!(
                        "job {} finished but a rank has no finish_ns",
                        j.name
                    ));
                };
                // A clock that waits for the ranks' timed part starts later.
                let later = timed_part(&j.name);
                ensure!(
                    last.iter().max() == Some(&c) || later && last.iter().max() >= Some(&c),
                    "job {}: start + completion_ns {c} is not its last rank's finish {:?}",
                    j.name,
                    last.iter().max()
                );
            }
            None if j.workload == "noise" => {}
            None => all_finished = false,
        }
    }
    ensure!(
        report.finished == all_finished,
        "finished = {} but jobs' completions say {all_finished}",
        report.finished
    );
    // A finished run stops when its last finite job completes (from its start;
    // a job timed from its timed part: its last rank's finish).
    let last = report
        .jobs
        .iter()
        .filter(|j| j.workload != "noise")
        .filter_map(|j| {
            let finish = || {
                report
                    .ranks
                    .iter()
                    .filter(|r| r.job == j.name)
                    .map(|r| r.finish_ns)
            };
            match timed_part(&j.name) {
                true => finish().max().flatten(),
                false => j.completion_ns.map(|c| c + start_of(&j.name)),
            }
        })
        .max();
    if report.finished {
        ensure!(
            last.unwrap_or(0) == end,
            "finished run ended at {end}, its last job completed at {last:?}"
        );
    }

    check_jobs(sc, report)?;

    // Schedulers without migration keep a vCPU on its first core; so does
    // pinning to a single core. Credit steals work, Linux pulls it to idle
    // cores and wakes tasks on idle cores; the slicer's thawed
    // domain runs on whichever of its cores is free, as Linux would; credit2
    // runs a runqueue's vCPUs on any of its cores, gang on the cores a turn
    // leaves free.
    for (v, (vc, affinity)) in report.vcpus.iter().zip(affinities(sc)).enumerate() {
        let migrates =
            ["credit", "credit2", "linux", "slicer", "gang"].contains(&report.scheduler.as_str());
        let fixed = !migrates || affinity.len() == 1;
        ensure!(
            !fixed || vc.migrations == 0,
            "vCPU {v} ({}.v{}) migrated {} times under {}",
            vc.domain,
            vc.vcpu,
            vc.migrations,
            report.scheduler
        );
    }

    if let Some(trace) = trace {
        check_trace(sc, report, trace)?;
    }
    Ok(())
}

/// The cores each vCPU may run on, in vCPU order (the engine's rule).
fn affinities(sc: &Scenario) -> Vec<Vec<usize>> {
    sc.domains
        .iter()
        .flat_map(|d| {
            (0..d.vcpus).map(move |i| match d.pin.len() {
                0 => (0..sc.host.cores).collect(),
                1 => d.pin[0].clone(),
                _ => d.pin[i].clone(),
            })
        })
        .collect()
}

/// Per job, what its wait policy and workload imply.
fn check_jobs(sc: &Scenario, report: &Report) -> Result<(), String> {
    for (job, j) in sc.jobs.iter().zip(&report.jobs) {
        if job.name != j.name {
            return Err(format!(
                "job record {} out of order (expected {})",
                j.name, job.name
            ));
        }
        let ranks: Vec<&RankReport> = report.ranks.iter().filter(|r| r.job == j.name).collect();
        // Each policy uses only its own ways of waiting.
        for r in &ranks {
            let (hv, block, sleep) = match job.wait_policy.as_str() {
                "busy_poll" => (false, false, false),
                "hv_yield" => (true, false, false),
                "block" => (false, true, false),
                _ => (true, false, true),
            };
            // A hint policy's hand-over blocks a waiting rank whatever its policy.
            let hinted = sc
                .domains
                .iter()
                .any(|d| d.name == r.domain && d.hints.is_some());
            let block = block || hinted;
            if (!hv && r.hv_yields > 0) || (!block && r.blocks > 0) || (!sleep && r.sleeps > 0) {
                return Err(format!(
                    "job {} ({}), rank {}: hv_yields {}, blocks {}, sleeps {}",
                    j.name, job.wait_policy, r.rank, r.hv_yields, r.blocks, r.sleeps
                ));
            }
        }
        let int = |k: &str, default: u64| {
            job.params
                .get(k)
                .and_then(toml::Value::as_integer)
                .map_or(default, |v| v as u64)
        };
        match job.workload.as_str() {
            // Pure communication: no useful work at all.
            "pingpong" | "beff" if j.useful_ns != 0 => {
                return Err(format!(
                    "job {}: {} does no computation, but useful_ns = {}",
                    j.name, job.workload, j.useful_ns
                ));
            }
            // Exactly its compute phases (within their jitter) once finished,
            // never more than that.
            "exchange" => {
                let nominal = int("iterations", u64::MAX)
                    .saturating_mul(int("compute_us", 1000) * 1000)
                    as f64;
                // Plus rounding: up to 1 ns per jittered phase.
                let slack = nominal * int("jitter_ppm", 0) as f64 / 1e6
                    + int("iterations", u64::MAX) as f64;
                // A relaunched job's ranks also did (part of) its later runs.
                let runs = f64::from(j.runs.unwrap_or(1));
                for r in &ranks {
                    let useful = r.useful_ns as f64;
                    if useful > runs * (nominal + slack)
                        || (r.finish_ns.is_some() && useful < nominal - slack)
                    {
                        return Err(format!(
                            "job {}, rank {}: useful_ns {} for a nominal {nominal} ± {slack}",
                            j.name, r.rank, r.useful_ns
                        ));
                    }
                }
            }
            _ => {}
        }
        // Rank pairs of a finished ping-pong or b_eff send each other the
        // same packets (not so when a relaunched run was cut by the end).
        if j.completion_ns.is_some()
            && j.runs.is_none()
            && matches!(job.workload.as_str(), "pingpong" | "beff" | "exchange")
        {
            for pair in ranks.chunks(2) {
                if let [a, b] = pair {
                    if a.messages_sent != b.messages_sent {
                        return Err(format!(
                            "job {}: ranks {} and {} sent {} and {} packets",
                            j.name, a.rank, b.rank, a.messages_sent, b.messages_sent
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Nanoseconds from a trace time in microseconds (exact for any run length
/// these tests use: the trace divides integers by 1000).
fn trace_ns(v: &Value) -> u64 {
    (v.as_f64().expect("trace times are numbers") * 1e3).round() as u64
}

/// The trace's slices on one core never overlap and add up to its busy
/// time; per vCPU, they add up to its run time, never overlap either (a vCPU
/// runs on one core at a time) and stay on the cores it may use.
fn check_trace(sc: &Scenario, report: &Report, trace: &Value) -> Result<(), String> {
    let events = trace["traceEvents"]
        .as_array()
        .ok_or("trace has no traceEvents array")?;
    // A trace cut at its slice limit holds only the start of the run: its
    // slices then add up to at most, not exactly, the reported times.
    let cut = trace["otherData"].get("truncated_at_us").is_some();
    let adds_up = |total: u64, reported: u64| total == reported || (cut && total <= reported);
    let names: Vec<String> = report
        .vcpus
        .iter()
        .map(|v| format!("{}.v{}", v.domain, v.vcpu))
        .collect();
    let allowed: BTreeMap<&str, Vec<usize>> = names
        .iter()
        .map(String::as_str)
        .zip(affinities(sc))
        .collect();
    let mut per_core: BTreeMap<u64, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut per_vcpu: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let core = e["tid"].as_u64().ok_or("slice without a core")?;
        let name = e["name"].as_str().unwrap_or("?").to_string();
        let (start, dur) = (trace_ns(&e["ts"]), trace_ns(&e["dur"]));
        if dur == 0 {
            return Err(format!("empty slice on core {core} at {start}"));
        }
        match allowed.get(name.as_str()) {
            Some(cores) if cores.contains(&(core as usize)) => {}
            Some(cores) => {
                return Err(format!(
                    "{name} ran on core {core} at {start}, outside its affinity {cores:?}"
                ))
            }
            None => {
                return Err(format!(
                    "trace has slices of {name:?}, which the report does not have"
                ))
            }
        }
        per_core
            .entry(core)
            .or_default()
            .push((start, start + dur, name.clone()));
        per_vcpu.entry(name).or_default().push((start, start + dur));
    }
    for (name, slices) in &mut per_vcpu {
        slices.sort_unstable();
        for w in slices.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(format!(
                    "{name} runs on two cores at once: {:?} and {:?}",
                    w[0], w[1]
                ));
            }
        }
    }
    for c in &report.cores {
        let mut slices = per_core.remove(&u64::from(c.core)).unwrap_or_default();
        slices.sort_unstable();
        for w in slices.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(format!(
                    "core {}: trace slices {:?} and {:?} overlap",
                    c.core, w[0], w[1]
                ));
            }
        }
        if let Some(last) = slices.last() {
            if last.1 > report.end_ns {
                return Err(format!(
                    "core {}: slice {last:?} ends after end_ns {}",
                    c.core, report.end_ns
                ));
            }
        }
        let total: u64 = slices.iter().map(|(s, e, _)| e - s).sum();
        if !adds_up(total, c.busy_ns) {
            return Err(format!(
                "core {}: trace slices add up to {total} ns, busy_ns is {}",
                c.core, c.busy_ns
            ));
        }
        // Every change of vCPU between slices is a switch (a switch to a
        // vCPU that halts at once leaves no slice, so this is a lower bound).
        let changes = slices.windows(2).filter(|w| w[0].2 != w[1].2).count() as u64
            + u64::from(!slices.is_empty());
        if c.vcpu_switches < changes {
            return Err(format!(
                "core {}: {} vCPU switches, but the trace changes vCPU {changes} times",
                c.core, c.vcpu_switches
            ));
        }
    }
    if let Some((core, _)) = per_core.into_iter().next() {
        return Err(format!(
            "trace has slices on core {core}, which the report does not have"
        ));
    }
    for v in &report.vcpus {
        let name = format!("{}.v{}", v.domain, v.vcpu);
        let total: u64 = per_vcpu
            .remove(&name)
            .unwrap_or_default()
            .iter()
            .map(|(s, e)| e - s)
            .sum();
        if !adds_up(total, v.run_ns) {
            return Err(format!(
                "vCPU {name}: trace slices add up to {total} ns, run_ns is {}",
                v.run_ns
            ));
        }
    }
    if let Some((name, _)) = per_vcpu.into_iter().next() {
        return Err(format!(
            "trace has slices of {name:?}, which the report does not have"
        ));
    }
    Ok(())
}

/// [`check_invariants`] of a run of scenario `text`, panicking with `label`.
pub fn assert_invariants(label: &str, text: &str, out: &RunOutput) {
    let sc = Scenario::from_toml(text, label).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = check_invariants(&sc, &out.report, out.trace.as_ref()) {
        panic!("{label}: invariant broken: {e}");
    }
}

/// The compact summary a golden file holds.
pub fn summary(report: &Report) -> Value {
    json!({
        "scenario": report.scenario,
        "scheduler": report.scheduler,
        "seed": report.seed,
        "end_ns": report.end_ns,
        "finished": report.finished,
        "events": report.events,
        "jobs": report.jobs.iter().map(|j| json!({
            "name": j.name,
            "completion_ns": j.completion_ns,
            "useful_ns": j.useful_ns,
            "poll_ns": j.poll_ns,
            "overhead_ns": j.overhead_ns,
        })).collect::<Vec<_>>(),
        "cores": report.cores.iter().map(|c| json!({
            "core": c.core,
            "busy_ns": c.busy_ns,
            "idle_ns": c.idle_ns,
            "vcpu_switches": c.vcpu_switches,
        })).collect::<Vec<_>>(),
    })
}
