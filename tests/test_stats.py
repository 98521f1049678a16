"""ccbench.core.stats on synthetic data with known answers (plain pytest, no MPI)."""

import math

import numpy as np
import pytest

from ccbench.core import stats
from ccbench.core.stats import (
    FLAG_DESCRIPTIONS,
    Summary,
    geometric_mean,
    mann_whitney_u,
    median_ci,
    percentile,
    relative_standard_error,
    summarize,
)


def test_stats_never_imports_mpi():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(stats))
    names = {a.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for a in node.names}
    mods = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any("mpi4py" in str(m) for m in names | mods)
    assert not any("scipy" in str(m) for m in names | mods)


# -- median_ci ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "n,j,k",
    [
        # [x_(j), x_(k)] from the binomial tables (Le Boudec 2010, table 2.1; Conover A3)
        (6, 1, 6),
        (10, 2, 9),
        (30, 10, 21),
        (100, 40, 61),
    ],
)
def test_median_ci_order_statistics_of_a_permuted_range(n, j, k):
    # values 1..n shuffled: order statistic x_(i) is exactly i
    x = np.random.default_rng(n).permutation(np.arange(1, n + 1, dtype=float))
    assert median_ci(x) == (j, k)


def test_median_ci_tiny_n_returns_min_max():
    x = [3.0, 1.0, 2.0, 5.0, 4.0]  # n = 5: even (min, max) covers only 93.75%
    assert median_ci(x) == (1.0, 5.0)
    assert median_ci([7.0]) == (7.0, 7.0)
    assert "few_samples" in summarize(x, min_samples=2).flags


def test_median_ci_lower_confidence_is_narrower():
    x = np.arange(1, 101, dtype=float)
    lo90, hi90 = median_ci(x, 0.90)
    lo99, hi99 = median_ci(x, 0.99)
    assert lo99 < lo90 <= 50.5 <= hi90 < hi99


def test_median_ci_exact_and_approximate_agree_at_the_switch():
    for n in (1000, 1001):
        lo, hi = median_ci(np.arange(1, n + 1, dtype=float))
        assert lo == pytest.approx(469, abs=1) and hi == pytest.approx(n + 1 - 469, abs=1)


def _coverage(n, trials, seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.exponential(1.0, size=(trials, n)), axis=1)
    lo, hi = median_ci(np.arange(n, dtype=float))  # on 0..n-1 the CI values are 0-based ranks
    true_median = math.log(2.0)
    return np.mean((x[:, int(lo)] <= true_median) & (true_median <= x[:, int(hi)]))


def test_median_ci_coverage_exact_branch():
    # n = 30: the exact interval (x_10, x_21) has coverage 1 - 2 P(B <= 9) = 0.9572
    cov = _coverage(30, 4000, seed=1)
    assert 0.94 <= cov <= 0.975


def test_median_ci_coverage_normal_branch():
    cov = _coverage(2001, 800, seed=2)
    assert 0.92 <= cov <= 0.98


def test_median_ci_rejects_bad_input():
    with pytest.raises(ValueError):
        median_ci([])
    with pytest.raises(ValueError):
        median_ci([1.0, float("nan")])
    with pytest.raises(ValueError):
        median_ci([1.0, 2.0], confidence=1.0)


# -- simple estimators -------------------------------------------------------------------

def test_relative_standard_error():
    x = [1.0, 2.0, 3.0, 4.0]
    want = np.std(x, ddof=1) / 2.0 / 2.5
    assert relative_standard_error(x) == pytest.approx(want)
    assert relative_standard_error([5.0]) == math.inf
    assert relative_standard_error([-1.0, 1.0]) == math.inf
    assert relative_standard_error([2.0, 2.0, 2.0]) == 0.0


def test_percentile_linear():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(x, 50) == 3.0
    assert percentile(x, 95) == pytest.approx(4.8)
    assert percentile(x, 0) == 1.0 and percentile(x, 100) == 5.0


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])
    with pytest.raises(ValueError):
        geometric_mean([])


# -- Mann-Whitney U ----------------------------------------------------------------------

def test_mann_whitney_hand_computed_no_ties():
    # U = 0, mu = 4.5, var = 3*3*7/12 = 5.25, z = (4.5 - 0.5)/sqrt(5.25) = 1.7457
    u, p = mann_whitney_u([1, 2, 3], [4, 5, 6])
    assert u == 0.0
    assert p == pytest.approx(math.erfc(4.0 / math.sqrt(5.25) / math.sqrt(2)), rel=1e-12)
    assert p == pytest.approx(0.0809, abs=1e-4)
    u2, p2 = mann_whitney_u([4, 5, 6], [1, 2, 3])
    assert u2 == 9.0 and p2 == pytest.approx(p)


def test_mann_whitney_hand_computed_with_ties():
    # pooled 1 2 2 2 3 3 4 5: midranks 1, 3, 3, 3, 5.5, 5.5, 7, 8
    # R_a = 1 + 3 + 3 + 5.5 = 12.5, U = 12.5 - 10 = 2.5 (pairs: 0 + 0.5 + 0.5 + 1.5)
    # ties t = 3 and t = 2: sum(t^3 - t) = 30; var = 16/12 * (9 - 30/56) = 11.2857
    u, p = mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 5])
    assert u == 2.5
    var = 16 / 12 * (9 - 30 / 56)
    z = (abs(2.5 - 8) - 0.5) / math.sqrt(var)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-12)
    assert p == pytest.approx(0.1367, abs=1e-4)


def test_mann_whitney_identical_and_shifted():
    rng = np.random.default_rng(7)
    a = rng.lognormal(0.0, 0.2, 200)
    u, p = mann_whitney_u(a, a.copy())
    assert u == pytest.approx(200 * 200 / 2) and p == pytest.approx(1.0, abs=1e-2)
    assert mann_whitney_u([3.0] * 5, [3.0] * 7) == (17.5, 1.0)
    _, p_shift = mann_whitney_u(a, a * 1.5)
    assert p_shift < 1e-20


# -- summarize and flags -----------------------------------------------------------------

def _clean(n=200, seed=0):
    """A tight sample around 10 us: no flag should fire."""
    return 10e-6 * (1.0 + 0.02 * np.random.default_rng(seed).standard_normal(n))


def test_summary_fields_and_clean_sample_has_no_flags():
    x = _clean()
    s = summarize(x)
    assert isinstance(s, Summary)
    assert s.n == 200
    assert s.min_s == x.min() and s.max_s == x.max()
    assert s.median_s == pytest.approx(np.median(x))
    assert s.mean_s == pytest.approx(np.mean(x))
    assert s.p95_s == pytest.approx(np.percentile(x, 95))
    assert s.p99_s == pytest.approx(np.percentile(x, 99))
    assert s.stddev_s == pytest.approx(np.std(x, ddof=1))
    assert (s.ci_low_s, s.ci_high_s) == median_ci(x)
    assert s.ci_low_s <= s.median_s <= s.ci_high_s
    assert s.rse == pytest.approx(relative_standard_error(x))
    assert s.flags == ()


def test_every_flag_is_described():
    assert set(FLAG_DESCRIPTIONS) == {
        "few_samples", "high_spread", "outliers", "near_resolution", "wide_ci"
    }
    assert all(isinstance(v, str) and v and "\n" not in v for v in FLAG_DESCRIPTIONS.values())


def test_flag_few_samples():
    x = _clean(9)
    assert "few_samples" in summarize(x).flags
    assert "few_samples" not in summarize(x, min_samples=9).flags
    assert "few_samples" not in summarize(_clean(10)).flags


def test_single_sample():
    s = summarize([2e-6])
    assert s.n == 1 and s.median_s == s.ci_low_s == s.ci_high_s == 2e-6
    assert math.isnan(s.stddev_s) and s.rse == math.inf
    assert s.flags == ("few_samples",)


def test_flag_high_spread_by_cv():
    rng = np.random.default_rng(3)
    x = 10e-6 * rng.uniform(0.4, 1.6, 400)  # CV ~ 0.35
    assert np.std(x, ddof=1) / np.mean(x) > stats.HIGH_SPREAD_CV
    assert "high_spread" in summarize(x).flags


def test_flag_high_spread_by_tail():
    # the tail criterion alone: a heavy upper tail while the CV stays under its threshold
    x = np.full(1000, 10e-6)
    x[:60] = 16e-6  # 6% at 1.6 x the median: p95 - median = 0.6 median
    cv = np.std(x, ddof=1) / np.mean(x)
    assert cv < stats.HIGH_SPREAD_CV
    assert "high_spread" in summarize(x).flags
    x[:60] = 14e-6  # 1.4 x: below the tail threshold
    assert "high_spread" not in summarize(x).flags


def test_flag_outliers_fires_above_five_percent_only():
    base = _clean(200, seed=4)
    x = base.copy()
    x[:10] = 100e-6  # exactly 5%: not above the share
    assert "outliers" not in summarize(x).flags
    x[:11] = 100e-6  # 5.5%
    assert "outliers" in summarize(x).flags
    assert "outliers" not in summarize(base).flags


def test_quantised_timer_is_not_outliers():
    # a 1 us timer: 80% read 5 us, 20% read one tick more; IQR = 0 but nothing is an outlier
    x = np.array([5e-6] * 80 + [6e-6] * 20)
    assert "outliers" not in summarize(x, timer_resolution_s=1e-6).flags
    x[:10] = 50e-6
    assert "outliers" in summarize(x, timer_resolution_s=1e-6).flags


def test_flag_near_resolution():
    x = _clean()
    assert "near_resolution" not in summarize(x, timer_resolution_s=1e-9).flags
    assert "near_resolution" in summarize(x, timer_resolution_s=1e-6).flags  # 10 ticks
    assert "near_resolution" not in summarize(x, timer_resolution_s=0.99e-7).flags


def test_flag_wide_ci():
    rng = np.random.default_rng(5)
    x = 10e-6 * rng.uniform(0.5, 1.5, 12)  # n = 12: CI from x_(3) to x_(10), wide
    s = summarize(x)
    assert (s.ci_high_s - s.ci_low_s) / 2 / s.median_s > stats.WIDE_CI_HALF_WIDTH
    assert "wide_ci" in s.flags
    assert "wide_ci" not in summarize(_clean()).flags


def test_summarize_rejects_empty_and_nonfinite():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("inf")])
