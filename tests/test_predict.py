"""Predictions, model checks, winners and crossovers on fake cost models with known answers."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from ccbench.algorithms.registry import Cost
from ccbench.analysis.fit import NetworkParams
from ccbench.analysis.predict import (
    TwoLevelParams,
    compare_to_measured,
    crossovers,
    modelled,
    predict,
    predict_sizes,
    predicted_winners,
    prediction_table,
    two_level_allreduce_s,
    who_wins,
)
from ccbench.core.errors import CCBenchError

A, B, G = 1e-6, 1e-9, 5e-10
PARAMS = NetworkParams(A, B, G)


def lg(P):
    return math.ceil(math.log2(P))


def fake(collective, name, cost, unsupported=None):
    """An Algorithm-like object: .collective, .name, .cost(P, n) -> Cost, .unsupported."""
    return SimpleNamespace(
        collective=collective, name=name, cost=cost,
        unsupported=unsupported or (lambda P, op=None: None),
    )


def pof2_only(P, op=None):
    return None if P & (P - 1) == 0 else "needs a power of two"


RING = fake("allreduce", "ring",
            lambda P, n: Cost(2 * (P - 1), 2 * n * (P - 1) / P, n * (P - 1) / P))
RECDBL = fake("allreduce", "recursive_doubling",
              lambda P, n: Cost(lg(P), n * lg(P), n * lg(P)), pof2_only)
NATIVE = SimpleNamespace(collective="allreduce", name="native", cost=None)
BINOMIAL_BCAST = fake("bcast", "binomial", lambda P, n: Cost(lg(P), n * lg(P)))
REG = {"allreduce": {"ring": RING, "recursive_doubling": RECDBL, "native": NATIVE},
       "bcast": {"binomial": BINOMIAL_BCAST}}


def crossing(P, a=A, b=B, g=G):
    """Where ring and recursive doubling cost the same: solve the two linear costs."""
    da = 2 * (P - 1) - lg(P)                                  # ring's extra messages
    dbytes = lg(P) * (b + g) - (P - 1) / P * (2 * b + g)      # recdbl's extra per byte
    return da * a / dbytes


def test_predict_is_cost_times_params():
    P, n = 6, 12345
    want = 2 * 5 * A + 2 * n * 5 / 6 * B + n * 5 / 6 * G
    assert predict(RING, P, n, PARAMS) == pytest.approx(want, rel=1e-12)
    assert predict(RING, P, n, NetworkParams(A, B, None)) == pytest.approx(
        2 * 5 * A + 2 * n * 5 / 6 * B, rel=1e-12)
    with pytest.raises(CCBenchError, match="no cost model"):
        predict(NATIVE, 4, 8, PARAMS)
    assert modelled(REG) == [RING, RECDBL, BINOMIAL_BCAST]


def test_vectorised_helpers():
    sizes = [0, 8, 1024, 1 << 20]
    v = predict_sizes(RING, 4, sizes, PARAMS)
    assert v.shape == (4,) and v[2] == predict(RING, 4, 1024, PARAMS)
    table = prediction_table([RECDBL], [4, 6, 64, 65536], sizes, PARAMS)  # 6 ranks: not a power of two
    assert [(p.nranks, p.nbytes) for p in table] == [(P, n) for P in (4, 64, 65536) for n in sizes]
    assert all(math.isfinite(p.predicted_s) for p in table)
    assert table[8].predicted_s == pytest.approx(16 * A)


@pytest.mark.parametrize("P", [4, 16, 1024])
def test_crossover_at_the_analytic_size(P):
    (x,) = crossovers(RING, RECDBL, P, PARAMS, lo=1, hi=1 << 30)
    assert x.nbytes == pytest.approx(crossing(P), rel=1e-9)
    assert (x.faster_below, x.faster_above) == ("recursive_doubling", "ring")
    assert x.collective == "allreduce" and x.nranks == P
    (y,) = crossovers(RECDBL, RING, P, PARAMS)  # the order of the pair does not matter
    assert y.nbytes == pytest.approx(x.nbytes, rel=1e-12) and y.faster_below == x.faster_below
    assert crossovers(RING, RECDBL, P, PARAMS, lo=1, hi=int(crossing(P) / 2)) == []


def test_two_crossings_and_a_jump():
    # a protocol-like jump at 4096 B: slower between the crossings, faster after the jump
    step = fake("x", "step", lambda P, n: Cost(1, n) if n < 4096 else Cost(20, 0.25 * n))
    flat = fake("x", "flat", lambda P, n: Cost(10, 0.5 * n))
    first, second = crossovers(step, flat, 2, NetworkParams(1.0, 1.0))
    assert first.nbytes == 18.0            # 1 + n = 10 + n/2, hit exactly by bisection
    assert 4095 <= second.nbytes <= 4096   # the jump: located to one byte
    assert (first.faster_below, second.faster_below) == ("step", "flat")


def test_prediction_table_and_winners_at_scale():
    ranks, sizes = [64, 4096, 6000], [8, 1 << 10, 1 << 16, 1 << 24]
    table = prediction_table(REG, ranks, sizes, PARAMS, collectives=["allreduce"])
    names = {(p.algorithm, p.nranks) for p in table}
    assert ("recursive_doubling", 6000) not in names and ("ring", 6000) in names
    assert all(p.collective == "allreduce" for p in table)
    p = next(p for p in table if p.algorithm == "ring" and p.nranks == 64 and p.nbytes == 8)
    assert (p.steps, p.step_bytes) == (126, 2 * 8 * 63 / 64)
    wins = {(w.nranks, w.nbytes): w for w in predicted_winners(table)}
    for P in (64, 4096):
        for n in sizes:
            want = "recursive_doubling" if n < crossing(P) else "ring"
            assert wins[P, n].algorithm == want
    assert wins[6000, 8].algorithm == "ring" and wins[6000, 8].runner_up is None
    json.dumps([r.to_dict() for r in table + list(wins.values())], allow_nan=False)


def test_a_table_prices_each_cost_function_once_per_rank_count_and_size():
    """A persistent form shares its blocking twin's cost function (a v-collective's reads a P x P matrix): the
    table calls it once per (P, n) and gives both the same prediction."""
    calls = []

    def ring_cost(P, n):
        calls.append((P, n))
        return Cost(P - 1, n)

    algs = [fake("allgatherv", "ring", ring_cost), fake("allgatherv", "ring-persistent", ring_cost),
            fake("allgatherv", "linear", lambda P, n: Cost(1, n))]
    table = prediction_table(algs, [4, 64], [8, 1024], PARAMS)
    assert sorted(calls) == [(4, 8), (4, 1024), (64, 8), (64, 1024)]
    times = {(p.algorithm, p.nranks, p.nbytes): p.predicted_s for p in table}
    assert len(times) == 12
    assert all(times["ring", P, n] == times["ring-persistent", P, n] for P in (4, 64) for n in (8, 1024))
    assert times["linear", 64, 8] == pytest.approx(A + 8 * B)


def measured_rows(P=16, sizes=None, scale=None, noise=0.0, seed=0):
    """Rows 'measured' as exactly the model predicts (times `scale(alg, n)` if given)."""
    rng = np.random.default_rng(seed)
    sizes = sizes if sizes is not None else [8 * 4**i for i in range(10)]
    rows = []
    for alg in (RING, RECDBL):
        for n in sizes:
            t = predict(alg, P, n, PARAMS) * (scale(alg.name, n) if scale else 1.0)
            t *= math.exp(rng.normal(0, noise)) if noise else 1.0
            c = alg.cost(P, n)
            rows.append(dict(collective="allreduce", algorithm=alg.name, nranks=P, nbytes=n,
                             dtype="float64", op="sum", median_s=t, steps_max=c.alpha,
                             step_bytes_max=c.beta, reduced_bytes_max=c.gamma))
    return rows


def test_compare_to_measured_flags_and_reasons():
    rows = measured_rows(scale=lambda name, n: 1.5 if (name == "ring" and n == 2048) else 1.0)
    rows.append(dict(collective="allreduce", algorithm="native", nranks=16, nbytes=8,
                     median_s=1e-6))                      # no cost model: skipped
    rows.append(dict(collective="allreduce", algorithm="gone", nranks=16, nbytes=8,
                     median_s=1e-6))                      # unknown: skipped
    checks = compare_to_measured(rows, PARAMS, algorithms=REG)
    assert len(checks) == 20
    off = [c for c in checks if c.off]
    assert [(c.algorithm, c.nbytes) for c in off] == [("ring", 2048)]
    assert off[0].ratio == pytest.approx(1.5) and off[0].reasons == ()
    assert all(c.ratio == pytest.approx(1.0) for c in checks if not c.off)

    (c,) = [c for c in compare_to_measured(rows, PARAMS, algorithms=REG, oversubscribed=True,
                                           curve_breakpoints={("allreduce", "ring", 16): [4096]},
                                           cache_bytes=1024) if c.off]
    assert c.reasons == ("oversubscribed", "protocol change", "cache")
    # a network breakpoint applies to the mean message size: 2 * 2048 * 15/16 / 30 = 128 B
    (c,) = [c for c in compare_to_measured(rows, PARAMS, algorithms=REG,
                                           network_breakpoints=[200]) if c.off]
    assert c.reasons == ("protocol change",)
    (c,) = [c for c in compare_to_measured(rows, PARAMS, algorithms=REG,
                                           curve_breakpoints={("allreduce", "ring", 16): [1e6]},
                                           cache_bytes=1 << 20) if c.off]
    assert c.reasons == ()  # slower than predicted but fits no reason
    assert json.loads(json.dumps(c.to_dict(), allow_nan=False))["reasons"] == []


def test_who_wins_measured_vs_predicted():
    P = 16
    x = crossing(P)
    rows = measured_rows(P, noise=0.01)
    rows += [dict(collective="allreduce", algorithm="native", nranks=P, nbytes=n,
                  dtype="float64", op="sum", median_s=1e-9) for n in (8, 32)]       # native fastest at small sizes
    (ww,) = who_wins(rows, PARAMS, algorithms=REG)
    assert ww.collective == "allreduce"
    assert [c.nbytes for c in ww.crossovers] == [pytest.approx(x, rel=1e-9)]
    for r in ww.rows:
        want = "recursive_doubling" if r.nbytes < x else "ring"
        assert r.predicted_winner == want
        if abs(math.log(r.nbytes / x)) > 0.5:            # away from the crossover, noise is moot
            assert r.measured_winner_modelled == want and r.agree
        assert r.measured_winner == ("native" if r.nbytes in (8, 32) else r.measured_winner_modelled)
        assert r.margin is not None and r.margin >= 0
    assert ww.agreement is not None and ww.agreement >= 0.8
    d = json.loads(json.dumps(ww.to_dict(), allow_nan=False))
    assert d["agreement"] == pytest.approx(ww.agreement)

    # a measurement where ring is always fastest disagrees below the crossover
    rows = measured_rows(P, scale=lambda name, n: 0.01 if name == "ring" else 1.0)
    (ww,) = who_wins(rows, PARAMS, algorithms=REG)
    assert all(r.measured_winner_modelled == "ring" for r in ww.rows)
    assert not all(r.agree for r in ww.rows)


def test_two_level_allreduce_formula():
    intra_a, intra_b, inter_a, inter_b = 2e-7, 1e-10, 3e-6, 2e-10
    hp = TwoLevelParams(intra_a, intra_b, inter_a, inter_b, ranks_per_node=8, gamma_s_per_byte=G)
    P, n = 64, 4096
    nodes = 8
    leader = 2 * (nodes - 1) * inter_a + 2 * n * (nodes - 1) / nodes * inter_b \
        + n * (nodes - 1) / nodes * G                      # ring among the 8 leaders
    local = 3 * (intra_a + n * intra_b + n * G) + 3 * (intra_a + n * intra_b)
    assert two_level_allreduce_s(RING, P, n, hp) == pytest.approx(leader + local, rel=1e-12)
    # one node: only the local phases; one rank per node: only the leader allreduce
    assert two_level_allreduce_s(RING, 8, n, hp) == pytest.approx(local, rel=1e-12)
    flat = TwoLevelParams(intra_a, intra_b, inter_a, inter_b, 1, G)
    assert two_level_allreduce_s(RING, 64, n, flat) == pytest.approx(
        predict(RING, 64, n, NetworkParams(inter_a, inter_b, G)), rel=1e-12)
    # caller-supplied local algorithms replace the binomial terms
    lin = fake("bcast", "linear", lambda p, m: Cost(p - 1, m * (p - 1)))
    got = two_level_allreduce_s(RING, P, n, hp, local_bcast=lin)
    assert got == pytest.approx(leader + 3 * (intra_a + n * intra_b + n * G)
                                + 7 * (intra_a + n * intra_b), rel=1e-12)
    two = {p.nranks for p in prediction_table([RECDBL], [64, 96, 8], [8, n], PARAMS, two_level=hp)
           if p.algorithm == "two-level/recursive_doubling"}
    assert two == {64, 8}  # 96 ranks: 12 leaders, not a power of two; 8 ranks: one node, no leaders
    table = prediction_table([RING], [64], [n], PARAMS, two_level=hp)
    assert {p.algorithm for p in table} == {"ring", "two-level/ring"}
    with pytest.raises(CCBenchError):
        TwoLevelParams(1, 1, 1, 1, 0)
    json.dumps([r.to_dict() for r in table + [hp]], allow_nan=False)


def test_step_overhead_is_recovered_and_named_as_the_reason():
    """Hand-written cases that pay o per step on top of the model: the estimate finds o, and the
    cases the plain model misses are explained by it."""
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import compare_to_measured, estimate_step_overhead, predict

    params = NetworkParams(alpha_s=2e-6, beta_s_per_byte=1e-10, gamma_s_per_byte=1e-11, source="given")
    o = 3e-6
    rows = []
    for coll, name in (("allreduce", "ring"), ("allreduce", "recursive_doubling"), ("bcast", "binomial")):
        alg = REGISTRY[coll][name]
        for P in (2, 4, 8):
            for n in (8, 64, 512, 1 << 20):
                steps = alg.cost(P, n).timing_cost.alpha
                t = predict(alg, P, n, params) + o * steps
                rows.append({"collective": coll, "algorithm": name, "nranks": P, "nbytes": n, "median_s": t,
                             "steps_max": steps, "step_bytes_max": n, "dtype": "float32", "op": "sum"})
    got, cases = estimate_step_overhead(rows, params)
    assert got == pytest.approx(o, rel=1e-9) and cases == 3 * 3 * 3
    checks = compare_to_measured(rows, params, step_overhead_s=got)
    off = [c for c in checks if c.off]
    assert off and all("per-step overhead" in c.reasons for c in off)
    assert estimate_step_overhead([r for r in rows if r["nbytes"] > 1024], params) is None


def test_negative_step_overhead_explains_nothing():
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import compare_to_measured, predict

    params = NetworkParams(alpha_s=5e-6, beta_s_per_byte=1e-10, source="given")
    alg = REGISTRY["allreduce"]["ring"]
    rows = [{"collective": "allreduce", "algorithm": "ring", "nranks": 4, "nbytes": 8, "steps_max": 6,
             "median_s": 0.3 * predict(alg, 4, 8, params), "dtype": "float32", "op": "sum"}]
    (check,) = compare_to_measured(rows, params, step_overhead_s=-3e-6)
    assert check.off and "per-step overhead" not in check.reasons


# --------------------------------------------------------------------------- ranks per node


def hierarchical_s(P, ppn, n, a=A, b=B, g=G):
    """Seconds of the hierarchical allreduce on nodes of `ppn` ranks, derived by hand."""
    # a binomial reduce and broadcast over L = ceil(lg m) rounds in each node of m = min(ppn, P)
    # ranks (n bytes a round, n reduced on the way up), and Rabenseifner among the N = ceil(P / ppn)
    # node leaders, N a power of two here: 2 lg N steps, 2n(N-1)/N bytes, n(N-1)/N reduced
    # (Thakur, Rabenseifner & Gropp 2005, sections 4.1 and 4.5)
    m, N = min(ppn, P), -(-P // ppn)
    L, lgN = lg(m) if m > 1 else 0, lg(N) if N > 1 else 0
    return (2 * L + 2 * lgN) * a + (2 * L * n + 2 * n * (N - 1) / N) * b + (L * n + n * (N - 1) / N) * g


@pytest.mark.parametrize("P,ppn", [(64, 8), (256, 8), (4096, 64), (1024, 1), (64, 64), (16, 100)])
def test_hierarchical_allreduce_is_priced_on_nodes_of_ppn(P, ppn):
    from ccbench.algorithms import REGISTRY

    alg = REGISTRY["allreduce"]["hierarchical"]
    for n in (8, 4096, 1 << 24):
        want = hierarchical_s(P, ppn, n)
        assert predict(alg, P, n, PARAMS, ranks_per_node=ppn) == pytest.approx(want, rel=1e-12)
        assert predict_sizes(alg, P, [n], PARAMS, ranks_per_node=ppn)[0] == pytest.approx(want, rel=1e-12)
        (row,) = prediction_table([alg], [P], [n], PARAMS, ranks_per_node=ppn)
        assert row.predicted_s == pytest.approx(want, rel=1e-12)
    # without ranks per node: all ranks on one node, a binomial reduce + broadcast
    assert predict(alg, P, 4096, PARAMS) == pytest.approx(hierarchical_s(P, P, 4096), rel=1e-12)


def test_ranks_per_node_leaves_other_costs_alone():
    assert predict(RING, 64, 4096, PARAMS, ranks_per_node=8) == predict(RING, 64, 4096, PARAMS)
    table = prediction_table(REG, [64], [4096], PARAMS, ranks_per_node=8)
    assert {p.algorithm for p in table} == {"ring", "recursive_doubling", "binomial"}
    with pytest.raises(CCBenchError, match="ranks per node"):
        prediction_table(REG, [64], [4096], PARAMS, ranks_per_node=0)


def test_prediction_tables_price_hierarchical_on_ppn_or_the_two_level_nodes():
    """The hierarchical column used to equal binomial whatever the nodes: one node at 256 ranks."""
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.runs import predict_table

    P, sizes = 256, [8, 1 << 20]
    hier = [hierarchical_s(P, 8, n) for n in sizes]
    two = TwoLevelParams(2e-7, 5e-11, A, B, ranks_per_node=8, gamma_s_per_byte=G)
    for kw in ({"ranks_per_node": 8}, {"two_level": two}):
        (tab,) = predict_table(PARAMS, [P], sizes, ["allreduce"], **kw)
        assert tab.times_s["hierarchical"] == pytest.approx(hier, rel=1e-12)
        assert tab.times_s["hierarchical"][1] < tab.times_s["binomial"][1]
        rows = prediction_table(REGISTRY, [P], sizes, PARAMS, collectives=["allreduce"], **kw)
        got = [r for r in rows if r.algorithm == "hierarchical"]
        assert [r.predicted_s for r in got] == pytest.approx(hier, rel=1e-12)
        assert (got[0].steps, got[0].step_bytes) == (2 * 3 + 2 * 5, 2 * 3 * 8 + 2 * 8 * 31 / 32)
    # ranks per node as given wins over the two-level model's
    (tab,) = predict_table(PARAMS, [P], sizes, ["allreduce"], two_level=two, ranks_per_node=64)
    assert tab.times_s["hierarchical"] == pytest.approx([hierarchical_s(P, 64, n) for n in sizes], rel=1e-12)
    assert tab.times_s["two-level/ring"] == tuple(two_level_allreduce_s(REGISTRY["allreduce"]["ring"], P, n, two)
                                                  for n in sizes)
    (tab,) = predict_table(PARAMS, [P], sizes, ["allreduce"])
    assert tab.times_s["hierarchical"] == tab.times_s["binomial"]  # one node


def test_predict_command_takes_ppn_alone(capsys):
    from ccbench.cli import main
    from ccbench.core.units import fmt_time

    def run(*extra):
        code = 0
        try:
            main(["predict", "--alpha", "1us", "--beta", "1e-9", "--gamma", "5e-10", "-n", "256",
                  "-s", "1M", "-C", "allreduce", *extra])
        except SystemExit as exc:  # errors end by SystemExit, success may too
            code = exc.code or 0
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = run("--ppn", "8")
    assert code == 0, err
    assert "8 ranks per node (hierarchical allreduce)" in out and "two-level/" not in out
    row = next(line for line in out.splitlines() if "1 MiB" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    hier, binom = cells[7], cells[4]  # size, ring, recursive_doubling, rabenseifner, binomial, ...
    n = 1 << 20
    assert (hier, binom) == (fmt_time(hierarchical_s(256, 8, n)), fmt_time(hierarchical_s(256, 256, n)))
    code, out, err = run()
    assert code == 0, err
    row = next(line for line in out.splitlines() if "1 MiB" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells[7] == cells[4]  # one node without --ppn
    for extra, message in ((("--ppn", "0"), "--ppn must be at least 1"),
                           (("--intra-alpha", "1us", "--ppn", "8"), "needs all of --intra-alpha, --intra-beta"),
                           (("--intra-alpha", "1us", "--intra-beta", "1e-10"), "needs all of")):
        code, _, err = run(*extra)
        assert code == 2 and message in err


@pytest.mark.parametrize("P,ppn", [(256, 8), (4096, 64), (100, 12), (1000, 1)])
def test_hierarchical_with_ppn_is_the_two_level_model_on_one_network(P, ppn):
    """One network inside and between nodes: the two-level Rabenseifner is the hierarchical allreduce."""
    from ccbench.algorithms import REGISTRY

    same = TwoLevelParams(A, B, A, B, ranks_per_node=ppn, gamma_s_per_byte=G)
    for n in (8, 1 << 16, 1 << 24):
        want = two_level_allreduce_s(REGISTRY["allreduce"]["rabenseifner"], P, n, same)
        assert predict(REGISTRY["allreduce"]["hierarchical"], P, n, PARAMS, ranks_per_node=ppn) == \
            pytest.approx(want, rel=1e-12)


def test_model_checks_and_who_wins_price_the_hierarchical_allreduce_at_the_runs_ranks_per_node():
    """A measured hierarchical allreduce on 4 nodes of 16 is compared with its 16-per-node price, not one node's."""
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.predict import compare_to_measured, predict, who_wins

    hier, binom = REGISTRY["allreduce"]["hierarchical"], REGISTRY["allreduce"]["binomial"]
    n, P = 1 << 20, 64
    node = predict(hier, P, n, PARAMS, ranks_per_node=16)
    flat = predict(hier, P, n, PARAMS)
    assert node != pytest.approx(flat)  # the node-aware price differs from the one-node price
    rows = [{"collective": "allreduce", "algorithm": a, "nranks": P, "nbytes": n, "median_s": t, "dtype": "float32",
             "op": "sum", "in_place": False, "root": 0, "ok": True}
            for a, t in (("hierarchical", node), ("binomial", predict(binom, P, n, PARAMS)))]
    checks = {c.algorithm: c for c in compare_to_measured(rows, PARAMS, ranks_per_node=16)}
    assert checks["hierarchical"].predicted_s == pytest.approx(node)
    assert checks["hierarchical"].ratio == pytest.approx(1)
    one_node = {c.algorithm: c for c in compare_to_measured(rows, PARAMS)}
    assert one_node["hierarchical"].predicted_s == pytest.approx(flat)
    (w,) = who_wins(rows, PARAMS, ranks_per_node=16)
    assert w.rows[0].predicted_winner == ("hierarchical" if node < predict(binom, P, n, PARAMS) else "binomial")
    # 2 lg 16 rounds in a node plus Rabenseifner among 4 leaders move 8n + 1.5n bytes, one node's
    # binomial 12n: the node-aware price wins, and it is the one reported
    assert node < predict(binom, P, n, PARAMS)
    assert (w.rows[0].predicted_winner, w.rows[0].predicted_s) == ("hierarchical", node)


# --------------------------------------------------------------------------- edges, known answers
# Fakes priced with alpha = beta = 1 (and no gamma) so that every time is an exact binary
# number: "lin" costs 1 + n seconds, "free" nothing, "nocost" has no model at all.

ONE = NetworkParams(1.0, 1.0)
LIN = fake("x", "lin", lambda P, n: Cost(1, n))
FREE = fake("x", "free", lambda P, n: Cost(0, 0))
NOCOST = SimpleNamespace(collective="x", name="nocost")          # no `cost` attribute at all
XREG = {"x": {"lin": LIN, "free": FREE, "nocost": NOCOST}}


def row(alg, P, n, t, **kw):
    return dict(collective="x", algorithm=alg, nranks=P, nbytes=n, median_s=t, **kw)


def test_algorithms_without_a_model_or_attributes():
    bare = SimpleNamespace()                                     # no collective, name or cost
    with pytest.raises(CCBenchError, match=r"^\?/\? has no cost model$"):
        predict(bare, 4, 8, PARAMS)
    with pytest.raises(CCBenchError, match=r"^allreduce/native has no cost model$"):
        predict(NATIVE, 4, 8, PARAMS)
    assert modelled([NOCOST, LIN, NATIVE]) == [LIN]
    # parameters without a gamma attribute price no reduction: 1 step + 6 bytes at 1 s each
    assert predict(LIN, 4, 6, SimpleNamespace(alpha_s=1.0, beta_s_per_byte=1.0)) == 7.0
    # an algorithm without `unsupported` runs at every count; one whose `unsupported` needs the op
    # gets None for it
    plain = SimpleNamespace(collective="x", name="plain", cost=lambda P, n: Cost(1, n))
    asks = SimpleNamespace(collective="x", name="asks", cost=lambda P, n: Cost(1, n),
                           unsupported=lambda P, op: None if op is None else "unexpected op")
    table = prediction_table([plain, asks], [3], [5], ONE)
    assert [(p.algorithm, p.nranks, p.predicted_s) for p in table] == [("plain", 3, 6.0), ("asks", 3, 6.0)]


def test_prediction_rows_carry_every_cost_term():
    gam = fake("x", "gam", lambda P, n: Cost(2, 3 * n, 5 * n))
    (p,) = prediction_table([gam], [7], [4], NetworkParams(1.0, 1.0, 1.0))
    assert (p.collective, p.algorithm, p.nranks, p.nbytes) == ("x", "gam", 7, 4)
    assert (p.predicted_s, p.steps, p.step_bytes, p.reduced_bytes) == (2 + 12 + 20, 2, 12, 20)


def test_predicted_winners_name_the_runner_up():
    mk = lambda name, t: SimpleNamespace(collective="x", algorithm=name, nranks=4, nbytes=8,  # noqa: E731
                                         predicted_s=t)
    (w,) = predicted_winners([mk("slow", 2.0), mk("fast", 1.0), mk("nan", math.nan)])
    assert (w.collective, w.nranks, w.nbytes, w.algorithm, w.predicted_s, w.runner_up, w.runner_up_s) == \
        ("x", 4, 8, "fast", 1.0, "slow", 2.0)
    (w,) = predicted_winners([mk("alone", 3.0)])
    assert (w.algorithm, w.predicted_s, w.runner_up, w.runner_up_s) == ("alone", 3.0, None, None)


def test_two_level_rows_in_the_prediction_table():
    hp = TwoLevelParams(1.0, 1.0, 1.0, 1.0, ranks_per_node=3)
    # 24 ranks on nodes of 3: 8 leaders, a power of two, so recursive doubling leads
    (p,) = [p for p in prediction_table([RECDBL], [24], [16], PARAMS, two_level=hp)
            if p.algorithm.startswith("two-level/")]
    assert (p.collective, p.algorithm, p.nranks, p.nbytes) == ("allreduce", "two-level/recursive_doubling", 24, 16)
    assert math.isnan(p.steps) and math.isnan(p.step_bytes) and math.isnan(p.reduced_bytes)
    # a leader algorithm refusing fewer than 3 ranks: fine on one node (no leader step), not on 2
    three = fake("allreduce", "three", lambda P, n: Cost(P, n), lambda P, op=None: None if P >= 3 else "3+")
    hp8 = TwoLevelParams(1.0, 1.0, 1.0, 1.0, ranks_per_node=8)
    two = [p.nranks for p in prediction_table([three], [8, 16, 24], [4], ONE, two_level=hp8)
           if p.algorithm == "two-level/three"]
    assert two == [8, 24]


def test_two_level_params_message():
    with pytest.raises(CCBenchError, match="^ranks per node must be at least 1$"):
        TwoLevelParams(1, 1, 1, 1, 0)


def test_two_level_without_gamma_and_on_two_ranks_per_node():
    ia, ib, ea, eb = 2.0, 3.0, 5.0, 7.0
    n = 4
    # gamma left out: it is 0, not 1
    hp = TwoLevelParams(ia, ib, ea, eb, ranks_per_node=8)
    ring8 = 2 * 7 * ea + 2 * n * 7 / 8 * eb                  # ring among 8 leaders, no gamma
    assert two_level_allreduce_s(RING, 64, n, hp) == pytest.approx(ring8 + 3 * (ia + n * ib) * 2, rel=1e-12)
    # two ranks per node on two nodes: one binomial round each way, a ring of 2 leaders
    hp2 = TwoLevelParams(ia, ib, ea, eb, ranks_per_node=2, gamma_s_per_byte=11.0)
    ring2 = 2 * ea + n * eb + n / 2 * 11.0
    assert two_level_allreduce_s(RING, 4, n, hp2) == pytest.approx(
        (ia + n * ib + n * 11.0) + (ia + n * ib) + ring2, rel=1e-12)
    lin = fake("x", "linear", lambda p, m: Cost(p - 1, m * (p - 1), m * (p - 1)))
    assert two_level_allreduce_s(RING, 4, n, hp2, local_reduce=lin, local_bcast=lin) == pytest.approx(
        2 * (ia + n * ib + n * 11.0) + ring2, rel=1e-12)


def test_two_level_local_reduce_model():
    ia, ib, ea, eb, g = 2.0, 3.0, 5.0, 7.0, 11.0
    hp = TwoLevelParams(ia, ib, ea, eb, ranks_per_node=8, gamma_s_per_byte=g)
    n = 4
    lin = fake("reduce", "linear", lambda p, m: Cost(p - 1, m * (p - 1), m * (p - 1)))
    ring8 = 2 * 7 * ea + 2 * n * 7 / 8 * eb + n * 7 / 8 * g
    got = two_level_allreduce_s(RING, 64, n, hp, local_reduce=lin)
    assert got == pytest.approx(7 * (ia + n * ib + n * g) + ring8 + 3 * (ia + n * ib), rel=1e-12)


def test_two_level_skips_the_phases_that_have_no_ranks():
    """A model with a fixed cost even on one rank is not asked where its phase has no ranks."""
    ia, ib, ea, eb = 2.0, 3.0, 5.0, 7.0
    fixed = fake("x", "fixed", lambda p, m: Cost(1, m))
    n = 4
    # one rank per node: the leader allreduce only
    ppn1 = TwoLevelParams(ia, ib, ea, eb, ranks_per_node=1)
    assert two_level_allreduce_s(fixed, 16, n, ppn1, local_reduce=fixed, local_bcast=fixed) == ea + n * eb
    # one node: the local phases only
    one = TwoLevelParams(ia, ib, ea, eb, ranks_per_node=16)
    assert two_level_allreduce_s(fixed, 16, n, one, local_reduce=fixed, local_bcast=fixed) == 2 * (ia + n * ib)


def _check_fields(c):
    return (c.collective, c.algorithm, c.nranks, c.nbytes, c.dtype, c.op, c.measured_s, c.predicted_s,
            c.ratio, c.off, c.reasons)


def test_compare_to_measured_skips_and_fields():
    rows = [row("nocost", 4, 8, 1.0), row("lin", 4, 8, None), row("lin", 4, 8, math.nan),
            dict(row("lin", 4, 8, 1.0), collective="y"),
            row("lin", 4, 7, 8.0, dtype="f32", op="max"),
            row("lin", 4, 3, 5.0)]                                # 1.25 times 1 + 3: at the tolerance
    checks = compare_to_measured(rows, ONE, algorithms=XREG)
    assert [_check_fields(c) for c in checks] == [
        ("x", "lin", 4, 7, "f32", "max", 8.0, 8.0, 1.0, False, ()),
        ("x", "lin", 4, 3, None, None, 5.0, 4.0, 1.25, False, ()),
    ]
    assert [c.off for c in compare_to_measured([row("lin", 4, 3, 5.0)], ONE, algorithms=XREG,
                                               tolerance=0.24)] == [True]


def test_compare_to_measured_zero_prediction():
    (c,) = compare_to_measured([row("free", 4, 8, 1.0, steps_max=0)], ONE, algorithms=XREG, step_overhead_s=1.0)
    assert c.predicted_s == 0.0 and math.isnan(c.ratio) and c.off and c.reasons == ()


def test_compare_to_measured_cache_edges():
    # 1 + 1023 = 1024 s predicted; the cache holds exactly 1023 bytes
    def reasons(t):
        (c,) = compare_to_measured([row("lin", 4, 1023, t)], ONE, algorithms=XREG, cache_bytes=1023)
        return c.reasons
    assert reasons(512.0) == ("cache",)   # faster, and it fits
    assert reasons(2048.0) == ()          # slower, but it fits


def test_compare_to_measured_protocol_change_edges():
    def reasons(n, **kw):
        (c,) = compare_to_measured([row("lin", 4, n, 3.0 * (1 + n))], ONE, algorithms=XREG, **kw)
        assert c.off
        return c.reasons
    curve = {("x", "lin", 4): [512]}
    assert reasons(1024, curve_breakpoints=curve) == ("protocol change",)   # 512 * 2: inside
    assert reasons(1025, curve_breakpoints=curve) == ()
    assert reasons(256, curve_breakpoints=curve) == ("protocol change",)    # 512 / 2: inside
    assert reasons(1, curve_breakpoints={("x", "lin", 4): [1]}) == ("protocol change",)
    assert reasons(1023, curve_breakpoints={("x", "lin", 4): [3000]}) == ()  # within 3x, not 2x
    assert reasons(1023, curve_breakpoints={("x", "lin", 4): [3000]}, near_factor=3.0) == ("protocol change",)
    # missing or zero breakpoints are ignored; no steps counted: the message is the whole vector
    assert reasons(100, network_breakpoints=[None, 0, 150]) == ("protocol change",)


def test_compare_to_measured_takes_curve_fits():
    from ccbench.analysis.fit import CurveFit, SegmentedFit

    def fit(alg, *bps):
        seg = SegmentedFit(segments=(), breakpoints_bytes=bps, bic=(), r2=1.0, max_rel_residual=0.0)
        return CurveFit("x", alg, 4, "f32", "sum", False, None, None, seg)

    fits = [fit("lin", 100), fit("lin", 5000), fit("other", 60), "not a fit"]
    got = {c.nbytes: c.reasons for c in compare_to_measured(
        [row("lin", 4, n, 3.0 * (1 + n)) for n in (60, 400, 3000)], ONE, algorithms=XREG,
        curve_breakpoints=fits)}
    assert got == {60: ("protocol change",), 400: (), 3000: ("protocol change",)}


def test_per_step_overhead_reason_at_the_tolerance():
    # 1 + 0 = 1 s predicted, 1 step; with o = 1 s: 2 s; measured 2.5 s is 1.25 times that
    (c,) = compare_to_measured([row("lin", 4, 0, 2.5, steps_max=1)], ONE, algorithms=XREG, step_overhead_s=1.0)
    assert c.off and c.reasons == ("per-step overhead",)


def test_step_overhead_rows_it_uses():
    # o = 0.5 s per step from the 1 KiB case; the 1025-byte case is above the default limit
    rows = [dict(row("lin", 4, 8, 1.0), collective="y", steps_max=1),
            row("nocost", 4, 8, 1.0, steps_max=1), row("free", 4, 8, 1.0, steps_max=0),
            row("lin", 4, 8, None, steps_max=1), row("lin", 4, 8, math.nan, steps_max=1),
            row("lin", 4, 8, 100.0),                                  # no steps counted: native-like
            row("lin", 4, 1024, 1025.5, steps_max=1), row("lin", 4, 1025, 1126.0, steps_max=1)]
    from ccbench.analysis.predict import estimate_step_overhead
    assert estimate_step_overhead(rows, ONE, algorithms=XREG) == (0.5, 1)
    assert estimate_step_overhead(rows, ONE) is None                  # the registry has no "x"
    assert estimate_step_overhead(rows, ONE, algorithms=XREG, max_bytes=1025) == (50.25, 2)


def test_step_overhead_on_nodes():
    """8 ranks on nodes of 3: 2 binomial rounds each way and Rabenseifner among 3 leaders
    (fold 1, 2 steps, unfold 1): 8 steps, where one node takes 2 x 3 = 6."""
    from ccbench.algorithms import REGISTRY
    from ccbench.analysis.predict import estimate_step_overhead

    hier = REGISTRY["allreduce"]["hierarchical"]
    assert hier.cost(8, 64, ranks_per_node=3).timing_cost.alpha == 8
    assert hier.cost(8, 64).timing_cost.alpha == 6
    o = 1e-4
    r = dict(collective="allreduce", algorithm="hierarchical", nranks=8, nbytes=64, steps_max=8,
             median_s=predict(hier, 8, 64, PARAMS, ranks_per_node=3) + 8 * o)
    got, cases = estimate_step_overhead([r], PARAMS, ranks_per_node=3)
    assert got == pytest.approx(o, rel=1e-9) and cases == 1
    (c,) = compare_to_measured([r], PARAMS, ranks_per_node=3, step_overhead_s=o)
    assert c.off and c.reasons == ("per-step overhead",)


# -- crossovers: a difference that dips below zero at one size only

def dip(k):
    """t = 1 s, except 0 s at exactly `k` bytes (against a flat 0.5 s)."""
    return fake("d", f"dip{k}", lambda P, n: Cost(0 if n == k else 1, 0))


HALF = fake("d", "half", lambda P, n: Cost(0.5, 0))


def test_crossovers_on_the_default_grid():
    """The default grid is 97 log-spaced sizes from 1 byte to 1 GiB, 2^(30 i / 96): 32 = 2^5 is its
    17th point (26 and 40 its neighbours); a 98-point or 50-point grid has no 32."""
    below, above = crossovers(dip(32), HALF, 4, ONE)
    # bisection to [31, 32] and [32, 33], then halfway (the differences are +-0.5)
    assert (below.nbytes, below.faster_below, below.faster_above) == (31.5, "half", "dip32")
    assert (above.nbytes, above.faster_below, above.faster_above) == (32.5, "dip32", "half")
    assert below.collective == "d"
    assert crossovers(dip(32), HALF, 4, ONE, points=98) == []
    # two points are the ends only; a third would be the middle, 2^15
    assert crossovers(dip(1 << 15), HALF, 4, ONE, points=2) == []
    assert len(crossovers(dip(1 << 15), HALF, 4, ONE, points=3)) == 2


def test_crossovers_edges():
    # 1 s against 1/1.5 s per byte: they cross at 1.5 bytes, between the first two sizes
    (x,) = crossovers(fake("d", "lat", lambda P, n: Cost(1, 0)), fake("d", "bw", lambda P, n: Cost(0, n / 1.5)), 2, ONE)
    assert x.nbytes == pytest.approx(1.5, rel=1e-12)
    # from 0 bytes: 1 s against 2 s per byte cross at half a byte
    (x,) = crossovers(fake("d", "lat", lambda P, n: Cost(1, 0)), fake("d", "bw", lambda P, n: Cost(0, 2 * n)),
                      2, ONE, lo=0, hi=100)
    assert x.nbytes == 0.5
    assert crossovers(LIN, FREE, 2, ONE, lo=0, hi=0) == [] and crossovers(LIN, FREE, 2, ONE, lo=5, hi=5) == []
    # equal at 32 bytes without a swap: no crossover
    touch = fake("d", "touch", lambda P, n: Cost(0, abs(n - 32)))
    assert crossovers(fake("d", "zero", lambda P, n: Cost(0, 0)), touch, 2, ONE) == []
    # no collective attribute: an empty name
    a = SimpleNamespace(name="a", cost=lambda P, n: Cost(1, 0))
    b = SimpleNamespace(name="b", cost=lambda P, n: Cost(0, n / 1.5))
    assert crossovers(a, b, 2, ONE)[0].collective == ""


def test_crossover_at_a_jump_is_bracketed_to_a_byte():
    # 1 s below 4096 bytes, 7 s from there, against 6 s: -5 then +1; the last bracket
    # [4095, 4096] is interpolated linearly: 4095 + 5/6
    jump = fake("d", "jump", lambda P, n: Cost(1 if n < 4096 else 7, 0))
    (x,) = crossovers(jump, fake("d", "six", lambda P, n: Cost(6, 0)), 2, ONE)
    assert x.nbytes == pytest.approx(4095 + 5 / 6, rel=1e-12)


# -- who wins, on fakes: "few" costs 2 + n, "many" 8 + n / 4, crossing at n = 8

FEW = fake("w", "few", lambda P, n: Cost(2, n))
MANY = fake("w", "many", lambda P, n: Cost(8, n / 4))
ODD = fake("w", "odd", lambda P, n: Cost(0, 0), lambda P, op=None: None if P % 2 else "odd ranks only")
WREG = {"w": {"few": FEW, "many": MANY, "odd": ODD, "native": SimpleNamespace(collective="w", name="native")}}


def wrow(alg, P, n, t, dtype="f64", op="sum", coll="w"):
    return dict(collective=coll, algorithm=alg, nranks=P, nbytes=n, median_s=t, dtype=dtype, op=op)


def test_who_wins_rows_and_crossovers_known_answers():
    rows = [wrow("native", 4, 1, 1.0, coll="pingpong"), wrow("few", 4, 1, None), wrow("few", 4, 1, math.nan)]
    for P, sizes in ((2, (1, 4)), (4, (1, 4, 16, 64)), (8, (16, 64))):
        for n in sizes:
            rows += [wrow("few", P, n, 2.0 + n), wrow("many", P, n, 8.0 + n / 4)]
    rows += [wrow("few", 4, 1, 5.0),                     # measured again, slower: the faster counts
             wrow("odd", 4, 1, 0.5),                     # unsupported at 4 ranks: not modelled
             wrow("few", 4, 16, 18.0, dtype="f32"),      # another dtype at the same size, after f64
             wrow("few", 16, 2, 4.0),                    # the only modelled one
             wrow("native", 32, 2, 1.0),                 # none modelled
             wrow("few", 6, 8, 0.0), wrow("many", 6, 8, 1.0),   # a zero fastest time: no margin
             wrow("few", 3, 1, 1.0, coll="nomodels")]
    got = who_wins(rows, ONE, algorithms=WREG)
    assert [w.collective for w in got] == ["w", "nomodels"]
    w, nomodels = got
    # the crossing at 8 bytes lies inside the measured sizes at 4 ranks only
    assert [tuple(x.to_dict().values()) for x in w.crossovers] == [("w", 4, 8.0, "few", "many")]
    r = {(x.nranks, x.nbytes, x.dtype): x for x in w.rows}
    assert [(x.nranks, x.nbytes, x.dtype) for x in w.rows if x.nranks == 4] == [
        (4, 1, "f64"), (4, 4, "f64"), (4, 16, "f64"), (4, 16, "f32"), (4, 64, "f64")]
    assert tuple(r[4, 1, "f64"].to_dict().values()) == (4, 1, "f64", "sum", "odd", 0.5, "few", "few", 3.0,
                                                        True, 1.75)  # 8.25 / 3 - 1
    assert r[4, 64, "f64"].margin == pytest.approx((2 + 64) / (8 + 16) - 1)
    assert (r[4, 64, "f64"].measured_winner_modelled, r[4, 64, "f64"].predicted_winner) == ("many", "many")
    assert (r[16, 2, "f64"].predicted_winner, r[16, 2, "f64"].predicted_s, r[16, 2, "f64"].agree,
            r[16, 2, "f64"].margin) == ("few", 4.0, None, None)
    x = r[32, 2, "f64"]
    assert (x.measured_winner, x.measured_winner_modelled, x.predicted_winner, x.predicted_s, x.agree,
            x.margin) == ("native", None, None, None, None, None)
    assert r[6, 8, "f64"].margin is None and r[6, 8, "f64"].measured_winner == "few"
    assert [(x.measured_winner_modelled, x.predicted_winner) for x in nomodels.rows] == [(None, None)]
    assert nomodels.crossovers == () and nomodels.agreement is None
    # the registry itself holds no "w"
    (w,) = [g for g in who_wins(rows, ONE) if g.collective == "w"]
    assert all(x.predicted_winner is None for x in w.rows) and w.crossovers == ()


def test_who_wins_passes_its_crossover_grid():
    reg = {"d": {"dip32": dip(32), "half": HALF}}
    rows = [dict(collective="d", algorithm=a, nranks=4, nbytes=n, median_s=1.0)
            for a in ("dip32", "half") for n in (1, 1 << 30)]
    (w,) = who_wins(rows, ONE, algorithms=reg)
    assert [x.nbytes for x in w.crossovers] == [31.5, 32.5]
    (w,) = who_wins(rows, ONE, algorithms=reg, crossover_points=98)
    assert w.crossovers == ()


# --------------------------------------------------------------------------- effective parameters per path


def test_effective_params_recover_each_paths_alpha_and_beta():
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import effective_params, model_registry

    models, _ = model_registry("mpich")
    truth = {"numpy": (9e-6, 2e-10), "mpi": (1.5e-6, 4e-10)}
    base = NetworkParams(1e-6, 1e-10, 5e-11, library_gamma_s_per_byte=3e-10, gamma_cold_s_per_byte=2e-10,
                         library_gamma_cold_s_per_byte=5e-10, cold_above_bytes=1 << 20)
    rows = []
    for name in ("ring", "recursive_doubling", "rabenseifner", "native:ring", "native:reduce_scatter_allgather",
                 "native:recursive_doubling"):
        alg = models["allreduce"][name]
        a, b = truth["mpi" if name.startswith("native") else "numpy"]
        for n in (64, 4096, 1 << 16, 1 << 20, 4 << 20):
            c = alg.cost(4, n).timing_cost
            t = c.alpha * a + c.beta * b + c.gamma * base.gamma_for(name.startswith("native"), n)
            rows.append({"collective": "allreduce", "algorithm": name, "nranks": 4, "nbytes": n, "median_s": t,
                         "samples_s": [t * 0.99, t, t * 1.01]})
    eff = effective_params(rows, base, algorithms=models, n_boot=100)
    for path, p in (("numpy", eff.numpy), ("mpi", eff.mpi)):
        assert p.alpha_s == pytest.approx(truth[path][0], rel=1e-6)
        assert p.beta_s_per_byte == pytest.approx(truth[path][1], rel=1e-6)
        assert p.library_gamma_s_per_byte == 3e-10 and p.cold_above_bytes == 1 << 20  # gammas carried, not fitted
    # the predictions with them reproduce every row, each on its own path
    for r in rows:
        alg = models["allreduce"][r["algorithm"]]
        assert predict(alg, 4, r["nbytes"], eff) == pytest.approx(r["median_s"], rel=1e-6)
    # a library path without rows keeps the hand-written path's alpha and beta, and says so
    hand = effective_params([r for r in rows if not r["algorithm"].startswith("native")], base, algorithms=models,
                            n_boot=0)
    assert hand.mpi.alpha_s == hand.numpy.alpha_s and any("keep the hand-written" in n for n in hand.notes)


def test_predict_table_leaves_a_gap_where_the_library_choice_has_no_model():
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import model_registry
    from ccbench.analysis.runs import predict_table

    tree = {"collective=allreduce": {"comm_type=intra": {
        "avg_msg_size<=8": {"algorithm=MPIR_Allreduce_intra_nonexistent": {}},
        "avg_msg_size=any": {"algorithm=MPIR_Allreduce_intra_ring": {}}}}}
    models, _ = model_registry("mpich", selection_tree=tree, measured=[("allreduce", "native")])
    (tab,) = predict_table(NetworkParams(1e-6, 1e-10, 1e-11), [4], [8, 1024], ["allreduce"], algorithms=models)
    assert math.isnan(tab.times_s["native"][0]) and tab.times_s["native"][1] > 0
    # priced as the ring; no library gamma given, so numpy's stands in: the same time
    assert tab.times_s["native"][1] == pytest.approx(tab.times_s["ring"][1])


def test_intra_from_takes_ping_pong_and_the_memory_share_of_a_one_node_run(tmp_path, capsys):
    """--intra-from RUN --ppn N: intra alpha = the run's ping-pong alpha, intra beta = the larger of ping-pong's
    beta and 2 N / the node's copy bandwidth at N ranks; a run without the record says so."""
    import shutil
    from pathlib import Path

    from ccbench.analysis.runs import intra_node_params, params_from_run
    from ccbench.cli import main
    from ccbench.store.run import open_run

    src = Path(__file__).resolve().parent / "data" / "run-np2"
    pp = params_from_run(open_run(src))
    a, b, text = intra_node_params(open_run(src), 8)
    assert (a, b) == (pp.alpha_s, pp.beta_s_per_byte) and "no memory bandwidth record" in text

    run = tmp_path / "with-memory"
    shutil.copytree(src, run)
    meta = json.loads((run / "run.json").read_text())
    # one core 10 GB/s counted, the node's 2 ranks 16 GB/s: at 8 ranks 16 GB/s shared, 2 GB/s each
    meta["memory_bandwidth"] = {
        "method": "STREAM copy", "repetitions": 1,
        "one_core": {"host": "h", "nbytes": 50_000_000, "counted_bytes": 100_000_000, "seconds": [0.01]},
        "all_ranks": [{"host": "h", "ranks": 2, "nbytes": 40_000_000, "counted_bytes": 80_000_000,
                       "seconds": [0.01]}]}
    (run / "run.json").write_text(json.dumps(meta))
    a, b, text = intra_node_params(open_run(run), 8)
    assert a == pp.alpha_s and b == pytest.approx(max(2 * 8 / 16e9, pp.beta_s_per_byte))
    assert b == pytest.approx(1e-9) and "memory bandwidth shared by 8 ranks per node" in text

    def cli(*extra):
        try:
            main(["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "64", "-s", "1M", "-C", "allreduce", *extra])
        except SystemExit as exc:
            return exc.code or 0, capsys.readouterr()
        return 0, capsys.readouterr()

    code, out = cli("--intra-from", str(run), "--ppn", "8")
    assert code == 0, out.err
    assert "intra beta = 1e-09 s/B, 8 ranks per node" in out.out.replace("\n", " ")
    for extra, message in ((("--intra-from", str(run)), "--intra-from needs --ppn"),
                           (("--intra-from", str(run), "--ppn", "8", "--intra-alpha", "1us"), "not both")):
        code, out = cli(*extra)
        assert code == 2 and message in out.err


def test_native_model_describes_the_textbook_algorithms_it_is_priced_as():
    from ccbench.analysis.predict import NativeModel

    ring = SimpleNamespace(collective="allreduce", name="ring")
    scatter = SimpleNamespace(collective="scatter", name="binomial")
    allgather = SimpleNamespace(collective="allgather", name="ring")
    # a part of the model's own collective is named bare, one of another collective with it
    forced = NativeModel("bcast", "native:scatter_allgather", lambda P, n: ((scatter, allgather), ""))
    assert forced.describe(4, 8) == "scatter/binomial + allgather/ring"
    own = NativeModel("allreduce", "native:ring", lambda P, n: ((ring,), "a note"))
    assert own.describe(4, 8) == "ring"           # a forced variant does not repeat its note
    # the library's selection adds the note's first clause: what the library selects
    chosen = NativeModel("allreduce", "native", lambda P, n: ((ring, scatter), "MPICH selects X; priced as Y"),
                         selected=True)
    assert chosen.describe(4, 8) == "ring + scatter/binomial (MPICH selects X)"
    # no parts: the note says why there is no model
    none = NativeModel("allreduce", "native", lambda P, n: ((), "not modelled: MPICH selects Z"), selected=True)
    assert none.describe(4, 8) == "not modelled: MPICH selects Z"
    seen = []
    NativeModel("allreduce", "native", lambda P, n: seen.append((P, n)) or ((ring,), "")).describe(4.0, 8.0)
    assert seen == [(4, 8)] and all(type(v) is int for v in seen[0])   # asked at whole (P, n)


def test_compare_to_measured_records_the_path_and_what_a_library_algorithm_is_priced_as():
    from ccbench.analysis.predict import NativeModel

    native_ring = NativeModel("allreduce", "native:ring", lambda P, n: ((RING,), ""))
    reg = {"allreduce": {"ring": RING, "native:ring": native_ring}}
    rows = [dict(collective="allreduce", algorithm=name, nranks=16, nbytes=2048, median_s=1e-5)
            for name in ("ring", "native:ring")]
    got = {c.algorithm: (c.path, c.modelled_as) for c in compare_to_measured(rows, PARAMS, algorithms=reg)}
    # the library's algorithm takes the library's ("mpi") path and is priced as the textbook ring;
    # the hand-written ring takes numpy's and is priced as itself (no description)
    assert got == {"ring": ("numpy", ""), "native:ring": ("mpi", "ring")}


def test_compare_to_measured_skips_cases_without_a_model_and_goes_on():
    from ccbench.analysis.predict import NativeModel

    # a library algorithm with no textbook equivalent at 2048 B, recursive doubling at 12 ranks (not a
    # power of two): neither has a prediction there, so neither gets a check, and the rows after them still do
    small_only = NativeModel("allreduce", "native",
                             lambda P, n: ((RING,), "") if n < 1024 else ((), "not modelled: large"), selected=True)
    reg = {"allreduce": {"ring": RING, "recursive_doubling": RECDBL, "native": small_only}}
    rows = [dict(collective="allreduce", algorithm=a, nranks=P, nbytes=n, median_s=1e-5)
            for a, P, n in (("native", 16, 2048), ("recursive_doubling", 12, 64), ("native", 16, 64),
                            ("ring", 12, 64), ("recursive_doubling", 16, 64))]
    got = [(c.algorithm, c.nranks, c.nbytes) for c in compare_to_measured(rows, PARAMS, algorithms=reg)]
    assert got == [("native", 16, 64), ("ring", 12, 64), ("recursive_doubling", 16, 64)]
