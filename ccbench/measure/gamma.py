"""What every case pays besides moving bytes: the local reduction on each path, warm and cold, and the harness floor.

A reduction collective pays gamma per byte reduced.  Which code does the reducing depends
on who runs the algorithm: the MPI library's own collectives (``native``, ``native:<alg>``)
call its internal reduction, exposed as ``MPI_Reduce_local`` (mpi4py: ``Op.Reduce_local``);
ccbench's hand-written algorithms call numpy's ufunc in place (``ufunc(inout, in,
out=inout)``, ``ccbench.algorithms.p2p.CountedComm.reduce_local``).  The two differ by
several times (PyPI MPICH 5.0.2, float32 sum at 1 MiB: 7.4 GB/s against numpy's 33 GB/s on one
machine), so one gamma cannot price both.  And a collective reduces data that has just
arrived or is about to leave: at sizes beyond the last-level cache it streams from memory.
So each path is timed:

- **warm**: the same two buffers reduced again and again (they stay in cache) at 4 KiB,
  64 KiB and 1 MiB;
- **cold**: buffers of 1 MiB and 16 MiB reduced after writing a buffer of twice the
  last-level cache (read from /sys; 32 MiB when unknown; outside the timed region), so every
  call finds its operands evicted -- the regime of a large collective.

Every rank measures at the same time (the ranks share the node's memory bandwidth, as they
do in a collective); each sample is the maximum over ranks, between barriers, like a
collective's.  Records: {path, temperature, dtype, op, nbytes, seconds: [samples]}, stored in
run.json under ``reduce_local``; records without ``path`` (older runs) are numpy's, warm.
"""

import time
from pathlib import Path

import numpy as np

from ccbench.algorithms.native import reduce_local_of
from ccbench.algorithms.p2p import reduce_half
from ccbench.core.dtypes import DTYPES, OPS, is_half

__all__ = ["COLD_SIZES", "PATHS", "WARM_SIZES", "harness_floor", "last_level_cache_bytes", "reduction_rates"]

PATHS = ("numpy", "mpi")
WARM_SIZES = (4096, 65536, 1 << 20)
COLD_SIZES = (1 << 20, 16 << 20)
_MPI_OPS = {"sum": "SUM", "prod": "PROD", "min": "MIN", "max": "MAX"}


def last_level_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """Size of the largest cache level of CPU 0 (bytes), from sysfs; None when unknown."""
    best = None
    for d in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            text = (d / "size").read_text().strip()
            level = int((d / "level").read_text())
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if text[-1:].isalpha() else text
        if digits.isdigit() and (best is None or level >= best[0]):
            best = (level, int(digits) * scale)
    return best[1] if best else None


def _reducer(path: str, op: str, MPI, dtype=None):
    """call(inbuf, inoutbuf): inoutbuf = inbuf (op) inoutbuf on `path`, as a collective of `dtype` reduces: a
    16-bit float widened to float32 and rounded back (numpy), or through the library's own datatype or the
    user-defined op a native call of that type uses (``ccbench.algorithms.native.reduce_local_of``)."""
    if path == "numpy":
        ufunc = OPS[op]
        if dtype is not None and is_half(dtype):
            return lambda a, b: reduce_half(ufunc, a, b)
        return lambda a, b: ufunc(b, a, out=b)
    if dtype is not None and is_half(dtype):
        return reduce_local_of(op, dtype)
    mpi_op = getattr(MPI, _MPI_OPS[op])
    return lambda a, b: mpi_op.Reduce_local(a, b)


def _time(comm, fn, reps: int, before=None) -> list[float]:
    """`reps` samples of fn(i) between barriers, each the maximum over ranks; before() runs untimed first."""
    from mpi4py import MPI

    local = np.empty(reps)
    for i in range(reps):
        if before is not None:
            before()
        comm.Barrier()
        t0 = time.perf_counter()
        fn(i)
        local[i] = time.perf_counter() - t0
    out = np.empty_like(local)
    comm.Allreduce(local, out, MPI.MAX)
    return [float(x) for x in out]


def reduction_rates(comm, pairs, *, reps: int = 10, warm_sizes=WARM_SIZES, cold_sizes=COLD_SIZES,
                    llc_bytes: int | None = None) -> list[dict]:
    """Time each (dtype, op) of `pairs` on both paths, warm and cold, on every rank of `comm` (module docstring)."""
    from mpi4py import MPI

    llc = llc_bytes or last_level_cache_bytes() or (32 << 20)
    flush = np.empty(2 * llc, dtype=np.uint8)  # written before each cold sample: evicts the operands
    out = []
    for dtype, op in pairs:
        dt = np.dtype(DTYPES[dtype])
        for path in PATHS:
            reduce = _reducer(path, op, MPI, dt)
            for nbytes in warm_sizes:
                n = max(1, nbytes // dt.itemsize)
                a, b = np.ones(n, dtype=dt), np.ones(n, dtype=dt)
                reduce(a, b)  # first touch outside the samples
                samples = _time(comm, lambda i, f=reduce, a=a, b=b: f(a, b), reps)
                out.append({"path": path, "temperature": "warm", "dtype": dtype, "op": op,
                            "nbytes": n * dt.itemsize, "seconds": samples})
            for nbytes in cold_sizes:
                n = max(1, nbytes // dt.itemsize)
                a, b = np.ones(n, dtype=dt), np.ones(n, dtype=dt)
                samples = _time(comm, lambda i, f=reduce, a=a, b=b: f(a, b), reps, before=lambda: flush.fill(1))
                out.append({"path": path, "temperature": "cold", "dtype": dtype, "op": op,
                            "nbytes": n * dt.itemsize, "seconds": samples, "llc_bytes": llc})
    return out


def harness_floor(comm, collectives, settings) -> dict:
    """The per-call cost of this run's own Python path, measured through the same timing loop.

    ``empty_s``: the median of an empty Python call timed like a case (the timer and the loop,
    not the synchronisation, which is outside the timed region); ``zero_count_s``: per
    collective, the median of the library's own call with zero elements (mpi4py's argument
    handling and the library's entry, with nothing to move) -- what every small message of
    that collective pays before any byte moves.  ``settings`` are the sweep's timing settings
    (its synchronisation and batching), with the repetitions of a quick case.  The hardware
    floor under both is the C library's own call, which a Python loop cannot show.
    """
    import dataclasses

    from mpi4py import MPI

    from ccbench.algorithms import REGISTRY
    from ccbench.algorithms.native import call_of
    from ccbench.core.collectives import COLLECTIVES
    from ccbench.measure.timing import measure

    quick = dataclasses.replace(settings, warmup=5, min_reps=30, max_reps=200, target_rse=0.02, budget_s=0.05,
                                iterations=None)
    empty, _ = measure(comm, lambda: None, quick)
    out = {"empty_s": float(np.median(empty)), "zero_count_s": {}}
    for coll in collectives:
        if coll not in COLLECTIVES or "native" not in REGISTRY[coll]:
            continue
        bufs = COLLECTIVES[coll].make_buffers(0, comm.Get_size(), comm.Get_rank(), DTYPES["float32"], "sum", 0,
                                              False, MPI.IN_PLACE)
        call = call_of(coll, REGISTRY[coll]["native"].fn, comm, *bufs.args, **bufs.kwargs)  # as run_case times it
        samples, _ = measure(comm, call, quick)
        if coll == "pingpong":
            samples = samples / 2  # one way, as the ping-pong rows are
        out["zero_count_s"][coll] = float(np.median(samples))
    return out
