/* Error paths of the intercepted calls.
 *
 * "errors": with MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF, make
 * calls that must fail and print one line per case with the error class
 * (MPI_Error_class) of the return code and, where MPI defines them, of the
 * statuses.  The harness compares these lines with and without libvhpc_wait.
 *
 * "errors fatal": under the default handler (MPI_ERRORS_ARE_FATAL) every rank
 * sends to a rank that does not exist; the job must die with a non-zero exit.
 * Prints "errors: rank <r> survived" if the send returns. */
#include <string.h>

#include "check.h"

static int wr, wp;

static const char *class_name(int cls)
{
    static const struct { int cls; const char *name; } names[] = {
        {MPI_SUCCESS, "MPI_SUCCESS"},     {MPI_ERR_RANK, "MPI_ERR_RANK"},
        {MPI_ERR_COUNT, "MPI_ERR_COUNT"}, {MPI_ERR_TAG, "MPI_ERR_TAG"},
        {MPI_ERR_COMM, "MPI_ERR_COMM"},   {MPI_ERR_ROOT, "MPI_ERR_ROOT"},
        {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE"},
        {MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS"},
        {MPI_ERR_PENDING, "MPI_ERR_PENDING"}, {MPI_ERR_ARG, "MPI_ERR_ARG"},
        {MPI_ERR_BUFFER, "MPI_ERR_BUFFER"}, {MPI_ERR_TYPE, "MPI_ERR_TYPE"},
        {MPI_ERR_OTHER, "MPI_ERR_OTHER"},   {MPI_ERR_INTERN, "MPI_ERR_INTERN"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].cls == cls)
            return names[i].name;
    return "other";
}

static int cls_of(int code)
{
    int cls = -1;

    MPI_Error_class(code, &cls);
    return cls;
}

static void report(const char *name, int rc, const char *extra)
{
    int cls = cls_of(rc);

    printf("errors: rank %d %s class=%d(%s)%s\n", wr, name, cls, class_name(cls), extra);
}

static const char *status_classes(const MPI_Status *st, int n, char *buf, size_t cap)
{
    size_t used = snprintf(buf, cap, " statuses=");

    for (int i = 0; i < n && used < cap; i++) {
        int cls = cls_of(st[i].MPI_ERROR);
        used += snprintf(buf + used, cap - used, "%s%d(%s)", i ? "," : "", cls,
                         class_name(cls));
    }
    return buf;
}

/* Calls every rank makes alone: argument errors caught before any transfer. */
static void argument_errors(void)
{
    int buf[4] = {0}, out[4];
    MPI_Status st;

    report("Send invalid rank", MPI_Send(buf, 1, MPI_INT, wp, 0, MPI_COMM_WORLD), "");
    report("Ssend invalid rank", MPI_Ssend(buf, 1, MPI_INT, wp + 3, 0, MPI_COMM_WORLD), "");
    report("Recv invalid rank", MPI_Recv(buf, 1, MPI_INT, wp, 0, MPI_COMM_WORLD, &st), "");
    report("Probe invalid rank", MPI_Probe(wp, 0, MPI_COMM_WORLD, &st), "");
    report("Send negative count", MPI_Send(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), "");
    report("Send invalid tag", MPI_Send(buf, 1, MPI_INT, 0, -5, MPI_COMM_WORLD), "");
    report("Sendrecv invalid rank",
           MPI_Sendrecv(buf, 1, MPI_INT, wp, 0, out, 1, MPI_INT, wp, 0, MPI_COMM_WORLD, &st),
           "");
    report("Send MPI_COMM_NULL", MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), "");
    report("Barrier MPI_COMM_NULL", MPI_Barrier(MPI_COMM_NULL), "");
    report("Allreduce MPI_COMM_NULL",
           MPI_Allreduce(buf, out, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL), "");
}

/* Collectives every rank calls with the same bad argument. */
static void collective_errors(void)
{
    int buf[4] = {0}, out[4];

    report("Bcast invalid root", MPI_Bcast(buf, 1, MPI_INT, wp, MPI_COMM_WORLD), "");
    report("Reduce invalid root",
           MPI_Reduce(buf, out, 1, MPI_INT, MPI_SUM, -7, MPI_COMM_WORLD), "");
    report("Bcast negative count", MPI_Bcast(buf, -2, MPI_INT, 0, MPI_COMM_WORLD), "");
}

/* Ranks 0 and 1 send each other 10 ints; the receiver's buffer holds 5. */
static void truncation(void)
{
    enum { LONG = 10, SHORT = 5 };
    int peer = wr ^ 1, sb[LONG], rb[LONG], rb2[LONG];
    MPI_Request sq[2], rq[2];
    MPI_Status st, sts[2];
    char extra[160];
    int idx = -2, outcount = -2, idxs[2];

    if (wr > 1)
        return;
    fill(sb, LONG, wr, 1);

    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 1, MPI_COMM_WORLD, &sq[0]));
    report("Recv truncate", MPI_Recv(rb, SHORT, MPI_INT, peer, 1, MPI_COMM_WORLD, &st), "");
    OK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));

    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 2, MPI_COMM_WORLD, &sq[0]));
    OK(MPI_Irecv(rb, SHORT, MPI_INT, peer, 2, MPI_COMM_WORLD, &rq[0]));
    report("Wait truncate", MPI_Wait(&rq[0], &st), "");
    OK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));

    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 3, MPI_COMM_WORLD, &sq[0]));
    report("Sendrecv truncate",
           MPI_Sendrecv(sb, 1, MPI_INT, peer, 4, rb, SHORT, MPI_INT, peer, 3,
                        MPI_COMM_WORLD, &st), "");
    OK(MPI_Recv(rb2, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));

    /* A fitting and a truncated receive completed together.  (The other order
     * makes MPICH report MPI_ERR_PENDING for whatever follows the error,
     * depending on timing.) */
    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 5, MPI_COMM_WORLD, &sq[0]));
    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 6, MPI_COMM_WORLD, &sq[1]));
    OK(MPI_Irecv(rb2, LONG, MPI_INT, peer, 6, MPI_COMM_WORLD, &rq[0]));
    OK(MPI_Irecv(rb, SHORT, MPI_INT, peer, 5, MPI_COMM_WORLD, &rq[1]));
    for (int i = 0; i < 2; i++)
        sts[i].MPI_ERROR = -12345;
    {
        int rc = MPI_Waitall(2, rq, sts);  /* before the statuses are read */
        report("Waitall truncate", rc, status_classes(sts, 2, extra, sizeof extra));
    }
    /* MPI_ERR_PENDING leaves a request active: finish it before reading its data. */
    for (int i = 0; i < 2; i++)
        if (sts[i].MPI_ERROR == MPI_ERR_PENDING)
            OK(MPI_Wait(&rq[i], MPI_STATUS_IGNORE));
    expect_vals(rb2, LONG, peer, 1, "Waitall fitting receive");
    OK(MPI_Waitall(2, sq, MPI_STATUSES_IGNORE));

    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 7, MPI_COMM_WORLD, &sq[0]));
    OK(MPI_Irecv(rb, SHORT, MPI_INT, peer, 7, MPI_COMM_WORLD, &rq[0]));
    rq[1] = MPI_REQUEST_NULL;
    {
        int rc = MPI_Waitany(2, rq, &idx, &st);
        snprintf(extra, sizeof extra, " index=%d", idx);
        report("Waitany truncate", rc, extra);
    }
    OK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));

    OK(MPI_Isend(sb, LONG, MPI_INT, peer, 8, MPI_COMM_WORLD, &sq[0]));
    OK(MPI_Irecv(rb, SHORT, MPI_INT, peer, 8, MPI_COMM_WORLD, &rq[0]));
    rq[1] = MPI_REQUEST_NULL;
    sts[0].MPI_ERROR = -12345;
    {
        int rc = MPI_Waitsome(2, rq, &outcount, idxs, sts);
        char st_txt[96];
        snprintf(extra, sizeof extra, " outcount=%d index=%d%s", outcount, idxs[0],
                 status_classes(sts, outcount > 0 ? outcount : 0, st_txt, sizeof st_txt));
        report("Waitsome truncate", rc, extra);
    }
    OK(MPI_Wait(&sq[0], MPI_STATUS_IGNORE));
    (void)rb2;
}

static void fatal(void)
{
    int buf = 0;

    /* The default handler must abort the job: nothing after this may run. */
    MPI_Send(&buf, 1, MPI_INT, wp, 0, MPI_COMM_WORLD);
    printf("errors: rank %d survived\n", wr);
}

int main(int argc, char **argv)
{
    prog_name = "errors";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    CHECK(wp >= 2, "needs at least 2 ranks, got %d", wp);

    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        fatal();
    } else {
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        where = "argument errors";
        argument_errors();
        where = "collective errors";
        collective_errors();
        where = "truncation";
        truncation();
        /* MPI still works after the errors. */
        where = "after errors";
        int one = 1, sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == wp, "Allreduce after the errors gave %d", sum);
        printf("errors: rank %d done\n", wr);
    }
    MPI_Finalize();
    printf("errors: rank %d finalized\n", wr);
    return 0;
}
