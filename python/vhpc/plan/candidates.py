"""The partitioning choices `vhpc plan` ranks.

A candidate is a way to cut the host into VMs and run the jobs in them:

* **partitioning**: one VM spanning the host (`host`), one per socket (`socket`),
  one per NUMA node (`node`, when nodes are not sockets), two per socket
  (`half-socket`), one per core (`core`, hosts up to 64 cores). Each VM owns the
  cores of its part, one vCPU per core.
* **channel** between VMs: the virtual network (`net`: virtio on KVM, netfront
  through dom0 on Xen) or an ivshmem shared-memory device (`ivshmem`) that the
  VMs holding a job's ranks share. A candidate none of whose jobs crosses VMs
  has no channel choice (`-`).
* **pinning**: each vCPU pinned to its own core (`core`), or free to run on the
  VM's cores of its NUMA node (`node`).
* **placement** of ranks: `packed` (a job fills one VM before the next) or
  `spread` (a job's ranks dealt round robin over the VMs).
* **vNUMA**: a VM spanning NUMA nodes shows them to the guest (one guest node per
  host node it spans), or, as a candidate of its own, does not.

Candidates that place ranks identically are listed once; a candidate that
cannot hold the jobs (an OpenMP job larger than any VM, memory beyond a node's)
is kept with the reason (`infeasible`), shown by `--explain` and never ranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vhpc.plan.inputs import HostFile, JobsFile
from vhpc.plan.topology import Topology

PARTITIONINGS = ("host", "socket", "node", "half-socket", "core")
#: One VM per core only up to this many cores ("where sensible": beyond it the
#: VMs' guest kernels alone are a large share of the memory and of dom0's work).
MAX_CORE_VMS = 64


@dataclass(frozen=True)
class Vm:
    name: str
    #: Host cores the VM owns; vCPU i runs on (or near) cores[i].
    cores: tuple[int, ...]
    #: Host NUMA nodes of those cores.
    nodes: tuple[int, ...]
    #: Allowed host cores per vCPU.
    pin: tuple[tuple[int, ...], ...]
    #: Guest NUMA cells exposed (only for a VM spanning nodes).
    vnuma: bool
    mem_mib: int
    #: Memory each vCPU's ranks use, with an even share of the guest's own (MiB):
    #: where the guest cells' memory goes.
    vcpu_mib: tuple[float, ...]
    #: The ivshmem group it shares, if any.
    ivshmem: str | None
    #: (job, rank) pairs that run in it.
    ranks: tuple[tuple[str, int], ...]

    @property
    def vcpus(self) -> int:
        return len(self.cores)

    def cells(self, topo: Topology) -> list[tuple[int, tuple[int, ...], int]]:
        """Guest NUMA cells: (host node, the VM's vCPUs on it, MiB), one per host node
        the VM spans, each with the memory of the vCPUs in it (`vcpu_mib`); one cell
        over every vCPU when vNUMA is not exposed."""
        if not self.vnuma:
            return [(self.nodes[0], tuple(range(self.vcpus)), self.mem_mib)]
        groups = [tuple(i for i, c in enumerate(self.cores) if topo.node_of[c] == n)
                  for n in self.nodes]
        return list(zip(self.nodes, groups, split(self.mem_mib,
                                                  [sum(self.vcpu_mib[i] for i in g) for g in groups])))

    def node_mem(self, topo: Topology) -> dict[int, int]:
        """MiB the VM takes from each host node (its cells; without vNUMA, by cores)."""
        if self.vnuma or len(self.nodes) == 1:
            return {n: size for n, _, size in self.cells(topo)}
        # A guest that does not see the nodes: its memory ends up spread like its vCPUs.
        per = [sum(1 for c in self.cores if topo.node_of[c] == n) for n in self.nodes]
        return dict(zip(self.nodes, split(self.mem_mib, per)))


def split(total: int, weights: list[float] | list[int]) -> list[int]:
    """`total` in whole parts proportional to `weights`, adding up to `total`
    (largest remainders first, ties to the earlier part)."""
    w = sum(weights)
    exact = [total * x / w for x in weights] if w else [total / len(weights)] * len(weights)
    parts = [math.floor(x) for x in exact]
    order = sorted(range(len(parts)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:total - sum(parts)]:
        parts[i] += 1
    return parts


@dataclass(frozen=True)
class Candidate:
    partitioning: str
    channel: str       # "net", "ivshmem", or "-" when no job crosses VMs
    pinning: str       # "core" | "node"
    placement: str     # "packed" | "spread"
    vnuma: bool        # exposed to VMs spanning nodes
    vms: tuple[Vm, ...]
    #: Per job, the VM of each rank.
    ranks: dict[str, tuple[str, ...]] = field(hash=False, compare=False)
    infeasible: str | None = None

    @property
    def label(self) -> str:
        spans = any(len(vm.nodes) > 1 for vm in self.vms)
        numa = ("/vnuma" if self.vnuma else "/no-vnuma") if spans else ""
        return f"{self.partitioning}/{self.channel}/pin-{self.pinning}/{self.placement}{numa}"

    @property
    def crossing_jobs(self) -> list[str]:
        return [job for job, vms in self.ranks.items() if len(set(vms)) > 1]


def parts(topo: Topology, which: str) -> list[tuple[int, ...]] | None:
    """The cores of each VM for a partitioning, or None where it does not apply."""
    if which == "host":
        return [tuple(range(topo.cores))]
    if which == "socket":
        return [topo.socket_cores(s) for s in range(topo.sockets)] if topo.sockets > 1 else None
    if which == "node":
        nodes = [tuple(sorted(n.cores)) for n in topo.nodes]
        sockets = [topo.socket_cores(s) for s in range(topo.sockets)]
        return nodes if len(nodes) > 1 and sorted(nodes) != sorted(sockets) else None
    if which == "half-socket":
        n = topo.cores_per_socket
        if n < 2 or n % 2:
            return None
        return [c for s in range(topo.sockets) for c in (topo.socket_cores(s)[:n // 2],
                                                          topo.socket_cores(s)[n // 2:])]
    if which == "core":
        return [(c,) for c in range(topo.cores)] if 1 < topo.cores <= MAX_CORE_VMS else None
    raise ValueError(which)


def place(jobs: JobsFile, sizes: list[int], how: str) -> dict[str, tuple[int, ...]] | str:
    """Each job's ranks as VM indices, or why they do not fit. One rank per vCPU;
    more ranks than vCPUs in all over-commit every VM alike."""
    total = sum(j.ranks for j in jobs.jobs)
    per_vcpu = max(1, math.ceil(total / sum(sizes)))
    free = [s * per_vcpu for s in sizes]
    out: dict[str, tuple[int, ...]] = {}
    cursor = 0
    for job in jobs.jobs:
        if job.model == "openmp":
            fits = [v for v in range(len(free)) if free[v] >= job.ranks and sizes[v] >= job.ranks]
            if not fits:
                return (f"OpenMP job {job.name!r} needs its {job.ranks} threads in one VM; "
                        f"the largest VM here has {max(sizes)} vCPUs")
            v = fits[0]
            free[v] -= job.ranks
            out[job.name] = (v,) * job.ranks
            continue
        got = []
        for _ in range(job.ranks):
            start = 0 if how == "packed" else cursor
            v = next(x % len(free) for x in range(start, start + len(free)) if free[x % len(free)] > 0)
            free[v] -= 1
            got.append(v)
            cursor = v + 1
        out[job.name] = tuple(got)
    return out


def vcpu_memory(jobs: JobsFile, ranks: tuple[tuple[str, int], ...], vcpus: int) -> list[float]:
    """MiB per vCPU: the guest's own share evenly, each rank's footprint on the vCPU
    it runs on (the simulator deals a domain's ranks to its vCPUs round robin)."""
    per = [jobs.plan.guest_os_mib / vcpus] * vcpus
    size = {job.name: job.footprint_mib / job.ranks for job in jobs.jobs}
    for k, (job, _) in enumerate(ranks):
        per[k % vcpus] += size[job]
    return per


def memory_problem(topo: Topology, vms: list[Vm]) -> str | None:
    used: dict[int, int] = {}
    for vm in vms:
        for n, mib in vm.node_mem(topo).items():
            used[n] = used.get(n, 0) + mib
    for node in topo.nodes:
        if used.get(node.id, 0) > node.mem_mib:
            return (f"the VMs need {used[node.id]} MiB of NUMA node {node.id}'s "
                    f"{node.mem_mib} MiB")
    return None


def build(host: HostFile, topo: Topology, jobs: JobsFile, partitioning: str,
          cores: list[tuple[int, ...]], channel: str, pinning: str, placement: str,
          vnuma: bool) -> Candidate:
    sizes = [len(c) for c in cores]
    placed = place(jobs, sizes, placement)
    names = [f"{host.name}-vm{i}" for i in range(len(cores))]
    if isinstance(placed, str):
        return Candidate(partitioning, channel, pinning, placement, vnuma, (), {}, placed)
    crossing = {v for vs in placed.values() if len(set(vs)) > 1 for v in vs}
    group = f"{host.name}-shm"
    vms = []
    for v, vm_cores in enumerate(cores):
        nodes = topo.nodes_of(vm_cores)
        if pinning == "core":
            pin = tuple((c,) for c in vm_cores)
        else:
            pin = tuple(tuple(x for x in vm_cores if topo.node_of[x] == topo.node_of[c])
                        for c in vm_cores)
        ranks = tuple((job.name, r) for job in jobs.jobs
                      for r, at in enumerate(placed[job.name]) if at == v)
        per_vcpu = vcpu_memory(jobs, ranks, len(vm_cores))
        vms.append(Vm(names[v], vm_cores, nodes, pin, vnuma and len(nodes) > 1,
                      math.ceil(sum(per_vcpu) - 1e-9), tuple(per_vcpu),
                      group if channel == "ivshmem" and v in crossing else None, ranks))
    by_name = {job: tuple(names[v] for v in vs) for job, vs in placed.items()}
    return Candidate(partitioning, channel, pinning, placement, vnuma, tuple(vms), by_name,
                     memory_problem(topo, vms))


def enumerate_candidates(host: HostFile, topo: Topology, jobs: JobsFile) -> list[Candidate]:
    """Every distinct candidate, feasible ones first in enumeration order."""
    wanted = jobs.plan.partitionings or list(PARTITIONINGS)
    out: list[Candidate] = []
    seen: set[tuple] = set()
    for partitioning in PARTITIONINGS:
        if partitioning not in wanted:
            continue
        cores = parts(topo, partitioning)
        if cores is None:
            continue
        spans = any(len(topo.nodes_of(c)) > 1 for c in cores)
        vnumas = [True, False] if spans and jobs.plan.try_vnuma_off else [True]
        pinnings = ["core", "node"] if max(len(c) for c in cores) > 1 else ["core"]
        placements = ["packed", "spread"] if len(cores) > 1 else ["packed"]
        for vnuma in vnumas:
            for pinning in pinnings:
                for placement in placements:
                    for channel in ("net", "ivshmem"):
                        cand = build(host, topo, jobs, partitioning, cores, channel, pinning,
                                     placement, vnuma)
                        if not cand.crossing_jobs:  # no traffic between VMs: no channel to choose
                            if channel == "ivshmem":
                                continue
                            cand = Candidate(cand.partitioning, "-", cand.pinning, cand.placement,
                                             cand.vnuma, cand.vms, cand.ranks, cand.infeasible)
                        key = (partitioning, cand.channel, pinning, vnuma,
                               tuple(sorted(cand.ranks.items())), cand.infeasible)
                        if key in seen:
                            continue
                        seen.add(key)
                        out.append(cand)
    out.sort(key=lambda c: c.infeasible is not None)  # stable: enumeration order otherwise
    return out
