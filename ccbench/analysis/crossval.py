"""Cross-validation of the models: fit on runs at small rank counts, predict a run at a larger one (pure: no MPI).

``ccbench predict --from RUN_SMALL [--from RUN_SMALL2 ...] --against RUN_LARGE`` fits the
parameters to the small runs pooled (``ccbench.analysis.runs.param_sets``), prices every
algorithm the large run measured -- hand-written ones with their closed-form costs, the
library's own as their textbook equivalents (``ccbench.analysis.predict.model_registry``) --
at its rank count and sizes, and compares: per case measured / predicted, per collective the
median and the worst ratio, and per size whether the predicted fastest algorithm is the
measured fastest.  Holding data out to test a model fitted on the rest is cross-validation
(Stone, "Cross-validatory choice and assessment of statistical predictions", J. R. Stat.
Soc. B 36(2), 1974); here the held-out data are a larger scale, the extrapolation the models
are for.  The source runs are only read; the table is written only where ``-o`` says.
"""

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ccbench.analysis.fit import N_BOOT
from ccbench.analysis.predict import _unmodelled, _unsupported, path_of, predict
from ccbench.analysis.runs import PARAM_SETS, choose_params, param_sets, run_models
from ccbench.core.errors import UsageError
from ccbench.core.records import jsonable
from ccbench.store.run import SWEEP, Run

__all__ = ["CROSSVAL_SCHEMA", "CSV_COLUMNS", "cross_validate", "crossval_text", "ratio_summary", "winner_agreement"]

CROSSVAL_SCHEMA = "ccbench.crossval/1"
CSV_COLUMNS = ("collective", "algorithm", "kind", "modelled_as", "nranks", "nbytes", "dtype", "op", "measured_s",
               "predicted_s", "ratio")


def _worst(ratios: list[float]) -> float:
    """The ratio farthest from 1 on a log scale (a 0.5 is as far off as a 2)."""
    return max(ratios, key=lambda r: abs(math.log(r)))


def ratio_summary(cases: Iterable[Mapping]) -> list[dict]:
    """Per collective (and per kind: hand-written, native): cases, median and worst measured / predicted ratio."""
    groups: dict[tuple, list[float]] = {}
    for c in cases:
        r = c["ratio"]
        if r is None or not math.isfinite(r) or r <= 0:
            continue
        for kind in ("all", c["kind"]):
            groups.setdefault((c["collective"], kind), []).append(r)
    return [{"collective": coll, "kind": kind, "cases": len(rs), "median_ratio": float(np.median(rs)),
             "worst_ratio": float(_worst(rs))} for (coll, kind), rs in groups.items()]


def winner_agreement(cases: Iterable[Mapping]) -> list[dict]:
    """Per (collective, size, dtype, op): the measured fastest modelled algorithm against the predicted fastest.

    Both are chosen among the same algorithms (those measured there with a model); ``margin``
    is the measured runner-up's time over the fastest's, minus 1 (small margins make a
    disagreement a coin toss).  None of ``agree`` with fewer than two algorithms.
    """
    points: dict[tuple, dict[str, tuple[float, float]]] = {}
    for c in cases:
        key = (c["collective"], c["nbytes"], c.get("dtype"), c.get("op"))
        have = points.setdefault(key, {}).get(c["algorithm"])
        if have is None or c["measured_s"] < have[0]:
            points[key][c["algorithm"]] = (c["measured_s"], c["predicted_s"])
    out = []
    for (coll, n, dtype, op), algs in sorted(points.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        meas = sorted(algs, key=lambda a: algs[a][0])
        pred = min(algs, key=lambda a: algs[a][1])
        two = len(algs) > 1
        out.append({"collective": coll, "nbytes": n, "dtype": dtype, "op": op, "measured_winner": meas[0],
                    "predicted_winner": pred, "agree": (pred == meas[0]) if two else None,
                    "margin": algs[meas[1]][0] / algs[meas[0]][0] - 1.0 if two and algs[meas[0]][0] > 0 else None,
                    "algorithms": len(algs)})
    return out


def _load(r: Run) -> tuple[Path, dict, list[dict]]:
    if r.kind != SWEEP:
        raise UsageError(f"{str(r.path)!r} is a {r.kind!r} run; predict --against reads collective sweeps only")
    return r.path, r.meta, [row.to_dict() for row in r.rows]


def cross_validate(small_runs: Iterable[Run], large_run: Run, *, which: str = "auto",
                   collectives: Iterable[str] | None = None, n_boot: int = N_BOOT) -> dict:
    """Fit on the open `small_runs`, predict `large_run`'s rank count and sizes, compare (module docstring).

    `which`: the parameter set (``pingpong``, ``joint``, ``effective``, or ``auto``: the best
    the small runs support).  `collectives` limits the comparison.  UsageError when a run is
    missing, the large run's rank count is not above every small run's, or the runs lack the
    rows needed (parameters, or modelled cases to compare).
    """
    if which != "auto" and which not in PARAM_SETS:
        raise UsageError(f"unknown parameter set {which!r}; choose from auto, {', '.join(PARAM_SETS)}")
    small = [_load(r) for r in small_runs]
    if not small:
        raise UsageError("--against needs at least one --from RUN to fit on")
    lpath, lmeta, lrows = _load(large_run)
    small_ranks = sorted({int(r["nranks"]) for _, _, rows in small for r in rows if r["collective"] != "pingpong"}
                         | {int(m["nranks"]) for _, m, _ in small if m.get("nranks")})
    wanted = None if collectives is None else set(collectives)
    target = [r for r in lrows if r["collective"] != "pingpong" and (wanted is None or r["collective"] in wanted)]
    if not target:
        raise UsageError(f"run {lpath.name!r} has no collective rows to predict"
                         + (f" for {', '.join(sorted(wanted))}" if wanted else ""))
    P = sorted({int(r["nranks"]) for r in target})
    if max(small_ranks, default=0) >= min(P):
        raise UsageError(f"run {lpath.name!r} is at {', '.join(map(str, P))} ranks, not more than the runs fitted on "
                         f"({', '.join(map(str, small_ranks))}): cross-validation predicts a larger rank count")
    libs = {str(m.get("mpi_library") or "").strip().splitlines()[0] if m.get("mpi_library") else ""
            for _, m, _ in [*small, (lpath, lmeta, lrows)]}
    notes: list[str] = []
    if lmeta.get("oversubscribed") and not any(m.get("oversubscribed") for _, m, _ in small):
        notes.append(f"run {lpath.name!r} oversubscribes its cores (more ranks than cores) and the runs fitted on "
                     "do not: its ranks wait for a core, which no parameter fitted at the smaller count contains")
    if len(libs) > 1:
        notes.append("the runs used different MPI libraries: " + "; ".join(sorted(libs)))
    # the small runs pooled: their rows side by side (each keeps its rank count), their reduction timings together
    rows = [r for _, _, rs in small for r in rs]
    meta = dict(small[0][1])
    meta["reduce_local"] = [x for _, m, _ in small for x in (m.get("reduce_local") or [])]
    if lmeta.get("ranks_per_node"):  # the large run's ranks share the cache: its buffers turn cold sooner
        meta["ranks_per_node"] = lmeta["ranks_per_node"]
    models, unmodelled = run_models(rows + target, meta, notes)
    sets, chosen, why = param_sets(rows, meta, notes, models=models, n_boot=n_boot)
    chosen, why = choose_params(sets, chosen, why, which, notes, "the runs fitted on",
                                "they need ping-pong or modelled collective rows")
    params = sets[chosen]
    ppn = lmeta.get("ranks_per_node") if (lmeta.get("nodes") or 1) > 1 else None
    cases, skipped = [], {}
    for r in target:
        coll, name = r["collective"], r["algorithm"]
        alg = models.get(coll, {}).get(name)
        t = r.get("median_s")
        if t is None or not math.isfinite(t) or t <= 0:
            continue
        n, p = int(r["nbytes"]), int(r["nranks"])
        why_not = (unmodelled.get(f"{coll}/{name}", "no cost model") if alg is None
                   else _unsupported(alg, p) or _unmodelled(alg, p, n))
        if why_not:
            skipped.setdefault(f"{coll}/{name}", why_not)
            continue
        pred = predict(alg, p, n, params, ranks_per_node=ppn)
        describe = getattr(alg, "describe", None)
        cases.append({"collective": coll, "algorithm": name,
                      "kind": "native" if path_of(alg) == "mpi" else "hand-written",
                      "modelled_as": describe(p, n) if describe else name, "nranks": p, "nbytes": n,
                      "dtype": r.get("dtype"), "op": r.get("op"), "measured_s": float(t), "predicted_s": pred,
                      "ratio": t / pred if pred > 0 else math.nan})
    if not cases:
        raise UsageError(f"run {lpath.name!r} has no case with a cost model to compare")
    winners = winner_agreement(cases)
    rated = [w for w in winners if w["agree"] is not None]
    return {
        "schema": CROSSVAL_SCHEMA,
        "fit_runs": [{"name": p.name, "path": str(p), "nranks": m.get("nranks")} for p, m, _ in small],
        "against": {"name": lpath.name, "path": str(lpath), "nranks": P},
        "params": chosen,
        "why": why,
        "parameters": params.to_dict(),
        "notes": notes,
        "cases": cases,
        "summary": ratio_summary(cases),
        "winners": winners,
        "agreement": {"agree": sum(bool(w["agree"]) for w in rated), "sizes": len(rated)},
        "not_modelled": skipped,
    }


def crossval_text(doc: Mapping, csv_table: bool) -> str:
    """The cross-validation as a file's text: its cases as CSV (`csv_table`), else all of it as JSON."""
    if csv_table:
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(doc["cases"])
        return buf.getvalue()
    return json.dumps(jsonable(doc), indent=1, allow_nan=False) + "\n"
