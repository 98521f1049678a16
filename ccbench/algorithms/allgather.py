"""Hand-written allgathers: ring, recursive doubling, Bruck, linear.

Every function has the signature of mpi4py's ``comm.Allgather(sendbuf, recvbuf)``:
``fn(comm, sendbuf, recvbuf)``.  `recvbuf` holds P blocks of ``count`` elements, block r
coming from rank r.  In place (``sendbuf`` is the marker: MPI.IN_PLACE, or None on the
simulator) a rank's own block is already in its slot of `recvbuf`.  Sizes follow
nccl-tests: n = P * block bytes, the whole gathered buffer.
"""

from functools import lru_cache

import numpy as np

from ccbench.algorithms.p2p import critical_path, is_in_place
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms

__all__ = ["bruck", "linear", "recursive_doubling", "ring", "ring_plan"]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp 2005, 'Optimization of Collective Communication "
    "Operations in MPICH', IJHPCA 19(1)"
)


def _ceil_lg(P: int) -> int:
    """ceil(log2 P) for P >= 1."""
    return (P - 1).bit_length()


def _own_block(sendbuf, recvbuf: np.ndarray, rank: int, count: int) -> None:
    """Out of place, copy this rank's contribution into its slot of recvbuf."""
    if not is_in_place(sendbuf):
        np.copyto(recvbuf[rank * count:(rank + 1) * count], sendbuf)


# -- ring ----------------------------------------------------------------------------------


def _ring_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, nbytes * (P - 1) / P)


@register(
    "allgather",
    "ring",
    cost=_ring_cost,
    formula="(P-1) a + n(P-1)/P b",
    source=_THAKUR + " (MPICH MPIR_Allgather_intra_ring); Patarasuk & Yuan 2009",
)
def ring(comm, sendbuf, recvbuf) -> None:
    """Ring allgather: P-1 rounds, each rank passes one block to its right neighbour.

    Schedule: in round i (i = 1..P-1) rank r sends block r-i+1 (its own block in round 1,
    afterwards the block it received in the round before) to rank r+1, and receives block
    r-i from rank r-1, both with one Sendrecv (indices mod P).  Every block travels the
    whole ring, one hop per round, and every link carries one block per round, so the
    bandwidth term n(P-1)/P is optimal (Patarasuk & Yuan 2009 prove the ring
    bandwidth-optimal); the P-1 latency terms make it the choice for long messages
    (Thakur et al. 2005).  Any P works.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    _own_block(sendbuf, recvbuf, rank, count)
    left, right = (rank - 1) % P, (rank + 1) % P
    j = rank
    for _ in range(P - 1):
        jn = j - 1 if j else P - 1
        comm.Sendrecv(recvbuf[j * count:(j + 1) * count], right, 0,
                      recvbuf[jn * count:(jn + 1) * count], left, 0)
        j = jn


def ring_plan(comm, sendbuf, recvbuf) -> Plan:
    """`ring`'s P-1 steps on these buffers (`ccbench.algorithms.steps`), its own block copied in by the prologue."""
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    left, right, j, steps = (rank - 1) % P, (rank + 1) % P, rank, []
    for _ in range(P - 1):
        jn = j - 1 if j else P - 1
        steps.append((((recvbuf[j * count:(j + 1) * count], right, 0),),
                      ((recvbuf[jn * count:(jn + 1) * count], left, 0),), None))
        j = jn
    return Plan(lambda: _own_block(sendbuf, recvbuf, rank, count), tuple(steps))


# -- recursive doubling --------------------------------------------------------------------

_SENDRECV, _SEND, _RECV = 0, 1, 2


@lru_cache(maxsize=1024)
def _rd_plan(P: int, rank: int) -> tuple:
    """The recursive-doubling schedule of `rank`, in whole blocks.

    A tuple of (kind, peer, send_first, send_nblocks, recv_first, recv_nblocks); a plain
    send fills only the send fields, a plain receive only the receive fields.  This is
    MPICH's MPIR_Allgather_intra_recursive_doubling, with the block counts that MPICH
    reads from MPI_Status computed in advance (they are known: a subtree's data).
    """
    ops = []
    mask, i = 1, 0
    while mask < P:
        dst = rank ^ mask
        my_root = rank >> i << i  # first rank of my subtree of size `mask`
        dst_root = dst >> i << i  # first rank of the partner's subtree
        if dst < P:
            ops.append((_SENDRECV, dst, my_root, min(mask, P - my_root),
                        dst_root, min(mask, P - dst_root)))
        if dst_root + mask > P:
            # The partner subtree is cut off by P, so only the first `have` ranks of my
            # subtree had a partner; they pass its data on to the rest by recursive halving.
            have = P - my_root - mask
            first = my_root + mask  # that data: blocks [first, P)
            k, half = i, mask >> 1
            while half and have > 0:
                peer = rank ^ half
                tree_root = rank >> k << k
                line = tree_root + have  # ranks below `line` in this tree hold the data
                if rank < line <= peer:
                    ops.append((_SEND, peer, first, have, 0, 0))
                elif peer < line <= rank:
                    ops.append((_RECV, peer, 0, 0, first, have))
                half >>= 1
                k -= 1
        mask <<= 1
        i += 1
    return tuple(ops)


@lru_cache(maxsize=256)
def _rd_busiest(P: int) -> tuple[int, int]:
    """(steps, blocks) of the busiest rank: the same at every size (a 16,384-rank predict asks at 8 sizes)."""
    steps = blocks = 0
    for rank in range(P):
        plan = _rd_plan(P, rank)
        steps = max(steps, len(plan))
        blocks = max(blocks, sum(max(op[3], op[5]) for op in plan))
    return steps, blocks


def _rd_cost(P: int, nbytes: int) -> Cost:
    """Busiest rank's counts; for P not a power of two also the critical path, where the
    forwarding to ranks whose partner is missing chains behind the exchanges."""
    steps, blocks = _rd_busiest(P)
    cost = Cost(steps, blocks * nbytes / P)
    if P & (P - 1) == 0:
        return cost
    alpha, beta_blocks = _rd_critical(P)
    if (alpha, beta_blocks) == (steps, blocks):
        return cost
    return cost._replace(critical=Cost(alpha, beta_blocks * nbytes / P))


@lru_cache(maxsize=256)
def _rd_critical(P: int) -> tuple[float, float]:
    """(steps, blocks) along the critical path of the recursive-doubling schedule."""
    plans = []
    for rank in range(P):
        batches = []
        for kind, peer, _, send_n, _, recv_n in _rd_plan(P, rank):
            sends = ((peer, send_n),) if kind in (_SENDRECV, _SEND) else ()
            recvs = ((peer, recv_n),) if kind in (_SENDRECV, _RECV) else ()
            batches.append((sends, recvs))
        plans.append(batches)
    return critical_path(plans)


@register(
    "allgather",
    "recursive_doubling",
    cost=_rd_cost,
    formula=(
        "P a power of two: lg P a + n(P-1)/P b; otherwise MPICH's recursive-halving "
        "patch-up inside cut-off subtrees: at most (2 floor(lg P) + 1) a and, for "
        "P < 1100, at most 2.25 n(P-1)/P b (exact counts enumerated from the schedule)"
    ),
    source=_THAKUR + " (MPICH MPIR_Allgather_intra_recursive_doubling)",
)
def recursive_doubling(comm, sendbuf, recvbuf) -> None:
    """Recursive-doubling allgather: lg P exchanges with partners at distance 1, 2, 4, ...

    Schedule for P a power of two: in round i (mask = 2^i) rank r exchanges with
    r XOR mask everything it holds.  Before the round r holds the blocks of its subtree
    (the 2^i ranks that agree with r above bit i), which is one contiguous range of
    recvbuf; after it, it also holds the partner's subtree, so the held range doubles
    every round.  Cost lg P a + n(P-1)/P b: latency of a tree, bandwidth of a ring
    (Thakur et al. 2005).

    Other P, as MPICH's code does it: in round i a rank whose partner r XOR mask is >= P
    skips the exchange.  Then, inside each subtree whose partner subtree was cut off by
    P, the ranks that did get the partner's data ("haves", the first P - first rank of
    the partner subtree of them) pass it to the ranks that did not ("have-nots") by
    recursive halving: at sub-steps mask/2, mask/4, ..., 1 a have sends to the rank that
    far above it if that one is a have-not.  The busiest rank then makes up to
    2 floor(lg P) + 1 steps instead of ceil(lg P), and moves up to about 2.25 times the
    bytes (at P = 5 and 9), so `cost` enumerates the schedule exactly rather
    than using a closed form.  MPICH itself selects this algorithm only for powers of two
    and marks this path experimental; Bruck's algorithm is its choice otherwise.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    _own_block(sendbuf, recvbuf, rank, count)
    for kind, peer, s0, sn, r0, rn in _rd_plan(P, rank):
        if kind == _SENDRECV:
            comm.Sendrecv(recvbuf[s0 * count:(s0 + sn) * count], peer, 0,
                          recvbuf[r0 * count:(r0 + rn) * count], peer, 0)
        elif kind == _SEND:
            comm.Send(recvbuf[s0 * count:(s0 + sn) * count], peer)
        else:
            comm.Recv(recvbuf[r0 * count:(r0 + rn) * count], peer)


# -- Bruck ---------------------------------------------------------------------------------


def _bruck_cost(P: int, nbytes: int) -> Cost:
    return Cost(_ceil_lg(P), nbytes * (P - 1) / P)


@register(
    "allgather",
    "bruck",
    cost=_bruck_cost,
    formula="ceil(lg P) a + n(P-1)/P b",
    source=(
        "Bruck, Ho, Kipnis, Upfal & Weathersby 1997, IEEE TPDS 8(11); "
        + _THAKUR + " (MPICH MPIR_Allgather_intra_brucks)"
    ),
)
def bruck(comm, sendbuf, recvbuf) -> None:
    """Bruck allgather: ceil(lg P) rounds for any P, then one local rotation.

    Work in a scratch buffer in which rank r keeps blocks r, r+1, r+2, ... (mod P), its
    own first.  In round k (distance d = 2^k, while d <= P/2) rank r sends everything
    it holds, d blocks, to rank r-d, and receives d blocks from rank r+d, which are
    exactly blocks r+d .. r+2d-1, appended after its own: the held prefix doubles.  If P
    is not a power of two a last round sends only the first P - 2^floor(lg P) blocks,
    which completes the prefix to all P blocks.  Finally the scratch buffer is rotated
    down by r blocks into recvbuf.

    Each rank receives every other block exactly once: ceil(lg P) a + n(P-1)/P b for
    every P, at the price of one local copy of n bytes (Bruck et al. 1997; Thakur et
    al. 2005).  Uses scratch slot 0.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    tmp = comm.scratch(P * count, recvbuf.dtype, 0)
    if is_in_place(sendbuf):
        np.copyto(tmp[:count], recvbuf[rank * count:(rank + 1) * count])
    else:
        np.copyto(tmp[:count], sendbuf)
    held = 1
    while held <= P // 2:
        n = held * count
        comm.Sendrecv(tmp[:n], (rank - held) % P, 0, tmp[n:2 * n], (rank + held) % P, 0)
        held *= 2
    rem = P - held
    if rem:
        n, m = held * count, rem * count
        comm.Sendrecv(tmp[:m], (rank - held) % P, 0, tmp[n:n + m], (rank + held) % P, 0)
    # tmp[i] is block rank+i: rotate it into place
    split = (P - rank) * count
    np.copyto(recvbuf[rank * count:], tmp[:split])
    np.copyto(recvbuf[:rank * count], tmp[split:])


# -- linear --------------------------------------------------------------------------------


def _linear_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, nbytes * (P - 1) / P)


@register(
    "allgather",
    "linear",
    cost=_linear_cost,
    formula="(P-1) a + n(P-1)/P b",
    source="direct exchange: all sends and receives posted at once (spread-out order)",
)
def linear(comm, sendbuf, recvbuf) -> None:
    """Direct allgather: every rank sends its block to every other rank, all at once.

    Schedule: rank r posts P-1 nonblocking receives (block r-i from rank r-i) and P-1
    nonblocking sends (its block to rank r+i), i = 1..P-1, then waits for all of them.
    The spread-out order (every rank talks to a different peer at position i) avoids all
    ranks hitting the same receiver first, as in MPICH's scattered all-to-all.  Under the
    full-duplex model the batch costs (P-1) a + n(P-1)/P b, like the ring, but it leaves
    the scheduling to the network and posts 2(P-1) requests per rank.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    _own_block(sendbuf, recvbuf, rank, count)
    if P == 1:
        return
    mine = recvbuf[rank * count:(rank + 1) * count]
    reqs = []
    for i in range(1, P):
        src = (rank - i) % P
        reqs.append(comm.Irecv(recvbuf[src * count:(src + 1) * count], src))
    for i in range(1, P):
        reqs.append(comm.Isend(mine, (rank + i) % P))
    comm.Waitall(reqs)


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("allgather", "ring", ring_plan, what="Ring allgather",
               source=_THAKUR + " (MPICH MPIR_Allgather_intra_ring); Patarasuk & Yuan 2009", cost=_ring_cost,
               formula="(P-1) a + n(P-1)/P b   (the ring's messages)")
