"""The jobs as the simulator sees them: checked, and the memory each needs.

The native core validates the jobs (workload parameters, rank counts: errors
name JOBS.toml and the job's field, `jobs[0].class`) and says how much memory
each rank of a memory-aware workload touches (NPB's arrays for the class:
crates/vhpc-sim/src/workload/npb_memory.rs). A job's `footprint_mib` defaults
to that; a smaller one is refused, since the simulator would refuse a VM that
cannot hold its ranks; a larger one sizes the VMs larger.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import tomli_w

from vhpc import _core
from vhpc.plan.inputs import HostFile, JobsFile, PlanError, error


def probe_scenario(host: HostFile, jobs: JobsFile) -> dict[str, Any]:
    """The jobs, each rank in one domain, on the host (no memory model: nothing placed)."""
    return {
        "name": "plan-jobs-probe",
        "host": host.host.model_dump(exclude_none=True),
        "domains": [{"name": "probe", "vcpus": 1}],
        "jobs": [{"name": job.name, "workload": job.workload, "ranks": ["probe"] * job.ranks,
                  "wait_policy": job.wait_policy,
                  "params": {**job.params, **({"class": job.class_} if job.class_ else {})}}
                 for job in jobs.jobs],
    }


def complete(host: HostFile, jobs: JobsFile, jobs_path: str | Path) -> JobsFile:
    """The jobs checked by the native core, each with its `footprint_mib`."""
    try:
        got = json.loads(_core.resolve_scenario(tomli_w.dumps(probe_scenario(host, jobs)),
                                                str(jobs_path)))
    except ValueError as exc:
        # The job's class is `jobs[i].class` in JOBS.toml, `params.class` in a scenario.
        raise PlanError(re.sub(r"(jobs\[\d+\])\.params\.class", r"\1.class", str(exc))) from None
    out = []
    for i, (job, sim) in enumerate(zip(jobs.jobs, got["jobs"])):
        kib = sim["footprint_kib"]
        need = None if kib is None else math.ceil(kib * job.ranks / 1024)
        if job.footprint_mib is None:
            if need is None:
                raise error(jobs_path, f"jobs[{i}].footprint_mib",
                            f"required: the simulator's memory model has no footprint for "
                            f"{job.workload}")
            job = job.model_copy(update={"footprint_mib": need})
        elif need is not None and job.footprint_mib < need:
            raise error(jobs_path, f"jobs[{i}].footprint_mib",
                        f"is {job.footprint_mib} MiB, less than the {need} MiB the simulator's "
                        f"{job.workload} class {job.class_ or '(default)'} touches on "
                        f"{job.ranks} ranks; leave it out to use that")
        out.append(job)
    return jobs.model_copy(update={"jobs": out})
