"""Hand-written reduce-scatter (block variant): pairwise exchange and recursive halving.

Also home of the building blocks that Rabenseifner's reduce and allreduce share with
recursive halving: the power-of-two group of MPICH's fold (`pof2_group`), the
recursive-halving reduce-scatter inside that group (`halving_reduce_scatter`) and the
recursive-doubling allgather that undoes it (`doubling_allgather`).

Source: Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005, sections 4.2-4.4.
"""

from functools import lru_cache

import numpy as np

from ccbench.algorithms.p2p import as_ufunc, is_in_place, pof2_below
from ccbench.algorithms.registry import Cost, register
from ccbench.algorithms.steps import Plan, register_forms, run_plan

__all__ = [
    "doubling_allgather",
    "fold_additions",
    "halving_reduce_scatter",
    "pairwise",
    "pairwise_plan",
    "pof2_group",
    "recursive_halving",
]

_THAKUR = (
    "Thakur, Rabenseifner & Gropp, 'Optimization of Collective Communication Operations "
    "in MPICH', IJHPCA 2005"
)


# -- building blocks -------------------------------------------------------------------


@lru_cache(maxsize=256)
def _members(nranks: int, keep: int) -> tuple[int, ...]:
    pof2 = pof2_below(nranks)
    rem = nranks - pof2
    members = [2 * i + 1 for i in range(rem)] + list(range(2 * rem, nranks))
    if 0 <= keep < 2 * rem and keep % 2 == 0:
        members[keep // 2] = keep  # the pair holding `keep` keeps it in the group
    return tuple(members)


def pof2_group(nranks: int, rank: int, keep: int = -1) -> tuple[tuple[int, ...], int, int]:
    """MPICH's fold of P ranks into a power-of-two group: (members, newrank, partner).

    With pof2 the largest power of two <= P and rem = P - pof2, the first 2*rem ranks
    form pairs (2i, 2i+1).  The even rank of a pair sends its data to the odd one, which
    reduces it and represents the pair as group rank i; it drops out until the unfold at
    the end.  Ranks from 2*rem on are group ranks rank - rem.  ``members[i]`` is the
    rank of group rank i; `newrank` is this rank's group rank (-1 when it drops out);
    `partner` is the other rank of its pair (-1 when unpaired).  If `keep` (a root) is an
    even rank of a pair, the roles in that pair swap so that `keep` stays in the group.
    """
    members = _members(nranks, keep)
    rem = nranks - len(members)
    if rank < 2 * rem:
        newrank = rank // 2 if members[rank // 2] == rank else -1
        return members, newrank, rank ^ 1
    return members, rank - rem, -1


def fold_additions(nranks: int) -> int:
    """Sequential additions behind an element of a recursive-halving or -doubling reduction on `nranks` ranks:
    one per halving (or doubling) step of the power-of-two group, plus one for MPICH's fold when `nranks` is
    not a power of two (the odd rank of a pair adds the even rank's vector first)."""
    if nranks <= 1:
        return 0
    pof2 = pof2_below(nranks)
    return pof2.bit_length() - 1 + (pof2 != nranks)


def halving_reduce_scatter(comm, work, tmp, bounds, members, newrank, ufunc) -> None:
    """Recursive-halving reduce-scatter of `work` among the power-of-two group `members`.

    The buffer is cut into pof2 blocks, ``work[bounds[i]:bounds[i+1]]`` for group rank i.
    In the first step a rank exchanges with the rank pof2/2 away in the group: it sends
    the half of the vector that the partner will own and receives (into `tmp`) the half
    that it will own, and reduces it into `work`.  The next step does the same with the
    kept half and the rank pof2/4 away, and so on: after lg(pof2) steps group rank i
    holds block i reduced over the whole group (Thakur et al. 2005, section 4.3).
    """
    plan = []
    lo, hi = 0, len(members)  # the blocks this rank is still responsible for
    mask = len(members) >> 1
    while mask:
        mid = lo + mask
        if newrank & mask:  # upper half of the pair: keep [mid, hi)
            keep_lo, keep_hi, send_lo, send_hi = mid, hi, lo, mid
        else:  # lower half: keep [lo, mid)
            keep_lo, keep_hi, send_lo, send_hi = lo, mid, mid, hi
        a, b = bounds[keep_lo], bounds[keep_hi]
        plan.append((work[bounds[send_lo]:bounds[send_hi]], members[newrank ^ mask],
                     tmp[:b - a], work[a:b]))
        lo, hi = keep_lo, keep_hi
        mask >>= 1
    sendrecv, reduce_local = comm.Sendrecv, comm.reduce_local
    for send, peer, incoming, mine in plan:
        sendrecv(send, peer, 0, incoming, peer, 0)
        reduce_local(ufunc, incoming, mine)


def doubling_allgather(comm, work, bounds, members, newrank) -> None:
    """Recursive-doubling allgather among `members`: the inverse of the halving above.

    Group rank i starts with block i of `work`.  In step k (k = 0, 1, ...) it exchanges
    everything it has, an aligned run of 2^k blocks, with the rank 2^k away, so the run
    doubles; after lg(pof2) steps every rank has every block (Thakur et al. 2005,
    section 4.1).
    """
    plan = []
    mask = 1
    while mask < len(members):
        mine = newrank & ~(mask - 1)  # first block of my aligned run of `mask` blocks
        theirs = mine ^ mask
        plan.append((work[bounds[mine]:bounds[mine + mask]], members[newrank ^ mask],
                     work[bounds[theirs]:bounds[theirs + mask]]))
        mask <<= 1
    sendrecv = comm.Sendrecv
    for send, peer, recv in plan:
        sendrecv(send, peer, 0, recv, peer, 0)


def _lg(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1


def _block_count(comm, recvbuf, in_place: bool) -> int:
    """Elements per block: in place, recvbuf holds the whole input of P blocks."""
    return recvbuf.size // comm.size if in_place else recvbuf.size


# -- pairwise exchange ---------------------------------------------------------------


def _pairwise_cost(P: int, nbytes: int) -> Cost:
    b = nbytes / P  # one block
    return Cost(P - 1, (P - 1) * b, (P - 1) * b)


@register(
    "reduce_scatter",
    "pairwise",
    cost=_pairwise_cost,
    formula="(P-1)a + n(P-1)/P b + n(P-1)/P g   (n = whole input, P blocks)",
    source=_THAKUR + ", section 4.4 (pairwise exchange)",
    additions=lambda P: P - 1,  # each block collects the P - 1 others one after another
)
def pairwise(comm, sendbuf, recvbuf, op="sum") -> None:
    """Pairwise-exchange reduce-scatter: in step i, send block rank+i, receive from rank-i.

    Every rank owns one block of the result.  In step i = 1..P-1 rank r sends its own
    contribution to block r+i straight to rank r+i and receives rank r-i's contribution
    to block r, which it reduces into its result (ranks mod P).  P-1 steps, each moving
    one block each way; no rank waits for another's partial sums, which suits long
    messages (Thakur et al. 2005, section 4.4).  In place, the input is the whole of
    `recvbuf` and the result is moved to its first block at the end.
    """
    run_plan(comm, pairwise_plan(comm, sendbuf, recvbuf, op))


def pairwise_plan(comm, sendbuf, recvbuf, op="sum") -> Plan:
    """`pairwise`'s steps (`ccbench.algorithms.steps`): one Sendrecv's messages and a reduction into the result
    each, after a prologue that starts the result from this rank's own block; in place an epilogue moves it to the
    first block."""
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    in_place = is_in_place(sendbuf)
    count = _block_count(comm, recvbuf, in_place)
    data = recvbuf if in_place else sendbuf
    mine = data[rank * count:(rank + 1) * count]
    acc = mine if in_place else recvbuf
    steps = []
    if count and P > 1:
        tmp = comm.scratch(count, data.dtype)
        for i in range(1, P):
            dest, source = (rank + i) % P, (rank - i) % P
            steps.append((((data[dest * count:(dest + 1) * count], dest, 0),), ((tmp, source, 0),),
                          (ufunc, tmp, acc)))
    return Plan(None if in_place else lambda: np.copyto(acc, mine), tuple(steps),
                (lambda: np.copyto(recvbuf[:count], acc)) if in_place and rank else None)


# -- recursive halving ---------------------------------------------------------------


def _halving_sum(pof2: int, rem: int) -> int:
    """Sum over the steps of min(2^k, rem): the doubled blocks in group rank 0's halves."""
    return sum(min(1 << k, rem) for k in range(_lg(pof2)))


def _halving_cost(P: int, nbytes: int) -> Cost:
    pof2 = pof2_below(P)
    rem = P - pof2
    b = nbytes / P  # one block
    core = b * (pof2 - 1 + _halving_sum(pof2, rem))
    if rem == 0:
        return Cost(_lg(pof2), core, core)
    return Cost(_lg(pof2) + 2, core + nbytes + b, core + nbytes)


@register(
    "reduce_scatter",
    "recursive_halving",
    cost=_halving_cost,
    formula=(
        "pof2 P: lg P a + n(P-1)/P b + n(P-1)/P g; otherwise, with p' = pof2 <= P, "
        "r = P-p' and S = sum_k min(2^k, r): (lg p' + 2)a + (n + (n/P)(p' + S)) b "
        "+ (n + (n/P)(p' - 1 + S)) g"
    ),
    source=_THAKUR + ", section 4.3 (recursive halving)",
    additions=fold_additions,
)
def recursive_halving(comm, sendbuf, recvbuf, op="sum") -> None:
    """Recursive-halving reduce-scatter: exchange half the vector with a partner each step.

    In step 1 rank r exchanges with rank r ^ P/2: it sends the half of the vector the
    partner is responsible for and receives and reduces the half it keeps; step 2 splits
    the kept half with the rank P/4 away, and so on.  After lg P steps each rank holds its
    own block, reduced over all ranks: lg P steps moving n(P-1)/P bytes, the fewest steps
    at the optimal volume (Thakur et al. 2005, section 4.3).

    Non-powers of two, as MPICH does: of the first 2*rem ranks (rem = P - pof2) each even
    rank sends its whole input to the odd rank above it, which reduces it and stands for
    both in the power-of-two group, where it is responsible for both ranks' blocks; at the
    end it sends the even rank its block.  That adds two steps, n + n/P bytes and n
    reduced bytes on the odd ranks.
    """
    ufunc = as_ufunc(op)
    P, rank = comm.size, comm.rank
    in_place = is_in_place(sendbuf)
    count = _block_count(comm, recvbuf, in_place)
    data = recvbuf if in_place else sendbuf
    result = recvbuf[:count]
    if P == 1 or count == 0:
        if not in_place:
            np.copyto(result, data[:count])
        return
    members, newrank, partner = pof2_group(P, rank)
    if newrank < 0:  # folded out: hand the input to the partner, get my block back
        comm.Send(data, partner)
        comm.Recv(result, partner)
        return
    work = data
    if not in_place:
        work = comm.scratch(P * count, data.dtype, 1)
        np.copyto(work, data)
    tmp = comm.scratch(P * count, data.dtype)
    if partner >= 0:
        comm.Recv(tmp, partner)
        comm.reduce_local(ufunc, tmp, work)
    # group rank i owns the blocks of the real ranks it stands for, which are adjacent
    rem = P - len(members)
    bounds = [count * (2 * i if i <= rem else i + rem) for i in range(len(members) + 1)]
    halving_reduce_scatter(comm, work, tmp, bounds, members, newrank, ufunc)
    if partner >= 0:
        comm.Send(work[partner * count:(partner + 1) * count], partner)
    if not in_place or rank:  # in place, rank 0's block is already where it belongs
        np.copyto(result, work[rank * count:(rank + 1) * count])


# -- persistent and non-blocking forms (registered last: the blocking algorithms keep their order) ------------

register_forms("reduce_scatter", "pairwise", pairwise_plan, what="Pairwise-exchange reduce-scatter")
