"""The host's topology as the planner needs it: sockets, NUMA nodes, their cores.

HOST.toml's `[host]` is the simulator's own section, so the simulator is the one
judge of it: `resolve` has the native core validate it (errors name HOST.toml
and the field, `host.sockets`) and reads the cores, sockets and nodes back (a
preset filled in, default node cores, memory and distances applied), so the
planner and the simulator never disagree about the machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import tomli_w

from vhpc import _core
from vhpc.plan.inputs import HostFile, PlanError


@dataclass(frozen=True)
class Node:
    id: int
    cores: tuple[int, ...]
    #: The node's memory: HOST.toml's, the preset's, or the simulator's default.
    mem_mib: int


@dataclass(frozen=True)
class Topology:
    cores: int
    sockets: int
    nodes: tuple[Node, ...]
    #: ACPI SLIT-like distances, 10 = local.
    distance: tuple[tuple[int, ...], ...]

    @property
    def cores_per_socket(self) -> int:
        return self.cores // self.sockets

    def socket_cores(self, socket: int) -> tuple[int, ...]:
        n = self.cores_per_socket
        return tuple(range(socket * n, (socket + 1) * n))

    @cached_property
    def node_of(self) -> dict[int, int]:
        return {c: n.id for n in self.nodes for c in n.cores}

    def nodes_of(self, cores: tuple[int, ...]) -> tuple[int, ...]:
        """The NUMA nodes the cores belong to, in order."""
        return tuple(sorted({self.node_of[c] for c in cores}))

    def describe(self) -> str:
        return (f"{self.cores} cores, {self.sockets} socket(s), {len(self.nodes)} NUMA node(s), "
                f"{sum(n.mem_mib for n in self.nodes)} MiB")


def probe_scenario(host: HostFile) -> dict[str, Any]:
    """The smallest scenario around HOST.toml's `[host]`: one domain, a 2-rank ping-pong."""
    section = host.host.model_dump(exclude_none=True)
    return {
        "name": "plan-host-probe",
        "host": section,
        "domains": [{"name": "probe", "vcpus": 1}],
        "jobs": [{"name": "probe", "workload": "pingpong", "ranks": ["probe", "probe"],
                  "params": {"iterations": 1}}],
    }


def resolve(host: HostFile, origin: str | Path) -> Topology:
    """Cores, sockets, nodes (their cores and memory) and distances of the host,
    as the native core resolves them (`_core.resolve_scenario`); PlanError naming
    HOST.toml and the field if the simulator refuses the section."""
    try:
        h = json.loads(_core.resolve_scenario(tomli_w.dumps(probe_scenario(host)), str(origin)))["host"]
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    nodes = tuple(Node(i, tuple(n["cores"]), n["mem_mib"]) for i, n in enumerate(h["nodes"]))
    return Topology(h["cores"], h["sockets"], nodes, tuple(tuple(r) for r in h["distance"]))


def cpulist(cores: tuple[int, ...] | list[int]) -> str:
    """Cores as libvirt and xl write them: `0-3,8,10-11`."""
    out: list[str] = []
    for c in sorted(set(cores)):
        if out and out[-1].split("-")[-1] == str(c - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def parse_cpulist(text: str) -> tuple[int, ...]:
    """The inverse of cpulist: `0-3,8` -> (0, 1, 2, 3, 8)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)
