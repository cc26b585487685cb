/* The MPI's own progress loop, where the library cannot reach it otherwise. MPICH's
 * ch4:ucx device (Debian's MPICH 4.0) busy-polls ucp_worker_progress inside every
 * call the library leaves to the MPI (a window fence, a passive-target unlock, the
 * rounds of a collective it leaves blocking), and has no setting that yields
 * there. Preloaded, the library's ucp_worker_progress stands in front of UCX's:
 * it calls it, and counts a call that found no event as an idle poll of the
 * program's (vw_after_poll: under adaptive, while runnable peers share the CPU,
 * past 16 idle ones in a row it hands the CPU over), except inside the library's
 * own waits, whose loop yields by itself. In a process without UCX it is never
 * called. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <dlfcn.h>

#include <stdio.h>
#include <stdlib.h>

typedef unsigned (*progress_fn)(void *worker);

/* UCX's own: in libucp itself (an MPI opened with dlopen, RTLD_LOCAL, keeps it out
 * of the global scope, where RTLD_NEXT looks). */
static progress_fn find_real(void) {
    void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    progress_fn f = ucp ? (progress_fn)dlsym(ucp, "ucp_worker_progress") : NULL;
    if (!f) f = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    if (!f) {
        fprintf(stderr, "vhpc_wait: cannot find UCX's ucp_worker_progress to call\n");
        abort();
    }
    return f;
}

static int hooked; /* the MPI's progress came through here */

int vw_ucx_hooked(void) { return __atomic_load_n(&hooked, __ATOMIC_RELAXED); }

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker) {
    static progress_fn real;
    if (__builtin_expect(!real, 0)) {
        real = find_real();
        __atomic_store_n(&hooked, 1, __ATOMIC_RELAXED);
    }
    unsigned events = real(worker);
    /* Only once our MPI_Init ran: standing aside for another MPI, we stay out. */
    if (vw_world_rank >= 0) vw_after_poll(events != 0);
    return events;
}
