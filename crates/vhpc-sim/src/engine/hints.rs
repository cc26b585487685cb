//! Hint-driven control in the spirit of VT-ASOS (brief S4): a domain
//! publishes each vCPU's phase (computing, synchronising) in a page the
//! hypervisor reads, and a named policy (`domains.hints`) reacts.
//!
//! The page is read at no cost and is always current: a shared page the
//! guest's runtime (libgomp, the MPI library) writes when a thread enters or
//! leaves a wait, as libvhpc_wait's state page does, not VT-ASOS's xenstore
//! (whose asynchronous notifications would add a delay). A rank is
//! *synchronising* while it waits inside a blocking call (a barrier, a
//! collective, a receive) with nothing to do but poll.
//!
//! Policies act only through what a guest can do: a synchronising task
//! gives up its vCPU (blocks, to be woken by the message it waits for), so
//! the hypervisor's own scheduler decides what runs on the freed core.

use super::*;

/// What the page says about one vCPU of the domain, with what the
/// hypervisor knows of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Halted (no runnable task).
    Halted,
    /// Runnable but waiting for a core (descheduled).
    Descheduled,
    /// On a core, its task computing (or doing MPI work).
    Computing,
    /// On a core, its task waiting with nothing to do.
    Synchronising,
}

/// A hint-driven policy: small and stateless, chosen by name.
pub trait HintPolicy: std::fmt::Debug + Send + Sync {
    /// A vCPU of the domain was just preempted while computing (`page[me]`
    /// is now `Descheduled`): the index of a sibling whose synchronising
    /// task should give up its core, if any.
    fn on_preempted(&self, page: &[Phase], me: usize) -> Option<usize>;
    /// vCPU `me`'s task has nothing to do but wait: whether it gives up its
    /// core now instead of polling. `intruder`: a vCPU of another domain
    /// waits for a core.
    fn on_wait(&self, page: &[Phase], me: usize, intruder: bool) -> bool;
    /// A vCPU of another domain woke and the hypervisor would preempt vCPU
    /// `i` for it: whether `i` keeps its core (the woken one waits for a
    /// core the domain gives up, or for the scheduler's next decision there).
    fn shields(&self, page: &[Phase], i: usize) -> bool;
}

/// `cosched`: co-scheduling while the domain synchronises.
#[derive(Debug)]
pub struct Cosched;

impl HintPolicy for Cosched {
    fn on_preempted(&self, page: &[Phase], _me: usize) -> Option<usize> {
        page.iter().position(|&p| p == Phase::Synchronising)
    }
    fn on_wait(&self, page: &[Phase], me: usize, intruder: bool) -> bool {
        intruder
            || page
                .iter()
                .enumerate()
                .any(|(i, &p)| i != me && p == Phase::Descheduled)
    }
    fn shields(&self, page: &[Phase], i: usize) -> bool {
        page[i] == Phase::Computing
    }
}

/// A registered policy.
#[derive(Debug, Clone, Copy)]
pub struct HintPolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub build: fn() -> Box<dyn HintPolicy>,
}

/// Every hint policy, by name.
pub const HINT_POLICIES: &[HintPolicyInfo] = &[HintPolicyInfo {
    name: "cosched",
    description: "co-schedule while synchronising: another domain's waking vCPU does not \
                  preempt a computing vCPU of the domain; a thread that starts waiting while \
                  a sibling or another domain's vCPU waits for a core gives up its core at \
                  once (blocks until its message), as does a waiting sibling when a \
                  computing vCPU is preempted: the domain computes together and lends its \
                  cores while it synchronises",
    build: || Box::new(Cosched),
}];

pub fn by_name(name: &str) -> Option<&'static HintPolicyInfo> {
    HINT_POLICIES.iter().find(|p| p.name == name)
}

/// The policies of the domains that use one (None: no domain does).
#[derive(Debug)]
pub(super) struct Hints {
    /// Per domain: its policy.
    policies: Vec<Option<Box<dyn HintPolicy>>>,
    /// Per domain: its vCPUs (`first..first + count`).
    vcpus: Vec<(usize, usize)>,
    /// Reused page buffer.
    page: Vec<Phase>,
}

impl Hints {
    pub(super) fn of(sc: &Scenario) -> Option<Box<Hints>> {
        if sc.domains.iter().all(|d| d.hints.is_none()) {
            return None;
        }
        let policies = sc
            .domains
            .iter()
            .map(|d| {
                d.hints
                    .as_deref()
                    .map(|n| (by_name(n).expect("validated hint policy").build)())
            })
            .collect();
        Some(Box::new(Hints {
            policies,
            vcpus: vcpu_ranges(sc),
            page: Vec::new(),
        }))
    }
}

impl Engine {
    /// Whether task `t` waits with nothing to do (a spin it could give up).
    fn synchronising(&self, t: TaskId) -> bool {
        let task = &self.tasks[t];
        matches!(task.role, Role::Rank { .. })
            && task.on_cpu
            && task.state == TaskState::Runnable
            && task.wait.active
            && task.work.is_empty()
            && task.debt == 0
            && task.inbox.is_empty()
    }

    /// Whether domain `d` has a hint policy.
    fn has_policy(&self, d: usize) -> bool {
        self.hints.as_ref().is_some_and(|h| h.policies[d].is_some())
    }

    /// `ask(policy, page, first vCPU)` of domain `d`, with its page filled
    /// from the vCPUs' states; None if `d` has no policy.
    fn ask_policy<R>(
        &mut self,
        d: usize,
        ask: impl FnOnce(&dyn HintPolicy, &[Phase], usize) -> R,
    ) -> Option<R> {
        if !self.has_policy(d) {
            return None;
        }
        let hints = self.hints.as_mut().expect("has a policy");
        let (first, count) = hints.vcpus[d];
        let mut page = std::mem::take(&mut hints.page);
        page.clear();
        for v in first..first + count {
            let phase = match (self.vcpus[v].hv, self.vcpus[v].guest.current) {
                (HvState::Blocked, _) => Phase::Halted,
                (HvState::Runnable, _) => Phase::Descheduled,
                (HvState::Running(_), Some(t)) if self.synchronising(t) => Phase::Synchronising,
                (HvState::Running(_), _) => Phase::Computing,
            };
            page.push(phase);
        }
        let hints = self.hints.as_mut().expect("has a policy");
        let policy = hints.policies[d].as_deref().expect("has a policy");
        let answer = ask(policy, &page, first);
        hints.page = page; // the buffer, for the next page
        Some(answer)
    }

    /// vCPU `v` was preempted (still runnable after its core re-decided):
    /// its domain's policy may have a synchronising sibling give up its core.
    pub(super) fn hint_preempted(&mut self, v: VcpuId) {
        if self.vcpus[v].hv != HvState::Runnable {
            return;
        }
        let d = self.vcpus[v].domain;
        let pick = self.ask_policy(d, |p, page, first| {
            p.on_preempted(page, v - first).map(|i| first + i)
        });
        if let Some(Some(sib)) = pick {
            let t = self.vcpus[sib]
                .guest
                .current
                .expect("synchronising: has a task");
            self.tasks[t].state = TaskState::Blocked;
            self.tasks[t].stats.blocks += 1;
            self.leave_cpu(t);
            self.kick(sib);
        }
    }

    /// Task `t` has nothing to do but wait: whether its domain's policy has
    /// it give up its core now (the caller blocks it).
    pub(super) fn hint_wait_blocks(&mut self, t: TaskId) -> bool {
        let v = self.tasks[t].vcpu;
        let d = self.vcpus[v].domain;
        if !self.has_policy(d) {
            return false;
        }
        let intruder = self
            .vcpus
            .iter()
            .any(|x| x.domain != d && x.hv == HvState::Runnable);
        self.ask_policy(d, |p, page, first| p.on_wait(page, v - first, intruder))
            .unwrap_or(false)
    }

    /// vCPU `v` woke and the scheduler asks `tickle` to re-decide: cores
    /// running a vCPU of another domain that its policy shields keep it.
    pub(super) fn hint_filter_tickles(&mut self, v: VcpuId, tickle: &mut Vec<CoreId>) {
        let woken = self.vcpus[v].domain;
        let mut i = 0;
        while i < tickle.len() {
            let keep = match self.cores[tickle[i]].vcpu {
                Some(r) if self.vcpus[r].domain != woken => !self.hint_shields(r),
                _ => true,
            };
            if keep {
                i += 1;
            } else {
                tickle.swap_remove(i);
            }
        }
    }

    fn hint_shields(&mut self, r: VcpuId) -> bool {
        let d = self.vcpus[r].domain;
        self.ask_policy(d, |p, page, first| p.shields(page, r - first))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Phase::*;

    #[test]
    fn cosched_hands_over_the_first_synchronising_sibling() {
        let p = Cosched;
        assert_eq!(
            p.on_preempted(&[Descheduled, Computing, Synchronising, Synchronising], 0),
            Some(2)
        );
        assert_eq!(
            p.on_preempted(&[Descheduled, Computing, Halted, Computing], 0),
            None
        );
    }

    #[test]
    fn cosched_blocks_a_waiter_only_while_a_sibling_is_descheduled() {
        let p = Cosched;
        assert!(p.on_wait(&[Synchronising, Descheduled], 0, false));
        assert!(!p.on_wait(&[Synchronising, Computing, Halted], 0, false));
        // Its own state does not count.
        assert!(!p.on_wait(&[Descheduled], 0, false));
        // Another domain's vCPU waiting for a core does.
        assert!(p.on_wait(&[Synchronising, Computing], 0, true));
    }

    #[test]
    fn cosched_shields_computing_vcpus_only() {
        let p = Cosched;
        let page = [Computing, Synchronising, Halted];
        assert!(p.shields(&page, 0));
        assert!(!p.shields(&page, 1));
        assert!(!p.shields(&page, 2));
    }

    #[test]
    fn policies_are_found_by_name() {
        assert!(by_name("cosched").is_some());
        assert!(by_name("nope").is_none());
    }
}
