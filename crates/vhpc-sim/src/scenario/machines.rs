//! Several physical machines in one scenario (`host.machines`, `[host.nic]`):
//! the host's cores split contiguously and evenly into machines joined by a
//! physical network. Every machine has its own sockets and NUMA nodes (a
//! preset describes one machine and is repeated); no socket, node, NUMA link,
//! VM, native OS or ivshmem device spans two machines. See docs/sim.md,
//! "Machines and the wire".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Host, Scenario, ScenarioError};

/// Most machines a scenario may have.
pub const MAX_MACHINES: usize = 256;

/// SLIT distance between nodes of different machines in a repeated preset:
/// the largest valid value. Never read: no memory access crosses machines
/// (every VM and native OS is pinned inside one).
const CROSS_MACHINE_DISTANCE: u32 = 254;

/// Each machine's physical NIC and the wire between machines (`[host.nic]`).
/// The defaults are gigabit Ethernet, an assumption for S3's 2010-era
/// cluster (the brief names no network): 1 Gb/s line rate = 125 MB/s each
/// way (full duplex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineNic {
    /// Line rate per direction, MB/s (10^6 bytes/s): each NIC sends one
    /// frame at a time at this rate, and receives one at a time.
    #[serde(default = "default_bandwidth_mb_s")]
    pub bandwidth_mb_s: u64,
    /// From the end of the sender NIC's serialisation to the start of the
    /// receiver NIC's, beyond the host stacks' own latency: NIC DMA,
    /// interrupt moderation, the switch. Assumption: 20 µs (gigabit NICs'
    /// default interrupt throttling alone waits up to ~125 µs; tuned
    /// clusters run a few tens of µs).
    #[serde(default = "default_latency_ns")]
    pub latency_ns: u64,
    /// Payload bytes per frame: TCP's MSS on a 1500-byte MTU with
    /// timestamps (1500 − 20 IP − 20 TCP − 12 options).
    #[serde(default = "default_frame_bytes")]
    pub frame_bytes: u64,
    /// Bytes each frame adds on the wire: Ethernet preamble 8, header 14,
    /// FCS 4 and inter-frame gap 12, plus the IP and TCP headers with
    /// timestamps, 52: 90 (so TCP's goodput is 1448 / 1538 of the line
    /// rate, 94 %, as measured on gigabit links). 0: payload only.
    #[serde(default = "default_frame_overhead_bytes")]
    pub frame_overhead_bytes: u64,
}

impl Default for MachineNic {
    fn default() -> Self {
        toml::from_str("").expect("all nic fields have defaults")
    }
}

fn default_bandwidth_mb_s() -> u64 {
    125
}
fn default_latency_ns() -> u64 {
    20_000
}
fn default_frame_bytes() -> u64 {
    1448
}
fn default_frame_overhead_bytes() -> u64 {
    90
}

impl Host {
    /// Machines (at least 1).
    pub fn machine_count(&self) -> usize {
        self.machines.max(1)
    }

    /// The machine core `c` belongs to.
    pub fn machine_of_core(&self, c: usize) -> usize {
        c / (self.cores / self.machine_count()).max(1)
    }
}

/// `host.machines` divides the cores (checked before sockets and nodes,
/// whose defaults follow it).
pub(super) fn check_count(h: &Host) -> Result<(), (String, String)> {
    let m = h.machine_count();
    if m > MAX_MACHINES || h.cores % m != 0 {
        return Err((
            "host.machines".into(),
            format!(
                "must be between 1 and {MAX_MACHINES} and divide host.cores ({}), got {m}",
                h.cores
            ),
        ));
    }
    Ok(())
}

/// A preset's distance matrix repeated on the diagonal for `m` machines.
pub(super) fn repeat_distance(d: &[&[u32]], m: usize) -> Vec<Vec<u32>> {
    let n = d.len();
    (0..m * n)
        .map(|i| {
            (0..m * n)
                .map(|j| {
                    if i / n == j / n {
                        d[i % n][j % n]
                    } else {
                        CROSS_MACHINE_DISTANCE
                    }
                })
                .collect()
        })
        .collect()
}

impl Scenario {
    /// `host.machines` and `host.nic`, and what must stay inside one machine.
    /// Runs after the domains and jobs are checked (pins name real cores).
    pub(super) fn validate_machines(&self, origin: &str) -> Result<(), ScenarioError> {
        let err = |field: String, message: String| ScenarioError {
            origin: origin.into(),
            field,
            message,
        };
        let h = &self.host;
        let m = h.machine_count();
        if m == 1 {
            if h.nic.is_some() {
                return Err(err(
                    "host.nic".into(),
                    "is the network between machines: it means something only with \
                     host.machines > 1"
                        .into(),
                ));
            }
            return Ok(());
        }
        self.check_machine_topology(m)
            .map_err(|(f, msg)| err(f, msg))?;
        if let Some(nic) = &h.nic {
            for (field, value, lo, hi) in [
                ("bandwidth_mb_s", nic.bandwidth_mb_s, 1, 10_000_000),
                ("latency_ns", nic.latency_ns, 0, 1_000_000_000),
                ("frame_bytes", nic.frame_bytes, 1, 1 << 20),
                ("frame_overhead_bytes", nic.frame_overhead_bytes, 0, 65_535),
            ] {
                if value < lo || value > hi {
                    return Err(err(
                        format!("host.nic.{field}"),
                        format!("must be between {lo} and {hi}, got {value}"),
                    ));
                }
            }
        }
        self.check_machine_domains(m)
            .map_err(|(f, msg)| err(f, msg))
    }

    /// Sockets, NUMA nodes and links each inside one machine; each
    /// machine's nodes reachable over its own links.
    fn check_machine_topology(&self, m: usize) -> Result<(), (String, String)> {
        let h = &self.host;
        if h.sockets % m != 0 {
            return Err((
                "host.sockets".into(),
                format!(
                    "must be a multiple of host.machines ({m}): a socket belongs to one \
                     machine; got {}",
                    h.sockets
                ),
            ));
        }
        let topo = crate::host::Topology::of(h);
        let mut machine_of_node = Vec::with_capacity(topo.nodes.len());
        for (i, node) in topo.nodes.iter().enumerate() {
            let mut machines = node.cores.iter().map(|&c| h.machine_of_core(c));
            let first = machines.next().unwrap_or(0);
            if machines.any(|k| k != first) {
                return Err(if h.nodes.is_empty() {
                    (
                        "host.numa_nodes".into(),
                        format!(
                            "must be a multiple of host.machines ({m}): node {i}'s cores \
                             would span two machines"
                        ),
                    )
                } else {
                    (
                        format!("host.nodes[{i}].cores"),
                        "are on two machines: a NUMA node belongs to one".into(),
                    )
                });
            }
            machine_of_node.push(first);
        }
        for (i, l) in h.links.iter().enumerate() {
            let [a, b] = l.nodes;
            if machine_of_node[a] != machine_of_node[b] {
                return Err((
                    format!("host.links[{i}].nodes"),
                    format!(
                        "joins nodes {a} and {b} of machines {} and {}: machines are joined \
                         by the network (host.nic), not by NUMA links",
                        machine_of_node[a], machine_of_node[b]
                    ),
                ));
            }
        }
        if h.links.is_empty() {
            return Ok(());
        }
        for k in 0..m {
            let nodes: Vec<usize> = (0..topo.nodes.len())
                .filter(|&n| machine_of_node[n] == k)
                .collect();
            let index: BTreeMap<usize, usize> =
                nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
            let edges: Vec<(usize, usize)> = h
                .links
                .iter()
                .filter(|l| index.contains_key(&l.nodes[0]))
                .map(|l| (index[&l.nodes[0]], index[&l.nodes[1]]))
                .collect();
            if let Some(lost) = crate::host::unreachable_node(nodes.len(), &edges) {
                return Err((
                    "host.links".into(),
                    format!(
                        "leave node {} unreachable from node {} of its machine ({k}): remote \
                         traffic needs a route",
                        nodes[lost], nodes[0]
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Every vCPU pinned inside one machine, every domain that runs ranks on
    /// one machine, no shared memory between machines.
    fn check_machine_domains(&self, m: usize) -> Result<(), (String, String)> {
        let h = &self.host;
        let per = h.cores / m;
        let mut group_machine: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for (i, d) in self.domains.iter().enumerate() {
            if d.pin.is_empty() {
                return Err((
                    format!("domains[{i}].pin"),
                    format!(
                        "with host.machines = {m} every vCPU must be pinned inside one machine \
                         ({per} cores each: 0..{}, {per}..{}, ...)",
                        per - 1,
                        2 * per - 1
                    ),
                ));
            }
            let mut machines = Vec::with_capacity(d.pin.len());
            for (j, cores) in d.pin.iter().enumerate() {
                let k = h.machine_of_core(cores[0]);
                if cores.iter().any(|&c| h.machine_of_core(c) != k) {
                    return Err((
                        format!("domains[{i}].pin[{j}]"),
                        format!(
                            "names cores of two machines ({per} cores each): a vCPU runs on \
                             one machine"
                        ),
                    ));
                }
                machines.push(k);
            }
            let k = machines[0];
            if !d.dom0 && machines.iter().any(|&x| x != k) {
                return Err((
                    format!("domains[{i}].pin"),
                    "puts the domain's vCPUs on two machines: a VM or native OS runs on one \
                     (only dom0, standing for every machine's host threads, may span them)"
                        .into(),
                ));
            }
            if let Some(g) = d.ivshmem.as_deref() {
                let (first, km) = *group_machine.entry(g).or_insert((i, k));
                if km != k {
                    return Err((
                        format!("domains[{i}].ivshmem"),
                        format!(
                            "group {g:?} is shared memory of machine {km} (domains[{first}]); \
                             this domain is on machine {k}"
                        ),
                    ));
                }
            }
        }
        if self.mpi.between_domains == "shm" {
            return Err((
                "mpi.between_domains".into(),
                "\"shm\" shares memory between all domains, which machines cannot: with \
                 host.machines > 1 use mpi.transports"
                    .into(),
            ));
        }
        if let Some(mem) = &self.memory {
            if mem.placement == "preallocate" {
                return Err((
                    "memory.placement".into(),
                    "\"preallocate\" places guest memory from dom0's node; with several \
                     machines that placement is not modelled (use \"first_touch\")"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}
