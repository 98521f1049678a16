"""Hand-written barrier: dissemination.

Signature of mpi4py's ``comm.Barrier()``: ``fn(comm)``.
"""

import numpy as np

from ccbench.algorithms.registry import Cost, register

__all__ = ["dissemination"]

_U8 = np.dtype(np.uint8)


def _dissemination_cost(P: int, nbytes: int) -> Cost:
    return Cost((P - 1).bit_length(), 0)


@register(
    "barrier",
    "dissemination",
    cost=_dissemination_cost,
    formula="ceil(lg P) a (zero-byte messages)",
    source=(
        "Hensgen, Finkel & Manber 1988, 'Two algorithms for barrier synchronization', "
        "IJPP 17(1); Thakur et al. 2005 (MPICH MPIR_Barrier_intra_dissemination)"
    ),
)
def dissemination(comm) -> None:
    """Dissemination barrier: ceil(lg P) rounds of zero-byte messages at distance 1, 2, 4, ...

    Schedule: in round k rank r sends an empty message to rank r + 2^k and receives one
    from rank r - 2^k (mod P), with one Sendrecv, for 2^k < P.  By induction, after round
    k rank r has heard, directly or through the chain, from the 2^(k+1) ranks r, r-1,
    ..., r - 2^(k+1) + 1; after ceil(lg P) rounds from all P, so none can leave before
    every rank has entered.  Unlike a tree barrier it needs no separate release phase
    and works for any P (Hensgen, Finkel & Manber 1988).  Messages carry 0 bytes (two
    empty scratch views, slots 0 and 1), so the cost is pure latency: ceil(lg P) a.
    """
    P, rank = comm.size, comm.rank
    sbuf = comm.scratch(0, _U8, 0)
    rbuf = comm.scratch(0, _U8, 1)
    d = 1
    while d < P:
        comm.Sendrecv(sbuf, (rank + d) % P, 0, rbuf, (rank - d) % P, 0)
        d <<= 1
