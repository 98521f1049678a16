"""OSU/IMB-comparable sampling end to end: --timing batched:K, -i (a fixed count), -x (untimed calls)."""

import subprocess
import sys
from pathlib import Path

from ccbench.store.run import load_run

REPO = Path(__file__).resolve().parents[1]


def test_batched_fixed_count_is_recorded_per_row_and_shown(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce,bcast", "-s", "8,4K",
                        "--timing", "batched:4", "-i", "12", "-x", "2", "--launches", "2", "--results-dir",
                        str(tmp_path), "--no-show"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta, rows, _ = load_run(run)
    assert meta["config"]["timing"] == "batched:4" and meta["config"]["iterations"] == 12
    assert meta["config"]["warmup"] == 2
    # 12 samples split over 2 launches: 6 each, stopped by the count, every row batched
    assert rows and all(x.samples == 12 and x.launch_samples == (6, 6) and x.timing == "batched:4"
                        and x.stop_reason == "iterations" for x in rows)
    shown = subprocess.run([sys.executable, "-m", "ccbench", "show", str(run)], capture_output=True, text=True,
                           cwd=REPO, timeout=60, env={"COLUMNS": "250", "PATH": ""})
    assert "timing batched:4: each sample is 4 back-to-back calls" in shown.stdout
    assert "12 samples per case, fixed (OSU's -i), after 2 untimed calls (-x)" in shown.stdout


def test_bad_timing_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "--timing", "batched:zero",
                        "--results-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "timing" in r.stderr
    assert not list(tmp_path.iterdir())
