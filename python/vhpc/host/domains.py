"""Domains: groups of ranks confined like the VMs of one host.

Each domain is a cgroup v1 `cpu` group (its Xen-like weight as `cpu.shares`,
256 -> 1024, the Linux default; its cap as CFS quota in CPUs' worth) and, in
`timesliced` mode, a `freezer` group; its CPUs are set by the per-rank wrapper
with `sched_setaffinity` (the ranks float over the domain's CPUs, as unpinned
vCPUs do). A rank joins its domain's groups from the wrapper, before exec.

Modes:
  linux       the kernel schedules the groups (shares by weight, quota by cap).
  timesliced  timeslice.Slicer: one domain thawed at a time per set of CPUs.
              Rule: domains whose CPU sets overlap, directly or through others,
              form one *component*, sliced by one Slicer; components on disjoint
              CPUs run at the same time. A domain is frozen and thawed as a
              whole, on all its CPUs together: time slicing is gang scheduling.

`jobs = N` runs N copies of the workload at once, one MPI launch each (S0's
pressure experiment runs one benchmark per domU); a domain holds ranks of one
job. A `noise` domain runs one endless loop per CPU of it for the whole run
(S0's noise VM), started before the jobs and killed after them.
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

from vhpc.host import leftovers, placement, signals, timeslice
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
    kind: str = "domains"

    @property
    def all_domains(self) -> tuple[Domain, ...]:
        return self.domains + ((self.noise,) if self.noise else ())

    def available(self) -> tuple[bool, str]:
        """Whether this machine can run these domains, and why (not)."""
        allowed = set(placement.allowed_cpus())
        missing = sorted({c for d in self.all_domains for c in d.cpus} - allowed)
        if missing:
            return False, f"CPUs {missing} are not allowed here ({sorted(allowed)})"
        ok, reason = placement.cgroup_cpu_available()
        if ok and self.mode == "timesliced":
            ok, reason = placement.freezer_available()
        return ok, reason

    def domain_of(self, job: int, rank: int) -> Domain:
        return next(d for d in self.domains if d.holds(job, rank))

    @contextmanager
    def commands(self, impl: MpiImpl, argv: list[str], *, env: dict[str, str] | None = None,
                 preload: Path | str | None = None) -> Iterator[list[list[str]]]:
        """One launch command per job; groups, noise and slicers live while inside."""
        ok, reason = self.available()
        if not ok:
            raise placement.PlacementUnavailable(f"domains: {reason}")
        with ExitStack() as stack:
            groups = stack.enter_context(domain_groups(self))
            if self.noise is not None:
                stack.enter_context(noise_running(self.noise, groups[self.noise.name]))
            if self.mode == "timesliced":
                stack.enter_context(slicing(self, groups))
            yield [placement.confined_launch(impl, self.confinement(job, groups), argv,
                                             env=env, preload=preload)
                   for job in range(self.jobs)]

    def confinement(self, job: int, groups: dict[str, list[Path]]
                    ) -> dict[int, tuple[list[Path], list[int]]]:
        """Per rank of `job`: its domain's groups and CPUs."""
        return {rank: (groups[d.name], list(d.cpus))
                for rank in range(self.nranks) for d in [self.domain_of(job, rank)]}


def shares(weight: int) -> int:
    return weight * SHARES_PER_WEIGHT


@contextmanager
def domain_groups(place: Domains) -> Iterator[dict[str, list[Path]]]:
    """{domain name: [its cpu group, its freezer group in timesliced mode]}, under
    parents `vhpc-<pid>-dom<n>`; always removed on exit (processes killed first)."""
    roots = [placement.CGROUP_CPU]
    if place.mode == "timesliced":
        roots.append(placement.CGROUP_FREEZER)
    parent_name = f"{placement.GROUP_PREFIX}{os.getpid()}-dom{next(_run_numbers)}"
    parents = [root / parent_name for root in roots]
    with leftovers.owned_groups(parents):  # recorded first, removed together (tasks killed)
        groups: dict[str, list[Path]] = {d.name: [] for d in place.all_domains}
        for parent in parents:
            parent.mkdir()
            for domain in place.all_domains:
                group = parent / f"dom-{domain.name}"
                group.mkdir()
                groups[domain.name].append(group)
        for domain in place.all_domains:
            configure_cpu(groups[domain.name][0], domain)
        yield groups


def configure_cpu(group: Path, domain: Domain) -> None:
    (group / "cpu.shares").write_text(str(shares(domain.weight)))
    if domain.cap is not None:
        period = placement.PERIOD_US
        placement.set_quota(group, round(domain.cap * period), period)


@contextmanager
def noise_running(noise: Domain, groups: list[Path]) -> Iterator[list[subprocess.Popen]]:
    """One spinning process per CPU of the noise domain, killed on exit."""
    procs: list[subprocess.Popen] = []
    try:
        for cpu in noise.cpus:
            # No stdio: a noise loop frozen after vhpc died must not hold vhpc's terminal or pipes.
            procs.append(subprocess.Popen([sys.executable, "-c", _NOISE, str(cpu),
                                           *map(str, groups)], start_new_session=True,
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
def slicing(place: Domains, groups: dict[str, list[Path]]) -> Iterator[list[timeslice.Slicer]]:
    """A Slicer per component of several domains; every domain thawed on exit."""
    slicers = []
    try:
        for members in components(place.all_domains):
            if len(members) < 2:
                continue  # alone on its CPUs: always thawed
            slicer = timeslice.Slicer(
                [groups[d.name][-1] for d in members], place.slice_s, place.work_conserving,
                [d.weight for d in members] if place.by_weight else None)
            slicers.append(slicer)
            slicer.start()
        yield slicers
    finally:
        with signals.deferred():
            for slicer in slicers:
                slicer.stop()
