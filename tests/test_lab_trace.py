"""`vhpc lab trace`: a cell's run under sched_switch, told as CPU time by kind of
task. The parsing and the sums are checked on a hand-written trace; one real
traced run checks the whole path where tracefs is usable (root)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vhpc import cli, mpi, paths
from vhpc.lab import LabError, experiment, sched_trace
from vhpc.runtime import bench as runtime_bench

# Two CPUs, 10 µs apart per line. CPU 0: rank 100 (its helper 101), the watcher,
# idle; CPU 1: the driver, rank 200, another program.
TRACE = """\
# tracer: nop
       pingpong-100     (    100) [000] d..2.  1.000000: sched_switch: prev_comm=pingpong prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=vhpc-watch0 next_pid=50 next_prio=120
    vhpc-watch0-50      (     40) [000] d..2.  1.000010: sched_switch: prev_comm=vhpc-watch0 prev_pid=50 prev_prio=120 prev_state=R ==> next_comm=async next_pid=101 next_prio=120
          async-101     (    100) [000] d..2.  1.000020: sched_switch: prev_comm=async prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
         <idle>-0       (-------) [000] d..2.  1.000050: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=pingpong next_pid=100 next_prio=120
       pingpong-100     (    100) [000] d..2.  1.000070: sched_switch: prev_comm=pingpong prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
    vhpc-slicer-39      (     40) [001] d..2.  1.000000: sched_switch: prev_comm=vhpc-slicer prev_pid=39 prev_prio=89 prev_state=S ==> next_comm=pingpong next_pid=200 next_prio=120
       pingpong-200     (    200) [001] d..2.  1.000030: sched_switch: prev_comm=pingpong prev_pid=200 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=7 next_prio=120
           bash-7       (      7) [001] d..2.  1.000040: sched_switch: prev_comm=bash prev_pid=7 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
"""


def test_the_trace_becomes_segments_per_cpu_with_thread_groups():
    segs, tgid = sched_trace.segments(TRACE.splitlines())
    assert [(s.cpu, s.start, s.end, s.pid) for s in segs if s.cpu == 0] == [
        (0, 1_000_000_000, 1_000_010_000, 50), (0, 1_000_010_000, 1_000_020_000, 101),
        (0, 1_000_020_000, 1_000_050_000, 0), (0, 1_000_050_000, 1_000_070_000, 100)]
    assert tgid[101] == 100 and tgid[50] == 40 and 0 not in tgid


def test_cpu_time_by_kind_over_the_ranks_last_window():
    segs, tgid = sched_trace.segments(TRACE.splitlines())
    # The ranks last ran until 1.000070 s; a 50 µs window starts at 1.000020 s.
    ct = sched_trace.cpu_time(segs, tgid, "bench/pingpong", 50e-6)
    assert ct.window_ns == 50_000
    assert ct.ns[0] == {"idle": 30_000, "rank main": 20_000}
    assert ct.ns[1] == {"rank main": 10_000, "other": 10_000}
    whole = sched_trace.cpu_time(segs, tgid, "pingpong", 1.0)
    assert whole.ns[0] == {"slicer watcher": 10_000, "rank helper": 10_000, "idle": 30_000,
                           "rank main": 20_000}
    assert whole.ns[1] == {"rank main": 30_000, "other": 10_000}  # the driver's start is unseen
    rows = sched_trace.rows(whole)
    assert {(r["cpu"], r["kind"]): r["runs"] for r in rows}[(0, "rank main")] == 1
    assert all(0 < r["share"] <= 1 for r in rows)


def test_the_ranks_are_found_by_their_program_or_their_commands_first_word():
    bench = experiment.Workload(name="b", program="pingpong")
    external = experiment.Workload(name="x", command=["/usr/bin/hpcc", "-x"], parser="hpcc")
    assert [sched_trace.program_of(w) for w in (bench, external)] == ["pingpong", "/usr/bin/hpcc"]


def test_a_trace_without_the_program_says_so():
    segs, tgid = sched_trace.segments(TRACE.splitlines())
    with pytest.raises(sched_trace.TraceUnavailable, match="no process named 'beff'"):
        sched_trace.cpu_time(segs, tgid, "beff", 1.0)


def test_a_cell_is_picked_by_name_where_the_experiment_has_several():
    exp = experiment.load(paths.REPO / "experiments" / "timesliced-pingpong.toml")
    with pytest.raises(LabError, match=r"several of mpi: choose one with --mpi \(mpich, openmpi\)"):
        experiment.pick_cell(exp)
    with pytest.raises(LabError, match="no config 'three-cpus'"):
        experiment.pick_cell(exp, mpi="mpich", config="three-cpus")
    cell = experiment.pick_cell(exp, mpi="openmpi", config="one-cpu")
    assert (cell.mpi, cell.config.name, cell.workload.name, cell.policy) == \
        ("openmpi", "one-cpu", "pingpong-8B", "adaptive")


def tracing_usable() -> str | None:
    try:
        sched_trace.tracefs()
    except sched_trace.TraceUnavailable as exc:
        return str(exc)
    return None


@pytest.mark.skipif(not mpi.MPIS["mpich"].available(), reason="MPICH not installed")
def test_a_traced_run_accounts_for_the_ranks(tmp_path, tiny_experiment):
    why = tracing_usable()
    if why:
        pytest.skip(f"tracefs not usable here: {why}")
    runtime_bench.build_bench()
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_experiment)
    got = CliRunner().invoke(cli.main, ["lab", "trace", str(path), "--window", "0.03", "--json"])
    assert got.exit_code == 0, got.output
    rows = [json.loads(line) for line in got.output.splitlines()]
    assert {r["config"] for r in rows} == {"native"}
    assert all(r["metrics"]["lat_8_us"] > 0 for r in rows)  # the run's own result rides along
    # Two busy-polling ranks on their own CPUs: each CPU mostly runs a rank.
    main = [r for r in rows if r["kind"] == "rank main"]
    assert len(main) == 2 and all(r["share"] > 0.5 for r in main), rows
    for cpu in {r["cpu"] for r in rows}:
        assert sum(r["share"] for r in rows if r["cpu"] == cpu) <= 1.0 + 1e-9
