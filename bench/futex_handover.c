/*
 * futex_handover: the floor of the hint channel's hand-over between two parked
 * ranks (runtime/hints.c): two threads pass a turn through one word; the one
 * whose turn it is not waits for it, polling it up to POLL_NS and then asleep on
 * it (FUTEX_WAIT), and the one that passes it stores and wakes (FUTEX_WAKE).
 * On one CPU every hand-over is a context switch; on two with POLL_NS = 0 a
 * wake-up of a CPU gone idle (in a VM: an IPI to a halted vCPU, which the host
 * must schedule again); polling, the store is seen without any wake-up.
 *
 *   futex_handover CPU_A CPU_B POLL_NS HANDOVERS
 * Output: CSV `cpus,poll_ns,handovers,usec` with the time per hand-over.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t turn;
static long rounds;
static uint64_t poll_ns;
static int cpus[2];

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void wait_turn(uint32_t me) {
    uint64_t start = poll_ns ? now_ns() : 0;
    while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != me) {
        if (poll_ns && now_ns() - start < poll_ns) continue;
        syscall(SYS_futex, &turn, FUTEX_WAIT, 1 - me, NULL, NULL, 0);
    }
}

static void *side(void *arg) {
    uint32_t me = (uint32_t)(uintptr_t)arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[me], &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
    for (long i = 0; i < rounds; i++) {
        wait_turn(me);
        __atomic_store_n(&turn, 1 - me, __ATOMIC_RELEASE);
        syscall(SYS_futex, &turn, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s CPU_A CPU_B POLL_NS HANDOVERS\n", argv[0]);
        return 2;
    }
    cpus[0] = atoi(argv[1]);
    cpus[1] = atoi(argv[2]);
    poll_ns = strtoull(argv[3], NULL, 10);
    long handovers = atol(argv[4]);
    rounds = handovers / 2 > 0 ? handovers / 2 : 1;
    pthread_t a, b;
    uint64_t start = now_ns();
    pthread_create(&a, NULL, side, (void *)0);
    pthread_create(&b, NULL, side, (void *)1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("cpus,poll_ns,handovers,usec\n%d+%d,%llu,%ld,%.3f\n", cpus[0], cpus[1],
           (unsigned long long)poll_ns, 2 * rounds, (double)(now_ns() - start) / 1e3 / (2.0 * rounds));
    return 0;
}
