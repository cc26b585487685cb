//! One slicer's domains: which one runs, since when, and the switch rule.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::group::{Group, Scan, State};
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

/// While no domain is seen wanting a CPU, the poll interval doubles after
/// each idle slice up to this (the Python slicer's fixed interval), so that
/// a slicer whose domains all sleep does not switch 20 000 times a second.
pub const MAX_IDLE_POLL_NS: u64 = 200_000;

/// Counters that Python reads: slices per domain and switches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub slices: Vec<u64>,
    pub switches: u64,
    pub early_switches: u64,
    /// Of the early switches, those a watcher found idle (the rest, the poll).
    pub watched_switches: u64,
}

/// What a watcher found: see [`Queue::watch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// The running domain is idle: the slicer should switch now.
    Idle,
    /// A task of it wants the watcher's CPU: look again soon (the watcher
    /// runs again only when that task blocks).
    BusyHere,
    /// Nothing for this CPU (busy on others, or not work-conserving).
    Elsewhere,
}

/// A running slicer's state. Times are nanoseconds of CLOCK_MONOTONIC.
#[derive(Debug)]
pub struct Queue {
    groups: Vec<Group>,
    stride: Stride,
    slice_ns: u64,
    work_conserving: bool,
    poll_ns: u64,
    /// The poll interval now: `poll_ns`, or longer while every domain idles.
    interval_ns: u64,
    next_poll: u64,
    /// The running domain was seen wanting a CPU during this slice.
    seen_busy: bool,
    /// A watcher found the running domain idle (when): switch at the next tick.
    idle_hint: bool,
    hint_at: u64,
    log: Option<Vec<Switch>>,
    current: usize,
    started: u64,
    switches: u64,
    early_switches: u64,
    watched_switches: u64,
}

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
        Ok(Self {
            groups,
            stride,
            slice_ns,
            work_conserving: config.work_conserving,
            poll_ns,
            interval_ns: poll_ns,
            next_poll: 0,
            seen_busy: false,
            idle_hint: false,
            hint_at: 0,
            log: config.log.then(Vec::new),
            current: 0,
            started: 0,
            switches: 0,
            early_switches: 0,
            watched_switches: 0,
        })
    }

    /// Thaws the first domain, freezes the others; its slice starts `now`.
    pub fn begin(&mut self, now: u64) -> io::Result<()> {
        self.current = self.stride.next(None);
        for (i, group) in self.groups.iter().enumerate() {
            if i != self.current {
                group.set(State::Frozen)?;
            }
        }
        self.groups[self.current].set(State::Thawed)?;
        self.groups[self.current].refresh()?;
        self.stride.grant(self.current);
        self.started = now;
        self.next_poll = now.saturating_add(self.interval_ns);
        Ok(())
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
        if now < self.due() {
            return Ok(false);
        }
        // The next poll on a fixed grid: a late wake-up skips, never bunches.
        while self.next_poll <= now {
            self.next_poll = self.next_poll.saturating_add(self.interval_ns);
        }
        let expired = now.saturating_sub(self.started) >= self.slice_ns;
        let watched = !expired && self.work_conserving && self.idle_hint;
        let early =
            watched || (!expired && self.work_conserving && self.groups[self.current].idle()?);
        self.idle_hint = false;
        if !(expired || early) {
            self.seen_busy = true;
            self.interval_ns = self.poll_ns;
            return Ok(false);
        }
        if early && !self.seen_busy {
            self.interval_ns = (self.interval_ns * 2).min(MAX_IDLE_POLL_NS.max(self.poll_ns));
        }
        self.seen_busy = false;
        let next = self.stride.next(Some(self.current));
        let switched = next != self.current;
        if switched {
            self.groups[self.current].set(State::Frozen)?;
            self.groups[next].set(State::Thawed)?;
            if let Some(log) = self.log.as_mut().filter(|l| l.len() < LOG_LIMIT) {
                let decided = if watched { self.hint_at } else { now };
                let thawed = crate::driver::now_ns();
                log.push(Switch { decided, thawed });
            }
            self.groups[next].refresh()?;
            self.switches += 1;
            self.early_switches += u64::from(early);
            self.watched_switches += u64::from(watched);
        }
        self.stride.grant(next);
        self.current = next;
        self.started = now;
        self.next_poll = now.saturating_add(self.interval_ns);
        Ok(switched)
    }

    /// For a watcher on `cpu` (one thread per CPU that runs only when its CPU
    /// has nothing else to do): whether the running domain of a
    /// work-conserving slicer is idle, in which case the next tick switches
    /// at once, or where its runnable tasks are.
    pub fn watch(&mut self, cpu: usize) -> io::Result<Watch> {
        if !self.work_conserving || self.idle_hint {
            return Ok(Watch::Elsewhere);
        }
        let group = &mut self.groups[self.current];
        let Scan { runnable, cpus } = group.scan();
        if runnable {
            let here = cpu < 64 && cpus & (1 << cpu) != 0;
            return Ok(if here {
                Watch::BusyHere
            } else {
                Watch::Elsewhere
            });
        }
        // Idle as last listed: list again (a task may have joined) and look.
        group.refresh()?;
        if group.scan().runnable {
            return Ok(Watch::Elsewhere);
        }
        self.idle_hint = true;
        self.hint_at = crate::driver::now_ns();
        Ok(Watch::Idle)
    }

    /// Thaws every domain; the first error (a group removed under us) is
    /// returned after trying all.
    pub fn thaw_all(&self) -> io::Result<()> {
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

    pub fn work_conserving(&self) -> bool {
        self.work_conserving
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
        }
    }

    pub fn paths(&self) -> impl Iterator<Item = &std::path::Path> {
        self.groups.iter().map(Group::path)
    }
}
