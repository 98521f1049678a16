"""Hand-written barrier: dissemination.

Signature of mpi4py's ``comm.Barrier()``: ``fn(comm)``.
"""

import numpy as np

from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_steps

__all__ = ["dissemination", "dissemination_plan"]

_U8 = np.dtype(np.uint8)


_SOURCE = ("Hensgen, Finkel & Manber 1988, 'Two algorithms for barrier synchronization', IJPP 17(1); "
           "Thakur et al. 2005 (MPICH MPIR_Barrier_intra_dissemination)")


def _dissemination_cost(P: int, nbytes: int) -> Cost:
    return Cost((P - 1).bit_length(), 0)


@register("barrier", "dissemination", cost=_dissemination_cost, formula="ceil(lg P) a (zero-byte messages)",
          source=_SOURCE)
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
    run_steps(comm, dissemination_plan(comm).steps)


# -- its steps, run blocking above and as persistent and non-blocking forms (registered last) ------------------


def dissemination_plan(comm) -> Plan:
    """`dissemination`'s rounds as steps (`ccbench.algorithms.steps`): an empty send to r + 2^k and receive from
    r - 2^k each."""
    P, rank = comm.size, comm.rank
    sbuf, rbuf = comm.scratch(0, _U8, 0), comm.scratch(0, _U8, 1)
    steps, d = [], 1
    while d < P:
        steps.append((((sbuf, (rank + d) % P, 0),), ((rbuf, (rank - d) % P, 0),), None))
        d <<= 1
    return Plan(None, tuple(steps))


register_forms("barrier", "dissemination", dissemination_plan, what="Dissemination barrier")
