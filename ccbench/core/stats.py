"""Pure statistics of timing samples: summaries, a median confidence interval, flags, tests.

numpy and the standard library only (no MPI, no scipy), so every function here can be
tested on synthetic data with known answers.  Percentiles use numpy's default 'linear'
method (type 7 of Hyndman & Fan, "Sample quantiles in statistical packages", 1996).
"""

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

__all__ = [
    "FLAG_DESCRIPTIONS",
    "Summary",
    "benjamini_hochberg",
    "geometric_mean",
    "mann_whitney_u",
    "median_ci",
    "percentile",
    "relative_standard_error",
    "summarize",
]

# -- flag thresholds -------------------------------------------------------------------
# pyperf warns at stddev >= 10% of the mean and at a min/max 25% away from the mean, for
# single-process timings on a tuned machine (pyperf/_cli.py, format_checks).  A collective's
# sample is the maximum over ranks of noisy per-rank times, so its spread is naturally
# wider; 10% would flag most healthy small-message cases.  We flag at 2.5x pyperf's level.
HIGH_SPREAD_CV = 0.25
# ... or when the upper tail is heavy: 5% of the samples are more than 1.5x the median.
# A median-based report hides such a tail (bimodal protocol switches, a noisy neighbour);
# the coefficient of variation can stay moderate when the bulk of the samples is tight.
HIGH_SPREAD_P95_OVER_MEDIAN = 0.5
# Tukey's "far out" fence, Q3 + 3 IQR (Tukey, Exploratory Data Analysis, 1977).  Only the
# upper fence: a timing is bounded below by the work itself; slow outliers are the noise.
# A sample must also clear the fence by more than one timer tick (1.5 ticks, leaving room
# for rounding), so that quantised timings (IQR 0, some samples a tick up) are not outliers.
OUTLIER_IQR_FACTOR = 3.0
# More than this share of the samples beyond the fence is a flag (one stray sample in a
# hundred is normal on a shared machine; one in twenty is a pattern).
OUTLIER_SHARE = 0.05
# A median within 100 ticks of the timer has a quantisation error of up to 1%.
NEAR_RESOLUTION_TICKS = 100
# A CI of the median wider than +-10% of the median cannot separate two algorithms whose
# times differ by less than that, as they do near a crossover in message size.
WIDE_CI_HALF_WIDTH = 0.10
# The confidence level of the reported interval of the median.
CONFIDENCE = 0.95

FLAG_DESCRIPTIONS: dict[str, str] = {
    "few_samples": (
        f"fewer samples than the minimum, or too few for a {CONFIDENCE:.0%} CI of the median"
    ),
    "high_spread": (
        f"stddev > {HIGH_SPREAD_CV:.0%} of the mean, or p95 more than "
        f"{HIGH_SPREAD_P95_OVER_MEDIAN:.0%} above the median"
    ),
    "outliers": (
        f"over {OUTLIER_SHARE:.0%} of samples beyond Q3 + {OUTLIER_IQR_FACTOR:g} IQR "
        "(Tukey's far-out fence)"
    ),
    "near_resolution": f"median within {NEAR_RESOLUTION_TICKS} ticks of the timer resolution",
    "partly_cached": (
        "cold buffers were asked for (--buffers cold), but the buffer sets of this small size together fit in the "
        "last-level cache: the calls may still have found them there"
    ),
    "zero_samples": (
        "some samples read 0 s: calls shorter than one tick of the timer, so the median is a bound, not a "
        "measurement (batch calls per sample: --timing batched)"
    ),
    "wide_ci": (
        f"{CONFIDENCE:.0%} CI of the median wider than +-{WIDE_CI_HALF_WIDTH:.0%} of the median"
    ),
    "async_oversubscribed": (
        "MPICH's progress threads (one per rank) and the ranks outnumber the node's cores: the overlap measured is not "
        "the one a core per thread gives"
    ),
    "compute_coarse": "the compute asked for is shorter than one iteration of the compute kernel: it ran longer",
    "imported": (
        "read from another tool's output (ccbench import): its own statistics, no raw samples; not tested "
        "by compare"
    ),
    "launch_spread": (
        "the launches differ more than the calls within one launch (between-launch sigma > "
        "within-launch sigma, log scale): trust intervals over launches, not samples"
    ),
}

_EXACT_MAX_N = 1000  # exact binomial order statistics up to here, normal approximation above


def _as_sample(samples, what: str = "samples") -> np.ndarray:
    """A 1-D float64 copy of `samples`, refusing empty or non-finite input."""
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: values must be finite")
    return x


@lru_cache(maxsize=256)
def _median_ci_ranks(n: int, confidence: float) -> tuple[int, int, bool]:
    """1-based order-statistic ranks (j, k) of the median CI, and whether it reaches `confidence`.

    The interval [x_(j), x_(k)] with k = n + 1 - j covers the median with probability
    1 - 2 P(B <= j - 1), B ~ Binomial(n, 1/2) (Conover, Practical Nonparametric Statistics,
    3rd ed. 1999, section 3.2; Le Boudec, Performance Evaluation of Computer and
    Communication Systems, 2010, Theorem 2.1).  Up to n = 1000 the largest such j is found
    with exact integer binomial sums; above, with Le Boudec's normal approximation
    j = floor(n/2 - z sqrt(n)/2), k = ceil(n/2 + z sqrt(n)/2) + 1.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    tail = (1.0 - confidence) / 2.0
    if n <= _EXACT_MAX_N:
        total = 1 << n  # 2**n, exact
        cum = 0         # sum_{i <= j-1} C(n, i), exact
        j = 0
        while j + 1 <= n // 2:
            nxt = cum + math.comb(n, j)
            if nxt / total > tail:
                break
            cum = nxt
            j += 1
        if j == 0:
            return 1, n, False
        return j, n + 1 - j, True
    z = NormalDist().inv_cdf(1.0 - tail)
    half = z * math.sqrt(n) / 2.0
    j = max(1, math.floor(n / 2.0 - half))
    k = min(n, math.ceil(n / 2.0 + half) + 1)
    return j, k, True


def median_ci(samples, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (Conover 1999; Le Boudec 2010).

    Exact binomial for n <= 1000, normal approximation above.  When no interval of order
    statistics reaches `confidence` (n < 6 at 95%) it returns (min, max); `summarize`
    flags that case "few_samples".
    """
    x = np.sort(_as_sample(samples))
    j, k, _ = _median_ci_ranks(x.size, confidence)
    return float(x[j - 1]), float(x[k - 1])


def relative_standard_error(samples) -> float:
    """Standard error of the mean over the mean: SKaMPI's stopping rule; inf for n < 2 or mean 0.

    Reussner, Sanders, Prechelt & Mueller, "SKaMPI: A detailed, accurate MPI benchmark",
    EuroPVM/MPI 1998: repeat until this falls below a target.
    """
    x = _as_sample(samples)
    mean = float(np.mean(x))
    if x.size < 2 or mean == 0.0:
        return math.inf
    return float(np.std(x, ddof=1)) / math.sqrt(x.size) / abs(mean)


def percentile(samples, q: float) -> float:
    """The q-th percentile (0..100) with numpy's 'linear' method (Hyndman & Fan 1996, type 7)."""
    return float(np.percentile(_as_sample(samples), q, method="linear"))


def geometric_mean(values) -> float:
    """exp(mean(log x)) of positive values, the mean of ratios (Fleming & Wallace, CACM 1986)."""
    x = _as_sample(values, "values")
    if np.any(x <= 0):
        raise ValueError("geometric mean needs positive values")
    return float(np.exp(np.mean(np.log(x))))


def mann_whitney_u(a, b) -> tuple[float, float]:
    """U of `a` and its two-sided p-value (Mann & Whitney 1947), normal approximation.

    U counts the pairs (a_i, b_j) with a_i > b_j, ties counting one half.  The variance is
    corrected for ties, n1 n2 / 12 * ((n + 1) - sum(t^3 - t) / (n (n - 1))), and a
    continuity correction of 1/2 is applied (Conover 1999, section 5.1; as scipy does by
    default).  All values equal: p = 1.
    """
    x = _as_sample(a, "a")
    y = _as_sample(b, "b")
    n1, n2 = x.size, y.size
    n = n1 + n2
    _, inverse, counts = np.unique(np.concatenate([x, y]), return_inverse=True, return_counts=True)
    before = np.cumsum(counts) - counts                 # values strictly smaller
    midrank = before + (counts + 1) / 2.0               # average rank of each tie group
    r1 = float(np.sum(midrank[inverse[:n1]]))
    u = r1 - n1 * (n1 + 1) / 2.0
    ties = float(np.sum(counts.astype(np.float64) ** 3 - counts))
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0.0:
        return u, 1.0
    z = max(abs(u - n1 * n2 / 2.0) - 0.5, 0.0) / math.sqrt(var)
    return u, min(1.0, math.erfc(z / math.sqrt(2.0)))


def benjamini_hochberg(p_values) -> np.ndarray:
    """Adjusted p-values controlling the false discovery rate over a family of tests.

    Benjamini & Hochberg, "Controlling the false discovery rate", J. R. Statist. Soc. B
    57(1), 1995: with the m p-values sorted, q_(i) = min over j >= i of min(1, m p_(j) / j);
    rejecting every test with q < level keeps the expected share of false discoveries
    below level.  Returned in the input order.
    """
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if p.size == 0:
        return p.copy()
    if not np.all((p >= 0) & (p <= 1)):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p, kind="stable")
    m = p.size
    scaled = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


@dataclass(frozen=True)
class Summary:
    """Statistics of one case's timing samples, in seconds, with flags as data."""

    n: int
    min_s: float
    median_s: float
    mean_s: float
    p95_s: float
    p99_s: float
    max_s: float
    stddev_s: float        # sample stddev (ddof=1); nan for n = 1
    ci_low_s: float        # 95% CI of the median, order statistics
    ci_high_s: float
    rse: float             # standard error of the mean / mean; inf for n = 1
    flags: tuple[str, ...] = ()


def _ratio(num: float, den: float) -> float:
    """num / den, with 0/0 = 0 and x/0 = inf for x > 0."""
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def summarize(samples_s, *, timer_resolution_s: float = 1e-9, min_samples: int = 10) -> Summary:
    """Summary statistics and flags (pyperf/hyperfine-style warnings) of timing samples.

    Thresholds are the module constants; each flag is explained in FLAG_DESCRIPTIONS.
    """
    x = np.sort(_as_sample(samples_s, "samples_s"))
    if x[0] < 0:
        raise ValueError("samples_s: times must be at least 0")
    n = int(x.size)
    median = float(np.median(x))
    mean = float(np.mean(x))
    p95, p99, q1, q3 = (float(v) for v in np.percentile(x, [95, 99, 25, 75], method="linear"))
    stddev = float(np.std(x, ddof=1)) if n > 1 else math.nan
    j, k, reached = _median_ci_ranks(n, CONFIDENCE)
    lo, hi = float(x[j - 1]), float(x[k - 1])

    flags = []
    if n < min_samples or not reached:
        flags.append("few_samples")
    if n > 1 and (
        _ratio(stddev, mean) > HIGH_SPREAD_CV
        or _ratio(p95 - median, median) > HIGH_SPREAD_P95_OVER_MEDIAN
    ):
        flags.append("high_spread")
    fence = q3 + OUTLIER_IQR_FACTOR * (q3 - q1)
    if np.count_nonzero(x > fence + 1.5 * timer_resolution_s) > OUTLIER_SHARE * n:
        flags.append("outliers")
    if median < NEAR_RESOLUTION_TICKS * timer_resolution_s:
        flags.append("near_resolution")
    if x[0] == 0.0:  # sorted: a zero is first; only a call shorter than a timer tick reads 0
        flags.append("zero_samples")
    if _ratio((hi - lo) / 2.0, median) > WIDE_CI_HALF_WIDTH:
        flags.append("wide_ci")

    return Summary(
        n=n,
        min_s=float(x[0]),
        median_s=median,
        mean_s=mean,
        p95_s=p95,
        p99_s=p99,
        max_s=float(x[-1]),
        stddev_s=stddev,
        ci_low_s=lo,
        ci_high_s=hi,
        rse=relative_standard_error(x),
        flags=tuple(flags),
    )
