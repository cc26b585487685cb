//! Golden outputs: a compact summary of fixed scenarios at a fixed seed,
//! compared exactly with `tests/golden/<name>.json`. The engine is still
//! being calibrated, so the files are regenerable: run with `VHPC_BLESS=1`
//! to rewrite them, review the diff, and commit it with the change.

use crate::util::{assert_invariants, crate_path, run, scenario_file, summary};

const SEED: u64 = 7;

/// SEDF with per-domain reservations on two cores: an exchange job that
/// blocks while waiting, next to an endless noise VM and an idle dom0.
pub const SEDF_EXCHANGE_BLOCK: &str = r#"
name = "sedf-exchange-block"
[host]
cores = 2
[hypervisor]
scheduler = "sedf"

[[domains]]
name = "dom0"
dom0 = true
sedf = { period_us = 20000, slice_us = 5000, extratime = true }

[[domains]]
name = "vm1"
vcpus = 2
sedf = { period_us = 10000, slice_us = 4000, extratime = true }

[[domains]]
name = "noise"
vcpus = 2
sedf = { period_us = 10000, slice_us = 3000, extratime = true }

[[jobs]]
name = "ex"
workload = "exchange"
ranks = ["vm1", "vm1"]
wait_policy = "block"
params = { iterations = 200, compute_us = 500, bytes = 4096, jitter_ppm = 20000 }

[[jobs]]
name = "noise"
workload = "noise"
ranks = ["noise", "noise"]
"#;

/// NPB IS class S across two domUs under credit: every message goes
/// through dom0's back end. Four ranks on four vCPUs plus dom0 on two cores.
pub const NPB_IS_CREDIT_DOM0: &str = r#"
name = "npb-is-credit-dom0"
[host]
cores = 2
[hypervisor]
scheduler = "credit"

[[domains]]
name = "dom0"
dom0 = true

[[domains]]
name = "domU1"
vcpus = 2

[[domains]]
name = "domU2"
vcpus = 2

[[jobs]]
name = "is"
workload = "npb.is"
ranks = ["domU1", "domU2", "domU1", "domU2"]
wait_policy = "busy_poll"
params = { class = "S" }
"#;

/// The adaptive wait policy on an oversubscribed credit host: four b_eff
/// ranks on four vCPUs sharing two cores with a noise VM.
pub const ADAPTIVE_BEFF_CREDIT: &str = r#"
name = "adaptive-beff-credit"
[host]
cores = 2
[hypervisor]
scheduler = "credit"

[[domains]]
name = "vm"
vcpus = 4
pin = [[0, 1]]

[[domains]]
name = "noise"
pin = [[1]]

[[jobs]]
name = "beff"
workload = "beff"
ranks = ["vm", "vm", "vm", "vm"]
wait_policy = "adaptive"
params = { max_log2 = 12, reps = 3 }

[[jobs]]
name = "noise"
workload = "noise"
ranks = ["noise"]
"#;

fn bless() -> bool {
    std::env::var("VHPC_BLESS").is_ok_and(|v| v == "1")
}

/// Runs `text` at the fixed seed and compares (or, blessing, rewrites) its
/// summary with the golden file `name`.json.
fn golden(name: &str, text: &str) {
    let out = run(text, name, Some(SEED), false);
    assert_invariants(name, text, &out);
    let actual =
        serde_json::to_string_pretty(&summary(&out.report)).expect("summary serialises") + "\n";
    let path = crate_path(&format!("tests/golden/{name}.json"));
    if bless() {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("create tests/golden");
        std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("blessed {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with VHPC_BLESS=1 to create it)",
            path.display()
        )
    });
    if actual != expected {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .filter(|(e, a)| e != a)
            .map(|(e, a)| format!("  golden: {e}\n  actual: {a}"))
            .collect();
        panic!(
            "{name}: summary differs from {} ({} lines changed{}):\n{}\n\nfull actual summary:\n{actual}\n\
             If the change is intended, rerun with VHPC_BLESS=1 and commit the new golden file.",
            path.display(),
            diff.len(),
            if expected.lines().count() != actual.lines().count() { ", line count differs" } else { "" },
            diff.join("\n"),
        );
    }
}

#[test]
fn golden_s0_beff_native_up() {
    golden(
        "s0-beff-native-up",
        &scenario_file("s0-beff-native-up.toml"),
    );
}

#[test]
fn golden_s0_beff_intra_vm_credit_pin() {
    golden(
        "s0-beff-intra-vm-credit-pin",
        &scenario_file("s0-beff-intra-vm-credit-pin.toml"),
    );
}

#[test]
fn golden_sedf_exchange_block() {
    golden("sedf-exchange-block", SEDF_EXCHANGE_BLOCK);
}

#[test]
fn golden_npb_is_credit_dom0() {
    golden("npb-is-credit-dom0", NPB_IS_CREDIT_DOM0);
}

#[test]
fn golden_adaptive_beff_credit() {
    golden("adaptive-beff-credit", ADAPTIVE_BEFF_CREDIT);
}

#[test]
fn golden_credit2_pressure() {
    golden("credit2-pressure", &scenario_file("credit2-pressure.toml"));
}

#[test]
fn golden_gang_pressure() {
    golden("gang-pressure", &scenario_file("gang-pressure.toml"));
}
