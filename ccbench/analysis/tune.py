"""Tuning files for the MPI library, chosen from measured ``native:<alg>`` variants.

`select` picks, per collective, rank count and measured size, what the library is told
to use, from launch-level statistics: the launch is the unit of replication (Kalibera &
Jones, ISMM 2013; ``ccbench.core.replication``), and each ``native:<alg>`` variant ran in
jobs of its own, apart from the unforced ``native`` (the library's default), so every
comparison is of separate launches (`ccbench.core.replication.compare_launches`, Welch's t
on per-launch log-medians).  A variant replaces the default only where it is faster than
``native`` with the Benjamini-Hochberg adjusted p of all variant-against-default
comparisons of the collective below `LEVEL`; elsewhere the default stays.  A size whose
choice is not decidedly faster than its runner-up is a toss-up; with one launch a side the
launch-to-launch variation is unknown and the comparison undetermined below the ratio a
prior between-launch CV resolves.  `size_ranges` turns the per-size choices into size
ranges, putting each boundary at the crossover: interpolated linearly in log size and log time
between the two measured sizes that bracket it, or, where those are more than a factor
of two apart (a coarse sweep, reported as such), where the two curves' alpha-beta fits
(`ccbench.analysis.fit`) cross inside the bracket.  `verify` measures the default with and
without the file in alternating launches and decides per size at the launch level.  Three writers
turn the ranges into the files the libraries read:

* MPICH's collective-selection JSON (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``):
  nested ``"key=value"`` conditions down to ``"algorithm=MPIR_..."`` containers, the
  format of MPICH's own ``maint/tuning/coll/mpir/generic.json`` and parsed by
  ``src/mpi/coll/src/csel.c``.  The file replaces MPICH's whole selection tree (a tree
  without some collective aborts MPI_Init), so every collective not tuned keeps the
  default subtree of the installed library, read from the library itself.  Message-size
  keys follow ``csel.c``: ``avg_msg_size`` = count x type size of allreduce, bcast,
  reduce and of one alltoall block; ``total_msg_size`` = the whole gathered buffer of
  allgather and the whole input of reduce_scatter_block.  Sizes below the smallest one
  measured, rank counts not measured, non-commutative or user-defined
  operations, counts below the power of two of the ranks and (for the smp algorithms)
  communicators without a node hierarchy keep MPICH's default.  The
  file is plain JSON, as every JSON tool reads it; the runs it came from are written
  beside it in ``FILE.source.json`` (files of earlier versions began with a ``/* ... */``
  comment, which json-c, MPICH's parser, accepts: `read_json_with_comment` reads both).
* Open MPI's classic dynamic-rules file (``coll_tuned_dynamic_rules_filename`` with
  ``coll_tuned_use_dynamic_rules=1``; ``coll_tuned_dynamic_file.c``,
  ``docs/tuning-apps/coll-tuned.rst``): number of collectives; per collective its id,
  number of comm sizes; per comm size the size, number of rules and the rules
  ``msg_size alg_id topo_faninout segsize``, the first at size 0, ascending.  Algorithm
  0 (the fixed decision) covers sizes below the smallest measured and every rank count
  not measured (a comm size's rules hold up to the next size listed, so each measured
  count is followed by the next count with only the fixed decision).  ``#`` starts a
  comment, which names the run.
* Open MPI's JSON rules (``rule_file_version`` 3, ``module`` "tuned", ``collectives``:
  name -> list of ``comm_size_min``/``comm_size_max`` with ``rules`` of
  ``msg_size_min``/``msg_size_max``/``alg``; docs/tuning-apps/coll-tuned.rst).  Only Open
  MPI 6.0 and later read it -- the 5.0.x wheel does not -- and its schema admits no
  extra field, so the run it came from is written beside it in ``FILE.source.json``.

Message size in Open MPI's rules is the collective's own (coll-tuned.rst): the buffer
of allreduce, bcast and reduce; datatype size x ranks x count of allgather, alltoall and
reduce_scatter_block (ccbench's nbytes).  Gather and scatter rules are looked up with
datatype size x ranks whatever the count (``coll_tuned_decision_dynamic.c``), so for them
one algorithm -- the one fastest at most measured sizes -- covers every size.
"""

import dataclasses
import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ccbench.algorithms.native_variants import (
    LIBRARIES,
    MPICH,
    MPICH_PARAMS,
    MPICH_UNWRITABLE,
    OPENMPI,
    OPENMPI_COLL_IDS,
    is_variant,
    library_of_vendor,
)
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.replication import (
    MAX_LAUNCHES,
    LaunchComparison,
    compare_launches,
    launches_needed,
    paired_compare,
)
from ccbench.core.stats import benjamini_hochberg
from ccbench.core.units import format_size
from ccbench.store.launches import pool_rows
from ccbench.store.run import Run

__all__ = ["DEFAULT", "DEFAULT_VERIFY_LAUNCHES", "EXTENSIONS", "FORMATS", "LEVEL", "VERDICTS", "Range", "Selection",
           "Shape", "SizeChoice", "SizeDecision", "TuningChoice", "TuningFile", "TuningSource", "Verification",
           "VerificationLaunch", "VerificationRow", "VerificationRun", "run_shape",
           "check_verify_launches", "crossover_nbytes", "decide_sizes", "launch_arrays", "model_crossover_nbytes",
           "file_env", "mpich_json", "openmpi_json", "openmpi_rules", "pool_side", "read_json_with_comment",
           "select", "size_ranges", "tuning_choice", "tuning_file", "verdict", "verification_rows"]

FORMATS = {"mpich-json": "mpich", "openmpi-rules": "openmpi", "openmpi-json": "openmpi"}
#: The tuning file's name ends with this, by format: tuning.mpich.json, ...
EXTENSIONS = {"mpich-json": "mpich.json", "openmpi-rules": "openmpi-rules.txt", "openmpi-json": "openmpi.json"}
DEFAULT = "native"  # the library's own selection: a range won by it keeps the library's default
COARSE_FACTOR = 2.0  # a crossover bracketed by sizes further apart than this is "coarse"
LEVEL = 0.05         # two-sided level of every launch-level test here (after Benjamini-Hochberg)
DEFAULT_VERIFY_LAUNCHES = 3   # launches a side of a verification (pairs A B); fewer than 3 is refused
#: Verdicts of a verified size (`verdict`).
VERDICTS = ("moved", "already best", "did not move", "worse", "faster, same selection", "undetermined",
            "not measured", "wrong results")
# MPICH csel collective names and the message-size key of each (csel.c get_avg_msgsize /
# get_total_msgsize); gather and scatter have one intra algorithm in MPICH: nothing to tune
_MPICH_COLL = {"allreduce": ("allreduce", "avg_msg_size"), "bcast": ("bcast", "avg_msg_size"),
               "reduce": ("reduce", "avg_msg_size"), "alltoall": ("alltoall", "avg_msg_size"),
               "allgather": ("allgather", "total_msg_size"),
               "reduce_scatter": ("reduce_scatter_block", "total_msg_size"), "barrier": ("barrier", None)}


@dataclass(frozen=True)
class SizeChoice:
    """What the file names at one size, the runner-up, the library's default there, and the launch-level tests.

    Times are launch-level typical times: a row's ``median_s``, the geometric mean of its
    launches' medians (the median itself for a row of one launch).
    """

    nbytes: int
    winner: str                  # what the file names here (`native`: the library's default stays)
    winner_s: float
    runner_up: str | None        # the fastest other candidate
    runner_up_s: float | None
    default_s: float | None      # the library's own choice (`native`) at this size, if measured
    within_noise: bool           # a toss-up: the winner is not decidedly faster than the runner-up
    fastest_any: str             # the fastest of all variants (it may be one a file cannot name)
    times_s: dict[str, float] = field(default_factory=dict)
    # runner-up against the winner at the launch level (ratio runner-up / winner); None: not compared
    vs_runner_up: LaunchComparison | None = None
    # `challenger` (the winner, or the fastest variant where the default stays) against native:
    # ratio challenger / native, and its Benjamini-Hochberg adjusted p over the selection
    challenger: str | None = None
    vs_default: LaunchComparison | None = None
    default_q: float | None = None
    kept_default: bool = False   # a variant was fastest, but not decidedly faster than native: the default stays
    launches: dict[str, int] = field(default_factory=dict)  # launches of each candidate's row

    @property
    def fastest(self) -> str:
        """The fastest candidate by typical time (the winner unless the default was kept)."""
        return min(self.times_s, key=self.times_s.get) if self.times_s else self.winner

    @property
    def launches_to_decide(self) -> int | None:
        """Where the default stays though a variant was faster: the launches a side that would decide the
        variant's ratio against the default, were it real (``launches_needed`` of that comparison; None when
        not compared, or beyond ``MAX_LAUNCHES``)."""
        c = self.vs_default
        if not self.kept_default or c is None or not c.ratio > 0 or c.ratio == 1:
            return None
        return launches_needed(c, LEVEL, ratio=max(c.ratio, 1 / c.ratio))

    @property
    def undetermined(self) -> bool:
        """True when the toss-up comes from launches too few to tell (one launch a side, or no samples)."""
        return self.within_noise and (self.vs_runner_up is None or self.vs_runner_up.verdict == "undetermined")


@dataclass(frozen=True)
class Range:
    """Sizes [lo, hi] (hi None: no upper end) and the variant chosen for them."""

    lo: int
    hi: int | None
    algorithm: str


@dataclass
class Selection:
    """Everything chosen for one collective at one rank count."""

    collective: str
    nranks: int
    dtype: str
    op: str
    run: str
    choices: list[SizeChoice]
    ranges: list[Range] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shape: "Shape | None" = None  # where it was measured: nodes x ranks per node, placement (None: not recorded)


@dataclass(frozen=True)
class Shape:
    """The shape of the communicator a choice was measured on, as MPICH's selection tree can ask it (csel.c:
    ``comm_avg_ppn`` = ranks / nodes, ``is_node_consecutive`` = each node's ranks are consecutive)."""

    nodes: int
    ppn: int
    consecutive: bool

    def __str__(self) -> str:
        return f"{self.nodes} node{'s' if self.nodes != 1 else ''} x {self.ppn} ranks" + (
            "" if self.consecutive or self.nodes == 1 else ", ranks not consecutive on their nodes")


def run_shape(meta: dict) -> Shape | None:
    """The run's `Shape` from its run.json (the node map: ``topology.node_of_rank``, else ``nodes`` and
    ``ranks_per_node``); None where neither is recorded (imported runs)."""
    topo = meta.get("topology") or {}
    node_of = topo.get("node_of_rank")
    if isinstance(node_of, list) and node_of:
        nodes = len(set(node_of))
        runs = sum(1 for i, n in enumerate(node_of) if i == 0 or n != node_of[i - 1])  # blocks of one node's ranks
        return Shape(nodes, -(-len(node_of) // nodes), runs == nodes)
    nodes, ppn = meta.get("nodes"), meta.get("ranks_per_node")
    if isinstance(nodes, int) and isinstance(ppn, int) and nodes > 0 and ppn > 0:
        return Shape(nodes, ppn, True)  # before the node map was stored: ranks were placed in blocks
    return None


def _writable(library: str, collective: str, algorithm: str) -> bool:
    """Whether a tuning file of `library` can name this variant."""
    name = algorithm.split(":", 1)[1]
    if library == "mpich":
        fn = dict(MPICH.get(collective, ("", []))[1]).get(name)
        return fn is not None and fn not in MPICH_UNWRITABLE and collective in _MPICH_COLL
    return name in {n for _, n in OPENMPI.get(collective, ("", []))[1]}


def launch_arrays(row) -> list[np.ndarray] | None:
    """The row's launches as arrays of times (``row.launch_blocks()``), or None when a launch kept no usable samples."""
    out = [np.asarray(samples, dtype=np.float64) for _, samples in row.launch_blocks()]
    if not out or any(x.size == 0 or not np.all(np.isfinite(x)) or np.any(x <= 0) for x in out):
        return None
    return out


def _separate(a_row, b_row, level: float = LEVEL) -> LaunchComparison | None:
    """b against a, measured in separate jobs (`compare_launches`); None when a side has no samples."""
    a, b = launch_arrays(a_row), launch_arrays(b_row)
    return None if a is None or b is None else compare_launches(a, b, level)


def _p(c: LaunchComparison) -> float:
    return c.p_value if math.isfinite(c.p_value) else 1.0


def select(rows, library: str, run: str = "", not_applicable=(), level: float = LEVEL) -> list[Selection]:
    """Per collective and rank count: what the file names at every measured size, from launch-level tests.

    Only correct rows count, out of place, root 0, of the dtype/op measured most often for
    that collective's variants.  Every writable variant is compared with `native` at its
    size as separate launches (`compare_launches`: the variants and the unforced default ran
    in different jobs); the p-values of all these comparisons of one collective and rank
    count are adjusted together by Benjamini-Hochberg (Benjamini & Hochberg 1995,
    ``ccbench.core.stats.benjamini_hochberg``: testing many variants at many sizes would
    otherwise find a "faster" variant somewhere by chance).  The file names the fastest of
    `native` and the variants faster than it at adjusted p < `level`; where `native` was not
    measured, the fastest variant.  A size is a toss-up when the winner is not decidedly
    faster than the runner-up (`compare_launches` verdict other than "slower" for the
    runner-up).  Why a test and not overlapping intervals: two 95% intervals can overlap
    while the difference is significant (Schenker & Gentleman, Am. Stat. 55(3), 2001).
    `not_applicable` holds (collective, algorithm, nranks, nbytes) of cases the library refused.
    """
    groups = defaultdict(list)
    for r in rows:
        if r.ok and not r.in_place and r.root == 0:
            groups[(r.collective, r.nranks)].append(r)
    out = []
    for (coll, P), rs in sorted(groups.items()):
        variants = [r for r in rs if is_variant(r.algorithm)]
        if not variants:
            continue
        (dtype, op), _ = Counter((r.dtype, r.op) for r in variants).most_common(1)[0]
        rs = [r for r in rs if (r.dtype, r.op) == (dtype, op)]
        by_size = defaultdict(dict)
        for r in rs:
            by_size[r.nbytes][r.algorithm] = r
        sel = Selection(coll, P, dtype, op, run, [])
        unwritable = sorted({r.algorithm for r in rs if is_variant(r.algorithm)
                             and not _writable(library, coll, r.algorithm)})
        if unwritable:
            sel.notes.append(f"not written into a {LIBRARIES[library]} file (it cannot name them): "
                             + ", ".join(unwritable))
        sizes = []
        for nbytes in sorted(by_size):
            # the library's own choice is a candidate too: where it is fastest, the file keeps it
            cands = {a: r for a, r in by_size[nbytes].items() if is_variant(a) or a == DEFAULT}
            ok = {a: r for a, r in cands.items() if a == DEFAULT or _writable(library, coll, a)}
            if ok:
                sizes.append((nbytes, cands, ok))
        tests = {}   # (nbytes, variant) -> variant against native
        for nbytes, _, ok in sizes:
            if DEFAULT in ok:
                for a, r in ok.items():
                    c = None if a == DEFAULT else _separate(ok[DEFAULT], r, level)
                    if c is not None:
                        tests[(nbytes, a)] = c
        keys = list(tests)
        qs = dict(zip(keys, (float(q) for q in benjamini_hochberg([_p(tests[k]) for k in keys])), strict=True))
        no_default, no_samples, kept = [], [], []
        for nbytes, cands, ok in sizes:
            t = {a: r.median_s for a, r in ok.items()}
            fastest = min(ok, key=t.get)
            if DEFAULT in ok:
                better = [a for a in ok if (nbytes, a) in tests and qs[(nbytes, a)] < level
                          and tests[(nbytes, a)].ratio < 1]
                winner = min([DEFAULT, *better], key=t.get)
                challenger = (winner if winner != DEFAULT
                              else min((a for a in ok if a != DEFAULT), key=t.get, default=None))
            else:
                winner, challenger = fastest, None
                no_default.append(format_size(nbytes))
            others = [a for a in ok if a != winner]
            ru = min(others, key=t.get) if others else None
            vs_ru = _separate(ok[winner], ok[ru], level) if ru else None
            if (ru and vs_ru is None) or any(launch_arrays(r) is None for r in ok.values()):
                no_samples.append(format_size(nbytes))
            if winner == DEFAULT and fastest != DEFAULT:
                kept.append(f"{format_size(nbytes)} ({fastest} {t[DEFAULT] / t[fastest]:.3g}x faster, q "
                            f"{qs[(nbytes, fastest)]:.2g})" if (nbytes, fastest) in qs else format_size(nbytes))
            d = ok.get(DEFAULT)
            sel.choices.append(SizeChoice(
                nbytes, winner, t[winner], ru, t[ru] if ru else None, d.median_s if d else None,
                bool(ru is not None and (vs_ru is None or vs_ru.verdict != "slower")),
                min(cands, key=lambda a: cands[a].median_s), t,
                vs_ru, challenger, tests.get((nbytes, challenger)), qs.get((nbytes, challenger)),
                winner == DEFAULT and fastest != DEFAULT, {a: r.n_launches for a, r in ok.items()}))
        if not sel.choices:
            continue
        refused = {(a, n) for c, a, p, n in not_applicable if c == coll and p == P}
        sel.ranges, more = size_ranges(sel.choices, refused, _curve_fits(rs))
        if kept:
            more.append(f"the default stays at {', '.join(kept)}: no variant is decidedly faster than native at the "
                        f"launch level (q: p adjusted by Benjamini-Hochberg over the {len(keys)} "
                        f"variant-against-default comparisons; a variant needs q < {level:g})")
        if no_default:
            more.append(f"native not measured at {', '.join(no_default)}: the fastest variant is written without a "
                        "comparison with the library's default")
        if no_samples:
            more.append(f"no raw samples to compare at {', '.join(dict.fromkeys(no_samples))}")
        compared = [c for c in [*tests.values(), *(c.vs_runner_up for c in sel.choices)] if c is not None]
        prior = [c.resolvable_ratio for c in compared if c.method == "prior"]
        single = [f"{a} at {format_size(n)}" for n, _, ok in sizes for a, r in ok.items() if r.n_launches == 1]
        if prior:
            where = "" if len(prior) == len(compared) else f" ({', '.join(single)} measured in one launch)"
            more.append(f"one launch: launch variation unknown, toss-ups cannot be ruled out below ratio "
                        f"{max(prior):.3g}{where}; measure with ccbench launch --launches 3 or more")
        sel.notes += more
        out.append(sel)
    return out


def crossover_nbytes(s0: int, a0: float, b0: float, s1: int, a1: float, b1: float) -> float:
    """Where A (faster at s0) and B (faster at s1) cross: linear in log size and log time.

    d(s) = ln tA - ln tB goes from <= 0 at s0 to > 0 at s1; its zero, interpolated in
    ln s (linearly in s when s0 is 0), is the crossover.
    """
    d0, d1 = math.log(a0) - math.log(b0), math.log(a1) - math.log(b1)
    f = 0.5 if d1 == d0 else -d0 / (d1 - d0)
    f = min(max(f, 0.0), 1.0)
    if s0 <= 0:
        return s0 + f * (s1 - s0)
    return math.exp(math.log(s0) + f * (math.log(s1) - math.log(s0)))


def _curve_fits(rows) -> dict:
    """Segmented alpha-beta fits (`ccbench.analysis.fit.fit_segments`) of every variant's curve with 3+ sizes."""
    from ccbench.analysis.fit import fit_segments

    by_alg = defaultdict(list)
    for r in rows:
        if (is_variant(r.algorithm) or r.algorithm == DEFAULT) and r.median_s > 0:
            by_alg[r.algorithm].append(r)
    fits = {}
    for alg, rs in by_alg.items():
        if len({r.nbytes for r in rs}) >= 3:
            try:
                fits[alg] = fit_segments([r.nbytes for r in rs], [r.median_s for r in rs], n_boot=0)
            except CCBenchError:
                continue
    return fits


def model_crossover_nbytes(fit_a, fit_b, s0: int, s1: int) -> float | None:
    """Where two alpha-beta fits cross inside (s0, s1), or None.

    Used where the sweep is coarse.  Each curve must have one segment over the whole
    bracket (no protocol change inside it); the crossing of T = alpha + beta n (Hockney
    1994) lines is (alpha_b - alpha_a) / (beta_a - beta_b).
    """
    sa, sb = fit_a.segment_at(s0), fit_b.segment_at(s0)
    if sa is not fit_a.segment_at(s1) or sb is not fit_b.segment_at(s1) or sa.beta_s_per_byte == sb.beta_s_per_byte:
        return None
    x = (sb.alpha_s - sa.alpha_s) / (sa.beta_s_per_byte - sb.beta_s_per_byte)
    return x if s0 < x < s1 else None


def size_ranges(choices: list[SizeChoice], refused=frozenset(), fits=None) -> tuple[list[Range], list[str]]:
    """Per-size winners -> size ranges from the smallest measured size up, and notes.

    The boundary between two winners sits at their crossover: from the two curves'
    alpha-beta fits (`fits`, by algorithm) where the measured sizes bracketing it are more
    than COARSE_FACTOR apart and both fits are straight over the bracket, else interpolated
    between the two measured sizes.  When the later winner was not measured at the earlier
    size (the library refused it there), it starts exactly at its first measured size.
    The last range has no upper end.
    """
    fits = fits or {}
    ranges: list[Range] = []
    notes: list[str] = []
    lo = choices[0].nbytes
    for prev, nxt in zip(choices, choices[1:], strict=False):
        if nxt.winner == prev.winner:
            continue
        b_prev = prev.times_s.get(nxt.winner)
        a_next = nxt.times_s.get(prev.winner)
        if b_prev is None or a_next is None or (nxt.winner, prev.nbytes) in refused:
            cut = nxt.nbytes - 1
            how = "not measured (or refused) on both sides: switch at the first size measured"
        else:
            coarse = prev.nbytes > 0 and nxt.nbytes / prev.nbytes > COARSE_FACTOR
            x = None
            if coarse and prev.winner in fits and nxt.winner in fits:
                x = model_crossover_nbytes(fits[prev.winner], fits[nxt.winner], prev.nbytes, nxt.nbytes)
            src = "the alpha-beta fits of both curves" if x is not None else "interpolation"
            if x is None:
                x = crossover_nbytes(prev.nbytes, prev.winner_s, b_prev, nxt.nbytes, a_next, nxt.winner_s)
            cut = min(max(int(x), prev.nbytes), nxt.nbytes - 1)
            how = f"crossover at about {format_size(cut + 1)} from {src}"
        if prev.nbytes > 0 and nxt.nbytes / prev.nbytes > COARSE_FACTOR:
            how += f" (coarse: sizes {format_size(prev.nbytes)} and {format_size(nxt.nbytes)} are " \
                   f"{nxt.nbytes / prev.nbytes:g}x apart; measure in between to confirm)"
        notes.append(f"{prev.winner} -> {nxt.winner} between {format_size(prev.nbytes)} and "
                     f"{format_size(nxt.nbytes)}: {how}")
        ranges.append(Range(lo, cut, prev.winner))
        lo = cut + 1
    ranges.append(Range(lo, None, choices[-1].winner))
    noisy = [format_size(c.nbytes) + (" (undetermined)" if c.undetermined else "") for c in choices if c.within_noise]
    if noisy:
        notes.append("toss-up at " + ", ".join(noisy) + ": the choice is not decidedly faster than the runner-up "
                     "at the launch level (the 95% interval of their ratio includes 1)")
    return ranges, notes


# ----------------------------------------------------------------------------- MPICH


def read_json_with_comment(text: str):
    """A JSON document that may start with /* ... */ comments (as json-c accepts)."""
    return json.loads(re.sub(r"^\s*(/\*.*?\*/\s*)+", "", text, flags=re.S))



def _mpich_container(coll: str, algorithm: str, default: dict) -> dict:
    """The container of one MPICH algorithm (with its parameters); the smp ones only on a
    communicator with a node hierarchy, as in MPICH's own tree, the default elsewhere."""
    fn = dict(MPICH[coll][1])[algorithm.split(":", 1)[1]]
    cnt = {f"algorithm={fn}": {f"{k}={v}": {} for k, v in MPICH_PARAMS.get(fn, {}).items()}}
    return {"comm_hierarchy=parent": cnt, "comm_hierarchy=any": default} if fn.endswith("_smp") else cnt


def _mpich_sizes(sel: Selection, key: str | None, default: dict) -> dict:
    """The size rules of one selection, under MPICH's key (sizes converted to its meaning)."""
    if key is None:  # barrier: one algorithm, the one fastest at most sizes
        best = Counter(c.winner for c in sel.choices).most_common(1)[0][0]
        return default if best == DEFAULT else _mpich_container(sel.collective, best, default)

    def conv(nbytes: int) -> int:  # alltoall's avg_msg_size is one block
        return nbytes // sel.nranks if sel.collective == "alltoall" else nbytes

    node: dict = {}
    first = conv(sel.ranges[0].lo)
    if first > 0:
        node[f"{key}<={first - 1}"] = default
    for r in sel.ranges:
        sub = default if r.algorithm == DEFAULT else _mpich_container(sel.collective, r.algorithm, default)
        node[f"{key}=any" if r.hi is None else f"{key}<={conv(r.hi)}"] = sub
    return node


def _mpich_shapes(sels: list[Selection], key: str | None, default: dict) -> dict:
    """The rules of one rank count, under the shapes they were measured on: exactly each measured ranks per node
    (``comm_avg_ppn``) and node placement (``is_node_consecutive``), the default at every other shape, so that no
    choice made at one shape is applied to another.  A selection of unknown shape holds at every shape."""
    if len(sels) == 1 and sels[0].shape is None:
        return _mpich_sizes(sels[0], key, default)
    node: dict = {}
    below = 0
    by_ppn = defaultdict(list)
    for s in sels:
        by_ppn[s.shape.ppn].append(s)
    for ppn in sorted(by_ppn):
        if ppn - 1 > below:
            node[f"comm_avg_ppn<={ppn - 1}"] = default
        placed = {s.shape.consecutive: s for s in by_ppn[ppn]}
        if ppn == 1 or (len(placed) == 1 and by_ppn[ppn][0].shape.nodes == 1):  # placement cannot differ
            node[f"comm_avg_ppn<={ppn}"] = _mpich_sizes(by_ppn[ppn][0], key, default)
        else:  # MPICH: a flat communicator (one rank per node) is never node-consecutive
            node[f"comm_avg_ppn<={ppn}"] = {f"is_node_consecutive={'yes' if c else 'no'}": _mpich_sizes(
                placed[c], key, default) if c in placed else default for c in (True, False)}
        below = ppn
    node["comm_avg_ppn=any"] = default
    return node


def mpich_json(selections: list[Selection], default_tree: dict) -> dict:
    """MPICH's complete selection tree: `default_tree` with the tuned collectives replaced."""
    tree = json.loads(json.dumps(default_tree))
    by_coll = defaultdict(list)
    for s in selections:
        if s.collective in _MPICH_COLL:
            by_coll[s.collective].append(s)
    for coll, sels in by_coll.items():
        name, key = _MPICH_COLL[coll]
        old = tree[f"collective={name}"]
        default = old.get("comm_type=intra", old)
        intra: dict = {}
        if coll in ("allreduce", "reduce"):
            intra["is_op_built_in=no"] = default
        if coll in ("allreduce", "reduce", "reduce_scatter"):
            intra["is_commutative=no"] = default
        if coll == "alltoall":
            intra["is_sendbuf_inplace=yes"] = default
        # exactly the measured rank counts: some algorithms need a power of two of ranks
        # (MPICH's allgather recursive_doubling, ...), so no rule is carried to another count
        sizes: dict = {}
        below = 0
        by_size = defaultdict(list)
        for s in sels:
            by_size[s.nranks].append(s)
        for P in sorted(by_size):
            if P - 1 > below:
                sizes[f"comm_size<={P - 1}"] = default
            sizes[f"comm_size<={P}"] = _mpich_shapes(by_size[P], key, default)
            below = P
        sizes["comm_size=any"] = default
        if coll in ("allreduce", "reduce"):  # fewer elements than the power of two of the ranks
            intra["count<pow2"] = default
            intra["count=any"] = sizes
        else:
            intra.update(sizes)
        new = {"comm_type=intra": intra}
        if "comm_type=inter" in old:
            new["comm_type=inter"] = old["comm_type=inter"]
        tree[f"collective={name}"] = new
    return tree


# ---------------------------------------------------------------------------- Open MPI


def _ompi_id(coll: str, algorithm: str) -> int:
    if algorithm == DEFAULT:
        return 0  # Open MPI's fixed decision: its own choice
    return {n: i for i, n in OPENMPI[coll][1]}[algorithm.split(":", 1)[1]]


def _ompi_rules(sel: Selection) -> list[tuple[int, int]]:
    """(msg_size, alg_id) rules from 0 up; alg 0 (Open MPI's fixed decision) below the measured."""
    if sel.collective in ("gather", "scatter", "barrier"):  # one rule for every size (see the module doc)
        best = Counter(c.winner for c in sel.choices).most_common(1)[0][0]
        return [(0, _ompi_id(sel.collective, best))]
    # alg 0 (the fixed decision) below the smallest measured size and where `native` won;
    # neighbouring rules with the same algorithm are one
    rules = [] if sel.ranges[0].lo == 0 else [(0, 0)]
    for r in sel.ranges:
        alg = _ompi_id(sel.collective, r.algorithm)
        if not rules or rules[-1][1] != alg:
            rules.append((r.lo, alg))
    return rules


def openmpi_rules(selections: list[Selection], source: str) -> str:
    """Open MPI's classic dynamic rules file (version 1 layout, '#' comments)."""
    by_coll = defaultdict(list)
    for s in selections:
        if s.collective in OPENMPI_COLL_IDS:
            by_coll[s.collective].append(s)
    lines = [f"# Open MPI coll/tuned dynamic rules written by ccbench tune from {source}",
             "# use: OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_dynamic_rules_filename=THIS_FILE",
             "# per rule: message size (bytes), algorithm id, topo fan in/out, segment size",
             f"{len(by_coll)}  # number of collectives"]
    for coll in sorted(by_coll, key=lambda c: OPENMPI_COLL_IDS[c]):
        sels = sorted(by_coll[coll], key=lambda s: s.nranks)
        # a comm size's rules hold up to the next one listed: after each measured rank count
        # comes the next count with the fixed decision, so no rule reaches a count not measured
        blocks = []
        for i, s in enumerate(sels):
            blocks.append((s.nranks, _ompi_rules(s)))
            if i + 1 == len(sels) or sels[i + 1].nranks != s.nranks + 1:
                blocks.append((s.nranks + 1, [(0, 0)]))
        lines += [f"{OPENMPI_COLL_IDS[coll]}  # collective id: {coll}", f"{len(blocks)}  # number of comm sizes"]
        names = {i: n for i, n in OPENMPI[coll][1]}
        for nranks, rules in blocks:
            lines += [f"{nranks}  # comm size", f"{len(rules)}  # number of message sizes"]
            lines += [f"{ms} {alg} 0 0  # {names.get(alg, 'fixed decision (library default)')}"
                      for ms, alg in rules]
    return "\n".join(lines) + "\n"


def openmpi_json(selections: list[Selection]) -> dict:
    """Open MPI's JSON rules (rule_file_version 3; read by Open MPI 6.0 and later)."""
    by_coll = defaultdict(list)
    for s in selections:
        if s.collective in OPENMPI_COLL_IDS:
            by_coll[s.collective].append(s)
    colls = {}
    for coll, sels in sorted(by_coll.items()):
        sels = sorted(sels, key=lambda s: s.nranks)
        entries = []
        for s in sels:
            rules = _ompi_rules(s)
            out = []
            for j, (ms, alg) in enumerate(rules):
                if alg == 0:
                    continue  # JSON: sizes without a rule fall back to the fixed decision
                hi = rules[j + 1][0] - 1 if j + 1 < len(rules) else "inf"
                out.append({"msg_size_min": ms, "msg_size_max": hi, "alg": dict(OPENMPI[coll][1])[alg]})
            entries.append({"comm_size_min": s.nranks, "comm_size_max": s.nranks, "rules": out})
        colls[OPENMPI[coll][0]] = entries
    return {"rule_file_version": 3, "module": "tuned", "collectives": colls}


# ------------------------------------------------------------------------------ driver


def _not_applicable(meta: dict) -> list[tuple[str, str, int, int]]:
    return [(s["collective"], s["algorithm"], s["nranks"], s["nbytes"])
            for s in meta.get("skipped", []) if s.get("not_applicable")]


@dataclass(frozen=True)
class TuningSource:
    """One run a tuning file was chosen from, as ``FILE.source.json`` and the file's own comment name it.

    `run`: the run's folder name; `path`: where it was read; `mpi_library`, `nranks`, `start_time`: what its
    run.json recorded (None where it did not); `shape`: the `Shape` it ran on, as text (None: not recorded).
    """

    run: str
    path: str
    mpi_library: str | None
    nranks: int | None
    start_time: str | None
    shape: str | None

    def to_dict(self) -> dict:
        """The source as ``FILE.source.json`` lists it."""
        return {"run": self.run, "path": self.path, "mpi_library": self.mpi_library, "nranks": self.nranks,
                "start_time": self.start_time, "shape": self.shape}


@dataclass(frozen=True)
class TuningChoice:
    """What a tuning file of `format` names, chosen from the runs' variants (`tuning_choice`; nothing written).

    `library`: the library the format is for (``"mpich"``, ``"openmpi"``); `ext`: how the file's name ends
    (`EXTENSIONS`); `selections`: per collective and rank count of each run, what the file names per size;
    `sources`: the runs, in the order given; `notes`: what the file cannot say (shapes it was not measured on).
    """

    format: str
    library: str
    ext: str
    selections: tuple[Selection, ...]
    sources: tuple[TuningSource, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TuningFile:
    """A tuning file's text and what it was chosen from (`tuning_file`); ``to_dict()`` is ``FILE.source.json``.

    `choice`: the `TuningChoice`, its notes with what writing the file adds (default subtrees of another
    library version, a format an older library cannot read); `side`: whether the sources go into
    ``FILE.source.json`` beside the file (MPICH's and Open MPI's JSON cannot hold them); `defaults_from`: the
    library version whose default selection the collectives not tuned keep (``mpich-json``; None otherwise);
    `path`: where the file was written (``ccbench.workflow.tune.tune_runs`` sets it; None while unwritten).
    """

    choice: TuningChoice
    text: str
    side: bool
    defaults_from: str | None = None
    path: str | None = None

    def to_dict(self) -> dict:
        """``FILE.source.json``: the file's name, its format, the runs it came from and, for MPICH, the version
        whose defaults it keeps.  Only a written file has one."""
        if self.path is None:
            raise CCBenchError("a tuning file not written yet has no FILE.source.json")
        return {"tuning_file": Path(self.path).name, "format": self.choice.format,
                "sources": [s.to_dict() for s in self.choice.sources],
                **({"defaults_from": self.defaults_from} if self.defaults_from is not None else {})}


def tuning_choice(runs: list[Run], fmt: str) -> TuningChoice:
    """Choose from the open runs' native:<alg> variants what a tuning file of `fmt` names (nothing is written).

    Refuses a run of another kind or library, a run without variants, and two runs of one rank count.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    want = FORMATS[fmt]
    selections, sources = [], []
    for run in runs:
        path, meta = run.path, run.meta
        if run.kind != "sweep":
            raise UsageError(f"{str(path)!r} is a {run.kind} run, not a sweep run: tune reads sweeps of native "
                             "variants")
        lib = library_of_vendor(str(meta.get("mpi_vendor", "")))
        if lib != want:
            raise UsageError(f"{path} was measured with {meta.get('mpi_library', '?')!r}; {fmt} is for "
                             f"{LIBRARIES[want]}")
        shape = run_shape(meta)
        sels = [dataclasses.replace(s, shape=shape) for s in select(run.rows, want, path.name, _not_applicable(meta))]
        if not sels:
            raise UsageError(f"{path} has no measured native:<alg> variants to choose from; run e.g. "
                             "ccbench launch -n 4 -C allreduce -a native,native:all")
        selections += sels
        sources.append(TuningSource(path.name, str(path), meta.get("mpi_library"), meta.get("nranks"),
                                    meta.get("start_time"), None if shape is None else str(shape)))
    return TuningChoice(fmt, want, EXTENSIONS[fmt], tuple(selections), tuple(sources),
                        tuple(_shape_notes(selections, want)))


def _shape_notes(selections: list[Selection], library: str) -> list[str]:
    """Refuse two runs of one collective at one shape (or, for Open MPI, whose rules know only the communicator's
    size, at one rank count); say where a choice will hold at shapes it was not measured on."""
    per_count = defaultdict(list)
    for s in selections:
        per_count[(s.collective, s.nranks)].append(s)
    notes = []
    for (coll, P), sels in per_count.items():
        shapes = [s.shape for s in sels]
        if len(sels) > 1 and (library == "openmpi" or None in shapes):
            why = (f" ({', '.join(map(str, shapes))}: Open MPI's rules are keyed on the communicator's size alone)"
                   if None not in shapes else "")
            raise UsageError(f"two runs measure {coll} at {P} ranks; give one run per rank count{why}")
        if len(set(shapes)) < len(shapes):
            raise UsageError(f"two runs measure {coll} at {P} ranks on {shapes[0]}; give one run per shape")
        if library == "openmpi" and shapes[0] is not None and shapes[0].nodes > 1:
            notes.append(f"{coll} at {P} ranks was measured on {shapes[0]}; Open MPI's rules cannot ask the shape, "
                         f"so they apply at {P} ranks on any nodes")
    if library == "mpich" and any(s.shape is not None for s in selections):
        notes.append("each choice is keyed on the shape it was measured on (MPICH's comm_avg_ppn and "
                     "is_node_consecutive); at every other shape the library keeps its default")
    return notes


def tuning_file(choice: TuningChoice, default: tuple[dict, str] | None = None) -> TuningFile:
    """The `TuningFile` of a `TuningChoice`: its text, and whether its sources go beside it (nothing is written).

    `default` is MPICH's default selection tree and its library's version (for ``mpich-json``:
    collectives not tuned keep it, since MPICH reads the file as its whole tree).
    """
    fmt, selections, sources, notes = choice.format, choice.selections, choice.sources, list(choice.notes)
    defaults_from = None
    src = ", ".join(f"run {s.run} ({s.mpi_library}, {s.nranks} ranks, {s.start_time})" for s in sources)
    if fmt == "mpich-json":
        if default is None:
            raise CCBenchError("an MPICH tuning file needs MPICH's default selection tree")
        tree, version = default
        if version != sources[0].mpi_library:
            notes.append(f"the default subtrees come from {version!r}, the run used {sources[0].mpi_library!r}")
        # plain JSON (no comment: every JSON tool reads it as it is); where it came from goes beside it
        text = json.dumps(mpich_json(selections, tree), indent=1) + "\n"
        defaults_from = " ".join(version.split())  # what the collectives not tuned keep
    elif fmt == "openmpi-rules":
        text = openmpi_rules(selections, src)
    else:
        text = json.dumps(openmpi_json(selections), indent=2) + "\n"
        notes.append("Open MPI reads JSON rules from 6.0 on; the 5.0.x series reads only the classic "
                     "format (--format openmpi-rules)")
    return TuningFile(dataclasses.replace(choice, notes=tuple(notes)), text, fmt in ("openmpi-json", "mpich-json"),
                      defaults_from)


def verdict(comparison: LaunchComparison | None, q: float | None, changed: bool, level: float = LEVEL) -> str:
    """How the default selection's time moved with the file at one size, from the launch-level comparison.

    `comparison`: with the file (b) against without (a), `paired_compare` of alternating
    launches; `q`: its p-value adjusted over the sizes of the verification
    (Benjamini-Hochberg); `changed`: the file names another algorithm than the default there.
    "worse": significantly slower with the file; "moved": significantly faster and the file
    changed the selection; "already best": the file keeps the default (or the default was
    the best) and no significant change; "did not move": the file changes the selection and
    no significant change; "faster, same selection": significantly faster although the file
    keeps the default (what the file cannot cause: look at drift between the launches);
    "undetermined": fewer than two pairs of launches; "not measured": no row on a side.
    (`verify` says "wrong results" instead where the library computed wrong elements with the file.)
    """
    if comparison is None:
        return "not measured"
    if q is None or not math.isfinite(q) or comparison.method == "too few launches":
        return "undetermined"
    if q < level:
        if comparison.ratio > 1:
            return "worse"
        return "moved" if changed else "faster, same selection"
    return "did not move" if changed else "already best"


@dataclass(frozen=True)
class SizeDecision:
    """How one verified size was decided (`decide_sizes`): `comparison`, with the file against without
    (`paired_compare`; None: a side not measured), `q` its p adjusted over the sizes (None: not tested), and
    the `verdict`."""

    comparison: LaunchComparison | None
    q: float | None
    verdict: str


def decide_sizes(pairs, level: float = LEVEL) -> list[SizeDecision]:
    """Per size of one verification: `paired_compare`, Benjamini-Hochberg over the sizes, `verdict`.

    `pairs`: [(launches without the file, launches with it, changed)], the i-th launch of a
    side paired with the i-th of the other (adjacent in time: A B A B ...), or None for a
    side not measured.  The family of the adjustment is every size compared (Benjamini &
    Hochberg 1995): at 12 sizes and level 0.05, unadjusted tests would call some size
    different in about one verification in two (1 - 0.95^12 = 0.46) when nothing changed.
    Returns a `SizeDecision` per pair, in the order of `pairs`.
    """
    comps = [None if a is None or b is None else paired_compare(a, b, level) for a, b, _ in pairs]
    tested = [i for i, c in enumerate(comps) if c is not None and math.isfinite(c.p_value)]
    qs: list[float | None] = [None] * len(comps)
    for i, q in zip(tested, benjamini_hochberg([comps[i].p_value for i in tested]), strict=True):
        qs[i] = float(q)
    return [SizeDecision(c, q, verdict(c, q, changed, level))
            for c, q, (_, _, changed) in zip(comps, qs, pairs, strict=True)]


#: Sweep settings of the source run that the verification's launches repeat (config key, `ccbench run` flag).
CARRIED = (("warmup", "--warmup"), ("min_reps", "--min-reps"), ("max_reps", "--max-reps"),
            ("target_rse", "--target-rse"), ("budget_s", "--budget"), ("sync", "--sync"),
            ("thread_level", "--thread-level"), ("watchdog_s", "--watchdog"))


def _major_version(library: str) -> float:
    """The major version of a library string ("Open MPI v5.0.3, package: ..." -> 5): its first "N.M"
    not inside another number; infinity when it names none (nothing is refused on a guess)."""
    m = re.search(r"(?<![\w.])v?(\d+)\.\d", library)
    return int(m.group(1)) if m else math.inf


def file_env(doc: TuningFile) -> dict:
    """The environment that makes the library read the written tuning file."""
    path = str(Path(doc.path).resolve())
    if doc.choice.format == "mpich-json":
        return {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": path}
    libs = [s.mpi_library or "" for s in doc.choice.sources]
    if doc.choice.format == "openmpi-json" and any(_major_version(s) < 6 for s in libs):
        raise UsageError(f"cannot verify a JSON rules file with {libs[0]!r}: Open MPI reads JSON rules from "
                         "6.0 on; use --format openmpi-rules")
    return {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": path}


def _pairs(without, with_file) -> tuple[list[np.ndarray], list[np.ndarray]] | tuple[None, None]:
    """The two rows' launches of the same launch numbers (pair k: launch k of each side), or (None, None)."""
    if without is None or with_file is None:
        return None, None
    a, b = dict(without.launch_blocks()), dict(with_file.launch_blocks())
    common = sorted(set(a) & set(b))
    xa = [np.asarray(a[k], dtype=np.float64) for k in common]
    xb = [np.asarray(b[k], dtype=np.float64) for k in common]
    if not common or any(x.size == 0 or np.any(x <= 0) for x in xa + xb):
        return None, None
    return xa, xb


def check_verify_launches(verify: bool, launches: int | None) -> int:
    """The launches a side of a verification: `DEFAULT_VERIFY_LAUNCHES` when not given; fewer than 3 refused.

    Launches of one case differ by 15-75%, so one or two pairs cannot tell the file's effect
    from theirs (with 2 pairs a paired t has 1 degree of freedom and needs |t| > 12.7 at 0.05).
    """
    if launches is None:
        return DEFAULT_VERIFY_LAUNCHES
    if not verify:
        raise UsageError("--verify-launches is the number of launches of --verify: give --verify too")
    if launches < 3:
        raise UsageError(f"--verify-launches {launches}: a verification needs 3 or more pairs of launches "
                         "(launches differ by 15-75%; fewer cannot tell the file's effect from theirs)")
    if launches > MAX_LAUNCHES:
        raise UsageError(f"--verify-launches {launches}: at most {MAX_LAUNCHES}")
    return launches


def _json_safe(v):
    """NaN and infinity as null (JSON has neither)."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def pool_side(runs: list[tuple[int, list]]) -> dict:
    """One side's launches (launch number, rows) pooled per case (`ccbench.store.launches.pool_rows`), keyed by
    (collective, nbytes, dtype, op); only the library's default selection out of place at root 0 is kept."""
    rows = []
    for k, rs in runs:
        for r in rs:
            if r.algorithm == DEFAULT and not r.in_place and r.root == 0:
                rows.append((k, dataclasses.replace(r, launches=(), launch_samples=()) if r.launches else r))
    pooled = pool_rows(rows, lambda r: (r.collective, r.nbytes, r.dtype, r.op))
    return {(r.collective, r.nbytes, r.dtype, r.op): r for r in pooled}


@dataclass(frozen=True)
class VerificationRow:
    """One verified size: the file's choice against what the launches without and with it measured.

    `file_choice`: what the file names (`changed`: not the default); `default_before_s`, `best`, `best_s`: the
    source run's default and fastest candidate there; `without_s`, `with_file_s`: each side's pooled typical
    time (None: not measured); `ratio` (with / without) and its interval, `p_value`, `q_value` (adjusted over
    the sizes) and `pairs` from `decide_sizes` (non-finite numbers as None); `verdict` (`VERDICTS`);
    `verify_dir`: the verification folder whose launches measured it.
    """

    collective: str
    nranks: int
    nbytes: int
    dtype: str
    op: str
    file_choice: str
    changed: bool
    default_before_s: float | None
    best: str
    best_s: float | None
    without_s: float | None
    with_file_s: float | None
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    p_value: float | None
    q_value: float | None
    pairs: int
    verdict: str
    verify_dir: str

    def to_dict(self) -> dict:
        """The row as ``verification.json`` holds it."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class VerificationLaunch:
    """One launch of a verification: its number, the run it stored (None: none) and the job's exit code."""

    launch: int
    run: str | None
    exit_code: int

    def to_dict(self) -> dict:
        return {"launch": self.launch, "run": self.run, "exit_code": self.exit_code}


@dataclass(frozen=True)
class VerificationRun:
    """The launches that verified the choices of one source run, in the folder `dir`.

    `without`, `with_file`: the launches of each side, by launch number (``"without"`` and ``"with"`` in
    ``verification.json``); `shape_note`: where the launches ran at another shape than the choices were
    measured on, what that means (None otherwise, and then absent from the JSON).
    """

    source: str
    dir: str
    without: tuple[VerificationLaunch, ...]
    with_file: tuple[VerificationLaunch, ...]
    shape_note: str | None = None

    def to_dict(self) -> dict:
        d = {"source": self.source, "dir": self.dir, "without": [x.to_dict() for x in self.without],
             "with": [x.to_dict() for x in self.with_file]}
        if self.shape_note is not None:
            d["shape_note"] = self.shape_note
        return d


@dataclass(frozen=True)
class Verification:
    """A tuning file's verification (``ccbench.workflow.tune.verify``); ``to_dict()`` is ``verification.json``.

    `tuning_file`: the file verified, of `format`; `launches` a side in `order` (``Lkk-without``,
    ``Lkk-with``, ...) with `seed`; `level`: of the tests; `runs`: per source run its launches; `rows`: per
    verified size the verdict; `records`: the ``verification.json`` files written (not in the JSON itself).
    """

    tuning_file: str
    format: str
    launches: int
    seed: int
    order: tuple[str, ...]
    level: float
    runs: tuple[VerificationRun, ...]
    rows: tuple[VerificationRow, ...]
    records: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """``verification.json``: everything but `records`."""
        return {"tuning_file": self.tuning_file, "format": self.format, "launches": self.launches,
                "seed": self.seed, "order": list(self.order), "level": self.level,
                "runs": [r.to_dict() for r in self.runs], "rows": [r.to_dict() for r in self.rows]}


def verification_rows(items: list[tuple], where: list[str]) -> list[VerificationRow]:
    """Per verified size, the file's choice against what the launches without and with it measured.

    `items`: (selection, size choice, pooled row without, pooled row with) per size; `where`: the
    verification folder of each item.  Sizes are decided together (`decide_sizes`).
    """
    decided = decide_sizes([(*_pairs(a, b), c.winner != DEFAULT) for _, c, a, b in items])
    rows = []
    for (s, c, a, b), d, folder in zip(items, decided, where, strict=True):
        cmp = d.comparison
        rows.append(VerificationRow(
            collective=s.collective, nranks=s.nranks, nbytes=c.nbytes, dtype=s.dtype, op=s.op, file_choice=c.winner,
            changed=c.winner != DEFAULT, default_before_s=c.default_s, best=c.fastest,
            best_s=c.times_s.get(c.fastest), without_s=a.median_s if a else None,
            with_file_s=b.median_s if b else None, ratio=cmp.ratio if cmp else None,
            ratio_low=_json_safe(cmp.ratio_low) if cmp else None,
            ratio_high=_json_safe(cmp.ratio_high) if cmp else None,
            p_value=_json_safe(cmp.p_value) if cmp else None, q_value=d.q, pairs=cmp.n_launches_a if cmp else 0,
            verdict="wrong results" if b is not None and not b.ok else d.verdict, verify_dir=folder))
    return rows
