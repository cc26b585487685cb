/* Blocking and nonblocking collectives interleaved differently on each rank: rank
 * 0 starts an MPI_Iallreduce, then enters an MPI_Barrier; the others enter the
 * barrier first and start the allreduce after it (mpi4py's Iagree test on MPICH
 * 4.0 does this). Blocking and nonblocking collectives do not match each other,
 * so without the library the allreduce sums (rank + 4) over all ranks.
 *
 * Prints "collorder: rank <r> sum=<s> want=<w>", then "collorder: rank <r>
 * finalized" after MPI_Finalize. */
#include "check.h"

int main(int argc, char **argv)
{
    int wr, wp, mine, sum = 0;
    MPI_Request rq;

    prog_name = "collorder";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    mine = wr + 4;
    if (wr == 0) {
        OK(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
        BLK(MPI_Barrier(MPI_COMM_WORLD));
    } else {
        BLK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Iallreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    }
    BLK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    printf("collorder: rank %d sum=%d want=%d\n", wr, sum, wp * 4 + wp * (wp - 1) / 2);
    MPI_Finalize();
    printf("collorder: rank %d finalized\n", wr);
    return 0;
}
