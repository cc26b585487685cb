/*
 * hybrid: MPI + OpenMP, the fork-join loop of a hybrid code.
 *
 * Each of -n iterations runs an OpenMP parallel loop over -w integers per rank
 * (a reduction, so every thread meets the others at the loop's barrier), then
 * the master thread joins the ranks' sums with MPI_Allreduce. Little work per
 * iteration on purpose: the time goes to waiting, at the OpenMP barrier and in
 * the MPI call, which is where spinning runtimes hurt an over-committed host
 * (brief S4: thread management 2-3x slower under Xen).
 *
 * Self-verifying: every 16th iteration rank 0 recomputes the sum serially; a
 * mismatch prints what differed and exits 3.
 *
 * Output (rank 0, stdout): CSV `test,ranks,threads,iters,work,usec`, usec =
 * mean time per iteration.
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-n ITERATIONS] [-w WORK] [-h]\n"
            "  -n ITERATIONS  fork-join iterations (default 2000)\n"
            "  -w WORK        integers summed per rank and iteration (default 20000)\n"
            "Threads per rank: OMP_NUM_THREADS (the OpenMP default otherwise).\n"
            "CSV on stdout: test,ranks,threads,iters,work,usec\n",
            prog);
}

/* The value of element i in iteration it: cheap, and not foldable by the compiler. */
static inline long element(long i, long it)
{
    return (i * 2654435761L + it) & 0xff;
}

static long local_sum(long work, long it)
{
    long sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (long i = 0; i < work; i++)
        sum += element(i, it);
    return sum;
}

static long serial_sum(long work, long it)
{
    long sum = 0;
    for (long i = 0; i < work; i++)
        sum += element(i, it);
    return sum;
}

int main(int argc, char **argv)
{
    int rank, size, provided, opt, parsed = 0;
    long iters = 2000, work = 20000;

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "n:w:h")) != -1) {
        switch (opt) {
        case 'n': iters = atol(optarg); break;
        case 'w': work = atol(optarg); break;
        case 'h': parsed = 1; break;
        default: parsed = 2;
        }
    }
    if (parsed == 0 && (iters < 1 || work < 1))
        parsed = 2;
    if (parsed != 0) {
        if (rank == 0)
            usage(parsed == 1 ? stdout : stderr, argv[0]);
        MPI_Finalize();
        return parsed == 1 ? 0 : 2;
    }

    int bad = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long it = 0; it < iters; it++) {
        long mine = local_sum(work, it), total = 0;
        MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0 && it % 16 == 0 && total != size * serial_sum(work, it)) {
            fprintf(stderr, "hybrid: iteration %ld sums to %ld, expected %ld\n", it, total,
                    size * serial_sum(work, it));
            bad = 1; /* carry on: the other ranks are in the next Allreduce */
        }
    }
    double elapsed = MPI_Wtime() - start;
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0 && !bad) {
        printf("test,ranks,threads,iters,work,usec\n");
        printf("hybrid,%d,%d,%ld,%ld,%.6g\n", size, omp_get_max_threads(), iters, work,
               elapsed / (double)iters * 1e6);
    }
    MPI_Finalize();
    return bad ? 3 : 0;
}
