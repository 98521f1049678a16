"""Drive a planned sweep under MPI: buffers, timing, validation, traffic counts, storage.

Rank 0 owns the run directory; every decision that could differ between ranks (errors,
stop requests) is agreed on collectively first, so no rank is ever left waiting.
"""

import functools
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.native_variants import (
    NotApplicableError,
    check_environment,
    current_library,
    probe,
    variant_settings,
)
from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.stats import summarize
from ccbench.core.units import format_size
from ccbench.measure.config import Case, Config, plan
from ccbench.measure.timing import TimingSettings, measure, timer_resolution_s
from ccbench.store.results import Row, RunWriter, new_run_dir

__all__ = ["run_case", "run_sweep"]

_SIGNALLED: list[int] = []


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    _SIGNALLED.append(signum)


def agree(comm, fn):
    """Run fn() on every rank; if it raises a CCBenchError anywhere, raise it everywhere."""
    err = None
    try:
        result = fn()
    except CCBenchError as exc:
        err, result = exc, None
    errs = comm.allgather(None if err is None else (type(err).__name__, str(err)))
    first = next((e for e in errs if e is not None), None)
    if first is not None:
        raise (UsageError if first[0] == "UsageError" else CCBenchError)(first[1])
    return result


def _mem_available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_memory(cases: list[Case], local_ranks: int) -> None:
    """Refuse, before allocating, a sweep whose largest case would not fit in memory."""
    if not cases:
        return
    big = max(cases, key=lambda c: c.nbytes)
    # send + receive buffers, the input template and the expected result: ~5 x nbytes
    require_memory(5 * big.nbytes * local_ranks, local_ranks, big.label(), "lower the sizes")


def require_memory(need: int, local_ranks: int, what: str, hint: str) -> None:
    """Refuse, before allocating, `need` bytes on this node that would not fit in 80% of its free memory."""
    avail = _mem_available_bytes()
    if avail is not None and need > 0.8 * avail:
        raise UsageError(f"{what} needs about {format_size(need)} on this node ({local_ranks} ranks) but only "
                         f"{format_size(avail)} is available; {hint}")


def _check_sync(sync: str, local_ranks: int) -> None:
    """Refuse window synchronisation on oversubscribed cores.

    Ranks waiting for the common start instant spin on the clock; with more ranks than
    cores they take the CPU from the ranks doing the work and every sample measures the
    scheduler instead of the collective.
    """
    from ccbench.measure.provenance import usable_cores

    cores = usable_cores()
    if sync == "window" and local_ranks > cores:
        raise UsageError(f"--sync window needs a core per rank ({local_ranks} ranks on {cores} cores here); "
                         "use --sync barrier")


class Watchdog:
    """Ends the job when a case outlives its deadline, naming the case, instead of hanging.

    A daemon thread on every rank.  When the case in progress passes its deadline it
    prints one line, marks the run failed (rank 0, which owns run.json; finished rows
    are already on disk) and leaves the process with exit code 3 without finalising
    MPI, so the launcher tears the whole job down.
    """

    def __init__(self, seconds: float, nranks: int, rank: int, writer=None) -> None:
        import threading

        self.seconds, self.nranks, self.writer = seconds, nranks, writer
        # rank 0 speaks and records the failure; the others follow a little later, in
        # case rank 0 itself cannot (then they end the job silently)
        self.grace = 0.0 if rank == 0 else 5.0
        self.rank = rank
        self.case: Case | None = None
        self.deadline = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ccbench-watchdog", daemon=True)
        if seconds > 0:
            self._thread.start()

    def start(self, case: Case, budget_s: float) -> None:
        """Arm the deadline for `case`: the watchdog time plus the case's own budget."""
        self.case, self.deadline = case, time.monotonic() + self.seconds + budget_s

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:

        while not self._stop.wait(0.5):
            if time.monotonic() > self.deadline + self.grace and self.case is not None:
                if self.rank != 0:
                    os._exit(3)
                why = (f"watchdog: {self.case.label()} at {self.nranks} ranks did not finish within "
                       f"{self.seconds:g} s past its budget; ending the job")
                print(f"ccbench: error: {why}", file=sys.stderr, flush=True)
                if self.writer is not None:
                    try:
                        self.writer.update(status="failed", failure=why,
                                           end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
                    except OSError:
                        pass
                os._exit(3)


def _inject_fault(comm, case: Case) -> None:
    """Fault injection for the tests: CCBENCH_FAULT="KIND:RANK:COLLECTIVE/ALGORITHM:NBYTES".

    Before that case, that rank either sleeps forever (KIND ``hang``, as a deadlocked
    algorithm or a stuck process would) or dies at once without finalising MPI (KIND
    ``exit``, as a crashed or OOM-killed process would). Nothing happens when the
    variable is unset.
    """

    spec = os.environ.get("CCBENCH_FAULT")
    if not spec:
        return
    kind, rank, what, nbytes = spec.split(":")
    if int(rank) != comm.Get_rank() or what != f"{case.collective}/{case.algorithm}" or int(nbytes) != case.nbytes:
        return
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "exit":
        sys.stdout.flush()
        os._exit(3)


def run_case(comm, case: Case, settings: TimingSettings, timer_res_s: float = 1e-9) -> Row:
    """Measure and validate one case on every rank of `comm`; return its row (same on all ranks)."""
    from mpi4py import MPI

    P, rank = comm.Get_size(), comm.Get_rank()
    coll = COLLECTIVES[case.collective]
    alg = REGISTRY[case.collective][case.algorithm]
    bufs = coll.make_buffers(case.count, P, rank, DTYPES[case.dtype], case.op, case.root,
                             case.in_place, MPI.IN_PLACE)
    # one counting wrapper per communicator for the whole sweep: its scratch arrays and
    # node communicators (hierarchical) are made once, not once per case
    target = comm if alg.native else counted(comm)
    call = functools.partial(alg.fn, target, *bufs.args, **bufs.kwargs)
    bufs.fill()
    library = current_library() if alg.settings else None
    if alg.settings:  # a forced algorithm of the library: NotApplicableError where it refuses the call
        probe(comm, call, library)
    samples, stop = measure(comm, call, settings)
    if case.collective == "pingpong":
        samples = samples / 2  # one-way time is half the round trip
    # validation: fresh inputs, poisoned outputs, one more call, exact comparison;
    # the traffic of that call is the traffic of one call
    bufs.fill()
    if not alg.native:
        target.counts.reset()
    comm.Barrier()
    call()
    c = target.counts.as_tuple() if not alg.native else (0,) * 7
    # c: msgs_sent, bytes_sent, msgs_recv, bytes_recv, steps, step_bytes, reduced_bytes
    local = np.array([bufs.nwrong(), c[0], c[1]], dtype=np.int64)
    total = np.empty_like(local)
    comm.Allreduce(local, total, MPI.SUM)
    mx = np.array([c[0], c[1], c[4], c[5], c[6]], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, mx, MPI.MAX)
    s = summarize(samples, timer_resolution_s=timer_res_s, min_samples=settings.min_reps)
    algbw = case.nbytes / s.median_s / 1e9 if s.median_s > 0 else 0.0

    def traffic(value) -> int | None:  # traffic is counted for hand-written algorithms only
        return None if alg.native else int(value)

    return Row(
        collective=case.collective, algorithm=case.algorithm, nbytes=case.nbytes,
        count=case.count, dtype=case.dtype, op=case.op, in_place=case.in_place, root=case.root,
        nranks=P, samples=len(samples), min_s=s.min_s, median_s=s.median_s, mean_s=s.mean_s,
        p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s, stddev_s=s.stddev_s,
        ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, algbw_gbs=algbw,
        busbw_gbs=algbw * coll.busbw_factor(P),
        msgs_max=traffic(mx[0]), bytes_max=traffic(mx[1]),
        msgs_total=traffic(total[1]), bytes_total=traffic(total[2]),
        steps_max=traffic(mx[2]), step_bytes_max=traffic(mx[3]),
        reduced_bytes_max=traffic(mx[4]),
        nwrong=int(total[0]), stop_reason=stop, sync=settings.sync, flags=tuple(s.flags),
        settings=variant_settings(alg, library),
        samples_s=tuple(float(x) for x in samples),
    )


def _not_applicable(writer, progress, case: Case, why: str, nranks: int) -> None:
    """Record a case whose forced algorithm the library refused: a skip in run.json, never a row."""
    if writer is not None:
        entry = {"what": case.label(), "why": f"not applicable: {why}", "not_applicable": True,
                 "collective": case.collective, "algorithm": case.algorithm, "nbytes": case.nbytes,
                 "dtype": case.dtype, "op": case.op, "in_place": case.in_place, "nranks": nranks}
        writer.update(skipped=writer.meta.get("skipped", []) + [entry])
    if progress is not None:
        progress.console.print(f"{case.label()}: not applicable ({why})", style="yellow")


def reduce_local_rates(cases: list[Case], sizes=(4096, 65536, 1 << 20), reps: int = 20) -> list[dict]:
    """Time numpy's local reduction (the gamma term) for each dtype/op the sweep reduces."""
    pairs = sorted({(c.dtype, c.op) for c in cases if COLLECTIVES[c.collective].reduction})
    out = []
    for dtype, op in pairs:
        ufunc = OPS[op]
        for nbytes in sizes:
            n = max(1, nbytes // DTYPES[dtype].itemsize)
            a = np.ones(n, dtype=dtype)
            b = np.ones(n, dtype=dtype)
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                ufunc(a, b, out=a)
                times.append(time.perf_counter() - t0)
            out.append({"dtype": dtype, "op": op, "nbytes": n * a.itemsize,
                        "seconds": float(np.median(times))})
    return out


class _Progress:
    """A rich progress bar on a terminal, one plain line per case otherwise (batch jobs)."""

    def __init__(self, total: int, console) -> None:
        self.console, self.total, self.i = console, total, 0
        self.bar = None
        if console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                transient=True)
            self.task = self.bar.add_task("sweep", total=total)
            self.bar.start()

    def done(self, case: Case, row: Row) -> None:
        self.i += 1
        status = "ok" if row.ok else f"WRONG {row.nwrong}"
        line = (f"[{self.i}/{self.total}] {case.label()}: median {row.median_s * 1e6:.2f} us, "
                f"busbw {row.busbw_gbs:.3f} GB/s, {row.samples} samples ({row.stop_reason}), {status}")
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=case.label())
            if not row.ok:
                self.console.print(line, style="red")
        else:
            print(line, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _case_key(c) -> tuple:
    """What identifies a case (a Case or a stored Row) within one run."""
    return (c.collective, c.algorithm, c.nbytes, c.dtype, c.op, bool(c.in_place), c.root)


def run_sweep(cfg: Config, *, thread: tuple[str, str], argv: list[str], console=None,
              tag: str = "", resume: Path | None = None) -> tuple[int, Path | None]:
    """Run a whole sweep on MPI.COMM_WORLD; return (exit code, run directory on rank 0).

    With `resume`, continue that run directory instead: its finished cases are skipped and
    new rows are appended; it must have been made with the same configuration, rank count
    and MPI library.
    """

    from mpi4py import MPI

    from ccbench.measure.provenance import collect

    comm = MPI.COMM_WORLD
    rank, P = comm.Get_rank(), comm.Get_size()
    ntasks = os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS")
    if P == 1 and ntasks and ntasks.isdigit() and int(ntasks) > 1:
        raise UsageError(f"this job step has {ntasks} tasks but MPI sees 1 rank each: the launcher "
                         "did not wire up MPI (with srun use --mpi=pmi2 for MPICH, --mpi=pmix for Open MPI)")
    cases, skipped = agree(comm, lambda: plan(cfg, P))
    library = current_library()  # forced variants need their variables set at MPI_Init
    cases, forced_skips = agree(comm, lambda: check_environment(cases, library))
    skipped = skipped + forced_skips
    local_ranks = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size()
    agree(comm, lambda: _check_memory(cases, local_ranks))
    agree(comm, lambda: _check_sync(cfg.sync, local_ranks))
    prov = collect(comm, cfg.to_dict(), thread, argv)
    settings = TimingSettings.from_config(cfg)
    timer_res = comm.allreduce(timer_resolution_s(), MPI.MAX)

    writer = None
    done_failed = 0
    if resume is not None:
        def reopen():
            import json

            from ccbench.store.results import reopen_run
            from ccbench.store.run import load_run

            meta, rows, _ = load_run(Path(resume))  # check before touching anything
            for what, old, new in (("rank count", meta.get("nranks"), P),
                                   ("MPI library", meta.get("mpi_library"), prov["mpi_library"])):
                if old != new:
                    raise UsageError(f"cannot resume {resume}: its {what} was {old!r}, now {new!r}")
            if meta.get("config") != json.loads(json.dumps(cfg.to_dict())):
                raise UsageError(f"cannot resume {resume}: it was made with another configuration")
            reopen_run(Path(resume), rows)
            meta["resumed"] = meta.get("resumed", []) + [{"time": prov["start_time"], "argv": argv,
                                                          "finished_before": len(rows),
                                                          "status_before": meta.get("status"),
                                                          "failure_before": meta.pop("failure", None),
                                                          "signal_before": meta.pop("signal", None)}]
            return RunWriter(Path(resume), meta, rows=len(rows)), rows
        opened = agree(comm, reopen) if rank == 0 else agree(comm, lambda: None)
        done = comm.bcast(None if opened is None else [_case_key(r) for r in opened[1]], root=0)
        done_failed = comm.bcast(None if opened is None else sum(not r.ok for r in opened[1]), root=0)
        if opened is not None:
            writer = opened[0]
        finished = set(map(tuple, done))
        cases = [c for c in cases if _case_key(c) not in finished]
    elif rank == 0:
        def start():
            path = new_run_dir(cfg.results_dir, P, tag)
            meta = dict(prov, size_definitions={c: COLLECTIVES[c].size_definition for c in cfg.collectives},
                        timer_resolution_s=timer_res, planned_cases=len(cases),
                        skipped=[{"what": w, "why": y} for w, y in skipped],
                        reduce_local=reduce_local_rates(cases))
            return RunWriter(path, meta)
        writer = agree(comm, start)
    else:
        agree(comm, lambda: None)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)
    progress = _Progress(len(cases), console) if rank == 0 and console is not None else None
    nwrong_cases = done_failed
    stopped = None
    flag = np.zeros(1, dtype=np.int64)
    status = "failed"
    watchdog = Watchdog(cfg.watchdog_s, P, rank, writer)
    try:
        for case in cases:
            flag[0] = _SIGNALLED[0] if _SIGNALLED else 0
            comm.Allreduce(MPI.IN_PLACE, flag, MPI.MAX)
            if flag[0]:
                stopped = int(flag[0])
                break
            watchdog.start(case, cfg.budget_s)
            _inject_fault(comm, case)
            try:
                row = run_case(comm, case, settings, timer_res)
            except NotApplicableError as exc:  # the library refused a forced algorithm: no timing
                _not_applicable(writer, progress, case, str(exc), P)
                continue
            nwrong_cases += not row.ok
            if writer is not None:
                writer.append(row)
            if progress is not None:
                progress.done(case, row)
        status = "interrupted" if stopped else "complete"
    finally:
        watchdog.stop()
        if progress is not None:
            progress.stop()
        if writer is not None:
            writer.update(status=status, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          finished_cases=writer.rows, failed_cases=nwrong_cases,
                          **({"signal": signal.Signals(stopped).name} if stopped else {}))
            writer.close()
    path = writer.path if writer is not None else None
    if stopped:
        if rank == 0:
            print(f"ccbench: stopped by {signal.Signals(stopped).name}; {writer.rows} finished cases "
                  f"kept in {path}", file=sys.stderr)
        return 128 + stopped, path
    return (1 if nwrong_cases else 0), path
