//! Scheduling domains: the levels a Linux guest builds over its vCPUs from
//! the topology it believes (`guest.topology`), or S1's one flat level.
//!
//! Linux (kernel/sched/topology.c, `default_topology` and `sd_init`; the
//! same values in 3.x/4.x core.c) builds SMT, MC (shared last-level cache)
//! and DIE levels, plus NUMA levels over nodes; a level that spans no more
//! than its child is dropped (`sd_degenerate`). Per level, from `sd_init`:
//! `imbalance_pct` 110 with SD_SHARE_CPUCAPACITY (SMT), 117 with
//! SD_SHARE_PKG_RESOURCES (MC), 125 otherwise; `min_interval` = the span's
//! weight in ms, `max_interval` = twice it, `busy_factor` 32,
//! `cache_nice_tries` 0 (SMT), 1 (MC, DIE), 2 (NUMA). S1's patch replaces
//! the table by one level over all vCPUs with no flags beyond `sd_init`'s
//! defaults: no SD_SHARE_PKG_RESOURCES, hence no last-level-cache domain
//! for the wake-up search.
//!
//! Spans are contiguous blocks of the domain's vCPUs (the guest numbers its
//! siblings together), so a level is a span size and a group size.

/// `busy_factor` of every level (`sd_init`).
pub const BUSY_FACTOR: u64 = 32;

/// What the guest believes about its vCPUs (`guest.topology`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topology {
    /// vCPUs per core (SMT siblings); 1: no SMT level.
    pub smt: u32,
    /// vCPUs per shared last-level cache; 0: all vCPUs of a node.
    pub llc: u32,
    /// NUMA nodes over the vCPUs (even, contiguous split).
    pub numa_nodes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    pub name: &'static str,
    /// vCPUs in one span of this level.
    pub span: u32,
    /// vCPUs in one group (the child level's span; 1 at the lowest level).
    pub group: u32,
    pub imbalance_pct: u32,
    /// SD_SHARE_PKG_RESOURCES: the wake-up search treats the span as one cache.
    pub share_cache: bool,
    pub cache_nice_tries: u32,
    /// `min_interval` in ms (the span's weight); `max_interval` is twice it.
    pub min_interval_ms: u64,
}

impl Level {
    fn new(name: &'static str, span: u32, group: u32, flags: Flags) -> Level {
        let (imbalance_pct, share_cache, cache_nice_tries) = match flags {
            Flags::Smt => (110, true, 0),
            Flags::Cache => (117, true, 1),
            Flags::Die => (125, false, 1),
            Flags::Numa => (125, false, 2),
            Flags::Flat => (125, false, 0),
        };
        Level {
            name,
            span,
            group,
            imbalance_pct,
            share_cache,
            cache_nice_tries,
            min_interval_ms: u64::from(span),
        }
    }

    /// First vCPU (index within the domain) of `v`'s span.
    pub fn span_start(&self, v: u32) -> u32 {
        v / self.span * self.span
    }

    /// First vCPU of `v`'s group.
    pub fn group_start(&self, v: u32) -> u32 {
        v / self.group * self.group
    }
}

#[derive(Debug, Clone, Copy)]
enum Flags {
    Smt,
    Cache,
    Die,
    Numa,
    Flat,
}

/// The levels, lowest first, of a domain with `vcpus` vCPUs. `topo` must
/// cover them (the scenario validator checks `covers` first).
pub fn levels(vcpus: u32, topo: Topology, flat: bool) -> Vec<Level> {
    if flat {
        return vec![Level::new("FLAT", vcpus, 1, Flags::Flat)];
    }
    let node = vcpus / topo.numa_nodes.max(1);
    let llc = if topo.llc == 0 { node } else { topo.llc };
    let mut out: Vec<Level> = Vec::new();
    let mut push = |name, span: u32, flags| {
        let child = out.last().map_or(1, |l: &Level| l.span);
        // sd_degenerate: a level no wider than its child adds nothing.
        if span > child {
            out.push(Level::new(name, span, child, flags));
        }
    };
    push("SMT", topo.smt, Flags::Smt);
    push("MC", llc, Flags::Cache);
    push("DIE", node, Flags::Die);
    push("NUMA", vcpus, Flags::Numa);
    out
}

/// Why `topo` does not cover `vcpus` vCPUs: (field, message), or Ok.
pub fn covers(vcpus: u32, topo: Topology) -> Result<(), (&'static str, String)> {
    if topo.numa_nodes == 0 || vcpus % topo.numa_nodes != 0 {
        return Err((
            "numa_nodes",
            format!(
                "must be at least 1 and divide the domain's {vcpus} vCPUs, got {}",
                topo.numa_nodes
            ),
        ));
    }
    let node = vcpus / topo.numa_nodes;
    let llc = if topo.llc == 0 { node } else { topo.llc };
    if node % llc != 0 {
        return Err((
            "llc",
            format!(
                "must divide the {node} vCPUs of a guest NUMA node (0: all of them), got {}",
                topo.llc
            ),
        ));
    }
    if topo.smt == 0 || llc % topo.smt != 0 {
        return Err((
            "smt",
            format!(
                "must be at least 1 and divide the {llc} vCPUs of a shared cache, got {}",
                topo.smt
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOM0: Topology = Topology {
        smt: 2,
        llc: 8,
        numa_nodes: 1,
    };

    #[test]
    fn linux_levels_from_the_believed_topology() {
        let l = levels(16, DOM0, false);
        let names: Vec<_> = l
            .iter()
            .map(|l| (l.name, l.span, l.group, l.imbalance_pct))
            .collect();
        assert_eq!(
            names,
            vec![("SMT", 2, 1, 110), ("MC", 8, 2, 117), ("DIE", 16, 8, 125)]
        );
        assert!(l[1].share_cache && !l[2].share_cache);
        assert_eq!(l[2].min_interval_ms, 16);
    }

    #[test]
    fn degenerate_levels_are_dropped_and_numa_added() {
        let t = Topology {
            smt: 1,
            llc: 0,
            numa_nodes: 2,
        };
        let l = levels(16, t, false);
        let names: Vec<_> = l.iter().map(|l| (l.name, l.span)).collect();
        assert_eq!(names, vec![("MC", 8), ("NUMA", 16)]);
    }

    #[test]
    fn flat_is_one_level_without_a_cache_domain() {
        let l = levels(16, DOM0, true);
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].span, l[0].group, l[0].share_cache), (16, 1, false));
    }

    #[test]
    fn covering_is_checked_per_field() {
        assert!(covers(16, DOM0).is_ok());
        assert_eq!(covers(12, DOM0).unwrap_err().0, "llc");
        let t = Topology {
            smt: 3,
            llc: 8,
            numa_nodes: 1,
        };
        assert_eq!(covers(16, t).unwrap_err().0, "smt");
        let t = Topology {
            smt: 1,
            llc: 0,
            numa_nodes: 3,
        };
        assert_eq!(covers(16, t).unwrap_err().0, "numa_nodes");
    }
}
