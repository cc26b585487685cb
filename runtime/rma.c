/* One-sided synchronisation without a twin. MPI_Win_fence and MPI_Win_free are
 * collective over the window's group, busy-poll inside the MPI while a peer is not
 * there yet, and have no nonblocking form nor a communicator to wait in. So, where
 * collectives are turned into their twins (the same decision on every rank), each
 * window made through the library keeps a private communicator of the group it was
 * made on (vw_private_comm; a window attribute, freed with the window), and a fence
 * or a free first waits, the library's way, in an MPI_Ibarrier on it. */
#include "vhpc_wait.h"

#include <pthread.h>

static int keyval = MPI_KEYVAL_INVALID;
static pthread_once_t keyval_once = PTHREAD_ONCE_INIT;

static int free_comm(MPI_Win win, int kv, void *attr, void *extra) {
    return vw_private_free(attr);
}

/* Windows are never copied; our own, not MPI_WIN_NULL_COPY_FN, which Open MPI makes
 * a symbol of its library (the library references none that could be missing). */
static int no_copy(MPI_Win win, int kv, void *extra, void *in, void *out, int *flag) {
    *flag = 0;
    return MPI_SUCCESS;
}

static void make_keyval(void) {
    if (PMPI_Win_create_keyval(no_copy, free_comm, &keyval, NULL) != MPI_SUCCESS)
        keyval = MPI_KEYVAL_INVALID;
}

void vw_win_remember(MPI_Win win, MPI_Comm comm) {
    if (vw_coll_blocking) return;
    pthread_once(&keyval_once, make_keyval);
    if (keyval == MPI_KEYVAL_INVALID) return;
    MPI_Comm *own = vw_private_comm(comm);
    if (own && PMPI_Win_set_attr(win, keyval, own) != MPI_SUCCESS) vw_private_free(own);
    /* without one, the next fence does without the wait */
}

int vw_win_arrive(MPI_Win win) {
    if (vw_coll_blocking || keyval == MPI_KEYVAL_INVALID || win == MPI_WIN_NULL) return MPI_SUCCESS;
    MPI_Comm *comm;
    int found = 0;
    if (PMPI_Win_get_attr(win, keyval, &comm, &found) != MPI_SUCCESS || !found) return MPI_SUCCESS;
    int rc = vw_arrive_private(*comm);
    if (rc != MPI_SUCCESS) PMPI_Win_call_errhandler(win, rc);
    return rc;
}
