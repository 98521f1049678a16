"""Run workload schedules under MPI: buffers, the one timing loop, validation, overlap, stragglers.

Steps are timed with `ccbench.measure.timing.measure` (warm-up, barrier before each sample, the
maximum over ranks, adaptive repetitions); every call of a step is also timed on its own
inside the timed steps, which gives the per-bucket (per-part) rows.  After timing, each
schedule runs once more on fresh inputs and poisoned outputs and every output element is
compared with the exact result (`ccbench.core.collectives` patterns), as the runner does.

`StepBuffers` and `step_calls` need no MPI: the tests run schedules on the simulated
communicator (`ccbench.algorithms.simcomm`) to count their traffic.
"""

import functools
import time

import numpy as np

from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import block_counts
from ccbench.workloads.overlap import RankTimes
from ccbench.workloads.schedule import Call, Schedule

__all__ = ["ComputeKernel", "DelayedSync", "StepBuffers", "measure_overlap", "step_calls"]

_now = time.perf_counter


class StepBuffers:
    """One rank's buffers for a schedule: a flat send and a flat receive array, one region per call.

    Like DDP's bucket views into a flat gradient buffer, every call gets its own slice, so
    one validation pass checks every call of the step.  Inputs and expected outputs come
    from the collective's own buffer hook (`Collective.make_buffers`, out of place), made
    on demand, so no template of the whole step is kept.
    """

    def __init__(self, schedule: Schedule, group_size: int, group_rank: int, dtype) -> None:
        self.schedule, self.P, self.rank, self.dtype = schedule, group_size, group_rank, np.dtype(dtype)
        self.layout = []  # per call: (send offset, send elems, recv offset, recv elems)
        so = ro = 0
        for c in schedule.calls:
            sn, rn = self._sizes(c)
            self.layout.append((so, sn, ro, rn))
            so, ro = so + sn, ro + rn
        self.send = np.zeros(so, dtype=self.dtype)
        self.recv = np.zeros(ro, dtype=self.dtype)

    def _sizes(self, c: Call) -> tuple[int, int]:
        P, count = self.P, c.count
        if c.collective == "alltoallv":  # this rank's row (sent) and column (received) of the count matrix
            m = block_counts(c.counts, P, count * P * P, matrix=True)
            return int(m[self.rank].sum()), int(m[:, self.rank].sum())
        return {"allreduce": (count, count), "reduce_scatter": (P * count, count),
                "allgather": (count, P * count), "alltoall": (P * count, P * count)}[c.collective]

    def call_kwargs(self, i: int) -> dict:
        """The keywords of call `i` after its buffers: the op of a reduction, a v-collective's counts."""
        c = self.schedule.calls[i]
        if c.collective == "alltoallv":
            m = block_counts(c.counts, self.P, c.count * self.P * self.P, matrix=True)
            return {"sendcounts": tuple(int(x) for x in m[self.rank]),
                    "recvcounts": tuple(int(x) for x in m[:, self.rank])}
        return {"op": "sum"} if COLLECTIVES[c.collective].reduction else {}

    def views(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        so, sn, ro, rn = self.layout[i]
        return self.send[so:so + sn], self.recv[ro:ro + rn]

    def _hook(self, i: int):
        c = self.schedule.calls[i]
        return COLLECTIVES[c.collective].buffers(c.count, self.P, self.rank, self.dtype, "sum", 0, False, None,
                                                  c.counts)

    def fill(self) -> None:
        """Fresh inputs in every send region, the poison value in every receive region."""
        from ccbench.core.collectives import POISON

        self.recv.fill(POISON)
        for i in range(len(self.layout)):
            cb = self._hook(i)
            send, _ = self.views(i)
            for arr, tmpl in cb.inputs:
                if arr is not cb.args[0]:
                    raise AssertionError("out-of-place inputs live in the send buffer")
                send[...] = tmpl

    def nwrong_call(self, i: int, additions: int | None = None) -> int:
        """Output elements of call `i` on this rank that differ from the exact result (a half-type sum: lie outside
        its bound, `CaseBuffers.nwrong`, for its algorithm's `additions` where given, else for any order of the P
        contributions)."""
        cb = self._hook(i)
        if additions is not None:
            cb.hold_to(additions)
        _, recv = self.views(i)
        bad = 0
        for arr, exp in cb.outputs:
            if arr is not cb.args[1]:
                raise AssertionError("out-of-place outputs live in the receive buffer")
            bad += cb.wrong_in(recv, exp)
        return bad

    def nwrong(self) -> int:
        """Output elements on this rank that differ from the exact result, over every call."""
        return sum(self.nwrong_call(i) for i in range(len(self.layout)))


def step_calls(comm, schedule: Schedule, algorithms: dict, bufs: StepBuffers) -> list:
    """One zero-argument callable per call of the step, bound to its algorithm and buffers.

    Hand-written algorithms get the one counting wrapper of `comm` (`_p2p.counted`).
    """
    out = []
    for i, c in enumerate(schedule.calls):
        alg = algorithms[c.collective]
        target = comm if alg.native else counted(comm)
        send, recv = bufs.views(i)
        out.append(functools.partial(alg.fn, target, send, recv, **bufs.call_kwargs(i)))
    return out


class StepTimer:
    """The step callable for `measure`: runs every call, keeping each call's local time per step."""

    def __init__(self, calls: list, max_steps: int) -> None:
        self.calls = calls
        self.times = np.zeros((max_steps, len(calls)))
        self.i = 0

    def __call__(self) -> None:
        row = self.times[self.i % len(self.times)]
        for j, call in enumerate(self.calls):
            t0 = _now()
            call()
            row[j] = _now() - t0
        self.i += 1


class ComputeKernel:
    """A calibrated compute kernel: a loop of small numpy matrix products (float64, 64 x 64).

    Calibrated once per run, while every rank calibrates at once: the loop runs for
    `calibrate_s` of wall time and one iteration's cost is that time over the
    iterations done -- a mean that includes the time slices lost to other ranks, so a
    kernel asked for 5 ms lasts about 5 ms on oversubscribed cores too.  `run`
    optionally polls a request `polls` times, evenly spread, as OSU's ``-t`` option
    calls MPI_Test inside its dummy compute, and returns the time those calls took.
    """

    def __init__(self, size: int = 64, calibrate_s: float = 0.2) -> None:
        rng = np.random.default_rng(0)
        self.a = rng.random((size, size))
        self.b = rng.random((size, size))
        self.c = np.empty((size, size))
        n = 0
        t0 = _now()
        end = t0 + calibrate_s
        while True:
            for _ in range(16):
                np.matmul(self.a, self.b, out=self.c)
            n += 16
            t = _now()
            if t >= end:
                break
        self.iter_s = (t - t0) / n

    def iterations(self, seconds: float) -> int:
        return max(1, round(seconds / self.iter_s)) if seconds > 0 else 0

    def run(self, iters: int, poll=None, polls: int = 0) -> float:
        """`iters` iterations, `poll` called after every ``iters // polls``-th; the seconds spent in `poll`."""
        a, b, c = self.a, self.b, self.c
        every = max(1, iters // polls) if poll is not None and polls > 0 else 0
        spent = 0.0
        for k in range(iters):
            np.matmul(a, b, out=c)
            if every and (k + 1) % every == 0:
                t0 = _now()
                poll()
                spent += _now() - t0
        return spent


def measure_overlap(comm, start, kernel, compute_s: float, settings, polls: int = 0,
                    compute_factor: float = 1.0) -> tuple[dict, dict, float, RankTimes]:
    """Time a non-blocking collective alone, the compute alone, and start + compute (with test calls) + wait.

    `start()` starts the collective and returns a request (``Wait``, ``Test``); `kernel`
    is a `ComputeKernel` (``iterations(seconds)``, ``run(iters, poll=, polls=) -> seconds in the
    polls``).  The compute lasts `compute_s`, or `compute_factor` times the collective alone
    (its median) when 0 (OSU's default: factor 1, the dummy compute sized to the pure
    communication latency).  Inside start + compute + wait the compute (test calls included)
    and the test calls are timed on their own, as OSU's ``osu_i<coll>`` loops do.  Each timing
    goes through `timing.measure`.  Returns ({"comm", "compute", "total": samples}, stop
    reasons, the compute asked for (seconds), this rank's mean times: the inputs of both overlap
    definitions, `ccbench.workloads.overlap`).
    """
    from ccbench.measure.timing import measure

    def pure():
        start().Wait()

    samples, stops, local = {}, {}, {"comm": [], "total": []}
    samples["comm"], stops["comm"] = measure(comm, pure, settings, local_out=local["comm"])
    target_s = compute_s if compute_s > 0 else compute_factor * float(np.median(samples["comm"]))
    iters = kernel.iterations(target_s)
    cpu: list[float] = []
    test: list[float] = []

    def compute():
        kernel.run(iters)

    def total():
        req = start()
        t0 = _now()
        test.append(kernel.run(iters, poll=req.Test, polls=polls))
        cpu.append(_now() - t0)
        req.Wait()

    samples["compute"], stops["compute"] = measure(comm, compute, settings)
    samples["total"], stops["total"] = measure(comm, total, settings, local_out=local["total"])
    n = len(local["total"][0])  # the timed calls: the last n (the warm-up calls come first)
    mine = RankTimes(float(np.mean(local["comm"][0])), float(np.mean(local["total"][0])), float(np.mean(cpu[-n:])),
                     float(np.mean(test[-n:])))
    return samples, stops, target_s, mine


class DelayedSync:
    """`comm` for `timing.measure` whose barrier makes one rank late by `delay_s`.

    The late rank sleeps after each barrier, before its timer starts: every other rank's
    sample includes waiting for it, the late rank's own does not.  So a sample's
    maximum over ranks grows by the part of the delay the collective passes on.
    """

    def __init__(self, comm, delay_s: float, late: bool) -> None:
        self.comm, self.delay_s, self.late = comm, delay_s, late
        self.Allreduce = comm.Allreduce

    def Barrier(self) -> None:
        self.comm.Barrier()
        if self.late:
            time.sleep(self.delay_s)
