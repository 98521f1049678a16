"""A third run kind, written in tests/ as a plug-in, goes through every stage without a change to ccbench:
measured under the launcher (the ranks load it through the hook), interrupted and resumed, replicated over
launches, shown, compared, reported and exported; and the registry's own rules."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.core.errors import UsageError
from ccbench.store.kinds import RunKind, kind_named, register, registered

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests" / "plugins" / "ring_probe.py"


def _ccbench(cwd, *args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def _runs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if (p / "run.json").is_file())


def _jsonl_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines() if line.strip()]


def test_a_third_kind_is_measured_resumed_replicated_shown_compared_reported_and_exported(tmp_path):
    plugin = ["--plugin", str(PLUGIN)]
    quick = ["--warmup", "1", "--min-reps", "3", "--max-reps", "6", "--budget", "0.2"]
    # the items run in a shuffled order, the same for one seed: the first one visited is the first row stored
    sizes = [8, 1024, 16384]
    r = _ccbench(tmp_path, *plugin, "ringprobe", "-s", "8,1K,16K", *quick, "--seed", "7", "--launch", "2",
                 "--results-dir", "order", "--no-show")
    assert r.returncode == 0, r.stderr
    first = sizes.index(_jsonl_rows(_runs(tmp_path / "order")[0])[0]["nbytes"]) + 1
    # a single launch stopped by SIGTERM after its first item (CCBENCH_FAULT), then resumed: every size once
    r = _ccbench(tmp_path, *plugin, "ringprobe", "-s", "8,1K,16K", *quick, "--seed", "7", "--launch", "2",
                 "--results-dir", "one", "--no-show", env={"CCBENCH_FAULT": f"term:0:ringprobe:{first}"})
    assert r.returncode == 143, r.stderr
    (one,) = _runs(tmp_path / "one")
    meta = json.loads((one / "run.json").read_text())
    assert meta["kind"] == "ringprobe" and meta["status"] == "interrupted" and meta["nranks"] == 2
    assert f"ccbench ringprobe --launch 2 --resume {Path('one') / one.name}" in r.stderr
    assert len(_jsonl_rows(one)) == 1
    r = _ccbench(tmp_path, *plugin, "ringprobe", "--resume", str(one), "--launch", "2", "--no-show")
    assert r.returncode == 0, r.stderr
    rows = _jsonl_rows(one)
    assert sorted(row["nbytes"] for row in rows) == [8, 1024, 16384] and all(row["nwrong"] == 0 for row in rows)
    assert json.loads((one / "run.json").read_text())["status"] == "complete"
    # the kind's options are its configuration: a resume with another one is refused before anything starts
    r = _ccbench(tmp_path, *plugin, "ringprobe", "--resume", str(one), "-s", "8", "--launch", "2")
    assert r.returncode == 2 and "differs in sizes" in r.stderr
    # two launches merged into one run, pooled on the kind's key, in rounds
    r = _ccbench(tmp_path, *plugin, "ringprobe", "-s", "8,1K,16K", *quick, "--launch", "2", "--launches", "2",
                 "--rounds", "2", "--results-dir", "two", "--no-show")
    assert r.returncode == 0, r.stderr
    (two,) = _runs(tmp_path / "two")
    rows = _jsonl_rows(two)
    assert len(rows) == 3 and all(row["launches"] == [1, 2] for row in rows)
    parts = _runs(two / "parts")
    assert len(parts) == 2 and all(json.loads((p / "run.json").read_text())["rounds"] == 2 for p in parts)
    # without the plug-in a run of its kind is refused in one line
    shown = _ccbench(tmp_path, "show", str(two))
    assert shown.returncode == 2 and "a kind this ccbench does not know" in shown.stderr
    assert shown.stderr.count("\n") == 1
    # with it (here from the environment): shown, compared, reported, exported
    env = {"CCBENCH_PLUGINS": str(PLUGIN)}
    shown = _ccbench(tmp_path, "show", str(two), env=env)
    assert shown.returncode == 0 and "ring-exchange probe: every exchange" in shown.stdout
    assert "3 exchanges in" in shown.stdout and "all correct" in shown.stdout
    cmp = _ccbench(tmp_path, "compare", str(one), str(two), "--out", "cmp", env=env)
    assert cmp.returncode == 0, cmp.stderr
    assert "every exchange: medians, ratio run / A" in cmp.stdout and "summary per run" in cmp.stdout
    header, *lines = (tmp_path / "cmp" / "compare.csv").read_text().splitlines()
    assert header.startswith("baseline,other,exchange,nbytes,nranks_a,") and len(lines) == 3
    rep = _ccbench(tmp_path, "report", str(two), "--out", "rep", env=env)
    assert rep.returncode == 0, rep.stderr
    page = (tmp_path / "rep" / "report" / "report.md").read_text()
    assert "ring-exchange probe" in page and "## Every exchange" in page
    csv_text = _ccbench(tmp_path, "export", str(two), "--format", "csv", env=env)
    assert csv_text.returncode == 0 and len(csv_text.stdout.splitlines()) == 4
    assert csv_text.stdout.startswith("run,mpi_library,run_nranks,nodes,exchange,nbytes,")
    osu = _ccbench(tmp_path, "export", str(two), "--format", "osu", env=env)
    assert osu.returncode == 2 and "writes collective sweeps" in osu.stderr


def test_an_installed_package_adds_its_kind_through_the_entry_point_group(tmp_path):
    site = tmp_path / "site"
    (site / "ring_probe_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "ring_probe.py").write_text(PLUGIN.read_text())
    (site / "ring_probe_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ring-probe-plugin\nVersion: 1.0\n")
    (site / "ring_probe_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[ccbench.kinds]\nringprobe = ring_probe:KIND\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    r = _ccbench(tmp_path, "--help", env=env)
    assert r.returncode == 0 and "ringprobe" in r.stdout
    r = _ccbench(tmp_path, "ringprobe", "--help", env=env)
    assert r.returncode == 0 and "Time a ring exchange per size" in r.stdout


def test_a_plugin_that_cannot_be_loaded_is_one_line(tmp_path):
    r = _ccbench(tmp_path, "--plugin", str(tmp_path / "nothing.py"), "list")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file" in r.stderr
    r = _ccbench(tmp_path, "--plugin", "no_such_module_here", "list")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot be loaded" in r.stderr


def test_the_registry_refuses_a_name_twice_or_not_a_word():
    from ccbench.store.results import Row

    assert kind_named("sweep").label == "collective sweep" and kind_named("workload").item == "row"
    with pytest.raises(UsageError, match="registered twice"):
        register(RunKind("sweep", Row, "collective", "other sweep", "sweep", "case"))
    with pytest.raises(UsageError, match="must be a word"):
        register(RunKind("two words", Row, "collective", "x", "x", "case"))
    with registered(RunKind("scratch", Row, "collective", "scratch run", "scratch", "case")) as k:
        assert kind_named("scratch") is k
    assert kind_named("scratch") is None


def _stored_run(folder: Path, kind: str, rows: list):
    from ccbench.store.results import RunWriter

    folder.mkdir()
    w = RunWriter(folder, {"kind": kind, "nranks": 2, "mpi_library": "X"},
                  columns=[f for f in rows[0].to_dict(raw=False)])
    for row in rows:
        w.append(row)
    w.close()
    return folder


def _ring_kind():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ring_probe_for_tests", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ring_row(module, nbytes, samples, launches=()):
    n = len(samples)
    per = tuple(n // len(launches) for _ in launches) if launches else ()
    med = sorted(samples)[n // 2]
    return module.RingRow(exchange="ring", nbytes=nbytes, nranks=2, samples=n, median_s=med, min_s=min(samples),
                          mean_s=sum(samples) / n, ci_low_s=min(samples), ci_high_s=max(samples), nwrong=0,
                          stop_reason="max_reps", samples_s=tuple(samples), launches=tuple(launches),
                          launch_samples=per)


def test_a_kind_without_views_is_compared_on_its_key_fields(tmp_path):
    """Generic matching: rows pair up on the kind's key; a 3x slower side measured in 3 launches is called slower,
    the same times are not; a row only in one run is counted as unmatched."""
    from ccbench.analysis.compare import compare_runs
    from ccbench.store.run import open_run

    module = _ring_kind()
    fast = [1e-5, 1.1e-5, 0.9e-5, 1.05e-5, 0.95e-5, 1.0e-5]
    slow = [3 * x for x in fast]
    with registered(module.KIND):
        a = _stored_run(tmp_path / "a", "ringprobe", [_ring_row(module, 8, fast, (1, 2, 3)),
                                                      _ring_row(module, 64, fast, (1, 2, 3)),
                                                      _ring_row(module, 512, fast, (1, 2, 3))])
        b = _stored_run(tmp_path / "b", "ringprobe", [_ring_row(module, 8, slow, (1, 2, 3)),
                                                      _ring_row(module, 64, fast, (1, 2, 3))])
        cmp = compare_runs([open_run(a), open_run(b)])
        by_size = {p.nbytes: p for p in cmp.pairs}
        assert set(by_size) == {8, 64} and cmp.unmatched == {"B": (1, 0)}
        assert by_size[8].verdict == "slower" and by_size[8].ratio == pytest.approx(3.0)
        assert by_size[64].verdict == "noise" and by_size[64].exchange == "ring"
        (summary,) = cmp.summary()
        assert summary.pairs == 2 and summary.verdicts["slower"] == 1 and summary.verdicts["noise"] == 1


def test_the_settings_of_a_plugin_run_are_checked_at_the_door():
    from ccbench.measure.kind_run import resolve_kind_config

    module = _ring_kind()
    kind = module.KIND
    cfg = resolve_kind_config(kind, {"launches": 3, "rounds": 2}, {"sizes": "8:64"})
    assert cfg.params == {"sizes": "8,16,32,64"} and cfg.launches == 3
    assert cfg.per_launch().budget_s == pytest.approx(1 / 3) and cfg.per_round().min_reps == 5
    for settings, params, message in (({"launches": 0}, {}, "outside 1..1000"),
                                      ({"max_reps": 2, "min_reps": 5}, {}, "below min_reps"),
                                      ({"budget_s": float("nan")}, {}, "outside"),
                                      ({}, {"sizes": "0"}, "at least 1 byte")):
        with pytest.raises(UsageError, match=message):
            resolve_kind_config(kind, settings, params)
