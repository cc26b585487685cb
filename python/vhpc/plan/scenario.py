"""A candidate as a simulator scenario (docs/sim.md's schema, a dict for tomli_w).

The host's `[host]` is copied from HOST.toml; the platform picks the scheduler
(kvm: `linux`, each vCPU a host thread; xen: `credit`), the memory placement
(kvm: `first_touch`, at the host page fault; xen: `preallocate`, at launch) and
the NIC (kvm: `virtio`; xen: `netfront`). Each VM is a domain with its vCPUs
pinned as the candidate says, its memory (`mem_mib`), `vnuma` (also for a VM
within one NUMA node, whose memory the files bind to that node), `nic` and, with
the ivshmem channel, its `ivshmem` group; `[mpi] transports` lets ranks of one VM
use `sm`, ranks of VMs sharing a group `ivshmem`, the rest `net`. A dom0 (the
host's relay of virtual-network packets) runs on the guests' cores.

`features()` asks the native core which parts of that schema it accepts, so a
simulator built without the NUMA memory model or the channel model still ranks:
without channels, the ivshmem channel is `between_domains = "shm"` and the network
`"dom0"`; without the memory model, memory fields are left out. `omitted()` says
what was left out, and `vhpc plan` prints it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import tomli_w

from vhpc import _core
from vhpc.plan.candidates import Candidate
from vhpc.plan.inputs import HostFile, JobsFile

PLATFORMS = {
    "kvm": {"scheduler": "linux", "placement": "first_touch", "nic": "virtio"},
    "xen": {"scheduler": "credit", "placement": "preallocate", "nic": "netfront"},
}

#: What each optional part of the schema adds, as a probe the native core accepts or not.
PROBES: dict[str, dict[str, Any]] = {
    "numa": {"memory": {"placement": "first_touch"},
             "domain": {"mem_mib": 1024, "vnuma": False}},
    "channels": {"mpi": {"transports": ["sm", "ivshmem", "net"]},
                 "domain": {"nic": "virtio", "ivshmem": "probe"}},
}

DESCRIPTIONS = {
    "numa": "NUMA memory placement and bandwidth (memory, mem_mib, vnuma)",
    "channels": "inter-VM channels (nic, ivshmem, mpi.transports): ivshmem simulated as "
                "shared memory between domains, the network as dom0's relay",
}


@cache
def features() -> frozenset[str]:
    """The optional schema parts this build of the native core accepts."""
    have = set()
    for name, probe in PROBES.items():
        scenario: dict[str, Any] = {
            "host": {"cores": 2},
            "domains": [{"name": "dom0", "dom0": True},
                        {"name": "a", **probe["domain"]}, {"name": "b", **probe["domain"]}],
            "jobs": [{"name": "j", "workload": "pingpong", "ranks": ["a", "b"]}],
        }
        for section in ("memory", "mpi"):
            if section in probe:
                scenario[section] = probe[section]
        try:
            _core.estimate_memory(tomli_w.dumps(scenario), f"probe-{name}")
        except ValueError:
            continue
        have.add(name)
    return frozenset(have)


def omitted() -> list[str]:
    """What the ranking cannot see with this simulator build (docs/plan.md)."""
    return [DESCRIPTIONS[name] for name in PROBES if name not in features()]


def build(host: HostFile, jobs: JobsFile, cand: Candidate, *, have: frozenset[str] | None = None,
          ) -> dict[str, Any]:
    """The scenario of one feasible candidate."""
    have = features() if have is None else have
    platform = PLATFORMS[host.platform]
    scenario: dict[str, Any] = {
        "name": f"plan {cand.label}",
        "seed": 1,
        "limit_ms": jobs.plan.limit_s * 1000,
        "host": host.host.model_dump(exclude_none=True),
        "hypervisor": {"scheduler": platform["scheduler"]},
    }
    if "numa" in have:
        scenario["memory"] = {"placement": platform["placement"], **(host.memory or {})}
    if "channels" in have:
        scenario["mpi"] = {"transports": ["sm", "ivshmem", "net"] if cand.channel == "ivshmem"
                           else ["sm", "net"]}
    else:
        scenario["mpi"] = {"between_domains": "shm" if cand.channel == "ivshmem" else "dom0"}
    domains: list[dict[str, Any]] = [{"name": "dom0", "dom0": True, "vcpus": host.dom0_vcpus}]
    for vm in cand.vms:
        d: dict[str, Any] = {"name": vm.name, "vcpus": vm.vcpus, "pin": [list(p) for p in vm.pin]}
        if "numa" in have:
            d["mem_mib"] = vm.mem_mib
            # The files bind a VM's memory to the nodes of its cores (numatune strict,
            # xl's cpus= affinity); within one node that is the simulator's vnuma
            # placement: its memory on the host node of its vCPUs.
            d["vnuma"] = vm.vnuma or len(vm.nodes) == 1
        if "channels" in have:
            d["nic"] = platform["nic"]
            if vm.ivshmem is not None:
                d["ivshmem"] = vm.ivshmem
        domains.append(d)
    scenario["domains"] = domains
    scenario["jobs"] = []
    for job in jobs.jobs:
        params = dict(job.params)
        if job.class_ is not None:
            params["class"] = job.class_
        scenario["jobs"].append({"name": job.name, "workload": job.workload,
                                 "ranks": list(cand.ranks[job.name]),
                                 "wait_policy": job.wait_policy, "params": params})
    return scenario


def text(scenario: dict[str, Any]) -> str:
    return tomli_w.dumps(scenario)
