"""`vhpc reproduce s3`: brief S3's memory experiments (NUMA hosts, KVM 0.13 and Xen 4.0)
rerun in the simulator's memory model (docs/sim.md, "NUMA memory"), beside the
published figures (docs/validation.md, "S3").

Experiments are functions ``run(*, quick: bool) -> list[dict]`` in a registry,
`EXPERIMENTS`; modules named in `EXTRA_MODULES` add theirs (each exposes an
``EXPERIMENTS`` dict of the same kind) when they are installed, so adding one is a
line there. Every record has the keys ``experiment``, ``platform`` (a
``host.preset``), ``placement`` (``native``, ``first_touch`` = KVM-like,
``preallocate`` = Xen-like, ``+vnuma`` when the guest sees the NUMA layout),
``partitioning``, ``channel``, ``benchmark``, ``run`` (1, or 2 for the second
application in a warm VM), ``slowdown`` (time / native time − 1), ``published``
(the brief's figure, or None) and ``note``.

This module's experiments:

* ``spanning``: one VM vs native on each preset, confined to one socket and
  spanning all sockets, with each hypervisor's placement; KVM-like rows run in a
  warm VM (run 2): the brief's KVM average of 40 % is its second-run figure.
* ``placement``: on the NUMA presets, KVM-like vs Xen-like placement of a spanning
  VM, each with and without vNUMA (a NUMA-aware guest).
* ``warm``: KVM-like first vs second run in one VM (cold, then warm).

How the scenarios are set up (stated, not tuned): NPB class B, one rank (MPI) or
thread (OpenMP-style) per core of the VM; native = Linux on the same cores, one
rank pinned to each (local first touch). KVM-like = the ``linux`` host scheduler
with ``first_touch``, the VM's vCPUs free to run on any of its cores (S3's KVM
vCPUs were host threads the host scheduler placed; a page lands on the node of
the core its vCPU runs on when it first touches it); Xen-like = ``credit`` with a
dom0 and ``preallocate``, each vCPU pinned to its own core. The model's
physical costs (docs/sim.md, "NUMA memory") come from the presets: node
bandwidth and distance, what one core streams alone, interconnect links
(HyperTransport, QPI: payload after headers), the Xeon's front-side buses,
nested paging in VMs on the hosts with hardware-assisted paging (Opteron: NPT;
Nehalem: EPT; the Xeon 7300 has none), and on the NUMA presets queueing at busy
controllers and links (``memory.queueing``, from their idle latency). One seed;
NPB's 1 % compute jitter is the only noise. `quick` (the default of the command)
runs 2 iterations of CG, MG and FT instead of the class's 75, 20, 20: a slowdown is
a ratio of per-iteration costs, which the iteration count does not change beyond
the setup; ``--full`` runs the class's counts.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import tomli_w

from vhpc.sim import run as sim

Record = dict[str, Any]
Experiment = Callable[..., list[Record]]

#: Optional modules with more S3 experiments (same record keys).
EXTRA_MODULES = ("vhpc.sim.reproduce.s3_partition",)

#: cores and sockets of each preset (as crates/vhpc-sim/src/host/presets.rs; a test
#: checks them against the native core).
PRESETS = {
    "xeon-uma-4x4": (16, 4, False),
    "opteron-numa-4x4": (16, 4, True),
    "nehalem-numa-2x4": (8, 2, True),
}
KERNELS = ("cg", "mg", "ft", "is", "ep")
CLASS = "B"
QUICK_ITERATIONS = 2

#: The brief's figures (S3), as fractions.
PUBLISHED = {
    "one_socket": None,  # "a few %"
    "uma_spanning": 0.10,
    "kvm_spanning": 0.40,
    "xen_spanning": 2.33,
    "warm_run1": 0.09,
    "warm_run2": 0.40,
}
RECORD_KEYS = ("experiment", "platform", "placement", "partitioning", "channel", "benchmark",
               "run", "slowdown", "published", "note")


@dataclass(frozen=True)
class Setup:
    """One simulated configuration."""

    platform: str
    kind: str  # "mpi" or "omp"
    kernel: str
    placement: str  # "native", "first_touch" or "preallocate"
    partitioning: str  # "one_vm_spanning" or "one_vm_one_socket"
    vnuma: bool = False
    warm: bool = False
    quick: bool = True

    @property
    def cores(self) -> list[int]:
        total, sockets, _ = PRESETS[self.platform]
        n = total if self.partitioning == "one_vm_spanning" else total // sockets
        return list(range(n))

    @property
    def workload(self) -> str:
        return f"npb.{self.kernel}" if self.kind == "mpi" else f"npb.omp.{self.kernel}"

    @property
    def benchmark(self) -> str:
        prefix = "" if self.kind == "mpi" else "omp."
        return f"{prefix}{self.kernel}.{CLASS}.{len(self.cores)}"

    def native(self) -> Setup:
        return Setup(self.platform, self.kind, self.kernel, "native", self.partitioning,
                     quick=self.quick)

    def scenario(self) -> dict[str, Any]:
        cores = self.cores
        xen = self.placement.startswith("preallocate")
        domains: list[dict[str, Any]] = []
        if xen:
            domains.append({"name": "dom0", "dom0": True, "vcpus": 1})
        kvm = self.placement == "first_touch"
        vm: dict[str, Any] = {"name": "vm", "vcpus": len(cores),
                              "pin": [cores] if kvm else [[c] for c in cores]}
        if self.placement == "native":
            vm["native"] = True
        vm.update({k: True for k, on in (("vnuma", self.vnuma), ("warm", self.warm)) if on})
        domains.append(vm)
        params: dict[str, Any] = {"class": CLASS}
        if self.quick and self.kernel in ("cg", "mg", "ft"):
            params["iterations"] = QUICK_ITERATIONS
        return {
            "name": f"s3-{self.platform}-{self.benchmark}-{self.placement}",
            "seed": 1,
            "host": {"preset": self.platform},
            "hypervisor": {"scheduler": "credit" if xen else "linux"},
            "memory": self.memory(xen),
            "domains": domains,
            "jobs": [{"name": self.benchmark, "workload": self.workload,
                      "ranks": ["vm"] * len(cores), "wait_policy": "busy_poll",
                      "params": params}],
        }


    def memory(self, xen: bool) -> dict[str, Any]:
        """`[memory]`: the hypervisor's placement; queueing at busy controllers and
        links (loaded latency; off by default in the simulator so older scenarios
        keep their figures) on the NUMA presets, which give the idle latency it
        needs (the Xeon's preset has no latency figure; on its one node a VM and
        native share every queue alike)."""
        memory: dict[str, Any] = {"placement": "preallocate" if xen else "first_touch"}
        if PRESETS[self.platform][2]:
            memory["queueing"] = True
        return memory


def simulate(setups: Iterable[Setup]) -> dict[Setup, dict[str, Any]]:
    """Completion time (s) and memory keys of each setup (and its native reference),
    run as one parallel batch."""
    wanted: list[Setup] = []
    for s in setups:
        for x in (s, s.native()):
            if x not in wanted:
                wanted.append(x)
    batch = [(tomli_w.dumps(s.scenario()), f"reproduce s3: {s.scenario()['name']}", None)
             for s in wanted]
    reports = sim.run_texts(batch)
    out = {}
    for s, report in zip(wanted, reports, strict=True):
        job = report["jobs"][0]
        if job["completion_ns"] is None:
            raise sim.SimError(f"reproduce s3: {s.scenario()['name']} did not finish")
        out[s] = {"time_s": job["completion_ns"] / 1e9, "remote_share": job.get("remote_share"),
                  "mem_slowdown": job.get("mem_slowdown")}
    return out


def record(experiment: str, s: Setup, results: dict[Setup, dict[str, Any]], run: int = 1,
           published: float | None = None, note: str = "") -> Record:
    got, native = results[s], results[s.native()]
    placement = s.placement + ("+vnuma" if s.vnuma else "")
    remote = got["remote_share"]
    return {
        "experiment": experiment, "platform": s.platform, "placement": placement,
        "partitioning": s.partitioning, "channel": "sm" if s.kind == "mpi" else "openmp",
        "benchmark": s.benchmark, "run": run,
        "slowdown": got["time_s"] / native["time_s"] - 1, "published": published,
        "note": note or (f"remote accesses {remote:.0%}" if remote is not None else ""),
    }


def averages(records: list[Record], published: Callable[[Record], float | None],
             note: Callable[[Record], str] = lambda r: "") -> list[Record]:
    """One mean record per (platform, placement, partitioning, run) and kind (mpi,
    omp, both), with the brief's figure where it gives one."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        key = (r["experiment"], r["platform"], r["placement"], r["partitioning"], r["run"])
        groups.setdefault(key + (r["channel"],), []).append(r)
        groups.setdefault(key + ("all",), []).append(r)
    out = []
    for (exp, platform, placement, part, run, channel), rs in groups.items():
        name = {"sm": "avg(mpi)", "openmp": "avg(omp)", "all": "avg"}[channel]
        head = {**rs[0], "channel": None if channel == "all" else channel, "benchmark": name}
        out.append({**head, "slowdown": statistics.fmean(r["slowdown"] for r in rs),
                    "published": published(head) if channel == "all" else None,
                    "note": note(head) if channel == "all" else f"mean of {len(rs)}"})
    return out


def _kinds_kernels(quick: bool) -> list[tuple[str, str]]:
    return [(kind, k) for kind in ("mpi", "omp") for k in KERNELS]


def run_spanning(*, quick: bool) -> list[Record]:
    """VM vs native on each preset: one socket and spanning, KVM-like and Xen-like."""
    setups = []
    for platform in PRESETS:
        for part in ("one_vm_one_socket", "one_vm_spanning"):
            for placement in ("first_touch", "preallocate"):
                for kind, k in _kinds_kernels(quick):
                    setups.append(Setup(platform, kind, k, placement, part,
                                        warm=placement == "first_touch", quick=quick))
    results = simulate(setups)
    rows = [record("spanning", s, results, run=2 if s.warm else 1) for s in setups]

    def published(r: Record) -> float | None:
        if r["partitioning"] == "one_vm_one_socket":
            return PUBLISHED["one_socket"]
        if not PRESETS[r["platform"]][2]:
            return PUBLISHED["uma_spanning"]
        return PUBLISHED["kvm_spanning" if r["placement"] == "first_touch" else "xen_spanning"]

    def note(r: Record) -> str:
        if r["partitioning"] == "one_vm_one_socket":
            return "brief: a few %"
        if not PRESETS[r["platform"]][2]:
            return "brief: multi-socket UMA about 10 %"
        return "brief: spanning NUMA average, " + (
            "KVM (its second-run figure; run 2 here)" if r["placement"] == "first_touch"
            else "Xen")

    return rows + averages(rows, published, note)


def run_placement(*, quick: bool) -> list[Record]:
    """A spanning VM on the NUMA presets: KVM-like vs Xen-like, oblivious vs vNUMA guest."""
    setups = [Setup(platform, kind, k, placement, "one_vm_spanning", vnuma=vnuma,
                    warm=placement == "first_touch", quick=quick)
              for platform, (_, _, numa) in PRESETS.items() if numa
              for placement in ("first_touch", "preallocate")
              for vnuma in (False, True)
              for kind, k in _kinds_kernels(quick)]
    results = simulate(setups)
    rows = [record("placement", s, results, run=2 if s.warm else 1) for s in setups]

    def published(r: Record) -> float | None:
        if r["placement"].endswith("+vnuma"):
            return None
        return PUBLISHED["kvm_spanning" if r["placement"] == "first_touch" else "xen_spanning"]

    def note(r: Record) -> str:
        if r["placement"].endswith("+vnuma"):
            return "not in the brief: a NUMA-aware guest (vNUMA)"
        return "brief: " + ("KVM" if r["placement"] == "first_touch" else "Xen") + " average"

    return rows + averages(rows, published, note)


def run_warm(*, quick: bool) -> list[Record]:
    """KVM-like: the first application in a fresh VM, then a second one in the same VM."""
    setups = [Setup(platform, kind, k, "first_touch", "one_vm_spanning", warm=warm, quick=quick)
              for platform, (_, _, numa) in PRESETS.items() if numa
              for warm in (False, True)
              for kind, k in _kinds_kernels(quick)]
    results = simulate(setups)
    rows = [record("warm", s, results, run=2 if s.warm else 1) for s in setups]
    return rows + averages(
        rows, lambda r: PUBLISHED["warm_run2" if r["run"] == 2 else "warm_run1"],
        lambda r: f"brief: KVM {'second' if r['run'] == 2 else 'first'}-run average")


#: This module's experiments, by name.
EXPERIMENTS: dict[str, Experiment] = {
    "spanning": run_spanning,
    "placement": run_placement,
    "warm": run_warm,
}


def experiments() -> dict[str, Experiment]:
    """Every experiment: this module's, then those of the `EXTRA_MODULES` installed."""
    found = dict(EXPERIMENTS)
    for name in EXTRA_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        found.update(getattr(module, "EXPERIMENTS", {}))
    return found


def run(*, quick: bool = True, only: Iterable[str] | None = None) -> tuple[list[Record], float]:
    """Every experiment's records (or those named in `only`), and the wall time (s)."""
    registry = experiments()
    names = list(registry) if only is None else list(only)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise sim.SimError(f"unknown S3 experiment(s) {', '.join(unknown)}; "
                           f"known: {', '.join(registry)}")
    start = time.perf_counter()
    records: list[Record] = []
    for name in names:
        records.extend(registry[name](quick=quick))
    return records, time.perf_counter() - start


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.0f} %"


def print_tables(records: list[Record], wall_s: float, console: Any) -> None:
    """The averages beside the brief's figures (per-benchmark records: --json)."""
    from rich.table import Table

    table = Table(title=f"S3 in the simulator ({wall_s:.1f} s): mean slowdown vs native",
                  title_justify="left")
    for col in ("experiment", "platform", "placement", "partitioning", "run", "mpi", "omp",
                "all", "brief", "note"):
        table.add_column(col, justify="right" if col in ("mpi", "omp", "all", "brief") else "left")
    rows: dict[tuple, dict[str, Record]] = {}
    for r in records:
        if str(r["benchmark"]).startswith("avg"):
            # Partitioning and I/O rows differ by channel too.
            part = r["partitioning"]
            if r["experiment"] in ("partitioning", "io"):
                part = f"{part} {r['channel']}"
            key = (r["experiment"], r["platform"], r["placement"], part, r["run"])
            rows.setdefault(key, {})[r["benchmark"]] = r
    for key, by in rows.items():
        both = by.get("avg", {})
        table.add_row(*(str(k) for k in key),
                      _pct(by.get("avg(mpi)", {}).get("slowdown")),
                      _pct(by.get("avg(omp)", {}).get("slowdown")),
                      _pct(both.get("slowdown")), _pct(both.get("published")),
                      both.get("note", ""))
    console.print(table)
