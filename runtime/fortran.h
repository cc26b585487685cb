/* The MPI's own Fortran routines (mpif.h / `use mpi`, gfortran naming) that the
 * library's Fortran entry points call: fortran.c, and fortran08.c where an MPI's
 * `use mpi_f08` layer is a shim over them (Open MPI). */
#ifndef VHPC_FORTRAN_H
#define VHPC_FORTRAN_H

#include "vhpc_wait.h"

typedef MPI_Fint F;

/* The MPI's Fortran layer (libmpichfort / libmpi_mpifh). */
void pmpi_init_(F *ierr);
void pmpi_init_thread_(F *required, F *provided, F *ierr);
void pmpi_finalize_(F *ierr);
void pmpi_send_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr);
void pmpi_ssend_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr);
void pmpi_rsend_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *ierr);
void pmpi_recv_(void *b, F *n, F *t, F *src, F *tag, F *c, F *st, F *ierr);
void pmpi_sendrecv_(void *sb, F *sn, F *st, F *dst, F *stag, void *rb, F *rn, F *rt, F *src,
                    F *rtag, F *c, F *status, F *ierr);
void pmpi_sendrecv_replace_(void *b, F *n, F *t, F *dst, F *stag, F *src, F *rtag, F *c,
                            F *status, F *ierr);
void pmpi_probe_(F *src, F *tag, F *c, F *st, F *ierr);
void pmpi_wait_(F *req, F *st, F *ierr);
void pmpi_grequest_start_(void *query_fn, void *free_fn, void *cancel_fn, void *extra_state,
                          F *req, F *ierr);
void pmpi_waitall_(F *n, F *reqs, F *sts, F *ierr);
void pmpi_waitany_(F *n, F *reqs, F *idx, F *st, F *ierr);
void pmpi_waitsome_(F *n, F *reqs, F *outn, F *idx, F *sts, F *ierr);
void pmpi_isend_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *req, F *ierr);
void pmpi_issend_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *req, F *ierr);
void pmpi_irsend_(void *b, F *n, F *t, F *dst, F *tag, F *c, F *req, F *ierr);
void pmpi_irecv_(void *b, F *n, F *t, F *src, F *tag, F *c, F *req, F *ierr);
void pmpi_barrier_(F *c, F *ierr);
void pmpi_ibarrier_(F *c, F *req, F *ierr);
void pmpi_bcast_(void *b, F *n, F *t, F *root, F *c, F *ierr);
void pmpi_ibcast_(void *b, F *n, F *t, F *root, F *c, F *req, F *ierr);
void pmpi_reduce_(void *sb, void *rb, F *n, F *t, F *op, F *root, F *c, F *ierr);
void pmpi_ireduce_(void *sb, void *rb, F *n, F *t, F *op, F *root, F *c, F *req, F *ierr);
void pmpi_allreduce_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr);
void pmpi_iallreduce_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *req, F *ierr);
void pmpi_scan_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr);
void pmpi_iscan_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *req, F *ierr);
void pmpi_exscan_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr);
void pmpi_iexscan_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *req, F *ierr);
void pmpi_reduce_scatter_(void *sb, void *rb, F *rn, F *t, F *op, F *c, F *ierr);
void pmpi_ireduce_scatter_(void *sb, void *rb, F *rn, F *t, F *op, F *c, F *req, F *ierr);
void pmpi_reduce_scatter_block_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *ierr);
void pmpi_ireduce_scatter_block_(void *sb, void *rb, F *n, F *t, F *op, F *c, F *req, F *ierr);
void pmpi_alltoall_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr);
void pmpi_ialltoall_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *req, F *ierr);
void pmpi_allgather_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *ierr);
void pmpi_iallgather_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *req, F *ierr);
void pmpi_alltoallv_(void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr);
void pmpi_ialltoallv_(void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *req,
                      F *ierr);
void pmpi_allgatherv_(void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *ierr);
void pmpi_iallgatherv_(void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *c, F *req,
                       F *ierr);
void pmpi_gather_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr);
void pmpi_igather_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *req, F *ierr);
void pmpi_scatter_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr);
void pmpi_iscatter_(void *sb, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *req,
                    F *ierr);
void pmpi_gatherv_(void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *root, F *c, F *ierr);
void pmpi_igatherv_(void *sb, F *sn, F *st, void *rb, F *rn, F *rd, F *rt, F *root, F *c, F *req,
                    F *ierr);
void pmpi_scatterv_(void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *ierr);
void pmpi_iscatterv_(void *sb, F *sn, F *sd, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *req,
                     F *ierr);

#endif
