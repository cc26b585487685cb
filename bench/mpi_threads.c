/*
 * mpi_threads: how many threads an MPI rank has once MPI_Init has returned and
 * the ranks have talked (its own, and the MPI's helpers: UCX's async thread,
 * Open MPI's progress threads). A time slicer that reads every task of a
 * domain to see it idle reads that many per rank (vhpc calibrate, the lab's
 * slicer model). Counts /proc/self/task after a barrier and a ring exchange.
 * Output: CSV `metric,value,unit` with `threads_per_rank`, the most over the
 * ranks, and `verified` (a count was read).
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % size, 0, (rank + size - 1) % size, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int mine = count_threads(), most = 0;
    MPI_Reduce(&mine, &most, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("metric,value,unit\n");
        printf("threads_per_rank,%d,count\n", most);
        printf("verified,%d,bool\n", most > 0);
    }
    MPI_Finalize();
    return rank == 0 && most <= 0;
}
