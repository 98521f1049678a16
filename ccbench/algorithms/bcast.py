"""Hand-written broadcasts: binomial tree, linear, scatter + ring allgather, pipelined chain.

Every function has the signature of mpi4py's ``comm.Bcast(buf, root)``:
``fn(comm, buf, root=0)``, with `comm` a counting communicator (`ccbench.algorithms.p2p`).
Ranks are renumbered relative to the root, ``vr = (rank - root) mod P``, so that every
schedule can be written as if the root were rank 0.  None of these functions uses
``comm.scratch``: other algorithms (binomial-reduce + binomial-bcast allreduce) may call
`binomial` while holding scratch arrays of their own.
"""

from functools import lru_cache

from ccbench.algorithms.p2p import block_bounds
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms

__all__ = ["SEGMENT_BYTES", "binomial", "binomial_plan", "linear", "pipelined_chain", "scatter_allgather"]

#: Segment size of `pipelined_chain` in bytes.  A multiple of 8, so that every dtype's
#: segment holds a whole number of elements and the segment count depends on bytes only.
#: 64 KiB gives 16 segments for a 1 MiB broadcast, enough to fill a pipeline of a few
#: ranks, while keeping the per-segment Python overhead (a few microseconds) small
#: against the time to move a segment.
SEGMENT_BYTES = 64 * 1024

_THAKUR = (
    "Thakur, Rabenseifner & Gropp 2005, 'Optimization of Collective Communication "
    "Operations in MPICH', IJHPCA 19(1)"
)


def _ceil_lg(P: int) -> int:
    """ceil(log2 P) for P >= 1: the number of rounds of a binomial tree."""
    return (P - 1).bit_length()


@lru_cache(maxsize=64)
def _bounds(count: int, P: int) -> tuple[int, ...]:
    """Offsets of the P near-equal blocks of a `count`-element buffer (cached)."""
    return tuple(block_bounds(count, P))


# -- binomial tree -------------------------------------------------------------------------


def _binomial_cost(P: int, nbytes: int) -> Cost:
    lg = _ceil_lg(P)
    return Cost(lg, lg * nbytes)


@register(
    "bcast",
    "binomial",
    cost=_binomial_cost,
    formula="ceil(lg P) a + ceil(lg P) n b",
    source=_THAKUR + " (MPICH MPIR_Bcast_intra_binomial)",
)
def binomial(comm, buf, root: int = 0) -> None:
    """Binomial-tree broadcast: ceil(lg P) rounds, the number of holders doubling each round.

    Schedule (relative ranks, root = 0).  In round k (k = 0, 1, ...) every rank that
    already holds the data sends the whole buffer to the rank 2^k above it, if it exists.
    Read the other way round: rank vr receives once, from vr minus its lowest set bit
    (its parent), and then sends to vr + 2^j for every 2^j below that bit (its children),
    largest subtree first so the far branches start early.  For P = 8:

        round 0: 0->4      round 1: 0->2, 4->6      round 2: 0->1, 2->3, 4->5, 6->7

    Any P works without change: children that would be >= P are simply skipped.  The root
    sends ceil(lg P) full messages, which is the cost: ceil(lg P) a + ceil(lg P) n b.
    The whole message crosses lg P hops, so it suits short messages (Thakur et al.
    2005).  Uses no scratch memory.
    """
    P, rank = comm.size, comm.rank
    vr = (rank - root) % P
    # receive from the parent: vr with its lowest set bit cleared
    mask = 1
    while mask < P:
        if vr & mask:
            comm.Recv(buf, (rank - mask) % P)
            break
        mask <<= 1
    # send to the children vr + mask, for every mask below the bit just found
    mask >>= 1
    while mask:
        if vr + mask < P:
            comm.Send(buf, (rank + mask) % P)
        mask >>= 1


# -- linear --------------------------------------------------------------------------------


def _linear_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, (P - 1) * nbytes)


@register(
    "bcast",
    "linear",
    cost=_linear_cost,
    formula="(P-1) a + (P-1) n b",
    source="flat tree, as Open MPI's ompi_coll_base_bcast_intra_basic_linear",
)
def linear(comm, buf, root: int = 0) -> None:
    """Flat-tree broadcast: the root sends the whole buffer to every other rank.

    Schedule: the root posts P-1 nonblocking sends (to root+1, root+2, ... so that the
    order is the same for every root) and waits for all of them; every other rank posts
    one receive from the root.  All the traffic leaves through the root's one link, so
    under the full-duplex model the batch costs (P-1) a + (P-1) n b.  It is the baseline
    the tree algorithms improve on.
    """
    P, rank = comm.size, comm.rank
    if P == 1:
        return
    if rank == root:
        reqs = [comm.Isend(buf, (root + i) % P) for i in range(1, P)]
        comm.Waitall(reqs)
    else:
        comm.Recv(buf, root)


# -- scatter + ring allgather (van de Geijn) -------------------------------------------------


def _scatter_allgather_cost(P: int, nbytes: int) -> Cost:
    return Cost(_ceil_lg(P) + P - 1, 2 * nbytes * (P - 1) / P)


@register(
    "bcast",
    "scatter_allgather",
    cost=_scatter_allgather_cost,
    formula="(ceil(lg P) + P-1) a + 2n(P-1)/P b",
    source=(
        "van de Geijn (Barnett, Gupta, Payne, Shuler, van de Geijn & Watts 1994); "
        + _THAKUR
        + " (MPICH MPIR_Bcast_intra_scatter_ring_allgather); ring as Patarasuk & Yuan 2009"
    ),
)
def scatter_allgather(comm, buf, root: int = 0) -> None:
    """Van de Geijn broadcast: binomial scatter of P blocks, then a ring allgather.

    The buffer is cut into P near-equal blocks (the first count % P get one element
    more); block j belongs to relative rank j.

    1. Binomial scatter (ceil(lg P) rounds).  The tree is the one of `binomial`, but a
       rank forwards to each child only the blocks of that child's subtree: rank vr
       receives blocks [vr, vr + lowbit(vr)) (clipped at P) from its parent, and sends
       blocks [c, c + m) to child c = vr + m.  The root sends (P-1)/P of the buffer in
       total, each block once.
    2. Ring allgather (P-1 rounds; Patarasuk & Yuan 2009).  In round i every rank sends
       the block it got in the previous round (its own block first) to its right
       neighbour and receives a new one from its left neighbour, with one Sendrecv.
       After P-1 rounds each rank holds every block.

    Cost (root, the busiest rank): (ceil(lg P) + P - 1) a + 2 n (P-1)/P b.  Twice the
    optimal bandwidth term instead of lg P times: the choice for long messages (Thakur
    et al. 2005).  Works for every P; blocks may be empty when count < P (they still
    travel, as zero-byte messages).  Data moves in place in `buf`.
    """
    P, rank = comm.size, comm.rank
    if P == 1:
        return
    vr = (rank - root) % P
    b = _bounds(buf.size, P)
    # 1. binomial scatter: receive my subtree's blocks, hand each child its subtree's
    mask = 1
    while mask < P:
        if vr & mask:
            comm.Recv(buf[b[vr]:b[min(vr + mask, P)]], (rank - mask) % P)
            break
        mask <<= 1
    mask >>= 1
    while mask:
        child = vr + mask
        if child < P:
            comm.Send(buf[b[child]:b[min(child + mask, P)]], (rank + mask) % P)
        mask >>= 1
    # 2. ring allgather: pass block j right, receive block j-1 from the left
    left, right = (rank - 1) % P, (rank + 1) % P
    j = vr
    for _ in range(P - 1):
        jn = j - 1 if j else P - 1
        comm.Sendrecv(buf[b[j]:b[j + 1]], right, 0, buf[b[jn]:b[jn + 1]], left, 0)
        j = jn


# -- pipelined chain -----------------------------------------------------------------------


def _nsegments(nbytes: int, seg_bytes: int) -> int:
    """Segments of a message: ceil(nbytes / seg_bytes), and one (empty) for nbytes = 0."""
    return max(1, -(-nbytes // seg_bytes))


def _pipelined_chain_cost(P: int, nbytes: int) -> Cost:
    """Busiest rank's counts, and the pipeline's critical path of P-2+m rounds.

    In round t (1-based) segment k crosses hop t-k+1 of the P-1 hops, so the last
    segment reaches the last rank in round P-2+m.  Every round moves a full segment S
    except the final one, which moves only the last (shorter) segment; with one segment
    every round moves all n bytes.
    """
    if P == 1:
        return Cost(0, 0)
    m = _nsegments(nbytes, SEGMENT_BYTES)
    last = nbytes - (m - 1) * SEGMENT_BYTES
    path = Cost(P - 2 + m, (P - 1) * nbytes if m == 1 else (P - 3 + m) * SEGMENT_BYTES + last)
    if P == 2:
        return Cost(m, nbytes)
    return Cost(m + 1, nbytes + min(nbytes, SEGMENT_BYTES), critical=path)


@register(
    "bcast",
    "pipelined_chain",
    cost=_pipelined_chain_cost,
    formula=(
        "per rank, m = ceil(n/S) segments of S = SEGMENT_BYTES (64 KiB): "
        "(m+1) a + (n + min(n, S)) b (P = 2: m a + n b); "
        "critical path (P-2+m) a + ((P-3+m) S + n - (m-1) S) b, about (P-2+m)(a + S b)"
    ),
    source="segmented chain (pipeline) broadcast, as Open MPI's ompi_coll_base_bcast_intra_chain",
)
def pipelined_chain(comm, buf, root: int = 0) -> None:
    """Pipelined chain broadcast: segments flow down the chain root -> root+1 -> ... .

    The buffer is cut into m segments of SEGMENT_BYTES (the last one shorter).  Relative
    rank vr receives from vr-1 and forwards to vr+1; segments follow each other down the
    chain, so all links work at once once the pipeline is full:

        root:        send s0, send s1, ..., send s(m-1)
        middle rank: recv s0; then (send s(k-1) | recv s(k)) for k = 1..m-1, each one
                     Sendrecv; then send s(m-1)
        last rank:   recv s0, recv s1, ..., recv s(m-1)

    The last segment reaches the last rank after P-2+m segment times, so the broadcast
    takes about (P-2+m)(a + S b): for m >> P this approaches n b, the bandwidth bound,
    which no tree reaches; the price is latency linear in P.  The best S balances the
    two (about sqrt(n a / ((P-2) b))); the fixed default is documented at SEGMENT_BYTES.

    Counted per rank (what `cost` reports, as for every algorithm): a middle rank makes
    m+1 steps and moves n + min(n, S) bytes, since its Sendrecvs overlap sending one
    segment with receiving the next.
    """
    P, rank = comm.size, comm.rank
    if P == 1:
        return
    vr = (rank - root) % P
    count = buf.size
    seg = max(1, SEGMENT_BYTES // buf.itemsize)
    end = _nsegments(count, seg) * seg  # one empty segment when count == 0
    prev, nxt = (rank - 1) % P, (rank + 1) % P
    if vr == 0:
        for lo in range(0, end, seg):
            comm.Send(buf[lo:lo + seg], nxt)
    elif vr == P - 1:
        for lo in range(0, end, seg):
            comm.Recv(buf[lo:lo + seg], prev)
    else:
        comm.Recv(buf[:seg], prev)
        for lo in range(seg, end, seg):
            comm.Sendrecv(buf[lo - seg:lo], nxt, 0, buf[lo:lo + seg], prev, 0)
        comm.Send(buf[end - seg:end], nxt)


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------


def binomial_plan(comm, buf, root: int = 0) -> Plan:
    """`binomial`'s receive from the parent and sends to the children on this buffer, each a step of its own as in
    `binomial` (`ccbench.algorithms.steps`)."""
    P, rank = comm.size, comm.rank
    vr, mask, steps = (rank - root) % P, 1, []
    while mask < P:
        if vr & mask:
            steps.append(((), ((buf, (rank - mask) % P, 0),), None))
            break
        mask <<= 1
    mask >>= 1
    while mask:
        if vr + mask < P:
            steps.append((((buf, (rank + mask) % P, 0),), (), None))
        mask >>= 1
    return Plan(None, tuple(steps))


register_forms("bcast", "binomial", binomial_plan, what="Binomial-tree broadcast",
               source=_THAKUR + " (MPICH MPIR_Bcast_intra_binomial)", cost=_binomial_cost,
               formula="ceil(lg P) a + ceil(lg P) n b   (binomial's messages)")
