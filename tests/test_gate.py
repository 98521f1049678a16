"""Regression gates: compare --fail-on and check --reference (analysis.gate), on synthetic pairs and stored runs."""

import dataclasses
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ccbench.analysis.gate import check_references, gate_failures, parse_fail_on, read_references
from ccbench.core.errors import UsageError
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]
NP4, NP4_SINGLE = REPO / "tests" / "data" / "run-np4", REPO / "tests" / "data" / "run-np4-single"


def _pair(verdict, ratio, lo, hi, nbytes=8, a=1e-6, b=None):
    return SimpleNamespace(other="B", collective="allreduce", algorithm="ring", nbytes=nbytes, dtype="float32",
                           op="sum", verdict=verdict, ratio=ratio, ratio_low=lo, ratio_high=hi, median_a_s=a,
                           median_b_s=a * ratio if b is None else b)


def test_fail_on_needs_a_decided_verdict_beyond_the_margin():
    pairs = [_pair("slower", 1.3, 1.2, 1.4, 8), _pair("slower", 1.08, 1.03, 1.12, 64),
             _pair("noise", 1.5, 0.9, 2.5), _pair("undetermined", 3.0, 1.1, 8.0), _pair("faster", 0.5, 0.4, 0.6, 512),
             _pair("untested", 2.0, None, None)]
    assert [f.case for f in gate_failures(pairs, "slower", 0.0)] == ["allreduce/ring 8 B float32 sum",
                                                                    "allreduce/ring 64 B float32 sum"]
    # 5%: the 64 B case's interval starts at 1.03, not beyond 1.05
    assert [f.ratio for f in gate_failures(pairs, "slower", 0.05)] == [1.3]
    assert [f.ratio for f in gate_failures(pairs, "faster", 0.5)] == [0.5]   # 0.6 <= 1 / 1.5
    assert [f.ratio for f in gate_failures(pairs, "faster", 0.7)] == []      # 0.6 > 1 / 1.7
    assert [f.verdict for f in gate_failures(pairs, "different", 0.1)] == ["slower", "faster"]


@pytest.mark.parametrize("a, b", [(math.nan, 1e-6), (1e-6, math.nan), (1e-6, math.inf), (0.0, 1e-6), (1e-6, -1e-6)])
def test_a_gate_fails_on_what_it_could_not_compare(a, b):
    """A NaN compares false with everything, so it would pass any margin: it fails the gate instead."""
    pairs = [_pair("noise", 1.0, 0.9, 1.1), _pair("undetermined", 1.0, None, None, 64, a=a, b=b)]
    for what in ("slower", "faster", "different"):
        (f,) = gate_failures(pairs, what, 0.5)
        assert (f.case, f.verdict, f.ratio) == ("allreduce/ring 64 B float32 sum", "not a time", None)


def test_a_gate_fails_when_another_run_lacks_cases_of_run_a():
    ok = [_pair("noise", 1.0, 0.9, 1.1)]
    assert gate_failures(ok, "slower", 0.0, unmatched={"B": (0, 3)}) == []  # cases only in B: nothing lost
    (f,) = gate_failures(ok, "slower", 0.0, unmatched={"B": (2, 0), "C": (0, 0)})
    assert (f.other, f.case, f.verdict) == ("B", "2 case(s) of run A", "missing")


def test_a_gate_fails_when_compare_withheld_the_verdicts_of_a_run():
    """A run measured under load has no verdicts (compare withholds them): the gate cannot pass it, and says why."""
    ok = [_pair("undetermined", 3.0, 2.5, 3.5)]
    assert gate_failures(ok, "slower", 0.0, withheld={}) == []
    (f,) = gate_failures(ok, "slower", 0.0, withheld={"B": ["other processes used 45% of the machine's CPU time"]})
    assert (f.other, f.verdict) == ("B", "withheld") and "45%" in f.case


def test_a_gate_names_a_plugin_kind_s_case_by_its_key(tmp_path):
    from ccbench.analysis.compare import make_pair, pair_type, test_pairs

    cls = pair_type("ProbePair", (("exchange", str), ("nbytes", int)))
    row = SimpleNamespace(exchange="ring", nbytes=64, nranks=2, samples=3, median_s=1e-6, ci_low_s=0.9e-6,
                          ci_high_s=1.1e-6, n_launches=1, launch_blocks=lambda: [(1, (1e-6, 1.1e-6, 0.9e-6))])
    slow = SimpleNamespace(**{**vars(row), "median_s": 4e-6, "launch_blocks": lambda: [(1, (4e-6, 4.1e-6, 3.9e-6))]})
    (a, b, test), = test_pairs([(row, slow)], 0.05, launch_cv=0.01)
    pair = make_pair(cls, "A", "B", a, b, test)
    (f,) = gate_failures([pair], "slower", 0.0)
    assert f.case == "ring 64" and f.verdict == "slower"


@pytest.mark.parametrize("text, want", [("slower", ("slower", 0.0)), ("slower:5%", ("slower", 0.05)),
                                        ("faster:0.1", ("faster", 0.1)), ("different", ("different", 0.0))])
def test_parse_fail_on(text, want):
    assert parse_fail_on(text) == pytest.approx(want) and parse_fail_on(text)[0] == want[0]


@pytest.mark.parametrize("text", ["worse", "slower:x", "slower:-5%", "slower:2000%"])
def test_parse_fail_on_refuses(text):
    with pytest.raises(UsageError):
        parse_fail_on(text)


def _ccbench(*args):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={"COLUMNS": "200", "PATH": ""})


def test_compare_fail_on_exits_1_on_a_real_slowdown_and_0_on_an_a_a_pair(tmp_path):
    r = _ccbench("compare", str(NP4), str(NP4_SINGLE), "--no-plot", "--out", str(tmp_path / "a"), "--fail-on",
                 "slower:50%")
    assert r.returncode == 1 and "--fail-on slower: cases decided slower" in r.stdout
    copy = tmp_path / "copy"
    shutil.copytree(NP4, copy)
    r = _ccbench("compare", str(NP4), str(copy), "--no-plot", "--out", str(tmp_path / "b"), "--fail-on", "different")
    assert r.returncode == 0 and "no case decided different" in r.stdout
    r = _ccbench("compare", str(NP4), str(copy), "--no-plot", "--out", str(tmp_path / "c"), "--fail-on", "worse")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0


def _refs(tmp_path, rows, scale=1.0, extra=()):
    path = tmp_path / "refs.csv"
    lines = ["collective,algorithm,nbytes,value,lower,upper"]
    lines += [f"{r.collective},{r.algorithm},{r.nbytes},{r.median_s * scale!r},-0.1,0.1" for r in rows]
    path.write_text("\n".join([*lines, *extra]) + "\n")
    return path


def test_check_fails_on_an_imported_nan_instead_of_holding_it(tmp_path):
    """An OSU file with nan latencies: a reference of that case must not hold (it held at e066e41)."""
    from ccbench.analysis.gate import Reference, check_references

    rows = [SimpleNamespace(collective="allreduce", algorithm="native", nbytes=8, dtype="float32", op="sum", ok=True,
                            median_s=m, ci_low_s=None, ci_high_s=None) for m in (math.nan,)]
    (res,) = check_references(rows, [Reference("allreduce", "native", 8, 1e-6, -0.5, 0.5)])
    assert res.status == "not a time" and res.measured_s is None
    (res,) = check_references(rows, [Reference("allreduce", "native", 8, 1e-6, None, None)])  # no bounds at all
    assert res.status == "not a time"


def test_check_passes_within_the_bounds_and_names_what_does_not(tmp_path):
    rows = open_run(NP4).rows
    some = [r for r in rows if r.collective == "allreduce" and r.algorithm == "native"][:3]
    r = _ccbench("check", str(NP4), "--reference", str(_refs(tmp_path, some)))
    assert r.returncode == 0 and "3 of 3 references hold" in r.stdout
    results = check_references(rows, read_references(_refs(tmp_path, some, scale=0.5)))
    assert [x.status for x in results] == ["slower"] * 3  # measured twice the reference: above +10%
    results = check_references(rows, read_references(_refs(tmp_path, some, scale=2.0)))
    assert [x.status for x in results] == ["faster"] * 3
    path = _refs(tmp_path, some[:1], extra=["allreduce,native,3,1e-6,-0.1,0.1"])
    r = _ccbench("check", str(NP4), "--reference", str(path))
    assert r.returncode == 1 and "missing" in r.stdout and "1 of 2 references hold; 1 do not" in r.stdout


def test_references_from_json_with_units_and_open_bounds(tmp_path):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([{"collective": "allreduce", "algorithm": "native", "nbytes": "4K", "value": "25us",
                                 "upper": "20%"}]))
    (ref,) = read_references(path)
    assert (ref.nbytes, ref.value_s, ref.lower, ref.upper) == (4096, pytest.approx(25e-6), None, pytest.approx(0.2))


@pytest.mark.parametrize("text, message", [
    ("collective,algorithm,nbytes\nallreduce,native,8\n", "missing value"),
    ("collective,algorithm,nbytes,value,lower\nallreduce,native,8,1e-6,0.2\n", "lower <= 0 <= upper"),
    ("collective,algorithm,nbytes,value\nallreduce,native,8,0\n", "value '0' is not a time (a finite number of "
                                                                  "seconds from 1e-12 to 86400)"),
    ("collective,algorithm,nbytes,value\nallreduce,native,8,1e300\n", "value '1e300' is not a time"),
    ("collective,algorithm,nbytes,value\nallreduce,native,8,86401\n", "value '86401' is not a time"),
    ("collective,algorithm,nbytes,value\nallreduce,native,8,-1\n", "a time must be >= 0"),
    ("collective,algorithm,nbytes,value\n", "holds no references"),
    # one case twice (8 and 8 B, the same dtype and op): which value holds would be a guess
    ("collective,algorithm,nbytes,value,upper\nallreduce,native,8,1us,0.1\nallreduce,native,8B,2us,0.1\n",
     "refs.csv line 3: a second reference for allreduce/native 8 B (the first: line 2); give each case one"),
    ('[{"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": true}]',
     "refs.json item 1: value True is not a number"),
])
def test_bad_reference_files_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / ("refs.json" if text.startswith("[") else "refs.csv")
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        read_references(path)
    r = _ccbench("check", str(NP4), "--reference", str(path))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and message.split()[0] in r.stderr


@pytest.mark.parametrize("lower, upper, ok", [
    ("0", "0", True),            # both bounds at the value: only the value itself holds
    ("-0.999", "", True),
    ("-1", "", False),           # a lower bound of -100% would allow a zero time
    ("0.0001", "", False),       # a lower bound above the value
    ("", "-0.0001", False),      # an upper bound below it
])
def test_relative_bounds_at_their_edges(tmp_path, lower, upper, ok):
    path = tmp_path / "refs.csv"
    path.write_text(f"collective,algorithm,nbytes,value,lower,upper\nallreduce,native,8,1us,{lower},{upper}\n")
    if ok:
        (ref,) = read_references(path)
        assert (ref.lower, ref.upper) == (float(lower) if lower else None, float(upper) if upper else None)
    else:
        with pytest.raises(UsageError, match=re.escape("refs.csv line 2: need -1 < lower <= 0 <= upper")):
            read_references(path)


def test_a_reference_names_its_dtype_and_op_and_a_number_of_seconds(tmp_path):
    path = tmp_path / "refs.json"
    path.write_text(json.dumps([{"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": 2.5e-6,
                                 "dtype": "float64", "op": "max"},
                                {"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": "3us"}]))
    typed, any_type = read_references(path)
    assert (typed.value_s, typed.dtype, typed.op) == (2.5e-6, "float64", "max")
    assert (any_type.value_s, any_type.dtype, any_type.op) == (pytest.approx(3e-6), None, None)
    rows = open_run(NP4).rows
    (float32,) = check_references(rows, [dataclasses.replace(typed, dtype="float32", op="sum")])
    (float64,) = check_references(rows, [typed])
    assert float32.status != "missing" and float64.status == "missing"  # run-np4 reduces float32 sums only


@pytest.mark.parametrize("name, text, message", [
    # where: the file's name and the line (CSV: the header is line 1) or item (JSON: from 1)
    ("refs.csv", "collective,algorithm,nbytes,value\nallreduce,native,8,1us\nallreduce,native,16,\n",
     "refs.csv line 3: missing value (each reference needs collective, algorithm, nbytes, value; lower and upper "
     "are relative bounds, e.g. -0.1 and 0.1)"),
    ("refs.csv", "collective,algorithm,nbytes,value\nallreduce,,,1us\n", "refs.csv line 2: missing algorithm, nbytes"),
    ("refs.csv", "collective,algorithm,nbytes,value,lower\nallreduce,native,8,1us,x\n",
     "refs.csv line 2: lower 'x' is not a number"),
    ("refs.csv", "collective,algorithm,nbytes,value,upper\nallreduce,native,8,1us,nan\n",
     "refs.csv line 2: upper 'nan' is not finite"),
    ("refs.json", '[{"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": 1e-6}, '
                  '{"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": 2e-6}]',
     "refs.json item 2: a second reference for allreduce/native 8 B (the first: item 1); give each case one"),
    ("refs.json", '[{"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": 1e-6, "dtype": '
                  '"float32"}, {"collective": "allreduce", "algorithm": "native", "nbytes": 8, "value": 2e-6, '
                  '"dtype": "float32", "op": "sum"}, {"collective": "allreduce", "algorithm": "native", "nbytes": 8, '
                  '"value": 2e-6, "dtype": "float32", "op": "sum"}]',
     "refs.json item 3: a second reference for allreduce/native 8 B float32 sum (the first: item 2)"),
    ("refs.json", "[1]", "refs.json': expected a list of objects"),
    ("refs.json", '{"collective": "allreduce"}', "refs.json': expected a list of objects"),
    ("refs.json", "[{", "refs.json' is not valid JSON"),
    ("refs.csv", "collective,algorithm,nbytes,value\n", "refs.csv' holds no references"),
])
def test_each_refusal_names_the_file_and_where_in_it(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        read_references(path)
    assert message in str(err.value)
    if "'" in message.split(":")[0]:  # a refusal of the whole file names it by its path
        assert str(err.value).startswith(f"reference file {str(path)!r}")


def test_an_unreadable_reference_file_is_named(tmp_path):
    with pytest.raises(UsageError) as err:
        read_references(tmp_path / "none.csv")
    assert str(err.value) == f"reference file {str(tmp_path / 'none.csv')!r} cannot be read: No such file or directory"
