"""The hint channel, the slicer's side (crates/vhpc-slicer/src/hints.rs) and the
ranks' (runtime/hints.c) together, on real freezer groups.

- A domain whose ranks say they wait is left at once although its task spins
  (a paravirtual yield: /proc shows the task runnable, so only the hint can
  tell); a wait in the MPI's own loop cannot be parked, so that domain is frozen.
- MPI ranks under libvhpc_wait in time-sliced single-rank domains with hints get
  correct results (ping-pong, Allreduce, Alltoall: tests/runtime/progress.c)
  while they hand the CPU over themselves and park while descheduled, on one CPU
  and on two; every group is THAWED afterwards.
- The lab's `hints` and `cosched` options are validated with errors naming the field."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from vhpc.host import hints, placement, timeslice
from vhpc.lab import LabError, experiment

# A stand-in rank: maps the hint file, stores `state` in page 0 slot <argv[2]> once
# it has joined its group, then spins (its task stays runnable).
_RANK = """
import mmap, os, struct, sys
open(sys.argv[3], 'w').write(str(os.getpid()))
f = open(sys.argv[1], 'r+b'); m = mmap.mmap(f.fileno(), 0)
struct.pack_into('<I', m, 4096 * (1 + int(sys.argv[2])), int(sys.argv[4]))
while True: pass
"""


@pytest.fixture(autouse=True)
def freezer_or_skip():
    ok, reason = placement.freezer_available()
    if not ok:
        pytest.skip(f"freezer writes impossible here: {reason}")


def spinning(page: Path, groups: list[Path], states: list[int]) -> list[subprocess.Popen]:
    procs = [subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", _RANK, str(page),
                               str(d), str(g / "tasks"), str(s)])
             for d, (g, s) in enumerate(zip(groups, states))]
    deadline = time.monotonic() + 10
    while any(str(p.pid) not in (g / "tasks").read_text().split() for p, g in zip(procs, groups)):
        assert time.monotonic() < deadline, "the stand-in ranks did not join their groups"
        time.sleep(0.005)
    return procs


def spec(page: Path, n: int, cpus: tuple[tuple[int, ...], ...] = ()) -> timeslice.HintSpec:
    return timeslice.HintSpec(page, 0, tuple(range(n)), tuple(((d, 0),) for d in range(n)),
                              tuple(range(n)), cpus=cpus)


@pytest.mark.parametrize("cpus, polls", [
    (((0,), (1,)), [1, 1]),      # a CPU each, sliced together: the other CPU would idle
    (((0,), (0,)), [0, 0]),      # one CPU: it is the running member's
    (((0, 1), (1,)), [0, 0]),    # a gang on both CPUs beside one on CPU 1
    ((), [0, 0]),                # not known: nobody polls
])
def test_a_parked_member_polls_only_where_no_other_member_of_its_queue_runs(cpus, polls):
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups, \
            hints.hint_file(2) as page:
        slicer = timeslice.Slicer(groups, 10.0, hints=spec(page, 2, cpus))
        slicer.start()
        try:
            got = [hints.read_member(page, m)["poll"] for m in range(2)]
        finally:
            slicer.stop()
    assert got == polls


@pytest.mark.parametrize("waiting, frozen", [
    (hints.KINDS_BY_NAME["wait"] | hints.PARKABLE, False),  # the library's loop: parked
    (hints.KINDS_BY_NAME["wait"], True),                    # the MPI's own wait: frozen
])
def test_a_domain_whose_ranks_wait_is_left_although_its_task_spins(waiting, frozen):
    computing = hints.KINDS_BY_NAME["compute"]
    with placement.run_groups(placement.CGROUP_FREEZER, 2) as groups, \
            hints.hint_file(2) as page:
        # Domain 0 runs first and says it waits; domain 1 computes. 10 s slices:
        # nothing but the hint can end domain 0's slice (its task is runnable).
        procs = spinning(page, groups, [waiting, computing])
        slicer = timeslice.Slicer(groups, 10.0, hints=spec(page, 2))
        try:
            slicer.start()
            time.sleep(0.3)
            running = [(g / "freezer.state").read_text().strip() for g in groups]
            assert hints.read_header(page)["listening"] == 1
        finally:
            slicer.stop()
            for p in procs:
                p.kill()
                p.wait()
        after = [(g / "freezer.state").read_text().strip() for g in groups]
        listening = hints.read_header(page)["listening"]
    assert slicer.hinted_switches == slicer.switches == 1, (slicer.switches, slicer.slices)
    # Parked: left thawed (its ranks would stop in their wait); else frozen.
    assert running == ["FROZEN" if frozen else "THAWED", "THAWED"], running
    assert after == ["THAWED", "THAWED"]
    assert listening == 0  # stopped: nobody parks any more


@pytest.mark.parametrize("cpus", ["one", "two"])
def test_mpi_ranks_hand_over_and_park_with_correct_results(mpi_impl, wait_lib, programs, cpus):
    n = 2
    with placement.run_groups(placement.CGROUP_FREEZER, n) as groups, \
            hints.hint_file(n) as page:
        ranks = {r: ([groups[r]], [0 if cpus == "one" else r % len(placement.allowed_cpus())])
                 for r in range(n)}
        # their CPUs, as the lab gives them: on two, a parked rank polls for its turn
        slicer = timeslice.Slicer(groups, 0.03, hints=spec(
            page, n, tuple(tuple(cpu) for _, cpu in ranks.values())))
        cmd = placement.confined_launch(
            mpi_impl, ranks, [str(programs["progress"]), "300"],
            env={"VHPC_WAIT": "adaptive"}, preload=wait_lib,
            rank_env={r: hints.env_for(page, r, 0) for r in range(n)})
        slicer.start()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                  env=mpi_impl.launcher_env())
        finally:
            slicer.stop()
        after = [(g / "freezer.state").read_text().strip() for g in groups]
        polls = [hints.read_member(page, m)["poll"] for m in range(n)]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(" ok iterations=300") == n, proc.stdout
    two = cpus == "two" and len(placement.allowed_cpus()) > 1
    assert polls == [int(two)] * n
    assert after == ["THAWED"] * n
    # 300 iterations of a ping-pong and two collectives: the ranks' own hand-overs
    # and the slicer's hinted switches make most of the switches.
    assert slicer.handovers + slicer.hinted_switches > 300, (
        slicer.switches, slicer.handovers, slicer.hinted_switches)


def load(tmp_path: Path, config: str) -> experiment.Experiment:
    path = tmp_path / "x.toml"
    path.write_text(f"""
[experiment]
name = "x"
[[workload]]
name = "pp"
program = "pingpong"
{config}
""")
    return experiment.load(path)


@pytest.mark.parametrize("config, where, what", [
    ('[[config]]\nname = "a"\nkind = "native"\nhints = true',
     "config.0", "`hints` is only for kind `domains`, not `native`"),
    ('[[config]]\nname = "a"\nkind = "domains"\nhints = true\n'
     '[[config.domain]]\nname = "v"\ncpus = [0]',
     "config.0", '`hints` is only for mode = "timesliced"'),
    ('[[config]]\nname = "a"\nkind = "domains"\nmode = "timesliced"\ncosched = true\n'
     'slicing = "vcpu"\n[[config.domain]]\nname = "v"\ncpus = [0]',
     "config.0.cosched", "cosched = true needs hints = true"),
    ('[[config]]\nname = "a"\nkind = "domains"\nmode = "timesliced"\nhints = true\n'
     'cosched = true\n[[config.domain]]\nname = "v"\ncpus = [0]',
     "config.0.cosched", 'cosched = true needs slicing = "vcpu"'),
    ('[[config]]\nname = "a"\nkind = "timesliced"\nhints = "yes"',
     "config.0.hints", "Input should be a valid boolean"),
])
def test_the_options_are_validated_naming_the_field(tmp_path, config, where, what):
    with pytest.raises(LabError) as err:
        load(tmp_path, config)
    assert f"x.toml: {where}: {what}" in str(err.value), str(err.value)


def test_the_options_are_accepted_and_kept_out_of_old_cells(tmp_path):
    exp = load(tmp_path, '[[config]]\nname = "a"\nkind = "timesliced"\nhints = true\n'
                         '[[config]]\nname = "b"\nkind = "timesliced"\n'
                         '[[config]]\nname = "c"\nkind = "domains"\nmode = "timesliced"\n'
                         'slicing = "vcpu"\nhints = true\ncosched = true\n'
                         '[[config.domain]]\nname = "v"\ncpus = [0]')
    assert exp.config[0].dump()["hints"] is True
    assert "hints" not in exp.config[1].dump()  # an old cell's run key is unchanged
    assert exp.config[2].hints and exp.config[2].cosched
