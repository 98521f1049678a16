"""Cross-validation: the pure summaries on synthetic cases, and `predict --against` on the stored runs."""

import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from ccbench.analysis.crossval import ratio_summary, winner_agreement
from ccbench.cli import main
from ccbench.core.errors import UsageError
from ccbench.store.derived import write_new_file
from ccbench.workflow.predict import cross_validation


def cross_validate(small, large, **kw) -> dict:
    """The cross-validation of runs given by path, as ``predict --against`` opens them."""
    return cross_validation(small, large, **kw)[0]


DATA = Path(__file__).parent / "data"


def _case(alg, n, measured, predicted, kind="hand-written", coll="allreduce"):
    return {"collective": coll, "algorithm": alg, "kind": kind, "nbytes": n, "dtype": "float32", "op": "sum",
            "measured_s": measured, "predicted_s": predicted, "ratio": measured / predicted}


def test_ratio_summary_median_and_worst_on_a_log_scale():
    cases = [_case("ring", 8, 2.0, 1.0), _case("ring", 64, 1.0, 1.0), _case("native:ring", 8, 1.0, 4.0, "native"),
             _case("native:ring", 64, 3.0, 2.0, "native")]
    got = {(s["collective"], s["kind"]): s for s in ratio_summary(cases)}
    assert got[("allreduce", "all")]["cases"] == 4
    assert got[("allreduce", "all")]["median_ratio"] == pytest.approx((1.0 + 1.5) / 2)
    assert got[("allreduce", "all")]["worst_ratio"] == 0.25  # 1/4 is farther from 1 than 2
    assert got[("allreduce", "hand-written")]["worst_ratio"] == 2.0
    assert got[("allreduce", "native")]["median_ratio"] == pytest.approx((0.25 + 1.5) / 2)


def test_winner_agreement_compares_the_same_algorithms():
    cases = [_case("ring", 8, 3.0, 2.0), _case("recursive_doubling", 8, 1.0, 1.0),
             _case("ring", 1024, 1.0, 5.0), _case("recursive_doubling", 1024, 2.0, 4.0),
             _case("ring", 4096, 1.0, 1.0)]
    w = {x["nbytes"]: x for x in winner_agreement(cases)}
    assert w[8]["agree"] is True and w[8]["measured_winner"] == "recursive_doubling"
    assert w[8]["margin"] == pytest.approx(2.0)
    assert w[1024]["agree"] is False and w[1024]["predicted_winner"] == "recursive_doubling"
    assert w[4096]["agree"] is None and w[4096]["margin"] is None  # one algorithm: nothing to agree on


def test_cross_validation_of_the_stored_runs():
    doc = cross_validate([DATA / "run-np2"], DATA / "run-np4", n_boot=100)
    assert doc["against"]["nranks"] == [4] and doc["fit_runs"][0]["nranks"] == 2
    assert doc["params"] in ("effective", "joint", "pingpong") and doc["why"]
    colls = {c["collective"] for c in doc["cases"]}
    assert colls == {"allreduce", "bcast", "allgather"}
    assert all(c["nranks"] == 4 and c["ratio"] == pytest.approx(c["measured_s"] / c["predicted_s"])
               for c in doc["cases"])
    assert any(c["kind"] == "native" for c in doc["cases"])  # the library's own native, priced as MPICH selects
    a = doc["agreement"]
    assert 0 <= a["agree"] <= a["sizes"] == sum(w["agree"] is not None for w in doc["winners"])
    # a parameter set asked for by name
    pp = cross_validate([DATA / "run-np2"], DATA / "run-np4", which="pingpong", collectives=["bcast"], n_boot=0)
    assert pp["params"] == "pingpong" and {c["collective"] for c in pp["cases"]} == {"bcast"}


@pytest.mark.parametrize(("small", "large", "words"), [
    (["run-np4"], "run-np2", "not more than the runs fitted on"),
    (["run-np2"], "no-such-run", "no run at"),
    ([], "run-np4", "at least one --from"),
])
def test_bad_input_is_one_usage_error(small, large, words):
    with pytest.raises(UsageError, match=words):
        cross_validate([DATA / s for s in small], DATA / large if large != "no-such-run" else large, n_boot=0)


def _pingpong_only(src, dst):
    shutil.copytree(src, dst)
    lines = (dst / "cases.jsonl").read_text().splitlines()
    (dst / "cases.jsonl").write_text("".join(ln + "\n" for ln in lines if json.loads(ln)["collective"] == "pingpong"))
    return dst


def test_a_run_without_the_rows_needed(tmp_path):
    large = _pingpong_only(DATA / "run-np4", tmp_path / "large")
    with pytest.raises(UsageError, match="no collective rows to predict"):
        cross_validate([DATA / "run-np2"], large, n_boot=0)
    small = _pingpong_only(DATA / "run-np2", tmp_path / "small")
    with pytest.raises(UsageError, match="cannot give effective parameters"):
        cross_validate([small], DATA / "run-np4", which="effective", n_boot=0)
    assert cross_validate([small], DATA / "run-np4", n_boot=0)["params"] == "pingpong"  # auto: what there is


def test_the_command_prints_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "cv.csv"
    main(["predict", "--from", str(DATA / "run-np2"), "--against", str(DATA / "run-np4"), "-C", "allreduce",
          "-o", str(out)])
    text = capsys.readouterr().out
    assert "cross-validation: fitted to run-np2 (2 ranks); predicting run-np4 at 4 ranks" in text
    assert "per collective: measured / predicted" in text and "who wins: predicted = measured fastest at" in text
    rows = list(csv.DictReader(out.open()))
    assert rows and all(r["collective"] == "allreduce" and int(r["nranks"]) == 4 for r in rows)
    assert all(math.isclose(float(r["ratio"]), float(r["measured_s"]) / float(r["predicted_s"]), rel_tol=1e-9)
               for r in rows)
    with pytest.raises(UsageError, match="never overwritten"):  # a second write to the same file
        write_new_file(out, "")


@pytest.mark.parametrize(("argv", "words"), [
    (["--from", "run-np4", "--against", "run-np2"], "not more than"),
    (["--from", "run-np2", "--from", "run-np4", "-n", "8"], "add --against"),
    (["--from", "run-np2", "--against", "run-np4", "-n", "8"], "leave out -n"),
    (["--from", "nothing-here", "--against", "run-np4"], "no run at"),
])
def test_the_command_says_what_is_wrong_on_one_line_and_exits_2(argv, words, capsys):
    argv = [str(DATA / a) if a.startswith("run-") else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(["predict", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1
