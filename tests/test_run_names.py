"""A tag names a run directory: a path separator or a control character gets one clear line, shell
metacharacters stay plain characters of the name."""

import os
import subprocess
import sys

import pytest

from ccbench.core.errors import UsageError
from ccbench.store.results import new_run_dir


@pytest.mark.parametrize(("tag", "said"), [
    ("../../x", "the path separator '/'"),
    ("a/b", "the path separator '/'"),
    ("/etc", "the path separator '/'"),
    ("a\nb", "the control character '\\n'"),
    ("a\tb", "the control character '\\t'"),
    ("a\x00b", "the control character '\\x00'"),
    ("a\x1b[31mb", "the control character '\\x1b'"),
    ("a\x7fb", "the control character '\\x7f'"),
])
def test_a_tag_that_cannot_name_a_directory_is_refused(tag, said, tmp_path):
    with pytest.raises(UsageError) as exc:
        new_run_dir(tmp_path / "results", 2, tag)
    assert str(exc.value) == f"tag {tag!r} cannot name a run directory: it holds {said}"
    assert exc.value.exit_code == 2
    assert not (tmp_path / "results").exists()  # refused before anything is created
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("tag", ["a;b", "$(touch pwned)", "`touch pwned`", "*", "it's \"quoted\"", "a b",
                                 "..", "-rf", "é-ü", "L01-A"])
def test_shell_metacharacters_are_plain_characters_of_the_name(tag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = new_run_dir(tmp_path / "results", 2, tag)
    assert path.parent == tmp_path / "results" and path.name.endswith(f"_np2_{tag}") and path.is_dir()
    assert not (tmp_path / "pwned").exists()


def test_the_command_says_it_in_one_line_and_exits_2(tmp_path):
    res = subprocess.run([sys.executable, "-m", "ccbench", "run", "-C", "barrier", "-s", "8", "--min-reps", "2",
                          "--max-reps", "3", "--results-dir", "res", "--tag", "../../x"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, CCBENCH_LAUNCHED="1"))  # one singleton rank, vouched for
    assert res.returncode == 2
    assert res.stderr == ("ccbench: error: tag '../../x' cannot name a run directory: it holds the path "
                          "separator '/'\n")
    assert [p for p in tmp_path.rglob("*") if not p.is_dir() or p.name != "res"] == []  # nothing written
