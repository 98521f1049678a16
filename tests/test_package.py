"""The package as installed: one version, shipped configs and batch scripts, `ccbench configs` and `ccbench init`."""

import filecmp
import os
import re
import tomllib
from pathlib import Path

import pytest

import ccbench
from ccbench.cli import main
from ccbench.core.errors import UsageError
from ccbench.measure.config import load_config, resolve_config_path, shipped_configs, shipped_dir
from ccbench.measure.workload_config import load_workload_config

REPO = Path(__file__).resolve().parent.parent


def _run(capsys, *args):
    """(exit code, stdout, stderr) of `ccbench ARGS`."""
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


# -- one version, a licence, a changelog --------------------------------------------------


def test_version_is_in_one_place(capsys):
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ccbench.core.version.__version__"}
    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"ccbench, version {ccbench.__version__}"
    assert f"## {ccbench.__version__}" in (REPO / "CHANGELOG.md").read_text()


def test_licence_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the ccbench authors" in text


# -- the shipped copies cannot drift from the checkout's ----------------------------------


@pytest.mark.parametrize("what", ["configs", "slurm"])
def test_shipped_copies_are_identical(what):
    top, shipped = REPO / what, shipped_dir(what)
    names = sorted(p.name for p in top.iterdir() if p.is_file())
    assert names == sorted(p.name for p in shipped.iterdir() if p.is_file()), \
        f"{what}/ and ccbench/data/{what}/ hold different files: copy {what}/* into ccbench/data/{what}/"
    for name in names:
        assert filecmp.cmp(top / name, shipped / name, shallow=False), \
            f"{what}/{name} differs from ccbench/data/{what}/{name}: copy it over"
        assert os.access(top / name, os.X_OK) == os.access(shipped / name, os.X_OK), f"{name}: executable bit"


def test_the_docs_extra_keeps_the_core_install_small():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=\[ ]", d)[0] for d in project["dependencies"]}
    assert core == {"mpi4py", "numpy", "click", "rich"}  # no site generator, no plot library
    assert [re.split(r"[<>=\[ ]", d)[0] for d in project["optional-dependencies"]["docs"]] == ["mkdocs"]
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert packages["include"] == ["ccbench*"]  # the manual (docs/) is not shipped in the wheel


def test_package_data_ships_them():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["ccbench"]
    assert "data/configs/*.toml" in data and "data/slurm/*" in data


# -- a config by name ---------------------------------------------------------------------


def test_bare_name_is_a_shipped_config():
    assert resolve_config_path("quick") == shipped_dir() / "quick.toml"
    assert load_config("quick") == load_config(REPO / "configs" / "quick.toml")
    assert resolve_config_path("workload-ddp", "workload") == shipped_dir() / "workload-ddp.toml"
    assert load_workload_config("ddp", "workload-ddp") == load_workload_config("ddp", REPO / "configs" /
                                                                               "workload-ddp.toml")


def test_path_is_a_path(tmp_path, monkeypatch):
    cfg = tmp_path / "mine.toml"
    cfg.write_text('collectives = "allreduce"\n')
    assert resolve_config_path(str(cfg)) == cfg
    assert load_config(str(cfg)).collectives == ("allreduce",)
    monkeypatch.chdir(REPO)
    assert load_config("configs/quick.toml") == load_config("quick")  # the README's first command
    monkeypatch.chdir(tmp_path)
    assert resolve_config_path("mine.toml") == Path("mine.toml")  # a .toml suffix: a path, even a bare one
    with pytest.raises(UsageError, match="not found"):
        load_config("quick.toml")


def test_unknown_name_lists_the_shipped_ones(capsys):
    with pytest.raises(UsageError, match="no shipped sweep config named 'quik'; shipped: algorithms, default, "
                                         "full, quick"):
        resolve_config_path("quik")
    with pytest.raises(UsageError, match="is a shipped workload config, not a sweep config"):
        load_config("workload-ddp")
    with pytest.raises(UsageError, match="no shipped workload config named 'ddp'; shipped: workload-ddp"):
        load_workload_config("ddp", "ddp")
    code, out, err = _run(capsys, "run", "-c", "quik")
    assert code == 2 and not out and err.count("\n") == 1 and "shipped: algorithms" in err
    code, _, err = _run(capsys, "workload", "ddp", "-c", "nothing")
    assert code == 2 and err.count("\n") == 1 and "workload-ddp" in err


# -- `ccbench configs` and `ccbench init` -------------------------------------------------


def test_configs_lists_names_and_the_first_sentence_of_each(capsys):
    code, out, _ = _run(capsys, "configs")
    assert code == 0
    lines = out.splitlines()
    assert [ln.split()[0] for ln in lines] == list(shipped_configs())
    described = dict(ln.split(None, 1) for ln in lines)
    # a sentence over two comment lines is whole; the next sentence is not shown
    assert described["default"] == ("The everyday sweep: every collective, native and every hand-written algorithm, "
                                    "8 B to 4 MiB, float32 sum, out of place.")
    assert described["full"] == ("Everything: every algorithm, 4 B to 64 MiB, several dtypes, every op, in and out "
                                 "of place, every root.")
    assert all(d.endswith(".") for d in described.values())


def test_init_copies_and_never_overwrites(tmp_path, capsys):
    site = tmp_path / "site"
    code, out, _ = _run(capsys, "init", str(site))
    assert code == 0 and "wrote 12 files" in out
    for what in ("configs", "slurm"):
        assert not filecmp.dircmp(REPO / what, site / what).diff_files
        assert sorted(p.name for p in (site / what).iterdir()) == sorted(p.name for p in (REPO / what).iterdir())
    assert os.access(site / "slurm" / "sweep.sbatch", os.X_OK)
    (site / "configs" / "quick.toml").write_text("# edited by the site\n")
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    (site / "slurm" / "sweep.sbatch").unlink()  # one missing, the others there: still nothing is written
    code, out, err = _run(capsys, "init", str(site))
    assert code == 2 and not out and err.count("\n") == 1 and "already exists" in err and "nothing copied" in err
    assert not (site / "slurm" / "sweep.sbatch").exists()
    assert (site / "configs" / "quick.toml").read_text() == "# edited by the site\n"
    assert all(p.read_bytes() == b for p, b in before.items() if p.exists())


def test_init_refuses_a_file(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    code, _, err = _run(capsys, "init", str(f))
    assert code == 2 and err.count("\n") == 1 and f.read_text() == "x"
