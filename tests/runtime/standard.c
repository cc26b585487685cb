/* The blocking calls libvhpc_wait wraps from the MPI standard's API
 * (python/vhpc/runtime/wrappers.py), beyond semantics.c's: each checked against a
 * closed form, the same with and without the library, with any number of ranks.
 *
 *   twins:        MPI_Alltoallw, MPI_Bsend, MPI_Comm_dup(_with_info), MPI_Mrecv,
 *                 the neighbourhood collectives, collective MPI-IO;
 *   matched probe: MPI_Mprobe (hand-written, polled with MPI_Improbe);
 *   arrive first: the communicator and window constructors (an MPI_Ibarrier first);
 *   and MPI 4's large-count forms (MPI_Send_c, ...) where the MPI has them. */
#include "check.h"

#include <string.h>
#include <unistd.h>

static int wr, wp;

static void alltoallw(MPI_Comm comm) {
    int r, p;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &p);
    int *sc = xmalloc(p * sizeof(int)), *sd = xmalloc(p * sizeof(int));
    MPI_Datatype *ty = xmalloc(p * sizeof(MPI_Datatype));
    int *out = xmalloc(2 * p * sizeof(int)), *in = xmalloc(2 * p * sizeof(int));
    for (int i = 0; i < p; i++) {
        sc[i] = 2, sd[i] = 2 * i * (int)sizeof(int), ty[i] = MPI_INT;
        out[2 * i] = val(r, i, 0), out[2 * i + 1] = val(r, i, 1);
    }
    BLK(MPI_Alltoallw(out, sc, sd, ty, in, sc, sd, ty, comm));
    for (int i = 0; i < p; i++)
        CHECK(in[2 * i] == val(i, r, 0) && in[2 * i + 1] == val(i, r, 1),
              "alltoallw: from %d got %d %d", i, in[2 * i], in[2 * i + 1]);
    free(sc), free(sd), free(ty), free(out), free(in);
}

static void bsend(void) {
    int size;
    MPI_Pack_size(8, MPI_INT, MPI_COMM_WORLD, &size);
    size += MPI_BSEND_OVERHEAD;
    void *buf = xmalloc(size);
    OK(MPI_Buffer_attach(buf, size));
    int to = (wr + 1) % wp, from = (wr + wp - 1) % wp, out[8], in[8];
    fill(out, 8, wr, 7);
    BLK(MPI_Bsend(out, 8, MPI_INT, to, 7, MPI_COMM_WORLD));
    BLK(MPI_Recv(in, 8, MPI_INT, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    expect_vals(in, 8, from, 7, "bsend");
    void *back;
    OK(MPI_Buffer_detach(&back, &size));
    free(buf);
}

static void dup_and_mprobe(void) {
    MPI_Comm dup, dup2;
    BLK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    /* Not counted: Open MPI 4.1 has no MPI_Comm_idup_with_info to make it of. */
    OK(MPI_Comm_dup_with_info(dup, MPI_INFO_NULL, &dup2));
    int r, p, res;
    MPI_Comm_rank(dup2, &r);
    MPI_Comm_size(dup2, &p);
    CHECK(r == wr && p == wp, "dup: rank %d of %d", r, p);
    MPI_Comm_compare(dup, dup2, &res);
    CHECK(res == MPI_CONGRUENT, "dup_with_info: compare gave %d", res);

    /* Every rank sends its neighbour a message; a matched probe takes it. */
    int to = (r + 1) % p, from = (r + p - 1) % p, out[5], in[5], count;
    fill(out, 5, r, 11);
    MPI_Request req;
    OK(MPI_Isend(out, 5, MPI_INT, to, 11, dup2, &req));
    MPI_Message msg;
    MPI_Status st;
    BLK(MPI_Mprobe(MPI_ANY_SOURCE, 11, dup2, &msg, &st));
    CHECK(st.MPI_SOURCE == from && st.MPI_TAG == 11, "mprobe: source %d tag %d", st.MPI_SOURCE,
          st.MPI_TAG);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == 5, "mprobe: count %d", count);
    BLK(MPI_Mrecv(in, 5, MPI_INT, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NULL, "mrecv left the message handle set");
    expect_vals(in, 5, from, 11, "mrecv");
    BLK(MPI_Wait(&req, MPI_STATUS_IGNORE));

    BLK(MPI_Mprobe(MPI_PROC_NULL, 0, dup2, &msg, &st));
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL,
          "mprobe from MPI_PROC_NULL: source %d", st.MPI_SOURCE);
    OK(MPI_Comm_free(&dup2));
    OK(MPI_Comm_free(&dup));
}

/* What a ring's neighbour alltoall receives: the left one's right-bound value and
 * the right one's left-bound value. */
static void exchanged(const int in[2], int left, int right, const char *what) {
    int a = val(left, 1, 1), b = val(right, 1, 0);
    int ok = wp == 2 ? (in[0] == a && in[1] == b) || (in[0] == b && in[1] == a)
                     : in[0] == a && in[1] == b;
    CHECK(ok, "%s: got %d %d, want %d %d", what, in[0], in[1], a, b);
}

/* A periodic ring as a Cartesian communicator: left and right neighbours. */
static void neighbours(void) {
    int dims[1] = {wp}, periods[1] = {1}, r, left, right;
    MPI_Comm ring;
    BLK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    MPI_Comm_rank(ring, &r);
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    int out[2] = {val(r, 1, 0), val(r, 1, 1)}, in[4];
    BLK(MPI_Neighbor_allgather(out, 2, MPI_INT, in, 2, MPI_INT, ring));
    CHECK(in[0] == val(left, 1, 0) && in[2] == val(right, 1, 0), "neighbor_allgather: %d %d",
          in[0], in[2]);
    int cnt[2] = {1, 1}, dsp[2] = {0, 1};
    BLK(MPI_Neighbor_allgatherv(out, 1, MPI_INT, in, cnt, dsp, MPI_INT, ring));
    CHECK(in[0] == val(left, 1, 0) && in[1] == val(right, 1, 0), "neighbor_allgatherv");
    /* alltoall: to the left goes out[0], to the right out[1]. Two ranks are each
     * other's left and right: which copy lands first is the MPI's choice. */
    BLK(MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ring));
    exchanged(in, left, right, "neighbor_alltoall");
    BLK(MPI_Neighbor_alltoallv(out, cnt, dsp, MPI_INT, in, cnt, dsp, MPI_INT, ring));
    exchanged(in, left, right, "neighbor_alltoallv");
    MPI_Aint bd[2] = {0, sizeof(int)};
    MPI_Datatype ty[2] = {MPI_INT, MPI_INT};
    BLK(MPI_Neighbor_alltoallw(out, cnt, bd, ty, in, cnt, bd, ty, ring));
    exchanged(in, left, right, "neighbor_alltoallw");

    int remain[1] = {1}, p;
    MPI_Comm sub;
    BLK(MPI_Cart_sub(ring, remain, &sub));
    MPI_Comm_size(sub, &p);
    CHECK(p == wp, "cart_sub keeping the ring has %d ranks", p);
    OK(MPI_Comm_free(&sub));

    /* The same ring as a distributed graph. */
    int srcs[2] = {left, right}, dsts[2] = {left, right}, w[2] = {1, 1};
    MPI_Comm graph;
    BLK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, w, 2, dsts, w, MPI_INFO_NULL, 0,
                                       &graph));
    BLK(MPI_Neighbor_allgather(out, 1, MPI_INT, in, 1, MPI_INT, graph));
    CHECK(in[0] == val(left, 1, 0) && in[1] == val(right, 1, 0), "dist graph allgather");
    OK(MPI_Comm_free(&graph));
    OK(MPI_Comm_free(&ring));
}

static void constructors(void) {
    MPI_Comm half, node, inter, merged, created;
    int r, p;
    BLK(MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &half));
    BLK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wr, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &p);
    CHECK(p == wp, "split_type shared: %d of %d ranks on this host", p, wp);
    MPI_Group world, evens;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, wp - 1, 2}};
    MPI_Group_range_incl(world, 1, range, &evens);
    BLK(MPI_Comm_create(MPI_COMM_WORLD, evens, &created));
    CHECK((wr % 2 == 0) == (created != MPI_COMM_NULL), "comm_create on rank %d", wr);
    if (created != MPI_COMM_NULL) {
        MPI_Comm_size(created, &p);
        CHECK(p == (wp + 1) / 2, "comm_create: %d ranks", p);
        OK(MPI_Comm_free(&created));
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
    if (wp >= 2) {
        /* Evens and odds, leaders world ranks 0 and 1; merged with the odds high. */
        BLK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, wr % 2 ? 0 : 1, 21, &inter));
        MPI_Comm_remote_size(inter, &p);
        CHECK(p == (wr % 2 ? (wp + 1) / 2 : wp / 2), "intercomm: remote size %d", p);
        BLK(MPI_Intercomm_merge(inter, wr % 2, &merged));
        MPI_Comm_rank(merged, &r);
        int want = wr % 2 ? (wp + 1) / 2 + wr / 2 : wr / 2;
        CHECK(r == want, "intercomm_merge: rank %d, want %d", r, want);
        OK(MPI_Comm_free(&merged));
        OK(MPI_Comm_free(&inter));
    }
    OK(MPI_Comm_free(&node));
    OK(MPI_Comm_free(&half));
}

/* The windows' groups are the world's. (No data check: Debian's MPICH 4.0.2 loses
 * a fenced MPI_Put or MPI_Get here, with or without the library.) */
static void windows(void) {
    int *base, mine = 0, size;
    MPI_Win win, win2;
    MPI_Group group;
    BLK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    BLK(MPI_Win_create(&mine, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win2));
    MPI_Win_get_group(win2, &group);
    MPI_Group_size(group, &size);
    CHECK(size == wp, "win_create: group of %d", size);
    MPI_Group_free(&group);
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_free(&win2));
    OK(MPI_Win_free(&win));
    /* A window outlives the communicator it was made on (the library waits before
     * its fences and its free on a private communicator the window holds). */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    BLK(MPI_Win_create(&mine, sizeof(int), sizeof(int), MPI_INFO_NULL, dup, &win));
    BLK(MPI_Win_create(&mine, sizeof(int), sizeof(int), MPI_INFO_NULL, dup, &win2));
    OK(MPI_Win_free(&win2));
    OK(MPI_Comm_free(&dup));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_free(&win));
}

/* Each rank writes its block of a shared file collectively and reads its
 * neighbour's back. */
static void file_io(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/standard-io.bin", dir);
    MPI_File fh;
    OK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    int out[4], in[4], count;
    MPI_Status st;
    fill(out, 4, wr, 41);
    BLK(MPI_File_write_at_all(fh, (MPI_Offset)wr * sizeof out, out, 4, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == 4, "write_at_all: count %d", count);
    OK(MPI_File_sync(fh));
    BLK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_File_sync(fh));
    int next = (wr + 1) % wp;
    BLK(MPI_File_read_at_all(fh, (MPI_Offset)next * sizeof in, in, 4, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == 4, "read_at_all: count %d", count);
    expect_vals(in, 4, next, 41, "read_at_all");
    OK(MPI_File_set_view(fh, (MPI_Offset)next * sizeof in, MPI_INT, MPI_INT, "native",
                         MPI_INFO_NULL));
    BLK(MPI_File_read_all(fh, in, 4, MPI_INT, &st));
    expect_vals(in, 4, next, 41, "read_all");
    OK(MPI_File_set_view(fh, (MPI_Offset)wr * sizeof out, MPI_INT, MPI_INT, "native",
                         MPI_INFO_NULL));
    BLK(MPI_File_write_all(fh, out, 4, MPI_INT, &st));
    OK(MPI_File_close(&fh));
    BLK(MPI_Barrier(MPI_COMM_WORLD));
    if (wr == 0) unlink(path);
}

/* MPI 4's large-count calls (mpi4py calls them wherever the MPI has them). */
static void large_count(void) {
#if MPI_VERSION >= 4
    int to = (wr + 1) % wp, from = (wr + wp - 1) % wp, out[6], in[6], sum;
    fill(out, 6, wr, 51);
    MPI_Request req;
    OK(MPI_Isend_c(out, 6, MPI_INT, to, 51, MPI_COMM_WORLD, &req));
    BLK(MPI_Recv_c(in, 6, MPI_INT, from, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    BLK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    expect_vals(in, 6, from, 51, "recv_c");
    BLK(MPI_Send_c(out, 6, MPI_INT, to, 52, MPI_COMM_WORLD));
    BLK(MPI_Recv_c(in, 6, MPI_INT, from, 52, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    expect_vals(in, 6, from, 51, "send_c");
    int one = wr + 1;
    BLK(MPI_Allreduce_c(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == wp * (wp + 1) / 2, "allreduce_c: %d", sum);
    int root = wp - 1, v = wr == root ? 77 : 0;
    BLK(MPI_Bcast_c(&v, 1, MPI_INT, root, MPI_COMM_WORLD));
    CHECK(v == 77, "bcast_c: %d", v);
    int mine = 0;
    MPI_Win win;
    BLK(MPI_Win_create_c(&mine, sizeof mine, sizeof mine, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_free(&win));
#endif
}

int main(int argc, char **argv) {
    prog_name = "standard";
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wp);
    CHECK(argc == 2, "usage: standard SCRATCH_DIR");
    where = "alltoallw";
    alltoallw(MPI_COMM_WORLD);
    where = "bsend";
    bsend();
    where = "dup and matched probe";
    dup_and_mprobe();
    where = "neighbourhood collectives";
    neighbours();
    where = "communicator constructors";
    constructors();
    where = "windows";
    windows();
    where = "large counts";
    large_count();
    where = "collective MPI-IO";
    file_io(argv[1]);
    where = "finalize";
    printf("standard: rank %d blocking=%d\n", wr, nblocking);
    MPI_Finalize();
    printf("standard: rank %d finalized\n", wr);
    return 0;
}
