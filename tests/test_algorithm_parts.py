"""The hand-written collectives rank by rank: each rank's messages against the textbook schedule.

`tests/test_algorithms_sim.py` checks the results and `tests/test_costs_at_scale.py` the busiest
rank's counters and the critical path.  Here every rank's own sequence of completed batches
(what it sent and received, to and from whom, how many bytes) is compared with the schedule
derived by hand from the algorithm's description (Thakur, Rabenseifner & Gropp 2005 and the
docstrings), at several P (powers of two and not) and roots other than 0.  The schedules below
are written from the trees and rings themselves, not from the code.
"""

import numpy as np
import pytest
from simcheck import run_sim

from ccbench.algorithms import bcast as bcast_mod
from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm, block_bounds
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES

PS = (1, 2, 3, 4, 5, 7, 8, 12)
ISZ = 4  # int32


def _roots(P: int) -> list[int]:
    return sorted({0, P // 2, P - 1})


# -- binomial tree on relative ranks (root = 0) ------------------------------------------------


def _low(v: int) -> int:
    return v & -v


def _children(v: int, P: int) -> list[int]:
    """Children of relative rank v, smallest first: v + 2^j for 2^j below lowbit(v) (P for the root)."""
    top = _low(v) if v else P
    out, m = [], 1
    while m < top:
        if v + m < P:
            out.append(v + m)
        m <<= 1
    return out


def _subtree(v: int, P: int) -> int:
    """How many relative ranks the subtree of v holds: [v, v + lowbit(v)) clipped at P."""
    return P if v == 0 else min(_low(v), P - v)


def _abs(v: int, root: int, P: int) -> int:
    return (v + root) % P


def _send(peer, nbytes):
    return (((peer, nbytes),), ())


def _recv(peer, nbytes):
    return ((), ((peer, nbytes),))


def _sendrecv(dst, sbytes, src, rbytes):
    return (((dst, sbytes),), ((src, rbytes),))


# -- expected schedules, one list of batches per rank ---------------------------------------------


def _gather_linear(P, root, count):
    nb = count * ISZ
    plans = []
    for r in range(P):
        if r != root:
            plans.append([_send(root, nb)])
        else:
            plans.append([((), tuple(((root + i) % P, nb) for i in range(1, P)))] if P > 1 else [])
    return plans


def _gather_binomial(P, root, count):
    nb = count * ISZ
    plans = [None] * P
    for v in range(P):
        plan = [_recv(_abs(c, root, P), _subtree(c, P) * nb) for c in _children(v, P)]
        if v:
            plan.append(_send(_abs(v - _low(v), root, P), _subtree(v, P) * nb))
        plans[_abs(v, root, P)] = plan
    return plans


def _scatter_linear(P, root, count):
    nb = count * ISZ
    plans = []
    for r in range(P):
        if r != root:
            plans.append([_recv(root, nb)])
        else:
            plans.append([(tuple(((root + i) % P, nb) for i in range(1, P)), ())] if P > 1 else [])
    return plans


def _scatter_binomial(P, root, count):
    nb = count * ISZ
    plans = [None] * P
    for v in range(P):
        plan = [_recv(_abs(v - _low(v), root, P), _subtree(v, P) * nb)] if v else []
        plan += [_send(_abs(c, root, P), _subtree(c, P) * nb) for c in reversed(_children(v, P))]
        plans[_abs(v, root, P)] = plan
    return plans


def _bcast_binomial(P, root, count):
    nb = count * ISZ
    plans = [None] * P
    for v in range(P):
        plan = [_recv(_abs(v - _low(v), root, P), nb)] if v else []
        plan += [_send(_abs(c, root, P), nb) for c in reversed(_children(v, P))]
        plans[_abs(v, root, P)] = plan
    return plans


def _bcast_linear(P, root, count):
    nb = count * ISZ
    if P == 1:
        return [[]]
    return [[(tuple(((root + i) % P, nb) for i in range(1, P)), ())] if r == root else [_recv(root, nb)]
            for r in range(P)]


def _bcast_scatter_allgather(P, root, count):
    if P == 1:
        return [[]]
    b = block_bounds(count, P)

    def run(lo, hi):  # bytes of blocks [lo, hi), clipped at P
        return (b[min(hi, P)] - b[lo]) * ISZ

    plans = [None] * P
    for v in range(P):
        plan = [_recv(_abs(v - _low(v), root, P), run(v, v + _low(v)))] if v else []
        plan += [_send(_abs(c, root, P), run(c, c + _low(c))) for c in reversed(_children(v, P))]
        r = _abs(v, root, P)
        for i in range(P - 1):  # ring: send block v - i, receive block v - i - 1
            j, jn = (v - i) % P, (v - i - 1) % P
            plan.append(_sendrecv((r + 1) % P, run(j, j + 1), (r - 1) % P, run(jn, jn + 1)))
        plans[r] = plan
    return plans


def _allgather_ring(P, root, count):
    nb = count * ISZ
    return [[_sendrecv((r + 1) % P, nb, (r - 1) % P, nb)] * (P - 1) for r in range(P)]


def _allgather_linear(P, root, count):
    nb = count * ISZ
    if P == 1:
        return [[]]
    return [[(tuple(((r + i) % P, nb) for i in range(1, P)), tuple(((r - i) % P, nb) for i in range(1, P)))]
            for r in range(P)]


def _allgather_bruck(P, root, count):
    nb = count * ISZ
    plans = []
    for r in range(P):
        plan, held = [], 1
        while 2 * held <= P:
            plan.append(_sendrecv((r - held) % P, held * nb, (r + held) % P, held * nb))
            held *= 2
        if P - held:
            plan.append(_sendrecv((r - held) % P, (P - held) * nb, (r + held) % P, (P - held) * nb))
        plans.append(plan)
    return plans


def _alltoall_pairwise(P, root, count):
    nb = count * ISZ
    pof2 = P & (P - 1) == 0
    return [[_sendrecv(r ^ i if pof2 else (r + i) % P, nb, r ^ i if pof2 else (r - i) % P, nb)
             for i in range(1, P)] for r in range(P)]


def _alltoall_linear(P, root, count):
    nb = count * ISZ
    if P == 1:
        return [[]]
    return [[(tuple(((r + i) % P, nb) for i in range(1, P)), tuple(((r - i) % P, nb) for i in range(1, P)))]
            for r in range(P)]


def _alltoall_bruck(P, root, count):
    nb = count * ISZ
    plans = []
    for r in range(P):
        plan, d = [], 1
        while d < P:
            k = sum(1 for i in range(P) if i & d)  # the positions with this bit set
            plan.append(_sendrecv((r + d) % P, k * nb, (r - d) % P, k * nb))
            d *= 2
        plans.append(plan)
    return plans


def _reduce_binomial(P, root, count):
    nb = count * ISZ
    plans = [None] * P
    for v in range(P):
        plan = []
        if nb:
            plan = [_recv(_abs(c, root, P), nb) for c in _children(v, P)]
            if v:
                plan.append(_send(_abs(v - _low(v), root, P), nb))
        plans[_abs(v, root, P)] = plan
    return plans


def _reduce_linear(P, root, count):
    nb = count * ISZ
    if not nb:
        return [[] for _ in range(P)]
    return [[_recv((root + i) % P, nb) for i in range(1, P)] if r == root else [_send(root, nb)]
            for r in range(P)]


def _reduce_scatter_pairwise(P, root, count):
    nb = count * ISZ
    if not nb:
        return [[] for _ in range(P)]
    return [[_sendrecv((r + i) % P, nb, (r - i) % P, nb) for i in range(1, P)] for r in range(P)]


SCHEDULES = {
    ("gather", "linear"): _gather_linear,
    ("gather", "binomial"): _gather_binomial,
    ("scatter", "linear"): _scatter_linear,
    ("scatter", "binomial"): _scatter_binomial,
    ("bcast", "binomial"): _bcast_binomial,
    ("bcast", "linear"): _bcast_linear,
    ("bcast", "scatter_allgather"): _bcast_scatter_allgather,
    ("allgather", "ring"): _allgather_ring,
    ("allgather", "linear"): _allgather_linear,
    ("allgather", "bruck"): _allgather_bruck,
    ("alltoall", "pairwise"): _alltoall_pairwise,
    ("alltoall", "linear"): _alltoall_linear,
    ("alltoall", "bruck"): _alltoall_bruck,
    ("reduce", "binomial"): _reduce_binomial,
    ("reduce", "linear"): _reduce_linear,
    ("reduce_scatter", "pairwise"): _reduce_scatter_pairwise,
}


def _executed(coll, name, P, count, root, in_place=False):
    """(wrong elements per rank, per-rank batches without tags) of one simulated int32 call."""
    batches: list = []
    wrong, counts, _ = run_sim(coll, name, P, count, "int32", "sum", in_place, root, batches=batches)
    tags = {tag for plan in batches for sends, recvs in plan for _, _, tag in sends + recvs}
    assert tags <= {(0, 0)}, tags  # every message on the world context with tag 0
    plans = [[(tuple(m[:2] for m in s), tuple(m[:2] for m in r)) for s, r in plan] for plan in batches]
    return wrong, plans, counts


@pytest.mark.parametrize(("coll", "name"), sorted(SCHEDULES), ids=lambda v: str(v))
def test_every_rank_follows_the_textbook_schedule(coll, name):
    """Each rank's batches (peers, bytes, order) equal the schedule derived from the tree or ring,
    out of place and in place, at P = 1-5, 7, 8, 12 and the roots 0, P/2 and P-1; the results are exact."""
    rooted = COLLECTIVES[coll].rooted
    for P in PS:
        for root in _roots(P) if rooted else (0,):
            for count in (0, 1, 2 * P + 1):
                want = SCHEDULES[coll, name](P, root, count)
                for in_place in (False, True):
                    wrong, got, _ = _executed(coll, name, P, count, root, in_place)
                    where = f"P={P} root={root} count={count} in_place={in_place}"
                    assert sum(wrong) == 0, (where, wrong)
                    for r in range(P):
                        assert got[r] == want[r], f"{where} rank {r}: {got[r]} != {want[r]}"


def test_pipelined_chain_sends_each_segment_down_the_chain():
    """Relative rank v receives every segment from v-1 and passes it to v+1: the root sends the m
    segments, the last rank receives them, a middle rank overlaps sending segment k-1 with
    receiving segment k (m+1 batches); with count = 0 one empty segment travels."""
    seg = 16  # elements of 4 bytes per 64-byte segment
    old = bcast_mod.SEGMENT_BYTES
    bcast_mod.SEGMENT_BYTES = seg * ISZ
    try:
        for P in (1, 2, 3, 5, 8):
            for root in _roots(P):
                for count in (0, 1, 16, 17, 40):
                    m = max(1, -(-count // seg))
                    sizes = [min(seg, count - k * seg) * ISZ if count else 0 for k in range(m)]
                    want = [None] * P
                    for v in range(P):
                        r, nxt, prv = _abs(v, root, P), _abs(v + 1, root, P), _abs(v - 1, root, P)
                        if P == 1:
                            want[r] = []
                        elif v == 0:
                            want[r] = [_send(nxt, s) for s in sizes]
                        elif v == P - 1:
                            want[r] = [_recv(prv, s) for s in sizes]
                        else:
                            want[r] = ([_recv(prv, sizes[0])]
                                       + [_sendrecv(nxt, sizes[k - 1], prv, sizes[k]) for k in range(1, m)]
                                       + [_send(nxt, sizes[-1])])
                    wrong, got, _ = _executed("bcast", "pipelined_chain", P, count, root)
                    assert sum(wrong) == 0 and got == want, (P, root, count, got, want)
    finally:
        bcast_mod.SEGMENT_BYTES = old


# -- work arrays hold garbage, and the benchmark calls an algorithm many times ------------------

MINE = [("bcast", n) for n in ("binomial", "linear", "scatter_allgather", "pipelined_chain")] + [
    ("allgather", n) for n in ("ring", "recursive_doubling", "bruck", "linear")] + [
    ("reduce_scatter", n) for n in ("pairwise", "recursive_halving")] + [
    ("reduce", n) for n in ("binomial", "linear", "rabenseifner")] + [
    ("alltoall", n) for n in ("pairwise", "bruck", "linear")] + [
    ("gather", n) for n in ("linear", "binomial")] + [
    ("scatter", n) for n in ("linear", "binomial")] + [("barrier", "dissemination")]


@pytest.mark.parametrize(("coll", "name"), MINE, ids=lambda v: str(v))
def test_repeated_calls_on_dirty_work_arrays(coll, name):
    """The timing loop calls an algorithm again and again on one counting communicator, whose
    scratch arrays keep what the last call left.  With every scratch slot filled with garbage
    first, three calls in a row give the exact result each time, with the same counters."""
    alg, hooks = get(coll, name), COLLECTIVES[coll]
    dt = np.dtype("int32")
    for P in (3, 4, 6):
        for root in (0, P - 1) if hooks.rooted else (0,):
            for in_place in (False, True):
                def body(comm, P=P, root=root, in_place=in_place):
                    cc = CountedComm(comm)
                    for slot in range(4):
                        cc.scratch(64 * P, dt, slot).fill(-7)
                    wrong, counts = [], []
                    for _ in range(3):
                        bufs = hooks.make_buffers(5, P, comm.rank, dt, "sum", root, in_place, None)
                        bufs.fill()
                        before = cc.counts.as_tuple()
                        alg(cc, *bufs.args, **bufs.kwargs)
                        after = cc.counts.as_tuple()
                        wrong.append(bufs.nwrong())
                        counts.append(tuple(a - b for a, b in zip(after, before, strict=True)))
                    return wrong, counts

                results, _ = simulate(P, body)
                for rank, (wrong, counts) in enumerate(results):
                    assert wrong == [0, 0, 0], (P, root, in_place, rank, wrong)
                    assert counts[0] == counts[1] == counts[2], (P, root, in_place, rank, counts)


@pytest.mark.parametrize(("coll", "name"), [(c, n) for c, n in MINE if COLLECTIVES[c].rooted],
                         ids=lambda v: str(v))
def test_a_rooted_algorithm_called_without_a_root_uses_rank_0(coll, name):
    """The root is a keyword with MPI's usual default, 0: a call that leaves it out is rooted at rank 0."""
    alg, hooks = get(coll, name), COLLECTIVES[coll]
    dt = np.dtype("int32")

    def body(comm):
        bufs = hooks.make_buffers(5, 3, comm.rank, dt, "sum", 0, False, None)
        bufs.fill()
        kwargs = {k: v for k, v in bufs.kwargs.items() if k != "root"}
        assert kwargs != bufs.kwargs or "root" not in bufs.kwargs
        alg(CountedComm(comm), *bufs.args, **kwargs)
        return bufs.nwrong()

    results, _ = simulate(3, body)
    assert results == [0, 0, 0]


# -- the registry ---------------------------------------------------------------------------------


def test_cost_time_follows_the_critical_path_where_given():
    """time = alpha a + beta b + gamma g, of the critical path when one is stated."""
    from ccbench.algorithms.registry import Cost

    plain = Cost(3, 1000.0, 500.0)
    assert plain.timing_cost is plain
    assert plain.time_s(2e-6, 1e-9, 4e-10) == pytest.approx(3 * 2e-6 + 1000 * 1e-9 + 500 * 4e-10, rel=1e-15)
    assert plain.time_s(2e-6, 1e-9) == pytest.approx(3 * 2e-6 + 1000 * 1e-9, rel=1e-15)  # gamma 0 by default
    assert Cost(3, 1000.0).gamma == 0.0 and Cost(3, 1000.0).critical is None
    path = Cost(7, 3000.0, 100.0)
    piped = Cost(2, 1000.0, 50.0, critical=path)
    assert piped.timing_cost is path
    assert piped.time_s(1.0, 0.01, 0.1) == pytest.approx(7 + 30 + 10, rel=1e-15)


def test_calling_an_algorithm_counts_only_hand_written_ones():
    """A hand-written algorithm gets a counting wrapper (the same one on every call, so its scratch
    arrays are reused); a native one gets the communicator itself."""
    from ccbench.algorithms.registry import Algorithm

    seen = []

    def fn(comm, *args, **kwargs):
        seen.append((comm, args, kwargs))
        return "done"

    class Comm:
        def Get_rank(self):  # noqa: N802
            return 0

        def Get_size(self):  # noqa: N802
            return 1

        def Waitall(self, reqs):  # noqa: N802
            pass

    comm = Comm()
    hand = Algorithm("bcast", "x", fn, "x")
    assert hand(comm, 1, root=2) == "done" and hand(comm, 1, root=2) == "done"
    assert isinstance(seen[0][0], CountedComm) and seen[0][0].comm is comm
    assert seen[1][0] is seen[0][0] and seen[0][1:] == ((1,), {"root": 2})
    native = Algorithm("bcast", "y", fn, "y", native=True)
    native(comm, 5)
    assert seen[2] == (comm, (5,), {})


def test_unsupported_says_why():
    """Below the collective's minimum rank count the reason names it; otherwise `supports` decides."""
    from ccbench.algorithms.registry import Algorithm

    def only_sum(P, op):
        return None if op == "sum" else f"{op} not at {P}"

    ping = Algorithm("pingpong", "x", print, "x", supports=only_sum)
    assert ping.unsupported(1, "sum") == "pingpong needs at least 2 ranks"
    assert ping.unsupported(2, "sum") is None
    assert ping.unsupported(3, "max") == "max not at 3"
    assert Algorithm("pingpong", "y", print, "y").unsupported(2) is None
    assert Algorithm("allreduce", "z", print, "z").unsupported(1, "prod") is None


def test_register_records_every_field_and_refuses_a_second_entry(monkeypatch):
    """Every keyword lands in its field; the summary is the stripped first docstring line (the
    name without a docstring); a second registration of a name is refused."""
    from ccbench.algorithms.registry import REGISTRY, Cost, register

    monkeypatch.setitem(REGISTRY, "bcast", dict(REGISTRY["bcast"]))

    def cost(P, n):
        return Cost(P, n)

    def supports(P, op):
        return None

    settings = {"mpich": {"A": "1"}}

    def fn(comm, buf, root=0):
        """  First line of the doc.

        More.
        """

    out = register("bcast", "test_alg", cost=cost, formula="P a", source="here", supports=supports,
                   native=True, settings=settings)(fn)
    assert out is fn
    alg = REGISTRY["bcast"]["test_alg"]
    assert (alg.collective, alg.name, alg.fn, alg.summary) == ("bcast", "test_alg", fn, "First line of the doc.")
    assert (alg.native, alg.cost, alg.formula, alg.source, alg.supports, alg.settings) == (
        True, cost, "P a", "here", supports, settings)
    with pytest.raises(ValueError, match=r"^bcast/test_alg registered twice$"):
        register("bcast", "test_alg")(fn)

    def bare(comm, buf, root=0):
        pass

    register("bcast", "bare")(bare)
    b = REGISTRY["bcast"]["bare"]
    assert b.summary == "bare" and (b.native, b.cost, b.formula, b.source, b.supports, b.settings) == (
        False, None, "", "", None, None)


def test_get_names_the_choices():
    """An unknown collective or algorithm is a UsageError that lists the valid names."""
    from ccbench.algorithms.registry import REGISTRY
    from ccbench.core.errors import UsageError

    assert get("gather", "binomial").fn is REGISTRY["gather"]["binomial"].fn
    with pytest.raises(UsageError) as e:
        get("gathr", "binomial")
    assert str(e.value) == f"unknown collective 'gathr'; choose from {', '.join(REGISTRY)}"
    with pytest.raises(UsageError) as e:
        get("gather", "binomal")
    assert str(e.value) == f"unknown algorithm 'binomal' for gather; choose from {', '.join(REGISTRY['gather'])}"
    assert e.value.__suppress_context__


@pytest.mark.parametrize(("coll", "name"), MINE, ids=lambda v: str(v))
def test_hand_written_entries_carry_their_metadata(coll, name):
    """Each hand-written entry: its keys, not native, a cost, a formula and a source, and the
    docstring's first line as summary."""
    alg = get(coll, name)
    assert (alg.collective, alg.name, alg.native) == (coll, name, False)
    assert alg.cost is not None and alg.formula and alg.source
    assert alg.summary == alg.fn.__doc__.strip().splitlines()[0]


class _ScratchSpy(CountedComm):
    """A counting communicator that notes which scratch slots an algorithm asks for."""

    __slots__ = ("slots",)

    def __init__(self, comm):
        super().__init__(comm)
        self.slots = set()

    def scratch(self, n, dtype, slot=0):
        self.slots.add((slot, np.dtype(dtype)))
        return super().scratch(n, dtype, slot)


def test_binomial_reduce_copies_the_input_only_where_it_accumulates():
    """Only the non-root ranks that receive in the binomial reduce (even relative ranks with a rank above them)
    copy their input into a work array (scratch slot 1); a leaf sends straight from its send buffer, no copy."""
    dt = np.dtype("int32")
    for P in range(1, 10):
        for root in _roots(P):
            _, plans, _ = _executed("reduce", "binomial", P, 3, root)

            def body(comm, P=P, root=root):
                cc = _ScratchSpy(comm)
                bufs = COLLECTIVES["reduce"].make_buffers(3, P, comm.rank, dt, "sum", root, False, None)
                bufs.fill()
                get("reduce", "binomial")(cc, *bufs.args, **bufs.kwargs)
                return (1, dt) in cc.slots

            copied, _ = simulate(P, body)
            for rank in range(P):
                receives = any(recvs for _, recvs in plans[rank])
                assert copied[rank] == (receives and rank != root), (P, root, rank)


def test_pof2_group_is_mpichs_fold():
    """P = pof2 + rem ranks: pairs (2i, 2i+1) for i < rem, represented by the odd rank (the even one
    when it is `keep`) as group rank i, the even one out (newrank -1) with the other as partner;
    ranks from 2 rem on are group rank rank - rem with no partner (-1)."""
    from ccbench.algorithms.reduce_scatter import pof2_group

    for P in range(1, 18):
        pof2 = 1 << (P.bit_length() - 1)
        rem = P - pof2
        for keep in (-1, *range(P)):
            rep = [2 * i if keep == 2 * i else 2 * i + 1 for i in range(rem)]
            members = tuple(rep + list(range(2 * rem, P)))
            assert len(members) == pof2
            for rank in range(P):
                if rank < 2 * rem:
                    want = (members, rank // 2 if rank in rep else -1, rank ^ 1)
                else:
                    want = (members, rank - rem, -1)
                assert pof2_group(P, rank, keep) == want, (P, rank, keep)
    assert pof2_group(6, 0) == pof2_group(6, 0, -1)  # no root kept by default
