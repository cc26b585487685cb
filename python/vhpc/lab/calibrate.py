"""`vhpc calibrate`: measure this host with microbenchmarks and write a host profile.

Four groups of figures (docs/calibrate.md says what each is and how it is taken):
the OS (wake-ups, yields, sleeps, the scheduler's slice, HZ), the lab's time
slicer (host/timeslice.py driven through its real code path), each MPI (latency
by size over shared memory, over TCP loop-back, on one shared core under
libvhpc_wait's `yield`, and under time slicing; 1 MiB bandwidth) and the compute
rate of every bench kernel. Every probe runs `reps` times, all probes of a round
in a seeded shuffled order; the profile keeps medians with min and max
(profile.py). Nothing is fitted: the simulator's parameters are derived from
these raw figures elsewhere.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from vhpc import mpi, paths, provenance, sim
from vhpc import runtime as rt
from vhpc.host import netns, placement, timeslice
from vhpc.host.load import BUSY_LOAD, cpu_times, steal_percent
from vhpc.lab import LabError, hop, probes
from vhpc.host import profile as host_profile
from vhpc.host.profile import FORMAT, Inline, scalar, series, skipped, write_profile

SEED = 20240612
SLEEP_US = (1, 10, 50, 100, 1000)
SLACK_NS = 1000
LAT_MAX = 1 << 20  # pingpong latency from 1 B, doubling, up to this
BW_SIZE = 1 << 20
#: Both ranks of a pair exchange this many bytes at once (bench/pingpong -T exch):
#: what a channel costs when its two directions carry a message together.
EXCH_SIZE = 8
TIMESLICED_SIZE = 8
#: The job key's last part, and `--only`'s name, of the local-send probe.
LOCAL_SEND = "local-send"
#: What `--only` can measure on its own and add to an existing profile.
SLICER = "slicer"
#: The channel probe: pingpong between two domains that are network namespaces.
CHANNELS = "channels"
ONLY = (LOCAL_SEND, SLICER, CHANNELS)
#: Profile section (measured.mpi.<mpi>.<name>) per lab channel (host/domains.py):
#: TCP over the bridge between namespaces, shared memory between namespaces.
CHANNEL_SECTIONS = {"bridge": "net", "netns_shm": "shm"}
#: Kernels and their variants: {program: {variant: args}}; S and W are problem classes.
KERNELS: dict[str, dict[str, list[str]]] = {
    **{p: {c: ["-c", c] for c in ("S", "W")}
       for p in ("npb_is", "npb_ssor", "npb_ep", "npb_cg", "lu")},
    "beff": {"default": ["-M", "4096", "-t", "0.02"]},  # as experiments/s0-beff.toml
    "stream": {"default": []},
}
#: Environment selecting TCP over loop-back only, per MPI (MPICH: its UCX device).
TCP_ENV = {
    "mpich": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"},
    "openmpi": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "tcp,self",
                "OMPI_MCA_btl_tcp_if_include": "lo"},
}
#: Environment making each MPI say which transport it picked.
VERBOSE_ENV = {"mpich": {"UCX_LOG_LEVEL": "info"},
               "openmpi": {"OMPI_MCA_btl_base_verbose": "100"}}
TRANSPORT_CHECK = {
    "mpich": "UCX_LOG_LEVEL=info: the tag lanes of the endpoint to the peer (ep_cfg)",
    "openmpi": "btl_base_verbose=100: `Using <btl> btl for send to` the peer",
}


class CalibrateError(LabError):
    """Calibration cannot start (busy machine, MPI missing, build failure)."""


@dataclass(frozen=True)
class Settings:
    """How long each probe runs: the default run, or --quick (1 rep, short, class S only)."""

    reps: int
    quick: bool
    pipe_s: float  # pipe_pingpong and os_probe yield
    sleep_count: int  # nanosleeps per requested duration
    spin_s: float  # two busy loops on one CPU
    slicer_round_trips: int  # pipe round trips between two time-sliced domains
    slicer_spin_s: float  # busy loops in two time-sliced domains (30 ms slices)
    pingpong_s: float  # pingpong -t per message size
    timesliced_s: float  # pingpong -t under time slicing
    classes: tuple[str, ...]
    timeout_s: float


#: Ten repetitions: on a host that moves between two states (vhpc.lab.hop) the rarer
#: state then gets its own figures (on the AMD guest here 5 gave the far state 49
#: probe runs and several figures none, 10 gave it 131 and one).
DEFAULT = Settings(reps=10, quick=False, pipe_s=0.2, sleep_count=100, spin_s=1.0,
                   slicer_round_trips=300, slicer_spin_s=1.5, pingpong_s=0.05,
                   timesliced_s=0.2, classes=("S", "W"), timeout_s=120.0)
QUICK = Settings(reps=1, quick=True, pipe_s=0.05, sleep_count=20, spin_s=0.3,
                 slicer_round_trips=50, slicer_spin_s=0.35, pingpong_s=0.005,
                 timesliced_s=0.05, classes=("S",), timeout_s=60.0)


@dataclass
class Job:
    """One probe, repeated once per round: `measure()` returns its figures."""

    key: tuple[str, ...]
    label: str
    measure: Callable[[], dict[str, float]]
    units: dict[str, str] = field(default_factory=dict)  # kernels: unit per figure


@dataclass
class Results:
    """Samples per job key, failures per job key, and why unplanned keys were skipped."""

    samples: dict[tuple[str, ...], list[dict[str, float]]] = field(default_factory=dict)
    problems: dict[tuple[str, ...], list[str]] = field(default_factory=dict)
    reasons: dict[tuple[str, ...], str] = field(default_factory=dict)

    def why_missing(self, key: tuple[str, ...]) -> str:
        if key in self.reasons:
            return self.reasons[key]
        failures = sorted(set(self.problems.get(key, [])))
        return "every run failed: " + "; ".join(failures)[:300] if failures else "not measured"

    def scalar(self, key: tuple[str, ...], name: str, unit: str) -> Inline:
        found = [s[name] for s in self.samples.get(key, [])]
        return scalar(found, unit) if found else skipped(self.why_missing(key))

    def series(self, key: tuple[str, ...], names: list[str], x: list[int], x_unit: str,
               unit: str) -> Inline:
        runs = [[s[n] for n in names] for s in self.samples.get(key, [])
                if all(n in s for n in names)]
        return series(x, x_unit, runs, unit) if runs else skipped(self.why_missing(key))


# ---------------------------------------------------------------- the plan


def default_out() -> Path:
    """profiles/<cpu model>-<n>cpu.toml in the repository, e.g. profiles/amd-epyc-2cpu.toml."""
    return paths.REPO / "profiles" / f"{host_slug()}.toml"


def host_slug() -> str:
    """The CPU model without trademarks and filler words, e.g. amd-epyc-2cpu. A
    name without a model number keeps its clock (intel-xeon-2-50ghz-2cpu): a
    hypervisor that shows only the family name leaves the clock to tell two
    generations apart."""
    model = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b", " ", provenance.cpu_model().lower())
    name, _, clock = model.partition("@")
    model = name if re.search(r"\d", name) else f"{name} {clock}"
    slug = re.sub(r"[^a-z0-9]+", "-", model).strip("-") or "host"
    return f"{slug}-{len(placement.allowed_cpus())}cpu"


def two_cpus() -> tuple[int, int | None]:
    cpus = placement.allowed_cpus()
    return cpus[0], (cpus[1] if len(cpus) > 1 else None)


def os_jobs(s: Settings, res: Results) -> list[Job]:
    c0, c1 = two_cpus()
    t = s.timeout_s
    jobs = [
        Job(("os", "wakeup_same_cpu"), "pipe wake-up, one CPU",
            lambda: probes.pipe_hops((c0, c0), seconds=s.pipe_s, timeout=t)),
        Job(("os", "yield_handover"), "sched_yield hand-over, one CPU",
            lambda: probes.pipe_hops((c0, c0), use_yield=True, seconds=s.pipe_s, timeout=t)),
        Job(("os", "yield_alone"), "sched_yield alone",
            lambda: {"ns": probes.yield_alone(c0, s.pipe_s, timeout=t)}),
        Job(("os", "sleep"), "nanosleep, default timer slack",
            lambda: flat_sleeps(probes.sleeps(c0, SLEEP_US, s.sleep_count, timeout=t))),
        Job(("os", "sleep_slack_1us"), "nanosleep, 1 µs timer slack",
            lambda: flat_sleeps(probes.sleeps(c0, SLEEP_US, s.sleep_count, SLACK_NS, timeout=t))),
        Job(("os", "sched"), "two busy loops on one CPU",
            lambda: probes.turn_figures(probes.spin_runs((c0, c0), s.spin_s, timeout=t),
                                        "os_probe spin")),
    ]
    if c1 is None:
        res.reasons[("os", "wakeup_cross_cpu")] = "only one CPU allowed here"
    else:
        jobs.insert(1, Job(("os", "wakeup_cross_cpu"), "pipe wake-up, two CPUs",
                           lambda: probes.pipe_hops((c0, c1), seconds=s.pipe_s, timeout=t)))
    return jobs


def flat_sleeps(found: dict) -> dict[str, float]:
    out = {f"median_{us}": ns for us, ns in found["median"].items()}
    out.update({f"p99_{us}": ns for us, ns in found["p99"].items()})
    out["slack_ns"] = found["slack_ns"]
    return out


SLICER_LAYOUTS = ("two_cpus", "one_cpu")
#: Tasks per domain of the second blocked-switch probe (the first has one): the
#: watchers read each task of a domain to see it idle, and an MPI rank has helpers.
SLICER_TASKS = host_profile.SLICER_TASKS


def slicer_cpus(layout: str) -> tuple[int, int] | None:
    """two_cpus: domain r on CPU r as the lab's `timesliced` placement; one_cpu: both
    on the first CPU, as two 1-vCPU domains pinned to one core (experiments/s0-beff)."""
    c0, c1 = two_cpus()
    if layout == "one_cpu":
        return c0, c0
    return None if c1 is None else (c0, c1)


def in_domains(measure: Callable[[tuple[Path, Path]], dict[str, float]]) -> dict[str, float]:
    """Run `measure(tasks files)` with two domains time-sliced by the lab's own
    Slicer (host.placement.timesliced_domains: 30 ms slices, work-conserving).
    The figures get `idle_switch`: the median, over the slicer's own log of its
    switches, from deciding to switch to the next domain thawed (the freezer's
    work, without the time it took to notice)."""
    log: list[tuple[int, int]] = []
    with placement.timesliced_domains(2, switch_log=log) as parent:
        found = measure((parent / "rank0" / "tasks", parent / "rank1" / "tasks"))
    gaps = [thawed - decided for decided, thawed in log if thawed >= decided]
    if gaps:
        found["idle_switch"] = float(statistics.median(gaps))
    return found


def slicer_jobs(s: Settings, res: Results) -> list[Job]:
    ok, why = placement.freezer_available()
    if not ok:
        res.reasons[("slicer",)] = why
        return []
    jobs = []
    t = s.timeout_s
    for layout in SLICER_LAYOUTS:
        cpus = slicer_cpus(layout)
        if cpus is None:
            res.reasons[("slicer", layout)] = "only one CPU allowed here"
            continue
        jobs += [
            Job(("slicer", layout, "blocked"), f"time slicer, pipe between domains ({layout})",
                lambda cpus=cpus: in_domains(lambda tasks: probes.pipe_hops(
                    cpus, count=s.slicer_round_trips, tasks=tasks, timeout=t))),
            Job(("slicer", layout, "blocked_tasks"),
                f"time slicer, pipe between domains of {SLICER_TASKS} tasks ({layout})",
                lambda cpus=cpus: in_domains(lambda tasks: probes.pipe_hops(
                    cpus, count=s.slicer_round_trips, tasks=tasks, threads=SLICER_TASKS - 1,
                    timeout=t))),
            Job(("slicer", layout, "forced"), f"time slicer, busy domains ({layout})",
                lambda cpus=cpus: in_domains(lambda tasks: probes.turn_figures(
                    probes.spin_runs(cpus, s.slicer_spin_s, tasks=tasks, timeout=t),
                    "os_probe spin in time-sliced domains"))),
        ]
    return jobs


@dataclass(frozen=True)
class Channel:
    """How the two ranks of a pingpong talk: placement, wait policy, transport env."""

    name: str
    place: placement.Placement
    policy: str
    launcher: dict[str, str]


def channels(impl: mpi.MpiImpl, res: Results, lib_problem: str | None) -> list[Channel]:
    found = [Channel("shm", placement.spread(2), "default", {})]
    tcp, why = tcp_env(impl)
    if tcp is None:
        res.reasons[("mpi", impl.name, "tcp")] = why
    else:
        found.append(Channel("tcp", placement.spread(2), "default", tcp))
    for name, place, policy in (("one_core_yield", placement.shared_core(2), "yield"),
                                ("timesliced_adaptive", placement.timesliced(2), "adaptive")):
        ok, why = place.available()
        if lib_problem is not None:
            res.reasons[("mpi", impl.name, name)] = lib_problem
        elif not ok:
            res.reasons[("mpi", impl.name, name)] = f"{place.label}: {why}"
        else:
            found.append(Channel(name, place, policy, {}))
    return found


def mpich_device() -> str:
    try:
        out = subprocess.run(["mpichversion"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"MPICH Device:\s*(\S+)", out)
    return m.group(1) if m else "unknown"


def tcp_env(impl: mpi.MpiImpl) -> tuple[dict[str, str] | None, str]:
    """The environment restricting `impl` to TCP over loop-back, or None and why."""
    if impl.name == "mpich" and "ucx" not in (device := mpich_device()):
        return None, f"MPICH device {device}: vhpc knows how to force TCP only with ch4:ucx"
    return TCP_ENV[impl.name], ""


def mpi_jobs(impl: mpi.MpiImpl, chans: list[Channel], s: Settings) -> list[Job]:
    t = s.timeout_s
    sweep = ["-T", "lat", "-m", "1", "-M", str(LAT_MAX), "-t", str(s.pingpong_s)]
    jobs = []
    for ch in chans:
        env, lib = rt.policy_env(impl.name, ch.policy)

        def ping(args, last, ch=ch, env=env, lib=lib):
            return lambda: probes.pingpong(impl, ch.place, args, last, env=env,
                                           launcher=ch.launcher, preload=lib, timeout=t)

        key = ("mpi", impl.name, ch.name)
        if ch.name == "timesliced_adaptive":
            args = ["-T", "lat", "-s", str(TIMESLICED_SIZE), "-t", str(s.timesliced_s)]
            jobs.append(Job((*key, "lat"), f"{impl.name} {ch.name} 8 B",
                            ping(args, ("lat", TIMESLICED_SIZE))))
            continue
        jobs.append(Job((*key, "lat"), f"{impl.name} {ch.name} latency by size",
                        ping(sweep, ("lat", LAT_MAX))))
        if ch.name in ("shm", "tcp"):
            jobs.append(Job((*key, "bw"), f"{impl.name} {ch.name} 1 MiB bandwidth",
                            ping(bw_args(s), ("fresh", BW_SIZE))))
            jobs.append(Job((*key, "exch"), f"{impl.name} {ch.name} {EXCH_SIZE} B exchange",
                            ping(exch_args(s), ("exch", EXCH_SIZE))))
    return jobs + local_send_jobs(impl, s) + threads_jobs(impl, s)


def bw_args(s: Settings) -> list[str]:
    """bench/pingpong's BW_SIZE streams (one way, both ways) and its ping-pong of data
    written just before each send (`fresh`: what an application's computed data cost
    a receiver on the other CPU, beyond `lat`'s buffer that stays in both caches)."""
    return ["-T", "bw,bibw,fresh", "-s", str(BW_SIZE), "-t", str(2 * s.pingpong_s)]


def bw_figures(res: Results, key: tuple[str, ...]) -> dict[str, Inline]:
    """What the `bw_args` job of a channel measured: `bw`, `bibw` and `fresh`."""
    job = (*key, "bw")
    return {"bw": res.scalar(job, f"bw_{BW_SIZE}", "MB/s"),
            "bibw": res.scalar(job, f"bibw_{BW_SIZE}", "MB/s"),
            "fresh": res.scalar(job, f"fresh_{BW_SIZE}", "ns")}


def exch_args(s: Settings) -> list[str]:
    """bench/pingpong's exchange: both ranks send and receive EXCH_SIZE bytes at once."""
    return ["-T", "exch", "-s", str(EXCH_SIZE), "-t", str(s.pingpong_s)]


def threads_jobs(impl: mpi.MpiImpl, s: Settings) -> list[Job]:
    """bench/mpi_threads: the threads of a rank (its own and the MPI's helpers)."""
    return [Job(("mpi", impl.name, "threads"), f"{impl.name} threads per rank",
                kernel_measure(impl, "mpi_threads", [], {}, s.timeout_s, ranks=2))]


def local_send_jobs(impl: mpi.MpiImpl, s: Settings) -> list[Job]:
    """bench/send_local between two ranks on their own cores: the largest MPI_Send and
    MPI_Isend that complete while the receiver stays outside MPI (the simulator's
    `mpi.local_send_limit`, python/vhpc/sim/profile.py)."""
    args = ["-r", "1"] if s.quick else []
    return [Job(("mpi", impl.name, LOCAL_SEND), f"{impl.name} sends that complete locally",
                lambda: probes.send_local(impl, placement.spread(2), args, timeout=s.timeout_s))]


def channel_jobs(impl: mpi.MpiImpl, s: Settings, res: Results | None = None) -> list[Job]:
    """bench/pingpong between two domains that are network namespaces on a bridge, one
    rank each on its own CPU, per lab channel: latency by size and 1 MiB bandwidth
    (the simulator's `mpi.bridge` and `mpi.ivshmem`, python/vhpc/sim/profile.py).
    Without namespaces or a way to force the MPI's transport: none, and the reason."""
    res = res if res is not None else Results()
    c0, c1 = two_cpus()
    ok, why = netns.available()
    t = s.timeout_s
    jobs = []
    for section, channel in CHANNEL_SECTIONS.items():
        key = ("mpi", impl.name, section)
        env, why_env = impl.channel_env(channel, netns.DEVICE)
        if c1 is None or not ok or env is None:
            res.reasons[key] = ("only one CPU allowed here" if c1 is None
                                else why if not ok else why_env)
            continue
        sweep = ["-T", "lat", "-m", "1", "-M", str(LAT_MAX), "-t", str(s.pingpong_s)]

        def ping(args, last, channel=channel):
            return lambda: probes.channel_pingpong(impl, channel, (c0, c1), args, last,
                                                   timeout=t)
        local = ["-r", "1"] if s.quick else []
        jobs += [Job((*key, "lat"), f"{impl.name} {section} latency by size",
                     ping(sweep, ("lat", LAT_MAX))),
                 Job((*key, "bw"), f"{impl.name} {section} 1 MiB bandwidth",
                     ping(bw_args(s), ("fresh", BW_SIZE))),
                 Job((*key, "exch"), f"{impl.name} {section} {EXCH_SIZE} B exchange",
                     ping(exch_args(s), ("exch", EXCH_SIZE))),
                 Job((*key, LOCAL_SEND), f"{impl.name} {section} sends that complete locally",
                     lambda channel=channel: probes.channel_send_local(
                         impl, channel, (c0, c1), local, timeout=t))]
    return jobs


def channel_figures(impl: mpi.MpiImpl, res: Results) -> dict[str, Any]:
    """measured.mpi.<mpi>.bridge and .netns_shm: what `channel_jobs` measured."""
    found: dict[str, Any] = {}
    c0, c1 = two_cpus()
    for section, channel in CHANNEL_SECTIONS.items():
        key = ("mpi", impl.name, section)
        if key in res.reasons:
            found[section] = {"skipped": res.reasons[key]}
            continue
        env, _ = impl.channel_env(channel, netns.DEVICE)
        sizes = lat_sizes()
        lat = (*key, "lat")
        found[section] = {
            "placement": f"two domains, each a network namespace on a bridge (host/netns.py), "
                         f"a rank each, on CPUs {c0} and {c1}",
            "policy": "default",
            "channel": channel,
            "env": Inline(env or {}),
            "lat": res.series(lat, [f"lat_{n}" for n in sizes], sizes, "B", "ns"),
            **bw_figures(res, key),
            "exch": res.scalar((*key, "exch"), f"exch_{EXCH_SIZE}", "ns"),
            # per run of the latency sweep: megabytes over `net`, nothing over `shm`
            "bridge_bytes": res.scalar(lat, "bridge_bytes", "B"),
            # the transport's own: over TCP an eager send is done once written
            "local_send_max": res.scalar((*key, LOCAL_SEND), "send", "B"),
            "local_isend_max": res.scalar((*key, LOCAL_SEND), "isend", "B"),
        }
    return found


def kernel_jobs(impl: mpi.MpiImpl, s: Settings) -> list[Job]:
    jobs = []
    for program, variants in KERNELS.items():
        for variant, args in variants.items():
            if variant in ("S", "W", "A") and variant not in s.classes:
                continue
            units: dict[str, str] = {}
            jobs.append(Job(("kernels", program, variant),
                            f"{program} {' '.join(args)}".strip(),
                            kernel_measure(impl, program, args, units, s.timeout_s), units))
    return jobs


#: The kernels whose rate `vhpc lab predict` reads (its NPB-like ones), also run as
#: two copies at once, one on each CPU: a job's ranks on two CPUs compute side by
#: side, and what one costs the other (a shared cache, memory, the host's placement
#: of the two vCPUs) is the host's, per state.
PAIRED = ("npb_is", "npb_ssor", "npb_ep")
#: Job key of a paired kernel: (PAIR, program, variant).
PAIR = "kernel_pairs"


def kernel_pair_jobs(impl: mpi.MpiImpl, s: Settings) -> list[Job]:
    c0, c1 = two_cpus()
    if c1 is None:
        return []
    return [Job((PAIR, program, variant), f"{program} {' '.join(args)} (a copy on each CPU)",
                kernel_pair_measure(impl, program, args, (c0, c1), s.timeout_s))
            for program in PAIRED for variant, args in KERNELS[program].items()
            if variant in s.classes]


def kernel_pair_measure(impl: mpi.MpiImpl, program: str, args: list[str],
                        cpus: tuple[int, int], timeout: float) -> Callable[[], dict[str, float]]:
    def measure() -> dict[str, float]:
        # A job's ranks in lock step wait for the slower one.
        times = [found["time"][0] for found in probes.kernel_pair(impl, program, args, cpus,
                                                                  timeout=timeout)]
        return {"time": max(times)}
    return measure


def kernel_measure(impl: mpi.MpiImpl, program: str, args: list[str], units: dict[str, str],
                   timeout: float, ranks: int = 1) -> Callable[[], dict[str, float]]:
    def measure() -> dict[str, float]:
        found = {k: vu for k, vu in probes.kernel(impl, program, args, ranks,
                                                  timeout=timeout).items()
                 if is_work_figure(vu[1])}
        units.update({k: u for k, (_, u) in found.items()})
        return {k: v for k, (v, _) in found.items()}
    return measure


def is_work_figure(unit: str) -> bool:
    """Times, rates and work counts; not the dimensionless check values (residuals,
    sums such as npb_ep's negative sx, unit "1") nor `verified`."""
    return unit in ("s", "us", "count") or unit.endswith("/s")


# ---------------------------------------------------------------- running


def check_quiet(force: bool) -> float:
    load = os.getloadavg()[0]
    if load >= BUSY_LOAD and not force:
        raise CalibrateError(
            f"the 1-minute load average is {load:.2f} (≥ {BUSY_LOAD}): other work would "
            "distort every figure of the profile. Wait for a quiet machine, or pass --force "
            "to measure anyway (the load is recorded in the profile)")
    return load


def select_mpis(names: tuple[str, ...]) -> tuple[list[mpi.MpiImpl], dict[str, str]]:
    """The MPIs to measure and, for every other MPI vhpc knows, why not."""
    if names:
        try:
            chosen = [mpi.find(n) for n in dict.fromkeys(names)]
        except mpi.MpiNotFound as exc:
            raise CalibrateError(str(exc)) from exc
    else:
        chosen = mpi.available()
    others = {}
    for name, impl in mpi.MPIS.items():
        if impl in chosen:
            continue
        others[name] = ("not installed here" if not impl.available()
                        else "not asked for (--mpi " + " --mpi ".join(names) + ")")
    return chosen, others


def build_bench() -> None:
    cmd = ["make", "-s", "-C", str(paths.REPO / "bench"), f"BUILD={paths.build_dir()}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CalibrateError(f"`{' '.join(cmd)}` failed:\n{proc.stdout}{proc.stderr}")


def build_library(impls: list[mpi.MpiImpl]) -> dict[str, str]:
    """Build libvhpc_wait for each MPI (a no-op when up to date): {mpi: why it failed}."""
    failed = {}
    for impl in impls:
        try:
            rt.build([impl.name])
        except rt.Error as exc:
            failed[impl.name] = f"libvhpc_wait for {impl.name} could not be built: {exc.message}"
    return failed


def command_line(mpis: tuple[str, ...], out: Path | None, reps: int | None, quick: bool,
                 force: bool, only: str | None = None) -> str:
    parts = ["vhpc", "calibrate"]
    for name in mpis:
        parts += ["--mpi", name]
    if out is not None:
        parts += ["--out", str(out)]
    if reps is not None:
        parts += ["--reps", str(reps)]
    if only is not None:
        parts += ["--only", only]
    parts += ["--quick"] * quick + ["--force"] * force
    return shlex.join(parts)


def run(mpis: tuple[str, ...] = (), out: Path | None = None, reps: int | None = None,
        quick: bool = False, force: bool = False, console: Console | None = None,
        only: str | None = None) -> Path:
    """Measure this host and write its profile to `out` (default: default_out()).
    With `only` (one of ONLY), measure just that part and add its figures to the
    existing profile `out` (see add_part)."""
    console = console or Console(stderr=True)
    command = command_line(mpis, out, reps, quick, force, only)
    settings = QUICK if quick else DEFAULT
    if reps is not None:
        settings = dataclasses.replace(settings, reps=reps)
    out = out or default_out()
    if only is not None:
        return add_part(only, mpis, out, settings, command, force, console)
    load_before = check_quiet(force)
    impls, not_measured = select_mpis(mpis)
    with console.status("building bench/ and libvhpc_wait…"):
        build_bench()
        lib_failed = build_library(impls)

    started, cpu_before, jiffies_before = time.monotonic(), cpu_times(), probes.jiffies()
    res = Results()
    jobs = os_jobs(settings, res) + slicer_jobs(settings, res)
    chans: dict[str, list[Channel]] = {}
    for impl in impls:
        chans[impl.name] = channels(impl, res, lib_failed.get(impl.name))
        jobs += mpi_jobs(impl, chans[impl.name], settings) + channel_jobs(impl, settings, res)
    if impls:
        jobs += kernel_jobs(impls[0], settings) + kernel_pair_jobs(impls[0], settings)
    transports = measure(jobs, impls, chans, settings, res, console)
    duration = time.monotonic() - started
    jiffies_after = probes.jiffies()
    hz_measured = (None if jiffies_before is None or jiffies_after is None
                   else (jiffies_after - jiffies_before) / duration)

    profile = {
        "profile": profile_header(out, settings),
        "provenance": provenance_of(command, impls, settings, load_before, cpu_before, duration),
        "measured": {
            "os": os_section(res, hz_measured),
            "slicer": slicer_section(res),
            "mpi": {**{impl.name: mpi_section(impl, chans[impl.name], transports, res)
                       for impl in impls},
                    **{name: {"skipped": why} for name, why in not_measured.items()}},
            "kernels": kernels_section(impls, jobs, res),
        },
    }
    profile["measured"]["os"].update(hop_figures_of(res))
    if (states := states_section(impls, chans, transports, res)) is not None:
        profile["measured"]["states"] = states
    write_profile(out, profile)
    console.print(summary_table(profile, f"vhpc calibrate — {settings.reps} rep"
                                f"{'s' if settings.reps > 1 else ''}, {duration / 60:.1f} min"))
    for line in states_summary(profile):
        console.print(line, highlight=False)
    console.print(f"wrote {out}")
    return out


def states_summary(profile: dict[str, Any]) -> list[str]:
    """What the run says of the host's states: its probe runs per state and, per
    MPI and state, the message figures no probe measured in that state (which
    `vhpc lab predict` then reads from every run), with the remedy."""
    states = profile["measured"].get("states")
    if not states:
        return []
    lines = ["the host was in two states: " + ", ".join(
        f"{name} {states[name]['hop']['median']:g} ns ({states[name]['hop']['n']} probe runs)"
        for name in hop.NAMES)]
    gaps = [f"{mpi} {name}: {', '.join(missing)}" for name in hop.NAMES
            for mpi in profile["measured"]["mpi"]
            if (missing := sim.profile.borrowed(profile, name, mpi))]
    if gaps:
        lines.append("not measured in one state (every run's figure stands in; more --reps "
                     "fill them): " + "; ".join(gaps))
    return lines


def add_part(only: str, mpis: tuple[str, ...], out: Path, s: Settings, command: str,
             force: bool, console: Console) -> Path:
    """Measure one part of a calibration (`only`, one of ONLY) and write its figures into
    the existing profile `out`, for each MPI measured (default: every installed MPI the
    profile measured), leaving every other figure as it is. The profile's provenance
    gets an entry in `additions`: when, by which command and revision, which keys, on
    which CPU, and the load; its `date` and `command` stay those of the original
    calibration."""
    if only not in ONLY:
        raise CalibrateError(f"--only {only!r}: can be {', '.join(ONLY)}")
    try:
        profile = host_profile.load_profile(out)
    except host_profile.ProfileError as exc:
        raise CalibrateError(f"--only {only} adds to an existing profile: {exc.message}") from exc
    if profile["profile"].get("kind", "measured") != "measured":
        raise CalibrateError(f"{out}: a published profile is not measured here")
    load_before = check_quiet(force)
    with console.status("building bench/…"):
        build_bench()
    started = time.monotonic()
    if only == SLICER:
        added = add_slicer(profile, mpis, out, s, console)
    elif only == CHANNELS:
        failed: Results = Results()
        added = add_mpi_figures(profile, mpis, out, s, console,
                                lambda impl, s: channel_jobs(impl, s, failed),
                                lambda impl, res: channel_figures(
                                    impl, merged_reasons(res, failed)))
    else:
        added = add_mpi_figures(profile, mpis, out, s, console, local_send_jobs,
                                local_send_figures)
    rev, dirty = provenance.git_revision()
    here = provenance.cpu_model()
    if here != profile["provenance"].get("cpu_model"):
        console.print(f"[yellow]note:[/] {out} was calibrated on "
                      f"{profile['provenance'].get('cpu_model')!r}, these figures on {here!r} "
                      "(recorded in the addition)")
    entry = Inline(date=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   command=command, keys=added, cpu_model=here,
                   git_revision=rev, git_dirty=dirty,
                   load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2),
                   duration_s=round(time.monotonic() - started, 1), reps=s.reps)
    profile["provenance"]["additions"] = [
        Inline(a) for a in profile["provenance"].get("additions", [])] + [entry]
    write_profile(out, restore_inline(profile))
    for key in added:
        fig = host_profile_get(profile, key)
        if "median" in fig or "skipped" in fig:
            console.print(f"{key} = {describe(fig)}")
        else:  # a section of figures (a channel)
            for where, inner in figures(fig, key):
                console.print(f"{where} = {describe(inner)}")
    console.print(f"added to {out}")
    return out


def add_mpi_figures(profile: dict[str, Any], mpis: tuple[str, ...], out: Path, s: Settings,
                    console: Console,
                    jobs_of: Callable[[mpi.MpiImpl, Settings], list[Job]],
                    figures_of: Callable[[mpi.MpiImpl, Results], dict[str, Inline]]
                    ) -> list[str]:
    """Measures per-MPI figures (`jobs_of`, `figures_of`) into `profile`; the keys it set."""
    impls, _ = select_mpis(mpis)
    sections = profile["measured"]["mpi"]
    if not mpis:  # the MPIs the profile measured
        impls = [i for i in impls if not host_profile.is_skipped(sections.get(i.name, {}))
                 and i.name in sections]
    if not impls:
        raise CalibrateError(f"{out}: no MPI of the profile is installed here")
    res = Results()
    jobs = [job for impl in impls for job in jobs_of(impl, s)]
    measure(jobs, impls, {impl.name: [] for impl in impls}, s, res, console)
    added = []
    for impl in impls:
        body = sections.setdefault(impl.name, {"version": impl.version})
        if host_profile.is_skipped(body):
            body.clear()
            body["version"] = impl.version
        if body.get("version") != impl.version:
            raise CalibrateError(f"{out}: measured {body.get('version')}, but {impl.version} "
                                 f"is installed here: recalibrate instead")
        for key, fig in figures_of(impl, res).items():
            body[key] = fig
            added.append(f"measured.mpi.{impl.name}.{key}")
    return added


def merged_reasons(res: Results, planned: Results) -> Results:
    """`res` with the reasons found while planning (jobs that could not be made)."""
    res.reasons |= planned.reasons
    return res


def add_slicer(profile: dict[str, Any], mpis: tuple[str, ...], out: Path, s: Settings,
               console: Console) -> list[str]:
    """Measures the slicer's figures again into `profile`, and each MPI's threads per
    rank (the tasks its watchers read); the keys it set."""
    res = Results()
    measure(slicer_jobs(s, res), [], {}, s, res, console)
    section = slicer_section(res)
    profile["measured"]["slicer"] = section
    added = [f"measured.slicer.{layout}.{key}" for layout, body in section.items()
             if isinstance(body, dict) for key, fig in body.items() if isinstance(fig, dict)]
    return added + add_mpi_figures(profile, mpis, out, s, console, threads_jobs,
                                   threads_figures)


def host_profile_get(profile: dict[str, Any], dotted: str) -> Any:
    node: Any = profile
    for part in dotted.split("."):
        node = node[part]
    return node


def restore_inline(profile: dict[str, Any]) -> dict[str, Any]:
    """A profile read back from TOML, with its figures, gaps and small mappings (env,
    provenance.mpi) marked Inline again so that it is written as `vhpc calibrate`
    writes it."""
    def walk(node: Any, key: str) -> Any:
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        if not isinstance(node, dict):
            return node
        if key in ("env", "mpi") and all(not isinstance(v, dict) for v in node.values()) \
                or "median" in node or "unit" in node or set(node) == {"skipped"}:
            return Inline(node)
        return {k: walk(v, k) for k, v in node.items()}
    return {k: walk(v, k) for k, v in profile.items()}


def measure(jobs: list[Job], impls: list[mpi.MpiImpl], chans: dict[str, list[Channel]],
            s: Settings, res: Results, console: Console) -> dict[tuple[str, str], str]:
    """Check each MPI's transports once, then run every job once per round, each round
    in a seeded shuffled order. Returns {(mpi, channel): transport the MPI reported}."""
    checks = [(impl, ch) for impl in impls for ch in chans[impl.name] if ch.name in ("shm", "tcp")]
    rng = random.Random(SEED)
    transports: dict[tuple[str, str], str] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[now]}"))
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("calibrate", total=len(checks) + s.reps * len(jobs), now="")
        for impl, ch in checks:
            progress.update(task, description="transports", now=f"{impl.name} {ch.name}")
            transports[(impl.name, ch.name)] = check_transport(impl, ch, s, res)
            progress.advance(task)
        for number in range(1, s.reps + 1):
            order = jobs[:]
            rng.shuffle(order)
            for job in order:
                progress.update(task, description=f"round {number}/{s.reps}", now=job.label)
                if job.key[:3] in res.reasons:  # a transport check ruled it out
                    pass
                else:
                    try:
                        hop_ns = hop.now()
                        sample = job.measure()
                        for name, value in ((HOP, hop_ns), (HOP_AFTER, hop.now())):
                            if value is not None:
                                sample[name] = value
                        res.samples.setdefault(job.key, []).append(sample)
                    # ProbeFailed, PlacementUnavailable, cgroups that cannot be made or removed
                    except (RuntimeError, OSError) as exc:
                        res.problems.setdefault(job.key, []).append(str(exc) or type(exc).__name__)
                progress.advance(task)
    return transports


#: The host state probed just before and just after each probe ran (vhpc.lab.hop),
#: kept in its sample.
HOP = "_hop_ns"
HOP_AFTER = "_hop_after_ns"


def hops(res: Results) -> list[float]:
    return [s[HOP] for samples in res.samples.values() for s in samples if HOP in s]


def hop_figures_of(res: Results) -> dict[str, Any]:
    """measured.os.hop (every probe's hop) and, when they fall in two host states,
    measured.os.hop_threshold_ns, the hop that separates them."""
    found = hops(res)
    if not found:
        return {"hop": skipped("one CPU allowed here, or every hop probe failed")}
    figures: dict[str, Any] = {"hop": scalar(found, "ns")}
    if (cut := hop.threshold(found)) is not None:
        figures["hop_threshold_ns"] = round(cut, 1)
    return figures


def states_section(impls: list[mpi.MpiImpl], chans: dict[str, list[Channel]],
                   transports: dict, res: Results) -> dict[str, Any] | None:
    """measured.states: when the probes ran in two host states, each MPI's figures
    again from only the probes that ran in one state (`hop`: that state's hops;
    a probe whose state changed while it ran is in neither); None in one state.
    The figures at measured.mpi stay those of every probe."""
    cut = hop.threshold(hops(res))
    if cut is None:
        return None

    def state_of(sample: dict[str, float]) -> str | None:
        return hop.across(sample.get(HOP), sample.get(HOP_AFTER), lambda h: hop.state(h, cut))

    states: dict[str, Any] = {}
    for name in hop.NAMES:
        part = Results(samples={key: [s for s in found if state_of(s) == name]
                                for key, found in res.samples.items()},
                       problems=res.problems, reasons=res.reasons)
        states[name] = {"hop": scalar(hops(part), "ns"),
                        "mpi": {impl.name: figures_only(mpi_section(impl, chans[impl.name],
                                                                    transports, part))
                                for impl in impls}}
        if pairs := pair_figures(part):
            states[name]["kernels"] = pairs
    return states


def figures_only(node: dict[str, Any]) -> dict[str, Any]:
    """The measured figures of a section, tables of them kept, everything else
    (descriptions, gaps) left out: what a state overrides."""
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, Inline) and "median" in value:
            kept[key] = value
        elif isinstance(value, dict) and not isinstance(value, Inline):
            if inner := figures_only(value):
                kept[key] = inner
    return kept


def check_transport(impl: mpi.MpiImpl, ch: Channel, s: Settings, res: Results) -> str:
    """What the MPI says it used on this channel; a TCP channel that is not TCP is
    ruled out (its figures would be mislabelled)."""
    try:
        seen = probes.transport_seen(impl.name, probes.transport_run(
            impl, ch.launcher, VERBOSE_ENV[impl.name], timeout=s.timeout_s))
    except probes.ProbeFailed as exc:
        seen = ""
        if ch.name == "tcp":
            res.reasons[("mpi", impl.name, "tcp")] = f"the transport check failed: {exc}"
            return seen
    if ch.name == "tcp" and "tcp" not in seen:
        res.reasons[("mpi", impl.name, "tcp")] = (
            f"{env_text(ch.launcher)} did not select TCP: {impl.name} reported "
            f"{seen or 'nothing readable'}")
    return seen or "not reported"


def env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items()) or "(default settings)"


# ---------------------------------------------------------------- the profile


def profile_header(out: Path, s: Settings) -> dict[str, Any]:
    cpus = len(placement.allowed_cpus())
    return {
        "name": out.stem,
        "description": (f"{provenance.cpu_model()}, {cpus} CPU{'s' if cpus > 1 else ''} "
                        f"allowed, {provenance.kernel()}: measured by vhpc calibrate"
                        + (" --quick (1 short repetition: a smoke test, not a calibration)"
                           if s.quick else "")),
        "format": FORMAT,
    }


def provenance_of(command: str, impls: list[mpi.MpiImpl], s: Settings, load_before: float,
                  cpu_before: list[int], duration: float) -> dict[str, Any]:
    rev, dirty = provenance.git_revision()
    return {
        "command": command,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": platform.node(),
        "cpu_model": provenance.cpu_model(),
        "cpus_allowed": placement.allowed_cpus(),
        "kernel": provenance.kernel(),
        "mpi": Inline({impl.name: impl.version for impl in impls}),
        "git_revision": rev,
        "git_dirty": dirty,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "steal_percent": round(steal_percent(cpu_before, cpu_times()), 2),
        "duration_s": round(duration, 1),
        "reps": s.reps,
        "quick": s.quick,
        "seed": SEED,
    }


def os_section(res: Results, hz_measured: float | None) -> dict[str, Any]:
    c0, c1 = two_cpus()
    hz, source = probes.config_hz()
    if hz is None and hz_measured is not None:
        hz, source = round(hz_measured), "jiffies per second over the run (/proc/timer_list)"
    slack = [s["slack_ns"] for s in res.samples.get(("os", "sleep"), [])]
    x = list(SLEEP_US)
    sleep = ("os", "sleep")
    tight = ("os", "sleep_slack_1us")
    section: dict[str, Any] = {
        "cpus": [c0] if c1 is None else [c0, c1],
        **hop_figures(res, "wakeup_same_cpu"),
        **hop_figures(res, "wakeup_cross_cpu"),
        **hop_figures(res, "yield_handover"),
        "yield_alone": res.scalar(("os", "yield_alone"), "ns", "ns"),
        "sleep": res.series(sleep, [f"median_{us}" for us in x], x, "us", "ns"),
        "sleep_p99": res.series(sleep, [f"p99_{us}" for us in x], x, "us", "ns"),
        "sleep_slack_1us": res.series(tight, [f"median_{us}" for us in x], x, "us", "ns"),
        "sleep_slack_1us_p99": res.series(tight, [f"p99_{us}" for us in x], x, "us", "ns"),
        "timer_slack_default_ns": int(slack[0]) if slack else skipped(res.why_missing(sleep)),
        "sched_slice": res.scalar(("os", "sched"), "turn", "ns"),
        "sched_switch": res.scalar(("os", "sched"), "gap", "ns"),
        "hz": hz if hz is not None else skipped("no kernel config and no /proc/timer_list"),
        "hz_source": source or "unknown",
    }
    if hz_measured is not None:
        section["hz_measured"] = round(hz_measured, 1)
    return section


def hop_figures(res: Results, name: str) -> dict[str, Inline]:
    """A pipe_pingpong probe: the median and p99 single hop, and the mean half round trip."""
    key = ("os", name)
    return {name: res.scalar(key, "p50", "ns"), f"{name}_p99": res.scalar(key, "p99", "ns"),
            f"{name}_mean": res.scalar(key, "half_rtt", "ns")}


def slicer_section(res: Results) -> dict[str, Any]:
    if ("slicer",) in res.reasons:
        return {"skipped": res.reasons[("slicer",)]}
    section: dict[str, Any] = {
        "slice_ms": timeslice.SLICE_S * 1e3,
        "poll_us": timeslice.POLL_S * 1e6,
        "method": ("host.placement.timesliced_domains (timeslice.Slicer, work-conserving) "
                   "over two freezer domains, measured from outside by pipe_pingpong -q -g "
                   "and os_probe spin -g: no hook in the slicer"),
    }
    for layout in SLICER_LAYOUTS:
        if ("slicer", layout) in res.reasons:
            section[layout] = {"skipped": res.reasons[("slicer", layout)]}
            continue
        blocked, forced = ("slicer", layout, "blocked"), ("slicer", layout, "forced")
        section[layout] = {
            "cpus": list(slicer_cpus(layout)),
            "blocked_switch": res.scalar(blocked, "p50", "ns"),
            "blocked_switch_p99": res.scalar(blocked, "p99", "ns"),
            "idle_switch": res.scalar(blocked, "idle_switch", "ns"),
            f"blocked_switch_{SLICER_TASKS}_tasks": res.scalar(
                ("slicer", layout, "blocked_tasks"), "p50", "ns"),
            "forced_switch": res.scalar(forced, "gap", "ns"),
            "forced_switch_p99": res.scalar(forced, "gap_p99", "ns"),
            "slice": res.scalar(forced, "turn", "ns"),
        }
    return section


def lat_sizes() -> list[int]:
    return [1 << i for i in range(LAT_MAX.bit_length())]


def mpi_section(impl: mpi.MpiImpl, chans: list[Channel], transports: dict, res: Results
                ) -> dict[str, Any]:
    section: dict[str, Any] = {"version": impl.version}
    if impl.name == "mpich":
        section["device"] = mpich_device()
    section.update(local_send_figures(impl, res))
    section.update(threads_figures(impl, res))
    section.update(channel_figures(impl, res))
    planned = {ch.name: ch for ch in chans}
    for name in ("shm", "tcp", "one_core_yield", "timesliced_adaptive"):
        key = ("mpi", impl.name, name)
        if key in res.reasons or name not in planned:
            section[name] = {"skipped": res.why_missing(key)}
            continue
        ch = planned[name]
        sizes = [TIMESLICED_SIZE] if name == "timesliced_adaptive" else lat_sizes()
        body: dict[str, Any] = {
            "placement": ch.place.label,
            "policy": ch.policy,
            "env": Inline(ch.launcher),
        }
        hung = sum(1 for job in ("lat", "bw") for sample in res.samples.get((*key, job), [])
                   if sample.get("_hung"))
        if hung:
            body["finalize_hangs"] = hung
        if (impl.name, name) in transports:
            body["transport"] = transports[(impl.name, name)]
            body["transport_check"] = TRANSPORT_CHECK[impl.name]
        body["lat"] = res.series((*key, "lat"), [f"lat_{n}" for n in sizes], sizes, "B", "ns")
        if name in ("shm", "tcp"):
            body.update(bw_figures(res, key))
            body["exch"] = res.scalar((*key, "exch"), f"exch_{EXCH_SIZE}", "ns")
        section[name] = body
    return section


def threads_figures(impl: mpi.MpiImpl, res: Results) -> dict[str, Inline]:
    return {"threads_per_rank": res.scalar(("mpi", impl.name, "threads"), "threads_per_rank",
                                           "count")}


def local_send_figures(impl: mpi.MpiImpl, res: Results) -> dict[str, Inline]:
    key = ("mpi", impl.name, LOCAL_SEND)
    return {"local_send_max": res.scalar(key, "send", "B"),
            "local_isend_max": res.scalar(key, "isend", "B")}


def kernels_section(impls: list[mpi.MpiImpl], jobs: list[Job], res: Results) -> dict[str, Any]:
    if not impls:
        return {"skipped": "no MPI to run the kernels with"}
    section: dict[str, Any] = {"mpi": impls[0].name, "ranks": 1}
    pairs = pair_figures(res)
    for job in jobs:
        if job.key[0] != "kernels":
            continue
        _, program, variant = job.key
        body: dict[str, Any] = {"args": KERNELS[program][variant]}
        if not res.samples.get(job.key):
            body["time"] = skipped(res.why_missing(job.key))
        for metric, unit in job.units.items():
            body[metric] = res.scalar(job.key, metric, unit)
        body.update(pairs.get(program, {}).get(variant, {}))
        section.setdefault(program, {})[variant] = body
    return section


def pair_figures(res: Results) -> dict[str, Any]:
    """`kernels.<program>.<variant>.pair_time` of every paired kernel measured."""
    found: dict[str, Any] = {}
    for key in res.samples:
        if key[0] == PAIR and res.samples[key]:
            found.setdefault(key[1], {})[key[2]] = {"pair_time": res.scalar(key, "time", "s")}
    return found


# ---------------------------------------------------------------- display


#: Kernel figures the closing table shows (the profile has them all).
KERNEL_SHOWN = ("time", "mops", "mflops", "beff_MBps", "triad_MBps")


def summary_table(profile: dict[str, Any], title: str) -> Table:
    table = Table(title=title, caption="median (min–max) over the repetitions; kernels: "
                  "time and main rate only (the profile has every figure)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for path, fig in figures(profile["measured"], "measured"):
        name = path.removeprefix("measured.")
        if name.startswith("kernels.") and name.count(".") == 3 \
                and name.rsplit(".", 1)[1] not in KERNEL_SHOWN:
            continue
        table.add_row(name, describe(fig))
    return table


def figures(node: Any, path: str):
    for key, value in node.items():
        where = f"{path}.{key}"
        if isinstance(value, dict) and ("median" in value or set(value) == {"skipped"}):
            yield where, value
        elif isinstance(value, dict) and key != "env":
            yield from figures(value, where)


def describe(fig: dict[str, Any]) -> str:
    if "skipped" in fig:
        return f"skipped: {fig['skipped']}"[:90]
    unit = fig["unit"]
    if "x" not in fig:
        return value_range(fig["median"], fig["lo"], fig["hi"], fig["n"], unit)
    picks = [i for i, x in enumerate(fig["x"]) if x in (1, 1000, 1024, 8, 1 << 20)] or [0]
    return " · ".join(f"{fig['x'][i]} {fig['x_unit']}: "
                      + value_range(fig["median"][i], fig["lo"][i], fig["hi"][i], fig["n"], unit)
                      for i in picks)


def value_range(median: float, lo: float, hi: float, n: int, unit: str) -> str:
    def fmt(v: float) -> str:
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if unit == "ns":  # µs read better
        median, lo, hi, unit = median / 1e3, lo / 1e3, hi / 1e3, "µs"
    spread = "" if n == 1 else f" ({fmt(lo)}–{fmt(hi)})"
    return f"{fmt(median)}{spread} {unit}"
