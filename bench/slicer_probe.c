/*
 * slicer_probe: two processes in two time-sliced domains, for `make bench-slicer`
 * (python -m vhpc.host.bench): how long the CPU runs neither domain when the
 * slicer switches from one to the other.
 *
 *   slicer_probe block -g TASKS,TASKS [-c CPU] [-r PRIO] [-w WORK_US] [-s SLEEP_US] [-t SECONDS]
 *       each process, in turn: runs (reads CLOCK_MONOTONIC in a loop) for
 *       WORK_US (default 2000), then sleeps SLEEP_US (default 300). Its domain
 *       is then idle, so a work-conserving slicer thaws the other one, whose
 *       sleep ended long before. CSV `proc,event,t_ns`: event `run` is the
 *       first clock read after a sleep returned (the task runs again), event
 *       `block` the last one before the sleep (its domain's last task blocks).
 *       With -H HINTS (a hint file, vhpc.host.hints), each process says it waits
 *       in slot 0 of page 1 + proc before it sleeps (state WAIT, in the running
 *       turn) and rings the slicer's doorbell, as libvhpc_wait does when every
 *       rank of its domain waits, and says it computes when it runs again: the
 *       hint-driven switch (docs/runtime.md, "The hint channel").
 *   slicer_probe spin -g TASKS,TASKS [-c CPU] [-r PRIO] [-G GAP_US] [-t SECONDS]
 *       each process reads CLOCK_MONOTONIC in a loop; a pause longer than
 *       GAP_US (default 20) between two reads ends a run. CSV
 *       `proc,start_ns,end_ns`, one row per run: the slicer's slices as the
 *       processes saw them.
 *
 * Both processes (the parent, proc 0, and its child, proc 1) are pinned to
 * CPU (default 0) and each writes its pid into its TASKS file first (a freezer
 * group's `tasks`). With -r, both run SCHED_FIFO at PRIO (1..99), so that
 * other work on the machine does not queue ahead of them: put the slicer
 * above them. Times are CLOCK_MONOTONIC nanoseconds, so they compare
 * across processes. Exit status 0, 1 on a system error, 2 on bad options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 400000 /* records kept per process */

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s block -g TASKS,TASKS [-c CPU] [-r PRIO] [-w WORK_US] [-s SLEEP_US] [-t SECONDS] [-H HINTS]\n"
            "       %s spin -g TASKS,TASKS [-c CPU] [-r PRIO] [-G GAP_US] [-t SECONDS]\n",
            prog, prog);
}

static void join(const char *tasks)
{
    int fd = open(tasks, O_WRONLY);
    if (fd < 0)
        die(tasks);
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (write(fd, pid, (size_t)n) != n)
        die(tasks);
    close(fd);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        die("sched_setaffinity");
}

/* Per process: (a, b) pairs; block mode: a = run time, b = block time
 * (b = 0 for a run not yet ended); spin mode: a run's start and end. */
struct record {
    long long a, b;
};

struct shared {
    int count[2];
    struct record rec[2][MAX_EVENTS];
};

/* The hint file's words this process touches (runtime/hints.c's layout). */
static uint32_t *hint_state, *hint_turn, *hint_cur, *hint_bell;

static void hints_map(const char *path, int me)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        die(path);
    unsigned char *base = mmap(NULL, 4096 * 3, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        die("mmap hints");
    close(fd);
    hint_state = (uint32_t *)(base + 4096 * (1 + me));
    hint_turn = hint_state + 3;
    hint_cur = (uint32_t *)(base + 64);
    hint_bell = (uint32_t *)(base + 8);
    __atomic_store_n(hint_state, 1, __ATOMIC_SEQ_CST); /* computing */
}

static void hint(uint32_t state)
{
    if (!hint_state)
        return;
    if (state == 2) { /* waiting, seen in this turn: ring */
        __atomic_store_n(hint_turn, __atomic_load_n(hint_cur, __ATOMIC_SEQ_CST), __ATOMIC_SEQ_CST);
        __atomic_store_n(hint_state, state, __ATOMIC_SEQ_CST);
        __atomic_fetch_add(hint_bell, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, hint_bell, FUTEX_WAKE, 1, NULL, NULL, 0);
    } else {
        __atomic_store_n(hint_state, state, __ATOMIC_SEQ_CST);
    }
}

static void block(struct shared *sh, int me, long long work, long long sleep_ns, long long end)
{
    struct timespec req = {sleep_ns / 1000000000LL, sleep_ns % 1000000000LL};
    while (sh->count[me] < MAX_EVENTS) {
        long long run = now_ns(), t = run;
        hint(1);
        while (t - run < work)
            t = now_ns();
        sh->rec[me][sh->count[me]++] = (struct record){run, t};
        if (t >= end)
            return;
        hint(2);
        nanosleep(&req, NULL);
    }
}

static void spin(struct shared *sh, int me, long long gap, long long end)
{
    long long start = now_ns(), last = start;
    while (sh->count[me] < MAX_EVENTS) {
        long long t = now_ns();
        if (t - last > gap) {
            sh->rec[me][sh->count[me]++] = (struct record){start, last};
            start = t;
        }
        last = t;
        if (t >= end) {
            sh->rec[me][sh->count[me]++] = (struct record){start, last};
            return;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(argv[0]);
        return 2;
    }
    int is_block = strcmp(argv[1], "block") == 0;
    if (!is_block && strcmp(argv[1], "spin") != 0) {
        usage(argv[0]);
        return 2;
    }
    char *tasks[2] = {NULL, NULL};
    const char *hints = NULL;
    long cpu = 0, prio = 0, work_us = 2000, sleep_us = 300, gap_us = 20;
    double seconds = 1.0;
    int opt;
    optind = 2;
    while ((opt = getopt(argc, argv, "g:c:r:w:s:G:t:H:")) != -1) {
        switch (opt) {
        case 'g':
            tasks[0] = optarg;
            tasks[1] = strchr(optarg, ',');
            if (tasks[1])
                *tasks[1]++ = '\0';
            break;
        case 'c': cpu = atol(optarg); break;
        case 'r': prio = atol(optarg); break;
        case 'w': work_us = atol(optarg); break;
        case 's': sleep_us = atol(optarg); break;
        case 'G': gap_us = atol(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'H': hints = optarg; break;
        default: usage(argv[0]); return 2;
        }
    }
    if (!tasks[0] || !tasks[1] || cpu < 0 || prio < 0 || prio > 99 || work_us <= 0 || sleep_us <= 0 || gap_us <= 0
        || seconds <= 0) {
        usage(argv[0]);
        return 2;
    }
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        die("mmap");
    pin((int)cpu);
    if (prio > 0) {
        struct sched_param param = {.sched_priority = (int)prio};
        if (sched_setscheduler(0, SCHED_FIFO, &param))
            die("sched_setscheduler");
    }
    long long end = now_ns() + (long long)(seconds * 1e9);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    int me = child == 0;
    join(tasks[me]);
    if (hints)
        hints_map(hints, me);
    if (is_block)
        block(sh, me, work_us * 1000LL, sleep_us * 1000LL, end);
    else
        spin(sh, me, gap_us * 1000LL, end);
    if (child == 0)
        _exit(0);
    int status;
    if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "slicer_probe: child failed\n");
        return 1;
    }
    if (is_block) {
        printf("proc,event,t_ns\n");
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < sh->count[p]; i++)
                printf("%d,run,%lld\n%d,block,%lld\n", p, sh->rec[p][i].a, p, sh->rec[p][i].b);
    } else {
        printf("proc,start_ns,end_ns\n");
        for (int p = 0; p < 2; p++)
            for (int i = 0; i < sh->count[p]; i++)
                printf("%d,%lld,%lld\n", p, sh->rec[p][i].a, sh->rec[p][i].b);
    }
    return 0;
}
