//! A parallel build (`make -jN`): N job slots, each a pair of tasks: the
//! slot's make process (rank 2i) forks a compiler (rank 2i+1) for the next
//! job and waits for it; the compiler runs a job of random length and exits
//! (wakes make). After every `jobs` jobs per slot (a directory), a serial
//! step: make (rank 0) waits for every slot, runs `serial_us` (archive,
//! link), and starts the next directory. Throughput: jobs per second (or the makespan).
//! Run it with `wait_policy = "block"`.
//!
//! Simplifications: a slot's compiler is one long-lived task (a real build
//! forks a new process per job, placed by fork/exec balancing), and each
//! slot has its own job list (make hands the next job to whichever slot
//! frees first); the random lengths still leave slots idle at the serial
//! steps, as make's do.

use super::{int_param, known_params, Shape, Step, WorkloadInfo};

pub const INFO: WorkloadInfo = WorkloadInfo {
    name: "build",
    description: "make -jN: rank pairs (make slot, compiler) run `jobs` jobs of `job_us` ± \
                  `jitter_ppm` per directory, `dirs` directories, `serial_us` of serial work \
                  between them",
    check,
    build,
    endless: false,
};

const KNOWN: &[&str] = &[
    "jobs",
    "dirs",
    "job_us",
    "jitter_ppm",
    "fork_us",
    "serial_us",
];

struct Params {
    jobs: u64,
    dirs: u64,
    job_ns: u64,
    jitter_ppm: u32,
    fork_ns: u64,
    serial_ns: u64,
}

fn params(p: &toml::Table) -> Result<Params, (String, String)> {
    Ok(Params {
        jobs: int_param(p, "jobs", 10, 1, 1 << 32)?,
        dirs: int_param(p, "dirs", 4, 1, 1 << 32)?,
        job_ns: int_param(p, "job_us", 100_000, 1, 1 << 32)? * 1000,
        jitter_ppm: int_param(p, "jitter_ppm", 900_000, 0, 1_000_000)? as u32,
        fork_ns: int_param(p, "fork_us", 1_000, 0, 1 << 32)? * 1000,
        serial_ns: int_param(p, "serial_us", 200_000, 0, 1 << 32)? * 1000,
    })
}

fn check(p: &toml::Table, ranks: u32) -> Result<(), (String, String)> {
    known_params(p, KNOWN)?;
    params(p)?;
    if ranks % 2 == 1 {
        return Err((
            String::new(),
            format!("pairs make slots with compilers (ranks 2i, 2i+1), so it needs an even number of ranks, got {ranks}"),
        ));
    }
    Ok(())
}

fn build(p: &toml::Table, s: Shape) -> Vec<Step> {
    let p = params(p).expect("checked");
    let peer = s.rank ^ 1;
    let token = |send: bool| {
        if send {
            Step::Send { peer, bytes: 4 }
        } else {
            Step::Recv { peer, bytes: 4 }
        }
    };
    let job = if s.rank % 2 == 0 {
        // make: fork and exec the next compiler, hand it the job, wait.
        vec![
            Step::Compute {
                ns: p.fork_ns,
                jitter_ppm: 0,
            },
            token(true),
            token(false),
        ]
    } else {
        vec![
            token(false),
            Step::Compute {
                ns: p.job_ns,
                jitter_ppm: p.jitter_ppm,
            },
            token(true),
        ]
    };
    let mut dir = vec![Step::Loop {
        count: p.jobs,
        len: job.len() as u32,
    }];
    dir.extend(job);
    // The serial step: make (rank 0's slot) waits for every slot's last job
    // (each slot tells it), runs `serial_us`, and starts the next directory
    // (tells every slot). Compilers wait for their slot's next job.
    let slots = (s.ranks / 2).max(1);
    if s.rank == 0 {
        dir.extend((1..slots).map(|k| Step::Recv {
            peer: 2 * k,
            bytes: 4,
        }));
        if p.serial_ns > 0 {
            dir.push(Step::Compute {
                ns: p.serial_ns,
                jitter_ppm: 0,
            });
        }
        dir.extend((1..slots).map(|k| Step::Send {
            peer: 2 * k,
            bytes: 4,
        }));
    } else if s.rank % 2 == 0 {
        dir.push(Step::Send { peer: 0, bytes: 4 });
        dir.push(Step::Recv { peer: 0, bytes: 4 });
    }
    let mut steps = vec![Step::Loop {
        count: p.dirs,
        len: dir.len() as u32,
    }];
    steps.extend(dir);
    steps
}
