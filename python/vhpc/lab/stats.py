"""Statistics of repeated runs: mean with a Student-t confidence interval, the
ratio of two means with a Fieller confidence interval, Welch's t-test.

The ratio's interval is Fieller's for two independent samples, with the Student
t quantile at the Welch–Satterthwaite degrees of freedom of the two means: it
is exact for normal data with known variance ratio and, unlike the delta
method, stays asymmetric when the denominator is noisy; it is unbounded (NaN
here) when the denominator's mean is not significantly different from zero.

`modes` flags a cell whose runs fall in two separate groups (a host that gives a
run one of two speeds), where a median is whichever group has more runs.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np
from scipy import stats

LEVEL = 0.95


@dataclass(frozen=True)
class Summary:
    mean: float
    sd: float
    n: int
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Ratio:
    ratio: float
    ci_low: float
    ci_high: float


def summarize(values: Sequence[float], level: float = LEVEL) -> Summary:
    """Mean, sample standard deviation (n−1), n and the t interval of the mean."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return Summary(math.nan, math.nan, 0, math.nan, math.nan)
    mean = float(x.mean())
    if n == 1:
        return Summary(mean, math.nan, 1, math.nan, math.nan)
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf((1 + level) / 2, n - 1)) * sd / math.sqrt(n)
    return Summary(mean, sd, n, mean - half, mean + half)


def welch_df(va: float, na: int, vb: float, nb: int) -> float:
    """Welch–Satterthwaite degrees of freedom for variances of the means va, vb."""
    den = va**2 / (na - 1) + vb**2 / (nb - 1)
    return (va + vb) ** 2 / den if den > 0 else float(na + nb - 2)


def ratio(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Ratio:
    """mean(a) / mean(b) with Fieller's interval (see the module note)."""
    sa, sb = summarize(a), summarize(b)
    if sb.n == 0 or sa.n == 0 or sb.mean == 0:
        return Ratio(math.nan, math.nan, math.nan)
    r = sa.mean / sb.mean
    if sa.n < 2 or sb.n < 2:
        return Ratio(r, math.nan, math.nan)
    va, vb = sa.sd**2 / sa.n, sb.sd**2 / sb.n
    t = float(stats.t.ppf((1 + level) / 2, welch_df(va, sa.n, vb, sb.n)))
    # Solve (ma − ρ·mb)² = t²(va + ρ²·vb) for ρ.
    qa = sb.mean**2 - t**2 * vb
    qb = -2 * sa.mean * sb.mean
    qc = sa.mean**2 - t**2 * va
    disc = qb**2 - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return Ratio(r, math.nan, math.nan)
    root = math.sqrt(disc)
    lo, hi = sorted(((-qb - root) / (2 * qa), (-qb + root) / (2 * qa)))
    return Ratio(r, lo, hi)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test (NaN with fewer than 2 values on a side)."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    with warnings.catch_warnings():  # constant samples (e.g. a key count): p is NaN, say nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


#: Two groups of runs are separate modes when the gap between them is this many
#: times the wider group's own range ...
MODE_GAP_SPREAD = 3
#: ... and at least this share of the lower group's median (equal runs are one mode).
MODE_GAP_SHARE = 0.25


def modes(values: Sequence[float]) -> tuple[list[float], list[float]] | None:
    """The runs split at their widest gap into (lower, upper) groups of at least two
    runs each when that gap is MODE_GAP_SPREAD times the wider group's range and
    MODE_GAP_SHARE of the lower group's median; else None (one mode, or a lone
    outlier)."""
    v = sorted(values)
    cuts = [(v[i] - v[i - 1], i) for i in range(2, len(v) - 1)]
    if not cuts:
        return None
    gap, i = max(cuts)
    low, high = v[:i], v[i:]
    spread = max(low[-1] - low[0], high[-1] - high[0])
    if gap < MODE_GAP_SPREAD * spread or gap < MODE_GAP_SHARE * float(np.median(low)):
        return None
    return low, high
