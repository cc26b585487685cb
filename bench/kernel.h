/*
 * kernel.h: what the benchmark kernels (beff, stream, lu, npb_*) share.
 *
 * Every kernel prints CSV on rank 0's stdout: a header `metric,value,unit`,
 * then one line per figure. A failed self-check prints what differed on
 * stderr, then every rank finalizes and exits 3 (not MPI_Abort, which can
 * lose the message). Bad options print the usage on stderr and exit 2.
 * Header-only: each program is a single translation unit.
 */
#ifndef VHPC_KERNEL_H
#define VHPC_KERNEL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_VERIFY 3

struct world {
    int rank, size;
};

static inline struct world world_init(int *argc, char ***argv)
{
    struct world w;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    return w;
}

/* parsed: 0 run, 1 help (exit 0), 2 usage error. Returns only when parsed == 0. */
static inline void handle_parse(const struct world *w, int parsed, const char *prog,
                                void (*usage)(FILE *, const char *))
{
    if (parsed == 0)
        return;
    if (w->rank == 0)
        usage(parsed == 1 ? stdout : stderr, prog);
    MPI_Finalize();
    exit(parsed == 1 ? 0 : EXIT_USAGE);
}

/* A constraint on the number of ranks that the options cannot express. */
static inline void fail_ranks(const struct world *w, const char *prog, const char *why,
                              void (*usage)(FILE *, const char *))
{
    if (w->rank == 0) {
        fprintf(stderr, "%s: %s\n", prog, why);
        usage(stderr, prog);
    }
    MPI_Finalize();
    exit(EXIT_USAGE);
}

/* Problem class S, W or A: its index 0..2, or -1. */
static inline int parse_class(const char *s)
{
    if (strlen(s) != 1)
        return -1;
    const char *p = strchr("SWA", s[0]);
    return p ? (int)(p - "SWA") : -1;
}

static inline int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static inline int parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v > 0 && v <= 3600))
        return -1;
    *out = v;
    return 0;
}

/* One option of a kernel: -<letter> sets *dst: a flag (int), a class index
 * (int), a long in [lo, hi], or seconds (double). -h always asks for help. */
enum opt_kind { OPT_FLAG, OPT_CLASS, OPT_LONG, OPT_SECONDS };
struct opt {
    char letter;
    enum opt_kind kind;
    void *dst;
    long lo, hi;
};

static inline int parse_opt(const struct opt *o, const char *arg)
{
    switch (o->kind) {
    case OPT_FLAG:
        *(int *)o->dst = 1;
        return 0;
    case OPT_CLASS:
        return (*(int *)o->dst = parse_class(arg)) < 0;
    case OPT_LONG:
        return parse_long(arg, o->lo, o->hi, o->dst) != 0;
    case OPT_SECONDS:
        return parse_seconds(arg, o->dst) != 0;
    }
    return 1;
}

/* Parses argv by the table (defaults are whatever *dst holds before).
 * Returns 0 to run, 1 when help was asked, 2 for a usage error. */
static inline int parse_opts(int argc, char **argv, const struct opt *opts, size_t n)
{
    char spec[2 * 16 + 2] = "h";
    size_t len = 1;
    for (size_t i = 0; i < n && i < 16; i++) {
        spec[len++] = opts[i].letter;
        if (opts[i].kind != OPT_FLAG)
            spec[len++] = ':';
    }
    spec[len] = '\0';
    opterr = 0;
    for (int c; (c = getopt(argc, argv, spec)) != -1;) {
        if (c == 'h')
            return 1;
        const struct opt *o = NULL;
        for (size_t i = 0; i < n; i++)
            if (opts[i].letter == c)
                o = &opts[i];
        if (o == NULL || parse_opt(o, optarg))
            return 2;
    }
    return optind != argc ? 2 : 0;
}

static inline void csv_header(const struct world *w)
{
    if (w->rank == 0) {
        printf("metric,value,unit\n");
        fflush(stdout);
    }
}

static inline void figure(const struct world *w, const char *metric, double value,
                          const char *unit)
{
    if (w->rank == 0) {
        printf("%s,%.10g,%s\n", metric, value, unit);
        fflush(stdout);
    }
}

/* Collective: if any rank found a difference (and said so on stderr), all stop. */
static inline void stop_if_bad(int bad)
{
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        fflush(stdout);
        MPI_Finalize();
        exit(EXIT_VERIFY);
    }
}

/* The final check: stop on a difference, else report `verified,1`. */
static inline void verdict(const struct world *w, int bad)
{
    stop_if_bad(bad);
    figure(w, "verified", 1, "bool");
}

static inline void *xmalloc(size_t bytes, const char *prog)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", prog, bytes);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    return p;
}

/* Rows [lo, hi) of n split as evenly as possible over `size` parts. */
static inline void block_range(long n, int size, int rank, long *lo, long *hi)
{
    long base = n / size, extra = n % size;
    *lo = rank * base + (rank < extra ? rank : extra);
    *hi = *lo + base + (rank < extra ? 1 : 0);
}

/*
 * NPB's linear congruential generator x <- a*x mod 2^46, returning x/2^46.
 * NPB computes it in doubles split into 23-bit halves, which is exact; the
 * 128-bit product here gives the same numbers.
 */
#define NPB_MOD46 ((uint64_t)1 << 46)

static inline uint64_t npb_mulmod(uint64_t a, uint64_t x)
{
    return (uint64_t)(((unsigned __int128)a * x) & (NPB_MOD46 - 1));
}

static inline double randlc(uint64_t *x, uint64_t a)
{
    *x = npb_mulmod(a, *x);
    return (double)*x * (1.0 / (double)NPB_MOD46);
}

/* a^k mod 2^46: jumps a generator k steps ahead. */
static inline uint64_t npb_powmod(uint64_t a, uint64_t k)
{
    uint64_t r = 1;
    while (k) {
        if (k & 1)
            r = npb_mulmod(r, a);
        a = npb_mulmod(a, a);
        k >>= 1;
    }
    return r;
}

#endif
