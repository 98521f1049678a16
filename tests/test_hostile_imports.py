"""Hostile inputs at the door of `ccbench import` and the gates behind it: a file per case that went wrong at e066e41
(silently stored nan, inf, negative and zero times, impossible sizes and rank counts, unknown dtypes and ops,
duplicate sizes, lines cut short, an interrupted import that said it was complete), and generated files: every parse
either refuses with one line or yields only times within bounds."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccbench.core.errors import UsageError
from ccbench.core.units import MAX_TIME_S, MIN_TIME_S
from ccbench.store import imports
from ccbench.store.imports import import_files, parse_csv, parse_imb, parse_nccl_tests, parse_osu

REPO = Path(__file__).resolve().parents[1]

OSU_HEAD = ("# OSU MPI Allreduce Latency Test v7.4\n# Datatype: MPI_CHAR.\n"
            "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n")
IMB_HEAD = ("#    Intel(R) MPI Benchmarks 2021.7, MPI-1 part\n#----------------------------------------------------"
            "-------------\n# Benchmarking Allreduce\n# #processes = 2\n#------------------------------------------"
            "-----------------------\n       #bytes #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]\n")
CSV_HEAD = "collective,algorithm,nranks,nbytes,time_s,dtype,op\n"
NCCL_HEAD = ("# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 8(factor) "
             "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#  Rank  0 Group  0 Pid  1 on h device  0 "
             "[0x1a] GPU\n#  Rank  1 Group  0 Pid  2 on h device  1 [0x1b] GPU\n#       size         count      type   "
             "redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n")
NCCL_ROW = "  8  2  float  sum  -1  41.37  0.00  0.00  0  40.95  0.00  0.00"  # but the in-place #wrong

# (file name, content, words of the one-line refusal)
CASES = [
    ("nan.osu", OSU_HEAD + "8  nan  3.01  3.28  1000\n", "line 4: avg latency(us) 'nan' us is not a time"),
    ("inf.osu", OSU_HEAD + "8  3.15  inf  3.28  1000\n", "line 4: min latency(us) 'inf' us is not a time"),
    ("negative.osu", OSU_HEAD + "8  -3.15  3.01  3.28  1000\n", "'-3.15' us is not a time"),
    ("zero.osu", OSU_HEAD + "8  0  0  0  1000\n", "'0' us is not a time"),
    ("huge.osu", OSU_HEAD + "100000000000000000000000000  3.15  3.01  3.28  1000\n", "the size is outside"),
    ("twice.osu", OSU_HEAD + "8  3.15  3.01  3.28  1000\n8  3.16  3.02  3.29  1000\n", "appears twice"),
    ("cut.osu", OSU_HEAD + "8  3.15  3.01  3.28  1000\n1048576  90", "line 5: 2 values under 5 columns"),
    ("word.imb", IMB_HEAD + "            8         1000         1.01         x.20         1.10\n",
     "t_max[usec] 'x.20' is not a number"),
    ("cut.imb", IMB_HEAD + "       8    1000    1.01    1.20    1.10\n       1024   1000\n",
     "line 8: 2 values under 5 columns"),
    ("nan.imb", IMB_HEAD + "       8    1000    nan    1.20    1.10\n", "'nan' us is not a time"),
    ("dtype.csv", CSV_HEAD + "allreduce,ring,4,8,1e-6,float128,sum\n", "unknown dtype 'float128'"),
    ("op.csv", CSV_HEAD + "allreduce,ring,4,8,1e-6,float32,xor\n", "unknown op 'xor'"),
    ("ranks.csv", CSV_HEAD + "allreduce,ring,3000000000,8,1e-6,float32,sum\n", "the rank count is outside"),
    ("tiny.csv", CSV_HEAD + "allreduce,ring,4,8,1e-320,float32,sum\n", "time_s '1e-320' is not a time"),
    ("inf.csv", CSV_HEAD + "allreduce,ring,4,8,inf,float32,sum\n", "time_s 'inf' is not a time"),
    # a file cut mid-number reads as a number all the same: its last line has no line end
    ("cut-2col.osu", "# OSU MPI Allreduce Latency Test v7.4\n# Size       Avg Latency(us)\n8    3.15\n1048576    90",
     "line 4: the last line has no line end"),
    ("cut.csv", CSV_HEAD + "allreduce,ring,4,8,1e-6,float32,sum\nallreduce,ring,4,16,9", "line 3: the last line"),
    ("cut-last.imb", IMB_HEAD + "       8    1000    1.01    1.20    1.10\n       1024   1000   2.00   3.00   2.",
     "line 8: the last line has no line end"),
    ("cut.nccl", NCCL_HEAD + NCCL_ROW + "  0\n  64  16  float  sum  -1  41.82  0.00  0.00  0  41",
     "line 7: the last line has no line end"),
    ("half.nccl", NCCL_HEAD + NCCL_ROW[:-12] + "\n", "5 values after the parameters"),
    ("wrong.nccl", NCCL_HEAD + NCCL_ROW + "  nan\n", "#wrong nan is not a count of elements"),
    ("ragged.csv", CSV_HEAD + "allreduce,ring,4,7,1e-6,float32,sum\n", "not a whole number of 4-byte float32 elements"),
    ("blocks.csv", CSV_HEAD + "allgather,ring,3,16,1e-6,float32,\n", "not a whole number of blocks of 3 x 4-byte"),
]


@pytest.mark.parametrize(("name", "text", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_hostile_file_is_refused_in_one_line_and_nothing_is_written(tmp_path, name, text, words):
    f = tmp_path / name
    f.write_text(text)
    fmt = {"osu": "osu", "imb": "imb", "csv": "csv", "nccl": "nccl-tests"}[name.rsplit(".", 1)[1]]
    r = subprocess.run([sys.executable, "-m", "ccbench", "import", str(f), "--format", fmt, "--nranks", "4",
                        "--results-dir", str(tmp_path / "results")], capture_output=True, text=True, cwd=REPO,
                       timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and words in r.stderr and str(f) in r.stderr, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def _nccl_json(time, nwrong=0):
    return {"version": 2, "nccl_version": 22304, "args": ["all_reduce_perf"],
            "config": {"nthreads": 1, "ngpus": 1, "devices": [{"rank": 0, "hostname": "h", "device_info": "gpu"}]},
            "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1,
                         "out_of_place": {"time": time, "nwrong": nwrong}}]}


@pytest.mark.parametrize(("time", "nwrong", "words"), [
    (math.nan, 0, "is not a time"), (math.inf, 0, "is not a time"), (-1.0, 0, "is not a time"),
    (0.0, 0, "is not a time"), (True, 0, "is not a time"),
    # a wrong-element count of NaN or 1.5 was stored as 0 or 1 wrong
    (10.0, math.nan, "#wrong nan is not a count"), (10.0, 1.5, "#wrong 1.5 is not a count")])
def test_nccl_tests_json_with_an_impossible_time_is_refused(tmp_path, time, nwrong, words):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(_nccl_json(time, nwrong)))  # Python writes NaN and Infinity, as a careless tool would
    with pytest.raises(UsageError, match=words):
        import_files([f], "nccl-tests", results_dir=tmp_path / "results")
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_a_row_s_count_is_elements_where_the_tool_prints_bytes(tmp_path):
    """OSU's and IMB's sizes are bytes: a float32 row of 8 bytes has 2 elements (it said 8, and export wrote 8)."""
    osu = tmp_path / "f.osu"
    osu.write_text(OSU_HEAD.replace("MPI_CHAR", "MPI_FLOAT") + "4  3.15  3.01  3.28  1000\n8  3.25  3.11  3.38  1000\n")
    imb = tmp_path / "r.imb"
    imb.write_text(IMB_HEAD + "       8    1000    1.01    1.20    1.10\n")
    _, (o, i) = import_files([osu, imb], nranks=4, results_dir=tmp_path / "results")
    assert [(r.dtype, r.nbytes, r.count) for r in o.rows] == [("float32", 4, 1), ("float32", 8, 2)]
    assert [(r.dtype, r.nbytes, r.count) for r in i.rows] == [("float32", 8, 2)]


def test_an_interrupted_import_leaves_no_run_that_says_it_is_complete(tmp_path, monkeypatch):
    """Ctrl-C while the rows were written left 1,140 of 5,000 rows under a run.json saying complete at e066e41."""
    from ccbench.store.results import RunWriter

    f = tmp_path / "t.csv"
    f.write_text(CSV_HEAD + "".join(f"allreduce,ring,4,{8 << i},{1e-6 * (i + 1)!r},float32,sum\n" for i in range(30)))

    def interrupted(self, rows):
        for i, row in enumerate(rows):
            if i == 10:
                raise KeyboardInterrupt
            self.append(row)

    monkeypatch.setattr(RunWriter, "extend", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_files([f], "csv", results_dir=tmp_path / "results")
    assert list((tmp_path / "results").iterdir()) == []  # neither the run nor the folder written aside
    monkeypatch.undo()
    dest, _ = import_files([f], "csv", results_dir=tmp_path / "results")
    assert [p.name for p in (tmp_path / "results").iterdir()] == [dest.name]
    meta = json.loads((dest / "run.json").read_text())
    assert meta["status"] == "complete" and meta["finished_cases"] == 30
    assert len((dest / "cases.jsonl").read_text().splitlines()) == 30


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_an_import_leaves_nothing_and_says_so_in_one_line(tmp_path, sig):
    """A batch system's SIGTERM or a closed terminal's SIGHUP killed the import outright and left its folder aside,
    rows and all, in the results folder.  The file is a pipe, so the import is surely reading when the signal comes."""
    fifo, res = tmp_path / "t.csv", tmp_path / "results"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "ccbench", "import", str(fifo), "--format", "csv", "--results-dir",
                          str(res)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    with open(fifo, "w") as f:
        f.write(CSV_HEAD + "".join(f"allreduce,ring,4,{8 << i},{1e-6 * (i + 1)!r},float32,sum\n" for i in range(20)))
        f.flush()
        deadline = time.monotonic() + 60
        while not list(res.glob(".import-*")) and time.monotonic() < deadline:
            time.sleep(0.02)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, out + err
    assert err == f"ccbench: error: stopped by {sig.name}: nothing was imported\n"
    assert list(res.iterdir()) == []


def test_a_killed_import_s_folder_aside_goes_at_the_next_import_of_its_host(tmp_path):
    """SIGKILL cannot be caught: the next import on the same host removes what it left; another host's is kept (a
    results folder on a shared file system)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    res = tmp_path / "results"
    left = res / f".import-{socket.gethostname()}-{dead.pid}-1.importing"
    other = res / f".import-another-host-{os.getpid()}-1.importing"
    for d in (left, other):
        d.mkdir(parents=True)
        (d / "cases.jsonl").write_text("{}\n")
    f = tmp_path / "t.csv"
    f.write_text(CSV_HEAD + "allreduce,ring,4,8,1e-6,float32,sum\n")
    dest, _ = import_files([f], "csv", results_dir=res)
    assert sorted(p.name for p in res.iterdir()) == sorted([dest.name, other.name])


def test_check_of_an_imported_case_holds_only_a_real_time(tmp_path):
    """The symptom end to end: at e066e41 an OSU file of nan imported and 'check' said '1 of 1 references hold'."""
    f = tmp_path / "ok.osu"
    f.write_text(OSU_HEAD.replace("Datatype: MPI_CHAR", "Number of processes: 4\n# Datatype: MPI_CHAR")
                 + "8  3.15  3.01  3.28  1000\n")
    dest, _ = import_files([f], "osu", results_dir=tmp_path / "results")
    refs = tmp_path / "refs.csv"
    refs.write_text("collective,algorithm,nbytes,value,lower,upper\nallreduce,native,8,3.15e-6,-0.1,0.1\n")
    run = [sys.executable, "-m", "ccbench", "check", str(dest), "--reference", str(refs)]
    r = subprocess.run(run, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0 and "1 of 1 references hold" in r.stdout
    rows = [json.loads(x) for x in (dest / "cases.jsonl").read_text().splitlines()]
    rows[0]["median_s"] = float("nan")  # a run corrupted after the door: the gate still fails
    (dest / "cases.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    r = subprocess.run(run, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 1 and "0 of 1 references hold; 1 do not" in r.stdout and "not a time" in r.stdout


# -- generated files ---------------------------------------------------------------------------

_TOKEN = st.one_of(st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e-320", "1e400", "x", "", "3.15", "1000",
                                    "8", "1e26", "-0", "0.00"]),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.integers(min_value=-10, max_value=10 ** 30).map(str))
_LINE = st.lists(_TOKEN, min_size=0, max_size=7).map("  ".join)


def _parse_or_refuse(parse, text: str, where: str) -> None:
    """`parse` then the door's check: one line of refusal, or rows whose every time is within bounds."""
    try:
        parsed = parse(text, where)
        imports.check_rows(parsed.rows, where)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    for r in parsed.rows:
        for name in ("median_s", "min_s", "max_s", "rank_mean_min_s", "rank_mean_max_s"):
            t = getattr(r, name)
            assert t is None or MIN_TIME_S <= t <= MAX_TIME_S, (name, t)


GENERATED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@GENERATED
@given(st.lists(_LINE, min_size=1, max_size=6))
def test_generated_osu_files_parse_to_sound_rows_or_one_usage_error(lines):
    _parse_or_refuse(lambda t, w: parse_osu(t, 4, where=w), OSU_HEAD + "\n".join(lines) + "\n", "gen.osu")


@GENERATED
@given(st.lists(_LINE, min_size=1, max_size=6))
def test_generated_imb_files_parse_to_sound_rows_or_one_usage_error(lines):
    _parse_or_refuse(lambda t, w: parse_imb(t, where=w), IMB_HEAD + "\n".join("   " + ln for ln in lines) + "\n",
                     "gen.imb")


_CSV_FIELD = st.one_of(_TOKEN, st.sampled_from(["allreduce", "ring", "float32", "sum", "float128", "xor", "bcast"]))


@GENERATED
@given(st.lists(st.lists(_CSV_FIELD, min_size=7, max_size=7).map(",".join), min_size=1, max_size=6))
def test_generated_csv_files_parse_to_sound_rows_or_one_usage_error(lines):
    _parse_or_refuse(lambda t, w: parse_csv(t, where=w), CSV_HEAD + "\n".join(lines) + "\n", "gen.csv")


_FOREIGN = REPO / "tests" / "data" / "foreign"
_WHOLE = [(lambda t, w: parse_osu(t, 4, where=w), (_FOREIGN / "osu_allreduce_np4_full.txt").read_text()),
          (lambda t, w: parse_osu(t, 4, where=w), (_FOREIGN / "osu_allgather_np4.txt").read_text()),
          (lambda t, w: parse_imb(t, where=w), (_FOREIGN / "imb_np2.txt").read_text()),
          (lambda t, w: parse_nccl_tests(t, where=w), (_FOREIGN / "nccl_all_reduce_perf_2x4.txt").read_text()),
          (lambda t, w: parse_csv(t, where=w), CSV_HEAD + "".join(f"allreduce,ring,4,{8 << i},{1.25e-6 * (i + 1)!r},"
                                                                   f"float32,sum\n" for i in range(12)))]


def _key(r) -> tuple:
    return r.collective, r.nbytes, r.count, r.in_place, r.nwrong, r.median_s, r.min_s, r.max_s


def test_an_imb_file_cut_right_after_benchmarking_keeps_the_blocks_before():
    """Cut after "# Benchmarking " and before the block's name (found by the generated test below): the blocks
    before it are read, the nameless one holds no rows."""
    text = (_FOREIGN / "imb_np2.txt").read_text()
    cut = text[:text.rindex("# Benchmarking ") + len("# Benchmarking ")]
    whole = [_key(r) for r in parse_imb(text, where="whole").rows]
    rows = [_key(r) for r in parse_imb(cut, where="cut").rows]
    assert rows and rows == whole[:len(rows)]


@GENERATED
@given(st.sampled_from(range(len(_WHOLE))), st.floats(min_value=0.0, max_value=1.0))
def test_a_file_cut_at_any_byte_is_refused_or_gives_the_whole_file_s_first_rows(which, where):
    """A copy of a file still being written, a killed job, a full disk: a cut mid-number reads as a number all the
    same ("90.12" cut to "90"), so every cut either is refused in one line or keeps only whole rows of the file."""
    parse, text = _WHOLE[which]
    full = [_key(r) for r in parse(text, "whole").rows]
    try:
        parsed = parse(text[:round(where * len(text))], "cut")
        imports.check_rows(parsed.rows, "cut")
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    rows = [_key(r) for r in parsed.rows]
    assert rows == full[:len(rows)]
