"""Sub-communicators on the simulator, node_comms(), and the hierarchical allreduce."""

import numpy as np
import pytest

from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.registry import cost_at
from ccbench.algorithms.simcomm import COMM_TYPE_SHARED, UNDEFINED, SimDeadlock, simulate
from ccbench.core.collectives import COLLECTIVES


def _run_hierarchical(P, ranks_per_node, count, dtype="float64", op="sum", in_place=False):
    """(nwrong per rank, counts per rank) of one hierarchical allreduce on simulated nodes."""
    alg = get("allreduce", "hierarchical")
    coll = COLLECTIVES["allreduce"]

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.make_buffers(count, P, comm.rank, np.dtype(dtype), op, 0, in_place, None)
        wrong = 0
        for _ in range(2):  # the second call reuses the cached node communicators
            bufs.fill()
            cc.counts.reset()
            alg(cc, *bufs.args, **bufs.kwargs)
            wrong += bufs.nwrong()
        return wrong, cc.counts

    results, _ = simulate(P, body, ranks_per_node=ranks_per_node)
    return [r[0] for r in results], [r[1] for r in results]


@pytest.mark.parametrize("ranks_per_node", [1, 2, 3])
@pytest.mark.parametrize("P", range(1, 10))
def test_hierarchical_exact(P, ranks_per_node):
    for count in sorted({0, 1, P, P + 1, 1001}):
        for in_place in (False, True):
            wrong, _ = _run_hierarchical(P, ranks_per_node, count, in_place=in_place)
            assert sum(wrong) == 0, (count, in_place, wrong)


@pytest.mark.parametrize("ranks_per_node", [2, 3])
@pytest.mark.parametrize("P", [4, 7])
def test_hierarchical_every_dtype_and_op(P, ranks_per_node):
    for dtype in ("uint8", "int32", "int64", "float32", "float64"):
        for op in ("sum", "prod", "min", "max"):
            wrong, _ = _run_hierarchical(P, ranks_per_node, 13, dtype, op, in_place=op == "min")
            assert sum(wrong) == 0, (dtype, op, wrong)


@pytest.mark.parametrize("ranks_per_node", [None, 1, 2, 3, 4])
@pytest.mark.parametrize("P", range(1, 10))
def test_hierarchical_cost_equals_counted_traffic(P, ranks_per_node):
    count = 5040
    _, counts = _run_hierarchical(P, ranks_per_node, count, "float32")
    got = (
        max(c.steps for c in counts),
        max(c.step_bytes for c in counts),
        max(c.reduced_bytes for c in counts),
    )
    want = cost_at(get("allreduce", "hierarchical").cost, P, count * 4, ranks_per_node=ranks_per_node)
    assert got == pytest.approx(tuple(want[:3])), (got, want)


def test_split_groups_orders_and_undefined():
    def body(comm):
        sub = comm.Split(comm.rank % 2, -comm.rank)  # key reverses the order
        none = comm.Split(UNDEFINED if comm.rank else 0, 0)
        return sub.rank, sub.size, sub.group, none is None

    results, _ = simulate(5, body)
    assert results[0] == (2, 3, (4, 2, 0), False)
    assert results[3] == (0, 2, (3, 1), True)
    assert [r[3] for r in results] == [False, True, True, True, True]


@pytest.mark.parametrize("ranks_per_node,nodes", [(None, [[0, 1, 2, 3, 4]]),
                                                  (2, [[0, 1], [2, 3], [4]]),
                                                  (5, [[0, 1, 2, 3, 4]])])
def test_split_type_shared_makes_nodes(ranks_per_node, nodes):
    def body(comm):
        node = comm.Split_type(COMM_TYPE_SHARED, comm.rank)
        return list(node.group)

    results, _ = simulate(5, body, ranks_per_node=ranks_per_node)
    assert results == [next(n for n in nodes if r in n) for r in range(5)]


def test_contexts_keep_messages_apart():
    """The same (source, dest, tag) on two communicators matches within each one only."""

    def body(comm):
        sub = comm.Split(0, comm.rank)
        a = np.full(3, comm.rank + 10.0)
        b = np.full(3, comm.rank + 20.0)
        if comm.rank == 0:  # send on the world first, receive on the sub-comm first
            comm.Isend(a, 1, 7)
            sub.Send(b, 1, 7)
            return None
        got_sub, got_world = np.empty(3), np.empty(3)
        sub.Recv(got_sub, 0, 7)
        comm.Recv(got_world, 0, 7)
        return got_sub[0], got_world[0]

    results, messages = simulate(2, body)
    assert results[1] == (20.0, 10.0)
    assert {(m.source, m.dest) for m in messages} == {(0, 1)}


def test_sub_communicator_deadlock_is_reported():
    def body(comm):
        sub = comm.Split(0, comm.rank)
        sub.Recv(np.empty(1), (sub.rank + 1) % sub.size)

    with pytest.raises(SimDeadlock):
        simulate(3, body)


def test_node_comms_cached_and_counting_into_parent():
    def body(comm):
        cc = CountedComm(comm)
        node, leaders = cc.node_comms()
        again = cc.node_comms()
        assert again[0] is node and again[1] is leaders
        assert node.counts is cc.counts
        if leaders is not None:
            assert leaders.counts is cc.counts
            buf = np.zeros(4)
            peer = 1 - leaders.rank
            leaders.Sendrecv(buf, peer, 0, np.empty(4), peer, 0)
        return node.rank, node.size, None if leaders is None else leaders.rank, cc.counts.steps

    results, _ = simulate(4, body, ranks_per_node=2)
    assert results == [(0, 2, 0, 1), (1, 2, None, 0), (0, 2, 1, 1), (1, 2, None, 0)]
