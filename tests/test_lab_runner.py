"""Availability checks before a run, and one real end-to-end run through the CLI."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from vhpc import cli, mpi
from vhpc.host import placement
from vhpc.runtime import bench as runtime_bench
from vhpc.lab import experiment, hop, runner, store
from vhpc.lab.experiment import Config, Workload

needs_mpich = pytest.mark.skipif(not mpi.MPIS["mpich"].available(), reason="MPICH not installed")


def cell(policy="default", config=None, mpi_name="mpich", workload=None):
    return experiment.Cell(mpi_name, config or Config(name="n", kind="native"),
                           workload or Workload(name="p", program="pingpong", ranks=1), policy)


@needs_mpich
def test_mpi_yield_is_open_mpi_only():
    assert "Open MPI parameter" in runner.unavailable(cell("mpi-yield"))


def test_pinning_to_a_cpu_that_is_not_there():
    bad = max(placement.allowed_cpus()) + 1
    reason = runner.unavailable(cell(config=Config(name="pin", kind="pinned", cpus=[0, bad])))
    assert reason is not None and reason.startswith(f"config pin (pinned): CPUs [{bad}]")


@needs_mpich
def test_missing_pieces_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_BUILD_DIR", str(tmp_path))
    assert "libvhpc_wait for mpich not built" in runner.unavailable(cell("adaptive"))
    assert "bench/mpich/pingpong not built" in runner.unavailable(cell())


@needs_mpich
def test_unavailable_cells_stop_the_run_unless_skipped(tmp_path, monkeypatch, tiny_experiment):
    monkeypatch.setenv("VHPC_BUILD_DIR", str(tmp_path))  # nothing built here
    path = tmp_path / "e.toml"
    path.write_text(tiny_experiment)
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"{path}: 1 cells cannot run here" in result.output
    assert "mpich · native · pp8 · default: " in result.output and "not built" in result.output
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--skip-unavailable",
                                           "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "no cell can run here" in result.output
    assert not (tmp_path / "r").exists()


@needs_mpich
def test_tiny_experiment_end_to_end(tmp_path, tiny_experiment):
    runtime_bench.build_bench()
    path = tmp_path / "tiny.toml"
    path.write_text(tiny_experiment)
    out = tmp_path / "results"
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    df = store.read(out)
    # each run beside its host state, probed just before and just after it (vhpc.lab.hop)
    hops = df[df.metric.isin([hop.METRIC, hop.METRIC_AFTER])]
    assert len(hops) == (4 if hop.cpus() else 0) and (hops.value > 0).all()
    df = df[~df.metric.isin([hop.METRIC, hop.METRIC_AFTER])].reset_index(drop=True)
    assert list(df.metric) == ["lat_8_us", "lat_8_us"] and set(df.status) == {"ok"}
    assert sorted(df.repetition) == [0, 1] and (df.value > 0).all() and (df.unit == "us").all()
    assert json.loads(df.cell[0])["config"] == {"name": "native", "kind": "native", "cpus": None}
    assert df.mpi_version[0].startswith("MPICH")

    again = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(out), "--reps", "3"])
    assert again.exit_code == 0 and "2 runs already stored" in again.output
    assert len(set(store.read(out).run_key)) == 3

    md = tmp_path / "c.md"
    shown = CliRunner().invoke(cli.main, ["lab", "compare", str(out), "--markdown", str(md)])
    assert shown.exit_code == 0, shown.output
    assert "lat_8_us" in shown.output
    assert "| mpich | pp8 | lat_8_us | native | default | 3 |" in md.read_text()


@needs_mpich
def test_a_run_past_its_timeout_is_killed_and_stored_as_timeout(tmp_path, tiny_experiment):
    path = tmp_path / "slow.toml"
    path.write_text(tiny_experiment.replace("timeout_s = 60", "timeout_s = 1").replace(
        'program = "pingpong"\nargs = ["-s", "8", "-T", "lat", "-t", "0.05"]',
        'command = ["sleep", "30"]\nparser = "kernel"\nranks = 1').replace(
        "repetitions = 2", "repetitions = 1"))
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    df = store.read(tmp_path / "r")
    assert list(df.status) == ["timeout"] and df.wall_s[0] < 10
    assert df.metric[0] == "" and df.message[0] == "timeout"


HPCC = """
[experiment]
name = "hpcc-tiny"
repetitions = 1
warmup = 0
timeout_s = 120
mpis = ["openmpi"]
policies = ["default"]
[[workload]]
name = "hpcc"
command = ["hpcc"]
parser = "hpcc"
[[config]]
name = "native"
kind = "native"
"""


@pytest.mark.skipif(shutil.which("hpcc") is None, reason="hpcc not installed (apt-get install hpcc)")
@pytest.mark.skipif(not mpi.MPIS["openmpi"].available(), reason="Open MPI not installed")
def test_real_hpcc_through_its_adapter(tmp_path):
    # Debian's HPC Challenge (linked with Open MPI), run through the lab: its
    # summary must parse into figures of every part of the suite.
    path = tmp_path / "hpcc.toml"
    path.write_text(HPCC)
    out = tmp_path / "results"
    result = CliRunner().invoke(cli.main, ["lab", "run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    df = store.read(out)
    assert set(df.status) == {"ok"}
    figures = dict(zip(df.metric, df.value))
    for key in ("HPL_Tflops", "StarSTREAM_Triad", "MPIRandomAccess_GUPs", "AvgPingPongLatency_usec"):
        assert figures[key] > 0, key
    assert figures["HPL_N"] == 1000 and figures["CommWorldProcs"] == 2
