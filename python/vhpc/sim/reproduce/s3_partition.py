"""S3's partitioning and I/O experiments in the simulator (issue 13).

Two experiments, each record a dict with the keys `vhpc reproduce s3` prints
(experiment, platform, placement, partitioning, channel, benchmark, run,
slowdown = time / native time - 1, published, note):

* ``partitioning``: 16 MPI ranks of an NPB-like kernel (class B) on one
  4-socket, 16-core host (S3's 4x4 machines), as one VM per host (16 vCPUs),
  one VM per socket (4 x 4) or two per socket (8 x 2), the VMs talking over a
  virtual network (``virtio``: vhost-net, or ``emulated``: QEMU's e1000) or
  through an ivshmem device (all VMs in one group, `mpi.transports = ["sm",
  "ivshmem", "net"]`). KVM-like: the host is Linux (`scheduler = "linux"`).
* ``io``: 32 ranks on two 16-core hosts, VMs of 1, 2, 4, 8 or 16 cores (32 to
  2 VMs), emulated vs virtio NIC (S3: emulated best at 1 core per VM, virtio
  at 8).

How the model expresses them (docs/sim.md, "Channels between domains"):

* A KVM host has no dom0; its device threads (QEMU's, vhost's) are threads
  of the host. They are a domain ``host`` marked ``dom0 = true`` with one
  vCPU per VM that has a device thread, pinned to that VM's cores: a vhost
  worker joins the cgroups of the QEMU process that owns it, so with the VM's
  cpuset it runs on the VM's cores, competing with its vCPUs. The emulated
  NIC (QEMU's e1000) transmits in the sending vCPU's thread and receives in
  the device thread (`tx_on_sender`, `qemu_e1000`); vhost does both.
* The guests' NICs are single-queue, as in 2010 (e1000; virtio-net before
  multiqueue, Linux 3.8): each VM's receive interrupt on its first vCPU runs
  the driver, NAPI and IP/TCP receive of every packet the VM receives, the
  rank only the socket side (`single_queue_rx`: `rx_irq_*` split from the
  table's `recv_*`, adding no cost). The native reference keeps the whole
  receive side on the rank (`[mpi.tcp]`): its physical NIC is assumed
  multiqueue (RSS), spreading receive work over the cores.
* Two hosts are two machines of one scenario (``host.machines = 2``, the
  preset repeated per machine) joined by a physical network (``[host.nic]``'s
  defaults: gigabit Ethernet, 125 MB/s each way per NIC, an assumption for
  S3's 2010-era cluster, which the brief does not describe). A message
  between ranks on different machines takes the same path as between two
  VMs of one host (guest TCP, the device threads) with the sender machine's
  NIC, the wire and the receiver machine's NIC in the middle; each NIC
  serialises one packet at a time. The native reference is one native OS per
  machine: shared memory inside a machine, the host kernel's TCP
  (``[mpi.tcp]``) plus the same wire between machines. Both sides of every
  comparison cross the same wire.
* Memory: the partitioning runs on the S3 presets (``opteron-numa-4x4``, the
  4x4 NUMA machine, and ``xeon-uma-4x4``, the UMA one) with the NUMA memory
  model on (`memory_fields`): KVM-like ``first_touch`` placement in warm VMs
  (run 2, as the spanning rows of `vhpc reproduce s3`: the brief's 40 % for
  one VM per node is its KVM second-run figure), vCPUs free to move inside
  their VM's cores (S3's KVM vCPUs were threads the host scheduler placed),
  nested paging on the HAP host, links and buses from the preset. The native
  reference runs with the same model (local first touch, no nested paging).
  The I/O runs use the same model and setup on two copies of the preset
  (``IO_PLATFORM``).

Costs are the simulator's defaults (crates/vhpc-sim/src/scenario.rs, with
their sources or stated assumptions); nothing here is tuned to the brief's
figures. One seed per configuration (the runs are deterministic; the
workloads' 1 % compute jitter is the only randomness).

    python -m vhpc.sim.reproduce.s3_partition [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import functools

import tomli_w

from vhpc import _core
from vhpc.sim import run as sim

SEED = 1
#: Cores of S3's 4x4 machines (Xeon UMA, Opteron NUMA): 4 sockets of 4.
SOCKETS, CORES_PER_SOCKET = 4, 4
HOST_CORES = SOCKETS * CORES_PER_SOCKET
#: The MPI library busy-polls (Open MPI's default progress); it yields the
#: vCPU to the guest's other tasks only after `polls_before_yield` polls.
WAIT_POLICY = "busy_poll"
BENCHMARKS = {"cg": "npb.cg", "is": "npb.is", "lu": "npb.lu", "ep": "npb.ep"}

#: The brief's figures (S3): partitioning, class B average over NPB.
PUBLISHED_PARTITION = {
    ("1/host", "sm"): (0.40, "brief: one VM per node 40 % (NUMA placement, class B)"),
    ("1/socket", "ivshmem"): (0.03, "brief: one VM per socket over ivshmem 3 % (class B avg)"),
    ("1/socket", "virtio"): (4.0, "brief: per-NUMA-domain VMs over the virtual network up to "
                                  "400 % (a maximum over kernels)"),
    ("1/socket", "emulated"): (4.0, "brief: per-NUMA-domain VMs over the virtual network up "
                                    "to 400 % (a maximum over kernels)"),
}
#: The brief's I/O figures: (channel, cores per VM) -> slowdown.
PUBLISHED_IO = {
    ("emulated", 1): (0.17, "brief: emulated NIC, 1 core/VM (32 VMs) best, 17 %"),
    ("emulated", 16): (2.23, "brief: emulated NIC, 2 VMs, 223 %"),
    ("virtio", 8): (0.12, "brief: virtio, 8 cores/VM best, 12 %"),
}


@dataclass(frozen=True)
class Layout:
    """VMs of `vcpus` each on `hosts` hosts of HOST_CORES cores, `per_host` per host."""

    name: str
    hosts: int
    per_host: int

    @property
    def vcpus(self) -> int:
        return HOST_CORES // self.per_host

    def cores(self, vm: int) -> list[int]:
        """The cores of VM `vm` (VMs fill host 0 first, socket by socket)."""
        return list(range(vm * self.vcpus, (vm + 1) * self.vcpus))


PARTITIONINGS = [Layout("1/host", 1, 1), Layout("1/socket", 1, SOCKETS),
                 Layout("2/socket", 1, 2 * SOCKETS)]
IO_CORES_PER_VM = (1, 2, 4, 8, 16)


#: The 4x4 presets the partitioning runs on (docs/sim.md, "NUMA memory").
PLATFORMS = ("opteron-numa-4x4", "xeon-uma-4x4")


#: The preset of the I/O experiment's two hosts (the brief does not say which
#: of its 4x4 machines ran it): the NUMA Opteron, as the partitioning's first.
IO_PLATFORM = "opteron-numa-4x4"


def host_section(hosts: int, platform: str | None = None) -> dict[str, Any]:
    """`hosts` machines (copies of the preset `platform`, or plain 4x4 hosts)
    joined by the default physical network (see the module doc)."""
    sec: dict[str, Any] = ({"preset": platform} if platform is not None else
                           {"cores": hosts * HOST_CORES, "sockets": hosts * SOCKETS,
                            "numa_nodes": hosts * SOCKETS})
    if hosts > 1:
        sec["machines"] = hosts
    return sec


def memory_fields(sc: dict[str, Any], placement: str) -> None:
    """The NUMA memory model's fields: `[memory]` with `placement`
    ("first_touch", KVM-like, or "preallocate", Xen-like), every VM with ranks
    `warm` (an earlier application ran in it: run 2); "off" leaves the model off."""
    if placement == "off":
        return
    sc["memory"] = {"placement": placement}
    ranked = set(sc["jobs"][0]["ranks"])
    for d in sc["domains"]:
        if d["name"] in ranked and not d.get("native"):
            d["warm"] = True


def job(workload: str, klass: str, ranks: list[str]) -> dict[str, Any]:
    return {"name": "mpi", "workload": workload, "ranks": ranks,
            "wait_policy": WAIT_POLICY, "params": {"class": klass}}


def native_scenario(hosts: int, workload: str, klass: str,
                    platform: str | None = None) -> dict[str, Any]:
    """The native reference: one native OS per host (machine), the host
    kernels' TCP and the wire between them; on a preset (`platform`) with the
    memory model on."""
    domains = [{"name": f"node{h}", "vcpus": HOST_CORES, "native": True, "nic": "bridge",
                "pin": [[h * HOST_CORES + c] for c in range(HOST_CORES)]}
               for h in range(hosts)]
    ranks = [d["name"] for d in domains for _ in range(HOST_CORES)]
    sc = {"name": f"s3-native-{hosts}h", "seed": SEED, "host": host_section(hosts, platform),
          "hypervisor": {"scheduler": "linux"}, "domains": domains,
          "jobs": [job(workload, klass, ranks)]}
    memory_fields(sc, "off" if platform is None else PLACEMENT)
    return sc


#: KVM-like placement (the host is Linux) for the runs on a preset.
PLACEMENT = "first_touch"


def vm_scenario(layout: Layout, channel: str, workload: str, klass: str,
                platform: str | None = None) -> dict[str, Any]:
    """VMs of `layout`, one rank per vCPU, inter-VM traffic over `channel`
    (a NIC kind, or "ivshmem": one group for all VMs, NIC unused). On a
    preset (`platform`), with the memory model on and each VM's vCPUs free
    to run on any of its cores (KVM's vCPU threads in the VM's cpuset);
    else pinned one to a core, as before."""
    n_vms = layout.hosts * layout.per_host
    vms = []
    for k in range(n_vms):
        pin = [layout.cores(k)] if platform else [[c] for c in layout.cores(k)]
        vm: dict[str, Any] = {"name": f"vm{k}", "vcpus": layout.vcpus, "pin": pin}
        if channel == "ivshmem":
            vm["ivshmem"] = f"host{k // layout.per_host}"
        elif n_vms > 1:
            vm["nic"] = channel
        vms.append(vm)
    domains = []
    if n_vms > 1 and channel in ("emulated", "virtio"):
        # The host's device threads: one per VM, on that VM's cores.
        domains.append({"name": "host", "dom0": True, "vcpus": n_vms,
                        "pin": [layout.cores(k) for k in range(n_vms)]})
    domains += vms
    ranks = [vm["name"] for vm in vms for _ in range(layout.vcpus)]
    sc: dict[str, Any] = {"name": f"s3-{layout.name}-{channel}", "seed": SEED,
                          "host": host_section(layout.hosts, platform),
                          "hypervisor": {"scheduler": "linux"}, "domains": domains,
                          "jobs": [job(workload, klass, ranks)]}
    if channel == "ivshmem":
        sc["mpi"] = {"transports": ["sm", "ivshmem", "net"]}
    elif channel == "emulated":
        sc["mpi"] = {"emulated": single_queue_rx("emulated", qemu_e1000())}
    elif channel == "virtio":
        sc["mpi"] = {"virtio": single_queue_rx("virtio", default_table("virtio"))}
    memory_fields(sc, "off" if platform is None else PLACEMENT)
    return sc


@functools.cache
def default_table(name: str) -> dict[str, Any]:
    """`[mpi.<name>]` as the simulator resolves it with nothing given."""
    probe = {"name": "probe", "host": {"cores": 1}, "domains": [{"name": "a"}],
             "jobs": [job("npb.ep", "S", ["a"])]}
    return json.loads(_core.resolve_scenario(tomli_w.dumps(probe), "s3-probe"))["mpi"][name]


#: What a receiving rank itself does per message once its receive interrupt
#: has run (the socket side: the recv system call, `tcp_recvmsg`'s copy to
#: user space, MPI's matching): ns and ns per KiB. Assumption: ~2 µs, and the
#: one copy at ~3 GB/s the virtio and bridge tables already charge (0.3
#: µs/KiB). It does not depend on the NIC, so both NICs keep the same.
SOCKET_RECV = (2000, 300)


def single_queue_rx(name: str, table: dict[str, Any]) -> dict[str, Any]:
    """`table` (a NIC's `[mpi.<name>]`) with its guest receive path split as
    a 2010 guest NIC forces it: one receive queue and one interrupt per VM
    (e1000; virtio-net before multiqueue, Linux 3.8 / QEMU 1.4 in 2013), and
    no receive packet steering (RPS, Linux 2.6.35, off by default), so the
    VM's interrupt vCPU (its first) runs the driver, NAPI poll and IP/TCP
    receive of every packet for all its ranks (`rx_irq_*`), and the rank
    only the socket side (`SOCKET_RECV`). The split moves cost, it adds
    none: `recv_*` before = `rx_irq_*` + `recv_*` after, so a one-vCPU VM,
    whose interrupt vCPU is its rank's, pays what it paid (docs/sim.md,
    "Receive interrupts")."""
    ns, per_kib = SOCKET_RECV
    if table["recv_ns"] < ns or table["recv_ns_per_kib"] < per_kib:
        raise ValueError(f"mpi.{name}: recv costs below the socket side {SOCKET_RECV}")
    return {**table,
            "recv_ns": ns, "recv_ns_per_kib": per_kib,
            "rx_irq_ns": table["recv_ns"] - ns,
            "rx_irq_ns_per_kib": table["recv_ns_per_kib"] - per_kib}


@functools.cache
def qemu_e1000() -> dict[str, Any]:
    """`[mpi.emulated]` for KVM's emulated NIC, QEMU's e1000: the default
    costs (as the simulator resolves them) with the transmit side in the
    sending vCPU (`tx_on_sender`): a write to the transmit tail register
    exits to QEMU in the vCPU's thread, which walks the descriptors, segments
    and writes the frames to the tap there (qemu-kvm 0.13, hw/e1000.c:
    `[TDT] = set_tctl` -> `start_xmit`); receiving stays in QEMU's I/O
    thread (the device thread), woken when the tap is readable."""
    return {**default_table("emulated"), "tx_on_sender": True}


@dataclass(frozen=True)
class Cell:
    experiment: str
    layout: Layout
    channel: str
    benchmark: str
    klass: str
    platform: str | None = None


def cells(quick: bool, experiments: tuple[str, ...] = ("partitioning", "io")) -> list[Cell]:
    klass = "A" if quick else "B"
    # CG: the memory-bound kernel (the NUMA model's case); IS: all-to-all
    # traffic; EP: neither; LU (not memory-aware) in the full run.
    benches = ("cg", "is", "ep") if quick else tuple(BENCHMARKS)
    out = []
    for b in benches if "partitioning" in experiments else ():
        for platform in PLATFORMS:
            for lay in PARTITIONINGS:
                for ch in (("sm",) if lay.per_host == 1 else ("virtio", "emulated", "ivshmem")):
                    out.append(Cell("partitioning", lay, ch, b, klass, platform))
    if "io" not in experiments:
        return out
    # The brief does not name the I/O case's kernel: IS (all-to-all of the
    # keys, the heaviest traffic) and LU (many small messages, ghost faces).
    # Class A there (the brief names none): LU class B on 32 ranks through
    # emulated NICs alone would take most of the run's time budget.
    for b in ("is",) if quick else ("is", "lu"):
        for ch in ("emulated", "virtio"):
            for cores in IO_CORES_PER_VM:
                lay = Layout(f"{cores} core/VM", 2, HOST_CORES // cores)
                out.append(Cell("io", lay, ch, b, "A", IO_PLATFORM))
    return out


def completion_s(report: dict[str, Any]) -> float:
    ns = report["jobs"][0]["completion_ns"]
    if ns is None:
        raise RuntimeError(f"{report['scenario']}: the job did not finish")
    return ns / 1e9


def run(*, quick: bool, experiments: tuple[str, ...] = ("partitioning", "io")
        ) -> list[dict[str, Any]]:
    """Every record of the named experiments (one parallel batch of simulations)."""
    plan = cells(quick, experiments)
    natives = sorted({(c.layout.hosts, c.benchmark, c.klass, c.platform or "") for c in plan})
    batch = []
    for hosts, b, k, platform in natives:
        batch.append((tomli_w.dumps(native_scenario(hosts, BENCHMARKS[b], k, platform or None)),
                      f"s3 native {platform or hosts} {b}.{k}", SEED))
    for c in plan:
        sc = vm_scenario(c.layout, c.channel, BENCHMARKS[c.benchmark], c.klass, c.platform)
        batch.append((tomli_w.dumps(sc), f"s3 {c.experiment} {c.platform or ''} {c.layout.name} "
                      f"{c.channel} {c.benchmark}.{c.klass}", SEED))
    reports = sim.run_texts(batch)
    native = {key: completion_s(r) for key, r in zip(natives, reports)}
    records = []
    for c, report in zip(plan, reports[len(natives):]):
        t = completion_s(report)
        base = native[(c.layout.hosts, c.benchmark, c.klass, c.platform or "")]
        ranks = c.layout.hosts * HOST_CORES
        if c.experiment == "partitioning":
            published, note = PUBLISHED_PARTITION.get((c.layout.name, c.channel), (None, ""))
        else:
            published, note = PUBLISHED_IO.get((c.channel, c.layout.vcpus), (None, ""))
        if c.experiment == "io":
            note = (note + "; " if note else "") + "2 machines, 1 Gb/s Ethernet (assumed)"
        job = report["jobs"][0]
        platform = c.platform or "4x4 (16 cores)"
        records.append({
            "experiment": c.experiment,
            "platform": platform if c.layout.hosts == 1 else f"{c.layout.hosts} x {platform}",
            "placement": PLACEMENT if c.platform else "off",
            "partitioning": c.layout.name, "channel": c.channel,
            "benchmark": f"{c.benchmark}.{c.klass}.{ranks}", "run": 2 if c.platform else 1,
            "slowdown": t / base - 1, "time_s": t, "native_s": base,
            "remote_share": job.get("remote_share"), "mem_slowdown": job.get("mem_slowdown"),
            "published": published, "note": note})
    return records


def averages(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``avg`` record per (experiment, platform, partitioning, channel):
    the mean slowdown over the benchmarks (what `vhpc reproduce s3` prints)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        key = (r["experiment"], r["platform"], r["partitioning"], r["channel"])
        groups.setdefault(key, []).append(r)
    out = []
    for rs in groups.values():
        pub = next((r for r in rs if r["published"] is not None), rs[0])
        names = ", ".join(r["benchmark"].split(".")[0] for r in rs)
        out.append({**rs[0], "benchmark": "avg",
                    "slowdown": sum(r["slowdown"] for r in rs) / len(rs),
                    "time_s": None, "native_s": None, "remote_share": None,
                    "mem_slowdown": None, "published": pub["published"],
                    "note": (pub["note"] + "; " if pub["note"] else "") + f"mean of {names}"})
    return out


def run_partitioning(*, quick: bool) -> list[dict[str, Any]]:
    """`vhpc reproduce s3`'s ``partitioning`` experiment: records and averages."""
    rows = run(quick=quick, experiments=("partitioning",))
    return rows + averages(rows)


def run_io(*, quick: bool) -> list[dict[str, Any]]:
    """`vhpc reproduce s3`'s ``io`` experiment: records and averages."""
    rows = run(quick=quick, experiments=("io",))
    return rows + averages(rows)


#: The experiments `vhpc reproduce s3` adds from this module (its EXTRA_MODULES).
EXPERIMENTS = {"partitioning": run_partitioning, "io": run_io}


def print_table(records: list[dict[str, Any]], out: Any = None) -> None:
    out = sys.stdout if out is None else out
    head = f"{'experiment':<13}{'partitioning':<14}{'channel':<10}{'benchmark':<12}" \
           f"{'time s':>9}{'slowdown':>10}{'published':>11}  note"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in records:
        pub = "" if r["published"] is None else f"{100 * r['published']:.0f} %"
        if r["time_s"] is None:
            continue
        print(f"{r['experiment']:<13}{r['partitioning']:<14}{r['channel']:<10}"
              f"{r['benchmark']:<12}{r['time_s']:>9.3f}{100 * r['slowdown']:>9.1f}%"
              f"{pub:>11}  {r['note']}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vhpc.sim.reproduce.s3_partition",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="class A, fewer kernels")
    ap.add_argument("--json", action="store_true", help="print the records as JSON")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    records = run(quick=args.quick)
    if args.json:
        print(json.dumps(records, indent=1))
    else:
        print_table(records)
        print(f"\n{len(records)} records in {time.perf_counter() - start:.1f} s", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
