"""ccbench.core.replication on synthetic launches with known answers (plain pytest, fixed seeds).

Simulated case: ln t_kj = mu + b_k + e_kj, launch effect b_k ~ N(0, sigma_b^2), sample noise
e_kj ~ N(0, sigma_w^2); the typical time is exp(mu).  Rates over N simulated cases are checked
against their nominal value with a binomial allowance of 3 sd, 3 sqrt(p (1 - p) / N).
"""

import ast
import inspect
import itertools
import math

import numpy as np
import pytest

from ccbench.core import replication
from ccbench.core.replication import (
    DEFAULT_PRIOR_BETWEEN_CV,
    compare_launches,
    cv_from_log_sd,
    hierarchical_bootstrap_ci,
    launches_for_budget,
    log_sd_from_cv,
    min_detectable_ratio,
    optimal_split,
    paired_compare,
    signed_rank_p,
    student_t_quantile,
    student_t_two_sided_p,
    variance_components,
    variance_of_mean,
)
from ccbench.core.stats import mann_whitney_u, median_ci

MU = math.log(1e-4)  # a 100 us collective
Z975 = 1.959963984540054


def _slack(p: float, n: int) -> float:
    """3 binomial standard deviations of a rate p over n trials."""
    return 3.0 * math.sqrt(p * (1.0 - p) / n)


def _cases(rng, n_cases: int, k: int, n: int, sigma_b: float, sigma_w: float, shift: float = 0.0):
    """n_cases simulated cases of k launches x n samples each, as lists of arrays (seconds)."""
    logs = MU + shift + rng.normal(0.0, sigma_b, (n_cases, k, 1)) + rng.normal(0.0, sigma_w, (n_cases, k, n))
    t = np.exp(logs)
    return [list(case) for case in t]


def test_replication_is_pure():
    tree = ast.parse(inspect.getsource(replication))
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mods.add(node.module.split(".")[0])
    mods.discard("mutmut")  # the mutation tester's copy of the module imports its own runtime (docs/mutation.md)
    assert mods <= {"math", "collections", "dataclasses", "statistics", "numpy", "ccbench"}
    assert all(hasattr(replication, name) for name in replication.__all__)


# -- Student's t -----------------------------------------------------------------------------------


@pytest.mark.parametrize("p,df,ref", [
    # tabled quantiles (e.g. Abramowitz & Stegun table 26.10), to 10 digits
    (0.975, 1, 12.70620474), (0.975, 2, 4.302652730), (0.975, 4, 2.776445105),
    (0.975, 10, 2.228138852), (0.995, 3, 5.840909310), (0.90, 30, 1.310415025),
])
def test_t_quantile_tabled(p, df, ref):
    assert student_t_quantile(p, df) == pytest.approx(ref, rel=1e-9)
    assert student_t_quantile(1 - p, df) == pytest.approx(-ref, rel=1e-9)


@pytest.mark.parametrize("t", [0.0, 0.1, 1.0, 3.0, 4.898979486, 50.0])
def test_t_two_sided_p_closed_forms(t):
    # nu = 1 (Cauchy): 1 - 2 atan(t) / pi; nu = 2: 1 - t / sqrt(2 + t^2);
    # nu = 4: 1 - sin(th) (1 + cos(th)^2 / 2), th = atan(t / 2) (Abramowitz & Stegun 26.7.3)
    th = math.atan(t / 2)
    assert student_t_two_sided_p(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, abs=1e-13)
    assert student_t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-13)
    assert student_t_two_sided_p(t, 4) == pytest.approx(1 - math.sin(th) * (1 + math.cos(th) ** 2 / 2), abs=1e-13)


@pytest.mark.parametrize("df", [1.5, 3.3, 7.7])
def test_t_real_df_against_integrated_density_and_inverse(df):
    x = np.linspace(0.0, 2.0, 20001)
    pdf = np.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                 - (df + 1) / 2 * np.log1p(x * x / df))
    inside = float(np.sum((pdf[1:] + pdf[:-1]) / 2 * np.diff(x)))  # P(0 < T < 2), trapezoid
    assert student_t_two_sided_p(2.0, df) == pytest.approx(1 - 2 * inside, abs=1e-8)
    for p in (0.6, 0.9, 0.975, 0.9995):
        q = student_t_quantile(p, df)
        assert student_t_two_sided_p(q, df) == pytest.approx(2 * (1 - p), rel=1e-9)


def test_log_normal_cv_round_trip():
    assert log_sd_from_cv(0.25) == pytest.approx(math.sqrt(math.log(1.0625)))
    for cv in (0.0, 0.05, 0.35, 2.0):
        assert cv_from_log_sd(log_sd_from_cv(cv)) == pytest.approx(cv, abs=1e-12)
    # the default prior: the worst measured spread of three launches, 75%, over the mean range
    # of three normals (1.693 sigma), as a log-normal CV, rounded up
    assert cv_from_log_sd(math.log(1.75) / 1.693) <= DEFAULT_PRIOR_BETWEEN_CV < 0.36


# -- 1. variance components ------------------------------------------------------------------------


def test_variance_components_hand_computed_balanced():
    # linear scale: means 2, 5; grand 3.5; MSW = (2 + 2) / 4 = 1; MSB = 3 (1.5^2 + 1.5^2) / 1 = 13.5;
    # n0 = (6 - 18/6) / 1 = 3; sigma_b^2 = (13.5 - 1) / 3 = 25/6
    vc = variance_components([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], log=False)
    assert vc.scale == "linear" and vc.n_launches == 2 and vc.n_samples == 6
    assert vc.var_within == pytest.approx(1.0)
    assert vc.var_between == pytest.approx(25 / 6) and not vc.truncated
    assert vc.grand_mean == pytest.approx(3.5) and vc.typical_s == pytest.approx(3.5)
    assert vc.icc == pytest.approx((25 / 6) / (25 / 6 + 1))
    assert vc.between_cv == pytest.approx(math.sqrt(25 / 6) / 3.5)
    assert vc.design_effect == pytest.approx(1 + 2 * vc.icc)


def test_variance_components_hand_computed_unbalanced():
    # means 2, 5; N = 5; weighted grand 19/5 = 3.8; MSW = (2 + 2) / 3; MSB = 2 * 1.8^2 + 3 * 1.2^2 = 10.8;
    # n0 = (5 - (4 + 9)/5) / 1 = 2.4; sigma_b^2 = (10.8 - 4/3) / 2.4
    vc = variance_components([[1.0, 3.0], [4.0, 5.0, 6.0]], log=False)
    assert vc.var_within == pytest.approx(4 / 3)
    assert vc.var_between == pytest.approx((10.8 - 4 / 3) / 2.4)
    assert vc.grand_mean == pytest.approx(3.5)  # mean of launch means: each launch weighs the same


def test_variance_components_balanced_is_kalibera_jones_t2():
    # T_1^2 = S_1^2 (mean within-launch variance), T_2^2 = S_2^2 - S_1^2 / n (the corrected estimator)
    rng = np.random.default_rng(3)
    launches = _cases(rng, 1, 6, 15, 0.2, 0.1)[0]
    logs = np.log(np.array(launches))
    s1 = float(np.mean(np.var(logs, axis=1, ddof=1)))
    s2 = float(np.var(logs.mean(axis=1), ddof=1))
    vc = variance_components(launches)
    assert vc.scale == "log"
    assert vc.var_within == pytest.approx(s1)
    assert vc.var_between_raw == pytest.approx(s2 - s1 / 15)
    assert vc.typical_s == pytest.approx(math.exp(logs.mean()))


@pytest.mark.parametrize("balanced", [True, False])
def test_variance_components_recover_known_sigmas(balanced):
    rng = np.random.default_rng(11 if balanced else 12)
    k, sb, sw = 200, 0.3, 0.1
    sizes = np.full(k, 20) if balanced else rng.integers(5, 61, k)
    launches = [np.exp(MU + rng.normal(0, sb) + rng.normal(0, sw, n)) for n in sizes]
    vc = variance_components(launches)
    n_tot, nbar = int(sizes.sum()), float(sizes.mean())
    # sampling sd of the moment estimators (normal theory, balanced approximation):
    # var(MSW) = 2 sw^4 / (N - K); var(sb^2) ~ 2 (sb^2 + sw^2 / n)^2 / (K - 1) + 2 sw^4 / (n^2 (N - K))
    sd_w = math.sqrt(2 * sw ** 4 / (n_tot - k))
    sd_b = math.sqrt(2 * (sb ** 2 + sw ** 2 / nbar) ** 2 / (k - 1) + 2 * sw ** 4 / (nbar ** 2 * (n_tot - k)))
    assert abs(vc.var_within - sw ** 2) < 4 * sd_w
    assert abs(vc.var_between - sb ** 2) < 4 * sd_b
    assert vc.between_cv == pytest.approx(cv_from_log_sd(sb), rel=0.15)
    assert vc.icc == pytest.approx(sb ** 2 / (sb ** 2 + sw ** 2), abs=0.05)
    assert not vc.truncated


def test_variance_components_zero_between_truncates_and_flags():
    # every launch a permutation of the same values: identical launch means, MSB = 0 < MSW
    base = np.array([1.0, 1.1, 1.3, 0.9, 1.05]) * 1e-4
    rng = np.random.default_rng(0)
    vc = variance_components([rng.permutation(base) for _ in range(4)])
    assert vc.var_between_raw < 0 and vc.truncated
    assert vc.var_between == 0.0 and vc.icc == 0.0 and vc.between_cv == 0.0
    assert vc.design_effect == 1.0
    # and in simulation with sigma_b = 0: never negative, often truncated, small when not
    truncs, ests = 0, []
    for case in _cases(np.random.default_rng(5), 200, 8, 20, 0.0, 0.1):
        v = variance_components(case)
        assert v.var_between >= 0
        truncs += v.truncated
        ests.append(v.var_between)
    assert 0.3 < truncs / 200 < 0.8  # P(F_{7,152} < 1) ~ 0.56
    assert float(np.mean(ests)) < 0.1 ** 2 / 20  # below sw^2 / n: no launch effect to speak of


def test_variance_components_single_launch_and_bad_input():
    vc = variance_components([[1.0, 2.0, 3.0]])
    assert math.isnan(vc.var_between) and not vc.truncated and vc.var_within > 0
    with pytest.raises(ValueError):
        variance_components([])
    with pytest.raises(ValueError):
        variance_components([[1.0], []])
    with pytest.raises(ValueError):
        variance_components([[1.0, -1.0]])           # log scale needs positive times
    with pytest.raises(ValueError):
        variance_components(np.array([1.0, 2.0]))  # one array, not a list of launches


# -- 2. hierarchical bootstrap interval ------------------------------------------------------------


def _coverage(cases, **kw):
    """(two-stage coverage, naive pooled within-launch coverage) of the true typical time exp(MU)."""
    true = math.exp(MU)
    hit = naive = 0
    for i, case in enumerate(cases):
        ci = hierarchical_bootstrap_ci(case, n_boot=200, seed=i, **kw)
        hit += ci.low_s <= true <= ci.high_s
        lo, hi = median_ci(np.concatenate(case))  # today's interval: all samples pooled
        naive += lo <= true <= hi
    return hit / len(cases), naive / len(cases)


@pytest.mark.parametrize("k", [3, 5])
def test_hierarchical_ci_covers_when_launches_dominate_and_naive_does_not(k):
    n_cases = 400
    cases = _cases(np.random.default_rng(100 + k), n_cases, k, 20, sigma_b=0.3, sigma_w=0.05)
    cov, naive = _coverage(cases)
    # nominal 95% +- 3 binomial sd (0.033 at 400 cases)
    assert abs(cov - 0.95) <= _slack(0.95, n_cases)
    # the whole point: the within-launch interval ignores the launch effect and under-covers badly
    assert naive < 0.5
    assert cov - naive > 0.4


def test_hierarchical_ci_without_launch_effect_is_conservative_or_nominal():
    n_cases = 200
    cases = _cases(np.random.default_rng(7), n_cases, 5, 20, sigma_b=0.0, sigma_w=0.2)
    # strategy 1 (resample within too) counts the within noise twice: errs wide, never narrow
    cov1, _ = _coverage(cases)
    assert cov1 >= 0.95 - _slack(0.95, n_cases)
    # strategy 2 (launches kept whole) is the t interval of the launch medians: nominal
    cov2, _ = _coverage(cases, resample_within=False)
    assert abs(cov2 - 0.95) <= _slack(0.95, n_cases)


@pytest.mark.parametrize("x", [[5.0], [2.0, 7.0], [3.0, 1.0, 4.0], [3.0, 1.0, 3.0, 2.0], [9.0, 1.0, 4.0, 1.0, 5.0],
                               [6.0, 2.0, 8.0, 2.0, 5.0, 1.0]])
def test_resampled_median_follows_the_exact_bootstrap_law(x):
    # the median of a resample of n values, over all n^n equally likely index tuples (ties and even n included)
    x = np.array(x)
    n = x.size
    values, counts = np.unique(np.median(x[np.array(list(itertools.product(range(n), repeat=n)))], axis=1),
                               return_counts=True)
    law = dict(zip(values.tolist(), (counts / n ** n).tolist(), strict=True))
    m = 100_000
    drawn, seen = np.unique(replication._resampled_median(x, m, np.random.default_rng(3)), return_counts=True)
    assert set(drawn.tolist()) <= set(law)
    for v, c in zip(drawn.tolist(), seen.tolist(), strict=True):   # each frequency within 6 binomial sd
        assert abs(c / m - law[v]) <= 6 * math.sqrt(law[v] * (1 - law[v]) / m) + 1e-12


def _drawn_median(a, axis=None):
    """np.median under another name: the bootstrap then draws every resample's n samples (the slow path)."""
    return np.median(a, axis=axis)


@pytest.mark.parametrize("k,n,sigma_b,sigma_w", [(3, 21, 0.3, 0.05), (5, 10, 0.1, 0.3), (4, 9, 0.0, 0.5)])
def test_hierarchical_ci_exact_median_law_keeps_the_drawn_resamples_interval(k, n, sigma_b, sigma_w):
    # the median's exact law and the n_k drawn samples give the same intervals in distribution: the same coverage
    # of the true typical time exp(MU) and the same typical width over 300 simulated cases
    n_cases = 300
    cases = _cases(np.random.default_rng(40 + k), n_cases, k, n, sigma_b, sigma_w)
    true, runs = math.exp(MU), []
    for stat in (np.median, _drawn_median):
        cis = [hierarchical_bootstrap_ci(c, stat, n_boot=200, seed=i) for i, c in enumerate(cases)]
        runs.append((np.mean([c.low_s <= true <= c.high_s for c in cis]),
                     np.median([math.log(c.high_s / c.low_s) for c in cis])))
    (cov, width), (cov_drawn, width_drawn) = runs
    assert cov >= 0.95 - _slack(0.95, n_cases) and abs(cov - cov_drawn) <= _slack(0.95, n_cases)
    assert width == pytest.approx(width_drawn, rel=0.06)


def test_hierarchical_ci_single_launch_is_within_launch_and_flagged():
    x = np.exp(MU + np.random.default_rng(1).normal(0, 0.1, 50))
    ci = hierarchical_bootstrap_ci([x])
    assert ci.launch_variation_unknown and ci.n_launches == 1
    assert (ci.low_s, ci.high_s) == median_ci(x, 0.95)
    assert ci.estimate_s == pytest.approx(float(np.median(x)))
    ci_min = hierarchical_bootstrap_ci([x], stat=np.min, n_boot=100)
    assert ci_min.launch_variation_unknown and ci_min.low_s <= ci_min.estimate_s <= ci_min.high_s
    assert not hierarchical_bootstrap_ci([x, x * 1.1], n_boot=100).launch_variation_unknown


def test_hierarchical_ci_is_deterministic_with_the_seed():
    case = _cases(np.random.default_rng(2), 1, 4, 30, 0.2, 0.1)[0]
    a = hierarchical_bootstrap_ci(case, n_boot=300, seed=9)
    b = hierarchical_bootstrap_ci(case, n_boot=300, seed=9)
    c = hierarchical_bootstrap_ci(case, n_boot=300, seed=10)
    assert a == b and a != c
    assert a.low_s < a.estimate_s < a.high_s
    assert a.estimate_s == pytest.approx(math.exp(np.mean(np.log([np.median(x) for x in case]))))


def test_hierarchical_ci_bounded_memory_blocks_give_the_same_interval(monkeypatch):
    case = _cases(np.random.default_rng(6), 1, 3, 101, 0.2, 0.1)[0]
    whole = hierarchical_bootstrap_ci(case, np.mean, n_boot=300)   # the mean's resamples are drawn in blocks
    monkeypatch.setattr(replication, "_BLOCK_VALUES", 1000)  # ~10 resamples per block
    assert hierarchical_bootstrap_ci(case, np.mean, n_boot=300) == whole
    kept = hierarchical_bootstrap_ci(case, np.mean, n_boot=300, resample_within=False)
    assert kept.method.startswith("launch bootstrap") and kept.estimate_s == whole.estimate_s


# -- 3. comparing separate launches ----------------------------------------------------------------


@pytest.mark.parametrize("k", [3, 5])
def test_compare_launches_a_a_false_verdicts_within_level(k):
    n_pairs, level = 400, 0.05
    rng = np.random.default_rng(200 + k)
    aa = _cases(rng, n_pairs, k, 30, sigma_b=0.3, sigma_w=0.1)
    bb = _cases(rng, n_pairs, k, 30, sigma_b=0.3, sigma_w=0.1)
    false = pooled_false = 0
    for a, b in zip(aa, bb, strict=True):
        c = compare_launches(a, b, level=level)
        assert c.method == "welch" and c.verdict in ("faster", "slower", "noise")
        false += c.verdict != "noise"
        pooled_false += mann_whitney_u(np.concatenate(a), np.concatenate(b))[1] < level
    assert false / n_pairs <= level + _slack(level, n_pairs)
    # today's test on pooled samples calls most identical configurations different
    assert pooled_false / n_pairs > 0.5


def test_compare_launches_single_launch_is_undetermined_in_a_a():
    n_pairs, level = 400, 0.05
    rng = np.random.default_rng(300)
    aa = _cases(rng, n_pairs, 1, 30, sigma_b=0.3, sigma_w=0.1)
    bb = _cases(rng, n_pairs, 1, 30, sigma_b=0.3, sigma_w=0.1)
    verdicts = [compare_launches(a, b, level=level).verdict for a, b in zip(aa, bb, strict=True)]
    false = sum(v in ("faster", "slower") for v in verdicts)
    assert "noise" not in verdicts  # one launch a side never claims "no difference" either
    assert false / n_pairs <= level + _slack(level, n_pairs)
    assert verdicts.count("undetermined") / n_pairs >= 0.9


def test_compare_launches_single_launch_ignores_within_launch_significance():
    # one launch each, 30% apart, every sample tight: the pooled test is overwhelming, the launch is one
    x = np.exp(MU + np.random.default_rng(4).normal(0, 0.01, 200))
    a, b = [x], [x * 1.3]
    assert mann_whitney_u(a[0], b[0])[1] < 1e-10
    c = compare_launches(a, b, prior_between_cv=0.25)
    assert c.verdict == "undetermined" and c.method == "prior" and c.resolvable_ratio > 1.3
    # constant samples (no within-launch term): 1.959964 sqrt(2) sqrt(ln 1.0625) = 0.682476 -> 1.978772
    const = compare_launches([np.full(20, 1.0)], [np.full(20, 1.5)], prior_between_cv=0.25)
    assert const.resolvable_ratio == pytest.approx(1.978772, rel=1e-6)
    assert const.ratio == pytest.approx(1.5) and const.verdict == "undetermined"
    # a difference beyond what the prior makes plausible is told apart
    big = compare_launches([np.full(20, 1.0)], [np.full(20, 2.5)], prior_between_cv=0.25)
    assert big.verdict == "slower" and big.ratio_low > 1.0
    # the other side's observed spread, when larger than the prior, is used instead
    wide = compare_launches([np.full(5, 1.0)], [np.full(5, 2.5), np.full(5, 0.8)], prior_between_cv=0.25)
    assert wide.verdict == "undetermined"


def test_compare_launches_welch_hand_computed():
    # per-launch ln medians a: 0, 0.1, -0.1; b: 0.3, 0.5, 0.4. d = 0.4; se^2 = 0.01/3 + 0.01/3; nu = 4;
    # t = 0.4 / 0.0816497 = 4.898979 -> p = 0.0080499 (A&S 26.7.3); half-width 2.776445 * 0.0816497
    a = [np.full(3, math.exp(v)) for v in (0.0, 0.1, -0.1)]
    b = [np.full(3, math.exp(v)) for v in (0.3, 0.5, 0.4)]
    c = compare_launches(a, b)
    assert c.ratio == pytest.approx(math.exp(0.4))
    assert c.df == pytest.approx(4.0)
    assert c.p_value == pytest.approx(0.0080499, rel=1e-4)
    assert c.ratio_low == pytest.approx(math.exp(0.4 - 0.2266958), rel=1e-6)
    assert c.ratio_high == pytest.approx(math.exp(0.4 + 0.2266958), rel=1e-6)
    assert c.verdict == "slower"
    assert compare_launches(b, a).verdict == "faster"
    # interval [1.19, 1.87] is not inside +-50%: still slower; inside +-100%: noise
    assert compare_launches(a, b, min_effect=0.5).verdict == "slower"
    assert compare_launches(a, b, min_effect=1.0).verdict == "noise"


def test_compare_launches_min_effect_turns_tiny_significant_differences_into_noise():
    a = [np.full(5, v) for v in (1.000, 1.002, 0.998, 1.001)]
    b = [v * 1.02 for v in a]
    assert compare_launches(a, b).verdict == "slower"
    assert compare_launches(a, b, min_effect=0.05).verdict == "noise"


def test_compare_launches_degenerate_and_unequal_k():
    same = [np.full(4, 2.0), np.full(4, 2.0)]
    c = compare_launches(same, same)
    assert c.p_value == 1.0 and c.verdict == "noise" and c.ratio == 1.0
    c = compare_launches([np.full(4, 1.0), np.full(4, 1.0)], [np.full(4, 2.0)] * 5)
    assert c.verdict == "slower" and c.p_value == 0.0
    with pytest.raises(ValueError):
        compare_launches([[1.0]], [[1.0]], level=1.5)
    with pytest.raises(ValueError):
        compare_launches([[1.0]], [[1.0]], min_effect=-0.1)


# -- 4. paired launches -----------------------------------------------------------------------------


def _paired(rng, n_cases, k, n, ratio, sigma_shared, sigma_own, sigma_w):
    """Two algorithms in the same k launches: a shared launch effect, a modest own effect each."""
    shared = rng.normal(0, sigma_shared, (n_cases, k, 1))
    a = np.exp(MU + shared + rng.normal(0, sigma_own, (n_cases, k, 1)) + rng.normal(0, sigma_w, (n_cases, k, n)))
    b = np.exp(MU + math.log(ratio) + shared + rng.normal(0, sigma_own, (n_cases, k, 1))
               + rng.normal(0, sigma_w, (n_cases, k, n)))
    return [(list(x), list(y)) for x, y in zip(a, b, strict=True)]


def test_paired_compare_finds_a_20_percent_difference_at_k5():
    n_cases = 400
    pairs = _paired(np.random.default_rng(400), n_cases, 5, 50, 1.2, sigma_shared=0.3, sigma_own=0.05, sigma_w=0.1)
    paired_hits = sum(paired_compare(a, b).verdict == "slower" for a, b in pairs)
    unpaired_hits = sum(compare_launches(a, b).verdict == "slower" for a, b in pairs)
    assert paired_hits / n_cases >= 0.80
    # the shared launch effect (30%) drowns a 20% difference when the pairing is ignored
    assert unpaired_hits / n_cases < 0.3


def test_paired_compare_a_a_false_verdicts_within_level():
    n_cases, level = 400, 0.05
    pairs = _paired(np.random.default_rng(401), n_cases, 5, 50, 1.0, sigma_shared=0.3, sigma_own=0.05, sigma_w=0.1)
    false = sum(paired_compare(a, b, level=level).verdict != "noise" for a, b in pairs)
    assert false / n_cases <= level + _slack(level, n_cases)


def test_paired_compare_hand_computed_and_edges():
    # ln ratios 0.1, 0.2, 0.3: mean 0.2, sd 0.1, se 0.1/sqrt 3, t = 3.4641 on 2 df: p = 1 - t / sqrt(2 + t^2)
    a = [np.full(3, 1.0)] * 3
    b = [np.full(3, math.exp(v)) for v in (0.1, 0.2, 0.3)]
    c = paired_compare(a, b)
    t = 0.2 / (0.1 / math.sqrt(3))
    assert c.method == "paired-t" and c.df == 2.0
    assert c.p_value == pytest.approx(1 - t / math.sqrt(2 + t * t))
    assert c.ratio == pytest.approx(math.exp(0.2))
    assert c.ratio_low == pytest.approx(math.exp(0.2 - 4.302652730 * 0.1 / math.sqrt(3)))
    assert c.p_signed_rank == pytest.approx(0.25)  # 2 / 2^3
    one = paired_compare([np.full(3, 1.0)], [np.full(3, 9.0)])
    assert one.verdict == "undetermined" and math.isnan(one.p_value)
    with pytest.raises(ValueError):
        paired_compare(a, b[:2])


def test_signed_rank_exact():
    assert signed_rank_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)     # the smallest p at K = 5
    # W+ = 13 of 15: P(W+ >= 13) = #{subsets of 1..5 summing to <= 2} / 32 = 3/32
    assert signed_rank_p([1, -2, 3, 4, 5]) == pytest.approx(6 / 32)
    assert signed_rank_p([-1, -2, -3, -4, -5, -6]) == pytest.approx(2 / 64)
    assert signed_rank_p([1, 1, -1]) == 1.0                          # ties by mid-ranks
    assert signed_rank_p([0, 0]) == 1.0


# -- 5./6. planning ---------------------------------------------------------------------------------


def test_optimal_split_hand_computed_and_minimal():
    # sqrt(c_launch s_w^2 / (c_sample s_b^2)) = sqrt(2.0 * 0.04 / (0.001 * 0.01)) = sqrt(8000)
    n_opt = optimal_split(0.04, 0.01, 2.0, 0.001)
    assert n_opt == pytest.approx(89.4427191)
    # at a fixed budget B, K = B / (c_l + n c_s): the variance of the mean is smallest at n_opt
    budget = 600.0
    ns = np.arange(1, 2000)
    var = [variance_of_mean(0.04, 0.01, budget / (2.0 + n * 0.001), n) for n in ns]
    assert abs(ns[int(np.argmin(var))] - n_opt) <= 1
    assert optimal_split(0.04, 0.0, 2.0, 0.001) == math.inf
    assert optimal_split(0.0, 0.01, 2.0, 0.001) == 0.0


def test_launches_for_budget_and_variance_of_mean():
    assert launches_for_budget(60.0, 100, 2.0, 0.01) == 20       # 60 / (2 + 1)
    assert launches_for_budget(59.99, 100, 2.0, 0.01) == 19
    assert launches_for_budget(1.0, 100, 2.0, 0.01) == 0
    assert variance_of_mean(0.04, 0.01, 5, 100) == pytest.approx(0.01 / 5 + 0.04 / 500)
    with pytest.raises(ValueError):
        launches_for_budget(10.0, 0, 1.0, 0.1)


def test_min_detectable_ratio_hand_computed():
    # sigma = sqrt(ln 1.0625) = 0.2462207; (1.959964 + 0.841621) * 0.2462207 * sqrt(2/5) = 0.436270
    assert min_detectable_ratio(0.25, 5) == pytest.approx(1.546931, rel=1e-6)
    # one launch each, level 0.05, power 0.5: the prior branch's resolvable ratio at that CV
    assert min_detectable_ratio(0.25, 1, power=0.5) == pytest.approx(1.978772, rel=1e-6)
    assert min_detectable_ratio(0.25, 20) < min_detectable_ratio(0.25, 5) < min_detectable_ratio(0.5, 5)


def test_min_detectable_ratio_has_its_power_in_simulation():
    # a z test of two K-launch means of log-normal launch effects at exactly that ratio: power ~ 0.8
    rng = np.random.default_rng(500)
    cv, k, n_sim = 0.3, 5, 4000
    sigma = log_sd_from_cv(cv)
    d = math.log(min_detectable_ratio(cv, k))
    a = rng.normal(0, sigma, (n_sim, k)).mean(axis=1)
    b = rng.normal(d, sigma, (n_sim, k)).mean(axis=1)
    power = float(np.mean(np.abs(b - a) / (sigma * math.sqrt(2 / k)) > Z975))
    assert abs(power - 0.8) <= _slack(0.8, n_sim)


# -- known answers at the edges (each test names the rule it pins) ---------------------------------


def _q_t4(p: float) -> float:
    """The p-quantile of t with 4 df in closed form: alpha = 4p(1-p), q = cos(acos(sqrt alpha) / 3) / sqrt alpha,
    t = sign(p - 1/2) 2 sqrt(q - 1) (Hill, Comm. ACM 13(10), 1970, algorithm 396, the exact cases)."""
    a = 4 * p * (1 - p)
    q = math.cos(math.acos(math.sqrt(a)) / 3) / math.sqrt(a)
    return math.copysign(2 * math.sqrt(q - 1), p - 0.5)


@pytest.mark.parametrize("p", [0.51, 0.6, 0.75, 0.9, 0.975, 0.995, 0.9999])
def test_t_quantile_exact_closed_forms(p):
    # nu = 1 (Cauchy): tan(pi (p - 1/2)); nu = 2: (2p - 1) / sqrt(2 p (1 - p)); nu = 4: _q_t4
    assert student_t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-11)
    assert student_t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-11)
    assert student_t_quantile(p, 4) == pytest.approx(_q_t4(p), rel=1e-11)


def test_t_median_is_zero_and_the_normal_limit():
    assert student_t_quantile(0.5, 3) == 0.0 and student_t_quantile(0.5, 1) == 0.0
    # infinitely many (or more than 1e7) degrees of freedom: the standard normal
    for df in (math.inf, 1e9):
        assert student_t_quantile(0.975, df) == pytest.approx(Z975, rel=1e-12)
        assert student_t_two_sided_p(Z975, df) == pytest.approx(0.05, rel=1e-12)
        assert student_t_two_sided_p(-1.0, df) == pytest.approx(0.31731050786291415, rel=1e-12)
    # 1e5 df, t near 0: the tail is the normal one to phi(t) (t^3 + t) / (2 nu) ~ 2e-9 (A&S 26.7.8)
    assert student_t_two_sided_p(0.001, 1e5) == pytest.approx(math.erfc(0.001 / math.sqrt(2.0)), rel=1e-7)


def test_t_tail_at_and_beyond_infinity():
    assert student_t_two_sided_p(math.inf, 3) == 0.0 and student_t_two_sided_p(-math.inf, 3) == 0.0
    assert math.isnan(student_t_two_sided_p(math.nan, 3))
    # t^2 overflows to inf, df / (df + t^2) = 0: the tail ~ t^-3 is 0 in floating point
    assert student_t_two_sided_p(1e200, 3) == 0.0
    assert student_t_two_sided_p(0.0, 3) == 1.0


@pytest.mark.parametrize("t", [0.0, 0.5, 2.0, 7.0])
def test_t_density_closed_forms(t):
    # nu = 1: 1 / (pi (1 + t^2)); nu = 2: (2 + t^2)^(-3/2); nu = 4: 3/8 (1 + t^2 / 4)^(-5/2)
    assert replication._t_pdf(t, 1) == pytest.approx(1 / (math.pi * (1 + t * t)), rel=1e-13)
    assert replication._t_pdf(t, 2) == pytest.approx((2 + t * t) ** -1.5, rel=1e-13)
    assert replication._t_pdf(t, 4) == pytest.approx(0.375 * (1 + t * t / 4) ** -2.5, rel=1e-13)


_BAD_INPUT = [
    (lambda: student_t_quantile(0.9, 0), "degrees of freedom must be > 0, got 0"),
    (lambda: student_t_two_sided_p(1.0, 0), "degrees of freedom must be > 0, got 0"),
    (lambda: student_t_quantile(1.0, 3), r"^p must be in \(0, 1\), got 1.0"),
    (lambda: student_t_quantile(0.0, 3), r"^p must be in \(0, 1\), got 0.0"),
    (lambda: log_sd_from_cv(-0.1), "a CV must be finite and >= 0, got -0.1"),
    (lambda: log_sd_from_cv(math.inf), "a CV must be finite"),
    (lambda: cv_from_log_sd(-0.1), "a sigma must be finite and >= 0, got -0.1"),
    (lambda: cv_from_log_sd(math.inf), "a sigma must be finite"),
    (lambda: variance_components(np.array([1.0, 2.0])), "^launches: a list of 1-D arrays, one per launch"),
    (lambda: variance_components([]), "^launches: no launches"),
    (lambda: variance_components([[1.0], []]), "^launches: launch 1 has no samples"),
    (lambda: variance_components([[1.0, math.nan]]), "^launches: launch 0 has non-finite samples"),
    (lambda: variance_components([[1.0], [1.0, 0.0]]), r"^launches: launch 1 has times <= 0 \(the log scale"),
    (lambda: compare_launches([[1.0], []], [[1.0]]), "^a: launch 1 has no samples"),
    (lambda: compare_launches([[1.0]], [[1.0, -1.0]]), "^b: launch 0 has times <= 0"),
    (lambda: paired_compare([[0.0]], [[1.0]]), "^a: launch 0 has times <= 0"),
    (lambda: paired_compare([[1.0]], [[math.inf]]), "^b: launch 0 has non-finite"),
    (lambda: paired_compare([[1.0]] * 3, [[1.0]] * 2), "^paired launches: a has 3 launches, b has 2"),
    (lambda: compare_launches([[1.0]], [[1.0]], level=0.0), r"^level must be in \(0, 1\), got 0.0"),
    (lambda: paired_compare([[1.0]], [[1.0]], level=1.0), r"^level must be in \(0, 1\), got 1.0"),
    (lambda: compare_launches([[1.0]], [[1.0]], min_effect=math.inf), "^min_effect must be finite and >= 0"),
    (lambda: hierarchical_bootstrap_ci([[1.0]], level=1.0), r"^level must be in \(0, 1\)"),
    (lambda: hierarchical_bootstrap_ci([[1.0]], n_boot=9), "^n_boot must be >= 10, got 9"),
    (lambda: variance_of_mean(0.04, 0.01, 0, 100), "^launches and samples_per_launch must be >= 1"),
    (lambda: variance_of_mean(0.04, 0.01, 5, 0.5), "^launches and samples_per_launch must be >= 1"),
    (lambda: optimal_split(-0.1, 0.01, 1.0, 0.001), "^variances must be >= 0"),
    (lambda: optimal_split(0.04, -0.1, 1.0, 0.001), "^variances must be >= 0"),
    (lambda: optimal_split(0.04, 0.01, -1.0, 0.001), "^cost_launch_s must be >= 0 and cost_sample_s > 0"),
    (lambda: optimal_split(0.04, 0.01, 1.0, 0.0), "^cost_launch_s must be >= 0 and cost_sample_s > 0"),
    (lambda: launches_for_budget(-1.0, 10, 1.0, 0.1), "^budget_s, cost_launch_s, cost_sample_s must be >= 0"),
    (lambda: launches_for_budget(10.0, 10, 1.0, -0.1), "^budget_s, cost_launch_s, cost_sample_s must be >= 0"),
    (lambda: launches_for_budget(10.0, 10, -1.0, 0.1), "^budget_s, cost_launch_s, cost_sample_s must be >= 0"),
    (lambda: launches_for_budget(10.0, 10, 0.0, 0.0), "^a launch must cost some time"),
    (lambda: min_detectable_ratio(0.25, 5, level=1.5), r"^level must be in \(0, 1\)"),
    (lambda: min_detectable_ratio(0.25, 5, power=0.0), r"^power must be in \(0, 1\)"),
    (lambda: min_detectable_ratio(0.25, 0), "^K must be >= 1, got 0"),
]


@pytest.mark.parametrize("call, message", _BAD_INPUT, ids=[f"bad{i}" for i in range(len(_BAD_INPUT))])
def test_bad_input_is_one_line_naming_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_launch_of_any_shape_is_its_samples_flattened():
    x = np.exp(MU + np.random.default_rng(8).normal(0, 0.1, 60))
    y = x * 1.2
    flat = hierarchical_bootstrap_ci([x, y], n_boot=100)
    assert hierarchical_bootstrap_ci([x.reshape(6, 10), y.reshape(3, 20)], n_boot=100) == flat


def test_variance_components_launches_of_one_sample():
    # linear: means 1, 3; grand 2; no within-launch spread to measure (N = K): MSW nan;
    # MSB = (1 + 1) / 1 = 2, n0 = (2 - 2/2) / 1 = 1: sigma_b^2 = 2, taken whole (nothing to subtract)
    vc = variance_components([[1.0], [3.0]], log=False)
    assert math.isnan(vc.var_within) and math.isnan(vc.within_cv)
    assert vc.var_between == pytest.approx(2.0) and vc.var_between_raw == pytest.approx(2.0) and not vc.truncated
    assert vc.between_cv == pytest.approx(math.sqrt(2.0) / 2.0)
    assert math.isnan(vc.icc) and math.isnan(vc.design_effect)
    # log: ln means 0, 2: sigma_b^2 = 2, CV sqrt(e^2 - 1)
    vl = variance_components([[1.0], [math.exp(2.0)]])
    assert vl.var_between == pytest.approx(2.0) and vl.between_cv == pytest.approx(math.sqrt(math.e ** 2 - 1))
    assert math.isnan(vl.var_within) and math.isnan(vl.within_cv) and math.isnan(vl.icc)


def test_variance_components_exactly_zero_between_is_not_truncated():
    # means 10, 15; grand 12.5; MSW = (9 + 9 + 16 + 16) / 2 = 25; MSB = 2 (2.5^2 + 2.5^2) / 1 = 25: raw 0 exactly
    vc = variance_components([[7.0, 13.0], [11.0, 19.0]], log=False)
    assert vc.var_between_raw == 0.0 and vc.var_between == 0.0 and not vc.truncated
    assert vc.icc == 0.0 and vc.design_effect == 1.0
    assert vc.within_cv == pytest.approx(5.0 / 12.5) and vc.between_cv == 0.0
    # identical launches of identical samples: both components 0, the ICC 0 / 0 undefined
    same = variance_components([[2.0, 2.0], [2.0, 2.0]])
    assert same.var_within == 0.0 and same.var_between == 0.0 and not same.truncated
    assert math.isnan(same.icc) and math.isnan(same.design_effect)


def test_variance_components_linear_scale_takes_any_sign_and_a_zero_mean():
    # means -1, 1; grand 0; MSW = 4 / 2 = 2; MSB = 2 + 2 = 4; n0 = 2: sigma_b^2 = (4 - 2) / 2 = 1;
    # a CV needs a mean != 0
    vc = variance_components([[-2.0, 0.0], [0.0, 2.0]], log=False)
    assert vc.var_within == pytest.approx(2.0) and vc.var_between == pytest.approx(1.0)
    assert vc.grand_mean == 0.0 and math.isnan(vc.between_cv) and math.isnan(vc.within_cv)
    # grand mean exactly 1: MSW = 4 * 0.25 / 2 = 0.5, MSB = 0 (raw -0.25, truncated): CVs sqrt(0.5) / 1 and 0
    one = variance_components([[0.5, 1.5], [0.5, 1.5]], log=False)
    assert one.within_cv == pytest.approx(math.sqrt(0.5)) and one.between_cv == 0.0 and one.truncated


def test_variance_components_cvs_on_both_scales():
    # linear: the hand-computed balanced case, MSW = 1 around a grand mean 3.5
    assert variance_components([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], log=False).within_cv == pytest.approx(1 / 3.5)
    # log: ln values 0, 0.2 | 1, 1.2: MSW = 0.04 / 2 = 0.02; MSB = 2 (0.5^2 + 0.5^2) = 1, n0 = 2: sigma_b^2 = 0.49
    vc = variance_components([np.exp([0.0, 0.2]), np.exp([1.0, 1.2])])
    assert vc.var_within == pytest.approx(0.02) and vc.var_between == pytest.approx(0.49)
    assert vc.within_cv == pytest.approx(math.sqrt(math.expm1(0.02)))   # 0.142122
    assert vc.between_cv == pytest.approx(math.sqrt(math.expm1(0.49)))  # 0.794072


def test_one_launch_percentile_bootstrap_reaches_every_sample():
    # min of 10 draws from {1, 2 x 9}: P(min = 1) = 1 - 0.9^10 = 0.65, P(min = 2) = 0.35: both
    # the 2.5% and the 97.5% points are attained values, 1 and 2
    x = np.array([1.0] + [2.0] * 9)
    ci = hierarchical_bootstrap_ci([x], stat=np.min, level=0.95)
    assert (ci.estimate_s, ci.low_s, ci.high_s) == (1.0, 1.0, 2.0)
    assert ci.level == 0.95 and ci.n_launches == 1 and ci.launch_variation_unknown is True
    assert ci.method == "within-launch percentile bootstrap (one launch)"


def test_one_launch_percentile_bootstrap_of_the_mean_is_the_normal_interval():
    # 401 evenly spaced samples: the bootstrap mean is normal (CLT) with sd = the plug-in sd / sqrt(n);
    # its 2.5% and 97.5% points lie 1.96 such sd from the mean (40000 replicates: +-0.015 sd noise)
    x = 1.0 + 0.001 * (np.arange(401) - 200)
    se = float(np.std(x)) / math.sqrt(x.size)
    ci = hierarchical_bootstrap_ci([x], stat=np.mean, n_boot=40000, seed=1)
    assert ci.estimate_s == pytest.approx(1.0)
    assert (ci.estimate_s - ci.low_s) / se == pytest.approx(Z975, abs=0.06)
    assert (ci.high_s - ci.estimate_s) / se == pytest.approx(Z975, abs=0.06)


def test_one_launch_median_interval_follows_the_level():
    x = np.exp(MU + np.random.default_rng(9).normal(0, 0.1, 50))
    ci = hierarchical_bootstrap_ci([x], level=0.8)
    assert (ci.low_s, ci.high_s) == median_ci(x, 0.8) != median_ci(x, 0.95)
    assert ci.level == 0.8 and ci.method == "within-launch order statistics (one launch)"


def test_launches_kept_whole_give_the_t_interval_of_the_launch_log_medians():
    # 30 one-sample launches at ln t = 0.01 (i - 14.5): s = 0.0880341; the expanded percentile interval
    # of strategy 2 is the t interval exp(+-t_{29, 0.975} s / sqrt 30) = exp(+-0.0328725) up to resampling noise
    launches = [np.full(1, math.exp(0.01 * (i - 14.5))) for i in range(30)]
    ci = hierarchical_bootstrap_ci(launches, n_boot=40000, resample_within=False)
    assert ci.estimate_s == pytest.approx(1.0)
    assert -math.log(ci.low_s) == pytest.approx(0.0328725, rel=0.04)
    assert math.log(ci.high_s) == pytest.approx(0.0328725, rel=0.04)
    assert ci.level == 0.95 and ci.n_launches == 30 and ci.launch_variation_unknown is False
    assert ci.method == "launch bootstrap (launches kept whole), expanded percentile"
    assert hierarchical_bootstrap_ci(launches, n_boot=100).method == "two-stage bootstrap, expanded percentile"


def test_identical_launches_give_a_zero_width_interval_whatever_each_replicate_draws():
    # 1000 equal launches, 10 replicates: with this seed some launch is never drawn and another
    # drawn once; every replicate's mean is still the common ln time
    launches = [np.full(1, 1e-4)] * 1000
    for seed in (52, 141):
        ci = hierarchical_bootstrap_ci(launches, n_boot=10, seed=seed, resample_within=False)
        assert ci.estimate_s == pytest.approx(1e-4, rel=1e-12)
        assert ci.low_s == pytest.approx(1e-4, rel=1e-12) and ci.high_s == pytest.approx(1e-4, rel=1e-12)


def test_hierarchical_ci_defaults_are_2000_replicates_from_seed_0():
    case = _cases(np.random.default_rng(12), 1, 3, 20, 0.2, 0.1)[0]
    assert hierarchical_bootstrap_ci(case) == hierarchical_bootstrap_ci(case, np.median, 0.95, 2000, 0)
    assert hierarchical_bootstrap_ci(case) != hierarchical_bootstrap_ci(case, n_boot=2001)
    assert hierarchical_bootstrap_ci(case, n_boot=10).n_launches == 3   # 10 replicates is the least allowed


def test_welch_unequal_launch_counts_and_spreads_hand_computed():
    # ln medians a: -c, 0, c (c^2 = 0.06: s_a^2 = 0.06); b: 0.4 + (-2e, -e, 0, e, 2e) (e^2 = 0.02: s_b^2 = 0.05)
    # va = 0.06 / 3 = 0.02, vb = 0.05 / 5 = 0.01, se^2 = 0.03; Welch nu = 0.03^2 / (0.02^2 / 2 + 0.01^2 / 4) = 4
    # (the pooled df would be 6); t = 0.4 / sqrt(0.03) = 2.309401 -> p = 0.0820863 (A&S 26.7.3, nu = 4);
    # half-width t_{4, 0.975} sqrt(0.03) = 2.776445 * 0.173205 = 0.4808944
    c, e = math.sqrt(0.06), math.sqrt(0.02)
    a = [np.full(3, math.exp(v)) for v in (-c, 0.0, c)]
    b = [np.full(2, math.exp(0.4 + v)) for v in (-2 * e, -e, 0.0, e, 2 * e)]
    r = compare_launches(a, b)
    assert r.method == "welch" and r.n_launches_a == 3 and r.n_launches_b == 5
    assert r.df == pytest.approx(4.0)
    assert r.ratio == pytest.approx(math.exp(0.4))
    assert r.p_value == pytest.approx(0.0820862798, rel=1e-8)
    assert r.ratio_low == pytest.approx(math.exp(0.4 - 0.4808944), rel=1e-6)
    assert r.ratio_high == pytest.approx(math.exp(0.4 + 0.4808944), rel=1e-6)
    assert r.resolvable_ratio == pytest.approx(math.exp(0.4808944), rel=1e-6)
    assert r.verdict == "noise" and r.p_signed_rank is None


def test_significance_is_strictly_below_the_level():
    a = [np.full(3, math.exp(v)) for v in (0.0, 0.1, -0.1)]
    b = [np.full(3, math.exp(v)) for v in (0.3, 0.5, 0.4)]
    p = compare_launches(a, b).p_value
    assert compare_launches(a, b, level=p).verdict == "noise"
    assert compare_launches(a, b, level=p * 1.001).verdict == "slower"
    bp = [np.full(3, math.exp(v)) for v in (0.1, 0.2, 0.3)]
    pp = paired_compare([np.full(3, 1.0)] * 3, bp).p_value
    assert paired_compare([np.full(3, 1.0)] * 3, bp, level=pp).verdict == "noise"
    assert paired_compare([np.full(3, 1.0)] * 3, bp, level=pp * 1.001).verdict == "slower"


def test_faster_needs_the_whole_interval_below_the_band():
    # b against a reversed: ln interval [-0.627, -0.173]; +-50% (ln 1.5 = 0.405): not inside, faster;
    # +-100% (ln 2 = 0.693): inside, noise
    a = [np.full(3, math.exp(v)) for v in (0.0, 0.1, -0.1)]
    b = [np.full(3, math.exp(v)) for v in (0.3, 0.5, 0.4)]
    assert compare_launches(b, a, min_effect=0.5).verdict == "faster"
    assert compare_launches(b, a, min_effect=1.0).verdict == "noise"


def test_verdict_band_is_inclusive():
    band = math.log1p(0.5)
    assert replication._verdict(0.0, band, band, True, 0.5, "x") == "noise"          # exactly +-band
    assert replication._verdict(0.1, band + 0.1, band - 0.1, True, 0.5, "x") == "noise"
    assert replication._verdict(0.1, band, band, True, 0.5, "x") == "slower"          # upper end beyond the band
    assert replication._verdict(0.1, band, band, False, 0.5, "undetermined") == "undetermined"


def test_welch_with_no_spread_is_a_zero_width_interval():
    same = [np.full(4, 2.0), np.full(4, 2.0)]
    c = compare_launches(same, same)
    assert c.df == 2.0 and (c.ratio_low, c.ratio_high, c.resolvable_ratio) == (1.0, 1.0, 1.0)
    d = compare_launches([np.full(4, 1.0), np.full(4, 1.0)], [np.full(4, 2.0)] * 5)
    assert d.df == 5.0 and d.ratio_low == pytest.approx(2.0) and d.ratio_high == pytest.approx(2.0)


def _ln_spaced(shift: float) -> np.ndarray:
    """11 samples at ln t = shift + 0.00, 0.01, ..., 0.10: median e^(shift + 0.05), 95% median CI
    [x_(2), x_(10)] (binomial, n = 11: P(B <= 1) = 12/2048), ln width 0.08."""
    return np.exp(shift + 0.01 * np.arange(11))


def test_prior_branch_hand_computed_with_within_launch_noise():
    # a: 2 launches, ln medians 0.05, 0.45 (s^2 = 0.08 > ln 1.0625 = 0.0606 of the prior 0.25: taken);
    # b: 1 launch, ln median 0.35. d = 0.35 - 0.25 = 0.1.
    # within each launch: var ln median = (0.08 / (2 * 1.959964))^2 = 4.165084e-4 = w;
    # var_w = 2 w / 2^2 + w / 1^2 = 1.5 w; var(d) = 0.08 (1/2 + 1/1) + 1.5 w = 0.1206248, sd 0.3473108;
    # half 1.959964 sd = 0.6807166; p = 2 (1 - Phi(0.1 / sd)) = 0.7734029
    a = [_ln_spaced(0.0), _ln_spaced(0.4)]
    b = [_ln_spaced(0.3)]
    for x, y, d in ((a, b, 0.1), (b, a, -0.1)):
        r = compare_launches(x, y, prior_between_cv=0.25)
        assert r.method == "prior" and r.df == math.inf
        assert r.ratio == pytest.approx(math.exp(d))
        assert r.resolvable_ratio == pytest.approx(math.exp(0.6807165772), rel=1e-9)
        assert r.ratio_low == pytest.approx(math.exp(d - 0.6807165772), rel=1e-9)
        assert r.ratio_high == pytest.approx(math.exp(d + 0.6807165772), rel=1e-9)
        assert r.p_value == pytest.approx(0.7734029374, rel=1e-9)
        assert r.verdict == "undetermined"
    r = compare_launches(a, b, prior_between_cv=0.25)
    assert (r.n_launches_a, r.n_launches_b) == (2, 1)


def test_prior_branch_without_any_spread():
    # prior CV 0, constant samples: var(d) = 0; equal medians: p = 1, not significant; different: p = 0
    eq = compare_launches([np.full(5, 1.0)], [np.full(5, 1.0)], prior_between_cv=0.0)
    assert eq.p_value == 1.0 and eq.verdict == "undetermined" and eq.resolvable_ratio == 1.0
    ne = compare_launches([np.full(5, 1.0)], [np.full(5, 2.0)], prior_between_cv=0.0)
    assert ne.p_value == 0.0 and ne.verdict == "slower"
    assert ne.ratio_low == pytest.approx(2.0) and ne.ratio_high == pytest.approx(2.0)


def test_prior_branch_p_value_is_the_two_sided_normal_tail():
    # constant samples, prior 0.25: sd(d) = sqrt(2 ln 1.0625) = 0.3482086; ln 2.5 / sd = 2.631442 -> p = 0.00850234
    big = compare_launches([np.full(20, 1.0)], [np.full(20, 2.5)], prior_between_cv=0.25)
    assert big.p_value == pytest.approx(0.00850234198, rel=1e-8)
    assert big.n_launches_a == 1 and big.n_launches_b == 1


def test_paired_two_launches_hand_computed():
    # ln ratios 0.1, 0.3: mean 0.2, sd 0.1414214, se 0.1, t = 2 on 1 df: p = 1 - 2 atan(2) / pi = 0.2951672;
    # half-width t_{1, 0.975} 0.1 = 1.2706205; signed rank: both positive, p = 2 / 2^2
    c = paired_compare([np.full(3, 1.0)] * 2, [np.full(3, math.exp(v)) for v in (0.1, 0.3)])
    assert c.method == "paired-t" and c.df == 1.0 and (c.n_launches_a, c.n_launches_b) == (2, 2)
    assert c.p_value == pytest.approx(1 - 2 * math.atan(2.0) / math.pi)
    assert c.ratio_low == pytest.approx(math.exp(0.2 - 1.2706204736))
    assert c.ratio_high == pytest.approx(math.exp(0.2 + 1.2706204736))
    assert c.resolvable_ratio == pytest.approx(math.exp(1.2706204736))
    assert c.p_signed_rank == pytest.approx(0.5) and c.verdict == "noise"


def test_paired_one_launch_reports_only_the_ratio():
    one = paired_compare([np.full(3, 1.0)], [np.full(3, 9.0)])
    assert one.ratio == pytest.approx(9.0)
    assert all(math.isnan(v) for v in (one.ratio_low, one.ratio_high, one.p_value, one.df, one.resolvable_ratio))
    assert (one.verdict, one.n_launches_a, one.n_launches_b, one.method) == ("undetermined", 1, 1, "too few launches")
    assert one.p_signed_rank is None


def test_signed_rank_exact_by_enumeration():
    # ranks 1..5, rank 3 negative: W- = 3; subsets of 1..5 summing to <= 3: {}, 1, 2, 3, {1,2} -> 2 * 5/32
    assert signed_rank_p([1, 2, -3, 4, 5]) == pytest.approx(10 / 32)
    # ranks 1..4, W+ = 1 + 2 = 3: subsets of 1..4 summing to <= 3: 5 of 16 -> 10/16
    assert signed_rank_p([1, 2, -3, -4]) == pytest.approx(10 / 16)
    # ties: |d| 1, 1, 2, 3, 4, 5 -> mid-ranks 1.5, 1.5, 3, 4, 5, 6; W+ = 4 (the 3); subsets with a rank sum
    # <= 4: {}, 1.5, 1.5, 3, 4, {1.5, 1.5} -> 6 of 64 (a sum of 4.5, 1.5 + 3, is not <= 4) -> 12/64
    assert signed_rank_p([-1, -1, -2, 3, -4, -5]) == pytest.approx(12 / 64)
    # the two one-sided tails overlap at the observed W+: 2 * 3/4 is capped at 1
    assert signed_rank_p([1, -1]) == 1.0


def test_planning_edges():
    assert variance_of_mean(0.04, 0.01, 1, 100) == pytest.approx(0.01 + 0.04 / 100)
    assert variance_of_mean(0.04, 0.01, 5, 1) == pytest.approx(0.01 / 5 + 0.04 / 5)
    assert optimal_split(0.04, 0.01, 0.0, 0.001) == 0.0        # starting a launch is free: one sample each
    assert optimal_split(0.04, 0.01, 0.5, 0.001) == pytest.approx(math.sqrt(2000.0))
    assert launches_for_budget(0.0, 100, 2.0, 0.01) == 0
    assert launches_for_budget(0.5, 1, 0.0, 0.1) == 5               # no fixed cost: 0.5 / 0.1
    assert launches_for_budget(10.0, 10, 0.5, 0.01) == 16           # 10 / 0.6 = 16.7
    assert launches_for_budget(10.0, 10, 0.5, 0.0) == 20            # samples free: 10 / 0.5


@pytest.mark.parametrize("block, size, per_call", [
    (10, 8, [1] * 12),      # 10 // 8 = 1 resample of 8 values per block (2 would hold 16 > 10)
    (20, 8, [2] * 6),       # 20 // 8 = 2 per block: 12 replicates in 6 blocks
    (20, 25, [1] * 12),     # a resample larger than the bound still goes alone, never in pairs
    (50, 8, [6, 6]),        # 50 // 8 = 6 per block
])
def test_resamples_are_drawn_in_blocks_of_at_most_the_bound(monkeypatch, block, size, per_call):
    # the one-launch percentile bootstrap of a non-median statistic draws its 12 resamples in blocks
    # of floor(bound / n) rows (at least one), so that no block holds more values than the bound allows
    monkeypatch.setattr(replication, "_BLOCK_VALUES", block)
    rows = []

    def smallest(a, axis=None):
        if a.ndim == 2:     # a block of resamples (the estimate's own call gets the 1-D launch)
            rows.append(a.shape[0])
            assert a.shape[1] == size
        return np.min(a, axis=axis)

    x = np.arange(1.0, size + 1.0)
    ci = hierarchical_bootstrap_ci([x], stat=smallest, n_boot=12)
    assert rows == per_call
    assert ci.estimate_s == 1.0


def test_t_at_exactly_1e7_degrees_of_freedom_is_still_student_s():
    # the normal shortcut is for MORE than 1e7 df; at 1e7 the quantile is Student's, above z by the
    # first Cornish-Fisher term (z^3 + z) / (4 nu) = 2.3723e-7 (A&S 26.7.5; the next term is ~3e-14)
    excess = (Z975 ** 3 + Z975) / (4 * 1e7)
    assert student_t_quantile(0.975, 1e7) - Z975 == pytest.approx(excess, rel=0.01)
    assert student_t_quantile(0.975, 1e7 * (1 + 1e-15)) == pytest.approx(Z975, rel=1e-15)


def test_t_median_needs_positive_degrees_of_freedom():
    # p = 0.5 is 0 for every df > 0, but df = 0 is refused before that shortcut, as for every other p
    for p in (0.5, 0.975):
        with pytest.raises(ValueError, match=r"^degrees of freedom must be > 0, got 0$"):
            student_t_quantile(p, 0)
