"""`vhpc reproduce s0`: record format, determinism, and the behaviours S0 describes.

The behaviour checks compare simulated cells with each other (orderings and
broad ratios the brief states), never with hard-coded simulated numbers.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from vhpc.sim.reproduce import s0 as reproduce
from vhpc.cli import main

KEYS = {"experiment", "scheduler", "config", "domains", "benchmark", "library", "mean_s", "std_s",
        "published_s", "seeds", "ci95_s", "range3_s"}


@pytest.fixture(scope="module")
def markdown(tmp_path_factory) -> str:
    """The Markdown tables written by the run that `records` reads."""
    return str(tmp_path_factory.mktemp("s0") / "s0.md")


@pytest.fixture(scope="module")
def records(markdown) -> list[dict]:
    result = CliRunner().invoke(main, ["reproduce", "s0", "--json", "--markdown", markdown])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cell(records: list[dict], **match) -> dict:
    (found,) = [r for r in records if all(r[k] == v for k, v in match.items())]
    return found


def test_records_have_the_specified_keys_and_cover_every_experiment(records):
    assert all(set(r) == KEYS for r in records)
    assert {r["experiment"] for r in records} == {"beff", "pressure", "noise"}
    beff = [r for r in records if r["experiment"] == "beff"]
    assert {(r["scheduler"], r["config"], r["library"]) for r in beff} == {
        (s, c, lib) for s in ("credit", "sedf") for c in ("native_up", "intra_vm_pin", "inter_vm_pin")
        for lib in ("original", "revised")}
    assert all(r["domains"] is None and r["benchmark"] == "beff" for r in beff)
    pressure = [r for r in records if r["experiment"] == "pressure"]
    assert {(r["scheduler"], r["domains"], r["benchmark"], r["library"]) for r in pressure} == {
        (s, d, b, lib) for s in ("credit", "sedf") for d in range(1, 5)
        for b in ("is.A.2", "lu.A.2") for lib in ("original", "revised")}
    noise = [r for r in records if r["experiment"] == "noise"]
    assert {(r["scheduler"], r["domains"], r["benchmark"]) for r in noise} == {
        ("credit", d, "is.A.2") for d in range(1, 5)}
    assert all(r["config"] is None for r in pressure + noise)
    assert all(r["mean_s"] > 0 and r["std_s"] >= 0 for r in records)


def test_published_values_sit_beside_every_table1_cell(records):
    for (benchmark, domains), (original, revised) in reproduce.TABLE1.items():
        for library, published in (("original", original), ("revised", revised)):
            r = cell(records, experiment="pressure", scheduler="credit", domains=domains,
                     benchmark=benchmark, library=library)
            assert r["published_s"] == published


def test_same_revision_gives_identical_records(records):
    again = CliRunner().invoke(main, ["reproduce", "s0", "--json"])
    assert json.loads(again.stdout) == records


def beff(records, scheduler, config, library):
    return cell(records, experiment="beff", scheduler=scheduler, config=config, library=library)["mean_s"]


def test_overcommitted_beff_is_far_below_native_up_and_sedf_beats_credit(records):
    native = beff(records, "credit", "native_up", "original")
    for config in ("intra_vm_pin", "inter_vm_pin"):
        credit = beff(records, "credit", config, "original")
        sedf = beff(records, "sedf", config, "original")
        assert credit > 100 * native
        assert sedf > 2 * native
        assert sedf < credit, "SEDF's small quanta shorten each wasted poll"


def test_the_fix_brings_intra_vm_close_to_native_up_and_inter_vm_stays_lower(records):
    native = beff(records, "credit", "native_up", "original")
    for scheduler in ("credit", "sedf"):
        intra = beff(records, scheduler, "intra_vm_pin", "revised")
        inter = beff(records, scheduler, "inter_vm_pin", "revised")
        assert intra < 2 * native
        assert inter > intra, "dom0 relays every inter-VM message"
    assert beff(records, "credit", "inter_vm_pin", "revised") < beff(records, "sedf", "inter_vm_pin", "revised"), \
        "Credit lets dom0 migrate to the spare core"


def pressure(records, scheduler, domains, benchmark, library, experiment="pressure"):
    return cell(records, experiment=experiment, scheduler=scheduler, domains=domains,
                benchmark=benchmark, library=library)


def test_fix_changes_little_at_low_pressure_and_wins_at_high_pressure_under_credit(records):
    for benchmark in ("is.A.2", "lu.A.2"):
        one = [pressure(records, "credit", 1, benchmark, lib)["mean_s"] for lib in ("original", "revised")]
        assert abs(one[0] / one[1] - 1) < 0.02
        four = [pressure(records, "credit", 4, benchmark, lib)["mean_s"] for lib in ("original", "revised")]
        assert four[0] > 1.1 * four[1]


def test_fix_helps_less_under_sedf(records):
    for benchmark in ("is.A.2", "lu.A.2"):
        gain = {s: pressure(records, s, 4, benchmark, "original")["mean_s"]
                / pressure(records, s, 4, benchmark, "revised")["mean_s"] for s in ("credit", "sedf")}
        assert gain["sedf"] < gain["credit"]


def test_noise_vm_raises_mean_and_spread_with_the_original_library_only(records):
    for domains in range(2, 5):
        original = pressure(records, "credit", domains, "is.A.2", "original", "noise")
        revised = pressure(records, "credit", domains, "is.A.2", "revised", "noise")
        assert original["mean_s"] > 1.2 * revised["mean_s"]
        assert original["std_s"] > 2 * revised["std_s"]


def test_markdown_tables(records, markdown):
    text = open(markdown).read()
    assert "## Table 1 (Credit)" in text and text.count("| is.A.2 |") >= 8
    for r in reproduce.table1_rows(records):
        row = next(line for line in text.splitlines()
                   if line.startswith(f"| {r['domains']} | {r['benchmark']} | {r['library']} |"))
        assert f"| {r['seeds']} |" in row and f"{r['deviation'] * 100:+.1f} %" in row


def test_every_cell_runs_until_its_interval_is_narrow_or_the_seeds_run_out(records):
    for r in records:
        low, high = r["ci95_s"]
        assert low <= r["mean_s"] <= high
        assert reproduce.MAX_SEEDS >= r["seeds"] >= len(reproduce.SEEDS)
        assert r["seeds"] == reproduce.MAX_SEEDS or (high - low) / 2 <= reproduce.PRECISION * r["mean_s"]
    assert any(r["seeds"] > len(reproduce.SEEDS) for r in records), "no cell needed more seeds"


def test_the_published_three_run_range_brackets_the_models_runs(records):
    for r in reproduce.table1_rows(records):
        low, high = r["range3_s"]
        assert low <= high
        assert r["in_range3"] == (low <= r["published_s"] <= high)
    assert all(r["range3_s"] is None for r in records if r["published_s"] is None)


def test_seeds_wanted_stops_when_narrow_and_grows_at_least_twofold():
    narrow = [10.0, 10.01, 9.99, 10.0, 10.02]
    assert reproduce.seeds_wanted(narrow, 0.05, 200) == 5
    wide = [5.0, 9.0, 7.0, 12.0, 4.0]
    more = reproduce.seeds_wanted(wide, 0.05, 200)
    assert more >= 10
    assert reproduce.seeds_wanted(wide, 0.05, 7) == 7, "capped at max_seeds"
    assert reproduce.seeds_wanted(wide[:3] * 3, 0.05, 9) == 9


def test_fixed_seeds_run_exactly_those_seeds():
    records, _, n_sims = reproduce.run_s0(quick=True, seeds=(1, 2))
    assert {r["seeds"] for r in records} == {2}
    plan = reproduce.cell_plan(quick=True, background=None)
    assert n_sims == 2 * sum(len(runs) for runs in plan.values())


def test_fewer_than_two_fixed_seeds_is_a_usage_error():
    result = CliRunner().invoke(main, ["reproduce", "s0", "--seeds", "1"])
    assert result.exit_code == 2 and "--seeds" in result.output


def test_bad_background_option_is_a_usage_error():
    result = CliRunner().invoke(main, ["reproduce", "s0", "--dom0-background", "ten"])
    assert result.exit_code == 2
    assert "INTERVAL_US:WORK_US" in result.output


def test_a_broken_scenario_file_names_the_file(tmp_path, monkeypatch):
    for path in reproduce.scenario_dir().glob("s0-*.toml"):
        (tmp_path / path.name).write_text(path.read_text())
    (tmp_path / "s0-beff-native-up.toml").write_text("[host\ncores = 1\n")
    monkeypatch.setattr(reproduce, "scenario_dir", lambda: tmp_path)
    result = CliRunner().invoke(main, ["reproduce", "s0", "--json"])
    assert result.exit_code == 2
    assert "s0-beff-native-up.toml" in result.output
