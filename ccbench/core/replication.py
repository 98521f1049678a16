"""Launch-level replication: variance components, intervals and comparisons with the launch as the unit.

A case is measured as K launches x n_k samples (a list of 1-D arrays of times in seconds, one
per launch).  Samples of one launch share its process placement, memory layout and library
state, so they are not independent replicates of the case: the launch is (Kalibera & Jones,
"Rigorous benchmarking in reasonable time", ISMM 2013; Hunold & Carpen-Amarie, "Reproducible
MPI benchmarking is still not as easy as you think", IEEE TPDS 2016; Georges, Buytaert &
Eeckhout, "Statistically rigorous Java performance evaluation", OOPSLA 2007; Hoefler & Belli, SC15).
Testing the pooled samples of one launch per run against another's calls launch-to-launch
differences "significant" (pseudo-replication); here every interval and test works on one
summary per launch, and uses within-launch samples only for that summary's own uncertainty.

Times are analysed on the log scale by default: a launch effect scales every sample of the
launch (a slow placement makes each call x% slower), so effects are multiplicative; on the
log scale they are additive, the spread is scale-free (a CV), and ratios of typical times are
differences (Limpert, Stahel & Abbt, "Log-normal distributions across the sciences",
BioScience 51(5), 2001; Fleming & Wallace, CACM 1986, for geometric means of ratios).

numpy and the standard library only (no MPI, no scipy): Student's t distribution is computed
here from the regularised incomplete beta function.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ccbench.core.stats import median_ci

__all__ = [
    "DEFAULT_PRIOR_BETWEEN_CV",
    "MAX_LAUNCHES",
    "RESOLVE_RATIO",
    "USELESS_WIDTH",
    "LaunchComparison",
    "TypicalTimeCI",
    "VarianceComponents",
    "compare_launches",
    "cv_from_log_sd",
    "hierarchical_bootstrap_ci",
    "launches_for_budget",
    "launches_needed",
    "log_sd_from_cv",
    "min_detectable_ratio",
    "optimal_split",
    "paired_compare",
    "signed_rank_p",
    "student_t_quantile",
    "student_t_two_sided_p",
    "variance_components",
    "variance_of_mean",
]

#: Between-launch CV assumed when a side of a comparison has a single launch and no earlier
#: measurement is given.  Three identical launches on real machines spread by 15-75%
#: (max / min - 1).  The expected range of three normal draws is 1.693 sigma (Tippett 1925;
#: the d2 constant of control charts), so the worst spread, ln(1.75) = 0.560, means a log-scale
#: sigma_b of 0.33, a CV of 0.34 (``cv_from_log_sd``); rounded up to 0.35 to be conservative.
DEFAULT_PRIOR_BETWEEN_CV = 0.35

#: The most launches one replicated run (or one side of a tuning file's verification) may take.
MAX_LAUNCHES = 1000

_VERDICTS = ("faster", "slower", "noise", "undetermined")


# --------------------------------------------------------------------------- input


def _as_launches(launches, what: str = "launches", positive: bool = True) -> list[np.ndarray]:
    """A list of 1-D float64 arrays, refusing no launches, empty launches, non-finite or non-positive times."""
    if isinstance(launches, np.ndarray) and launches.ndim == 1:
        raise ValueError(f"{what}: a list of 1-D arrays, one per launch (got one 1-D array)")
    out = []
    for i, x in enumerate(launches):
        a = np.asarray(x, dtype=np.float64).reshape(-1)
        if a.size == 0:
            raise ValueError(f"{what}: launch {i} has no samples")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{what}: launch {i} has non-finite samples")
        if positive and np.any(a <= 0):
            raise ValueError(f"{what}: launch {i} has times <= 0 (the log scale needs positive times)")
        out.append(a)
    if not out:
        raise ValueError(f"{what}: no launches")
    return out


def _check_level(level: float, what: str) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"{what} must be in (0, 1), got {level}")


def log_sd_from_cv(cv: float) -> float:
    """Log-scale sigma of a log-normal with coefficient of variation `cv`: sqrt(ln(1 + cv^2)) (Limpert et al. 2001)."""
    if cv < 0 or not math.isfinite(cv):
        raise ValueError(f"a CV must be finite and >= 0, got {cv}")
    return math.sqrt(math.log1p(cv * cv))


def cv_from_log_sd(sigma: float) -> float:
    """Coefficient of variation of a log-normal with log-scale sigma: sqrt(exp(sigma^2) - 1) (Limpert et al. 2001)."""
    if sigma < 0 or not math.isfinite(sigma):
        raise ValueError(f"a sigma must be finite and >= 0, got {sigma}")
    return math.sqrt(math.expm1(sigma * sigma))


# --------------------------------------------------------------------------- Student's t, no scipy

_FPMIN = 1e-300
_EPS = 1e-15


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function, modified Lentz (Numerical Recipes 3rd ed., sec. 6.4)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
        c = 1.0 + aa / c
        c = c if abs(c) > _FPMIN else _FPMIN
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _FPMIN else _FPMIN)
        c = 1.0 + aa / c
        c = c if abs(c) > _FPMIN else _FPMIN
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) (Numerical Recipes 3rd ed., sec. 6.4; DLMF 8.17.22)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


_NORMAL_DF = 1e7  # above this many degrees of freedom t is normal to ~1e-7


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` (real) degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2) (DLMF 8.17.5)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    if df > _NORMAL_DF:
        return math.erfc(abs(t) / math.sqrt(2.0))
    return min(1.0, _betainc(df / 2.0, 0.5, df / (df + t * t)))


def _t_pdf(t: float, df: float) -> float:
    """Density of Student's t."""
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(t * t / df))


def student_t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` (real) degrees of freedom: safeguarded Newton on the CDF.

    Started from the Cornish-Fisher expansion (Abramowitz & Stegun 26.7.5), kept inside a
    bisection bracket; the CDF is ``student_t_two_sided_p`` (relative accuracy ~1e-12).
    """
    _check_level(p, "p")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    z = NormalDist().inv_cdf(p)
    if df > _NORMAL_DF:
        return z
    target = 2.0 * (1.0 - p)  # two-sided tail beyond the quantile
    lo, hi = 0.0, max(2.0 * z, 1.0)
    while student_t_two_sided_p(hi, df) > target:
        lo, hi = hi, 2.0 * hi
    t = z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)
    if not lo < t < hi:
        t = 0.5 * (lo + hi)
    for _ in range(200):
        f = student_t_two_sided_p(t, df) - target   # decreasing in t
        if f > 0:
            lo = t
        else:
            hi = t
        if abs(f) <= 1e-13 * target or hi - lo <= 1e-14 * max(1.0, t):
            break
        step = t + f / (2.0 * _t_pdf(t, df))      # d(tail)/dt = -2 pdf
        t = step if lo < step < hi else 0.5 * (lo + hi)
    return t


# --------------------------------------------------------------------------- 1. variance components


@dataclass(frozen=True)
class VarianceComponents:
    """Within- and between-launch variance components of one case (one-way random effects, moments).

    On the log scale (``scale == "log"``) the variances are of ln(time / 1 s) and the CVs are
    those of a log-normal; on the linear scale variances are in s^2 and CVs are sigma / mean.
    """

    n_launches: int
    n_samples: int
    scale: str               # "log" or "linear"
    var_within: float        # sigma_w^2: the mean square within launches (nan when no launch has 2 samples)
    var_between: float       # sigma_b^2, truncated at 0 (nan with one launch)
    var_between_raw: float   # the moment estimate before truncation (may be < 0)
    truncated: bool          # var_between_raw < 0 was set to 0: no launch effect is visible
    grand_mean: float        # mean of the launch means, each launch weighted equally (on `scale`)
    typical_s: float         # exp(grand_mean) on the log scale (a geometric mean), grand_mean on the linear
    between_cv: float        # CV of the launch effect
    within_cv: float         # CV of the samples of one launch
    icc: float               # intraclass correlation sigma_b^2 / (sigma_b^2 + sigma_w^2)
    design_effect: float     # Kish's 1 + (mean n_k - 1) ICC: how much pooled samples overstate the information


def variance_components(launches, *, log: bool = True) -> VarianceComponents:
    """sigma_w^2, sigma_b^2 of K launches by one-way random-effects ANOVA (method of moments), unbalanced n_k.

    With N samples in K launches, launch means m_k and grand mean m (weighted by n_k):
    MSW = sum_k sum_j (y_kj - m_k)^2 / (N - K), MSB = sum_k n_k (m_k - m)^2 / (K - 1),
    n0 = (N - sum_k n_k^2 / N) / (K - 1), sigma_w^2 = MSW, sigma_b^2 = (MSB - MSW) / n0
    (Searle, Casella & McCulloch, "Variance Components", Wiley 1992, ch. 3, the ANOVA
    estimators of the unbalanced 1-way classification).  For equal n_k this is Kalibera &
    Jones's T_2^2 = S_2^2 - S_1^2 / n (ISMM 2013, sec. 9.2 as corrected by the authors).  A
    negative sigma_b^2 is truncated at 0 and flagged (Searle et al. 1992, ch. 3).  ICC =
    sigma_b^2 / (sigma_b^2 + sigma_w^2); design effect 1 + (n - 1) ICC (Kish, Survey Sampling, 1965).

    `log` (default True): work on ln(time), because launch effects are multiplicative (module
    docstring); CVs are then sqrt(exp(sigma^2) - 1).  With `log=False`, times in seconds and CV =
    sigma / grand mean.
    """
    xs = _as_launches(launches, positive=log)
    ys = [np.log(x) for x in xs] if log else xs
    k = len(ys)
    n_k = np.array([y.size for y in ys], dtype=np.float64)
    n = float(n_k.sum())
    means = np.array([float(np.mean(y)) for y in ys])
    grand_weighted = float(np.sum(n_k * means) / n)
    ssw = float(sum(np.sum((y - m) ** 2) for y, m in zip(ys, means, strict=True)))
    msw = ssw / (n - k) if n > k else math.nan
    if k >= 2:
        msb = float(np.sum(n_k * (means - grand_weighted) ** 2)) / (k - 1)
        n0 = (n - float(np.sum(n_k ** 2)) / n) / (k - 1)
        raw = (msb - (msw if math.isfinite(msw) else 0.0)) / n0
    else:
        raw = math.nan
    truncated = bool(raw < 0)
    var_b = 0.0 if truncated else raw
    grand = float(np.mean(means))
    if log:
        typical = math.exp(grand)
        b_cv = cv_from_log_sd(math.sqrt(var_b)) if math.isfinite(var_b) else math.nan
        w_cv = cv_from_log_sd(math.sqrt(msw)) if math.isfinite(msw) else math.nan
    else:
        typical = grand
        b_cv = math.sqrt(var_b) / grand if math.isfinite(var_b) and grand != 0 else math.nan
        w_cv = math.sqrt(msw) / grand if math.isfinite(msw) and grand != 0 else math.nan
    total = var_b + msw
    icc = var_b / total if math.isfinite(total) and total > 0 else math.nan
    deff = 1.0 + (n / k - 1.0) * icc if math.isfinite(icc) else math.nan
    return VarianceComponents(
        n_launches=k, n_samples=int(n), scale="log" if log else "linear",
        var_within=msw, var_between=var_b, var_between_raw=raw, truncated=truncated,
        grand_mean=grand, typical_s=typical, between_cv=b_cv, within_cv=w_cv, icc=icc, design_effect=deff,
    )


# --------------------------------------------------------------------------- 2. interval of the typical time


@dataclass(frozen=True)
class TypicalTimeCI:
    """An interval for a case's typical time, in seconds, and how it was obtained."""

    estimate_s: float        # geometric mean over launches of the per-launch statistic
    low_s: float
    high_s: float
    level: float             # confidence level, e.g. 0.95
    n_launches: int
    launch_variation_unknown: bool   # True with one launch: the interval is within-launch only
    method: str


def _per_launch_stat(xs: Sequence[np.ndarray], stat: Callable) -> np.ndarray:
    """stat(x) of each launch."""
    return np.array([float(stat(x)) for x in xs])


_BLOCK_VALUES = 1 << 22  # resampled values held at once (32 MiB of float64)


def _resampled_median(x: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of m with-replacement resamples of x, each drawn from its exact bootstrap distribution in O(1).

    A resample of x's n values is x_(ceil(n U_i)) for n iid uniforms U_i (x sorted), so its r-th
    order statistic is x_(ceil(n U_(r))), with U_(r) ~ Beta(r, n - r + 1); given U_(r), the next
    one is U_(r) + (1 - U_(r)) B, B ~ Beta(1, n - r) the least of the other n - r uniforms (David
    & Nagaraja, "Order Statistics", 3rd ed. 2003, ch. 2).  The median is the ((n + 1) / 2)-th for
    odd n, the mean of the (n / 2)-th and the next for even n (np.median's rule).  This is the
    exact bootstrap distribution of a sample median (Efron, Ann. Statist. 7(1), 1979, sec. 3;
    Maritz & Jarrett, JASA 73, 1978): the same law as drawing the n indices, at O(1) a resample.
    """
    xs, n = np.sort(x), x.size
    r = (n + 1) // 2
    u = rng.beta(r, n - r + 1, size=m)
    low = xs[np.clip(np.ceil(n * u).astype(np.int64), 1, n) - 1]
    if n % 2:
        return low
    u = u + (1.0 - u) * rng.beta(1, n - r, size=m)
    return (low + xs[np.clip(np.ceil(n * u).astype(np.int64), 1, n) - 1]) / 2


def _resampled_stat(x: np.ndarray, m: int, stat: Callable, rng: np.random.Generator) -> np.ndarray:
    """stat of m with-replacement resamples of x: the median from its exact law, else drawn in bounded blocks."""
    if stat is np.median:
        return _resampled_median(x, m, rng)
    rows = max(1, _BLOCK_VALUES // x.size)
    return np.concatenate([stat(x[rng.integers(0, x.size, size=(min(rows, m - i), x.size))], axis=1)
                           for i in range(0, m, rows)])


def hierarchical_bootstrap_ci(launches, stat: Callable = np.median, level: float = 0.95, n_boot: int = 2000,
                              seed: int = 0, *, resample_within: bool = True) -> TypicalTimeCI:
    """Interval for the typical time by the two-stage bootstrap: resample launches, then samples within each.

    The typical time is the geometric mean over launches of stat(launch) (each launch weighs
    the same: it is the unit of replication).  Each replicate draws K launches with
    replacement and, inside each drawn launch, n_k samples with replacement (Davison &
    Hinkley, "Bootstrap Methods and their Application", 1997, sec. 3.8, strategy 1; Kalibera
    & Jones, ISMM 2013, and their reference implementation); `resample_within=False` keeps the
    drawn launches whole (Davison & Hinkley's strategy 2).  The percentile interval of ln(typical)
    is then widened around the estimate by sqrt(K / (K - 1)) t_{K-1} / z: the bootstrap's
    plug-in variance is (K - 1) / K of the unbiased one and a K-launch mean is t- rather than
    normal-distributed, so a plain percentile interval under-covers badly for few launches
    (Hesterberg, "What teachers should know about the bootstrap", Am. Stat. 69(4), 2015: the
    "expanded percentile interval"; scaling the deviations, unlike Hesterberg's shifted alpha,
    is not limited by the few distinct resamples of K launches).  Strategy 1 counts the
    within-launch noise twice, so the interval errs wide when launches agree.  A resampled
    launch's median is drawn from its exact bootstrap law (``_resampled_median``), not from n_k
    drawn samples: the same interval in distribution, at O(1) instead of O(n_k) per replicate.

    `stat` is a numpy reducer taking ``axis`` (np.median, np.mean, np.min, ...).  Deterministic for
    a given `seed`.  With one launch the launch-to-launch variation is unknown: the interval is
    the within-launch one (distribution-free order statistics for the median,
    ``ccbench.core.stats.median_ci``; else a percentile bootstrap) and
    ``launch_variation_unknown`` is True.
    """
    _check_level(level, "level")
    if n_boot < 10:
        raise ValueError(f"n_boot must be >= 10, got {n_boot}")
    xs = _as_launches(launches)
    k = len(xs)
    rng = np.random.default_rng(seed)
    alpha = 1.0 - level
    if k == 1:
        x = xs[0]
        est = float(stat(x))
        if stat is np.median:
            lo, hi = median_ci(x, level)
            method = "within-launch order statistics (one launch)"
        else:
            boot = _resampled_stat(x, n_boot, stat, rng)
            lo, hi = (float(v) for v in np.quantile(boot, [alpha / 2, 1 - alpha / 2]))
            method = "within-launch percentile bootstrap (one launch)"
        return TypicalTimeCI(est, float(lo), float(hi), level, 1, True, method)

    log_stats = np.log(_per_launch_stat(xs, stat))
    est = float(np.mean(log_stats))
    pick = rng.integers(0, k, size=(n_boot, k))
    per = np.empty((n_boot, k))
    for i, x in enumerate(xs):
        where = pick == i
        m = int(np.count_nonzero(where))
        if m == 0:
            continue
        if resample_within:
            per[where] = np.log(_resampled_stat(x, m, stat, rng))
        else:
            per[where] = log_stats[i]
    boot = per.mean(axis=1)
    q_lo, q_hi = (float(v) for v in np.quantile(boot, [alpha / 2, 1 - alpha / 2]))
    z = NormalDist().inv_cdf(1 - alpha / 2)
    widen = math.sqrt(k / (k - 1)) * student_t_quantile(1 - alpha / 2, k - 1) / z
    lo = est - widen * (est - q_lo)
    hi = est + widen * (q_hi - est)
    method = "two-stage bootstrap" if resample_within else "launch bootstrap (launches kept whole)"
    return TypicalTimeCI(math.exp(est), math.exp(lo), math.exp(hi), level, k, False, method + ", expanded percentile")


# --------------------------------------------------------------------------- 3./4. comparisons


@dataclass(frozen=True)
class LaunchComparison:
    """b against a at the launch level: ratio b / a of typical times, its interval, a p-value and a verdict."""

    ratio: float             # geometric: exp(mean ln stat(b launches) - mean ln stat(a launches)); > 1: b slower
    ratio_low: float         # interval of the ratio at confidence 1 - level (nan when undetermined for lack of data)
    ratio_high: float
    p_value: float           # two-sided, for "no difference"
    verdict: str             # "faster" / "slower" (b against a), "noise" or "undetermined"
    n_launches_a: int
    n_launches_b: int
    df: float                # degrees of freedom of the t test (inf: normal, with the prior's sigma_b)
    resolvable_ratio: float  # the smallest ratio (> 1) this comparison could tell from 1 at `level`
    method: str              # "welch", "prior", "paired-t", "too few launches"
    p_signed_rank: float | None = None   # paired only: exact Wilcoxon signed-rank p of the per-launch log-ratios


def _verdict(d: float, half_lo: float, half_hi: float, significant: bool, min_effect: float, undecided: str) -> str:
    """faster/slower when significant and the interval leaves the +-min_effect band, else noise or `undecided`."""
    if not significant:
        return undecided
    band = math.log1p(min_effect)
    if -band <= d - half_lo and d + half_hi <= band:
        return "noise"
    return "slower" if d > 0 else "faster"


def _t_result(d: float, se: float, df: float, level: float) -> tuple[float, float, float]:
    """(p, half-width, critical value) of a t statistic d / se; se = 0 gives p = 0 (d != 0) or 1."""
    crit = student_t_quantile(1 - level / 2, df)
    if se > 0:
        return student_t_two_sided_p(d / se, df), crit * se, crit
    return (1.0 if d == 0 else 0.0), 0.0, crit


def _within_log_var(x: np.ndarray) -> float:
    """Squared standard error of ln(median) of one launch, from its 95% order-statistics CI (stats.median_ci)."""
    lo, hi = median_ci(x, 0.95)
    return ((math.log(hi) - math.log(lo)) / (2 * NormalDist().inv_cdf(0.975))) ** 2


def _check_common(level: float, min_effect: float) -> None:
    _check_level(level, "level")
    if min_effect < 0 or not math.isfinite(min_effect):
        raise ValueError(f"min_effect must be finite and >= 0, got {min_effect}")


def compare_launches(a, b, level: float = 0.05, min_effect: float = 0.0, *, stat: Callable = np.median,
                     prior_between_cv: float | None = None) -> LaunchComparison:
    """Two cases measured in separate launches: Welch's t on the per-launch log-statistics (launch = unit).

    Each launch is summarised by ln(stat(launch)) (default the median); the ratio b / a is
    exp of the difference of the two means of these (a ratio of geometric means).  With at
    least 2 launches on each side: Welch's t test and interval, d +- t_{nu, 1-level/2} se with
    se^2 = s_a^2 / K_a + s_b^2 / K_b and nu = se^4 / (s_a^4 / (K_a^2 (K_a-1)) + s_b^4 /
    (K_b^2 (K_b-1))) (Welch, Biometrika 34, 1947; Satterthwaite 1946).  Why Welch rather than a
    bootstrap over launches: with 3-5 launches a side a bootstrap has few distinct resamples and
    under-covers (plug-in variance, normal quantiles), so its false-verdict rate exceeds
    `level`; the per-launch log-medians are close to normal (a median of many samples, a
    multiplicative launch effect), where Welch's test holds its level without assuming equal
    spreads on both sides (false-verdict rates on simulated A/A data: tests/test_replication.py).

    Fewer than 2 launches on a side: the between-launch spread cannot be estimated from the
    data, so sigma_b is taken from `prior_between_cv` (a CV measured earlier on the same
    machine; default ``DEFAULT_PRIOR_BETWEEN_CV``) or the spread seen on a side with >= 2 launches,
    whichever is larger; var(d) = sigma_b^2 (1/K_a + 1/K_b) plus the within-launch variance of
    each ln(median) (from its order-statistics CI); a normal test.  Its verdict is
    "undetermined" (not "noise") unless |ln ratio| exceeds z_{1-level/2} sd(d):
    ``resolvable_ratio`` is that smallest ratio.

    Verdict: "slower" / "faster" (b against a) when significant at `level`, unless the whole
    interval lies within +-min_effect (ln(1 + min_effect) on the log scale): then "noise"; not
    significant: "noise" (>= 2 launches a side) or "undetermined" (fewer).
    """
    _check_common(level, min_effect)
    xa, xb = _as_launches(a, "a"), _as_launches(b, "b")
    la, lb = np.log(_per_launch_stat(xa, stat)), np.log(_per_launch_stat(xb, stat))
    ka, kb = la.size, lb.size
    d = float(np.mean(lb) - np.mean(la))
    if ka >= 2 and kb >= 2:
        va, vb = float(np.var(la, ddof=1)) / ka, float(np.var(lb, ddof=1)) / kb
        se2 = va + vb
        df = se2 * se2 / (va * va / (ka - 1) + vb * vb / (kb - 1)) if se2 > 0 else float(ka + kb - 2)
        p, half, crit = _t_result(d, math.sqrt(se2), df, level)
        verdict = _verdict(d, half, half, p < level, min_effect, "noise")
        return LaunchComparison(math.exp(d), math.exp(d - half), math.exp(d + half), p, verdict, ka, kb, df,
                                math.exp(half), "welch")
    prior = DEFAULT_PRIOR_BETWEEN_CV if prior_between_cv is None else prior_between_cv
    var_b = log_sd_from_cv(prior) ** 2
    for side in (la, lb):
        if side.size >= 2:
            var_b = max(var_b, float(np.var(side, ddof=1)))
    var_w = sum(_within_log_var(x) for x in xa) / ka ** 2 + sum(_within_log_var(x) for x in xb) / kb ** 2
    sd = math.sqrt(var_b * (1 / ka + 1 / kb) + var_w)
    z = NormalDist().inv_cdf(1 - level / 2)
    half = z * sd
    p = math.erfc(abs(d) / sd / math.sqrt(2.0)) if sd > 0 else (1.0 if d == 0 else 0.0)
    verdict = _verdict(d, half, half, abs(d) > half, min_effect, "undetermined")
    return LaunchComparison(math.exp(d), math.exp(d - half), math.exp(d + half), p, verdict, ka, kb, math.inf,
                            math.exp(half), "prior")


#: An interval of a ratio wider than this factor end to end (high / low) says nothing a reader can use: it
#: cannot tell a 3x speed-up from a 3x slow-down.  Such intervals are shown as the launches they need.
USELESS_WIDTH = 10.0

#: What `launches_needed` aims at: an interval that tells a 2x difference from none (half-width ln 2).
RESOLVE_RATIO = 2.0


def launches_needed(c: LaunchComparison, level: float, *, ratio: float = RESOLVE_RATIO) -> int | None:
    """Launches a side that would make `c`'s interval (at confidence 1 - `level`) tell `ratio` from 1.

    The per-launch log spread is read back from `c` (its half-width at the test's level,
    ``resolvable_ratio``, over the critical value, over sqrt(1/K_a + 1/K_b)); with K launches a
    side the half-width is crit_K s sqrt(2 / K), crit_K Student's t with 2K - 2 degrees of
    freedom (Welch's with equal spreads and sizes) or the normal quantile (a single launch a
    side, the prior's spread).  None when `c` is not tested or K would pass ``MAX_LAUNCHES``.
    A sample-size rule for a two-sample t interval (Cochran, Sampling Techniques, 1977, sec. 4.4).
    """
    if c.method not in ("welch", "prior") or not math.isfinite(c.resolvable_ratio) or c.resolvable_ratio <= 1:
        return None
    ka, kb = c.n_launches_a, c.n_launches_b
    crit_now = (student_t_quantile(1 - level / 2, c.df) if math.isfinite(c.df)
                else NormalDist().inv_cdf(1 - level / 2))
    # resolvable_ratio is at the level the comparison was made at; read its half-width at that level
    s = math.log(c.resolvable_ratio) / crit_now / math.sqrt(1 / ka + 1 / kb)
    target = math.log(ratio)
    for k in range(2, MAX_LAUNCHES + 1):
        crit = student_t_quantile(1 - level / 2, 2 * k - 2) if c.method == "welch" else NormalDist().inv_cdf(
            1 - level / 2)
        if crit * s * math.sqrt(2 / k) <= target:
            return k
    return None


def signed_rank_p(d) -> float:
    """Exact two-sided Wilcoxon signed-rank p-value of differences `d` (zeros dropped, ties by mid-ranks).

    Under the null each |d_i|'s sign is + or - with probability 1/2 independently, so the
    distribution of W+ (the sum of the ranks of the positive d_i) is the convolution of K
    two-point laws, computed exactly on doubled (integer) mid-ranks (Wilcoxon 1945; Conover,
    Practical Nonparametric Statistics, 3rd ed. 1999, sec. 5.7).  The smallest attainable
    p is 2^(1-K): at K <= 5 launches it cannot fall below 0.05.
    """
    x = np.asarray(d, dtype=np.float64).reshape(-1)
    x = x[x != 0]
    k = x.size
    if k == 0:
        return 1.0
    _, inverse, counts = np.unique(np.abs(x), return_inverse=True, return_counts=True)
    before = np.cumsum(counts) - counts
    ranks2 = (2 * before + counts + 1)[inverse].astype(np.int64)   # doubled mid-ranks, integers
    w2 = int(ranks2[x > 0].sum())
    total = int(ranks2.sum())
    probs = np.zeros(total + 1)
    probs[0] = 1.0
    for r in ranks2:
        shifted = np.zeros_like(probs)
        shifted[r:] = probs[:-r]
        probs = 0.5 * (probs + shifted)
    low = float(probs[: w2 + 1].sum())
    high = float(probs[w2:].sum())
    return min(1.0, 2.0 * min(low, high))


def paired_compare(a, b, level: float = 0.05, min_effect: float = 0.0, *,
                   stat: Callable = np.median) -> LaunchComparison:
    """Two cases measured in the SAME launches (launch i of a with launch i of b): paired t on per-launch log-ratios.

    d_i = ln stat(b_i) - ln stat(a_i) removes the launch effect the two share (placement, memory
    layout, library state); the test is the one-sample t test of the d_i, d-bar +- t_{K-1}
    s_d / sqrt(K) (Student 1908; e.g. Montgomery, Design and Analysis of Experiments, sec. 2.5.1),
    which decides the verdict; the exact Wilcoxon signed-rank p of the d_i is reported beside it
    (``signed_rank_p``) as a check that needs no normality, but at K <= 5 it can never reach 0.05.
    One launch: "undetermined" (the spread of the d_i is unknown).  Verdict as ``compare_launches``.
    """
    _check_common(level, min_effect)
    xa, xb = _as_launches(a, "a"), _as_launches(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"paired launches: a has {len(xa)} launches, b has {len(xb)}")
    diffs = np.log(_per_launch_stat(xb, stat)) - np.log(_per_launch_stat(xa, stat))
    k = diffs.size
    d = float(np.mean(diffs))
    if k < 2:
        return LaunchComparison(math.exp(d), math.nan, math.nan, math.nan, "undetermined", 1, 1, math.nan,
                                math.nan, "too few launches", None)
    se = float(np.std(diffs, ddof=1)) / math.sqrt(k)
    p, half, _ = _t_result(d, se, k - 1, level)
    verdict = _verdict(d, half, half, p < level, min_effect, "noise")
    return LaunchComparison(math.exp(d), math.exp(d - half), math.exp(d + half), p, verdict, k, k, float(k - 1),
                            math.exp(half), "paired-t", signed_rank_p(diffs))


# --------------------------------------------------------------------------- 5./6. planning


def variance_of_mean(var_within: float, var_between: float, launches: int, samples_per_launch: float) -> float:
    """Variance of a K-launch x n-sample mean: sigma_b^2 / K + sigma_w^2 / (K n) (Cochran 1977, sec. 10.2).

    Cochran, Sampling Techniques, 3rd ed. 1977, ch. 10 (two-stage sampling, infinite populations).
    """
    if launches < 1 or samples_per_launch < 1:
        raise ValueError("launches and samples_per_launch must be >= 1")
    return var_between / launches + var_within / (launches * samples_per_launch)


def optimal_split(var_within: float, var_between: float, cost_launch_s: float, cost_sample_s: float) -> float:
    """Samples per launch minimising the variance of the mean for a fixed time: sqrt(c_launch s_w^2 / (c_sample s_b^2)).

    A K x n experiment costs K (c_launch + n c_sample) and its mean has variance s_b^2 / K +
    s_w^2 / (K n); at fixed cost the minimum is at n = sqrt((c_launch / c_sample) (s_w^2 / s_b^2))
    (Kalibera & Jones, ISMM 2013, optimal repetition counts: r_1 = sqrt(c_2 T_1^2 / (c_1 T_2^2)), c_1 the cost of
    one iteration, c_2 that of starting one more execution, T_1^2 and T_2^2 the within and
    between components; Cochran, Sampling Techniques, 3rd ed. 1977, sec. 10.6, optimum m in
    two-stage sampling).  `cost_launch_s` is the launch's fixed cost (start-up, warm-up,
    teardown), not its samples'.  Unrounded (round up, as Kalibera & Jones do); inf when the
    between-launch component is 0 (one launch with every sample is best).  Both variances on
    the same scale (log or linear): only their ratio matters.
    """
    if var_within < 0 or var_between < 0:
        raise ValueError("variances must be >= 0")
    if cost_launch_s < 0 or cost_sample_s <= 0:
        raise ValueError("cost_launch_s must be >= 0 and cost_sample_s > 0")
    if var_between == 0:
        return math.inf
    return math.sqrt(cost_launch_s * var_within / (cost_sample_s * var_between))


def launches_for_budget(budget_s: float, samples_per_launch: int, cost_launch_s: float, cost_sample_s: float) -> int:
    """Whole launches of n samples that fit a time budget: floor(B / (c_launch + n c_sample)).

    The cost model of Kalibera & Jones (ISMM 2013): a launch costs its fixed part plus n samples.
    """
    if budget_s < 0 or samples_per_launch < 1 or cost_launch_s < 0 or cost_sample_s < 0:
        raise ValueError("budget_s, cost_launch_s, cost_sample_s must be >= 0 and samples_per_launch >= 1")
    per = cost_launch_s + samples_per_launch * cost_sample_s
    if per <= 0:
        raise ValueError("a launch must cost some time")
    return int(math.floor(budget_s / per * (1 + 1e-12)))


def min_detectable_ratio(between_cv: float, K: int, level: float = 0.05, power: float = 0.8) -> float:
    """Smallest ratio two K-launch runs tell apart with `power`: exp((z_{1-level/2} + z_power) sigma_b sqrt(2/K)).

    The normal approximation of the two-sample comparison of means of K per-launch log-times
    with log-scale sigma_b = sqrt(ln(1 + cv^2)) (e.g. Chow, Shao & Wang, "Sample Size
    Calculations in Clinical Research", 2nd ed. 2008, ch. 3; van Belle, "Statistical Rules of
    Thumb", 2nd ed. 2008, ch. 2, Lehr's n = 16 / Delta^2 at level 0.05 and power 0.8).
    `between_cv` should include the within-launch noise of a launch's summary (a
    ``variance_components`` between_cv measured with the same n is close).  At small K the t
    test the comparison actually runs needs a somewhat larger ratio.
    """
    _check_level(level, "level")
    _check_level(power, "power")
    if K < 1:
        raise ValueError(f"K must be >= 1, got {K}")
    nd = NormalDist()
    z = nd.inv_cdf(1 - level / 2) + nd.inv_cdf(power)
    return math.exp(z * log_sd_from_cv(between_cv) * math.sqrt(2.0 / K))
