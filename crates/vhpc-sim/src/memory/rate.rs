//! The stretch of a memory-aware phase: latency ratio and bandwidth
//! contention per node, combined as a roofline does (an access waits for
//! the slower of the two).
//!
//! For a rank on a core of node `c` whose accesses go to nodes `n` with
//! shares `f(n)`, and a phase whose share `m` is memory stalls:
//!
//! ```text
//! S = Σ_n f(n) · max(d(c, n) / 10, U(n))     U(n) = demand on n / bandwidth of n
//! stretch = (1 − m) + m · S
//! ```
//!
//! A rank's demand while it streams is `m` times its core's fair share of
//! its node's bandwidth (bandwidth / cores of the node): natively, with
//! every core streaming locally, each node is used at `m` ≤ 1 and costs
//! nothing extra; what the model adds is remote latency and the overload
//! of nodes that hold more than their share of the streaming ranks' pages.

use super::PPM;

/// The stretch (ppm: 1000000 = native speed) of a phase of intensity
/// `mem_ppm` whose accesses go to `access` = (node, share ppm), run from a
/// core whose distances to the nodes are `distance_row`, with node demands
/// `load` (MB/s × ppm) against `bandwidth` (MB/s).
pub fn stretch_ppm(
    mem_ppm: u32,
    access: &[(usize, u32)],
    distance_row: &[u32],
    load: &[u64],
    bandwidth: &[u64],
) -> u64 {
    let mut s: u128 = 0;
    for &(n, share) in access {
        let latency = distance_row[n] as u64 * (PPM / 10);
        let utilisation = load[n] / bandwidth[n].max(1);
        s += share as u128 * latency.max(utilisation) as u128;
    }
    let s = (s / PPM as u128) as u64;
    let m = mem_ppm as u64;
    (PPM - m) + (m as u128 * s as u128 / PPM as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_uncontended_memory_costs_nothing() {
        let s = stretch_ppm(700_000, &[(0, 1_000_000)], &[10, 20], &[0, 0], &[100, 100]);
        assert_eq!(s, PPM);
    }

    #[test]
    fn fully_remote_memory_bound_phase_slows_by_the_distance_ratio() {
        let s = stretch_ppm(
            1_000_000,
            &[(1, 1_000_000)],
            &[10, 21],
            &[0, 0],
            &[100, 100],
        );
        assert_eq!(s, 2_100_000);
        // Half memory-bound: half the phase stretched.
        let s = stretch_ppm(500_000, &[(1, 1_000_000)], &[10, 21], &[0, 0], &[100, 100]);
        assert_eq!(s, 500_000 + 1_050_000);
    }

    #[test]
    fn an_overloaded_node_slows_its_accesses_by_its_load() {
        // Node 0 asked for 3× its bandwidth: local accesses take 3×.
        let s = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[10, 20],
            &[300 * PPM, 0],
            &[100, 100],
        );
        assert_eq!(s, 3 * PPM);
        // Remote accesses to it: the larger of 2 (latency) and 3 (load).
        let s = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[20, 10],
            &[300 * PPM, 0],
            &[100, 100],
        );
        assert_eq!(s, 3 * PPM);
    }
}
