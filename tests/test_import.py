"""ccbench import: OSU and IMB outputs read into runs that show, export and compare take."""

import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.core.errors import UsageError
from ccbench.present.export import export_osu
from ccbench.store.imports import IMPORTED, parse_imb, parse_osu, sniff
from ccbench.store.run import load_run

REPO = Path(__file__).resolve().parents[1]
FOREIGN = REPO / "tests" / "data" / "foreign"


def test_osu_full_output_gives_avg_min_max_in_seconds():
    p = parse_osu((FOREIGN / "osu_allreduce_np4_full.txt").read_text(), 4)
    assert p.tool == "OSU Micro-Benchmarks" and "v7.4" in p.version and p.options["Datatype"] == "MPI_CHAR"
    got = {r.nbytes: (r.median_s, r.rank_mean_min_s, r.rank_mean_max_s) for r in p.rows}
    assert got[65536] == pytest.approx((61.03e-6, 59.88e-6, 62.11e-6))
    assert sorted(got) == [4, 8, 1024, 65536, 1048576]
    r = p.rows[0]
    assert (r.collective, r.algorithm, r.dtype, r.op, r.nranks, r.samples) == ("allreduce", "native", "uint8", "sum",
                                                                               4, 0)
    assert r.flags == (IMPORTED,) and r.rank_mean_avg_s == r.median_s
    assert r.busbw_gbs == pytest.approx(4 / 3.12e-6 / 1e9 * 1.5)  # nccl-tests' factor 2(P-1)/P


def test_osu_per_rank_sizes_become_whole_buffers():
    p = parse_osu((FOREIGN / "osu_allgather_np4.txt").read_text(), 4)
    assert [(r.nbytes, r.count) for r in p.rows] == [(4, 1), (64, 16), (4096, 1024)]
    assert [r.rank_mean_min_s for r in p.rows] == [None] * 3  # without -f: no min/max


def test_imb_blocks_pingpong_and_allreduce():
    p = parse_imb((FOREIGN / "imb_np2.txt").read_text())
    assert p.tool == "IMB-MPI1" and "2021.11" in p.version
    pp = [r for r in p.rows if r.collective == "pingpong"]
    ar = [r for r in p.rows if r.collective == "allreduce"]
    assert [r.nbytes for r in pp] == [0, 8, 1024]
    assert [r.median_s for r in pp] == pytest.approx([0.45e-6, 0.47e-6, 0.93e-6])
    eight = ar[1]
    assert (eight.nbytes, eight.dtype) == (8, "float32")
    assert (eight.rank_mean_min_s, eight.median_s, eight.rank_mean_max_s) == pytest.approx((1.01e-6, 1.10e-6, 1.20e-6))
    assert all(r.nranks == 2 and r.dtype == "uint8" for r in pp)


def test_foreign_and_broken_files_are_refused_in_one_line(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(UsageError, match="neither an OSU"):
        sniff(other)
    with pytest.raises(UsageError, match="no result lines"):
        parse_osu("# OSU MPI Allreduce Latency Test v7.4\n# Size  Avg Latency(us)\n", 4)
    with pytest.raises(UsageError, match="not a collective"):
        parse_osu("# OSU MPI Bandwidth Test v7.4\n# Size  Bandwidth (MB/s)\n8 1.0\n", 2)


def _ccbench(*args):
    return subprocess.run([sys.executable, "-m", "ccbench", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env={"COLUMNS": "250", "PATH": ""})


def test_import_then_show_export_and_compare(tmp_path):
    r = _ccbench("import", str(FOREIGN / "osu_allreduce_np4_full.txt"), str(FOREIGN / "osu_allgather_np4.txt"),
                 "--nranks", "4", "--library", "MPICH 5.0.2", "--results-dir", str(tmp_path / "imp"))
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "imp").iterdir()
    meta, rows, _ = load_run(run)
    assert [d["rows"] for d in meta["imported"]] == [5, 3] and len(meta["imported"][0]["sha256"]) == 64
    shown = _ccbench("show", str(run), "--osu", "--size-per-rank").stdout
    assert "905 us" in shown and "61 us" in shown and "imported from OSU MPI Allreduce Latency Test v7.4" in shown
    # the export gives back the file's own figures and sizes
    back = export_osu([(run.name, meta, rows)])
    for line in (FOREIGN / "osu_allgather_np4.txt").read_text().splitlines()[3:]:
        size, lat = line.split()
        assert any(ln.split() == [size, lat] for ln in back.splitlines()), line
    # against a ccbench run of the same dtype: matched, and untested (no raw samples on the imported side)
    r = _ccbench("launch", "-n", "2", "-C", "allreduce", "-t", "uint8", "-s", "4,8,1K", "--budget", "0.05",
                 "--results-dir", str(tmp_path / "mine"), "--no-show")
    assert r.returncode == 0, r.stderr[-2000:]
    (mine,) = (tmp_path / "mine").iterdir()
    r = _ccbench("compare", str(mine), str(run), "--no-plot", "--out", str(tmp_path / "cmp"))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "cmp" / "compare.csv").read_text()
    assert text.count("untested") >= 3


def test_import_of_an_osu_file_needs_the_rank_count(tmp_path):
    r = _ccbench("import", str(FOREIGN / "osu_allgather_np4.txt"), "--results-dir", str(tmp_path))
    assert r.returncode == 2 and "--nranks" in r.stderr and r.stderr.strip().count("\n") == 0
    assert not list(tmp_path.iterdir())
