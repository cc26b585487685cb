//! Runs one scenario file and prints its report as JSON (a development aid;
//! users call `vhpc sim run`).
//!
//!     cargo run --release -p vhpc-sim --example run -- SCENARIO.toml [SEED]
//!
//! Built with `--features event-counts`, it also prints the run's events by
//! kind on stderr (engine/counts.rs).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: run SCENARIO.toml [SEED]");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(2);
    });
    let seed = args
        .get(2)
        .map(|s| s.parse().expect("SEED must be an integer"));
    let start = std::time::Instant::now();
    match run(&text, path, seed) {
        Ok(out) => {
            let wall = start.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::to_string_pretty(&out.report).expect("reports serialise")
            );
            eprintln!(
                "{} events in {wall:.3} s wall ({:.1} M events/s)",
                out.report.events,
                out.report.events as f64 / wall / 1e6
            );
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}

#[cfg(not(feature = "event-counts"))]
fn run(
    text: &str,
    path: &str,
    seed: Option<u64>,
) -> Result<vhpc_sim::RunOutput, vhpc_sim::ScenarioError> {
    vhpc_sim::run_toml(text, path, seed, false)
}

/// The run, its events by kind printed once it is over.
#[cfg(feature = "event-counts")]
fn run(
    text: &str,
    path: &str,
    seed: Option<u64>,
) -> Result<vhpc_sim::RunOutput, vhpc_sim::ScenarioError> {
    let scenario = vhpc_sim::Scenario::from_toml(text, path)?;
    let out = vhpc_sim::run_checked(&scenario, seed, false, |engine| {
        while !engine.advance(u64::MAX) {}
        eprintln!("{}", engine.event_counts());
        Ok::<(), std::convert::Infallible>(())
    });
    Ok(match out {
        Ok(out) => out,
        Err(never) => match never {},
    })
}
