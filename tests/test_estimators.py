"""The estimators and resampling methods of ``ccbench.core.estimators`` against answers worked out by hand.

Each test computes its expectation independently: a closed form worked out on paper, a second implementation
(``np.polyfit``) or a property the documented method must have (a residual bootstrap only
draws the observed residuals, a bootstrap of constant launches only yields geometric means of those constants).
"""

import math
import warnings

import numpy as np
import pytest

from ccbench.core.estimators import (
    LaunchBlocks,
    bootstrap_launches,
    bootstrap_medians,
    bootstrap_residuals,
    nnls_relative,
    percentile_ci,
    wls_line,
)


def test_wls_line_recovers_an_exact_line():
    """Noise-free T = a + b n gives back a and b exactly (any weights fit a line exactly)."""
    x = np.array([0.0, 1e3, 1e4, 1e5, 1e6])
    a, b = wls_line(x, 2e-6 + 3e-10 * x)
    assert float(a) == pytest.approx(2e-6, rel=1e-12, abs=0)
    assert float(b) == pytest.approx(3e-10, rel=1e-12, abs=0)


def test_residual_bootstrap_draws_every_observed_residual_and_only_those():
    """Each synthetic value is fitted * (1 + r) for a residual r drawn uniformly from all of them."""
    fitted = np.array([1.0, 2.0, 4.0])
    rel = np.array([0.5, 0.0, -0.25])
    Y = bootstrap_residuals(fitted, rel, 3000, np.random.default_rng(0))
    assert Y.shape == (3000, 3)
    for j in range(3):
        got = Y[:, j] / fitted[j] - 1.0
        values, counts = np.unique(np.round(got, 12), return_counts=True)
        assert values.tolist() == [-0.25, 0.0, 0.5]
        assert np.all(np.abs(counts / 3000 - 1 / 3) < 0.05)        # uniform over the 3 residuals


def test_residual_bootstrap_floors_values_at_a_thousandth_of_the_smallest_fitted_time():
    """Non-positive synthetic times become 1e-3 * min |fitted != 0|, or 1e-12 when every fitted value is 0."""
    rng = np.random.default_rng(1)
    # fitted 1, 2, 4: floor 1e-3.  Residual -1.5 makes negative times (floored); -0.9985 makes
    # 0.0015 * fitted, above the floor, which must be kept as it is
    Y = bootstrap_residuals(np.array([1.0, 2.0, 4.0]), np.array([-1.5, -0.9985, 0.5]), 600, rng)
    assert sorted(set(np.round(Y[:, 0], 12))) == [1e-3, 0.0015, 1.5]
    assert sorted(set(np.round(Y[:, 2], 12))) == [1e-3, 0.006, 6.0]
    # fitted all 1: the same floor 1e-3
    ones = bootstrap_residuals(np.ones(3), np.array([-2.0, 0.0, 0.0]), 300, rng)
    assert sorted(set(ones.ravel().tolist())) == [1e-3, 1.0]
    # fitted all 0: nothing to scale by, the floor is 1e-12
    zero = bootstrap_residuals(np.zeros(3), np.array([0.1, -0.1, 0.0]), 50, rng)
    assert np.all(zero == 1e-12)


def test_launch_bootstrap_of_constant_launches_in_several_memory_chunks():
    """Launches of constant samples: each replicate is the geometric mean of L launch levels drawn with replacement.

    1001 samples per launch and 2000 draws per launch exceed the 2e6-value memory chunk, so
    the draws are made in pieces; the answer must not depend on that.
    """
    blocks = LaunchBlocks([np.full(1001, 1.0), np.full(1001, 4.0)])
    v = bootstrap_launches(blocks, 1000, np.random.default_rng(0))
    assert v.shape == (1000,)
    values, counts = np.unique(np.round(v, 12), return_counts=True)
    # draws (1, 1) -> 1, (1, 4) or (4, 1) -> 2, (4, 4) -> 4 with probabilities 1/4, 1/2, 1/4
    assert values.tolist() == [1.0, 2.0, 4.0]
    assert np.all(np.abs(counts / 1000 - [0.25, 0.5, 0.25]) < 0.06)


def test_launch_bootstrap_resamples_the_samples_within_each_drawn_launch():
    """Launches of samples 1, 4, 4: a resampled launch's median is 1 with probability 7/27, else 4.

    (Median of 3 draws is 1 when two or more draws are 1: 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27.)  A replicate of
    two launches is sqrt(m1 m2) of two independent such medians: 1, 2 or 4.
    """
    blocks = LaunchBlocks([np.array([1.0, 4.0, 4.0]), np.array([1.0, 4.0, 4.0])])
    v = bootstrap_launches(blocks, 4000, np.random.default_rng(0))
    p1 = 7 / 27
    want = {1.0: p1 * p1, 2.0: 2 * p1 * (1 - p1), 4.0: (1 - p1) ** 2}
    values, counts = np.unique(np.round(v, 12), return_counts=True)
    assert values.tolist() == [1.0, 2.0, 4.0]
    assert all(abs(c / 4000 - want[x]) < 0.03 for x, c in zip(values.tolist(), counts, strict=True))


def test_sample_bootstrap_of_constant_sizes_in_several_memory_chunks():
    """Constant samples give constant bootstrap medians, also when one size's draws are split in chunks."""
    v = bootstrap_medians([np.full(2001, 3.0), np.array([1.0, 1.0, 2.0])], 1000, np.random.default_rng(0))
    assert v.shape == (1000, 2) and np.all(v[:, 0] == 3.0)
    # medians of 3 draws from {1, 1, 2}: 2 only when two or more draws are 2 -> 3 (1/3)^2 (2/3) + (1/3)^3 = 7/27
    assert set(v[:, 1].tolist()) == {1.0, 2.0} and abs(np.mean(v[:, 1] == 2.0) - 7 / 27) < 0.05


def test_nnls_on_the_relative_system_by_hand():
    """Unconstrained optimum when feasible; else the best fit on the remaining column (closed form)."""
    X = np.array([[1.0, 10.0], [2.0, 100.0], [4.0, 1000.0]])
    y = X @ np.array([3e-6, 2e-9])
    th = nnls_relative(X, y[None, :])
    assert th.shape == (1, 2) and th[0] == pytest.approx([3e-6, 2e-9], rel=1e-9, abs=0)
    # 10 ns/B but the smallest size 10% faster: the unconstrained alpha is negative; NNLS puts it at 0
    # and fits beta alone: min sum (beta u_i - 1)^2 with u_i = bytes_i / y_i  ->  beta = sum u / sum u^2
    y2 = np.array([0.9e-7, 1e-6, 1e-5])
    assert np.linalg.lstsq(X / y2[:, None], np.ones(3), rcond=None)[0][0] < 0
    (a, b), = nnls_relative(X, y2[None, :])
    u = X[:, 1] / y2
    assert a == 0.0 and b == pytest.approx(u.sum() / (u @ u), rel=1e-9, abs=0)
    # a known part o of each time: the fit is of y - o, weighted by 1 / y
    off = np.array([1e-6, 0.0, 2e-6])
    (a, b), = nnls_relative(X, (y + off)[None, :], off)
    assert (a, b) == (pytest.approx(3e-6, rel=1e-9, abs=0), pytest.approx(2e-9, rel=1e-9, abs=0))
    # times below the known part: every parameter 0 (the zero vector beats every feasible support)
    assert nnls_relative(X, y[None, :] * 0.5, y).tolist() == [[0.0, 0.0]]
    # rows solved together (a bootstrap) give what each row gives alone
    together = nnls_relative(X, np.vstack([y, y2, y * 0.5]), None)
    for row, alone in zip(together, (y, y2, y * 0.5), strict=True):
        assert row == pytest.approx(nnls_relative(X, alone[None, :])[0], rel=1e-12, abs=0)
    # one column, one time partly explained by a large known part: t = 1 - o / y = (1, -3), a = x / y = (10, 1);
    # theta = a.t / a.a = 7 / 101 > 0, though its residual sum (9.5) exceeds the number of rows
    (th,), = nnls_relative(np.array([[10.0], [1.0]]), np.array([[1.0, 1.0]]), np.array([0.0, 4.0]))
    assert th == pytest.approx(7 / 101, rel=1e-12, abs=0)
    # a zero column is allowed: its parameter stays 0
    Z = np.column_stack([X[:, 0], np.zeros(3)])
    (a, b), = nnls_relative(Z, (X[:, 0] * 3e-6)[None, :])
    assert a == pytest.approx(3e-6, rel=1e-9, abs=0) and b == 0.0


def test_nnls_holds_a_slightly_negative_slope_at_zero():
    """A slope of -1e-14 s/B is not accepted as "almost zero": beta is 0 and alpha is refitted alone.

    Alone, alpha minimises sum (alpha v_i - 1)^2 with v_i = steps_i / y_i: alpha = sum v / sum v^2.
    """
    X = np.array([[1.0, 1e3], [2.0, 1e5], [4.0, 1e7]])
    y = X @ np.array([1e-6, -1e-14])                 # 4e-6 - 1e-7 at the largest size
    (a, b), = nnls_relative(X, y[None, :])
    v = X[:, 0] / y
    assert b == 0.0 and a == pytest.approx(v.sum() / (v @ v), rel=1e-12, abs=0)
    assert abs(a / 1e-6 - 1) > 1e-3                  # not the unconstrained alpha


def test_nnls_rows_are_solved_independently_in_memory_chunks():
    """Rows too many for one memory chunk: each row still gets its own exact answer, in its place."""
    n = 600_000                                   # 4e6 // (n * 2) = 3 rows per chunk: 4 rows -> chunks of 3 and 1
    X = np.column_stack([1.0 + np.arange(n) % 7, np.linspace(1e3, 1e6, n)])
    thetas = np.array([[2e-6, 1e-10], [3e-6, 4e-10], [1e-6, 2e-10], [5e-6, 3e-10]])
    off = np.full(n, 1e-6)                        # a known part of every time, passed on to every chunk
    got = nnls_relative(X, thetas @ X.T + off, off)
    assert got.shape == (4, 2)
    for i in range(4):
        assert got[i] == pytest.approx(thetas[i], rel=1e-8, abs=0)


def test_percentile_interval_by_hand():
    v = np.arange(101, dtype=float)                   # percentile p of 0..100 is p itself
    assert percentile_ci(v, 0.90) == pytest.approx((5.0, 95.0))
    assert percentile_ci(np.append(v, [math.nan, math.inf]), 0.80) == pytest.approx((10.0, 90.0))
    lo, hi = percentile_ci(np.array([math.nan]), 0.95)
    assert math.isnan(lo) and math.isnan(hi)


def test_a_line_through_one_size_has_no_slope_and_says_nothing():
    """All points at one size: no slope can be fitted (NaN), without a numpy warning on the way (0/0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = wls_line(np.array([8.0, 8.0]), np.array([2.0, 2.0]))
    assert math.isnan(float(a)) and math.isnan(float(b))
