"""Every hand-written algorithm's closed-form cost against its executed schedule, up to 4,096 ranks."""

# The simulator (`ccbench.algorithms.simcomm`) moves data between one thread per rank,
# which limits it to a few dozen ranks.  Here each rank's code runs on its own, one rank
# after the other, against a stand-in communicator that moves no data: every Send, Recv,
# Sendrecv and Waitall only appends the batch it completes, ``(sends, recvs)`` of
# ``(peer, nbytes, (context, tag))``, to the rank's plan, as the simulator records it.
# The algorithms' control flow depends on ranks and sizes, never on the data, so this is
# the schedule they execute (`test_stand_in_records_the_simulators_schedule`).  The real
# counting layer (`ccbench.algorithms.p2p.CountedComm`) wraps the stand-in, so the per-rank
# counters are the ones the suite reports, and `critical_path` walks the plans.  Split and
# Split_type (the hierarchical allreduce's node communicators) are collective: a rank that
# reaches one before every member has stops there, and the call is run again once every
# member's (color, key) is known.
#
# Counts that every block split of an algorithm divides give even blocks, for which the
# closed forms are exact (`Cost`); other counts give blocks of floor or ceil(count / blocks)
# elements, so the counted bytes lie between the closed forms at those two even counts,
# and the steps are the same.


from collections import defaultdict

import numpy as np
import pytest
from conftest import HANDWRITTEN

from ccbench.algorithms import allreduce as allreduce_mod
from ccbench.algorithms import bcast as bcast_mod
from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm, critical_path, pof2_below
from ccbench.core.collectives import COLLECTIVES

# No data moves: an algorithm reduces into scratch buffers that no message filled, so their
# values are meaningless and may overflow; only the plans are checked here.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")

# -- the stand-in communicator --------------------------------------------------------------


class _SplitPending(Exception):  # noqa: N818 - control flow, not an error
    """A rank reached a Split whose other members have not all arrived yet."""


class _Request:
    __slots__ = ("msg", "send")

    def __init__(self, send: bool, msg: tuple) -> None:
        self.send, self.msg = send, msg

    def Free(self) -> None:  # noqa: N802 - a persistent request released
        pass


class _World:
    """The plans of every world rank, and the Splits resolved so far (kept across reruns)."""

    def __init__(self, size: int, ranks_per_node: int | None) -> None:
        self.size, self.ranks_per_node = size, ranks_per_node
        self.splits: dict[tuple, dict] = {}
        self.next_ctx = 1  # context id 0 is the world's
        self.plans: list[list] = []


class _PlanComm:
    """One rank's communicator that records its batches instead of moving data."""

    COMM_TYPE_SHARED = "shared"
    UNDEFINED = -32766

    def __init__(self, world: _World, rank: int, group: tuple | None = None, ctx: int = 0) -> None:
        self.world, self.rank, self.group, self.ctx = world, rank, group, ctx
        self.size = world.size if group is None else len(group)
        self.wrank = rank if group is None else group[rank]
        self._nsplits = 0
        self._plan = world.plans[self.wrank]

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py naming
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return self.size

    def _msg(self, peer: int, buf, tag: int) -> tuple:
        assert 0 <= peer < self.size, f"rank {self.rank}: peer {peer} outside 0..{self.size - 1}"
        return (peer if self.group is None else self.group[peer], buf.nbytes, (self.ctx, tag))

    def Isend(self, buf, dest: int, tag: int = 0) -> _Request:  # noqa: N802
        return _Request(True, self._msg(dest, buf, tag))

    def Irecv(self, buf, source: int, tag: int = 0) -> _Request:  # noqa: N802
        return _Request(False, self._msg(source, buf, tag))

    Send_init, Recv_init = Isend, Irecv  # persistent requests: the same messages, recorded at each Waitall

    def Startall(self, requests) -> None:  # noqa: N802
        pass

    def Waitall(self, requests) -> None:  # noqa: N802
        self._plan.append((tuple(r.msg for r in requests if r.send),
                           tuple(r.msg for r in requests if not r.send)))

    def Send(self, buf, dest: int, tag: int = 0) -> None:  # noqa: N802
        self._plan.append(((self._msg(dest, buf, tag),), ()))

    def Recv(self, buf, source: int, tag: int = 0) -> None:  # noqa: N802
        self._plan.append(((), (self._msg(source, buf, tag),)))

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=0, recvtag=0) -> None:  # noqa: N802
        self._plan.append(((self._msg(dest, sendbuf, sendtag),),
                           (self._msg(source, recvbuf, recvtag),)))

    def Split(self, color: int = 0, key: int = 0) -> "_PlanComm | None":  # noqa: N802
        """MPI_Comm_split, resolved once every member has called it (see the top of this file)."""
        w = self.world
        entry = w.splits.setdefault((self.ctx, self._nsplits), {"args": {}, "result": None})
        self._nsplits += 1
        if entry["result"] is None:
            entry["args"][self.rank] = (color, key)
            if len(entry["args"]) < self.size:
                raise _SplitPending
            groups = defaultdict(list)
            for r, (c, k) in entry["args"].items():
                if c != self.UNDEFINED:
                    groups[c].append((k, r))
            entry["result"] = {}
            for c in sorted(groups):
                members = tuple(r if self.group is None else self.group[r] for _, r in sorted(groups[c]))
                entry["result"][c] = (w.next_ctx, members)
                w.next_ctx += 1
        mine = entry["result"].get(color)
        if mine is None:
            return None
        ctx, members = mine
        return _PlanComm(w, members.index(self.wrank), members, ctx)

    def Split_type(self, split_type, key: int = 0, info=None) -> "_PlanComm | None":  # noqa: N802
        """COMM_TYPE_SHARED: nodes of `ranks_per_node` consecutive world ranks, as the simulator."""
        assert split_type == self.COMM_TYPE_SHARED, split_type
        rpn = self.world.ranks_per_node
        return self.Split(0 if rpn is None else self.wrank // rpn, key)


def _buffers(coll: str, count: int, P: int, rank: int, root: int, dt) -> tuple[tuple, dict]:
    """One rank's arguments, out of place, with the shapes of `COLLECTIVES[coll].make_buffers`."""
    def e(k):
        return np.zeros(k, dt)
    red = {"op": "sum"}
    if coll == "barrier":
        return (), {}
    if coll == "bcast":
        return (e(count),), {"root": root}
    if coll == "allreduce":
        return (e(count), e(count)), red
    if coll == "reduce":
        return (e(count), e(count) if rank == root else None), red | {"root": root}
    if coll == "reduce_scatter":
        return (e(P * count), e(count)), red
    if coll == "allgather":
        return (e(count), e(P * count)), {}
    if coll == "alltoall":
        return (e(P * count), e(P * count)), {}
    if coll == "gather":
        return (e(count), e(P * count) if rank == root else None), {"root": root}
    if coll == "scatter":
        return (e(P * count) if rank == root else None, e(count)), {"root": root}
    even = (count,) * P  # the v-collectives with uniform counts: the even blocks (uneven ones: test_uneven.py)
    if coll == "allgatherv":
        return (e(count), e(P * count)), {"counts": even}
    if coll == "alltoallv":
        return (e(P * count), e(P * count)), {"sendcounts": even, "recvcounts": even}
    if coll == "gatherv":
        return (e(count), e(P * count) if rank == root else None), {"counts": even, "root": root}
    if coll == "scatterv":
        return (e(P * count) if rank == root else None, e(count)), {"counts": even, "root": root}
    if coll == "reduce_scatterv":
        return (e(P * count), e(count)), red | {"counts": even}
    raise KeyError(f"no buffers for {coll}: add them here")


def _check_matched(plans) -> None:
    """Every message sent is received, in order, with the same size (the simulator checks this)."""
    sent, got = defaultdict(list), defaultdict(list)
    for rank, plan in enumerate(plans):
        for sends, recvs in plan:
            for peer, nbytes, tag in sends:
                sent[(rank, peer, tag)].append(nbytes)
            for peer, nbytes, tag in recvs:
                got[(peer, rank, tag)].append(nbytes)
    assert sent == got, "sends and receives do not match"


def record(coll, name, P, count, *, dtype="float32", root=0, ranks_per_node=None, ranks=None):
    """(counters per rank, plans per world rank) of one call; `ranks`: run only those ranks."""
    alg = get(coll, name)
    dt = np.dtype(dtype)
    world = _World(P, ranks_per_node)
    who = range(P) if ranks is None else ranks
    while True:
        world.plans = [[] for _ in range(P)]
        counts, pending = {}, False
        for rank in who:
            cc = CountedComm(_PlanComm(world, rank))
            args, kwargs = _buffers(coll, count, P, rank, root, dt)
            try:
                alg(cc, *args, **kwargs)
            except _SplitPending:
                pending = True
            counts[rank] = cc.counts
        if not pending:
            return counts, world.plans
        assert ranks is None, "a Split needs every member: run every rank"


def test_stand_in_records_the_simulators_schedule():
    """On 7 ranks the stand-in gives the simulator's counters and plans, batch for batch."""
    from simcheck import run_sim

    for coll, name in (("allreduce", "rabenseifner"), ("allgather", "recursive_doubling"),
                       ("bcast", "pipelined_chain"), ("alltoall", "bruck")):
        batches: list = []
        _, sim_counts, _ = run_sim(coll, name, 7, 5, "float32", batches=batches)
        counts, plans = record(coll, name, 7, 5)
        assert [c.as_tuple() for c in sim_counts] == [counts[r].as_tuple() for r in range(7)]
        assert plans == batches
    batches = []
    from ccbench.algorithms.simcomm import simulate

    def body(comm):
        cc = CountedComm(comm)
        x = np.zeros(6, np.float32)
        get("allreduce", "hierarchical")(cc, x, np.zeros_like(x))
        return cc.counts.as_tuple()

    sim, _ = simulate(10, body, ranks_per_node=4, batches=batches)
    counts, plans = record("allreduce", "hierarchical", 10, 6, ranks_per_node=4)
    assert sim == [counts[r].as_tuple() for r in range(10)]
    assert critical_path(plans) == critical_path(batches)
    with pytest.raises(AssertionError, match="every member"):
        record("allreduce", "hierarchical", 10, 6, ranks_per_node=4, ranks=(0, 4))


def test_unmatched_messages_are_caught():
    """A send nobody receives, or a receive of another size, fails the schedule check."""
    ok = [[(((1, 8, (0, 0)),), ())], [((), ((0, 8, (0, 0)),))]]
    _check_matched(ok)
    for bad in ([ok[0], []], [ok[0], [((), ((0, 4, (0, 0)),))]]):
        with pytest.raises(AssertionError, match="do not match"):
            _check_matched(bad)


# -- what each algorithm is checked at --------------------------------------------------------

ALL_P = (2, 3, 5, 7, 8, 12, 16, 31, 64, 100, 255, 256, 1000, 1024, 4095, 4096)
# A rank of these makes few steps (a root up to P-1) and no O(P) set-up: whole schedules up to 4,096 ranks.  (Both
# sets name blocking algorithms; their persistent and non-blocking forms go with them, `_key`.)
CHEAP = {
    ("bcast", "binomial"), ("bcast", "linear"),
    ("bcast", "pipelined_chain"),
    ("scatter", "linear"), ("scatter", "binomial"), ("gather", "linear"),
    ("gather", "binomial"), ("reduce", "binomial"), ("reduce", "linear"),
    ("allreduce", "binomial"), ("allreduce", "linear"), ("allreduce", "hierarchical"),
    ("gatherv", "linear"), ("gatherv", "binomial"), ("scatterv", "linear"), ("scatterv", "binomial"),
}
# Rings, pairwise and direct exchanges: every rank makes O(P) steps, so the schedule holds
# O(P^2) messages (2 million for the ring allreduce at 1,024 ranks, a minute here to record
# and walk).  Whole schedules up to 100 ranks; beyond, the traffic of a few ranks is counted
# (`test_busiest_rank_beyond_whole_schedules`).
QUADRATIC = {
    ("allreduce", "ring"), ("bcast", "scatter_allgather"), ("allgather", "ring"), ("allgather", "linear"),
    ("reduce_scatter", "pairwise"), ("alltoall", "pairwise"), ("alltoall", "linear"), ("allgatherv", "ring"),
    ("allgatherv", "linear"), ("alltoallv", "pairwise"), ("alltoallv", "linear"), ("reduce_scatterv", "pairwise"),
    ("reduce_scatterv", "ring"),
}
SAMPLED_P = (255, 256, 1000, 1024, 4095, 4096)
# Everything else makes O(log P) steps per rank, some (MPICH's power-of-two fold, the
# double binary tree's round tables) with O(P) set-up work per rank: a second or more per
# call at 4,096 ranks, so whole schedules up to 1,024 ranks.
LOG_P = ALL_P[:14]
QUADRATIC_P = ALL_P[:10]

#: The reduce's Rabenseifner cost is stated for root 0 (its docstring): other roots are not checked.
ROOT_ZERO_ONLY = {("reduce", "rabenseifner")}


def _dtree_blocks(P: int, nbytes: int) -> int:
    """Two halves of C chunks each, C = ceil(n / (2 CHUNK_BYTES)) (the formula's C)."""
    return 2 * max(1, -(-nbytes // (2 * allreduce_mod.CHUNK_BYTES)))


#: Non-blocked algorithms that cut the vector into blocks: (P, nbytes) -> how many blocks.
SPLIT = {
    ("allreduce", "ring"): lambda P, n: P,
    ("allreduce", "ring-persistent"): lambda P, n: P,
    ("allreduce", "ring-nonblocking"): lambda P, n: P,
    ("bcast", "scatter_allgather"): lambda P, n: P,
    ("allreduce", "rabenseifner"): lambda P, n: pof2_below(P),
    ("reduce", "rabenseifner"): lambda P, n: pof2_below(P),
    ("allreduce", "double_binary_tree"): _dtree_blocks,
}


def _blocks(coll: str, name: str, P: int, nbytes: int, rpn: int | None) -> int:
    """How many near-equal blocks the algorithm cuts a non-blocked vector into (1: none)."""
    if COLLECTIVES[coll].blocked:
        return 1
    if (coll, name) == ("allreduce", "hierarchical"):  # Rabenseifner among the node leaders
        return pof2_below(1 if rpn is None else -(-P // rpn))
    return SPLIT.get((coll, name), lambda P, n: 1)(P, nbytes)


def _counts(coll: str, name: str, P: int, rpn: int | None = None) -> list[int]:
    """Counts (elements; per block for the blocked collectives): fewer at more ranks, for time."""
    if COLLECTIVES[coll].blocked:  # nbytes holds P whole blocks: every split is even
        return [1, 3] if P <= 100 else [3]
    u = _blocks(coll, name, P, 4, rpn)
    if u == 1:
        return [1, 7, 1001] if P <= 100 else [1001]
    if P <= 16:  # one element, even blocks, and blocks of q and q+1 elements
        return sorted({1, u, 3 * u, 3 * u + 1, 1001})
    return [u, 3 * u + 1]


def _key(coll: str, name: str) -> tuple[str, str]:
    """The algorithm whose schedule this one's is: a persistent or non-blocking form sends its blocking twin's
    messages, so it is sorted (CHEAP, QUADRATIC) with its twin."""
    return coll, name.removesuffix("-persistent").removesuffix("-nonblocking")


def cases(coll: str, name: str):
    """(P, count, ranks_per_node, root) of every check of one algorithm."""
    key = _key(coll, name)
    ps = ALL_P if key in CHEAP else QUADRATIC_P if key in QUADRATIC else LOG_P
    other_root = COLLECTIVES[coll].rooted and key not in ROOT_ZERO_ONLY
    for P in ps:
        if coll == "barrier":  # no data: the count does not matter
            yield P, 0, None, 0
            continue
        if key == ("allreduce", "hierarchical"):  # one node, one rank per node, and between
            if P > 1024:  # 342 nodes of 12, the last one short, uneven blocks; 64 nodes of 64
                rpn = 12 if P % 2 else 64
                yield P, _counts(coll, name, P, rpn)[-1 if P % 2 else 0], rpn, 0
                continue
            for rpn in (None, 1, 4, 12) if P <= 100 else (12, 64):
                for count in _counts(coll, name, P, rpn):
                    yield P, count, rpn, 0
            continue
        counts = _counts(coll, name, P)
        if key not in CHEAP and P >= 1000:  # for time: the first count only (even blocks)
            counts = counts[:1]
        for count in counts:
            yield P, count, None, 0
        if other_root and P <= 256:
            yield P, _counts(coll, name, P)[-1], None, P // 2 + 1 if P > 2 else 1
    if key == ("bcast", "pipelined_chain"):  # three segments of the real SEGMENT_BYTES
        for P in (3, 12, 64):
            yield P, 3 * bcast_mod.SEGMENT_BYTES // 4 - 5, None, 0
    if key == ("allreduce", "double_binary_tree"):  # three chunks per tree of the real CHUNK_BYTES
        for P in (3, 12, 64):
            yield P, 3 * allreduce_mod.CHUNK_BYTES // 2, None, 0


def _closed(alg, P: int, nbytes: int, rpn: int | None):
    return alg.cost(P, nbytes) if rpn is None else alg.cost(P, nbytes, ranks_per_node=rpn)


def _busiest(counts) -> tuple:
    return tuple(max(getattr(c, f) for c in counts) for f in ("steps", "step_bytes", "reduced_bytes"))


def check(coll: str, name: str, P: int, count: int, rpn: int | None = None, root: int = 0) -> list[str]:
    """What differs between the closed form and the executed schedule (empty: nothing)."""
    alg = get(coll, name)
    counts, plans = record(coll, name, P, count, root=root, ranks_per_node=rpn)
    _check_matched(plans)
    got = _busiest(counts.values())
    path = critical_path(plans)
    nbytes_of = COLLECTIVES[coll].nbytes_for
    cost = _closed(alg, P, nbytes_of(count, 4, P), rpn)
    timing = cost.timing_cost
    where = f"P={P} count={count}" + (f" ranks_per_node={rpn}" if rpn else "") + (f" root={root}" if root else "")
    bad = []
    # the double binary tree sums its lock-step rounds' costliest ranks: an upper bound (`Cost`)
    bound = cost.critical is not None and name == "double_binary_tree"
    u = _blocks(coll, name, P, nbytes_of(count, 4, P), rpn)
    q, r = divmod(count, u)
    if r == 0:  # even blocks: exact
        if got != pytest.approx(tuple(cost[:3]), rel=1e-12, abs=1e-9):
            bad.append(f"{where}: busiest rank counted {got}, closed form {tuple(cost[:3])}")
        want = (timing.alpha, timing.beta)
        if not (path[0] <= want[0] and path[1] <= want[1] if bound
                else path == pytest.approx(want, rel=1e-12, abs=1e-9)):
            bad.append(f"{where}: critical path executed {path}, closed form {want}")
        return bad
    # blocks of q or q+1 elements: the closed forms at q*u and (q+1)*u elements bound the bytes
    lo, hi = (_closed(alg, P, nbytes_of(k * u, 4, P), rpn) for k in (q, q + 1))
    assert _blocks(coll, name, P, nbytes_of(q * u, 4, P), rpn) == u == \
        _blocks(coll, name, P, nbytes_of((q + 1) * u, 4, P), rpn), "pick a count whose neighbours split alike"
    if got[0] != cost.alpha or not all(a <= g <= b for a, g, b in zip(lo[1:3], got[1:], hi[1:3], strict=True)):
        bad.append(f"{where}: busiest rank counted {got}, closed form {tuple(cost[:3])}, "
                   f"bytes between {tuple(lo[1:3])} and {tuple(hi[1:3])}")
    steps_ok = path[0] <= timing.alpha if bound else path[0] == timing.alpha
    lo_beta = 0 if bound else lo.timing_cost.beta
    if not (steps_ok and lo_beta <= path[1] <= hi.timing_cost.beta):
        bad.append(f"{where}: critical path executed {path}, closed form {timing.alpha} steps, "
                   f"bytes between {lo_beta} and {hi.timing_cost.beta}")
    return bad


@pytest.mark.parametrize("coll,name", [pytest.param(c, n, id=f"{c}-{n}") for c, n in HANDWRITTEN])
def test_closed_form_equals_executed_schedule(coll, name):
    """Steps, bytes, reduced bytes and critical path of the closed form, at 2 to 4,096 ranks."""
    assert get(coll, name).cost is not None, "every hand-written algorithm has a closed form"
    bad = [msg for P, count, rpn, root in cases(coll, name)
           for msg in check(coll, name, P, count, rpn, root)]
    assert not bad, "\n".join(bad)


def _beyond(coll: str, name: str) -> tuple[int, ...]:
    """Rank counts above the whole-schedule checks of this algorithm."""
    key = _key(coll, name)
    return () if key in CHEAP else SAMPLED_P if key in QUADRATIC else ALL_P[len(LOG_P):]


#: Where the busiest rank sits irregularly (the docstrings say so): every rank is counted.
IRREGULAR = {("allgather", "recursive_doubling", 4095), ("allreduce", "double_binary_tree", 4095)}


@pytest.mark.parametrize("coll,name", [pytest.param(c, n, id=f"{c}-{n}") for c, n in HANDWRITTEN
                                       if _beyond(c, n)])
def test_busiest_rank_beyond_whole_schedules(coll, name):
    """Ranks 0, 1, P/2 and P-1 (every rank where irregular) within the closed form, the busiest equal."""
    # the busiest of the four: the root, an odd rank of MPICH's fold, any rank of a symmetric schedule
    bad = []
    for P in _beyond(coll, name):
        for count in _counts(coll, name, P):
            if count % _blocks(coll, name, P, 4 * count, None):
                continue  # uneven blocks: the whole-schedule checks cover them
            ranks = None if (coll, name, P) in IRREGULAR else (0, 1, P // 2, P - 1)
            counts, _ = record(coll, name, P, count, ranks=ranks)
            cost = get(coll, name).cost(P, COLLECTIVES[coll].nbytes_for(count, 4, P))
            each = {r: _busiest([c]) for r, c in counts.items()}
            if _busiest(counts.values()) != pytest.approx(tuple(cost[:3]), rel=1e-12) or any(
                    any(g > w * (1 + 1e-12) for g, w in zip(v, cost[:3], strict=True)) for v in each.values()):
                shown = each if ranks else "every rank"
                bad.append(f"P={P} count={count}: busiest counted {_busiest(counts.values())} "
                           f"({shown}), closed form {tuple(cost[:3])}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("coll,name,attr,small", [
    ("bcast", "pipelined_chain", "SEGMENT_BYTES", 64),
    ("allreduce", "double_binary_tree", "CHUNK_BYTES", 64),
])
def test_pipelines_of_many_segments(coll, name, attr, small, monkeypatch):
    """With a 64-byte segment (chunk) the pipelines fill and drain at scale for small counts."""
    monkeypatch.setattr(bcast_mod if coll == "bcast" else allreduce_mod, attr, small)
    key = (coll, name)
    bad = []
    for P in ALL_P if key in CHEAP else LOG_P:
        if coll == "bcast":  # 16 float32 per segment: 2, 63, 7 and 3 segments
            counts = [17, 1001] if P <= 100 else [100] if P <= 1024 else [33]
        else:  # 16 float32 per chunk, C = ceil(count / 32) per tree: C = 2, 2, 10, 10, 3
            counts = [61, 64, 317, 320] if P <= 16 else [317] if P <= 256 else [96]
        for count in counts:
            bad += check(coll, name, P, count)
    assert not bad, "\n".join(bad)


# -- known answers at the edges: empty vectors, odd bytes, the chunk count ----------------------


def test_zero_bytes_move_and_reduce_nothing():
    """At 0 bytes every closed form (busiest rank and critical path) moves and reduces no byte."""
    bad = []
    for coll, name in HANDWRITTEN:
        alg = get(coll, name)
        for P in (2, 3, 5, 12, 100):
            if alg.unsupported(P, "sum"):
                continue
            cost = alg.cost(P, 0)
            for c in (cost, cost.timing_cost):
                if (c.beta, c.gamma) != (0, 0):
                    bad.append(f"{coll}/{name} P={P}: {c}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", [n for c, n in HANDWRITTEN if c == "allreduce"])
def test_allreduce_of_an_empty_vector_sends_nothing(name):
    """Every hand-written allreduce returns at once on 0 elements: no rank makes a step."""
    for P in (2, 3, 5, 8, 12):
        counts, plans = record("allreduce", name, P, 0)
        assert not any(any(c.as_tuple()) for c in counts.values()), P  # no message, byte or reduction
        assert plans == [[] for _ in range(P)]


def test_double_binary_tree_of_two_ranks_pipelines_its_chunks():
    """P = 2: each tree is one edge, rank 0 the root of tree 0 and the leaf of tree 1 (rank 1 the
    other way round).  With C chunks per tree a rank sends its leaf chunks up in rounds 0..C-1 and
    the root chunks down in rounds 1..C, and receives the same way: rounds 0 and C carry one message
    each way, the C-1 rounds between two: 2C steps, n bytes each way, n/2 reduced (the root's half).
    Both ranks do the same in every round: the critical path is the busiest rank's."""
    chunk = allreduce_mod.CHUNK_BYTES
    alg = get("allreduce", "double_binary_tree")
    for C in (1, 3):
        n = 2 * C * chunk
        assert alg.cost(2, n) == (2 * C, n, n / 2, None)
        counts, plans = record("allreduce", "double_binary_tree", 2, n // 4)
        assert [_busiest([counts[r]]) for r in (0, 1)] == [(2 * C, n, n // 2)] * 2
        assert critical_path(plans) == (2 * C, n)


def test_double_binary_tree_of_odd_bytes():
    """Bytes (uint8 elements): an odd count gives tree 0 the larger half, one byte more, exactly."""
    alg = get("allreduce", "double_binary_tree")
    bad = []
    for P in (2, 3, 5, 7, 12):
        for count in (1, 3, 7, 1001):
            counts, plans = record("allreduce", "double_binary_tree", P, count, dtype="uint8")
            _check_matched(plans)
            cost = alg.cost(P, count)
            got, path = _busiest(counts.values()), critical_path(plans)
            if got != tuple(cost[:3]) or not (path[0] <= cost.timing_cost.alpha and path[1] <= cost.timing_cost.beta):
                bad.append(f"P={P} count={count}: counted {got}, path {path}, closed form {cost}")
    assert not bad, "\n".join(bad)


# Hand-counted (alpha, beta, gamma) of the busiest rank from the textbook schedules (Thakur,
# Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009), n the vector's bytes: the ring makes 2(P-1)
# steps of n/P; recursive doubling lg p' steps of n, plus MPICH's fold (a step of n in, n reduced)
# and unfold (a step of n out) when P is not a power of two p'; Rabenseifner halves then doubles
# (2 lg p' steps, 2n(p'-1)/p' bytes) with the same fold; the binomial tree and the linear
# allreduce send and receive n on each of 2 ceil(lg P) and 2(P-1) steps at the root; the
# hierarchical one adds a binomial reduce and broadcast on a node of m ranks to Rabenseifner
# among the ceil(P/m) node leaders.
HAND_COUNTED = [
    ("ring", 1, 1000, None, (0, 0, 0)),
    ("ring", 2, 1024, None, (2, 1024, 512)),
    ("ring", 3, 1200, None, (4, 1600, 800)),
    ("ring", 8, 8000, None, (14, 14000, 7000)),
    ("recursive_doubling", 1, 100, None, (0, 0, 0)),
    ("recursive_doubling", 2, 100, None, (1, 100, 100)),
    ("recursive_doubling", 5, 100, None, (4, 400, 300)),
    ("recursive_doubling", 6, 100, None, (4, 400, 300)),
    ("recursive_doubling", 8, 100, None, (3, 300, 300)),
    ("rabenseifner", 1, 4000, None, (0, 0, 0)),
    ("rabenseifner", 2, 4000, None, (2, 4000, 2000)),
    ("rabenseifner", 6, 4000, None, (6, 14000, 7000)),
    ("rabenseifner", 8, 8000, None, (6, 14000, 7000)),
    ("binomial", 1, 100, None, (0, 0, 0)),
    ("binomial", 5, 100, None, (6, 600, 300)),
    ("binomial", 8, 100, None, (6, 600, 300)),
    ("binomial", 9, 100, None, (8, 800, 400)),
    ("linear", 2, 100, None, (2, 200, 100)),
    ("linear", 5, 100, None, (8, 800, 400)),
    ("hierarchical", 8, 100, None, (6, 600, 300)),
    ("hierarchical", 3, 100, 8, (4, 400, 200)),
    ("hierarchical", 12, 100, 4, (8, 700, 350)),
    ("hierarchical", 10, 100, 4, (8, 700, 350)),
    ("hierarchical", 16, 100, 4, (8, 550, 275)),
]


@pytest.mark.parametrize(("name", "P", "nbytes", "rpn", "expected"), HAND_COUNTED)
def test_allreduce_closed_forms_equal_hand_counts(name, P, nbytes, rpn, expected):
    cost = _closed(get("allreduce", name), P, nbytes, rpn)
    assert tuple(cost[:3]) == pytest.approx(expected, abs=1e-9) and cost.critical is None
