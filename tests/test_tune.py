"""ccbench tune: choice of the fastest variant, crossovers, the three file formats, and
MPICH loading the generated selection file and obeying it."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from runfiles import derived, tree_state, write_run

from ccbench.algorithms.native_variants import MPICH, OPENMPI, OPENMPI_COLL_IDS, mpich_tree_choice
from ccbench.analysis.tune import (
    Range,
    Selection,
    Shape,
    SizeChoice,
    TuningSource,
    crossover_nbytes,
    mpich_json,
    openmpi_json,
    openmpi_rules,
    read_json_with_comment,
    run_shape,
    select,
    size_ranges,
    tuning_choice,
)
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.store.results import Row, RunWriter
from ccbench.store.run import open_run
from ccbench.workflow.tune import tune_runs

REPO = Path(__file__).resolve().parent.parent


#: Launch effects of a replicated synthetic row: three launches within +-3% of each other.
LAUNCH_FACTORS = (0.97, 1.0, 1.03)


def _row(alg, nbytes, median, P=4, coll="allreduce", dtype="float32", op="sum", spread=0.01, launches=1):
    """A row of one sample per launch: one launch (the median itself) or three (LAUNCH_FACTORS x median)."""
    samples = (median,) if launches == 1 else tuple(median * f for f in LAUNCH_FACTORS)
    return Row(collective=coll, algorithm=alg, nbytes=nbytes, count=nbytes // 4, dtype=dtype, op=op,
               in_place=False, root=0, nranks=P, samples=len(samples), min_s=median, median_s=median, mean_s=median,
               p95_s=median, p99_s=median, max_s=median, stddev_s=0.0, ci_low_s=median * (1 - spread),
               ci_high_s=median * (1 + spread), algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None, bytes_max=None,
               msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None, reduced_bytes_max=None,
               nwrong=0, stop_reason="target_rse", sync="barrier", samples_s=samples,
               launches=() if launches == 1 else (1, 2, 3), launch_samples=() if launches == 1 else (1, 1, 1))


def test_crossover_is_where_the_log_log_lines_meet():
    # tA = s, tB = 2 sqrt(s): equal at s = 4; A faster at 1, B faster at 16
    assert crossover_nbytes(1, 1.0, 2.0, 16, 16.0, 8.0) == pytest.approx(4.0)
    # from size 0 the interpolation is linear in size
    assert crossover_nbytes(0, 1.0, 3.0, 10, 3.0, 1.0) == pytest.approx(5.0)


def _choice(n, times):
    order = sorted(times, key=times.get)
    return SizeChoice(n, order[0], times[order[0]], order[1], times[order[1]], None, False, order[0], times)


def test_size_ranges_place_the_boundary_at_the_crossover_and_say_when_coarse():
    a, b = "native:ring", "native:recursive_doubling"
    choices = [_choice(1, {a: 1.0, b: 2.0}), _choice(16, {a: 16.0, b: 8.0}), _choice(32, {a: 32.0, b: 11.3})]
    ranges, notes = size_ranges(choices)
    assert ranges == [Range(1, 3, a), Range(4, None, b)]
    assert any("crossover at about 4 B" in n and "coarse" in n and "16x" in n for n in notes)
    # the later winner refused at the earlier size: it starts exactly where it was measured
    ranges, notes = size_ranges(choices, refused={(b, 1)})
    assert ranges == [Range(1, 15, a), Range(16, None, b)]


def test_coarse_sweeps_place_the_crossover_from_the_alpha_beta_fits():
    """A: 1 us + 1 ns/B, B: 10 us + 0.1 ns/B cross at exactly 10,000 B, inside a 16x gap."""
    sizes = [1000, 2000, 4000, 64000, 128000, 256000]
    rows = [_row("native:ring", n, 1e-6 + 1e-9 * n) for n in sizes]
    rows += [_row("native:recursive_doubling", n, 1e-5 + 1e-10 * n) for n in sizes]
    (sel,) = select(rows, "mpich")
    assert sel.ranges == [Range(1000, 10000, "native:ring"), Range(10001, None, "native:recursive_doubling")]
    assert any("from the alpha-beta fits" in n and "coarse" in n for n in sel.notes)


def test_select_takes_the_fastest_writable_variant_and_the_default_where_it_wins():
    rows = [_row("native", 8, 1.0e-6), _row("native:ring", 8, 2.0e-6), _row("native:recursive_doubling", 8, 1.5e-6),
            _row("native", 1 << 20, 9e-4), _row("native:ring", 1 << 20, 5e-4),
            _row("native:recursive_doubling", 1 << 20, 8e-4),
            _row("native:tree", 1 << 20, 1e-4),  # fastest, but a selection file cannot name it (parameters)
            _row("ring", 1 << 20, 1e-5)]         # hand-written: never a candidate
    rows = [_row(r.algorithm, r.nbytes, r.median_s, launches=3) for r in rows]  # decided at the launch level
    (sel,) = select(rows, "mpich", "run-x")
    assert [c.winner for c in sel.choices] == ["native", "native:ring"]
    assert sel.choices[1].fastest_any == "native:tree" and any("native:tree" in n for n in sel.notes)
    assert sel.ranges[0].algorithm == "native" and sel.ranges[-1] == Range(sel.ranges[-1].lo, None, "native:ring")
    # the same rows for Open MPI: its tuned names differ (rabenseifner, ...), ring exists in both
    (sel,) = select(rows, "openmpi", "run-x")
    assert sel.choices[1].winner == "native:ring"


def _check_csel_level(node: dict, where: str = "") -> None:
    """MPICH's csel.c rules: an `=any` key ends its level; a size/comm-size/count test is
    never the last key of a level (its failure path must exist); containers are leaves."""
    keys = list(node)
    booleans = ("is_", "comm_type=", "comm_hierarchy=", "collective=")
    for i, k in enumerate(keys):
        if k.startswith("algorithm="):
            assert len(keys) == 1, where
            for p in node[k]:
                assert re.fullmatch(r"[a-z_]+=\d+", p), (where, p)
            continue
        if k.endswith("=any"):
            assert i == len(keys) - 1, (where, k)
        elif not k.startswith(booleans):
            assert i < len(keys) - 1, (where, k)
        _check_csel_level(node[k], f"{where}/{k}")


def _sel(coll, P, ranges, choices=None):
    s = Selection(coll, P, "float32", "sum", "run-x", choices or [])
    s.ranges = ranges
    return s


FAKE_DEFAULT = {f"collective={c}": {"comm_type=intra": {"algorithm=MPIR_Default_intra_x": {}},
                                    "comm_type=inter": {"algorithm=MPIR_Default_inter_x": {}}}
                for c in ("bcast", "allreduce", "allgather", "reduce", "reduce_scatter_block", "alltoall",
                          "barrier", "gatherv")}


def test_mpich_json_is_a_complete_valid_tree():
    sels = [_sel("allreduce", 4, [Range(8, 1023, "native:recursive_doubling"), Range(1024, 65535, "native"),
                                  Range(65536, 1 << 20, "native:recexch"), Range((1 << 20) + 1, None, "native:smp")]),
            _sel("allreduce", 8, [Range(8, None, "native:ring")]),
            _sel("alltoall", 4, [Range(64, None, "native:pairwise")])]
    tree = mpich_json(sels, FAKE_DEFAULT)
    assert set(tree) == set(FAKE_DEFAULT)  # every collective of the library's tree stays
    assert tree["collective=gatherv"] == FAKE_DEFAULT["collective=gatherv"]
    _check_csel_level(tree)
    intra = tree["collective=allreduce"]["comm_type=intra"]
    default = FAKE_DEFAULT["collective=allreduce"]["comm_type=intra"]
    assert intra["is_op_built_in=no"] == default and intra["is_commutative=no"] == default
    sizes = intra["count=any"]
    # only the measured rank counts get rules: 4 and 8
    assert list(sizes) == ["comm_size<=3", "comm_size<=4", "comm_size<=7", "comm_size<=8", "comm_size=any"]
    assert sizes["comm_size<=3"] == sizes["comm_size<=7"] == sizes["comm_size=any"] == default
    p4 = sizes["comm_size<=4"]
    assert p4["avg_msg_size<=7"] == default  # below the smallest measured size: the default
    assert p4["avg_msg_size<=1023"] == {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}}
    assert p4["avg_msg_size<=65535"] == default  # where the library's own choice won
    assert p4["avg_msg_size<=1048576"] == {
        "algorithm=MPIR_Allreduce_intra_recexch": {"k=2": {}, "single_phase_recv=0": {}}}
    # smp only where the communicator has a node hierarchy, as MPICH's own tree has it
    assert p4["avg_msg_size=any"] == {"comm_hierarchy=parent": {"algorithm=MPIR_Allreduce_intra_smp": {}},
                                      "comm_hierarchy=any": default}
    # alltoall's avg_msg_size is one block: nbytes / P
    a2a = tree["collective=alltoall"]["comm_type=intra"]["comm_size<=4"]
    assert list(a2a) == ["avg_msg_size<=15", "avg_msg_size=any"]
    assert tree["collective=alltoall"]["comm_type=inter"] == FAKE_DEFAULT["collective=alltoall"]["comm_type=inter"]


def test_mpich_json_gives_the_pipelined_tree_bcast_the_parameters_a_forced_run_used():
    """MPICH's parser leaves a parameter missing from the container unset: every one is written, with the values
    MPICH 5.0.2 reports as its defaults (MPI_T), k last; the topology-costed tree stays unwritten."""
    tree = mpich_json([_sel("bcast", 4, [Range(65536, None, "native:pipelined_tree")])], FAKE_DEFAULT)
    (cnt,) = [v for k, v in tree["collective=bcast"]["comm_type=intra"]["comm_size<=4"].items()
              if k == "avg_msg_size=any"]
    assert cnt == {"algorithm=MPIR_Bcast_intra_pipelined_tree": {
        "tree_type=kary": {}, "is_non_blocking=1": {}, "chunk_size=8192": {}, "recv_pre_posted=0": {}, "k=2": {}}}
    assert list(cnt["algorithm=MPIR_Bcast_intra_pipelined_tree"])[-1] == "k=2"
    assert [s.algorithm for s in select([_row("native", 8, 1e-3, P=4, coll="bcast", launches=3),
                                         _row("native:tree", 8, 1e-4, P=4, coll="bcast", launches=3)],
                                        "mpich")[0].ranges] == ["native"]


def _ompi_numbers(text: str) -> list[int]:
    """The numbers Open MPI's reader sees: '#' to the end of a line is a comment."""
    return [int(t) for line in text.splitlines() for t in line.split("#")[0].split()]


def test_openmpi_classic_rules_follow_the_format():
    sels = [_sel("allreduce", 2, [Range(8, 4095, "native:recursive_doubling"), Range(4096, None, "native:ring")]),
            _sel("allreduce", 8, [Range(0, 99, "native"), Range(100, None, "native:rabenseifner")]),
            _sel("bcast", 4, [Range(8, None, "native:binomial")])]
    text = openmpi_rules(sels, "run run-x (Open MPI v5.0.11, 2 ranks)")
    assert text.startswith("# Open MPI coll/tuned dynamic rules") and "run-x" in text
    nums = iter(_ompi_numbers(text))
    ncoll = next(nums)
    seen = []
    for _ in range(ncoll):
        cid = next(nums)
        coll = {v: k for k, v in OPENMPI_COLL_IDS.items()}[cid]
        ids = {i for i, _ in OPENMPI[coll][1]} | {0}
        sizes = []
        for _ in range(next(nums)):
            sizes.append(next(nums))
            rules = [(next(nums), next(nums), next(nums), next(nums)) for _ in range(next(nums))]
            assert rules[0][0] == 0  # the first rule at message size 0
            assert [r[0] for r in rules] == sorted({r[0] for r in rules})  # ascending, no repeats
            assert all(r[1] in ids and r[2] == 0 and r[3] == 0 for r in rules)
            seen.append((coll, sizes[-1], rules))
        assert sizes == sorted(sizes)
    assert next(nums, None) is None  # nothing after the last rule
    fixed = [(0, 0, 0, 0)]  # rank counts not measured: Open MPI's fixed decision
    assert seen == [("allreduce", 2, [(0, 0, 0, 0), (8, 3, 0, 0), (4096, 4, 0, 0)]), ("allreduce", 3, fixed),
                    ("allreduce", 8, [(0, 0, 0, 0), (100, 6, 0, 0)]), ("allreduce", 9, fixed),
                    ("bcast", 4, [(0, 0, 0, 0), (8, 6, 0, 0)]), ("bcast", 5, fixed)]


def test_openmpi_json_rules():
    sels = [_sel("allreduce", 2, [Range(8, 4095, "native:recursive_doubling"), Range(4096, None, "native:ring")]),
            _sel("allreduce", 8, [Range(0, None, "native:ring")])]
    doc = openmpi_json(sels)
    assert doc["rule_file_version"] == 3 and doc["module"] == "tuned"
    (a, b) = doc["collectives"]["allreduce"]
    assert (a["comm_size_min"], a["comm_size_max"], b["comm_size_min"], b["comm_size_max"]) == (2, 2, 8, 8)
    assert a["rules"] == [{"msg_size_min": 8, "msg_size_max": 4095, "alg": "recursive_doubling"},
                          {"msg_size_min": 4096, "msg_size_max": "inf", "alg": "ring"}]


def _write_run(path: Path, rows, vendor="MPICH 5.0.2", library="MPICH Version:      5.0.2", skipped=(), **meta):
    return write_run(path, rows, mpi_vendor=vendor, mpi_library=library, skipped=list(skipped), **meta)


def test_tune_writes_once_and_refuses_foreign_input(tmp_path):
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6), _row("native:rabenseifner", 64, 3e-6)]
    run = _write_run(tmp_path / "r", rows, vendor="Open MPI 5.0.11", library="Open MPI v5.0.11")
    before = tree_state(run)
    doc = tune_runs([run], "openmpi-rules")
    assert Path(doc.path) == derived(run) / "tuning.openmpi-rules.txt" and "Open MPI v5.0.11" in doc.text
    again = tune_runs([run], "openmpi-rules")  # numbered, never over the first
    assert Path(again.path) == derived(run) / "tuning-2.openmpi-rules.txt" and again.text == doc.text
    with pytest.raises(UsageError, match="never overwritten"):
        tune_runs([run], "openmpi-rules", doc.path)
    assert tree_state(run) == before  # the run is only read
    with pytest.raises(UsageError, match="is for MPICH"):
        tune_runs([run], "mpich-json", str(tmp_path / "x.json"))
    doc = tune_runs([run], "openmpi-json", str(tmp_path / "o.json"))
    side = json.loads((tmp_path / "o.json.source.json").read_text())
    assert side["sources"][0]["run"] == "r" and any("6.0" in n for n in doc.choice.notes)
    plain = _write_run(tmp_path / "p", [_row("native", 64, 2e-6), _row("ring", 64, 1e-6)],
                       vendor="Open MPI 5.0.11", library="Open MPI v5.0.11")
    with pytest.raises(UsageError, match="no measured native:<alg> variants"):
        tune_runs([plain], "openmpi-rules")
    with pytest.raises(UsageError, match="unknown format"):
        tune_runs([run], "slurm")


def _mpich_here() -> bool:
    if shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists():
        return False
    r = subprocess.run([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
                        "print(MPI.get_vendor()[0])"], capture_output=True, text=True)
    return r.stdout.strip() == "MPICH"


#: Prints which allreduce ran, from float32 rounding (ring "0101...", recursive doubling "0000...").
SIGNATURE = Path(__file__).resolve().parent / "openmpi" / "signature.py"


def _signature(tmp_path, env) -> str:
    exe = Path(sys.executable).parent / "mpiexec"
    r = subprocess.run([str(exe) if exe.exists() else "mpiexec", "-n", "4", sys.executable, "-m", "mpi4py",
                        str(SIGNATURE)], env=dict(os.environ, **env), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-1500:]
    return r.stdout.strip()


@pytest.mark.skipif(not _mpich_here(), reason="needs the MPICH library")
def test_mpich_loads_the_generated_file_and_obeys_it(tmp_path):
    """The file parses with MPICH's own loader (MPI_Init does not abort) and changes what runs:
    a file choosing ring at 4 ranks gives ring's rounding, one choosing recursive doubling its."""
    forced = {alg: _signature(tmp_path, {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": alg})
              for alg in ("ring", "recursive_doubling")}
    assert forced["ring"] != forced["recursive_doubling"]  # the probe can tell them apart
    for alg, other in (("ring", "recursive_doubling"), ("recursive_doubling", "ring")):
        rows = [_row(f"native:{alg}", n, 1e-6, launches=3) for n in (8, 256, 4096)]
        rows += [_row(f"native:{other}", n, 2e-6, launches=3) for n in (8, 256, 4096)]
        run = _write_run(tmp_path / f"run-{alg}", rows)
        out = tmp_path / f"{alg}.json"
        r = subprocess.run([sys.executable, "-m", "ccbench", "tune", str(run), "--format", "mpich-json", "-o",
                            str(out)], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())  # plain JSON: where it came from is beside it
        assert f"run-{alg}" in Path(f"{out}.source.json").read_text()
        _check_csel_level(doc)
        fn = dict(MPICH["allreduce"][1])[alg]
        assert f"algorithm={fn}" in json.dumps(doc["collective=allreduce"])
        assert _signature(tmp_path, {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(out)}) == forced[alg]


@pytest.mark.skipif(not _mpich_here(), reason="needs the MPICH library")
def test_tune_verify_end_to_end(tmp_path):
    """launch the variants in 3 launches, tune, --verify: 3 pairs of launches of the default selection,
    without and with the file, alternating, each stored; a verdict per size from the launch-level test."""
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-a",
                        "native,native:ring,native:recursive_doubling", "-s", "64,64K", "--min-reps", "3",
                        "--max-reps", "30", "--budget", "0.05", "--launches", "3", "--results-dir", str(tmp_path),
                        "--no-show"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    r = subprocess.run([sys.executable, "-m", "ccbench", "tune", str(run), "--format", "mpich-json", "--verify"],
                       capture_output=True, text=True, timeout=300, cwd=REPO, env=dict(os.environ, COLUMNS="400"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "verification of" in r.stdout and (derived(run) / "tuning.mpich.json").is_file()
    (check,) = [d for d in tmp_path.iterdir() if d.name.endswith("verify-mpich-json")]
    # in the order they ran (run.json start times tie within a second: sort by launch, then without before with)
    launches = sorted((d for d in check.iterdir() if d.is_dir()),
                      key=lambda d: (d.name.split("_")[-1][:3], d.name.endswith("-with")))
    assert [d.name.split("_")[-1] for d in launches] == ["L01-without", "L01-with", "L02-without", "L02-with",
                                                         "L03-without", "L03-with"]
    starts = [json.loads((d / "run.json").read_text())["start_time"] for d in launches]
    assert starts == sorted(starts)  # A B A B: each launch began no earlier than the one before
    path = str((derived(run) / "tuning.mpich.json").resolve())
    for d in launches:
        meta = json.loads((d / "run.json").read_text())
        assert meta["launch"] == int(d.name.split("_L")[1][:2]) and meta["config"]["launches"] == 3
        assert meta["mpi_env"].get("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE") == (
            path if d.name.endswith("-with") else None)
        assert {json.loads(line)["algorithm"] for line in (d / "cases.jsonl").read_text().splitlines()} == {"native"}
    record = json.loads((check / "verification.json").read_text())
    assert {x["nbytes"] for x in record["rows"]} == {64, 65536} and all(x["pairs"] == 3 for x in record["rows"])
    assert str(check) in r.stdout and "verification.json" in r.stdout


# ------------------------------------------------ the verdict of a verified size, and --verify with fake jobs

def _comparison(ratio=1.0, p=0.5, method="paired-t"):
    from ccbench.core.replication import LaunchComparison

    return LaunchComparison(ratio, ratio, ratio, p, "noise", 3, 3, 2.0, 1.5, method)


def test_verdict_of_each_case_and_its_boundaries():
    from ccbench.analysis.tune import verdict

    c = _comparison
    assert verdict(None, 0.001, True) == "not measured"
    assert verdict(c(0.5), None, True) == "undetermined"
    assert verdict(c(0.5), float("nan"), True) == "undetermined"
    assert verdict(c(0.5), float("inf"), True) == "undetermined"
    assert verdict(c(0.5, method="too few launches"), 0.001, True) == "undetermined"
    assert verdict(c(0.5), 0.049, True) == "moved"
    assert verdict(c(0.5), 0.049, False) == "faster, same selection"
    assert verdict(c(1.01), 0.049, True) == verdict(c(1.01), 0.049, False) == "worse"
    assert verdict(c(1.0), 0.049, True) == "moved"           # "worse" needs a ratio above 1
    assert verdict(c(0.5), 0.05, True) == "did not move"     # q must be below the level
    assert verdict(c(0.5), 0.05, False) == "already best"
    assert verdict(c(0.5), 0.07, True, level=0.1) == "moved"
    assert verdict(c(1.5), 0.07, False, 0.1) == "worse"


def test_decide_sizes_adjusts_the_p_values_of_the_sizes_compared_together():
    from ccbench.analysis.tune import decide_sizes
    from ccbench.core.replication import paired_compare

    a = [np.array([1.0, 1.1, 0.9]), np.array([2.0, 2.2]), np.array([1.5, 1.4, 1.6])]
    b1 = [np.array([0.8, 0.85]), np.array([1.7, 1.6, 1.5]), np.array([1.3, 1.2])]
    b2 = [np.array([1.05, 1.0]), np.array([2.1, 1.9]), np.array([1.45, 1.6])]
    one = [np.array([1.0, 2.0])]
    p1, p2 = paired_compare(a, b1).p_value, paired_compare(a, b2).p_value
    assert p1 < p2 < 1
    pairs = [(a, b1, True), (None, b1, True), (a, None, False), (one, one, True), (a, b2, False)]
    d = decide_sizes(pairs)
    assert [x.q for x in d] == [pytest.approx(min(2 * p1, p2)), None, None, None, pytest.approx(p2)]
    assert [x.comparison is None for x in d] == [False, True, True, False, False]
    assert d[0].comparison.p_value == p1 and d[3].comparison.method == "too few launches"
    assert [x.verdict for x in d] == ["moved" if min(2 * p1, p2) < 0.05 else "did not move", "not measured",
                                         "not measured", "undetermined", "already best"]
    # the level reaches both the comparison (its interval) and the verdict
    b3 = [np.array([0.95, 0.9]), np.array([1.6, 1.8, 1.5]), np.array([1.45, 1.4])]
    ref = paired_compare(a, b3, 0.5)
    assert 0.05 < ref.p_value < 0.5                                       # a verdict only the level decides
    (w,) = decide_sizes([(a, b3, True)], level=0.5)
    assert (w.comparison.ratio_low, w.comparison.ratio_high) == (ref.ratio_low, ref.ratio_high)
    assert w.q == ref.p_value and w.verdict == "moved"
    assert decide_sizes([(a, b3, True)])[0].verdict == "did not move"
    assert decide_sizes([]) == []


def test_check_verify_launches_bounds():
    from ccbench.analysis.tune import check_verify_launches

    assert check_verify_launches(False, None) == 3 and check_verify_launches(True, None) == 3
    assert check_verify_launches(True, 3) == 3 and check_verify_launches(True, 1000) == 1000
    with pytest.raises(UsageError, match=r"^--verify-launches is the number of launches of --verify: give --verify "
                                         r"too$"):
        check_verify_launches(False, 3)
    with pytest.raises(UsageError, match=r"^--verify-launches 2: a verification needs 3 or more pairs of launches "
                                         r"\(launches differ by 15-75%; fewer cannot tell the file's effect from "
                                         r"theirs\)$"):
        check_verify_launches(True, 2)
    with pytest.raises(UsageError, match=r"^--verify-launches 1001: at most 1000$"):
        check_verify_launches(True, 1001)


def test_the_environment_that_makes_the_library_read_the_file(tmp_path, monkeypatch):
    from ccbench.analysis.tune import EXTENSIONS, FORMATS, TuningChoice, TuningFile
    from ccbench.analysis.tune import file_env as _file_env

    monkeypatch.chdir(tmp_path)
    full = str(tmp_path.resolve() / "d" / "f.txt")

    def doc(fmt, *libs):
        sources = tuple(TuningSource(f"r{i}", f"r{i}", x, 4, None, None) for i, x in enumerate(libs))
        return TuningFile(TuningChoice(fmt, FORMATS[fmt], EXTENSIONS[fmt], (), sources), "", False, path="d/f.txt")

    assert _file_env(doc("mpich-json", "MPICH 4.3")) == {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": full}
    ompi = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": full}
    assert _file_env(doc("openmpi-rules", "Open MPI v5.0.11")) == ompi
    assert _file_env(doc("openmpi-json", "Open MPI v6.0.0", None)) == ompi
    with pytest.raises(UsageError, match=r"^cannot verify a JSON rules file with 'Open MPI v5\.0\.11': Open MPI reads "
                                         r"JSON rules from 6\.0 on; use --format openmpi-rules$"):
        _file_env(doc("openmpi-json", "Open MPI v5.0.11"))
    with pytest.raises(UsageError, match=r"with 'Open MPI v6\.0\.0': "):   # any source of an older series
        _file_env(doc("openmpi-json", "Open MPI v6.0.0", "Open MPI 4.1.6"))
    # the series is the major version: 6.1 and 6.2 read JSON rules too (no "1.0" found inside "v6.1.0"),
    # a string naming no version is not refused on a guess
    for lib in ("Open MPI v6.1.0", "Open MPI v6.2.1, package: Open MPI Distribution, ident: 6.2.1", "Open MPI",
                "Open MPI v10.0.1"):
        assert _file_env(doc("openmpi-json", lib)) == ompi
    for lib in ("Open MPI v5.1.0", "Open MPI v3.1.6, package: x", "Open MPI 1.10.7"):
        with pytest.raises(UsageError, match="Open MPI reads JSON rules from 6.0 on"):
            _file_env(doc("openmpi-json", lib))


def _verified(without, with_file):
    """The `verification_rows` row of one size whose file names native:ring, measured by `without` and `with_file`
    (pooled rows of the launches without the file and with it; None: a side not measured)."""
    from ccbench.analysis.tune import verification_rows

    sel = Selection("allreduce", 4, "float32", "sum", "r", [])
    choice = _choice(64, {"native": 1.0, "native:ring": 0.5})
    (row,) = verification_rows([(sel, choice, without, with_file)], ["v"])
    assert row.file_choice == "native:ring" and row.changed and row.verify_dir == "v"
    return row


def test_verification_pairs_the_launches_by_number():
    """Launch k without the file is paired with launch k with it; sides without a launch in common, with a time of
    0 or below, or with a launch without samples are not compared."""
    from ccbench.analysis.tune import decide_sizes

    a = _row("native", 64, 1.0, launches=3)                                  # launches 1, 2, 3: 0.97, 1.0, 1.03
    b = dataclasses.replace(a, samples_s=(2.0, 3.0, 4.0, 5.0), samples=4, launches=(2, 3, 4),
                            launch_samples=(1, 2, 1))
    # launches 2 and 3 of each side, paired: [1.0] with [2.0], [1.03] with [3.0, 4.0]
    (want,) = decide_sizes([([np.array([1.0]), np.array([1.03])], [np.array([2.0]), np.array([3.0, 4.0])], True)])
    got, c = _verified(a, b), want.comparison
    assert got.pairs == 2 and got.ratio == pytest.approx((2.0 / 1.0 * 3.5 / 1.03) ** 0.5)
    assert (got.ratio, got.ratio_low, got.ratio_high, got.p_value, got.q_value, got.verdict) == (
        c.ratio, c.ratio_low, c.ratio_high, c.p_value, want.q, want.verdict)
    assert (got.without_s, got.with_file_s) == (a.median_s, b.median_s)
    not_compared = [
        (None, b), (a, None),
        (a, dataclasses.replace(b, launches=(4, 5, 6))),                     # no launch in common
        (a, dataclasses.replace(b, samples_s=(2.0, 0.0, 4.0, 5.0))),         # a time of 0
        (dataclasses.replace(a, samples_s=(0.97, -1.0, 1.03)), b),
        # a launch without samples
        (a, dataclasses.replace(b, samples_s=(2.0, 4.0, 5.0), samples=3, launch_samples=(1, 0, 2))),
    ]
    for without, with_file in not_compared:
        row = _verified(without, with_file)
        assert (row.pairs, row.ratio, row.ratio_low, row.ratio_high, row.p_value, row.q_value, row.verdict) == (
            0, None, None, None, None, None, "not measured"), (without, with_file)


def test_verification_rows_hold_no_nan_or_infinity(monkeypatch):
    """NaN and infinity of a comparison are written as null (JSON has neither); finite numbers as they are."""
    import ccbench.analysis.tune as tune
    from ccbench.core.replication import LaunchComparison

    a = _row("native", 64, 1.0, launches=3)
    # one launch in common (3): too few to compare, interval and p are NaN
    b = dataclasses.replace(a, samples_s=(2.0, 3.0, 4.0, 5.0), samples=4, launches=(3, 4, 5),
                            launch_samples=(1, 2, 1))
    row = _verified(a, b)
    assert row.ratio == pytest.approx(2.0 / 1.03) and row.pairs == 1 and row.verdict == "undetermined"
    assert (row.ratio_low, row.ratio_high, row.p_value, row.q_value) == (None, None, None, None)
    json.dumps(row.to_dict(), allow_nan=False)
    # infinite ends of the interval; and finite numbers (an int among them) kept as they are
    nan, inf = float("nan"), float("inf")
    for comparison, want in (((1.2, -inf, inf, nan), (1.2, None, None, None)),
                             ((1.5, 0, 1.5, 0.2), (1.5, 0, 1.5, 0.2))):
        monkeypatch.setattr(tune, "paired_compare", lambda a, b, level, _c=comparison: LaunchComparison(
            *_c, "noise", 3, 3, 2.0, 1.5, "paired-t"))
        row = _verified(a, dataclasses.replace(b, launches=(1, 2, 3)))
        assert (row.ratio, row.ratio_low, row.ratio_high, row.p_value) == want
        json.dumps(row.to_dict(), allow_nan=False)


FILE_VAR = "OMPI_MCA_coll_tuned_dynamic_rules_filename"
#: Launch effects of pair k (the same on both sides of a pair); their product is 1.
EFFECTS = (1.0, 1.25, 0.8)


def _job_row(coll, op, nbytes, t, launch=None, alg="native", nwrong=0, in_place=False, root=0):
    samples = (t * 0.99, t, t * 1.01)
    return Row(collective=coll, algorithm=alg, nbytes=nbytes, count=nbytes // 4, dtype="float32", op=op,
               in_place=in_place, root=root, nranks=4, samples=3, min_s=t * 0.99, median_s=t, mean_s=t, p95_s=t,
               p99_s=t, max_s=t, stddev_s=0.0, ci_low_s=t * 0.99, ci_high_s=t * 1.01, algbw_gbs=1.0, busbw_gbs=1.0,
               msgs_max=None, bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None,
               step_bytes_max=None, reduced_bytes_max=None, nwrong=nwrong, stop_reason="target_rse", sync="barrier",
               samples_s=samples, launches=() if launch is None else (launch,),
               launch_samples=() if launch is None else (3,))


class FakeJobs:
    """Stands in for run_job: writes the run a `ccbench run` job would, native's time x EFFECTS[k - 1] x `speedup`
    with the file; sizes in `skip` are not written, sizes in `wrong` compute wrong elements with the file."""

    def __init__(self, tuning, speedup, skip=(), wrong=(), fail_at=None, no_run_at=None, block_record=False):
        self.tuning, self.speedup, self.skip, self.wrong = str(tuning.resolve()), speedup, skip, wrong
        self.fail_at, self.no_run_at, self.block_record = fail_at, no_run_at, block_record
        self.calls = []

    def __call__(self, cmd, env):
        from ccbench.measure.launcher import Job
        from ccbench.store.results import new_run_dir

        self.calls.append((list(cmd), dict(env)))
        arg = {k: cmd[i + 1] for i, k in enumerate(cmd[:-1]) if k.startswith("-")}
        k = int(arg["--launch-index"])
        with_file = env.get(FILE_VAR) == self.tuning
        path = new_run_dir(arg["--results-dir"], int(arg["-n"]), arg["--tag"])
        w = RunWriter(path, {"launch": k})
        for coll in arg["-C"].split(","):
            op = arg["--op"] if coll == "allreduce" else "none"   # a bcast's rows have no operation
            for n in map(int, arg["-s"].split(",")):
                if n in self.skip:
                    continue
                t = 1e-5 * (1 + n / 4096) * EFFECTS[(k - 1) % 3] * (self.speedup.get(n, 1.0) if with_file else 1.0)
                nw = 1 if with_file and n in self.wrong else 0
                # the jobs of a multi-launch run number their rows by launch (launch 2 here); no other kind of
                # row may be pooled with native's: in place, other roots, other algorithms
                w.append(_job_row(coll, op, n, t, launch=k if k == 2 else None, nwrong=nw))
                w.append(_job_row(coll, op, n, 9 * t, in_place=True))
                w.append(_job_row(coll, op, n, 9 * t, root=1))
                w.append(_job_row(coll, op, n, 9 * t, alg="native:ring"))
        w.update(status="complete")
        w.close()
        if self.block_record and len(self.calls) == 6:
            (Path(arg["--results-dir"]) / "verification.json").write_text("{}")
        if self.fail_at == len(self.calls):
            return Job(3, path, True, "exit code 3")
        if self.no_run_at == len(self.calls):
            return Job(0, None, False, "no run written")
        return Job(0, path, False, "exit code 0")


@pytest.fixture
def fake_launcher(monkeypatch):
    """prepare_launcher as found on a machine; the caller's environment already names another rules file."""
    import ccbench.workflow.tune as workflow

    calls = []

    def prepare(*args, **kwargs):
        calls.append((args, kwargs))
        return "mpiexec", "v1", {"PATH": "/usr/bin", FILE_VAR: "/elsewhere/rules.txt"}, ["--bind-to", "core"]

    monkeypatch.setattr(workflow, "prepare_launcher", prepare)
    return calls


SOURCE_CONFIG = {"warmup": 2, "min_reps": 5, "max_reps": 50, "target_rse": 0.02, "budget_s": 0.5, "sync": "barrier",
                 "thread_level": "single", "bind": "none", "order": "sequential", "other": 1}


def _source_run(path, rows, config=SOURCE_CONFIG):
    return write_run(path, rows, nranks=4, config=config)


def test_verify_runs_alternating_launches_and_records_every_size(tmp_path, fake_launcher):
    from ccbench.workflow.tune import verify

    sizes = (64, 4096, 65536, 1 << 20)
    rows = [_row("native", 64, 2e-6, launches=3), _row("native:ring", 64, 1e-6, launches=3)]
    rows += [_row(a, n, t * n / 4096, launches=3) for n in sizes[1:] for a, t in (("native", 1e-5), ("native:ring",
                                                                                                     2e-5))]
    run = _source_run(tmp_path / "src", rows)
    doc = tune_runs([run], "openmpi-rules")
    assert [c.winner for c in doc.choice.selections[0].choices] == ["native:ring", "native", "native", "native"]
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {64: 0.5}, skip=(1 << 20,), wrong=(65536,))
    said = []
    result = verify(doc, tmp_path / "out", say=said.append, launches=3, seed=7, job_runner=jobs)
    assert fake_launcher == [((None, 4, "none"), {})]  # bound as the source run was
    (entry,) = result.runs
    where = Path(entry.dir)
    assert where.parent == tmp_path / "out" and where.name.endswith("_np4_verify-openmpi-rules")
    tuning = str((derived(run) / "tuning.openmpi-rules.txt").resolve())
    base = ["mpiexec", "-n", "4", "--bind-to", "core", sys.executable, "-m", "mpi4py", "-m", "ccbench", "run",
            "-C", "allreduce", "-a", "native", "-s", "64,4096,65536,1048576", "-t", "float32", "--op", "sum",
            "--in-place", "no", "--root", "0", "--warmup", "2", "--min-reps", "5", "--max-reps", "50",
            "--target-rse", "0.02", "--budget", "0.5", "--sync", "barrier", "--thread-level", "single",
            "--launches", "3", "--seed", "7", "--order", "sequential", "--no-show"]
    order = [f"L{k:02d}-{side}" for k in (1, 2, 3) for side in ("without", "with")]
    plain = {"PATH": "/usr/bin"}
    with_env = {"PATH": "/usr/bin", "OMPI_MCA_coll_tuned_use_dynamic_rules": "1", FILE_VAR: tuning}
    assert jobs.calls == [([*base, "--launch-index", tag[2], "--results-dir", str(where), "--tag", tag],
                           with_env if tag.endswith("-with") else plain) for tag in order]
    shown = f"OMPI_MCA_coll_tuned_use_dynamic_rules=1 {FILE_VAR}={tuning} "
    assert said == [f"verify: launch {tag[2]}/3 {tag[4:]} the file: " + (shown if tag.endswith("-with") else "")
                    + " ".join([*base, "--launch-index", tag[2], "--results-dir", str(where), "--tag", tag])
                    for tag in order]
    runs = sorted(p for p in where.iterdir() if p.is_dir())
    assert entry.shape_note is None
    assert entry.to_dict() == {"source": "src", "dir": str(where),
                               "without": [{"launch": k, "run": str(p), "exit_code": 0} for k, p in
                                           zip((1, 2, 3), [p for p in runs if p.name.endswith("-without")],
                                               strict=True)],
                               "with": [{"launch": k, "run": str(p), "exit_code": 0} for k, p in
                                        zip((1, 2, 3), [p for p in runs if p.name.endswith("-with")], strict=True)]}
    moved, best, wrong, missing = result.rows
    common = {"collective": "allreduce", "nranks": 4, "dtype": "float32", "op": "sum", "verify_dir": str(where)}
    assert missing.to_dict() == dict(common, nbytes=1 << 20, file_choice="native", changed=False,
                                     default_before_s=2.56e-3, best="native", best_s=2.56e-3, without_s=None,
                                     with_file_s=None, ratio=None, ratio_low=None, ratio_high=None, p_value=None,
                                     q_value=None, pairs=0, verdict="not measured")
    t64 = 1e-5 * (1 + 64 / 4096)            # the geometric mean of the launches: the effects multiply to 1
    assert moved.to_dict() == dict(common, nbytes=64, file_choice="native:ring", changed=True, default_before_s=2e-6,
                                   best="native:ring", best_s=1e-6, without_s=pytest.approx(t64),
                                   with_file_s=pytest.approx(t64 / 2), ratio=pytest.approx(0.5),
                                   ratio_low=pytest.approx(0.5), ratio_high=pytest.approx(0.5),
                                   p_value=moved.p_value, q_value=moved.q_value, pairs=3, verdict="moved")
    assert moved.p_value < 1e-9 and moved.q_value == pytest.approx(min(1.0, 3 * moved.p_value), abs=1e-12)
    for r, n, t in ((best, 4096, 1e-5), (wrong, 65536, 1.6e-4)):      # the same times with and without the file
        tn = 1e-5 * (1 + n / 4096)
        assert r.to_dict() == dict(common, nbytes=n, file_choice="native", changed=False, default_before_s=t,
                                   best="native", best_s=t, without_s=pytest.approx(tn), with_file_s=pytest.approx(tn),
                                   ratio=1.0, ratio_low=1.0, ratio_high=1.0, p_value=1.0, q_value=1.0, pairs=3,
                                   verdict="already best" if n == 4096 else "wrong results")
    record = where / "verification.json"
    assert result.records == (str(record),)
    expected = {"tuning_file": str(derived(run) / "tuning.openmpi-rules.txt"), "format": "openmpi-rules", "launches": 3,
                "seed": 7, "order": order, "level": 0.05, "runs": [entry.to_dict()],
                "rows": [r.to_dict() for r in result.rows]}
    assert result.to_dict() == expected  # the record holds everything but where it was written
    text = record.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "tuning_file": ')
    assert json.loads(text) == json.loads(json.dumps(expected, default=float))


def test_verify_reads_the_run_s_launch_settings_and_writes_beside_it(tmp_path, fake_launcher):
    """Only bcast (no operation): `--op sum`; settings the run did not record are not passed; no results
    directory given: the verification directory is made beside the source run."""
    from ccbench.workflow.tune import verify

    rows = [_row(a, n, t, coll="bcast", op="none", launches=3) for n in (8, 64)
            for a, t in (("native", 2e-6), ("native:binomial", 1e-6))]
    run = _source_run(tmp_path / "src", rows, config={"watchdog_s": 30})
    doc = tune_runs([run], "openmpi-rules")
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {})
    result = verify(doc, say=lambda line: None, launches=4, seed=11, job_runner=jobs)
    assert fake_launcher[0] == ((None, 4, "auto"), {})
    cmd = jobs.calls[0][0]
    assert cmd[11:31] == ["-C", "bcast", "-a", "native", "-s", "8,64", "-t", "float32", "--op", "sum", "--in-place",
                          "no", "--root", "0", "--watchdog", "30", "--launches", "4", "--seed", "11"]
    assert cmd[31:34] == ["--order", "shuffled", "--no-show"]
    assert len(jobs.calls) == 8 and result.order[-2:] == ("L04-without", "L04-with")
    assert Path(result.runs[0].dir).parent == tmp_path
    assert [r.pairs for r in result.rows] == [4, 4]


def test_verify_at_another_shape_than_the_choices_notes_it_in_the_record(tmp_path, fake_launcher):
    """Choices measured on 2 nodes x 2 ranks, verified by launches on one node: the run's entry says so, after
    its launches, in the record and the result alike; a run at the choices' shape has no note."""
    from ccbench.workflow.tune import verify

    rows = [_row(a, 64, t, launches=3) for a, t in (("native", 2e-6), ("native:ring", 1e-6))]
    run = _source_run(tmp_path / "src", rows)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(meta, nodes=2, ranks_per_node=2)))
    doc = tune_runs([run], "openmpi-rules")
    assert doc.choice.selections[0].shape == Shape(2, 2, True)

    def on(nodes, ppn):
        jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {})

        def runner(cmd, env):
            job = jobs(cmd, env)
            m = json.loads((job.run_dir / "run.json").read_text())
            (job.run_dir / "run.json").write_text(json.dumps(dict(m, nodes=nodes, ranks_per_node=ppn)))
            return job
        return runner

    said = []
    result = verify(doc, tmp_path / "one", say=said.append, seed=1, job_runner=on(1, 4))
    (entry,) = result.runs
    note = ("the file's choices were measured on 2 nodes x 2 ranks; these launches ran on 1 node x 4 ranks, where the "
            "file keeps the library's default")
    assert entry.shape_note == note and said[-1] == f"verify: note: {note}"
    assert list(entry.to_dict()) == ["source", "dir", "without", "with", "shape_note"]
    record = json.loads(Path(result.records[0]).read_text())
    assert record["runs"][0]["shape_note"] == note and record == result.to_dict()
    result = verify(doc, tmp_path / "same", say=lambda line: None, seed=1, job_runner=on(2, 2))
    assert result.runs[0].shape_note is None and "shape_note" not in result.runs[0].to_dict()


def test_verify_stops_at_a_failed_launch_and_when_the_record_exists(tmp_path, fake_launcher, monkeypatch):
    """Three collectives of three dtypes and operations in one run that recorded no settings; no seed given."""
    import secrets

    from ccbench.workflow.tune import verify

    rows = [_row(a, 64, t, launches=3) for a, t in (("native", 2e-6), ("native:ring", 1e-6))]
    rows += [_row(a, 64, t, coll="bcast", dtype="float64", op="none", launches=3)
             for a, t in (("native", 2e-6), ("native:binomial", 1e-6))]
    rows += [_row(a, 64, t, coll="reduce", op="max", launches=3) for a, t in (("native", 2e-6), ("native:binomial",
                                                                                                 1e-6))]
    run = _source_run(tmp_path / "src", rows)
    meta = json.loads((run / "run.json").read_text())
    del meta["config"]
    (run / "run.json").write_text(json.dumps(meta))
    doc = tune_runs([run], "openmpi-rules")
    drawn = []
    monkeypatch.setattr(secrets, "randbelow", lambda n: drawn.append(n) or n - 1)
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {}, fail_at=3)
    with pytest.raises(CCBenchError) as err:
        verify(doc, tmp_path / "a", say=lambda line: None, job_runner=jobs)
    (where,) = (tmp_path / "a").iterdir()
    assert str(err.value) == f"verification launch 2 without the file failed (exit code 3); its runs are in {where}"
    assert len(jobs.calls) == 3 and drawn == [2 ** 32] and fake_launcher[0] == ((None, 4, "auto"), {})
    assert jobs.calls[0][0][11:34] == ["-C", "allreduce,bcast,reduce", "-a", "native", "-s", "64", "-t",
                                       "float32,float64", "--op", "sum,max", "--in-place", "no", "--root", "0",
                                       "--launches", "3", "--seed", str(2 ** 32 - 1), "--order", "shuffled",
                                       "--no-show", "--launch-index", "1"]
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {}, no_run_at=2)
    with pytest.raises(CCBenchError) as err:
        verify(doc, tmp_path / "b", say=lambda line: None, seed=1, job_runner=jobs)
    (where,) = (tmp_path / "b").iterdir()
    assert str(err.value) == f"verification launch 1 with the file failed (no run written); its runs are in {where}"
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {}, block_record=True)
    result = verify(doc, tmp_path / "c", say=lambda line: None, seed=1, job_runner=jobs)
    (where,) = (tmp_path / "c").iterdir()
    assert result.records == (str(where / "verification-2.json"),)  # a file in the way is kept, never replaced
    assert (where / "verification.json").read_text() == "{}" and json.loads((where / "verification-2.json").read_text())
    with pytest.raises(UsageError, match="2: a verification needs 3 or more"):
        verify(doc, tmp_path / "d", launches=2, job_runner=jobs)
    assert not (tmp_path / "d").exists()


def test_verify_on_the_lab_finds_each_launch_s_run_by_its_tag(tmp_path, monkeypatch):
    """A source run measured on the emulated lab is verified there: each job is a `ccbench lab run`, whose own
    launcher records the run, so the outer job learns no directory: the run is found by the job's tag (the newest
    of that tag, not one of another tag beside it); a failed job, or one whose run is not found, stops it."""
    import ccbench.workflow.tune as workflow
    from ccbench.measure.launcher import Job
    from ccbench.workflow.tune import verify

    monkeypatch.setattr(workflow, "prepare_launcher", lambda *a, **k: pytest.fail("the lab starts its own launcher"))
    rows = [_row(a, 64, t, launches=3) for a, t in (("native", 2e-6), ("native:ring", 1e-6))]
    run = _source_run(tmp_path / "src", rows)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(meta, lab={"ppn": 2, "order": "cyclic", "delay_s": 5e-4})))
    doc = tune_runs([run], "openmpi-rules")
    jobs = FakeJobs(derived(run) / "tuning.openmpi-rules.txt", {64: 0.5})

    def lab_jobs(cmd, env):
        arg = {k: cmd[i + 1] for i, k in enumerate(cmd[:-1]) if k.startswith("-")}
        # an older directory of the same tag, without a run in it: the job's run is the newest
        (Path(arg["--results-dir"]) / f"20000101-000000_ccb-h0_np4_{arg['--tag']}").mkdir()
        return dataclasses.replace(jobs(cmd, env), run_dir=None)     # the outer job learns no directory

    result = verify(doc, tmp_path / "out", say=lambda line: None, seed=1, job_runner=lab_jobs)
    cmd = jobs.calls[0][0]
    assert cmd[:15] == [sys.executable, "-m", "ccbench", "lab", "run", "-n", "4", "--ppn", "2", "--order", "cyclic",
                        "--bind", "none", "--", "-C"]
    (entry,) = result.runs
    where = Path(entry.dir)
    for side, launched in (("without", entry.without), ("with", entry.with_file)):
        found = [Path(x.run) for x in launched]
        assert [p.parent for p in found] == [where] * 3
        assert [p.name.split("_")[-1] for p in found] == [f"L{k:02d}-{side}" for k in (1, 2, 3)]
        assert all(not p.name.startswith("20000101-000000_") for p in found)
    (row,) = result.rows
    assert row.pairs == 3 and row.verdict == "moved"
    # a failed job; a job whose run is not found under its tag
    for runner, why in ((lambda c, e: Job(1, None, False, "exit code 1"), "exit code 1"),
                        (lambda c, e: Job(0, None, False, "exit code 0"), "exit code 0")):
        with pytest.raises(CCBenchError, match=rf"^verification launch 1 without the file failed \({why}\)"):
            verify(doc, tmp_path / why.replace(" ", "-"), say=lambda line: None, seed=1, job_runner=runner)


def _open_mpi_run(path, rows, **meta):
    return write_run(path, rows, **{"nranks": 4, **meta})


def test_tune_runs_writes_the_classic_rules_and_returns_what_it_chose(tmp_path):
    rows = [_row("native", 64, 2e-6, launches=3), _row("native:ring", 64, 1e-6, launches=3),
            _row("native", 4096, 1e-5, launches=3), _row("native:ring", 4096, 2e-5, launches=3)]
    run = _open_mpi_run(tmp_path / "r", rows)
    doc = tune_runs([run], "openmpi-rules")
    out = derived(run) / "tuning.openmpi-rules.txt"
    src = "run r (Open MPI v5.0.11, 4 ranks, 2026-01-01T00:00:00)"
    assert doc.path == str(out) and doc.choice.format == "openmpi-rules" and doc.choice.library == "openmpi"
    assert doc.choice.sources == (TuningSource("r", str(run), "Open MPI v5.0.11", 4, "2026-01-01T00:00:00", None),)
    assert doc.choice.sources[0].to_dict() == {"run": "r", "path": str(run), "mpi_library": "Open MPI v5.0.11",
                                               "nranks": 4, "start_time": "2026-01-01T00:00:00", "shape": None}
    assert doc.choice.notes == () and doc.side is False and doc.defaults_from is None
    assert [s.run for s in doc.choice.selections] == ["r"]
    assert [r.algorithm for r in doc.choice.selections[0].ranges] == ["native:ring", "native"]
    assert out.read_text() == doc.text == openmpi_rules(doc.choice.selections, src)
    assert sorted(p.name for p in derived(run).iterdir()) == [out.name]   # no side file
    # the run's own name resolved under the results directory, one output file named by the caller
    doc = tune_runs(["r"], "openmpi-json", str(tmp_path / "sub" / "d" / "o.json"), results_dir=tmp_path)
    side = tmp_path / "sub" / "d" / "o.json.source.json"
    assert side.read_text() == json.dumps({"tuning_file": "o.json", "format": "openmpi-json",
                                           "sources": [s.to_dict() for s in doc.choice.sources]}, indent=2) + "\n"
    assert side.read_text() == json.dumps(doc.to_dict(), indent=2) + "\n"
    with pytest.raises(CCBenchError, match="^a tuning file not written yet has no FILE.source.json$"):
        dataclasses.replace(doc, path=None).to_dict()
    assert doc.choice.notes == ("Open MPI reads JSON rules from 6.0 on; the 5.0.x series reads only the classic format "
                         "(--format openmpi-rules)",)
    assert (tmp_path / "sub" / "d" / "o.json").read_text() == doc.text == json.dumps(
        openmpi_json(doc.choice.selections), indent=2) + "\n"
    (tmp_path / "sub" / "p.json.source.json").write_text("{}")      # the side file alone is never overwritten
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path / 'sub' / 'p.json.source.json'))} exists; "
                                         r"tuning files are never overwritten: give another -o FILE$"):
        tune_runs([run], "openmpi-json", str(tmp_path / "sub" / "p.json"))
    assert not (tmp_path / "sub" / "p.json").exists()
    (tmp_path / "sub" / "gone.txt").symlink_to(tmp_path / "nowhere")     # a dangling link is there too
    with pytest.raises(UsageError, match=rf"^{re.escape(str(tmp_path / 'sub' / 'gone.txt'))} exists; tuning files "
                                         r"are never overwritten: give another -o FILE$"):
        tune_runs([run], "openmpi-rules", str(tmp_path / "sub" / "gone.txt"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=rf"^cannot write {re.escape(str(tmp_path / 'file' / 'd' / 'o.txt'))}: "
                                         r"Not a directory$"):
        tune_runs([run], "openmpi-rules", str(tmp_path / "file" / "d" / "o.txt"))
    with pytest.raises(UsageError, match=rf"^cannot write {re.escape(str(tmp_path / 'file' / 'o.txt'))}: "
                                         rf"{re.escape(str(tmp_path / 'file'))} is not a directory$"):
        tune_runs([run], "openmpi-rules", str(tmp_path / "file" / "o.txt"))    # not "exists; never overwritten"
    assert (tmp_path / "file").read_text() == "x"


def test_tune_runs_refusals_name_the_run(tmp_path):
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6)]
    run = _open_mpi_run(tmp_path / "r", rows)
    with pytest.raises(UsageError, match=r"^unknown format 'slurm'; choose from mpich-json, openmpi-rules, "
                                         r"openmpi-json$"):
        tune_runs([run], "slurm")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(run))} was measured with 'Open MPI v5\.0\.11'; "
                                         r"mpich-json is for MPICH$"):
        tune_runs([run], "mpich-json")
    other = _open_mpi_run(tmp_path / "o", rows, mpi_vendor="MPICH", mpi_library=None)
    with pytest.raises(UsageError, match=rf"^{re.escape(str(other))} was measured with None; openmpi-rules is for "
                                         r"Open MPI$"):
        tune_runs([other], "openmpi-rules")
    plain = _open_mpi_run(tmp_path / "p", [_row("native", 64, 2e-6), _row("ring", 64, 1e-6)])
    with pytest.raises(UsageError, match=rf"^{re.escape(str(plain))} has no measured native:<alg> variants to choose "
                                         r"from; run e\.g\. ccbench launch -n 4 -C allreduce -a native,native:all$"):
        tune_runs([plain], "openmpi-rules")
    twin = _open_mpi_run(tmp_path / "t", rows)
    with pytest.raises(UsageError, match=r"^two runs measure allreduce at 4 ranks; give one run per rank count$"):
        tune_runs([run, twin], "openmpi-rules")
    eight = _open_mpi_run(tmp_path / "e", [_row("native", 64, 2e-6, P=8), _row("native:ring", 64, 1e-6, P=8)],
                          nranks=8)
    doc = tune_runs([run, eight], "openmpi-rules")
    assert [(s.run, s.nranks) for s in doc.choice.selections] == [("r", 4), ("e", 8)]
    assert doc.path == str(derived(run) / "tuning.openmpi-rules.txt")      # the first run's derived tree
    assert doc.text.startswith("# Open MPI coll/tuned dynamic rules written by ccbench tune from run r (Open MPI "
                                  "v5.0.11, 4 ranks, 2026-01-01T00:00:00), run e (Open MPI v5.0.11, 8 ranks, "
                                  "2026-01-01T00:00:00)\n")
    jdoc = tune_runs([eight], "openmpi-json")
    assert jdoc.path == str(derived(eight) / "tuning.openmpi.json")
    assert (derived(eight) / "tuning.openmpi.json.source.json").is_file()
    assert [s.run for s in doc.choice.sources] == ["r", "e"]


def test_tune_runs_mpich_json_keeps_the_library_s_defaults(tmp_path, monkeypatch):
    import ccbench.workflow.tune as tune

    monkeypatch.setattr(tune, "mpich_default_tree", lambda: (FAKE_DEFAULT, "MPICH Version:      4.9"))
    rows = [_row("native", 64, 2e-6, launches=3), _row("native:ring", 64, 1e-6, launches=3)]
    run = _write_run(tmp_path / "m", rows)
    doc = tune_runs([run], "mpich-json")
    assert doc.path == str(derived(run) / "tuning.mpich.json")
    assert doc.choice.notes == ("the default subtrees come from 'MPICH Version:      4.9', the run used "
                         "'MPICH Version:      5.0.2'",) and doc.defaults_from == "MPICH Version: 4.9"
    assert doc.text == json.dumps(mpich_json(doc.choice.selections, FAKE_DEFAULT), indent=1) + "\n"
    side = json.loads(Path(doc.path + ".source.json").read_text())
    assert side == {"tuning_file": "tuning.mpich.json", "format": "mpich-json", "defaults_from": "MPICH Version: 4.9",
                    "sources": [{"run": "m", "path": str(run), "mpi_library": "MPICH Version:      5.0.2",
                                 "nranks": 4, "start_time": "2026-01-01T00:00:00", "shape": None}]}
    monkeypatch.setattr(tune, "mpich_default_tree", lambda: (FAKE_DEFAULT, "MPICH Version:      5.0.2"))
    doc = tune_runs([run], "mpich-json", str(tmp_path / "same.json"))
    assert doc.choice.notes == ()
    assert read_json_with_comment(doc.text) == mpich_json(doc.choice.selections, FAKE_DEFAULT)


def _winners(coll, P, *winners):
    """A selection decided by its per-size winners only (gather, scatter, barrier: one rule for every size)."""
    return _sel(coll, P, [], [SizeChoice(8 << i, w, 1.0, None, None, None, False, w, {w: 1.0})
                              for i, w in enumerate(winners)])


def test_openmpi_classic_rules_text():
    sels = [_sel("bcast", 5, [Range(8, None, "native")]),
            _sel("bcast", 2, [Range(8, None, "native:binomial")]),
            _sel("allreduce", 2, [Range(8, 63, "native:ring"), Range(64, None, "native")]),
            _sel("bcast", 4, [Range(0, 99, "native:binomial"), Range(100, 999, "native:chain"),
                              Range(1000, None, "native:chain")]),
            _winners("gather", 4, "native:binomial", "native:basic_linear", "native:binomial"),
            _winners("scatter", 2, "native:linear_nb"),
            _winners("barrier", 2, "native", "native:tree", "native"),
            _sel("reduce_scatter", 4, [Range(0, None, "native:butterfly")]),
            _sel("alltoallv", 4, [Range(0, None, "native:linear")])]        # no Open MPI rules for it: left out
    fixed = ["1  # number of message sizes", "0 0 0 0  # fixed decision (library default)"]
    assert openmpi_rules(sels, "run x") == "\n".join([
        "# Open MPI coll/tuned dynamic rules written by ccbench tune from run x",
        "# use: OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_dynamic_rules_filename=THIS_FILE",
        "# per rule: message size (bytes), algorithm id, topo fan in/out, segment size",
        "6  # number of collectives",
        "2  # collective id: allreduce", "2  # number of comm sizes",
        "2  # comm size", "3  # number of message sizes", "0 0 0 0  # fixed decision (library default)",
        "8 4 0 0  # ring", "64 0 0 0  # fixed decision (library default)",
        "3  # comm size", *fixed,
        "6  # collective id: barrier", "2  # number of comm sizes",
        "2  # comm size", *fixed,
        "3  # comm size", *fixed,
        "7  # collective id: bcast", "5  # number of comm sizes",
        "2  # comm size", "2  # number of message sizes", "0 0 0 0  # fixed decision (library default)",
        "8 6 0 0  # binomial",
        "3  # comm size", *fixed,
        "4  # comm size", "2  # number of message sizes", "0 6 0 0  # binomial", "100 2 0 0  # chain",
        "5  # comm size", *fixed,
        "6  # comm size", *fixed,
        "9  # collective id: gather", "2  # number of comm sizes",
        "4  # comm size", "1  # number of message sizes", "0 2 0 0  # binomial",
        "5  # comm size", *fixed,
        "13  # collective id: reduce_scatter", "2  # number of comm sizes",
        "4  # comm size", "1  # number of message sizes", "0 4 0 0  # butterfly",
        "5  # comm size", *fixed,
        "15  # collective id: scatter", "2  # number of comm sizes",
        "2  # comm size", "1  # number of message sizes", "0 3 0 0  # linear_nb",
        "3  # comm size", *fixed]) + "\n"
    doc = openmpi_json(sels)
    assert list(doc) == ["rule_file_version", "module", "collectives"]
    assert list(doc["collectives"]) == ["allreduce", "barrier", "bcast", "gather", "reduce_scatter_block", "scatter"]
    assert doc["collectives"] == {
        "allreduce": [{"comm_size_min": 2, "comm_size_max": 2,
                       "rules": [{"msg_size_min": 8, "msg_size_max": 63, "alg": "ring"}]}],
        "barrier": [{"comm_size_min": 2, "comm_size_max": 2, "rules": []}],
        "bcast": [{"comm_size_min": 2, "comm_size_max": 2,
                   "rules": [{"msg_size_min": 8, "msg_size_max": "inf", "alg": "binomial"}]},
                  {"comm_size_min": 4, "comm_size_max": 4,
                   "rules": [{"msg_size_min": 0, "msg_size_max": 99, "alg": "binomial"},
                             {"msg_size_min": 100, "msg_size_max": "inf", "alg": "chain"}]},
                  {"comm_size_min": 5, "comm_size_max": 5, "rules": []}],
        "gather": [{"comm_size_min": 4, "comm_size_max": 4,
                    "rules": [{"msg_size_min": 0, "msg_size_max": "inf", "alg": "binomial"}]}],
        "reduce_scatter_block": [{"comm_size_min": 4, "comm_size_max": 4,
                                  "rules": [{"msg_size_min": 0, "msg_size_max": "inf", "alg": "butterfly"}]}],
        "scatter": [{"comm_size_min": 2, "comm_size_max": 2,
                     "rules": [{"msg_size_min": 0, "msg_size_max": "inf", "alg": "linear_nb"}]}]}


def test_mpich_json_of_barrier_reduce_scatter_and_reduce():
    dflt = {k: v["comm_type=intra"] for k, v in FAKE_DEFAULT.items()}
    tree_in = dict(FAKE_DEFAULT, **{"collective=barrier": {"algorithm=MPIR_Barrier_intra_dissemination": {}}})
    before = json.dumps(tree_in)
    sels = [_winners("barrier", 4, "native:recexch", "native", "native:recexch"),
            _winners("barrier", 2, "native:smp", "native", "native:smp"),
            _winners("barrier", 8, "native", "native:recexch", "native"),   # the default most often: kept
            _sel("allgather", 4, [Range(1, None, "native:ring")]),
            _sel("reduce_scatter", 2, [Range(0, 1023, "native:pairwise"), Range(1024, None, "native")]),
            _sel("reduce", 4, [Range(64, None, "native:reduce_scatter_gather")]),
            _sel("bcast", 4, [Range(64, None, "native:binomial")]),
            _sel("bcast", 3, [Range(64, None, "native:smp")]),
            _sel("alltoall", 4, [Range(2, None, "native:pairwise")]),
            _sel("gather", 4, [Range(0, None, "native:binomial")])]        # MPICH has nothing to tune there
    tree = mpich_json(sels, tree_in)
    assert json.dumps(tree_in) == before                                   # the library's tree is not changed
    bar = tree_in["collective=barrier"]                                    # no comm_type level: it is the default
    assert tree["collective=barrier"] == {"comm_type=intra": {
        "comm_size<=1": bar,
        "comm_size<=2": {"comm_hierarchy=parent": {"algorithm=MPIR_Barrier_intra_smp": {}}, "comm_hierarchy=any": bar},
        "comm_size<=3": bar,
        "comm_size<=4": {"algorithm=MPIR_Barrier_intra_recexch": {"k=2": {}, "single_phase_recv=0": {}}},
        "comm_size<=7": bar, "comm_size<=8": bar, "comm_size=any": bar}}
    rsb = dflt["collective=reduce_scatter_block"]
    assert tree["collective=reduce_scatter_block"] == {
        "comm_type=intra": {"is_commutative=no": rsb, "comm_size<=1": rsb,
                            "comm_size<=2": {"total_msg_size<=1023": {
                                "algorithm=MPIR_Reduce_scatter_block_intra_pairwise": {}},
                                "total_msg_size=any": rsb},
                            "comm_size=any": rsb},
        "comm_type=inter": FAKE_DEFAULT["collective=reduce_scatter_block"]["comm_type=inter"]}
    red = dflt["collective=reduce"]
    assert list(tree["collective=reduce"]["comm_type=intra"]) == ["is_op_built_in=no", "is_commutative=no",
                                                                  "count<pow2", "count=any"]
    assert tree["collective=reduce"]["comm_type=intra"]["count=any"] == {
        "comm_size<=3": red,
        "comm_size<=4": {"avg_msg_size<=63": red,
                         "avg_msg_size=any": {"algorithm=MPIR_Reduce_intra_reduce_scatter_gather": {}}},
        "comm_size=any": red}
    assert all(tree["collective=reduce"]["comm_type=intra"][k] == red
               for k in ("is_op_built_in=no", "is_commutative=no", "count<pow2"))
    bc = dflt["collective=bcast"]
    assert tree["collective=bcast"]["comm_type=intra"] == {
        "comm_size<=2": bc,
        "comm_size<=3": {"avg_msg_size<=63": bc,
                         "avg_msg_size=any": {"comm_hierarchy=parent": {"algorithm=MPIR_Bcast_intra_smp": {}},
                                              "comm_hierarchy=any": bc}},
        "comm_size<=4": {"avg_msg_size<=63": bc, "avg_msg_size=any": {"algorithm=MPIR_Bcast_intra_binomial": {}}},
        "comm_size=any": bc}
    a2a = dflt["collective=alltoall"]
    assert tree["collective=alltoall"]["comm_type=intra"] == {   # a block of 2 B / 4 ranks is 0 B: no rule below
        "is_sendbuf_inplace=yes": a2a, "comm_size<=3": a2a,
        "comm_size<=4": {"avg_msg_size=any": {"algorithm=MPIR_Alltoall_intra_pairwise": {}}}, "comm_size=any": a2a}
    ag = dflt["collective=allgather"]
    assert tree["collective=allgather"]["comm_type=intra"]["comm_size<=4"] == {   # from 1 B: the default below
        "total_msg_size<=0": ag, "total_msg_size=any": {"algorithm=MPIR_Allgather_intra_ring": {}}}
    assert "collective=gather" not in tree and tree["collective=gatherv"] == FAKE_DEFAULT["collective=gatherv"]


def _arrays(median, launches=3):
    return [np.array([median * f]) for f in (LAUNCH_FACTORS if launches == 3 else (1.0,))]


def test_select_notes_every_way_a_size_was_decided():
    """One group of every kind of size: a toss-up kept by the default, a size without native, one-launch
    sizes (the prior), a row without raw samples; rows that never count are left out."""
    from ccbench.core.replication import compare_launches

    R = dataclasses.replace
    fast = _row("native:recursive_doubling", 8, 1e-7, launches=3)       # faster than all, but never a candidate:
    rows = [_row("native", 8, 1e-5, launches=3), _row("native:ring", 8, 0.99e-5, launches=3),
            _row("native:tree", 8, 0.5e-5, launches=3),                   # the fastest, not nameable by MPICH
            _row("native:rabenseifner", 8, 0.6e-5, launches=3),           # Open MPI's only
            R(fast, in_place=True), R(fast, root=1), R(fast, nwrong=1),   # in place, another root, wrong results
            _row("native:recursive_doubling", 8, 1e-7, launches=3, dtype="float64"),   # the dtype measured less
            _row("native:ring", 64, 1e-6, launches=3), _row("native:recursive_doubling", 64, 2e-6, launches=3),
            _row("native", 512, 3e-5), _row("native:ring", 512, 1e-5),
            R(_row("native", 4096, 3e-5), samples_s=(), samples=0), _row("native:ring", 4096, 1e-5, launches=3),
            _row("native", 8, 1e-5, coll="allgather"), _row("ring", 8, 1e-6, coll="allgather"),  # no variant: none
            _row("native", 8, 1e-5, P=8), _row("native:ring", 8, 1e-6, P=8)]
    a, b = select(rows, "mpich", "run-x")
    assert (a.collective, a.nranks, a.dtype, a.op, a.run) == ("allreduce", 4, "float32", "sum", "run-x")
    assert (b.collective, b.nranks) == ("allreduce", 8)
    c8, c64, c512, c4k = a.choices
    cmp8 = compare_launches(_arrays(1e-5), _arrays(0.99e-5))
    assert (c8.nbytes, c8.winner, c8.winner_s, c8.runner_up, c8.runner_up_s, c8.default_s) == (
        8, "native", 1e-5, "native:ring", 0.99e-5, 1e-5)
    assert c8.within_noise and c8.kept_default and not c8.undetermined and c8.fastest_any == "native:tree"
    assert c8.times_s == {"native": 1e-5, "native:ring": 0.99e-5} and c8.launches == {"native": 3, "native:ring": 3}
    assert c8.vs_runner_up == c8.vs_default == cmp8 and c8.challenger == "native:ring" and c8.fastest == "native:ring"
    p512 = compare_launches(_arrays(3e-5, 1), _arrays(1e-5, 1)).p_value
    q512 = min(2 * p512, cmp8.p_value)                                  # Benjamini-Hochberg of the two comparisons
    assert c8.default_q == pytest.approx(cmp8.p_value) and c512.default_q == pytest.approx(q512)
    assert (c64.winner, c64.runner_up, c64.default_s, c64.challenger, c64.vs_default, c64.default_q) == (
        "native:ring", "native:recursive_doubling", None, None, None, None)
    assert c64.vs_runner_up == compare_launches(_arrays(1e-6), _arrays(2e-6)) and not c64.within_noise
    assert (c512.winner, c512.runner_up, c512.within_noise, c512.kept_default) == ("native:ring", "native", False,
                                                                                  False)
    assert c512.vs_runner_up == compare_launches(_arrays(1e-5, 1), _arrays(3e-5, 1))
    assert c512.launches == {"native": 1, "native:ring": 1}
    assert (c4k.winner, c4k.vs_runner_up, c4k.vs_default, c4k.default_q, c4k.within_noise, c4k.kept_default) == (
        "native", None, None, None, True, True)
    assert c4k.undetermined and c4k.fastest == "native:ring"
    # 512 B to 4 KiB: the times do not cross (ring 3x faster at both): half-way in log size, 512 x sqrt(8)
    assert a.ranges == [Range(8, 63, "native"), Range(64, 1448, "native:ring"), Range(1449, None, "native")]
    prior = compare_launches(_arrays(1e-5, 1), _arrays(3e-5, 1)).resolvable_ratio
    assert a.notes == [
        "not written into a MPICH file (it cannot name them): native:rabenseifner, native:tree",
        "native -> native:ring between 8 B and 64 B: not measured (or refused) on both sides: switch at the first "
        "size measured (coarse: sizes 8 B and 64 B are 8x apart; measure in between to confirm)",
        "native:ring -> native between 512 B and 4 KiB: crossover at about 1.42 KiB from interpolation (coarse: "
        "sizes 512 B and 4 KiB are 8x apart; measure in between to confirm)",
        "toss-up at 8 B, 4 KiB (undetermined): the choice is not decidedly faster than the runner-up at the launch "
        "level (the 95% interval of their ratio includes 1)",
        f"the default stays at 8 B (native:ring 1.01x faster, q {cmp8.p_value:.2g}), 4 KiB: no variant is decidedly "
        "faster than native at the launch level (q: p adjusted by Benjamini-Hochberg over the 2 variant-against-"
        "default comparisons; a variant needs q < 0.05)",
        "native not measured at 64 B: the fastest variant is written without a comparison with the library's default",
        "no raw samples to compare at 4 KiB",
        f"one launch: launch variation unknown, toss-ups cannot be ruled out below ratio {prior:.3g} (native at "
        "512 B, native:ring at 512 B, native at 4 KiB measured in one launch); measure with ccbench launch "
        "--launches 3 or more"]
    assert f"{prior:.3g}" == "2.57"
    assert b.notes == [f"one launch: launch variation unknown, toss-ups cannot be ruled out below ratio {prior:.3g}; "
                       "measure with ccbench launch --launches 3 or more"]
    assert b.choices[0].winner == "native:ring" and b.choices[0].default_q == pytest.approx(
        compare_launches(_arrays(1e-5, 1), _arrays(1e-6, 1)).p_value)
    # a looser level names ring at 8 B; the note gives the level
    (loose, _) = select(rows, "mpich", level=0.8)
    assert loose.run == ""
    assert loose.choices[0].winner == "native:ring" and not loose.choices[0].kept_default
    assert loose.choices[0].vs_default == compare_launches(_arrays(1e-5), _arrays(0.99e-5), 0.8)
    assert loose.choices[1].vs_runner_up == compare_launches(_arrays(1e-6), _arrays(2e-6), 0.8)
    assert any(n.endswith("a variant needs q < 0.8)") for n in loose.notes)


def test_crossover_fraction_is_clamped_to_the_bracket():
    # B never catches up (d stays below 0): the boundary goes to the far end; A never ahead: the near end
    assert crossover_nbytes(1, 1.0, 2.0, 16, 1.0, 1.5) == pytest.approx(16.0)
    assert crossover_nbytes(1, 2.0, 1.0, 16, 3.0, 1.0) == pytest.approx(1.0)
    # equal log-ratios at both ends: half-way in log size, 2 x sqrt(32 / 2) = 8
    assert crossover_nbytes(2, 1.0, 3.0, 32, 1.0, 3.0) == pytest.approx(8.0)
    assert crossover_nbytes(0, 1.0, 3.0, 10, 1.0, 3.0) == pytest.approx(5.0)


def test_refused_cases_of_the_run_move_the_boundary_to_the_first_size_measured(tmp_path):
    rows = [_row("native", 8, 1e-6, launches=3), _row("native:ring", 8, 2e-6, launches=3),
            _row("native", 64, 4e-6, launches=3), _row("native:ring", 64, 2e-6, launches=3)]
    refusal = {"collective": "allreduce", "algorithm": "native:ring", "nranks": 4, "nbytes": 8, "not_applicable": True}
    run = _open_mpi_run(tmp_path / "a", rows, skipped=[refusal])
    assert tune_runs([run], "openmpi-rules").choice.selections[0].ranges == [Range(8, 63, "native"),
                                                                         Range(64, None, "native:ring")]
    # skips that were not refusals, or refusals of another collective or rank count, change nothing:
    # the crossover interpolated half-way between 8 B and 64 B in log size, 8 sqrt(8) = 22.6
    others = [dict(refusal, not_applicable=False), {k: v for k, v in refusal.items() if k != "not_applicable"},
              dict(refusal, collective="bcast"), dict(refusal, nranks=8)]
    run = _open_mpi_run(tmp_path / "b", rows, skipped=others)
    assert tune_runs([run], "openmpi-rules").choice.selections[0].ranges == [Range(8, 22, "native"),
                                                                         Range(23, None, "native:ring")]
    meta = json.loads((run / "run.json").read_text())                 # a run.json without a list of skips
    del meta["skipped"]
    (run / "run.json").write_text(json.dumps(meta))
    assert tune_runs([run], "openmpi-json", str(tmp_path / "o.json")).choice.selections[0].ranges[0] == Range(8, 22,
                                                                                                         "native")


def test_tune_runs_finds_runs_under_results_and_names_an_unknown_library(tmp_path, monkeypatch):
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6)]
    run = _open_mpi_run(tmp_path / "results" / "r", rows)
    monkeypatch.chdir(tmp_path)
    doc = tune_runs(["r"], "openmpi-rules", "out.txt")
    assert doc.choice.sources[0].path == str(Path("results") / "r") and Path("out.txt").is_file()
    meta = json.loads((run / "run.json").read_text())
    del meta["mpi_library"]
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match=r"^results/r was measured with '\?'; mpich-json is for MPICH$"):
        tune_runs(["r"], "mpich-json")


def test_tune_runs_for_mpich_names_what_only_mpich_has(tmp_path, monkeypatch):
    import ccbench.workflow.tune as tune

    monkeypatch.setattr(tune, "mpich_default_tree", lambda: (FAKE_DEFAULT, "MPICH Version:      5.0.2"))
    rows = [_row("native", 64, 2e-6, launches=3), _row("native:recexch", 64, 1e-6, launches=3)]
    run = _write_run(tmp_path / "m", rows)
    doc = tune_runs([run], "mpich-json")
    assert doc.choice.library == "mpich" and doc.choice.selections[0].ranges == [Range(64, None, "native:recexch")]
    assert doc.choice.selections[0].notes == []


def test_launch_arrays_need_positive_finite_samples_in_every_launch():
    from ccbench.analysis.tune import launch_arrays

    R = dataclasses.replace
    row = _row("native", 64, 1.0, launches=3)
    out = launch_arrays(row)
    assert [x.tolist() for x in out] == [[0.97], [1.0], [1.03]] and all(x.dtype == np.float64 for x in out)
    for bad in ((0.97, 0.0, 1.03), (0.97, float("inf"), 1.03), (0.97, float("nan"), 1.03), (0.97, -1.0, 1.03)):
        assert launch_arrays(R(row, samples_s=bad)) is None, bad
    assert launch_arrays(R(row, samples_s=(0.97, 1.03), samples=2, launch_samples=(1, 0, 1))) is None
    assert launch_arrays(R(_row("native", 64, 1.0), samples_s=(), samples=0)) is None


def test_variants_of_a_collective_the_library_has_no_table_for_are_not_written():
    rows = [_row("native", 8, 1e-5, coll="gatherv"), _row("native:linear", 8, 1e-6, coll="gatherv")]
    for lib, name in (("mpich", "MPICH"), ("openmpi", "Open MPI")):
        (sel,) = select(rows, lib)
        assert [c.winner for c in sel.choices] == ["native"] and sel.choices[0].runner_up is None
        assert sel.notes[0] == f"not written into a {name} file (it cannot name them): native:linear"


class _Seg:
    def __init__(self, alpha, beta):
        self.alpha_s, self.beta_s_per_byte = alpha, beta


class _Fit:
    """A segmented fit: `segs` [(up to this size, exclusive; segment)], the last for every larger size."""

    def __init__(self, *segs):
        self.segs = segs

    def segment_at(self, n):
        return next((seg for bp, seg in self.segs if n < bp), self.segs[-1][1])


def test_model_crossover_inside_the_bracket_on_straight_fits_only():
    from ccbench.analysis.tune import model_crossover_nbytes

    a, b = _Fit((float("inf"), _Seg(1e-6, 1e-9))), _Fit((float("inf"), _Seg(1e-5, 1e-10)))
    assert model_crossover_nbytes(a, b, 1000, 64000) == pytest.approx(10000.0)   # 9e-6 / 9e-10
    assert model_crossover_nbytes(a, b, 1000, 10000) is None          # at the bracket's ends: not inside
    assert model_crossover_nbytes(a, b, 9999, 20000) == pytest.approx(10000.0)
    assert model_crossover_nbytes(a, b, 20000, 64000) is None
    b_exact = _Fit((float("inf"), _Seg(9e-6 + 1e-6, 1e-9 - 9e-10)))
    x = model_crossover_nbytes(a, b_exact, 10, 10 ** 6)
    assert model_crossover_nbytes(a, b_exact, x, 10 ** 6) is None and model_crossover_nbytes(a, b_exact, 10, x) is None
    assert model_crossover_nbytes(a, _Fit((float("inf"), _Seg(2e-6, 1e-9))), 10, 10 ** 6) is None   # parallel
    # a protocol change inside the bracket on either curve: no straight line to cross
    bent = _Fit((5000, _Seg(1e-6, 1e-9)), (float("inf"), _Seg(1e-6, 1e-9)))
    assert model_crossover_nbytes(bent, b, 1000, 64000) is None
    assert model_crossover_nbytes(a, _Fit((5000, _Seg(1e-5, 1e-10)), (float("inf"), _Seg(1e-5, 1e-10))),
                                  1000, 64000) is None
    # the segment at the lower end is the one used
    two = _Fit((500, _Seg(5e-6, 1e-9)), (float("inf"), _Seg(1e-6, 1e-9)))
    assert model_crossover_nbytes(two, b, 1000, 64000) == pytest.approx(10000.0)
    assert model_crossover_nbytes(a, _Fit((500, _Seg(0.0, 0.0)), (float("inf"), _Seg(1e-5, 1e-10))),
                                  1000, 64000) == pytest.approx(10000.0)


def _sc(n, winner, times):
    """A size's choice: `winner` named (it may be slower than another: the default kept), times of each."""
    ru = min((a for a in times if a != winner), key=times.get)
    return SizeChoice(n, winner, times[winner], ru, times[ru], None, False, winner, times)


def test_size_ranges_use_the_fits_only_across_a_coarse_bracket():
    a, b = "native:ring", "native:recursive_doubling"
    # A: 1 + n, B: 2 + n / 2 (in any unit): the straight fits cross at n = 2
    fits = {a: _Fit((float("inf"), _Seg(1.0, 1.0))), b: _Fit((float("inf"), _Seg(2.0, 0.5)))}
    # sizes 1 and 16 are 16x apart: coarse, the fits' crossing at 2 (interpolation would give 4)
    coarse = [_sc(1, a, {a: 1.0, b: 2.0}), _sc(16, b, {a: 16.0, b: 8.0})]
    ranges, notes = size_ranges(coarse, fits=fits)
    assert ranges == [Range(1, 2, a), Range(3, None, b)]
    assert notes == [f"{a} -> {b} between 1 B and 16 B: crossover at about 3 B from the alpha-beta fits of both "
                     "curves (coarse: sizes 1 B and 16 B are 16x apart; measure in between to confirm)"]
    assert size_ranges(coarse, fits={b: fits[b]})[0] == [Range(1, 3, a), Range(4, None, b)]   # one fit: interpolate
    assert size_ranges(coarse, fits={a: fits[a]})[0] == [Range(1, 3, a), Range(4, None, b)]
    # exactly 2x apart is not coarse: interpolation, even with both fits (here they would cross at 1200)
    fits2 = {a: _Fit((float("inf"), _Seg(0.0, 1.0))), b: _Fit((float("inf"), _Seg(600.0, 0.5)))}
    near = [_sc(1000, a, {a: 1.0, b: 2.0}), _sc(2000, b, {a: 2.0, b: 1.0})]
    ranges, notes = size_ranges(near, fits=fits2)
    assert ranges == [Range(1000, 1414, a), Range(1415, None, b)]          # 1000 sqrt(2)
    assert notes == [f"{a} -> {b} between 1000 B and 1.95 KiB: crossover at about 1.38 KiB from interpolation"]
    assert size_ranges(near, fits={b: fits2[b]})[0] == [Range(1000, 1414, a), Range(1415, None, b)]
    # from size 0: interpolation linear in size, never coarse
    zero = [_sc(0, a, {a: 1.0, b: 3.0}), _sc(10, b, {a: 3.0, b: 1.0})]
    assert size_ranges(zero, fits=fits) == ([Range(0, 5, a), Range(6, None, b)],
                                            [f"{a} -> {b} between 0 B and 10 B: crossover at about 6 B from "
                                             "interpolation"])


def test_size_ranges_keep_the_boundary_inside_the_bracket():
    a, b = "native:ring", "native"
    # the default kept at 16 B although ring stays faster: the lines never cross, the boundary goes to the end
    ranges, _ = size_ranges([_sc(8, a, {a: 1.0, b: 2.0}), _sc(16, b, {a: 1.5, b: 2.0})])
    assert ranges == [Range(8, 15, a), Range(16, None, b)]
    # and to the start when the later winner was already faster at the earlier size
    ranges, _ = size_ranges([_sc(8, a, {a: 2.0, b: 1.0}), _sc(16, b, {a: 3.0, b: 1.0})])
    assert ranges == [Range(8, 8, a), Range(9, None, b)]
    # from size 0 the far end is exactly the next size: the boundary stays one below it
    ranges, _ = size_ranges([_sc(0, a, {a: 1.0, b: 2.0}), _sc(16, b, {a: 1.5, b: 2.0})])
    assert ranges == [Range(0, 15, a), Range(16, None, b)]


def test_curve_fits_of_three_sizes_and_of_the_default_place_a_coarse_crossover():
    """native: 1 us + 1 ns/B, ring: 10 us + 0.1 ns/B, three sizes each: the fits cross at 10,000 B, inside
    the 32x bracket between 2000 and 64000 B (interpolation would put it elsewhere)."""
    sizes = [1000, 2000, 64000]
    rows = [_row("native", n, 1e-6 + 1e-9 * n, launches=3) for n in sizes]
    rows += [_row("native:ring", n, 1e-5 + 1e-10 * n, launches=3) for n in sizes]
    rows += [_row("ring", n, 1.0, launches=3) for n in (1, 2, 4)]            # hand-written: not fitted, never chosen
    (sel,) = select(rows, "mpich")
    (lo, hi), (hi2, _) = [(r.lo, r.hi) for r in sel.ranges]
    assert (lo, hi2) == (1000, hi + 1) and hi in (9999, 10000) and [r.algorithm for r in sel.ranges] == [
        "native", "native:ring"]
    assert any("from the alpha-beta fits of both curves (coarse: sizes 1.95 KiB and 62.5 KiB" in n for n in sel.notes)
    # a curve is fitted from three sizes up: native against recursive doubling measured at two sizes only
    # (a line through two points would do) crosses by interpolation; measured at a third, by the fits
    rd = "native:recursive_doubling"
    native = [r for r in rows if r.algorithm == "native"]
    two = [_row(rd, n, 1e-5 + 1e-10 * n, launches=3) for n in (2000, 64000)]
    assert "from interpolation (coarse" in _crossover_note(native + two, "native", rd)
    third = [_row(rd, 1000, 1e-5 + 1e-7, launches=3)]
    assert "from the alpha-beta fits of both curves (coarse" in _crossover_note(native + two + third, "native", rd)
    # a zero time is not a point: with it recursive doubling still has two sizes
    zero = dataclasses.replace(_row(rd, 1 << 20, 1e-6), median_s=0.0)
    assert "from interpolation (coarse" in _crossover_note(native + two + [zero], "native", rd)
    # a curve the fit refuses (infinite times leave one size) is skipped, and the curves after it still fitted
    bad = [dataclasses.replace(_row(rd, n, 1e-6), median_s=m) for n, m in ((8, 1e-6), (16, float("inf")),
                                                                           (32, float("inf")))]
    assert "from the alpha-beta fits of both curves (coarse" in _crossover_note(bad + rows, "native", "native:ring")


def _crossover_note(rows, a, b):
    """The note of `select` (MPICH) on where `a` hands over to `b`."""
    (sel,) = select(rows, "mpich")
    (note,) = [n for n in sel.notes if n.startswith(f"{a} -> {b} between ")]
    return note


def test_read_json_with_comments_over_several_lines():
    assert read_json_with_comment('  /* one\n two */\n/* three */ {"a": [1, "/* not a comment */"]}\n') == {
        "a": [1, "/* not a comment */"]}


def test_select_runner_up_challenger_and_notes_go_by_time_not_by_name():
    R = dataclasses.replace
    rd, ring = "native:recursive_doubling", "native:ring"
    rows = [_row("native:tree", 8, 1e-6, P=2),                      # nothing MPICH can name at 2 ranks: no selection
            _row("native", 8, 1e-5, launches=3), _row(ring, 8, 0.5e-5, launches=3),
            # rd: the fastest typical time at 8 B, but its launches spread 16x: not decidedly faster than native
            R(_row(rd, 8, 0.4e-5, launches=3), samples_s=(0.1e-5, 0.4e-5, 1.6e-5)),
            _row("native", 64, 1e-5, launches=3), _row(ring, 64, 0.99e-5, launches=3),
            _row(rd, 64, 1.01e-5, launches=3),
            _row(ring, 512, 1e-6, launches=3), _row(rd, 512, 2e-6, launches=3),
            _row(ring, 4096, 1e-6, launches=3), _row(rd, 4096, 2e-6, launches=3),
            _row("native", 32768, 1e-5, launches=3), _row(ring, 32768, 0.5e-5, launches=3),
            R(_row(rd, 32768, 2e-5), samples_s=(), samples=0),          # neither the winner nor the runner-up
            # a typical time below native's, launches 1.5x slower than native's: decidedly slower, never named
            _row("native", 65536, 1e-5, launches=3), R(_row(ring, 65536, 1.5e-5, launches=3), median_s=0.9e-5),
            _row("native", 1 << 20, 1e-5, launches=3), _row(ring, 1 << 20, 0.5e-5, launches=3),
            R(_row(rd, 1 << 20, 2e-5), samples_s=(), samples=0)]
    (sel,) = select(rows, "mpich")
    assert [(c.nbytes, c.winner, c.runner_up, c.challenger) for c in sel.choices] == [
        (8, ring, rd, ring), (64, "native", ring, ring), (512, ring, rd, None), (4096, ring, rd, None),
        (32768, ring, "native", ring), (65536, "native", ring, ring), (1 << 20, ring, "native", ring)]
    assert sel.choices[5].vs_default.ratio == pytest.approx(1.5) and sel.choices[5].default_q < 0.05
    assert "native not measured at 512 B, 4 KiB: the fastest variant is written without a comparison with the " \
           "library's default" in sel.notes
    assert "no raw samples to compare at 32 KiB, 1 MiB" in sel.notes


def test_a_variant_whose_adjusted_p_is_exactly_the_level_is_not_named(monkeypatch):
    """A stand-in launch test with p = 0.05 for ring against native: q = p (one comparison) is not below 0.05."""
    import ccbench.analysis.tune as tune
    from ccbench.core.replication import LaunchComparison

    monkeypatch.setattr(tune, "compare_launches", lambda a, b, level: LaunchComparison(
        0.5, 0.4, 0.6, 0.05, "faster", 3, 3, 4.0, 1.1, "welch"))
    (sel,) = select([_row("native", 8, 1e-5, launches=3), _row("native:ring", 8, 0.5e-5, launches=3)], "mpich")
    (c,) = sel.choices
    assert (c.winner, c.kept_default, c.default_q, c.challenger) == ("native", True, 0.05, "native:ring")


def test_a_run_of_another_library_is_refused_before_the_mpi_library_is_loaded(tmp_path, monkeypatch):
    """Under Open MPI there is no MPICH tree to read: the run's library decides first, with a usage error."""
    import ccbench.workflow.tune as workflow

    def no_mpich():
        raise CCBenchError("mpich-json needs the MPICH library the run used")

    monkeypatch.setattr(workflow, "mpich_default_tree", no_mpich)
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6)]
    run = _write_run(tmp_path / "r", rows, vendor="Open MPI 5.0.11", library="Open MPI v5.0.11")
    with pytest.raises(UsageError, match="is for MPICH"):
        tune_runs([run], "mpich-json", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()
    mpich = _write_run(tmp_path / "m", rows)
    with pytest.raises(CCBenchError, match="needs the MPICH library"):
        tune_runs([mpich], "mpich-json", str(tmp_path / "y.json"))


def test_tune_ends_with_what_the_file_changes_why_defaults_stay_and_how_to_use_it(tmp_path, monkeypatch):
    """The answer lines: a variant decidedly faster (named, with its sizes); one faster by 5% in three launches
    (the default stays, with the launches a side that would decide it); native fastest everywhere; the export line."""
    import ccbench.workflow.tune as tune
    from ccbench.present.tune import answer_lines

    monkeypatch.setattr(tune, "mpich_default_tree", lambda: (FAKE_DEFAULT, "MPICH Version:      5.0.2"))
    rows = [_row("native", 64, 2e-6, launches=3), _row("native:ring", 64, 1e-6, launches=3),
            _row("native", 64, 2e-6, coll="bcast", launches=3),
            _row("native:binomial", 64, 1.9e-6, coll="bcast", launches=3),
            _row("native", 64, 1e-6, coll="alltoall", launches=3),
            _row("native:pairwise", 64, 3e-6, coll="alltoall", launches=3)]
    doc = tune_runs([_write_run(tmp_path / "m", rows)], "mpich-json")
    lines = answer_lines(doc)
    by = {ln.split(":")[0]: ln for ln in lines}
    assert by["allreduce at 4 ranks"] == "allreduce at 4 ranks: the file names native:ring for 64 B-up"
    bcast = by["bcast at 4 ranks"]
    assert bcast.startswith("bcast at 4 ranks: the default stays at 64 B (closest: native:binomial 1.05x faster at "
                            "64 B, not decided: q ")
    k = int(re.search(r"about (\d+) launches a side would decide it \(this run has 3\)$", bcast).group(1))
    assert 3 < k < 1000
    assert by["alltoall at 4 ranks"] == ("alltoall at 4 ranks: the default stays at every size (it was the fastest "
                                         "measured)")
    assert lines[-1] == f"use it: export MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE={Path(doc.path).resolve()}"


@pytest.mark.parametrize(("node_of_rank", "shape"), [
    ([0, 0, 1, 1], Shape(2, 2, True)),
    ([0, 1, 0, 1], Shape(2, 2, False)),   # cyclic placement: not node-consecutive
    ([0, 0, 1, 1, 0], Shape(2, 3, False)),  # node 0's ranks in two blocks
    ([0, 1, 2, 3], Shape(4, 1, True)),
    ([0, 0, 0, 0], Shape(1, 4, True)),
])
def test_run_shape_reads_the_node_map(node_of_rank, shape):
    assert run_shape({"topology": {"node_of_rank": node_of_rank}, "nodes": 9, "ranks_per_node": 9}) == shape


def test_run_shape_without_a_node_map():
    assert run_shape({"nodes": 2, "ranks_per_node": 3}) == Shape(2, 3, True)
    assert run_shape({"nranks": 4}) is None  # an imported run: no shape, its rules hold at any shape


def test_mpich_json_keys_each_choice_on_the_shape_it_was_measured_on():
    """4 ranks measured as 4 nodes x 1, 2 x 2 in blocks and 2 x 2 cyclic, 2 ranks on one node: MPICH's walk (as
    ccbench answers csel's keys) gives each shape its own choice and the library's default at a shape not measured."""
    def sel(P, shape, alg):
        s = _sel("allreduce", P, [Range(8, None, alg)])
        return dataclasses.replace(s, shape=shape)

    tree = mpich_json([sel(4, Shape(4, 1, True), "native:ring"), sel(4, Shape(2, 2, True), "native:recursive_doubling"),
                       sel(4, Shape(2, 2, False), "native:reduce_scatter_allgather"),
                       sel(2, Shape(1, 2, True), "native:ring")], FAKE_DEFAULT)
    _check_csel_level(tree)

    def walk(P, ppn, consecutive=True):
        return mpich_tree_choice(tree, "allreduce", P, 1024, ranks_per_node=ppn, node_consecutive=consecutive)[0]

    assert walk(4, 1) == "MPIR_Allreduce_intra_ring"
    assert walk(4, 2) == "MPIR_Allreduce_intra_recursive_doubling"
    assert walk(4, 2, consecutive=False) == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert walk(4, 4) == "MPIR_Default_intra_x"  # one node of 4: not measured
    assert walk(2, None) == "MPIR_Allreduce_intra_ring"  # 2 ranks, one node
    assert walk(2, 1) == "MPIR_Default_intra_x"  # 2 nodes x 1: not measured


def test_tuning_choice_refuses_two_runs_of_one_shape_and_open_mpi_two_shapes_of_one_size(tmp_path):
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6)]
    a = _write_run(tmp_path / "a", rows, topology={"node_of_rank": [0, 0, 1, 1]})
    b = _write_run(tmp_path / "b", rows, topology={"node_of_rank": [0, 1, 0, 1]})
    c = _write_run(tmp_path / "c", rows, topology={"node_of_rank": [0, 0, 1, 1]})
    choice = tuning_choice([open_run(a), open_run(b)], "mpich-json")
    assert [s.shape for s in choice.selections] == [Shape(2, 2, True), Shape(2, 2, False)]
    assert any("comm_avg_ppn" in n for n in choice.notes)
    with pytest.raises(UsageError, match=r"^two runs measure allreduce at 4 ranks on 2 nodes x 2 ranks; give one "
                                         r"run per shape$"):
        tuning_choice([open_run(a), open_run(c)], "mpich-json")
    ompi = {"vendor": "Open MPI 5.0.11", "library": "Open MPI v5.0.11"}
    x = _write_run(tmp_path / "x", rows, topology={"node_of_rank": [0, 0, 1, 1]}, **ompi)
    y = _write_run(tmp_path / "y", rows, topology={"node_of_rank": [0, 1, 2, 3]}, **ompi)
    with pytest.raises(UsageError, match=r"keyed on the communicator's size alone"):
        tuning_choice([open_run(x), open_run(y)], "openmpi-rules")
    notes = tuning_choice([open_run(x)], "openmpi-rules").notes
    assert notes == ("allreduce at 4 ranks was measured on 2 nodes x 2 ranks; Open MPI's rules cannot ask the "
                     "shape, so they apply at 4 ranks on any nodes",)
