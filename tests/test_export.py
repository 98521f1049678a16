"""ccbench export: OSU blocks that OSU parsers read, nccl-tests' table, one tidy CSV; files never replaced."""

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.present.export import export_csv, export_nccl_tests, export_osu
from ccbench.store.run import load_run

REPO = Path(__file__).resolve().parents[1]
NP4 = REPO / "tests" / "data" / "run-np4"


def _runs(*paths):
    out = []
    for p in paths:
        meta, rows, _ = load_run(p)
        out.append((p.name, meta, rows))
    return out


def _blocks(text):
    """{title line: {size: latency}} parsed the way ReFrame's OSU checks do (^{size}\\s+(\\S+))."""
    out, title = {}, None
    for line in text.splitlines():
        if line.startswith("# OSU"):
            title = line
            out[title] = {}
        elif line and not line.startswith("#"):
            m = re.match(r"^(\d+)\s+(\S+)$", line)
            assert m, line
            out[title][int(m.group(1))] = float(m.group(2))
    return out


def test_osu_blocks_carry_the_medians_in_us_with_osu_sizes():
    (name, meta, rows), = _runs(NP4)
    blocks = _blocks(export_osu([(name, meta, rows)]))
    ar = next(v for k, v in blocks.items() if "Allreduce" in k and "native," in k)
    want = {r.nbytes: round(r.median_s * 1e6, 2) for r in rows if r.collective == "allreduce"
            and r.algorithm == "native"}
    assert ar == pytest.approx(want, abs=0.006)
    ag = next(v for k, v in blocks.items() if "Allgather" in k and "native," in k)
    per_rank = {r.nbytes // 4: round(r.median_s * 1e6, 2) for r in rows if r.collective == "allgather"
                and r.algorithm == "native"}
    assert ag == pytest.approx(per_rank, abs=0.006)  # OSU's allgather size is one rank's block
    assert any(k.startswith("# OSU MPI Latency Test") for k in blocks)  # ping-pong


def test_nccl_tests_table_and_csv_hold_every_row():
    runs = _runs(NP4, REPO / "tests" / "data" / "run-np2")
    table = export_nccl_tests(runs[:1])
    lines = [ln for ln in table.splitlines() if ln and not ln.startswith("#")]
    assert len(lines) == len(runs[0][2])
    first = lines[0].split()
    assert len(first) == 9 and first[-1] == "0"
    rows = list(csv.DictReader(io.StringIO(export_csv(runs))))
    assert len(rows) == len(runs[0][2]) + len(runs[1][2])
    assert {r["run"] for r in rows} == {"run-np4", "run-np2"} and "samples_s" not in rows[0]


def test_export_command_writes_a_new_file_and_never_replaces_one(tmp_path):
    out = tmp_path / "np4.osu"
    cmd = [sys.executable, "-m", "ccbench", "export", str(NP4), "--format", "osu", "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0 and out.read_text() == export_osu(_runs(NP4))
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and "never replaces" in r.stderr and r.stderr.strip().count("\n") == 0
    r = subprocess.run([sys.executable, "-m", "ccbench", "export", str(REPO / "tests" / "data" / "wl-ddp-np2"),
                        "--format", "osu"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
