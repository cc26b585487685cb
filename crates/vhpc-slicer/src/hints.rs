//! The hint channel, the slicer's side (libvhpc_wait's runtime/hints.c is
//! the ranks' side; docs/runtime.md, "The hint channel", has the layout).
//!
//! Each rank stores its state (computing, waiting, in a collective, done) in
//! its slot of its domain's page. A queue whose members (freezer groups: a
//! domain, or one vCPU of it) have slots reads them to know at once that
//! every rank of the running member waits: a paravirtual yield, instead of
//! waiting for a watcher to see the tasks blocked in /proc. The running
//! member of each queue is also in the file (`cur`), so that the last rank
//! to wait can switch to a *parked* member itself (see runtime/hints.c); the
//! queue then catches up ([`Hints::cur`], `Queue::sync`). A member is parked
//! when it was left because its ranks all waited in the library's loop:
//! they stop there (a futex wait on the member's `run` word) instead of being
//! frozen, and a futex wake resumes them, far cheaper than the freezer.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use vhpc_shmap::SharedFile;

pub const PAGE: usize = 4096;
pub const MAGIC: u32 = 0x544e_4948; // "HINT"
pub const VERSION: u32 = 1;
pub const SLOTS: u32 = 64;
pub const QUEUES: u32 = 15;
pub const MEMBERS: u32 = 96;
pub const NO_MEMBER: u32 = 0xff;
/// Ranks may switch to a parked member themselves.
pub const FLAG_HANDOVER: u32 = 1;
/// A wait in a collective goes to the slicer, which may co-schedule.
pub const FLAG_COSCHED: u32 = 2;

const KIND_WAIT: u32 = 2;
const KIND_COLL: u32 = 3;
const KIND_DONE: u32 = 4;
const PARKABLE: u32 = 0x20;

// A member's word: its parked ranks poll for their turn before they sleep.
const POLL: usize = 20;

// Header words (byte offsets).
const BELL: usize = 8;
const LISTENING: usize = 12;
const FLAGS: usize = 16;
const PAGES: usize = 20;

fn queue_at(q: u32) -> usize {
    64 + 64 * q as usize
}

fn member_at(m: u32) -> usize {
    1024 + 32 * m as usize
}

fn slot_at(page: u32, slot: u32) -> usize {
    PAGE * (1 + page as usize) + 64 * slot as usize
}

/// What a queue's slicer is told about the hint file.
#[derive(Debug, Clone, Default)]
pub struct HintConfig {
    /// The file (under /dev/shm), made by the lab with its header.
    pub file: PathBuf,
    /// This queue's index in the file (< [`QUEUES`]).
    pub queue: u32,
    /// Each member's index in the file (< [`MEMBERS`]), in the queue's order.
    pub members: Vec<u32>,
    /// Each member's ranks' slots, as (domain page, slot); empty for a member
    /// without ranks (the noise domain), which is never idle by hints.
    pub slots: Vec<Vec<(u32, u32)>>,
    /// Each member's domain (its page), for co-scheduling a domain's vCPUs.
    pub domains: Vec<u32>,
    /// Ranks may switch to a parked member themselves.
    pub handover: bool,
    /// Co-schedule a domain's vCPUs while its ranks wait in a collective.
    pub cosched: bool,
    /// Each member's CPUs (where its ranks may run), in the queue's order;
    /// empty (or an empty list for a member): not known. A member whose CPUs
    /// are known and shared with no other member of the queue gets its `poll`
    /// word set: its parked ranks poll for their turn before they sleep
    /// (runtime/hints.c, `vw_hint_gate`), since nothing of the queue runs on
    /// those CPUs meanwhile.
    pub cpus: Vec<Vec<u32>>,
}

/// Which members have CPUs of their own within the queue: known, and shared
/// with no other member (whose CPUs must be known too). With any list
/// missing, none (a member with unknown CPUs may share them).
pub fn own_cpus(cpus: &[Vec<u32>], members: usize) -> Vec<bool> {
    if cpus.len() != members || cpus.iter().any(Vec::is_empty) {
        return vec![false; members];
    }
    (0..members)
        .map(|i| {
            (0..members)
                .filter(|&j| j != i)
                .all(|j| cpus[i].iter().all(|c| !cpus[j].contains(c)))
        })
        .collect()
}

/// How the running member's ranks are, by their slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Idle {
    /// Every rank waits (or is done).
    pub all: bool,
    /// And every wait is the library's own loop: the member can be parked.
    pub parkable: bool,
    /// Some rank waits in a collective.
    pub coll: bool,
}

/// One queue's view of the hint file.
#[derive(Debug)]
pub struct Hints {
    file: Arc<SharedFile>,
    queue: u32,
    members: Vec<u32>,
    slots: Vec<Vec<usize>>,
    domains: Vec<u32>,
    cosched: bool,
}

fn invalid(file: &std::path::Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {what}", file.display()),
    )
}

impl Hints {
    /// Maps the file and checks the configuration against it; writes this
    /// queue's members and their slots' owners, and the flags.
    pub fn open(config: &HintConfig) -> io::Result<Self> {
        let file = Arc::new(SharedFile::open(&config.file)?);
        let bad = |what: String| invalid(&config.file, what);
        if file.len() < 2 * PAGE || file.len() % PAGE != 0 {
            return Err(bad(
                "not a hint file: not a whole number of pages, at least 2".into(),
            ));
        }
        if file.u32_at(0).load(SeqCst) != MAGIC || file.u32_at(4).load(SeqCst) != VERSION {
            return Err(bad("not a hint file: wrong magic or version".into()));
        }
        let pages = file.u32_at(PAGES).load(SeqCst);
        if (pages as usize + 1) * PAGE > file.len() {
            return Err(bad(format!(
                "its header says {pages} pages, more than it holds"
            )));
        }
        let n = config.members.len();
        if config.queue >= QUEUES {
            return Err(bad(format!("queue {} of at most {QUEUES}", config.queue)));
        }
        if config.slots.len() != n || config.domains.len() != n {
            return Err(bad(format!(
                "{n} members but {} slot lists and {} domains",
                config.slots.len(),
                config.domains.len()
            )));
        }
        if !config.cpus.is_empty() && config.cpus.len() != n {
            return Err(bad(format!(
                "{n} members but {} CPU lists",
                config.cpus.len()
            )));
        }
        if let Some(m) = config.members.iter().find(|&&m| m >= MEMBERS) {
            return Err(bad(format!("member {m} of at most {MEMBERS}")));
        }
        for &(page, slot) in config.slots.iter().flatten() {
            if page >= pages || slot >= SLOTS {
                return Err(bad(format!(
                    "slot {slot} of page {page}: the file has {pages} \
                    pages of {SLOTS} slots"
                )));
            }
        }
        let hints = Self {
            queue: config.queue,
            members: config.members.clone(),
            slots: config
                .slots
                .iter()
                .map(|s| s.iter().map(|&(p, k)| slot_at(p, k)).collect())
                .collect(),
            domains: config.domains.clone(),
            cosched: config.cosched,
            file,
        };
        let own = own_cpus(&config.cpus, n);
        for (i, &m) in hints.members.iter().enumerate() {
            hints.member_word(m, 4).store(hints.queue, SeqCst);
            hints.member_word(m, 12).store(0, SeqCst);
            hints.member_word(m, 16).store(hints.domains[i], SeqCst);
            hints.member_word(m, POLL).store(u32::from(own[i]), SeqCst);
            for &at in &hints.slots[i] {
                hints.file.u32_at(at + 4).store(m + 1, SeqCst);
            }
        }
        hints
            .queue_word(8)
            .store(u32::try_from(n).unwrap_or(u32::MAX), SeqCst);
        let flags = (u32::from(config.handover) * FLAG_HANDOVER)
            | (u32::from(config.cosched) * FLAG_COSCHED);
        hints.file.u32_at(FLAGS).fetch_or(flags, SeqCst);
        Ok(hints)
    }

    fn queue_word(&self, offset: usize) -> &AtomicU32 {
        self.file.u32_at(queue_at(self.queue) + offset)
    }

    fn member_word(&self, m: u32, offset: usize) -> &AtomicU32 {
        self.file.u32_at(member_at(m) + offset)
    }

    /// Starts acting on the file with local member `first` running and the
    /// others frozen (their ranks cannot be handed the CPU by another rank).
    pub fn begin(&self, first: usize, next: usize) {
        for i in 0..self.members.len() {
            self.set_frozen(i, i != first);
        }
        self.queue_word(0).store(self.members[first], SeqCst);
        self.set_next(next);
        self.file.u32_at(LISTENING).store(1, SeqCst);
    }

    /// Stops acting: ranks no longer stop when their member is not running.
    pub fn end(&self) {
        self.file.u32_at(LISTENING).store(0, SeqCst);
        for i in 0..self.members.len() {
            self.make_runnable(i);
        }
        self.ring();
    }

    /// The queue's running member as stored: (whole word, local index).
    pub fn cur(&self) -> (u32, Option<usize>) {
        let word = self.queue_word(0).load(SeqCst);
        let m = word & 0xff;
        (word, self.members.iter().position(|&x| x == m))
    }

    /// Switches the stored running member from `word` to local `to`; false if
    /// a rank changed it meanwhile.
    pub fn switch(&self, word: u32, to: usize) -> bool {
        let new = ((word >> 8).wrapping_add(1) << 8) | self.members[to];
        self.queue_word(0)
            .compare_exchange(word, new, SeqCst, SeqCst)
            .is_ok()
    }

    /// When the last rank hand-over happened (CLOCK_MONOTONIC ns).
    pub fn since_ns(&self) -> u64 {
        self.file.u64_at(queue_at(self.queue) + 16).load(SeqCst)
    }

    /// The member a rank's yield hands over to (None: ask the slicer).
    pub fn set_next(&self, next: usize) {
        self.queue_word(4).store(self.members[next], SeqCst);
    }

    /// Slices granted to local member `i` by rank hand-overs since last taken.
    pub fn take_granted(&self, i: usize) -> u32 {
        self.member_word(self.members[i], 12).swap(0, SeqCst)
    }

    pub fn frozen(&self, i: usize) -> bool {
        self.member_word(self.members[i], 8).load(SeqCst) != 0
    }

    pub fn set_frozen(&self, i: usize, frozen: bool) {
        self.member_word(self.members[i], 8)
            .store(u32::from(frozen), SeqCst);
    }

    /// Wakes local member `i`'s ranks parked in their wait.
    pub fn make_runnable(&self, i: usize) {
        let run = self.member_word(self.members[i], 0);
        run.fetch_add(1, SeqCst);
        let all = i32::MAX.unsigned_abs(); // the kernel reads the count as an int
        let _ = rustix::thread::futex::wake(run, rustix::thread::futex::Flags::empty(), all);
    }

    /// What local member `i`'s ranks are doing (a member without ranks: not
    /// idle), in turn `cur` (the queue's running-member word): a rank that
    /// has not run since that turn began (woken, not yet looked) does not
    /// count as waiting now.
    pub fn idle(&self, i: usize, cur: u32) -> Idle {
        let slots = &self.slots[i];
        if slots.is_empty() {
            return Idle::default();
        }
        let mut idle = Idle {
            all: true,
            parkable: true,
            coll: false,
        };
        for &at in slots {
            let state = self.file.u32_at(at).load(SeqCst);
            match state & 0xf {
                KIND_DONE => {}
                KIND_WAIT | KIND_COLL if self.file.u32_at(at + 12).load(SeqCst) == cur => {
                    idle.parkable &= state & PARKABLE != 0;
                    idle.coll |= state & 0xf == KIND_COLL;
                }
                _ => return Idle::default(),
            }
        }
        idle
    }

    /// Whether local member `i`'s ranks all wait, in any turn: they have
    /// nothing to do until something else runs.
    pub fn waiting(&self, i: usize) -> bool {
        let slots = &self.slots[i];
        !slots.is_empty()
            && slots.iter().all(|&at| {
                matches!(
                    self.file.u32_at(at).load(SeqCst) & 0xf,
                    KIND_WAIT | KIND_COLL | KIND_DONE
                )
            })
    }

    /// The doorbell the ranks ring, which the driver waits on.
    pub fn doorbell(&self) -> Doorbell {
        Doorbell(Arc::clone(&self.file))
    }

    fn ring(&self) {
        self.doorbell().ring();
    }

    pub fn cosched(&self) -> bool {
        self.cosched
    }

    /// Local member `i`'s domain (its page).
    pub fn domain(&self, i: usize) -> u32 {
        self.domains[i]
    }

    /// The local index of the member of `domain`, if this queue has one.
    pub fn member_of(&self, domain: u32) -> Option<usize> {
        self.domains.iter().position(|&d| d == domain)
    }
}

/// A hint file's doorbell: a futex word the ranks bump and wake; it keeps
/// the file mapped while the driver waits on it.
#[derive(Debug, Clone)]
pub struct Doorbell(Arc<SharedFile>);

impl Doorbell {
    fn word(&self) -> &AtomicU32 {
        self.0.u32_at(BELL)
    }

    /// The count of rings so far: read before looking, then [`Self::wait`]
    /// returns at once if a ring came in between (no lost wake-up).
    pub fn value(&self) -> u32 {
        self.word().load(SeqCst)
    }

    /// Waits for a ring after `seen`, at most `timeout`.
    pub fn wait(&self, seen: u32, timeout: Duration) {
        let ts = rustix::time::Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let flags = rustix::thread::futex::Flags::empty(); // shared: other processes ring
        let _ = rustix::thread::futex::wait(self.word(), flags, seen, Some(&ts));
    }

    pub fn ring(&self) {
        self.word().fetch_add(1, SeqCst);
        let _ = rustix::thread::futex::wake(self.word(), rustix::thread::futex::Flags::empty(), 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hint file of `pages` domain pages, as vhpc.host.hints writes it.
    fn file(name: &str, pages: u32) -> PathBuf {
        let path = std::env::temp_dir().join(format!("vhpc-hints-{name}-{}", std::process::id()));
        let mut bytes = vec![0u8; PAGE * (1 + pages as usize)];
        bytes[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&VERSION.to_le_bytes());
        bytes[20..24].copy_from_slice(&pages.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn config(path: &std::path::Path) -> HintConfig {
        HintConfig {
            file: path.to_path_buf(),
            queue: 0,
            members: vec![0, 1],
            slots: vec![vec![(0, 0), (0, 1)], vec![(1, 0)]],
            domains: vec![0, 1],
            handover: true,
            cosched: false,
            cpus: Vec::new(),
        }
    }

    fn set_state(h: &Hints, page: u32, slot: u32, state: u32) {
        h.file.u32_at(slot_at(page, slot)).store(state, SeqCst);
    }

    #[test]
    fn a_member_is_idle_when_every_rank_waits() {
        let path = file("idle", 2);
        let h = Hints::open(&config(&path)).unwrap();
        assert_eq!(h.idle(0, 0), Idle::default()); // not started: not idle
        set_state(&h, 0, 0, KIND_WAIT | PARKABLE);
        set_state(&h, 0, 1, 1); // computing
        assert!(!h.idle(0, 0).all);
        set_state(&h, 0, 1, KIND_COLL | PARKABLE | 0x10);
        assert_eq!(
            h.idle(0, 0),
            Idle {
                all: true,
                parkable: true,
                coll: true
            }
        );
        // Seen waiting in turn 0 only: in turn 0x100 they have yet to run and look.
        assert!(!h.idle(0, 0x100).all && h.waiting(0));
        set_state(&h, 0, 0, KIND_WAIT); // the MPI's own wait: idle, cannot be parked
        assert_eq!(
            h.idle(0, 0),
            Idle {
                all: true,
                parkable: false,
                coll: true
            }
        );
        set_state(&h, 0, 0, KIND_DONE);
        assert!(h.idle(0, 0).all && h.idle(0, 0).parkable);
        // the slots were given to their members (member index + 1)
        assert_eq!(h.file.u32_at(slot_at(1, 0) + 4).load(SeqCst), 2);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn the_running_member_switches_by_compare_and_swap() {
        let path = file("cur", 2);
        let h = Hints::open(&config(&path)).unwrap();
        h.begin(0, 1);
        let (word, cur) = h.cur();
        assert_eq!(cur, Some(0));
        assert!(h.frozen(1) && !h.frozen(0));
        assert!(h.switch(word, 1));
        assert!(!h.switch(word, 0)); // stale: someone switched since
        let (word2, cur2) = h.cur();
        assert_eq!((word2 >> 8, cur2), (1, Some(1)));
        h.end();
        assert_eq!(h.file.u32_at(LISTENING).load(SeqCst), 0);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_member_polls_only_on_cpus_no_other_member_of_its_queue_uses() {
        // two-cpus: one rank per CPU, both sliced: each polls while parked
        assert_eq!(own_cpus(&[vec![0], vec![1]], 2), vec![true, true]);
        // one-cpu: both on CPU 1, the running member's CPU: neither polls
        assert_eq!(own_cpus(&[vec![1], vec![1]], 2), vec![false, false]);
        // a gang domain on [0, 1] beside one on [1]: they share CPU 1
        assert_eq!(
            own_cpus(&[vec![0, 1], vec![1], vec![2]], 3),
            vec![false, false, true]
        );
        // CPUs not known (for one member, or at all): nobody polls
        assert_eq!(own_cpus(&[vec![0], vec![]], 2), vec![false, false]);
        assert_eq!(own_cpus(&[], 2), vec![false, false]);

        let path = file("poll", 2);
        let mut c = config(&path);
        c.cpus = vec![vec![0], vec![1]];
        let h = Hints::open(&c).unwrap();
        assert_eq!(h.member_word(0, POLL).load(SeqCst), 1);
        assert_eq!(h.member_word(1, POLL).load(SeqCst), 1);
        c.cpus = vec![vec![0]];
        let err = Hints::open(&c).unwrap_err().to_string();
        assert!(err.contains("2 members but 1 CPU lists"), "{err}");
        c.cpus = vec![vec![1], vec![1]];
        let h = Hints::open(&c).unwrap();
        assert_eq!(h.member_word(0, POLL).load(SeqCst), 0);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_configuration_beyond_the_file_is_refused_naming_it() {
        let path = file("bad", 1);
        let err = Hints::open(&config(&path)).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(
            err.contains("slot 0 of page 1: the file has 1 pages"),
            "{err}"
        );
        std::fs::write(&path, vec![0u8; 2 * PAGE]).unwrap();
        let err = Hints::open(&config(&path)).unwrap_err().to_string();
        assert!(err.contains("wrong magic or version"), "{err}");
        std::fs::remove_file(path).unwrap();
    }
}
