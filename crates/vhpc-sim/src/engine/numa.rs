//! The engine's side of the memory model ([`crate::memory`]): a rank in a
//! memory-aware phase streams while it holds its core; whenever one starts
//! or stops streaming on a node used beyond its bandwidth (below it, loads
//! move nobody: latency rules), the stretch of the others is re-evaluated
//! and the remaining work of those whose stretch changed is rescaled (a new
//! Work event; the old one goes stale). Without `[memory]` none of this runs.

use super::*;
use crate::host::Topology;
use crate::memory::{self, placement, Model};

impl Engine {
    /// Builds the model once domains and jobs exist (placement needs every
    /// rank's vCPU).
    pub(super) fn build_memory(&mut self, sc: &Scenario) {
        if sc.memory.is_none() {
            return;
        }
        let topo = Topology::of(&sc.host);
        let mut sites = Vec::new();
        let mut ids = Vec::new();
        for (j, job) in self.jobs.iter().enumerate() {
            for (r, &t) in job.tasks.iter().enumerate() {
                let v = self.tasks[t].vcpu;
                let vc = &self.vcpus[v];
                sites.push(placement::Site {
                    job: j,
                    rank: r as u32,
                    domain: vc.domain,
                    home_core: vc.affinity[v % vc.affinity.len()],
                });
                ids.push(t);
            }
        }
        let mut placed = vec![None; self.tasks.len()];
        for (t, a) in ids.into_iter().zip(placement::place(sc, &topo, &sites)) {
            placed[t] = a;
        }
        let mem = sc.memory.as_ref().expect("memory model on");
        let nested = if topo.hap {
            mem.nested_paging_ppm as u64
        } else {
            0
        };
        let latency = if mem.queueing { topo.latency_ns } else { 0 };
        self.numa = Some(Box::new(Model::new(
            &topo,
            placed,
            mem.interconnect,
            nested,
            latency,
        )));
    }

    /// A memory-aware phase of `ns` native ns starts (the task runs).
    pub(super) fn numa_begin(&mut self, t: TaskId, ns: u64, mem_ppm: u32) {
        let tracked = match self.numa.as_mut() {
            Some(n) if n.tracks(t) => {
                n.begin(t, mem_ppm);
                true
            }
            _ => false,
        };
        let after = if tracked {
            After::MemCompute
        } else {
            After::Compute
        };
        self.tasks[t].work.push_back(Work { ns, after });
        if tracked && self.tasks[t].on_cpu {
            self.numa_activate(t);
        }
    }

    /// The task got its CPU back: it streams again if in a memory phase.
    pub(super) fn numa_resume(&mut self, t: TaskId) {
        let front = self.tasks[t].work.front().map(|w| w.after);
        if matches!(front, Some(After::MemCompute)) {
            self.numa_activate(t);
        }
    }

    /// The task left its CPU (settled): it stops streaming; its remaining
    /// work keeps its stretch until it streams again.
    pub(super) fn numa_pause(&mut self, t: TaskId) {
        let Some(n) = self.numa.as_mut() else { return };
        if !n.is_active(t) {
            return;
        }
        let left = self.tasks[t].work.front().map_or(0, |w| w.ns);
        if n.deactivate(t, left) == Some(true) {
            self.numa_refresh(None);
        }
    }

    /// The phase ended.
    pub(super) fn numa_done(&mut self, t: TaskId) {
        let Some(n) = self.numa.as_mut() else { return };
        if n.deactivate(t, 0) == Some(true) {
            self.numa_refresh(None);
        }
    }

    fn numa_activate(&mut self, t: TaskId) {
        let HvState::Running(core) = self.vcpus[self.tasks[t].vcpu].hv else {
            return;
        };
        let n = self.numa.as_mut().expect("memory model on");
        let w = self.tasks[t].work.front_mut().expect("phase in front");
        if n.activate(t, core, &mut w.ns) {
            self.numa_refresh(Some(t));
        }
    }

    /// Rescales the remaining work of streaming tasks whose stretch moved.
    fn numa_refresh(&mut self, except: Option<TaskId>) {
        let mut changed = std::mem::take(&mut self.numa_scratch);
        changed.clear();
        {
            let (tasks, vcpus) = (&self.tasks, &self.vcpus);
            let core_of = |t: usize| match vcpus[tasks[t].vcpu].hv {
                HvState::Running(c) => c,
                _ => unreachable!("streaming tasks run"),
            };
            self.numa
                .as_mut()
                .expect("memory model on")
                .refresh(except, core_of, &mut changed);
        }
        for &(j, old, new) in &changed {
            self.settle(j);
            let task = &mut self.tasks[j];
            let w = task.work.front_mut().expect("phase in front");
            w.ns = memory::scale(w.ns, new, old);
            task.gen = task.gen.wrapping_add(1);
            let at = self.now + SimTime::from_ns(task.debt + w.ns);
            let ev = Ev::Work {
                task: j as u32,
                gen: task.gen,
            };
            let v = task.vcpu;
            self.push_on_cpu(v, at, ev);
        }
        self.numa_scratch = changed;
    }
}
