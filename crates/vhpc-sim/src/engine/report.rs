//! The end of a run: close open intervals and build the report.

use super::*;

impl Engine {
    /// Closes the run (after `advance` returned true) and reports.
    pub fn finish(mut self) -> (Report, Option<Recorder>) {
        let end = self.now;
        for core in 0..self.cores.len() {
            match self.cores[core].vcpu {
                Some(v) => self.take_off(core, v, Leave::Preempted),
                None => {
                    let c = &mut self.cores[core];
                    c.idle += (end - c.since).as_ns();
                    c.since = end;
                }
            }
        }
        let names: Vec<String> = self
            .vcpus
            .iter()
            .map(|v| self.domains[v.domain].name.clone())
            .collect();
        let jobs = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| {
                let mem = self.numa.as_ref().and_then(|n| n.summary(&j.tasks));
                let sum = |f: fn(&RankReport) -> u64| {
                    j.tasks.iter().map(|&t| f(&self.tasks[t].stats)).sum()
                };
                JobReport {
                    name: j.name.clone(),
                    workload: j.workload.clone(),
                    wait_policy: j.policy.clone(),
                    ranks: j.tasks.len() as u32,
                    completion_ns: j.completion.map(SimTime::as_ns),
                    completion_s: j.completion.map(|c| c.as_ns() as f64 / 1e9),
                    runs: (j.runs > 1).then_some(j.runs),
                    useful_ns: sum(|s| s.useful_ns),
                    poll_ns: sum(|s| s.poll_ns),
                    overhead_ns: sum(|s| s.overhead_ns),
                    remote_share: mem.map(|m| m.0),
                    mem_slowdown: mem.map(|m| m.1),
                    throttle: self.throttle_report(i),
                }
            })
            .collect();
        let ranks = self
            .jobs
            .iter()
            .flat_map(|j| j.tasks.iter().map(|&t| self.tasks[t].stats.clone()))
            .collect();
        let cores = self
            .cores
            .iter()
            .enumerate()
            .map(|(i, c)| CoreReport {
                core: i as u32,
                busy_ns: c.busy,
                idle_ns: c.idle,
                vcpu_switches: c.switches,
                utilisation: if end > SimTime::ZERO {
                    c.busy as f64 / end.as_ns() as f64
                } else {
                    0.0
                },
            })
            .collect();
        let vcpus = self
            .vcpus
            .iter()
            .zip(&names)
            .map(|(v, name)| VcpuReport {
                domain: name.clone(),
                vcpu: v.index,
                run_ns: v.run_ns,
                migrations: v.migrations,
            })
            .collect();
        let report = Report {
            scenario: self.name.clone(),
            scheduler: self.scheduler_name.clone(),
            seed: self.seed,
            end_ns: end.as_ns(),
            finished: self.live_jobs == 0,
            events: self.events,
            jobs,
            ranks,
            cores,
            vcpus,
            guest: self.guest_report(),
        };
        (report, self.trace.take())
    }
}
