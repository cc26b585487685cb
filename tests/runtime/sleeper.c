/* A program that is off the CPU by its own doing between its MPI calls: rounds
 * of ping-pong (ranks 2i and 2i+1), each followed by a sleep outside MPI, as
 * IMB-P2P sleeps 100 ms before each message size. adaptive must not take that
 * sleep for a time slicer holding the rank off (docs/runtime.md).
 *
 * Usage: sleeper [rounds [sleep_ms]]   (default 12 rounds, 40 ms)
 * Prints "sleeper: rank <r> ok rounds=<n>". */
#include <time.h>

#include "check.h"

enum { LEN = 8, MESSAGES = 200 };

int main(int argc, char **argv)
{
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 12;
    long sleep_ms = argc > 2 ? atol(argv[2]) : 40;
    int msg[LEN] = {0};

    prog_name = "sleeper";
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int peer = rank ^ 1;
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; peer < size && m < MESSAGES; m++) {
            if (rank % 2 == 0) {
                msg[0] = m;
                BLK(MPI_Send(msg, LEN, MPI_INT, peer, m, MPI_COMM_WORLD));
                BLK(MPI_Recv(msg, LEN, MPI_INT, peer, m, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(msg[0] == m + 1, "round %d: got %d back for %d", r, msg[0], m);
            } else {
                BLK(MPI_Recv(msg, LEN, MPI_INT, peer, m, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                msg[0]++;
                BLK(MPI_Send(msg, LEN, MPI_INT, peer, m, MPI_COMM_WORLD));
            }
        }
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    printf("sleeper: rank %d ok rounds=%d\n", rank, rounds);
    OK(MPI_Finalize());
    return 0;
}
