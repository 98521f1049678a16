"""The counted point-to-point layer: the only way hand-written algorithms communicate.

`CountedComm` wraps an mpi4py communicator (or the simulated one in `ccbench.algorithms.simcomm`)
and forwards the five calls the algorithms need -- Send, Recv, Sendrecv, Isend/Irecv and
Waitall -- counting what each rank sends and receives.  Besides plain totals it keeps the
two quantities the alpha-beta model charges a rank for, under the usual full-duplex
assumption (Thakur, Rabenseifner & Gropp 2005, section 2):

* ``steps``: sequential communication steps.  A Send, a Recv or a Sendrecv is one step;
  a Waitall over a batch of Isend/Irecv is max(#sends, #recvs) steps.
* ``step_bytes``: bytes on those steps; a step moving s bytes out and r bytes in costs
  max(s, r).

and ``reduced_bytes``, the bytes combined by local reductions (the gamma term).  A batch
completed by ``Testall`` (a non-blocking schedule progressed by test calls) counts as one
completed by ``Waitall``.

Persistent schedules (MPI 4.0 section 3.9, persistent communication requests) make their
requests once with ``persistent_step`` (MPI_Send_init / MPI_Recv_init) and run each step per
call as ``Startall(step)`` then ``Waitall(step.requests)``: counted as the same step of
Isend/Irecv would be, so a persistent schedule counts what its blocking twin counts.  The
closed-form cost of every algorithm is tested against the maximum of these over ranks.

Half precision (float16, bfloat16): a message carries the buffer's 16-bit words as they are
(mpi4py cannot export a bfloat16 array, and an MPI library may lack a float16 type, so the
layer hands MPI a uint16 view of the same memory), and a local reduction widens both
operands to float32, combines them and rounds the result back to 16 bits, as the training
frameworks do.
"""

import sys

import numpy as np

from ccbench.core.dtypes import OPS

__all__ = [
    "CountedComm",
    "Counts",
    "PersistentStep",
    "as_ufunc",
    "block_bounds",
    "counted",
    "critical_path",
    "is_in_place",
    "pof2_below",
    "reduce_half",
]


class Counts:
    """Traffic counters of one rank (plain attributes, cheap to bump)."""

    __slots__ = (
        "msgs_sent",
        "bytes_sent",
        "msgs_recv",
        "bytes_recv",
        "steps",
        "step_bytes",
        "reduced_bytes",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter."""
        self.msgs_sent = self.bytes_sent = self.msgs_recv = self.bytes_recv = 0
        self.steps = self.step_bytes = self.reduced_bytes = 0

    def as_tuple(self) -> tuple[int, ...]:
        """The counters in `__slots__` order."""
        return tuple(getattr(self, name) for name in self.__slots__)


class PersistentStep:
    """One step of persistent point-to-point requests, made once (`CountedComm.persistent_step`) and started per
    call (`CountedComm.Startall`): the requests and what one start sends and receives."""

    __slots__ = ("requests", "sends", "sent_bytes", "recvs", "recv_bytes")

    def __init__(self, requests: list, sends: int, sent_bytes: int, recvs: int, recv_bytes: int) -> None:
        self.requests, self.sends, self.sent_bytes = requests, sends, sent_bytes
        self.recvs, self.recv_bytes = recvs, recv_bytes

    def free(self) -> None:
        """Release the requests (MPI_Request_free)."""
        for r in self.requests:
            r.Free()


class CountedComm:
    """A communicator wrapper that counts messages, bytes and reduced bytes.

    Buffers are contiguous numpy arrays (views are fine); the MPI datatype is inferred
    from the array, as mpi4py does.
    """

    __slots__ = ("comm", "rank", "size", "counts", "_waitall", "_startall", "_testall", "_scratch", "_pend", "_nodes",
                 "_layout")

    def __init__(self, comm) -> None:
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.counts = Counts()
        waitall, startall, testall = (getattr(comm, name, None) for name in ("Waitall", "Startall", "Testall"))
        if waitall is None:  # a real mpi4py communicator
            from mpi4py import MPI

            waitall, startall, testall = MPI.Request.Waitall, MPI.Prequest.Startall, MPI.Request.Testall
        self._waitall, self._startall, self._testall = waitall, startall, testall
        self._scratch: dict = {}
        # pending Isend/Irecv batch: msgs out, bytes out, msgs in, bytes in
        self._pend = [0, 0, 0, 0]
        self._nodes: tuple | None = None  # (node comm, leader comm or None), made once
        self._layout: dict | None = None  # node_layout(), found once

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py naming
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def Send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:  # noqa: N802
        c = self.counts
        c.msgs_sent += 1
        c.bytes_sent += buf.nbytes
        c.steps += 1
        c.step_bytes += buf.nbytes
        self.comm.Send(_words(buf) if buf.itemsize == 2 else buf, dest, tag)

    def Recv(self, buf: np.ndarray, source: int, tag: int = 0) -> None:  # noqa: N802
        c = self.counts
        c.msgs_recv += 1
        c.bytes_recv += buf.nbytes
        c.steps += 1
        c.step_bytes += buf.nbytes
        self.comm.Recv(_words(buf) if buf.itemsize == 2 else buf, source, tag)

    def Sendrecv(  # noqa: N802
        self,
        sendbuf: np.ndarray,
        dest: int,
        sendtag: int = 0,
        recvbuf: np.ndarray | None = None,
        source: int = 0,
        recvtag: int = 0,
    ) -> None:
        c = self.counts
        c.msgs_sent += 1
        c.bytes_sent += sendbuf.nbytes
        c.msgs_recv += 1
        c.bytes_recv += recvbuf.nbytes
        c.steps += 1
        c.step_bytes += max(sendbuf.nbytes, recvbuf.nbytes)
        if sendbuf.itemsize == 2:
            sendbuf, recvbuf = _words(sendbuf), _words(recvbuf)
        self.comm.Sendrecv(sendbuf, dest, sendtag, recvbuf, source, recvtag)

    def Isend(self, buf: np.ndarray, dest: int, tag: int = 0):  # noqa: N802
        c = self.counts
        c.msgs_sent += 1
        c.bytes_sent += buf.nbytes
        self._pend[0] += 1
        self._pend[1] += buf.nbytes
        return self.comm.Isend(_words(buf) if buf.itemsize == 2 else buf, dest, tag)

    def Irecv(self, buf: np.ndarray, source: int, tag: int = 0):  # noqa: N802
        c = self.counts
        c.msgs_recv += 1
        c.bytes_recv += buf.nbytes
        self._pend[2] += 1
        self._pend[3] += buf.nbytes
        return self.comm.Irecv(_words(buf) if buf.itemsize == 2 else buf, source, tag)

    def persistent_step(self, sends=(), recvs=()) -> PersistentStep:
        """A step of persistent requests: MPI_Send_init for each ``(buf, dest, tag)`` of `sends`, MPI_Recv_init for
        each ``(buf, source, tag)`` of `recvs` (the set-up; nothing is counted until a step starts)."""
        reqs = [self.comm.Send_init(_words(b) if b.itemsize == 2 else b, d, t) for b, d, t in sends]
        reqs += [self.comm.Recv_init(_words(b) if b.itemsize == 2 else b, src, t) for b, src, t in recvs]
        return PersistentStep(reqs, len(sends), sum(b.nbytes for b, _, _ in sends), len(recvs),
                              sum(b.nbytes for b, _, _ in recvs))

    def Startall(self, step: PersistentStep) -> None:  # noqa: N802
        """Start a persistent step (MPI_Startall), counted as Isend/Irecv of the same messages; complete it with
        ``Waitall(step.requests)``."""
        c, p = self.counts, self._pend
        c.msgs_sent += step.sends
        c.bytes_sent += step.sent_bytes
        c.msgs_recv += step.recvs
        c.bytes_recv += step.recv_bytes
        p[0] += step.sends
        p[1] += step.sent_bytes
        p[2] += step.recvs
        p[3] += step.recv_bytes
        self._startall(step.requests)

    def Waitall(self, requests: list) -> None:  # noqa: N802
        """Complete a batch of Isend/Irecv; it costs max(#sends, #recvs) steps."""
        self._close_batch()
        self._waitall(requests)

    def Testall(self, requests: list) -> bool:  # noqa: N802
        """Whether a batch of Isend/Irecv is complete (MPI_Testall, which also progresses it); the batch is counted,
        as by `Waitall`, when it is."""
        if not self._testall(requests):
            return False
        self._close_batch()
        return True

    def _close_batch(self) -> None:
        p = self._pend
        c = self.counts
        c.steps += max(p[0], p[2])
        c.step_bytes += max(p[1], p[3])
        p[0] = p[1] = p[2] = p[3] = 0

    def reduce_local(self, ufunc: np.ufunc, inbuf: np.ndarray, inoutbuf: np.ndarray) -> None:
        """inoutbuf = inbuf (op) inoutbuf, in place, counted as reduced bytes.

        Mirrors MPI_Reduce_local; every op the suite offers is commutative.  A half type is
        combined in float32 and rounded back once (`reduce_half`).
        """
        self.counts.reduced_bytes += inoutbuf.nbytes
        if inoutbuf.itemsize == 2 and inoutbuf.dtype.kind in "fV":
            reduce_half(ufunc, inbuf, inoutbuf)
        else:
            ufunc(inoutbuf, inbuf, out=inoutbuf)

    def scratch(self, n: int, dtype: np.dtype, slot: int = 0) -> np.ndarray:
        """A reusable work array of `n` elements (contents undefined).

        Cached per (slot, dtype) on this wrapper, so repeated calls of an algorithm in the
        timing loop allocate nothing.
        """
        key = (slot, dtype)
        buf = self._scratch.get(key)
        if buf is None or buf.size < n:
            buf = np.empty(max(n, 1), dtype=dtype)
            self._scratch[key] = buf
        return buf[:n]

    def node_comms(self) -> tuple["CountedComm", "CountedComm | None"]:
        """(this node's ranks, one leader per node or None here) as counting communicators.

        The node communicator comes from ``Split_type(COMM_TYPE_SHARED)`` (ordered by
        rank); the leaders are the node-local rank 0 of every node, joined by ``Split``.
        Both share this communicator's `counts`, so their traffic adds to this rank's.
        Creating communicators is collective and slow: it happens on the first call only,
        on every rank at once, and the result is cached on this wrapper.
        """
        if self._nodes is None:
            comm = self.comm
            shared = getattr(comm, "COMM_TYPE_SHARED", None)  # the simulated communicator
            undefined = getattr(comm, "UNDEFINED", None)
            if shared is None:
                from mpi4py import MPI

                shared, undefined = MPI.COMM_TYPE_SHARED, MPI.UNDEFINED
            node = comm.Split_type(shared, self.rank)
            leaders = comm.Split(0 if node.Get_rank() == 0 else undefined, self.rank)
            if not leaders:  # None on the simulator, MPI.COMM_NULL (falsy) under MPI
                leaders = None
            node_cc = CountedComm(node)
            node_cc.counts = self.counts
            leader_cc = None
            if leaders is not None:
                leader_cc = CountedComm(leaders)
                leader_cc.counts = self.counts
            self._nodes = (node_cc, leader_cc)
        return self._nodes


    def node_layout(self) -> dict[str, int]:
        """``{"ranks_per_node": the largest node's ranks, "nodes": how many}`` as `node_comms` splits this
        communicator: what a node-aware algorithm's depth depends on (`Algorithm.additions_at`).  Collective (one
        allgather, on the first call only); under MPI only (the simulated communicator has no allgather)."""
        if self._layout is None:
            node, _ = self.node_comms()
            sizes = self.comm.allgather(node.size if node.rank == 0 else 0)
            self._layout = {"ranks_per_node": max(sizes), "nodes": sum(1 for s in sizes if s)}
        return self._layout


def _words(buf: np.ndarray) -> np.ndarray:
    """A 16-bit float buffer as the uint16 words MPI moves (the same memory); other 2-byte buffers as they are."""
    return buf.view(np.uint16) if buf.dtype.kind in "fV" else buf


def reduce_half(ufunc: np.ufunc, inbuf: np.ndarray, inoutbuf: np.ndarray) -> None:
    """inoutbuf = inbuf (op) inoutbuf for a 16-bit float type: each pair widened to float32, combined there and
    rounded back to the 16-bit type (round to nearest even), as the training frameworks reduce half-precision
    gradients.  numpy casts in buffered chunks, so no float32 copy of the whole buffer is made."""
    ufunc(inoutbuf, inbuf, out=inoutbuf, dtype=np.float32, casting="unsafe")


_WRAPPED: dict[int, tuple[object, CountedComm]] = {}


def counted(comm) -> CountedComm:
    """`comm` itself if it already counts, else the one CountedComm kept for it.

    Keeping one wrapper per communicator keeps its scratch arrays and node
    communicators across calls, so a user calling an algorithm in a loop allocates
    nothing after the first call (the wrapper holds a reference to `comm`).
    """
    if isinstance(comm, CountedComm):
        return comm
    hit = _WRAPPED.get(id(comm))
    if hit is None or hit[0] is not comm:
        hit = (comm, CountedComm(comm))
        _WRAPPED[id(comm)] = hit
    return hit[1]


def is_in_place(buf) -> bool:
    """True for the in-place marker: None or mpi4py's MPI.IN_PLACE."""
    if buf is None:
        return True
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi is not None and buf is mpi.IN_PLACE


_MPI_OP_NAMES = {"SUM": "sum", "PROD": "prod", "MIN": "min", "MAX": "max"}


def as_ufunc(op) -> np.ufunc:
    """Map an op given as a name ("sum"), a numpy ufunc or an mpi4py MPI.Op to a ufunc."""
    if isinstance(op, np.ufunc):
        return op
    if isinstance(op, str):
        return OPS[op]
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        for attr, name in _MPI_OP_NAMES.items():
            if op == getattr(mpi, attr):
                return OPS[name]
    raise ValueError(f"unsupported reduction op {op!r}")


def block_bounds(count: int, nblocks: int) -> list[int]:
    """Offsets of `nblocks` near-equal blocks of `count` elements (length nblocks + 1).

    Block i is ``[bounds[i], bounds[i + 1])``; the first ``count % nblocks`` blocks get
    one element more, as MPICH splits buffers.
    """
    base, extra = divmod(count, nblocks)
    bounds = [0] * (nblocks + 1)
    for i in range(nblocks):
        bounds[i + 1] = bounds[i] + base + (1 if i < extra else 0)
    return bounds


def pof2_below(n: int) -> int:
    """The largest power of two <= n (n >= 1)."""
    return 1 << (n.bit_length() - 1)


def critical_path(plans) -> tuple[int, int]:
    """(alpha, beta) of a schedule's critical path: its longest chain of dependent batches.

    `plans[rank]` is that rank's ordered list of batches ``(sends, recvs)``, each a tuple
    of ``(peer, nbytes)`` or ``(peer, nbytes, tag)`` (messages with the same source,
    destination and tag match in order, as in MPI); a batch is what one Send, Recv,
    Sendrecv or Waitall completes.  A batch starts when the rank's previous batch is done;
    its sends leave then; it ends, at the latest of its start and its incoming messages'
    departures, plus its own cost under this module's full-duplex rule: max(#sends,
    #recvs) alpha and max(bytes out, bytes in) beta.  Chains are compared by steps, then
    bytes (latency-bound ordering).  This is the Hockney (alpha-beta) time of the
    schedule when ranks wait only for data (Hockney, Parallel Computing 20(3), 1994); it
    exceeds the busiest rank's own count where ranks wait on each other: a pipeline
    filling, the forwarding steps of non-power-of-two schedules.
    """
    from collections import defaultdict, deque

    P = len(plans)
    pos, posted = [0] * P, [False] * P
    done = [(0, 0)] * P  # (steps, bytes) when the rank's previous batch finished
    departed: dict[tuple, deque] = defaultdict(deque)
    waiting: dict[tuple, int] = {}  # message key -> the rank blocked on it
    runnable = deque(range(P))
    while runnable:
        rank = runnable.popleft()
        plan = plans[rank]
        while pos[rank] < len(plan):
            sends, recvs = plan[pos[rank]]
            if not posted[rank]:
                for peer, _, *tag in sends:
                    key = (rank, peer, *tag)
                    departed[key].append(done[rank])
                    if waiting.get(key) is not None:
                        runnable.append(waiting.pop(key))
                posted[rank] = True
            need: dict[tuple, int] = defaultdict(int)
            for peer, _, *tag in recvs:
                need[(peer, rank, *tag)] += 1
            missing = next((key for key, k in need.items() if len(departed[key]) < k), None)
            if missing is not None:
                waiting[missing] = rank
                break
            start = done[rank]
            for key, k in need.items():
                for _ in range(k):
                    start = max(start, departed[key].popleft())
            cost = (max(len(sends), len(recvs)),
                    max(sum(m[1] for m in sends), sum(m[1] for m in recvs)))
            done[rank] = (start[0] + cost[0], start[1] + cost[1])
            posted[rank] = False
            pos[rank] += 1
    stuck = [r for r in range(P) if pos[r] < len(plans[r])]
    if stuck:
        raise ValueError(f"the schedule deadlocks: ranks {stuck[:8]} wait for messages never sent")
    return max(done)
