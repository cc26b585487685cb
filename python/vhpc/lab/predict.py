"""`vhpc lab predict`: every cell of a lab experiment simulated on a host profile,
beside the lab's measurements when a results directory is given.

Each cell becomes one simulator scenario that says what the lab does on this
host: every rank is a task of the host kernel (a single-vCPU domain under the
`linux` scheduler), pinned as the lab pins it; `domains` are task groups with
their weight and CFS quota; time-sliced domains run under the lab's `slicer`;
the MPI default is `spin` (today's MPIs never yield), libvhpc_wait is
`adaptive`. Costs come from a host profile (`vhpc calibrate`) through
`vhpc.sim.overlay`: no cell's measurement is used to predict it.

Host states (vhpc.lab.hop): when the calibration saw the host in two states
(`measured.states`: the two CPUs a cache-line hop of tens or of hundreds of ns
apart), every cell is predicted in each, from that state's figures, and each
measured run is compared with the prediction for the state it ran in (its
`host_hop_ns`, probed before it ran, against the profile's threshold).

A cell the simulator cannot express yet (a workload it has no model of, a
policy it does not have) is listed with the reason instead of a number.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from vhpc import sim
from vhpc.host import placement
from vhpc.lab import LabError, experiment, hop, stats, store
from vhpc.lab.experiment import Cell, Config

#: Lab policy → simulator wait policy.
POLICY = {"default": "spin", "spin": "spin", "adaptive": "adaptive"}
#: Round trips of a simulated ping-pong: the mean settles well before.
PINGPONG_ITERATIONS = 200
#: Under a slicer, each run is simulated with its jobs' timed parts starting at
#: this many evenly spaced moments of their first slice (untimed set-up work
#: before them: `untimed_us`), and the times averaged: a lab job's timed part
#: starts wherever its launch and MPI_Init left it in its slice.
SLICER_PHASES = 4
#: Exchanges per size of a simulated b_eff.
BEFF_ITERATIONS = 50
LIMIT_MS = 3_600_000


@dataclass
class Prediction:
    cell: Cell
    metric: str | None = None
    predicted: float | None = None
    measured: float | None = None
    runs: int = 0
    unsupported: str | None = None
    scenario: dict | None = None
    #: The measured runs' two groups when they fall in two (stats.modes).
    modes: tuple[list[float], list[float]] | None = None
    #: The host state predicted (vhpc.lab.hop), None when the profile has one.
    state: str | None = None
    #: The measured runs' host states were not probed (runs stored before
    #: `host_hop_ns`): every run is compared with each state's prediction.
    state_unknown: bool = False
    #: Runs left out: made in a host state the profile did not see (hop.OTHER).
    other_state: int = 0
    #: Runs left out: the host state changed while they ran (hop.CHANGED).
    changed_state: int = 0
    #: Figures of the cell's MPI that no probe measured in `state`, read from every
    #: run instead (vhpc.sim.profile.borrowed).
    borrowed: list[str] | None = None

    @property
    def ratio(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured

    def record(self) -> dict[str, Any]:
        return {"config": self.cell.config.name, "policy": self.cell.policy,
                "mpi": self.cell.mpi, "workload": self.cell.workload.name,
                "metric": self.metric, "predicted": self.predicted,
                "measured": self.measured, "ratio": self.ratio,
                "unsupported": self.unsupported,
                "modes": [list(g) for g in self.modes] if self.modes else None,
                "state": self.state, "other_state_runs": self.other_state,
                "changed_state_runs": self.changed_state,
                "borrowed": self.borrowed or None}

    def note(self) -> str:
        if self.unsupported:
            return self.unsupported
        text = f"{self.runs} runs" if self.runs else ""
        if self.state:
            text = (f"host {self.state}" + (" (runs' state not probed)" if self.state_unknown
                                            else "") + (f"; {text}" if text else ""))
        if self.borrowed:
            text += (f"; {', '.join(self.borrowed)} not measured in this state, "
                     "every run's figure used")
        if self.other_state:
            text += (f"{'; ' if text else ''}{self.other_state} run"
                     f"{'s' if self.other_state > 1 else ''} in a host state the profile "
                     "did not see, left out")
        if self.changed_state:
            text += (f"{'; ' if text else ''}{self.changed_state} run"
                     f"{'s' if self.changed_state > 1 else ''} whose host state changed "
                     "while it ran, left out")
        if self.modes:
            text += "; two modes: " + ", ".join(
                f"{len(g)} at {fmt(g[0])}" + (f"–{fmt(g[-1])}" if len(g) > 1 else "")
                for g in self.modes)
        return text


class Unsupported(Exception):
    """The simulator cannot express this cell yet."""


# --- workloads -----------------------------------------------------------------


@dataclass
class Plan:
    """The simulations one cell needs and how their times become the lab's metrics:
    `runs` are (sim workload, params); `metrics` maps the mean job completion time
    (ns) of every run, in order, to {metric: value}."""

    runs: list[tuple[str, dict]]
    metrics: Callable[[list[float]], dict[str, float]]
    #: Whether the program times one long part after MPI_Init and a barrier (the
    #: NPB-like kernels): its clock then starts once every rank has run, never
    #: during a wait for a first slice. The exchange loops are simulated short and
    #: stand for the lab's steady state, where every exchange waits: timed from launch.
    timed_part: bool = False
    #: Whether the program sends what it has just computed (the NPB-like kernels
    #: build their messages every iteration; the exchange benchmarks send one
    #: untouched buffer): its rendezvous data then cost the profile's `fresh` rate.
    fresh_data: bool = False


def options(args: list[str]) -> dict[str, str]:
    return dict(zip(args[::2], args[1::2]))


def pingpong_plan(args: list[str], ranks: int) -> Plan:
    """bench/pingpong -T lat -s SIZE: the half round trip in µs. A warm-up (-w) is
    not simulated: the simulated `adaptive` starts in the mode libvhpc_wait settles in."""
    opts = options(args)
    tests = opts.get("-T", "lat,bw")
    if tests != "lat":
        raise Unsupported(f"pingpong -T {tests}: only the latency test is modelled")
    if "-s" not in opts or "-m" in opts or "-M" in opts:
        raise Unsupported("pingpong over a range of sizes: give one size with -s")
    if ranks % 2:
        raise Unsupported("pingpong with an odd number of ranks")
    size, n = int(opts["-s"]), PINGPONG_ITERATIONS
    return Plan([("pingpong", {"bytes": size, "iterations": n})],
                lambda t: {f"lat_{size}_us": t[0] / (2 * n) / 1000})


def beff_plan(args: list[str], ranks: int) -> Plan:
    """bench/beff with two ranks: both rings are one MPI_Sendrecv between the pair,
    at every size 1 B .. -M doubling. `beff_MBps` is the mean over sizes of all bytes
    sent over the time; `lat_us` the 1-byte time per message. A warm-up (-w) is not
    simulated, as for pingpong."""
    if ranks != 2:
        raise Unsupported("beff with more than two ranks (rings) is not modelled")
    top = int(options(args).get("-M", 1 << 20))
    sizes = [1 << k for k in range(top.bit_length()) if 1 << k <= top]
    n = BEFF_ITERATIONS

    def metrics(times: list[float]) -> dict[str, float]:
        # bytes per ns is GB/s: x 1000 for MB/s (10^6 B/s)
        bw = [2 * s * n / t * 1000 for s, t in zip(sizes, times)]
        return {"beff_MBps": sum(bw) / len(bw), "lat_us": times[0] / n / 1000}

    return Plan([("exchange", {"bytes": s, "iterations": n, "compute_us": 0}) for s in sizes],
                metrics)


#: The lab's NPB-like kernels: the sim workload, and each class's units of work
#: (what the sim's `ps_per_unit` counts: IS keys x 10 iterations, SSOR point
#: updates, 2 (N-2)^3 an iteration, EP Gaussian pairs), as bench/npb_*.c define
#: the classes. SSOR is its own workload, the lab kernel's message pattern, not
#: NPB LU's (crates/vhpc-sim/src/workload/ssor.rs).
NPB = {
    "npb_is": ("npb.is", {"S": (1 << 16) * 10, "W": (1 << 20) * 10, "A": (1 << 23) * 10}),
    "npb_ssor": ("npb.ssor", {"S": 2 * 10**3 * 50, "W": 2 * 31**3 * 300,
                              "A": 2 * 62**3 * 250}),
    "npb_ep": ("npb.ep", {"S": 1 << 24, "W": 1 << 25, "A": 1 << 28}),
}
#: Workloads that split their work in any number of ranks (the others need a power of two).
ANY_RANKS = {"npb.ssor"}


def npb_plan(program: str, args: list[str], ranks: int, profile: dict,
             paired: bool = False) -> Plan:
    """An NPB-like kernel at this host's compute rate: the profile's one-rank run of
    the same program and class, per unit of work; with `paired` (ranks that
    compute side by side on two CPUs), the slower of two copies run at once, one
    on each CPU (`pair_time`), where the profile has it. The lab's `time` (s)."""
    opts = options(args)
    extra = sorted(set(opts) - {"-c"})
    if extra:
        raise Unsupported(f"{program} {' '.join(extra)}: only -c CLASS is modelled")
    cls = opts.get("-c", "S")
    workload, units = NPB[program]
    if cls not in units:
        raise Unsupported(f"{program} class {cls}")
    if ranks & (ranks - 1) and workload not in ANY_RANKS:
        raise Unsupported(f"{program} with {ranks} ranks (its model needs a power of two)")
    key = f"measured.kernels.{program}.{cls}"
    seconds = sim.profile.median(profile, f"{key}.time")
    if paired:
        try:
            seconds = sim.profile.median(profile, f"{key}.pair_time")
        except sim.ProfileMismatch:  # calibrated before pairs were probed
            pass
    ps = max(round(seconds * 1e12 / units[cls]), 1)
    return Plan([(workload, {"class": cls, "ps_per_unit": ps})],
                lambda t: {"time": t[0] / 1e9}, timed_part=True, fresh_data=True)


def plan_of(cell: Cell, profile: dict) -> Plan:
    w = cell.workload
    if w.program == "pingpong":
        return pingpong_plan(w.args, w.ranks)
    if w.program == "beff":
        return beff_plan(w.args, w.ranks)
    if w.program in NPB:
        return npb_plan(w.program, w.args, w.ranks, profile,
                        paired=w.ranks > 1 and not on_one_cpu(cell, profile))
    what = w.program or shlex.join(w.command or [])
    raise Unsupported(f"no simulator model of `{what}` yet")


# --- configurations ----------------------------------------------------------------


def task_domains(cpus: list[int], core_of: dict[int, int], nranks: int, **extra) -> list[dict]:
    """One single-vCPU domain per rank, rank r on cpus[r % len(cpus)]."""
    return [{"name": f"rank{r}", "pin": [[core_of[cpus[r % len(cpus)]]]], **extra}
            for r in range(nranks)]


def cores(cpus: Iterable[int], core_of: dict[int, int]) -> list[int]:
    """The simulated cores of lab CPUs (the profile's CPUs, in order)."""
    missing = sorted(set(cpus) - set(core_of))
    if missing:
        raise Unsupported(f"CPUs {missing} are not among the profile's ({sorted(core_of)})")
    return [core_of[c] for c in cpus]


def one_component(domains: list[dict]) -> bool:
    """Whether every domain shares CPUs with the others, transitively: the lab runs
    one slicer per such component, the simulator one for the whole host."""
    cpus = [set().union(*map(set, d["pin"])) for d in domains]
    reach, left = cpus[0], cpus[1:]
    while True:
        joined = [s for s in left if s & reach]
        if not joined:
            return not left
        for s in joined:
            reach |= s
            left.remove(s)


def vcpu_pins(cpus: list[int], ranks: list[int], core_of: dict[int, int]) -> list[list[int]]:
    """Per-vCPU slicing: the lab puts the k-th rank of a domain (in its `ranks`
    order) on vCPU k mod len(cpus), pinned to cpus[k mod len(cpus)], and makes
    only vCPUs that hold a rank; the simulator deals a domain's ranks to its vCPUs
    round robin in rank order. Pin the simulator's vCPU k where the lab runs the
    k-th rank in rank order."""
    nvcpus = min(len(cpus), len(ranks))
    if len(ranks) > len(cpus) and ranks != sorted(ranks):
        raise Unsupported("per-vCPU slicing with more ranks than vCPUs, `ranks` out of order")
    by_order = sorted(ranks)
    return [[cores([cpus[ranks.index(by_order[k]) % len(cpus)]], core_of)[0]]
            for k in range(nvcpus)]


def host_of(config: Config, cell: Cell, cpus: list[int]) -> tuple[str, list[dict], list[dict]]:
    """(scheduler, domains, jobs) of the scenario for `config`."""
    core_of = {c: i for i, c in enumerate(cpus)}
    n = cell.workload.ranks
    if config.kind in ("native", "native_up", "pinned", "capped", "timesliced"):
        use = {"native_up": cpus[:1], "pinned": config.cpus or cpus}.get(config.kind, cpus)
        cores(use, core_of)
        # the lab's capped placement: a CFS quota of QUOTA_US per PERIOD_US per rank
        extra = ({"cap": round(100 * placement.QUOTA_US / placement.PERIOD_US)}
                 if config.kind == "capped" else {})
        scheduler = "slicer" if config.kind == "timesliced" else "linux"
        return (scheduler, task_domains(use, core_of, n, **extra),
                [{"ranks": [f"rank{r}" for r in range(n)]}])
    scheduler = "slicer" if config.mode == "timesliced" else "linux"
    per_vcpu = scheduler == "slicer" and config.slicing == "vcpu"
    domains, jobs = [], []
    for job in range(config.jobs or 1):
        placed = {}
        for d in config.domain:
            if d.job != job:
                continue
            mine = list(d.ranks if d.ranks is not None else range(n))
            pin = vcpu_pins(d.cpus, mine, core_of) if per_vcpu else [cores(d.cpus, core_of)]
            domains.append({"name": d.name, "vcpus": len(pin) if per_vcpu else len(mine),
                            "weight": d.weight, "cap": round(100 * d.cap) if d.cap else 0,
                            "pin": pin})
            placed.update({r: d.name for r in mine})
        jobs.append({"ranks": [placed[r] for r in range(n)]})
    if config.noise is not None:
        # the lab's noise domain: one endless loop per CPU of it
        noise = cores(config.noise.cpus, core_of)
        domains.append({"name": "noise", "vcpus": len(noise), "weight": config.noise.weight,
                        "pin": [[c] for c in noise]})
        jobs.append({"noise": True, "ranks": ["noise"] * len(noise)})
    if scheduler == "slicer" and not per_vcpu and not one_component(domains):
        raise Unsupported("time-sliced domains on disjoint CPUs: the lab slices each group "
                          "of domains that share CPUs apart, the simulator's slicer is one")
    return scheduler, domains, jobs


def scenarios(cell: Cell, name: str, seed: int, profile: dict) -> tuple[list[dict], Plan]:
    """The scenarios of one cell of experiment `name` (one per run of its plan) and
    the plan."""
    policy = POLICY.get(cell.policy)
    if policy is None:
        raise Unsupported(f"policy {cell.policy}: not modelled yet "
                          f"(modelled: {', '.join(POLICY)})")
    plan = plan_of(cell, profile)
    cpus = list(profile["provenance"]["cpus_allowed"])
    config = cell.config
    scheduler, domains, jobs = host_of(config, cell, cpus)
    per_vcpu = config.slicing == "vcpu" and scheduler == "slicer"
    # a per-vCPU controller slices one CPU, and so does one whose domains all share
    # one CPU: the profile's one-CPU slicer figures; a per-vCPU group holds one
    # rank, a gang domain all of its ranks
    ranks = collections.Counter(r for j in jobs if not j.get("noise") for r in j["ranks"])
    one_cpu = per_vcpu or (scheduler == "slicer" and len(
        {c for d in domains for pin in d.get("pin", [[]]) for c in pin}) == 1)
    base = sim.overlay(profile, cell.mpi, slicer_layout="one_cpu" if one_cpu else "two_cpus",
                       ranks_per_domain=1 if per_vcpu else max(ranks.values(), default=1),
                       fresh=plan.fresh_data)
    base["hypervisor"]["scheduler"] = scheduler
    if config.channel is not None:  # network-namespace domains: their channel's costs
        fields, mpi_fields = sim.profile.lab_channel(profile, cell.mpi, config.channel,
                                                     plan.fresh_data)
        domains = [d | fields if d["name"] != "noise" else d for d in domains]
        base["mpi"].pop("between_domains", None)  # the old spelling of `transports`
        base["mpi"].pop("local_send_limit", None)  # the channel's own, if it has one
        base["mpi"].update(mpi_fields)
    if config.kind == "capped":
        base["hypervisor"]["linux"]["period_us"] = placement.PERIOD_US
    if scheduler == "slicer":
        base["hypervisor"]["tslice_us"] = round(1000 * (config.slice_ms or 30))
        base["hypervisor"]["slicer"]["work_conserving"] = config.work_conserving is not False
        base["hypervisor"]["slicer"]["by_weight"] = config.slices == "weight"
        base["hypervisor"]["slicer"]["slicing"] = "vcpu" if per_vcpu else "gang"
    # Co-running jobs overlap fully in the lab (each relaunched until every first
    # run has ended): so in the simulator.
    refill = sum(not j.get("noise") for j in jobs) > 1
    setups = [0]
    if scheduler == "slicer" and plan.timed_part:
        slice_us = base["hypervisor"]["tslice_us"]
        setups = [slice_us * k // SLICER_PHASES for k in range(SLICER_PHASES)]
    out = []
    for i, (workload, params) in enumerate(plan.runs):
        for setup in setups:
            sc = copy.deepcopy(base)
            sc.update(name=f"{name}-{config.name}-{cell.workload.name}"
                           f"-{cell.mpi}-{cell.policy}-{i}-after-{setup}us",
                      seed=seed, limit_ms=LIMIT_MS,
                      host={"cores": len(cpus)}, domains=domains)
            sc["jobs"] = [
                {"name": "noise", "workload": "noise", "ranks": j["ranks"]} if j.get("noise")
                else {"name": f"job{k}", "workload": workload, "ranks": j["ranks"],
                      "wait_policy": policy, "params": params, "refill": refill,
                      **({"timed_from": "all_ranks_ran", "untimed_us": setup}
                         if plan.timed_part else {})}
                for k, j in enumerate(jobs)]
            out.append(sc)
    return out, plan


# --- predicting and comparing ------------------------------------------------------


def predict(exp_file: Path, profile: dict, *, mpis: list[str] | None = None,
            results: Path | None = None) -> list[Prediction]:
    """One Prediction per cell and metric (one per cell when it cannot be simulated)."""
    exp = experiment.load(exp_file)
    names = mpis or exp.experiment.mpis or sorted(profile["measured"]["mpi"])
    out = predict_states(list(experiment.cells(exp, names)), exp.experiment.name,
                         exp.experiment.seed, profile, str(exp_file))
    if results is not None:
        out = attach_measurements(out, results, run_states(profile))
    return out


def predict_results(results: Path, profile: dict, seed: int = 1) -> list[Prediction]:
    """Every cell stored in a results directory predicted beside its median. The
    results keep each run's cell but not the experiment's seed: `seed` (1, the
    default of every experiment in experiments/) seeds the simulations."""
    name, cells = stored_cells(results)
    out = predict_states(cells, name, seed, profile, str(results))
    return attach_measurements(out, results, run_states(profile))


def state_threshold(profile: dict) -> float | None:
    """The hop separating the profile's two host states (None: it saw one)."""
    cut = profile["measured"].get("os", {}).get("hop_threshold_ns")
    return float(cut) if sim.profile.states(profile) and cut is not None else None


def run_states(profile: dict) -> Callable[[float | None], str | None]:
    """How a run's hop (`host_hop_ns`) names its host state on this profile: by the
    threshold of a profile in two states; on a profile in one, `hop.OTHER` for a
    hop STATE_RATIO away from the calibration's (a state it did not see), else None."""
    cut = state_threshold(profile)
    if cut is not None:
        return lambda h: hop.state(h, cut)
    seen = profile["measured"].get("os", {}).get("hop", {}).get("median")
    if not isinstance(seen, (int, float)):
        return lambda h: None
    return lambda h: hop.OTHER if hop.unlike(h, float(seen)) else None


def on_one_cpu(cell: Cell, profile: dict) -> bool:
    """Whether every rank (and the noise) of the cell runs on one CPU, as the lab
    places it; False for a cell the simulator cannot express."""
    try:
        cpus = list(profile["provenance"]["cpus_allowed"])
        _, domains, _ = host_of(cell.config, cell, cpus)
    except (Unsupported, LabError, KeyError):
        return False
    pins = {c for d in domains for pin in d.get("pin", [[]]) for c in pin}
    return len(pins) == 1


def channel_sections(config: Config) -> tuple[str, ...]:
    """The profile's message sections a cell's ranks talk through: the MPI's own
    shared memory, and its lab channel's (vhpc.sim.profile.LAB_CHANNELS)."""
    if config.channel is None:
        return ("shm",)
    return ("shm", sim.profile.LAB_CHANNELS[config.channel][0])


def predict_states(cells: list[Cell], name: str, seed: int, profile: dict,
                   origin: str) -> list[Prediction]:
    """predict_cells in each host state of the profile (once when it has one),
    a cell's states together."""
    states = sim.profile.states(profile)
    if not states:
        return predict_cells(cells, name, seed, profile, origin)
    # Ranks that share one CPU send nothing across: the host state is not theirs.
    one_cpu = [c for c in cells if on_one_cpu(c, profile)]
    across = [c for c in cells if c not in one_cpu]
    out = predict_cells(one_cpu, name, seed, profile, origin) if one_cpu else []
    for state in states if across else ():
        for p in predict_cells(across, name, seed, sim.profile.in_state(profile, state),
                               f"{origin} (host {state})"):
            p.state = state
            p.borrowed = sim.profile.borrowed(profile, state, p.cell.mpi,
                                              channel_sections(p.cell.config))
            out.append(p)
    order = {c.label: i for i, c in enumerate(cells)}
    out.sort(key=lambda p: order[p.cell.label])  # stable: states, then metrics, in order
    return out


def stored_cells(results: Path) -> tuple[str, list[Cell]]:
    """The experiment name and the cells of the runs stored in `results`, in order."""
    df = store.read(results)
    if df.empty:
        raise LabError(f"{results}: no stored runs")
    names = sorted(set(df.experiment))
    if len(names) > 1:
        raise LabError(f"{results}: runs of several experiments ({', '.join(names)})")
    cells = []
    for text in dict.fromkeys(df.cell):  # first-seen order, one per cell
        d = json.loads(text)
        cells.append(Cell(d["mpi"], Config.model_validate(d["config"]),
                          experiment.Workload.model_validate(d["workload"]), d["policy"]))
    return names[0], cells


def predict_cells(cells: list[Cell], name: str, seed: int, profile: dict,
                  origin: str) -> list[Prediction]:
    """One Prediction per cell and metric, in the cells' order; `origin` names the
    source in the simulator's errors."""
    if profile["profile"].get("kind") == "published":
        raise LabError(f"profile {profile['profile']['name']} is a published testbed's "
                       "parameters: a lab experiment runs here, so predict it on this host's "
                       "measured profile (`vhpc calibrate`)")
    planned, failed = [], []
    for cell in cells:
        try:
            planned.append((cell, *scenarios(cell, name, seed, profile)))
        except Unsupported as why:
            failed.append(Prediction(cell, unsupported=str(why)))
        except sim.ProfileMismatch as why:
            failed.append(Prediction(cell, unsupported=f"the profile cannot say: {why}"))
    batch = [(tomli_w.dumps(sc), f"{origin} · {cell.label} · run {i}", None)
             for cell, scs, _ in planned for i, sc in enumerate(scs)]
    reports = iter(sim.run_texts(batch))
    out = []
    for cell, scs, plan in planned:
        times = [mean_completion(next(reports)) for _ in scs]
        if None not in times:  # each plan run's starts (SLICER_PHASES), averaged
            k = len(times) // len(plan.runs)
            times = [sum(times[i:i + k]) / k for i in range(0, len(times), k)]
        if None in times:
            out.append(Prediction(cell, unsupported="a simulated run did not finish "
                                                    "within its limit"))
            continue
        for metric, value in plan.metrics(times).items():
            out.append(Prediction(cell, metric, value, scenario=scs[0]))
    out += failed
    order = {c.label: i for i, c in enumerate(cells)}
    out.sort(key=lambda p: order[p.cell.label])  # stable: a cell's metrics keep their order
    return out


def mean_completion(report: dict) -> float | None:
    """Mean completion (ns) of the run's finite jobs (the lab's `time` over co-running jobs)."""
    times = [j["completion_ns"] for j in report["jobs"] if j["workload"] != "noise"]
    if not times or None in times:
        return None
    return sum(times) / len(times)


def attach_measurements(predictions: Iterable[Prediction], results: Path,
                        states: Callable[[float | None], str | None] = lambda h: None
                        ) -> list[Prediction]:
    """The predictions with their cells' measured medians. `states` names a run's
    host state from its hop (run_states). With two states a state's prediction gets
    the runs made in that state, and a state no run of the cell was made in is left
    out; runs stored without their state go to every state's prediction, so marked.
    With one, runs in a state the profile did not see are left out and counted.
    Either way a run whose state changed while it ran (its hops before and after
    name different states) is left out and counted."""
    df = store.read(results)
    if df.empty:
        raise LabError(f"{results}: no stored runs")
    ok = df[(df.status == "ok") & (df.metric != "")]
    hops = ok[ok.metric == hop.METRIC].set_index("run_key").value
    after = ok[ok.metric == hop.METRIC_AFTER].set_index("run_key").value
    ok = ok.assign(state=[hop.across(hops.get(k), after.get(k), states) for k in ok.run_key])
    runs = {key: list(zip(group.value, group.state)) for key, group in
            ok.groupby(["mpi", "config", "workload", "policy", "metric"])}
    out = []
    for p in predictions:
        key = (p.cell.mpi, p.cell.config.name, p.cell.workload.name, p.cell.policy, p.metric)
        found = runs.get(key, [])
        p.changed_state = sum(st == hop.CHANGED for _, st in found)
        found = [(v, st) for v, st in found if st != hop.CHANGED]
        if p.state is not None and any(st is not None for _, st in found):
            values = [float(v) for v, st in found if st == p.state]
            if not values:
                continue  # no run in this host state
        else:
            values = [float(v) for v, st in found if st != hop.OTHER]
            p.other_state = len(found) - len(values)
            p.state_unknown = p.state is not None and bool(values)
        if values:
            p.measured, p.runs = float(np.median(values)), len(values)
            p.modes = stats.modes(values)
        out.append(p)
    return out


#: How close a prediction must be to the measured median to count as a match (±20 %).
BAND = 0.20


def within(p: Prediction, band: float | None = None) -> bool | None:
    band = BAND if band is None else band
    r = p.ratio
    return None if r is None or math.isnan(r) else abs(r - 1) <= band


def json_lines(predictions: list[Prediction]) -> str:
    return "\n".join(json.dumps(p.record()) for p in predictions)


def fmt(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.4g}"


def table_rows(predictions: list[Prediction], band: float | None = None
               ) -> list[tuple[str, ...]]:
    rows = []
    for p in predictions:
        c = p.cell
        verdict = {True: "yes", False: "NO", None: ""}[within(p, band)]
        rows.append((c.mpi, c.workload.name, p.metric or "", c.config.name, c.policy,
                     fmt(p.predicted), fmt(p.measured), fmt(p.ratio), verdict, p.note()))
    return rows


def headers(band: float | None = None) -> tuple[str, ...]:
    return ("MPI", "workload", "metric", "config", "policy", "predicted", "measured (median)",
            "ratio", f"±{round(100 * (BAND if band is None else band))} %", "note")


HEADERS = headers()


def rich_table(predictions: list[Prediction], title: str, band: float | None = None):
    from rich.table import Table

    table = Table(title=title)
    for h in headers(band):
        table.add_column(h, justify="right" if h in ("predicted", "measured (median)", "ratio")
                         else "left")
    for row in table_rows(predictions, band):
        table.add_row(*row)
    return table


def markdown(predictions: list[Prediction], title: str, band: float | None = None) -> str:
    lines = [f"# {title}", "", "| " + " | ".join(headers(band)) + " |",
             "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(predictions, band)]
    if (line := summary(predictions, band)) is not None:
        lines += ["", line]
    return "\n".join(lines) + "\n"


def summary(predictions: list[Prediction], band: float | None = None) -> str | None:
    """How many compared rows are within the band and how many cells (MPI, workload,
    metric, config, policy) are within it in every host state their runs were made
    in; None when nothing was measured."""
    cells: dict[tuple, list[bool]] = {}
    for p in predictions:
        if (ok := within(p, band)) is not None:
            key = (p.cell.mpi, p.cell.workload.name, p.metric, p.cell.config.name, p.cell.policy)
            cells.setdefault(key, []).append(ok)
    if not cells:
        return None
    pct = round(100 * (BAND if band is None else band))
    rows = [ok for oks in cells.values() for ok in oks]
    return (f"Within ±{pct} %: {sum(map(all, cells.values()))} of {len(cells)} cells in every "
            f"host state of their runs; {sum(rows)} of {len(rows)} (cell, state) rows.")
