"""The parts of ccbench.analysis.predict on synthetic costs and registries, with answers derived by hand.

A cost is `Cost(alpha, beta, gamma, critical)` and its time is alpha * a + beta * b + gamma * g along
`Cost.timing_cost` (the critical path where one is given; ccbench.algorithms.registry.Cost.time_s).
The library's own algorithms are priced as their textbook equivalents
(ccbench.algorithms.native_variants.textbook), the unforced one as what MPICH's selection tree picks
(native_variants.mpich_tree_choice).  No MPI is imported.
"""

from types import SimpleNamespace

import pytest

from ccbench.algorithms.native_variants import Textbook
from ccbench.algorithms.registry import Cost
from ccbench.analysis.predict import (
    NativeModel,
    model_registry,
    path_of,
    predict,
)
from ccbench.core.errors import CCBenchError

A, B, G = 1e-6, 1e-9, 5e-10


def fake(collective, name, cost, unsupported=None, native=False):
    """An Algorithm-like object: .collective, .name, .cost(P, n) -> Cost, .unsupported(P, op)."""
    return SimpleNamespace(collective=collective, name=name, cost=cost, native=native,
                           unsupported=unsupported or (lambda P, op=None: None))


def library_alg(collective, name, settings=None):
    """A library algorithm of the registry: native, no cost of its own, forced by `settings` per library."""
    return SimpleNamespace(collective=collective, name=name, native=True, cost=None, settings=settings)


# --------------------------------------------------------------------------- NativeModel: summed parts


def test_native_model_cost_adds_its_parts_terms_and_critical_paths():
    """Two parts in a row: each of alpha, beta, gamma is the sum; the critical path sums each part's
    timing cost (the critical one where given, else the part's own)."""
    p1 = fake("x", "a", lambda P, n: Cost(1, 10, 100, Cost(2, 20, 200)))
    p2 = fake("x", "b", lambda P, n: Cost(3, 30, 300))
    m = NativeModel("x", "native:ab", lambda P, n: ((p1, p2), ""))
    c = m.cost(4, 8)
    assert (c.alpha, c.beta, c.gamma) == (4, 40, 400)
    assert tuple(c.critical) == (5, 50, 500, None)
    # priced along the critical path, on the library's path (native), with a plain gamma
    assert predict(m, 4, 8, SimpleNamespace(alpha_s=A, beta_s_per_byte=B, gamma_s_per_byte=G)) == \
        pytest.approx(5 * A + 50 * B + 500 * G, rel=1e-12)


def test_native_model_cost_of_parts_without_critical_paths_has_none():
    """When no part states a critical path the sum states none either, and its time is the plain sum."""
    p1 = fake("x", "a", lambda P, n: Cost(P, n, 0))
    p2 = fake("x", "b", lambda P, n: Cost(1, 2 * n, n))
    m = NativeModel("x", "native:ab", lambda P, n: ((p1, p2), ""))
    c = m.cost(6, 100)
    assert c == Cost(7, 300, 100) and c.critical is None
    assert c.timing_cost == c
    params = SimpleNamespace(alpha_s=A, beta_s_per_byte=B, gamma_s_per_byte=G)
    assert predict(m, 6, 100, params) == pytest.approx(7 * A + 300 * B + 100 * G, rel=1e-12)


def test_native_model_cost_when_every_part_states_a_critical_path():
    p1 = fake("x", "a", lambda P, n: Cost(1, 1, 1, Cost(10, 10, 10)))
    p2 = fake("x", "b", lambda P, n: Cost(2, 2, 2, Cost(20, 20, 20)))
    c = NativeModel("x", "native:ab", lambda P, n: ((p1, p2), "")).cost(4, 4)
    assert c == Cost(3, 3, 3, Cost(30, 30, 30))


def test_native_model_cost_asks_each_part_at_whole_p_and_n():
    seen = []
    part = fake("x", "a", lambda P, n: seen.append((P, n)) or Cost(P, n))
    m = NativeModel("x", "native:a", lambda P, n: ((part, part), ""))
    assert m.cost(5.0, 64.0) == Cost(10, 128)
    assert seen == [(5, 64), (5, 64)] and all(type(v) is int for v in seen[0])


def test_native_model_without_parts_has_no_cost_and_says_why():
    m = NativeModel("allreduce", "native:odd", lambda P, n: ((), "not modelled: no such algorithm"))
    with pytest.raises(CCBenchError, match=r"^allreduce/native:odd: not modelled: no such algorithm$"):
        m.cost(4, 8)


# --------------------------------------------------------------------------- NativeModel: where it has no model


def test_native_model_unmodelled_without_parts_gives_the_note_or_a_default():
    with_note = NativeModel("x", "native", lambda P, n: ((), "not modelled: MPICH selects Z"), selected=True)
    assert with_note.unmodelled(4, 8) == "not modelled: MPICH selects Z"
    bare = NativeModel("x", "native", lambda P, n: ((), ""), selected=True)
    assert bare.unmodelled(4, 8) == "not modelled"


def test_native_model_unmodelled_names_the_part_that_cannot_run_at_p():
    """A part that refuses P (recursive doubling at 6 ranks) leaves the whole model without a cost there."""
    ok = fake("allreduce", "ring", lambda P, n: Cost(P, n))
    pof2 = fake("allreduce", "recursive_doubling", lambda P, n: Cost(P, n),
                lambda P, op=None: None if P & (P - 1) == 0 else "needs a power of two")
    m = NativeModel("allreduce", "native:x", lambda P, n: ((ok, pof2), ""))
    assert m.unmodelled(6, 8) == "not modelled at 6 ranks: needs a power of two"
    assert m.unmodelled(8, 8) is None
    assert m.unmodelled(8.0, 8.0) is None


def test_native_model_unmodelled_asks_the_choice_at_the_call_s_p_and_n():
    """The selection may model one size and not another: the answer follows (P, n) of the call."""
    part = fake("allreduce", "ring", lambda P, n: Cost(P, n))
    m = NativeModel("allreduce", "native",
                    lambda P, n: ((part,), "") if (P, n) == (4, 64) else ((), f"not modelled at {P}, {n}"),
                    selected=True)
    assert m.unmodelled(4, 64) is None
    assert m.unmodelled(4, 65) == "not modelled at 4, 65"
    assert m.unmodelled(5, 64) == "not modelled at 5, 64"


def test_native_model_unsupported_is_its_forced_parts_refusal():
    """A forced variant refuses what one of its parts refuses, for the op asked about; the library's
    own selection (``selected``) refuses nothing."""
    pof2 = fake("allreduce", "recursive_doubling", lambda P, n: Cost(P, n),
                lambda P, op=None: None if P & (P - 1) == 0 else f"{P} is not a power of two")
    commutative = fake("allreduce", "ring", lambda P, n: Cost(P, n),
                       lambda P, op=None: "needs a commutative op" if op == "custom" else None)
    forced = NativeModel("allreduce", "native:x", lambda P, n: ((commutative, pof2), ""))
    assert forced.unsupported(8) is None
    assert forced.unsupported(6) == "6 is not a power of two"
    assert forced.unsupported(8, "custom") == "needs a commutative op"
    assert forced.unsupported(8, "sum") is None
    selected = NativeModel("allreduce", "native", lambda P, n: ((commutative, pof2), ""), selected=True)
    assert selected.unsupported(6) is None and selected.unsupported(8, "custom") is None


# --------------------------------------------------------------------------- the pieces of a prediction


def test_path_of_is_mpi_only_for_the_library_s_own_algorithms():
    assert path_of(SimpleNamespace(native=True)) == "mpi"
    assert path_of(SimpleNamespace(native=False)) == "numpy"
    assert path_of(SimpleNamespace()) == "numpy"     # no attribute: a hand-written algorithm


def test_predict_prices_gamma_at_the_algorithm_s_path_and_the_buffer_s_size():
    """Parameters with gamma_for are asked for the algorithm's path (native or not) at the buffer's size; the
    reduction term is that gamma times the cost's gamma bytes."""
    asked = []
    params = SimpleNamespace(alpha_s=0.0, beta_s_per_byte=0.0,
                             gamma_for=lambda native, n: asked.append((native, n)) or (7.0 if native else 3.0))
    reducing = Cost(0, 0, 2)  # two bytes reduced: time 2 gamma

    def alg(**kw):
        return SimpleNamespace(collective="allreduce", name="x", cost=lambda P, n: reducing, **kw)

    assert predict(alg(native=True), 4, 4096, params) == 14.0
    assert predict(alg(native=False), 4, 64, params) == 6.0
    assert predict(alg(), 4, 8, params) == 6.0                       # no attribute: numpy's path
    assert asked == [(True, 4096), (False, 64), (False, 8)]
    assert predict(alg(), 4, 8, SimpleNamespace(alpha_s=0.0, beta_s_per_byte=0.0, gamma_s_per_byte=None)) == 0.0
    assert predict(alg(), 4, 8, SimpleNamespace(alpha_s=0.0, beta_s_per_byte=0.0, gamma_s_per_byte=0.5)) == 1.0
    assert predict(alg(), 4, 8, SimpleNamespace(alpha_s=0.0, beta_s_per_byte=0.0)) == 0.0    # no gamma known
    assert type(predict(alg(), 4, 8, SimpleNamespace(alpha_s=0, beta_s_per_byte=0, gamma_s_per_byte=1))) is float


def test_prediction_with_plain_parameters_prices_each_term():
    """Duck-typed parameters (alpha, beta, gamma, no gamma_for): t = a alpha + b beta + g gamma."""
    alg = fake("allreduce", "ring", lambda P, n: Cost(2 * (P - 1), 2 * n * (P - 1) / P, n * (P - 1) / P))
    params = SimpleNamespace(alpha_s=A, beta_s_per_byte=B, gamma_s_per_byte=G)
    want = 2 * 3 * A + 2 * 1000 * 3 / 4 * B + 1000 * 3 / 4 * G
    assert predict(alg, 4, 1000, params) == pytest.approx(want, rel=1e-12)
    no_gamma = SimpleNamespace(alpha_s=A, beta_s_per_byte=B)
    assert predict(alg, 4, 1000, no_gamma) == pytest.approx(6 * A + 1500 * B, rel=1e-12)


# --------------------------------------------------------------------------- textbook parts from the registry


RING = fake("allreduce", "ring", lambda P, n: Cost(2 * (P - 1), 2 * n * (P - 1) / P, n * (P - 1) / P))
RECDBL = fake("allreduce", "recursive_doubling", lambda P, n: Cost(P.bit_length() - 1, n * (P.bit_length() - 1)))
RABENSEIFNER_NO_COST = SimpleNamespace(collective="allreduce", name="rabenseifner", native=False, cost=None)
SCATTER = fake("scatter", "binomial", lambda P, n: Cost(P.bit_length() - 1, n))
ALLGATHER = fake("allgather", "recursive_doubling", lambda P, n: Cost(P.bit_length() - 1, n))


def forced_through(monkeypatch, reg, tb):
    """What model_registry makes of a forced variant ``allreduce/native:x`` whose textbook equivalent is `tb`:
    (parts, note) of its model, or ((), why) when it is not modelled."""
    import ccbench.analysis.predict as predict_mod

    monkeypatch.setattr(predict_mod, "textbook", lambda coll, name, library: tb)
    reg = {c: dict(algs) for c, algs in reg.items()}
    reg.setdefault("allreduce", {})["native:x"] = library_alg("allreduce", "native:x", {"mpich": {"X": "x"}})
    out, why = model_registry("mpich", algorithms=reg)
    if "allreduce/native:x" in why:
        return (), why["allreduce/native:x"]
    return out["allreduce"]["native:x"].parts(4, 8)


def test_a_forced_variant_is_priced_as_each_part_found_in_the_registry(monkeypatch):
    reg = {"scatter": {"binomial": SCATTER}, "allgather": {"recursive_doubling": ALLGATHER}}
    tb = Textbook((("scatter", "binomial"), ("allgather", "recursive_doubling")), "van de Geijn")
    assert forced_through(monkeypatch, reg, tb) == ((SCATTER, ALLGATHER), "van de Geijn")


def test_a_forced_variant_without_parts_passes_its_note_on(monkeypatch):
    assert forced_through(monkeypatch, {"allreduce": {"ring": RING}}, Textbook((), "not modelled: why")) == (
        (), "not modelled: why")


def test_a_forced_variant_names_every_part_when_one_lacks_a_cost_or_is_missing(monkeypatch):
    reg = {"allreduce": {"ring": RING, "rabenseifner": RABENSEIFNER_NO_COST}}
    no_cost = Textbook((("allreduce", "ring"), ("allreduce", "rabenseifner")), "note")
    assert forced_through(monkeypatch, reg, no_cost) == (
        (), "not modelled: allreduce/ring, allreduce/rabenseifner has no cost model here")
    missing_coll = Textbook((("allreduce", "ring"), ("scatter", "binomial")))
    assert forced_through(monkeypatch, reg, missing_coll) == (
        (), "not modelled: allreduce/ring, scatter/binomial has no cost model here")
    missing_alg = Textbook((("allreduce", "bruck"),))
    assert forced_through(monkeypatch, reg, missing_alg) == (
        (), "not modelled: allreduce/bruck has no cost model here")
    no_cost_attribute = {"allreduce": {"bare": SimpleNamespace(collective="allreduce", name="bare")}}
    assert forced_through(monkeypatch, no_cost_attribute, Textbook((("allreduce", "bare"),))) == (
        (), "not modelled: allreduce/bare has no cost model here")


# --------------------------------------------------------------------------- the registry of models of a run


def registry():
    """A registry in the real one's names, with fake costs: rabenseifner has no cost model, and the
    library's forced variants come in every kind model_registry sorts.  Entries may lack the attributes
    that do not apply to them (a cost, `native`, `settings`): a missing one counts as None / False."""
    return {
        "allreduce": {
            "bare": SimpleNamespace(collective="allreduce", name="bare"),              # no cost, not native
            "ring": RING,
            "native:bare": SimpleNamespace(collective="allreduce", name="native:bare", native=True),  # no settings
            "native": library_alg("allreduce", "native"),
            "native:reduce_scatter_allgather": library_alg("allreduce", "native:reduce_scatter_allgather",
                                                           {"mpich": {"X": "reduce_scatter_allgather"}}),
            "native:unforceable": library_alg("allreduce", "native:unforceable"),     # no settings
            "native:segmented_ring": library_alg("allreduce", "native:segmented_ring", {"openmpi": {"X": "5"}}),
            "native:ring": library_alg("allreduce", "native:ring", {"mpich": {"X": "ring"}, "openmpi": {"X": "4"}}),
            "recursive_doubling": RECDBL,
            "rabenseifner": RABENSEIFNER_NO_COST,
            "native:recursive_multiplying": library_alg("allreduce", "native:recursive_multiplying",
                                                        {"mpich": {"X": "recursive_multiplying"}}),
        },
        "pingpong": {"native": library_alg("pingpong", "native")},
        "bcast": {"native": library_alg("bcast", "native")},
    }


def forced(model):
    """(collective, name, selected, parts, note) of a forced variant's NativeModel."""
    parts, note = model.parts(4, 8)
    assert model.parts(64, 1 << 20) == (parts, note)        # the same at every (P, n)
    return model.collective, model.name, model.selected, parts, note


RM_NOTE = ("recursive multiplying with MPICH's default radix k = 2 (MPIR_CVAR_ALLREDUCE_RECURSIVE_MULTIPLYING_KVAL)"
           " is recursive doubling")


def test_model_registry_for_mpich_without_a_selection_tree():
    """Hand-written algorithms with a cost stay as they are; each of MPICH's forced variants becomes its textbook
    algorithm, or a reason; the unforced native, whose selection is unknown without the tree, a reason too.
    Ping-pong is no collective to model, and a collective with nothing modelled is left out."""
    out, why = model_registry("mpich", algorithms=registry())
    assert list(out) == ["allreduce"]
    got = out["allreduce"]
    assert list(got) == ["ring", "recursive_doubling", "native:ring", "native:recursive_multiplying"]
    assert got["ring"] is RING and got["recursive_doubling"] is RECDBL
    assert forced(got["native:ring"]) == ("allreduce", "native:ring", False, (RING,), "")
    assert forced(got["native:recursive_multiplying"]) == (
        "allreduce", "native:recursive_multiplying", False, (RECDBL,), RM_NOTE)
    unknown = ("not modelled: the selection of MPICH (its selection tree could not be read from the installed "
               "library) is unknown to ccbench")
    assert why == {
        "allreduce/native": unknown,
        "allreduce/native:reduce_scatter_allgather":
            "not modelled: allreduce/rabenseifner has no cost model here",
        "bcast/native": unknown,
    }


def test_model_registry_for_open_mpi_takes_its_variants_only():
    out, why = model_registry("openmpi", algorithms=registry())
    got = out["allreduce"]
    assert list(got) == ["ring", "recursive_doubling", "native:segmented_ring", "native:ring"]
    assert forced(got["native:segmented_ring"]) == (
        "allreduce", "native:segmented_ring", False, (RING,),
        "the ring with its blocks cut into segments: the same bytes; the extra messages per segment are not priced")
    assert forced(got["native:ring"]) == ("allreduce", "native:ring", False, (RING,), "")
    unknown = ("not modelled: the selection of Open MPI's tuned component (its fixed decision rules) is unknown "
               "to ccbench")
    assert why == {"allreduce/native": unknown, "bcast/native": unknown}


@pytest.mark.parametrize("library", [None, "intel"])
def test_model_registry_for_another_or_no_library(library):
    """No library known: every forced variant is tried, and one that the two libraries model alike is
    modelled; an unknown library forces none of the variants (none has its settings)."""
    out, why = model_registry(library, algorithms=registry())
    unknown = "not modelled: the selection of this MPI library is unknown to ccbench"
    if library is None:
        assert list(out["allreduce"]) == ["ring", "recursive_doubling", "native:segmented_ring", "native:ring",
                                          "native:recursive_multiplying"]
        assert forced(out["allreduce"]["native:ring"])[3] == (RING,)
        assert why == {"allreduce/native": unknown,
                       "allreduce/native:reduce_scatter_allgather":
                           "not modelled: allreduce/rabenseifner has no cost model here",
                       "bcast/native": unknown}
    else:
        assert list(out["allreduce"]) == ["ring", "recursive_doubling"]
        assert why == {"allreduce/native": unknown, "bcast/native": unknown}


def test_model_registry_keeps_only_the_measured_library_algorithms():
    """`measured` limits the library's entries (and their reasons) to the pairs given; the hand-written stay."""
    out, why = model_registry("mpich", algorithms=registry(), measured=[("allreduce", "native:ring")])
    assert list(out) == ["allreduce"]
    assert list(out["allreduce"]) == ["ring", "recursive_doubling", "native:ring"]
    assert why == {}
    out, why = model_registry("mpich", algorithms=registry(), measured=iter([("bcast", "native")]))
    assert list(out["allreduce"]) == ["ring", "recursive_doubling"]
    assert list(why) == ["bcast/native"]


TREE = {"collective=allreduce": {"comm_type=intra": {
    "comm_hierarchy=flat": {"algorithm=MPIR_Allreduce_intra_recursive_multiplying": {}},
    "avg_msg_size<=8": {"algorithm=MPIR_Allreduce_intra_nonexistent": {}},
    "avg_msg_size<=64": {"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}},
    "comm_size<=4": {"algorithm=MPIR_Allreduce_intra_ring": {}},
    "unknown_fact=yes": {"algorithm=MPIR_Allreduce_intra_ring": {}},
}}}


def test_model_registry_prices_mpich_s_selection_as_the_algorithm_its_tree_picks():
    """The unforced native follows MPICH's selection tree at each (P, n): a function ccbench has a variant
    of is priced as that variant's textbook algorithm; otherwise the note says why there is no model."""
    out, why = model_registry("mpich", selection_tree=TREE, algorithms=registry())
    assert "allreduce/native" not in why and "bcast/native" not in why
    m = out["allreduce"]["native"]
    assert (m.collective, m.name, m.selected) == ("allreduce", "native", True)
    assert m.parts(4, 1024) == ((RING,), "MPICH selects MPIR_Allreduce_intra_ring")
    assert m.parts(4, 8) == ((), "not modelled: MPICH selects MPIR_Allreduce_intra_nonexistent, which ccbench "
                                 "has no variant of")
    assert m.parts(4, 64) == ((), "MPICH selects MPIR_Allreduce_intra_reduce_scatter_allgather, not modelled: "
                                  "allreduce/rabenseifner has no cost model here")
    assert m.parts(8, 1024) == ((), "not modelled: MPICH's selection tree asks 'unknown_fact=yes', which ccbench "
                                    "cannot answer")
    # priced as the ring where the ring is picked, on the library's path
    params = SimpleNamespace(alpha_s=A, beta_s_per_byte=B, gamma_s_per_byte=G)
    assert predict(m, 4, 1024, params) == pytest.approx(6 * A + 1536 * B + 768 * G, rel=1e-12)
    assert m.describe(4, 1024) == "ring (MPICH selects MPIR_Allreduce_intra_ring)"
    # the bcast has no branch in the tree: a model that models no size
    b = out["bcast"]["native"]
    assert b.parts(4, 8) == ((), "not modelled: MPICH's selection tree has no bcast")


def test_model_registry_selection_sees_the_ranks_per_node():
    """One rank per node is a flat communicator to MPICH, which this tree sends to recursive multiplying."""
    out, _ = model_registry("mpich", selection_tree=TREE, algorithms=registry(), ranks_per_node=1)
    assert out["allreduce"]["native"].parts(4, 8) == (
        (RECDBL,), f"MPICH selects MPIR_Allreduce_intra_recursive_multiplying; {RM_NOTE}")
    out, _ = model_registry("mpich", selection_tree=TREE, algorithms=registry(), ranks_per_node=4)
    assert out["allreduce"]["native"].parts(4, 8)[0] == ()


def test_model_registry_needs_mpich_for_a_selection_tree():
    out, why = model_registry("openmpi", selection_tree=TREE, algorithms=registry())
    assert "native" not in out["allreduce"] and "allreduce/native" in why


# --------------------------------------------------------------------------- effective parameters per path


def hier_cost(P, n, ranks_per_node=None):
    """A node-aware cost (like the registry's hierarchical allreduce): more steps on more nodes."""
    nodes = -(-P // (ranks_per_node or P))
    return Cost(2 + 3 * nodes, n * (1 + nodes), n)


def effective_registry():
    """Hand-written (numpy path): ring, a pipeline whose critical path is longer than its busiest rank's
    work, a node-aware algorithm and recursive doubling (powers of two only); the library's (mpi path):
    two textbook models, one of which the library's selection leaves unmodelled above 1 MiB.  Ping-pong has
    a cost but is no collective to fit."""
    pof2 = fake("allreduce", "recursive_doubling", lambda P, n: Cost(P.bit_length() - 1, n * (P.bit_length() - 1)),
                lambda P, op=None: None if P & (P - 1) == 0 else "needs a power of two")
    pipe = fake("allreduce", "pipeline", lambda P, n: Cost(2, n, 0, Cost(2 + P, 2 * n, 0)))
    hier = fake("allreduce", "hierarchical", hier_cost)
    lib_ring = NativeModel("allreduce", "native:ring", lambda P, n: ((RING,), ""))
    lib_sel = NativeModel("allreduce", "native",
                          lambda P, n: ((pof2,), "") if n <= 1 << 20 else ((), "not modelled: large"), selected=True)
    return {"pingpong": {"pp": fake("pingpong", "pp", lambda P, n: Cost(1, n))},
            "allreduce": {"ring": RING, "pipeline": pipe, "hierarchical": hier, "recursive_doubling": pof2,
                          "native:ring": lib_ring, "native": lib_sel,
                          "native:unknown": library_alg("allreduce", "native:unknown"),
                          "bare": SimpleNamespace(collective="allreduce", name="bare")}}


def effective_base():
    from ccbench.analysis.fit import NetworkParams

    return NetworkParams(1e-6, 1e-10, 5e-11, gamma_ci_s_per_byte=(4e-11, 6e-11), library_gamma_s_per_byte=3e-10,
                         gamma_cold_s_per_byte=2e-10, library_gamma_cold_s_per_byte=7e-10, cold_above_bytes=1 << 16,
                         breakpoints_bytes=(4096,))


TRUTH = {"numpy": (9e-6, 2e-10), "mpi": (1.5e-6, 4e-10)}


def true_time(cost, path, n, base):
    """steps alpha + bytes beta of the path + reduced bytes at the path's measured gamma (warm or cold)."""
    c = cost.timing_cost
    a, b = TRUTH[path]
    return c.alpha * a + c.beta * b + c.gamma * base.gamma_for(path == "mpi", n)


def erow(name, P, n, t, coll="allreduce"):
    return {"collective": coll, "algorithm": name, "nranks": P, "nbytes": n, "median_s": t}


def effective_rows(base, ppn=2):
    reg = effective_registry()["allreduce"]
    junk = 1.0   # a time no model explains: rows that must be left out of the fits carry it
    rows = [erow("pp", 2, 64, junk, coll="pingpong"),            # ping-pong: not a collective
            erow("nosuch", 8, 64, junk, coll="nosuch"),          # unknown collective
            erow("native:unknown", 8, 64, junk),                 # no cost model
            erow("bare", 8, 64, junk),                           # no cost attribute at all
            erow("recursive_doubling", 6, 64, junk),             # 6 ranks: not a power of two
            erow("native", 8, 4 << 20, junk)]                    # the selection has no model above 1 MiB
    for name in ("ring", "pipeline", "hierarchical", "recursive_doubling", "native:ring", "native"):
        alg = reg[name]
        path = "mpi" if alg.native else "numpy"
        for n in (64, 4096, 1 << 18):
            cost = hier_cost(8, n, ranks_per_node=ppn) if name == "hierarchical" else alg.cost(8, n)
            rows.append(erow(name, 8, n, true_time(cost, path, n, base)))
    rows.append(erow("recursive_doubling", 6, 128, junk))  # skipped rows after the fitted ones too
    return rows


def test_effective_params_fit_each_path_on_its_own_rows_only():
    """Times made from known per-path alpha and beta (critical paths, node-aware costs at the run's ranks per
    node, each path's gamma warm or cold by size) give back exactly those; rows without a model at their
    (P, n), of no collective or of the other path take no part in a path's fit."""
    from ccbench.analysis.predict import effective_params

    base = effective_base()
    eff = effective_params(effective_rows(base), base, algorithms=effective_registry(), ranks_per_node=2, n_boot=0)
    assert eff.source == "effective"
    for path, p in (("numpy", eff.numpy), ("mpi", eff.mpi)):
        assert p.alpha_s == pytest.approx(TRUTH[path][0], rel=1e-6)
        assert p.beta_s_per_byte == pytest.approx(TRUTH[path][1], rel=1e-6)
        assert p.n_points == (12 if path == "numpy" else 6)
        assert p.alpha_ci_s is None                            # n_boot=0 reached the fit: no bootstrap
        # the measured gammas and the ping-pong breakpoints are carried over, not fitted
        assert (p.gamma_s_per_byte, p.gamma_ci_s_per_byte, p.library_gamma_s_per_byte, p.gamma_cold_s_per_byte,
                p.library_gamma_cold_s_per_byte, p.cold_above_bytes, p.breakpoints_bytes) == (
            5e-11, (4e-11, 6e-11), 3e-10, 2e-10, 7e-10, 1 << 16, (4096,))
    assert eff.notes[0].startswith("numpy path: 12 rows")
    assert any(n.startswith("mpi path: 6 rows") for n in eff.notes)


def test_effective_params_keep_the_hand_written_path_for_a_library_path_with_too_few_rows():
    from ccbench.analysis.predict import effective_params

    base = effective_base()
    rows = [r for r in effective_rows(base) if r["algorithm"] != "native:ring"]
    rows = [r for r in rows if not (r["algorithm"] == "native" and r["nbytes"] == 64)]   # 2 library rows left
    eff = effective_params(rows, base, algorithms=effective_registry(), ranks_per_node=2, n_boot=0)
    assert eff.numpy.alpha_s == pytest.approx(TRUTH["numpy"][0], rel=1e-6)
    assert replace_notes(eff.mpi) == replace_notes(eff.numpy)
    assert eff.mpi.notes == eff.numpy.notes + ("mpi path: not fitted",)
    assert eff.notes[-1] == ("an effective fit of the mpi path needs at least 3 modelled rows, got 2: "
                             "the library's algorithms keep the hand-written path's alpha and beta")
    assert eff.notes[0].startswith("numpy path: 12 rows")


def replace_notes(p):
    from dataclasses import replace

    return replace(p, notes=())


def test_effective_params_need_a_hand_written_fit():
    from ccbench.analysis.predict import effective_params

    base = effective_base()
    rows = [r for r in effective_rows(base) if r["algorithm"].startswith("native")]
    with pytest.raises(CCBenchError, match="numpy path needs at least 3 modelled rows, got 0"):
        effective_params(rows, base, algorithms=effective_registry(), ranks_per_node=2, n_boot=0)


def test_model_registry_prices_mpich_s_names_with_mpich_s_textbook_entry():
    """MPICH's forced variants and the algorithm its selection picks are priced with what the name means
    in MPICH, even where Open MPI means something else by the same name (here made so for the ring)."""
    from unittest import mock

    from ccbench.algorithms.native_variants import TEXTBOOK

    other = Textbook((("allreduce", "recursive_doubling"),), "Open MPI's ring, made different for this test")
    with mock.patch.dict(TEXTBOOK["openmpi"]["allreduce"], {"ring": other}):
        out, _ = model_registry("mpich", selection_tree=TREE, algorithms=registry())
        assert forced(out["allreduce"]["native:ring"]) == ("allreduce", "native:ring", False, (RING,), "")
        assert out["allreduce"]["native"].parts(4, 1024) == ((RING,), "MPICH selects MPIR_Allreduce_intra_ring")
        out, _ = model_registry("openmpi", algorithms=registry())
        assert forced(out["allreduce"]["native:ring"])[3:] == ((RECDBL,), other.note)


# --------------------------------------------------------------------------- tables and winners with library models


def pof2_recdbl():
    """Recursive doubling: lg P steps, each sending and reducing the whole vector (Thakur et al. 2005)."""
    return fake("allreduce", "recursive_doubling", lambda P, n: Cost(P.bit_length() - 1, n * (P.bit_length() - 1),
                                                                      n * (P.bit_length() - 1)),
                lambda P, op=None: None if P & (P - 1) == 0 else "needs a power of two")


def two_path_params():
    """numpy's gamma G (2G cold), the library's 3G (5G cold), cold above 4 KiB."""
    from ccbench.analysis.fit import NetworkParams

    return NetworkParams(A, B, G, library_gamma_s_per_byte=3 * G, gamma_cold_s_per_byte=2 * G,
                         library_gamma_cold_s_per_byte=5 * G, cold_above_bytes=4096)


def ring_s(P, n, g):
    """The ring allreduce (Thakur et al. 2005): 2(P-1) steps, 2n(P-1)/P bytes sent, n(P-1)/P reduced."""
    return 2 * (P - 1) * A + 2 * n * (P - 1) / P * B + n * (P - 1) / P * g


def test_prediction_table_prices_a_library_algorithm_on_its_path_and_leaves_it_out_of_the_two_level_rows():
    """The library's ring pays the library's gamma (warm at 64 B, cold at 1 MiB), the hand-written ring numpy's;
    only hand-written allreduce algorithms appear as the leader step of the two-level model."""
    from ccbench.analysis.predict import TwoLevelParams, prediction_table, two_level_allreduce_s

    bcast = fake("bcast", "binomial", lambda P, n: Cost(P.bit_length() - 1, n * (P.bit_length() - 1)))
    lib_ring = NativeModel("allreduce", "native:ring", lambda P, n: ((RING,), ""))
    tl = TwoLevelParams(1e-7, 1e-10, A, B, ranks_per_node=4, gamma_s_per_byte=G)
    sizes = [64, 1 << 20]
    table = prediction_table([RING, bcast, lib_ring], [8], sizes, two_path_params(), two_level=tl)
    got = {(p.algorithm, p.nbytes): p.predicted_s for p in table}
    assert list(got) == [("ring", 64), ("ring", 1 << 20), ("two-level/ring", 64), ("two-level/ring", 1 << 20),
                         ("binomial", 64), ("binomial", 1 << 20), ("native:ring", 64), ("native:ring", 1 << 20)]
    assert got["ring", 64] == pytest.approx(ring_s(8, 64, G), rel=1e-12)
    assert got["ring", 1 << 20] == pytest.approx(ring_s(8, 1 << 20, 2 * G), rel=1e-12)
    assert got["native:ring", 64] == pytest.approx(ring_s(8, 64, 3 * G), rel=1e-12)
    assert got["native:ring", 1 << 20] == pytest.approx(ring_s(8, 1 << 20, 5 * G), rel=1e-12)
    assert got["two-level/ring", 64] == two_level_allreduce_s(RING, 8, 64, tl)


def test_who_wins_takes_the_library_s_model_where_it_has_one_and_no_crossovers_for_it():
    """The library's selection is priced as the ring up to 1 KiB and has no model above: it takes part in the
    winners at 64 B only.  Crossovers are searched among the hand-written algorithms alone: ring against
    recursive doubling, which cross where 11 alpha = n (3 (b + g) - 7/8 (2 b + g)) at 8 ranks."""
    from ccbench.analysis.fit import NetworkParams
    from ccbench.analysis.predict import who_wins

    recdbl = pof2_recdbl()
    lib = NativeModel("allreduce", "native", lambda P, n: ((RING,), "MPICH selects ring") if n <= 1024
                      else ((), "not modelled: large"), selected=True)
    reg = {"allreduce": {"ring": RING, "recursive_doubling": recdbl, "native": lib}}
    params = NetworkParams(A, B, G, library_gamma_s_per_byte=3 * G)
    measured = {64: {"native": 1e-6, "ring": 3e-6, "recursive_doubling": 2e-6},
                1 << 20: {"native": 1e-3, "ring": 2e-3, "recursive_doubling": 5e-3}}
    rows = [dict(collective="allreduce", algorithm=a, nranks=8, nbytes=n, median_s=t, dtype="f64", op="sum")
            for n, ts in measured.items() for a, t in ts.items()]
    (w,) = who_wins(rows, params, algorithms=reg)
    small, large = w.rows
    # 64 B: ring 14 a + 112 b + 56 g, recursive doubling 3 a + 192 b + 192 g, the library's ring 14 a + 112 b + 168 g
    assert (small.measured_winner, small.measured_winner_modelled, small.predicted_winner) == (
        "native", "native", "recursive_doubling")
    assert small.predicted_s == pytest.approx(3 * A + 192 * B + 192 * G, rel=1e-12)
    assert small.agree is False and small.margin == pytest.approx(1.0)
    # 1 MiB: the library's choice has no model, so the modelled winner is the ring, which is also predicted
    assert (large.measured_winner, large.measured_winner_modelled, large.predicted_winner) == (
        "native", "ring", "ring")
    assert large.predicted_s == pytest.approx(ring_s(8, 1 << 20, G), rel=1e-12)
    assert large.agree is True and large.margin == pytest.approx(1.5)
    (x,) = w.crossovers
    want = 11 * A / (3 * (B + G) - 7 / 8 * (2 * B + G))
    assert (x.faster_below, x.faster_above, x.nranks) == ("recursive_doubling", "ring", 8)
    assert x.nbytes == pytest.approx(want, rel=1e-9)
