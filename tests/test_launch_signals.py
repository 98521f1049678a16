"""A stop signal is honoured in every launch path (issue 26, item 5): hydra exits 15 when its ranks die of SIGTERM,
which was not read as a signal, and a SIGTERM during a launch's last case was swallowed -- the next launch ran and
the run ended complete with exit code 0.  Now the process that got the signal says so, whatever the launcher's exit
code, and a run of several launches stops there, interrupted."""

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from ccbench.commands.common import run_launcher
from ccbench.measure.launcher import run_job
from ccbench.measure.multilaunch import Replication, launch_parts, replicated
from ccbench.store.results import Row, RunWriter
from ccbench.store.run import open_run

#: A launcher that, told to stop, ends with exit code 15 as hydra does when its ranks die of SIGTERM.
LIKE_HYDRA = [sys.executable, "-c", "import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *a: sys.exit(15))\n"
              "print('ready', flush=True)\ntime.sleep(60)"]


def _term_soon(delay: float = 0.5) -> threading.Timer:
    t = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGTERM))
    t.start()
    return t


def test_a_job_remembers_the_stop_signal_whatever_the_launcher_exits_with():
    t = _term_soon()
    job = run_job(LIKE_HYDRA, dict(os.environ))
    t.join()
    assert (job.code, job.signal) == (15, signal.SIGTERM)  # hydra's 15 alone did not say "signal"
    t = _term_soon()
    assert run_launcher(LIKE_HYDRA, dict(os.environ)) == 128 + signal.SIGTERM
    t.join()
    assert run_job([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ)).signal is None


def _row(nbytes: int, t: float) -> Row:
    return Row(collective="allreduce", algorithm="native", nbytes=nbytes, count=nbytes // 4, dtype="float32",
               op="sum", in_place=False, root=0, nranks=2, samples=2, min_s=t, median_s=t, mean_s=t, p95_s=t,
               p99_s=t, max_s=t, stddev_s=0.0, ci_low_s=t, ci_high_s=t, algbw_gbs=1.0, busbw_gbs=1.0, msgs_max=None,
               bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None, step_bytes_max=None,
               reduced_bytes_max=None, nwrong=0, stop_reason="target_rse", sync="barrier", samples_s=(t, t))


def _stopping_launcher(ran: list):
    """A stand-in run_launcher: each launch stores one row and completes; launch 2 was told SIGTERM meanwhile."""

    def fake_launcher(cmd, env, merged):
        kw = dict(cmd)
        ran.append(kw["launch_index"])
        d = Path(kw["results_dir"]) / f"20260101-000000_h_np2_{kw['tag']}"
        d.mkdir(parents=True)
        w = RunWriter(d, {"nranks": 2, "launch": kw["launch_index"], "order_seed": 1})
        w.append(_row(8, 1e-6 * kw["launch_index"]))
        w.update(status="complete")
        w.close()
        return 128 + signal.SIGTERM if kw["launch_index"] == 2 else 0  # run_launcher's code for a stopped job

    return fake_launcher


def test_a_signal_during_the_last_case_of_a_launch_stops_the_run_interrupted(tmp_path):
    """Launch 2 finishes its last case although SIGTERM came (its run says complete): launch 3 must not start."""
    ran: list = []
    fake_launcher = _stopping_launcher(ran)
    rep = Replication({"launches": 3}, 3, "shuffled", 1, str(tmp_path), replicated(3), [], lambda part: {},
                      lambda r: (r.collective, r.algorithm, r.nbytes))
    code, dest = launch_parts(rep, {}, lambda kw: sorted(kw.items()), {}, fake_launcher, 2, ["ccbench"],
                              say=lambda line: None)
    assert ran == [1, 2] and code == 128 + signal.SIGTERM
    meta = open_run(dest).meta
    assert meta["status"] == "interrupted" and [p["status"] for p in meta["parts"]] == ["complete", "interrupted"]


def test_a_stopped_run_of_several_launches_ends_with_how_to_continue_the_whole_run(tmp_path, monkeypatch, capsys):
    """The last line of `ccbench launch --launches K` stopped by a signal names the merged run, after its tables."""
    import ccbench.commands.common as common

    monkeypatch.setattr(common, "run_launcher", _stopping_launcher([]))
    rep = Replication({"launches": 3}, 3, "shuffled", 1, str(tmp_path), replicated(3), [],
                      lambda part: {}, lambda r: (r.collective, r.algorithm, r.nbytes))
    with pytest.raises(SystemExit) as exc:
        common.start_jobs([], lambda kw: sorted(kw.items()), {}, replication=rep, kw={}, nranks=2, resume=None,
                          resume_with="ccbench launch")
    assert exc.value.code == 128 + signal.SIGTERM
    (merged,) = tmp_path.iterdir()
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"ccbench: stopped by SIGTERM; continue it with: ccbench launch --resume {merged}"


def _processes_with(text: str) -> list[int]:
    """Processes of this machine whose command line holds `text`."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def _start_sweep(tmp_path, new_group: bool = False):
    import subprocess
    import sys
    import time

    res = tmp_path / "unique-results-dir"
    proc = subprocess.Popen([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-s", "8:8M",
                             "--budget", "0.3", "--target-rse", "0.00001", "--results-dir", str(res), "--no-show"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=new_group)
    deadline = time.time() + 60
    while time.time() < deadline:  # until a row is on disk
        found = list(res.glob("*/cases.jsonl"))
        if found and found[0].read_text().count("\n") >= 1:
            return proc, found[0].parent
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("no rows appeared")


def test_a_killed_ccbench_launch_takes_its_job_with_it(tmp_path):
    """SIGKILL cannot be caught: the launcher it started gets SIGTERM from the kernel (PR_SET_PDEATHSIG), passes it
    to the ranks, which stop between cases: nothing is left running and the run says interrupted."""
    import time

    if not Path("/proc/self").exists():
        pytest.skip("needs Linux's /proc")
    proc, run = _start_sweep(tmp_path)
    proc.kill()
    proc.wait()
    deadline = time.time() + 60
    while _processes_with("unique-results-dir") and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_with("unique-results-dir") == []
    assert open_run(run).meta["status"] == "interrupted"


def test_a_closed_terminal_stops_the_run_as_sigterm_does(tmp_path):
    proc, run = _start_sweep(tmp_path)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP, err
    meta = open_run(run).meta
    assert meta["status"] == "interrupted" and meta["signal"] == "SIGTERM"


def test_run_records_of_a_killed_ccbench_are_removed(tmp_path, monkeypatch):
    """A job started by `run_job` first removes the run records (in the temporary folder) of a ccbench that died
    before it could, and leaves those of live processes, its own and other files; its own record goes with it."""
    import subprocess
    import sys
    import tempfile

    from ccbench.measure.launcher import RECORD_PREFIX, run_job

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = [f"{RECORD_PREFIX}{dead.pid}-abc", f"{RECORD_PREFIX}{os.getpid()}-def", f"{RECORD_PREFIX}{os.getppid()}-g",
             "ccbench-run-x-y", "other"]
    for n in names:
        (tmp_path / n).write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where run_job keeps its record
    job = run_job([sys.executable, "-c", "pass"], dict(os.environ))
    assert (job.code, job.run_dir) == (0, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[1:])


def test_ctrl_c_in_a_terminal_stops_the_run_interrupted_and_ends_with_how_to_continue(tmp_path):
    """A terminal's Ctrl-C signals its whole foreground process group.  When the launcher and the ranks were in it,
    hydra answered with its own clean-up and killed the ranks mid-case: the run ended `failed`, with hydra's
    messages last.  The launcher runs in its own group now; ccbench passes the stop on once."""
    proc, run = _start_sweep(tmp_path, new_group=True)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does: ccbench leads the group it was started in
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert open_run(run).meta["status"] == "interrupted"
    assert err.strip().splitlines()[-1].startswith("ccbench: stopped by ") and f"--resume {run}" in err


@pytest.mark.parametrize("rank", ["0", "1"])
def test_sigterm_before_the_first_case_ends_the_run_interrupted_not_failed(tmp_path, rank):
    """SIGTERM between opening the run and its first case (CCBENCH_FAULT's item ``start``) came before the stop
    signals were caught: the ranks died of it and the run ended `failed`.  Now it stops the run as any SIGTERM."""
    import subprocess

    env = dict(os.environ, CCBENCH_FAULT=f"term:{rank}:start")
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-s", "8", "-i", "5",
                        "--results-dir", str(tmp_path), "--no-show"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    (run,) = tmp_path.iterdir()
    meta = open_run(run).meta
    assert (meta["status"], meta["signal"], meta["finished_cases"]) == ("interrupted", "SIGTERM", 0)
    assert f"--resume {run}" in r.stderr.strip().splitlines()[-1]
