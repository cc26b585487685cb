"""`make bench-sim`'s side-by-side checks against earlier engines: the verdict
follows the medians of both engines' runs, ratios pair the runs of one round,
and a revision that cannot be had is said, not guessed."""

from __future__ import annotations

from vhpc.sim import bench


def scale_cell(rates_m: list[float]) -> bench.Cell:
    """A cell whose runs (one per round) handled 10 M events at the given M events/s."""
    return bench.Cell(wall_s=[10 / r for r in rates_m], events=[10_000_000] * len(rates_m),
                      rounds=list(range(len(rates_m))))


def cells(now: list[float], base: list[float]) -> dict:
    return {bench.BASELINE_LIMIT_S: scale_cell(now), bench.BASELINE.key: scale_cell(base)}


def test_the_verdict_is_the_ratio_of_median_rates():
    ok = bench.reference_check(cells([14.0, 15.0, 9.0], [15.0, 16.0, 15.5]), bench.BASELINE)
    assert ok["met"] is True and "ratio 0.903" in ok["detail"]
    slow = bench.reference_check(cells([12.0, 13.0, 13.5], [15.0, 16.0, 15.5]), bench.BASELINE)
    assert slow["met"] is False and "ratio 0.839" in slow["detail"]


def test_per_round_ratios_pair_runs_of_one_round():
    now = scale_cell([20.0, 30.0, 40.0])
    then = bench.Cell(wall_s=[1.0, 1.0], events=[10_000_000] * 2, rounds=[0, 2])  # round 1 failed
    assert bench.per_round_ratios(now, then, bench.events_per_s) == [2.0, 4.0]


def test_the_previous_revision_is_shown_as_speed_ups():
    both = cells([20.0, 22.0, 24.0], [15.0, 16.0, 15.5])
    both[bench.PREVIOUS.key] = scale_cell([10.0, 11.0, 12.0])
    both[bench.REPRODUCE] = bench.Cell(wall_s=[3.0, 3.0, 2.5], rounds=[0, 1, 2])
    both[bench.REPRODUCE_3] = bench.Cell(wall_s=[9.0, 9.0, 9.0], rounds=[0, 1, 2])
    both[bench.reproduce_key(bench.PREVIOUS)] = bench.Cell(wall_s=[6.0, 6.0, 7.5], rounds=[0, 1, 2])
    rows = {(r[0], r[1].split(":")[0]): r for r in bench.side_by_side_rows(both)}
    scale = rows[(f"`{bench.PREVIOUS.rev}`", f"scale, {bench.BASELINE_LIMIT_S} s simulated")]
    assert scale[4] == "2.00" and scale[5] == "2.00–2.00"
    # the previous revision has today's seeds rule: against today's defaults,
    # not the fixed 3 seeds a cell
    reproduce = rows[(f"`{bench.PREVIOUS.rev}`", "`vhpc reproduce s0` at its defaults (the same seeds rule)")]
    assert reproduce[4] == "2.00" and reproduce[5] == "2.00–3.00"


def test_a_missing_baseline_is_not_a_verdict():
    missing = {bench.BASELINE_LIMIT_S: scale_cell([15.0]),
               bench.BASELINE.key: bench.Cell(problems=["not measured: no such revision"])}
    got = bench.reference_check(missing, bench.BASELINE)
    assert got["met"] is None and "no such revision" in got["detail"]


def test_an_unknown_revision_is_named():
    binary, why = bench.baseline_binary("0" * 40)
    assert binary is None and "0" * 40 in why
    python, why = bench.reference_python("0" * 40)
    assert python is None and "0" * 40 in why
