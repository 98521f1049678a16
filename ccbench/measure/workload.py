"""Drive a workload under MPI: plan its schedules, measure, validate, store the run directory.

The run directory has the sweep's format (`ccbench.store.results`: run.json with schema and
provenance, cases.jsonl and cases.csv appended and flushed per row) with ``"kind":
"workload"`` in run.json and `WorkloadRow` rows.
"""

import functools
import time

import numpy as np

from ccbench.algorithms import REGISTRY, get
from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError
from ccbench.core.stats import summarize
from ccbench.core.units import format_size
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
from ccbench.workloads.schedule import (
    Schedule,
    ddp_schedule,
    moe_schedule,
    overlap_pct,
    straggler_slowdown,
    zero_schedule,
)

__all__ = ["plan_schedules", "run_workload"]


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
        for mode in cfg.modes:
            sch = ddp_schedule(model, cfg.itemsize, mode, cfg.bucket_mb, cfg.first_bucket_mb or None)
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
            sch = moe_schedule(cfg.tokens, cfg.hidden, cfg.experts_per_rank, ep, cfg.top_k, cfg.capacity_factor)
            for a in cfg.algorithms:
                add(sch, {"alltoall": a})
    if not items:
        why = "; ".join(f"{s['what']}: {s['why']}" for s in skipped[:3])
        raise UsageError("nothing to run" + (f" ({why})" if why else ""))
    return items, skipped


def _settings(cfg: WorkloadConfig) -> TimingSettings:
    return TimingSettings(warmup=cfg.warmup, min_reps=cfg.min_reps, max_reps=cfg.max_reps,
                          target_rse=cfg.target_rse, budget_s=cfg.budget_s, sync="barrier")


def _alg_label(algs: dict) -> str:
    return ",".join(f"{c}={a.name}" for c, a in algs.items())


def _stats(samples, timer_res: float, min_reps: int) -> dict:
    s = summarize(samples, timer_resolution_s=timer_res, min_samples=min_reps)
    return dict(samples=len(samples), median_s=s.median_s, min_s=s.min_s, mean_s=s.mean_s,
                ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, flags=tuple(s.flags),
                samples_s=tuple(float(x) for x in samples))


def _check_memory(comm, nbytes_per_rank: int, what: str) -> None:
    """Refuse, before allocating, buffers that would not fit in this node's memory."""
    from mpi4py import MPI

    from ccbench.measure.sweep import require_memory

    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size()
    # the buffers plus one call's templates
    require_memory(int(1.5 * nbytes_per_rank * local), local, what, "use a smaller model or fewer ranks per node")


def _run_schedule(comm, cfg, model_name, schedule, algs, settings, timer_res) -> list[WorkloadRow]:
    """Measure one schedule with one choice of algorithms; return its step row and part rows."""
    from mpi4py import MPI

    P, rank = comm.Get_size(), comm.Get_rank()
    G = schedule.group_ranks or P
    sub = comm if G == P else comm.Split(rank // G, rank)
    bufs = StepBuffers(schedule, G, sub.Get_rank(), cfg.dtype)
    calls = step_calls(sub, schedule, algs, bufs)
    timer = StepTimer(calls, settings.warmup + settings.max_reps + 1)
    bufs.fill()
    samples, stop = measure(comm, timer, settings)
    n = len(samples)
    per = timer.times[settings.warmup:settings.warmup + n].copy()
    comm.Allreduce(MPI.IN_PLACE, per, MPI.MAX)
    # validation: fresh inputs, poisoned outputs, the step once more, call by call, counted
    handwritten = all(not a.native for a in algs.values())
    counts = counted(sub).counts
    bufs.fill()
    comm.Barrier()
    sent = np.zeros(len(calls), dtype=np.int64)
    for j, call in enumerate(calls):
        before = counts.bytes_sent
        call()
        sent[j] = counts.bytes_sent - before
    wrong = np.array([bufs.nwrong_call(j) for j in range(len(calls))], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, wrong, MPI.SUM)
    comm.Allreduce(MPI.IN_PLACE, sent, MPI.SUM)
    if sub is not comm:
        sub.Free()
    common = dict(workload=cfg.workload, variant=schedule.variant, model=model_name, algorithm=_alg_label(algs),
                  nranks=P, group_ranks=G, dtype=cfg.dtype)
    itemsize = cfg.itemsize
    step = WorkloadRow(**common, part=-1, label="step", collective="step", ncalls=len(calls),
                       ntensors=len({i for c in schedule.calls for i in c.tensors}),
                       payload_elems=sum(c.payload for c in schedule.calls),
                       nbytes=schedule.nbytes(itemsize, G), comm_s=float(np.median(samples)),
                       bytes_sent_total=int(sent.sum()) if handwritten else None,
                       nwrong=int(wrong.sum()), stop_reason=stop, **_stats(samples, timer_res, settings.min_reps))
    rows = [step]
    for j, c in enumerate(schedule.calls):
        rows.append(WorkloadRow(**common, part=j, label=c.label, collective=c.collective, ncalls=1,
                                ntensors=len(c.tensors), payload_elems=c.payload, nbytes=c.nbytes(itemsize, G),
                                bytes_sent_total=int(sent[j]) if not algs[c.collective].native else None,
                                nwrong=int(wrong[j]), stop_reason=stop,
                                **_stats(per[:, j], timer_res, settings.min_reps)))
    return rows


def _buffer_bytes(schedule: Schedule, P: int, itemsize: int) -> int:
    """Bytes of one rank's StepBuffers for `schedule` (send + receive regions of every call)."""
    G = schedule.group_ranks or P
    elems = 0
    for c in schedule.calls:
        k = c.count * (G if COLLECTIVES[c.collective].blocked else 1)
        elems += k + (c.count if c.collective in ("reduce_scatter", "allgather") else k)
    return elems * itemsize


_STARTERS = {
    "allreduce": lambda comm, cb, op: comm.Iallreduce(cb.args[0], cb.args[1], op),
    "reduce_scatter": lambda comm, cb, op: comm.Ireduce_scatter_block(cb.args[0], cb.args[1], op),
    "allgather": lambda comm, cb, op: comm.Iallgather(cb.args[0], cb.args[1]),
    "alltoall": lambda comm, cb, op: comm.Ialltoall(cb.args[0], cb.args[1]),
    "bcast": lambda comm, cb, op: comm.Ibcast(cb.args[0], cb.kwargs["root"]),
}


def _overlap_sizes(cfg: WorkloadConfig) -> tuple[list[int], str]:
    if cfg.sizes:
        return list(cfg.sizes), "-"
    model = load_model(cfg.model)
    sch = ddp_schedule(model, cfg.itemsize, "bucketed", cfg.bucket_mb, cfg.first_bucket_mb or None)
    return sorted({c.count * cfg.itemsize for c in sch.calls}), model.name


def _run_overlap(comm, cfg, settings, timer_res, kernel, sizes, model_name) -> list[WorkloadRow]:
    from mpi4py import MPI

    P, rank = comm.Get_size(), comm.Get_rank()
    rows = []
    for coll_name in cfg.collectives:
        coll = COLLECTIVES[coll_name]
        done = set()
        for size in sizes:
            count = coll.count_for(size, cfg.itemsize, P)
            if count in done:
                continue
            done.add(count)
            cb = coll.make_buffers(count, P, rank, np.dtype(cfg.dtype), "sum", 0, False, MPI.IN_PLACE)
            start = functools.partial(_STARTERS[coll_name], comm, cb, MPI.SUM)
            cb.fill()
            samples, stops, iters = measure_overlap(comm, start, kernel, cfg.compute_s, settings, cfg.test_calls)
            cb.fill()
            comm.Barrier()
            start().Wait()
            wrong = comm.allreduce(cb.nwrong(), MPI.SUM)
            med = {k: float(np.median(v)) for k, v in samples.items()}
            nbytes = coll.nbytes_for(count, cfg.itemsize, P)
            rows.append(WorkloadRow(
                workload="overlap", variant=f"I{coll_name}" + (f", {cfg.test_calls} tests" if cfg.test_calls else ""),
                model=model_name, algorithm=f"{coll_name}=native", nranks=P, group_ranks=P, dtype=cfg.dtype,
                part=len(rows), label=format_size(nbytes), collective=coll_name, ncalls=1, ntensors=0,
                payload_elems=count * (P if coll.blocked else 1), nbytes=nbytes, comm_s=med["comm"],
                compute_s=med["compute"], total_s=med["total"],
                overlap_pct=overlap_pct(med["total"], med["compute"], med["comm"]),
                nwrong=int(wrong), stop_reason=stops["total"],
                **_stats(samples["total"], timer_res, settings.min_reps)))
    return rows


def _run_straggler(comm, cfg, settings, timer_res, skipped) -> list[WorkloadRow]:
    from mpi4py import MPI

    P, rank = comm.Get_size(), comm.Get_rank()
    late = cfg.delayed_rank if cfg.delayed_rank >= 0 else P - 1
    coll_name = cfg.collectives[0]
    coll = COLLECTIVES[coll_name]
    rows = []
    for name in cfg.algorithms:
        alg = REGISTRY[coll_name].get(name)
        if alg is None:
            continue
        why = alg.unsupported(P, "sum" if coll.reduction else None)
        if why:
            skipped.append({"what": f"{coll_name}/{name}", "why": why})
            continue
        target = comm if alg.native else counted(comm)
        done = set()
        for size in cfg.sizes:
            count = coll.count_for(size, cfg.itemsize, P)
            if count in done:
                continue
            done.add(count)
            cb = coll.make_buffers(count, P, rank, np.dtype(cfg.dtype), "sum", 0, False, MPI.IN_PLACE)
            call = functools.partial(alg.fn, target, *cb.args, **cb.kwargs)
            cb.fill()
            base, _ = measure(comm, call, settings)
            delayed, stop = measure(DelayedSync(comm, cfg.delay_s, rank == late), call, settings)
            cb.fill()
            comm.Barrier()
            call()
            wrong = comm.allreduce(cb.nwrong(), MPI.SUM)
            nbytes = coll.nbytes_for(count, cfg.itemsize, P)
            b, d = float(np.median(base)), float(np.median(delayed))
            rows.append(WorkloadRow(
                workload="straggler", variant=f"rank {late} late by {cfg.delay_s * 1e3:g} ms", model="-",
                algorithm=f"{coll_name}={name}", nranks=P, group_ranks=P, dtype=cfg.dtype, part=len(rows),
                label=format_size(nbytes), collective=coll_name, ncalls=1, ntensors=0,
                payload_elems=count * (P if coll.blocked else 1), nbytes=nbytes, delay_s=cfg.delay_s,
                delayed_rank=late, baseline_s=b, slowdown=straggler_slowdown(d, b, cfg.delay_s),
                nwrong=int(wrong), stop_reason=stop, **_stats(delayed, timer_res, settings.min_reps)))
    if not rows:
        raise UsageError(f"nothing to run ({'; '.join(s['what'] + ': ' + s['why'] for s in skipped[:3])})")
    return rows


def _progress(row: WorkloadRow) -> str:
    from ccbench.core.units import fmt_time

    extra = ""
    if row.overlap_pct is not None:
        extra = f", overlap {row.overlap_pct:.0f}% (comm {fmt_time(row.comm_s)}, compute {fmt_time(row.compute_s)})"
    if row.slowdown is not None:
        extra = f", slowdown {row.slowdown:.2f} (baseline {fmt_time(row.baseline_s)})"
    return (f"{row.workload} {row.variant} {row.algorithm} {row.label}: median {fmt_time(row.median_s)}{extra}, "
            f"{row.samples} samples ({row.stop_reason}), " + ("ok" if row.ok else f"WRONG {row.nwrong}"))


WATCHDOG_S = 300.0  # seconds an item may run past its timing budget before the job is ended


class _Item:
    """What the watchdog names when it ends the job."""

    def __init__(self, what: str) -> None:
        self.what = what

    def label(self) -> str:
        return self.what


def run_workload(cfg: WorkloadConfig, *, thread: tuple[str, str], argv: list[str], tag: str = "",
                 quiet: bool = False):
    """Run a workload on MPI.COMM_WORLD; return (exit code, run directory on rank 0 or None)."""
    from mpi4py import MPI

    from ccbench.measure.provenance import collect
    from ccbench.measure.sweep import Watchdog, agree
    from ccbench.measure.timing import timer_resolution_s
    from ccbench.store.results import RunWriter, new_run_dir

    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    settings = _settings(cfg)
    model = None
    skipped: list = []
    if cfg.workload in ("ddp", "zero"):
        model = agree(comm, lambda: load_model(cfg.model))
    if cfg.workload in ("ddp", "zero", "moe"):
        items, skipped = agree(comm, lambda: plan_schedules(cfg, P, model))
        big = max(items, key=lambda it: _buffer_bytes(it[0], P, cfg.itemsize))[0]
        agree(comm, lambda: _check_memory(comm, _buffer_bytes(big, P, cfg.itemsize),
                                          f"{big.workload} {big.variant}"))
    elif cfg.workload == "overlap":
        sizes, overlap_model = agree(comm, lambda: _overlap_sizes(cfg))
    elif cfg.delayed_rank >= P:
        raise UsageError(f"delayed rank {cfg.delayed_rank} does not exist with {P} ranks")
    prov = collect(comm, cfg.to_dict(), thread, argv)
    timer_res = comm.allreduce(timer_resolution_s(), MPI.MAX)
    kernel = None
    extra: dict = {}
    if cfg.workload == "overlap":
        kernel = ComputeKernel()  # calibrated once per run, every rank at once
        extra["compute_kernel"] = {"what": "numpy matmul of 64 x 64 float64 matrices",
                                   "iteration_s_max_over_ranks": comm.allreduce(kernel.iter_s, MPI.MAX)}
    writer = None
    if rank == 0:
        def start():
            path = new_run_dir(cfg.results_dir, P, tag)
            meta = dict(prov, kind=KIND, workload=cfg.workload, timer_resolution_s=timer_res, **extra)
            if model is not None:
                meta["model"] = {"name": model.name, "source": model.source, "tensors": len(model.tensors),
                                 "params": model.numel, "itemsize": cfg.itemsize}
            return RunWriter(path, meta, columns=WORKLOAD_COLUMNS)
        writer = agree(comm, start)
    else:
        agree(comm, lambda: None)

    status, nwrong = "failed", 0

    def emit(rows):
        nonlocal nwrong
        for r in rows:
            if writer is not None:
                writer.append(r)
        nwrong += sum(not r.ok for r in rows if r.part == -1 or r.workload in ("overlap", "straggler"))
        if writer is not None and not quiet:
            for r in rows:
                if r.part == -1 or r.workload in ("overlap", "straggler"):
                    print(_progress(r), flush=True)

    # a hung call (a deadlocked algorithm, a dead peer) ends the job with one line instead of
    # hanging it: the sweep's watchdog, armed per measured item with room for its timings
    watchdog = Watchdog(WATCHDOG_S, P, rank, writer)
    try:
        if cfg.workload in ("ddp", "zero", "moe"):
            for sch, algs in items:
                watchdog.start(_Item(f"{sch.workload} {sch.variant} {_alg_label(algs)}"), 2 * cfg.budget_s)
                emit(_run_schedule(comm, cfg, model.name if model else "-", sch, algs, settings, timer_res))
        elif cfg.workload == "overlap":
            n = len(sizes) * len(cfg.collectives)
            watchdog.start(_Item(f"overlap of {', '.join(cfg.collectives)}"), 4 * n * cfg.budget_s)
            emit(_run_overlap(comm, cfg, settings, timer_res, kernel, sizes, overlap_model))
        else:
            n = len(cfg.sizes) * len(cfg.algorithms)
            watchdog.start(_Item(f"straggler {cfg.collectives[0]}"), 3 * n * cfg.budget_s)
            emit(agree(comm, lambda: _run_straggler(comm, cfg, settings, timer_res, skipped)))
        status = "complete"
    finally:
        watchdog.stop()
        if writer is not None:
            writer.update(status=status, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"), finished_cases=writer.rows,
                          failed_cases=nwrong, skipped=skipped)
            writer.close()
    return (1 if nwrong else 0), (writer.path if writer is not None else None)
