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

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import dtype_of
from ccbench.core.errors import UsageError
from ccbench.core.placement import node_aware

__all__ = ["MAX_RANKS", "placed_time", "schedule_time"]

#: The simulation runs one thread per rank and a Python event loop over every message.
MAX_RANKS = 256


def schedule_time(batches, node_of_rank: list[int], params, acked_from: int | None = None) -> float:
    """Seconds until the last rank of a schedule ends (the module docstring's rules).

    `batches[rank]` is that rank's ordered list of ``(sends, recvs)``, each a tuple of ``(peer,
    nbytes, tag)`` (``ccbench.algorithms.simcomm.simulate``'s record); `node_of_rank` the node of
    every rank; `params` a `TwoLevelParams` (intra and inter alpha and beta); `acked_from` the
    smallest send between nodes that completes only when acknowledged (None: every send at once).
    """
    P = len(batches)
    if len(node_of_rank) != P:
        raise ValueError(f"{len(node_of_rank)} nodes given for {P} ranks")
    ai, bi = params.intra_alpha_s, params.intra_beta_s_per_byte
    ae, be = params.inter_alpha_s, params.inter_beta_s_per_byte
    busy: dict[int, float] = defaultdict(lambda: float("-inf"))  # each node's link: when it is free again
    arrived: dict[tuple, deque] = defaultdict(deque)  # (source, dest, tag) -> arrival times, in sending order
    waiting: dict[tuple, int] = {}  # a message some rank's batch still needs -> that rank
    pos, start, held, end = [0] * P, [0.0] * P, [0.0] * P, 0.0  # held: when the batch's sends complete
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
        times = [arrived[key].popleft() for key, k in need.items() for _ in range(k)]
        pos[rank] += 1
        heapq.heappush(ready, (max([start[rank], held[rank], *times]), rank))

    while ready:
        t, rank = heapq.heappop(ready)  # in time order, so that each link takes its messages in that order
        if pos[rank] == len(batches[rank]):
            end = max(end, t)
            continue
        start[rank] = held[rank] = t
        finish_later = []
        for peer, nbytes, *tag in batches[rank][pos[rank]][0]:
            key = (rank, peer, *tag)
            arrived[key].append(arrival(rank, peer, nbytes, t))
            if acked_from is not None and nbytes >= acked_from and node_of_rank[peer] != node_of_rank[rank]:
                held[rank] = max(held[rank], arrived[key][-1] + ae)
            if key in waiting:
                finish_later.append(waiting.pop(key))
        for other in finish_later:
            finish(other)
        finish(rank)
    stuck = [r for r in range(P) if pos[r] < len(batches[r])]
    if stuck:
        raise RuntimeError(f"schedule deadlocks: ranks {stuck} wait for messages never sent")
    return end


def _node_groups(node_of_rank: list[int]) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for r, node in enumerate(node_of_rank):
        groups.setdefault(node, []).append(r)
    return [groups[k] for k in sorted(groups, key=lambda k: groups[k][0])]


def placed_time(collective: str, algorithm: str, node_of_rank: list[int], nbytes: int, params,
                dtype: str = "float32", op: str = "sum", root: int = 0, acked_from: int | None = None) -> float:
    """Predicted seconds of one call of a hand-written algorithm on ranks laid on nodes as `node_of_rank` says.

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
    return schedule_time(batches, node_of_rank, params, acked_from)
