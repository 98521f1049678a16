"""ccbench import: OSU, IMB and nccl-tests outputs and CSV timings read into runs that show, compare and fit take."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.analysis.fit import fit_joint
from ccbench.core.errors import UsageError
from ccbench.present.export import export_osu
from ccbench.store.imports import (
    IMPORTED,
    import_files,
    parse_csv,
    parse_imb,
    parse_nccl_tests,
    parse_osu,
    sniff,
    with_model_terms,
)
from ccbench.store.run import open_run

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


def _osu(title: str) -> str:
    return (f"# OSU MPI {title} Test v7.5\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"
            "16                      3.15\n1024                   12.50\n")


@pytest.mark.parametrize("title, collective, algorithm, nbytes", [
    # the headers OMB 5-7 print: each names the MPI call it times
    ("Broadcast Latency", "bcast", "native", [16, 1024]),
    ("All-to-All Personalized Exchange Latency", "alltoall", "native", [64, 4096]),   # per-rank blocks, x 4 ranks
    ("All-to-Allv Personalized Exchange Latency", "alltoallv", "native", [64, 4096]),
    ("Allgatherv Latency", "allgatherv", "native", [64, 4096]),
    ("Gatherv Latency", "gatherv", "native", [64, 4096]),
    ("Scatterv Latency", "scatterv", "native", [64, 4096]),
    ("Reduce_scatter Latency", "reduce_scatterv", "native", [16, 1024]),              # MPI_Reduce_scatter
    ("Reduce_scatter_block Latency", "reduce_scatter", "native", [16, 1024]),         # MPI_Reduce_scatter_block
    ("Broadcast Persistent Latency", "bcast", "native-persistent", [16, 1024]),       # MPI_Bcast_init, Start, Wait
    ("Allreduce Persistent Latency", "allreduce", "native-persistent", [16, 1024]),
    # older and hand-made spellings
    ("Bcast Latency", "bcast", "native", [16, 1024]),
    ("All-to-All Latency", "alltoall", "native", [64, 4096]),
    ("Latency", "pingpong", "native", [16, 1024]),
])
def test_every_osu_collective_test_is_read_as_the_call_it_times(title, collective, algorithm, nbytes):
    rows = parse_osu(_osu(title), 4).rows
    assert [(r.collective, r.algorithm, r.nbytes, r.counts) for r in rows] == [
        (collective, algorithm, n, "uniform") for n in nbytes]
    # count as a sweep has it: elements per block where ccbench's size is P blocks (OSU's per-rank size here)
    blocked = collective in ("alltoall", "alltoallv", "allgatherv", "gatherv", "scatterv", "reduce_scatterv",
                             "reduce_scatter")
    assert [r.count for r in rows] == [n // 4 if blocked else n for n in nbytes]


def test_imb_v_blocks_and_reduce_scatter_are_read_as_the_calls_they_time():
    def block(name, cols="t_min[usec]  t_max[usec]  t_avg[usec]", line="1.00  1.20  1.10"):
        return (f"#---------------------------------------------------\n# Benchmarking {name}\n# #processes = 4\n"
                f"#---------------------------------------------------\n       #bytes #repetitions  {cols}\n"
                f"         1024         1000  {line}\n\n")

    text = "#  Intel(R) MPI Benchmarks 2021.11, MPI-1 part\n" + "".join(
        block(n) for n in ("Allgatherv", "Alltoallv", "Gatherv", "Scatterv", "Reduce_scatter", "Reduce_scatter_block"))
    got = [(r.collective, r.nbytes, r.count, r.dtype) for r in parse_imb(text).rows]
    assert got == [("allgatherv", 4096, 1024, "uint8"), ("alltoallv", 4096, 1024, "uint8"),
                   ("gatherv", 4096, 1024, "uint8"), ("scatterv", 4096, 1024, "uint8"),
                   ("reduce_scatterv", 1024, 64, "float32"), ("reduce_scatter", 1024, 64, "float32")]


@pytest.mark.parametrize("text, want", [
    # osu_barrier prints its times without a size column (OMB 5-7), with -f its min and max too
    ("# Avg Latency(us)\n             12.57\n", (12.57e-6, None, None)),
    ("# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n   12.57   11.02   14.10   1000\n",
     (12.57e-6, 11.02e-6, 14.10e-6)),
    ("# Size  Avg Latency(us)\n0       12.57\n", (12.57e-6, None, None)),  # a hand-made one with a size
])
def test_osu_barrier_without_a_size_column_is_one_row(text, want):
    (row,) = parse_osu("# OSU MPI Barrier Latency Test v7.4\n" + text, 4).rows
    assert (row.collective, row.nbytes, row.count, row.nranks) == ("barrier", 0, 0, 4)
    assert (row.median_s, row.rank_mean_min_s, row.rank_mean_max_s) == pytest.approx(want)


@pytest.mark.parametrize("text, message", [
    ("# Avg Latency(us)\n             12.57\n             12.60\n", "appears twice (lines 3 and 4)"),
    ("# Avg Latency(us)\n             abc\n", "avg latency(us) 'abc' is not a number"),
    ("# Avg Latency(us)\n             12.57", "the last line has no line end"),
])
def test_osu_barrier_lines_are_checked_as_any_others(text, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        parse_osu("# OSU MPI Barrier Latency Test v7.4\n" + text, 4)


def test_osu_non_blocking_tests_are_refused_in_one_line():
    text = ("# OSU MPI Non-blocking Allreduce Latency Test v7.5\n# Overall = Coll. Init + Compute + MPI_Test + "
            "MPI_Wait\n# Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n"
            "4                    10.10              5.00              4.90             96.00\n")
    with pytest.raises(UsageError) as err:
        parse_osu(text, 4)
    assert str(err.value) == ("file: OSU test 'Non-blocking Allreduce' times a non-blocking collective beside "
                              "computation (Overall, Compute, Pure Comm.): import its blocking test")
    with pytest.raises(UsageError) as err:
        parse_osu("# OSU MPI Put Latency Test v7.4\n# Size  Latency (us)\n8  1.0\n", 2)
    assert str(err.value) == "file: OSU test 'Put' is not a collective ccbench knows"
    # a header of bandwidths, not times, under a latency test: nothing is read as a time
    with pytest.raises(UsageError) as err:
        parse_osu("# OSU MPI Allreduce Latency Test v7.4\n# Size      Bandwidth (MB/s)\n8   100.00\n", 2)
    assert str(err.value) == "file: an OSU header but no result lines"


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
    with pytest.raises(UsageError, match="not an OSU, IMB-MPI1 or nccl-tests output nor a ccbench CSV"):
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
    opened = open_run(run)
    meta, rows = opened.meta, opened.rows
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


# --------------------------------------------------------------------------- nccl-tests


def test_nccl_tests_text_gives_out_of_place_and_in_place_rows_at_every_rank():
    p = parse_nccl_tests((FOREIGN / "nccl_all_reduce_perf_2x4.txt").read_text())
    assert p.tool == "nccl-tests" and p.version.startswith("nccl-tests version 2.13.11")
    assert p.options["hosts"] == ["gpu-n017", "gpu-n018"] and p.options["avg_bus_bandwidth_gbs"] == 4.5141
    assert len(p.rows) == 18 and {r.nranks for r in p.rows} == {8}  # 8 '#  Rank' lines
    out, inp = p.rows[10], p.rows[11]  # 262144 B
    assert (out.collective, out.nbytes, out.count, out.dtype, out.op, out.in_place) == (
        "allreduce", 262144, 65536, "float32", "sum", False)
    assert inp.in_place and (out.median_s, inp.median_s) == pytest.approx((121.4e-6, 119.8e-6))
    assert out.rank_mean_avg_s == out.median_s and out.timing == "batched:20" and out.samples == 0
    # nccl-tests' own busbw (3.78 GB/s, factor 2(P-1)/P) from ccbench's definition
    assert out.busbw_gbs == pytest.approx(3.78, abs=0.005)


def test_nccl_tests_older_table_without_root_and_without_checks():
    p = parse_nccl_tests((FOREIGN / "all_gather_perf_g4.txt").read_text(), where="all_gather_perf_g4.txt")
    assert "version not printed" in p.version and p.options["nGpus"] == 4
    big = [r for r in p.rows if r.nbytes == 1048576]
    # size is the gathered receive buffer (ccbench's allgather nbytes); count one rank's block
    assert [(r.nranks, r.count, r.in_place, r.op, r.nwrong) for r in big] == [(4, 65536, False, "none", 0),
                                                                            (4, 65536, True, "none", 0)]
    assert big[0].busbw_gbs == pytest.approx(8.12, abs=0.005) and big[0].timing == "batched:50"


def test_nccl_tests_json_counts_processes_times_gpus():
    p = parse_nccl_tests((FOREIGN / "reduce_scatter_perf.json").read_text())
    assert p.version == "nccl-tests JSON v2 (reduce_scatter_perf, NCCL 22304)"
    assert p.options["ngpus"] == 2 and p.options["hosts"] == ["h100-a12"]
    r = next(r for r in p.rows if r.nbytes == 16777216 and not r.in_place)
    # two processes x two GPUs; size is the send buffer, count one rank's received block
    assert (r.collective, r.nranks, r.count, r.median_s) == ("reduce_scatter", 4, 1048576, pytest.approx(3522.7e-6))


def test_nccl_tests_ranks_from_the_process_count_when_no_rank_lines():
    text = ("# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 10 agg iters: 2 "
            "validation: 1\n#       size         count      type   redop    root     time   algbw   busbw #wrong"
            "     time   algbw   busbw #wrong\n           8             2     float     sum      -1    10.00    0.00"
            "    0.00      0    10.50    0.00    0.00      3\n")
    p = parse_nccl_tests(text, 3, where="all_reduce_perf.log")
    assert [(r.nranks, r.in_place, r.nwrong, r.timing) for r in p.rows] == [(6, False, 0, "batched:20"),
                                                                           (6, True, 3, "batched:20")]
    with pytest.raises(UsageError, match="give --nranks"):
        parse_nccl_tests(text, where="all_reduce_perf.log")


def test_nccl_tests_refusals_name_the_reason(tmp_path):
    table = (FOREIGN / "nccl_all_reduce_perf_2x4.txt").read_text()
    with pytest.raises(UsageError, match="sendrecv_perf has no ccbench counterpart: every rank sends"):
        parse_nccl_tests(table.replace("all_reduce_perf", "sendrecv_perf"))
    anonymous = "\n".join(ln for ln in table.splitlines() if "Collective test" not in ln)
    with pytest.raises(UsageError, match="cannot tell which nccl-tests program"):
        parse_nccl_tests(anonymous, where="results.txt")
    assert parse_nccl_tests(anonymous, where="runs/broadcast_perf.out").rows[0].collective == "bcast"
    with pytest.raises(UsageError, match="not an nccl-tests output"):
        parse_nccl_tests("# nThread 1 nGpus 1\n", where="x")
    with pytest.raises(UsageError, match="not nccl-tests'"):
        parse_nccl_tests('{"a": 1}', where="x.json")


# --------------------------------------------------------------------------- CSV


def test_csv_launches_of_samples_pool_at_the_launch_level():
    p = parse_csv((FOREIGN / "timings_launches.csv").read_text())
    assert p.options["ppn"] == {"2": 1, "4": 1} and p.options["nodes"] == {"2": 2, "4": 4}
    ring = next(r for r in p.rows if r.algorithm == "ring")
    assert (ring.launches, ring.launch_samples, ring.samples, ring.count) == ((1, 2), (3, 3), 6, 8192)
    # typical time: the geometric mean of the two launches' medians (store/launches.py)
    assert ring.median_s == pytest.approx((8.84e-5 * 9.28e-5) ** 0.5)
    assert ring.ci_low_s < ring.median_s < ring.ci_high_s and IMPORTED in ring.flags
    assert {r.algorithm for r in p.rows} == {"native", "ring", "my_tree"}  # an unknown name is kept


def test_csv_summaries_and_samples_without_launches():
    summary = parse_csv("collective,algorithm,nranks,nbytes,time_s\nallreduce,ring,8,1024,2.5e-5\n"
                        "allreduce,ring,16,1024,3.5e-5\n")
    assert [(r.nranks, r.median_s, r.samples, r.dtype, r.op) for r in summary.rows] == [
        (8, 2.5e-5, 0, "unknown", "sum"), (16, 3.5e-5, 0, "unknown", "sum")]
    samples = parse_csv("collective,nbytes,algorithm,nranks,time_s,sample,dtype\n"
                        + "".join(f"bcast,4096,binomial,4,{t},{i},float32\n" for i, t in enumerate([3e-6, 5e-6, 4e-6])))
    (r,) = samples.rows
    assert (r.samples, r.median_s, r.min_s, r.max_s, r.count) == (3, 4e-6, 3e-6, 5e-6, 1024)


@pytest.mark.parametrize(("text", "message"), [
    ("collective,algorithm,nranks,nbytes\n", "missing columns time_s"),
    ("collective,algorithm,nranks,nbytes,time_s,hosts\n", "unknown columns hosts"),
    ("collective,algorithm,nranks,nbytes,time_s\nallreduc,ring,4,8,1e-6\n", "line 2: unknown collective 'allreduc'"),
    ("collective,algorithm,nranks,nbytes,time_s\nallreduce,ring,4,8,-1\n", "time_s '-1' is not a time"),
    ("collective,algorithm,nranks,nbytes,time_s\nallreduce,ring,four,8,1e-6\n", "nranks must be a whole number"),
    ("# comment\ncollective,algorithm,nranks,nbytes,time_s\nallreduce,ring,4,8,1e-6\nallreduce,ring,4,8,2e-6\n",
     "line 4: the case allreduce/ring/4/8 B appears twice: add a 'sample' column"),
    ("collective,algorithm,nranks,nbytes,time_s,ppn\nallreduce,ring,4,8,1e-6,1\nallreduce,ring,4,16,1e-6,2\n",
     "different nodes/ppn"),
])
def test_bad_csv_files_are_refused_with_the_reason(text, message):
    with pytest.raises(UsageError, match=message):
        parse_csv(text, where="t.csv")


# --------------------------------------------------------------------------- model terms and fit


def _cost(collective, algorithm, nranks, nbytes, ranks_per_node):
    alg = REGISTRY[collective].get(algorithm)
    return None if alg is None or alg.cost is None else alg.cost(nranks, nbytes)


def test_model_terms_are_the_registrys_cost_and_only_where_known():
    p = parse_csv((FOREIGN / "timings_launches.csv").read_text())
    rows = {r.algorithm: r for r in with_model_terms(p.rows, _cost)}
    c = REGISTRY["allreduce"]["ring"].cost(4, 65536)  # 2(P-1) steps, 2n(P-1)/P bytes, n(P-1)/P reduced
    assert (rows["ring"].steps_max, rows["ring"].step_bytes_max, rows["ring"].reduced_bytes_max) == (
        6, 98304, 49152) == (c.alpha, c.beta, c.gamma)
    assert rows["my_tree"].steps_max is None and rows["native"].steps_max is None


def _synthetic_csv(path, alpha_s, beta_s, gamma_s):
    """Ping-pong and three allreduce algorithms at P = 4, 8, 16 timed by a known alpha-beta-gamma model."""
    lines = ["collective,algorithm,nranks,nbytes,time_s,launch"]
    for n in (8, 512, 32768, 2097152):
        lines += [f"pingpong,native,2,{n},{(alpha_s + beta_s * n) * f!r},{k}" for k, f in ((1, 0.99), (2, 1.01))]
        for P in (4, 8, 16):
            for alg in ("ring", "recursive_doubling", "rabenseifner"):
                t = REGISTRY["allreduce"][alg].cost(P, n).time_s(alpha_s, beta_s, gamma_s)
                lines += [f"allreduce,{alg},{P},{n},{t * f!r},{k}" for k, f in ((1, 0.99), (2, 1.01))]
    path.write_text("\n".join(lines) + "\n")


def test_an_imported_csv_fits_back_its_alpha_beta_gamma(tmp_path):
    _synthetic_csv(tmp_path / "t.csv", 3e-6, 2e-10, 4e-10)
    run, (parsed,) = import_files([tmp_path / "t.csv"], results_dir=tmp_path / "res", cost=_cost)
    assert {r.nranks for r in parsed.rows} == {2, 4, 8, 16} and len(parsed.rows) == 40
    rows = open_run(run).rows
    joint = fit_joint([r.to_dict() for r in rows], n_boot=0)
    assert joint.n_points == 36  # every allreduce row, none of the ping-pong rows
    assert (joint.alpha_s, joint.beta_s_per_byte, joint.gamma_s_per_byte) == pytest.approx((3e-6, 2e-10, 4e-10),
                                                                                           rel=0.02)


def test_fit_and_predict_run_on_an_imported_csv(tmp_path):
    _synthetic_csv(tmp_path / "t.csv", 3e-6, 2e-10, 4e-10)
    r = _ccbench("import", str(tmp_path / "t.csv"), "--results-dir", str(tmp_path / "res"), "--name", "synth")
    assert r.returncode == 0, r.stderr
    assert "40 rows (36 modelled) from 1 file(s) (CSV)" in r.stdout
    (run,) = (tmp_path / "res").iterdir()
    meta = open_run(run).meta
    assert meta["nranks"] == 16 and meta["imported"][0]["modelled_rows"] == 36
    fit = _ccbench("fit", str(run))
    assert fit.returncode == 0, fit.stderr[-2000:]
    assert "joint (counted traffic)" in fit.stdout and "rabenseifner" in fit.stdout
    pred = _ccbench("predict", "--from", str(run), "-n", "64", "-s", "1M", "-C", "allreduce")
    assert pred.returncode == 0, pred.stderr[-2000:]
    assert "rabenseifner" in pred.stdout


def test_import_of_nccl_tests_files_records_provenance(tmp_path):
    files = [FOREIGN / "nccl_all_reduce_perf_2x4.txt", FOREIGN / "reduce_scatter_perf.json"]
    r = _ccbench("import", *map(str, files), "--results-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    (run,) = tmp_path.iterdir()
    opened = open_run(run)
    meta, rows = opened.meta, opened.rows
    assert [d["tool"] for d in meta["imported"]] == ["nccl-tests", "nccl-tests"]
    assert meta["imported"][1]["options"]["args"].endswith("-J rs.json")
    assert len(rows) == 18 + 6 and meta["hosts"] == ["gpu-n017", "gpu-n018", "h100-a12"]


@pytest.mark.parametrize(("name", "message"), [
    ("notes.txt", "not an OSU, IMB-MPI1 or nccl-tests output nor a ccbench CSV"),
    ("bad.csv", "bad.csv, line 2: time_s 'x' is not a time"),
    ("all_reduce_perf_g4.txt", "lists no '#  Rank' lines: give --nranks"),
])
def test_bad_files_exit_2_with_one_line_and_write_nothing(tmp_path, name, message):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "bad.csv").write_text("collective,algorithm,nranks,nbytes,time_s\nallreduce,ring,4,8,x\n")
    (tmp_path / "all_reduce_perf_g4.txt").write_text(
        "# nThread 1 nGpus 4\n#  size  count  type  redop  root  time algbw busbw #wrong\n"
        "8 2 float sum -1 1.0 0 0 0 1.0 0 0 0\n")
    good = FOREIGN / "timings_launches.csv"  # a good file first: still nothing is written
    r = _ccbench("import", str(good), str(tmp_path / name), "--results-dir", str(tmp_path / "res"))
    assert r.returncode == 2 and message in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    assert not (tmp_path / "res").exists()
