/* C entry points: every blocking MPI call becomes its nonblocking twin plus vw_wait,
 * unless adaptive passes it straight to the MPI's own blocking call; and the calls
 * that start or free generalized requests, which completion must know (complete.c). */
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

#define START_AND_WAIT(start_call, status)                  \
    do {                                                   \
        MPI_Request req_;                                  \
        int rc_ = (start_call);                            \
        if (rc_ != MPI_SUCCESS) return rc_;                \
        return vw_wait_one(&req_, status);                 \
    } while (0)

VW_C_ENTRY(MPI_Send)(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Send(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Isend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

VW_C_ENTRY(MPI_Ssend)(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Ssend(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Issend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

VW_C_ENTRY(MPI_Rsend)(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Rsend(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Irsend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

VW_C_ENTRY(MPI_Recv)(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Recv(buf, count, dt, source, tag, comm, status));
    if (source == MPI_PROC_NULL) return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    START_AND_WAIT(PMPI_Irecv(buf, count, dt, source, tag, comm, &req_), status);
}

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

/* ---- collectives ------------------------------------------------------ */

/* The MPI's own blocking call, or its nonblocking twin (VW_COLLECTIVE). */

VW_C_ENTRY(MPI_Barrier)(MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Barrier(comm),
                  PMPI_Ibarrier(comm, &req_));
}

VW_C_ENTRY(MPI_Bcast)(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Bcast(buf, count, dt, root, comm),
                  PMPI_Ibcast(buf, count, dt, root, comm, &req_));
}

VW_C_ENTRY(MPI_Reduce)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm),
                  PMPI_Ireduce(sendbuf, recvbuf, count, dt, op, root, comm, &req_));
}

VW_C_ENTRY(MPI_Allreduce)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm),
                  PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, &req_));
}

VW_C_ENTRY(MPI_Alltoall)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
                  PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                 &req_));
}

VW_C_ENTRY(MPI_Alltoallv)(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                 rdispls, recvtype, comm),
                  PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                  rdispls, recvtype, comm, &req_));
}

VW_C_ENTRY(MPI_Allgather)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
                  PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                  &req_));
}

VW_C_ENTRY(MPI_Allgatherv)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                  recvtype, comm),
                  PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                   recvtype, comm, &req_));
}

VW_C_ENTRY(MPI_Gather)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                              comm),
                  PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                               comm, &req_));
}

VW_C_ENTRY(MPI_Gatherv)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                               root, comm),
                  PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                recvtype, root, comm, &req_));
}

VW_C_ENTRY(MPI_Scatter)(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                               comm),
                  PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                                comm, &req_));
}

VW_C_ENTRY(MPI_Scatterv)(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                recvtype, root, comm),
                  PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                 recvtype, root, comm, &req_));
}

VW_C_ENTRY(MPI_Reduce_scatter)(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm),
                  PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, &req_));
}

VW_C_ENTRY(MPI_Reduce_scatter_block)(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype dt,
                             MPI_Op op, MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm),
                  PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, &req_));
}

VW_C_ENTRY(MPI_Scan)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Scan(sendbuf, recvbuf, count, dt, op, comm),
                  PMPI_Iscan(sendbuf, recvbuf, count, dt, op, comm, &req_));
}

VW_C_ENTRY(MPI_Exscan)(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
               MPI_Comm comm) {
    VW_COLLECTIVE(PMPI_Exscan(sendbuf, recvbuf, count, dt, op, comm),
                  PMPI_Iexscan(sendbuf, recvbuf, count, dt, op, comm, &req_));
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
 * tracked do they cost more than a load and a branch. */
#define FORGET_FREED(n, reqs, call)                  \
    do {                                            \
        if (__builtin_expect(!vw_greq_any(), 1))    \
            return (call);                          \
        vw_greq_snapshot snap_;                     \
        vw_greq_snap(&snap_, (n), (reqs));          \
        int rc_ = (call);                           \
        vw_greq_forget(&snap_, (reqs));             \
        return rc_;                                 \
    } while (0)

VW_C_ENTRY(MPI_Request_free)(MPI_Request *req) {
    FORGET_FREED(1, req, PMPI_Request_free(req));
}

VW_C_ENTRY(MPI_Test)(MPI_Request *req, int *flag, MPI_Status *status) {
    FORGET_FREED(1, req, PMPI_Test(req, flag, status));
}

VW_C_ENTRY(MPI_Testall)(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    FORGET_FREED(n, reqs, PMPI_Testall(n, reqs, flag, statuses));
}

VW_C_ENTRY(MPI_Testany)(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
    FORGET_FREED(n, reqs, PMPI_Testany(n, reqs, index, flag, status));
}

VW_C_ENTRY(MPI_Testsome)(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    FORGET_FREED(n, reqs, PMPI_Testsome(n, reqs, outcount, indices, statuses));
}
