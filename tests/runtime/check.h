/* Shared helpers of the self-checking MPI test programs.
 *
 * CHECK stops the whole job (MPI_Abort) with a message naming the failed
 * condition, so a wrong result can never pass silently.  BLK counts a call
 * that libvhpc_wait intercepts: the harness compares the count each rank
 * prints with the `calls=` figure of the library's VHPC_STATS line. */
#ifndef VHPC_TEST_CHECK_H
#define VHPC_TEST_CHECK_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *prog_name = "test";
static const char *where = "";  /* which communicator / phase is running */
static int nblocking __attribute__((unused));

static void fail(int line, const char *fmt, ...)
{
    int rank = -1;
    va_list ap;

    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "%s: rank %d [%s] line %d: ", prog_name, rank, where, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            fail(__LINE__, __VA_ARGS__);                                       \
    } while (0)

/* A blocking (intercepted) call that must succeed. */
#define BLK(call)                                                              \
    do {                                                                       \
        int rc_;                                                               \
        __atomic_add_fetch(&nblocking, 1, __ATOMIC_RELAXED);                   \
        rc_ = (call);                                                          \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);              \
    } while (0)

/* A non-blocking or local call that must succeed (not counted). */
#define OK(call)                                                               \
    do {                                                                       \
        int rc_ = (call);                                                      \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);              \
    } while (0)

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    CHECK(p != NULL, "out of memory (%zu bytes)", n);
    return p;
}

/* A payload value no two (sender, tag, index) triples share. */
static inline int val(int src, int tag, int i)
{
    return src * 1000003 + tag * 1009 + i;
}

static inline void fill(int *buf, int n, int src, int tag)
{
    for (int i = 0; i < n; i++)
        buf[i] = val(src, tag, i);
}

static inline void expect_vals(const int *buf, int n, int src, int tag, const char *what)
{
    for (int i = 0; i < n; i++)
        CHECK(buf[i] == val(src, tag, i), "%s: element %d is %d, expected %d",
              what, i, buf[i], val(src, tag, i));
}

static inline void expect_status(const MPI_Status *st, int src, int tag, int count,
                          const char *what)
{
    int n = -1;

    MPI_Get_count(st, MPI_INT, &n);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && n == count,
          "%s: status source=%d tag=%d count=%d, expected %d/%d/%d", what,
          st->MPI_SOURCE, st->MPI_TAG, n, src, tag, count);
}

/* The "empty" status MPI returns for null or inactive requests. */
static inline void expect_empty_status(const MPI_Status *st, const char *what)
{
    int n = -1;

    MPI_Get_count(st, MPI_INT, &n);
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && n == 0,
          "%s: status of a null/inactive request is source=%d tag=%d count=%d, "
          "expected empty (%d/%d/0)", what, st->MPI_SOURCE, st->MPI_TAG, n,
          MPI_ANY_SOURCE, MPI_ANY_TAG);
}

#endif
