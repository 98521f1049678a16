"""gamma per path (numpy / the MPI library's MPI_Reduce_local) and temperature: analysis and presentation."""

import math

import numpy as np
import pytest

from ccbench.analysis.fit import gamma_per_path, network_from_microbenchmarks, reduction_records
from ccbench.measure.gamma import last_level_cache_bytes


def _records(path, temperature, gamma, sizes, overhead=1e-6, seed=0):
    rng = np.random.default_rng(seed)
    return [{"path": path, "temperature": temperature, "dtype": "float32", "op": "sum", "nbytes": n,
             "seconds": list((overhead + gamma * n) * (1 + 0.001 * rng.standard_normal(20)))} for n in sizes]


def test_each_path_and_temperature_gets_its_own_gamma():
    warm, cold = (4096, 65536, 1 << 20), (1 << 20, 16 << 20)
    recs = (_records("numpy", "warm", 3e-11, warm) + _records("mpi", "warm", 1.3e-10, warm)
            + _records("numpy", "cold", 1e-10, cold) + _records("mpi", "cold", 1.8e-10, cold))
    got = {(g["path"], g["temperature"]): g for g in gamma_per_path(recs, n_boot=200)}
    assert set(got) == {("numpy", "warm"), ("mpi", "warm"), ("numpy", "cold"), ("mpi", "cold")}
    for (path, temp), want in {("numpy", "warm"): 3e-11, ("mpi", "warm"): 1.3e-10, ("numpy", "cold"): 1e-10,
                               ("mpi", "cold"): 1.8e-10}.items():
        g = got[(path, temp)]
        assert g["gamma_s_per_byte"] == pytest.approx(want, rel=0.02, abs=0), (path, temp)
        lo, hi = g["gamma_ci_s_per_byte"]
        assert lo <= g["gamma_s_per_byte"] <= hi
        assert g["gbs"] == pytest.approx(1e-9 / g["gamma_s_per_byte"])
    assert got[("numpy", "cold")]["sizes"] == [1 << 20, 16 << 20]


def test_the_network_gamma_is_numpy_warm_whatever_else_is_stored():
    numpy_warm = _records("numpy", "warm", 3e-11, (4096, 65536, 1 << 20))
    old_style = [{k: v for k, v in r.items() if k not in ("path", "temperature")} for r in numpy_warm]
    mixed = numpy_warm + _records("mpi", "warm", 1.3e-10, (4096, 65536, 1 << 20))
    assert reduction_records(mixed) == numpy_warm
    assert reduction_records(old_style) == old_style  # records without a path are numpy's, warm
    assert reduction_records(mixed, "mpi")[0]["path"] == "mpi"
    pp = [{"collective": "pingpong", "algorithm": "native", "nranks": 2, "dtype": "uint8", "op": "sum",
           "nbytes": n, "median_s": 1e-6 + n * 1e-10, "samples_s": None} for n in (8, 64, 512, 4096, 32768)]
    a = network_from_microbenchmarks(pp, reduction_records(mixed), n_boot=100)
    b = network_from_microbenchmarks(pp, old_style, n_boot=100)
    assert a.gamma_s_per_byte == pytest.approx(b.gamma_s_per_byte) == pytest.approx(3e-11, rel=0.02, abs=0)


def test_a_group_that_cannot_be_fitted_says_why():
    (g,) = gamma_per_path([{"path": "mpi", "temperature": "cold", "dtype": "float32", "op": "sum", "nbytes": 1 << 20,
                            "seconds": [1e-4, 1.1e-4]}], n_boot=50)
    assert "error" in g and "gamma_s_per_byte" not in g


def test_reduction_table_shows_both_paths_and_their_ratio():
    from ccbench.present.model_tables import reduction_table

    paths = gamma_per_path(_records("numpy", "warm", 3e-11, (4096, 65536, 1 << 20))
                           + _records("mpi", "warm", 1.2e-10, (4096, 65536, 1 << 20)), n_boot=100)
    t = reduction_table(paths)
    (row,) = t.cells()
    assert row[0] == "float32/sum" and row[1].startswith("warm (4 KiB, 64 KiB, 1 MiB)")
    assert float(row[-1]) == pytest.approx(4.0, rel=0.03)
    assert reduction_table([p for p in paths if p["path"] == "numpy"]) is None


def test_last_level_cache_from_sysfs(tmp_path):
    for i, (level, size) in enumerate([(1, "32K"), (2, "512K"), (3, "32768K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    assert last_level_cache_bytes(tmp_path) == 32 << 20
    assert last_level_cache_bytes(tmp_path / "missing") is None
    assert math.isfinite(float(last_level_cache_bytes() or 0))


@pytest.mark.mpi
def test_reduction_rates_times_both_paths_warm_and_cold_on_every_rank():
    from mpi4py import MPI

    from ccbench.measure.gamma import reduction_rates

    comm = MPI.COMM_WORLD
    recs = reduction_rates(comm, [("float64", "max")], reps=3, warm_sizes=(4096,), cold_sizes=(1 << 16,),
                           llc_bytes=1 << 20)
    assert [(r["path"], r["temperature"], r["nbytes"]) for r in recs] == [
        ("numpy", "warm", 4096), ("numpy", "cold", 1 << 16), ("mpi", "warm", 4096), ("mpi", "cold", 1 << 16)]
    assert all(len(r["seconds"]) == 3 and min(r["seconds"]) > 0 for r in recs)
    # every sample is the maximum over ranks: the same list on every rank
    assert comm.allgather([r["seconds"] for r in recs]) == [[r["seconds"] for r in recs]] * comm.Get_size()


def test_alpha_without_the_harness_floor(tmp_path):
    """`fit_run` reports the run's harness floor and ping-pong's alpha less a zero-byte ping-pong's time; a run
    without ping-pong rows gets the floor but no alpha without it; a run without a floor gets none."""
    import json
    import shutil
    from pathlib import Path

    from ccbench.analysis.runs import fit_run
    from ccbench.present.views import floor_line
    from ccbench.store.run import open_run

    run = tmp_path / "run-np2"
    shutil.copytree(Path(__file__).parent / "data" / "run-np2", run)
    floor = {"empty_s": 5e-7, "zero_count_s": {"allreduce": 3e-6, "pingpong": 2e-6}}
    meta = json.loads((run / "run.json").read_text())
    assert "harness_floor" not in meta  # made before the floor was measured
    assert fit_run(open_run(run), n_boot=50).network.harness_floor is None
    (run / "run.json").write_text(json.dumps({**meta, "harness_floor": floor}, indent=2) + "\n")
    network = fit_run(open_run(run), n_boot=50).network
    got, alpha = network.harness_floor, network.pingpong.alpha_s
    assert got.empty_s == 5e-7 and got.zero_count_s == floor["zero_count_s"]
    assert got.alpha_without_floor_s == pytest.approx(alpha - 2e-6)
    jl = run / "cases.jsonl"  # no ping-pong rows: no ping-pong alpha to take the floor from
    jl.write_text("".join(ln + "\n" for ln in jl.read_text().splitlines()
                          if json.loads(ln)["collective"] != "pingpong"))
    network = fit_run(open_run(run), n_boot=50).network
    assert network.pingpong is None
    assert network.harness_floor.zero_count_s == floor["zero_count_s"]
    assert network.harness_floor.alpha_without_floor_s is None
    line = floor_line(floor)
    assert line.startswith("harness floor: an empty call costs 500 ns") and "allreduce 3 us, pingpong 2 us" in line
    assert floor_line(None) == ""


@pytest.mark.mpi
def test_harness_floor_times_an_empty_call_and_zero_count_calls():
    from mpi4py import MPI

    from ccbench.measure.gamma import harness_floor
    from ccbench.measure.timing import TimingSettings

    comm = MPI.COMM_WORLD
    floor = harness_floor(comm, ["allreduce", "bcast", "barrier"], TimingSettings())
    assert set(floor["zero_count_s"]) == {"allreduce", "bcast", "barrier"}
    assert 0 < floor["empty_s"] and all(v > 0 for v in floor["zero_count_s"].values())
    assert comm.allgather(floor) == [floor] * comm.Get_size()  # every rank holds the same figures


def test_reduction_gammas_give_every_path_and_where_cold_begins():
    from ccbench.analysis.fit import reduction_gammas

    warm, cold = (4096, 65536, 1 << 20), (1 << 20, 16 << 20)
    recs = (_records("numpy", "warm", 3e-11, warm) + _records("mpi", "warm", 1.3e-10, warm)
            + _records("numpy", "cold", 1e-10, cold) + _records("mpi", "cold", 1.8e-10, cold))
    for r in recs:
        if r["temperature"] == "cold":
            r["llc_bytes"] = 16 << 20
    g = reduction_gammas(recs, ranks_per_node=4, n_boot=100)
    assert g["gamma_s_per_byte"] == pytest.approx(3e-11, rel=0.02, abs=0)
    assert g["library_gamma_s_per_byte"] == pytest.approx(1.3e-10, rel=0.02, abs=0)
    assert g["gamma_cold_s_per_byte"] == pytest.approx(1e-10, rel=0.02, abs=0)
    assert g["library_gamma_cold_s_per_byte"] == pytest.approx(1.8e-10, rel=0.02, abs=0)
    assert g["cold_above_bytes"] == 4 << 20  # a 16 MiB cache shared by 4 ranks
    assert "stated by the records" in g["notes"][0]
    # no cache size stated: the documented default; no cold timings: no cold threshold
    for r in recs:
        r.pop("llc_bytes", None)
    assert reduction_gammas(recs, n_boot=50)["cold_above_bytes"] == 32 << 20
    only_warm = reduction_gammas(_records("numpy", "warm", 3e-11, warm), n_boot=50)
    assert only_warm["cold_above_bytes"] is None and only_warm["library_gamma_s_per_byte"] is None
    assert any("numpy's gamma" in n for n in only_warm["notes"])
