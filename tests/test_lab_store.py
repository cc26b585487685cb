"""The results store, and resuming an interrupted experiment without loss or duplicates."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from vhpc.lab import LabError, experiment, runner, store
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
