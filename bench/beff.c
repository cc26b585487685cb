/*
 * beff: effective bandwidth in the spirit of b_eff (Rabenseifner), in C + MPI.
 *
 * Two patterns, each a ring in which every rank sends to its successor and
 * receives from its predecessor at the same time (MPI_Sendrecv):
 *   ring    successor = rank + 1 (mod p)
 *   random  the ring runs through a seeded random permutation of the ranks
 * over message sizes 1 B .. -M bytes, doubling. Repetitions per size are
 * chosen (on rank 0, shared by MPI_Bcast) so that each timed loop lasts about
 * -t seconds. The bandwidth of a pattern and size is all bytes sent by all
 * ranks over the slowest rank's time. Simplified b_eff: `beff_MBps` is the
 * arithmetic mean over sizes of the better pattern's bandwidth (the real
 * b_eff uses more patterns, logarithmic averages and fixed sizes per memory).
 * `lat_us` is the ring's 1-byte time per message. Received bytes are checked
 * after every timed loop.
 */
#include "kernel.h"

#define MAX_ITERS 1000000
#define MIN_ITERS 2
#define PERM_SEED 12345u

enum pattern { RING, RANDOM, NPATTERNS };
static const char *const pattern_names[NPATTERNS] = {"ring", "random"};

struct options {
    long max_size;
    double seconds;
    double warmup; /* seconds of 1-byte ring exchanges before the first measurement */
    int corrupt; /* self-test of the check: spoil one received byte */
};

struct peers {
    int to, from;
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-M MAX] [-t SECONDS] [-w SECONDS] [-C] [-h]\n"
            "  -M MAX      largest message in bytes, 1 B doubling up to it (default 1048576)\n"
            "  -t SECONDS  target time of each timed loop (default 0.05)\n"
            "  -w SECONDS  first exchange 1 byte in the ring for this long, unmeasured (default\n"
            "              0): a wait library that adapts to the host is measured settled\n"
            "  -C          self-test: corrupt a received byte; the run must fail (exit 3)\n"
            "  -h          this help\n"
            "A simplified b_eff: ring and random-ring patterns of MPI_Sendrecv;\n"
            "beff_MBps is the mean over sizes of the better pattern's bandwidth.\n"
            "Any number of ranks (one rank sends to itself). CSV on stdout:\n"
            "metric,value,unit; MB = 1e6 bytes.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.max_size = 1 << 20, .seconds = 0.05};
    const struct opt opts[] = {
        {'M', OPT_LONG, &o->max_size, 1, 1L << 30},
        {'t', OPT_SECONDS, &o->seconds, 0, 0},
        {'w', OPT_SECONDS, &o->warmup, 0, 0},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

/* The same permutation on every rank: Fisher-Yates driven by a fixed LCG. */
static struct peers random_ring(const struct world *w)
{
    int *perm = xmalloc(w->size * sizeof(int), "beff");
    unsigned state = PERM_SEED;
    for (int i = 0; i < w->size; i++)
        perm[i] = i;
    for (int i = w->size - 1; i > 0; i--) {
        state = state * 1103515245u + 12345u;
        int j = (int)((state >> 8) % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int pos = 0;
    while (perm[pos] != w->rank)
        pos++;
    struct peers p = {perm[(pos + 1) % w->size], perm[(pos + w->size - 1) % w->size]};
    free(perm);
    return p;
}

static struct peers peers_of(enum pattern pat, const struct world *w)
{
    if (pat == RANDOM)
        return random_ring(w);
    struct peers p = {(w->rank + 1) % w->size, (w->rank + w->size - 1) % w->size};
    return p;
}

static unsigned char byte_of(int sender, size_t size, size_t i)
{
    return (unsigned char)(sender * 151u + size * 7u + i * 13u + (i >> 8) + 1u);
}

static void exchange(const struct peers *p, unsigned char *send, unsigned char *recv,
                     size_t size, long iters)
{
    for (long i = 0; i < iters; i++)
        MPI_Sendrecv(send, (int)size, MPI_BYTE, p->to, 0, recv, (int)size, MPI_BYTE, p->from, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* The slowest rank's time for `iters` exchanges, on every rank. */
static double timed(const struct peers *p, unsigned char *send, unsigned char *recv,
                    size_t size, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    exchange(p, send, recv, size, iters);
    double mine = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* Double a trial count until it lasts a twentieth of the target; rank 0 decides. */
static long choose_iters(const struct world *w, const struct peers *p, unsigned char *send,
                         unsigned char *recv, size_t size, double seconds)
{
    long n = 1, iters = 0;
    for (;;) {
        double took = timed(p, send, recv, size, n);
        int done = took >= seconds / 20 || n >= MAX_ITERS;
        if (done && w->rank == 0) {
            double want = seconds / (took > 0 ? took / (double)n : 1e-9);
            iters = want < MIN_ITERS ? MIN_ITERS : want > MAX_ITERS ? MAX_ITERS : (long)want;
        }
        if (done) /* `took` is the same on every rank (Allreduce) */
            break;
        n *= 2;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return iters;
}

static int check(const unsigned char *recv, int sender, size_t size, int rank,
                 enum pattern pat)
{
    for (size_t i = 0; i < size; i++)
        if (recv[i] != byte_of(sender, size, i)) {
            fprintf(stderr,
                    "beff: rank %d: %s size %zu: received byte %zu is 0x%02x, expected 0x%02x "
                    "from rank %d\n",
                    rank, pattern_names[pat], size, i, recv[i], byte_of(sender, size, i),
                    sender);
            return 1;
        }
    return 0;
}

struct result {
    double seconds, mbps, usec;
};

static struct result measure(const struct world *w, enum pattern pat, unsigned char *send,
                             unsigned char *recv, size_t size, const struct options *o)
{
    struct peers p = peers_of(pat, w);
    long iters = choose_iters(w, &p, send, recv, size, o->seconds);
    for (size_t i = 0; i < size; i++)
        send[i] = byte_of(w->rank, size, i);
    memset(recv, 0, size);
    recv[0] = (unsigned char)~byte_of(p.from, size, 0); /* stale data must not pass */
    double took = timed(&p, send, recv, size, iters);
    if (o->corrupt && w->rank == 0)
        recv[size - 1] ^= 0x5a;
    stop_if_bad(check(recv, p.from, size, w->rank, pat));
    struct result r = {took, (double)w->size * (double)size * iters / took / 1e6,
                       took * 1e6 / (double)iters};
    return r;
}

/* 1-byte ring exchanges until rank 0 has seen `seconds` pass; every rank stops together. */
static void warm_up(const struct world *w, unsigned char *send, unsigned char *recv,
                    double seconds)
{
    struct peers p = peers_of(RING, w);
    double start = MPI_Wtime();
    for (int done = 0; !done;) {
        exchange(&p, send, recv, 1, 1);
        done = MPI_Wtime() - start >= seconds;
        MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);

    unsigned char *send = xmalloc(o.max_size, argv[0]), *recv = xmalloc(o.max_size, argv[0]);
    memset(send, 0, o.max_size); /* touch pages now, not in a timed loop */
    memset(recv, 0, o.max_size);
    if (o.warmup > 0)
        warm_up(&w, send, recv, o.warmup);
    csv_header(&w);
    double total = 0, sum_best = 0, lat = 0;
    int nsizes = 0;
    for (size_t size = 1; size <= (size_t)o.max_size; size *= 2, nsizes++) {
        double best = 0;
        for (int pat = 0; pat < NPATTERNS; pat++) {
            struct result r = measure(&w, (enum pattern)pat, send, recv, size, &o);
            char metric[48];
            snprintf(metric, sizeof metric, "%s_%zu_MBps", pattern_names[pat], size);
            figure(&w, metric, r.mbps, "MB/s");
            total += r.seconds;
            best = r.mbps > best ? r.mbps : best;
            if (pat == RING && size == 1)
                lat = r.usec;
        }
        sum_best += best;
    }
    figure(&w, "beff_MBps", sum_best / nsizes, "MB/s");
    figure(&w, "lat_us", lat, "us");
    figure(&w, "time", total, "s");
    figure(&w, "verified", 1, "bool");
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
