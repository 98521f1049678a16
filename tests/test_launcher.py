"""ccbench.measure.launcher.run_job: a job that opens a run and dies leaves it marked failed; a clean one does not."""

import json
import os
import sys

from ccbench.measure.launcher import run_job

OPEN_RUN = ("import os, sys; from ccbench.store.results import RunWriter, new_run_dir; "
            "RunWriter(new_run_dir(sys.argv[1], 1), {{}}); {end}")


def test_a_job_that_dies_leaves_its_run_failed(tmp_path):
    job = run_job([sys.executable, "-c", OPEN_RUN.format(end="os._exit(3)"), str(tmp_path)], dict(os.environ))
    assert job.code == 3 and job.marked_failed and job.why == "exit code 3"
    assert job.run_dir is not None and job.run_dir.parent == tmp_path
    meta = json.loads((job.run_dir / "run.json").read_text())
    assert meta["status"] == "failed" and "a rank crashed" in meta["failure"] and meta["finished_cases"] == 0


def test_a_job_that_ends_well_is_left_alone(tmp_path):
    job = run_job([sys.executable, "-c", OPEN_RUN.format(end="sys.exit(0)"), str(tmp_path)], dict(os.environ))
    assert job.code == 0 and not job.marked_failed and job.run_dir is not None
    assert json.loads((job.run_dir / "run.json").read_text())["status"] == "running"


def test_a_job_that_opens_no_run(tmp_path):
    job = run_job([sys.executable, "-c", "raise SystemExit(2)"], dict(os.environ))
    assert job.code == 2 and job.run_dir is None and not job.marked_failed
