"""One stored row from the rows of one case measured in several launches.

A replicated run (``ccbench launch --launches K``) measures every case once per launch; its
merged tables hold one row per case whose raw samples are the launches' samples one after
the other, with ``launches`` / ``launch_samples`` saying which launch measured which
(``ccbench.store.results.StoredRow``).  The launch is the unit of replication (Kalibera &
Jones, ISMM 2013; Hunold & Carpen-Amarie, IEEE TPDS 2016): the row's typical time is the
geometric mean of the launches' medians and its interval the two-stage bootstrap of
``ccbench.core.replication.hierarchical_bootstrap_ci``, which resamples launches, then the
samples within them.  Statistics that describe the samples themselves (min, max, mean,
percentiles, standard deviation) are those of all samples pooled.
"""

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ccbench.core.replication import hierarchical_bootstrap_ci, variance_components

__all__ = ["BOOTSTRAP_REPLICATES", "LAUNCH_SPREAD", "launch_spread", "pool_harness_floor", "pool_launches", "pool_load",
           "pool_memory_bandwidth", "pool_reduce_local", "pool_rows"]

#: Replicates of the two-stage bootstrap behind a pooled row's interval (fixed seed: the same
#: rows always give the same interval).
BOOTSTRAP_REPLICATES = 1000

#: Flag of a pooled row whose launches differ by more than the noise within a launch.
LAUNCH_SPREAD = "launch_spread"

# pooled statistics of the samples themselves, where the row type has them
_POOLED = {"min_s": np.min, "max_s": np.max, "mean_s": np.mean, "p90_s": lambda x: np.percentile(x, 90),
           "p95_s": lambda x: np.percentile(x, 95), "p99_s": lambda x: np.percentile(x, 99),
           "stddev_s": lambda x: np.std(x, ddof=1) if x.size > 1 else math.nan}
# per-launch measurements other than the samples (workload rows; OSU's per-rank means; a persistent algorithm's
# set-up): the median over launches
_PER_LAUNCH = ("comm_s", "compute_s", "total_s", "overlap_pct", "baseline_s", "slowdown",
               "rank_mean_min_s", "rank_mean_avg_s", "rank_mean_max_s", "setup_s", "osu_comm_s", "osu_overall_s",
               "osu_cpu_s", "osu_test_s", "imb_pure_s", "imb_ovrl_s", "imb_cpu_s", "overlap_imb_pct")


def launch_spread(blocks: Sequence[np.ndarray]) -> bool:
    """True when the launch-to-launch spread exceeds the within-launch spread.

    One-way random-effects components on the log scale (``variance_components``): the
    between-launch standard deviation sigma_b is larger than the within-launch sigma_w, i.e.
    which launch a sample came from matters more than which call it was.
    """
    xs = [np.asarray(b, dtype=np.float64) for b in blocks if len(b)]
    if len(xs) < 2 or any(np.any(x <= 0) for x in xs):
        return False
    vc = variance_components(xs)
    return bool(math.isfinite(vc.var_within) and vc.var_between > vc.var_within)


def pool_launches(blocks: Sequence[tuple[int, object]]):
    """One row from [(launch number, that launch's row of the case)], in any order.

    The rows must be of one case and one launch each.  Typical time (``median_s``): the
    geometric mean of the launches' medians (the median itself with one launch); interval:
    the two-stage bootstrap at 95% (``hierarchical_bootstrap_ci``, ``BOOTSTRAP_REPLICATES``
    replicates, seed 0); bandwidths follow the typical time; wrong elements add up; flags are
    the union, plus ``launch_spread`` (``launch_spread``); stop reasons are joined with ';'.
    """
    if not blocks:
        raise ValueError("no rows to pool")
    blocks = sorted(blocks, key=lambda b: b[0])
    numbers = [n for n, _ in blocks]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"launch numbers repeat: {numbers}")
    rows = [r for _, r in blocks]
    for r in rows:
        if r.launches:
            raise ValueError("pool_launches takes rows of one launch each")
    first = rows[0]
    xs = [np.asarray(r.samples_s, dtype=np.float64) for r in rows]
    pooled = np.concatenate(xs) if xs else np.empty(0)
    fields = {f.name for f in dataclasses.fields(first)}
    out: dict = {"samples_s": tuple(float(v) for v in pooled), "samples": int(pooled.size),
                 "launches": tuple(numbers), "launch_samples": tuple(int(x.size) for x in xs),
                 "nwrong": sum(r.nwrong for r in rows),
                 "stop_reason": ";".join(dict.fromkeys(r.stop_reason for r in rows if r.stop_reason))}
    full = [x for x in xs if x.size]
    flags = list(dict.fromkeys(f for r in rows for f in r.flags))
    if len(full) >= 2 and all(np.all(x > 0) for x in full):
        ci = hierarchical_bootstrap_ci(full, n_boot=BOOTSTRAP_REPLICATES, seed=0)
        out.update(median_s=ci.estimate_s, ci_low_s=ci.low_s, ci_high_s=ci.high_s)
        if launch_spread(full) and LAUNCH_SPREAD not in flags:
            flags.append(LAUNCH_SPREAD)
    if pooled.size:
        out.update({k: float(fn(pooled)) for k, fn in _POOLED.items() if k in fields})
    for k in _PER_LAUNCH:
        vals = [getattr(r, k) for r in rows if k in fields and getattr(r, k) is not None]
        if vals:
            out[k] = float(np.median(vals))
    if "algbw_gbs" in fields and out.get("median_s", 0) > 0 and first.median_s > 0:
        scale = first.median_s / out["median_s"]
        out.update(algbw_gbs=first.algbw_gbs * scale, busbw_gbs=first.busbw_gbs * scale)
    out["flags"] = tuple(flags)
    return dataclasses.replace(first, **out)


def pool_rows(launch_rows: Iterable[tuple[int, object]], key: Callable) -> list:
    """Pool [(launch number, row)] of many cases into one row per case (``key(row)``), in first-seen order."""
    groups: dict = {}
    for n, r in launch_rows:
        groups.setdefault(key(r), []).append((n, r))
    return [pool_launches(g) for g in groups.values()]


def _copy_setup(rec: dict) -> tuple:
    """What a ``memory_bandwidth`` record copied, and where: two records of the same setup pool their times."""
    one = rec["one_core"]
    nodes = tuple((n.get("host"), n.get("ranks"), n.get("nbytes"), n.get("counted_bytes")) for n in rec["all_ranks"])
    return one.get("host"), one.get("nbytes"), one.get("counted_bytes"), rec.get("method"), nodes


def pool_memory_bandwidth(records: Sequence[tuple[int, dict | None]]) -> dict | None:
    """One ``memory_bandwidth`` record (``ccbench.measure.membw``) from the launches' records.

    Every launch times the node's STREAM copy before its first case.  The records of the
    launches that copied the same buffers on the same hosts as the first one are pooled: their
    repetitions' times are concatenated (one-core and per node), so the rate derived from the
    record (``ccbench.analysis.limits``: the best repetition, STREAM's rule) is the best of all
    launches' repetitions, and ``launches`` lists the launches pooled.  A launch whose record
    has another shape (other hosts, another cache size) is listed in ``launches_not_pooled``.
    None when no launch has a record.
    """
    have = [(n, r) for n, r in records if r and r.get("one_core") and r.get("all_ranks")]
    if not have:
        return None
    first = have[0][1]
    setup = _copy_setup(first)
    pooled, left = [], []
    for n, r in have:
        (pooled if _copy_setup(r) == setup else left).append((n, r))
    one = dict(first["one_core"], seconds=[s for _, r in pooled for s in r["one_core"]["seconds"]])
    nodes = [dict(node, seconds=[s for _, r in pooled for s in r["all_ranks"][i]["seconds"]])
             for i, node in enumerate(first["all_ranks"])]
    out = dict(first, one_core=one, all_ranks=nodes, repetitions=len(one["seconds"]), launches=[n for n, _ in pooled])
    if left:
        out["launches_not_pooled"] = [n for n, _ in left]
    return out


def pool_harness_floor(records: Sequence[tuple[int, dict | None]]) -> dict | None:
    """One ``harness_floor`` record (``ccbench.measure.gamma.harness_floor``) from the launches' records.

    Each figure is the median over the launches that measured it (the launch is the unit of
    replication: one launch's floor is one draw of the process placement and library state);
    ``launches`` keeps each launch's own record.  None when no launch has one.
    """
    have = [(n, r) for n, r in records if r]
    if not have:
        return None
    empty = [float(r["empty_s"]) for _, r in have if r.get("empty_s") is not None]
    colls = sorted({c for _, r in have for c in (r.get("zero_count_s") or {})})
    zero = {c: float(np.median([r["zero_count_s"][c] for _, r in have if c in (r.get("zero_count_s") or {})]))
            for c in colls}
    return {"empty_s": float(np.median(empty)) if empty else None, "zero_count_s": zero,
            "launches": {str(n): r for n, r in have}}


def pool_load(records: Sequence[tuple[int, dict | None]]) -> dict | None:
    """One ``load`` record (``ccbench.measure.hardware.load_record``) from the launches' records: the largest share
    of the machine that anything else took during any launch (a verdict is as good as its most disturbed launch),
    with each launch's own record under ``launches``.  None when no launch has one."""
    have = [(n, r) for n, r in records if r]
    if not have:
        return None
    worst = max(have, key=lambda nr: nr[1].get("other_fraction", 0.0))[1]
    return {**worst, "launches": {str(n): r for n, r in have}}


def pool_reduce_local(records: Sequence[tuple[int, list | None]]) -> list[dict]:
    """Every launch's local-reduction records (``ccbench.measure.gamma``) in one list, each with its ``launch``.

    The fits of gamma (``ccbench.analysis.fit.fit_gamma``) take every record of a (dtype, op,
    path, temperature) at once, so the launches' records fit together.
    """
    return [dict(rec, launch=n) for n, recs in records for rec in (recs or [])]
