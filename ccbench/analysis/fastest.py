"""The fastest of a set of stored rows, with its runner-up and a significance test, for both run kinds.

Grouping of sweep rows into curves (one collective at one rank count, dtype, op, in place,
root; algorithms native first) and of workload rows into whole steps, then per size (sweep)
or per variant (workload) the fastest correct row by stored median against its runner-up,
tested with the two-sided Mann-Whitney U test of their raw samples (Mann & Whitney 1947).
"""

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.stats import mann_whitney_u
from ccbench.store.results import Row
from ccbench.store.workload_rows import WorkloadRow

__all__ = ["SIGNIFICANCE", "Curves", "algorithm_order", "fastest_of", "fastest_per_size", "fastest_per_variant",
           "group_rows", "step_rows"]

#: Two-sided level of the Mann-Whitney U tests (fastest vs runner-up, run vs run).
SIGNIFICANCE = 0.05


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


def fastest_of(rows: Iterable, name=lambda r: r.algorithm, alpha: float = SIGNIFICANCE) -> dict | None:
    """The correct row with the smallest stored median among `rows`, its runner-up, and a test.

    ``fastest`` / ``runner_up`` are ``name(row)``; ``margin`` = runner-up median / fastest
    median - 1; ``p_value`` is the two-sided Mann-Whitney U test (Mann & Whitney 1947,
    ``ccbench.core.stats.mann_whitney_u``) of the two rows' raw samples, ``significant`` when it
    is below `alpha` (None without a runner-up or with fewer than two samples on a side).
    None when no row is correct with a finite median.
    """
    cands = sorted((r for r in rows if r is not None and r.ok and math.isfinite(r.median_s)),
                   key=lambda r: r.median_s)
    if not cands:
        return None
    best = cands[0]
    second = cands[1] if len(cands) > 1 else None
    p = None
    if second is not None and len(best.samples_s) > 1 and len(second.samples_s) > 1:
        p = mann_whitney_u(best.samples_s, second.samples_s)[1]
    return {
        "fastest": name(best), "median_s": best.median_s,
        "runner_up": name(second) if second else None,
        "runner_up_s": second.median_s if second else None,
        "margin": (second.median_s / best.median_s - 1.0) if second and best.median_s > 0 else None,
        "p_value": p, "significant": None if p is None else p < alpha,
    }


def fastest_per_size(g: Curves, alpha: float = SIGNIFICANCE) -> list[dict]:
    """Per size: the correct algorithm with the smallest stored median, the runner-up, and a test
    (``fastest_of`` of the algorithms' rows at that size, with ``nbytes``)."""
    out = []
    for n in g.sizes:
        f = fastest_of((next((r for r in rows if r.nbytes == n), None) for rows in g.by_algorithm.values()),
                       alpha=alpha)
        if f is not None:
            out.append({"nbytes": n, **f})
    return out



def step_rows(rows: Sequence[WorkloadRow]) -> list[WorkloadRow]:
    """The rows that are whole measurements: steps of ddp/zero/moe (part -1), every overlap/straggler row."""
    return [r for r in rows if r.part == -1 or r.workload in ("overlap", "straggler")]


def fastest_per_variant(rows: Sequence[WorkloadRow], alpha: float = SIGNIFICANCE) -> list[dict]:
    """The fastest algorithm per variant (per size for stragglers) and overall, each against its runner-up.

    Each entry is ``ccbench.present.report.fastest_of`` of the candidates' stored rows (smallest
    median among correct rows, two-sided Mann-Whitney U test of the two raw sample sets)
    with ``what``: the variant, the size, or "all variants" (every variant and algorithm).
    Overlap runs have one algorithm per call (native) and get none.
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
            out.append({"what": what, **f})
    if len(by) > 1 and steps[0].workload != "straggler":
        f = fastest_of(steps, name=lambda r: f"{r.variant}: {r.algorithm}", alpha=alpha)
        if f is not None:
            out.append({"what": "all variants", **f})
    return out

