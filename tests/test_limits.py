"""The node's limit (ccbench.analysis.limits): STREAM-copy rates, per-node aggregates, shares, intra-node beta.

Plain pytest on synthetic records with answers worked out by hand.
"""

import pytest

from ccbench.analysis.limits import (
    best_rate_gbs,
    best_shares,
    intra_node_beta_s_per_byte,
    memory_limit,
    node_aggregate_gbs,
    node_copy_gbs_at,
    share_of_limit,
)


def _record():
    """One core: 128 MB counted in 10 ms at best (12.8 GB/s); node a: 2 ranks x 64 MB in 8 ms at best (16 GB/s
    aggregate, 8 per rank); node b: 4 ranks x 32 MB in 16 ms at best (8 GB/s aggregate, 2 per rank)."""
    return {"method": "STREAM copy", "repetitions": 3,
            "one_core": {"host": "a", "llc_bytes": 32e6, "nbytes": 64_000_000, "counted_bytes": 128_000_000,
                         "seconds": [0.012, 0.010, 0.011]},
            "all_ranks": [{"host": "a", "ranks": 2, "llc_bytes": 32e6, "nbytes": 32_000_000,
                           "counted_bytes": 64_000_000, "seconds": [0.009, 0.008, 0.010]},
                          {"host": "b", "ranks": 4, "llc_bytes": 32e6, "nbytes": 16_000_000,
                           "counted_bytes": 32_000_000, "seconds": [0.020, 0.016, 0.017]}]}


def test_best_rate_is_the_shortest_time_like_stream():
    assert best_rate_gbs(2e9, [2.0, 1.0, 0.5]) == pytest.approx(4.0)
    assert best_rate_gbs(1e9, [0.0, 0.25]) == pytest.approx(4.0)  # a zero time (timer resolution) is dropped
    with pytest.raises(ValueError):
        best_rate_gbs(1e9, [])
    with pytest.raises(ValueError):
        best_rate_gbs(0, [1.0])


def test_node_aggregate_counts_every_rank_against_the_wall_clock_around_them():
    # 4 ranks each copying 1 GB counted; the best repetition took 0.5 s from the first start to the last end
    assert node_aggregate_gbs(1e9, 4, [1.0, 0.5, 0.8]) == pytest.approx(8.0)
    with pytest.raises(ValueError):
        node_aggregate_gbs(1e9, 0, [1.0])


def test_intra_node_beta_shares_the_node_among_its_ranks():
    # 10 GB/s counted shared by 2 ranks: 5 GB/s each, 2 counted bytes per message byte -> 2.5 GB/s of messages
    assert intra_node_beta_s_per_byte(10.0, 2) == pytest.approx(4e-10)
    assert intra_node_beta_s_per_byte(10.0, 1) == pytest.approx(2e-10)
    assert intra_node_beta_s_per_byte(10.0, 8) == pytest.approx(4 * intra_node_beta_s_per_byte(10.0, 2))
    for bad in ((0.0, 2), (10.0, 0)):
        with pytest.raises(ValueError):
            intra_node_beta_s_per_byte(*bad)


def test_share_of_limit():
    assert share_of_limit(2.0, 4.0) == pytest.approx(0.5)
    assert share_of_limit(6.0, 4.0) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        share_of_limit(1.0, 0.0)


def test_memory_limit_of_a_record():
    lim = memory_limit(_record())
    assert lim.one_core_gbs == pytest.approx(12.8) and lim.one_core_host == "a"
    a, b = lim.nodes
    assert (a.host, a.ranks, a.aggregate_gbs, a.per_rank_gbs) == ("a", 2, pytest.approx(16.0), pytest.approx(8.0))
    assert (b.host, b.ranks, b.aggregate_gbs, b.per_rank_gbs) == ("b", 4, pytest.approx(8.0), pytest.approx(2.0))
    assert lim.limiting is b  # the node whose ranks get the least bounds the collective
    assert lim.copy_gbs == pytest.approx(1.0)  # 2 GB/s counted per rank, read + written: 1 GB/s of bytes copied
    assert lim.intra_node_beta_s_per_byte == pytest.approx(1e-9) == pytest.approx(1e-9 / lim.copy_gbs)
    assert lim.repetitions == 3 and lim.one_core_nbytes == 64_000_000
    assert lim.per_rank_nbytes == (32_000_000, 16_000_000)


def test_runs_without_the_record_have_no_limit():
    assert memory_limit(None) is None and memory_limit({}) is None
    assert memory_limit({**_record(), "all_ranks": []}) is None


def test_best_hand_written_and_best_native():
    busbw = {"ring": 3.0, "rabenseifner": 4.0, "native": 2.0, "native:ring": 5.0}
    got = best_shares(busbw, 5.0)
    assert got["hand-written"] == ("rabenseifner", pytest.approx(0.8))
    assert got["native"] == ("native:ring", pytest.approx(1.0))
    assert best_shares({"ring": 1.0}, 2.0) == {"hand-written": ("ring", pytest.approx(0.5))}
    assert best_shares({}, 2.0) == {}


def test_node_bandwidth_grows_with_the_ranks_until_the_measured_aggregate():
    assert node_copy_gbs_at(12.0, 20.0, 1) == 12.0
    assert node_copy_gbs_at(12.0, 20.0, 2) == 20.0  # 24 capped at the aggregate
    assert node_copy_gbs_at(5.0, 40.0, 4) == 20.0
    for bad in ((0.0, 20.0, 1), (12.0, 0.0, 1), (12.0, 20.0, 0)):
        with pytest.raises(ValueError):
            node_copy_gbs_at(*bad)


def test_intra_node_beta_at_a_number_of_ranks_per_node():
    lim = memory_limit(_record())  # one core 12.8 GB/s, limiting node b: 8 GB/s aggregate
    assert lim.intra_node_beta_at(1) == pytest.approx(2 / 8e9)  # one rank: min(12.8, 8) = 8 GB/s counted
    assert lim.intra_node_beta_at(16) == pytest.approx(2 * 16 / 8e9)  # 16 ranks share 8 GB/s
    assert lim.intra_node_beta_at(4) == pytest.approx(lim.intra_node_beta_s_per_byte)  # as measured
