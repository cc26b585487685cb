/*
 * pipe_pingpong: the floors for two processes handing one CPU back and forth.
 *
 * pipe (default): a parent and its child bounce one byte over two pipes; every
 * hop is a blocking read, so each one costs a wake-up and a context switch
 * when both processes share a core.
 * yield (-y): they pass a turn through a shared-memory word and sched_yield()
 * while it is not theirs: the least any wait built on sched_yield (an MPI's
 * idle-yield, libvhpc_wait's shared mode) can cost per message on one core.
 * The caller pins it (e.g. `taskset -c 0`).
 * Output: CSV `test,size,iters,usec,MBps` with the half round trip in usec.
 */
#define _GNU_SOURCE
#include <errno.h>
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

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-y] [-n ROUND_TRIPS | -t SECONDS] [-h]\n"
            "  -y          hand over with sched_yield on a shared word, not over pipes\n"
            "  -n N        number of round trips (default 100000)\n"
            "  -t SECONDS  run for about this long instead of a fixed count\n"
            "CSV on stdout: pipe|yield,1,<round trips>,<half round trip usec>,0\n",
            prog);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "pipe_pingpong: %s: %s\n", what, strerror(errno));
    exit(1);
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
    if (turn) {
        pass_to(1);
        wait_for(0);
        return;
    }
    char c = 'x';
    if (write(out, &c, 1) != 1)
        die("write");
    if (read(in, &c, 1) != 1)
        die("read");
}

/* Child: echo every byte (hand every turn back) until the parent stops. */
static void echo(int in, int out)
{
    if (turn) {
        while (wait_for(1))
            pass_to(0);
        _exit(0);
    }
    char c;
    ssize_t n;
    while ((n = read(in, &c, 1)) == 1)
        if (write(out, &c, 1) != 1)
            _exit(1);
    _exit(n == 0 ? 0 : 1);
}

int main(int argc, char **argv)
{
    long count = 100000;
    double seconds = 0;
    char *end;
    int c;
    opterr = 0;
    int yield = 0;
    while ((c = getopt(argc, argv, "yn:t:h")) != -1) {
        switch (c) {
        case 'y':
            yield = 1;
            break;
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end != '\0' || count < 1)
                goto bad;
            break;
        case 't':
            seconds = strtod(optarg, &end);
            if (*end != '\0' || !(seconds > 0 && seconds <= 3600))
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

    int to_child[2], to_parent[2];
    if (pipe(to_child) || pipe(to_parent))
        die("pipe");
    if (yield) {
        turn = mmap(NULL, sizeof *turn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (turn == MAP_FAILED)
            die("mmap");
    }
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(to_child[1]);
        close(to_parent[0]);
        echo(to_child[0], to_parent[1]);
    }
    close(to_child[0]);
    close(to_parent[1]);

    for (int i = 0; i < WARMUP; i++)
        hop(to_child[1], to_parent[0]);
    long iters = 0;
    double start = now(), took;
    if (seconds > 0) {
        do {
            for (int i = 0; i < CHUNK; i++)
                hop(to_child[1], to_parent[0]);
            iters += CHUNK;
        } while ((took = now() - start) < seconds);
    } else {
        for (iters = 0; iters < count; iters++)
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
    printf("test,size,iters,usec,MBps\n");
    printf("%s,1,%ld,%.3f,0\n", turn ? "yield" : "pipe", iters, took * 1e6 / (2.0 * (double)iters));
    return 0;
bad:
    usage(stderr, argv[0]);
    return 2;
}
