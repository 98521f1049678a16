"""Pure predictions from the alpha-beta-gamma model: at any scale, against measurements, winners.

An algorithm's closed-form cost ``alg.cost(P, n)`` (a `ccbench.algorithms.registry.Cost`:
steps, bytes and reduced bytes per call, from Thakur, Rabenseifner & Gropp, "Optimization
of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005) times the network
parameters (Hockney, Parallel Computing 20(3), 1994) gives its predicted time.  Anything
with a ``cost(nranks, nbytes)`` method or attribute returning a Cost will do, so tests and
users can model algorithms the registry does not hold.  No MPI is imported.

Each algorithm is priced with the parameters of the path that runs it: hand-written
algorithms reduce with numpy, the library's own (``native``, ``native:<alg>``) with its
internal reduction (``NetworkParams.gamma_for``), and effective parameters
(``PathParams``) carry an alpha and beta per path.  A library algorithm is priced as its
textbook equivalent (`NativeModel`, from ``ccbench.algorithms.native_variants.textbook``);
the unforced ``native`` as the algorithm the library's selection tree picks at (P, n).
"""

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ccbench.algorithms.native_variants import mpich_tree_choice, mpich_value_of, textbook
from ccbench.algorithms.registry import Cost, cost_at, row_keywords
from ccbench.analysis.fit import CurveFit, NetworkParams, PathParams, fit_effective
from ccbench.core.errors import CCBenchError
from ccbench.core.records import Record

__all__ = [
    "TOLERANCE",
    "Crossover",
    "ModelCheck",
    "NativeModel",
    "Prediction",
    "TwoLevelParams",
    "WhoWins",
    "Winner",
    "WinnerRow",
    "compare_to_measured",
    "crossovers",
    "effective_params",
    "estimate_step_overhead",
    "model_registry",
    "modelled",
    "path_of",
    "predict",
    "predict_sizes",
    "predicted_winners",
    "prediction_table",
    "ranks_per_node_for",
    "two_level_allreduce_s",
    "who_wins",
]

TOLERANCE = 0.25  # |measured / predicted - 1| above this flags a case


# --------------------------------------------------------------------------- basics


def _cost(alg, nranks: int, nbytes: int, ranks_per_node: int | None = None, **case) -> Cost:
    """alg.cost at (nranks, nbytes); a node-aware cost also gets `ranks_per_node` when set, a v-collective's the
    case's count distribution, element size and root (`case`, e.g. a row's ``row_keywords``; `cost_at`)."""
    fn = getattr(alg, "cost", None)
    if fn is None:
        raise CCBenchError(
            f"{getattr(alg, 'collective', '?')}/{getattr(alg, 'name', '?')} has no cost model"
        )
    rpn = None if ranks_per_node is None else int(ranks_per_node)
    return cost_at(fn, nranks, nbytes, ranks_per_node=rpn, **case)


def path_of(alg) -> str:
    """The reduction path an algorithm takes: "mpi" for the library's own, "numpy" for hand-written ones."""
    return "mpi" if getattr(alg, "native", False) else "numpy"


def _params(params, alg):
    """The parameters that price `alg`: its path's, for parameters per path (``PathParams``)."""
    fn = getattr(params, "for_algorithm", None)
    return fn(alg) if fn is not None else params


def _gamma(params, alg=None, nbytes: float = 0) -> float:
    """gamma of `alg`'s path at a buffer of `nbytes` (``NetworkParams.gamma_for``); 0 when unknown."""
    fn = getattr(params, "gamma_for", None)
    if fn is not None:
        return fn(getattr(alg, "native", False), nbytes)
    g = getattr(params, "gamma_s_per_byte", None)
    return 0.0 if g is None else float(g)


def _time(alg, cost: Cost, nbytes: float, params) -> float:
    p = _params(params, alg)
    return cost.time_s(float(p.alpha_s), float(p.beta_s_per_byte), _gamma(p, alg, nbytes))


def _unsupported(alg, nranks: int) -> str | None:
    fn = getattr(alg, "unsupported", None)
    return fn(int(nranks), None) if fn is not None else None


def _unmodelled(alg, nranks: int, nbytes: int) -> str | None:
    """Why `alg` has no cost at (P, n) (a library choice without a textbook equivalent), or None."""
    fn = getattr(alg, "unmodelled", None)
    return fn(int(nranks), int(nbytes)) if fn is not None else None


def _add(costs: Sequence[Cost]) -> Cost:
    """The cost of running algorithms one after the other: the sum of their terms (and critical paths)."""
    crit = None
    if any(c.critical is not None for c in costs):
        t = [c.timing_cost for c in costs]
        crit = Cost(sum(c.alpha for c in t), sum(c.beta for c in t), sum(c.gamma for c in t))
    return Cost(sum(c.alpha for c in costs), sum(c.beta for c in costs), sum(c.gamma for c in costs), crit)


@dataclass(frozen=True)
class NativeModel:
    """A library algorithm priced as its textbook equivalent: Algorithm-like (collective, name, native, cost).

    ``choose(P, n)`` gives (registry algorithms whose costs add up to it, note); no
    algorithms means not modelled there, the note saying why.  A forced variant
    (``native:<alg>``) chooses the same at every (P, n); the unforced ``native`` what the
    library's selection (``selected`` True) picks.  Prices on the library's path
    (``native`` is True: its gamma and, with ``PathParams``, its alpha and beta).
    """

    collective: str
    name: str
    choose: Callable[[int, int], tuple[tuple, str]]
    selected: bool = False
    native: bool = True

    def parts(self, nranks: int, nbytes: int) -> tuple[tuple, str]:
        """(registry algorithms, note) at (P, n)."""
        return self.choose(int(nranks), int(nbytes))

    def unmodelled(self, nranks: int, nbytes: int) -> str | None:
        """Why there is no cost at (P, n), or None."""
        parts, note = self.parts(nranks, nbytes)
        if not parts:
            return note or "not modelled"
        why = next((w for w in (_unsupported(a, nranks) for a in parts) if w), None)
        return f"not modelled at {nranks} ranks: {why}" if why else None

    def unsupported(self, nranks: int, op: str | None = None) -> str | None:
        """Rank counts no textbook part can run at (a forced variant's only; the selection may pick any)."""
        if self.selected:
            return None
        parts, _ = self.parts(nranks, 1)
        return next((w for w in (a.unsupported(nranks, op) for a in parts) if w), None)

    def cost(self, nranks: int, nbytes: int, **case) -> Cost:
        """The summed closed-form costs of the textbook parts at (P, n) (`case`: what each part's cost takes of the
        case's keywords, a v-collective's count distribution among them)."""
        parts, note = self.parts(nranks, nbytes)
        if not parts:
            raise CCBenchError(f"{self.collective}/{self.name}: {note}")
        return _add([_cost(a, nranks, nbytes, **case) for a in parts])

    def describe(self, nranks: int, nbytes: int) -> str:
        """The textbook algorithms it is priced as at (P, n), e.g. "ring" or "scatter/binomial + allgather/ring"."""
        parts, note = self.parts(nranks, nbytes)
        if not parts:
            return note
        names = " + ".join(a.name if a.collective == self.collective else f"{a.collective}/{a.name}" for a in parts)
        return f"{names} ({note.split(';')[0]})" if self.selected else names


def _resolve(reg, tb) -> tuple[tuple, str]:
    """The registry Algorithms of a Textbook entry (not modelled when one lacks a cost)."""
    if not tb.parts:
        return (), tb.note
    algs = tuple(reg.get(c, {}).get(a) for c, a in tb.parts)
    if any(a is None or getattr(a, "cost", None) is None for a in algs):
        return (), "not modelled: " + ", ".join(f"{c}/{a}" for c, a in tb.parts) + " has no cost model here"
    return algs, tb.note


def model_registry(library: str | None, *, selection_tree: dict | None = None, algorithms=None,
                   ranks_per_node: int | None = None, measured: Iterable[tuple[str, str]] | None = None,
                   ) -> tuple[dict, dict[str, str]]:
    """({collective: {name: algorithm}}, {"collective/name": why not modelled}) for predictions of a run.

    Every hand-written algorithm with a cost model, every ``native:<alg>`` of `library` with a
    textbook equivalent (``native_variants.textbook``) as a `NativeModel`, and the unforced
    ``native``: for MPICH with its `selection_tree` (``ccbench.measure.library.mpich_default_tree``),
    the algorithm it picks at (P, n) (``native_variants.mpich_tree_choice``); otherwise not
    modelled, and said so.  `measured` (collective, algorithm) pairs limit the native entries to
    those (the reasons too) and let the persistent algorithms in; None keeps all natives, no persistent one.
    """
    reg = _registry(algorithms)
    want = None if measured is None else set(measured)
    out: dict = {}
    why: dict[str, str] = {}
    for coll, algs in reg.items():
        # a persistent or non-blocking schedule sends its blocking twin's messages (the same model): left out unless
        # measured
        mine = {n: a for n, a in algs.items() if getattr(a, "cost", None) is not None
                and (not (getattr(a, "setup", None) or getattr(a, "nonblocking", None))
                     or (want is not None and (coll, n) in want))}
        for name, alg in algs.items():
            if not getattr(alg, "native", False) or coll == "pingpong" or (want is not None
                                                                          and (coll, name) not in want):
                continue
            if name == "native":
                if library == "mpich" and selection_tree is not None:
                    def choose(P, n, _coll=coll):
                        fn, how = mpich_tree_choice(selection_tree, _coll, P, n, ranks_per_node=ranks_per_node)
                        if fn is None:
                            return (), f"not modelled: {how}"
                        value = mpich_value_of(_coll, fn)
                        if value is None:
                            return (), f"not modelled: MPICH selects {fn}, which ccbench has no variant of"
                        algs_, note = _resolve(reg, textbook(_coll, value, "mpich"))
                        return algs_, (f"MPICH selects {fn}" + (f"; {note}" if note else "")
                                       if algs_ else f"MPICH selects {fn}, {note}")
                    mine[name] = NativeModel(coll, name, choose, selected=True)
                else:
                    why[f"{coll}/{name}"] = ("not modelled: the selection of "
                                             + ({"openmpi": "Open MPI's tuned component (its fixed decision "
                                                 "rules)"}.get(library, "this MPI library")
                                                if library != "mpich" else "MPICH (its selection tree could not "
                                                "be read from the installed library)")
                                             + " is unknown to ccbench")
                continue
            if not getattr(alg, "settings", None) or (library is not None and library not in alg.settings):
                continue
            parts, note = _resolve(reg, textbook(coll, name, library))
            if not parts:
                why[f"{coll}/{name}"] = note
                continue
            mine[name] = NativeModel(coll, name, lambda P, n, _p=parts, _n=note: (_p, _n))
        if mine:
            out[coll] = mine
    return out, why


def modelled(algorithms) -> list:
    """The algorithms with a cost model, from a registry-shaped mapping or an iterable; a non-blocking form beside
    its blocking twin (``<name>-nonblocking``: the twin's messages, so its model) is left out, as its twin's row."""
    if isinstance(algorithms, Mapping):
        algorithms = [a for algs in algorithms.values() for a in algs.values()]
    algorithms = list(algorithms)
    names = {(getattr(a, "collective", None), getattr(a, "name", None)) for a in algorithms}
    return [a for a in algorithms if getattr(a, "cost", None) is not None
            and not (getattr(a, "nonblocking", None)
                     and (a.collective, a.name.removesuffix("-nonblocking")) in names)]


def _registry(algorithms):
    if algorithms is None:
        from ccbench.algorithms import REGISTRY  # imports no MPI

        return REGISTRY
    return algorithms


def predict(
    alg, nranks: int, nbytes: int, params: NetworkParams, *, ranks_per_node: int | None = None, **case
) -> float:
    """Predicted seconds of one call: Cost(P, n) . (alpha, beta, gamma) (Thakur et al. 2005).

    The gamma is that of the algorithm's path and of the buffer's temperature
    (``NetworkParams.gamma_for``); with ``PathParams`` alpha and beta are its path's too.
    A gamma of None counts as 0 (no reduction cost known).  `ranks_per_node` places the
    ranks on nodes of that many for a node-aware cost (the hierarchical allreduce's); None
    leaves it at its default, one node.  `case` gives a v-collective's cost its ``counts`` (the
    distribution's spec; default uniform), ``itemsize`` and ``root``.
    """
    return _time(alg, _cost(alg, nranks, nbytes, ranks_per_node, **case), nbytes, params)


def predict_sizes(
    alg, nranks: int, sizes: Iterable[int], params: NetworkParams, *, ranks_per_node: int | None = None
) -> np.ndarray:
    """`predict` over sizes: an array of seconds, one per size."""
    return np.array([predict(alg, nranks, n, params, ranks_per_node=ranks_per_node) for n in sizes],
                    dtype=float)



def ranks_per_node_for(ranks_per_node: int | None, two_level: "TwoLevelParams | None") -> int | None:
    """The ranks per node to price node-aware algorithms with: as given, else the two-level model's."""
    if ranks_per_node is None and two_level is not None:
        ranks_per_node = two_level.ranks_per_node
    if ranks_per_node is not None and int(ranks_per_node) < 1:
        raise CCBenchError(f"ranks per node must be at least 1, got {ranks_per_node}")
    return None if ranks_per_node is None else int(ranks_per_node)


# --------------------------------------------------------------------------- at scale


@dataclass(frozen=True)
class Prediction(Record):
    """The predicted time of one algorithm at one (nranks, nbytes), with the cost terms it comes from
    (along the critical path where the algorithm states one: `Cost.timing_cost`)."""

    collective: str
    algorithm: str
    nranks: int
    nbytes: int
    predicted_s: float
    steps: float
    step_bytes: float
    reduced_bytes: float


@dataclass(frozen=True)
class Winner(Record):
    """The predicted fastest algorithm at one (collective, nranks, nbytes), and the next."""

    collective: str
    nranks: int
    nbytes: int
    algorithm: str
    predicted_s: float
    runner_up: str | None
    runner_up_s: float | None


def prediction_table(
    algorithms,
    ranks: Iterable[int],
    sizes: Iterable[int],
    params: NetworkParams,
    *,
    collectives: Iterable[str] | None = None,
    two_level: "TwoLevelParams | None" = None,
    ranks_per_node: int | None = None,
    counts: str | None = None,
) -> list[Prediction]:
    """Every modelled algorithm at every rank count and size (skipping unsupported ranks).

    `algorithms` is a registry-shaped mapping or an iterable of Algorithm-like objects.
    With `two_level`, every allreduce algorithm also appears as the leader step of the
    hierarchical allreduce, named ``two-level/<name>`` (see `two_level_allreduce_s`); its
    cost terms are then NaN (it mixes two networks).  Node-aware costs (the registry's
    hierarchical allreduce) are priced on nodes of `ranks_per_node` ranks, by default the
    two-level model's, else one node.  `counts` sizes the v-collectives' blocks (default uniform).
    """
    ranks, sizes = [int(p) for p in ranks], [int(n) for n in sizes]
    rpn = ranks_per_node_for(ranks_per_node, two_level)
    wanted = None if collectives is None else set(collectives)
    out = []
    priced: dict[tuple, Cost] = {}  # a persistent or non-blocking form prices with its blocking twin's function
    for alg in modelled(algorithms):
        if wanted is not None and alg.collective not in wanted:
            continue
        for P in ranks:
            if _unsupported(alg, P) is None:
                for n in sizes:
                    if _unmodelled(alg, P, n) is not None:
                        continue
                    c = _priced(priced, alg, P, n, rpn, counts)
                    t = _time(alg, c, n, params)
                    tc = c.timing_cost
                    out.append(Prediction(alg.collective, alg.name, P, n, t,
                                          tc.alpha, tc.beta, tc.gamma))
            if two_level is None or alg.collective != "allreduce" or getattr(alg, "native", False):
                continue
            nodes = math.ceil(P / two_level.ranks_per_node)
            if nodes > 1 and _unsupported(alg, nodes) is not None:
                continue
            for n in sizes:
                t = two_level_allreduce_s(alg, P, n, two_level)
                out.append(Prediction("allreduce", f"two-level/{alg.name}", P, n, t,
                                      math.nan, math.nan, math.nan))
    return out


def _priced(memo: dict, alg, P: int, n: int, rpn: int | None, counts: str | None) -> Cost:
    """`_cost` of `alg`, once per cost function, rank count and size in `memo` (one table's costs: a v-collective's
    at 4,096 ranks reads a 16.8 M-block matrix)."""
    key = (alg.cost, P, n)  # a cost function is hashable: `cost_at` keeps its keywords by it
    if key not in memo:
        memo[key] = _cost(alg, P, n, rpn, counts=counts)
    return memo[key]


def predicted_winners(predictions: Iterable[Prediction]) -> list[Winner]:
    """The fastest and second-fastest prediction per (collective, nranks, nbytes)."""
    groups: dict[tuple, list[Prediction]] = {}
    for p in predictions:
        if math.isfinite(p.predicted_s):
            groups.setdefault((p.collective, p.nranks, p.nbytes), []).append(p)
    out = []
    for (coll, P, n), ps in groups.items():
        ps = sorted(ps, key=lambda p: p.predicted_s)
        second = ps[1] if len(ps) > 1 else None
        out.append(Winner(coll, P, n, ps[0].algorithm, ps[0].predicted_s,
                          second.algorithm if second else None,
                          second.predicted_s if second else None))
    return out


# --------------------------------------------------------------------------- vs measured


@dataclass(frozen=True)
class ModelCheck(Record):
    """One measured case against its prediction: ratio = measured / predicted.

    ``off`` when |ratio - 1| > tolerance; ``reasons`` are the likely causes found (data,
    possibly empty): "oversubscribed", "protocol change", "cache", "per-step overhead".
    ``path`` is the reduction path priced ("numpy" for hand-written algorithms, "mpi" for the
    library's own) and ``modelled_as`` the textbook algorithm a library algorithm is priced as.
    """

    collective: str
    algorithm: str
    nranks: int
    nbytes: int
    dtype: str | None
    op: str | None
    measured_s: float
    predicted_s: float
    ratio: float
    off: bool
    reasons: tuple[str, ...] = ()
    path: str = "numpy"
    modelled_as: str = ""


def _near(n: float, points: Iterable[float], factor: float) -> bool:
    return n > 0 and any(b / factor <= n <= b * factor for b in points if b and b > 0)


def _breakpoint_map(curve_breakpoints) -> dict[tuple, tuple]:
    if curve_breakpoints is None:
        return {}
    if isinstance(curve_breakpoints, Mapping):
        return {tuple(k): tuple(v) for k, v in curve_breakpoints.items()}
    out: dict[tuple, tuple] = {}
    for f in curve_breakpoints:
        if isinstance(f, CurveFit):
            out[f.key] = out.get(f.key, ()) + f.segmented.breakpoints_bytes
    return out


def estimate_step_overhead(
    rows: Iterable[Mapping], params: NetworkParams, *, algorithms=None, max_bytes: int = 1024,
    ranks_per_node: int | None = None) -> tuple[float, int] | None:
    """(seconds, cases): the software cost per step of the hand-written algorithms beyond alpha.

    A hand-written algorithm (a row with counted steps) pays, on every step, the cost of
    its own code between messages (here: Python's), which a native ping-pong's alpha does
    not contain.  For small messages (nbytes <= `max_bytes`), where the beta and gamma
    terms are negligible, each case gives (measured - predicted) / steps along the
    critical path; the median over the cases is robust to the few that other effects
    dominate.  LogP calls this the per-message overhead o (Culler et al., "LogP: towards
    a realistic model of parallel computation", PPoPP 1993).  None without such cases.
    A negative value means the algorithms pay less per step than alpha: alpha itself is
    inflated (ping-pong on oversubscribed cores) -- it is no overhead, and
    `compare_to_measured` then gives no reason from it.
    """
    reg = _registry(algorithms)
    per_step = []
    for r in rows:
        alg = reg.get(r.get("collective"), {}).get(r.get("algorithm"))
        t = r.get("median_s")
        if (alg is None or getattr(alg, "cost", None) is None or r.get("steps_max") is None
                or t is None or not math.isfinite(t) or int(r["nbytes"]) > max_bytes):
            continue
        P, n = int(r["nranks"]), int(r["nbytes"])
        case = row_keywords(r)
        steps = _cost(alg, P, n, ranks_per_node, **case).timing_cost.alpha
        if steps > 0:
            per_step.append((t - predict(alg, P, n, params, ranks_per_node=ranks_per_node, **case)) / steps)
    if not per_step:
        return None
    return float(np.median(per_step)), len(per_step)


def compare_to_measured(
    rows: Iterable[Mapping],
    params: NetworkParams,
    *,
    algorithms=None,
    tolerance: float = TOLERANCE,
    oversubscribed: bool = False,
    curve_breakpoints=None,
    network_breakpoints: Sequence[float] | None = None,
    cache_bytes: float | None = None,
    near_factor: float = 2.0,
    step_overhead_s: float | None = None,
    ranks_per_node: int | None = None) -> list[ModelCheck]:
    """Predicted vs measured for every row whose algorithm has a cost model.

    `algorithms`: registry-shaped {collective: {name: alg}} (default: the registry).
    Reasons recorded for a case that is off:

    * "oversubscribed": the caller says ranks > cores (from the run's provenance); busy-
      polling ranks then share cores and the model's one-rank-per-core premise fails.
    * "protocol change": nbytes is within `near_factor` of a breakpoint of the row's own
      curve (`curve_breakpoints`: {(collective, algorithm, nranks): sizes}, or CurveFits),
      or the row's mean message size (step_bytes_max / steps_max when counted, else nbytes)
      is within `near_factor` of a network breakpoint (default ``params.breakpoints_bytes``).
    * "cache": with `cache_bytes`, the case ran faster than predicted with nbytes fitting
      in the cache, or slower with nbytes exceeding it (the model's single beta is one
      memory level's).
    * "per-step overhead": with a positive `step_overhead_s` (see `estimate_step_overhead`), a
      hand-written case that the prediction plus that overhead on every step of its
      critical path matches within `tolerance`.
    """
    reg = _registry(algorithms)
    bps = _breakpoint_map(curve_breakpoints)
    net_bps = tuple(params.breakpoints_bytes if network_breakpoints is None
                    else network_breakpoints)
    out = []
    for r in rows:
        alg = reg.get(r.get("collective"), {}).get(r.get("algorithm"))
        if alg is None or getattr(alg, "cost", None) is None:
            continue
        t = r.get("median_s")
        if t is None or not math.isfinite(t):
            continue
        P, n = int(r["nranks"]), int(r["nbytes"])
        if _unmodelled(alg, P, n) is not None or _unsupported(alg, P) is not None:
            continue
        case = row_keywords(r)
        pred = predict(alg, P, n, params, ranks_per_node=ranks_per_node, **case)
        ratio = t / pred if pred > 0 else math.nan
        off = not (math.isfinite(ratio) and abs(ratio - 1.0) <= tolerance)
        reasons = []
        if off:
            if oversubscribed:
                reasons.append("oversubscribed")
            steps, sbytes = r.get("steps_max"), r.get("step_bytes_max")
            msg = sbytes / steps if steps and sbytes is not None else n
            if _near(n, bps.get((r["collective"], r["algorithm"], P), ()), near_factor) or \
                    _near(msg, net_bps, near_factor):
                reasons.append("protocol change")
            if cache_bytes and math.isfinite(ratio) and (
                (ratio < 1 and n <= cache_bytes) or (ratio > 1 and n > cache_bytes)
            ):
                reasons.append("cache")
            if step_overhead_s is not None and step_overhead_s > 0 and r.get("steps_max") is not None:
                with_o = pred + step_overhead_s * _cost(alg, P, n, ranks_per_node, **case).timing_cost.alpha
                if with_o > 0 and abs(t / with_o - 1.0) <= tolerance:
                    reasons.append("per-step overhead")
        describe = getattr(alg, "describe", None)
        out.append(ModelCheck(r["collective"], r["algorithm"], P, n, r.get("dtype"),
                              r.get("op"), float(t), pred, ratio, off, tuple(reasons), path_of(alg),
                              describe(P, n) if describe is not None else ""))
    return out


def effective_params(
    rows: Iterable[Mapping],
    base: NetworkParams,
    *,
    algorithms=None,
    ranks_per_node: int | None = None,
    **kw,
) -> PathParams:
    """Effective alpha and beta per path, fitted from the collectives that run on it (``fit.fit_effective``).

    The hand-written rows (numpy path) and the library's rows (``native``, ``native:<alg>``
    with a textbook model in `algorithms`, e.g. from `model_registry`) are fitted apart, each
    against its closed-form costs along the critical path with the reduction priced at the
    path's measured gamma (`base`'s gamma fields, warm or cold by size).  A path with too few
    modelled rows keeps `base`'s alpha and beta, and the notes say so; without a hand-written
    fit there are no effective parameters (CCBenchError).  ``kw`` goes to ``fit_effective``.
    """
    reg = _registry(algorithms)
    gammas = {k: getattr(base, k) for k in ("gamma_s_per_byte", "gamma_ci_s_per_byte", "library_gamma_s_per_byte",
                                             "gamma_cold_s_per_byte", "library_gamma_cold_s_per_byte",
                                             "cold_above_bytes")}
    rows = [r for r in rows if r.get("collective") != "pingpong"]
    fitted: dict[str, NetworkParams] = {}
    notes: list[str] = []
    for path in ("numpy", "mpi"):
        use, terms, red = [], [], []
        for r in rows:
            alg = reg.get(r.get("collective"), {}).get(r.get("algorithm"))
            if alg is None or getattr(alg, "cost", None) is None or path_of(alg) != path:
                continue
            P, n = int(r["nranks"]), int(r["nbytes"])
            if _unsupported(alg, P) is not None or _unmodelled(alg, P, n) is not None:
                continue
            c = _cost(alg, P, n, ranks_per_node, **row_keywords(r)).timing_cost
            use.append(r)
            terms.append((c.alpha, c.beta))
            red.append(c.gamma * base.gamma_for(path == "mpi", n, cold=r.get("buffers") == "cold"))
        try:
            p = fit_effective(use, terms, red, path=path, **kw)
        except CCBenchError as exc:
            if path == "numpy":
                raise
            notes.append(f"{exc}: the library's algorithms keep the hand-written path's alpha and beta")
            fitted[path] = replace(fitted["numpy"], notes=fitted["numpy"].notes + (f"{path} path: not fitted",))
            continue
        fitted[path] = replace(p, breakpoints_bytes=base.breakpoints_bytes, **gammas)
        notes += list(p.notes)
    return PathParams(numpy=fitted["numpy"], mpi=fitted["mpi"], source="effective", notes=tuple(notes))


# --------------------------------------------------------------------------- who wins


@dataclass(frozen=True)
class Crossover(Record):
    """Where two algorithms' predicted times cross at one rank count.

    ``nbytes`` is the real-valued crossing size (linear interpolation inside the final
    one-byte bracket: exact for costs linear in n); `faster_below` wins just below it.
    """

    collective: str
    nranks: int
    nbytes: float
    faster_below: str
    faster_above: str


@dataclass(frozen=True)
class WinnerRow(Record):
    """Measured and predicted fastest algorithm at one (nranks, nbytes, dtype, op).

    ``measured_winner`` is over every measured algorithm (native ones too);
    ``measured_winner_modelled`` only over those with a cost model, which is what
    ``predicted_winner`` is compared with: ``agree`` (None with fewer than two modelled).
    ``margin`` = second-fastest / fastest measured modelled time - 1: small margins make a
    disagreement a coin toss.
    """

    nranks: int
    nbytes: int
    dtype: str | None
    op: str | None
    measured_winner: str
    measured_s: float
    measured_winner_modelled: str | None
    predicted_winner: str | None
    predicted_s: float | None
    agree: bool | None
    margin: float | None


@dataclass(frozen=True)
class WhoWins(Record):
    """Per collective: winners per size, predicted crossovers, and the agreement rate."""

    collective: str
    rows: tuple[WinnerRow, ...]
    crossovers: tuple[Crossover, ...]

    _derived = ("agreement",)

    @property
    def agreement(self) -> float | None:
        """Fraction of sizes where measured and predicted winners agree (None if none)."""
        rated = [r.agree for r in self.rows if r.agree is not None]
        return sum(rated) / len(rated) if rated else None


def crossovers(
    alg_a,
    alg_b,
    nranks: int,
    params: NetworkParams,
    *,
    lo: int = 1,
    hi: int = 1 << 30,
    points: int = 97,
) -> list[Crossover]:
    """Sizes in [lo, hi] where the predicted times of `alg_a` and `alg_b` cross.

    Sign changes of t_a - t_b on a log-spaced grid of integer sizes, each refined by
    bisection to a one-byte bracket and then interpolated linearly (bisection: e.g.
    Press et al., "Numerical Recipes", 3rd ed., sec. 9.1).  Crossings closer together
    than the grid spacing can be missed; raise `points` for such costs.
    """
    lo, hi = max(0, int(lo)), int(hi)
    if hi <= lo:
        return []
    grid = np.unique(np.round(np.geomspace(max(lo, 1), hi, max(points, 2))).astype(np.int64))
    if lo == 0:
        grid = np.concatenate([[0], grid])

    def diff(n: int) -> float:
        return predict(alg_a, nranks, n, params) - predict(alg_b, nranks, n, params)

    vals = [(int(n), diff(int(n))) for n in grid]
    vals = [(n, d) for n, d in vals if math.isfinite(d) and d != 0.0]
    out = []
    for (n0, d0), (n1, d1) in zip(vals, vals[1:], strict=False):
        if (d0 < 0) == (d1 < 0):
            continue
        a, b, da = n0, n1, d0
        while b - a > 1:
            m = (a + b) // 2
            dm = diff(m)
            if dm == 0.0:
                a = b = m
                break
            if (dm < 0) == (da < 0):
                a, da = m, dm
            else:
                b = m
        if a == b:
            x = float(a)
        else:
            db = diff(b)
            x = a + da / (da - db) if da != db else float(b)
        below, above = (alg_a, alg_b) if d0 < 0 else (alg_b, alg_a)
        out.append(Crossover(getattr(alg_a, "collective", ""), int(nranks), float(x),
                             below.name, above.name))
    return out


def who_wins(
    rows: Iterable[Mapping],
    params: NetworkParams,
    *,
    algorithms=None,
    crossover_points: int = 97,
    ranks_per_node: int | None = None) -> list[WhoWins]:
    """Per collective: the measured fastest algorithm per size, the predicted one, crossovers.

    Rows are grouped by (collective, nranks, nbytes, dtype, op); an algorithm measured
    several times there (e.g. in-place and not) counts with its fastest median.  With
    `algorithms` from `model_registry`, the library's own algorithms take part as their
    textbook models.  Crossovers are searched between every pair of modelled hand-written
    algorithms measured at a rank count, over that collective's measured size range.
    """
    reg = _registry(algorithms)
    by_coll: dict[str, dict[tuple, dict[str, float]]] = {}
    for r in rows:
        t = r.get("median_s")
        if t is None or not math.isfinite(t) or r.get("collective") == "pingpong":
            continue
        pt = by_coll.setdefault(r["collective"], {}).setdefault(
            (int(r["nranks"]), int(r["nbytes"]), r.get("dtype"), r.get("op")), {}
        )
        pt[r["algorithm"]] = min(float(t), pt.get(r["algorithm"], math.inf))
    out = []
    for coll, points in by_coll.items():
        models = {name: a for name, a in reg.get(coll, {}).items()
                  if getattr(a, "cost", None) is not None}
        wrows = []
        span: dict[int, tuple[set, int, int]] = {}
        for (P, n, dtype, op), times in sorted(points.items(), key=lambda kv: kv[0][:2]):
            best = min(times, key=times.get)
            mod = {a: t for a, t in times.items()
                   if a in models and _unsupported(models[a], P) is None and _unmodelled(models[a], P, n) is None}
            mw = pw = ps = agree = margin = None
            if mod:
                order = sorted(mod, key=mod.get)
                mw = order[0]
                preds = {a: predict(models[a], P, n, params, ranks_per_node=ranks_per_node) for a in mod}
                pw = min(preds, key=preds.get)
                ps = preds[pw]
                if len(mod) > 1:
                    agree = pw == mw
                    margin = mod[order[1]] / mod[order[0]] - 1.0 if mod[order[0]] > 0 else None
                names, lo, hi = span.get(P, (set(), n, n))  # crossovers among the hand-written ones
                span[P] = (names | {a for a in mod if not getattr(models[a], "native", False)},
                           min(lo, n), max(hi, n))
            wrows.append(WinnerRow(P, n, dtype, op, best, times[best], mw, pw, ps, agree,
                                   margin))
        xs = []
        for P, (names, lo, hi) in sorted(span.items()):
            names = sorted(names)
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    xs += crossovers(models[a], models[b], P, params, lo=lo, hi=hi,
                                     points=crossover_points)
        out.append(WhoWins(coll, tuple(wrows), tuple(xs)))
    return out


# --------------------------------------------------------------------------- two levels


@dataclass(frozen=True)
class TwoLevelParams(Record):
    """Intra-node and inter-node alpha-beta parameters, ranks per node, and gamma."""

    intra_alpha_s: float
    intra_beta_s_per_byte: float
    inter_alpha_s: float
    inter_beta_s_per_byte: float
    ranks_per_node: int
    gamma_s_per_byte: float = 0.0

    def __post_init__(self):
        if int(self.ranks_per_node) < 1:
            raise CCBenchError("ranks per node must be at least 1")

    @property
    def intra(self) -> NetworkParams:
        """The intra-node level as NetworkParams."""
        return NetworkParams(self.intra_alpha_s, self.intra_beta_s_per_byte,
                             self.gamma_s_per_byte, source="given")

    @property
    def inter(self) -> NetworkParams:
        """The inter-node level as NetworkParams."""
        return NetworkParams(self.inter_alpha_s, self.inter_beta_s_per_byte,
                             self.gamma_s_per_byte, source="given")


def two_level_allreduce_s(
    leader_alg,
    nranks: int,
    nbytes: int,
    params: TwoLevelParams,
    *,
    local_reduce=None,
    local_bcast=None,
) -> float:
    """Predicted seconds of a hierarchical (SMP-aware) allreduce.

    The scheme of MPICH's ``MPIR_Allreduce_intra_smp`` (Zhu, Goodell, Gropp, Thakur &
    Balaji, "Hierarchical Collectives in MPICH2", EuroPVM/MPI 2009): reduce to a leader
    inside each node, allreduce among the N = ceil(P / ppn) leaders, broadcast inside each
    node.  With p = min(ppn, P) ranks on a node and L = ceil(log2 p)::

        T = L (a_intra + n b_intra + n g)          binomial reduce   (Thakur et al. 2005)
          + C_leader(N, n) . (a_inter, b_inter, g) any registry allreduce among leaders
          + L (a_intra + n b_intra)                binomial bcast    (Thakur et al. 2005)

    `local_reduce` / `local_bcast` (Algorithm-like, with costs) replace the binomial terms,
    costed with the intra-node parameters.  The node-local phases of the fullest node
    bound the time; the leader phase vanishes on one node, the local phases at ppn = 1.
    """
    P, n = int(nranks), int(nbytes)
    ppn = int(params.ranks_per_node)
    p = min(ppn, P)
    nodes = math.ceil(P / ppn)
    g = float(params.gamma_s_per_byte or 0.0)
    lg = math.ceil(math.log2(p)) if p > 1 else 0
    ai, bi = params.intra_alpha_s, params.intra_beta_s_per_byte
    if local_reduce is not None:
        t_red = predict(local_reduce, p, n, params.intra) if p > 1 else 0.0
    else:
        t_red = lg * (ai + n * bi + n * g)
    if local_bcast is not None:
        t_bc = predict(local_bcast, p, n, params.intra) if p > 1 else 0.0
    else:
        t_bc = lg * (ai + n * bi)
    t_lead = predict(leader_alg, nodes, n, params.inter) if nodes > 1 else 0.0
    return t_red + t_lead + t_bc



