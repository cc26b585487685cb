/* A small MPI check (ring exchange, allreduce, barrier) that also reports which MPI
 * libraries its process has mapped, for tests/test_runtime_route.py: built as a
 * program linked with its MPI, and as a shared object (-DROUTE_LIB) that
 * route_loader.c opens with dlopen, as Python's mpi4py opens its MPI.
 *
 * Prints "route: rank <r> ok sum=<s> mpis=<libraries>", then "route: rank <r>
 * finalized" after MPI_Finalize. */
#include <string.h>

#include "check.h"

/* The MPI libraries mapped in this process, by file name, comma-separated. */
static void mapped_mpis(char *out, size_t len)
{
    static const char *const known[] = {"libmpich.so", "libmpi.so", "libmpich_", "libmpi_"};
    char line[4096], seen[8][256];
    int nseen = 0;
    FILE *maps = fopen("/proc/self/maps", "r");

    out[0] = '\0';
    if (!maps)
        return;
    while (fgets(line, sizeof line, maps)) {
        char *file = strrchr(line, '/');
        if (!file)
            continue;
        file++;
        file[strcspn(file, "\n")] = '\0';
        int known_mpi = 0;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            known_mpi |= strncmp(file, known[k], strlen(known[k])) == 0;
        /* Fortran layers (libmpichfort, libmpi_mpifh) and Open MPI's helpers belong to an
         * MPI already counted; only the core library names the MPI. */
        if (!known_mpi || strstr(file, "fort") || strstr(file, "mpifh") || strstr(file, "_usempi"))
            continue;
        int dup = 0;
        for (int i = 0; i < nseen; i++)
            dup |= strcmp(seen[i], file) == 0;
        if (dup || nseen == 8)
            continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", file);
        snprintf(out + strlen(out), len - strlen(out), "%s%s", nseen > 1 ? "," : "", file);
    }
    fclose(maps);
}

static int route_main(int argc, char **argv)
{
    int wr, wp, sum = 0, got = -1;
    char mpis[1024];

    prog_name = "route";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    int right = (wr + 1) % wp, left = (wr + wp - 1) % wp;
    BLK(MPI_Sendrecv(&wr, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE));
    CHECK(got == left, "ring: got %d from the left, expected %d", got, left);
    BLK(MPI_Allreduce(&wr, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == wp * (wp - 1) / 2, "Allreduce gave %d", sum);
    BLK(MPI_Barrier(MPI_COMM_WORLD));
    mapped_mpis(mpis, sizeof mpis);
    printf("route: rank %d ok sum=%d mpis=%s\n", wr, sum, mpis);
    MPI_Finalize();
    printf("route: rank %d finalized\n", wr);
    return 0;
}

#ifdef ROUTE_LIB
int route_lib_main(int argc, char **argv)
{
    return route_main(argc, argv);
}
#else
int main(int argc, char **argv)
{
    return route_main(argc, argv);
}
#endif
