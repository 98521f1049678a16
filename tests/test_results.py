"""Result records and run directories: round trip, never overwrite, refuse the foreign."""

import csv
import json
import os
import re
from pathlib import Path

import pytest
from runfiles import workload_row

from ccbench.core.errors import UsageError
from ccbench.store.results import (
    CSV_COLUMNS,
    SCHEMA,
    Row,
    RunWriter,
    install_run,
    new_run_dir,
    reopen_tables,
    resolve_run,
)
from ccbench.store.run import open_run
from ccbench.store.workload_rows import WORKLOAD_COLUMNS


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
    opened = open_run(a)
    meta, loaded, warnings = opened.meta, opened.rows, opened.warnings
    assert meta["schema"] == SCHEMA and meta["status"] == "complete"
    assert loaded == rows and not warnings
    assert not loaded[1].ok
    csv_lines = (a / "cases.csv").read_text().splitlines()
    assert len(csv_lines) == 3 and "samples_s" not in csv_lines[0]
    flags_at = csv_lines[0].split(",").index("flags")
    assert csv_lines[1].split(",")[flags_at] == "few_samples"
    header = csv_lines[0].split(",")
    assert header[-12:] == ["settings", "launches", "launch_samples", "timing", "rank_mean_min_s", "rank_mean_avg_s",
                            "rank_mean_max_s", "p90_s", "loop", "buffers", "counts", "setup_s"]
    assert csv_lines[1].split(",")[-12:] == ["", "", "", "per-call", "", "", "", "", "python", "warm", "uniform", ""]


def test_torn_last_line_is_dropped_with_a_warning(tmp_path):
    d = new_run_dir(tmp_path, 2)
    w = RunWriter(d, {})
    w.append(make_row())
    w.close()
    with open(d / "cases.jsonl", "a") as f:
        f.write('{"collective": "allre')
    opened = open_run(d)
    rows, warnings = opened.rows, opened.warnings
    assert len(rows) == 1 and "torn" in warnings[0]


def test_corrupt_middle_line_is_an_error(tmp_path):
    d = new_run_dir(tmp_path, 2)
    w = RunWriter(d, {})
    w.append(make_row())
    w.close()
    text = (d / "cases.jsonl").read_text()
    (d / "cases.jsonl").write_text("garbage\n" + text)
    with pytest.raises(UsageError, match="line 1 is corrupt"):
        open_run(d)


def test_unknown_schema_and_foreign_files(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"schema": "ccbench.run/99"}))
    with pytest.raises(UsageError, match="ccbench.run/99.*re-run"):
        open_run(d)
    (d / "run.json").write_text(json.dumps({"name": "something else"}))
    with pytest.raises(UsageError, match="not a ccbench run file"):
        open_run(d)
    (d / "run.json").write_text("{not json")
    with pytest.raises(UsageError, match="corrupt"):
        open_run(d)
    with pytest.raises(UsageError, match="no run at"):
        resolve_run(tmp_path / "missing")
    with pytest.raises(UsageError, match="not a ccbench run"):
        open_run(tmp_path)


def test_unwritable_results_dir(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError):
        new_run_dir(f / "sub", 2)


# -- opening runs (store.run): one clear line for each way a directory is not what was asked ---------


def _sweep_run(tmp_path, rows=(), status=None):
    d = new_run_dir(tmp_path, 4)
    w = RunWriter(d, {"nranks": 4})   # a run being written is "running"
    for r in rows:
        w.append(r)
    if status:
        w.update(status=status)
    w.close()
    return d


def _workload_row():
    from ccbench.store.workload_rows import WorkloadRow

    return WorkloadRow(workload="ddp", variant="bucketed", model="-", algorithm="ring", nranks=2, group_ranks=2,
                       dtype="float32", part=-1, label="step", collective="step", ncalls=1, ntensors=1,
                       payload_elems=16, nbytes=64, samples=3, median_s=2e-6, min_s=1e-6, mean_s=2e-6,
                       ci_low_s=1e-6, ci_high_s=3e-6, samples_s=(1e-6, 2e-6, 3e-6))


def test_open_run_knows_the_kind_and_its_spec(tmp_path):
    from ccbench.store.kinds import kind_named
    from ccbench.store.run import SWEEP, WORKLOAD, open_run
    from ccbench.store.workload_rows import WORKLOAD_COLUMNS, WorkloadRow

    d = _sweep_run(tmp_path, [make_row()])
    run = open_run(d)
    assert run.kind == SWEEP == "sweep" and run.spec is kind_named("sweep") and run.path == d
    assert run.rows == [make_row()] and run.warnings == [] and run.meta["nranks"] == 4
    assert (run.spec.rows, run.spec.marker, run.spec.noun, run.spec.item) == (Row, "collective", "sweep", "case")
    assert open_run(d.name, results_dir=tmp_path).path == d          # a name under the results directory
    w = tmp_path / "wl"
    w.mkdir()
    rw = RunWriter(w, {"kind": WORKLOAD}, columns=WORKLOAD_COLUMNS)
    rw.append(_workload_row())
    rw.close()
    wl = open_run(w, kinds=(WORKLOAD,), need_rows=True)
    assert wl.kind == "workload" and wl.rows == [_workload_row()] and isinstance(wl.rows[0], WorkloadRow)
    assert (wl.spec.label, wl.spec.noun, wl.spec.item) == ("training-workload run", "workload", "row")


def test_open_run_refuses_what_the_command_does_not_read(tmp_path):
    from ccbench.store.run import SWEEP, WORKLOAD, open_run

    d = _sweep_run(tmp_path, [make_row()])
    q = re.escape(repr(str(d)))
    with pytest.raises(UsageError, match=rf"^{q} is a 'sweep' run; workload reads training-workload runs only$"):
        open_run(d, kinds=(WORKLOAD,), what="workload")
    with pytest.raises(UsageError, match=r"is a 'sweep' run; this command reads training-workload runs only$"):
        open_run(d, kinds=(WORKLOAD,))
    assert open_run(d, kinds=(WORKLOAD, SWEEP)).kind == SWEEP
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, kind="workload")))
    with pytest.raises(UsageError, match=r"is a 'workload' run; compare reads collective sweeps only$"):
        open_run(d, kinds=(SWEEP,), what="compare")
    (d / "run.json").write_text(json.dumps(dict(meta, kind="pingpong")))
    with pytest.raises(UsageError, match=rf"^{q} is a 'pingpong' run, a kind this ccbench does not know \(a "
                                         r"plug-in's kind: load it with ccbench --plugin MODULE, or name it in "
                                         r"CCBENCH_PLUGINS\)$"):
        open_run(d)
    (d / "run.json").write_text(json.dumps(dict(meta, kind="")))       # an empty kind is a sweep's
    assert open_run(d).kind == SWEEP


def test_open_run_needs_finished_cases_only_when_asked(tmp_path):
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path)
    assert open_run(d).rows == []
    with pytest.raises(UsageError, match=rf"^{re.escape(repr(str(d)))} has no finished cases$"):
        open_run(d, need_rows=True)
    (d / "cases.jsonl").unlink()   # lost: not "0 cases, all correct" (every writer creates it with run.json)
    with pytest.raises(UsageError, match=r"has no cases.jsonl: the run's rows are missing"):
        open_run(d)


def test_a_run_whose_rows_were_lost_says_how_many(tmp_path):
    """run.json says complete with 3 finished cases, cases.jsonl holds 1 (cut back, emptied): it was shown as
    "1 cases, all correct" without a word."""
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path, [make_row(nbytes=8), make_row(nbytes=16), make_row(nbytes=32)])
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, status="complete", finished_cases=3)))
    assert open_run(d).warnings == []
    (d / "cases.jsonl").write_text((d / "cases.jsonl").read_text().splitlines(keepends=True)[0])
    run = open_run(d)
    assert len(run.rows) == 1
    assert run.warnings == ["cases.jsonl holds 1 rows, but run.json says 3 finished: 2 are lost"]


def test_a_row_without_a_median_time_is_named_when_the_run_is_read(tmp_path):
    """A NaN median (a run of schema /1, a file edited by hand): fit dropped the row without a word."""
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path, [make_row(nbytes=8), make_row(nbytes=16)])
    rows = [json.loads(x) for x in (d / "cases.jsonl").read_text().splitlines()]
    rows[1]["median_s"] = None
    (d / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (warning,) = open_run(d).warnings
    assert warning.startswith("1 row(s) of cases.jsonl have no median time (null or not finite)")


def test_rows_of_another_kind_are_refused(tmp_path):
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path)
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, kind="workload")))
    (d / "cases.jsonl").write_text(json.dumps(make_row().to_dict()) + "\n")
    with pytest.raises(UsageError, match=rf"^{re.escape(repr(str(d)))} is a 'workload' run but its cases.jsonl "
                                         r"holds rows of another kind "
                                         r"\(no 'workload' column\)$"):
        open_run(d)


def test_files_that_are_not_text_are_corrupt(tmp_path):
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path, [make_row()])
    (d / "cases.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    with pytest.raises(UsageError, match=r"cases.jsonl' is corrupt \(not text\)$"):
        open_run(d)
    (d / "run.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match=r"run.json' is corrupt \(not JSON\)$"):
        open_run(d)
    (d / "run.json").write_text(json.dumps(["a", "list"]))
    with pytest.raises(UsageError, match=r"run.json' is not a ccbench run file \(schema None\)$"):
        open_run(d)


def test_runs_are_found_by_name_under_results_by_default(tmp_path, monkeypatch):
    from ccbench.store.run import open_run

    d = _sweep_run(tmp_path / "results", [make_row()])
    monkeypatch.chdir(tmp_path)
    assert open_run(d.name).path == Path("results") / d.name
    assert open_run(d.name).rows == [make_row()]
    other = _sweep_run(tmp_path / "elsewhere", [make_row(nbytes=128, count=32)])
    assert open_run(other.name, results_dir="elsewhere").rows == [make_row(nbytes=128, count=32)]
    q = re.escape(repr(str(tmp_path)))
    with pytest.raises(UsageError, match=rf"^{q} is not a ccbench run \(no run.json\)$"):
        open_run(tmp_path)
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, schema="ccbench.run/0")))
    with pytest.raises(UsageError, match=rf"^{re.escape(repr(str(d)))} has schema ccbench.run/0; this ccbench reads "
                                         r"ccbench.run/1 and ccbench.run/2: use the ccbench version that wrote it, or "
                                         r"re-run the sweep$"):
        open_run(d)


def test_a_refusal_names_every_kind_the_command_reads(tmp_path):
    from ccbench.store.kinds import RunKind, registered
    from ccbench.store.run import SWEEP, WORKLOAD, open_run

    d = _sweep_run(tmp_path, [make_row()])
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps(dict(meta, kind="lab")))
    with registered(RunKind("lab", Row, "collective", "lab run", "lab run", "case")), \
            pytest.raises(UsageError, match=r"is a 'lab' run; show reads collective sweeps or training-workload runs "
                                            r"only$"):
        open_run(d, kinds=(SWEEP, WORKLOAD), what="show")


def test_blank_lines_between_rows_are_skipped(tmp_path):
    d = _sweep_run(tmp_path, [make_row(), make_row(nbytes=128, count=32)])
    first, second = (d / "cases.jsonl").read_text().splitlines()
    (d / "cases.jsonl").write_text(f"{first}\n\n   \n{second}\n")
    assert open_run(d).rows == [make_row(), make_row(nbytes=128, count=32)]


def test_only_an_unterminated_last_line_is_torn(tmp_path):
    d = _sweep_run(tmp_path, [make_row()])
    good = (d / "cases.jsonl").read_text()
    (d / "cases.jsonl").write_text(good + '{"collective": "allre')
    opened = open_run(d)
    rows, warnings = opened.rows, opened.warnings
    assert len(rows) == 1 and warnings == ["dropped a torn last line of cases.jsonl (line 2)"]
    (d / "cases.jsonl").write_text(good + '{"collective": "allre\n  \n ')   # only blanks after it, no newline
    assert open_run(d).warnings == ["dropped a torn last line of cases.jsonl (line 2)"]
    (d / "cases.jsonl").write_text(good + '{"collective": "allre\n')       # a whole line, written and ended
    with pytest.raises(UsageError, match=r"line 2 is corrupt: "):
        open_run(d)
    (d / "cases.jsonl").write_text('{"collective": "allre\n' + good.rstrip("\n"))   # a bad line before a good one
    with pytest.raises(UsageError, match=r"cases.jsonl' line 1 is corrupt: "):
        open_run(d)
    (d / "cases.jsonl").write_text(good + json.dumps({"collective": "allreduce"}) + "\n")
    with pytest.raises(UsageError, match=r"line 2 is corrupt: missing columns \["):
        open_run(d)


def test_open_run_reads_either_kind_and_refuses_the_other_when_told(tmp_path):
    from ccbench.store.workload_rows import WORKLOAD_COLUMNS

    d = _sweep_run(tmp_path, [make_row()])
    with pytest.raises(UsageError, match=rf"^{re.escape(repr(str(d)))} is a 'sweep' run; workload --resume reads "
                                         r"training-workload runs only$"):
        open_run(d, kinds=("workload",), what="workload --resume")
    w = tmp_path / "wl"
    w.mkdir()
    rw = RunWriter(w, {"kind": "workload"}, columns=WORKLOAD_COLUMNS)
    rw.append(_workload_row())
    rw.close()
    with pytest.raises(UsageError, match=r"is a 'workload' run; fit reads collective sweeps only$"):
        open_run(w, kinds=("sweep",), what="fit")
    run = open_run(w)
    assert (run.kind, run.meta["kind"], run.rows, run.warnings) == ("workload", "workload", [_workload_row()], [])


def test_mark_failed_records_why_a_running_run_ended(tmp_path):
    from ccbench.store.run import mark_failed

    d = _sweep_run(tmp_path, [make_row(), make_row(nbytes=128, count=32)])
    assert mark_failed(d, "rank 3 was killed") is True
    meta = json.loads((d / "run.json").read_text())
    assert meta["status"] == "failed" and meta["failure"] == "rank 3 was killed" and meta["finished_cases"] == 2
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", meta["end_time"])
    assert meta["nranks"] == 4 and meta["schema"] == SCHEMA
    assert mark_failed(str(d), "again") is False                          # already final: left alone
    assert json.loads((d / "run.json").read_text())["failure"] == "rank 3 was killed"


def test_mark_failed_leaves_what_is_not_a_running_run(tmp_path):
    from ccbench.store.run import mark_failed

    assert mark_failed(tmp_path / "missing", "x") is False                # no run.json
    done = _sweep_run(tmp_path, [make_row()], status="complete")
    assert mark_failed(done, "x") is False
    assert json.loads((done / "run.json").read_text())["status"] == "complete"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "run.json").write_text(json.dumps({"schema": "pyperf/1", "status": "running"}))
    assert mark_failed(foreign, "x") is False
    assert json.loads((foreign / "run.json").read_text()) == {"schema": "pyperf/1", "status": "running"}
    (foreign / "run.json").write_text("[1, 2]")
    assert mark_failed(foreign, "x") is False
    (foreign / "run.json").write_bytes(b"\xff\xfe")
    assert mark_failed(foreign, "x") is False
    (foreign / "run.json").write_text("{not json")
    assert mark_failed(foreign, "x") is False


def test_mark_failed_counts_no_cases_when_they_cannot_be_read(tmp_path):
    from ccbench.store.run import mark_failed

    d = _sweep_run(tmp_path, [make_row()])
    (d / "cases.jsonl").write_text("garbage\n" + (d / "cases.jsonl").read_text())
    assert mark_failed(d, "crashed") is True
    meta = json.loads((d / "run.json").read_text())
    assert meta["finished_cases"] == 0 and meta["status"] == "failed"


def test_lab_block_is_read_from_the_top_or_the_provenance():
    from ccbench.store.run import lab_block

    lab = {"latency_s": 1e-6}
    assert lab_block({"lab": lab}) == lab
    assert lab_block({"provenance": {"lab": lab}}) == lab
    assert lab_block({"lab": lab, "provenance": {"lab": {"other": 1}}}) == lab   # the top level first
    assert lab_block({"lab": "on"}) is None and lab_block({"provenance": {"lab": [1]}}) is None
    assert lab_block({"provenance": "lab"}) is None and lab_block({}) is None


# -- rows, the writer and run directories, field by field (mutation testing of store/results.py) ------------


def test_launch_blocks_split_the_samples_in_launch_order():
    row = make_row(samples=5, samples_s=(1.0, 2.0, 3.0, 4.0, 5.0), launches=(4, 1, 7), launch_samples=(2, 1, 2))
    assert row.n_launches == 3
    assert row.launch_blocks() == [(4, (1.0, 2.0)), (1, (3.0,)), (7, (4.0, 5.0))]
    assert make_row().launch_blocks() == [(1, (1e-6, 2e-6, 3e-6))] and make_row().n_launches == 1


def test_to_dict_and_csv_dict_write_exactly_the_fields():
    from dataclasses import fields

    row = make_row(flags=("few_samples", "noisy"), settings={"UCX_TLS": "rc", "OMPI_X": "2"},
                   launches=(1, 3), launch_samples=(2, 1))
    d = row.to_dict()
    assert set(d) == {f.name for f in fields(Row)}
    assert d["samples_s"] == [1e-6, 2e-6, 3e-6] and type(d["samples_s"]) is list
    assert d["flags"] == ["few_samples", "noisy"] and type(d["flags"]) is list
    assert "samples_s" not in row.to_dict(raw=False)
    c = row.csv_dict()
    assert set(c) == set(d) - {"samples_s"}
    assert c["flags"] == "few_samples;noisy"
    assert c["settings"] == "UCX_TLS=rc;OMPI_X=2"
    assert (c["launches"], c["launch_samples"]) == ("1;3", "2;1")
    assert (c["nbytes"], c["algorithm"], c["msgs_max"]) == (64, "ring", 6)


def test_row_from_dict_keeps_settings_and_fills_them_when_absent():
    row = make_row(settings={"UCX_TLS": "rc"}, launches=(2, 5), launch_samples=(1, 2))
    back = Row.from_dict(json.loads(json.dumps(row.to_dict())))
    assert back == row and back.settings == {"UCX_TLS": "rc"} and back.launches == (2, 5)
    old = row.to_dict()
    del old["settings"], old["launches"], old["launch_samples"], old["samples_s"]
    old["samples"] = 0
    assert Row.from_dict(old).settings == {} and Row.from_dict(old).launches == ()
    assert Row.from_dict({**old, "settings": None}).settings == {}


def test_row_accepts_the_boundaries_and_names_each_refusal():
    assert make_row(nbytes=0, count=0, nranks=1, nwrong=0).nbytes == 0      # an empty case on one rank is a row
    for bad in ({"nbytes": -1}, {"count": -1}, {"nranks": 0}, {"nwrong": -1}):
        with pytest.raises(ValueError) as exc:
            make_row(**bad)
        assert str(exc.value) == "invalid row allreduce/ring: negative field"
    with pytest.raises(ValueError) as exc:
        make_row(samples=2)
    assert str(exc.value) == "samples does not match the raw samples kept"
    for bad, said in (({"launches": (1,), "launch_samples": ()}, "launches and launch_samples differ in length"),
                      ({"launches": (1, 2), "launch_samples": (1, 1)},
                       "launch_samples does not add up to the raw samples kept"),
                      ({"launches": (1, 1), "launch_samples": (1, 2)}, "a launch appears twice in one row")):
        with pytest.raises(ValueError) as exc:
            make_row(**bad)
        assert str(exc.value) == said


def test_write_json_atomic_writes_indented_json_in_the_given_order(tmp_path):
    from ccbench.store.results import write_json_atomic

    data = {"zeta": 1, "alpha": [1, 2], "mid": {"b": 2, "a": None}}
    p = tmp_path / "run.json"
    p.write_text("old")
    write_json_atomic(p, data)
    assert p.read_text() == json.dumps(data, indent=2) + "\n"
    assert list(json.loads(p.read_text())) == ["zeta", "alpha", "mid"]
    assert sorted(q.name for q in tmp_path.iterdir()) == ["run.json"]        # no temporary file left


def test_free_stem_and_free_path_number_from_two(tmp_path, monkeypatch):
    from ccbench.core.errors import CCBenchError
    from ccbench.store.results import free_path, free_stem

    assert free_stem(tmp_path, "fits", (".json", ".csv")) == "fits"
    (tmp_path / "fits.csv").write_text("")
    assert free_stem(tmp_path, "fits", (".json", ".csv")) == "fits-2"   # one name for the set of files
    (tmp_path / "fits-2.json").write_text("")
    assert free_stem(tmp_path, "fits", (".json", ".csv")) == "fits-3"
    assert free_path(tmp_path, "report") == tmp_path / "report"
    (tmp_path / "report.md").write_text("")
    assert free_path(tmp_path, "report", ".md") == tmp_path / "report-2.md"
    assert free_path(tmp_path, "report", ".txt") == tmp_path / "report.txt"
    # the names run out at stem-9999: stem-10000 is never tried
    monkeypatch.setattr(Path, "exists", lambda self: not self.name.endswith("-10000"))
    with pytest.raises(CCBenchError) as exc:
        free_stem(tmp_path, "x")
    assert str(exc.value) == f"too many x* in {tmp_path}"


def test_new_numbered_dir_takes_the_next_name_after_a_race(tmp_path, monkeypatch):
    from ccbench.core.errors import CCBenchError
    from ccbench.store.results import new_numbered_dir

    real_mkdir = Path.mkdir
    calls = []

    def racing_mkdir(self, *a, **k):   # someone else makes the first name just before us
        calls.append(self.name)
        if len(calls) == 1:
            real_mkdir(self)
            raise FileExistsError(self)
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert new_numbered_dir(tmp_path, "d") == tmp_path / "d-2" and calls == ["d", "d-2"]
    calls.clear()

    def always_taken(self, *a, **k):
        calls.append(self.name)
        raise FileExistsError(self)

    monkeypatch.setattr(Path, "mkdir", always_taken)
    with pytest.raises(CCBenchError) as exc:
        new_numbered_dir(tmp_path, "e")
    assert str(exc.value) == f"cannot find a free name for e in {tmp_path}" and len(calls) == 100
    monkeypatch.undo()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError) as exc:
        new_numbered_dir(f, "d")
    assert str(exc.value) == f"cannot create a directory in {str(f)!r}: Not a directory"


def test_new_run_dir_names_the_time_host_ranks_and_tag(tmp_path, monkeypatch):
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "node7.cluster.example.org")
    root = tmp_path / "a" / "b" / "results"                       # parents are made
    d = new_run_dir(root, 4)
    assert d.parent == root and d.is_dir()
    assert re.fullmatch(r"\d{8}-\d{6}_node7_np4", d.name), d.name
    t = new_run_dir(root, 2, "L01")
    assert re.fullmatch(r"\d{8}-\d{6}_node7_np2_L01", t.name), t.name
    monkeypatch.setattr(socket, "gethostname", lambda: "")
    assert re.fullmatch(r"\d{8}-\d{6}_host_np1", new_run_dir(root, 1).name)
    assert new_run_dir(root, 2, "a\xa0b").name.endswith("_np2_a\xa0b")  # a no-break space is printable
    with pytest.raises(UsageError) as exc:
        new_run_dir(root, 2, "a\x9fb")
    assert str(exc.value) == "tag 'a\\x9fb' cannot name a run directory: it holds the control character '\\x9f'"


def test_new_run_dir_says_why_it_cannot_make_the_directory(tmp_path, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError) as exc:
        new_run_dir(f / "sub", 2)
    assert str(exc.value) == f"results directory {str(f / 'sub')!r} cannot be created: Not a directory"
    root = tmp_path / "ro"
    root.mkdir()
    modes = []

    def access(path, mode):   # a results directory without write permission (root ignores chmod)
        modes.append(mode)
        return not mode & os.W_OK

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(UsageError) as exc:
        new_run_dir(root, 2)
    assert str(exc.value) == f"results directory {str(root)!r} is not writable" and modes == [os.W_OK | os.X_OK]
    monkeypatch.undo()
    real_mkdir = Path.mkdir

    def refused(self, *a, **k):
        if self.parent == root:
            raise PermissionError(13, "Permission denied", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(UsageError) as exc:
        new_run_dir(root, 2)
    assert str(exc.value) == f"cannot create a run in {str(root)!r}: Permission denied"


def test_run_writer_counts_rows_records_the_run_and_checks_the_status(tmp_path, monkeypatch):
    record = tmp_path / "record"
    monkeypatch.setenv("CCBENCH_RUN_RECORD", str(record))
    d = tmp_path / "run"
    d.mkdir()
    w = RunWriter(d, {"nranks": 4})
    assert record.read_text() == str(d)          # the launcher's process learns where the run is
    assert w.rows == 0
    assert json.loads((d / "run.json").read_text()) == {"nranks": 4, "schema": SCHEMA, "status": "running"}
    w.append(make_row())
    w.append(make_row(nbytes=128, count=32))
    assert w.rows == 2
    w.update(end_time="2026-11-27T01:00:00+0000")  # fields without a status
    assert json.loads((d / "run.json").read_text())["end_time"] == "2026-11-27T01:00:00+0000"
    with pytest.raises(ValueError) as exc:
        w.update(status="bogus")
    assert str(exc.value) == "bogus"
    assert json.loads((d / "run.json").read_text())["status"] == "running"
    w.update(status="interrupted")
    w.close()
    assert json.loads((d / "run.json").read_text())["status"] == "interrupted"
    assert RunWriter(d, {}, rows=2).rows == 2


def test_resolve_run_by_path_file_name_and_latest(tmp_path, monkeypatch):
    root = tmp_path / "results"
    runs = []
    # started newest, oldest, in between; the directories' times say the opposite (a fit, a copy, a resume)
    for name, start, mtime in (("a-newest", "2026-11-27T03:00:00+0000", 1000),
                               ("b-oldest", "2026-11-27T01:00:00+0000", 3000),
                               ("c-middle", "2026-11-27T04:00:00+0200", 2000)):  # 02:00 UTC
        r = root / name
        r.mkdir(parents=True)
        (r / "run.json").write_text(json.dumps({"start_time": start}))
        for f in ("cases.jsonl", "cases.csv", "notes.txt"):
            (r / f).write_text("")
        os.utime(r, (mtime, mtime))
        os.utime(r / "run.json", (mtime, mtime))
        runs.append(r)
    (root / "z-not-a-run").mkdir()                         # newest, but no run.json
    (root / "stray.json").write_text("{}")
    assert resolve_run("latest", root) == runs[0]
    assert resolve_run(Path("latest"), str(root)) == runs[0]
    for f in ("run.json", "cases.jsonl", "cases.csv"):
        assert resolve_run(runs[1] / f) == runs[1]
    with pytest.raises(UsageError) as exc:
        resolve_run(runs[1] / "notes.txt", root)
    assert str(exc.value) == (f"no run at {str(runs[1] / 'notes.txt')!r} (give a run directory, its name under "
                              f"{str(root)!r}, or latest)")
    with pytest.raises(UsageError):
        resolve_run(tmp_path / "gone" / "run.json", root)      # a run file's name, but no such file
    monkeypatch.chdir(tmp_path)
    assert resolve_run("c-middle") == Path("results") / "c-middle"   # under ./results by default
    assert resolve_run("latest") == Path("results") / "a-newest"
    # a tie in start time goes to the later name; a run without a readable start time is never preferred
    tie = root / "d-tie"
    tie.mkdir()
    (tie / "run.json").write_text(json.dumps({"start_time": "2026-11-27T03:00:00+0000"}))
    assert resolve_run("latest", root) == tie
    for bad in ("{}", "not json", json.dumps({"start_time": "yesterday"}), json.dumps({"start_time": None})):
        (root / "z-no-start").mkdir(exist_ok=True)
        (root / "z-no-start" / "run.json").write_text(bad)
        assert resolve_run("latest", root) == tie
    for r in (*runs, tie):
        (r / "run.json").write_text("{}")
    assert resolve_run("latest", root) == root / "z-no-start"   # none has a start time: by name
    for empty in (tmp_path / "empty", tmp_path / "missing"):
        if empty.name == "empty":
            empty.mkdir()
        with pytest.raises(UsageError) as exc:
            resolve_run("latest", empty)
        assert str(exc.value) == f"no runs under {str(empty)!r}"


def test_rows_and_run_json_are_strict_json_and_older_runs_with_nan_still_load(tmp_path):
    """One-sample and imported rows hold NaN (stddev, an unknown interval): written as null, so that strict parsers
    (JavaScript's, Go's, jq) read the file; read back as NaN.  A /1 run holding NaN loads as it did."""
    import math

    nan_row = make_row(stddev_s=math.nan, ci_low_s=math.nan, ci_high_s=math.inf)
    d = _sweep_run(tmp_path, [nan_row])
    RunWriter(d, {"lab": {"rate_bps": math.nan}}).close()  # run.json too

    def refuse(token):
        raise ValueError(f"not strict JSON: {token}")

    for line in (d / "cases.jsonl").read_text().splitlines():
        row = json.loads(line, parse_constant=refuse)
        assert row["stddev_s"] is None and row["ci_high_s"] is None
    meta = json.loads((d / "run.json").read_text(), parse_constant=refuse)
    assert meta["schema"] == "ccbench.run/2" and meta["lab"] == {"rate_bps": None}
    (back,) = open_run(d).rows
    assert math.isnan(back.stddev_s) and math.isnan(back.ci_low_s) and math.isnan(back.ci_high_s)
    assert back.median_s == nan_row.median_s and back.rank_mean_min_s is None  # an absent value stays absent
    old = tmp_path / "old"
    old.mkdir()
    (old / "run.json").write_text(json.dumps({"schema": "ccbench.run/1", "status": "complete"}))
    (old / "cases.jsonl").write_text(json.dumps(nan_row.to_dict()) + "\n")  # NaN, as /1 wrote it
    (loaded,) = open_run(old).rows
    assert math.isnan(loaded.stddev_s) and loaded.median_s == nan_row.median_s


# -- a resume reopens the tables; a merge of launches installs a whole run ------------------------------------


def test_reopening_keeps_blank_lines_between_the_kept_rows_and_cuts_after_the_last(tmp_path):
    rows = [workload_row("a", -1), workload_row("a", 0), workload_row("b", -1)]
    lines = [json.dumps(r.to_dict()) for r in rows]
    text = lines[0] + "\n\n" + lines[1] + "\n  \n" + lines[2] + "\n"
    (tmp_path / "cases.jsonl").write_text(text)
    reopen_tables(tmp_path, rows[:2], WORKLOAD_COLUMNS)
    assert (tmp_path / "cases.jsonl").read_text() == lines[0] + "\n\n" + lines[1] + "\n"
    reopen_tables(tmp_path, rows[:2], WORKLOAD_COLUMNS)  # nothing more to cut
    assert (tmp_path / "cases.jsonl").read_text() == lines[0] + "\n\n" + lines[1] + "\n"
    reopen_tables(tmp_path, [], WORKLOAD_COLUMNS)
    assert (tmp_path / "cases.jsonl").read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.csv", "cases.jsonl"]  # no temporary file left


def test_reopening_a_table_that_starts_with_a_blank_line_leaves_it_as_it_was(tmp_path):
    rows = [workload_row("a", -1), workload_row("a", 0)]
    text = "\n" + "".join(json.dumps(r.to_dict()) + "\n" for r in rows)
    (tmp_path / "cases.jsonl").write_text(text)
    reopen_tables(tmp_path, rows, WORKLOAD_COLUMNS)
    assert (tmp_path / "cases.jsonl").read_text() == text  # its rows all kept, no newline added


def test_reopening_finishes_a_whole_last_row_and_rebuilds_the_csv_from_the_rows(tmp_path):
    rows = [workload_row("a", -1), workload_row("b", -1)]
    lines = [json.dumps(r.to_dict()) for r in rows]
    (tmp_path / "cases.jsonl").write_text(lines[0] + "\n" + lines[1])         # its newline never written
    (tmp_path / "cases.csv").write_text("torn,csv\n1,2,3")
    reopen_tables(tmp_path, rows, WORKLOAD_COLUMNS)
    assert (tmp_path / "cases.jsonl").read_text() == lines[0] + "\n" + lines[1] + "\n"
    with open(tmp_path / "cases.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == WORKLOAD_COLUMNS and len(table) == 3 and table[2][:2] == ["ddp", "b"]
    reopen_tables(tmp_path, [], None)                                          # a sweep's columns by default
    assert (tmp_path / "cases.csv").read_text().splitlines() == [",".join(CSV_COLUMNS)]


def test_installing_a_merged_run_replaces_the_tables_and_run_json_and_removes_the_merge(tmp_path):
    dest, merged = tmp_path / "run", tmp_path / "run" / ".merging"
    merged.mkdir(parents=True)
    for name in ("cases.jsonl", "cases.csv", "run.json"):
        (dest / name).write_text("old " + name)
        (merged / name).write_text("new " + name)
    (dest / "parts").mkdir()
    install_run(merged, dest)
    assert sorted(p.name for p in dest.iterdir()) == ["cases.csv", "cases.jsonl", "parts", "run.json"]
    assert all((dest / n).read_text() == "new " + n for n in ("cases.jsonl", "cases.csv", "run.json"))
