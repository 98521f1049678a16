"""Hand-written allreduce: ring, recursive doubling, Rabenseifner, trees, hierarchical, linear.

Every algorithm works on `recvbuf` (a copy of `sendbuf` unless in place) and talks only
through the counted point-to-point layer, so its traffic can be checked against its cost.

Sources: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005; Rabenseifner, "Optimization of Collective
Reduction Operations", ICCS 2004; Patarasuk & Yuan, "Bandwidth optimal all-reduce
algorithms for clusters of workstations", JPDC 69(2), 2009; Sanders, Speck & Träff,
"Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel
Computing 35(12), 2009, as NCCL 2.4 implements them.
"""

from collections import defaultdict
from functools import lru_cache

import numpy as np

from ccbench.algorithms.bcast import binomial as binomial_bcast
from ccbench.algorithms.p2p import as_ufunc, block_bounds, is_in_place, pof2_below
from ccbench.algorithms.reduce import binomial_reduce
from ccbench.algorithms.reduce_scatter import (
    doubling_allgather,
    fold_additions,
    halving_reduce_scatter,
    pof2_group,
)
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms

__all__ = [
    "CHUNK_BYTES",
    "binomial",
    "double_binary_tree",
    "hierarchical",
    "linear",
    "rabenseifner",
    "recursive_doubling",
    "ring",
    "ring_plan",
]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp, 'Optimization of Collective Communication Operations "
    "in MPICH', IJHPCA 2005"
)

_ZERO = Cost(0, 0, 0)


def _start(sendbuf, recvbuf) -> None:
    """Put this rank's contribution in `recvbuf`, where every algorithm here works."""
    if not is_in_place(sendbuf):
        np.copyto(recvbuf, sendbuf)


def _lg(n: int) -> int:
    """floor(log2 n)."""
    return n.bit_length() - 1


def _fold_cost(P: int, nbytes: int, core: Cost) -> Cost:
    """Add MPICH's fold and unfold (non-powers of two) to the cost of the group's core.

    The odd ranks of the first 2*rem pairs receive and reduce the even ranks' vectors
    (1 step, n bytes, n reduced) and send them the result at the end (1 step, n bytes).
    """
    if P == pof2_below(P):
        return core
    return Cost(core.alpha + 2, core.beta + 2 * nbytes, core.gamma + nbytes)


# -- ring ------------------------------------------------------------------------------


def _ring_cost(P: int, nbytes: int) -> Cost:
    return Cost(2 * (P - 1), 2 * nbytes * (P - 1) / P, nbytes * (P - 1) / P)


@register(
    "allreduce",
    "ring",
    cost=_ring_cost,
    formula="2(P-1)a + 2n(P-1)/P b + n(P-1)/P g   (any P)",
    source="Patarasuk & Yuan, JPDC 2009; " + _THAKUR + ", section 4.4",
    additions=lambda P: P - 1,  # a block collects the P contributions one rank after another
)
def ring(comm, sendbuf, recvbuf, op="sum") -> None:
    """Ring allreduce: a ring reduce-scatter, then a ring allgather of the reduced blocks.

    The vector is cut into P blocks.  Reduce-scatter: in step s = 0..P-2 rank r sends
    block r-s to its right neighbour and receives block r-s-1 from its left one, which
    it reduces into its own copy; a block travels once round the ring collecting every
    rank's contribution, and after P-1 steps rank r holds block r+1 fully reduced.
    Allgather: P-1 more steps pass the finished blocks round the ring the same way.
    Every rank sends and receives 2n(P-1)/P bytes, the lower bound for allreduce, at the
    price of 2(P-1) latencies: the algorithm for long vectors (Patarasuk & Yuan 2009).
    Any P works; counts not divisible by P give blocks differing by one element.
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    P, rank = comm.size, comm.rank
    count = recvbuf.size
    if P == 1 or count == 0:
        return
    bounds = block_bounds(count, P)
    tmp = comm.scratch(bounds[1], recvbuf.dtype)  # block 0 is the largest
    blocks = [recvbuf[bounds[i]:bounds[i + 1]] for i in range(P)]
    incoming = [tmp[:bounds[i + 1] - bounds[i]] for i in range(P)]
    right, left = (rank + 1) % P, (rank - 1) % P
    sendrecv, reduce_local = comm.Sendrecv, comm.reduce_local
    for s in range(P - 1):  # reduce-scatter
        out, into = (rank - s) % P, (rank - s - 1) % P
        sendrecv(blocks[out], right, 0, incoming[into], left, 0)
        reduce_local(ufunc, incoming[into], blocks[into])
    for s in range(P - 1):  # allgather
        out, into = (rank + 1 - s) % P, (rank - s) % P
        sendrecv(blocks[out], right, 0, blocks[into], left, 0)


# -- recursive doubling -------------------------------------------------------------


def _fold_in(comm, recvbuf, ufunc):
    """MPICH's fold for a non-power-of-two P, before a power-of-two algorithm.

    Of the first 2*rem ranks (rem = P - pof2) each even rank sends its vector to the odd
    rank above it, which reduces it and stands for both.  Returns (members, newrank,
    partner, tmp) for a rank in the power-of-two group (partner >= 0: it must send the
    result back at the end), or None when the caller has nothing left to do: one rank,
    no elements, or a folded-out rank, which by then has received the result.
    """
    if comm.size == 1 or recvbuf.size == 0:
        return None
    members, newrank, partner = pof2_group(comm.size, comm.rank)
    if newrank < 0:  # folded out: the partner works for both
        comm.Send(recvbuf, partner)
        comm.Recv(recvbuf, partner)
        return None
    tmp = comm.scratch(recvbuf.size, recvbuf.dtype)
    if partner >= 0:
        comm.Recv(tmp, partner)
        comm.reduce_local(ufunc, tmp, recvbuf)
    return members, newrank, partner, tmp


def _doubling_cost(P: int, nbytes: int) -> Cost:
    lg = _lg(pof2_below(P))
    return _fold_cost(P, nbytes, Cost(lg, lg * nbytes, lg * nbytes))


@register(
    "allreduce",
    "recursive_doubling",
    cost=_doubling_cost,
    formula=(
        "pof2 P: lg P a + n lg P b + n lg P g; otherwise, with p' = pof2 <= P: "
        "(lg p' + 2)a + n(lg p' + 2) b + n(lg p' + 1) g"
    ),
    source=_THAKUR + ", section 4.5 (short messages)",
    additions=fold_additions,
)
def recursive_doubling(comm, sendbuf, recvbuf, op="sum") -> None:
    """Recursive-doubling allreduce: exchange the whole vector with ranks 1, 2, 4... away.

    In step k rank r swaps its current partial result with rank r XOR 2^k and reduces
    the two; after lg P steps every rank holds the full reduction.  Every step moves the
    whole vector, so it suits short messages: lg P steps of n bytes (Thakur et al. 2005,
    section 4.5).

    Non-powers of two, as MPICH does: of the first 2*rem ranks (rem = P - pof2) each even
    rank sends its vector to the odd rank above it, which reduces it and stands for both
    in the power-of-two exchange; at the end it sends the even rank the result.  That
    adds two steps, 2n bytes and n reduced bytes on the odd ranks.
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    group = _fold_in(comm, recvbuf, ufunc)
    if group is None:
        return
    members, newrank, partner, tmp = group
    sendrecv, reduce_local = comm.Sendrecv, comm.reduce_local
    peers = [members[newrank ^ (1 << k)] for k in range(_lg(len(members)))]
    for peer in peers:
        sendrecv(recvbuf, peer, 0, tmp, peer, 0)
        reduce_local(ufunc, tmp, recvbuf)
    if partner >= 0:
        comm.Send(recvbuf, partner)


# -- Rabenseifner ------------------------------------------------------------------


def _rabenseifner_cost(P: int, nbytes: int) -> Cost:
    pof2 = pof2_below(P)
    spread = nbytes * (pof2 - 1) / pof2
    return _fold_cost(P, nbytes, Cost(2 * _lg(pof2), 2 * spread, spread))


@register(
    "allreduce",
    "rabenseifner",
    cost=_rabenseifner_cost,
    formula=(
        "pof2 P: 2 lg P a + 2n(P-1)/P b + n(P-1)/P g; otherwise, with p' = pof2 <= P: "
        "(2 lg p' + 2)a + (2n(p'-1)/p' + 2n) b + (n(p'-1)/p' + n) g"
    ),
    source="Rabenseifner, ICCS 2004; " + _THAKUR + ", section 4.5 (long messages)",
    additions=fold_additions,
)
def rabenseifner(comm, sendbuf, recvbuf, op="sum") -> None:
    """Rabenseifner's allreduce: recursive-halving reduce-scatter + recursive-doubling allgather.

    Reduce-scatter by recursive halving: in the first step rank r exchanges half the
    vector with rank r XOR P/2 -- it sends the half the partner keeps and reduces the
    half it keeps -- then halves again with the rank P/4 away, and so on, until after
    lg P steps it owns one reduced block of n/P bytes.  Allgather by recursive doubling
    reverses the pattern: exchange the owned run with the rank 1, 2, 4... away, doubling
    it each step.  2 lg P steps and 2n(P-1)/P bytes: the bandwidth of the ring with only
    logarithmic latency (Rabenseifner 2004; Thakur et al. 2005, section 4.5).

    Non-powers of two, as MPICH does: of the first 2*rem ranks (rem = P - pof2) each even
    rank sends its vector to the odd rank above it, which reduces it and stands for both
    in the power-of-two algorithm; at the end it sends the even rank the result.  That
    adds two steps, 2n bytes and n reduced bytes on the odd ranks.
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    group = _fold_in(comm, recvbuf, ufunc)
    if group is None:
        return
    members, newrank, partner, tmp = group
    bounds = block_bounds(recvbuf.size, len(members))
    halving_reduce_scatter(comm, recvbuf, tmp, bounds, members, newrank, ufunc)
    doubling_allgather(comm, recvbuf, bounds, members, newrank)
    if partner >= 0:
        comm.Send(recvbuf, partner)


# -- binomial tree -----------------------------------------------------------------


def _binomial_cost(P: int, nbytes: int) -> Cost:
    L = (P - 1).bit_length()  # ceil(lg P)
    return Cost(2 * L, 2 * L * nbytes, L * nbytes)


@register(
    "allreduce",
    "binomial",
    cost=_binomial_cost,
    formula="2 ceil(lg P) a + 2n ceil(lg P) b + n ceil(lg P) g   (any P)",
    source=_THAKUR + ", sections 4.1 and 4.5 (binomial reduce + binomial broadcast)",
    additions=lambda P: (P - 1).bit_length(),  # the binomial reduce's ceil(lg P) steps
)
def binomial(comm, sendbuf, recvbuf, op="sum") -> None:
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast of the result.

    Reduce: in step k each rank whose bit k is set sends its partial result to the rank
    2^k below it and drops out, so after ceil(lg P) steps rank 0 holds the reduction.
    Broadcast: the same tree backwards.  The root sends and receives the whole vector in
    every one of the 2 ceil(lg P) steps: simple, any P, but only for short messages
    (the MPICH building blocks of Thakur et al. 2005).
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    if comm.size == 1 or recvbuf.size == 0:
        return
    binomial_reduce(comm, recvbuf, comm.scratch(recvbuf.size, recvbuf.dtype), ufunc, 0)
    binomial_bcast(comm, recvbuf, 0)


# -- linear ------------------------------------------------------------------------


def _linear_cost(P: int, nbytes: int) -> Cost:
    return Cost(2 * (P - 1), 2 * (P - 1) * nbytes, (P - 1) * nbytes)


@register(
    "allreduce",
    "linear",
    cost=_linear_cost,
    formula="2(P-1)a + 2n(P-1) b + n(P-1) g",
    source="the naive baseline: Open MPI's basic linear reduce followed by a linear broadcast",
    additions=lambda P: P - 1,
)
def linear(comm, sendbuf, recvbuf, op="sum") -> None:
    """Linear allreduce: everyone sends to rank 0, which reduces and sends the result back.

    Rank 0 receives the P-1 other vectors one at a time, reducing each into its own, then
    sends the result to each rank in turn: 2(P-1) steps, all of them at rank 0.  The
    baseline that the other algorithms improve on.
    """
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    count = recvbuf.size
    if rank:  # send my vector to rank 0, receive the result
        if count:
            comm.Send(recvbuf if is_in_place(sendbuf) else sendbuf, 0)
            comm.Recv(recvbuf, 0)
        return
    _start(sendbuf, recvbuf)
    if count == 0:
        return
    tmp = comm.scratch(count, recvbuf.dtype)
    recv, send, reduce_local = comm.Recv, comm.Send, comm.reduce_local
    for source in range(1, P):
        recv(tmp, source)
        reduce_local(ufunc, tmp, recvbuf)
    for dest in range(1, P):
        send(recvbuf, dest)


# -- double binary tree ------------------------------------------------------------

#: Pipeline chunk of the double binary tree: each tree's half of the vector travels in
#: ceil(n / (2 CHUNK_BYTES)) chunks, so a long vector streams through the trees.
CHUNK_BYTES = 1 << 18


def _btree(P: int, rank: int) -> tuple[int, tuple[int, ...]]:
    """(parent, children) of `rank` in NCCL's binary tree on P ranks (ncclGetBtree).

    Rank 0 is the root, with one child; below it the tree is the in-order tree of the
    binary numbers: a rank whose lowest set bit is 2^k has children rank -/+ 2^(k-1)
    (the right one pulled in when it is out of range), and odd ranks are leaves.
    """
    bit = 1
    while bit < P and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ((bit >> 1,) if P > 1 else ())
    parent = (rank ^ bit) | (bit << 1)
    if parent >= P:
        parent = rank ^ bit
    low = bit >> 1
    if not low:
        return parent, ()
    step = low
    while step and rank + step >= P:
        step >>= 1
    return parent, (rank - low,) + ((rank + step,) if step else ())


@lru_cache(maxsize=64)
def _dtrees(P: int) -> tuple:
    """The two trees of NCCL's double binary tree (ncclGetDtree), with heights and depths.

    Tree 1 is tree 0 mirrored (rank r -> P-1-r) when P is even, shifted by one rank when
    P is odd, so that most ranks that are leaves in one tree are inner nodes in the
    other.  Returns, per tree, (parents, children, heights, depths) indexed by rank.
    """
    trees = []
    for t in (0, 1):
        parents, children = [-1] * P, [()] * P
        for r in range(P):
            if t == 0:
                parents[r], children[r] = _btree(P, r)
                continue
            if P % 2:  # shift by one
                u, ch = _btree(P, (r - 1) % P)
                parents[r] = -1 if u < 0 else (u + 1) % P
                children[r] = tuple((c + 1) % P for c in ch)
            else:  # mirror
                u, ch = _btree(P, P - 1 - r)
                parents[r] = -1 if u < 0 else P - 1 - u
                children[r] = tuple(P - 1 - c for c in ch)
        root = parents.index(-1)
        depths, heights = [0] * P, [0] * P
        order = [root]  # breadth first: parents before children
        for r in order:
            for c in children[r]:
                depths[c] = depths[r] + 1
                order.append(c)
        for r in reversed(order):
            heights[r] = 1 + max((heights[c] for c in children[r]), default=-1)
        trees.append((parents, children, heights, depths))
    return tuple(trees)


@lru_cache(maxsize=1024)
def _dtree_rounds(P: int, rank: int, nchunks: int) -> tuple:
    """This rank's schedule: (round, (sends, recvs)) per round it takes part in, ascending.

    Sends and receives are (tree, chunk, peer, tag[, slot]).

    Tree t carries half t of the vector in `nchunks` chunks, each chunk on a schedule of
    lock-step rounds.  Reduce: a rank of height h (leaves 0) sends chunk k to its parent
    in round h + k, by which time it has received and reduced chunk k from its children
    (height < h).  Broadcast: the root, of height H, has chunk k complete after round
    H + k - 1 and sends it down in round H + k; a rank at depth d receives it in round
    H + k + d - 1 and passes it on in the next.  Both trees' messages of one round go out
    together.  A receive's slot is the child's position (its chunk lands in scratch slot
    `slot`, to be reduced) or -1 (a broadcast chunk, received in place).
    """
    rounds: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for t, (parents, children, heights, depths) in enumerate(_dtrees(P)):
        top = max(heights)
        parent, depth = parents[rank], depths[rank]
        for k in range(nchunks):
            for slot, child in enumerate(children[rank]):
                rounds[heights[child] + k][1].append((t, k, child, 2 * t, slot))
            if parent >= 0:
                rounds[heights[rank] + k][0].append((t, k, parent, 2 * t))
                rounds[top + k + depth - 1][1].append((t, k, parent, 2 * t + 1, -1))
            for child in children[rank]:
                rounds[top + k + depth][0].append((t, k, child, 2 * t + 1))
    return tuple((r, rounds[r]) for r in sorted(rounds))


@lru_cache(maxsize=64)
def _dtree_representatives(P: int) -> tuple[int, ...]:
    """One rank per class of ranks whose schedules have the same shape.

    A rank's per-round message counts and sizes depend only on, per tree: its children's
    heights, whether it has a parent, its own height and depth, and the tree's height --
    not on who its peers are.  Evaluating one rank per class keeps the exact cost cheap
    at 65,536 ranks (there are O(log^2 P) classes).
    """
    trees = _dtrees(P)
    tops = [max(heights) for _, _, heights, _ in trees]
    seen: dict[tuple, int] = {}
    for rank in range(P):
        sig = tuple(
            (tuple(sorted(heights[c] for c in children[rank])), parents[rank] >= 0, heights[rank],
             depths[rank], top)
            for (parents, children, heights, depths), top in zip(trees, tops, strict=True)
        )
        seen.setdefault(sig, rank)
    return tuple(seen.values())


@lru_cache(maxsize=64)
def _dtree_additions(P: int) -> int:
    """The most sequential additions behind an element of the double binary tree's result.

    In each tree a rank adds its children's partial sums into its own one after the other
    (in the order of their rounds: lower height first, then child order), so a sum from the
    first of two children is rounded twice at that rank.  The chunks all follow the same
    tree, so one pass per tree gives the count.
    """
    worst = 0
    for _, children, heights, _ in _dtrees(P):
        behind = [0] * P  # additions behind the partial sum a rank passes up
        for r in sorted(range(P), key=heights.__getitem__):  # children before parents
            acc = 0
            for _, _, c in sorted((heights[c], slot, c) for slot, c in enumerate(children[r])):
                acc = max(acc, behind[c]) + 1
            behind[r] = acc
        worst = max(worst, max(behind))
    return worst


def _dtree_chunks(nbytes: int) -> int:
    """Chunks per tree for a vector of `nbytes`."""
    return max(1, -(-nbytes // (2 * CHUNK_BYTES)))


def _dtree_cost(P: int, nbytes: int) -> Cost:
    """Exact counted cost, evaluated on the schedule itself (see `double_binary_tree`)."""
    if P == 1:
        return _ZERO
    nchunks = _dtree_chunks(nbytes)
    halves = block_bounds(nbytes, 2)
    size = [block_bounds(halves[t + 1] - halves[t], nchunks) for t in (0, 1)]

    def nb(t, k):
        return size[t][k + 1] - size[t][k]

    worst = [0, 0, 0]
    per_round: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])  # the costliest rank's round
    for rank in _dtree_representatives(P):
        total = [0, 0, 0]
        for r, (sends, recvs) in _dtree_rounds(P, rank, nchunks):
            mine = (max(len(sends), len(recvs)),
                    max(sum(nb(t, k) for t, k, *_ in sends), sum(nb(t, k) for t, k, *_ in recvs)),
                    sum(nb(t, k) for t, k, _, _, slot in recvs if slot >= 0))
            total = [a + b for a, b in zip(total, mine, strict=True)]
            per_round[r] = [max(a, b) for a, b in zip(per_round[r], mine, strict=True)]
        worst = [max(w, v) for w, v in zip(worst, total, strict=True)]
    path = [sum(c[i] for c in per_round.values()) for i in range(3)]
    return Cost(*worst, critical=Cost(*path) if path != worst else None)


@register(
    "allreduce",
    "double_binary_tree",
    cost=_dtree_cost,
    formula=(
        "exact value evaluated on the schedule; with C = ceil(n / (2 CHUNK_BYTES)) chunks "
        "per tree, about C + 2 lg P rounds of up to 4 chunks of n/2C each way, so for "
        "C >> lg P: ~ 4C a + 2n b + n g; critical path: the costliest rank's cost summed "
        "over the C + 2 lg P rounds"
    ),
    source=(
        "Sanders, Speck & Träff, 'Two-tree algorithms for full bandwidth broadcast, "
        "reduction and scan', Parallel Computing 2009; NCCL 2.4 (ncclGetDtree)"
    ),
    additions=_dtree_additions,
)
def double_binary_tree(comm, sendbuf, recvbuf, op="sum") -> None:
    """Double binary tree allreduce (NCCL): two complementary trees, each with half the data.

    A single binary tree wastes half the bandwidth: its leaves only ever send, its inner
    nodes send to one parent but receive from two children.  Two trees fix that (Sanders,
    Speck & Träff 2009): tree 0 is NCCL's in-order binary tree, tree 1 the same tree
    mirrored (even P) or shifted by one rank (odd P), so a rank that is a leaf in one is
    an inner node in the other.  Half t of the vector is reduced up tree t and broadcast
    back down it, in chunks of at most CHUNK_BYTES so that chunk k+1 climbs the tree
    while chunk k descends (NCCL 2.4 pipelines the same way).  Here the pipeline runs in
    lock-step rounds (see `_dtree_rounds`): in each round a rank posts every send and
    receive of both trees at once and waits for them, then reduces what arrived; a
    message is in the same round on both sides, which also makes it deadlock-free.

    The per-rank maximum depends on where a rank sits in the two trees, which varies
    irregularly with P, so `cost` evaluates the schedule itself (exactly, without any
    communication) instead of a closed form.
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    P, rank = comm.size, comm.rank
    count = recvbuf.size
    if P == 1 or count == 0:
        return
    nchunks = _dtree_chunks(recvbuf.nbytes)
    halves = block_bounds(count, 2)
    bounds = [[halves[t] + b for b in block_bounds(halves[t + 1] - halves[t], nchunks)]
              for t in (0, 1)]
    scratch = [comm.scratch(count, recvbuf.dtype, slot) for slot in (0, 1)]

    def view(buf, t, k):
        return buf[bounds[t][k]:bounds[t][k + 1]]

    plan = []
    for _, (sends, recvs) in _dtree_rounds(P, rank, nchunks):
        posts = [(comm.Irecv, view(recvbuf if slot < 0 else scratch[slot], t, k), peer, tag)
                 for t, k, peer, tag, slot in recvs]
        posts += [(comm.Isend, view(recvbuf, t, k), peer, tag) for t, k, peer, tag in sends]
        reduces = [(view(scratch[slot], t, k), view(recvbuf, t, k))
                   for t, k, _, _, slot in recvs if slot >= 0]
        plan.append((posts, reduces))
    waitall, reduce_local = comm.Waitall, comm.reduce_local
    for posts, reduces in plan:
        waitall([post(buf, peer, tag) for post, buf, peer, tag in posts])
        for incoming, mine in reduces:
            reduce_local(ufunc, incoming, mine)


# -- hierarchical ------------------------------------------------------------------


def _hierarchical_additions(P: int, ranks_per_node: int | None = None, nodes: int | None = None) -> int:
    """Sequential additions: the node-local binomial reduce's ceil(lg m) on the largest node (`ranks_per_node`
    ranks), then the leaders' Rabenseifner on `nodes` leaders (by default as many as full nodes of
    `ranks_per_node` need; None, None: one node)."""
    local = P if ranks_per_node is None else min(ranks_per_node, P)
    if nodes is None:
        nodes = 1 if ranks_per_node is None else -(-P // ranks_per_node)
    return (local - 1).bit_length() + fold_additions(nodes)


def _hierarchical_cost(P: int, nbytes: int, ranks_per_node: int | None = None) -> Cost:
    """Cost on nodes of `ranks_per_node` consecutive ranks (None: all on one node)."""
    local = P if ranks_per_node is None else min(ranks_per_node, P)
    nodes = 1 if ranks_per_node is None else -(-P // ranks_per_node)
    L = (local - 1).bit_length()
    inner = _rabenseifner_cost(nodes, nbytes)
    return Cost(2 * L + inner.alpha, 2 * L * nbytes + inner.beta, L * nbytes + inner.gamma)


@register(
    "allreduce",
    "hierarchical",
    cost=_hierarchical_cost,
    formula=(
        "m ranks per node, N nodes: 2 ceil(lg m) a + 2n ceil(lg m) b + n ceil(lg m) g "
        "+ Rabenseifner(N); on one node 2 ceil(lg P) a + 2n ceil(lg P) b + n ceil(lg P) g"
    ),
    source=(
        "SMP-aware allreduce as in MPICH (MPIR_Allreduce_intra_smp): node-local reduce, "
        "allreduce among node leaders, node-local broadcast"
    ),
    additions=_hierarchical_additions,
)
def hierarchical(comm, sendbuf, recvbuf, op="sum") -> None:
    """Hierarchical allreduce: reduce within each node, allreduce across nodes, broadcast.

    Ranks that share a node (``Split_type(COMM_TYPE_SHARED)``) first reduce to their
    node's first rank along a binomial tree; those leaders, one per node, allreduce among
    themselves with Rabenseifner's algorithm; each leader then broadcasts the result
    through its node along the binomial tree.  Only one rank per node touches the
    network, which pays when the links between nodes are the bottleneck (MPICH's
    SMP-aware allreduce).  On one node the middle phase is empty.  The communicators are
    made once per communicator and cached (`CountedComm.node_comms`).

    `cost` takes an optional ``ranks_per_node`` (equal nodes of consecutive ranks are
    assumed; None, the default, means one node).
    """
    ufunc = as_ufunc(op)
    _start(sendbuf, recvbuf)
    if comm.size == 1 or recvbuf.size == 0:
        return
    node, leaders = comm.node_comms()
    if node.size > 1:
        binomial_reduce(node, recvbuf, node.scratch(recvbuf.size, recvbuf.dtype), ufunc, 0)
    if leaders is not None and leaders.size > 1:
        rabenseifner(leaders, None, recvbuf, ufunc)
    if node.size > 1:
        binomial_bcast(node, recvbuf, 0)


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------


def ring_plan(comm, sendbuf, recvbuf, op="sum") -> Plan:
    """`ring`'s 2(P-1) steps on these buffers (`ccbench.algorithms.steps`): a reduce-scatter step receives into a
    scratch block of its own (held by the requests between calls), then reduces it; an allgather step receives in
    place."""
    ufunc, P, rank, count = as_ufunc(op), comm.size, comm.rank, recvbuf.size
    steps: list = []
    if P > 1 and count:
        bounds = block_bounds(count, P)
        tmp = np.empty(bounds[1], recvbuf.dtype)
        blocks = [recvbuf[bounds[i]:bounds[i + 1]] for i in range(P)]
        incoming = [tmp[:bounds[i + 1] - bounds[i]] for i in range(P)]
        right, left = (rank + 1) % P, (rank - 1) % P
        for s in range(P - 1):  # reduce-scatter
            out, into = (rank - s) % P, (rank - s - 1) % P
            steps.append(([(blocks[out], right, 0)], [(incoming[into], left, 0)],
                          (ufunc, incoming[into], blocks[into])))
        for s in range(P - 1):  # allgather
            out, into = (rank + 1 - s) % P, (rank - s) % P
            steps.append(([(blocks[out], right, 0)], [(blocks[into], left, 0)], None))
    return Plan(lambda: _start(sendbuf, recvbuf), tuple(steps))


register_forms("allreduce", "ring", ring_plan, what="Ring allreduce",
               source="Patarasuk & Yuan, JPDC 2009; " + _THAKUR + ", section 4.4", cost=_ring_cost,
               formula="2(P-1)a + 2n(P-1)/P b + n(P-1)/P g   (any P; the ring's messages)", additions=lambda P: P - 1)
