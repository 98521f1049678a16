"""The Python API: ``ccbench.open_run``, ``fit``, ``network_params``, ``predict``, ``compare``, ``fastest`` and
``ccbench.algorithms.get`` give what the commands compute, and ``import ccbench`` stays light."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ccbench
from ccbench import api
from ccbench.algorithms import REGISTRY
from ccbench.analysis.compare import compare_runs
from ccbench.analysis.fastest import fastest_per_size, fastest_per_variant, group_rows
from ccbench.analysis.runs import fit_run, params_from_run, predict_table
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
HEAVY = ("mpi4py", "rich", "matplotlib", "click")


def _loaded_after(code: str) -> list[str]:
    """The top-level modules among numpy and `HEAVY` that `code` leaves imported in a fresh interpreter."""
    probe = (f"import sys\n{code}\n"
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'numpy', *{HEAVY!r}}}))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().replace("'", '"'))


# -- light imports ---------------------------------------------------------------------------


def test_import_ccbench_loads_neither_numpy_nor_mpi_nor_a_terminal_library():
    assert _loaded_after("import ccbench; ccbench.__version__") == []


def test_the_api_loads_no_mpi_terminal_or_plot_library():
    code = ("import ccbench\nrun = ccbench.open_run('tests/data/run-np2')\nccbench.fit(run)\n"
            "ccbench.predict(run, 64, '8,1M')\nccbench.compare(['tests/data/run-np4', 'tests/data/run-np4-single'])\n"
            "ccbench.fastest('tests/data/wl-ddp-np2')\nccbench.algorithms.get('allreduce', 'ring')")
    assert _loaded_after(code) == ["numpy"]


def test_every_api_name_is_a_package_attribute():
    assert set(ccbench.__all__) == {"__version__", "algorithms", *api.__all__}
    assert len(ccbench.__all__) == len(set(ccbench.__all__))
    for name in api.__all__:
        assert getattr(ccbench, name) is getattr(api, name)
        assert getattr(api, name).__doc__, f"ccbench.{name} has no docstring"
    assert ccbench.algorithms is sys.modules["ccbench.algorithms"]
    assert set(ccbench.__all__) <= set(dir(ccbench))


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'fits'"):
        ccbench.fits  # noqa: B018 -- the access is the test


# -- what the commands compute -----------------------------------------------------------------


def test_open_run_reads_a_stored_run():
    run = ccbench.open_run(DATA / "run-np2")
    assert run.kind == "sweep" and run.meta["nranks"] == 2 and run.path == DATA / "run-np2"
    lines = (DATA / "run-np2" / "cases.jsonl").read_text().splitlines()
    assert [(r.collective, r.algorithm, r.nbytes, r.median_s) for r in run.rows] == \
           [(d["collective"], d["algorithm"], d["nbytes"], d["median_s"]) for d in map(json.loads, lines)]
    assert ccbench.open_run(run) == run  # a Run stands for itself


def test_open_run_refuses_what_is_not_a_run(tmp_path):
    with pytest.raises(UsageError, match="is not a ccbench run"):
        ccbench.open_run(tmp_path)


def test_fit_is_the_commands_fit_and_writes_only_when_asked(tmp_path):
    copy = shutil.copytree(DATA / "run-np2", tmp_path / "run-np2")
    before = sorted(p.name for p in copy.iterdir())
    doc = ccbench.fit(copy)
    assert sorted(p.name for p in copy.iterdir()) == before  # nothing written
    ref = fit_run(open_run(DATA / "run-np2"))
    assert doc.network == ref.network and doc.curves == ref.curves
    assert doc.model_checks == ref.model_checks and doc.who_wins == ref.who_wins
    written = ccbench.fit(ccbench.open_run(copy), write=True)
    assert written.curves == ref.curves
    assert sorted(p.name for p in copy.iterdir()) == before  # the run is only read
    assert sorted(p.name for p in (tmp_path.parent / f"{tmp_path.name}-derived" / "run-np2").iterdir()) == [
        "fits.csv", "fits.json"]
    ccbench.fit(copy, write=True, out=tmp_path / "mine")
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["fits.csv", "fits.json"]
    strict = ccbench.fit(copy, tolerance=0.5)
    assert strict.tolerance == 0.5
    assert sum(c.off for c in strict.model_checks) < sum(c.off for c in doc.model_checks)


def test_network_params_from_a_run_or_given():
    assert ccbench.network_params(DATA / "run-np2") == params_from_run(open_run(DATA / "run-np2"))
    p = ccbench.network_params(alpha="2us", beta="10GB/s", gamma="1GB/s")
    assert math.isclose(p.alpha_s, 2e-6) and math.isclose(p.beta_s_per_byte, 1e-10)
    assert math.isclose(p.gamma_s_per_byte, 1e-9)
    q = ccbench.network_params(alpha=2e-6, beta=1e-10)
    assert (q.alpha_s, q.beta_s_per_byte, q.gamma_s_per_byte) == (2e-6, 1e-10, None)


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"run": DATA / "run-np2", "alpha": "2us"}, "either a run or alpha/beta/gamma"),
    ({"alpha": "2us"}, "need a run, or both alpha and beta"),
    ({"alpha": "fast", "beta": "10GB/s"}, "bad alpha 'fast'"),
    ({"alpha": -1, "beta": "10GB/s"}, "a time must be >= 0"),
    ({"alpha": "2us", "beta": "0GB/s"}, "a rate must be positive"),
])
def test_network_params_refuse_bad_input(kwargs, said):
    with pytest.raises(UsageError, match=said):
        ccbench.network_params(**kwargs)


def test_predict_is_the_commands_table():
    params = ccbench.network_params(alpha="2us", beta="10GB/s")
    got = ccbench.predict(params, "64:256:4", "8,1M", "allreduce,bcast")
    assert got == predict_table(params, [64, 256], [8, 1 << 20], ["allreduce", "bcast"])
    assert ccbench.predict(params, 64, [8, 1 << 20], ["allreduce"]) == got[:1]
    from_run = ccbench.predict(DATA / "run-np2", [4096], "8:64M:64", "allreduce", ranks_per_node=64)
    assert from_run == predict_table(params_from_run(open_run(DATA / "run-np2")), [4096], [8, 512, 32768, 2097152],
                                     ["allreduce"], ranks_per_node=64)
    assert from_run[0].sizes == (8, 512, 32768, 2097152)


def test_predict_with_the_two_level_model():
    params = ccbench.network_params(alpha="2us", beta="10GB/s")
    two = ccbench.TwoLevelParams(0.5e-6, 5e-11, params.alpha_s, params.beta_s_per_byte, 64)
    (tab,) = ccbench.predict(params, 4096, "8,1M", "allreduce", two_level=two)
    assert {"two-level/ring", "two-level/rabenseifner", "hierarchical"} <= set(tab.times_s)


def test_predict_refuses_a_bad_size():
    with pytest.raises(UsageError):
        ccbench.predict(ccbench.network_params(alpha=1e-6, beta=1e-10), 64, "eight")


def test_compare_is_the_commands_comparison():
    runs = [DATA / "run-np4", DATA / "run-np4-single"]
    got, ref = ccbench.compare(runs), compare_runs([open_run(r) for r in runs])
    assert [(p.collective, p.algorithm, p.nbytes, p.ratio, p.verdict) for p in got.pairs] == \
           [(p.collective, p.algorithm, p.nbytes, p.ratio, p.verdict) for p in ref.pairs]
    assert got.summary() == ref.summary() and got.warnings == ref.warnings
    noisy = ccbench.compare([ccbench.open_run(r) for r in runs], min_effect=0.05, launch_cv=0.2)
    assert noisy.min_effect == 0.05 and noisy.launch_cv == 0.2 and noisy.launch_cv_given
    with pytest.raises(UsageError, match="at least two runs"):
        ccbench.compare(runs[:1])


def test_fastest_per_size_of_a_sweep_and_per_variant_of_a_workload():
    rows = ccbench.open_run(DATA / "run-np4").rows
    want = [entry for g in group_rows(rows) for entry in fastest_per_size(g)]
    got = ccbench.fastest(DATA / "run-np4")
    assert got == want and all(e.nranks == 4 for e in got)
    allreduce = [e for e in got if e.collective == "allreduce"]
    assert [e.nbytes for e in allreduce] == [8, 64, 512, 4096, 32768]
    assert allreduce[0].fastest == "native" and allreduce[0].verdict == "undetermined"
    wl = ccbench.fastest(DATA / "wl-ddp-np2")
    assert wl == fastest_per_variant(ccbench.open_run(DATA / "wl-ddp-np2").rows)
    assert wl[0].what == "bucketed 0.5/0.125 MiB" and wl[0].fastest == "allreduce=ring"


def test_errors_are_the_packages_exception_types():
    assert ccbench.UsageError is UsageError and issubclass(ccbench.UsageError, ccbench.CCBenchError)
    assert ccbench.CCBenchError is CCBenchError


# -- one algorithm, by collective and name ------------------------------------------------------


def test_algorithms_get_returns_the_registry_entry():
    ring = ccbench.algorithms.get("allreduce", "ring")
    assert ring is REGISTRY["allreduce"]["ring"]
    assert (ring.collective, ring.name, ring.native) == ("allreduce", "ring", False)
    assert ring.cost(4, 1024).alpha == 6  # 2(P-1) steps
    assert ccbench.algorithms.get("bcast", "native").native


@pytest.mark.parametrize(("collective", "name", "said"), [
    ("allreduce", "rign", "unknown algorithm 'rign' for allreduce; choose from ring, recursive_doubling, "),
    ("allreduse", "ring", "unknown collective 'allreduse'; choose from barrier, pingpong, "),
])
def test_algorithms_get_says_what_exists(collective, name, said):
    with pytest.raises(UsageError) as exc:
        ccbench.algorithms.get(collective, name)
    assert str(exc.value).startswith(said)
    names = str(exc.value).split("choose from ")[1].split(", ")
    assert names == list(REGISTRY[collective] if collective in REGISTRY else REGISTRY)
