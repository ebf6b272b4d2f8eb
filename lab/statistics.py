"""The statistics the claims are judged by (lab/results/claims/PLAN.md): t-tests, paired and Welch t-intervals
of a mean difference, and Holm's step-down over a family, on scipy.stats.

    t_test     two-sided p-value: one sample against 0, or Welch's for two unpaired samples
    interval   mean difference A - B and its t-interval, paired (per-seed differences) or Welch's
    holm       Holm's step-down adjusted p-values
    power      the paired t-test's power over n seeds (noncentral t), and the seeds a plan needs
    sd_bound   a one-sided upper confidence bound of an SD measured on few seeds (chi-square)

    python -m lab.claims report      # lab/claims_report.py judges with these

Tests: tests/test_claims.py (against the intervals written out by hand)
"""

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

ALPHA = 0.05  # the family-wise level of the plan


def t_test(values: ArrayLike, others: ArrayLike | None = None) -> float:
    """Two-sided t-test: one sample against 0, or Welch's for two unpaired samples. p-value (1.0 for too
    few values or no spread)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if others is not None:
        others = np.asarray(others, dtype=float)
        if min(len(values), len(others)) < 2 or values.std() + others.std() == 0:
            return 1.0
        return float(stats.ttest_ind(values, others, equal_var=False).pvalue)
    if len(values) < 2 or values.std() == 0:
        return 1.0 if len(values) < 2 or values.mean() == 0 else 0.0
    return float(stats.ttest_1samp(values, 0.0).pvalue)


def interval(
    a: ArrayLike, b: ArrayLike, paired: bool, level: float = 0.95, sided: int = 2
) -> tuple[float, float, float]:
    """Mean difference A - B and its t-interval: (mean, low, high). Paired: on the per-seed differences
    (scipy's ttest_rel); unpaired: Welch's (ttest_ind, equal_var=False, the Welch-Satterthwaite degrees
    of freedom). sided=1 gives one-sided bounds at `level`: the two-sided interval at 1 - 2 (1 - level)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    confidence = 1 - 2 * (1 - level) / sided
    if paired:
        d = a - b
        m = d.mean()
        if len(d) < 2 or d.std() == 0:  # no spread: scipy's interval would be nan
            return m, m, m
        low, high = stats.ttest_rel(a, b).confidence_interval(confidence)
        return m, float(low), float(high)
    m = a.mean() - b.mean()
    if a.var() + b.var() == 0:
        return m, m, m
    low, high = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    return m, float(low), float(high)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: reject where adjusted < ALPHA."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [1.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def power(n: int, sd: float, effect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test at level alpha over n seeds, when the per-seed differences
    have mean `effect` and standard deviation `sd`: the noncentral t's mass beyond the critical values."""
    from scipy import stats

    df, shift = n - 1, effect / (sd / np.sqrt(n))
    critical = stats.t.ppf(1 - alpha / 2, df)
    # the lower tail as the upper tail of the mirrored shift: scipy's nct.cdf(-c, df, shift) is NaN for a large shift
    return float(stats.nct.sf(critical, df, shift) + stats.nct.sf(critical, df, -shift))


def seeds_for(
    sd: float, effect: float, target: float = 0.8, lo: int = 5, hi: int = 15, alpha: float = ALPHA
) -> int | None:
    """The fewest seeds in [lo, hi] whose paired t-test reaches `target` power; None if hi falls short."""
    return next((n for n in range(lo, hi + 1) if power(n, sd, effect, alpha) >= target), None)


def not_worse_power(n: int, sd: float, margin: float, alpha: float = ALPHA) -> float:
    """Power of "not worse by `margin`" over n seeds when the true difference is 0: the chance that the
    one-sided (1 - alpha) lower bound of the mean difference clears -margin (noncentral t)."""
    from scipy import stats

    df = n - 1
    return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, margin / (sd / np.sqrt(n))))


def sd_bound(sd: float, n: int, level: float = 0.8) -> float:
    """One-sided upper `level` confidence bound of a standard deviation measured as `sd` on n values:
    sd * sqrt((n - 1) / chi2_{1-level}(n - 1)). A plan sized on the point estimate of an SD from 3 or 4
    seeds is underpowered about half the time; sized on this bound, about 1 - level of the time."""
    from scipy import stats

    return float(sd * np.sqrt((n - 1) / stats.chi2.ppf(1 - level, n - 1)))
