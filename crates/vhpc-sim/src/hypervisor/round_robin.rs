//! Plain round robin: one FIFO run queue per core, a fixed quantum, no
//! priorities, no migration. It exists so analytic oracles have a scheduler
//! whose behaviour is obvious (two always-busy vCPUs on one core alternate
//! quanta exactly).

use std::collections::VecDeque;

use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

#[derive(Debug)]
pub struct RoundRobin {
    quantum: SimTime,
    /// Home core of each vCPU: its initial core, kept for the whole run.
    home: Vec<CoreId>,
    runq: Vec<VecDeque<VcpuId>>,
}

impl RoundRobin {
    pub fn new(p: &SchedulerParams) -> Self {
        RoundRobin {
            quantum: p.tslice,
            home: Vec::new(),
            runq: vec![VecDeque::new(); p.cores],
        }
    }
}

impl Scheduler for RoundRobin {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.home.len());
        self.home.push(spec.initial_core);
    }

    fn wake(
        &mut self,
        _now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let core = self.home[v];
        self.runq[core].push_back(v);
        if running[core].is_none() {
            tickle.push(core);
        }
    }

    fn deschedule(&mut self, _now: SimTime, core: CoreId, v: VcpuId, _ran: SimTime, why: Leave) {
        if why != Leave::Blocked {
            self.runq[core].push_back(v);
        }
    }

    fn pick(&mut self, _now: SimTime, core: CoreId, _running: &[Option<VcpuId>]) -> Pick {
        match self.runq[core].pop_front() {
            Some(v) => Pick {
                vcpu: Some(v),
                slice: self.quantum,
            },
            None => Pick {
                vcpu: None,
                slice: SimTime::MAX,
            },
        }
    }

    fn next_timer(&self) -> SimTime {
        SimTime::MAX
    }

    fn timer(&mut self, _: SimTime, _: &[Option<VcpuId>], _: &[SimTime], _: &mut Vec<CoreId>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::SedfParams;

    fn spec(core: CoreId) -> VcpuSpec {
        VcpuSpec {
            domain: 0,
            weight: 256,
            cap: 0,
            affinity: vec![core],
            initial_core: core,
            sedf: SedfParams {
                period: SimTime::from_ms(100),
                slice: SimTime::ZERO,
                extratime: true,
            },
        }
    }

    #[test]
    fn alternates_in_fifo_order() {
        let mut rr = RoundRobin::new(&SchedulerParams::xen_defaults(1));
        rr.add_vcpu(0, &spec(0));
        rr.add_vcpu(1, &spec(0));
        let mut tickle = Vec::new();
        rr.wake(SimTime::ZERO, 0, &[None], &mut tickle);
        rr.wake(SimTime::ZERO, 1, &[None], &mut tickle);
        assert_eq!(tickle, vec![0, 0]);
        let first = rr.pick(SimTime::ZERO, 0, &[None]);
        assert_eq!(
            first,
            Pick {
                vcpu: Some(0),
                slice: SimTime::from_ms(30)
            }
        );
        rr.deschedule(
            SimTime::from_ms(30),
            0,
            0,
            SimTime::from_ms(30),
            Leave::Preempted,
        );
        assert_eq!(rr.pick(SimTime::from_ms(30), 0, &[None]).vcpu, Some(1));
        rr.deschedule(
            SimTime::from_ms(31),
            0,
            1,
            SimTime::from_ms(1),
            Leave::Blocked,
        );
        assert_eq!(rr.pick(SimTime::from_ms(31), 0, &[None]).vcpu, Some(0));
        rr.deschedule(
            SimTime::from_ms(32),
            0,
            0,
            SimTime::from_ms(1),
            Leave::Blocked,
        );
        assert_eq!(rr.pick(SimTime::from_ms(32), 0, &[None]).vcpu, None);
    }
}
