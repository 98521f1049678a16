"""The fastest of a set of stored rows against its runner-up, decided at the launch level, for both run kinds.

Grouping of sweep rows into curves (one collective at one rank count, dtype, op, in place,
root; algorithms native first) and of workload rows into whole steps, then per size (sweep)
or per variant (workload) the fastest correct row by stored median against its runner-up.

The launch is the unit of replication (``ccbench.core.replication``): samples of one launch
share its placement and library state, so the verdict "fastest" rests on the launches'
medians, never on the pooled samples.  Rows that ran in the same jobs, launch number for
launch number (equal ``settings``, equal launch numbers), are compared paired by launch
(``paired_compare``: Student's paired t on the per-launch log ratios, so the launch effect they
share cancels); rows that ran in different jobs (different ``native:<alg>`` variants) as separate
launches (``compare_launches``: Welch's t on the per-launch log-medians, Welch 1947).  The launch
as the unit: Kalibera & Jones, ISMM 2013; Hunold & Carpen-Amarie, IEEE TPDS 2016.  With one
launch the launch-to-launch spread is unknown and a conservative prior between-launch CV stands
in for it (``compare_launches``): the verdict is "undetermined" unless the difference is larger
than that prior resolves.
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.records import Record
from ccbench.core.replication import (
    LaunchComparison,
    VarianceComponents,
    compare_launches,
    paired_compare,
    variance_components,
)
from ccbench.store.results import Row
from ccbench.store.workload_rows import WorkloadRow

__all__ = ["ONE_LAUNCH", "SIGNIFICANCE", "Curves", "Fastest", "SizeFastest", "VariantFastest", "algorithm_order",
           "fastest_of", "fastest_per_size",
           "fastest_per_variant", "group_rows", "launch_variation", "launches_shared", "step_rows"]

#: Two-sided level of the launch-level comparison of the fastest with its runner-up.
SIGNIFICANCE = 0.05

#: The ``method`` of a comparison of two single-launch rows.
ONE_LAUNCH = "one launch: launch variation unknown"

# the verdict of compare_launches / paired_compare (runner-up against the fastest) said of the fastest
_OF_FASTEST = {"slower": "faster", "faster": "slower", "noise": "noise", "undetermined": "undetermined"}


@dataclass
class Curves:
    """The rows of one collective at one (nranks, dtype, op, in_place, root): {algorithm: rows by size}."""

    collective: str
    nranks: int
    dtype: str
    op: str
    in_place: bool
    root: int
    by_algorithm: dict[str, list[Row]] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        return (self.collective, self.nranks, self.dtype, self.op, self.in_place, self.root)

    @property
    def sizes(self) -> list[int]:
        return sorted({r.nbytes for rows in self.by_algorithm.values() for r in rows})


def algorithm_order(name: str) -> tuple:
    """Sort key of algorithm names: native first, then its forced variants, then the hand-written ones."""
    return (name != "native", name.startswith("native"), name)


def group_rows(rows: Iterable[Row]) -> list[Curves]:
    """Rows grouped per collective (registry order) and variant, algorithms native first."""
    groups: dict[tuple, Curves] = {}
    for r in rows:
        k = (r.collective, r.nranks, r.dtype, r.op, r.in_place, r.root)
        g = groups.get(k) or groups.setdefault(k, Curves(*k))
        g.by_algorithm.setdefault(r.algorithm, []).append(r)
    order = {c: i for i, c in enumerate(COLLECTIVES)}
    out = sorted(groups.values(), key=lambda g: (order.get(g.collective, len(order)), g.collective,
                                                 g.nranks, g.dtype, g.op, g.in_place, g.root))
    for g in out:
        g.by_algorithm = {a: sorted(g.by_algorithm[a], key=lambda r: r.nbytes)
                          for a in sorted(g.by_algorithm, key=algorithm_order)}
    return out


def _launch_arrays(r) -> list[np.ndarray]:
    """The samples of each launch of a row that has any."""
    return [np.asarray(s, dtype=np.float64) for _, s in r.launch_blocks() if len(s)]


def launch_variation(row) -> VarianceComponents | None:
    """Between- and within-launch variance components of a row (``variance_components`` of its launches, log scale).

    None for a row of one launch (the launch-to-launch spread is not measured) or with a
    time <= 0 (the log scale needs positive times).
    """
    xs = _launch_arrays(row)
    if len(xs) < 2 or any(np.any(x <= 0) for x in xs):
        return None
    return variance_components(xs)


def launches_shared(a, b) -> bool:
    """True when rows `a` and `b` ran in the same jobs, launch number for launch number (a paired design).

    Rows of one run with equal ``settings`` ({} unforced; workload rows have none) ran in
    the same launches; rows of different ``native:<alg>`` variants ran in different jobs of the
    same round and are not paired.
    """
    return (dict(getattr(a, "settings", None) or {}) == dict(getattr(b, "settings", None) or {})
            and tuple(r for r, _ in a.launch_blocks()) == tuple(r for r, _ in b.launch_blocks()))


def _compare(best, second, alpha: float) -> tuple[LaunchComparison | None, str, int]:
    """(comparison of `second` against `best`, its method in words, launches it rests on)."""
    xa, xb = _launch_arrays(best), _launch_arrays(second)
    ka, kb = len(xa), len(xb)
    if not xa or not xb or any(np.any(x <= 0) for x in xa + xb):
        return None, "no test (a time <= 0)", min(ka, kb)
    if ka >= 2 and ka == kb and launches_shared(best, second):
        return paired_compare(xa, xb, level=alpha), f"paired by launch, K={ka}", ka
    lc = compare_launches(xa, xb, level=alpha)
    if ka == kb == 1:
        return lc, ONE_LAUNCH, 1
    return lc, "separate launches, K=" + (str(ka) if ka == kb else f"{ka} and {kb}"), min(ka, kb)


def _finite(v) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


@dataclass(frozen=True)
class Fastest(Record):
    """The fastest of some rows against its runner-up, with a launch-level verdict (`fastest_of`)."""

    fastest: str
    median_s: float
    runner_up: str | None
    runner_up_s: float | None
    margin: float | None
    p_value: float | None
    significant: bool | None
    verdict: str | None
    ratio_low: float | None
    ratio_high: float | None
    method: str | None
    launches: int

    def verdict_fields(self) -> dict:
        """The fields of `Fastest` (what a subclass adds left out): to build a subclass from one."""
        return {f.name: getattr(self, f.name) for f in fields(Fastest)}


@dataclass(frozen=True)
class SizeFastest(Fastest):
    """`Fastest` at one size of a sweep's group: the group (collective, nranks, dtype, op, in_place, root), the
    size, the loop that timed the rows compared and the algorithms timed by the other loop (left out)."""

    collective: str
    nranks: int
    dtype: str | None
    op: str | None
    in_place: bool | None
    root: int | None
    nbytes: int
    loop: str
    other_loop: tuple[str, ...]


@dataclass(frozen=True)
class VariantFastest(Fastest):
    """`Fastest` among the rows of a workload: ``what`` was compared (a variant, a size, "all variants", or
    "ALGORITHM: bucketing")."""

    what: str


def fastest_of(rows: Iterable, name=lambda r: r.algorithm, alpha: float = SIGNIFICANCE) -> Fastest | None:
    """The correct row with the smallest stored median among `rows`, its runner-up, and a launch-level verdict.

    ``fastest`` / ``runner_up`` are ``name(row)``, ``median_s`` / ``runner_up_s`` their stored
    medians (for rows of several launches the geometric mean of the launches' medians);
    ``margin`` = runner-up median / fastest median - 1.  The two are compared at the launch
    level at two-sided `alpha`: ``paired_compare`` when they shared launches (``launches_shared``),
    else ``compare_launches`` (Welch on per-launch log-medians; with one launch on a side, a
    prior between-launch CV, ``ccbench.core.replication.DEFAULT_PRIOR_BETWEEN_CV``).  ``ratio_low`` / ``ratio_high``:
    the 1 - `alpha` interval of runner-up / fastest; ``p_value`` that test's p; ``verdict``:
    "faster" (the fastest is faster than the runner-up), "noise" (within launch-to-launch
    noise), "undetermined" (one launch: the difference is within what a launch effect could
    make), "slower" (the launches contradict the stored medians); ``method``: how it was decided
    ("paired by launch, K=3", "separate launches, K=3", ``ONE_LAUNCH``); ``launches``: the
    launches the verdict rests on (the smaller side's); ``significant``: the verdict is
    "faster", i.e. decided at the launch level.  Without a runner-up (or a test) these are
    None.  None when no row is correct with a finite median.
    """
    cands = sorted((r for r in rows if r is not None and r.ok and math.isfinite(r.median_s)),
                   key=lambda r: r.median_s)
    if not cands:
        return None
    best = cands[0]
    second = cands[1] if len(cands) > 1 else None
    lc, method, launches = _compare(best, second, alpha) if second is not None else (None, None, best.n_launches)
    verdict = _OF_FASTEST[lc.verdict] if lc is not None else None
    return Fastest(
        fastest=name(best), median_s=best.median_s,
        runner_up=name(second) if second else None,
        runner_up_s=second.median_s if second else None,
        margin=(second.median_s / best.median_s - 1.0) if second and best.median_s > 0 else None,
        p_value=_finite(lc.p_value) if lc is not None else None,
        significant=None if lc is None else verdict == "faster",
        verdict=verdict,
        ratio_low=_finite(lc.ratio_low) if lc is not None else None,
        ratio_high=_finite(lc.ratio_high) if lc is not None else None,
        method=method, launches=launches)


def fastest_per_size(g: Curves, alpha: float = SIGNIFICANCE) -> list[SizeFastest]:
    """Per size: the correct algorithm with the smallest stored median, the runner-up, and a launch-level
    verdict (``fastest_of`` of the algorithms' rows at that size, with ``nbytes``).

    Only rows timed by the same loop are compared: where a size has rows of two loops (``--loop compiled``
    times native in C, hand-written algorithms always run in Python), the loop most of its rows share
    (Python on a tie, the one every algorithm can use) decides, and ``other_loop`` names the rows left out."""
    out = []
    for n in g.sizes:
        rows = [r for r in (next((r for r in rs if r.nbytes == n), None) for rs in g.by_algorithm.values()) if r]
        loops = [r.loop for r in rows]
        loop = max(sorted(set(loops), key=lambda x: x != "python"), key=loops.count) if loops else "python"
        f = fastest_of([r for r, x in zip(rows, loops, strict=True) if x == loop], alpha=alpha)
        if f is not None:
            out.append(SizeFastest(**f.verdict_fields(), collective=g.collective, nranks=g.nranks, dtype=g.dtype,
                                   op=g.op, in_place=g.in_place, root=g.root, nbytes=n, loop=loop,
                                   other_loop=tuple(r.algorithm for r, x in zip(rows, loops, strict=True)
                                                    if x != loop)))
    return out

def size_bands(entries: Sequence[SizeFastest]) -> list[tuple[int, int, str]]:
    """``fastest_per_size`` entries (in size order) as bands of consecutive sizes with the same fastest:
    [(smallest size, largest size, fastest)]."""
    bands: list[tuple[int, int, str]] = []
    for e in entries:
        if bands and bands[-1][2] == e.fastest:
            bands[-1] = (bands[-1][0], e.nbytes, e.fastest)
        else:
            bands.append((e.nbytes, e.nbytes, e.fastest))
    return bands


def step_rows(rows: Sequence[WorkloadRow]) -> list[WorkloadRow]:
    """The rows that are whole measurements: steps of ddp/zero/moe (part -1), every overlap/straggler row."""
    return [r for r in rows if r.part == -1 or r.workload in ("overlap", "straggler")]


def fastest_per_variant(rows: Sequence[WorkloadRow], alpha: float = SIGNIFICANCE) -> list[VariantFastest]:
    """The fastest algorithm per variant (per size for stragglers), for DDP the fastest bucketing per algorithm (its
    bucket caps and one call per tensor), and overall, each against its runner-up.

    Each entry is ``fastest_of`` of the candidates' stored rows (smallest median among correct
    rows, against the runner-up at the launch level) with ``what``: the variant, the size, or
    "all variants" (every variant and algorithm).  Overlap runs have one algorithm per call (native) and get none.
    """
    steps = step_rows(rows)
    if not steps or steps[0].workload == "overlap":
        return []
    by: dict[str, list[WorkloadRow]] = {}
    for r in steps:
        by.setdefault(r.label if r.workload == "straggler" else r.variant, []).append(r)
    out = []
    for what, rs in by.items():
        f = fastest_of(rs, name=lambda r: r.algorithm, alpha=alpha)
        if f is not None:
            out.append(VariantFastest(**f.verdict_fields(), what=what))
    if len(by) > 1 and steps[0].workload == "ddp":  # the best bucketing (cap, or one call per tensor) per algorithm
        per_alg: dict[str, list[WorkloadRow]] = {}
        for r in steps:
            per_alg.setdefault(r.algorithm, []).append(r)
        for alg, rs in per_alg.items():
            f = fastest_of(rs, name=lambda r: r.variant, alpha=alpha) if len(rs) > 1 else None
            if f is not None:
                out.append(VariantFastest(**f.verdict_fields(), what=f"{alg}: bucketing"))
    if len(by) > 1 and steps[0].workload != "straggler":
        f = fastest_of(steps, name=lambda r: f"{r.variant}: {r.algorithm}", alpha=alpha)
        if f is not None:
            out.append(VariantFastest(**f.verdict_fields(), what="all variants"))
    return out

