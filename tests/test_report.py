"""`vhpc report` on small synthetic datasets written with the store's own writer."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pandas as pd
import pytest
from click.testing import CliRunner

from vhpc.lab import plots, stats
from vhpc.cli import main
from vhpc.lab import compare, experiment, store
from vhpc.lab.experiment import Config, Workload

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
POLICIES = ("default", "adaptive")


def times(level: int, policy: str) -> list[float]:
    """Execution times growing with the level, `adaptive` growing slower; not constant."""
    slope = 2.0 if policy == "default" else 1.0
    return [level * slope + d for d in (0.10, 0.30, 0.20)]


def add(out, config: str, workload: Workload, policy: str, rep: int, metrics: dict,
        status: str = "ok") -> None:
    cell = experiment.Cell("mpich", Config(name=config, kind="native"), workload, policy)
    store.append(out, experiment="synthetic", cell=cell, repetition=rep, status=status,
                 metrics=metrics, message="" if status == "ok" else "killed after 60 s",
                 wall_s=1.0, started_at=NOW)


def write_times(out) -> None:
    w = Workload(name="is", program="npb_is")
    for level in (1, 2, 3):
        for policy in POLICIES:
            for rep, t in enumerate(times(level, policy)):
                add(out, f"domains-{level}", w, policy, rep, {"time": (t, "s")})


def write_sizes(out) -> None:
    w = Workload(name="pp", program="pingpong")
    for level in (1, 2):
        for policy in POLICIES:
            for rep in range(3):
                k = level * (1 + rep / 10)
                add(out, f"domains-{level}", w, policy, rep, {
                    "lat_8_us": (k, "us"), "lat_1024_us": (3 * k, "us"),
                    "bw_8_MBps": (8 / k, "MBps"), "bw_1024_MBps": (300 / k, "MBps")})
    add(out, "domains-2", w, "default", 9, {}, status="timeout")


@pytest.fixture
def full(tmp_path):
    out = tmp_path / "full"
    write_times(out)
    write_sizes(out)
    return out


@pytest.fixture
def times_only(tmp_path):
    out = tmp_path / "times"
    write_times(out)
    return out


def run_report(*args):
    return CliRunner().invoke(main, ["report", *map(str, args)])


def links(md: str) -> set[str]:
    return set(re.findall(r"\]\(([^)]+)\)", md))


def table_row(md: str, *key: str) -> list[str]:
    """The cells of the statistics row for (mpi, workload, metric, config, policy)."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if tuple(cells[:5]) == key:
            return cells
    raise AssertionError(f"no row {key} in report.md")


def test_report_writes_valid_figures_and_links_exactly_them(full, tmp_path):
    out = tmp_path / "rep"
    result = run_report(full, "--out", out, "--baseline", "domains-1")
    assert result.exit_code == 0, result.output
    written = {p.name for p in out.iterdir()} - {"report.md"}
    assert written == {f"{stem}.{ext}" for stem in ("size-sweep", "execution-time", "pressure")
                       for ext in ("png", "svg")}
    for name in written:
        data = (out / name).read_bytes()
        if name.endswith(".png"):
            assert data.startswith(b"\x89PNG\r\n\x1a\n")
        else:
            assert ET.fromstring(data).tag.endswith("svg")
    md = (out / "report.md").read_text()
    assert links(md) == written
    # Both size kinds were measured at two sizes: nothing left for the single-size bars.
    assert "### Single-size latency and bandwidth\n\nNot drawn:" in md


def test_report_table_numbers_are_those_of_stats(full):
    assert run_report(full, "--baseline", "domains-1").exit_code == 0
    md = (full / "report" / "report.md").read_text()
    row = table_row(md, "mpich", "is", "time", "domains-3", "adaptive")
    s = stats.summarize(times(3, "adaptive"))
    r = stats.ratio(times(3, "adaptive"), times(1, "adaptive"))
    n = compare.num
    assert row[5] == "3"
    assert row[6] == f"{n(s.mean)} s [{n(s.ci_low)}, {n(s.ci_high)}]"
    assert row[7] == f"{n(r.ratio)} [{n(r.ci_low)}, {n(r.ci_high)}]"
    assert row[8] == f"{stats.welch_p(times(3, 'adaptive'), times(1, 'adaptive')):.2g}"
    # The timed-out run is counted against its cell and in the provenance.
    assert table_row(md, "mpich", "pp", "lat_8_us", "domains-2", "default")[5] == "3 (+1 failed)"
    assert "- runs: 31 (30 ok, 0 failed, 1 timed out, 0 invalid)" in md
    assert "- 1 × timeout: killed after 60 s" in md
    assert "`synthetic`" in md and "`mpich: MPICH" in md


def test_without_size_metrics_no_size_plot_and_a_note(times_only):
    result = run_report(times_only)
    assert result.exit_code == 0, result.output
    out = times_only / "report"
    assert not (out / "size-sweep.png").exists() and not (out / "size-sweep.svg").exists()
    md = (out / "report.md").read_text()
    assert "### Latency and bandwidth vs message size\n\nNot drawn: no `lat_<size>_us`" in md
    assert links(md) == {f"{s}.{e}" for s in ("execution-time", "pressure") for e in ("png", "svg")}


def test_a_figure_no_longer_drawn_is_removed_from_the_output(full, times_only, tmp_path):
    out = tmp_path / "rep"
    assert run_report(full, "--out", out).exit_code == 0
    assert (out / "size-sweep.png").exists()
    assert run_report(times_only, "--out", out).exit_code == 0
    assert not (out / "size-sweep.png").exists()
    assert links((out / "report.md").read_text()) == {p.name for p in out.iterdir()} - {"report.md"}


def test_empty_or_missing_results_dir_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    empty = run_report(tmp_path / "empty")
    assert empty.exit_code == 2 and "no stored runs" in empty.output
    missing = run_report(tmp_path / "nope")
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_unknown_baseline_is_a_clear_error(times_only):
    result = run_report(times_only, "--baseline", "nosuch")
    assert result.exit_code == 2 and "neither a config" in result.output


def test_every_figure_has_title_axis_labels_with_units_and_legend(full):
    df = store.read(full)
    for build in (plots.latency_bandwidth, plots.execution_time, plots.pressure):
        fig = build(df)
        assert fig._suptitle is not None and fig._suptitle.get_text()
        for ax in (a for a in fig.axes if a.get_visible()):
            assert ax.get_title() and ax.get_xlabel() and ax.get_legend() is not None
            assert re.search(r"\[\w+\]", ax.get_ylabel()), ax.get_ylabel()


def test_pressure_curve_means_are_those_of_stats(times_only):
    fig = plots.pressure(store.read(times_only))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    lines = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar: (data line, caps, bars)
    assert set(lines) == set(POLICIES)
    for policy, line in lines.items():
        assert list(line.get_xdata()) == [1, 2, 3]
        assert list(line.get_ydata()) == pytest.approx(
            [stats.summarize(times(level, policy)).mean for level in (1, 2, 3)])


@pytest.mark.parametrize(("name", "config", "expected"), [
    ("domains-3", {"kind": "native"}, ("domains", 3.0)),
    ("noise_2", {}, ("noise", 2.0)),
    ("heavy", {"domains": 4}, ("heavy", 4.0)),
    ("heavy", {"domains": [{"ranks": 2}, {"ranks": 2}]}, ("heavy", 2.0)),
    ("d3", {"kind": "domains", "domain": [{"name": "vm0"}, {"name": "vm1"}]}, ("d", 2.0)),
    ("d2-noise", {"domain": [{"name": "vm0"}]}, ("d-noise", 1.0)),
    ("d4-noise", {"kind": "native"}, ("d-noise", 4.0)),
    ("native_up", {"kind": "native_up"}, None),
])
def test_config_level_from_the_cell_or_the_name(name, config, expected):
    assert plots.config_level(name, json.dumps({"config": config})) == expected


def test_no_numeric_configs_no_pressure_curve(tmp_path):
    w = Workload(name="is", program="npb_is")
    for config in ("native", "native_up"):
        for rep in range(2):
            add(tmp_path, config, w, "default", rep, {"time": (1.0 + rep, "s")})
    assert plots.pressure(store.read(tmp_path)) is None


def test_per_job_times_are_left_to_the_table():
    df = pd.DataFrame({
        "status": "ok", "metric": ["time", "time.sd_jobs", "time.job0", "mops"],
        "unit": ["s", "s", "s", ""], "value": 1.0})
    assert plots.time_metrics(df) == ["time", "time.sd_jobs"]
