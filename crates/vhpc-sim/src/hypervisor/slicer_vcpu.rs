//! The lab's slicer in per-vCPU mode (`[hypervisor.slicer] slicing = "vcpu"`):
//! each vCPU is pinned to one core and every core runs its own slicer over the
//! vCPUs pinned to it, as the lab runs one freezer controller per CPU over
//! per-vCPU groups. Two vCPUs of one domain are then scheduled independently,
//! as Xen's Credit schedules each vCPU on its own (no gang), which is what
//! makes a busy-polling rank burn its slice while its peer waits elsewhere.
//!
//! Each core's controller is the gang [`Slicer`] on a one-core world whose
//! "domains" are the vCPUs pinned there: the same poll, switch cost, work
//! conservation and pick rule (in turn, or by the owning domain's weight).
//! The cores' slices are staggered evenly (core c's first slice is c / cores
//! of a slice short), as Credit's per-core slices fall at unrelated instants:
//! two vCPUs of one domain then share only part of their slices.

use super::slicer::Slicer;
use super::{CoreId, Leave, Pick, Scheduler, SchedulerParams, VcpuId, VcpuSpec};
use crate::time::SimTime;

#[derive(Debug)]
pub struct VcpuSlicer {
    /// One controller per core.
    cores: Vec<Slicer>,
    /// Per vCPU: its core and its index among that core's vCPUs.
    place: Vec<(CoreId, VcpuId)>,
    /// Per core: the global id of each of its vCPUs.
    members: Vec<Vec<VcpuId>>,
}

impl VcpuSlicer {
    /// Core c's controller starts c / cores of a slice into its first slice:
    /// the cores' slices are staggered evenly (the lab does the same).
    pub fn new(p: &SchedulerParams) -> Self {
        let cores = p.cores.max(1) as u64;
        VcpuSlicer {
            cores: (0..p.cores)
                .map(|c| {
                    let phase = SimTime::from_ns(p.tslice.as_ns() * c as u64 / cores);
                    Slicer::new(p).with_phase(phase)
                })
                .collect(),
            place: Vec::new(),
            members: vec![Vec::new(); p.cores],
        }
    }

    /// What `core`'s controller sees running on its one core.
    fn local_running(&self, core: CoreId, running: &[Option<VcpuId>]) -> [Option<VcpuId>; 1] {
        [running[core].map(|v| self.place[v].1)]
    }

    pub fn switches(&self) -> (u64, u64) {
        self.cores
            .iter()
            .fold((0, 0), |(s, e), c| (s + c.switches, e + c.early_switches))
    }
}

impl Scheduler for VcpuSlicer {
    fn add_vcpu(&mut self, v: VcpuId, spec: &VcpuSpec) {
        debug_assert_eq!(v, self.place.len());
        // The scenario's validation requires one core per vCPU in this mode.
        let core = spec.affinity[0];
        let local = self.members[core].len();
        let mut own = spec.clone();
        own.domain = local;
        own.affinity = vec![0];
        own.initial_core = 0;
        self.cores[core].add_vcpu(local, &own);
        self.members[core].push(v);
        self.place.push((core, local));
    }

    fn wake(
        &mut self,
        now: SimTime,
        v: VcpuId,
        running: &[Option<VcpuId>],
        tickle: &mut Vec<CoreId>,
    ) {
        let (core, local) = self.place[v];
        let here = self.local_running(core, running);
        let mut own = Vec::new();
        self.cores[core].wake(now, local, &here, &mut own);
        if !own.is_empty() {
            tickle.push(core);
        }
    }

    fn deschedule(&mut self, now: SimTime, core: CoreId, v: VcpuId, ran: SimTime, why: Leave) {
        let local = self.place[v].1;
        self.cores[core].deschedule(now, 0, local, ran, why);
    }

    fn pick(&mut self, now: SimTime, core: CoreId, running: &[Option<VcpuId>]) -> Pick {
        let here = self.local_running(core, running);
        let pick = self.cores[core].pick(now, 0, &here);
        Pick {
            vcpu: pick.vcpu.map(|local| self.members[core][local]),
            slice: pick.slice,
        }
    }

    fn next_timer(&self) -> SimTime {
        self.cores
            .iter()
            .map(|c| c.next_timer())
            .min()
            .unwrap_or(SimTime::MAX)
    }

    fn timer(
        &mut self,
        now: SimTime,
        running: &[Option<VcpuId>],
        ran_so_far: &[SimTime],
        tickle: &mut Vec<CoreId>,
    ) {
        for core in 0..self.cores.len() {
            if self.cores[core].next_timer() > now {
                continue;
            }
            let here = self.local_running(core, running);
            let mut own = Vec::new();
            self.cores[core].timer(now, &here, &ran_so_far[core..=core], &mut own);
            if !own.is_empty() {
                tickle.push(core);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hypervisor::test_spec;

    fn slicer(cores: usize) -> VcpuSlicer {
        let mut p = SchedulerParams::xen_defaults(cores);
        p.slicer.per_vcpu = true;
        VcpuSlicer::new(&p)
    }

    /// Two domains of two vCPUs each, vCPU k of each on core k.
    fn two_by_two() -> VcpuSlicer {
        let mut s = slicer(2);
        for (v, (d, core)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            s.add_vcpu(v, &test_spec(d, 256, 0, vec![core]));
        }
        s
    }

    /// Each core switches on its own, core 1 half a slice before core 0 (the
    /// stagger), and hands its core to the other domain's vCPU pinned there.
    #[test]
    fn each_core_slices_its_own_vcpus_half_a_slice_apart() {
        let mut s = two_by_two();
        let mut tickle = Vec::new();
        let none = [None, None];
        for v in 0..4 {
            s.wake(SimTime::ZERO, v, &none, &mut tickle);
        }
        assert_eq!(s.pick(SimTime::ZERO, 0, &none).vcpu, Some(0));
        assert_eq!(s.pick(SimTime::ZERO, 1, &none).vcpu, Some(1));
        let mut running = [Some(0), Some(1)];
        let mut switched = Vec::new();
        while switched.len() < 2 {
            let t = s.next_timer();
            tickle.clear();
            s.timer(t, &running, &[t, t], &mut tickle);
            for &core in &tickle {
                let v = running[core].take().expect("a vCPU ran there");
                s.deschedule(t, core, v, t, Leave::Preempted);
                let after = t + SimTime::from_us(100);
                running[core] = s.pick(after, core, &running).vcpu;
                switched.push((core, t, running[core]));
            }
        }
        let (poll, slice, half) = (
            s.cores[0].poll(),
            SimTime::from_ms(30),
            SimTime::from_ms(15),
        );
        let (c1, t1, v1) = switched[0];
        assert_eq!((c1, v1), (1, Some(3)));
        assert!(t1 >= half && t1 < half + poll, "core 1 switched at {t1:?}");
        let (c0, t0, v0) = switched[1];
        assert_eq!((c0, v0), (0, Some(2)));
        assert!(
            t0 >= slice && t0 < slice + poll,
            "core 0 switched at {t0:?}"
        );
    }

    #[test]
    fn a_blocked_vcpu_hands_its_core_over_without_touching_the_other_core() {
        let mut s = two_by_two();
        let mut tickle = Vec::new();
        let none = [None, None];
        for v in 0..4 {
            s.wake(SimTime::ZERO, v, &none, &mut tickle);
        }
        s.pick(SimTime::ZERO, 0, &none);
        s.pick(SimTime::ZERO, 1, &none);
        // vCPU 0 halts (its rank waits for its peer): core 0 leaves it at the
        // next poll; core 1 keeps running domain 0's other vCPU.
        s.deschedule(
            SimTime::from_us(10),
            0,
            0,
            SimTime::from_us(10),
            Leave::Blocked,
        );
        tickle.clear();
        let t = s.next_timer();
        s.timer(t, &[None, Some(1)], &[SimTime::ZERO, t], &mut tickle);
        assert_eq!(tickle, vec![0]);
        assert_eq!(s.switches(), (1, 1));
        let after = t + SimTime::from_us(100);
        assert_eq!(s.pick(after, 0, &[None, Some(1)]).vcpu, Some(2));
    }

    #[test]
    fn a_vcpu_alone_on_its_core_is_never_polled() {
        let mut s = slicer(2);
        s.add_vcpu(0, &test_spec(0, 256, 0, vec![0]));
        s.add_vcpu(1, &test_spec(0, 256, 0, vec![1]));
        let mut tickle = Vec::new();
        s.wake(SimTime::ZERO, 0, &[None, None], &mut tickle);
        s.wake(SimTime::ZERO, 1, &[None, None], &mut tickle);
        assert_eq!(tickle, vec![0, 1]);
        assert_eq!(s.next_timer(), SimTime::MAX);
    }
}
