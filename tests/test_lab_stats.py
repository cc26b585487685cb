"""vhpc.lab.stats against scipy on known data, and against a hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sst

from vhpc.lab import stats

A = [10.2, 9.8, 10.5, 10.1, 9.9, 10.4]
B = [5.1, 4.8, 5.3, 5.0, 4.9]


def test_summary_matches_scipy():
    s = stats.summarize(A)
    assert s.n == 6
    assert s.mean == pytest.approx(np.mean(A))
    assert s.sd == pytest.approx(np.std(A, ddof=1))
    low, high = sst.t.interval(0.95, len(A) - 1, loc=np.mean(A), scale=sst.sem(A))
    assert (s.ci_low, s.ci_high) == pytest.approx((low, high))


def test_summary_by_hand():
    # 1, 2, 3, 4: mean 2.5, sd sqrt(5/3), t(0.975, 3) = 3.182446305
    s = stats.summarize([1, 2, 3, 4])
    assert s.sd == pytest.approx(math.sqrt(5 / 3))
    half = 3.182446305 * math.sqrt(5 / 3) / 2
    assert (s.ci_low, s.ci_high) == pytest.approx((2.5 - half, 2.5 + half))


def test_summary_of_one_or_none_has_no_interval():
    assert stats.summarize([3.0]).mean == 3.0 and math.isnan(stats.summarize([3.0]).ci_low)
    assert stats.summarize([]).n == 0


def test_welch_p_is_scipys():
    assert stats.welch_p(A, B) == pytest.approx(sst.ttest_ind(A, B, equal_var=False).pvalue)
    assert math.isnan(stats.welch_p([1.0], B))


def test_ratio_interval_solves_fieller():
    r = stats.ratio(A, B)
    ma, mb = np.mean(A), np.mean(B)
    assert r.ratio == pytest.approx(ma / mb)
    assert r.ci_low < r.ratio < r.ci_high
    va, vb = np.var(A, ddof=1) / len(A), np.var(B, ddof=1) / len(B)
    df = (va + vb) ** 2 / (va**2 / (len(A) - 1) + vb**2 / (len(B) - 1))
    t = sst.t.ppf(0.975, df)
    for rho in (r.ci_low, r.ci_high):  # the bounds are where the t statistic hits ±t
        assert (ma - rho * mb) ** 2 == pytest.approx(t**2 * (va + rho**2 * vb))


def test_ratio_by_hand():
    # a = [3, 5]: mean 4, s² 2, variance of the mean va = 1
    # b = [1, 3]: mean 2, s² 2, vb = 1; df = 4/(1+1) = 2, t = 4.302652730
    # (4 − 2ρ)² = t²(1 + ρ²)  →  (4 − t²)ρ² − 16ρ + (16 − t²) = 0 with 4 − t² < 0:
    # the interval is unbounded (the denominator is not clearly non-zero).
    r = stats.ratio([3, 5], [1, 3])
    assert r.ratio == 2 and math.isnan(r.ci_low)
    # a = [9, 11], b = [4.9, 5.1]: va = 1, vb = 0.01, df = 1.01²/(1 + 0.0001)
    r = stats.ratio([9, 11], [4.9, 5.1])
    t = sst.t.ppf(0.975, 1.01**2 / 1.0001)
    qa, qb, qc = 25 - t**2 * 0.01, -100, 100 - t**2
    root = math.sqrt(qb**2 - 4 * qa * qc)
    assert (r.ci_low, r.ci_high) == pytest.approx(((100 - root) / (2 * qa), (100 + root) / (2 * qa)))


def test_two_groups_of_runs_are_two_modes():
    # the s3-channels store's MPICH 8-byte ping-pong over shared memory (µs)
    low, high = stats.modes([0.688, 0.610, 0.691, 0.188, 0.200])
    assert low == [0.188, 0.200] and high == [0.610, 0.688, 0.691]


def test_one_outlier_or_a_spread_is_one_mode():
    assert stats.modes([0.173, 0.178, 0.203, 0.182, 0.669]) is None  # a lone outlier
    assert stats.modes([1.0, 1.1, 1.2, 1.3, 1.4]) is None  # evenly spread
    assert stats.modes([5.0, 5.0, 5.0, 5.0]) is None  # identical runs
    assert stats.modes([1.0, 1.05, 1.2, 1.25]) is None  # a gap below a quarter of the median
    assert stats.modes([1.0, 2.0, 3.0]) is None  # too few runs for two groups of two
