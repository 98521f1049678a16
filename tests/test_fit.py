"""The pure fitting library on synthetic curves with known answers (seeded, no MPI)."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from ccbench.analysis.fit import (
    NetworkParams,
    compare_params,
    fit_curve,
    fit_curves,
    fit_gamma,
    fit_joint,
    fit_line,
    fit_segments,
    network_from_microbenchmarks,
)
from ccbench.core.errors import CCBenchError

SIZES = np.array([8 * 2**i for i in range(20)], dtype=float)  # 8 B .. 4 MiB
ALPHA, BETA, GAMMA = 2e-6, 1e-10, 2.5e-10  # 2 us, 10 GB/s, 4 GB/s reduction


def noisy(t, rng, noise=0.03, m=20):
    """m raw samples around time t: lognormal noise, whose median is exactly t."""
    return t * np.exp(rng.normal(0.0, noise, m))


def curve_rows(times, *, noise=0.03, m=20, seed=0, sizes=SIZES, samples=True, **key):
    """cases.jsonl-like rows of one curve with the given true times."""
    rng = np.random.default_rng(seed)
    base = dict(collective="allreduce", algorithm="ring", nranks=4, dtype="float64", op="sum")
    base.update(key)
    rows = []
    for n, t in zip(sizes, times, strict=True):
        s = noisy(t, rng, noise, m)
        rows.append(dict(base, nbytes=int(n), median_s=float(np.median(s)),
                         samples_s=s.tolist() if samples else None))
    return rows


def rel(a, b):
    return abs(a / b - 1.0)


def inside(ci, v):
    return ci[0] <= v <= ci[1]


def strict_json(record):
    return json.loads(json.dumps(record.to_dict(), allow_nan=False))


# --------------------------------------------------------------------------- one line


def test_line_recovers_alpha_beta_within_2_percent():
    covered = 0
    for seed in range(5):
        f = fit_curve(curve_rows(ALPHA + BETA * SIZES, seed=seed))
        line = f.line
        assert rel(line.alpha_s, ALPHA) < 0.02
        assert rel(line.beta_s_per_byte, BETA) < 0.02
        assert rel(line.bandwidth_gbs, 10.0) < 0.02
        assert line.r2 > 0.999 and line.max_rel_residual < 0.05
        assert line.bootstrap == "samples" and line.n_boot == 1000
        assert line.alpha_ci_s[0] < line.alpha_s < line.alpha_ci_s[1]
        covered += inside(line.alpha_ci_s, ALPHA) + inside(line.beta_ci_s_per_byte, BETA)
        assert f.segmented.n_segments == 1 and f.flags == ()
    assert covered >= 8  # 95% intervals: most of the 10 contain the truth


def test_fit_is_deterministic_and_strict_json():
    rows = curve_rows(ALPHA + BETA * SIZES, seed=3)
    a, b = fit_curve(rows), fit_curve(rows)
    assert a == b
    d = strict_json(a)
    assert d["line"]["bandwidth_gbs"] == pytest.approx(a.line.bandwidth_gbs)
    assert d["segmented"]["n_segments"] == 1
    assert fit_curve(rows, seed=1).line.alpha_ci_s != a.line.alpha_ci_s


def test_plain_arrays_api_matches_rows_api():
    rows = curve_rows(ALPHA + BETA * SIZES, seed=2)
    x = [r["nbytes"] for r in rows]
    y = [r["median_s"] for r in rows]
    s = [r["samples_s"] for r in rows]
    assert fit_line(x, y, s) == fit_curve(rows).line
    assert fit_segments(x, y, s).n_segments == 1


def test_pure_noise_gives_wide_intervals_and_no_segments():
    for seed in range(5):
        f = fit_curve(curve_rows(np.full(SIZES.size, 1e-5), noise=0.2, seed=seed))
        line = f.line
        lo, hi = line.beta_ci_s_per_byte
        assert lo < 0 < hi, "no bandwidth can be claimed from a flat curve"
        assert hi - lo > abs(line.beta_s_per_byte)
        assert "beta_ci_includes_zero" in f.flags
        assert f.segmented.n_segments == 1
        assert math.isinf(line.bandwidth_ci_gbs[1])
        assert strict_json(line)["bandwidth_ci_gbs"][1] is None
        quiet = fit_curve(curve_rows(np.full(SIZES.size, 1e-5), noise=0.02, seed=seed)).line
        width = line.alpha_ci_s[1] - line.alpha_ci_s[0]
        assert width > 5 * (quiet.alpha_ci_s[1] - quiet.alpha_ci_s[0])  # intervals track noise


def test_no_spurious_breakpoints_on_noisy_lines():
    for seed in range(20):
        for noise in (0.03, 0.3):
            f = fit_segments(SIZES, *_medians(ALPHA + BETA * SIZES, noise, seed), n_boot=0)
            assert f.n_segments == 1, (seed, noise, f.breakpoints_bytes)


def _medians(times, noise, seed, m=20):
    rng = np.random.default_rng(seed)
    s = [noisy(t, rng, noise, m) for t in times]
    return [float(np.median(v)) for v in s], s


# --------------------------------------------------------------------------- segments


def test_breakpoint_found_within_one_size_step():
    a2, b2 = 2e-5, 7e-11  # rendezvous: a handshake more, a faster copy
    for knee in (1024, 65536):
        t = np.where(SIZES < knee, ALPHA + BETA * SIZES, a2 + b2 * SIZES)
        for seed in range(3):
            f = fit_curve(curve_rows(t, seed=seed))
            seg = f.segmented
            assert seg.n_segments == 2
            (bp,) = seg.breakpoints_bytes
            assert abs(math.log2(bp / knee)) <= 1
            lo, hi = seg.segments
            assert rel(lo.alpha_s, ALPHA) < 0.02 and rel(hi.beta_s_per_byte, b2) < 0.02
            assert rel(hi.alpha_s, a2) < 0.05
            assert inside(hi.beta_ci_s_per_byte, hi.beta_s_per_byte)
            assert lo.nbytes_hi < bp == hi.nbytes_lo
            assert seg.segment_at(8) == lo and seg.segment_at(1 << 22) == hi
            assert seg.max_rel_residual < 0.05 < f.line.max_rel_residual
            assert "protocol_change" in f.flags


def test_slope_change_without_jump_and_three_segments():
    knee = 65536
    t = np.where(SIZES < knee, ALPHA + BETA * SIZES, ALPHA + BETA * knee + 2 * BETA * (SIZES - knee))
    seg = fit_segments(SIZES, *_medians(t, 0.03, 0), n_boot=0)
    assert seg.n_segments == 2 and abs(math.log2(seg.breakpoints_bytes[0] / knee)) <= 1
    t3 = np.where(SIZES < 1024, 1e-6 + 2e-10 * SIZES,
                  np.where(SIZES < 262144, 4e-6 + 1e-10 * SIZES, 3e-5 + 5e-11 * SIZES))
    seg3 = fit_segments(SIZES, *_medians(t3, 0.03, 1), n_boot=0)
    assert seg3.breakpoints_bytes == (1024, 262144)
    assert rel(seg3.segments[2].beta_s_per_byte, 5e-11) < 0.02


def test_missing_samples_fall_back_to_residual_bootstrap():
    f = fit_curve(curve_rows(ALPHA + BETA * SIZES, seed=4, samples=False))
    assert f.line.bootstrap == "residuals" and "residual_bootstrap" in f.flags
    assert rel(f.line.alpha_s, ALPHA) < 0.02
    assert inside(f.line.alpha_ci_s, f.line.alpha_s)
    none = fit_line(SIZES, ALPHA + BETA * SIZES, n_boot=0)
    assert none.bootstrap == "none" and math.isnan(none.alpha_ci_s[0])
    assert strict_json(none)["alpha_ci_s"] == [None, None]


def test_repeated_sizes_are_pooled_and_bad_rows_dropped():
    rows = curve_rows(ALPHA + BETA * SIZES, seed=5)
    extra = curve_rows(ALPHA + BETA * SIZES, seed=6)
    bad = dict(rows[0], nbytes=16, median_s=0.0)
    f = fit_curve(rows + extra + [bad])
    assert f.line.n_sizes == SIZES.size
    assert rel(f.line.beta_s_per_byte, BETA) < 0.02


def test_fit_curves_groups_and_skips_unfittable():
    rows = curve_rows(ALPHA + BETA * SIZES, seed=0)
    rows += curve_rows(3 * ALPHA + BETA * SIZES, seed=1, nranks=8)
    rows += curve_rows(ALPHA + 2 * BETA * SIZES, seed=2, algorithm="native")
    rows += [dict(collective="barrier", algorithm="native", nranks=4, nbytes=0,
                  median_s=1e-6, samples_s=[1e-6, 1.1e-6])]
    fits = fit_curves(rows, n_boot=200)
    assert [f.key for f in fits] == [
        ("allreduce", "ring", 4), ("allreduce", "ring", 8), ("allreduce", "native", 4)
    ]
    assert rel(fits[1].line.alpha_s, 3 * ALPHA) < 0.02
    with pytest.raises(CCBenchError, match="several curves"):
        fit_curve(rows[:40])


# --------------------------------------------------------------------------- network


def pingpong_rows(seed=0):
    """One-way ping-pong times with an eager -> rendezvous switch at 16 KiB."""
    t = np.where(SIZES <= 8192, ALPHA + 1.5 * BETA * SIZES, 4 * ALPHA + BETA * SIZES)
    return curve_rows(t, seed=seed, collective="pingpong", algorithm="pingpong", nranks=2)


def reduction_records(seed=0):
    """Local reduction microbenchmark records: one record per rank and repetition."""
    rng = np.random.default_rng(seed)
    recs = []
    for n in SIZES:
        for s in noisy(3e-7 + GAMMA * n, rng):
            recs.append(dict(dtype="float64", op="sum", nbytes=int(n), seconds=float(s)))
        recs.append(dict(dtype="int32", op="max", nbytes=int(n), seconds=[1e-7, 1.1e-7]))
    return recs


def test_network_from_pingpong_and_reduction():
    p = network_from_microbenchmarks(pingpong_rows(), reduction_records(), dtype="float64",
                                     op="sum")
    assert p.source == "pingpong"
    assert rel(p.alpha_s, ALPHA) < 0.02          # small-size segment's intercept
    assert rel(p.beta_s_per_byte, BETA) < 0.02   # large-size segment's slope
    assert rel(p.gamma_s_per_byte, GAMMA) < 0.02
    assert inside(p.alpha_ci_s, p.alpha_s) and inside(p.gamma_ci_s_per_byte, p.gamma_s_per_byte)
    assert p.breakpoints_bytes == (16384,)
    assert NetworkParams.from_dict(strict_json(p)) == p
    with pytest.raises(CCBenchError, match="float64/sum"):
        fit_gamma(reduction_records())
    g = fit_gamma(reduction_records(), dtype="float64")
    assert g.line.bootstrap == "samples"
    nog = network_from_microbenchmarks(pingpong_rows())
    assert nog.gamma_s_per_byte is None and any("gamma unknown" in s for s in nog.notes)
    with pytest.raises(CCBenchError, match="ping-pong"):
        network_from_microbenchmarks(curve_rows(ALPHA + BETA * SIZES))


def lg(P):
    return math.ceil(math.log2(P))


# fake counted traffic per call (max over ranks) of three hand-written algorithms
FAKE_COUNTS = {
    "ring": lambda P, n: (2 * (P - 1), 2 * n * (P - 1) / P, n * (P - 1) / P),
    "recursive_doubling": lambda P, n: (lg(P), n * lg(P), n * lg(P)),
    "binomial_bcast": lambda P, n: (lg(P), n * lg(P), 0.0),
}


def joint_rows(seed=0, noise=0.03, reductions=True):
    rng = np.random.default_rng(seed)
    rows = []
    for name, counts in FAKE_COUNTS.items():
        if not reductions and name != "binomial_bcast":
            continue
        for P in (3, 4, 8):
            for n in SIZES[::2]:
                s, b, r = counts(P, float(n))
                s_ = noisy(ALPHA * s + BETA * b + GAMMA * r, rng, noise)
                rows.append(dict(collective="allreduce", algorithm=name, nranks=P,
                                 nbytes=int(n), median_s=float(np.median(s_)),
                                 samples_s=s_.tolist(), steps_max=s, step_bytes_max=b,
                                 reduced_bytes_max=r))
    rows.append(dict(collective="allreduce", algorithm="native", nranks=4, nbytes=8,
                     median_s=1.0, samples_s=[1.0, 1.0]))  # no counts: ignored
    return rows


def test_joint_fit_recovers_alpha_beta_gamma():
    p = fit_joint(joint_rows())
    assert p.source == "joint" and p.n_points == 90
    assert rel(p.alpha_s, ALPHA) < 0.02
    assert rel(p.beta_s_per_byte, BETA) < 0.02
    assert rel(p.gamma_s_per_byte, GAMMA) < 0.02
    for v, ci in ((ALPHA, p.alpha_ci_s), (BETA, p.beta_ci_s_per_byte),
                  (GAMMA, p.gamma_ci_s_per_byte)):
        assert inside(ci, v)
        assert ci[1] / ci[0] < 1.1  # 90 rows pin every parameter down
    assert p.r2 > 0.99
    strict_json(p)


def test_joint_fit_without_reductions_and_nonnegativity():
    p = fit_joint(joint_rows(reductions=False))
    assert p.gamma_s_per_byte is None and p.gamma_ci_s_per_byte is None
    assert any("gamma not identifiable" in s for s in p.notes)
    assert rel(p.beta_s_per_byte, BETA) < 0.02
    # data with no per-message cost: NNLS keeps alpha at 0 instead of going negative
    rows = joint_rows(noise=0.01)
    for r in rows[:-1]:
        r["median_s"] = BETA * r["step_bytes_max"] + GAMMA * r["reduced_bytes_max"]
        r["median_s"] = r["median_s"] or 1e-9
        r["samples_s"] = None
    p0 = fit_joint([r for r in rows[:-1] if r["step_bytes_max"] > 0], n_boot=100)
    assert p0.alpha_s >= 0 and p0.alpha_s < 1e-9
    assert rel(p0.beta_s_per_byte, BETA) < 0.02
    with pytest.raises(CCBenchError):
        fit_joint(joint_rows()[-1:])


def test_compare_pingpong_and_joint_estimates():
    pp = network_from_microbenchmarks(pingpong_rows(), reduction_records(), dtype="float64")
    jt = fit_joint(joint_rows())
    cmp = compare_params(pp, jt)
    assert [c.parameter for c in cmp] == ["alpha_s", "beta_s_per_byte", "gamma_s_per_byte"]
    for c in cmp:
        assert c.ratio == pytest.approx(c.other / c.reference)
        assert abs(c.ratio - 1) < 0.04 and c.reference_source == "pingpong"
    doubled = NetworkParams(2 * ALPHA, BETA, None, (1.9 * ALPHA, 2.1 * ALPHA))
    c = compare_params(jt, doubled)
    assert c[0].ratio == pytest.approx(2, rel=0.03) and c[0].cis_overlap is False
    assert c[1].cis_overlap is None and c[2].ratio is None
    assert all(strict_json(x) for x in c)


def test_fit_modules_import_no_mpi():
    code = "import sys, ccbench.analysis.fit, ccbench.analysis.predict; assert 'mpi4py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- effective parameters, launches


def test_effective_fit_recovers_alpha_and_beta_with_gamma_held_at_the_measured_one():
    from ccbench.analysis.fit import fit_effective

    rng = np.random.default_rng(1)
    rows, terms, red = [], [], []
    for steps, nbytes in [(2, 8), (4, 64), (2, 4096), (6, 65536), (2, 1 << 20), (4, 4 << 20), (3, 1 << 16)]:
        reduced = nbytes / 2
        t = steps * ALPHA + nbytes * BETA + reduced * GAMMA
        s = noisy(t, rng, 0.01)
        rows.append({"median_s": float(np.median(s)), "samples_s": s.tolist()})
        terms.append((steps, nbytes))
        red.append(reduced * GAMMA)
    p = fit_effective(rows, terms, red, path="numpy", n_boot=300)
    assert rel(p.alpha_s, ALPHA) < 0.03 and rel(p.beta_s_per_byte, BETA) < 0.03
    assert inside(p.alpha_ci_s, p.alpha_s) and inside(p.beta_ci_s_per_byte, p.beta_s_per_byte)
    assert p.source == "effective" and p.n_points == 7 and "numpy path: 7 rows" in p.notes[0]
    # a wrong gamma shows up in beta, not hidden: holding gamma at zero inflates beta
    q = fit_effective(rows, terms, [0.0] * len(rows), path="numpy", n_boot=0)
    assert q.beta_s_per_byte > 1.5 * BETA
    with pytest.raises(CCBenchError, match="at least 3"):
        fit_effective(rows[:2], terms[:2], red[:2], path="mpi")


def _launch_rows(between: float, m: int = 30, k: int = 4, seed: int = 0):
    """Rows of one curve measured in k launches whose levels differ by `between` (log sd), samples 1% apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES[::3]:
        t = ALPHA + BETA * n
        blocks = [t * np.exp(rng.normal(0, between)) * np.exp(rng.normal(0, 0.01, m)) for _ in range(k)]
        meds = [np.median(b) for b in blocks]
        rows.append(dict(collective="allreduce", algorithm="ring", nranks=4, dtype="float32", op="sum",
                         nbytes=int(n), median_s=float(np.exp(np.mean(np.log(meds)))),
                         samples_s=np.concatenate(blocks).tolist(), launches=list(range(1, k + 1)),
                         launch_samples=[m] * k))
    return rows


def test_bootstrap_resamples_launches_before_samples():
    from ccbench.analysis.fit import row_samples

    rows = _launch_rows(0.10)
    blocks = row_samples(rows[0])
    assert len(blocks) == 4 and all(len(b) == 30 for b in blocks)
    assert not isinstance(row_samples(dict(rows[0], launches=[], launch_samples=[])), list)
    f = fit_curve(rows, n_boot=400)
    assert f.line.bootstrap == "launches, then samples"
    assert inside(f.line.beta_ci_s_per_byte, f.line.beta_s_per_byte)
    # per size: launches 10% apart, samples 1% apart -> the two-stage replicates spread like the launches
    # (sd of a mean of 4 launches ~ 0.1 / 2), the samples taken as one launch only like the 1% noise
    from ccbench.core.estimators import bootstrap_medians

    two = bootstrap_medians([row_samples(r) for r in rows], 400, np.random.default_rng(0))
    one = bootstrap_medians([np.asarray(r["samples_s"]) for r in rows], 400, np.random.default_rng(0))
    sd_two, sd_one = np.std(np.log(two), axis=0), np.std(np.log(one), axis=0)
    assert 0.02 < np.median(sd_two) < 0.08 and np.median(sd_two) > 2.5 * np.median(sd_one)
    calm = bootstrap_medians([row_samples(r) for r in _launch_rows(0.0)], 400, np.random.default_rng(0))
    assert np.median(np.std(np.log(calm), axis=0)) < 0.01


def test_joint_fit_bootstraps_over_launches_when_rows_have_them():
    rows = []
    for r in _launch_rows(0.05):
        rows.append(dict(r, steps_max=2, step_bytes_max=r["nbytes"], reduced_bytes_max=0))
    p = fit_joint(rows, n_boot=200)
    assert "bootstrap: launches, then samples" in p.notes[0]
    assert rel(p.beta_s_per_byte, BETA) < 0.1


def test_gamma_by_path_and_temperature():
    p = NetworkParams(ALPHA, BETA, 3e-11, library_gamma_s_per_byte=2e-10, gamma_cold_s_per_byte=1e-10,
                      library_gamma_cold_s_per_byte=3e-10, cold_above_bytes=8 << 20)
    assert p.gamma_for(False, 1 << 20) == 3e-11 and p.gamma_for(True, 1 << 20) == 2e-10
    assert p.gamma_for(False, 16 << 20) == 1e-10 and p.gamma_for(True, 16 << 20) == 3e-10
    q = NetworkParams(ALPHA, BETA, 3e-11)  # nothing but numpy's warm gamma: every path and size pays it
    assert q.gamma_for(True, 1 << 30) == q.gamma_for(False, 1) == 3e-11
    assert NetworkParams(ALPHA, BETA).gamma_for(True, 8) == 0.0
    assert NetworkParams.from_dict(strict_json(p)) == p


# --------------------------------------------------------------------------- hand-computed helpers


def test_bandwidth_of_inverse_bandwidth_and_its_interval():
    from ccbench.analysis.fit import Segment

    def gbs(beta, ci=(math.nan, math.nan)):
        s = Segment(8, 64, 3, 1e-6, beta, (0.0, 1.0), ci)
        return s.bandwidth_gbs, s.bandwidth_ci_gbs

    assert gbs(1e-10)[0] == pytest.approx(10.0)       # 1 / 1e-10 B/s = 1e10 B/s = 10 GB/s
    assert gbs(0.0)[0] == math.inf and gbs(-1e-10)[0] == math.inf
    assert all(math.isnan(gbs(b)[0]) for b in (None, math.nan, math.inf))
    lo, hi = gbs(1e-10, (1e-10, 2e-10))[1]            # the bounds swap: slower beta, lower bandwidth
    assert lo == pytest.approx(5.0) and hi == pytest.approx(10.0)


def test_bic_is_schwarz_with_three_parameters_per_segment_less_one():
    from ccbench.core.estimators import segments_bic as _bic

    # n ln(RSS/n) + (3k - 1) ln n (Schwarz 1978), computed by hand for n = 8, RSS = 0.08
    assert _bic(0.08, 8, 1) == pytest.approx(8 * math.log(0.01) + 2 * math.log(8))
    assert _bic(0.08, 8, 2) == pytest.approx(8 * math.log(0.01) + 5 * math.log(8))
    # RSS/n floored at (1e-6)^2
    assert _bic(0.0, 8, 1) == pytest.approx(8 * math.log(1e-12) + 2 * math.log(8))
    assert _bic(0.0, 8, 1, floor=1e-3) == pytest.approx(8 * math.log(1e-6) + 2 * math.log(8))


def test_weighted_line_matches_polyfit_with_relative_weights():
    from ccbench.core.estimators import weighted_r2 as _weighted_r2
    from ccbench.core.estimators import wls_line as _wls_line

    x = np.array([0.0, 1.0, 2.0, 4.0])
    y = np.array([1.0, 1.5, 4.0, 5.0])
    # np.polyfit's w multiplies the residuals, so w = 1/y is the weight 1/y^2 on squared residuals
    b_ref, a_ref = np.polyfit(x, y, 1, w=1.0 / y)
    a, b = _wls_line(x, y)
    assert float(a) == pytest.approx(a_ref, rel=1e-12) and float(b) == pytest.approx(b_ref, rel=1e-12)
    fitted = a_ref + b_ref * x
    w = 1.0 / y**2
    ybar = (w * y).sum() / w.sum()
    r2 = 1.0 - (w * (y - fitted) ** 2).sum() / (w * (y - ybar) ** 2).sum()
    assert _weighted_r2(y, fitted) == pytest.approx(r2, rel=1e-12)
    flat = np.full(3, 2.0)                            # no spread: R^2 is 1 if exact, else 0
    assert _weighted_r2(flat, flat) == 1.0 and _weighted_r2(flat, flat + 0.1) == 0.0
    assert fit_line(x, y, n_boot=0).r2 == pytest.approx(r2, rel=1e-12)   # the fit's R^2 is this one


def test_compare_params_ratio_and_touching_intervals():
    ref = NetworkParams(2e-6, 1e-10, 3e-10, alpha_ci_s=(1e-6, 3e-6), beta_ci_s_per_byte=(1e-10, 2e-10),
                        gamma_ci_s_per_byte=(1e-10, 2e-10), source="pingpong")
    oth = NetworkParams(4e-6, 1e-10, None, alpha_ci_s=(3e-6, 5e-6), beta_ci_s_per_byte=(3e-10, 4e-10),
                        source="joint")
    a, b, g = compare_params(ref, oth)
    assert (a.parameter, a.ratio, a.cis_overlap) == ("alpha_s", 2.0, True)   # touch at 3e-6
    assert (b.ratio, b.cis_overlap) == (1.0, False)
    assert g.ratio is None and g.cis_overlap is None
    assert (a.reference_source, a.other_source) == ("pingpong", "joint")
    assert compare_params(NetworkParams(0.0, 1e-10), oth)[0].ratio is None


FLAG_SIZES = [1e3, 2e3, 4e3, 8e3]


def flags_of(times, spread=0.01, sizes=FLAG_SIZES, **kw):
    """The flags of a line fitted to `times` at `sizes`, each size's samples `spread` around its time (None: no
    samples)."""
    samples = None if spread is None else [[t * (1 - spread), t, t * (1 + spread)] for t in times]
    return fit_line(sizes[:len(times)], times, samples, **kw).flags


def test_line_flags_name_each_warning_at_its_edge():
    line = [1e-6 + 1e-9 * n for n in FLAG_SIZES]
    assert flags_of(line) == ()                                               # four sizes are enough
    assert flags_of(line[:3]) == ("few_sizes",)
    assert flags_of([-1e-6 + 1e-9 * n for n in FLAG_SIZES]) == ("negative_alpha",)
    through_zero = fit_line(FLAG_SIZES, [2 ** -20 * n for n in FLAG_SIZES], [[2 ** -20 * n] * 3 for n in FLAG_SIZES])
    assert through_zero.alpha_s == 0.0 and through_zero.flags == ()          # alpha exactly 0 is not negative
    assert flags_of([5e-6 - 1e-10 * n for n in FLAG_SIZES]) == ("negative_beta",)
    assert flags_of([5e-6] * 4, spread=0) == ("beta_ci_includes_zero",)       # the interval is (0, 0)
    assert flags_of(line, spread=None, n_boot=0) == ("no_intervals",)          # no interval includes zero
    assert flags_of(line, spread=None) == ("residual_bootstrap",)
    # one size off the line: the largest relative residual is just under and just over 25%
    for factor, poor in ((1.4226216256, False), (1.4226216257, True)):
        off = list(line)
        off[1] *= factor
        f = fit_line(FLAG_SIZES, off, n_boot=0)
        assert abs(f.max_rel_residual - 0.25) < 1e-9
        assert f.flags == (("poor_fit",) if poor else ()) + ("no_intervals",)


def test_only_finite_positive_samples_count_and_a_size_needs_two():
    from ccbench.core.estimators import LaunchBlocks

    """What a fit resamples: a size's finite positive samples when it has two or more (else no size's samples: the
    residuals), launches with such samples when two or more are left (else one plain set)."""
    def kind(first):
        return fit_line([8, 16, 32], [1.0, 2.0, 4.0], [first, [2.0, 2.0], [4.0, 4.0]], n_boot=20).bootstrap

    assert kind(None) == "residuals"
    assert kind([1.0, 0.0, -1.0, math.nan, math.inf]) == "residuals"               # one usable sample
    assert kind([[2.0, 0.0], [3.0, -4.0]]) == "samples"                             # flattened: 2 and 3
    assert kind(LaunchBlocks([[None, 2.0], [3.0, None]])) == "samples"   # nulls dropped: two launches of one sample

    def curve(samples, counts):
        rows = [dict(collective="bcast", algorithm="linear", nranks=2, nbytes=8, median_s=1.0, samples_s=samples,
                     launches=list(range(1, len(counts) + 1)), launch_samples=counts),
                *(dict(collective="bcast", algorithm="linear", nranks=2, nbytes=n, median_s=t, samples_s=[t, t])
                  for n, t in ((16, 2.0), (32, 4.0)))]
        return fit_curve(rows, n_boot=20).line.bootstrap

    assert curve([1.0, -1.0, None, 2.0, 3.0], [2, 1, 2]) == "launches, then samples"  # launches [1] and [2, 3]
    assert curve([0.0, 2.0, 3.0], [1, 2]) == "samples"                                 # one launch left: plain


def test_segment_at_switches_at_the_breakpoint_itself():
    from ccbench.analysis.fit import Segment, SegmentedFit

    def seg(lo, hi):
        return Segment(lo, hi, 3, 1e-6, 1e-10, (0.0, 1.0), (0.0, 1.0))

    a, b, c = seg(8, 64), seg(128, 1024), seg(2048, 8192)
    s = SegmentedFit((a, b, c), (128, 2048), (None, None, None), 1.0, 0.0)
    assert s.n_segments == 3 and s.to_dict()["n_segments"] == 3
    assert s.segment_at(0) is a and s.segment_at(127) is a and s.segment_at(128) is b   # "first size of segment i+1"
    assert s.segment_at(2047) is b and s.segment_at(2048) is c and s.segment_at(1e12) is c


def test_to_dict_is_strict_json_of_numpy_values():
    from ccbench.analysis.fit import PathParams, params_from_dict
    from ccbench.core.records import jsonable

    got = jsonable({1: (np.float64(1.5), np.int64(3), np.bool_(True), math.nan, -math.inf),
                     "a": np.array([2.0, math.inf])})
    assert got == {"1": [1.5, 3, True, None, None], "a": [2.0, None]}
    assert type(got["1"][1]) is int and type(got["1"][2]) is bool and type(got["1"][0]) is float
    numpy, mpi = NetworkParams(1e-6, 1e-10, source="effective"), NetworkParams(2e-6, 2e-10, source="effective")
    p = PathParams(numpy, mpi, notes=("n",))
    assert params_from_dict(json.loads(json.dumps(p.to_dict()))) == p

    class Native:
        native = True

    assert p.for_algorithm(Native()) is mpi and p.for_algorithm(object()) is numpy
    assert (p.alpha_s, p.beta_s_per_byte) == (1e-6, 1e-10)


def test_cold_rate_only_above_the_threshold_and_records_by_path():
    from ccbench.analysis.fit import reduction_records

    p = NetworkParams(ALPHA, BETA, 1e-10, gamma_cold_s_per_byte=2e-10, cold_above_bytes=1024.0)
    assert p.gamma_for(False, 1024) == 1e-10 and p.gamma_for(False, 1025) == 2e-10   # "more than" the size
    recs = [dict(nbytes=8), dict(nbytes=8, path="mpi"), dict(nbytes=8, temperature="cold"),
            dict(nbytes=8, path="mpi", temperature="cold")]
    assert reduction_records(recs) == [recs[0]]                                      # no keys: numpy, warm
    assert reduction_records(recs, "mpi", "cold") == [recs[3]]
    assert reduction_records(recs, temperature="cold") == [recs[2]]


def test_effective_fit_with_exactly_three_rows_drops_unusable_ones():
    from ccbench.analysis.fit import fit_effective

    a, b = 3e-6, 2e-10
    terms = [(1.0, 1e3), (2.0, 1e5), (4.0, 1e7), (1.0, 1e4), (math.nan, 1e4)]
    off = [1e-7, 0.0, 2e-4, 0.0, 0.0]
    t = [s * a + n * b + o for (s, n), o in zip(terms[:3], off[:3], strict=True)]
    rows = [dict(median_s=v) for v in t] + [dict(median_s=0.0), dict(median_s=1e-5)]
    p = fit_effective(rows, terms, off, path="numpy", n_boot=0)
    assert p.n_points == 3 and p.alpha_ci_s is None
    assert p.alpha_s == pytest.approx(a, rel=1e-9, abs=0) and p.beta_s_per_byte == pytest.approx(b, rel=1e-9, abs=0)
    with pytest.raises(CCBenchError, match="at least 3 modelled rows, got 2"):
        fit_effective(rows[1:], terms[1:], off[1:], path="mpi", n_boot=0)


def test_effective_fit_reports_residuals_notes_and_needs_both_terms():
    from ccbench.analysis.fit import fit_effective

    a, b = 3e-6, 2e-10
    terms = [(1.0, 1e3), (2.0, 1e5), (4.0, 1e7)]
    off = [1e-6, 1e-6, 2e-3]
    exact = [s * a + n * b + o for (s, n), o in zip(terms, off, strict=True)]
    p = fit_effective([dict(median_s=v) for v in exact], terms, off, path="mpi", n_boot=0)
    assert p.r2 == pytest.approx(1.0) and p.max_rel_residual < 1e-9
    assert p.notes == ("mpi path: 3 rows, bootstrap: none",) and p.source == "effective"
    # alpha 0 in the data: NNLS puts it at the bound and says so
    z = fit_effective([dict(median_s=n * b) for _, n in terms], terms, [0.0] * 3, path="numpy", n_boot=0)
    assert z.alpha_s == 0.0 and z.notes[1:] == ("alpha at the zero bound",)
    # off by +-10% from the model: the residuals are those of the fitted model plus the fixed offset
    noisy_t = [v * f for v, f in zip(exact, (1.1, 0.9, 1.0), strict=True)]
    q = fit_effective([dict(median_s=v) for v in noisy_t], terms, off, path="mpi", n_boot=200)
    fitted = [s * q.alpha_s + n * q.beta_s_per_byte + o for (s, n), o in zip(terms, off, strict=True)]
    assert q.max_rel_residual == pytest.approx(max(abs(1 - f / t) for f, t in zip(fitted, noisy_t, strict=True)))
    assert q.notes[0] == "mpi path: 3 rows, bootstrap: residuals" and q.alpha_ci_s is not None
    again = fit_effective([dict(median_s=v) for v in noisy_t], terms, off, path="mpi", n_boot=200)
    assert again == q                                                               # seeded bootstrap
    # steps and bytes of at most one still count as terms
    small = [(1.0, 1.0), (0.5, 0.5), (1.0, 0.0)]
    s = fit_effective([dict(median_s=st * 1e-6 + n * 2e-6) for st, n in small], small, [0.0] * 3,
                      path="numpy", n_boot=0)
    assert s.alpha_s == pytest.approx(1e-6) and s.beta_s_per_byte == pytest.approx(2e-6)
    for bad in ([(0.0, 1.0), (0.0, 2.0), (0.0, 3.0)], [(1.0, 0.0), (2.0, 0.0), (3.0, 0.0)]):
        with pytest.raises(CCBenchError, match="numpy path needs rows with both messages and bytes"):
            fit_effective([dict(median_s=1e-5)] * 3, bad, [0.0] * 3, path="numpy", n_boot=0)


def test_reduction_gammas_filter_by_dtype_and_op_and_say_what_they_assumed():
    from ccbench.analysis.fit import reduction_gammas

    def recs(path, temp, gamma, dtype="float32", op="sum"):
        return [{"path": path, "temperature": temp, "dtype": dtype, "op": op, "nbytes": n,
                 "seconds": [1e-6 + gamma * n] * 5} for n in (4096, 65536, 1 << 20, 4 << 20)]

    data = (recs("numpy", "warm", 3e-11) + recs("numpy", "warm", 9e-11, dtype="float64")
            + recs("numpy", "warm", 5e-11, op="max") + recs("numpy", "cold", 1e-10))
    g = reduction_gammas(data, dtype="float32", op="sum", ranks_per_node=2, n_boot=0)
    assert g["gamma_s_per_byte"] == pytest.approx(3e-11, rel=1e-6, abs=0)
    assert g["cold_above_bytes"] == 16 << 20                     # 32 MiB default shared by 2 ranks
    assert g["notes"] == ("cold gamma above 16 MiB per rank: the last-level cache (not stated; assumed 32 MiB) "
                          "shared by 2 rank(s) per node",
                          "no MPI_Reduce_local timings: native algorithms are priced with numpy's gamma")
    f64 = reduction_gammas(data, dtype="float64", n_boot=0)
    assert f64["gamma_s_per_byte"] == pytest.approx(9e-11, rel=1e-6, abs=0)
    assert reduction_gammas(data, op="max", n_boot=0)["gamma_s_per_byte"] == pytest.approx(5e-11, rel=1e-6, abs=0)
    w = reduction_gammas(recs("numpy", "warm", 3e-11) + recs("mpi", "warm", 2e-10), n_boot=0)
    assert w["notes"] == ("no cold reduction timings: every size pays the warm gamma",)


def test_fit_curves_counts_only_sizes_with_positive_times():
    three = curve_rows(ALPHA + BETA * SIZES[:3], sizes=SIZES[:3], samples=False, algorithm="ring")
    short = curve_rows(ALPHA + BETA * SIZES[:3], sizes=SIZES[:3], samples=False, algorithm="tree")
    short[2]["median_s"] = -1e-6                                 # two usable sizes left
    got = fit_curves(three + short, min_sizes=3, n_boot=0)
    assert [f.algorithm for f in got] == ["ring"] and got[0].line.n_sizes == 3
