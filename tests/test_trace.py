"""`ccbench trace` engine: schedules, per-rank counts, cost check and rendering (no MPI)."""

import io
import subprocess
import sys

import pytest
from rich.console import Console

from ccbench.algorithms import REGISTRY, Cost
from ccbench.algorithms.p2p import is_in_place
from ccbench.algorithms.registry import register
from ccbench.analysis.trace import Trace, trace
from ccbench.core.errors import UsageError
from ccbench.present.trace import render, schedule_lines


def _text(t: Trace, **kw) -> str:
    buf = io.StringIO()
    render(t, Console(file=buf, width=140, color_system=None), **kw)
    return buf.getvalue()


@pytest.fixture
def broken():
    """A throwaway allreduce that skips communication and claims a wrong cost."""

    @register("allreduce", "_broken_for_test", cost=lambda P, n: Cost(99, 0, 0), formula="99 a")
    def _broken(comm, sendbuf, recvbuf, op="sum"):
        """Copies its own input and sends nothing (wrong on purpose)."""
        if not is_in_place(sendbuf):
            recvbuf[:] = sendbuf

    yield "_broken_for_test"
    del REGISTRY["allreduce"]["_broken_for_test"]


# -- ring allreduce ----------------------------------------------------------------------

def test_ring_allreduce_on_4_ranks():
    P, count = 4, 8
    t = trace("allreduce", "ring", P, count, "float32")
    n = count * 4
    assert t.nbytes == n and t.nwrong == 0
    # 3 reduce-scatter steps then 3 allgather steps, every rank sending one block each
    assert t.nsteps == 6
    groups = t.steps()
    assert list(groups) == [1, 2, 3, 4, 5, 6]
    for msgs in groups.values():
        assert sorted(m.source for m in msgs) == list(range(P))
        assert all(m.nbytes == n // P for m in msgs)
        assert len({(m.dest - m.source) % P for m in msgs}) == 1  # one ring direction
    for c in t.counts:
        assert c.steps == 6
        assert c.step_bytes == 2 * n * 3 // 4
        assert c.reduced_bytes == n * 3 // 4
    assert t.counted == Cost(6, 2 * n * 3 / 4, n * 3 / 4)
    assert t.cost == pytest.approx(t.counted)
    assert t.agrees is True
    assert sum(c.bytes_sent for c in t.counts) == sum(m.nbytes for m in t.messages)
    assert sum(c.msgs_sent for c in t.counts) == len(t.messages) == 24


def test_ring_allreduce_render():
    t = trace("allreduce", "ring", 4, 8)
    out = _text(t)
    lines = out.splitlines()
    first = next(x for x in lines if x.startswith("step 1:"))
    assert "rank 0 -> rank" in first and "elements [" in first and first.endswith(" 8 B")
    assert sum(x.startswith("step ") for x in lines) == 6
    assert "omitted" not in out
    assert "per-rank traffic" in out and "max" in out
    assert "agrees" in out and "differs" not in out
    assert t.formula in out
    assert "result exact on all 4 ranks" in out


def test_ring_allreduce_in_place_and_other_dtypes_ops():
    for dtype, op in (("float64", "sum"), ("int32", "max"), ("uint8", "prod")):
        t = trace("allreduce", "ring", 5, 13, dtype, op, in_place=True)
        assert t.nwrong == 0 and t.dtype == dtype and t.in_place


def test_single_rank_has_no_messages():
    t = trace("allreduce", "ring", 1, 8)
    assert t.messages == () and t.nsteps == 0 and t.nwrong == 0
    assert schedule_lines(t) == ["no messages (nothing to communicate)"]
    assert "result exact on all 1 ranks" in _text(t)


def test_large_schedule_is_summarised():
    P = 16
    t = trace("allreduce", "ring", P, 160)
    assert t.nsteps == 2 * (P - 1)
    lines = schedule_lines(t, max_lines=40, max_messages_per_step=16)
    # two whole steps of 16 messages fit in 40 lines; the third would not
    assert sum(x.startswith("step ") for x in lines) == 2
    assert lines[-1].startswith(f"... steps 3-{t.nsteps} omitted: {t.nsteps - 2} steps, "
                                f"{(t.nsteps - 2) * P:,} messages")
    capped = schedule_lines(t, max_lines=None, max_messages_per_step=4)
    assert sum(x.startswith("step ") for x in capped) == t.nsteps
    assert "... 12 more messages in step 1" in "\n".join(capped)
    assert len(schedule_lines(t, max_lines=None, max_messages_per_step=None)) == len(t.messages)
    out = _text(t, max_rank_rows=4)
    assert "omitted" in out and "12 more ranks" in out


# -- binomial bcast ----------------------------------------------------------------------

@pytest.mark.parametrize("P,root,steps", [(8, 0, 3), (8, 5, 3), (6, 2, 3), (2, 1, 1)])
def test_binomial_bcast_doubles_each_step(P, root, steps):
    count = 6
    t = trace("bcast", "binomial", P, count, "int32", root=root)
    assert t.nwrong == 0 and t.root == root
    assert t.nsteps == steps
    assert len(t.messages) == P - 1  # every non-root receives once
    assert sorted(m.dest for m in t.messages) == sorted(set(range(P)) - {root})
    groups = t.steps()
    assert [m.source for m in groups[1]] == [root]
    for k, msgs in groups.items():
        assert len(msgs) <= 2 ** (k - 1)
        assert all(m.nbytes == count * 4 for m in msgs)
    if P & (P - 1) == 0:
        assert [len(groups[k]) for k in groups] == [2 ** (k - 1) for k in groups]
        assert t.agrees is True


# -- result check and cost disagreement ----------------------------------------------------

def test_wrong_result_and_wrong_cost_are_reported(broken):
    t = trace("allreduce", broken, 3, 10)
    assert t.messages == ()
    assert t.nwrong > 0 and all(w > 0 for w in t.nwrong_per_rank)
    assert t.cost == Cost(99, 0, 0) and t.counted == Cost(0, 0, 0)
    assert t.agrees is False
    out = _text(t)
    assert "differs" in out and "result wrong" in out and "ranks 0, 1, 2" in out


# -- errors --------------------------------------------------------------------------------

def test_errors_name_the_hand_written_choices():
    with pytest.raises(UsageError, match=r"unknown collective 'nope'.*allreduce \(.*ring"):
        trace("nope", "ring", 4, 8)
    with pytest.raises(UsageError, match=r"unknown algorithm 'nope' for allreduce; .*ring"):
        trace("allreduce", "nope", 4, 8)
    with pytest.raises(UsageError, match=r"allreduce/native .*cannot be simulated; .*ring"):
        trace("allreduce", "native", 4, 8)
    with pytest.raises(UsageError, match=r"bcast/native .*binomial"):
        trace("bcast", "native", 4, 8)
    for coll, algs in REGISTRY.items():  # a collective with nothing hand-written, if any
        if all(a.native for a in algs.values()):
            with pytest.raises(UsageError, match=f"{coll} has no hand-written algorithm"):
                trace(coll, "native", 4, 8)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"nranks": 0}, "ranks must be"),
        ({"nranks": 10**6}, "ranks must be"),
        ({"count": -1}, "count must be"),
        ({"dtype": "float8"}, "unknown dtype"),
        ({"op": "xor"}, "unknown op"),
    ],
)
def test_bad_arguments(kwargs, match):
    args = {"collective": "allreduce", "algorithm": "ring", "nranks": 4, "count": 8} | kwargs
    with pytest.raises(UsageError, match=match):
        trace(**args)


def test_bad_root():
    with pytest.raises(UsageError, match="root 4 outside 0..3"):
        trace("bcast", "binomial", 4, 8, root=4)
    assert trace("allreduce", "ring", 4, 8, root=3).root == 0  # ignored when not rooted


def test_trace_needs_no_mpi():
    code = (
        "import sys; from ccbench.analysis.trace import trace; "
        "t = trace('allreduce', 'ring', 3, 7); "
        "assert t.nwrong == 0; assert 'mpi4py.MPI' not in sys.modules, 'MPI imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)



def test_ranks_per_node_is_passed_and_shown():
    t = trace("bcast", "binomial", 6, 4, ranks_per_node=2, root=1)
    assert t.ranks_per_node == 2 and t.nwrong == 0
    head = _text(t).splitlines()[1]
    assert "root 1" in head and "2 ranks per node" in head
    with pytest.raises(UsageError, match="ranks per node"):
        trace("bcast", "binomial", 6, 4, ranks_per_node=0)


@pytest.fixture
def node_aware():
    """A throwaway allreduce (the ring's function) whose cost takes ranks_per_node."""

    def cost(P, n, ranks_per_node=None):
        return Cost(-1 if ranks_per_node is None else ranks_per_node, 0, 0)

    register("allreduce", "_node_aware_for_test", cost=cost)(REGISTRY["allreduce"]["ring"].fn)
    yield "_node_aware_for_test"
    del REGISTRY["allreduce"]["_node_aware_for_test"]


def test_ranks_per_node_reaches_a_node_aware_cost(node_aware):
    assert trace("allreduce", node_aware, 6, 12, ranks_per_node=3).cost == Cost(3, 0, 0)
    assert trace("allreduce", node_aware, 6, 12).cost == Cost(-1, 0, 0)
    # a cost without the keyword is called with (P, nbytes) only
    assert trace("allreduce", "ring", 6, 12, ranks_per_node=3).agrees is True
