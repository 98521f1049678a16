"""The v-collectives (uneven blocks): count distributions, cost formulas, simulated algorithms, configs, trace,
the routed MoE workload.  Pure or simulated; the MPI tier is test_uneven_mpi.py."""

import subprocess
import sys

import numpy as np
import pytest
from simcheck import run_sim

from ccbench.algorithms import REGISTRY, get
from ccbench.algorithms.p2p import critical_path
from ccbench.algorithms.registry import cost_at, row_keywords
from ccbench.analysis.fit import NetworkParams
from ccbench.analysis.predict import predict
from ccbench.analysis.trace import trace
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import (
    apportion,
    block_counts,
    check_ranks,
    count_matrix,
    moe_routing,
    parse_counts,
    symmetric,
    weights,
)
from ccbench.core.errors import UsageError
from ccbench.measure.config import EVEN, load_config, plan

V = [c for c, x in COLLECTIVES.items() if x.uneven]
HAND = [(c, n) for c in V for n, a in REGISTRY[c].items() if not a.native]
SPECS = ["uniform", "heavy", "heavy:0.25", "zipf:1.5", "moe:8,2,1.25,64", "~moe:9,1,2,32@3"]


def _specs(P: int) -> list[str]:
    """The distributions to check at P ranks: the fixed ones, and explicit weights with a zero block."""
    return SPECS + ["weights:" + ",".join(str((r + 1) % 3) for r in range(P))] if P > 1 else SPECS


# -- the distributions --------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("P", [1, 2, 3, 5, 8])
def test_blocks_sum_to_the_total_and_repeat_for_a_seed(spec, P):
    for total in (0, 1, 7, 1000, 12345):
        for matrix in (False, True):
            c = block_counts(spec, P, total, matrix)
            assert c.shape == ((P, P) if matrix else (P,)) and c.dtype == np.int64
            assert c.sum() == total and (c >= 0).all()
            np.testing.assert_array_equal(c, block_counts(parse_counts(spec).text, P, total, matrix))
    assert not block_counts(spec, P, 10, False).flags.writeable  # shared by every caller: read-only


def test_apportion_by_largest_remainder():
    """Hamilton's method: floors of the quotas, the left-over elements to the largest remainders, ties to the lower
    index; integer shares scaled by a whole factor give exact multiples."""
    assert apportion(10, np.array([1, 1, 1])).tolist() == [4, 3, 3]
    assert apportion(7, np.array([3, 1])).tolist() == [5, 2]  # quotas 5.25, 1.75
    assert apportion(6, np.array([0, 2, 1])).tolist() == [0, 4, 2]
    tokens = np.array([[3, 5], [7, 1]])
    assert (apportion(16 * 96, tokens) == 96 * tokens).all()
    with pytest.raises(ValueError):
        apportion(5, np.array([0, 0]))


def test_apportion_gives_the_left_over_to_the_largest_remainders_with_ties_cut_at_the_lower_index():
    """Against the definition (a stable sort of the remainders, largest first), where the left-over count cuts
    through a run of equal remainders: shares drawn from few values, so most remainders tie."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        shares = rng.integers(0, 4, size=int(rng.integers(1, 40)))
        shares[rng.integers(shares.size)] += 1
        total = int(rng.integers(0, 500))
        q, r = np.divmod(total * shares, shares.sum())
        q[np.argsort(-r, kind="stable")[:total - q.sum()]] += 1
        assert apportion(total, shares).tolist() == q.tolist(), (total, shares.tolist())
    assert apportion(5, np.array([1, 1, 1, 1, 1, 1, 1])).tolist() == [1, 1, 1, 1, 1, 0, 0]  # all tie: lowest first
    for _ in range(200):  # a matrix that repeats one line (a broadcast view, as alltoallv's weights are) is
        line = rng.integers(0, 4, size=int(rng.integers(1, 12)))  # apportioned as the matrix it stands for
        line[0] += 1
        total = int(rng.integers(0, 2000))
        for view in (np.broadcast_to(line, (line.size, line.size)), np.broadcast_to(line[:, None], (line.size, 3))):
            got = apportion(total, view)
            assert got.flags.c_contiguous and got.tolist() == apportion(total, view.copy()).tolist(), (total, line)


@pytest.mark.parametrize(("spec", "P"), [(s, P) for s in SPECS + ["~zipf:2", "~heavy:3"] for P in (1, 2, 3, 5, 8, 13)
                                          if "moe" not in s or P <= 8] + [("weights:0,3,1,1,0,2,1,1,3,1,2,1,1", 13)])
def test_count_matrix_reads_the_wrapped_diagonals_sums_and_dense_form_of_the_array(spec, P):
    """The matrix a cost model reads (kept as its line and the left-over +1s where it repeats one line) holds
    block_counts' array entry for entry: totals that leave nothing over, a partial row, whole rows of ties."""
    rng = np.random.default_rng(P)
    for total in (0, P * P, P * P + 1, 3 * P * P - 1, 7 * P + 2, 12345, int(rng.integers(0, 10**6))):
        dense, m = block_counts(spec, P, total, matrix=True), count_matrix(spec, P, total)
        assert m.shape == (P, P) and m.dense().tolist() == dense.tolist(), (total,)
        ar = np.arange(P)
        for k in range(-1, P + 1):  # every entry, each on its wrapped diagonal (k mod P)
            assert m.wrapped(k).tolist() == dense[ar, (ar + k) % P].tolist(), (total, k)
        assert m.diagonal().tolist() == np.diagonal(dense).tolist()
        assert m.sum(axis=1).tolist() == dense.sum(axis=1).tolist()
        assert m.sum(axis=0).tolist() == dense.sum(axis=0).tolist()


def test_uniform_is_the_even_split_and_the_others_skew_as_named():
    P = 5
    assert block_counts("uniform", P, 35).tolist() == [7] * 5
    assert (block_counts("uniform", P, 7 * 25, matrix=True) == 7).all()
    heavy = block_counts("heavy:6", P, 1000)  # weights 6, 1, 1, 1, 1 of 10
    assert heavy.tolist() == [600, 100, 100, 100, 100]
    z = block_counts("zipf:2", P, 10**6)  # (j + 1)^-2
    assert (np.diff(z) < 0).all() and z[0] / z[-1] == pytest.approx(25, rel=1e-3)
    hot = block_counts("heavy:6", P, 25_000, matrix=True)  # every rank sends rank 0 six times as much
    assert (hot[:, 0] == 6 * hot[:, 1]).all() and (hot[0] == hot[1]).all()
    assert (block_counts("~heavy:6", P, 25_000, matrix=True) == hot.T).all()  # reversed: rank 0 the heavy sender
    assert block_counts("~heavy:6", P, 50).tolist() == [10] * 5  # its vector: what each rank receives


def test_moe_routing_repeats_for_a_seed_and_clips_at_capacity():
    P, E, K, T = 4, 8, 2, 256
    a = moe_routing(P, E, K, 1.25, T, seed=7)
    np.testing.assert_array_equal(a, moe_routing(P, E, K, 1.25, T, seed=7))
    assert not np.array_equal(a, moe_routing(P, E, K, 1.25, T, seed=8))
    # without a binding capacity every token reaches its K experts; a rank hosts E/P = 2 experts
    free = moe_routing(P, E, K, 1000.0, T)
    assert (free.sum(axis=1) == T * K).all()
    # capacity ceil(CF T K / E) per (rank, expert): with CF = 0.5 at most 2 x 32 tokens of a rank reach a rank
    tight = moe_routing(P, E, K, 0.5, T)
    assert (tight <= 2 * 32).all() and (tight.sum(axis=1) < T * K).all()
    assert (tight <= moe_routing(P, E, K, 1.0, T)).all()  # a larger capacity drops fewer tokens
    # the gate's popular experts make the load uneven, and the seed is part of the spec
    skew = moe_routing(P, E, K, 2.0, T).sum(axis=0)
    assert skew.max() > 1.2 * skew.min()
    assert block_counts("moe:8,2,2,256", P, 4096, True).tolist() != block_counts("moe:8,2,2,256@1", P, 4096,
                                                                                   True).tolist()


def test_reversed_moe_is_the_combine():
    m = block_counts("moe:8,2,1.25,64", 4, 4 * 1600, matrix=True)
    assert (block_counts("~moe:8,2,1.25,64", 4, 4 * 1600, matrix=True) == m.T).all()
    routed = weights(parse_counts("moe:8,2,1.25,64"), 4, matrix=True)
    np.testing.assert_array_equal(weights(parse_counts("moe:8,2,1.25,64"), 4), routed.sum(axis=0))  # received
    assert symmetric("uniform", 4) and not symmetric("moe:8,2,1.25,64", 4) and not symmetric("zipf", 3)


def test_specs_are_canonical():
    assert parse_counts("moe").text == "moe:8,2,1.25,1024"
    assert parse_counts(" moe:16,1,1@42 ").text == "moe:16,1,1,1024@42"
    assert parse_counts("heavy").text == "heavy:4" and parse_counts("zipf").text == "zipf:1"
    assert parse_counts("~zipf:0.5").text == "~zipf:0.5" and parse_counts("weights:1,2.5").text == "weights:1,2.5"


@pytest.mark.parametrize("spec,why", [
    ("", "empty"), ("pareto", "unknown distribution 'pareto'"), ("zipf:0", "Zipf exponent S must be in (0, 10]"),
    ("zipf:10.5", "Zipf exponent"), ("zipf:-1", "Zipf exponent"), ("zipf:nan", "must be finite"),
    ("heavy:x", "'x' is not a number"), ("heavy:0", "heavy factor"), ("zipf:1,2", "at most 1 parameter (S)"),
    ("uniform:3", "uniform takes no parameters"), ("moe:8,2,1,64,5", "at most 4 parameters (E,K,CF,T)"),
    ("moe:8,9", "top-K must be a whole number from 1 to 8"), ("moe:0", "expert count E"),
    ("moe:8,2,0", "capacity factor"), ("moe:8,2,1,0", "tokens per rank"), ("moe:8,2,1@x", "seed 'x'"),
    ("uniform@3", "only moe takes @SEED"), ("weights:", "one weight per rank"), ("weights:0,0", "positive sum"),
    ("weights:1,-1", "positive sum"),
])
def test_a_bad_spec_is_one_line(spec, why):
    with pytest.raises(UsageError) as err:
        parse_counts(spec)
    msg = str(err.value)
    assert why in msg and "\n" not in msg and msg.startswith("counts ")


def test_counts_a_rank_count_cannot_hold():
    with pytest.raises(UsageError, match="gives 3 weights for 2 ranks"):
        check_ranks(parse_counts("weights:1,2,3"), 2)
    with pytest.raises(UsageError, match="4 experts cannot be placed on 5 ranks"):
        block_counts("moe:4,1,1", 5, 100)
    with pytest.raises(UsageError, match="gate logits"):
        check_ranks(parse_counts("moe:4096,1,1,1024"), 64)
    check_ranks(parse_counts("moe:4,1,1"), 4)


# -- costs: known values, and the even forms at uniform counts ------------------------------------


def test_cost_formulas_on_known_values():
    # alltoallv, weights 1:3 at 2 ranks, 400 bytes (800 over all blocks): rank 0 sends rank 1 300 B and gets 100
    assert get("alltoallv", "linear").cost(2, 400, counts="weights:1,3") == (1, 300, 0, None)
    assert get("alltoallv", "pairwise").cost(2, 400, counts="weights:1,3") == (1, 300, 0, None)
    assert get("alltoall", "pairwise").cost(2, 400) == (1, 200, 0, None)
    # ring allgatherv, blocks 600, 100, 100, 100: the busiest rank passes the heavy block on after receiving it
    # (1300 B), but the heavy block crosses the three links one round after another (1800 B)
    ring = get("allgatherv", "ring").cost(4, 900, counts="heavy:6")
    assert ring[:3] == (3, 1300, 0) and ring.critical == (3, 1800, 0, None)
    assert get("allgatherv", "linear").cost(4, 900, counts="heavy:6") == (3, 1800, 0, None)  # 3 x 600 out
    # gatherv: the root receives everything but its own block, whichever algorithm
    for name in ("linear", "binomial"):
        assert get("gatherv", name).cost(3, 600, counts="weights:1,2,3")[:2] == (2, 500)
        assert get("scatterv", name).cost(3, 600, counts="weights:1,2,3", root=2)[:2] == (2, 300)
    # reduce_scatterv, blocks 100, 200, 300: pairwise reduces its own block twice; the ring adds n - c(r-1)
    pw = get("reduce_scatterv", "pairwise").cost(3, 600, counts="weights:1,2,3")
    assert pw.gamma == 600 and pw.alpha == 2
    assert get("reduce_scatterv", "ring").cost(3, 600, counts="weights:1,2,3").gamma == 500  # rank 1: 600 - 100


@pytest.mark.parametrize("v,even,name", [
    ("allgatherv", "allgather", "ring"), ("allgatherv", "allgather", "linear"), ("alltoallv", "alltoall", "pairwise"),
    ("alltoallv", "alltoall", "linear"), ("gatherv", "gather", "linear"), ("gatherv", "gather", "binomial"),
    ("scatterv", "scatter", "linear"), ("scatterv", "scatter", "binomial"),
    ("reduce_scatterv", "reduce_scatter", "pairwise"),
])
def test_uniform_counts_cost_what_the_even_form_costs(v, even, name):
    for P in (1, 2, 3, 4, 7, 8, 12):
        for n in (0, 8 * P, 4096 * P):
            mine, theirs = get(v, name).cost(P, n), get(even, name).cost(P, n)
            assert tuple(mine[:3]) == pytest.approx(tuple(theirs[:3])) and mine.critical == theirs.critical, (P, n)


def test_ring_reduce_scatterv_at_uniform_counts_is_the_textbook_ring():
    for P in (2, 3, 5, 8):
        n = 1000 * P
        assert get("reduce_scatterv", "ring").cost(P, n) == (P - 1, n * (P - 1) / P, n * (P - 1) / P, None)


def test_rows_and_cases_price_their_own_counts():
    row = {"collective": "alltoallv", "dtype": "float16", "counts": "weights:1,3", "root": 0}
    assert row_keywords(row) == {"counts": "weights:1,3", "itemsize": 2, "root": 0}
    assert row_keywords({"dtype": "complex256"})["itemsize"] is None
    c = cost_at(get("alltoallv", "pairwise").cost, 2, 400, ranks_per_node=4, **row_keywords(row))
    assert c[:2] == (1, 300)
    assert cost_at(get("alltoall", "pairwise").cost, 2, 400, **row_keywords(row))[:2] == (1, 200)  # nothing taken


PREDICT = ["--alpha", "2us", "--beta", "1e-9", "-n", "4", "-s", "1K"]


def test_predict_prices_the_v_collectives_on_the_distribution_it_is_given(capsys):
    """predict_table's v-collective grids are priced on `counts` and name it; the even ones are left alone; the
    command prints the distribution under each v-collective's table."""
    from ccbench.analysis.runs import predict_table
    from ccbench.cli import main

    params = NetworkParams(2e-6, 1e-9)
    for spec, want in ((None, "uniform"), ("zipf:2", "zipf:2"), ("~heavy:6", "~heavy:6")):
        grids = {g.collective: g for g in predict_table(params, [5], [1000], ["alltoallv", "alltoall"],
                                                         counts=spec)}
        v, even = grids["alltoallv"], grids["alltoall"]
        assert v.counts == want and even.counts == ""
        assert v.times_s["pairwise"] == (predict(get("alltoallv", "pairwise"), 5, 1000, params, counts=want),)
        assert even.times_s["pairwise"] == (predict(get("alltoall", "pairwise"), 5, 1000, params),)
    leaf, flat, root = (predict_table(params, [5], [1 << 20], ["gatherv"], counts=c)[0].times_s["binomial"][0]
                        for c in ("weights:1,1,1,1,6", None, "heavy:6"))
    assert leaf > flat > root  # a heavy block climbs the tree from a leaf; the root's own stays put
    main(["predict", *PREDICT, "-C", "alltoallv,allreduce", "--counts", "zipf:1.5"])  # returns when it succeeds
    out = capsys.readouterr().out
    assert out.count("blocks: --counts zipf:1.5") == 1 and "predicted allreduce at 4 ranks" in out


def test_the_moe_alltoallv_is_predicted_dearer_than_the_even_alltoall():
    """The goal's model side at 2 ranks: with moe:8,2,2 the busiest rank exchanges 1.26x the even block, so at sizes
    where bandwidth dominates the routed alltoallv is predicted at least 1.2x the even alltoall of the same total."""
    params = NetworkParams(5e-6, 1e-9)
    v, even = get("alltoallv", "pairwise"), get("alltoall", "pairwise")
    ratio = {n: predict(v, 2, n, params, counts="moe:8,2,2", itemsize=4) / predict(even, 2, n, params)
             for n in (1 << 10, 1 << 20, 16 << 20)}
    assert ratio[1 << 10] < 1.2 <= ratio[1 << 20] < ratio[16 << 20] < 1.3


# -- simulated: exact results, counted traffic = cost, critical path = the schedule's -----------------


@pytest.mark.parametrize("coll,name", [pytest.param(c, n, id=f"{c}-{n}") for c, n in HAND])
@pytest.mark.parametrize("P", range(1, 10))
def test_simulated_exact_and_costs_equal_counted_traffic(coll, name, P):
    spec_coll = COLLECTIVES[coll]
    alg = get(coll, name)
    roots = sorted({0, P - 1}) if spec_coll.rooted else [0]
    for spec in _specs(P):
        if spec.startswith(("moe", "~moe")) and parse_counts(spec).params[0] < P:
            continue
        for count in (0, 1, 13):
            for in_place in (False, True):
                if in_place and coll == "alltoallv" and not symmetric(spec, P):
                    continue
                for root in roots:
                    batches: list = []
                    wrong, counts, _ = run_sim(coll, name, P, count, "float64", "sum", in_place, root, batches,
                                               counts=spec)
                    where = (spec, count, in_place, root)
                    assert sum(wrong) == 0, where
                    cost = alg.cost(P, spec_coll.nbytes_for(count, 8, P), counts=spec, itemsize=8,
                                    **({"root": root} if spec_coll.rooted else {}))
                    got = tuple(max(getattr(c, f) for c in counts) for f in ("steps", "step_bytes", "reduced_bytes"))
                    assert got == pytest.approx(tuple(cost[:3])), where
                    path = critical_path(batches)
                    timing = cost.timing_cost
                    if cost.critical is None:
                        assert path[0] <= timing.alpha and path[1] <= timing.beta, where
                    else:
                        assert (timing.alpha, timing.beta) == path, where


@pytest.mark.parametrize("coll,name", [pytest.param(c, n, id=f"{c}-{n}") for c, n in HAND])
def test_simulated_every_dtype_and_op(coll, name):
    from ccbench.core.dtypes import DTYPES, OPS, half_available

    ops = list(OPS) if COLLECTIVES[coll].reduction else ["sum"]
    for dtype in DTYPES:
        if dtype == "bfloat16" and not half_available():
            continue
        for op in ops:
            wrong, _, _ = run_sim(coll, name, 4, 9, DTYPES[dtype], op, False, 1, counts="zipf:1.2")
            assert sum(wrong) == 0, (dtype, op)


# -- configuration, plan, trace and bad input at the door ----------------------------------------------


def test_all_names_the_even_collectives_and_counts_reach_only_the_v_ones():
    cfg = load_config(None, {"collectives": "all", "sizes": "1K"})
    assert cfg.collectives == EVEN and not set(V) & set(cfg.collectives) and cfg.counts == "uniform"
    cfg = load_config(None, {"collectives": "all,alltoallv", "counts": "moe:8,2,2", "sizes": "64K"})
    assert cfg.collectives == (*EVEN, "alltoallv") and cfg.counts == "moe:8,2,2,1024"
    cases, _ = plan(cfg, 2)
    assert {c.counts for c in cases if c.collective == "alltoallv"} == {"moe:8,2,2,1024"}
    assert {c.counts for c in cases if c.collective != "alltoallv"} == {"uniform"}
    a2a = [c for c in cases if c.collective in ("alltoall", "alltoallv") and c.algorithm == "native"]
    assert len({c.nbytes for c in a2a}) == 1  # the same size: the same total bytes
    assert "counts=moe:8,2,2,1024" in next(c for c in cases if c.collective == "alltoallv").label()


def test_alltoallv_in_place_needs_counts_the_same_both_ways():
    cfg = load_config(None, {"collectives": "alltoallv", "counts": "zipf", "in_place": "yes", "sizes": "1K"})
    with pytest.raises(UsageError, match="use --in-place no"):
        plan(cfg, 3)
    both = load_config(None, {"collectives": "alltoallv", "counts": "zipf", "in_place": "both", "sizes": "1K"})
    cases, skipped = plan(both, 3)
    assert not any(c.in_place for c in cases) and skipped[0][0] == "alltoallv in-place"
    uniform = load_config(None, {"collectives": "alltoallv", "in_place": "yes", "sizes": "1K"})
    assert all(c.in_place for c in plan(uniform, 3)[0])


def test_plan_refuses_counts_the_ranks_cannot_hold():
    cfg = load_config(None, {"collectives": "gatherv", "counts": "moe:4,1,1", "sizes": "1K"})
    plan(cfg, 4)
    with pytest.raises(UsageError, match="4 experts cannot be placed on 5 ranks"):
        plan(cfg, 5)
    with pytest.raises(UsageError, match="config key 'counts'"):
        load_config(None, {"counts": 3})


def test_trace_prices_the_distribution():
    t = trace("allgatherv", "ring", 4, 5, counts="heavy:10")
    assert t.nwrong == 0 and t.agrees and t.distribution == "heavy:10"
    assert t.cost.critical is not None and (t.cost.critical.alpha, t.cost.critical.beta) == t.critical_path
    assert trace("allgather", "ring", 3, 2, counts="moe").distribution == "uniform"  # not a v-collective
    with pytest.raises(UsageError, match="MPI_IN_PLACE"):
        trace("alltoallv", "pairwise", 3, 2, in_place=True, counts="zipf")
    with pytest.raises(UsageError, match="cannot be placed"):
        trace("alltoallv", "pairwise", 9, 2, counts="moe")


@pytest.mark.parametrize("argv,why", [
    (["run", "-C", "alltoallv", "--counts", "zipf:11", "--results-dir", "."], "Zipf exponent S must be in (0, 10]"),
    (["run", "-C", "alltoallv", "--counts", "moe:8,2,1.25,x", "--results-dir", "."], "'x' is not a number"),
    (["trace", "gatherv", "linear", "-n", "3", "--counts", "weights:1,2"], "gives 2 weights for 3 ranks"),
    (["predict", *PREDICT, "-C", "alltoallv,alltoall", "--counts", "weights:1,2"], "gives 2 weights for 4 ranks"),
    (["predict", *PREDICT, "-C", "alltoall", "--counts", "zipf"], "name one with -C"),
    (["predict", *PREDICT, "--counts", "zipf"], "name one with -C"),  # the default names no v-collective
    (["predict", *PREDICT, "-C", "alltoallv", "--counts", "zipf", "--placement", "block"], "leave one out"),
    (["predict", "--from", "a", "--against", "b", "--counts", "zipf"], "on the counts its run measured"),
])
def test_the_command_line_refuses_a_bad_distribution_in_one_line(tmp_path, argv, why):
    r = subprocess.run([sys.executable, "-m", "ccbench", *argv], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and why in lines[0], r.stderr
    assert not any(tmp_path.iterdir())  # nothing written


# -- the MoE workload's routed dispatch -------------------------------------------------------------


def test_routed_moe_dispatch_is_an_alltoallv_of_the_routed_tokens():
    from ccbench.workloads.schedule import moe_schedule

    padded = moe_schedule(64, 8, 2, 4, top_k=2)
    routed = moe_schedule(64, 8, 2, 4, top_k=2, dispatch="routed")
    assert routed.variant == "ep=4 routed" and [c.collective for c in routed.calls] == ["alltoallv"] * 2
    spec = routed.calls[0].counts
    assert spec == "moe:8,2,1,64" and routed.calls[1].counts == "~" + spec
    tokens = int(weights(parse_counts(spec), 4, matrix=True).sum())
    assert routed.calls[0].count == -(-tokens * 8 // 16)  # the mean block, rounded up
    assert tokens < 4 * 64 * 2 and routed.nbytes(4, 4) < padded.nbytes(4, 4)  # dropped tokens, no padding
    with pytest.raises(UsageError, match="unknown MoE dispatch"):
        moe_schedule(64, 8, 2, 4, dispatch="dense")


@pytest.mark.parametrize("name", ["pairwise", "linear"])
def test_routed_moe_step_is_exact_on_the_simulator(name):
    from ccbench.algorithms.p2p import CountedComm
    from ccbench.algorithms.simcomm import simulate
    from ccbench.measure.workload_engine import StepBuffers, step_calls
    from ccbench.workloads.schedule import moe_schedule

    sch = moe_schedule(32, 6, 2, 3, top_k=2, dispatch="routed")
    alg = get("alltoallv", name)

    def body(comm):
        cc = CountedComm(comm)
        bufs = StepBuffers(sch, 3, comm.rank, "float32")
        bufs.fill()
        for call in step_calls(cc, sch, {"alltoallv": alg}, bufs):
            call()
        return bufs.nwrong(), cc.counts.bytes_sent

    results, _ = simulate(3, body)
    m = block_counts(sch.calls[0].counts, 3, sch.calls[0].count * 9, matrix=True)
    assert sum(r[0] for r in results) == 0
    assert sum(r[1] for r in results) == 2 * 4 * (m.sum() - np.trace(m))  # dispatch + combine, off-diagonal
