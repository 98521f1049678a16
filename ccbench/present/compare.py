"""How a comparison of runs is shown: terminal tables, Markdown blocks, CSV, the ratio figure.

One module for every run kind; what differs per kind is its `CompareView` (its printer,
Markdown blocks, figure and CSV columns), named by its ``RunKind``; a kind that names none gets
the generic view (every matched row in one table, on the table model).  Every case shows the ratio with its launch-level
interval, the launches per side, p and adjusted p, and the verdict; every pair of runs gets
a line that says how many cases were decided at the launch level and what single-launch
comparisons could resolve (``launch_lines``).  The numbers come from
``ccbench.analysis.compare.compare_runs``; nothing here computes a statistic.
"""

import csv
import dataclasses
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from ccbench.analysis.compare import (
    CSV_COLUMNS,
    TEST_FIELDS,
    VERDICTS,
    WORKLOAD_CSV_COLUMNS,
    Comparison,
)
from ccbench.core.replication import USELESS_WIDTH
from ccbench.core.units import format_size
from ccbench.present.generic import key_columns
from ccbench.present.report import render_markdown
from ccbench.present.table import Column, Styled, Table, fmt_ratio, fmt_ratio_interval, render, to_block, to_rich
from ccbench.present.workload_report import short_algorithm
from ccbench.store.kinds import kind_named

__all__ = ["SWEEP_VIEW", "VERDICT_COLOUR", "WORKLOAD_VIEW", "CompareView", "answer_lines", "compare_view",
           "summary_table",
           "comparison_files", "figure_panels", "launch_lines", "legend", "markdown_blocks",
           "print_comparison", "print_warnings_and_legend"]


#: How the terminal shows each verdict.
VERDICT_COLOUR = {"slower": "red", "faster": "green", "undetermined": "yellow"}

#: Verdicts that call a difference.
CALLED = ("faster", "slower")


def _interval(p) -> tuple | str | None:
    """A pair's launch-level interval of the ratio, a "ratio_ci" cell (None when untested); one too wide to mean
    anything says the launches a side it needs."""
    if p.ratio_low is None:
        return None
    if p.useless_interval:
        return "too few launches" + (f": {p.launches_needed} needed" if p.launches_needed else "")
    return p.ratio_low, p.ratio_high


def _interval_text(p) -> str:
    """`_interval` as text."""
    iv = _interval(p)
    return "-" if iv is None else iv if isinstance(iv, str) else fmt_ratio_interval(iv)


def _launches(p) -> str:
    """Launches per side, the baseline's first: "3:3"."""
    return f"{p.launches_a}:{p.launches_b}"


def _pct(x: float) -> str:
    """A fraction as a percentage without trailing zeros: 0.05 -> "5%", 0.355 -> "35.5%"."""
    return f"{100 * x:.3g}%"


def legend(cmp: Comparison, what: str = "cases") -> str:
    """How to read a comparison's ratios, intervals, launches, p-values and verdicts (one paragraph)."""
    base = cmp.runs[0][0]
    band = (f"; noise also when the whole interval lies within +-{_pct(cmp.min_effect)} (--min-effect)"
            if cmp.min_effect > 0 else "")
    return (f"ratio = run's median / {base}'s (> 1: slower); interval: its interval at the launch level, "
            "false-coverage adjusted (Benjamini-Yekutieli) so that it excludes 1 exactly where a difference is "
            f"called, or the launches a side it needs where it is wider than {USELESS_WIDTH:g}x end to end "
            f"(to tell a 2x difference from none); launches: {base}'s:run's. p: Welch's t test of the per-launch "
            "log-medians (2 or more launches a side) or, with a single launch on a side, a normal test assuming a "
            "between-launch CV of "
            f"{_pct(cmp.launch_cv)} ({'--launch-cv' if cmp.launch_cv_given else 'default prior'}); p adj.: "
            f"Benjamini-Hochberg over all {what} of a pair of runs; below {cmp.level} faster or slower, otherwise "
            "noise (2 or more launches a side) or undetermined (a single launch: within what launch-to-launch "
            f"variation could explain){band}")


def _sentence(text: str) -> str:
    """`text` as a sentence of a page: capitalised, with a full stop."""
    return text[:1].upper() + text[1:] + "."


def _ks(ks: Sequence[int]) -> str:
    return "/".join(str(k) for k in ks)


def launch_lines(cmp: Comparison, what: str = "case") -> list[str]:
    """Per pair of runs: cases decided at the launch level, single-launch ones and what they resolve; measured CVs."""
    base = cmp.runs[0][0]
    lines = []
    for s in cmp.launch_summary():
        n, k = s.pairs, s.launch_level
        parts = [f"{k} of {n} {what}s decided at the launch level"]
        if k:
            c = s.launch_level_counts
            parts[0] += (f" ({_ks(s.launches_a)}:{_ks(s.launches_b)} launches, Welch: {c['faster']} faster, "
                         f"{c['slower']} slower, {c['noise']} noise)")
        if s.single_launch:
            lo, hi = fmt_ratio(s.resolvable_low), fmt_ratio(s.resolvable_high)
            res = lo if lo == hi else f"{lo}-{hi}"
            noise = f", {s.noise} noise (within --min-effect)" if s.noise else ""
            parts.append(f"{s.single_launch} with a single launch on a side, where launch-to-launch variation "
                         f"could not be estimated: at a between-launch CV of {_pct(cmp.launch_cv)} "
                         f"({'--launch-cv' if cmp.launch_cv_given else 'default prior'}) they resolve only ratios "
                         f"beyond {res}x either way: {s.called} called faster or slower, "
                         f"{s.undetermined} undetermined{noise}")
        if s.untested:
            parts.append(f"{s.untested} untested (fewer than 2 samples or times <= 0)")
        lines.append(f"run {s.other} vs {base}: " + "; ".join(parts))
    if cmp.measured_cv:
        lines.append("between-launch CV measured (pooled over the " + what + "s with 2 or more launches): " + ", ".join(
            f"run {lab} {100 * cv:.2g}% ({n} {what}s)" for lab, (cv, n) in cmp.measured_cv.items())
            + "; --launch-cv assumes one for single-launch comparisons on the same machine")
    return lines


def print_warnings_and_legend(cmp: "Comparison", console, what: str = "cases") -> None:
    """The provenance warnings of a comparison and how to read its ratios, intervals and p-values."""
    for w in cmp.warnings:
        console.print(f"[yellow bold]warning:[/] [yellow]{w}[/]")
    console.print(legend(cmp, what))



def _page_head(cmp: Comparison, runs: Table, what: str, summary: str = "") -> list:
    """The top of a comparison's page: its title, the `runs`, warnings, how to read it (and its `summary`), the
    summary, the launch lines, what was not compared (`what`: what a compared thing is called)."""
    view = compare_view(cmp.kind)
    base = cmp.runs[0][0]
    blocks: list = [("h", 1, "ccbench comparison: " + " vs ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs)),
                    *to_block(runs)]
    if cmp.warnings:
        blocks += [("h", 2, "Warnings"), ("ul", [f"warning: {w}" for w in cmp.warnings])]
    blocks += [("p", " ".join(filter(None, (_sentence(legend(cmp, what + "s")), summary)))),
               ("h", 2, "Summary"), *to_block(summary_table(cmp, view)), ("ul", launch_lines(cmp, what))]
    only = [f"{a} {what}(s) of run {base} not in run {lab}, {b} of run {lab} not in run {base}"
            for lab, (a, b) in cmp.unmatched.items() if a or b]
    if only:
        blocks.append(("p", "Not compared: " + "; ".join(only) + "."))
    return blocks


def markdown_blocks(cmp: Comparison, figure: str | None) -> list:
    """The comparison as report blocks (see ``ccbench.present.report.render_markdown``): the tables of
    ``sweep_tables`` (the runs with when each started), one section per collective."""
    runs, *per_collective = sweep_tables(cmp, started=True)
    blocks = _page_head(cmp, runs, "case", "Summary: geometric mean of the ratios.")
    if figure:
        blocks.append(("img", figure, "time ratios per collective"))
    for coll, t in zip(dict.fromkeys(p.collective for p in cmp.pairs), per_collective, strict=True):
        blocks += [("h", 2, coll), *to_block(t)]
    return blocks


def _in_size_order(ps: list) -> list:
    """Pairs by algorithm (in first-seen order), then size; ties keep their order (a shuffled run's rows are not)."""
    first = {a: i for i, a in enumerate(dict.fromkeys(p.algorithm for p in ps))}
    return sorted(ps, key=lambda p: (first[p.algorithm], p.nbytes))


def figure_panels(cmp: Comparison) -> dict[str, list[dict]]:
    """{collective: pairs as dicts for ``ccbench.present.plots.compare_figure``}."""
    panels: dict[str, list[dict]] = {}
    for p in cmp.pairs:
        if p.nbytes <= 0:
            continue
        variant = "" if p.op in ("none", "sum") and not p.in_place else f" {p.op}{' in place' if p.in_place else ''}"
        label = p.algorithm + (f" {p.dtype}" if len({q.dtype for q in cmp.pairs}) > 1 else "") + variant
        panels.setdefault(p.collective, []).append(
            {"nbytes": p.nbytes, "ratio": p.ratio, "significant": p.verdict in CALLED,
             "other": f"{p.other}/{p.baseline}", "label": label})
    return panels


def _sweep_figure(cmp: Comparison):
    """Ratio-vs-size panels per collective; None when nothing can be drawn."""
    from ccbench.present.plots import compare_figure

    panels = figure_panels(cmp)
    if not panels:
        return None
    title = ("time ratio vs run A = " + cmp.runs[0][1].name + "; "
             + ", ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs[1:]))
    return compare_figure(panels, title)


def comparison_files(cmp: Comparison, stem: str = "compare", *, plot: bool = True) -> dict[str, str | bytes]:
    """The files of a comparison, by suffix: ``.csv`` (one row per pair), ``.md`` (the page) and, with `plot`
    and something to draw, ``.png``, which the page names as `stem` + ``.png``."""
    view = compare_view(cmp.kind)
    files: dict[str, str | bytes] = {}
    buf = io.StringIO(newline="")
    columns = view.columns
    if columns is None:  # the pair's fields, its test's last (as the built-in kinds' columns)
        names = [f.name for f in dataclasses.fields(cmp.pairs[0])] if cmp.pairs else []
        columns = [*(n for n in names if n not in TEST_FIELDS), *TEST_FIELDS]
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    for p in cmp.pairs:
        w.writerow(asdict(p))
    files[".csv"] = buf.getvalue()
    figure = None
    if plot:
        from ccbench.present.plots import png_bytes

        fig = view.figure(cmp)
        if fig is not None:
            files[".png"] = png_bytes(fig)
            figure = f"{stem}.png"
    files[".md"] = render_markdown(view.markdown_blocks(cmp, figure))
    return files


#: The adjusted p-value's column ("p adj." in the terminal, "p (adj.)" on the pages).
_P_ADJUSTED = Column("p adj.", "p", page_header="p (adj.)")


def _verdict(v: str) -> Styled:
    return Styled(v, VERDICT_COLOUR.get(v, ""))


def summary_table(cmp: Comparison, view: "CompareView") -> Table:
    """The summary of a comparison (``Comparison.summary()``) in `view`'s columns, with the geometric mean of the
    ratios and the verdict counts."""
    base = cmp.runs[0][0]
    t = Table(f"summary per {view.summary_per}: geometric mean of the ratios (vs {base})",
              [*(c for _, _, c in view.summary_columns), Column("geomean ratio", "ratio"),
               *[Column(v, "count") for v in VERDICTS]])
    for s in cmp.summary():
        t.add_row(*[s.value(f) for _, f, _ in view.summary_columns], s.geomean_ratio,
                  *(s.verdicts[v] for v in VERDICTS))
    return t


def _print_unmatched(cmp: Comparison, console, what: str) -> None:
    base = cmp.runs[0][0]
    for lab, (only_base, only_other) in cmp.unmatched.items():
        if only_base or only_other:
            console.print(f"[yellow]note: not compared: {only_base} {what}(s) of run {base} missing from run {lab}, "
                          f"{only_other} {what}(s) of run {lab} missing from run {base}[/]")


def sweep_tables(cmp: Comparison, started: bool = False) -> list[Table]:
    """A comparison of collective sweeps as tables: the runs (`started`: with when each started, as its page shows
    them), one table per collective."""
    base = cmp.runs[0][0]
    t = Table("runs", [Column("run"), Column("directory"), Column("MPI library"), Column("ranks", align="right"),
                       Column("nodes", align="right"), Column("per node", align="right"), Column("thread level"),
                       Column("cases", align="right"), *([Column("started")] if started else [])])
    for lab, p, m in cmp.runs:
        n = len({(q.collective, q.algorithm, q.nbytes, q.dtype, q.op, q.in_place, q.root) for q in cmp.pairs
                 if lab in (q.baseline, q.other)})
        t.add_row(lab, str(p), str(m.get("mpi_library", "?")), str(m.get("nranks", "?")), str(m.get("nodes", "?")),
                  str(m.get("ranks_per_node", "?")), str(m.get("thread_level", "?")), f"{n} compared",
                  *([str(m.get("start_time", "?"))] if started else []))
    tables = [t]
    others = [lab for lab, _, _ in cmp.runs[1:]]
    for coll in dict.fromkeys(p.collective for p in cmp.pairs):
        ps = [p for p in cmp.pairs if p.collective == coll]
        vary = [k for k in ("dtype", "op", "in_place", "root") if len({getattr(p, k) for p in ps}) > 1]
        cols = [Column("algorithm"), Column("size", "size"), *[Column(k.replace("_", " ")) for k in vary],
                Column(f"{base} median", "time")]
        for lab in others:
            cols += [Column(f"{lab} median", "time"), Column(f"{lab}/{base}", "ratio"),
                     Column("interval", "ratio_ci"), Column("launches", align="right"),
                     Column("p", "p"), _P_ADJUSTED, Column("verdict")]
        t = Table(f"{coll}: medians, ratio run / {base} with its launch-level interval, p and adjusted p", cols)
        keys = list(dict.fromkeys((p.algorithm, p.nbytes, p.dtype, p.op, p.in_place, p.root)
                                  for p in _in_size_order(ps)))
        index = {((p.algorithm, p.nbytes, p.dtype, p.op, p.in_place, p.root), p.other): p for p in ps}
        prev = None
        for k in keys:
            first = next(index[(k, lab)] for lab in others if (k, lab) in index)
            cells = [k[0] if k[0] != prev else "", k[1], *[str(getattr(first, f)) for f in vary], first.median_a_s]
            prev = k[0]
            for lab in others:
                p = index.get((k, lab))
                cells += ([p.median_b_s, p.ratio, _interval(p), _launches(p), p.p_value, p.p_adjusted,
                           _verdict(p.verdict)] if p else [None, None, None, None, None, None, ""])
            t.add_row(*cells)
        tables.append(t)
    return tables


def workload_markdown_blocks(cmp: Comparison, figure: str | None) -> list:
    """The workload comparison as report blocks (see ``ccbench.present.report.render_markdown``): the tables of
    ``workload_comparison_tables`` (the runs with their nodes and when each started), a section per workload."""
    runs = _workload_runs_table(cmp, page=True)
    blocks = _page_head(cmp, runs, "row", "Summary: geometric mean of the ratios, of whole steps and of the calls "
                                          "within them apart.")
    if figure:
        blocks.append(("img", figure, "time ratios of the whole steps per workload"))
    for w, whole, t in _workload_pair_tables(cmp, page=True):
        blocks += [("h", 2, w) if whole else ("h", 3, f"{w}: each call of the step"), *to_block(t)]
    return blocks


def workload_figure(cmp: Comparison):
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
            f"run {p.other} / run {p.baseline}"] = {"value": p.ratio, "hollow": p.verdict not in CALLED}
    if not panels:
        return None
    title = ("time ratio vs run A = " + cmp.runs[0][1].name + "; "
             + ", ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs[1:]))
    return bar_panels_figure(panels, title, "time ratio (other run / baseline, log scale; > 1: slower)",
                             fmt=lambda v: f"{v:.3g}×", log=True, ref=1.0, ref_label="same time",
                             legend_title="filled: faster or slower", hollow_label="noise or undetermined")


def _workload_runs_table(cmp: Comparison, page: bool = False) -> Table:
    """The runs of a workload comparison; on the `page` also their nodes and when each started."""
    t = Table("runs", [Column("run"), Column("directory"), Column("workload"), Column("model"), Column("MPI library"),
                       Column("ranks", align="right"), *([Column("nodes", align="right")] if page else []),
                       Column("per node", align="right"), Column("thread level"),
                       *([Column("started")] if page else [])])
    for lab, p, m in cmp.runs:
        t.add_row(lab, str(p), str(m.get("workload", "?")), str((m.get("model") or {}).get("name", "-")),
                  str(m.get("mpi_library", "?")), str(m.get("nranks", "?")),
                  *([str(m.get("nodes", "?"))] if page else []), str(m.get("ranks_per_node", "?")),
                  str(m.get("thread_level", "?")), *([str(m.get("start_time", "?"))] if page else []))
    return t


#: What the compared rows of an overlap or a straggler workload add: each side's overlap or slowdown (its name,
#: its quantity, the values of a pair).
_EXTRA = {"overlap": ("overlap", "share", lambda p: (p.overlap_pct_a / 100, p.overlap_pct_b / 100)),
          "straggler": ("slowdown", "slowdown", lambda p: (p.slowdown_a, p.slowdown_b))}


def _workload_pair_tables(cmp: Comparison, page: bool = False) -> list[tuple[str, bool, Table]]:
    """(workload, whole steps or not, its table) per workload: the whole steps, then each call of the step (on the
    `page` with its place in the step, "#", too)."""
    base = cmp.runs[0][0]
    out = []
    for w in dict.fromkeys(p.workload for p in cmp.pairs):
        name, quantity, extra = _EXTRA.get(w, ("", "", None))
        for whole in (True, False):
            ps = [p for p in cmp.pairs if p.workload == w and p.whole == whole]
            if not ps:
                continue
            call = [] if whole else [*([Column("#", "count")] if page else []), Column("call")]
            t = Table(f"{w}: {'whole steps' if whole else 'each call of the step'}: medians, ratio run / "
                      f"{base} with its launch-level interval, p and adjusted p",
                      [Column("run"), Column("variant"), Column("algorithm"), *call, Column("size", "size"),
                       Column(f"{base} median", "time"), Column("median", "time"), Column("ratio", "ratio"),
                       Column("interval", "ratio_ci"), Column("launches", align="right"), Column("p", "p"),
                       _P_ADJUSTED, Column("verdict"),
                       *([Column(f"{name} {base}", quantity), Column(name, quantity)] if extra else [])])
            for p in ps:
                keys = [] if whole else [*([p.part] if page else []), p.label]
                t.add_row(p.other, p.variant, p.algorithm, *keys, p.nbytes,
                          p.median_a_s, p.median_b_s, p.ratio, _interval(p), _launches(p), p.p_value, p.p_adjusted,
                          _verdict(p.verdict), *(extra(p) if extra else ()))
            out.append((w, whole, t))
    return out


def workload_comparison_tables(cmp: Comparison) -> list[Table]:
    """A comparison of workload runs as tables: the runs, then per workload its whole steps and its calls."""
    return [_workload_runs_table(cmp), *(t for _, _, t in _workload_pair_tables(cmp))]


@dataclass(frozen=True)
class CompareView:
    """How one kind of comparison is shown (its ``RunKind.compare_view``): its tables, what a compared thing is
    called, its summary columns (from ``Comparison.summary()``), its Markdown blocks, figure and CSV columns."""

    tables: Callable
    item: str
    summary_per: str
    summary_columns: tuple
    markdown_blocks: Callable
    figure: Callable
    columns: tuple


SWEEP_VIEW = CompareView(sweep_tables, "case", "collective",
                         (("run", "other", Column("run")), ("collective", "collective", Column("collective")),
                          ("cases", "pairs", Column("cases", "count"))),
                         markdown_blocks, _sweep_figure, CSV_COLUMNS)
WORKLOAD_VIEW = CompareView(workload_comparison_tables, "row", "workload",
                            (("run", "other", Column("run")), ("workload", "workload", Column("workload")),
                             ("rows", "rows", Column("rows")), ("compared", "pairs", Column("compared", "count"))),
                            workload_markdown_blocks, workload_figure, WORKLOAD_CSV_COLUMNS)


# --------------------------------------------------------------------------- kinds without a view of their own


def _generic_tables(cmp: Comparison) -> list[Table]:
    """The runs, then every matched row: its key, medians, ratio, interval, launches, p, adjusted p, verdict."""
    kind = kind_named(cmp.kind)
    base = cmp.runs[0][0]
    t = Table("runs", [Column("run"), Column("directory"), Column("MPI library"), Column("ranks", align="right"),
                       Column("per node", align="right"), Column("thread level")])
    for lab, p, m in cmp.runs:
        t.add_row(lab, str(p), str(m.get("mpi_library", "?")), str(m.get("nranks", "?")),
                  str(m.get("ranks_per_node", "?")), str(m.get("thread_level", "?")))
    rows = Table(f"every {kind.item}: medians, ratio run / {base} with its launch-level interval, p and adjusted p",
                 [Column("run"), *key_columns(kind), Column(f"{base} median", "time"), Column("median", "time"),
                  Column("ratio", "ratio"), Column("interval", "ratio_ci"), Column("launches", align="right"),
                  Column("p", "p"), _P_ADJUSTED, Column("verdict")])
    for p in cmp.pairs:
        rows.add_row(p.other, *(getattr(p, f) for f in kind.key_fields), p.median_a_s, p.median_b_s, p.ratio,
                     _interval(p), _launches(p), p.p_value, p.p_adjusted, _verdict(p.verdict))
    return [t, rows]


def _generic_blocks(cmp: Comparison, figure: str | None) -> list:
    """The page of such a comparison: the runs, warnings, legend, summary, launch lines, figure, every row."""
    view = compare_view(cmp.kind)
    runs, pairs = _generic_tables(cmp)
    blocks = _page_head(cmp, runs, view.item)
    if figure:
        blocks.append(("img", figure, f"time ratio per {view.item}"))
    return [*blocks, ("h", 2, f"Every {view.item}"), *to_block(pairs)]


def _generic_figure(cmp: Comparison):
    """The ratio of every matched row as a bar, filled where a difference is called; None when none can be drawn."""
    from ccbench.present.plots import bar_panels_figure

    kind = kind_named(cmp.kind)
    groups: dict[str, dict] = {}
    for p in cmp.pairs:
        if p.ratio > 0 and math.isfinite(p.ratio):
            groups.setdefault(" ".join(str(getattr(p, f)) for f in kind.key_fields), {})[
                f"run {p.other} / run {p.baseline}"] = {"value": p.ratio, "hollow": p.verdict not in CALLED}
    if not groups:
        return None
    return bar_panels_figure({f"time ratio per {kind.item}": groups}, "time ratio vs run A = " + cmp.runs[0][1].name,
                             "time ratio (other run / baseline, log scale; > 1: slower)",
                             fmt=lambda v: f"{v:.3g}×", log=True, ref=1.0, ref_label="same time",
                             legend_title="filled: faster or slower", hollow_label="noise or undetermined")


_GENERIC: dict[str, CompareView] = {}


def compare_view(kind: str) -> CompareView:
    """How comparisons of runs of `kind` are shown: its ``RunKind.compare_view``, else the generic view (one table
    of every matched row, keyed on the kind's ``key_fields``)."""
    spec = kind_named(kind)
    own = spec.get("compare_view")
    if own is not None:
        return own
    if kind not in _GENERIC:
        _GENERIC[kind] = CompareView(_generic_tables, spec.item, "run",
                                     (("run", "other", Column("run")), (spec.item + "s", "pairs",
                                                                        Column(spec.item + "s", "count"))),
                                     _generic_blocks, _generic_figure, None)
    return _GENERIC[kind]


#: The called differences an answer line names, largest first.
LARGEST = 3


def answer_lines(cmp: Comparison, item: str = "case") -> list[str]:
    """What a comparison found, one line per other run: its verdict counts and its largest called differences
    (ratio and interval), or why its verdicts were withheld: the last screen of ``ccbench compare``."""
    import math

    from ccbench.analysis.gate import pair_label

    base = cmp.runs[0][0]
    out = []
    for lab, _, _ in cmp.runs[1:]:
        ps = [p for p in cmp.pairs if p.other == lab]
        counts = {v: sum(p.verdict == v for p in ps) for v in VERDICTS}
        head = (f"run {lab} vs {base}: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])
                + f" of {len(ps)} {item}{'' if len(ps) == 1 else 's'}")
        if lab in cmp.withheld:
            out.append(head + "; verdicts withheld: " + "; ".join(cmp.withheld[lab]))
            continue
        called = sorted((p for p in ps if p.verdict in CALLED and p.ratio > 0 and math.isfinite(p.ratio)),
                        key=lambda p: -abs(math.log(p.ratio)))
        if called:
            head += "; largest: " + ", ".join(f"{pair_label(p)} {fmt_ratio(p.ratio)}x ({_interval_text(p)})"
                                              for p in called[:LARGEST])
        out.append(head)
    return out


def print_comparison(cmp: Comparison, console) -> None:
    """Print a comparison (either kind): the runs, warnings and legend, the tables, the summary, and last what it
    found (`answer_lines`)."""
    view = compare_view(cmp.kind)
    tables = view.tables(cmp)
    console.print(to_rich(tables[0]))
    print_warnings_and_legend(cmp, console, view.item + "s")
    render(tables[1:], console)
    console.print(to_rich(summary_table(cmp, view)))
    for line in launch_lines(cmp, view.item):
        console.print(line)
    _print_unmatched(cmp, console, view.item)
    for line in answer_lines(cmp, view.item):
        console.print(line, markup=False, highlight=False)
