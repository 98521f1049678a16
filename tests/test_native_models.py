"""The library's own algorithms as textbook models: the mapping, MPICH's selection tree, pricing on the MPI path."""

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.native_variants import (
    MPICH,
    OPENMPI,
    TEXTBOOK,
    mpich_tree_choice,
    mpich_value_of,
    textbook,
)
from ccbench.analysis.fit import NetworkParams, PathParams
from ccbench.analysis.predict import compare_to_measured, model_registry, predict, who_wins

ALPHA, BETA = 2e-6, 1e-10
NUMPY_G, MPI_G = 3e-11, 2e-10


def test_every_variant_of_both_libraries_maps_or_says_why():
    for library, table in (("mpich", MPICH), ("openmpi", OPENMPI)):
        for coll, (_, entries) in table.items():
            names = [v for v, _ in entries] if library == "mpich" else [n for _, n in entries]
            assert set(TEXTBOOK[library][coll]) == set(names), (library, coll)
            for name in names:
                tb = textbook(coll, "native:" + name, library)
                if tb.modelled:
                    for c, a in tb.parts:  # every part is a registry algorithm with a cost model
                        assert REGISTRY[c][a].cost is not None, (library, coll, name, c, a)
                else:
                    assert tb.note.startswith("not modelled: ") and len(tb.note) > 20, (library, coll, name)
        # and nothing in the mapping that the library does not have
        for coll in TEXTBOOK[library]:
            assert coll in table


def test_known_mappings():
    assert textbook("allreduce", "native:reduce_scatter_allgather", "mpich").parts == (("allreduce", "rabenseifner"),)
    assert textbook("allreduce", "ring", "openmpi").parts == (("allreduce", "ring"),)
    assert textbook("allreduce", "native:smp", "mpich").parts == (("allreduce", "hierarchical"),)
    assert textbook("bcast", "native:scatter_ring_allgather", "mpich").parts == (("bcast", "scatter_allgather"),)
    assert textbook("bcast", "native:scatter_recursive_doubling_allgather", "mpich").parts == (
        ("scatter", "binomial"), ("allgather", "recursive_doubling"))
    assert textbook("allgather", "native:brucks", "mpich").parts == (("allgather", "bruck"),)
    assert textbook("reduce_scatter", "native:pairwise", "mpich").parts == (("reduce_scatter", "pairwise"),)
    assert not textbook("bcast", "native:tree", "mpich").modelled
    # a name the library does not have, and a name the two libraries disagree on with no library known
    assert textbook("allreduce", "native:segmented_ring", "mpich").note.startswith("not modelled")
    assert textbook("allreduce", "native:ring", None).parts == (("allreduce", "ring"),)  # both: ring
    assert textbook("bcast", "native:scatter_allgather", None).modelled  # Open MPI's only: no ambiguity
    assert not textbook("bcast", "native:scatter_allgather", "mpich").modelled
    assert textbook("allgather", "native:linear", None).note.startswith("not modelled: gather to rank 0")


def test_mpich_value_of_reverses_the_cvar_table():
    assert mpich_value_of("allreduce", "MPIR_Allreduce_intra_ring") == "ring"
    assert mpich_value_of("allreduce", "MPIR_Allreduce_intra_nonexistent") is None


TREE = {
    "collective=allreduce": {"comm_type=intra": {
        "avg_msg_size<=8": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
        "avg_msg_size=any": {"is_op_built_in=yes": {
            "count<pow2": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
            "count=any": {"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}}}}}},
    "collective=bcast": {"comm_type=intra": {
        "comm_size<8": {"comm_hierarchy=parent": {"avg_msg_size<=0": {"algorithm=MPIR_Bcast_intra_smp": {}},
                                                  "avg_msg_size=any": {"algorithm=MPIR_Bcast_intra_binomial": {}}}},
        "comm_size=pow2": {"avg_msg_size<=12288": {"algorithm=MPIR_Bcast_intra_binomial": {}},
                           "avg_msg_size=any": {"algorithm=MPIR_Bcast_intra_scatter_ring_allgather": {}}}}},
    "collective=allgather": {"comm_type=intra": {"comm_size=pow2": {
        "total_msg_size<524288": {"algorithm=MPIR_Allgather_intra_recursive_doubling": {}},
        "total_msg_size=any": {"algorithm=MPIR_Allgather_intra_ring": {}}},
        "comm_size=any": {"algorithm=MPIR_Allgather_intra_brucks": {}}}},
    "collective=reduce": {"comm_type=intra": {"is_magic=yes": {"algorithm=MPIR_Reduce_intra_binomial": {}}}},
}


@pytest.mark.parametrize(("coll", "P", "n", "want"), [
    ("allreduce", 4, 8, "MPIR_Allreduce_intra_recursive_doubling"),
    ("allreduce", 4, 12, "MPIR_Allreduce_intra_recursive_doubling"),         # 3 floats < pof2 = 4
    ("allreduce", 4, 16, "MPIR_Allreduce_intra_reduce_scatter_allgather"),
    ("bcast", 4, 1 << 20, "MPIR_Bcast_intra_binomial"),                     # comm_size < 8 comes first
    ("bcast", 16, 4096, "MPIR_Bcast_intra_binomial"),
    ("bcast", 16, 1 << 20, "MPIR_Bcast_intra_scatter_ring_allgather"),
    ("allgather", 8, 1 << 20, "MPIR_Allgather_intra_ring"),
    ("allgather", 8, 1024, "MPIR_Allgather_intra_recursive_doubling"),
    ("allgather", 6, 1024, "MPIR_Allgather_intra_brucks"),
])
def test_mpich_tree_walk(coll, P, n, want):
    assert mpich_tree_choice(TREE, coll, P, n)[0] == want


def test_mpich_tree_walk_says_what_it_cannot_answer():
    fn, why = mpich_tree_choice(TREE, "reduce", 4, 64)
    assert fn is None and "is_magic=yes" in why
    assert mpich_tree_choice(TREE, "alltoall", 4, 64)[0] is None
    # ranks sharing a node: a node hierarchy (comm_hierarchy=parent); one rank per node: none, and
    # this tree has no branch for that below 8 ranks
    assert mpich_tree_choice(TREE, "bcast", 4, 0)[0] == "MPIR_Bcast_intra_smp"
    fn, why = mpich_tree_choice(TREE, "bcast", 4, 0, ranks_per_node=1)
    assert fn is None and why == "no branch of MPICH's selection tree applies"


def _params(**kw) -> NetworkParams:
    return NetworkParams(ALPHA, BETA, NUMPY_G, library_gamma_s_per_byte=MPI_G, **kw)


def test_native_variants_are_priced_as_their_textbook_algorithm_with_the_library_gamma():
    models, why = model_registry("mpich")
    ar = models["allreduce"]
    P, n = 4, 1 << 20
    ring, native_ring = ar["ring"], ar["native:ring"]
    c = ring.cost(P, n)
    assert native_ring.cost(P, n) == c
    p = _params()
    assert predict(ring, P, n, p) == pytest.approx(c.alpha * ALPHA + c.beta * BETA + c.gamma * NUMPY_G)
    assert predict(native_ring, P, n, p) == pytest.approx(c.alpha * ALPHA + c.beta * BETA + c.gamma * MPI_G)
    # no MPI gamma known: numpy's stands in
    assert predict(native_ring, P, n, NetworkParams(ALPHA, BETA, NUMPY_G)) == pytest.approx(predict(ring, P, n, p))
    # a composition adds its parts' costs
    sc = models["bcast"]["native:scatter_recursive_doubling_allgather"]
    want = REGISTRY["scatter"]["binomial"].cost(8, n).timing_cost
    ag = REGISTRY["allgather"]["recursive_doubling"].cost(8, n).timing_cost
    got = sc.cost(8, n).timing_cost
    assert (got.alpha, got.beta) == (want.alpha + ag.alpha, want.beta + ag.beta)
    assert sc.describe(8, n) == "scatter/binomial + allgather/recursive_doubling"
    # unmodelled variants are said so; the unforced native without a selection tree too
    assert "native:tree" not in models["bcast"] and why["bcast/native:tree"].startswith("not modelled")
    assert "native" not in ar and "selection" in why["allreduce/native"]
    assert "native:segmented_ring" not in ar  # Open MPI's, not MPICH's


def test_unforced_native_follows_the_selection_tree():
    models, _ = model_registry("mpich", selection_tree=TREE)
    nat = models["allreduce"]["native"]
    assert nat.describe(4, 8).startswith("recursive_doubling (MPICH selects MPIR_Allreduce_intra_recursive_doubling")
    assert nat.cost(4, 1 << 20) == REGISTRY["allreduce"]["rabenseifner"].cost(4, 1 << 20)
    assert nat.unmodelled(4, 1 << 20) is None
    # a branch the walk cannot answer: not modelled there, said so
    red = models["reduce"]["native"]
    assert red.unmodelled(4, 64).startswith("not modelled: MPICH's selection tree asks")


def _row(alg, n, t, P=4):
    return {"collective": "allreduce", "algorithm": alg, "nranks": P, "nbytes": n, "dtype": "float32", "op": "sum",
            "median_s": t}


def test_model_checks_and_who_wins_include_native_rows_on_the_mpi_path():
    models, _ = model_registry("mpich", selection_tree=TREE)
    p = _params()
    sizes = (1024, 1 << 16, 1 << 20)
    rows = []
    for n in sizes:
        rows.append(_row("ring", n, predict(models["allreduce"]["ring"], 4, n, p)))
        rows.append(_row("native:ring", n, 1.1 * predict(models["allreduce"]["native:ring"], 4, n, p)))
        rows.append(_row("native", n, 0.5 * predict(models["allreduce"]["native"], 4, n, p)))
        rows.append(_row("native:tree", n, 1e-3))  # modelled as binomial
    checks = {(c.algorithm, c.nbytes): c for c in compare_to_measured(rows, p, algorithms=models)}
    assert checks[("native:ring", 1 << 20)].ratio == pytest.approx(1.1)
    assert checks[("native:ring", 1 << 20)].path == "mpi" and checks[("ring", 1024)].path == "numpy"
    assert checks[("native", 1 << 20)].modelled_as.startswith("rabenseifner")
    assert checks[("native:tree", 1024)].modelled_as == "binomial"
    (ww,) = who_wins(rows, p, algorithms=models)
    for r in ww.rows:
        assert r.measured_winner == "native" and r.measured_winner_modelled == "native"
        assert r.predicted_winner is not None
    assert all(x.faster_below in ("ring",) or not x.faster_below.startswith("native") for x in ww.crossovers)


def test_path_params_price_each_path_with_its_own_alpha_and_beta():
    models, _ = model_registry("mpich")
    numpy_p = _params()
    mpi_p = NetworkParams(5e-7, 4e-10, NUMPY_G, library_gamma_s_per_byte=MPI_G)
    pp = PathParams(numpy_p, mpi_p)
    ar = models["allreduce"]
    assert predict(ar["ring"], 4, 4096, pp) == predict(ar["ring"], 4, 4096, numpy_p)
    c = ar["native:ring"].cost(4, 4096)
    assert predict(ar["native:ring"], 4, 4096, pp) == pytest.approx(c.alpha * 5e-7 + c.beta * 4e-10 + c.gamma * MPI_G)


def test_a_sweep_stores_its_mpich_selection_tree_and_fit_prices_native_from_it(tmp_path):
    """The tree the run's MPICH selects with travels in run.json; fit prices unforced native from it."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from ccbench.analysis.runs import fit_run
    from ccbench.store.run import open_run

    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "pingpong,allreduce",
                        "-a", "native", "-s", "8,64K", "--budget", "0.02", "--max-reps", "20",
                        "--results-dir", str(tmp_path), "--no-show"],
                       capture_output=True, text=True, cwd=repo, timeout=300, env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0, r.stderr
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    if "MPICH" not in meta.get("mpi_library", ""):
        pytest.skip("the tree is MPICH's; this MPI is another")
    sel = meta["mpich_selection"]
    assert sel["version"] == meta["mpi_library"].splitlines()[0].strip()
    assert any(k.startswith("collective=") for k in sel["tree"])
    doc = fit_run(open_run(run), n_boot=50)
    native = [c for c in doc.model_checks if c.algorithm == "native" and c.collective == "allreduce"]
    assert {c.nbytes for c in native} == {8, 65536} and all(c.modelled_as for c in native)
