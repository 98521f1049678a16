"""The schedule model with placement (`ccbench.analysis.placed`): known answers on hand-made and executed schedules."""

import pytest

from ccbench.analysis.placed import placed_time, schedule_time, timed_schedule
from ccbench.analysis.predict import TwoLevelParams
from ccbench.core.errors import UsageError

D, EPS, B = 1e-3, 2e-6, 1e-8  # inter-node delay, intra-node latency, inter-node seconds per byte


def two(intra_alpha=0.0, inter_alpha=0.0, inter_beta=0.0, intra_beta=0.0, ppn=2):
    return TwoLevelParams(intra_alpha_s=intra_alpha, intra_beta_s_per_byte=intra_beta, inter_alpha_s=inter_alpha,
                          inter_beta_s_per_byte=inter_beta, ranks_per_node=ppn)


def test_one_message_pays_its_level():
    batches = [[(((1, 1000, 0),), ())], [((), ((0, 1000, 0),))]]
    params = two(intra_alpha=EPS, inter_alpha=D, inter_beta=B, intra_beta=B / 10)
    assert schedule_time(batches, [0, 1], params) == pytest.approx(D + 1000 * B)
    assert schedule_time(batches, [0, 0], params) == pytest.approx(EPS + 1000 * B / 10)


def test_messages_into_one_node_share_its_link():
    """Ranks 0 and 1 send n bytes at once to ranks 2 and 3: into one node they queue on its link (the second waits
    for the first to serialise), into two nodes they do not."""
    n = 10_000
    batches = [[(((2, n, 0),), ())], [(((3, n, 0),), ())], [((), ((0, n, 0),))], [((), ((1, n, 0),))]]
    params = two(inter_alpha=D, inter_beta=B)
    assert schedule_time(batches, [0, 0, 1, 1], params) == pytest.approx(D + 2 * n * B)
    assert schedule_time(batches, [0, 0, 1, 2], params) == pytest.approx(D + n * B)


def test_a_batch_waits_for_its_own_previous_one_and_its_messages():
    # rank 1 forwards what it got from 0 to 2: two hops in a row; rank 2 ends at 2 D
    batches = [[(((1, 8, 0),), ())], [((), ((0, 8, 0),)), (((2, 8, 0),), ())], [((), ((1, 8, 0),))]]
    assert schedule_time(batches, [0, 1, 2], two(inter_alpha=D)) == pytest.approx(2 * D)
    with pytest.raises(RuntimeError, match=r"ranks \[1\] wait for messages never sent"):
        schedule_time([[], [((), ((0, 8, 0),))]], [0, 1], two(inter_alpha=D))


def test_ring_allreduce_on_two_nodes_block_against_cyclic():
    """4 ranks on 2 nodes, latency only.  Block (nodes 0,0,1,1): a rank's step waits for its predecessor's previous
    step, so the chain alternates between a link and shared memory: 3 D + 3 eps.  Cyclic (0,1,0,1): every hop
    crosses a link: 2(P-1) D = 6 D, as the closed form prices every step."""
    params = two(intra_alpha=EPS, inter_alpha=D)
    assert placed_time("allreduce", "ring", [0, 0, 1, 1], 8, params) == pytest.approx(3 * D + 3 * EPS)
    assert placed_time("allreduce", "ring", [0, 1, 0, 1], 8, params) == pytest.approx(6 * D)


def test_sends_that_complete_when_acknowledged_hold_their_sender_a_round_trip():
    """From `acked_from` bytes on, a send across nodes ends one delay after it arrived: every hop of a ring that
    crosses a link then costs its sender 2 D a step, so block and cyclic both take 2 (P-1) x 2 D = 12 D -- what the
    lab measured with 256 B chunks -- while chunks below the threshold keep 3 D against 6 D."""
    params = two(inter_alpha=D)
    for nodes in ([0, 0, 1, 1], [0, 1, 0, 1]):
        assert placed_time("allreduce", "ring", nodes, 1024, params, acked_from=256) == pytest.approx(12 * D)
    assert placed_time("allreduce", "ring", [0, 0, 1, 1], 1024, params, acked_from=257) == pytest.approx(3 * D)
    # rank 0 sends 300 B, then 8 B: held until the first is acknowledged (2 D), its second arrives at 3 D
    two_sends = [[(((1, 300, 0),), ()), (((1, 8, 1),), ())], [((), ((0, 300, 0),)), ((), ((0, 8, 1),))]]
    assert schedule_time(two_sends, [0, 1], params, acked_from=256) == pytest.approx(3 * D)
    assert schedule_time(two_sends, [0, 1], params) == pytest.approx(D)  # both sent at once
    assert schedule_time(two_sends, [0, 0], params, acked_from=256) == pytest.approx(0.0)  # inside a node: no ack


@pytest.mark.parametrize("P", [2, 4, 5])
def test_one_rank_per_node_gives_the_closed_forms_of_ring_and_recursive_doubling(P):
    """With one rank per node no two messages share a link in these schedules: the simulation is the closed form.
    (Recursive doubling at P = 5 is left out: its closed form's critical path charges the rank that folds in the
    extra rank one step for sending on to its partner, while here a send completes locally and the partner's step
    overlaps the fold, 3 delays instead of 4.)"""
    from ccbench.algorithms import REGISTRY

    n = 4 * 5 * 1024  # divisible by every P here, so that every ring chunk is n / P
    nodes = list(range(P))
    for alg in ("ring", "recursive_doubling") if P != 5 else ("ring",):
        cost = REGISTRY["allreduce"][alg].cost(P, n)
        assert placed_time("allreduce", alg, nodes, 8, two(inter_alpha=D)) == pytest.approx(
            REGISTRY["allreduce"][alg].cost(P, 8).timing_cost.alpha * D)
        assert placed_time("allreduce", alg, nodes, n, two(inter_beta=B)) == pytest.approx(cost.timing_cost.beta * B)


def test_the_hierarchical_allreduce_keeps_its_schedule_on_a_cyclic_map():
    params = two(intra_alpha=EPS, inter_alpha=D, inter_beta=B, intra_beta=B / 10)
    block = placed_time("allreduce", "hierarchical", [0, 0, 1, 1], 4096, params)
    assert placed_time("allreduce", "hierarchical", [0, 1, 0, 1], 4096, params) == pytest.approx(block)
    # reduce inside the node (1 step), Rabenseifner between the 2 leaders (2 steps), broadcast inside (1 step)
    assert placed_time("allreduce", "hierarchical", [0, 0, 1, 1], 8, two(intra_alpha=EPS, inter_alpha=D)) == \
        pytest.approx(2 * EPS + 2 * D)


def test_what_cannot_be_priced_is_refused():
    with pytest.raises(UsageError, match="only a hand-written algorithm has a schedule"):
        placed_time("allreduce", "native", [0, 1], 8, two())
    with pytest.raises(UsageError, match=r"priced on nodes of equal size; these hold \[1, 2\] ranks"):
        placed_time("allreduce", "hierarchical", [0, 0, 1], 8, two())
    with pytest.raises(UsageError, match="placed predictions take 1 to"):
        placed_time("allreduce", "ring", [], 8, two())


def test_the_critical_path_names_the_level_of_every_message_on_it():
    """Ring allreduce, 4 ranks on 2 nodes, latency only: block alternates a node's shared memory and the link
    (3 D + 3 eps), cyclic crosses the link at each of its 2 (P - 1) steps; with acknowledged sends every crossing is
    a round trip."""
    from ccbench.analysis.placed import placed_schedule

    params = two(intra_alpha=EPS, inter_alpha=D)
    block = placed_schedule("allreduce", "ring", [0, 0, 1, 1], 8, params)
    assert block.levels == "iBiBiB" and block.time_s == pytest.approx(3 * D + 3 * EPS)
    assert [h.dst for h in block.path] == [(h.src + 1) % 4 for h in block.path]  # a ring: each to its successor
    assert placed_schedule("allreduce", "ring", [0, 1, 0, 1], 8, params).levels == "BBBBBB"
    acked = placed_schedule("allreduce", "ring", [0, 0, 1, 1], 1024, two(inter_alpha=D), acked_from=256)
    assert acked.levels == "RRRRRR" and acked.time_s == pytest.approx(12 * D)
    # a batch that waits only for its own previous one adds no message; one with no message at all has none
    assert timed_schedule([[(((1, 8, 0),), ())], [((), ((0, 8, 0),))]], [0, 1], params).levels == "B"
    assert timed_schedule([[], []], [0, 1], params).levels == "-"


def test_placed_predictions_price_every_hand_written_algorithm_under_each_placement():
    from ccbench.analysis.placed import placed_predictions, placement_nodes

    assert placement_nodes("block", 4, 2) == [0, 0, 1, 1] and placement_nodes("cyclic", 4, 2) == [0, 1, 0, 1]
    assert placement_nodes((3, 2, 1, 0), 4, 2) == [1, 1, 0, 0]
    rows = placed_predictions(two(intra_alpha=EPS, inter_alpha=D), 4, [8], ["allreduce"], {"b": "block", "c": "cyclic"})
    by = {(r.algorithm, r.placement): r for r in rows}
    assert by[("ring", "c")].time_s == pytest.approx(6 * D) and by[("ring", "c")].between == 6
    assert by[("ring", "b")].between == 3 and by[("ring", "b")].steps == 6
    assert "native" not in {r.algorithm for r in rows} and "ring-persistent" not in {r.algorithm for r in rows}
    with pytest.raises(UsageError, match="divisible by --ppn"):
        placed_predictions(two(ppn=3), 4, [8], ["allreduce"])
    with pytest.raises(UsageError, match="1 to 256 ranks"):
        placed_predictions(two(ppn=2), 258, [8], ["allreduce"])


def test_predict_placement_from_the_command_line():
    from click.testing import CliRunner

    from ccbench.cli import cli

    base = ["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "4", "-s", "8", "-C", "allreduce"]
    two_level = ["--intra-alpha", "2us", "--intra-beta", "1e-10", "--ppn", "2"]
    res = CliRunner().invoke(cli, [*base, *two_level, "--placement", "block,cyclic"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    ring = next(ln for ln in res.output.splitlines() if "│ ring " in ln)
    assert "iBiBiB" in ring and "BBBBBB" in ring
    assert res.output.strip().splitlines()[-1].startswith("fastest: 8 B ")


def _diagnosis(folder, hosts=("h0", "h0", "h1", "h1")):
    """A stored diagnosis of 4 ranks whose pairs take 2 us + n / 10 GB/s inside a host and 1 ms + n / 100 MB/s
    between hosts."""
    import itertools
    import json

    from ccbench.store.doctor_rows import DoctorRow

    run = folder / "20260101-000000_h_np4"
    run.mkdir(parents=True)
    ends = [f"{h}:{hosts[:i].count(h)}" for i, h in enumerate(hosts)]
    rows = []
    for (i, a), (j, b) in itertools.combinations(enumerate(ends), 2):
        for n in (8, 1 << 20):
            t = 1e-3 + n * 1e-8 if hosts[i] != hosts[j] else 2e-6 + n * 1e-10
            rows.append(DoctorRow("pair", f"{a} <> {b}", n, f"{i},{j}", 2, 1, t, t, t, t, t, samples_s=(t,)))
    (run / "cases.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    (run / "run.json").write_text(json.dumps({"schema": "ccbench.run/2", "kind": "doctor", "nranks": 4, "nodes": 2,
                                              "ranks_per_node": 2, "status": "complete"}))
    return run


def test_both_levels_come_from_a_diagnosis_and_price_the_placements(tmp_path):
    from click.testing import CliRunner

    from ccbench.analysis.runs import level_params
    from ccbench.cli import cli
    from ccbench.store.run import open_run

    run = _diagnosis(tmp_path)
    inter, two, text = level_params(open_run(run))
    assert (two.intra_alpha_s, two.intra_beta_s_per_byte) == pytest.approx((2e-6, 1e-10))
    assert (inter.alpha_s, inter.beta_s_per_byte) == pytest.approx((1e-3, 1e-8)) and two.ranks_per_node == 2
    assert "2 link levels" in text and level_params(open_run(run), 4)[1].ranks_per_node == 4
    res = CliRunner().invoke(cli, ["predict", "--levels-from", str(run), "-n", "4", "-s", "8", "-C", "allreduce",
                                   "--placement", "block,cyclic"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "measured by diagnosis run 20260101-000000_h_np4" in res.output
    ring = next(ln for ln in res.output.splitlines() if "│ ring " in ln)
    assert "iBiBiB" in ring and "BBBBBB" in ring


def test_levels_from_refuses_what_has_no_two_levels(tmp_path, capsys):
    from ccbench.cli import main

    one = _diagnosis(tmp_path / "one", hosts=("h0",) * 4)
    two = _diagnosis(tmp_path / "two")
    for args, message in (([str(one)], "shows one link level (inside nodes)"),
                          (["tests/data/run-np2"], "takes a diagnosis run (ccbench doctor); 'run-np2' is a sweep"),
                          ([str(two), "--alpha", "1us"], "--levels-from gives both levels")):
        with pytest.raises(SystemExit) as exc:
            main(["predict", "-n", "8", "--levels-from", *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err
