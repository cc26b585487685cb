/* The job's doorbell: a rank asleep in a wait can be woken by a rank whose CPU is idle.
 *
 * A rank that sleeps in a wait (adaptive's sleep phase) stops driving its MPI's
 * progress: a message for it, or a protocol step a peer waits for (a rendezvous'
 * clear-to-send, a partitioned request's go-ahead, a one-sided lock grant), waits
 * until its timer fires, up to VHPC_SLEEP_MAX_US later. When ranks depend on each
 * other in a chain (a ring, a pipeline) every link may cost a whole sleep:
 * mpi4py's partitioned tests with 4 ranks on 2 CPUs spent 1 ms per wait so.
 *
 * With a doorbell (VHPC_DOORBELL: a file under /dev/shm that `vhpc run` names for
 * each job; the ranks of a node share it), a sleeping rank waits on its futex word
 * in it, with the same timeout, instead of a timer alone; and a rank whose yields
 * switch to nothing rings every sleeping rank of the node, at most once every
 * RING_NS. A yield that switches to nothing shows that its CPU has no other task to
 * run, so what the woken ranks then do costs that CPU no one's time; the woken
 * ranks poll once (moving their MPI's protocol on) and sleep again if nothing came.
 * Without VHPC_DOORBELL a sleep is a plain nanosleep, as before.
 *
 * Layout: a 64-byte header (magic, version, sleepers: ranks asleep now, top: one
 * past the highest world rank attached), then one 64-byte slot per world rank
 * below SLOTS (word: the futex, asleep). Every rank opens the file with O_CREAT
 * and sizes it (ftruncate to the same size changes nothing for the others), so no
 * rank has to be first; once all have, they remove it (vw_bell_init). */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BELL_MAGIC 0x4c4c4542u /* "BELL" */
#define BELL_VERSION 1u
#define SLOTS 1024u
#define BELL_BYTES (64u * (SLOTS + 1u))

typedef struct {
    uint32_t magic, version, sleepers, top;
} bell_header;
typedef struct {
    uint32_t word, asleep; /* asleep: this rank's threads asleep on word */
    uint32_t pad[14];      /* a cache line each: sleepers do not share one */
} bell_slot;

static bell_header *hdr;
static bell_slot *slots, *mine;

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    /* Shared between processes: not FUTEX_PRIVATE_FLAG. */
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static void bell_off(const char *path, const char *why) {
    fprintf(stderr, "vhpc_wait: VHPC_DOORBELL='%s': %s; sleeping ranks wait for their timers\n",
            path, why);
}

static void attach(const char *path, int rank) {
    if ((unsigned)rank >= SLOTS) return; /* ranks beyond the page sleep on timers alone */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        bell_off(path, "cannot open it");
        return;
    }
    void *p = ftruncate(fd, BELL_BYTES) == 0
                  ? mmap(NULL, BELL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) {
        bell_off(path, "cannot map it");
        return;
    }
    bell_header *h = p;
    /* Whichever rank comes first stamps the page; each field on its own (a failed
     * compare-and-swap writes the value it found into `expected`). */
    uint32_t expected = 0;
    __atomic_compare_exchange_n(&h->magic, &expected, BELL_MAGIC, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    expected = 0;
    __atomic_compare_exchange_n(&h->version, &expected, BELL_VERSION, 0, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    if (h->magic != BELL_MAGIC || h->version != BELL_VERSION) {
        munmap(p, BELL_BYTES);
        bell_off(path, "it is not a doorbell of this version");
        return;
    }
    uint32_t top = __atomic_load_n(&h->top, __ATOMIC_RELAXED);
    while (top < (uint32_t)rank + 1 &&
           !__atomic_compare_exchange_n(&h->top, &top, (uint32_t)rank + 1, 1, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
        ;
    slots = (bell_slot *)((char *)p + 64);
    mine = &slots[rank];
    hdr = h;
}

/* Every rank attaches, then waits for all the others to have done so and removes the
 * file: nothing is left under /dev/shm however the job ends, and the ranks keep their
 * mappings. Collective over MPI_COMM_WORLD whenever VHPC_DOORBELL is set, which the
 * launcher sets for every rank alike. */
void vw_bell_init(int rank) {
    const char *path = getenv("VHPC_DOORBELL");
    if (!path || !*path || rank < 0) return;
    attach(path, rank);
    MPI_Request req;
    if (PMPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS &&
        vw_wait_one(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS)
        unlink(path);
}

int vw_bell_sleep(uint64_t ns) {
    if (!mine) return 0;
    uint32_t w = __atomic_load_n(&mine->word, __ATOMIC_ACQUIRE);
    __atomic_fetch_add(&mine->asleep, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&hdr->sleepers, 1, __ATOMIC_SEQ_CST);
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    futex(&mine->word, FUTEX_WAIT, w, &ts); /* a ring since `w` was read returns at once */
    __atomic_fetch_sub(&hdr->sleepers, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&mine->asleep, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&mine->word, __ATOMIC_ACQUIRE) != w ? 2 : 1;
}

unsigned vw_bell_ring(void) {
    if (!hdr || !__atomic_load_n(&hdr->sleepers, __ATOMIC_SEQ_CST)) return 0;
    uint32_t top = __atomic_load_n(&hdr->top, __ATOMIC_RELAXED);
    unsigned rung = 0;
    for (uint32_t r = 0; r < top && r < SLOTS; r++) {
        bell_slot *s = &slots[r];
        if (s == mine || !__atomic_load_n(&s->asleep, __ATOMIC_SEQ_CST)) continue;
        __atomic_fetch_add(&s->word, 1, __ATOMIC_RELEASE);
        futex(&s->word, FUTEX_WAKE, INT32_MAX, NULL);
        rung++;
    }
    return rung;
}
