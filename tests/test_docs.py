"""The manual stays true and usable.  What it checks:

- every ``$ ccbench ...`` example in a code block of a page (docs/ and the README) is run, in a temporary
  directory holding a copy of ``tests/data`` since some commands write beside the run; each line the page shows
  must be a line of what the command prints, in the same order (a page may leave lines out: "output trimmed");
- the ``pycon`` examples of the pages (the Python API's) run as doctests, in order, one namespace per page;
- the Commands page lists every command of the CLI, and every command it lists exists;
- links between the pages lead to pages and headings that exist; every page is in the site's navigation;
  every figure shown exists;
- the page of measured results (docs/results.md) is what ``benchmarks/results_page.py`` writes from
  ``reference/`` (the check mode: regenerate, diff), and the README's findings are figures of that page.

Measured figures live on that one generated page, so prose can be reworded freely.  The site itself is built by
CI with ``mkdocs build --strict`` (.ci/run); the README's own promises are in tests/test_readme.py.
"""

import difflib
import doctest
import importlib.util
import io
import re
import shlex
import shutil
import unicodedata
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from ccbench.analysis.fastest import fastest_per_size, group_rows
from ccbench.cli import cli
from ccbench.present.kinds import fastest_table
from ccbench.present.report import variant_label
from ccbench.present.table import Column, to_rich
from ccbench.store.run import open_run

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


def _prose(text: str) -> str:
    """A page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


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


# --------------------------------------------------------------------------- the pages' examples


@pytest.fixture
def in_copy(tmp_path, monkeypatch):
    """A working directory holding a copy of tests/data, so that commands may write beside the runs."""
    shutil.copytree(DATA, tmp_path / "tests" / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _report_fastest(run_path: str) -> str:
    """What `ccbench report RUN` prints for a sweep: its fastest-per-size tables (the figures are not needed)."""
    console = Console(file=io.StringIO(), width=int(ENV["COLUMNS"]))
    for g in group_rows(open_run(run_path).rows):
        rows = fastest_per_size(g)
        if rows and any(r.runner_up is not None for r in rows):
            console.print(to_rich(fastest_table(
                f"fastest per size: {variant_label(g)} (runner-up compared at the launch level)", rows,
                Column("size", "size"), lambda r: r.nbytes)))
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
    """Every command `ccbench --help` lists that the CLI itself defines is on the page, and every command the page
    lists is in `ccbench --help` (run kinds that plug-ins add may be documented elsewhere)."""
    listing = re.search(r"^```\n(.*?)^```", PAGES["docs/commands.md"], re.S | re.M).group(1)
    listed = {m.group(1) for m in re.finditer(r"\bccbench (\w+)", listing)}
    in_help = set(cli.list_commands(click.Context(cli)))
    assert listed <= in_help, f"docs/commands.md lists {sorted(listed - in_help)}, which `ccbench --help` does not"
    assert set(cli.commands) <= listed, f"docs/commands.md does not list {sorted(set(cli.commands) - listed)}"


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


# --------------------------------------------------------------------------- figures and links


def test_every_figure_shown_exists_and_every_stored_figure_is_shown():
    shown = {(page, m) for page, text in PAGES.items() for m in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)}
    assert shown, "the pages show the figures of docs/figures"
    for page, target in shown:
        assert page.startswith("docs/"), f"{page} shows a figure; figures live on the site's pages"
        assert (REPO / page).parent.joinpath(target).is_file(), f"{page} shows {target}, which does not exist"
    used = {Path(target).name for _, target in shown}
    assert {p.name for p in (DOCS / "figures").iterdir()} == used, "a figure in docs/figures that no page shows"


def _slug(title: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading: markup dropped, lower case, hyphens."""
    text = re.sub(r"[`*]", "", re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", title))
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _anchors(text: str) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", _prose(text), re.M)}


def test_links_between_pages_lead_to_pages_and_headings_that_exist():
    checked = 0
    for page, text in PAGES.items():
        base = (REPO / page).parent
        for target in re.findall(r"(?<!!)\[[^]]*\]\(([^)\s]+)\)", _prose(text)):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (base / path).resolve() if path else REPO / page
            assert dest.is_file(), f"{page} links to {target}, which does not exist"
            if anchor:
                assert anchor in _anchors(dest.read_text()), f"{page} links to {target}: no such heading"
            checked += 1
    assert checked > 50


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


# --------------------------------------------------------------------------- the results page


def _results_page():
    """benchmarks/results_page.py as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("results_page", REPO / "benchmarks" / "results_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_results_page_is_what_reference_gives(tmp_path):
    """Check mode: the page is regenerated from reference/ into a temporary directory and diffed."""
    module = _results_page()
    assert module.main(["--out", str(tmp_path / "results.md")]) == 0
    fresh, committed = (tmp_path / "results.md").read_text(), (DOCS / "results.md").read_text()
    if fresh != committed:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True),
                                                 "docs/results.md", "from reference/"))[:60])
        pytest.fail(f"docs/results.md is out of date; regenerate it with `{module.REGENERATE}`:\n{diff}")


def test_the_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    module = _results_page()
    stale = tmp_path / "results.md"
    stale.write_text((DOCS / "results.md").read_text().replace("| 2 |", "| 3 |", 1))
    monkeypatch.setattr(module, "PAGE", stale)
    assert module.main(["--check"]) == 1
    assert capsys.readouterr().out.rstrip().endswith(f"regenerate it with `{module.REGENERATE}`")


def _figures(text: str) -> set[str]:
    """The figures of a text: numbers with a decimal point, a range, a percentage or a factor ("0-2.5%", "1.06x")."""
    found = re.findall(r"(?<![\w.])\d+(?:\.\d+)?%?x?(?:-\d+(?:\.\d+)?%?x?)?(?![\w.])", text)
    return {f for f in found if re.search(r"[.%x-]", f)}


def test_the_readmes_findings_are_on_the_results_page():
    """Every figure of the README's "What it found here" is on the results page (the public Fugaku data's, which
    are not this project's measurements, on the models page, recomputed by tests/test_public_dataset.py)."""
    readme = PAGES["README.md"]
    section = readme[readme.index("## What it found here"):readme.index("\n## ", readme.index("## What it found"))]
    figures = _figures(_norm(section))
    assert len(figures) >= 10
    results, models = _figures(PAGES["docs/results.md"]), _figures(PAGES["docs/models.md"])
    missing = {f for f in figures if f not in results and f not in models}
    assert not missing, f"README.md quotes {sorted(missing)}, which docs/results.md does not give"


# --------------------------------------------------------------------------- the mutation scores


def test_mutation_scores_add_up_and_the_readme_quotes_their_range():
    """docs/mutation.md's table of scores: each score is killed / mutants, every mutant not killed is
    accounted for in the survivors column, and the README gives the range of the scores."""
    text = (REPO / "docs" / "mutation.md").read_text()
    section = text[text.index("## Scores ("):]
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

