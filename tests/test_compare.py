"""`ccbench compare`: launch-level verdicts on synthetic samples with known answers, and real stored runs.

The stored runs are single-launch runs: their cases are decided only where a difference is beyond what
launch-to-launch variation could explain (tests/test_compare_launches.py covers replicated runs).

Real runs: tests/data/run-np4 (4 ranks on 2 cores, thread level multiple), run-np4-single
(the same sweep with --thread-level single) and run-np2 (2 ranks); see test_report.py and
test_analysis.py for the commands that made them.  They are only read here; every test
that writes works on copies.
"""

import csv
import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from runfiles import derived, tree_state

from ccbench.analysis.compare import CSV_COLUMNS, provenance_differences
from ccbench.api import compare as compare_runs  # opens the runs it is given, then compares them
from ccbench.cli import main
from ccbench.core.replication import DEFAULT_PRIOR_BETWEEN_CV, compare_launches
from ccbench.core.stats import benjamini_hochberg, geometric_mean, summarize
from ccbench.store.results import SCHEMA, Row
from ccbench.store.run import open_run
from ccbench.workflow.compare import write_comparison

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


def _launch_row(nbytes: int, launches: list[list[float]]) -> Row:
    """An allreduce/ring row measured in len(launches) launches, the samples of each given."""
    import dataclasses

    flat = [x for b in launches for x in b]
    return dataclasses.replace(_row("allreduce", "ring", nbytes, flat), launches=tuple(range(1, len(launches) + 1)),
                               launch_samples=tuple(len(b) for b in launches))


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
    # none of the m = 2 tested cases called: the interval shown is at confidence 1 - 0.05 / 2 (false-coverage)
    shown = compare_launches([lo], [hi], level=0.05 / 2, prior_between_cv=DEFAULT_PRIOR_BETWEEN_CV)
    assert (by[8].ratio_low, by[8].ratio_high) == pytest.approx((shown.ratio_low, shown.ratio_high))
    assert by[8].interval_confidence == pytest.approx(0.975) and by[8].launches_needed is None  # 1.2-2.4: < 10x
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
    assert s.geomean_ratio == pytest.approx(geometric_mean([by[n].ratio for n in (8, 64, 512)]))
    assert [s.verdicts[v] for v in ("slower", "faster", "noise", "undetermined", "untested")] == [0, 0, 0, 2, 1]
    (ls,) = cmp.launch_summary()
    assert (ls.launch_level, ls.single_launch, ls.undetermined, ls.called, ls.untested) == (0, 2, 2, 0, 1)
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
    before = tree_state(a.parent)
    out = derived(a)
    main(["compare", str(a), str(b), "--no-plot"])
    # the last line names the files (wrapped at the console's width)
    assert " ".join(capsys.readouterr().out.split()).endswith(f"wrote {out / 'compare.csv'}, {out / 'compare.md'}")
    first = (out / "compare.md").read_bytes()
    main(["compare", str(a), str(b), "--no-plot"])
    assert (out / "compare-2.csv").is_file() and (out / "compare-2.md").is_file()
    assert (out / "compare.md").read_bytes() == first
    assert tree_state(a.parent) == before  # both runs, and every other, as they were
    assert not (out / "compare.png").exists()


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


def test_the_page_tables_are_the_terminal_tables(runs, tmp_path):
    """A comparison's page is built from the terminal's tables (``sweep_tables``): the same cells, times in µs,
    the adjusted p headed "p (adj.)", the runs with when each started; no table is written twice."""
    from ccbench.present.compare import SWEEP_VIEW, markdown_blocks, summary_table, sweep_tables
    from ccbench.present.table import to_block

    cmp = compare_runs([runs["run-np4"], runs["run-np4-single"], runs["run-np2"]])
    blocks = markdown_blocks(cmp, None)
    tables = [b for b in blocks if b[0] == "table"]
    terminal = sweep_tables(cmp)
    runs_table, summary, *per_collective = tables
    assert runs_table[1] == [c.header for c in terminal[0].columns] + ["started"]
    assert summary == to_block(summary_table(cmp, SWEEP_VIEW))[0]
    assert len(per_collective) == len(terminal) - 1
    for (_, head, rows, right), t in zip(per_collective, terminal[1:], strict=True):
        assert head == [c.header.replace("p adj.", "p (adj.)") for c in t.columns]
        assert rows == [[cell.replace("us", "µs") for cell in row] for row in t.cells()]
        assert right == {i for i, c in enumerate(t.columns) if c.right}
        assert "C/A" in head  # a third run is a column group of its own, not rows


# -- bad input -----------------------------------------------------------------------------------


def test_one_run_is_refused(runs, capsys):
    code, _, err = _run_main(["compare", str(runs["run-np4"])], capsys)
    assert code == 2 and err.count("\n") == 1 and "at least two runs" in err


def test_same_run_twice_is_refused(runs, capsys):
    code, _, err = _run_main(["compare", str(runs["run-np4"]), str(runs["run-np4"])], capsys)
    assert code == 2 and err.count("\n") == 1 and "given twice" in err


@pytest.mark.parametrize("how,message", [
    ("schema", "has schema ccbench.run/99"),
    ("foreign", "is not a ccbench run file"),
    ("workload", "is a 'workload' run"),
    ("badline", "line 2 is corrupt"),
])
def test_corrupt_or_foreign_runs_are_one_line(runs, capsys, how, message):
    b = runs["run-np4-single"]
    meta = json.loads((b / "run.json").read_text())
    if how == "schema":
        (b / "run.json").write_text(json.dumps(dict(meta, schema="ccbench.run/99")))
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
        opened = open_run(DATA / name)
        meta, rows, warnings = opened.meta, opened.rows, opened.warnings
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


def test_the_workload_page_tables_are_the_terminal_tables(wl_runs):
    """A workload comparison's page takes its whole-step and per-call tables from the terminal's
    (``workload_comparison_tables``); the page adds each call's place in the step (#) and the runs' nodes and
    start times."""
    from ccbench.present.compare import workload_comparison_tables, workload_markdown_blocks

    cmp = compare_runs([wl_runs["wl-ddp-np2"], wl_runs["wl-ddp-np2-single"]])
    tables = [b for b in workload_markdown_blocks(cmp, None) if b[0] == "table"]
    terminal = workload_comparison_tables(cmp)
    assert tables[0][1] == ["run", "directory", "workload", "model", "MPI library", "ranks", "nodes", "per node",
                            "thread level", "started"]
    whole, calls = tables[2], tables[3]
    assert whole[1] == [c.header.replace("p adj.", "p (adj.)") for c in terminal[1].columns]
    assert whole[2] == [[cell.replace("us", "µs") for cell in row] for row in terminal[1].cells()]
    assert calls[1][3:5] == ["#", "call"] and [r[3] for r in calls[2]] == [str(p.part) for p in cmp.pairs
                                                                           if not p.whole]
    assert [r[:3] + r[4:] for r in calls[2]] == [[c.replace("us", "µs") for c in row]
                                                 for row in terminal[2].cells()]


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
    before = tree_state(a.parent)
    main(["compare", str(a), str(b), "--no-plot"])
    first = (derived(a) / "compare.md").read_bytes()
    main(["compare", str(a), str(b), "--no-plot"])
    assert (derived(a) / "compare-2.csv").is_file() and (derived(a) / "compare.md").read_bytes() == first
    assert tree_state(a.parent) == before


def test_mixed_kinds_are_refused(wl_runs, capsys):
    for pair in (("wl-ddp-np2", "run-np4"), ("run-np4", "wl-ddp-np2")):
        code, out, err = _run_main(["compare", *(str(wl_runs[n]) for n in pair)], capsys)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in out + err
        assert "is a training-workload run" in err and "is a collective sweep" in err and "one kind" in err
    assert not list(wl_runs["wl-ddp-np2"].glob("compare*")) and not list(wl_runs["run-np4"].glob("compare*"))


def test_workload_runs_without_common_rows_are_refused(wl_runs, capsys):
    code, _, err = _run_main(["compare", str(wl_runs["wl-ddp-np2"]), str(wl_runs["wl-straggler-np2"])], capsys)
    assert code == 2 and "no row in common" in err and err.count("\n") == 1


@pytest.mark.parametrize("how,message", [
    ("badline", "line 2 is corrupt"),
    ("schema", "has schema ccbench.run/99"),
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
        (b / "run.json").write_text(json.dumps(dict(meta, schema="ccbench.run/99")))
    else:
        (b / "cases.jsonl").write_text("")
    before = sorted(p.name for p in a.iterdir())
    code, out, err = _run_main(["compare", str(a), str(b)], capsys)
    assert code == 2 and err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in a.iterdir()) == before


def test_workload_straggler_pairs_carry_the_slowdowns(tmp_path):
    from ccbench.api import compare as compare_workload_runs

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


def verdict_of(monkeypatch, ratio, low, high, method, significant, min_effect):
    """test_pairs' verdict on one case whose launch test (a stand-in) gave `ratio` in [low, high] by `method`,
    called at the 5% level when `significant`."""
    from types import SimpleNamespace

    import ccbench.analysis.compare as compare

    def fake(xa, xb, *, level, prior_between_cv):
        return SimpleNamespace(p_value=0.01 if significant else 0.5, ratio=ratio, ratio_low=low, ratio_high=high,
                               method=method, n_launches_a=2, n_launches_b=2, resolvable_ratio=None)

    monkeypatch.setattr(compare, "compare_launches", fake)
    a = _case([1.0, 1.0, 1.0, 1.0], 1.0, (2, 2))
    (_, _, t), = compare.test_pairs([(a, a)], 0.05, min_effect=min_effect)
    return t.verdict


def test_pairs_min_effect_band_is_inclusive_on_the_log_scale(monkeypatch):
    def verdict(*args):
        return verdict_of(monkeypatch, *args)

    # a 10% band is [1 / 1.1, 1.1]: an interval on its edges is noise, a hair outside is not
    assert verdict(1.02, 1 / 1.1, 1.1, "welch", True, 0.1) == "noise"
    assert verdict(1.02, 1 / 1.1 - 1e-9, 1.1, "welch", True, 0.1) == "slower"
    assert verdict(1.02, 1.0, 1.1 + 1e-9, "welch", True, 0.1) == "slower"
    assert verdict(0.98, 0.95, 1.05, "prior", False, 0.1) == "noise"  # inside the band decides even a prior
    assert verdict(0.98, 0.95, 1.05, "prior", False, 0.0) == "undetermined"
    assert verdict(0.98, 0.95, 1.05, "welch", False, 0.0) == "noise"
    assert verdict(1.0, 0.95, 1.05, "welch", True, 0.0) == "faster"  # "slower" needs a ratio above 1


def test_pairs_adjusted_p_equal_to_the_level_is_not_significant(monkeypatch):
    from types import SimpleNamespace

    import ccbench.analysis.compare as compare

    # a stand-in launch test whose p-value is exactly the level: one p-value, so its adjusted p is itself
    def fake(xa, xb, *, level, prior_between_cv):
        return SimpleNamespace(p_value=0.25, ratio=1.5, ratio_low=1.2, ratio_high=1.9, method="welch",
                               n_launches_a=2, n_launches_b=2, resolvable_ratio=None)

    monkeypatch.setattr(compare, "compare_launches", fake)
    a = _case([1.0, 1.0, 1.0, 1.0], 1.0, (2, 2))
    (_, _, t), = compare.test_pairs([(a, a)], 0.25)
    assert (t.p_value, t.p_adjusted, t.significant, t.verdict) == (0.25, 0.25, False, "noise")
    (_, _, t), = compare.test_pairs([(a, a)], 0.2500001)
    assert (t.significant, t.verdict) == (True, "slower")


def test_pairs_have_no_band_by_default():
    from ccbench.analysis.compare import test_pairs

    # identical single launches with a 1% between-launch CV: an interval of about +-20% around 1, inside a
    # band of 25% (or 100%), but without min_effect there is no band: undetermined, not noise
    x = _case([1.0, 1.1, 1.2, 1.3], 1.15)
    (_, _, t), = test_pairs([(x, x)], 0.05, launch_cv=0.01)
    assert 0.8 < t.ratio_low < 1.0 < t.ratio_high < 1.25
    assert t.verdict == "undetermined" and t.method == "prior"
    (_, _, t), = test_pairs([(x, x)], 0.05, launch_cv=0.01, min_effect=0.25)
    assert t.verdict == "noise"


def test_pairs_without_a_band_a_point_interval_at_one_is_not_noise(monkeypatch):
    # min_effect 0 means no practical band at all: even an interval that is exactly [1, 1] is not called
    # noise by the band, so a single-launch case stays undetermined
    assert verdict_of(monkeypatch, 1.0, 1.0, 1.0, "prior", False, 0.0) == "undetermined"


# -- provenance, settings, summaries and the engine, pinned by mutation testing --------------------

def _nan_free(rows):
    """Summary mappings with NaN written as "nan" (NaN != NaN) and other floats rounded to 12 significant digits."""
    return [{k: ("nan" if math.isnan(v) else float(f"{v:.12g}")) if isinstance(v, float) else v
             for k, v in r.items()} for r in rows]


def test_parse_fraction_reads_fractions_and_percentages():
    from ccbench.analysis.compare import parse_fraction
    from ccbench.core.errors import UsageError

    assert parse_fraction("0.05", "--min-effect") == 0.05
    assert parse_fraction(" 12.5% ", "--min-effect") == 0.125  # the last character dropped, the rest stripped
    assert parse_fraction("7 %", "--min-effect") == 0.07
    assert parse_fraction(0.2, "--launch-cv") == 0.2
    with pytest.raises(UsageError) as exc:
        parse_fraction("abc", "--min-effect")
    assert str(exc.value) == ("--min-effect 'abc' is not a number: give a fraction (0.05) or a percentage (5%)")
    with pytest.raises(UsageError) as exc:
        parse_fraction("inf%", "--launch-cv")
    assert str(exc.value) == ("--launch-cv 'inf%' is not a finite number: give a fraction (0.05) or a "
                              "percentage (5%)")


def test_settings_are_checked_at_their_bounds_with_exact_messages(tmp_path):
    from ccbench.analysis.compare import check_settings as _check_settings
    from ccbench.core.errors import UsageError

    for level, me, cv in ((1e-9, 0.0, None), (1 - 1e-9, 0.999, 1.0), (0.05, 0.0, 1e-9)):
        _check_settings(level, me, cv)  # accepted
    refused = [
        ((0.0, 0.0, None), "the significance level must be in (0, 1), got 0.0"),
        ((1.0, 0.0, None), "the significance level must be in (0, 1), got 1.0"),
        ((0.05, 1.0, None), "the minimum effect must be at least 0 and below 100% (e.g. 5% or 0.05), got 1"),
        ((0.05, -0.01, None), "the minimum effect must be at least 0 and below 100% (e.g. 5% or 0.05), got -0.01"),
        ((0.05, math.nan, None), "the minimum effect must be at least 0 and below 100% (e.g. 5% or 0.05), got nan"),
        ((0.05, 0.0, 0.0), "the between-launch CV must be above 0 and at most 100% (e.g. 20% or 0.2), got 0"),
        ((0.05, 0.0, 1.0001), "the between-launch CV must be above 0 and at most 100% (e.g. 20% or 0.2), "
                              "got 1.0001"),
        ((0.05, 0.0, math.inf), "the between-launch CV must be above 0 and at most 100% (e.g. 20% or 0.2), got inf"),
        ((0.05, 0.0, -0.5), "the between-launch CV must be above 0 and at most 100% (e.g. 20% or 0.2), got -0.5"),
    ]
    for args, message in refused:
        with pytest.raises(UsageError) as exc:
            _check_settings(*args)
        assert str(exc.value) == message


def test_settings_text_of_a_row():
    """How a sweep pair (its kind's `Matching.pair`) writes each row's forced settings: none as "", a mapping as
    KEY=value;..., anything else as written."""
    from ccbench.analysis.compare import SWEEP_MATCHING, test_pairs

    row = _row("bcast", "binomial", 64, [1e-6, 2e-6, 3e-6])
    (_, _, test), = test_pairs([(row, row)], 0.05)

    def settings(value):
        r = dataclasses.replace(row, settings=value)
        return SWEEP_MATCHING.pair("A", "B", r, r, test).settings_a

    assert settings(None) == "" and settings({}) == ""
    assert settings({"A_ALG": "ring", "B_N": 4}) == "A_ALG=ring;B_N=4"
    assert settings("X=1") == "X=1"  # not a mapping: as written


def test_measured_launch_cv_pools_the_variance_of_launch_log_medians():
    from ccbench.analysis.compare import measured_launch_cv

    e = math.e
    single = _case([1.0, 2.0, 3.0], 2.0)                          # one launch: not used
    untestable = _case([1.0], 1.0)                                # one sample: not used
    two = _case([1.0, 1.0, 1.0, e, e, e], 1.5, (3, 3))            # log medians 0, 1: s^2 = 1/2, 1 dof
    three = _case([1.0, 1.0, 1.0, 1.0, e**3, e**3], 1.0, (2, 2, 2))  # log medians 0, 0, 3: s^2 = 3, 2 dof
    # pooled: (1/2 + 2 * 3) / (1 + 2) = 6.5 / 3, as a CV: sqrt(exp(6.5 / 3) - 1)
    cv, used = measured_launch_cv([single, untestable, two, three])
    assert used == 2 and cv == pytest.approx(math.sqrt(math.expm1(6.5 / 3)), rel=1e-12)
    cv, used = measured_launch_cv([two])
    assert used == 1 and cv == pytest.approx(math.sqrt(math.expm1(0.5)), rel=1e-12)
    assert measured_launch_cv([single, untestable]) is None
    assert measured_launch_cv([]) is None


def test_provenance_differences_lines_are_exact():
    from types import SimpleNamespace

    a = {"mpi_library": "MPICH 5", "nranks": 4, "nodes": 1, "ranks_per_node": 4, "thread_level": "single",
         "oversubscribed": False, "mpi_env": {"X_SAME": "1", "X_DIFF": "a", "X_ONLY_A": "on"},
         "hardware": {"nodes": {"n1": {"cpu": {"model": "EPYC", "cores": 64}}}}, "lab": {"latency_us": 5},
         "status": "interrupted"}  # no config: no synchronisation recorded
    b = {"mpi_library": "Open MPI 5", "nranks": 2, "nodes": 1, "ranks_per_node": 2, "thread_level": "single",
         "oversubscribed": True, "config": {"sync": "window"},
         "mpi_env": {"X_SAME": "1", "X_DIFF": "b", "Y_ONLY_B": "off"},
         "hardware": {"nodes": {"n1": {"cpu": {"model": "Xeon", "cores": 64}}}}, "status": "complete"}
    rows_a = [SimpleNamespace(dtype=d) for d in ("float64", "float32", "float64")]
    rows_b = [SimpleNamespace(dtype=d) for d in ("int32", "float16")]
    assert provenance_differences(a, b, rows_a, rows_b, "A", "C") == [
        "provenance differs in MPI library: 'MPICH 5' (A) vs 'Open MPI 5' (C)",
        "provenance differs in ranks: 4 (A) vs 2 (C)",
        "provenance differs in ranks per node: 4 (A) vs 2 (C)",
        "provenance differs in oversubscribed cores: False (A) vs True (C)",
        "provenance differs in dtypes: float32, float64 (A) vs float16, int32 (C)",
        "provenance differs in synchronisation: None (A) vs window (C)",
        "provenance differs in MPI environment settings: X_DIFF=a (A) vs b (C), X_ONLY_A=on (A) vs (unset) (C), "
        "Y_ONLY_B=(unset) (A) vs off (C)",
        "provenance differs in hardware (CPU model): 'EPYC' (A) vs 'Xeon' (C)",
        "provenance differs in emulated lab settings: {'latency_us': 5} (A) vs None (C)",
        "run A is interrupted: only its finished cases are compared",
    ]
    # the default labels are A and B; a run without mpi_env has none set; a status other than complete is named
    c = {"mpi_env": {"Z": "1"}, "status": "failed"}
    assert provenance_differences({}, c, rows_a, rows_a) == [
        "provenance differs in MPI environment settings: Z=(unset) (A) vs 1 (B)",
        "run B is failed: only its finished cases are compared",
    ]
    assert provenance_differences(c, {"status": "complete"}, rows_b, rows_b) == [
        "provenance differs in MPI environment settings: Z=1 (A) vs (unset) (B)",
        "run A is failed: only its finished cases are compared",
    ]
    assert provenance_differences(b, dict(b), rows_b, rows_b) == []
    # a run.json whose config is null (written by hand or by another tool) records no synchronisation
    assert provenance_differences({"config": None}, {"config": {"sync": "barrier"}}, rows_b, rows_b) == [
        "provenance differs in synchronisation: None (A) vs barrier (B)"]
    assert provenance_differences({"config": None}, {}, rows_b, rows_b) == []


def test_workload_settings_differences_name_each_setting_once():
    """The warnings a workload comparison adds to the provenance lines (its kind's `Matching.extra_warnings`)."""
    from ccbench.analysis.compare import WORKLOAD_MATCHING

    warnings = WORKLOAD_MATCHING.extra_warnings

    a = {"config": {"sync": "barrier", "steps": 10, "seed": 1, "warmup": 3, "only_a": "x"}}
    b = {"config": {"sync": "barrier", "steps": 20, "seed": 2, "warmup": 5, "only_b": 7}}
    assert warnings(a, b, "A", "C") == [
        "provenance differs in workload settings: steps=10 (A) vs 20 (C), only_a=x (A) vs (unset) (C), "
        "only_b=(unset) (A) vs 7 (C)"]
    assert warnings({"config": None}, {"config": {"steps": 1}}, "A", "B") == [
        "provenance differs in workload settings: steps=(unset) (A) vs 1 (B)"]
    assert warnings({"config": {"steps": 1}}, {}, "A", "B") == [
        "provenance differs in workload settings: steps=1 (A) vs (unset) (B)"]
    # only the quiet settings (how, not what, is measured) differ: nothing to say
    assert warnings({"config": {"seed": 1, "warmup": 3}}, {"config": {"seed": 2}}, "A", "B") == []
    assert warnings({}, {}, "A", "B") == []


def _fake_comparison(kind, runs, pairs):
    from ccbench.analysis.compare import Comparison

    return Comparison([(lab, Path(lab), {}) for lab in runs], pairs, [], {}, 0.05, kind=kind)


def test_sweep_summary_per_collective_then_all():
    from types import SimpleNamespace as P

    pairs = [P(other="B", collective="allreduce", ratio=2.0, verdict="slower"),
             P(other="B", collective="allreduce", ratio=0.5, verdict="faster"),
             P(other="B", collective="allreduce", ratio=math.inf, verdict="untested"),  # baseline median 0
             P(other="B", collective="bcast", ratio=0.0, verdict="untested"),           # other median 0
             P(other="B", collective="bcast", ratio=0.25, verdict="noise"),
             P(other="C", collective="gather", ratio=4.0, verdict="undetermined"),
             P(other="C", collective="gather", ratio=1.0, verdict="undetermined"),
             P(other="D", collective="scatter", ratio=math.inf, verdict="untested")]
    got = [s.to_dict() for s in _fake_comparison("sweep", "ABCD", pairs).summary()]

    def row(other, coll, n, g, faster=0, slower=0, noise=0, undetermined=0, untested=0):
        return {"other": other, "collective": coll, "pairs": n, "geomean_ratio": g, "faster": faster,
                "slower": slower, "noise": noise, "undetermined": undetermined, "untested": untested}

    # geometric means of the positive finite ratios only: sqrt(2 x 0.5) = 1, 0.25, (2 x 0.5 x 0.25)^(1/3), sqrt(4)
    assert _nan_free(got) == _nan_free([
        row("B", "allreduce", 3, 1.0, faster=1, slower=1, untested=1),
        row("B", "bcast", 2, 0.25, noise=1, untested=1),
        row("B", "all", 5, 0.25 ** (1 / 3), faster=1, slower=1, noise=1, untested=2),
        row("C", "gather", 2, 2.0, undetermined=2),   # one collective: no "all" row
        row("D", "scatter", 1, math.nan, untested=1),  # no finite ratio: NaN
    ])


def test_launch_summary_counts_how_cases_were_decided():
    from types import SimpleNamespace

    def p(other, method, verdict, la=1, lb=1, res=None):
        return SimpleNamespace(other=other, method=method, verdict=verdict, launches_a=la, launches_b=lb,
                               resolvable_ratio=res)

    pairs = [p("B", "welch", "slower", 3, 2), p("B", "welch", "noise", 2, 2), p("B", "welch", "faster", 3, 4),
             p("B", "prior", "faster", res=2.5), p("B", "prior", "slower", res=2.6),
             p("B", "prior", "undetermined", res=3.0), p("B", "prior", "noise", res=2.8),
             p("B", "untested", "untested"), p("C", "untested", "untested"), p("C", "untested", "untested")]
    got = [dataclasses.asdict(s) for s in _fake_comparison("sweep", "ABC", pairs).launch_summary()]
    none = dict.fromkeys(("faster", "slower", "noise", "undetermined", "untested"), 0)
    assert got == [
        {"other": "B", "pairs": 8, "launch_level": 3, "launches_a": (2, 3), "launches_b": (2, 4),
         "launch_level_counts": dict(none, faster=1, slower=1, noise=1), "single_launch": 4, "called": 2,
         "undetermined": 1, "noise": 1, "resolvable_low": 2.5, "resolvable_high": 3.0, "untested": 1},
        {"other": "C", "pairs": 2, "launch_level": 0, "launches_a": (), "launches_b": (),
         "launch_level_counts": none, "single_launch": 0, "called": 0, "undetermined": 0, "noise": 0,
         "resolvable_low": None, "resolvable_high": None, "untested": 2},
    ]


def test_workload_summary_steps_then_calls_per_workload():
    from types import SimpleNamespace

    def p(other, workload, whole, ratio, verdict):
        return SimpleNamespace(other=other, workload=workload, whole=whole, ratio=ratio, verdict=verdict)

    pairs = [p("B", "ddp", True, 2.0, "slower"), p("B", "ddp", False, 4.0, "undetermined"),
             p("B", "ddp", True, 0.5, "faster"), p("B", "ddp", False, 0.0, "untested"),
             p("B", "ddp", False, 0.25, "noise"),
             p("B", "pipe", False, 3.0, "undetermined"),        # calls only: no steps row
             p("B", "overlap", True, 1.5, "undetermined"),      # overlap and straggler rows: calls measured
             p("B", "straggler", True, math.inf, "untested"),
             p("C", "ddp", True, 1.0, "noise")]
    got = [s.to_dict() for s in _fake_comparison("workload", "ABC", pairs).summary()]

    def row(other, w, rows, n, g, **counts):
        return {"other": other, "workload": w, "rows": rows, "pairs": n, "geomean_ratio": g,
                **dict(dict.fromkeys(("faster", "slower", "noise", "undetermined", "untested"), 0), **counts)}

    assert _nan_free(got) == _nan_free([
        row("B", "ddp", "steps", 2, 1.0, faster=1, slower=1),
        row("B", "ddp", "calls", 3, 1.0, noise=1, undetermined=1, untested=1),  # sqrt(4 x 0.25); 0 left out
        row("B", "pipe", "calls", 1, 3.0, undetermined=1),
        row("B", "overlap", "calls measured", 1, 1.5, undetermined=1),
        row("B", "straggler", "calls measured", 1, math.nan, untested=1),
        row("C", "ddp", "steps", 1, 1.0, noise=1),
    ])


def test_a_sweep_pair_takes_the_case_from_a_and_both_sides_measurements(tmp_path):
    """compare's pair of two runs' rows of one case: the case (dtype, op, in place, root) from the baseline's row,
    each side's rank count, samples, median and interval, and the settings of each as text."""
    from ccbench.analysis.compare import test_pairs

    ra = dataclasses.replace(_row("bcast", "binomial", 64, [1e-6, 2e-6, 3e-6, 4e-6]), dtype="int32", op="max",
                             in_place=True, root=1, nranks=4, settings={"ALG": "binomial", "N": 2})
    rb = dataclasses.replace(_row("bcast", "binomial", 64, [5e-6, 6e-6, 9e-6]), dtype="int32", op="max",
                             in_place=True, root=1, nranks=2, settings={"ALG": 2})
    a = _write_run(tmp_path / "A", [ra], nranks=4)
    c = _write_run(tmp_path / "C", [rb])
    cmp = compare_runs([open_run(a), open_run(c)])
    (got,), ((_, _, test),) = cmp.pairs, test_pairs([(ra, rb)], cmp.level)
    assert dataclasses.asdict(got) == {
        "baseline": "A", "other": "B", "collective": "bcast", "algorithm": "binomial", "nbytes": 64,
        "dtype": "int32", "op": "max", "in_place": True, "root": 1, "settings_a": "ALG=binomial;N=2",
        "settings_b": "ALG=2", "nranks_a": 4, "nranks_b": 2, "samples_a": 4, "samples_b": 3,
        "median_a_s": ra.median_s, "median_b_s": 6e-6, "ci_low_a_s": ra.ci_low_s, "ci_high_a_s": ra.ci_high_s,
        "ci_low_b_s": rb.ci_low_s, "ci_high_b_s": rb.ci_high_s, **dataclasses.asdict(test)}
    assert ra.median_s == pytest.approx(2.5e-6)
    assert len({ra.ci_low_s, ra.ci_high_s, rb.ci_low_s, rb.ci_high_s}) == 4  # four distinct values to tell apart


def test_a_workload_pair_takes_the_key_from_a_and_both_sides_measurements(tmp_path):
    """compare's pair of two workload runs' rows of one key: the key from the baseline's row, each side's rank count,
    samples, median, interval, overlap and slowdown."""
    from ccbench.analysis.compare import LaunchTest

    def copy(name, **changed):
        run = tmp_path / name
        shutil.copytree(DATA / "wl-ddp-np2", run)
        lines = (run / "cases.jsonl").read_text().splitlines()
        first = dict(json.loads(lines[0]), **changed)
        (run / "cases.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
        (run / "cases.csv").unlink()
        return run

    a = copy("A", median_s=1.0, ci_low_s=0.9, ci_high_s=1.1, overlap_pct=40.0, slowdown=1.5)
    b = copy("B", median_s=2.0, ci_low_s=1.8, ci_high_s=2.2, overlap_pct=55.0, slowdown=2.5)
    ra, rb = open_run(a), open_run(b)
    got = dataclasses.asdict(next(p for p in compare_runs([ra, rb]).pairs if p.median_a_s == 1.0))
    key = {k: getattr(ra.rows[0], k) for k in ("workload", "variant", "model", "algorithm", "dtype", "part", "label",
                                              "collective", "nbytes", "delay_s", "delayed_rank")}
    tested = {f.name for f in dataclasses.fields(LaunchTest)}   # decided with the run's other pairs, as one family
    assert {k: v for k, v in got.items() if k not in tested} == {
        "baseline": "A", "other": "B", **key, "nranks_a": 2, "nranks_b": 2, "samples_a": ra.rows[0].samples,
        "samples_b": rb.rows[0].samples, "median_a_s": 1.0, "median_b_s": 2.0, "ci_low_a_s": 0.9, "ci_high_a_s": 1.1,
        "ci_low_b_s": 1.8, "ci_high_b_s": 2.2, "overlap_pct_a": 40.0, "overlap_pct_b": 55.0, "slowdown_a": 1.5,
        "slowdown_b": 2.5}
    assert got["ratio"] == 2.0


def test_compare_runs_reads_run_names_under_the_results_directory(tmp_path, monkeypatch):
    for top in ("results", "store"):
        (tmp_path / top).mkdir()
        for name in ("a", "b"):
            _write_run(tmp_path / top / name, [_row("allreduce", "ring", 8, [1e-6, 2e-6, 3e-6])])
    monkeypatch.chdir(tmp_path)
    cmp = compare_runs(["a", "b"])  # the default results directory: ./results
    assert [(lab, p.resolve()) for lab, p, _ in cmp.runs] == [("A", (tmp_path / "results" / "a").resolve()),
                                                              ("B", (tmp_path / "results" / "b").resolve())]
    cmp = compare_runs(["b", "a"], tmp_path / "store")
    assert [p.resolve() for _, p, _ in cmp.runs] == [(tmp_path / "store" / n).resolve() for n in ("b", "a")]


def test_compare_runs_labels_runs_a_to_z_then_r27(tmp_path):
    paths = [_write_run(tmp_path / f"run{i}", [_row("allreduce", "ring", 8, [1e-6 * (1 + i), 2e-6 * (1 + i)])])
             for i in range(27)]
    cmp = compare_runs(paths)
    labels = [chr(ord("A") + i) for i in range(26)] + ["R27"]
    assert [lab for lab, _, _ in cmp.runs] == labels
    assert [(p.baseline, p.other) for p in cmp.pairs] == [("A", lab) for lab in labels[1:]]
    assert [p.ratio for p in cmp.pairs] == pytest.approx([1.0 + i for i in range(1, 27)])


def test_compare_runs_collects_every_warning_in_order(tmp_path):
    lo = [1e-6, 2e-6, 3e-6]
    a = _write_run(tmp_path / "a", [_row("allreduce", "ring", 8, lo), _row("allreduce", "ring", 8, [9e-6] * 3),
                                    _row("allreduce", "ring", 64, lo)])
    b = _write_run(tmp_path / "b", [_row("allreduce", "ring", 64, [2 * x for x in lo]),
                                    _row("allreduce", "ring", 8, [3 * x for x in lo])], thread_level="multiple")
    with open(b / "cases.jsonl", "a") as f:
        f.write('{"collective": "allre')  # a torn last line: dropped with a warning
    c = _write_run(tmp_path / "c", [_row("allreduce", "ring", 8, lo), _row("allreduce", "ring", 512, lo),
                                    _row("allreduce", "ring", 512, lo)], nranks=4)
    cmp = compare_runs([a, b, c])
    assert cmp.warnings == [
        "run B: dropped a torn last line of cases.jsonl (line 3)",
        "run A holds 1 repeated case(s); the first of each is compared",
        "provenance differs in thread level: 'single' (A) vs 'multiple' (B)",
        "provenance differs in ranks: 2 (A) vs 4 (C)",
        "run C holds 1 repeated case(s); the first of each is compared",
    ]
    assert cmp.unmatched == {"B": (0, 0), "C": (1, 1)}
    # the baseline's first row of a repeated case is compared; pairs in the baseline's order, run by run
    assert [(p.other, p.nbytes) for p in cmp.pairs] == [("B", 8), ("B", 64), ("C", 8)]
    assert [p.ratio for p in cmp.pairs] == pytest.approx([3.0, 2.0, 1.0])
    assert [(lab, p) for lab, p, _ in cmp.runs] == [("A", a), ("B", b), ("C", c)]
    assert [m["thread_level"] for _, _, m in cmp.runs] == ["single", "multiple", "single"]
    assert (cmp.kind, cmp.level, cmp.min_effect, cmp.launch_cv, cmp.launch_cv_given, cmp.measured_cv) == (
        "sweep", 0.05, 0.0, DEFAULT_PRIOR_BETWEEN_CV, False, {})


def test_compare_runs_passes_level_min_effect_and_launch_cv_to_every_case(tmp_path):
    x = [1e-6 * (10 + i) for i in range(10)]
    a = _write_run(tmp_path / "a", [_row("allreduce", "ring", 8, x)])
    b = _write_run(tmp_path / "b", [_row("allreduce", "ring", 8, list(reversed(x)))])
    ref = compare_launches([x], [list(reversed(x))], level=0.1, prior_between_cv=0.01)
    cmp = compare_runs([a, b], level=0.1, min_effect=0.5, launch_cv=0.01)
    (p,) = cmp.pairs
    assert (p.ratio_low, p.ratio_high, p.p_value) == pytest.approx((ref.ratio_low, ref.ratio_high, ref.p_value))
    # a 1% CV resolves a few percent: the interval lies inside the 50% band, so the case is noise
    assert 1 / 1.5 < p.ratio_low < p.ratio_high < 1.5 and p.verdict == "noise" and p.method == "prior"
    assert (cmp.level, cmp.min_effect, cmp.launch_cv, cmp.launch_cv_given) == (0.1, 0.5, 0.01, True)
    # without the band the same case is undetermined; the default prior gives a wider interval
    (q,) = compare_runs([a, b], level=0.1, launch_cv=0.01).pairs
    assert q.verdict == "undetermined" and (q.ratio_low, q.ratio_high) == pytest.approx((p.ratio_low, p.ratio_high))
    wide = compare_runs([a, b], level=0.1)
    assert (wide.launch_cv, wide.launch_cv_given) == (DEFAULT_PRIOR_BETWEEN_CV, False)
    ref = compare_launches([x], [list(reversed(x))], level=0.1, prior_between_cv=DEFAULT_PRIOR_BETWEEN_CV)
    assert (wide.pairs[0].ratio_low, wide.pairs[0].ratio_high) == pytest.approx((ref.ratio_low, ref.ratio_high))


def test_compare_runs_reports_the_launch_cv_a_replicated_run_measured(tmp_path):
    import dataclasses

    e = math.e
    one = _row("allreduce", "ring", 8, [1e-6, 2e-6, 3e-6])
    rep = dataclasses.replace(_row("allreduce", "ring", 8, [1e-6, 1e-6, 1e-6, e * 1e-6, e * 1e-6, e * 1e-6]),
                              launches=(1, 2), launch_samples=(3, 3))  # log medians differ by 1: s^2 = 1/2
    a = _write_run(tmp_path / "a", [one])
    b = _write_run(tmp_path / "b", [rep])
    c = _write_run(tmp_path / "c", [one])
    cmp = compare_runs([a, b, c])
    assert list(cmp.measured_cv) == ["B"] and cmp.measured_cv["B"] == (pytest.approx(math.sqrt(math.expm1(0.5))), 1)
    rev = compare_runs([b, a]).measured_cv
    assert list(rev) == ["A"] and rev["A"] == (pytest.approx(math.sqrt(math.expm1(0.5))), 1)


def test_compare_runs_refusals_are_exact(tmp_path, wl_runs):
    from ccbench.core.errors import UsageError

    rows = [_row("allreduce", "ring", 8, [1e-6, 2e-6])]
    a = _write_run(tmp_path / "a", rows)
    b = _write_run(tmp_path / "b", rows)
    empty = _write_run(tmp_path / "empty", [])
    other = _write_run(tmp_path / "other", [_row("gather", "linear", 8, [1e-6, 2e-6])])
    bytes_ = _write_run(tmp_path / "bytes", [dataclasses.replace(rows[0], dtype="uint8")])
    mixed_a = _write_run(tmp_path / "mixed-a", [_row("allreduce", "ring", 8, [1e-6] * 2),
                                                _row("allreduce", "linear", 64, [1e-6] * 2)])
    mixed_b = _write_run(tmp_path / "mixed-b", [_row("allreduce", "linear", 8, [1e-6] * 2),
                                                _row("allreduce", "ring", 64, [1e-6] * 2)])
    wl = wl_runs["wl-ddp-np2"]
    cases = [
        ([a], "compare needs at least two runs"),
        ([a, wl], f"{str(wl)!r} is a training-workload run but {str(a)!r} is a collective sweep: compare takes "
                  "runs of one kind"),
        ([wl, a], f"{str(a)!r} is a collective sweep but {str(wl)!r} is a training-workload run: compare takes "
                  "runs of one kind"),
        ([a, empty], f"{str(empty)!r} has no finished cases"),
        ([a, b, tmp_path / "b" / ".." / "a"], f"run {str(tmp_path / 'b' / '..' / 'a')!r} is given twice"),
        ([a, b, other], "runs A (a) and C (other) have no case in common (same collective, algorithm, size, dtype, "
                        "op): they differ in collective (A: allreduce; C: gather) and algorithm (A: ring; C: linear)"),
        # one part of the key alone keeps them apart (an OSU import in uint8 beside a float32 sweep): it is named
        ([a, bytes_], "runs A (a) and B (bytes) have no case in common (same collective, algorithm, size, dtype, op): "
                      "they differ in dtype (A: float32; B: uint8)"),
        # no part alone does (each size is in both runs, never with the same algorithm): nothing more is said
        ([mixed_a, mixed_b], "runs A (mixed-a) and B (mixed-b) have no case in common (same collective, algorithm, "
                             "size, dtype, op)"),
    ]
    for runs, message in cases:
        with pytest.raises(UsageError) as exc:
            compare_runs(runs)
        assert str(exc.value) == message
    # the settings are checked before any run is read
    for kw, message in (({"level": 1.5}, "the significance level must be in (0, 1), got 1.5"),
                        ({"min_effect": 1.0}, "the minimum effect must be at least 0 and below 100% (e.g. 5% or 0.05), "
                                              "got 1"),
                        ({"launch_cv": 2.0}, "the between-launch CV must be above 0 and at most 100% (e.g. 20% or "
                                             "0.2), got 2")):
        with pytest.raises(UsageError) as exc:
            compare_runs([a, tmp_path / "missing"], **kw)
        assert str(exc.value) == message


def test_workload_settings_differences_are_warned_with_the_run_labels(wl_runs, tmp_path):
    a = wl_runs["wl-ddp-np2"]
    b = tmp_path / "b"
    shutil.copytree(a, b)
    meta = json.loads((b / "run.json").read_text())
    meta["config"] = dict(meta["config"], bucket_mb=1.0, seed=7)  # seed: how, not what, is measured
    (b / "run.json").write_text(json.dumps(meta))
    cmp = compare_runs([a, b])
    assert cmp.warnings == ["provenance differs in workload settings: bucket_mb=0.5 (A) vs 1.0 (B)"]
    assert cmp.kind == "workload" and cmp.unmatched == {"B": (0, 0)} and len(cmp.pairs) == 39
    assert all(p.ratio == 1.0 and (p.baseline, p.other) == ("A", "B") for p in cmp.pairs)


def test_the_interval_beside_a_verdict_excludes_1_exactly_when_a_difference_is_called(tmp_path):
    """False-coverage-rate intervals (Benjamini & Yekutieli 2005): across a family whose cases sit on both sides
    of the Benjamini-Hochberg line, every called case's interval excludes 1 and every other one's holds it --
    where each case's own 95% interval would exclude 1 for cases BH does not call."""
    rng = np.random.default_rng(7)
    rows_a, rows_b = [], []
    for i, effect in enumerate([1.0, 1.02, 1.05, 1.08, 1.1, 1.12, 1.15, 1.2, 1.3, 1.5, 2.0, 1.0, 0.9, 0.8]):
        base = [list(1e-5 * np.exp(rng.normal(0, 0.06)) * (1 + 0.01 * rng.random(8))) for _ in range(3)]
        other = [list(1e-5 * effect * np.exp(rng.normal(0, 0.06)) * (1 + 0.01 * rng.random(8))) for _ in range(3)]
        rows_a.append(_launch_row(8 << i, base))
        rows_b.append(_launch_row(8 << i, other))
    cmp = compare_runs([_write_run(tmp_path / "a", rows_a), _write_run(tmp_path / "b", rows_b)])
    called = [p for p in cmp.pairs if p.verdict in ("faster", "slower")]
    assert 0 < len(called) < len(cmp.pairs)  # both sides of the line
    for p in cmp.pairs:
        assert (p.ratio_low > 1 or p.ratio_high < 1) == (p.verdict in ("faster", "slower")), p
        assert p.interval_confidence == pytest.approx(1 - len(called) * 0.05 / len(cmp.pairs))
    # what the unadjusted 95% intervals would have said: more cases than BH calls (the contradiction shown before)
    own = [p for p in cmp.pairs if p.p_value < 0.05]
    assert len(own) > len(called)


@pytest.mark.parametrize("low, high, useless", [
    (0.5, 5.0, False), (0.5, 5.01, True), (1.01, 100.0, False), (0.01, 0.99, False), (0.0, 2.0, True),
    (0.3, 2.9, False),
])
def test_an_interval_is_useless_when_it_holds_1_and_spans_more_than_10x(low, high, useless):
    from ccbench.analysis.compare import useless as is_useless

    assert is_useless(low, high) is useless


def test_launches_needed_to_tell_2x_from_1():
    """Per-launch log SD 0.5, Welch with K a side: t_{2K-2, 0.975} 0.5 sqrt(2 / K) against ln 2 = 0.693 --
    K = 5: 2.306 x 0.5 x 0.632 = 0.729 (too wide), K = 6: 2.228 x 0.5 x 0.577 = 0.643 (enough)."""
    import math

    from ccbench.core.replication import LaunchComparison, launches_needed, student_t_quantile

    s, k = 0.5, 3
    half = student_t_quantile(0.975, 2 * k - 2) * s * math.sqrt(2 / k)
    c = LaunchComparison(1.0, math.exp(-half), math.exp(half), 1.0, "noise", k, k, 2 * k - 2, math.exp(half),
                         "welch")
    assert launches_needed(c, 0.05) == 6
    import dataclasses

    assert launches_needed(dataclasses.replace(c, method="untested"), 0.05) is None
    assert launches_needed(dataclasses.replace(c, resolvable_ratio=1e300), 0.05) is None  # beyond MAX_LAUNCHES


def _load(other: float) -> dict:
    return {"wall_s": 10.0, "cpus": 2, "busy_fraction": min(1.0, other + 0.5), "own_fraction": 0.5,
            "other_fraction": other, "steal_fraction": 0.0}


def _copy(seconds: float) -> dict:
    return {"one_core": {"counted_bytes": 1 << 27, "seconds": [seconds, 2 * seconds]}}


@pytest.mark.parametrize(("meta_a", "meta_b", "withheld"), [
    ({}, {}, False),                                                      # no load recorded: decided as before
    ({"load": _load(0.0)}, {"load": _load(0.2)}, False),                  # at the limit: kept
    ({"load": _load(0.0)}, {"load": _load(0.21)}, True),                  # just above it on one side: withheld
    ({"load": _load(0.5)}, {"load": _load(0.0)}, True),                   # the baseline disturbed
    ({"hosts": {"n1": 2}, "memory_bandwidth": _copy(0.01)},
     {"hosts": {"n1": 2}, "memory_bandwidth": _copy(0.015)}, False),     # calibrations 1.5x apart: kept
    ({"hosts": {"n1": 2}, "memory_bandwidth": _copy(0.01)},
     {"hosts": {"n1": 2}, "memory_bandwidth": _copy(0.016)}, True),      # 1.6x on one host: withheld
    ({"hosts": {"n1": 2}, "memory_bandwidth": _copy(0.01)},
     {"hosts": {"n2": 2}, "memory_bandwidth": _copy(0.03)}, False),      # other hosts: a hardware question
])
def test_a_difference_measured_under_load_or_on_a_changed_machine_is_withheld(tmp_path, meta_a, meta_b, withheld):
    """A 3x slowdown seen in 3 launches a side is called, unless a run was measured while other processes took more
    than a fifth of the machine, or the two runs' own copy-bandwidth calibrations on one host disagree by over
    1.5x: then the case stays undetermined, its interval kept, and a warning says why."""
    fast = [[1e-5, 1.1e-5, 0.9e-5]] * 3
    slow = [[3e-5, 3.3e-5, 2.7e-5]] * 3
    a = _write_run(tmp_path / "a", [_launch_row(1024, fast)], **meta_a)
    b = _write_run(tmp_path / "b", [_launch_row(1024, slow)], **meta_b)
    cmp = compare_runs([open_run(a), open_run(b)])
    (p,) = cmp.pairs
    assert p.verdict == ("undetermined" if withheld else "slower") and p.ratio_low > 1
    assert bool(cmp.withheld) is withheld
    assert any("withheld" in w for w in cmp.warnings) is withheld


def test_cold_against_warm_buffers_is_a_provenance_difference():
    from ccbench.core.errors import UsageError
    from ccbench.measure.config import resolve

    warm, cold = {"config": {"sync": "barrier"}}, {"config": {"sync": "barrier", "buffers": "cold"}}
    assert provenance_differences(warm, warm, [], []) == []
    (w,) = provenance_differences(warm, cold, [], [])
    assert w.startswith("provenance differs in buffers: warm (A) vs cold (B)")
    assert resolve({"buffers": "cold"}).buffers == "cold" and resolve({}).buffers == "warm"
    with pytest.raises(UsageError, match="config key 'buffers': 'hot'; choose from warm, cold"):
        resolve({"buffers": "hot"})


def test_compare_ends_with_its_verdict_counts_and_largest_differences(tmp_path):
    from ccbench.present.compare import answer_lines

    fast = [[1e-5, 1.1e-5, 0.9e-5]] * 3
    a = _write_run(tmp_path / "a", [_launch_row(1024, fast), _launch_row(8, fast)])
    b = _write_run(tmp_path / "b", [_launch_row(1024, [[3e-5, 3.3e-5, 2.7e-5]] * 3), _launch_row(8, fast)])
    (line,) = answer_lines(compare_runs([open_run(a), open_run(b)]))
    assert line.startswith("run B vs A: 1 slower, 1 noise of 2 cases; largest: allreduce/ring 1 KiB float32 sum 3x (")
    c = _write_run(tmp_path / "c", [_launch_row(1024, [[3e-5, 3.3e-5, 2.7e-5]] * 3)], load=_load(0.5))
    (line,) = answer_lines(compare_runs([open_run(a), open_run(c)]))
    assert "1 undetermined of 1 case; verdicts withheld: other processes used 50%" in line
