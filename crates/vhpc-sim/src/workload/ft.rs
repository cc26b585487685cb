//! NPB FT (3-D FFT) as a memory-aware phase program, MPI and OpenMP-style.
//! NPB 3.3's slab layout: each rank holds `nz / P` planes; a 3-D FFT is 1-D
//! FFTs along x and y on the local planes, a global transpose (all-to-all,
//! N × 16 B / P² to every peer) and 1-D FFTs along z. One forward FFT
//! before the loop; per iteration the evolution, an inverse FFT and a
//! checksum (one complex reduced). The OpenMP variant meets at a barrier
//! where MPI transposes; its threads read each other's planes instead.
//!
//! Costs (assumptions, not fitted): an FFT of N points takes 5 N log2 N
//! flops and the evolution 8 flops per point, at 600 Mflop/s per core
//! (5/3 ns per flop); two thirds of an FFT's flops come before the
//! transpose.

use super::npb_memory::{common, ft_size, log2, Kernel};
use super::{Shape, Step, WorkloadInfo};

pub const FT: WorkloadInfo = WorkloadInfo {
    name: "npb.ft",
    description: "NPB FT (MPI), memory-aware: per iteration the evolution and a 3-D FFT of x-y \
                  planes, an all-to-all transpose and the z FFTs, then a checksum",
    check: |p, n| check(p, n, false),
    build: |p, s| build(p, s, false),
    endless: false,
};

pub fn check(p: &toml::Table, ranks: u32, omp: bool) -> Result<(), (String, String)> {
    let c = common(p, Kernel::Ft, omp)?;
    let (_, ny, nz, _) = ft_size(c.class).expect("checked class");
    if !omp && !ranks.is_power_of_two() {
        return Err((
            String::new(),
            format!("NPB FT needs a power-of-two number of ranks, got {ranks}"),
        ));
    }
    if ranks as u64 > nz.min(ny) {
        return Err((
            String::new(),
            format!(
                "class {} has {} planes: at most that many ranks",
                c.class,
                nz.min(ny)
            ),
        ));
    }
    Ok(())
}

pub fn build(p: &toml::Table, s: Shape, omp: bool) -> Vec<Step> {
    let c = common(p, Kernel::Ft, omp).expect("checked");
    let (nx, ny, nz, niter) = ft_size(c.class).expect("checked");
    let iterations = c.iterations.unwrap_or(niter);
    let ranks = s.ranks as u64;
    let n = nx * ny * nz;
    let local = n / ranks;
    // ns for `flops` at 600 Mflop/s.
    let ns = |flops: u64| flops * 5 / 3;
    let mem = |flops: u64| Step::MemCompute {
        ns: ns(flops),
        jitter_ppm: c.jitter_ppm,
        mem_ppm: c.mem_ppm,
    };
    let fft_flops = 5 * local * log2(n);
    let transpose = if omp {
        Step::Barrier
    } else {
        Step::Alltoall {
            bytes: n * 16 / (ranks * ranks),
        }
    };
    let fft = [
        mem(fft_flops * 2 / 3),
        transpose,
        mem(fft_flops - fft_flops * 2 / 3),
    ];
    let checksum = if omp {
        Step::Barrier
    } else {
        Step::Allreduce { bytes: 16 }
    };
    let mut steps = fft.to_vec();
    steps.push(Step::Loop {
        count: iterations,
        len: 5,
    });
    steps.push(mem(8 * local));
    steps.extend(fft);
    steps.push(checksum);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_b_transposes_two_mib_per_pair_at_sixteen_ranks() {
        let p = toml::Table::new();
        let steps = build(&p, Shape { rank: 3, ranks: 16 }, false);
        assert!(steps
            .iter()
            .any(|s| matches!(s, Step::Alltoall { bytes } if *bytes == (1 << 25) * 16 / 256)));
        assert!(check(&p, 16, false).is_ok());
        assert!(check(&p, 12, false).is_err());
        assert!(check(&p, 12, true).is_ok());
    }
}
