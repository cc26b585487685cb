//! The NUMA memory model (`[memory]`): where each rank's memory lives and
//! what that costs its memory-aware compute phases.
//!
//! Placement ([`placement`]) decides once, when the engine is built, the
//! share of each rank's memory accesses that go to each host node: guest
//! pages have a guest placement (a vNUMA guest allocates on the node of the
//! vCPU that touches them; an oblivious guest anywhere in its memory) and a
//! host placement (`preallocate`, Xen-like, at launch; `first_touch`,
//! KVM-like, at the host page fault, persisting in a warm guest).
//!
//! Cost ([`rate`]): a memory-aware phase of native duration `T` whose
//! `m` parts are memory stalls runs for `T × ((1 − m) + m × S)`, where `S`
//! averages, over the nodes its accesses go to, the larger of the latency
//! ratio (distance / 10 from the node of the core it runs on) and the
//! utilisation, by the ranks streaming at that moment, of every resource
//! the access crosses (the node's memory, the interconnect links on its
//! route, the socket's front-side bus; with `memory.queueing`, the latency
//! ratio plus the wait at the route's busiest queue, [`queue`]), times
//! `1 + h` for a VM's rank on a
//! host with hardware-assisted paging (nested page walks). `S`
//! is re-evaluated whenever a rank starts or stops streaming, and the
//! remaining work of every streaming rank is rescaled: time slices stay
//! discrete (a rank holds its core as before), only the speed of its
//! memory stalls follows the others.
//!
//! Everything is integer: shares and ratios in parts per million.

use crate::host::Topology;
use crate::scenario::Scenario;
use crate::workload;

pub mod placement;
pub mod queue;
pub mod rate;

/// Memory a guest's OS takes beside its ranks' footprint when the domain's
/// `mem_mib` is not given (an assumption: a small 2010 Linux guest).
pub const GUEST_OS_MIB: u64 = 512;
pub const PPM: u64 = 1_000_000;

/// Default `memory.nested_paging_ppm`: extra memory-stall time of a VM's
/// phase under hardware-assisted paging. From stated facts, not fitted:
/// natively, address translation takes 5-14 % of run time for ordinary
/// applications (Barr, Cox, Rixner, "Translation caching: skip, don't
/// walk", ISCA 2010); the low end is taken as page walks' share of a
/// memory-intensive phase's stall time (NPB touches each 4 KiB page many
/// times). A two-dimensional walk makes up to 24 memory references against
/// a native walk's 4 (Bhargava et al., "Accelerating two-dimensional page
/// walks for virtualized systems", ASPLOS 2008): ×6, so walks add 5 % × (6
/// − 1) = 25 % to the stalls. Page-walk caches shorten both walks, so the
/// full ratio makes this an upper estimate; huge pages (not used by S3's
/// KVM 0.13 guests by default) would remove most of it.
pub const DEFAULT_NESTED_PAGING_PPM: u32 = 250_000;

/// Placement policies (`memory.placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Preallocate,
    FirstTouch,
}

impl Placement {
    pub const NAMES: &'static [&'static str] = &["preallocate", "first_touch"];

    pub fn from_name(name: &str) -> Option<Placement> {
        match name {
            "preallocate" => Some(Placement::Preallocate),
            "first_touch" => Some(Placement::FirstTouch),
            _ => None,
        }
    }
}

/// KiB of memory-model footprint of each domain's ranks.
pub fn domain_footprints_kib(sc: &Scenario) -> Vec<u64> {
    let mut kib = vec![0u64; sc.domains.len()];
    for job in &sc.jobs {
        let Some(profile) =
            workload::memory_profile(&job.workload, &job.params, job.ranks.len() as u32)
        else {
            continue;
        };
        for name in &job.ranks {
            if let Some(d) = sc.domains.iter().position(|d| &d.name == name) {
                kib[d] = kib[d].saturating_add(profile.footprint_kib);
            }
        }
    }
    kib
}

/// A domain's guest memory in KiB: `mem_mib`, or its ranks' footprint plus
/// [`GUEST_OS_MIB`] (0 for a domain without memory-aware ranks).
pub fn guest_kib(mem_mib: u64, footprint_kib: u64) -> u64 {
    if mem_mib > 0 {
        mem_mib * 1024
    } else if footprint_kib > 0 {
        footprint_kib + GUEST_OS_MIB * 1024
    } else {
        0
    }
}

/// The memory checks of a scenario (its `validate`): `(field, message)`.
pub fn check(sc: &Scenario) -> Result<(), (String, String)> {
    let Some(mem) = &sc.memory else {
        for (i, d) in sc.domains.iter().enumerate() {
            for (field, set) in [
                ("mem_mib", d.mem_mib != 0),
                ("vnuma", d.vnuma),
                ("warm", d.warm),
            ] {
                if set {
                    return Err((
                        format!("domains[{i}].{field}"),
                        "means something only to the memory model: add a [memory] section".into(),
                    ));
                }
            }
        }
        return Ok(());
    };
    let Some(placement) = Placement::from_name(&mem.placement) else {
        return Err((
            "memory.placement".into(),
            format!(
                "must be one of {}, got {:?}",
                Placement::NAMES.join(", "),
                mem.placement
            ),
        ));
    };
    if mem.nested_paging_ppm as u64 > 10 * PPM {
        return Err((
            "memory.nested_paging_ppm".into(),
            format!("must be at most 10000000, got {}", mem.nested_paging_ppm),
        ));
    }
    if mem.queueing && sc.host.latency_ns == 0 {
        return Err((
            "memory.queueing".into(),
            "needs the idle latency of a local access: host.latency_ns, or a host.preset \
             that gives it (`vhpc sim hosts`)"
                .into(),
        ));
    }
    if mem.host_fault_share_ppm as u64 > PPM {
        return Err((
            "memory.host_fault_share_ppm".into(),
            format!("must be at most 1000000, got {}", mem.host_fault_share_ppm),
        ));
    }
    let topo = Topology::of(&sc.host);
    let total_kib: u64 = topo.nodes.iter().map(|n| n.mem_mib * 1024).sum();
    let footprints = domain_footprints_kib(sc);
    let mut used = 0u64;
    for (i, d) in sc.domains.iter().enumerate() {
        if d.mem_mib > 1 << 30 {
            return Err((
                format!("domains[{i}].mem_mib"),
                format!("must be at most 2^30 MiB, got {}", d.mem_mib),
            ));
        }
        if d.mem_mib > 0 && d.mem_mib * 1024 < footprints[i] {
            return Err((
                format!("domains[{i}].mem_mib"),
                format!(
                    "is {} MiB, less than its ranks' footprint ({} MiB)",
                    d.mem_mib,
                    footprints[i].div_ceil(1024)
                ),
            ));
        }
        used += match placement {
            Placement::Preallocate if !d.native => guest_kib(d.mem_mib, footprints[i]),
            _ => footprints[i],
        };
        if used > total_kib {
            return Err((
                format!("domains[{i}].mem_mib"),
                format!(
                    "brings the memory placed on the host to {} MiB (domains[0..={i}]), more \
                     than its nodes hold ({} MiB)",
                    used.div_ceil(1024),
                    total_kib / 1024
                ),
            ));
        }
    }
    Ok(())
}

/// Streaming state of a rank inside a memory-aware phase.
#[derive(Debug, Clone, Copy)]
struct Active {
    /// Its place in [`Model::active`].
    slot: usize,
    sigma: u64,
    /// Native ns of the item left when it started streaming, and the share
    /// of its accesses that were remote from its core.
    native_at_start: u64,
    remote_ppm: u64,
    /// Node of its core and its socket bus (a resource) while it streams:
    /// where its demand was put.
    node: usize,
    bus: Option<usize>,
}

/// A tracked rank: where its accesses go, and its accounting.
#[derive(Debug, Clone)]
pub struct RankMem {
    /// (node, share of accesses in ppm), shares summing to [`PPM`].
    pub access: Vec<(usize, u32)>,
    /// Its bandwidth demand on each node of `access` while it streams
    /// (MB/s × ppm; kept to take exactly that back when it stops).
    contrib: Vec<u64>,
    mem_ppm: u32,
    /// The stretch its phase's remaining ns are in while it does not
    /// stream ([`PPM`]: native, a phase not yet started): resuming at the
    /// same stretch leaves them exactly as they were.
    paused: u64,
    active: Option<Active>,
    native_ns: u64,
    wall_ns: u64,
    remote_weighted: u128,
    /// A VM's rank on a host with hardware-assisted paging.
    nested: bool,
    /// Pages it first-touches itself: (node placed at build, share of its
    /// accesses). The host fault happens when it first streams, on the node
    /// of the core its vCPU runs on then; this moves them there if that
    /// differs (an unpinned vCPU the host scheduler moved).
    fault: Option<(usize, u32)>,
}

/// What placement decided for one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// (node, share of accesses ppm), shares summing to [`PPM`].
    pub access: Vec<(usize, u32)>,
    /// See [`RankMem::fault`].
    pub fault: Option<(usize, u32)>,
    /// In a VM (not a native domain).
    pub vm: bool,
}

/// The model's state during a run.
#[derive(Debug)]
pub struct Model {
    distance: Vec<Vec<u32>>,
    node_of_core: Vec<usize>,
    bandwidth: Vec<u64>,
    /// What a core of each node streams alone (MB/s): what a fully
    /// memory-bound rank on that core demands. The node's `core_mb_s`, or
    /// (0) the core's fair share of the node's bandwidth.
    stream: Vec<u64>,
    /// Demand on each resource by the streaming ranks, MB/s × ppm.
    /// Resources: the nodes, then each link's two directions, then the
    /// socket buses.
    load: Vec<u64>,
    /// `load / bandwidth` of each resource (ppm), updated with `load`.
    util: Vec<u64>,
    /// `memory.queueing`: each resource's wait curve, and its wait now
    /// (ppm of a local access's idle latency), updated with `load`.
    queues: Vec<queue::Queue>,
    wait: Vec<u64>,
    /// `paths[c][n]`: the resources data from node `n` crosses to a core of
    /// node `c` (node `n`, then the links of the route).
    paths: Vec<Vec<Vec<usize>>>,
    /// Resource of each core's socket bus (None: no bus modelled).
    bus_of_core: Vec<Option<usize>>,
    nested_ppm: u64,
    ranks: Vec<Option<RankMem>>,
    active: Vec<usize>,
}

impl Model {
    /// The model for `tasks` task slots, `placed[t]` what placement decided
    /// for tracked task `t`; `interconnect` whether links and buses limit
    /// traffic; `nested_ppm` the nested-paging overhead of VM ranks (0 when
    /// the host lacks hardware-assisted paging); `latency_ns` a local
    /// access's idle latency when queueing is modelled (0: not).
    pub fn new(
        topo: &Topology,
        placed: Vec<Option<Placed>>,
        interconnect: bool,
        nested_ppm: u64,
        latency_ns: u64,
    ) -> Model {
        let stream: Vec<u64> = topo
            .nodes
            .iter()
            .map(|n| match n.core_mb_s {
                0 => n.bandwidth_mb_s / n.cores.len().max(1) as u64,
                c => c,
            })
            .collect();
        let n = topo.nodes.len();
        let mut bandwidth: Vec<u64> = topo.nodes.iter().map(|n| n.bandwidth_mb_s.max(1)).collect();
        let links = if interconnect {
            topo.links.as_slice()
        } else {
            &[]
        };
        for &(_, _, bw) in links {
            bandwidth.extend([bw.max(1), bw.max(1)]);
        }
        let with_links = Topology {
            links: links.to_vec(),
            ..topo.clone()
        };
        let paths = (0..n)
            .map(|c| {
                (0..n)
                    .map(|m| {
                        let mut p = vec![m];
                        p.extend(with_links.route(m, c).into_iter().map(|dl| n + dl));
                        p
                    })
                    .collect()
            })
            .collect();
        let bus_of_core = if interconnect && topo.bus_mb_s > 0 {
            let first = bandwidth.len();
            let sockets = topo.socket_of_core.iter().max().map_or(0, |s| s + 1);
            bandwidth.extend(std::iter::repeat(topo.bus_mb_s).take(sockets));
            topo.socket_of_core
                .iter()
                .map(|&s| Some(first + s))
                .collect()
        } else {
            vec![None; topo.node_of_core.len()]
        };
        let queues: Vec<queue::Queue> = if latency_ns > 0 {
            // Tabulated up to every core streaming through the resource.
            let all: u64 = topo.node_of_core.iter().map(|&nd| stream[nd]).sum();
            bandwidth
                .iter()
                .map(|&bw| queue::Queue::new(bw, latency_ns, all * PPM / bw))
                .collect()
        } else {
            Vec::new()
        };
        Model {
            distance: topo.distance.clone(),
            wait: vec![
                0;
                if queues.is_empty() {
                    0
                } else {
                    bandwidth.len()
                }
            ],
            queues,
            node_of_core: topo.node_of_core.clone(),
            load: vec![0; bandwidth.len()],
            util: vec![0; bandwidth.len()],
            bandwidth,
            stream,
            paths,
            bus_of_core,
            nested_ppm,
            ranks: placed
                .into_iter()
                .map(|a| {
                    a.map(|p| RankMem {
                        contrib: vec![0; p.access.len()],
                        access: p.access,
                        mem_ppm: 0,
                        paused: PPM,
                        active: None,
                        native_ns: 0,
                        wall_ns: 0,
                        remote_weighted: 0,
                        nested: p.vm,
                        fault: p.fault,
                    })
                })
                .collect(),
            active: Vec::new(),
        }
    }

    pub fn tracks(&self, task: usize) -> bool {
        matches!(self.ranks.get(task), Some(Some(_)))
    }

    pub fn is_active(&self, task: usize) -> bool {
        matches!(self.ranks.get(task), Some(Some(r)) if r.active.is_some())
    }

    /// A new memory-aware phase of `mem_ppm` intensity for `task`.
    pub fn begin(&mut self, task: usize, mem_ppm: u32) {
        if let Some(Some(r)) = self.ranks.get_mut(task) {
            r.mem_ppm = mem_ppm;
            r.paused = PPM;
        }
    }

    /// The host page faults of a rank's own pages, on its first stream:
    /// they go to the node of the core it runs on now.
    fn fault(&mut self, task: usize, node: usize) {
        let r = self.ranks[task].as_mut().expect("tracked");
        let Some((placed, ppm)) = r.fault.take() else {
            return;
        };
        if placed == node {
            return;
        }
        let Some(i) = r.access.iter().position(|&(n, _)| n == placed) else {
            return;
        };
        let moved = ppm.min(r.access[i].1);
        r.access[i].1 -= moved;
        match r.access.iter().position(|&(n, _)| n == node) {
            Some(j) => r.access[j].1 += moved,
            None => r.access.push((node, moved)),
        }
        r.access.retain(|&(_, s)| s > 0);
        r.access.sort_unstable();
        r.contrib = vec![0; r.access.len()];
    }

    /// `task` starts streaming on `core`; `left` (its phase's remaining
    /// ns) is rescaled to its stretch, with its own demand counted. Whether
    /// others' stretches may have moved (a resource it uses is contended).
    pub fn activate(&mut self, task: usize, core: usize, left: &mut u64) -> bool {
        let node = self.node_of_core[core];
        let bus = self.bus_of_core[core];
        self.fault(task, node);
        let demand = self.stream[node] * self.ranks[task].as_ref().expect("tracked").mem_ppm as u64;
        let r = self.ranks[task].as_mut().expect("tracked");
        let native_left = scale_down(*left, PPM, r.paused);
        let paused = r.paused;
        let mut remote_ppm = 0;
        // Only a resource used beyond its bandwidth moves anybody's stretch
        // when its load changes (below it, latency rules), or one whose
        // queueing wait changed.
        let mut contended = false;
        for (&(n, share), c) in r.access.iter().zip(r.contrib.iter_mut()) {
            *c = (demand as u128 * share as u128 / PPM as u128) as u64;
            for &res in self.paths[node][n].iter().chain(bus.as_ref()) {
                self.load[res] += *c;
                self.util[res] = self.load[res] / self.bandwidth[res];
                contended |= self.load[res] > PPM * self.bandwidth[res];
                if let Some(q) = self.queues.get(res) {
                    let w = q.wait_ppm(self.util[res]);
                    contended |= w != self.wait[res];
                    self.wait[res] = w;
                }
            }
            if n != node {
                remote_ppm += share as u64;
            }
        }
        let slot = self.active.len();
        self.active.push(task);
        let sigma = self.sigma_now(task, core);
        let r = self.ranks[task].as_mut().expect("tracked");
        r.active = Some(Active {
            slot,
            sigma,
            native_at_start: native_left,
            remote_ppm,
            node,
            bus,
        });
        if sigma != paused {
            *left = scale(*left, sigma, paused);
        }
        // Loads only grew, and each resource was checked when its last
        // contribution was added: `contended` saw its final load.
        contended
    }

    /// `task` stops streaming with `left` ns of its phase left (at its
    /// current stretch, which they keep until it streams again). `None` if
    /// it was not streaming, else whether others' stretches may have moved.
    pub fn deactivate(&mut self, task: usize, left: u64) -> Option<bool> {
        let r = self.ranks.get_mut(task)?.as_mut()?;
        let a = r.active.take()?;
        r.paused = a.sigma;
        let native_left = scale_down(left, PPM, a.sigma);
        let consumed = a.native_at_start.saturating_sub(native_left);
        r.native_ns += consumed;
        r.remote_weighted += consumed as u128 * a.remote_ppm as u128;
        let mut moved = false;
        for (&(n, _), &c) in r.access.iter().zip(&r.contrib) {
            for &res in self.paths[a.node][n].iter().chain(a.bus.as_ref()) {
                moved |= self.load[res] > PPM * self.bandwidth[res];
                self.load[res] -= c;
                self.util[res] = self.load[res] / self.bandwidth[res];
                if let Some(q) = self.queues.get(res) {
                    let w = q.wait_ppm(self.util[res]);
                    moved |= w != self.wait[res];
                    self.wait[res] = w;
                }
            }
        }
        self.active.swap_remove(a.slot);
        if let Some(&other) = self.active.get(a.slot) {
            if let Some(Some(o)) = self.ranks.get_mut(other) {
                o.active.as_mut().expect("listed tasks are active").slot = a.slot;
            }
        }
        Some(moved)
    }

    /// The current stretch of a streaming task (ppm).
    pub fn sigma(&self, task: usize) -> u64 {
        self.ranks[task]
            .as_ref()
            .and_then(|r| r.active.as_ref())
            .map_or(PPM, |a| a.sigma)
    }

    fn sigma_now(&self, task: usize, core: usize) -> u64 {
        let r = self.ranks[task].as_ref().expect("tracked");
        let node = self.node_of_core[core];
        rate::stretch_ppm(
            r.mem_ppm,
            &r.access,
            &self.distance[node],
            &self.paths[node],
            self.bus_of_core[core],
            &self.util,
            (!self.queues.is_empty()).then_some(self.wait.as_slice()),
            if r.nested { self.nested_ppm } else { 0 },
        )
    }

    /// Streaming tasks other than `except` whose stretch changed, as
    /// (task, old, new), their new stretch recorded; `core_of` gives the
    /// core a streaming task runs on.
    pub fn refresh(
        &mut self,
        except: Option<usize>,
        core_of: impl Fn(usize) -> usize,
        out: &mut Vec<(usize, u64, u64)>,
    ) {
        for i in 0..self.active.len() {
            let t = self.active[i];
            if Some(t) == except {
                continue;
            }
            let new = self.sigma_now(t, core_of(t));
            let a = self.ranks[t]
                .as_mut()
                .and_then(|r| r.active.as_mut())
                .expect("listed tasks are active");
            if a.sigma != new {
                out.push((t, a.sigma, new));
                a.sigma = new;
            }
        }
    }

    /// Wall time spent in memory-aware phases (the engine's settle).
    pub fn add_wall(&mut self, task: usize, ns: u64) {
        if let Some(Some(r)) = self.ranks.get_mut(task) {
            r.wall_ns += ns;
        }
    }

    /// (share of remote accesses, stretch of memory-aware phases − 1) of
    /// these tasks together; None if none of them is tracked.
    pub fn summary(&self, tasks: &[usize]) -> Option<(f64, f64)> {
        let (mut native, mut wall, mut remote) = (0u128, 0u128, 0u128);
        let mut any = false;
        for &t in tasks {
            if let Some(Some(r)) = self.ranks.get(t) {
                any = true;
                native += r.native_ns as u128;
                wall += r.wall_ns as u128;
                remote += r.remote_weighted;
            }
        }
        if !any {
            return None;
        }
        if native == 0 {
            return Some((0.0, 0.0));
        }
        Some((
            remote as f64 / (native as f64 * PPM as f64),
            wall as f64 / native as f64 - 1.0,
        ))
    }
}

/// `ns × num / den`, rounded down (accounting only).
pub fn scale_down(ns: u64, num: u64, den: u64) -> u64 {
    (ns as u128 * num as u128 / den.max(1) as u128).min(u64::MAX as u128) as u64
}

/// `ns × num / den`, rounded up (a stretched phase never gets shorter
/// than its share of the stretch), without overflow.
pub fn scale(ns: u64, num: u64, den: u64) -> u64 {
    ((ns as u128 * num as u128).div_ceil(den.max(1) as u128)).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Node;

    /// Two nodes of two cores, distance 10 / 20, no links.
    fn topo() -> Topology {
        let node = |cores| Node {
            cores,
            mem_mib: 1024,
            bandwidth_mb_s: 1000,
            core_mb_s: 0,
        };
        Topology {
            node_of_core: vec![0, 0, 1, 1],
            nodes: vec![node(vec![0, 1]), node(vec![2, 3])],
            distance: vec![vec![10, 20], vec![20, 10]],
            links: Vec::new(),
            socket_of_core: vec![0, 0, 1, 1],
            bus_mb_s: 0,
            hap: false,
            latency_ns: 0,
        }
    }

    #[test]
    fn a_rank_demands_what_its_core_streams_alone() {
        // Node 0: 1000 MB/s, two cores. Fair share (core_mb_s = 0): two
        // fully memory-bound local ranks ask 500 each, no contention. With
        // core_mb_s = 800: one asks 800 (below the node: free), two ask
        // 1600, 1.6x each.
        let local = || Placed {
            access: vec![(0, PPM as u32)],
            fault: None,
            vm: false,
        };
        for (core_mb_s, one, two) in [(0, PPM, PPM), (800, PPM, 1_600_000)] {
            let mut t = topo();
            t.nodes[0].core_mb_s = core_mb_s;
            let mut m = Model::new(&t, vec![Some(local()), Some(local())], true, 0, 0);
            let (mut a, mut b) = (1000, 1000);
            m.begin(0, 1_000_000);
            m.begin(1, 1_000_000);
            m.activate(0, 0, &mut a);
            assert_eq!(m.sigma(0), one, "core_mb_s {core_mb_s}");
            m.activate(1, 1, &mut b);
            let mut moved = Vec::new();
            m.refresh(Some(1), |t| t, &mut moved);
            assert_eq!(
                (m.sigma(0), m.sigma(1)),
                (two, two),
                "core_mb_s {core_mb_s}"
            );
        }
    }

    #[test]
    fn first_touch_faults_land_where_the_vcpu_runs_when_it_first_streams() {
        // Placed on node 0 (its home core), all of it faulted by itself; it
        // first streams on core 2 (node 1): its pages move there, local.
        let placed = Placed {
            access: vec![(0, PPM as u32)],
            fault: Some((0, PPM as u32)),
            vm: true,
        };
        let mut m = Model::new(&topo(), vec![Some(placed.clone())], true, 0, 0);
        m.begin(0, 1_000_000);
        let mut left = 1000;
        m.activate(0, 2, &mut left);
        assert_eq!((left, m.sigma(0)), (1000, PPM));
        // Back on node 0 later: the pages stay on node 1, now remote.
        m.deactivate(0, 500);
        m.activate(0, 0, &mut left);
        assert_eq!(m.sigma(0), 2 * PPM);
        // Pages another thread faulted (no fault of its own) do not move.
        let other = Placed {
            fault: None,
            ..placed
        };
        let mut m = Model::new(&topo(), vec![Some(other)], true, 0, 0);
        m.begin(0, 1_000_000);
        m.activate(0, 2, &mut left);
        assert_eq!(m.sigma(0), 2 * PPM);
    }
}
