"""The native slicer (crates/vhpc-slicer through vhpc._core.Slicer, wrapped by
timeslice.Slicer) on real freezer groups: it alternates domains, honours
weights, switches early when a domain blocks, runs several slicers at once on
one thread, and leaves every group THAWED when stopped or when it fails."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from vhpc import _core
from vhpc.host import placement, timeslice


@pytest.fixture(autouse=True)
def freezer_or_skip():
    ok, reason = placement.freezer_available()
    if not ok:
        pytest.skip(f"freezer writes impossible here: {reason}")


def states(groups: list[Path]) -> list[str]:
    return [(g / "freezer.state").read_text().strip() for g in groups]


def start_in(group: Path, code: str, cpu: int = 0) -> subprocess.Popen:
    """A Python process on `cpu` that joins `group`, then runs `code`."""
    script = f"import os; open({str(group / 'tasks')!r}, 'w').write(str(os.getpid()))\n"
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", script + code])


def wait_joined(procs: list[subprocess.Popen], groups: list[Path]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(str(p.pid) in (g / "tasks").read_text().split() for p, g in zip(procs, groups)):
            return
        time.sleep(0.005)
    raise AssertionError("the processes did not join their groups")


@contextmanager
def tasks_in(groups: list[Path], code: str, cpu: int = 0) -> Iterator[None]:
    """One process per group running `code` on `cpu`, joined; killed at the end."""
    procs = [start_in(g, code, cpu) for g in groups]
    try:
        wait_joined(procs, groups)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def run_for(slicer, seconds: float, during: Callable[[], object] = lambda: None) -> object:
    """Starts `slicer`, calls `during` after `seconds`, stops it (also on error)."""
    slicer.start()
    try:
        time.sleep(seconds)
        return during()
    finally:
        slicer.stop()


def test_domains_alternate_in_turn_and_all_thaw_on_stop():
    with placement.run_groups(placement.CGROUP_FREEZER, 3) as groups:
        with tasks_in(groups, "while True: pass"):
            slicer = timeslice.Slicer(groups, 0.01, work_conserving=False)
            running = run_for(slicer, 0.5, lambda: states(groups))
        after = states(groups)
    assert running.count("THAWED") == 1, running
    assert after == ["THAWED"] * 3
    # In turn: 0, 1, 2, 0, ... so no domain is more than one slice ahead.
    assert max(slicer.slices) - min(slicer.slices) <= 1, slicer.slices
    assert sum(slicer.slices) > 20 and slicer.early_switches == 0
    assert slicer.switches == sum(slicer.slices) - 1


def test_weights_give_slices_in_proportion():
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        slicer = timeslice.Slicer(groups, 0.005, work_conserving=False, weights=[300, 100])
        run_for(slicer, 0.5)
    a, b = slicer.slices
    assert a + b > 40
    assert abs(a - 3 * b) <= 3, slicer.slices  # stride: exact but for the last round


def test_switches_early_when_the_running_domain_blocks():
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        with tasks_in(groups, "import time\nwhile True: time.sleep(0.002)"):
            slicer = timeslice.Slicer(groups, slice_s=10.0, log=True)  # slices never expire
            started = time.monotonic_ns()
            run_for(slicer, 0.5)
    assert slicer.early_switches == slicer.switches > 10
    # Found by a per-CPU watcher or by the driver's fallback poll, never more.
    assert 0 <= slicer._native.watched_switches <= slicer.early_switches
    log = slicer.switch_log()  # kept after stop
    assert len(log) == slicer.switches
    assert all(started <= decided <= thawed < started + 10**10 for decided, thawed in log)


def test_the_watcher_of_the_cpu_a_domain_blocked_on_switches_it():
    # Tasks on the last CPU, the first CPU kept busy outside the domains (its
    # watcher, SCHED_IDLE, never runs) and a fallback poll too slow to matter:
    # only the last CPU's watcher can see the domain block. It once could not
    # claim it (the CPUs the tasks last ran on were lost once none was runnable).
    cpus = placement.allowed_cpus()
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    busy = subprocess.Popen(["taskset", "-c", str(cpus[0]), sys.executable, "-c",
                             "while True: pass"])
    try:
        with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
            with tasks_in(groups, "import time\nwhile True: time.sleep(0.002)", cpu=cpus[-1]):
                slicer = _core.Slicer([str(g) for g in groups], 10.0, poll_s=1.0)
                run_for(slicer, 0.5)
    finally:
        busy.kill()
        busy.wait()
    # A prompt watcher switches at least once per idle round (at most 0.5 ms):
    # 2,183 switches here; leaving it to the first CPU's watcher, which gets a
    # sliver of its busy CPU now and then, made 122.
    assert slicer.watched_switches > 400, (slicer.switches, slicer.watched_switches)


def test_sleeping_domains_are_not_switched_without_end():
    # Switching between domains whose tasks all sleep is of no use: the slicer
    # waits an idle round (25 µs doubling to 0.5 ms) first, instead of switching
    # as fast as it can (tens of thousands of times a second).
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        with tasks_in(groups, "import time\ntime.sleep(60)"):
            slicer = timeslice.Slicer(groups, slice_s=0.03)
            run_for(slicer, 0.5)
    assert 10 < slicer.early_switches < 5000, slicer.early_switches


def test_a_busy_domain_keeps_its_slice():
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        with tasks_in(groups, "while True: pass"):
            slicer = timeslice.Slicer(groups, slice_s=0.1)
            run_for(slicer, 0.45)
    assert slicer.early_switches == 0 and 3 <= slicer.switches <= 5, slicer.switches


def test_several_slicers_at_once_share_one_thread():
    with placement.run_groups(placement.CGROUP_FREEZER, 4) as groups:
        slicers = [timeslice.Slicer(groups[:2], 0.005, work_conserving=False),
                   timeslice.Slicer(groups[2:], 0.005, work_conserving=False)]
        for s in slicers:
            s.start()
        tids = {s.native_id for s in slicers}
        time.sleep(0.3)
        mid = states(groups)
        slicers[0].stop()
        assert slicers[1].native_id in tids  # the other goes on, on the same thread
        time.sleep(0.1)
        slicers[1].stop()
        after = states(groups)
    assert len(tids) == 1 and None not in tids
    assert mid[:2].count("THAWED") == 1 and mid[2:].count("THAWED") == 1, mid
    assert all(sum(s.slices) > 20 for s in slicers)
    assert after == ["THAWED"] * 4
    assert _core.slicer_thread()[0] is None  # the thread ended with the last slicer


def test_a_group_that_vanishes_stops_the_slicer_with_all_thawed():
    with placement.run_groups(placement.CGROUP_FREEZER, 3) as groups:
        slicer = timeslice.Slicer(groups, 0.005, work_conserving=False)
        slicer.start()
        time.sleep(0.05)
        groups[2].rmdir()  # empty, so the kernel lets it go: writing to it now fails
        time.sleep(0.1)
        assert slicer._native.error is not None
        assert states(groups[:2]) == ["THAWED", "THAWED"]  # thawed as it failed
        with pytest.raises(RuntimeError, match="slicer failed: .*rank2"):
            slicer.stop()
        assert states(groups[:2]) == ["THAWED", "THAWED"]


def test_a_missing_group_is_refused_at_start_and_nothing_is_frozen():
    with placement.run_groups(placement.CGROUP_FREEZER, 1) as (group,):
        slicer = timeslice.Slicer([group, group.parent / "nonexistent"], 0.01)
        with pytest.raises(OSError, match="nonexistent/freezer.state"):
            slicer.start()
        assert states([group]) == ["THAWED"]
        slicer.stop()  # nothing to stop


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="one positive weight per domain"):
        timeslice.Slicer([Path("/a"), Path("/b")], weights=[1, 0])
    with pytest.raises(ValueError, match="slice_s must be positive"):
        timeslice.Slicer([Path("/a")], slice_s=0)
    with pytest.raises(ValueError, match="at least one domain"):
        timeslice.Slicer([])


def test_a_phase_ends_the_first_slice_early():
    """Per-vCPU slicers are staggered: with phase_s, the first switch comes that
    much sooner (a 0.4 s slice, 0.3 s of phase: switched by 0.2 s; none without)."""
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups:
        switches = {}
        with tasks_in(groups, "while True: pass"):
            for phase in (0.0, 0.3):
                slicer = timeslice.Slicer(groups, 0.4, work_conserving=False, phase_s=phase)
                switches[phase] = run_for(slicer, 0.2, lambda: slicer.switches)
    assert switches == {0.0: 0, 0.3: 1}, switches
    with pytest.raises(ValueError, match="phase_s"):
        _core.Slicer([str(g) for g in groups], 0.1, phase_s=0.2)
