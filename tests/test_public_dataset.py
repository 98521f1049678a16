"""A public dataset: Fugaku allreduce timings (HLC-Lab/bine_trees_fugaku, MIT) imported and fitted.

Pins the conversion (tests/data/public/fugaku_allreduce_p64.csv, written by convert_fugaku.py) and
the fit ccbench makes of it; the figures docs/models.md quotes ("A public dataset: Fugaku") are
recomputed here.  Not a speed test: the timings are a real machine's, fixed in the CSV.
"""

import csv
import math
import statistics
from pathlib import Path

from ccbench.algorithms import REGISTRY
from ccbench.analysis.runs import fit_run
from ccbench.store.imports import import_files
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]
CSV = REPO / "tests" / "data" / "public" / "fugaku_allreduce_p64.csv"
SIZES = {8192, 524288, 4194304, 33554432, 268435456}


def _cost(collective, algorithm, nranks, nbytes, ppn=None):
    alg = REGISTRY[collective].get(algorithm)
    return None if alg is None or alg.cost is None else alg.cost(nranks, nbytes)


def _import(tmp_path):
    run, (parsed,) = import_files([CSV], fmt="csv", results_dir=tmp_path / "res", cost=_cost)
    return run, parsed


def test_every_converted_sample_is_kept(tmp_path):
    with CSV.open() as f:
        src = list(csv.DictReader(f))
    assert len(src) == 72
    assert {(r["algorithm"], int(r["nbytes"])) for r in src} == (
        {("ring", n) for n in SIZES} | {("recursive_doubling", n) for n in SIZES} | {("native", 268435456)})
    assert {(r["nranks"], r["dtype"], r["op"]) for r in src} == {("64", "int32", "sum")}
    run, parsed = _import(tmp_path)
    rows = open_run(run).rows
    assert {(r.algorithm, r.nbytes) for r in rows} == {(r["algorithm"], int(r["nbytes"])) for r in src}
    assert sum(r.samples for r in rows) == len(src)
    for r in rows:  # the registry's algorithms carry model terms, native does not
        assert (r.steps_max is not None) == (r.algorithm != "native")
    ring = next(r for r in rows if r.algorithm == "ring" and r.nbytes == 8192)
    assert (ring.steps_max, ring.step_bytes_max) == (126, 16128)  # 2(P-1) steps of n/P bytes


def test_fit_gives_finite_joint_parameters_and_model_checks(tmp_path):
    run, _ = _import(tmp_path)
    doc = fit_run(open_run(run))
    joint = doc.network.joint
    assert 2.9e-6 < joint.alpha_s < 3.0e-6
    assert math.isfinite(joint.beta_s_per_byte) and joint.beta_s_per_byte > 0
    assert round(1e-9 / joint.beta_s_per_byte, 2) == 3.63  # GB/s, quoted in docs/models.md
    assert joint.gamma_s_per_byte >= 0  # fitted at its bound 0 here
    # no local-reduction timings in the source: no effective parameters
    assert not doc.network.effective
    checks = [c for c in doc.model_checks if c.algorithm in ("ring", "recursive_doubling")]
    assert {(c.algorithm, c.nbytes) for c in checks} == {(a, n) for a in ("ring", "recursive_doubling")
                                                         for n in SIZES}
    big = [c.ratio for c in checks if c.nbytes >= 65536]
    assert all(math.isfinite(x) and x > 0 for x in big)
    assert 0.5 < statistics.median(big) < 2 and 0.5 < min(big) and max(big) < 2
    assert (round(statistics.median(big), 2), round(min(big), 2), round(max(big), 2)) == (1.11, 0.78, 1.81)
