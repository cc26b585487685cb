//! The memory estimate against the memory a run really takes: the growth of
//! this process's peak resident set (VmHWM, reset through
//! /proc/self/clear_refs) while a scenario is built, run and its report
//! serialised, as `vhpc._core.run` does. A binary of its own, so that no
//! other test runs beside it.

use std::sync::atomic::AtomicBool;

use vhpc_sim::footprint::{estimate, Trace, PYTHON_REPORT};
use vhpc_sim::Scenario;

/// A field of /proc/self/status in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Peak resident bytes above the resident set before, while parsing,
/// building and running `text` and serialising its report; None where Linux
/// cannot say.
fn peak_of_run(text: &str) -> Option<u64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?; // resets VmHWM to VmRSS
    let before = status_bytes("VmRSS:")?;
    let sc = Scenario::from_toml(text, "t.toml").unwrap();
    let (report, _) = vhpc_sim::simulate(&sc, None, None, &AtomicBool::new(false)).unwrap();
    let json = serde_json::to_string(&report).unwrap();
    std::hint::black_box(&json);
    let peak = status_bytes("VmHWM:")?;
    Some(peak.saturating_sub(before))
}

fn scenario(cores: usize, domains: usize, vcpus: usize, ranks: usize, extra: &str) -> String {
    let mut text =
        format!("limit_ms = 20\n[host]\ncores = {cores}\n[mpi]\nbetween_domains = \"shm\"\n");
    for d in 0..domains {
        text += &format!("[[domains]]\nname = \"d{d}\"\nvcpus = {vcpus}\n");
    }
    for d in 0..domains {
        let list = vec![format!("\"d{d}\""); ranks].join(", ");
        text += &format!("[[jobs]]\nname = \"j{d}\"\nranks = [{list}]\n{extra}\n");
    }
    text
}

/// The cases, by name.
fn case(name: &str) -> String {
    match name {
        // A large unpinned host: the affinity lists dominate.
        "affinity" => scenario(512, 32, 64, 2, "workload = \"exchange\""),
        // Many ranks on few vCPUs.
        "ranks" => scenario(8, 1, 64, 4000, "workload = \"exchange\""),
        // An all-to-all over 512 ranks, reached within the limit.
        "alltoall" => scenario(
            8,
            1,
            8,
            512,
            "workload = \"npb.is\"\nparams = { class = \"S\", ps_per_unit = 1 }",
        ),
        _ => unreachable!("no case {name}"),
    }
}

const CASE: &str = "VHPC_FOOTPRINT_CASE";

/// Not a test by itself: run by [`the_estimate_bounds_the_peak_of_a_run`] in
/// a fresh process per case (a process reuses the heap an earlier case freed,
/// which would hide the next one's growth), it prints the case's peak.
#[test]
fn measure_one_case() {
    let Ok(name) = std::env::var(CASE) else {
        return;
    };
    match peak_of_run(&case(&name)) {
        Some(peak) => println!("PEAK {peak}"),
        None => println!("PEAK unknown"),
    }
}

/// The estimate is an upper bound of the memory a run takes, and not a wild
/// one where the engine's own records dominate (the report's Python part,
/// which this binary does not have, is left out of the comparison).
#[test]
fn the_estimate_bounds_the_peak_of_a_run() {
    for name in ["affinity", "ranks", "alltoall"] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "measure_one_case",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE, name)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let peak = stdout
            .lines()
            .find_map(|l| l.split("PEAK ").nth(1)?.split_whitespace().next())
            .unwrap_or_else(|| panic!("{name}: the child printed no peak: {stdout}"));
        let Ok(peak) = peak.parse::<u64>() else {
            eprintln!("no /proc/self/clear_refs here: the estimate is not checked");
            return;
        };
        let sc = Scenario::from_toml(&case(name), "t.toml").unwrap();
        let f = estimate(&sc, Trace::Off);
        let python = f
            .parts
            .iter()
            .find(|p| p.what == PYTHON_REPORT)
            .map_or(0, |p| p.bytes);
        let native = f.total() - python;
        eprintln!(
            "{name}: estimate {native} B (native part), peak RSS growth {peak} B, ratio {:.2}",
            native as f64 / peak as f64
        );
        assert!(
            native >= peak,
            "{name}: estimate {native} < peak {peak}: {f:?}"
        );
        if name != "alltoall" {
            assert!(
                native < 3 * peak,
                "{name}: estimate {native} vs peak {peak}"
            );
        }
    }
}
