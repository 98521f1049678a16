"""Link levels from a pair matrix alone (ccbench.analysis.levels): synthetic times with known answers."""

import math

import pytest

from ccbench.analysis.levels import find_levels

SIZES = (8, 1 << 20)


def _pairs(spec):
    """{pair: (small s, large s, same node)} from (name, alpha, beta, same node)."""
    small = {p: a + SIZES[0] * b for p, a, b, _ in spec}
    large = {p: a + SIZES[1] * b for p, a, b, _ in spec}
    same = {p: s for p, *_, s in spec}
    return small, large, same


def test_two_levels_agree_with_the_node_map_and_give_each_its_alpha_and_beta():
    small, large, same = _pairs([("a0-a1", 2e-6, 1e-10, True), ("b0-b1", 2.2e-6, 1e-10, True),
                                 ("a0-b0", 1e-3, 8e-9, False), ("a1-b1", 1.05e-3, 8e-9, False)])
    lv = find_levels(small, large, SIZES, same)
    assert [(v.where, v.pairs) for v in lv.levels] == [("inside nodes", 2), ("between nodes", 2)]
    inter = lv.levels[1]
    assert inter.alpha_s == pytest.approx(1.025e-3) and inter.beta_s_per_byte == pytest.approx(8e-9)
    assert inter.bandwidth_gbs == pytest.approx(0.125) and lv.disagree == []


def test_a_pair_slowed_by_a_busy_core_stays_in_its_level():
    """5x within shared memory against 90x to the network: one level, not three (the gap must be at least the
    square root of the widest)."""
    small, large, same = _pairs([("a0-a1", 2.2e-6, 1e-10, True), ("b0-b1", 12e-6, 1e-10, True),
                                 ("a0-b0", 1.07e-3, 8e-9, False), ("a1-b1", 1.1e-3, 8e-9, False)])
    assert [v.where for v in find_levels(small, large, SIZES, same).levels] == ["inside nodes", "between nodes"]


def test_a_gap_just_under_two_is_no_level_and_just_over_is():
    for ratio, n in ((1.99, 1), (2.01, 2)):
        small, large, same = _pairs([("x", 1e-6, 1e-9, False), ("y", ratio * 1e-6, 1e-9, False)])
        assert len(find_levels(small, large, SIZES, same).levels) == n


def test_a_pair_of_one_node_timed_like_the_network_is_named():
    small, large, same = _pairs([("a0-a1", 2e-6, 1e-10, True), ("b0-b1", 1e-3, 8e-9, True),
                                 ("c0-c1", 2.1e-6, 1e-10, True), ("a0-b0", 1e-3, 8e-9, False)])
    lv = find_levels(small, large, SIZES, same)
    assert [v.where for v in lv.levels] == ["inside nodes", "mixed"]
    assert lv.disagree == ["b0-b1: on one node, but as slow as pairs between nodes (no shared-memory path?)"]


def test_two_nodes_that_are_one_machine_are_named():
    small, large, same = _pairs([("a0-a1", 2e-6, 1e-10, True), ("a0-b0", 2.1e-6, 1e-10, False),
                                 ("a0-c0", 1e-3, 8e-9, False), ("b0-c0", 1e-3, 8e-9, False),
                                 ("a1-c1", 1e-3, 8e-9, False)])
    lv = find_levels(small, large, SIZES, same)
    assert lv.disagree == ["a0-b0: on two nodes, but as fast as pairs inside one (one machine under two names?)"]


def test_one_level_says_nothing_against_the_node_map():
    small, large, same = _pairs([("a0-a1", 2e-6, 1e-10, True), ("a0-b0", 2.5e-6, 1e-10, False)])
    lv = find_levels(small, large, SIZES, same)
    assert [v.where for v in lv.levels] == ["mixed"] and lv.disagree == []
    assert math.isfinite(lv.levels[0].alpha_s)
