"""`ccbench report` and `ccbench plot` on real stored runs (tests/data/run-np4*), no MPI.

The runs were made on this 2-core machine with
``ccbench launch -n 4 -C pingpong,allreduce,bcast,allgather -a all -s 8:64K:8 --min-reps 10
--max-reps 100 --budget 0.05`` (run-np4: thread level auto = multiple, 4 ranks on 2 cores;
run-np4-single: the same with ``--thread-level single``) and renamed, argv[0] in run.json
made relative to the repository.  They are only read here: every test that writes works
on a copy.
"""

import dataclasses
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from runfiles import derived, tree_state

from ccbench.analysis.runs import fit_run  # noqa: E402
from ccbench.cli import main  # noqa: E402
from ccbench.core.errors import CCBenchError, UsageError  # noqa: E402
from ccbench.core.units import (
    format_size,  # noqa: E402
    human_time,
)
from ccbench.present.plots import require_matplotlib  # noqa: E402
from ccbench.store.run import SWEEP, open_run
from ccbench.workflow.report import report as build_report


def load_collective_run(run):
    """(path, meta, rows, warnings) of a stored sweep, as `ccbench plot` opens it."""
    r = open_run(run, kinds=(SWEEP,), need_rows=True, what="ccbench plot")
    return r.path, r.meta, r.rows, r.warnings
from ccbench.analysis.fastest import ONE_LAUNCH, VariantFastest, fastest_per_size, group_rows  # noqa: E402
from ccbench.present.report import fastest_table  # noqa: E402
from ccbench.present.table import DECIDED, Column, fmt_p  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
RUN = DATA / "run-np4"
RAW = ("run.json", "cases.jsonl", "cases.csv")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run_copy(tmp_path):
    dst = tmp_path / "run-np4"
    shutil.copytree(RUN, dst)
    return dst


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One report of a copy of run-np4, shared by the read-only tests below."""
    dst = tmp_path_factory.mktemp("rep") / "run-np4"
    shutil.copytree(RUN, dst)
    return build_report(dst, n_boot=200)


def _stored_rows(path=RUN) -> list[dict]:
    return [json.loads(line) for line in (path / "cases.jsonl").read_text().splitlines() if line.strip()]


def _digest(path: Path) -> dict:
    return {n: hashlib.sha256((path / n).read_bytes()).hexdigest() for n in RAW}


def _md_table(md: str, heading: str, occurrence: int = 0) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first pipe table after the `occurrence`-th line equal to `heading`."""
    lines = md.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.strip() == heading]
    i = starts[occurrence] + 1
    while not lines[i].startswith("|"):
        i += 1
    table = []
    while i < len(lines) and lines[i].startswith("|"):
        table.append([c.strip() for c in lines[i].strip().strip("|").split(" | ")])
        i += 1
    return table[0], table[2:]


def _section(md: str, title: str) -> str:
    """The Markdown of one collective's section (from its '## ' heading to the next)."""
    block = md.split(f"\n## {title}\n", 1)[1]
    return block.split("\n## ", 1)[0]


# -- fastest per size, from the stored rows ---------------------------------------------------


def test_fastest_per_size_is_the_smallest_stored_median():
    _, _, rows, _ = load_collective_run(RUN)
    stored = _stored_rows()
    groups = group_rows(rows)
    assert [g.collective for g in groups] == ["pingpong", "bcast", "allgather", "allreduce"]
    checked = 0
    for g in groups:
        for f in fastest_per_size(g):
            at = [r for r in stored if r["collective"] == g.collective and r["nbytes"] == f.nbytes
                  and r["nwrong"] == 0]
            best = min(at, key=lambda r: r["median_s"])
            assert (f.fastest, f.median_s) == (best["algorithm"], best["median_s"])
            if len(at) > 1:
                second = sorted(at, key=lambda r: r["median_s"])[1]
                assert f.runner_up == second["algorithm"]
                assert f.margin == pytest.approx(second["median_s"] / best["median_s"] - 1)
                # one launch: the prior between-launch CV decides, never the pooled samples
                assert f.method == ONE_LAUNCH and f.launches == 1
                assert 0 <= f.p_value <= 1 and f.significant == (f.p_value < 0.05)
                assert f.significant == (f.verdict == "faster")
                assert f.verdict in ("faster", "undetermined")
                assert f.ratio_low < 1 + f.margin < f.ratio_high
            checked += 1
    assert checked == 4 * 5  # four collectives, five sizes each


def test_fastest_table_says_how_each_verdict_was_reached():
    """One method: the caption says it; several: a column per row; the verdict is worded by DECIDED."""
    entry = VariantFastest(what="8", fastest="native", median_s=1e-6, runner_up="ring", runner_up_s=2e-6, margin=1.0,
                           p_value=0.01, significant=True, verdict="faster", ratio_low=1.5, ratio_high=2.5,
                           method="paired by launch, K=3", launches=3)
    other = dataclasses.replace(entry, what="64", verdict="noise", significant=False, ratio_low=0.8,
                                method="separate launches, K=3")
    t = fastest_table("t", [entry], Column("size", "size"), lambda e: int(e.what))
    assert [c.header for c in t.columns][-3:] == ["95% CI", "p", "decided"]
    assert t.cells()[0][-3:] == ["+50% to +150%", "0.01", "yes"]
    assert t.caption.startswith("paired by launch, K=3: ") and "paired t test" in t.caption
    t = fastest_table("t", [entry, other], Column("size", "size"), lambda e: int(e.what))
    assert t.columns[-1].header == "how"
    assert [r[-2:] for r in t.cells()] == [["yes", "paired by launch, K=3"], ["no (noise)", "separate launches, K=3"]]
    assert "Welch" in t.caption and "paired t test" in t.caption
    alone = dataclasses.replace(entry, runner_up=None, runner_up_s=None, margin=None, p_value=None, significant=None,
                                verdict=None, ratio_low=None, ratio_high=None, method=None)
    t = fastest_table("t", [alone], Column("size", "size"), lambda e: int(e.what))
    assert t.cells()[0][-3:] == ["-", "-", "-"] and t.caption == ""
    assert DECIDED["undetermined"] == "undetermined"


# -- the report's files ------------------------------------------------------------------------


def test_report_is_written_into_the_derived_tree(report):
    d = report.dir
    assert d.name == "report" and d.parent == derived(report.run.path)
    names = {p.name for p in d.iterdir()}
    assert {"report.md", "report.html", "fits.json"} <= names
    pngs = sorted(n for n in names if n.endswith(".png"))
    # latency and bus bandwidth for all four collectives; predicted vs measured for the
    # three with hand-written (modelled) algorithms
    assert pngs == sorted([f"{c}-{k}.png" for c in ("pingpong", "bcast", "allgather", "allreduce")
                           for k in ("latency", "busbw")]
                          + [f"{c}-predicted.png" for c in ("bcast", "allgather", "allreduce")])
    for n in pngs:
        assert (d / n).read_bytes()[:8] == PNG_MAGIC
    html = (d / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(pngs)  # opens from disk without the PNGs
    md = (d / "report.md").read_text()
    for n in pngs:
        assert f"]({n})" in md


def test_report_latency_and_busbw_tables_are_the_stored_rows(report):
    md = (report.dir / "report.md").read_text()
    stored = _stored_rows()
    for coll, title in (("allreduce", "allreduce at 4 ranks, float32 sum"),
                        ("bcast", "bcast at 4 ranks, float32, root 0")):
        sec = _section(md, title)
        head, rows = _md_table(sec, "### Latency (median [95% CI])")
        assert head[0] == "size" and head[1] == "native"
        algs = head[1:]
        assert sorted(algs) == sorted({r["algorithm"] for r in stored if r["collective"] == coll})
        bhead, brows = _md_table(sec, "### Bus bandwidth (GB/s)")
        assert bhead == head
        for line, bline in zip(rows, brows, strict=True):
            for a, cell, bcell in zip(algs, line[1:], bline[1:], strict=True):
                r = next(r for r in stored if r["collective"] == coll and r["algorithm"] == a
                         and format_size(r["nbytes"]) == line[0])
                assert cell == (f"{human_time(r['median_s'])} [{human_time(r['ci_low_s'])}, "
                                f"{human_time(r['ci_high_s'])}]")
                assert bcell == f"{r['busbw_gbs']:.3g}"
        fhead, frows = _md_table(sec, "### Fastest algorithm per size")
        for f in frows:
            at = [r for r in stored if r["collective"] == coll and format_size(r["nbytes"]) == f[0]]
            assert f[1] == min(at, key=lambda r: r["median_s"])["algorithm"]


def test_report_parameters_come_from_the_fit_library(report):
    d = report.dir
    doc = json.loads((d / "fits.json").read_text())
    again = fit_run(open_run(report.run.path), n_boot=200)
    again = json.loads(json.dumps(again.to_dict()))  # as stored: tuples are JSON lists
    assert doc["curves"] == again["curves"] and doc["network"] == again["network"]
    md = (d / "report.md").read_text()
    pp = doc["network"]["pingpong"]
    head, rows = _md_table(md, "## Network parameters")
    assert rows[0][:2] == ["α (latency)", human_time(pp["alpha_s"])]
    assert rows[1][1] == f"{pp['bandwidth_gbs']:.3g}"
    sec = _section(md, "allreduce at 4 ranks, float32 sum")
    head, rows = _md_table(sec, "### Fitted parameters")
    ring = next(c for c in doc["curves"] if c["collective"] == "allreduce" and c["algorithm"] == "ring")
    seg = ring["segmented"]["segments"][0]
    row = next(r for r in rows if r[0] == "ring")
    assert row[2] == human_time(seg["alpha_s"]) and row[4] == f"{1e-9 / seg['beta_s_per_byte']:.3g}"
    # provenance at the top
    assert md.index("## Provenance") < md.index("## pingpong")
    head, prov = _md_table(md, "## Provenance")
    kv = dict((r[0], r[1]) for r in prov)
    assert kv["MPI library"].startswith("MPICH") and kv["thread level"].startswith("multiple")
    assert kv["ranks"].startswith("4 on 1 node(s), 4 per node")


def test_second_report_never_overwrites_and_the_run_is_left_as_it_was(run_copy, capsys):
    before = tree_state(run_copy)
    out_dir = derived(run_copy)
    main(["report", str(run_copy)])
    first = (out_dir / "report" / "report.md").read_bytes()
    main(["report", str(run_copy)])
    out = capsys.readouterr().out
    assert "fastest per size" in out and "report-2" in out
    assert (out_dir / "report-2" / "report.md").is_file() and (out_dir / "report-2" / "fits.json").is_file()
    assert (out_dir / "report" / "report.md").read_bytes() == first
    assert tree_state(run_copy) == before
    main(["report", str(run_copy), "--out", str(run_copy.parent / "mine")])
    assert (run_copy.parent / "mine" / "report" / "report.md").is_file()
    assert tree_state(run_copy) == before


def test_lab_block_shows_injected_vs_fitted(run_copy):
    meta = json.loads((run_copy / "run.json").read_text())
    meta["lab"] = {"delay_s": 5e-6, "rate_bps": 1e10}
    (run_copy / "run.json").write_text(json.dumps(meta))
    res = build_report(run_copy, n_boot=100)
    md = (res.dir / "report.md").read_text()
    head, rows = _md_table(md, "### Injected vs fitted (emulated lab)")
    assert head == ["quantity", "injected", "fitted", "95% CI", "fitted / injected"]
    lab_fit = (res.fit.lab or {}).get("fitted")  # the lab's own fit, when the fit library has it
    if lab_fit:
        alpha, gbs = lab_fit["alpha_s"], lab_fit["rate_bps"] / 8e9
    else:
        pp = res.fit.network.pingpong
        alpha, gbs = pp.alpha_s, pp.bandwidth_gbs
    assert rows[0][:3] == ["one-way latency α", "5 µs", human_time(alpha)]
    assert rows[1][:3] == ["bandwidth (GB/s)", "1.25", f"{gbs:.3g}"]
    assert rows[1][4] == f"{gbs / 1.25:.3g}"


# -- bad input ---------------------------------------------------------------------------------


def _run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _corrupt(path: Path, how: str) -> None:
    meta = json.loads((path / "run.json").read_text())
    if how == "schema":
        meta["schema"] = "ccbench.run/99"
        (path / "run.json").write_text(json.dumps(meta))
    elif how == "foreign":
        (path / "run.json").write_text(json.dumps({"hello": "world"}))
    elif how == "notjson":
        (path / "run.json").write_text("{ not json")
    elif how == "workload":
        meta["kind"] = "workload"
        (path / "run.json").write_text(json.dumps(meta))
    elif how == "badline":
        lines = (path / "cases.jsonl").read_text().splitlines()
        lines[3] = '{"collective": "allreduce", "broken'
        (path / "cases.jsonl").write_text("\n".join(lines) + "\n")
    elif how == "empty":
        (path / "cases.jsonl").write_text("")


@pytest.mark.parametrize("how,message", [
    ("schema", "has schema ccbench.run/99"),
    ("foreign", "is not a ccbench run file"),
    ("notjson", "is corrupt (not JSON)"),
    ("workload", "is a 'workload' run"),
    ("badline", "line 4 is corrupt"),
    ("empty", "has no finished cases"),
])
@pytest.mark.parametrize("command", ["report", "plot"])
def test_bad_runs_give_one_line_and_write_nothing(run_copy, capsys, how, message, command):
    _corrupt(run_copy, how)
    before = sorted(p.name for p in run_copy.iterdir())
    code, out, err = _run_main([command, str(run_copy)], capsys)
    assert code == 2
    assert err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in run_copy.iterdir()) == before
    assert not derived(run_copy).exists()


def test_missing_run_is_one_line(tmp_path, capsys):
    code, _, err = _run_main(["report", str(tmp_path / "nope")], capsys)
    assert code == 2 and err.count("\n") == 1 and "no run at" in err


def test_no_matplotlib_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(CCBenchError, match=r"pip install 'ccbench\[report\]'"):
        require_matplotlib()


# -- ccbench plot ------------------------------------------------------------------------------


def test_plot_writes_numbered_single_figures(run_copy, capsys):
    before = tree_state(run_copy)
    main(["plot", str(run_copy), "-C", "allreduce", "--kind", "busbw"])
    main(["plot", str(run_copy), "-C", "allreduce", "--kind", "busbw"])
    where = derived(run_copy)
    a, b = where / "plot-allreduce-busbw.png", where / "plot-allreduce-busbw-2.png"
    assert a.read_bytes()[:8] == PNG_MAGIC and b.read_bytes()[:8] == PNG_MAGIC
    main(["plot", str(run_copy), "--kind", "latency"])
    assert {p.name for p in where.glob("plot-*-latency.png")} == {
        f"plot-{c}-latency.png" for c in ("pingpong", "bcast", "allgather", "allreduce")}
    out = run_copy.parent / "mine.png"
    main(["plot", str(run_copy), "-C", "bcast", "--kind", "predicted", "-o", str(out)])
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert tree_state(run_copy) == before


@pytest.mark.parametrize("args,message", [
    (["-C", "alltoall"], "collective 'alltoall' is not in run"),
    (["-o", "X.png"], "-o names one file but 4 figures"),
    (["-C", "pingpong", "--kind", "predicted"], "no predicted figure"),
    (["--kind", "speed"], "Invalid value for '--kind'"),
])
def test_plot_refuses_bad_options(run_copy, capsys, args, message):
    code, _, err = _run_main(["plot", str(run_copy), *args], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_plot_never_overwrites_an_explicit_file(run_copy, capsys):
    out = run_copy / "fig.png"
    out.write_bytes(b"mine")
    code, _, err = _run_main(["plot", str(run_copy), "-C", "bcast", "-o", str(out)], capsys)
    assert code == 2 and "never overwritten" in err and out.read_bytes() == b"mine"


# -- units -------------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds,text", [
    (5e-10, "0.5 ns"), (1e-6, "1 µs"), (9.9996e-7, "1 µs"), (2.5e-5, "25 µs"), (1e-3, "1 ms"),
    (0.25, "250 ms"), (12.0, "12 s"), (math.nan, "-"),
])
def test_human_time(seconds, text):
    assert human_time(seconds) == text


def test_one_formatter_per_quantity_the_renderer_spells_the_units():
    """Every table goes through the table model: raw values in columns of a quantity; the terminal writes "us",
    the pages "µs" and intervals of times in brackets; a cell can hold another quantity (`Cell`) or a note."""
    from ccbench.present.table import Cell, Column, Noted, Table, to_block, to_rich

    t = Table("t", [Column("what"), Column("time", "time"), Column("CI", "time_ci"),
                    Column("median [CI]", "median_ci"), Column("GB/s", "bandwidth"), Column("value", align="right"),
                    Column("p adj.", "p", page_header="p (adj.)")])
    t.add_row("a", 2.5e-5, (2e-5, 3e-5), Noted((2.5e-5, 2e-5, 3e-5), "WRONG (3)"), 1234.5, Cell(4.2e-10,
              "time_per_byte"), 0.012)
    t.add_row("b", None, (None, 3e-5), None, math.inf, Cell((3.47, 4.63), "bandwidth_ci"), None)
    assert t.cells() == [["a", "25 us", "20 us - 30 us", "25 us [20 us, 30 us] WRONG (3)", "1234", "420 ps/B",
                          "0.012"],
                         ["b", "-", "-", "-", "inf", "[3.47, 4.63]", "-"]]
    [(kind, head, rows, right)] = to_block(t)
    assert kind == "table" and head[-1] == "p (adj.)" and right == {1, 2, 3, 4, 5, 6}
    assert rows[0][1:4] == ["25 µs", "[20 µs, 30 µs]", "25 µs [20 µs, 30 µs] WRONG (3)"]
    assert to_rich(t).columns[-1].header == "p adj."


def test_a_sweep_kind_is_read(run_copy):
    meta = json.loads((run_copy / "run.json").read_text())
    (run_copy / "run.json").write_text(json.dumps(dict(meta, kind="sweep")))
    path, _, rows, _ = load_collective_run(run_copy)
    assert path == run_copy and len(rows) == 95


def test_load_refuses_runs_without_rows(run_copy):
    (run_copy / "cases.jsonl").write_text("")
    with pytest.raises(UsageError, match="no finished cases"):
        load_collective_run(run_copy)
    assert open_run(RUN).rows  # the stored run itself has rows


def test_figures_label_sizes_and_times_in_human_units():
    from ccbench.present.plots import latency_figure, size_label

    _, _, rows, _ = load_collective_run(RUN)
    g = next(g for g in group_rows(rows) if g.collective == "allreduce")
    fig = latency_figure(g.by_algorithm, {}, "allreduce", size_label("allreduce"))
    fig.canvas.draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8 B", "64 B", "512 B", "4 KiB", "32 KiB"]
    assert ax.get_xlabel() == "size: buffer size"
    ylabels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ylabels and all(t.endswith(" µs") or t.endswith(" ms") for t in ylabels)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "native" and set(g.by_algorithm) <= set(legend)
    assert "95% CI of median" in legend  # one launch: the stored intervals are within it


def test_figures_of_several_launches_say_their_intervals_are_over_launches():
    """Bands and whiskers are the stored intervals; for rows of several launches the legend says they are over
    launches."""
    from ccbench.present.plots import bar_panels_figure, ci_label, latency_figure
    from ccbench.store.launches import pool_launches

    _, _, rows, _ = load_collective_run(RUN)
    g = next(g for g in group_rows(rows) if g.collective == "allreduce")

    def two_launches(r):
        half = len(r.samples_s) // 2
        parts = [(k + 1, dataclasses.replace(r, samples_s=s, samples=len(s)))
                 for k, s in enumerate((r.samples_s[:half], r.samples_s[half:]))]
        return pool_launches(parts)

    curves = {a: [two_launches(r) for r in rs] for a, rs in g.by_algorithm.items()}
    assert ci_label(curves["native"]) == "95% CI over launches" and ci_label(rows) == "95% CI of median"
    fig = latency_figure(curves, {}, "allreduce")
    assert "95% CI over launches" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    r = curves["native"][0]
    assert (r.ci_low_s, r.ci_high_s) != (g.by_algorithm["native"][0].ci_low_s, g.by_algorithm["native"][0].ci_high_s)
    band = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert min(band) == pytest.approx(min(x.ci_low_s for x in curves[next(iter(curves))]))
    fig = bar_panels_figure({"p": {"g": {"native": {"value": r.median_s, "lo": r.ci_low_s, "hi": r.ci_high_s}}}},
                            "t", "time", whisker_label=ci_label([r]))
    assert "95% CI over launches" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


# -- training-workload runs ---------------------------------------------------------------------
# tests/data/wl-ddp-np2 was made on this 2-core machine with
# ``ccbench workload ddp -m tests/data/mlp-sizes.txt -a native,ring,rabenseifner --bucket-mb 0.5
# --first-bucket-mb 0.125 --thread-level multiple --launch 2 --min-reps 10 --max-reps 30 --budget 0.2``
# (wl-ddp-np2-single: the same with --thread-level single); wl-straggler-np2 with ``ccbench
# workload straggler -C allreduce -a native,ring,recursive_doubling -s 1K,64K --delay 1ms --launch 2
# --min-reps 10 --max-reps 20 --budget 0.2`` and wl-overlap-np2 with ``ccbench workload overlap -C
# allreduce,allgather -s 64K,1M --launch 2 --min-reps 10 --max-reps 20 --budget 0.2``; run.json's
# argv[0] and results directory made relative.


def _wl_copy(tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    return dst


def test_workload_report_tables_are_the_stored_rows(tmp_path):
    from ccbench.core.stats import mann_whitney_u

    run = _wl_copy(tmp_path, "wl-ddp-np2")
    res = build_report(run)
    d = res.dir
    assert res.kind == "workload" and d == derived(run) / "report"
    assert sorted(p.name for p in d.iterdir()) == ["calls.png", "report.html", "report.md", "steps.png"]
    for n in ("calls.png", "steps.png"):
        assert (d / n).read_bytes()[:8] == PNG_MAGIC
    assert (d / "report.html").read_text().count("data:image/png;base64,") == 2
    md = (d / "report.md").read_text()
    assert md.index("## Provenance") < md.index("## ddp at 2 ranks, float32") < md.index("### Step time")
    _, prov = _md_table(md, "## Provenance")
    kv = dict((r[0], r[1]) for r in prov)
    assert kv["thread level"].startswith("multiple") and kv["ranks"].startswith("2 on 1 node(s)")
    assert kv["model"].startswith("mlp-sizes: 8 tensors, 428,170 parameters")
    stored = _stored_rows(run)
    steps = [r for r in stored if r["part"] == -1]
    head, rows = _md_table(md, "### Step time")
    assert head[:2] == ["variant", "algorithm"] and len(rows) == len(steps) == 6
    for line, r in zip(rows, steps, strict=True):
        assert line[:2] == [r["variant"], r["algorithm"]]
        assert line[5] == f"{human_time(r['median_s'])} [{human_time(r['ci_low_s'])}, {human_time(r['ci_high_s'])}]"
    # the fastest algorithm per variant is the one with the smallest stored median; decided at the launch level
    head, fast = _md_table(md, "### Fastest")
    assert head[5:] == ["margin", "95% CI", "p", "decided"]
    entries = {f.what: f for f in res.fastest["ddp"]}
    for line in fast:
        if line[0] == "all variants":
            among, name = steps, (lambda r: f"{r['variant']}: {r['algorithm']}")
        elif line[0].endswith(": bucketing"):  # per algorithm, the fastest of its bucketings
            among, name = ([r for r in steps if r["algorithm"] == line[0].removesuffix(": bucketing")],
                           (lambda r: r["variant"]))
        else:
            among, name = [r for r in steps if r["variant"] == line[0]], (lambda r: r["algorithm"])
        best, second = sorted(among, key=lambda r: r["median_s"])[:2]
        assert (line[1], line[2], line[3]) == (name(best), human_time(best["median_s"]), name(second))
        f = entries[line[0]]
        assert line[7] == fmt_p(f.p_value) and line[8] == DECIDED[f.verdict]
        # one launch, a 2% difference: the pooled samples would call it (Mann-Whitney), the launch level does not
        assert f.method == ONE_LAUNCH and f.verdict == "undetermined"
        assert mann_whitney_u(best["samples_s"], second["samples_s"])[1] < 0.05
    assert f"{ONE_LAUNCH}, so a between-launch CV of 35% is assumed" in md
    assert list(entries) == ["bucketed 0.5/0.125 MiB", "per_tensor", "allreduce=native: bucketing",
                             "allreduce=ring: bucketing", "allreduce=rabenseifner: bucketing", "all variants"]
    # per call: every bucket of every algorithm, with its stored median
    head, calls = _md_table(md, "#### bucketed 0.5/0.125 MiB")
    assert head[5:] == [f"{a}: median [95% CI] (share)" for a in ("native", "ring", "rabenseifner")]
    buckets = [r for r in stored if r["variant"].startswith("bucketed") and r["part"] >= 0]
    assert len(calls) * 3 == len(buckets)
    for r in buckets:
        line = calls[r["part"]]
        col = 5 + ["allreduce=native", "allreduce=ring", "allreduce=rabenseifner"].index(r["algorithm"])
        assert line[1] == r["label"] and line[col].startswith(human_time(r["median_s"]) + " [")


def test_workload_report_overlap_and_straggler(tmp_path):
    run = _wl_copy(tmp_path, "wl-straggler-np2")
    res = build_report(run)
    md = (res.dir / "report.md").read_text()
    assert sorted(p.name for p in res.dir.glob("*.png")) == ["straggler-slowdown.png", "straggler-time.png"]
    _, rows = _md_table(md, "### Straggler")
    stored = _stored_rows(run)
    assert [(r[0], r[2], r[4]) for r in rows] == [
        (s["algorithm"], human_time(s["baseline_s"]), f"{s['slowdown']:.2f}") for s in stored]
    _, fast = _md_table(md, "### Fastest")
    for line in fast:  # per size: the algorithm with the smallest delayed median
        at = [s for s in stored if s["label"] == line[0]]
        assert line[1] == min(at, key=lambda s: s["median_s"])["algorithm"]
    run = _wl_copy(tmp_path, "wl-overlap-np2")
    res = build_report(run)
    md = (res.dir / "report.md").read_text()
    _, rows = _md_table(md, "### Overlap")
    stored = _stored_rows(run)
    assert [(r[0], r[4], r[7], r[8]) for r in rows] == [  # a run made before IMB's figure: OSU's alone
        (s["collective"], human_time(s["comm_s"]), f"{s['overlap_pct']:.0f}%", "-") for s in stored]
    assert "### Fastest" not in md  # one (native) call per size: nothing to choose
    assert sorted(p.name for p in res.dir.glob("*.png")) == ["overlap-times.png", "overlap.png"]


def test_workload_report_never_overwrites_and_raw_files_untouched(tmp_path, capsys):
    run = _wl_copy(tmp_path, "wl-ddp-np2")
    before = tree_state(run)
    main(["report", str(run)])
    first = {p.name: p.read_bytes() for p in (derived(run) / "report").iterdir()}
    main(["report", str(run)])
    out = capsys.readouterr().out
    assert "fastest: ddp" in out and "report-2" in out
    assert {p.name: p.read_bytes() for p in (derived(run) / "report").iterdir()} == first
    assert (derived(run) / "report-2" / "report.md").is_file()
    assert tree_state(run) == before


@pytest.mark.parametrize("how,message", [
    ("badline", "line 4 is corrupt"),
    ("empty", "has no finished cases"),
    ("schema", "has schema ccbench.run/99"),
])
def test_bad_workload_runs_give_one_line_and_write_nothing(tmp_path, capsys, how, message):
    run = _wl_copy(tmp_path, "wl-ddp-np2")
    _corrupt(run, how)
    before = sorted(p.name for p in run.iterdir())
    code, out, err = _run_main(["report", str(run)], capsys)
    assert code == 2 and err.startswith("ccbench: error:") and err.count("\n") == 1 and message in err
    assert "Traceback" not in out + err
    assert sorted(p.name for p in run.iterdir()) == before


def test_plot_still_refuses_workload_runs(tmp_path, capsys):
    run = _wl_copy(tmp_path, "wl-ddp-np2")
    code, _, err = _run_main(["plot", str(run)], capsys)
    assert code == 2 and "is a 'workload' run" in err and "plot reads collective sweeps only" in err


# -- the node's limit: memory copy bandwidth ----------------------------------------------------

#: One node, 4 ranks: one core 128 MB counted in 10 ms (12.8 GB/s); all ranks 4 x 32 MB counted in 16 ms at best
#: (8 GB/s aggregate, 2 GB/s each, so a per-rank limit of 1 GB/s of bytes copied).
MEMORY_RECORD = {"method": "STREAM copy (McCalpin) with numpy", "repetitions": 2,
                 "one_core": {"host": "n0", "llc_bytes": 32 << 20, "nbytes": 64_000_000,
                              "counted_bytes": 128_000_000, "seconds": [0.011, 0.010]},
                 "all_ranks": [{"host": "n0", "ranks": 4, "llc_bytes": 32 << 20, "nbytes": 16_000_000,
                                "counted_bytes": 32_000_000, "seconds": [0.016, 0.020]}]}


def test_report_holds_busbw_against_the_memory_copy_limit(run_copy):
    meta = json.loads((run_copy / "run.json").read_text())
    meta["memory_bandwidth"] = MEMORY_RECORD
    (run_copy / "run.json").write_text(json.dumps(meta))
    md = (build_report(run_copy, n_boot=100).dir / "report.md").read_text()
    intro = md.split("## How close to the node's limit\n", 1)[1].split("\n## ", 1)[0]
    assert "the 4 ranks of a node copy at once and share its 8 GB/s, 2 GB/s each" in intro
    assert "the limit is 1 GB/s of bytes copied per rank" in intro
    _, kv = _md_table(md, "## How close to the node's limit")
    kv = dict(kv)
    assert kv["one core (the others idle)"].startswith("12.8 GB/s on n0")
    assert kv["all ranks at once, n0"].startswith("8 GB/s over 4 ranks, 2 GB/s each")
    assert kv["per-rank limit (bytes copied)"] == "1 GB/s" and kv["intra-node β per rank"] == "1 ns/B"
    stored = [r for r in _stored_rows() if r["nwrong"] == 0]
    best_head_at = [i for i, ln in enumerate(intro.splitlines()) if ln.startswith("| collective |")]
    assert best_head_at, "no best-of table"
    best_rows = [[c.strip() for c in ln.strip("|").split("|")]
                 for ln in intro.splitlines()[best_head_at[0] + 2:] if ln.startswith("|")]
    assert {r[0].split(" at ")[0] for r in best_rows} == {"allreduce", "allgather"}  # not bcast, not ping-pong
    for coll, label in (("allreduce", "allreduce at 4 ranks, float32 sum"),
                        ("allgather", "allgather at 4 ranks, float32")):
        at = [r for r in stored if r["collective"] == coll]
        top = max(r["nbytes"] for r in at)
        hand = max((r for r in at if r["nbytes"] == top and not r["algorithm"].startswith("native")),
                   key=lambda r: r["busbw_gbs"])
        row = next(r for r in best_rows if r[0] == label and r[2] == "hand-written")
        assert row[1] == format_size(top) and row[3] == hand["algorithm"] and row[5] == f"{hand['busbw_gbs']:.0%}"
        # per algorithm at the three largest sizes: busbw / 1 GB/s
        head, rows = _md_table(_section(md, label), "### Bus bandwidth as % of memory copy bandwidth "
                                                    "(limit 1 GB/s per rank)")
        sizes = sorted({r["nbytes"] for r in at})[-3:]
        assert [r[0] for r in rows] == [format_size(n) for n in sizes]
        for line in rows:
            for a, cell in zip(head[1:], line[1:], strict=True):
                r = next(r for r in at if r["algorithm"] == a and format_size(r["nbytes"]) == line[0])
                assert cell == f"{r['busbw_gbs']:.0%}"
    assert "Bus bandwidth as % of memory" not in _section(md, "bcast at 4 ranks, float32, root 0")


def test_runs_without_the_record_have_no_limit_section(report):
    md = (report.dir / "report.md").read_text()
    assert "How close to the node's limit" not in md and "% of memory copy bandwidth" not in md


def test_show_header_states_the_memory_copy_bandwidth():
    from ccbench.present.views import memory_line, run_header

    line = memory_line(MEMORY_RECORD)
    assert line.startswith("memory copy bandwidth (STREAM copy, bytes read + written): one core 12.8 GB/s; ")
    assert "all ranks of a node at once 8 GB/s (4 ranks, 2 each)" in line and "limit of a collective 1 GB/s" in line
    two = {**MEMORY_RECORD, "all_ranks": [*MEMORY_RECORD["all_ranks"],
                                          {**MEMORY_RECORD["all_ranks"][0], "host": "n1", "seconds": [0.008]}]}
    assert "8-16 GB/s per node over 2 nodes (least per rank 2 on n0)" in memory_line(two)
    assert memory_line(None) == "" and memory_line({}) == ""
    meta = {"memory_bandwidth": MEMORY_RECORD}
    assert line in run_header(meta, "run") and "memory copy" not in run_header({}, "run")


def test_report_and_compare_without_matplotlib_give_their_tables_and_say_how_to_add_figures(tmp_path):
    """An install without the report extra: no figure, every table, one line saying how to add them."""
    import os
    import subprocess
    import sys

    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), COLUMNS="200")
    data = Path(__file__).resolve().parent / "data"
    for argv, out in ((["report", str(data / "run-np2"), "--out", str(tmp_path / "r")], tmp_path / "r"),
                      (["report", str(data / "wl-ddp-np2"), "--out", str(tmp_path / "w")], tmp_path / "w"),
                      (["compare", str(data / "run-np4"), str(data / "run-np4-single"), "--out", str(tmp_path / "c")],
                       tmp_path / "c")):
        r = subprocess.run([sys.executable, "-m", "ccbench", *argv], capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0, r.stderr
        assert "(matplotlib is not installed): pip install 'ccbench[report]'" in r.stdout
        assert "wrote " in r.stdout.splitlines()[-1]
        assert not list(out.rglob("*.png")), argv
        md = next(out.rglob("*.md")).read_text()
        if argv[0] == "report":
            assert "No figures: matplotlib is not installed; pip install 'ccbench[report]'" in md
        assert "| " in md  # its tables are there
