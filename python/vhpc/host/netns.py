"""Domains as separate network namespaces joined by a virtual bridge, as the VMs
of one host are joined by the host's (or dom0's) software bridge.

    with netns.bridged(["vm0", "vm1"]) as net:
        net.namespace["vm0"]        # "vhpc-<pid>-net<n>-d0": `ip netns exec` it
        net.address["vm1"]          # "10.231.0.2"
        net.bytes()                 # bytes through the bridge's ports so far

Layout: one namespace holds only the bridge `br0` (so nothing here touches the
host's own network: no interface, address or route is added to it); each
domain gets a namespace of its own with loopback up and one end of a veth pair,
named `vhpc0` in every domain (so an MPI can be told one interface name for all
ranks), address 10.231.0.<k+1>/24; the other end `d<k>` is a port of the bridge.
Traffic between domains crosses two veths and the bridge, each a real kernel
network stack: what a virtio/netfront NIC's packets cost inside the host, minus
the hypervisor's exits.

Names carry `vhpc-<pid>-` (host/leftovers.py cleans the namespaces of a dead
run) and a per-process run number, so parallel runs do not collide; interface
names only have to be unique inside their own namespace. Everything is
recorded before it exists and removed on the way out, also after an exception
or a signal (deleting a namespace deletes its interfaces).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vhpc.host import cgroups, leftovers, signals

PREFIX = cgroups.PREFIX  # "vhpc-": names owned by a vhpc process, as its cgroups
NETNS_DIR = Path("/run/netns")
#: The interface of every domain namespace (≤ 15 characters, the kernel's limit).
DEVICE = "vhpc0"
BRIDGE = "br0"
#: A private /24 (RFC 1918) used only inside the namespaces made here.
SUBNET = "10.231.0"
MAX_DOMAINS = 253
IP_TIMEOUT_S = 30.0

_run_numbers = itertools.count()


class NetnsUnavailable(RuntimeError):
    """Network namespaces, veth pairs or bridges cannot be made here (the message says why)."""


@dataclass(frozen=True)
class Network:
    bridge_ns: str
    namespace: dict[str, str]  # domain -> its namespace
    address: dict[str, str]    # domain -> its address on the bridge
    port: dict[str, str]       # domain -> its veth end on the bridge (in bridge_ns)

    def counters(self, domain: str) -> tuple[int, int]:
        """(rx, tx) bytes of the domain's bridge port, as the bridge sees them."""
        return port_counters(self.bridge_ns, self.port[domain])

    def bytes(self) -> int:
        """Bytes sent by the bridge's ports so far (each frame between two domains
        counts once: it leaves the bridge by the receiver's port)."""
        return sum(self.counters(d)[1] for d in self.port)


def ip(*args: str, check: bool = True) -> str:
    """`ip args...`; NetnsUnavailable with its message when it fails (and `check`)."""
    try:
        proc = subprocess.run(["ip", *args], capture_output=True, text=True,
                              timeout=IP_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetnsUnavailable(f"`ip {' '.join(args)}`: {exc}") from None
    if check and proc.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}`: "
                               f"{(proc.stderr.strip() or 'failed')[:200]}")
    return proc.stdout


def quiet(ns: str) -> None:
    """No IPv6 in namespace `ns` (set before its interfaces exist): no neighbour
    discovery or multicast reports cross the bridge, so its counters count the
    run's traffic only."""
    ip("netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
       "net.ipv6.conf.default.disable_ipv6=1")


def port_counters(ns: str, dev: str) -> tuple[int, int]:
    found = json.loads(ip("-n", ns, "-j", "-s", "link", "show", "dev", dev))
    stats = found[0].get("stats64") or found[0]["stats"]
    return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])


def existing() -> list[str]:
    """Named network namespaces vhpc made (`vhpc-<pid>-...` under /run/netns)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.glob(f"{PREFIX}*"))


def delete(name: str) -> bool:
    """Delete namespace `name` (its interfaces go with it); whether it is gone."""
    if not name.startswith(PREFIX):
        raise ValueError(f"{name}: not a vhpc namespace")
    ip("netns", "delete", name, check=False)
    return not (NETNS_DIR / name).exists()


_checked: tuple[bool, str] | None = None


def available() -> tuple[bool, str]:
    """Whether namespaces, a bridge and a veth pair can be made here (tries once per
    process, making and removing one of each)."""
    global _checked
    if _checked is None:
        _checked = _try()
    return _checked


def _try() -> tuple[bool, str]:
    if shutil.which("ip") is None or shutil.which("sysctl") is None:
        return False, "`ip` or `sysctl` not found (apt-get install iproute2 procps)"
    if os.geteuid() != 0:
        return False, "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    try:
        with bridged(["probe"]):
            pass
    except (NetnsUnavailable, OSError) as exc:
        return False, f"cannot make a namespace, bridge and veth pair: {exc}"
    return True, "network namespaces, a bridge and veth pairs can be made"


@contextmanager
def bridged(domains: list[str]) -> Iterator[Network]:
    """A namespace per domain, joined by a bridge in a namespace of its own;
    recorded first (host/leftovers.py), always removed on exit."""
    if not 1 <= len(domains) <= MAX_DOMAINS:
        raise ValueError(f"{len(domains)} domains: 1 to {MAX_DOMAINS} fit on the bridge's /24")
    base = f"{PREFIX}{os.getpid()}-net{next(_run_numbers)}"
    bridge_ns = f"{base}-br"
    names = {d: f"{base}-d{k}" for k, d in enumerate(domains)}
    all_ns = [bridge_ns, *names.values()]
    record = leftovers.Record(base, netns=all_ns)
    try:
        ip("netns", "add", bridge_ns)
        quiet(bridge_ns)
        ip("-n", bridge_ns, "link", "set", "lo", "up")
        # no multicast snooping: the bridge itself sends nothing to its ports
        ip("-n", bridge_ns, "link", "add", BRIDGE, "type", "bridge", "mcast_snooping", "0")
        ip("-n", bridge_ns, "link", "set", BRIDGE, "up")
        address, port = {}, {}
        for k, (domain, ns) in enumerate(names.items()):
            port[domain], address[domain] = f"d{k}", f"{SUBNET}.{k + 1}"
            ip("netns", "add", ns)
            quiet(ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", bridge_ns, "link", "add", port[domain], "type", "veth",
               "peer", "name", DEVICE, "netns", ns)
            ip("-n", bridge_ns, "link", "set", port[domain], "master", BRIDGE)
            ip("-n", bridge_ns, "link", "set", port[domain], "up")
            ip("-n", ns, "addr", "add", f"{address[domain]}/24", "dev", DEVICE)
            ip("-n", ns, "link", "set", DEVICE, "up")
        yield Network(bridge_ns, names, address, port)
    finally:
        with signals.deferred():
            left = [ns for ns in reversed(all_ns) if (NETNS_DIR / ns).exists() and not delete(ns)]
            if not left:
                record.release()  # else the record stays for `vhpc lab cleanup`
