"""Pure predictions of a workload step at any scale: the schedule priced with the registry's costs.

Every call of a step is priced with `ccbench.analysis.predict.predict` (the algorithm's closed-form
Cost(P, n) times alpha, beta, gamma; Thakur, Rabenseifner & Gropp 2005) and the calls are
added up: the model assumes calls do not overlap each other or compute, so the figure is
the step's exposed communication time when nothing hides it.
"""

import itertools

from ccbench.core.errors import UsageError
from ccbench.workloads.models import load_model
from ccbench.workloads.schedule import DISPATCHES, Schedule, ddp_schedule, moe_schedule, predict_step_s, zero_schedule

__all__ = ["predict_workload"]


def _modelled(collective: str, P: int) -> list:
    from ccbench.algorithms import REGISTRY
    from ccbench.core.collectives import COLLECTIVES

    op = "sum" if COLLECTIVES[collective].reduction else None
    return [a for a in REGISTRY[collective].values()  # a persistent or non-blocking twin: the blocking one's model
            if a.cost is not None and a.setup is None and a.nonblocking is None and a.unsupported(P, op) is None]


def _schedules(kind: str, P: int, model, itemsize: int, bucket_mb: float, first_bucket_mb: float,
               eps, moe: dict) -> list[Schedule]:
    if kind == "ddp":
        return [ddp_schedule(model, itemsize, "bucketed", bucket_mb, first_bucket_mb or None),
                ddp_schedule(model, itemsize, "per_tensor")]
    if kind == "zero":
        return [zero_schedule(model, P, v) for v in ("zero2", "ddp_flat", "zero3", "ddp_layer")]
    degrees = [e for e in (eps or sorted({8, P})) if e <= P and P % e == 0]
    return [moe_schedule(ep=e, dispatch=d, **moe) for e in degrees for d in DISPATCHES]


def predict_workload(kind: str, ranks: list[int], params, *, itemsize: int = 4, model: str = "gpt2",
                     bucket_mb: float = 25.0, first_bucket_mb: float = 1.0, eps=None, tokens: int = 1024,
                     hidden: int = 1024, experts_per_rank: int = 2, top_k: int = 2,
                     capacity_factor: float = 1.0) -> list[dict]:
    """Predicted step communication time of every schedule variant x modelled algorithm, per rank count.

    One dict per (nranks, variant, algorithms): ``nranks``, ``group_ranks``, ``variant``,
    ``algorithm`` ("collective=name,..."), ``ncalls``, ``nbytes`` and ``time_s``.
    """
    from ccbench.analysis.runs import _check_params

    _check_params(params)
    m = load_model(model) if kind in ("ddp", "zero") else None
    moe = dict(tokens=tokens, hidden=hidden, experts_per_rank=experts_per_rank, top_k=top_k,
               capacity_factor=capacity_factor)
    out = []
    for P in ranks:
        for sch in _schedules(kind, P, m, itemsize, bucket_mb, first_bucket_mb, eps, moe):
            G = sch.group_ranks or P
            colls = sch.collectives()
            for combo in itertools.product(*[_modelled(c, G) for c in colls]):
                algs = dict(zip(colls, combo, strict=True))
                out.append({"nranks": P, "group_ranks": G, "variant": sch.variant,
                            "algorithm": ",".join(f"{c}={a.name}" for c, a in algs.items()),
                            "ncalls": len(sch.calls), "nbytes": sch.nbytes(itemsize, G),
                            "time_s": predict_step_s(sch, algs, P, itemsize, params)})
    if not out:
        raise UsageError(f"no modelled algorithm can run {kind} at {', '.join(map(str, ranks))} ranks")
    return out


