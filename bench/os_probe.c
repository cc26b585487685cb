/*
 * os_probe: what the kernel's scheduler and timers cost here, for `vhpc calibrate`.
 *
 *   os_probe yield [-c CPU] [-t SECONDS]
 *       sched_yield() in a loop with nothing else to run (as far as this
 *       program goes): CSV `test,iters,nsec` with the time per call.
 *   os_probe sleep [-c CPU] [-n COUNT] [-s SLACK_NS] REQUESTED_US...
 *       nanosleep(REQUESTED_US) COUNT times each, with the default timer slack
 *       or, with -s, prctl(PR_SET_TIMERSLACK, SLACK_NS) first: CSV
 *       `requested_us,slack_ns,count,median_ns,p99_ns,min_ns,max_ns` (actual
 *       durations, CLOCK_MONOTONIC around the call).
 *   os_probe spin [-c CPU,CPU] [-g TASKS,TASKS] [-G GAP_US] [-t SECONDS]
 *       two busy loops, a parent and its child (pinned with -c, each joining a
 *       cgroup with -g), that read CLOCK_MONOTONIC in a loop; a pause longer
 *       than GAP_US (default 20) between two reads ends a run. CSV
 *       `proc,start_ns,end_ns`, one row per run of either process, in
 *       CLOCK_MONOTONIC nanoseconds: who ran when. Whether a pause was the
 *       other process running or an interrupt is for the reader to decide.
 *
 * Exit status 0, 1 on a system error, 2 on bad options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 200000 /* runs recorded per spinning process */
#define MAX_COUNT 1000000

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s yield [-c CPU] [-t SECONDS]\n"
            "       %s sleep [-c CPU] [-n COUNT] [-s SLACK_NS] REQUESTED_US...\n"
            "       %s spin [-c CPU,CPU] [-g TASKS,TASKS] [-G GAP_US] [-t SECONDS]\n"
            "  yield  ns per sched_yield() alone: CSV test,iters,nsec\n"
            "  sleep  actual nanosleep durations (COUNT each, default 100; -s sets the\n"
            "         timer slack): CSV requested_us,slack_ns,count,median_ns,p99_ns,min_ns,max_ns\n"
            "  spin   two busy loops (parent, child); every run of each: CSV proc,start_ns,end_ns\n"
            "         (-G: a pause longer than this ends a run, default 20 us)\n"
            "  -t SECONDS  how long (default 0.2 for yield, 1 for spin)\n",
            prog, prog, prog);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "os_probe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        die("sched_setaffinity");
}

static void join(const char *tasks)
{
    if (!tasks)
        return;
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    int fd = open(tasks, O_WRONLY);
    if (fd < 0 || write(fd, pid, (size_t)n) != n)
        die(tasks);
    close(fd);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v > 0 && v <= 3600))
        return -1;
    *out = v;
    return 0;
}

/* "A,B" -> a and b (pointers into s, which is modified); "A" alone gives b = NULL. */
static void split_pair(char *s, char **a, char **b)
{
    char *comma = strchr(s, ',');
    *a = s;
    *b = NULL;
    if (comma) {
        *comma = '\0';
        *b = comma + 1;
    }
}

static int compare_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ yield */

static int probe_yield(int cpu, double seconds)
{
    pin(cpu);
    for (int i = 0; i < 1000; i++)
        sched_yield();
    long iters = 0;
    long long start = now_ns(), took;
    do {
        for (int i = 0; i < 1000; i++)
            sched_yield();
        iters += 1000;
    } while ((took = now_ns() - start) < (long long)(seconds * 1e9));
    printf("test,iters,nsec\n");
    printf("yield,%ld,%.1f\n", iters, (double)took / (double)iters);
    return 0;
}

/* ------------------------------------------------------------------ sleep */

static int probe_sleep(int cpu, long count, long slack, char **requested, int nreq)
{
    pin(cpu);
    if (slack > 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0))
        die("prctl(PR_SET_TIMERSLACK)");
    int actual_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    long long *took = malloc((size_t)count * sizeof *took);
    if (!took)
        die("malloc");
    printf("requested_us,slack_ns,count,median_ns,p99_ns,min_ns,max_ns\n");
    for (int r = 0; r < nreq; r++) {
        long us;
        if (parse_long(requested[r], 1, 10000000, &us)) {
            fprintf(stderr, "os_probe: bad duration %s\n", requested[r]);
            return 2;
        }
        struct timespec req = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&req, NULL); /* warm-up */
        for (long i = 0; i < count; i++) {
            long long t0 = now_ns();
            if (nanosleep(&req, NULL))
                die("nanosleep");
            took[i] = now_ns() - t0;
        }
        qsort(took, (size_t)count, sizeof *took, compare_ll);
        printf("%ld,%d,%ld,%lld,%lld,%lld,%lld\n", us, actual_slack, count, took[count / 2],
               took[(long)(0.99 * (double)(count - 1))], took[0], took[count - 1]);
    }
    free(took);
    return 0;
}

/* ------------------------------------------------------------------ spin */

struct spin_shared {
    volatile int ready[2];
    volatile long long deadline; /* 0 until both are ready */
    long nruns[2];
    long long runs[2][MAX_RUNS][2];
};

/* Busy loop until the deadline, recording each run: a pause longer than `gap`
 * between two clock reads ends one. */
static void spin(struct spin_shared *sh, int me, long long gap)
{
    long long deadline = __atomic_load_n(&sh->deadline, __ATOMIC_ACQUIRE);
    long n = 0;
    long long prev = now_ns(), start = prev;
    while (prev < deadline) {
        long long t = now_ns();
        if (t - prev > gap) {
            if (n < MAX_RUNS) {
                sh->runs[me][n][0] = start;
                sh->runs[me][n][1] = prev;
                n++;
            }
            start = t;
        }
        prev = t;
    }
    if (n < MAX_RUNS) {
        sh->runs[me][n][0] = start;
        sh->runs[me][n][1] = prev;
        n++;
    }
    sh->nruns[me] = n;
}

static int probe_spin(int cpus[2], char *tasks[2], long gap_us, double seconds)
{
    struct spin_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        die("mmap");
    /* Before the start, `deadline` holds the duration as a negative number. */
    sh->deadline = -(long long)(seconds * 1e9);
    pin(cpus[0]);
    join(tasks[0]);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        pin(cpus[1]);
        join(tasks[1]);
        /* Wait for the parent to turn the duration into a deadline. */
        __atomic_store_n(&sh->ready[1], 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&sh->ready[0], __ATOMIC_ACQUIRE))
            sched_yield();
        while (__atomic_load_n(&sh->deadline, __ATOMIC_ACQUIRE) < 0)
            sched_yield();
        spin(sh, 1, gap_us * 1000LL);
        _exit(0);
    }
    /* Parent: once both are ready, deadline = now + duration. */
    __atomic_store_n(&sh->ready[0], 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&sh->ready[1], __ATOMIC_ACQUIRE))
        sched_yield();
    __atomic_store_n(&sh->deadline, now_ns() - sh->deadline, __ATOMIC_RELEASE);
    spin(sh, 0, gap_us * 1000LL);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "os_probe: spinning child failed\n");
        return 1;
    }
    printf("proc,start_ns,end_ns\n");
    for (int p = 0; p < 2; p++)
        for (long i = 0; i < sh->nruns[p]; i++)
            printf("%d,%lld,%lld\n", p, sh->runs[p][i][0], sh->runs[p][i][1]);
    return 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr, argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "-h") == 0) {
        usage(stdout, argv[0]);
        return 0;
    }
    int is_yield = strcmp(mode, "yield") == 0, is_sleep = strcmp(mode, "sleep") == 0,
        is_spin = strcmp(mode, "spin") == 0;
    if (!is_yield && !is_sleep && !is_spin) {
        usage(stderr, argv[0]);
        return 2;
    }
    double seconds = is_spin ? 1.0 : 0.2;
    long count = 100, slack = 0, gap_us = 20, cpu;
    int cpus[2] = {-1, -1};
    char *tasks[2] = {NULL, NULL}, *a, *b;
    opterr = 0;
    optind = 2;
    for (int c; (c = getopt(argc, argv, "c:g:G:n:s:t:h")) != -1;) {
        switch (c) {
        case 'c':
            split_pair(optarg, &a, &b);
            if (parse_long(a, 0, CPU_SETSIZE - 1, &cpu))
                goto bad;
            cpus[0] = cpus[1] = (int)cpu;
            if (b && (!is_spin || parse_long(b, 0, CPU_SETSIZE - 1, &cpu)))
                goto bad;
            if (b)
                cpus[1] = (int)cpu;
            break;
        case 'g':
            split_pair(optarg, &tasks[0], &tasks[1]);
            if (!is_spin || !tasks[1] || !*tasks[0] || !*tasks[1])
                goto bad;
            break;
        case 'G':
            if (!is_spin || parse_long(optarg, 1, 1000000, &gap_us))
                goto bad;
            break;
        case 'n':
            if (!is_sleep || parse_long(optarg, 1, MAX_COUNT, &count))
                goto bad;
            break;
        case 's':
            if (!is_sleep || parse_long(optarg, 1, 1000000000, &slack))
                goto bad;
            break;
        case 't':
            if (is_sleep || parse_seconds(optarg, &seconds))
                goto bad;
            break;
        case 'h':
            usage(stdout, argv[0]);
            return 0;
        default:
            goto bad;
        }
    }
    if (is_yield)
        return optind == argc ? probe_yield(cpus[0], seconds) : (usage(stderr, argv[0]), 2);
    if (is_sleep)
        return optind < argc ? probe_sleep(cpus[0], count, slack, argv + optind, argc - optind)
                             : (usage(stderr, argv[0]), 2);
    if (optind != argc)
        goto bad;
    return probe_spin(cpus, tasks, gap_us, seconds);
bad:
    usage(stderr, argv[0]);
    return 2;
}
