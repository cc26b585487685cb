"""Fully overlapped co-running jobs (process.run_commands with refill_cwds, the
lab's `jobs = N`): a job whose measured first run ends while another's goes on is
rerun, unmeasured, in its own directory, until every first run has ended; only
first runs are measured; the reruns are killed at the end, at the deadline and on
Ctrl-C, leaving no process and no group behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from vhpc import mpi
from vhpc.host import placement, process
from vhpc.lab import experiment, runner
from vhpc.lab.experiment import Config, Workload

needs_mpich = pytest.mark.skipif(not mpi.MPIS["mpich"].available(), reason="MPICH not installed")
MARK = "vhpc-overlap-test"


@pytest.fixture(autouse=True)
def tracked_or_skip():
    ok, reason = placement.freezer_available()
    if not ok:
        pytest.skip(f"no writable cgroup v1 freezer to track the runs: {reason}")


def ours() -> list[Path]:
    return [g for g in placement.leftover_groups() if g.name.startswith(f"vhpc-{os.getpid()}-")]


def stray() -> str:
    return subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout


def counted(seconds: float) -> list[str]:
    """Counts its runs in ./count, sleeps, prints which run it was."""
    return ["sh", "-c", f'n=$(cat count 2>/dev/null || echo 0); echo $((n + 1)) > count; '
                        f'sleep {seconds}; echo "run $n"; : {MARK}']


def dirs(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).mkdir()
    return [tmp_path / name for name in names]


def test_the_short_job_is_rerun_until_the_long_one_has_run(tmp_path):
    cwds = dirs(tmp_path, "a", "b")
    refills = dirs(tmp_path, "a-refill", "b-refill")
    t0 = time.monotonic()
    short, long = process.run_commands([counted(0.2), counted(1.5)], dict(os.environ), 30,
                                       cwds, refills)
    took = time.monotonic() - t0
    assert (short.returncode, long.returncode) == (0, 0)
    # measured: the first runs only, each in its own directory
    assert (short.stdout.text(), long.stdout.text()) == ("run 0\n", "run 0\n")
    assert (cwds[0] / "count").read_text() == "1\n" and (cwds[1] / "count").read_text() == "1\n"
    # the short job ran again and again in its refill directory while the long one ran
    assert 3 <= short.fillers <= 8, short.fillers
    # every rerun started counts itself, unless the end kills the last one first
    assert int((refills[0] / "count").read_text()) in (short.fillers, short.fillers - 1)
    assert long.fillers == 0 and not (refills[1] / "count").exists()
    assert took < 1.5 + 1.0  # the last rerun is killed, not waited for
    assert ours() == [] and stray() == ""


def test_reruns_are_killed_without_a_tracking_group_too(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "tracking_available", lambda: False)
    short, long = process.run_commands([counted(0.1), counted(0.8)], dict(os.environ), 30,
                                       dirs(tmp_path, "a", "b"), dirs(tmp_path, "ar", "br"))
    assert (short.returncode, long.returncode) == (0, 0) and short.fillers >= 3
    assert ours() == [] and stray() == ""


def test_without_refills_nothing_is_rerun(tmp_path):
    short, long = process.run_commands([counted(0.1), counted(0.5)], dict(os.environ), 30,
                                       dirs(tmp_path, "a", "b"))
    assert (short.fillers, long.fillers) == (0, 0)
    assert not any(tmp_path.glob("*-refill"))


def test_the_deadline_holds_for_the_whole_and_kills_the_reruns(tmp_path):
    t0 = time.monotonic()
    short, long = process.run_commands([counted(0.1), counted(30)], dict(os.environ), 1.0,
                                       dirs(tmp_path, "a", "b"), dirs(tmp_path, "ar", "br"))
    assert time.monotonic() - t0 < 5
    assert short.returncode == 0 and short.fillers >= 3 and long.timed_out
    assert ours() == [] and stray() == ""


def test_a_failing_rerun_stops_the_reruns_and_is_named(tmp_path):
    # the second run of the short job (its first rerun) fails: no third
    fails_again = ["sh", "-c", f"test -e ../ran && exit 3; touch ../ran; sleep 0.1; : {MARK}"]
    cwds, refills = dirs(tmp_path, "a", "b"), dirs(tmp_path, "ar", "br")
    short, long = process.run_commands([fails_again, counted(1.0)], dict(os.environ), 30,
                                       cwds, refills)
    assert short.returncode == 0 and short.fillers == 1
    assert short.filler_problem == "refill 1: exit 3: no message"
    assert long.returncode == 0 and long.filler_problem == ""
    assert ours() == [] and stray() == ""


def test_ctrl_c_during_the_reruns_kills_everything(tmp_path):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.6)
    try:
        with pytest.raises(KeyboardInterrupt):
            process.run_commands([counted(0.1), counted(30)], dict(os.environ), 30,
                                 dirs(tmp_path, "a", "b"), dirs(tmp_path, "ar", "br"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert ours() == [] and stray() == ""


# A kernel-like command whose run time depends on its job: job 1 (directory `job1`)
# runs 1.2 s, job 0 0.2 s; rank 0 prints how long it ran and which run it was.
JOBS = ('case "$PWD" in */job1) s=1.2;; *) s=0.2;; esac; sleep $s; '
        'if [ "$PMI_RANK" = 0 ]; then printf "metric,value,unit\\ntime,%s,s\\n'
        'verified,1,1\\n" $s; fi; : ' + MARK)


@needs_mpich
def test_co_running_jobs_overlap_and_only_first_runs_are_measured():
    config = Config(name="two", kind="domains", mode="timesliced", slicing="vcpu", jobs=2,
                    domain=[{"name": "a", "cpus": [0, 1]},
                            {"name": "b", "cpus": [0, 1], "job": 1}])
    workload = Workload(name="sleepy", command=["sh", "-c", JOBS], parser="kernel")
    result = runner.run_once(experiment.Cell("mpich", config, workload, "default"), 60)
    assert result.status == "ok", result.message
    m = {k: v for k, (v, _) in result.metrics.items()}
    assert (m["time.job0"], m["time.job1"], m["time"]) == (0.2, 1.2, 0.7)
    assert m["fillers.job0"] >= 1 and m["fillers.job1"] == 0  # MPI start-up: few on a busy host
    assert result.metrics["fillers.job0"][1] == "count"
    assert ours() == [] and stray() == ""


@needs_mpich
def test_a_timeout_with_reruns_leaves_nothing():
    config = Config(name="two", kind="domains", jobs=2,
                    domain=[{"name": "a", "cpus": [0, 1]},
                            {"name": "b", "cpus": [0, 1], "job": 1}])
    workload = Workload(name="sleepy", command=["sh", "-c", JOBS.replace("s=1.2", "s=30")],
                        parser="kernel")
    t0 = time.monotonic()
    result = runner.run_once(experiment.Cell("mpich", config, workload, "default"), 2.0)
    assert time.monotonic() - t0 < 10
    assert result.status == "timeout" and "job 1: timeout" in result.message
    assert result.metrics["fillers.job0"][0] >= 1 and "time.job0" in result.metrics
    assert ours() == [] and stray() == ""
