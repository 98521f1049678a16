"""ccbench plan's analysis (analysis.design) on synthetic runs with known spread and costs."""

import math

import numpy as np
import pytest

from ccbench.analysis.design import launch_design, launch_wall_times
from ccbench.core.errors import UsageError
from ccbench.core.replication import optimal_split
from ccbench.store.launches import pool_launches
from tests.test_launches import _row


def _run(sigma_b, sigma_w, n=200, launches=4, cases=5, median=1e-4, seed=3):
    """Pooled rows with a log-normal launch effect sigma_b and call noise sigma_w around `median`."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(cases):
        blocks = []
        for k in range(1, launches + 1):
            effect = rng.normal(0, sigma_b)
            blocks.append((k, _row(median * np.exp(effect + rng.normal(0, sigma_w, n)), nbytes=8 << c)))
        rows.append(pool_launches(blocks))
    return rows


def _meta(launches, wall_s):
    parts = [{"launch": k, "dir": f"parts/L{k}", "wall_s": wall_s} for k in range(1, launches + 1)]
    return {"launches": launches, "parts": parts}, [{} for _ in parts]


def test_known_components_and_costs_give_kalibera_jones_n_star():
    rows = _run(sigma_b=0.3, sigma_w=0.1, median=1e-2)
    in_samples = sum(sum(s) for r in rows for _, s in r.launch_blocks()) / 4
    meta, parts = _meta(4, wall_s=in_samples + 5.0)   # 5 s fixed per launch, 1 s per case
    d = launch_design(rows, meta, parts)
    assert d.launches == 4 and d.cases == 5 and d.launch_fixed_s == pytest.approx(5.0)
    assert d.between_cv == pytest.approx(math.sqrt(math.exp(0.09) - 1), rel=0.6)
    assert d.within_cv == pytest.approx(math.sqrt(math.exp(0.01) - 1), rel=0.1)
    for c in d.per_case:  # the formula, with this case's own components and costs
        assert c.optimal_samples == pytest.approx(optimal_split(c.var_within, c.var_between, 1.0, c.cost_sample_s))
        assert c.cost_launch_s == pytest.approx(1.0)
    # 1 s of fixed cost per case and launch, 10 ms per sample, sigma_w^2 / sigma_b^2 ~ 1/9:
    # n* = sqrt(1 / 0.01 / 9) ~ 3.3 samples, not 200; the 4 launches' time holds ~11 launches of n*
    assert 2 < d.optimal_samples < 6 and 9 < d.launches_at_optimum < 14
    assert d.se_at_optimum < 0.7 * d.se_as_run and d.mdr_at_optimum < d.mdr_as_run


def test_cheap_launches_and_no_launch_effect():
    rows = _run(sigma_b=0.0, sigma_w=0.2)
    in_samples = sum(sum(s) for r in rows for _, s in r.launch_blocks()) / 4
    d = launch_design(rows, *_meta(4, wall_s=in_samples + 5.0))
    # hardly any launch effect: n* is large (clipped to all the samples the run took of a case)
    assert d.optimal_samples > 200


def test_single_launch_runs_and_missing_times_are_refused():
    rows = _run(0.3, 0.1, launches=1)
    with pytest.raises(UsageError, match="several launches"):
        launch_design(rows, {"launches": 1, "parts": []}, [])
    rows = _run(0.3, 0.1)
    meta = {"launches": 4, "parts": [{"launch": k, "dir": None} for k in range(1, 5)]}
    with pytest.raises(UsageError, match="start and end times"):
        launch_design(rows, meta, [{} for _ in range(4)])


def test_wall_times_from_run_timestamps():
    meta = {"parts": [{"launch": 1}, {"launch": 2, "wall_s": 7.5}]}
    parts = [{"start_time": "2026-01-01T10:00:00+0000", "end_time": "2026-01-01T10:00:31+0000"}, {}]
    assert launch_wall_times(meta, parts) == [31.0, 7.5]


def test_plan_command_refuses_a_single_launch_run_in_one_line():
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "ccbench", "plan", str(repo / "tests" / "data" / "run-np2")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "several launches" in r.stderr
