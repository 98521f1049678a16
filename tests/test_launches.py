"""Rows of several launches: pooling (store.launches), the launch fields of stored rows, the per-launch share."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from ccbench.measure.config import load_config
from ccbench.store.launches import LAUNCH_SPREAD, launch_spread, pool_launches, pool_rows
from ccbench.store.results import Row, RunWriter, new_run_dir
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]


def _row(samples, algorithm="ring", nbytes=64, nwrong=0, flags=(), stop="target_rse"):
    x = np.asarray(samples, dtype=float)
    med = float(np.median(x))
    return Row(collective="allreduce", algorithm=algorithm, nbytes=nbytes, count=nbytes // 4, dtype="float32",
               op="sum", in_place=False, root=0, nranks=2, samples=x.size, min_s=float(x.min()), median_s=med,
               mean_s=float(x.mean()), p95_s=med, p99_s=med, max_s=float(x.max()), stddev_s=0.0, ci_low_s=med,
               ci_high_s=med, algbw_gbs=nbytes / med / 1e9, busbw_gbs=2 * nbytes / med / 1e9, msgs_max=1,
               bytes_max=nbytes, msgs_total=2, bytes_total=2 * nbytes, steps_max=1, step_bytes_max=nbytes,
               reduced_bytes_max=nbytes, nwrong=nwrong, stop_reason=stop, sync="barrier", flags=tuple(flags),
               samples_s=tuple(float(v) for v in x))


def test_pooled_row_is_the_geometric_mean_of_launch_medians_with_an_interval_over_launches():
    rng = np.random.default_rng(1)
    a = 1e-5 * (1 + 0.01 * rng.standard_normal(50))
    b = 4e-5 * (1 + 0.01 * rng.standard_normal(30))
    c = 2e-5 * (1 + 0.01 * rng.standard_normal(40))
    pooled = pool_launches([(3, _row(c)), (1, _row(a, nwrong=1, flags=("outliers",))),
                            (2, _row(b, stop="budget"))])
    assert pooled.launches == (1, 2, 3) and pooled.launch_samples == (50, 30, 40) and pooled.samples == 120
    assert pooled.samples_s == tuple(np.concatenate([a, b, c]))
    want = math.exp(np.mean(np.log([np.median(a), np.median(b), np.median(c)])))
    assert pooled.median_s == pytest.approx(want, rel=1e-12)
    # the launches differ by 2-4x, far more than the 1% within them: the interval spans them, the flag says so
    assert pooled.ci_low_s < np.median(a) * 1.05 and pooled.ci_high_s > np.median(b) * 0.95
    assert LAUNCH_SPREAD in pooled.flags and "outliers" in pooled.flags
    assert pooled.min_s == a.min() and pooled.max_s == b.max()
    assert pooled.mean_s == pytest.approx(np.mean(np.concatenate([a, b, c])))
    assert pooled.nwrong == 1 and pooled.stop_reason == "target_rse;budget"
    # bandwidths follow the typical time; counted traffic is the first launch's
    assert pooled.algbw_gbs == pytest.approx(64 / want / 1e9) and pooled.busbw_gbs == pytest.approx(2 * 64 / want / 1e9)
    assert pooled.bytes_max == 64
    assert [n for n, _ in pooled.launch_blocks()] == [1, 2, 3]
    assert pooled.launch_blocks()[1][1] == tuple(b) and pooled.n_launches == 3


def test_one_launch_keeps_its_statistics_and_records_its_number():
    r = _row([1e-5, 2e-5, 3e-5])
    pooled = pool_launches([(2, r)])
    assert pooled.launches == (2,) and pooled.launch_samples == (3,)
    assert (pooled.median_s, pooled.ci_low_s, pooled.ci_high_s) == (r.median_s, r.ci_low_s, r.ci_high_s)
    assert LAUNCH_SPREAD not in pooled.flags


def test_launches_that_agree_are_not_flagged():
    rng = np.random.default_rng(2)
    blocks = [1e-5 * (1 + 0.2 * rng.random(200)) for _ in range(4)]
    assert not launch_spread(blocks)
    assert launch_spread([blocks[0], 3 * blocks[1]])


def test_pool_refuses_repeated_launches_and_pooled_rows():
    r = _row([1e-5, 2e-5])
    with pytest.raises(ValueError, match="repeat"):
        pool_launches([(1, r), (1, r)])
    with pytest.raises(ValueError, match="one launch each"):
        pool_launches([(1, pool_launches([(1, r)]))])
    with pytest.raises(ValueError):
        pool_launches([])


def test_pool_rows_groups_by_case_in_first_seen_order():
    x, y = _row([1e-5], nbytes=8), _row([2e-5], nbytes=64)
    out = pool_rows([(1, y), (1, x), (2, x), (2, y)], key=lambda r: r.nbytes)
    assert [(r.nbytes, r.launches) for r in out] == [(64, (1, 2)), (8, (1, 2))]


def test_launch_fields_must_split_the_samples():
    r = _row([1e-5, 2e-5])
    with pytest.raises(ValueError, match="add up"):
        dataclasses.replace(r, launches=(1,), launch_samples=(1,))
    with pytest.raises(ValueError, match="length"):
        dataclasses.replace(r, launches=(1, 2), launch_samples=(2,))
    with pytest.raises(ValueError, match="twice"):
        dataclasses.replace(r, launches=(1, 1), launch_samples=(1, 1))


def test_launch_fields_round_trip_and_old_rows_load_as_one_launch(tmp_path):
    pooled = pool_launches([(1, _row([1e-5, 1.1e-5])), (2, _row([2e-5]))])
    d = new_run_dir(tmp_path, 2)
    w = RunWriter(d, {})
    w.append(pooled)
    w.update(status="complete")
    w.close()
    opened = open_run(d)
    rows, warnings = opened.rows, opened.warnings
    assert rows == [pooled] and not warnings
    header, line = (d / "cases.csv").read_text().splitlines()
    cols = dict(zip(header.split(","), line.split(","), strict=True))
    assert cols["launches"] == "1;2" and cols["launch_samples"] == "2;1"
    old = open_run(REPO / "tests" / "data" / "run-np2").rows
    assert old and all(r.launches == () and r.n_launches == 1 and r.launch_blocks() == [(1, r.samples_s)]
                       for r in old)


def test_each_launch_gets_its_share_of_the_samples():
    cfg = load_config(None, {"launches": 3, "budget_s": 1.5, "max_reps": 1000, "min_reps": 50})
    one = cfg.per_launch()
    assert one.budget_s == pytest.approx(0.5) and one.max_reps == 334 and one.min_reps == 50
    small = load_config(None, {"launches": 5, "max_reps": 100, "min_reps": 50}).per_launch()
    assert small.max_reps == 50  # never below min_reps
    plain = load_config(None, {})
    assert plain.launches == 1 and plain.per_launch() is plain and plain.order == "shuffled" and plain.seed is None


@pytest.mark.parametrize("values, message", [
    ({"launches": 0}, "outside 1..1000"), ({"launches": 2.5}, "expected an integer"),
    ({"order": "random"}, "choose from shuffled, planned"), ({"seed": -1}, "outside"),
])
def test_bad_replication_keys_are_refused(values, message):
    from ccbench.core.errors import UsageError

    with pytest.raises(UsageError, match=message):
        load_config(None, values)


class _OneRank:
    def Get_rank(self):
        return 0

    def bcast(self, value, root=0):
        return value


def test_rounds_of_a_launch_start_with_its_order_then_draw_their_own_from_its_seed():
    from ccbench.measure.session import launch_order, round_orders

    items = [(size, alg) for size in (8, 64, 512) for alg in "abc"]
    block = lambda it: it[0]  # noqa: E731 - the algorithms of one size stay back to back
    order, rec = launch_order(_OneRank(), items, "shuffled", 5, 2, block=block)
    rounds = round_orders(order, rec, 3, block)
    assert len(rounds) == 3 and rounds[0] == order and all(sorted(r) == sorted(items) for r in rounds)
    assert rounds[1] != rounds[0] and rounds[2] != rounds[1]
    for r in rounds:  # every round keeps the blocks whole
        sizes = [size for size, _ in r]
        assert all(sizes[i] == sizes[i - i % 3] for i in range(len(sizes)))
    assert round_orders(order, rec, 3, block) == rounds               # a resumed launch repeats its rounds
    other, rec2 = launch_order(_OneRank(), items, "shuffled", 5, 3, block=block)
    assert round_orders(other, rec2, 3, block)[1] != rounds[1]       # another launch draws other rounds
    planned, prec = launch_order(_OneRank(), items, "planned", 5, 1)
    assert round_orders(planned, prec, 2) == [items, items]
    assert round_orders(order, rec, 1) == [order]


def test_launch_order_is_a_seeded_permutation_per_launch_and_resumes_in_its_own_order():
    from ccbench.measure.session import launch_order

    items = list(range(20))
    first, rec1 = launch_order(_OneRank(), items, "shuffled", 7, 1)
    second, rec2 = launch_order(_OneRank(), items, "shuffled", 7, 2)
    assert rec1 == {"order": "shuffled", "order_seed": 7, "launch": 1} and rec2["order_seed"] == 8
    assert sorted(first) == items and first == [items[i] for i in np.random.default_rng(7).permutation(20)]
    assert first != second and first != items
    again, _ = launch_order(_OneRank(), items, "shuffled", None, 1, stored=rec2)  # a resumed launch: its own seed
    assert again == second
    drawn, rec = launch_order(_OneRank(), items, "shuffled", None, 1)
    assert 0 <= rec["order_seed"] < 2**32 and sorted(drawn) == items
    assert launch_order(_OneRank(), items, "planned", 7, 3) == (items, {"order": "planned", "launch": 3})


def test_a_sweep_s_launches_are_given_every_setting_and_its_binding():
    from ccbench.measure.multilaunch import sweep_replication

    cfg = load_config(None, {"collectives": "allreduce", "algorithms": "native,native:ring", "sizes": "8,64",
                             "launches": 2, "bind": "none", "budget_s": 0.5})
    rep = sweep_replication(cfg, "mpich")
    assert [(k, p.label) for k, p in rep.plan] == [(1, "unforced"), (1, "allreduce-ring"), (2, "unforced"),
                                                   (2, "allreduce-ring")]
    opts = rep.options(rep.plan[1][1])
    assert opts["algorithms"] == "native:ring" and opts["sizes"] == "8,64" and opts["bind"] == "none"
    assert opts["budget_s"] == 0.5 and opts["order"] == "shuffled" and rep.config == cfg.to_dict()
    assert rep.key(_row([1e-5], nbytes=8)) == rep.key(_row([2e-5], nbytes=8)) != rep.key(_row([1e-5], nbytes=64))


def test_merge_parts_pools_rows_of_any_kind_in_the_order_asked(tmp_path):
    """Two launches' runs of workload rows, written in different orders, merged: one row per item with both
    launches' samples, in the replication's order; provenance from the first launch, each launch listed."""
    from ccbench.measure.multilaunch import Part, Replication, merge_parts, replicated
    from ccbench.store.workload_rows import KIND, WORKLOAD_COLUMNS, WorkloadRow

    def wrow(variant, samples):
        x = np.asarray(samples)
        return WorkloadRow(workload="straggler", variant="late", model="-", algorithm=variant, nranks=2,
                           group_ranks=2, dtype="float32", part=0, label="1 KiB", collective="allreduce", ncalls=1,
                           ntensors=0, payload_elems=256, nbytes=1024, samples=x.size, median_s=float(np.median(x)),
                           min_s=float(x.min()), mean_s=float(x.mean()), ci_low_s=float(x.min()),
                           ci_high_s=float(x.max()), baseline_s=1e-5, slowdown=0.5, delay_s=1e-3, delayed_rank=1,
                           samples_s=tuple(float(v) for v in x))

    dest = tmp_path / "run"
    (dest / "parts").mkdir(parents=True)
    results = []
    for launch, names in ((1, ["b", "a"]), (2, ["a", "b"])):
        d = dest / "parts" / f"L{launch}"
        d.mkdir()
        w = RunWriter(d, {"kind": KIND, "workload": "straggler", "nranks": 2, "launch": launch,
                          "order_seed": 40 + launch, "host_note": f"from launch {launch}",
                          "skipped": [{"what": "x", "why": "y"}]}, columns=WORKLOAD_COLUMNS)
        for name in names:
            w.append(wrow(name, [launch * 1e-5, launch * 1.1e-5]))
        w.update(status="complete")
        w.close()
        results.append((launch, Part("all", (), ()), 0, d))
    rep = Replication({"workload": "straggler", "launches": 2}, 2, "shuffled", None, str(tmp_path), replicated(2), [],
                      lambda part: {}, lambda r: r.algorithm, WorkloadRow, WORKLOAD_COLUMNS,
                      lambda r: r.algorithm)
    assert merge_parts(dest, results, rep, ["ccbench", "workload"], 41) == (2, 0)
    opened = open_run(dest, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert [r.algorithm for r in rows] == ["a", "b"] and all(r.launches == (1, 2) for r in rows)
    assert rows[0].launch_blocks() == [(1, (1e-5, 1.1e-5)), (2, (2e-5, 2.2e-5))]
    assert meta["kind"] == KIND and meta["host_note"] == "from launch 1" and meta["order_seed"] == 41
    assert meta["status"] == "complete" and meta["launches"] == 2 and meta["skipped"] == [{"what": "x", "why": "y"}]
    assert [(p["launch"], p["dir"], p["order_seed"], p["cases"]) for p in meta["parts"]] == [
        (1, "parts/L1", 41, 2), (2, "parts/L2", 42, 2)]
    assert "planned_cases" not in meta and "launch" not in meta
    assert (dest / "cases.csv").read_text().splitlines()[0].split(",") == WORKLOAD_COLUMNS


def test_blocked_order_runs_each_block_back_to_back_in_a_random_order():
    from ccbench.measure.session import launch_order

    items = [(size, alg) for size in (8, 64, 512, 4096) for alg in ("native", "ring", "binomial")]
    out, rec = launch_order(_OneRank(), items, "shuffled", 5, 1, block=lambda it: it[0])
    assert sorted(out) == sorted(items) and rec["order_blocks"] is True and rec["order_seed"] == 5
    sizes = [s for s, _ in out]
    assert all(sizes[i] == sizes[i - i % 3] for i in range(len(sizes)))  # each size's algorithms contiguous
    assert sizes[::3] != [8, 64, 512, 4096] or [a for _, a in out[:3]] != ["native", "ring", "binomial"]
    again, _ = launch_order(_OneRank(), items, "shuffled", None, 1, stored=rec, block=lambda it: it[0])
    assert again == out  # reproducible from the recorded seed
    orders = {tuple(a for _, a in launch_order(_OneRank(), items, "shuffled", s, 1, block=lambda it: it[0])[0][:3])
              for s in range(20)}
    assert len(orders) > 1  # the order within a block is drawn too


# -- known answers at the edges of pooling (store.launches) -----------------------------------------


def test_launch_spread_compares_the_two_components_on_the_log_scale():
    # ln values 0, 0.2 | 0.3, 0.5: sigma_w^2 = 0.04 / 2 = 0.02; MSB = 2 (0.15^2 + 0.15^2) = 0.09, n0 = 2:
    # sigma_b^2 = (0.09 - 0.02) / 2 = 0.035 > 0.02: flagged.  0, 0.2 | 0.2, 0.4: sigma_b^2 = 0.01 < 0.02: not
    assert launch_spread([1e-5 * np.exp([0.0, 0.2]), 1e-5 * np.exp([0.3, 0.5])])
    assert not launch_spread([1e-5 * np.exp([0.0, 0.2]), 1e-5 * np.exp([0.2, 0.4])])


def test_launch_spread_needs_two_launches_with_a_within_spread_and_positive_times():
    assert not launch_spread([[1e-5, 1e-5], [1e-5, 1e-5]])            # both components 0: not larger
    assert not launch_spread([[1e-5], [3e-5]])                         # one sample each: no sigma_w to compare
    assert not launch_spread([[1e-5, 0.0], [3e-5, 3.1e-5]])            # a zero time has no logarithm
    assert not launch_spread([[], [1e-5, 1.1e-5]])                     # one launch with samples
    assert launch_spread([[], [1e-5, 1.1e-5], [3e-5, 3.1e-5]])         # an empty launch is left out


def test_two_launches_pool_to_the_geometric_mean_of_their_medians():
    a, b = [1e-5, 1.1e-5, 1.2e-5], [4e-5, 4.1e-5, 4.2e-5]
    pooled = pool_launches([(1, _row(a)), (2, _row(b))])
    assert pooled.median_s == pytest.approx(math.sqrt(1.1e-5 * 4.1e-5), rel=1e-12)
    assert pooled.ci_low_s < pooled.median_s < pooled.ci_high_s
    assert pooled.flags == (LAUNCH_SPREAD,)
    # bandwidths follow the typical time: nbytes / median
    assert pooled.algbw_gbs == pytest.approx(64 / math.sqrt(1.1e-5 * 4.1e-5) / 1e9)
    assert pooled.busbw_gbs == pytest.approx(2 * 64 / math.sqrt(1.1e-5 * 4.1e-5) / 1e9)


def test_pooled_interval_is_the_fixed_seed_two_stage_bootstrap():
    from ccbench.core.replication import hierarchical_bootstrap_ci
    from ccbench.store.launches import BOOTSTRAP_REPLICATES

    rng = np.random.default_rng(3)
    blocks = [1e-5 * (1 + 0.1 * rng.random(20)) * f for f in (1.0, 1.3, 0.9)]
    pooled = pool_launches([(n + 1, _row(b)) for n, b in enumerate(blocks)])
    ci = hierarchical_bootstrap_ci(blocks, n_boot=1000, seed=0)
    assert BOOTSTRAP_REPLICATES == 1000
    assert (pooled.median_s, pooled.ci_low_s, pooled.ci_high_s) == (ci.estimate_s, ci.low_s, ci.high_s)
    assert pool_launches([(n + 1, _row(b)) for n, b in enumerate(blocks)]) == pooled   # the same rows, the same row


def test_pooled_sample_statistics_are_those_of_all_samples():
    # 1..100 us in three launches: p90 (numpy linear) = 90.1, p95 = 95.05, p99 = 99.01;
    # sd (n - 1) = sqrt(100 * 101 / 12)
    x = np.arange(1, 101) * 1e-6
    pooled = pool_launches([(1, _row(x[:30])), (2, _row(x[30:70])), (3, _row(x[70:]))])
    assert pooled.min_s == x[0] and pooled.max_s == x[-1] and pooled.mean_s == pytest.approx(50.5e-6)
    assert pooled.p90_s == pytest.approx(90.1e-6)
    assert pooled.p95_s == pytest.approx(95.05e-6) and pooled.p99_s == pytest.approx(99.01e-6)
    assert pooled.stddev_s == pytest.approx(math.sqrt(100 * 101 / 12) * 1e-6)
    assert pooled.samples == 100 and pooled.launch_samples == (30, 40, 30)
    assert all(type(v) is float for v in pooled.samples_s) and all(type(n) is int for n in pooled.launch_samples)


def test_one_launch_of_one_sample_has_no_standard_deviation():
    r = _row([2e-5])
    pooled = pool_launches([(1, r)])
    assert math.isnan(pooled.stddev_s) and pooled.min_s == pooled.max_s == pooled.mean_s == 2e-5
    assert (pooled.algbw_gbs, pooled.busbw_gbs) == (r.algbw_gbs, r.busbw_gbs)   # one launch: unchanged


def test_a_launch_with_a_zero_time_is_pooled_without_the_log_scale_statistics():
    # a zero time has no logarithm: no two-stage bootstrap, no launch_spread test; the samples still pool
    r1, r2 = _row([1e-5, 1.2e-5, 1.1e-5]), _row([0.0, 3e-5, 3e-5])
    pooled = pool_launches([(2, r2), (1, r1)])
    assert pooled.min_s == 0.0 and pooled.samples == 6 and pooled.launch_samples == (3, 3)
    assert pooled.mean_s == pytest.approx(9.3e-5 / 6) and LAUNCH_SPREAD not in pooled.flags


def test_flags_and_stop_reasons_are_unions_in_launch_order_without_repeats():
    rows = [(1, _row([1e-5, 1.1e-5], flags=("outliers", LAUNCH_SPREAD), stop="budget")),
            (2, _row([3e-5, 3.3e-5], flags=("outliers", "few_samples"), stop="")),
            (3, _row([5e-5, 5.5e-5], stop="budget")),
            (4, _row([7e-5, 7.7e-5], stop="max_reps"))]
    pooled = pool_launches(rows)
    assert pooled.flags == ("outliers", LAUNCH_SPREAD, "few_samples")
    assert pooled.stop_reason == "budget;max_reps"
    assert pooled.nwrong == 0 and pool_launches([(1, _row([1e-5], nwrong=2)), (2, _row([1e-5], nwrong=3))]).nwrong == 5


def test_pool_errors_say_what_is_wrong():
    r = _row([1e-5, 2e-5])
    with pytest.raises(ValueError, match=r"^launch numbers repeat: \[1, 1, 2\]$"):
        pool_launches([(2, r), (1, r), (1, _row([3e-5]))])   # two different rows claim launch 1
    with pytest.raises(ValueError, match="^no rows to pool$"):
        pool_launches([])
    with pytest.raises(ValueError, match="^pool_launches takes rows of one launch each$"):
        pool_launches([(2, r), (1, pool_launches([(1, r)]))])


def _workload_row(samples, **per_launch):
    from ccbench.store.workload_rows import WorkloadRow

    x = np.asarray(samples, dtype=float)
    return WorkloadRow(workload="overlap", variant="v", model="-", algorithm="ring", nranks=2, group_ranks=2,
                       dtype="float32", part=-1, label="step", collective="allreduce", ncalls=1, ntensors=0,
                       payload_elems=256, nbytes=1024, samples=x.size, median_s=float(np.median(x)),
                       min_s=float(x.min()), mean_s=float(x.mean()), ci_low_s=float(x.min()),
                       ci_high_s=float(x.max()), samples_s=tuple(float(v) for v in x), **per_launch)


def test_workload_rows_pool_their_per_launch_measurements_by_the_median():
    rows = [(1, _workload_row([1e-5, 1.1e-5], comm_s=1.0, compute_s=2.0, total_s=3.0, overlap_pct=10.0)),
            (2, _workload_row([2e-5, 2.1e-5], comm_s=5.0, compute_s=4.0, total_s=9.0, overlap_pct=30.0)),
            (3, _workload_row([3e-5, 3.1e-5], comm_s=2.0, compute_s=None, total_s=4.0, overlap_pct=20.0))]
    pooled = pool_launches(rows)
    assert (pooled.comm_s, pooled.total_s, pooled.overlap_pct) == (2.0, 4.0, 20.0)
    assert pooled.compute_s == 3.0                 # the launches that measured it: median of 2.0 and 4.0
    assert pooled.baseline_s is None and pooled.slowdown is None   # measured by none: stays unset
    assert pooled.median_s == pytest.approx(math.exp(np.mean(np.log([1.05e-5, 2.05e-5, 3.05e-5]))))
    assert pooled.min_s == 1e-5 and pooled.mean_s == pytest.approx(np.mean([1e-5, 1.1e-5, 2e-5, 2.1e-5, 3e-5, 3.1e-5]))


def test_osu_per_rank_means_pool_by_the_median_over_launches():
    rows = [(n, dataclasses.replace(_row([t, t * 1.1]), rank_mean_min_s=lo, rank_mean_avg_s=avg, rank_mean_max_s=hi))
            for n, t, lo, avg, hi in ((1, 1e-5, 1.0, 2.0, 3.0), (2, 2e-5, 5.0, 6.0, 9.0), (3, 3e-5, 2.0, 4.0, 4.0))]
    pooled = pool_launches(rows)
    assert (pooled.rank_mean_min_s, pooled.rank_mean_avg_s, pooled.rank_mean_max_s) == (2.0, 4.0, 4.0)
    assert pool_launches([(1, _row([1e-5])), (2, _row([2e-5]))]).rank_mean_avg_s is None
