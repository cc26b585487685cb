"""Where the ranks of one MPI run may execute.

A placement turns a program and its rank count into the command line of one
run with the ranks confined, holding whatever that needs (cgroups) only while
its context is open:

    with placement.command(impl, ["./pingpong", "-s", "8"]) as cmd:
        subprocess.run(cmd, env=impl.launcher_env())

Kinds:
  spread          no confinement; on this 2-core machine 2 ranks get a core each.
  shared_core     every rank on CPU 0: the launcher starts under `taskset -c 0`
                  and its children inherit the mask (mpi.py passes --bind-to none).
  capped_cgroups  each rank in its own cgroup v1 `cpu` group capped at half a
                  core (CFS quota 50 ms per 100 ms) and pinned to CPU rank % ncpus,
                  by a small wrapper that confines itself and then execs the program.
  timesliced      each rank a single-vCPU *domain*: its own cgroup v1 `freezer`
                  group, pinned to CPU rank % ncpus, and only one domain thawed at
                  a time, for a 30 ms slice in turn (as Xen's credit scheduler
                  runs vCPUs on one physical CPU), switching early when every task
                  of the running domain sleeps (as a hypervisor runs another vCPU
                  when one halts). A yield inside a domain cannot reach the peer.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vhpc.host import cgroups, hints, leftovers, signals, timeslice
from vhpc.mpi import MpiImpl

CGROUP_CPU = cgroups.CPU
CGROUP_FREEZER = cgroups.FREEZER
GROUP_PREFIX = cgroups.PREFIX
QUOTA_US = 50_000
PERIOD_US = 100_000

_run_numbers = itertools.count()

# Runs inside each rank (argv: JSON {rank: {"groups": [...], "cpus": [...], "env": {...}}},
# the rank variable, program...): joins its cgroups, sets its affinity and the rank's
# own environment (the hint channel's slot), then execs the program, or, given a
# network namespace ("netns"), host/netns_rank.py, which enters it and execs the
# program. The preload travels under another name so the wrappers themselves are
# not preloaded.
_WRAPPER = """\
import json, os, sys
mine = json.loads(sys.argv[1])[os.environ[sys.argv[2]]]
for group in mine["groups"]:
    with open(os.path.join(group, "tasks"), "w") as tasks:
        tasks.write(str(os.getpid()))
os.sched_setaffinity(0, mine["cpus"])
argv, env = sys.argv[3:], dict(os.environ)
env.update(mine.get("env", {}))
if mine.get("netns"):
    argv = [sys.executable, mine["enter"], mine["netns"], *argv]
else:
    preload = env.pop("VHPC_PLACEMENT_PRELOAD", "")
    if preload:
        env["LD_PRELOAD"] = preload
os.execvpe(argv[0], argv, env)
"""
#: What a rank in a network namespace runs last (a script: the standard library only).
NETNS_ENTER = Path(__file__).with_name("netns_rank.py")


class PlacementUnavailable(RuntimeError):
    """This machine cannot confine ranks this way (the message says why)."""


@dataclass(frozen=True)
class Placement:
    kind: str
    nranks: int
    hints: bool = False  # timesliced: the hint channel (vhpc.host.hints)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.nranks}"

    @property
    def label(self) -> str:
        return {
            "spread": f"{self.nranks} ranks, own cores",
            "shared_core": f"{self.nranks} ranks, 1 core",
            "capped_cgroups": f"{self.nranks} ranks, ½-core caps",
            "timesliced": f"{self.nranks} ranks, time-sliced domains",
        }[self.kind]

    def available(self) -> tuple[bool, str]:
        """Whether this machine can run this placement, and why (not)."""
        if self.kind == "spread":
            ncpus = len(allowed_cpus())
            if ncpus < self.nranks:
                return False, f"{self.nranks} ranks need {self.nranks} CPUs, only {ncpus} allowed"
            return True, f"{ncpus} CPUs allowed"
        if self.kind == "shared_core":
            if shutil.which("taskset") is None:
                return False, "taskset not found (install util-linux)"
            return True, "launcher under taskset -c 0"
        if self.kind == "timesliced":
            return freezer_available()
        return cgroup_cpu_available()

    @contextmanager
    def command(
        self,
        impl: MpiImpl,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        preload: Path | str | None = None,
    ) -> Iterator[list[str]]:
        """The launch command for one run; confinement resources live while inside."""
        ok, reason = self.available()
        if not ok:
            raise PlacementUnavailable(f"{self.label}: {reason}")
        if self.kind == "spread":
            yield impl.launch(self.nranks, argv, env=env, preload=preload)
        elif self.kind == "shared_core":
            yield ["taskset", "-c", "0", *impl.launch(self.nranks, argv, env=env, preload=preload)]
        elif self.kind == "timesliced" and self.hints:
            with hints.hint_file(self.nranks) as page, \
                    timesliced_domains(self.nranks, hint_page=page) as parent:
                cpus = allowed_cpus()
                ranks = {r: ([parent / f"rank{r}"], [cpus[r % len(cpus)]])
                         for r in range(self.nranks)}
                yield confined_launch(impl, ranks, argv, env=env, preload=preload,
                                      rank_env={r: hints.env_for(page, r, 0)
                                                for r in range(self.nranks)})
        else:
            groups = cpu_groups if self.kind == "capped_cgroups" else timesliced_domains
            with groups(self.nranks) as parent:
                cpus = allowed_cpus()
                ranks = {r: ([parent / f"rank{r}"], [cpus[r % len(cpus)]])
                         for r in range(self.nranks)}
                yield confined_launch(impl, ranks, argv, env=env, preload=preload)


def confined_launch(
    impl: MpiImpl,
    ranks: dict[int, tuple[list[Path], list[int]]],
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    preload: Path | str | None = None,
    netns: dict[int, str] | None = None,
    rank_env: dict[int, dict[str, str]] | None = None,
) -> list[str]:
    """Launch command whose rank r joins the cgroups ranks[r][0] and runs on the
    CPUs ranks[r][1] (and, given, in the network namespace netns[r]) before the
    program starts, with rank_env[r] added to its environment."""
    common = dict(env or {})
    if preload is not None:
        common["VHPC_PLACEMENT_PRELOAD"] = str(preload)
    spec = {str(r): {"groups": [str(g) for g in groups], "cpus": list(cpus),
                     **({"env": rank_env[r]} if rank_env and r in rank_env else {})}
            for r, (groups, cpus) in ranks.items()}
    for r, ns in (netns or {}).items():
        spec[str(r)] |= {"netns": ns, "enter": str(NETNS_ENTER)}
    wrapped = [sys.executable, "-c", _WRAPPER, json.dumps(spec), impl.rank_env_names()[0],
               *map(str, argv)]
    return impl.launch(len(ranks), wrapped, env=common)


def spread(nranks: int = 2) -> Placement:
    return Placement("spread", nranks)


def shared_core(nranks: int = 2) -> Placement:
    return Placement("shared_core", nranks)


def capped_cgroups(nranks: int = 2) -> Placement:
    return Placement("capped_cgroups", nranks)


def timesliced(nranks: int = 2, hints: bool = False) -> Placement:
    return Placement("timesliced", nranks, hints)


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def cgroup_cpu_available() -> tuple[bool, str]:
    """Whether cgroup v1 `cpu` groups can be created and capped here (tries one)."""
    if not (CGROUP_CPU / "cpu.cfs_quota_us").exists():
        return False, f"no cgroup v1 cpu controller with CFS quota at {CGROUP_CPU}"
    return try_group(CGROUP_CPU, lambda group: set_quota(group, QUOTA_US, PERIOD_US))


def freezer_available() -> tuple[bool, str]:
    """Whether cgroup v1 freezer groups can be created here (tries one)."""
    if not CGROUP_FREEZER.is_dir():
        return False, f"no cgroup v1 freezer controller at {CGROUP_FREEZER}"
    return try_group(CGROUP_FREEZER, lambda group: None)


def try_group(root: Path, configure) -> tuple[bool, str]:
    """Create, configure and remove a probe group under `root`: (works, why)."""
    probe = root / f"{GROUP_PREFIX}{os.getpid()}-probe"
    try:
        probe.mkdir()
    except OSError as exc:
        return False, f"cannot create a cgroup under {root}: {exc.strerror}"
    try:
        configure(probe)
    except OSError as exc:
        return False, f"cannot configure {probe}: {exc.strerror}"
    finally:
        probe.rmdir()
    return True, f"cgroup v1 {root.name} controller writable at {root}"


def set_quota(group: Path, quota_us: int, period_us: int) -> None:
    (group / "cpu.cfs_period_us").write_text(str(period_us))
    (group / "cpu.cfs_quota_us").write_text(str(quota_us))


@contextmanager
def run_groups(root: Path, nranks: int) -> Iterator[list[Path]]:
    """Groups rank0..rank<n-1> under a parent `vhpc-<pid>-<n>` of `root`.

    Recorded before they exist (host/leftovers.py) and always removed on exit,
    also after an exception or a signal: processes still in the groups are
    killed first.
    """
    parent = root / f"{GROUP_PREFIX}{os.getpid()}-{next(_run_numbers)}"
    with leftovers.owned_groups([parent]):
        parent.mkdir()
        groups = [parent / f"rank{rank}" for rank in range(nranks)]
        for group in groups:
            group.mkdir()
        yield groups


@contextmanager
def cpu_groups(
    nranks: int, quota_us: int = QUOTA_US, period_us: int = PERIOD_US
) -> Iterator[Path]:
    """A parent `cpu` group holding groups rank0..rank<n-1>, each capped."""
    with run_groups(CGROUP_CPU, nranks) as groups:
        for group in groups:
            set_quota(group, quota_us, period_us)
        yield groups[0].parent


@contextmanager
def timesliced_domains(nranks: int, slice_s: float = timeslice.SLICE_S,
                       switch_log: list[tuple[int, int]] | None = None,
                       hint_page: Path | None = None) -> Iterator[Path]:
    """A parent `freezer` group with one domain rank0..rank<n-1> per rank,
    time-sliced by a timeslice.Slicer while open. Given `switch_log`, the slicer
    times its switches and they are appended to it (Slicer.switch_log) at the end.
    Given `hint_page` (vhpc.host.hints), it reads the hint channel there: rank r in
    slot 0 of page r, on CPU `cpus[r % len(cpus)]` (its wrapper pins it there)."""
    with run_groups(CGROUP_FREEZER, nranks) as domains:
        cpus = allowed_cpus()
        spec = None if hint_page is None else timeslice.HintSpec(
            hint_page, 0, tuple(range(nranks)), tuple(((r, 0),) for r in range(nranks)),
            tuple(range(nranks)), cpus=tuple((cpus[r % len(cpus)],) for r in range(nranks)))
        slicer = timeslice.Slicer(domains, slice_s, log=switch_log is not None, hints=spec)
        slicer.start()
        try:
            yield domains[0].parent
        finally:
            with signals.deferred():
                if switch_log is not None:  # the log goes with the slicer
                    switch_log.extend(slicer.switch_log())
                slicer.stop()


# Under their old names: the runtime bench and its tests use them.
group_tasks = cgroups.tasks
remove_group = cgroups.remove


def leftover_groups() -> list[Path]:
    """vhpc groups present under the cpu and freezer controllers (none, after every run)."""
    return [g for g in cgroups.top_level() if g.parent in (CGROUP_CPU, CGROUP_FREEZER)]
