//! The stretch of a memory-aware phase: latency ratio and bandwidth
//! contention on every resource an access crosses, combined as a roofline
//! does (an access waits for the slowest of them).
//!
//! For a rank on a core of node `c` whose accesses go to nodes `n` with
//! shares `f(n)`, and a phase whose share `m` is memory stalls:
//!
//! ```text
//! S = Σ_n f(n) · max(d(c, n) / 10, max over r in R(c, n) of U(r))
//! stretch = (1 − m) + m · S · (1 + h)
//! ```
//!
//! `R(c, n)` are the resources the data crosses: node `n`'s memory, the
//! interconnect links on the route from `n` to `c` (each direction of a
//! link is its own resource), and the core's socket bus where the host has
//! one; `U(r)` = demand on `r` / its bandwidth. `h` is the nested-paging
//! overhead of a VM on a host with hardware-assisted paging (0 otherwise).
//! A rank's demand while it streams is `m` times what its core streams
//! alone (the node's `core_mb_s`; without it the core's fair share of the
//! node's bandwidth, so that natively each node is used at `m` ≤ 1),
//! placed on every resource of each access's route in proportion to
//! `f(n)`: what the model adds is remote latency and the overload of nodes,
//! links and buses that carry more than they can. With `memory.queueing`,
//! the latency term grows by the wait at the route's bottleneck queue
//! ([`super::queue`]).

use super::PPM;

/// The stretch (ppm: 1000000 = native speed) of a phase of intensity
/// `mem_ppm` whose accesses go to `access` = (node, share ppm), run from a
/// core whose distances to the nodes are `distance_row` and whose accesses
/// to node `n` cross the resources `paths[n]` (plus `bus`), with resource
/// utilisations `util` (demand / bandwidth, ppm; kept by the caller as
/// loads change, so evaluating a stretch divides nothing), `wait` each
/// resource's queueing wait in ppm of a local access's idle latency
/// (`memory.queueing`, see [`super::queue`]; None: off), and `nested_ppm`
/// extra stall time (nested paging).
// The stretch reads the model's state slices directly (no struct to
// build on the hot path).
#[allow(clippy::too_many_arguments)]
pub fn stretch_ppm(
    mem_ppm: u32,
    access: &[(usize, u32)],
    distance_row: &[u32],
    paths: &[Vec<usize>],
    bus: Option<usize>,
    util: &[u64],
    wait: Option<&[u64]>,
    nested_ppm: u64,
) -> u64 {
    let bus_u = bus.map_or(0, |b| util[b]);
    let mut s: u128 = 0;
    for &(n, share) in access {
        let mut latency = distance_row[n] as u64 * (PPM / 10);
        if let Some(w) = wait {
            // Loaded latency: the wait at the route's bottleneck queue (a
            // closed network's throughput is set by its bottleneck; queues
            // behind it see only what it lets through, so waits are not
            // added: see `super::queue`).
            latency += paths[n]
                .iter()
                .chain(bus.as_ref())
                .map(|&r| w[r])
                .max()
                .unwrap_or(0);
        }
        let worst = paths[n].iter().map(|&r| util[r]).fold(bus_u, u64::max);
        s += share as u128 * latency.max(worst) as u128;
    }
    let s = s / PPM as u128;
    let s = if nested_ppm == 0 {
        s
    } else {
        s * (PPM + nested_ppm) as u128 / PPM as u128
    };
    let m = mem_ppm as u64;
    (PPM - m) + (m as u128 * s / PPM as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two nodes, no links: node n's accesses cross node n only.
    fn plain() -> Vec<Vec<usize>> {
        vec![vec![0], vec![1]]
    }

    /// Utilisation (ppm) of resources with demand `load` (MB/s × ppm)
    /// against `bw` (MB/s), as the model keeps it.
    fn util(load: &[u64], bw: &[u64]) -> Vec<u64> {
        load.iter().zip(bw).map(|(l, b)| l / b).collect()
    }

    fn stretch(mem: u32, access: &[(usize, u32)], row: &[u32], load: &[u64], bw: &[u64]) -> u64 {
        stretch_ppm(mem, access, row, &plain(), None, &util(load, bw), None, 0)
    }

    #[test]
    fn local_uncontended_memory_costs_nothing() {
        let s = stretch(700_000, &[(0, 1_000_000)], &[10, 20], &[0, 0], &[100, 100]);
        assert_eq!(s, PPM);
    }

    #[test]
    fn fully_remote_memory_bound_phase_slows_by_the_distance_ratio() {
        let s = stretch(
            1_000_000,
            &[(1, 1_000_000)],
            &[10, 21],
            &[0, 0],
            &[100, 100],
        );
        assert_eq!(s, 2_100_000);
        // Half memory-bound: half the phase stretched.
        let s = stretch(500_000, &[(1, 1_000_000)], &[10, 21], &[0, 0], &[100, 100]);
        assert_eq!(s, 500_000 + 1_050_000);
    }

    #[test]
    fn an_overloaded_node_slows_its_accesses_by_its_load() {
        // Node 0 asked for 3× its bandwidth: local accesses take 3×.
        let s = stretch(
            1_000_000,
            &[(0, 1_000_000)],
            &[10, 20],
            &[300 * PPM, 0],
            &[100, 100],
        );
        assert_eq!(s, 3 * PPM);
        // Remote accesses to it: the larger of 2 (latency) and 3 (load).
        let s = stretch(
            1_000_000,
            &[(0, 1_000_000)],
            &[20, 10],
            &[300 * PPM, 0],
            &[100, 100],
        );
        assert_eq!(s, 3 * PPM);
    }

    #[test]
    fn an_overloaded_link_on_the_route_limits_remote_accesses() {
        // Resources: nodes 0, 1, link 0->1 (2). Node 0 at half its
        // bandwidth, the link asked for 2.5× its: remote accesses take 2.5×.
        let paths = vec![vec![0, 2], vec![1]];
        let load = [50 * PPM, 0, 250 * PPM];
        let bw = [100, 100, 100];
        let s = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[11, 10],
            &paths,
            None,
            &util(&load, &bw),
            None,
            0,
        );
        assert_eq!(s, 2_500_000);
        // Half the accesses local (node 1): 0.5 × 1 + 0.5 × 2.5.
        let s = stretch_ppm(
            1_000_000,
            &[(0, 500_000), (1, 500_000)],
            &[11, 10],
            &paths,
            None,
            &util(&load, &bw),
            None,
            0,
        );
        assert_eq!(s, 1_750_000);
    }

    #[test]
    fn a_bus_limits_every_access_of_its_socket() {
        let load = [0, 0, 160 * PPM];
        let s = stretch_ppm(
            500_000,
            &[(0, 1_000_000)],
            &[10, 20],
            &plain(),
            Some(2),
            &util(&load, &[100, 100, 100]),
            None,
            0,
        );
        assert_eq!(s, 500_000 + 800_000);
    }

    #[test]
    fn nested_paging_adds_its_share_of_the_memory_stalls() {
        // Local, uncontended, m = 0.6, h = 25 %: 0.4 + 0.6 × 1.25.
        let s = stretch_ppm(
            600_000,
            &[(0, 1_000_000)],
            &[10, 20],
            &plain(),
            None,
            &[0, 0],
            None,
            250_000,
        );
        assert_eq!(s, 1_150_000);
    }

    #[test]
    fn the_bottleneck_wait_adds_to_the_latency_of_its_route() {
        // Node 0 remote (distance 15) behind link 2; waits 0.1 L at node 0
        // and 0.2 L on the link: 1.5 + 0.2, above the utilisations (0.9).
        let paths = vec![vec![0, 2], vec![1]];
        let util = [900_000, 0, 900_000];
        let wait = [100_000, 0, 200_000];
        let s = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[15, 10],
            &paths,
            None,
            &util,
            Some(&wait),
            0,
        );
        assert_eq!(s, 1_700_000);
        // No wait anywhere: exactly the model without queueing.
        let none = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[15, 10],
            &paths,
            None,
            &util,
            None,
            0,
        );
        let zero = stretch_ppm(
            1_000_000,
            &[(0, 1_000_000)],
            &[15, 10],
            &paths,
            None,
            &util,
            Some(&[0, 0, 0]),
            0,
        );
        assert_eq!((none, zero), (1_500_000, 1_500_000));
    }
}
