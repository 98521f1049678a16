"""The analyses behind ``ccbench fit`` and ``ccbench predict`` (pure: no MPI import).

`fit_run` fits every curve of a stored run, the network parameters two ways (ping-pong
plus the local reduction benchmark, and jointly over the hand-written algorithms'
counted traffic), checks every modelled case against its prediction and says who wins
where; it writes ``fits.json`` and ``fits.csv`` beside the run, never into its files and
never over an earlier analysis.  `predict_table` evaluates every modelled algorithm at
rank counts and sizes from given or fitted parameters.  The maths lives in
`ccbench.analysis.fit` and `ccbench.analysis.predict`; this module only assembles it.
"""

import csv
import json
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ccbench import __version__
from ccbench.analysis.fit import (
    CONFIDENCE,
    N_BOOT,
    SEED,
    NetworkParams,
    _jsonable,
    compare_params,
    fit_curves,
    fit_joint,
    gamma_per_path,
    network_from_microbenchmarks,
    reduction_records,
)
from ccbench.analysis.predict import (
    TOLERANCE,
    TwoLevelParams,
    compare_to_measured,
    estimate_step_overhead,
    predicted_winners,
    prediction_table,
    ranks_per_node_for,
    who_wins,
)
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.units import parse_inverse_rate, parse_time
from ccbench.store.results import free_stem, resolve_run
from ccbench.store.run import load_run

__all__ = [
    "FITS_SCHEMA",
    "TWO_LEVEL_LEADERS",
    "fit_run",
    "params_from_run",
    "predict_table",
]

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


def _network(rows: list[dict], meta: Mapping, notes: list[str], **kw) -> NetworkParams | None:
    """Ping-pong (+ reduce_local) parameters, or None with a note when there is no ping-pong."""
    pp = [r for r in rows if r["collective"] == "pingpong"]
    if not pp:
        notes.append("no ping-pong rows: network parameters from ping-pong skipped "
                     "(run the pingpong collective to get them)")
        return None
    # gamma of the path the hand-written algorithms take (numpy), warm: the library's own
    # reduction (what native collectives pay) and the cold timings are reported apart
    recs = reduction_records(meta.get("reduce_local") or [])
    dtype, op = _reduction_choice(rows, recs)
    return network_from_microbenchmarks(pp, recs, dtype=dtype, op=op, **kw)


def _floor(floor: Mapping | None, pingpong: NetworkParams | None) -> dict | None:
    """The run's harness floor and ping-pong's alpha without it (alpha minus a zero-byte ping-pong's one-way time).

    A zero-byte ping-pong through the same loop moves no data, so its time is the cost of the
    path itself (Python, mpi4py, the library's entry); what alpha holds beyond it is the
    latency of the transport.  None for runs made before the floor was measured.
    """
    if not floor:
        return None
    out = {"empty_s": floor.get("empty_s"), "zero_count_s": dict(floor.get("zero_count_s") or {})}
    zero = out["zero_count_s"].get("pingpong")
    if pingpong is not None and pingpong.alpha_s is not None and zero is not None:
        out["alpha_without_floor_s"] = pingpong.alpha_s - zero
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


def fit_run(
    run_path,
    results_dir="results",
    *,
    n_boot: int = N_BOOT,
    tolerance: float = TOLERANCE,
    write: bool = True,
) -> dict:
    """Fit a stored run and write ``fits.json`` + ``fits.csv`` beside it; return the document.

    Fits every (collective, algorithm, nranks, dtype, op, in_place, root) curve
    (`ccbench.analysis.fit.fit_curves`), the network from ping-pong and ``reduce_local``
    (skipped with a note without ping-pong rows) and jointly over hand-written rows,
    compares the two, checks predicted against measured times with the parameters from
    ping-pong (else the joint ones) and says who wins where.  The run's own files are only
    read; an existing ``fits.json`` is kept and ``fits-2.json`` (``-3`` ...) written instead.
    """
    path = resolve_run(run_path, results_dir)
    meta, row_objs, warnings = load_run(path)
    rows = [r.to_dict() for r in row_objs]
    if not rows:
        raise UsageError(f"{str(path)!r} has no finished cases to fit")
    notes: list[str] = []
    kw = {"n_boot": n_boot}
    curves = fit_curves(rows, **kw)
    pingpong = _network(rows, meta, notes, **kw)
    try:
        joint = fit_joint([r for r in rows if r["collective"] != "pingpong"], **kw)
    except CCBenchError as exc:
        joint = None
        notes.append(f"joint fit skipped: {exc}")
    params = pingpong or joint
    doc: dict = {
        "schema": FITS_SCHEMA,
        "source_run": path.name,
        "source_path": str(path),
        "source_provenance": {k: meta.get(k) for k in _PROVENANCE_KEYS if k in meta},
        "provenance": {"ccbench": __version__, "numpy": np.__version__,
                       "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "n_boot": n_boot,
                       "seed": SEED, "confidence": CONFIDENCE, "tolerance": tolerance},
        "warnings": list(warnings),
        "notes": notes,
        "network": {
            "pingpong": pingpong.to_dict() if pingpong else None,
            "joint": joint.to_dict() if joint else None,
            "comparison": ([c.to_dict() for c in compare_params(pingpong, joint)]
                           if pingpong and joint else []),
            "used_for_predictions": params.source if params else None,
            "reduction_paths": gamma_per_path(meta.get("reduce_local") or [], **kw),
            "harness_floor": _floor(meta.get("harness_floor"), pingpong),
        },
        "curves": [c.to_dict() for c in curves],
        "model_checks": [],
        "who_wins": [],
    }
    if params is not None:
        # the hierarchical allreduce is priced at the run's ranks per node when it spans nodes
        ppn = meta.get("ranks_per_node") if (meta.get("nodes") or 1) > 1 else None
        overhead = estimate_step_overhead(rows, params, ranks_per_node=ppn)
        doc["network"]["step_overhead"] = (None if overhead is None else
                                           {"seconds": overhead[0], "cases": overhead[1], "max_bytes": 1024})
        checks = compare_to_measured(rows, params, tolerance=tolerance,
                                     oversubscribed=bool(meta.get("oversubscribed")),
                                     curve_breakpoints=curves,
                                     step_overhead_s=overhead[0] if overhead else None, ranks_per_node=ppn)
        doc["model_checks"] = [c.to_dict() for c in checks]
        doc["who_wins"] = [w.to_dict() for w in who_wins(rows, params, ranks_per_node=ppn)]
    else:
        notes.append("no network parameters: predictions and who-wins skipped")
    if meta.get("lab"):  # an emulated-lab run: fitted against injected delay and rate
        from ccbench.analysis.lab_check import fitted_vs_injected

        doc["lab"] = fitted_vs_injected(rows, meta["lab"], n_boot=n_boot)
    if write:
        base = free_stem(path, "fits", (".json", ".csv"))
        jname, cname = f"{base}.json", f"{base}.csv"
        doc["files"] = {"json": jname, "csv": cname}
        with open(path / cname, "x", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
            w.writeheader()
            w.writerows(_csv_rows(curves))
        with open(path / jname, "x") as f:
            json.dump(_jsonable(doc), f, indent=2, allow_nan=False)  # the lab block may hold NaN
            f.write("\n")
    return doc


# --------------------------------------------------------------------------- predict


def params_from_run(run_path, results_dir="results", *, n_boot: int = N_BOOT) -> tuple[NetworkParams, Path]:
    """Network parameters (ping-pong + reduce_local) of a stored run, and the run's path.

    Deterministic (fixed bootstrap seed): the same values `fit_run` reports as "pingpong".
    """
    path = resolve_run(run_path, results_dir)
    meta, row_objs, _ = load_run(path)
    rows = [r.to_dict() for r in row_objs]
    notes: list[str] = []
    params = _network(rows, meta, notes, n_boot=n_boot)
    if params is None:
        raise UsageError(f"run {path.name!r} has no ping-pong rows: measure pingpong in it, "
                         "or give --alpha and --beta")
    return params, path


def given_params(from_run, results_dir, alpha, beta, gamma, command: str = "predict") -> tuple[NetworkParams, str]:
    """(parameters, where they come from) for a prediction: a run's fits, or the values given.

    Either `from_run` (ping-pong alpha and beta, gamma from the run's local reduction
    benchmark; see `params_from_run`) or `alpha` and `beta` (and optionally `gamma`) as
    the user typed them (`parse_time`, `parse_inverse_rate`), never both.
    """
    if from_run and (alpha or beta or gamma):
        raise UsageError("give either --from RUN or --alpha/--beta/--gamma, not both")
    if not from_run and (alpha is None or beta is None):
        raise UsageError(f"{command} needs --from RUN, or both --alpha and --beta")
    if from_run:
        params, path = params_from_run(from_run, results_dir)
        return params, (f"fitted to run {path.name} ({path}): ping-pong alpha and beta, gamma from its "
                        "local reduction benchmark")
    params = NetworkParams(parse_time(alpha, "--alpha"), parse_inverse_rate(beta, "--beta"),
                           parse_inverse_rate(gamma, "--gamma") if gamma is not None else None)
    return params, "given on the command line"


def _check_params(params: NetworkParams) -> None:
    for name in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte"):
        v = getattr(params, name)
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise UsageError(f"{name.split('_')[0]} must be a finite number >= 0, got {v}")
    if params.alpha_s is None or params.beta_s_per_byte is None:
        raise UsageError("alpha and beta are both needed for predictions")


def predict_table(
    params: NetworkParams,
    ranks: Iterable[int],
    sizes: Iterable[int],
    collectives: Iterable[str] | None = None,
    *,
    two_level: TwoLevelParams | None = None,
    algorithms=None,
    ranks_per_node: int | None = None,
) -> list[dict]:
    """Predicted seconds of every modelled algorithm, per collective and rank count.

    Returns one dict per (collective, nranks): ``sizes``, ``times_s`` {algorithm: [s per
    size]} (NaN-free: algorithms that cannot run at that rank count are left out) and
    ``winners`` (the fastest algorithm per size).  With `two_level`, allreduce also gets
    ``two-level/ring`` and ``two-level/rabenseifner`` (`predict.two_level_allreduce_s`).
    Node-aware costs (the hierarchical allreduce) are priced on nodes of `ranks_per_node`
    ranks, by default the two-level model's, else all ranks on one node.
    """
    if algorithms is None:
        from ccbench.algorithms import REGISTRY  # imports no MPI

        algorithms = REGISTRY
    _check_params(params)
    ranks, sizes = [int(p) for p in ranks], [int(n) for n in sizes]
    rpn = ranks_per_node_for(ranks_per_node, two_level)
    if collectives is None:
        colls = [c for c, algs in algorithms.items()
                 if any(a.cost is not None for a in algs.values())]
    else:
        colls = list(collectives)
        for c in colls:
            if c not in algorithms:
                raise UsageError(f"unknown collective {c!r}; choose from {', '.join(algorithms)}")
            if not any(a.cost is not None for a in algorithms[c].values()):
                raise UsageError(f"collective {c!r} has no algorithm with a cost model")
    out = []
    for coll in colls:  # one prediction API: analysis.predict.prediction_table, grouped per rank count
        preds = prediction_table({coll: algorithms[coll]}, ranks, sizes, params, two_level=two_level,
                                 ranks_per_node=rpn)
        leaders = [f"two-level/{lead}" for lead in TWO_LEVEL_LEADERS]
        for P in ranks:
            mine = [pr for pr in preds if pr.nranks == P]
            kept = ([pr for pr in mine if not pr.algorithm.startswith("two-level/")]
                    + [pr for lead in leaders for pr in mine if pr.algorithm == lead])
            if not kept:
                continue
            times: dict[str, list[float]] = {}
            for pr in kept:
                times.setdefault(pr.algorithm, []).append(pr.predicted_s)
            wins = {w.nbytes: w.algorithm for w in predicted_winners(kept)}
            out.append({"collective": coll, "nranks": P, "sizes": sizes, "times_s": times,
                        "winners": [wins[n] for n in sizes]})
    return out
