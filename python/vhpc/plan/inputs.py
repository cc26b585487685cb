"""HOST.toml and JOBS.toml: what `vhpc plan` reads, validated with pydantic.

HOST.toml describes the machine: `platform` (kvm or xen: how memory is placed,
which scheduler runs vCPUs, which virtual NIC the guests get) and a `[host]`
section in the simulator's own schema (docs/sim.md: `preset`, or `cores`,
`sockets`, `numa_nodes`, `[[host.nodes]]`, `distance`), copied as is into every
candidate's scenario. JOBS.toml lists the jobs (`[[jobs]]`: an MPI job's ranks
or an OpenMP job's threads, its workload and class, its memory footprint) and
the planner's settings (`[plan]`). docs/plan.md shows both.

Every problem is a `PlanError` naming the file and the field, in the simulator's
style: ``jobs.toml: field `jobs[1].ranks`: must be at least 1, got 0``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError,
                      field_validator)

from vhpc import sim

#: Larger input files are not plans (a host and a few jobs fit in a few KiB).
MAX_FILE_BYTES = 1 << 20


class PlanError(sim.SimError):
    """Bad planner input, or a plan that cannot be made: exit code 2, one line."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Positive = Annotated[StrictInt, Field(ge=1)]


# --- HOST.toml ---------------------------------------------------------------------

class NodeSpec(Strict):
    """One NUMA node (`[[host.nodes]]`), as the simulator reads it."""

    cores: list[Annotated[StrictInt, Field(ge=0)]] | None = None
    mem_mib: Positive | None = None
    bandwidth_mb_s: Positive | None = None


class LinkSpec(Strict):
    """One interconnect link (`[[host.links]]`): two nodes, MB/s each way."""

    nodes: Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(min_length=2, max_length=2)]
    bandwidth_mb_s: Positive


class HostSection(Strict):
    """The simulator's `[host]` (docs/sim.md); the planner needs the topology."""

    preset: str | None = None
    cores: Annotated[StrictInt, Field(ge=1, le=4096)] | None = None
    sockets: Positive | None = None
    numa_nodes: Positive | None = None
    nodes: list[NodeSpec] | None = None
    distance: list[list[Annotated[StrictInt, Field(ge=10, le=254)]]] | None = None
    # Passed through to the simulator, which checks them (docs/sim.md, "NUMA
    # memory"): interconnect links, each socket's front-side bus, hardware-
    # assisted paging.
    links: list[LinkSpec] | None = None
    bus_mb_s: Positive | None = None
    hap: bool | None = None
    # Passed through: a host profile's costs (docs/predict.md).
    profile: str | None = None
    mpi: str | None = None


class HostFile(Strict):
    """HOST.toml."""

    #: Names the plan's VMs (<name>-vm0, ...); default: the host file's directory name.
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")] | None = None
    #: kvm: vCPUs are host threads under Linux's scheduler, guest memory placed at the
    #: host page fault (first touch), virtio NICs. xen: Credit, memory preallocated
    #: at launch, netfront NICs relayed by dom0.
    platform: Literal["kvm", "xen"] = "kvm"
    #: vCPUs of the host's own domain (dom0, or the KVM host's network threads),
    #: which relays the virtual network's packets; it runs on the guests' cores.
    dom0_vcpus: Annotated[StrictInt, Field(ge=1, le=64)] = 1
    host: HostSection
    #: The simulator's `[memory]` section, overriding what `platform` implies.
    memory: dict[str, Any] | None = None


# --- JOBS.toml ---------------------------------------------------------------------

class Job(Strict):
    """One job to place (`[[jobs]]`)."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")]
    #: mpi: ranks may sit in different VMs; openmp: threads share one address space,
    #: so the whole job lives in one VM. Default: openmp for the OpenMP-style
    #: workloads (`npb.omp.*`), else mpi.
    model: Literal["mpi", "openmp"] | None = None
    #: A simulator workload (`vhpc sim workloads`).
    workload: str
    #: MPI ranks, or OpenMP threads.
    ranks: Annotated[StrictInt, Field(ge=1, le=4096)]
    #: NPB class (S W A B C): problem size, and the footprint the simulator derives.
    #: Absent: the workload's default.
    class_: Literal["S", "W", "A", "B", "C"] | None = Field(default=None, alias="class")
    #: Resident memory of the whole job in MiB: what the VMs that hold it need.
    #: Default: the simulator's footprint of the workload and class
    #: (footprint.py); required for a workload the memory model does not know.
    footprint_mib: Positive | None = None
    wait_policy: str = "block"
    #: More workload parameters (docs/sim.md, "Workloads").
    params: dict[str, Any] = {}


class PlanSettings(Strict):
    """`[plan]`: how candidates are sized and simulated."""

    #: Seeds each candidate runs with; ranked by the mean makespan.
    seeds: Annotated[StrictInt, Field(ge=1, le=100)] = 1
    #: Simulated time limit: a candidate whose jobs have not all finished by then ranks last.
    limit_s: Annotated[StrictInt, Field(ge=1, le=1_000_000)] = 3600
    #: Candidates within this many percent of the fastest count as tied, and the
    #: first of them in enumeration order (fewest VMs, pinned, packed) wins: the
    #: NPB workloads vary each compute phase by ±1 % with the seed (jitter_ppm),
    #: so smaller differences say more about the seed than about the partitioning.
    tolerance_pct: Annotated[float, Field(ge=0, le=100)] = 1.0
    #: Memory of each VM beyond its jobs' footprints (guest kernel, MPI, buffers).
    guest_os_mib: Annotated[StrictInt, Field(ge=0)] = 512
    #: Size of the ivshmem device (a power of two: QEMU maps it as a PCI BAR).
    ivshmem_mib: Positive = 64
    #: Partitionings to consider (default all that make sense for the host).
    partitionings: list[Literal["host", "socket", "node", "half-socket", "core"]] | None = None
    #: VMs that span NUMA nodes are tried with vNUMA exposed and, as candidates of
    #: their own, without (the guest then places its pages unaware of the nodes).
    try_vnuma_off: StrictBool = True

    @field_validator("ivshmem_mib")
    @classmethod
    def power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError("must be a power of two")
        return v


class JobsFile(Strict):
    """JOBS.toml."""

    plan: PlanSettings = PlanSettings()
    jobs: Annotated[list[Job], Field(min_length=1, max_length=64)]

    @field_validator("jobs")
    @classmethod
    def unique_names(cls, jobs: list[Job]) -> list[Job]:
        names = [job.name for job in jobs]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate job names: {', '.join(dup)}")
        return jobs


# --- reading -----------------------------------------------------------------------

def field_of(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as the file's field: `jobs[1].ranks`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "constrained-", "literal[", "list[", "int", "str",
                                   "bool", "dict[")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def error(origin: str | Path, field: str, message: str) -> PlanError:
    """A PlanError in the simulator's words (scenario.rs's ScenarioError)."""
    return PlanError(f"{origin}: field `{field}`: {message}" if field else f"{origin}: {message}")


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise PlanError(f"{path}: no such file") from None
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise PlanError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB: not a plan input")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: not valid TOML: {exc}") from None


def validate(model: type[Strict], raw: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (a typo?)"
        elif err["type"] == "missing":
            msg = "required"
        elif isinstance(err.get("input"), (str, int, float)):
            msg += f", got {err['input']!r}"
        raise error(path, field_of(err["loc"]), msg) from None


def load_host(path: str | Path) -> HostFile:
    """HOST.toml, validated; PlanError naming the file and the field."""
    path = Path(path)
    host = validate(HostFile, read_toml(path), path)
    if host.name is None:
        host = host.model_copy(update={"name": path.resolve().parent.name or "host"})
    return host


def load_jobs(path: str | Path) -> JobsFile:
    """JOBS.toml, validated (workloads and wait policies against the simulator's
    catalogue); PlanError naming the file and the field."""
    path = Path(path)
    jobs = validate(JobsFile, read_toml(path), path)
    cat = sim.catalogue()
    workloads = [name for name, _ in cat["workloads"]]
    resolved = []
    for i, job in enumerate(jobs.jobs):
        if job.workload not in workloads:
            raise error(path, f"jobs[{i}].workload",
                        f"unknown workload {job.workload!r}; known: {', '.join(workloads)}")
        if job.wait_policy not in cat["wait_policies"]:
            raise error(path, f"jobs[{i}].wait_policy",
                        f"unknown wait policy {job.wait_policy!r}; known: "
                        f"{', '.join(cat['wait_policies'])}")  # type: ignore[arg-type]
        omp = job.workload.startswith("npb.omp.")
        if job.model is None:
            job = job.model_copy(update={"model": "openmp" if omp else "mpi"})
        elif job.model == "mpi" and omp:
            raise error(path, f"jobs[{i}].model", f"{job.workload} is an OpenMP-style workload "
                        "(threads sharing arrays in one VM): model = \"openmp\"")
        if "class" in job.params:
            raise error(path, f"jobs[{i}].params.class", "give the class as the job's `class`")
        if job.workload == "noise":
            raise error(path, f"jobs[{i}].workload", "noise never ends: nothing to plan for")
        resolved.append(job)
    return jobs.model_copy(update={"jobs": resolved})
