"""bench/ programs, rank placements and the runtime benchmark's bookkeeping.

Runs the real programs briefly (short -t, small sizes); the figures are only
checked for shape and sign: speed is the benchmark's business, not a test's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from vhpc import mpi
from vhpc.host import placement
from vhpc.runtime import bench as rb

MPIS = mpi.available()
needs_mpi = pytest.mark.skipif(not MPIS, reason="no MPI installed (mpicc.mpich / mpicc.openmpi)")


def pingpong_cmd(build: Path, impl: mpi.MpiImpl, n: int, *args: str) -> list[str]:
    return impl.launch(n, [str(build / "bench" / impl.name / "pingpong"), *args])


def run(cmd: list[str], impl: mpi.MpiImpl | None = None, timeout: float = 60):
    env = impl.launcher_env() if impl else dict(os.environ)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def rows(stdout: str) -> list[dict]:
    reader = csv.DictReader(io.StringIO(stdout))
    assert reader.fieldnames == ["test", "size", "iters", "usec", "MBps"]
    return list(reader)


# ---------------------------------------------------------------- pingpong


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_pingpong_reports_every_test_and_size(build, impl):
    proc = run(pingpong_cmd(build, impl, 2, "-m", "1", "-M", "1024", "-t", "0.01"), impl)
    assert proc.returncode == 0, proc.stderr
    table = rows(proc.stdout)
    sizes = [2**k for k in range(11)]
    assert [(r["test"], int(r["size"])) for r in table] == [
        (t, s) for t in ("lat", "bw", "bibw") for s in sizes
    ]
    for r in table:
        assert 2 <= int(r["iters"]) <= 100000
        assert float(r["usec"]) > 0 and float(r["MBps"]) > 0
        # MB/s follows from the time per message (bibw counts both directions).
        # usec is printed to 3 decimals, so allow for its rounding.
        moved, usec = int(r["size"]) * (2 if r["test"] == "bibw" else 1), float(r["usec"])
        assert moved / (usec + 5e-4) * 0.99 <= float(r["MBps"]) <= moved / max(usec - 5e-4, 1e-9) * 1.01


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_pingpong_odd_rank_joins_collectives(build, impl):
    proc = run(pingpong_cmd(build, impl, 3, "-s", "4096", "-t", "0.01"), impl)
    assert proc.returncode == 0, proc.stderr
    assert [r["test"] for r in rows(proc.stdout)] == ["lat", "bw", "bibw"]


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("test", ["lat", "bw", "bibw"])
def test_pingpong_check_catches_a_corrupted_byte(build, impl, test):
    # -C spoils one received byte after the timed loop: the checker must abort.
    proc = run(pingpong_cmd(build, impl, 2, "-s", "100", "-T", test, "-t", "0.01", "-C"), impl)
    assert proc.returncode != 0
    assert f"{test} size 100: received byte 99" in proc.stderr


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("bad", [["-x"], ["-T", "lat,nope"], ["-s", "0"], ["-t", "-1"], ["extra"]])
def test_pingpong_rejects_bad_options(build, impl, bad):
    proc = run(pingpong_cmd(build, impl, 2, *bad), impl)
    assert proc.returncode != 0
    assert "usage:" in proc.stderr
    assert "test,size" not in proc.stdout


@needs_mpi
def test_pingpong_help(build):
    impl = MPIS[0]
    proc = run(pingpong_cmd(build, impl, 2, "-h"), impl)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage:")


# ---------------------------------------------------------------- pipe_pingpong


def test_pipe_pingpong_counts_round_trips(build):
    proc = run([str(build / "bench" / "pipe_pingpong"), "-n", "2000"])
    assert proc.returncode == 0, proc.stderr
    (row,) = rows(proc.stdout)
    assert (row["test"], row["size"], row["iters"], row["MBps"]) == ("pipe", "1", "2000", "0")
    assert float(row["usec"]) > 0


def test_pipe_pingpong_runs_for_a_time(build):
    started = time.monotonic()
    proc = run([str(build / "bench" / "pipe_pingpong"), "-t", "0.05"])
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started >= 0.05
    (row,) = rows(proc.stdout)
    assert int(row["iters"]) >= 1000


def test_yield_floor_hands_the_core_back_and_forth(build):
    # On one core the parent's round trip cannot finish unless the child runs:
    # finishing them all (and the child exiting cleanly) is the hand-over at work.
    proc = run(["taskset", "-c", "0", str(build / "bench" / "pipe_pingpong"), "-y", "-n", "2000"])
    assert proc.returncode == 0, proc.stderr
    (row,) = rows(proc.stdout)
    assert (row["test"], row["size"], row["iters"]) == ("yield", "1", "2000")
    assert float(row["usec"]) > 0


def test_pipe_pingpong_rejects_bad_options(build):
    proc = run([str(build / "bench" / "pipe_pingpong"), "-n", "zero"])
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


# ---------------------------------------------------------------- placements


def rank_report(impl: mpi.MpiImpl) -> list[str]:
    """A program printing, per rank: its rank, its cpu cgroup and its CPU affinity."""
    var = impl.rank_env_names()[0]
    script = (
        f'echo "${var} $(grep -E "^[0-9]+:([a-z,]*,)?cpu(,[a-z,]*)?:" /proc/self/cgroup | cut -d: -f3)'
        ' $(taskset -pc $$ | sed "s/.*: //")"'
    )
    return ["sh", "-c", script]


def report_lines(stdout: str) -> dict[int, list[str]]:
    return {int(line.split()[0]): line.split()[1:] for line in stdout.splitlines() if line.strip()}


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_shared_core_puts_every_rank_on_cpu0(impl):
    place = placement.shared_core(4)
    ok, reason = place.available()
    if not ok:
        pytest.skip(reason)
    with place.command(impl, rank_report(impl)) as cmd:
        proc = run(cmd, impl)
    assert proc.returncode == 0, proc.stderr
    report = report_lines(proc.stdout)
    assert sorted(report) == [0, 1, 2, 3]
    assert all(fields[-1] == "0" for fields in report.values())


def cgroups_or_skip() -> None:
    ok, reason = placement.cgroup_cpu_available()
    if not ok:
        pytest.skip(f"capped_cgroups unavailable: {reason}")


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_capped_cgroups_confine_each_rank_and_clean_up(impl):
    cgroups_or_skip()
    cpus = placement.allowed_cpus()
    with placement.capped_cgroups(2).command(impl, rank_report(impl)) as cmd:
        # The wrapper gets the run's parent group as an argument.
        parent = run_parent(cmd)
        assert parent.parent == placement.CGROUP_CPU and parent.name.startswith("vhpc-")
        assert parent.is_dir()
        for rank in range(2):
            assert (parent / f"rank{rank}" / "cpu.cfs_quota_us").read_text().strip() == "50000"
            assert (parent / f"rank{rank}" / "cpu.cfs_period_us").read_text().strip() == "100000"
        proc = run(cmd, impl)
    assert proc.returncode == 0, proc.stderr
    report = report_lines(proc.stdout)
    for rank in range(2):
        group, affinity = report[rank]
        assert group == f"/{parent.name}/rank{rank}"
        assert affinity == str(cpus[rank % len(cpus)])
    assert not parent.exists()
    assert parent not in placement.leftover_groups()


@pytest.mark.parametrize("interrupt", [RuntimeError, KeyboardInterrupt])
def test_cpu_groups_kill_leftover_tasks_and_vanish(interrupt):
    cgroups_or_skip()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(interrupt):
            with placement.cpu_groups(2) as parent:
                (parent / "rank1" / "tasks").write_text(str(sleeper.pid))
                assert placement.group_tasks(parent) == {sleeper.pid}
                raise interrupt("stop")
        assert sleeper.wait(timeout=5) == -9
        assert not parent.exists()
        assert parent not in placement.leftover_groups()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unavailable_placement_says_why():
    place = placement.spread(len(placement.allowed_cpus()) + 1)
    ok, reason = place.available()
    assert not ok and "CPUs" in reason
    with pytest.raises(placement.PlacementUnavailable, match="CPUs"):
        with place.command(mpi.MPIS["mpich"], ["true"]):
            pass


# ---------------------------------------------------------------- runtime_bench bookkeeping


@pytest.mark.skipif(not mpi.MPIS["openmpi"].available(), reason="Open MPI not installed")
def test_mpi_yield_policy_reaches_the_ranks():
    impl = mpi.MPIS["openmpi"]
    env, preload = rb.Config(impl, placement.spread(2), "mpi-yield").rank_env()
    assert preload is None
    cmd = impl.launch(1, ["ompi_info", "--param", "mpi", "all", "--level", "9", "--parsable"],
                      env=env)
    proc = run(cmd, impl)
    assert proc.returncode == 0, proc.stderr
    assert "mpi_yield_when_idle:value:true" in proc.stdout
    assert "mpi_yield_when_idle:source:environment" in proc.stdout


def test_run_command_times_out_and_leaves_no_process(tmp_path):
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    out, problem = rb.run_command(
        ["sh", "-c", f"sleep 30 & echo $! > {pidfile}; wait"], dict(os.environ), timeout=0.5
    )
    assert (out, problem) == (None, "timeout")
    assert time.monotonic() - started < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_run_command_reports_a_failure():
    out, problem = rb.run_command(["sh", "-c", "echo boom >&2; exit 3"], dict(os.environ), 10)
    assert out is None and problem == "exit 3: boom"


def test_parse_csv_picks_the_row():
    text = "test,size,iters,usec,MBps\nlat,8,10,1.5,5.33\nbw,8,10,0.5,16.00\n"
    assert rb.parse_csv(text, "bw", 8) == {"iters": 10.0, "usec": 0.5, "MBps": 16.0}
    with pytest.raises(ValueError):
        rb.parse_csv(text, "bibw", 8)


def fake_row(policy: str, lat: float | None, bw: float | None, place: str = "spread-2") -> dict:
    def stat(v):
        return None if v is None else {"median": v, "min": v, "max": v, "n": 1}

    return {"mpi": "mpich", "placement_id": place, "policy": policy,
            "lat_us": stat(lat), "bw_MBps": stat(bw), "note": "",
            "lat_samples": [] if lat is None else [lat], "bw_samples": [] if bw is None else [bw]}


def test_ratio_interval_says_whether_the_noise_settles_a_target():
    ref = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99]
    close = [v * 1.005 for v in reversed(ref)]
    far = [v * 1.5 for v in ref]
    assert "within the target" in rb.interval(close, ref, 1.10, below=True)
    assert "outside the target" in rb.interval(far, ref, 1.10, below=True)
    assert "cannot resolve" in rb.interval(close, ref, 1.0, below=True)
    # bandwidth: the bound is a floor
    assert "within the target" in rb.interval(far, ref, 1.10, below=False)
    assert rb.interval(close, ref, 1.0, below=True) == rb.interval(close, ref, 1.0, below=True)
    assert rb.interval([1.0, 1.1], ref, 1.0, below=True) == ""  # too few runs to resample
    lo, hi = rb.median_ratio_interval(far, ref)
    assert lo <= 1.5 <= hi


def test_target_cells_run_more_often_spread_over_every_round():
    impl = mpi.MPIS["mpich"]
    spread, shared, capped = placement.spread(2), placement.shared_core(2), placement.capped_cgroups(2)
    configs = [rb.Config(impl, spread, "adaptive"), rb.Config(impl, spread, "spin"),
               rb.Config(impl, shared, "adaptive"), rb.Config(impl, capped, "adaptive")]
    plan_ = rb.rounds(configs, reps=2)
    assert len(plan_) == 2
    factor = rb.TARGET_REPS_FACTOR
    for jobs in plan_:
        count = {key: sum(1 for k, t in jobs if k == key and t == "lat") for key in
                 [*configs, *rb.FLOORS]}
        assert count[configs[0]] == count[configs[2]] == count[rb.YIELD] == factor
        assert count[configs[1]] == count[configs[3]] == count[rb.PIPE] == 1


def test_spread_check_allows_2_percent_and_no_more():
    within = [fake_row("default", 1.00, 1000), fake_row("adaptive", 1.019, 981)]
    assert rb.check_spread(within, "mpich")["met"] is True
    slow = [fake_row("default", 1.00, 1000), fake_row("adaptive", 1.03, 1000)]
    assert rb.check_spread(slow, "mpich")["met"] is False
    low_bw = [fake_row("default", 1.00, 1000), fake_row("adaptive", 1.00, 970)]
    assert rb.check_spread(low_bw, "mpich")["met"] is False


def test_capped_check_compares_with_the_best_other_policy():
    place = "capped_cgroups-2"
    rows_ = [fake_row("spin", 50, 2000, place), fake_row("yield", 2.0, 5000, place),
             fake_row("sleep", 30, 4000, place), fake_row("adaptive", 2.1, 4600, place)]
    verdict = rb.check_capped(rows_, "mpich")
    assert verdict["met"] is True and "yield" in verdict["detail"]
    rows_[-1] = fake_row("adaptive", 2.3, 4600, place)
    assert rb.check_capped(rows_, "mpich")["met"] is False


def test_checks_without_figures_are_not_evaluated_or_failed():
    timed_out = [fake_row("default", 1.0, 1000), fake_row("adaptive", None, None)]
    assert rb.check_spread(timed_out, "mpich")["met"] is False
    assert rb.check_spread([fake_row("adaptive", 1.0, 1000)], "mpich")["met"] is None
    flaky = {**fake_row("adaptive", 1.0, 1000), "note": "lat timed out (> 120 s); not repeated"}
    verdict = rb.check_spread([fake_row("default", 1.0, 1000), flaky], "mpich")
    assert verdict["met"] is False and "timed out" in verdict["detail"]
    skipped = {**fake_row("adaptive", None, None), "note": "skipped: lib not built"}
    verdict = rb.check_spread([fake_row("default", 1.0, 1000), skipped], "mpich")
    assert verdict["met"] is None and "not built" in verdict["detail"]


def run_parent(cmd: list[str]) -> Path:
    """The run's parent cgroup, from the confinement the wrapper gets (rank 0's group)."""
    spec = json.loads(next(a for a in cmd if a.startswith("{")))
    return Path(spec["0"]["groups"][0]).parent
