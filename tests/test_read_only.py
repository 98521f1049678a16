"""Reading a run never changes it: fit, report, compare, plot and tune leave every file and folder of the results
tree as they found it (bytes and modification times), write into the derived tree or --out, and work on a
results tree mounted read-only; ``latest`` is the run that started last, whatever was written since."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runfiles import derived, needs_mount_namespace, tree_state, write_run

from ccbench.cli import main
from ccbench.store.results import Row

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[1]


def _variant_row(alg: str, nbytes: int, median: float) -> Row:
    return Row(collective="allreduce", algorithm=alg, nbytes=nbytes, count=nbytes // 4, dtype="float32", op="sum",
               in_place=False, root=0, nranks=4, samples=3, min_s=median, median_s=median, mean_s=median,
               p95_s=median, p99_s=median, max_s=median, stddev_s=0.0, ci_low_s=median * 0.98,
               ci_high_s=median * 1.02, algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None, bytes_max=None, msgs_total=None,
               bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None, nwrong=0,
               stop_reason="target_rse", sync="barrier", samples_s=(median * 0.97, median, median * 1.03),
               launches=(1, 2, 3), launch_samples=(1, 1, 1))


@pytest.fixture
def results(tmp_path):
    """A results tree: the stored sweeps and a workload run of tests/data, and an Open MPI run of native variants."""
    root = tmp_path / "results"
    for name in ("run-np2", "run-np4", "run-np4-single", "wl-ddp-np2", "wl-ddp-np2-single"):
        shutil.copytree(DATA / name, root / name)
    write_run(root / "variants-np4", [_variant_row(a, n, t) for n in (64, 4096)
                                      for a, t in (("native", 2e-6), ("native:ring", 1e-6))],
              mpi_vendor="Open MPI 5.0.11", mpi_library="Open MPI v5.0.11", start_time="2026-01-01T00:00:00+0000")
    return root


READERS = [
    ["fit", "run-np2"],
    ["report", "run-np4"],
    ["report", "wl-ddp-np2"],
    ["compare", "run-np4", "run-np4-single"],
    ["compare", "wl-ddp-np2", "wl-ddp-np2-single"],
    ["plot", "run-np4", "-C", "allreduce", "--kind", "busbw"],
    ["tune", "variants-np4", "--format", "openmpi-rules"],
    ["show", "run-np2"],
    ["export", "run-np2", "--format", "csv"],
]


@pytest.mark.parametrize("argv", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_a_command_that_reads_runs_leaves_the_results_tree_as_it_was(results, capsys, monkeypatch, argv):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(results.parent)
    before = tree_state(results)
    args = [argv[0], *(str(results / a) if (results / a).is_dir() else a for a in argv[1:])]
    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr()
    out = capsys.readouterr().out
    assert tree_state(results) == before
    if argv[0] not in ("show", "export"):
        where = derived(results / argv[1])
        assert where.is_dir() and any(where.iterdir())
        assert str(where) in " ".join(out.split()), "the last line names where the files went"


def test_latest_is_the_run_that_started_last_whatever_was_written_since(results, capsys, monkeypatch):
    monkeypatch.chdir(results.parent)
    starts = {"run-np2": "2026-11-27T10:00:00+0000", "run-np4": "2026-11-27T09:00:00+0000"}
    for name in os.listdir(results):  # every other run started earlier
        meta = json.loads((results / name / "run.json").read_text())
        meta["start_time"] = starts.get(name, "2026-11-26T00:00:00+0000")
        (results / name / "run.json").write_text(json.dumps(meta))
    os.utime(results / "run-np4", (2e9, 2e9))  # the older run's folder is the newest on disk
    main(["fit", "latest"])
    assert "fits of results/run-np2 " in capsys.readouterr().out
    main(["fit", str(results / "run-np4")])
    capsys.readouterr()
    main(["show", "latest"])
    assert "run-np2" in capsys.readouterr().out


def _ro_command(ro: Path, argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`ccbench ARGV` in a mount namespace where `ro` is bound read-only onto itself."""
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(ro), sys.executable, "-m", "ccbench",
                           *argv], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=dict(os.environ, COLUMNS="200", PYTHONPATH=str(REPO)))


@needs_mount_namespace
def test_on_a_read_only_results_tree_readers_work_with_out_and_say_so_without(results, tmp_path,
                                                                               tmp_path_factory):
    pytest.importorskip("matplotlib")
    writable = tmp_path_factory.mktemp("elsewhere")
    before = tree_state(tmp_path / "results")
    # the results tree alone read-only: the derived tree beside it takes the files
    r = _ro_command(results, ["fit", str(results / "run-np2")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (derived(results / "run-np2") / "fits.json").is_file()
    shutil.rmtree(tmp_path / "results-derived")
    # the folder holding it read-only too: one line asking for --out, nothing written, then --out works
    for argv in (["fit", "run-np2"], ["report", "run-np4"], ["compare", "run-np4", "run-np4-single", "--no-plot"],
                 ["tune", "variants-np4", "--format", "openmpi-rules"]):
        args = [argv[0], *(str(results / a) if (results / a).is_dir() else a for a in argv[1:])]
        r = _ro_command(tmp_path, args, tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.count("\n") == 1 and "Read-only file system" in r.stderr and "--out DIR" in r.stderr
        assert "Traceback" not in r.stdout + r.stderr
        r = _ro_command(tmp_path, [*args, "--out", str(writable / argv[0])], tmp_path.parent)
        assert r.returncode == 0, r.stdout + r.stderr
        assert any((writable / argv[0]).iterdir())
    assert not (tmp_path / "results-derived").exists()
    assert tree_state(tmp_path / "results") == before
