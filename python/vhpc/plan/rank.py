"""Rank the candidates by predicted makespan: every one simulated, in parallel.

Each feasible candidate's scenario runs with seeds 1..`plan.seeds`
(`vhpc.sim.run_texts`, all in one parallel batch); its makespan is the latest
completion of its jobs (they all start at time zero), averaged over the seeds
in integer nanoseconds. Candidates within `plan.tolerance_pct` of the fastest
(and whose jobs' summed completion times are within it of the least such sum
among those) are tied and come first in enumeration order (candidates.py: fewer
VMs, pinned vCPUs, packed ranks first), so the simplest of them wins; the others follow by
makespan, and a candidate whose jobs did not all finish within `plan.limit_s`
ranks after every one that did. The ranking is as deterministic as the
simulator.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhpc import sim
from vhpc.plan import scenario as scen
from vhpc.plan.candidates import Candidate, enumerate_candidates
from vhpc.plan.inputs import HostFile, JobsFile, PlanError
from vhpc.plan.topology import Topology


@dataclass
class Ranked:
    candidate: Candidate
    #: Mean makespan over the seeds (ns); None if a seed's run hit the limit.
    makespan_ns: int | None
    #: Per job, mean completion (ns) or None.
    jobs_ns: dict[str, int | None]
    scenario: dict[str, Any]
    #: Within plan.tolerance_pct of the fastest.
    tied: bool = False


@dataclass
class Ranking:
    host: HostFile
    topology: Topology
    jobs: JobsFile
    #: Feasible candidates, best first.
    ranked: list[Ranked]
    #: Candidates that cannot hold the jobs, with the reason.
    infeasible: list[Candidate]
    #: What this simulator build does not model (scenario.omitted()).
    omitted: list[str]
    wall_s: float
    simulations: int
    features: list[str] = field(default_factory=list)

    @property
    def winner(self) -> Ranked:
        return self.ranked[0]


def within(value: int, best: int, ppm: int) -> bool:
    """value ≤ best × (1 + ppm / 10^6), in integers."""
    return value * 1_000_000 <= best * (1_000_000 + ppm)


def mark_ties(ranked: list[Ranked], tolerance_pct: float) -> None:
    """Tied: makespan within tolerance of the fastest, and the jobs' summed
    completion times within tolerance of the least such sum among those (a short
    job slowed down behind a long one's makespan still counts)."""
    ppm = round(tolerance_pct * 10_000)
    done = [r for r in ranked if r.makespan_ns is not None]
    if not done:
        return
    fastest = min(r.makespan_ns for r in done)  # type: ignore[type-var]
    close = [r for r in done if within(r.makespan_ns, fastest, ppm)]  # type: ignore[arg-type]
    total = {id(r): sum(v for v in r.jobs_ns.values() if v is not None) for r in close}
    least = min(total.values())
    for r in close:
        r.tied = within(total[id(r)], least, ppm)


def rank(host: HostFile, topo: Topology, jobs: JobsFile, *, jobs_path: str | Path = "jobs.toml",
         max_memory: int | None = None) -> Ranking:
    """Simulate every feasible candidate and order them by mean makespan."""
    cands = enumerate_candidates(host, topo, jobs)
    if not cands:
        raise PlanError(f"{jobs_path}: field `plan.partitionings`: none of "
                        f"{', '.join(jobs.plan.partitionings or [])} applies to this host "
                        f"({topo.describe()}): `node` needs nodes that are not the sockets, "
                        "`socket` more than one socket, `half-socket` an even number of cores "
                        "per socket, `core` 2 to 64 cores")
    feasible = [c for c in cands if c.infeasible is None]
    infeasible = [c for c in cands if c.infeasible is not None]
    if not feasible:
        raise PlanError(f"{jobs_path}: no partitioning of this host holds the jobs: "
                        + "; ".join(sorted({c.infeasible or "" for c in infeasible})))
    scenarios = [scen.build(host, jobs, c) for c in feasible]
    seeds = range(1, jobs.plan.seeds + 1)
    batch = [(scen.text(s), f"plan candidate {c.label}", seed)
             for c, s in zip(feasible, scenarios) for seed in seeds]
    start = time.perf_counter()
    reports = sim.run_texts(batch, max_memory=max_memory)
    wall = time.perf_counter() - start
    ranked = []
    n = len(seeds)
    for i, (cand, scenario) in enumerate(zip(feasible, scenarios)):
        runs = reports[i * n:(i + 1) * n]
        per_job: dict[str, int | None] = {}
        for job in jobs.jobs:
            done = [next(j["completion_ns"] for j in r["jobs"] if j["name"] == job.name) for r in runs]
            per_job[job.name] = None if None in done else sum(done) // n
        makespan = None if None in per_job.values() else max(v for v in per_job.values() if v is not None)
        ranked.append(Ranked(cand, makespan, per_job, scenario))
    mark_ties(ranked, jobs.plan.tolerance_pct)
    order = {id(r): k for k, r in enumerate(ranked)}
    ranked.sort(key=lambda r: (not r.tied, r.makespan_ns is None,
                               0 if r.tied else r.makespan_ns or 0, order[id(r)]))
    return Ranking(host, topo, jobs, ranked, infeasible, scen.omitted(), wall, len(batch),
                   sorted(scen.features()))


def plan_files(host_path: str | Path, jobs_path: str | Path, *, seeds: int | None = None,
               partitionings: list[str] | None = None, max_memory: int | None = None) -> Ranking:
    """HOST.toml and JOBS.toml read, checked, every candidate simulated and ranked;
    `seeds` and `partitionings` override JOBS.toml's plan.seeds and plan.partitionings."""
    from vhpc.plan import footprint, inputs, topology

    host = inputs.load_host(host_path)
    jobs = inputs.load_jobs(jobs_path)
    if seeds is not None:
        jobs = jobs.model_copy(update={"plan": jobs.plan.model_copy(update={"seeds": seeds})})
    if partitionings:
        jobs = jobs.model_copy(update={"plan": jobs.plan.model_copy(
            update={"partitionings": list(partitionings)})})
    topo = topology.resolve(host, host_path)
    jobs = footprint.complete(host, jobs, jobs_path)
    return rank(host, topo, jobs, jobs_path=jobs_path, max_memory=max_memory)
