"""An in-process simulated communicator: one thread per rank, no MPI needed.

Hand-written algorithms run on it unchanged (they use only Send, Recv, Sendrecv, Isend,
Irecv and Waitall), which lets the tests cover many rank counts quickly and lets
`ccbench trace` print an algorithm's schedule without a launcher.

Semantics are deliberately strict: every send is synchronous (it completes only when a
matching receive has taken the data), so an algorithm that would deadlock under MPI's
rendezvous protocol deadlocks here too -- and is reported at once, not after a timeout,
because the world knows when every live rank is blocked on an unsatisfiable wait.
Messages between a pair of ranks with the same tag are non-overtaking, as in MPI.

Every message is recorded with its logical step: a rank's clock starts at 0; the sends
of an operation (Send, Sendrecv, or an Isend batch completed by one Waitall) belong to
step clock + 1, and on completion the clock moves to the latest step it sent or received.
For the textbook algorithms this is the round number of the schedule.
"""

import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["Message", "SimDeadlock", "SimWorld", "simulate"]


class SimDeadlock(RuntimeError):
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
        lo = (buf.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // buf.itemsize
    return (lo, lo + buf.size)


class _Request:
    __slots__ = ("kind", "rank", "peer", "tag", "buf", "done", "step", "world")

    def __init__(self, world, kind, rank, peer, tag, buf, step):
        self.world, self.kind, self.rank, self.peer, self.tag = world, kind, rank, peer, tag
        self.buf, self.step, self.done = buf, step, False

    def Wait(self) -> None:  # noqa: N802 - mpi4py naming
        self.world.comm(self.rank).Waitall([self])


class SimWorld:
    """P simulated ranks sharing one lock; `comm(rank)` gives a rank's communicator."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a world needs at least one rank")
        self.size = size
        self.cond = threading.Condition()
        self.sends: dict[tuple, deque] = {}
        self.recvs: dict[tuple, deque] = {}
        self.messages: list[Message] = []
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
            key = (req.rank, req.peer, req.tag)
            mine, other = self.sends, self.recvs
        else:
            key = (req.peer, req.rank, req.tag)
            mine, other = self.recvs, self.sends
        q = other.get(key)
        if q:
            self._match(*((req, q.popleft()) if req.kind == "send" else (q.popleft(), req)))
        else:
            mine.setdefault(key, deque()).append(req)
        self.cond.notify_all()

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
                    if len(self.waiting) == self.alive and not any(p() for p in self.waiting.values()):
                        self.failed = SimDeadlock(
                            f"deadlock: ranks {sorted(self.waiting)} all wait on messages never sent"
                        )
                        self.cond.notify_all()
                        raise self.failed
                    self.cond.wait(timeout=1.0)
            finally:
                del self.waiting[rank]

    def _exit(self, error: BaseException | None) -> None:
        with self.cond:
            self.alive -= 1
            if error is not None and self.failed is None:
                self.failed = error
            self.cond.notify_all()


class SimComm:
    """One rank's view of a SimWorld, with the mpi4py method names the algorithms use."""

    def __init__(self, world: SimWorld, rank: int) -> None:
        self.world = world
        self.rank = rank
        self.size = world.size
        self._batch_sent = False

    def Get_rank(self) -> int:  # noqa: N802
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.size:
            raise ValueError(f"rank {self.rank}: peer {peer} outside 0..{self.size - 1}")

    def Isend(self, buf: np.ndarray, dest: int, tag: int = 0) -> _Request:  # noqa: N802
        self._check_peer(dest)
        w = self.world
        with w.cond:
            req = _Request(w, "send", self.rank, dest, tag, buf, w.clocks[self.rank] + 1)
            w._post(req)
        return req

    def Irecv(self, buf: np.ndarray, source: int, tag: int = 0) -> _Request:  # noqa: N802
        self._check_peer(source)
        w = self.world
        with w.cond:
            req = _Request(w, "recv", self.rank, source, tag, buf, 0)
            w._post(req)
        return req

    def Waitall(self, requests: list) -> None:  # noqa: N802
        w = self.world
        w._wait(self.rank, lambda: all(r.done for r in requests))
        with w.cond:
            w.clocks[self.rank] = max([w.clocks[self.rank]] + [r.step for r in requests])

    def Send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:  # noqa: N802
        self.Waitall([self.Isend(buf, dest, tag)])

    def Recv(self, buf: np.ndarray, source: int, tag: int = 0) -> None:  # noqa: N802
        self.Waitall([self.Irecv(buf, source, tag)])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=0, recvtag=0) -> None:  # noqa: N802
        self.Waitall([self.Isend(sendbuf, dest, sendtag), self.Irecv(recvbuf, source, recvtag)])


def simulate(size: int, fn, *, timeout_s: float = 60.0) -> tuple[list, list[Message]]:
    """Run ``fn(comm)`` on `size` simulated ranks; return (results per rank, messages).

    The first exception raised on any rank is re-raised here (a deadlock included).
    """
    world = SimWorld(size)
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
        raise RuntimeError(f"unmatched messages left at exit (source, dest, tag): {sorted(left)}")
    messages = sorted(world.messages, key=lambda m: (m.step, m.source, m.dest))
    return results, messages
