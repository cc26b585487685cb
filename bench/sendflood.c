/*
 * sendflood: every rank but 0 sends many small messages to rank 0 at once.
 *
 * Each round, every sender starts -n MPI_Isend of -s bytes to rank 0 and
 * completes them with one MPI_Waitall; rank 0 posts the matching MPI_Irecv
 * (one per sender and message, by source and tag) and completes them with one
 * MPI_Waitall. Rounds are separated by a barrier; the time of a round is the
 * slowest rank's (MPI_Reduce MAX). Received data are checked after every round;
 * a mismatch aborts with exit code 3.
 *
 * With more ranks than CPUs this is where waits differ most: thousands of
 * requests per wait, and the receiver must run for any sender to finish.
 *
 * Output (rank 0, stdout): CSV `test,ranks,messages,size,rounds,usec,msgs_per_s`,
 * usec = median round time, msgs_per_s = messages received per second in it.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-n MESSAGES] [-s SIZE] [-r ROUNDS] [-C] [-h]\n"
            "  -n MESSAGES  messages per sender and round (default 2000)\n"
            "  -s SIZE      bytes per message, at least 4 (default 8)\n"
            "  -r ROUNDS    timed rounds, after one untimed (default 20)\n"
            "  -C           self-test: corrupt a received message; the run must fail (exit 3)\n"
            "Runs on 2 or more ranks: ranks 1.. send, rank 0 receives.\n"
            "CSV on stdout: test,ranks,messages,size,rounds,usec,msgs_per_s\n",
            prog);
}

/* MPI_STATUSES_IGNORE through a volatile: GCC 12 mistakes MPICH's
 * (MPI_Status *)1 for a zero-sized array and warns. */
static MPI_Status *volatile statuses_ignore = MPI_STATUSES_IGNORE;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A message's first int names its sender, message index and round. */
static int stamp(int sender, int i, int round, int n)
{
    return (round * 64 + sender) * n + i;
}

int main(int argc, char **argv)
{
    int rank, size, n = 2000, bytes = 8, rounds = 20, corrupt = 0, opt;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "n:s:r:Ch")) != -1) {
        switch (opt) {
        case 'C': corrupt = 1; break;
        case 'n': n = atoi(optarg); break;
        case 's': bytes = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'h':
            if (rank == 0)
                usage(stdout, argv[0]);
            MPI_Finalize();
            return 0;
        default:
            if (rank == 0)
                usage(stderr, argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2 || n < 1 || bytes < (int)sizeof(int) || rounds < 1) {
        if (rank == 0)
            usage(stderr, argv[0]);
        MPI_Finalize();
        return 2;
    }

    int nreq = rank == 0 ? n * (size - 1) : n;
    char *buf = calloc((size_t)nreq, (size_t)bytes);
    MPI_Request *req = malloc((size_t)nreq * sizeof *req);
    double *times = malloc((size_t)rounds * sizeof *times);
    if (!buf || !req || !times) {
        fprintf(stderr, "sendflood: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    for (int round = -1; round < rounds; round++) { /* round -1 warms up */
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        if (rank == 0) {
            for (int s = 1; s < size; s++)
                for (int i = 0; i < n; i++) {
                    int k = (s - 1) * n + i;
                    MPI_Irecv(buf + (size_t)k * bytes, bytes, MPI_BYTE, s, i, MPI_COMM_WORLD,
                              &req[k]);
                }
        } else {
            for (int i = 0; i < n; i++) {
                int v = stamp(rank, i, round + 1, n);
                memcpy(buf + (size_t)i * bytes, &v, sizeof v);
                MPI_Isend(buf + (size_t)i * bytes, bytes, MPI_BYTE, 0, i, MPI_COMM_WORLD, &req[i]);
            }
        }
        MPI_Waitall(nreq, req, statuses_ignore);
        double mine = MPI_Wtime() - start, slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (corrupt)
                buf[(size_t)(nreq - 1) * bytes] ^= 1;
            for (int k = 0; k < nreq; k++) {
                int v, want = stamp(k / n + 1, k % n, round + 1, n);
                memcpy(&v, buf + (size_t)k * bytes, sizeof v);
                if (v != want) {
                    fprintf(stderr, "sendflood: round %d message %d is %d, expected %d\n", round,
                            k, v, want);
                    MPI_Abort(MPI_COMM_WORLD, 3);
                }
            }
            if (round >= 0)
                times[round] = slowest;
        }
    }

    if (rank == 0) {
        qsort(times, (size_t)rounds, sizeof *times, cmp_double);
        double median = rounds % 2 ? times[rounds / 2]
                                   : (times[rounds / 2 - 1] + times[rounds / 2]) / 2;
        printf("test,ranks,messages,size,rounds,usec,msgs_per_s\n");
        printf("flood,%d,%d,%d,%d,%.6g,%.6g\n", size, n, bytes, rounds, median * 1e6,
               (double)nreq / median);
    }
    free(buf);
    free(req);
    free(times);
    MPI_Finalize();
    return 0;
}
