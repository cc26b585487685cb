"""Time-sliced domains (vhpc/timeslice.py, placement `timesliced`): one domain
thawed at a time, in turn; early switches when the running domain sleeps; every
group and process gone afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc import mpi
from vhpc.host import placement, timeslice

MPIS = mpi.available()


def freezer_or_skip() -> None:
    ok, reason = placement.freezer_available()
    if not ok:
        pytest.skip(f"timesliced unavailable: {reason}")


def start_in(domain: Path, code: str) -> subprocess.Popen:
    """A Python process that joins `domain` before running `code`, pinned to CPU 0."""
    script = f"import os; open({str(domain / 'tasks')!r}, 'w').write(str(os.getpid()))\n"
    return subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", script + code])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def states(domains: list[Path]) -> list[str]:
    return [(d / "freezer.state").read_text().strip() for d in domains]


def test_one_domain_runs_at_a_time_and_each_gets_its_turn():
    freezer_or_skip()
    with placement.timesliced_domains(2) as parent:
        domains = [parent / "rank0", parent / "rank1"]
        procs = [start_in(d, "while True: pass") for d in domains]
        try:
            # Until both have joined, the slicer switches between idle domains every
            # few hundred µs and, outside the GIL, faster than two files are read.
            joined = time.monotonic() + 10
            while not all(str(p.pid) in (d / "tasks").read_text().split()
                          for p, d in zip(procs, domains)) and time.monotonic() < joined:
                time.sleep(0.005)
            seen = []
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                # Two files cannot be read at once: a sample is kept when the first
                # domain reads the same after the second (no switch in between).
                sample = states(domains)
                if states(domains[:1]) == sample[:1]:
                    seen.append(sample)
                time.sleep(0.003)
            used = [cpu_seconds(p.pid) for p in procs]
        finally:
            for p in procs:
                p.kill()
    # FREEZING is the way from THAWED to FROZEN: never two domains running.
    assert all(s.count("THAWED") <= 1 for s in seen), seen
    assert {tuple(s) for s in seen} >= {("THAWED", "FROZEN"), ("FROZEN", "THAWED")}
    assert all(u > 0.1 for u in used), used  # each busy loop got slices of its own
    assert not parent.exists()


def test_switches_early_when_the_running_domain_sleeps():
    freezer_or_skip()
    parent = placement.CGROUP_FREEZER / f"{placement.GROUP_PREFIX}{os.getpid()}-test"
    domains = [parent / "a", parent / "b"]
    try:
        for d in domains:
            d.mkdir(parents=True)
        procs = [start_in(d, "import time\nwhile True: time.sleep(0.001)") for d in domains]
        slicer = timeslice.Slicer(domains, slice_s=10.0)  # slices never expire here
        slicer.start()
        time.sleep(0.5)
        slicer.stop()
        for p in procs:
            p.kill()
    finally:
        placement.remove_group(parent)
    assert slicer.early_switches == slicer.switches > 10


@pytest.mark.skipif(not MPIS, reason="no MPI installed (mpicc.mpich / mpicc.openmpi)")
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_timesliced_ranks_finish_and_leave_nothing(impl):
    freezer_or_skip()
    var = impl.rank_env_names()[0]
    report = ["sh", "-c", f'echo "${var} $(grep freezer /proc/self/cgroup | cut -d: -f3)"']
    with placement.timesliced(2).command(impl, report) as cmd:
        parent = run_parent(cmd)
        assert parent.parent == placement.CGROUP_FREEZER and parent.name.startswith("vhpc-")
        proc = subprocess.run(cmd, env=impl.launcher_env(), capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split() for line in proc.stdout.splitlines() if line.strip())
    assert lines == {"0": f"/{parent.name}/rank0", "1": f"/{parent.name}/rank1"}
    assert not parent.exists()
    assert parent not in placement.leftover_groups()


def run_parent(cmd: list[str]) -> Path:
    """The run's parent cgroup, from the confinement the wrapper gets (rank 0's group)."""
    spec = json.loads(next(a for a in cmd if a.startswith("{")))
    return Path(spec["0"]["groups"][0]).parent


def test_stopping_leaves_the_callers_scheduling_policy_alone():
    # The slicer raises its own threads to SCHED_FIFO (the driver, a switching
    # watcher, and every thread `stop` joins): none of that may reach the caller,
    # whose later processes would inherit it.
    freezer_or_skip()
    for _ in range(30):
        with placement.timesliced_domains(2):
            time.sleep(0.002)  # the watchers and the driver start, and see nothing to do
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
