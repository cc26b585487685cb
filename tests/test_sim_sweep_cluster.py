"""Sweeps on real Dask clusters: the same rows on one or two workers (and as
run_many gives them), a `vhpc sim sweep` killed and interrupted then resumed
without a lost or repeated point, and a running scheduler with two worker
processes, one of them killed mid-sweep. Every process started here listens on
loopback only and is killed when its test ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from vhpc import paths
from vhpc.sim import run_texts, sweep, sweep_run, sweep_store

BIN = Path(sys.executable).parent
SMOKE = paths.REPO / "scenarios" / "sweeps" / "smoke.toml"


def comparable(out: Path) -> pd.DataFrame:
    """The stored rows without what differs from run to run (where, when, how fast)."""
    return sweep_store.read(out).drop(columns=list(sweep_store.CIRCUMSTANTIAL))


def wait_for_points(out: Path, n: int, proc: subprocess.Popen, timeout: float = 90) -> set[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = {p.name for p in out.glob("point-*.parquet")}
        if len(files) >= n:
            return files
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        time.sleep(0.02)
    pytest.fail(f"fewer than {n} points stored within {timeout} s")


def vhpc_sweep(sweep_file: Path, out: Path, *args: str) -> subprocess.Popen:
    """`vhpc sim sweep` in its own session (so its local cluster can be killed with it)."""
    return subprocess.Popen([str(BIN / "vhpc"), "sim", "sweep", str(sweep_file), "--out", str(out),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_the_same_sweep_gives_the_same_rows_on_one_or_two_workers(tmp_path, smoke_sweep):
    sw = sweep.load(smoke_sweep(30_000))
    one = sweep_run.run(sw, tmp_path / "one", workers=1)
    two = sweep_run.run(sw, tmp_path / "two", workers=2)
    assert (one.ran, one.workers, two.ran, two.workers) == (32, 1, 32, 2)
    a, b = comparable(tmp_path / "one"), comparable(tmp_path / "two")
    assert len(a) == 32 and a.point.is_unique
    pd.testing.assert_frame_equal(a, b)
    # ... and each point's metrics are those of the same scenario through run_many.
    points = sw.points()
    reports = run_texts([(p.scenario, p.origin, None) for p in points])
    expected = {p.id: sweep_store.metrics(r) for p, r in zip(points, reports)}
    for row in a.to_dict("records"):
        want = expected[row["point"]]
        assert (row["useful_ns"], row["poll_ns"], row["events"], row["end_ns"]) == (
            want["useful_ns"], want["poll_ns"], want["events"], want["end_ns"])


def test_a_killed_then_interrupted_sweep_resumes_without_losing_or_repeating_a_point(
        tmp_path, smoke_sweep):
    sweep_file, out = smoke_sweep(150_000), tmp_path / "out"
    proc = vhpc_sweep(sweep_file, out, "--workers", "2")
    try:
        before = wait_for_points(out, 4, proc)
        proc.send_signal(signal.SIGKILL)  # the client only; its orphaned workers go below
        proc.wait(timeout=30)
    finally:
        kill_group(proc)
    kept = {name: (out / name).read_bytes() for name in before}

    proc = vhpc_sweep(sweep_file, out, "--workers", "2")
    try:
        wait_for_points(out, len(before) + 3, proc)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: stops, keeps what finished
        _, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    assert proc.returncode == 130, err
    assert "interrupted (SIGINT): the sweep stopped" in err
    interrupted = len(list(out.glob("point-*.parquet")))
    assert len(before) < interrupted < 32

    done = subprocess.run([str(BIN / "vhpc"), "sim", "sweep", str(sweep_file), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"32 points: {interrupted} already stored, {32 - interrupted} run" in done.stderr
    df = sweep_store.read(out)
    assert len(df) == 32 and df.point.is_unique
    assert sorted(df.point) == sorted(p.id for p in sweep.load(sweep_file).points())
    assert {f"point-{p}.parquet" for p in df.point} == {p.name for p in out.glob("point-*.parquet")}
    assert not list(out.glob(".*.tmp"))
    for name, data in kept.items():  # stored before the kill: skipped, not redone
        assert (out / name).read_bytes() == data


@pytest.fixture
def dask_cluster(tmp_path):
    """A `dask scheduler` and two `dask worker` processes (one thread, no nanny: a
    killed worker stays dead) on 127.0.0.1; yields (address, [worker processes])."""
    info = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(info)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            assert time.monotonic() < deadline, "the scheduler did not start within 60 s"
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        workers = [subprocess.Popen([str(BIN / "dask"), "worker", address, "--nthreads", "1",
                                     "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(2)]
        procs += workers
        from distributed import Client

        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


def test_a_sweep_on_a_running_scheduler_survives_a_killed_worker(tmp_path, dask_cluster):
    address, workers = dask_cluster
    out = tmp_path / "out"
    proc = vhpc_sweep(SMOKE, out, "--scheduler", address)
    try:
        wait_for_points(out, 4, proc)
        victim = workers[0]
        victim.kill()  # SIGKILL mid-sweep: its running task is lost with it
        victim.wait(timeout=30)
        killed_at = pd.Timestamp.now(tz="UTC")
        _, err = proc.communicate(timeout=120)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, err
    assert "32 points: 0 already stored, 32 run on 2 workers" in err
    df = sweep_store.read(out)
    assert len(df) == 32 and df.point.is_unique
    assert sorted(df.point) == sorted(p.id for p in sweep.load(SMOKE).points())
    pids = df.worker.str.rsplit(":", n=1).str[1].astype(int)
    after = df[df.written_at > killed_at + pd.Timedelta(seconds=1)]
    assert len(after) > 0 and set(pids[after.index]) == {workers[1].pid}
    assert workers[1].poll() is None
