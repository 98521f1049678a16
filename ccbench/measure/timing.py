"""The one timing loop: warm-up, synchronised single-call samples, adaptive repetitions.

Method (docs/measuring.md, "How it times"; after SKaMPI and IMB):

* every sample is one call between two synchronisations, the synchronisation outside
  the timed region (``sync="barrier"``: an MPI_Barrier before each call;
  ``sync="window"``: every rank starts the call at the same instant of a common clock,
  estimated by ping-pong offsets to rank 0, the window method of SKaMPI / ReproMPI --
  Hunold & Carpen-Amarie 2016, "Reproducible MPI benchmarking is still not as easy as
  you think");
* a sample's time is the maximum over ranks of that call's local time (the collective
  is finished when its slowest rank is);
* repetitions adapt: stop once the relative standard error of the mean is below a
  target after a minimum count (SKaMPI), at a maximum count, or when the case's time
  budget is spent (IMB's per-size time limit).  The stop reason is returned.  With
  ``iterations`` set, exactly that many samples are taken and nothing else stops the
  loop (OSU Micro-Benchmarks' ``-i``; its ``-x`` is ``warmup``);
* ``batch`` > 1 times that many back-to-back calls between two synchronisations, and a
  sample is their time divided by ``batch`` (IMB's and nccl-tests' way, OMB-Py's
  back-to-back loop): the synchronisation and the timer's cost are spread over the calls,
  and consecutive calls may overlap (pipelining), which a single synchronised call cannot.

* ``call`` may instead be a compiled kernel (`Sampler`; ``--loop compiled``,
  `ccbench.measure.compiled`): it runs the samples of one check, with the same
  synchronisation and timer placement, in C, so the interpreter and mpi4py's argument
  handling are not inside the timed region (OSU Micro-Benchmarks' and IMB's loops are C);
  the warm-up estimate, the reduction over ranks and the stop rules below are the same code.

Per-rank times are reduced to their maximum in batches (one MPI_Allreduce per check,
not per sample), and every stop decision is taken from those reduced values, so all
ranks agree on it without extra messages.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ccbench.core.stats import relative_standard_error

__all__ = ["DEFAULT_BATCH", "Sampler", "TimingSettings", "batch_of", "measure", "rank_means", "timer_resolution_s"]

_now = time.perf_counter


@dataclass(frozen=True)
class TimingSettings:
    """How to repeat one case (the defaults are `ccbench.measure.config.Config`'s)."""

    warmup: int = 5
    min_reps: int = 20
    max_reps: int = 1000
    target_rse: float = 0.05
    budget_s: float = 1.0
    sync: str = "barrier"
    batch: int = 1                 # calls per sample, back to back (1: one synchronised call)
    iterations: int | None = None  # fixed sample count (None: adaptive)

    def __post_init__(self):
        if self.batch < 1 or (self.iterations is not None and self.iterations < 1):
            raise ValueError("batch and iterations must be >= 1")

    @classmethod
    def from_config(cls, cfg) -> "TimingSettings":
        """The timing fields of a sweep configuration (``timing`` "batched:K" gives batch K)."""
        kw = {f: getattr(cfg, f) for f in cls.__dataclass_fields__ if f not in ("batch", "iterations")}
        return cls(**kw, batch=batch_of(getattr(cfg, "timing", "per-call")),
                   iterations=getattr(cfg, "iterations", None))


#: Calls per sample of ``--timing batched`` without a count.
DEFAULT_BATCH = 10


def batch_of(timing: str) -> int:
    """Calls per sample of a timing mode: "per-call" 1, "batched" DEFAULT_BATCH, "batched:K" K."""
    if timing == "per-call":
        return 1
    if timing == "batched":
        return DEFAULT_BATCH
    head, _, k = timing.partition(":")
    if head != "batched" or not k.isdigit() or int(k) < 1:
        raise ValueError(f"timing {timing!r}: per-call, batched or batched:K (K >= 1)")
    return int(k)


def timer_resolution_s(trials: int = 200) -> float:
    """The smallest non-zero step seen between consecutive perf_counter() readings."""
    best = float("inf")
    for _ in range(trials):
        t0 = _now()
        t1 = _now()
        while t1 == t0:
            t1 = _now()
        best = min(best, t1 - t0)
    return max(best, time.get_clock_info("perf_counter").resolution)


class _Window:
    """Start times on a common clock: offsets to rank 0 by ping-pong (Cristian 1989)."""

    def __init__(self, comm, rounds: int = 20, clock: Callable[[], float] | None = None) -> None:
        now = self.now = _now if clock is None else clock
        self.comm = comm
        rank, size = comm.Get_rank(), comm.Get_size()
        buf = np.zeros(1)
        self.offset = 0.0  # local clock - rank 0's clock
        for peer in range(1, size):
            best = (float("inf"), 0.0)
            for _ in range(rounds):
                if rank == 0:
                    comm.Recv(buf, peer, 91)
                    buf[0] = now()
                    comm.Send(buf, peer, 92)
                elif rank == peer:
                    t0 = now()
                    comm.Send(buf, 0, 91)
                    comm.Recv(buf, 0, 92)
                    t1 = now()
                    rtt = t1 - t0
                    if rtt < best[0]:
                        best = (rtt, (t0 + t1) / 2 - buf[0])
            if rank == peer:
                self.offset = best[1]
        self.start = np.zeros(1)
        self._bcast = comm.Bcast

    def start_after(self, gap_s: float) -> float:
        """Agree on a start instant `gap_s` from now (rank 0's clock); return it locally."""
        if self.comm.Get_rank() == 0:
            self.start[0] = self.now() + gap_s
        self._bcast(self.start, 0)
        return float(self.start[0]) + self.offset


class Sampler(Protocol):
    """A compiled loop for one case (`ccbench.measure.compiled.Kernel`): the inner loop of `measure`, in C."""

    def now(self) -> float:
        """This rank's clock, in seconds (the one `take` times with)."""

    def take(self, local: np.ndarray, start: int, stop: int, batch: int, window: bool, gap_s: float,
             offset_s: float) -> None:
        """Samples start..stop-1 into `local`: per sample, a barrier (or, with `window`, a start `gap_s`
        after rank 0's clock, broadcast, plus this rank's `offset_s`), `batch` calls, their time / `batch`."""


def rank_means(comm, local: np.ndarray) -> dict:
    """OSU's and IMB's statistics of one case: each rank's mean time, then their min, mean and max over ranks.

    OSU Micro-Benchmarks report "Min/Avg/Max Latency" this way (each rank's average over its
    iterations, then reduced over ranks), IMB ``t_min``/``t_avg``/``t_max`` likewise; ccbench's
    own sample is the per-call maximum over ranks, so these columns sit beside it for a reader
    comparing with those tools.
    """
    from mpi4py import MPI

    mine = float(np.mean(local)) if len(local) else 0.0
    lo, hi, total = (comm.allreduce(mine, op) for op in (MPI.MIN, MPI.MAX, MPI.SUM))
    return {"rank_mean_min_s": lo, "rank_mean_avg_s": total / comm.Get_size(), "rank_mean_max_s": hi}


def measure(comm, call: "Callable[[], object] | Sampler", s: TimingSettings,
            clock: Callable[[], float] | None = None, per_rank: dict | None = None,
            local_out: list | None = None) -> tuple[np.ndarray, str]:
    """Time `call` on every rank of `comm`; return (per-sample max-over-ranks seconds, stop reason).

    `call` is a Python callable, or a compiled `Sampler` that takes the samples itself (with its
    own clock).  `clock` reads this rank's local time in seconds (default: time.perf_counter).  A
    `per_rank` dict is filled with ``rank_means`` of this rank's own call times (OSU's and IMB's
    statistics); `local_out`, a list, gets this rank's own call times appended (an array).
    """
    from mpi4py import MPI

    sampler = None if callable(call) else call
    now = sampler.now if sampler is not None else _now if clock is None else clock
    barrier = comm.Barrier
    allreduce = comm.Allreduce
    # warm-up, and an estimate of one call's time to size the first batch
    est = np.zeros(1)
    if s.warmup:
        if sampler is not None:  # the same: a barrier, the warm-up calls back to back, their time / count
            sampler.take(est, 0, 1, s.warmup, False, 0.0, 0.0)
        else:
            barrier()
            t0 = now()
            for _ in range(s.warmup):
                call()
            est[0] = (now() - t0) / s.warmup
        allreduce(MPI.IN_PLACE, est, MPI.MAX)
    window = _Window(comm, clock=now) if s.sync == "window" else None
    gap = max(4 * est[0], 50e-6) if window else 0.0

    fixed = s.iterations
    most = fixed if fixed is not None else s.max_reps
    local = np.empty(most + 1)
    samples = np.empty(most + 1)
    first = s.min_reps
    if est[0] > 0 and est[0] * first > s.budget_s:
        first = max(2, min(first, int(s.budget_s / est[0])))
    k = s.batch
    if window is not None:
        gap *= k
    n = done = 0
    check = most if fixed is not None else min(first, most)
    t_begin = now()
    while True:
        if sampler is not None:  # every sample up to the next check in one compiled call
            sampler.take(local, n, check, k, window is not None, gap, window.offset if window else 0.0)
            n = check
        else:
            if window is None:
                barrier()
                t0 = now()
                if k == 1:  # per call: nothing but the call between the two clock reads
                    call()
                else:
                    for _ in range(k):
                        call()
                local[n] = (now() - t0) / k
            else:
                # everyone starts at the agreed instant; the sample spans from it to the end
                start = window.start_after(gap)
                while now() < start:
                    pass
                for _ in range(k):
                    call()
                local[n] = (now() - start) / k
            n += 1
        if n < check:
            continue
        # one reduction per batch: maxima of the new samples + elapsed time
        local[n] = now() - t_begin
        batch = local[done:n + 1].copy()
        allreduce(MPI.IN_PLACE, batch, MPI.MAX)
        samples[done:n] = batch[:-1]
        elapsed = batch[-1]
        done = n
        stop = ("iterations" if fixed is not None else "max_reps" if n >= s.max_reps
                else "target_rse" if n >= s.min_reps and relative_standard_error(samples[:n]) <= s.target_rse
                else "budget" if elapsed >= s.budget_s else None)
        if stop is not None:
            if per_rank is not None:
                per_rank.update(rank_means(comm, local[:n]))
            if local_out is not None:
                local_out.append(local[:n].copy())
            return samples[:n].copy(), stop
        # next check after ~25% more samples, but not past the budget's estimate
        per = elapsed / n
        more = max(1, n // 4)
        if per > 0:
            more = max(1, min(more, int((s.budget_s - elapsed) / per) + 1))
        check = min(n + more, s.max_reps)
