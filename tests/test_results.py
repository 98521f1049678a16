"""Result records and run directories: round trip, never overwrite, refuse the foreign."""

import json

import pytest

from ccbench.core.errors import UsageError
from ccbench.store.results import SCHEMA, Row, RunWriter, new_run_dir, resolve_run
from ccbench.store.run import load_run


def make_row(**over) -> Row:
    d = dict(collective="allreduce", algorithm="ring", nbytes=64, count=16, dtype="float32",
             op="sum", in_place=False, root=0, nranks=4, samples=3, min_s=1e-6, median_s=2e-6,
             mean_s=2e-6, p95_s=3e-6, p99_s=3e-6, max_s=3e-6, stddev_s=1e-6, ci_low_s=1e-6,
             ci_high_s=3e-6, algbw_gbs=0.032, busbw_gbs=0.048, msgs_max=6, bytes_max=96,
             msgs_total=24, bytes_total=384, steps_max=6, step_bytes_max=96,
             reduced_bytes_max=48, nwrong=0, stop_reason="target_rse", sync="barrier",
             flags=("few_samples",), samples_s=(1e-6, 2e-6, 3e-6))
    d.update(over)
    return Row(**d)


def test_row_validates():
    with pytest.raises(ValueError):
        make_row(nbytes=-1)
    with pytest.raises(ValueError):
        make_row(samples=5)


def test_round_trip_and_never_overwrite(tmp_path):
    a = new_run_dir(tmp_path, 4)
    b = new_run_dir(tmp_path, 4)
    assert a != b and a.is_dir() and b.is_dir()
    w = RunWriter(a, {"nranks": 4})
    rows = [make_row(), make_row(nbytes=128, count=32, nwrong=3, msgs_max=None, bytes_max=None,
                                 msgs_total=None, bytes_total=None, steps_max=None,
                                 step_bytes_max=None, reduced_bytes_max=None)]
    for r in rows:
        w.append(r)
    w.update(status="complete")
    w.close()
    meta, loaded, warnings = load_run(a)
    assert meta["schema"] == SCHEMA and meta["status"] == "complete"
    assert loaded == rows and not warnings
    assert not loaded[1].ok
    csv_lines = (a / "cases.csv").read_text().splitlines()
    assert len(csv_lines) == 3 and "samples_s" not in csv_lines[0]
    flags_at = csv_lines[0].split(",").index("flags")
    assert csv_lines[1].split(",")[flags_at] == "few_samples"
    header = csv_lines[0].split(",")
    assert header[-8:] == ["settings", "launches", "launch_samples", "timing", "rank_mean_min_s", "rank_mean_avg_s",
                           "rank_mean_max_s", "p90_s"]
    assert csv_lines[1].split(",")[-8:] == ["", "", "", "per-call", "", "", "", ""]


def test_torn_last_line_is_dropped_with_a_warning(tmp_path):
    d = new_run_dir(tmp_path, 2)
    w = RunWriter(d, {})
    w.append(make_row())
    w.close()
    with open(d / "cases.jsonl", "a") as f:
        f.write('{"collective": "allre')
    _, rows, warnings = load_run(d)
    assert len(rows) == 1 and "torn" in warnings[0]


def test_corrupt_middle_line_is_an_error(tmp_path):
    d = new_run_dir(tmp_path, 2)
    w = RunWriter(d, {})
    w.append(make_row())
    w.close()
    text = (d / "cases.jsonl").read_text()
    (d / "cases.jsonl").write_text("garbage\n" + text)
    with pytest.raises(UsageError, match="line 1 is corrupt"):
        load_run(d)


def test_unknown_schema_and_foreign_files(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"schema": "ccbench.run/99"}))
    with pytest.raises(UsageError, match="ccbench.run/99.*re-run"):
        load_run(d)
    (d / "run.json").write_text(json.dumps({"name": "something else"}))
    with pytest.raises(UsageError, match="not a ccbench run file"):
        load_run(d)
    (d / "run.json").write_text("{not json")
    with pytest.raises(UsageError, match="corrupt"):
        load_run(d)
    with pytest.raises(UsageError, match="no run at"):
        resolve_run(tmp_path / "missing")
    with pytest.raises(UsageError, match="not a ccbench run"):
        load_run(tmp_path)


def test_unwritable_results_dir(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError):
        new_run_dir(f / "sub", 2)
