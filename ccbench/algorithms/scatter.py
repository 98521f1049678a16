"""Hand-written scatters: linear and binomial tree.

Every function has the signature of mpi4py's ``comm.Scatter(sendbuf, recvbuf, root)``:
``fn(comm, sendbuf, recvbuf, root=0)``.  The root's `sendbuf` holds P blocks of
``count`` elements, block r for rank r; other ranks' `sendbuf` may be None.  In place
(the root's ``recvbuf`` is the marker) the root's own block stays where it is in sendbuf.
Sizes follow nccl-tests: n = P * block bytes, the root's send buffer.
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
    "scatter",
    "linear",
    cost=_linear_cost,
    formula="(P-1) a + n(P-1)/P b",
    source="flat tree, as MPICH MPIR_Scatter_allcomm_linear / Open MPI basic_linear",
)
def linear(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Flat-tree scatter: the root sends each rank its block directly.

    Schedule: the root posts P-1 nonblocking sends, block r straight from slot r of
    sendbuf to rank r, and waits for all of them; every other rank makes one receive.
    Everything leaves through the root's one link: (P-1) a + n(P-1)/P b (Thakur et
    al. 2005).
    """
    run_plan(comm, linear_plan(comm, sendbuf, recvbuf, root))


def linear_plan(comm, sendbuf, recvbuf, root: int = 0) -> Plan:
    """`linear`'s one step (`ccbench.algorithms.steps`): a receive from the root, or at the root P-1 sends after a
    prologue that copies its own block out."""
    P, rank = comm.size, comm.rank
    if rank != root:
        return Plan(None, (((), ((recvbuf, root, 0),), None),))
    count = sendbuf.size // P
    own = sendbuf[root * count:(root + 1) * count]
    sends = tuple((sendbuf[dst * count:(dst + 1) * count], dst, 0) for dst in ((root + i) % P for i in range(1, P)))
    copy = None if is_in_place(recvbuf) else lambda: np.copyto(recvbuf, own)
    return Plan(copy, ((sends, (), None),) if sends else ())


# -- binomial tree -------------------------------------------------------------------------


def _binomial_cost(P: int, nbytes: int) -> Cost:
    return Cost((P - 1).bit_length(), nbytes * (P - 1) / P)


@register(
    "scatter",
    "binomial",
    cost=_binomial_cost,
    formula="ceil(lg P) a + n(P-1)/P b",
    source=_THAKUR + " (MPICH MPIR_Scatter_intra_binomial)",
)
def binomial(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """Binomial-tree scatter: each rank splits what it received among its subtrees.

    The binomial-broadcast tree (relative ranks, root = 0), but a rank forwards to each
    child only the blocks of that child's subtree.  Rank vr's subtree is the ranks
    [vr, vr + m), m = min(lowbit(vr), P - vr): it receives those m blocks from its parent
    vr - lowbit(vr) in one message (into a scratch array, slot 0; a leaf receives its
    single block straight into recvbuf), then for mask = largest power of two below m
    down to 1 sends blocks [mask, mask + min(mask, m - mask)) of that array to child
    vr + mask, and keeps block 0.  The root first rotates sendbuf into relative order
    (unless it is rank 0, which sends straight from sendbuf).  For P = 8:

        round 0: 0->4 (4 blocks)   round 1: 0->2, 4->6 (2)   round 2: 0->1, 2->3, ... (1)

    The root sends ceil(lg P) messages holding P-1 blocks: ceil(lg P) a + n(P-1)/P b
    (Thakur et al. 2005).  Any P works: missing children are skipped.
    """
    P, rank = comm.size, comm.rank
    vr = (rank - root) % P
    if vr:
        low = vr & -vr
        m = min(low, P - vr)  # size of my subtree
        parent = (rank - low) % P
        if m == 1:  # a leaf: receive my block and stop
            comm.Recv(recvbuf, parent)
            return
        count = recvbuf.size
        tmp = comm.scratch(m * count, recvbuf.dtype, 0)
        comm.Recv(tmp, parent)
    else:
        m = P
        count = sendbuf.size // P
        if root == 0:
            tmp = sendbuf
        else:  # relative block j is rank root + j's: rotate into relative order
            tmp = comm.scratch(P * count, sendbuf.dtype, 0)
            split = (P - root) * count
            np.copyto(tmp[:split], sendbuf[root * count:])
            np.copyto(tmp[split:], sendbuf[:root * count])
    # hand each child its subtree, largest first
    mask = 1 << ((m - 1).bit_length() - 1) if m > 1 else 0
    while mask:
        nb = min(mask, m - mask)
        comm.Send(tmp[mask * count:(mask + nb) * count], (rank + mask) % P)
        mask >>= 1
    if not is_in_place(recvbuf):
        np.copyto(recvbuf, tmp[:count])


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("scatter", "linear", linear_plan, what="Flat-tree scatter")
