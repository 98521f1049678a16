"""``ccbench compare``: stored runs side by side, with a significance test on the raw samples.

The first run is the baseline A; every other run (B, C, ...) is matched to it case by
case on (collective, algorithm, size, dtype, op, in place, root); ``native:<alg>``
variants match by name whatever environment forced them in each library.  For each
matched case: both stored medians, the ratio other / A (> 1: the other run is slower),
and a two-sided Mann-Whitney U test of the two cases' stored raw samples (Mann & Whitney
1947; ``ccbench.core.stats.mann_whitney_u``).  The p-values of one pair of runs form one family
and are adjusted with Benjamini & Hochberg's false-discovery-rate procedure (JRSS B
1995); a case is a significant difference when its adjusted p is below the level (0.05),
otherwise noise.  Per collective the ratios are summarised by their geometric mean
(Fleming & Wallace, CACM 1986).  Provenance that changes what is measured (MPI library,
ranks, nodes, ranks per node, dtypes, thread level, ...) is compared and every
difference is a warning in the output and the files.

Samples of one case are consecutive calls, not independent draws; the test treats them
as exchangeable, as every benchmark comparison by rank test does (e.g. pyperf's).
"""

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.stats import benjamini_hochberg, geometric_mean, mann_whitney_u
from ccbench.core.units import format_size, human_time
from ccbench.present.report import SIGNIFICANCE, load_collective_run, render_markdown
from ccbench.store.results import Row

__all__ = ["CSV_COLUMNS", "VERDICT_STYLE", "Comparison", "Pair", "compare_runs", "index_rows", "match_key",
           "print_warnings_and_legend", "provenance_differences", "test_pairs", "write_comparison"]

#: Fewer raw samples than this on either side: the case is shown but not tested.
MIN_SAMPLES = 2
#: Provenance fields whose difference changes what is measured: (key in run.json, label).
PROVENANCE_FIELDS = (("mpi_library", "MPI library"), ("nranks", "ranks"), ("nodes", "nodes"),
                     ("ranks_per_node", "ranks per node"), ("thread_level", "thread level"),
                     ("oversubscribed", "oversubscribed cores"))
CSV_COLUMNS = ("baseline", "other", "collective", "algorithm", "nbytes", "dtype", "op", "in_place", "root",
               "settings_a", "settings_b", "nranks_a", "nranks_b", "samples_a", "samples_b", "median_a_s",
               "median_b_s",
               "ci_low_a_s", "ci_high_a_s", "ci_low_b_s", "ci_high_b_s", "ratio", "p_value", "p_adjusted",
               "significant", "verdict")


def match_key(r: Row) -> tuple:
    """What makes two rows of different runs the same case (rank count excluded: it is provenance)."""
    return (r.collective, r.algorithm, r.nbytes, r.dtype, r.op, r.in_place, r.root)


def _settings(r: Row) -> str:
    """A row's forcing environment (``native:<alg>`` variants) as NAME=value;... ("" when none)."""
    s = getattr(r, "settings", None) or {}
    return ";".join(f"{k}={v}" for k, v in s.items()) if isinstance(s, Mapping) else str(s)


#: How the terminal shows each verdict.
VERDICT_STYLE = {"slower": "[red]slower[/]", "faster": "[green]faster[/]", "noise": "noise", "untested": "untested"}


def print_warnings_and_legend(cmp: "Comparison", console, what: str = "cases") -> None:
    """The provenance warnings of a comparison and how to read its ratios and p-values."""
    base = cmp.runs[0][0]
    for w in cmp.warnings:
        console.print(f"[yellow bold]warning:[/] [yellow]{w}[/]")
    console.print(f"ratio = run's median / {base}'s (> 1: slower); p = two-sided Mann-Whitney U test of the raw "
                  f"samples, adjusted over all {what} of a pair of runs (Benjamini-Hochberg); significant below "
                  f"{cmp.level}, otherwise noise")

@dataclass(frozen=True)
class Pair:
    """One case measured in the baseline (a) and in another run (b); ratio = b / a."""

    baseline: str
    other: str
    collective: str
    algorithm: str
    nbytes: int
    dtype: str
    op: str
    in_place: bool
    root: int
    settings_a: str
    settings_b: str
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
    ratio: float
    p_value: float | None
    p_adjusted: float | None
    significant: bool | None
    verdict: str  # "slower", "faster", "noise", or "untested"


@dataclass
class Comparison:
    """Runs (label, path, meta), matched pairs, provenance warnings, cases only in one run."""

    runs: list[tuple[str, Path, dict]]
    pairs: list[Pair]
    warnings: list[str]
    unmatched: dict[str, tuple[int, int]]  # other run -> (cases only in the baseline, only in it)
    level: float
    kind: str = "sweep"  # "workload": pairs are ``ccbench.analysis.workload_compare.WorkloadPair``

    def summary(self) -> list[dict]:
        """Per other run and collective (then "all"): pairs, geometric mean of ratios, verdict counts."""
        out = []
        for label, _, _ in self.runs[1:]:
            mine = [p for p in self.pairs if p.other == label]
            colls = list(dict.fromkeys(p.collective for p in mine))
            for coll in [*colls, None] if len(colls) > 1 else colls:
                ps = [p for p in mine if coll is None or p.collective == coll]
                ratios = [p.ratio for p in ps if p.ratio > 0 and math.isfinite(p.ratio)]
                out.append({"other": label, "collective": coll or "all", "pairs": len(ps),
                            "geomean_ratio": geometric_mean(ratios) if ratios else math.nan,
                            **{v: sum(p.verdict == v for p in ps) for v in ("faster", "slower", "noise",
                                                                               "untested")}})
        return out


def provenance_differences(a: Mapping, b: Mapping, rows_a: Sequence[Row], rows_b: Sequence[Row],
                           la: str = "A", lb: str = "B") -> list[str]:
    """One line per difference in provenance that changes what is measured."""
    out = []
    for key, label in PROVENANCE_FIELDS:
        if a.get(key) != b.get(key):
            out.append(f"provenance differs in {label}: {a.get(key)!r} ({la}) vs {b.get(key)!r} ({lb})")
    da, db = sorted({r.dtype for r in rows_a}), sorted({r.dtype for r in rows_b})
    if da != db:
        out.append(f"provenance differs in dtypes: {', '.join(da)} ({la}) vs {', '.join(db)} ({lb})")
    sa, sb = (m.get("config", {}).get("sync") for m in (a, b))
    if sa != sb:
        out.append(f"provenance differs in synchronisation: {sa} ({la}) vs {sb} ({lb})")
    ea, eb = a.get("mpi_env") or {}, b.get("mpi_env") or {}
    if ea != eb:
        keys = sorted(k for k in set(ea) | set(eb) if ea.get(k) != eb.get(k))
        out.append("provenance differs in MPI environment settings: " + ", ".join(
            f"{k}={ea.get(k, '(unset)')} ({la}) vs {eb.get(k, '(unset)')} ({lb})" for k in keys))
    from ccbench.present.report import lab_block

    if lab_block(a) != lab_block(b):
        out.append(f"provenance differs in emulated lab settings: {lab_block(a)} ({la}) vs {lab_block(b)} ({lb})")
    for m, lab in ((a, la), (b, lb)):
        if m.get("status") not in (None, "complete"):
            out.append(f"run {lab} is {m.get('status')}: only its finished cases are compared")
    return out


def index_rows(rows: Sequence, label: str, warnings: list[str], key=match_key) -> dict[tuple, object]:
    """{key(row): row}, the first of repeated keys kept (with a warning naming run `label`)."""
    out: dict[tuple, object] = {}
    dup = 0
    for r in rows:
        k = key(r)
        if k in out:
            dup += 1
            continue
        out[k] = r
    if dup:
        warnings.append(f"run {label} holds {dup} repeated case(s); the first of each is compared")
    return out


def test_pairs(matched: Sequence[tuple], level: float) -> list[tuple]:
    """[(a, b, ratio, p, p adjusted, significant, verdict)] of matched rows (a: baseline, b: other).

    ratio = b's median / a's; p: two-sided Mann-Whitney U test of the raw samples (None
    with fewer than MIN_SAMPLES on a side), adjusted over all of `matched` as one family
    (Benjamini-Hochberg); verdict "slower"/"faster" when the adjusted p is below `level`,
    "noise" otherwise, "untested" without a test.
    """
    tested = []
    for a, b in matched:
        p = None
        if len(a.samples_s) >= MIN_SAMPLES and len(b.samples_s) >= MIN_SAMPLES:
            p = mann_whitney_u(b.samples_s, a.samples_s)[1]
        tested.append((a, b, p))
    ps = [t[2] for t in tested if t[2] is not None]
    adj = iter(benjamini_hochberg(ps).tolist()) if ps else iter(())
    out = []
    for a, b, p in tested:
        q = next(adj) if p is not None else None
        ratio = b.median_s / a.median_s if a.median_s > 0 else math.inf
        sig = None if q is None else q < level
        verdict = ("untested" if sig is None else "noise" if not sig
                   else "slower" if ratio > 1 else "faster")
        out.append((a, b, ratio, p, q, sig, verdict))
    return out


def compare_runs(runs: Sequence, results_dir="results", *, level: float = SIGNIFICANCE) -> Comparison:
    """Compare every run after the first with the first (the baseline); see the module docstring.

    Training-workload runs are compared by ``ccbench.analysis.workload_compare`` (all runs must
    then be workload runs: a workload run and a collective sweep are refused).
    """
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs")
    if not 0 < level < 1:
        raise UsageError(f"the significance level must be in (0, 1), got {level}")
    from ccbench.present.workload_views import is_workload_run
    from ccbench.store.results import resolve_run

    resolved = [resolve_run(r, results_dir) for r in runs]
    workload = [is_workload_run(p) for p in resolved]
    if any(workload):
        if not all(workload):
            w, c = resolved[workload.index(True)], resolved[workload.index(False)]
            raise UsageError(f"{str(w)!r} is a 'workload' run but {str(c)!r} is a collective sweep: compare "
                             "takes runs of one kind")
        from ccbench.analysis.workload_compare import compare_workload_runs

        return compare_workload_runs(resolved, level=level)
    loaded = [load_collective_run(r, results_dir) for r in runs]
    paths = [p.resolve() for p, *_ in loaded]
    for i, p in enumerate(paths):
        if p in paths[:i]:
            raise UsageError(f"run {str(loaded[i][0])!r} is given twice")
    labels = [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(loaded))]
    warnings: list[str] = []
    for lab, (_, _, _, w) in zip(labels, loaded, strict=True):
        warnings += [f"run {lab}: {x}" for x in w]
    base_path, base_meta, base_rows, _ = loaded[0]
    base = index_rows(base_rows, labels[0], warnings)
    pairs: list[Pair] = []
    unmatched: dict[str, tuple[int, int]] = {}
    for lab, (_, meta, rows, _) in zip(labels[1:], loaded[1:], strict=True):
        warnings += provenance_differences(base_meta, meta, base_rows, rows, labels[0], lab)
        other = index_rows(rows, lab, warnings)
        common = [k for k in base if k in other]
        unmatched[lab] = (len(base) - len(common), len(other) - len(common))
        if not common:
            raise UsageError(f"runs {labels[0]} ({base_path.name}) and {lab} ({loaded[labels.index(lab)][0].name}) "
                             "have no case in common (same collective, algorithm, size, dtype, op)")
        for a, b, ratio, p, q, sig, verdict in test_pairs([(base[k], other[k]) for k in common], level):
            pairs.append(Pair(labels[0], lab, a.collective, a.algorithm, a.nbytes, a.dtype, a.op, a.in_place,
                              a.root, _settings(a), _settings(b), a.nranks, b.nranks, a.samples, b.samples,
                              a.median_s, b.median_s, a.ci_low_s, a.ci_high_s, b.ci_low_s, b.ci_high_s, ratio,
                              p, q, sig, verdict))
    return Comparison([(lab, p, m) for lab, (p, m, _, _) in zip(labels, loaded, strict=True)], pairs,
                      warnings, unmatched, level)


# --------------------------------------------------------------------------- files


def _free_set(folder: Path, stem: str, suffixes: Sequence[str]) -> str:
    for k in range(1, 10_000):
        base = stem if k == 1 else f"{stem}-{k}"
        if not any((folder / f"{base}{s}").exists() for s in suffixes):
            return base
    raise CCBenchError(f"too many {stem}* files in {folder}")


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.2g}"


def markdown_blocks(cmp: Comparison, figure: str | None) -> list:
    """The comparison as report blocks (see ``ccbench.present.report.render_markdown``)."""
    base = cmp.runs[0][0]
    blocks: list = [("h", 1, "ccbench comparison: " + " vs ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs)),
                    ("table", ["run", "directory", "MPI library", "ranks", "nodes", "per node", "thread level",
                               "started"],
                     [[lab, str(p), m.get("mpi_library", "?"), str(m.get("nranks", "?")), str(m.get("nodes", "?")),
                       str(m.get("ranks_per_node", "?")), str(m.get("thread_level", "?")),
                       str(m.get("start_time", "?"))] for lab, p, m in cmp.runs], {3, 4, 5})]
    if cmp.warnings:
        blocks += [("h", 2, "Warnings"), ("ul", [f"warning: {w}" for w in cmp.warnings])]
    blocks.append(("p", f"Ratio = other run's stored median / run {base}'s (> 1: slower than {base}). p: "
                        "two-sided Mann-Whitney U test of the two cases' raw samples, adjusted for the number "
                        f"of cases compared (Benjamini-Hochberg); significant when below {cmp.level}, "
                        "otherwise noise. Summary: geometric mean of the ratios."))
    blocks += [("h", 2, "Summary"),
               ("table", ["run", "collective", "cases", f"geometric mean ratio (vs {base})", "faster", "slower",
                          "noise", "untested"],
                [[s["other"], s["collective"], str(s["pairs"]), f"{s['geomean_ratio']:.3g}", str(s["faster"]),
                  str(s["slower"]), str(s["noise"]), str(s["untested"])] for s in cmp.summary()],
                {2, 3, 4, 5, 6, 7})]
    base_lab = cmp.runs[0][0]
    only = [f"{a} case(s) of run {base_lab} not in run {lab}, {b} of run {lab} not in run {base_lab}"
            for lab, (a, b) in cmp.unmatched.items() if a or b]
    if only:
        blocks.append(("p", "Not compared: " + "; ".join(only) + "."))
    if figure:
        blocks.append(("img", figure, "time ratios per collective"))
    for coll in dict.fromkeys(p.collective for p in cmp.pairs):
        ps = [p for p in cmp.pairs if p.collective == coll]
        blocks += [("h", 2, coll),
                   ("table", ["run", "algorithm", "size", "dtype", "op", f"{base} median", "other median", "ratio",
                              "p (adj.)", "verdict"],
                    [[p.other, p.algorithm, format_size(p.nbytes),
                      p.dtype, p.op, human_time(p.median_a_s), human_time(p.median_b_s), f"{p.ratio:.3g}",
                      _fmt_p(p.p_adjusted), p.verdict] for p in ps], {2, 5, 6, 7, 8})]
    return blocks


def figure_panels(cmp: Comparison) -> dict[str, list[dict]]:
    """{collective: pairs as dicts for ``ccbench.present.plots.compare_figure``}."""
    panels: dict[str, list[dict]] = {}
    for p in cmp.pairs:
        if p.nbytes <= 0:
            continue
        variant = "" if p.op in ("none", "sum") and not p.in_place else f" {p.op}{' in place' if p.in_place else ''}"
        label = p.algorithm + (f" {p.dtype}" if len({q.dtype for q in cmp.pairs}) > 1 else "") + variant
        panels.setdefault(p.collective, []).append(
            {"nbytes": p.nbytes, "ratio": p.ratio, "significant": bool(p.significant),
             "other": f"{p.other}/{p.baseline}", "label": label})
    return panels


def write_comparison(cmp: Comparison, out_dir: str | Path | None = None, *, plot: bool = True) -> dict[str, Path]:
    """Write compare.csv, compare.md (and compare.png) into `out_dir` (default: the first run's directory).

    An existing set is never replaced: the next free ``compare-2``, ``compare-3`` ... is used.
    """
    if cmp.kind == "workload":
        from ccbench.analysis import workload_compare as wc

        columns, blocks_of, comparison_figure = wc.CSV_COLUMNS, wc.markdown_blocks, wc.comparison_figure
    else:
        columns, blocks_of = CSV_COLUMNS, markdown_blocks

        def comparison_figure(cmp):
            from ccbench.present.plots import compare_figure

            panels = figure_panels(cmp)
            if not panels:
                return None
            title = ("time ratio vs run A = " + cmp.runs[0][1].name + "; "
                     + ", ".join(f"{lab} = {p.name}" for lab, p, _ in cmp.runs[1:]))
            return compare_figure(panels, title)
    folder = Path(out_dir) if out_dir is not None else cmp.runs[0][1]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {str(folder)!r}: {exc.strerror}") from None
    stem = _free_set(folder, "compare", (".csv", ".md", ".png"))
    files = {"csv": folder / f"{stem}.csv", "md": folder / f"{stem}.md"}
    figure = None
    if plot:
        from ccbench.present.plots import save_png

        fig = comparison_figure(cmp)
        if fig is not None:
            files["png"] = save_png(fig, folder / f"{stem}.png")
            figure = files["png"].name
    try:
        with open(files["csv"], "x", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns)
            w.writeheader()
            for p in cmp.pairs:
                w.writerow(asdict(p))
        with open(files["md"], "x", encoding="utf-8") as f:
            f.write(render_markdown(blocks_of(cmp, figure)))
    except FileExistsError as exc:
        raise CCBenchError(f"{exc.filename!r} appeared while writing; nothing is overwritten") from None
    return files
