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
    /// What one of its cores streams alone (MB/s); 0: its fair share of
    /// `bandwidth_mb_s` (the model before per-core figures existed).
    pub core_mb_s: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub node_of_core: Vec<usize>,
    pub nodes: Vec<Node>,
    /// `distance[from][to]`.
    pub distance: Vec<Vec<u32>>,
    /// Interconnect links (node a, node b, MB/s per direction); empty: none
    /// modelled (remote traffic is limited by the nodes only).
    pub links: Vec<(usize, usize, u64)>,
    pub socket_of_core: Vec<usize>,
    /// Per-socket front-side bus bandwidth (MB/s; 0: none).
    pub bus_mb_s: u64,
    /// Hardware-assisted paging (NPT / EPT).
    pub hap: bool,
    /// Idle latency of a local memory access (ns; 0: unknown, no
    /// queueing modelled).
    pub latency_ns: u64,
}

/// A node not reachable from node 0 over `edges`, if any.
pub fn unreachable_node(n: usize, edges: &[(usize, usize)]) -> Option<usize> {
    let mut seen = vec![false; n];
    let mut stack = vec![0];
    seen[0] = true;
    while let Some(x) = stack.pop() {
        for &(a, b) in edges {
            for (p, q) in [(a, b), (b, a)] {
                if p == x && !seen[q] {
                    seen[q] = true;
                    stack.push(q);
                }
            }
        }
    }
    seen.iter().position(|&s| !s)
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
                    core_mb_s: given.map_or(0, |g| g.core_mb_s),
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
        let per_socket = host.cores / host.sockets.max(1);
        Topology {
            node_of_core,
            nodes,
            distance,
            links: host
                .links
                .iter()
                .map(|l| (l.nodes[0], l.nodes[1], l.bandwidth_mb_s))
                .collect(),
            socket_of_core: (0..host.cores).map(|c| c / per_socket.max(1)).collect(),
            bus_mb_s: host.bus_mb_s,
            hap: host.hap.unwrap_or(false),
            latency_ns: host.latency_ns,
        }
    }

    /// The directed links (index `2k` is link `k` from its first node to its
    /// second, `2k + 1` back) that data crosses from node `from` to node
    /// `to`: a shortest route by hops; among equal ones, the one through
    /// lower-numbered nodes (a breadth-first search visiting neighbours in
    /// order). Opteron and Nehalem systems route each node pair over one
    /// fixed path set by firmware; which of two equal ones is an assumption.
    /// Empty without links, or from a node to itself.
    pub fn route(&self, from: usize, to: usize) -> Vec<usize> {
        if from == to || self.links.is_empty() {
            return Vec::new();
        }
        let n = self.nodes.len();
        let mut prev: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut seen = vec![false; n];
        let mut queue = std::collections::VecDeque::from([from]);
        seen[from] = true;
        while let Some(x) = queue.pop_front() {
            let mut next: Vec<(usize, usize)> = Vec::new();
            for (k, &(a, b, _)) in self.links.iter().enumerate() {
                if a == x {
                    next.push((b, 2 * k));
                } else if b == x {
                    next.push((a, 2 * k + 1));
                }
            }
            next.sort_unstable();
            for (y, dl) in next {
                if !seen[y] {
                    seen[y] = true;
                    prev[y] = Some((x, dl));
                    queue.push_back(y);
                }
            }
        }
        let mut path = Vec::new();
        let mut at = to;
        while let Some((p, dl)) = prev[at] {
            path.push(dl);
            at = p;
        }
        path.reverse();
        path
    }

    /// Nodes by distance from `from` (then by number): where memory spills.
    pub fn nearest(&self, from: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&n| (self.distance[from][n], n));
        order
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    fn topo(preset: &str) -> super::Topology {
        let text = format!(
            "[host]\npreset = \"{preset}\"\n[[domains]]\nname = \"d\"\nnative = true\n[[jobs]]\n\
             name = \"j\"\nworkload = \"npb.omp.ep\"\nranks = [\"d\"]\nparams = {{ class = \"S\" }}\n"
        );
        super::Topology::of(&Scenario::from_toml(&text, "t").unwrap().host)
    }

    #[test]
    fn opteron_routes_follow_the_square_through_the_lower_node() {
        let t = topo("opteron-numa-4x4");
        // Links: 0 = 0-1, 1 = 0-2, 2 = 1-3, 3 = 2-3; direction 2k forward.
        assert_eq!(t.route(0, 1), vec![0]);
        assert_eq!(t.route(1, 0), vec![1]);
        assert_eq!(t.route(0, 3), vec![0, 4]); // 0 -> 1 -> 3
        assert_eq!(t.route(3, 0), vec![5, 1]); // 3 -> 1 -> 0
        assert_eq!(t.route(2, 1), vec![3, 0]); // 2 -> 0 -> 1
        assert!(t.route(2, 2).is_empty());
        assert!(t.hap);
        assert_eq!(t.socket_of_core[5], 1);
    }

    #[test]
    fn the_uma_xeon_has_buses_and_no_hap() {
        let t = topo("xeon-uma-4x4");
        assert!(t.links.is_empty() && !t.hap);
        assert_eq!(t.bus_mb_s, 8533);
        assert_eq!(t.socket_of_core, (0..16).map(|c| c / 4).collect::<Vec<_>>());
    }
}
