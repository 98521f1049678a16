"""``ccbench doctor`` end to end: it starts its ranks, stores a run, names a slowed rank with exit code 4 (one launch
and several merged), ends with 0 where nobody is out of line; ``show``, ``report`` and ``compare`` read its runs;
bad input is one line and writes nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

# --allow-load 1: these check the command's plumbing, not the decision, and must not depend on the machine's load
QUICK = ["-s", "8", "--warmup", "1", "--min-reps", "5", "--max-reps", "20", "--budget", "0.3", "--oversubscribe",
         "--no-show", "--allow-load", "1"]


def _ccbench(cwd, *args, env=None, timeout=240):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def _runs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if (p / "run.json").is_file())


def test_a_slowed_rank_is_named_stored_shown_reported_and_compared(tmp_path):
    slow = {"CCBENCH_FAULT": "slow:2:doctor:2ms"}
    r = _ccbench(tmp_path, "doctor", "--launch", "3", *QUICK, "--results-dir", "one", env=slow)
    assert r.returncode == 4, r.stderr
    (one,) = _runs(tmp_path / "one")
    meta = json.loads((one / "run.json").read_text())
    assert meta["kind"] == "doctor" and meta["status"] == "complete" and meta["nranks"] == 3
    host = meta["topology"]["node_names"][0]
    assert r.stdout.strip().splitlines()[-1].startswith(f"suspects: rank {host}:2 (")
    # two launches merged into one run: the merged run is judged, by the process that started them
    r = _ccbench(tmp_path, "doctor", "--launch", "3", *QUICK, "--launches", "2", "--results-dir", "two", env=slow)
    assert r.returncode == 4, r.stderr
    (two,) = _runs(tmp_path / "two")
    assert f"suspects: rank {host}:2 (" in r.stdout.strip().splitlines()[-1]
    # reading a diagnosis: show ends with its answer (exit 0: reading is not diagnosing), report writes suspects.json
    shown = _ccbench(tmp_path, "show", str(two))
    assert shown.returncode == 0 and shown.stdout.strip().splitlines()[-1].startswith(f"suspects: rank {host}:2")
    assert "confirm " in shown.stdout and "diagnosis: every measurement" in shown.stdout
    rep = _ccbench(tmp_path, "report", str(two), "--out", "rep")
    assert rep.returncode == 0, rep.stderr
    doc = json.loads((tmp_path / "rep" / "report" / "suspects.json").read_text())
    assert [(s["kind"], s["name"], s["launches"], s["of_launches"]) for s in doc["suspects"]] == \
        [("rank", f"{host}:2", 2, 2)]
    page = (tmp_path / "rep" / "report" / "report.md").read_text()
    assert "## Suspects" in page and "## Every measurement" in page
    assert ("pairs-8.png" in page) == (tmp_path / "rep" / "report" / "pairs-8.png").is_file()
    cmp = _ccbench(tmp_path, "compare", str(one), str(two), "--out", "cmp", "--no-plot")
    assert cmp.returncode == 0, cmp.stderr
    header, *lines = (tmp_path / "cmp" / "compare.csv").read_text().splitlines()
    assert header.startswith("baseline,other,test,subject,nbytes,") and len(lines) == len(
        [x for x in (one / "cases.jsonl").read_text().splitlines() if x.strip()])


def test_nobody_out_of_line_is_exit_code_0(tmp_path):
    """Two ranks: one pair, no peers to compare it with, so nobody can be named whatever the timings."""
    r = _ccbench(tmp_path, "doctor", "--launch", "2", *QUICK, "--results-dir", "r")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("no suspects:")


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    for args, why in ((["--launch", "4", "--groups", "3"], "--groups 3: the 4 ranks cannot be split"),
                      (["--launch", "2", "--exclude", "nohost"], "--exclude nohost: not a host of this run"),
                      (["--launch", "2", "--sizes", "0"], "--sizes: every size must be at least 1 byte"),
                      (["--launch", "2", "--allow-load", "1.5"], "--allow-load: expected a share of the CPU")):
        r = _ccbench(tmp_path, "doctor", *args, *QUICK[2:-2], "--results-dir", "bad")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, (args, r.stderr)
        assert not (tmp_path / "bad").exists()
    r = _ccbench(tmp_path, "doctor", "--launch", "2", *QUICK, "--results-dir", "bad",
                 env={"CCBENCH_FAULT": "slow:0:doctor/5:1ms"})
    assert r.returncode == 2 and "rank 5 does not exist with 2 ranks" in r.stderr and not (tmp_path / "bad").exists()
