"""Focused checks of the data-movement algorithms: schedules, step counts, edge cases."""

import numpy as np
import pytest
from simcheck import run_sim

from ccbench.algorithms import REGISTRY, bcast, get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES

MOVEMENT = ("bcast", "scatter", "gather", "allgather", "alltoall", "barrier")
PARAMS = [
    pytest.param(coll, name, id=f"{coll}-{name}")
    for coll in MOVEMENT
    for name, alg in REGISTRY[coll].items()
    if not alg.native
]


def _ceil_lg(P):
    return (P - 1).bit_length()


def _max_counts(counts):
    return (max(c.steps for c in counts), max(c.step_bytes for c in counts))


def test_every_movement_algorithm_is_registered():
    want = {
        "bcast": {"binomial", "linear", "scatter_allgather", "pipelined_chain"},
        "allgather": {"ring", "recursive_doubling", "bruck", "linear"},
        "alltoall": {"pairwise", "bruck", "linear"},
        "gather": {"linear", "binomial"},
        "scatter": {"linear", "binomial"},
        "barrier": {"dissemination"},
    }
    for coll, names in want.items():
        assert names <= set(REGISTRY[coll]), coll
        for name in names:
            alg = REGISTRY[coll][name]
            assert alg.cost and alg.formula and alg.source and alg.summary, (coll, name)


@pytest.mark.parametrize("coll,name", PARAMS)
@pytest.mark.parametrize("P", [1, 2, 3, 7, 13, 16])
def test_larger_and_odd_rank_counts(coll, name, P):
    """Correct for rank counts beyond the shared tests' 1..9, several roots and counts."""
    roots = sorted({0, P // 2, P - 1}) if COLLECTIVES[coll].rooted else [0]
    for root in roots:
        for count in (0, 3, 17):
            for in_place in (False, True):
                wrong, _, _ = run_sim(coll, name, P, count, "int32", "sum", in_place, root)
                assert sum(wrong) == 0, (root, count, in_place, wrong)


@pytest.mark.parametrize("coll,name", PARAMS)
@pytest.mark.parametrize("P", [3, 6, 8])
def test_cost_does_not_depend_on_root_or_in_place(coll, name, P):
    """The closed form is stated for root 0 out of place; other roots and in place match."""
    alg = get(coll, name)
    count = 5040
    want = alg.cost(P, COLLECTIVES[coll].nbytes_for(count, 4, P))
    root = P - 2 if COLLECTIVES[coll].rooted else 0
    for in_place in (False, True):
        _, counts, _ = run_sim(coll, name, P, count, "float32", "sum", in_place, root)
        assert _max_counts(counts) == pytest.approx((want.alpha, want.beta)), in_place


@pytest.mark.parametrize("coll", ["allgather", "alltoall"])
@pytest.mark.parametrize("P", range(1, 34))
def test_bruck_takes_ceil_lg_p_steps(coll, P):
    """Bruck et al. 1997: ceil(lg P) rounds for every P, on every rank."""
    _, counts, _ = run_sim(coll, "bruck", P, 2, "uint8")
    assert {c.steps for c in counts} == {_ceil_lg(P)}


@pytest.mark.parametrize("P", [1, 2, 4, 8, 16, 32])
def test_alltoall_bruck_bytes_pof2(P):
    """For P a power of two Bruck's all-to-all moves half the data in each of lg P rounds."""
    alg = get("alltoall", "bruck")
    n = P * 8 * 4  # 8 float32 per block
    assert alg.cost(P, n).beta == pytest.approx(n / 2 * _ceil_lg(P))


def test_allgather_recursive_doubling_plan():
    """Powers of two: lg P Sendrecvs per rank; otherwise at most 2 floor(lg P) + 1 steps.

    Counted on every rank of a simulated run: a Send, a Recv and a Sendrecv are one step each,
    so steps == messages sent == messages received means every step was a Sendrecv."""
    for P in range(1, 65):
        lg = _ceil_lg(P)
        wrong, counts, _ = run_sim("allgather", "recursive_doubling", P, 1, "uint8")
        assert sum(wrong) == 0, P
        for rank, c in enumerate(counts):
            if P & (P - 1) == 0:
                assert c.steps == lg and c.msgs_sent == c.msgs_recv == lg, (P, rank)
            else:
                assert c.steps <= 2 * (P.bit_length() - 1) + 1, (P, rank)


def test_bcast_binomial_rounds():
    """The textbook schedule of P = 8 from the docstring, round by round."""
    _, _, messages = run_sim("bcast", "binomial", 8, 4)
    rounds = {}
    for m in messages:
        rounds.setdefault(m.step, set()).add((m.source, m.dest))
    assert rounds == {
        1: {(0, 4)},
        2: {(0, 2), (4, 6)},
        3: {(0, 1), (2, 3), (4, 5), (6, 7)},
    }


def test_gather_and_scatter_binomial_rounds():
    """Gather is the scatter tree run backwards: 4 blocks cross the root's link last."""
    _, _, msgs = run_sim("scatter", "binomial", 8, 1, "uint8")
    scatter = sorted((m.step, m.source, m.dest, m.nbytes) for m in msgs)
    assert scatter[0] == (1, 0, 4, 4)
    _, _, msgs = run_sim("gather", "binomial", 8, 1, "uint8")
    last = max(msgs, key=lambda m: m.step)
    assert (last.source, last.dest, last.nbytes) == (4, 0, 4)


def test_barrier_sends_empty_messages():
    for P in range(1, 10):
        _, counts, msgs = run_sim("barrier", "dissemination", P, 0)
        assert {c.steps for c in counts} == {_ceil_lg(P)}
        assert all(m.nbytes == 0 for m in msgs)
        assert len(msgs) == P * _ceil_lg(P)


@pytest.mark.parametrize("seg_bytes", [8, 64, 1024])
@pytest.mark.parametrize("P", range(1, 8))
def test_pipelined_chain_many_segments(monkeypatch, seg_bytes, P):
    """With small segments the chain is still exact, and its cost formula still holds."""
    monkeypatch.setattr(bcast, "SEGMENT_BYTES", seg_bytes)
    alg = get("bcast", "pipelined_chain")
    for count, dtype in ((0, "float64"), (1, "uint8"), (5040, "float32"), (1001, "int64")):
        wrong, counts, _ = run_sim("bcast", "pipelined_chain", P, count, dtype, root=P // 2)
        assert sum(wrong) == 0
        want = alg.cost(P, count * np.dtype(dtype).itemsize)
        assert _max_counts(counts) == (want.alpha, want.beta), (count, dtype)


def test_pipelined_chain_pipelines():
    """Segment k leaves the root in step k+1 and reaches rank r in step k+r."""
    P, nseg = 5, 6
    count = nseg * bcast.SEGMENT_BYTES  # uint8: one element per byte
    _, _, msgs = run_sim("bcast", "pipelined_chain", P, count, "uint8")
    assert max(m.step for m in msgs) == P - 2 + nseg
    assert len(msgs) == (P - 1) * nseg


@pytest.mark.parametrize("coll,name", PARAMS)
def test_repeated_calls_reuse_scratch(coll, name):
    """Calling twice on one counting communicator (as the timing loop does) stays exact."""
    P, count = 5, 11
    c = COLLECTIVES[coll]
    alg = get(coll, name)

    def body(comm):
        cc = CountedComm(comm)
        wrong = 0
        for in_place in (True, False, True):
            bufs = c.make_buffers(count, P, comm.rank, np.dtype("int64"), "sum", 2, in_place, None)
            bufs.fill()
            alg(cc, *bufs.args, **bufs.kwargs)
            wrong += bufs.nwrong()
        return wrong

    results, _ = simulate(P, body)
    assert sum(results) == 0


def test_bcast_uses_no_scratch():
    """Other algorithms call bcast.binomial while holding scratch arrays of their own."""
    P = 6

    def body(comm):
        cc = CountedComm(comm)
        buf = np.arange(10.0) if comm.rank == 0 else np.zeros(10)
        for name in ("binomial", "linear", "scatter_allgather", "pipelined_chain"):
            get("bcast", name)(cc, buf, root=0)
        return cc._scratch, buf

    results, _ = simulate(P, body)
    for scratch, buf in results:
        assert scratch == {}
        assert np.array_equal(buf, np.arange(10.0))
