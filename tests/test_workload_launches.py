"""Replicated workload runs: K launches of a workload merged into one run (shared with sweeps: measure.multilaunch)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.commands.workload import launch_options, overrides
from ccbench.core.errors import UsageError
from ccbench.measure.multilaunch import Part
from ccbench.measure.workload import plan_schedules, pool_key, workload_replication
from ccbench.measure.workload_config import resolve_workload
from ccbench.store.run import open_run
from ccbench.store.workload_rows import WORKLOAD_COLUMNS, WorkloadRow
from ccbench.workloads.models import load_model

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "tests" / "data" / "mlp-sizes.txt"


def test_each_launch_gets_its_share_of_the_budget_and_steps():
    cfg = resolve_workload("ddp", {"model": str(MLP), "launches": 4, "budget_s": 2.0, "max_reps": 200,
                                   "min_reps": 10})
    one = cfg.per_launch()
    assert one.budget_s == pytest.approx(0.5) and one.max_reps == 50 and one.min_reps == 10 and one.launches == 4
    assert resolve_workload("moe", {"launches": 8, "max_reps": 20, "min_reps": 10}).per_launch().max_reps == 10
    plain = resolve_workload("moe", {})
    assert plain.launches == 1 and plain.seed is None and plain.per_launch() is plain


@pytest.mark.parametrize("values, message", [
    ({"launches": 0}, "outside 1..1000"), ({"launches": 1.5}, "expected an integer"), ({"seed": -3}, "outside"),
])
def test_bad_replication_keys_are_refused(values, message):
    with pytest.raises(UsageError, match=message):
        resolve_workload("straggler", values)


@pytest.mark.parametrize("kind, values", [
    ("ddp", {"model": str(MLP), "algorithms": "native,ring", "first_bucket_mb": 0, "launches": 3, "bind": "core"}),
    ("zero", {"model": "bert-base", "variants": "zero2,ddp_flat", "rs_algorithms": "native,pairwise"}),
    ("moe", {"ep": "2", "tokens": 64, "launches": 2, "seed": 9}),
    ("overlap", {"sizes": "4K,64K", "compute_s": "200us", "test_calls": 3}), ("overlap", {"model": "resnet50"}),
    ("straggler", {"delay_s": "2ms", "algorithms": "all", "delayed_rank": -1, "watchdog_s": 0}),
])
def test_a_launch_s_options_restate_the_configuration(kind, values):
    """What each launch is given on its command line resolves to the run's own configuration."""
    cfg = resolve_workload(kind, values)
    assert resolve_workload(kind, overrides(launch_options(cfg))) == cfg


def _row(variant, algorithm, part, samples=(1e-5, 2e-5)):
    return WorkloadRow(workload="ddp", variant=variant, model="m", algorithm=algorithm, nranks=2, group_ranks=2,
                       dtype="float32", part=part, label="step" if part < 0 else f"bucket {part}",
                       collective="step" if part < 0 else "allreduce", ncalls=1, ntensors=1, payload_elems=4,
                       nbytes=16, samples=len(samples), median_s=min(samples), min_s=min(samples),
                       mean_s=min(samples), ci_low_s=min(samples), ci_high_s=max(samples), samples_s=tuple(samples))


def test_merged_rows_are_pooled_by_identity_and_kept_in_the_plan_s_order():
    cfg = resolve_workload("ddp", {"model": str(MLP), "algorithms": "native,ring", "modes": "bucketed",
                                   "launches": 2})
    rep = workload_replication(cfg, 2, lambda part: {})
    assert rep.plan == [(1, Part("all", (), ())), (2, Part("all", (), ()))] and rep.launches == 2
    assert rep.row_cls is WorkloadRow and rep.columns == WORKLOAD_COLUMNS and rep.order == "shuffled"
    scheds, _ = plan_schedules(cfg, 2, load_model(str(MLP)))
    (variant, native), (_, ring) = [(sch.variant, f"allreduce={algs['allreduce'].name}") for sch, algs in scheds]
    shuffled = [_row(variant, ring, 0), _row(variant, ring, -1), _row(variant, native, -1), _row(variant, native, 0)]
    assert sorted(shuffled, key=rep.sort_key) == [shuffled[2], shuffled[3], shuffled[1], shuffled[0]]
    # each row belongs to its item (the plan's first or second) by its variant and algorithm; a row of no item last
    assert [rep.sort_key(r) for r in shuffled] == [(1, 0), (1, -1), (0, -1), (0, 0)]
    assert rep.sort_key(_row("other", native, -1)) == rep.sort_key(_row(variant, "allreduce=linear", -1)) == (2, -1)
    assert pool_key(shuffled[0]) == pool_key(_row(variant, ring, 0, samples=(3e-5,)))
    assert pool_key(shuffled[0]) != pool_key(shuffled[1])


def test_a_plan_that_cannot_run_is_refused_before_any_launch():
    cfg = resolve_workload("straggler", {"delayed_rank": 5, "launches": 2})
    with pytest.raises(UsageError, match="delayed rank 5 does not exist with 2 ranks"):
        workload_replication(cfg, 2, lambda part: {})


def _workload(cwd, *args, env=None):
    return subprocess.run([sys.executable, "-m", "ccbench", "workload", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def _ddp_args(tmp_path):
    model = tmp_path / "m.txt"
    model.write_text("300 a\n20 a\n5000 b\n")
    return ["ddp", "-m", str(model), "-a", "native,ring", "--bucket-mb", "0.01", "--first-bucket-mb", "0",
            "--warmup", "1", "--min-reps", "2", "--max-reps", "6", "--budget", "0.2", "--results-dir", "res"]


def test_two_launches_of_a_two_rank_ddp_workload_make_one_run(tmp_path):
    r = _workload(tmp_path, *_ddp_args(tmp_path), "--launch", "2", "--launches", "2", "--seed", "11")
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    assert "launch 1/2" in r.stdout and "launch 2/2" in r.stdout and str(run.relative_to(tmp_path)) in r.stdout
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["kind"] == "workload" and meta["workload"] == "ddp" and meta["status"] == "complete"
    assert meta["launches"] == 2 and meta["order"] == "shuffled" and meta["order_seed"] == 11
    assert meta["config"]["launches"] == 2 and meta["config"]["seed"] == 11
    assert [(p["launch"], p["status"], p["order_seed"]) for p in meta["parts"]] == [(1, "complete", 11),
                                                                                    (2, "complete", 12)]
    for p in meta["parts"]:
        opened = open_run(run / p["dir"], kinds=("workload",))
        part_meta, part_rows = opened.meta, opened.rows
        assert part_meta["launch"] == p["launch"] and p["cases"] == len(part_rows) == len(rows)
        assert all(x.samples <= 3 for x in part_rows)  # 1/2 of the 6 steps
    # one row per step and call, each with both launches' samples, in the plan's order
    assert rows and all(x.launches == (1, 2) and sum(x.launch_samples) == x.samples for x in rows)
    assert all(x.ok for x in rows)
    steps = [(x.variant, x.algorithm) for x in rows if x.part == -1]
    assert steps == [("bucketed 0.01 MiB", "allreduce=native"), ("bucketed 0.01 MiB", "allreduce=ring"),
                     ("per_tensor", "allreduce=native"), ("per_tensor", "allreduce=ring")]
    assert len({pool_key(x) for x in rows}) == len(rows)
    assert meta["hardware"]["binding"]["requested"] == "auto"


def test_an_interrupted_replicated_workload_resumes_at_its_launch_and_item(tmp_path):
    """A rank dies before the plan's second item in each launch: the merged run is failed and says how to go
    on; --resume continues each launch's part where it stopped and merges again."""
    args = _ddp_args(tmp_path)
    r = _workload(tmp_path, *args, "--launch", "2", "--launches", "2", env={"CCBENCH_FAULT": "exit:1:ddp:2"})
    assert r.returncode == 1
    (run,) = (tmp_path / "res").iterdir()
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    kept = [ln for ln in errors if " kept in " in ln]  # the launcher's lines (rank 0 may say first that rank 1 ended)
    assert kept and all(f"continue the whole run with --resume {run.relative_to(tmp_path)}" in ln for ln in kept)
    assert all(ln in kept or "rank 1 (process" in ln for ln in errors), errors
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "failed" and [p["status"] for p in meta["parts"]] == ["failed", "failed"]
    before = {p["launch"]: p["cases"] for p in meta["parts"]}
    assert sum(before.values()) < 2 * 14  # 4 steps of 2 or 3 calls: 14 rows a launch, not all of them there
    r = _workload(tmp_path, "ddp", "--resume", str(run), "--budget", "1", "--launch", "2")
    assert r.returncode == 2 and "differs in budget_s" in r.stderr  # refused, untouched
    r = _workload(tmp_path, "ddp", "--resume", str(run), "--launch", "2", "--no-show")
    assert r.returncode == 0, r.stderr
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and "failure" not in meta
    assert [(p["launch"], p["status"], p["cases"]) for p in meta["parts"]] == [(1, "complete", 14),
                                                                               (2, "complete", 14)]
    for p in meta["parts"]:
        part_meta = open_run(run / p["dir"], kinds=("workload",)).meta
        assert part_meta["resumed"][0]["finished_before"] == before[p["launch"]]
    assert len(rows) == 14 and all(x.launches == (1, 2) and x.ok for x in rows)


def test_replicated_launches_need_launch(tmp_path):
    r = _workload(tmp_path, "moe", "--launches", "3")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ccbench: error: launches = 3 needs one job per launch: start it with ccbench workload moe ... "
        "--launch N --launches 3 (it merges them into one run)"]
    r = _workload(tmp_path, "moe", "--launch", "2", "--launch-index", "1")
    assert r.returncode == 2 and "--launch-index is set by --launch" in r.stderr
    toml = tmp_path / "w.toml"
    toml.write_text("launches = 2\ntokens = 16\n")
    r = _workload(tmp_path, "moe", "-c", str(toml))
    assert r.returncode == 2 and "launches = 2 needs one job per launch" in r.stderr
    assert json.loads(json.dumps(resolve_workload("moe", {"launches": 2}).to_dict()))["launches"] == 2


def test_each_round_gets_its_share_of_a_launch_s_steps():
    """Rounds split what a launch has, after launches split the run's (min_reps rounded up, never above max_reps)."""
    cfg = resolve_workload("ddp", {"model": str(MLP), "launches": 2, "rounds": 3, "budget_s": 3.0, "max_reps": 20,
                                   "min_reps": 5})
    one = cfg.per_launch().per_round()
    assert one.budget_s == pytest.approx(0.5) and (one.min_reps, one.max_reps) == (2, 4) and one.rounds == 3
    assert resolve_workload("moe", {"rounds": 4, "min_reps": 10, "max_reps": 10}).per_round().max_reps == 3
    plain = resolve_workload("moe", {})
    assert plain.rounds == 1 and plain.per_round() is plain
    for bad, message in (({"rounds": 0}, "outside 1..100"), ({"rounds": 101}, "outside 1..100")):
        with pytest.raises(UsageError, match=message):
            resolve_workload("straggler", bad)
    assert resolve_workload("ddp", overrides(launch_options(cfg))) == cfg  # a launch restates its rounds


def test_rounds_of_a_workload_visit_every_item_and_pool_their_steps(tmp_path):
    """--rounds 2: every item twice, each round in its own seeded order, one row per step and call with the
    samples of both visits.  A rank that dies in the first round leaves no row (no item had both visits);
    --resume measures every item again, both rounds."""
    args = [*_ddp_args(tmp_path), "--rounds", "2", "--seed", "5", "--launch", "2", "--no-show"]
    r = _workload(tmp_path, *args, env={"CCBENCH_FAULT": "exit:1:ddp:3"})
    assert r.returncode != 0
    (run,) = (tmp_path / "res").iterdir()
    assert open_run(run, kinds=("workload",)).rows == [] and "(round 2/2)" not in r.stdout
    r = _workload(tmp_path, "ddp", "--resume", str(run), "--launch", "2", "--no-show")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("(round 1/2): done") == 4 and r.stdout.count("step: median") == 4
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and meta["resumed"][0]["status_before"] == "failed"
    assert meta["rounds"] == 2 and meta["order"] == "shuffled" and meta["config"]["rounds"] == 2
    steps = [x for x in rows if x.part == -1]
    assert len(steps) == 4 and all(x.ok for x in rows)
    # each visit takes at least ceil(2 / 2) = 1 and at most ceil(6 / 2) = 3 steps; a row has both visits'
    assert all(2 <= x.samples <= 6 and len(x.samples_s) == x.samples for x in rows)


@pytest.mark.parametrize("value, caps", [
    (25, (25.0,)), ("5,25", (5.0, 25.0)), ([100, 5], (100.0, 5.0)), ("25,25", (25.0,)), ("0.5", (0.5,)),
])
def test_bucket_caps(value, caps):
    assert resolve_workload("ddp", {"bucket_mb": value}).bucket_mb == caps


@pytest.mark.parametrize("value, message", [
    (0, "outside"), ("5,x", "expected caps in MiB such as 25 or 5,25"), ([], "empty list"), ("1e7", "outside"),
])
def test_bad_bucket_caps_are_refused(value, message):
    with pytest.raises(UsageError, match=message):
        resolve_workload("ddp", {"bucket_mb": value})


def test_a_run_of_several_bucket_caps_names_the_fastest_bucketing(tmp_path):
    """--bucket-mb 0.005,0.02: a bucketed variant per cap beside per_tensor, and per algorithm the fastest of them
    against its runner-up -- the PyTorch user's "which bucket size is best?" in one run."""
    args = ["ddp", "-m", str(MLP), "-a", "native", "--bucket-mb", "0.005,0.02", "--first-bucket-mb", "0",
            "--warmup", "1", "--min-reps", "2", "--max-reps", "4", "--budget", "0.1", "--results-dir", "res",
            "--launch", "2"]
    r = _workload(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    rows = open_run(run, kinds=("workload",)).rows
    assert [x.variant for x in rows if x.part == -1] == ["bucketed 0.005 MiB", "bucketed 0.02 MiB", "per_tensor"]
    out = r.stdout.splitlines()
    at = next(i for i, ln in enumerate(out) if ln.startswith("fastest bucketing per algorithm"))
    line = next(ln for ln in out[at:] if "allreduce=native" in ln)
    fastest = min((x for x in rows if x.part == -1), key=lambda x: x.median_s).variant
    assert line.split("│")[2].strip() == fastest  # the step with the smallest stored median, named
