"""The analyses behind ``ccbench fit`` and ``ccbench predict`` (pure: no MPI import).

`fit_run` fits every curve of a stored run, the network parameters three ways (ping-pong
plus the local reduction benchmark, jointly over the hand-written algorithms' counted
traffic, and effective per path from the collectives themselves), checks every modelled
case -- the library's own algorithms as their textbook equivalents -- against its
prediction and says who wins where; it writes ``fits.json`` and ``fits.csv`` beside the run, never into its files and
never over an earlier analysis.  `predict_table` evaluates every modelled algorithm at
rank counts and sizes from given or fitted parameters.  The maths lives in
`ccbench.analysis.fit` and `ccbench.analysis.predict`; this module only assembles it.
"""

import csv
import io
import json
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ccbench.algorithms.native_variants import library_of_vendor
from ccbench.analysis.fit import (
    CONFIDENCE,
    N_BOOT,
    SEED,
    CurveFit,
    NetworkParams,
    ParamComparison,
    PathParams,
    compare_params,
    fit_curves,
    fit_joint,
    gamma_per_path,
    network_from_microbenchmarks,
    reduction_gammas,
    reduction_records,
)
from ccbench.analysis.predict import (
    TOLERANCE,
    ModelCheck,
    TwoLevelParams,
    WhoWins,
    compare_to_measured,
    effective_params,
    estimate_step_overhead,
    model_registry,
    predicted_winners,
    prediction_table,
    ranks_per_node_for,
    who_wins,
)
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import check_ranks, parse_counts
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.records import Record
from ccbench.core.units import parse_inverse_rate, parse_time
from ccbench.core.version import __version__
from ccbench.store.run import SWEEP, Run

__all__ = [
    "FITS_SCHEMA",
    "ParamChoice",
    "PredictionGrid",
    "CheckSummary",
    "HarnessFloor",
    "NativePricing",
    "NetworkFits",
    "ParamChecks",
    "RunFit",
    "StepOverhead",
    "PARAM_SETS",
    "TWO_LEVEL_LEADERS",
    "check_summary",
    "fit_files",
    "fit_run",
    "param_sets",
    "params_from_run",
    "predict_table",
    "run_models",
]

#: The parameter sets a prediction from a run can use (``--params``); "auto" picks one.
PARAM_SETS = ("pingpong", "joint", "effective")
#: Sizes from which the model checks are summarised apart: where bandwidth and reduction dominate.
LARGE_BYTES = 256 * 1024

FITS_SCHEMA = "ccbench.fits/1"
#: Allreduce algorithms used as the leaders' step of the two-level model (the registry's
#: own "hierarchical" allreduce is excluded: it is itself two-level).
TWO_LEVEL_LEADERS = ("ring", "rabenseifner")
#: Provenance of the source run repeated in fits.json (pyperf-style metadata, once).
_PROVENANCE_KEYS = ("ccbench", "git_commit", "mpi_library", "nranks", "nodes", "ranks_per_node",
                    "hosts", "cores_per_node", "oversubscribed", "thread_level", "platform",
                    "cpu", "argv", "start_time", "end_time", "status", "lab")
CSV_COLUMNS = ("collective", "algorithm", "nranks", "dtype", "op", "in_place", "root", "model",
               "segment", "n_segments", "nbytes_lo", "nbytes_hi", "alpha_s", "alpha_ci_low_s",
               "alpha_ci_high_s", "beta_s_per_byte", "beta_ci_low_s_per_byte",
               "beta_ci_high_s_per_byte", "bandwidth_gbs", "r2", "max_rel_residual", "flags")


# --------------------------------------------------------------------------- parsing









# --------------------------------------------------------------------------- fit a run



def _reduction_choice(rows: list[dict], records: list[Mapping]) -> tuple[str | None, str | None]:
    """The (dtype, op) of gamma: the only one measured, else the one most reduced in the run."""
    combos = {(r.get("dtype"), r.get("op")) for r in records}
    if len(combos) <= 1:
        return (None, None)
    used = Counter((r["dtype"], r["op"]) for r in rows
                   if r.get("reduced_bytes_max") and (r["dtype"], r["op"]) in combos)
    return used.most_common(1)[0][0] if used else sorted(combos, key=str)[0]


def _ranks_per_node(meta: Mapping) -> int | None:
    rpn = meta.get("ranks_per_node")
    return int(rpn) if isinstance(rpn, int) and rpn > 0 else None


def _gammas(rows: list[dict], meta: Mapping, **kw) -> dict:
    """The gamma fields of every path and temperature (``fit.reduction_gammas``) for the run's reduction."""
    allrecs = list(meta.get("reduce_local") or [])
    dtype, op = _reduction_choice(rows, reduction_records(allrecs))
    return reduction_gammas(allrecs, dtype=dtype, op=op, ranks_per_node=_ranks_per_node(meta), **kw)


def _network(rows: list[dict], meta: Mapping, notes: list[str], **kw) -> NetworkParams | None:
    """Ping-pong (+ reduce_local) parameters, or None with a note when there is no ping-pong.

    gamma is numpy's warm one (what the hand-written algorithms pay in cache); the library's
    (MPI_Reduce_local, what native collectives pay) and the cold rates ride along
    (``NetworkParams.gamma_for`` picks by path and size).
    """
    pp = [r for r in rows if r["collective"] == "pingpong"]
    if not pp:
        notes.append("no ping-pong rows: network parameters from ping-pong skipped "
                     "(run the pingpong collective to get them)")
        return None
    recs = reduction_records(meta.get("reduce_local") or [])
    dtype, op = _reduction_choice(rows, recs)
    net = network_from_microbenchmarks(pp, recs, dtype=dtype, op=op, **kw)
    g = _gammas(rows, meta, **kw)
    return replace(net, **{k: v for k, v in g.items() if k not in ("gamma_s_per_byte", "notes")},
                   notes=net.notes + g["notes"])


def _selection_tree(library: str | None, meta: Mapping, notes: list[str]) -> dict | None:
    """MPICH's selection tree of the run's library, as the run stored it; None with a note when it stored none.

    Sweeps store the tree of the MPICH they ran on (``mpich_selection`` in run.json:
    ``{"version", "tree"}``), so a fit anywhere prices unforced ``native`` as that library
    chose.  A run made before that is not priced from the installed library's tree: it may
    not be the run's, and reading a run must not load an MPI library.
    """
    if library != "mpich":
        return None
    stored = meta.get("mpich_selection")
    if isinstance(stored, Mapping) and isinstance(stored.get("tree"), Mapping):
        return dict(stored["tree"])
    notes.append("unforced native not modelled: the run stored no MPICH selection tree (it was made before "
                 "ccbench recorded one)")
    return None


def run_models(rows: list[dict], meta: Mapping, notes: list[str]) -> tuple[dict, dict[str, str]]:
    """The algorithms to price a run's rows with (``predict.model_registry``): hand-written and native.

    The native ones are those the run measured, as their textbook algorithms for the run's MPI
    library; its unforced ``native`` as MPICH's selection tree picks (the installed library's,
    when it is the run's).  The second value says why a measured native algorithm is not modelled.
    """
    library = library_of_vendor(str(meta.get("mpi_vendor") or meta.get("mpi_library") or ""))
    measured = {(r["collective"], r["algorithm"]) for r in rows}
    tree = (_selection_tree(library, meta, notes)
            if any(a == "native" and c != "pingpong" for c, a in measured) else None)
    return model_registry(library, selection_tree=tree, ranks_per_node=_ranks_per_node(meta), measured=measured)


def param_sets(rows: list[dict], meta: Mapping, notes: list[str], *, models=None, **kw) -> tuple[dict, str, str]:
    """({name: parameters} of every set the run supports, the set "auto" picks, why).

    ``pingpong``: ping-pong alpha and beta, the measured gamma per path; ``joint``: alpha,
    beta and gamma fitted over the hand-written rows' counted traffic (``fit.fit_joint``), the
    library's measured gamma for native rows; ``effective``: alpha and beta per path fitted from
    the collectives of that path at the measured gammas (``predict.effective_params``).  auto:
    effective, else joint, else ping-pong -- the parameters fitted to the collectives
    themselves where the run has the rows that identify them.
    """
    sets: dict = {}
    pingpong = _network(rows, meta, notes, **kw)
    if pingpong is not None:
        sets["pingpong"] = pingpong
    gam = _gammas(rows, meta, **kw)
    lib = {k: v for k, v in gam.items() if k.startswith("library_") or k == "cold_above_bytes"}
    coll_rows = [r for r in rows if r["collective"] != "pingpong"]
    try:
        sets["joint"] = replace(fit_joint(coll_rows, **kw), **lib)
    except CCBenchError as exc:
        notes.append(f"joint fit skipped: {exc}")
    base = pingpong or NetworkParams(None, None, **{k: v for k, v in gam.items() if k != "notes"})
    if models is None:
        models, _ = run_models(rows, meta, notes)
    reduces = any(r.get("op") not in (None, "none") and r["collective"] in ("allreduce", "reduce", "reduce_scatter")
                  for r in coll_rows)
    if reduces and base.gamma_s_per_byte is None:
        notes.append("effective fit skipped: the run reduces but has no local reduction timings (gamma)")
    else:
        try:
            ppn = _ranks_per_node(meta) if (meta.get("nodes") or 1) > 1 else None
            sets["effective"] = effective_params(coll_rows, base, algorithms=models, ranks_per_node=ppn, **kw)
        except CCBenchError as exc:
            notes.append(f"effective fit skipped: {exc}")
    if "effective" in sets:
        why = ("effective: alpha and beta fitted per path to the run's own collectives, gamma measured per path")
        return sets, "effective", why
    if "joint" in sets:
        return sets, "joint", "joint: the run has no rows to fit effective parameters to, but counted traffic"
    if "pingpong" in sets:
        return sets, "pingpong", "ping-pong: the run has no collective rows to fit parameters to"
    return sets, "", "no parameters: the run has neither ping-pong nor modelled collective rows"


@dataclass(frozen=True)
class CheckSummary(Record):
    """The model checks of one collective and kind (native or hand-written) under one parameter set.

    ``median_ratio`` and ``worst_ratio`` (the ratio farthest from 1 on a log scale) of measured /
    predicted over every case, and the same over the cases of ``large_bytes`` or more.
    """

    collective: str
    kind: str
    cases: int
    off: int
    median_ratio: float | None
    worst_ratio: float | None
    large_bytes: int
    large_cases: int
    median_ratio_large: float | None
    worst_ratio_large: float | None


@dataclass(frozen=True)
class ParamChecks(Record):
    """The model checks under one parameter set: the summary per collective and kind, and the cases off."""

    summary: tuple[CheckSummary, ...]
    off: tuple[ModelCheck, ...]


def check_summary(checks: Iterable[ModelCheck], large_bytes: int = LARGE_BYTES) -> list[CheckSummary]:
    """Per collective and path: cases, cases off, median and worst measured/predicted, overall and >= large_bytes."""
    groups: dict[tuple, list[ModelCheck]] = {}
    for c in checks:
        groups.setdefault((c.collective, "native" if c.path == "mpi" else "hand-written"), []).append(c)

    def stats(sel):
        r = [c.ratio for c in sel if c.ratio is not None and math.isfinite(c.ratio) and c.ratio > 0]
        if not r:
            return None, None
        return float(np.median(r)), float(max(r, key=lambda v: abs(math.log(v))))

    out = []
    for (coll, kind), cs in groups.items():
        big = [c for c in cs if c.nbytes >= large_bytes]
        out.append(CheckSummary(coll, kind, len(cs), sum(bool(c.off) for c in cs), *stats(cs), large_bytes,
                                len(big), *stats(big)))
    return out


@dataclass(frozen=True)
class HarnessFloor(Record):
    """The run's harness floor: an empty timed call, a zero-count call per collective, and ping-pong's alpha
    without the zero-byte ping-pong (None where the run has no ping-pong)."""

    empty_s: float | None
    zero_count_s: Mapping[str, float]
    alpha_without_floor_s: float | None = None


@dataclass(frozen=True)
class StepOverhead(Record):
    """The software cost per step of the hand-written algorithms beyond alpha (`predict.estimate_step_overhead`)."""

    seconds: float
    cases: int
    max_bytes: int = 1024


def _floor(floor: Mapping | None, pingpong: NetworkParams | None) -> HarnessFloor | None:
    """The run's harness floor and ping-pong's alpha without it (alpha minus a zero-byte ping-pong's one-way time).

    A zero-byte ping-pong through the same loop moves no data, so its time is the cost of the
    path itself (Python, mpi4py, the library's entry); what alpha holds beyond it is the
    latency of the transport.  None for runs made before the floor was measured.
    """
    if not floor:
        return None
    zero = dict(floor.get("zero_count_s") or {})
    rest = None
    if pingpong is not None and pingpong.alpha_s is not None and zero.get("pingpong") is not None:
        rest = pingpong.alpha_s - zero["pingpong"]
    return HarnessFloor(floor.get("empty_s"), zero, rest)


@dataclass(frozen=True)
class PricedAs(Record):
    """One textbook algorithm a native algorithm is priced as (or why not), at its (ranks, bytes) points."""

    text: str
    points: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict:
        return {"as": self.text, "points": [list(p) for p in self.points]}


@dataclass(frozen=True)
class NativePricing(Record):
    """How one measured native algorithm is priced: as which textbook algorithm where, or why not (``reason``)."""

    collective: str
    algorithm: str
    modelled_as: tuple[PricedAs, ...] | None
    reason: str | None


def _native_models(rows: list[dict], models: Mapping, unmodelled: Mapping[str, str]) -> list[NativePricing]:
    """What each measured native algorithm is priced as, at the run's rank counts and sizes (or why not)."""
    out = []
    seen: dict[tuple, set] = {}
    for r in rows:
        if r["collective"] != "pingpong" and (r["algorithm"] == "native" or r["algorithm"].startswith("native:")):
            seen.setdefault((r["collective"], r["algorithm"]), set()).add((int(r["nranks"]), int(r["nbytes"])))
    for (coll, name), points in seen.items():
        alg = models.get(coll, {}).get(name)
        if alg is None:
            out.append(NativePricing(coll, name, None, unmodelled.get(f"{coll}/{name}", "not modelled")))
            continue
        as_ = {}
        for P, n in sorted(points):
            why = alg.unmodelled(P, n)
            as_.setdefault(why or alg.describe(P, n), []).append((P, n))
        reason = None if getattr(alg, "selected", False) else (alg.parts(*sorted(points)[0])[1] or None)
        out.append(NativePricing(coll, name, tuple(PricedAs(k, tuple(v)) for k, v in as_.items()), reason))
    return out


def _csv_rows(curves) -> list[dict]:
    """One CSV row per curve's single line and per segment of its segmented fit."""
    out = []
    for c in curves:
        base = {k: getattr(c, k) for k in ("collective", "algorithm", "nranks", "dtype", "op",
                                           "in_place", "root")}
        parts = [("line", 0, 1, c.line.nbytes_min, c.line.nbytes_max, c.line, c.line.r2,
                  c.line.max_rel_residual, c.line.flags)]
        segs = c.segmented.segments
        parts += [("segment", i + 1, len(segs), s.nbytes_lo, s.nbytes_hi, s, c.segmented.r2,
                   c.segmented.max_rel_residual, c.segmented.flags) for i, s in enumerate(segs)]
        for model, i, k, lo, hi, f, r2, mrr, flags in parts:
            out.append(dict(base, model=model, segment=i, n_segments=k, nbytes_lo=lo,
                            nbytes_hi=hi, alpha_s=f.alpha_s, alpha_ci_low_s=f.alpha_ci_s[0],
                            alpha_ci_high_s=f.alpha_ci_s[1], beta_s_per_byte=f.beta_s_per_byte,
                            beta_ci_low_s_per_byte=f.beta_ci_s_per_byte[0],
                            beta_ci_high_s_per_byte=f.beta_ci_s_per_byte[1],
                            bandwidth_gbs=f.bandwidth_gbs, r2=r2, max_rel_residual=mrr,
                            flags=";".join(flags)))
    return out


@dataclass(frozen=True)
class NetworkFits(Record):
    """The network parameters of a fitted run: every set it supports, how they compare, which one predicts.

    ``pingpong``: ping-pong alpha and beta with the local reduction's gammas; ``joint``: fitted over the
    hand-written rows' counted traffic; ``effective``: per path, fitted to the collectives themselves;
    ``comparison``: joint against ping-pong, parameter by parameter; ``used_for_predictions`` and ``why``:
    the set the model checks and who-wins use (`param_sets`); ``reduction_paths``: gamma per path and
    temperature (`fit.gamma_per_path`); ``harness_floor``; ``step_overhead`` of the hand-written algorithms.
    """

    pingpong: NetworkParams | None
    joint: NetworkParams | None
    effective: PathParams | None
    comparison: tuple[ParamComparison, ...]
    used_for_predictions: str | None
    why: str
    reduction_paths: tuple[dict, ...]
    harness_floor: HarnessFloor | None
    step_overhead: StepOverhead | None

    @property
    def used(self) -> NetworkParams | PathParams | None:
        """The parameter set the predictions use (None: no set could be fitted)."""
        return getattr(self, self.used_for_predictions) if self.used_for_predictions else None


@dataclass(frozen=True)
class RunFit(Record):
    """What ``ccbench fit`` derives from a stored sweep; ``to_dict()`` is the ``fits.json`` document.

    ``curves``: every measured curve's single-line and segmented fit; ``network``: the parameter sets
    (`NetworkFits`); ``native_models``: what each native algorithm is priced as; ``model_checks``: every
    modelled case against its prediction under the set used, ``checks_by_params`` the same summarised
    under every set; ``who_wins``: measured against predicted winners per size; ``lab``: injected
    against fitted link parameters for a run on the emulated lab (None elsewhere).
    """

    schema: str
    source_run: str
    source_path: str
    source_provenance: Mapping
    provenance: Mapping
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    network: NetworkFits
    native_models: tuple[NativePricing, ...]
    curves: tuple[CurveFit, ...]
    model_checks: tuple[ModelCheck, ...]
    checks_by_params: Mapping[str, ParamChecks]
    who_wins: tuple[WhoWins, ...]
    lab: Mapping | None = None

    @property
    def tolerance(self) -> float:
        """The relative tolerance beyond which a model check is off."""
        return self.provenance["tolerance"]

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.lab is None:
            del d["lab"]
        return d


def fit_run(run: Run, *, n_boot: int = N_BOOT, tolerance: float = TOLERANCE) -> RunFit:
    """Fit an open stored run (`ccbench.store.run.open_run`): a `RunFit`, whose ``to_dict()`` ``fits.json`` holds.

    Fits every (collective, algorithm, nranks, dtype, op, in_place, root) curve
    (`ccbench.analysis.fit.fit_curves`), every parameter set the run supports (`param_sets`:
    ping-pong + ``reduce_local``, joint over the hand-written rows' counted traffic, effective
    per path), compares ping-pong with joint, prices hand-written and native algorithms
    (`run_models`) and checks them against the measurements under every set
    (``checks_by_params``: summary and the cases off) -- in full (``model_checks``) and for
    who wins where under the set "auto" picks (``network.used_for_predictions`` and ``why``).
    Writes nothing (`fit_files` gives the files' text; ``ccbench.workflow.fit`` writes them).
    """
    return _fit(run, n_boot=n_boot, tolerance=tolerance)


def fit_files(run: Run, *, n_boot: int = N_BOOT, tolerance: float = TOLERANCE) -> tuple[RunFit, dict[str, str]]:
    """`fit_run`'s result and the text of the files that keep it: {".json": fits.json, ".csv": fits.csv}."""
    fit = _fit(run, n_boot=n_boot, tolerance=tolerance)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
    w.writeheader()
    w.writerows(_csv_rows(fit.curves))
    text = json.dumps(fit.to_dict(), indent=2, allow_nan=False) + "\n"
    return fit, {".json": text, ".csv": buf.getvalue()}


def _fit(run: Run, *, n_boot: int, tolerance: float) -> RunFit:
    if run.kind != SWEEP:
        raise UsageError(f"{str(run.path)!r} is a {run.kind} run, not a {SWEEP} run: use ccbench show or "
                         "ccbench workload")
    path, meta, warnings = run.path, run.meta, run.warnings
    rows = [r.to_dict() for r in run.rows]
    if not rows:
        raise UsageError(f"{str(path)!r} has no finished cases to fit")
    notes: list[str] = []
    kw = {"n_boot": n_boot}
    curves = fit_curves(rows, **kw)
    models, unmodelled = run_models(rows, meta, notes)
    sets, chosen, why = param_sets(rows, meta, notes, models=models, **kw)
    pingpong, joint = sets.get("pingpong"), sets.get("joint")
    # the hierarchical allreduce is priced at the run's ranks per node when it spans nodes
    ppn = meta.get("ranks_per_node") if (meta.get("nodes") or 1) > 1 else None
    overhead = estimate_step_overhead(rows, pingpong, ranks_per_node=ppn) if pingpong is not None else None
    by_params, model_checks = {}, ()
    for name, ps in sets.items():
        checks = compare_to_measured(rows, ps, algorithms=models, tolerance=tolerance,
                                     oversubscribed=bool(meta.get("oversubscribed")),
                                     curve_breakpoints=curves,
                                     step_overhead_s=overhead[0] if overhead and name == "pingpong" else None,
                                     ranks_per_node=ppn)
        by_params[name] = ParamChecks(tuple(check_summary(checks)), tuple(c for c in checks if c.off))
        if name == chosen:
            model_checks = tuple(checks)
    winners = ()
    if chosen:
        winners = tuple(who_wins(rows, sets[chosen], algorithms=models, ranks_per_node=ppn))
    else:
        notes.append("no network parameters: predictions and who-wins skipped")
    lab = None
    if meta.get("lab"):  # an emulated-lab run: fitted against injected delay and rate
        from ccbench.analysis.lab_check import fitted_vs_injected

        lab = fitted_vs_injected(rows, meta["lab"], n_boot=n_boot)
    network = NetworkFits(
        pingpong, joint, sets.get("effective"),
        tuple(compare_params(pingpong, joint)) if pingpong and joint else (),
        chosen or None, why, tuple(gamma_per_path(meta.get("reduce_local") or [], **kw)),
        _floor(meta.get("harness_floor"), pingpong),
        None if overhead is None else StepOverhead(overhead[0], overhead[1]))
    return RunFit(
        FITS_SCHEMA, path.name, str(path), {k: meta.get(k) for k in _PROVENANCE_KEYS if k in meta},
        {"ccbench": __version__, "numpy": np.__version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
         "n_boot": n_boot, "seed": SEED, "confidence": CONFIDENCE, "tolerance": tolerance},
        tuple(warnings), tuple(notes), network, tuple(_native_models(rows, models, unmodelled)), tuple(curves),
        model_checks, by_params, winners, lab)


# --------------------------------------------------------------------------- predict


def params_from_run(run: Run, *, n_boot: int = N_BOOT) -> NetworkParams:
    """Network parameters (ping-pong + reduce_local) of an open stored run.

    Deterministic (fixed bootstrap seed): the same values `fit_run` reports as "pingpong".
    """
    notes: list[str] = []
    params = _network([r.to_dict() for r in run.rows], run.meta, notes, n_boot=n_boot)
    if params is None:
        raise UsageError(f"run {run.path.name!r} has no ping-pong rows: measure pingpong in it, "
                         "or give --alpha and --beta")
    return params


def intra_node_params(run: Run, ranks_per_node: int, *, n_boot: int = N_BOOT) -> tuple[float, float, str]:
    """(alpha, beta, where they come from) of the two-level model's intra-node level, from a one-node run.

    alpha is the run's ping-pong alpha; beta the larger of its ping-pong beta (one message alone)
    and the share of the node's memory copy bandwidth each of `ranks_per_node` ranks gets when all
    copy at once (``ccbench.analysis.limits.MemoryLimit.intra_node_beta_at``): ranks sharing a
    node share its memory bandwidth, which a ping-pong between two idle ranks does not see.
    Without the run's ``memory_bandwidth`` record, ping-pong's beta alone, said so.
    """
    from ccbench.analysis.limits import memory_limit

    params, path, meta = params_from_run(run, n_boot=n_boot), run.path, run.meta
    if (meta.get("nodes") or 1) > 1:
        raise UsageError(f"--intra-from takes a run on one node; {path.name!r} spans several")
    lim = memory_limit(meta.get("memory_bandwidth"))
    pp_beta = params.beta_s_per_byte
    if lim is None:
        return params.alpha_s, pp_beta, (f"intra-node alpha and beta: ping-pong of run {path.name} (it has no memory "
                                         "bandwidth record, so ranks sharing the node are not accounted for)")
    mem_beta = lim.intra_node_beta_at(ranks_per_node)
    which = "the node's memory bandwidth shared by" if mem_beta > pp_beta else "ping-pong (above the memory share of"
    text = (f"intra-node alpha: ping-pong of run {path.name}; beta {1e-9 / max(mem_beta, pp_beta):.3g} GB/s: "
            f"{which} {ranks_per_node} ranks per node{')' if mem_beta <= pp_beta else ''} "
            f"(ping-pong {1e-9 / pp_beta:.3g} GB/s, memory share {1e-9 / mem_beta:.3g} GB/s)")
    return params.alpha_s, max(mem_beta, pp_beta), text


def level_params(run: Run, ranks_per_node: int | None = None) -> tuple[NetworkParams, TwoLevelParams, str]:
    """(the between-nodes parameters, the two-level model, where they come from) of a diagnosis run
    (``ccbench doctor``): the link levels its pair times show (`ccbench.analysis.levels.pair_levels`), the fastest
    as the level inside a node, the slowest as the one between nodes, on nodes of `ranks_per_node` ranks (default:
    the run's own).  A usage error where the run shows one level only, or holds no pair times at two sizes."""
    from ccbench.analysis.levels import pair_levels
    from ccbench.store.doctor_rows import KIND

    name = run.path.name
    if run.kind != KIND:
        raise UsageError(f"--levels-from takes a diagnosis run (ccbench doctor); {name!r} is a {run.kind} run")
    lv = pair_levels(run.rows)
    if lv is None:
        raise UsageError(f"run {name!r} has no pair times at two sizes to find link levels in")
    if len(lv.levels) < 2:
        raise UsageError(f"run {name!r} shows one link level ({lv.levels[0].where}): a two-level prediction needs "
                         "pairs inside and between nodes")
    ppn = ranks_per_node or run.meta.get("ranks_per_node")
    if not isinstance(ppn, int) or ppn < 1:
        raise UsageError(f"run {name!r} does not say its ranks per node: give --ppn")
    inside, between = lv.levels[0], lv.levels[-1]
    two = TwoLevelParams(inside.alpha_s, inside.beta_s_per_byte, between.alpha_s, between.beta_s_per_byte, ppn)
    text = (f"measured by diagnosis run {name} ({run.path}): {len(lv.levels)} link levels in its pair times; "
            f"inside a node ({inside.where}, {inside.pairs} pairs) and between nodes ({between.where}, "
            f"{between.pairs} pairs), each the median two-point fit of its pairs")
    if len(lv.levels) > 2:
        text += f"; the {len(lv.levels) - 2} levels between them are left out"
    return NetworkParams(between.alpha_s, between.beta_s_per_byte, source="levels"), two, text


def choose_params(sets: Mapping, chosen: str | None, why: str, which: str, notes: list[str], subject: str,
                  remedy: str) -> tuple[str, str]:
    """(the parameter set to use, why): `which` as asked, else `param_sets`' choice; a usage error where none fits.

    `subject` names what was fitted ("run 'x'", "the runs fitted on") in the messages;
    `remedy` says what would give parameters when none can be had.
    """
    if which != "auto":
        if which not in sets:
            raise UsageError(f"{subject} cannot give {which} parameters: "
                             + next((n for n in notes if which in n), "the rows they are fitted to are missing"))
        return which, f"{which}: as asked"
    if not chosen:
        raise UsageError(f"no parameters from {subject}: {remedy}")
    return chosen, why


@dataclass(frozen=True)
class ParamChoice:
    """The parameters a prediction from a run uses: the set (``params``, its ``name``, ``why`` it was chosen), the
    run's ``path``, the algorithms to price (``models``) and the fit's ``notes``."""

    params: NetworkParams | PathParams
    name: str
    why: str
    path: Path
    models: Mapping
    notes: tuple[str, ...]


def run_params(run: Run, which: str = "auto", *, n_boot: int = N_BOOT) -> ParamChoice:
    """The parameters of an open stored run to predict with (a `ParamChoice`).

    `which` is one of PARAM_SETS or "auto" (`param_sets`: effective, else joint, else
    ping-pong).  ``models`` are the algorithms to price with (hand-written, and the library's
    unforced ``native`` where its selection is known: `run_models`).  A set the run cannot
    support is a UsageError that says why.
    """
    if which != "auto" and which not in PARAM_SETS:
        raise UsageError(f"unknown parameter set {which!r}; choose from auto, {', '.join(PARAM_SETS)}")
    path, meta = run.path, run.meta
    rows = [r.to_dict() for r in run.rows]
    notes: list[str] = []
    models, _ = run_models(rows, meta, notes)
    sets, chosen, why = param_sets(rows, meta, notes, models=models, n_boot=n_boot)
    chosen, why = choose_params(sets, chosen, why, which, notes, f"run {path.name!r}",
                                "measure pingpong in it, or give --alpha and --beta")
    library = library_of_vendor(str(meta.get("mpi_vendor") or meta.get("mpi_library") or ""))
    tree = _selection_tree(library, meta, notes)
    pred_models, _ = model_registry(library, selection_tree=tree, ranks_per_node=_ranks_per_node(meta),
                                    measured=[(c, "native") for c in models])
    return ParamChoice(sets[chosen], chosen, why, path, pred_models, tuple(notes))


def prediction_inputs(run: Run | None, alpha, beta, gamma, which: str = "auto") -> tuple:
    """(parameters, where they come from, algorithms or None) for ``ccbench predict``.

    From an open run: the parameter set `which` (`run_params`), and the algorithms to price: the
    hand-written ones and the library's unforced ``native`` where the run's MPI library and its
    selection are known.  Given values: as `given_params`, every hand-written algorithm.
    """
    if run is None:
        params, source = given_params(None, alpha, beta, gamma)
        return params, source, None
    if alpha or beta or gamma:
        raise UsageError("give either --from RUN or --alpha/--beta/--gamma, not both")
    got = run_params(run, which)
    return got.params, f"fitted to run {got.path.name} ({got.path}): {got.why}", got.models


def given_params(run: Run | None, alpha, beta, gamma, command: str = "predict") -> tuple[NetworkParams, str]:
    """(parameters, where they come from) for a prediction: an open run's fits, or the values given.

    Either `run` (ping-pong alpha and beta, gamma from the run's local reduction
    benchmark; see `params_from_run`) or `alpha` and `beta` (and optionally `gamma`) as
    the user typed them (`parse_time`, `parse_inverse_rate`), never both.
    """
    if run is not None and (alpha or beta or gamma):
        raise UsageError("give either --from RUN or --alpha/--beta/--gamma, not both")
    if run is None and (alpha is None or beta is None):
        raise UsageError(f"{command} needs --from RUN, or both --alpha and --beta")
    if run is not None:
        return params_from_run(run), (f"fitted to run {run.path.name} ({run.path}): ping-pong alpha and beta, "
                                      "gamma from its local reduction benchmark")
    params = NetworkParams(parse_time(alpha, "--alpha"), parse_inverse_rate(beta, "--beta"),
                           parse_inverse_rate(gamma, "--gamma") if gamma is not None else None)
    return params, "given on the command line"


def _check_params(params) -> None:
    if isinstance(params, PathParams):
        _check_params(params.numpy)
        _check_params(params.mpi)
        return
    for name in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte"):
        v = getattr(params, name)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise UsageError(f"{name.split('_')[0]} must be a finite number >= 0, got {v}")
    if params.alpha_s is None or params.beta_s_per_byte is None:
        raise UsageError("alpha and beta are both needed for predictions")


@dataclass(frozen=True)
class PredictionGrid(Record):
    """Every modelled algorithm's predicted seconds at one collective and rank count: ``times_s`` {algorithm: one
    time per size, NaN where the library's selection at a size has no textbook cost}, ``winners`` one per size."""

    collective: str
    nranks: int
    sizes: tuple[int, ...]
    times_s: Mapping[str, tuple[float, ...]]
    winners: tuple[str, ...]
    counts: str = ""  # a v-collective's count distribution (canonical spec); "" for the even collectives


def predict_table(
    params: NetworkParams,
    ranks: Iterable[int],
    sizes: Iterable[int],
    collectives: Iterable[str] | None = None,
    *,
    two_level: TwoLevelParams | None = None,
    algorithms=None,
    ranks_per_node: int | None = None,
    counts: str | None = None,
) -> list[PredictionGrid]:
    """Predicted seconds of every modelled algorithm, per collective and rank count.

    Returns one `PredictionGrid` per (collective, nranks) (algorithms that cannot run at that rank
    count are left out); `collectives` None: every modelled one but the v-collectives.  With `two_level`,
    allreduce also gets ``two-level/ring`` and ``two-level/rabenseifner`` (`predict.two_level_allreduce_s`).
    Node-aware costs (the hierarchical allreduce) are priced on nodes of `ranks_per_node`
    ranks, by default the two-level model's, else all ranks on one node.  `counts` (a spec of
    ``ccbench.core.counts``, checked at every rank count) sizes the v-collectives' blocks: uniform by default.
    """
    if algorithms is None:  # what -a all takes: no persistent or non-blocking twin (their blocking twin's model)
        from ccbench.algorithms import REGISTRY  # imports no MPI

        algorithms = {c: {n: a for n, a in algs.items() if a.in_all} for c, algs in REGISTRY.items()}
    _check_params(params)
    ranks, sizes = [int(p) for p in ranks], [int(n) for n in sizes]
    rpn = ranks_per_node_for(ranks_per_node, two_level)
    if collectives is None:  # every modelled collective but the v-collectives, whose even forms at uniform counts
        colls = [c for c, algs in algorithms.items()  # these are; name one to price its blocks (`counts`)
                 if not COLLECTIVES[c].uneven and any(a.cost is not None for a in algs.values())]
    else:
        colls = list(collectives)
        for c in colls:
            if c not in algorithms:
                raise UsageError(f"unknown collective {c!r}; choose from {', '.join(algorithms)}")
            if not any(a.cost is not None for a in algorithms[c].values()):
                raise UsageError(f"collective {c!r} has no algorithm with a cost model")
    spec = parse_counts(counts or "uniform")
    uneven = [c for c in colls if COLLECTIVES[c].uneven]
    if counts and not uneven:
        raise UsageError("--counts sizes the v-collectives' blocks: name one with -C (allgatherv, alltoallv, "
                         "gatherv, scatterv, reduce_scatterv)")
    for P in ranks if uneven else ():
        check_ranks(spec, P)
    out = []
    for coll in colls:  # one prediction API: analysis.predict.prediction_table, grouped per rank count
        preds = prediction_table({coll: algorithms[coll]}, ranks, sizes, params, two_level=two_level,
                                 ranks_per_node=rpn, counts=spec.text)
        leaders = [f"two-level/{lead}" for lead in TWO_LEVEL_LEADERS]
        for P in ranks:
            mine = [pr for pr in preds if pr.nranks == P]
            kept = ([pr for pr in mine if not pr.algorithm.startswith("two-level/")]
                    + [pr for lead in leaders for pr in mine if pr.algorithm == lead])
            if not kept:
                continue
            at: dict[str, dict[int, float]] = {}
            for pr in kept:
                at.setdefault(pr.algorithm, {})[pr.nbytes] = pr.predicted_s
            times = {a: tuple(v.get(n, math.nan) for n in sizes) for a, v in at.items()}
            wins = {w.nbytes: w.algorithm for w in predicted_winners(kept)}
            out.append(PredictionGrid(coll, P, tuple(sizes), times, tuple(wins[n] for n in sizes),
                                      spec.text if coll in uneven else ""))
    return out
