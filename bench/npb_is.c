/*
 * npb_is: an integer bucket sort in the manner of NPB 3.3's IS, in C + MPI.
 *
 * Keys are NPB's: key i = floor(MAX_KEY/4 * (r1+r2+r3+r4)) with r the NPB
 * generator (seed 314159265, a = 5^13) drawn four times per key; rank r
 * generates keys [lo, hi) of its even block by jumping the generator ahead,
 * so the key set does not depend on the number of ranks. As in NPB, iteration
 * i sets key[i] = i and key[i + 10] = MAX_KEY - i before ranking.
 *
 * Each iteration: local counts of keys per destination rank (rank d owns the
 * key range [d*MAX_KEY/p, (d+1)*MAX_KEY/p)), MPI_Alltoall of the counts,
 * MPI_Alltoallv of the keys, then a local counting sort. Unlike NPB the key
 * ranges are split evenly rather than balanced by bucket counts, and the
 * check is on the sorted result rather than NPB's partial ranks: every
 * rank's keys in order and in its range, the largest key of each rank at
 * most the smallest of the next (neighbour exchange), and the number and the
 * sum of all keys conserved.
 */
#include "kernel.h"

#define ITERATIONS 10
#define SEED 314159265ULL
#define MULT 1220703125ULL

static const int class_keys_log2[3] = {16, 20, 23};
static const int class_max_log2[3] = {11, 16, 19};

struct options {
    int cls;
    int corrupt; /* self-test of the check: spoil one sorted key */
};

struct sort {
    long nkeys, lo, hi;   /* this rank's generated keys: global [lo, hi) */
    int max_key, ranks;
    int *keys;            /* generated keys */
    int *send, *recv;     /* keys grouped by destination; received keys */
    int *sorted;          /* received keys in order */
    int *count;           /* histogram of this rank's key range */
    int *scount, *sdispl, *rcount, *rdispl;
    long nrecv, recv_cap;
    int key_lo, key_hi;   /* this rank's key range [key_lo, key_hi) */
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-c S|W|A] [-C] [-h]\n"
            "  -c CLASS  problem class (keys/max key): S 2^16/2^11, W 2^20/2^16,\n"
            "            A 2^23/2^19; 10 iterations (default S)\n"
            "  -C        self-test: spoil one sorted key; the run must fail (exit 3)\n"
            "  -h        this help\n"
            "Ranks: 1 up to the largest key (S 2048). CSV on stdout: metric,value,unit.\n",
            prog);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){0};
    const struct opt opts[] = {
        {'c', OPT_CLASS, &o->cls, 0, 0},
        {'C', OPT_FLAG, &o->corrupt, 0, 0},
    };
    return parse_opts(argc, argv, opts, sizeof opts / sizeof *opts);
}

static int owner(const struct sort *s, int key)
{
    return (int)((long)key * s->ranks / s->max_key);
}

static void generate(struct sort *s)
{
    uint64_t x = npb_mulmod(SEED, npb_powmod(MULT, 4 * (uint64_t)s->lo));
    double k = s->max_key / 4;
    for (long i = 0; i < s->nkeys; i++) {
        double r = randlc(&x, MULT);
        r += randlc(&x, MULT);
        r += randlc(&x, MULT);
        r += randlc(&x, MULT);
        s->keys[i] = (int)(k * r);
    }
}

static void setup(struct sort *s, const struct world *w, int cls, const char *prog)
{
    long total = 1L << class_keys_log2[cls];
    s->max_key = 1 << class_max_log2[cls];
    s->ranks = w->size;
    block_range(total, w->size, w->rank, &s->lo, &s->hi);
    s->nkeys = s->hi - s->lo;
    s->key_lo = (int)(((long)s->max_key * w->rank + w->size - 1) / w->size);
    s->key_hi = (int)(((long)s->max_key * (w->rank + 1) + w->size - 1) / w->size);
    s->keys = xmalloc(s->nkeys * sizeof(int), prog);
    s->send = xmalloc(s->nkeys * sizeof(int), prog);
    s->recv_cap = 2 * total / w->size + 1024;
    s->recv = xmalloc(s->recv_cap * sizeof(int), prog);
    s->sorted = xmalloc(s->recv_cap * sizeof(int), prog);
    s->count = xmalloc((s->key_hi - s->key_lo + 1) * sizeof(int), prog);
    size_t per_rank = w->size * sizeof(int);
    s->scount = xmalloc(per_rank, prog);
    s->sdispl = xmalloc(per_rank, prog);
    s->rcount = xmalloc(per_rank, prog);
    s->rdispl = xmalloc(per_rank, prog);
    generate(s);
}

/* NPB's per-iteration change of two keys, wherever they live. */
static void modify_keys(struct sort *s, int it)
{
    long at[2] = {it, it + ITERATIONS};
    int value[2] = {it, s->max_key - it};
    for (int m = 0; m < 2; m++)
        if (at[m] >= s->lo && at[m] < s->hi)
            s->keys[at[m] - s->lo] = value[m];
}

static void exchange(struct sort *s, const char *prog)
{
    memset(s->scount, 0, s->ranks * sizeof(int));
    for (long i = 0; i < s->nkeys; i++)
        s->scount[owner(s, s->keys[i])]++;
    MPI_Alltoall(s->scount, 1, MPI_INT, s->rcount, 1, MPI_INT, MPI_COMM_WORLD);
    s->sdispl[0] = s->rdispl[0] = 0;
    for (int d = 1; d < s->ranks; d++) {
        s->sdispl[d] = s->sdispl[d - 1] + s->scount[d - 1];
        s->rdispl[d] = s->rdispl[d - 1] + s->rcount[d - 1];
    }
    s->nrecv = s->rdispl[s->ranks - 1] + s->rcount[s->ranks - 1];
    if (s->nrecv > s->recv_cap) {
        s->recv_cap = s->nrecv;
        free(s->recv);
        free(s->sorted);
        s->recv = xmalloc(s->recv_cap * sizeof(int), prog);
        s->sorted = xmalloc(s->recv_cap * sizeof(int), prog);
    }
    /* Group the keys by destination; sdispl serves as the fill cursor. */
    for (long i = 0; i < s->nkeys; i++)
        s->send[s->sdispl[owner(s, s->keys[i])]++] = s->keys[i];
    for (int d = 0; d < s->ranks; d++)
        s->sdispl[d] -= s->scount[d];
    MPI_Alltoallv(s->send, s->scount, s->sdispl, MPI_INT, s->recv, s->rcount, s->rdispl,
                  MPI_INT, MPI_COMM_WORLD);
}

/* Counting sort of the received keys; a key outside the range is kept last. */
static void local_sort(struct sort *s)
{
    int span = s->key_hi - s->key_lo;
    memset(s->count, 0, (span + 1) * sizeof(int));
    for (long i = 0; i < s->nrecv; i++) {
        int k = s->recv[i] - s->key_lo;
        s->count[k >= 0 && k < span ? k : span]++;
    }
    long pos = 0;
    for (int k = 0; k < span; k++)
        for (int c = 0; c < s->count[k]; c++)
            s->sorted[pos++] = s->key_lo + k;
    for (long i = 0; i < s->nrecv && pos < s->nrecv; i++)
        if (s->recv[i] < s->key_lo || s->recv[i] >= s->key_hi)
            s->sorted[pos++] = s->recv[i];
}

static int check_local(const struct sort *s, const struct world *w)
{
    for (long i = 0; i < s->nrecv; i++) {
        int k = s->sorted[i];
        if (k < s->key_lo || k >= s->key_hi || (i > 0 && k < s->sorted[i - 1])) {
            fprintf(stderr,
                    "npb_is: rank %d: sorted key %ld is %d (previous %d, rank's range "
                    "[%d, %d))\n",
                    w->rank, i, k, i > 0 ? s->sorted[i - 1] : -1, s->key_lo, s->key_hi);
            return 1;
        }
    }
    return 0;
}

/* The largest key here against the smallest of the next rank (empty: no bound). */
static int check_neighbours(const struct sort *s, const struct world *w)
{
    int mine_max = s->nrecv ? s->sorted[s->nrecv - 1] : -1, left_max = -1;
    int right = w->rank + 1 < w->size ? w->rank + 1 : MPI_PROC_NULL;
    int left = w->rank > 0 ? w->rank - 1 : MPI_PROC_NULL;
    MPI_Sendrecv(&mine_max, 1, MPI_INT, right, 0, &left_max, 1, MPI_INT, left, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (left != MPI_PROC_NULL && s->nrecv && left_max > s->sorted[0]) {
        fprintf(stderr, "npb_is: rank %d's smallest key %d is below rank %d's largest %d\n",
                w->rank, s->sorted[0], left, left_max);
        return 1;
    }
    return 0;
}

/* The number and sum of keys before the last exchange and after the sort. */
static int check_conservation(const struct sort *s, const struct world *w)
{
    long long in[2] = {s->nkeys, 0}, out[2] = {s->nrecv, 0}, tin[2], tout[2];
    for (long i = 0; i < s->nkeys; i++)
        in[1] += s->keys[i];
    for (long i = 0; i < s->nrecv; i++)
        out[1] += s->sorted[i];
    MPI_Allreduce(in, tin, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(out, tout, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (w->rank == 0 && (tin[0] != tout[0] || tin[1] != tout[1])) {
        fprintf(stderr, "npb_is: keys not conserved: %lld keys summing to %lld in, "
                        "%lld summing to %lld sorted\n", tin[0], tin[1], tout[0], tout[1]);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct world w = world_init(&argc, &argv);
    struct options o;
    handle_parse(&w, parse_options(argc, argv, &o), argv[0], usage);
    if ((1L << class_max_log2[o.cls]) < w.size)
        fail_ranks(&w, argv[0], "more ranks than key values in this class", usage);

    struct sort s;
    setup(&s, &w, o.cls, argv[0]);
    csv_header(&w);
    /* NPB ranks once untimed (iteration 1's keys) before the timed loop. */
    modify_keys(&s, 1);
    exchange(&s, argv[0]);
    local_sort(&s);

    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int it = 1; it <= ITERATIONS; it++) {
        modify_keys(&s, it);
        exchange(&s, argv[0]);
        local_sort(&s);
    }
    double took = MPI_Wtime() - start, slowest;
    MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    double total = (double)(1L << class_keys_log2[o.cls]);
    figure(&w, "time", slowest, "s");
    figure(&w, "mops", total * ITERATIONS / slowest / 1e6, "Mkeys/s");
    figure(&w, "keys", total, "count");
    if (o.corrupt && w.rank == 0 && s.nrecv > 1)
        s.sorted[0] = s.sorted[s.nrecv - 1] + 1;
    int bad = check_local(&s, &w);
    bad |= check_neighbours(&s, &w);
    bad |= check_conservation(&s, &w);
    verdict(&w, bad);
    MPI_Finalize();
    return 0;
}
