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

Training-workload runs are compared the same way (one engine; what differs per run kind is
the small table ``_KINDS``: row matching, pair type, extra warnings, summary).
Rows of the other runs are matched to the baseline A on ``KEY_FIELDS``: every field of
``WorkloadRow`` that is neither a measurement (times, overlap, slowdown, counted bytes,
checks, samples), nor a rank count (``nranks``, ``group_ranks``: provenance, warned about
as for sweeps; MoE's expert-parallel degree is in its variant), nor a count that follows
from the schedule (calls, tensors, elements).  That is workload, variant, model,
algorithm(s), dtype, part (-1: the whole step), its label (bucket, layer collective,
size), collective, buffer bytes, delay and delayed rank.  Ratios, the two-sided
Mann-Whitney U tests of the raw samples, the Benjamini-Hochberg adjustment over all rows
of a pair of runs and the verdicts are ``test_pairs``', as for sweeps;
per workload the ratios of whole steps (and, apart, of their calls) are summarised by
their geometric mean (Fleming & Wallace, CACM 1986).

Samples of one case are consecutive calls, not independent draws; the test treats them
as exchangeable, as every benchmark comparison by rank test does (e.g. pyperf's).
"""

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ccbench.analysis.fastest import SIGNIFICANCE
from ccbench.core.errors import UsageError
from ccbench.core.stats import benjamini_hochberg, geometric_mean, mann_whitney_u
from ccbench.measure.hardware import differences as hardware_differences
from ccbench.store.results import Row
from ccbench.store.run import SWEEP, WORKLOAD, lab_block, open_run
from ccbench.store.workload_rows import WorkloadRow

__all__ = ["CSV_COLUMNS", "KEY_FIELDS", "WORKLOAD_CSV_COLUMNS", "Comparison", "Pair", "WorkloadPair", "compare_runs",
           "index_rows", "match_key", "provenance_differences", "test_pairs", "workload_match_key"]

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
    kind: str = "sweep"  # "workload": pairs are `WorkloadPair`

    def summary(self) -> list[dict]:
        """Per other run: pairs, geometric mean of the ratios and verdict counts (per kind: `_KINDS`)."""
        return _KINDS[self.kind].summary(self)


def sweep_summary(cmp: "Comparison") -> list[dict]:
    """Per other run and collective (then "all"): pairs, geometric mean of ratios, verdict counts."""
    out = []
    for label, _, _ in cmp.runs[1:]:
        mine = [p for p in cmp.pairs if p.other == label]
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
    for what, va, vb in hardware_differences(a.get("hardware"), b.get("hardware")):
        out.append(f"provenance differs in hardware ({what}): {va!r} ({la}) vs {vb!r} ({lb})")
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



# --------------------------------------------------------------------------- files


# --------------------------------------------------------------------------- training-workload runs


#: WorkloadRow fields that are measured, not part of what is measured.
MEASURED = frozenset({"samples", "median_s", "min_s", "mean_s", "ci_low_s", "ci_high_s", "comm_s", "compute_s",
                      "total_s", "overlap_pct", "baseline_s", "slowdown", "bytes_sent_total", "nwrong",
                      "stop_reason", "flags", "samples_s", "launches", "launch_samples"})


#: Rank counts (provenance: compared and warned about, not matched on).
PER_RUN = frozenset({"nranks", "group_ranks"})


#: Counts that follow from the schedule the other key fields name.
DERIVED = frozenset({"ncalls", "ntensors", "payload_elems"})


KEY_FIELDS = tuple(f.name for f in dataclasses.fields(WorkloadRow) if f.name not in MEASURED | PER_RUN | DERIVED)


#: Workload settings whose difference is warned about (the rest are the key, rank counts or repetition rules).
_QUIET_SETTINGS = ("results_dir", "thread_level", "warmup", "min_reps", "max_reps", "target_rse", "budget_s",
                   "watchdog_s")


def workload_match_key(r: WorkloadRow) -> tuple:
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


WORKLOAD_CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(WorkloadPair))


def _settings_differences(a: Mapping, b: Mapping, la: str, lb: str) -> list[str]:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    keys = [k for k in dict.fromkeys([*ca, *cb]) if k not in _QUIET_SETTINGS and ca.get(k) != cb.get(k)]
    if not keys:
        return []
    return ["provenance differs in workload settings: " + ", ".join(
        f"{k}={ca.get(k, '(unset)')} ({la}) vs {cb.get(k, '(unset)')} ({lb})" for k in keys)]


def workload_summary(cmp: Comparison) -> list[dict]:
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



# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class _Kind:
    """What comparing runs of one kind needs: the match key, the pair, extra warnings, the summary."""

    key: Callable
    pair: Callable  # (label a, label b, row a, row b, ratio, p, p adjusted, significant, verdict) -> pair
    extra_warnings: Callable  # (meta a, meta b, label a, label b) -> [str]
    summary: Callable
    what: str  # "case" or "row"
    same: str  # what "in common" means, for the error


def _sweep_pair(la, lb, a, b, *test) -> Pair:
    return Pair(la, lb, a.collective, a.algorithm, a.nbytes, a.dtype, a.op, a.in_place, a.root, _settings(a),
                _settings(b), a.nranks, b.nranks, a.samples, b.samples, a.median_s, b.median_s, a.ci_low_s,
                a.ci_high_s, b.ci_low_s, b.ci_high_s, *test)


def _workload_pair(la, lb, a, b, *test) -> "WorkloadPair":
    return WorkloadPair(la, lb, *workload_match_key(a), a.nranks, b.nranks, a.samples, b.samples, a.median_s,
                        b.median_s, a.ci_low_s, a.ci_high_s, b.ci_low_s, b.ci_high_s, a.overlap_pct, b.overlap_pct,
                        a.slowdown, b.slowdown, *test)


_KINDS = {
    SWEEP: _Kind(match_key, _sweep_pair, lambda *_: [], sweep_summary, "case",
                 "same collective, algorithm, size, dtype, op"),
    WORKLOAD: _Kind(workload_match_key, _workload_pair, _settings_differences, workload_summary, "row",
                    "same workload, variant, model, algorithm, call, size, delay"),
}


def compare_runs(runs: Sequence, results_dir="results", *, level: float = SIGNIFICANCE) -> Comparison:
    """Compare every run after the first with the first (the baseline); see the module docstring.

    All runs must be of one kind (collective sweeps, or training-workload runs).
    """
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs")
    if not 0 < level < 1:
        raise UsageError(f"the significance level must be in (0, 1), got {level}")
    opened = [open_run(r, results_dir) for r in runs]
    kinds = [r.kind for r in opened]
    if len(set(kinds)) > 1:
        w = next(r for r in opened if r.kind == WORKLOAD)
        c = next(r for r in opened if r.kind != WORKLOAD)
        raise UsageError(f"{str(w.path)!r} is a 'workload' run but {str(c.path)!r} is a collective sweep: compare "
                         "takes runs of one kind")
    for r in opened:
        if not r.rows:
            raise UsageError(f"{str(r.path)!r} has no finished cases")
    spec = _KINDS[kinds[0]]
    paths = [r.path.resolve() for r in opened]
    for i, p in enumerate(paths):
        if p in paths[:i]:
            raise UsageError(f"run {str(opened[i].path)!r} is given twice")
    labels = [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(opened))]
    warnings: list[str] = []
    for lab, r in zip(labels, opened, strict=True):
        warnings += [f"run {lab}: {x}" for x in r.warnings]
    first = opened[0]
    base = index_rows(first.rows, labels[0], warnings, key=spec.key)
    pairs: list = []
    unmatched: dict[str, tuple[int, int]] = {}
    for lab, r in zip(labels[1:], opened[1:], strict=True):
        warnings += provenance_differences(first.meta, r.meta, first.rows, r.rows, labels[0], lab)
        warnings += spec.extra_warnings(first.meta, r.meta, labels[0], lab)
        other = index_rows(r.rows, lab, warnings, key=spec.key)
        common = [k for k in base if k in other]
        unmatched[lab] = (len(base) - len(common), len(other) - len(common))
        if not common:
            raise UsageError(f"runs {labels[0]} ({first.path.name}) and {lab} ({r.path.name}) have no "
                             f"{spec.what} in common ({spec.same})")
        for a, b, *test in test_pairs([(base[k], other[k]) for k in common], level):
            pairs.append(spec.pair(labels[0], lab, a, b, *test))
    return Comparison([(lab, r.path, r.meta) for lab, r in zip(labels, opened, strict=True)], pairs, warnings,
                      unmatched, level, kind=kinds[0])
