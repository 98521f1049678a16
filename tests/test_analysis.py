"""`ccbench fit` and `ccbench predict` on a real stored run (tests/data/run-np2), no MPI; the fastest of a run's
rows decided at the launch level (``ccbench.analysis.fastest``) on synthetic rows with known launch effects.

The run was made on this machine with
``ccbench launch -n 2 -C pingpong,allreduce,bcast -a all -s 8:64K:4 --min-reps 10
--max-reps 100 --budget 0.05 --results-dir tests/data`` and renamed; it is only read
here: every test works on a copy.
"""

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from runfiles import derived, tree_state

from ccbench.algorithms import REGISTRY
from ccbench.analysis.fastest import (
    ONE_LAUNCH,
    Curves,
    fastest_of,
    fastest_per_size,
    launch_variation,
    launches_shared,
)
from ccbench.analysis.fit import NetworkParams
from ccbench.analysis.predict import TwoLevelParams, predict, two_level_allreduce_s
from ccbench.analysis.runs import FITS_SCHEMA, fit_run, predict_table
from ccbench.cli import cli, main
from ccbench.core.replication import variance_components
from ccbench.core.stats import mann_whitney_u, summarize
from ccbench.core.units import fmt_time, parse_inverse_rate, parse_ranks, parse_time
from ccbench.store.launches import pool_launches
from ccbench.store.results import Row
from ccbench.store.run import open_run

RUN = Path(__file__).resolve().parent / "data" / "run-np2"
RAW = ("run.json", "cases.jsonl", "cases.csv")
ENV = {"COLUMNS": "250"}


@pytest.fixture
def run_copy(tmp_path):
    dst = tmp_path / "run-np2"
    shutil.copytree(RUN, dst)
    return dst


def _finite_ci(ci):
    return ci is not None and len(ci) == 2 and all(v is not None and math.isfinite(v) for v in ci)


def _cells(out: str, title: str, size: str) -> list[str]:
    """The cells of the row `size` in the table titled `title` of rich output."""
    block = out.split(title, 1)[1]
    for line in block.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == size:
            return cells
    raise AssertionError(f"no row {size!r} under {title!r}")


def run_main(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


# --------------------------------------------------------------------------- fit


def test_data_run_is_small():
    assert sum(f.stat().st_size for f in RUN.iterdir()) < 300_000
    assert {f.name for f in RUN.iterdir()} == set(RAW)


def test_fit_cli_writes_fits_into_the_derived_tree_and_leaves_the_run_as_it_was(run_copy):
    before = tree_state(run_copy)
    out = derived(run_copy)
    assert out == run_copy.parent.parent / f"{run_copy.parent.name}-derived" / "run-np2"
    res = CliRunner().invoke(cli, ["fit", str(run_copy)], env=ENV)
    assert res.exit_code == 0, res.output
    for heading in ("network parameters", "per-curve fits", "who wins: allreduce",
                    "who wins: bcast", "predicted vs measured"):
        assert heading in res.output
    assert " ".join(res.output.split()).endswith(f"wrote {out / 'fits.json'} and {out / 'fits.csv'}")
    doc = json.loads((out / "fits.json").read_text())
    assert doc["schema"] == FITS_SCHEMA
    assert doc["source_run"] == "run-np2"
    assert doc["source_provenance"]["nranks"] == 2
    curves = doc["curves"]
    # every (collective, algorithm) of the run is fitted, each with its intervals
    assert {(c["collective"], c["algorithm"]) for c in curves} == {
        (r["collective"], r["algorithm"])
        for r in map(json.loads, (run_copy / "cases.jsonl").read_text().splitlines())
    }
    for c in curves:
        assert _finite_ci(c["line"]["alpha_ci_s"]) and _finite_ci(c["line"]["beta_ci_s_per_byte"])
        for s in c["segmented"]["segments"]:
            assert _finite_ci(s["alpha_ci_s"]) and _finite_ci(s["beta_ci_s_per_byte"])
        assert c["line"]["r2"] is not None and c["segmented"]["max_rel_residual"] is not None
    net = doc["network"]
    assert net["pingpong"]["alpha_s"] > 0 and net["joint"]["alpha_s"] > 0
    assert _finite_ci(net["pingpong"]["alpha_ci_s"]) and _finite_ci(net["joint"]["beta_ci_s_per_byte"])
    assert [c["parameter"] for c in net["comparison"]] == ["alpha_s", "beta_s_per_byte", "gamma_s_per_byte"]
    # the default (auto): effective per-path parameters where the run's collective rows identify them
    assert net["used_for_predictions"] == "effective" and net["effective"]
    assert doc["model_checks"] and {w["collective"] for w in doc["who_wins"]} == {"allreduce", "bcast"}
    csv_lines = (out / "fits.csv").read_text().splitlines()
    assert csv_lines[0].startswith("collective,algorithm,nranks")
    assert sum(",line," in ln for ln in csv_lines) == len(curves)
    assert tree_state(run_copy) == before

    first = (out / "fits.json").read_bytes()
    res2 = CliRunner().invoke(cli, ["fit", str(run_copy)], env=ENV)
    assert res2.exit_code == 0, res2.output
    assert (out / "fits-2.json").is_file() and (out / "fits-2.csv").is_file()
    assert (out / "fits.json").read_bytes() == first
    doc2 = json.loads((out / "fits-2.json").read_text())
    assert doc2["curves"] == doc["curves"]  # deterministic: fixed bootstrap seed
    assert tree_state(run_copy) == before
    # --out DIR: there instead, numbered the same way
    res3 = CliRunner().invoke(cli, ["fit", str(run_copy), "--out", str(run_copy.parent / "mine")], env=ENV)
    assert res3.exit_code == 0, res3.output
    assert sorted(p.name for p in (run_copy.parent / "mine").iterdir()) == ["fits.csv", "fits.json"]
    assert tree_state(run_copy) == before


def test_fit_without_pingpong_notes_it_and_uses_the_joint_fit(run_copy):
    jl = run_copy / "cases.jsonl"
    jl.write_text("".join(ln + "\n" for ln in jl.read_text().splitlines()
                          if json.loads(ln)["collective"] != "pingpong"))
    doc = fit_run(open_run(run_copy))
    assert doc.network.pingpong is None
    assert doc.network.used_for_predictions == "effective"  # from the collective rows alone
    assert doc.network.joint is not None
    assert any("no ping-pong rows" in n for n in doc.notes)
    assert doc.model_checks


# --------------------------------------------------------------------------- predict


def test_predict_cli_given_params_matches_library():
    res = CliRunner().invoke(cli, ["predict", "--alpha", "2us", "--beta", "10GB/s", "-n", "64,4096",
                                   "--sizes", "8:64M", "-C", "allreduce"], env=ENV)
    assert res.exit_code == 0, res.output
    assert "given on the command line" in res.output
    params = NetworkParams(2e-6, 1e-10)
    algs = [a for a in REGISTRY["allreduce"].values() if a.cost is not None and a.in_all]  # as -a all takes them
    for P in (64, 4096):
        title = f"predicted allreduce at {P} ranks"
        for n, label in ((8, "8 B"), (64 << 20, "64 MiB")):
            cells = _cells(res.output, title, label)
            times = {a.name: predict(a, P, n, params) for a in algs}
            assert cells[1:-1] == [fmt_time(times[a.name]) for a in algs]
            assert cells[-1] == min(times, key=times.get)
    # a winner on every size row: 24 sizes (8 B .. 64 MiB) x 2 rank counts
    rows = [ln for ln in res.output.splitlines() if ln.startswith("│")]
    assert len(rows) == 48
    assert all(ln.split("│")[-2].strip() in REGISTRY["allreduce"] for ln in rows)


def test_predict_two_level_uses_ring_and_rabenseifner_leaders():
    params = NetworkParams(2e-6, 1e-10, 1e-11)
    two = TwoLevelParams(5e-7, 2.5e-11, 2e-6, 1e-10, 64, 1e-11)
    (tab,) = predict_table(params, [4096], [8, 1 << 20], ["allreduce"], two_level=two)
    assert "two-level/ring" in tab.times_s and "two-level/rabenseifner" in tab.times_s
    assert "two-level/hierarchical" not in tab.times_s
    want = two_level_allreduce_s(REGISTRY["allreduce"]["rabenseifner"], 4096, 1 << 20, two)
    assert tab.times_s["two-level/rabenseifner"][1] == want
    res = CliRunner().invoke(cli, ["predict", "--alpha", "2us", "--beta", "1e-10", "--intra-alpha",
                                   "0.5us", "--intra-beta", "40GB/s", "--ppn", "64", "-n", "4096",
                                   "-s", "8,1M", "-C", "allreduce"], env=ENV)
    assert res.exit_code == 0, res.output
    assert "64 ranks per node" in res.output and "two-level/" in res.output


def test_predict_from_run(run_copy):
    doc = fit_run(open_run(run_copy))
    res = CliRunner().invoke(cli, ["predict", "--from", str(run_copy), "-n", "1024", "-s", "8,1M",
                                   "-C", "allreduce,bcast"], env=ENV)
    assert res.exit_code == 0, res.output
    assert "): effective: " in res.output  # the default: what it chose, first
    res = CliRunner().invoke(cli, ["predict", "--from", str(run_copy), "--params", "pingpong", "-n", "1024",
                                   "-s", "8,1M", "-C", "allreduce,bcast"], env=ENV)
    assert res.exit_code == 0, res.output
    params = doc.network.pingpong
    assert "fitted to run run-np2" in res.output
    assert f"alpha = {fmt_time(params.alpha_s)}" in res.output
    assert f"beta = {params.beta_s_per_byte:.4g} s/B" in res.output
    assert "predicted allreduce at 1024 ranks" in res.output
    assert "predicted bcast at 1024 ranks" in res.output
    cells = _cells(res.output, "predicted bcast at 1024 ranks", "1 MiB")
    assert cells[1] == fmt_time(predict(REGISTRY["bcast"]["binomial"], 1024, 1 << 20, params))
    assert not list(run_copy.glob("fits*"))  # predict writes nothing


def test_parsers():
    assert parse_time("2us") == pytest.approx(2e-6)
    assert parse_time("1.5ms") == pytest.approx(1.5e-3)
    assert parse_time("3e-6") == pytest.approx(3e-6)
    assert parse_inverse_rate("10GB/s") == pytest.approx(1e-10)
    assert parse_inverse_rate("1GiB/s") == pytest.approx(1 / 2**30)
    assert parse_inverse_rate("2e-10") == pytest.approx(2e-10)
    assert parse_ranks("64:1024:4") == [64, 256, 1024]


def _no_pingpong(tmp_path):
    dst = tmp_path / "nopp"
    shutil.copytree(RUN, dst)
    jl = dst / "cases.jsonl"
    jl.write_text("".join(ln + "\n" for ln in jl.read_text().splitlines()
                          if json.loads(ln)["collective"] != "pingpong"))
    return dst


@pytest.mark.parametrize("args,message", [
    (["predict", "-n", "64"], "needs --from RUN, or both --alpha and --beta"),
    (["predict", "--alpha", "2us", "-n", "64"], "needs --from RUN, or both --alpha and --beta"),
    (["predict", "--alpha", "-2us", "--beta", "1e-10", "-n", "64"], "a time must be >= 0"),
    (["predict", "--alpha", "2us", "--beta", "-1e-10", "-n", "64"], "seconds per byte must be >= 0"),
    (["predict", "--alpha", "2us", "--beta", "0GB/s", "-n", "64"], "a rate must be positive"),
    (["predict", "--alpha", "2xs", "--beta", "1e-10", "-n", "64"], "bad --alpha '2xs'"),
    (["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "64", "-C", "allreduc"],
     "unknown collective 'allreduc'"),
    (["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "64", "-C", "pingpong"],
     "has no algorithm with a cost model"),
    (["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "0,64"], "at least 1"),
    (["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "64", "--intra-alpha", "1us", "--ppn", "8"],
     "needs all of --intra-alpha, --intra-beta and --ppn"),
    (["predict", "--alpha", "2us", "--beta", "1e-10", "-n", "64", "--intra-alpha", "1us",
      "--intra-beta", "1e-10", "--ppn", "0"], "--ppn must be at least 1"),
    (["predict", "--from", "NOPP", "--params", "pingpong", "-n", "64"],
     "cannot give pingpong parameters: no ping-pong rows"),
    (["predict", "--from", "NOPP", "--alpha", "2us", "-n", "64"], "either --from RUN or --alpha"),
    (["predict", "--from", "/nonexistent/run", "-n", "64"], "no run at"),
    (["fit", "/nonexistent/run"], "no run at"),
    (["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "4", "--placement", "block"],
     "--placement prices two levels"),
    (["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "4", "--intra-alpha", "2us", "--intra-beta", "1e-10",
      "--ppn", "2", "--acked-from", "256"], "--acked-from goes with --placement"),
    (["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "4", "--intra-alpha", "2us", "--intra-beta", "1e-10",
      "--ppn", "2", "--placement", "block", "--acked-from", "0"], "at least 1 byte"),
    (["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "4", "--intra-alpha", "2us", "--intra-beta", "1e-10",
      "--ppn", "2", "--placement", "0,1,1,3"], "not a permutation"),
    (["predict", "--alpha", "1ms", "--beta", "1e-8", "-n", "6", "--intra-alpha", "2us", "--intra-beta", "1e-10",
      "--ppn", "4", "--placement", "cyclic"], "divisible by --ppn"),
    (["predict", "--against", "x", "--from", "y", "--placement", "cyclic"], "--against takes the rank count"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    if "NOPP" in args:
        args = [str(_no_pingpong(tmp_path)) if a == "NOPP" else a for a in args]
    code, out, err = run_main(args, capsys)
    assert code == 2
    assert message in err
    assert err.strip().count("\n") == 0 and err.startswith("ccbench: error: ")


def test_fit_and_predict_on_a_real_4_rank_run(tmp_path):
    """tests/data/run-np4 (4 ranks on this 2-core machine, pingpong + allreduce + bcast + allgather, every
    algorithm): fit and predict --from complete, and every fitted curve reports its intervals."""
    run = tmp_path / "run-np4"
    shutil.copytree(RUN.parent / "run-np4", run)
    res = CliRunner().invoke(cli, ["fit", str(run)], env=ENV)
    assert res.exit_code == 0, res.output
    doc = json.loads((derived(run) / "fits.json").read_text())
    assert doc["source_provenance"]["nranks"] == 4 and doc["curves"]
    for curve in doc["curves"]:
        for seg in curve["segmented"]["segments"]:
            assert _finite_ci(seg["alpha_ci_s"]), curve["algorithm"]
            low, high = seg["beta_ci_s_per_byte"]
            assert low is not None and high is not None and low <= seg["beta_s_per_byte"] <= high
    assert {c["collective"] for c in doc["curves"]} == {"pingpong", "allreduce", "bcast", "allgather"}
    assert _finite_ci(doc["network"]["pingpong"]["alpha_ci_s"])
    res = CliRunner().invoke(cli, ["predict", "--from", str(run), "-n", "4,4096", "-s", "8,1M"], env=ENV)
    assert res.exit_code == 0, res.output
    for coll in ("allreduce", "bcast", "allgather", "reduce_scatter", "alltoall"):
        assert f"predicted {coll} at 4096 ranks" in res.output


def test_fit_of_a_lab_run_with_an_unfittable_rate_still_writes_strict_json(run_copy, monkeypatch):
    """A lab block whose bandwidth cannot be fitted (NaN) is stored as null, not a crash."""
    import ccbench.analysis.lab_check as check

    meta = json.loads((run_copy / "run.json").read_text())
    meta["lab"] = {"hosts": 2, "delay_s": 5e-4, "rate_bps": 1e9, "baseline": {"alpha_s": 3e-5}}
    (run_copy / "run.json").write_text(json.dumps(meta))
    real = check.fit_link
    monkeypatch.setattr(check, "fit_link",
                        lambda rows, statistic, n_boot: {**real(rows, statistic, n_boot=n_boot), "rate_bps": math.nan})
    from ccbench.workflow.fit import fit

    stored = json.loads(fit(run_copy, n_boot=50).files[0].read_text())
    assert stored["lab"]["fitted"]["rate_bps"] is None and stored["lab"]["rate_error"] is None


# --------------------------------------------------------------------------- fastest, at the launch level

#: Launch effects (multiplicative, CV about 30%) of five launches, and another five drawn independently.
EFFECTS = (1.0, 1.45, 0.72, 1.28, 0.83)
OTHER_EFFECTS = (0.8, 1.3, 1.05, 0.7, 1.5)


def _launch_row(algorithm: str, samples, settings=None) -> Row:
    """A sweep row of one launch with these samples (statistics from ``summarize``)."""
    s = summarize(samples)
    return Row(collective="allreduce", algorithm=algorithm, nbytes=1024, count=256, dtype="float32", op="sum",
               in_place=False, root=0, nranks=4, samples=s.n, min_s=s.min_s, median_s=s.median_s, mean_s=s.mean_s,
               p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s, stddev_s=s.stddev_s, ci_low_s=s.ci_low_s,
               ci_high_s=s.ci_high_s, algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None, bytes_max=None, msgs_total=None,
               bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None, nwrong=0,
               stop_reason="target_rse", sync="barrier", flags=s.flags, settings=dict(settings or {}),
               samples_s=tuple(float(v) for v in samples))


def _pooled(algorithm: str, typical_s: float, effects, seed: int, settings=None, n: int = 30) -> Row:
    """A row of len(effects) launches: launch k's samples are typical_s x effects[k] x (1 + 2% noise)."""
    rng = np.random.default_rng(seed)
    blocks = [(k + 1, _launch_row(algorithm, typical_s * f * (1 + 0.02 * rng.standard_normal(n)), settings))
              for k, f in enumerate(effects)]
    return blocks[0][1] if len(blocks) == 1 else pool_launches(blocks)


def test_fastest_of_finds_a_consistent_difference_over_shared_launches():
    """20% slower in every one of 5 launches the two shared: paired by launch, decided, the interval holds 1.2."""
    a = _pooled("native", 10e-6, EFFECTS, seed=1)
    b = _pooled("ring", 12e-6, EFFECTS, seed=2)
    assert launches_shared(a, b)
    f = fastest_of([b, a])
    assert (f.fastest, f.runner_up) == ("native", "ring")
    assert f.method == "paired by launch, K=5" and f.launches == 5
    assert f.verdict == "faster" and f.significant is True and f.p_value < 0.001
    assert f.ratio_low < 1.2 < f.ratio_high and f.ratio_low > 1.1
    assert f.margin == pytest.approx(b.median_s / a.median_s - 1) and f.margin == pytest.approx(0.2, abs=0.02)


def test_fastest_of_does_not_over_claim_when_the_launch_effect_is_not_shared():
    """The same rows, but the runner-up ran in other jobs (a forced variant): separate launches, noise.

    Pooling the samples would have called it: a Mann-Whitney U test of the pooled samples is
    far below 0.05 (the pseudo-replication the launch-level comparison avoids).
    """
    a = _pooled("native", 10e-6, EFFECTS, seed=1)
    b = _pooled("native:ring", 12e-6, EFFECTS, seed=2, settings={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})
    assert not launches_shared(a, b)
    f = fastest_of([a, b])
    assert f.method == "separate launches, K=5" and f.launches == 5
    assert f.verdict == "noise" and f.significant is False and f.p_value > 0.05
    assert f.ratio_low < 1.0 < f.ratio_high
    assert mann_whitney_u(a.samples_s, b.samples_s)[1] < 0.05
    # launch effects drawn independently for the two: still separate launches, still not claimed
    c = _pooled("native:ring", 12e-6, OTHER_EFFECTS, seed=3, settings={"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"})
    g = fastest_of([a, c])
    assert g.method == "separate launches, K=5" and g.significant is False


def test_fastest_of_with_one_launch_is_undetermined_unless_the_difference_is_huge():
    a = _pooled("native", 10e-6, (1.0,), seed=1)
    near = _pooled("ring", 11e-6, (1.0,), seed=2)
    f = fastest_of([a, near])
    assert f.method == ONE_LAUNCH and f.launches == 1
    assert f.verdict == "undetermined" and f.significant is False
    assert f.margin == pytest.approx(0.1, abs=0.02)
    far = _pooled("ring", 50e-6, (1.0,), seed=2)
    g = fastest_of([far, a])
    assert g.fastest == "native" and g.method == ONE_LAUNCH
    assert g.verdict == "faster" and g.significant is True and g.ratio_low > 1.0


def test_fastest_of_keeps_its_keys_without_a_runner_up_and_skips_failed_rows():
    a = _pooled("native", 10e-6, EFFECTS, seed=1)
    f = fastest_of([a, None])
    assert f.fastest == "native" and f.median_s == a.median_s and f.launches == 5
    for k in ("runner_up", "runner_up_s", "margin", "p_value", "significant", "verdict", "ratio_low", "ratio_high",
              "method"):
        assert getattr(f, k) is None
    wrong = dataclasses.replace(_pooled("ring", 1e-6, EFFECTS, seed=2), nwrong=3)
    assert fastest_of([wrong, a]).fastest == "native" and fastest_of([wrong]) is None


def test_launches_are_shared_only_launch_number_for_launch_number():
    a = _pooled("native", 10e-6, EFFECTS, seed=1)
    b = _pooled("ring", 12e-6, EFFECTS[:4], seed=2)  # launch 5 missing
    assert not launches_shared(a, b)
    f = fastest_of([a, b])
    assert f.method == "separate launches, K=5 and 4" and f.launches == 4


def test_fastest_per_size_compares_each_size_at_the_launch_level():
    rows = [_pooled("native", 10e-6, EFFECTS, seed=1), _pooled("ring", 12e-6, EFFECTS, seed=2)]
    small = [dataclasses.replace(r, nbytes=8, count=2) for r in (_pooled("native", 3e-6, EFFECTS, seed=3),
                                                                   _pooled("ring", 3.03e-6, EFFECTS, seed=4))]
    g = Curves("allreduce", 4, "float32", "sum", False, 0, {"native": [small[0], rows[0]], "ring": [small[1], rows[1]]})
    out = {f.nbytes: f for f in fastest_per_size(g)}
    assert out[1024].verdict == "faster" and out[1024].method == "paired by launch, K=5"
    assert out[8].fastest == "native" and out[8].verdict == "faster"  # the shared launch effect cancels
    assert out[8].ratio_low < 1.01 < out[8].ratio_high  # a 1% difference, 2% noise per sample


def test_fastest_per_size_compares_only_rows_timed_by_one_loop():
    """--loop compiled times native in C while hand-written algorithms run in Python: a size compares the rows of
    the loop most of them share (Python on a tie) and names the others, never the two loops against each other."""
    nat = dataclasses.replace(_pooled("native", 2e-6, EFFECTS, seed=1), loop="compiled")
    ring = _pooled("ring", 9e-6, EFFECTS, seed=2)
    rd = _pooled("recursive_doubling", 8e-6, EFFECTS, seed=3)
    (e,) = fastest_per_size(Curves("allreduce", 4, "float32", "sum", False, 0,
                                   {"native": [nat], "ring": [ring], "recursive_doubling": [rd]}))
    assert (e.fastest, e.runner_up, e.loop, e.other_loop) == ("recursive_doubling", "ring", "python",
                                                                       ("native",))
    (tie,) = fastest_per_size(Curves("allreduce", 4, "float32", "sum", False, 0, {"native": [nat], "ring": [ring]}))
    assert (tie.fastest, tie.runner_up, tie.other_loop) == ("ring", None, ("native",))
    (same,) = fastest_per_size(Curves("allreduce", 4, "float32", "sum", False, 0,
                                      {"native": [dataclasses.replace(nat, loop="python")], "ring": [ring]}))
    assert same.fastest == "native" and same.other_loop == ()


def test_launch_variation_is_the_variance_components_of_the_rows_launches():
    r = _pooled("native", 10e-6, EFFECTS, seed=1)
    vc = launch_variation(r)
    want = variance_components([np.asarray(s) for _, s in r.launch_blocks()])
    assert vc == want and vc.n_launches == 5
    assert vc.between_cv > vc.within_cv and "launch_spread" in r.flags  # 30% between, 2% within
    assert launch_variation(_pooled("native", 10e-6, (1.0,), seed=1)) is None
