/* Completing requests with the wait policy, so that every completion call returns
 * exactly what the MPI's own returns, for every kind of request.
 *
 * MPI_Wait, Waitany and Waitsome poll with MPI_Test, Testany and Testsome: for
 * every kind, each MPI's Test call completes a request exactly as its Wait call
 * would (the same completion code runs), only without blocking.
 *
 * MPI_Waitall cannot poll with MPI_Testall: MPICH 4.0's Testall fails with
 * MPI_ERR_IN_STATUS on persistent collectives and partitioned requests where its
 * Waitall succeeds (under the default error handler the program aborts), and
 * Testall gives up at the first failed request where Waitall completes the
 * others. So Waitall polls without completing anything, request by request with
 * MPI_Request_get_status, and once every request has completed it hands the array
 * to the MPI's own completion call, which then has nothing left to wait for:
 * results, statuses, error codes and freed handles are the MPI's own. Each poll
 * resumes at the first request not yet seen complete, so a poll costs one
 * progress call however long the array (thousands of sends to one receiver).
 *
 * Generalized requests are never asked: MPI_Request_get_status runs a complete
 * generalized request's query function, which the program sees. The library
 * tracks them from MPI_Grequest_start (C and Fortran) and leaves them to the
 * final call. */
#include "vhpc_wait.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- generalized requests ---------------------------------------------- */

/* Handles of the generalized requests alive, an open-addressing set. An entry
 * goes when a call of ours frees the request; one freed by a call we do not see
 * (a Fortran MPI_Test under Open MPI) stays, and only makes a Waitall holding a
 * later request with that handle leave it to the final call. If the set ever
 * fills up, every Waitall is left to the MPI (`greq_overflow`). */
enum { GREQ_SLOTS = 8192, GREQ_MAX = GREQ_SLOTS / 2 };
static uintptr_t greq_slot[GREQ_SLOTS]; /* 0: empty */
static int greq_count, greq_overflow;   /* read without the lock on the fast path */
static pthread_mutex_t greq_lock = PTHREAD_MUTEX_INITIALIZER;

/* A handle as a set key: MPICH's are ints, Open MPI's pointers; neither is 0 for a
 * live request (MPICH's MPI_REQUEST_NULL is not 0 but is never added). */
static uintptr_t greq_key(MPI_Request r) { return (uintptr_t)r; }

static unsigned greq_home(uintptr_t k) {
    k ^= k >> 17, k *= 0x9e3779b97f4a7c15ull, k ^= k >> 29;
    return (unsigned)(k % GREQ_SLOTS);
}

static int greq_find_locked(uintptr_t k) {
    for (unsigned i = greq_home(k);; i = (i + 1) % GREQ_SLOTS) {
        if (greq_slot[i] == k) return (int)i;
        if (greq_slot[i] == 0) return -1;
    }
}

void vw_greq_add(MPI_Request r) {
    uintptr_t k = greq_key(r);
    if (r == MPI_REQUEST_NULL || k == 0) return;
    pthread_mutex_lock(&greq_lock);
    if (greq_find_locked(k) < 0) {
        if (greq_count >= GREQ_MAX) {
            __atomic_store_n(&greq_overflow, 1, __ATOMIC_RELAXED);
        } else {
            unsigned i = greq_home(k);
            while (greq_slot[i] != 0) i = (i + 1) % GREQ_SLOTS;
            greq_slot[i] = k;
            __atomic_store_n(&greq_count, greq_count + 1, __ATOMIC_RELAXED);
        }
    }
    pthread_mutex_unlock(&greq_lock);
}

/* Linear probing without tombstones: refill the hole by shifting entries back. */
static void greq_remove_locked(uintptr_t k) {
    int at = greq_find_locked(k);
    if (at < 0) return;
    unsigned hole = (unsigned)at;
    greq_slot[hole] = 0;
    for (unsigned i = (hole + 1) % GREQ_SLOTS; greq_slot[i] != 0; i = (i + 1) % GREQ_SLOTS) {
        unsigned home = greq_home(greq_slot[i]);
        /* Move the entry into the hole unless its home lies cyclically in (hole, i]. */
        int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) greq_slot[hole] = greq_slot[i], greq_slot[i] = 0, hole = i;
    }
    __atomic_store_n(&greq_count, greq_count - 1, __ATOMIC_RELAXED);
}

int vw_greq_any(void) {
    return __atomic_load_n(&greq_count, __ATOMIC_RELAXED) != 0 ||
           __atomic_load_n(&greq_overflow, __ATOMIC_RELAXED);
}

/* Mark in `is_greq` the requests that are (or may be) generalized; says whether any is. */
static int greq_mark(int n, const MPI_Request reqs[], unsigned char is_greq[]) {
    int any = 0, all = __atomic_load_n(&greq_overflow, __ATOMIC_RELAXED);
    pthread_mutex_lock(&greq_lock);
    for (int i = 0; i < n; i++) {
        is_greq[i] = reqs[i] != MPI_REQUEST_NULL && (all || greq_find_locked(greq_key(reqs[i])) >= 0);
        any |= is_greq[i];
    }
    pthread_mutex_unlock(&greq_lock);
    return any;
}

void vw_greq_snap(vw_greq_snapshot *s, int n, const MPI_Request reqs[]) {
    s->before = NULL, s->n = n;
    if (n <= 0 || !vw_greq_any()) return;
    s->before = n <= 64 ? s->local : malloc((size_t)n * sizeof *s->before);
    if (s->before) memcpy(s->before, reqs, (size_t)n * sizeof *s->before);
}

void vw_greq_forget(vw_greq_snapshot *s, const MPI_Request after[]) {
    if (!s->before) return;
    pthread_mutex_lock(&greq_lock);
    for (int i = 0; i < s->n; i++)
        if (s->before[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
            greq_remove_locked(greq_key(s->before[i]));
    pthread_mutex_unlock(&greq_lock);
    if (s->before != s->local) free(s->before);
}

/* ---- single and partial completion: the Test calls ---------------------- */

struct one_ctx { MPI_Request *req; MPI_Status *st; };
static int test_one(void *c, int *done) {
    struct one_ctx *x = c;
    return PMPI_Test(x->req, done, x->st);
}
int vw_wait_one(MPI_Request *req, MPI_Status *st) {
    vw_greq_snapshot snap;
    vw_greq_snap(&snap, 1, req);
    struct one_ctx c = {req, st};
    int rc = vw_wait(test_one, &c);
    vw_greq_forget(&snap, req);
    return rc;
}

struct any_ctx { int n; MPI_Request *reqs; int *index; MPI_Status *st; };
static int test_any(void *c, int *done) {
    struct any_ctx *x = c;
    return PMPI_Testany(x->n, x->reqs, x->index, done, x->st);
}
int vw_wait_any(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    vw_greq_snapshot snap;
    vw_greq_snap(&snap, n, reqs);
    struct any_ctx c = {n, reqs, index, st};
    int rc = vw_wait(test_any, &c);
    vw_greq_forget(&snap, reqs);
    return rc;
}

struct some_ctx { int n; MPI_Request *reqs; int *outcount; int *indices; MPI_Status *st; };
static int test_some(void *c, int *done) {
    struct some_ctx *x = c;
    int rc = PMPI_Testsome(x->n, x->reqs, x->outcount, x->indices, x->st);
    *done = *x->outcount != 0; /* MPI_UNDEFINED (no active request) also ends the wait */
    return rc;
}
int vw_wait_some(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status st[]) {
    vw_greq_snapshot snap;
    vw_greq_snap(&snap, n, reqs);
    struct some_ctx c = {n, reqs, outcount, indices, st};
    int rc = vw_wait(test_some, &c);
    vw_greq_forget(&snap, reqs);
    return rc;
}

struct probe_ctx { int source, tag; MPI_Comm comm; MPI_Status *st; };
static int test_probe(void *c, int *done) {
    struct probe_ctx *x = c;
    return PMPI_Iprobe(x->source, x->tag, x->comm, done, x->st);
}
int vw_probe(int source, int tag, MPI_Comm comm, MPI_Status *st) {
    struct probe_ctx c = {source, tag, comm, st};
    return vw_wait(test_probe, &c);
}

struct mprobe_ctx { int source, tag; MPI_Comm comm; MPI_Message *msg; MPI_Status *st; };
static int test_mprobe(void *c, int *done) {
    struct mprobe_ctx *x = c;
    return PMPI_Improbe(x->source, x->tag, x->comm, done, x->msg, x->st);
}
int vw_mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *st) {
    struct mprobe_ctx c = {source, tag, comm, msg, st};
    return vw_wait(test_mprobe, &c);
}

/* ---- MPI_Waitall --------------------------------------------------------- */

/* A progress call taking PROGRESS_WORK_NS longer than an idle one did work (it
 * matched, copied or pushed messages: 1-6 us in MPICH). An idle one costs
 * 0.05-0.15 us in MPICH and Open MPI but 0.5-0.9 us in Intel MPI, whose progress
 * spins on `pause` instructions in every call (impi_pause), so each MPI_Waitall
 * takes the fastest of its calls that completed nothing as the idle cost (the
 * first one only calibrates). A preempted call looks busy too, which costs one
 * more call. A poll repeats at most DRAIN_MAX of them. */
#define PROGRESS_WORK_NS 500u
enum { DRAIN_MAX = 64 };

struct all_ctx {
    int n, next; /* requests before `next` were seen complete */
    MPI_Request *reqs;
    const unsigned char *is_greq; /* NULL: none */
    MPI_Status *seen;             /* NULL, or each request's status when seen complete */
    uint64_t idle_ns;             /* the fastest progress call that completed nothing */
};

static int did_work(struct all_ctx *x, uint64_t took_ns) {
    if (took_ns < x->idle_ns) x->idle_ns = took_ns;
    return took_ns > x->idle_ns + PROGRESS_WORK_NS;
}

/* Done once every request but the generalized ones has completed, or at the
 * first error: the final call then does whatever the MPI does with it. A
 * progress call that does work (it takes longer than an idle one: it matched,
 * copied or pushed messages) is repeated, so that a poll drains what has arrived
 * as the MPI's own MPI_Testall would: many receives complete out of the cursor's
 * order (thousands of messages from several senders), and one progress call per
 * poll would leave them to the next poll, after a yield or a sleep. */
static int poll_all(void *c, int *done) {
    struct all_ctx *x = c;
    for (unsigned busy = 0; x->next < x->n; x->next++) {
        MPI_Request r = x->reqs[x->next];
        if (r == MPI_REQUEST_NULL || (x->is_greq && x->is_greq[x->next])) continue;
        int flag = 0;
        uint64_t t0 = vw_now_ns();
        MPI_Status *st = x->seen ? &x->seen[x->next] : MPI_STATUS_IGNORE;
        if (PMPI_Request_get_status(r, &flag, st) != MPI_SUCCESS) break;
        if (!flag) {
            if (did_work(x, vw_now_ns() - t0) && ++busy < DRAIN_MAX) {
                x->next--; /* ask the same request again */
                continue;
            }
            *done = 0;
            return MPI_SUCCESS;
        }
    }
    *done = 1;
    return MPI_SUCCESS;
}

#ifdef OPEN_MPI
/* Open MPI: once every request has completed its MPI_Testall returns what its
 * MPI_Waitall would, and it returns flag = false until then. Its MPI_Waitall must
 * not get a request that has already failed: under MPI_THREAD_MULTIPLE it then
 * never returns (4.1, request/req_wait.c: the sync object is released without
 * ever being signalled). Testall is polled for the generalized requests left. */
struct testall_ctx { int n; MPI_Request *reqs; MPI_Status *st; };
static int test_all(void *c, int *done) {
    struct testall_ctx *x = c;
    return PMPI_Testall(x->n, x->reqs, done, x->st);
}
static int finish_all(int n, MPI_Request reqs[], MPI_Status st[]) {
    struct testall_ctx c = {n, reqs, st};
    return vw_wait(test_all, &c);
}
#else
/* MPICH: its own MPI_Waitall, with nothing left to wait for but generalized
 * requests (which it expects complete, as without the library). */
static int finish_all(int n, MPI_Request reqs[], MPI_Status st[]) {
    return PMPI_Waitall(n, reqs, st);
}
#endif

/* MPICH from 4.1 on (5.0's wheel, Intel MPI 2021) deactivates a persistent request
 * that MPI_Request_get_status sees complete: the final MPI_Waitall then gives it
 * an empty status (source MPI_ANY_SOURCE, tag MPI_ANY_TAG, count 0) where the MPI's
 * own MPI_Waitall gives the receive's. The polls keep each status as they see it,
 * and a status the final call left empty gets it back (its MPI_ERROR the final
 * call's). A request that was inactive to begin with has an empty one either way. */
static void empty_status(MPI_Status *s) {
    memset(s, 0, sizeof *s);
    s->MPI_SOURCE = MPI_ANY_SOURCE;
    s->MPI_TAG = MPI_ANY_TAG;
}
static int is_empty(const MPI_Status *s) {
    return s->MPI_SOURCE == MPI_ANY_SOURCE && s->MPI_TAG == MPI_ANY_TAG;
}
/* Before the final call: a status the MPI does not write (a send's source and tag
 * are undefined; MPICH leaves them as they were) is read below, so it is set. */
static void prepare_statuses(int n, const MPI_Status seen[], MPI_Status st[]) {
    for (int i = 0; i < n; i++)
        if (!is_empty(&seen[i])) empty_status(&st[i]);
}
static void restore_statuses(int n, const MPI_Status seen[], MPI_Status st[]) {
    for (int i = 0; i < n; i++) {
        if (is_empty(&seen[i]) || !is_empty(&st[i])) continue;
        int err = st[i].MPI_ERROR;
        st[i] = seen[i];
        st[i].MPI_ERROR = err;
    }
}

int vw_wait_all(int n, MPI_Request reqs[], MPI_Status st[]) {
    vw_greq_snapshot snap;
    vw_greq_snap(&snap, n, reqs);
    unsigned char local[64], *is_greq = NULL;
    if (vw_greq_any() && n > 0) {
        is_greq = n <= 64 ? local : malloc((size_t)n);
        if (!is_greq || !snap.before) { /* out of memory: the MPI waits */
            int rc = PMPI_Waitall(n, reqs, st);
            vw_greq_forget(&snap, reqs);
            if (is_greq != local) free(is_greq);
            return rc;
        }
        if (!greq_mark(n, reqs, is_greq)) {
            if (is_greq != local) free(is_greq);
            is_greq = NULL;
        }
    }
    MPI_Status seen_local[16], *seen = NULL;
#ifndef OPEN_MPI
    if (st != MPI_STATUSES_IGNORE && n > 0) {
        seen = n <= 16 ? seen_local : malloc((size_t)n * sizeof *seen);
        for (int i = 0; seen && i < n; i++) empty_status(&seen[i]);
    }
#endif
    struct all_ctx c = {
        .n = n, .reqs = reqs, .is_greq = is_greq, .seen = seen, .idle_ns = UINT64_MAX};
    vw_wait(poll_all, &c); /* poll_all never fails: an error ends the poll */
    if (seen) prepare_statuses(n, seen, st);
    int rc = finish_all(n, reqs, st);
    if (seen) restore_statuses(n, seen, st);
    vw_greq_forget(&snap, reqs);
    if (is_greq != local) free(is_greq);
    if (seen != seen_local) free(seen);
    return rc;
}

/* An MPI_Ibarrier on `shadow` (a communicator of the library's), waited for; an
 * error is raised on the program's `comm`. */
static int arrive(MPI_Comm comm, MPI_Comm shadow) {
    vw_thread *t = vw_self();
    if (vw_coll_blocking) {
        if (!t->in_fortran) t->calls++, t->native++;
        return MPI_SUCCESS;
    }
    int native = vw_take_native(t);
    MPI_Request req;
    int rc = PMPI_Ibarrier(shadow, &req);
    if (rc == MPI_SUCCESS) rc = vw_complete(t, native, &req, MPI_STATUS_IGNORE);
    return shadow == comm ? rc : vw_raise(comm, rc);
}

int vw_arrive(MPI_Comm comm) {
    MPI_Comm shadow = vw_coll_blocking ? comm : vw_shadow(comm);
    return arrive(comm, shadow == MPI_COMM_NULL ? comm : shadow); /* inter: on it */
}

int vw_arrive_private(MPI_Comm comm) {
    return arrive(comm, comm);
}

int vw_complete(vw_thread *t, int native, MPI_Request *req, MPI_Status *st) {
    if (!native) {
        int outer = !t->in_coll;
        t->in_coll = 1; /* the hint page says "in a collective" */
        int rc = vw_wait_one(req, st);
        if (outer) t->in_coll = 0;
        return rc;
    }
    vw_native_span s = vw_native_begin(t, VW_HINT_COLL);
    int rc = PMPI_Wait(req, st);
    vw_native_end(t, s);
    return rc;
}
