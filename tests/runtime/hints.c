/* The hint page as the ranks publish it (runtime/hints.c): two ranks of one
 * domain, slots 0 and 1 of page 1 of the file VHPC_HINTS names. Each rank maps
 * the file itself and watches the other's slot, so every check waits for a state
 * the peer must reach, with no timing:
 *   1. rank 0 waits in MPI_Recv while rank 1 computes: rank 1 sees rank 0's
 *      state WAIT with the PARKABLE flag (it waits in the library's loop), and
 *      its own state is COMPUTE; then it sends.
 *   2. rank 1 waits in MPI_Barrier while rank 0 computes: rank 0 sees COLL.
 *   3. each rank's pid is in its slot.
 * Without VHPC_HINTS it only communicates (the library then touches no page).
 * With the argument `parkable` (a policy that always waits in the library's loop)
 * the waits must carry the PARKABLE flag; otherwise only their kind is checked
 * (adaptive may pass a call to the MPI's own wait).
 * Prints "hints: rank <r> ok saw=<states seen>", then "... finalized". */
#include "check.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { PAGE = 4096, SLOT = 64, WAIT = 2, COLL = 3, COMPUTE = 1, PARKABLE = 0x20 };

static volatile uint32_t *slot_word(unsigned char *base, int s, int field)
{
    return (volatile uint32_t *)(base + PAGE + SLOT * s + 4 * field);
}

/* Waits until the peer's state has kind `kind` (and the flag if given): 10 s at most. */
static uint32_t await_kind(unsigned char *base, int peer, uint32_t kind, uint32_t flag)
{
    struct timespec ts = {0, 100000};
    for (int i = 0; i < 100000; i++) {
        uint32_t s = __atomic_load_n(slot_word(base, peer, 0), __ATOMIC_ACQUIRE);
        if ((s & 0xf) == kind && (s & flag) == flag)
            return s;
        nanosleep(&ts, NULL);
    }
    CHECK(0, "rank %d never reached state kind %u (flag 0x%x): last 0x%x", peer, kind, flag,
          *slot_word(base, peer, 0));
    return 0;
}

int main(int argc, char **argv)
{
    int rank, size, msg = 42, got = 0;
    prog_name = "hints";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "needs 2 ranks, got %d", size);
    const char *path = getenv("VHPC_HINTS");
    unsigned char *base = NULL;
    char saw[64] = "none";
    uint32_t parkable = argc > 1 && strcmp(argv[1], "parkable") == 0 ? PARKABLE : 0;
    if (path) {
        int fd = open(path, O_RDWR);
        CHECK(fd >= 0, "cannot open %s", path);
        base = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(base != MAP_FAILED, "cannot map %s", path);
        close(fd);
        CHECK(*slot_word(base, rank, 2) == (uint32_t)getpid(), "slot %d holds pid %u, not %d",
              rank, *slot_word(base, rank, 2), (int)getpid());
    }
    if (rank == 0) {
        BLK(MPI_Recv(&got, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == 42, "received %d", got);
        if (base) {
            CHECK((*slot_word(base, 0, 0) & 0xf) == COMPUTE, "own state 0x%x after Recv",
                  *slot_word(base, 0, 0));
            uint32_t s = await_kind(base, 1, COLL, parkable);
            snprintf(saw, sizeof saw, "coll:0x%x", s);
        }
        BLK(MPI_Barrier(MPI_COMM_WORLD));
    } else {
        if (base) {
            uint32_t s = await_kind(base, 0, WAIT, parkable);
            CHECK((*slot_word(base, 1, 0) & 0xf) == COMPUTE, "own state 0x%x while computing",
                  *slot_word(base, 1, 0));
            snprintf(saw, sizeof saw, "wait:0x%x", s);
        }
        BLK(MPI_Send(&msg, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
        BLK(MPI_Barrier(MPI_COMM_WORLD));
    }
    printf("hints: rank %d ok saw=%s blocking=%d\n", rank, saw, nblocking);
    fflush(stdout);
    MPI_Finalize();
    printf("hints: rank %d finalized\n", rank);
    return 0;
}
