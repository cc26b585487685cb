//! One slicer's domains: which one runs, since when, and the switch rule.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::group::{Group, State};
use crate::hints::{HintConfig, Hints};
use crate::pick::Stride;

/// What a slicer is asked to do.
#[derive(Debug, Clone)]
pub struct Config {
    /// The freezer groups (domains), in order: ties go to the earlier one.
    pub domains: Vec<PathBuf>,
    /// How long a domain runs before the next one gets the CPU.
    pub slice: Duration,
    /// Switch early when every task of the running domain is blocked.
    pub work_conserving: bool,
    /// Slices by weight (stride scheduling), else in turn.
    pub weights: Option<Vec<u64>>,
    /// How often a work-conserving slicer looks at its running domain.
    pub poll: Duration,
    /// Keep a log of the switches (see [`Switch`]), up to [`LOG_LIMIT`].
    pub log: bool,
    /// The first slice is this much shorter: per-CPU slicers of the per-vCPU
    /// mode are staggered so that their slices end at different instants, as
    /// Credit's per-core slices do (zero: no stagger).
    pub phase: Duration,
    /// The hint channel: switch as soon as every rank of the running domain
    /// says it waits (see [`crate::hints`]); None: /proc only.
    pub hints: Option<HintConfig>,
}

/// The most switches a slicer logs (16 bytes each).
pub const LOG_LIMIT: usize = 1 << 20;

/// One logged switch, in CLOCK_MONOTONIC nanoseconds: when the slicer knew
/// it had to switch (a watcher found the domain idle, or the tick that saw
/// it idle or its slice over) and when the next domain was thawed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub decided: u64,
    pub thawed: u64,
}

/// A watcher that finds the running domain idle although none of its tasks
/// got a CPU since it was thawed (every domain asleep: switching is of no
/// use) lets it keep the CPU this long first, doubling up to
/// [`IDLE_ROUND_MAX_NS`] while that goes on, so that a slicer whose domains
/// all sleep does not switch tens of thousands of times a second. A domain
/// whose task ran and blocked is switched away from at once.
pub const IDLE_ROUND_MIN_NS: u64 = 25_000;
pub const IDLE_ROUND_MAX_NS: u64 = 500_000;

/// Counters that Python reads: slices per domain and switches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub slices: Vec<u64>,
    pub switches: u64,
    pub early_switches: u64,
    /// Of the early switches, those a watcher found idle (the rest, the poll).
    pub watched_switches: u64,
    /// Of the early switches, those the hint channel asked for: made by the
    /// slicer (`hinted_switches`), or by the last rank to wait (`handovers`).
    pub hinted_switches: u64,
    pub handovers: u64,
    /// Co-scheduling: a domain's vCPU brought in on this CPU because its
    /// sibling waits for it in a collective.
    pub pulls: u64,
}

/// What a watcher may look at without the driver's lock: the running domain
/// of a work-conserving slicer, as of its slice number `seq`.
#[derive(Debug, Clone)]
pub struct View {
    pub seq: u64,
    pub tasks_file: PathBuf,
    pub tids: Vec<u32>,
    /// The tasks' CPU grants (schedstat) when the domain was thawed.
    pub runs_at_thaw: u64,
    /// If none of them has run since, not switched away from before this.
    pub idle_due: u64,
}

/// A running slicer's state. Times are nanoseconds of CLOCK_MONOTONIC.
#[derive(Debug)]
pub struct Queue {
    groups: Vec<Group>,
    stride: Stride,
    slice_ns: u64,
    phase_ns: u64,
    work_conserving: bool,
    poll_ns: u64,
    next_poll: u64,
    /// A watcher found the running domain idle (when): switch when due.
    idle_hint: bool,
    hint_at: u64,
    idle_round_ns: u64,
    runs_at_thaw: u64,
    /// Counts slices: a watcher's finding holds only for the slice it saw.
    seq: u64,
    log: Option<Vec<Switch>>,
    current: usize,
    started: u64,
    switches: u64,
    early_switches: u64,
    watched_switches: u64,
    hinted_switches: u64,
    handovers: u64,
    pulls: u64,
    hints: Option<Hints>,
    /// The running member's word in the hint file as last seen (see `sync`).
    cur_word: u32,
    /// Co-scheduling: the running member is kept (not yielded) until then,
    /// its sibling vCPU having been brought in for the collective it waits in.
    hold_until: u64,
}

/// Xen Credit's rate limit (`sched_ratelimit_us`, 1000 µs by default): a vCPU
/// runs at least this long before co-scheduling may take its CPU for another
/// domain's vCPU, and a member that brought its sibling in waits for it at
/// most this long before yielding.
pub const RATELIMIT_NS: u64 = 1_000_000;

impl Queue {
    /// Opens every group (an error names the first that cannot be) without
    /// changing any.
    pub fn open(config: &Config) -> io::Result<Self> {
        let stride = Stride::new(config.domains.len(), config.weights.clone())
            .map_err(|msg| io::Error::new(io::ErrorKind::InvalidInput, msg))?;
        let groups = config
            .domains
            .iter()
            .map(|p| Group::open(p))
            .collect::<io::Result<Vec<_>>>()?;
        let slice_ns = u64::try_from(config.slice.as_nanos()).unwrap_or(u64::MAX);
        let poll_ns = u64::try_from(config.poll.as_nanos()).unwrap_or(u64::MAX);
        if slice_ns == 0 || poll_ns == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the slice and the poll interval must be positive",
            ));
        }
        let hints = config.hints.as_ref().map(Hints::open).transpose()?;
        if let Some(h) = &config.hints {
            if h.members.len() != groups.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} hint members for {} domains",
                        h.members.len(),
                        groups.len()
                    ),
                ));
            }
        }
        Ok(Self {
            groups,
            stride,
            slice_ns,
            phase_ns: u64::try_from(config.phase.as_nanos())
                .unwrap_or(u64::MAX)
                .min(slice_ns),
            work_conserving: config.work_conserving,
            poll_ns,
            next_poll: 0,
            idle_hint: false,
            hint_at: 0,
            idle_round_ns: IDLE_ROUND_MIN_NS,
            runs_at_thaw: 0,
            seq: 0,
            log: config.log.then(Vec::new),
            current: 0,
            started: 0,
            switches: 0,
            early_switches: 0,
            watched_switches: 0,
            hinted_switches: 0,
            handovers: 0,
            pulls: 0,
            hints,
            cur_word: 0,
            hold_until: 0,
        })
    }

    /// Thaws the first domain, freezes the others; its slice starts `now`,
    /// less the phase.
    pub fn begin(&mut self, now: u64) -> io::Result<()> {
        self.current = self.stride.next(None);
        for (i, group) in self.groups.iter().enumerate() {
            if i != self.current {
                group.set(State::Frozen)?;
            }
        }
        self.groups[self.current].refresh()?;
        self.runs_at_thaw = self.groups[self.current].runs();
        self.groups[self.current].set(State::Thawed)?;
        self.stride.grant(self.current);
        self.started = now.saturating_sub(self.phase_ns);
        self.next_poll = now.saturating_add(self.poll_ns);
        if let Some(h) = &self.hints {
            h.begin(self.current, self.stride.next(Some(self.current)));
            self.cur_word = h.cur().0;
        }
        Ok(())
    }

    /// Catches up with switches the ranks made themselves (a hand-over to a
    /// parked member, runtime/hints.c): the member running now, the slices
    /// they granted, and the member their next yield hands over to. Whether
    /// the running member changed.
    fn sync(&mut self) -> io::Result<bool> {
        let Some(h) = &self.hints else {
            return Ok(false);
        };
        let (word, cur) = h.cur();
        if word == self.cur_word {
            return Ok(false);
        }
        self.cur_word = word;
        let Some(cur) = cur else {
            return Ok(false); // not a member of ours: a layout bug; ignore it
        };
        let mut made = 0u64;
        for i in 0..self.groups.len() {
            for _ in 0..h.take_granted(i) {
                self.stride.grant(i);
                made += 1;
            }
        }
        if cur == self.current && made == 0 {
            return Ok(false);
        }
        h.set_next(self.stride.next(Some(cur)));
        self.switches += made;
        self.early_switches += made;
        self.handovers += made;
        self.current = cur;
        self.seq += 1;
        self.started = h.since_ns().max(self.started);
        self.next_poll = self.started.saturating_add(self.poll_ns);
        self.hold_until = 0;
        self.runs_at_thaw = self.groups[cur].runs();
        self.groups[cur].refresh_stale(self.started)?;
        Ok(true)
    }

    /// Whether the hint channel says the running member idles now: Some(whether
    /// it can be parked rather than frozen).
    fn hinted(&self, now: u64) -> Option<bool> {
        let h = self.hints.as_ref()?;
        let idle = h.idle(self.current, self.cur_word);
        (idle.all && now >= self.hold_until).then_some(idle.parkable)
    }

    /// When this queue next needs looking at: the end of the slice, or with
    /// work conservation the next poll, whichever is first.
    pub fn due(&self) -> u64 {
        let end = self.started.saturating_add(self.slice_ns);
        if self.idle_hint {
            0
        } else if self.work_conserving {
            end.min(self.next_poll)
        } else {
            end
        }
    }

    /// Looks at the running domain at `now` if it is due: at the end of its
    /// slice, or (work-conserving) when it is idle, the next one gets the
    /// CPU. Returns whether the domain changed.
    pub fn tick(&mut self, now: u64) -> io::Result<bool> {
        let synced = self.sync()?;
        let hinted = self.hinted(now);
        if now < self.due() && hinted.is_none() {
            return Ok(synced);
        }
        // The next poll on a fixed grid: a late wake-up skips, never bunches.
        while self.next_poll <= now {
            self.next_poll = self.next_poll.saturating_add(self.poll_ns);
        }
        let expired = now.saturating_sub(self.started) >= self.slice_ns;
        let by_hint = !expired && hinted.is_some();
        // Co-scheduling holds the member for its sibling: no early switch then.
        let may = !expired && now >= self.hold_until && self.work_conserving;
        let watched = may && !by_hint && self.idle_hint;
        let early = by_hint || watched || (may && self.groups[self.current].idle()?);
        self.idle_hint = false;
        if !(expired || early) {
            return Ok(synced);
        }
        let next = self.stride.next(Some(self.current));
        let switched = next != self.current;
        if switched {
            // With hints, a member whose ranks all wait in the library's loop is
            // parked (they stop there by themselves), any other frozen.
            let park = by_hint && hinted == Some(true);
            if !self.leave(next, park)? {
                return Ok(true); // a rank switched first, or stopped waiting
            }
            // Counted while still frozen: none of its tasks can run yet.
            self.runs_at_thaw = self.groups[next].runs();
            self.enter(next)?;
            if let Some(log) = self.log.as_mut().filter(|l| l.len() < LOG_LIMIT) {
                let decided = if watched { self.hint_at } else { now };
                let thawed = crate::driver::now_ns();
                log.push(Switch { decided, thawed });
            }
            // Off the critical path unless stale: the thawed domain may be
            // waiting for this CPU (the switching watcher runs at SCHED_FIFO).
            self.groups[next].refresh_stale(now)?;
            self.switches += 1;
            self.early_switches += u64::from(early);
            self.watched_switches += u64::from(watched);
            self.hinted_switches += u64::from(by_hint);
        }
        self.stride.grant(next);
        self.current = next;
        self.seq += 1;
        self.started = now;
        self.next_poll = now.saturating_add(self.poll_ns);
        self.hold_until = 0;
        if let Some(h) = &self.hints {
            h.set_next(self.stride.next(Some(next)));
        }
        Ok(switched || synced)
    }

    /// Leaves the running member for `next`: parks it (`park`) or freezes it.
    /// With hints the switch is a compare-and-swap of the running member in
    /// the file; false if a rank made a switch first (caught up with at the
    /// next look), or, parking, if a rank stopped waiting meanwhile (then it
    /// keeps running: Dekker, as a rank that stores its state, then reads
    /// the running member).
    fn leave(&mut self, next: usize, park: bool) -> io::Result<bool> {
        let current = self.current;
        let Some(h) = &self.hints else {
            self.groups[current].set(State::Frozen)?;
            return Ok(true);
        };
        let was = self.cur_word;
        if !h.switch(was, next) {
            self.sync()?;
            return Ok(false);
        }
        self.cur_word = h.cur().0;
        if park && !h.idle(current, was).parkable {
            if h.switch(self.cur_word, current) {
                self.cur_word = h.cur().0;
            }
            h.make_runnable(current);
            self.sync()?;
            return Ok(false);
        }
        if !park {
            h.set_frozen(current, true);
            self.groups[current].set(State::Frozen)?;
        }
        Ok(true)
    }

    /// Runs member `next`: thawed if frozen, its parked ranks woken.
    fn enter(&mut self, next: usize) -> io::Result<()> {
        let Some(h) = &self.hints else {
            return self.groups[next].set(State::Thawed);
        };
        if h.frozen(next) {
            self.groups[next].set(State::Thawed)?;
            h.set_frozen(next, false);
        }
        h.make_runnable(next);
        Ok(())
    }

    /// Co-scheduling: the domain whose ranks on this queue's running member
    /// all wait, some in a collective, with none of them in a hold already.
    pub fn wants_sibling(&self, now: u64) -> Option<u32> {
        let h = self.hints.as_ref().filter(|h| h.cosched())?;
        let idle = h.idle(self.current, self.cur_word);
        (idle.all && idle.coll && now >= self.hold_until).then(|| h.domain(self.current))
    }

    /// Co-scheduling: runs this queue's member of `domain` now if it is not
    /// running and its ranks do not wait (they have not reached the
    /// collective), taking the CPU from the running member once that has run
    /// [`RATELIMIT_NS`]. Whether the member of `domain` runs here now and
    /// has yet to arrive (brought in, or running already).
    pub fn pull(&mut self, domain: u32, now: u64) -> io::Result<bool> {
        self.sync()?;
        let Some(h) = self.hints.as_ref() else {
            return Ok(false);
        };
        let Some(m) = h.member_of(domain) else {
            return Ok(false);
        };
        if h.waiting(m) {
            return Ok(false); // it waits too, for someone else
        }
        if m == self.current {
            return Ok(true);
        }
        if now.saturating_sub(self.started) < RATELIMIT_NS {
            return Ok(false);
        }
        let idle = h.idle(self.current, self.cur_word);
        let park = idle.parkable && idle.all;
        if !self.leave(m, park)? {
            return Ok(false);
        }
        self.runs_at_thaw = self.groups[m].runs();
        self.enter(m)?;
        self.groups[m].refresh_stale(now)?;
        self.switches += 1;
        self.pulls += 1;
        self.stride.grant(m);
        self.current = m;
        self.seq += 1;
        self.started = now;
        self.next_poll = now.saturating_add(self.poll_ns);
        if let Some(h) = &self.hints {
            h.set_next(self.stride.next(Some(m)));
        }
        Ok(true)
    }

    /// Co-scheduling: keeps the running member (its rank waits for the
    /// sibling just brought in) for at most [`RATELIMIT_NS`].
    pub fn hold(&mut self, now: u64) {
        self.hold_until = now.saturating_add(RATELIMIT_NS);
    }

    /// The hint file's doorbell word's owner, if this queue reads hints.
    pub fn hints(&self) -> Option<&Hints> {
        self.hints.as_ref()
    }

    /// The running domain for the watchers, if this slicer switches early.
    pub fn view(&self) -> Option<View> {
        self.work_conserving.then(|| View {
            seq: self.seq,
            tasks_file: self.groups[self.current].path().join("tasks"),
            tids: self.groups[self.current].tids(),
            runs_at_thaw: self.runs_at_thaw,
            idle_due: self.started.saturating_add(self.idle_round_ns),
        })
    }

    /// A watcher found the running domain of slice `seq` idle at `at`
    /// (`ran`: a task of it got a CPU since the thaw; if not, the watcher
    /// waited for the view's `idle_due` first): the next tick switches.
    /// Whether that slice is still the running one.
    pub fn hint(&mut self, seq: u64, at: u64, ran: bool) -> bool {
        if self.sync().unwrap_or(false) {
            return false; // a rank handed over meanwhile
        }
        if seq != self.seq || !self.work_conserving {
            return false;
        }
        if !self.idle_hint {
            self.idle_hint = true;
            self.hint_at = at;
            self.idle_round_ns = if ran {
                IDLE_ROUND_MIN_NS
            } else {
                (self.idle_round_ns * 2).min(IDLE_ROUND_MAX_NS)
            };
        }
        true
    }

    /// Thaws every domain; the first error (a group removed under us) is
    /// returned after trying all.
    pub fn thaw_all(&self) -> io::Result<()> {
        if let Some(h) = &self.hints {
            h.end(); // parked ranks go on too
        }
        let mut first = Ok(());
        for group in &self.groups {
            if let Err(e) = group.set(State::Thawed) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }

    /// The switches logged so far (empty unless [`Config::log`]).
    pub fn log(&self) -> &[Switch] {
        self.log.as_deref().unwrap_or_default()
    }

    pub fn stats(&self) -> Stats {
        Stats {
            slices: self.stride.slices().to_vec(),
            switches: self.switches,
            early_switches: self.early_switches,
            watched_switches: self.watched_switches,
            hinted_switches: self.hinted_switches,
            handovers: self.handovers,
            pulls: self.pulls,
        }
    }
}
