"""The session layer shared by sweeps and workloads, pure tier: faults, agreement, progress, reopening tables.

The MPI side (signals between items, --resume, the watchdog) is exercised by whole runs:
tests/test_cli.py for sweeps, tests/test_workload.py and tests/test_workload_mpi.py for workloads.
"""

import json
import os
import re
import signal
from pathlib import Path

import pytest
from runfiles import workload_row
from watchdriver import run_watch

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure import session
from ccbench.measure.session import Fault, Progress, Watchdog, agree, read_fault, require_memory
from ccbench.store.results import Row, RunWriter, reopen_tables
from ccbench.store.workload_rows import WORKLOAD_COLUMNS, WorkloadRow

DATA = Path(__file__).resolve().parent / "data"


class _Comm:
    """One rank alone: enough of a communicator for what the session asks outside MPI."""

    def __init__(self, rank=0):
        self.rank = rank

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 1

    def allgather(self, x):
        return [x]


def test_read_fault(monkeypatch):
    monkeypatch.delenv("CCBENCH_FAULT", raising=False)
    assert read_fault() is None
    monkeypatch.setenv("CCBENCH_FAULT", "hang:1:allreduce/native:64")
    assert read_fault() == Fault("hang", 1, "allreduce/native:64")
    monkeypatch.setenv("CCBENCH_FAULT", "term:0:ddp:2")
    assert read_fault() == Fault("term", 0, "ddp:2")
    monkeypatch.setenv("CCBENCH_FAULT", "hang:2:allreduce/native:64")
    assert read_fault(3).rank == 2  # the last rank of 3
    with pytest.raises(UsageError, match=r"rank 2 does not exist with 2 ranks, so it would never fire$"):
        read_fault(2)
    monkeypatch.setenv("CCBENCH_FAULT", "hang:all:allreduce/native:64")
    assert read_fault(1).rank is None
    monkeypatch.setenv("CCBENCH_FAULT", "exit:all:ddp:2")
    assert read_fault() == Fault("exit", None, "ddp:2")
    assert read_fault().spec == "exit:all:ddp:2"
    for bad in ("crash:1:ddp:2", "exit:one:ddp:2", "exit:1", "hang", "exit:-1:ddp:2", "slow:ALL:allreduce/ring:5us"):
        monkeypatch.setenv("CCBENCH_FAULT", bad)
        with pytest.raises(UsageError, match="expected KIND:RANK:ITEM"):
            read_fault()


def test_a_term_fault_signals_its_rank_before_its_item_only():
    got = []
    old = signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    try:
        fault = Fault("term", 0, "ddp:2")
        fault.fire(_Comm(0), "ddp:1")
        fault.fire(_Comm(1), "ddp:2")
        assert got == []
        fault.fire(_Comm(0), "ddp:2")
        assert got == [signal.SIGTERM]
        Fault("term", None, "ddp:2").fire(_Comm(1), "ddp:2")  # every rank
        assert got == [signal.SIGTERM] * 2
        Fault("slow", None, "ddp:2", delay_s=1.0).fire(_Comm(1), "ddp:2")  # a slowdown never fires before an item
        assert got == [signal.SIGTERM] * 2
    finally:
        signal.signal(signal.SIGTERM, old)


def test_agree_raises_the_same_error_everywhere():
    assert agree(_Comm(), lambda: 7) == 7
    with pytest.raises(UsageError, match="bad"):
        agree(_Comm(), lambda: (_ for _ in ()).throw(UsageError("bad")))
    with pytest.raises(CCBenchError, match="broken"):
        agree(_Comm(), lambda: (_ for _ in ()).throw(CCBenchError("broken")))


def test_require_memory_refuses_what_cannot_fit():
    require_memory(1, 1, "a tiny case", "lower the sizes")
    if session.memory_available(Path("/"))[0] is not None:
        with pytest.raises(UsageError, match="a huge case needs about .* lower the sizes"):
            require_memory(1 << 62, 2, "a huge case", "lower the sizes")


def test_progress_plain_lines(capsys):
    p = Progress(2)
    p.done("a", "first: ok", True)
    p.note("skipped one")
    p.done("b", "second: WRONG 3", False)
    p.stop()
    assert capsys.readouterr().out.splitlines() == ["[1/2] first: ok", "skipped one", "[2/2] second: WRONG 3"]


def test_a_watchdog_of_zero_seconds_is_off():
    w = Watchdog(0, 2, 0)
    w.start("an item", 0.0)
    assert not w.running
    w.stop()


def test_reopen_cuts_unfinished_rows_and_rebuilds_the_csv_with_the_run_s_columns(tmp_path):
    w = RunWriter(tmp_path, {"kind": "workload"}, columns=WORKLOAD_COLUMNS)
    rows = [workload_row("a", -1), workload_row("a", 0), workload_row("b", -1)]
    for r in rows:
        w.append(r)
    w.close()
    with open(tmp_path / "cases.jsonl", "a") as f:
        f.write('{"workload": "dd')  # torn by a crash
    with open(tmp_path / "cases.csv", "a") as f:
        f.write("ddp,b,")
    reopen_tables(tmp_path, rows[:2], WORKLOAD_COLUMNS)  # item b unfinished: its row goes too
    lines = (tmp_path / "cases.jsonl").read_text().splitlines(keepends=True)
    assert [WorkloadRow.from_dict(json.loads(x)) for x in lines] == rows[:2] and lines[-1].endswith("\n")
    csv = (tmp_path / "cases.csv").read_text().splitlines()
    assert csv[0].split(",") == WORKLOAD_COLUMNS and len(csv) == 3


def test_reopen_keeps_a_whole_last_row_without_its_newline(tmp_path):
    w = RunWriter(tmp_path, {})
    w.close()
    row = Row.from_dict(json.loads((DATA / "run-np2" / "cases.jsonl").read_text().splitlines()[0]))
    (tmp_path / "cases.jsonl").write_text(json.dumps(row.to_dict()))
    reopen_tables(tmp_path, [row])
    assert (tmp_path / "cases.jsonl").read_text() == json.dumps(row.to_dict()) + "\n"
    assert (tmp_path / "cases.csv").read_text().count("\n") == 2


# -- pinned by mutation testing (tests/mutation/run.sh) ----------------------------------

@pytest.fixture
def stand_in_mpi(monkeypatch):
    """`from mpi4py import MPI` in the session gives a stand-in's constants (no MPI_Init in the plain tier)."""
    import sys
    import types

    mpi = types.ModuleType("mpi4py.MPI")
    mpi.IN_PLACE, mpi.MAX, mpi.COMM_TYPE_SHARED = object(), "MAX", "shared"
    pkg = types.ModuleType("mpi4py")
    pkg.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", pkg)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    return mpi


class _Ranks(_Comm):
    """Rank `rank` of `size`, the others' contributions scripted: what they put into each collective."""

    def __init__(self, rank=0, size=2, others=None, gathered=None):
        super().__init__(rank)
        self.size, self.others, self.gathered = size, list(others or []), gathered
        self.reductions, self.bcasts = [], []

    def Get_size(self):
        return self.size

    def allgather(self, x):
        return [x] + (self.gathered if self.gathered is not None else [None] * (self.size - 1))

    def Allreduce(self, sendbuf, recvbuf, op):
        from mpi4py import MPI

        assert sendbuf is MPI.IN_PLACE
        self.reductions.append(op)
        other = self.others.pop(0) if self.others else 0
        recvbuf[...] = max(int(recvbuf[0]), other)

    def bcast(self, obj, root=0):
        self.bcasts.append((obj, root))
        return obj


def _session(tmp_path, comm=None, **kw):
    return session.Session(comm or _Ranks(), RunWriter(tmp_path, {"nranks": 2}), watchdog_s=0, **kw)


def _row():
    return Row.from_dict(json.loads((DATA / "run-np2" / "cases.jsonl").read_text().splitlines()[0]))


def test_a_signal_stops_the_run_between_items_and_run_json_says_so(tmp_path, stand_in_mpi, capsys):
    before = signal.getsignal(signal.SIGTERM)
    s = _session(tmp_path)
    assert not s.stop_requested() and s.stopped == 0
    s.writer.append(_row())
    signal.raise_signal(signal.SIGTERM)  # caught by the session: no exit, a stop at the next check
    assert s.stop_requested() and s.stopped == signal.SIGTERM
    assert s.comm.reductions == [stand_in_mpi.MAX] * 2
    s.finished()
    s.close(failed_cases=0)
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is given back
    meta = json.loads((tmp_path / "run.json").read_text())
    assert (meta["status"], meta["signal"], meta["finished_cases"], meta["failed_cases"]) == (
        "interrupted", "SIGTERM", 1, 0)
    assert meta["end_time"]
    assert s.exit_code(0) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == f"ccbench: stopped by SIGTERM; 1 finished case kept in {tmp_path}\n"
    s.writer.rows = 2
    assert s.exit_code(5, "items") == 128 + signal.SIGTERM
    assert capsys.readouterr().err == f"ccbench: stopped by SIGTERM; 2 finished items kept in {tmp_path}\n"


def test_a_stop_on_another_rank_stops_this_one_too_and_stays(tmp_path, stand_in_mpi):
    s = _session(tmp_path, _Ranks(others=[0, int(signal.SIGINT), 0]))
    assert not s.stop_requested()
    assert s.stop_requested() and s.stopped == signal.SIGINT  # only the other rank was signalled
    assert s.stop_requested() and s.stopped == signal.SIGINT  # a stop once agreed is not taken back
    s.close()
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "failed" and meta["signal"] == "SIGINT"  # no finished(): the loop did not end well


def test_a_signal_from_before_the_session_is_forgotten(tmp_path, stand_in_mpi):
    for d in "ab":
        (tmp_path / d).mkdir()
    first = _session(tmp_path / "a")
    signal.raise_signal(signal.SIGINT)  # noted by the first session, never asked for
    first.close()
    s = _session(tmp_path / "b")
    assert not s.stop_requested()
    s.close()


def test_a_run_without_a_stop_is_complete_and_its_exit_code_counts_failures(tmp_path, stand_in_mpi, capsys):
    s = _session(tmp_path)
    assert s.status == "failed"  # until the loop says it ended
    assert not s.stop_requested()
    s.finished()
    s.close(failed_cases=2)
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "complete" and meta["failed_cases"] == 2 and "signal" not in meta
    assert (s.exit_code(2), s.exit_code(1), s.exit_code(0)) == (1, 1, 0)
    assert capsys.readouterr().err == ""


def test_a_session_off_rank_0_writes_nothing(tmp_path, stand_in_mpi, capsys):
    s = session.Session(_Ranks(rank=1), None, watchdog_s=0, fault=Fault("term", 0, "x"))
    signal.raise_signal(signal.SIGINT)
    assert s.stop_requested()
    s.finished()
    s.close()
    assert s.status == "interrupted" and s.exit_code(0) == 128 + signal.SIGINT
    assert capsys.readouterr().err == "" and list(tmp_path.iterdir()) == []


def test_start_arms_the_watchdog_and_fires_the_fault_aimed_at_the_item(tmp_path, stand_in_mpi, monkeypatch):
    monkeypatch.setattr(session.time, "monotonic", lambda: 100.0)
    s = _session(tmp_path, fault=Fault("term", 0, "allreduce/native:64"))
    s.watchdog.seconds = 7.0
    s.start("allreduce 8 B", 2.5, "allreduce/native:8")
    assert (s.watchdog.label, s.watchdog.deadline) == ("allreduce 8 B", 109.5)
    assert not s.stop_requested()
    s.start("allreduce 64 B", 1.0, "allreduce/native:64")  # the term fault: SIGTERM to this rank
    assert s.watchdog.label == "allreduce 64 B" and s.stop_requested() and s.stopped == signal.SIGTERM
    s.close()


def test_a_session_stops_its_watchdog_and_progress_on_close(tmp_path, stand_in_mpi):
    stopped = []
    progress = Progress(1)
    progress.stop = lambda: stopped.append("progress")
    s = session.Session(_Ranks(), RunWriter(tmp_path, {}), watchdog_s=30, progress=progress)
    assert s.watchdog.running and s.progress is progress
    s.close()
    s.watchdog.join(5)
    assert not s.watchdog.running and stopped == ["progress"]


def _watched(monkeypatch, rank, now, writer=None, seconds=7.0):
    """The watchdog checked at monotonic time `now`; the exit code it left with, or None."""
    w = Watchdog(0, 4, rank, writer)
    w.seconds = seconds
    return run_watch(monkeypatch, w, now, ("bcast 1 KiB", 2.0))  # deadline 100 + 7 + 2 = 109


def test_the_watchdog_ends_the_job_past_the_deadline_and_marks_the_run_failed(tmp_path, monkeypatch, capsys):
    writer = RunWriter(tmp_path, {})
    assert _watched(monkeypatch, 0, 109.0, writer) is None  # at the deadline, not past it
    assert _watched(monkeypatch, 0, 109.5, writer) == 3
    why = "watchdog: bcast 1 KiB at 4 ranks did not finish within 7 s past its budget; ending the job"
    assert capsys.readouterr().err == f"ccbench: error: {why}\n"
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "failed" and meta["failure"] == why and meta["end_time"]


def test_the_watchdog_ends_the_job_even_when_run_json_cannot_be_written(tmp_path, monkeypatch, capsys):
    writer = RunWriter(tmp_path, {})

    def broken(**fields):
        raise OSError("disk full")

    writer.update = broken
    assert _watched(monkeypatch, 0, 110.0, writer, seconds=0.25) == 3
    assert "within 0.25 s past its budget" in capsys.readouterr().err


def test_the_other_ranks_watchdogs_wait_5_s_more_and_end_silently(monkeypatch, capsys):
    assert Watchdog(0, 2, 0).grace == 0.0 and Watchdog(0, 2, 1).grace == 5.0
    assert _watched(monkeypatch, 1, 114.0) is None  # 109 + 5: not past it yet
    assert _watched(monkeypatch, 1, 114.5) == 3
    assert capsys.readouterr().err == ""


def test_an_unarmed_watchdog_never_fires():
    w = Watchdog(0, 2, 0)
    w.deadline = 0.0  # past, but no item has started: no label
    assert w.check(1e12) is None and w.check(1e12, peers=False) is None
    w.seconds = 60.0
    w.start("an item", 1.0, now=0.0)  # armed, no peers told (one rank, or ranks it cannot see): nothing to ask
    assert w.check(30.0) is None


def test_a_watchdog_of_under_a_second_watches(monkeypatch):
    w = Watchdog(0.5, 2, 0)
    assert w.running
    w.stop()
    w.join(5)
    assert not w.running


def test_progress_on_a_terminal_is_a_bar_with_the_failures_beside_it():
    import io

    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None, highlight=False)
    p = Progress(2, console, what="workload")
    assert p.bar is not None and p.bar.tasks[0].total == 2 and p.bar.tasks[0].description == "workload"
    p.done("case a", "a: ok", True)
    assert p.bar.tasks[0].completed == 1 and p.bar.tasks[0].description == "case a"
    p.done("case b", "b: WRONG 3", False)
    p.note("skipped c", style="yellow")
    p.stop()
    text = out.getvalue()
    assert "[2/2] b: WRONG 3\n" in text and "a: ok" not in text and "skipped c\n" in text
    assert p.bar.tasks[0].completed == 2


def test_progress_on_a_console_that_is_no_terminal_prints_plain_lines(capsys):
    import io

    from rich.console import Console

    out = io.StringIO()
    p = Progress(1, Console(file=out, force_terminal=False))
    assert p.bar is None
    p.done("a", "a: ok", True)
    p.note("a note")
    p.stop()
    assert capsys.readouterr().out == "[1/1] a: ok\n" and out.getvalue() == "a note\n"


def test_agree_raises_another_rank_s_error_here(stand_in_mpi):
    assert agree(_Ranks(gathered=[None, None], size=3), lambda: 5) == 5
    with pytest.raises(UsageError, match="^bad size$"):
        agree(_Ranks(gathered=[("UsageError", "bad size"), ("CCBenchError", "later")], size=3), lambda: 5)
    with pytest.raises(CCBenchError, match="^broken$") as e:
        agree(_Ranks(gathered=[None, ("CCBenchError", "broken")], size=3), lambda: 5)
    assert type(e.value) is CCBenchError
    with pytest.raises(ZeroDivisionError):  # not a CCBenchError: not agreed on
        agree(_Ranks(), lambda: 1 / 0)
    got = []

    class Seen(_Ranks):
        def allgather(self, x):
            got.append(x)
            return super().allgather(x)

    with pytest.raises(UsageError, match="mine"):
        agree(Seen(), lambda: (_ for _ in ()).throw(UsageError("mine")))
    assert got == [("UsageError", "mine")]


@pytest.mark.parametrize(("env", "size", "refused"), [
    ({"SLURM_STEP_NUM_TASKS": "4"}, 1, True),
    ({"SLURM_NTASKS": "3"}, 1, True),
    ({"SLURM_STEP_NUM_TASKS": "4"}, 4, False),
    ({"SLURM_STEP_NUM_TASKS": "1"}, 1, False),
    ({"SLURM_STEP_NUM_TASKS": "2"}, 1, True),
    ({"SLURM_STEP_NUM_TASKS": "x"}, 1, False),
    ({}, 1, False),
])
def test_check_launch_refuses_a_step_whose_tasks_see_one_rank_each(monkeypatch, env, size, refused):
    for k in ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    comm = _Ranks(size=size)
    if refused:
        n = next(iter(env.values()))
        with pytest.raises(UsageError, match=f"^this job step has {n} tasks but MPI sees 1 rank each: the launcher "
                                             r"did not wire up MPI \(with srun use --mpi=pmi2 for MPICH"):
            session.check_launch(comm)
    else:
        session.check_launch(comm)


def test_local_ranks_counts_this_node_s_ranks(stand_in_mpi):
    calls = []

    class Node:
        def Get_size(self):
            return 3

        def Free(self):
            calls.append("free")

    class World(_Ranks):
        def Split_type(self, kind):
            calls.append(kind)
            return Node()

    assert session.local_ranks(World()) == 3
    assert calls == ["shared", "free"]


def test_require_memory_compares_with_80_percent_of_the_free_memory(monkeypatch):
    monkeypatch.setattr(session, "memory_available", lambda root: (1000, "MemAvailable"))
    require_memory(800, 2, "x", "y")
    with pytest.raises(UsageError) as e:
        require_memory(801, 2, "allreduce 1 KiB", "lower the sizes")
    assert str(e.value) == ("allreduce 1 KiB needs about 801 B on this node (2 ranks) but only 1000 B is available; "
                            "lower the sizes")
    monkeypatch.setattr(session, "memory_available", lambda root: (2048, "the cgroup memory limit (2 KiB)"))
    with pytest.raises(UsageError) as e:
        require_memory(4096, 1, "a case", "fewer ranks")
    assert str(e.value) == ("a case needs about 4 KiB on this node (1 ranks) but only 2 KiB is available under "
                            "the cgroup memory limit (2 KiB); fewer ranks")
    monkeypatch.setattr(session, "memory_available", lambda root: (None, "MemAvailable"))
    require_memory(1 << 62, 1, "x", "y")  # unknown: not refused


def _stored_run(tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "run-np2", run)
    meta = json.loads((run / "run.json").read_text())
    meta.update(status="interrupted", signal="SIGTERM", failure="stopped")
    (run / "run.json").write_text(json.dumps(meta))
    return run, meta


def test_open_run_dir_resumes_a_run_with_its_rows(tmp_path, stand_in_mpi):
    run, meta = _stored_run(tmp_path)
    prov = {"nranks": meta["nranks"], "mpi_library": meta["mpi_library"], "start_time": "T1"}
    seen = []

    def same(config):
        seen.append(config)
        return True

    comm = _Ranks()
    writer, finished = session.open_run_dir(comm, lambda: pytest.fail("a resumed run makes no new directory"),
                                            run, prov=prov, argv=["ccbench", "run"], same_config=same,
                                            summary=lambda r: (r.collective, r.nbytes), keep=lambda rows: rows[:5])
    assert seen == [meta["config"]]
    assert writer.rows == 5 and len(finished) == 5 and comm.bcasts == [(finished, 0)]
    assert finished[0] == (_row().collective, _row().nbytes)
    writer.close()
    assert len((run / "cases.jsonl").read_text().splitlines()) == 5
    assert len((run / "cases.csv").read_text().splitlines()) == 6
    got = json.loads((run / "run.json").read_text())
    assert got["resumed"] == [{"time": "T1", "argv": ["ccbench", "run"], "finished_before": 5,
                               "status_before": "interrupted", "failure_before": "stopped",
                               "signal_before": "SIGTERM"}]
    assert got["status"] == "running" and "failure" not in got and "signal" not in got


def test_open_run_dir_on_another_rank_gets_the_rows_from_rank_0(tmp_path, stand_in_mpi):
    class Rank1(_Ranks):
        def bcast(self, obj, root=0):
            assert obj is None and root == 0
            return [("k", True)]

    writer, finished = session.open_run_dir(Rank1(rank=1), lambda: pytest.fail("rank 1 makes nothing"),
                                            tmp_path / "nowhere", prov={}, argv=[], same_config=lambda c: True,
                                            summary=lambda r: r)
    assert writer is None and finished == [("k", True)]
    assert session.open_run_dir(Rank1(rank=1), lambda: pytest.fail("rank 1 makes nothing"), None, prov={},
                                argv=[], same_config=lambda c: True, summary=lambda r: r) == (None, [])
    made = RunWriter(tmp_path, {})
    assert session.open_run_dir(_Ranks(), lambda: made, None, prov={}, argv=[], same_config=lambda c: True,
                                summary=lambda r: r) == (made, [])


@pytest.mark.parametrize(("change", "why"), [
    ({"nranks": 4}, "its rank count was 2, now 4"),
    ({"mpi_library": "Open MPI v5"}, "its MPI library was 'MPICH Version:      5.0.2', now 'Open MPI v5'"),
    ({}, "it was made with another configuration"),
])
def test_open_run_dir_refuses_a_run_made_otherwise(tmp_path, stand_in_mpi, change, why):
    run, meta = _stored_run(tmp_path)
    prov = {"nranks": meta["nranks"], "mpi_library": meta["mpi_library"], "start_time": "T1", **change}
    before = (run / "cases.jsonl").read_bytes(), (run / "run.json").read_bytes()
    with pytest.raises(UsageError) as e:
        session.open_run_dir(_Ranks(), lambda: None, run, prov=prov, argv=[], same_config=lambda c: bool(change),
                             summary=lambda r: r)
    assert str(e.value) == f"cannot resume {run}: {why}"
    assert ((run / "cases.jsonl").read_bytes(), (run / "run.json").read_bytes()) == before  # untouched


def test_the_start_up_watch_kills_a_rank_stuck_in_c_holding_the_interpreter_lock(tmp_path):
    """What MPI_Init does when it hangs: no Python runs (a thread watchdog would wait forever); the forked
    watcher says so and kills the process after the deadline.  Released in time, it leaves the process alone."""
    import subprocess
    import sys
    import time

    stuck = ("from ccbench.measure.session import StartupWatch; StartupWatch(1.0, 0); "
             "import ctypes; ctypes.PyDLL(None).sleep(60)")  # PyDLL: the call keeps the interpreter lock
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", stuck], capture_output=True, text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL and time.monotonic() - t0 < 20
    assert r.stderr == ("ccbench: error: watchdog: rank 0 did not begin its first item within 1 s of starting "
                        "(stuck starting MPI or planning); ending the job\n")
    released = ("from ccbench.measure.session import startup_reached, watch_startup; import time; "
                "watch_startup(300, 'case'); startup_reached(); time.sleep(1.5); print('alive')")
    r = subprocess.run([sys.executable, "-c", released], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "alive\n" and r.stderr == ""
    off = "from ccbench.measure.session import watch_startup; import time; watch_startup(0); time.sleep(0.5)"
    assert subprocess.run([sys.executable, "-c", off], timeout=60).returncode == 0


def _watched_child(seconds, rank, what="item", release=False, live_s=3.0):
    """A forked child that starts a StartupWatch (released at once when `release`), sleeps `live_s` and exits 7:
    (how it ended: an exit status or -signal, what its watcher wrote on fd 2, seconds it lived).  Forked, not
    started afresh, so the child runs this process's StartupWatch, whatever it is."""
    import time

    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.dup2(w, 2)
            watch = session.StartupWatch(seconds, rank, what)
            if release:
                watch.reached()
                watch.reached()              # a second call does nothing
            os.close(w)
            os.close(2)                      # only the watcher holds the pipe now
            time.sleep(live_s)
            os._exit(7)                      # this process lived to its end
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()             # until the child and its watcher are gone
    _, status = os.waitpid(pid, 0)
    return (-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)), said, time.monotonic() - t0


def test_the_start_up_watch_ends_a_rank_that_does_not_begin_in_time_and_only_rank_0_says_so():
    session.StartupWatch(0.0, 0).reached()   # in this process too: mutation testing counts only the calls made here
    code, said, lived = _watched_child(0.5, 0, "case")
    assert code == -signal.SIGKILL and lived < 1.4                # rank 0 at once, no grace
    assert said == ("ccbench: error: watchdog: rank 0 did not begin its first case within 0.5 s of starting (stuck "
                    "starting MPI or planning); ending the job\n")
    code, said, _ = _watched_child(0.5, None)
    assert code == -signal.SIGKILL
    assert said.startswith("ccbench: error: watchdog: a rank did not begin its first item within 0.5 s")
    code, said, lived = _watched_child(0.2, 1, live_s=8.0)       # another rank: 5 s later, silent (rank 0 speaks)
    assert code == -signal.SIGKILL and said == "" and 5.0 <= lived < 6.1


def test_the_start_up_watch_leaves_a_rank_alone_once_released_or_when_off():
    session.StartupWatch(0.0, 0).reached()   # in this process too: mutation testing counts only the calls made here
    assert _watched_child(0.5, 0, release=True, live_s=1.5)[:2] == (7, "")
    assert _watched_child(0.0, 0, live_s=0.5)[:2] == (7, "")
    assert _watched_child(-1.0, 0, live_s=0.5)[:2] == (7, "")


@pytest.mark.parametrize("watchdog_s, env, seconds", [
    (300.0, None, 300.0), (1.0, None, 60.0), (0.0, None, 0.0), (1.0, "2.5", 2.5), (300.0, "0", 0.0),
])
def test_the_start_up_limit(monkeypatch, watchdog_s, env, seconds):
    """At least a minute whatever a small --watchdog says, off with it, CCBENCH_STARTUP_WATCHDOG above both."""
    made = []
    real = session.StartupWatch
    monkeypatch.setattr(session, "StartupWatch",
                        lambda s, rank, what: made.append((s, rank, what)) or real(0, rank, what))
    if env is None:
        monkeypatch.delenv("CCBENCH_STARTUP_WATCHDOG", raising=False)
    else:
        monkeypatch.setenv("CCBENCH_STARTUP_WATCHDOG", env)
    monkeypatch.setenv("PMI_RANK", "3")                  # the rank the launcher announced
    session.watch_startup(watchdog_s, "case")
    session.startup_reached()
    assert made == [(seconds, 3, "case")]


@pytest.mark.parametrize("bad", ["soon", "-1", "nan"])
def test_a_bad_start_up_limit_is_refused(monkeypatch, bad):
    monkeypatch.setenv("CCBENCH_STARTUP_WATCHDOG", bad)
    with pytest.raises(UsageError, match="CCBENCH_STARTUP_WATCHDOG"):
        session.watch_startup(300.0)


def test_a_rank_stuck_before_its_first_case_ends_the_job_in_seconds(tmp_path):
    """CCBENCH_FAULT hang:1:start -- rank 1 stops after the run is opened, before any case; rank 0 waits in a
    collective; both watchers end the job after CCBENCH_STARTUP_WATCHDOG seconds; the run is marked failed."""
    import subprocess
    import sys
    import time

    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "allreduce", "-s", "8",
                        "--results-dir", "res", "--no-show"], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env={**os.environ, "CCBENCH_FAULT": "hang:1:start",
                                          "CCBENCH_STARTUP_WATCHDOG": "2"})
    assert r.returncode != 0 and time.monotonic() - t0 < 60
    assert ("ccbench: error: watchdog: rank 0 did not begin its first case within 2 s of starting (stuck starting "
            "MPI or planning); ending the job") in r.stderr.splitlines()
    (run,) = (tmp_path / "res").iterdir()
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "failed" and "a rank crashed, was killed or aborted" in meta["failure"]


def test_a_peer_that_ends_during_an_item_ends_the_job(tmp_path):
    """A rank of this node ended (here a zombie its parent has not reaped, as a dead rank is until the launcher
    looks): seen gone at two checks in a row while an item is in progress, rank 0 says which and leaves with 3.
    Between items (idle) a peer may leave: nothing happens."""
    import subprocess
    import sys

    script = ("import subprocess, sys, time\n"
              "from ccbench.measure.session import Watchdog\n"
              "peer = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
              "w = Watchdog(100.0, 2, 0)\n"
              "w.watch_peers({1: (peer.pid, None)})\n"
              "w.start('allreduce/ring 8 B', 1.0)\n"
              "if sys.argv[1] == 'idle':\n"
              "    w.idle()\n"
              "time.sleep(6)\n"
              "print('alive', flush=True)\n")
    r = subprocess.run([sys.executable, "-c", script, "busy"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and r.stdout == ""
    assert re.fullmatch(r"ccbench: error: rank 1 \(process \d+\) ended during allreduce/ring 8 B: a rank crashed, "
                        r"was killed or aborted, leaving the others waiting; ending the job\n", r.stderr), r.stderr
    r = subprocess.run([sys.executable, "-c", script, "idle"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "alive\n" and r.stderr == ""


def test_process_gone():
    import subprocess
    import sys

    from ccbench.measure.session import process_gone, process_start

    me = process_start(os.getpid())
    assert me is not None and not process_gone(os.getpid()) and not process_gone(os.getpid(), me)
    assert process_gone(os.getpid(), str(int(me) + 1))  # the same id, another start: another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while not process_gone(child.pid):  # a zombie until waited for: gone all the same
        pass
    child.wait()
    assert process_gone(child.pid) and process_start(child.pid) is None  # reaped: no such process


def test_process_start_is_the_start_in_clock_ticks_after_boot_whatever_the_process_is_called():
    """The start of a child made between two readings of the time since boot lies between them (to a tick); it stays
    the same when the child names itself with a ')' and a space (/proc/PID/stat's name field holds them as
    they are)."""
    import subprocess
    import sys

    from ccbench.measure.session import process_start

    def uptime():
        return float(Path("/proc/uptime").read_text().split()[0])

    tick = os.sysconf("SC_CLK_TCK")
    before = uptime()
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; open('/proc/self/comm', 'w').write('a) b c');"
                              " print(flush=True); time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        start = process_start(child.pid)
        after = uptime()
        assert before - 2 / tick <= int(start) / tick <= after + 2 / tick
        child.stdout.readline()                               # renamed
        assert Path(f"/proc/{child.pid}/comm").read_text() == "a) b c\n"
        assert process_start(child.pid) == start
    finally:
        child.kill()
        child.wait()


def test_only_peers_seen_as_themselves_are_watched():
    """Same host and the same process behind the id: watched; another host, or an id whose process here started
    at another time (a rank in a container of its own), or a start nobody could read: left to the launcher."""
    import socket

    from ccbench.measure.session import Session, process_start

    host, parent = socket.gethostname(), os.getppid()

    class Comm:
        def Get_size(self):
            return 5

        def Get_rank(self):
            return 0

        def allgather(self, mine):
            assert mine == (host, os.getpid(), process_start(os.getpid()))
            return [mine, (host, parent, process_start(parent)), ("elsewhere", parent, process_start(parent)),
                    (host, parent, "1"), (host, parent, None)]

    class Two(Comm):                                   # two ranks: the one other rank is watched too
        def Get_size(self):
            return 2

        def allgather(self, mine):
            return [mine, (host, parent, process_start(parent))]

    for comm in (Comm(), Two()):
        s = Session(comm, None, watchdog_s=0.0)
        try:
            s.watch_peers()
            assert s.watchdog.peers == {1: (parent, process_start(parent))}
        finally:
            s.close()


@pytest.mark.parametrize("status, raised", [("complete", True), ("interrupted", True), ("failed", False)])
def test_a_final_status_the_disk_refuses_is_the_error_only_when_the_loop_ended_well(status, raised):
    """A full disk refusing run.json's last write: after a loop that ended well that is the error to report; after a
    failed one the error that ended the loop says more (this one is dropped).  The writer is closed either way."""
    from ccbench.measure.session import Session
    from ccbench.store.results import WriteError

    class Writer:
        rows, closed = 3, False

        def update(self, **fields):
            raise WriteError("disk full")

        def close(self):
            self.closed = True

    w = Writer()
    s = Session(_Ranks(size=1), w, watchdog_s=0.0)
    s.status = status
    if raised:
        with pytest.raises(WriteError, match="disk full"):
            s.close()
    else:
        s.close()
    assert w.closed


def test_run_load_sums_the_own_cpu_of_the_ranks_on_rank_0s_kernel_and_the_emulator(monkeypatch):
    """Rank 0's record: the node's busy share over the span, its own share the CPU seconds of the ranks that share
    rank 0's kernel (not another kernel's) plus the link emulator's once; None on the other ranks, and without a
    reading at the start."""
    from ccbench.measure import hardware, provenance
    from ccbench.measure.hardware import CpuTimes

    start = CpuTimes(busy=10.0, steal=1.0, total=100.0, cpus=4, own=2.0, wall=50.0, helper=0.5)
    end = CpuTimes(busy=30.0, steal=2.0, total=140.0, cpus=4, own=3.0, wall=60.0, helper=1.5)
    monkeypatch.setattr(hardware, "cpu_times", lambda: end)
    monkeypatch.setattr(provenance, "machine_id", lambda: "k0")
    others = [("k0", 2.0), ("k1", 7.0), ("k0", 1.0)]            # two ranks on rank 0's kernel, one elsewhere
    got = session.run_load(_Ranks(gathered=others), start)
    own = (1.0 + 2.0 + 1.0 + 1.0) / (10.0 * 4)                  # ranks 1.0 + 2.0 + 1.0, the emulator 1.0
    assert got == {"wall_s": 10.0, "cpus": 4, "busy_fraction": 0.5, "own_fraction": own,
                   "other_fraction": 0.5 - own, "steal_fraction": 0.025}
    assert session.run_load(_Ranks(rank=1, gathered=[("k0", 5.0)]), start) is None
    assert session.run_load(_Ranks(gathered=others), None) is None
    # no reading at the end: no record, and no rank's share counted from it
    monkeypatch.setattr(hardware, "cpu_times", lambda: None)
    gathered = []
    comm = _Ranks()
    comm.allgather = lambda mine: gathered.append(mine) or [mine]
    assert session.run_load(comm, start) is None and gathered == [("k0", 0.0)]


def _resume(comm, run, row_cls=Row):
    meta = json.loads((run / "run.json").read_text())
    prov = {"nranks": meta["nranks"], "mpi_library": meta["mpi_library"], "start_time": "T1"}
    return session.open_run_dir(comm, lambda: pytest.fail("a resume makes no new run"), run, prov=prov, argv=[],
                                same_config=lambda c: True, summary=lambda r: r, row_cls=row_cls)


def _files(run):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run.iterdir()}


def test_a_resume_refuses_what_is_no_run_a_complete_run_and_another_kind_leaving_each_as_it_was(tmp_path,
                                                                                               stand_in_mpi):
    import shutil

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError) as e:
        session.open_run_dir(_Ranks(), lambda: None, empty, prov={}, argv=[], same_config=lambda c: True,
                             summary=lambda r: r)
    assert str(e.value) == f"'{empty}' is not a ccbench run (no run.json)"
    assert list(empty.iterdir()) == []                        # no lock file made in it
    with pytest.raises(UsageError) as e:                      # nor a directory where there was none
        session.open_run_dir(_Ranks(), lambda: None, tmp_path / "gone", prov={}, argv=[], same_config=lambda c: True,
                             summary=lambda r: r)
    assert str(e.value) == (f"no run at '{tmp_path / 'gone'}' (give a run directory, its name under 'results', "
                            "or latest)")
    assert not (tmp_path / "gone").exists()

    done = tmp_path / "done"
    shutil.copytree(DATA / "run-np2", done)
    assert json.loads((done / "run.json").read_text())["status"] == "complete"
    before = _files(done)
    for _ in range(2):                                        # the lock was released: the same answer again
        with pytest.raises(UsageError) as e:
            _resume(_Ranks(), done)
        assert str(e.value) == f"{done} is complete: nothing to resume (start a new run to measure again)"
    assert _files(done) == before

    workload = tmp_path / "wl"
    shutil.copytree(DATA / "wl-ddp-np2", workload)
    before = _files(workload)
    for _ in range(2):
        with pytest.raises(UsageError) as e:
            _resume(_Ranks(), workload)
        assert str(e.value) == f"'{workload}' is a 'workload' run; --resume reads collective sweeps only"
    assert _files(workload) == before
