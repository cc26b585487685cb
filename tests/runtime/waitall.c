/* One MPI_Waitall over thousands of requests, as in bench/sendflood's receiver.
 *
 * Rank 0 posts N receives from rank 1, one int each with tags 0..N-1, and waits
 * for all of them with one MPI_Waitall. Rank 1 first stays away for DELAY_MS (a
 * sleep, no MPI call), then starts the N sends in reverse order of tag, so that
 * the request rank 0's array starts with completes last, and waits for them with
 * one MPI_Waitall. Data, statuses and freed handles are checked. The receiver's
 * wait spans the sender's absence: the harness reads from VHPC_STATS how it
 * waited.
 *
 * Usage: waitall [requests] [delay_ms]   (default 4000 and 300)
 * Prints "waitall: rank <r> ok requests=<n> blocking=<k>", then
 * "waitall: rank <r> finalized" after MPI_Finalize. */
#include "check.h"

#include <time.h>

static void receive_all(int n)
{
    int *got = xmalloc((size_t)n * sizeof *got);
    MPI_Request *req = xmalloc((size_t)n * sizeof *req);
    MPI_Status *st = xmalloc((size_t)n * sizeof *st);

    for (int i = 0; i < n; i++)
        OK(MPI_Irecv(&got[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &req[i]));
    BLK(MPI_Waitall(n, req, st));
    for (int i = 0; i < n; i++) {
        CHECK(req[i] == MPI_REQUEST_NULL, "request %d not freed", i);
        expect_status(&st[i], 1, i, 1, "receive");
        expect_vals(&got[i], 1, 1, i, "receive");
    }
    free(got), free(req), free(st);
}

static void send_all(int n, int delay_ms)
{
    int *msg = xmalloc((size_t)n * sizeof *msg);
    MPI_Request *req = xmalloc((size_t)n * sizeof *req);
    struct timespec away = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000};

    nanosleep(&away, NULL);
    for (int i = n - 1; i >= 0; i--) {
        fill(&msg[i], 1, 1, i);
        OK(MPI_Isend(&msg[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD, &req[i]));
    }
    BLK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++)
        CHECK(req[i] == MPI_REQUEST_NULL, "request %d not freed", i);
    free(msg), free(req);
}

int main(int argc, char **argv)
{
    int rank, size, n = argc > 1 ? atoi(argv[1]) : 4000;
    int delay_ms = argc > 2 ? atoi(argv[2]) : 300;

    prog_name = "waitall";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2 && n > 0 && delay_ms >= 0, "needs 2 ranks, requests > 0, delay_ms >= 0");
    if (rank == 0)
        receive_all(n);
    else
        send_all(n, delay_ms);
    printf("waitall: rank %d ok requests=%d blocking=%d\n", rank, n, nblocking);
    fflush(stdout);
    MPI_Finalize();
    printf("waitall: rank %d finalized\n", rank);
    return 0;
}
