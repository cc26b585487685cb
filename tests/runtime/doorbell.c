/* Sleepers and a rank that polls alone (runtime/doorbell.c): rank 0 computes for a
 * few milliseconds, long enough for rank 1's wait in MPI_Recv to reach its sleep
 * phase, then sends and waits for the reply. Rank 1 answers only once it polls
 * again: on its timer, or when rank 0, whose CPU has nothing else to run, rings it.
 *
 * Usage: doorbell [rounds] [compute_ms]   (default 20 rounds of 5 ms), 2 ranks.
 * Prints "doorbell: rank <r> ok blocking=<n>", then "doorbell: rank <r> finalized". */
#include "check.h"

#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 20;
    double compute_s = (argc > 2 ? atof(argv[2]) : 5.0) * 1e-3;
    volatile double sink = 0;

    prog_name = "doorbell";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, has %d", size);
    for (int i = 0; i < rounds; i++) {
        int msg = i, got = -1;
        MPI_Status st;
        if (rank == 0) {
            for (double end = now() + compute_s; now() < end;)
                sink += 1.0;
            BLK(MPI_Send(&msg, 1, MPI_INT, 1, i, MPI_COMM_WORLD));
            BLK(MPI_Recv(&got, 1, MPI_INT, 1, i, MPI_COMM_WORLD, &st));
        } else {
            BLK(MPI_Recv(&got, 1, MPI_INT, 0, i, MPI_COMM_WORLD, &st));
            BLK(MPI_Send(&got, 1, MPI_INT, 0, i, MPI_COMM_WORLD));
        }
        CHECK(got == i, "round %d: got %d", i, got);
    }
    printf("doorbell: rank %d ok blocking=%d\n", rank, nblocking);
    fflush(stdout);
    MPI_Finalize();
    printf("doorbell: rank %d finalized\n", rank);
    return 0;
}
