"""``ccbench compare``: stored runs side by side, decided at the level of the launch.

The first run is the baseline A; every other run (B, C, ...) is matched to it case by
case on (collective, algorithm, size, dtype, op, in place, root); ``native:<alg>``
variants match by name whatever environment forced them in each library.  Provenance
that changes what is measured (MPI library, ranks, nodes, ranks per node, dtypes, thread
level, ...) is compared and every difference is a warning in the output and the files.

**The launch is the unit of replication.**  Samples of one launch share its process
placement, memory layout and library state, and identical launches of one sweep differ
by 15-75% here; a test of one launch's raw samples against another's therefore calls
most of three identical runs' cases "significantly" different (pseudo-replication:
Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM 2013; Hunold &
Carpen-Amarie, "Reproducible MPI benchmarking is still not as easy as you think", IEEE
TPDS 2016).  Two runs are always separate launches, so every matched case is compared
with ``ccbench.core.replication.compare_launches`` on the rows' ``launch_blocks()``:

- both sides measured in K >= 2 launches (``ccbench launch --launches K``): Welch's t on
  the per-launch log-medians (Welch, Biometrika 34, 1947), the ratio of the launches'
  geometric means and its (1 - level) interval;
- a single launch on a side: the launch-to-launch spread cannot be estimated from the
  data, so a between-launch CV is assumed -- ``launch_cv`` (``--launch-cv``: one measured
  earlier on the same machine) or ``DEFAULT_PRIOR_BETWEEN_CV`` (0.35, conservative),
  raised per case to the spread measured on a side with >= 2 launches -- and a normal
  test of the log ratio with that spread.  Its ``resolvable_ratio`` is the smallest ratio
  it can tell from 1; a case whose difference it cannot resolve is "undetermined", never
  "noise" nor significant: within-launch samples alone never decide.

The compare command does not take a between-launch CV from a replicated run given to it
on its own: the prior stands for the machine the single-launch runs ran on, which the
user knows and the replicated run may not share.  It reports the pooled CV such a run
measured (``measured_launch_cv``) so that it can be passed as ``--launch-cv``.

The p-values of one pair of runs form one family and are adjusted with Benjamini &
Hochberg's false-discovery-rate procedure (JRSS B 57, 1995;
``ccbench.core.stats.benjamini_hochberg``).  Verdict of each case, b against a: "noise"
when ``min_effect`` > 0 and its whole interval lies within +-min_effect (ln(1 + m) on the
log scale: [1 / (1 + m), 1 + m]), otherwise "slower" / "faster" when its adjusted p is
below the level, otherwise "noise" (K >= 2 launches a side) or "undetermined" (a single
launch on a side); "untested" when a side has fewer than ``MIN_SAMPLES`` samples or
times <= 0.  The interval shown is false-coverage-rate adjusted (Benjamini & Yekutieli, JASA
100, 2005): at confidence 1 - max(R, 1) level / m for R of a pair's m cases called, so it
excludes 1 exactly when its case is called; an interval wider than ``USELESS_WIDTH`` (10x end
to end) carries the launches a side that would make it tell 2x from 1 (``launches_needed``).
Per collective the ratios are summarised by their geometric mean (Fleming & Wallace,
CACM 1986) with the verdict counts; per pair of runs ``launch_summary`` says how many
cases were decided at the launch level, how many had a single launch on a side, and
which ratios those could resolve.

Training-workload runs are compared the same way (one engine; what differs per run kind is
its `Matching`, named by its ``RunKind``: row matching, pair type, extra warnings, summary; a kind
that names none is matched on its ``key_fields``).
Rows of the other runs are matched to the baseline A on ``KEY_FIELDS``: every field of
``WorkloadRow`` that is neither a measurement (times, overlap, slowdown, counted bytes,
checks, samples, launches), nor a rank count (``nranks``, ``group_ranks``: provenance,
warned about as for sweeps; MoE's expert-parallel degree is in its variant), nor a count
that follows from the schedule (calls, tensors, elements).  That is workload, variant,
model, algorithm(s), dtype, part (-1: the whole step), its label (bucket, layer
collective, size), collective, buffer bytes, delay and delayed rank.  Ratios,
launch-level tests, the Benjamini-Hochberg adjustment over all rows of a pair of runs and
the verdicts are ``test_pairs``', as for sweeps; per workload the ratios of whole steps
(and, apart, of their calls) are summarised by their geometric mean.
"""

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccbench.analysis.fastest import SIGNIFICANCE
from ccbench.core.errors import UsageError
from ccbench.core.hardware import differences as hardware_differences
from ccbench.core.replication import (
    DEFAULT_PRIOR_BETWEEN_CV,
    USELESS_WIDTH,
    compare_launches,
    cv_from_log_sd,
    launches_needed,
)
from ccbench.core.stats import benjamini_hochberg, geometric_mean
from ccbench.store.kinds import RunKind, kind_named
from ccbench.store.results import Row
from ccbench.store.run import Run, lab_block
from ccbench.store.workload_rows import WorkloadRow

__all__ = ["CSV_COLUMNS", "KEY_FIELDS", "PAIR_FIELDS", "TEST_FIELDS", "VERDICTS", "WORKLOAD_CSV_COLUMNS",
           "Comparison", "GroupSummary", "LaunchSummary", "LaunchTest", "Matching",
           "Pair", "WorkloadPair", "check_settings", "compare_runs",
           "disturbances", "index_rows", "make_pair", "match_key", "matching", "measured_launch_cv", "pair_type",
           "parse_fraction", "provenance_differences", "run_summary", "test_pairs", "workload_match_key"]

#: Fewer raw samples than this on either side: the case is shown but not tested.
MIN_SAMPLES = 2
#: Every verdict a compared case can get, in the order summaries count them.
VERDICTS = ("faster", "slower", "noise", "undetermined", "untested")
#: Provenance fields whose difference changes what is measured: (key in run.json, label).
PROVENANCE_FIELDS = (("mpi_library", "MPI library"), ("nranks", "ranks"), ("nodes", "nodes"),
                     ("ranks_per_node", "ranks per node"), ("thread_level", "thread level"),
                     ("oversubscribed", "oversubscribed cores"))
#: The launch-level columns every pair carries after its verdict (``LaunchTest``'s fields after ``verdict``).
LAUNCH_COLUMNS = ("ratio_low", "ratio_high", "launches_a", "launches_b", "method", "resolvable_ratio",
                  "interval_confidence", "launches_needed")
CSV_COLUMNS = ("baseline", "other", "collective", "algorithm", "nbytes", "dtype", "op", "in_place", "root",
               "settings_a", "settings_b", "nranks_a", "nranks_b", "samples_a", "samples_b", "median_a_s",
               "median_b_s",
               "ci_low_a_s", "ci_high_a_s", "ci_low_b_s", "ci_high_b_s", "ratio", "p_value", "p_adjusted",
               "significant", "verdict", *LAUNCH_COLUMNS)


def parse_fraction(text: str, option: str) -> float:
    """A fraction written as "5%" or "0.05" (both 0.05); anything else is a UsageError naming `option`."""
    s = str(text).strip()
    percent = s.endswith("%")
    try:
        value = float(s[:-1].strip() if percent else s)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a number: give a fraction (0.05) or a percentage (5%)") from None
    if not math.isfinite(value):
        raise UsageError(f"{option} {text!r} is not a finite number: give a fraction (0.05) or a percentage (5%)")
    return value / 100.0 if percent else value


def match_key(r: Row) -> tuple:
    """What makes two rows of different runs the same case (rank count excluded: it is provenance)."""
    return (r.collective, r.algorithm, r.nbytes, r.dtype, r.op, r.in_place, r.root)


def _settings(r: Row) -> str:
    """A row's forcing environment (``native:<alg>`` variants) as NAME=value;... ("" when none)."""
    s = r.settings or {}
    return ";".join(f"{k}={v}" for k, v in s.items()) if isinstance(s, Mapping) else str(s)


@dataclass(frozen=True, kw_only=True)
class LaunchTest:
    """The launch-level test of one matched case, b against a (the fields every pair ends with).

    ratio: b's stored median / a's; ratio_low, ratio_high: the (1 - level) interval of the
    ratio of the launches' geometric means (``compare_launches``; None when untested);
    method: "welch" (K >= 2 launches a side), "prior" (a single launch on a side: assumed
    between-launch CV) or "untested"; resolvable_ratio: the smallest ratio (> 1) the test
    tells from 1 at the level before the false-discovery adjustment.
    """

    ratio: float
    p_value: float | None
    p_adjusted: float | None
    significant: bool | None
    verdict: str  # one of VERDICTS
    ratio_low: float | None
    ratio_high: float | None
    launches_a: int
    launches_b: int
    method: str  # "welch", "prior" or "untested"
    resolvable_ratio: float | None
    interval_confidence: float | None = None  # the confidence of ratio_low..ratio_high (false-coverage adjusted)
    launches_needed: int | None = None  # launches a side that would make a useless interval tell 2x from 1

    @property
    def useless_interval(self) -> bool:
        """The interval holds 1 and is wider than ``USELESS_WIDTH`` end to end: it cannot tell a speed-up from a
        slow-down (`useless`)."""
        return self.ratio_low is not None and useless(self.ratio_low, self.ratio_high)

    def test_fields(self) -> dict:
        """This test's fields by name: a pair (a subclass) is built from its rows' fields and these."""
        return {name: getattr(self, name) for name in TEST_FIELDS}


#: The fields every pair ends with: its launch-level test's.
TEST_FIELDS = tuple(f.name for f in dataclasses.fields(LaunchTest))


#: What every pair holds beside its key and its test: both sides' rank counts, samples, medians and intervals.
PAIR_FIELDS = (("nranks_a", int), ("nranks_b", int), ("samples_a", int), ("samples_b", int), ("median_a_s", float),
               ("median_b_s", float), ("ci_low_a_s", float), ("ci_high_a_s", float), ("ci_low_b_s", float),
               ("ci_high_b_s", float))


def pair_type(name: str, key: Sequence[tuple[str, object]], extra: Sequence[tuple[str, object]] = (),
              doc: str = "", namespace: Mapping | None = None) -> type:
    """The pair type of one kind of run: ``baseline``, ``other``, the `key` fields (what the two rows share),
    ``PAIR_FIELDS``, the `extra` fields (per side), then its ``LaunchTest``'s fields; frozen, ratio = b / a."""
    cls = dataclasses.make_dataclass(name, [("baseline", str), ("other", str), *key, *PAIR_FIELDS, *extra],
                                     bases=(LaunchTest,), frozen=True, namespace=dict(namespace or {}))
    cls.__doc__ = doc or f"One {name} row measured in the baseline (a) and in another run (b), with its test."
    cls.__module__ = __name__
    return cls


def make_pair(cls: type, la: str, lb: str, a, b, test: LaunchTest, **extra):
    """A pair of `cls` (`pair_type`) from the matched rows `a` (baseline `la`) and `b` (run `lb`): its key from a,
    ``PAIR_FIELDS`` from both sides, `extra` as given."""
    key = {f.name: getattr(a, f.name) for f in dataclasses.fields(cls)
           if f.name not in _NOT_KEY and f.name not in extra}
    return cls(baseline=la, other=lb, **key, **extra, nranks_a=a.nranks, nranks_b=b.nranks, samples_a=a.samples,
               samples_b=b.samples, median_a_s=a.median_s, median_b_s=b.median_s, ci_low_a_s=a.ci_low_s,
               ci_high_a_s=a.ci_high_s, ci_low_b_s=b.ci_low_s, ci_high_b_s=b.ci_high_s, **test.test_fields())


_NOT_KEY = frozenset({"baseline", "other", *(n for n, _ in PAIR_FIELDS), *TEST_FIELDS})

#: One case measured in the baseline (a) and in another run (b), with its test (``LaunchTest``); ratio = b / a.
Pair = pair_type("Pair", (("collective", str), ("algorithm", str), ("nbytes", int), ("dtype", str), ("op", str),
                          ("in_place", bool), ("root", int)), (("settings_a", str), ("settings_b", str)),
                 "One case measured in the baseline (a) and in another run (b), with its test (``LaunchTest``); "
                 "ratio = b / a.")


@dataclass
class Comparison:
    """Runs (label, path, meta), matched pairs, provenance warnings, cases only in one run, the test's settings."""

    runs: list[tuple[str, Path, dict]]
    pairs: list[Pair]
    warnings: list[str]
    unmatched: dict[str, tuple[int, int]]  # other run -> (cases only in the baseline, only in it)
    level: float
    kind: str = "sweep"  # "workload": pairs are `WorkloadPair`
    min_effect: float = 0.0
    launch_cv: float = DEFAULT_PRIOR_BETWEEN_CV  # between-launch CV assumed with a single launch on a side
    launch_cv_given: bool = False  # True: from --launch-cv; False: the default prior
    measured_cv: dict[str, tuple[float, int]] = dataclasses.field(default_factory=dict)  # run -> (CV, rows)
    withheld: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # run -> why its verdicts are withheld

    def summary(self) -> list["GroupSummary"]:
        """Per other run: pairs, geometric mean of the ratios and verdict counts (per kind: its `Matching`)."""
        return matching(self.kind).summary(self)

    def launch_summary(self) -> list["LaunchSummary"]:
        """Per other run: how its cases were decided (see ``launch_summary``)."""
        return launch_summary(self)


def _counts(ps: Sequence) -> dict[str, int]:
    return {v: sum(p.verdict == v for p in ps) for v in VERDICTS}


@dataclass(frozen=True)
class GroupSummary:
    """One line of a comparison's summary: run `other` against the baseline over the pairs of one group.

    `group`: what the pairs share, in the kind's words (``{"collective": "bcast"}``, ``{"collective": "all"}``,
    ``{"workload": "ddp", "rows": "steps"}``; empty for a kind without groups); `geomean_ratio`: the geometric
    mean of their ratios (NaN when none is usable); `verdicts`: how many got each verdict (every one of
    ``VERDICTS``).
    """

    other: str
    pairs: int
    geomean_ratio: float
    verdicts: Mapping[str, int]
    group: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        """The line as one flat mapping: other, the group's keys, pairs, geomean_ratio, a count per verdict."""
        return {"other": self.other, **self.group, "pairs": self.pairs, "geomean_ratio": self.geomean_ratio,
                **self.verdicts}

    def value(self, name: str):
        """A column of the line: a field (``other``, ``pairs``, ``geomean_ratio``), a group key or a verdict."""
        if name in self.group:
            return self.group[name]
        return self.verdicts[name] if name in self.verdicts else getattr(self, name)


def _group_summary(label: str, ps: Sequence, **group: str) -> GroupSummary:
    ratios = [p.ratio for p in ps if p.ratio > 0 and math.isfinite(p.ratio)]
    return GroupSummary(label, len(ps), geometric_mean(ratios) if ratios else math.nan, _counts(ps), group)


def sweep_summary(cmp: "Comparison") -> list[GroupSummary]:
    """Per other run and collective (then "all"): pairs, geometric mean of ratios, verdict counts."""
    out = []
    for label, _, _ in cmp.runs[1:]:
        mine = [p for p in cmp.pairs if p.other == label]
        colls = list(dict.fromkeys(p.collective for p in mine))
        for coll in [*colls, None] if len(colls) > 1 else colls:
            out.append(_group_summary(label, [p for p in mine if coll is None or p.collective == coll],
                                      collective=coll or "all"))
    return out


@dataclass(frozen=True)
class LaunchSummary:
    """How one other run's pairs were decided (``launch_summary``).

    `launch_level`: pairs decided at the launch level (Welch, >= 2 launches a side), with the launches per side
    (`launches_a`, `launches_b`: sorted distinct counts) and their `launch_level_counts` per verdict;
    `single_launch`: pairs with a single launch on a side (the assumed CV), of which `called` faster or slower,
    `undetermined` and `noise`, resolving ratios from `resolvable_low` to `resolvable_high` (None when there is
    none); `untested`: pairs with too few samples.
    """

    other: str
    pairs: int
    launch_level: int
    launches_a: tuple[int, ...]
    launches_b: tuple[int, ...]
    launch_level_counts: Mapping[str, int]
    single_launch: int
    called: int
    undetermined: int
    noise: int
    resolvable_low: float | None
    resolvable_high: float | None
    untested: int


def launch_summary(cmp: "Comparison") -> list[LaunchSummary]:
    """Per other run: cases decided at the launch level, with a single launch on a side, and what those resolve."""
    out = []
    for label, _, _ in cmp.runs[1:]:
        mine = [p for p in cmp.pairs if p.other == label]
        welch = [p for p in mine if p.method == "welch"]
        prior = [p for p in mine if p.method == "prior"]
        res = [p.resolvable_ratio for p in prior if p.resolvable_ratio is not None]
        out.append(LaunchSummary(
            label, len(mine), len(welch), tuple(sorted({p.launches_a for p in welch})),
            tuple(sorted({p.launches_b for p in welch})), _counts(welch), len(prior),
            sum(p.verdict in ("faster", "slower") for p in prior), sum(p.verdict == "undetermined" for p in prior),
            sum(p.verdict == "noise" for p in prior), min(res) if res else None, max(res) if res else None,
            sum(p.method == "untested" for p in mine)))
    return out


def _dtypes(rows: Sequence) -> list[str]:
    """The element types of `rows` (a kind whose rows have none: [])."""
    return sorted({d for r in rows if (d := getattr(r, "dtype", None)) is not None})


def provenance_differences(a: Mapping, b: Mapping, rows_a: Sequence[Row], rows_b: Sequence[Row],
                           la: str = "A", lb: str = "B") -> list[str]:
    """One line per difference in provenance that changes what is measured."""
    out = []
    for key, label in PROVENANCE_FIELDS:
        if a.get(key) != b.get(key):
            out.append(f"provenance differs in {label}: {a.get(key)!r} ({la}) vs {b.get(key)!r} ({lb})")
    da, db = _dtypes(rows_a), _dtypes(rows_b)
    if da != db:
        out.append(f"provenance differs in dtypes: {', '.join(da)} ({la}) vs {', '.join(db)} ({lb})")
    sa, sb = ((m.get("config") or {}).get("sync") for m in (a, b))      # a null config records none
    if sa != sb:
        out.append(f"provenance differs in synchronisation: {sa} ({la}) vs {sb} ({lb})")
    ca, cb = ((m.get("config") or {}).get("buffers") or "warm" for m in (a, b))
    if ca != cb:
        out.append(f"provenance differs in buffers: {ca} ({la}) vs {cb} ({lb}): cold buffers are out of cache at "
                   "every call (--buffers)")
    da, db = ((m.get("config") or {}).get("counts") or "uniform" for m in (a, b))
    if da != db:
        out.append(f"provenance differs in the v-collectives' block sizes: {da} ({la}) vs {db} ({lb}) (--counts)")
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


def _launches(row) -> list[np.ndarray] | None:
    """The row's samples per launch (launches without samples left out); None when it cannot be tested.

    Not testable: fewer than ``MIN_SAMPLES`` samples in all, or a time that is not finite and
    above 0 (the comparison works on the log scale).
    """
    blocks = [np.asarray(s, dtype=np.float64) for _, s in row.launch_blocks()]
    blocks = [b for b in blocks if b.size]
    if sum(b.size for b in blocks) < MIN_SAMPLES or not all(np.all(np.isfinite(b) & (b > 0)) for b in blocks):
        return None
    return blocks


def useless(low: float, high: float) -> bool:
    """An interval of a ratio that holds 1 and is wider than ``USELESS_WIDTH`` end to end (or not above 0): it
    can tell neither the direction nor the size of a difference."""
    return not (low > 0 and (high / low <= USELESS_WIDTH or low > 1 or high < 1))


def _decide(ratio: float, low: float, high: float, method: str, significant: bool, min_effect: float) -> str:
    """A case's verdict (module docstring): the practical band first, then the adjusted test."""
    if min_effect > 0 and 1.0 / (1.0 + min_effect) <= low and high <= 1.0 + min_effect:
        return "noise"
    if significant:
        return "slower" if ratio > 1 else "faster"
    return "noise" if method == "welch" else "undetermined"


def test_pairs(matched: Sequence[tuple], level: float, *, min_effect: float = 0.0,
               launch_cv: float = DEFAULT_PRIOR_BETWEEN_CV) -> list[tuple]:
    """[(a, b, LaunchTest)] of matched rows (a: baseline, b: other), tested at the launch level.

    Each case: ``compare_launches`` on the two rows' launch blocks (Welch's t over per-launch
    log-medians with >= 2 launches a side; with a single launch on a side, the between-launch
    CV `launch_cv` assumed); the p-values of all of `matched` adjusted as one family
    (Benjamini-Hochberg); verdicts by ``_decide`` (module docstring).  ratio = b's stored
    median / a's (inf when a's is 0).
    """
    tested = []
    for a, b in matched:
        xa, xb = _launches(a), _launches(b)
        lc = None
        if xa is not None and xb is not None:
            lc = compare_launches(xa, xb, level=level, prior_between_cv=launch_cv)
        tested.append((a, b, xa, xb, lc))
    ps = [lc.p_value for *_, lc in tested if lc is not None]
    qs = benjamini_hochberg(ps).tolist() if ps else []
    # the intervals shown are false-coverage-rate adjusted (Benjamini & Yekutieli, "False discovery
    # rate-adjusted multiple confidence intervals for selected parameters", JASA 100, 2005): with R of
    # m cases called at FDR `level`, each interval is at confidence 1 - max(R, 1) level / m.  A case
    # Benjamini-Hochberg calls has p <= R level / m, so its interval excludes 1 exactly when it is
    # called: the interval beside a verdict never contradicts it.
    ci_level = max(sum(q < level for q in qs), 1) * level / len(qs) if qs else level
    adj = iter(qs)
    out = []
    for a, b, xa, xb, lc in tested:
        ratio = b.median_s / a.median_s if a.median_s > 0 else math.inf
        if lc is None:
            test = LaunchTest(ratio=ratio, p_value=None, p_adjusted=None, significant=None, verdict="untested",
                              ratio_low=None, ratio_high=None, launches_a=a.n_launches, launches_b=b.n_launches,
                              method="untested", resolvable_ratio=None)
        else:
            q = next(adj)
            sig = q < level
            shown = lc if ci_level == level else compare_launches(xa, xb, level=ci_level, prior_between_cv=launch_cv)
            test = LaunchTest(ratio=ratio, p_value=lc.p_value, p_adjusted=q, significant=sig,
                              verdict=_decide(lc.ratio, shown.ratio_low, shown.ratio_high, lc.method, sig, min_effect),
                              ratio_low=shown.ratio_low, ratio_high=shown.ratio_high, launches_a=lc.n_launches_a,
                              launches_b=lc.n_launches_b, method=lc.method, resolvable_ratio=lc.resolvable_ratio,
                              interval_confidence=1 - ci_level,
                              launches_needed=(launches_needed(shown, ci_level)
                                               if useless(shown.ratio_low, shown.ratio_high) else None))
        out.append((a, b, test))
    return out


def measured_launch_cv(rows: Sequence) -> tuple[float, int] | None:
    """(between-launch CV, rows used) pooled over the rows measured in >= 2 launches; None without such a row.

    Per row, the sample variance s^2 of its per-launch log-medians (K - 1 degrees of
    freedom); pooled as sum (K - 1) s^2 / sum (K - 1) (the pooled variance of one-way
    analysis of variance, e.g. Montgomery, Design and Analysis of Experiments, sec. 3.3),
    turned into a CV with ``cv_from_log_sd``.  The spread of launch medians holds the
    launch effect and the noise of a median of one launch: what a single-launch
    comparison on the same machine must allow for (``--launch-cv``).
    """
    num = 0.0
    dof = 0
    used = 0
    for r in rows:
        blocks = _launches(r)
        if blocks is None or len(blocks) < 2:
            continue
        logs = np.log([float(np.median(b)) for b in blocks])
        num += float(np.var(logs, ddof=1)) * (logs.size - 1)
        dof += logs.size - 1
        used += 1
    if not used:
        return None
    return cv_from_log_sd(math.sqrt(num / dof)), used


# --------------------------------------------------------------------------- training-workload runs


#: WorkloadRow fields that are measured, not part of what is measured.
MEASURED = frozenset({"samples", "median_s", "min_s", "mean_s", "ci_low_s", "ci_high_s", "comm_s", "compute_s",
                      "total_s", "overlap_pct", "baseline_s", "slowdown", "bytes_sent_total", "nwrong",
                      "stop_reason", "flags", "samples_s", "launches", "launch_samples", "osu_comm_s",
                      "osu_overall_s", "osu_cpu_s", "osu_test_s", "imb_pure_s", "imb_ovrl_s", "imb_cpu_s",
                      "overlap_imb_pct"})


#: Rank counts (provenance: compared and warned about, not matched on).
PER_RUN = frozenset({"nranks", "group_ranks"})


#: Counts that follow from the schedule the other key fields name.
DERIVED = frozenset({"ncalls", "ntensors", "payload_elems"})


KEY_FIELDS = tuple(f.name for f in dataclasses.fields(WorkloadRow) if f.name not in MEASURED | PER_RUN | DERIVED)


#: Workload settings whose difference is warned about (the rest are the key, rank counts or repetition rules).
_QUIET_SETTINGS = ("results_dir", "thread_level", "warmup", "min_reps", "max_reps", "target_rse", "budget_s",
                   "watchdog_s", "launches", "seed", "bind")  # replication: how, not what, is measured (binding
                                                             # differences are hardware warnings)


def workload_match_key(r: WorkloadRow) -> tuple:
    """What makes two workload rows of different runs the same measurement (``KEY_FIELDS``)."""
    return tuple(getattr(r, f) for f in KEY_FIELDS)


def _whole(self) -> bool:
    """A whole measurement (a step, an overlap or straggler row), not one call of a step."""
    return self.part == -1 or self.workload in ("overlap", "straggler")


#: One workload row measured in the baseline (a) and in another run (b), with its test; ratio = b / a.
WorkloadPair = pair_type(
    "WorkloadPair", (("workload", str), ("variant", str), ("model", str), ("algorithm", str), ("dtype", str),
                     ("part", int), ("label", str), ("collective", str), ("nbytes", int), ("delay_s", float | None),
                     ("delayed_rank", int | None)),
    (("overlap_pct_a", float | None), ("overlap_pct_b", float | None), ("slowdown_a", float | None),
     ("slowdown_b", float | None)),
    "One workload row measured in the baseline (a) and in another run (b), with its test; ratio = b / a.",
    {"whole": property(_whole)})


WORKLOAD_CSV_COLUMNS = (*(f.name for f in dataclasses.fields(WorkloadPair) if f.name not in TEST_FIELDS), *TEST_FIELDS)


def _settings_differences(a: Mapping, b: Mapping, la: str, lb: str) -> list[str]:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    keys = [k for k in dict.fromkeys([*ca, *cb]) if k not in _QUIET_SETTINGS and ca.get(k) != cb.get(k)]
    if not keys:
        return []
    return ["provenance differs in workload settings: " + ", ".join(
        f"{k}={ca.get(k, '(unset)')} ({la}) vs {cb.get(k, '(unset)')} ({lb})" for k in keys)]


def workload_summary(cmp: Comparison) -> list[GroupSummary]:
    """Per other run and workload, whole steps then calls: pairs, geometric mean of the ratios, verdicts."""
    out = []
    for label, _, _ in cmp.runs[1:]:
        mine = [p for p in cmp.pairs if p.other == label]
        for w in dict.fromkeys(p.workload for p in mine):
            for what, whole in (("steps", True), ("calls", False)):
                ps = [p for p in mine if p.workload == w and p.whole == whole]
                if ps:
                    out.append(_group_summary(label, ps, workload=w, rows=what if w not in ("overlap", "straggler")
                                              else "calls measured"))
    return out


# --------------------------------------------------------------------------- the engine


@dataclass(frozen=True)
class Matching:
    """What comparing runs of one kind needs (its ``RunKind.matching``): the match key, the pair, extra warnings,
    the summary, what a compared thing is called and what "in common" means (for the error)."""

    key: Callable
    pair: Callable  # (label a, label b, row a, row b, LaunchTest) -> pair
    extra_warnings: Callable  # (meta a, meta b, label a, label b) -> [str]
    summary: Callable
    what: str  # "case" or "row"
    same: str
    fields: tuple[str, ...] = ()  # a name for each part of the key, to say which part keeps two runs apart


def _sweep_pair(la, lb, a, b, test: LaunchTest) -> Pair:
    return make_pair(Pair, la, lb, a, b, test, settings_a=_settings(a), settings_b=_settings(b))


def _workload_pair(la, lb, a, b, test: LaunchTest) -> "WorkloadPair":
    return make_pair(WorkloadPair, la, lb, a, b, test, overlap_pct_a=a.overlap_pct, overlap_pct_b=b.overlap_pct,
                     slowdown_a=a.slowdown, slowdown_b=b.slowdown)


def _no_warnings(*_) -> list[str]:
    return []


SWEEP_MATCHING = Matching(match_key, _sweep_pair, _no_warnings, sweep_summary, "case",
                          "same collective, algorithm, size, dtype, op",
                          ("collective", "algorithm", "size", "dtype", "op", "in place", "root"))
WORKLOAD_MATCHING = Matching(workload_match_key, _workload_pair, _settings_differences, workload_summary, "row",
                             "same workload, variant, model, algorithm, call, size, delay", KEY_FIELDS)


def _apart(a: Iterable[tuple], b: Iterable[tuple], fields: Sequence[str], la: str, lb: str) -> str:
    """Which parts of the match key no row of `a` shares with any row of `b` (their values, a few each): why two
    runs have nothing in common, such as an OSU import in uint8 beside a float32 sweep; "" where no part alone does."""
    a, b = list(a), list(b)
    out = []
    for i, name in enumerate(fields):
        va, vb = {k[i] for k in a}, {k[i] for k in b}
        if va and vb and not va & vb:
            show = [", ".join(str(v) for v in sorted(vs, key=str)[:3]) + (", ..." if len(vs) > 3 else "")
                    for vs in (va, vb)]
            out.append(f"{name} ({la}: {show[0]}; {lb}: {show[1]})")
    return f": they differ in {' and '.join(out)}" if out else ""


def run_summary(cmp: Comparison) -> list[GroupSummary]:
    """Per other run: pairs, geometric mean of the ratios, verdict counts (a kind without a summary of its own)."""
    return [_group_summary(label, [p for p in cmp.pairs if p.other == label]) for label, _, _ in cmp.runs[1:]]


_GENERIC: dict[str, Matching] = {}


def _generic_matching(kind: RunKind) -> Matching:
    if kind.name in _GENERIC:
        return _GENERIC[kind.name]
    fields = {f.name: f.type for f in dataclasses.fields(kind.rows)}
    cls = pair_type(f"{kind.name.title()}Pair", [(f, fields.get(f, object)) for f in kind.key_fields])
    _GENERIC[kind.name] = Matching(kind.key_of, functools.partial(make_pair, cls), _no_warnings, run_summary,
                                   kind.item, "same " + ", ".join(kind.key_fields), tuple(kind.key_fields))
    return _GENERIC[kind.name]


def matching(kind: str) -> Matching:
    """How runs of `kind` are compared: its ``RunKind.matching``, else rows matched on its ``key_fields``."""
    spec = kind_named(kind)
    if spec is None:
        raise UsageError(f"runs of kind {kind!r} cannot be compared: no such kind is registered")
    return spec.get("matching") or _generic_matching(spec)


#: The share of the machine's CPU time other processes may take while a run measures (run.json's ``load``) before
#: the verdicts that involve it are withheld: with the cores shared, its times measure the scheduler as much as
#: the collective (an A/A of the README's job on 2 cores called 20-88% of cases different under such load).
MAX_OTHER_LOAD = 0.2
#: The ratio of the node's single-core memory copy bandwidth (best of its repetitions) between two runs of one
#: host beyond which their calibrations disagree: the machine was not the same machine for both.
MAX_CALIBRATION_RATIO = 1.5


def _copy_rate(meta: Mapping) -> float | None:
    """The single-core memory copy rate a run measured before its first case (bytes/s, best repetition)."""
    one = (meta.get("memory_bandwidth") or {}).get("one_core") or {}
    secs = [t for t in one.get("seconds") or [] if isinstance(t, (int, float)) and t > 0]
    return one["counted_bytes"] / min(secs) if secs and one.get("counted_bytes") else None


def disturbances(a: Mapping, b: Mapping, la: str = "A", lb: str = "B") -> list[str]:
    """Why the verdicts between runs `a` and `b` cannot be trusted, one reason a line: other processes took more
    than ``MAX_OTHER_LOAD`` of the machine while one of them measured, or the two runs' own calibrations (the
    node's copy bandwidth, measured the same way before each run's first case) disagree by more than
    ``MAX_CALIBRATION_RATIO`` on one host.  [] when nothing says so (a run without a load record: none)."""
    out = []
    for m, lab in ((a, la), (b, lb)):
        other = (m.get("load") or {}).get("other_fraction")
        if isinstance(other, (int, float)) and other > MAX_OTHER_LOAD:
            out.append(f"other processes used {other:.0%} of the machine's CPU time while run {lab} measured")
    ra, rb = _copy_rate(a), _copy_rate(b)
    same_host = bool(a.get("hosts")) and set(a.get("hosts") or ()) == set(b.get("hosts") or ())
    if ra and rb and same_host and max(ra, rb) / min(ra, rb) > MAX_CALIBRATION_RATIO:
        out.append(f"the node's memory copy bandwidth differs {max(ra, rb) / min(ra, rb):.2g}x between runs {la} and "
                   f"{lb} (measured the same way before each run): the machine was not in the same state")
    return out


def _withhold(pairs: list) -> list:
    """`pairs` with every difference they call made "undetermined" (their intervals and p-values kept)."""
    return [dataclasses.replace(p, verdict="undetermined") if p.verdict in ("faster", "slower") else p for p in pairs]


#: Largest between-launch CV --launch-cv accepts (100%: launches twice as slow as others are one sigma away).
MAX_LAUNCH_CV = 1.0


def check_settings(level: float, min_effect: float, launch_cv: float | None) -> None:
    """Refuse a significance level, minimum effect or between-launch CV out of range (before any run is read)."""
    if not 0 < level < 1:
        raise UsageError(f"the significance level must be in (0, 1), got {level}")
    if not (math.isfinite(min_effect) and 0 <= min_effect < 1):
        raise UsageError(f"the minimum effect must be at least 0 and below 100% (e.g. 5% or 0.05), got {min_effect:g}")
    if launch_cv is not None and not (math.isfinite(launch_cv) and 0 < launch_cv <= MAX_LAUNCH_CV):
        raise UsageError(f"the between-launch CV must be above 0 and at most {MAX_LAUNCH_CV:.0%} (e.g. 20% or 0.2), "
                         f"got {launch_cv:g}")


def compare_runs(runs: Sequence[Run], *, level: float = SIGNIFICANCE, min_effect: float = 0.0,
                 launch_cv: float | None = None) -> Comparison:
    """Compare every open run after the first with the first (the baseline); see the module docstring.

    All runs must be of one kind (collective sweeps, or training-workload runs).  `min_effect`:
    the practical threshold (a fraction, 0.05 = 5%); `launch_cv`: the between-launch CV to
    assume where a side has a single launch (default ``DEFAULT_PRIOR_BETWEEN_CV``).
    """
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs")
    check_settings(level, min_effect, launch_cv)
    prior = DEFAULT_PRIOR_BETWEEN_CV if launch_cv is None else launch_cv
    opened = list(runs)
    kinds = [r.kind for r in opened]
    if len(set(kinds)) > 1:
        a, b = opened[0], next(r for r in opened if r.kind != kinds[0])
        raise UsageError(f"{str(b.path)!r} is a {b.spec.label} but {str(a.path)!r} is a {a.spec.label}: compare "
                         "takes runs of one kind")
    for r in opened:
        if not r.rows:
            raise UsageError(f"{str(r.path)!r} has no finished cases")
    spec = matching(kinds[0])
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
    withheld: dict[str, list[str]] = {}
    for lab, r in zip(labels[1:], opened[1:], strict=True):
        warnings += provenance_differences(first.meta, r.meta, first.rows, r.rows, labels[0], lab)
        warnings += spec.extra_warnings(first.meta, r.meta, labels[0], lab)
        other = index_rows(r.rows, lab, warnings, key=spec.key)
        common = [k for k in base if k in other]
        unmatched[lab] = (len(base) - len(common), len(other) - len(common))
        if not common:
            raise UsageError(f"runs {labels[0]} ({first.path.name}) and {lab} ({r.path.name}) have no "
                             f"{spec.what} in common ({spec.same})" + _apart(base, other, spec.fields, labels[0], lab))
        mine = [spec.pair(labels[0], lab, a, b, test) for a, b, test in
                test_pairs([(base[k], other[k]) for k in common], level, min_effect=min_effect, launch_cv=prior)]
        why = disturbances(first.meta, r.meta, labels[0], lab)
        if why:
            withheld[lab] = why
            called = sum(p.verdict in ("faster", "slower") for p in mine)
            warnings.append(f"verdicts of run {lab} against {labels[0]} withheld ({called} called difference(s) shown "
                            "as undetermined): " + "; ".join(why) + "; measure both again on a quiet machine")
            mine = _withhold(mine)
        pairs += mine
    measured = {lab: m for lab, r in zip(labels, opened, strict=True) if (m := measured_launch_cv(r.rows))}
    return Comparison([(lab, r.path, r.meta) for lab, r in zip(labels, opened, strict=True)], pairs, warnings,
                      unmatched, level, kind=kinds[0], min_effect=min_effect, launch_cv=prior,
                      launch_cv_given=launch_cv is not None, measured_cv=measured, withheld=withheld)
