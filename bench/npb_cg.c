/*
 * npb_cg: conjugate gradient in the manner of NPB 3.3's CG, in C + MPI.
 *
 * As NPB: an inverse power iteration estimates the smallest eigenvalue of a
 * random sparse symmetric positive definite matrix A: x = (1,...,1); each of
 * NITER outer iterations solves A z = x with 25 unpreconditioned CG steps,
 * sets zeta = SHIFT + 1 / (x.z) and x = z / ||z||. Sizes, nonzer, iteration
 * counts and shifts are NPB's per class.
 *
 * The matrix is NOT NPB's makea, so zeta is not NPB's reference. Ours: row i
 * draws NONZER column indices and values in [-1, 1) from NPB's generator
 * (seed 314159265, a = 5^13, jumped ahead to row i); each draw (i, j, v)
 * adds v at (i, j) and at (j, i), duplicates summing, so A is symmetric; the
 * diagonal is the row's sum of |a_ij| plus NONZER, so A is diagonally
 * dominant, hence positive definite, with eigenvalues within
 * [NONZER, 2*rowsum + NONZER] (Gershgorin). Check: the relative residual
 * ||x - A z|| / ||x|| of the last inner solve below 1e-8, from a fresh
 * mat-vec after the timed loop.
 *
 * Rows are split in even blocks over the ranks (CSR per rank). Each CG step:
 * MPI_Allgatherv of p, the local mat-vec, two MPI_Allreduce dot products.
 * mflops counts 25 * (2 nnz + 10 n) + 5 n flops per outer iteration.
 */
#include <math.h>

#include "kernel.h"

#define CG_STEPS 25
#define SEED 314159265ULL
#define MULT 1220703125ULL
#define TOLERANCE 1e-8

static const long class_n[3] = {1400, 7000, 14000};
static const int class_nonzer[3] = {7, 8, 11};
static const int class_niter[3] = {15, 15, 15};
static const double class_shift[3] = {10.0, 12.0, 20.0};

struct options {
    int cls;
    long niter; /* 0: the class's */
    int corrupt; /* self-test of the check: spoil one element of z */
};

struct csr {
    long n, lo, hi, nnz_total; /* global order; local rows [lo, hi) */
    long *start;               /* hi - lo + 1 row starts */
    long *col;
    double *val;
    int *counts, *displs;      /* rows per rank, for MPI_Allgatherv */
};

struct entry {
    long row, col;
    double val;
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c S|W|A] [-i ITER] [-C] [-h]\n"
            "  -c CLASS  problem class (order, nonzer): S 1400/7, W 7000/8, A 14000/11;\n"
            "            15 outer iterations of 25 CG steps (default S)\n"
            "  -i ITER   outer iterations instead of the class's 15\n"
            "  -C        self-test: spoil one element of z before the check (exit 3)\n"
            "  -h        this help\n"
            "The matrix is a documented SPD construction, not NPB's makea; zeta is\n"
            "reported but verified is the inner solve's residual (< 1e-8).\n"
            "Any number of ranks up to the order. CSV on stdout: metric,value,unit.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0};
    const struct opt opts[] = {
        {'c', OPT_CLASS, &o->cls, 0, 0},
        {'i', OPT_LONG, &o->niter, 1, 100000},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

/* The draws of row i: NONZER (column, value) pairs, column != i. */
static void draws(long i, long n, int nonzer, long *cols, double *vals)
{
    uint64_t x = npb_mulmod(SEED, npb_powmod(MULT, (uint64_t)i * 2 * nonzer));
    for (int d = 0; d < nonzer; d++) {
        long j = (long)(randlc(&x, MULT) * (double)(n - 1));
        cols[d] = j >= i ? j + 1 : j; /* skip the diagonal */
        vals[d] = 2.0 * randlc(&x, MULT) - 1.0;
    }
}

static struct entry *grow(struct entry *e, long *cap, const char *prog)
{
    struct entry *more = xmalloc(2 * *cap * sizeof *e, prog);
    memcpy(more, e, *cap * sizeof *e);
    free(e);
    *cap *= 2;
    return more;
}

/* Every draw touching a local row, in (row, col) order after sorting. */
static long local_entries(const struct csr *a, int nonzer, struct entry **out, const char *prog)
{
    long cap = 4 * (a->hi - a->lo) * (long)nonzer + 16, m = 0;
    struct entry *e = xmalloc(cap * sizeof *e, prog);
    long cols[16];
    double vals[16];
    for (long i = 0; i < a->n; i++) {
        draws(i, a->n, nonzer, cols, vals);
        for (int d = 0; d < nonzer; d++) {
            long r[2] = {i, cols[d]}, c[2] = {cols[d], i};
            for (int s = 0; s < 2; s++) {
                if (r[s] < a->lo || r[s] >= a->hi)
                    continue;
                if (m == cap)
                    e = grow(e, &cap, prog);
                e[m++] = (struct entry){r[s], c[s], vals[d]};
            }
        }
    }
    *out = e;
    return m;
}

static int by_row_col(const void *pa, const void *pb)
{
    const struct entry *a = pa, *b = pb;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->col < b->col ? -1 : a->col > b->col;
}

/* CSR of the local rows: merged off-diagonals plus the dominant diagonal. */
static void assemble(struct csr *a, int nonzer, const char *prog)
{
    struct entry *e;
    long m = local_entries(a, nonzer, &e, prog), rows = a->hi - a->lo;
    qsort(e, m, sizeof *e, by_row_col);
    a->start = xmalloc((rows + 1) * sizeof(long), prog);
    a->col = xmalloc((m + rows) * sizeof(long), prog);
    a->val = xmalloc((m + rows) * sizeof(double), prog);
    long k = 0, q = 0;
    for (long r = 0; r < rows; r++) {
        a->start[r] = q;
        long diag = q++;
        double rowsum = 0;
        a->col[diag] = a->lo + r;
        for (; k < m && e[k].row == a->lo + r; k++) {
            if (q > diag + 1 && a->col[q - 1] == e[k].col) {
                a->val[q - 1] += e[k].val;
                continue;
            }
            a->col[q] = e[k].col;
            a->val[q++] = e[k].val;
        }
        for (long t = diag + 1; t < q; t++)
            rowsum += fabs(a->val[t]);
        a->val[diag] = rowsum + nonzer;
    }
    a->start[rows] = q;
    free(e);
    long nnz = q;
    MPI_Allreduce(&nnz, &a->nnz_total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
}

static void distribute(struct csr *a, const struct world *w, long n, const char *prog)
{
    a->n = n;
    block_range(n, w->size, w->rank, &a->lo, &a->hi);
    a->counts = xmalloc(w->size * sizeof(int), prog);
    a->displs = xmalloc(w->size * sizeof(int), prog);
    for (int r = 0; r < w->size; r++) {
        long lo, hi;
        block_range(n, w->size, r, &lo, &hi);
        a->counts[r] = (int)(hi - lo);
        a->displs[r] = (int)lo;
    }
}

/* y (local rows) = A p, after gathering the whole of p from its local part. */
static void matvec(const struct csr *a, const double *p_local, double *p_full, double *y)
{
    MPI_Allgatherv(p_local, (int)(a->hi - a->lo), MPI_DOUBLE, p_full, a->counts, a->displs,
                   MPI_DOUBLE, MPI_COMM_WORLD);
    for (long r = 0; r < a->hi - a->lo; r++) {
        double s = 0;
        for (long k = a->start[r]; k < a->start[r + 1]; k++)
            s += a->val[k] * p_full[a->col[k]];
        y[r] = s;
    }
}

static double dot(const double *u, const double *v, long m)
{
    double s = 0, all;
    for (long i = 0; i < m; i++)
        s += u[i] * v[i];
    MPI_Allreduce(&s, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

struct work {
    double *x, *z, *r, *p, *q, *full;
};

/* CG_STEPS steps of CG on A z = x from z = 0. */
static void conj_grad(const struct csr *a, struct work *v)
{
    long m = a->hi - a->lo;
    for (long i = 0; i < m; i++) {
        v->z[i] = 0;
        v->r[i] = v->p[i] = v->x[i];
    }
    double rho = dot(v->r, v->r, m);
    for (int step = 0; step < CG_STEPS; step++) {
        matvec(a, v->p, v->full, v->q);
        double alpha = rho / dot(v->p, v->q, m);
        for (long i = 0; i < m; i++) {
            v->z[i] += alpha * v->p[i];
            v->r[i] -= alpha * v->q[i];
        }
        double rho0 = rho;
        rho = dot(v->r, v->r, m);
        double beta = rho / rho0;
        for (long i = 0; i < m; i++)
            v->p[i] = v->r[i] + beta * v->p[i];
    }
}

/* One inverse power step: solve, zeta, x = z / ||z||. */
static double power_step(const struct csr *a, struct work *v, double shift)
{
    long m = a->hi - a->lo;
    conj_grad(a, v);
    double xz = dot(v->x, v->z, m), zz = dot(v->z, v->z, m);
    for (long i = 0; i < m; i++)
        v->x[i] = v->z[i] / sqrt(zz);
    return shift + 1.0 / xz;
}

/* ||b - A z|| / ||b|| with b the right-hand side of the last solve. */
static double residual(const struct csr *a, struct work *v, const double *b)
{
    long m = a->hi - a->lo;
    matvec(a, v->z, v->full, v->q);
    for (long i = 0; i < m; i++)
        v->q[i] = b[i] - v->q[i];
    return sqrt(dot(v->q, v->q, m) / dot(b, b, m));
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);
    long n = class_n[o.cls];
    int nonzer = class_nonzer[o.cls];
    long niter = o.niter ? o.niter : class_niter[o.cls];
    if (w.size > n)
        fail_ranks(&w, argv[0], "more ranks than matrix rows", usage);

    struct csr a;
    distribute(&a, &w, n, argv[0]);
    assemble(&a, nonzer, argv[0]);
    long m = a.hi - a.lo;
    struct work v;
    double **vecs[5] = {&v.x, &v.z, &v.r, &v.p, &v.q};
    for (int i = 0; i < 5; i++)
        *vecs[i] = xmalloc((m + 1) * sizeof(double), argv[0]);
    v.full = xmalloc(n * sizeof(double), argv[0]);
    double *b = xmalloc((m + 1) * sizeof(double), argv[0]);

    csv_header(&w);
    /* NPB runs one untimed power step, then starts again from x = 1. */
    for (long i = 0; i < m; i++)
        v.x[i] = 1.0;
    power_step(&a, &v, class_shift[o.cls]);
    for (long i = 0; i < m; i++)
        v.x[i] = 1.0;

    double zeta = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long it = 0; it < niter; it++) {
        memcpy(b, v.x, m * sizeof(double));
        zeta = power_step(&a, &v, class_shift[o.cls]);
    }
    double took = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    double flops = (double)niter * (CG_STEPS * (2.0 * a.nnz_total + 10.0 * n) + 5.0 * n);
    figure(&w, "time", slowest, "s");
    figure(&w, "mflops", flops / slowest / 1e6, "Mflop/s");
    figure(&w, "zeta", zeta, "1");
    figure(&w, "nnz", (double)a.nnz_total, "count");
    if (o.corrupt && w.rank == 0)
        v.z[0] += 1.0;
    double res = residual(&a, &v, b);
    figure(&w, "residual", res, "1");
    int bad = 0;
    if (w.rank == 0 && !(res < TOLERANCE)) {
        fprintf(stderr, "npb_cg: relative residual %.3g of the last solve is not below %g\n",
                res, TOLERANCE);
        bad = 1;
    }
    verdict(&w, bad);
    MPI_Finalize();
    return 0;
}
