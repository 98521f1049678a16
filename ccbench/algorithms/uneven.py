"""Hand-written v-collectives, whose blocks have sizes of their own: allgatherv, alltoallv, gatherv, scatterv and
reduce_scatterv (MPI_Reduce_scatter).

Every function mirrors its even form's, with the block counts (elements) as keywords::

    allgatherv(comm, sendbuf, recvbuf, counts)                 block r: counts[r] elements of rank r
    gatherv(comm, sendbuf, recvbuf, counts, root=0)            at the root
    scatterv(comm, sendbuf, recvbuf, counts, root=0)           from the root
    reduce_scatterv(comm, sendbuf, recvbuf, counts, op="sum")  block r of the reduction to rank r
    alltoallv(comm, sendbuf, recvbuf, sendcounts, recvcounts)  this rank's row and column of the count matrix

Blocks lie in rank order, each at the sum of the counts before it (MPI's displacements for contiguous blocks).
Unlike MPI, which gives a rank only its own counts (or the root all of them), every rank gets every count: they
come from one distribution (`ccbench.core.counts`) that every rank computes alike, and the trees need their
subtrees' sizes.  In place as in MPI: the own block of allgatherv and gatherv's root is already in recvbuf,
scatterv's root keeps its block in sendbuf, reduce_scatterv reads the whole input from recvbuf and leaves its
block at the front, and alltoallv sends and receives the blocks of recvcounts from recvbuf (so its counts must
be the same both ways).

Costs (`Cost`, per rank and maximised over ranks, as the counted point-to-point layer counts them) come from the
bytes of the blocks the case's distribution gives: the cost functions take the spec (``counts``), the element
size (``itemsize``) and, rooted, the ``root``.  In the formulas c_r is the bytes of rank r's block, m(i,j) the
bytes rank i sends rank j (alltoallv), n the collective's size (the sum of the blocks; for alltoallv the sum of
all blocks over P), indices mod P.  Where ranks wait on each other -- a ring passes the largest block over P-1
links one after another, a tree carries a heavy subtree up level by level -- the critical path
(`Cost.critical`, under `ccbench.algorithms.p2p.critical_path`'s rule) is longer than the busiest rank's work and
sets the time; it is computed from the schedule: round by round, vectorised over the ranks, for the pairwise
alltoallv, level by level for the trees and in closed form for the rings and the pairwise reduce_scatterv.
alltoallv's matrix is read by entry (`ccbench.core.counts.CountMatrix`), never held.

Source: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA
19(1), 2005, for every schedule with even blocks; MPICH's and Open MPI's v-collectives for the uneven ones
(named at each algorithm).
"""

from functools import lru_cache, partial
from typing import NamedTuple

import numpy as np

from ccbench.algorithms.p2p import as_ufunc, is_in_place
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_plan
from ccbench.core.counts import CountMatrix, block_counts, count_matrix

__all__ = ["allgatherv_linear", "allgatherv_ring", "alltoallv_linear", "alltoallv_pairwise", "gatherv_binomial",
           "gatherv_linear", "reduce_scatterv_pairwise", "reduce_scatterv_ring", "scatterv_binomial",
           "scatterv_linear"]

_THAKUR = ("Thakur, Rabenseifner & Gropp 2005, 'Optimization of Collective Communication Operations in MPICH', "
           "IJHPCA 19(1)")


@lru_cache(maxsize=256)
def _offsets(counts: tuple) -> tuple[int, ...]:
    """The P + 1 offsets of contiguous blocks of `counts` elements (the last is the total)."""
    d = [0]
    for x in counts:
        d.append(d[-1] + int(x))
    return tuple(d)


# -- costs ------------------------------------------------------------------------------------


def _blocks(P: int, nbytes: int, counts: str, itemsize: int) -> np.ndarray:
    """The bytes of the blocks of a case of size `nbytes`, a vector of P."""
    isz = max(1, int(itemsize))
    return block_counts(counts, P, int(nbytes) // isz) * isz


def _matrix(P: int, nbytes: int, counts: str, itemsize: int) -> tuple[CountMatrix, int]:
    """alltoallv's P x P counts of a case of size `nbytes` (per rank), in elements, and the bytes of an element:
    read by entry and scaled where read, as the array would be large (2 GB at 16,384 ranks; moe's alone is)."""
    isz = max(1, int(itemsize))
    return count_matrix(counts, P, int(nbytes) * P // isz), isz


def _with_path(cost: Cost, steps: float, beta: float) -> Cost:
    """`cost` with its critical path where that chain is longer than the busiest rank's own work (an upper bound
    of both where it is longer in one term only)."""
    if steps <= cost.alpha and beta <= cost.beta:
        return cost
    if steps >= cost.alpha and beta >= cost.beta:
        return cost._replace(critical=Cost(steps, beta, cost.gamma))
    return cost._replace(critical=Cost(max(steps, cost.alpha), max(beta, cost.beta), cost.gamma))


def _lockstep(P: int, steps) -> Cost:
    """The cost of lock-step Sendrecv rounds: `steps` yields per round (sends, shift, reduced), sends and reduced
    vectors over the ranks: rank r sends sends[r] bytes and receives the sends[r - shift] bytes its source,
    rank r - shift (mod P), sends it, then reduces reduced[r] bytes (or None).  A round costs a rank max(out, in);
    on the critical path it ends when the rank and its source have both ended the round before (`critical_path`'s
    rule), plus that."""
    busy, end, red, moved, step = np.zeros(P), np.zeros(P), np.zeros(P), np.empty(P), np.empty(P)
    rounds = 0
    for sends, shift, reduced in steps:
        s = shift % P  # moved[r] = x[r - s] (np.roll into a kept buffer: no allocation in 16,383 rounds)
        moved[s:], moved[:s] = sends[:P - s], sends[P - s:]
        np.maximum(sends, moved, out=step)
        busy += step
        moved[s:], moved[:s] = end[:P - s], end[P - s:]
        np.maximum(end, moved, out=end)
        end += step
        if reduced is not None:
            red += reduced
        rounds += 1
    cost = Cost(rounds, float(busy.max(initial=0)), float(red.max(initial=0)))
    return _with_path(cost, rounds, float(end.max(initial=0)))


def _direct(sent: np.ndarray, received: np.ndarray, P: int) -> Cost:
    """One batch of P-1 messages each way per rank (everything posted at once): the busiest rank's larger side."""
    if P == 1:
        return Cost(0, 0.0)
    return Cost(P - 1, float(np.maximum(sent, received).max()))


# -- allgatherv -------------------------------------------------------------------------------


def _ring(w: np.ndarray, reduced: np.ndarray | None = None) -> Cost:
    """`_lockstep` of a ring's P-1 rounds in closed form, O(P) where the enumeration is O(P^2) (16,384 ranks):
    rank r's step in round k is w[r - k], so over the rounds it takes every w but its own, W - w[r] (W = sum w).
    A round's chain runs from rank r to r + 1 (its receiver) or stays at r, so the longest one takes w[r - k]
    with r - k constant or falling by one: following one block round the ring, (P-1) max w, the largest block
    crossing every link in turn.  `reduced`: what each rank reduces over all its rounds."""
    P = len(w)
    if P < 2:
        return Cost(0, 0.0, 0.0)
    cost = Cost(P - 1, float((int(w.sum()) - w).max()), 0.0 if reduced is None else float(reduced.max()))
    return _with_path(cost, P - 1, float((P - 1) * int(w.max())))


def _ag_ring_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    c = _blocks(P, nbytes, counts, itemsize)  # round k: rank r passes on block r-k+1 and takes block r-k
    return _ring(np.maximum(c, np.roll(c, -1)))


@register(
    "allgatherv",
    "ring",
    cost=_ag_ring_cost,
    formula="(P-1) a + max_r (W - w_r) b, w_d = max(c_d, c_(d+1)), W = sum_d w_d; critical path up to "
            "(P-1) max c b (the largest block crosses P-1 links in turn)",
    source=_THAKUR + " (MPICH MPIR_Allgatherv_intra_ring, without its chunking of long blocks)",
)
def allgatherv_ring(comm, sendbuf, recvbuf, counts) -> None:
    """Ring allgatherv: P-1 rounds, each rank passes the block it received last to its right neighbour.

    In round k (k = 1..P-1) rank r sends block r-k+1 (its own in round 1) to rank r+1 and receives block r-k
    from rank r-1 with one Sendrecv.  With even blocks this is the bandwidth-optimal ring (Patarasuk & Yuan
    2009); with uneven ones a round lasts as long as its largest block, and the largest block crosses all P-1
    links one round after another, so a single heavy block makes the ring pay it P-1 times (the critical path)
    while each rank's own traffic counts it about twice.
    """
    run_plan(comm, allgatherv_ring_plan(comm, sendbuf, recvbuf, counts))


def allgatherv_ring_plan(comm, sendbuf, recvbuf, counts) -> Plan:
    """`allgatherv_ring`'s rounds as steps (`ccbench.algorithms.steps`), one Sendrecv's messages each, after a
    prologue that copies the own block into place."""
    P, rank = comm.size, comm.rank
    d = _offsets(tuple(counts))
    own = recvbuf[d[rank]:d[rank + 1]]
    left, right, j, steps = (rank - 1) % P, (rank + 1) % P, rank, []
    for _ in range(P - 1):
        jn = j - 1 if j else P - 1
        steps.append((((recvbuf[d[j]:d[j + 1]], right, 0),), ((recvbuf[d[jn]:d[jn + 1]], left, 0),), None))
        j = jn
    return Plan(None if is_in_place(sendbuf) else lambda: np.copyto(own, sendbuf), tuple(steps))


def _ag_linear_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    c = _blocks(P, nbytes, counts, itemsize)
    return _direct((P - 1) * c, c.sum() - c, P)


@register(
    "allgatherv",
    "linear",
    cost=_ag_linear_cost,
    formula="(P-1) a + max_r max((P-1) c_r, n - c_r) b",
    source="direct exchange, every send and receive posted at once (the even linear allgather's schedule with a "
           "count per block)",
)
def allgatherv_linear(comm, sendbuf, recvbuf, counts) -> None:
    """Direct allgatherv: every rank sends its block to every other rank, all at once.

    Rank r posts P-1 receives (block r-i from rank r-i) and P-1 sends of its own block (to rank r+i), then waits
    for all of them: one batch, (P-1) a + max(what it sends, what it receives) b.  No rank waits for another's
    forwarding, so a heavy block costs its owner (P-1) c_r once and every other rank c_r.
    """
    P, rank = comm.size, comm.rank
    d = _offsets(tuple(counts))
    mine = recvbuf[d[rank]:d[rank + 1]]
    if not is_in_place(sendbuf):
        np.copyto(mine, sendbuf)
    if P == 1:
        return
    reqs = [comm.Irecv(recvbuf[d[s]:d[s + 1]], s) for s in ((rank - i) % P for i in range(1, P))]
    reqs += [comm.Isend(mine, (rank + i) % P) for i in range(1, P)]
    comm.Waitall(reqs)


# -- alltoallv --------------------------------------------------------------------------------


def _a2a_input(comm, sendbuf, recvbuf, sendcounts, recvcounts):
    """(buffer to send from, its offsets, receive offsets, the copy every call makes first): out of place the own
    block copied across, in place the input copied to scratch slot 0 and laid out by recvcounts."""
    rd = _offsets(tuple(recvcounts))
    if is_in_place(sendbuf):
        src = comm.scratch(rd[-1], recvbuf.dtype, 0)
        return src, rd, rd, partial(np.copyto, src, recvbuf)
    sd = _offsets(tuple(sendcounts))
    r = comm.rank
    return sendbuf, sd, rd, partial(np.copyto, recvbuf[rd[r]:rd[r + 1]], sendbuf[sd[r]:sd[r + 1]])


def _a2a_pairwise_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    m, isz = _matrix(P, nbytes, counts, itemsize)
    return _lockstep(P, ((m.wrapped(k) * isz, k, None) for k in range(1, P)))


@register(
    "alltoallv",
    "pairwise",
    cost=_a2a_pairwise_cost,
    formula="(P-1) a + max_r sum_k max(m(r,r+k), m(r-k,r)) b; critical path from the lock-step rounds, "
            "enumerated",
    source=_THAKUR + " (pairwise exchange); Open MPI ompi_coll_base_alltoallv_intra_pairwise",
)
def alltoallv_pairwise(comm, sendbuf, recvbuf, sendcounts, recvcounts) -> None:
    """Pairwise-exchange alltoallv: in round k rank r sends its block for r+k and receives the block of r-k.

    P-1 rounds of one Sendrecv each, every rank meeting every other once (the shift order of Open MPI's
    pairwise alltoallv).  A round costs a rank the larger of its two blocks, and a rank that receives more
    than the others -- the host of a popular expert -- is the busiest, so the uneven exchange costs more than
    the even one of the same total.  In place the input is first copied to scratch slot 0.
    """
    run_plan(comm, alltoallv_pairwise_plan(comm, sendbuf, recvbuf, sendcounts, recvcounts))


def alltoallv_pairwise_plan(comm, sendbuf, recvbuf, sendcounts, recvcounts) -> Plan:
    """`alltoallv_pairwise`'s rounds as steps (`ccbench.algorithms.steps`), one Sendrecv's messages each, after the
    copy of `_a2a_input`."""
    P, rank = comm.size, comm.rank
    src_buf, sd, rd, copy = _a2a_input(comm, sendbuf, recvbuf, sendcounts, recvcounts)
    steps = []
    for i in range(1, P):
        dst, src = (rank + i) % P, (rank - i) % P
        steps.append((((src_buf[sd[dst]:sd[dst + 1]], dst, 0),), ((recvbuf[rd[src]:rd[src + 1]], src, 0),), None))
    return Plan(copy, tuple(steps))


def _a2a_linear_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    m, isz = _matrix(P, nbytes, counts, itemsize)
    own = m.diagonal()
    return _direct((m.sum(axis=1) - own) * isz, (m.sum(axis=0) - own) * isz, P)


@register(
    "alltoallv",
    "linear",
    cost=_a2a_linear_cost,
    formula="(P-1) a + max_r max(sum_j!=r m(r,j), sum_i!=r m(i,r)) b",
    source="every Isend/Irecv posted at once (MPICH MPIR_Alltoallv_intra_scattered with an unbounded batch; "
           "Open MPI ompi_coll_base_alltoallv_intra_basic_linear)",
)
def alltoallv_linear(comm, sendbuf, recvbuf, sendcounts, recvcounts) -> None:
    """Direct alltoallv: post every receive and send at once, then one Waitall.

    Rank r receives from r-i and sends to r+i (i = 1..P-1), the spread-out order of MPICH's scattered
    alltoallv: one batch, (P-1) a + max(bytes out, bytes in) b for the busiest rank.  In place the input is
    first copied to scratch slot 0.
    """
    P, rank = comm.size, comm.rank
    src_buf, sd, rd, copy = _a2a_input(comm, sendbuf, recvbuf, sendcounts, recvcounts)
    copy()
    if P == 1:
        return
    reqs = [comm.Irecv(recvbuf[rd[s]:rd[s + 1]], s) for s in ((rank - i) % P for i in range(1, P))]
    reqs += [comm.Isend(src_buf[sd[t]:sd[t + 1]], t) for t in ((rank + i) % P for i in range(1, P))]
    comm.Waitall(reqs)


# -- gatherv and scatterv ---------------------------------------------------------------------


class _Node(NamedTuple):
    """One rank's place in the binomial tree of relative ranks (root = 0), in elements of the relative order."""

    vr: int                     # relative rank
    parent: int                 # absolute rank of the parent (-1 at the root)
    size: int                   # elements of its subtree
    children: tuple             # (absolute rank, offset in the subtree, elements), smallest subtree first
    root_offset: int            # offset of the root's block in rank order
    total: int                  # elements of all blocks


def _node_of(counts: tuple, root: int, rank: int) -> _Node:
    """The binomial-tree node of `rank`: the tree of MPICH's binomial gather and scatter (Thakur et al. 2005),
    whose subtree [vr, vr + m) is one contiguous run of blocks in relative order, m = min(lowbit(vr), P - vr)."""
    rd, root_offset = _offsets(counts[root:] + counts[:root]), _offsets(counts)[root]
    P = len(rd) - 1
    vr = (rank - root) % P
    low = vr & -vr
    m = min(low, P - vr) if vr else P
    children = []
    mask = 1
    while mask < m:
        nb = min(mask, m - mask)
        children.append(((rank + mask) % P, rd[vr + mask] - rd[vr], rd[vr + mask + nb] - rd[vr + mask]))
        mask <<= 1
    return _Node(vr, (rank - low) % P if vr else -1, rd[vr + m] - rd[vr], tuple(children), root_offset, rd[-1])


_node = lru_cache(maxsize=1024)(_node_of)


def _later(s: np.ndarray, b: np.ndarray, s2: np.ndarray, b2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The later of two (steps, bytes) times, element by element, compared as `critical_path` compares them: by
    steps, then bytes."""
    take = (s2 > s) | ((s2 == s) & (b2 > b))
    return np.where(take, s2, s), np.where(take, b2, b)


def _tree_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1, root: int = 0, *,
               gather: bool) -> Cost:
    """The cost of the binomial gatherv (`gather`) or scatterv, vectorised over the relative ranks v (O(P log P)):
    node v holds the subtree [v, v + m), m = min(lowbit(v), P - v), its children v + 2^j for 2^j < m each the
    root of its own.  A gather receives its children's subtrees, smallest first, then sends its own up; a scatter
    receives its subtree, then sends the children theirs, largest first.  One message a batch, so a rank's steps
    are its batches and its bytes their sum; the critical path follows `critical_path`'s rule (a receive ends at
    the later of the rank's last batch and the message's departure, plus (1, its bytes)), level by level."""
    isz = max(1, int(itemsize))
    c = _blocks(P, nbytes, counts, isz) // isz
    root = int(root) % P
    cr = np.roll(c, -root)  # blocks in relative order, root first
    rd = np.concatenate(([0], np.cumsum(cr)))
    v = np.arange(P)
    m = np.where(v > 0, np.minimum(v & -v, P - v), P)
    size = rd[v + m] - rd[v]  # elements of each subtree
    kids = np.frexp((m - 1).astype(np.float64))[1]  # children: ceil(lg m), the bit length of m - 1
    inner = v > 0
    steps = kids + inner
    moved = (size - cr) + inner * size  # the children's subtrees, and the own one up (or down)
    s, b = np.zeros(P, dtype=np.int64), np.zeros(P, dtype=np.int64)
    top = (P - 1).bit_length()
    if gather:  # level by level from the leaves: every child is done with its own children before its parent
        for j in range(top):  # ... takes it (t of v + 2^j is final once masks below 2^j are)
            par = np.flatnonzero(m > 1 << j)
            s[par], b[par] = _later(s[par], b[par], s[par + (1 << j)], b[par + (1 << j)])
            s[par] += 1
            b[par] += size[par + (1 << j)]
        done = (s + inner, b + inner * size)  # the send up ends a non-root rank
    else:  # from the root down: a child's data leaves when its parent has sent every larger subtree
        for j in reversed(range(top)):
            u = np.flatnonzero(inner & ((v & -v) == 1 << j))
            p = u - (1 << j)
            first = np.minimum(p + (2 << j), p + m[p])  # the children with larger masks: [first, p + m)
            s[u] = s[p] + np.maximum(kids[p] - 1 - j, 0) + 1
            b[u] = b[p] + rd[p + m[p]] - rd[first] + size[u]
        done = (s + kids, b + size - cr)
    order = np.lexsort((done[1], done[0]))[-1]  # the latest (steps, then bytes)
    cost = Cost(int(steps.max()), float(moved.max() * isz))
    return _with_path(cost, int(done[0][order]), float(done[1][order] * isz))


def _rooted_direct_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1, root: int = 0) -> Cost:
    """A flat tree (linear gatherv or scatterv): P-1 messages through the root's link, every block but its own."""
    c = _blocks(P, nbytes, counts, itemsize)
    return Cost(0, 0.0) if P == 1 else Cost(P - 1, float(c.sum() - c[int(root) % P]))


@register(
    "gatherv",
    "linear",
    cost=_rooted_direct_cost,
    formula="(P-1) a + (n - c_root) b",
    source="flat tree, as MPICH MPIR_Gatherv_allcomm_linear / Open MPI ompi_coll_base_gatherv_intra_basic_linear",
)
def gatherv_linear(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """Flat-tree gatherv: every rank sends its block straight to the root.

    The root posts P-1 receives, block r into its slot of recvbuf, and waits for them all: (P-1) a +
    (n - c_root) b through the root's one link, whatever the distribution (Thakur et al. 2005's flat gather).
    """
    run_plan(comm, gatherv_linear_plan(comm, sendbuf, recvbuf, counts, root))


def gatherv_linear_plan(comm, sendbuf, recvbuf, counts, root: int = 0) -> Plan:
    """`gatherv_linear`'s one step (`ccbench.algorithms.steps`): a send to the root, or at the root P-1 receives
    after a prologue that copies its own block into place."""
    P, rank = comm.size, comm.rank
    if rank != root:
        return Plan(None, ((((sendbuf, root, 0),), (), None),))
    d = _offsets(tuple(counts))
    own = recvbuf[d[root]:d[root + 1]]
    recvs = tuple((recvbuf[d[s]:d[s + 1]], s, 0) for s in ((root + i) % P for i in range(1, P)))
    return Plan(None if is_in_place(sendbuf) else lambda: np.copyto(own, sendbuf),
                (((), recvs, None),) if recvs else ())


@register(
    "gatherv",
    "binomial",
    cost=partial(_tree_cost, gather=True),
    formula="ceil(lg P) a + (n - c_root) b at the root; critical path from the tree, enumerated (a heavy block "
            "deep in the tree is carried up every level)",
    source=_THAKUR + " (MPICH MPIR_Gather_intra_binomial's tree) with each subtree's own counts; trees for "
           "irregular gathers: Traff, 'Hierarchical gather/scatter algorithms with graceful degradation', IPDPS 2004",
)
def gatherv_binomial(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """Binomial-tree gatherv: subtrees merge upwards in ceil(lg P) rounds, each message a subtree's blocks.

    The binomial gather's tree (relative ranks, root = 0): rank vr collects the blocks of its subtree [vr,
    vr + m) -- contiguous in relative order, sized by the counts -- in scratch slot 0, its children's subtrees
    smallest first, then sends them to its parent in one message; leaves send their block from sendbuf.  The
    root receives ceil(lg P) messages holding n - c_root bytes, but a heavy block deep in the tree crosses
    every level on its way up, which the critical path counts.
    """
    rank = comm.rank
    node = _node(tuple(counts), root, rank)
    if node.vr and not node.children:  # a leaf
        comm.Send(sendbuf, node.parent)
        return
    if node.vr:
        tmp = comm.scratch(node.size, sendbuf.dtype, 0)
        np.copyto(tmp[:counts[rank]], sendbuf)
    else:
        own = recvbuf[node.root_offset:node.root_offset + counts[root]]
        if root == 0:  # relative order is rank order: collect in recvbuf itself
            tmp = recvbuf
            if not is_in_place(sendbuf):
                np.copyto(own, sendbuf)
        else:
            tmp = comm.scratch(node.total, recvbuf.dtype, 0)
            np.copyto(tmp[:counts[root]], own if is_in_place(sendbuf) else sendbuf)
    for child, off, n in node.children:
        comm.Recv(tmp[off:off + n], child)
    if node.vr:
        comm.Send(tmp, node.parent)
    elif root:  # relative order starts at the root's block: rotate into rank order
        split = node.total - node.root_offset
        np.copyto(recvbuf[node.root_offset:], tmp[:split])
        np.copyto(recvbuf[:node.root_offset], tmp[split:])


@register(
    "scatterv",
    "linear",
    cost=_rooted_direct_cost,
    formula="(P-1) a + (n - c_root) b",
    source="flat tree, as MPICH MPIR_Scatterv_allcomm_linear / Open MPI ompi_coll_base_scatterv_intra_basic_linear",
)
def scatterv_linear(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """Flat-tree scatterv: the root sends each rank its block directly, all sends posted at once."""
    run_plan(comm, scatterv_linear_plan(comm, sendbuf, recvbuf, counts, root))


def scatterv_linear_plan(comm, sendbuf, recvbuf, counts, root: int = 0) -> Plan:
    """`scatterv_linear`'s one step (`ccbench.algorithms.steps`): a receive from the root, or at the root P-1 sends
    after a prologue that copies its own block into recvbuf."""
    P, rank = comm.size, comm.rank
    if rank != root:
        return Plan(None, (((), ((recvbuf, root, 0),), None),))
    d = _offsets(tuple(counts))
    own = sendbuf[d[root]:d[root + 1]]
    sends = tuple((sendbuf[d[t]:d[t + 1]], t, 0) for t in ((root + i) % P for i in range(1, P)))
    return Plan(None if is_in_place(recvbuf) else lambda: np.copyto(recvbuf, own),
                ((sends, (), None),) if sends else ())


@register(
    "scatterv",
    "binomial",
    cost=partial(_tree_cost, gather=False),
    formula="ceil(lg P) a + (n - c_root) b at the root; critical path from the tree, enumerated",
    source=_THAKUR + " (MPICH MPIR_Scatter_intra_binomial's tree) with each subtree's own counts; trees for "
           "irregular scatters: Traff, 'Hierarchical gather/scatter algorithms with graceful degradation', IPDPS 2004",
)
def scatterv_binomial(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """Binomial-tree scatterv: each rank splits the subtree it received among its children, largest first.

    The binomial scatter's tree (relative ranks): rank vr receives its subtree's blocks from its parent (a leaf
    straight into recvbuf, others into scratch slot 0), sends each child the blocks of that child's subtree,
    largest subtree first, and keeps its own block.  The root first rotates sendbuf into relative order (rank 0
    sends straight from it).
    """
    rank = comm.rank
    node = _node(tuple(counts), root, rank)
    if node.vr:
        if not node.children:  # a leaf
            comm.Recv(recvbuf, node.parent)
            return
        tmp = comm.scratch(node.size, recvbuf.dtype, 0)
        comm.Recv(tmp, node.parent)
    elif root == 0:
        tmp = sendbuf
    else:
        tmp = comm.scratch(node.total, sendbuf.dtype, 0)
        split = node.total - node.root_offset
        np.copyto(tmp[:split], sendbuf[node.root_offset:])
        np.copyto(tmp[split:], sendbuf[:node.root_offset])
    for child, off, n in reversed(node.children):
        comm.Send(tmp[off:off + n], child)
    if not is_in_place(recvbuf):
        np.copyto(recvbuf, tmp[:counts[rank]])


# -- reduce_scatterv --------------------------------------------------------------------------


def _rs_pairwise_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    """In round k rank r sends c_(r+k) and takes (and reduces) c_r, a step of max(c_(r+k), c_r): the rank of the
    largest block pays c_max every round, (P-1) c_max, and no rank pays more.  No chain is longer either: a round
    ends by c_max after the last at the latest, so the critical path is at most (P-1) c_max too."""
    top = float((P - 1) * int(_blocks(P, nbytes, counts, itemsize).max())) if P > 1 else 0.0
    return Cost(P - 1, top, top)


@register(
    "reduce_scatterv",
    "pairwise",
    cost=_rs_pairwise_cost,
    formula="(P-1) a + (P-1) max_r c_r b + (P-1) max_r c_r g (the rank of the largest block takes it every round)",
    source=_THAKUR + ", section 4.4 (MPICH MPIR_Reduce_scatter_intra_pairwise)",
    additions=lambda P: P - 1,  # each block collects the P - 1 others one after another
)
def reduce_scatterv_pairwise(comm, sendbuf, recvbuf, counts, op="sum") -> None:
    """Pairwise-exchange reduce_scatterv: in round k rank r sends its part of block r+k to rank r+k and reduces
    rank r-k's part of its own block into its result.

    P-1 rounds, each one Sendrecv and one local reduction of c_r bytes (Thakur et al. 2005, section 4.4, as
    MPICH's MPI_Reduce_scatter does it for long messages).  In place the input is the whole of recvbuf, the
    result is reduced where the rank's own block lies and moved to the front at the end.
    """
    run_plan(comm, reduce_scatterv_pairwise_plan(comm, sendbuf, recvbuf, counts, op))


def reduce_scatterv_pairwise_plan(comm, sendbuf, recvbuf, counts, op="sum") -> Plan:
    """`reduce_scatterv_pairwise`'s rounds as steps (`ccbench.algorithms.steps`): one Sendrecv's messages and a
    reduction into the result each, after a prologue that starts the result from this rank's own part; in place
    an epilogue moves it to the front.  Every round runs, blocks of zero elements too: another rank's block may
    not be empty."""
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    in_place = is_in_place(sendbuf)
    d = _offsets(tuple(counts))
    data = recvbuf if in_place else sendbuf
    c = d[rank + 1] - d[rank]
    mine = data[d[rank]:d[rank + 1]]
    acc = mine if in_place else recvbuf
    tmp = comm.scratch(c, data.dtype)
    steps = []
    for i in range(1, P):
        dst, src = (rank + i) % P, (rank - i) % P
        steps.append((((data[d[dst]:d[dst + 1]], dst, 0),), ((tmp, src, 0),), (ufunc, tmp, acc)))
    return Plan(None if in_place else lambda: np.copyto(acc, mine), tuple(steps),
                (lambda: np.copyto(recvbuf[:c], acc)) if in_place and d[rank] else None)


def _rs_ring_cost(P: int, nbytes: int, counts: str = "uniform", itemsize: int = 1) -> Cost:
    c = _blocks(P, nbytes, counts, itemsize)  # round k: rank r sends block r-k, takes and reduces block r-k-1
    left = np.roll(c, 1)
    return _ring(np.maximum(c, left), int(c.sum()) - left)


@register(
    "reduce_scatterv",
    "ring",
    cost=_rs_ring_cost,
    formula="(P-1) a + max_r (W - w_r) b + max_r (n - c_(r-1)) g, w_d = max(c_d, c_(d-1)), W = sum_d w_d; "
            "critical path up to (P-1) max c b (the largest block crosses P-1 links in turn)",
    source="the reduce-scatter half of the ring allreduce (Patarasuk & Yuan 2009; MPICH MPIR_Allreduce_intra_ring, "
           "whose blocks are uneven where P does not divide the count)",
    additions=lambda P: P - 1,  # a block is added to once per hop round the ring
)
def reduce_scatterv_ring(comm, sendbuf, recvbuf, counts, op="sum") -> None:
    """Ring reduce_scatterv: partial sums travel round the ring, each rank adding its part as they pass.

    The input is copied to scratch slot 1.  In round k (k = 1..P-1) rank r sends its partial sum of block r-k
    (its own part in round 1) to rank r+1, receives the partial sum of block r-k-1 from rank r-1 (into scratch
    slot 0) and adds its own part to it.  After P-1 rounds block r has passed every rank and lies complete on
    rank r.  A round lasts as long as the largest block on the move, so a heavy block slows P-1 rounds.
    """
    run_plan(comm, reduce_scatterv_ring_plan(comm, sendbuf, recvbuf, counts, op))


def reduce_scatterv_ring_plan(comm, sendbuf, recvbuf, counts, op="sum") -> Plan:
    """`reduce_scatterv_ring`'s rounds as steps (`ccbench.algorithms.steps`): one Sendrecv's messages and the
    addition of this rank's part each, after a prologue that copies the input to scratch; an epilogue moves the
    rank's finished block into recvbuf."""
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    d = _offsets(tuple(counts))
    data = recvbuf if is_in_place(sendbuf) else sendbuf
    work = comm.scratch(d[-1], data.dtype, 1)
    tmp = comm.scratch(max(counts, default=0), data.dtype, 0)
    left, right = (rank - 1) % P, (rank + 1) % P
    steps = []
    for k in range(1, P):
        s, t = (rank - k) % P, (rank - k - 1) % P
        incoming = tmp[:d[t + 1] - d[t]]
        steps.append((((work[d[s]:d[s + 1]], right, 0),), ((incoming, left, 0),),
                       (ufunc, incoming, work[d[t]:d[t + 1]])))
    return Plan(lambda: np.copyto(work, data[:d[-1]]), tuple(steps),
                lambda: np.copyto(recvbuf[:d[rank + 1] - d[rank]], work[d[rank]:d[rank + 1]]))


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("allgatherv", "ring", allgatherv_ring_plan, what="Ring allgatherv")
register_forms("alltoallv", "pairwise", alltoallv_pairwise_plan, what="Pairwise-exchange alltoallv")
register_forms("gatherv", "linear", gatherv_linear_plan, what="Flat-tree gatherv")
register_forms("scatterv", "linear", scatterv_linear_plan, what="Flat-tree scatterv")
register_forms("reduce_scatterv", "pairwise", reduce_scatterv_pairwise_plan, what="Pairwise-exchange reduce_scatterv")
register_forms("reduce_scatterv", "ring", reduce_scatterv_ring_plan, what="Ring reduce_scatterv")
