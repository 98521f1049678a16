"""Tuning files for the MPI library, chosen from measured ``native:<alg>`` variants.

`select` picks, per collective, rank count and measured size, the fastest variant the
library can be told to use; `size_ranges` turns the per-size winners into size ranges,
putting each boundary at the crossover: interpolated linearly in log size and log time
between the two measured sizes that bracket it, or, where those are more than a factor
of two apart (a coarse sweep, reported as such), where the two curves' alpha-beta fits
(`ccbench.analysis.fit`) cross inside the bracket.  Three writers
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
  file starts with a ``/* ... */`` comment naming the run (json-c, MPICH's parser,
  accepts comments; read it back with `read_json_with_comment`).
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

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

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
from ccbench.core.units import format_size
from ccbench.measure.library import mpich_default_tree

__all__ = ["FORMATS", "Range", "Selection", "SizeChoice", "crossover_nbytes", "model_crossover_nbytes",
           "mpich_json", "openmpi_json", "openmpi_rules", "read_json_with_comment", "select", "size_ranges",
           "tune_runs", "verdict"]

FORMATS = {"mpich-json": "mpich", "openmpi-rules": "openmpi", "openmpi-json": "openmpi"}
DEFAULT = "native"  # the library's own selection: a range won by it keeps the library's default
COARSE_FACTOR = 2.0  # a crossover bracketed by sizes further apart than this is "coarse"
NOISE = 0.10         # verify: within 10% of a time counts as "at" it
# MPICH csel collective names and the message-size key of each (csel.c get_avg_msgsize /
# get_total_msgsize); gather and scatter have one intra algorithm in MPICH: nothing to tune
_MPICH_COLL = {"allreduce": ("allreduce", "avg_msg_size"), "bcast": ("bcast", "avg_msg_size"),
               "reduce": ("reduce", "avg_msg_size"), "alltoall": ("alltoall", "avg_msg_size"),
               "allgather": ("allgather", "total_msg_size"),
               "reduce_scatter": ("reduce_scatter_block", "total_msg_size"), "barrier": ("barrier", None)}


@dataclass(frozen=True)
class SizeChoice:
    """The variants measured at one size, the fastest, and the library's default there."""

    nbytes: int
    winner: str
    winner_s: float
    runner_up: str | None
    runner_up_s: float | None
    default_s: float | None      # the library's own choice (`native`) at this size, if measured
    within_noise: bool           # the winner's 95% CI overlaps the runner-up's
    fastest_any: str             # the fastest of all variants (it may be one a file cannot name)
    times_s: dict[str, float] = field(default_factory=dict)


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


def _writable(library: str, collective: str, algorithm: str) -> bool:
    """Whether a tuning file of `library` can name this variant."""
    name = algorithm.split(":", 1)[1]
    if library == "mpich":
        fn = dict(MPICH.get(collective, ("", []))[1]).get(name)
        return fn is not None and fn not in MPICH_UNWRITABLE and collective in _MPICH_COLL
    return name in {n for _, n in OPENMPI.get(collective, ("", []))[1]}


def select(rows, library: str, run: str = "", not_applicable=()) -> list[Selection]:
    """Per collective and rank count: the fastest writable variant at every measured size.

    Only correct rows count, out of place, root 0, of the dtype/op measured most often
    for that collective's variants.  `not_applicable` holds (collective, algorithm, nranks,
    nbytes) of cases the library refused.
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
        for nbytes in sorted(by_size):
            # the library's own choice is a candidate too: where it is fastest, the file keeps it
            cands = {a: r for a, r in by_size[nbytes].items() if is_variant(a) or a == DEFAULT}
            ok = {a: r for a, r in cands.items() if a == DEFAULT or _writable(library, coll, a)}
            if not ok:
                continue
            order = sorted(ok, key=lambda a: ok[a].median_s)
            w = ok[order[0]]
            ru = ok[order[1]] if len(order) > 1 else None
            default = by_size[nbytes].get("native")
            sel.choices.append(SizeChoice(
                nbytes, order[0], w.median_s, order[1] if ru else None, ru.median_s if ru else None,
                default.median_s if default else None,
                bool(ru is not None and w.ci_high_s >= ru.ci_low_s),
                min(cands, key=lambda a: cands[a].median_s),
                {a: r.median_s for a, r in cands.items()}))
        if not sel.choices:
            continue
        refused = {(a, n) for c, a, p, n in not_applicable if c == coll and p == P}
        sel.ranges, more = size_ranges(sel.choices, refused, _curve_fits(rs))
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
    noisy = [format_size(c.nbytes) for c in choices if c.within_noise]
    if noisy:
        notes.append("winner within the runner-up's 95% CI (a toss-up) at " + ", ".join(noisy))
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
        for s in sorted(sels, key=lambda s: s.nranks):
            if s.nranks - 1 > below:
                sizes[f"comm_size<={s.nranks - 1}"] = default
            sizes[f"comm_size<={s.nranks}"] = _mpich_sizes(s, key, default)
            below = s.nranks
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


def tune_runs(runs, fmt: str, output: str | None = None, results_dir="results") -> dict:
    """Choose from the runs' variants, write the tuning file (never over an existing one).

    Returns {"path", "format", "library", "selections", "sources", "notes", "text"}.
    """
    from ccbench.store.results import resolve_run
    from ccbench.store.run import load_run

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    want = FORMATS[fmt]
    selections, sources, notes = [], [], []
    for run in runs:
        path = resolve_run(run, results_dir)
        meta, rows, _ = load_run(path)
        lib = library_of_vendor(str(meta.get("mpi_vendor", "")))
        if lib != want:
            raise UsageError(f"{path} was measured with {meta.get('mpi_library', '?')!r}; {fmt} is for "
                             f"{LIBRARIES[want]}")
        sels = select(rows, want, path.name, _not_applicable(meta))
        if not sels:
            raise UsageError(f"{path} has no measured native:<alg> variants to choose from; run e.g. "
                             "ccbench launch -n 4 -C allreduce -a native,native:all")
        selections += sels
        sources.append({"run": path.name, "path": str(path), "mpi_library": meta.get("mpi_library"),
                        "nranks": meta.get("nranks"), "start_time": meta.get("start_time")})
    seen = Counter((s.collective, s.nranks) for s in selections)
    dup = [k for k, v in seen.items() if v > 1]
    if dup:
        raise UsageError(f"two runs measure {dup[0][0]} at {dup[0][1]} ranks; give one run per rank count")
    src = ", ".join(f"run {s['run']} ({s['mpi_library']}, {s['nranks']} ranks, {s['start_time']})" for s in sources)
    first = Path(sources[0]["path"])
    ext = {"mpich-json": "mpich.json", "openmpi-rules": "openmpi-rules.txt", "openmpi-json": "openmpi.json"}[fmt]
    out = Path(output) if output else first / f"tuning.{ext}"
    side = out.with_name(out.name + ".source.json") if fmt == "openmpi-json" else None
    for p in (out, side):
        if p is not None and p.exists():
            raise UsageError(f"{p} exists; tuning files are never overwritten: give another -o FILE")
    if fmt == "mpich-json":
        default, version = mpich_default_tree()
        if version != sources[0]["mpi_library"]:
            notes.append(f"the default subtrees come from {version!r}, the run used {sources[0]['mpi_library']!r}")
        text = (f"/* MPICH collective selection (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE) written by ccbench "
                f"tune from {src}; collectives not tuned keep {version}'s defaults */\n"
                + json.dumps(mpich_json(selections, default), indent=1) + "\n")
    elif fmt == "openmpi-rules":
        text = openmpi_rules(selections, src)
    else:
        text = json.dumps(openmpi_json(selections), indent=2) + "\n"
        notes.append("Open MPI reads JSON rules from 6.0 on; the 5.0.x series reads only the classic "
                     "format (--format openmpi-rules)")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "x") as f:
            f.write(text)
        if side is not None:
            with open(side, "x") as f:
                json.dump({"tuning_file": out.name, "format": fmt, "sources": sources}, f, indent=2)
                f.write("\n")
    except FileExistsError:
        raise UsageError(f"{out} exists; tuning files are never overwritten: give another -o FILE") from None
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
    return {"path": str(out), "format": fmt, "library": want, "selections": selections, "sources": sources,
            "notes": notes, "text": text}


def verdict(before_s: float | None, best_s: float, after_s: float | None) -> str:
    """How the default selection's time moved with the file, for one size.

    Times within NOISE (10%) of each other count as equal.  "already best": the default
    was at the best time before and is with the file; "moved": with the file it is at the
    best time, or closer to it than to the default's time before (in log time); "worse":
    with the file it is slower than before; "faster than measured before": faster than both
    (launch-to-launch variation, or a file better than any single variant); otherwise
    "did not move".
    """
    if after_s is None:
        return "not measured"
    tol = math.log1p(NOISE)
    at_best = abs(math.log(after_s / best_s)) <= tol
    if before_s is not None and abs(math.log(before_s / best_s)) <= tol and at_best:
        return "already best"
    if at_best:
        return "moved"
    if math.log(best_s / after_s) > tol and (before_s is None or math.log(before_s / after_s) > tol):
        return "faster than measured before"  # launch-to-launch variation, or a better choice
    if before_s is not None and math.log(after_s / before_s) > tol:
        return "worse"
    if before_s is not None and abs(math.log(after_s / best_s)) < abs(math.log(after_s / before_s)):
        return "moved"
    return "did not move"


def verify(doc: dict, results_dir: str | Path | None = None, say=print) -> list[dict]:
    """Relaunch each source run's sweep of `native` with the tuning file; compare per size.

    The library's default selection (`native`) is measured again at the same rank count,
    sizes, dtype, op and timing settings, with the file set the way the library reads it
    (MPICH: MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE; Open MPI:
    coll_tuned_use_dynamic_rules + coll_tuned_dynamic_rules_filename).  Returns one row
    per collective, rank count and size: the default's time before, the best variant's,
    the default's with the file, and the `verdict`.
    """
    import sys

    from ccbench.measure.launcher import prepare_launcher, run_job
    from ccbench.store.run import load_run

    path = str(Path(doc["path"]).resolve())
    if doc["format"] == "mpich-json":
        env = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": path}
    else:
        libs = [s["mpi_library"] or "" for s in doc["sources"]]
        if doc["format"] == "openmpi-json" and any(re.search(r"v?[1-5]\.\d", s) for s in libs):
            raise UsageError(f"cannot verify a JSON rules file with {libs[0]!r}: Open MPI reads JSON rules from "
                             "6.0 on; use --format openmpi-rules")
        env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": path}
    exe, _, launch_env, extra = prepare_launcher(None)
    out = []
    for src in doc["sources"]:
        sels = [s for s in doc["selections"] if s.run == src["run"]]
        meta, before_rows, _ = load_run(src["path"])
        cfg = meta.get("config", {})
        root = Path(results_dir) if results_dir else Path(src["path"]).parent
        tag = f"verify-{doc['format']}"
        sizes = sorted({c.nbytes for s in sels for c in s.choices})
        cmd = [exe, "-n", str(src["nranks"]), *extra, sys.executable, "-m", "mpi4py", "-m", "ccbench", "run",
               "-C", ",".join(dict.fromkeys(s.collective for s in sels)), "-a", "native",
               "-s", ",".join(map(str, sizes)), "-t", ",".join(dict.fromkeys(s.dtype for s in sels)),
               "--op", ",".join(dict.fromkeys(s.op for s in sels if s.op != "none")) or "sum",
               "--results-dir", str(root), "--tag", tag, "--no-show"]
        for key, flag in (("warmup", "--warmup"), ("min_reps", "--min-reps"), ("max_reps", "--max-reps"),
                          ("target_rse", "--target-rse"), ("budget_s", "--budget"), ("sync", "--sync"),
                          ("thread_level", "--thread-level")):
            if key in cfg:
                cmd += [flag, str(cfg[key])]
        say(f"verify: {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd)}")
        job = run_job(cmd, {**launch_env, **env})  # signals forwarded, a dead job's run marked failed
        if job.code or job.run_dir is None:
            raise CCBenchError(f"the verification launch failed ({job.why})"
                               + (f"; its run is {job.run_dir}" if job.run_dir else ""))
        made = [job.run_dir]
        _, after_rows, _ = load_run(job.run_dir)
        after = {(a.collective, a.nbytes): a.median_s for a in after_rows
                 if a.algorithm == "native" and not a.in_place and a.root == 0}
        for s in sels:
            for c in s.choices:
                t = after.get((s.collective, c.nbytes))
                out.append({"collective": s.collective, "nranks": s.nranks, "nbytes": c.nbytes,
                            "default_before_s": c.default_s, "best": c.winner, "best_s": c.winner_s,
                            "with_file_s": t, "verdict": verdict(c.default_s, c.winner_s, t),
                            "verify_run": str(made[-1])})
    return out
