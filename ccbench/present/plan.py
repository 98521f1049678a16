"""``ccbench plan``'s output: a replicated run's split between launches and samples against the optimal one."""

import math

from ccbench.core.units import fmt_time
from ccbench.present.table import Column, Table

__all__ = ["design_tables"]


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.1f}%"


def _num(x: float) -> str:
    return "inf" if x == math.inf else "-" if not math.isfinite(x) else f"{x:.3g}"


def design_tables(d, run_name: str) -> list:
    """The summary table and the lines that explain it (``ccbench.analysis.design.LaunchDesign``)."""
    t = Table(f"{run_name}: {d.launches} launches, {d.cases} cases with 2+ samples in every launch",
              [Column("", "text"), Column("as run", "text"), Column("optimal split (Kalibera & Jones)", "text")])
    t.add_row("samples per case per launch (median)", _num(d.samples_per_launch),
              f"{_num(d.optimal_samples)} (IQR {_num(d.optimal_samples_iqr[0])}-{_num(d.optimal_samples_iqr[1])})")
    t.add_row("launches in the run's time", str(d.launches), _num(d.launches_at_optimum))
    t.add_row("relative standard error of a typical time (median)", _pct(d.se_as_run), _pct(d.se_at_optimum))
    t.add_row("smallest ratio two such runs tell apart (80% power)", _num(d.mdr_as_run), _num(d.mdr_at_optimum))
    lines = [
        f"one launch: {fmt_time(d.launch_wall_s, 3)} wall, of which {fmt_time(d.launch_fixed_s, 3)} is fixed "
        "(start-up, buffers, warm-up, checks: wall minus the time in samples)",
        f"spread (median over cases, log scale): between launches CV {_pct(d.between_cv)}, within a launch CV "
        f"{_pct(d.within_cv)}",
        "n* = sqrt(c_launch sigma_w^2 / (c_sample sigma_b^2)) per case: a launch's fixed cost shared by its cases, "
        "a sample's cost its median time (Kalibera & Jones, ISMM 2013)",
    ]
    return [t, *lines]
