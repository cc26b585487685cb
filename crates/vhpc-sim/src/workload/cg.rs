//! NPB CG (conjugate gradient) as a memory-aware phase program, MPI and
//! OpenMP-style: per outer iteration, 25 CG iterations, each a sparse
//! matrix-vector product and two dot products, then a residual.
//!
//! MPI layout as NPB 3.3's: ranks on an `nprows × npcols` grid (npcols =
//! nprows, or twice it for an odd power of two); a rank owns a block of the
//! matrix. After its product it sums the partial vector along its row by
//! recursive halving (log2 npcols exchanges of a shrinking half) and swaps
//! with its transpose partner; each dot product sums one double along the
//! row. Non-square grids pair rank r with r xor P/2 for the transpose (a
//! simplification of NPB's exch_proc). The OpenMP variant does the same
//! work per thread and meets at a barrier where MPI communicates.
//!
//! Costs (assumptions, not fitted): 5 ns per nonzero per product (2 flops
//! at 400 Mflop/s, a 2008 core on a memory-bound kernel) and 10 ns per
//! vector element per iteration (five vector operations of 2 flops at
//! 1 Gflop/s).

use super::npb_memory::{cg_size, common, log2, Kernel};
use super::{Shape, Step, WorkloadInfo};

pub const CG: WorkloadInfo = WorkloadInfo {
    name: "npb.cg",
    description: "NPB CG (MPI), memory-aware: per iteration a sparse matrix-vector product, a \
                  row reduction by recursive halving, a transpose exchange and two dot products",
    check: |p, n| check(p, n, false),
    build: |p, s| build(p, s, false),
    endless: false,
};

const NS_PER_NONZERO: u64 = 5;
const NS_PER_ELEMENT: u64 = 10;
const INNER: u64 = 25;

pub fn check(p: &toml::Table, ranks: u32, omp: bool) -> Result<(), (String, String)> {
    let c = common(p, Kernel::Cg, omp)?;
    let (na, _, _) = cg_size(c.class).expect("checked class");
    if !omp && !ranks.is_power_of_two() {
        return Err((
            String::new(),
            format!("NPB CG needs a power-of-two number of ranks, got {ranks}"),
        ));
    }
    if ranks as u64 > na / 2 {
        return Err((
            String::new(),
            format!("class {} has {na} rows: at most {} ranks", c.class, na / 2),
        ));
    }
    Ok(())
}

pub fn build(p: &toml::Table, s: Shape, omp: bool) -> Vec<Step> {
    let c = common(p, Kernel::Cg, omp).expect("checked");
    let (na, nonzer, niter) = cg_size(c.class).expect("checked");
    let iterations = c.iterations.unwrap_or(niter);
    let ranks = s.ranks as u64;
    let nz = na * (nonzer + 1) * (nonzer + 1);
    let k = log2(ranks.max(1));
    let nprows = 1u64 << (k / 2);
    let npcols = 1u64 << (k - k / 2);
    let mem = |ns: u64| Step::MemCompute {
        ns,
        jitter_ppm: c.jitter_ppm,
        mem_ppm: c.mem_ppm,
    };
    let spmv = mem(nz / ranks * NS_PER_NONZERO);
    // Half the vector work after each dot product.
    let vector = if omp {
        mem(NS_PER_ELEMENT * na / ranks / 2)
    } else {
        mem(NS_PER_ELEMENT * na / npcols / 2)
    };
    let r = s.rank;
    let mut product = vec![spmv];
    let mut dot = vec![vector];
    if omp {
        product.push(Step::Barrier);
        dot.push(Step::Barrier);
    } else {
        let row_bytes = na / nprows * 8;
        for l in 0..log2(npcols) {
            let peer = r ^ (1 << l);
            product.push(Step::Sendrecv {
                peer,
                bytes: row_bytes >> (l + 1),
            });
            dot.push(Step::Sendrecv { peer, bytes: 8 });
        }
        if ranks > 1 {
            let (row, col) = (r as u64 / npcols, r as u64 % npcols);
            let partner = if nprows == npcols {
                (col * npcols + row) as u32
            } else {
                r ^ (s.ranks / 2)
            };
            if partner != r {
                product.push(Step::Sendrecv {
                    peer: partner,
                    bytes: na / npcols * 8,
                });
            }
        }
    }
    let mut inner = product.clone();
    inner.extend(dot.iter().copied());
    inner.extend(dot.iter().copied());
    // The outer iteration: 25 CG iterations, then the residual's product
    // and its norm.
    let mut outer = vec![Step::Loop {
        count: INNER,
        len: inner.len() as u32,
    }];
    outer.extend(inner);
    outer.extend(product);
    outer.extend(dot);
    let mut steps = vec![Step::Loop {
        count: iterations,
        len: outer.len() as u32,
    }];
    steps.extend(outer);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Program;
    use rand::SeedableRng;

    /// Every send has its receive: the whole program of every rank, for
    /// square and non-square grids.
    #[test]
    fn every_rank_pairs_its_messages() {
        for ranks in [1u32, 2, 4, 8, 16] {
            let mut p = toml::Table::new();
            p.insert("class".into(), "S".into());
            p.insert("iterations".into(), 1.into());
            let mut sends = vec![vec![0u64; ranks as usize]; ranks as usize];
            let mut recvs = sends.clone();
            for r in 0..ranks {
                let shape = Shape { rank: r, ranks };
                let mut prog = Program::new(build(&p, shape, false), shape);
                let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
                loop {
                    match prog.next_op(&mut rng) {
                        crate::workload::Op::Done => break,
                        crate::workload::Op::Isend { peer, bytes } => {
                            sends[r as usize][peer as usize] += bytes + 1
                        }
                        crate::workload::Op::Irecv { peer, bytes } => {
                            recvs[peer as usize][r as usize] += bytes + 1
                        }
                        _ => {}
                    }
                }
            }
            assert_eq!(sends, recvs, "{ranks} ranks");
            assert!(check(&p, ranks, false).is_ok());
        }
    }
}
