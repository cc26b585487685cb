/* Hand-written C entry points: the blocking calls whose nonblocking twin is not
 * enough (a receive from MPI_PROC_NULL, Sendrecv, probes, the completion calls), and
 * the calls that start or free generalized requests, which completion must know
 * (complete.c). Every other blocking call with a twin is generated at build time
 * (python/vhpc/runtime/wrappers.py). */
#include "vhpc_wait.h"

#include <stdlib.h>

/* The status of a receive from MPI_PROC_NULL. Set here because MPICH 4.0.2's
 * MPI_Irecv(MPI_PROC_NULL) completes with source 0 and tag 0, not the standard's. */
void vw_proc_null_status(MPI_Status *st) {
    if (st == MPI_STATUS_IGNORE) return;
    st->MPI_SOURCE = MPI_PROC_NULL;
    st->MPI_TAG = MPI_ANY_TAG;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
}

/* A receive and a send at once, as MPI_Sendrecv: the receive's error comes first.
 * From MPI_PROC_NULL nothing is received (see vw_proc_null_status). */
static int sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                    void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                    MPI_Comm comm, MPI_Status *status) {
    MPI_Request recv = MPI_REQUEST_NULL, send;
    int rc = source == MPI_PROC_NULL
                 ? MPI_SUCCESS
                 : PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &recv);
    if (rc != MPI_SUCCESS) return rc;
    rc = PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &send);
    if (rc != MPI_SUCCESS) {
        if (recv != MPI_REQUEST_NULL) PMPI_Cancel(&recv), PMPI_Request_free(&recv);
        return rc;
    }
    int rc_recv = MPI_SUCCESS;
    if (source == MPI_PROC_NULL) vw_proc_null_status(status);
    else rc_recv = vw_wait_one(&recv, status);
    int rc_send = vw_wait_one(&send, MPI_STATUS_IGNORE);
    return rc_recv != MPI_SUCCESS ? rc_recv : rc_send;
}

/* As MPICH does it internally: pack the outgoing data, receive in place. */
int vw_sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                        int recvtag, MPI_Comm comm, MPI_Status *status) {
    if (source == MPI_PROC_NULL) /* nothing arrives: buf is only sent */
        return sendrecv(buf, count, dt, dest, sendtag, NULL, 0, dt, source, recvtag, comm, status);
    int size, pos = 0, rc = PMPI_Pack_size(count, dt, comm, &size);
    if (rc != MPI_SUCCESS) return rc;
    void *packed = malloc(size > 0 ? (size_t)size : 1);
    if (!packed) return PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status);
    rc = PMPI_Pack(buf, count, dt, packed, size, &pos, comm);
    if (rc == MPI_SUCCESS)
        rc = sendrecv(packed, pos, MPI_PACKED, dest, sendtag, buf, count, dt, source, recvtag,
                      comm, status);
    free(packed);
    return rc;
}

/* ---- lifecycle -------------------------------------------------------- */

VW_C_ENTRY(MPI_Init)(int *argc, char ***argv) {
    vw_read_config();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) vw_after_init();
    return rc;
}

VW_C_ENTRY(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided) {
    vw_read_config();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) vw_after_init();
    return rc;
}

VW_C_ENTRY(MPI_Finalize)(void) {
    vw_before_finalize();
    return PMPI_Finalize();
}

/* ---- point to point --------------------------------------------------- */

VW_C_ENTRY(MPI_Recv)(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Recv(buf, count, dt, source, tag, comm, status));
    if (source == MPI_PROC_NULL) return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    START_AND_WAIT(PMPI_Irecv(buf, count, dt, source, tag, comm, &req_), status);
}

#if MPI_VERSION >= 4
VW_C_ENTRY(MPI_Recv_c)(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag,
                       MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Recv_c(buf, count, dt, source, tag, comm, status));
    if (source == MPI_PROC_NULL) return PMPI_Recv_c(buf, count, dt, source, tag, comm, status);
    START_AND_WAIT(PMPI_Irecv_c(buf, count, dt, source, tag, comm, &req_), status);
}
#endif

VW_C_ENTRY(MPI_Sendrecv)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
                                    recvcount, recvtype, source, recvtag, comm, status));
    return sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                    source, recvtag, comm, status);
}

VW_C_ENTRY(MPI_Sendrecv_replace)(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(
        PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status));
    return vw_sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status);
}

VW_C_ENTRY(MPI_Probe)(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Probe(source, tag, comm, status));
    return vw_probe(source, tag, comm, status);
}

VW_C_ENTRY(MPI_Mprobe)(int source, int tag, MPI_Comm comm, MPI_Message *message,
                      MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Mprobe(source, tag, comm, message, status));
    return vw_mprobe(source, tag, comm, message, status);
}

VW_C_ENTRY(MPI_Wait)(MPI_Request *req, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Wait(req, status));
    return vw_wait_one(req, status);
}

VW_C_ENTRY(MPI_Waitall)(int n, MPI_Request reqs[], MPI_Status statuses[]) {
    VW_NATIVE_OR_WAIT(PMPI_Waitall(n, reqs, statuses));
    return vw_wait_all(n, reqs, statuses);
}

VW_C_ENTRY(MPI_Waitany)(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Waitany(n, reqs, index, status));
    return vw_wait_any(n, reqs, index, status);
}

VW_C_ENTRY(MPI_Waitsome)(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    VW_NATIVE_OR_WAIT(PMPI_Waitsome(n, reqs, outcount, indices, statuses));
    return vw_wait_some(n, reqs, outcount, indices, statuses);
}

/* ---- one-sided synchronisation (rma.c) --------------------------------- */

VW_C_ENTRY(MPI_Win_fence)(int assert, MPI_Win win) {
    int rc = vw_win_arrive(win);
    return rc != MPI_SUCCESS ? rc : PMPI_Win_fence(assert, win);
}

VW_C_ENTRY(MPI_Win_free)(MPI_Win *win) {
    int rc = vw_win_arrive(*win);
    return rc != MPI_SUCCESS ? rc : PMPI_Win_free(win);
}

/* ---- generalized requests (see complete.c) ------------------------------ */

VW_C_ENTRY(MPI_Grequest_start)(MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn,
                       MPI_Grequest_cancel_function *cancel_fn, void *extra_state,
                       MPI_Request *request) {
    int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, extra_state, request);
    if (rc == MPI_SUCCESS) vw_greq_add(*request);
    return rc;
}

#ifdef MPICH
VW_C_ENTRY(MPIX_Grequest_start)(MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn,
                        MPI_Grequest_cancel_function *cancel_fn,
                        MPIX_Grequest_poll_function *poll_fn, MPIX_Grequest_wait_function *wait_fn,
                        void *extra_state, MPI_Request *request) {
    int rc = PMPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, wait_fn, extra_state,
                                  request);
    if (rc == MPI_SUCCESS) vw_greq_add(*request);
    return rc;
}

VW_C_ENTRY(MPIX_Grequest_class_allocate)(MPIX_Grequest_class greq_class, void *extra_state,
                                 MPI_Request *request) {
    int rc = PMPIX_Grequest_class_allocate(greq_class, extra_state, request);
    if (rc == MPI_SUCCESS) vw_greq_add(*request);
    return rc;
}
#endif

/* Calls that free requests without waiting: only while generalized requests are
 * tracked do they cost more than a load and a branch. Sets `rc` to the call's result. */
#define FORGET_FREED(rc, n, reqs, call)              \
    do {                                            \
        if (__builtin_expect(!vw_greq_any(), 1)) {  \
            (rc) = (call);                          \
            break;                                  \
        }                                           \
        vw_greq_snapshot snap_;                     \
        vw_greq_snap(&snap_, (n), (reqs));          \
        (rc) = (call);                              \
        vw_greq_forget(&snap_, (reqs));             \
    } while (0)

VW_C_ENTRY(MPI_Request_free)(MPI_Request *req) {
    int rc;
    FORGET_FREED(rc, 1, req, PMPI_Request_free(req));
    return rc;
}

/* The program's own polls (see vw_after_poll). */

VW_C_ENTRY(MPI_Test)(MPI_Request *req, int *flag, MPI_Status *status) {
    int rc;
    FORGET_FREED(rc, 1, req, PMPI_Test(req, flag, status));
    vw_after_poll(rc != MPI_SUCCESS || *flag);
    return rc;
}

VW_C_ENTRY(MPI_Testall)(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    int rc;
    FORGET_FREED(rc, n, reqs, PMPI_Testall(n, reqs, flag, statuses));
    vw_after_poll(rc != MPI_SUCCESS || *flag);
    return rc;
}

VW_C_ENTRY(MPI_Testany)(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    int rc;
    FORGET_FREED(rc, n, reqs, PMPI_Testany(n, reqs, index, flag, status));
    vw_after_poll(rc != MPI_SUCCESS || *flag);
    return rc;
}

VW_C_ENTRY(MPI_Testsome)(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    int rc;
    FORGET_FREED(rc, n, reqs, PMPI_Testsome(n, reqs, outcount, indices, statuses));
    vw_after_poll(rc != MPI_SUCCESS || *outcount != 0);
    return rc;
}

VW_C_ENTRY(MPI_Iprobe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    int rc = PMPI_Iprobe(source, tag, comm, flag, status);
    vw_after_poll(rc != MPI_SUCCESS || *flag);
    return rc;
}

VW_C_ENTRY(MPI_Improbe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                        MPI_Status *status) {
    int rc = PMPI_Improbe(source, tag, comm, flag, message, status);
    vw_after_poll(rc != MPI_SUCCESS || *flag);
    return rc;
}
