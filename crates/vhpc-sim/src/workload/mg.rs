//! NPB MG (multigrid V-cycle) as a memory-aware phase program, MPI and
//! OpenMP-style. Per iteration the V-cycle visits every level from the
//! finest down and back up; at each visit a rank works on its block of
//! that level and exchanges the block's faces with its two neighbours in
//! every split dimension (NPB's comm3). Ranks form NPB 3.3's process grid:
//! the bits of P go to x, y, z in turn (16 ranks: 4 × 2 × 2). Levels whose
//! block would be thinner than two points are left out (NPB hands them to
//! fewer ranks; they cost little). The OpenMP variant meets at a barrier
//! where MPI exchanges faces.
//!
//! Cost (assumption, not fitted): 100 ns per grid point per level visit
//! (tens of flops per point of the smoother and residual at a few hundred
//! Mflop/s), half on the way down, half on the way up.

use super::npb_memory::{common, log2, mg_size, Kernel};
use super::{Shape, Step, WorkloadInfo};

pub const MG: WorkloadInfo = WorkloadInfo {
    name: "npb.mg",
    description: "NPB MG (MPI), memory-aware: V-cycles over every grid level, each level's block \
                  computed then its faces exchanged with the neighbours in x, y and z",
    check: |p, n| check(p, n, false),
    build: |p, s| build(p, s, false),
    endless: false,
};

const NS_PER_POINT: u64 = 100;

/// NPB's process grid: bits of `ranks` to x, y, z in turn.
fn grid(ranks: u64) -> [u64; 3] {
    let mut dims = [1u64; 3];
    for i in 0..log2(ranks.max(1)) {
        dims[i as usize % 3] *= 2;
    }
    dims
}

pub fn check(p: &toml::Table, ranks: u32, omp: bool) -> Result<(), (String, String)> {
    let c = common(p, Kernel::Mg, omp)?;
    let (n, _) = mg_size(c.class).expect("checked class");
    if !omp && !ranks.is_power_of_two() {
        return Err((
            String::new(),
            format!("NPB MG needs a power-of-two number of ranks, got {ranks}"),
        ));
    }
    let dims = grid(ranks as u64);
    if dims.iter().any(|&d| n / d < 2) || ranks as u64 > n * n {
        return Err((
            String::new(),
            format!("class {} ({n}^3) is too small for {ranks} ranks", c.class),
        ));
    }
    Ok(())
}

pub fn build(p: &toml::Table, s: Shape, omp: bool) -> Vec<Step> {
    let c = common(p, Kernel::Mg, omp).expect("checked");
    let (n, nit) = mg_size(c.class).expect("checked");
    let iterations = c.iterations.unwrap_or(nit);
    let ranks = s.ranks as u64;
    let dims = if omp { [ranks, 1, 1] } else { grid(ranks) };
    let r = s.rank as u64;
    let coord = [r % dims[0], r / dims[0] % dims[1], r / (dims[0] * dims[1])];
    let neighbour = |d: usize, delta: u64| -> u32 {
        let mut c2 = coord;
        c2[d] = (coord[d] + delta) % dims[d];
        (c2[0] + dims[0] * (c2[1] + dims[1] * c2[2])) as u32
    };
    // Levels from the finest (edge n) while every block edge is ≥ 2.
    let mut visits = Vec::new();
    let mut edge = n;
    while edge >= 2 && dims.iter().all(|&d| edge / d >= 2) {
        let block = [edge / dims[0], edge / dims[1], edge / dims[2]];
        let points = if omp {
            edge * edge * edge / ranks
        } else {
            block[0] * block[1] * block[2]
        };
        let mut visit = vec![Step::MemCompute {
            ns: points * NS_PER_POINT / 2,
            jitter_ppm: c.jitter_ppm,
            mem_ppm: c.mem_ppm,
        }];
        if omp {
            visit.push(Step::Barrier);
        } else {
            for d in 0..3 {
                if dims[d] > 1 {
                    let face = block[(d + 1) % 3] * block[(d + 2) % 3] * 8;
                    visit.push(Step::Halo {
                        lo: neighbour(d, dims[d] - 1),
                        hi: neighbour(d, 1),
                        bytes: face,
                    });
                }
            }
        }
        visits.push(visit);
        edge /= 2;
    }
    let mut body: Vec<Step> = visits.iter().flatten().copied().collect();
    body.extend(visits.iter().rev().flatten().copied());
    let mut steps = vec![Step::Loop {
        count: iterations,
        len: body.len() as u32,
    }];
    steps.extend(body);
    // The final norm of the residual.
    steps.push(if omp {
        Step::Barrier
    } else {
        Step::Allreduce { bytes: 16 }
    });
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_ranks_form_npbs_grid() {
        assert_eq!(grid(16), [4, 2, 2]);
        assert_eq!(grid(8), [2, 2, 2]);
        assert_eq!(grid(1), [1, 1, 1]);
    }

    #[test]
    fn neighbours_are_mutual() {
        let mut p = toml::Table::new();
        p.insert("class".into(), "S".into());
        for ranks in [2u32, 4, 8, 16] {
            let mut halos = std::collections::BTreeMap::new();
            for r in 0..ranks {
                for st in build(&p, Shape { rank: r, ranks }, false) {
                    if let Step::Halo { lo, hi, .. } = st {
                        *halos.entry((r, lo)).or_insert(0) += 1;
                        *halos.entry((r, hi)).or_insert(0) += 1;
                    }
                }
            }
            for (&(a, b), &n) in &halos {
                assert_eq!(halos.get(&(b, a)), Some(&n), "{ranks}: {a} <-> {b}");
            }
        }
    }
}
