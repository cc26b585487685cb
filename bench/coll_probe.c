/* coll_probe: µs per call of one collective or one-sided synchronisation, every rank
 * calling it in a loop with nothing in between (waiting is all there is to measure).
 *
 *   coll_probe -o OP [-n ITERATIONS]
 *   OP: barrier | allreduce8 (one double) | allreduce8k (1024 doubles) |
 *       alltoall4k (4 KiB to every rank) | fence (an MPI_Put to the next rank, then
 *       MPI_Win_fence) | lock (MPI_Win_lock, a put, MPI_Win_unlock on the next rank)
 *
 * Prints "op,<OP>" and "us_per_call,<median of rank 0's 5 blocks>" (CSV). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BLOCKS = 5, BIG = 1024, A2A = 4096 };

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, n = 2000, c;
    const char *op = "barrier";
    while ((c = getopt(argc, argv, "o:n:")) != -1) {
        if (c == 'o') op = optarg;
        else if (c == 'n') n = atoi(optarg);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, slot[64] = {0};
    double one = rank, sum, *big = calloc(2 * BIG, sizeof *big);
    char *out = calloc((size_t)size, A2A), *in = calloc((size_t)size, A2A);
    MPI_Win win;
    MPI_Win_create(slot, sizeof slot, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);

    int known = !strcmp(op, "barrier") || !strcmp(op, "allreduce8") ||
                !strcmp(op, "allreduce8k") || !strcmp(op, "alltoall4k") ||
                !strcmp(op, "fence") || !strcmp(op, "lock");
    if (!known) {
        if (rank == 0) fprintf(stderr, "coll_probe: unknown op '%s'\n", op);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double per_block[BLOCKS];
    int block = n / BLOCKS > 0 ? n / BLOCKS : 1;
    for (int b = -1; b < BLOCKS; b++) { /* block -1: warm-up */
        double t0 = MPI_Wtime();
        for (int i = 0; i < block; i++) {
            if (!strcmp(op, "barrier")) MPI_Barrier(MPI_COMM_WORLD);
            else if (!strcmp(op, "allreduce8"))
                MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            else if (!strcmp(op, "allreduce8k"))
                MPI_Allreduce(big, big + BIG, BIG, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            else if (!strcmp(op, "alltoall4k"))
                MPI_Alltoall(out, A2A, MPI_CHAR, in, A2A, MPI_CHAR, MPI_COMM_WORLD);
            else if (!strcmp(op, "fence")) {
                MPI_Put(&rank, 1, MPI_INT, next, rank % 64, 1, MPI_INT, win);
                MPI_Win_fence(0, win);
            } else {
                MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win);
                MPI_Put(&rank, 1, MPI_INT, next, rank % 64, 1, MPI_INT, win);
                MPI_Win_unlock(next, win);
            }
        }
        if (b >= 0) per_block[b] = (MPI_Wtime() - t0) / block * 1e6;
    }
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    if (rank == 0) {
        qsort(per_block, BLOCKS, sizeof *per_block, cmp);
        printf("op,%s\nus_per_call,%.3f\n", op, per_block[BLOCKS / 2]);
    }
    free(big), free(out), free(in);
    MPI_Finalize();
    return 0;
}
