/*
 * npb_ssor: SSOR with pipelined wavefront sweeps in the manner of NPB 3.3's
 * LU (blts/buts), in C + MPI, on a scalar model equation.
 *
 * Model: the 7-point discrete Poisson equation 6u - (sum of the 6 neighbours)
 * = h^2 on the interior of an N^3 grid (h = 1/(N-1)), u = 0 on the boundary,
 * from u = 0. Not NPB's 5-component Navier-Stokes system: only the pattern
 * of work and messages is NPB LU's. One iteration is a symmetric
 * Gauss-Seidel step with over-relaxation OMEGA = 1.2 (NPB's omega): a lower
 * sweep in increasing (k, j, i) order, then an upper sweep in decreasing
 * order.
 *
 * Distribution: the interior j rows are split in even blocks over the ranks
 * (1-D pencils along i and k). Lower sweep, plane k after plane k: receive
 * the predecessor's last j row of plane k (one MPI_Recv), update the plane,
 * send the last own row to the successor (one MPI_Send); the upper sweep runs
 * the other way. Thus each sweep sends N-2 small messages per rank boundary,
 * and the ranks form a pipeline. The ghost rows received during one sweep
 * are exactly the values the next sweep needs, so no other exchange happens.
 *
 * Check: rank 0 repeats the computation alone with the same functions (the
 * same arithmetic in the same order) and the gathered grid must be bitwise
 * equal; the residual ||h^2 - A u|| must also have decreased from its
 * initial value (both reported). mops counts point updates (2 per point
 * and iteration) per second, in millions.
 */
#include <math.h>

#include "kernel.h"

#define OMEGA 1.2

static const int class_n[3] = {12, 33, 64};
static const long class_iters[3] = {50, 300, 250};

struct options {
    int cls;
    long iters; /* 0: the class's */
    int corrupt; /* self-test of the check: spoil one gathered value */
};

struct grid {
    int n;         /* points per dimension, boundary included */
    int nyl;       /* own interior j rows; ghosts at jl = 0 and nyl + 1 */
    int j0;        /* global j of jl = 1 */
    int left, right; /* neighbours in j, or MPI_PROC_NULL */
    double rhs;    /* h^2 * f */
    double *u;
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c S|W|A] [-i ITER] [-C] [-h]\n"
            "  -c CLASS  grid and iterations: S 12^3 50, W 33^3 300, A 64^3 250 (default S)\n"
            "  -i ITER   SSOR iterations instead of the class's\n"
            "  -C        self-test: spoil one value before the check; the run must fail (exit 3)\n"
            "  -h        this help\n"
            "Scalar 7-point Poisson model, not NPB LU's 5-component system.\n"
            "Ranks: 1 to N-2 (S: 10, W: 31, A: 62). CSV on stdout: metric,value,unit.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0};
    const struct opt opts[] = {
        {'c', OPT_CLASS, &o->cls, 0, 0},
        {'i', OPT_LONG, &o->iters, 1, 1000000},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

static long idx(const struct grid *g, int k, int jl, int i)
{
    return ((long)k * (g->nyl + 2) + jl) * g->n + i;
}

static void grid_init(struct grid *g, int n, int rank, int size, const char *prog)
{
    long lo, hi;
    block_range(n - 2, size, rank, &lo, &hi);
    g->n = n;
    g->nyl = (int)(hi - lo);
    g->j0 = (int)lo + 1;
    g->left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    g->right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    g->rhs = 1.0 / ((double)(n - 1) * (n - 1));
    size_t points = (size_t)n * (g->nyl + 2) * n;
    g->u = xmalloc(points * sizeof(double), prog);
    memset(g->u, 0, points * sizeof(double));
}

static void relax(const struct grid *g, long p)
{
    long sj = g->n, sk = (long)(g->nyl + 2) * g->n;
    double *u = g->u;
    double nb = u[p - 1] + u[p + 1] + u[p - sj] + u[p + sj] + u[p - sk] + u[p + sk];
    u[p] = (1.0 - OMEGA) * u[p] + OMEGA * (g->rhs + nb) / 6.0;
}

static void row_io(const struct grid *g, int k, int jl, int peer, int send)
{
    double *row = g->u + idx(g, k, jl, 1);
    if (send)
        MPI_Send(row, g->n - 2, MPI_DOUBLE, peer, k, MPI_COMM_WORLD);
    else
        MPI_Recv(row, g->n - 2, MPI_DOUBLE, peer, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Lower sweep (blts-like): increasing k, j, i; the wavefront moves to higher ranks. */
static void lower_sweep(const struct grid *g)
{
    for (int k = 1; k < g->n - 1; k++) {
        row_io(g, k, 0, g->left, 0);
        for (int jl = 1; jl <= g->nyl; jl++)
            for (int i = 1; i < g->n - 1; i++)
                relax(g, idx(g, k, jl, i));
        row_io(g, k, g->nyl, g->right, 1);
    }
}

/* Upper sweep (buts-like): decreasing k, j, i; the wavefront moves to lower ranks. */
static void upper_sweep(const struct grid *g)
{
    for (int k = g->n - 2; k >= 1; k--) {
        row_io(g, k, g->nyl + 1, g->right, 0);
        for (int jl = g->nyl; jl >= 1; jl--)
            for (int i = g->n - 2; i >= 1; i--)
                relax(g, idx(g, k, jl, i));
        row_io(g, k, 1, g->left, 1);
    }
}

static void ssor(const struct grid *g, long iters)
{
    for (long it = 0; it < iters; it++) {
        lower_sweep(g);
        upper_sweep(g);
    }
}

/* Fill both ghost rows of every plane with the neighbours' current values. */
static void halo(const struct grid *g)
{
    for (int k = 1; k < g->n - 1; k++) {
        MPI_Sendrecv(g->u + idx(g, k, g->nyl, 1), g->n - 2, MPI_DOUBLE, g->right, k,
                     g->u + idx(g, k, 0, 1), g->n - 2, MPI_DOUBLE, g->left, k, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(g->u + idx(g, k, 1, 1), g->n - 2, MPI_DOUBLE, g->left, k,
                     g->u + idx(g, k, g->nyl + 1, 1), g->n - 2, MPI_DOUBLE, g->right, k,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

/* ||h^2 - A u||_2 over the interior (collective). */
static double residual(const struct grid *g)
{
    halo(g);
    long sj = g->n, sk = (long)(g->nyl + 2) * g->n;
    const double *u = g->u;
    double s = 0, all;
    for (int k = 1; k < g->n - 1; k++)
        for (int jl = 1; jl <= g->nyl; jl++)
            for (int i = 1; i < g->n - 1; i++) {
                long p = idx(g, k, jl, i);
                double nb = u[p - 1] + u[p + 1] + u[p - sj] + u[p + sj] + u[p - sk] + u[p + sk];
                double r = g->rhs - (6.0 * u[p] - nb);
                s += r * r;
            }
    MPI_Allreduce(&s, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sqrt(all);
}

/* The interior of a grid, in (k, jl, i) order. */
static void pack(const struct grid *g, double *out)
{
    long q = 0;
    for (int k = 1; k < g->n - 1; k++)
        for (int jl = 1; jl <= g->nyl; jl++)
            for (int i = 1; i < g->n - 1; i++)
                out[q++] = g->u[idx(g, k, jl, i)];
}

/* Rank 0: every rank's interior against the serial grid, bitwise. */
static int compare(const double *gathered, const struct grid *serial, int size)
{
    int n = serial->n;
    long q = 0;
    for (int r = 0; r < size; r++) {
        struct grid part;
        long lo, hi;
        block_range(n - 2, size, r, &lo, &hi);
        part.nyl = (int)(hi - lo);
        for (int k = 1; k < n - 1; k++)
            for (int jl = 1; jl <= part.nyl; jl++)
                for (int i = 1; i < n - 1; i++, q++) {
                    double want = serial->u[idx(serial, k, (int)lo + jl, i)];
                    if (memcmp(&gathered[q], &want, sizeof want) != 0) {
                        fprintf(stderr,
                                "npb_ssor: u(i=%d, j=%ld, k=%d) from rank %d is %.17g, the "
                                "serial recomputation gives %.17g\n",
                                i, lo + jl, k, r, gathered[q], want);
                        return 1;
                    }
                }
    }
    return 0;
}

static int check(const struct grid *g, const struct world *w, long iters, int corrupt)
{
    int n = g->n, *counts = NULL, *displs = NULL, mine = g->nyl * (n - 2) * (n - 2);
    long interior = (long)(n - 2) * (n - 2) * (n - 2);
    double *local = xmalloc(mine * sizeof(double), "npb_ssor"), *all = NULL;
    pack(g, local);
    if (w->rank == 0) {
        all = xmalloc(interior * sizeof(double), "npb_ssor");
        counts = xmalloc(w->size * sizeof(int), "npb_ssor");
        displs = xmalloc(w->size * sizeof(int), "npb_ssor");
    }
    MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (w->rank == 0)
        for (int r = 0; r < w->size; r++)
            displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
    MPI_Gatherv(local, mine, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int bad = 0;
    if (w->rank == 0) {
        struct grid serial;
        grid_init(&serial, n, 0, 1, "npb_ssor");
        ssor(&serial, iters);
        if (corrupt)
            all[interior / 2] += 1.0;
        bad = compare(all, &serial, w->size);
        free(serial.u);
        free(all);
        free(counts);
        free(displs);
    }
    free(local);
    return bad;
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);
    int n = class_n[o.cls];
    long iters = o.iters ? o.iters : class_iters[o.cls];
    if (w.size > n - 2)
        fail_ranks(&w, argv[0], "more ranks than interior grid rows (N-2)", usage);

    struct grid g;
    grid_init(&g, n, w.rank, w.size, argv[0]);
    csv_header(&w);
    double before = residual(&g);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    ssor(&g, iters);
    double took = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double after = residual(&g);

    double updates = 2.0 * (n - 2) * (n - 2) * (double)(n - 2) * (double)iters;
    figure(&w, "time", slowest, "s");
    figure(&w, "mops", updates / slowest / 1e6, "Mupdates/s");
    figure(&w, "residual_initial", before, "1");
    figure(&w, "residual_final", after, "1");
    int bad = check(&g, &w, iters, o.corrupt);
    if (w.rank == 0 && !(after < before)) {
        fprintf(stderr, "npb_ssor: the residual did not decrease: %.6g -> %.6g\n", before,
                after);
        bad = 1;
    }
    verdict(&w, bad);
    free(g.u);
    MPI_Finalize();
    return 0;
}
