/* Every kind of request through every completion call, printing what the MPI
 * returned: the harness compares the lines with and without libvhpc_wait.
 *
 * Kinds: nonblocking point-to-point, persistent point-to-point, persistent
 * collectives (MPI 4.0 MPI_Bcast_init..., or Open MPI's MPIX_ ones), partitioned
 * (MPI_Psend_init / MPI_Precv_init / MPI_Pready), generalized requests completed
 * by another thread, MPI_REQUEST_NULL, an inactive persistent request, and an
 * array mixing them all; failing requests (a truncated receive, a generalized
 * request whose query function fails). Calls: MPI_Wait, Waitall
 * (with statuses and with MPI_STATUSES_IGNORE), Waitany, Waitsome and the four
 * Test calls.
 *
 * Only what does not depend on timing is printed: per request, the error class
 * it completed with and its status where MPI defines one (receives, generalized
 * requests, null and inactive requests), the data received, how often the
 * generalized requests' query and free functions ran. Waitany/Waitsome/Testany/
 * Testsome are called until every request has been reported once (MPICH 4.0.2
 * keeps reporting completed persistent collectives, so MPI_UNDEFINED may never
 * come), then the array is finished with MPI_Waitall.
 *
 * Errors are returned (MPI_ERRORS_RETURN), not fatal. Runs on an even number of
 * ranks: pairs rank ^ 1.
 *
 * Prints "requests: rank <r> unsupported <kind>: <why>" for a kind this MPI lacks,
 * "requests: rank <r> case=<case> call=<call> ..." per case and call (or "...
 * skipped: <why>" where the MPI's own call gives results that depend on timing),
 * then "requests: rank <r> finalized" after MPI_Finalize. */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#ifdef OPEN_MPI
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4
#define HAVE_PCOLL 1
#define BCAST_INIT MPI_Bcast_init
#define ALLREDUCE_INIT MPI_Allreduce_init
#define BARRIER_INIT MPI_Barrier_init
#define HAVE_PARTITIONED 1
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define HAVE_PCOLL 1
#define BCAST_INIT MPIX_Bcast_init
#define ALLREDUCE_INIT MPIX_Allreduce_init
#define BARRIER_INIT MPIX_Barrier_init
#endif

enum { N = 64, SHORT = 16, PARTS = 4, MAXREQ = 16, GREQ_DELAY_US = 3000 };

/* What a request's completion must show. */
enum role {
    RECV,  /* status: source, tag, count; data checked */
    SEND,  /* nothing defined but the error */
    COLL,  /* data checked; status undefined */
    GREQ,  /* status as our query function set it */
    EMPTY, /* null or inactive: the empty status */
};

struct greq {
    MPI_Request req;
    int fail;            /* the query function returns MPI_ERR_OTHER */
    int queries, frees;  /* how often MPI called them */
    pthread_t thread;
    int threaded;
};

/* One array of requests under test, and what is needed to check and free it. */
struct set {
    int n;
    MPI_Request req[MAXREQ];
    enum role role[MAXREQ];
    int persistent[MAXREQ]; /* freed with MPI_Request_free at the end */
    int *check[MAXREQ];     /* received data, checked against want[] */
    int want_n[MAXREQ];
    int want_base[MAXREQ];  /* expected element i: want_base + i (or sums, see check) */
    int want_src[MAXREQ], want_tag[MAXREQ], want_count[MAXREQ];
    struct greq *greq[MAXREQ];
    int bufs[MAXREQ][N];
    int sbufs[MAXREQ][N];
    MPI_Request side[2]; /* sends outside the array, completed by finish() */
};

static int wr, wp, peer, thread_multiple;
/* Complete generalized requests before the call instead of from another thread. */
static int greq_complete_first;

static int cls(int code)
{
    int c = -1;

    MPI_Error_class(code, &c);
    return c;
}

/* ---- generalized requests ------------------------------------------------ */

static int greq_query(void *extra, MPI_Status *st)
{
    struct greq *g = extra;

    g->queries++;
    st->MPI_SOURCE = 7;
    st->MPI_TAG = 8;
    MPI_Status_set_elements(st, MPI_INT, 3);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_ERROR = g->fail ? MPI_ERR_OTHER : MPI_SUCCESS;
    return g->fail ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int greq_free(void *extra)
{
    ((struct greq *)extra)->frees++;
    return MPI_SUCCESS;
}

static int greq_cancel(void *extra, int complete)
{
    (void)extra, (void)complete;
    return MPI_SUCCESS;
}

/* Completes the request a little later, so that the wait really waits. */
static void *greq_completer(void *arg)
{
    struct greq *g = arg;
    struct timespec ts = {0, GREQ_DELAY_US * 1000L};

    nanosleep(&ts, NULL);
    OK(MPI_Grequest_complete(g->req));
    return NULL;
}

/* ---- building the arrays ------------------------------------------------- */

static int add(struct set *s, enum role role)
{
    CHECK(s->n < MAXREQ, "too many requests in one set");
    int i = s->n++;
    s->req[i] = MPI_REQUEST_NULL;
    s->role[i] = role;
    return i;
}

static void expect_recv(struct set *s, int i, int *buf, int n, int base, int tag)
{
    s->check[i] = buf;
    s->want_n[i] = n;
    s->want_base[i] = base;
    s->want_src[i] = peer;
    s->want_tag[i] = tag;
    s->want_count[i] = n;
}

static void fill_from(int *buf, int n, int base)
{
    for (int k = 0; k < n; k++)
        buf[k] = base + k;
}

static void p2p(struct set *s, int tag)
{
    int i = add(s, RECV), j = add(s, SEND);
    memset(s->bufs[i], 0, sizeof s->bufs[i]);
    fill_from(s->sbufs[j], N, 1000 * wr + tag);
    OK(MPI_Irecv(s->bufs[i], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[i]));
    OK(MPI_Isend(s->sbufs[j], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[j]));
    expect_recv(s, i, s->bufs[i], N, 1000 * peer + tag, tag);
}

static void persistent(struct set *s, int tag)
{
    int i = add(s, RECV), j = add(s, SEND);
    memset(s->bufs[i], 0, sizeof s->bufs[i]);
    fill_from(s->sbufs[j], N, 1000 * wr + tag);
    OK(MPI_Recv_init(s->bufs[i], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[i]));
    OK(MPI_Send_init(s->sbufs[j], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[j]));
    s->persistent[i] = s->persistent[j] = 1;
    OK(MPI_Start(&s->req[i]));
    OK(MPI_Start(&s->req[j]));
    expect_recv(s, i, s->bufs[i], N, 1000 * peer + tag, tag);
}

/* A fitting receive, then one into too small a buffer (MPI_ERR_TRUNCATE), posted
 * once the messages are there (a barrier after the sends, which travel ahead of
 * it); the sends are completed outside the array. Open MPI 4.1's MPI_Waitall may
 * hang when a receive fails while the others are still in flight, and it loses
 * track of a truncated persistent receive (MPI_Test frees it), with or without
 * the library. */
static void truncated(struct set *s, int tag)
{
    int i = add(s, RECV), j = add(s, RECV);
    for (int k = 0; k < 2; k++) {
        fill_from(s->sbufs[k], N, 1000 * wr + tag + k);
        OK(MPI_Isend(s->sbufs[k], N, MPI_INT, peer, tag + k, MPI_COMM_WORLD, &s->side[k]));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(s->bufs[i], 0, sizeof s->bufs[i]);
    OK(MPI_Irecv(s->bufs[i], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[i]));
    OK(MPI_Irecv(s->bufs[j], SHORT, MPI_INT, peer, tag + 1, MPI_COMM_WORLD, &s->req[j]));
    expect_recv(s, i, s->bufs[i], N, 1000 * peer + tag, tag);
}

static void inactive(struct set *s, int tag)
{
    int i = add(s, EMPTY);
    OK(MPI_Recv_init(s->bufs[i], N, MPI_INT, peer, tag, MPI_COMM_WORLD, &s->req[i]));
    s->persistent[i] = 1;
}

static void null(struct set *s)
{
    add(s, EMPTY);
}

#ifdef HAVE_PCOLL
/* Bcast from rank 0 (want: 500 + k), Allreduce of rank + k (want: sum), Barrier. */
static void pcoll(struct set *s)
{
    int b = add(s, COLL), a = add(s, COLL), z = add(s, COLL);
    if (wr == 0)
        fill_from(s->bufs[b], N, 500);
    else
        memset(s->bufs[b], 0, sizeof s->bufs[b]);
    fill_from(s->sbufs[a], N, wr);
    memset(s->bufs[a], 0, sizeof s->bufs[a]);
    OK(BCAST_INIT(s->bufs[b], N, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &s->req[b]));
    OK(ALLREDUCE_INIT(s->sbufs[a], s->bufs[a], N, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                      MPI_INFO_NULL, &s->req[a]));
    OK(BARRIER_INIT(MPI_COMM_WORLD, MPI_INFO_NULL, &s->req[z]));
    s->persistent[b] = s->persistent[a] = s->persistent[z] = 1;
    s->check[b] = s->bufs[b], s->want_n[b] = N, s->want_base[b] = 500;
    /* sum over ranks q of (q + k) = wp (wp - 1) / 2 + wp k: checked as base + wp k */
    s->check[a] = s->bufs[a], s->want_n[a] = -N, s->want_base[a] = wp * (wp - 1) / 2;
    OK(MPI_Start(&s->req[b]));
    OK(MPI_Start(&s->req[a]));
    OK(MPI_Start(&s->req[z]));
}
#endif

#ifdef HAVE_PARTITIONED
/* Even ranks send PARTS partitions of N / PARTS ints, marked ready last to first. */
static void partitioned(struct set *s, int tag)
{
    int i = add(s, wr % 2 == 0 ? SEND : RECV);
    if (wr % 2 == 0) {
        fill_from(s->sbufs[i], N, 2000 + tag);
        OK(MPI_Psend_init(s->sbufs[i], PARTS, N / PARTS, MPI_INT, peer, tag, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &s->req[i]));
    } else {
        memset(s->bufs[i], 0, sizeof s->bufs[i]);
        OK(MPI_Precv_init(s->bufs[i], PARTS, N / PARTS, MPI_INT, peer, tag, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &s->req[i]));
        expect_recv(s, i, s->bufs[i], N, 2000 + tag, tag);
    }
    s->persistent[i] = 1;
    OK(MPI_Start(&s->req[i]));
    if (wr % 2 == 0)
        for (int p = PARTS - 1; p >= 0; p--)
            OK(MPI_Pready(p, s->req[i]));
}
#endif

static void grequest(struct set *s, int failing)
{
    int i = add(s, GREQ);
    struct greq *g = calloc(1, sizeof *g);
    CHECK(g != NULL, "out of memory");
    g->fail = failing;
    OK(MPI_Grequest_start(greq_query, greq_free, greq_cancel, g, &g->req));
    s->req[i] = g->req;
    s->greq[i] = g;
    /* MPI_Grequest_complete from another thread needs MPI_THREAD_MULTIPLE. A
     * failing request completes first: racing a completer thread, the MPI's own
     * Testall calls its query a timing-dependent number of times (MPICH 5). */
    if (thread_multiple && !greq_complete_first && !failing &&
        pthread_create(&g->thread, NULL, greq_completer, g) == 0)
        g->threaded = 1;
    else
        OK(MPI_Grequest_complete(g->req));
}

/* ---- the cases ----------------------------------------------------------- */

static const char *const cases[] = {"p2p",      "persistent", "pcoll",    "partitioned",
                                    "grequest", "null",       "inactive", "mixed",
                                    "truncate", "greq-error"};
enum { NCASES = sizeof cases / sizeof cases[0] };

enum call { WAIT, WAITALL, WAITALL_IGNORE, WAITANY, WAITSOME, TEST, TESTALL, TESTANY, TESTSOME };
static const char *const call_names[] = {"Wait",    "Waitall", "Waitall(ignore)",
                                         "Waitany", "Waitsome", "Test",
                                         "Testall", "Testany", "Testsome"};
enum { NCALLS = sizeof call_names / sizeof call_names[0] };

/* Why case `c` is not run with `call` here (NULL: it is): the MPI's own call
 * fails in a way that depends on timing, with or without the library. */
static const char *skipped(int c, enum call call)
{
    const char *name = cases[c];
#ifdef MPICH
    /* MPICH 4.0.2 (request_impl.c): Testall's error check knows no persistent
     * collective or partitioned request; the any/some calls never make a
     * persistent collective inactive, so they report it again and again. */
    if (call == TESTALL && (strcmp(name, "pcoll") == 0 || strcmp(name, "partitioned") == 0))
        return "MPICH's MPI_Testall fails with MPI_ERR_IN_STATUS on this kind, statuses "
               "depending on timing";
    if (call != WAIT && call != TEST && call != TESTALL && call != WAITALL &&
        call != WAITALL_IGNORE && strcmp(name, "pcoll") == 0)
        return "MPICH's any/some calls report a completed persistent collective again and "
               "again, the others depending on timing";
#endif
#ifdef OPEN_MPI
    /* Open MPI 4.1 (req_wait.c): with a failed request wait_all skips the wait on
     * its sync object and then, under MPI_THREAD_MULTIPLE, waits forever for the
     * sync to be released. errors.c checks Waitall's errors single-threaded. */
    if ((call == WAITALL || call == WAITALL_IGNORE) && strcmp(name, "truncate") == 0)
        return "Open MPI's MPI_Waitall never returns under MPI_THREAD_MULTIPLE if a request "
               "failed before the call";
#endif
    (void)name, (void)call;
    return NULL;
}

/* MPICH's own Testall calls a generalized request's query function a number of
 * times that depends on timing (2 or 3 against a completer thread, with or without
 * the library, MPICH 5): whether it was called is compared, not how often. */
static int query_count_varies(enum call call)
{
#ifdef MPICH
    return call == TESTALL;
#else
    (void)call;
    return 0;
#endif
}

/* Builds case `c` for `call`; returns 0 if this MPI lacks a kind it needs. */
static int build(int c, struct set *s, int tag, enum call call)
{
    /* MPICH 4.0.2, with or without the library, in ways that depend on timing (see
     * skipped()): the any/some calls keep reporting a completed persistent
     * collective, Testall fails on persistent collectives and partitioned
     * requests, and its number of calls to a generalized request's query function
     * varies. Those calls get the mixed array without these kinds. */
    int mixed_pcoll = 1, mixed_partitioned = 1, mixed_greq = 1;
#ifdef MPICH
    mixed_pcoll = call == WAIT || call == WAITALL || call == WAITALL_IGNORE || call == TEST;
    mixed_partitioned = mixed_greq = call != TESTALL;
#endif
    (void)mixed_pcoll, (void)mixed_partitioned, (void)call;
    memset(s, 0, sizeof *s);
    s->side[0] = s->side[1] = MPI_REQUEST_NULL;
    const char *name = cases[c];
    if (strcmp(name, "p2p") == 0) {
        p2p(s, tag);
    } else if (strcmp(name, "persistent") == 0) {
        persistent(s, tag);
    } else if (strcmp(name, "pcoll") == 0) {
#ifdef HAVE_PCOLL
        pcoll(s);
#else
        return 0;
#endif
    } else if (strcmp(name, "partitioned") == 0) {
#ifdef HAVE_PARTITIONED
        partitioned(s, tag);
#else
        return 0;
#endif
    } else if (strcmp(name, "grequest") == 0) {
        grequest(s, 0);
    } else if (strcmp(name, "null") == 0) {
        null(s);
        null(s);
    } else if (strcmp(name, "inactive") == 0) {
        inactive(s, tag);
    } else if (strcmp(name, "mixed") == 0) {
        /* Every kind this MPI has, interleaved. */
        p2p(s, tag);
        null(s);
#ifdef HAVE_PCOLL
        if (mixed_pcoll)
            pcoll(s);
#endif
#ifdef HAVE_PARTITIONED
        if (mixed_partitioned)
            partitioned(s, tag + 1);
#endif
        if (mixed_greq)
            grequest(s, 0);
        inactive(s, tag + 2);
        persistent(s, tag + 3);
    } else if (strcmp(name, "truncate") == 0) {
        /* The failing request last: MPICH's Waitall leaves the ones after it pending. */
        truncated(s, tag);
    } else if (strcmp(name, "greq-error") == 0) {
        /* Alone: with a request still in flight MPICH's Testall returns at the
         * failure, leaving it pending or not depending on timing. */
        null(s);
        grequest(s, 1);
    }
    return 1;
}

/* What one request completed with. */
struct outcome {
    int seen, err;
    int null_after; /* the handle is MPI_REQUEST_NULL after the call */
    MPI_Status st;
    int data_ok;
};

static int data_ok(struct set *s, int i)
{
    if (!s->check[i])
        return 1;
    int n = s->want_n[i] < 0 ? -s->want_n[i] : s->want_n[i];
    for (int k = 0; k < n; k++) {
        int want = s->want_n[i] < 0 ? s->want_base[i] + wp * k : s->want_base[i] + k;
        if (s->check[i][k] != want)
            return 0;
    }
    return 1;
}

static void record(struct set *s, struct outcome *o, int i, int err, const MPI_Status *st)
{
    if (o[i].seen++)
        return; /* reported again (MPICH's persistent collectives): keep the first */
    o[i].err = err;
    if (st)
        o[i].st = *st;
    o[i].data_ok = data_ok(s, i);
}

static int all_seen(struct set *s, struct outcome *o)
{
    for (int i = 0; i < s->n; i++)
        if (!o[i].seen && s->role[i] != EMPTY)
            return 0;
    return 1;
}

/* The array's call; returns the return code's class for the calls that complete
 * everything at once (-1 for the others, whose codes are per request). */
static int complete(struct set *s, enum call call, struct outcome *o)
{
    MPI_Status st[MAXREQ];
    int rc, flag, idx, out, idxs[MAXREQ], calls = 0;

    for (int i = 0; i < s->n; i++)
        st[i].MPI_ERROR = -1;
    switch (call) {
    case WAIT:
    case TEST:
        for (int i = 0; i < s->n; i++) {
            if (call == WAIT)
                rc = MPI_Wait(&s->req[i], &st[i]);
            else
                do
                    rc = MPI_Test(&s->req[i], &flag, &st[i]);
                while (rc == MPI_SUCCESS && !flag);
            record(s, o, i, cls(rc), &st[i]);
        }
        return -1;
    case WAITALL:
    case WAITALL_IGNORE:
    case TESTALL:
        if (call == WAITALL)
            rc = MPI_Waitall(s->n, s->req, st);
        else if (call == WAITALL_IGNORE)
            rc = MPI_Waitall(s->n, s->req, MPI_STATUSES_IGNORE);
        else
            do
                rc = MPI_Testall(s->n, s->req, &flag, st);
            while (rc == MPI_SUCCESS && !flag);
        for (int i = 0; i < s->n; i++)
            record(s, o, i,
                   rc == MPI_ERR_IN_STATUS && call != WAITALL_IGNORE ? cls(st[i].MPI_ERROR)
                                                                      : MPI_SUCCESS,
                   call == WAITALL_IGNORE ? NULL : &st[i]);
        return cls(rc);
    case WAITANY:
    case TESTANY:
        while (!all_seen(s, o) && calls < 1000) {
            MPI_Status one;
            if (call == WAITANY) {
                rc = MPI_Waitany(s->n, s->req, &idx, &one);
            } else {
                rc = MPI_Testany(s->n, s->req, &idx, &flag, &one);
                if (rc == MPI_SUCCESS && !flag)
                    continue;
            }
            if (idx == MPI_UNDEFINED)
                break;
            calls++;
            record(s, o, idx, cls(rc), &one);
        }
        return -1;
    case WAITSOME:
    case TESTSOME:
        while (!all_seen(s, o) && calls < 1000) {
            if (call == WAITSOME)
                rc = MPI_Waitsome(s->n, s->req, &out, idxs, st);
            else
                rc = MPI_Testsome(s->n, s->req, &out, idxs, st);
            if (out == MPI_UNDEFINED)
                break;
            calls += out > 0;
            for (int j = 0; j < out; j++)
                record(s, o, idxs[j], rc == MPI_ERR_IN_STATUS ? cls(st[j].MPI_ERROR) : cls(rc),
                       &st[j]);
        }
        return -1;
    }
    return -1;
}

static void finish(struct set *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->greq[i] && s->greq[i]->threaded)
            pthread_join(s->greq[i]->thread, NULL);
    /* Whatever a failed call left pending, and persistent requests reported as
     * complete but still active (MPICH 4.0.2's persistent collectives). */
    MPI_Waitall(s->n, s->req, MPI_STATUSES_IGNORE);
    OK(MPI_Waitall(2, s->side, MPI_STATUSES_IGNORE));
    for (int i = 0; i < s->n; i++) {
        if (s->persistent[i] && s->req[i] != MPI_REQUEST_NULL)
            OK(MPI_Request_free(&s->req[i]));
    }
}

static void print_line(struct set *s, int c, enum call call, int rc, struct outcome *o)
{
    char line[2048];
    static const char *const roles = "RSCGE";
    size_t used = snprintf(line, sizeof line, "requests: rank %d case=%s call=%s", wr, cases[c],
                           call_names[call]);
    if (rc >= 0)
        used += snprintf(line + used, sizeof line - used, " rc=%d", rc);
    for (int i = 0; i < s->n && used < sizeof line; i++) {
        int count = -1;
        used += snprintf(line + used, sizeof line - used, " %d%c:", i, roles[s->role[i]]);
        if (!o[i].seen) {
            used += snprintf(line + used, sizeof line - used, "unreported");
            continue;
        }
        used += snprintf(line + used, sizeof line - used, "err=%d", o[i].err);
        int has_status = call != WAITALL_IGNORE && o[i].err == MPI_SUCCESS;
        if (has_status && (s->role[i] == RECV || s->role[i] == GREQ || s->role[i] == EMPTY)) {
            MPI_Get_count(&o[i].st, MPI_INT, &count);
            used += snprintf(line + used, sizeof line - used, ",status=%d/%d/%d",
                             o[i].st.MPI_SOURCE, o[i].st.MPI_TAG, count);
        }
        if (s->check[i])
            used += snprintf(line + used, sizeof line - used, ",data=%s",
                             o[i].data_ok ? "ok" : "WRONG");
        if (s->greq[i] && query_count_varies(call))
            used += snprintf(line + used, sizeof line - used, ",query=%s,free=%d",
                             s->greq[i]->queries ? "some" : "none", s->greq[i]->frees);
        else if (s->greq[i])
            used += snprintf(line + used, sizeof line - used, ",query=%d,free=%d",
                             s->greq[i]->queries, s->greq[i]->frees);
        used += snprintf(line + used, sizeof line - used, ",%s",
                         o[i].null_after ? "null" : "handle");
    }
    /* One write per line: the launcher interleaves the ranks' output. */
    if (used >= sizeof line - 1)
        used = sizeof line - 2;
    line[used++] = '\n';
    CHECK(write(STDOUT_FILENO, line, used) == (ssize_t)used, "short write");
}

int main(int argc, char **argv)
{
    int provided;

    prog_name = "requests";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    thread_multiple = provided == MPI_THREAD_MULTIPLE;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    CHECK(wp % 2 == 0, "needs an even number of ranks, got %d", wp);
    peer = wr ^ 1;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

#ifndef HAVE_PCOLL
    printf("requests: rank %d unsupported pcoll: MPI %d.%d has no persistent collectives "
           "and no MPIX_ extension for them\n", wr, MPI_VERSION, MPI_SUBVERSION);
#endif
#ifndef HAVE_PARTITIONED
    printf("requests: rank %d unsupported partitioned: MPI %d.%d has no partitioned "
           "communication (MPI 4.0)\n", wr, MPI_VERSION, MPI_SUBVERSION);
#endif
    int tag = 0;
    for (int c = 0; c < NCASES; c++) {
        for (int call = 0; call < NCALLS; call++) {
            struct set *s = calloc(1, sizeof *s);
            struct outcome o[MAXREQ];
            CHECK(s != NULL, "out of memory");
            memset(o, 0, sizeof o);
            tag += 10;
            where = cases[c];
#ifdef MPICH
            /* MPICH 4.0.2's MPI_Waitall asserts on a generalized request that is
             * not complete yet (request_impl.c: "generalized requests should
             * already be finished"), with or without the library. */
            greq_complete_first = call == WAITALL || call == WAITALL_IGNORE;
#endif
            const char *why = skipped(c, call);
            if (why) {
                printf("requests: rank %d case=%s call=%s skipped: %s\n", wr, cases[c],
                       call_names[call], why);
                free(s);
                continue;
            }
            if (!build(c, s, tag, call)) {
                free(s);
                break;
            }
            int rc = complete(s, call, o);
            for (int i = 0; i < s->n; i++)
                o[i].null_after = s->req[i] == MPI_REQUEST_NULL;
            finish(s);
            print_line(s, c, call, rc, o);
            for (int i = 0; i < s->n; i++)
                free(s->greq[i]);
            free(s);
            /* The next case's collectives and tags start together on every rank. */
            OK(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    MPI_Finalize();
    printf("requests: rank %d finalized\n", wr);
    return 0;
}
