"""ccbench export: OSU blocks that OSU parsers read, nccl-tests' table, one tidy CSV; files never replaced."""

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.present.export import export_csv, export_nccl_tests, export_osu
from ccbench.store.run import open_run

REPO = Path(__file__).resolve().parents[1]
NP4 = REPO / "tests" / "data" / "run-np4"


def _runs(*paths):
    out = []
    for p in paths:
        run_ = open_run(p)
        meta, rows = run_.meta, run_.rows
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
    assert r.returncode == 2 and "exists; files are never overwritten" in r.stderr and r.stderr.strip().count("\n") == 0
    r = subprocess.run([sys.executable, "-m", "ccbench", "export", str(REPO / "tests" / "data" / "wl-ddp-np2"),
                        "--format", "osu"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0


def test_osu_statistics_and_per_rank_sizes_in_show():
    import dataclasses

    from ccbench.present.views import osu_tables, rows_tables

    (name, meta, rows), = _runs(NP4)
    ag = [r for r in rows if r.collective == "allgather" and r.algorithm == "native"]
    (t,) = [t for t in rows_tables(ag, per_rank=True)]
    assert "one rank's block (as OSU)" in t.title
    assert [row[1] for row in t.rows] == [r.nbytes // 4 for r in sorted(ag, key=lambda r: r.nbytes)]
    r0 = dataclasses.replace(ag[0], rank_mean_min_s=1e-6, rank_mean_avg_s=2e-6, rank_mean_max_s=3e-6, p90_s=4e-6)
    (t,) = osu_tables([r0])
    assert t.cells()[0][2:8] == ["2 us", "1 us", "3 us", t.columns[5].format(r0.median_s), "4 us",
                                 t.columns[7].format(r0.p99_s)]
    (old,) = osu_tables(ag[:1], per_rank=False)  # rows recorded before the per-rank means: "-"
    assert old.cells()[0][2:5] == ["-", "-", "-"] and old.rows[0][1] == ag[0].nbytes
    r = subprocess.run([sys.executable, "-m", "ccbench", "show", str(NP4), "--osu", "--size-per-rank"],
                       capture_output=True, text=True, cwd=REPO, timeout=60, env={"COLUMNS": "200", "PATH": ""})
    assert r.returncode == 0 and "OSU/IMB statistics" in r.stdout and "Avg/Min/Max Latency" in r.stdout


def test_each_osu_block_reads_back_as_the_call_it_was_and_unequal_v_blocks_are_named_not_written():
    """Every collective, blocking and persistent, even and v: each exported block, imported alone, gives the
    collective, algorithm, size and count it was written from; a v-curve on zipf counts has no OSU block."""
    import dataclasses

    from ccbench.core.collectives import COLLECTIVES
    from ccbench.store.imports import parse_osu

    (name, meta, rows), = _runs(NP4)
    proto = next(r for r in rows if r.collective == "allreduce" and r.algorithm == "native" and r.nbytes >= 1024)
    made = []
    for coll in COLLECTIVES:
        if coll == "barrier":
            continue
        P = 2 if coll == "pingpong" else 4
        for k, alg in enumerate(("native", "native-persistent") if coll != "pingpong" else ("native",)):
            made.append(dataclasses.replace(proto, collective=coll, algorithm=alg, nbytes=4096, dtype="uint8",
                                            count=COLLECTIVES[coll].count_for(4096, 1, P), nranks=P,
                                            op="sum" if COLLECTIVES[coll].reduction else "none",
                                            median_s=proto.median_s * (1 + k)))  # each algorithm its own time
    zipf = [dataclasses.replace(made[-1], collective=c, counts="zipf:1") for c in ("allgatherv", "alltoallv")]
    text = export_osu([(name, meta, made), ("zipf-run", meta, zipf)])
    head, *blocks = text.split("\n\n")
    assert head == ("# not written: allgatherv (native-persistent), alltoallv (native-persistent) of zipf-run on "
                    "counts zipf:1: OSU's v-tests give every block the same size")
    bcast = next(b for b in blocks if "Broadcast Persistent" in b).splitlines()
    assert bcast[0].startswith(f"# OSU MPI Broadcast Persistent Latency Test (ccbench export of {name}: "
                               "native-persistent, 4 ranks, uint8; ")
    assert bcast[1] == "# latency = ccbench's median of the per-call maximum over ranks"
    gathered = next(b for b in blocks if "OSU MPI Allgatherv Latency" in b).splitlines()
    assert gathered[1].endswith(" (size: one rank's block, as OSU)")
    reduced = next(b for b in blocks if "OSU MPI Allreduce Latency" in b).splitlines()
    assert reduced[0].startswith(f"# OSU MPI Allreduce Latency Test (ccbench export of {name}: native, 4 ranks, "
                                 "uint8 sum; ")
    back = [parse_osu(b + "\n", 2 if "OSU MPI Latency Test" in b else 4).rows for b in blocks if b.strip()]
    assert all(len(rows) == 1 for rows in back)
    assert sorted((r.collective, r.algorithm, r.nbytes, r.count, round(r.median_s * 1e6, 2)) for (r,) in back) == \
        sorted((r.collective, r.algorithm, r.nbytes, r.count, round(r.median_s * 1e6, 2)) for r in made)
