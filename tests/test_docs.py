"""The manual stays true: every figure the documentation (the pages under docs/ and the README) quotes from a
run stored in the repository is recomputed here from that run, with ccbench's own functions, and must appear in the
page exactly as written (same rounding).

Three kinds of check:

- every ``$ ccbench ...`` example in a code block of a page is run (in a temporary directory holding a copy of
  ``tests/data``, since some commands write beside the run) and each line the page shows must be a line of what
  the command prints, in the same order (a page may leave lines out: "output trimmed");
- the figures quoted in the prose are recomputed from the stored runs (``open_run``, ``fit_run``, ``compare_runs``,
  ``fastest_per_size`` ...) and looked up in the section they belong to -- found by its heading title, whichever
  page holds it -- anchored by the words around them;
- the ``pycon`` examples of the pages (the Python API's) run as doctests, in order, one namespace per page.

Figures with no stored result behind them (runs measured once and not committed) must say so where they stand;
`test_unstored_figures_say_so` checks that each such passage does.  The site itself is built by CI with
``mkdocs build --strict`` (.ci/run); the README's own promises are in tests/test_readme.py.
"""

import doctest
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from ccbench.algorithms import REGISTRY
from ccbench.analysis.fastest import fastest_per_size, fastest_per_variant, group_rows
from ccbench.analysis.runs import fit_run, given_params, predict_table
from ccbench.api import compare as compare_runs  # opens the runs it is given, then compares them
from ccbench.cli import cli
from ccbench.core.units import fmt_time, format_size
from ccbench.measure.config import load_config, plan
from ccbench.present.kinds import fastest_table
from ccbench.present.model_tables import gamma_text
from ccbench.present.report import variant_label
from ccbench.present.table import Column, fmt_p, fmt_ratio, to_rich
from ccbench.store.run import open_run
from ccbench.workloads.models import load_model
from ccbench.workloads.schedule import ddp_schedule, moe_schedule, predict_step_s, zero_schedule

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
DOCS = REPO / "docs"
#: Every page of the manual, by its path in the repository: the README, then docs/ (the site's pages).
PAGES = {"README.md": (REPO / "README.md").read_text(),
         **{f"docs/{p.name}": p.read_text() for p in sorted(DOCS.glob("*.md"))}}
ENV = {"COLUMNS": "1000"}  # wide enough that no printed line wraps
BOX = set("┏┡└├┌━─╇┳┻╋┯┷")


# --------------------------------------------------------------------------- reading the pages


def _norm(text: str) -> str:
    return " ".join(text.split())


def _headings(text: str):
    """(line index, level, title) of every heading outside code blocks."""
    fenced = False
    for i, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#+) (.*)", line)):
            yield i, len(m.group(1)), m.group(2).strip()


def _section(title: str) -> str:
    """The text under the heading `title` (any level, on whichever page has it) up to the next heading of the same
    or a higher level.  A title must be on one page only, so that a figure's section is never ambiguous."""
    found = [(page, i, level) for page, text in PAGES.items() for i, level, t in _headings(text) if t == title]
    assert found, f"no page of the manual has a heading {title!r}"
    assert len(found) == 1, f"heading {title!r} is on more than one page: {[p for p, _, _ in found]}"
    page, start, level = found[0]
    lines = PAGES[page].splitlines()
    end = next((i for i, lv, _ in _headings(PAGES[page]) if i > start and lv <= level), len(lines))
    return "\n".join(lines[start + 1:end])


def _page_of(title: str) -> str:
    return next(page for page, text in PAGES.items() for _, _, t in _headings(text) if t == title)


def _says(title: str, claim: str) -> None:
    """The section `title` contains `claim` (whitespace and line breaks ignored)."""
    text = _norm(_section(title))
    if _norm(claim) not in text:
        words = _norm(claim).split()
        anchor = " ".join(words[:4])
        at = text.find(anchor)
        seen = text[at:at + len(_norm(claim)) + 40] if at >= 0 else "(anchor not found)"
        pytest.fail(f"{_page_of(title)}, section {title!r}, should say, from the stored data:\n  {_norm(claim)}\n"
                    f"it says:\n  {seen}")


def _paragraph(title: str, anchor: str) -> str:
    """The paragraph (blank-line separated) of section `title` that contains `anchor`."""
    for para in re.split(r"\n\s*\n", _section(title)):
        if _norm(anchor) in _norm(para):
            return _norm(para)
    pytest.fail(f"{_page_of(title)}, section {title!r}, has no paragraph with {anchor!r}")


def _examples() -> list[tuple[str, str, list[str]]]:
    """Every ``$ ccbench ...`` line of the pages' code blocks: (page, command, the output lines shown under it)."""
    out: list[tuple[str, str, list[str]]] = []
    for page, text in PAGES.items():
        shown: list[str] | None = None  # the lines under the current example; None outside one
        fenced = False
        for line in text.splitlines():
            if line.startswith("```"):
                fenced, shown = not fenced, None
            elif fenced and line.startswith("$ "):
                shown = []
                out.append((page, line[2:].strip(), shown))
            elif shown is not None:
                shown.append(line)
    return out


def _cells(line: str) -> list[str]:
    return [_norm(c) for c in re.split(r"[│┃]", line.strip())[1:-1]]


def _items(lines: list[str]) -> list[tuple[str, object]]:
    """Printed lines as comparable items: text lines, table rows, and headers (multi-line ones joined per column)."""
    items: list[tuple[str, object]] = []
    header: list[str] | None = None
    for line in lines:
        s = line.strip()
        if s.startswith("┃"):
            cells = _cells(s)
            header = cells if header is None else [a + b for a, b in zip(header, cells, strict=True)]
            continue
        if header is not None:
            items.append(("header", header))
            header = None
        if not s or s == "..." or set(s) <= BOX or s[0] in BOX:
            continue
        items.append(("row", _cells(s)) if s.startswith("│") else ("text", _norm(s)))
    if header is not None:
        items.append(("header", header))
    return items


def _assert_shows(page: str, command: str, shown: list[str], printed: str) -> None:
    """Every item the page shows is printed, in the page's order."""
    have = _items(printed.splitlines())
    at = 0
    for kind, value in _items(shown):
        try:
            at = have.index((kind, value), at) + 1
        except ValueError:
            near = [v for k, v in have if k == kind and (kind == "text" or v[:1] == value[:1])][:6]
            pytest.fail(f"{page} shows under `$ {command}`:\n  {value}\nwhich the stored data does not give "
                        "(or not in that order); printed instead, e.g.:\n  " + "\n  ".join(map(str, near)))


# --------------------------------------------------------------------------- formatting as the pages do


def _x(v: float) -> str:
    """A factor as the prose writes it: two significant digits below 10, whole numbers above."""
    return f"{v:.2g}" if v < 10 else f"{v:.0f}"


def _xrange(values) -> str:
    values = list(values)
    return f"{_x(min(values))}-{_x(max(values))}"


def _tpair(a: float, b: float, sep: str) -> str:
    """Two times, the unit written once when both share it: "1.27-1.7 us", "218 vs 222 us", "710 us to 6.02 ms"."""
    ta, tb = fmt_time(a), fmt_time(b)
    (na, ua), ub = ta.split(" "), tb.split(" ")[1]
    return f"{na}{sep}{tb}" if ua == ub else f"{ta} to {tb}"


def _trange(values) -> str:
    values = list(values)
    return _tpair(min(values), max(values), "-")


# --------------------------------------------------------------------------- the stored runs


@pytest.fixture(scope="module")
def np2_fit() -> dict:
    return fit_run(open_run(DATA / "run-np2"))


@pytest.fixture(scope="module")
def np4_threads():
    """run-np4 (thread level multiple) against run-np4-single, as `ccbench compare` pairs them."""
    return compare_runs([DATA / "run-np4", DATA / "run-np4-single"])


@pytest.fixture(scope="module")
def ddp_threads():
    """wl-ddp-np2 (multiple) against wl-ddp-np2-single."""
    return compare_runs([DATA / "wl-ddp-np2", DATA / "wl-ddp-np2-single"])


@pytest.fixture
def in_copy(tmp_path, monkeypatch):
    """A working directory holding a copy of tests/data, so that commands may write beside the runs."""
    shutil.copytree(DATA, tmp_path / "tests" / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _pairs(cmp, collective, algorithms=None, sizes=None):
    return [p for p in cmp.pairs if p.collective == collective
            and (algorithms is None or p.algorithm in algorithms) and (sizes is None or sizes(p.nbytes))]


def _small_native_calls(cmp) -> list:
    """The per-tensor native allreduce calls of 5 KiB and less in the DDP comparison."""
    out = [p for p in cmp.pairs if p.variant == "per_tensor" and p.algorithm == "allreduce=native"
           and not p.whole and p.nbytes <= 5 * 1024]
    assert out
    return out


# --------------------------------------------------------------------------- the pages' examples


def _report_fastest(run_path: str) -> str:
    """What `ccbench report RUN` prints for a sweep: its fastest-per-size tables (the figures are not needed)."""
    console = Console(file=io.StringIO(), width=int(ENV["COLUMNS"]))
    for g in group_rows(open_run(run_path).rows):
        rows = fastest_per_size(g)
        if rows and any(r["runner_up"] is not None for r in rows):
            console.print(to_rich(fastest_table(
                f"fastest per size: {variant_label(g)} (runner-up compared at the launch level)", rows,
                Column("size", "size"), lambda r: r["nbytes"])))
    return console.file.getvalue()


EXAMPLES = _examples()


def test_the_pages_have_their_examples():
    commands = {c: page for page, c, _ in EXAMPLES}
    for expected, page in (("ccbench fit tests/data/run-np2", "docs/models.md"),
                           ("ccbench report tests/data/run-np4", "docs/reports.md"),
                           ("ccbench compare tests/data/run-np4 tests/data/run-np4-single", "docs/reports.md"),
                           ("ccbench show tests/data/wl-overlap-np2", "docs/workloads.md"),
                           ("ccbench show tests/data/wl-straggler-np2", "docs/workloads.md"),
                           ("ccbench trace allreduce ring -n 4 --count 8", "docs/algorithms.md")):
        assert commands.get(expected) == page, f"{page} should show `$ {expected}`"
    assert all(shown for _, _, shown in EXAMPLES)


@pytest.mark.parametrize(("page", "command", "shown"), EXAMPLES, ids=[f"{p}: {c}" for p, c, _ in EXAMPLES])
def test_example_is_what_the_command_prints(page, command, shown, in_copy):
    args = shlex.split(command)
    assert args[0] == "ccbench"
    if args[1] == "report":  # the same tables without drawing the report's figures (seconds each)
        printed = _report_fastest(args[2])
    else:
        if args[1] == "compare":
            args.append("--no-plot")  # the figure does not change what is printed
        res = CliRunner().invoke(cli, args[1:], env=ENV)
        assert res.exit_code == 0, res.output
        printed = res.output
    _assert_shows(page, command, shown, printed)


def test_the_commands_page_lists_every_command():
    listing = re.search(r"^```\n(.*?)^```", PAGES["docs/commands.md"], re.S | re.M).group(1)
    listed = {m.group(1) for m in re.finditer(r"\bccbench (\w+)", listing)}
    assert listed == set(cli.commands), f"docs/commands.md lists {sorted(listed)}; the CLI has {sorted(cli.commands)}"


# --------------------------------------------------------------------------- the Python examples (pycon)


PYCON = [(page, re.findall(r"^```pycon\n(.*?)^```", text, re.S | re.M)) for page, text in PAGES.items()]
PYCON = [(page, blocks) for page, blocks in PYCON if blocks]


def test_the_api_page_has_its_examples():
    assert "docs/api.md" in dict(PYCON)
    assert len(dict(PYCON)["docs/api.md"]) >= 4


@pytest.mark.parametrize(("page", "blocks"), PYCON, ids=[p for p, _ in PYCON])
def test_python_examples_print_what_the_page_shows(page, blocks, in_copy):
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    namespace: dict = {}  # one namespace for the page: its examples go on from each other
    out = io.StringIO()
    for i, block in enumerate(blocks):
        test = parser.get_doctest(block, namespace, f"{page} block {i + 1}", page, 0)
        assert test.examples, f"{page}: a pycon block without examples"
        test.globs = namespace
        runner.run(test, out=out.write, clear_globs=False)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, \
        f"{page}: {result.failed} of {result.attempted} Python examples differ:\n{out.getvalue()}"


# --------------------------------------------------------------------------- figures of the pages


def test_every_figure_shown_exists_and_every_stored_figure_is_shown():
    shown = {(page, m) for page, text in PAGES.items() for m in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)}
    assert shown, "the pages show the figures of docs/figures"
    for page, target in shown:
        assert page.startswith("docs/"), f"{page} shows a figure; figures live on the site's pages"
        assert (REPO / page).parent.joinpath(target).is_file(), f"{page} shows {target}, which does not exist"
    used = {Path(target).name for _, target in shown}
    assert {p.name for p in (DOCS / "figures").iterdir()} == used, "a figure in docs/figures that no page shows"


# --------------------------------------------------------------------------- the site


def _nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists (``- Title: page.md``)."""
    return re.findall(r"^\s*- [^:\n]+: (\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M)


def test_every_page_is_in_the_sites_navigation():
    nav = _nav_pages()
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md")), "docs/*.md and mkdocs.yml's nav differ"
    assert len(nav) == len(set(nav))


def test_ci_builds_the_site_with_warnings_as_errors():
    ci = (REPO / ".ci" / "run").read_text()
    assert "mkdocs build --strict" in ci and "[docs]" in ci
    config = (REPO / "mkdocs.yml").read_text()
    assert re.search(r"^docs_dir: docs$", config, re.M)
    for check in ("omitted_files", "not_found", "anchors", "unrecognized_links"):
        assert re.search(rf"^\s+{check}: warn$", config, re.M), f"mkdocs.yml should warn on {check}"


# --------------------------------------------------------------------------- prose: thread level


def test_thread_level_figures(np4_threads, ddp_threads):
    (p,) = _pairs(np4_threads, "allreduce", {"native"}, lambda n: n == 8)
    _says("Thread level", f"at 4 ranks on 2 cores an 8 B native allreduce took {fmt_time(p.median_b_s)} "
                          f"single-threaded against {fmt_time(p.median_a_s)} thread-multiple")
    small = _small_native_calls(ddp_threads)
    assert all(p.median_b_s < p.median_a_s for p in small)  # by the medians of one launch each (see the DDP figures)
    _says("Thread level", f"native allreduces of 5 KiB and less took {_trange(p.median_b_s for p in small)} "
                          f"single-threaded against {_trange(p.median_a_s for p in small)} thread-multiple, "
                          f"{_xrange(p.median_a_s / p.median_b_s for p in small)}x faster")


# --------------------------------------------------------------------------- prose: benchmarks


def test_default_config_case_count():
    cases, _ = plan(load_config(REPO / "configs" / "default.toml"), 4)
    _says("Benchmarks: hand-written against native", f"sweep ({len(cases)} cases at 4 ranks, every algorithm")


# --------------------------------------------------------------------------- prose: fitting


def _overhead(doc: dict) -> tuple[float, int, int]:
    """(seconds per step, cases it explains, hand-written cases off) of a fit document, with ping-pong parameters."""
    off = [c for c in doc["checks_by_params"]["pingpong"]["off"] if c["path"] == "numpy"]
    explained = sum("per-step overhead" in c["reasons"] for c in off)
    return doc["network"]["step_overhead"]["seconds"], explained, len(off)


def test_per_step_overhead_figures(np2_fit):
    s, explained, off = _overhead(np2_fit)
    _says("Fitting and predicting", f"({s * 1e6:.1f} us per step on the 2-rank run below, explaining {explained} "
                                    f"of the {off} flagged cases)")
    s4, explained4, off4 = _overhead(fit_run(open_run(DATA / "run-np4")))
    assert s4 < 0
    _says("Fitting and predicting", f"(`ccbench fit tests/data/run-np4`, 4 ranks on 2 cores: {fmt_time(s4)} per "
                                    f"step, explaining {explained4 or 'none'} of its {off4} flagged cases)")


def test_read_it_with_care_figures(np2_fit):
    s, _, off = _overhead(np2_fit)
    pp_checks = np2_fit["checks_by_params"]["pingpong"]
    n_checks = sum(x["cases"] for x in pp_checks["summary"] if x["kind"] == "hand-written")
    ratios = [c["ratio"] for c in pp_checks["off"] if c["path"] == "numpy"]
    assert all(r > 1 for r in ratios), "the page says every case off the model is slower than predicted"
    tolerance = np2_fit["provenance"]["tolerance"]
    _says("Fitting and predicting", f"Python's per-step cost ({s * 1e6:.1f} us per step, the estimate above)")
    _says("Fitting and predicting", f"so {off} of the {n_checks} modelled cases are off by more than "
                                    f"{tolerance:.0%}, every one of them slower than predicted "
                                    f"({min(ratios):.2f}-{max(ratios):.2f}x)")
    comp = {c["parameter"]: c for c in np2_fit["network"]["comparison"]}
    _says("Fitting and predicting", f"the joint alpha is {fmt_ratio(comp['alpha_s']['ratio'])}x ping-pong's")
    pp, joint = np2_fit["network"]["pingpong"], np2_fit["network"]["joint"]
    _says("Fitting and predicting", f"gamma from numpy on warm buffers, {gamma_text(pp['gamma_s_per_byte'])}, is "
                                    f"{fmt_ratio(comp['gamma_s_per_byte']['ratio'])}x below the "
                                    f"{gamma_text(joint['gamma_s_per_byte'])} a reduction inside a collective")


# --------------------------------------------------------------------------- prose: training workloads


def test_model_sizes_and_schedules():
    models = {name: load_model(name) for name in ("resnet50", "bert-base", "gpt2")}
    _says("Training workloads", f"ResNet-50: {models['resnet50'].numel:,} parameters")
    _says("Training workloads", f"BertModel base: {models['bert-base'].numel:,};")
    _says("Training workloads", f"with the LM head tied: {models['gpt2'].numel:,}")
    text = _section("Training workloads")
    for name in ("resnet50", "gpt2"):  # the 4-rank table's sizes, tensors and calls (default DDP caps)
        m = models[name]
        bucketed, per_tensor = ddp_schedule(m, 4, "bucketed"), ddp_schedule(m, 4, "per_tensor")
        size = re.escape(format_size(bucketed.nbytes(4, 4)))
        row = (rf"\| ddp {name} \({size}, {len(m.tensors)} tensors\) \| bucketed: {len(bucketed.calls)} calls \|"
               rf"[^\n]*\n\| \| per tensor: {len(per_tensor.calls)} calls \|")
        assert re.search(row, text), f"the ddp {name} rows do not match the schedule: {row}"
    buckets = sorted(c.nbytes(4, 4) for c in ddp_schedule(models["resnet50"], 4, "bucketed").calls)
    lo, hi = format_size(buckets[0]).split(" "), format_size(buckets[-1])
    assert hi.endswith(" " + lo[1])
    _says("Training workloads", f"ResNet-50's buckets ({lo[0]}-{hi})")  # what `workload overlap -m resnet50` sends
    for variant in ("zero2", "ddp_flat", "zero3", "ddp_layer"):
        n = len(zero_schedule(models["bert-base"], 4, variant).calls)
        assert f"| {variant}: {n} call{'s' if n != 1 else ''} |" in text, variant
    sizes = {format_size(moe_schedule(2048, 1024, 2, ep, top_k=2).nbytes(4, ep)) for ep in (2, 4)}
    (size,) = sizes
    _says("Training workloads", f"moe 2048 tokens x 1024, top-2, 2 experts/rank ({size} per step) | EP = 2 |")


def test_gpt2_prediction_at_1024_ranks():
    m = re.search(r"`ccbench workload predict ddp -m gpt2 -n (\d+) --alpha (\S+) --beta (\S+)`",
                  _norm(_section("Training workloads")))
    assert m, "the page names the command of its GPT-2 prediction"
    P = int(m.group(1))
    params, _ = given_params(None, m.group(2), m.group(3), None)
    gpt2 = load_model("gpt2")
    t = {}
    for mode in ("bucketed", "per_tensor"):
        sch = ddp_schedule(gpt2, 4, mode)
        for alg in ("rabenseifner", "double_binary_tree", "ring"):
            t[mode, alg] = fmt_time(predict_step_s(sch, {"allreduce": REGISTRY["allreduce"][alg]}, P, 4, params))
    _says("Training workloads", f"GPT-2's bucketed DDP step at {P:,} ranks takes {t['bucketed', 'rabenseifner']} with "
                                f"Rabenseifner, {t['bucketed', 'double_binary_tree']} double binary tree, "
                                f"{t['bucketed', 'ring']} ring; per tensor {t['per_tensor', 'rabenseifner']}, "
                                f"{t['per_tensor', 'double_binary_tree']} and {t['per_tensor', 'ring']}.")


def test_stored_overlap_and_straggler_figures():
    overlap = [r.overlap_pct for r in open_run(DATA / "wl-overlap-np2").rows]
    slowdown = [r.slowdown for r in open_run(DATA / "wl-straggler-np2").rows]
    _says("Training workloads", f"(overlap {min(overlap):.0f}-{max(overlap):.0f}%)")
    _says("Training workloads", f"delayed every allreduce algorithm by the whole delay "
                                f"(slowdown {min(slowdown):.2f}-{max(slowdown):.2f})")


# --------------------------------------------------------------------------- prose: the thread-level comparison


def test_thread_level_comparison_summary(np4_threads):
    cmp = np4_threads
    def small(n: int) -> bool:
        return n < 32 * 1024

    title = "Reports, comparisons and plots"

    (launch,) = cmp.launch_summary()
    assert launch["launch_level"] == 0 and launch["single_launch"] == len(cmp.pairs)
    _says(title, f"no case is decided at the launch level (0 of {len(cmp.pairs)})")
    _says(title, f"the single-launch cases resolve ratios beyond {fmt_ratio(launch['resolvable_low'])}-"
                 f"{fmt_ratio(launch['resolvable_high'])}x, the widest where ping-pong's")
    widest = max(cmp.pairs, key=lambda p: p.resolvable_ratio)
    assert widest.collective == "pingpong"

    allreduce = _pairs(cmp, "allreduce")
    assert all(p.verdict == "slower" for p in allreduce)
    _says(title, f"every allreduce case is {_xrange(p.ratio for p in allreduce)}x slower")

    big = _pairs(cmp, "bcast", sizes=lambda n: n == 32 * 1024)
    assert all(p.verdict == "slower" for p in big)
    _says(title, f"and so is every broadcast at 32 KiB ({_xrange(p.ratio for p in big)}x)")
    native = _pairs(cmp, "bcast", {"native"}, small)
    assert all(p.verdict == "faster" for p in native)
    _says(title, f"native broadcasts get {_xrange(1 / p.ratio for p in native)}x faster")
    sag = _pairs(cmp, "bcast", {"scatter_allgather"}, small)
    assert all(p.verdict == "slower" for p in sag)
    _says(title, f"scatter_allgather is {_xrange(p.ratio for p in sag)}x slower (every size)")
    chain = _pairs(cmp, "bcast", {"pipelined_chain"}, small)
    quiet = _pairs(cmp, "bcast", {"binomial", "linear"}, small)
    assert all(p.verdict == "undetermined" for p in chain + quiet)
    assert all(p.ratio < 1 for p in chain) and all(p.ratio > 1 for p in quiet)
    _says(title, f"pipelined_chain ({_xrange(1 / p.ratio for p in chain)}x faster by its medians), binomial and "
                 f"linear ({_xrange(p.ratio for p in quiet)}x slower) are undetermined")
    assert {p.algorithm for p in _pairs(cmp, "bcast")} == {"native", "pipelined_chain", "binomial", "linear",
                                                            "scatter_allgather"}, "summarise every broadcast"

    allgather = _pairs(cmp, "allgather")
    slower = [p for p in allgather if p.verdict == "slower"]
    assert all(p.verdict in ("slower", "undetermined") for p in allgather)
    _says(title, f"Allgather is slower in {len(slower)} of its {len(allgather)} cases")
    fast_ones = _pairs(cmp, "allgather", {"ring", "recursive_doubling"})
    assert all(p.verdict == "slower" for p in fast_ones)
    _says(title, f"ring and recursive doubling {_xrange(p.ratio for p in fast_ones)}x at every size")
    slow_ones = _pairs(cmp, "allgather", {"bruck", "native"})
    called = [p for p in slow_ones if p.verdict == "slower"]
    others = [p for p in slow_ones if p.verdict != "slower"]
    assert all(p.verdict == "undetermined" and p.median_a_s >= 1e-3 for p in others)
    _says(title, f"bruck and native {_xrange(p.ratio for p in called)}x in {len(called)} of their {len(slow_ones)} "
                 f"cases, the {len(others)} others ({_xrange(p.ratio for p in others)}x; their thread-multiple "
                 "medians were already milliseconds) undetermined")
    linear = _pairs(cmp, "allgather", {"linear"})
    (odd,) = [p for p in linear if p.verdict != "undetermined"]
    assert odd.verdict == "slower"
    _says(title, f"linear ({_tpair(min(p.median_a_s for p in linear), max(p.median_a_s for p in linear), '-')} "
                 f"thread-multiple) is undetermined except at {format_size(odd.nbytes)} ({_x(odd.ratio)}x slower)")
    assert {p.algorithm for p in allgather} == {"ring", "recursive_doubling", "bruck", "native", "linear"}

    pingpong = _pairs(cmp, "pingpong")
    assert all(p.verdict == "undetermined" and p.ratio < 1 for p in pingpong)
    _says(title, f"Ping-pong (two ranks talking, two waiting) is faster by its medians "
                 f"({_xrange(p.ratio for p in pingpong)}x) but undetermined at every size")
    assert {p.collective for p in cmp.pairs} == {"pingpong", "allreduce", "bcast", "allgather"}


# --------------------------------------------------------------------------- prose: the stored DDP runs


def _winners(run: str) -> dict[str, dict]:
    return {e["what"]: e for e in fastest_per_variant(open_run(DATA / run).rows)}


def test_ddp_runs_figures(ddp_threads):
    title = "Reports, comparisons and plots"
    multi, single = _winners("wl-ddp-np2"), _winners("wl-ddp-np2-single")
    b, t = multi["bucketed 0.5/0.125 MiB"], multi["per_tensor"]
    assert (b["fastest"], b["runner_up"], t["fastest"], t["runner_up"]) == ("allreduce=ring",
                                                                            "allreduce=rabenseifner") * 2
    assert b["verdict"] == t["verdict"] == "undetermined" and not b["significant"] and not t["significant"]
    _says(title, f"ring was fastest in both variants against Rabenseifner by its medians (`ccbench report "
                 f"tests/data/wl-ddp-np2`: bucketed {_tpair(b['median_s'], b['runner_up_s'], ' vs ')}, per tensor "
                 f"{_tpair(t['median_s'], t['runner_up_s'], ' vs ')}), but with one launch a side the difference is "
                 f"undetermined (p = {fmt_p(b['p_value'])} and {fmt_p(t['p_value'])})")
    b, t = single["bucketed 0.5/0.125 MiB"], single["per_tensor"]
    assert (b["fastest"], b["runner_up"], b["verdict"]) == ("allreduce=rabenseifner", "allreduce=ring", "undetermined")
    assert (t["fastest"], t["runner_up"], t["verdict"]) == ("allreduce=native", "allreduce=ring", "undetermined")
    _says(title, "single-threaded, bucketed Rabenseifner against ring "
                 f"({_tpair(b['median_s'], b['runner_up_s'], ' vs ')}"
                 f") and per tensor native against ring ({_tpair(t['median_s'], t['runner_up_s'], ' vs ')}) are "
                 "undetermined as well")

    steps, calls = ddp_threads.summary()
    (launch,) = ddp_threads.launch_summary()
    assert launch["launch_level"] == 0 and launch["undetermined"] == len(ddp_threads.pairs)
    assert steps["undetermined"] == steps["pairs"] and calls["undetermined"] == calls["pairs"]
    _says(title, f"changed the steps by a geometric mean of {fmt_ratio(steps['geomean_ratio'])}x, and with one launch "
                 f"a side it decided none of the {len(ddp_threads.pairs)} rows ({steps['pairs']} steps and "
                 f"{calls['pairs']} calls undetermined; single launches resolve ratios beyond "
                 f"{fmt_ratio(launch['resolvable_low'])}-{fmt_ratio(launch['resolvable_high'])}x here)")
    small = _small_native_calls(ddp_threads)
    _says(title, f"native calls of 5 KiB and less were {_xrange(p.median_a_s / p.median_b_s for p in small)}x faster "
                 f"single-threaded by their medians (all calls' geometric mean {fmt_ratio(calls['geomean_ratio'])}x)")
    q = [p.p_adjusted for p in small]
    assert all(p.p_adjusted >= 0.05 for p in small)
    _says(title, f"not beyond it after the false-discovery adjustment (adjusted p {fmt_p(min(q))}-{fmt_p(max(q))})")
    big = [p for p in ddp_threads.pairs if p.variant == "per_tensor" and p.algorithm == "allreduce=native"
           and not p.whole and p.nbytes >= 512 * 1024]
    assert sorted(format_size(p.nbytes) for p in big) == ["1 MiB", "512 KiB"]
    assert all(p.ratio > 1 for p in big)
    pct = sorted(f"{(p.ratio - 1) * 100:.0f}" for p in big)
    (bucket,) = [p for p in ddp_threads.pairs if p.variant.startswith("bucketed") and p.label == "bucket 2"
                 and p.algorithm == "allreduce=native"]
    assert bucket.ratio > 1
    _says(title, f"(per-tensor native {pct[0]}-{pct[-1]}% slower, the bucketed native {format_size(bucket.nbytes)} "
                 f"bucket {(bucket.ratio - 1) * 100:.0f}% slower, by their medians)")


# --------------------------------------------------------------------------- figures with nothing stored behind them


UNSTORED = [  # (section, words next to the figure): the passage must say that it is not stored
    ("Tuning the MPI library itself", "An earlier run of the same commands"),
    ("An emulated cluster: the lab", "fitted rates of 2.00, 5.30 and 10.37 Gbit/s"),
    ("An emulated cluster: the lab", "Over four earlier cycles (the CI test"),
    ("Launches: the unit of replication", "on an earlier replicated default sweep"),
]


@pytest.mark.parametrize(("title", "anchor"), UNSTORED, ids=[a for _, a in UNSTORED])
def test_unstored_figures_say_so(title, anchor):
    para = _paragraph(title, anchor)
    assert "not stored" in para, \
        f"{_page_of(title)}: {anchor!r} should say it is not stored"


# --------------------------------------------------------------------------- prose: the reference results

REFERENCE = REPO / "reference"


def _replication_docs() -> list[dict]:
    """Every stored replication benchmark result (``benchmarks/replication.py``'s replication.json, less its cases)."""
    import json

    return [json.loads(p.read_text()) for p in sorted((REFERENCE / "replication").glob("replication_*.json"))]


def _found(docs: list[dict], experiment: str, rounds: int) -> tuple[int, int, list[int]]:
    """(cases called, cases, called per run) of `experiment` over the stored runs of the benchmark with `rounds`."""
    per_run = [(s["slower"] + s["faster"], s["cases"]) for d in docs if d["rounds"] == rounds
               for s in d["summary"] if s["experiment"] == experiment]
    return sum(c for c, _ in per_run), sum(n for _, n in per_run), [c for c, _ in per_run]


def test_replication_figures_from_the_reference_results():
    docs = _replication_docs()
    # identical sweeps (A/A), launches as the unit: every K, every stored run of the benchmark, any rounds
    aa = [s for d in docs for s in d["summary"] if s["experiment"] == "aa"]
    assert len(aa) >= 12
    worst = max((s["slower"] + s["faster"]) / s["cases"] for s in aa)
    pooled = [s["pooled_called_share"] for s in aa]
    _says("What it found here", f"Identical runs compared: 0-{worst:.1%} of cases called different once launches "
                                f"are the unit (the pooled-sample rule called {min(pooled):.0%}-{max(pooled):.0%})")
    thread = [s for d in docs for s in d["summary"] if s["experiment"] == "thread"]
    assert thread and all(s["slower"] == s["cases"] for s in thread)
    ratios = [s["geomean_ratio"] for s in thread]
    _says("What it found here", f"thread level single against multiple ({min(ratios):.0f}-{max(ratios):.0f}x "
                                "geometric mean) found in every case")
    # a 20% slowdown in the same launches: two designs, K = 5, with and without rounds
    by_design = {e: _found(docs, e, 4) for e in ("slow20-paired", "twin-paired")}
    shares = [c / n for c, n, _ in by_design.values()]
    one = [_found(docs, e, 1) for e in ("slow20-paired", "twin-paired")]
    one_share = sum(c for c, _, _ in one) / sum(n for _, n, _ in one)
    _says("What it found here", f"a 20% slowdown found at {min(shares):.0%}-{max(shares):.0%} of sizes with 5 paired "
                                f"launches of 4 rounds each, {one_share:.0%} in one round")
    for c, n, runs in by_design.values():  # the table's "--rounds 4" rows, every stored run listed
        assert n == 9 * len(runs)
        listed = ", ".join(f"{x / 9:.0%}" for x in runs)
        _says("Launches: the unit of replication",
              f"| the same with `--rounds 4` | | | {listed} of 9 ({c / n:.0%} of {n}) | - |")
    for c, n, runs in one:  # and the one-round rows above them
        _says("Launches: the unit of replication", f"{', '.join(f'{x / 9:.0%}' for x in runs)} of 9 "
                                                   f"({c / n:.0%} of {n})")
    _says("Launches: the unit of replication", f"against {one_share:.0%} in one round")


def _pct_span(xs):
    lo, hi = min(xs), max(xs)
    return f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo * 100:.0f}-{hi:.0%}"


def _replication_rows(docs: list[dict]) -> list[str]:
    """The first rows of the manual's replication table from the stored runs of benchmarks/replication.py."""
    default = [d for d in docs if "--only" not in d["argv"]]

    def summaries(ds, exp, K):
        return [s for d in ds for s in d["summary"] if s["experiment"] == exp and s["K"] == K]

    def called(ss):
        return [(s["slower"] + s["faster"]) / s["cases"] for s in ss]

    def aa_cells(ds, exp, Ks=(1, 3, 5)):
        cells = []
        for K in (1, 3, 5):
            ss = summaries(ds, exp, K)
            if K not in Ks or not ss:
                cells.append("")
                continue
            cell = _pct_span(called(ss))
            if all(s["other"] == f"undetermined {s['cases']}" for s in ss):
                cell += " (all undetermined)"
            cells.append(cell)
        return cells

    rows = []
    aa = [summaries(default, "aa", K) for K in (1, 3, 5)]
    pooled = [s["pooled_called_share"] for ss in aa for s in ss]
    n = {s["cases"] for ss in aa for s in ss}
    (ncases,) = n
    pairs = {d["pairs"] for d in default}
    (npairs,) = pairs
    rows.append(f"| identical runs ({npairs} pairs, {ncases} cases; {len(default)} runs of the benchmark): called "
                f"faster/slower | " + " | ".join(aa_cells(default, "aa")) + f" | {_pct_span(pooled)} |")
    r4 = [d for d in docs if d["rounds"] == 4 and any(s["experiment"] == "aa" for s in d["summary"])]
    ss4 = [s for d in r4 for s in d["summary"] if s["experiment"] == "aa"]
    rows.append(f"| the same with `--rounds 4` ({r4[0]['pairs']} pairs, {ss4[0]['cases']} cases) | "
                + " | ".join(aa_cells(r4, "aa")) + f" | {_pct_span([s['pooled_called_share'] for s in ss4])} |")
    wl = [d for d in docs if any(s["experiment"] == "aa-workload" for s in d["summary"])]
    sw = [s for d in wl for s in d["summary"] if s["experiment"] == "aa-workload"]
    rows.append(f"| identical training-step runs (`--only workload`: DDP at 2 ranks, {wl[0]['pairs']} pairs, "
                f"{sw[0]['cases']} steps and calls) | " + " | ".join(aa_cells(wl, "aa-workload", (1, 3))) + " | - |")
    th = [s for d in docs for s in d["summary"] if s["experiment"] == "thread"]
    g = [s["geomean_ratio"] for s in th]
    rows.append(f"| thread level single vs multiple at 4 ranks ({min(g):.0f}-{max(g):.0f}x, geometric means): called "
                "slower | " + " | ".join(_pct_span(called(summaries(docs, "thread", K))) for K in (1, 3, 5))
                + f" | {_pct_span([s['pooled_called_share'] for s in th])} |")
    sep = [s for d in docs for s in d["summary"] if s["experiment"] == "slow20-separate"]
    ring = [s for s in sep if s["what"].startswith("ring")]
    ctrl = [s for s in sep if not s["what"].startswith("ring")]

    def tally(ss):
        c = sum(s["slower"] + s["faster"] for s in ss)
        return f"{c} of {sum(s['cases'] for s in ss)} ({_pct_span(called(ss))} of 9 per run)"

    nruns = len(ring)
    rows.append(f"| ring slowed 20% (`CCBENCH_FAULT=slow:all:allreduce/ring:20%`), separate runs: found | | | "
                f"{tally(ring)}, {sum(s['faster'] for s in ring)} of them called faster | "
                f"{_pct_span([s['pooled_called_share'] for s in ring])} |")
    rows.append(f"| their untouched control (recursive_doubling), the same {nruns} pairs of runs: called | | | "
                f"{tally(ctrl)} | {_pct_span([s['pooled_called_share'] for s in ctrl])} |")
    md = {K: [m["min_detectable_ratio"] for d in default for m in d["min_detectable"] if m["K"] == K] for K in (3, 5)}
    rows.append("| smallest ratio two separate runs tell apart (80% power, median case) | - | "
                + " | ".join(f"{min(md[K]):.2f}-{max(md[K]):.2f}x" for K in (3, 5)) + " | - |")
    return rows


def test_replication_table_from_the_reference_results():
    """The table's rows of identical runs, thread levels and separate runs, from every stored benchmark result."""
    docs = _replication_docs()
    for row in _replication_rows(docs):
        _says("Launches: the unit of replication", row)
    ctrl = [(s, d) for d in docs for s in d["summary"]
            if s["experiment"] == "slow20-separate" and not s["what"].startswith("ring")]
    assert len(ctrl) == 16
    worst, doc = max(ctrl, key=lambda sd: sd[0]["slower"] + sd[0]["faster"])
    (ring,) = [s for s in doc["summary"] if s["experiment"] == "slow20-separate" and s["what"].startswith("ring")]
    assert worst["slower"] == ring["slower"] == 0
    _says("Launches: the unit of replication",
          f"In one of the {len(ctrl)} pairs of separate runs the second run was faster throughout (the untouched "
          f"control's geometric-mean ratio {worst['geomean_ratio']:.2f}): {worst['faster']} of its 9 control sizes and "
          f"{ring['faster']} of the slowed ring's were called faster.")


def test_fidelity_figures_from_the_reference_results():
    import csv

    (path,) = sorted((REFERENCE / "fidelity").glob("harness_fidelity_*.csv"))
    rows = {(int(r["nranks"]), r["collective"], int(r["nbytes"])): r for r in csv.DictReader(path.open())}
    small = [rows[(2, c, 8)] for c in ("allreduce", "bcast", "allgather")]
    compiled = [float(r["ccb_c_per_call_s"]) / float(r["c_per_call_s"]) for r in small]
    python_over = [float(r["ccb_py_per_call_s"]) - float(r["mpi4py_per_call_s"]) for r in small]
    assert all(x <= 0 for x in python_over), "the README says the Python loop is no slower than bare mpi4py"
    us = [[float(r[k]) * 1e6 for r in small] for k in ("ccb_py_per_call_s", "mpi4py_per_call_s")]
    batched = [float(r["ccb_py_batched_s"]) / float(r["mpi4py_b2b_s"]) for r in small]
    _says("The compiled loop (`--loop`)",
          f"at 8 B the Python loop per call took {us[0][0]:.2f} us (allreduce), {us[0][1]:.2f} us (bcast) and "
          f"{us[0][2]:.2f} us (allgather) against the bare mpi4py loop's {us[1][0]:.2f}, {us[1][1]:.2f} and "
          f"{us[1][2]:.2f} us, batched {batched[0]:.2f}x, {batched[1]:.2f}x and {batched[2]:.2f}x of mpi4py back to "
          f"back, and the compiled loop {compiled[0]:.2f}x, {compiled[1]:.2f}x and {compiled[2]:.2f}x of C per call")
    (doc,) = [__import__("json").loads(p.read_text()) for p in (REFERENCE / "fidelity").glob("*.json")]
    met = [g for g in doc["goals"] if g["met"]]
    assert all(g["met"] for g in doc["goals"] if g["nranks"] == 2 and g["nbytes"] == 8)
    _says("The compiled loop (`--loop`)", f"every 8 B goal met at 2 ranks ({len(met)} of {len(doc['goals'])} in all;")
    missed = [g for g in doc["goals"] if not g["met"]]
    big = [g for g in missed if g["nbytes"] == 65536]
    (small,) = [g for g in missed if g["nbytes"] < 1024]
    assert (small["nranks"], small["collective"], small["goal"].split()[0]) == (4, "bcast", "py")
    _says("The compiled loop (`--loop`)", f"of the {len(missed)} misses, {len(big)} are 64 KiB cases")
    ours = rows[(2, "allreduce", 65536)]
    _says("The compiled loop (`--loop`)",
          f"the compiled 64 KiB allreduce at {float(ours['ccb_c_per_call_s']) * 1e6:.3g} "
          f"us against C's {float(ours['c_per_call_s']) * 1e6:.3g}")
    assert doc["rounds"] == 6
    _says("The compiled loop (`--loop`)", "python benchmarks/harness_fidelity.py --rounds 6`, quiet machine, 168 s")
    limits = sorted({(g["goal"].rsplit(" <= ", 1)[0], g["nbytes"] < 1024, g["limit"]) for g in doc["goals"]})
    assert limits == [("compiled batched / C b2b", True, 1.3), ("compiled per-call / C", False, 1.05),
                      ("compiled per-call / C", True, 1.3), ("py batched / mpi4py b2b", False, 1.1),
                      ("py batched / mpi4py b2b", True, 1.1), ("py per-call - mpi4py (us)", True, 0.1)], \
        "the manual lists the goals the script checks"
    _says("What it found here", f"At 8 B and 2 ranks the compiled loop (`--loop compiled`) took "
                                f"{compiled[0]:.2f}x (allreduce), {compiled[1]:.2f}x (bcast) and {compiled[2]:.2f}x "
                                "(allgather) the time of a C loop of OSU's method, and the Python loop no longer than "
                                "a bare mpi4py loop")


def test_fidelity_table_from_the_reference_results():
    """Every cell of the manual's 2-rank loop table is the stored run's median, in microseconds."""
    import csv

    (path,) = sorted((REFERENCE / "fidelity").glob("harness_fidelity_*.csv"))
    keys = ["c_per_call_s", "c_b2b_s", "mpi4py_per_call_s", "mpi4py_b2b_s", "ccb_py_per_call_s", "ccb_py_batched_s",
            "ccb_c_per_call_s", "ccb_c_batched_s"]
    want = [f"| {r['collective']} {format_size(int(r['nbytes']))} | "
            + " | ".join(f"{float(r[k]) * 1e6:.3g}" for k in keys) + " |"
            for r in csv.DictReader(path.open()) if r["nranks"] == "2"]
    got = [line for line in _section("The compiled loop (`--loop`)").splitlines()
           if line.startswith("| allreduce") or line.startswith("| bcast") or line.startswith("| allgather")]
    assert got == want


# --------------------------------------------------------------------------- prose: the reference runs

def _reference_runs(group: str) -> list[Path]:
    """The run directories stored under reference/`group`/, oldest first (their names start with the time)."""
    return sorted(p for p in (REFERENCE / group).iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def models_fit() -> dict:
    """`ccbench fit` of the stored 4-rank allreduce run of the model figures (nothing written beside it)."""
    (run,) = _reference_runs("models")
    return fit_run(open_run(run))


def _ratio(x: float) -> str:
    return f"{x:.3g}"


def _gammas(meta: dict, dtype: str = "float32", op: str = "sum") -> dict[tuple[str, str], float]:
    """{(path, temperature): gamma in s/B} of a run's reduction timings, as `fit` prints them."""
    from ccbench.analysis.fit import gamma_per_path

    return {(g["path"], g["temperature"]): g["gamma_s_per_byte"] for g in gamma_per_path(meta["reduce_local"])
            if g["dtype"] == dtype and g["op"] == op and "error" not in g}


def test_model_check_figures_from_the_reference_run(models_fit):
    from ccbench.present.model_tables import gamma_line

    net = models_fit["network"]
    assert net["used_for_predictions"] == "effective"
    _says("gamma per path", f"On the 4-rank run below (`reference/models/`, as `ccbench fit` prints it): "
                            f"{gamma_line(net['effective']['numpy'])}")
    summary = {(name, s["kind"]): s for name, doc in models_fit["checks_by_params"].items()
               for s in doc["summary"] if s["collective"] == "allreduce"}
    eff_h, eff_n = summary[("effective", "hand-written")], summary[("effective", "native")]
    large = sorted({c["nbytes"] for c in models_fit["model_checks"] if c["nbytes"] >= eff_h["large_bytes"]})
    _says("Parameters: ping-pong, joint, effective",
          f"Median measured/predicted of allreduce at >= {format_size(eff_h['large_bytes'])} "
          f"({' and '.join(format_size(n) for n in large)}): hand-written {_ratio(eff_h['median_ratio_large'])}, "
          f"native {_ratio(eff_n['median_ratio_large'])} under the effective parameters (worst "
          f"{_ratio(eff_h['worst_ratio_large'])} and {_ratio(eff_n['worst_ratio_large'])}); under ping-pong "
          f"{_ratio(summary[('pingpong', 'hand-written')]['median_ratio_large'])} and "
          f"{_ratio(summary[('pingpong', 'native')]['median_ratio_large'])}, under the joint fit "
          f"{_ratio(summary[('joint', 'hand-written')]['median_ratio_large'])} and "
          f"{_ratio(summary[('joint', 'native')]['median_ratio_large'])}.  Over all sizes: hand-written "
          f"{_ratio(eff_h['median_ratio'])}, native {_ratio(eff_n['median_ratio'])} (effective).")
    _says("What it found here", f"From a 4-rank run's own fit, the median measured/predicted time of allreduce at "
                                f"{format_size(large[0])}-{format_size(large[-1])} was "
                                f"{_ratio(eff_h['median_ratio_large'])} (hand-written) and "
                                f"{_ratio(eff_n['median_ratio_large'])} (native)")


def test_cross_validation_figures_from_the_reference_runs():
    from ccbench.analysis.crossval import cross_validate

    small, large = _reference_runs("crossval")
    doc = cross_validate([open_run(small)], open_run(large))
    assert doc["params"] == "effective" and any("oversubscribes" in n for n in doc["notes"])
    every = {s["collective"]: s for s in doc["summary"] if s["kind"] == "all"}
    listed = ", ".join(f"{c} {_ratio(every[c]['median_ratio'])} (worst {_ratio(every[c]['worst_ratio'])})"
                       for c in ("allreduce", "bcast", "allgather"))
    agree = doc["agreement"]
    _says("Cross-validation", f"effective parameters): median measured/predicted {listed}; the predicted winner was "
                              f"the measured one at {agree['agree']} of {agree['sizes']} sizes.")
    medians = [every[c]["median_ratio"] for c in ("allreduce", "bcast", "allgather")]
    _says("What it found here", f"fitted at 2 ranks and checked at 4 (`predict --against`) it missed by "
                                f"{min(medians):.1f}-{max(medians):.1f}x in the median")

    def native_8k(run):
        (row,) = [r for r in open_run(run).rows
                  if (r.collective, r.algorithm, r.nbytes) == ("allreduce", "native", 8192)]
        return row.median_s

    _says("Cross-validation", f"the native 8 KiB allreduce took {fmt_time(native_8k(large))} against "
                              f"{fmt_time(native_8k(small))} at 2 ranks")
    # the 2-rank run's own reduction timings: the paragraph on the two paths
    g = _gammas(open_run(small).meta)
    nw, nc, mw, mc = g[("numpy", "warm")], g[("numpy", "cold")], g[("mpi", "warm")], g[("mpi", "cold")]
    assert mw / nw > 2 and mc / nc < 1.5, "the page says the library's path is the slower in cache only"
    _says("Fitting and predicting", f"On a 2-rank float32 sum here (the 2-rank run of `reference/crossval/`): numpy "
                                    f"{gamma_text(nw)} warm and {gamma_text(nc)} cold, MPICH's `MPI_Reduce_local` "
                                    f"{gamma_text(mw)} warm ({mw / nw:.1f}x numpy's) and {gamma_text(mc)} cold "
                                    f"({mc / nc:.2f}x)")


def test_memory_limit_figures_from_the_reference_runs():
    from collections import Counter

    from ccbench.analysis.limits import best_shares, memory_limit

    runs = [open_run(p) for p in _reference_runs("limits")]
    assert [r.meta["nranks"] for r in runs] == [2, 4] * 3, "three of each, interleaved"

    def span(xs, fmt):
        return f"{fmt(min(xs))}-{fmt(max(xs))}"

    def g3(x):
        return f"{x:.3g}"

    def pct(x):
        return f"{x * 100:.0f}"

    shares = {}
    for P in (2, 4):
        lims, best = [], {"hand-written": [], "native": []}
        for run in (r for r in runs if r.meta["nranks"] == P):
            lim = memory_limit(run.meta["memory_bandwidth"])
            busbw = {r.algorithm: r.busbw_gbs for r in run.rows if r.collective == "allreduce" and r.nbytes == 4 << 20}
            for side, (alg, share) in best_shares(busbw, lim.copy_gbs).items():
                best[side].append((alg, share, busbw[alg]))
            lims.append(lim)

        def cell(picks):
            names = ", ".join(a for a, _ in Counter(a for a, _, _ in picks).most_common())
            return (f"{span([s for _, s, _ in picks], pct)}% ({names}; "
                    f"{span([bw for _, _, bw in picks], g3)} GB/s)")

        _says("How close to the node's limit",
              f"| {P} | {span([x.one_core_gbs for x in lims], g3)} GB/s | "
              f"{span([x.limiting.aggregate_gbs for x in lims], g3)} GB/s | "
              f"{span([x.copy_gbs for x in lims], g3)} GB/s | {cell(best['hand-written'])} | {cell(best['native'])} |")
        shares[P] = [s for _, s, _ in best["hand-written"]]
        if P == 2:
            _says("How close to the node's limit",
                  f"one core copied {span([x.one_core_gbs for x in lims], g3)} GB/s and the best hand-written share "
                  f"spanned {span(shares[2], pct)}%")
        above = [(i, alg) for i, (alg, s, _) in enumerate(best["hand-written"] + best["native"]) if s > 1]
        assert above == ([(0, "rabenseifner")] if P == 2 else []), "the page names the one share above 100%"
    _says("What it found here", f"The best hand-written 4 MiB allreduce reached {span(shares[2], pct)}% of the "
                                f"node's memory-copy limit at 2 ranks and {span(shares[4], pct)}% at 4")


LAB_TITLE = "An emulated cluster: the lab"


@pytest.fixture(scope="module")
def lab_runs() -> dict:
    """The stored lab cycle: {"baselines": [...], "pingpong": [500 us run, 2 ms run], "allreduce": run} (run dirs)."""
    runs = _reference_runs("lab")
    base = [p for p in runs if p.name.endswith("_lab-baseline")]
    measured = [p for p in runs if p not in base]
    pingpong = [p for p in measured if open_run(p).meta["nranks"] == 2]
    (allreduce,) = [p for p in measured if p not in pingpong]
    return {"baselines": base, "pingpong": pingpong, "allreduce": allreduce}


def _signed_time(s: float) -> str:
    return ("+" if s >= 0 else "-") + fmt_time(abs(s))


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.4g} Mbit/s"


def test_lab_fitted_against_injected_from_the_reference_runs(lab_runs):
    lines, base_alphas = [], []
    for p in lab_runs["pingpong"]:
        lab = fit_run(open_run(p))["lab"]
        inj = lab["injected"]
        base_alphas.append(lab["baseline"]["alpha_s"])
        link = f"{inj['rate_bps'] / 1e9:g} Gbit/s" if inj["rate_bps"] >= 1e9 else f"{inj['rate_bps'] / 1e6:g} Mbit/s"
        lines.append(f"| {fmt_time(inj['delay_s'])}, {link} | "
                     f"{fmt_time(lab['baseline']['alpha_s'])} | {fmt_time(lab['fitted']['alpha_s'])} | "
                     f"{fmt_time(lab['fitted_delay_s'])} ({_signed_time(lab['delay_error_s'])}) | "
                     f"{_mbit(lab['fitted']['rate_bps'])} ({lab['rate_error']:+.1%}) |")
    for line in lines:
        _says(LAB_TITLE, line)
    _says(LAB_TITLE, f"The software's own one-way cost (MPI, TCP, the emulator's path: "
                     f"{min(base_alphas) * 1e6:.3g}-{max(base_alphas) * 1e6:.3g} us in the stored cycle)")


def test_lab_extra_delay_and_breakpoint_from_the_reference_runs(lab_runs):
    import numpy as np

    shares = []
    for p in lab_runs["pingpong"]:
        run = open_run(p)
        delay, rate = run.meta["lab"]["delay_s"], run.meta["lab"]["rate_bps"]
        mid = [r for r in run.rows if 256 <= r.nbytes <= 32 << 10]
        late = sum(int(np.sum(np.asarray(r.samples_s) > 1.5 * delay + r.nbytes * 8 / rate)) for r in mid)
        shares.append(late / sum(len(r.samples_s) for r in mid))
        (curve,) = [c for c in fit_run(open_run(p))["curves"] if c["collective"] == "pingpong"]
        assert [s["nbytes_lo"] for s in curve["segmented"]["segments"]][1] == 256
    _says(LAB_TITLE, f"from 256 B on, {min(shares) * 100:.0f}-{max(shares):.0%} of the ping-pongs pay one extra link "
                     f"delay (at 256 B-32 KiB, longer than 1.5 delays plus the serialisation time")


def test_lab_release_lateness_from_the_reference_runs(lab_runs):
    import json

    def lateness(p):
        doc = json.loads((p / "lab-traffic.json").read_text())
        counts, edges = doc["emulator_lateness_counts"], doc["emulator_lateness_edges_s"]
        total = sum(counts)
        within = sum(c for c, e in zip(counts, edges, strict=True) if e is not None and e <= 10e-6)
        over = sum(c for c, e in zip(counts, edges, strict=True) if e is None or e > 100e-6)
        return total, within / total, over / total

    (t1, w1, o1), (t2, w2, o2) = (lateness(p) for p in lab_runs["pingpong"])
    t3, w3, o3 = lateness(lab_runs["allreduce"])
    _says(LAB_TITLE, f"Of the packets of the three measurement runs ({t1}, {t2} and {t3} releases: the two ping-pong "
                     f"sweeps, then the 4-host allreduce), the emulator released {w1:.0%}, {w2:.0%} and {w3:.0%} "
                     f"within 10 us of their release time, and {o1:.1%}, {o2:.1%} and {o3:.1%} more than 100 us late")


def test_lab_allreduce_table_from_the_reference_run(lab_runs):
    text = _section(LAB_TITLE)
    m = re.search(r"`ccbench predict --alpha (\S+) --beta (\S+) -n (\d+) -s (\S+) -C allreduce`", _norm(text))
    assert m
    fitted = fit_run(open_run(lab_runs["pingpong"][1]))["lab"]["fitted"]
    assert m.group(1) == fmt_time(fitted["alpha_s"]).replace(" ", ""), "the model's alpha is the 2 ms cycle's fit"
    params, _ = given_params(None, m.group(1), m.group(2), None)
    sizes = [8, 64 * 1024, 4 << 20]
    (tab,) = predict_table(params, [int(m.group(3))], sizes, ["allreduce"])
    run = open_run(lab_runs["allreduce"])
    assert run.meta["lab"]["delay_s"] == 2e-3 and run.meta["lab"]["rate_bps"] == 200e6
    names = {"ring": "ring", "recursive_doubling": "RD", "rabenseifner": "Rab"}

    def order(t):
        o = sorted(names, key=t.get)
        return names[o[0]] + "".join((" ~ " if t[b] / t[a] < 1.05 else " < ") + names[b]
                                     for a, b in zip(o, o[1:], strict=False))

    ratios = []
    for i, n in enumerate(sizes):
        meas = {r.algorithm: r.median_s for r in run.rows if r.nbytes == n}
        pred = {a: tab["times_s"][a][i] for a in names}
        ratios += [meas[a] / pred[a] for a in names]
        cells = " | ".join(f"{fmt_time(meas[a])} ({fmt_time(pred[a]).removesuffix(' ms')})" for a in names)
        _says(LAB_TITLE, f"| {format_size(n)} | {cells} | {order(meas)} | {order(pred)} |")
    _says(LAB_TITLE, f"the measured times are {min(ratios):.2f}-{max(ratios):.2f}x the predictions")
    rab = ratios[-1]
    _says(LAB_TITLE, f"Rabenseifner at 4 MiB ran {rab:.2f}x its prediction")


def test_algorithms_against_native_from_the_reference_runs():
    import json

    runs = [open_run(p) for p in _reference_runs("algorithms")]
    assert [r.meta["nranks"] for r in runs] == [2, 4]
    sizes = [1 << 10, 64 << 10, 1 << 20, 4 << 20]
    _says("Benchmarks: hand-written against native", "| | " + " | ".join(format_size(n) for n in sizes) + " |")
    best = {}
    for run in runs:
        med = {(r.algorithm, r.nbytes): r.median_s for r in run.rows if r.collective == "allreduce"}
        P = run.meta["nranks"]
        _says("Benchmarks: hand-written against native",
              f"| native allreduce, {P} ranks | " + " | ".join(f"{med[('native', n)] * 1e6:.0f} us" for n in sizes)
              + " |")
        for alg in ("ring", "rabenseifner"):
            _says("Benchmarks: hand-written against native",
                  f"| {alg} / native | " + " | ".join(f"{med[(alg, n)] / med[('native', n)]:.2f}" for n in sizes)
                  + " |")
        best[P] = [min(t / med[("native", n)] for (a, n), t in med.items() if a != "native" and n == m)
                   for m in sizes if m >= 1 << 20]
    (p2p,) = [json.loads(p.read_text()) for p in (REFERENCE / "algorithms").glob("p2p-overhead_*.json")]
    assert p2p["thread_level"] == 0, "measured at thread level single, as the 2-rank sweep"
    _says("Benchmarks: hand-written against native",
          f"the best hand-written allreduce at 1 MiB and above took {min(best[2]):.2f}-{max(best[2]):.2f}x native's "
          f"time at 2 ranks and {min(best[4]):.2f}-{max(best[4]):.2f}x at 4 (goal: within 1.3x)")
    _says("Benchmarks: hand-written against native",
          f"measured the counted layer at {p2p['overhead_s'] * 1e6:.2f} us per step over a bare mpi4py `Sendrecv` "
          f"({p2p['counted_s'] * 1e6:.2f} us vs {p2p['bare_s'] * 1e6:.2f} us; goal < 2 us)")


def _durations() -> dict[tuple[int, int], tuple[int, float]]:
    """{(launches, rounds): (cases, seconds)} of the default sweeps whose run.json is in reference/timing/."""
    import json
    from datetime import datetime

    out = {}
    for p in (REFERENCE / "timing").glob("*.run.json"):
        m = json.loads(p.read_text())
        assert m["status"] == "complete" and m["argv"][m["argv"].index("--config") + 1] == "configs/default.toml"
        secs = (datetime.fromisoformat(m["end_time"]) - datetime.fromisoformat(m["start_time"])).total_seconds()
        out[(m["config"].get("launches") or 1, m["config"].get("rounds") or 1)] = (m["finished_cases"], secs)
    return out


def test_default_sweep_durations_from_the_reference_runs():
    d = _durations()
    cases, one = d[(1, 1)]
    _says("Benchmarks: hand-written against native", f"({cases} cases at 4 ranks, every algorithm, 8 B-4 MiB) took "
                                                     f"{one:.0f} s of wall time on this machine")
    (c3, three), (c34, rounds) = d[(3, 1)], d[(3, 4)]
    assert c3 == c34 == cases
    _says("Launches: the unit of replication", f"(`ccbench launch -n 4 -c configs/default.toml`: {cases} cases, "
                                               f"{one:.0f} s; with `--launches 3` {three:.0f} s, and with "
                                               f"`--launches 3 --rounds 4` {rounds:.0f} s")


WL_TITLE = "Training workloads"


@pytest.fixture(scope="module")
def workload_runs() -> dict:
    """The stored 4-rank training-step runs (reference/workloads/), by (workload, model), by (moe, ""), and
    the straggler runs by (straggler, collective)."""
    out = {}
    for p in _reference_runs("workloads"):
        run = open_run(p)
        r = run.rows[0]
        key = (r.workload, r.collective if r.workload == "straggler" else r.model.strip("-"))
        assert key not in out
        out[key] = run
    return out


def _steps(run, variant: str) -> dict[str, float]:
    """{algorithm: step median} of the steps of one variant (its name or the start of it)."""
    return {r.algorithm: r.median_s for r in run.rows if r.label == "step" and r.variant.startswith(variant)}


def test_workload_table_from_the_reference_runs(workload_runs):
    t = fmt_time
    for model in ("resnet50", "gpt2"):
        run = workload_runs[("ddp", model)]
        for variant, label in (("bucketed", "bucketed"), ("per_tensor", "per tensor")):
            s = _steps(run, variant)
            (n,) = {r.ncalls for r in run.rows if r.label == "step" and r.variant.startswith(variant)}
            _says(WL_TITLE, f"| {label}: {n} calls | {t(s['allreduce=native'])} | {t(s['allreduce=ring'])} | "
                            f"{t(s['allreduce=rabenseifner'])} |")
    gpt2 = workload_runs[("ddp", "gpt2")]
    b, p = _steps(gpt2, "bucketed"), _steps(gpt2, "per_tensor")
    ratio = {a: p[f"allreduce={a}"] / b[f"allreduce={a}"] for a in ("native", "ring", "rabenseifner")}
    _says(WL_TITLE, f"per tensor against bucketed, GPT-2's step took {ratio['native']:.2f}x (native), "
                    f"{ratio['ring']:.2f}x (ring) and {ratio['rabenseifner']:.2f}x (rabenseifner)")
    zero = workload_runs[("zero", "bert-base")]
    for variant in ("zero2", "zero3"):
        s = _steps(zero, variant)
        (n,) = {r.ncalls for r in zero.rows if r.label == "step" and r.variant == variant}
        _says(WL_TITLE, f"| {variant}: {n} calls | {t(s['reduce_scatter=native,allgather=native'])} | "
                        f"{t(s['reduce_scatter=pairwise,allgather=ring'])} (pairwise + ring) | |")
    for variant in ("ddp_flat", "ddp_layer"):
        s = _steps(zero, variant)
        (n,) = {r.ncalls for r in zero.rows if r.label == "step" and r.variant == variant}
        _says(WL_TITLE, f"| {variant}: {n} call{'s' if n != 1 else ''} | {t(s['allreduce=native'])} | "
                        f"{t(s['allreduce=ring'])} | |")


def test_workload_moe_and_overlap_from_the_reference_runs(workload_runs):
    moe = workload_runs[("moe", "")]
    for ep in (2, 4):
        s = _steps(moe, f"ep={ep}")
        _says(WL_TITLE, f"| EP = {ep} | {fmt_time(s['alltoall=native'])} | {fmt_time(s['alltoall=pairwise'])} "
                        f"(pairwise), {fmt_time(s['alltoall=bruck'])} (bruck) | |")
    overlap = [r.overlap_pct for r in workload_runs[("overlap", "resnet50")].rows]
    _says(WL_TITLE, f"Overlap of native Iallreduce with ResNet-50's buckets (7.82-30 MiB) came out "
                    f"{min(overlap):.0f}-{max(overlap):.0f}%")


def test_workload_stragglers_from_the_reference_runs(workload_runs):
    def slowdowns(coll, nbytes=None, algs=None):
        return [r.slowdown for r in workload_runs[("straggler", coll)].rows
                if (nbytes is None or r.nbytes == nbytes) and (algs is None or r.algorithm.split("=")[1] in algs)]

    allred = slowdowns("allreduce")
    tree = slowdowns("bcast", 1024, ("binomial", "linear", "pipelined_chain", "native"))
    (sa,) = slowdowns("bcast", 1024, ("scatter_allgather",))
    big = slowdowns("bcast", 256 << 10)
    assert max(tree) < 0.1 < 0.9 < min(allred + big + [sa]), "the page says who passes the delay on"
    _says(WL_TITLE, f"every allreduce algorithm passed the whole delay on (slowdown "
                    f"{min(allred):.2f}-{max(allred):.2f}, at 1 KiB and 256 KiB); a 1 KiB broadcast by binomial "
                    f"tree, linear, pipelined chain or the "
                    f"library's own passed almost none of it ({min(tree):.2f}-{max(tree):.2f}: the late leaf's eager "
                    f"message waits for it, nobody else does) while scatter + allgather passed all of it ({sa:.2f}); "
                    f"at 256 KiB (rendezvous: the sender waits for the late receiver) every broadcast passed it on "
                    f"({min(big):.2f}-{max(big):.2f})")


def test_gpt2_prediction_parameters_are_the_stored_fit(models_fit):
    m = re.search(r"`ccbench workload predict ddp -m gpt2 -n (\d+) --alpha (\S+) --beta (\S+)`",
                  _norm(_section(WL_TITLE)))
    pp = models_fit["network"]["pingpong"]
    assert m.group(2) == fmt_time(pp["alpha_s"]).replace(" ", "")
    assert m.group(3) == f"{pp['bandwidth_gbs']:.3g}GB/s"
    _says(WL_TITLE, f"the parameters of the 4-rank ping-pong fit of `reference/models/` (alpha "
                    f"{fmt_time(pp['alpha_s'])}, {pp['bandwidth_gbs']:.3g} GB/s, no gamma)")


def test_tuning_figures_from_the_reference_run(tmp_path):
    import json
    from collections import Counter

    from ccbench.workflow.tune import tune_runs

    (run,) = [p for p in _reference_runs("tuning") if not p.name.endswith("_verify-mpich-json")]
    (ver_dir,) = [p for p in _reference_runs("tuning") if p.name.endswith("_verify-mpich-json")]
    doc = tune_runs([run], "mpich-json", str(tmp_path / "tuning.json"))
    assert all(r.algorithm == "native" for s in doc["selections"] for r in s.ranges), "the file keeps every default"
    from ccbench.analysis.tune import read_json_with_comment

    # the stored file was written with a leading comment, which tune no longer writes: the trees are the same
    assert json.loads(doc["text"]) == read_json_with_comment((run / "tuning.mpich.json").read_text()), \
        "the stored file is what tune writes"
    ver = json.loads((ver_dir / "verification.json").read_text())
    rows = ver["rows"]
    assert Counter(r["verdict"] for r in rows) == {"already best": len(rows)}
    ratios, qs = [r["ratio"] for r in rows], [r["q_value"] for r in rows]
    _says("Tuning the MPI library itself",
          f"Its verification ({ver['launches']} pairs of launches) called all {len(rows)} sizes \"already best\", "
          f"although every size's median was {min(ratios):.2f}-{max(ratios):.2f}x slower with the file "
          f"(q {min(qs):.2f}-{max(qs):.2f}")


# --------------------------------------------------------------------------- the mutation scores


def test_mutation_scores_add_up_and_the_readme_quotes_their_range():
    """docs/mutation.md's table of scores: each score is killed / mutants, every mutant not killed is
    accounted for in the survivors column, and the README gives the range of the scores."""
    text = (REPO / "docs" / "mutation.md").read_text()
    section = text[text.index("## Scores (2026-11-27)"):]
    section = section[:section.index("\n## ", 5)]
    rows = re.findall(r"^\| `(ccbench/[\w/]+\.py)` \| (\d+)/(\d+) \| ([\d.]+)% \| [^|]+ \| ([^|]+) \|$", section, re.M)
    assert len(rows) >= 20, "one row per core module"
    scores = []
    for module, killed, total, pct, survivors in rows:
        k, n = int(killed), int(total)
        assert (REPO / module).is_file(), module
        assert pct == f"{100 * k / n:.1f}", module
        left = sum(int(x) for x in re.findall(r"(\d+) (?:equivalent|not killed|not yet judged)", survivors))
        assert left == n - k, f"{module}: {survivors!r} should account for {n - k} mutants"
        scores.append(100 * k / n)
    readme = _norm((REPO / "README.md").read_text())
    assert _norm(f"the tests kill {min(scores):.1f}-{max(scores):.1f}% of the mutants of each core module") in readme

