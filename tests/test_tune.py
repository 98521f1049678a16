"""ccbench tune: choice of the fastest variant, crossovers, the three file formats, and
MPICH loading the generated selection file and obeying it."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.algorithms.native_variants import MPICH, OPENMPI, OPENMPI_COLL_IDS
from ccbench.analysis.tune import (
    Range,
    Selection,
    SizeChoice,
    crossover_nbytes,
    mpich_json,
    openmpi_json,
    openmpi_rules,
    read_json_with_comment,
    select,
    size_ranges,
    tune_runs,
)
from ccbench.core.errors import UsageError
from ccbench.store.results import Row, RunWriter

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


def _write_run(path: Path, rows, vendor="MPICH 5.0.2", library="MPICH Version:      5.0.2", skipped=()):
    path.mkdir(parents=True)
    w = RunWriter(path, {"mpi_vendor": vendor, "mpi_library": library, "nranks": rows[0].nranks,
                         "start_time": "2026-01-01T00:00:00", "skipped": list(skipped), "config": {}})
    for r in rows:
        w.append(r)
    w.update(status="complete")
    w.close()
    return path


def test_tune_writes_once_and_refuses_foreign_input(tmp_path):
    rows = [_row("native", 64, 2e-6), _row("native:ring", 64, 1e-6), _row("native:rabenseifner", 64, 3e-6)]
    run = _write_run(tmp_path / "r", rows, vendor="Open MPI 5.0.11", library="Open MPI v5.0.11")
    doc = tune_runs([run], "openmpi-rules")
    assert Path(doc["path"]) == run / "tuning.openmpi-rules.txt" and "Open MPI v5.0.11" in doc["text"]
    with pytest.raises(UsageError, match="never overwritten"):
        tune_runs([run], "openmpi-rules")
    with pytest.raises(UsageError, match="is for MPICH"):
        tune_runs([run], "mpich-json", str(tmp_path / "x.json"))
    doc = tune_runs([run], "openmpi-json", str(tmp_path / "o.json"))
    side = json.loads((tmp_path / "o.json.source.json").read_text())
    assert side["sources"][0]["run"] == "r" and any("6.0" in n for n in doc["notes"])
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
        doc = read_json_with_comment(out.read_text())
        assert out.read_text().startswith("/* MPICH collective selection") and f"run-{alg}" in out.read_text()
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
    assert "verification of" in r.stdout and (run / "tuning.mpich.json").is_file()
    (check,) = [d for d in tmp_path.iterdir() if d.name.endswith("verify-mpich-json")]
    # in the order they ran (run.json start times tie within a second: sort by launch, then without before with)
    launches = sorted((d for d in check.iterdir() if d.is_dir()),
                      key=lambda d: (d.name.split("_")[-1][:3], d.name.endswith("-with")))
    assert [d.name.split("_")[-1] for d in launches] == ["L01-without", "L01-with", "L02-without", "L02-with",
                                                         "L03-without", "L03-with"]
    starts = [json.loads((d / "run.json").read_text())["start_time"] for d in launches]
    assert starts == sorted(starts)  # A B A B: each launch began no earlier than the one before
    path = str((run / "tuning.mpich.json").resolve())
    for d in launches:
        meta = json.loads((d / "run.json").read_text())
        assert meta["launch"] == int(d.name.split("_L")[1][:2]) and meta["config"]["launches"] == 3
        assert meta["mpi_env"].get("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE") == (
            path if d.name.endswith("-with") else None)
        assert {json.loads(line)["algorithm"] for line in (d / "cases.jsonl").read_text().splitlines()} == {"native"}
    record = json.loads((check / "verification.json").read_text())
    assert {x["nbytes"] for x in record["rows"]} == {64, 65536} and all(x["pairs"] == 3 for x in record["rows"])
    assert str(check) in r.stdout and "verification.json" in r.stdout
