/* Fortran 2008 entry points (`use mpi_f08`, gfortran): mpi_send_f08_, ...
 *
 * Each MPI's f08 layer is a thin shim over another of its layers that it calls past
 * the library's wrappers; the library's f08 entry points are the same shims over
 * the library's own wrappers, so an f08 call waits exactly as the call it stands for.
 *
 * Open MPI 4.1: every mpi_<x>_f08_ calls ompi_<x>_f, the routine its mpif.h and
 * `use mpi` symbols (mpi_<x>_, pmpi_<x>_) are aliases of, with the same arguments:
 * a type(MPI_Comm) holds its Fortran handle, a type(MPI_Status) is its Fortran
 * status array, MPI_IN_PLACE and MPI_STATUS_IGNORE are the mpif.h symbols. Only
 * ierror may be absent. Here each calls the library's own `use mpi` entry point.
 *
 * MPICH 4.0: the routines with a choice buffer (mpi_send_f08ts_, mpi_allreduce_f08ts_,
 * ...) call the C MPI_<X>, i.e. the library's C wrappers: nothing to do. Those
 * without (waits, probe, barrier, init, finalize, MPI_Grequest_start) call
 * PMPI_<X>, passing the f08 handles as C handles and type(MPI_Status) as a C
 * MPI_Status (MPI_F08_status, the same five ints), and MPI_STATUS(ES)_IGNORE as the
 * C ones. Here each does the same with the library's C entry point in place of
 * PMPI_<X>.
 *
 * Compiled in only for the layers read and checked (tests/test_runtime_fortran.py);
 * for other MPIs and versions `use mpi_f08` calls go past the library as before. */
#define _GNU_SOURCE
#include "fortran.h"

#include <dlfcn.h>

#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION == 4 && OMPI_MINOR_VERSION == 1
#define VW_F08_OPEN_MPI 1
#elif defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40000000 && \
    MPICH_NUMVERSION < 40100000 && !defined(VW_BUILT_FOR)
/* (VW_BUILT_FOR: Intel MPI built with MPICH's headers; its f08 layer is its own.) */
#define VW_F08_MPICH 1
#endif

#ifdef VW_F08_OPEN_MPI

/* mpi_<x>_f08_ as the library's mpi_<x>_ (fortran.c), which has the same type as the
 * MPI's pmpi_<x>_; ierror, optional in f08, is NULL when absent. */
#define F08_OVER_F(lower, params, ...)                                             \
    extern __typeof__(p##lower##_) vw_entry_##lower##_                             \
        __attribute__((visibility("hidden")));                                     \
    VW_F_ENTRY(lower##_f08_) params {                                              \
        F ierr_;                                                                   \
        vw_entry_##lower##_(__VA_ARGS__, ierr ? ierr : &ierr_);                    \
    }

extern __typeof__(pmpi_init_) vw_entry_mpi_init_ __attribute__((visibility("hidden")));
extern __typeof__(pmpi_finalize_) vw_entry_mpi_finalize_ __attribute__((visibility("hidden")));

VW_F_ENTRY(mpi_init_f08_)(F *ierr) {
    F ierr_;
    vw_entry_mpi_init_(ierr ? ierr : &ierr_);
}

VW_F_ENTRY(mpi_finalize_f08_)(F *ierr) {
    F ierr_;
    vw_entry_mpi_finalize_(ierr ? ierr : &ierr_);
}

F08_OVER_F(mpi_init_thread, (F *required, F *provided, F *ierr), required, provided)

F08_OVER_F(mpi_send, (void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr),
           b, n, t, dst, tag, c)
F08_OVER_F(mpi_ssend, (void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr),
           b, n, t, dst, tag, c)
F08_OVER_F(mpi_rsend, (void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr),
           b, n, t, dst, tag, c)
F08_OVER_F(mpi_recv, (void *b, F *n, F *t, F *src, F *tag, F *c, F *st, F *ierr),
           b, n, t, src, tag, c, st)
F08_OVER_F(mpi_sendrecv,
           (void *sb, F *sn, F *st, F *dst, F *stag, void *rb, F *rn, F *rt, F *src, F *rtag,
            F *c, F *status, F *ierr),
           sb, sn, st, dst, stag, rb, rn, rt, src, rtag, c, status)
F08_OVER_F(mpi_sendrecv_replace,
           (void *b, F *n, F *t, F *dst, F *stag, F *src, F *rtag, F *c, F *status, F *ierr),
           b, n, t, dst, stag, src, rtag, c, status)
F08_OVER_F(mpi_probe, (F *src, F *tag, F *c, F *st, F *ierr), src, tag, c, st)

F08_OVER_F(mpi_wait, (F *req, F *st, F *ierr), req, st)
F08_OVER_F(mpi_waitall, (F *n, F *reqs, F *sts, F *ierr), n, reqs, sts)
F08_OVER_F(mpi_waitany, (F *n, F *reqs, F *idx, F *st, F *ierr), n, reqs, idx, st)
F08_OVER_F(mpi_waitsome, (F *n, F *reqs, F *outn, F *idx, F *sts, F *ierr),
           n, reqs, outn, idx, sts)
F08_OVER_F(mpi_grequest_start,
           (void *query_fn, void *free_fn, void *cancel_fn, void *extra_state, F *req, F *ierr),
           query_fn, free_fn, cancel_fn, extra_state, req)

F08_OVER_F(mpi_barrier, (F *c, F *ierr), c)
F08_OVER_F(mpi_bcast, (void *b, F *n, F *t, F *root, F *c, F *ierr), b, n, t, root, c)
F08_OVER_F(mpi_reduce, (void *sb, void *rb, F *n, F *t, F *op, F *root, F *c, F *ierr),
           sb, rb, n, t, op, root, c)
F08_OVER_F(mpi_allreduce, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr),
           sb, rb, n, t, op, c)
F08_OVER_F(mpi_scan, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr),
           sb, rb, n, t, op, c)
F08_OVER_F(mpi_exscan, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr),
           sb, rb, n, t, op, c)
F08_OVER_F(mpi_reduce_scatter, (void *sb, void *rb, F *rn, F *t, F *op, F *c, F *ierr),
           sb, rb, rn, t, op, c)
F08_OVER_F(mpi_reduce_scatter_block, (void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr),
           sb, rb, n, t, op, c)
F08_OVER_F(mpi_alltoall, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr),
           sb, sn, st, rb, rn, rt, c)
F08_OVER_F(mpi_allgather, (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr),
           sb, sn, st, rb, rn, rt, c)
F08_OVER_F(mpi_alltoallv,
           (void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr),
           sb, sn, sd, st, rb, rn, rd, rt, c)
F08_OVER_F(mpi_allgatherv,
           (void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr),
           sb, sn, st, rb, rn, rd, rt, c)
F08_OVER_F(mpi_gather,
           (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr),
           sb, sn, st, rb, rn, rt, root, c)
F08_OVER_F(mpi_scatter,
           (void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr),
           sb, sn, st, rb, rn, rt, root, c)
F08_OVER_F(mpi_gatherv,
           (void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *root, F *c, F *ierr),
           sb, sn, st, rb, rn, rd, rt, root, c)
F08_OVER_F(mpi_scatterv,
           (void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr),
           sb, sn, sd, st, rb, rn, rt, root, c)

#endif /* VW_F08_OPEN_MPI */

#ifdef VW_F08_MPICH

_Static_assert(sizeof(MPI_F08_status) == sizeof(MPI_Status),
               "MPICH's f08 layer passes a type(MPI_Status) as a C MPI_Status");
_Static_assert(sizeof(MPI_Comm) == sizeof(F) && sizeof(MPI_Request) == sizeof(F),
               "MPICH's f08 handles hold its C handles");

/* The library's C entry points (intercept.c). */
#define C_ENTRY(name) \
    extern __typeof__(name) vw_entry_##name __attribute__((visibility("hidden")))
C_ENTRY(MPI_Init);
C_ENTRY(MPI_Init_thread);
C_ENTRY(MPI_Finalize);
C_ENTRY(MPI_Probe);
C_ENTRY(MPI_Wait);
C_ENTRY(MPI_Waitall);
C_ENTRY(MPI_Waitany);
C_ENTRY(MPI_Waitsome);
C_ENTRY(MPI_Barrier);

/* MPICH's own f08 MPI_Grequest_start: it marks the request's callbacks as Fortran
 * ones (an internal call) after PMPI_Grequest_start. */
void pmpir_grequest_start_f08_(void *query_fn, void *free_fn, void *cancel_fn,
                               void *extra_state, MPI_Request *req, F *ierr);

/* ierror is optional in f08: NULL when absent. */
static void set_ierr(F *ierr, int rc) {
    if (ierr) *ierr = rc;
}

/* MPI_F08_STATUS_IGNORE or MPI_F08_STATUSES_IGNORE (`name`), looked up at first use
 * rather than referred to: the library's references to MPI data are resolved when
 * it is loaded, to nothing where MPICH is opened later (route.c). */
static MPI_F08_status *f08_ignore(const char *name, MPI_F08_status **cache) {
    MPI_F08_status *p = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!p) {
        MPI_F08_status **var = (MPI_F08_status **)dlsym(RTLD_DEFAULT, name);
        if (var && (p = *var)) __atomic_store_n(cache, p, __ATOMIC_RELEASE);
    }
    return p;
}

/* An f08 status as MPICH's f08 layer hands it to C. */
static MPI_Status *c_status(MPI_F08_status *st) {
    static MPI_F08_status *ignore;
    return st == f08_ignore("MPI_F08_STATUS_IGNORE", &ignore) ? MPI_STATUS_IGNORE
                                                              : (MPI_Status *)st;
}

static MPI_Status *c_statuses(MPI_F08_status *sts) {
    static MPI_F08_status *ignore;
    return sts == f08_ignore("MPI_F08_STATUSES_IGNORE", &ignore) ? MPI_STATUSES_IGNORE
                                                                 : (MPI_Status *)sts;
}

VW_F_ENTRY(mpi_init_f08_)(F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Init(NULL, NULL));
}

VW_F_ENTRY(mpi_init_thread_f08_)(F *required, F *provided, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Init_thread(NULL, NULL, *required, provided));
}

VW_F_ENTRY(mpi_finalize_f08_)(F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Finalize());
}

VW_F_ENTRY(mpi_probe_f08_)(F *src, F *tag, MPI_Comm *c, MPI_F08_status *st, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Probe(*src, *tag, *c, c_status(st)));
}

VW_F_ENTRY(mpi_wait_f08_)(MPI_Request *req, MPI_F08_status *st, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Wait(req, c_status(st)));
}

VW_F_ENTRY(mpi_waitall_f08_)(F *n, MPI_Request *reqs, MPI_F08_status *sts, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Waitall(*n, reqs, c_statuses(sts)));
}

/* Indices as MPICH 4.0's own f08 MPI_Waitany and MPI_Waitsome return them: counted
 * from 0, as in C (its bug, fixed in 4.1: pmodels/mpich#6270); a program that
 * allows for it must not be corrected behind its back. */
VW_F_ENTRY(mpi_waitany_f08_)(F *n, MPI_Request *reqs, F *index, MPI_F08_status *st, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Waitany(*n, reqs, index, c_status(st)));
}

VW_F_ENTRY(mpi_waitsome_f08_)(F *n, MPI_Request *reqs, F *outcount, F *indices,
                              MPI_F08_status *sts, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Waitsome(*n, reqs, outcount, indices, c_statuses(sts)));
}

/* MPICH's f08 MPI_Grequest_start calls PMPI_Grequest_start, past our C one:
 * completion must know its generalized requests (complete.c). */
VW_F_ENTRY(mpi_grequest_start_f08_)(void *query_fn, void *free_fn, void *cancel_fn,
                                    void *extra_state, MPI_Request *req, F *ierr) {
    F rc;
    pmpir_grequest_start_f08_(query_fn, free_fn, cancel_fn, extra_state, req, &rc);
    if (rc == MPI_SUCCESS) vw_greq_add(*req);
    set_ierr(ierr, rc);
}

VW_F_ENTRY(mpi_barrier_f08_)(MPI_Comm *c, F *ierr) {
    set_ierr(ierr, vw_entry_MPI_Barrier(*c));
}

#endif /* VW_F08_MPICH */
