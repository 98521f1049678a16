"""ccbench import streams: each line checked as it is read, rows written aside as they come and fsynced once, the run
renamed into place only when complete -- the same bytes a run's writer writes, every row of a large file, nothing
left by a file refused on its last line, and no row held in memory (the speed itself: benchmarks/import_speed.py)."""

import json
import random
import subprocess
import sys
import tracemalloc

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.core.errors import UsageError
from ccbench.store import imports
from ccbench.store.imports import import_files, parse_csv, parse_osu, with_model_terms
from ccbench.store.results import RunWriter, latest_run
from ccbench.store.run import open_run

OSU_HEAD = ("# OSU MPI Allreduce Latency Test v7.4\n# Number of processes: 4\n# Datatype: MPI_CHAR.\n"
            "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n")
CSV_HEAD = "collective,algorithm,nranks,nbytes,time_s,dtype,op,ppn\n"


def _osu_text(lines: int, head: str = OSU_HEAD) -> str:
    rng = random.Random(lines)
    return head + "".join(f"{4 * (i + 1):<12d}{rng.uniform(1, 900):>16.2f}{0.95:>18.2f}{901.5:>18.2f}{1000:>12d}\n"
                          for i in range(lines))


def _csv_text(lines: int) -> str:
    """One value per case, several groups, algorithms with and without a model, names a CSV must quote."""
    rng = random.Random(lines)
    algs = ["ring", "recursive_doubling", "native", 'my "tree", v2', "50%_off"]
    out = []
    for i in range(lines):
        alg = algs[i % len(algs)]
        cell = '"' + alg.replace('"', '""') + '"' if any(c in alg for c in ',"') else alg
        out.append(f"allreduce,{cell},{4 << (i % 3)},{8 * (i // 15 + 1)},{rng.uniform(1e-6, 1e-2)!r},float32,sum,2\n")
    return CSV_HEAD + "".join(out)


def _cost(collective, algorithm, nranks, nbytes, ranks_per_node):
    alg = REGISTRY[collective].get(algorithm)
    return None if alg is None or alg.cost is None else alg.cost(nranks, nbytes)


def _written_by_a_run_writer(tmp_path, rows) -> tuple[bytes, bytes]:
    """cases.jsonl and cases.csv as a sweep's `RunWriter` writes `rows`."""
    where = tmp_path / "by-writer"
    where.mkdir()
    writer = RunWriter(where, {})
    try:
        writer.extend(rows)
    finally:
        writer.close()
    return (where / "cases.jsonl").read_bytes(), (where / "cases.csv").read_bytes()


def _ring_cost(collective, algorithm, nranks, nbytes, ranks_per_node):
    """Every row modelled (as the ring allreduce), to write OSU rows with model terms."""
    return REGISTRY["allreduce"]["ring"].cost(nranks, nbytes)


KINDS = ["osu -f", "osu -f, modelled", "osu", "osu_latency", "csv"]


@pytest.mark.parametrize("templates", [True, False], ids=["templates", "rows"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_import_writes_the_bytes_a_run_writer_writes(tmp_path, monkeypatch, kind, templates):
    """The rows of OSU files and of a CSV of one value per case are written from templates, not Row objects (or,
    where a template cannot be made, as rows): the bytes are those of the rows `parse_osu`/`parse_csv` give (model
    terms included), as a sweep's writer writes them."""
    made, make = [], imports._Template.make.__func__

    def spy(cls, proto, fields):
        made.append(make(cls, proto, fields) if templates else None)
        return made[-1]

    monkeypatch.setattr(imports._Template, "make", classmethod(spy))
    cost = _ring_cost if kind.endswith("modelled") else _cost
    if kind == "csv":
        text = _csv_text(300)
        rows = with_model_terms(parse_csv(text).rows, cost, {4: 2, 8: 2, 16: 2})
    else:
        text = {"osu": OSU_HEAD.replace("   Min Latency(us)   Max Latency(us)  Iterations", "")
                + "".join(f"{1 << i}  {1.5 + i:.2f}\n" for i in range(30)),
                "osu_latency": "# OSU MPI Latency Test v7.4\n# Size          Latency (us)\n"
                + "".join(f"{1 << i}  {0.25 + i:.2f}\n" for i in range(30))}.get(kind, _osu_text(300))
        rows = with_model_terms(parse_osu(text, 4).rows, cost)
    f = tmp_path / ("in.csv" if kind == "csv" else "in.txt")
    f.write_text(text)
    run, (parsed,) = import_files([f], results_dir=tmp_path / "res", cost=cost)
    assert ((run / "cases.jsonl").read_bytes(), (run / "cases.csv").read_bytes()) == _written_by_a_run_writer(
        tmp_path, rows)
    assert len(parsed.rows) == len(rows) and parsed.modelled_rows == sum(r.steps_max is not None for r in rows)
    assert [r.to_json() for r in parsed.rows] == [r.to_json() for r in rows]  # read back from the run
    if kind == "csv":
        assert 0 < parsed.modelled_rows < len(rows)
    if kind.endswith("modelled"):
        assert parsed.modelled_rows == len(rows)
    assert made and all((t is not None) == templates for t in made)  # one template per file or CSV group


@pytest.mark.parametrize("fmt", ["osu", "csv"])
def test_every_row_of_a_large_file_arrives(tmp_path, fmt):
    n = 20_000
    f = tmp_path / f"big.{fmt}"
    f.write_text(_osu_text(n) if fmt == "osu" else _csv_text(n))
    run, (parsed,) = import_files([f], fmt, results_dir=tmp_path / "res")
    assert [p.name for p in (tmp_path / "res").iterdir()] == [run.name]  # nothing aside is left
    opened = open_run(run)
    assert len(opened.rows) == len(parsed.rows) == n and not opened.warnings
    assert opened.meta["status"] == "complete" and opened.meta["finished_cases"] == n
    assert opened.meta["imported"][0]["rows"] == n
    assert len((run / "cases.csv").read_text().splitlines()) == n + 1
    if fmt == "osu":
        assert [r.nbytes for r in opened.rows] == [4 * (i + 1) for i in range(n)]
    else:
        assert len({(r.algorithm, r.nranks, r.nbytes) for r in opened.rows}) == n


@pytest.mark.parametrize("fmt", ["osu", "csv"])
@pytest.mark.parametrize("results_exist", [False, True])
def test_a_file_refused_on_its_last_line_leaves_nothing(tmp_path, fmt, results_exist):
    """Thousands of rows are written aside before the last line is read: the refusal removes them all, and the
    results folder too where the import made it."""
    n = 12_000
    f = tmp_path / f"bad.{fmt}"
    bad = "8192  nan  1.0  2.0  1000\n" if fmt == "osu" else "allreduce,ring,4,8,-1,float32,sum,2\n"
    f.write_text((_osu_text(n) if fmt == "osu" else _csv_text(n)) + bad)
    last = n + (5 if fmt == "osu" else 2)
    res = tmp_path / "res"
    if results_exist:
        res.mkdir()
    with pytest.raises(UsageError, match=rf"{f}, line {last}: .*is not a time"):
        import_files([f], fmt, results_dir=res)
    assert (list(res.iterdir()) == []) if results_exist else not res.exists()


def test_a_duplicate_after_the_rows_is_refused_naming_both_lines(tmp_path):
    f = tmp_path / "twice.osu"
    f.write_text(_osu_text(5000) + "64  3.0  2.0  4.0  1000\n")
    with pytest.raises(UsageError, match=r"line 5005: allreduce/native 64 B at 4 ranks \(uint8, sum\) appears "
                                         r"twice \(lines 20 and 5005\)"):
        import_files([f], "osu", results_dir=tmp_path / "res")
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("after, message", [
    # another test appended to the file: its rows would be read as this test's
    ("# OSU MPI Broadcast Latency Test v7.4\n# Size       Avg Latency(us)\n8   1.00\n",
     "line 8: a second OSU output ('Broadcast' after 'Allreduce'): import each output as a file of its own"),
    ("# Datatype: MPI_INT.\n# Size       Avg Latency(us)\n8   1.00\n",
     "line 8: '# Datatype: MPI_INT' after results of MPI_CHAR: import each output as a file of its own"),
    ("# Number of processes: 8\n16   1.00  0.9  1.1  1000\n",
     "line 8: 'Number of processes: 8' after results at 4 ranks: import each output as a file of its own"),
])
def test_a_second_output_in_one_osu_file_is_refused_naming_its_line(tmp_path, after, message):
    f = tmp_path / "two.osu"
    f.write_text(_osu_text(3) + after)
    with pytest.raises(UsageError) as err:
        import_files([f], "osu", results_dir=tmp_path / "res")
    assert str(err.value) == f"{f}, {message}"
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("word, wrong", [("Pass", 0), ("Fail", 1), ("FAIL", 1), ("pass", 0)])
def test_a_size_osu_failed_to_validate_is_a_wrong_row(tmp_path, word, wrong):
    """OSU's -c prints Pass or Fail a size: a failed one is imported as wrong (read and streamed alike), never as
    a correct time."""
    text = ("# OSU MPI Allreduce Latency Test v7.4\n# Number of processes: 4\n# Datatype: MPI_CHAR.\n"
            "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations  Validation\n"
            "4                       3.12              2.90              3.40        1000        Pass\n"
            f"8                       3.20              2.95              3.50        1000        {word}\n")
    f = tmp_path / "checked.osu"
    f.write_text(text)
    run, (parsed,) = import_files([f], "osu", results_dir=tmp_path / "res")
    streamed = [(r.nbytes, r.nwrong, r.ok) for r in open_run(run).rows]
    read = [(r.nbytes, r.nwrong, r.ok) for r in parse_osu(text, 4).rows]
    assert streamed == read == [(4, 0, True), (8, wrong, not wrong)]
    stored = open_run(run).meta["imported"][0]["wrong_rows"]
    assert parsed.wrong_rows == parse_osu(text, 4).wrong_rows == stored == wrong
    said = subprocess.run([sys.executable, "-m", "ccbench", "import", str(f), "--results-dir", str(tmp_path / "cli")],
                          capture_output=True, text=True, timeout=120)
    assert said.returncode == 0 and said.stdout.startswith(
        "2 rows (0 modelled; 1 wrong by the tool's own check) from 1 file(s)" if wrong else "2 rows (0 modelled) from")


def test_results_without_a_datatype_line_are_of_osus_default_type(tmp_path):
    f = tmp_path / "default.osu"
    head = OSU_HEAD.replace("# Datatype: MPI_CHAR.\n", "")
    f.write_text(_osu_text(3, head) + "# Datatype: MPI_CHAR.\n64   1.00  0.9  1.1  1000\n")
    run, _ = import_files([f], "osu", results_dir=tmp_path / "res")
    assert {r.dtype for r in open_run(run).rows} == {"uint8"}
    f.write_text(_osu_text(3, head) + "# Datatype: MPI_INT.\n64   1.00  0.9  1.1  1000\n")
    with pytest.raises(UsageError, match=r"line 7: '# Datatype: MPI_INT' after results of MPI_CHAR"):
        import_files([f], "osu", results_dir=tmp_path / "res2")


@pytest.mark.parametrize("after", [
    "# OSU MPI Allreduce Latency Test v7.4\n",   # the same test's header again (a rerun appended) before new sizes
    "# Datatype: MPI_CHAR.\n# Number of processes: 4\n",  # the same settings said again
    "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n",  # the columns again
])
def test_the_same_header_said_again_is_not_a_second_output(tmp_path, after):
    f = tmp_path / "again.osu"
    f.write_text(_osu_text(3) + after + "65536   9.00  8.0  10.0  1000\n")
    run, _ = import_files([f], "osu", results_dir=tmp_path / "res")
    assert [r.nbytes for r in open_run(run).rows] == [4, 8, 12, 65536]


def test_a_second_file_refused_removes_the_rows_of_the_first(tmp_path):
    good, bad = tmp_path / "good.osu", tmp_path / "bad.csv"
    good.write_text(_osu_text(5000))
    bad.write_text(_csv_text(5000) + "allreduce,ring,4,8,1e-6,float128,sum,2\n")
    with pytest.raises(UsageError, match=r"bad.csv, line 5002: .*unknown dtype 'float128'"):
        import_files([good, bad], results_dir=tmp_path / "res")
    assert not (tmp_path / "res").exists()


def test_while_an_import_is_written_no_run_can_be_seen(tmp_path, monkeypatch):
    """The rows go to a hidden folder without run.json until the run is complete: `latest` and a listing of the
    results see nothing (a killed import leaves only that folder, which claims nothing)."""
    f = tmp_path / "big.osu"
    f.write_text(_osu_text(10_000))
    res = tmp_path / "res"
    extend, seen = RunWriter.extend, []

    def spy(self, rows):
        visible = [p.name for p in res.iterdir() if not p.name.startswith(".")]
        with pytest.raises(UsageError, match="no runs under"):
            latest_run(res)
        seen.append((visible, (self.path / "run.json").exists(), self.path.name))
        return extend(self, rows)

    monkeypatch.setattr(RunWriter, "extend", spy)
    run, _ = import_files([f], "osu", results_dir=res)
    assert len(seen) >= 2 and all(s == ([], False, seen[0][2]) for s in seen)
    assert seen[0][2].startswith(".") and latest_run(res) == run
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_an_import_holds_no_rows(tmp_path):
    """Memory stays bounded: 30,000 OSU lines took 116 MB of Python objects when every row was held (before the
    import streamed), under 20 MB since, whatever the file's length."""
    f = tmp_path / "big.osu"
    f.write_text(_osu_text(30_000))
    tracemalloc.start()
    try:
        import_files([f], "osu", results_dir=tmp_path / "res")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40e6, peak
