"""adaptive's decision from what a process can see (docs/runtime.md): the mode it
picks under each placement, read from VHPC_VERBOSE's report of every change.

The first decision, at MPI_Init, rests on static evidence only (CPU masks of the
node's ranks, the cgroup's CFS quota), so it is asserted exactly; being held off
the CPU shows over the following samples, so the time-sliced case asserts that
timeshared is reached before the job ends."""

from __future__ import annotations

import re
import subprocess

import pytest

from vhpc.host import placement

MODE = re.compile(r"vhpc_wait: rank=(\d+) mode=(\w+)")


def modes(stderr: str) -> dict[int, list[str]]:
    """Per rank, the modes in the order adaptive reported them."""
    seen: dict[int, list[str]] = {}
    for rank, mode in MODE.findall(stderr):
        seen.setdefault(int(rank), []).append(mode)
    return seen


def run_adaptive(mpi_impl, wait_lib, place, argv: list[str]) -> subprocess.CompletedProcess:
    """`argv` under `place` with adaptive reporting every mode change; it must succeed."""
    ok, reason = place.available()
    if not ok:
        pytest.skip(f"{place.label}: {reason}")
    env = {"VHPC_WAIT": "adaptive", "VHPC_VERBOSE": "1"}
    with place.command(mpi_impl, argv, env=env, preload=wait_lib) as cmd:
        proc = subprocess.run(cmd, env=mpi_impl.launcher_env(), capture_output=True, text=True,
                              timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def run_placed(mpi_impl, wait_lib, build, place, *args: str) -> dict[int, list[str]]:
    argv = [str(build / "bench" / mpi_impl.name / "pingpong"), "-s", "8", "-T", "lat", *args]
    proc = run_adaptive(mpi_impl, wait_lib, place, argv)
    found = modes(proc.stderr)
    assert sorted(found) == list(range(place.nranks)), proc.stderr
    return found


@pytest.mark.parametrize("place, first", [
    (placement.spread(2), "own_cpu"),         # a CPU each: pass straight through
    (placement.shared_core(2), "shared"),     # two masks on one CPU: yield
    (placement.shared_core(4), "shared"),
    (placement.capped_cgroups(2), "timeshared"),  # a quota below our CPU: spin, then sleep
], ids=lambda p: p.name if isinstance(p, placement.Placement) else p)
def test_first_decision_follows_static_evidence(mpi_impl, wait_lib, build, place, first):
    found = run_placed(mpi_impl, wait_lib, build, place, "-t", "0.05")
    assert all(seq[0] == first for seq in found.values()), found


def test_time_sliced_ranks_find_themselves_held_off(mpi_impl, wait_lib, build):
    # Each rank alone on its CPU (own_cpu at first), but only one domain runs at a
    # time: busy-polling, a rank is held off the CPU half the time.
    found = run_placed(mpi_impl, wait_lib, build, placement.timesliced(2), "-t", "0.5")
    assert all(seq[0] == "own_cpu" for seq in found.values()), found
    assert any("timeshared" in seq for seq in found.values()), found


HELD_OFF = re.compile(r"vhpc_wait: rank=\d+ mode=(\w+) .*steal=([\d.]+)%, held off=(\d+)%")


@pytest.mark.parametrize("place", [placement.spread(2), placement.shared_core(2)],
                         ids=lambda p: p.name)
def test_sleeping_outside_mpi_is_not_being_held_off(mpi_impl, wait_lib, programs, place):
    # 12 rounds of ping-pong, each followed by 40 ms asleep outside MPI: off the CPU
    # most of every sample, by the program's own doing (IMB-P2P does so), not a slicer's.
    proc = run_adaptive(mpi_impl, wait_lib, place, [str(programs["sleeper"])])
    assert proc.stdout.count(" ok rounds=12") == 2, proc.stderr
    reports = HELD_OFF.findall(proc.stderr)
    assert len(reports) >= 2, proc.stderr
    # Every mode change says what it saw: never held off; a timeshared one, if any, is
    # the host's steal (this machine is itself a VM).
    assert all(int(held) < 10 for _, _, held in reports), proc.stderr
    assert all(float(steal) > 10 for mode, steal, _ in reports if mode == "timeshared"), reports
