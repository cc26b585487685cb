//! The host's NUMA topology, resolved from a validated scenario's `[host]`:
//! which node each core belongs to, each node's memory and bandwidth, and
//! the distances between nodes (ACPI SLIT style: 10 = local; the memory
//! model reads `d / 10` as the latency of an access from a core to a node
//! relative to a local one).

use crate::scenario::Host;

pub mod presets;

/// Memory of a node when neither a preset nor `[[host.nodes]]` says (MiB):
/// a round assumption.
pub const DEFAULT_NODE_MEM_MIB: u64 = 16 * 1024;
/// Bandwidth of a node when neither a preset nor `[[host.nodes]]` says
/// (MB/s): a round assumption (two channels of DDR2-667 give 10667).
pub const DEFAULT_NODE_BANDWIDTH_MB_S: u64 = 10_000;
/// Distance between two different nodes when `host.distance` is absent
/// (the ACPI SLIT default for "remote").
pub const DEFAULT_REMOTE_DISTANCE: u32 = 20;
pub const LOCAL_DISTANCE: u32 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub cores: Vec<usize>,
    pub mem_mib: u64,
    pub bandwidth_mb_s: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub node_of_core: Vec<usize>,
    pub nodes: Vec<Node>,
    /// `distance[from][to]`.
    pub distance: Vec<Vec<u32>>,
}

/// The cores of node `i` of `n` when its list is not given: a contiguous,
/// even split (cores are numbered socket by socket, as Linux and Xen do).
pub fn default_cores(cores: usize, n: usize, i: usize) -> Vec<usize> {
    let per = cores / n;
    (i * per..(i + 1) * per).collect()
}

impl Topology {
    /// The topology of a validated host.
    pub fn of(host: &Host) -> Topology {
        let n = host.numa_nodes.max(1);
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                let given = host.nodes.get(i);
                let cores = match given {
                    Some(g) if !g.cores.is_empty() => g.cores.clone(),
                    _ => default_cores(host.cores, n, i),
                };
                let or = |v: u64, d: u64| if v == 0 { d } else { v };
                Node {
                    cores,
                    mem_mib: or(given.map_or(0, |g| g.mem_mib), DEFAULT_NODE_MEM_MIB),
                    bandwidth_mb_s: or(
                        given.map_or(0, |g| g.bandwidth_mb_s),
                        DEFAULT_NODE_BANDWIDTH_MB_S,
                    ),
                }
            })
            .collect();
        let mut node_of_core = vec![0; host.cores];
        for (i, node) in nodes.iter().enumerate() {
            for &c in &node.cores {
                node_of_core[c] = i;
            }
        }
        let distance = if host.distance.is_empty() {
            (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| {
                            if i == j {
                                LOCAL_DISTANCE
                            } else {
                                DEFAULT_REMOTE_DISTANCE
                            }
                        })
                        .collect()
                })
                .collect()
        } else {
            host.distance.clone()
        };
        Topology {
            node_of_core,
            nodes,
            distance,
        }
    }

    /// Nodes by distance from `from` (then by number): where memory spills.
    pub fn nearest(&self, from: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&n| (self.distance[from][n], n));
        order
    }
}
