/*
 * send_local: which standard-mode sends complete while the receiver stays
 * outside MPI. Two ranks; rank 1 sleeps (no MPI call) while rank 0 sends it
 * one message, then posts the matching receive. A send is *local* when it
 * completed before the receiver entered MPI: the MPI copied the data out and
 * needs nothing back. A send that is not local waits for the receiver to take
 * the data (a rendezvous, or an eager fragment the receiver must hand back,
 * as Open MPI's ob1 over vader does above 256 B), which on a shared core
 * costs one more hand-over per exchange.
 *
 * Both calls are probed: `send` (MPI_Send, which MPI_Sendrecv and ping-pongs
 * use) and `isend` (MPI_Isend, then MPI_Test until it completes). For each,
 * sizes 1 B .. -M double; then the sizes between the largest local size of
 * that prefix and the first size that is not local are bisected to the byte.
 * Each size is tried -r times: after a barrier, rank 1 holds off -w
 * microseconds and rank 0 starts its send a tenth of that later; a try counts
 * only if rank 0 started after rank 1 had left the barrier (else rank 1 was
 * still inside MPI and could have taken the data), and is local if the send
 * completed before rank 1 entered MPI_Recv. Times are CLOCK_MONOTONIC (one
 * host, one clock).
 *
 * Output (rank 0, stdout): CSV `call,size,reps,local`: `local` is how many of
 * the `reps` tries completed before the receiver entered MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include "kernel.h" /* world, options, parse_long, xmalloc */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_DATA 1
#define TAG_CLOCK 2
#define MAX_TRIES 10 /* per counted try, at most */

enum call { SEND, ISEND, NCALLS };
static const char *const call_names[NCALLS] = {"send", "isend"};

struct options {
    long max_size, reps, hold_us;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-M MAX] [-r REPS] [-w MICROSECONDS] [-h]\n"
            "  -M MAX  largest message in bytes, 1 B doubling up to it (default 1048576)\n"
            "  -r REPS tries per size and call (default 3)\n"
            "  -w US   how long the receiver stays outside MPI (default 5000)\n"
            "Two ranks exactly. CSV on stdout: call,size,reps,local.\n",
            prog);
}

/* 0 run, 1 help, 2 usage error */
static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.max_size = 1 << 20, .reps = 3, .hold_us = 5000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h"))
            return 1;
        if (i + 1 >= argc)
            return 2;
        const char *v = argv[++i];
        int bad = !strcmp(a, "-M")   ? parse_long(v, 1, 1L << 30, &o->max_size)
                  : !strcmp(a, "-r") ? parse_long(v, 1, 1000, &o->reps)
                  : !strcmp(a, "-w") ? parse_long(v, 100, 10000000, &o->hold_us)
                                     : -1;
        if (bad)
            return 2;
    }
    return 0;
}

/* One try on rank 0: 1 if the send of `size` bytes completed before rank 1
 * entered MPI, 0 if not, -1 if the try does not count (the send started before
 * rank 1 had left the barrier: rank 1 was still inside MPI). Rank 1 returns 0. */
static int one_try(int rank, enum call call, unsigned char *buf, long size, long hold_us)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        /* give rank 1 time to leave the barrier and fall asleep */
        long head_us = hold_us / 10;
        struct timespec head = {head_us / 1000000, (head_us % 1000000) * 1000};
        while (nanosleep(&head, &head) != 0)
            ;
        double start = now_s(), done;
        if (call == SEND) {
            MPI_Send(buf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
            done = now_s();
        } else {
            MPI_Request req;
            int flag = 0;
            MPI_Isend(buf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req);
            while (!flag)
                MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            done = now_s();
        }
        double peer[2]; /* when rank 1 left the barrier, when it entered MPI_Recv */
        MPI_Recv(peer, 2, MPI_DOUBLE, 1, TAG_CLOCK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return start <= peer[0] ? -1 : done < peer[1];
    }
    double peer[2] = {now_s(), 0};
    struct timespec hold = {hold_us / 1000000, (hold_us % 1000000) * 1000};
    while (nanosleep(&hold, &hold) != 0)
        ;
    peer[1] = now_s();
    MPI_Recv(buf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(peer, 2, MPI_DOUBLE, 0, TAG_CLOCK, MPI_COMM_WORLD);
    return 0;
}

/* Tries `size` reps times (after one warm-up exchange of that size), prints
 * its row on rank 0; returns on every rank whether most tries were local. */
static int probe(int rank, enum call call, unsigned char *buf, unsigned char *peer_buf,
                 long size, const struct options *o)
{
    MPI_Sendrecv(buf, (int)size, MPI_BYTE, !rank, TAG_DATA, peer_buf, (int)size, MPI_BYTE, !rank,
                 TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int local = 0, counted = 0;
    for (long r = 0; counted < o->reps && r < MAX_TRIES * o->reps; r++) {
        int got = one_try(rank, call, buf, size, o->hold_us);
        MPI_Bcast(&got, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (got >= 0) {
            local += got;
            counted++;
        }
    }
    if (counted < o->reps) {
        if (rank == 0)
            fprintf(stderr, "send_local: size %ld: only %d of %ld tries counted (rank 1 kept "
                    "being late out of the barrier)\n", size, counted, o->reps);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("%s,%ld,%ld,%d\n", call_names[call], size, o->reps, local);
    return 2 * local > o->reps;
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    int rank = w.rank;
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);
    if (w.size != 2)
        fail_ranks(&w, argv[0], "needs exactly 2 ranks", usage);
    unsigned char *buf = xmalloc((size_t)o.max_size, argv[0]);
    unsigned char *peer_buf = xmalloc((size_t)o.max_size, argv[0]);
    memset(buf, 0, (size_t)o.max_size);
    memset(peer_buf, 0, (size_t)o.max_size);
    if (rank == 0) {
        printf("call,size,reps,local\n");
        fflush(stdout);
    }
    for (int c = 0; c < NCALLS; c++) {
        long lo = 0, hi = 0; /* largest local size of the prefix, first size that is not */
        for (long s = 1; s <= o.max_size; s *= 2) {
            if (!probe(rank, (enum call)c, buf, peer_buf, s, &o)) {
                hi = s;
                break;
            }
            lo = s;
        }
        while (hi != 0 && hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (probe(rank, (enum call)c, buf, peer_buf, mid, &o))
                lo = mid;
            else
                hi = mid;
        }
        if (rank == 0)
            fflush(stdout);
    }
    free(buf);
    free(peer_buf);
    MPI_Finalize();
    return 0;
}
