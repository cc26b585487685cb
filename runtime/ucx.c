/* The MPI's own progress loop, where the library cannot reach it otherwise. MPICH's
 * ch4:ucx device (Debian's MPICH 4.0) busy-polls ucp_worker_progress inside every
 * call the library leaves to the MPI (a window fence, a passive-target unlock, the
 * rounds of a collective it leaves blocking), and has no setting that yields
 * there. Preloaded, the library's ucp_worker_progress stands in front of UCX's:
 * it calls it, and counts a call that found no event as an idle poll of the
 * program's (vw_after_poll: under adaptive, while runnable peers share the CPU,
 * past 16 idle ones in a row it hands the CPU over). In a process without UCX it
 * is never called. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <dlfcn.h>

typedef unsigned (*progress_fn)(void *worker);

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker) {
    static progress_fn next;
    if (__builtin_expect(!next, 0)) next = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    unsigned events = next(worker);
    vw_after_poll(events != 0);
    return events;
}
