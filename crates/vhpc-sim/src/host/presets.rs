//! Named hosts (`host.preset`): the three machines of study S3 and a generic
//! one. Each fills `cores`, `sockets`, `numa_nodes`, `[[host.nodes]]` and
//! `host.distance`; every figure says where it comes from or that it is an
//! assumption.
//!
//! `distance` is read by the memory model as a latency ratio (ACPI SLIT:
//! 10 = local, 20 = twice as long), so the presets carry measured latency
//! ratios where a publication gives them rather than whatever a BIOS wrote
//! into its SLIT. Bandwidths are the peak of each node's memory channels
//! (channels × transfers/s × 8 bytes); sustained bandwidth is lower on every
//! machine, so contention shows a little late on all of them alike.

/// A named host topology.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    pub cores: usize,
    pub sockets: usize,
    pub numa_nodes: usize,
    /// Memory of each node (MiB).
    pub node_mem_mib: u64,
    /// Peak memory bandwidth of each node (MB/s).
    pub node_bandwidth_mb_s: u64,
    /// What one core streams from memory alone (MB/s; 0: its fair share of
    /// the node's bandwidth). Little's law: a core keeps at most `b` cache
    /// line misses in flight, each taking the idle memory latency `L`, so it
    /// streams at most `b × 64 B / L` (prefetchers that fetch beyond the
    /// L1's miss buffers would add to it: a lower bound).
    pub core_mb_s: u64,
    /// Row-major `numa_nodes × numa_nodes` distances.
    pub distance: &'static [&'static [u32]],
    /// Interconnect links between nodes, and each one's bandwidth per
    /// direction (MB/s): the payload rate, after each cache line's packet
    /// header.
    pub links: &'static [(usize, usize)],
    pub link_mb_s: u64,
    /// Each socket's front-side bus (MB/s; 0: none).
    pub bus_mb_s: u64,
    /// Hardware-assisted paging (AMD NPT / Intel EPT).
    pub hap: bool,
    /// Idle latency of a local memory access (ns; 0: no figure, so no
    /// queueing can be modelled): the `L` of `core_mb_s`.
    pub latency_ns: u64,
}

/// Every preset, by name (`vhpc sim hosts`).
pub const PRESETS: &[Preset] = &[XEON_UMA_4X4, OPTERON_NUMA_4X4, NEHALEM_NUMA_2X4, GENERIC];

pub fn by_name(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// S3's UMA machine: four quad-core Xeon 7300 (Tigerton) on the Intel 7300
/// chipset. Every socket reaches the one memory controller hub through its
/// own front-side bus, so all memory is equally far: one node. Bandwidth:
/// the hub's four FB-DIMM channels of DDR2-667, 4 × 5333 MB/s = 21333 MB/s
/// Each socket reaches the hub over its own front-side bus, 1066 MT/s × 8
/// bytes = 8533 MB/s (Intel 7300 chipset datasheet: four independent FSBs
/// of 1066 MT/s; "Caneland" platform): `bus_mb_s`. No hardware-assisted
/// paging: EPT arrived with Nehalem (2008), so VMs on this Core-2-based
/// Xeon used shadow page tables, whose TLB misses walk one dimension as
/// natively (shadow paging's costs are at page-table updates, not
/// modelled). Memory size: 16 GiB, an assumption (S3 does not say).
pub const XEON_UMA_4X4: Preset = Preset {
    name: "xeon-uma-4x4",
    description: "S3's 4 x 4-core Xeon 7300 (Tigerton), UMA: one memory hub behind four FSBs, \
                  21333 MB/s (4 FB-DIMM DDR2-667 channels), FSB 8533 MB/s per socket, no HAP \
                  (shadow paging), 16 GiB (assumed)",
    cores: 16,
    sockets: 4,
    numa_nodes: 1,
    node_mem_mib: 16 * 1024,
    node_bandwidth_mb_s: 21_333,
    core_mb_s: 0,
    distance: &[&[10]],
    links: &[],
    link_mb_s: 0,
    bus_mb_s: 8_533,
    hap: false,
    latency_ns: 0,
};

/// S3's NUMA Opteron: four quad-core Opteron 8300 (Barcelona), one memory
/// controller and node per socket, sockets joined by HyperTransport in a
/// square (the usual 4P layout: node 0 links to 1 and 2, node 3 is two hops
/// away). Distances: AMD's "Performance Guidelines for AMD Athlon 64 and
/// AMD Opteron ccNUMA Multiprocessor Systems" (pub. 40555 rev. 3.00, 2006,
/// figure 4) measured a thread's read time on an idle 4P system at 100 %
/// local, 108-109 % one hop and 130 % two hops away: 10 / 11 / 13. That was
/// the previous Opteron generation over the same HT square; no comparable
/// figure for the 8300 was found. Bandwidth per node: two channels of
/// DDR2-667, 2 × 5333 = 10667 MB/s. Memory: 4 GiB per node (assumed).
/// Links: the square 0-1, 0-2, 1-3, 2-3 (node 3 reaches node 0 over two
/// hops, through node 1 by the route rule of [`crate::host::Topology::route`]);
/// Socket F 8000-series boards run coherent HyperTransport at 1 GHz, 16
/// bits wide, double data rate: 2 GT/s × 2 bytes = 4000 MB/s per direction
/// (AMD's "8 GB/s per link" counts both directions). Barcelona supports HT
/// 3.0 (up to 2.6 GHz, 10.4 GB/s per direction), but Socket F 4P boards of
/// 2008-2010 kept HT 1 GHz for coherent links: an assumption stated here.
/// Hardware-assisted paging: yes (Barcelona introduced AMD's nested page
/// tables, "RVI", 2007).
///
/// Link payload: a cache line crosses a link as a read response, a 4-byte
/// control packet followed by 64 bytes of data (HyperTransport I/O Link
/// Specification, rev. 3.00, "Response packets" and "Data packets"), so
/// 64 / 68 of the 4000 MB/s carry data: 3764 MB/s. Coherence probes (Barcelona
/// has no probe filter: every miss probes every node) take a further share
/// that grows with all nodes' traffic; not modelled.
///
/// One core: 8 outstanding L1 data-cache misses (the K8/Family 10h core's
/// eight miss address buffers; AMD "Software Optimization Guide for AMD
/// Family 10h Processors", pub. 40546: an assumption where the count is
/// not restated) at 113 ns idle latency (AnandTech, "AMD's 12-core Magny-
/// Cours Opteron 6174 vs. Intel's 6-core Xeon", 2010, page 5: the Family
/// 10h Opteron 2435 measured with SiSoft Sandra; same core and controller
/// design as the 8300): 8 × 64 B / 113 ns = 4531 MB/s, 42 % of the node.
pub const OPTERON_NUMA_4X4: Preset = Preset {
    name: "opteron-numa-4x4",
    description: "S3's 4 x 4-core Opteron 8300 (Barcelona), 4 NUMA nodes on a HyperTransport \
                  square (HT 1 GHz: 3764 MB/s payload per link and direction), distances \
                  10/11/13 (AMD 40555), 10667 MB/s, 4531 MB/s per core and 4 GiB (assumed) \
                  per node, NPT",
    cores: 16,
    sockets: 4,
    numa_nodes: 4,
    node_mem_mib: 4 * 1024,
    node_bandwidth_mb_s: 10_667,
    core_mb_s: 4_531,
    distance: &[
        &[10, 11, 11, 13],
        &[11, 10, 13, 11],
        &[11, 13, 10, 11],
        &[13, 11, 11, 10],
    ],
    links: &[(0, 1), (0, 2), (1, 3), (2, 3)],
    link_mb_s: 3_764,
    bus_mb_s: 0,
    hap: true,
    latency_ns: 113,
};

/// S3's NUMA Nehalem: two quad-core Xeon 5500 (Nehalem-EP) joined by QPI.
/// Firmware of these machines reports a SLIT of 10/21, but the model reads
/// distance as a latency ratio, so the preset uses the measured one: Molka
/// et al., "Memory Performance and Cache Coherency Effects on an Intel
/// Nehalem Multiprocessor System" (PACT 2009), local memory 65 ns, remote
/// 106 ns: 10 / 16. Bandwidth per node: three channels of DDR3-1066 (the
/// E55xx parts; X55xx take DDR3-1333), 3 × 8533 = 25600 MB/s. Memory: 6 GiB
/// per node (three 2 GiB DIMMs; assumed). Link: one QPI link at 6.4 GT/s,
/// 2 bytes per transfer each way: 12800 MB/s per direction (Intel Xeon 5500
/// datasheet; 5.86 GT/s on the E5520/E5530 would give 11720). A cache line
/// crosses QPI as one header flit and eight data flits (Intel, "An
/// Introduction to the Intel QuickPath Interconnect", 2009: a flit carries
/// 64 bits of payload), so 8 / 9 of it is data: 11377 MB/s. Hardware-
/// assisted paging: yes (EPT, first in Nehalem).
///
/// One core: 10 L1 data-cache fill buffers (Intel 64 and IA-32
/// Architectures Optimization Reference Manual, Nehalem section: "ten fill
/// buffers") at 81 ns idle latency, measured by the same tool and article
/// as the Opteron's (AnandTech 2010, Xeon X5570; Molka's 65 ns would give
/// 9846): 10 × 64 B / 81 ns = 7901 MB/s, 31 % of the node.
pub const NEHALEM_NUMA_2X4: Preset = Preset {
    name: "nehalem-numa-2x4",
    description: "S3's 2 x 4-core Xeon 5500 (Nehalem-EP), 2 NUMA nodes over QPI, distance 10/16 \
                  (65 vs 106 ns, Molka et al. 2009), QPI 6.4 GT/s (11377 MB/s payload per \
                  direction), 25600 MB/s, 7901 MB/s per core and 6 GiB (assumed) per node, \
                  EPT",
    cores: 8,
    sockets: 2,
    numa_nodes: 2,
    node_mem_mib: 6 * 1024,
    node_bandwidth_mb_s: 25_600,
    core_mb_s: 7_901,
    distance: &[&[10, 16], &[16, 10]],
    links: &[(0, 1)],
    link_mb_s: 11_377,
    bus_mb_s: 0,
    hap: true,
    latency_ns: 81,
};

/// A round-number two-socket host for scenarios about no machine in
/// particular: 2 × 8 cores, one node per socket, SLIT-style 10/20, 16 GiB
/// and 20000 MB/s per node, one link of 20000 MB/s each way, hardware-
/// assisted paging (as every x86 server since 2008). All of it is assumption.
pub const GENERIC: Preset = Preset {
    name: "generic",
    description: "a round-number 2 x 8-core host, 2 NUMA nodes, distance 10/20, 20000 MB/s and \
                  16 GiB per node, a 20000 MB/s link, HAP (all assumed)",
    cores: 16,
    sockets: 2,
    numa_nodes: 2,
    node_mem_mib: 16 * 1024,
    node_bandwidth_mb_s: 20_000,
    core_mb_s: 0,
    distance: &[&[10, 20], &[20, 10]],
    links: &[(0, 1)],
    link_mb_s: 20_000,
    bus_mb_s: 0,
    hap: true,
    latency_ns: 0,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_consistent() {
        for p in PRESETS {
            assert_eq!(p.cores % p.sockets, 0, "{}", p.name);
            assert_eq!(p.cores % p.numa_nodes, 0, "{}", p.name);
            assert_eq!(p.distance.len(), p.numa_nodes, "{}", p.name);
            assert!(p.core_mb_s <= p.node_bandwidth_mb_s, "{}", p.name);
            for (i, row) in p.distance.iter().enumerate() {
                assert_eq!(row.len(), p.numa_nodes, "{}", p.name);
                assert_eq!(row[i], 10, "{}", p.name);
                for (j, &d) in row.iter().enumerate() {
                    assert_eq!(d, p.distance[j][i], "{} symmetric", p.name);
                    assert!(d >= 10);
                }
            }
        }
    }
}
