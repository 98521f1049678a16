"""`ccbench compare`: launch-level verdicts on synthetic samples with known answers, and real stored runs.

The stored runs are single-launch runs: their cases are decided only where a difference is beyond what
launch-to-launch variation could explain (tests/test_compare_launches.py covers replicated runs).

Real runs: tests/data/run-np4 (4 ranks on 2 cores, thread level multiple), run-np4-single
(the same sweep with --thread-level single) and run-np2 (2 ranks); see test_report.py and
test_analysis.py for the commands that made them.  They are only read here; every test
that writes works on copies.
"""

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ccbench.analysis.compare import CSV_COLUMNS, compare_runs, provenance_differences
from ccbench.cli import main
from ccbench.core.replication import DEFAULT_PRIOR_BETWEEN_CV, compare_launches
from ccbench.core.stats import benjamini_hochberg, geometric_mean, summarize
from ccbench.present.compare import write_comparison
from ccbench.store.results import SCHEMA, Row
from ccbench.store.run import load_run

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def runs(tmp_path):
    out = {}
    for name in ("run-np4", "run-np4-single", "run-np2"):
        shutil.copytree(DATA / name, tmp_path / name)
        out[name] = tmp_path / name
    return out


def _stored(path: Path) -> dict[tuple, dict]:
    rows = [json.loads(x) for x in (path / "cases.jsonl").read_text().splitlines() if x.strip()]
    return {(r["collective"], r["algorithm"], r["nbytes"], r["dtype"], r["op"]): r for r in rows}


def _run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


# -- synthetic runs with known answers -----------------------------------------------------------


def _row(collective: str, algorithm: str, nbytes: int, samples) -> Row:
    s = summarize(samples)
    return Row(collective=collective, algorithm=algorithm, nbytes=nbytes, count=max(nbytes // 4, 0),
               dtype="float32", op="sum", in_place=False, root=0, nranks=2, samples=s.n, min_s=s.min_s,
               median_s=s.median_s, mean_s=s.mean_s, p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s,
               stddev_s=s.stddev_s, ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, algbw_gbs=1.0, busbw_gbs=1.0,
               msgs_max=None, bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None,
               step_bytes_max=None, reduced_bytes_max=None, nwrong=0, stop_reason="max_reps", sync="barrier",
               flags=s.flags, samples_s=tuple(float(x) for x in samples))


def _write_run(path: Path, rows: list[Row], **meta) -> Path:
    path.mkdir()
    base = {"schema": SCHEMA, "status": "complete", "mpi_library": "MPICH Version: 5.0.2", "nranks": 2,
            "nodes": 1, "ranks_per_node": 2, "thread_level": "single", "oversubscribed": False,
            "config": {"sync": "barrier"}, "mpi_env": {}}
    (path / "run.json").write_text(json.dumps(dict(base, **meta)))
    (path / "cases.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    return path


def test_benjamini_hochberg_known_answer():
    # sorted p = .005 .01 .03 .04, m = 4: m p / rank = .02 .02 .04 .04, then running minima from the top
    q = benjamini_hochberg([0.01, 0.04, 0.03, 0.005])
    assert q.tolist() == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([0.5]).tolist() == [0.5]
    assert benjamini_hochberg([0.9, 0.8]).tolist() == pytest.approx([0.9, 0.9])
    assert benjamini_hochberg([]).size == 0
    with pytest.raises(ValueError):
        benjamini_hochberg([1.5])


def test_single_launch_runs_are_not_decided_by_their_samples(tmp_path):
    lo = [1e-6 * (10 + i) for i in range(10)]           # 10..19 us
    hi = [1e-6 * (20 + i) for i in range(10)]           # 20..29 us: every sample slower
    rng = np.random.default_rng(1)
    same = (1e-6 * (10 + rng.permutation(10))).tolist()  # the same values, shuffled
    a = _write_run(tmp_path / "a", [_row("allreduce", "ring", 8, lo), _row("allreduce", "ring", 64, lo),
                                    _row("allreduce", "ring", 512, lo[:1])])
    b = _write_run(tmp_path / "b", [_row("allreduce", "ring", 8, hi), _row("allreduce", "ring", 64, same),
                                    _row("allreduce", "ring", 512, hi[:1])])
    cmp = compare_runs([a, b])
    by = {p.nbytes: p for p in cmp.pairs}
    # fully separated samples (a rank test of the samples: p = 0.00018), but one launch a side: the
    # between-launch CV is the default prior, and a 1.69x ratio is within what it cannot resolve
    ref = compare_launches([lo], [hi], prior_between_cv=DEFAULT_PRIOR_BETWEEN_CV)
    assert by[8].p_value == pytest.approx(ref.p_value) and by[8].p_value > 0.05
    assert by[8].ratio == pytest.approx(np.median(hi) / np.median(lo))
    assert (by[8].ratio_low, by[8].ratio_high) == pytest.approx((ref.ratio_low, ref.ratio_high))
    assert by[8].verdict == "undetermined" and by[8].significant is False and by[8].method == "prior"
    assert (by[8].launches_a, by[8].launches_b) == (1, 1)
    assert by[8].resolvable_ratio == pytest.approx(ref.resolvable_ratio) and by[8].resolvable_ratio > by[8].ratio
    # identical samples: p = 1, still undetermined (one launch says nothing about the next)
    assert by[64].p_value == pytest.approx(1.0) and by[64].verdict == "undetermined" and by[64].ratio == 1.0
    # one sample each: shown, not tested
    assert by[512].p_value is None and by[512].verdict == "untested" and by[512].method == "untested"
    # two tests in the family: adjusted p = min over ranks of 2 p / rank
    assert [by[n].p_adjusted for n in (8, 64)] == pytest.approx(benjamini_hochberg(
        [by[8].p_value, by[64].p_value]).tolist())
    (s,) = cmp.summary()
    assert s["geomean_ratio"] == pytest.approx(geometric_mean([by[n].ratio for n in (8, 64, 512)]))
    assert (s["slower"], s["faster"], s["noise"], s["undetermined"], s["untested"]) == (0, 0, 0, 2, 1)
    (ls,) = cmp.launch_summary()
    assert (ls["launch_level"], ls["single_launch"], ls["undetermined"], ls["called"], ls["untested"]) == (0, 2, 2,
                                                                                                            0, 1)
    # reversed order: the same verdicts, the inverse ratio and interval
    rev = {p.nbytes: p for p in compare_runs([b, a]).pairs}
    assert rev[8].verdict == "undetermined" and rev[8].ratio == pytest.approx(1 / by[8].ratio)
    assert rev[8].ratio_high == pytest.approx(1 / by[8].ratio_low)


def test_native_variants_match_by_name_across_libraries(tmp_path):
    import dataclasses

    x = [1e-6 * (10 + i) for i in range(8)]
    ra = dataclasses.replace(_row("allreduce", "native:ring", 64, x),
                             settings={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})
    rb = dataclasses.replace(_row("allreduce", "native:ring", 64, [2 * v for v in x]),
                             settings={"OMPI_MCA_coll_tuned_allreduce_algorithm": "4"})
    a = _write_run(tmp_path / "a", [ra])
    b = _write_run(tmp_path / "b", [rb], mpi_library="Open MPI v5.0.11")
    cmp = compare_runs([a, b])
    (p,) = cmp.pairs
    assert p.algorithm == "native:ring" and p.ratio == pytest.approx(2.0)
    assert (p.settings_a, p.settings_b) == ("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring",
                                            "OMPI_MCA_coll_tuned_allreduce_algorithm=4")
    assert any("provenance differs in MPI library" in w for w in cmp.warnings)
    files = write_comparison(cmp, tmp_path / "out", plot=False)
    with open(files["csv"]) as f:
        (row,) = list(csv.DictReader(f))
    assert row["settings_b"] == "OMPI_MCA_coll_tuned_allreduce_algorithm=4" and float(row["ratio"]) == 2.0


def test_provenance_that_matters_is_warned(tmp_path):
    rows = [_row("bcast", "native", 8, [1e-6] * 5)]
    a = {"mpi_library": "MPICH 5", "nranks": 4, "nodes": 1, "ranks_per_node": 4, "thread_level": "single",
         "config": {"sync": "barrier"}, "mpi_env": {}}
    b = dict(a, mpi_library="Open MPI 5", nodes=2, ranks_per_node=2, thread_level="multiple",
             mpi_env={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})
    other = [Row(**{**rows[0].to_dict(), "dtype": "float64", "samples_s": rows[0].samples_s})]
    w = provenance_differences(a, b, rows, other)
    text = "\n".join(w)
    for what in ("MPI library", "nodes", "ranks per node", "thread level", "dtypes", "MPI environment"):
        assert f"provenance differs in {what}" in text
    assert "ranks:" not in text  # 4 and 4: the same
    assert provenance_differences(a, dict(a), rows, rows) == []


# -- real runs -----------------------------------------------------------------------------------


def test_ratios_are_the_stored_medians_ratio(runs, tmp_path, capsys):
    a, b = runs["run-np4"], runs["run-np4-single"]
    out = tmp_path / "cmp"
    main(["compare", str(a), str(b), "--out", str(out)])
    text = capsys.readouterr().out
    assert "warning: provenance differs in thread level: 'multiple' (A) vs 'single' (B)" in text
    sa, sb = _stored(a), _stored(b)
    with open(out / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(sa) == 95
    assert tuple(rows[0]) == CSV_COLUMNS  # the columns before launch-level testing come first, unchanged
    ratios: dict[str, list[float]] = {}
    for r in rows:
        k = (r["collective"], r["algorithm"], int(r["nbytes"]), r["dtype"], r["op"])
        assert float(r["median_a_s"]) == sa[k]["median_s"] and float(r["median_b_s"]) == sb[k]["median_s"]
        assert float(r["ratio"]) == pytest.approx(sb[k]["median_s"] / sa[k]["median_s"], rel=1e-12)
        # single-launch runs: the prior between-launch CV; called only where the adjusted p is below the level
        assert (r["launches_a"], r["launches_b"], r["method"]) == ("1", "1", "prior")
        assert r["verdict"] in ("slower", "faster", "undetermined")
        assert (r["verdict"] != "undetermined") == (float(r["p_adjusted"]) < 0.05)
        assert float(r["ratio_low"]) < float(r["ratio"]) < float(r["ratio_high"])
        assert float(r["resolvable_ratio"]) > 2.5  # CV 0.35: exp(1.96 sqrt(2 ln 1.1225)) = 2.57, plus samples' noise
        ratios.setdefault(r["collective"], []).append(float(r["ratio"]))
    md = (out / "compare.md").read_text()
    assert "warning: provenance differs in thread level" in md
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    # the summary: geometric mean of the ratios per collective, as printed and written
    for coll, rs in ratios.items():
        g = math.exp(sum(math.log(x) for x in rs) / len(rs))
        assert f"| B | {coll} | {len(rs)} | {g:.3g} |" in md
        assert any(line.split("│")[2].strip() == coll and line.split("│")[4].strip() == f"{g:.3g}"
                   for line in text.splitlines() if line.count("│") == 10)
    # one line per pair of runs: nothing decided at the launch level, what a single launch resolves
    line = " ".join(text.split()).split("run B vs A: ")[1]
    assert line.startswith("0 of 95 cases decided at the launch level; 95 with a single launch on a side")
    assert "between-launch CV of 35% (default prior)" in line and "undetermined" in line
    assert "0 of 95 cases decided at the launch level; 95 with a single launch on a side" in " ".join(md.split())
    # single-threaded MPICH busy-polls at 4 ranks on 2 cores: allreduce is much slower
    cmp = compare_runs([a, b])
    allreduce = [p for p in cmp.pairs if p.collective == "allreduce"]
    assert all(p.verdict == "slower" for p in allreduce)


def test_compare_files_are_numbered_never_overwritten(runs, capsys):
    a, b = runs["run-np4"], runs["run-np4-single"]
    before = {n: (a / n).read_bytes() for n in ("run.json", "cases.jsonl", "cases.csv")}
    main(["compare", str(a), str(b), "--no-plot"])
    first = (a / "compare.md").read_bytes()
    main(["compare", str(a), str(b), "--no-plot"])
    assert (a / "compare-2.csv").is_file() and (a / "compare-2.md").is_file()
    assert (a / "compare.md").read_bytes() == first
    assert {n: (a / n).read_bytes() for n in before} == before
    assert not (a / "compare.png").exists()


def test_three_runs_and_rank_mismatch(runs):
    cmp = compare_runs([runs["run-np4"], runs["run-np4-single"], runs["run-np2"]])
    text = "\n".join(cmp.warnings)
    assert "provenance differs in ranks: 4 (A) vs 2 (C)" in text
    assert "provenance differs in ranks per node: 4 (A) vs 2 (C)" in text
    sa, sc = _stored(runs["run-np4"]), _stored(runs["run-np2"])
    common = set(sa) & set(sc)
    cpairs = [p for p in cmp.pairs if p.other == "C"]
    assert len(cpairs) == len(common) and cmp.unmatched["C"] == (len(sa) - len(common), len(sc) - len(common))
    for p in cpairs:
        k = (p.collective, p.algorithm, p.nbytes, p.dtype, p.op)
        assert p.ratio == pytest.approx(sc[k]["median_s"] / sa[k]["median_s"])
        assert (p.nranks_a, p.nranks_b) == (4, 2)
    files = write_comparison(cmp, runs["run-np4"] / "out")
    assert {f.name for f in files.values()} == {"compare.csv", "compare.md", "compare.png"}


# -- bad input -----------------------------------------------------------------------------------


def test_one_run_is_refused(runs, capsys):
    code, _, err = _run_main(["compare", str(runs["run-np4"])], capsys)
    assert code == 2 and err.count("\n") == 1 and "at least two runs" in err


def test_same_run_twice_is_refused(runs, capsys):
    code, _, err = _run_main(["compare", str(runs["run-np4"]), str(runs["run-np4"])], capsys)
    assert code == 2 and err.count("\n") == 1 and "given twice" in err


@pytest.mark.parametrize("how,message", [
    ("schema", "has schema ccbench.run/2"),
    ("foreign", "is not a ccbench run file"),
    ("workload", "is a 'workload' run"),
    ("badline", "line 2 is corrupt"),
])
def test_corrupt_or_foreign_runs_are_one_line(runs, capsys, how, message):
    b = runs["run-np4-single"]
    meta = json.loads((b / "run.json").read_text())
    if how == "schema":
        (b / "run.json").write_text(json.dumps(dict(meta, schema="ccbench.run/2")))
    elif how == "foreign":
        (b / "run.json").write_text(json.dumps({"schema": "pyperf/1"}))
    elif how == "workload":
        (b / "run.json").write_text(json.dumps(dict(meta, kind="workload")))
    else:
        lines = (b / "cases.jsonl").read_text().splitlines()
        lines[1] = lines[1][:40]
        (b / "cases.jsonl").write_text("\n".join(lines) + "\n")
    a = runs["run-np4"]
    before = sorted(p.name for p in a.iterdir())
    code, out, err = _run_main(["compare", str(a), str(b)], capsys)
    assert code == 2 and err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in a.iterdir()) == before


def test_runs_without_common_cases_are_refused(runs, tmp_path, capsys):
    other = _write_run(tmp_path / "gather-only", [_row("gather", "linear", 64, [1e-6] * 5)])
    code, _, err = _run_main(["compare", str(runs["run-np4"]), str(other)], capsys)
    assert code == 2 and "no case in common" in err and err.count("\n") == 1


def test_bad_level_is_refused(runs, capsys):
    code, _, err = _run_main(["compare", str(runs["run-np4"]), str(runs["run-np2"]), "--level", "2"], capsys)
    assert code == 2 and "significance level" in err


def test_stored_runs_are_complete():
    for name in ("run-np4", "run-np4-single"):
        meta, rows, warnings = load_run(DATA / name)
        assert meta["status"] == "complete" and len(rows) == 95 and not warnings
        assert all(r.ok and len(r.samples_s) == r.samples for r in rows)


# -- training-workload runs (see test_report.py for the commands that made them) --------------------


@pytest.fixture
def wl_runs(tmp_path):
    out = {}
    for name in ("wl-ddp-np2", "wl-ddp-np2-single", "wl-straggler-np2", "run-np4"):
        shutil.copytree(DATA / name, tmp_path / name)
        out[name] = tmp_path / name
    return out


def test_workload_key_is_every_identifying_field():
    import dataclasses

    from ccbench.analysis.compare import DERIVED, KEY_FIELDS, MEASURED, PER_RUN
    from ccbench.store.workload_rows import WorkloadRow

    names = {f.name for f in dataclasses.fields(WorkloadRow)}
    assert set(KEY_FIELDS) | MEASURED | PER_RUN | DERIVED == names  # every field classified once
    assert KEY_FIELDS == ("workload", "variant", "model", "algorithm", "dtype", "part", "label", "collective",
                          "nbytes", "delay_s", "delayed_rank")


def test_workload_ratios_are_the_stored_medians_ratio(wl_runs, tmp_path, capsys):
    from ccbench.analysis.compare import KEY_FIELDS

    a, b = wl_runs["wl-ddp-np2"], wl_runs["wl-ddp-np2-single"]
    out = tmp_path / "cmp"
    main(["compare", str(a), str(b), "--out", str(out)])
    text = capsys.readouterr().out
    assert "warning: provenance differs in thread level: 'multiple' (A) vs 'single' (B)" in text

    def stored(path):
        rows = [json.loads(x) for x in (path / "cases.jsonl").read_text().splitlines() if x.strip()]
        return {tuple(str(r[k]) for k in KEY_FIELDS): r for r in rows}

    sa, sb = stored(a), stored(b)
    with open(out / "compare.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(sa) == 39
    ps = []
    for r in rows:
        k = tuple(r[f] if r[f] != "" else "None" for f in KEY_FIELDS)
        assert float(r["median_a_s"]) == sa[k]["median_s"] and float(r["median_b_s"]) == sb[k]["median_s"]
        assert float(r["ratio"]) == pytest.approx(sb[k]["median_s"] / sa[k]["median_s"], rel=1e-12)
        p = compare_launches([sa[k]["samples_s"]], [sb[k]["samples_s"]]).p_value
        assert float(r["p_value"]) == pytest.approx(p)
        ps.append(p)
        assert (r["verdict"] != "undetermined") == (float(r["p_adjusted"]) < 0.05)
    # one family per pair of runs: steps and calls adjusted together
    assert [float(r["p_adjusted"]) for r in rows] == pytest.approx(benjamini_hochberg(ps).tolist())
    md = (out / "compare.md").read_text()
    assert "warning: provenance differs in thread level" in md
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    # geometric mean per workload, whole steps and calls apart
    for what, whole in (("steps", True), ("calls", False)):
        rs = [float(r["ratio"]) for r in rows if (r["part"] == "-1") == whole]
        g = geometric_mean(rs)
        assert f"| B | ddp | {what} | {len(rs)} | {g:.3g} |" in md
        assert any(line.split("│")[3].strip() == what and line.split("│")[5].strip() == f"{g:.3g}"
                   for line in text.splitlines() if line.count("│") == 11)
    assert "0 of 39 rows decided at the launch level; 39 with a single launch on a side" in " ".join(text.split())


def test_workload_compare_files_are_numbered(wl_runs, capsys):
    a, b = wl_runs["wl-ddp-np2"], wl_runs["wl-ddp-np2-single"]
    before = {n: (a / n).read_bytes() for n in ("run.json", "cases.jsonl", "cases.csv")}
    main(["compare", str(a), str(b), "--no-plot"])
    first = (a / "compare.md").read_bytes()
    main(["compare", str(a), str(b), "--no-plot"])
    assert (a / "compare-2.csv").is_file() and (a / "compare.md").read_bytes() == first
    assert {n: (a / n).read_bytes() for n in before} == before


def test_mixed_kinds_are_refused(wl_runs, capsys):
    for pair in (("wl-ddp-np2", "run-np4"), ("run-np4", "wl-ddp-np2")):
        code, out, err = _run_main(["compare", *(str(wl_runs[n]) for n in pair)], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in out + err
        assert "is a 'workload' run but" in err and "is a collective sweep" in err
    assert not list(wl_runs["wl-ddp-np2"].glob("compare*")) and not list(wl_runs["run-np4"].glob("compare*"))


def test_workload_runs_without_common_rows_are_refused(wl_runs, capsys):
    code, _, err = _run_main(["compare", str(wl_runs["wl-ddp-np2"]), str(wl_runs["wl-straggler-np2"])], capsys)
    assert code == 2 and "no row in common" in err and err.count("\n") == 1


@pytest.mark.parametrize("how,message", [
    ("badline", "line 2 is corrupt"),
    ("schema", "has schema ccbench.run/2"),
    ("empty", "has no finished cases"),
])
def test_corrupt_workload_runs_are_one_line(wl_runs, capsys, how, message):
    a, b = wl_runs["wl-ddp-np2"], wl_runs["wl-ddp-np2-single"]
    if how == "badline":
        lines = (b / "cases.jsonl").read_text().splitlines()
        lines[1] = lines[1][:40]
        (b / "cases.jsonl").write_text("\n".join(lines) + "\n")
    elif how == "schema":
        meta = json.loads((b / "run.json").read_text())
        (b / "run.json").write_text(json.dumps(dict(meta, schema="ccbench.run/2")))
    else:
        (b / "cases.jsonl").write_text("")
    before = sorted(p.name for p in a.iterdir())
    code, out, err = _run_main(["compare", str(a), str(b)], capsys)
    assert code == 2 and err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in a.iterdir()) == before


def test_workload_straggler_pairs_carry_the_slowdowns(tmp_path):
    from ccbench.analysis.compare import compare_runs as compare_workload_runs

    a = tmp_path / "a"
    shutil.copytree(DATA / "wl-straggler-np2", a)
    b = tmp_path / "b"
    shutil.copytree(DATA / "wl-straggler-np2", b)
    cmp = compare_workload_runs([a, b], level=0.05)
    assert cmp.kind == "workload" and len(cmp.pairs) == 6
    for p in cmp.pairs:  # the same samples of one launch: ratio 1, p = 1, undetermined; slowdowns carried
        assert p.ratio == 1.0 and p.p_value == pytest.approx(1.0) and p.verdict == "undetermined"
        assert p.slowdown_a == p.slowdown_b is not None and p.delayed_rank == 1


# -- verdict rules pinned by mutation testing (tests/mutation/run.sh) ----------------------

def _case(samples, median, launches=()):
    """A row stand-in: samples, stored median and launch blocks (one launch unless `launches` splits them)."""
    from types import SimpleNamespace

    samples = tuple(samples)
    if launches:
        blocks, at = [], 0
        for i, n in enumerate(launches):
            blocks.append((i + 1, samples[at:at + n]))
            at += n
    else:
        blocks = [(1, samples)]
    return SimpleNamespace(samples_s=samples, median_s=median, n_launches=len(blocks),
                           launch_blocks=lambda: blocks)


def test_index_rows_keeps_the_first_of_each_key_and_counts_the_repeats():
    from types import SimpleNamespace

    from ccbench.analysis.compare import index_rows

    rows = [SimpleNamespace(k=k, i=i) for i, k in enumerate(["x", "x", "y", "x", "y"])]
    warnings = ["earlier"]
    got = index_rows(rows, "B", warnings, key=lambda r: (r.k,))
    assert {k: r.i for k, r in got.items()} == {("x",): 0, ("y",): 2}
    assert warnings == ["earlier", "run B holds 3 repeated case(s); the first of each is compared"]
    quiet: list[str] = []
    assert len(index_rows(rows[1:3], "C", quiet, key=lambda r: (r.k,))) == 2
    assert quiet == []


def test_pairs_need_two_samples_and_positive_times():
    from ccbench.analysis.compare import test_pairs

    (_, _, t), = test_pairs([(_case([1.0], 1.0), _case([3.0, 4.0, 5.0], 4.0))], 0.05)
    assert (t.p_value, t.p_adjusted, t.significant, t.verdict, t.method, t.ratio_low) == (None, None, None,
                                                                                         "untested", "untested", None)
    assert (t.launches_a, t.launches_b) == (1, 1)
    (_, _, t), = test_pairs([(_case([0.0, 1.0], 0.5), _case([1.0, 2.0], 1.5))], 0.05)
    assert t.verdict == "untested"  # a time of 0 has no logarithm
    # two samples a side: tested (the prior)
    (_, _, t), = test_pairs([(_case([1.0, 2.0], 1.5), _case([3.0, 4.0], 3.5))], 0.05)
    assert t.method == "prior" and t.ratio == 3.5 / 1.5 and t.verdict == "undetermined"


def test_pairs_zero_baseline_median_is_an_infinite_ratio():
    from ccbench.analysis.compare import test_pairs

    (_, _, t), = test_pairs([(_case([0.0], 0.0), _case([1.0], 1.0))], 0.05)
    assert t.ratio == math.inf and t.verdict == "untested"


def test_pairs_significance_is_strictly_below_the_level():
    from ccbench.analysis.compare import test_pairs

    # two launches a side, every launch the same: d = 0, p = 1 exactly, which is not below a level of 1 - 1e-9
    same = _case([3.0] * 4, 3.0, (2, 2))
    (_, _, t), = test_pairs([(same, same)], 1 - 1e-9)
    assert (t.p_adjusted, t.significant, t.verdict, t.method) == (1.0, False, "noise", "welch")


def test_pairs_direction_follows_the_launch_ratio():
    from ccbench.analysis.compare import test_pairs

    # launches of a: 1 1.1 1.2, of b: 2 2.2 2.4 (constant within each): Welch on ln medians, ratio exactly 2
    a = _case([1.0, 1.0, 1.1, 1.1, 1.2, 1.2], 1.1, (2, 2, 2))
    b = _case([2.0, 2.0, 2.2, 2.2, 2.4, 2.4], 2.2, (2, 2, 2))
    (_, _, t), = test_pairs([(a, b)], 0.05)
    assert t.ratio == pytest.approx(2.0) and t.verdict == "slower" and t.method == "welch"
    assert (t.launches_a, t.launches_b) == (3, 3) and t.ratio_low < 2.0 < t.ratio_high
    (_, _, t), = test_pairs([(b, a)], 0.05)
    assert t.ratio == pytest.approx(0.5) and t.verdict == "faster"


def test_pairs_min_effect_band_is_inclusive_on_the_log_scale():
    from ccbench.analysis.compare import _decide

    # a 10% band is [1 / 1.1, 1.1]: an interval on its edges is noise, a hair outside is not
    assert _decide(1.02, 1 / 1.1, 1.1, "welch", True, 0.1) == "noise"
    assert _decide(1.02, 1 / 1.1 - 1e-9, 1.1, "welch", True, 0.1) == "slower"
    assert _decide(1.02, 1.0, 1.1 + 1e-9, "welch", True, 0.1) == "slower"
    assert _decide(0.98, 0.95, 1.05, "prior", False, 0.1) == "noise"  # inside the band decides even a prior
    assert _decide(0.98, 0.95, 1.05, "prior", False, 0.0) == "undetermined"
    assert _decide(0.98, 0.95, 1.05, "welch", False, 0.0) == "noise"
    assert _decide(1.0, 0.95, 1.05, "welch", True, 0.0) == "faster"  # "slower" needs a ratio above 1
