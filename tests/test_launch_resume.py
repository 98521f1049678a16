"""A run of several launches stopped part-way is continued with --resume at the launch and case where it stopped."""

import json
import os
import subprocess
import sys
from pathlib import Path

from runfiles import tree_state

from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]


def _launch(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", *args, "--no-show"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)


def test_resume_continues_every_unfinished_launch_and_keeps_finished_ones(tmp_path):
    env = dict(os.environ, CCBENCH_FAULT="exit:1:allreduce/native:64")  # every launch dies at 64 B
    r = _launch("-C", "allreduce", "-s", "8:256", "--launches", "2", "--budget", "0.05", "--max-reps", "20",
                "--seed", "11", "--results-dir", str(tmp_path), env=env)
    assert r.returncode != 0
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and meta["order_seed"] == 11 and meta["launches"] == 2
    assert [p["launch"] for p in meta["parts"]] == [1, 2] and all(p["status"] == "failed" for p in meta["parts"])
    before = open_run(run).rows
    assert 64 not in {x.nbytes for x in before}

    r = _launch("--resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("continuing") == 2
    opened = open_run(run)
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and len(meta["parts"]) == 2
    assert sorted(x.nbytes for x in rows) == [8, 16, 32, 64, 128, 256]
    assert all(x.launches == (1, 2) and sum(x.launch_samples) == x.samples for x in rows)
    # each launch kept its own recorded order (seed + launch - 1), resumed where it stopped
    parts = {p["launch"]: p for p in meta["parts"]}
    assert parts[1]["order_seed"] == 11 and parts[2]["order_seed"] == 12
    # a finished run resumed again: nothing to do, and nothing is written (run.json was rewritten at e066e41)
    before = tree_state(run)
    r = _launch("--resume", str(run))
    assert r.returncode == 0 and f"{run} is complete: nothing to resume" in r.stdout
    assert tree_state(run) == before and open_run(run).rows == rows


def test_run_refuses_launches_without_launch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "run", "--launches", "3", "--results-dir", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and "ccbench launch -n N --launches 3" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


def test_a_run_stored_before_the_replication_keys_still_resumes(tmp_path):
    """A run whose stored configuration predates launches/order/seed/bind: those keys take their defaults."""
    import shutil

    run = tmp_path / "old"
    shutil.copytree(REPO / "tests" / "data" / "run-np2", run)
    meta = json.loads((run / "run.json").read_text())
    assert not {"launches", "order", "seed", "bind"} & set(meta["config"])
    meta["status"] = "interrupted"  # as if stopped after its last case: the old configuration must still resume
    (run / "run.json").write_text(json.dumps(meta))
    before = open_run(run).rows
    r = _launch("--resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    assert open_run(run).rows == before  # every case was finished: nothing added, nothing lost
    assert open_run(run).meta["status"] == "complete"


def test_rounds_reach_every_launch_and_an_interrupted_launch_measures_its_unfinished_cases_again(tmp_path):
    """--rounds 2 --launches 2: a launch that dies in its first round has no case whose every round finished,
    so it stores none; --resume measures them again, both rounds, and every launch's rows have both rounds'
    samples (each visit at least ceil(min_reps / 2))."""
    env = dict(os.environ, CCBENCH_FAULT="exit:1:allreduce/native:64")
    args = ("-C", "allreduce", "-a", "native,ring", "-s", "8,64", "--rounds", "2", "--min-reps", "6",
            "--max-reps", "6", "--budget", "0.05", "--seed", "3")
    r = _launch(*args, "--launches", "2", "--results-dir", str(tmp_path), env=env)
    assert r.returncode != 0
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and meta["config"]["rounds"] == 2
    assert open_run(run).rows == []  # nothing finished both rounds before 64 B's first visit
    r = _launch("--resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    opened = open_run(run)
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and len(rows) == 4
    assert all(x.launches == (1, 2) and x.launch_samples == (6, 6) and x.ok for x in rows)  # 3 + 3 per launch
    for p in meta["parts"]:
        part = json.loads((run / p["dir"] / "run.json").read_text())
        assert part["config"]["rounds"] == 2 and part["rounds"] == 2 and part["config"]["min_reps"] == 6


def test_resume_plans_what_all_stood_for_when_the_run_was_planned(tmp_path):
    """-a all is stored as the algorithms it meant (run.json all_algorithms): a resumed run measures those, not
    what the registry holds since, and says so of one it no longer has."""
    env = dict(os.environ, CCBENCH_FAULT="exit:1:allreduce/ring:8")
    r = _launch("-C", "allreduce", "-a", "all", "-s", "8", "--budget", "0.02", "--min-reps", "5", "--max-reps", "10",
                "--results-dir", str(tmp_path), env=env)
    assert r.returncode != 0
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    today = meta["all_algorithms"]["allreduce"]
    assert {"native", "ring", "rabenseifner"} <= set(today) and not any("persistent" in a for a in today)
    meta["all_algorithms"] = {"allreduce": ["native", "ring", "linear", "retired"]}  # as planned by an older ccbench
    (run / "run.json").write_text(json.dumps(meta))
    before = {x.algorithm for x in open_run(run).rows}  # what finished before the fault (kept, whatever it was)
    assert "ring" not in before
    r = _launch("--resume", str(run))
    assert r.returncode == 0, r.stderr[-2000:]
    opened = open_run(run)
    after = {x.algorithm for x in opened.rows}
    assert {"native", "ring", "linear"} <= after and after - before <= {"native", "ring", "linear"}
    assert {"what": "allreduce/retired", "why": "planned by all, but not in this ccbench"} in opened.meta["skipped"]
    assert opened.meta["all_algorithms"] == {"allreduce": ["native", "ring", "linear", "retired"]}
