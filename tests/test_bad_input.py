"""Hostile or broken input: one clear line on stderr, a non-zero exit, no traceback, results untouched.

Every case runs against a results directory holding a real stored run (and a fit beside it);
after each one the directory must be byte for byte what it was, with nothing added.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.cli import main

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def lab(tmp_path):
    """A results directory with a real run, plus files of every kind of damage."""
    results = tmp_path / "results"
    good = results / "good"
    shutil.copytree(DATA / "run-np2", good)
    bad = tmp_path / "bad"
    bad.mkdir()

    def run_dir(name, meta=None, jsonl=None):
        d = bad / name
        shutil.copytree(DATA / "run-np2", d)
        if meta is not None:
            (d / "run.json").write_bytes(meta)
        if jsonl is not None:
            (d / "cases.jsonl").write_bytes(jsonl)
        return d

    meta = json.loads((good / "run.json").read_text())
    lines = (good / "cases.jsonl").read_bytes().splitlines(keepends=True)
    files = {
        "corrupt_meta": run_dir("corrupt-meta", meta=b'{"schema": "ccbench.run/1", "nranks": '),
        "foreign_meta": run_dir("foreign", meta=json.dumps({"benchmark": "osu", "results": []}).encode()),
        "future_schema": run_dir("future", meta=json.dumps(dict(meta, schema="ccbench.run/9")).encode()),
        "not_json_list": run_dir("list-meta", meta=b"[1, 2, 3]"),
        "corrupt_middle": run_dir("corrupt-middle", jsonl=lines[0] + b'{"collective": "allre\n' + b"".join(lines[1:])),
        "binary_rows": run_dir("binary", jsonl=b"\xff\xfe\x00garbage\x00" * 10),
        "bad_row_values": run_dir("bad-values", jsonl=lines[0].replace(b'"nranks": 2', b'"nranks": -2')),
        "csv_only": bad / "csv-only",
        "a_file": bad / "plain.txt",
        "toml_unknown_key": bad / "unknown-key.toml",
        "toml_wrong_type": bad / "wrong-type.toml",
        "toml_syntax": bad / "syntax.toml",
        "toml_bad_collective": bad / "bad-collective.toml",
        "toml_negative": bad / "negative.toml",
    }
    files["csv_only"].mkdir()
    shutil.copy(good / "cases.csv", files["csv_only"] / "cases.csv")
    files["a_file"].write_text("not a directory\n")
    files["toml_unknown_key"].write_text('collectives = ["allreduce"]\nsizez = "8:1K"\n')
    files["toml_wrong_type"].write_text('warmup = "five"\n')
    files["toml_syntax"].write_text('collectives = ["allreduce"\n')
    files["toml_bad_collective"].write_text('collectives = ["allreduce", "allscatter"]\n')
    files["toml_negative"].write_text('sizes = [8, -16]\n')
    # a fit beside the good run, made the way users make it
    try:
        main(["fit", str(good)])
    except SystemExit as exc:
        assert exc.code in (0, None)
    return results, {k: str(v) for k, v in files.items()}


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# (arguments, exit code, a piece of the message); {R} is the results directory, {name} a file of `lab`
CASES = [
    # flags and values
    (["run", "--bogus"], 2, "No such option '--bogus'"),
    (["run", "-C", "allreduc"], 2, "collective: unknown 'allreduc'; did you mean 'allreduce'?"),
    (["run", "-C", "bcast", "-a", "rabenseifner"], 2, "algorithm: unknown 'rabenseifner'"),
    (["run", "-a", "rign"], 2, "algorithm: unknown 'rign'"),
    (["run", "-t", "complex64"], 2, "dtype: unknown 'complex64'"),
    (["run", "--op", "avg"], 2, "op: unknown 'avg'"),
    (["run", "--sync", "clock"], 2, "Invalid value for '--sync'"),
    (["run", "--thread-level", "quad"], 2, "Invalid value for '--thread-level'"),
    (["run", "--min-reps", "abc"], 2, "Invalid value for '--min-reps'"),
    (["run", "--warmup", "-3"], 2, "config key 'warmup': -3 is outside"),
    (["run", "--max-reps", "0"], 2, "config key 'max_reps': 0 is outside"),
    (["run", "--target-rse", "-1"], 2, "config key 'target_rse': -1.0 is outside"),
    (["run", "--budget", "0"], 2, "config key 'budget_s': 0.0 is outside"),
    (["run", "--in-place", "maybe"], 2, "Invalid value for '--in-place'"),
    # sizes
    (["run", "-s", "8:1Q"], 2, "bad size '1Q'"),
    (["run", "-s", "-4"], 2, "sizes cannot be negative"),
    (["run", "-s", "1M:8"], 2, "the maximum is below the minimum"),
    (["run", "-s", "8:1M:1"], 2, "the factor must be an integer >= 2"),
    (["run", "-s", "8,,16"], 2, "an empty item between commas"),
    (["run", "-s", "1P"], 2, "bad size '1P'"),
    # config files
    (["run", "-c", "/nonexistent/x.toml"], 2, "not found"),
    (["run", "-c", "{toml_unknown_key}"], 2, "unknown config key 'sizez' (did you mean 'sizes'?)"),
    (["run", "-c", "{toml_wrong_type}"], 2, "config key 'warmup'"),
    (["run", "-c", "{toml_syntax}"], 2, "is not valid TOML"),
    (["run", "-c", "{toml_bad_collective}"], 2, "collective: unknown 'allscatter'"),
    (["run", "-c", "{toml_negative}"], 2, "sizes cannot be negative"),
    # results given to show / fit / resume
    (["show", "/nonexistent/run"], 2, "no run at"),
    (["show", "latest", "--results-dir", "{csv_only}"], 2, "no runs under"),
    (["show", "{corrupt_meta}"], 2, "is corrupt (not JSON)"),
    (["show", "{foreign_meta}"], 2, "is not a ccbench run file"),
    (["show", "{not_json_list}"], 2, "is not a ccbench run file"),
    (["fit", "{future_schema}"], 2, "has schema ccbench.run/9; this ccbench reads ccbench.run/1 and ccbench.run/2"),
    (["fit", "{corrupt_middle}"], 2, "line 2 is corrupt"),
    (["show", "{binary_rows}"], 2, "is corrupt"),
    (["show", "{bad_row_values}"], 2, "line 1 is corrupt"),
    (["show", "{csv_only}"], 2, "is not a ccbench run (no run.json)"),
    (["fit", "{a_file}"], 2, "no run at"),
    (["run", "--resume", "{R}/nosuchrun", "--results-dir", "{R}"], 2, "no run at"),
    (["run", "--resume", "{foreign_meta}"], 2, "is not a ccbench run file"),
    (["run", "--resume", "{R}/good", "--budget", "0.5"], 2, "its configuration differs in budget_s;"),
    # results directory
    (["run", "-C", "barrier", "--results-dir", "{a_file}/sub"], 2, "cannot be created: Not a directory"),
    # predict
    (["predict", "-n", "4"], 2, "predict needs --from RUN, or both --alpha and --beta"),
    (["predict", "--alpha", "fast", "--beta", "1GB/s", "-n", "4"], 2, "bad --alpha 'fast'"),
    (["predict", "--alpha", "2us", "--beta", "10GB/s", "-n", "abc"], 2, "bad rank counts 'abc'"),
    (["predict", "--alpha", "2us", "--beta", "-10GB/s", "-n", "4"], 2, "bad --beta '-10GB/s': a rate must be positive"),
    (["predict", "--from", "{corrupt_meta}", "-n", "4"], 2, "is corrupt (not JSON)"),
    # trace and launch
    (["trace", "allreduce", "native", "-n", "4"], 2, "hand-written"),
    (["trace", "allreduce", "ring", "--root", "9", "-n", "4"], 2, "root 9 does not exist"),
    (["trace", "allreduce", "ring", "-t", "half"], 2, "unknown dtype 'half'"),
    (["trace", "allscatter", "ring"], 2, "unknown collective 'allscatter'"),
    (["launch", "-n", "0"], 2, "Invalid value for '-n'"),
    (["launch", "-n", "2", "--launcher", "no-such-mpiexec"], 2, "MPI launcher 'no-such-mpiexec' not found"),
    (["nosuchcommand"], 2, "No such command"),
]


def _fill(args, results, files):
    return [a.replace("{R}", str(results)).format(**files) if "{" in a else a for a in args]


@pytest.mark.parametrize("args,code,message", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_and_touches_nothing(args, code, message, lab, capsys, monkeypatch):
    results, files = lab
    monkeypatch.chdir(results.parent)  # a run started by mistake would land in ./results
    monkeypatch.setenv("CCBENCH_LAUNCHED", "1")  # a singleton that gets past the launcher check: the input's refusal
    before = snapshot(results.parent)
    with pytest.raises(SystemExit) as exc:
        main(_fill(args, results, files))
    out, err = capsys.readouterr()
    assert exc.value.code == code, (out, err)
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("ccbench: error: ") and "Traceback" not in err
    assert snapshot(results.parent) == before


def test_there_are_enough_cases():
    assert len(CASES) >= 25


# refused under MPI, after the ranks have started: still one line from rank 0 and nothing written
MPI_CASES = [
    (["-m", "mpi4py", "-m", "ccbench", "run", "-C", "allreduce", "-a", "ring", "-s", "64G"],
     "allreduce/ring 64 GiB float32 sum needs about"),
    (["-m", "mpi4py", "-m", "ccbench", "run", "-C", "pingpong"],
     "nothing to run (pingpong/native: pingpong needs at least 2 ranks)"),
    (["-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
      "-C", "bcast", "--root", "3"], "root 3 does not exist with 3 ranks"),
    (["-m", "ccbench", "launch", "-n", "3", "--oversubscribe", "-C", "barrier", "--sync", "window"],
     "--sync window needs a core per rank"),
]


@pytest.mark.parametrize("args,message", MPI_CASES, ids=[" ".join(c[0][2:])[:50] for c in MPI_CASES])
def test_refused_under_mpi_before_anything_is_written(args, message, lab):
    """A size beyond the node's memory (checked before allocating), a collective that the rank count
    cannot run, a root that does not exist, window sync on oversubscribed cores."""
    import multiprocessing

    if "window" in message and multiprocessing.cpu_count() >= 3:
        pytest.skip("this machine has a core per rank: window sync is allowed")
    results, _ = lab
    before = snapshot(results)
    r = subprocess.run([sys.executable, *args, "--results-dir", str(results)],
                       capture_output=True, text=True, cwd=REPO, timeout=120,
                       env=dict(os.environ, CCBENCH_LAUNCHED="1"))  # a singleton rank: ccbench run accepts it so
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    assert r.returncode != 0 and len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert snapshot(results) == before


def test_no_launcher_anywhere(lab, tmp_path, monkeypatch, capsys):
    """No mpiexec beside Python nor on PATH: one line that says what to install, exit 1."""
    results, _ = lab
    before = snapshot(results)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main(["launch", "-n", "2", "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert exc.value.code == 1 and err.count("\n") == 1
    assert "no MPI launcher (mpiexec or mpirun) found; install one with pip install 'ccbench[mpich]'" in err
    assert snapshot(results) == before
