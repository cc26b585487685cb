"""Plan: partition a host into VMs for a set of MPI or OpenMP jobs (`vhpc plan`).

inputs.py reads HOST.toml and JOBS.toml (pydantic; errors name file and field),
topology.py resolves the host into sockets, NUMA nodes and cores, footprint.py
has the native core check the jobs and size their memory, candidates.py
enumerates the partitionings (VMs, their cores and nodes, channel, pinning, where
ranks go), scenario.py turns each into a simulator scenario, rank.py runs them all
with vhpc.sim and orders them by predicted makespan, libvirt.py and xl.py write the
winner as libvirt domain XML and xl configurations (xl.py parses them back),
output.py writes the directory and explain.py shows the ranking. docs/plan.md.
"""

from vhpc.plan.inputs import HostFile, JobsFile, PlanError, load_host, load_jobs
from vhpc.plan.candidates import Candidate, Vm, enumerate_candidates
from vhpc.plan.rank import Ranked, Ranking, plan_files, rank
from vhpc.plan.output import write_plan

__all__ = [
    "Candidate",
    "HostFile",
    "JobsFile",
    "PlanError",
    "Ranked",
    "Ranking",
    "Vm",
    "enumerate_candidates",
    "load_host",
    "load_jobs",
    "plan_files",
    "rank",
    "write_plan",
]
