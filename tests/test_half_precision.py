"""Half precision (float16, bfloat16) on the simulated communicator and in the checks: no MPI needed.

The goal (issue 31): sums over P = 2-64 stay within steps x u x sum|x| of the float32 reference for every
hand-written reduction algorithm, steps being the algorithm's longest chain of sequential additions
(``Algorithm.additions_at``) and u = 2^-11 (float16), 2^-8 (bfloat16) (Higham, Accuracy and Stability of
Numerical Algorithms, 2nd ed., ch. 4, section 4.2, to first order in u).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.p2p import CountedComm, reduce_half
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES, half_scale, red_expected, red_input
from ccbench.core.dtypes import DTYPES, HALF, OPS, dtype_of, is_half, itemsize_of, unit_roundoff
from ccbench.core.errors import UsageError

ml_dtypes = pytest.importorskip("ml_dtypes")  # the test extra installs it; bfloat16 is checked with it

REPO = Path(__file__).resolve().parent.parent
REDUCTIONS = [(c, n) for c in ("allreduce", "reduce", "reduce_scatter") for n, a in REGISTRY[c].items()
              if not a.native]
HALVES = ("float16", "bfloat16")


def test_the_half_types_are_offered_and_their_unit_roundoffs_are_the_textbook_ones():
    assert list(DTYPES)[-2:] == ["float16", "bfloat16"] and set(HALF) == set(HALVES)
    assert DTYPES["float16"] == np.float16 and DTYPES["bfloat16"] == np.dtype(ml_dtypes.bfloat16)
    assert dtype_of("bfloat16").itemsize == 2 == itemsize_of("bfloat16")
    assert [itemsize_of(d) for d in DTYPES] == [DTYPES[d].itemsize for d in DTYPES]
    assert unit_roundoff("float16") == 2.0 ** -11 == np.finfo(np.float16).eps / 2
    assert unit_roundoff(DTYPES["bfloat16"]) == 2.0 ** -8 == float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps) / 2
    assert unit_roundoff("float32") == 0.0 and not is_half("float32") and not is_half(np.uint16)
    assert is_half(DTYPES["bfloat16"]) and is_half(np.float16)


def test_naming_the_dtypes_loads_no_ml_dtypes():
    code = ("import sys; from ccbench.core.dtypes import DTYPES; from ccbench.measure.config import load_config; "
            "names = list(DTYPES); load_config(None, {'dtypes': 'float16'}); print('ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def _without_ml_dtypes(tmp_path) -> dict:
    """An environment in which `import ml_dtypes` fails, as on an installation without the half extra."""
    blocker = tmp_path / "block" / "ml_dtypes"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker.parent), str(REPO)]))


def test_bfloat16_without_ml_dtypes_is_one_line_naming_the_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails
    from ccbench.core.dtypes import half_available
    from ccbench.measure.config import load_config

    assert not half_available() and itemsize_of("bfloat16") == 2 and "bfloat16" in DTYPES

    with pytest.raises(UsageError, match=r"^dtype bfloat16 needs the ml_dtypes package: pip install 'ccbench\[half\]'"):
        DTYPES["bfloat16"]
    with pytest.raises(UsageError, match="needs the ml_dtypes package"):
        load_config(None, {"dtypes": "float16,bfloat16"})
    # "all" is every type this installation can time: bfloat16 left out without ml_dtypes (and with the C loop)
    assert "bfloat16" not in load_config(None, {"dtypes": "all"}).dtypes
    assert load_config(None, {"dtypes": "float16"}).dtypes == ("float16",)  # float16 is numpy's own


@pytest.mark.parametrize("argv", [
    ["launch", "-n", "2", "-C", "allreduce", "-a", "native,ring", "-t", "float16,bfloat16", "-s", "8:64K"],
    ["run", "-C", "allreduce", "-t", "bfloat16", "-s", "8"],
    ["trace", "allreduce", "ring", "-n", "4", "-t", "bfloat16"],
])
def test_the_commands_refuse_bfloat16_without_ml_dtypes_in_one_line_writing_nothing(tmp_path, argv):
    results = tmp_path / "results"
    args = argv + (["--results-dir", str(results)] if argv[0] in ("launch", "run") else [])
    out = subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True,
                         env=_without_ml_dtypes(tmp_path), cwd=tmp_path, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs the ml_dtypes package: pip install 'ccbench[half]'" in lines[0], out.stderr
    assert not results.exists() or not any(results.iterdir())


def test_bfloat16_and_the_compiled_loop_are_refused_before_anything_runs():
    """MPI has no bfloat16 datatype for the C loop to pass; under auto (the default) its cases go to the Python
    loop, the kernel refusing a type without a predefined MPI datatype."""
    from ccbench.measure.config import load_config

    with pytest.raises(UsageError, match="bfloat16 cannot be timed by the compiled loop"):
        load_config(None, {"dtypes": "bfloat16", "loop": "compiled"})
    assert load_config(None, {"dtypes": "bfloat16", "loop": "auto"}).dtypes == ("bfloat16",)
    assert load_config(None, {"dtypes": "float16", "loop": "compiled"}).dtypes == ("float16",)


# -- one reduction step: widen to float32, combine, round back ------------------------------------------------


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", list(OPS))
def test_a_local_reduction_widens_to_float32_and_rounds_back_once(dtype, op):
    dt = DTYPES[dtype]
    rng = np.random.default_rng(3)
    scale = 30 if op == "prod" else 300  # products stay below float16's 65504
    a = (rng.standard_normal(10_000) * scale).astype(dt)
    b = (rng.standard_normal(10_000) * scale).astype(dt)
    want = OPS[op](b.astype(np.float32), a.astype(np.float32)).astype(dt)
    got = b.copy()
    reduce_half(OPS[op], a, got)
    assert got.dtype == dt and (got.view(np.uint16) == want.view(np.uint16)).all()
    # the counted layer's reduce_local takes the same path, and counts 16-bit bytes
    cc = CountedComm(_Serial())
    again = b.copy()
    cc.reduce_local(OPS[op], a, again)
    assert (again.view(np.uint16) == want.view(np.uint16)).all() and cc.counts.reduced_bytes == 2 * a.size


class _Serial:
    """The least a CountedComm needs of a communicator when nothing is sent."""

    def Get_rank(self):  # noqa: N802
        return 0

    def Get_size(self):  # noqa: N802
        return 1

    def Waitall(self, requests):  # noqa: N802
        pass


# -- the goal: P = 2-64, every hand-written reduction algorithm, within steps x u x sum|x| ----------------------


def _inputs(dtype, P: int, count: int, seed: int) -> np.ndarray:
    """P x count inputs, exactly representable in `dtype`: integers of the type's significand width (p bits) times
    a power of two, half of them >= 0 (no cancellation: the bound is met with the least slack) and half of mixed
    sign.  The largest sum|x| stays below 2^15, so float16 (max 65504) never overflows, and the float32 sums
    of these values are exact, so the float32 reference is the exact sum."""
    p = 11 if dtype == "float16" else 8
    lg = (P - 1).bit_length()
    rng = np.random.default_rng(seed)
    m = rng.integers(-(2 ** p - 1), 2 ** p, size=(P, count))
    m[:, : count // 2] = np.abs(m[:, : count // 2])
    x = m * 2.0 ** (15 - lg - p)  # |x| < 2^(15 - lg P): P of them sum below 2^15
    return x.astype(DTYPES[dtype])


def _run(coll: str, name: str, P: int, x: dict, root: int, ranks_per_node: int | None = None):
    """Run the algorithm once per half type on P simulated ranks (on nodes of `ranks_per_node`; None: one node);
    per type, every rank's result (None if none)."""
    alg = REGISTRY[coll][name]

    def body(comm):
        out = {}
        cc = CountedComm(comm)
        for dtype, data in x.items():
            mine = data[comm.rank]
            if coll == "reduce_scatter":
                recv = np.empty(mine.size // P, dtype=mine.dtype)
                alg(cc, mine.copy(), recv, op="sum")
            elif coll == "reduce":
                recv = np.empty_like(mine) if comm.rank == root else None
                alg(cc, mine.copy(), recv, op="sum", root=root)
            else:
                recv = np.empty_like(mine)
                alg(cc, mine.copy(), recv, op="sum")
            out[dtype] = recv
        return out

    results, _ = simulate(P, body, ranks_per_node=ranks_per_node)
    return results


def _ranks_to_check(alg, first):
    """A blocking algorithm is checked at every P from `first` to 20 and on both sides of 32 and 64.  A persistent
    or non-blocking form runs its blocking twin's step schedule (ccbench.algorithms.steps): it is checked at the P
    of up to 33 where a schedule's shape changes."""
    if getattr(alg, "setup", None) or getattr(alg, "nonblocking", None):
        return (*range(first, 6), 7, 8, 9, 16, 31, 32, 33)
    return (*range(first, 21), 31, 32, 33, 63, 64)


@pytest.mark.parametrize("coll,name", REDUCTIONS, ids=[f"{c}-{n}" for c, n in REDUCTIONS])
def test_half_precision_sums_stay_within_steps_u_sum_abs_of_the_float32_reference(coll, name):
    alg = REGISTRY[coll][name]
    worst = dict.fromkeys(HALVES, 0.0)
    for P in _ranks_to_check(alg, first=2):
        count = 2 * P + 1 if coll != "reduce_scatter" else 2  # every block of every split holds elements
        total = count * P if coll == "reduce_scatter" else count
        x = {dtype: _inputs(dtype, P, total, seed=P) for dtype in HALVES}
        root = P // 3
        results = _run(coll, name, P, x, root)
        steps = alg.additions_at(P)
        assert 1 <= steps <= P - 1
        for dtype in HALVES:
            wide = x[dtype].astype(np.float32)
            ref = wide.sum(axis=0, dtype=np.float32)  # exact for these inputs (see _inputs)
            assert np.array_equal(ref, wide.astype(np.float64).sum(axis=0))
            bound = steps * unit_roundoff(dtype) * np.abs(wide).sum(axis=0, dtype=np.float64)
            for rank, res in enumerate(results):
                got = res[dtype]
                if got is None:
                    continue
                block = slice(rank * count, (rank + 1) * count) if coll == "reduce_scatter" else slice(None)
                assert got.dtype == DTYPES[dtype]
                err = np.abs(got.astype(np.float64) - ref[block])
                assert (err <= bound[block]).all(), (dtype, P, rank, float((err / bound[block]).max()))
                worst[dtype] = max(worst[dtype], float((err / bound[block]).max()))
    # the inputs do round: the bound is met, and not vacuously
    assert all(0.0 < w <= 1.0 for w in worst.values()), worst


def _count_additions(self, ufunc, inbuf, inoutbuf):
    """A reduction that counts instead of adding: an element's depth is the larger operand's + 1."""
    np.maximum(inoutbuf, inbuf, out=inoutbuf)
    inoutbuf += 1


@pytest.mark.parametrize("coll,name", REDUCTIONS, ids=[f"{c}-{n}" for c, n in REDUCTIONS])
def test_the_registry_counts_each_algorithms_sequential_additions_exactly(coll, name, monkeypatch):
    """Run with an op that counts instead of adding (depth = max of the operands' depths + 1): the deepest
    element of the result is the registry's count, for P = 1-20 and around 32 and 64 (a derived form's up to 33)."""
    alg = REGISTRY[coll][name]

    monkeypatch.setattr(CountedComm, "reduce_local", _count_additions)
    for P in _ranks_to_check(alg, first=1):
        count = 2 * P + 1
        x = {"depth": np.zeros((P, count * P if coll == "reduce_scatter" else count))}
        results = _run(coll, name, P, x, root=P - 1)
        deepest = max(int(r["depth"].max()) for r in results if r["depth"] is not None)
        assert deepest == alg.additions_at(P), (P, deepest, alg.additions_at(P))


@pytest.mark.parametrize("m", [1, 2, 3, 4, 8])
def test_hierarchical_counts_its_additions_exactly_on_every_node_layout(m, monkeypatch):
    """As above, on nodes of m consecutive ranks (the last one smaller where m does not divide P): the deepest
    element is the count given the largest node and the node count, what a sweep passes (`node_layout`)."""
    alg = REGISTRY["allreduce"]["hierarchical"]

    monkeypatch.setattr(CountedComm, "reduce_local", _count_additions)
    for P in (*range(1, 14), 16, 17):
        results = _run("allreduce", "hierarchical", P, {"depth": np.zeros((P, 2 * P + 1))}, 0, ranks_per_node=m)
        deepest = max(int(r["depth"].max()) for r in results)
        assert deepest == alg.additions_at(P, ranks_per_node=min(m, P), nodes=-(-P // m)), (P, m, deepest)


def test_hierarchical_counts_its_node_local_and_leader_additions():
    hier = REGISTRY["allreduce"]["hierarchical"]
    assert hier.additions_at(16) == 4  # one node: the binomial reduce
    assert hier.additions_at(16, ranks_per_node=4) == 2 + 2  # lg 4 inside a node, then Rabenseifner on 4 leaders
    assert hier.additions_at(12, ranks_per_node=4) == 2 + 2  # 3 leaders: one fold, one halving step
    # uneven nodes (4 + 1 + 1 + 1 + 1 ranks): 5 leaders, not the 2 that full nodes of 4 would make
    assert hier.additions_at(8, ranks_per_node=4) == 2 + 1
    assert hier.additions_at(8, ranks_per_node=4, nodes=5) == 2 + 3
    assert hier.additions_at(8, ranks_per_node=None, nodes=None) == 3  # nothing known: one node
    # a count that takes no layout ignores it; the library's order is unknown: any order
    assert REGISTRY["allreduce"]["ring"].additions_at(8, ranks_per_node=4, nodes=2) == 7
    assert REGISTRY["allreduce"]["native"].additions_at(8, ranks_per_node=1, nodes=8) == 7
    assert REGISTRY["bcast"]["binomial"].additions_at(8) == 0


# -- the sweep's checks: inputs that never overflow, a bound that holds and catches errors --------------------


@pytest.mark.parametrize("P", [1, 2, 64, 327, 328, 4096, 65536, 1 << 20])
def test_the_sum_pattern_never_overflows_float16_and_its_reference_is_exact(P):
    start, n = 5, 400
    scale = half_scale(P)
    assert P * 100 * scale <= 2 ** 15 and (scale == 1.0 or P * 100 * scale > 2 ** 14)
    inputs = [red_input("sum", r, P, start, n, np.float16) for r in range(min(P, 9))]
    assert all(np.array_equal(a.astype(np.float64) / scale, np.rint(a.astype(np.float64) / scale)) for a in inputs)
    exp = red_expected("sum", P, start, n, np.float16)
    assert exp.dtype in (np.float32, np.float64) and float(exp.max()) <= 2 ** 15
    if P <= 4096:  # the brute force over every rank
        total = sum(red_input("sum", r, P, start, n, DTYPES["bfloat16"]).astype(np.float64) for r in range(P))
        assert np.array_equal(total, exp.astype(np.float64))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("P", [1, 3, 300])
def test_the_other_ops_have_exact_references_for_half_types(dtype, op, P):
    acc = red_input(op, 0, P, 3, 500, DTYPES[dtype]).astype(np.float64)
    for r in range(1, P):
        acc = OPS[op](acc, red_input(op, r, P, 3, 500, DTYPES[dtype]).astype(np.float64))
    np.testing.assert_array_equal(acc, red_expected(op, P, 3, 500, DTYPES[dtype]))


def test_a_half_reduction_is_checked_within_its_bound_and_an_error_beyond_it_is_caught():
    P = 41  # sums of up to 4100: odd ones above 2048 are not float16 numbers
    bufs = COLLECTIVES["allreduce"].make_buffers(200, P, 0, DTYPES["float16"], "sum", 0, False, None)
    assert (bufs.unit_roundoff, bufs.steps) == (2.0 ** -11, P - 1)  # any order of P terms
    out, exp = bufs.outputs[0]
    bufs.fill()
    assert bufs.nwrong() == 200 - int(np.count_nonzero(exp == 0))  # poisoned
    out[...] = exp  # rounded to float16 once: within the bound
    assert np.count_nonzero(out.astype(np.float64) != exp) > 10
    assert bufs.nwrong() == 0
    out[7] = exp[7] * (1 + 2 * (P - 1) * 2.0 ** -11)  # twice the bound off
    out[9] = np.nan
    out[11] = np.inf
    assert bufs.nwrong() == 3
    bufs.steps = 0  # an algorithm that adds nothing must be exact
    assert bufs.nwrong() > 3
    # the bound is gamma_k = k u / (1 - k u), a hair wider than the first-order k u: an element between the
    # two is within it, one just past gamma_k is not; past k u >= 1 it bounds nothing, but NaN and inf stay wrong
    bufs.steps, ref = 1, np.float64(exp[5])
    out[...] = exp
    u = 2.0 ** -11
    for err, wrong in ((ref * u, 0), (ref * (u + u * u / 2), 0), (ref * u / (1 - u) * (1 + 1e-9), 1)):
        wide = bufs.outputs[0][0].astype(np.float64)
        wide[5] = ref + err
        bufs.outputs[0] = (wide, exp)
        assert bufs.nwrong() == wrong, err / ref
    bufs.steps = 1 << 11
    wide[5] = ref * 1000
    assert bufs.nwrong() == 0
    wide[5], wide[6] = np.inf, np.nan
    assert bufs.nwrong() == 2
    for op in ("min", "max"):  # they round nothing: checked exactly, whatever an algorithm's count of additions
        mm = COLLECTIVES["reduce_scatter"].make_buffers(10, 4, 1, DTYPES["bfloat16"], op, 0, False, None)
        mm.hold_to(3)
        assert mm.steps == 0 and mm.unit_roundoff == 2.0 ** -8
    exact = COLLECTIVES["allreduce"].make_buffers(10, 4, 1, DTYPES["float32"], "sum", 0, False, None)
    exact.hold_to(3)
    assert (exact.steps, exact.unit_roundoff) == (0, 0.0)
    summed = COLLECTIVES["allreduce"].make_buffers(10, 4, 1, DTYPES["float16"], "sum", 0, False, None)
    summed.hold_to(2)
    assert summed.steps == 2  # ceil(lg 4), where any order of the 4 contributions would be 3


@pytest.mark.parametrize("coll", [c for c, spec in COLLECTIVES.items() if not spec.reduction and c != "barrier"])
@pytest.mark.parametrize("dtype", HALVES)
def test_the_other_collectives_move_half_types_exactly(coll, dtype):
    spec = COLLECTIVES[coll]
    P = 5 if coll != "pingpong" else 2
    for name, alg in REGISTRY[coll].items():
        if alg.native:
            continue

        def body(comm, alg=alg):
            bufs = spec.make_buffers(37, P, comm.rank, DTYPES[dtype], "sum", 1 % P, False, None)
            assert bufs.unit_roundoff == 0.0  # compared exactly
            bufs.fill()
            alg(CountedComm(comm), *bufs.args, **bufs.kwargs)
            return bufs.nwrong(), [out.dtype for out, _ in bufs.outputs]

        results, messages = simulate(P, body)
        assert all(r[0] == 0 for r in results), (name, results)
        assert all(d == DTYPES[dtype] for r in results for d in r[1])
        assert all(m.nbytes % 2 == 0 for m in messages)


@pytest.mark.parametrize("coll,name", REDUCTIONS, ids=[f"{c}-{n}" for c, n in REDUCTIONS])
def test_half_messages_stay_16_bit(coll, name):
    """The same schedule moves half the bytes of float32: nothing is widened on the wire."""
    from simcheck import run_sim

    wrong16, counts16, msgs16 = run_sim(coll, name, 6, 5040, DTYPES["bfloat16"], "sum")
    wrong32, counts32, msgs32 = run_sim(coll, name, 6, 5040, "float32", "sum")
    assert sum(wrong16) == 0 and sum(wrong32) == 0
    assert [2 * m.nbytes for m in msgs16] == [m.nbytes for m in msgs32]
    assert [2 * c.reduced_bytes for c in counts16] == [c.reduced_bytes for c in counts32]
