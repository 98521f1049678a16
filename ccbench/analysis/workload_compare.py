"""``ccbench compare`` of training-workload runs: the sweep comparison's method on workload rows.

Rows of the other runs are matched to the baseline A on ``KEY_FIELDS``: every field of
``WorkloadRow`` that is neither a measurement (times, overlap, slowdown, counted bytes,
checks, samples), nor a rank count (``nranks``, ``group_ranks``: provenance, warned about
as for sweeps; MoE's expert-parallel degree is in its variant), nor a count that follows
from the schedule (calls, tensors, elements).  That is workload, variant, model,
algorithm(s), dtype, part (-1: the whole step), its label (bucket, layer collective,
size), collective, buffer bytes, delay and delayed rank.  Ratios, the two-sided
Mann-Whitney U tests of the raw samples, the Benjamini-Hochberg adjustment over all rows
of a pair of runs and the verdicts are ``ccbench.analysis.compare.test_pairs``'s, as for sweeps;
per workload the ratios of whole steps (and, apart, of their calls) are summarised by
their geometric mean (Fleming & Wallace, CACM 1986).
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ccbench.analysis.compare import (
    VERDICT_STYLE,
    Comparison,
    index_rows,
    print_warnings_and_legend,
    provenance_differences,
    test_pairs,
)
from ccbench.core.errors import UsageError
from ccbench.core.stats import geometric_mean
from ccbench.core.units import format_size, human_time
from ccbench.present.workload_report import load_workload_run, short_algorithm
from ccbench.store.workload_rows import KIND, WorkloadRow

__all__ = ["CSV_COLUMNS", "KEY_FIELDS", "WorkloadPair", "compare_workload_runs", "comparison_figure",
           "markdown_blocks", "match_key", "print_comparison", "summary"]

#: WorkloadRow fields that are measured, not part of what is measured.
MEASURED = frozenset({"samples", "median_s", "min_s", "mean_s", "ci_low_s", "ci_high_s", "comm_s", "compute_s",
                      "total_s", "overlap_pct", "baseline_s", "slowdown", "bytes_sent_total", "nwrong",
                      "stop_reason", "flags", "samples_s"})
#: Rank counts (provenance: compared and warned about, not matched on).
PER_RUN = frozenset({"nranks", "group_ranks"})
#: Counts that follow from the schedule the other key fields name.
DERIVED = frozenset({"ncalls", "ntensors", "payload_elems"})
KEY_FIELDS = tuple(f.name for f in dataclasses.fields(WorkloadRow) if f.name not in MEASURED | PER_RUN | DERIVED)
#: Workload settings whose difference is warned about (the rest are the key, rank counts or repetition rules).
_QUIET_SETTINGS = ("results_dir", "thread_level", "warmup", "min_reps", "max_reps", "target_rse", "budget_s")


def match_key(r: WorkloadRow) -> tuple:
    """What makes two workload rows of different runs the same measurement (``KEY_FIELDS``)."""
    return tuple(getattr(r, f) for f in KEY_FIELDS)


@dataclass(frozen=True)
class WorkloadPair:
    """One workload row measured in the baseline (a) and in another run (b); ratio = b / a."""

    baseline: str
    other: str
    workload: str
    variant: str
    model: str
    algorithm: str
    dtype: str
    part: int
    label: str
    collective: str
    nbytes: int
    delay_s: float | None
    delayed_rank: int | None
    nranks_a: int
    nranks_b: int
    samples_a: int
    samples_b: int
    median_a_s: float
    median_b_s: float
    ci_low_a_s: float
    ci_high_a_s: float
    ci_low_b_s: float
    ci_high_b_s: float
    overlap_pct_a: float | None
    overlap_pct_b: float | None
    slowdown_a: float | None
    slowdown_b: float | None
    ratio: float
    p_value: float | None
    p_adjusted: float | None
    significant: bool | None
    verdict: str  # "slower", "faster", "noise", or "untested"

    @property
    def whole(self) -> bool:
        """A whole measurement (a step, an overlap or straggler row), not one call of a step."""
        return self.part == -1 or self.workload in ("overlap", "straggler")


CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(WorkloadPair))


def _settings_differences(a: Mapping, b: Mapping, la: str, lb: str) -> list[str]:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    keys = [k for k in dict.fromkeys([*ca, *cb]) if k not in _QUIET_SETTINGS and ca.get(k) != cb.get(k)]
    if not keys:
        return []
    return ["provenance differs in workload settings: " + ", ".join(
        f"{k}={ca.get(k, '(unset)')} ({la}) vs {cb.get(k, '(unset)')} ({lb})" for k in keys)]


def compare_workload_runs(runs: Sequence, results_dir="results", *, level: float) -> Comparison:
    """Compare every workload run after the first with the first; see the module docstring."""
    loaded = [load_workload_run(r, results_dir) for r in runs]
    paths = [p.resolve() for p, *_ in loaded]
    for i, p in enumerate(paths):
        if p in paths[:i]:
            raise UsageError(f"run {str(loaded[i][0])!r} is given twice")
    labels = [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(loaded))]
    warnings: list[str] = []
    for lab, (_, _, _, w) in zip(labels, loaded, strict=True):
        warnings += [f"run {lab}: {x}" for x in w]
    base_path, base_meta, base_rows, _ = loaded[0]
    base = index_rows(base_rows, labels[0], warnings, key=match_key)
    pairs: list[WorkloadPair] = []
    unmatched: dict[str, tuple[int, int]] = {}
    for lab, (path, meta, rows, _) in zip(labels[1:], loaded[1:], strict=True):
        warnings += provenance_differences(base_meta, meta, base_rows, rows, labels[0], lab)
        warnings += _settings_differences(base_meta, meta, labels[0], lab)
        other = index_rows(rows, lab, warnings, key=match_key)
        common = [k for k in base if k in other]
        unmatched[lab] = (len(base) - len(common), len(other) - len(common))
        if not common:
            raise UsageError(f"runs {labels[0]} ({base_path.name}) and {lab} ({path.name}) have no row in common "
                             "(same workload, variant, model, algorithm, call, size, delay)")
        for a, b, ratio, p, q, sig, verdict in test_pairs([(base[k], other[k]) for k in common], level):
            pairs.append(WorkloadPair(
                labels[0], lab, *match_key(a), a.nranks, b.nranks, a.samples, b.samples, a.median_s, b.median_s,
                a.ci_low_s, a.ci_high_s, b.ci_low_s, b.ci_high_s, a.overlap_pct, b.overlap_pct, a.slowdown,
                b.slowdown, ratio, p, q, sig, verdict))
    return Comparison([(lab, p, m) for lab, (p, m, _, _) in zip(labels, loaded, strict=True)], pairs,
                      warnings, unmatched, level, kind=KIND)


def summary(cmp: Comparison) -> list[dict]:
    """Per other run and workload, whole steps then calls: pairs, geometric mean of the ratios, verdicts."""
    out = []
    for label, _, _ in cmp.runs[1:]:
        mine = [p for p in cmp.pairs if p.other == label]
        for w in dict.fromkeys(p.workload for p in mine):
            for what, whole in (("steps", True), ("calls", False)):
                ps = [p for p in mine if p.workload == w and p.whole == whole]
                if not ps:
                    continue
                ratios = [p.ratio for p in ps if p.ratio > 0 and math.isfinite(p.ratio)]
                out.append({"other": label, "workload": w, "rows": what if w not in ("overlap", "straggler")
                            else "calls measured", "pairs": len(ps),
                            "geomean_ratio": geometric_mean(ratios) if ratios else math.nan,
                            **{v: sum(p.verdict == v for p in ps) for v in ("faster", "slower", "noise",
                                                                               "untested")}})
    return out


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.2g}"


def _extra(p: WorkloadPair) -> list[str]:
    if p.workload == "overlap":
        return [f"{p.overlap_pct_a:.0f}%", f"{p.overlap_pct_b:.0f}%"]
    if p.workload == "straggler":
        return [f"{p.slowdown_a:.2f}", f"{p.slowdown_b:.2f}"]
    return []


def markdown_blocks(cmp: Comparison, figure: str | None) -> list:
    """The workload comparison as report blocks (see ``ccbench.present.report.render_markdown``)."""
    base = cmp.runs[0][0]
    blocks: list = [("h", 1, "ccbench comparison: " + " vs ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs)),
                    ("table", ["run", "directory", "workload", "model", "MPI library", "ranks", "nodes", "per node",
                               "thread level", "started"],
                     [[lab, str(p), str(m.get("workload", "?")), str((m.get("model") or {}).get("name", "-")),
                       m.get("mpi_library", "?"), str(m.get("nranks", "?")), str(m.get("nodes", "?")),
                       str(m.get("ranks_per_node", "?")), str(m.get("thread_level", "?")),
                       str(m.get("start_time", "?"))] for lab, p, m in cmp.runs], {5, 6, 7})]
    if cmp.warnings:
        blocks += [("h", 2, "Warnings"), ("ul", [f"warning: {w}" for w in cmp.warnings])]
    blocks.append(("p", f"Ratio = other run's stored median / run {base}'s (> 1: slower than {base}). p: "
                        "two-sided Mann-Whitney U test of the two rows' raw samples, adjusted for the number "
                        f"of rows compared (Benjamini-Hochberg); significant when below {cmp.level}, "
                        "otherwise noise. Summary: geometric mean of the ratios, of whole steps and of the "
                        "calls within them apart."))
    blocks += [("h", 2, "Summary"),
               ("table", ["run", "workload", "rows", "compared", f"geometric mean ratio (vs {base})", "faster",
                          "slower", "noise", "untested"],
                [[s["other"], s["workload"], s["rows"], str(s["pairs"]), f"{s['geomean_ratio']:.3g}",
                  str(s["faster"]), str(s["slower"]), str(s["noise"]), str(s["untested"])] for s in summary(cmp)],
                {3, 4, 5, 6, 7, 8})]
    only = [f"{a} row(s) of run {base} not in run {lab}, {b} of run {lab} not in run {base}"
            for lab, (a, b) in cmp.unmatched.items() if a or b]
    if only:
        blocks.append(("p", "Not compared: " + "; ".join(only) + "."))
    if figure:
        blocks.append(("img", figure, "time ratios of the whole steps per workload"))
    for w in dict.fromkeys(p.workload for p in cmp.pairs):
        whole = [p for p in cmp.pairs if p.workload == w and p.whole]
        extra = {"overlap": ["overlap A", "overlap other"], "straggler": ["slowdown A", "slowdown other"]}.get(w, [])
        blocks += [("h", 2, w),
                   ("table", ["run", "variant", "algorithm", "size", f"{base} median", "other median", "ratio",
                              "p (adj.)", "verdict", *extra],
                    [[p.other, p.variant, p.algorithm, format_size(p.nbytes), human_time(p.median_a_s),
                      human_time(p.median_b_s), f"{p.ratio:.3g}", _fmt_p(p.p_adjusted), p.verdict, *_extra(p)]
                     for p in whole], {3, 4, 5, 6, 7, 8, 9})]
        calls = [p for p in cmp.pairs if p.workload == w and not p.whole]
        if calls:
            blocks += [("h", 3, f"{w}: each call of the step"),
                       ("table", ["run", "variant", "algorithm", "#", "call", "size", f"{base} median",
                                  "other median", "ratio", "p (adj.)", "verdict"],
                        [[p.other, p.variant, p.algorithm, str(p.part), p.label, format_size(p.nbytes),
                          human_time(p.median_a_s), human_time(p.median_b_s), f"{p.ratio:.3g}",
                          _fmt_p(p.p_adjusted), p.verdict] for p in calls], {3, 5, 6, 7, 8, 9})]
    return blocks


def comparison_figure(cmp: Comparison):
    """Ratio bars of the whole steps (overlap and straggler: every row), one panel per workload; None if none."""
    from ccbench.present.plots import bar_panels_figure

    panels: dict[str, dict[str, dict]] = {}
    for p in cmp.pairs:
        if not p.whole or not (p.ratio > 0 and math.isfinite(p.ratio)):
            continue
        group = f"{p.variant}: {short_algorithm(p.algorithm)}"
        if p.workload in ("overlap", "straggler"):
            group += f", {format_size(p.nbytes)}"
        panels.setdefault(f"{p.workload}: time ratio per step" if p.workload not in ("overlap", "straggler")
                          else f"{p.workload}: time ratio per call", {}).setdefault(group, {})[
            f"run {p.other} / run {p.baseline}"] = {"value": p.ratio, "hollow": not p.significant}
    if not panels:
        return None
    title = ("time ratio vs run A = " + cmp.runs[0][1].name + "; "
             + ", ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs[1:]))
    return bar_panels_figure(panels, title, "time ratio (other run / baseline, log scale; > 1: slower)",
                             fmt=lambda v: f"{v:.3g}×", log=True, ref=1.0, ref_label="same time",
                             legend_title="filled: significant", hollow_label="within noise")


def print_comparison(cmp: Comparison, console) -> None:
    """Print a workload comparison as rich tables (the CLI's view)."""
    from rich.table import Table

    base = cmp.runs[0][0]
    t = Table(title="runs", title_justify="left", header_style="bold")
    for col in ("run", "directory", "workload", "model", "MPI library", "ranks", "per node", "thread level"):
        t.add_column(col, justify="right" if col in ("ranks", "per node") else "left")
    for lab, p, m in cmp.runs:
        t.add_row(lab, str(p), str(m.get("workload", "?")), str((m.get("model") or {}).get("name", "-")),
                  str(m.get("mpi_library", "?")), str(m.get("nranks", "?")), str(m.get("ranks_per_node", "?")),
                  str(m.get("thread_level", "?")))
    console.print(t)
    print_warnings_and_legend(cmp, console, "rows")
    style = VERDICT_STYLE
    for w in dict.fromkeys(p.workload for p in cmp.pairs):
        for whole in (True, False):
            ps = [p for p in cmp.pairs if p.workload == w and p.whole == whole]
            if not ps:
                continue
            t = Table(title=f"{w}: {'whole steps' if whole else 'each call of the step'}: medians, ratio run / "
                            f"{base}, adjusted p", title_justify="left", header_style="bold")
            for col in ("run", "variant", "algorithm", *(() if whole else ("call",)), "size", f"{base} median",
                        "median", "ratio", "p", ""):
                t.add_column(col, justify="right" if col in ("size", f"{base} median", "median", "ratio", "p")
                             else "left")
            for p in ps:
                t.add_row(p.other, p.variant, p.algorithm, *(() if whole else (p.label,)), format_size(p.nbytes),
                          human_time(p.median_a_s), human_time(p.median_b_s), f"{p.ratio:.3g}",
                          _fmt_p(p.p_adjusted), style[p.verdict])
            console.print(t)
    t = Table(title=f"summary per workload: geometric mean of the ratios (vs {base})", title_justify="left",
              header_style="bold")
    for col in ("run", "workload", "rows", "compared", "geomean ratio", "faster", "slower", "noise", "untested"):
        t.add_column(col, justify="left" if col in ("run", "workload", "rows") else "right")
    for s in summary(cmp):
        t.add_row(s["other"], s["workload"], s["rows"], str(s["pairs"]), f"{s['geomean_ratio']:.3g}",
                  str(s["faster"]), str(s["slower"]), str(s["noise"]), str(s["untested"]))
    console.print(t)
    for lab, (only_base, only_other) in cmp.unmatched.items():
        if only_base or only_other:
            console.print(f"[yellow]note: not compared: {only_base} row(s) of run {base} missing from run {lab}, "
                          f"{only_other} row(s) of run {lab} missing from run {base}[/]")
