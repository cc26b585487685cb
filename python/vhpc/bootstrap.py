"""Shared: seeded percentile-bootstrap intervals of medians and median ratios.

The benchmarks (runtime's `make bench-runtime`, the lab's `make s4-hints`) report
medians with 95 % intervals; resampling is seeded so a table regenerates
identically from its samples. scipy is imported inside the functions: importing
it at module level would slow every `vhpc` command.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Resamples per interval, and the seed of their generator.
RESAMPLES = 4000
SEED = 20240601


def _interval(samples: tuple[Sequence[float], ...], statistic, vectorized: bool
              ) -> tuple[float, float]:
    import numpy as np
    from scipy import stats

    res = stats.bootstrap(samples, statistic, vectorized=vectorized, n_resamples=RESAMPLES,
                          method="percentile", random_state=np.random.default_rng(SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def median_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """95 % interval of the median (None with under 3 runs)."""
    if len(values) < 3:
        return None
    import numpy as np

    return _interval((values,), np.median, vectorized=True)


def median_ratio_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """95 % interval of median(a) / median(b), runs resampled within each side
    (None with under 3 runs on either)."""
    if len(a) < 3 or len(b) < 3:
        return None
    import numpy as np

    def ratio(x, y, axis=-1):
        return np.median(x, axis=axis) / np.median(y, axis=axis)

    return _interval((a, b), ratio, vectorized=True)


def paired_sum_ratio_interval(a: Sequence[float], b: Sequence[float]
                              ) -> tuple[float, float] | None:
    """95 % interval of sum(a) / sum(b) over paired items (a[i] beside b[i]: one
    module of a suite under two settings), items resampled in pairs (None with
    under 3 pairs)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples of different lengths: {len(a)} and {len(b)}")
    if len(a) < 3:
        return None
    import numpy as np
    from scipy import stats

    def ratio(x, y, axis=-1):
        return np.sum(x, axis=axis) / np.sum(y, axis=axis)

    res = stats.bootstrap((a, b), ratio, paired=True, vectorized=True, n_resamples=RESAMPLES,
                          method="percentile", random_state=np.random.default_rng(SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
