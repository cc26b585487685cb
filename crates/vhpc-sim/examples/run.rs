//! Runs one scenario file and prints its report as JSON (a development aid;
//! users call `vhpc sim run`).
//!
//!     cargo run --release -p vhpc-sim --example run -- SCENARIO.toml [SEED]

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
    match vhpc_sim::run_toml(&text, path, seed, false) {
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
