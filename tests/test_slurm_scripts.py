"""The Slurm batch scripts (slurm/*.sbatch) outside Slurm: without a flag they say how to submit them; with
--check they check their options and environment and print the command the job would run, without running
anything (docs/slurm.md).  Inside Slurm they run as before (tests/slurm/ci_slurm.sh submits them to a real
Slurm); here a stand-in ``ccbench`` shows the command a job would start.

Each script runs under bash in a subprocess with a small environment: no SLURM_* variables, a PATH of the
tools the scripts use, a stand-in ``srun`` that lists PMI plugins, and, when this Python is a virtualenv's,
CCBENCH_VENV naming it.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASH = shutil.which("bash") or "/bin/bash"
SCRIPTS = ("sweep", "multinode", "scaling")
#: the task counts of each script's #SBATCH header, and the P of each scaling step
RANKS = {"sweep": [4], "multinode": [16], "scaling": [2, 4, 8]}
TOOLS = ("sed", "dirname", "timeout", "tr", "cat", "env", "python3")
SRUN_LIST = (r"printf 'MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\n"
             r"specific pmix plugin versions available: pmix_v4\n' >&2")  # srun --mpi=list writes on stderr
VENV = Path(sys.prefix) if sys.prefix != sys.base_prefix and (Path(sys.prefix) / "bin" / "activate").is_file() \
    else None
CCBENCH = shutil.which("ccbench", path=str(VENV / "bin")) if VENV else shutil.which("ccbench")
needs_ccbench = pytest.mark.skipif(CCBENCH is None, reason="no ccbench command to check with")


def _stub(path: Path, body: str) -> None:
    path.unlink(missing_ok=True)  # never write through a link to a real tool
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def bindir(tmp_path) -> Path:
    """The tools the scripts use (links to the real ones) and a stand-in srun; ccbench from CCBENCH_VENV, or
    from beside this Python when it is not a virtualenv's."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in TOOLS:
        if real := shutil.which(tool):
            (d / tool).symlink_to(real)
    _stub(d / "srun", f'[ "$1" = --mpi=list ] && {{ {SRUN_LIST}; exit 0; }}\necho "srun: not here" >&2; exit 1')
    if CCBENCH and not VENV:
        (d / "ccbench").symlink_to(CCBENCH)
    return d


def run(script: str, bindir: Path, tmp_path: Path, *args: str, venv: bool = True, **knobs: str):
    """(exit code, stdout, stderr) of `bash slurm/SCRIPT.sbatch ARGS` in the checkout, outside Slurm."""
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path), "LC_ALL": "C",
           "CCBENCH_RESULTS": str(tmp_path / "results")}
    if venv and VENV:
        env["CCBENCH_VENV"] = str(VENV)
    env.update(knobs)
    r = subprocess.run([BASH, f"slurm/{script}.sbatch", *args], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=120)
    assert "unbound variable" not in r.stderr, r.stderr
    return r.returncode, r.stdout, r.stderr


def launch_lines(script: str, results: str, mpi: str = "pmi2", extra: str = "", jobid: str = "<ID>",
                 ranks: list[int] | None = None) -> list[str]:
    """The `ccbench launch` lines the job runs (at the ranks of the script's #SBATCH header unless given)."""
    return [f"ccbench launch -n {p} --launcher srun --config configs/quick.toml --results-dir {results} "
            f"--tag job{jobid}{f'_P{p}' if script == 'scaling' else ''} {extra + ' ' if extra else ''}"
            f"-- --mpi={mpi} --kill-on-bad-exit=1" for p in ranks or RANKS[script]]


def one_problem(code: int, out: str, err: str) -> str:
    """The one line a failed check printed on stderr (exit code 2, no command shown)."""
    assert code == 2, out + err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ccbench: "), err
    assert "ccbench launch" not in out and "check failed" in out, out
    return lines[0]


# -- outside Slurm, no flag: how to submit it -----------------------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS)
def test_outside_slurm_it_says_how_to_submit_and_check_it(script, bindir, tmp_path):
    code, out, err = run(script, bindir, tmp_path)
    assert code == 2 and not out, out
    assert err.splitlines() == [f"ccbench: slurm/{script}.sbatch is a Slurm batch script: submit it with "
                                f"`sbatch slurm/{script}.sbatch`; check it here first with "
                                f"`bash slurm/{script}.sbatch --check`"]
    assert not (tmp_path / "results").exists()


def test_an_sbatch_option_after_the_script_is_refused(bindir, tmp_path):
    code, out, err = run("sweep", bindir, tmp_path, "--check", "-n", "16")
    assert code == 2 and not out
    assert err.splitlines() == ["ccbench: unknown argument '-n': the script takes only --check; sbatch options go "
                                "before the script's name (sbatch -n 8 SCRIPT)"]


def test_help_prints_the_header(bindir, tmp_path):
    code, out, _ = run("sweep", bindir, tmp_path, "--help")
    assert code == 0 and out.startswith("ccbench: a single-node sweep as a Slurm batch job.\n")
    assert "bash slurm/sweep.sbatch --check" in out and "CCBENCH_EXTRA_ARGS" in out and "#SBATCH --ntasks" not in out


# -- --check with a good environment: the command it would run ------------------------------------------------


@needs_ccbench
@pytest.mark.parametrize("script", SCRIPTS)
def test_check_prints_the_command_and_runs_nothing(script, bindir, tmp_path):
    code, out, err = run(script, bindir, tmp_path, "--check")
    assert code == 0 and not err, out + err
    lines = out.splitlines()
    assert lines[0] == f"ccbench: checking slurm/{script}.sbatch outside Slurm (nothing is submitted or run)"
    at = lines.index("ccbench: the job would run:")
    assert [ln.strip() for ln in lines[at + 1:at + 1 + len(RANKS[script])]] == \
        launch_lines(script, str(tmp_path / "results"))
    assert lines[-2:] == ["  (<ID>: the job id Slurm gives it)",
                          f"ccbench: check passed; submit it with `sbatch slurm/{script}.sbatch`"]
    # where each value comes from
    ranks = {"sweep": "4 (#SBATCH --ntasks=4 in slurm/sweep.sbatch; sbatch -n N overrides it)",
             "multinode": "16 (#SBATCH --nodes=2 --ntasks-per-node=8 in slurm/multinode.sbatch; sbatch -N and "
                          "--ntasks-per-node override them)",
             "scaling": "8 (#SBATCH --ntasks=8 in slurm/scaling.sbatch; sbatch -n N overrides it)"}[script]
    assert f"  ranks     {ranks}" in lines
    assert "  srun      --mpi=pmi2 (default; CCBENCH_SRUN_MPI sets it)" in lines
    assert "  config    configs/quick.toml (default; CCBENCH_CONFIG sets it)" in lines
    cases = next(ln for ln in lines if ln.startswith("  cases     "))
    assert re.findall(r"\d+ at (\d+) ranks", cases) == [str(p) for p in RANKS[script]]
    if script == "scaling":
        assert "  steps     P = 2 4 8 (the smallest: default; CCBENCH_NPMIN sets it)" in lines
    assert not (tmp_path / "results").exists()


@needs_ccbench
def test_check_takes_the_knobs(bindir, tmp_path):
    code, out, err = run("scaling", bindir, tmp_path, "--check", CCBENCH_SRUN_MPI="pmix", CCBENCH_NPMIN="4",
                         CCBENCH_EXTRA_ARGS="-C allreduce,bcast -s 8:1K --budget 0.05")
    assert code == 0 and not err, out + err
    extra = "-C allreduce,bcast -s 8:1K --budget 0.05"
    want = launch_lines("scaling", str(tmp_path / "results"), mpi="pmix", extra=extra, ranks=[4, 8])
    assert [ln.strip() for ln in out.splitlines() if ln.startswith("  ccbench launch")] == want
    assert f"  extra     {extra} (CCBENCH_EXTRA_ARGS)" in out.splitlines()
    assert "  srun      --mpi=pmix (CCBENCH_SRUN_MPI)" in out.splitlines()


@needs_ccbench
def test_check_inside_a_job_uses_the_allocation_and_ends(bindir, tmp_path):
    # `sbatch slurm/sweep.sbatch --check`: the job's own task count and id, and nothing run
    code, out, err = run("sweep", bindir, tmp_path, "--check", SLURM_JOB_ID="4242", SLURM_NTASKS="6",
                         SLURM_SUBMIT_DIR=str(REPO))
    assert code == 0 and not err, out + err
    lines = out.splitlines()
    assert lines[0] == "ccbench: checking job 4242 (nothing is run)"
    assert "  ranks     6 (the job's SLURM_NTASKS)" in lines
    assert launch_lines("sweep", str(tmp_path / "results"), jobid="4242", ranks=[6])[0] in [ln.strip() for ln in lines]
    assert lines[-1] == "ccbench: check passed; submit without --check to run it"
    assert not (tmp_path / "results").exists()


# -- --check with a problem: one line naming it, exit 2 -------------------------------------------------------


@needs_ccbench
def test_a_bad_config(bindir, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('collectives = "allreduse"\n')
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_CONFIG=str(bad)))
    assert line.startswith("ccbench: CCBENCH_CONFIG: ") and "'allreduse'" in line and "allreduce" in line
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_CONFIG=str(tmp_path / "none.toml")))
    assert line.startswith("ccbench: CCBENCH_CONFIG: ") and "none.toml" in line and "not found" in line


@needs_ccbench
def test_bad_extra_args(bindir, tmp_path):
    line = one_problem(*run("multinode", bindir, tmp_path, "--check", CCBENCH_EXTRA_ARGS="-C allreduce --sizs 8"))
    assert line.startswith('ccbench: CCBENCH_EXTRA_ARGS="-C allreduce --sizs 8": ') and "'--sizs'" in line
    line = one_problem(*run("multinode", bindir, tmp_path, "--check", CCBENCH_EXTRA_ARGS="allreduce"))
    assert line == "ccbench: CCBENCH_EXTRA_ARGS=\"allreduce\": 'allreduce' is not a ccbench run option"


@needs_ccbench
def test_the_sweep_is_checked_at_the_jobs_rank_count(bindir, tmp_path):
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_EXTRA_ARGS="-C bcast --root 7"))
    assert line == "ccbench: the sweep at 4 ranks: root 7 does not exist with 4 ranks"


def test_a_missing_venv(bindir, tmp_path):
    missing = tmp_path / "no-venv"
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_VENV=str(missing)))
    assert line == f"ccbench: CCBENCH_VENV={missing} is not a virtualenv: there is no {missing}/bin/activate"


def test_no_ccbench(tmp_path):
    bindir = tmp_path / "bin"  # the tools, and no ccbench
    bindir.mkdir()
    for tool in TOOLS:
        if (real := shutil.which(tool)) and tool != "python3":
            (bindir / tool).symlink_to(real)
    r = subprocess.run([BASH, "slurm/sweep.sbatch", "--check"], capture_output=True, text=True, cwd=REPO,
                       timeout=60, env={"PATH": str(bindir), "LC_ALL": "C"})
    line = one_problem(r.returncode, r.stdout, r.stderr)
    assert line == "ccbench: no ccbench command on PATH: set CCBENCH_VENV to the virtualenv holding ccbench"


@pytest.mark.parametrize("script", SCRIPTS)
def test_mpi_none(script, bindir, tmp_path):
    line = one_problem(*run(script, bindir, tmp_path, "--check", CCBENCH_SRUN_MPI="none"))
    assert line == ("ccbench: CCBENCH_SRUN_MPI=none: srun --mpi=none would run every task as rank 0 of 1; "
                    "use pmi2 (MPICH) or pmix (Open MPI)")


def test_a_pmi_plugin_srun_lacks(bindir, tmp_path):
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_SRUN_MPI="pmi"))
    assert line == ("ccbench: CCBENCH_SRUN_MPI=pmi: not a PMI plugin of srun --mpi=list here "
                    "(none pmi2 pmix pmix_v4); use pmi2 (MPICH) or pmix (Open MPI)")
    (bindir / "srun").unlink()  # no srun here: the usual names
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_SRUN_MPI="pmi"))
    assert "CCBENCH_SRUN_MPI=pmi: not a PMI plugin of srun's usual ones (pmi2 pmix " in line


def test_results_not_a_directory(bindir, tmp_path):
    (tmp_path / "afile").write_text("x")
    line = one_problem(*run("sweep", bindir, tmp_path, "--check", CCBENCH_RESULTS=str(tmp_path / "afile" / "r")))
    assert line == f"ccbench: CCBENCH_RESULTS={tmp_path}/afile/r: {tmp_path}/afile is not a directory"


@pytest.mark.parametrize("npmin", ["0", "two", "-4"])
def test_npmin_must_be_a_positive_whole_number(npmin, bindir, tmp_path):
    line = one_problem(*run("scaling", bindir, tmp_path, "--check", CCBENCH_NPMIN=npmin))
    assert line == f"ccbench: CCBENCH_NPMIN={npmin}: not a positive whole number (the smallest P, default 2)"


@needs_ccbench
def test_every_problem_is_one_line(bindir, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('collectives = "allreduse"\n')
    code, out, err = run("scaling", bindir, tmp_path, "--check", CCBENCH_CONFIG=str(bad), CCBENCH_SRUN_MPI="none",
                         CCBENCH_EXTRA_ARGS="--budget x", CCBENCH_NPMIN="0")
    assert code == 2 and "ccbench launch" not in out
    assert [re.match(r"ccbench: (CCBENCH_[A-Z_]+)", ln).group(1) for ln in err.splitlines()] == \
        ["CCBENCH_NPMIN", "CCBENCH_CONFIG", "CCBENCH_EXTRA_ARGS", "CCBENCH_SRUN_MPI"], err


# -- inside Slurm, no flag: the job runs as it always did -----------------------------------------------------


@pytest.mark.parametrize("script", SCRIPTS)
def test_inside_slurm_the_job_runs_the_same_command(script, bindir, tmp_path):
    _stub(bindir / "ccbench", 'echo "RAN ccbench $*"')
    ntasks = 16 if script == "multinode" else 8
    code, out, err = run(script, bindir, tmp_path, venv=False, SLURM_JOB_ID="77", SLURM_NTASKS=str(ntasks),
                         SLURM_JOB_NODELIST="n[1-2]", SLURM_JOB_NUM_NODES="2", SLURM_SUBMIT_DIR=str(REPO),
                         CCBENCH_EXTRA_ARGS="-C allreduce -s 8:1K")
    assert code == 0 and not err, out + err
    ran = [ln.removeprefix("RAN ") for ln in out.splitlines() if ln.startswith("RAN ")]
    assert ran == launch_lines(script, str(tmp_path / "results"), extra="-C allreduce -s 8:1K", jobid="77",
                               ranks=[2, 4, 8] if script == "scaling" else [ntasks])
    assert out.splitlines()[0].startswith("ccbench: job 77 on n[1-2]")


def test_inside_slurm_mpi_none_ends_the_job(bindir, tmp_path):
    _stub(bindir / "ccbench", 'echo "RAN ccbench $*"')
    code, out, err = run("sweep", bindir, tmp_path, venv=False, SLURM_JOB_ID="77", SLURM_NTASKS="2",
                         CCBENCH_SRUN_MPI="none")
    assert code == 2 and "RAN" not in out and "mpi=none" in err  # what tests/slurm/ci_slurm.sh looks for


# -- the scripts themselves -----------------------------------------------------------------------------------


def _shared(text: str) -> list[str]:
    return re.findall(r"# ---- the same in every slurm/\*\.sbatch.*?# ---- end of the part every", text, re.S)


def test_the_shared_parts_are_the_same_in_every_script():
    parts = {s: _shared((REPO / "slurm" / f"{s}.sbatch").read_text()) for s in SCRIPTS}
    assert all(len(p) == 2 for p in parts.values()), {s: len(p) for s, p in parts.items()}
    for s in SCRIPTS[1:]:
        assert parts[s] == parts[SCRIPTS[0]], f"slurm/{s}.sbatch: its shared parts differ from sweep.sbatch's"


def test_every_script_keeps_strict_mode_and_is_executable():
    for s in SCRIPTS:
        path = REPO / "slurm" / f"{s}.sbatch"
        text = path.read_text()
        assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
        assert text.index("\n#SBATCH ") < text.index("\nset -euo pipefail\n")  # sbatch reads the header first
        assert os.access(path, os.X_OK)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck():
    r = subprocess.run(["shellcheck", *(f"slurm/{s}.sbatch" for s in SCRIPTS)], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def _text_blocks(text: str) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"^```text\n(.*?)^```", text, re.S | re.M)]


@needs_ccbench
def test_the_docs_show_what_the_check_prints(bindir, tmp_path):
    text = (REPO / "docs" / "slurm.md").read_text()
    assert "bash slurm/sweep.sbatch --check" in text and "`sbatch slurm/sweep.sbatch --check`" in text
    passed, failed = _text_blocks(text[text.index("## Check a script before you submit it"):])[:2]
    code, out, err = run("sweep", bindir, tmp_path, "--check", CCBENCH_RESULTS="")  # the default results/
    assert code == 0, out + err
    printed = out.splitlines()
    assert [ln for ln in passed if ln.strip() != "..."] == [ln for ln in printed if ln in passed], \
        "docs/slurm.md shows lines `bash slurm/sweep.sbatch --check` does not print (or not in that order)"
    code, out, err = run("sweep", bindir, tmp_path, "--check", CCBENCH_RESULTS="", CCBENCH_SRUN_MPI="none")
    assert code == 2 and failed == err.splitlines() + out.splitlines()[-1:], out + err
