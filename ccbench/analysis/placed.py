"""The time of an algorithm's executed schedule on nodes joined by slower links, placement included (pure).

The closed forms (`ccbench.analysis.predict`) price every step of an algorithm at one level.  Where the
ranks sit decides which of its messages cross the links between nodes, how many share one, and which
ranks wait for which: a ring whose neighbours alternate between two nodes (cyclic placement) sends every
message over a link, two at a time into each node, while in block placement half its hops stay inside a
node.  Here the hand-written algorithm runs once on the simulated communicator
(`ccbench.algorithms.simcomm`), which records each rank's batches, and an event simulation times them on
a node map with the two levels of `ccbench.analysis.predict.TwoLevelParams`:

- a batch (what one Send, Recv, Sendrecv or Waitall completes) starts when its rank's previous batch
  ended; its sends leave then; it ends when the last of its receives has arrived and its sends have
  completed.  A send completes at once (a buffered eager message), except a send between nodes of at
  least `acked_from` bytes, which completes when the receiver's acknowledgement is back, one inter
  alpha after the message arrived: MPI stacks over TCP complete small sends locally and larger ones
  only once delivered (measured on the lab, MPICH over libfabric's tcp provider: a block ring
  allreduce at 2 x 2 took about 3 more link delays per call with 128 B chunks, and 12-14 more with
  256 B to 16 KiB chunks, when the delay grew from 1 to 4 ms: every hop that crosses a link then holds
  its sender for a round trip);
- a message between two ranks of one node arrives intra alpha + bytes x intra beta after it left;
- a message between two nodes enters its destination node's link, a FIFO that every message into that
  node shares: it waits for the messages ahead of it, takes bytes x inter beta to serialise, then
  arrives inter alpha later.  This is the store-and-forward link of the Hockney model (Hockney,
  Parallel Computing 20(3), 1994) as netem's rate option applies it (tc-netem(8)), the link the lab
  emulates at each host's ingress (`ccbench.lab.link.Link`).

Left out: reductions (gamma: at the lab's rates a small fraction of the time), the sender's own
injection limit, and the software's cost per step beyond what the fitted alphas hold.  Matching is
MPI's: messages of one source, destination and tag in the order they were sent.
"""

import heapq
from collections import defaultdict, deque
from collections.abc import Mapping
from dataclasses import dataclass

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import dtype_of
from ccbench.core.errors import UsageError
from ccbench.core.placement import node_aware
from ccbench.core.records import Record

__all__ = ["MAX_RANKS", "Hop", "Timed", "placed_schedule", "placed_time", "schedule_time", "timed_schedule"]

#: The simulation runs one thread per rank and a Python event loop over every message.
MAX_RANKS = 256


@dataclass(frozen=True)
class Hop(Record):
    """One message on a schedule's critical path: from rank ``src`` to ``dst``, ``nbytes``, and whether it crossed
    the link between two nodes (``between``) or stayed inside one; ``ack``: a send held until acknowledged (the
    sender waited a round trip before its next step)."""

    src: int
    dst: int
    nbytes: int
    between: bool
    ack: bool = False


@dataclass(frozen=True)
class Timed(Record):
    """A schedule's time and its critical path: the chain of messages that decided when the last rank ended."""

    time_s: float
    path: tuple[Hop, ...]

    @property
    def levels(self) -> str:
        """The critical path, one letter per message in order: ``i`` inside a node, ``B`` between nodes, ``R`` a
        send between nodes held for its acknowledgement (a round trip)."""
        return "".join("R" if h.ack else "B" if h.between else "i" for h in self.path) or "-"


def schedule_time(batches, node_of_rank: list[int], params, acked_from: int | None = None) -> float:
    """Seconds until the last rank of a schedule ends (the module docstring's rules); `timed_schedule` without the
    path."""
    return timed_schedule(batches, node_of_rank, params, acked_from).time_s


def timed_schedule(batches, node_of_rank: list[int], params, acked_from: int | None = None) -> Timed:
    """The time until the last rank of a schedule ends (the module docstring's rules), and its critical path.

    `batches[rank]` is that rank's ordered list of ``(sends, recvs)``, each a tuple of ``(peer,
    nbytes, tag)`` (``ccbench.algorithms.simcomm.simulate``'s record); `node_of_rank` the node of
    every rank; `params` a `TwoLevelParams` (intra and inter alpha and beta); `acked_from` the
    smallest send between nodes that completes only when acknowledged (None: every send at once).
    The critical path is found as in critical-path analysis of message-passing traces (e.g. Schulz,
    "Extracting critical path graphs from MPI applications", IEEE Cluster 2005): from the batch that ends
    last, back through whatever ended each batch -- the message that arrived last, the acknowledgement
    its sends waited for, or its own previous batch.
    """
    P = len(batches)
    if len(node_of_rank) != P:
        raise ValueError(f"{len(node_of_rank)} nodes given for {P} ranks")
    ai, bi = params.intra_alpha_s, params.intra_beta_s_per_byte
    ae, be = params.inter_alpha_s, params.inter_beta_s_per_byte
    busy: dict[int, float] = defaultdict(lambda: float("-inf"))  # each node's link: when it is free again
    arrived: dict[tuple, deque] = defaultdict(deque)  # (source, dest, tag) -> (arrival, its batch, bytes), in order
    waiting: dict[tuple, int] = {}  # a message some rank's batch still needs -> that rank
    pos, start, held = [0] * P, [0.0] * P, [0.0] * P  # held: when the batch's sends complete
    acked: list = [None] * P  # the send that holds the batch longest: (peer, nbytes)
    cause: dict[tuple, tuple] = {}  # (rank, batch) -> what ended it: ("msg", src, src batch, bytes) / ("ack", ..)
    end, last = 0.0, None
    ready = [(0.0, r) for r in range(P)]  # (time its next batch starts, rank)

    def arrival(src: int, dst: int, nbytes: int, t: float) -> float:
        node = node_of_rank[dst]
        if node_of_rank[src] == node:
            return t + ai + nbytes * bi
        busy[node] = max(t, busy[node]) + nbytes * be
        return busy[node] + ae

    def finish(rank: int) -> None:
        """End `rank`'s posted batch when every message it receives has arrived (else wait for the first missing)."""
        need: dict[tuple, int] = defaultdict(int)
        for peer, _, *tag in batches[rank][pos[rank]][1]:
            need[(peer, rank, *tag)] += 1
        missing = next((key for key, k in need.items() if len(arrived[key]) < k), None)
        if missing is not None:
            waiting[missing] = rank
            return
        got = [(*arrived[key].popleft(), key[0]) for key, k in need.items() for _ in range(k)]
        t, why = start[rank], ("prev",)
        if held[rank] > t:
            t, why = held[rank], ("ack", *acked[rank])
        for when, batch, nbytes, src in got:
            if when > t:
                t, why = when, ("msg", src, batch, nbytes)
        cause[(rank, pos[rank])] = why
        pos[rank] += 1
        heapq.heappush(ready, (t, rank))

    while ready:
        t, rank = heapq.heappop(ready)  # in time order, so that each link takes its messages in that order
        if pos[rank] == len(batches[rank]):
            if last is None or t > end:
                end, last = t, rank
            continue
        start[rank] = held[rank] = t
        finish_later = []
        for peer, nbytes, *tag in batches[rank][pos[rank]][0]:
            key = (rank, peer, *tag)
            when = arrival(rank, peer, nbytes, t)
            arrived[key].append((when, pos[rank], nbytes))
            if acked_from is not None and nbytes >= acked_from and node_of_rank[peer] != node_of_rank[rank] \
                    and when + ae > held[rank]:
                held[rank], acked[rank] = when + ae, (peer, nbytes)
            if key in waiting:
                finish_later.append(waiting.pop(key))
        for other in finish_later:
            finish(other)
        finish(rank)
    stuck = [r for r in range(P) if pos[r] < len(batches[r])]
    if stuck:
        raise RuntimeError(f"schedule deadlocks: ranks {stuck} wait for messages never sent")
    path: list[Hop] = []
    rank, i = last, (len(batches[last]) - 1 if last is not None else -1)
    while i >= 0:
        why = cause[(rank, i)]
        if why[0] == "msg":
            _, src, batch, nbytes = why
            path.append(Hop(src, rank, nbytes, node_of_rank[src] != node_of_rank[rank]))
            rank, i = src, batch - 1
            continue
        if why[0] == "ack":
            path.append(Hop(rank, why[1], why[2], True, ack=True))
        i -= 1
    return Timed(end, tuple(reversed(path)))


def _node_groups(node_of_rank: list[int]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for r, node in enumerate(node_of_rank):
        groups.setdefault(node, []).append(r)
    return [groups[k] for k in sorted(groups, key=lambda k: groups[k][0])]


def placed_time(collective: str, algorithm: str, node_of_rank: list[int], nbytes: int, params,
                dtype: str = "float32", op: str = "sum", root: int = 0, acked_from: int | None = None) -> float:
    """Predicted seconds of one call of a hand-written algorithm on ranks laid on nodes as `node_of_rank` says
    (`placed_schedule`'s time)."""
    return placed_schedule(collective, algorithm, node_of_rank, nbytes, params, dtype, op, root, acked_from).time_s


def placed_schedule(collective: str, algorithm: str, node_of_rank: list[int], nbytes: int, params,
                    dtype: str = "float32", op: str = "sum", root: int = 0, acked_from: int | None = None) -> Timed:
    """One call of a hand-written algorithm on ranks laid on nodes as `node_of_rank` says: its predicted time and
    critical path (`timed_schedule`).

    The algorithm runs once on the simulated communicator at the count that makes `nbytes` (the
    collective's size definition); `schedule_time` times its batches (`acked_from` as it says).  A
    hierarchical algorithm (one that splits off its node's ranks) needs nodes of equal size: it runs on
    simulated nodes of consecutive ranks, each node's ranks then renamed to the ranks of that node in
    `node_of_rank` (node-local order and the leaders' order are kept, so the schedule is the one the
    algorithm makes on that map).
    """
    algs = REGISTRY.get(collective) or {}
    alg = algs.get(algorithm)
    if alg is None or alg.native:
        raise UsageError(f"{collective}/{algorithm}: only a hand-written algorithm has a schedule to time")
    P = len(node_of_rank)
    if not 1 <= P <= MAX_RANKS:
        raise UsageError(f"placed predictions take 1 to {MAX_RANKS} ranks, got {P}")
    why = alg.unsupported(P, op)
    if why:
        raise UsageError(f"{collective}/{algorithm} cannot run here: {why}")
    coll, dt = COLLECTIVES[collective], dtype_of(dtype)
    count = coll.count_for(int(nbytes), dt.itemsize, P)
    groups = _node_groups(node_of_rank)
    sizes = {len(g) for g in groups}
    rename = list(range(P))
    ppn = None
    if node_aware(alg):
        if len(sizes) != 1:
            raise UsageError(f"{collective}/{algorithm} is priced on nodes of equal size; these hold "
                             f"{sorted(len(g) for g in groups)} ranks")
        ppn = sizes.pop()
        rename = [r for g in groups for r in g]  # simulated rank k*ppn + i is node k's i-th rank

    def body(comm):
        bufs = coll.make_buffers(count, P, comm.rank, dt, op, root, False, None)
        bufs.fill()
        alg(CountedComm(comm), *bufs.args, **bufs.kwargs)

    batches: list = []
    simulate(P, body, ranks_per_node=ppn, batches=batches)
    if ppn is not None:
        renamed: list = [None] * P
        for b, plan in enumerate(batches):
            renamed[rename[b]] = [tuple(tuple((rename[peer], n, tag) for peer, n, tag in side) for side in batch)
                                  for batch in plan]
        batches = renamed
    return timed_schedule(batches, node_of_rank, params, acked_from)


@dataclass(frozen=True)
class PlacedRow(Record):
    """One algorithm at one size under one placement of `nranks` ranks on nodes of `ranks_per_node`: its predicted
    time and what its critical path crosses (``levels``, ``between`` of ``steps`` messages between nodes)."""

    collective: str
    algorithm: str
    nranks: int
    ranks_per_node: int
    placement: str
    nbytes: int
    time_s: float
    levels: str
    steps: int
    between: int


def placement_nodes(placement, nranks: int, ranks_per_node: int) -> list[int]:
    """The node of every rank after `placement` (`ccbench.core.placement.parse_placement`'s value) re-ranks a launch
    of `nranks` ranks laid out `ranks_per_node` to a node in launch order; ``random`` uses seed 0."""
    from ccbench.core.placement import placement_order

    launch = [r // ranks_per_node for r in range(nranks)]
    return [launch[r] for r in placement_order(placement, launch, seed=0)]


def placed_predictions(params, nranks: int, sizes, collectives=None, placements=("block", "cyclic"), *,
                       acked_from: int | None = None) -> list[PlacedRow]:
    """Every hand-written algorithm of `collectives` (default: every collective with an even form) at each size and
    placement, on `nranks` ranks in nodes of ``params.ranks_per_node`` (`placed_schedule`); an algorithm that cannot
    run at `nranks` is left out.  `placements`: `parse_placement` values, or {label: value}."""
    ppn = params.ranks_per_node
    if ppn < 1 or nranks % ppn:
        raise UsageError(f"{nranks} ranks do not fill nodes of {ppn}: give a rank count divisible by --ppn")
    if not 1 <= nranks <= MAX_RANKS:
        raise UsageError(f"placed predictions take 1 to {MAX_RANKS} ranks, got {nranks}")
    names = list(collectives) if collectives else [c for c in REGISTRY if c != "pingpong" and not COLLECTIVES[c].uneven]
    named = placements.items() if isinstance(placements, Mapping) else ((str(p), p) for p in placements)
    nodes = {label: placement_nodes(p, nranks, ppn) for label, p in named}
    out = []
    for coll in names:
        for alg in REGISTRY[coll].values():
            if alg.native or not alg.in_all or alg.unsupported(nranks, "sum"):
                continue
            for n in sizes:
                for label, node_of_rank in nodes.items():
                    t = placed_schedule(coll, alg.name, node_of_rank, n, params, acked_from=acked_from)
                    out.append(PlacedRow(coll, alg.name, nranks, ppn, label, int(n), t.time_s, t.levels, len(t.path),
                                         sum(h.between for h in t.path)))
    return out
