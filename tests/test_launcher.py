"""ccbench.measure.launcher.run_job: a job that opens a run and dies leaves it marked failed; a clean one does not."""

import json
import os
import subprocess
import sys

import pytest

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


@pytest.mark.parametrize("env, refused", [
    ({}, True), ({"PMI_RANK": ""}, True), ({"OMPI_COMM_WORLD_RANK": "0"}, True),  # a rank variable alone is not one
    ({"PMI_RANK": "0"}, False), ({"OMPI_COMM_WORLD_SIZE": "2"}, False), ({"SLURM_PROCID": "0"}, False),
    ({"PMIX_RANK": "1"}, False), ({"CCBENCH_LAUNCHED": "1"}, False),
])
def test_a_measuring_command_needs_a_launcher(env, refused):
    from ccbench.core.errors import UsageError
    from ccbench.measure.launcher import require_launcher

    if refused:
        with pytest.raises(UsageError, match="no MPI launcher started this: start it so"):
            require_launcher("start it so", env)
    else:
        require_launcher("start it so", env)


@pytest.mark.parametrize("argv", [["run", "-C", "allreduce", "-s", "8"], ["workload", "straggler", "-s", "1K"]])
def test_run_without_a_launcher_says_how_to_start_it_and_writes_nothing(tmp_path, argv):
    from ccbench.measure.launcher import LAUNCHER_VARS

    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    r = subprocess.run([sys.executable, "-m", "ccbench", *argv, "--results-dir", "res"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no MPI launcher started this" in r.stderr
    assert ("ccbench launch -n N" if argv[0] == "run" else "add --launch N") in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("requested, kw, env, expected", [
    (None, {}, {}, (2, "one rank per usable core here (2)")),
    (2, {}, {}, (2, "-n")),
    (1, {}, {}, (1, "-n")),
    (None, {"stored": 2}, {}, (2, "the run's own rank count")),
    (None, {}, {"SLURM_NTASKS": "3", "SLURM_JOB_ID": "7"}, (3, "the Slurm allocation's tasks")),
    (3, {"oversubscribe": True}, {}, (3, "-n")),
    (8, {}, {"SLURM_JOB_NUM_NODES": "4"}, (8, "-n")),                 # 2 a node on 4 nodes
    (8, {"launcher_args": ["-f", "hosts"]}, {}, (8, "-n")),           # placed by the user's host file
    (8, {"launcher_args": ["--hostfile=hosts"]}, {}, (8, "-n")),
    (3, {}, {}, "3 ranks on the 2 usable cores of this node would measure the scheduler"),
    (3, {"launcher_args": ["-v"]}, {}, "3 ranks on the 2 usable cores"),  # an option that places nothing
    (None, {"stored": 4}, {}, "use -n 2 or fewer (or leave -n out), or add --oversubscribe"),
    (3, {"stored": 4}, {}, "the run has 4 ranks, -n asks for 3: give -n 4 to resume it"),
    (3, {"option": "--launch"}, {}, "use --launch 2 or fewer, or add --oversubscribe"),
])
def test_the_rank_count_of_a_job_ccbench_starts(requested, kw, env, expected):
    from ccbench.core.errors import UsageError
    from ccbench.measure.launcher import rank_count

    if isinstance(expected, str):
        with pytest.raises(UsageError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            rank_count(requested, env=env, cores=2, **kw)
    else:
        assert rank_count(requested, env=env, cores=2, **kw) == expected


def test_launch_without_n_starts_a_rank_per_core_and_resume_takes_the_run_s_count(tmp_path):
    from ccbench.measure.provenance import own_cores

    args = [sys.executable, "-m", "ccbench", "launch", "-C", "barrier", "-s", "8", "--min-reps", "2", "--max-reps",
            "3", "--results-dir", "res", "--no-show"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cores = own_cores()
    assert r.stdout.startswith(f"starting {cores} ranks: one rank per usable core here ({cores})\n")
    (run,) = (tmp_path / "res").iterdir()
    assert json.loads((run / "run.json").read_text())["nranks"] == cores
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(meta, status="interrupted")))  # as a stopped run would be
    r = subprocess.run(args[:4] + ["--resume", str(run), "-n", str(cores + 1), "--oversubscribe"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and f"the run has {cores} ranks, -n asks for {cores + 1}" in r.stderr
    r = subprocess.run(args[:4] + ["--resume", str(run), "--no-show"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"starting {cores} ranks: the run's own rank count\n")
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_dash_a_all_says_what_it_chose_and_what_it_left_out(tmp_path):
    """-a all is every hand-written algorithm and native; the library's forced variants and the persistent forms are
    left out, and the first line says how many and how to add them; with native:all beside it no variant is."""
    import os
    import subprocess
    import sys

    def first_line(algorithms):
        r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-a", algorithms,
                            "-s", "8", "-i", "2", "-x", "0", "--results-dir", "res", "--no-show"],
                           capture_output=True, text=True, timeout=240, cwd=tmp_path,
                           env={**os.environ, "CCBENCH_TERMINAL": "0"})
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()[1]  # after "starting 2 ranks (-n 2)..."

    line = first_line("all")
    assert line.startswith("-a all: 8 algorithms over 1 collective(s)")
    assert "forced variants of MPICH's own algorithms left out (add native:all" in line
    assert "the persistent forms left out (name them: native-persistent, ring-persistent); " in line
    assert line.endswith("the non-blocking forms left out (name them: native-nonblocking, ring-nonblocking)")
    both = first_line("all,native:all,native-persistent,ring-nonblocking")
    assert "forced variants" not in both and "(name them: ring-persistent); " in both
    assert both.endswith("(name them: native-nonblocking)")
