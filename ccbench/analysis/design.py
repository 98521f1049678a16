"""How to split measuring time between launches and samples, from a replicated run's own spread and costs.

A case measured in K launches of n samples each has a typical time whose variance (log
scale) is sigma_b^2 / K + sigma_w^2 / (K n) (Cochran, Sampling Techniques, 3rd ed. 1977,
sec. 10.2), where sigma_b^2 is the launch-to-launch and sigma_w^2 the call-to-call component
(`ccbench.core.replication.variance_components`).  One more launch costs its fixed part --
starting the job, MPI_Init, each case's buffers, warm-up and check -- plus n samples; for a
fixed time the variance is smallest at n* = sqrt(c_launch sigma_w^2 / (c_sample sigma_b^2))
samples per launch (Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM 2013;
``ccbench.core.replication.optimal_split``).  `launch_design` measures every term on a run of
several launches: the components per case, the cost of a sample (the case's median time), and
the fixed cost of a launch (its wall time minus the time spent in samples, shared evenly by
its cases), and compares the run's own split with the optimal one at the same total time.

Pure: no MPI.
"""

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ccbench.core.errors import UsageError
from ccbench.core.replication import cv_from_log_sd, min_detectable_ratio, optimal_split, variance_components

__all__ = ["CaseDesign", "LaunchDesign", "launch_design", "launch_wall_times"]


@dataclass(frozen=True)
class CaseDesign:
    """One case: its components (log scale), costs per launch and per sample, and the optimal samples per launch."""

    label: str
    var_within: float
    var_between: float
    cost_sample_s: float
    cost_launch_s: float     # this case's share of one launch's fixed cost
    samples_per_launch: float
    optimal_samples: float   # n* (inf when no launch effect is visible)


@dataclass(frozen=True)
class LaunchDesign:
    """The run's split against the optimal one, for the same total time (medians over cases)."""

    launches: int
    cases: int
    launch_wall_s: float              # mean wall time of one launch
    launch_fixed_s: float             # mean fixed part of it (wall minus the time in samples)
    within_cv: float                  # median over cases
    between_cv: float
    samples_per_launch: float         # median over cases, as run
    optimal_samples: float            # median n* over cases (clipped to 1 .. the samples the run took)
    optimal_samples_iqr: tuple[float, float]
    se_as_run: float                  # median relative standard error of the typical time, as run
    launches_at_optimum: float        # launches of n* samples that take the run's total time
    se_at_optimum: float              # their median relative standard error
    mdr_as_run: float                 # smallest ratio two such runs tell apart (80% power, 5% level)
    mdr_at_optimum: float
    per_case: list[CaseDesign]


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def launch_wall_times(meta: dict, part_metas: list[dict]) -> list[float]:
    """Wall seconds of each launch: ``wall_s`` where the launcher recorded it, else its run's end minus start.

    Start and end times are stored to the second, and the job's start-up before its run
    opened (starting the launcher, Python, MPI_Init) is not in them: with only those, the
    fixed cost of a launch is underestimated by about that start-up.
    """
    out = []
    for doc, m in zip(meta.get("parts") or [], part_metas, strict=True):
        if isinstance(doc.get("wall_s"), (int, float)):
            out.append(float(doc["wall_s"]))
        elif m.get("start_time") and m.get("end_time"):
            out.append(max(0.0, _stamp(m["end_time"]) - _stamp(m["start_time"])))
    return out


def _rse(var_within: float, var_between: float, launches: float, n: float) -> float:
    """Relative standard error of a K x n typical time (log-scale sd of its mean, as a CV)."""
    return cv_from_log_sd(math.sqrt(var_between / launches + var_within / (launches * n)))


def launch_design(rows, meta: dict, part_metas: list[dict]) -> LaunchDesign:
    """The design analysis of a run of several launches (module docstring); rows are its pooled rows."""
    launches = int(meta.get("launches") or 1)
    if launches < 2 or not meta.get("parts"):
        raise UsageError("a design needs a run of several launches (ccbench launch --launches K, K >= 2): one "
                         "launch cannot show how launches differ")
    walls = launch_wall_times(meta, part_metas)
    if not walls:
        raise UsageError("the run's launches recorded no start and end times")
    # one launch = one round of parts: a round's wall time is the sum of its parts'
    wall = float(sum(walls)) / launches
    rows = [r for r in rows if r.ok and r.n_launches >= 2]
    cases = []
    in_samples = 0.0
    for r in rows:
        blocks = [np.asarray(s, dtype=np.float64) for _, s in r.launch_blocks()]
        in_samples += sum(float(np.sum(b)) for b in blocks) / len(blocks)
        if min(b.size for b in blocks) < 2 or any(np.any(b <= 0) for b in blocks):
            continue
        vc = variance_components(blocks)
        cases.append((r, vc, float(np.mean([b.size for b in blocks]))))
    if not cases:
        raise UsageError("no case of the run has two or more samples in each of two or more launches")
    fixed = max(wall - in_samples, 0.0)
    share = fixed / len(rows)
    per_case = []
    for r, vc, n in cases:
        nstar = optimal_split(vc.var_within, vc.var_between, share, r.median_s) if share > 0 else math.inf
        per_case.append(CaseDesign(f"{r.collective}/{r.algorithm} {r.nbytes} B", vc.var_within, vc.var_between,
                                   r.median_s, share, n, nstar))
    vw = np.array([c.var_within for c in per_case])
    vb = np.array([c.var_between for c in per_case])
    n_run = np.array([c.samples_per_launch for c in per_case])
    t_sample = np.array([c.cost_sample_s for c in per_case])
    # n* per case, at least one sample and at most all the samples the run took of it
    n_opt = np.clip(np.array([c.optimal_samples for c in per_case]), 1.0, n_run * launches)
    # the run's total time spent on launches of n* samples per case instead
    per_launch_opt = fixed + float(np.sum(t_sample * n_opt))
    k_opt = launches * wall / per_launch_opt if per_launch_opt > 0 else math.nan
    se_run = [_rse(w, b, launches, n) for w, b, n in zip(vw, vb, n_run, strict=True)]
    se_opt = ([_rse(w, b, k_opt, n) for w, b, n in zip(vw, vb, n_opt, strict=True)]
              if math.isfinite(k_opt) and k_opt > 0 else [math.nan])
    # the spread of one launch's summary: the launch effect plus the summary's own noise
    cv_run = cv_from_log_sd(math.sqrt(float(np.median(vb + vw / n_run))))
    cv_opt = cv_from_log_sd(math.sqrt(float(np.median(vb + vw / n_opt))))
    q1, q3 = (float(v) for v in np.percentile(n_opt, [25, 75]))
    return LaunchDesign(
        launches=launches, cases=len(per_case), launch_wall_s=wall, launch_fixed_s=fixed,
        within_cv=cv_from_log_sd(math.sqrt(float(np.median(vw)))),
        between_cv=cv_from_log_sd(math.sqrt(float(np.median(vb)))),
        samples_per_launch=float(np.median(n_run)), optimal_samples=float(np.median(n_opt)),
        optimal_samples_iqr=(q1, q3),
        se_as_run=float(np.median(se_run)), launches_at_optimum=k_opt, se_at_optimum=float(np.median(se_opt)),
        mdr_as_run=min_detectable_ratio(cv_run, launches),
        mdr_at_optimum=(min_detectable_ratio(cv_opt, max(1, int(k_opt))) if math.isfinite(k_opt) and k_opt >= 1
                        else math.nan),
        per_case=per_case,
    )
