/* The MPI's own idle-yield, where it has one we can switch at run time, and the
 * MPI's own idle wait where it was switched on at launch.
 *
 * Open MPI's progress engine can sched_yield() whenever a progress pass finds
 * nothing to do (`mpi_yield_when_idle`), but reads the option once, at MPI_Init.
 * Its switch, opal_progress_set_yield_when_idle(), is an exported function of
 * libopen-pal, so adaptive turns it on while ranks share a CPU and lets blocking
 * calls go straight to the MPI: a yield from inside the MPI's own wait loop costs
 * less than our MPI_Test loop around it. MPICH's ch4 has no such switch.
 *
 * Intel MPI's wait mode (I_MPI_WAIT_MODE, read at MPI_Init; `vhpc run` sets it when
 * ranks exceed CPUs) has an idle rank wait for the operating system instead of
 * polling, in point-to-point and collective calls alike; its blocking collectives
 * over shared memory then beat our loop around their nonblocking twins (mpi4py's
 * test_msgspec, docs/ci-bench.md). With it on, adaptive leaves shared-CPU waits to
 * the MPI, collectives included. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void (*set_yield_when_idle)(bool);
static int user_asked; /* the user set mpi_yield_when_idle: never switch it off */
static int waits_idle; /* Intel MPI in its wait mode */

/* Intel MPI started with its wait mode on: the values its documentation lists. */
static int intel_wait_mode(void) {
    const char *v = getenv("I_MPI_WAIT_MODE");
    if (!v) return 0;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (PMPI_Get_library_version(version, &len) != MPI_SUCCESS || !strstr(version, "Intel"))
        return 0;
    static const char *const on[] = {"1", "on", "yes", "enable", "true"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++)
        if (strcasecmp(v, on[i]) == 0) return 1;
    return 0;
}

/* Find the switch once MPI is initialised; says whether the MPI's own blocking calls
 * hand a shared CPU over by themselves (switched or already waiting so). */
int vw_mpi_yield_init(void) {
    if (!vw_cfg.mpi_yield) return 0;
    set_yield_when_idle = (void (*)(bool))dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle");
    const bool *current = dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle");
    user_asked = current && *current;
    waits_idle = !set_yield_when_idle && intel_wait_mode();
    return set_yield_when_idle != NULL || waits_idle;
}

int vw_mpi_waits_idle(void) { return waits_idle; }

void vw_mpi_yield_set(int on) {
    if (set_yield_when_idle && !user_asked) set_yield_when_idle(on != 0);
}
