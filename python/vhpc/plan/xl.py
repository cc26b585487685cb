"""A planned VM as an xl configuration (`xl create DIR/<vm>.cfg`), and back.

The keys follow xl.cfg(5): `name`, `type = "hvm"`, `memory` (MiB), `vcpus`,
`cpus = ["0", "1", ...]` (one CPU list per vCPU: vCPU i's hard affinity; Xen
also places the guest's memory on the nodes of that affinity), with vNUMA
`vnuma = [ ["pnode=0", "size=2048", "vcpus=0-3", "vdistances=10,20"], ... ]`
(one virtual node per host node the VM spans; sizes add up to `memory`), a
`vif` on the `xenbr0` bridge, and where the ivshmem channel was chosen the
QEMU arguments that give an HVM guest an ivshmem-plain device on a file shared
by the group (`device_model_args_hvm`; Xen itself has no ivshmem device).

An xl configuration's values are strings, integers and (nested) lists, written
as Python writes its literals, so `parse` reads a file with Python's own parser
(`ast`) and accepts only assignments of such literals. `VmConfig.of` (from a
plan) and `VmConfig.read` (from a file) meet in one comparable record: the
tests write every VM and read it back.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from vhpc.plan.candidates import Vm
from vhpc.plan.inputs import JobsFile
from vhpc.plan.topology import Topology, cpulist, parse_cpulist

Value = str | int | list[Any]


class XlError(ValueError):
    """Not an xl configuration vhpc reads."""


@dataclass(frozen=True)
class VnumaNode:
    pnode: int
    size_mib: int
    vcpus: tuple[int, ...]
    vdistances: tuple[int, ...]


@dataclass(frozen=True)
class VmConfig:
    """What an xl configuration says about a planned VM."""

    name: str
    memory_mib: int
    vcpus: int
    cpus: tuple[tuple[int, ...], ...]
    vnuma: tuple[VnumaNode, ...]
    ivshmem: str | None
    ivshmem_mib: int | None

    @classmethod
    def of(cls, vm: Vm, topo: Topology, jobs: JobsFile) -> "VmConfig":
        vnuma = ()
        if vm.vnuma:
            cells = vm.cells(topo)
            vnuma = tuple(VnumaNode(node, mib, vcpus,
                                    tuple(topo.distance[node][other] for other, _, _ in cells))
                          for node, vcpus, mib in cells)
        return cls(vm.name, vm.mem_mib, vm.vcpus, vm.pin, vnuma, vm.ivshmem,
                   jobs.plan.ivshmem_mib if vm.ivshmem else None)

    @classmethod
    def read(cls, text: str, origin: str = "<xl>") -> "VmConfig":
        cfg = parse(text, origin)
        try:
            vnuma = tuple(vnuma_node(spec) for spec in cfg.get("vnuma", []))
            shm = ivshmem_of(cfg.get("device_model_args_hvm", []))
            return cls(cfg["name"], cfg["memory"], cfg["vcpus"],
                       tuple(parse_cpulist(c) for c in cfg["cpus"]), vnuma,
                       shm[0] if shm else None, shm[1] if shm else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise XlError(f"{origin}: not a vhpc plan VM: {exc!r}") from None


def vnuma_node(spec: list[str]) -> VnumaNode:
    kv = dict(item.split("=", 1) for item in spec)
    return VnumaNode(int(kv["pnode"]), int(kv["size"]), parse_cpulist(kv["vcpus"]),
                     tuple(int(d) for d in kv["vdistances"].split(",")))


def ivshmem_of(args: list[str]) -> tuple[str, int] | None:
    """(group, MiB) from the QEMU arguments `write` puts in device_model_args_hvm."""
    for arg in args:
        if arg.startswith("memory-backend-file,"):
            kv = dict(item.split("=", 1) for item in arg.split(",")[1:])
            return kv["mem-path"].removeprefix("/dev/shm/"), int(kv["size"].removesuffix("M"))
    return None


def literal(value: Value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, int):
        return str(value)
    return "[" + ", ".join(literal(v) for v in value) + "]"


def write(cfg: VmConfig, comment: str = "") -> str:
    """The xl configuration text of one VM."""
    lines = [f"# {line}" for line in comment.splitlines()]
    items: list[tuple[str, Value]] = [
        ("name", cfg.name),
        ("type", "hvm"),
        ("memory", cfg.memory_mib),
        ("maxmem", cfg.memory_mib),
        ("vcpus", cfg.vcpus),
        ("cpus", [cpulist(c) for c in cfg.cpus]),
    ]
    if cfg.vnuma:
        items.append(("vnuma", [[f"pnode={n.pnode}", f"size={n.size_mib}", f"vcpus={cpulist(n.vcpus)}",
                                 "vdistances=" + ",".join(str(d) for d in n.vdistances)]
                                for n in cfg.vnuma]))
    items.append(("vif", ["bridge=xenbr0"]))
    if cfg.ivshmem is not None:
        items.append(("device_model_args_hvm", [
            "-object", f"memory-backend-file,id=ivshmem0,share=on,mem-path=/dev/shm/{cfg.ivshmem},"
                       f"size={cfg.ivshmem_mib}M",
            "-device", "ivshmem-plain,memdev=ivshmem0"]))
    for key, value in items:
        if key == "vnuma":
            inner = ",\n         ".join(literal(v) for v in value)  # type: ignore[union-attr]
            lines.append(f"vnuma = [ {inner} ]")
        else:
            lines.append(f"{key} = {literal(value)}")
    return "\n".join(lines) + "\n"


def parse(text: str, origin: str = "<xl>") -> dict[str, Value]:
    """`KEY = VALUE` lines of an xl configuration (strings, integers, lists; `#`
    comments), as a dict; XlError naming the line otherwise."""
    try:
        tree = ast.parse(text, origin)
    except SyntaxError as exc:
        raise XlError(f"{origin}: line {exc.lineno}: not xl syntax: {exc.msg}") from None
    out: dict[str, Value] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)):
            raise XlError(f"{origin}: line {stmt.lineno}: expected KEY = VALUE")
        try:
            value = ast.literal_eval(stmt.value)
        except ValueError:
            raise XlError(f"{origin}: line {stmt.lineno}: not a string, number or list") from None
        if not valid(value):
            raise XlError(f"{origin}: line {stmt.lineno}: not a string, number or list")
        out[stmt.targets[0].id] = value
    return out


def valid(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (str, int)):
        return True
    return isinstance(value, list) and all(valid(v) for v in value)
