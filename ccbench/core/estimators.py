"""The estimators and resampling methods ccbench's fits are built from (pure maths on numpy arrays).

- `wls_line`: the line through points weighted by 1/y^2 (least squares on relative residuals), `weighted_r2` its
  coefficient of determination, `segments_bic` Schwarz's criterion for a fit of k segments;
- `nnls_relative`: non-negative least squares on relative residuals, for the joint fits;
- `bootstrap_medians`, `bootstrap_launches`, `bootstrap_residuals`: the replicates the intervals are taken from
  (raw samples resampled per size; launches, then samples within them; residuals of the fit);
- `percentile_ci`: the percentile interval of such replicates.

``ccbench.analysis.fit`` fits the alpha-beta models with them; they are public so that each method can be checked
on its own against answers worked out by hand.
"""

import itertools
import math

import numpy as np

__all__ = ["LaunchBlocks", "bootstrap_launches", "bootstrap_medians", "bootstrap_residuals", "nnls_relative",
           "percentile_ci", "segments_bic", "weighted_r2", "wls_line"]


def wls_line(x: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit Y = a + b x with weights 1/Y^2, vectorised over the leading axes of Y.

    Weighted least squares minimises sum_i w_i (y_i - a - b x_i)^2; with w_i = 1/y_i^2 that
    is the sum of squared *relative* residuals.  The closed form about the weighted mean
    (any regression text, e.g. Draper & Smith, "Applied Regression Analysis", 1998,
    sec. 9.2) is numerically stable for x spanning six decades.
    """
    w = 1.0 / (Y * Y)
    sw = w.sum(-1)
    xbar = (w * x).sum(-1) / sw
    ybar = (w * Y).sum(-1) / sw
    dx = x - xbar[..., None]
    sxx = (w * dx * dx).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = (w * dx * (Y - ybar[..., None])).sum(-1) / sxx
    a = ybar - b * xbar
    return a, b


def weighted_r2(y: np.ndarray, fitted: np.ndarray) -> float:
    """Weighted R^2 = 1 - sum w r^2 / sum w (y - ybar_w)^2 with w = 1/y^2."""
    w = 1.0 / (y * y)
    ybar = (w * y).sum() / w.sum()
    sst = float((w * (y - ybar) ** 2).sum())
    sse = float((w * (y - fitted) ** 2).sum())
    return 1.0 - sse / sst if sst > 0 else (1.0 if sse == 0 else 0.0)


def segments_bic(rss: float, n: int, k_segments: int, floor: float = 1e-6) -> float:
    """Schwarz's (1978) criterion for k segments under Gaussian relative errors.

    BIC = n ln(RSS/n) + p ln n, with p = 2k + (k - 1): an intercept and a slope per segment
    plus each breakpoint counted as a parameter (the error variance is common to all k and
    dropped).  RSS/n is floored at `floor`^2 (a relative residual rms below it is timer noise)
    so noise-free synthetic data is not "improved" by fitting rounding error.
    """
    p = 3 * k_segments - 1
    return n * math.log(max(rss / n, floor**2)) + p * math.log(n)


def nnls_relative(X: np.ndarray, Y: np.ndarray, offset: np.ndarray | None = None) -> np.ndarray:
    """min_theta>=0 sum_i ((X_i theta + o_i - y_i) / y_i)^2, vectorised over the rows of Y (B, n).

    Non-negative least squares (Lawson & Hanson 1974) solved exactly by enumerating every
    active set: the optimum is the unconstrained solution on its support, so the best
    feasible subset solution is the NNLS solution.  Columns are scaled to unit norm first.
    `offset` o (n,) is a known part of every time (a reduction priced at a measured gamma);
    None is zero.  Returns (B, k).
    """
    B, n = Y.shape
    k = X.shape[1]
    chunk = max(1, 4_000_000 // max(1, n * k))
    if B > chunk:
        return np.concatenate([nnls_relative(X, Y[i : i + chunk], offset) for i in range(0, B, chunk)])
    A = X[None, :, :] / Y[:, :, None]                     # (B, n, k) relative design
    scale = np.linalg.norm(X / np.median(Y, axis=0)[:, None], axis=0)
    scale[scale == 0] = 1.0
    A = A / scale
    t = np.ones((B, n)) if offset is None else 1.0 - np.asarray(offset, dtype=float)[None, :] / Y
    G = np.einsum("bni,bnj->bij", A, A)
    c = np.einsum("bni,bn->bi", A, t)                      # A^T t
    best_rss = (t * t).sum(axis=1)                         # theta = 0
    best = np.zeros((B, k))
    for size in range(1, k + 1):
        for S in itertools.combinations(range(k), size):
            S = list(S)
            th = np.einsum("bij,bj->bi", np.linalg.pinv(G[:, S][:, :, S]), c[:, S])
            r = t - np.einsum("bni,bi->bn", A[:, :, S], th)
            rss = (r * r).sum(axis=1)
            ok = np.all(th >= -1e-12, axis=1) & (rss < best_rss - 1e-15 * n)
            best_rss = np.where(ok, rss, best_rss)
            full = np.zeros((B, k))
            full[:, S] = np.maximum(th, 0.0)
            best = np.where(ok[:, None], full, best)
    return best / scale


def percentile_ci(v: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile bootstrap interval (Efron & Tibshirani 1993, sec. 13.3)."""
    v = v[np.isfinite(v)]
    if v.size == 0:
        return (math.nan, math.nan)
    tail = 50.0 * (1.0 - confidence)
    lo, hi = np.percentile(v, [tail, 100.0 - tail])
    return (float(lo), float(hi))


class LaunchBlocks(list):
    """The raw samples of one size as launches: one array per launch, two launches or more."""


def bootstrap_launches(blocks: LaunchBlocks, n_boot: int, rng) -> np.ndarray:
    """(n_boot,) two-stage bootstrap replicates of the geometric mean of the launches' medians.

    Launches are the units of replication: each replicate draws as many launches as there
    are, with replacement, then each drawn launch's samples with replacement, and takes the
    geometric mean of the drawn launches' medians -- the statistic a pooled row's ``median_s``
    is (``ccbench.store.launches``).  The two-stage (cluster) bootstrap of Davison & Hinkley,
    "Bootstrap Methods and their Application", Cambridge 1997, sec. 3.8, as
    ``ccbench.core.replication.hierarchical_bootstrap_ci`` does for one row.
    """
    L = len(blocks)
    med = np.empty((L, n_boot * L))
    for k, b in enumerate(blocks):
        m, total = len(b), n_boot * L
        chunk = max(1, min(total, 2_000_000 // m))
        for i in range(0, total, chunk):
            c = min(chunk, total - i)
            med[k, i : i + c] = np.median(b[rng.integers(0, m, size=(c, m))], axis=1)
    med = med.reshape(L, n_boot, L)
    pick = rng.integers(0, L, size=(n_boot, L))
    vals = med[pick, np.arange(n_boot)[:, None], np.arange(L)[None, :]]
    return np.exp(np.log(vals).mean(axis=1))


def bootstrap_medians(samples: list, n_boot: int, rng) -> np.ndarray:
    """(n_boot, sizes) medians of each size's raw samples resampled with replacement.

    The nonparametric bootstrap of Efron & Tibshirani (1993, ch. 6): each size's samples
    are resampled independently (sizes were measured independently) and the statistic the
    fit uses -- the median -- is recomputed.  A size measured in several launches
    (`LaunchBlocks`) resamples launches, then samples (`bootstrap_launches`): samples of one launch
    are not independent of each other.
    """
    out = np.empty((n_boot, len(samples)))
    for j, s in enumerate(samples):
        if isinstance(s, LaunchBlocks):
            out[:, j] = bootstrap_launches(s, n_boot, rng)
            continue
        m = len(s)
        chunk = max(1, min(n_boot, 2_000_000 // m))
        for i in range(0, n_boot, chunk):
            k = min(chunk, n_boot - i)
            out[i : i + k, j] = np.median(s[rng.integers(0, m, size=(k, m))], axis=1)
    return out


def bootstrap_residuals(fitted: np.ndarray, rel: np.ndarray, n_boot: int, rng) -> np.ndarray:
    """(n_boot, n) synthetic curves: fitted * (1 + resampled relative residual).

    The residual bootstrap for regression (Efron & Tibshirani 1993, sec. 9.5), used only
    when raw samples are missing.  Values are kept positive so the 1/T^2 weights exist.
    """
    idx = rng.integers(0, len(rel), size=(n_boot, len(rel)))
    Y = fitted * (1.0 + rel[idx])
    floor = 1e-3 * float(np.min(np.abs(fitted[fitted != 0]))) if np.any(fitted != 0) else 1e-12
    return np.maximum(Y, floor)
