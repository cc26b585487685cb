/*
 * pipe_pingpong: the floors for two processes handing one CPU back and forth.
 *
 * pipe (default): a parent and its child bounce one byte over two pipes; every
 * hop is a blocking read, so each one costs a wake-up and a context switch
 * when both processes share a core.
 * yield (-y): they pass a turn through a shared-memory word and sched_yield()
 * while it is not theirs: the least any wait built on sched_yield (an MPI's
 * idle-yield, libvhpc_wait's shared mode) can cost per message on one core.
 * The caller pins it (e.g. `taskset -c 0`), or -c pins parent and child to a
 * CPU each (the same CPU: a context switch per hop; two CPUs: a cross-CPU
 * wake-up per hop). -g makes parent and child join a cgroup each (write their
 * pid to a `tasks` file), so that a time slicer can freeze and thaw them.
 * -p N runs N such pairs at once (2N processes) and reports the slowest pair,
 * as bench/pingpong does with 2N ranks: the floor for 4 ranks on one core.
 * -T N gives parent and child N more threads each that only sleep, as an MPI
 * rank has helper threads: a time slicer that reads each task of a domain to
 * see it idle then has N + 1 to read.
 * Output: CSV `test,size,iters,usec,MBps` with the half round trip in usec;
 * with -q also the distribution of single hops (one process hands over, the
 * other sees it), each timed with CLOCK_MONOTONIC on both sides:
 * `hops,p50_usec,p99_usec,max_usec`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 100
#define CHUNK 1000 /* round trips between clock reads in -t mode */
#define MAX_SAMPLES 100000 /* round trips whose hops -q times (the first ones) */

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-y] [-q] [-c CPU,CPU] [-g TASKS,TASKS] [-T THREADS] [-p PAIRS] [-n ROUND_TRIPS | -t SECONDS] [-h]\n"
            "  -y          hand over with sched_yield on a shared word, not over pipes\n"
            "  -q          also time single hops: hops,p50_usec,p99_usec,max_usec columns\n"
            "  -c A,B      pin the parent to CPU A and the child to CPU B\n"
            "  -g F,G      the parent writes its pid to file F, the child to G (cgroup tasks)\n"
            "  -T N        N more threads in parent and child that only sleep (0..64)\n"
            "  -p PAIRS    run this many pairs at once, starting together; report the slowest\n"
            "              (not with -q, -c, -g)\n"
            "  -n N        number of round trips (default 100000)\n"
            "  -t SECONDS  run for about this long instead of a fixed count\n"
            "CSV on stdout: pipe|yield,1,<round trips>,<half round trip usec>,0[,hops,p50,p99,max]\n",
            prog);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "pipe_pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        die("sched_setaffinity");
}

static void *sleep_forever(void *unused)
{
    (void)unused;
    for (;;)
        pause();
    return NULL;
}

/* Threads that only sleep, created after joining a group, so they join it too. */
static void idle_threads(int n)
{
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if ((errno = pthread_create(&t, NULL, sleep_forever, NULL)) != 0)
            die("pthread_create");
    }
}

static void join(const char *tasks)
{
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    int fd = open(tasks, O_WRONLY);
    if (fd < 0 || write(fd, pid, (size_t)n) != n)
        die(tasks);
    close(fd);
}

/* "A,B" -> two strings (pointers into s, which is modified). */
static int split_pair(char *s, char **a, char **b)
{
    char *comma = strchr(s, ',');
    if (!comma || comma == s || comma[1] == '\0')
        return -1;
    *comma = '\0';
    *a = s;
    *b = comma + 1;
    return 0;
}

static int parse_cpu(const char *s, int *cpu)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v >= CPU_SETSIZE)
        return -1;
    *cpu = (int)v;
    return 0;
}

/* -q: when each hop of the first MAX_SAMPLES timed round trips left and arrived.
 * The child's times are in shared memory; hop = arrival - departure. */
struct hop_times {
    long long sent, received, replied, back;
};
static struct hop_times *hops; /* NULL: not timed */
static long round_trip;        /* this process's count, warm-up included */

static struct hop_times *sample(void)
{
    long i = round_trip - WARMUP;
    return hops && i >= 0 && i < MAX_SAMPLES ? &hops[i] : NULL;
}

static int compare_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The yield floor's shared turn: 0 = parent's, 1 = child's; stop ends the child. */
struct turn {
    volatile int whose, stop;
};
static struct turn *turn; /* NULL: pipes */

static void pass_to(int who)
{
    __atomic_store_n(&turn->whose, who, __ATOMIC_RELEASE);
}

static int wait_for(int who)
{
    while (__atomic_load_n(&turn->whose, __ATOMIC_ACQUIRE) != who) {
        if (turn->stop)
            return 0;
        sched_yield();
    }
    return 1;
}

static void hop(int out, int in)
{
    struct hop_times *t = sample();
    round_trip++;
    if (t)
        t->sent = now_ns();
    if (turn) {
        pass_to(1);
        wait_for(0);
    } else {
        char c = 'x';
        if (write(out, &c, 1) != 1)
            die("write");
        if (read(in, &c, 1) != 1)
            die("read");
    }
    if (t)
        t->back = now_ns();
}

/* Child: echo every byte (hand every turn back) until the parent stops. */
static void echo(int in, int out)
{
    if (turn) {
        while (wait_for(1)) {
            struct hop_times *t = sample();
            round_trip++;
            if (t)
                t->received = t->replied = now_ns();
            pass_to(0);
        }
        _exit(0);
    }
    char c;
    ssize_t n;
    while ((n = read(in, &c, 1)) == 1) {
        struct hop_times *t = sample();
        round_trip++;
        if (t)
            t->received = now_ns();
        if (t)
            t->replied = now_ns();
        if (write(out, &c, 1) != 1)
            _exit(1);
    }
    _exit(n == 0 ? 0 : 1);
}

/* -p: the pairs start their timed loops together (after their warm-ups) and
 * leave their results here for the first process. */
struct pairs {
    volatile int ready;
    long iters[];
};
static struct pairs *together; /* NULL: one pair */
static int npairs = 1;

static void start_together(void)
{
    if (!together)
        return;
    __atomic_add_fetch(&together->ready, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(&together->ready, __ATOMIC_ACQUIRE) < npairs)
        sched_yield();
}

struct options {
    int yield, cpus[2], threads;
    char *tasks[2];
    long count;
    double seconds;
};

/* One pair: fork the echoing child, time the round trips. Returns the child's
 * exit status check (0: clean) and the count and time through the pointers. */
static int run_pair(const struct options *o, long *iters_out, double *took_out)
{
    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        die("pipe");
    if (o->yield) {
        turn = mmap(NULL, sizeof *turn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (turn == MAP_FAILED)
            die("mmap");
    }
    if (o->cpus[0] >= 0)
        pin(o->cpus[0]);
    if (o->tasks[0])
        join(o->tasks[0]);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (o->cpus[1] >= 0)
            pin(o->cpus[1]);
        if (o->tasks[1])
            join(o->tasks[1]);
        idle_threads(o->threads);
        close(to_child[1]);
        close(to_parent[0]);
        echo(to_child[0], to_parent[1]);
    }
    idle_threads(o->threads);
    close(to_child[0]);
    close(to_parent[1]);

    for (int i = 0; i < WARMUP; i++)
        hop(to_child[1], to_parent[0]);
    start_together();
    long iters = 0;
    double start = now(), took;
    if (o->seconds > 0) {
        do {
            for (int i = 0; i < CHUNK; i++)
                hop(to_child[1], to_parent[0]);
            iters += CHUNK;
        } while ((took = now() - start) < o->seconds);
    } else {
        for (iters = 0; iters < o->count; iters++)
            hop(to_child[1], to_parent[0]);
        took = now() - start;
    }
    close(to_child[1]);
    if (turn)
        turn->stop = 1;
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pipe_pingpong: child failed\n");
        return 1;
    }
    *iters_out = iters;
    *took_out = took;
    return 0;
}

/* -p: every pair in a process of its own; the slowest half round trip. */
static int run_pairs(const struct options *o, long *iters_out, double *usec_out)
{
    size_t size = sizeof *together + 2 * (size_t)npairs * sizeof(long);
    together = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (together == MAP_FAILED)
        die("mmap");
    double *took = (double *)&together->iters[npairs];
    pid_t pids[npairs];
    for (int p = 0; p < npairs; p++) {
        pids[p] = fork();
        if (pids[p] < 0)
            die("fork");
        if (pids[p] == 0)
            _exit(run_pair(o, &together->iters[p], &took[p]));
    }
    int failed = 0, status;
    for (int p = 0; p < npairs; p++)
        if (waitpid(pids[p], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed = 1;
    if (failed) {
        fprintf(stderr, "pipe_pingpong: a pair failed\n");
        return 1;
    }
    *usec_out = 0;
    for (int p = 0; p < npairs; p++) {
        double usec = took[p] * 1e6 / (2.0 * (double)together->iters[p]);
        if (usec > *usec_out) {
            *usec_out = usec;
            *iters_out = together->iters[p];
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {.yield = 0, .cpus = {-1, -1}, .tasks = {NULL, NULL}, .count = 100000};
    char *end, *a, *b;
    int c, timed_hops = 0;
    opterr = 0;
    while ((c = getopt(argc, argv, "yqc:g:T:p:n:t:h")) != -1) {
        switch (c) {
        case 'y':
            o.yield = 1;
            break;
        case 'q':
            timed_hops = 1;
            break;
        case 'c':
            if (split_pair(optarg, &a, &b) || parse_cpu(a, &o.cpus[0]) || parse_cpu(b, &o.cpus[1]))
                goto bad;
            break;
        case 'g':
            if (split_pair(optarg, &o.tasks[0], &o.tasks[1]))
                goto bad;
            break;
        case 'T':
            o.threads = (int)strtol(optarg, &end, 10);
            if (*end != '\0' || o.threads < 0 || o.threads > 64)
                goto bad;
            break;
        case 'p':
            npairs = (int)strtol(optarg, &end, 10);
            if (*end != '\0' || npairs < 1 || npairs > 64)
                goto bad;
            break;
        case 'n':
            o.count = strtol(optarg, &end, 10);
            if (*end != '\0' || o.count < 1)
                goto bad;
            break;
        case 't':
            o.seconds = strtod(optarg, &end);
            if (*end != '\0' || !(o.seconds > 0 && o.seconds <= 3600))
                goto bad;
            break;
        case 'h':
            usage(stdout, argv[0]);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind != argc)
        goto bad;
    if (npairs > 1 && (timed_hops || o.cpus[0] >= 0 || o.tasks[0]))
        goto bad;

    const char *test = o.yield ? "yield" : "pipe";
    long iters;
    double took, usec;
    if (npairs > 1) {
        if (run_pairs(&o, &iters, &usec))
            return 1;
        printf("test,size,iters,usec,MBps\n");
        printf("%s,1,%ld,%.3f,0\n", test, iters, usec);
        return 0;
    }
    if (timed_hops) {
        hops = mmap(NULL, MAX_SAMPLES * sizeof *hops, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (hops == MAP_FAILED)
            die("mmap");
    }
    if (run_pair(&o, &iters, &took))
        return 1;
    usec = took * 1e6 / (2.0 * (double)iters);
    if (!hops) {
        printf("test,size,iters,usec,MBps\n");
        printf("%s,1,%ld,%.3f,0\n", test, iters, usec);
        return 0;
    }
    long rounds = iters < MAX_SAMPLES ? iters : MAX_SAMPLES, n = 2 * rounds;
    long long *each = malloc((size_t)n * sizeof *each);
    if (!each)
        die("malloc");
    for (long i = 0; i < rounds; i++) {
        each[2 * i] = hops[i].received - hops[i].sent;
        each[2 * i + 1] = hops[i].back - hops[i].replied;
    }
    qsort(each, (size_t)n, sizeof *each, compare_ll);
    printf("test,size,iters,usec,MBps,hops,p50_usec,p99_usec,max_usec\n");
    printf("%s,1,%ld,%.3f,0,%ld,%.3f,%.3f,%.3f\n", test, iters, usec, n, each[n / 2] / 1e3,
           each[(long)(0.99 * (double)(n - 1))] / 1e3, each[n - 1] / 1e3);
    free(each);
    return 0;
bad:
    usage(stderr, argv[0]);
    return 2;
}
