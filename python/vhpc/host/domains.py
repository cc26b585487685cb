"""Domains: groups of ranks confined like the VMs of one host.

Each domain is a cgroup v1 `cpu` group (its Xen-like weight as `cpu.shares`,
256 -> 1024, the Linux default; its cap as CFS quota in CPUs' worth) and, in
`timesliced` mode, a `freezer` group; its CPUs are set by the per-rank wrapper
with `sched_setaffinity`. A rank joins its domain's groups from the wrapper,
before exec.

Modes:
  linux       the kernel schedules the groups (shares by weight, quota by cap);
              the ranks float over the domain's CPUs, as unpinned vCPUs do.
  timesliced  timeslice.Slicer thaws one group at a time per set of CPUs, with
              one of two slicings:
    gang      (default) a domain is frozen and thawed as a whole, on all its
              CPUs together, its ranks floating over them. Rule: domains whose
              CPU sets overlap, directly or through others, form one
              *component*, sliced by one Slicer; components on disjoint CPUs
              run at the same time.
    vcpu      per-vCPU, as Xen's Credit schedules each vCPU on its own core: a
              domain's CPU list is its vCPUs, vCPU k pinned to `cpus[k]` (a CPU
              listed twice holds two vCPUs). Each vCPU is a freezer group below
              its domain's; the k-th rank of the domain (in `ranks` order, or
              rank k when `ranks` is not given) runs on vCPU k mod len(cpus),
              pinned to that vCPU's CPU. One Slicer per CPU slices the vCPUs on
              it, each with its domain's weight (Credit gives every vCPU of a
              domain the domain's weight); the k-th of n CPUs starts its first
              slice k / n of a slice early, so the CPUs' slices are staggered. A vCPU that holds no rank is not
              made: an idle guest vCPU blocks and takes no slice.

`jobs = N` runs N copies of the workload at once, one MPI launch each (S0's
pressure experiment runs one benchmark per domU); a domain holds ranks of one
job. A `noise` domain runs one endless loop per CPU of it (per vCPU) for the
whole run (S0's noise VM), started before the jobs and killed after them.

`channel` ("net" or "shm"; default none: every rank in the host's network
namespace, as before) makes each domain a network namespace of its own, joined
to the others by a bridge (host/netns.py): a rank enters its domain's namespace
from the wrapper, last. With "net" the MPI talks TCP over the bridge only (as
VMs over a virtual network), with "shm" through shared memory only (both
namespaces share one kernel: an ivshmem-like channel); mpi.CHANNEL_ENV says how.
The noise domain gets no namespace (it does not talk).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from vhpc.host import hints as hint_channel
from vhpc.host import leftovers, netns, placement, signals, timeslice
from vhpc.mpi import MpiImpl

XEN_DEFAULT_WEIGHT = 256
SHARES_PER_WEIGHT = 1024 // XEN_DEFAULT_WEIGHT  # Xen's default weight = Linux's default shares

_run_numbers = itertools.count()

# One noise vCPU (argv: cpu, groups...): joins the groups, then spins forever. It
# joins before anything else and dies if it cannot (its groups already removed):
# nothing vhpc starts runs outside a recorded group.
_NOISE = """\
import os, sys
for group in sys.argv[2:]:
    with open(os.path.join(group, "tasks"), "w") as tasks:
        tasks.write(str(os.getpid()))
os.sched_setaffinity(0, {int(sys.argv[1])})
while True:
    pass
"""


@dataclass(frozen=True)
class Domain:
    name: str
    cpus: tuple[int, ...]
    weight: int = XEN_DEFAULT_WEIGHT
    cap: float | None = None  # CPUs' worth of CFS quota; None = uncapped
    ranks: tuple[int, ...] | None = None  # None: every rank of its job
    job: int = 0

    def holds(self, job: int, rank: int) -> bool:
        return self.job == job and (self.ranks is None or rank in self.ranks)


@dataclass(frozen=True)
class Groups:
    """A domain's cgroups: its `cpu` group, its `freezer` group (timesliced), and
    with per-vCPU slicing one freezer group per vCPU below that one."""

    cpu: Path
    freezer: Path | None = None
    vcpus: tuple[Path, ...] = ()

    def joined_by(self, vcpu: int) -> list[Path]:
        """The groups a task of vCPU `vcpu` joins (vcpu is ignored without vCPU groups)."""
        if self.vcpus:
            return [self.cpu, self.vcpus[vcpu]]
        return [self.cpu] + ([self.freezer] if self.freezer is not None else [])


@dataclass(frozen=True)
class Domains:
    """A placement of `jobs` copies of an `nranks`-rank run over `domains`."""

    domains: tuple[Domain, ...]
    nranks: int
    jobs: int = 1
    mode: str = "linux"  # linux | timesliced
    slice_s: float = timeslice.SLICE_S
    work_conserving: bool = True
    by_weight: bool = False
    noise: Domain | None = None
    slicing: str = "gang"  # timesliced only: gang | vcpu
    kind: str = "domains"
    channel: str | None = None  # net | shm: a network namespace per domain
    # timesliced only: the hint channel (vhpc.host.hints): each rank's state in a
    # page per domain, a switch as soon as every rank of the running domain waits;
    # `cosched` (per vCPU) also brings a domain's vCPUs together for a collective
    hints: bool = False
    cosched: bool = False

    @property
    def all_domains(self) -> tuple[Domain, ...]:
        return self.domains + ((self.noise,) if self.noise else ())

    @property
    def per_vcpu(self) -> bool:
        return self.mode == "timesliced" and self.slicing == "vcpu"

    def available(self) -> tuple[bool, str]:
        """Whether this machine can run these domains, and why (not)."""
        allowed = set(placement.allowed_cpus())
        missing = sorted({c for d in self.all_domains for c in d.cpus} - allowed)
        if missing:
            return False, f"CPUs {missing} are not allowed here ({sorted(allowed)})"
        ok, reason = placement.cgroup_cpu_available()
        if ok and self.mode == "timesliced":
            ok, reason = placement.freezer_available()
        if ok and self.channel is not None:
            ok, reason = netns.available()
        return ok, reason

    def launcher_env(self, impl: MpiImpl, base: dict[str, str] | None = None
                     ) -> dict[str, str]:
        """The launcher's environment: `impl`'s, with the channel's transports."""
        env = dict(os.environ if base is None else base)
        if self.channel is not None:
            chosen, why = impl.channel_env(self.channel, netns.DEVICE)
            if chosen is None:
                raise placement.PlacementUnavailable(f"channel {self.channel}: {why}")
            env |= chosen
        return impl.launcher_env(env)

    def domain_of(self, job: int, rank: int) -> Domain:
        return next(d for d in self.domains if d.holds(job, rank))

    def ranks_of(self, domain: Domain) -> list[int]:
        """The domain's ranks in order (the k-th goes to vCPU k mod its vCPUs)."""
        return list(domain.ranks) if domain.ranks is not None else list(range(self.nranks))

    def vcpus_of(self, domain: Domain) -> int:
        """How many vCPUs of `domain` hold a task: one per CPU listed, those with a rank."""
        if domain is self.noise:
            return len(domain.cpus)
        return min(len(domain.cpus), len(self.ranks_of(domain)))

    def vcpu_of(self, domain: Domain, rank: int) -> int:
        return self.ranks_of(domain).index(rank) % len(domain.cpus)

    @contextmanager
    def commands(self, impl: MpiImpl, argv: list[str], *, env: dict[str, str] | None = None,
                 preload: Path | str | None = None,
                 network: list[netns.Network] | None = None) -> Iterator[list[list[str]]]:
        """One launch command per job; groups, noise, slicers and (with a channel) the
        namespaces live while inside. With a channel and a list `network`, the
        Network is appended to it (its counters say what crossed the bridge)."""
        ok, reason = self.available()
        if not ok:
            raise placement.PlacementUnavailable(f"domains: {reason}")
        with ExitStack() as stack:
            net = None
            if self.channel is not None:  # made first, removed last: after the ranks
                net = stack.enter_context(netns.bridged([d.name for d in self.domains]))
                if network is not None:
                    network.append(net)
            groups = stack.enter_context(domain_groups(self))
            page = None
            if self.hints and self.mode == "timesliced":
                page = stack.enter_context(hint_channel.hint_file(len(self.all_domains)))
            if self.noise is not None:
                noise = groups[self.noise.name]
                stack.enter_context(noise_running(
                    self.noise, [noise.joined_by(k) for k in range(len(self.noise.cpus))]))
            if self.mode == "timesliced":
                stack.enter_context(slicing(self, groups, page))
            yield [placement.confined_launch(
                impl, self.confinement(job, groups), argv, env=env, preload=preload,
                netns=net and {r: net.namespace[self.domain_of(job, r).name]
                               for r in range(self.nranks)},
                rank_env=page and self.hint_env(job, page))
                   for job in range(self.jobs)]

    def hint_env(self, job: int, page: Path) -> dict[int, dict[str, str]]:
        """Per rank of `job`: the hint file, its domain's page and its slot there (its
        place in the domain's ranks)."""
        env = {}
        for rank in range(self.nranks):
            domain = self.domain_of(job, rank)
            env[rank] = hint_channel.env_for(page, self.all_domains.index(domain),
                                             self.ranks_of(domain).index(rank))
        return env

    def members(self) -> list[list[tuple[Domain, int | None]]]:
        """The groups each Slicer takes turns between, as (domain, vCPU or None):
        per component of domains (gang), or per CPU of vCPUs (vcpu)."""
        if not self.per_vcpu:
            return [[(d, None) for d in members] for members in components(self.all_domains)]
        on_cpu: dict[int, list[tuple[Domain, int | None]]] = {}
        for domain in self.all_domains:
            for k in range(self.vcpus_of(domain)):
                on_cpu.setdefault(domain.cpus[k], []).append((domain, k))
        return [on_cpu[cpu] for cpu in sorted(on_cpu)]

    def hint_slots(self, domain: Domain, vcpu: int | None) -> tuple[tuple[int, int], ...]:
        """(page, slot) of the ranks in `domain` (on its vCPU `vcpu`); none for noise."""
        if domain is self.noise:
            return ()
        page = self.all_domains.index(domain)
        return tuple((page, s) for s in range(len(self.ranks_of(domain)))
                     if vcpu is None or s % len(domain.cpus) == vcpu)

    def confinement(self, job: int, groups: dict[str, Groups]
                    ) -> dict[int, tuple[list[Path], list[int]]]:
        """Per rank of `job`: the groups it joins and the CPUs it may run on (its
        domain's, or per vCPU the one CPU of its vCPU)."""
        placed = {}
        for rank in range(self.nranks):
            domain = self.domain_of(job, rank)
            if self.per_vcpu:
                vcpu = self.vcpu_of(domain, rank)
                placed[rank] = (groups[domain.name].joined_by(vcpu), [domain.cpus[vcpu]])
            else:
                placed[rank] = (groups[domain.name].joined_by(0), list(domain.cpus))
        return placed

    def sliced_on(self, groups: dict[str, Groups]) -> list[list[tuple[Path, int]]]:
        """(freezer group, weight) of each set of groups that one Slicer takes turns
        between: per component of domains (gang), or per CPU of vCPUs (vcpu)."""
        return [[(groups[d.name].freezer if k is None else groups[d.name].vcpus[k], d.weight)
                 for d, k in members] for members in self.members()]


def shares(weight: int) -> int:
    return weight * SHARES_PER_WEIGHT


@contextmanager
def domain_groups(place: Domains) -> Iterator[dict[str, Groups]]:
    """{domain name: its Groups}, under parents `vhpc-<pid>-dom<n>` of the cpu (and in
    timesliced mode freezer) roots; always removed on exit (processes killed first)."""
    timesliced = place.mode == "timesliced"
    parent_name = f"{placement.GROUP_PREFIX}{os.getpid()}-dom{next(_run_numbers)}"
    cpu_parent = placement.CGROUP_CPU / parent_name
    freezer_parent = placement.CGROUP_FREEZER / parent_name
    parents = [cpu_parent, freezer_parent] if timesliced else [cpu_parent]
    with leftovers.owned_groups(parents):  # recorded first, removed together (tasks killed)
        for parent in parents:
            parent.mkdir()
        groups = {}
        for domain in place.all_domains:
            name = f"dom-{domain.name}"
            freezer = freezer_parent / name if timesliced else None
            vcpus = tuple(freezer / f"vcpu{k}" for k in range(place.vcpus_of(domain))) \
                if place.per_vcpu else ()
            for group in (cpu_parent / name, freezer, *vcpus):
                if group is not None:
                    group.mkdir()
            configure_cpu(cpu_parent / name, domain)
            groups[domain.name] = Groups(cpu_parent / name, freezer, vcpus)
        yield groups


def configure_cpu(group: Path, domain: Domain) -> None:
    (group / "cpu.shares").write_text(str(shares(domain.weight)))
    if domain.cap is not None:
        period = placement.PERIOD_US
        placement.set_quota(group, round(domain.cap * period), period)


@contextmanager
def noise_running(noise: Domain, groups: list[list[Path]]) -> Iterator[list[subprocess.Popen]]:
    """One spinning process per CPU of the noise domain, the k-th joining
    `groups[k]` (its vCPU's), killed on exit."""
    procs: list[subprocess.Popen] = []
    try:
        for cpu, joins in zip(noise.cpus, groups, strict=True):
            # No stdio: a noise loop frozen after vhpc died must not hold vhpc's terminal or pipes.
            procs.append(subprocess.Popen([sys.executable, "-c", _NOISE, str(cpu),
                                           *map(str, joins)], start_new_session=True,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        yield procs
    finally:
        with signals.deferred():
            for proc in procs:
                proc.kill()
                proc.wait()


def components(domains: tuple[Domain, ...]) -> list[list[Domain]]:
    """Domains grouped so that CPU sets overlap within a group and not across."""
    result: list[tuple[set[int], list[Domain]]] = []
    for domain in domains:
        cpus, members = set(domain.cpus), [domain]
        for other in [c for c in result if c[0] & cpus]:
            result.remove(other)
            cpus |= other[0]
            members = other[1] + members
        result.append((cpus, members))
    return [sorted(members, key=domains.index) for _, members in result]


@contextmanager
def slicing(place: Domains, groups: dict[str, Groups],
            page: Path | None = None) -> Iterator[list[timeslice.Slicer]]:
    """A Slicer per set of several groups that exclude each other (Domains.sliced_on);
    every group thawed on exit. With a hint file `page`, each Slicer reads the
    states of its groups' ranks there (queue k of the file, members numbered in
    order across the Slicers)."""
    slicers = []
    sets = place.sliced_on(groups)
    described = place.members()
    queue = member = 0
    try:
        for k, members in enumerate(sets):
            if len(members) < 2:
                continue  # alone on its CPUs: always thawed
            # per vCPU, CPU k's slices start k / n of a slice early (Credit's
            # per-core slices fall at unrelated instants; the simulator does the same)
            phase = place.slice_s * k / len(sets) if place.per_vcpu else 0.0
            spec = None
            if page is not None:
                spec = timeslice.HintSpec(
                    page, queue, tuple(range(member, member + len(members))),
                    tuple(place.hint_slots(d, v) for d, v in described[k]),
                    tuple(place.all_domains.index(d) for d, _ in described[k]),
                    cosched=place.cosched,
                    cpus=tuple(tuple(d.cpus) if v is None else (d.cpus[v],)
                               for d, v in described[k]))
                queue, member = queue + 1, member + len(members)
            slicer = timeslice.Slicer(
                [group for group, _ in members], place.slice_s, place.work_conserving,
                [weight for _, weight in members] if place.by_weight else None,
                phase_s=phase, **({"hints": spec} if spec else {}))
            slicers.append(slicer)
            slicer.start()
        yield slicers
    finally:
        with signals.deferred():
            for slicer in slicers:
                slicer.stop()
