/* Where the library's own collectives run. A blocking collective turned into its
 * nonblocking twin must not match the program's own nonblocking collectives: MPIs
 * keep the two kinds apart (Barrier on rank 0 beside Iallreduce on rank 1 works
 * without the library; mpi4py's Iagree test does that, through its Iallreduce
 * fallback), and a twin started on the program's communicator would take the
 * other's place. So each intra-communicator gets a private one of the same group
 * (an attribute of it, freed with it), and the twins, and the library's arrival
 * barriers, run there. It is made where the ranks are together: MPI_COMM_WORLD's
 * at MPI_Init, a new communicator's inside the call that made it (vw_made), one
 * made by a call the library leaves alone at its first blocking collective (a
 * point in the blocking collectives' order, which every rank shares; under Open
 * MPI, whose communicator creation runs nonblocking collectives, the program's own
 * nonblocking ones on it may then be matched wrongly if ranks order them
 * differently). MPI_Comm_create, not MPI_Comm_dup: a dup would run the program's
 * attribute copy callbacks. The private communicator returns errors, which are
 * raised on the program's (vw_raise), whose error handler the program may change
 * at any time. It has no topology: neighbour collectives stay on the program's
 * communicator. A ULFM MPIX_Comm_revoke reaches the program's communicator only:
 * collectives turned into twins then go on, on the private one. */
#include "vhpc_wait.h"

#include <pthread.h>
#include <stdlib.h>

static int keyval = MPI_KEYVAL_INVALID;
static pthread_once_t keyval_once = PTHREAD_ONCE_INIT;

static int free_shadow(MPI_Comm comm, int kv, void *attr, void *extra) {
    return vw_private_free(attr);
}

/* Never copied into a dup of the program's (that one gets its own, when needed);
 * our own function: Open MPI makes MPI_COMM_NULL_COPY_FN a symbol of its library. */
static int no_copy(MPI_Comm comm, int kv, void *extra, void *in, void *out, int *flag) {
    *flag = 0;
    return MPI_SUCCESS;
}

static void make_keyval(void) {
    if (PMPI_Comm_create_keyval(no_copy, free_shadow, &keyval, NULL) != MPI_SUCCESS)
        keyval = MPI_KEYVAL_INVALID;
}

MPI_Comm *vw_private_comm(MPI_Comm comm) {
    MPI_Comm *out = malloc(sizeof *out);
    MPI_Group group;
    if (!out || PMPI_Comm_group(comm, &group) != MPI_SUCCESS) {
        free(out);
        return NULL;
    }
    int rc = PMPI_Comm_create(comm, group, out);
    PMPI_Group_free(&group);
    if (rc != MPI_SUCCESS) {
        free(out);
        return NULL;
    }
    PMPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return out;
}

int vw_private_free(MPI_Comm *comm) {
    int rc = PMPI_Comm_free(comm);
    free(comm);
    return rc;
}

MPI_Comm vw_shadow(MPI_Comm comm) {
    if (comm == MPI_COMM_NULL || vw_is_inter(comm)) return MPI_COMM_NULL;
    pthread_once(&keyval_once, make_keyval);
    if (keyval == MPI_KEYVAL_INVALID) return comm;
    MPI_Comm *shadow;
    int found = 0;
    if (PMPI_Comm_get_attr(comm, keyval, &shadow, &found) == MPI_SUCCESS && found) return *shadow;
    /* Every rank gets here at the same collective: the first of the blocking ones on
     * `comm`, whose order every rank shares. A failure (a revoked communicator) fails
     * alike everywhere, and the twin then runs on `comm` itself. */
    shadow = vw_private_comm(comm);
    if (!shadow) return comm;
    if (PMPI_Comm_set_attr(comm, keyval, shadow) != MPI_SUCCESS) {
        vw_private_free(shadow);
        return comm;
    }
    return *shadow;
}

void vw_made(MPI_Comm comm) {
    if (!vw_coll_blocking) vw_shadow(comm);
}

int vw_raise(MPI_Comm comm, int rc) {
    if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
    return rc;
}

/* ULFM: a revoked communicator fails every collective with MPI_ERR_REVOKED, but
 * its private one here is not revoked with it, and a twin started there would go
 * on (or, revoked too, wait forever in Open MPI 5). So a collective on a revoked
 * communicator is the MPI's own blocking call, which fails at once as it should.
 * Looked up at the first call: only MPIs with ULFM have it. A revoke from another
 * rank that arrives while this one already waits in a twin is not seen there. */
int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
static int has_PMPIX_Comm_is_revoked = -1;

int vw_revoked(MPI_Comm comm) {
    int flag = 0;
    return VW_RESOLVES(PMPIX_Comm_is_revoked) && comm != MPI_COMM_NULL &&
           PMPIX_Comm_is_revoked(comm, &flag) == MPI_SUCCESS && flag;
}
