"""Hand-written all-to-alls: pairwise exchange, Bruck, linear.

Every function has the signature of mpi4py's ``comm.Alltoall(sendbuf, recvbuf)``:
``fn(comm, sendbuf, recvbuf)``.  Both buffers hold P blocks of ``count`` elements: block
j of rank i's input goes to block i of rank j's output.  In place (``sendbuf`` is the
marker) `recvbuf` holds the input and receives the output.  Sizes follow nccl-tests:
n = P * block bytes, the send buffer of one rank.
"""

from functools import lru_cache

import numpy as np

from ccbench.algorithms.p2p import is_in_place
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_plan

__all__ = ["bruck", "linear", "pairwise", "pairwise_plan"]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp 2005, 'Optimization of Collective Communication "
    "Operations in MPICH', IJHPCA 19(1)"
)


def _input(comm, sendbuf, recvbuf: np.ndarray) -> np.ndarray:
    """The buffer to send from: sendbuf, or in place a scratch copy (slot 0) of recvbuf.

    Out of place the rank's own block is copied to its output slot here; in place it is
    already there (block r of rank r stays put).
    """
    if is_in_place(sendbuf):
        src = comm.scratch(recvbuf.size, recvbuf.dtype, 0)
        np.copyto(src, recvbuf)
        return src
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    lo, hi = rank * count, (rank + 1) * count
    np.copyto(recvbuf[lo:hi], sendbuf[lo:hi])
    return sendbuf


def _spread_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, nbytes * (P - 1) / P)


# -- pairwise exchange ---------------------------------------------------------------------


@register(
    "alltoall",
    "pairwise",
    cost=_spread_cost,
    formula="(P-1) a + n(P-1)/P b",
    source=_THAKUR + " (MPICH MPIR_Alltoall_intra_pairwise)",
)
def pairwise(comm, sendbuf, recvbuf) -> None:
    """Pairwise-exchange all-to-all: P-1 rounds of one Sendrecv each.

    Schedule: in round i (i = 1..P-1) rank r sends its block for rank dst and receives
    the block from rank src, with one Sendrecv.  If P is a power of two the partners are
    dst = src = r XOR i, so the ranks pair up and each round is a perfect matching of
    exchanges; otherwise dst = r+i and src = r-i (mod P), a shift by i.  Either way every
    rank meets every other rank exactly once.  Cost (P-1) a + n(P-1)/P b: the bandwidth
    lower bound, with a latency linear in P, so it is the long-message algorithm (Thakur
    et al. 2005).  In place the input is first copied to scratch slot 0.
    """
    run_plan(comm, pairwise_plan(comm, sendbuf, recvbuf))


def pairwise_plan(comm, sendbuf, recvbuf) -> Plan:
    """`pairwise`'s rounds as steps (`ccbench.algorithms.steps`), one Sendrecv's messages each; the prologue does
    what `_input` does (in place, the input copied to scratch slot 0)."""
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    if is_in_place(sendbuf):
        src_buf = comm.scratch(recvbuf.size, recvbuf.dtype, 0)
        prologue = lambda: np.copyto(src_buf, recvbuf)  # noqa: E731
    else:
        src_buf, own = sendbuf, slice(rank * count, (rank + 1) * count)
        prologue = lambda: np.copyto(recvbuf[own], sendbuf[own])  # noqa: E731
    xor, steps = P & (P - 1) == 0, []
    for i in range(1, P):
        if xor:
            src = dst = rank ^ i
        else:
            src, dst = (rank - i) % P, (rank + i) % P
        steps.append((((src_buf[dst * count:(dst + 1) * count], dst, 0),),
                      ((recvbuf[src * count:(src + 1) * count], src, 0),), None))
    return Plan(prologue, tuple(steps))


# -- Bruck ---------------------------------------------------------------------------------


def _popcount_sum(P: int) -> int:
    """Sum of the set bits of 0..P-1: the blocks a rank sends over all Bruck rounds."""
    return sum(bin(i).count("1") for i in range(P))


def _bruck_cost(P: int, nbytes: int) -> Cost:
    return Cost((P - 1).bit_length(), nbytes / P * _popcount_sum(P))


@lru_cache(maxsize=64)
def _bruck_rounds(P: int) -> tuple:
    """For each round k: (distance 2^k, positions whose bit k is set as an index array)."""
    rounds = []
    d = 1
    while d < P:
        idx = np.array([i for i in range(P) if i & d], dtype=np.intp)
        idx.flags.writeable = False
        rounds.append((d, idx))
        d <<= 1
    return tuple(rounds)


@register(
    "alltoall",
    "bruck",
    cost=_bruck_cost,
    formula=(
        "ceil(lg P) a + (n/P) S(P) b, S(P) = sum of popcount(i) for i < P "
        "(= (n/2) lg P b when P is a power of two)"
    ),
    source=(
        "Bruck, Ho, Kipnis, Upfal & Weathersby 1997, IEEE TPDS 8(11); "
        + _THAKUR + " (MPICH MPIR_Alltoall_intra_brucks)"
    ),
)
def bruck(comm, sendbuf, recvbuf) -> None:
    """Bruck all-to-all: ceil(lg P) rounds, each moving about half the data, for any P.

    1. Local rotation: position i of a scratch array gets the block for rank r+i, so a
       block's position says how far (mod P) it still has to travel.
    2. For each bit k (distance d = 2^k < P): every block whose position has bit k set
       goes d ranks up -- pack those blocks, send them to rank r+d, receive the same
       positions from rank r-d and unpack them where they were.  A block at position i
       travels sum of its bits = i ranks in total, so after the last round position i
       of rank r holds the block that rank r-i sent to r.
    3. Inverse rotation: output block r-i (mod P) = position i.

    Rounds: ceil(lg P).  Bytes: each round moves the blocks with bit k set, so a rank
    sends (n/P) times the number of set bits of 0..P-1 in total, (n/2) lg P when P is a
    power of two: fewer messages than pairwise exchange for more bytes, the short-message
    choice (Bruck et al. 1997; Thakur et al. 2005).  MPICH describes the blocks with
    derived datatypes; here they are packed into scratch slots 1 and 2 with
    index arrays precomputed per P.  Scratch slot 0 holds the rotated blocks.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    data = recvbuf if is_in_place(sendbuf) else sendbuf
    tmp = comm.scratch(P * count, recvbuf.dtype, 0).reshape(P, count)
    src2d = data.reshape(P, count)
    # 1. rotate up by rank: tmp[i] = block rank+i
    np.copyto(tmp[:P - rank], src2d[rank:])
    np.copyto(tmp[P - rank:], src2d[:rank])
    half = P // 2
    spack = comm.scratch(half * count, recvbuf.dtype, 1).reshape(half, count)
    rpack = comm.scratch(half * count, recvbuf.dtype, 2).reshape(half, count)
    # 2. one round per bit: blocks with bit k set move 2^k ranks up
    for d, idx in _bruck_rounds(P):
        nb = idx.size
        np.take(tmp, idx, axis=0, out=spack[:nb], mode="clip")
        comm.Sendrecv(spack[:nb].reshape(-1), (rank + d) % P, 0,
                      rpack[:nb].reshape(-1), (rank - d) % P, 0)
        tmp[idx] = rpack[:nb]
    # 3. output block j = position (rank - j) mod P: the blocks in reverse order
    out = recvbuf.reshape(P, count)
    np.copyto(out[:rank + 1], tmp[rank::-1])
    np.copyto(out[rank + 1:], tmp[:rank:-1])


# -- linear --------------------------------------------------------------------------------


@register(
    "alltoall",
    "linear",
    cost=_spread_cost,
    formula="(P-1) a + n(P-1)/P b",
    source="all Isend/Irecv posted at once, one Waitall (MPICH MPIR_Alltoall_intra_scattered "
    "with an unbounded batch)",
)
def linear(comm, sendbuf, recvbuf) -> None:
    """Direct all-to-all: post every receive and send at once, then one Waitall.

    Schedule: rank r posts P-1 nonblocking receives (from r-i, i = 1..P-1) and P-1
    nonblocking sends (to r+i) and waits for them all.  The spread-out order makes the
    i-th message of every rank go to a different destination, as MPICH's "scattered"
    algorithm does (which posts them in batches; here the batch is the whole of them).
    Under the full-duplex model: (P-1) a + n(P-1)/P b.  It hands the whole schedule to the
    MPI library and the network, which is often good for medium sizes, but floods a rank
    with 2(P-1) outstanding requests.  In place the input is first copied to scratch slot 0.
    """
    P, rank = comm.size, comm.rank
    count = recvbuf.size // P
    src_buf = _input(comm, sendbuf, recvbuf)
    if P == 1:
        return
    reqs = []
    for i in range(1, P):
        src = (rank - i) % P
        reqs.append(comm.Irecv(recvbuf[src * count:(src + 1) * count], src))
    for i in range(1, P):
        dst = (rank + i) % P
        reqs.append(comm.Isend(src_buf[dst * count:(dst + 1) * count], dst))
    comm.Waitall(reqs)


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("alltoall", "pairwise", pairwise_plan, what="Pairwise-exchange all-to-all")
