/* Fortran entry points (mpif.h and `use mpi`, gfortran name mangling).
 *
 * Open MPI's Fortran bindings call PMPI_* directly, so intercepting the C
 * symbols alone would miss every Fortran call; MPICH's call MPI_*. Both are
 * handled the same way here: the Fortran symbol is intercepted, the MPI's own
 * Fortran nonblocking routine (pmpi_i*_) starts the operation, so Fortran
 * special values (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS_IGNORE) keep their
 * meaning, and the request is completed by vw_wait like a C one. */
#include "fortran.h"

#include <stdlib.h>
#include <string.h>

#ifdef MPI_F_STATUS_SIZE
#define F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(F)))
#endif

/* Open MPI's own Fortran MPI_Wait, MPI_Waitall, MPI_Waitany and MPI_Waitsome write
 * request handles, statuses and 1-based indices back only when the call succeeds
 * (ompi/mpi/fortran/mpif-h/wait*_f.c): a failed one leaves them as they were, but
 * for the index and count its C call wrote in place. The wrappers do the same, so a
 * program sees what it would without the library. MPICH's always write them. */
#ifdef OPEN_MPI
#define F_RESULTS_ON_ERROR 0
#else
#define F_RESULTS_ON_ERROR 1
#endif

/* Every entry point is also exported under the other manglings compilers use. */
#define F_ALIASES(lower, UPPER)                                                   \
    VW_F_ALIAS(lower##_, lower##__);                                              \
    VW_F_ALIAS(lower##_, lower);                                                  \
    VW_F_ALIAS(lower##_, UPPER)

/* Run the MPI's own Fortran routine for a call already counted. MPICH's Fortran
 * layer calls the C MPI_* symbols, i.e. our C wrappers: in_fortran tells them
 * this call is counted and decided. */
#define F_RUN_NATIVE(t, native_call)                                    \
    do {                                                                \
        int timed_ = vw_cfg.stats || vw_native_sleeps;                  \
        uint64_t t0_ = timed_ ? vw_now_ns() : 0;                        \
        (t)->in_fortran = 1;                                            \
        native_call;                                                    \
        (t)->in_fortran = 0;                                            \
        uint64_t d_ = timed_ ? vw_now_ns() - t0_ : 0;                   \
        if (vw_native_sleeps) (t)->native_idle_ns += d_;                \
        if (vw_cfg.stats) (t)->waited_ns += d_;                         \
    } while (0)

/* Pass a call to the MPI's own Fortran routine where adaptive says so. */
#define F_NATIVE_OR_WAIT(native_call)                                   \
    do {                                                                \
        vw_thread *t_ = vw_self();                                      \
        if (vw_take_native(t_)) {                                       \
            F_RUN_NATIVE(t_, native_call);                              \
            return;                                                     \
        }                                                               \
    } while (0)

/* ---- helpers ---------------------------------------------------------- */

static void status_to_f(const MPI_Status *st, F *fst) {
    if (fst != MPI_F_STATUS_IGNORE) PMPI_Status_c2f(st, fst);
}

/* The C status a call completes into starts as the caller's: what the MPI leaves
 * alone (MPI_ERROR, in calls that complete one request) stays as the caller had it,
 * as when the MPI's own routine writes the Fortran status in place. */
static void status_from_f(const F *fst, MPI_Status *st) {
    if (fst != MPI_F_STATUS_IGNORE) PMPI_Status_f2c(fst, st);
    else memset(st, 0, sizeof *st);
}

/* Complete a request we started on the Fortran side. */
static void wait_started(F *freq, F *fstatus, F *ierr) {
    if (*ierr != MPI_SUCCESS) return;
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    status_from_f(fstatus, &st);
    *ierr = vw_wait_one(&req, &st);
    status_to_f(&st, fstatus);
}

/* Fortran request array <-> C, allocated for the duration of one wait. */
static MPI_Request *requests_from_f(int n, const F *freqs) {
    MPI_Request *reqs = malloc((size_t)(n > 0 ? n : 1) * sizeof *reqs);
    if (reqs)
        for (int i = 0; i < n; i++) reqs[i] = PMPI_Request_f2c(freqs[i]);
    return reqs;
}

static void requests_to_f(int n, MPI_Request *reqs, F *freqs) {
    for (int i = 0; i < n; i++) freqs[i] = PMPI_Request_c2f(reqs[i]);
}

/* ---- lifecycle -------------------------------------------------------- */

VW_F_ENTRY(mpi_init_)(F *ierr) {
    vw_read_config();
    pmpi_init_(ierr);
    if (*ierr == MPI_SUCCESS) vw_after_init();
}
F_ALIASES(mpi_init, MPI_INIT);

VW_F_ENTRY(mpi_init_thread_)(F *required, F *provided, F *ierr) {
    vw_read_config();
    pmpi_init_thread_(required, provided, ierr);
    if (*ierr == MPI_SUCCESS) vw_after_init();
}
F_ALIASES(mpi_init_thread, MPI_INIT_THREAD);

VW_F_ENTRY(mpi_finalize_)(F *ierr) {
    vw_before_finalize();
    pmpi_finalize_(ierr);
}
F_ALIASES(mpi_finalize, MPI_FINALIZE);

/* ---- point to point --------------------------------------------------- */

#define F_SEND(lower, UPPER, blocking, start)                                     \
    VW_F_ENTRY(lower##_)(void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr) {    \
        F_NATIVE_OR_WAIT(blocking(b, n, t, dst, tag, c, ierr));                   \
        F req;                                                                    \
        start(b, n, t, dst, tag, c, &req, ierr);                                  \
        wait_started(&req, MPI_F_STATUS_IGNORE, ierr);                            \
    }                                                                             \
    F_ALIASES(lower, UPPER)

F_SEND(mpi_send, MPI_SEND, pmpi_send_, pmpi_isend_);
F_SEND(mpi_ssend, MPI_SSEND, pmpi_ssend_, pmpi_issend_);
F_SEND(mpi_rsend, MPI_RSEND, pmpi_rsend_, pmpi_irsend_);

VW_F_ENTRY(mpi_recv_)(void *b, F *n, F *t, F *src, F *tag, F *c, F *st, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_recv_(b, n, t, src, tag, c, st, ierr));
    if (*src == MPI_PROC_NULL) { /* returns at once; see vw_proc_null_status */
        pmpi_recv_(b, n, t, src, tag, c, st, ierr);
        return;
    }
    F req;
    pmpi_irecv_(b, n, t, src, tag, c, &req, ierr);
    wait_started(&req, st, ierr);
}
F_ALIASES(mpi_recv, MPI_RECV);

VW_F_ENTRY(mpi_sendrecv_)(void *sb, F *sn, F *st, F *dst, F *stag, void *rb, F *rn, F *rt, F *src,
                   F *rtag, F *c, F *status, F *ierr) {
    F_NATIVE_OR_WAIT(
        pmpi_sendrecv_(sb, sn, st, dst, stag, rb, rn, rt, src, rtag, c, status, ierr));
    F recv, send, send_err = MPI_SUCCESS;
    if (*src == MPI_PROC_NULL) { /* only the send happens; see vw_proc_null_status */
        pmpi_isend_(sb, sn, st, dst, stag, c, &send, ierr);
        wait_started(&send, MPI_F_STATUS_IGNORE, ierr);
        MPI_Status cst;
        status_from_f(status, &cst);
        vw_proc_null_status(&cst);
        status_to_f(&cst, status);
        return;
    }
    pmpi_irecv_(rb, rn, rt, src, rtag, c, &recv, ierr);
    if (*ierr != MPI_SUCCESS) return;
    pmpi_isend_(sb, sn, st, dst, stag, c, &send, ierr);
    if (*ierr != MPI_SUCCESS) {
        MPI_Request r = PMPI_Request_f2c(recv);
        PMPI_Cancel(&r);
        PMPI_Request_free(&r);
        return;
    }
    wait_started(&recv, status, ierr);
    wait_started(&send, MPI_F_STATUS_IGNORE, &send_err);
    if (*ierr == MPI_SUCCESS) *ierr = send_err;
}
F_ALIASES(mpi_sendrecv, MPI_SENDRECV);

VW_F_ENTRY(mpi_sendrecv_replace_)(void *b, F *n, F *t, F *dst, F *stag, F *src, F *rtag, F *c,
                           F *status, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_sendrecv_replace_(b, n, t, dst, stag, src, rtag, c, status, ierr));
    MPI_Status st;
    status_from_f(status, &st);
    *ierr = vw_sendrecv_replace(b, *n, PMPI_Type_f2c(*t), *dst, *stag, *src, *rtag,
                                PMPI_Comm_f2c(*c), &st);
    status_to_f(&st, status);
}
F_ALIASES(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE);

VW_F_ENTRY(mpi_probe_)(F *src, F *tag, F *c, F *status, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_probe_(src, tag, c, status, ierr));
    MPI_Status st;
    status_from_f(status, &st);
    *ierr = vw_probe(*src, *tag, PMPI_Comm_f2c(*c), &st);
    status_to_f(&st, status);
}
F_ALIASES(mpi_probe, MPI_PROBE);

/* ---- completion ------------------------------------------------------- */

VW_F_ENTRY(mpi_wait_)(F *freq, F *status, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_wait_(freq, status, ierr));
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    status_from_f(status, &st);
    *ierr = vw_wait_one(&req, &st);
    if (*ierr != MPI_SUCCESS && !F_RESULTS_ON_ERROR) return;
    *freq = PMPI_Request_c2f(req);
    status_to_f(&st, status);
}
F_ALIASES(mpi_wait, MPI_WAIT);

/* C statuses for `n` Fortran ones, or MPI_STATUSES_IGNORE. */
static MPI_Status *statuses_for(int n, F *fsts) {
    if (fsts == MPI_F_STATUSES_IGNORE) return MPI_STATUSES_IGNORE;
    return calloc((size_t)(n > 0 ? n : 1), sizeof(MPI_Status));
}

static void statuses_to_f(int n, const MPI_Status *sts, F *fsts, const int *which) {
    if (sts == MPI_STATUSES_IGNORE) return;
    for (int i = 0; i < n; i++) PMPI_Status_c2f(&sts[which ? which[i] : i], fsts + i * F_STATUS_SIZE);
}

VW_F_ENTRY(mpi_waitall_)(F *n, F *freqs, F *fsts, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_waitall_(n, freqs, fsts, ierr));
    MPI_Request *reqs = requests_from_f(*n, freqs);
    MPI_Status *sts = statuses_for(*n, fsts);
    if (!reqs || !sts) {
        free(reqs);
        if (sts != MPI_STATUSES_IGNORE) free(sts);
        pmpi_waitall_(n, freqs, fsts, ierr); /* out of memory: let the MPI wait */
        return;
    }
    *ierr = vw_wait_all(*n, reqs, sts);
    if (*ierr == MPI_SUCCESS || F_RESULTS_ON_ERROR) {
        requests_to_f(*n, reqs, freqs);
        statuses_to_f(*n, sts, fsts, NULL);
    }
    free(reqs);
    if (sts != MPI_STATUSES_IGNORE) free(sts);
}
F_ALIASES(mpi_waitall, MPI_WAITALL);

VW_F_ENTRY(mpi_waitany_)(F *n, F *freqs, F *index, F *status, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_waitany_(n, freqs, index, status, ierr));
    MPI_Request *reqs = requests_from_f(*n, freqs);
    if (!reqs) {
        pmpi_waitany_(n, freqs, index, status, ierr);
        return;
    }
    MPI_Status st;
    status_from_f(status, &st);
    int idx = MPI_UNDEFINED;
    *ierr = vw_wait_any(*n, reqs, &idx, &st);
    if (*ierr != MPI_SUCCESS && !F_RESULTS_ON_ERROR) {
        *index = idx;
    } else {
        requests_to_f(*n, reqs, freqs);
        *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1; /* Fortran counts from 1 */
        status_to_f(&st, status);
    }
    free(reqs);
}
F_ALIASES(mpi_waitany, MPI_WAITANY);

VW_F_ENTRY(mpi_waitsome_)(F *n, F *freqs, F *outcount, F *indices, F *fsts, F *ierr) {
    F_NATIVE_OR_WAIT(pmpi_waitsome_(n, freqs, outcount, indices, fsts, ierr));
    MPI_Request *reqs = requests_from_f(*n, freqs);
    int *idx = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *idx);
    MPI_Status *sts = statuses_for(*n, fsts);
    if (!reqs || !idx || !sts) {
        free(reqs), free(idx);
        if (sts != MPI_STATUSES_IGNORE) free(sts);
        pmpi_waitsome_(n, freqs, outcount, indices, fsts, ierr);
        return;
    }
    int out = 0;
    *ierr = vw_wait_some(*n, reqs, &out, idx, sts);
    *outcount = out;
    if (*ierr != MPI_SUCCESS && !F_RESULTS_ON_ERROR) {
        for (int i = 0; i < out; i++) indices[i] = idx[i]; /* as its C call left them */
    } else {
        requests_to_f(*n, reqs, freqs);
        if (out != MPI_UNDEFINED) {
            /* C fills statuses by completion order, like indices: statuses_to_f with no map. */
            statuses_to_f(out, sts, fsts, NULL);
            for (int i = 0; i < out; i++) indices[i] = idx[i] + 1;
        }
    }
    free(reqs), free(idx);
    if (sts != MPI_STATUSES_IGNORE) free(sts);
}
F_ALIASES(mpi_waitsome, MPI_WAITSOME);

/* Open MPI's Fortran MPI_Grequest_start calls PMPI_Grequest_start, past our C one:
 * completion must know its generalized requests (complete.c). */
VW_F_ENTRY(mpi_grequest_start_)(void *query_fn, void *free_fn, void *cancel_fn, void *extra_state,
                         F *req, F *ierr) {
    pmpi_grequest_start_(query_fn, free_fn, cancel_fn, extra_state, req, ierr);
    if (*ierr == MPI_SUCCESS) vw_greq_add(PMPI_Request_f2c(*req));
}
F_ALIASES(mpi_grequest_start, MPI_GREQUEST_START);

/* ---- collectives ------------------------------------------------------ */

/* A blocking collective: the MPI's own routine (F_BLOCK_<name>) where collectives
 * stay blocking, else its nonblocking twin (F_START_<name>) on every rank, whatever
 * its mode (see vw_complete), on the library's communicator (shadow.c). Both are
 * made of the wrapper's parameters. */
#define F_COLL(lower, UPPER, params)                                              \
    VW_F_ENTRY(lower##_) params {                                                 \
        vw_thread *t_ = vw_self();                                                \
        if (vw_coll_blocking) {                                                   \
            if (!t_->in_fortran) t_->calls++, t_->native++;                       \
            F_RUN_NATIVE(t_, F_BLOCK_##lower);                                    \
            return;                                                               \
        }                                                                         \
        int native_ = vw_take_native(t_);                                         \
        MPI_Comm prog_ = PMPI_Comm_f2c(*c), shadow_ = vw_shadow(prog_);           \
        if (shadow_ == MPI_COMM_NULL) shadow_ = prog_; /* inter: the twin on it */ \
        F req;                                                                    \
        {   /* the twin on the library's communicator (shadow.c) */              \
            F fshadow_ = PMPI_Comm_c2f(shadow_), *c = &fshadow_;                  \
            F_START_##lower;                                                      \
        }                                                                         \
        if (*ierr == MPI_SUCCESS) {                                               \
            MPI_Request creq = PMPI_Request_f2c(req);                             \
            *ierr = vw_complete(t_, native_, &creq, MPI_STATUS_IGNORE);           \
        }                                                                         \
        if (shadow_ != prog_) vw_raise(prog_, *ierr);                             \
    }                                                                             \
    F_ALIASES(lower, UPPER)

#define F_START_mpi_barrier pmpi_ibarrier_(c, &req, ierr)
#define F_BLOCK_mpi_barrier pmpi_barrier_(c, ierr)
F_COLL(mpi_barrier, MPI_BARRIER, (F *c, F *ierr));

#define F_START_mpi_bcast pmpi_ibcast_(b, n, t, root, c, &req, ierr)
#define F_BLOCK_mpi_bcast pmpi_bcast_(b, n, t, root, c, ierr)
F_COLL(mpi_bcast, MPI_BCAST, (void *b, F *n, F *t, F *root, F *c, F *ierr));

#define F_START_mpi_reduce pmpi_ireduce_(sb, rb, n, t, op, root, c, &req, ierr)
#define F_BLOCK_mpi_reduce pmpi_reduce_(sb, rb, n, t, op, root, c, ierr)
F_COLL(mpi_reduce, MPI_REDUCE, (void *sb, void *rb, F *n, F *t, F *op, F *root, F *c, F *ierr));

#define F_START_mpi_allreduce pmpi_iallreduce_(sb, rb, n, t, op, c, &req, ierr)
#define F_BLOCK_mpi_allreduce pmpi_allreduce_(sb, rb, n, t, op, c, ierr)
F_COLL(mpi_allreduce, MPI_ALLREDUCE, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr));

#define F_START_mpi_scan pmpi_iscan_(sb, rb, n, t, op, c, &req, ierr)
#define F_BLOCK_mpi_scan pmpi_scan_(sb, rb, n, t, op, c, ierr)
F_COLL(mpi_scan, MPI_SCAN, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr));

#define F_START_mpi_exscan pmpi_iexscan_(sb, rb, n, t, op, c, &req, ierr)
#define F_BLOCK_mpi_exscan pmpi_exscan_(sb, rb, n, t, op, c, ierr)
F_COLL(mpi_exscan, MPI_EXSCAN, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr));

#define F_START_mpi_reduce_scatter pmpi_ireduce_scatter_(sb, rb, rn, t, op, c, &req, ierr)
#define F_BLOCK_mpi_reduce_scatter pmpi_reduce_scatter_(sb, rb, rn, t, op, c, ierr)
F_COLL(mpi_reduce_scatter, MPI_REDUCE_SCATTER,
       (void *sb, void *rb, F *rn, F *t, F *op, F *c, F *ierr));

#define F_START_mpi_reduce_scatter_block \
    pmpi_ireduce_scatter_block_(sb, rb, n, t, op, c, &req, ierr)
#define F_BLOCK_mpi_reduce_scatter_block pmpi_reduce_scatter_block_(sb, rb, n, t, op, c, ierr)
F_COLL(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
       (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr));

#define F_START_mpi_alltoall pmpi_ialltoall_(sb, sn, st, rb, rn, rt, c, &req, ierr)
#define F_BLOCK_mpi_alltoall pmpi_alltoall_(sb, sn, st, rb, rn, rt, c, ierr)
F_COLL(mpi_alltoall, MPI_ALLTOALL,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr));

#define F_START_mpi_allgather pmpi_iallgather_(sb, sn, st, rb, rn, rt, c, &req, ierr)
#define F_BLOCK_mpi_allgather pmpi_allgather_(sb, sn, st, rb, rn, rt, c, ierr)
F_COLL(mpi_allgather, MPI_ALLGATHER,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr));

#define F_START_mpi_alltoallv pmpi_ialltoallv_(sb, sn, sd, st, rb, rn, rd, rt, c, &req, ierr)
#define F_BLOCK_mpi_alltoallv pmpi_alltoallv_(sb, sn, sd, st, rb, rn, rd, rt, c, ierr)
F_COLL(mpi_alltoallv, MPI_ALLTOALLV,
       (void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr));

#define F_START_mpi_allgatherv pmpi_iallgatherv_(sb, sn, st, rb, rn, rd, rt, c, &req, ierr)
#define F_BLOCK_mpi_allgatherv pmpi_allgatherv_(sb, sn, st, rb, rn, rd, rt, c, ierr)
F_COLL(mpi_allgatherv, MPI_ALLGATHERV,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr));

#define F_START_mpi_gather pmpi_igather_(sb, sn, st, rb, rn, rt, root, c, &req, ierr)
#define F_BLOCK_mpi_gather pmpi_gather_(sb, sn, st, rb, rn, rt, root, c, ierr)
F_COLL(mpi_gather, MPI_GATHER,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr));

#define F_START_mpi_scatter pmpi_iscatter_(sb, sn, st, rb, rn, rt, root, c, &req, ierr)
#define F_BLOCK_mpi_scatter pmpi_scatter_(sb, sn, st, rb, rn, rt, root, c, ierr)
F_COLL(mpi_scatter, MPI_SCATTER,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr));

#define F_START_mpi_gatherv pmpi_igatherv_(sb, sn, st, rb, rn, rd, rt, root, c, &req, ierr)
#define F_BLOCK_mpi_gatherv pmpi_gatherv_(sb, sn, st, rb, rn, rd, rt, root, c, ierr)
F_COLL(mpi_gatherv, MPI_GATHERV,
       (void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *root, F *c, F *ierr));

#define F_START_mpi_scatterv pmpi_iscatterv_(sb, sn, sd, st, rb, rn, rt, root, c, &req, ierr)
#define F_BLOCK_mpi_scatterv pmpi_scatterv_(sb, sn, sd, st, rb, rn, rt, root, c, ierr)
F_COLL(mpi_scatterv, MPI_SCATTERV,
       (void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr));
