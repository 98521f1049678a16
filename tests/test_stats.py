"""ccbench.core.stats, and the per-step overhead's median, on synthetic data with known answers (plain pytest)."""

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


def _below(n: int, j: int) -> int:
    """sum_{i < j} C(n, i): 2**n P(B <= j - 1) for B ~ Binomial(n, 1/2), exact."""
    total, c = 0, 1  # c = C(n, i)
    for i in range(j):
        total += c
        c = c * (n - i) // (i + 1)
    return total


def _covers(n: int, j: int, k: int) -> bool:
    """Whether [x_(j), x_(k)] covers the median with probability >= 95%, in exact integers."""
    # the interval misses when fewer than j or at least k samples lie below the median:
    # coverage = P(j <= B <= k - 1) (Conover 1999, section 3.2); >= 0.95 <=> 20 * inside >= 19 * 2**n
    inside = _below(n, k) - _below(n, j)
    return 20 * inside >= 19 * 2 ** n


def _narrowest(n: int) -> tuple[int, int]:
    """The narrowest symmetric [x_(j), x_(n + 1 - j)] that covers the median with probability >= 95%; (1, n) if none."""
    # by symmetry the coverage is 1 - 2 P(B <= j - 1): >= 0.95 <=> 40 * sum_{i < j} C(n, i) <= 2**n
    j, below, c = 0, 0, 1  # c = C(n, j)
    while j < n // 2 and 40 * (below + c) <= 2 ** n:
        below += c
        c = c * (n - j) // (j + 1)
        j += 1
    return (j, n + 1 - j) if j else (1, n)


def test_median_ci_exact_branch_is_the_narrowest_interval_of_95_percent():
    """Up to n = 1000 the ranks are exactly the narrowest symmetric pair with coverage >= 95%."""
    for n in [*range(1, 201), 333, 500, 999, 1000]:
        j, k = _narrowest(n)
        got = median_ci(np.arange(1, n + 1, dtype=float))  # on 1..n, x_(i) = i
        assert got == (j, k), n
        if n >= 6:
            assert _covers(n, j, k) and not _covers(n, j + 1, k - 1)


@pytest.mark.parametrize("n,j,k", [
    # Le Boudec (2010, Theorem 2.1): j = floor(n/2 - 0.98 sqrt n), k = ceil(n/2 + 0.98 sqrt n) + 1, with
    # z/2 = 1.959964/2: n = 1001: 500.5 -+ 31.005 -> 469, 533; n = 2001: 1000.5 -+ 43.837 -> 956, 1046;
    # n = 10001: 5000.5 -+ 98.003 -> 4902, 5100
    (1001, 469, 533),
    (2001, 956, 1046),
    (10001, 4902, 5100),
])
def test_median_ci_normal_branch_is_le_boudec_and_covers_95_percent(n, j, k):
    """Above n = 1000: Le Boudec's ranks, with exact coverage >= 95%, at most one rank wider than the narrowest."""
    assert median_ci(np.arange(1, n + 1, dtype=float)) == (j, k)
    assert _covers(n, j, k)
    lo, hi = _narrowest(n)
    assert lo - 1 <= j <= lo and hi <= k <= hi + 1


def test_median_ci_at_the_switch():
    """n = 1000 by exact binomial sums, n = 1001 by Le Boudec's formula."""
    assert median_ci(np.arange(1, 1001, dtype=float)) == (469, 532)
    assert median_ci(np.arange(1, 1002, dtype=float)) == (469, 533)


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
        "few_samples", "high_spread", "outliers", "near_resolution", "wide_ci", "launch_spread", "imported",
        "zero_samples", "partly_cached", "compute_coarse", "async_oversubscribed"
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


def test_flag_wide_ci_is_judged_on_the_half_width():
    """n = 10: the CI is (x_(2), x_(9)); a half width of 8% of the median is not wide, 12% is."""
    x = 1e-5 * np.array([0.80, 0.92, 0.95, 0.97, 0.99, 1.01, 1.03, 1.05, 1.08, 1.20])
    s = summarize(x)
    assert (s.ci_low_s, s.median_s, s.ci_high_s) == pytest.approx((0.92e-5, 1.0e-5, 1.08e-5))
    assert "wide_ci" not in s.flags  # half width 0.08 of the median (the full width, 0.16, is over 0.10)
    x[[1, 8]] = 0.88e-5, 1.12e-5
    assert "wide_ci" in summarize(x).flags  # half width 0.12


def test_flag_outliers_uses_the_far_out_fence_at_3_iqr():
    """Q1 = 10, Q3 = 12 (us): 10% of samples at 16 are inside Q3 + 3 IQR = 18, 10% at 19 are beyond it."""
    # 100 samples, type-7 quartiles at positions 24.75 and 74.25 (0-based): x[24] = x[25] = 10 and
    # x[74] = x[75] = 12, so IQR = 2; Q3 + 1.5 IQR = 15 would count the samples at 16 too
    x = np.array([10e-6] * 50 + [12e-6] * 40 + [16e-6] * 10)
    assert np.percentile(x, [25, 75]).tolist() == [10e-6, 12e-6]
    assert "outliers" not in summarize(x).flags
    x[90:] = 19e-6
    assert "outliers" in summarize(x).flags


def test_summarize_rejects_empty_and_nonfinite():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("inf")])


# -- the per-step overhead of the hand-written algorithms is a median ----------------------

def test_step_overhead_is_the_median_over_cases_not_the_mean():
    """Cases paying 1, 2 and 9 us per step beyond the model: the estimate is their median, 2 us (the mean is 4)."""
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import estimate_step_overhead, predict

    params = NetworkParams(alpha_s=2e-6, beta_s_per_byte=1e-10, gamma_s_per_byte=1e-11, source="given")
    rows = []
    for (coll, name, P), o in ((("allreduce", "ring", 2), 1e-6), (("allreduce", "recursive_doubling", 4), 2e-6),
                               (("bcast", "binomial", 8), 9e-6)):
        alg = REGISTRY[coll][name]
        steps = alg.cost(P, 64).timing_cost.alpha
        rows.append({"collective": coll, "algorithm": name, "nranks": P, "nbytes": 64, "steps_max": steps,
                     "median_s": predict(alg, P, 64, params) + o * steps, "dtype": "float32", "op": "sum"})
    got, cases = estimate_step_overhead(rows, params)
    assert cases == 3
    assert got == pytest.approx(2e-6, rel=1e-9)


# -- boundaries and messages pinned by mutation testing (tests/mutation/run.sh) ------------

def test_as_sample_is_a_flat_float64_array():
    x = stats._as_sample([[1, 2], [3, 4]])
    assert x.dtype == np.float64
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_inputs_of_any_shape_are_flattened():
    x = _clean(20, seed=9)
    assert summarize(x.reshape(4, 5)) == summarize(x)
    assert median_ci(x.reshape(4, 5)) == median_ci(x)


def test_error_messages_name_the_argument():
    with pytest.raises(ValueError, match=r"^samples: no values$"):
        median_ci([])
    with pytest.raises(ValueError, match=r"^samples: values must be finite$"):
        percentile([1.0, float("nan")], 50)
    with pytest.raises(ValueError, match=r"^samples_s: no values$"):
        summarize([])
    with pytest.raises(ValueError, match=r"^values: no values$"):
        geometric_mean([])
    with pytest.raises(ValueError, match=r"^geometric mean needs positive values$"):
        geometric_mean([1.0, -2.0])
    with pytest.raises(ValueError, match=r"^a: no values$"):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError, match=r"^b: values must be finite$"):
        mann_whitney_u([1.0], [float("inf")])


def test_relative_standard_error_of_two_samples():
    # mean 2, sample stddev sqrt(2), standard error sqrt(2) / sqrt(2) = 1: 1 / 2
    assert relative_standard_error([1.0, 3.0]) == pytest.approx(0.5, rel=1e-15)


def test_mann_whitney_small_variance_still_gives_a_p_value():
    # n1 = 1, n2 = 2: U = 0, mu = 1, var = 2/12 * 4 = 2/3, z = (1 - 0.5) / sqrt(2/3)
    u, p = mann_whitney_u([0.0], [1.0, 2.0])
    assert u == 0.0
    assert p == pytest.approx(math.erfc(0.5 / math.sqrt(2.0 / 3.0) / math.sqrt(2.0)), rel=1e-12)
    assert p == pytest.approx(0.5403, abs=1e-4)


def test_mann_whitney_continuity_correction_below_one():
    # a = 1 3, b = 2 4: U = 1 (3 > 2), mu = 2, var = 4/12 * 5 = 5/3, z = (1 - 0.5) / sqrt(5/3)
    u, p = mann_whitney_u([1.0, 3.0], [2.0, 4.0])
    assert u == 1.0
    assert p == pytest.approx(math.erfc(0.5 / math.sqrt(5.0 / 3.0) / math.sqrt(2.0)), rel=1e-12)
    assert p == pytest.approx(0.6985, abs=1e-4)


def test_summarize_all_zero_samples_divides_zero_by_zero_as_zero():
    assert summarize([0.0] * 10).flags == ("near_resolution", "zero_samples")


def test_summarize_zero_median_with_a_spread_is_infinitely_wide():
    # sorted 0 x6, 1 us x4: median 0, CI (x_(2), x_(9)) = (0, 1 us): half width / 0 = inf
    s = summarize([0.0] * 6 + [1e-6] * 4)
    assert s.flags == ("high_spread", "near_resolution", "zero_samples", "wide_ci")


def test_summarize_single_zero_sample_is_not_high_spread():
    assert summarize([0.0]).flags == ("few_samples", "near_resolution", "zero_samples")


def test_summarize_single_sample_does_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = summarize([2e-6])
    assert math.isnan(s.stddev_s)


def test_summarize_two_samples():
    # mean 2, stddev sqrt(2) (CV 0.71); n = 2 never reaches 95%: the CI is (min, max), half width 1/2 of the median
    s = summarize([1.0, 3.0])
    assert s.stddev_s == pytest.approx(math.sqrt(2.0), rel=1e-15)
    assert (s.ci_low_s, s.ci_high_s) == (1.0, 3.0)
    assert s.flags == ("few_samples", "high_spread", "wide_ci")


def test_high_spread_cv_threshold_is_strict():
    # 3 3 4 5 5: mean 4, sum of squared deviations 4, stddev sqrt(4 / 4) = 1: CV exactly 0.25
    s = summarize([3.0, 3.0, 4.0, 5.0, 5.0])
    assert (s.mean_s, s.stddev_s) == (4.0, 1.0)
    assert s.flags == ("few_samples", "wide_ci")


def test_high_spread_tail_threshold_is_strict():
    # 940 x 2 and 60 x 3: median 2, p95 (position 949.05) = 3: p95 - median is exactly 0.5 of the median
    x = np.full(1000, 2.0)
    x[:60] = 3.0
    s = summarize(x)
    assert (s.median_s, s.p95_s) == (2.0, 3.0)
    assert "high_spread" not in s.flags


def test_outlier_fence_uses_the_25th_percentile():
    # n = 101: Q1 = x[25] = 10, Q3 = x[75] = 12, fence 18; the 26th percentile (12) would put it at 12
    x = np.array([10e-6] * 26 + [12e-6] * 50 + [13e-6] * 25)
    assert "outliers" not in summarize(x).flags


def test_outlier_fence_uses_the_75th_percentile():
    # n = 101: Q1 = Q3 = x[75] = 10, fence 10: the 25 samples at 11 are beyond it (the 76th percentile is 11)
    x = np.array([10e-6] * 76 + [11e-6] * 25)
    assert "outliers" in summarize(x).flags


def test_outlier_fence_margin_is_one_and_a_half_ticks_strictly():
    # Q1 = 1, Q3 = 2, fence 5; a tick of 2**-10 s so that every sum below is exact
    tick = 2.0**-10
    at_margin = np.array([1.0] * 26 + [2.0] * 50 + [5.0 + 1.5 * tick] * 25)
    assert "outliers" not in summarize(at_margin, timer_resolution_s=tick).flags
    two_ticks = np.array([1.0] * 26 + [2.0] * 50 + [5.0 + 2.0 * tick] * 25)
    assert "outliers" in summarize(two_ticks, timer_resolution_s=tick).flags


def test_near_resolution_threshold_is_strict():
    tick = 2.0**-10
    assert summarize([100 * tick] * 10, timer_resolution_s=tick).flags == ()


def test_wide_ci_threshold_is_strict():
    # n = 10: CI (x_(2), x_(9)) = (9, 11), median 10: half width exactly 0.1 of the median
    s = summarize([8.0, 9.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 11.0, 12.0])
    assert (s.ci_low_s, s.median_s, s.ci_high_s) == (9.0, 10.0, 11.0)
    assert "wide_ci" not in s.flags


def test_benjamini_hochberg_hand_computed():
    # sorted 0.01 0.03 0.04 0.20 (m = 4): m p / rank = 0.04 0.06 0.0533 0.20, running min from the top
    from ccbench.core.stats import benjamini_hochberg

    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.20])
    assert q.tolist() == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20], rel=1e-12)
    q2 = benjamini_hochberg(np.array([[0.01, 0.04], [0.03, 0.20]]))
    assert q2.tolist() == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20], rel=1e-12)


def test_benjamini_hochberg_edges():
    from ccbench.core.stats import benjamini_hochberg

    assert benjamini_hochberg([]).tolist() == []
    assert benjamini_hochberg([0.3]).tolist() == [0.3]
    # the bounds 0 and 1 are valid p-values: sorted 0 0.5 1 -> 0 * 3 / 1, 0.5 * 3 / 2, 1 * 3 / 3
    assert benjamini_hochberg([1.0, 0.0, 0.5]).tolist() == [1.0, 0.0, 0.75]
    for bad in ([1.5], [-0.1, 0.5], [0.5, 1.01]):
        with pytest.raises(ValueError, match=r"^p-values must lie in \[0, 1\]$"):
            benjamini_hochberg(bad)


def test_a_zero_sample_is_flagged_and_a_negative_one_refused():
    """A call shorter than one timer tick reads 0 s: kept, and the row says its median is a bound; a negative time
    cannot be measured and is refused."""
    import pytest

    from ccbench.core.stats import FLAG_DESCRIPTIONS, summarize

    s = summarize([0.0, 1e-6, 1e-6, 2e-6] * 5, timer_resolution_s=1e-6)
    assert "zero_samples" in s.flags and "zero_samples" in FLAG_DESCRIPTIONS
    assert "zero_samples" not in summarize([1e-9, 1e-6] * 10, timer_resolution_s=1e-6).flags
    with pytest.raises(ValueError, match="at least 0"):
        summarize([1e-6, -1e-9, 1e-6])
