"""`vhpc lab compare` on a small synthetic dataset."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from vhpc.lab import LabError, compare, experiment, stats, store
from vhpc.lab.experiment import Config, Workload

FAST = [1.0, 1.2, 1.1]
SLOW = [10.0, 12.0, 11.0, 9.0]


@pytest.fixture
def results(tmp_path):
    """config `up` is 10× slower than `native`; one extra failed run of `up`."""
    w = Workload(name="pp", program="pingpong")
    now = datetime.now(timezone.utc)
    for config, values in (("native", FAST), ("up", SLOW)):
        cell = experiment.Cell("mpich", Config(name=config, kind="native"), w, "default")
        for rep, v in enumerate(values):
            store.append(tmp_path, experiment="e", cell=cell, repetition=rep, status="ok",
                         metrics={"lat_8_us": (v, "us"), "const": (1.0, "")},
                         message="", wall_s=1.0, started_at=now)
    store.append(tmp_path, experiment="e", cell=cell, repetition=9, status="failed",
                 metrics={}, message="exit 1", wall_s=1.0, started_at=now)
    return tmp_path


def test_rows_hold_the_statistics(results):
    rows = compare.rows(results, metric="lat_8_us", baseline="native")
    assert [(r["config"], r["n"], r["failed"]) for r in rows] == [("native", 3, 0), ("up", 4, 1)]
    up = rows[1]
    s, r = stats.summarize(SLOW), stats.ratio(SLOW, FAST)
    assert (up["mean"], up["ci_low"], up["ci_high"]) == pytest.approx((s.mean, s.ci_low, s.ci_high))
    assert (up["ratio"], up["ratio_low"], up["ratio_high"]) == pytest.approx((r.ratio, r.ci_low, r.ci_high))
    assert up["p"] == pytest.approx(stats.welch_p(SLOW, FAST))
    assert math.isnan(rows[0]["ratio"])


def test_markdown_table(results):
    text = compare.markdown(compare.rows(results, metric="lat_8_us", baseline="native"),
                            "native", "t")
    lines = text.splitlines()
    assert lines[0] == "# t" and "Fieller" in lines[2]
    table = [line for line in lines if line.startswith("| mpich")]
    assert table[0] == "| mpich | pp | lat_8_us | native | default | 3 | 1.1 us [0.8516, 1.348] |  |  |"
    r = stats.ratio(SLOW, FAST)
    assert table[1].startswith(
        "| mpich | pp | lat_8_us | up | default | 4 (+1 failed) | 10.5 us [")
    assert f"| {r.ratio:.4g} [{r.ci_low:.4g}, {r.ci_high:.4g}] |" in table[1]


def test_every_metric_without_a_baseline(results):
    rows = compare.rows(results)
    assert {r["metric"] for r in rows} == {"lat_8_us", "const"}
    assert all(math.isnan(r["ratio"]) for r in rows)


def test_bad_requests_say_what_exists(results, tmp_path_factory):
    with pytest.raises(LabError, match="no metric 'bw'; stored: const, lat_8_us"):
        compare.rows(results, metric="bw")
    with pytest.raises(LabError, match="neither a config \\(native, up\\) nor a policy \\(default\\)"):
        compare.rows(results, baseline="vm")
    with pytest.raises(LabError, match="no stored runs"):
        compare.rows(tmp_path_factory.mktemp("empty"))


def test_no_successful_run_is_a_clear_error_for_compare_and_report(tmp_path):
    from click.testing import CliRunner
    from vhpc import cli
    w = Workload(name="pp", program="pingpong")
    cell = experiment.Cell("mpich", Config(name="n", kind="native"), w, "default")
    now = datetime.now(timezone.utc)
    for rep, (status, metrics) in enumerate([("failed", {}), ("timeout", {}),
                                             ("invalid", {"lat_8_us": (math.nan, "us")})]):
        store.append(tmp_path, experiment="e", cell=cell, repetition=rep, status=status,
                     metrics=metrics, message=status, wall_s=1.0, started_at=now)
    error = f"{tmp_path}: no successful run among the 3 stored (1 failed, 1 invalid, 1 timeout)"
    for args in (["lab", "compare", str(tmp_path)], ["report", str(tmp_path)]):
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 2 and error in result.output, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
