/*
 * stream: McCalpin's STREAM kernels (copy, scale, add, triad) on every rank
 * at once, in C + MPI.
 *
 * Each rank owns three arrays of -n doubles and runs the four kernels -r
 * times; a barrier starts every kernel on all ranks together, so the figure
 * is what the ranks get while sharing the memory system. Each rank's rate is
 * from its best (shortest) time over the repetitions after the first, as
 * STREAM does; the rates are summed over ranks (MPI_Reduce). Bytes are
 * counted as STREAM does (copy, scale 16 per element; add, triad 24),
 * MB = 1e6 bytes. The final arrays are checked against the values the same
 * recurrence gives on scalars, as STREAM's checkSTREAMresults does.
 */
#include <float.h>
#include <math.h>

#include "kernel.h"

#define SCALAR 3.0

enum kernel { COPY, SCALE, ADD, TRIAD, NKERNELS };
static const char *const names[NKERNELS] = {"copy", "scale", "add", "triad"};
static const double bytes_per_element[NKERNELS] = {16, 16, 24, 24};

struct options {
    long n;
    long reps;
    int corrupt; /* self-test of the check: spoil one element of a */
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-n N] [-r REPS] [-C] [-h]\n"
            "  -n N     doubles per array on each rank (default 2000000)\n"
            "  -r REPS  repetitions, at least 2; the best after the first counts (default 10)\n"
            "  -C       self-test: spoil one element before the check; the run must fail (exit 3)\n"
            "  -h       this help\n"
            "Any number of ranks. CSV on stdout: metric,value,unit; MB/s summed over ranks.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.n = 2000000, .reps = 10};
    const struct opt opts[] = {
        {'n', OPT_LONG, &o->n, 1, 1L << 30},
        {'r', OPT_LONG, &o->reps, 2, 100000},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

static void run_kernel(enum kernel k, double *restrict a, double *restrict b,
                       double *restrict c, long n)
{
    switch (k) {
    case COPY:
        for (long j = 0; j < n; j++)
            c[j] = a[j];
        break;
    case SCALE:
        for (long j = 0; j < n; j++)
            b[j] = SCALAR * c[j];
        break;
    case ADD:
        for (long j = 0; j < n; j++)
            c[j] = a[j] + b[j];
        break;
    default:
        for (long j = 0; j < n; j++)
            a[j] = b[j] + SCALAR * c[j];
        break;
    }
}

static double timed_kernel(enum kernel k, double *a, double *b, double *c, long n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    run_kernel(k, a, b, c, n);
    return MPI_Wtime() - start;
}

/* Mean absolute error of x against the expected value, relative to it. */
static double rel_error(const double *x, long n, double want, long *first_bad)
{
    double sum = 0;
    *first_bad = -1;
    for (long j = 0; j < n; j++) {
        double e = fabs(x[j] - want);
        sum += e;
        if (*first_bad < 0 && e / fabs(want) > 1e-13)
            *first_bad = j;
    }
    return sum / n / fabs(want);
}

/* STREAM's check: replay the recurrence on scalars, compare average errors. */
static int check(const double *a, const double *b, const double *c, long n, long reps,
                 int rank)
{
    double aj = 2.0, bj = 2.0, cj = 0.0; /* after the initial a = 2 * a */
    for (long r = 0; r < reps; r++) {
        cj = aj;
        bj = SCALAR * cj;
        cj = aj + bj;
        aj = bj + SCALAR * cj;
    }
    const double *arr[3] = {a, b, c};
    const double want[3] = {aj, bj, cj};
    int bad = 0;
    for (int i = 0; i < 3; i++) {
        long first;
        double err = rel_error(arr[i], n, want[i], &first);
        if (err > 1e-13) {
            fprintf(stderr,
                    "stream: rank %d: array %c: mean relative error %.3g > 1e-13; "
                    "element %ld is %.17g, expected %.17g\n",
                    rank, "abc"[i], err, first, arr[i][first], want[i]);
            bad = 1;
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);

    long n = o.n;
    double *a = xmalloc(n * sizeof *a, argv[0]);
    double *b = xmalloc(n * sizeof *b, argv[0]);
    double *c = xmalloc(n * sizeof *c, argv[0]);
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
    for (long j = 0; j < n; j++)
        a[j] = 2.0 * a[j];

    csv_header(&w);
    double best[NKERNELS], total = 0;
    for (int k = 0; k < NKERNELS; k++)
        best[k] = DBL_MAX;
    for (long r = 0; r < o.reps; r++)
        for (int k = 0; k < NKERNELS; k++) {
            double t = timed_kernel((enum kernel)k, a, b, c, n);
            total += t;
            if (r > 0 && t < best[k])
                best[k] = t;
        }

    double rate[NKERNELS], sum[NKERNELS], slowest;
    for (int k = 0; k < NKERNELS; k++)
        rate[k] = bytes_per_element[k] * (double)n / best[k] / 1e6;
    MPI_Reduce(rate, sum, NKERNELS, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&total, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    figure(&w, "time", slowest, "s");
    for (int k = 0; k < NKERNELS; k++) {
        char metric[32];
        snprintf(metric, sizeof metric, "%s_MBps", names[k]);
        figure(&w, metric, sum[k], "MB/s");
    }
    figure(&w, "elements_per_rank", (double)n, "count");
    if (o.corrupt && w.rank == 0)
        a[n / 2] = -a[n / 2];
    verdict(&w, check(a, b, c, n, o.reps, w.rank));
    free(a);
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
