"""The README's two opening commands stay true: CI runs the second one verbatim."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    lines = (REPO / "README.md").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip().startswith("python3 -m venv")]


def test_ci_runs_the_readme_test_command():
    main_job, tests = _readme_commands()[:2]
    assert "ccbench launch -n 4" in main_job and "mpich" in main_job
    ci = (REPO / ".ci" / "run").read_text()
    assert tests in ci.splitlines()
