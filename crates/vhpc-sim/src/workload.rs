//! Workloads: what each rank of a job does, as a compact phase program.
//!
//! A workload builds, for every rank, a short list of [`Step`]s with loops
//! (so a one-hour run takes no more memory than a one-second run); the
//! [`Program`] interpreter turns it into the stream of [`Op`]s the engine
//! executes, expanding collectives into point-to-point rounds with the
//! standard algorithms (pairwise exchange for all-to-all, recursive doubling
//! for allreduce, dissemination for barrier).

use rand::Rng;
use rand_pcg::Pcg64;

use crate::time::SimTime;

pub mod beff;
pub mod build;
pub mod cg;
pub mod exchange;
pub mod ft;
pub mod mg;
pub mod noise;
pub mod npb;
pub mod npb_memory;
pub mod omp;
pub mod pipe;
pub mod ssor;

pub use npb_memory::{memory_profile, MemProfile};

/// One operation of a rank, as the engine executes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Useful computation for this long (on a CPU of its own).
    Compute(SimTime),
    /// Computation of which `mem_ppm` parts per million are memory stalls
    /// (on a local, uncontended node): the memory model (`[memory]`)
    /// stretches that part; without it, exactly a `Compute`.
    MemCompute(SimTime, u32),
    /// Start sending `bytes` to rank `peer` (non-blocking).
    Isend { peer: u32, bytes: u64 },
    /// Post a receive of `bytes` from rank `peer` (non-blocking).
    Irecv { peer: u32, bytes: u64 },
    /// Wait until every started send and receive has completed.
    WaitAll,
    /// The rank reached its timed part ([`Step::ClockStart`]).
    ClockStart,
    /// The rank has finished.
    Done,
}

/// A rank's neighbour, resolved when the program is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Compute for `ns`, varied uniformly by ±`jitter_ppm` parts per million.
    Compute {
        ns: u64,
        jitter_ppm: u32,
    },
    /// `Compute` whose `mem_ppm` parts per million are memory stalls
    /// ([`Op::MemCompute`]); draws its jitter exactly as `Compute` does.
    MemCompute {
        ns: u64,
        jitter_ppm: u32,
        mem_ppm: u32,
    },
    /// Halo exchange with two neighbours (`lo`, `hi`, possibly the same):
    /// both receives and both sends started, then one wait, so a ring of
    /// ranks cannot deadlock as chained `Sendrecv`s would.
    Halo {
        lo: u32,
        hi: u32,
        bytes: u64,
    },
    /// Blocking send (`MPI_Send`): start it, wait for it.
    Send {
        peer: u32,
        bytes: u64,
    },
    /// Blocking receive (`MPI_Recv`).
    Recv {
        peer: u32,
        bytes: u64,
    },
    /// Send to and receive from `peer`, then wait for both.
    Sendrecv {
        peer: u32,
        bytes: u64,
    },
    /// All-to-all with `bytes` to every other rank (pairwise exchange).
    Alltoall {
        bytes: u64,
    },
    /// Allreduce of `bytes` (recursive doubling; non-powers of two fold in).
    Allreduce {
        bytes: u64,
    },
    Barrier,
    /// The job's timed part begins (`timed_from = "all_ranks_ran"`): its clock
    /// starts when the last rank gets here.
    ClockStart,
    /// Repeat the next `len` steps `count` times (`u64::MAX`: forever).
    Loop {
        count: u64,
        len: u32,
    },
}

/// Everything a workload needs to build its programs.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub rank: u32,
    pub ranks: u32,
}

/// A rejected parameter: (its name, or empty for the workload as a whole; why).
pub type ParamError = (String, String);

/// A registered workload.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// Checks the parameters: `Err((param, message))`.
    pub check: fn(&toml::Table, u32) -> Result<(), ParamError>,
    /// The program of one rank.
    pub build: fn(&toml::Table, Shape) -> Vec<Step>,
    /// Whether the job runs forever (noise): the run ends without it.
    pub endless: bool,
}

/// Every workload, by name.
pub const WORKLOADS: &[WorkloadInfo] = &[
    beff::INFO,
    exchange::PINGPONG,
    exchange::EXCHANGE,
    npb::IS,
    npb::LU,
    npb::EP,
    ssor::INFO,
    cg::CG,
    mg::MG,
    ft::FT,
    omp::CG,
    omp::MG,
    omp::FT,
    omp::IS,
    omp::EP,
    noise::INFO,
    pipe::INFO,
    build::INFO,
];

pub fn by_name(name: &str) -> Option<&'static WorkloadInfo> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Validates a job's workload name and parameters (for the scenario checks).
pub fn check(name: &str, params: &toml::Table, ranks: usize) -> Result<(), (String, String)> {
    let Some(w) = by_name(name) else {
        let names: Vec<_> = WORKLOADS.iter().map(|w| w.name).collect();
        return Err((
            String::new(),
            format!("unknown workload {name:?}; known: {}", names.join(", ")),
        ));
    };
    (w.check)(params, ranks as u32)
}

/// Reads an integer parameter with a default, checking its range.
pub fn int_param(
    params: &toml::Table,
    key: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, (String, String)> {
    let value = match params.get(key) {
        None => return Ok(default),
        Some(toml::Value::Integer(i)) if *i >= 0 => *i as u64,
        Some(other) => {
            return Err((
                key.into(),
                format!("must be a non-negative integer, got {other}"),
            ))
        }
    };
    if value < min || value > max {
        return Err((
            key.into(),
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(value)
}

/// Rejects parameters a workload does not know (typos must not pass silently).
/// A workload of rank pairs (2i, 2i+1) needs an even number of ranks.
pub fn even_ranks(ranks: u32) -> Result<(), (String, String)> {
    if ranks % 2 == 1 {
        return Err((
            String::new(),
            format!("pairs ranks 2i and 2i+1, so it needs an even number of ranks, got {ranks}"),
        ));
    }
    Ok(())
}

pub fn known_params(params: &toml::Table, known: &[&str]) -> Result<(), (String, String)> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err((
            k.clone(),
            format!("unknown parameter; known: {}", known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// The interpreter of one rank's program: yields [`Op`]s one at a time.
#[derive(Debug)]
pub struct Program {
    steps: Vec<Step>,
    /// Loop stack: (index of the Loop step, iterations left).
    loops: Vec<(usize, u64)>,
    pc: usize,
    /// Expanded point-to-point ops of the current step.
    pending: std::collections::VecDeque<Op>,
    rank: u32,
    ranks: u32,
}

impl Program {
    pub fn new(steps: Vec<Step>, shape: Shape) -> Self {
        Program {
            steps,
            loops: Vec::new(),
            pc: 0,
            pending: Default::default(),
            rank: shape.rank,
            ranks: shape.ranks,
        }
    }

    /// How many steps the program has (a step's index is below it).
    pub fn step_count(&self) -> usize {
        self.steps.len()
    }

    /// The index of the step the last [`Op::Compute`] or [`Op::MemCompute`]
    /// came from, if that step is inside a loop (a parallel loop of an
    /// OpenMP-style program: `jobs.throttle`); None for set-up outside loops.
    pub fn loop_step(&self) -> Option<usize> {
        (!self.loops.is_empty()).then(|| self.pc - 1)
    }

    /// Back to the first step, as a new run of the same program.
    pub fn restart(&mut self) {
        self.loops.clear();
        self.pc = 0;
        self.pending.clear();
    }

    /// The next operation; [`Op::Done`] forever once the program ends.
    pub fn next_op(&mut self, rng: &mut Pcg64) -> Op {
        loop {
            if let Some(op) = self.pending.pop_front() {
                return op;
            }
            let Some(step) = self.fetch() else {
                return Op::Done;
            };
            match step {
                Step::Compute { ns, jitter_ppm } => {
                    return Op::Compute(SimTime::from_ns(jittered(ns, jitter_ppm, rng)))
                }
                Step::MemCompute {
                    ns,
                    jitter_ppm,
                    mem_ppm,
                } => {
                    return Op::MemCompute(SimTime::from_ns(jittered(ns, jitter_ppm, rng)), mem_ppm)
                }
                Step::Halo { lo, hi, bytes } => {
                    self.pending.push_back(Op::Irecv { peer: hi, bytes });
                    self.pending.push_back(Op::Isend { peer: lo, bytes });
                    self.pending.push_back(Op::Isend { peer: hi, bytes });
                    self.pending.push_back(Op::WaitAll);
                    return Op::Irecv { peer: lo, bytes };
                }
                Step::Send { peer, bytes } => {
                    self.pending.push_back(Op::WaitAll);
                    return Op::Isend { peer, bytes };
                }
                Step::Recv { peer, bytes } => {
                    self.pending.push_back(Op::WaitAll);
                    return Op::Irecv { peer, bytes };
                }
                Step::Sendrecv { peer, bytes } => self.exchange_with(peer, bytes),
                Step::Alltoall { bytes } => self.expand_alltoall(bytes),
                Step::Allreduce { bytes } => self.expand_allreduce(bytes),
                Step::Barrier => self.expand_barrier(),
                Step::ClockStart => return Op::ClockStart,
                Step::Loop { .. } => unreachable!("fetch consumes loop steps"),
            }
        }
    }

    /// Advances the program counter through loops; the next non-loop step.
    fn fetch(&mut self) -> Option<Step> {
        loop {
            if let Some(&(start, left)) = self.loops.last() {
                let Step::Loop { len, .. } = self.steps[start] else {
                    unreachable!()
                };
                if self.pc == start + 1 + len as usize {
                    if left > 1 {
                        if left != u64::MAX {
                            self.loops.last_mut().expect("non-empty").1 = left - 1;
                        }
                        self.pc = start + 1;
                    } else {
                        self.loops.pop();
                    }
                    continue;
                }
            }
            let step = *self.steps.get(self.pc)?;
            if let Step::Loop { count, len } = step {
                if count == 0 || len == 0 {
                    self.pc += 1 + len as usize;
                } else {
                    self.loops.push((self.pc, count));
                    self.pc += 1;
                }
                continue;
            }
            self.pc += 1;
            return Some(step);
        }
    }

    fn exchange_with(&mut self, peer: u32, bytes: u64) {
        self.pending.push_back(Op::Irecv { peer, bytes });
        self.pending.push_back(Op::Isend { peer, bytes });
        self.pending.push_back(Op::WaitAll);
    }

    /// Pairwise exchange: in round i, send to rank+i and receive from rank-i.
    fn expand_alltoall(&mut self, bytes: u64) {
        let n = self.ranks;
        for i in 1..n {
            let to = (self.rank + i) % n;
            let from = (self.rank + n - i) % n;
            self.pending.push_back(Op::Irecv { peer: from, bytes });
            self.pending.push_back(Op::Isend { peer: to, bytes });
            self.pending.push_back(Op::WaitAll);
        }
    }

    /// Recursive doubling over the largest power of two; the ranks beyond it
    /// fold their data into a partner first and get the result back last.
    fn expand_allreduce(&mut self, bytes: u64) {
        let n = self.ranks;
        let pof2 = 1u32 << (31 - n.leading_zeros());
        let extra = n - pof2;
        let r = self.rank;
        if r >= pof2 {
            self.pending.push_back(Op::Isend {
                peer: r - pof2,
                bytes,
            });
            self.pending.push_back(Op::WaitAll);
            self.pending.push_back(Op::Irecv {
                peer: r - pof2,
                bytes,
            });
            self.pending.push_back(Op::WaitAll);
            return;
        }
        if r < extra {
            self.pending.push_back(Op::Irecv {
                peer: r + pof2,
                bytes,
            });
            self.pending.push_back(Op::WaitAll);
        }
        let mut mask = 1;
        while mask < pof2 {
            self.exchange_with(r ^ mask, bytes);
            mask <<= 1;
        }
        if r < extra {
            self.pending.push_back(Op::Isend {
                peer: r + pof2,
                bytes,
            });
            self.pending.push_back(Op::WaitAll);
        }
    }

    /// Dissemination barrier: ceil(log2 n) rounds of zero-byte messages.
    fn expand_barrier(&mut self) {
        let n = self.ranks;
        let mut dist = 1;
        while dist < n {
            self.pending.push_back(Op::Irecv {
                peer: (self.rank + n - dist) % n,
                bytes: 0,
            });
            self.pending.push_back(Op::Isend {
                peer: (self.rank + dist) % n,
                bytes: 0,
            });
            self.pending.push_back(Op::WaitAll);
            dist <<= 1;
        }
    }
}

/// `ns` varied uniformly within ±`ppm` parts per million.
fn jittered(ns: u64, ppm: u32, rng: &mut Pcg64) -> u64 {
    if ppm == 0 || ns == 0 {
        return ns;
    }
    let spread = (ns as u128 * ppm as u128 / 1_000_000) as u64;
    let low = ns - spread.min(ns);
    rng.gen_range(low..=ns + spread)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ops(steps: Vec<Step>, rank: u32, ranks: u32) -> Vec<Op> {
        let mut p = Program::new(steps, Shape { rank, ranks });
        let mut rng = Pcg64::seed_from_u64(1);
        let mut out = Vec::new();
        loop {
            let op = p.next_op(&mut rng);
            if op == Op::Done {
                return out;
            }
            out.push(op);
            assert!(out.len() < 10_000, "runaway program");
        }
    }

    #[test]
    fn nested_loops_repeat_their_bodies() {
        let c = |ns| Step::Compute { ns, jitter_ppm: 0 };
        let steps = vec![
            c(1),
            Step::Loop { count: 2, len: 3 },
            c(2),
            Step::Loop { count: 3, len: 1 },
            c(3),
            c(4),
        ];
        let got: Vec<u64> = ops(steps, 0, 1)
            .into_iter()
            .map(|op| match op {
                Op::Compute(t) => t.as_ns(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, vec![1, 2, 3, 3, 3, 2, 3, 3, 3, 4]);
    }

    #[test]
    fn endless_loop_never_ends() {
        let mut p = Program::new(
            vec![
                Step::Loop {
                    count: u64::MAX,
                    len: 1,
                },
                Step::Compute {
                    ns: 5,
                    jitter_ppm: 0,
                },
            ],
            Shape { rank: 0, ranks: 1 },
        );
        let mut rng = Pcg64::seed_from_u64(1);
        for _ in 0..1000 {
            assert_eq!(p.next_op(&mut rng), Op::Compute(SimTime::from_ns(5)));
        }
    }

    /// Every send in a collective has a matching receive on the peer.
    fn balanced(step: Step, n: u32) {
        let mut sends = vec![vec![0u32; n as usize]; n as usize];
        let mut recvs = vec![vec![0u32; n as usize]; n as usize];
        for r in 0..n {
            for op in ops(vec![step], r, n) {
                match op {
                    Op::Isend { peer, .. } => sends[r as usize][peer as usize] += 1,
                    Op::Irecv { peer, .. } => recvs[peer as usize][r as usize] += 1,
                    _ => {}
                }
            }
        }
        assert_eq!(sends, recvs, "{step:?} with {n} ranks");
    }

    #[test]
    fn collectives_pair_every_send_with_a_receive() {
        for n in 1..=9 {
            balanced(Step::Alltoall { bytes: 8 }, n);
            balanced(Step::Allreduce { bytes: 8 }, n);
            balanced(Step::Barrier, n);
        }
    }

    #[test]
    fn jitter_stays_in_range_and_is_seeded() {
        let mut a = Pcg64::seed_from_u64(7);
        let mut b = Pcg64::seed_from_u64(7);
        for _ in 0..1000 {
            let x = jittered(1_000_000, 50_000, &mut a);
            assert!((950_000..=1_050_000).contains(&x));
            assert_eq!(x, jittered(1_000_000, 50_000, &mut b));
        }
    }
}
