"""The results store, and resuming an interrupted experiment without loss or duplicates."""

from __future__ import annotations

import errno
import io
import json
import os
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from vhpc.lab import LabError, experiment, hop, runner, store
from vhpc.lab.runner import RunResult

EXP = """
[experiment]
name = "resume"
repetitions = 3
warmup = 1
mpis = ["mpich"]
policies = ["default", "adaptive"]
[[workload]]
name = "pp"
program = "pingpong"
[[config]]
name = "a"
kind = "native"
[[config]]
name = "b"
kind = "native_up"
"""


@pytest.fixture
def exp_file(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(EXP)
    return path


def a_cell(exp_file):
    return experiment.cells(experiment.load(exp_file), ["mpich"])[0]


def test_append_then_read_one_row_per_metric(tmp_path, exp_file):
    cell = a_cell(exp_file)
    now = datetime.now(timezone.utc)
    store.append(tmp_path / "r", experiment="resume", cell=cell, repetition=0, status="ok",
                 metrics={"lat_8_us": (0.3, "us"), "x": (2.0, "")}, message="", wall_s=0.5,
                 started_at=now)
    store.append(tmp_path / "r", experiment="resume", cell=cell, repetition=1,
                 status="timeout", metrics={}, message="timeout", wall_s=60, started_at=now)
    df = store.read(tmp_path / "r")
    assert len(df) == 3 and sorted(df.status) == ["ok", "ok", "timeout"]
    ok = df[df.metric == "lat_8_us"].iloc[0]
    assert (ok.mpi, ok.config, ok.workload, ok.policy, ok.value, ok.unit) == \
        ("mpich", "a", "pp", "default", 0.3, "us")
    assert ok.run_key == store.run_key("resume", cell, 0)
    assert json.loads(ok.cell)["workload"]["program"] == "pingpong"
    assert ok.mpi_version.startswith("MPICH") and ok.cpu_model and ok.kernel
    assert ok.git_revision and ok.git_dirty in (True, False)
    assert [p.name for p in (tmp_path / "r").iterdir() if not p.name.startswith("run-")] == []


def test_run_key_depends_on_what_was_asked(exp_file):
    cell = a_cell(exp_file)
    assert store.run_key("resume", cell, 0) == store.run_key("resume", cell, 0)
    assert store.run_key("resume", cell, 0) != store.run_key("resume", cell, 1)
    assert store.run_key("resume", cell, 0) != store.run_key("other", cell, 0)


def test_reading_nothing_gives_the_columns(tmp_path):
    assert list(store.read(tmp_path).columns) == store.SCHEMA.names


def test_interrupted_run_resumes_without_loss_or_duplicates(tmp_path, exp_file, monkeypatch):
    out, calls, interrupt = tmp_path / "r", [], [True]

    def fake_run(cell, timeout_s):
        calls.append(cell.label)
        if interrupt[0] and len(calls) == 4 + 5:  # 4 warm-ups, Ctrl-C in the 5th recorded run
            raise KeyboardInterrupt
        return RunResult("ok", {"lat_8_us": (float(len(calls)), "us")})

    monkeypatch.setattr(runner, "unavailable", lambda cell: None)
    monkeypatch.setattr(runner, "run_once", fake_run)
    with pytest.raises(LabError, match="interrupted: 4 finished runs kept") as info:
        runner.run(exp_file, out)
    assert info.value.exit_code == 130
    assert len(store.stored_keys(out)) == 4

    calls.clear()
    interrupt[0] = False
    counts = runner.run(exp_file, out)
    assert counts["skipped"] == 4 and counts["ran"] == 4 * 3 - 4
    df = store.read(out)
    # the host state beside each run (vhpc.lab.hop)
    df = df[~df.metric.isin([hop.METRIC, hop.METRIC_AFTER])]
    assert len(df) == 12 and df.run_key.is_unique
    assert sorted(df.groupby(["config", "policy"]).size()) == [3, 3, 3, 3]
    assert len(calls) == 4 + 8  # warm-ups again for the cells still running, then the rest
    assert runner.run(exp_file, out)["ran"] == 0


def test_order_is_seeded_and_shuffled_per_round(exp_file):
    cells = experiment.cells(experiment.load(exp_file), ["mpich"])
    jobs = runner.pending("resume", cells, 3, seed=1, done=set())
    assert jobs == runner.pending("resume", cells, 3, seed=1, done=set())
    assert [rep for _, rep in jobs] == [0] * 4 + [1] * 4 + [2] * 4
    rounds = [[c.label for c, rep in jobs if rep == r] for r in range(3)]
    assert all(sorted(r) == sorted(rounds[0]) for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1 or \
        jobs != runner.pending("resume", cells, 3, seed=2, done=set())


def complete(tmp_path, exp_file, monkeypatch):
    """A finished 12-run experiment (4 cells × 3 repetitions) with fake runs."""
    monkeypatch.setattr(runner, "unavailable", lambda cell: None)
    monkeypatch.setattr(runner, "run_once",
                        lambda cell, timeout_s: RunResult("ok", {"lat_8_us": (1.0, "us")}))
    out = tmp_path / "r"
    assert runner.run(exp_file, out)["ran"] == 12
    return out


def damage(out, flip_page_bit) -> dict[str, str]:
    """Five ways a run file goes bad; {file name: what check() must say}."""
    files = sorted(out.glob("run-*.parquet"))
    data = files[0].read_bytes()
    files[0].write_bytes(data[: len(data) // 2])  # truncated (a crash without the fsync)
    flip_page_bit(files[1], "value")  # one bit of the stored value: its page's checksum fails
    files[2].write_bytes(b"")
    files[3].write_bytes(files[4].read_bytes())  # another run's file under this name
    files[5].write_text("metric,value\nlat,1\n")
    return {files[0].name: "unreadable", files[1].name: "unreadable", files[2].name: "unreadable",
            files[3].name: "holds run key", files[5].name: "unreadable"}


def test_damaged_run_files_are_found_skipped_by_readers_and_rerun(tmp_path, exp_file,
                                                                   monkeypatch, flip_page_bit):
    out = complete(tmp_path, exp_file, monkeypatch)
    expected = damage(out, flip_page_bit)
    good, damaged = store.scan(out)
    assert {p.name: why.split(":")[0].split(" run key")[0] for p, why in damaged} == {
        name: why.replace("holds run key", "holds") for name, why in expected.items()}
    assert len(good) == 7

    # Readers skip them and say which; the rest is still compared and reported.
    from click.testing import CliRunner
    from vhpc import cli
    shown = CliRunner().invoke(cli.main, ["lab", "compare", str(out)])
    assert shown.exit_code == 0, shown.output
    for name in expected:
        assert f"{name} is damaged (" in shown.output
    assert "lat_8_us" in shown.output and store.read(out).run_key.nunique() == 7
    report = CliRunner().invoke(cli.main, ["report", str(out)])
    assert report.exit_code == 0, report.output
    md = (out / "report" / "report.md").read_text()
    assert md.count("- damaged file skipped: run-") == 5

    # The rerun sets them aside and does exactly those runs again.
    console = Console(file=io.StringIO(), width=300)
    counts = runner.run(exp_file, out, console=console)
    assert counts["ran"] == 5 and counts["skipped"] == 7
    said = console.file.getvalue()
    assert all(f"damaged: {name} (" in said for name in expected)
    assert sorted(p.name.rsplit(".", 1)[0] for p in (out / store.DAMAGED).iterdir()) == \
        sorted(expected)
    good, damaged = store.scan(out)
    assert len(good) == 12 and damaged == []
    df = store.read(out)
    assert df[~df.metric.isin([hop.METRIC, hop.METRIC_AFTER])].run_key.is_unique


def test_a_write_that_fails_leaves_no_file_and_says_why(tmp_path, exp_file, monkeypatch):
    cell = a_cell(exp_file)

    def full(table, where, **kw):
        where.write(b"PAR1 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.pq, "write_table", full)
    with pytest.raises(store.StoreError, match="cannot store run .* No space left on device"):
        store.append(tmp_path / "r", experiment="resume", cell=cell, repetition=0, status="ok",
                     metrics={"lat_8_us": (0.3, "us")}, message="", wall_s=0.5,
                     started_at=datetime.now(timezone.utc))
    assert list((tmp_path / "r").iterdir()) == []


def test_a_dead_writers_temporary_file_is_removed_and_the_lock_taken(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / ".run-0123456789abcdef.parquet.99999.tmp").write_bytes(b"PAR1")
    with store.Writer(out):
        assert [p.name for p in out.iterdir()] == [store.LOCK]
        assert (out / store.LOCK).read_text() == f"{os.getpid()}\n"
        with pytest.raises(LabError, match=f"another `vhpc lab run` \\(pid {os.getpid()}\\)"):
            store.Writer(out).__enter__()
    with store.Writer(out):  # released on the way out
        pass


def test_messages_are_bounded(tmp_path, exp_file):
    cell = a_cell(exp_file)
    store.append(tmp_path, experiment="resume", cell=cell, repetition=0, status="failed",
                 metrics={}, message="x" * 100_000, wall_s=0.5,
                 started_at=datetime.now(timezone.utc))
    (message,) = store.read(tmp_path).message
    assert len(message) < store.MESSAGE_LIMIT + 100 and message.endswith("98000 more characters]")
