/* The MPI's own idle-yield, where it has one we can switch at run time.
 *
 * Open MPI's progress engine can sched_yield() whenever a progress pass finds
 * nothing to do (`mpi_yield_when_idle`), but reads the option once, at MPI_Init.
 * Its switch, opal_progress_set_yield_when_idle(), is an exported function of
 * libopen-pal, so adaptive turns it on while ranks share a CPU and lets blocking
 * calls go straight to the MPI: a yield from inside the MPI's own wait loop costs
 * less than our MPI_Test loop around it. MPICH's ch4 has no such switch. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <dlfcn.h>
#include <stdbool.h>

static void (*set_yield_when_idle)(bool);
static int user_asked; /* the user set mpi_yield_when_idle: never switch it off */

/* Find the switch once MPI is initialised; says whether there is one. */
int vw_mpi_yield_init(void) {
    if (!vw_cfg.mpi_yield) return 0;
    set_yield_when_idle = (void (*)(bool))dlsym(RTLD_DEFAULT, "opal_progress_set_yield_when_idle");
    const bool *current = dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle");
    user_asked = current && *current;
    return set_yield_when_idle != NULL;
}

void vw_mpi_yield_set(int on) {
    if (set_yield_when_idle && !user_asked) set_yield_when_idle(on != 0);
}
