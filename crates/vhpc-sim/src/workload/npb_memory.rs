//! What the memory model needs from the NPB kernels: each class's problem
//! size (the class parameters NPB 3.3 publishes), the memory its main arrays
//! take, and how memory-bound each kernel's computation is.
//!
//! Footprints are computed from the arrays the NPB 3.3 sources allocate
//! (bytes per element × elements), not measured: CG the matrix (`a`: 8 B,
//! `colidx`: 4 B per nonzero, NPB's bound `nz = na (nonzer+1)^2`) plus five
//! vectors; MG `u` and `r` over all grid levels (8/7 of the finest) and `v`,
//! doubles; FT `u0`, `u1`, `u2` (complex, 16 B) and the twiddle factors
//! (8 B); IS the keys and two key buffers (3 × 4 B per key); EP one
//! 2^17-double buffer per rank.
//!
//! Memory intensity (`mem_ppm`: the share of a compute phase's time that is
//! memory stalls when every access is local and uncontended) is an
//! assumption per kernel, reasoned from what its inner loop does, and not
//! fitted to any figure: see [`Kernel::intensity_ppm`]. Scenarios may
//! override it (`mem_intensity_ppm`).

use super::{int_param, known_params};

/// What a memory-aware workload tells the memory model about its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemProfile {
    /// Memory each rank (thread) touches, KiB.
    pub footprint_kib: u64,
    /// OpenMP-style threads: share of a thread's accesses that go to the
    /// whole job's arrays rather than to its own part (MPI ranks: 0).
    pub shared_ppm: u32,
    /// Threads of one job in one domain sharing arrays.
    pub omp: bool,
    /// The master thread touches all data first (a serial initialisation).
    pub master_init: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Cg,
    Mg,
    Ft,
    Is,
    Ep,
}

pub const CLASSES: &str = "S, W, A, B or C";

impl Kernel {
    /// The kernel and whether it is the OpenMP-style variant, by workload name.
    pub fn of_workload(name: &str) -> Option<(Kernel, bool)> {
        Some(match name {
            "npb.cg" => (Kernel::Cg, false),
            "npb.mg" => (Kernel::Mg, false),
            "npb.ft" => (Kernel::Ft, false),
            "npb.is" => (Kernel::Is, false),
            "npb.ep" => (Kernel::Ep, false),
            "npb.omp.cg" => (Kernel::Cg, true),
            "npb.omp.mg" => (Kernel::Mg, true),
            "npb.omp.ft" => (Kernel::Ft, true),
            "npb.omp.is" => (Kernel::Is, true),
            "npb.omp.ep" => (Kernel::Ep, true),
            _ => return None,
        })
    }

    /// Share of compute time stalled on memory, all local and uncontended
    /// (assumptions, with the reasoning):
    /// * CG 700000: sparse matrix-vector products stream 12 bytes of matrix
    ///   per 2 flops and gather the vector indirectly, far below the
    ///   flop-per-byte balance of any S3 machine: mostly waiting on memory.
    /// * MG 500000: 7- to 27-point stencils over arrays much larger than
    ///   the caches on the fine levels (bandwidth-bound), cache-resident on
    ///   the coarse ones.
    /// * FT 400000: 1-D FFTs of 256-512 points run in cache (5 n log n
    ///   flops); the strided passes between dimensions stream memory.
    /// * IS 600000: counting and scattering 4-byte keys into buckets is
    ///   random access with no arithmetic to hide it.
    /// * EP 10000: random numbers made and used in registers; its buffer
    ///   (1 MiB) stays in cache.
    pub fn intensity_ppm(self) -> u32 {
        match self {
            Kernel::Cg => 700_000,
            Kernel::Mg => 500_000,
            Kernel::Ft => 400_000,
            Kernel::Is => 600_000,
            Kernel::Ep => 10_000,
        }
    }

    /// OpenMP-style threads: share of a thread's accesses to other threads'
    /// parts of the shared arrays (assumptions): CG reads the whole vector
    /// `p` through `colidx` (8 of the 20 bytes a nonzero moves, much of it
    /// cached: 100000); MG only the faces of its block (50000); FT's FFT
    /// along the distributed dimension reads every thread's part (one pass
    /// in three: 333333); IS ranks keys against every thread's buckets
    /// (500000); EP shares nothing but the final sums (0).
    pub fn shared_ppm(self) -> u32 {
        match self {
            Kernel::Cg => 100_000,
            Kernel::Mg => 50_000,
            Kernel::Ft => 333_333,
            Kernel::Is => 500_000,
            Kernel::Ep => 0,
        }
    }

    /// Bytes of the main arrays of the whole problem (module doc), for
    /// `ranks` ranks (EP's buffer is per rank).
    pub fn footprint_bytes(self, class: &str, ranks: u64) -> Option<u64> {
        Some(match self {
            Kernel::Cg => {
                let (na, nonzer, _) = cg_size(class)?;
                12 * na * (nonzer + 1) * (nonzer + 1) + 5 * 8 * na
            }
            Kernel::Mg => {
                let (n, _) = mg_size(class)?;
                n * n * n * 8 * 23 / 7
            }
            Kernel::Ft => {
                let (nx, ny, nz, _) = ft_size(class)?;
                nx * ny * nz * 56
            }
            Kernel::Is => 12 << is_log2_keys(class)?,
            Kernel::Ep => {
                class_index(class)?;
                ranks * (8 << 17)
            }
        })
    }
}

fn class_index(class: &str) -> Option<usize> {
    ["S", "W", "A", "B", "C"].iter().position(|c| *c == class)
}

/// CG: (na, nonzer, niter) of NPB 3.3.
pub fn cg_size(class: &str) -> Option<(u64, u64, u64)> {
    const SIZES: [(u64, u64, u64); 5] = [
        (1400, 7, 15),
        (7000, 8, 15),
        (14000, 11, 15),
        (75000, 13, 75),
        (150000, 15, 75),
    ];
    class_index(class).map(|i| SIZES[i])
}

/// MG: (grid edge, iterations) of NPB 3.3.
pub fn mg_size(class: &str) -> Option<(u64, u64)> {
    const SIZES: [(u64, u64); 5] = [(32, 4), (128, 4), (256, 4), (256, 20), (512, 20)];
    class_index(class).map(|i| SIZES[i])
}

/// FT: (nx, ny, nz, iterations) of NPB 3.3.
pub fn ft_size(class: &str) -> Option<(u64, u64, u64, u64)> {
    const SIZES: [(u64, u64, u64, u64); 5] = [
        (64, 64, 64, 6),
        (128, 128, 32, 6),
        (256, 256, 128, 6),
        (512, 256, 256, 20),
        (512, 512, 512, 20),
    ];
    class_index(class).map(|i| SIZES[i])
}

/// IS: log2 of the number of keys, NPB 3.3.
pub fn is_log2_keys(class: &str) -> Option<u64> {
    const SIZES: [u64; 5] = [16, 20, 23, 25, 27];
    class_index(class).map(|i| SIZES[i])
}

/// The `class` parameter (`default` when absent).
pub fn class_param<'a>(p: &'a toml::Table, default: &'a str) -> Result<&'a str, (String, String)> {
    match p.get("class") {
        None => Ok(default),
        Some(toml::Value::String(s)) if class_index(s).is_some() => Ok(s.as_str()),
        Some(other) => Err((
            "class".into(),
            format!("must be one of {CLASSES}, got {other}"),
        )),
    }
}

/// Parameters every memory-aware kernel of this module takes.
pub const PARAMS: &[&str] = &["class", "jitter_ppm", "mem_intensity_ppm", "iterations"];
/// ... and the OpenMP-style variants' first-touch rule.
pub const OMP_PARAMS: &[&str] = &[
    "class",
    "jitter_ppm",
    "mem_intensity_ppm",
    "iterations",
    "init",
];

/// The common parameters of a memory-aware kernel, checked.
#[derive(Debug, Clone, Copy)]
pub struct Common<'a> {
    pub class: &'a str,
    pub jitter_ppm: u32,
    pub mem_ppm: u32,
    /// `iterations` if given (a shortened run: per-iteration behaviour is
    /// the class's), else the class's count.
    pub iterations: Option<u64>,
    pub master_init: bool,
}

pub fn common<'a>(
    p: &'a toml::Table,
    kernel: Kernel,
    omp: bool,
) -> Result<Common<'a>, (String, String)> {
    known_params(p, if omp { OMP_PARAMS } else { PARAMS })?;
    let class = class_param(p, "B")?;
    let jitter_ppm = int_param(p, "jitter_ppm", 10_000, 0, 1_000_000)? as u32;
    let mem_ppm = int_param(
        p,
        "mem_intensity_ppm",
        kernel.intensity_ppm() as u64,
        0,
        1_000_000,
    )? as u32;
    let iterations = match p.get("iterations") {
        None => None,
        Some(_) => Some(int_param(p, "iterations", 1, 1, 1_000_000)?),
    };
    let master_init = match p.get("init") {
        None => false,
        Some(toml::Value::String(s)) if s == "threads" => false,
        Some(toml::Value::String(s)) if s == "master" => true,
        Some(other) => {
            return Err((
                "init".into(),
                format!("must be \"threads\" (each thread first-touches its part) or \"master\" (a serial initialisation), got {other}"),
            ))
        }
    };
    Ok(Common {
        class,
        jitter_ppm,
        mem_ppm,
        iterations,
        master_init,
    })
}

/// The memory profile of a job's ranks, or None for a workload the memory
/// model does not track (its compute costs what it costs without one).
pub fn memory_profile(name: &str, p: &toml::Table, ranks: u32) -> Option<MemProfile> {
    if name == "exchange" {
        let m = int_param(p, "mem_intensity_ppm", 0, 0, 1_000_000).ok()?;
        let mib = int_param(p, "footprint_mib", 64, 1, 1 << 20).ok()?;
        return (m > 0).then_some(MemProfile {
            footprint_kib: mib * 1024,
            shared_ppm: 0,
            omp: false,
            master_init: false,
        });
    }
    let (kernel, omp) = Kernel::of_workload(name)?;
    // IS and EP (npb.rs) default to class A, as S0 ran them.
    let default = match (kernel, omp) {
        (Kernel::Is | Kernel::Ep, false) => "A",
        _ => "B",
    };
    let class = class_param(p, default).ok()?;
    let ranks = ranks.max(1) as u64;
    let bytes = kernel.footprint_bytes(class, ranks)?;
    let master_init = matches!(p.get("init"), Some(toml::Value::String(s)) if s == "master");
    Some(MemProfile {
        footprint_kib: (bytes / ranks).div_ceil(1024),
        shared_ppm: if omp { kernel.shared_ppm() } else { 0 },
        omp,
        master_init: omp && master_init,
    })
}

/// Exponent of a power of two (`n` is one).
pub fn log2(n: u64) -> u64 {
    63 - n.leading_zeros() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_b_and_c_footprints_follow_the_arrays() {
        let mib = |k: Kernel, c: &str| k.footprint_bytes(c, 16).unwrap() >> 20;
        // CG.B: 75000 × 14² nonzeros × 12 B ≈ 168 MiB; C: 150000 × 16² ≈ 440 MiB.
        assert_eq!(mib(Kernel::Cg, "B"), 171);
        assert_eq!(mib(Kernel::Cg, "C"), 445);
        // MG.B: 256³ × 8 B × 23/7 ≈ 421 MiB; C eight times that.
        assert_eq!(mib(Kernel::Mg, "B"), 420);
        assert_eq!(mib(Kernel::Mg, "C"), 3364);
        // FT.B: 512 × 256² × 56 B = 1792 MiB; C: 512³ × 56 B = 7168 MiB.
        assert_eq!(mib(Kernel::Ft, "B"), 1792);
        assert_eq!(mib(Kernel::Ft, "C"), 7168);
        assert_eq!(mib(Kernel::Is, "C"), 1536);
    }

    #[test]
    fn profiles_split_the_footprint_and_know_omp() {
        let mut p = toml::Table::new();
        p.insert("class".into(), "C".into());
        let mpi = memory_profile("npb.ft", &p, 16).unwrap();
        assert_eq!(mpi.footprint_kib, 7168 * 1024 / 16);
        assert_eq!((mpi.shared_ppm, mpi.omp), (0, false));
        p.insert("init".into(), "master".into());
        let omp = memory_profile("npb.omp.ft", &p, 16).unwrap();
        assert!(omp.omp && omp.master_init && omp.shared_ppm > 0);
        assert!(memory_profile("npb.lu", &p, 16).is_none());
        assert!(memory_profile("exchange", &toml::Table::new(), 2).is_none());
    }
}
