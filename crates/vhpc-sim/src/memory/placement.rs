//! Where each tracked rank's memory accesses go, decided once at build.
//!
//! Host memory is handed out by [`Nodes::alloc`]: from a preferred node,
//! spilling to the nearest nodes (by distance, then number) when it is full.
//!
//! * `preallocate` (Xen-like, Xen 4.0 without vNUMA): at launch, domain by
//!   domain, the whole guest memory is taken from the node of the CPU that
//!   builds the domain: Xen's heap allocator, asked for no particular node,
//!   starts at the node of the CPU it runs on, which is dom0's (its first
//!   vCPU's home core; node 0 without a dom0). A guest that fits in a node
//!   is all on that node, whatever cores its vCPUs run on. An oblivious
//!   guest then hands its ranks pages from anywhere in its memory: a rank's
//!   accesses spread like the guest's memory. With `vnuma`, each virtual
//!   node's share of the memory (by vCPUs) is placed on the host node of
//!   its vCPUs, and the NUMA-aware guest gives a rank pages of its vCPU's
//!   node.
//! * `first_touch` (KVM-like): a page gets its host node at the host page
//!   fault, the node of the core the faulting vCPU runs on at that moment:
//!   placed here on its home core's node (where the engine starts the vCPU,
//!   round robin over its affinity), then moved by the model, when the rank
//!   first streams, to the node of the core it runs on then (an unpinned
//!   vCPU the host scheduler moved; node capacity is not re-checked for
//!   that move). In a cold
//!   guest every page a rank touches is new to the host: all local. In a
//!   `warm` guest only `host_fault_share_ppm` of it is; the rest reuses
//!   guest pages an earlier application (one rank per vCPU, as this one)
//!   left behind, which an oblivious guest hands out with no regard to
//!   nodes: they are spread over the nodes of the domain's vCPUs. A vNUMA
//!   guest reuses pages of its own node: local either way.
//! * A native domain is Linux on the host: local first-touch allocation.
//! * OpenMP-style threads (`omp`) access their own part, placed as above by
//!   the thread that touches it first (itself, or the master with
//!   `init = "master"`), and `shared_ppm` of their accesses go to the whole
//!   job's data.

use crate::host::Topology;
use crate::scenario::Scenario;
use crate::workload;

use super::{domain_footprints_kib, guest_kib, Placed, Placement, PPM};

/// A rank of a job, where the engine put it.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    pub job: usize,
    pub rank: u32,
    pub domain: usize,
    /// Home core of its vCPU.
    pub home_core: usize,
}

/// Free memory per node (KiB), and allocation with spilling.
#[derive(Debug)]
pub struct Nodes<'a> {
    topo: &'a Topology,
    free: Vec<u64>,
}

impl<'a> Nodes<'a> {
    pub fn new(topo: &'a Topology) -> Self {
        Nodes {
            topo,
            free: topo.nodes.iter().map(|n| n.mem_mib * 1024).collect(),
        }
    }

    /// `kib` from `node`, then the nearest nodes with room; what no node
    /// holds stays on `node` (the checks keep the total within the host).
    pub fn alloc(&mut self, node: usize, kib: u64) -> Vec<(usize, u64)> {
        let mut left = kib;
        let mut got = Vec::new();
        for n in self.topo.nearest(node) {
            if left == 0 {
                break;
            }
            let take = left.min(self.free[n]);
            if take > 0 {
                self.free[n] -= take;
                got.push((n, take));
                left -= take;
            }
        }
        if left > 0 {
            got.push((node, left));
        }
        got
    }
}

/// Weights per node → shares in ppm summing to exactly [`PPM`] (the
/// rounding remainder goes to the largest share; ties to the lower node).
pub fn shares(weights: &[(usize, u64)], nodes: usize) -> Vec<(usize, u32)> {
    let mut per = vec![0u128; nodes];
    for &(n, w) in weights {
        per[n] += w as u128;
    }
    let total: u128 = per.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    let mut out: Vec<(usize, u32)> = per
        .iter()
        .enumerate()
        .filter(|(_, &w)| w > 0)
        .map(|(n, &w)| (n, (w * PPM as u128 / total) as u32))
        .collect();
    let sum: u64 = out.iter().map(|&(_, s)| s as u64).sum();
    let big = (0..out.len())
        .max_by_key(|&i| (out[i].1, std::cmp::Reverse(out[i].0)))
        .expect("non-empty");
    out[big].1 += (PPM - sum) as u32;
    out
}

/// What placement decides for every site (None: not tracked), in `sites`
/// order: access shares, the pages its own host faults place (moved at run
/// time if its vCPU runs elsewhere by then), whether it is in a VM.
pub fn place(sc: &Scenario, topo: &Topology, sites: &[Site]) -> Vec<Option<Placed>> {
    let mem = sc.memory.clone().unwrap_or_default();
    let placement = Placement::from_name(&mem.placement).expect("validated placement");
    let fresh_ppm = mem.host_fault_share_ppm as u64;
    let n = topo.nodes.len();
    let node = |core: usize| topo.node_of_core[core];
    let mut nodes = Nodes::new(topo);
    let profiles: Vec<_> = sc
        .jobs
        .iter()
        .map(|j| workload::memory_profile(&j.workload, &j.params, j.ranks.len() as u32))
        .collect();
    // Nodes of each domain's vCPU homes, weighted by vCPUs.
    let mut homes: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sc.domains.len()];
    {
        let mut first = 0usize;
        for (d, dom) in sc.domains.iter().enumerate() {
            for i in 0..dom.vcpus {
                let v = first + i;
                let mut aff: Vec<usize> = match dom.pin.len() {
                    0 => (0..sc.host.cores).collect(),
                    1 => dom.pin[0].clone(),
                    _ => dom.pin[i].clone(),
                };
                aff.sort_unstable();
                aff.dedup();
                homes[d].push((node(aff[v % aff.len()]), 1));
            }
            first += dom.vcpus;
        }
    }
    // Preallocation at launch, domain by domain.
    let footprints = domain_footprints_kib(sc);
    let builder = if sc.domains[0].dom0 { homes[0][0].0 } else { 0 };
    let mut guest: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sc.domains.len()];
    let mut vnode: Vec<Vec<Vec<(usize, u64)>>> = vec![Vec::new(); sc.domains.len()];
    if placement == Placement::Preallocate {
        for (d, dom) in sc.domains.iter().enumerate() {
            let kib = guest_kib(dom.mem_mib, footprints[d]);
            if dom.native || kib == 0 {
                continue;
            }
            if dom.vnuma {
                let per = shares(&homes[d], n);
                vnode[d] = vec![Vec::new(); n];
                for (h, s) in per {
                    vnode[d][h] = nodes.alloc(h, kib * s as u64 / PPM);
                }
            } else {
                guest[d] = nodes.alloc(builder, kib);
            }
        }
    }
    // Each site's own data, by the node of whoever touches it first.
    let mut own: Vec<Option<Vec<(usize, u64)>>> = Vec::with_capacity(sites.len());
    // KiB of its own data each site faults in itself on the host, on node
    // `h` of its home core (moved at run time if it runs elsewhere then).
    let mut faulted: Vec<Option<(usize, u64)>> = Vec::with_capacity(sites.len());
    for s in sites {
        let Some(p) = profiles[s.job] else {
            own.push(None);
            faulted.push(None);
            continue;
        };
        let dom = &sc.domains[s.domain];
        let toucher = if p.master_init {
            sites
                .iter()
                .find(|o| o.job == s.job && o.rank == 0)
                .map_or(s.home_core, |o| o.home_core)
        } else {
            s.home_core
        };
        let h = node(toucher);
        let kib = p.footprint_kib.max(1);
        // The part of `got`'s first `k` KiB that landed on `h`.
        let on_h = |got: &[(usize, u64)]| got.first().filter(|g| g.0 == h).map_or(0, |g| g.1);
        let (got, fresh_kib) = if dom.native {
            let got = nodes.alloc(h, kib);
            let f = on_h(&got);
            (got, f)
        } else {
            match (placement, dom.vnuma) {
                (Placement::Preallocate, true) => match vnode[s.domain].get(h) {
                    Some(v) if !v.is_empty() => (v.clone(), 0),
                    _ => (guest[s.domain].clone(), 0),
                },
                (Placement::Preallocate, false) => (guest[s.domain].clone(), 0),
                (Placement::FirstTouch, _) if dom.vnuma || !dom.warm => {
                    let got = nodes.alloc(h, kib);
                    let f = on_h(&got);
                    (got, f)
                }
                (Placement::FirstTouch, _) => {
                    let fresh = kib * fresh_ppm / PPM;
                    let mut got = nodes.alloc(h, fresh);
                    let f = on_h(&got).min(fresh);
                    for (hn, share) in shares(&homes[s.domain], n) {
                        got.extend(nodes.alloc(hn, (kib - fresh) * share as u64 / PPM));
                    }
                    (got, f)
                }
            }
        };
        let total: u64 = got.iter().map(|g| g.1).sum();
        // The master's pages are faulted by the master, not by this thread.
        let mine = !p.master_init || toucher == s.home_core;
        faulted.push((mine && fresh_kib > 0 && total > 0).then(|| (h, fresh_kib * PPM / total)));
        own.push(Some(got));
    }
    // Shares of accesses: own part, plus the shared part for threads.
    let own_shares: Vec<Option<Vec<(usize, u32)>>> = own
        .iter()
        .map(|o| o.as_ref().map(|w| shares(w, n)))
        .collect();
    let mut whole: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sc.jobs.len()];
    for (s, o) in sites.iter().zip(&own_shares) {
        if let Some(o) = o {
            whole[s.job].extend(o.iter().map(|&(n, sh)| (n, sh as u64)));
        }
    }
    sites
        .iter()
        .zip(own_shares)
        .zip(faulted)
        .map(|((s, o), f)| {
            let o = o?;
            let vm = !sc.domains[s.domain].native;
            let sh = profiles[s.job].map_or(0, |p| p.shared_ppm) as u64;
            // Share of all its accesses that go to its own faulted pages.
            let fault = f.map(|(h, own_ppm)| (h, (own_ppm * (PPM - sh) / PPM) as u32));
            if sh == 0 {
                return Some(Placed {
                    access: o,
                    fault,
                    vm,
                });
            }
            let job = shares(&whole[s.job], n);
            let mut w: Vec<(usize, u64)> =
                o.iter().map(|&(n, x)| (n, x as u64 * (PPM - sh))).collect();
            w.extend(job.iter().map(|&(n, x)| (n, x as u64 * sh)));
            Some(Placed {
                access: shares(&w, n),
                fault,
                vm,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_to_one_million() {
        let s = shares(&[(0, 1), (1, 1), (2, 1)], 3);
        assert_eq!(s.iter().map(|&(_, x)| x as u64).sum::<u64>(), PPM);
        assert_eq!(s[0], (0, 333_334));
        assert!(shares(&[], 2).is_empty());
    }
}
