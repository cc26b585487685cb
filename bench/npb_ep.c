/*
 * npb_ep: NPB 3.3's EP ("embarrassingly parallel") kernel in C + MPI.
 *
 * 2^(M+1) uniform numbers from NPB's generator (seed 271828183, a = 5^13)
 * form 2^M pairs in [-1,1)^2; pairs inside the unit circle become Gaussian
 * deviates by the Marsaglia polar method, summed (sx, sy) and counted in 10
 * square annuli by max(|X|,|Y|). The work is split in batches of 2^16 pairs
 * (as NPB's MK = 16); each batch seeds itself by jumping the generator ahead,
 * so any number of ranks draws exactly NPB's numbers. One MPI_Allreduce at the
 * end. Verified against NPB's published sx, sy (relative error 1e-8).
 */
#include <math.h>

#include "kernel.h"

#define MK 16
#define NK (1L << MK)
#define NQ 10
#define SEED 271828183ULL
#define MULT 1220703125ULL

static const int class_m[3] = {24, 25, 28};
static const double ref_sx[3] = {-3.247834652034740e3, -2.863319731645753e3,
                                 -4.295875165629892e3};
static const double ref_sy[3] = {-6.958407078382297e3, -6.320053679109499e3,
                                 -1.580732573678431e4};

struct options {
    int cls;
    int corrupt; /* self-test of the check: spoil sx */
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c S|W|A] [-C] [-h]\n"
            "  -c CLASS  problem class: S 2^24, W 2^25, A 2^28 pairs (default S)\n"
            "  -C        self-test: spoil sx before the check; the run must fail (exit 3)\n"
            "  -h        this help\n"
            "Any number of ranks. CSV on stdout: metric,value,unit.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0};
    const struct opt opts[] = {
        {'c', OPT_CLASS, &o->cls, 0, 0},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

struct tally {
    double sx, sy;
    double q[NQ];
};

/* One batch of NK pairs, drawn from the generator state `seed`. */
static void batch(uint64_t seed, double *x, struct tally *t)
{
    for (long i = 0; i < 2 * NK; i++)
        x[i] = randlc(&seed, MULT);
    for (long i = 0; i < NK; i++) {
        double x1 = 2.0 * x[2 * i] - 1.0, x2 = 2.0 * x[2 * i + 1] - 1.0;
        double r = x1 * x1 + x2 * x2;
        if (r <= 1.0) {
            double f = sqrt(-2.0 * log(r) / r);
            double g1 = x1 * f, g2 = x2 * f;
            int l = (int)fmax(fabs(g1), fabs(g2));
            t->q[l] += 1.0;
            t->sx += g1;
            t->sy += g2;
        }
    }
}

static int check(const struct tally *t, int cls)
{
    double ex = fabs((t->sx - ref_sx[cls]) / ref_sx[cls]);
    double ey = fabs((t->sy - ref_sy[cls]) / ref_sy[cls]);
    if (ex <= 1e-8 && ey <= 1e-8)
        return 0;
    fprintf(stderr,
            "npb_ep: class %c: sx = %.15e (reference %.15e, rel. error %.3g), "
            "sy = %.15e (reference %.15e, rel. error %.3g); limit 1e-8\n",
            "SWA"[cls], t->sx, ref_sx[cls], ex, t->sy, ref_sy[cls], ey);
    return 1;
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);

    int m = class_m[o.cls];
    long batches = 1L << (m - MK), lo, hi;
    block_range(batches, w.size, w.rank, &lo, &hi);
    uint64_t jump = npb_powmod(MULT, 2 * NK); /* one batch of the generator */
    double *x = xmalloc(2 * NK * sizeof *x, argv[0]);
    struct tally mine = {0}, all;

    csv_header(&w);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long k = lo; k < hi; k++)
        batch(npb_mulmod(SEED, npb_powmod(jump, (uint64_t)k)), x, &mine);
    MPI_Allreduce(&mine, &all, 2 + NQ, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double took = MPI_Wtime() - start;
    MPI_Bcast(&took, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    double gc = 0;
    for (int l = 0; l < NQ; l++)
        gc += all.q[l];
    figure(&w, "time", took, "s");
    figure(&w, "mops", ldexp(1.0, m + 1) / took / 1e6, "Mop/s");
    figure(&w, "sx", all.sx, "1");
    figure(&w, "sy", all.sy, "1");
    figure(&w, "gaussian_pairs", gc, "count");
    if (o.corrupt)
        all.sx *= 1.0 + 1e-6;
    verdict(&w, w.rank == 0 ? check(&all, o.cls) : 0);
    free(x);
    MPI_Finalize();
    return 0;
}
