"""The Spack recipe and the EasyBuild easyconfig, checked as far as possible without Spack or EasyBuild.

Syntax (both are Python), the fields each tool requires, and agreement with pyproject.toml:
the version, the Python floor, every runtime dependency with its minimum version, the
``report`` extra as a Spack variant; and contrib/release_checksums.py, which writes a
released sdist's version and sha256 into both.
"""

import ast
import hashlib
import importlib.util
import re
import tarfile
import tomllib
from pathlib import Path

import pytest

import ccbench

REPO = Path(__file__).resolve().parents[1]
SPACK = REPO / "contrib" / "spack" / "packages" / "py-ccbench" / "package.py"
EASYCONFIGS = sorted((REPO / "contrib" / "easybuild").glob("ccbench-*.eb"))
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# pyproject name -> Spack package
SPACK_NAMES = {"mpi4py": "py-mpi4py", "numpy": "py-numpy", "click": "py-click", "rich": "py-rich",
               "matplotlib": "py-matplotlib"}


def _calls(tree, name):
    """(positional args, keyword args) of every call of `name` in the class body, as literals."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            out.append(([ast.literal_eval(a) for a in node.args],
                        {k.arg: ast.literal_eval(k.value) for k in node.keywords}))
    return out


def _requirement(spec: str) -> tuple[str, str]:
    m = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)$", spec)
    assert m, f"pyproject dependency {spec!r} is not NAME>=VERSION (the recipes express only that form)"
    return m.group(1), m.group(2)


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def _spack():
    tree = ast.parse(SPACK.read_text(), filename=str(SPACK))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    return tree, cls


def test_spack_recipe_is_a_python_package_with_the_required_fields():
    tree, cls = _spack()
    assert cls.name == "PyCcbench" and [b.id for b in cls.bases] == ["PythonPackage"]
    assert ast.get_docstring(cls)
    attrs = {t.id: ast.literal_eval(n.value) for n in cls.body if isinstance(n, ast.Assign) for t in n.targets}
    assert attrs["homepage"].startswith("https://")
    assert attrs["pypi"] == f"ccbench/ccbench-{ccbench.__version__}.tar.gz"
    assert _calls(cls, "license") == [(["MIT"], {})] and PYPROJECT["project"]["license"] == "MIT"
    tests = [n.name for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert tests and all(ast.get_docstring(n) for n in cls.body if isinstance(n, ast.FunctionDef))


def test_spack_versions_and_checksums():
    _, cls = _spack()
    versions = _calls(cls, "version")
    assert versions and versions[0][0] == [ccbench.__version__]  # newest first, the package's own version
    for _args, kw in versions:
        assert set(kw) == {"sha256"} and re.fullmatch(r"[0-9a-f]{64}", kw["sha256"]) and set(kw["sha256"]) != {"0"}


def test_spack_dependencies_match_pyproject():
    _, cls = _spack()
    deps = {}
    for (spec,), kw in _calls(cls, "depends_on"):
        name, _, version = spec.partition("@")
        deps[name] = (version.rstrip(":"), kw.get("when"), kw.get("type"))
    floor = re.fullmatch(r">=\s*(3\.\d+)", PYPROJECT["project"]["requires-python"]).group(1)
    assert deps["python"][0] == floor and deps["python"][2] == ("build", "run")
    backend = re.fullmatch(r"setuptools>=(\d+)", PYPROJECT["build-system"]["requires"][0]).group(1)
    assert deps["py-setuptools"] == (backend, None, "build")
    for spec in PYPROJECT["project"]["dependencies"]:
        name, minimum = _requirement(spec)
        assert deps[SPACK_NAMES[name]] == (minimum, None, ("build", "run")), name
    (report,) = PYPROJECT["project"]["optional-dependencies"]["report"]
    name, minimum = _requirement(report)
    assert deps[SPACK_NAMES[name]] == (minimum, "+report", ("build", "run"))
    variants = {args[0]: kw for args, kw in _calls(cls, "variant")}
    assert set(variants) == {"report"} and variants["report"]["default"] is False
    assert set(deps) == {"python", "py-setuptools", *(SPACK_NAMES[_requirement(s)[0]] for s in
                                                       PYPROJECT["project"]["dependencies"]), "py-matplotlib"}


def _easyconfig(path: Path) -> dict:
    tree = ast.parse(path.read_text(), filename=str(path))
    assert all(isinstance(n, ast.Assign) for n in tree.body if not isinstance(n, ast.Expr))
    names = {"PYPI_SOURCE": "PYPI_SOURCE", "SOURCE_TAR_GZ": "SOURCE_TAR_GZ"}  # EasyBuild's templates
    scope: dict = {}
    exec(compile(tree, str(path), "exec"), {"__builtins__": {}, **names}, scope)  # assignments of literals only
    return scope


def test_easyconfig_fields_and_version():
    (path,) = EASYCONFIGS
    ec = _easyconfig(path)
    for key in ("easyblock", "name", "version", "homepage", "description", "toolchain", "source_urls", "sources",
                "checksums", "dependencies", "sanity_check_paths", "sanity_check_commands", "moduleclass"):
        assert key in ec, key
    assert ec["easyblock"] == "PythonPackage" and ec["name"] == "ccbench"
    assert ec["version"] == ccbench.__version__
    assert path.name == f"ccbench-{ec['version']}-{ec['toolchain']['name']}-{ec['toolchain']['version']}.eb"
    assert ec["sources"] == ["SOURCE_TAR_GZ"] and ec["source_urls"] == ["PYPI_SOURCE"]
    (digest,) = ec["checksums"]
    assert re.fullmatch(r"[0-9a-f]{64}", digest) and set(digest) != {"0"}
    assert "ccbench --version" in ec["sanity_check_commands"]


def test_easyconfig_dependencies_cover_pyproject():
    (path,) = EASYCONFIGS
    deps = dict(_easyconfig(path)["dependencies"])
    floor = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, deps["Python"].split(".")[:2])) >= tuple(map(int, floor.split(".")))
    # each runtime dependency comes from a module: mpi4py and rich by name, numpy from the
    # SciPy bundle, click from the PyPI bundle (as the easyconfigs of that generation ship them)
    providers = {"mpi4py": "mpi4py", "rich": "rich", "numpy": "SciPy-bundle", "click": "Python-bundle-PyPI"}
    for spec in PYPROJECT["project"]["dependencies"]:
        name, minimum = _requirement(spec)
        assert providers[name] in deps, name
        if name in deps:  # a module of the package itself: its version must satisfy the floor
            have = tuple(map(int, deps[name].split(".")[:2]))
            assert have >= tuple(map(int, _minor(minimum).split("."))), (name, deps[name], minimum)


def _release_checksums():
    spec = importlib.util.spec_from_file_location("release_checksums", REPO / "contrib" / "release_checksums.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_release_checksums_writes_a_new_version_and_its_digest(tmp_path):
    rc = _release_checksums()
    digest = "ab" * 32
    spack = rc.spack_text(SPACK.read_text(), "9.8.7", digest)
    _, cls = (None, [n for n in ast.parse(spack).body if isinstance(n, ast.ClassDef)][0])
    assert _calls(cls, "version")[0] == (["9.8.7"], {"sha256": digest})
    assert len(_calls(cls, "version")) == len(_calls(_spack()[1], "version")) + 1  # older versions kept
    assert 'pypi = "ccbench/ccbench-9.8.7.tar.gz"' in spack
    again = rc.spack_text(spack, "9.8.7", "cd" * 32)  # the same version again: replaced, not added
    assert again.count('version("9.8.7"') == 1 and "cd" * 32 in again
    eb = rc.easyconfig_text(EASYCONFIGS[0].read_text(), "9.8.7", digest)
    assert "version = '9.8.7'" in eb and f"checksums = ['{digest}']" in eb
    ast.parse(spack), ast.parse(eb)


def test_release_checksums_check_and_refusals(tmp_path, capsys):
    rc = _release_checksums()
    sdist = tmp_path / f"ccbench-{ccbench.__version__}.tar.gz"
    with tarfile.open(sdist, "w:gz"):
        pass
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert rc.main(["--check", str(sdist)]) == 1  # the committed recipes hash another file
    out = tmp_path / "out"
    assert rc.main(["--dest", str(out), str(sdist)]) == 0
    assert digest in (out / "spack" / "package.py").read_text()
    assert digest in (out / EASYCONFIGS[0].name).read_text()
    wrong = tmp_path / "ccbench-0.0.1.tar.gz"
    wrong.write_bytes(b"x")
    assert rc.main([str(wrong)]) == 2 and "ccbench/core/version.py says" in capsys.readouterr().err
    assert rc.main([str(tmp_path / "other.tar.gz")]) == 2


@pytest.mark.parametrize("path", [SPACK, *EASYCONFIGS, REPO / "contrib" / "release_checksums.py"])
def test_contrib_files_name_no_machine_paths(path):
    text = path.read_text()
    assert "/home/" not in text and "/tmp/" not in text and "/work/" not in text
