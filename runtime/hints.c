/* The hint channel: this rank's state in a page shared with the lab's slicer.
 *
 * A hypervisor sees only whether a vCPU runs; S0's revised library told Xen's
 * scheduler "I wait" with a yield hypercall, and S4's VT-ASOS streams the
 * application's phases to the hypervisor. Here the lab's per-rank wrapper names a
 * file under /dev/shm (VHPC_HINTS) holding one 4 KiB page per domain, and this
 * rank's slot in it (VHPC_HINT_DOMAIN, VHPC_HINT_SLOT). The rank stores its state
 * there (a plain store on the fast path, no system call); the slicer
 * (crates/vhpc-slicer/src/hints.rs) reads the states of the running domain's ranks.
 *
 * When the last rank of the running member (a domain, or with per-vCPU slicing a
 * vCPU) starts to wait, it yields (a paravirtual yield): if the slicer published
 * the member to hand over to and that member is parked (its ranks wait in this
 * library, not frozen), the rank makes the switch itself, as Xen runs its
 * scheduler on the yielding CPU inside the hypercall: one compare-and-swap of the
 * queue's running member and a futex wake of the next member's ranks. Otherwise it
 * rings the slicer's doorbell (a futex), and the slicer switches. A rank whose
 * member is not running stops in its wait (a futex wait on its member's word)
 * until the member runs again: that is what "parked" means, a descheduled vCPU.
 *
 * The layout (docs/runtime.md, "The hint channel"; hints.rs writes the same):
 *   page 0, the header: magic, version, bell (the doorbell futex), listening,
 *     flags, pages; queue q at 64 + 64 q: cur (generation << 8 | member), next,
 *     members, since_ns; member m at 1024 + 32 m: run (its futex word), queue,
 *     frozen, granted, domain, poll (1: its CPUs are no other member's of its
 *     queue, so a parked rank polls for its turn before it sleeps: see
 *     vw_hint_gate), sleepers (its ranks asleep on `run`).
 *   page 1 + d, domain d: slot s at 64 s: state, member + 1 (0: unused), pid,
 *     turn (the queue's `cur` word when the rank last ran: a wait counts for a
 *     yield only in the turn it was seen in, so that a member just given the CPU
 *     is not yielded before its ranks have run and looked). */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define HINT_MAGIC 0x544e4948u /* "HINT" */
#define HINT_VERSION 1u
#define SLOTS 64u
#define SLOT_BYTES 64u
#define QUEUES 15u
#define MEMBERS 96u
#define NO_MEMBER 0xffu
#define FLAG_HANDOVER 1u /* ranks may switch to a parked member themselves */
#define FLAG_COSCHED 2u  /* a collective's wait goes to the slicer (it may co-schedule) */
/* How long a parked rank whose CPUs are its member's alone polls for its turn
 * before it sleeps: KVM's default halt_poll_ns (200 us on x86,
 * Documentation/virt/kvm/halt-polling.rst), which is also the Linux guest's
 * cpuidle-haltpoll default (guest_halt_poll_ns, Documentation/virt/guest-halt-polling.rst). */
#define HALT_POLL_NS 200000u

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef struct {
    uint32_t magic, version, bell, listening, flags, pages;
} header;
typedef struct {
    uint32_t cur, next, members, pad;
    uint64_t since_ns;
} queue;
typedef struct {
    uint32_t run, queue, frozen, granted, domain, poll, sleepers, pad;
} member;
typedef struct {
    uint32_t state, member, pid, turn;
} slot;

uint32_t *vw_hint_slot;
int vw_hint_on;

static unsigned char *base;
static header *hdr;
static queue *myq;
static member *members_, *me;
static slot *page_slots; /* this rank's domain page */
static slot *my_slot;
static uint32_t my_member, now_state;

static void hints_fail(const char *what, const char *detail) {
    fprintf(stderr, "vhpc_wait: VHPC_HINTS='%s': %s%s%s\n", getenv("VHPC_HINTS"), what,
            detail ? ": " : "", detail ? detail : "");
    exit(2);
}

static unsigned env_index(const char *var, unsigned limit) {
    const char *v = getenv(var);
    if (!v) {
        fprintf(stderr, "vhpc_wait: VHPC_HINTS is set but %s is not\n", var);
        exit(2);
    }
    char *end;
    errno = 0;
    unsigned long x = *v && strspn(v, "0123456789") == strlen(v) ? strtoul(v, &end, 10) : ULONG_MAX;
    if (errno || x >= limit) {
        fprintf(stderr, "vhpc_wait: %s='%s' is not a whole number from 0 to %u\n", var, v,
                limit - 1);
        exit(2);
    }
    return (unsigned)x;
}

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    /* Shared (not FUTEX_PRIVATE_FLAG): the slicer and other ranks map the same file. */
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static uint32_t load(uint32_t *w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }

void vw_hints_init(void) {
    const char *path = getenv("VHPC_HINTS");
    if (!path || base) return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) hints_fail("cannot be opened", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)(2 * PAGE) || st.st_size % PAGE != 0)
        hints_fail("not a hint file", "its size is not a whole number of 4 KiB pages, at least 2");
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) hints_fail("cannot be mapped", strerror(errno));
    hdr = m;
    if (hdr->magic != HINT_MAGIC || hdr->version != HINT_VERSION)
        hints_fail("not a hint file", "wrong magic or version");
    if ((uint64_t)(hdr->pages + 1) * PAGE > (uint64_t)st.st_size)
        hints_fail("not a hint file", "it holds fewer pages than its header says");
    base = m;
    unsigned domain = env_index("VHPC_HINT_DOMAIN", hdr->pages);
    unsigned s = env_index("VHPC_HINT_SLOT", SLOTS);
    page_slots = (slot *)(base + PAGE * (1 + domain));
    members_ = (member *)(base + 1024);
    slot *mine = (slot *)((unsigned char *)page_slots + SLOT_BYTES * s);
    __atomic_store_n(&mine->pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
    now_state = VW_HINT_COMPUTE;
    __atomic_store_n(&mine->state, now_state, __ATOMIC_SEQ_CST);
    vw_hint_slot = &mine->state;
    my_slot = mine;
    /* The slicer assigns the slot to a member before the ranks start; without it
     * (no slicer, or none that acts on hints) the rank only publishes. */
    uint32_t assigned = load(&mine->member);
    if (assigned == 0 || assigned > MEMBERS) return;
    my_member = assigned - 1;
    me = &members_[my_member];
    uint32_t q = load(&me->queue);
    if (q >= QUEUES) return;
    myq = (queue *)(base + 64 + 64 * q);
    vw_hint_on = 1;
}

/* Whether this rank's member runs (or no slicer acts on the page any more). */
static int running(void) {
    return !load(&hdr->listening) || (load(&myq->cur) & 0xffu) == my_member;
}

/* The kind of a state word: waiting (or done) counts as idle for the slicer; with
 * `parkable`, a wait must be the library's own loop (it stops when descheduled). */
static int idle_state(uint32_t s, int parkable) {
    uint32_t kind = s & 0xfu;
    if (kind == VW_HINT_DONE) return 1;
    if (kind != VW_HINT_WAIT && kind != VW_HINT_COLL) return 0;
    return !parkable || (s & VW_HINT_PARKABLE);
}

/* Every slot of this rank's member waits, seen waiting in turn `cur` (seq_cst
 * loads: see vw_hint_enter); a rank woken for this turn that has yet to run and
 * look does not count as waiting. */
static int member_idle(int parkable, uint32_t cur) {
    for (unsigned i = 0; i < SLOTS; i++) {
        slot *s = (slot *)((unsigned char *)page_slots + SLOT_BYTES * i);
        if (load(&s->member) != my_member + 1) continue;
        uint32_t state = load(&s->state);
        if (!idle_state(state, parkable)) return 0;
        if ((state & 0xfu) != VW_HINT_DONE && load(&s->turn) != cur) return 0;
    }
    return 1;
}

/* This rank runs in turn `cur` of its queue: its waits count from now on. */
static void seen_turn(void) {
    __atomic_store_n(&my_slot->turn, load(&myq->cur), __ATOMIC_SEQ_CST);
}

static void ring(void) {
    __atomic_fetch_add(&hdr->bell, 1, __ATOMIC_SEQ_CST);
    futex(&hdr->bell, FUTEX_WAKE, 1, NULL);
}

/* The futex wake only when one of its ranks sleeps: a rank that polls for its
 * turn (vw_hint_gate) sees the bump. seq_cst on both sides (Dekker): the rank
 * counts itself asleep before it reads `run` and `cur` once more, so either it
 * sees the switch or the waker sees it asleep. */
static void make_runnable(member *m) {
    __atomic_fetch_add(&m->run, 1, __ATOMIC_SEQ_CST);
    if (load(&m->sleepers)) futex(&m->run, FUTEX_WAKE, INT_MAX, NULL);
}

/* The paravirtual yield made here: switch the queue to the member the slicer
 * published, if it is parked. The compare-and-swap of `cur` orders this against
 * the slicer and the member's other ranks; after it, the member's ranks are read
 * again (Dekker: a rank stores its state, then reads `cur`): one that stopped
 * waiting meanwhile takes the switch back. */
static int hand_over(void) {
    uint32_t c = load(&myq->cur), n = load(&myq->next);
    if ((c & 0xffu) != my_member || n >= MEMBERS || n == my_member) return 0;
    member *next = &members_[n];
    if (load(&next->frozen) || load(&next->queue) != load(&me->queue)) return 0;
    uint32_t to = (((c >> 8) + 1) << 8) | n;
    uint32_t was = c;
    if (!__atomic_compare_exchange_n(&myq->cur, &c, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return 0;
    if (!member_idle(1, was)) {
        uint32_t back = (((to >> 8) + 1) << 8) | my_member;
        __atomic_compare_exchange_n(&myq->cur, &to, back, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        make_runnable(me); /* a rank of ours that saw itself descheduled */
        return 0;
    }
    __atomic_store_n(&myq->since_ns, vw_now_ns(), __ATOMIC_RELEASE);
    __atomic_fetch_add(&next->granted, 1, __ATOMIC_SEQ_CST);
    /* With two members the next yield hands back; with more the slicer decides. */
    uint32_t count = load(&myq->members);
    __atomic_store_n(&myq->next, count == 2 ? my_member : NO_MEMBER, __ATOMIC_SEQ_CST);
    make_runnable(next);
    if (count != 2) ring();
    return 1;
}

/* Every rank of the member waits: the paravirtual yield, made here or asked of
 * the slicer. */
static void yield_member(void) {
    if (!vw_hint_on || !load(&hdr->listening)) return;
    uint32_t cur = load(&myq->cur);
    if (!member_idle(0, cur)) return;
    uint32_t flags = load(&hdr->flags);
    int to_slicer = (now_state & 0xfu) == VW_HINT_COLL && (flags & FLAG_COSCHED);
    if (!to_slicer && (flags & FLAG_HANDOVER) && member_idle(1, cur) && hand_over()) return;
    ring();
}

void vw_hint_enter(uint32_t kind) {
    if (!vw_hint_slot) return;
    now_state = kind | VW_HINT_PARKABLE;
    if (vw_hint_on) seen_turn();
    /* seq_cst: the store is ordered before the loads of the others' states below,
     * as theirs are before their loads of ours: the last of them to wait sees all. */
    __atomic_store_n(vw_hint_slot, now_state, __ATOMIC_SEQ_CST);
    yield_member();
}

/* Descheduled inside a wait, run again, and the wait is about to give up its spin
 * (the peer is not answering soon): what it waits for needs another member's turn
 * (per vCPU, a sibling vCPU waiting on the other CPU), so it yields again, as S0's
 * revised library yielded again after polling a while. Without it the member kept
 * the CPU until the slicer's next look: a resumed rank had already used its yield
 * at the wait's start, and the /proc watchers' view lags the ranks' hand-overs.
 * At once (at the first empty poll) it did not pay: MPICH's first poll after a
 * hand-over often finds nothing yet, and the CPU went back and forth. */
void vw_hint_resumed(void) {
    uint32_t kind = now_state & 0xfu;
    if (kind == VW_HINT_WAIT || kind == VW_HINT_COLL) yield_member();
}

/* Parked: the member is not running. A descheduled vCPU waits here.
 *
 * If the member's CPUs are its own within its queue (`poll`, from the slicer:
 * while it is parked, nothing of its queue runs there), the rank first polls for
 * its turn, up to HALT_POLL_NS, as KVM polls a halted vCPU's wake-up before it
 * lets the physical CPU sleep. Sleeping at once costs a cross-CPU wake-up from
 * idle at every hand-over: in this KVM guest, whose own halt polling is off
 * (guest_halt_poll_ns = 0), a futex hand-over between two CPUs takes about
 * 25 us against 2.3 us on one CPU and under 1 us polling (bench/futex_handover,
 * docs/lab.md, *The hint channel*): the whole of the two-CPU hinted ping-pong. A
 * member that shares a CPU with another member of its queue never polls: the
 * CPU is the running member's (polling there, with a sched_yield between polls,
 * was tried and made the one-CPU hand-overs erratic). */
int vw_hint_gate(void) {
    if (!vw_hint_on || running()) return 0;
    if (load(&me->poll)) {
        uint64_t start = vw_now_ns();
        for (unsigned i = 1;; i++) {
            if (running()) {
                seen_turn();
                return 1;
            }
            cpu_relax();
            if ((i & 63) == 0 && vw_now_ns() - start >= HALT_POLL_NS) break;
        }
    }
    for (;;) {
        __atomic_fetch_add(&me->sleepers, 1, __ATOMIC_SEQ_CST);
        uint32_t seen = load(&me->run);
        if (running()) {
            __atomic_fetch_sub(&me->sleepers, 1, __ATOMIC_SEQ_CST);
            seen_turn();
            return 1;
        }
        /* Woken when the member runs again; the timeout only bounds a lost wake-up. */
        struct timespec ts = {0, 10 * 1000 * 1000};
        futex(&me->run, FUTEX_WAIT, seen, &ts);
        __atomic_fetch_sub(&me->sleepers, 1, __ATOMIC_SEQ_CST);
    }
}

void vw_hint_leave(void) {
    if (!vw_hint_slot) return;
    now_state = VW_HINT_COMPUTE;
    __atomic_store_n(vw_hint_slot, now_state, __ATOMIC_SEQ_CST);
    /* Descheduled while the last poll completed: the program goes on only when
     * the member runs again, as a vCPU that yielded sees its message then. */
    (void)vw_hint_gate();
}

void vw_hint_sleeping(int asleep) {
    if (!vw_hint_slot) return;
    now_state = asleep ? now_state | VW_HINT_SLEEP : now_state & ~(uint32_t)VW_HINT_SLEEP;
    __atomic_store_n(vw_hint_slot, now_state, __ATOMIC_RELEASE);
}

void vw_hint_done(void) {
    vw_hint_store(VW_HINT_DONE);
}
