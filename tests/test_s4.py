"""`vhpc reproduce s4`: the quad-core experiment (native, default, static, adaptive)
and S0's pressure experiment under co-scheduling. The checks are the directions the
model shows and the record format, never the values."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vhpc.cli import main
from vhpc.sim.reproduce import s0, s4, s4_quad


@pytest.fixture(scope="module")
def all_records() -> list[dict]:
    result = CliRunner().invoke(main, ["reproduce", "s4", "--json", "--seeds", "2"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def records(all_records) -> list[dict]:
    return [r for r in all_records if r["experiment"] == "s0-schedulers"]


@pytest.fixture(scope="module")
def quad(all_records) -> list[dict]:
    return [r for r in all_records if r["experiment"] == "quad"]


def quad_cell(quad: list[dict], workload: str, config: str) -> dict:
    (r,) = [r for r in quad if (r["workload"], r["config"]) == (workload, config)]
    return r


def test_quad_records_have_the_issues_keys_and_every_cell(quad):
    omp = sum(kind == "openmp" for _, _, kind in s4_quad.WORKLOADS)
    # `throttle` runs the OpenMP workloads only: MPI ranks own their parts.
    assert len(quad) == len(s4_quad.WORKLOADS) * (len(s4_quad.CONFIGS) - 1) + omp
    for r in quad:
        assert {"experiment", "workload", "config", "time_s"} <= r.keys()
        assert r["config"] in ("native", "default", "static", "adaptive", "throttle")
        assert r["config"] != "throttle" or r["kind"] == "openmp"
        lo, hi = r["ci95_s"]
        assert lo <= r["time_s"] <= hi and r["seeds"] == 2
        assert r["brief"] == s4.BRIEF[r["config"]]
        native = quad_cell(quad, r["workload"], "native")["time_s"]
        assert r["vs_native"] == pytest.approx(r["time_s"] / native)


def test_quad_static_recovers_some_loss_and_adaptive_beats_default(quad):
    for name, _, kind in s4_quad.WORKLOADS:
        t = {r["config"]: r["time_s"] for r in quad if r["workload"] == name}
        assert t["default"] > t["native"], name  # a virtualization loss
        assert t["static"] < t["default"], name
        if kind == "openmp":
            assert t["adaptive"] < t["default"], name


def test_throttling_keeps_the_team_where_fewer_threads_never_run_faster(quad):
    """Under the roofline memory model a loop on k threads does 4/k of the work each,
    and a saturated bus gives fewer threads no more than its bandwidth: no loop runs
    faster on fewer threads, so the search settles every loop on 4 and pays its
    tries (a loop with few instances most)."""
    for name, _, kind in s4_quad.WORKLOADS:
        if kind != "openmp":
            continue
        r = quad_cell(quad, name, "throttle")
        assert len(r["loop_threads"]) == r["seeds"]
        assert all(threads == 4 for seed in r["loop_threads"] for threads in seed), name
        assert r["time_s"] >= quad_cell(quad, name, "adaptive")["time_s"], name


def test_quad_only_runs_alone():
    result = CliRunner().invoke(main, ["reproduce", "s4", "--json", "--seeds", "1",
                                       "--only", "quad"])
    assert result.exit_code == 0, result.output
    assert {r["experiment"] for r in json.loads(result.output)} == {"quad"}


def test_the_quad_scenarios_differ_only_as_stated():
    default = s4_quad.scenario("npb.omp.cg", "openmp", "default")
    static = s4_quad.scenario("npb.omp.cg", "openmp", "static")
    adaptive = s4_quad.scenario("npb.omp.cg", "openmp", "adaptive")
    vm = lambda sc: next(d for d in sc["domains"] if d["name"] == "domU")
    assert "pin" not in vm(default) and vm(static)["pin"] == [[0], [1], [2], [3]]
    assert vm(default)["tick"]["hz"] == s4_quad.HZ_DEFAULT
    assert vm(static)["tick"]["hz"] == vm(adaptive)["tick"]["hz"] == s4_quad.HZ_STATIC
    assert vm(adaptive)["hints"] == s4_quad.ADAPTIVE_POLICY and "hints" not in vm(static)
    assert "pin" not in vm(adaptive)  # the policy maps threads to cores at run time
    throttle = s4_quad.scenario("npb.omp.cg", "openmp", "throttle")
    assert throttle["jobs"][0].pop("throttle") == s4_quad.THROTTLE
    assert throttle["name"].replace("throttle", "adaptive") == adaptive["name"]
    throttle["name"] = adaptive["name"]
    assert throttle == adaptive
    with pytest.raises(ValueError, match="OpenMP"):
        s4_quad.scenario("npb.cg", "mpi", "throttle")
    # Every configuration on the Xeon 5335's shared front-side bus.
    assert {sc["host"]["bus_mb_s"] for sc in (default, static, adaptive)} == {s4_quad.FSB_MB_S}
    native = s4_quad.scenario("npb.omp.cg", "openmp", "native")
    assert [d.get("native") for d in native["domains"]] == [True]


def cell(records: list[dict], config: str, library: str, domus: int) -> dict:
    (r,) = [r for r in records if (r["config"], r["library"], r["domus"]) == (config, library, domus)]
    return r


def test_records_have_the_issues_keys_and_every_cell(records):
    assert len(records) == len(s4.CONFIGS) * 4  # IS only by default, 1-4 domUs
    for r in records:
        assert {"experiment", "workload", "config", "time_s"} <= r.keys()
        assert r["experiment"] == "s0-schedulers" and r["workload"] == "is.A.2"
        lo, hi = r["ci95_s"]
        assert lo <= r["time_s"] <= hi and r["seeds"] == 2
        assert (r["published_s"] is not None) == (r["config"] == "credit")
    assert cell(records, "credit", "revised", 3)["published_s"] == s0.TABLE1[("is.A.2", 3)][1]


def test_co_scheduling_removes_what_busy_polling_costs_under_credit(records):
    for domus in (2, 3, 4):
        busy = cell(records, "credit", "original", domus)["time_s"]
        assert cell(records, "gang", "original", domus)["time_s"] < busy
        assert cell(records, "credit", "revised", domus)["time_s"] < busy
    # one domU alone on the two cores: nothing to co-schedule against
    alone = [cell(records, c, lib, 1)["time_s"] for c, lib in s4.CONFIGS]
    assert max(alone) / min(alone) < 1.05
