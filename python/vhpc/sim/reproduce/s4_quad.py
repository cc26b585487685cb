"""S4's quad-core experiment in the simulator: NPB-like OpenMP and MPI kernels
(4 threads / 4 ranks, class A) on a quad-core host (a Xeon 5335: 4 cores, one
socket) natively, under Xen's default setup, with static tuning and with
adaptive control (brief S4; docs/sim.md, "S4's quad-core experiment").

Configurations (`config`):

* ``native``: Linux on the host, one native domain with a CPU per core, its
  timer at `HZ_DEFAULT` with a native tick's cost; no hypervisor, no dom0.
* ``default``: Xen's credit scheduler, dom0 (one vCPU per core, as Xen gives
  it, with S0's housekeeping figure) and a 4-vCPU domU, every vCPU floating
  (no pinning), the guest's timer at `HZ_DEFAULT` with a virtualized tick's
  cost, Xen's own timer on every busy core (`HOST_TICK`).
* ``static``: the same with the domU's vCPUs pinned 1:1 to the cores and its
  timer lowered to `HZ_STATIC` (VT-ASOS's offline tuning: pinning and timer
  frequency).
* ``adaptive``: ``static``'s timer rate and a hint-driven control policy
  (`ADAPTIVE_POLICY`, docs/sim.md "Hint-driven control"): the domU publishes
  which of its vCPUs compute and which wait; another domain's wake-up does not
  preempt a computing vCPU, and a waiting thread gives its core up while a
  sibling or another domain's vCPU waits for one. Its vCPUs are not pinned: the
  thread-to-core mapping is the policy's at run time (a vCPU pinned to its core
  could not take the core a waiting sibling gave up).
* ``throttle`` (OpenMP workloads only): ``adaptive`` with the OpenMP runtime's
  concurrency throttling per parallel loop (`THROTTLE`, docs/sim.md
  "Concurrency throttling"), VT-ASOS's run-time half of Xen-adapt: each loop
  runs one instance on 4 threads, then one thread fewer while that is faster,
  then on the fastest count it saw.

Every configuration runs on the Xeon 5335's memory system (`memory_host`): one
memory hub behind the socket's front-side bus, which all four cores share.

Parameters are stated facts or assumptions (never fitted to the brief):

* `HZ_DEFAULT` = 1000: the 2.6.18 kernels of 2007 distributions (RHEL 5's
  CONFIG_HZ=1000), guest and native alike; `HZ_STATIC` = 100, the lowest
  CONFIG_HZ Linux offers.
* A native tick costs `TICK_NATIVE_NS` = 5 µs: Tsafrir (ExpCS 2007) measured a
  tick's whole overhead at 0.5-1.5 % of a CPU at 1000 Hz; the low end, for a
  2007 CPU. A virtualized guest tick costs `TICK_XEN_NS` = 2 × that
  (assumption: the same handler plus Xen taking the hardware interrupt,
  raising VIRQ_TIMER with an upcall into the guest, and the guest re-arming
  its one-shot timer with a hypercall). Xen's own tick (`HOST_TICK`): 100 Hz
  (credit's 10 ms accounting tick) at a native tick's cost.
* dom0's housekeeping: S0's figure (`vhpc reproduce s0`), 100 µs of work every
  10 ms on average per dom0 vCPU.
* Memory: the Xeon 5335 (Clovertown) reaches an Intel 5000-series memory hub
  over one 1333 MT/s front-side bus, 8 bytes wide: `FSB_MB_S` = 10667 MB/s for
  the four cores; the hub's four FB-DIMM DDR2-667 channels peak at 4 × 5333 =
  `HUB_MB_S` (as the S3 Xeon preset's hub); one node; no nested paging (Xen
  3.1's guests are paravirtualized); a core streams its fair share of the hub,
  as on the S3 Xeon (no per-core figure). Xen preallocates a domain's memory,
  Linux places it at first touch: on one node the same.
* OpenMP threads wait at barriers as libgomp does: spin GOMP_SPINCOUNT's
  default 300000 times, then sleep on a futex (`wait_policy = "block"`,
  `poll_ns` × `polls_before_yield`; 5 ns per spin iteration, an assumption:
  a load and a `pause` on a 2 GHz Core 2). MPI ranks busy-poll (MPICH2's
  nemesis), with the simulator's default costs.

Records: `experiment` ("quad"), `workload`, `kind` ("openmp" or "mpi"),
`config`, `time_s` (mean over seeds of the job's completion), `ci95_s`,
`seeds`, `vs_native` (time / native time); ``throttle`` records also
`loop_threads` (per seed, the thread count each parallel loop settled on).
"""

from __future__ import annotations

import copy
import statistics
from typing import Any

import tomli_w

CORES = 4
HZ_DEFAULT = 1000
HZ_STATIC = 100
TICK_NATIVE_NS = 5_000
TICK_XEN_NS = 2 * TICK_NATIVE_NS
HOST_TICK = {"hz": 100, "cost_ns": TICK_NATIVE_NS}
DOM0_BACKGROUND = {"interval_us": 10_000, "work_us": 100}
OMP_WAIT = {"poll_ns": 5, "polls_before_yield": 300_000}
FSB_MB_S = 10_667
HUB_MB_S = 21_333
CONFIGS = ("native", "default", "static", "adaptive", "throttle")
ADAPTIVE_POLICY = "cosched"
THROTTLE = "search"
#: (record name, workload, kind).
WORKLOADS = (
    ("omp.cg.A.4", "npb.omp.cg", "openmp"),
    ("omp.mg.A.4", "npb.omp.mg", "openmp"),
    ("omp.ft.A.4", "npb.omp.ft", "openmp"),
    ("cg.A.4", "npb.cg", "mpi"),
    ("ft.A.4", "npb.ft", "mpi"),
    ("is.A.4", "npb.is", "mpi"),
    ("ep.A.4", "npb.ep", "mpi"),
)
SEEDS = 3


def memory_host() -> dict[str, Any]:
    """`[host]`: the quad-core socket behind its front-side bus (module doc)."""
    return {"cores": CORES, "sockets": 1, "numa_nodes": 1, "bus_mb_s": FSB_MB_S,
            "nodes": [{"bandwidth_mb_s": HUB_MB_S}]}


def scenario(workload: str, kind: str, config: str) -> dict[str, Any]:
    """The scenario of one cell."""
    if config == "throttle" and kind != "openmp":
        raise ValueError(f"{workload}: only OpenMP-style threads share a loop to throttle")
    per_core = [[c] for c in range(CORES)]
    domains: list[dict[str, Any]] = []
    hypervisor: dict[str, Any] = {"scheduler": "credit"}
    if config == "native":
        vm = {"name": "linux", "native": True, "vcpus": CORES, "pin": per_core,
              "tick": {"hz": HZ_DEFAULT, "cost_ns": TICK_NATIVE_NS}}
    else:
        hypervisor["host_tick"] = dict(HOST_TICK)
        domains.append({"name": "dom0", "dom0": True, "vcpus": CORES,
                        "background": dict(DOM0_BACKGROUND)})
        tuned = config in ("static", "adaptive", "throttle")
        vm = {"name": "domU", "vcpus": CORES,
              "tick": {"hz": HZ_STATIC if tuned else HZ_DEFAULT, "cost_ns": TICK_XEN_NS}}
        if config == "static":
            vm["pin"] = per_core
        if config in ("adaptive", "throttle"):
            vm["hints"] = ADAPTIVE_POLICY
    domains.append(vm)
    sc: dict[str, Any] = {
        "name": f"s4-quad-{workload}-{config}",
        "host": memory_host(),
        "memory": {"placement": "first_touch" if config == "native" else "preallocate"},
        "hypervisor": hypervisor,
        "domains": domains,
        "jobs": [{"name": workload, "workload": workload, "ranks": [vm["name"]] * CORES,
                  "wait_policy": "block" if kind == "openmp" else "busy_poll",
                  "params": {"class": "A"}}],
    }
    if kind == "openmp":
        sc["mpi"] = dict(OMP_WAIT)
    if config == "throttle":
        sc["jobs"][0]["throttle"] = THROTTLE
    return sc


def cells(configs: tuple[str, ...] = CONFIGS) -> list[tuple[dict[str, Any], str]]:
    """(the cell's keys, its scenario TOML) for every cell."""
    out = []
    for name, workload, kind in WORKLOADS:
        for config in configs:
            if config == "throttle" and kind != "openmp":
                continue
            key = {"experiment": "quad", "workload": name, "kind": kind, "config": config}
            out.append((key, tomli_w.dumps(scenario(workload, kind, config))))
    return out


def records(cell_list: list[tuple[dict[str, Any], str]], reports: list[dict[str, Any]],
            seeds: int) -> list[dict[str, Any]]:
    """One record per cell from its seeds' reports (in `cell_list` order)."""
    from vhpc.sim.reproduce import s0

    it = iter(reports)
    out = []
    for key, _ in cell_list:
        jobs = [next(it)["jobs"][0] for _ in range(seeds)]
        times = [j["completion_ns"] / 1e9 for j in jobs]
        record = copy.copy(key) | {"time_s": statistics.fmean(times),
                                   "ci95_s": list(s0.mean_interval(times)), "seeds": seeds}
        if "throttle" in jobs[0]:
            # Per seed, the thread count each loop settled on (None: still searching).
            record["loop_threads"] = [[lp["threads"] for lp in j["throttle"]] for j in jobs]
        out.append(record)
    native = {r["workload"]: r["time_s"] for r in out if r["config"] == "native"}
    for r in out:
        r["vs_native"] = r["time_s"] / native[r["workload"]] if r["workload"] in native else None
    return out
