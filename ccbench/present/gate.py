"""The regression gates' output: the cases that trip ``compare --fail-on``, and ``check``'s reference table."""

from ccbench.core.units import fmt_time
from ccbench.present.table import Column, Styled, Table

__all__ = ["failures_table", "references_table"]


def _interval(lo, hi, fmt) -> str:
    return "-" if lo is None or hi is None else f"{fmt(lo)}-{fmt(hi)}"


def failures_table(failures, what: str, margin: float) -> Table:
    """The pairs ``gate_failures`` returned."""
    beyond = f" by more than {margin:.0%}" if margin else ""
    t = Table(f"--fail-on {what}: cases decided {what} at the launch level{beyond}, or not compared (ratio run / A, "
              "95% interval)",
              [Column("run"), Column("case"), Column("verdict"), Column("ratio", "ratio"),
               Column("interval", fmt=lambda v: v)])
    for f in failures:
        t.add_row(f.other, f.case, Styled(f.verdict, "red" if f.verdict == "slower" else "yellow"), f.ratio,
                  _interval(f.ratio_low, f.ratio_high, lambda x: f"{x:.3g}"))
    return t


def references_table(results, run_name: str) -> Table:
    """``check_references``' results: each case's reference, bounds, the measured median and its interval."""
    t = Table(f"{run_name} against its references (ReFrame-style bounds: value x (1 + lower) .. value x (1 + upper))",
              [Column("case"), Column("reference", "time"), Column("allowed", fmt=lambda v: v),
               Column("measured", "time"), Column("95% CI", fmt=lambda v: v), Column("", fmt=lambda v: v)])
    for r in results:
        ref = r.ref
        case = f"{ref.collective}/{ref.algorithm} {ref.nbytes} B" + (f" {ref.dtype}" if ref.dtype else "")
        allowed = f"{fmt_time(r.low_s) if r.low_s is not None else '0'}-{fmt_time(r.high_s) if r.high_s else 'inf'}"
        style = {"ok": "green", "missing": "yellow"}.get(r.status, "red")
        t.add_row(case, ref.value_s, allowed, r.measured_s, _interval(r.ci_low_s, r.ci_high_s, fmt_time),
                  Styled(r.status, style))
    return t
