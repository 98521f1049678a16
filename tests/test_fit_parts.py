"""Finer checks of ccbench.analysis.fit's parts against answers derived by hand (no MPI).

Each test computes its expectation independently: a closed form worked out on paper, a
second implementation (``np.polyfit``), or a property the documented method must have
(a residual bootstrap only draws the observed residuals, a bootstrap of constant launches
only yields geometric means of those constants).
"""

import math

import numpy as np
import pytest

from ccbench.analysis import fit
from ccbench.analysis.fit import NetworkParams
from ccbench.core.errors import CCBenchError
from ccbench.core.estimators import (
    LaunchBlocks,
)


def _red(path, temp, sizes, gamma, overhead=1e-6, **extra):
    """Noise-free local-reduction records (5 equal samples each) of T = overhead + gamma n."""
    return [dict(path=path, temperature=temp, dtype="float32", op="sum", nbytes=int(n),
                 seconds=[overhead + gamma * n] * 5, **extra) for n in sizes]


def _wls_slope(x, y):
    """The slope of the 1/y^2-weighted line, by np.polyfit (its w multiplies residuals: w = 1/y)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(np.polyfit(x, y, 1, w=1.0 / y)[0])


# --------------------------------------------------------------------------- core maths


def test_from_dict_turns_null_interval_bounds_back_into_nan():
    """A strict-JSON interval stores nan as null; reading it back gives nan, other bounds unchanged."""
    p = NetworkParams.from_dict({"alpha_s": 1e-6, "beta_s_per_byte": 1e-10, "alpha_ci_s": [None, 2e-6],
                                 "beta_ci_s_per_byte": [5e-11, None], "gamma_ci_s_per_byte": None,
                                 "notes": None, "bandwidth_gbs": 10.0})
    assert math.isnan(p.alpha_ci_s[0]) and p.alpha_ci_s[1] == 2e-6
    assert p.beta_ci_s_per_byte[0] == 5e-11 and math.isnan(p.beta_ci_s_per_byte[1])
    assert p.gamma_ci_s_per_byte is None and p.notes == ()


def test_params_from_dict_tells_path_params_from_network_params():
    """Both keys numpy and mpi make PathParams (source and notes kept, source "effective" by default).

    Any other dict is a NetworkParams, whose unknown keys -- even one named like a path -- are ignored.
    """
    numpy, mpi = NetworkParams(1e-6, 1e-10, source="effective"), NetworkParams(2e-6, 2e-10, source="effective")
    given = fit.PathParams(numpy, mpi, source="given", notes=("by hand",))
    assert fit.params_from_dict(given.to_dict()) == given
    bare = {"numpy": numpy.to_dict(), "mpi": mpi.to_dict()}
    assert fit.params_from_dict(bare) == fit.PathParams(numpy, mpi, "effective", ())
    net = NetworkParams(3e-6, 4e-10, 1e-10, source="pingpong", notes=("n",))
    assert fit.params_from_dict(net.to_dict()) == net
    assert fit.params_from_dict(dict(net.to_dict(), mpi={"alpha_s": 1.0})) == net


# --------------------------------------------------------------------------- fit_line / fit_curves


def test_fit_line_interval_method_follows_samples_and_n_boot():
    """With samples: n_boot > 0 resamples them (even n_boot = 1), n_boot = 0 makes no intervals.

    Without samples the relative residuals are resampled (seeded: the same call gives the same
    intervals).
    """
    x = np.array([8.0, 64.0, 512.0, 4096.0, 32768.0])
    y = 2e-6 + 1e-10 * x
    s = [t * np.array([0.98, 1.0, 1.02]) for t in y]
    zero = fit.fit_line(x, y, s, n_boot=0)
    assert zero.bootstrap == "none" and zero.n_boot == 0 and "no_intervals" in zero.flags
    one = fit.fit_line(x, y, s, n_boot=1)
    assert one.bootstrap == "samples" and one.n_boot == 1 and "no_intervals" not in one.flags
    noisy = y * np.array([1.02, 0.97, 1.01, 0.99, 1.03])
    res = fit.fit_line(x, noisy, n_boot=50)
    assert res.bootstrap == "residuals" and res.n_boot == 50 and "residual_bootstrap" in res.flags
    assert res == fit.fit_line(x, noisy, n_boot=50)
    assert res.alpha_ci_s[0] < res.alpha_s < res.alpha_ci_s[1]


def _rows(sizes, algorithm="ring"):
    return [dict(collective="allreduce", algorithm=algorithm, nranks=4, nbytes=int(n),
                 median_s=2e-6 + 1e-10 * n, samples_s=None) for n in sizes]


def test_fit_curves_default_minimum_is_three_sizes_and_never_below_two():
    """Default min_sizes = 3; min_sizes = 2 fits two-size curves; min_sizes 1 still needs 2; kw reach fit_curve."""
    rows = _rows([8, 64, 512], "three") + _rows([8, 64], "two") + _rows([8], "one")
    assert [f.algorithm for f in fit.fit_curves(rows, n_boot=0)] == ["three"]
    assert [f.algorithm for f in fit.fit_curves(rows, min_sizes=2, n_boot=0)] == ["three", "two"]
    got = fit.fit_curves(rows, min_sizes=1, n_boot=0)
    assert [f.algorithm for f in got] == ["three", "two"]
    assert all(f.line.bootstrap == "none" and f.line.n_boot == 0 for f in got)   # n_boot=0 passed on


# --------------------------------------------------------------------------- gamma


def test_gamma_per_path_defaults_to_numpy_warm_and_passes_options_on():
    """Records without path/temperature are numpy's warm ones; fit options (n_boot) reach the fits."""
    recs = [{k: v for k, v in r.items() if k not in ("path", "temperature")}
            for r in _red("numpy", "warm", (4096, 65536, 1 << 20), 3e-11)]
    (g,) = fit.gamma_per_path(recs, n_boot=0)
    assert (g["path"], g["temperature"], g["dtype"], g["op"]) == ("numpy", "warm", "float32", "sum")
    assert g["sizes"] == [4096, 65536, 1 << 20]
    assert g["gamma_s_per_byte"] == pytest.approx(3e-11, rel=1e-9, abs=0)
    assert all(math.isnan(v) for v in g["gamma_ci_s_per_byte"])                  # no bootstrap asked for
    assert g["gbs"] == pytest.approx(1e-9 / 3e-11)


def test_gamma_per_path_error_is_the_fits_message():
    """A group with one size cannot be fitted: its entry carries fit_curve's own message."""
    (g,) = fit.gamma_per_path(_red("mpi", "cold", (1 << 20,), 1e-10), n_boot=0)
    assert g["error"] == "local-reduction/numpy: a fit needs at least two distinct sizes with positive times"
    assert (g["path"], g["temperature"], g["sizes"]) == ("mpi", "cold", [1 << 20])


def test_reduction_gammas_pass_fit_options_and_name_a_stated_cache():
    """max_segments=1 reaches the fits: gamma is then the single weighted line's slope (np.polyfit).

    The records state their cache (llc_bytes = 8 MiB): the note says so.
    """
    sizes = [1 << k for k in range(10, 21, 2)]                 # 1 KiB .. 1 MiB, six sizes
    t = [1e-6 + 3e-11 * n if n <= 16384 else 2e-5 + 1e-10 * n for n in sizes]   # a knee at 16 KiB
    recs = [dict(path="numpy", temperature="warm", dtype="float32", op="sum", nbytes=n, seconds=[v] * 3)
            for n, v in zip(sizes, t, strict=True)]
    cold = [dict(r, temperature="cold", llc_bytes=8 << 20) for r in recs]
    one = fit.reduction_gammas(recs + cold, max_segments=1, n_boot=0)
    assert one["gamma_s_per_byte"] == pytest.approx(_wls_slope(sizes, t), rel=1e-9, abs=0)
    assert one["gamma_cold_s_per_byte"] == pytest.approx(_wls_slope(sizes, t), rel=1e-9, abs=0)
    seg = fit.reduction_gammas(recs + cold, n_boot=0)
    assert seg["gamma_s_per_byte"] == pytest.approx(1e-10, rel=1e-9, abs=0)            # the last segment's slope
    assert seg["cold_above_bytes"] == 8 << 20
    assert seg["notes"][0] == ("cold gamma above 8 MiB per rank: the last-level cache (stated by the records "
                               "8 MiB) shared by 1 rank(s) per node")


# --------------------------------------------------------------------------- effective parameters


def test_effective_fit_bootstrap_is_seeded():
    """The same seed gives the same intervals; another seed other ones (resampled raw samples)."""
    rng = np.random.default_rng(3)
    terms = [(2.0, 8.0), (4.0, 64.0), (2.0, 4096.0), (6.0, 65536.0), (2.0, 1 << 20), (4.0, 4 << 20)]
    rows = []
    for st, n in terms:
        s = (st * 2e-6 + n * 1e-10) * np.exp(rng.normal(0.0, 0.05, 15))
        rows.append({"median_s": float(np.median(s)), "samples_s": s.tolist()})
    kw = dict(path="numpy", n_boot=40)
    a = fit.fit_effective(rows, terms, [0.0] * 6, **kw)
    assert a.notes[0] == "numpy path: 6 rows, bootstrap: samples"
    assert fit.fit_effective(rows, terms, [0.0] * 6, **kw) == a
    assert fit.fit_effective(rows, terms, [0.0] * 6, seed=1, **kw).alpha_ci_s != a.alpha_ci_s


def test_effective_fit_says_when_beta_is_at_the_zero_bound():
    """Times that grow with the steps only: NNLS puts beta at 0 and the notes say so."""
    terms = [(1.0, 1e3), (2.0, 1e5), (4.0, 1e7)]
    rows = [dict(median_s=s * 3e-6) for s, _ in terms]
    p = fit.fit_effective(rows, terms, [0.0] * 3, path="numpy", n_boot=0)
    assert p.beta_s_per_byte == 0.0 and p.alpha_s == pytest.approx(3e-6, rel=1e-9, abs=0)
    assert p.notes == ("numpy path: 3 rows, bootstrap: none", "beta at the zero bound")
    with pytest.raises(CCBenchError):
        fit.fit_effective(rows[:2], terms[:2], [0.0] * 2, path="numpy", n_boot=0)


# --------------------------------------------------------------------------- segments

# a noise-free curve with a jump at 4 KiB: 2 us + 0.1 ns/B below, 20 us + 0.05 ns/B from 4 KiB on
KNEE_X = np.array([8.0 * 4**i for i in range(8)])                  # 8 B .. 128 KiB: 5 sizes below, 3 above
KNEE_Y = np.where(KNEE_X < 4096, 2e-6 + 1e-10 * KNEE_X, 2e-5 + 5e-11 * KNEE_X)


def _rel_rss_polyfit(x, y):
    b, a = np.polyfit(x, y, 1, w=1.0 / y)
    r = (y - a - b * x) / y
    return float(r @ r)


def test_segmented_fit_of_an_exact_two_piece_curve():
    """Two exact lines: each segment's sizes and coefficients, the breakpoint, BIC by hand, flags."""
    f = fit.fit_segments(KNEE_X, KNEE_Y, n_boot=0)
    lo, hi = f.segments
    assert (lo.nbytes_lo, lo.nbytes_hi, lo.n_sizes) == (8, 2048, 5)
    assert (hi.nbytes_lo, hi.nbytes_hi, hi.n_sizes) == (8192, 131072, 3)
    assert f.breakpoints_bytes == (8192,)
    assert lo.alpha_s == pytest.approx(2e-6, rel=1e-9, abs=0)
    assert lo.beta_s_per_byte == pytest.approx(1e-10, rel=1e-6, abs=0)
    assert hi.alpha_s == pytest.approx(2e-5, rel=1e-9, abs=0)
    assert hi.beta_s_per_byte == pytest.approx(5e-11, rel=1e-9, abs=0)
    n = 8
    floor = n * math.log(1e-12)                                     # RSS/n floored at (1e-6)^2
    assert f.bic[0] == pytest.approx(n * math.log(_rel_rss_polyfit(KNEE_X, KNEE_Y) / n) + 2 * math.log(n))
    assert f.bic[1] == pytest.approx(floor + 5 * math.log(n))
    assert math.isnan(f.bic[2])                                     # 3 segments of >= 3 sizes need 9
    assert f.flags == ("no_intervals", "protocol_change")
    assert f.r2 == pytest.approx(1.0) and f.max_rel_residual < 1e-9
    assert all(math.isnan(v) for v in (*lo.alpha_ci_s, *hi.beta_ci_s_per_byte))
    assert f.criterion == "BIC" and f.to_dict()["n_segments"] == 2


def test_segmented_fit_keeps_one_line_when_a_jump_is_too_small_to_matter():
    """A 2% step is below the 5% practical-significance guard: one segment, though BIC prefers two."""
    y = np.where(KNEE_X < 4096, 1.0, 1.02) * (2e-6 + 1e-10 * KNEE_X)
    f = fit.fit_segments(KNEE_X, y, n_boot=0)
    assert f.bic[1] < f.bic[0]
    assert f.n_segments == 1 and f.breakpoints_bytes == () and f.flags == ("no_intervals",)
    seg = f.segments[0]
    assert (seg.nbytes_lo, seg.nbytes_hi, seg.n_sizes) == (8, 131072, 8)
    b, a = np.polyfit(KNEE_X, y, 1, w=1.0 / y)
    assert seg.alpha_s == pytest.approx(a, rel=1e-9, abs=0) and seg.beta_s_per_byte == pytest.approx(b, rel=1e-9, abs=0)
    fitted = a + b * KNEE_X
    assert f.max_rel_residual == pytest.approx(np.max(np.abs((y - fitted) / y)), rel=1e-9)
    w = 1 / y**2
    ybar = (w * y).sum() / w.sum()
    assert f.r2 == pytest.approx(1 - (w * (y - fitted) ** 2).sum() / (w * (y - ybar) ** 2).sum(), rel=1e-9)
    big = np.where(KNEE_X < 4096, 1.0, 1.10) * (2e-6 + 1e-10 * KNEE_X)   # a 10% step is kept
    assert fit.fit_segments(KNEE_X, big, n_boot=0).breakpoints_bytes == (8192,)


def test_segmented_fit_with_few_sizes():
    """Two sizes: one exact segment, no intervals; three: residual bootstrap; k segments need 3k sizes."""
    two = fit.fit_segments([8, 64], [1e-6, 2e-6], n_boot=100)
    assert two.n_segments == 1 and two.flags == ("no_intervals",)
    assert two.segments[0].beta_s_per_byte == pytest.approx(1e-6 / 56, rel=1e-9, abs=0)
    assert two.bic[0] == pytest.approx(2 * math.log(1e-12) + 2 * math.log(2))
    assert math.isnan(two.bic[1]) and math.isnan(two.bic[2])
    three = fit.fit_segments([8, 64, 512], [1e-6, 2e-6, 2.5e-6], n_boot=100)
    assert three.flags == ("residual_bootstrap",)
    assert three.segments[0].alpha_ci_s[0] <= three.segments[0].alpha_s <= three.segments[0].alpha_ci_s[1]
    with pytest.raises(CCBenchError, match="at least two distinct sizes"):
        fit.fit_segments([8, 8], [1e-6, 2e-6])
    # min_points below 2 is raised to 2: 2 + 2 sizes make two segments of an exact jump
    x, y = [8, 16, 1024, 2048], [1e-6, 1.1e-6, 1e-5, 1.1e-5]
    f = fit.fit_segments(x, y, max_segments=2, min_points=1, n_boot=0)
    assert f.breakpoints_bytes == (1024,) and [s.n_sizes for s in f.segments] == [2, 2]
    assert fit.fit_segments(x, y, max_segments=0, n_boot=0).n_segments == 1      # at least one segment


def test_segment_intervals_come_from_the_segments_own_sizes():
    """With raw samples, a segment's bootstrap interval is that of the line through its own sizes only."""
    rng = np.random.default_rng(2)
    samples = [t * np.exp(rng.normal(0, 0.02, 25)) for t in KNEE_Y]
    med = [float(np.median(s)) for s in samples]
    f = fit.fit_segments(KNEE_X, med, samples, n_boot=300)
    assert f.flags == ("protocol_change",)
    lo_alone = fit.fit_line(KNEE_X[:5], med[:5], samples[:5], n_boot=300)
    hi_alone = fit.fit_line(KNEE_X[5:], med[5:], samples[5:], n_boot=300)
    lo, hi = f.segments
    assert lo.alpha_s == pytest.approx(lo_alone.alpha_s, rel=1e-9, abs=0)
    assert hi.beta_s_per_byte == pytest.approx(hi_alone.beta_s_per_byte, rel=1e-9, abs=0)
    for ci in (lo.alpha_ci_s, lo.beta_ci_s_per_byte, hi.alpha_ci_s, hi.beta_ci_s_per_byte):
        assert ci[0] < ci[1]
    # similar widths (other draws of the same distribution): within a factor 1.5
    assert 1 / 1.5 < np.ptp(lo.alpha_ci_s) / np.ptp(lo_alone.alpha_ci_s) < 1.5
    assert 1 / 1.5 < np.ptp(hi.beta_ci_s_per_byte) / np.ptp(hi_alone.beta_ci_s_per_byte) < 1.5


# --------------------------------------------------------------------------- one line: fields


def test_line_fields_by_hand():
    """Sizes, the largest relative residual and where it is, R^2, the refusal of one size."""
    x = np.array([8.0, 64.0, 512.0, 4096.0])
    y = (1e-6 + 1e-9 * x) * np.array([1.0, 1.0, 1.3, 1.0])           # one size 30% slow
    f = fit.fit_line(x, y, n_boot=0)
    b, a = np.polyfit(x, y, 1, w=1.0 / y)
    r = (y - a - b * x) / y
    assert f.alpha_s == pytest.approx(a, rel=1e-9, abs=0) and f.beta_s_per_byte == pytest.approx(b, rel=1e-9, abs=0)
    assert f.max_rel_residual == pytest.approx(np.max(np.abs(r)), rel=1e-9)
    assert f.max_rel_residual_nbytes == int(x[np.argmax(np.abs(r))]) == 512
    assert (f.n_sizes, f.nbytes_min, f.nbytes_max, f.confidence) == (4, 8, 4096, 0.95)
    assert f.flags == ("no_intervals",)
    with pytest.raises(CCBenchError, match="at least two distinct sizes"):
        fit.fit_line([8, 8, 8], [1e-6, 1e-6, 1e-6])
    # two sizes: nothing to resample, even when asked
    assert fit.fit_line([8, 64], [1e-6, 2e-6], n_boot=100).bootstrap == "none"


def test_confidence_sets_the_percentiles():
    """A narrower confidence level gives a narrower interval nested in the wider one."""
    rng = np.random.default_rng(4)
    x = np.array([8.0 * 4**i for i in range(6)])
    s = [(2e-6 + 1e-10 * n) * np.exp(rng.normal(0, 0.05, 20)) for n in x]
    med = [float(np.median(v)) for v in s]
    wide = fit.fit_line(x, med, s, n_boot=400, confidence=0.95)
    narrow = fit.fit_line(x, med, s, n_boot=400, confidence=0.5)
    assert narrow.confidence == 0.5
    assert wide.alpha_ci_s[0] < narrow.alpha_ci_s[0] < narrow.alpha_ci_s[1] < wide.alpha_ci_s[1]


# --------------------------------------------------------------------------- preparing points, samples


def _line_through(f, x0, y0, x1, y1):
    """`f` (a LineFit) is the line through (x0, y0) and (x1, y1): two sizes fit exactly, whatever the weights."""
    b = (y1 - y0) / (x1 - x0)
    assert f.beta_s_per_byte == pytest.approx(b, rel=1e-9) and f.alpha_s == pytest.approx(y0 - b * x0, rel=1e-9)


def test_a_fit_sorts_sizes_pools_a_repeated_size_and_drops_bad_times():
    """Sizes sorted; a repeated size's samples pooled and its median recomputed; a non-positive or NaN time and a
    negative size dropped."""
    f = fit.fit_line([64, 8, 64, 16, -8, 32], [3.0, 1.0, 5.0, 0.0, 1.0, math.nan],
                     [[2.0, 4.0], [1.0, 1.0], [5.0, 6.0, 7.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]], n_boot=400)
    assert (f.n_sizes, f.nbytes_min, f.nbytes_max, f.bootstrap) == (2, 8, 64, "samples")
    _line_through(f, 8, 1.0, 64, 5.0)                                 # 5: the median of 2, 4, 5, 6, 7
    # the replicates resample the pooled samples of 64 (size 8's are constant): a median of 2 or of 7 has
    # probability P(3 or more of 5 draws) = 0.058 each, so the 95% interval of beta is (2 - 1, 7 - 1) / 56
    assert f.beta_ci_s_per_byte == pytest.approx((1 / 56, 6 / 56), rel=1e-9)


def test_a_fit_takes_the_median_of_medians_where_a_size_has_no_samples_and_then_resamples_residuals():
    f = fit.fit_line([8, 8, 8, 16, 32], [1.0, 2.0, 9.0, 3.0, 5.0], [None, None, None, [3.0, 3.0], [5.0, 5.0]],
                     n_boot=50)
    assert f.bootstrap == "residuals" and f.n_sizes == 3
    _line_through(f, 8, 2.0, 16, 3.0)                                  # 2: the median of 1, 2, 9; 32 on the line
    z = fit.fit_line([0, 8], [1.0, 2.0], n_boot=0)                     # size 0 is a size; no samples given
    assert (z.nbytes_min, z.bootstrap) == (0, "none")
    _line_through(z, 0, 1.0, 8, 2.0)


def test_a_fit_refuses_sizes_times_and_samples_of_different_lengths():
    with pytest.raises(CCBenchError, match="nbytes and median_s differ in length"):
        fit.fit_line([8, 16], [1.0])
    with pytest.raises(CCBenchError, match="samples_s and median_s differ in length"):
        fit.fit_line([8, 16], [1.0, 2.0], [[1.0, 1.0]])


def _curve_rows(*rows):
    return [dict(collective="allreduce", algorithm="ring", nranks=2, **r) for r in rows]


def test_rows_of_one_size_measured_in_launches_pool_every_launch_as_its_own():
    """Every launch of every row of a repeated size becomes its own launch (also of unequal lengths, beside a row
    of one launch); the median is that of all their samples, and the replicates resample launches first."""
    f = fit.fit_curve(_curve_rows(
        dict(nbytes=8, median_s=2.0, samples_s=[1.0, 2.0, 3.0, 4.0], launches=[1, 2], launch_samples=[2, 2]),
        dict(nbytes=8, median_s=9.0, samples_s=[9.0, 10.0]),
        dict(nbytes=16, median_s=1.0, samples_s=[1.0, 1.0])), n_boot=50)
    assert f.line.bootstrap == "launches, then samples"
    _line_through(f.line, 8, 3.5, 16, 1.0)                             # the median of 1, 2, 3, 4, 9, 10
    g = fit.fit_curve(_curve_rows(
        dict(nbytes=8, median_s=9.0, samples_s=[1.0, 2.0, 3.0, 4.0, 5.0], launches=[1, 2], launch_samples=[2, 3]),
        dict(nbytes=8, median_s=9.0, samples_s=[6.0, 7.0]),
        dict(nbytes=16, median_s=1.0, samples_s=[1.0, 1.0])), n_boot=50)
    assert g.line.bootstrap == "launches, then samples"
    _line_through(g.line, 8, 4.0, 16, 1.0)                             # the median of 1 ... 7


def test_null_sizes_times_and_samples_are_dropped():
    """JSON nulls (how strict JSON stores a non-finite number) in sizes, times or samples are dropped, not fatal."""
    n = [1e3, 2e3, 4e3, 8e3, 16e3]
    t = [2e-6 + 1e-10 * v for v in n]
    a = fit.fit_line([n[0], None, n[2], n[3], n[4]], [t[0], t[1], None, t[3], t[4]], n_boot=0)
    assert a.n_sizes == 3 and (a.nbytes_min, a.nbytes_max) == (1000, 16000)
    assert a.alpha_s == pytest.approx(2e-6, rel=1e-9, abs=0)
    assert a.beta_s_per_byte == pytest.approx(1e-10, rel=1e-9, abs=0)
    # a null sample is dropped, the two others kept: the replicates resample samples
    assert fit.fit_line([8, 16], [1.5, 3.0], [[1.0, None, 2.0], [3.0, 3.0]], n_boot=50).bootstrap == "samples"
    # launches with no valid sample left: no samples at all, so the replicates resample residuals
    dead = LaunchBlocks([np.array([math.nan, 0.0]), np.array([-1.0])])
    got = fit.fit_line([8, 16, 32], [1.0, 2.0, 4.0], [dead, [2.0, 2.0], [4.0, 4.0]], n_boot=50)
    assert got.bootstrap == "residuals"


def test_row_samples_split_only_when_the_launch_counts_add_up():
    """Two or more launches whose counts sum to the samples: one block each; anything else: one array."""
    row = dict(samples_s=[1.0, 2.0, 3.0, 4.0, 5.0], launches=[1, 2], launch_samples=[2, 3])
    got = fit.row_samples(row)
    assert isinstance(got, LaunchBlocks) and [b.tolist() for b in got] == [[1.0, 2.0], [3.0, 4.0, 5.0]]
    for other in (dict(row, launch_samples=[2, 2]), dict(row, launches=[1, 2, 3]),
                  dict(row, launches=[1], launch_samples=[5]), dict(row, launches=None, launch_samples=None)):
        flat = fit.row_samples(other)
        assert not isinstance(flat, LaunchBlocks) and flat.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert fit.row_samples(dict(median_s=1.0)) is None
    assert fit.row_samples(dict(samples_s=[[1.0], [2.0]])).tolist() == [1.0, 2.0]


# --------------------------------------------------------------------------- curves, ping-pong, gamma


def test_fit_curve_records_the_first_rows_keys_and_merges_flags():
    """The key fields come from the first row; flags of line and segments once each, line's first."""
    rows = [dict(collective="bcast", algorithm="binomial", nranks=8, dtype="uint8", op=None, in_place=False,
                 root=3, nbytes=n, median_s=2e-6 + 1e-10 * n * f, samples_s=None)
            for n, f in ((8, 1.0), (64, 1.0), (512, 1.0))]
    f = fit.fit_curve(rows, n_boot=20)
    assert (f.collective, f.algorithm, f.nranks, f.dtype, f.op, f.in_place, f.root) == (
        "bcast", "binomial", 8, "uint8", None, False, 3)
    assert f.key == ("bcast", "binomial", 8)
    assert f.flags == ("few_sizes", "residual_bootstrap")
    assert f.line.bootstrap == "residuals" and f.line.n_boot == 20
    with pytest.raises(CCBenchError, match="no rows to fit"):
        fit.fit_curve([])
    with pytest.raises(CCBenchError, match="^bcast/binomial: a fit needs at least two distinct sizes with positive"):
        fit.fit_curve([dict(rows[0]), dict(rows[1], median_s=0.0)])


def test_fit_curve_options_reach_both_fits():
    """max_segments, min_points, n_boot, seed and confidence are used by fit_curve's line and segments."""
    rows = [dict(collective="allreduce", algorithm="ring", nranks=4, nbytes=int(n), median_s=float(t),
                 samples_s=None) for n, t in zip(KNEE_X, KNEE_Y, strict=True)]
    assert fit.fit_curve(rows, n_boot=0).segmented.breakpoints_bytes == (8192,)
    assert fit.fit_curve(rows, n_boot=0, max_segments=1).segmented.n_segments == 1
    assert fit.fit_curve(rows, n_boot=0, min_points=4).segmented.n_segments == 1   # 3 sizes above the knee
    a = fit.fit_curve(rows, n_boot=30, confidence=0.5)
    assert a.line.confidence == 0.5 and a.line.n_boot == 30
    assert a == fit.fit_curve(rows, n_boot=30, confidence=0.5)
    assert a.line.alpha_ci_s != fit.fit_curve(rows, n_boot=30, confidence=0.5, seed=7).line.alpha_ci_s


def test_pingpong_rows_are_pooled_as_two_ranks():
    """Only collective == "pingpong" rows are used, whatever nranks they were stored with."""
    rows = [dict(collective="pingpong", algorithm="pingpong", nranks=p, nbytes=n, median_s=1e-6 + 1e-10 * n,
                 samples_s=None) for p, n in ((2, 8), (4, 64), (8, 512))]
    other = dict(collective="bcast", algorithm="pingpong", nranks=2, nbytes=4096, median_s=1.0, samples_s=None)
    f = fit.fit_pingpong(rows + [other], n_boot=0)
    assert f.nranks == 2 and f.line.n_sizes == 3 and f.line.nbytes_max == 512 and f.line.bootstrap == "none"
    with pytest.raises(CCBenchError, match="^no ping-pong rows: run the pingpong benchmark first$"):
        fit.fit_pingpong([other])
    assert f.line.beta_s_per_byte == pytest.approx(1e-10, rel=1e-9, abs=0)


def test_fit_gamma_pools_samples_per_size_and_accepts_every_form_of_seconds():
    """seconds as a number, list, tuple or array; one size's records pooled; the median is the size's time."""
    recs = [dict(dtype="f", op="s", nbytes=1024, seconds=1.0e-6), dict(dtype="f", op="s", nbytes=1024, seconds=3e-6),
            dict(dtype="f", op="s", nbytes=1024.0, seconds=(2e-6,)),
            dict(dtype="f", op="s", nbytes=4096, seconds=[5e-6, 5e-6]),
            dict(dtype="f", op="s", nbytes=16384, seconds=np.array([1.7e-5, 1.7e-5]))]
    g = fit.fit_gamma(recs, n_boot=0)
    assert (g.collective, g.algorithm, g.nranks, g.dtype, g.op) == ("local-reduction", "numpy", 1, "f", "s")
    x = [1024, 4096, 16384]
    y = [2e-6, 5e-6, 1.7e-5]
    assert g.line.n_sizes == 3 and g.line.beta_s_per_byte == pytest.approx(_wls_slope(x, y), rel=1e-9, abs=0)
    assert g.line.bootstrap == "none"
    # every size with two samples or more: the bootstrap resamples them
    assert fit.fit_gamma(recs, n_boot=10).line.bootstrap == "samples"
    # a size with one sample: no raw samples for the fit, relative residuals instead
    single = [dict(r, seconds=[1e-6]) if r["nbytes"] == 4096 else r for r in recs]
    assert fit.fit_gamma(single, n_boot=10).line.bootstrap == "residuals"
    with pytest.raises(CCBenchError, match="no reduction records for dtype=g op=None"):
        fit.fit_gamma(recs, dtype="g")
    with pytest.raises(CCBenchError, match="choose one of f/s, f/t$"):
        fit.fit_gamma(recs + [dict(dtype="f", op="t", nbytes=8, seconds=1.0)])
    assert fit.fit_gamma(recs + [dict(dtype="f", op="t", nbytes=8, seconds=1.0)], op="s", n_boot=0) == g


def test_network_parameters_from_exact_microbenchmarks():
    """alpha from the first ping-pong segment, beta from the last, gamma from the reduction fit; notes by hand."""
    pp = [dict(collective="pingpong", algorithm="pingpong", nranks=2, nbytes=int(n), median_s=float(t),
               samples_s=None) for n, t in zip(KNEE_X, KNEE_Y, strict=True)]
    red = [dict(dtype="float64", op="sum", nbytes=n, seconds=[3e-7 + 2.5e-10 * n] * 3) for n in (1024, 8192, 65536)]
    p = fit.network_from_microbenchmarks(pp, red, n_boot=0)
    assert p.alpha_s == pytest.approx(2e-6, rel=1e-9, abs=0)
    assert p.beta_s_per_byte == pytest.approx(5e-11, rel=1e-9, abs=0)
    assert p.gamma_s_per_byte == pytest.approx(2.5e-10, rel=1e-9, abs=0)
    assert all(math.isnan(v) for v in (*p.alpha_ci_s, *p.beta_ci_s_per_byte, *p.gamma_ci_s_per_byte))
    assert p.breakpoints_bytes == (8192,) and p.n_points == 8 and p.source == "pingpong"
    assert p.r2 == pytest.approx(1.0) and p.max_rel_residual < 1e-9
    assert p.notes == ("pingpong: 2 segment(s)", "gamma from float64/sum, 1 segment(s)")
    one = fit.network_from_microbenchmarks(pp, red, n_boot=0, max_segments=1)
    assert one.notes[0] == "pingpong: 1 segment(s)" and one.breakpoints_bytes == ()
    assert one.beta_s_per_byte == pytest.approx(_wls_slope(KNEE_X, KNEE_Y), rel=1e-9, abs=0)
    mixed = red + [dict(r, dtype="int32") for r in red] + [dict(r, op="max") for r in red]
    assert fit.network_from_microbenchmarks(pp, mixed, dtype="float64", op="sum", n_boot=0) == p
    nog = fit.network_from_microbenchmarks(pp, n_boot=0)
    assert nog.gamma_s_per_byte is None and nog.gamma_ci_s_per_byte is None
    assert nog.notes == ("pingpong: 2 segment(s)", "gamma unknown: no reduction records")


# --------------------------------------------------------------------------- joint fit, NNLS

JA, JB, JG = 2e-6, 1e-10, 2.5e-10


def _joint(counts, factors=None, samples=False):
    """Rows of exact T = steps JA + bytes JB + reduced JG (times scaled by `factors`)."""
    factors = factors or [1.0] * len(counts)
    rows = []
    for (s, b, r), f in zip(counts, factors, strict=True):
        t = (s * JA + b * JB + r * JG) * f
        rows.append(dict(steps_max=s, step_bytes_max=b, reduced_bytes_max=r, median_s=t,
                         samples_s=[t * 0.99, t, t * 1.01] if samples else None))
    return rows


COUNTS = [(2, 1e3, 5e2), (4, 1e5, 0.0), (6, 1e6, 1e6), (2, 1e7, 2e6), (3, 3e4, 3e4)]


def test_joint_fit_of_exact_rows_and_what_it_ignores():
    """Exact rows give alpha, beta, gamma back; rows without counts, with no traffic or no usable time are ignored."""
    junk = [dict(steps_max=None, step_bytes_max=1, reduced_bytes_max=0, median_s=1.0),
            dict(step_bytes_max=1, reduced_bytes_max=0, median_s=1.0),
            dict(steps_max=0, step_bytes_max=0.0, reduced_bytes_max=0, median_s=1.0),
            dict(steps_max=1, step_bytes_max=1, reduced_bytes_max=0, median_s=None),
            dict(steps_max=1, step_bytes_max=1, reduced_bytes_max=0, median_s=0.0),
            dict(steps_max=1, step_bytes_max=1, reduced_bytes_max=0, median_s=math.nan),
            dict(steps_max=1, step_bytes_max=1, reduced_bytes_max=0, median_s=math.inf)]
    p = fit.fit_joint(_joint(COUNTS) + junk, n_boot=0)
    assert p.n_points == 5 and p.source == "joint"
    assert p.alpha_s == pytest.approx(JA, rel=1e-8, abs=0) and p.beta_s_per_byte == pytest.approx(JB, rel=1e-8, abs=0)
    assert p.gamma_s_per_byte == pytest.approx(JG, rel=1e-8, abs=0)
    assert p.notes == ("5 rows, bootstrap: none",)
    assert p.alpha_ci_s is None and p.beta_ci_s_per_byte is None and p.gamma_ci_s_per_byte is None
    assert p.r2 == pytest.approx(1.0) and p.max_rel_residual < 1e-8
    # only counts that are all zero make a row "no traffic": one non-zero count keeps it
    rows = _joint(COUNTS[:2]) + [dict(steps_max=0, step_bytes_max=0, reduced_bytes_max=4e6, median_s=4e6 * JG)]
    assert fit.fit_joint(rows, n_boot=0).n_points == 3
    for j in junk:                                                   # each kind of junk, ahead of the rows
        assert fit.fit_joint([j] + _joint(COUNTS), n_boot=0) == p
    with pytest.raises(CCBenchError, match="^a joint fit needs at least 3 rows of hand-written algorithms with "
                                           "counted traffic$"):
        fit.fit_joint(_joint(COUNTS[:2]) + junk, n_boot=0)


def test_joint_fit_zero_columns_and_bounds():
    """A regressor zero everywhere: its parameter None, with a note; a parameter NNLS holds at 0 is noted."""
    no_red = [(s, b, 0.0) for s, b, _ in COUNTS]
    p = fit.fit_joint(_joint(no_red), n_boot=0)
    assert p.gamma_s_per_byte is None and p.gamma_ci_s_per_byte is None
    assert p.alpha_s == pytest.approx(JA, rel=1e-8, abs=0) and p.beta_s_per_byte == pytest.approx(JB, rel=1e-8, abs=0)
    assert p.notes == ("5 rows, bootstrap: none", "gamma not identifiable: its regressor is zero in every row")
    # times without any per-step part: alpha is held at the bound 0
    rows = [dict(r, median_s=r["step_bytes_max"] * JB + r["reduced_bytes_max"] * JG) for r in _joint(COUNTS)]
    z = fit.fit_joint(rows, n_boot=0)
    assert z.alpha_s == 0.0 and z.notes == ("5 rows, bootstrap: none", "alpha at the zero bound")
    assert z.beta_s_per_byte == pytest.approx(JB, rel=1e-8, abs=0)
    # times without any per-byte part: beta is held at 0
    rows = [dict(r, median_s=r["steps_max"] * JA + r["reduced_bytes_max"] * JG) for r in _joint(COUNTS)]
    zb = fit.fit_joint(rows, n_boot=0)
    assert zb.beta_s_per_byte == 0.0 and zb.notes == ("5 rows, bootstrap: none", "beta at the zero bound")
    # no bytes anywhere: beta cannot be had, the fit refuses
    with pytest.raises(CCBenchError, match="^a joint fit needs rows with both messages and bytes$"):
        fit.fit_joint(_joint([(s, 0.0, r) for s, _, r in COUNTS]), n_boot=0)
    with pytest.raises(CCBenchError, match="^a joint fit needs rows with both messages and bytes$"):
        fit.fit_joint(_joint([(0.0, b, r) for _, b, r in COUNTS]), n_boot=0)


def test_joint_fit_bootstrap_kinds_and_intervals():
    """Samples on every row: they are resampled; one row without: residuals; intervals hold the estimate."""
    f = [1.02, 0.97, 1.01, 0.99, 1.03]
    p = fit.fit_joint(_joint(COUNTS, f, samples=True), n_boot=200)
    assert p.notes[0] == "5 rows, bootstrap: samples"
    for v, ci in ((p.alpha_s, p.alpha_ci_s), (p.beta_s_per_byte, p.beta_ci_s_per_byte),
                  (p.gamma_s_per_byte, p.gamma_ci_s_per_byte)):
        assert ci[0] <= v <= ci[1] and ci[0] < ci[1]
    assert p == fit.fit_joint(_joint(COUNTS, f, samples=True), n_boot=200)
    assert p.alpha_ci_s != fit.fit_joint(_joint(COUNTS, f, samples=True), n_boot=200, seed=5).alpha_ci_s
    narrow = fit.fit_joint(_joint(COUNTS, f, samples=True), n_boot=200, confidence=0.5)
    assert p.alpha_ci_s[0] <= narrow.alpha_ci_s[0] <= narrow.alpha_ci_s[1] <= p.alpha_ci_s[1]
    rows = _joint(COUNTS, f, samples=True)
    rows[2]["samples_s"] = None
    r = fit.fit_joint(rows, n_boot=50)
    assert r.notes[0] == "5 rows, bootstrap: residuals"
    fitted = [s * r.alpha_s + b * r.beta_s_per_byte + g * r.gamma_s_per_byte for s, b, g in COUNTS]
    t = [row["median_s"] for row in rows]
    assert r.max_rel_residual == pytest.approx(max(abs(1 - a / b) for a, b in zip(fitted, t, strict=True)))


# --------------------------------------------------------------------------- comparisons, gamma by temperature


def test_compare_params_overlap_both_ways_and_missing_pieces():
    """Touching from either side overlaps, a gap does not; nan or missing intervals give None; ratio = other / ref."""
    def p(alpha, ci, beta=None, bci=None, gamma=None, gci=None, source="given"):
        return NetworkParams(alpha, beta, gamma, ci, bci, gci, source=source)

    ref = p(4e-6, (3e-6, 5e-6), 1e-10, (1e-10, 2e-10), 2e-10, (1e-10, 3e-10), "pingpong")
    below = p(2e-6, (1e-6, 3e-6), None, None, 1e-10, (math.nan, 2e-10), "joint")
    a, b, g = fit.compare_params(ref, below)
    assert (a.ratio, a.cis_overlap) == (0.5, True)                  # other's top touches ref's bottom
    assert (b.reference, b.other, b.ratio, b.cis_overlap) == (1e-10, None, None, None)
    assert (g.ratio, g.cis_overlap) == (0.5, None)                  # a nan bound: no verdict
    gap = fit.compare_params(ref, p(2e-6, (1e-6, 2.9e-6)))[0]
    assert gap.cis_overlap is False
    above = fit.compare_params(ref, p(8e-6, (5e-6, 9e-6)))[0]
    assert above.ratio == 2.0 and above.cis_overlap is True
    assert fit.compare_params(p(None, None), ref)[0].ratio is None
    assert [c.to_dict()["parameter"] for c in fit.compare_params(ref, ref)] == [
        "alpha_s", "beta_s_per_byte", "gamma_s_per_byte"]


def test_gamma_for_each_path_temperature_and_fallback():
    """Cold only above cold_above_bytes; a missing rate falls back to the warm one of the same path, then numpy's."""
    full = NetworkParams(1e-6, 1e-10, 1.0, gamma_cold_s_per_byte=2.0, library_gamma_s_per_byte=3.0,
                         library_gamma_cold_s_per_byte=4.0, cold_above_bytes=100.0)
    assert [full.gamma_for(nat, n) for nat in (False, True) for n in (100, 101)] == [1.0, 2.0, 3.0, 4.0]
    no_lib_cold = replace_params(full, library_gamma_cold_s_per_byte=None)
    assert no_lib_cold.gamma_for(True, 101) == 3.0
    no_lib = replace_params(full, library_gamma_s_per_byte=None, library_gamma_cold_s_per_byte=None)
    assert no_lib.gamma_for(True, 101) == 2.0 and no_lib.gamma_for(True, 100) == 1.0
    no_cold = replace_params(full, gamma_cold_s_per_byte=None, library_gamma_cold_s_per_byte=None)
    assert no_cold.gamma_for(False, 101) == 1.0 and no_cold.gamma_for(True, 101) == 3.0
    never = replace_params(full, cold_above_bytes=None)
    assert never.gamma_for(False, 1e12) == 1.0 and never.gamma_for(True, 1e12) == 3.0
    assert isinstance(NetworkParams(1e-6, 1e-10, np.float32(0.5)).gamma_for(False, 8), float)


def replace_params(p, **kw):
    from dataclasses import replace

    return replace(p, **kw)


# --------------------------------------------------------------------------- second pass


def test_exact_refusal_messages():
    """Each refusal says exactly what is wrong (anchored: no text added around it)."""
    with pytest.raises(CCBenchError, match="^a line fit needs at least two distinct sizes$"):
        fit.fit_line([1e3, 1e3], [1e-6, 2e-6], n_boot=0)
    with pytest.raises(CCBenchError, match="^a segmented fit needs at least two distinct sizes$"):
        fit.fit_segments([1e3], [1e-6], n_boot=0)
    with pytest.raises(CCBenchError, match="^nbytes and median_s differ in length$"):
        fit.fit_line([1e3, 2e3], [1e-6], n_boot=0)
    with pytest.raises(CCBenchError, match="^samples_s and median_s differ in length$"):
        fit.fit_line([1e3, 2e3], [1e-6, 2e-6], [[1e-6, 1e-6]], n_boot=0)
    with pytest.raises(CCBenchError, match="^no rows to fit$"):
        fit.fit_curve([])


def test_bandwidth_is_one_over_beta_in_units_of_1e9_bytes_per_second():
    """beta = 1e-10 s/byte is 1e10 bytes/s = 10 GB/s (GB = 1e9 bytes), to rounding."""
    assert NetworkParams(alpha_s=0.0, beta_s_per_byte=1e-10).bandwidth_gbs == pytest.approx(10.0, rel=1e-13, abs=0)


def test_weighted_r2_of_a_curve_with_small_spread():
    """R^2 = 1 - SSE/SST with 1/y^2 weights, also when SST (relative spread) is below 1."""
    x = np.array([1e3, 2e3, 3e3, 4e3])
    y = np.array([1.0, 1.3, 1.1, 1.4]) * 1e-6
    slope, icpt = np.polyfit(x, y, 1, w=1.0 / y)
    ybar = np.sum(1.0 / y) / np.sum(1.0 / y**2)              # sum(w y) / sum(w), w = 1/y^2
    sst = np.sum(((y - ybar) / y) ** 2)
    sse = np.sum(((y - (icpt + slope * x)) / y) ** 2)
    assert 0 < sse < sst < 1
    assert fit.fit_line(x, y, n_boot=0).r2 == pytest.approx(1 - sse / sst, rel=1e-9, abs=0)


def _noisy(sizes, seed=1):
    r = np.random.default_rng(seed)
    t = [2e-6 + 1e-10 * n for n in sizes]
    return t, [list(v * (1 + 0.02 * r.standard_normal(5))) for v in t]


def test_a_single_bootstrap_replicate_still_gives_intervals():
    """n_boot = 1 is a (degenerate) bootstrap: one replicate, an interval of zero width, not "no intervals"."""
    n = [1e3, 2e3, 4e3, 8e3, 16e3]
    t, s = _noisy(n)
    seg = fit.fit_segments(n, t, s, n_boot=1)
    assert "no_intervals" not in seg.flags and "residual_bootstrap" not in seg.flags
    lo, hi = seg.segments[0].alpha_ci_s
    assert math.isfinite(lo) and lo == hi
    seg = fit.fit_segments(n, t, n_boot=1)                           # no samples: residuals
    assert "residual_bootstrap" in seg.flags and math.isfinite(seg.segments[0].beta_ci_s_per_byte[0])
    line = fit.fit_line(n, t, n_boot=1)
    assert line.bootstrap == "residuals" and line.n_boot == 1
    rows = [dict(collective="allreduce", algorithm="ring", nranks=4, nbytes=int(v), median_s=m, samples_s=q)
            for v, m, q in zip(n, t, s, strict=True)]
    c = fit.fit_curve(rows, n_boot=1)
    assert c.line.bootstrap == "samples" and c.line.n_boot == 1
    f = [1.02, 0.97, 1.01, 0.99, 1.03]
    assert fit.fit_joint(_joint(COUNTS, f, samples=True), n_boot=1).notes[0] == "5 rows, bootstrap: samples"


def test_segmented_fit_without_resamples_or_with_a_seed():
    """n_boot = 0 with samples: no intervals; the same seed gives the same intervals."""
    n = [1e3, 2e3, 4e3, 8e3, 16e3, 32e3]
    t, s = _noisy(n, seed=2)
    none = fit.fit_segments(n, t, s, n_boot=0)
    assert "no_intervals" in none.flags and all(math.isnan(v) for v in none.segments[0].alpha_ci_s)
    one = fit.fit_segments(n, t, s, n_boot=40, seed=7)
    assert one.segments == fit.fit_segments(n, t, s, n_boot=40, seed=7).segments
    assert one.segments != fit.fit_segments(n, t, s, n_boot=40, seed=8).segments


def test_segments_of_two_points_get_no_residual_intervals():
    """A 2-point segment fits exactly: its residuals are 0, so a residual bootstrap would claim zero-width intervals."""
    seg = fit.fit_segments([1e3, 2e3, 4e3, 8e3], [1e-6, 1.1e-6, 3e-6, 3.2e-6], n_boot=50,
                           max_segments=2, min_points=2)
    assert seg.n_segments == 2 and seg.breakpoints_bytes == (4000,)
    assert "no_intervals" in seg.flags and "residual_bootstrap" not in seg.flags
    assert all(math.isnan(v) for sg in seg.segments for v in sg.alpha_ci_s)


def test_fit_curve_accepts_rows_differing_in_dtype_and_op_and_records_the_first():
    """Only collective, algorithm and nranks must agree; dtype, op, in_place and root come from row 0."""
    rows = _rows([1e3, 2e3, 4e3])
    rows[0].update(dtype="float64", op="sum", in_place=True, root=0)
    rows[1].update(dtype="float32", op="max", in_place=False, root=1)
    c = fit.fit_curve(rows, n_boot=0)
    assert (c.dtype, c.op, c.in_place, c.root) == ("float64", "sum", True, 0)


def test_three_segments_are_found_when_two_are_no_better_than_one():
    """A self-similar sawtooth of three exact ramps: BIC(2) >= BIC(1) (by hand) yet 3 segments are chosen."""
    x = np.array([1e3 * 2**i for i in range(12)])
    b = [5e-10, 5e-10 / 16, 5e-10 / 256]
    y = np.concatenate([1e-6 + b[0] * x[:4], 1e-6 + b[1] * x[4:8], 1e-6 + b[2] * x[8:]])
    n = len(x)
    bic1 = n * math.log(_rel_rss_polyfit(x, y) / n) + 2 * math.log(n)
    rss2 = min(_rel_rss_polyfit(x[:c], y[:c]) + _rel_rss_polyfit(x[c:], y[c:]) for c in range(3, n - 2))
    bic2 = n * math.log(rss2 / n) + 5 * math.log(n)
    assert bic2 >= bic1
    s = fit.fit_segments(x, y, n_boot=0)
    assert s.n_segments == 3 and s.breakpoints_bytes == (16000, 256000)
    for seg, slope in zip(s.segments, b, strict=True):
        assert seg.alpha_s == pytest.approx(1e-6, rel=1e-9, abs=0)
        assert seg.beta_s_per_byte == pytest.approx(slope, rel=1e-9, abs=0)


def _jump_with_noise(s):
    """10 sizes, a 30% jump after the 5th, alternating relative noise +-s."""
    x = np.array([1e3 * 2**i for i in range(10)])
    y = (2e-6 + 1e-10 * x) * (1 + s * np.array([1.0, -1.0] * 5))
    y[5:] *= 1.3
    return x, y


def _guard_by_hand(x, y, cut):
    """(change, rss2): the largest relative move of the fitted curve from 1 to 2 segments cut at `cut`, and RSS_2."""
    def line(xs, ys):
        b, a = np.polyfit(xs, ys, 1, w=1.0 / ys)
        return a + b * xs
    one = line(x, y)
    two = np.concatenate([line(x[:cut], y[:cut]), line(x[cut:], y[cut:])])
    return float(np.max(np.abs(two - one) / y)), float((((y - two) / y) ** 2).sum())


def test_breakpoint_guard_counts_sigma_with_n_minus_p_degrees_of_freedom():
    """The guard's residual sd is sqrt(RSS_k / (n - p)), p = 3k - 1 = 5 for two segments (n = 10: 5 dof)."""
    # noise 1.75%: change >= 4 sd with 5 dof (kept), though it would not be with 4 dof or fewer
    x, y = _jump_with_noise(0.0175)
    change, rss2 = _guard_by_hand(x, y, 5)
    assert 4 * math.sqrt(rss2 / 5) <= change < 4 * math.sqrt(rss2 / 4)
    s = fit.fit_segments(x, y, n_boot=0)
    assert s.n_segments == 2 and s.breakpoints_bytes == (32000,)
    # noise 2%: BIC prefers two segments, but change < 4 sd with 5 dof (dropped), though >= 4 sd with 6 dof
    x, y = _jump_with_noise(0.02)
    change, rss2 = _guard_by_hand(x, y, 5)
    assert 4 * math.sqrt(rss2 / 6) <= change < 4 * math.sqrt(rss2 / 5)
    s = fit.fit_segments(x, y, n_boot=0)
    assert s.bic[1] < s.bic[0] and s.n_segments == 1
    # 6 sizes, 3 + 3: two segments leave 6 - 5 = 1 dof, so sd = sqrt(RSS_2); change < 4 sd: dropped
    x = np.array([1e3 * 2**i for i in range(6)])
    y = (2e-6 + 1e-10 * x) * (1 + 0.01 * np.array([1.0, -1.0] * 3))
    y[3:] *= 1.2
    change, rss2 = _guard_by_hand(x, y, 3)
    assert max(0.05, 4 * math.sqrt(rss2 / 2)) <= change < 4 * math.sqrt(rss2)
    s = fit.fit_segments(x, y, n_boot=0)
    assert s.bic[1] < s.bic[0] and s.n_segments == 1


def test_repeated_sizes_pool_their_samples_in_input_order():
    """40 rows of 4 sizes: equal to 4 rows holding each size's samples concatenated in input order (same draws)."""
    r = np.random.default_rng(3)
    sizes = [1e3, 1e4, 1e5, 1e6]
    n = [sizes[i % 4] for i in range(40)][::-1]
    smp = [list((2e-6 + 1e-10 * v) * (1 + 0.05 * r.random(3))) for v in n]
    pooled = [sum((s for v, s in zip(n, smp, strict=True) if v == size), []) for size in sizes]
    med = [float(np.median(p)) for p in pooled]
    rep = fit.fit_line(n, [float(np.median(s)) for s in smp], smp, n_boot=30)
    one = fit.fit_line(sizes, med, pooled, n_boot=30)
    assert rep == one and rep.bootstrap == "samples"


def test_row_samples_are_floats_with_nulls_as_nan():
    """A stored row's samples come back as floats: integers converted, a JSON null as nan, also per launch."""
    got = fit.row_samples(dict(samples_s=[1, None, 2]))
    assert got.dtype == float and got[0] == 1.0 and math.isnan(got[1]) and got[2] == 2.0
    blocks = fit.row_samples(dict(samples_s=[1, 2, None], launches=["a", "b"], launch_samples=[1, 2]))
    assert [b.dtype for b in blocks] == [float, float] and blocks[0].tolist() == [1.0] and math.isnan(blocks[1][1])
