/*
 * hop_probe: how long a cache line takes to travel between two CPUs here, the
 * host state that decides what every cross-CPU message costs (`vhpc lab`
 * records it beside every run, `vhpc calibrate` beside every probe).
 *
 *   hop_probe [-c CPU,CPU] [-b BATCHES]
 *       two threads, pinned to the two CPUs (default 0,1), pass a turn through
 *       one shared word, 16 round trips per batch: CSV
 *       `batches,median_ns,p10_ns,p90_ns`, the one-way time over the batches.
 *
 * On a virtual machine the hypervisor may place the two vCPUs on one core
 * complex (tens of ns) or on two (hundreds), and move them: the median of
 * the batches is what the state was while the probe ran (a batch that the
 * host or the kernel interrupted lands in the upper tail, not the median).
 *
 * Exit status 0, 1 on a system error, 2 on bad options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRIPS 16 /* round trips per batch: a batch is long enough to time, short enough to dodge ticks */
#define MAX_BATCHES 1000000

static _Alignas(64) atomic_int turn;
static long batches = 2000;
static int cpus[2] = {0, 1};

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* The peer hands every turn straight back. */
static void *peer(void *arg)
{
    (void)arg;
    if (pin(cpus[1]) != 0) {
        perror("hop_probe: sched_setaffinity");
        exit(1);
    }
    for (long i = 0; i < batches * TRIPS; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 1)
            ;
        atomic_store_explicit(&turn, 0, memory_order_release);
    }
    return NULL;
}

static int compare(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "c:b:h")) != -1) {
        char *end;
        switch (opt) {
        case 'c':
            if (sscanf(optarg, "%d,%d", &cpus[0], &cpus[1]) != 2 || cpus[0] < 0 || cpus[1] < 0 ||
                cpus[0] == cpus[1]) {
                fprintf(stderr, "hop_probe: -c wants two different CPUs, CPU,CPU\n");
                return 2;
            }
            break;
        case 'b':
            batches = strtol(optarg, &end, 10);
            if (*end || batches < 1 || batches > MAX_BATCHES) {
                fprintf(stderr, "hop_probe: -b wants 1 to %d batches\n", MAX_BATCHES);
                return 2;
            }
            break;
        case 'h':
            printf("usage: %s [-c CPU,CPU] [-b BATCHES]\n"
                   "  one-way time of a cache line between the two CPUs:\n"
                   "  CSV batches,median_ns,p10_ns,p90_ns\n", argv[0]);
            return 0;
        default:
            return 2;
        }
    }
    long long *one_way = malloc(sizeof *one_way * (size_t)batches);
    if (!one_way) {
        perror("hop_probe: malloc");
        return 1;
    }
    if (pin(cpus[0]) != 0) {
        perror("hop_probe: sched_setaffinity");
        return 1;
    }
    pthread_t thread;
    if ((errno = pthread_create(&thread, NULL, peer, NULL)) != 0) {
        perror("hop_probe: pthread_create");
        return 1;
    }
    for (long b = 0; b < batches; b++) {
        long long start = now_ns();
        for (int i = 0; i < TRIPS; i++) {
            atomic_store_explicit(&turn, 1, memory_order_release);
            while (atomic_load_explicit(&turn, memory_order_acquire) != 0)
                ;
        }
        one_way[b] = (now_ns() - start) / (2 * TRIPS);
    }
    pthread_join(thread, NULL);
    qsort(one_way, (size_t)batches, sizeof *one_way, compare);
    printf("batches,median_ns,p10_ns,p90_ns\n%ld,%lld,%lld,%lld\n", batches,
           one_way[batches / 2], one_way[batches / 10], one_way[batches * 9 / 10]);
    free(one_way);
    return 0;
}
