/* adaptive's evidence: what a process can see about whether its CPU is shared.
 *
 *  - affinity: the CPU masks of all ranks on this node (exchanged once at
 *    MPI_Init) against this rank's current mask: more ranks than CPUs among
 *    the ranks whose masks overlap ours means they take turns on a CPU;
 *  - run-queue delay (/proc/thread-self/schedstat): this thread was runnable
 *    but kept waiting while another task ran on its CPU (in a freezer group,
 *    delay while our CPUs sat idle in /proc/stat is no such task: it counts as
 *    held off);
 *  - CFS bandwidth control: a cgroup quota below the CPUs we may use, or
 *    throttling events (nr_throttled) since the last sample;
 *  - steal time of our CPUs in /proc/stat: the hypervisor runs other vCPUs
 *    on our physical CPU;
 *  - held off, only in a cgroup v1 freezer group: run-queue delay while our
 *    CPUs sat idle, and time this thread was neither running, nor waiting to
 *    run, nor asleep in one of our waits or in a blocking call of an MPI that
 *    sleeps in them (Intel MPI's wait mode): the process was stopped (a time
 *    slicer's freezer). Outside a freezer group such time is the program's own
 *    (its sleeps, its I/O).
 * Affinity sharing and run-queue delay mean a runnable task waits on our CPU,
 * so sched_yield hands it over (SHARED). Quota, throttling, steal and being
 * held off mean the CPU is taken away by something a yield cannot reach
 * (TIMESHARED); a throttled task also shows run-queue delay, so they are
 * judged before it. Otherwise each rank has a CPU of its own and the MPI's own
 * busy-poll is best (OWN_CPU). */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int vw_mode_now = VW_MODE_SHARED; /* safe until the evidence says otherwise */
volatile int vw_native_now;
int vw_native_sleeps;
volatile unsigned vw_sample_gate;
static int mpi_yields; /* the MPI can be told to yield when idle */

enum { CLEAN_SAMPLES_FOR_OWN_CPU = 3 };
#define TIMESHARED_HOLD_MIN_NS 1000000000ull  /* 1 s */
#define TIMESHARED_HOLD_MAX_NS 32000000000ull /* 32 s */
/* Fractions of the sampling interval; below them: ordinary noise of a busy host. */
static const double RUN_DELAY_FRACTION = 0.10;
static const double STEAL_FRACTION = 0.10;
static const double HELD_OFF_FRACTION = 0.10;

static cpu_set_t *peer_masks;
static int n_peers;
static uint64_t next_sample_ns;
static int clean_streak;
static int freezable; /* in a freezer group (vw_in_freezer_group), from MPI_Init on */
static uint64_t first_sample_ns; /* for verbose messages */

static struct sample {
    uint64_t t_ns, steal, idle, total, nr_throttled, cpu_ns, delay_ns, slept_ns, native_idle_ns;
    const vw_thread *who; /* the thread whose schedstat and sleeps these are */
} last;

const char *vw_mode_name(vw_mode m) {
    static const char *names[] = {"own_cpu", "shared", "timeshared"};
    return names[m];
}

/* ---- readers ---------------------------------------------------------- */

/* Sum steal, idle (with iowait) and total jiffies of the CPUs in `mask`. */
static void read_cpu_times(const cpu_set_t *mask, uint64_t *steal, uint64_t *idle,
                           uint64_t *total) {
    *steal = *idle = *total = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        int cpu;
        unsigned long long v[8] = {0};
        if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9') continue;
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 9)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask)) continue;
        for (int i = 0; i < 8; i++) *total += v[i];
        *steal += v[7];
        *idle += v[3] + v[4];
    }
    fclose(f);
}

/* Directory of this process's cgroup for the cpu controller (v1 or v2). */
static int cpu_cgroup_dir(char *dir, size_t len) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *ctrl = strchr(line, ':');
        char *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path) continue;
        *path++ = 0, ctrl++;
        if (*ctrl == 0) { /* v2 unified */
            found = snprintf(dir, len, "/sys/fs/cgroup%s", path) < (int)len;
            continue;
        }
        char copy[256];
        snprintf(copy, sizeof copy, "%s", ctrl);
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
            if (strcmp(tok, "cpu") == 0) {
                found = snprintf(dir, len, "/sys/fs/cgroup/%s%s", ctrl, path) < (int)len;
                break;
            }
    }
    fclose(f);
    return found;
}

static int read_file(const char *dir, const char *name, char *buf, size_t len) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0;
}

/* CPUs' worth of quota (0 = no cap) and the throttling count of our cgroup. */
static void read_cfs(double *cap_cpus, uint64_t *nr_throttled) {
    char dir[1100], buf[512];
    *cap_cpus = 0, *nr_throttled = 0;
    if (!cpu_cgroup_dir(dir, sizeof dir)) return;
    long long quota = -1, period = 0;
    if (read_file(dir, "cpu.cfs_quota_us", buf, sizeof buf)) {
        quota = atoll(buf);
        if (read_file(dir, "cpu.cfs_period_us", buf, sizeof buf)) period = atoll(buf);
    } else if (read_file(dir, "cpu.max", buf, sizeof buf) && strncmp(buf, "max", 3) != 0) {
        sscanf(buf, "%lld %lld", &quota, &period);
    }
    if (quota > 0 && period > 0) *cap_cpus = (double)quota / (double)period;
    if (read_file(dir, "cpu.stat", buf, sizeof buf)) {
        char *p = strstr(buf, "nr_throttled ");
        if (p) *nr_throttled = strtoull(p + 13, NULL, 10);
    }
}

/* CPU time and run-queue delay of the calling thread, in ns. */
static void read_schedstat(uint64_t *cpu_ns, uint64_t *delay_ns) {
    unsigned long long cpu = 0, delay = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &cpu, &delay) != 2) cpu = delay = 0;
        fclose(f);
    }
    *cpu_ns = cpu, *delay_ns = delay;
}

static double fraction(uint64_t part, uint64_t whole) {
    return whole == 0 || part > whole ? (whole == 0 ? 0 : 1) : (double)part / (double)whole;
}

/* Ranks (us included) whose masks overlap ours, and the CPUs they have between them. */
static void affinity_sharing(const cpu_set_t *mine, int *sharers, int *cpus) {
    cpu_set_t uni = *mine;
    *sharers = n_peers ? 0 : 1;
    for (int i = 0; i < n_peers; i++) {
        cpu_set_t both;
        CPU_AND(&both, mine, &peer_masks[i]);
        if (CPU_COUNT(&both) == 0) continue;
        (*sharers)++;
        CPU_OR(&uni, &uni, &peer_masks[i]);
    }
    *cpus = CPU_COUNT(&uni);
}

/* ---- decision --------------------------------------------------------- */

/* Once adaptive sleeps instead of spinning, a time-shared CPU stops showing it:
 * the host runs the peer while we sleep, and nothing is held off any more. So the
 * evidence is kept for a while, then probed by letting the hold lapse; each time
 * it returns after a lapse it is kept twice as long (up to a limit). */
static uint64_t timeshared_until, timeshared_hold_ns = TIMESHARED_HOLD_MIN_NS;

static void hold_timeshared(uint64_t now) {
    if (timeshared_until != 0 && now >= timeshared_until) /* back after the hold: a probe failed */
        timeshared_hold_ns = timeshared_hold_ns * 2 > TIMESHARED_HOLD_MAX_NS
                                 ? TIMESHARED_HOLD_MAX_NS
                                 : timeshared_hold_ns * 2;
    timeshared_until = now + timeshared_hold_ns;
}

/* How often the fast path looks for a due sample (see vw_sample_gate): every call
 * while timeshared or while the evidence is young (fewer clean samples than own_cpu
 * needs), where one call may last a 30 ms slice; else every 8th. */
static unsigned sample_gate(vw_mode mode) {
    return mode == VW_MODE_TIMESHARED || clean_streak < CLEAN_SAMPLES_FOR_OWN_CPU ? 0 : 7;
}

/* Until the evidence is confirmed, samples come EARLY_SAMPLES times as often: a
 * job that starts time-sliced then busy-polls through a slice or two, not ten. */
enum { EARLY_SAMPLES = 4 };
static uint64_t sample_interval(void) {
    return clean_streak < CLEAN_SAMPLES_FOR_OWN_CPU && vw_mode_now == VW_MODE_OWN_CPU
               ? vw_cfg.sample_ns / EARLY_SAMPLES
               : vw_cfg.sample_ns;
}

static void take_sample(uint64_t now, int first) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return;
    vw_thread *self = vw_self();
    struct sample s = {
        .t_ns = now, .slept_ns = self->slept_ns, .native_idle_ns = self->native_idle_ns, .who = self};
    double cap = 0;
    read_cpu_times(&mine, &s.steal, &s.idle, &s.total);
    read_cfs(&cap, &s.nr_throttled);
    read_schedstat(&s.cpu_ns, &s.delay_ns);
    int sharers, cpus;
    affinity_sharing(&mine, &sharers, &cpus);

    if (first) first_sample_ns = now;
    uint64_t wall = first ? 0 : now - last.t_ns;
    /* Per-thread figures compare only with the same thread's last sample. */
    uint64_t thread_wall = last.who == self ? wall : 0;
    double steal = first ? 0 : fraction(s.steal - last.steal, s.total - last.total);
    double idle = first ? 0 : fraction(s.idle - last.idle, s.total - last.total);
    uint64_t raw_delay = s.delay_ns - last.delay_ns, delay = raw_delay, held_off_ns = 0;
    /* Held off, only in a freezer group, where a time slicer may stop a rank anywhere
     * (computing or waiting): waiting to run while our CPUs sat idle (a task frozen
     * while runnable counts its frozen time as run-queue delay, seen with the cgroup
     * v1 freezer), and the time neither running, nor waiting to run, nor asleep in
     * our waits or in the calls of an MPI that sleeps in them (whole: their CPU time
     * and delay too, so that the MPI's own sleeps never count; Intel MPI's wait mode
     * was taken for a time slicer). Elsewhere that time is the program's own (a
     * sleep, I/O: IMB-P2P sleeps 100 ms before each message size), and delay beside
     * an idle CPU of ours is a task queued behind another until the load balancer
     * moves it: a runnable task waits on our CPU (shared), not a stop. */
    if (freezable) {
        uint64_t idle_ns = (uint64_t)(idle * (double)thread_wall);
        delay -= delay < idle_ns ? delay : idle_ns;
        uint64_t explained = (s.cpu_ns - last.cpu_ns) + raw_delay +
                             (s.slept_ns - last.slept_ns) +
                             (s.native_idle_ns - last.native_idle_ns);
        held_off_ns = (raw_delay - delay) + (thread_wall > explained ? thread_wall - explained : 0);
    }
    double run_delay = fraction(delay, thread_wall);
    double held_off = fraction(held_off_ns, thread_wall);
    int throttled = !first && s.nr_throttled > last.nr_throttled;
    int capped = cap > 0 && cap < CPU_COUNT(&mine) - 0.01;
    last = s;

    /* Stopped from outside (held off, stolen): no yield of ours reaches the peer,
     * even one that shares our CPU. A quota instead throttles ranks that share a
     * CPU together, and between throttles they hand it over with yields. */
    int stopped = steal > STEAL_FRACTION || held_off > HELD_OFF_FRACTION;
    int quota = capped || throttled; /* always visible: needs no hold */
    if (stopped) hold_timeshared(now);
    int held = now < timeshared_until;

    /* A throttled task waits on its throttled run queue: that run-queue delay is
     * the quota's doing, not a task we could yield to, so the quota is judged first. */
    vw_mode mode = VW_MODE_OWN_CPU;
    if (stopped || held) mode = VW_MODE_TIMESHARED;
    else if (sharers > cpus) mode = VW_MODE_SHARED;
    else if (quota) mode = VW_MODE_TIMESHARED;
    else if (run_delay > RUN_DELAY_FRACTION) mode = VW_MODE_SHARED;
    clean_streak = mode == VW_MODE_OWN_CPU ? clean_streak + 1 : 0;
    if (mode == VW_MODE_OWN_CPU && !first && clean_streak < CLEAN_SAMPLES_FOR_OWN_CPU)
        mode = (vw_mode)vw_mode_now; /* clean, but not for long enough yet */

    if (vw_cfg.verbose && (first || mode != (vw_mode)vw_mode_now))
        fprintf(stderr,
                "vhpc_wait: rank=%d mode=%s at %.3f s (ranks sharing our CPUs=%d over %d "
                "CPUs, run-queue delay=%.0f%%, cap=%.2f CPUs, throttled=%d, steal=%.1f%%, "
                "held off=%.0f%%, our CPUs idle=%.0f%%)\n",
                vw_world_rank, vw_mode_name(mode), (double)(now - first_sample_ns) * 1e-9,
                sharers, cpus, 100 * run_delay, cap, throttled, 100 * steal, 100 * held_off,
                100 * idle);
    /* Under a hint-driven slicer every wait is the library's loop (vw_take_native),
     * which yields or parks by itself: the MPI's own idle-yield would only add a
     * sched_yield to every poll (MPI_Test), handing the CPU to a peer whose member
     * is not running, which wakes just to park again. Open MPI's one-CPU hinted
     * ping-pong took 7-18 us with it, 2.9-5.5 us without (docs/lab.md). */
    if (first || mode != (vw_mode)vw_mode_now)
        vw_mpi_yield_set(mode == VW_MODE_SHARED && !vw_hint_on);
    vw_mode_now = mode;
    vw_native_now = mode == VW_MODE_OWN_CPU || (mode == VW_MODE_SHARED && mpi_yields);
    vw_sample_gate = sample_gate(mode);
}

void vw_maybe_sample(uint64_t now) {
    uint64_t due = __atomic_load_n(&next_sample_ns, __ATOMIC_RELAXED);
    if (now < due) return;
    /* One thread samples; the others go on with the current mode. */
    if (!__atomic_compare_exchange_n(&next_sample_ns, &due, now + sample_interval(), 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    take_sample(vw_now_ns(), 0);
}

/* Exchange CPU masks among the ranks of this node, then take the first sample. */
void vw_evidence_init(void) {
    MPI_Comm node;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        cpu_set_t mine;
        CPU_ZERO(&mine);
        sched_getaffinity(0, sizeof mine, &mine);
        PMPI_Comm_size(node, &n_peers);
        peer_masks = calloc((size_t)n_peers, sizeof *peer_masks);
        MPI_Request req;
        /* Waited on with the safe mode set above: ranks may share a core already. */
        if (!peer_masks ||
            PMPI_Iallgather(&mine, sizeof mine, MPI_BYTE, peer_masks, sizeof mine, MPI_BYTE,
                            node, &req) != MPI_SUCCESS ||
            vw_wait_one(&req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            n_peers = 0;
        PMPI_Comm_free(&node);
    }
    mpi_yields = vw_mpi_yield_init();
    vw_native_sleeps = vw_mpi_waits_idle();
    freezable = vw_in_freezer_group();
    take_sample(vw_now_ns(), 1);
    next_sample_ns = vw_coarse_ns() + sample_interval();
}

__attribute__((destructor)) static void free_masks(void) { free(peer_masks); }
