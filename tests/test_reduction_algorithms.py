"""Focused checks of the hand-written reductions: schedules, trees, folds, op forms."""

from collections import Counter

import numpy as np
import pytest
from simcheck import run_sim

from ccbench.algorithms import allreduce as ar
from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.reduce_scatter import pof2_group
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES


def _steps(messages):
    """{step: [(source, dest, nbytes), ...]} of a simulated run."""
    out: dict = {}
    for m in messages:
        out.setdefault(m.step, []).append((m.source, m.dest, m.nbytes))
    return out


def test_ring_allreduce_trace_on_four_ranks():
    count = 400  # float64: n = 3200 bytes, blocks of 800
    wrong, counts, messages = run_sim("allreduce", "ring", 4, count)
    assert sum(wrong) == 0
    steps = _steps(messages)
    assert sorted(steps) == [1, 2, 3, 4, 5, 6]  # 3 reduce-scatter steps, then 3 allgather
    for msgs in steps.values():
        assert sorted((s, d) for s, d, _ in msgs) == [(0, 1), (1, 2), (2, 3), (3, 0)]
        assert {nb for *_, nb in msgs} == {800}
    n = count * 8
    for c in counts:
        assert (c.steps, c.bytes_sent, c.bytes_recv) == (6, 2 * n * 3 // 4, 2 * n * 3 // 4)
        assert c.reduced_bytes == n * 3 // 4


def test_recursive_halving_partners_and_sizes():
    P, count = 8, 10  # reduce-scatter input: 8 blocks of 10 float64 = 640 bytes
    wrong, _, messages = run_sim("reduce_scatter", "recursive_halving", P, count)
    assert sum(wrong) == 0
    steps = _steps(messages)
    assert sorted(steps) == [1, 2, 3]
    for step, distance, nbytes in ((1, 4, 320), (2, 2, 160), (3, 1, 80)):
        assert {abs(s - d) for s, d, _ in steps[step]} == {distance}
        assert {nb for *_, nb in steps[step]} == {nbytes}


def test_rabenseifner_allreduce_halves_then_doubles():
    wrong, _, messages = run_sim("allreduce", "rabenseifner", 8, 80)  # 640 bytes
    assert sum(wrong) == 0
    sizes = [{nb for *_, nb in msgs} for _, msgs in sorted(_steps(messages).items())]
    assert sizes == [{320}, {160}, {80}, {80}, {160}, {320}]


def test_fold_and_unfold_of_non_power_of_two():
    """P = 6: ranks 0 and 2 hand their vectors to 1 and 3 first and get the result last."""
    wrong, counts, messages = run_sim("allreduce", "recursive_doubling", 6, 5)
    assert sum(wrong) == 0
    steps = _steps(messages)
    first, last = steps[min(steps)], steps[max(steps)]
    # (4 and 5, unpaired, start their group exchange at once)
    assert sorted((s, d) for s, d, _ in first if s < 4) == [(0, 1), (2, 3)]
    assert sorted((s, d) for s, d, _ in last) == [(1, 0), (3, 2)]
    assert [c.steps for c in counts] == [2, 4, 2, 4, 2, 2]


def test_pof2_group_keeps_the_root():
    assert pof2_group(6, 0) == ((1, 3, 4, 5), -1, 1)
    assert pof2_group(6, 1) == ((1, 3, 4, 5), 0, 0)
    assert pof2_group(6, 5) == ((1, 3, 4, 5), 3, -1)
    members, newrank, partner = pof2_group(6, 2, keep=2)
    assert members == (1, 2, 4, 5) and newrank == 1 and partner == 3
    assert pof2_group(6, 3, keep=2)[1] == -1


def test_rabenseifner_reduce_root_in_a_folded_pair_stays_in_the_group():
    """P = 3, root 0: rank 1 hands its vector to the root, which then works with rank 2."""
    wrong, counts, messages = run_sim("reduce", "rabenseifner", 3, 8, root=0)
    assert sum(wrong) == 0
    pairs = Counter((m.source, m.dest) for m in messages)
    assert pairs == Counter({(1, 0): 1, (0, 2): 1, (2, 0): 2})  # fold, halving, gather


@pytest.mark.parametrize("P", range(1, 40))
def test_double_binary_tree_shapes(P):
    trees = ar._dtrees(P)
    for parents, children, heights, depths in trees:
        assert parents.count(-1) == 1
        for r in range(P):
            for c in children[r]:
                assert parents[c] == r
            assert len(children[r]) <= 2
        assert sorted(r for r in range(P) if parents[r] >= 0) == sorted(
            c for ch in children for c in ch
        )
        assert max(depths) == max(heights)  # every rank reached from the root
    leaf = [[not trees[t][1][r] for r in range(P)] for t in (0, 1)]
    inner_in_both = [r for r in range(P) if not leaf[0][r] and not leaf[1][r]]
    # complementary: a rank is an inner node of at most one tree (NCCL's shift for odd P
    # leaves rank 0, tree 0's root, inner in both)
    assert inner_in_both in ([], [0])
    if P % 2 == 0:
        assert inner_in_both == []


@pytest.mark.parametrize("P", [2, 3, 5, 8])
def test_double_binary_tree_pipelined_cost(P):
    """Several chunks per tree: still exact, and the cost equals the counted traffic."""
    nbytes = 3 * 2 * ar.CHUNK_BYTES  # 3 chunks per tree
    count = nbytes // 4
    wrong, counts, _ = run_sim("allreduce", "double_binary_tree", P, count, "float32")
    assert sum(wrong) == 0
    got = (max(c.steps for c in counts), max(c.step_bytes for c in counts),
           max(c.reduced_bytes for c in counts))
    assert got == pytest.approx(tuple(ar._dtree_cost(P, nbytes)[:3]))


@pytest.mark.parametrize("op", [np.add, "sum"])
def test_op_as_ufunc_or_name(op):
    coll = COLLECTIVES["allreduce"]

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.make_buffers(9, 3, comm.rank, np.dtype("int32"), "sum", 0, False, None)
        bufs.fill()
        get("allreduce", "ring")(cc, *bufs.args, op=op)
        return bufs.nwrong()

    results, _ = simulate(3, body)
    assert results == [0, 0, 0]


@pytest.mark.parametrize("name", ["ring", "rabenseifner", "double_binary_tree"])
def test_repeated_calls_reuse_scratch(name):
    """The timing loop calls an algorithm many times: scratch is allocated once."""
    coll = COLLECTIVES["allreduce"]

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.make_buffers(1001, 5, comm.rank, np.dtype("float64"), "sum", 0, False, None)
        ids, wrong = [], 0
        for _ in range(3):
            bufs.fill()
            get("allreduce", name)(cc, *bufs.args, **bufs.kwargs)
            wrong += bufs.nwrong()
            ids.append(sorted(id(a) for a in cc._scratch.values()))
        return wrong, ids

    results, _ = simulate(5, body)
    for wrong, ids in results:
        assert wrong == 0 and ids[0] == ids[1] == ids[2]


REDUCTIONS = [
    ("allreduce", name)
    for name in ("ring", "recursive_doubling", "rabenseifner", "binomial", "double_binary_tree",
                 "hierarchical", "linear")
] + [("reduce", name) for name in ("binomial", "linear", "rabenseifner")] + [
    ("reduce_scatter", name) for name in ("pairwise", "recursive_halving")
]


@pytest.mark.mpi
@pytest.mark.parametrize("coll,name", REDUCTIONS)
def test_under_mpi_exact(coll, name):
    """MPI tier: exact results under a real MPI (rendezvous-sized messages included)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    P, rank = comm.Get_size(), comm.Get_rank()
    spec = COLLECTIVES[coll]
    alg = get(coll, name)
    cc = CountedComm(comm)  # one wrapper, as the runner keeps: scratch and node comms cached
    mpi_ops = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
    cases = [(count, dtype, op) for count in (0, 1, P + 1, 1001)
             for dtype in ("uint8", "int32", "int64", "float32", "float64")
             for op in ("sum", "prod", "min", "max")] + [(70001, "float32", "sum")]
    failed = []
    for count, dtype, op in cases:
        for in_place in (False, True):
            for root in sorted({0, P - 1}) if spec.rooted else [0]:
                bufs = spec.make_buffers(count, P, rank, np.dtype(dtype), op, root, in_place,
                                         MPI.IN_PLACE)
                bufs.fill()
                alg(cc, *bufs.args, **dict(bufs.kwargs, op=mpi_ops[op]))
                if comm.allreduce(bufs.nwrong()):
                    failed.append((count, dtype, op, in_place, root))
    assert failed == []


def test_calling_an_algorithm_reuses_one_counting_wrapper():
    """ccbench.algorithms.get(...)(comm, ...) wraps a plain communicator once, keeping its scratch."""
    from ccbench.algorithms.p2p import counted
    from ccbench.algorithms.simcomm import SimWorld

    comm = SimWorld(1).comm(0)
    assert counted(comm) is counted(comm)
    assert counted(counted(comm)) is counted(comm)
