/*
 * pingpong: point-to-point latency and bandwidth between pairs of MPI ranks,
 * in the spirit of Presta's `com` and the OSU micro-benchmarks.
 *
 * Ranks (0,1), (2,3), ... form pairs that run at the same time; an odd last
 * rank only joins the collectives. Tests:
 *   lat   ping-pong with MPI_Send/MPI_Recv; reports the half round trip.
 *   bw    the lower rank sends a window of WINDOW messages (MPI_Isend, the
 *         peer MPI_Irecv, both MPI_Waitall), then the peer sends a 1-byte
 *         ack (OSU style); reports the time per message.
 *   bibw  both ranks send a window to each other at once; MB/s counts both
 *         directions.
 *   exch  both ranks exchange one message at once (MPI_Sendrecv), as b_eff's
 *         ring does; reports the time per exchange, MB/s counts both
 *         directions. Not run unless asked for (-T exch).
 *   fresh lat, but the sender writes every cache line of its buffer (the
 *         bytes it holds) before each send, as an application sends data it
 *         has just computed: the lines are then modified in the sender's
 *         cache, and a receiver on another CPU that copies them (a single-copy
 *         rendezvous) fetches each from there; lat's buffer stays in both
 *         caches. Reports the half round trip less the writing's own time
 *         (timed alone on the sender's CPU). Not run unless asked for.
 * Iterations per size are chosen from a short calibration so that each
 * timed loop lasts about -t seconds. The figure reported is the slowest
 * pair's (MPI_Reduce MAX). Received data are checked after every timed
 * loop; a mismatch aborts with a non-zero code.
 *
 * Output (rank 0, stdout): CSV `test,size,iters,usec,MBps`, MB = 1e6 bytes.
 * Only blocking calls and Isend/Irecv/Waitall are used, so an interposition
 * library such as libvhpc_wait sees every wait.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW 64
#define MIN_ITERS 2
#define MAX_ITERS 100000
#define WARMUP_ITERS 1
/* Receive buffers of one window share memory beyond this budget (as OSU's
 * do); they carry identical bytes within an iteration. */
#define WINDOW_BUDGET (16u << 20)
#define TAG_DATA 1
#define TAG_ACK 2
#define CACHE_LINE 64

enum test { LAT, BW, BIBW, EXCH, FRESH, NTESTS };
static const char *const test_names[NTESTS] = {"lat", "bw", "bibw", "exch", "fresh"};

struct options {
    size_t min_size, max_size;
    double seconds;
    double warmup; /* seconds of 1-byte ping-pong before the first measurement */
    int tests[NTESTS];
    int corrupt; /* self-test of the checker: spoil one received byte */
};

struct pair {
    int rank, size, peer; /* peer < 0: odd rank out, only joins collectives */
};

struct buffers {
    unsigned char *send;
    unsigned char *recv[WINDOW];
    size_t nrecv; /* distinct receive buffers */
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-m MIN] [-M MAX] [-s SIZE] [-T TESTS] [-t SECONDS] [-w SECONDS] [-C] [-h]\n"
            "  -m MIN      smallest message in bytes (default 1)\n"
            "  -M MAX      largest message in bytes (default 4194304); sizes double\n"
            "  -s SIZE     a single message size (same as -m SIZE -M SIZE)\n"
            "  -T TESTS    comma-separated subset of lat,bw,bibw,exch,fresh (default lat,bw,bibw)\n"
            "  -t SECONDS  target time of each timed loop (default 0.2), within 2..100000 iterations\n"
            "  -w SECONDS  first ping-pong 1 byte for this long, unmeasured (default 0): a wait\n"
            "              library that adapts to the host (libvhpc_wait) is measured settled\n"
            "  -C          self-test: corrupt a received byte; the run must fail (exit 3)\n"
            "  -h          this help\n"
            "Runs on 2 or more ranks; pairs (0,1),(2,3),... run concurrently.\n"
            "CSV on stdout: test,size,iters,usec,MBps (MB = 1e6 bytes, 6 significant digits).\n",
            prog);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || v == 0 || v > (1ull << 30))
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_tests(const char *s, int tests[NTESTS])
{
    char buf[64];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    memset(tests, 0, NTESTS * sizeof tests[0]);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int t = 0; t < NTESTS; t++)
            if (strcmp(tok, test_names[t]) == 0)
                tests[t] = found = 1;
        if (!found)
            return -1;
    }
    for (int t = 0; t < NTESTS; t++)
        if (tests[t])
            return 0;
    return -1;
}

/* 0: run; 1: exit 0 (help); 2: usage error. Every rank parses the same argv. */
static int parse_options(int argc, char **argv, struct options *o)
{
    o->min_size = 1;
    o->max_size = 4194304;
    o->seconds = 0.2;
    o->warmup = 0;
    o->corrupt = 0;
    for (int t = 0; t < NTESTS; t++)
        o->tests[t] = t != EXCH && t != FRESH;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt(argc, argv, "m:M:s:T:t:w:Ch")) != -1) {
        switch (c) {
        case 'm':
            if (parse_size(optarg, &o->min_size))
                return 2;
            break;
        case 'M':
            if (parse_size(optarg, &o->max_size))
                return 2;
            break;
        case 's':
            if (parse_size(optarg, &o->min_size))
                return 2;
            o->max_size = o->min_size;
            break;
        case 'T':
            if (parse_tests(optarg, o->tests))
                return 2;
            break;
        case 't':
            o->seconds = strtod(optarg, &end);
            if (*end != '\0' || !(o->seconds > 0 && o->seconds <= 3600))
                return 2;
            break;
        case 'w':
            o->warmup = strtod(optarg, &end);
            if (*end != '\0' || !(o->warmup >= 0 && o->warmup <= 3600))
                return 2;
            break;
        case 'C':
            o->corrupt = 1;
            break;
        case 'h':
            return 1;
        default:
            return 2;
        }
    }
    if (optind != argc || o->min_size > o->max_size)
        return 2;
    return 0;
}

/* Byte i of a message from `sender` in loop `round`. */
static unsigned char pattern(int sender, size_t size, unsigned round, size_t i)
{
    return (unsigned char)(sender * 151u + size * 7u + round * 31u + i * 13u + (i >> 8) + 1u);
}

static void fill(unsigned char *buf, int sender, size_t size, unsigned round)
{
    for (size_t i = 0; i < size; i++)
        buf[i] = pattern(sender, size, round, i);
}

/* Make stale data detectable: byte 0 differs from what the peer will send. */
static void spoil(unsigned char *buf, int sender, size_t size, unsigned round)
{
    memset(buf, (unsigned char)~pattern(sender, size, round, 0), size);
}

/* Counts (and reports) bytes that differ from what the peer sent. */
static int check(const unsigned char *buf, int sender, size_t size, unsigned round,
                 const struct pair *p, enum test t)
{
    for (size_t i = 0; i < size; i++) {
        unsigned char want = pattern(sender, size, round, i);
        if (buf[i] != want) {
            fprintf(stderr,
                    "pingpong: rank %d: %s size %zu: received byte %zu is 0x%02x, "
                    "expected 0x%02x from rank %d\n",
                    p->rank, test_names[t], size, i, buf[i], want, sender);
            return 1;
        }
    }
    return 0;
}

static void alloc_buffers(struct buffers *b, size_t max_size)
{
    size_t n = WINDOW_BUDGET / max_size;
    b->nrecv = n < 1 ? 1 : n > WINDOW ? WINDOW : n;
    b->send = malloc(max_size);
    if (!b->send)
        goto oom;
    memset(b->send, 0, max_size); /* touch pages now, not in a timed loop */
    for (size_t i = 0; i < b->nrecv; i++) {
        b->recv[i] = malloc(max_size);
        if (!b->recv[i])
            goto oom;
        memset(b->recv[i], 0, max_size);
    }
    for (size_t i = b->nrecv; i < WINDOW; i++)
        b->recv[i] = b->recv[i % b->nrecv];
    return;
oom:
    fprintf(stderr, "pingpong: out of memory for %zu-byte buffers\n", max_size);
    MPI_Abort(MPI_COMM_WORLD, 4);
}

static void free_buffers(struct buffers *b)
{
    free(b->send);
    for (size_t i = 0; i < b->nrecv; i++)
        free(b->recv[i]);
}

static int lower(const struct pair *p) { return p->rank < p->peer; }

/* Write every cache line of buf with the byte it holds: the content stays, the
 * lines become this CPU's, modified (volatile, so the compiler keeps it). */
static void dirty(unsigned char *buf, size_t size)
{
    volatile unsigned char *v = buf;
    for (size_t i = 0; i < size; i += CACHE_LINE)
        v[i] = v[i];
}

/* The ping-pong: lat, or with `fresh` the sender's lines written just before each
 * send (the fresh test). */
static void run_lat(const struct pair *p, struct buffers *b, size_t size, long iters,
                    int fresh)
{
    for (long i = 0; i < iters; i++) {
        if (lower(p)) {
            if (fresh)
                dirty(b->send, size);
            MPI_Send(b->send, (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD);
            MPI_Recv(b->recv[0], (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b->recv[0], (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            if (fresh)
                dirty(b->send, size);
            MPI_Send(b->send, (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD);
        }
    }
}

/* Seconds one dirty() of lines already this CPU's takes: the part of a fresh
 * half round trip that is the writing itself, not the lines' transfer. */
static double dirty_alone(struct buffers *b, size_t size, long iters)
{
    dirty(b->send, size);
    double start = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        dirty(b->send, size);
    return (MPI_Wtime() - start) / (double)iters;
}

static void run_bw(const struct pair *p, struct buffers *b, size_t size, long iters)
{
    MPI_Request req[WINDOW];
    MPI_Status st[WINDOW]; /* not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's (MPI_Status *)1 */
    char ack = 0;
    for (long i = 0; i < iters; i++) {
        if (lower(p)) {
            for (int w = 0; w < WINDOW; w++)
                MPI_Isend(b->send, (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD,
                          &req[w]);
            MPI_Waitall(WINDOW, req, st);
            MPI_Recv(&ack, 1, MPI_BYTE, p->peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < WINDOW; w++)
                MPI_Irecv(b->recv[w], (int)size, MPI_BYTE, p->peer, TAG_DATA,
                          MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(WINDOW, req, st);
            MPI_Send(&ack, 1, MPI_BYTE, p->peer, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

static void run_bibw(const struct pair *p, struct buffers *b, size_t size, long iters)
{
    MPI_Request req[2 * WINDOW];
    MPI_Status st[2 * WINDOW];
    for (long i = 0; i < iters; i++) {
        for (int w = 0; w < WINDOW; w++)
            MPI_Irecv(b->recv[w], (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD,
                      &req[w]);
        for (int w = 0; w < WINDOW; w++)
            MPI_Isend(b->send, (int)size, MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD,
                      &req[WINDOW + w]);
        MPI_Waitall(2 * WINDOW, req, st);
    }
}

static void run_exch(const struct pair *p, struct buffers *b, size_t size, long iters)
{
    for (long i = 0; i < iters; i++)
        MPI_Sendrecv(b->send, (int)size, MPI_BYTE, p->peer, TAG_DATA, b->recv[0], (int)size,
                     MPI_BYTE, p->peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void run(enum test t, const struct pair *p, struct buffers *b, size_t size, long iters)
{
    if (p->peer < 0)
        return;
    switch (t) {
    case LAT:
    case FRESH:
        run_lat(p, b, size, iters, t == FRESH);
        break;
    case BW:
        run_bw(p, b, size, iters);
        break;
    case EXCH:
        run_exch(p, b, size, iters);
        break;
    default:
        run_bibw(p, b, size, iters);
        break;
    }
}

/* Time `iters` iterations of every pair at once; the slowest pair's time on rank 0. */
static double timed(enum test t, const struct pair *p, struct buffers *b, size_t size,
                    long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    run(t, p, b, size, iters);
    double mine = MPI_Wtime() - start, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return slowest;
}

/* Double a trial count until it lasts a twentieth of the target; rank 0 decides. */
static long choose_iters(enum test t, const struct pair *p, struct buffers *b, size_t size,
                         double seconds)
{
    long n = 1, iters = 0;
    for (;;) {
        double took = timed(t, p, b, size, n);
        int done = 0;
        if (p->rank == 0) {
            done = took >= seconds / 20 || n >= MAX_ITERS;
            if (done) {
                double want = seconds / (took > 0 ? took / (double)n : 1e-9);
                iters = want < MIN_ITERS ? MIN_ITERS : want > MAX_ITERS ? MAX_ITERS : (long)want;
            }
        }
        MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (done)
            break;
        n *= 2;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return iters;
}

/* Who wrote what this rank receives in test t: the peer (lat, bibw, exch; bw's receiver). */
static int receives(enum test t, const struct pair *p)
{
    return p->peer >= 0 && (t != BW || !lower(p));
}

static void measure(enum test t, const struct pair *p, struct buffers *b, size_t size,
                    const struct options *o, unsigned round)
{
    run(t, p, b, size, WARMUP_ITERS);
    long iters = choose_iters(t, p, b, size, o->seconds);

    /* lat and exch receive into one buffer; a window fills every distinct one. */
    size_t used = receives(t, p) ? (t == LAT || t == EXCH || t == FRESH ? 1 : b->nrecv) : 0;
    fill(b->send, p->rank, size, round);
    for (size_t i = 0; i < used; i++)
        spoil(b->recv[i], p->peer, size, round);
    double took = timed(t, p, b, size, iters);
    if (used && o->corrupt)
        b->recv[used - 1][size - 1] ^= 0x5a;
    int bad = 0, any_bad;
    for (size_t i = 0; i < used; i++)
        bad |= check(b->recv[i], p->peer, size, round, p, t);
    /* Every rank stops cleanly, so the report above is not lost as it can be
     * when MPI_Abort tears the job down. */
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        MPI_Finalize();
        exit(3);
    }

    double writing = t == FRESH ? dirty_alone(b, size, iters) : 0.0;
    if (p->rank == 0) {
        double msgs = t == LAT || t == FRESH ? 2.0 * iters
                      : t == EXCH ? (double)iters : (double)iters * WINDOW;
        double usec = (took / msgs - writing) * 1e6;
        double bytes = (t == BIBW || t == EXCH ? 2.0 : 1.0) * (double)size;
        printf("%s,%zu,%ld,%.3f,%.6g\n", test_names[t], size, iters, usec, bytes / usec);
        fflush(stdout);
    }
}

/* 1-byte ping-pongs until rank 0 has seen `seconds` pass; every rank stops together. */
static void warm_up(const struct pair *p, struct buffers *b, double seconds)
{
    double start = MPI_Wtime();
    for (int done = 0; !done;) {
        run(LAT, p, b, 1, 1);
        done = MPI_Wtime() - start >= seconds;
        MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    struct pair p;
    MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p.size);

    struct options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed == 0 && p.size < 2) {
        if (p.rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks\n", argv[0]);
        parsed = 2;
    }
    if (parsed != 0) {
        if (p.rank == 0)
            usage(parsed == 1 ? stdout : stderr, argv[0]);
        MPI_Finalize();
        return parsed == 1 ? 0 : 2;
    }
    p.peer = (p.rank ^ 1) < p.size ? (p.rank ^ 1) : -1;

    struct buffers b;
    alloc_buffers(&b, o.max_size);
    if (p.rank == 0) {
        printf("test,size,iters,usec,MBps\n");
        fflush(stdout);
    }
    if (o.warmup > 0)
        warm_up(&p, &b, o.warmup);
    unsigned round = 0;
    for (int t = 0; t < NTESTS; t++) {
        if (!o.tests[t])
            continue;
        for (size_t size = o.min_size; size <= o.max_size; size *= 2)
            measure((enum test)t, &p, &b, size, &o, ++round);
    }
    free_buffers(&b);
    MPI_Finalize();
    return 0;
}
