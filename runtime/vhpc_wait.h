/* libvhpc_wait: internal interfaces shared by the interception layers.
 *
 * Every blocking MPI call is either passed straight to the MPI's own blocking
 * call (adaptive, when no rank needs to give its CPU away) or started as the
 * nonblocking equivalent and completed by vw_wait(), which polls with the
 * configured policy. See docs/runtime.md for the algorithm. */
#ifndef VHPC_WAIT_H
#define VHPC_WAIT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* The MPI entry points the library defines (MPI_Send, mpi_send_...) are not C
 * functions: each is an assembly trampoline, generated at build time from the
 * vw_entry_* functions (runtime/trampolines.sh), that jumps to vw_entry_<name>
 * while this process runs the MPI the library was built for, and to the process's
 * own <name> otherwise, arguments untouched whatever their types (route.c).
 * VW_C_ENTRY(MPI_Send) defines the library's own MPI_Send, checked against the
 * MPI's prototype; VW_F_ENTRY(mpi_send_) a Fortran one, VW_F_ALIAS another name of
 * it (gfortran's manglings). */
#define VW_C_ENTRY(name)                                                         \
    __attribute__((visibility("hidden"))) extern __typeof__(name) vw_entry_##name; \
    int vw_entry_##name
#define VW_F_ENTRY(name) __attribute__((visibility("hidden"))) void vw_entry_##name
#define VW_F_ALIAS(name, other)                                                   \
    extern __typeof__(vw_entry_##name) vw_entry_##other                           \
        __attribute__((alias("vw_entry_" #name), visibility("hidden")))

/* Internal symbols are hidden: calls between our files then skip the PLT, which
 * matters on the pass-through path (a few ns per MPI call). */
#pragma GCC visibility push(hidden)

typedef enum { VW_SPIN, VW_YIELD, VW_SLEEP, VW_ADAPTIVE } vw_policy;

/* VHPC_COLLECTIVES: how blocking collectives run (see vw_coll_blocking). */
typedef enum { VW_COLL_AUTO, VW_COLL_BLOCKING, VW_COLL_NONBLOCKING } vw_collectives;

/* What adaptive currently believes about this process's CPUs. */
typedef enum {
    VW_MODE_OWN_CPU,   /* nobody else wants our CPU: the MPI's own busy-poll is best */
    VW_MODE_SHARED,    /* runnable peers share our CPU: hand it over with sched_yield */
    VW_MODE_TIMESHARED /* CPU taken away by something a yield cannot reach: spin, then sleep */
} vw_mode;

/* Per-thread counters; summed at MPI_Finalize. */
typedef struct vw_thread {
    uint64_t calls, native, polls, yields, sleeps, waited_ns;
    uint64_t slept_ns; /* time asleep in our waits: the off-CPU time we explain */
    uint64_t rings, woken; /* doorbell: ranks this thread woke; its sleeps a ring cut short */
    /* wall time in the blocking calls of an MPI that sleeps in them (vw_native_sleeps):
     * off-CPU time the MPI explains, as slept_ns is ours */
    uint64_t native_idle_ns;
    /* adaptive spin budget learning (TIMESHARED) */
    uint64_t spin_budget_ns;
    unsigned spin_won, spin_lost;
    /* call counter gating the cheap evidence check on the native fast path */
    unsigned gate;
    /* set while a Fortran entry point runs the MPI's own call, which (MPICH) may
     * come back through our C wrappers: that call is already counted and decided */
    int in_fortran;
    /* the program's own MPI_Test/MPI_Iprobe calls that found nothing, in a row */
    unsigned idle_polls;
    /* set inside vw_wait: its own loop decides when to yield (ucx.c stays out) */
    int in_wait;
    /* set while a collective's twin is completed (vw_complete): the hint page says so */
    int in_coll;
    struct vw_thread *next;
} vw_thread;

typedef struct {
    vw_policy policy;
    vw_collectives collectives;
    int stats, verbose;
    int mpi_yield; /* VHPC_MPI_YIELD: adaptive may switch on the MPI's own idle-yield */
    uint64_t spin_ns, spin_min_ns, sleep_min_ns, sleep_max_ns, sample_ns;
    long timerslack_ns;
} vw_config;

extern vw_config vw_cfg;
/* Blocking collectives go to the MPI's own blocking call. Decided once at MPI_Init
 * for the whole job (every rank the same: a blocking collective never matches a
 * nonblocking one on another rank) and constant afterwards. */
extern int vw_coll_blocking;
extern int vw_world_rank; /* for messages; set at MPI_Init */
extern volatile int vw_mode_now; /* a vw_mode; read racily on the fast path, by design */
/* Blocking calls go straight to the MPI: own_cpu, or shared while the MPI yields
 * by itself (mpi_yield.c). Read racily on the fast path, by design. */
extern volatile int vw_native_now;
/* The MPI's own blocking calls sleep in the kernel while idle (Intel MPI's wait
 * mode): their time is neither CPU time nor run-queue delay, so the evidence must
 * not take it for being held off (evidence.c). Set at MPI_Init. */
extern int vw_native_sleeps;
/* The fast path looks at the coarse clock (4 ns, vs 18 ns for the precise one)
 * for a due sample on calls where (count & gate) is 0: every 8th call, or every
 * call while timeshared or while the evidence is young, where a call may last a
 * 30 ms slice. */
extern volatile unsigned vw_sample_gate;
/* A stretch of polls this long means being held off (frozen, preempted). */
#define VW_HELD_OFF_NS 1000000u
/* A sleep that overran its request by more than this was held off for the excess:
 * a freezer or hypervisor that ran the peer meanwhile kept us out for the peer's
 * turn (100-200 µs when the peer soon waits in turn). Timer and wake-up latency
 * stay below it on average (17 µs for a 1 µs sleep, 36 µs for 1 ms in a KVM
 * guest, `vhpc calibrate`'s sleep_slack_1us), and held off counts only above
 * 10 % of a sampling interval. */
#define VW_SLEEP_LATE_NS 50000u

/* initial-exec TLS: the library is loaded at start-up (LD_PRELOAD), so the fast
 * path can read its thread state without a __tls_get_addr call. */
extern __thread vw_thread *vw_tls_self __attribute__((tls_model("initial-exec")));
vw_thread *vw_new_thread(void);
static inline vw_thread *vw_self(void) {
    vw_thread *t = vw_tls_self;
    return __builtin_expect(t != NULL, 1) ? t : vw_new_thread();
}
uint64_t vw_now_ns(void);
uint64_t vw_coarse_ns(void); /* CLOCK_MONOTONIC_COARSE: a few ms resolution, cheap */
uint64_t vw_cpu_ns(void);    /* this thread's CPU time: a system call, not the vDSO */
const char *vw_policy_name(vw_policy p);
const char *vw_mode_name(vw_mode m);

/* route.c: VW_ROUTE_OWN (0) while the library intercepts, read by the trampolines. */
extern int vw_route;
void vw_route_decide(void *caller);

/* Lifecycle: called by the MPI_Init* / MPI_Finalize wrappers (C and Fortran). */
void vw_read_config(void);
void vw_after_init(void);
void vw_before_finalize(void);

/* adaptive: re-read the evidence if the sampling interval has passed (`now`: coarse). */
void vw_maybe_sample(uint64_t now);
void vw_evidence_init(void);
/* In a cgroup v1 freezer group below the root, other than vhpc's tracking group: a
 * time slicer or a container pause may stop the process (wait.c). */
int vw_in_freezer_group(void);

/* The MPI's own idle-yield switch (mpi_yield.c). */
int vw_mpi_yield_init(void);
void vw_mpi_yield_set(int on);
/* The MPI's blocking calls, collectives too, block while idle (Intel MPI's wait mode):
 * on a shared CPU they need no twin and no loop of ours. */
int vw_mpi_waits_idle(void);
/* The MPI's progress loop runs through the library's ucp_worker_progress (ucx.c),
 * which hands a shared CPU over inside the MPI's own blocking calls. */
int vw_ucx_hooked(void);

/* Fast-path decision: count the call and say whether to use the MPI's own
 * blocking call. Kept inline: it runs on every intercepted call. */
/* hints.c: set while a hint-driven slicer may act on this rank's page. */
extern int vw_hint_on;
static inline int vw_take_native(vw_thread *t) {
    if (__builtin_expect(t->in_fortran, 0)) return 1;
    t->calls++;
    if (vw_cfg.policy != VW_ADAPTIVE) return 0;
    /* Under a hint-driven slicer every wait is the library's: only there can the
     * rank stop when its member is descheduled (parked), instead of being frozen. */
    if (__builtin_expect(vw_hint_on, 0)) return 0;
    if ((++t->gate & vw_sample_gate) == 0) vw_maybe_sample(vw_coarse_ns());
    if (__builtin_expect(!vw_native_now, 0)) return 0;
    t->native++;
    return 1;
}

/* ---- the hint channel (hints.c, docs/runtime.md "The hint channel") ----
 * With VHPC_HINTS set (by the lab's per-rank wrapper), the rank publishes its state
 * in its slot of a shared page of its domain, and a hint-driven slicer acts on it.
 * The state word: a kind in the low 4 bits, flags above. */
enum {
    VW_HINT_NONE = 0,    /* not started (or before MPI_Init) */
    VW_HINT_COMPUTE = 1, /* running the program's own code */
    VW_HINT_WAIT = 2,    /* waiting in a blocking MPI call */
    VW_HINT_COLL = 3,    /* waiting in a collective */
    VW_HINT_DONE = 4,    /* past MPI_Finalize, exiting */
    VW_HINT_SLEEP = 0x10,   /* asleep in the wait (else spinning or yielding) */
    VW_HINT_PARKABLE = 0x20 /* in the library's wait loop: stops when descheduled */
};
/* This rank's state word in the page; NULL without VHPC_HINTS (the usual case). */
extern uint32_t *vw_hint_slot;
/* A plain store on the fast path (native calls); the wait loop's own transitions
 * go through vw_hint_enter / vw_hint_leave. */
static inline void vw_hint_store(uint32_t state) {
    if (__builtin_expect(vw_hint_slot != NULL, 0))
        __atomic_store_n(vw_hint_slot, state, __ATOMIC_RELEASE);
}
/* A native blocking call's span: the hint page says `hint` during it; with
 * VHPC_STATS its duration counts as waited; where the MPI sleeps in its calls, its
 * wall time is off-CPU time the MPI explains (native_idle_ns). A call a Fortran
 * entry point runs is timed there (F_RUN_NATIVE), not again here. */
typedef struct { uint64_t stats_t0, idle_t0; } vw_native_span;
static inline vw_native_span vw_native_begin(const vw_thread *t, uint32_t hint) {
    int timed = !t->in_fortran && (vw_cfg.stats || vw_native_sleeps);
    uint64_t now = timed ? vw_now_ns() : 0;
    vw_native_span s = {vw_cfg.stats ? now : 0, vw_native_sleeps ? now : 0};
    vw_hint_store(hint);
    return s;
}
static inline void vw_native_end(vw_thread *t, vw_native_span s) {
    vw_hint_store(VW_HINT_COMPUTE);
    if (!s.stats_t0 && !s.idle_t0) return;
    uint64_t now = vw_now_ns();
    if (s.idle_t0) t->native_idle_ns += now - s.idle_t0;
    if (s.stats_t0) t->waited_ns += now - s.stats_t0;
}
void vw_hints_init(void);              /* at MPI_Init: map the page VHPC_HINTS names */
void vw_hint_enter(uint32_t kind);     /* a wait of the library's begins (kind WAIT or COLL) */
void vw_hint_leave(void);              /* it ended: COMPUTE, and stop here if descheduled */
void vw_hint_sleeping(int asleep);     /* the SLEEP flag around a sleep of the wait */
int vw_hint_gate(void);                /* before a poll: stop here while descheduled (1: did) */
void vw_hint_resumed(void);            /* run again in a wait that is about to stop spinning */
void vw_hint_done(void);               /* MPI_Finalize reached */

/* A test function: completes (or probes) something, sets *done. */
typedef int (*vw_test_fn)(void *ctx, int *done);
int vw_wait(vw_test_fn test, void *ctx);

/* Completion of requests with the policy; same results as MPI_Wait* would give
 * (complete.c says how). */
int vw_wait_one(MPI_Request *req, MPI_Status *status);
int vw_wait_all(int n, MPI_Request reqs[], MPI_Status statuses[]);
int vw_wait_any(int n, MPI_Request reqs[], int *index, MPI_Status *status);
int vw_wait_some(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]);
int vw_probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int vw_mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *status);
/* Windows (rma.c): remember the communicator a window was made on; wait for every
 * rank of the window's group before a fence or a free. */
void vw_win_remember(MPI_Win win, MPI_Comm comm);
int vw_win_arrive(MPI_Win win);

/* Generalized requests, which Waitall must not poll (complete.c). vw_greq_add
 * records one started; a call that may free requests takes a snapshot of their
 * handles first (nothing when none is tracked) and forgets those it freed. */
void vw_greq_add(MPI_Request r);
int vw_greq_any(void);
typedef struct { MPI_Request *before, local[64]; int n; } vw_greq_snapshot;
void vw_greq_snap(vw_greq_snapshot *s, int n, const MPI_Request reqs[]);
void vw_greq_forget(vw_greq_snapshot *s, const MPI_Request after[]);
int vw_sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag,
                        int source, int recvtag, MPI_Comm comm, MPI_Status *status);

/* Complete a nonblocking collective: MPI_Wait (the MPI's own busy-poll) when
 * `native`, else the policy. Where collectives are started nonblocking, they are
 * on every rank whatever its mode: ranks may be in different modes. */
int vw_complete(vw_thread *t, int native, MPI_Request *req, MPI_Status *st);
void vw_proc_null_status(MPI_Status *st);

/* A call with no peer (MPI_PROC_NULL): nothing to wait for, so the MPI's own call,
 * with its own checks; counted as a native call. */
#define VW_NO_PEER(native_call)                                          \
    do {                                                                 \
        vw_thread *t_ = vw_self();                                       \
        if (!t_->in_fortran) t_->calls++, t_->native++;                  \
        return (native_call);                                            \
    } while (0)

/* Where adaptive says so, the MPI's own blocking call (counted, timed: vw_native_begin);
 * else the wrapper goes on to the library's wait. */
#define VW_NATIVE_OR_WAIT(native_call)                                   \
    do {                                                                 \
        vw_thread *t_ = vw_self();                                       \
        if (vw_take_native(t_)) {                                        \
            vw_native_span s_ = vw_native_begin(t_, VW_HINT_WAIT);       \
            int r_ = (native_call);                                      \
            vw_native_end(t_, s_);                                       \
            return r_;                                                   \
        }                                                                \
    } while (0)

/* After a program's own MPI_Test or MPI_Iprobe: a program that polls in a loop
 * busy-polls as the MPI's blocking calls do. Under adaptive, while runnable peers
 * share our CPU, each unsuccessful poll past VW_POLL_IDLE in a row hands it over
 * (sched_yield), as our waits do; a successful one restarts the count. */
enum { VW_POLL_IDLE = 16 };
/* The job's doorbell (doorbell.c): sleeping ranks a rank with an idle CPU can wake. */
void vw_bell_init(int world_rank); /* at MPI_Init, collective: map the file VHPC_DOORBELL names */
int vw_bell_sleep(uint64_t ns);    /* sleep on it for at most ns: 0 without a doorbell,
                                      1 slept, 2 woken by a ring */
unsigned vw_bell_ring(void);       /* wake every rank asleep on it; how many were */

void vw_yield_now(void);
static inline void vw_after_poll(int found) {
    vw_thread *t = vw_self();
    if (t->in_wait) return;
    if (found) {
        t->idle_polls = 0;
        return;
    }
    if (vw_cfg.policy == VW_ADAPTIVE && vw_mode_now == VW_MODE_SHARED &&
        ++t->idle_polls > VW_POLL_IDLE)
        vw_yield_now();
}

/* Whether the process's MPI exports `sym`, looked up once (route.c) and cached in
 * `has_<sym>` (-1: not yet). */
int vw_resolves(const char *name);
#define VW_RESOLVES(sym)                                                  \
    (__builtin_expect(has_##sym >= 0, 1) ? has_##sym : (has_##sym = vw_resolves(#sym)))

/* A blocking call made of its nonblocking twin (`start_call` sets req_) and a
 * wait; the caller returns with its result. */
#define START_AND_WAIT(start_call, status)                               \
    do {                                                                 \
        MPI_Request req_;                                                \
        int rc_ = (start_call);                                          \
        if (rc_ != MPI_SUCCESS) return rc_;                              \
        return vw_wait_one(&req_, status);                               \
    } while (0)

static inline int vw_is_inter(MPI_Comm comm) {
    int inter = 0;
    return comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && inter;
}

/* The blocking collective itself, counted as a native call. */
#define VW_NATIVE_COLLECTIVE(t_, blocking_call)                          \
    do {                                                                 \
        if (__builtin_expect(t_->in_fortran, 0)) return (blocking_call); \
        t_->calls++, t_->native++;                                       \
        vw_native_span s_ = vw_native_begin(t_, VW_HINT_COLL);           \
        int rc_ = (blocking_call);                                       \
        vw_native_end(t_, s_);                                           \
        return rc_;                                                      \
    } while (0)

/* A blocking collective: the MPI's own call where collectives stay blocking, or
 * where `to_mpi` holds; else its nonblocking twin completed by vw_complete. For
 * those without a communicator of their own (file, neighbourhood); the others
 * use VW_COLLECTIVE_ON. */
#define VW_COLLECTIVE(blocking_call, start_call, status, to_mpi)         \
    do {                                                                 \
        vw_thread *t_ = vw_self();                                       \
        if (vw_coll_blocking || (to_mpi)) VW_NATIVE_COLLECTIVE(t_, blocking_call); \
        int native_ = vw_take_native(t_);                                \
        MPI_Request req_;                                                \
        int rc_ = (start_call);                                          \
        return rc_ != MPI_SUCCESS ? rc_ : vw_complete(t_, native_, &req_, status); \
    } while (0)

/* shadow.c: the private communicator the library's collectives on `comm` run on,
 * made at the first one (`comm` itself when it cannot be made; MPI_COMM_NULL for an
 * inter-communicator, whose collectives stay the MPI's own); the program's error
 * handler called for an error there; a private communicator of `comm`'s group
 * (malloc'ed, NULL on failure) and its free. */
MPI_Comm vw_shadow(MPI_Comm comm);
int vw_revoked(MPI_Comm comm); /* ULFM's MPIX_Comm_is_revoked, where the MPI has it */
int vw_raise(MPI_Comm comm, int rc);
MPI_Comm *vw_private_comm(MPI_Comm comm);
int vw_private_free(MPI_Comm *comm);
/* A communicator the program just made, its ranks together: its library
 * communicator made now, where collectives are turned into twins. */
void vw_made(MPI_Comm comm);

/* A blocking collective on `comm`: as VW_COLLECTIVE, its twin started on
 * vw_shadow(comm) (`start_call` names it shadow_). On an inter-communicator it stays
 * the MPI's own, which every rank of both groups sees alike (MPICH 4.0's
 * nonblocking collectives on one hung mpi4py's test_cco_*_inter). */
#define VW_COLLECTIVE_ON(comm, blocking_call, start_call, status)        \
    do {                                                                 \
        vw_thread *t_ = vw_self();                                       \
        if (vw_coll_blocking || vw_revoked(comm)) VW_NATIVE_COLLECTIVE(t_, blocking_call); \
        MPI_Comm shadow_ = vw_shadow(comm);                              \
        if (shadow_ == MPI_COMM_NULL) VW_NATIVE_COLLECTIVE(t_, blocking_call); \
        int native_ = vw_take_native(t_);                                \
        MPI_Request req_;                                                \
        int rc_ = (start_call);                                          \
        if (rc_ == MPI_SUCCESS) rc_ = vw_complete(t_, native_, &req_, status); \
        return shadow_ == (comm) ? rc_ : vw_raise(comm, rc_);            \
    } while (0)

/* Before a collective that has no nonblocking twin: wait, the library's way, in an
 * MPI_Ibarrier on vw_shadow(comm) until every rank has arrived. Only where blocking
 * collectives are turned into twins (the same decision on every rank, so every
 * rank adds the barrier or none does). */
int vw_arrive(MPI_Comm comm);
/* The same on a communicator of the library's own (a window's: rma.c). */
int vw_arrive_private(MPI_Comm comm);
#define VW_ARRIVE_FIRST(comm)                                            \
    do {                                                                 \
        int rc_ = vw_arrive(comm);                                       \
        if (rc_ != MPI_SUCCESS) return rc_;                              \
    } while (0)

#pragma GCC visibility pop
#endif
