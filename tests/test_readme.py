"""The README keeps its promises: its opening commands are what CI runs, it fits a screen or two, its links lead
to pages that exist, its tour is the site's, and its Python example runs.  Its ``$ ccbench`` examples and any
figure it quotes are checked with the pages' (tests/test_docs.py)."""

import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
README = (REPO / "README.md").read_text()


def _readme_commands() -> list[str]:
    lines = README.splitlines()
    return [ln.strip() for ln in lines if ln.strip().startswith("python3 -m venv")]


def test_ci_runs_the_readme_test_command():
    main_job, tests = _readme_commands()[:2]
    # the main job runs at most one rank per core of the 2-core machines CI and new users start on
    assert "ccbench launch -n 2 " in main_job and "mpich" in main_job
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in ci.splitlines()


def test_the_two_commands_come_first():
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README, re.S | re.M)
    assert [b.strip() for b in blocks[:2]] == _readme_commands()[:2]
    assert README.index(blocks[1]) < README.index("\n## ")  # before any section


def test_the_readme_fits_a_screen_or_two():
    lines = README.splitlines()
    assert len(lines) <= 100, f"README.md has {len(lines)} lines: the manual belongs in docs/"
    assert max(map(len, lines)) <= 130


def test_its_links_lead_to_pages_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert "docs/api.md" in links and "docs/getting-started.md" in links
    for target in links:
        assert not re.match(r"[a-z]+://", target) or target.startswith("https://"), target
        if "://" not in target:
            assert (REPO / target).is_file(), f"README links to {target}, which does not exist"


def _tour(text: str) -> str:
    return re.search(r"^## A ten-line tour\n\n```\n(.*?)^```", text, re.S | re.M).group(1)


def test_the_tour_is_the_sites_and_ten_lines_of_real_commands():
    tour = _tour(README)
    assert tour == _tour((REPO / "docs" / "index.md").read_text())
    lines = tour.splitlines()
    assert len(lines) == 10 and all(ln.startswith("ccbench ") and "  # " in ln for ln in lines)
    from ccbench.cli import cli

    for line in lines:  # every command of the tour exists
        assert line.split()[1] in cli.commands, line


@pytest.fixture
def in_copy(tmp_path, monkeypatch):
    """A working directory holding a copy of tests/data, as the README's example reads it from the checkout."""
    shutil.copytree(DATA, tmp_path / "tests" / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_python_example_runs(in_copy):
    (block,) = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["run"].kind == "sweep" and namespace["fits"].schema == "ccbench.fits/1"
    assert namespace["tables"][0].collective == "allreduce" and namespace["tables"][0].nranks == 4096
    assert namespace["verdicts"][-1].group["collective"] == "all"
    assert namespace["ring"].name == "ring"
    assert sorted(p.name for p in (in_copy / "tests" / "data" / "run-np2").iterdir()) == \
           sorted(p.name for p in (DATA / "run-np2").iterdir())  # the example writes nothing
