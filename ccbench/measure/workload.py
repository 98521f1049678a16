"""Drive a workload under MPI: plan its schedules, measure, validate, store the run directory.

The run directory has the sweep's format (`ccbench.store.results`: run.json with schema and
provenance, cases.jsonl and cases.csv appended and flushed per row) with ``"kind":
"workload"`` in run.json and `WorkloadRow` rows.  A run is a list of items -- a schedule
with one choice of algorithms (ddp, zero, moe), one collective at one size (overlap,
straggler) -- measured under the session layer shared with sweeps
(`ccbench.measure.session`): SIGINT/SIGTERM between items, --resume, the watchdog,
CCBENCH_FAULT, progress.

A replicated run (``launches`` K > 1) is K such jobs, each a launch with its share of the
budget and steps (``WorkloadConfig.per_launch``) and its items in a seeded shuffled order
(``launch_order``; the items are independent measurements: each allocates, warms up, times
and validates on its own); ``ccbench workload KIND --launch N`` starts them and merges them
into one run (`workload_replication`, ``ccbench.measure.multilaunch``).  A run of one launch
keeps the plan's order.

``--loop`` (``WorkloadConfig.loop``) says what times the library's own blocking calls, as for
sweeps: an item whose every call is a native blocking collective (a DDP or ZeRO step with native
algorithms, a MoE step with native all-to-alls, a straggler row of the native algorithm) is timed
by the compiled loop (`ccbench.measure.compiled.Sequence`: the step's calls back to back per
sample in C, the same barrier, timers and per-call times as the Python step timer) when the run
uses it; hand-written algorithms and overlap's non-blocking calls stay in Python.  run.json's
``loop`` says which loop timed which item, and why an item stayed in Python.  Validation is the
same Python pass whatever timed the item.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccbench.algorithms import REGISTRY, get
from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import is_half
from ccbench.core.errors import UsageError
from ccbench.core.stats import summarize
from ccbench.core.units import fmt_time, format_size
from ccbench.measure import compiled
from ccbench.measure.driver import Item, Plan, common_stop, drive
from ccbench.measure.session import agree, check_launch, local_ranks, read_fault, require_memory
from ccbench.measure.timing import TimingSettings, measure
from ccbench.measure.workload_config import WorkloadConfig
from ccbench.measure.workload_engine import (
    ComputeKernel,
    DelayedSync,
    StepBuffers,
    StepTimer,
    measure_overlap,
    step_calls,
)
from ccbench.store.workload_rows import KIND, WORKLOAD_COLUMNS, WorkloadRow
from ccbench.workloads.models import Model, load_model
from ccbench.workloads.overlap import RankTimes, imb_overlap_pct, imb_times, osu_overlap_pct, osu_times
from ccbench.workloads.schedule import Schedule, ddp_schedule, moe_schedule, straggler_slowdown, zero_schedule

__all__ = ["WorkloadItem", "complete_items", "loop_items", "plan_items", "plan_schedules", "pool_key", "run_workload",
           "step_sequence", "workload_replication"]


def _ep_degrees(cfg: WorkloadConfig, P: int) -> list[int]:
    eps = list(cfg.ep) or [d for d in range(2, P + 1) if P % d == 0] or [1]
    bad = [e for e in eps if P % e]
    if bad:
        raise UsageError(f"expert-parallel degree {bad[0]} does not divide the {P} ranks")
    return eps


def plan_schedules(cfg: WorkloadConfig, P: int, model: Model | None) -> tuple[list, list]:
    """[(schedule, {collective: Algorithm})] of a ddp, zero or moe workload at P ranks, and skips.

    A named hand-written algorithm that cannot run at this rank count is skipped with
    its reason (stored in run.json), as ``algorithms = all`` skips in a sweep.
    """
    items, skipped = [], []

    def add(schedule: Schedule, names: dict[str, str]) -> None:
        algs = {c: get(c, a) for c, a in names.items()}
        G = schedule.group_ranks or P
        for c, alg in algs.items():
            why = alg.unsupported(G, "sum" if COLLECTIVES[c].reduction else None)
            if why:
                skipped.append({"what": f"{schedule.variant} {c}/{alg.name}", "why": why})
                return
        items.append((schedule, algs))

    if cfg.workload == "ddp":
        for mode in cfg.modes:  # every bucket cap is a bucketed variant; one call per tensor has none
            for cap in cfg.bucket_mb if mode == "bucketed" else cfg.bucket_mb[:1]:
                sch = ddp_schedule(model, cfg.itemsize, mode, cap, cfg.first_bucket_mb or None)
                for a in cfg.algorithms:
                    add(sch, {"allreduce": a})
    elif cfg.workload == "zero":
        for v in cfg.variants:
            sch = zero_schedule(model, P, v)
            if v.startswith("ddp"):
                for a in cfg.algorithms:
                    add(sch, {"allreduce": a})
            else:
                for rs in cfg.rs_algorithms:
                    for ag in cfg.ag_algorithms:
                        add(sch, {"reduce_scatter": rs, "allgather": ag})
    elif cfg.workload == "moe":
        for ep in _ep_degrees(cfg, P):
            for dispatch in cfg.dispatch:
                sch = moe_schedule(cfg.tokens, cfg.hidden, cfg.experts_per_rank, ep, cfg.top_k, cfg.capacity_factor,
                                   dispatch)
                coll = sch.calls[0].collective  # alltoall (padded) or alltoallv (routed)
                for a in cfg.algorithms:
                    if a in REGISTRY[coll]:
                        add(sch, {coll: a})
                    else:
                        skipped.append({"what": f"{sch.variant} {coll}/{a}", "why": f"{coll} has no algorithm {a}"})
    if not items:
        why = "; ".join(f"{s['what']}: {s['why']}" for s in skipped[:3])
        raise UsageError("nothing to run" + (f" ({why})" if why else ""))
    return items, skipped


def _settings(cfg: WorkloadConfig) -> TimingSettings:
    """The timing settings of one visit of an item (``cfg`` already cut to one launch and one round)."""
    return TimingSettings(warmup=cfg.warmup, min_reps=cfg.min_reps, max_reps=cfg.max_reps,
                          target_rse=cfg.target_rse, budget_s=cfg.budget_s, sync="barrier")


def _alg_label(algs: dict) -> str:
    return ",".join(f"{c}={a.name}" for c, a in algs.items())


def _check_memory(local: int, nbytes_per_rank: int, what: str) -> None:
    """Refuse, before allocating, buffers that would not fit in this node's memory (`local` ranks on it)."""
    # the buffers plus one call's templates
    require_memory(int(1.5 * nbytes_per_rank * local), local, what, "use a smaller model or fewer ranks per node")


@dataclass
class _Visit:
    """One visit of an item: its samples by name, what ended the sampling, the wrong elements its validation found;
    a schedule's also per call (``wrong_calls``) with the bytes each validating call sent."""

    samples: dict
    stop: str
    nwrong: int
    wrong_calls: np.ndarray | None = None
    sent: np.ndarray | None = None
    ranks: list | None = None          # overlap: every rank's mean times (`ccbench.workloads.overlap.RankTimes`)
    target_s: float = 0.0              # overlap: the compute asked for


def _pooled(visits: list[_Visit], name: str) -> np.ndarray:
    """The samples `name` of every visit, in the order they were taken."""
    return np.concatenate([v.samples[name] for v in visits])


def _visit_schedule(ctx, schedule, algs) -> _Visit:
    """Time one schedule with one choice of algorithms, then validate it call by call."""
    from mpi4py import MPI

    comm, settings, dtype = ctx.comm, ctx.settings, ctx.cfg.dtype
    P, rank = comm.Get_size(), comm.Get_rank()
    G = schedule.group_ranks or P
    sub = comm if G == P else comm.Split(rank // G, rank)
    bufs = StepBuffers(schedule, G, sub.Get_rank(), dtype)
    calls = step_calls(sub, schedule, algs, bufs)
    rows = settings.warmup + settings.max_reps + 1
    timer = step_sequence(ctx.loop, comm, sub, schedule, algs, bufs, rows) or StepTimer(calls, rows)
    bufs.fill()
    samples, stop = measure(comm, timer, settings)
    n = len(samples)
    per = timer.times[settings.warmup:settings.warmup + n].copy()
    comm.Allreduce(MPI.IN_PLACE, per, MPI.MAX)
    # validation: fresh inputs, poisoned outputs, the step once more, call by call, counted
    counts = counted(sub).counts
    bufs.fill()
    comm.Barrier()
    sent = np.zeros(len(calls), dtype=np.int64)
    for j, call in enumerate(calls):
        before = counts.bytes_sent
        call()
        sent[j] = counts.bytes_sent - before
    # a half-type sum held to its algorithm's own additions, as a sweep's case (every rank of `sub` alike)
    additions = [algs[c.collective].additions_on(sub) if is_half(dtype) else None for c in schedule.calls]
    wrong = np.array([bufs.nwrong_call(j, additions[j]) for j in range(len(calls))], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, wrong, MPI.SUM)
    comm.Allreduce(MPI.IN_PLACE, sent, MPI.SUM)
    if sub is not comm:
        sub.Free()
    return _Visit({"step": samples, "calls": per}, stop, int(wrong.sum()), wrong, sent)


def _schedule_why(schedule: Schedule, algs: dict) -> str | None:
    """Why the compiled loop cannot time a step of `schedule` with `algs`; None where it can (every call a
    native blocking collective of the C loop with a count its ``int`` holds)."""
    for c in schedule.calls:
        alg = algs[c.collective]
        if not alg.native:
            return f"{c.collective}={alg.name} is hand-written (Python)"
        if c.collective not in compiled.CODES:
            return f"the compiled loop has no {c.collective}"
        if not compiled.fits_c_int(c.count):
            return f"{c.label}: {c.count} elements, more than the compiled loop's int holds"
    return None


def step_sequence(loop, comm, sub, schedule: Schedule, algs: dict, bufs: StepBuffers, rows: int):
    """The compiled step (`compiled.Sequence`) of `schedule` on `bufs`, synchronised on `comm`, each call on
    `sub`, its per-call times in `rows` rows as `StepTimer` keeps them; None where the Python loop times it
    (no compiled loop in use, or a step the compiled loop cannot time: a hand-written algorithm, a collective
    the C loop lacks, a count its ``int`` does not hold).

    `loop`: the compiled loop (``ccbench.measure.compiled.load``) or None; `algs`: the algorithm of each
    collective of the schedule; `bufs`: the step's ``StepBuffers`` on `sub` (collective on `comm`).
    """
    if loop is None or _schedule_why(schedule, algs) is not None:
        return None
    kernels = []
    for i, c in enumerate(schedule.calls):
        send, recv = bufs.views(i)
        kw = {"op": "sum"} if COLLECTIVES[c.collective].reduction else {}
        kernels.append(loop.kernel(sub, c.collective, c.count, (send, recv), kw))
    return loop.sequence(comm, kernels, rows=rows)


def _schedule_rows(ctx, visits: list[_Visit], *, model_name, schedule, algs) -> list[WorkloadRow]:
    """The step row and the call rows of one schedule from its visits."""
    cfg, P = ctx.cfg, ctx.comm.Get_size()
    G = schedule.group_ranks or P
    samples, per, stop = _pooled(visits, "step"), _pooled(visits, "calls"), common_stop([v.stop for v in visits])
    sent = visits[-1].sent  # every visit validates the same calls
    handwritten = all(not a.native for a in algs.values())
    wrong = sum(v.wrong_calls for v in visits)
    common = dict(workload=cfg.workload, variant=schedule.variant, model=model_name, algorithm=_alg_label(algs),
                  nranks=P, group_ranks=G, dtype=cfg.dtype)
    itemsize = cfg.itemsize
    step = WorkloadRow(**common, part=-1, label="step", collective="step", ncalls=len(schedule.calls),
                       ntensors=len({i for c in schedule.calls for i in c.tensors}),
                       payload_elems=sum(c.payload for c in schedule.calls),
                       nbytes=schedule.nbytes(itemsize, G), comm_s=float(np.median(samples)),
                       bytes_sent_total=int(sent.sum()) if handwritten else None,
                       nwrong=sum(v.nwrong for v in visits), stop_reason=stop, **ctx.stats(samples))
    rows = [step]
    for j, c in enumerate(schedule.calls):
        rows.append(WorkloadRow(**common, part=j, label=c.label, collective=c.collective, ncalls=1,
                                ntensors=len(c.tensors), payload_elems=c.payload, nbytes=c.nbytes(itemsize, G),
                                bytes_sent_total=int(sent[j]) if not algs[c.collective].native else None,
                                nwrong=int(wrong[j]), stop_reason=stop, **ctx.stats(per[:, j])))
    return rows


def _buffer_bytes(schedule: Schedule, P: int, itemsize: int) -> int:
    """Bytes of one rank's StepBuffers for `schedule` (send + receive regions of every call)."""
    G = schedule.group_ranks or P
    elems = 0
    for c in schedule.calls:
        k = c.count * (G if COLLECTIVES[c.collective].blocked else 1)
        elems += k + (c.count if c.collective in ("reduce_scatter", "allgather") else k)
    return elems * itemsize


def _overlap_sizes(cfg: WorkloadConfig) -> tuple[list[int], str]:
    if cfg.sizes:
        return list(cfg.sizes), "-"
    model = load_model(cfg.model)
    return sorted({c.count * cfg.itemsize for cap in cfg.bucket_mb
                   for c in ddp_schedule(model, cfg.itemsize, "bucketed", cap, cfg.first_bucket_mb or None).calls}), \
        model.name


def _visit_overlap(ctx, coll_name, alg, count) -> _Visit:
    """Time one non-blocking algorithm at one size against the compute kernel (`measure_overlap`), then validate it;
    the visit keeps every rank's mean times (``ranks``), what both overlap definitions take."""
    from mpi4py import MPI

    comm, settings, cfg = ctx.comm, ctx.settings, ctx.cfg
    P, rank = comm.Get_size(), comm.Get_rank()
    cb = COLLECTIVES[coll_name].make_buffers(count, P, rank, np.dtype(cfg.dtype), "sum", 0, False, MPI.IN_PLACE)
    begin = alg.nonblocking(comm if alg.native else counted(comm), *cb.args, **cb.kwargs)
    cb.fill()
    samples, stops, target_s, mine = measure_overlap(comm, begin, ctx.kernel, cfg.compute_s, settings, cfg.test_calls,
                                                     cfg.compute_factor)
    cb.fill()
    comm.Barrier()
    begin().Wait()
    return _Visit(samples, stops["total"], comm.allreduce(cb.nwrong(), MPI.SUM),
                  ranks=[RankTimes(*t) for t in comm.allgather(tuple(mine))], target_s=target_s)


def _mean_ranks(visits: list[_Visit]) -> list[RankTimes]:
    """Each rank's mean times over the visits (one visit per round)."""
    return [RankTimes(*np.mean([v.ranks[r] for v in visits], axis=0)) for r in range(len(visits[0].ranks))]


def _overlap_rows(ctx, visits: list[_Visit], *, coll_name, alg_name, count, part, model_name) -> list[WorkloadRow]:
    """The one row of a non-blocking algorithm at one size from its visits: the medians of the three timings, and
    the overlap by OSU's and by IMB-NBC's definition (`ccbench.workloads.overlap`) from the times each takes."""
    cfg, P = ctx.cfg, ctx.comm.Get_size()
    coll = COLLECTIVES[coll_name]
    med = {k: float(np.median(_pooled(visits, k))) for k in ("comm", "compute", "total")}
    nbytes = coll.nbytes_for(count, cfg.itemsize, P)
    ranks = _mean_ranks(visits)
    osu, imb = osu_times(ranks), imb_times(ranks)
    stats = ctx.stats(_pooled(visits, "total"))
    flags = stats.pop("flags") + tuple(ctx.overlap_flags) + (
        ("compute_coarse",) if min(v.target_s for v in visits) < ctx.kernel.iter_s else ())
    return [WorkloadRow(
        workload="overlap", variant=_overlap_variant(cfg, coll_name, ctx.async_progress), model=model_name,
        algorithm=f"{coll_name}={alg_name}", nranks=P, group_ranks=P, dtype=cfg.dtype, part=part,
        label=format_size(nbytes), collective=coll_name, ncalls=1, ntensors=0,
        payload_elems=count * (P if coll.blocked else 1), nbytes=nbytes, comm_s=med["comm"],
        compute_s=med["compute"], total_s=med["total"],
        overlap_pct=osu_overlap_pct(osu.overall_s, osu.cpu_s, osu.test_s, osu.comm_s),
        osu_comm_s=osu.comm_s, osu_overall_s=osu.overall_s, osu_cpu_s=osu.cpu_s, osu_test_s=osu.test_s,
        imb_pure_s=imb.comm_s, imb_ovrl_s=imb.overall_s, imb_cpu_s=imb.cpu_s,
        overlap_imb_pct=imb_overlap_pct(imb.overall_s, imb.comm_s, imb.cpu_s), nwrong=sum(v.nwrong for v in visits),
        stop_reason=common_stop([v.stop for v in visits]), flags=flags, **stats)]


def _overlap_variant(cfg: WorkloadConfig, coll_name: str, async_progress: bool = False) -> str:
    return (f"I{coll_name}" + (f", {cfg.test_calls} tests" if cfg.test_calls else "")
            + (", async progress" if async_progress else ""))


def _straggler_variant(cfg: WorkloadConfig, late: int) -> str:
    return f"rank {late} late by {cfg.delay_s * 1e3:g} ms"


def _visit_straggler(ctx, alg, count, late) -> _Visit:
    """Time one algorithm at one size on time, then with one rank late; then validate it."""
    from mpi4py import MPI

    comm, settings, cfg = ctx.comm, ctx.settings, ctx.cfg
    P, rank = comm.Get_size(), comm.Get_rank()
    target = comm if alg.native else counted(comm)
    cb = COLLECTIVES[cfg.collectives[0]].make_buffers(count, P, rank, np.dtype(cfg.dtype), "sum", 0, False,
                                                       MPI.IN_PLACE)
    call = functools.partial(alg.fn, target, *cb.args, **cb.kwargs)
    kernel = (ctx.loop.kernel(comm, cfg.collectives[0], count, cb.args, cb.kwargs)
              if ctx.loop is not None and alg.native else None)
    cb.fill()
    if kernel is None:
        base, _ = measure(comm, call, settings)
        delayed, stop = measure(DelayedSync(comm, cfg.delay_s, rank == late), call, settings)
    else:  # the same samples in C: the late rank sleeps between the barrier and its timer, as DelayedSync does
        base, _ = measure(comm, ctx.loop.sequence(comm, [kernel]), settings)
        delayed, stop = measure(comm, ctx.loop.sequence(comm, [kernel], delay_s=cfg.delay_s if rank == late else 0.0),
                                settings)
    cb.fill()
    comm.Barrier()
    call()
    return _Visit({"base": base, "delayed": delayed}, stop, comm.allreduce(cb.nwrong(), MPI.SUM))


def _straggler_rows(ctx, visits: list[_Visit], *, alg, count, part, late) -> list[WorkloadRow]:
    """The one row of one algorithm at one size, on time and with one rank late, from its visits."""
    cfg, P = ctx.cfg, ctx.comm.Get_size()
    coll_name = cfg.collectives[0]
    coll = COLLECTIVES[coll_name]
    nbytes = coll.nbytes_for(count, cfg.itemsize, P)
    delayed = _pooled(visits, "delayed")
    b, d = float(np.median(_pooled(visits, "base"))), float(np.median(delayed))
    return [WorkloadRow(
        workload="straggler", variant=_straggler_variant(cfg, late), model="-",
        algorithm=f"{coll_name}={alg.name}", nranks=P, group_ranks=P, dtype=cfg.dtype, part=part,
        label=format_size(nbytes), collective=coll_name, ncalls=1, ntensors=0,
        payload_elems=count * (P if coll.blocked else 1), nbytes=nbytes, delay_s=cfg.delay_s,
        delayed_rank=late, baseline_s=b, slowdown=straggler_slowdown(d, b, cfg.delay_s),
        nwrong=sum(v.nwrong for v in visits), stop_reason=common_stop([v.stop for v in visits]),
        **ctx.stats(delayed))]


@dataclass(frozen=True)
class WorkloadItem:
    """One measured item of a workload run (`plan_items`): what --resume skips, the watchdog names, a fault picks.

    A schedule with one choice of algorithms (ddp, zero, moe), one algorithm at one size (overlap, straggler).
    """

    key: tuple       # what its rows say of it: (variant, algorithm), and the size for overlap and straggler
    label: str       # how the watchdog names it
    budget_s: float  # the time one visit's measurements may take; the watchdog's time comes on top
    nrows: int       # rows it writes: a step and its calls, or one
    visit: Callable  # visit(ctx) -> a `_Visit`, on every rank
    rows: Callable   # rows(ctx, visits) -> its rows, on every rank
    python_why: str | None = None  # why the compiled loop cannot time it (None: it can, where the run uses it)


def _row_key(row: WorkloadRow) -> tuple:
    """The item a stored row belongs to (`WorkloadItem.key`)."""
    if row.workload in ("overlap", "straggler"):
        return (row.variant, row.algorithm, row.nbytes)
    return (row.variant, row.algorithm)


def pool_key(row: WorkloadRow) -> tuple:
    """Which rows of different launches of one run are one row: the row's identity, the fields that say what was
    measured (those ``ccbench.analysis.compare`` matches the rows of two runs on, less the rank counts)."""
    return (row.workload, row.variant, row.model, row.algorithm, row.dtype, row.part, row.label, row.collective,
            row.nbytes, row.delay_s, row.delayed_rank)


def workload_replication(cfg: WorkloadConfig, nranks: int, options: Callable):
    """The launches of a replicated workload run (``ccbench.measure.multilaunch.Replication``).

    Every launch runs the whole plan; rows are pooled by `pool_key` and the merged rows are
    kept in the plan's order (each step before its calls), whatever order a launch ran them
    in.  `options(part)` gives a launch's run options (the command knows their names).
    Refuses, before anything starts, a configuration that cannot run at `nranks` ranks.
    """
    from ccbench.measure.multilaunch import Part, Replication, replicated
    from ccbench.store.workload_rows import WORKLOAD_COLUMNS

    model = load_model(cfg.model) if cfg.workload in ("ddp", "zero") else None
    items, _, _ = plan_items(cfg, nranks, model)
    rank_of = {it.key: i for i, it in enumerate(items)}

    def sort_key(row: WorkloadRow) -> tuple:
        return (rank_of.get(_row_key(row), len(items)), row.part)

    plan = replicated(cfg.launches)
    if cfg.workload == "overlap" and cfg.async_progress != "off":  # MPICH reads it at MPI_Init: a launch of its own
        progress = Part("async-progress", (), (), {ASYNC_PROGRESS_ENV: "1"})
        plan = [(k, p) for k in range(1, cfg.launches + 1)
                for p in ((Part("default", (), ()), progress) if cfg.async_progress == "both" else (progress,))]
    return Replication(cfg.to_dict(), cfg.launches, "shuffled", cfg.seed, cfg.results_dir, plan,
                       [], options, pool_key, WorkloadRow, WORKLOAD_COLUMNS, sort_key)


def _whole(row: WorkloadRow) -> bool:
    """A whole measurement (a step, an overlap or straggler row), not one call of a step."""
    return row.part == -1 or row.workload in ("overlap", "straggler")


def _straggler_why(coll_name: str, alg, count: int) -> str | None:
    """Why the compiled loop cannot time a straggler row of `alg` at `count` elements; None where it can."""
    if not alg.native:
        return f"{coll_name}={alg.name} is hand-written (Python)"
    if not compiled.fits_c_int(count):
        return f"{count} elements, more than the compiled loop's int holds"
    return None


def _straggler_plan(cfg: WorkloadConfig, P: int) -> tuple[list, list]:
    """[(algorithm, count)] of a straggler run at P ranks, and the algorithms skipped with why."""
    coll = COLLECTIVES[cfg.collectives[0]]
    out, skipped = [], []
    for name in cfg.algorithms:
        alg = REGISTRY[cfg.collectives[0]][name]
        why = alg.unsupported(P, "sum" if coll.reduction else None)
        if why:
            skipped.append({"what": f"{cfg.collectives[0]}/{name}", "why": why})
            continue
        for count in dict.fromkeys(coll.count_for(size, cfg.itemsize, P) for size in cfg.sizes):
            out.append((alg, count))
    if not out:
        raise UsageError(f"nothing to run ({'; '.join(s['what'] + ': ' + s['why'] for s in skipped[:3])})")
    return out, skipped


def _overlap_items(cfg: WorkloadConfig, P: int, async_progress: bool) -> tuple[list[WorkloadItem], list, dict]:
    """The items of an overlap run: every non-blocking algorithm of each collective at each size.  A named algorithm
    the collective lacks is skipped; one the installed library cannot run (no MPI_I<coll>) is refused."""
    bind = functools.partial
    sizes, model_name = _overlap_sizes(cfg)
    items: list[WorkloadItem] = []
    skipped = []
    for coll_name in cfg.collectives:
        coll = COLLECTIVES[coll_name]
        for name in cfg.algorithms:
            alg = REGISTRY[coll_name].get(f"{name}-nonblocking")
            if alg is None:
                skipped.append({"what": f"{coll_name}/{name}", "why": f"{coll_name} has no non-blocking {name}"})
                continue
            why = alg.unsupported(P, "sum" if coll.reduction else None)
            if why:
                raise UsageError(f"overlap {coll_name}/{name} cannot run here: {why}")
            for count in dict.fromkeys(coll.count_for(size, cfg.itemsize, P) for size in sizes):
                nbytes = coll.nbytes_for(count, cfg.itemsize, P)
                variant = _overlap_variant(cfg, coll_name, async_progress)
                items.append(WorkloadItem((variant, f"{coll_name}={name}", nbytes),
                                          f"overlap I{coll_name}/{name} {format_size(nbytes)}", 4 * cfg.budget_s, 1,
                                          bind(_visit_overlap, coll_name=coll_name, alg=alg, count=count),
                                          bind(_overlap_rows, coll_name=coll_name, alg_name=name, count=count,
                                               part=len(items), model_name=model_name),
                                          "non-blocking calls overlapped with compute (the compiled loop times "
                                          "blocking calls)"))
    if not items:
        raise UsageError("nothing to run (" + "; ".join(f"{s['what']}: {s['why']}" for s in skipped[:3]) + ")")
    return items, skipped, {}


def plan_items(cfg: WorkloadConfig, P: int, model: Model | None,
               async_progress: bool = False) -> tuple[list[WorkloadItem], list, dict]:
    """The items (`WorkloadItem`) of a run of `cfg` at P ranks, in the plan's order; the skips (stored in run.json);
    extra planning facts (``big``: the schedule with the largest buffers, which the memory check sizes).

    `model`: the loaded model of a ddp or zero workload (None for the others); `async_progress`: whether this launch
    of an overlap run has MPICH's progress thread (it names the items).  Allocates nothing and needs no MPI; refuses
    (`UsageError`) a plan that cannot run at P ranks, as `run_workload` and `workload_replication` do.
    """
    bind = functools.partial
    items: list[WorkloadItem] = []
    if cfg.workload in ("ddp", "zero", "moe"):
        scheds, skipped = plan_schedules(cfg, P, model)
        big = max(scheds, key=lambda it: _buffer_bytes(it[0], P, cfg.itemsize))[0]
        for sch, algs in scheds:
            what = _alg_label(algs)
            items.append(WorkloadItem((sch.variant, what), f"{sch.workload} {sch.variant} {what}",
                                      2 * cfg.budget_s, 1 + len(sch.calls),
                                      bind(_visit_schedule, schedule=sch, algs=algs),
                                      bind(_schedule_rows, model_name=model.name if model else "-", schedule=sch,
                                           algs=algs), _schedule_why(sch, algs)))
        return items, skipped, {"big": big}
    if cfg.workload == "overlap":
        return _overlap_items(cfg, P, async_progress)
    if cfg.delayed_rank >= P:
        raise UsageError(f"delayed rank {cfg.delayed_rank} does not exist with {P} ranks")
    late = cfg.delayed_rank if cfg.delayed_rank >= 0 else P - 1
    pairs, skipped = _straggler_plan(cfg, P)
    coll_name = cfg.collectives[0]
    for alg, count in pairs:
        nbytes = COLLECTIVES[coll_name].nbytes_for(count, cfg.itemsize, P)
        items.append(WorkloadItem((_straggler_variant(cfg, late), f"{coll_name}={alg.name}", nbytes),
                                  f"straggler {coll_name}/{alg.name} {format_size(nbytes)}", 3 * cfg.budget_s, 1,
                                  bind(_visit_straggler, alg=alg, count=count, late=late),
                                  bind(_straggler_rows, alg=alg, count=count, part=len(items), late=late),
                                  _straggler_why(coll_name, alg, count)))
    return items, skipped, {}


#: MPICH's switch for its asynchronous progress thread (read at MPI_Init; it raises the thread level to multiple)
ASYNC_PROGRESS_ENV = "MPIR_CVAR_ASYNC_PROGRESS"


def _async_progress(cfg: WorkloadConfig, launch: int | None) -> bool:
    """Whether this launch runs with MPICH's asynchronous progress (its environment says); refuses a setting this
    launch cannot honour: ``on`` or ``both`` without the launches that set the variable, a library other than
    MPICH."""
    import os

    from ccbench.algorithms.native_variants import current_library

    on = os.environ.get(ASYNC_PROGRESS_ENV, "0").strip().lower() not in ("", "0", "false", "no", "off")
    if cfg.async_progress == "both" and launch is None:
        raise UsageError("async_progress both measures a launch with MPICH's progress thread and one without: start "
                         "it with --launch N")
    if cfg.async_progress == "on" and not on:
        raise UsageError(f"async_progress on: this launch lacks {ASYNC_PROGRESS_ENV}=1 (start it with --launch N, "
                         "or set it in the launch's environment)")
    if on and current_library() != "mpich":
        raise UsageError(f"{ASYNC_PROGRESS_ENV} is MPICH's asynchronous progress; this MPI library is not MPICH")
    return on


def _progress_threads(comm) -> tuple[dict, tuple]:
    """run.json's record of MPICH's progress threads (one per rank beside it) against this node's cores, and the
    rows' flag when they oversubscribe them (the progress thread then competes with the compute it should hide
    behind); one line on stderr says so."""
    import os
    import sys

    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the CPUs the node's ranks may run on, all of them
    ranks, cores = node.Get_size(), len(set().union(*node.allgather(os.sched_getaffinity(0))))
    node.Free()
    over = 2 * ranks > cores
    if over and comm.Get_rank() == 0:
        print(f"ccbench: note: asynchronous progress: {ranks} ranks and their {ranks} progress threads on {cores} "
              f"cores oversubscribe them; the overlap measured here is not the one a core per thread gives",
              file=sys.stderr, flush=True)
    return ({"env": {ASYNC_PROGRESS_ENV: "1"}, "threads_per_node": 2 * ranks, "cores": cores, "oversubscribed": over},
            ("async_oversubscribed",) if over else ())


def _progress(row: WorkloadRow) -> str:
    extra = ""
    if row.overlap_pct is not None:
        extra = f", overlap {row.overlap_pct:.0f}% (OSU)" + (
            f" / {row.overlap_imb_pct:.0f}% (IMB)" if row.overlap_imb_pct is not None else "") + (
            f" (comm {fmt_time(row.comm_s)}, compute {fmt_time(row.compute_s)})")
    if row.slowdown is not None:
        extra = f", slowdown {row.slowdown:.2f} (baseline {fmt_time(row.baseline_s)})"
    return (f"{row.workload} {row.variant} {row.algorithm} {row.label}: median {fmt_time(row.median_s)}{extra}, "
            f"{row.samples} samples ({row.stop_reason}), " + ("ok" if row.ok else f"WRONG {row.nwrong}"))


@dataclass
class _Context:
    """What the items of one run measure with."""

    comm: object
    cfg: WorkloadConfig
    settings: TimingSettings  # one visit's
    min_reps: int             # the launch's: what a row's statistics need, whatever its visits took
    timer_res: float
    kernel: ComputeKernel | None
    loop: object = None       # the compiled loop (`compiled.CompiledLoop`) where the run uses it, else None
    async_progress: bool = False  # overlap: this launch runs with MPICH's asynchronous progress thread
    overlap_flags: tuple = ()     # overlap: flags of every row (``async_oversubscribed``)

    def stats(self, samples) -> dict:
        """The statistics columns of a row of these samples."""
        s = summarize(samples, timer_resolution_s=self.timer_res, min_samples=self.min_reps)
        return dict(samples=len(samples), median_s=s.median_s, min_s=s.min_s, mean_s=s.mean_s,
                    ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, flags=tuple(s.flags),
                    samples_s=tuple(float(x) for x in samples))


def complete_items(items: list[WorkloadItem]):
    """keep(rows) for a resumed run of `items`: its stored rows up to the last item whose rows (its ``nrows``) are
    all there, so that an item a crash cut between its rows is measured again whole."""
    want = {it.key: it.nrows for it in items}

    def keep(rows: list) -> list:
        seen: dict = {}
        end = open_items = 0
        for i, r in enumerate(rows):
            k = _row_key(r)
            seen[k] = n = seen.get(k, 0) + 1
            open_items += (n == 1) - (n == want.get(k, 1))
            if open_items == 0:
                end = i + 1
        return rows[:end]

    return keep


def loop_items(items: list[WorkloadItem], compiled_in_use: bool) -> list[dict]:
    """run.json's record (``loop.items``) of which loop times each item, by its watchdog label: ``compiled`` where
    the compiled loop is in use and can time it, else ``python``, with why (``python_why``) when it is in use."""
    out = []
    for it in items:
        if compiled_in_use and it.python_why is None:
            out.append({"what": it.label, "loop": "compiled"})
        else:
            out.append({"what": it.label, "loop": "python",
                        **({"why": it.python_why} if compiled_in_use else {})})
    return out


def _note_python_items(items: list[WorkloadItem], requested: str) -> None:
    """One line on stderr where the compiled loop is in use but some items stay in the Python loop."""
    import sys

    left = [it for it in items if it.python_why is not None]
    if left:
        print(f"ccbench: note: --loop {requested}: {len(left)} of {len(items)} items timed in Python, as "
              f"{left[0].label} ({left[0].python_why}); run.json's loop names each", file=sys.stderr, flush=True)


def run_workload(cfg: WorkloadConfig, *, thread: tuple[str, str], argv: list[str], tag: str = "",
                 quiet: bool = False, resume: Path | None = None, console=None, launch: int | None = None):
    """Run a workload on MPI.COMM_WORLD; return (exit code, run directory on rank 0 or None).

    With `resume`, continue that run directory instead: its finished items are skipped and
    new rows are appended; it must have been made with the same configuration, rank count
    and MPI library.  Progress goes to `console` (rank 0), plain lines without one; none
    when `quiet`.  `launch` is which of ``cfg.launches`` launches this is (``ccbench workload
    --launch`` merges them): it runs ``cfg.per_launch()``'s share of the steps, its items in
    its own seeded order (``launch_order``).  With ``cfg.rounds`` R > 1 every item is visited
    R times, each round in its own order, each visit with ``per_round()``'s share of the steps
    (`ccbench.measure.driver.drive`, as sweeps).
    """
    from mpi4py import MPI

    from ccbench.measure.provenance import collect
    from ccbench.measure.timing import timer_resolution_s
    from ccbench.measure.workload_config import stored_workload

    comm = MPI.COMM_WORLD
    P = comm.Get_size()
    check_launch(comm)
    fault = agree(comm, lambda: read_fault(comm.Get_size()))
    model = None
    if cfg.workload in ("ddp", "zero"):
        model = agree(comm, lambda: load_model(cfg.model))
    progress = _async_progress(cfg, launch) if cfg.workload == "overlap" else False
    items, skipped, facts = agree(comm, lambda: plan_items(cfg, P, model, progress))
    if "big" in facts:
        big, nlocal = facts["big"], local_ranks(comm)
        agree(comm, lambda: _check_memory(nlocal, _buffer_bytes(big, P, cfg.itemsize),
                                          f"{big.workload} {big.variant}"))
    prov = collect(comm, cfg.to_dict(), thread, argv)
    timer_res = comm.allreduce(timer_resolution_s(), MPI.MAX)
    kernel = None
    meta: dict = dict(kind=KIND, workload=cfg.workload, timer_resolution_s=timer_res, skipped=skipped)
    flags: tuple = ()
    if cfg.workload == "overlap":
        kernel = ComputeKernel()  # calibrated once per run, every rank at once
        iter_s = comm.allreduce(kernel.iter_s, MPI.MAX)
        if 0 < cfg.compute_s < iter_s:
            raise UsageError(f"compute {fmt_time(cfg.compute_s)} cannot be calibrated: one iteration of the compute "
                             f"kernel takes {fmt_time(iter_s)} here; ask for at least that")
        meta["compute_kernel"] = {"what": "numpy matmul of 64 x 64 float64 matrices",
                                  "iteration_s_max_over_ranks": iter_s}
        if progress:
            meta["async_progress"], flags = _progress_threads(comm)
    if model is not None:
        meta["model"] = {"name": model.name, "source": model.source, "tensors": len(model.tensors),
                         "params": model.numel, "itemsize": cfg.itemsize}
    launch_cfg = cfg.per_launch()
    loop, loop_record = compiled.choose(comm, cfg.loop)  # before the run directory: --loop compiled may fail
    loop_record = dict(loop_record, items=loop_items(items, loop is not None))
    if loop is not None and comm.Get_rank() == 0:
        _note_python_items(items, cfg.loop)
    ctx = _Context(comm, cfg, _settings(launch_cfg.per_round()), launch_cfg.min_reps, timer_res, kernel, loop,
                   progress, flags)

    def same_config(stored) -> bool:
        try:
            return stored_workload(cfg.workload, stored) == cfg
        except UsageError:
            return False

    def item(n: int, it: WorkloadItem) -> Item:
        # numbered in the plan's order: what CCBENCH_FAULT names
        return Item(it.key, it.label, f"{cfg.workload}:{n}", it.budget_s / cfg.rounds,
                    functools.partial(it.visit, ctx), functools.partial(it.rows, ctx))

    # the items of a replicated run or of rounds run in a seeded shuffled order (each round its own);
    # one launch of one round keeps the plan's order; a hung call (a deadlocked algorithm, a dead
    # peer) ends the job with one line instead of hanging it: the watchdog, armed per item with
    # room for its timings
    run_plan = Plan([item(n, it) for n, it in enumerate(items, 1)], meta=meta, same_config=same_config,
                    summary=lambda r: (_row_key(r), _whole(r) and not r.ok),
                    progress_line=lambda r: _progress(r) if _whole(r) else None,
                    visit_ok=lambda v: v.nwrong == 0, row_cls=WorkloadRow, columns=WORKLOAD_COLUMNS,
                    order="shuffled" if cfg.launches > 1 or cfg.rounds > 1 else None, seed=cfg.seed, rounds=cfg.rounds,
                    watchdog_s=cfg.watchdog_s, fault=fault, keep=complete_items(items), noun="workload",
                    what="rows", opened={"loop": loop_record})
    return drive(comm, run_plan, prov=prov, argv=argv, results_dir=cfg.results_dir, tag=tag, resume=resume,
                 launch=launch, console=console, progress=not quiet)
