/*
 * lu: dense LU factorisation with partial pivoting and a solve, in C + MPI
 * (a small Linpack/HPL-like kernel).
 *
 * The n x n matrix and the right-hand side are pseudo-random in [-0.5, 0.5),
 * a pure function of (row, column), so every rank generates its own columns
 * and the check can regenerate them. Columns are dealt to the ranks in
 * blocks of NB, cyclically (1-D column-block-cyclic). Step k: the owner of
 * column k picks the pivot, scales the multipliers and broadcasts pivot and
 * multipliers in one MPI_Bcast; every rank swaps the two rows within its
 * columns right of k and updates them (right-looking, unblocked). Row swaps
 * are not applied to the multipliers already stored, so the forward solve
 * swaps as the elimination did. Both triangular solves travel along the
 * column blocks: the vector passes from block owner to block owner.
 *
 * Figures: time (factor + solve), mflops = (2/3 n^3 + 2 n^2) / time, and the
 * scaled residual ||Ax - b||_inf / (||A||_inf ||x||_inf n eps), eps = 2^-53,
 * verified below 16 as HPL's check.
 */
#include <float.h>
#include <math.h>

#include "kernel.h"

#define NB 16
#define THRESHOLD 16.0
#define SEED 0x9e3779b97f4a7c15ULL

static const long class_n[3] = {500, 1000, 2000};

struct options {
    long n;
    int corrupt; /* self-test of the check: spoil x[0] */
};

struct matrix {
    long n, ncols;  /* order; columns held here */
    long *global;   /* global index of each local column (increasing) */
    double *a;      /* local columns, column-major: a[lj * n + i] */
    int rank, size;
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c S|W|A] [-n N] [-C] [-h]\n"
            "  -c CLASS  order by class: S 500, W 1000, A 2000\n"
            "  -n N      order of the matrix (default 1000, class W); overrides -c\n"
            "  -C        self-test: spoil x[0] before the residual; the run must fail (exit 3)\n"
            "  -h        this help\n"
            "Any number of ranks (columns in blocks of %d, cyclic). CSV on stdout:\n"
            "metric,value,unit.\n",
            prog, NB);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    int cls = -1;
    long by_n = 0;
    *o = (struct options){0};
    const struct opt opts[] = {
        {'c', OPT_CLASS, &cls, 0, 0},
        {'n', OPT_LONG, &by_n, 1, 100000},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    int parsed = parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
    o->n = by_n ? by_n : cls >= 0 ? class_n[cls] : 1000;
    return parsed;
}

/* Entry (i, j) in [-0.5, 0.5); column n is the right-hand side. splitmix64. */
static double entry(long i, long j, long n)
{
    uint64_t z = SEED + (uint64_t)(i * (n + 1) + j) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 - 0.5;
}

static int owner_of(long j, int size) { return (int)((j / NB) % size); }

static void generate(struct matrix *m, const char *prog)
{
    long n = m->n;
    m->ncols = 0;
    m->global = xmalloc(n * sizeof(long), prog);
    for (long j = 0; j < n; j++)
        if (owner_of(j, m->size) == m->rank)
            m->global[m->ncols++] = j;
    m->a = xmalloc((size_t)m->ncols * n * sizeof(double), prog);
    for (long lj = 0; lj < m->ncols; lj++)
        for (long i = 0; i < n; i++)
            m->a[lj * n + i] = entry(i, m->global[lj], n);
}

/* The owner's part of step k: pivot, swap, multipliers into buf[1..]. */
static void pivot_column(const struct matrix *m, long lj, long k, double *buf)
{
    long n = m->n, p = k;
    double *col = m->a + lj * n;
    for (long i = k + 1; i < n; i++)
        if (fabs(col[i]) > fabs(col[p]))
            p = i;
    double t = col[k];
    col[k] = col[p];
    col[p] = t;
    for (long i = k + 1; i < n; i++) {
        col[i] /= col[k]; /* a zero pivot gives inf/nan, which the residual catches */
        buf[i - k] = col[i];
    }
    buf[0] = (double)p;
}

/* Swap rows k and p in column c, then eliminate below row k. */
static void update_column(double *c, long n, long k, long p, const double *l)
{
    double t = c[k];
    c[k] = c[p];
    c[p] = t;
    double f = c[k];
    for (long i = k + 1; i < n; i++)
        c[i] -= l[i - k] * f;
}

static void factor(struct matrix *m, long *piv, double *buf)
{
    long n = m->n, next = 0; /* first local column right of k */
    for (long k = 0; k < n; k++) {
        int root = owner_of(k, m->size);
        if (root == m->rank)
            pivot_column(m, next++, k, buf);
        MPI_Bcast(buf, (int)(n - k), MPI_DOUBLE, root, MPI_COMM_WORLD);
        long p = piv[k] = (long)buf[0];
        for (long lj = next; lj < m->ncols; lj++)
            update_column(m->a + lj * n, n, k, p, buf);
    }
}

/* Hand the vector to the next block's owner when that is another rank. */
static void pass(const struct matrix *m, double *y, int from, int to)
{
    if (from == to || from < 0)
        return;
    if (m->rank == from)
        MPI_Send(y, (int)m->n, MPI_DOUBLE, to, 0, MPI_COMM_WORLD);
    else if (m->rank == to)
        MPI_Recv(y, (int)m->n, MPI_DOUBLE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Local column index of global column j (its owner only). */
static long local_of(const struct matrix *m, long j)
{
    return (j / NB / m->size) * NB + j % NB;
}

/* y <- U^-1 L^-1 P y, then every rank gets the solution. */
static void solve(const struct matrix *m, const long *piv, double *y)
{
    long n = m->n, nblocks = (n + NB - 1) / NB;
    int holder = -1;
    for (long jb = 0; jb < nblocks; jb++) {
        int own = (int)(jb % m->size);
        pass(m, y, holder, own);
        holder = own;
        if (own != m->rank)
            continue;
        for (long k = jb * NB; k < n && k < (jb + 1) * NB; k++) {
            const double *l = m->a + local_of(m, k) * n;
            double t = y[k];
            y[k] = y[piv[k]];
            y[piv[k]] = t;
            for (long i = k + 1; i < n; i++)
                y[i] -= l[i] * y[k];
        }
    }
    for (long jb = nblocks - 1; jb >= 0; jb--) {
        int own = (int)(jb % m->size);
        pass(m, y, holder, own);
        holder = own;
        if (own != m->rank)
            continue;
        for (long k = (jb + 1) * NB < n ? (jb + 1) * NB - 1 : n - 1; k >= jb * NB; k--) {
            const double *u = m->a + local_of(m, k) * n;
            y[k] /= u[k];
            for (long i = 0; i < k; i++)
                y[i] -= u[i] * y[k];
        }
    }
    MPI_Bcast(y, (int)n, MPI_DOUBLE, holder, MPI_COMM_WORLD);
}

/* HPL-style scaled residual from the regenerated matrix (collective). */
static double scaled_residual(const struct matrix *m, const double *x)
{
    long n = m->n;
    double *part = xmalloc(2 * n * sizeof(double), "lu"), *sum = xmalloc(2 * n * sizeof(double), "lu");
    memset(part, 0, 2 * n * sizeof(double));
    for (long lj = 0; lj < m->ncols; lj++) {
        long j = m->global[lj];
        for (long i = 0; i < n; i++) {
            double a = entry(i, j, n);
            part[i] += a * x[j];     /* (Ax)_i */
            part[n + i] += fabs(a);  /* row sums of |A| */
        }
    }
    MPI_Allreduce(part, sum, (int)(2 * n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double r = 0, norm_a = 0, norm_x = 0;
    for (long i = 0; i < n; i++) {
        r = fmax(r, fabs(sum[i] - entry(i, n, n)));
        norm_a = fmax(norm_a, sum[n + i]);
        norm_x = fmax(norm_x, fabs(x[i]));
    }
    free(part);
    free(sum);
    return r / (norm_a * norm_x * (double)n * (DBL_EPSILON / 2));
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);

    struct matrix m = {.n = o.n, .rank = w.rank, .size = w.size};
    long n = o.n;
    generate(&m, argv[0]);
    long *piv = xmalloc(n * sizeof(long), argv[0]);
    double *buf = xmalloc(n * sizeof(double), argv[0]), *x = xmalloc(n * sizeof(double), argv[0]);
    for (long i = 0; i < n; i++)
        x[i] = entry(i, n, n);

    csv_header(&w);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    factor(&m, piv, buf);
    solve(&m, piv, x);
    double took = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    double dn = (double)n;
    figure(&w, "n", dn, "count");
    figure(&w, "time", slowest, "s");
    figure(&w, "mflops", (2.0 / 3.0 * dn * dn * dn + 2.0 * dn * dn) / slowest / 1e6, "Mflop/s");
    if (o.corrupt)
        x[0] += 1.0;
    double res = scaled_residual(&m, x);
    figure(&w, "residual", res, "1");
    int bad = 0;
    if (w.rank == 0 && !(res < THRESHOLD)) {
        fprintf(stderr, "lu: scaled residual %.6g is not below %g (n = %ld)\n", res, THRESHOLD, n);
        bad = 1;
    }
    verdict(&w, bad);
    free(m.a);
    free(m.global);
    free(piv);
    free(buf);
    free(x);
    MPI_Finalize();
    return 0;
}
