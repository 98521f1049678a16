"""An in-process simulated communicator: one thread per rank, no MPI needed.

Hand-written algorithms run on it unchanged (they use only Send, Recv, Sendrecv, Isend,
Irecv, Waitall and Testall, and the persistent Send_init, Recv_init and Startall), which lets the
tests cover many rank counts quickly and lets `ccbench trace` print an algorithm's schedule without a launcher.

Semantics are deliberately strict: every send is synchronous (it completes only when a
matching receive has taken the data), so an algorithm that would deadlock under MPI's
rendezvous protocol deadlocks here too -- and is reported at once, not after a timeout,
because the world knows when every live rank is blocked on an unsatisfiable wait.
Messages between a pair of ranks with the same tag are non-overtaking, as in MPI.

Every message is recorded with its logical step: a rank's clock starts at 0; the sends
of an operation (Send, Sendrecv, or an Isend batch completed by one Waitall) belong to
step clock + 1, and on completion the clock moves to the latest step it sent or received.
For the textbook algorithms this is the round number of the schedule.

Sub-communicators work as in MPI: `SimComm.Split` and `SimComm.Split_type` (with
`COMM_TYPE_SHARED`, ranks grouped into simulated nodes of `ranks_per_node` consecutive
world ranks) are collective over the parent and return new communicators whose messages
travel through the same world.  Each communicator has its own context id in the match
key, so tags never collide between communicators; messages are recorded with world ranks.
"""

import sys
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = [
    "COMM_TYPE_SHARED",
    "UNDEFINED",
    "Message",
    "SimComm",
    "SimDeadlock",
    "SimWorld",
    "simulate",
]

#: Split_type's split type for "ranks of one node" (mpi4py's MPI.COMM_TYPE_SHARED is
#: accepted too).
COMM_TYPE_SHARED = "shared"
#: The color that leaves a rank out of every new communicator (mpi4py's value).
UNDEFINED = -32766


class SimDeadlock(RuntimeError):  # noqa: N818 - the public name
    """Every live rank is blocked on a wait that can never complete."""


@dataclass(frozen=True)
class Message:
    """One delivered message, as `ccbench trace` prints it."""

    step: int
    source: int
    dest: int
    tag: int
    nbytes: int
    send_range: tuple[int, int]  # element offsets in the sender's buffer
    recv_range: tuple[int, int]  # element offsets in the receiver's buffer


def _elem_range(buf: np.ndarray) -> tuple[int, int]:
    """Element offsets [lo, hi) of a view within its outermost base array."""
    base = buf
    while isinstance(base.base, np.ndarray):
        base = base.base
    lo = 0
    if buf.itemsize:
        offset = buf.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        lo = offset // buf.itemsize
    return (lo, lo + buf.size)


class _Request:
    """A posted send or receive; `rank` and `peer` are world ranks, `ctx` the context id."""

    __slots__ = ("kind", "rank", "peer", "tag", "ctx", "buf", "done", "step", "world")

    def __init__(self, world, kind, rank, peer, tag, buf, step, ctx=0):
        self.world, self.kind, self.rank, self.peer, self.tag = world, kind, rank, peer, tag
        self.ctx, self.buf, self.step, self.done = ctx, buf, step, False

    def Wait(self) -> None:  # noqa: N802 - mpi4py naming
        self.world.comm(self.rank).Waitall([self])

    def Free(self) -> None:  # noqa: N802
        """MPI_Request_free (nothing to release in the simulation)."""


class SimWorld:
    """P simulated ranks sharing one lock; `comm(rank)` gives a rank's communicator.

    `ranks_per_node` groups consecutive world ranks into simulated nodes for
    ``Split_type(COMM_TYPE_SHARED)``; None puts every rank on one node.
    """

    def __init__(self, size: int, ranks_per_node: int | None = None) -> None:
        if size < 1:
            raise ValueError("a world needs at least one rank")
        if ranks_per_node is not None and ranks_per_node < 1:
            raise ValueError("ranks_per_node must be at least 1")
        self.size = size
        self.ranks_per_node = ranks_per_node
        self._next_ctx = 1  # context id 0 is the world's
        self._splits: dict[tuple[int, int], dict] = {}  # (ctx, call number) -> exchange
        self.cond = threading.Condition()
        # one condition per world rank on the same lock: a matched message wakes its two ranks only,
        # not every waiting thread (which made long schedules quadratic in P)
        self._woken = [threading.Condition(self.cond) for _ in range(size)]
        self.sends: dict[tuple, deque] = {}
        self.recvs: dict[tuple, deque] = {}
        self.messages: list[Message] = []
        # per world rank, its completed batches: ((peer, nbytes, tag) sent, (...) received)
        self.batches: list[list[tuple]] = [[] for _ in range(size)]
        self.clocks = [0] * size
        self.alive = size
        self.waiting: dict[int, object] = {}  # rank -> predicate it waits for
        self.failed: BaseException | None = None
        self._comms = [SimComm(self, r) for r in range(size)]

    def comm(self, rank: int) -> "SimComm":
        """The communicator of `rank`."""
        return self._comms[rank]

    # -- matching (called with the lock held) --------------------------------------
    def _post(self, req: _Request) -> None:
        if req.kind == "send":
            key = (req.ctx, req.rank, req.peer, req.tag)
            mine, other = self.sends, self.recvs
        else:
            key = (req.ctx, req.peer, req.rank, req.tag)
            mine, other = self.recvs, self.sends
        q = other.get(key)
        if q:
            self._match(*((req, q.popleft()) if req.kind == "send" else (q.popleft(), req)))
        else:
            mine.setdefault(key, deque()).append(req)

    def _match(self, send: _Request, recv: _Request) -> None:
        sbuf, rbuf = send.buf, recv.buf
        if sbuf.nbytes != rbuf.nbytes:
            raise ValueError(
                f"message {send.rank}->{recv.rank} tag {send.tag}: "
                f"{sbuf.nbytes} bytes sent into a {rbuf.nbytes}-byte receive buffer"
            )
        if rbuf.nbytes:
            rbuf.view(np.uint8).reshape(-1)[:] = sbuf.view(np.uint8).reshape(-1)
        recv.step = send.step
        send.done = recv.done = True
        self._woken[send.rank].notify()
        self._woken[recv.rank].notify()
        self.messages.append(
            Message(send.step, send.rank, recv.rank, send.tag, sbuf.nbytes,
                    _elem_range(sbuf), _elem_range(rbuf))
        )

    def _wait(self, rank: int, pred) -> None:
        """Block rank until pred() holds; detect a global deadlock exactly."""
        with self.cond:
            self.waiting[rank] = pred
            try:
                while not pred():
                    if self.failed is not None:
                        raise SimDeadlock("another rank failed") from None
                    # every live rank waiting is cheap to see; only then are all their predicates evaluated
                    if len(self.waiting) == self.alive and not any(p() for p in self.waiting.values()):
                        self.failed = SimDeadlock(
                            f"deadlock: ranks {sorted(self.waiting)} all wait on messages "
                            "never sent"
                        )
                        self.wake_all()
                        raise self.failed
                    self._woken[rank].wait(timeout=1.0)
            finally:
                del self.waiting[rank]

    def wake_all(self) -> None:
        """Wake every waiting rank to look at its wait again (the lock held)."""
        for cond in self._woken:
            cond.notify_all()

    def _exit(self, error: BaseException | None) -> None:
        with self.cond:
            self.alive -= 1
            if error is not None and self.failed is None:
                self.failed = error
            self.wake_all()


class SimComm:
    """One rank's view of a communicator of a SimWorld, with mpi4py's method names.

    `group` lists the world ranks of the communicator in rank order (None: the world);
    `ctx` is its context id, part of every match key.
    """

    COMM_TYPE_SHARED = COMM_TYPE_SHARED
    UNDEFINED = UNDEFINED

    def __init__(self, world: SimWorld, rank: int, group: tuple[int, ...] | None = None,
                 ctx: int = 0) -> None:
        self.world = world
        self.rank = rank
        self.group = group
        self.ctx = ctx
        self.size = world.size if group is None else len(group)
        self.wrank = rank if group is None else group[rank]  # this rank in the world
        self._nsplits = 0  # Split calls so far (the same on every rank: they are collective)

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def _world(self, peer: int) -> int:
        """The world rank of `peer` of this communicator (checked)."""
        if not 0 <= peer < self.size:
            raise ValueError(f"rank {self.rank}: peer {peer} outside 0..{self.size - 1}")
        return peer if self.group is None else self.group[peer]

    # -- communicator management (collective over this communicator) -------------
    def Split(self, color: int = 0, key: int = 0) -> "SimComm | None":  # noqa: N802
        """MPI_Comm_split: ranks of one color form a new communicator ordered by (key, rank).

        Returns None (MPI_COMM_NULL) for color UNDEFINED.
        """
        w = self.world
        ident = (self.ctx, self._nsplits)
        self._nsplits += 1
        with w.cond:
            entry = w._splits.setdefault(ident, {"args": {}, "result": None, "left": self.size})
            entry["args"][self.rank] = (color, key)
            w.wake_all()
        w._wait(self.wrank, lambda: len(entry["args"]) == self.size)
        with w.cond:
            if entry["result"] is None:  # the first rank through builds it for everyone
                groups: dict = {}
                for r in range(self.size):
                    c, k = entry["args"][r]
                    if c != UNDEFINED:
                        groups.setdefault(c, []).append((k, r))
                result = {}
                for c, members in groups.items():
                    result[c] = (w._next_ctx, tuple(self._world(r) for _, r in sorted(members)))
                    w._next_ctx += 1
                entry["result"] = result
            mine = entry["result"].get(color)
            entry["left"] -= 1
            if entry["left"] == 0:
                del w._splits[ident]
        if mine is None:
            return None
        ctx, group = mine
        return SimComm(w, group.index(self.wrank), group, ctx)

    def Split_type(self, split_type, key: int = 0, info=None) -> "SimComm | None":  # noqa: N802
        """MPI_Comm_split_type; COMM_TYPE_SHARED groups the ranks of one simulated node."""
        if split_type == UNDEFINED:
            return self.Split(UNDEFINED, key)
        mpi = sys.modules.get("mpi4py.MPI")
        if split_type != COMM_TYPE_SHARED and not (mpi and split_type == mpi.COMM_TYPE_SHARED):
            raise ValueError(f"unsupported split type {split_type!r}")
        rpn = self.world.ranks_per_node
        return self.Split(0 if rpn is None else self.wrank // rpn, key)

    def Free(self) -> None:  # noqa: N802
        """MPI_Comm_free (nothing to release in the simulation)."""

    def Isend(self, buf: np.ndarray, dest: int, tag: int = 0) -> _Request:  # noqa: N802
        peer = self._world(dest)
        w = self.world
        with w.cond:
            req = _Request(w, "send", self.wrank, peer, tag, buf, w.clocks[self.wrank] + 1,
                           self.ctx)
            w._post(req)
        return req

    def Irecv(self, buf: np.ndarray, source: int, tag: int = 0) -> _Request:  # noqa: N802
        peer = self._world(source)
        w = self.world
        with w.cond:
            req = _Request(w, "recv", self.wrank, peer, tag, buf, 0, self.ctx)
            w._post(req)
        return req

    def Send_init(self, buf: np.ndarray, dest: int, tag: int = 0) -> _Request:  # noqa: N802
        """A persistent send, inactive until `Startall` posts it (as often as it is started)."""
        return _Request(self.world, "send", self.wrank, self._world(dest), tag, buf, 0, self.ctx)

    def Recv_init(self, buf: np.ndarray, source: int, tag: int = 0) -> _Request:  # noqa: N802
        """A persistent receive, inactive until `Startall` posts it."""
        return _Request(self.world, "recv", self.wrank, self._world(source), tag, buf, 0, self.ctx)

    def Startall(self, requests: list) -> None:  # noqa: N802
        """Post persistent requests again, each as the Isend/Irecv it stands for."""
        w = self.world
        with w.cond:
            for req in requests:
                req.done, req.step = False, (w.clocks[self.wrank] + 1 if req.kind == "send" else 0)
                w._post(req)

    def Waitall(self, requests: list) -> None:  # noqa: N802
        w = self.world
        w._wait(self.wrank, lambda: all(r.done for r in requests))
        self._complete(requests)

    def Testall(self, requests: list) -> bool:  # noqa: N802
        """True (and the batch completed, as by `Waitall`) when every request has matched; never blocks."""
        with self.world.cond:
            if not all(r.done for r in requests):
                return False
        self._complete(requests)
        return True

    def _complete(self, requests: list) -> None:
        w = self.world
        with w.cond:
            w.clocks[self.wrank] = max([w.clocks[self.wrank]] + [r.step for r in requests])
            w.batches[self.wrank].append(tuple(
                tuple((r.peer, r.buf.nbytes, (r.ctx, r.tag)) for r in requests if r.kind == kind)
                for kind in ("send", "recv")))

    def Send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:  # noqa: N802
        self.Waitall([self.Isend(buf, dest, tag)])

    def Recv(self, buf: np.ndarray, source: int, tag: int = 0) -> None:  # noqa: N802
        self.Waitall([self.Irecv(buf, source, tag)])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=0, recvtag=0) -> None:  # noqa: N802
        self.Waitall([self.Isend(sendbuf, dest, sendtag), self.Irecv(recvbuf, source, recvtag)])


def simulate(
    size: int, fn, *, timeout_s: float = 60.0, ranks_per_node: int | None = None,
    batches: list | None = None,
) -> tuple[list, list[Message]]:
    """Run ``fn(comm)`` on `size` simulated ranks; return (results per rank, messages).

    `ranks_per_node` sets the simulated nodes that ``Split_type(COMM_TYPE_SHARED)`` finds
    (None: one node).  The first exception raised on any rank is re-raised here (a
    deadlock included).  A list given as `batches` receives, per world rank, the batches
    it completed (the plans `ccbench.algorithms.p2p.critical_path` takes).
    """
    world = SimWorld(size, ranks_per_node)
    results: list = [None] * size

    def body(rank: int) -> None:
        err = None
        try:
            results[rank] = fn(world.comm(rank))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            err = exc
        world._exit(err)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
        if t.is_alive():
            raise TimeoutError(f"simulation of {size} ranks did not finish in {timeout_s} s")
    if world.failed is not None:
        raise world.failed
    # unmatched sends/receives left at the end are a bug in the algorithm
    left = [k for q in (world.sends, world.recvs) for k, v in q.items() if v]
    if left:
        raise RuntimeError(
            f"unmatched messages left at exit (context, source, dest, tag): {sorted(left)}"
        )
    if batches is not None:
        batches[:] = world.batches
    messages = sorted(world.messages, key=lambda m: (m.step, m.source, m.dest))
    return results, messages
