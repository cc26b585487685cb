/* MPI_THREAD_MULTIPLE: four threads per rank communicate at the same time.
 * Each thread ping-pongs with the same thread of the partner rank (rank ^ 1)
 * on its own duplicated communicator and, told apart only by tag, on
 * MPI_COMM_WORLD, and runs collectives on its own communicator.
 *
 * Usage: threads [iterations]   (default 30)
 * Prints "threads: SKIP ..." and exits 0 when the MPI cannot provide
 * MPI_THREAD_MULTIPLE; otherwise "threads: rank <r> ok" and, after
 * MPI_Finalize, "threads: rank <r> finalized". */
#include <pthread.h>
#include <stdint.h>

#include "check.h"

enum { NTHREADS = 4, LEN = 4 };

static int iters = 30, wr, wp;
static MPI_Comm comms[NTHREADS];

/* One ping-pong: the even rank speaks first, the odd one answers. */
static void pingpong(MPI_Comm c, int peer, int tag)
{
    int msg[LEN], got[LEN];
    MPI_Status st;

    fill(msg, LEN, wr, tag);
    if (wr % 2 == 0) {
        BLK(MPI_Send(msg, LEN, MPI_INT, peer, tag, c));
        BLK(MPI_Recv(got, LEN, MPI_INT, peer, tag, c, &st));
    } else {
        BLK(MPI_Recv(got, LEN, MPI_INT, peer, tag, c, &st));
        BLK(MPI_Send(msg, LEN, MPI_INT, peer, tag, c));
    }
    expect_status(&st, peer, tag, LEN, "thread ping-pong");
    expect_vals(got, LEN, peer, tag, "thread ping-pong");
}

/* Exchange on the shared MPI_COMM_WORLD; only the tag names the thread. */
static void world_exchange(int peer, int tag, int it)
{
    int msg[LEN], got[LEN];
    MPI_Request rq[2];
    MPI_Status st[2];

    fill(msg, LEN, wr, tag);
    if (it % 2 == 0) {
        BLK(MPI_Sendrecv(msg, LEN, MPI_INT, peer, tag, got, LEN, MPI_INT, peer, tag,
                         MPI_COMM_WORLD, &st[0]));
    } else {
        OK(MPI_Irecv(got, LEN, MPI_INT, peer, tag, MPI_COMM_WORLD, &rq[0]));
        OK(MPI_Isend(msg, LEN, MPI_INT, peer, tag, MPI_COMM_WORLD, &rq[1]));
        BLK(MPI_Waitall(2, rq, st));
    }
    expect_status(&st[0], peer, tag, LEN, "thread world exchange");
    expect_vals(got, LEN, peer, tag, "thread world exchange");
}

static void collectives(MPI_Comm c, int t, int it)
{
    int v = (wr + 1) * (t + 1) + it, sum = -1, root = it % wp, b;

    BLK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == (t + 1) * wp * (wp + 1) / 2 + wp * it,
          "thread %d iteration %d: Allreduce gave %d", t, it, sum);
    if (it % 5 == 0) {
        b = wr == root ? val(root, t, it) : -1;
        BLK(MPI_Bcast(&b, 1, MPI_INT, root, c));
        CHECK(b == val(root, t, it), "thread %d iteration %d: Bcast gave %d", t, it, b);
        BLK(MPI_Barrier(c));
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg, peer = wr ^ 1;

    for (int it = 0; it < iters; it++) {
        if (peer < wp) {  /* with an odd size the last rank has no partner */
            pingpong(comms[t], peer, t * 1000 + it);
            world_exchange(peer, 100000 + t * 1000 + it, it);
        }
        collectives(comms[t], t, it);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    pthread_t th[NTHREADS];

    prog_name = "threads";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1)
        iters = atoi(argv[1]);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (wr == 0)
            printf("threads: SKIP MPI provides thread level %d, below "
                   "MPI_THREAD_MULTIPLE (%d)\n", provided, MPI_THREAD_MULTIPLE);
        MPI_Finalize();
        return 0;
    }
    for (int t = 0; t < NTHREADS; t++)
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0,
              "pthread_create failed");
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        OK(MPI_Comm_free(&comms[t]));
    printf("threads: rank %d ok blocking=%d\n", wr, nblocking);
    MPI_Finalize();
    printf("threads: rank %d finalized\n", wr);
    return 0;
}
