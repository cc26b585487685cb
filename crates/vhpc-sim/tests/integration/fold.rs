//! Futile hypervisor yields folded in closed form (engine `fold`): a run
//! that folds reports exactly what the same run reports one yield at a time.
//! A traced run never folds (the trace wants every stretch a vCPU ran), so
//! it is the one-by-one reference.

use vhpc_sim::engine::Engine;
use vhpc_sim::trace::Sink;
use vhpc_sim::Scenario;

use crate::util::scenario_file;

/// S0's pressure setup: `domus` domUs of 2 vCPUs each running npb.lu of
/// `class` on 2 ranks under the revised library (`hv_yield`), Credit,
/// stopped at `limit_ms`.
fn pressure(domus: usize, class: &str, limit_ms: u64) -> String {
    let mut text = scenario_file("s0-pressure.toml")
        .replace("wait_policy = \"busy_poll\"", "wait_policy = \"hv_yield\"")
        .replace("class = \"A\"", &format!("class = \"{class}\""))
        .replace("limit_ms = 3600000", &format!("limit_ms = {limit_ms}"));
    for i in 2..=domus {
        text += &format!(
            "\n[[domains]]\nname = \"domU{i}\"\nvcpus = 2\n\n[[jobs]]\nname = \"domU{i}\"\n\
             workload = \"npb.lu\"\nranks = [\"domU{i}\", \"domU{i}\"]\n\
             wait_policy = \"hv_yield\"\nparams = {{ class = \"{class}\" }}\n"
        );
    }
    text
}

/// The report as JSON and the poll windows folded.
fn report(text: &str, seed: u64, traced: bool) -> (String, u64) {
    let sc = Scenario::from_toml(text, "fold").expect("valid scenario");
    let sink = traced.then(|| Sink::Memory(Vec::new()));
    let mut engine = Engine::new(&sc, Some(seed), sink);
    while !engine.advance(u64::MAX) {}
    let folded = engine.folded();
    let (report, _) = engine.finish();
    (serde_json::to_string(&report).expect("serialises"), folded)
}

#[test]
fn folded_runs_report_what_yields_one_by_one_report() {
    for (domus, class, limit_ms, seed) in [
        (1, "S", 3_600_000, 1),
        (2, "S", 3_600_000, 1),
        (2, "W", 400, 7),
        (3, "S", 3_600_000, 2),
        // Stopped at the limit in the middle of a run of futile yields.
        (2, "A", 150, 1),
        (4, "A", 97, 3),
    ] {
        let text = pressure(domus, class, limit_ms);
        let (folded, n) = report(&text, seed, false);
        let (one_by_one, none) = report(&text, seed, true);
        assert_eq!(none, 0, "a traced run does not fold");
        assert!(n > 0, "{domus} domUs, class {class}: nothing folded");
        assert!(
            folded == one_by_one,
            "{domus} domUs, class {class}, limit {limit_ms} ms, seed {seed}: reports differ"
        );
    }
}
