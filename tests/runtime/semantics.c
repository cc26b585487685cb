/* Every blocking call libvhpc_wait intercepts, with real data and results
 * checked against closed forms, on MPI_COMM_WORLD and on a split
 * communicator (reversed rank order).  Runs with any number of ranks >= 2.
 *
 * Prints "semantics: rank <r> blocking=<n>" before MPI_Finalize and
 * "semantics: rank <r> finalized" after it. */
#include <string.h>

#include "check.h"

#define BIG (1 << 16)  /* large enough for the rendezvous protocol */

struct comm_info {
    MPI_Comm c;
    int r, p, left, right;
};

static struct comm_info info(MPI_Comm c)
{
    struct comm_info ci = {.c = c};

    MPI_Comm_rank(c, &ci.r);
    MPI_Comm_size(c, &ci.p);
    ci.right = (ci.r + 1) % ci.p;
    ci.left = (ci.r - 1 + ci.p) % ci.p;
    return ci;
}

/* ---- point to point ------------------------------------------------------ */

/* Ring shift with a blocking send mode; rank 0 sends first so even
 * synchronous sends cannot deadlock. */
static void ring(struct comm_info ci, const char *mode, int n, int tag)
{
    int *sb = xmalloc(n * sizeof(int)), *rb = xmalloc(n * sizeof(int));
    MPI_Status st;

    fill(sb, n, ci.r, tag);
    memset(rb, 0, n * sizeof(int));
    for (int step = 0; step < 2; step++) {
        if ((step == 0) == (ci.r == 0)) {
            if (strcmp(mode, "Ssend") == 0)
                BLK(MPI_Ssend(sb, n, MPI_INT, ci.right, tag, ci.c));
            else
                BLK(MPI_Send(sb, n, MPI_INT, ci.right, tag, ci.c));
        } else {
            BLK(MPI_Recv(rb, n, MPI_INT, ci.left, tag, ci.c, &st));
        }
    }
    expect_status(&st, ci.left, tag, n, mode);
    expect_vals(rb, n, ci.left, tag, mode);
    free(sb);
    free(rb);
}

/* Ready send is legal only once the receive is posted: Irecv, Barrier, Rsend. */
static void rsend(struct comm_info ci, int n, int tag)
{
    int *sb = xmalloc(n * sizeof(int)), *rb = xmalloc(n * sizeof(int));
    MPI_Request rq;
    MPI_Status st;

    fill(sb, n, ci.r, tag);
    OK(MPI_Irecv(rb, n, MPI_INT, ci.left, tag, ci.c, &rq));
    BLK(MPI_Barrier(ci.c));
    BLK(MPI_Rsend(sb, n, MPI_INT, ci.right, tag, ci.c));
    BLK(MPI_Wait(&rq, &st));
    CHECK(rq == MPI_REQUEST_NULL, "Wait left the request non-null");
    expect_status(&st, ci.left, tag, n, "Rsend");
    expect_vals(rb, n, ci.left, tag, "Rsend");
    free(sb);
    free(rb);
}

/* Rank 0 receives from everyone with wildcards; sources, tags and sizes differ. */
static void wildcards(struct comm_info ci)
{
    int cap = ci.p + 3, *buf = xmalloc(cap * sizeof(int));
    MPI_Status st;

    if (ci.r != 0) {
        fill(buf, ci.r + 3, ci.r, 100 + ci.r);
        BLK(MPI_Send(buf, ci.r + 3, MPI_INT, 0, 100 + ci.r, ci.c));
    } else {
        int *seen = calloc(ci.p, sizeof(int));
        for (int k = 1; k < ci.p; k++) {
            BLK(MPI_Recv(buf, cap, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, ci.c, &st));
            int src = st.MPI_SOURCE;
            CHECK(src > 0 && src < ci.p && !seen[src], "ANY_SOURCE gave source %d", src);
            seen[src] = 1;
            expect_status(&st, src, 100 + src, src + 3, "Recv ANY_SOURCE/ANY_TAG");
            expect_vals(buf, src + 3, src, 100 + src, "Recv ANY_SOURCE/ANY_TAG");
        }
        free(seen);
    }
    /* Later phases send to rank 0 too: keep them out of the wildcard receives. */
    BLK(MPI_Barrier(ci.c));
    /* MPI_PROC_NULL: completes at once with source PROC_NULL, tag ANY_TAG, count 0. */
    BLK(MPI_Recv(buf, cap, MPI_INT, MPI_PROC_NULL, 5, ci.c, &st));
    expect_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, 0, "Recv from MPI_PROC_NULL");
    BLK(MPI_Probe(MPI_PROC_NULL, 5, ci.c, &st));
    expect_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, 0, "Probe of MPI_PROC_NULL");
    BLK(MPI_Send(buf, 1, MPI_INT, MPI_PROC_NULL, 5, ci.c));
    free(buf);
}

static void sendrecv(struct comm_info ci)
{
    int sb[64], rb[64];
    MPI_Status st;
    int stag = 200 + ci.r, n = ci.r + 1;

    fill(sb, n, ci.r, stag);
    BLK(MPI_Sendrecv(sb, n, MPI_INT, ci.right, stag, rb, 64, MPI_INT, ci.left,
                     MPI_ANY_TAG, ci.c, &st));
    expect_status(&st, ci.left, 200 + ci.left, ci.left + 1, "Sendrecv");
    expect_vals(rb, ci.left + 1, ci.left, 200 + ci.left, "Sendrecv");

    BLK(MPI_Sendrecv(sb, n, MPI_INT, MPI_PROC_NULL, 0, rb, 64, MPI_INT,
                     MPI_PROC_NULL, 0, ci.c, &st));
    expect_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, 0, "Sendrecv with MPI_PROC_NULL");

    /* Large and with MPI_STATUS_IGNORE. */
    int *bs = xmalloc(BIG * sizeof(int)), *br = xmalloc(BIG * sizeof(int));
    fill(bs, BIG, ci.r, 210);
    BLK(MPI_Sendrecv(bs, BIG, MPI_INT, ci.right, 210, br, BIG, MPI_INT, ci.left, 210,
                     ci.c, MPI_STATUS_IGNORE));
    expect_vals(br, BIG, ci.left, 210, "Sendrecv large");
    free(bs);
    free(br);
}

static void sendrecv_replace(struct comm_info ci)
{
    enum { N = 300, K = 50 };
    int buf[N];
    MPI_Status st;
    MPI_Datatype vec;
    int n = -1;

    fill(buf, N, ci.r, 300);
    BLK(MPI_Sendrecv_replace(buf, N, MPI_INT, ci.right, 300, ci.left, 300, ci.c, &st));
    expect_status(&st, ci.left, 300, N, "Sendrecv_replace");
    expect_vals(buf, N, ci.left, 300, "Sendrecv_replace");

    /* Every third int travels; the others must stay untouched. */
    OK(MPI_Type_vector(K, 1, 3, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    fill(buf, 3 * K, ci.r, 301);
    BLK(MPI_Sendrecv_replace(buf, 1, vec, ci.right, 301, ci.left, 301, ci.c, &st));
    MPI_Get_count(&st, vec, &n);
    CHECK(n == 1 && st.MPI_SOURCE == ci.left && st.MPI_TAG == 301,
          "Sendrecv_replace vector: count=%d source=%d tag=%d", n, st.MPI_SOURCE, st.MPI_TAG);
    MPI_Get_elements(&st, MPI_INT, &n);
    CHECK(n == K, "Sendrecv_replace vector: %d elements, expected %d", n, K);
    for (int i = 0; i < 3 * K; i++) {
        int want = val(i % 3 == 0 ? ci.left : ci.r, 301, i);
        CHECK(buf[i] == want, "Sendrecv_replace vector: element %d is %d, expected %d",
              i, buf[i], want);
    }
    OK(MPI_Type_free(&vec));
}

/* Probe learns the size of a message, then Recv takes exactly that many. */
static void probe(struct comm_info ci)
{
    int mine = (ci.r * 7) % 13 + 1, theirs = (ci.left * 7) % 13 + 1;
    int sb[16], sb2[32];
    MPI_Request rq[2];
    MPI_Status st, st2;
    int n = -1;

    fill(sb, mine, ci.r, 400);
    fill(sb2, mine + 16, ci.r, 401);
    OK(MPI_Isend(sb, mine, MPI_INT, ci.right, 400, ci.c, &rq[0]));
    OK(MPI_Isend(sb2, mine + 16, MPI_INT, ci.right, 401, ci.c, &rq[1]));

    BLK(MPI_Probe(MPI_ANY_SOURCE, 400, ci.c, &st));
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(st.MPI_SOURCE == ci.left && st.MPI_TAG == 400 && n == theirs,
          "Probe: source=%d tag=%d count=%d, expected %d/400/%d", st.MPI_SOURCE,
          st.MPI_TAG, n, ci.left, theirs);
    int *rb = xmalloc(n * sizeof(int));
    BLK(MPI_Recv(rb, n, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, ci.c, &st2));
    expect_status(&st2, ci.left, 400, theirs, "Recv after Probe");
    expect_vals(rb, theirs, ci.left, 400, "Recv after Probe");
    free(rb);

    BLK(MPI_Probe(ci.left, MPI_ANY_TAG, ci.c, &st));
    expect_status(&st, ci.left, 401, theirs + 16, "Probe ANY_TAG");
    rb = xmalloc((theirs + 16) * sizeof(int));
    BLK(MPI_Recv(rb, theirs + 16, MPI_INT, ci.left, 401, ci.c, MPI_STATUS_IGNORE));
    expect_vals(rb, theirs + 16, ci.left, 401, "Recv after Probe ANY_TAG");
    free(rb);
    BLK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    BLK(MPI_Wait(&rq[1], &st));
}

/* Waitall over receives, sends and a null request, small and large. */
static void waitall(struct comm_info ci)
{
    enum { NA = 1000 };
    int *sa = xmalloc(NA * sizeof(int)), *ra = xmalloc(NA * sizeof(int));
    int *sb = xmalloc(BIG * sizeof(int)), *rb = xmalloc(BIG * sizeof(int));
    MPI_Request rq[5];
    MPI_Status st[5];

    for (int round = 0; round < 2; round++) {
        int ta = 500 + 2 * round, tb = 501 + 2 * round;
        fill(sa, NA, ci.r, ta);
        fill(sb, BIG, ci.r, tb);
        OK(MPI_Irecv(ra, NA, MPI_INT, ci.left, ta, ci.c, &rq[0]));
        OK(MPI_Isend(sa, NA, MPI_INT, ci.right, ta, ci.c, &rq[1]));
        rq[2] = MPI_REQUEST_NULL;
        OK(MPI_Irecv(rb, BIG, MPI_INT, ci.right, tb, ci.c, &rq[3]));
        OK(MPI_Isend(sb, BIG, MPI_INT, ci.left, tb, ci.c, &rq[4]));
        if (round == 0) {
            BLK(MPI_Waitall(5, rq, st));
            expect_status(&st[0], ci.left, ta, NA, "Waitall status 0");
            expect_empty_status(&st[2], "Waitall null entry");
            expect_status(&st[3], ci.right, tb, BIG, "Waitall status 3");
        } else {
            BLK(MPI_Waitall(5, rq, MPI_STATUSES_IGNORE));
        }
        for (int k = 0; k < 5; k++)
            CHECK(rq[k] == MPI_REQUEST_NULL, "Waitall left request %d non-null", k);
        expect_vals(ra, NA, ci.left, ta, "Waitall small");
        expect_vals(rb, BIG, ci.right, tb, "Waitall large");
    }
    free(sa);
    free(ra);
    free(sb);
    free(rb);
}

/* Receives with distinct tags and sizes, a null slot at index 1; senders
 * post in reverse order.  Which = 0: Waitany, 1: Waitsome. */
static void wait_some_any(struct comm_info ci, int which)
{
    enum { NR = 4, NULL_SLOT = 1 };
    int tag0 = which ? 650 : 600;
    int rbuf[NR][8], sbuf[NR][8], seen[NR] = {0}, got = 0;
    MPI_Request rq[NR], sq[NR];
    MPI_Status st[NR];
    const char *name = which ? "Waitsome" : "Waitany";

    for (int k = 0; k < NR; k++) {
        rq[k] = sq[k] = MPI_REQUEST_NULL;
        if (k == NULL_SLOT)
            continue;
        OK(MPI_Irecv(rbuf[k], 8, MPI_INT, ci.left, tag0 + k, ci.c, &rq[k]));
    }
    for (int k = NR - 1; k >= 0; k--) {
        if (k == NULL_SLOT)
            continue;
        fill(sbuf[k], k + 1, ci.r, tag0 + k);
        OK(MPI_Isend(sbuf[k], k + 1, MPI_INT, ci.right, tag0 + k, ci.c, &sq[k]));
    }
    for (;;) {
        int idx[NR], n;
        if (which == 0) {
            BLK(MPI_Waitany(NR, rq, &idx[0], &st[0]));
            n = idx[0] == MPI_UNDEFINED ? MPI_UNDEFINED : 1;
            if (n == MPI_UNDEFINED)
                expect_empty_status(&st[0], "Waitany with no active request");
        } else {
            BLK(MPI_Waitsome(NR, rq, &n, idx, st));
        }
        if (n == MPI_UNDEFINED)
            break;
        CHECK(n >= 1 && n <= NR, "%s returned outcount %d", name, n);
        for (int j = 0; j < n; j++) {
            int k = idx[j];
            CHECK(k >= 0 && k < NR && k != NULL_SLOT && !seen[k],
                  "%s returned index %d (null slot %d, seen %d)", name, k, NULL_SLOT,
                  k >= 0 && k < NR ? seen[k] : -1);
            CHECK(rq[k] == MPI_REQUEST_NULL, "%s left request %d non-null", name, k);
            seen[k] = 1;
            got++;
            expect_status(&st[j], ci.left, tag0 + k, k + 1, name);
            expect_vals(rbuf[k], k + 1, ci.left, tag0 + k, name);
        }
    }
    CHECK(got == NR - 1, "%s completed %d receives, expected %d", name, got, NR - 1);
    BLK(MPI_Waitall(NR, sq, MPI_STATUSES_IGNORE));
}

static void wait_null(void)
{
    MPI_Request rq = MPI_REQUEST_NULL;
    MPI_Status st;

    BLK(MPI_Wait(&rq, &st));
    expect_empty_status(&st, "Wait on MPI_REQUEST_NULL");
    BLK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
}

/* Persistent requests: Startall/Start, Wait and Waitall, twice; then a Wait
 * on the inactive request returns at once with an empty status. */
static void persistent(struct comm_info ci)
{
    enum { N = 2000 };
    int *sb = xmalloc(N * sizeof(int)), *rb = xmalloc(N * sizeof(int));
    MPI_Request pq[2];
    MPI_Status st, sts[2];

    OK(MPI_Recv_init(rb, N, MPI_INT, ci.left, 700, ci.c, &pq[0]));
    OK(MPI_Send_init(sb, N, MPI_INT, ci.right, 700, ci.c, &pq[1]));
    for (int it = 0; it < 2; it++) {
        /* values change per round, proving the second round really moved data */
        for (int i = 0; i < N; i++)
            sb[i] = val(ci.r, 700 + it, i);
        memset(rb, 0, N * sizeof(int));
        if (it == 0) {
            OK(MPI_Startall(2, pq));
            BLK(MPI_Wait(&pq[0], &st));
            BLK(MPI_Wait(&pq[1], MPI_STATUS_IGNORE));
        } else {
            OK(MPI_Start(&pq[0]));
            OK(MPI_Start(&pq[1]));
            BLK(MPI_Waitall(2, pq, sts));
            st = sts[0];
        }
        CHECK(pq[0] != MPI_REQUEST_NULL && pq[1] != MPI_REQUEST_NULL,
              "Wait freed a persistent request (round %d)", it);
        expect_status(&st, ci.left, 700, N, "persistent");
        for (int i = 0; i < N; i++)
            CHECK(rb[i] == val(ci.left, 700 + it, i),
                  "persistent round %d: element %d is %d", it, i, rb[i]);
    }
    BLK(MPI_Wait(&pq[0], &st));
    expect_empty_status(&st, "Wait on an inactive persistent request");
    OK(MPI_Request_free(&pq[0]));
    OK(MPI_Request_free(&pq[1]));
    free(sb);
    free(rb);
}

static void test_p2p(struct comm_info ci)
{
    ring(ci, "Send", 10, 10);
    ring(ci, "Send", BIG, 11);
    ring(ci, "Ssend", 10, 12);
    ring(ci, "Ssend", BIG, 13);
    rsend(ci, 10, 14);
    rsend(ci, BIG, 15);
    wildcards(ci);
    sendrecv(ci);
    sendrecv_replace(ci);
    probe(ci);
    waitall(ci);
    wait_some_any(ci, 0);
    wait_some_any(ci, 1);
    wait_null();
    persistent(ci);
}

/* ---- collectives --------------------------------------------------------- */

static void expect_ints(const int *got, const int *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        CHECK(got[i] == want[i], "%s: element %d is %d, expected %d", what, i, got[i],
              want[i]);
}

static void bcast(struct comm_info ci)
{
    int *buf = xmalloc(BIG * sizeof(int)), root = ci.p - 1;

    for (int n = 10; n <= BIG; n += BIG - 10) {
        if (ci.r == root)
            fill(buf, n, root, 800);
        else
            memset(buf, 0, n * sizeof(int));
        BLK(MPI_Bcast(buf, n, MPI_INT, root, ci.c));
        expect_vals(buf, n, root, 800, "Bcast");
    }
    free(buf);
}

static void reduce(struct comm_info ci)
{
    enum { N = 7 };
    int sb[N], rb[N], want[N];
    double ds[N], dr[N];
    int p = ci.p;

    for (int i = 0; i < N; i++) {
        sb[i] = ci.r + i;
        want[i] = p * (p - 1) / 2 + p * i;
        ds[i] = ci.r * 1.5 - i;
        rb[i] = -1;
    }
    BLK(MPI_Reduce(sb, rb, N, MPI_INT, MPI_SUM, 0, ci.c));
    if (ci.r == 0)
        expect_ints(rb, want, N, "Reduce SUM");

    BLK(MPI_Reduce(ds, dr, N, MPI_DOUBLE, MPI_MAX, p - 1, ci.c));
    if (ci.r == p - 1)
        for (int i = 0; i < N; i++)
            CHECK(dr[i] == (p - 1) * 1.5 - i, "Reduce MAX: element %d is %g", i, dr[i]);

    /* MPI_IN_PLACE at the root. */
    if (ci.r == 0) {
        memcpy(rb, sb, sizeof sb);
        BLK(MPI_Reduce(MPI_IN_PLACE, rb, N, MPI_INT, MPI_SUM, 0, ci.c));
        expect_ints(rb, want, N, "Reduce IN_PLACE");
    } else {
        BLK(MPI_Reduce(sb, NULL, N, MPI_INT, MPI_SUM, 0, ci.c));
    }
}

static void allreduce(struct comm_info ci)
{
    int p = ci.p, *sb = xmalloc(BIG * sizeof(int)), *rb = xmalloc(BIG * sizeof(int));
    struct { int v, idx; } loc, locr;

    for (int n = 5; n <= BIG; n += BIG - 5) {
        for (int i = 0; i < n; i++)
            sb[i] = (ci.r + 1) * (i % 1000 + 1);
        BLK(MPI_Allreduce(sb, rb, n, MPI_INT, MPI_SUM, ci.c));
        for (int i = 0; i < n; i++)
            CHECK(rb[i] == (i % 1000 + 1) * p * (p + 1) / 2,
                  "Allreduce SUM n=%d: element %d is %d", n, i, rb[i]);
        /* MPI_IN_PLACE */
        BLK(MPI_Allreduce(MPI_IN_PLACE, sb, n, MPI_INT, MPI_SUM, ci.c));
        for (int i = 0; i < n; i++)
            CHECK(sb[i] == (i % 1000 + 1) * p * (p + 1) / 2,
                  "Allreduce IN_PLACE n=%d: element %d is %d", n, i, sb[i]);
    }

    /* MINLOC: value |2r - p|, ties go to the lowest rank. */
    int best = -1, bestv = 1 << 30;
    for (int q = 0; q < p; q++)
        if (abs(2 * q - p) < bestv)
            bestv = abs(2 * q - p), best = q;
    loc.v = abs(2 * ci.r - p);
    loc.idx = ci.r;
    BLK(MPI_Allreduce(&loc, &locr, 1, MPI_2INT, MPI_MINLOC, ci.c));
    CHECK(locr.v == bestv && locr.idx == best, "Allreduce MINLOC gave (%d,%d), expected (%d,%d)",
          locr.v, locr.idx, bestv, best);
    free(sb);
    free(rb);
}

static void alltoall(struct comm_info ci)
{
    enum { K = 3 };
    int p = ci.p, *sb = xmalloc(p * K * sizeof(int)), *rb = xmalloc(p * K * sizeof(int));

    for (int j = 0; j < p; j++)
        for (int k = 0; k < K; k++)
            sb[j * K + k] = ci.r * 1000 + j * 10 + k;
    BLK(MPI_Alltoall(sb, K, MPI_INT, rb, K, MPI_INT, ci.c));
    for (int j = 0; j < p; j++)
        for (int k = 0; k < K; k++)
            CHECK(rb[j * K + k] == j * 1000 + ci.r * 10 + k,
                  "Alltoall: from %d element %d is %d", j, k, rb[j * K + k]);
    free(sb);
    free(rb);
}

/* Counts differ per pair; received blocks are separated by one untouched slot. */
static void alltoallv(struct comm_info ci)
{
    int p = ci.p, r = ci.r;
    int *sc = xmalloc(p * sizeof(int)), *sd = xmalloc(p * sizeof(int));
    int *rc = xmalloc(p * sizeof(int)), *rd = xmalloc(p * sizeof(int));
    int *sb = xmalloc(4 * p * sizeof(int)), *rb = xmalloc(5 * p * sizeof(int));

    for (int j = 0, so = 0, ro = 0; j < p; j++) {
        sc[j] = (r + j) % 3 + 1;
        rc[j] = (j + r) % 3 + 1;
        sd[j] = so;
        rd[j] = ro;
        so += sc[j];
        ro += rc[j] + 1;
        for (int k = 0; k < sc[j]; k++)
            sb[sd[j] + k] = r * 1000 + j * 10 + k;
    }
    for (int i = 0; i < 5 * p; i++)
        rb[i] = -1;
    BLK(MPI_Alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, ci.c));
    for (int j = 0; j < p; j++) {
        for (int k = 0; k < rc[j]; k++)
            CHECK(rb[rd[j] + k] == j * 1000 + r * 10 + k,
                  "Alltoallv: from %d element %d is %d", j, k, rb[rd[j] + k]);
        CHECK(rb[rd[j] + rc[j]] == -1, "Alltoallv wrote into the gap after block %d", j);
    }
    free(sc);
    free(sd);
    free(rc);
    free(rd);
    free(sb);
    free(rb);
}

static void allgather(struct comm_info ci)
{
    enum { K = 2 };
    int p = ci.p, sb[K], *rb = xmalloc(p * K * sizeof(int));

    for (int k = 0; k < K; k++)
        sb[k] = ci.r * 100 + k;
    BLK(MPI_Allgather(sb, K, MPI_INT, rb, K, MPI_INT, ci.c));
    for (int j = 0; j < p * K; j++)
        CHECK(rb[j] == (j / K) * 100 + j % K, "Allgather: element %d is %d", j, rb[j]);

    for (int j = 0; j < p * K; j++)
        rb[j] = j / K == ci.r ? ci.r * 100 + j % K + 1 : -1;
    BLK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rb, K, MPI_INT, ci.c));
    for (int j = 0; j < p * K; j++)
        CHECK(rb[j] == (j / K) * 100 + j % K + 1, "Allgather IN_PLACE: element %d is %d",
              j, rb[j]);
    free(rb);
}

/* Rank j contributes j+1 values; blocks land with one-slot gaps. */
static void allgatherv(struct comm_info ci)
{
    int p = ci.p, *cnt = xmalloc(p * sizeof(int)), *dsp = xmalloc(p * sizeof(int));
    int total = 0, sb[64], *rb;

    for (int j = 0; j < p; j++) {
        cnt[j] = j + 1;
        dsp[j] = total;
        total += cnt[j] + 1;
    }
    rb = xmalloc(total * sizeof(int));
    for (int i = 0; i < total; i++)
        rb[i] = -1;
    for (int k = 0; k <= ci.r; k++)
        sb[k] = ci.r * 100 + k;
    BLK(MPI_Allgatherv(sb, ci.r + 1, MPI_INT, rb, cnt, dsp, MPI_INT, ci.c));
    for (int j = 0; j < p; j++) {
        for (int k = 0; k < cnt[j]; k++)
            CHECK(rb[dsp[j] + k] == j * 100 + k, "Allgatherv: from %d element %d is %d",
                  j, k, rb[dsp[j] + k]);
        CHECK(rb[dsp[j] + cnt[j]] == -1, "Allgatherv wrote into the gap after block %d", j);
    }
    free(cnt);
    free(dsp);
    free(rb);
}

static void gather_scatter(struct comm_info ci)
{
    enum { K = 2 };
    int p = ci.p, r = ci.r, sb[K], rb[K], *all = xmalloc(p * K * sizeof(int));
    int groot = 1 % p;

    /* Gather to rank 1 (0 if alone). */
    for (int k = 0; k < K; k++)
        sb[k] = r * 100 + k + 7;
    BLK(MPI_Gather(sb, K, MPI_INT, all, K, MPI_INT, groot, ci.c));
    if (r == groot)
        for (int j = 0; j < p * K; j++)
            CHECK(all[j] == (j / K) * 100 + j % K + 7, "Gather: element %d is %d", j, all[j]);

    /* Scatter from rank 0. */
    if (r == 0)
        for (int j = 0; j < p * K; j++)
            all[j] = (j / K) * 100 + j % K + 3;
    BLK(MPI_Scatter(all, K, MPI_INT, rb, K, MPI_INT, 0, ci.c));
    for (int k = 0; k < K; k++)
        CHECK(rb[k] == r * 100 + k + 3, "Scatter: element %d is %d", k, rb[k]);
    free(all);
}

static void gatherv_scatterv(struct comm_info ci)
{
    int p = ci.p, r = ci.r;
    int *cnt = xmalloc(p * sizeof(int)), *dsp = xmalloc(p * sizeof(int));
    int total = 0, sb[64], rb[64], *all;

    /* Gatherv to 0: rank j sends j+2 values, blocks two slots apart. */
    for (int j = 0; j < p; j++) {
        cnt[j] = j + 2;
        dsp[j] = total;
        total += cnt[j] + 2;
    }
    all = xmalloc(total * sizeof(int));
    for (int i = 0; i < total; i++)
        all[i] = -1;
    for (int k = 0; k < r + 2; k++)
        sb[k] = r * 100 + k;
    BLK(MPI_Gatherv(sb, r + 2, MPI_INT, all, cnt, dsp, MPI_INT, 0, ci.c));
    if (r == 0)
        for (int j = 0; j < p; j++) {
            for (int k = 0; k < cnt[j]; k++)
                CHECK(all[dsp[j] + k] == j * 100 + k, "Gatherv: from %d element %d is %d",
                      j, k, all[dsp[j] + k]);
            CHECK(all[dsp[j] + cnt[j]] == -1 && all[dsp[j] + cnt[j] + 1] == -1,
                  "Gatherv wrote into the gap after block %d", j);
        }

    /* Scatterv from the last rank: rank j gets j+1 values. */
    for (int j = 0, o = 0; j < p; j++) {
        cnt[j] = j + 1;
        dsp[j] = o;
        o += cnt[j];
        if (r == p - 1)
            for (int k = 0; k < cnt[j]; k++)
                all[dsp[j] + k] = j * 100 + k + 5;
    }
    for (int k = 0; k < 64; k++)
        rb[k] = -1;
    BLK(MPI_Scatterv(all, cnt, dsp, MPI_INT, rb, r + 1, MPI_INT, p - 1, ci.c));
    for (int k = 0; k <= r; k++)
        CHECK(rb[k] == r * 100 + k + 5, "Scatterv: element %d is %d", k, rb[k]);
    CHECK(rb[r + 1] == -1, "Scatterv wrote past its count");
    free(cnt);
    free(dsp);
    free(all);
}

static void reduce_scatter(struct comm_info ci)
{
    enum { K = 3 };
    int p = ci.p, r = ci.r, total = p * (p + 1) / 2;
    int *cnt = xmalloc(p * sizeof(int)), *sb = xmalloc((total + p * K) * sizeof(int));
    int rb[64], off = r * (r + 1) / 2;

    /* Rank j receives j+1 values; sb[g] = r + g summed over ranks. */
    for (int j = 0; j < p; j++)
        cnt[j] = j + 1;
    for (int g = 0; g < total; g++)
        sb[g] = r + g;
    BLK(MPI_Reduce_scatter(sb, rb, cnt, MPI_INT, MPI_SUM, ci.c));
    for (int e = 0; e <= r; e++)
        CHECK(rb[e] == p * (p - 1) / 2 + p * (off + e), "Reduce_scatter: element %d is %d",
              e, rb[e]);

    for (int g = 0; g < p * K; g++)
        sb[g] = 2 * r + g;
    BLK(MPI_Reduce_scatter_block(sb, rb, K, MPI_INT, MPI_SUM, ci.c));
    for (int e = 0; e < K; e++)
        CHECK(rb[e] == p * (p - 1) + p * (r * K + e),
              "Reduce_scatter_block: element %d is %d", e, rb[e]);
    free(cnt);
    free(sb);
}

static void scans(struct comm_info ci)
{
    int r = ci.r, sb[2] = {r + 1, 2 * (r + 1)}, rb[2] = {-1, -1};

    BLK(MPI_Scan(sb, rb, 2, MPI_INT, MPI_SUM, ci.c));
    CHECK(rb[0] == (r + 1) * (r + 2) / 2 && rb[1] == (r + 1) * (r + 2),
          "Scan gave %d %d", rb[0], rb[1]);
    rb[0] = rb[1] = -1;
    BLK(MPI_Exscan(sb, rb, 2, MPI_INT, MPI_SUM, ci.c));
    if (r > 0)  /* undefined on rank 0 */
        CHECK(rb[0] == r * (r + 1) / 2 && rb[1] == r * (r + 1), "Exscan gave %d %d", rb[0],
              rb[1]);
}

static void test_collectives(struct comm_info ci)
{
    BLK(MPI_Barrier(ci.c));
    bcast(ci);
    reduce(ci);
    allreduce(ci);
    alltoall(ci);
    alltoallv(ci);
    allgather(ci);
    allgatherv(ci);
    gather_scatter(ci);
    gatherv_scatterv(ci);
    reduce_scatter(ci);
    scans(ci);
    BLK(MPI_Barrier(ci.c));
}

int main(int argc, char **argv)
{
    int wr, wp, sr, sp;
    MPI_Comm split;

    prog_name = "semantics";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    CHECK(wp >= 2, "needs at least 2 ranks, got %d", wp);

    where = "world p2p";
    test_p2p(info(MPI_COMM_WORLD));
    where = "world collectives";
    test_collectives(info(MPI_COMM_WORLD));

    /* Even and odd ranks, each half in reversed order. */
    OK(MPI_Comm_split(MPI_COMM_WORLD, wr % 2, -wr, &split));
    MPI_Comm_rank(split, &sr);
    MPI_Comm_size(split, &sp);
    CHECK(sp == (wp - wr % 2 + 1) / 2 && sr == sp - 1 - wr / 2,
          "split gave rank %d of %d", sr, sp);
    if (sp >= 2) {
        where = "split p2p";
        test_p2p(info(split));
    }
    where = "split collectives";
    test_collectives(info(split));
    OK(MPI_Comm_free(&split));

    where = "finalize";
    printf("semantics: rank %d blocking=%d\n", wr, nblocking);
    MPI_Finalize();
    printf("semantics: rank %d finalized\n", wr);
    return 0;
}
