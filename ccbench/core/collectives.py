"""What each collective is: its size definition, bus-bandwidth factor, buffers and checks.

These are the per-collective hooks of the one shared runner, in the manner of
nccl-tests' per-collective files.  Sizes follow nccl-tests (`doc/PERFORMANCE.md`):
``nbytes`` is the buffer of allreduce, reduce and bcast; the whole gathered buffer of
allgather and gather; the whole input of reduce-scatter, scatter and alltoall (per rank).
The bus-bandwidth factor turns algbw = nbytes / time into a figure comparable with the
link speed: 2(P-1)/P for allreduce, (P-1)/P for the gathers, scatters, reduce-scatter and
alltoall, 1 for bcast, reduce and ping-pong.

The v-collectives (allgatherv, alltoallv, gatherv, scatterv, reduce_scatterv: MPI_Reduce_scatter) give every
block its own size, drawn from a count distribution (`ccbench.core.counts`, ``--counts``).  Their size is that
of their even form holding the same elements: ``count`` is the mean block, ``nbytes`` the whole gathered,
scattered or reduced buffer (the sum of the P blocks) and, for alltoallv, the sum of all P x P blocks over P
(the mean send buffer of a rank) -- so a v-case and the even case of the same nbytes move the same bytes in
total, and the uniform distribution gives the even blocks exactly.

Every case fills its inputs with a deterministic per-rank pattern of small integers, so
the exact result is known in closed form for every dtype and op (integer-valued floats
add exactly; unsigned bytes wrap modulo 256 exactly as MPI's do).

Half precision (float16, bfloat16): the inputs are still exact (small integers, times a power
of two that keeps every sum below 2^15, so float16's 65504 is never reached at any rank
count), but each reduction step rounds to 16 bits, so a reduction's result is checked against
the float32 reference within its bound: |result - reference| <= gamma_steps x sum|x| per element
(`ccbench.core.dtypes.unit_roundoff`; Higham, Accuracy and Stability of Numerical Algorithms,
ch. 4), where steps is the longest chain of sequential additions.  The buffers do not know the
algorithm, so they assume P - 1, which bounds every summation order of P contributions; a sweep
or a workload step holds them to the algorithm's own count (`CaseBuffers.hold_to`,
``Algorithm.additions_on``: a hand-written one's, given the node layout).  The bound is applied as
Higham's gamma_k = k u / (1 - k u) (his Lemma 3.1), not its first-order k u, so that no exact
count is one rounding too tight.  min and max round nothing and are checked exactly, like every
other collective of a half type.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ccbench.core.counts import block_counts
from ccbench.core.dtypes import is_half, unit_roundoff

__all__ = ["COLLECTIVES", "Collective", "CaseBuffers", "half_scale", "pattern", "red_expected", "red_input"]

POISON = 0  # never produced by a pattern: outputs are poisoned with it before a check


#: Elements compared at a time when a result is checked: no temporary as large as the buffer.
CHUNK = 1 << 22


def _periodic(start: int, n: int, dtype, period: int, values, scale: float = 1.0) -> np.ndarray:
    """An array of `n` elements of `dtype`, element k = ``values(i)`` at the int64 offset i = start + k, for `values`
    periodic in i with `period`: one period computed (through int64, then cast: unsigned bytes wrap modulo 256 as
    MPI's sums do; times `scale`, a power of two, for the half types), then copied over the rest in doubling
    blocks -- a 2 GiB buffer costs a few copies of itself, not int64 temporaries 8 times its size."""
    out = np.empty(n, dtype=dtype)
    m = min(n, period)
    ints = np.asarray(values(np.arange(start, start + m, dtype=np.int64))).astype(np.int64)
    out[:m] = (ints if scale == 1.0 else ints * scale).astype(dtype)
    filled = m
    while filled < n:  # filled is a multiple of the period
        k = min(filled, n - filled)
        out[filled:filled + k] = out[:k]
        filled += k
    return out


def pattern(rank: int, start: int, n: int, dtype: np.dtype) -> np.ndarray:
    """The data rank `rank` contributes at element offsets [start, start + n): 1..251."""
    return _periodic(start, n, dtype, 251, lambda i: (rank * 37 + i) % 251 + 1)


#: the sum pattern's largest contribution of one rank (rank % 5 + i % 97 <= 100)
_SUM_MAX = 100


def half_scale(nranks: int) -> float:
    """The power of two the sum pattern is multiplied by for a half type: the largest sum over `nranks` ranks
    stays at or below 2^15, half of float16's largest finite value (65504), at any rank count."""
    k = max(0, (nranks * _SUM_MAX - 1).bit_length() - 15)
    return 2.0 ** -k


def _reference_dtype(nranks: int):
    """The float reference of a half-type reduction: float32, exact while the sum's integers fit its 24 bits."""
    return np.float32 if nranks * _SUM_MAX < 1 << 24 else np.float64


def red_input(op: str, rank: int, nranks: int, start: int, n: int, dtype) -> np.ndarray:
    """The input of rank `rank` of `nranks` to a reduction with `op` at element offsets [start, start+n), of `dtype`.

    The deterministic pattern every reduction case fills its inputs with: small integers (sum: rank % 5 + i % 97,
    times `half_scale` for a half type; prod: 2 on exactly one rank per element, else 1; min and max: 1..7), so the
    exact result over all ranks is known in closed form (`red_expected`) for every dtype and op.
    """
    if op == "sum":
        scale = half_scale(nranks) if is_half(dtype) else 1.0
        return _periodic(start, n, dtype, 97, lambda i: rank % 5 + i % 97, scale)
    if op == "prod":  # exactly one rank doubles each element
        return _periodic(start, n, dtype, nranks, lambda i: np.where(i % nranks == rank, 2, 1))
    return _periodic(start, n, dtype, 7, lambda i: (rank + i) % 7 + 1)  # min, max


def red_expected(op: str, nranks: int, start: int, n: int, dtype) -> np.ndarray:
    """The exact reduction with `op` over `nranks` ranks of `red_input` at element offsets [start, start+n), in
    closed form: what a correct reduction of those inputs gives, element for element (for a half type: the float32
    reference, exact, against which the result is checked within its bound)."""
    scale = 1.0
    if is_half(dtype):
        dtype = _reference_dtype(nranks)
        scale = half_scale(nranks) if op == "sum" else 1.0
    if op == "sum":
        base = sum(r % 5 for r in range(nranks))
        return _periodic(start, n, dtype, 97, lambda i: base + nranks * (i % 97), scale)
    if op == "prod":
        return _periodic(start, n, dtype, 1, lambda i: np.full(i.size, 2, dtype=np.int64))
    ranks = range(min(nranks, 7))  # (rank + i) % 7 takes every value once P >= 7
    fn = np.minimum if op == "min" else np.maximum

    def extreme(i):
        v = (i + ranks[0]) % 7 + 1
        for r in ranks[1:]:
            v = fn(v, (r + i) % 7 + 1)
        return v

    return _periodic(start, n, dtype, 7, extreme)


@dataclass
class CaseBuffers:
    """One rank's buffers for one case: what to pass, how to refill it, how to check it."""

    args: tuple                      # positional arguments after the communicator
    kwargs: dict                     # op= / root=
    inputs: list                     # (array, template) pairs restored by fill()
    outputs: list                    # (array view, expected) pairs checked by nwrong()
    # a half-type reduction: u of the type and the sequential additions allowed (module docstring);
    # nwrong() accepts |out - expected| <= gamma_steps * |expected| (expected = sum|x|: the inputs are >= 0)
    unit_roundoff: float = 0.0
    steps: int = 0

    def fill(self) -> None:
        """Poison every output, then restore every input (inputs may alias outputs)."""
        for out, _ in self.outputs:
            out.fill(POISON)
        for arr, tmpl in self.inputs:
            arr[...] = tmpl

    def hold_to(self, additions: int) -> None:
        """Check a half-type sum within the bound of `additions` sequential additions (the algorithm's own count,
        ``Algorithm.additions_at``) instead of P - 1; exact checks (min, max, the exact types) stay exact."""
        if self.steps:
            self.steps = additions

    def nwrong(self) -> int:
        """How many output elements on this rank differ from the exact result -- for a half-type reduction, lie
        outside its bound (`steps`, `unit_roundoff`) -- compared CHUNK elements at a time: no temporary as large as
        the buffer."""
        return sum(self.wrong_in(out, exp) for out, exp in self.outputs)

    def wrong_in(self, out: np.ndarray, exp: np.ndarray) -> int:
        """How many elements of `out` differ from `exp` as `nwrong` judges them (a half-type reduction within its
        bound): for an output held elsewhere, such as a workload's region of one receive buffer."""
        out, exp = out.reshape(-1), exp.reshape(-1)
        if self.unit_roundoff:
            return sum(self._outside(out[lo:lo + CHUNK], exp[lo:lo + CHUNK]) for lo in range(0, out.size, CHUNK))
        return sum(int(np.count_nonzero(out[lo:lo + CHUNK] != exp[lo:lo + CHUNK])) for lo in range(0, out.size, CHUNK))

    def _outside(self, out: np.ndarray, exp: np.ndarray) -> int:
        """Elements of `out` farther from the reference `exp` than gamma_steps x |exp| (NaN and inf included)."""
        ref = exp.astype(np.float64)
        err = np.abs(out.astype(np.float64) - ref)
        ku = self.steps * self.unit_roundoff
        gamma = ku / (1.0 - ku) if ku < 1.0 else np.inf  # Higham, Lemma 3.1; k u >= 1 bounds nothing
        return int(np.count_nonzero(~(np.isfinite(err) & (err <= gamma * np.abs(ref)))))

    def bytes_held(self) -> int:
        """The bytes this rank's buffers, templates and expected results hold (each array once)."""
        arrays = [a for a in (*self.args, *(x for pair in (*self.inputs, *self.outputs) for x in pair))
                  if isinstance(a, np.ndarray)]
        bases = {id(a.base if a.base is not None else a): (a.base if a.base is not None else a) for a in arrays}
        return sum(b.nbytes for b in bases.values())


@dataclass(frozen=True)
class Collective:
    """The hooks of one collective."""

    name: str
    summary: str
    size_definition: str
    busbw_factor: Callable[[int], float]
    reduction: bool = False
    rooted: bool = False
    blocked: bool = False   # nbytes covers P blocks of `count` elements
    min_ranks: int = 1
    make_buffers: Callable | None = None  # (count, nranks, rank, dtype, op, root, in_place, marker[, counts])
    uneven: bool = False    # a v-collective: blocks sized by a count distribution (its hook takes ``counts``)

    def buffers(self, count: int, nranks: int, rank: int, dtype, op: str = "sum", root: int = 0,
                in_place: bool = False, marker=None, counts: str = "uniform") -> "CaseBuffers":
        """One rank's CaseBuffers (`make_buffers`); `counts`, the spec of the count distribution, for a
        v-collective (ignored by the others)."""
        extra = {"counts": counts} if self.uneven else {}
        return self.make_buffers(count, nranks, rank, dtype, op, root, in_place, marker, **extra)

    def count_for(self, nbytes: int, itemsize: int, nranks: int) -> int:
        """Elements per block (or per buffer) for a requested size, at least one if nbytes > 0."""
        if self.name == "barrier" or nbytes == 0:
            return 0
        per = itemsize * (nranks if self.blocked else 1)
        return max(1, nbytes // per)

    def nbytes_for(self, count: int, itemsize: int, nranks: int) -> int:
        """The size in bytes (nccl-tests definition) of a case of `count` elements."""
        return count * itemsize * (nranks if self.blocked else 1)


# -- buffer hooks ----------------------------------------------------------------------
# Each returns CaseBuffers for one rank.  `marker` is the in-place marker to pass
# (MPI.IN_PLACE under MPI, None on the simulated communicator).


def _alloc(n: int, dtype) -> np.ndarray:
    return np.empty(n, dtype=dtype)


def _bound(dtype, op: str, P: int) -> dict:
    """The CaseBuffers fields of a reduction's check: for a half type, u and P - 1 steps (any summation order
    of P contributions; min and max round nothing: 0 steps); nothing for the exact types."""
    u = unit_roundoff(dtype)
    if not u:
        return {}
    return {"unit_roundoff": u, "steps": 0 if op in ("min", "max") else max(P - 1, 0)}


def _allreduce(count, P, rank, dtype, op, root, in_place, marker):
    inp = red_input(op, rank, P, 0, count, dtype)
    exp = red_expected(op, P, 0, count, dtype)
    recv = _alloc(count, dtype)
    bound = _bound(dtype, op, P)
    if in_place:
        return CaseBuffers((marker, recv), {"op": op}, [(recv, inp)], [(recv, exp)], **bound)
    send = _alloc(count, dtype)
    return CaseBuffers((send, recv), {"op": op}, [(send, inp)], [(recv, exp)], **bound)


def _reduce(count, P, rank, dtype, op, root, in_place, marker):
    inp = red_input(op, rank, P, 0, count, dtype)
    kw = {"op": op, "root": root}
    if rank != root:
        send = _alloc(count, dtype)
        return CaseBuffers((send, None), kw, [(send, inp)], [])
    exp = red_expected(op, P, 0, count, dtype)
    recv = _alloc(count, dtype)
    bound = _bound(dtype, op, P)
    if in_place:
        return CaseBuffers((marker, recv), kw, [(recv, inp)], [(recv, exp)], **bound)
    send = _alloc(count, dtype)
    return CaseBuffers((send, recv), kw, [(send, inp)], [(recv, exp)], **bound)


def _bcast(count, P, rank, dtype, op, root, in_place, marker):
    buf = _alloc(count, dtype)
    data = pattern(root, 0, count, dtype)
    if rank == root:
        return CaseBuffers((buf,), {"root": root}, [(buf, data)], [])
    return CaseBuffers((buf,), {"root": root}, [], [(buf, data)])


def _gather(count, P, rank, dtype, op, root, in_place, marker):
    mine = pattern(rank, 0, count, dtype)
    kw = {"root": root}
    if rank != root:
        send = _alloc(count, dtype)
        return CaseBuffers((send, None), kw, [(send, mine)], [])
    recv = _alloc(P * count, dtype)
    exp = np.concatenate([pattern(r, 0, count, dtype) for r in range(P)]) if count else recv[:0].copy()
    if in_place:
        own = recv[root * count:(root + 1) * count]
        return CaseBuffers((marker, recv), kw, [(own, mine)], [(recv, exp)])
    send = _alloc(count, dtype)
    return CaseBuffers((send, recv), kw, [(send, mine)], [(recv, exp)])


def _scatter(count, P, rank, dtype, op, root, in_place, marker):
    kw = {"root": root}
    exp = pattern(root, rank * count, count, dtype)
    if rank != root:
        recv = _alloc(count, dtype)
        return CaseBuffers((None, recv), kw, [], [(recv, exp)])
    send = _alloc(P * count, dtype)
    data = pattern(root, 0, P * count, dtype)
    if in_place:  # the root's own block stays where it is in sendbuf
        return CaseBuffers((send, marker), kw, [(send, data)], [(send, data.copy())])
    recv = _alloc(count, dtype)
    return CaseBuffers((send, recv), kw, [(send, data)], [(recv, exp)])


def _allgather(count, P, rank, dtype, op, root, in_place, marker):
    mine = pattern(rank, 0, count, dtype)
    recv = _alloc(P * count, dtype)
    exp = np.concatenate([pattern(r, 0, count, dtype) for r in range(P)]) if count else recv[:0].copy()
    if in_place:
        own = recv[rank * count:(rank + 1) * count]
        return CaseBuffers((marker, recv), {}, [(own, mine)], [(recv, exp)])
    send = _alloc(count, dtype)
    return CaseBuffers((send, recv), {}, [(send, mine)], [(recv, exp)])


def _reduce_scatter(count, P, rank, dtype, op, root, in_place, marker):
    inp = red_input(op, rank, P, 0, P * count, dtype)
    exp = red_expected(op, P, rank * count, count, dtype)
    bound = _bound(dtype, op, P)
    if in_place:  # input is the whole recvbuf; the result lands in its first block
        recv = _alloc(P * count, dtype)
        return CaseBuffers((marker, recv), {"op": op}, [(recv, inp)], [(recv[:count], exp)], **bound)
    send = _alloc(P * count, dtype)
    recv = _alloc(count, dtype)
    return CaseBuffers((send, recv), {"op": op}, [(send, inp)], [(recv, exp)], **bound)


def _alltoall(count, P, rank, dtype, op, root, in_place, marker):
    # block j of rank r's input goes to rank j: pattern(r, j*count ...)
    inp = pattern(rank, 0, P * count, dtype)
    parts = [pattern(j, rank * count, count, dtype) for j in range(P)]
    exp = np.concatenate(parts) if count else inp[:0].copy()
    recv = _alloc(P * count, dtype)
    if in_place:
        return CaseBuffers((marker, recv), {}, [(recv, inp)], [(recv, exp)])
    send = _alloc(P * count, dtype)
    return CaseBuffers((send, recv), {}, [(send, inp)], [(recv, exp)])


# -- the v-collectives: block r holds c[r] elements (block_counts), at offset d[r] = c[0] + ... + c[r-1];
# the counts travel as keywords (counts=, or sendcounts= and recvcounts= for alltoallv), the same on every rank


def _vector(counts: str, P: int, count: int) -> tuple[tuple[int, ...], list[int]]:
    """(block counts, offsets of length P + 1) of a vector v-collective of mean block `count`."""
    c = tuple(int(x) for x in block_counts(counts, P, count * P))
    d = [0]
    for x in c:
        d.append(d[-1] + x)
    return c, d


def _joined(parts: list, dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _allgatherv(count, P, rank, dtype, op, root, in_place, marker, counts="uniform"):
    c, d = _vector(counts, P, count)
    mine = pattern(rank, 0, c[rank], dtype)
    recv = _alloc(d[-1], dtype)
    exp = _joined([pattern(r, 0, c[r], dtype) for r in range(P)], dtype)
    kw = {"counts": c}
    if in_place:
        return CaseBuffers((marker, recv), kw, [(recv[d[rank]:d[rank + 1]], mine)], [(recv, exp)])
    send = _alloc(c[rank], dtype)
    return CaseBuffers((send, recv), kw, [(send, mine)], [(recv, exp)])


def _gatherv(count, P, rank, dtype, op, root, in_place, marker, counts="uniform"):
    c, d = _vector(counts, P, count)
    mine = pattern(rank, 0, c[rank], dtype)
    kw = {"counts": c, "root": root}
    if rank != root:
        send = _alloc(c[rank], dtype)
        return CaseBuffers((send, None), kw, [(send, mine)], [])
    recv = _alloc(d[-1], dtype)
    exp = _joined([pattern(r, 0, c[r], dtype) for r in range(P)], dtype)
    if in_place:
        return CaseBuffers((marker, recv), kw, [(recv[d[root]:d[root + 1]], mine)], [(recv, exp)])
    send = _alloc(c[rank], dtype)
    return CaseBuffers((send, recv), kw, [(send, mine)], [(recv, exp)])


def _scatterv(count, P, rank, dtype, op, root, in_place, marker, counts="uniform"):
    c, d = _vector(counts, P, count)
    kw = {"counts": c, "root": root}
    exp = pattern(root, d[rank], c[rank], dtype)
    if rank != root:
        recv = _alloc(c[rank], dtype)
        return CaseBuffers((None, recv), kw, [], [(recv, exp)])
    send = _alloc(d[-1], dtype)
    data = pattern(root, 0, d[-1], dtype)
    if in_place:  # the root's own block stays where it is in sendbuf
        return CaseBuffers((send, marker), kw, [(send, data)], [(send, data.copy())])
    recv = _alloc(c[rank], dtype)
    return CaseBuffers((send, recv), kw, [(send, data)], [(recv, exp)])


def _reduce_scatterv(count, P, rank, dtype, op, root, in_place, marker, counts="uniform"):
    c, d = _vector(counts, P, count)
    inp = red_input(op, rank, P, 0, d[-1], dtype)
    exp = red_expected(op, P, d[rank], c[rank], dtype)
    bound = _bound(dtype, op, P)
    kw = {"op": op, "counts": c}
    if in_place:  # input is the whole recvbuf; the result lands in its first c[rank] elements
        recv = _alloc(d[-1], dtype)
        return CaseBuffers((marker, recv), kw, [(recv, inp)], [(recv[:c[rank]], exp)], **bound)
    send = _alloc(d[-1], dtype)
    recv = _alloc(c[rank], dtype)
    return CaseBuffers((send, recv), kw, [(send, inp)], [(recv, exp)], **bound)


def _alltoallv(count, P, rank, dtype, op, root, in_place, marker, counts="uniform"):
    # m[i, j]: elements rank i sends rank j, from offset off[i, j] of its input pattern(i, 0, row sum)
    m = block_counts(counts, P, count * P * P, matrix=True)
    if in_place and not np.array_equal(m, m.T):
        raise ValueError(f"alltoallv in place sends and receives the same counts (MPI_IN_PLACE); {counts!r} does "
                         "not at this size")
    off = np.cumsum(m, axis=1) - m
    sendcounts = tuple(int(x) for x in m[rank])
    recvcounts = tuple(int(x) for x in m[:, rank])
    inp = pattern(rank, 0, sum(sendcounts), dtype)
    exp = _joined([pattern(i, int(off[i, rank]), recvcounts[i], dtype) for i in range(P)], dtype)
    recv = _alloc(sum(recvcounts), dtype)
    kw = {"sendcounts": sendcounts, "recvcounts": recvcounts}
    if in_place:
        return CaseBuffers((marker, recv), kw, [(recv, inp)], [(recv, exp)])
    send = _alloc(sum(sendcounts), dtype)
    return CaseBuffers((send, recv), kw, [(send, inp)], [(recv, exp)])


def _pingpong(count, P, rank, dtype, op, root, in_place, marker):
    # both receive buffers start poisoned and must end with rank 0's pattern: rank 1's holds
    # the message, rank 0's the echo (not what rank 0 sent, which stays in its send buffer)
    send, recv = _alloc(count, dtype), _alloc(count, dtype)
    data = pattern(0, 0, count, dtype)
    if rank == 0:
        return CaseBuffers((send, recv), {}, [(send, data)], [(recv, data)])
    return CaseBuffers((send, recv), {}, [], [(recv, data)] if rank == 1 else [])


def _barrier(count, P, rank, dtype, op, root, in_place, marker):
    return CaseBuffers((), {}, [], [])


def _factor_one(P: int) -> float:
    return 1.0


def _factor_spread(P: int) -> float:
    return (P - 1) / P


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective("barrier", "synchronise all ranks", "no data (0 bytes)",
                   lambda P: 0.0, make_buffers=_barrier),
        Collective("pingpong", "point-to-point round trip between ranks 0 and 1; time is half the round trip",
                   "message size", _factor_one, min_ranks=2, make_buffers=_pingpong),
        Collective("bcast", "root's buffer to every rank", "buffer size", _factor_one,
                   rooted=True, make_buffers=_bcast),
        Collective("scatter", "block i of root's buffer to rank i",
                   "root's send buffer (P blocks)", _factor_spread, rooted=True, blocked=True,
                   make_buffers=_scatter),
        Collective("gather", "every rank's block to the root",
                   "root's receive buffer (P blocks)", _factor_spread, rooted=True, blocked=True,
                   make_buffers=_gather),
        Collective("allgather", "every rank's block to every rank",
                   "receive buffer (P blocks)", _factor_spread, blocked=True,
                   make_buffers=_allgather),
        Collective("reduce", "elementwise reduction to the root", "buffer size", _factor_one,
                   reduction=True, rooted=True, make_buffers=_reduce),
        Collective("reduce_scatter", "reduction whose block i lands on rank i (block variant)",
                   "send buffer (P blocks)", _factor_spread, reduction=True, blocked=True,
                   make_buffers=_reduce_scatter),
        Collective("allreduce", "elementwise reduction, result on every rank", "buffer size",
                   lambda P: 2 * (P - 1) / P, reduction=True, make_buffers=_allreduce),
        Collective("alltoall", "block j of rank i to block i of rank j",
                   "send buffer per rank (P blocks)", _factor_spread, blocked=True,
                   make_buffers=_alltoall),
        Collective("allgatherv", "every rank's block, each of its own size, to every rank (MPI_Allgatherv)",
                   "receive buffer (P blocks of --counts sizes)", _factor_spread, blocked=True, uneven=True,
                   make_buffers=_allgatherv),
        Collective("gatherv", "every rank's block, each of its own size, to the root (MPI_Gatherv)",
                   "root's receive buffer (P blocks of --counts sizes)", _factor_spread, rooted=True, blocked=True,
                   uneven=True, make_buffers=_gatherv),
        Collective("scatterv", "block i of root's buffer, each of its own size, to rank i (MPI_Scatterv)",
                   "root's send buffer (P blocks of --counts sizes)", _factor_spread, rooted=True, blocked=True,
                   uneven=True, make_buffers=_scatterv),
        Collective("reduce_scatterv", "reduction whose block i, of its own size, lands on rank i "
                   "(MPI_Reduce_scatter)", "send buffer (P blocks of --counts sizes)", _factor_spread,
                   reduction=True, blocked=True, uneven=True, make_buffers=_reduce_scatterv),
        Collective("alltoallv", "block j of rank i, each of its own size, to rank j (MPI_Alltoallv)",
                   "all ranks' send buffers / P (P x P blocks of --counts sizes): the alltoall of the same total",
                   _factor_spread, blocked=True, uneven=True, make_buffers=_alltoallv),
    )
}

