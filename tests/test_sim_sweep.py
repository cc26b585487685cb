"""Sweep files (vhpc.sim.sweep): validation naming file and field, point expansion,
stable point ids, the replicate generator, and the point files of sweep_store.

No Dask here: tests/test_sim_sweep_cluster.py runs sweeps on clusters."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from vhpc import paths
from vhpc.sim import SimError, sweep, sweep_report, sweep_run, sweep_store

SWEEPS = paths.REPO / "scenarios" / "sweeps"
BASE = paths.REPO / "scenarios" / "overcommit-vms.toml"


def write(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'[sweep]\nbase = "{BASE}"\n' + body)
    return path


AXIS = '[axes.cores]\npath = "host.cores"\nvalues = [2, 4]\n'


@pytest.mark.parametrize("body, message", [
    ('mode = "diagonal"\n' + AXIS, "sweep.mode: Input should be 'cartesian' or 'zip'"),
    ("seeds = 0\n" + AXIS, "sweep.seeds: Input should be greater than or equal to 1"),
    ('[axes.cores]\npath = "host.cores"\n', "axes.cores: give exactly one of `values` and `range`"),
    ('[axes.cores]\npath = "host.cores"\nvalues = []\n', "axes.cores: `values` is empty"),
    ('[axes.cores]\npath = "host.cores"\nrange = { from = 8, to = 2 }\n',
     "axes.cores.range: `to` (2) is below `from` (8)"),
    ('[axes.cores]\npath = "host.cores"\nrange = { from = 2, to = 8, step = 0 }\n',
     "axes.cores.range.step: Input should be greater than 0"),
    ('[axes.cores]\npath = "host.cores"\nvalues = [2]\ncolour = 1\n',
     "axes.cores.colour: unknown field"),
    ('[axes.cores]\npath = "host..cores"\nvalues = [2]\n', "axes.cores.path: `` is not a field name"),
    ('[axes.cores]\npath = "seed"\nvalues = [2]\n', "axes.cores.path: seeds are swept with `seeds`"),
    ('[axes.x]\npath = "mpi.poll_ns"\nvalues = [1, 2.5]\n', "axes.x.values: mixes float and int"),
    ('[axes.x]\npath = "mpi.poll_ns"\nvalues = [1, 1]\n', "axes.x.values: a value is repeated"),
    ('[axes.Point]\npath = "host.cores"\nvalues = [2]\n', "axes.Point: an axis name must be"),
    ('[axes.seed]\npath = "host.cores"\nvalues = [2]\n', "axes.seed: an axis name must be"),
    ('mode = "zip"\n' + AXIS + '[axes.s]\npath = "hypervisor.scheduler"\nvalues = ["credit"]\n',
     "axes.s: has 1 values, axes.cores 2: zipped axes need as many values each"),
    ("[axes]\n", "axes: a sweep needs at least one axis"),
    (AXIS + '[report]\nx = "vms"\n', "report.x: `vms` is not an axis"),
    (AXIS + '[generate]\nkind = "replicate"\ndomain = "vm"\n',
     "generate: give exactly one of `count` and `per_core`"),
    ('[axes.cores]\npath = "host.cores"\nrange = { from = 1, to = 2000000 }\n'
     '[axes.s]\npath = "seed_"\nvalues = [1, 2]\n', "axes: 4,000,000 points, more than 1,000,000"),
])
def test_an_invalid_sweep_file_names_the_file_and_the_field(tmp_path, body, message):
    path = write(tmp_path, body)
    with pytest.raises(sweep.SweepError) as err:
        sweep.load(path)
    assert err.value.message.startswith(f"{path}: ")
    assert message in err.value.message
    assert err.value.exit_code == 2


def test_an_axis_named_like_a_result_column_is_refused_before_anything_runs(tmp_path):
    sw = sweep.load(write(tmp_path, '[axes.events]\npath = "host.cores"\nvalues = [2]\n'))
    with pytest.raises(sweep.SweepError, match=r"s\.toml: axes\.events: `events` is a column of the results"):
        sweep_store.Store(sw, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_unreachable_scheduler_is_named(monkeypatch):
    monkeypatch.setattr(sweep_run, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(SimError, match=r"--scheduler tcp://127\.0\.0\.1:9: cannot connect"):
        with sweep_run.client("tcp://127.0.0.1:9", None):
            pass


def test_a_missing_base_or_bad_toml_is_named(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nbase = "nowhere.toml"\n' + AXIS)
    with pytest.raises(sweep.SweepError, match=r"s\.toml: sweep\.base: no scenario file .*nowhere"):
        sweep.load(path)
    path.write_text("[sweep\n")
    with pytest.raises(sweep.SweepError, match=r"s\.toml: not valid TOML"):
        sweep.load(path)


@pytest.mark.parametrize("path, message", [
    ("jobs[name=nope].wait_policy", "axes.p.path: `jobs[name=nope]` picks no table"),
    ("jobs[7].wait_policy", "axes.p.path: `jobs[7]` picks no table of the base scenario's 1 jobs"),
    ("host[0].cores", "axes.p.path: `host` is not a list"),
    ("jobs[*]", "axes.p.path: a path must end with a field"),
    ("generate.domain", "axes.p.path: `generate.count` and `generate.per_core` are the generator"),
])
def test_a_path_that_does_not_fit_the_base_is_named(tmp_path, path, message):
    sw = sweep.load(write(tmp_path, f'[axes.p]\npath = "{path}"\nvalues = ["x"]\n'))
    with pytest.raises(sweep.SweepError, match=re.escape(message)):
        sw.points()


def test_every_points_scenario_is_checked_by_the_engine_before_any_runs(tmp_path):
    sw = sweep.load(write(tmp_path, '[axes.cores]\npath = "host.cores"\nvalues = [2, 0]\n'))
    points = sw.points()
    with pytest.raises(SimError) as err:  # SimError, from the native core
        sw.validate(points)
    bad = next(p for p in points if p.params["cores"] == 0)
    assert f"point {bad.id}: cores=0" in err.value.message
    assert "host.cores" in err.value.message


def test_cartesian_crosses_axes_in_file_order_with_seeds_innermost(tmp_path):
    sw = sweep.load(write(tmp_path, "seeds = 2\n" + AXIS
                          + '[axes.s]\npath = "hypervisor.scheduler"\nvalues = ["credit", "sedf"]\n'))
    assert sw.axes == ["cores", "s", "seed"]
    assert [tuple(p.params.values()) for p in sw.points()] == [
        (c, s, seed) for c in (2, 4) for s in ("credit", "sedf") for seed in (1, 2)]


def test_zip_pairs_axes_and_seeds_still_repeat_every_point(tmp_path):
    sw = sweep.load(write(tmp_path, 'mode = "zip"\nseeds = [7, 9]\n'
                          '[axes.cores]\npath = "host.cores"\nrange = { from = 2, to = 6, step = 2 }\n'
                          '[axes.s]\npath = "hypervisor.scheduler"\nvalues = ["credit", "sedf", "linux"]\n'))
    got = [(p.params["cores"], p.params["s"], p.params["seed"]) for p in sw.points()]
    assert got == [(2, "credit", 7), (2, "credit", 9), (4, "sedf", 7), (4, "sedf", 9),
                   (6, "linux", 7), (6, "linux", 9)]
    doc = tomllib.loads(sw.points()[-1].scenario)
    assert (doc["host"]["cores"], doc["hypervisor"]["scheduler"], doc["seed"]) == (6, "linux", 9)


def test_paths_reach_list_elements_and_create_missing_tables(tmp_path):
    sw = sweep.load(write(tmp_path, '[set]\n"mpi.poll_ns" = 250\n'
                          '[axes.w]\npath = "jobs[*].wait_policy"\nvalues = ["adaptive"]\n'
                          '[axes.c]\npath = "jobs[name=job].params.compute_us"\nvalues = [500]\n'
                          '[axes.v]\npath = "domains[1].vcpus"\nvalues = [4]\n'))
    doc = tomllib.loads(sw.points()[0].scenario)
    assert doc["mpi"]["poll_ns"] == 250
    assert doc["jobs"][0]["wait_policy"] == "adaptive"
    assert doc["jobs"][0]["params"] == {"bytes": 64, "compute_us": 500, "jitter_ppm": 300000}
    assert doc["domains"][1]["vcpus"] == 4


def test_an_axis_can_set_several_fields_and_each_bad_one_is_named(tmp_path):
    sw = sweep.load(write(tmp_path, '[axes.cores]\npath = ["host.cores", "domains[name=dom0].vcpus"]\n'
                          'values = [4, 8]\n'))
    for p in sw.points():
        doc = tomllib.loads(p.scenario)
        assert doc["host"]["cores"] == doc["domains"][0]["vcpus"] == p.params["cores"]
    bad = sweep.load(write(tmp_path, '[axes.cores]\npath = ["host.cores", "domains[name=nope].vcpus"]\n'
                           'values = [4]\n', name="bad.toml"))
    with pytest.raises(sweep.SweepError, match=re.escape("bad.toml: axes.cores.path[1]: `domains[name=nope]`")):
        bad.points()
    with pytest.raises(sweep.SweepError, match=re.escape("axes.cores.path[0]: `` is not a field name")):
        sweep.load(write(tmp_path, '[axes.cores]\npath = ["host..cores"]\nvalues = [4]\n', name="b2.toml"))


def test_replicate_makes_vms_per_core_times_cores_domains_each_with_its_job(tmp_path):
    sw = sweep.load(write(tmp_path, '[generate]\nkind = "replicate"\ndomain = "vm"\nper_core = 1.0\n'
                          + AXIS + '[axes.vpc]\npath = "generate.per_core"\nvalues = [0.5, 3.0]\n'))
    by = {(p.params["cores"], p.params["vpc"]): tomllib.loads(p.scenario) for p in sw.points()}
    vms = {k: [d for d in doc["domains"] if not d.get("dom0")] for k, doc in by.items()}
    assert {k: len(v) for k, v in vms.items()} == {(2, 0.5): 1, (2, 3.0): 6, (4, 0.5): 2, (4, 3.0): 12}
    doc = by[(4, 0.5)]
    assert [d["name"] for d in doc["domains"]] == ["dom0", "vm0", "vm1"], "dom0 stays first"
    assert [(j["name"], j["ranks"]) for j in doc["jobs"]] == [
        ("job0", ["vm0", "vm0"]), ("job1", ["vm1", "vm1"])]
    sw.validate(sw.points())  # the engine accepts every generated scenario


def test_replicate_refuses_a_fraction_of_a_domain(tmp_path):
    sw = sweep.load(write(tmp_path, '[generate]\nkind = "replicate"\ndomain = "vm"\nper_core = 0.5\n'
                          '[axes.cores]\npath = "host.cores"\nvalues = [3]\n'))
    with pytest.raises(sweep.SweepError, match=r"generate\.per_core: 0\.5 per core × 3 cores is not "
                                                r"a whole number of domains \(point [0-9a-f]{16}: cores=3\)"):
        sw.points()


def test_point_ids_are_stable_hashes_of_the_parameters_alone(tmp_path):
    params = {"cores": 2, "vms_per_core": 1.0, "scheduler": "credit", "wait": "busy_poll", "seed": 1}
    # Pinned: SHA-256 of the canonical JSON, the same on every machine.
    canonical = b'{"cores":2,"scheduler":"credit","seed":1,"vms_per_core":1.0,"wait":"busy_poll"}'
    assert sweep.point_id(params) == hashlib.sha256(canonical).hexdigest()[:16] == "c2c3b5d113f4d5c6"
    assert sweep.point_id(dict(reversed(params.items()))) == sweep.point_id(params)
    assert sweep.point_id({**params, "seed": 2}) != sweep.point_id(params)
    smoke = sweep.load(SWEEPS / "smoke.toml").points()
    moved = tmp_path / "elsewhere" / "smoke.toml"  # ids do not depend on where the file is
    moved.parent.mkdir()
    moved.write_text((SWEEPS / "smoke.toml").read_text().replace("../overcommit-vms.toml", str(BASE)))
    assert [p.id for p in sweep.load(moved).points()] == [p.id for p in smoke]
    assert len({p.id for p in smoke}) == len(smoke)


def test_the_shipped_sweeps_are_valid_and_smoke_is_small():
    smoke = sweep.load(SWEEPS / "smoke.toml")
    points = smoke.points()
    assert 20 <= len(points) <= 50
    smoke.validate(points)
    over = sweep.load(SWEEPS / "overcommit.toml")
    assert set(over.axes) >= {"cores", "vms_per_core", "scheduler", "wait", "seed"}
    assert {p.params["scheduler"] for p in over.points()} >= {"credit", "credit2", "gang"}, \
        "the schedulers the over-commitment question names"


def test_a_point_file_is_trusted_only_when_whole_and_of_the_same_scenario(tmp_path, smoke_sweep,
                                                                         flip_page_bit):
    sw = sweep.load(smoke_sweep(20_000))
    points = sw.points()[:2]
    store = sweep_store.Store(sw, tmp_path)
    with store.locked():
        store.write_manifest(len(points))
        result = sweep_run.simulate(points[0].scenario, points[0].origin)
        path = store.write(points[0], result)
        assert store.done(points) == {points[0].id}
        row = pq.read_table(path).to_pylist()[0]
        assert (row["point"], row["cores"], row["wait"], row["seed"]) == (
            points[0].id, 2, "busy_poll", 1)
        assert row["useful_ns"] == sum(j["useful_ns"] for j in row["jobs"]) > 0
        assert 0 < row["useful_share"] <= 1 and row["sweep_sha"] == sw.sha
        # A damaged file, or one simulated from another scenario, is redone.
        flip_page_bit(path, "useful_ns")
        assert store.done(points) == set()
        store.write(points[0], result)
        changed = sweep.Point(points[0].params, points[0].id, points[0].scenario + "\n", "x")
        assert store.done([changed]) == set()
        with pytest.raises(SimError, match="another `vhpc sim sweep`"):
            with sweep_store.Store(sw, tmp_path).locked():
                pass


def test_the_report_draws_a_metric_against_axes_and_refuses_unknown_ones(tmp_path, smoke_sweep):
    sw = sweep.load(smoke_sweep(20_000))
    points = [p for p in sw.points() if p.params["cores"] == 2 and p.params["scheduler"] == "linux"]
    store = sweep_store.Store(sw, tmp_path)
    with store.locked():
        store.write_manifest(len(points))
        for p in points:
            store.write(p, sweep_run.simulate(p.scenario, p.origin))
    md = sweep_report.write(tmp_path, tmp_path / "r", metric="poll_share", x="vms_per_core", hue="wait")
    text = md.read_text()
    assert (tmp_path / "r" / "poll_share-by-vms_per_core-wait.png").stat().st_size > 10_000
    assert (tmp_path / "r" / "poll_share-by-vms_per_core-wait.svg").is_file()
    assert "| vms_per_core \\ wait | adaptive | busy_poll |" in text
    assert f"points: {len(points)} stored of {len(points)}" in text
    df = sweep_store.read(tmp_path)
    assert len(df) == len(points) == df.point.nunique()
    busy = df[df.wait == "busy_poll"].poll_share.mean()
    assert busy > df[df.wait == "adaptive"].poll_share.mean()  # what the smoke sweep shows
    with pytest.raises(SimError, match="--x colour: not an axis"):
        sweep_report.write(tmp_path, tmp_path / "r", x="colour")
    with pytest.raises(SimError, match="--metric speed: not a metric"):
        sweep_report.write(tmp_path, tmp_path / "r", metric="speed")
    assert json.loads((tmp_path / "sweep.json").read_text())["axes"] == sw.axes
    # `vhpc report` finds the sweep directory; lab-only options are refused on it.
    from click.testing import CliRunner

    from vhpc.cli import main

    got = CliRunner().invoke(main, ["report", str(tmp_path), "--out", str(tmp_path / "cli")])
    assert got.exit_code == 0, got.output
    assert (tmp_path / "cli" / "useful_share-by-vms_per_core-wait.svg").is_file()  # [report] defaults
    got = CliRunner().invoke(main, ["report", str(tmp_path), "--baseline", "credit"])
    assert got.exit_code == 2 and "--baseline and --profile are for lab results" in got.output


def test_the_command_refuses_bad_options_before_anything_runs(tmp_path):
    from click.testing import CliRunner

    from vhpc.cli import main

    out = tmp_path / "out"
    smoke = str(SWEEPS / "smoke.toml")
    got = CliRunner().invoke(main, ["sim", "sweep", smoke, "--out", str(out), "--metric", "speed"])
    assert got.exit_code == 2 and "--metric speed: not a metric of a sweep" in got.output
    got = CliRunner().invoke(main, ["sim", "sweep", smoke, "--out", str(out), "--workers", "2",
                                    "--scheduler", "tcp://127.0.0.1:9"])
    assert got.exit_code == 2 and "a --scheduler has its own workers" in got.output
    got = CliRunner().invoke(main, ["sim", "sweep", str(tmp_path / "none.toml"), "--out", str(out)])
    assert got.exit_code == 2 and "none.toml: no such sweep file" in got.output
    assert not out.exists()
