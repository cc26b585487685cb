"""A planned VM as a libvirt domain (`virsh define DIR/<vm>.xml`).

Built with xml.etree, element by element, after libvirt's domain format
(https://libvirt.org/formatdomain.html) and checked in the tests by libvirt's own
schema (`virt-xml-validate FILE domain`):

* `<memory unit='MiB'>` the jobs' footprints plus the guest's own share;
* `<vcpu placement='static'>` one vCPU per host core the VM owns;
* `<cputune>`: a `<vcpupin vcpu= cpuset=>` per vCPU (its core, or its NUMA
  node's cores of the VM), `<emulatorpin>` on the VM's cores;
* `<numatune>`: `<memory mode='strict' nodeset=>` the host nodes of its cores,
  and with vNUMA a `<memnode cellid= mode='strict' nodeset=>` per guest cell;
* `<cpu>`: with vNUMA a `<numa>` of `<cell id cpus memory unit>` with the host's
  distances between the cells;
* `<devices>`: a virtio `<interface>` on libvirt's default network, and where the
  ivshmem channel was chosen a `<shmem name=>` with `<model type='ivshmem-plain'/>`
  and `<size unit='M'>`, the same name in every VM of the group.

Disks and consoles are the user's (the file says so in a comment).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from vhpc.plan.candidates import Candidate, Vm
from vhpc.plan.inputs import HostFile, JobsFile
from vhpc.plan.topology import Topology, cpulist

#: (domain type, os machine, NIC model) per platform.
PLATFORM = {
    "kvm": ("kvm", "q35", "virtio"),
    # libvirt's libxl driver: an HVM guest with PV (netfront) networking.
    "xen": ("xen", "xenfv", "netfront"),
}


def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def domain(host: HostFile, topo: Topology, jobs: JobsFile, cand: Candidate, vm: Vm,
           note: str = "") -> ET.Element:
    """The `<domain>` element of one VM."""
    dtype, machine, nic = PLATFORM[host.platform]
    root = ET.Element("domain", {"type": dtype})
    if note:
        root.append(ET.Comment(f" {note} "))
    sub(root, "name", vm.name)
    sub(root, "description", f"vhpc plan: {cand.label}; runs "
        + ", ".join(f"{job} ranks {cpulist([r for j, r in vm.ranks if j == job])}"
                    for job in dict.fromkeys(j for j, _ in vm.ranks)))
    sub(root, "memory", str(vm.mem_mib), unit="MiB")
    sub(root, "vcpu", str(vm.vcpus), placement="static")

    cputune = sub(root, "cputune")
    for i, cores in enumerate(vm.pin):
        sub(cputune, "vcpupin", vcpu=str(i), cpuset=cpulist(cores))
    sub(cputune, "emulatorpin", cpuset=cpulist(vm.cores))

    numatune = sub(root, "numatune")
    sub(numatune, "memory", mode="strict", nodeset=cpulist(vm.nodes))
    cells = vm.cells(topo)
    if vm.vnuma:
        for cell, (node, _, _) in enumerate(cells):
            sub(numatune, "memnode", cellid=str(cell), mode="strict", nodeset=str(node))

    os_ = sub(root, "os")
    sub(os_, "type", "hvm", arch="x86_64", machine=machine)

    cpu = sub(root, "cpu", mode="host-passthrough")
    if vm.vnuma:
        numa = sub(cpu, "numa")
        for cell, (node, vcpus, mib) in enumerate(cells):
            c = sub(numa, "cell", id=str(cell), cpus=cpulist(vcpus), memory=str(mib), unit="MiB")
            distances = sub(c, "distances")
            for other, (other_node, _, _) in enumerate(cells):
                sub(distances, "sibling", id=str(other), value=str(topo.distance[node][other_node]))

    devices = sub(root, "devices")
    devices.append(ET.Comment(" add the guest's disks and consoles here "))
    iface = sub(devices, "interface", type="network")
    sub(iface, "source", network="default")
    sub(iface, "model", type=nic)
    if vm.ivshmem is not None:
        shmem = sub(devices, "shmem", name=vm.ivshmem)
        sub(shmem, "model", type="ivshmem-plain")
        sub(shmem, "size", str(jobs.plan.ivshmem_mib), unit="M")
    return root


def to_xml(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
