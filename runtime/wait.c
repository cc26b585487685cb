/* The waiting loop and its policies, configuration and per-thread statistics. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

vw_config vw_cfg = {
    .policy = VW_ADAPTIVE,
    .collectives = VW_COLL_AUTO,
    .spin_ns = 50000,       /* about what a sleep/wake round trip costs here */
    .spin_min_ns = 2000,
    .sleep_min_ns = 1000,
    .sleep_max_ns = 1000000,
    .sample_ns = 100000000,
    .timerslack_ns = 1000,
    .mpi_yield = 1,
};

/* Most waits on a shared CPU end after one or two yields (four ranks on one core:
 * a few more). */
enum { YIELD_WARMUP = 4, YIELD_IDLE = 16, LEARN_WINDOW = 32 };
/* How often a rank polling alone on its CPU rings the doorbell (doorbell.c): a woken
 * rank's poll and sleep cost a few µs of its CPU, which may be another rank's. */
#define RING_NS 50000u

__thread vw_thread *vw_tls_self __attribute__((tls_model("initial-exec")));
static __thread int tls_slack_set;
static vw_thread *all_threads;
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;

vw_thread *vw_new_thread(void) {
    /* Heap, not TLS storage: counts of threads that exit before MPI_Finalize must survive. */
    vw_thread *t = calloc(1, sizeof *t);
    if (!t) abort();
    t->spin_budget_ns = vw_cfg.spin_ns;
    pthread_mutex_lock(&threads_lock);
    t->next = all_threads;
    all_threads = t;
    pthread_mutex_unlock(&threads_lock);
    return vw_tls_self = t;
}

uint64_t vw_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vw_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vw_coarse_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const char *vw_policy_name(vw_policy p) {
    static const char *names[] = {"spin", "yield", "sleep", "adaptive"};
    return names[p];
}

/* ---- configuration ---------------------------------------------------- */

/* Every knob that is set must be valid, empty included: a typo must not silently
 * run the job with a default. A bad value stops the rank before MPI starts. */
static void config_fail(const char *var, const char *value, const char *expected) {
    fprintf(stderr, "vhpc_wait: %s='%s' is not %s\n", var, value, expected);
    exit(2);
}

/* One of `names` (index), or `dflt` if unset. */
static int env_choice(const char *var, const char *const names[], int n, int dflt,
                      const char *expected) {
    const char *v = getenv(var);
    if (!v) return dflt;
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) return i;
    config_fail(var, v, expected);
    return dflt;
}

static int env_flag(const char *var, int dflt) {
    static const char *const names[] = {"0", "1"};
    return env_choice(var, names, 2, dflt, "0 or 1");
}

/* A plain decimal number (no hex, no inf or nan, no blanks) in [lo, hi], times
 * `scale`; `dflt` if unset. `whole`: an integer. `*set` says whether it was set. */
static uint64_t env_number(const char *var, uint64_t dflt, double scale, double lo, double hi,
                           int whole, const char *expected, int *set) {
    const char *v = getenv(var);
    *set = v != NULL;
    if (!v) return dflt;
    char *end;
    errno = 0;
    double x = *v && strspn(v, "0123456789.eE+-") == strlen(v) ? strtod(v, &end) : NAN;
    if (isnan(x) || *end || errno || !isfinite(x) || x < lo || x > hi || (whole && x != floor(x)))
        config_fail(var, v, expected);
    return (uint64_t)llround(x * scale);
}

void vw_read_config(void) {
    static const char *const policies[] = {"spin", "yield", "sleep", "adaptive"};
    static const char *const collectives[] = {"blocking", "nonblocking"};
    int set;
    char expected[160];

    vw_cfg.policy = (vw_policy)env_choice("VHPC_WAIT", policies, 4, VW_ADAPTIVE,
                                          "one of spin, yield, sleep, adaptive");
    int c = env_choice("VHPC_COLLECTIVES", collectives, 2, -1, "one of blocking, nonblocking");
    vw_cfg.collectives = c < 0 ? VW_COLL_AUTO : c == 0 ? VW_COLL_BLOCKING : VW_COLL_NONBLOCKING;
    vw_cfg.stats = env_flag("VHPC_STATS", 0);
    vw_cfg.verbose = env_flag("VHPC_VERBOSE", 0);
    vw_cfg.mpi_yield = env_flag("VHPC_MPI_YIELD", 1);

    vw_cfg.spin_ns = env_number("VHPC_SPIN_US", vw_cfg.spin_ns, 1e3, 0, 1e6, 0,
                                "a number of microseconds from 0 to 1000000", &set);
    snprintf(expected, sizeof expected,
             "a number of microseconds from 0 to VHPC_SPIN_US (%g)", vw_cfg.spin_ns / 1e3);
    vw_cfg.spin_min_ns = env_number("VHPC_SPIN_MIN_US", vw_cfg.spin_min_ns, 1e3, 0,
                                    vw_cfg.spin_ns / 1e3, 0, expected, &set);
    if (!set && vw_cfg.spin_min_ns > vw_cfg.spin_ns) vw_cfg.spin_min_ns = vw_cfg.spin_ns;

    vw_cfg.sleep_min_ns = env_number("VHPC_SLEEP_MIN_US", vw_cfg.sleep_min_ns, 1e3, 1e-3, 1e6, 0,
                                     "a number of microseconds from 0.001 to 1000000", &set);
    snprintf(expected, sizeof expected,
             "a number of microseconds from VHPC_SLEEP_MIN_US (%g) to 1000000",
             vw_cfg.sleep_min_ns / 1e3);
    vw_cfg.sleep_max_ns = env_number("VHPC_SLEEP_MAX_US", vw_cfg.sleep_max_ns, 1e3,
                                     vw_cfg.sleep_min_ns / 1e3, 1e6, 0, expected, &set);
    if (!set && vw_cfg.sleep_max_ns < vw_cfg.sleep_min_ns) vw_cfg.sleep_max_ns = vw_cfg.sleep_min_ns;

    vw_cfg.sample_ns = env_number("VHPC_SAMPLE_MS", vw_cfg.sample_ns, 1e6, 1, 60000, 0,
                                  "a number of milliseconds from 1 to 60000", &set);
    vw_hints_init(); /* only with VHPC_HINTS set (hints.c) */
    vw_cfg.timerslack_ns = (long)env_number("VHPC_TIMERSLACK_NS", (uint64_t)vw_cfg.timerslack_ns,
                                            1, 0, 1e9, 1,
                                            "a whole number of nanoseconds from 0 to 1000000000",
                                            &set);
}

/* ---- the phases of a wait --------------------------------------------- */

/* A poll taking this long did work (copied data): the wait is making progress.
 * Long in wall time alone is no proof: a thread frozen or preempted mid-poll (a
 * time slicer running the peer's domain, for hundreds of µs) took no CPU for it.
 * So a poll that looks slow by the clock is confirmed by this thread's CPU time
 * (a system call, paid only then). */
#define POLL_WORK_NS 1000u

typedef struct {
    vw_thread *t;
    vw_test_fn test;
    void *ctx;
    int done;
    int productive; /* some poll did work: the peer is running and data is moving */
    int hinted;     /* the outermost wait, published in the hint page */
    int resumed;    /* it was descheduled (hints) since it last yielded its member */
} waiter;

static inline int poll_once(waiter *w) {
    /* A hint-driven slicer may have descheduled this rank's member: stop until it runs. */
    if (__builtin_expect(vw_hint_on, 0) && vw_hint_gate()) w->resumed = 1;
    w->t->polls++;
    return w->test(w->ctx, &w->done);
}

/* Each phase starts right after a poll that found nothing (the first one is
 * vw_wait's), and returns right after one, so no poll is wasted between phases. */

/* Poll until done or for `budget_ns`, reading the clock every 8 polls. While the
 * polls do work (a large transfer the MPI copies as we poll), the budget restarts:
 * stopping to sleep then would stall the transfer, not wait for an absent peer.
 * Polls doing work make every group of 8 slow; one slow group alone is more
 * likely a preemption, so the group after a slow one is timed in CPU time too,
 * and it must have used that much CPU. */
static int spin_phase(waiter *w, uint64_t budget_ns) {
    uint64_t start = vw_now_ns(), last = start;
    uint64_t cpu_mark = 0; /* CPU time at the end of a slow group, 0 if the last was not */
    for (unsigned i = 1;; i++) {
        int rc = poll_once(w);
        if (rc != MPI_SUCCESS || w->done) return rc;
        if ((i & 7) != 0) continue;
        uint64_t now = vw_now_ns(), span = now - last;
        int slow = span > 8 * POLL_WORK_NS;
        uint64_t cpu = slow ? vw_cpu_ns() : 0;
        if (slow && cpu_mark && cpu - cpu_mark > 8 * POLL_WORK_NS) w->productive = 1, start = now;
        else if (now - start >= budget_ns) return MPI_SUCCESS;
        cpu_mark = cpu;
        last = now;
    }
}

static long thread_nivcsw(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nivcsw;
}

/* sched_yield() and poll; unbounded when `forever` (the yield policy). Adaptive
 * returns with done == 0, and its caller sleeps, once yielding stops paying:
 *  - after YIELD_IDLE yields that switched to another task while no poll did work:
 *    what runs instead does not move this wait. Ranks that wait like us (senders
 *    flooding one receiver would poll away the CPU the receiver needs), or a peer
 *    computing for that many slices. A yield that switches counts as an
 *    involuntary context switch of the thread, read with getrusage from the
 *    YIELD_WARMUP-th yield of a phase on (most waits end sooner, and getrusage is
 *    too dear for every wait);
 *  - after yields that switched nothing for as long as a sleep may delay the
 *    answer (VHPC_SLEEP_MAX_US): nothing else wants this CPU, so polling costs
 *    nobody anything while a sleep would add latency, until it has cost as much as
 *    a sleep would (spin-then-block), and so that a runnable peer EEVDF does not
 *    pick yet (not eligible) gets the CPU.
 * A poll that does work (data arriving, a transfer moving) is repeated without a
 * yield and restarts both counts: what we wait for is there. */
static int yield_phase(waiter *w, int forever) {
    unsigned yields = 0, switched = 0;
    uint64_t alone_since = 0, rung = 0;
    long mark = 0;
    for (;;) {
        sched_yield();
        w->t->yields++;
        int worked = 0, rc;
        for (;;) {
            uint64_t before = forever ? 0 : vw_now_ns();
            if ((rc = poll_once(w)) != MPI_SUCCESS || w->done) return rc;
            if (forever || vw_now_ns() - before <= POLL_WORK_NS) break;
            w->productive = worked = 1;
        }
        if (forever || ++yields < YIELD_WARMUP) continue;
        long now = thread_nivcsw();
        int did_switch = yields > YIELD_WARMUP && now != mark;
        mark = now;
        if (worked) {
            switched = 0, alone_since = 0;
        } else if (did_switch) {
            alone_since = 0;
            if (++switched >= YIELD_IDLE) return MPI_SUCCESS;
        } else if (yields > YIELD_WARMUP) {
            uint64_t t = vw_now_ns();
            if (!alone_since) alone_since = t;
            else if (t - alone_since >= vw_cfg.sleep_max_ns) return MPI_SUCCESS;
            /* This CPU has nothing else to run: wake the ranks asleep in their waits,
             * whose progress ours may be waiting for (doorbell.c). */
            if (t - rung >= RING_NS) w->t->rings += vw_bell_ring(), rung = t;
        }
    }
}

void vw_yield_now(void) {
    sched_yield();
    vw_self()->yields++;
}

static void sleep_ns(vw_thread *t, uint64_t d) {
    if (!tls_slack_set && vw_cfg.timerslack_ns > 0) {
        /* Default slack (50 us) would make every short sleep a long one. */
        prctl(PR_SET_TIMERSLACK, (unsigned long)vw_cfg.timerslack_ns, 0UL, 0UL, 0UL);
        tls_slack_set = 1;
    }
    struct timespec ts = {(time_t)(d / 1000000000u), (long)(d % 1000000000u)};
    uint64_t before = vw_now_ns();
    vw_hint_sleeping(1);
    int bell = vw_bell_sleep(d);
    if (!bell) nanosleep(&ts, NULL);
    t->woken += bell == 2;
    vw_hint_sleeping(0);
    uint64_t slept = vw_now_ns() - before;
    /* Sleeping longer than asked was being held off (frozen), not our doing. */
    t->slept_ns += slept < d + VW_SLEEP_LATE_NS ? slept : d + VW_SLEEP_LATE_NS;
    t->sleeps++;
}

/* Sleep with exponential backoff and poll: the CPU really goes idle, so a host
 * (hypervisor, CFS bandwidth control, a freezer) can run the peer. Sleeps are
 * bounded by sleep_max_ns, so a message is noticed at most that late. With
 * `until_work`, returns (done == 0) as soon as a poll does work: the peer is back
 * and the caller spins again. */
static int sleep_phase(waiter *w, int until_work) {
    uint64_t d = vw_cfg.sleep_min_ns;
    for (;;) {
        sleep_ns(w->t, d);
        d = d * 2 > vw_cfg.sleep_max_ns ? vw_cfg.sleep_max_ns : d * 2;
        int rc = poll_once(w);
        if (rc != MPI_SUCCESS || w->done) return rc;
        if (!until_work) continue;
        /* The first poll after a sleep runs on a cold cache; time the second, in
         * CPU time (a sleep costs a system call anyway): a poll frozen midway by a
         * slicer that runs the peer is long by the clock but did no work. */
        uint64_t before = vw_cpu_ns();
        if ((rc = poll_once(w)) != MPI_SUCCESS || w->done) return rc;
        if (vw_cpu_ns() - before > POLL_WORK_NS) {
            w->productive = 1;
            return MPI_SUCCESS;
        }
    }
}

/* Spin budget for TIMESHARED: spinning pays only if the wait ends before a block
 * would have cost as much (spin-then-block, Karlin et al.), or if it keeps a
 * transfer moving. Keep the full budget while at least half of recent waits were
 * like that, otherwise spin briefly. */
static void learn_spin(vw_thread *t, uint64_t waited_ns, int productive) {
    if (productive || waited_ns <= vw_cfg.spin_ns) t->spin_won++;
    else t->spin_lost++;
    if (t->spin_won + t->spin_lost < LEARN_WINDOW) return;
    t->spin_budget_ns = t->spin_won * 2 >= LEARN_WINDOW ? vw_cfg.spin_ns : vw_cfg.spin_min_ns;
    t->spin_won = t->spin_lost = 0;
}

static int adaptive_wait(waiter *w) {
    vw_mode mode = (vw_mode)vw_mode_now;
    /* Spinning in SHARED only delays the peer, which needs our CPU to answer. */
    uint64_t budget = mode == VW_MODE_SHARED       ? 0
                      : mode == VW_MODE_TIMESHARED ? w->t->spin_budget_ns
                                                   : vw_cfg.spin_ns;
    uint64_t start = mode == VW_MODE_TIMESHARED ? vw_now_ns() : 0;
    int rc;
    for (;;) {
        if (budget && ((rc = spin_phase(w, budget)) != MPI_SUCCESS || w->done)) break;
        if (w->resumed && w->hinted) { /* the spin is over: yield the member again */
            w->resumed = 0;
            vw_hint_resumed();
        }
        /* TIMESHARED: what holds the peer off is out of a yield's reach. */
        if (mode != VW_MODE_TIMESHARED && ((rc = yield_phase(w, 0)) != MPI_SUCCESS || w->done))
            break;
        if ((rc = sleep_phase(w, 1)) != MPI_SUCCESS || w->done) break;
    }
    if (mode == VW_MODE_TIMESHARED) learn_spin(w->t, vw_now_ns() - start, w->productive);
    return rc;
}

int vw_wait(vw_test_fn test, void *ctx) {
    waiter w = {.t = vw_self(), .test = test, .ctx = ctx};
    uint64_t start = vw_cfg.stats ? vw_now_ns() : 0;
    int nested = w.t->in_wait; /* a generalized request's wait callback may wait again */
    w.t->in_wait = 1;
    int rc = poll_once(&w);
    int hinted = w.hinted = !nested && !w.done && rc == MPI_SUCCESS && vw_hint_slot;
    if (hinted) vw_hint_enter(w.t->in_coll ? VW_HINT_COLL : VW_HINT_WAIT);
    if (rc == MPI_SUCCESS && !w.done) {
        switch (vw_cfg.policy) {
        case VW_SPIN: rc = spin_phase(&w, UINT64_MAX); break;
        case VW_YIELD: rc = yield_phase(&w, 1); break;
        case VW_SLEEP: rc = sleep_phase(&w, 0); break;
        case VW_ADAPTIVE: rc = adaptive_wait(&w); break;
        }
    }
    if (hinted) vw_hint_leave();
    w.t->in_wait = nested;
    if (vw_cfg.stats) w.t->waited_ns += vw_now_ns() - start;
    return rc;
}

/* ---- statistics ------------------------------------------------------- */

int vw_world_rank = -1;

/* The process's context switches from MPI_Init on (getrusage, all threads):
 * voluntary ones (it blocked or slept) and involuntary ones (preempted, or a
 * sched_yield that handed the CPU over). A yield that switched nothing counts in
 * neither: on a shared core, yields far above ivcsw were wasted. */
static struct rusage ru_at_init;

static void print_stats(void) {
    vw_thread sum = {0};
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) ru = ru_at_init;
    pthread_mutex_lock(&threads_lock);
    for (vw_thread *t = all_threads; t; t = t->next) {
        sum.calls += t->calls, sum.native += t->native, sum.polls += t->polls;
        sum.yields += t->yields, sum.sleeps += t->sleeps, sum.waited_ns += t->waited_ns;
        sum.rings += t->rings, sum.woken += t->woken;
    }
    pthread_mutex_unlock(&threads_lock);
    fprintf(stderr,
            "vhpc_wait: rank=%d policy=%s calls=%llu waited_s=%.6f polls=%llu yields=%llu "
            "sleeps=%llu native=%llu vcsw=%ld ivcsw=%ld rings=%llu woken=%llu\n",
            vw_world_rank, vw_policy_name(vw_cfg.policy), (unsigned long long)sum.calls,
            (double)sum.waited_ns * 1e-9, (unsigned long long)sum.polls,
            (unsigned long long)sum.yields, (unsigned long long)sum.sleeps,
            (unsigned long long)sum.native, ru.ru_nvcsw - ru_at_init.ru_nvcsw,
            ru.ru_nivcsw - ru_at_init.ru_nivcsw, (unsigned long long)sum.rings,
            (unsigned long long)sum.woken);
}

/* ---- lifecycle -------------------------------------------------------- */

static int initialised, finalised;
int vw_coll_blocking;

/* Whether blocking collectives stay the MPI's blocking calls, the same on every
 * rank. Their nonblocking twins run on the library's own communicators
 * (shadow.c), apart from the program's nonblocking collectives, as the MPI keeps
 * its blocking ones; still, a twin and its wait cost more than the MPI's own call
 * on a CPU of one's own. So they are turned only where waiting smarter pays: under
 * spin, yield and sleep, and under adaptive when some rank of the job has to share
 * its CPU at MPI_Init (the first sample, which rests on static evidence only: CPU
 * masks and CFS quotas; not where the MPI's own calls wait idle, Intel MPI's wait
 * mode, nor where they share a CPU and poll through the library's UCX progress,
 * MPICH's ch4:ucx, which hands the CPU over there (ucx.c): their blocking
 * collectives beat the twins, MPICH's intranode ones on shared memory against twins
 * made of messages, barrier, allreduce and fence in 0.3-0.75 of the twins' time,
 * docs/coll-bench.md) or may be frozen (a freezer group:
 * collectives made blocking there would busy-poll through every frozen slice, as
 * the time-sliced lab shows: 16 ms per message instead of 0.9). VHPC_COLLECTIVES
 * overrides. */
/* vhpc's own tracking group, "/vhpc-<pid>-run<n>" (python/vhpc/host/process.py):
 * it only collects a run's processes to kill them together, and never freezes. */
static int tracking_group(const char *path) {
    unsigned long pid, n;
    char end = '\0';
    return sscanf(path, "/vhpc-%lu-run%lu%c", &pid, &n, &end) >= 2 && (end == '\n' || !end);
}

/* Whether this process sits in a cgroup v1 freezer group below the root: some
 * controller may stop it (vhpc's time slicer, a container pause) for longer than
 * any wait, which the first sample at MPI_Init cannot see coming. */
int vw_in_freezer_group(void) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[4096];
    int frozen = 0;
    while (!frozen && fgets(line, sizeof line, f)) {
        char *ctl = strchr(line, ':');
        char *path = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!path) continue;
        *path++ = '\0';
        if (strstr(ctl + 1, "freezer") && strcmp(path, "/\n") != 0 && strcmp(path, "/") != 0 &&
            !tracking_group(path))
            frozen = 1;
    }
    fclose(f);
    return frozen;
}

static int decide_collectives(const char **why) {
    if (vw_cfg.collectives != VW_COLL_AUTO) {
        *why = "VHPC_COLLECTIVES";
        return vw_cfg.collectives == VW_COLL_BLOCKING;
    }
    if (vw_cfg.policy != VW_ADAPTIVE) {
        *why = "the policy waits itself";
        return 0;
    }
    int mine = (vw_mode_now != VW_MODE_OWN_CPU && !vw_mpi_waits_idle() &&
                !(vw_mode_now == VW_MODE_SHARED && vw_ucx_hooked())) ||
               vw_in_freezer_group();
    int any = 1;
    MPI_Request req;
    if (PMPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
        vw_wait_one(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        any = 1; /* as before this choice existed */
    *why = any ? "a rank shares its CPU or sits in a freezer group at MPI_Init"
               : "every rank has a CPU of its own, or an MPI that waits idle or yields "
                 "through the library's UCX progress, at MPI_Init";
    return !any;
}

void vw_after_init(void) {
    if (__atomic_exchange_n(&initialised, 1, __ATOMIC_SEQ_CST)) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &vw_world_rank);
    vw_bell_init(vw_world_rank);
    if (vw_cfg.stats) getrusage(RUSAGE_SELF, &ru_at_init);
    if (vw_cfg.policy == VW_ADAPTIVE) vw_evidence_init();
    const char *why;
    vw_coll_blocking = decide_collectives(&why);
    vw_made(MPI_COMM_WORLD); /* every rank is here: the Iallreduce above waited for all */
    if (vw_cfg.verbose)
        fprintf(stderr, "vhpc_wait: rank=%d collectives=%s (%s)\n", vw_world_rank,
                vw_coll_blocking ? "blocking" : "nonblocking", why);
}

void vw_before_finalize(void) {
    if (__atomic_exchange_n(&finalised, 1, __ATOMIC_SEQ_CST)) return;
    vw_hint_store(VW_HINT_WAIT); /* MPI_Finalize waits for the others, in the MPI */
    if (vw_cfg.stats) print_stats();
}

__attribute__((destructor)) static void free_threads(void) {
    vw_hint_done();
    pthread_mutex_lock(&threads_lock);
    while (all_threads) {
        vw_thread *next = all_threads->next;
        free(all_threads);
        all_threads = next;
    }
    pthread_mutex_unlock(&threads_lock);
    vw_tls_self = NULL;
}
