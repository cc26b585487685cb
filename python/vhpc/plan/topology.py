"""The host's topology as the planner needs it: sockets, NUMA nodes, their cores.

HOST.toml's `[host]` is the simulator's own section, so the simulator is the one
judge of it: `check_host` has the native core validate it (errors name HOST.toml
and the field, `host.sockets`), and `resolve` reads the cores, sockets and
nodes back (a preset filled in, default node cores and distances applied) so the
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
    #: None: the host file does not say (no fit check against it).
    mem_mib: int | None


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
        mem = ("" if any(n.mem_mib is None for n in self.nodes)
               else f", {sum(n.mem_mib or 0 for n in self.nodes)} MiB")
        return (f"{self.cores} cores, {self.sockets} socket(s), {len(self.nodes)} NUMA node(s){mem}")


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


def check_host(host: HostFile, origin: str | Path) -> None:
    """The native core's verdict on `[host]`: PlanError naming HOST.toml and the field."""
    try:
        _core.estimate_memory(tomli_w.dumps(probe_scenario(host)), str(origin))
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def resolve(host: HostFile, origin: str | Path) -> Topology:
    """Cores, sockets, nodes (their cores and memory) and distances of the host."""
    check_host(host, origin)
    resolved = native_host(host, origin)
    if resolved is not None:
        return from_native(resolved)
    return explicit(host, origin)


def native_host(host: HostFile, origin: str | Path) -> dict[str, Any] | None:
    """The host as the simulator resolved it (presets, defaults), if the native core
    can say (`_core.resolve_host`); None with an older core."""
    fn = getattr(_core, "resolve_host", None)
    if fn is None:
        return None
    try:
        return json.loads(fn(tomli_w.dumps(probe_scenario(host)), str(origin)))
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def from_native(h: dict[str, Any]) -> Topology:
    nodes = tuple(Node(i, tuple(n["cores"]), n.get("mem_mib")) for i, n in enumerate(h["nodes"]))
    return Topology(h["cores"], h["sockets"], nodes, tuple(tuple(r) for r in h["distance"]))


def explicit(host: HostFile, origin: str | Path) -> Topology:
    """The topology from explicit fields, with the defaults docs/sim.md states
    (contiguous even split of cores over nodes, 10 local / 20 remote)."""
    h = host.host
    if h.preset is not None:
        raise PlanError(f"{origin}: field `host.preset`: this build of the simulator cannot "
                        "resolve presets; give cores, sockets and numa_nodes")
    assert h.cores is not None  # check_host: the simulator requires it without a preset
    n_nodes = len(h.nodes) if h.nodes else (h.numa_nodes or 1)
    per = h.cores // n_nodes
    nodes = []
    for i in range(n_nodes):
        spec = h.nodes[i] if h.nodes else None
        cores = tuple(spec.cores) if spec and spec.cores else tuple(range(i * per, (i + 1) * per))
        nodes.append(Node(i, cores, spec.mem_mib if spec else None))
    distance = (tuple(tuple(r) for r in h.distance) if h.distance else
                tuple(tuple(10 if i == j else 20 for j in range(n_nodes)) for i in range(n_nodes)))
    return Topology(h.cores, h.sockets or 1, tuple(nodes), distance)


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
