"""Hybrid MPI + OpenMP: bench/hybrid, the OpenMP waiting `vhpc run` chooses
(runtime/openmp.py) and how the hybrid benchmark runs each setting."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vhpc import mpi, paths, runtime
from vhpc.runtime import hybrid, launch, openmp
from vhpc.runtime.bench import build_bench


@pytest.fixture(scope="module")
def mpich() -> mpi.MpiImpl:
    try:
        return mpi.find("mpich")
    except mpi.MpiNotFound as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def built(mpich) -> Path:
    build_bench()
    runtime.build(["mpich"])
    return paths.build_dir() / "bench" / "mpich"


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_the_hybrid_kernel_reports_its_ranks_threads_and_time(mpich, built):
    proc = run(mpich.launch(2, [str(built / "hybrid"), "-n", "40"]), OMP_NUM_THREADS="2")
    assert proc.returncode == 0, proc.stderr
    header, line = proc.stdout.strip().splitlines()
    assert header == "test,ranks,threads,iters,work,usec"
    test, ranks, threads, iters, work, usec = line.split(",")
    assert (test, ranks, threads, iters, work) == ("hybrid", "2", "2", "40", "20000")
    assert float(usec) > 0


def test_the_hybrid_kernel_refuses_bad_options(mpich, built):
    assert run(mpich.launch(1, [str(built / "hybrid"), "-n", "0"])).returncode == 2
    proc = run(mpich.launch(1, [str(built / "hybrid"), "-h"]))
    assert proc.returncode == 0 and "usage" in proc.stdout


def decide(exe, nranks, cpus=2, quota=None, steal=0.0, **environ):
    return openmp.decide(str(exe), nranks, environ, cpus, quota=quota, steal=steal)


def test_more_threads_than_cpus_make_openmp_wait_passively(built):
    d = decide(built / "hybrid", 2, OMP_NUM_THREADS="2")
    assert d.env == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
    assert "GNU libgomp, 2 ranks × 2 threads on 2 CPUs" in d.line
    # the OpenMP default is a thread per CPU: two ranks over-commit already
    assert decide(built / "hybrid", 2).env["OMP_WAIT_POLICY"] == "PASSIVE"


def test_a_job_that_fits_keeps_openmps_own_waiting(built):
    d = decide(built / "hybrid", 1, OMP_NUM_THREADS="2")
    assert d.env == {} and "its own waiting kept" in d.line


def test_a_quota_or_steal_time_makes_a_job_that_fits_wait_passively(built):
    assert "quota of 1.5 CPUs" in decide(built / "hybrid", 1, quota=1.5, OMP_NUM_THREADS="1").line
    d = decide(built / "hybrid", 1, steal=0.2, OMP_NUM_THREADS="2")
    assert d.env["GOMP_SPINCOUNT"] == "0" and "20 % steal time" in d.line
    # a quota below the threads counts as fewer CPUs
    assert "on 1 CPUs" in decide(built / "hybrid", 1, quota=0.5, OMP_NUM_THREADS="2").line


def test_the_users_own_settings_are_kept(built):
    d = decide(built / "hybrid", 2, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="ACTIVE")
    assert d.env == {"GOMP_SPINCOUNT": "0"} and "(kept OMP_WAIT_POLICY=ACTIVE)" in d.line


def test_a_program_without_openmp_is_left_alone(built):
    assert decide(built / "pingpong", 4) == openmp.Decision()
    assert decide(built / "missing", 4) == openmp.Decision()


def test_threads_per_rank_reads_the_outer_level():
    assert openmp.threads_per_rank({"OMP_NUM_THREADS": "3,2"}, 8) == 3
    assert openmp.threads_per_rank({"OMP_NUM_THREADS": "junk"}, 8) == 8
    assert openmp.threads_per_rank({}, 4) == 4
    assert 0.0 <= openmp.steal_share() < 1.0


def test_vhpc_run_forwards_the_openmp_waiting_to_every_rank(mpich, built):
    environ = {**os.environ, "OMP_NUM_THREADS": "2"}
    environ.pop("OMP_WAIT_POLICY", None)
    plan = launch.plan([mpich.mpiexec, "-n", "2", str(built / "hybrid")], environ=environ, cpus=2)
    assert plan.rank_env["OMP_WAIT_POLICY"] == "PASSIVE"
    i = plan.argv.index("OMP_WAIT_POLICY")
    assert plan.argv[i - 1:i + 2] == ["-genv", "OMP_WAIT_POLICY", "PASSIVE"]
    assert "GNU libgomp, 2 ranks × 2 threads on 2 CPUs: OMP_WAIT_POLICY=PASSIVE" in plan.line


def test_each_hybrid_setting_runs_what_it_says(mpich, built):
    argv = {s: hybrid.command(hybrid.Cell(mpich, "1 CPU", s)) for s in hybrid.SETTINGS}
    for cmd, env in argv.values():
        assert cmd[:3] == ["taskset", "-c", "0"] and env["OMP_NUM_THREADS"] == "2"
    assert argv["OpenMP passive"][1]["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in argv["default"][1]
    assert not any("LD_PRELOAD" in a for a in argv["default"][0] + argv["OpenMP passive"][0])
    assert "LD_PRELOAD" in argv["libvhpc_wait"][0] and "OMP_WAIT_POLICY" not in argv["libvhpc_wait"][0]
    assert "LD_PRELOAD" in argv["vhpc run"][0] and "OMP_WAIT_POLICY" in argv["vhpc run"][0]


def test_a_hybrid_cell_measures_a_time(mpich, built, monkeypatch):
    monkeypatch.setattr(hybrid, "ITERATIONS", 30)
    value, problem = hybrid.measure(hybrid.Cell(mpich, "2 CPUs", "vhpc run"))
    assert problem == "" and value > 0
