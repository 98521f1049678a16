"""The command line: listing, showing a stored run, launching end to end, faults (bad input: test_bad_input)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccbench.cli import cli

REPO = Path(__file__).resolve().parent.parent


def test_help_and_list():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and "launch" in r.output and "trace" in r.output
    r = CliRunner().invoke(cli, ["list"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for coll in ("allreduce", "bcast", "pingpong", "barrier", "reduce_scatter"):
        assert coll in r.output


def test_python_dash_m_ccbench():
    r = subprocess.run([sys.executable, "-m", "ccbench", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and "version" in r.stdout


def _launch(tmp_path, *args, timeout=240):
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "ccbench", "launch", *args,
                           "--results-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def test_launch_end_to_end_then_show(tmp_path):
    r = _launch(tmp_path, "-n", "2", "-C", "allreduce,bcast,pingpong,barrier", "-s", "8:4K:8",
                "--min-reps", "5", "--budget", "0.1")
    assert r.returncode == 0, r.stderr
    runs = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert len(runs) == 1
    meta = json.loads((runs[0] / "run.json").read_text())
    assert meta["status"] == "complete" and meta["nranks"] == 2 and meta["failed_cases"] == 0
    rows = (runs[0] / "cases.jsonl").read_text().splitlines()
    assert len(rows) == meta["planned_cases"] == 3 * 4 + 1
    assert "allreduce" in r.stdout and "all correct" in r.stdout
    shown = CliRunner().invoke(cli, ["show", str(runs[0])], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "pingpong" in shown.output


def test_launch_refuses_bad_input_without_touching_results(tmp_path):
    r = _launch(tmp_path, "-n", "2", "-C", "allreduce", "--sizes", "-4")
    assert r.returncode == 2 and "sizes cannot be negative" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_sigterm_keeps_finished_rows(tmp_path):
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-s", "8:8M",
         "--budget", "0.2", "--target-rse", "0.00001", "--results-dir", str(tmp_path), "--no-show"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline = time.time() + 60
    jsonl = None
    while time.time() < deadline:  # wait until a few rows are on disk
        found = list(tmp_path.glob("*/cases.jsonl"))
        if found and found[0].read_text().count("\n") >= 3:
            jsonl = found[0]
            break
        time.sleep(0.1)
    assert jsonl is not None, "no rows appeared"
    proc.send_signal(signal.SIGTERM)  # to `ccbench launch` only: it forwards to the launcher
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    meta = json.loads((jsonl.parent / "run.json").read_text())
    assert meta["status"] == "interrupted", (meta["status"], err)
    # the last line says how to go on (the count of rows kept was said before the tables)
    assert err.splitlines()[-1] == ("ccbench: stopped by SIGTERM; continue it with: ccbench launch --resume "
                                    f"{jsonl.parent}")
    n = jsonl.read_text().count("\n")
    assert n >= 3 and meta["finished_cases"] == n
    assert all(json.loads(line)["nwrong"] == 0 for line in jsonl.read_text().splitlines())

    # a crash mid-write leaves a torn line; --resume drops it and finishes the sweep
    with open(jsonl, "a") as f:
        f.write('{"collective": "allre')
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "--resume", str(jsonl.parent),
                        "--budget", "0.3"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "differs in" in r.stderr and "budget_s" in r.stderr  # refused, untouched
    assert jsonl.read_text().endswith('"allre')
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
                        "--resume", str(jsonl.parent)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "the run has 2 ranks, -n asks for 3: give -n 2 to resume it" in r.stderr
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "--resume", str(jsonl.parent),
                        "--no-show"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    meta = json.loads((jsonl.parent / "run.json").read_text())
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    keys = [(x["collective"], x["nbytes"]) for x in rows]
    assert meta["status"] == "complete" and len(keys) == len(set(keys)) == meta["planned_cases"]
    assert meta["finished_cases"] == len(rows) and meta["resumed"][0]["finished_before"] == n
    assert (jsonl.parent / "cases.csv").read_text().count("\n") == len(rows) + 1


def test_every_algorithm_at_5_ranks_is_exact(tmp_path):
    """configs/algorithms.toml runs every algorithm of every collective; at 5 ranks nothing is wrong."""
    r = _launch(tmp_path, "-n", "5", "--oversubscribe", "-c", "configs/algorithms.toml", "--budget", "0.05",
                "--max-reps", "20", "--no-show", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    rows = [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines()]
    from ccbench.algorithms import REGISTRY
    from ccbench.core.placement import node_aware

    # all: not native:*, not the persistent forms; and one node gives the hierarchical algorithms no two levels:
    # skipped, with the reason
    hier = {(c, a) for c, algs in REGISTRY.items() for a, alg in algs.items() if node_aware(alg)}
    assert {(r["collective"], r["algorithm"]) for r in rows} == {
        (c, a) for c, algs in REGISTRY.items() for a, alg in algs.items() if alg.in_all} - hier
    skipped = json.loads((run / "run.json").read_text())["skipped"]
    assert hier and hier <= {tuple(s["what"].split()[0].split("/")) for s in skipped if "no node hierarchy" in s["why"]}
    assert all(r["nwrong"] == 0 for r in rows)
    hand = [r for r in rows if not REGISTRY[r["collective"]][r["algorithm"]].native]
    assert hand and all(r["steps_max"] is not None for r in hand)


def test_watchdog_ends_a_hung_case_then_resume_finishes(tmp_path):
    """A rank stuck in one case: the job ends in seconds naming the case; earlier rows stay."""
    env = dict(os.environ, CCBENCH_FAULT="hang:1:allreduce/native:64")
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
                        "-C", "allreduce", "-s", "8:1K",
                        "--watchdog", "2", "--budget", "0.1", "--results-dir", str(tmp_path), "--no-show"],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    rows = (run / "cases.jsonl").read_text().splitlines()
    kept = f"{len(rows)} finished case" + ("" if len(rows) == 1 else "s")
    assert lines == ["ccbench: error: watchdog: allreduce/native 64 B float32 sum at 3 ranks did not finish "
                     "within 2 s past its budget; ending the job",
                     f"ccbench: error: {kept} kept in {run}, marked failed; continue it with --resume {run}"]
    assert meta["status"] == "failed" and "watchdog" in meta["failure"]
    before = [json.loads(x)["nbytes"] for x in rows]  # the cases that ran before 64 B, in the shuffled order
    # 64 B may come anywhere in the shuffled order, last included (then every other case ran before it)
    assert 64 not in before and set(before) <= {8, 16, 32, 128, 256, 512, 1024}
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
                        "--resume", str(run), "--no-show"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    after = [json.loads(x)["nbytes"] for x in (run / "cases.jsonl").read_text().splitlines()]
    assert after[:len(before)] == before and sorted(after) == [8, 16, 32, 64, 128, 256, 512, 1024]
    order = [8, 16, 32, 64, 128, 256, 512, 1024]
    import numpy as np

    seed = json.loads((run / "run.json").read_text())["order_seed"]
    assert after == [order[i] for i in np.random.default_rng(seed).permutation(8)]  # the recorded order, resumed
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_a_rank_that_dies_ends_the_job_and_the_run_says_failed(tmp_path):
    """A rank exits mid-sweep without finalising MPI: the job ends in seconds, finished rows stay,
    run.json says failed and why, and --resume finishes the sweep."""
    import time

    env = dict(os.environ, CCBENCH_FAULT="exit:1:allreduce/native:64")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
                        "-C", "allreduce", "-s", "8:1K",
                        "--order", "planned", "--budget", "0.1", "--results-dir", str(tmp_path), "--no-show"],
                       capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert r.returncode != 0 and time.monotonic() - t0 < 60
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    # the launcher ended rank 0 and marked the run (one line), or rank 0 saw its peer gone first (its line, then the
    # launcher's): either way the last line says what was kept and how to go on
    assert len(lines) in (1, 2) and "3 finished cases kept" in lines[-1], r.stderr
    assert lines[-1].endswith(f"--resume {run}")
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "a rank crashed, was killed or aborted" in meta["failure"]
    assert meta["finished_cases"] == 3
    rows = [json.loads(x) for x in (run / "cases.jsonl").read_text().splitlines()]
    assert [x["nbytes"] for x in rows] == [8, 16, 32] and all(x["nwrong"] == 0 for x in rows)
    shown = CliRunner().invoke(cli, ["show", str(run)], env={"COLUMNS": "200"})
    assert f"failed: {meta['failure']}"[:60] in shown.output.replace("\n", " ")  # show says why it failed

    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "3", "--oversubscribe",
                        "--resume", str(run), "--no-show"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and "failure" not in meta
    assert meta["resumed"][0]["status_before"] == "failed" and "crashed" in meta["resumed"][0]["failure_before"]
    rows = [json.loads(x) for x in (run / "cases.jsonl").read_text().splitlines()]
    assert [x["nbytes"] for x in rows] == [8, 16, 32, 64, 128, 256, 512, 1024]


def test_list_and_show_take_the_collectives_wanted(capsys):
    from ccbench.cli import main

    env = {"COLUMNS": "200"}
    out = CliRunner().invoke(cli, ["list", "allreduce", "bcast"], env=env)
    assert out.exit_code == 0
    firsts = [ln.split("│")[1].strip() for ln in out.output.splitlines() if ln.startswith("│")]
    assert [c for c in firsts if c] == ["bcast", "allreduce"]  # the registry's order
    with pytest.raises(SystemExit) as exc:
        main(["list", "allreduc"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "did you mean 'allreduce'?" in err
    run = str(REPO / "tests" / "data" / "run-np2")
    shown = CliRunner().invoke(cli, ["show", run, "-C", "bcast"], env=env)
    assert shown.exit_code == 0 and "bcast" in shown.output and "allreduce" not in shown.output
    assert "pingpong" not in shown.output
    with pytest.raises(SystemExit) as exc:
        main(["show", run, "-C", "scatter"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "has no scatter cases (it has pingpong, allreduce, bcast)" in err


def test_show_defines_every_flag_it_prints():
    from ccbench.core.stats import FLAG_DESCRIPTIONS
    from ccbench.store.run import open_run

    run = REPO / "tests" / "data" / "run-np2"
    shown = {f for r in open_run(run).rows for f in r.flags}
    out = CliRunner().invoke(cli, ["show", str(run)], env={"COLUMNS": "1000"}).output
    (legend,) = [ln for ln in out.splitlines() if ln.startswith("flags: ")]
    assert shown and legend == "flags: " + "; ".join(f"{f} = {FLAG_DESCRIPTIONS[f]}" for f in
                                                     dict.fromkeys(f for r in open_run(run).rows for f in r.flags))
    clean = CliRunner().invoke(cli, ["show", str(REPO / "tests" / "data" / "wl-overlap-np2")],
                               env={"COLUMNS": "1000"}).output
    flagged = any(r.flags for r in open_run(REPO / "tests" / "data" / "wl-overlap-np2").rows)
    assert ("flags: " in clean) == flagged


@pytest.mark.parametrize("fastest, bands", [
    ([], []),
    ([(8, "ring")], [(8, 8, "ring")]),
    ([(8, "native"), (64, "native"), (512, "ring"), (4096, "ring")], [(8, 64, "native"), (512, 4096, "ring")]),
    ([(8, "a"), (64, "b"), (512, "a")], [(8, 8, "a"), (64, 64, "b"), (512, 512, "a")]),  # a band never jumps
])
def test_size_bands(fastest, bands):
    from types import SimpleNamespace

    from ccbench.analysis.fastest import size_bands

    assert size_bands([SimpleNamespace(nbytes=n, fastest=f) for n, f in fastest]) == bands


def test_show_ends_with_what_the_sweep_found():
    out = CliRunner().invoke(cli, ["show", str(REPO / "tests" / "data" / "run-np4")], env={"COLUMNS": "1000"}).output
    lines = out.splitlines()
    assert lines[-1].startswith("95 cases in ")
    assert lines[-2] == ("allreduce (float32 sum): fastest native 8 B, linear 64 B, hierarchical 512 B-4 KiB, "
                         "recursive_doubling 32 KiB (0 of 5 sizes decided at the launch level); peak bus bandwidth "
                         "0.806 GB/s (recursive_doubling, 32 KiB)")
    assert any(ln.startswith("bcast: fastest ") for ln in lines[-6:])


@pytest.mark.parametrize("copy_gbs, said", [
    (1.612, "50% of the node's memory copy limit)"),
    (0.403, "200% of the node's memory copy limit: above it, the data stayed in cache)"),
])
def test_the_peak_is_held_against_the_memory_limit_and_above_it_said_to_be_cache(copy_gbs, said):
    from ccbench.present.views import answer_lines
    from ccbench.store.run import open_run

    run = open_run(REPO / "tests" / "data" / "run-np4")
    # one node of 4 ranks copying 2e9 x copy_gbs counted bytes in a second: a per-rank limit of copy_gbs
    record = {"one_core": {"host": "n1", "counted_bytes": 10**9, "seconds": [1.0], "nbytes": 1 << 20},
              "all_ranks": [{"host": "n1", "ranks": 4, "counted_bytes": round(2e9 * copy_gbs), "seconds": [1.0],
                             "nbytes": 1 << 20}]}
    line = next(ln for ln in answer_lines(run.rows, {**run.meta, "memory_bandwidth": record})
                if ln.startswith("allreduce"))
    assert line.endswith("peak bus bandwidth 0.806 GB/s (recursive_doubling, 32 KiB, " + said)


def test_a_sweep_ends_with_what_it_found_and_leaves_the_tables_to_show(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce,bcast", "-a",
                        "native,ring,binomial", "-s", "8,64K", "--min-reps", "3", "--max-reps", "5", "--budget",
                        "0.05", "--results-dir", "res"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "COLUMNS": "300"})
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    lines = r.stdout.splitlines()
    assert lines[-1].endswith(f"all correct; every case as tables: ccbench show {run.relative_to(tmp_path)}")
    assert any(ln.startswith("allreduce (float32 sum): fastest ") for ln in lines)
    assert any(ln.startswith("bcast: fastest ") for ln in lines)
    assert not any("┃ algorithm" in ln for ln in lines)  # no table of every case


def test_predict_from_an_oversubscribed_run_says_what_that_does_to_it():
    env = {"COLUMNS": "300"}
    note = ("note: run-np4 was measured with more ranks than cores (oversubscribed): its times include waits for the "
            "scheduler, so predictions from it overstate every latency-bound time")
    for argv in (["predict", "--from", str(REPO / "tests" / "data" / "run-np4"), "-n", "64", "-s", "8:1K"],
                 ["workload", "predict", "ddp", "-m", "resnet50", "-n", "64",
                  "--from", str(REPO / "tests" / "data" / "run-np4")]):
        out = CliRunner().invoke(cli, argv, env=env)
        assert out.exit_code == 0, out.output
        assert out.output.splitlines()[-1] == note
    fine = CliRunner().invoke(cli, ["predict", "--from", str(REPO / "tests" / "data" / "run-np2"), "-n", "64", "-s",
                                    "8"], env=env)
    assert fine.exit_code == 0 and "oversubscribed" not in fine.output


def test_the_flag_legend_defines_launch_spread_only_where_the_launch_notes_do_not():
    import dataclasses

    from ccbench.core.stats import FLAG_DESCRIPTIONS
    from ccbench.present.views import flag_legend, launch_notes
    from ccbench.store.run import open_run

    row = open_run(REPO / "tests" / "data" / "run-np2").rows[0]
    one = dataclasses.replace(row, flags=("launch_spread", "outliers"), launches=(), launch_samples=())
    several = dataclasses.replace(one, launches=(1, 2), launch_samples=(row.samples - 1, 1))
    assert flag_legend([one]) == ("flags: launch_spread = " + FLAG_DESCRIPTIONS["launch_spread"] + "; outliers = "
                                  + FLAG_DESCRIPTIONS["outliers"])
    assert flag_legend([several]) == "flags: outliers = " + FLAG_DESCRIPTIONS["outliers"]
    assert FLAG_DESCRIPTIONS["launch_spread"] in launch_notes([several])[0]  # defined there, once
    assert flag_legend([dataclasses.replace(row, flags=())]) is None


def test_list_puts_the_installed_library_s_variants_before_the_hand_written_and_others_last():
    from ccbench.present.views import algorithms_table

    def order(library):
        t = algorithms_table(["allreduce"], library)
        return [(row[1], row[2]) for row in t.rows]

    mpich = order("mpich")
    names = [n for n, _ in mpich]
    assert names[0] == "native" and names.index("native:smp") < names.index("ring") < names.index("native:basic_linear")
    assert ("native:basic_linear", "native (Open MPI only)") in mpich and ("native:smp", "native") in mpich
    ompi = order("openmpi")
    names = [n for n, _ in ompi]
    assert names.index("native:basic_linear") < names.index("ring") < names.index("native:smp")
    assert ("native:smp", "native (MPICH only)") in ompi
    assert all("only" not in kind for _, kind in order(None))  # no library known: nothing called foreign


@pytest.mark.parametrize("argv, words", [
    (["tune", str(REPO / "tests" / "data" / "run-np2")], "Missing option '--format'. Choose from: mpich-json, "),
    (["export", str(REPO / "tests" / "data" / "run-np2"), "--format", "nope"], "'nope' is not one of 'osu', "),
])
def test_a_usage_error_of_click_is_one_line_too(argv, words, capsys):
    """click lists a required choice's values one per line; the error line joins them."""
    from ccbench.cli import main

    with pytest.raises(SystemExit) as end:
        main(argv)
    err = capsys.readouterr().err
    assert end.value.code == 2 and err.count("\n") == 1 and err.startswith("ccbench: error: ") and words in err
