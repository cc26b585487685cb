/* A mixed communication loop (ping-pong, allreduce, alltoall) for runs where
 * several ranks share one core: it must finish, with correct results, under
 * every wait policy.  Partners are rank ^ 1; with an odd size the last rank
 * skips the ping-pong.
 *
 * Usage: progress [iterations]   (default 200)
 * Prints "progress: rank <r> ok iterations=<n> blocking=<n>", then
 * "progress: rank <r> finalized" after MPI_Finalize. */
#include "check.h"

enum { LEN = 8 };

static int wr, wp;

static void pingpong(int it)
{
    int peer = wr ^ 1, msg[LEN], got[LEN];
    MPI_Status st;

    if (peer >= wp)
        return;
    fill(msg, LEN, wr, it);
    if (wr % 2 == 0) {
        BLK(MPI_Send(msg, LEN, MPI_INT, peer, it, MPI_COMM_WORLD));
        BLK(MPI_Recv(got, LEN, MPI_INT, peer, it, MPI_COMM_WORLD, &st));
    } else {
        BLK(MPI_Recv(got, LEN, MPI_INT, peer, it, MPI_COMM_WORLD, &st));
        BLK(MPI_Send(msg, LEN, MPI_INT, peer, it, MPI_COMM_WORLD));
    }
    expect_status(&st, peer, it, LEN, "ping-pong");
    expect_vals(got, LEN, peer, it, "ping-pong");
}

static void allreduce(int it)
{
    int v = (wr + 1) * (it + 1), sum = -1;

    BLK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == (it + 1) * wp * (wp + 1) / 2, "iteration %d: Allreduce gave %d", it, sum);
}

static void alltoall(int it)
{
    int *sb = xmalloc(2 * wp * sizeof(int)), *rb = xmalloc(2 * wp * sizeof(int));

    for (int j = 0; j < wp; j++)
        for (int k = 0; k < 2; k++)
            sb[2 * j + k] = val(wr, it, 10 * j + k);
    BLK(MPI_Alltoall(sb, 2, MPI_INT, rb, 2, MPI_INT, MPI_COMM_WORLD));
    for (int j = 0; j < wp; j++)
        for (int k = 0; k < 2; k++)
            CHECK(rb[2 * j + k] == val(j, it, 10 * wr + k),
                  "iteration %d: Alltoall from %d element %d is %d", it, j, k, rb[2 * j + k]);
    free(sb);
    free(rb);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;

    prog_name = "progress";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    for (int it = 0; it < iters; it++) {
        pingpong(it);
        allreduce(it);
        alltoall(it);
    }
    printf("progress: rank %d ok iterations=%d blocking=%d\n", wr, iters, nblocking);
    MPI_Finalize();
    printf("progress: rank %d finalized\n", wr);
    return 0;
}
