//! One domain: a cgroup v1 freezer group, frozen and thawed through a file
//! handle kept open, and whether any of its tasks wants a CPU.
//!
//! Listing a group's tasks (its `tasks` file) is the dearest read of a
//! switch: about 15 µs in a VM, against 2–7 µs for a task's stat, and a
//! kept-open `tasks` file cannot stand in (cgroup v1 reuses the list it built
//! for that open file). Tasks join a domain rarely (a launch, a new thread),
//! so a listing is reused for [`LISTING_TTL_NS`]: a task that joined since
//! may go unseen that long, and its domain may be switched away from once
//! as if idle.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How long a listing of a group's tasks is used before it is read again.
pub const LISTING_TTL_NS: u64 = 20_000_000;

/// A freezer group and the tasks in it as last listed.
#[derive(Debug)]
pub struct Group {
    path: PathBuf,
    state: File,
    /// When the tasks were last listed (CLOCK_MONOTONIC ns; 0: never).
    listed_at: u64,
    /// Each task's id and its `/proc/<tid>/stat`, open: read again with
    /// `pread`, no open or path lookup per poll.
    tasks: Vec<(u32, File)>,
    /// Each task's `/proc/<tid>/schedstat`, open (its third field counts the
    /// times the task got a CPU), in the order of `tasks`.
    sched: Vec<Option<File>>,
}

/// Freezer states written to `freezer.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Frozen,
    Thawed,
}

impl Group {
    /// Opens `path/freezer.state` for writing (an error if the group or the
    /// freezer is not there).
    pub fn open(path: &Path) -> io::Result<Self> {
        let state = OpenOptions::new()
            .write(true)
            .open(path.join("freezer.state"))
            .map_err(|e| with_path(e, &path.join("freezer.state")))?;
        Ok(Self {
            path: path.to_path_buf(),
            state,
            listed_at: 0,
            tasks: Vec::new(),
            sched: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `state` to the group's `freezer.state`. Freezing returns at
    /// once: the kernel stops the tasks (FREEZING, then FROZEN) on its own.
    pub fn set(&self, state: State) -> io::Result<()> {
        let text: &[u8] = match state {
            State::Frozen => b"FROZEN",
            State::Thawed => b"THAWED",
        };
        self.state
            .write_at(text, 0)
            .map(drop)
            .map_err(|e| with_path(e, &self.path.join("freezer.state")))
    }

    /// Lists the group's tasks again unless the listing is younger than
    /// [`LISTING_TTL_NS`] at `now`.
    pub fn refresh_stale(&mut self, now: u64) -> io::Result<()> {
        if self.listed_at != 0 && fresh(self.listed_at, now) {
            return Ok(());
        }
        self.refresh()
    }

    /// Lists the group's tasks again, keeping the open stat files of those
    /// still there.
    pub fn refresh(&mut self) -> io::Result<()> {
        self.listed_at = crate::driver::now_ns();
        let listing = read_tids(&self.path.join("tasks"))?;
        let mut old = std::mem::take(&mut self.tasks);
        let mut old_sched = std::mem::take(&mut self.sched);
        for tid in listing {
            if let Some(i) = old.iter().position(|(t, _)| *t == tid) {
                self.tasks.push(old.swap_remove(i));
                self.sched.push(old_sched.swap_remove(i));
            } else if let Ok(stat) = File::open(format!("/proc/{tid}/stat")) {
                self.tasks.push((tid, stat)); // else it has just exited
                self.sched
                    .push(File::open(format!("/proc/{tid}/schedstat")).ok());
            }
        }
        Ok(())
    }

    /// How many times the tasks as last listed got a CPU, all told.
    pub fn runs(&self) -> u64 {
        let mut buf = [0u8; 128];
        self.sched
            .iter()
            .flatten()
            .filter_map(|f| f.read_at(&mut buf, 0).ok().map(|n| pcount(&buf[..n])))
            .sum()
    }

    /// Whether a task of the group, as last listed, is running or waiting to
    /// run (state R in its stat), and on which CPUs (bit `c` for CPU `c` <
    /// 64, from the stat's `processor` field). A task that has exited counts
    /// as not runnable.
    pub fn scan(&self) -> Scan {
        scan(&self.tasks)
    }

    /// The ids of the tasks as last listed.
    pub fn tids(&self) -> Vec<u32> {
        self.tasks.iter().map(|(t, _)| *t).collect()
    }

    /// No task wants a CPU: the cached list says so, and so does a fresh
    /// listing (a task may have joined or forked since).
    pub fn idle(&mut self) -> io::Result<bool> {
        if self.scan().runnable {
            return Ok(false);
        }
        self.refresh()?;
        Ok(!self.scan().runnable)
    }
}

/// Whether a listing made at `at` may still be used at `now`.
fn fresh(at: u64, now: u64) -> bool {
    now.saturating_sub(at) < LISTING_TTL_NS
}

/// The task ids in a group's `tasks` file (an error names the file).
fn read_tids(tasks_file: &Path) -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string(tasks_file).map_err(|e| with_path(e, tasks_file))?;
    Ok(text
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect())
}

/// [`Group::scan`] over a list of tasks and their open stat files.
pub fn scan(tasks: &[(u32, File)]) -> Scan {
    let mut buf = [0u8; 512];
    let mut scan = Scan::default();
    for (_, stat) in tasks {
        let Ok(n) = stat.read_at(&mut buf, 0) else {
            continue;
        };
        if state_of(&buf[..n]) == Some(b'R') {
            scan.runnable = true;
            if let Some(cpu) = processor_of(&buf[..n]).filter(|&c| c < 64) {
                scan.cpus |= 1 << cpu;
            }
        }
    }
    scan
}

/// A thread's own open stat files (a seq_file is not to be read by two
/// threads at once), for tasks it learns of by id, and its last listing of
/// each group's tasks file (when, and the ids it held).
#[derive(Debug, Default)]
pub struct StatFiles(
    HashMap<u32, File>,
    HashMap<u32, File>,
    HashMap<PathBuf, (u64, Vec<u32>)>,
);

impl StatFiles {
    /// Whether any of `tids`, or of the tasks now listed in `tasks_file` when
    /// none of `tids` is, is runnable, and on which CPUs.
    pub fn scan(&mut self, tids: &[u32], tasks_file: &Path) -> Scan {
        let found = self.scan_tids(tids.iter().copied());
        if found.runnable {
            return found;
        }
        // Tasks that joined since `tids` was listed.
        let Some(listed) = self.listing(tasks_file) else {
            return found;
        };
        let new: Vec<u32> = listed
            .iter()
            .copied()
            .filter(|t| !tids.contains(t))
            .collect();
        let mut scan = self.scan_tids(new.into_iter());
        scan.last_cpus |= found.last_cpus;
        scan
    }

    /// The ids in `tasks_file`, read again when this thread's last listing
    /// of it is older than [`LISTING_TTL_NS`]; None if it cannot be read.
    fn listing(&mut self, tasks_file: &Path) -> Option<&Vec<u32>> {
        let now = crate::driver::now_ns();
        if !self
            .2
            .get(tasks_file)
            .is_some_and(|(at, _)| fresh(*at, now))
        {
            let ids = read_tids(tasks_file).ok()?;
            if self.2.len() > 4096 {
                self.2.clear();
            }
            self.2.insert(tasks_file.to_path_buf(), (now, ids));
        }
        self.2.get(tasks_file).map(|(_, ids)| ids)
    }

    /// How many times `tids` got a CPU, all told (see [`Group::runs`]).
    pub fn runs(&mut self, tids: &[u32]) -> u64 {
        let mut buf = [0u8; 128];
        tids.iter()
            .filter_map(|tid| {
                let file = match self.1.entry(*tid) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(File::open(format!("/proc/{tid}/schedstat")).ok()?)
                    }
                };
                file.read_at(&mut buf, 0).ok().map(|n| pcount(&buf[..n]))
            })
            .sum()
    }

    fn scan_tids(&mut self, tids: impl Iterator<Item = u32>) -> Scan {
        if self.0.len() > 4096 || self.1.len() > 4096 {
            self.0.clear(); // tasks come and go: forget the old ones now and then
            self.1.clear();
        }
        let mut buf = [0u8; 512];
        let mut scan = Scan::default();
        for tid in tids {
            let file = match self.0.entry(tid) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    match File::open(format!("/proc/{tid}/stat")) {
                        Ok(f) => e.insert(f),
                        Err(_) => continue,
                    }
                }
            };
            let Ok(n) = file.read_at(&mut buf, 0) else {
                self.0.remove(&tid);
                continue;
            };
            let cpu = processor_of(&buf[..n])
                .filter(|&c| c < 64)
                .map_or(0, |c| 1 << c);
            scan.last_cpus |= cpu;
            // Frozen tasks read as D: a domain being frozen by the driver is
            // not idle for a watcher (a task really in D is left to the poll).
            if state_of(&buf[..n]) == Some(b'D') {
                scan.runnable = true;
            }
            if state_of(&buf[..n]) == Some(b'R') {
                scan.runnable = true;
                scan.cpus |= cpu;
            }
        }
        scan
    }
}

/// What [`Group::scan`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scan {
    pub runnable: bool,
    /// The CPUs the runnable tasks were last on, one bit each (CPUs < 64).
    pub cpus: u64,
    /// The CPUs any of the tasks was last on.
    pub last_cpus: u64,
}

/// The state letter of a `/proc/<tid>/stat` line: after the last `)` (the
/// command name may hold any character) and one space.
fn state_of(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat.get(close + 2).copied()
}

/// The third field of a schedstat line: times the task got a CPU.
fn pcount(schedstat: &[u8]) -> u64 {
    std::str::from_utf8(schedstat)
        .ok()
        .and_then(|s| s.split_ascii_whitespace().nth(2)?.parse().ok())
        .unwrap_or(0)
}

/// The CPU a task last ran on: field 39 of its stat line, the 37th after
/// the state.
fn processor_of(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    rest.split_ascii_whitespace().nth(36)?.parse().ok()
}

fn with_path(err: io::Error, path: &Path) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_follows_the_last_parenthesis() {
        assert_eq!(state_of(b"42 (sh) S 1 42 42 0"), Some(b'S'));
        assert_eq!(state_of(b"42 (a) b) R 1 42"), Some(b'R'));
        assert_eq!(state_of(b"42 (trunc"), None);
        assert_eq!(state_of(b""), None);
    }

    #[test]
    fn pcount_is_the_third_schedstat_field() {
        assert_eq!(pcount(b"123456 789 42\n"), 42);
        assert_eq!(pcount(b"1 2"), 0);
    }

    #[test]
    fn the_processor_is_field_39() {
        let fields: Vec<String> = (4..=52).map(|i| i.to_string()).collect();
        let line = format!("42 (x) y) R {}", fields.join(" "));
        assert_eq!(processor_of(line.as_bytes()), Some(39));
        assert_eq!(processor_of(b"42 (x) R 1 2"), None);
    }

    #[test]
    fn this_thread_is_runnable_as_it_reads_its_own_stat() {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let stat = File::open(format!("/proc/{tid}/stat")).unwrap();
        let mut buf = [0u8; 512];
        let n = stat.read_at(&mut buf, 0).unwrap();
        assert_eq!(state_of(&buf[..n]), Some(b'R'));
        // pread again from the start: the same handle serves every poll.
        let n = stat.read_at(&mut buf, 0).unwrap();
        assert_eq!(state_of(&buf[..n]), Some(b'R'));
        let cpu = processor_of(&buf[..n]).unwrap();
        assert!(cpu < 4096);
    }

    #[test]
    fn a_missing_group_is_an_error_naming_it() {
        let err = Group::open(Path::new("/nonexistent/vhpc-group")).unwrap_err();
        assert!(err
            .to_string()
            .contains("/nonexistent/vhpc-group/freezer.state"));
    }
}
