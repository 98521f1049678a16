"""Every hand-written algorithm, on the simulated communicator: exact results, honest costs."""

import pytest
from conftest import HANDWRITTEN, handwritten_params
from hypothesis import given, settings
from hypothesis import strategies as st
from simcheck import run_sim

from ccbench.algorithms import get
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS


def _ops(coll):
    return list(OPS) if COLLECTIVES[coll].reduction else ["sum"]


def _usable(coll, name, P, op="sum"):
    return get(coll, name).unsupported(P, op) is None


@pytest.mark.parametrize("coll,name", handwritten_params())
@pytest.mark.parametrize("P", range(1, 10))
def test_counts_and_in_place(coll, name, P):
    if not _usable(coll, name, P):
        pytest.skip(get(coll, name).unsupported(P, "sum"))
    root = P - 1 if COLLECTIVES[coll].rooted else 0
    for count in sorted({0, 1, max(P - 1, 0), P, P + 1, 1001}):
        for in_place in (False, True):
            wrong, _, _ = run_sim(coll, name, P, count, in_place=in_place, root=root)
            assert sum(wrong) == 0, (count, in_place, wrong)


@pytest.mark.parametrize("coll,name", handwritten_params())
@pytest.mark.parametrize("P", [3, 4])
def test_every_dtype_and_op(coll, name, P):
    for dtype in DTYPES:
        for op in _ops(coll):
            if not _usable(coll, name, P, op):
                continue
            for in_place in (False, True):
                wrong, _, _ = run_sim(coll, name, P, 7, DTYPES[dtype], op, in_place, root=P // 2)
                assert sum(wrong) == 0, (dtype, op, in_place, wrong)


@pytest.mark.parametrize("coll,name", [p for p in handwritten_params() if COLLECTIVES[p.values[0]].rooted])
@pytest.mark.parametrize("P", [5, 6])
def test_every_root(coll, name, P):
    if not _usable(coll, name, P):
        pytest.skip(get(coll, name).unsupported(P, "sum"))
    for root in range(P):
        wrong, _, _ = run_sim(coll, name, P, 13, "int32", "sum", False, root)
        assert sum(wrong) == 0, (root, wrong)


@pytest.mark.parametrize("coll,name", [p for p in handwritten_params() if get(*p.values).cost])
@pytest.mark.parametrize("P", range(1, 10))
def test_cost_formula_equals_counted_traffic(coll, name, P):
    """The closed form is exact for a count every block split divides (5040 = 7!)."""
    alg = get(coll, name)
    if alg.unsupported(P, "sum"):
        pytest.skip(alg.unsupported(P, "sum"))
    count = 5040
    _, counts, _ = run_sim(coll, name, P, count, "float32", "sum", False, root=0)
    nbytes = COLLECTIVES[coll].nbytes_for(count, 4, P)
    want = alg.cost(P, nbytes)
    got = (
        max(c.steps for c in counts),
        max(c.step_bytes for c in counts),
        max(c.reduced_bytes for c in counts),
    )
    assert got == pytest.approx(tuple(want[:3]), rel=1e-12, abs=1e-9), (got, want)


@pytest.mark.skipif(not HANDWRITTEN, reason="no hand-written algorithms registered")
@settings(max_examples=150, deadline=None)
@given(
    pick=st.sampled_from(HANDWRITTEN or [("allreduce", "native")]),
    P=st.integers(1, 9),
    count=st.integers(0, 300),
    dtype=st.sampled_from(list(DTYPES)),
    op=st.sampled_from(list(OPS)),
    in_place=st.booleans(),
    root_seed=st.integers(0, 1000),
)
def test_random_cases(pick, P, count, dtype, op, in_place, root_seed):
    coll, name = pick
    op = op if COLLECTIVES[coll].reduction else "sum"
    if not _usable(coll, name, P, op):
        return
    root = root_seed % P
    wrong, _, _ = run_sim(coll, name, P, count, DTYPES[dtype], op, in_place, root)
    assert sum(wrong) == 0, wrong


def test_every_collective_has_native():
    from ccbench.algorithms import REGISTRY

    for coll, algs in REGISTRY.items():
        assert "native" in algs, coll


@pytest.mark.parametrize("coll,name", [p for p in handwritten_params() if get(*p.values).cost])
@pytest.mark.parametrize("P", range(2, 10))
def test_critical_path_is_never_shorter_than_the_schedule(coll, name, P):
    """The modelled cost covers the longest chain of dependent steps of the executed schedule;
    where an algorithm states its critical path, it equals that chain (lock-step rounds: at least)."""
    from ccbench.algorithms.p2p import critical_path

    alg = get(coll, name)
    if alg.unsupported(P, "sum"):
        pytest.skip(alg.unsupported(P, "sum"))
    for count in (5040, 201_600):  # one pipeline segment or chunk, and several (even block splits)
        batches = []
        run_sim(coll, name, P, count, "float32", "sum", False, root=0, batches=batches)
        steps, nbytes_path = critical_path(batches)
        cost = alg.cost(P, COLLECTIVES[coll].nbytes_for(count, 4, P))
        timing = cost.timing_cost
        assert timing.alpha >= steps and timing.beta >= nbytes_path, (count, cost, steps, nbytes_path)
        if cost.critical is not None:
            assert all(c >= w for c, w in zip(cost.critical[:3], cost[:3], strict=True)), cost
            if name != "double_binary_tree":  # its closed form sums lock-step rounds: an upper bound
                assert (cost.critical.alpha, cost.critical.beta) == (steps, nbytes_path), (count, cost)


def test_critical_path_of_known_schedules():
    """A chain of P ranks passing one message: P-1 dependent steps; a ring exchange: one step each."""
    from ccbench.algorithms.p2p import critical_path

    P, n = 5, 100
    chain = [[(((1, n),), ())]]
    chain += [[((), ((r - 1, n),)), (((r + 1, n),), ())] for r in range(1, P - 1)]
    chain += [[((), ((P - 2, n),))]]
    assert critical_path(chain) == (P - 1, (P - 1) * n)
    ring = [[((((r + 1) % P, n),), (((r - 1) % P, n),))] for r in range(P)]
    assert critical_path(ring) == (1, n)
    with pytest.raises(ValueError, match="deadlocks"):
        critical_path([[((), ((1, n),))], [((), ((0, n),))]])  # both wait to receive first


def test_pipelines_state_their_critical_path_at_scale():
    """At 4096 ranks the pipelines' fill dominates: the chain's last rank waits P-2 rounds."""
    chain = get("bcast", "pipelined_chain").cost(4096, 8)
    assert chain.critical.alpha == 4095 and chain.alpha == 2
    tree = get("allreduce", "double_binary_tree").cost(4096, 8)
    assert tree.critical.alpha > 2 * 12 > tree.alpha
