/*
 * progress_probe: what one idle progress call costs, with many receives posted.
 *
 * For each count N on the command line (default 1 100 1000 4000 14000; the send
 * flood's receiver posts 14 000), rank 0 posts N receives from rank 1, which
 * sends nothing yet, and times CALLS calls of MPI_Request_get_status on a pending
 * one, one by one: the call libvhpc_wait's MPI_Waitall polls with
 * (runtime/complete.c), one progress call that completes nothing. Then rank 1
 * sends the N messages and rank 0 waits for them.
 *
 * Output (rank 0, stdout): CSV `test,posted,calls,p10_ns,median_ns,p90_ns`.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { CALLS = 4001 };

/* MPI_STATUSES_IGNORE through a volatile: GCC 12 mistakes MPICH's
 * (MPI_Status *)1 for a zero-sized array and warns. */
static MPI_Status *volatile statuses_ignore = MPI_STATUSES_IGNORE;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank 0: post n receives, time the idle calls, print a row, wait for the data. */
static void receiver(int n, MPI_Request *req, int *buf)
{
    static double took[CALLS];
    for (int i = 0; i < n; i++)
        MPI_Irecv(&buf[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &req[i]);
    for (int k = 0; k < CALLS; k++) {
        int flag;
        double t0 = now_ns();
        MPI_Request_get_status(req[n - 1], &flag, MPI_STATUS_IGNORE);
        took[k] = now_ns() - t0;
    }
    qsort(took, CALLS, sizeof *took, cmp_double);
    printf("idle_get_status,%d,%d,%.0f,%.0f,%.0f\n", n, CALLS, took[CALLS / 10], took[CALLS / 2],
           took[CALLS * 9 / 10]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Waitall(n, req, statuses_ignore);
}

static void sender(int n, int *buf)
{
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        MPI_Send(&buf[i], 1, MPI_INT, 0, i, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int rank, size;
    static const int counts[] = {1, 100, 1000, 4000, 14000};
    int ncounts = argc > 1 ? argc - 1 : (int)(sizeof counts / sizeof *counts);

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: progress_probe [posted ...] on 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    if (rank == 0)
        printf("test,posted,calls,p10_ns,median_ns,p90_ns\n");
    for (int c = 0; c < ncounts; c++) {
        int n = argc > 1 ? atoi(argv[c + 1]) : counts[c];
        if (n < 1) {
            if (rank == 0)
                fprintf(stderr, "progress_probe: a count must be at least 1\n");
            MPI_Finalize();
            return 2;
        }
        int *buf = calloc((size_t)n, sizeof *buf);
        MPI_Request *req = malloc((size_t)n * sizeof *req);
        if (!buf || !req)
            MPI_Abort(MPI_COMM_WORLD, 1);
        if (rank == 0)
            receiver(n, req, buf);
        else
            sender(n, buf);
        free(buf);
        free(req);
    }
    MPI_Finalize();
    return 0;
}
