"""Hand-written reduce: binomial tree, linear, and Rabenseifner's reduce-scatter + gather.

Source: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005, section 4.5; Rabenseifner, "Optimization of
Collective Reduction Operations", ICCS 2004.
"""

import numpy as np

from ccbench.algorithms.p2p import as_ufunc, block_bounds, is_in_place, pof2_below
from ccbench.algorithms.reduce_scatter import fold_additions, halving_reduce_scatter, pof2_group
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_steps

__all__ = ["binomial", "binomial_gather", "binomial_plan", "binomial_reduce", "linear", "rabenseifner"]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp, 'Optimization of Collective Communication Operations "
    "in MPICH', IJHPCA 2005"
)


def _lg_ceil(P: int) -> int:
    """ceil(log2 P): the height of a binomial tree on P ranks."""
    return (P - 1).bit_length()


def _has_children(P: int, vrank: int) -> bool:
    """Whether relative rank `vrank` receives anything in a binomial reduce."""
    return vrank % 2 == 0 and vrank + 1 < P


def _binomial_steps(comm, work, tmp, ufunc, root: int) -> list:
    """The steps of `binomial_reduce` (`ccbench.algorithms.steps`): receive-and-reduce from each child, then one
    send to the parent."""
    P = comm.size
    vrank, mask, steps = (comm.rank - root) % P, 1, []
    while mask < P:
        if vrank & mask:
            steps.append((((work, (vrank - mask + root) % P, 0),), (), None))
            break
        child = vrank | mask
        if child < P:
            steps.append(((), ((tmp, (child + root) % P, 0),), (ufunc, tmp, work)))
        mask <<= 1
    return steps


def binomial_reduce(comm, work, tmp, ufunc, root: int) -> None:
    """Binomial-tree reduce of `work` (this rank's contribution) into the root's `work`.

    With relative ranks v = rank - root (mod P): in step k (mask 2^k), a rank whose bit k
    is set sends what it has accumulated to v - 2^k and is done; the others receive from
    v + 2^k (if it exists) into `tmp` and reduce into `work`.  After ceil(lg P) steps the
    root's `work` holds the result; a leaf never writes to `work`.
    """
    run_steps(comm, _binomial_steps(comm, work, tmp, ufunc, root))


def _binomial_cost(P: int, nbytes: int) -> Cost:
    L = _lg_ceil(P)
    return Cost(L, L * nbytes, L * nbytes)


@register(
    "reduce",
    "binomial",
    cost=_binomial_cost,
    formula="ceil(lg P) a + n ceil(lg P) b + n ceil(lg P) g",
    source=_THAKUR + ", section 4.5 (binomial tree, short messages)",
    additions=_lg_ceil,  # one addition per step at every rank still holding a partial sum
)
def binomial(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> None:
    """Binomial-tree reduce: the ranks pair up, halving the number of holders each step.

    In step k every rank whose relative rank (rank - root mod P) has bit k set sends its
    partial result to the rank 2^k below it and drops out; that rank reduces it into its
    own.  After ceil(lg P) steps only the root is left, holding the whole reduction.
    Every step moves the full vector, so it suits short messages: ceil(lg P) steps, each
    of n bytes, reduced at the receiver (Thakur et al. 2005, section 4.5).  Any P works
    without folding: a missing partner just skips its step.
    """
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    if rank == root:
        work = recvbuf
        if not is_in_place(sendbuf):
            np.copyto(work, sendbuf)
    elif _has_children(P, (rank - root) % P):  # accumulates: must not touch sendbuf
        work = comm.scratch(sendbuf.size, sendbuf.dtype, 1)
        np.copyto(work, sendbuf)
    else:
        work = sendbuf  # a leaf only sends
    if P == 1 or work.size == 0:
        return
    binomial_reduce(comm, work, comm.scratch(work.size, work.dtype), ufunc, root)


def _linear_cost(P: int, nbytes: int) -> Cost:
    return Cost(P - 1, (P - 1) * nbytes, (P - 1) * nbytes)


@register(
    "reduce",
    "linear",
    cost=_linear_cost,
    formula="(P-1)a + (P-1)n b + (P-1)n g",
    source="Open MPI's basic linear reduce (coll/base, ompi_coll_base_reduce_intra_basic_linear)",
    additions=lambda P: P - 1,
)
def linear(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> None:
    """Linear reduce: every rank sends its vector to the root, which reduces them in turn.

    The root receives P-1 vectors one after the other (starting with the rank after it)
    and reduces each into its result: P-1 steps of n bytes, all at the root.  The baseline
    the tree algorithms improve on.
    """
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    if rank != root:
        if sendbuf.size:
            comm.Send(sendbuf, root)
        return
    if not is_in_place(sendbuf):
        np.copyto(recvbuf, sendbuf)
    if recvbuf.size == 0:
        return
    tmp = comm.scratch(recvbuf.size, recvbuf.dtype)
    recv, reduce_local = comm.Recv, comm.reduce_local
    for i in range(1, P):
        recv(tmp, (root + i) % P)
        reduce_local(ufunc, tmp, recvbuf)


def binomial_gather(comm, work, bounds, members, newrank: int, newroot: int) -> None:
    """Binomial gather of the blocks of a power-of-two group to group rank `newroot`.

    Group rank i starts with block i, ``work[bounds[i]:bounds[i+1]]``.  With relative
    ranks v = newrank XOR newroot, in step k a rank with bit k of v set sends its aligned
    run of 2^k blocks to the rank 2^k away and is done; the other receives that run next
    to its own.  XOR keeps every run contiguous, so each message is one slice.
    """
    vrank = newrank ^ newroot
    mask = 1
    while mask < len(members):
        mine = newrank & ~(mask - 1)  # first block of my aligned run of `mask` blocks
        peer = members[newrank ^ mask]
        if vrank & mask:
            comm.Send(work[bounds[mine]:bounds[mine + mask]], peer)
            return
        theirs = mine ^ mask
        comm.Recv(work[bounds[theirs]:bounds[theirs + mask]], peer)
        mask <<= 1


def _rabenseifner_cost(P: int, nbytes: int) -> Cost:
    pof2 = pof2_below(P)
    lg = pof2.bit_length() - 1
    half = nbytes * (pof2 - 1) / pof2  # what the halving (and the gather) moves
    if P == pof2:
        return Cost(2 * lg, 2 * half, half)
    return Cost(2 * lg + 1, 2 * half + nbytes, half + nbytes)


@register(
    "reduce",
    "rabenseifner",
    cost=_rabenseifner_cost,
    formula=(
        "pof2 P: 2 lg P a + 2n(P-1)/P b + n(P-1)/P g; otherwise, with p' = pof2 <= P: "
        "(2 lg p' + 1)a + (2n(p'-1)/p' + n) b + (n(p'-1)/p' + n) g"
    ),
    source=_THAKUR + ", section 4.5; Rabenseifner, ICCS 2004",
    additions=fold_additions,  # the gather adds nothing
)
def rabenseifner(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> None:
    """Rabenseifner's reduce: recursive-halving reduce-scatter, then binomial gather to root.

    First a reduce-scatter by recursive halving leaves each rank of a power-of-two group
    with one reduced block (see `reduce_scatter.recursive_halving`); then a binomial
    gather collects the blocks at the root.  Each phase takes lg P steps and moves
    n(P-1)/P bytes, so for long vectors it costs about twice the bandwidth of one copy
    of the data, against n lg P for the binomial tree (Rabenseifner 2004; Thakur et al.
    2005, section 4.5).

    Non-powers of two, as MPICH does: of the first 2*rem ranks (rem = P - pof2), each
    even rank sends its vector to the odd rank above it, which reduces it and takes part
    for both.  Nothing needs unfolding, since only the root wants the result; if the root
    is one of those even ranks, the roles in its pair swap so that it stays in.  That
    adds one step, n bytes and n reduced bytes; the cost given is for root 0.
    """
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    data = recvbuf if rank == root and is_in_place(sendbuf) else sendbuf
    count = data.size
    if P == 1 or count == 0:
        if rank == root and data is not recvbuf:
            np.copyto(recvbuf, data)
        return
    members, newrank, partner = pof2_group(P, rank, keep=root)
    if newrank < 0:  # folded out: the partner reduces for both
        comm.Send(data, partner)
        return
    work = recvbuf if rank == root else comm.scratch(count, data.dtype, 1)
    if data is not work:
        np.copyto(work, data)
    tmp = comm.scratch(count, data.dtype)
    if partner >= 0:
        comm.Recv(tmp, partner)
        comm.reduce_local(ufunc, tmp, work)
    bounds = block_bounds(count, len(members))
    halving_reduce_scatter(comm, work, tmp, bounds, members, newrank, ufunc)
    newroot = members.index(root)
    binomial_gather(comm, work, bounds, members, newrank, newroot)


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------


def binomial_plan(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> Plan:
    """`binomial`'s steps (`_binomial_steps`) on these buffers: a rank with children accumulates in the root's
    recvbuf or in an array of its own, filled from sendbuf by the prologue; a leaf sends sendbuf itself."""
    P, rank = comm.size, comm.rank
    if rank == root:
        work = recvbuf
    elif _has_children(P, (rank - root) % P):
        work = np.empty_like(sendbuf)
    else:
        work = sendbuf
    copy = None if work is sendbuf or is_in_place(sendbuf) else lambda: np.copyto(work, sendbuf)
    if P == 1 or work.size == 0:
        return Plan(copy, ())
    return Plan(copy, tuple(_binomial_steps(comm, work, np.empty_like(work), as_ufunc(op), root)))


register_forms("reduce", "binomial", binomial_plan, what="Binomial-tree reduce")
