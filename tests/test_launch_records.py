"""What every launch measures before its first case, pooled over the launches of a replicated run.

``ccbench launch --launches K`` merges K runs; the memory copy bandwidth, the harness floor and
the local-reduction records of every launch are pooled (``ccbench.store.launches``), not the
first launch's kept alone.  Synthetic records with answers worked out by hand.
"""

import pytest

from ccbench.analysis.limits import memory_limit
from ccbench.store.launches import pool_harness_floor, pool_memory_bandwidth, pool_reduce_local


def _membw(one_s, node_s, *, host="n1", nbytes=8 << 20, ranks=2):
    return {"method": "STREAM copy", "repetitions": len(one_s),
            "one_core": {"host": host, "llc_bytes": 4 << 20, "nbytes": nbytes, "counted_bytes": 2 * nbytes,
                         "seconds": list(one_s)},
            "all_ranks": [{"host": host, "ranks": ranks, "llc_bytes": 4 << 20, "nbytes": nbytes // 2,
                           "counted_bytes": nbytes, "seconds": list(node_s)}]}


def test_memory_bandwidth_pools_every_launchs_repetitions():
    # 16 MiB counted on one core: 4 ms -> 4.19 GB/s, 2 ms -> 8.39 GB/s; the best repetition of all launches wins
    a = _membw([0.004, 0.005], [0.006, 0.007])
    b = _membw([0.002, 0.003], [0.008, 0.004])
    pooled = pool_memory_bandwidth([(1, a), (2, b)])
    assert pooled["one_core"]["seconds"] == [0.004, 0.005, 0.002, 0.003]
    assert pooled["all_ranks"][0]["seconds"] == [0.006, 0.007, 0.008, 0.004]
    assert pooled["repetitions"] == 4 and pooled["launches"] == [1, 2] and pooled["method"] == "STREAM copy"
    assert "launches_not_pooled" not in pooled
    lim = memory_limit(pooled)
    assert lim.one_core_gbs == pytest.approx(2 * (8 << 20) / 0.002 / 1e9)
    # the node: 2 ranks x 8 MiB counted each in the best 4 ms
    assert lim.nodes[0].aggregate_gbs == pytest.approx(2 * (8 << 20) / 0.004 / 1e9)
    # the inputs are left as they were
    assert a["one_core"]["seconds"] == [0.004, 0.005]


def test_memory_bandwidth_keeps_a_launch_of_another_shape_apart():
    a = _membw([0.004], [0.006])
    other_host = _membw([0.001], [0.001], host="n2")
    other_size = _membw([0.001], [0.001], nbytes=16 << 20)
    pooled = pool_memory_bandwidth([(1, a), (2, other_host), (3, None), (4, other_size), (5, _membw([0.005], [0.009]))])
    assert pooled["one_core"]["seconds"] == [0.004, 0.005]
    assert pooled["all_ranks"][0]["seconds"] == [0.006, 0.009]
    assert pooled["launches"] == [1, 5] and pooled["launches_not_pooled"] == [2, 4]
    assert pooled["one_core"]["host"] == "n1"


@pytest.mark.parametrize("change", [
    lambda r: r["one_core"].update(host="n9"), lambda r: r["one_core"].update(nbytes=1 << 20),
    lambda r: r["one_core"].update(counted_bytes=1 << 20), lambda r: r.update(method="another copy"),
    lambda r: r["all_ranks"][0].update(host="n9"), lambda r: r["all_ranks"][0].update(ranks=3),
    lambda r: r["all_ranks"][0].update(nbytes=1 << 20), lambda r: r["all_ranks"][0].update(counted_bytes=1 << 20),
    lambda r: r["all_ranks"].append(dict(r["all_ranks"][0], host="n2"))],
    ids=["one-host", "one-nbytes", "one-counted", "method", "node-host", "node-ranks", "node-nbytes",
         "node-counted", "another-node"])
def test_memory_bandwidth_pools_only_launches_that_copied_the_same_buffers_on_the_same_hosts(change):
    other = _membw([0.001], [0.001])
    change(other)
    pooled = pool_memory_bandwidth([(1, _membw([0.004], [0.006])), (2, other), (3, _membw([0.005], [0.009]))])
    assert pooled["launches"] == [1, 3] and pooled["launches_not_pooled"] == [2]
    assert pooled["one_core"]["seconds"] == [0.004, 0.005] and pooled["repetitions"] == 2


def test_memory_bandwidth_of_no_launch_is_none():
    assert pool_memory_bandwidth([]) is None
    assert pool_memory_bandwidth([(1, None), (2, {})]) is None
    assert pool_memory_bandwidth([(1, {"one_core": {}, "all_ranks": []})]) is None


def test_harness_floor_is_the_median_over_launches():
    recs = [(1, {"empty_s": 1e-6, "zero_count_s": {"bcast": 3e-6, "pingpong": 2e-6}}),
            (2, {"empty_s": 5e-6, "zero_count_s": {"bcast": 1e-6}}),
            (3, None),
            (4, {"empty_s": 2e-6, "zero_count_s": {"bcast": 2e-6, "pingpong": 4e-6}})]
    pooled = pool_harness_floor(recs)
    assert pooled["empty_s"] == pytest.approx(2e-6)
    # bcast: median of 3, 1, 2; pingpong: measured by launches 1 and 4 only, the median of 2 and 4
    assert pooled["zero_count_s"] == pytest.approx({"bcast": 2e-6, "pingpong": 3e-6})
    assert list(pooled["zero_count_s"]) == ["bcast", "pingpong"]
    assert pooled["launches"] == {"1": recs[0][1], "2": recs[1][1], "4": recs[3][1]}
    assert pool_harness_floor([(1, None)]) is None
    no_empty = pool_harness_floor([(1, {"empty_s": None, "zero_count_s": {}})])
    assert no_empty["empty_s"] is None and no_empty["zero_count_s"] == {}


def test_reduce_local_records_of_every_launch_are_kept_with_their_launch():
    r1 = [{"nbytes": 8, "seconds": 1e-6}, {"nbytes": 64, "seconds": 2e-6}]
    r2 = [{"nbytes": 8, "seconds": 3e-6}]
    pooled = pool_reduce_local([(1, r1), (2, None), (3, r2)])
    assert pooled == [{"nbytes": 8, "seconds": 1e-6, "launch": 1}, {"nbytes": 64, "seconds": 2e-6, "launch": 1},
                      {"nbytes": 8, "seconds": 3e-6, "launch": 3}]
    assert "launch" not in r1[0]


def test_a_merged_run_pools_the_records_of_every_launch(tmp_path):
    """merge_parts writes the pooled records into the merged run.json (the parts keep their own)."""
    import numpy as np

    from ccbench.measure.multilaunch import Part, Replication, merge_parts, replicated
    from ccbench.store.results import RunWriter
    from ccbench.store.run import open_run
    from ccbench.store.workload_rows import KIND, WORKLOAD_COLUMNS, WorkloadRow

    dest = tmp_path / "run"
    (dest / "parts").mkdir(parents=True)
    results = []
    for launch in (1, 2, 3):
        d = dest / "parts" / f"L{launch}"
        d.mkdir()
        x = np.array([launch * 1e-5])
        w = RunWriter(d, {"kind": KIND, "nranks": 2, "launch": launch,
                          "memory_bandwidth": _membw([0.001 * launch], [0.002 * launch]),
                          "harness_floor": {"empty_s": launch * 1e-7, "zero_count_s": {"bcast": launch * 1e-6}},
                          "reduce_local": [{"nbytes": 8, "seconds": launch * 1e-6}]}, columns=WORKLOAD_COLUMNS)
        w.append(WorkloadRow(workload="straggler", variant="late", model="-", algorithm="a", nranks=2, group_ranks=2,
                             dtype="float32", part=0, label="1 KiB", collective="allreduce", ncalls=1, ntensors=0,
                             payload_elems=256, nbytes=1024, samples=1, median_s=float(x[0]), min_s=float(x[0]),
                             mean_s=float(x[0]), ci_low_s=float(x[0]), ci_high_s=float(x[0]), baseline_s=1e-5,
                             slowdown=0.5, delay_s=1e-3, delayed_rank=1, samples_s=(float(x[0]),)))
        w.update(status="complete")
        w.close()
        results.append((launch, Part("all", (), ()), 0, d))
    rep = Replication({"launches": 3}, 3, "shuffled", None, str(tmp_path), replicated(3), [], lambda part: {},
                      lambda r: r.algorithm, WorkloadRow, WORKLOAD_COLUMNS, lambda r: r.algorithm)
    merge_parts(dest, results, rep, ["ccbench"], 1)
    meta = open_run(dest, kinds=("workload",)).meta
    assert meta["memory_bandwidth"]["one_core"]["seconds"] == [0.001, 0.002, 0.003]
    assert meta["memory_bandwidth"]["launches"] == [1, 2, 3]
    assert meta["harness_floor"]["empty_s"] == pytest.approx(2e-7)
    assert meta["harness_floor"]["zero_count_s"] == pytest.approx({"bcast": 2e-6})
    assert [(r["launch"], r["seconds"]) for r in meta["reduce_local"]] == [(1, 1e-6), (2, 2e-6), (3, 3e-6)]
    part1 = open_run(dest / "parts" / "L1", kinds=("workload",)).meta
    assert part1["memory_bandwidth"]["one_core"]["seconds"] == [0.001]


def test_show_says_the_floor_and_the_memory_limit_come_from_several_launches():
    from ccbench.present.views import floor_line, memory_line

    one = {"empty_s": 1e-6, "zero_count_s": {"bcast": 2e-6}}
    assert "launches" not in floor_line(one)
    pooled = pool_harness_floor([(1, one), (2, one), (3, one)])
    assert floor_line(pooled).endswith("; medians of 3 launches")
    assert "launches" not in memory_line(_membw([0.004], [0.006]))
    mem = pool_memory_bandwidth([(1, _membw([0.004], [0.006])), (2, _membw([0.002], [0.006]))])
    assert memory_line(mem).endswith("; best of 2 launches")
    assert "one core 8.39 GB/s" in memory_line(mem)  # 16 MiB counted in the best 2 ms
