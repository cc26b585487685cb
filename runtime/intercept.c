/* C entry points: every blocking MPI call becomes its nonblocking twin plus vw_wait,
 * unless adaptive passes it straight to the MPI's own blocking call. */
#include "vhpc_wait.h"

#include <stdlib.h>

/* ---- completion with the policy --------------------------------------- */

struct one_ctx { MPI_Request *req; MPI_Status *st; };
static int test_one(void *c, int *done) {
    struct one_ctx *x = c;
    return PMPI_Test(x->req, done, x->st);
}
int vw_wait_one(MPI_Request *req, MPI_Status *st) {
    struct one_ctx c = {req, st};
    return vw_wait(test_one, &c);
}

struct all_ctx { int n; MPI_Request *reqs; MPI_Status *st; };
static int test_all(void *c, int *done) {
    struct all_ctx *x = c;
    return PMPI_Testall(x->n, x->reqs, done, x->st);
}
/* MPI_Testall gives up at the first failed request and leaves the others pending
 * (MPI_ERR_PENDING); MPI_Waitall completes them. So do we, which needs the
 * statuses even when the caller ignores them. */
int vw_wait_all(int n, MPI_Request reqs[], MPI_Status st[]) {
    MPI_Status local[16], *sts = st;
    if (st == MPI_STATUSES_IGNORE) {
        sts = n <= 16 ? local : malloc((size_t)n * sizeof *sts);
        if (!sts) return PMPI_Waitall(n, reqs, st);
    }
    struct all_ctx c = {n, reqs, sts};
    int rc = vw_wait(test_all, &c);
    for (int i = 0; rc == MPI_ERR_IN_STATUS && i < n; i++) {
        if (sts[i].MPI_ERROR != MPI_ERR_PENDING) continue;
        int err = vw_wait_one(&reqs[i], &sts[i]);
        sts[i].MPI_ERROR = err;
    }
    if (sts != st && sts != local) free(sts);
    return rc;
}

struct any_ctx { int n; MPI_Request *reqs; int *index; MPI_Status *st; };
static int test_any(void *c, int *done) {
    struct any_ctx *x = c;
    return PMPI_Testany(x->n, x->reqs, x->index, done, x->st);
}
int vw_wait_any(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    struct any_ctx c = {n, reqs, index, st};
    return vw_wait(test_any, &c);
}

struct some_ctx { int n; MPI_Request *reqs; int *outcount; int *indices; MPI_Status *st; };
static int test_some(void *c, int *done) {
    struct some_ctx *x = c;
    int rc = PMPI_Testsome(x->n, x->reqs, x->outcount, x->indices, x->st);
    *done = *x->outcount != 0; /* MPI_UNDEFINED (no active request) also ends the wait */
    return rc;
}
int vw_wait_some(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status st[]) {
    struct some_ctx c = {n, reqs, outcount, indices, st};
    return vw_wait(test_some, &c);
}

struct probe_ctx { int source, tag; MPI_Comm comm; MPI_Status *st; };
static int test_probe(void *c, int *done) {
    struct probe_ctx *x = c;
    return PMPI_Iprobe(x->source, x->tag, x->comm, done, x->st);
}
int vw_probe(int source, int tag, MPI_Comm comm, MPI_Status *st) {
    struct probe_ctx c = {source, tag, comm, st};
    return vw_wait(test_probe, &c);
}

int vw_complete(vw_thread *t, int native, MPI_Request *req) {
    if (!native) return vw_wait_one(req, MPI_STATUS_IGNORE);
    if (__builtin_expect(!vw_cfg.stats || t->in_fortran, 1)) return PMPI_Wait(req, MPI_STATUS_IGNORE);
    uint64_t t0 = vw_now_ns();
    int rc = PMPI_Wait(req, MPI_STATUS_IGNORE);
    t->waited_ns += vw_now_ns() - t0;
    return rc;
}

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

int MPI_Init(int *argc, char ***argv) {
    vw_read_config();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) vw_after_init();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    vw_read_config();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS) vw_after_init();
    return rc;
}

int MPI_Finalize(void) {
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

int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Send(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Isend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Ssend(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Issend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) {
    VW_NATIVE_OR_WAIT(PMPI_Rsend(buf, count, dt, dest, tag, comm));
    START_AND_WAIT(PMPI_Irsend(buf, count, dt, dest, tag, comm, &req_), MPI_STATUS_IGNORE);
}

int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Recv(buf, count, dt, source, tag, comm, status));
    if (source == MPI_PROC_NULL) return PMPI_Recv(buf, count, dt, source, tag, comm, status);
    START_AND_WAIT(PMPI_Irecv(buf, count, dt, source, tag, comm, &req_), status);
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
                                    recvcount, recvtype, source, recvtag, comm, status));
    return sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                    source, recvtag, comm, status);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(
        PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status));
    return vw_sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Probe(source, tag, comm, status));
    return vw_probe(source, tag, comm, status);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Wait(req, status));
    return vw_wait_one(req, status);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
    VW_NATIVE_OR_WAIT(PMPI_Waitall(n, reqs, statuses));
    return vw_wait_all(n, reqs, statuses);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
    VW_NATIVE_OR_WAIT(PMPI_Waitany(n, reqs, index, status));
    return vw_wait_any(n, reqs, index, status);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    VW_NATIVE_OR_WAIT(PMPI_Waitsome(n, reqs, outcount, indices, statuses));
    return vw_wait_some(n, reqs, outcount, indices, statuses);
}

/* ---- collectives ------------------------------------------------------ */

/* Started nonblocking on every rank whatever its mode (see vw_complete). */
#define COLLECTIVE(start_call)                                             \
    do {                                                                   \
        vw_thread *t_ = vw_self();                                         \
        int native_ = vw_take_native(t_);                                  \
        MPI_Request req_;                                                  \
        int rc_ = (start_call);                                            \
        return rc_ != MPI_SUCCESS ? rc_ : vw_complete(t_, native_, &req_); \
    } while (0)

int MPI_Barrier(MPI_Comm comm) {
    COLLECTIVE(PMPI_Ibarrier(comm, &req_));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
    COLLECTIVE(PMPI_Ibcast(buf, count, dt, root, comm, &req_));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm) {
    COLLECTIVE(PMPI_Ireduce(sendbuf, recvbuf, count, dt, op, root, comm, &req_));
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm) {
    COLLECTIVE(PMPI_Iallreduce(sendbuf, recvbuf, count, dt, op, comm, &req_));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    COLLECTIVE(PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              &req_));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    COLLECTIVE(PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                               recvtype, comm, &req_));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    COLLECTIVE(PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                               &req_));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
    COLLECTIVE(PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                                comm, &req_));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    COLLECTIVE(PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                            &req_));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
    COLLECTIVE(PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                             root, comm, &req_));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    COLLECTIVE(PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                             &req_));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
    COLLECTIVE(PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                              root, comm, &req_));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
    COLLECTIVE(PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, dt, op, comm, &req_));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype dt,
                             MPI_Op op, MPI_Comm comm) {
    COLLECTIVE(PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, dt, op, comm, &req_));
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm) {
    COLLECTIVE(PMPI_Iscan(sendbuf, recvbuf, count, dt, op, comm, &req_));
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
               MPI_Comm comm) {
    COLLECTIVE(PMPI_Iexscan(sendbuf, recvbuf, count, dt, op, comm, &req_));
}
