"""Rank the candidates by predicted makespan: every one simulated, in parallel.

Each feasible candidate's scenario runs with seeds 1..`plan.seeds`
(`vhpc.sim.run_texts`, all in one parallel batch); its makespan is the latest
completion of its jobs (they all start at time zero), averaged over the seeds
in integer nanoseconds. A candidate whose jobs did not all finish within
`plan.limit_s` ranks after every one that did. Ties keep enumeration order
(candidates.py: coarser partitionings first), so the ranking is as
deterministic as the simulator.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhpc import _core, sim
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


def check_jobs(host: HostFile, jobs: JobsFile, cand: Candidate, jobs_path: str | Path) -> None:
    """The native core's verdict on the jobs as the first candidate places them:
    PlanError naming JOBS.toml and the job's field (its `class`, its `ranks`)."""
    text = scen.text(scen.build(host, jobs, cand))
    try:
        _core.estimate_memory(text, str(jobs_path))
    except ValueError as exc:
        msg = str(exc)
        if not re.search(r"field `jobs\[\d+\]", msg):
            raise PlanError(f"planner scenario for {cand.label} rejected by the simulator: {msg}") from None
        raise PlanError(re.sub(r"(jobs\[\d+\])\.params\.class", r"\1.class", msg)) from None


def rank(host: HostFile, topo: Topology, jobs: JobsFile, *, jobs_path: str | Path = "jobs.toml",
         max_memory: int | None = None) -> Ranking:
    """Simulate every feasible candidate and order them by mean makespan."""
    cands = enumerate_candidates(host, topo, jobs)
    feasible = [c for c in cands if c.infeasible is None]
    infeasible = [c for c in cands if c.infeasible is not None]
    if not feasible:
        raise PlanError(f"{jobs_path}: no partitioning of this host holds the jobs: "
                        + "; ".join(sorted({c.infeasible or "" for c in infeasible})))
    check_jobs(host, jobs, feasible[0], jobs_path)
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
    order = {id(r): k for k, r in enumerate(ranked)}
    ranked.sort(key=lambda r: (r.makespan_ns is None, r.makespan_ns or 0, order[id(r)]))
    return Ranking(host, topo, jobs, ranked, infeasible, scen.omitted(), wall, len(batch),
                   sorted(scen.features()))


def plan_files(host_path: str | Path, jobs_path: str | Path, *, seeds: int | None = None,
               max_memory: int | None = None) -> Ranking:
    """HOST.toml and JOBS.toml read, checked, every candidate simulated and ranked;
    `seeds` overrides JOBS.toml's plan.seeds."""
    from vhpc.plan import inputs, topology

    host = inputs.load_host(host_path)
    jobs = inputs.load_jobs(jobs_path)
    if seeds is not None:
        jobs = jobs.model_copy(update={"plan": jobs.plan.model_copy(update={"seeds": seeds})})
    topo = topology.resolve(host, host_path)
    return rank(host, topo, jobs, jobs_path=jobs_path, max_memory=max_memory)
