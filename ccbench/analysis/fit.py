"""Pure fitting of alpha-beta(-gamma) cost models to measurements (numpy only, no MPI).

The model is Hockney's: a message of n bytes takes T(n) = alpha + beta * n (R. W. Hockney,
"The communication challenge for MPP: Intel Paragon and Meiko CS-2", Parallel Computing
20(3), 1994).  A collective's time is alpha * steps + beta * bytes + gamma * reduced bytes
(Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in
MPICH", IJHPCA 19(1), 2005).

Methods, each cited where it is coded:

* weighted least squares with relative-error weights 1/T^2, because sizes span six
  decades and an unweighted fit would only see the largest sizes;
* percentile bootstrap confidence intervals over the stored raw samples (Efron &
  Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall 1993, ch. 6 and 13);
* segmented regression over breakpoints between measured sizes (Hudson, "Fitting
  segmented curves whose join points have to be estimated", JASA 61, 1966; Muggeo,
  "Estimating regression models with unknown break-points", Stat. Med. 22, 2003), with the
  number of segments chosen by the Bayesian information criterion (Schwarz, "Estimating
  the dimension of a model", Ann. Statist. 6(2), 1978);
* non-negative least squares for the joint fit (Lawson & Hanson, "Solving Least Squares
  Problems", 1974), solved exactly by enumerating active sets (three unknowns).

Every result is a frozen dataclass with the unit in each name and a ``to_dict()`` that is
strict JSON (non-finite numbers become null).
"""

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from ccbench.core.errors import CCBenchError
from ccbench.core.estimators import (
    LaunchBlocks,
    bootstrap_medians,
    bootstrap_residuals,
    nnls_relative,
    percentile_ci,
    segments_bic,
    weighted_r2,
    wls_line,
)
from ccbench.core.records import Record

__all__ = [
    "CONFIDENCE",
    "CURVE_KEYS",
    "N_BOOT",
    "SEED",
    "CurveFit",
    "LineFit",
    "NetworkParams",
    "ParamComparison",
    "PathParams",
    "Segment",
    "SegmentedFit",
    "compare_params",
    "fit_curve",
    "fit_curves",
    "fit_effective",
    "fit_gamma",
    "gamma_per_path",
    "reduction_records",
    "fit_joint",
    "fit_line",
    "fit_pingpong",
    "fit_segments",
    "network_from_microbenchmarks",
    "params_from_dict",
    "reduction_gammas",
    "row_samples",
]

N_BOOT = 1000          # bootstrap resamples
SEED = 0               # the bootstrap's RNG seed: fits are deterministic
CONFIDENCE = 0.95      # two-sided percentile interval
MIN_POINTS = 3         # sizes per segment of a segmented fit
MAX_SEGMENTS = 3
MIN_EFFECT = 0.05      # a breakpoint must move the fitted curve by >= 5% somewhere ...
EFFECT_SIGMAS = 4.0    # ... and by >= 4 residual standard deviations
POOR_FIT = 0.25        # a relative residual above this flags the fit as poor
_REL_FLOOR = 1e-6      # relative residual rms below this is timer noise, not signal
#: The last-level cache assumed when a run's reduction records do not state one (bytes): the
#: size ``ccbench.measure.gamma`` flushes against in that case.
DEFAULT_LLC_BYTES = 32 << 20

#: The fields that tell one measured curve from another in ``cases.jsonl`` rows.
CURVE_KEYS = ("collective", "algorithm", "nranks", "dtype", "op", "in_place", "root")
COUNT_KEYS = ("steps_max", "step_bytes_max", "reduced_bytes_max")


# --------------------------------------------------------------------------- records


def _gbs(beta_s_per_byte) -> float:
    """Bandwidth in GB/s (1e9 bytes/s) of an inverse bandwidth; inf when beta <= 0."""
    if beta_s_per_byte is None or not math.isfinite(beta_s_per_byte):
        return math.nan
    return 1.0 / beta_s_per_byte / 1e9 if beta_s_per_byte > 0 else math.inf


def _gbs_ci(ci) -> tuple[float, float]:
    """A bandwidth interval from an inverse-bandwidth interval (the bounds swap)."""
    return (_gbs(ci[1]), _gbs(ci[0]))


class _Bandwidth(Record):
    """A record with beta_s_per_byte and its interval: adds the bandwidth 1 / beta."""

    _derived = ("bandwidth_gbs", "bandwidth_ci_gbs")

    @property
    def bandwidth_gbs(self) -> float:
        """1 / beta in GB/s (1e9 bytes/s); inf when beta <= 0."""
        return _gbs(self.beta_s_per_byte)

    @property
    def bandwidth_ci_gbs(self) -> tuple[float, float]:
        """The interval of 1 / beta in GB/s; an upper bound of inf means unresolved."""
        return _gbs_ci(self.beta_ci_s_per_byte)


@dataclass(frozen=True)
class LineFit(_Bandwidth):
    """T(n) = alpha + beta * n by relative-weighted least squares, with bootstrap intervals.

    ``bootstrap`` says how the intervals were made: "samples" (the raw samples of each
    size resampled), "residuals" (relative residuals resampled, when samples are missing)
    or "none".  ``r2`` is the weighted coefficient of determination.
    """

    alpha_s: float
    beta_s_per_byte: float
    alpha_ci_s: tuple[float, float]
    beta_ci_s_per_byte: tuple[float, float]
    r2: float
    max_rel_residual: float
    max_rel_residual_nbytes: int
    n_sizes: int
    nbytes_min: int
    nbytes_max: int
    bootstrap: str
    n_boot: int
    confidence: float
    flags: tuple[str, ...] = ()



@dataclass(frozen=True)
class Segment(_Bandwidth):
    """One segment of a segmented fit: T(n) = alpha + beta * n for nbytes_lo <= n <= nbytes_hi.

    Its intervals are bootstrap percentiles conditional on the chosen breakpoints.
    """

    nbytes_lo: int
    nbytes_hi: int
    n_sizes: int
    alpha_s: float
    beta_s_per_byte: float
    alpha_ci_s: tuple[float, float]
    beta_ci_s_per_byte: tuple[float, float]


@dataclass(frozen=True)
class SegmentedFit(Record):
    """A piecewise-linear fit with jumps allowed, the number of segments chosen by BIC.

    ``breakpoints_bytes[i]`` is the first measured size of segment i + 1: the change
    happens above ``segments[i].nbytes_hi`` and at or below this size.  ``bic[k - 1]`` is
    the criterion of the best k-segment fit (None where k segments do not fit the data).
    """

    segments: tuple[Segment, ...]
    breakpoints_bytes: tuple[int, ...]
    bic: tuple[float, ...]
    r2: float
    max_rel_residual: float
    criterion: str = "BIC"
    flags: tuple[str, ...] = ()

    _derived = ("n_segments",)

    @property
    def n_segments(self) -> int:
        """How many segments were chosen."""
        return len(self.segments)

    def segment_at(self, nbytes: float) -> Segment:
        """The segment that covers `nbytes` (the nearest one outside the measured range)."""
        for seg, bp in zip(self.segments, self.breakpoints_bytes, strict=False):
            if nbytes < bp:
                return seg
        return self.segments[-1]


@dataclass(frozen=True)
class CurveFit(Record):
    """The fits of one measured curve: a single line, and the segmented fit chosen by BIC."""

    collective: str
    algorithm: str
    nranks: int | None
    dtype: str | None
    op: str | None
    in_place: bool | None
    root: int | None
    line: LineFit
    segmented: SegmentedFit
    flags: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """(collective, algorithm, nranks): the key predictions use."""
        return (self.collective, self.algorithm, self.nranks)


@dataclass(frozen=True)
class NetworkParams(Record):
    """Network and reduction parameters for the alpha-beta-gamma model.

    ``source`` is "pingpong" (alpha, beta from ping-pong, gamma from the local reduction
    benchmark), "joint" (fitted across hand-written algorithms' counted traffic) or
    "given".  A parameter that could not be estimated is None.  ``breakpoints_bytes`` are
    the protocol changes the ping-pong curve showed (message sizes).
    """

    alpha_s: float | None
    beta_s_per_byte: float | None
    gamma_s_per_byte: float | None = None
    alpha_ci_s: tuple[float, float] | None = None
    beta_ci_s_per_byte: tuple[float, float] | None = None
    gamma_ci_s_per_byte: tuple[float, float] | None = None
    source: str = "given"
    r2: float | None = None
    max_rel_residual: float | None = None
    n_points: int = 0
    breakpoints_bytes: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    library_gamma_s_per_byte: float | None = None
    gamma_cold_s_per_byte: float | None = None
    library_gamma_cold_s_per_byte: float | None = None
    cold_above_bytes: float | None = None

    _derived = ("bandwidth_gbs",)

    @property
    def bandwidth_gbs(self) -> float:
        """1 / beta in GB/s."""
        return _gbs(self.beta_s_per_byte)

    def gamma_for(self, native: bool, nbytes: float, cold: bool = False) -> float:
        """gamma of the path that reduces and of the buffer's temperature, in s/byte (0 when unknown).

        ``native``: the MPI library's own collective, which reduces with its internal
        reduction (``library_gamma_*``, MPI_Reduce_local); else a hand-written algorithm,
        which reduces with numpy (``gamma_*``).  A buffer of more than ``cold_above_bytes``
        does not stay in cache between the steps that touch it and pays the cold rate, as does every buffer
        of a run with cold buffers (`cold`: ``--buffers cold``).  A missing rate falls back to the warm one of
        the same path, then to numpy's warm gamma.
        """
        cold = cold or (self.cold_above_bytes is not None and nbytes > self.cold_above_bytes)
        if native:
            order = (self.library_gamma_cold_s_per_byte, self.library_gamma_s_per_byte) if cold else (
                self.library_gamma_s_per_byte,)
        else:
            order = ()
        order += (self.gamma_cold_s_per_byte, self.gamma_s_per_byte) if cold else (self.gamma_s_per_byte,)
        return next((float(g) for g in order if g is not None), 0.0)

    def for_algorithm(self, alg) -> "NetworkParams":
        """The parameters that price `alg` (these: one alpha and beta for every path)."""
        return self

    @classmethod
    def from_dict(cls, d: Mapping) -> "NetworkParams":
        """The inverse of ``to_dict`` (unknown keys, such as derived ones, are ignored)."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("alpha_ci_s", "beta_ci_s_per_byte", "gamma_ci_s_per_byte"):
            if kw.get(k) is not None:
                kw[k] = tuple(math.nan if v is None else v for v in kw[k])
        for k in ("breakpoints_bytes", "notes"):
            if k in kw:
                kw[k] = tuple(kw[k] or ())
        return cls(**kw)


@dataclass(frozen=True)
class PathParams(Record):
    """Parameters per path: hand-written algorithms (``numpy``) and the library's own (``mpi``).

    Effective parameters (``source`` "effective") are fitted per path from the collectives
    that run on it; a prediction prices each algorithm with the parameters of its path
    (`for_algorithm`).  Both carry the gamma of every path (``NetworkParams.gamma_for``).
    """

    numpy: NetworkParams
    mpi: NetworkParams
    source: str = "effective"
    notes: tuple[str, ...] = ()

    def for_algorithm(self, alg) -> NetworkParams:
        """The parameters of the path `alg` runs on: the library's for native algorithms, else numpy's."""
        return self.mpi if getattr(alg, "native", False) else self.numpy

    @property
    def alpha_s(self) -> float | None:
        """The hand-written path's alpha (what a single-valued display shows)."""
        return self.numpy.alpha_s

    @property
    def beta_s_per_byte(self) -> float | None:
        """The hand-written path's beta."""
        return self.numpy.beta_s_per_byte

    @property
    def gamma_s_per_byte(self) -> float | None:
        """numpy's warm gamma."""
        return self.numpy.gamma_s_per_byte

    @property
    def breakpoints_bytes(self) -> tuple[int, ...]:
        """The ping-pong breakpoints the paths were built on."""
        return self.numpy.breakpoints_bytes


def params_from_dict(d: Mapping) -> "NetworkParams | PathParams":
    """The parameters a ``to_dict`` gave: PathParams (keys ``numpy`` and ``mpi``) or NetworkParams."""
    if "numpy" in d and "mpi" in d:
        return PathParams(NetworkParams.from_dict(d["numpy"]), NetworkParams.from_dict(d["mpi"]),
                          d.get("source", "effective"), tuple(d.get("notes") or ()))
    return NetworkParams.from_dict(d)


@dataclass(frozen=True)
class ParamComparison(Record):
    """One parameter from two estimates: ratio = other / reference, and whether CIs overlap."""

    parameter: str
    reference: float | None
    other: float | None
    ratio: float | None
    cis_overlap: bool | None
    reference_source: str
    other_source: str


# --------------------------------------------------------------------------- core maths


def _rel_rss(x, y, a, b) -> float:
    """Sum of squared relative residuals of y against a + b x."""
    r = (y - a - b * x) / y
    return float(r @ r)


def row_samples(row: Mapping):
    """A stored row's raw samples: an array, or one array per launch when two or more launches measured it.

    A replicated run's row holds its launches' samples one after the other, ``launch_samples``
    of them per launch (``ccbench.store.launches``); the bootstrap then resamples launches
    before samples (`bootstrap_medians`).
    """
    s = row.get("samples_s")
    if s is None:
        return None
    arr = np.asarray(s, dtype=float).ravel()
    counts = list(row.get("launch_samples") or ())
    if len(counts) >= 2 and len(counts) == len(row.get("launches") or ()) and sum(counts) == arr.size:
        return LaunchBlocks(np.split(arr, np.cumsum(counts)[:-1]))
    return arr


def _clean_samples(s):
    """Finite positive samples: an array of two or more, a LaunchBlocks of two or more launches, or None."""
    if s is None:
        return None
    if isinstance(s, LaunchBlocks):
        blocks = [b[np.isfinite(b) & (b > 0)] for b in (np.asarray(x, dtype=float).ravel() for x in s)]
        blocks = [b for b in blocks if b.size]
        if len(blocks) >= 2:
            return LaunchBlocks(blocks)
        s = blocks[0] if blocks else np.empty(0)
    s = np.asarray(s, dtype=float).ravel()
    s = s[np.isfinite(s) & (s > 0)]
    return s if s.size >= 2 else None


def _prepare(nbytes, median_s, samples_s=None):
    """Sorted distinct sizes, their medians and (if every size has >= 2) raw samples.

    Rows with a non-positive or non-finite time are dropped.  Repeated sizes are merged:
    their samples are pooled and the median recomputed (or the medians' median is taken).
    """
    x = np.asarray(nbytes, dtype=float).ravel()
    y = np.asarray(median_s, dtype=float).ravel()
    if x.shape != y.shape:
        raise CCBenchError("nbytes and median_s differ in length")
    raw = list(samples_s) if samples_s is not None else [None] * len(x)
    if len(raw) != len(x):
        raise CCBenchError("samples_s and median_s differ in length")
    clean = [_clean_samples(s) for s in raw]
    keep = np.isfinite(x) & (x >= 0) & np.isfinite(y) & (y > 0)
    idx_all = np.flatnonzero(keep)
    idx_all = idx_all[np.argsort(x[idx_all], kind="stable")]
    xs, ys, ss = [], [], []
    for size, grp in itertools.groupby(idx_all, key=lambda i: x[i]):
        grp = list(grp)
        samp = [clean[i] for i in grp]
        if len(grp) == 1:
            xs.append(size)
            ys.append(y[grp[0]])
            ss.append(samp[0])
            continue
        pooled = None
        if all(s is not None for s in samp):
            if any(isinstance(s, LaunchBlocks) for s in samp):  # every launch of every row its own block
                pooled = LaunchBlocks(b for s in samp for b in (s if isinstance(s, LaunchBlocks) else [s]))
            else:
                pooled = np.concatenate(samp)
        xs.append(size)
        ys.append(float(np.median(np.concatenate(list(pooled)) if isinstance(pooled, LaunchBlocks) else pooled))
                  if pooled is not None else float(np.median(y[grp])))
        ss.append(pooled)
    samples = ss if ss and all(s is not None for s in ss) else None
    return np.array(xs, dtype=float), np.array(ys, dtype=float), samples


def _line_flags(n, alpha, beta, beta_ci, max_rel, method) -> tuple[str, ...]:
    """Warnings as data for one line fit."""
    flags = []
    if n < 4:
        flags.append("few_sizes")
    if alpha < 0:
        flags.append("negative_alpha")
    if beta < 0:
        flags.append("negative_beta")
    if math.isfinite(beta_ci[0]) and beta_ci[0] <= 0 <= beta_ci[1]:
        flags.append("beta_ci_includes_zero")
    if max_rel > POOR_FIT:
        flags.append("poor_fit")
    if method == "residuals":
        flags.append("residual_bootstrap")
    elif method == "none":
        flags.append("no_intervals")
    return tuple(flags)


def _line(x, y, Yb, rng, n_boot, confidence) -> LineFit:
    """The line fit given prepared points and (optionally) bootstrap medians."""
    if len(x) < 2:
        raise CCBenchError("a line fit needs at least two distinct sizes")
    a, b = wls_line(x, y)
    a, b = float(a), float(b)
    fitted = a + b * x
    rel = (y - fitted) / y
    method = "samples"
    if Yb is None:
        if n_boot > 0 and len(x) > 2:
            Yb, method = bootstrap_residuals(fitted, rel, n_boot, rng), "residuals"
        else:
            method = "none"
    if Yb is not None:
        ab, bb = wls_line(x, Yb)
        a_ci, b_ci = percentile_ci(ab, confidence), percentile_ci(bb, confidence)
    else:
        a_ci = b_ci = (math.nan, math.nan)
    i = int(np.argmax(np.abs(rel)))
    max_rel = float(abs(rel[i]))
    return LineFit(
        alpha_s=a,
        beta_s_per_byte=b,
        alpha_ci_s=a_ci,
        beta_ci_s_per_byte=b_ci,
        r2=weighted_r2(y, fitted),
        max_rel_residual=max_rel,
        max_rel_residual_nbytes=int(x[i]),
        n_sizes=len(x),
        nbytes_min=int(x[0]),
        nbytes_max=int(x[-1]),
        bootstrap=method if Yb is not None else "none",
        n_boot=int(Yb.shape[0]) if Yb is not None else 0,
        confidence=confidence,
        flags=_line_flags(len(x), a, b, b_ci, max_rel, method),
    )


def _best_partitions(x, y, max_segments, min_points):
    """For k = 1..max_segments: (rss, cuts) of the best k-segment fit, or None.

    Exhaustive search over breakpoints between measured sizes (Hudson 1966's exact method
    for a discrete set of candidate join points); each segment keeps >= min_points sizes.
    """
    n = len(x)
    cache: dict[tuple[int, int], float] = {}

    def seg_rss(i, j):
        if (i, j) not in cache:
            a, b = wls_line(x[i:j], y[i:j])
            cache[(i, j)] = _rel_rss(x[i:j], y[i:j], float(a), float(b))
        return cache[(i, j)]

    best = []
    for k in range(1, max_segments + 1):
        top = None
        for cuts in itertools.combinations(range(min_points, n - min_points + 1), k - 1):
            bounds = (0, *cuts, n)
            if any(bounds[s + 1] - bounds[s] < min_points for s in range(k)):
                continue
            rss = sum(seg_rss(bounds[s], bounds[s + 1]) for s in range(k))
            if top is None or rss < top[0]:
                top = (rss, cuts)
        best.append(top)
    return best


def _piecewise_fitted(x, y, cuts):
    """Fitted values and (a, b) per segment of a partition."""
    bounds = (0, *cuts, len(x))
    fitted = np.empty_like(y)
    coefs = []
    for s in range(len(bounds) - 1):
        i, j = bounds[s], bounds[s + 1]
        a, b = wls_line(x[i:j], y[i:j])
        fitted[i:j] = float(a) + float(b) * x[i:j]
        coefs.append((float(a), float(b)))
    return fitted, coefs


def _segments(x, y, Yb, rng, n_boot, confidence, max_segments, min_points) -> SegmentedFit:
    """The segmented fit given prepared points and (optionally) bootstrap medians.

    Choice of the number of segments: the k with the least BIC (Schwarz 1978), then a
    practical-significance guard against fitting noise -- going from k-1 to k segments
    must change the fitted curve at some measured size by at least MIN_EFFECT (5%) and by
    EFFECT_SIGMAS (4) residual standard deviations; otherwise k-1 is kept.  The guard
    answers the multiple-comparison optimism of choosing the breakpoint by least squares,
    which plain BIC does not charge for.
    """
    n = len(x)
    if n < 2:
        raise CCBenchError("a segmented fit needs at least two distinct sizes")
    min_points = max(2, int(min_points))
    best = _best_partitions(x, y, max(1, max_segments), min_points)
    if best[0] is None:  # fewer sizes than min_points: one segment regardless
        best[0] = (_rel_rss(x, y, *map(float, wls_line(x, y))), ())
    bics = [None if b is None else segments_bic(b[0], n, k + 1, _REL_FLOOR) for k, b in enumerate(best)]
    chosen = 0
    for k in range(1, len(best)):
        if bics[k] is None or bics[k] >= bics[chosen]:
            continue
        fit_k, _ = _piecewise_fitted(x, y, best[k][1])
        fit_c, _ = _piecewise_fitted(x, y, best[chosen][1])
        dof = max(n - (3 * (k + 1) - 1), 1)
        sigma = math.sqrt(best[k][0] / dof)
        change = float(np.max(np.abs(fit_k - fit_c) / y))
        if change >= max(MIN_EFFECT, EFFECT_SIGMAS * sigma):
            chosen = k
    cuts = best[chosen][1]
    fitted, coefs = _piecewise_fitted(x, y, cuts)
    rel = (y - fitted) / y
    method = "samples"
    if Yb is None:
        if n_boot > 0 and n > 2 * len(coefs):
            Yb, method = bootstrap_residuals(fitted, rel, n_boot, rng), "residuals"
        else:
            method = "none"
    bounds = (0, *cuts, n)
    segs = []
    for s, (a, b) in enumerate(coefs):
        i, j = bounds[s], bounds[s + 1]
        if Yb is not None:
            ab, bb = wls_line(x[i:j], Yb[:, i:j])
            a_ci, b_ci = percentile_ci(ab, confidence), percentile_ci(bb, confidence)
        else:
            a_ci = b_ci = (math.nan, math.nan)
        segs.append(Segment(int(x[i]), int(x[j - 1]), j - i, a, b, a_ci, b_ci))
    flags = []
    if method == "residuals":
        flags.append("residual_bootstrap")
    elif method == "none":
        flags.append("no_intervals")
    if len(segs) > 1:
        flags.append("protocol_change")
    return SegmentedFit(
        segments=tuple(segs),
        breakpoints_bytes=tuple(int(x[c]) for c in cuts),
        bic=tuple(math.nan if b is None else b for b in bics),
        r2=weighted_r2(y, fitted),
        max_rel_residual=float(np.max(np.abs(rel))),
        flags=tuple(flags),
    )


# --------------------------------------------------------------------------- public fits


def fit_line(
    nbytes: Sequence[float],
    median_s: Sequence[float],
    samples_s: Sequence[Sequence[float]] | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> LineFit:
    """Fit T(n) = alpha + beta n (Hockney 1994) by weighted least squares, weights 1/T^2.

    Intervals: percentile bootstrap (Efron & Tibshirani 1993) over each size's raw samples
    (median recomputed, line refitted), or over relative residuals when samples are missing.
    """
    x, y, samples = _prepare(nbytes, median_s, samples_s)
    rng = np.random.default_rng(seed)
    Yb = bootstrap_medians(samples, n_boot, rng) if samples is not None and n_boot > 0 else None
    return _line(x, y, Yb, rng, n_boot, confidence)


def fit_segments(
    nbytes: Sequence[float],
    median_s: Sequence[float],
    samples_s: Sequence[Sequence[float]] | None = None,
    *,
    max_segments: int = MAX_SEGMENTS,
    min_points: int = MIN_POINTS,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> SegmentedFit:
    """Segmented regression (Hudson 1966; Muggeo 2003) with 1..max_segments segments.

    Segments are independent lines (jumps allowed: eager/rendezvous switches are often
    discontinuous), breakpoints lie between measured sizes and are found by exhaustive
    search, the number of segments by BIC (Schwarz 1978) plus a practical-significance
    guard (see `_segments`).  Segment intervals: bootstrap with the breakpoints held fixed.
    """
    x, y, samples = _prepare(nbytes, median_s, samples_s)
    rng = np.random.default_rng(seed)
    Yb = bootstrap_medians(samples, n_boot, rng) if samples is not None and n_boot > 0 else None
    return _segments(x, y, Yb, rng, n_boot, confidence, max_segments, min_points)


def _curve_key(row: Mapping) -> tuple:
    return tuple(row.get(k) for k in CURVE_KEYS)


def fit_curve(
    rows: Iterable[Mapping],
    *,
    max_segments: int = MAX_SEGMENTS,
    min_points: int = MIN_POINTS,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> CurveFit:
    """Line and segmented fits of one curve's rows (``cases.jsonl`` dicts), one bootstrap.

    The rows must share collective, algorithm and nranks (dtype, op, in_place and root
    are recorded from the first row).  Uses ``nbytes``, ``median_s`` and ``samples_s``.
    """
    rows = list(rows)
    if not rows:
        raise CCBenchError("no rows to fit")
    keys = {tuple(r.get(k) for k in CURVE_KEYS[:3]) for r in rows}
    if len(keys) > 1:
        raise CCBenchError(f"rows of several curves given to fit_curve: {sorted(map(str, keys))}")
    x, y, samples = _prepare(
        [r["nbytes"] for r in rows],
        [r["median_s"] for r in rows],
        [row_samples(r) for r in rows],
    )
    if len(x) < 2:
        raise CCBenchError(
            f"{rows[0].get('collective')}/{rows[0].get('algorithm')}: "
            "a fit needs at least two distinct sizes with positive times"
        )
    rng = np.random.default_rng(seed)
    Yb = bootstrap_medians(samples, n_boot, rng) if samples is not None and n_boot > 0 else None
    line = _line(x, y, Yb, rng, n_boot, confidence)
    if Yb is not None and any(isinstance(s, LaunchBlocks) for s in samples):
        line = replace(line, bootstrap="launches, then samples")
    seg = _segments(x, y, Yb, rng, n_boot, confidence, max_segments, min_points)
    flags = tuple(dict.fromkeys(line.flags + seg.flags))
    r0 = rows[0]
    return CurveFit(
        collective=r0.get("collective"),
        algorithm=r0.get("algorithm"),
        nranks=r0.get("nranks"),
        dtype=r0.get("dtype"),
        op=r0.get("op"),
        in_place=r0.get("in_place"),
        root=r0.get("root"),
        line=line,
        segmented=seg,
        flags=flags,
    )


def fit_curves(rows: Iterable[Mapping], *, min_sizes: int = 3, **kw) -> list[CurveFit]:
    """`fit_curve` for every curve (distinct values of CURVE_KEYS) with >= min_sizes sizes.

    Curves are returned in first-seen order; curves with fewer distinct positive-time
    sizes are skipped (a barrier, a single-size run).  ``kw`` goes to `fit_curve`.
    """
    groups: dict[tuple, list[Mapping]] = {}
    for r in rows:
        groups.setdefault(_curve_key(r), []).append(r)
    out = []
    for grp in groups.values():
        sizes = {r["nbytes"] for r in grp if r.get("median_s") and r["median_s"] > 0}
        if len(sizes) >= max(2, min_sizes):
            out.append(fit_curve(grp, **kw))
    return out


# --------------------------------------------------------------------------- network params


def fit_pingpong(rows: Iterable[Mapping], **kw) -> CurveFit:
    """The fit of the ping-pong curve (rows with collective == "pingpong", one-way times).

    Rows of several rank counts are pooled (ping-pong runs between two ranks).
    """
    pp = [dict(r, nranks=2) for r in rows if r.get("collective") == "pingpong"]
    if not pp:
        raise CCBenchError("no ping-pong rows: run the pingpong benchmark first")
    return fit_curve(pp, **kw)


def fit_gamma(
    records: Iterable[Mapping], *, dtype: str | None = None, op: str | None = None, **kw
) -> CurveFit:
    """The fit of a local reduction microbenchmark: T(n) = overhead + gamma n.

    `records` are dicts {dtype, op, nbytes, seconds} (``seconds`` a number or a list of
    samples); records of one size are pooled as that size's samples.  With several dtypes
    or ops present, `dtype` and `op` must pick one.  gamma is the slope of the last
    (largest-size) segment, as for beta; the returned fit carries both line and segments.
    """
    recs = [
        r for r in records
        if (dtype is None or r.get("dtype") == dtype) and (op is None or r.get("op") == op)
    ]
    combos = sorted({(str(r.get("dtype")), str(r.get("op"))) for r in recs})
    if not recs:
        raise CCBenchError(f"no reduction records for dtype={dtype} op={op}")
    if len(combos) > 1:
        raise CCBenchError(
            "reduction records of several dtype/op: choose one of "
            + ", ".join(f"{d}/{o}" for d, o in combos)
        )
    by_size: dict[float, list[float]] = {}
    for r in recs:
        sec = r["seconds"]
        by_size.setdefault(float(r["nbytes"]), []).extend(
            [float(s) for s in sec] if isinstance(sec, (list, tuple, np.ndarray)) else [float(sec)]
        )
    rows = [
        {
            "collective": "local-reduction",
            "algorithm": "numpy",
            "nranks": 1,
            "dtype": recs[0].get("dtype"),
            "op": recs[0].get("op"),
            "nbytes": n,
            "median_s": float(np.median(s)),
            "samples_s": s if len(s) >= 2 else None,
        }
        for n, s in by_size.items()
    ]
    return fit_curve(rows, **kw)


def reduction_records(records: Iterable[Mapping], path: str = "numpy", temperature: str = "warm") -> list[Mapping]:
    """The local-reduction records of one path (``numpy`` or ``mpi``) and temperature (``warm`` or ``cold``).

    Records stored before the paths were told apart (no ``path`` key) are numpy's, warm
    (``ccbench.measure.gamma``).
    """
    return [r for r in records if r.get("path", "numpy") == path and r.get("temperature", "warm") == temperature]


def gamma_per_path(records: Iterable[Mapping], **kw) -> list[dict]:
    """gamma of every (dtype, op, path, temperature) the records hold, each its own fit (``fit_gamma``).

    One dict per group: dtype, op, path, temperature, gamma_s_per_byte and its CI (the slope
    of the last segment, as ``fit_gamma``), the rate in GB/s (1 / gamma) and the sizes; a
    group whose fit fails carries ``error`` instead.  The path tells which code reduces:
    ``mpi`` is the library's own (MPI_Reduce_local, what native collectives pay), ``numpy``
    is what ccbench's hand-written algorithms call (``ccbench.measure.gamma``).
    """
    recs = list(records)
    groups: dict[tuple, list[Mapping]] = {}
    for r in recs:
        key = (str(r.get("dtype")), str(r.get("op")), r.get("path", "numpy"), r.get("temperature", "warm"))
        groups.setdefault(key, []).append(r)
    out = []
    for (dtype, op, path, temp), group in sorted(groups.items()):
        entry = {"dtype": dtype, "op": op, "path": path, "temperature": temp,
                 "sizes": sorted({int(r["nbytes"]) for r in group})}
        try:
            seg = fit_gamma(group, **kw).segmented.segments[-1]
        except CCBenchError as exc:
            entry["error"] = str(exc)
        else:
            entry.update(gamma_s_per_byte=seg.beta_s_per_byte, gamma_ci_s_per_byte=seg.beta_ci_s_per_byte,
                         gbs=_gbs(seg.beta_s_per_byte))
        out.append(entry)
    return out


def network_from_microbenchmarks(
    pingpong_rows: Iterable[Mapping],
    reduction_records: Iterable[Mapping] = (),
    *,
    dtype: str | None = None,
    op: str | None = None,
    **kw,
) -> NetworkParams:
    """alpha, beta from ping-pong and gamma from the local reduction benchmark.

    alpha is the intercept of the first (small-size) segment of the ping-pong fit: the
    latency of the protocol small messages use.  beta is the slope of the last
    (large-size) segment: the bandwidth of the protocol large messages use.  gamma is the
    slope of the last segment of the reduction fit (None without records).  With one
    segment these are the single line's values (Hockney 1994).
    """
    pp = fit_pingpong(pingpong_rows, **kw)
    first, last = pp.segmented.segments[0], pp.segmented.segments[-1]
    notes = [f"pingpong: {pp.segmented.n_segments} segment(s)"]
    gamma = gamma_ci = None
    recs = list(reduction_records)
    if recs:
        g = fit_gamma(recs, dtype=dtype, op=op, **kw)
        gamma, gamma_ci = g.segmented.segments[-1].beta_s_per_byte, g.segmented.segments[
            -1
        ].beta_ci_s_per_byte
        notes.append(f"gamma from {g.dtype}/{g.op}, {g.segmented.n_segments} segment(s)")
    else:
        notes.append("gamma unknown: no reduction records")
    return NetworkParams(
        alpha_s=first.alpha_s,
        beta_s_per_byte=last.beta_s_per_byte,
        gamma_s_per_byte=gamma,
        alpha_ci_s=first.alpha_ci_s,
        beta_ci_s_per_byte=last.beta_ci_s_per_byte,
        gamma_ci_s_per_byte=gamma_ci,
        source="pingpong",
        r2=pp.segmented.r2,
        max_rel_residual=pp.segmented.max_rel_residual,
        n_points=pp.line.n_sizes,
        breakpoints_bytes=pp.segmented.breakpoints_bytes,
        notes=tuple(notes),
    )


def _bootstrap_rows(rows, fitted: np.ndarray, rel: np.ndarray, n_boot: int, rng) -> tuple:
    """(bootstrap replicates of the rows' medians or None, how they were drawn) for a fit over `rows`.

    Rows with their samples: each replicate resamples every row's samples (a row of several
    launches resamples its launches, then samples within them: ``bootstrap_medians``); a row
    without samples makes the whole fit resample its relative residuals instead.
    """
    samples = [_clean_samples(row_samples(r)) for r in rows]
    if n_boot <= 0:
        return None, "none"
    if all(s is not None for s in samples):
        blocks = any(isinstance(s, LaunchBlocks) for s in samples)
        return bootstrap_medians(samples, n_boot, rng), "launches, then samples" if blocks else "samples"
    return bootstrap_residuals(fitted, rel, n_boot, rng), "residuals"


def fit_joint(
    rows: Iterable[Mapping],
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> NetworkParams:
    """alpha, beta, gamma fitted jointly: T = steps alpha + step_bytes beta + reduced gamma.

    The regressors are the counted traffic of each hand-written case (``steps_max``,
    ``step_bytes_max``, ``reduced_bytes_max``: per call, maximised over ranks), the cost
    model of Thakur, Rabenseifner & Gropp (2005).  Rows without counts (native
    algorithms) or with no traffic are ignored.  Relative weighting as in `fit_line`;
    non-negative least squares (Lawson & Hanson 1974); percentile bootstrap intervals over
    each row's raw samples (Efron & Tibshirani 1993), or over relative residuals when a
    row lacks samples.  A parameter whose regressor is zero in every row is None.
    """
    use = []
    for r in rows:
        if any(r.get(k) is None for k in COUNT_KEYS):
            continue
        t = r.get("median_s")
        if t is None or not (t > 0) or not math.isfinite(t):
            continue
        if all(float(r[k]) == 0 for k in COUNT_KEYS):
            continue
        use.append(r)
    if len(use) < 3:
        raise CCBenchError(
            "a joint fit needs at least 3 rows of hand-written algorithms with counted traffic"
        )
    X = np.array([[float(r[k]) for k in COUNT_KEYS] for r in use])
    y = np.array([float(r["median_s"]) for r in use])
    cols = [j for j in range(3) if np.any(X[:, j] != 0)]
    theta = np.full(3, math.nan)
    theta[cols] = nnls_relative(X[:, cols], y[None, :])[0]
    fitted = X[:, cols] @ theta[cols]
    rel = (y - fitted) / y
    Yb, method = _bootstrap_rows(use, fitted, rel, n_boot, np.random.default_rng(seed))
    cis = [None, None, None]
    if Yb is not None:
        tb = nnls_relative(X[:, cols], Yb)
        for i, j in enumerate(cols):
            cis[j] = percentile_ci(tb[:, i], confidence)
    names = ("alpha", "beta", "gamma")
    notes = [f"{len(use)} rows, bootstrap: {method}"]
    notes += [f"{names[j]} not identifiable: its regressor is zero in every row"
              for j in range(3) if j not in cols]
    notes += [f"{names[j]} at the zero bound" for j in cols if theta[j] == 0]

    def val(j):
        return None if j not in cols else float(theta[j])

    if val(0) is None or val(1) is None:
        raise CCBenchError("a joint fit needs rows with both messages and bytes")
    return NetworkParams(
        alpha_s=val(0),
        beta_s_per_byte=val(1),
        gamma_s_per_byte=val(2),
        alpha_ci_s=cis[0],
        beta_ci_s_per_byte=cis[1],
        gamma_ci_s_per_byte=cis[2],
        source="joint",
        r2=weighted_r2(y, fitted),
        max_rel_residual=float(np.max(np.abs(rel))),
        n_points=len(use),
        notes=tuple(notes),
    )


def fit_effective(
    rows: Sequence[Mapping],
    terms: Sequence[tuple[float, float]],
    reduction_s: Sequence[float],
    *,
    path: str,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> NetworkParams:
    """Effective alpha and beta of one path: T = steps alpha + bytes beta + (reduction at the path's gamma).

    `terms` are each row's closed-form (steps, bytes) along its critical path (Thakur,
    Rabenseifner & Gropp 2005: the registry's costs, for native rows those of their textbook
    algorithm); `reduction_s` is each row's reduction priced at the measured gamma of its
    path and temperature, held fixed -- the gamma the path pays is measured, not fitted, so
    that alpha and beta are what the path's collectives see of the machine.  Relative
    weights, non-negative least squares (Lawson & Hanson 1974) and bootstrap intervals as in
    `fit_joint`.  At least 3 rows with positive times; both a step and a byte term somewhere.
    """
    keep = [i for i, r in enumerate(rows)
            if r.get("median_s") is not None and math.isfinite(r["median_s"]) and r["median_s"] > 0
            and all(math.isfinite(v) for v in (*terms[i], reduction_s[i]))]
    if len(keep) < 3:
        raise CCBenchError(f"an effective fit of the {path} path needs at least 3 modelled rows, got {len(keep)}")
    X = np.array([terms[i] for i in keep], dtype=float)
    y = np.array([float(rows[i]["median_s"]) for i in keep])
    off = np.array([float(reduction_s[i]) for i in keep])
    if not (np.any(X[:, 0] > 0) and np.any(X[:, 1] > 0)):
        raise CCBenchError(f"an effective fit of the {path} path needs rows with both messages and bytes")
    theta = nnls_relative(X, y[None, :], off)[0]
    fitted = X @ theta + off
    rel = (y - fitted) / y
    Yb, method = _bootstrap_rows([rows[i] for i in keep], fitted, rel, n_boot, np.random.default_rng(seed))
    cis = [None, None]
    if Yb is not None:
        tb = nnls_relative(X, Yb, off)
        cis = [percentile_ci(tb[:, 0], confidence), percentile_ci(tb[:, 1], confidence)]
    notes = [f"{path} path: {len(keep)} rows, bootstrap: {method}"]
    notes += [f"{name} at the zero bound" for name, v in zip(("alpha", "beta"), theta, strict=True) if v == 0]
    return NetworkParams(
        alpha_s=float(theta[0]),
        beta_s_per_byte=float(theta[1]),
        alpha_ci_s=cis[0],
        beta_ci_s_per_byte=cis[1],
        source="effective",
        r2=weighted_r2(y, fitted),
        max_rel_residual=float(np.max(np.abs(rel))),
        n_points=len(keep),
        notes=tuple(notes),
    )


def reduction_gammas(records: Iterable[Mapping], *, dtype: str | None = None, op: str | None = None,
                     ranks_per_node: int | None = None, **kw) -> dict:
    """gamma of both paths, warm and cold, and the size above which a buffer pays the cold rate.

    Returns the NetworkParams gamma fields: ``gamma_s_per_byte`` (numpy, warm; what
    ``network_from_microbenchmarks`` fits), ``gamma_cold_s_per_byte``,
    ``library_gamma_s_per_byte`` and ``library_gamma_cold_s_per_byte`` (MPI_Reduce_local),
    each the last segment's slope of its own fit (`gamma_per_path`; None when not measured or
    not fittable), and ``cold_above_bytes``: the buffer size beyond which the node's ranks
    no longer keep their operands in the last-level cache -- the cache size stated by the
    cold records (``llc_bytes``, else DEFAULT_LLC_BYTES) shared by ``ranks_per_node`` ranks
    (1 when unknown).  None when no cold rate was measured.  ``notes`` says which was used.
    """
    recs = [r for r in records
            if (dtype is None or r.get("dtype") == dtype) and (op is None or r.get("op") == op)]
    got = {(g["path"], g["temperature"]): g.get("gamma_s_per_byte") for g in gamma_per_path(recs, **kw)}
    llc = next((r.get("llc_bytes") for r in recs if r.get("llc_bytes")), None)
    share = max(1, int(ranks_per_node or 1))
    cold = any(t == "cold" and v is not None for (_, t), v in got.items())
    above = (llc or DEFAULT_LLC_BYTES) / share if cold else None
    notes = []
    if cold:
        notes.append(f"cold gamma above {above / (1 << 20):.3g} MiB per rank: the last-level cache "
                     f"({'stated by the records' if llc else 'not stated; assumed'} "
                     f"{(llc or DEFAULT_LLC_BYTES) / (1 << 20):.3g} MiB) shared by {share} rank(s) per node")
    else:
        notes.append("no cold reduction timings: every size pays the warm gamma")
    if got.get(("mpi", "warm")) is None:
        notes.append("no MPI_Reduce_local timings: native algorithms are priced with numpy's gamma")
    return {"gamma_s_per_byte": got.get(("numpy", "warm")), "gamma_cold_s_per_byte": got.get(("numpy", "cold")),
            "library_gamma_s_per_byte": got.get(("mpi", "warm")),
            "library_gamma_cold_s_per_byte": got.get(("mpi", "cold")), "cold_above_bytes": above,
            "notes": tuple(notes)}


def compare_params(reference: NetworkParams, other: NetworkParams) -> list[ParamComparison]:
    """Both estimates of alpha, beta and gamma side by side: ratio other / reference.

    ``cis_overlap`` is whether the two confidence intervals intersect (None when either is
    missing) -- a rough agreement check, not a significance test.
    """
    out = []
    for name, ci_name in (
        ("alpha_s", "alpha_ci_s"),
        ("beta_s_per_byte", "beta_ci_s_per_byte"),
        ("gamma_s_per_byte", "gamma_ci_s_per_byte"),
    ):
        a, b = getattr(reference, name), getattr(other, name)
        ratio = b / a if a is not None and b is not None and a != 0 else None
        ca, cb = getattr(reference, ci_name), getattr(other, ci_name)
        overlap = None
        if ca is not None and cb is not None and all(map(math.isfinite, (*ca, *cb))):
            overlap = bool(ca[0] <= cb[1] and cb[0] <= ca[1])
        out.append(
            ParamComparison(name, a, b, ratio, overlap, reference.source, other.source)
        )
    return out
