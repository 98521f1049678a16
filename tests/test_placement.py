"""--placement: the orders it makes (pure), what the sweep refuses, and the re-ranked communicator under MPI.

The pure tier checks the permutations on node maps with a known answer, the parsing of every
form (a name, a seed, a list, a file) and its refusals, the hierarchical algorithms' need for a
node hierarchy, and the node map line; the MPI tier (1-5 ranks) that the sweep's communicator
is the launch's re-ranked (each rank's recorded original rank) and that a bad order is refused
on every rank with nothing written.
"""

import json

import pytest

from ccbench.core.errors import UsageError
from ccbench.core.placement import check_order, hierarchy_missing, parse_placement, placement_order, placement_text
from ccbench.measure.config import plan, resolve

# ------------------------------------------------------------------ the orders


@pytest.mark.parametrize("placement,nodes,want", [
    ("block", [0, 0, 1, 1], [0, 1, 2, 3]),        # already block: the launch's order
    ("cyclic", [0, 0, 1, 1], [0, 2, 1, 3]),       # new rank k on node k mod 2
    ("block", [0, 1, 0, 1], [0, 2, 1, 3]),        # a cyclic launch made block
    ("cyclic", [0, 1, 0, 1], [0, 1, 2, 3]),
    ("cyclic", [0, 0, 0, 1, 1], [0, 3, 1, 4, 2]),  # uneven nodes: dealt while a node has ranks left
    ("cyclic", [0, 1, 1, 2], [0, 1, 3, 2]),
    ("block", [0, 1, 2, 1], [0, 1, 3, 2]),        # nodes in the order of their first rank
    ("cyclic", [0, 0, 0], [0, 1, 2]),             # one node: nothing to deal
    ((2, 0, 1), [0, 0, 0], [2, 0, 1]),            # a given order is taken as it is
])
def test_placement_orders(placement, nodes, want):
    order = placement_order(placement, nodes)
    assert order == want
    new_nodes = [nodes[r] for r in order]
    if placement == "block":  # each node's ranks together
        assert new_nodes == sorted(new_nodes, key=new_nodes.index)


def test_random_placement_is_a_permutation_its_seed_decides():
    nodes = [0] * 5 + [1] * 5
    a, b = placement_order("random:7", nodes), placement_order("random", nodes, seed=7)
    assert a == b and sorted(a) == list(range(10))
    assert any(placement_order(f"random:{s}", nodes) != a for s in range(8, 12))  # other seeds, other orders
    with pytest.raises(ValueError):
        placement_order("random", nodes)  # the sweep draws the seed first


@pytest.mark.parametrize("value,want", [
    (None, None), ("block", "block"), ("cyclic", "cyclic"), ("random", "random"), ("random:42", "random:42"),
    ("0,2,1,3", (0, 2, 1, 3)), ("1, 0,", (1, 0)), ([3, 1, 0, 2], (3, 1, 0, 2)),
])
def test_parse_placement(value, want):
    assert parse_placement(value) == want


def test_a_placement_file_one_rank_per_line_or_comma_separated(tmp_path):
    lines, commas = tmp_path / "lines.txt", tmp_path / "commas"
    lines.write_text("1\n3\n0\n2\n")
    commas.write_text("1,3,0,2")
    assert parse_placement(str(lines)) == parse_placement(str(commas)) == (1, 3, 0, 2)
    cfg = resolve({"placement": str(lines)})
    assert cfg.placement == (1, 3, 0, 2) and cfg.to_dict()["placement"] == (1, 3, 0, 2)
    stored = json.loads(json.dumps(cfg.to_dict()))  # as run.json keeps it: a resume resolves the same placement
    assert resolve({"placement": stored["placement"]}) == cfg


@pytest.mark.parametrize("value,line", [
    ("0,2,2", "placement 0,2,2 is not a permutation of 0..2: 2 appears twice, 1 is missing"),
    ("1,2", "placement 1,2 is not a permutation of 0..1: 2 is not below 2, 0 is missing"),
    ([0, 1, True], "placement [0, 1, True]: expected ranks (integers)"),
    ("random:99999999999", "placement random:99999999999: the seed must be below 2**32"),
    ("blocky", "placement 'blocky': neither block, cyclic, random[:SEED], a comma list of ranks nor a file"),
])
def test_parse_placement_refuses(value, line):
    with pytest.raises(UsageError) as exc:
        parse_placement(value)
    assert str(exc.value) == line


def test_a_placement_file_that_is_no_permutation_is_refused(tmp_path):
    bad, words = tmp_path / "bad.txt", tmp_path / "words.txt"
    bad.write_text("0\n1\n1\n")
    words.write_text("zero one\n")
    with pytest.raises(UsageError, match=r"placement file '.*bad.txt' is not a permutation of 0..2: 1 appears twice"):
        parse_placement(str(bad))
    with pytest.raises(UsageError, match=r"placement file '.*words.txt': expected ranks, one per line or comma"):
        parse_placement(str(words))


def test_an_order_must_have_one_entry_per_rank():
    assert check_order([1, 0], nranks=2) == (1, 0)
    with pytest.raises(UsageError, match=r"^placement lists 3 ranks, the run has 4: give a permutation of 0..3$"):
        placement_order((0, 1, 2), [0, 0, 1, 1])


# ------------------------------------------------------------------ hierarchical algorithms need two levels


@pytest.mark.parametrize("nodes,why", [
    ([0, 0, 1, 1], None), ([0, 1, 0, 1], None), ([0, 0, 0, 1], None),
    ([0, 0, 0], "no node hierarchy: all 3 ranks on one node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED))"),
    ([0, 1, 2], "no node hierarchy: one rank on each of the 3 nodes"),
    (None, "no node map (the run did not record each rank's node)"),
])
def test_hierarchy_missing(nodes, why):
    assert hierarchy_missing(nodes) == why


def test_a_hierarchical_algorithm_without_a_hierarchy_is_refused_when_named_and_skipped_under_all():
    why = hierarchy_missing([0, 0, 0, 0])
    named = resolve({"collectives": "allreduce", "algorithms": "ring,hierarchical", "sizes": "8"})
    with pytest.raises(UsageError, match=r"^allreduce/hierarchical cannot run here: no node hierarchy: all 4 ranks"):
        plan(named, 4, why)
    assert {c.algorithm for c in plan(named, 4, None)[0]} == {"ring", "hierarchical"}  # two levels, or not known
    every = resolve({"collectives": "allreduce", "algorithms": "all", "sizes": "8"})
    cases, skipped = plan(every, 4, why)
    assert "hierarchical" not in {c.algorithm for c in cases} and "ring" in {c.algorithm for c in cases}
    assert ("allreduce/hierarchical sum", why) in skipped


# ------------------------------------------------------------------ the node map line


def test_the_node_map_line_says_how_the_launch_was_re_ranked():
    from ccbench.present.views import topology_line

    topo = {"node_names": ["ccb-h0", "ccb-h1"], "ranks_of_node": [[0, 2], [1, 3]], "order": "cyclic",
            "placement": {"placement": "cyclic", "seed": None, "original_rank": [0, 2, 1, 3], "launch_order": "block"}}
    assert topology_line({"topology": topo}) == ("node map (the MPI library's shared-memory split): ccb-h0: ranks 0, "
                                                 "2; ccb-h1: ranks 1, 3 (cyclic order; --placement cyclic re-ranked "
                                                 "the launch's block order)")
    one = {"node_names": ["vm"], "ranks_of_node": [[0, 1, 2]], "order": "block",
           "placement": {"placement": "random", "seed": 5, "original_rank": [2, 0, 1], "launch_order": "block"}}
    assert topology_line({"topology": one}).endswith("(block order; --placement random (seed 5) re-ranked the "
                                                     "launch's block order)")
    assert topology_line({"topology": dict(one, placement={"placement": "launch", "original_rank": [0, 1, 2]})}) == ""
    assert placement_text({"placement": "given", "original_rank": list(range(20))}) == \
        "--placement 0,1,2,3,4,5,6,7,8,9,10,11,..."


# ------------------------------------------------------------------ under MPI: 1-5 ranks


@pytest.mark.mpi
@pytest.mark.parametrize("placement", ["reversed", "random:3", "cyclic"])
def test_the_sweep_runs_on_the_launch_re_ranked(placement):
    from mpi4py import MPI

    from ccbench.measure.provenance import placed

    world = MPI.COMM_WORLD
    P, me = world.Get_size(), world.Get_rank()
    spec = tuple(reversed(range(P))) if placement == "reversed" else placement
    comm, record = placed(world, spec)
    order = record["original_rank"]
    assert sorted(order) == list(range(P)) and comm.Get_size() == P
    assert order[comm.Get_rank()] == me  # each rank's recorded original rank is its rank in the launch
    assert comm.allgather(me) == order  # and the new communicator's ranks are in that order
    if placement == "reversed":
        assert record["placement"] == "given" and order == list(reversed(range(P)))
    if placement == "random:3":
        assert record == {"placement": "random", "seed": 3, "original_rank": placement_order("random:3", [0] * P),
                          "launch_order": "block"}
    if placement == "cyclic":  # one node here: nothing to deal out
        assert order == list(range(P))
    comm.Free()


@pytest.mark.mpi
def test_a_sweep_with_an_order_of_the_wrong_length_is_refused_on_every_rank_nothing_written(tmp_path):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_sweep

    world = MPI.COMM_WORLD
    P = world.Get_size()
    results = world.bcast(str(tmp_path / "results"), root=0)
    cfg = resolve({"collectives": "barrier", "placement": list(range(P + 1)), "results_dir": results})
    with pytest.raises(UsageError, match=rf"^placement lists {P + 1} ranks, the run has {P}: give a permutation"):
        run_sweep(cfg, thread=("single", "test"), argv=["test"])
    world.Barrier()
    assert not (tmp_path / "results").exists()
