"""The node's memory copy bandwidth, the physical limit of a collective within a node: STREAM copy with numpy.

The method is McCalpin's STREAM ``Copy`` kernel (a(i) = b(i); J. D. McCalpin, "Memory Bandwidth
and Machine Balance in Current High Performance Computers", IEEE TCCA Newsletter, Dec. 1995;
https://www.cs.virginia.edu/stream/), written as ``np.copyto(dst, src)`` on float64 buffers:

- **bytes counted as STREAM counts them**: bytes read + bytes written, 2 x the buffer size per
  copy (the write-allocate read of the destination that most caches add is not counted, as
  STREAM does not count it);
- **best of the repetitions**: one untimed copy first (it also touches the destination), then
  `reps` timed copies, of which the analysis keeps the shortest (STREAM reports the best of
  NTIMES and skips the first);
- **buffers beyond the last-level cache**: the one-core buffers are each twice the last-level
  cache (read from sysfs, 32 MiB when unknown), so the pair is four times it, STREAM's rule
  for the footprint (its rule asks it of each array; halved here to keep the step short),
  between 8 and 64 MiB; in the all-ranks copy each rank's pair is twice the cache divided
  among the ranks of its node (at least 4 MiB per buffer, at most the one-core size), so the
  node's footprint is again four times the cache.

Two figures:

- **one core**: rank 0 copies alone while every other rank waits in a non-blocking barrier
  polled with a 1 ms sleep (so it neither spins on a core nor touches memory);
- **all ranks at once**: every rank copies after a barrier, each repetition between
  barriers; per repetition a node's time runs from its first rank's start to its last
  rank's end (the node's ranks from ``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``, on
  ``CLOCK_MONOTONIC``, one clock for every process of a node), so the node's aggregate is
  its ranks x the counted bytes / that time -- STREAM's wall clock around all its threads.
  (Each rank's own copy time would not do: ranks leave a barrier at different moments, and
  on oversubscribed cores they take turns, so their copies need not overlap at all.)

The record (``run.json``'s ``memory_bandwidth``; every rank returns the same)::

    {"method", "repetitions",
     "one_core": {"host", "llc_bytes", "nbytes", "counted_bytes", "seconds": [...]},
     "all_ranks": [{"host", "ranks", "llc_bytes", "nbytes" (per rank), "counted_bytes" (per rank),
                    "seconds": [per repetition, first start to last end]}, ... one per node]}

The rates, the node's aggregate, the per-rank share and the intra-node beta are derived from
it by ``ccbench.analysis.limits``.
"""

import time

import numpy as np

from ccbench.measure.gamma import last_level_cache_bytes

__all__ = ["METHOD", "buffer_bytes", "memory_bandwidth"]

METHOD = ("STREAM copy (McCalpin) with numpy: np.copyto(dst, src) on float64 buffers beyond the last-level "
          "cache; bytes counted = read + written (2 x the buffer) per copy; best of the repetitions after one "
          "untimed copy")
_MIN_ONE, _MAX_ONE = 8 << 20, 64 << 20
_MIN_RANK = 4 << 20


def buffer_bytes(llc_bytes: int, ranks_on_node: int) -> tuple[int, int]:
    """(one-core buffer, all-ranks buffer per rank) in bytes, multiples of 8 (module docstring)."""
    one = min(max(2 * llc_bytes, _MIN_ONE), _MAX_ONE)
    per_rank = min(max(2 * llc_bytes // max(ranks_on_node, 1), _MIN_RANK), one)
    return one // 8 * 8, per_rank // 8 * 8


def _timed_copies(dst: np.ndarray, src: np.ndarray, reps: int, comm=None) -> tuple[np.ndarray, np.ndarray]:
    """One untimed copy, then `reps` timed ones (each after a barrier on `comm` when given): (starts, ends) in
    seconds of ``CLOCK_MONOTONIC``."""
    np.copyto(dst, src)
    starts, ends = np.empty(reps), np.empty(reps)
    for i in range(reps):
        if comm is not None:
            comm.Barrier()
        starts[i] = time.clock_gettime(time.CLOCK_MONOTONIC)
        np.copyto(dst, src)
        ends[i] = time.clock_gettime(time.CLOCK_MONOTONIC)
    return starts, ends


def _sleeping_barrier(comm) -> None:
    """A barrier that waits in 1 ms sleeps instead of spinning (MPICH busy-polls in MPI_Barrier)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(1e-3)


def memory_bandwidth(comm, *, reps: int = 4, llc_bytes: int | None = None) -> dict:
    """Time STREAM copy on one core (rank 0) and on all ranks of `comm` at once; the record of the module docstring."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        llc = llc_bytes or last_level_cache_bytes() or (32 << 20)
        host = MPI.Get_processor_name()
        one_n, rank_n = buffer_bytes(llc, node.Get_size())
        one_core = None
        comm.Barrier()
        if rank == 0:
            src = np.ones(one_n // 8)
            dst = np.empty_like(src)
            starts, ends = _timed_copies(dst, src, reps)
            one_core = {"host": host, "llc_bytes": llc, "nbytes": one_n, "counted_bytes": 2 * one_n,
                        "seconds": [float(s) for s in ends - starts]}
            src, dst = src[: rank_n // 8], dst[: rank_n // 8]  # already touched: reused below
        _sleeping_barrier(comm)
        if rank != 0:
            src = np.ones(rank_n // 8)
            dst = np.empty_like(src)
        starts, ends = _timed_copies(dst, src, reps, comm)
        del src, dst
        first, last = np.empty_like(starts), np.empty_like(ends)
        node.Allreduce(starts, first, MPI.MIN)
        node.Allreduce(ends, last, MPI.MAX)
        mine = ({"host": host, "ranks": node.Get_size(), "llc_bytes": llc, "nbytes": rank_n,
                 "counted_bytes": 2 * rank_n, "seconds": [float(s) for s in last - first]}
                if node.Get_rank() == 0 else None)
        nodes = [n for n in comm.allgather(mine) if n is not None]
        one_core = comm.bcast(one_core, root=0)
    finally:
        node.Free()
    return {"method": METHOD, "repetitions": reps, "one_core": one_core, "all_ranks": nodes}
