"""OSU/IMB-comparable sampling end to end: --timing batched:K, -i (a fixed count), -x (untimed calls), --loop."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]


def test_batched_fixed_count_is_recorded_per_row_and_shown(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce,bcast", "-s", "8,4K",
                        "--timing", "batched:4", "-i", "12", "-x", "2", "--launches", "2", "--results-dir",
                        str(tmp_path), "--no-show"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    run_ = open_run(run)
    meta, rows = run_.meta, run_.rows
    assert meta["config"]["timing"] == "batched:4" and meta["config"]["iterations"] == 12
    assert meta["config"]["warmup"] == 2
    # 12 samples split over 2 launches: 6 each, stopped by the count, every row batched
    assert rows and all(x.samples == 12 and x.launch_samples == (6, 6) and x.timing == "batched:4"
                        and x.stop_reason == "iterations" for x in rows)
    shown = subprocess.run([sys.executable, "-m", "ccbench", "show", str(run)], capture_output=True, text=True,
                           cwd=REPO, timeout=60, env={"COLUMNS": "250", "PATH": ""})
    text = " ".join(shown.stdout.split())  # the sampling line wraps at the terminal's width
    assert "timing batched:4: each sample is 4 back-to-back calls" in text
    assert "12 samples per case, fixed (OSU's -i), after 2 untimed calls (-x)" in text


def test_bad_timing_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "--timing", "batched:zero",
                        "--results-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "timing" in r.stderr
    assert not list(tmp_path.iterdir())


def _mpicc():
    from ccbench.measure.compiled import find_mpicc

    return find_mpicc()


def test_compiled_loop_times_the_native_cases_and_says_so(tmp_path):
    if _mpicc() is None:
        pytest.skip("no MPI compiler wrapper (mpicc) here")
    env = dict(os.environ, CCBENCH_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-a", "native,ring",
                        "-s", "8,4K", "--loop", "compiled", "--timing", "batched:2", "-i", "6", "--results-dir",
                        str(tmp_path / "runs"), "--no-show"], capture_output=True, text=True, cwd=REPO, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    run_ = open_run(run)
    meta, rows = run_.meta, run_.rows
    assert meta["config"]["loop"] == "compiled" and meta["loop"]["used"] == "compiled"
    # the library's own collective through the C loop, the hand-written ring in Python
    assert sorted((x.algorithm, x.loop) for x in rows) == [("native", "compiled")] * 2 + [("ring", "python")] * 2
    assert all(x.ok and x.samples == 6 and x.timing == "batched:2" for x in rows)
    assert "loop" in (run / "cases.csv").read_text().splitlines()[0].split(",")


def test_loop_compiled_without_a_compiler_is_one_line_and_auto_falls_back(tmp_path):
    env = dict(os.environ, MPICC=str(tmp_path / "no-mpicc"), CCBENCH_CACHE_DIR=str(tmp_path / "cache"))
    args = [sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-s", "8", "-i", "3",
            "--results-dir", str(tmp_path / "runs"), "--no-show", "--loop"]
    r = subprocess.run(args + ["compiled"], capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--loop compiled" in r.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    r = subprocess.run(args + ["auto"], capture_output=True, text=True, cwd=REPO, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [ln for ln in r.stderr.splitlines() if "--loop auto" in ln] == [
        "ccbench: note: --loop auto: timing in Python (the compiled loop needs an MPI compiler wrapper (mpicc): "
        "none found (set MPICC, or put the MPI's bin directory on the PATH))"]
    (run,) = [d for d in (tmp_path / "runs").iterdir() if d.is_dir()]
    run_ = open_run(run)
    meta, rows = run_.meta, run_.rows
    assert meta["loop"]["requested"] == "auto" and meta["loop"]["used"] == "python" and "mpicc" in meta["loop"]["why"]
    assert rows and all(x.loop == "python" for x in rows)
