"""native:<alg> variants: the registry, the environment they need, one launch per variant merged,
and a forced algorithm the library refuses recorded as not applicable, never as a timing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.native_variants import (
    MPICH,
    OPENMPI,
    check_environment,
    library_of_launcher,
    library_of_vendor,
    variant_names,
)
from ccbench.core.errors import UsageError
from ccbench.measure.config import load_config, plan
from ccbench.measure.multilaunch import plan_parts
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parent.parent


def test_every_table_entry_is_a_registered_variant_with_its_settings():
    for coll, (stem, algs) in MPICH.items():
        for value, _fn in algs:
            alg = REGISTRY[coll][f"native:{value}"]
            assert alg.native and alg.settings["mpich"] == {f"MPIR_CVAR_{stem}_INTRA_ALGORITHM": value}
            assert callable(alg.fn) and alg.fn.__doc__.startswith("MPI_")
    for coll, (mca, algs) in OPENMPI.items():
        for alg_id, name in algs:
            alg = REGISTRY[coll][f"native:{name}"]
            assert alg.settings["openmpi"] == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
                                               f"OMPI_MCA_coll_tuned_{mca}_algorithm": str(alg_id)}
    # a name both libraries have carries both settings; one only Open MPI has, only its own
    assert set(REGISTRY["allreduce"]["native:ring"].settings) == {"mpich", "openmpi"}
    assert set(REGISTRY["allreduce"]["native:rabenseifner"].settings) == {"openmpi"}
    assert "native:rabenseifner" not in variant_names("allreduce", "mpich")


def test_mpich_function_names_exist_in_the_installed_library():
    """Every internal function named in the MPICH table is one the library's selection knows."""
    maps = subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; "
                           "from mpi4py import MPI; print(MPI.get_vendor()[0]); "
                           "print(next(l.split()[-1] for l in open('/proc/self/maps') if '/libmpi' in l))"],
                          capture_output=True, text=True)
    lines = maps.stdout.split()
    if maps.returncode or not lines or lines[0] != "MPICH":
        pytest.skip("needs the MPICH library")
    data = Path(lines[-1]).read_bytes()
    for _coll, (_stem, algs) in MPICH.items():
        for value, fn in algs:
            assert fn.encode() + b"\0" in data, fn
            assert value.encode() in data, value


def test_library_detection():
    assert library_of_vendor("MPICH") == "mpich" and library_of_vendor("Open MPI") == "openmpi"
    assert library_of_vendor("Intel MPI") is None
    assert library_of_launcher("HYDRA build details:\n    Version: 4.3") == "mpich"
    assert library_of_launcher("mpiexec (Open MPI) 5.0.11") == "openmpi"


def test_all_leaves_variants_out_and_native_all_brings_them_in():
    cfg = load_config(None, {"collectives": "allreduce", "algorithms": "all", "sizes": "64"})
    cases, _ = plan(cfg, 4)
    assert not any(c.algorithm.startswith("native:") for c in cases)
    cfg = load_config(None, {"collectives": "allreduce,bcast", "algorithms": "native,native:all", "sizes": "64"})
    assert "native:ring" in cfg.algorithms and "native:binomial" in cfg.algorithms and "native" in cfg.algorithms
    parts, skipped = plan_parts(cfg, "mpich")
    assert parts[0].label == "unforced" and parts[0].algorithms == ("native",) and parts[0].env == {}
    forced = {(p.collectives, p.algorithms[0]): p.env for p in parts[1:]}
    assert forced[(("allreduce",), "native:ring")] == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert len(forced) == len(variant_names("allreduce", "mpich")) + len(variant_names("bcast", "mpich"))
    assert ("allreduce/native:rabenseifner", "not an algorithm of MPICH") in skipped


def test_a_variant_needs_its_variables_at_mpi_init():
    cfg = load_config(None, {"collectives": "allreduce", "algorithms": "native,native:ring", "sizes": "64"})
    cases, _ = plan(cfg, 2)
    with pytest.raises(UsageError, match="MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring in the environment"):
        check_environment(cases, "mpich", env={})
    keep, skipped = check_environment(cases, "mpich", env={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})
    assert [c.algorithm for c in keep] == ["native", "native:ring"] and not skipped
    keep, skipped = check_environment(cases, None, env={})
    assert [c.algorithm for c in keep] == ["native"] and skipped[0][0] == "allreduce/native:ring"


def _mpiexec() -> str:
    exe = Path(sys.executable).parent / "mpiexec"
    return str(exe) if exe.exists() else "mpiexec"


def test_run_refuses_a_variant_whose_variables_are_not_set(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPIR_CVAR_")}
    r = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "mpi4py", "-m", "ccbench", "run", "-C",
                        "allreduce", "-a", "native:ring", "-s", "64", "--results-dir", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(
        "ccbench: error: allreduce/native:ring needs MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring")
    assert not list(tmp_path.iterdir())


def test_launch_runs_one_launch_per_variant_and_records_refusals(tmp_path):
    """At 4 ranks MPICH refuses reduce_scatter_allgather for 2 elements (8 B of float32): that case is
    recorded as not applicable with the library's reason, the sweep goes on, the rows carry their settings.
    With two launches the parts run round-robin (A B C A B C) and every row holds both launches' samples."""
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "4", "--oversubscribe",
                        "-C", "allreduce", "-a",
                        "native,native:reduce_scatter_allgather,native:ring,native:rabenseifner", "-s", "8,4K",
                        "--launches", "2", "--min-reps", "3", "--max-reps", "10", "--budget", "0.05",
                        "--results-dir", str(tmp_path),
                        "--no-show"], capture_output=True, text=True, timeout=300, cwd=REPO)
    vendor = subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; "
                             "from mpi4py import MPI; print(MPI.get_vendor()[0])"], capture_output=True, text=True)
    if vendor.stdout.strip() != "MPICH":
        pytest.skip("the refusal checked here is MPICH's")
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    opened = open_run(run)
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and len(meta["parts"]) == 6
    assert [(p["launch"], p["settings"]) for p in meta["parts"]] == [
        (k, s) for k in (1, 2) for s in ({}, {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "reduce_scatter_allgather"},
                                        {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})]
    seeds = [p["order_seed"] for p in meta["parts"]]
    assert seeds[:3] == [meta["order_seed"]] * 3 and seeds[3:] == [(meta["order_seed"] + 1) % 2**32] * 3
    assert all(x.launches == (1, 2) and sum(x.launch_samples) == x.samples for x in rows)
    assert all((run / p["dir"] / "run.json").is_file() for p in meta["parts"])
    got = {(x.algorithm, x.nbytes): x.settings for x in rows}
    assert got == {("native", 8): {}, ("native", 4096): {},
                   ("native:ring", 8): {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"},
                   ("native:ring", 4096): {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"},
                   ("native:reduce_scatter_allgather", 4096):
                       {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "reduce_scatter_allgather"}}
    refused = [s for s in meta["skipped"] if s.get("not_applicable")]
    assert [(s["algorithm"], s["nbytes"], s["nranks"]) for s in refused] == [
        ("native:reduce_scatter_allgather", 8, 4)]  # once, though both launches refused it
    assert "not usable for the provided arguments" in refused[0]["why"]
    assert {"what": "allreduce/native:rabenseifner", "why": "not an algorithm of MPICH"} in meta["skipped"]
    csv_head, *csv_rows = (run / "cases.csv").read_text().splitlines()
    assert ",settings,launches,launch_samples,timing," in csv_head
    assert any(",MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring,1;2," in line and ",per-call," in line for line in csv_rows)
    assert json.loads((run / "cases.jsonl").read_text().splitlines()[0])["settings"] == {}


def test_old_rows_without_settings_still_load():
    rows = open_run(REPO / "tests" / "data" / "run-np2").rows
    assert rows and all(r.settings == {} for r in rows)
