"""Hand-written gathers: linear and binomial tree.

Every function has the signature of mpi4py's ``comm.Gather(sendbuf, recvbuf, root)``:
``fn(comm, sendbuf, recvbuf, root=0)``.  The root's `recvbuf` holds P blocks of ``count``
elements, block r from rank r; other ranks' `recvbuf` may be None.  In place (the root's
``sendbuf`` is the marker) the root's own block is already in its slot.  Sizes follow
nccl-tests: n = P * block bytes, the root's receive buffer.
"""

import numpy as np

from ccbench.algorithms.p2p import is_in_place
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_plan

__all__ = ["binomial", "linear", "linear_plan"]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp 2005, 'Optimization of Collective Communication "
    "Operations in MPICH', IJHPCA 19(1)"
)


# -- linear --------------------------------------------------------------------------------


def _linear_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, nbytes * (P - 1) / P)


@register(
    "gather",
    "linear",
    cost=_linear_cost,
    formula="(P-1) a + n(P-1)/P b",
    source="flat tree, as MPICH MPIR_Gather_allcomm_linear / Open MPI basic_linear",
)
def linear(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Flat-tree gather: every rank sends its block straight to the root.

    Schedule: each non-root rank makes one send to the root; the root posts P-1
    nonblocking receives, block r directly into slot r of recvbuf, and waits for all of
    them.  Everything enters through the root's one link: (P-1) a + n(P-1)/P b.  The
    bandwidth term is optimal; the latency term is linear in P (Thakur et al. 2005).
    """
    run_plan(comm, linear_plan(comm, sendbuf, recvbuf, root))


def linear_plan(comm, sendbuf, recvbuf, root: int = 0) -> Plan:
    """`linear`'s one step (`ccbench.algorithms.steps`): a send to the root, or at the root P-1 receives after a
    prologue that copies its own block into place."""
    P, rank = comm.size, comm.rank
    if rank != root:
        return Plan(None, ((((sendbuf, root, 0),), (), None),))
    count = recvbuf.size // P
    own = recvbuf[root * count:(root + 1) * count]
    recvs = tuple((recvbuf[src * count:(src + 1) * count], src, 0) for src in ((root + i) % P for i in range(1, P)))
    copy = None if is_in_place(sendbuf) else lambda: np.copyto(own, sendbuf)
    return Plan(copy, (((), recvs, None),) if recvs else ())


# -- binomial tree -------------------------------------------------------------------------


def _binomial_cost(P: int, nbytes: int) -> Cost:
    return Cost((P - 1).bit_length(), nbytes * (P - 1) / P)


@register(
    "gather",
    "binomial",
    cost=_binomial_cost,
    formula="ceil(lg P) a + n(P-1)/P b",
    source=_THAKUR + " (MPICH MPIR_Gather_intra_binomial)",
)
def binomial(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Binomial-tree gather: subtrees merge upwards, ceil(lg P) rounds.

    The tree of the binomial broadcast, run backwards (relative ranks, root = 0).  Rank
    vr's subtree is the ranks [vr, vr + m) with m = min(lowbit(vr), P - vr), so its data
    is one contiguous run of blocks.  Rank vr collects it in a scratch array (slot 0):
    its own block first, then, for mask = 1, 2, 4, ... below lowbit(vr), the subtree of
    child vr + mask, placed at block offset mask; then it sends the m blocks to its
    parent vr - lowbit(vr) in one message.  Leaves (odd vr) send their block straight
    from sendbuf.  The root ends with all P blocks in relative order and rotates them
    into recvbuf (when the root is rank 0 it receives straight into recvbuf).  For P = 8:

        round 0: 1->0, 3->2, 5->4, 7->6   (1 block each)
        round 1: 2->0, 6->4               (2 blocks)
        round 2: 4->0                     (4 blocks)

    The root receives ceil(lg P) messages holding P-1 blocks: ceil(lg P) a + n(P-1)/P b,
    the latency of a tree with the bandwidth of the flat gather (Thakur et al. 2005).
    Any P works: missing children are skipped.
    """
    P, rank = comm.size, comm.rank
    vr = (rank - root) % P
    low = vr & -vr
    if vr:
        m = min(low, P - vr)  # size of my subtree
        parent = (rank - low) % P
        if m == 1:  # a leaf: nothing to collect
            comm.Send(sendbuf, parent)
            return
        count = sendbuf.size
        tmp = comm.scratch(m * count, sendbuf.dtype, 0)
        np.copyto(tmp[:count], sendbuf)
    else:
        m = P
        count = recvbuf.size // P
        own = recvbuf[root * count:(root + 1) * count]
        if root == 0:  # relative order is absolute order: collect in recvbuf itself
            tmp = recvbuf
            if not is_in_place(sendbuf):
                np.copyto(own, sendbuf)
        else:
            tmp = comm.scratch(P * count, recvbuf.dtype, 0)
            np.copyto(tmp[:count], own if is_in_place(sendbuf) else sendbuf)
    # receive each child's subtree, smallest first, after the blocks already held
    mask = 1
    while mask < m:
        nb = min(mask, m - mask)
        comm.Recv(tmp[mask * count:(mask + nb) * count], (rank + mask) % P)
        mask <<= 1
    if vr:
        comm.Send(tmp, parent)
    elif root:
        # relative block j belongs to rank root + j: rotate into place
        split = (P - root) * count
        np.copyto(recvbuf[root * count:], tmp[:split])
        np.copyto(recvbuf[:root * count], tmp[split:])


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("gather", "linear", linear_plan, what="Flat-tree gather")
