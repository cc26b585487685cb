"""`make bench-sim`'s side-by-side check against the credit-only engine: the
verdict follows the medians of both engines' runs, and a revision that cannot be
had is said, not guessed."""

from __future__ import annotations

from vhpc.sim import bench


def scale_cell(rates_m: list[float]) -> bench.Cell:
    """A cell whose runs handled 10 M events at the given M events/s."""
    return bench.Cell(wall_s=[10 / r for r in rates_m], events=[10_000_000] * len(rates_m))


def cells(now: list[float], base: list[float]) -> dict:
    return {bench.BASELINE_LIMIT_S: scale_cell(now), bench.BASELINE: scale_cell(base)}


def test_the_verdict_is_the_ratio_of_median_rates():
    ok = bench.baseline_check(cells([14.0, 15.0, 9.0], [15.0, 16.0, 15.5]))
    assert ok["met"] is True and "ratio 0.903" in ok["detail"]
    slow = bench.baseline_check(cells([12.0, 13.0, 13.5], [15.0, 16.0, 15.5]))
    assert slow["met"] is False and "ratio 0.839" in slow["detail"]


def test_a_missing_baseline_is_not_a_verdict():
    missing = {bench.BASELINE_LIMIT_S: scale_cell([15.0]),
               bench.BASELINE: bench.Cell(problems=["not measured: no such revision"])}
    got = bench.baseline_check(missing)
    assert got["met"] is None and "no such revision" in got["detail"]


def test_an_unknown_revision_is_named():
    binary, why = bench.baseline_binary("0" * 40)
    assert binary is None and "0" * 40 in why
