"""The session layer's parts, plain tier: what a resumed run's tables become, what the progress shows,
how a slow fault is read or refused, the watchdog a session arms, and the end time it records.

The scripted stand-ins (one rank whose partners' contributions are given, a caught ``os._exit``)
follow tests/test_session.py's; nothing here calls MPI.
"""

import csv
import io
import json
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from runfiles import workload_row
from watchdriver import Exit, catch_exit, run_watch

from ccbench.core.errors import UsageError
from ccbench.measure import session
from ccbench.measure.session import Fault, Progress, Session, Watchdog, read_fault
from ccbench.store.results import CSV_COLUMNS, Row, RunWriter
from ccbench.store.run import open_run
from ccbench.store.workload_rows import KIND, WORKLOAD_COLUMNS, WorkloadRow

DATA = Path(__file__).resolve().parent / "data"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RED, YELLOW, RESET = "\x1b[31m", "\x1b[33m", "\x1b[0m"


class _Ranks:
    """Rank `rank` of `size`; the other ranks contribute nothing (no error, no stop, rank 0's broadcast)."""

    def __init__(self, rank=0, size=2):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def allgather(self, x):
        return [x] + [None] * (self.size - 1)

    def Allreduce(self, sendbuf, recvbuf, op):
        pass

    def bcast(self, obj, root=0):
        return obj


def _run_watch(monkeypatch, watchdog, now):
    """`watchdog` armed at monotonic 100 s for an item of budget 2 s, checked at `now`: the exit code it left with,
    or None."""
    return run_watch(monkeypatch, watchdog, now, ("gather 4 KiB", 2.0))


class _Held:
    """sys.stdout or sys.stderr made block-buffered, as a batch job's log file is: what was written
    reaches the file only when it is flushed."""

    def __init__(self, monkeypatch, name="stdout"):
        self.raw = io.BytesIO()
        monkeypatch.setattr(sys, name, io.TextIOWrapper(self.raw, encoding="utf-8"))

    def text(self):
        return self.raw.getvalue().decode()


def _row(i=0):
    return Row.from_dict(json.loads((DATA / "run-np2" / "cases.jsonl").read_text().splitlines()[i]))


def _stamp(text):
    """A recorded time stamp read back: local time with its UTC offset, to the second."""
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", text), text
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")


def _now():
    return datetime.now(UTC).replace(microsecond=0)


def _during(before, stamp, after):
    """The stamp falls between two readings of the clock, give or take 2 s: a virtual machine's wall clock can
    step back or forward by about a second while the test runs (NTP)."""
    return before - timedelta(seconds=2) <= stamp <= after + timedelta(seconds=2)


# -- the recorded end time -------------------------------------------------------------------


def test_a_closed_session_records_its_end_time_as_local_iso_8601_with_the_offset(tmp_path, stand_in_mpi):
    s = Session(_Ranks(), RunWriter(tmp_path, {"nranks": 2}), watchdog_s=0)
    before = _now()
    s.finished()
    s.close()
    after = _now()
    end = _stamp(json.loads((tmp_path / "run.json").read_text())["end_time"])
    assert _during(before, end, after)


def test_the_watchdog_records_the_time_it_ended_the_job(tmp_path, monkeypatch, capsys):
    w = Watchdog(0, 2, 0, RunWriter(tmp_path, {}))
    w.seconds = 1.0
    before = _now()
    assert _run_watch(monkeypatch, w, 104.0) == 3
    after = _now()
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "failed" and _during(before, _stamp(meta["end_time"]), after)
    assert meta["finished_cases"] == 0                           # the rows written so far
    assert capsys.readouterr().err.startswith("ccbench: error: watchdog: gather 4 KiB at 2 ranks ")


# -- the watchdog a session arms -------------------------------------------------------------


def test_a_session_s_watchdog_watches_its_time_names_its_rank_count_and_marks_its_run(tmp_path, stand_in_mpi,
                                                                                      monkeypatch, capsys):
    s = Session(_Ranks(rank=0, size=6), RunWriter(tmp_path, {"nranks": 6}), watchdog_s=30)
    assert s.watchdog.running  # 30 s: a watchdog runs
    s.watchdog.stop()
    s.watchdog.join(5)
    # armed at 100 s for an item of budget 2 s: deadline 132 s, rank 0 without grace
    assert _run_watch(monkeypatch, s.watchdog, 132.0) is None
    assert _run_watch(monkeypatch, s.watchdog, 132.5) == 3
    why = "watchdog: gather 4 KiB at 6 ranks did not finish within 30 s past its budget; ending the job"
    assert capsys.readouterr().err == f"ccbench: error: {why}\n"
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "failed" and meta["failure"] == why


def test_a_session_off_rank_0_has_a_silent_watchdog_with_5_s_of_grace(tmp_path, stand_in_mpi, monkeypatch, capsys):
    s = Session(_Ranks(rank=3, size=4), None, watchdog_s=0)
    s.watchdog.seconds = 10.0  # deadline 100 + 10 + 2 = 112, then 5 s of grace
    assert _run_watch(monkeypatch, s.watchdog, 116.9) is None
    assert _run_watch(monkeypatch, s.watchdog, 117.1) == 3
    assert capsys.readouterr().err == ""


def test_the_watchdog_wakes_every_half_second_and_checks_peers_every_2_s():
    """Its thread looks at the clock every 0.5 s and at the other ranks' processes every fourth wake."""
    assert (session.WAKE_S, session.PEER_CHECK_S, session.PEER_CHECK_TICKS) == (0.5, 2.0, 4)


def test_a_peer_gone_at_two_peer_checks_in_a_row_ends_the_job_and_an_idle_rank_never_asks(monkeypatch):
    w = Watchdog(0, 3, 0)
    w.seconds = 60.0  # no deadline passes here
    alive = {11: True, 12: False}
    asked = []
    monkeypatch.setattr(session, "process_gone", lambda pid, start: asked.append((pid, start)) or not alive[pid])
    w.watch_peers({1: (11, None), 2: (12, "7")})
    assert w.check(0.0) is None                                  # no item in progress: peers may leave
    w.start("bcast 8 B", 1.0, now=0.0)
    assert w.check(0.5) is None                                  # rank 2 gone once: it may be a slow reap
    assert w.check(1.0, peers=False) is None                     # not a peer check: the one seen gone waits
    assert w.check(1.5) == ("rank 2 (process 12) ended during bcast 8 B: a rank crashed, was killed or aborted, "
                            "leaving the others waiting; ending the job")
    w.idle()
    assert w.check(2.0) is None and w.check(2.5) is None         # idle: no peer is looked at
    w.start("bcast 16 B", 1.0, now=3.0)
    alive[12] = True
    assert w.check(3.5) is None                                  # back (another process of its id): not gone
    alive[11] = alive[12] = False
    assert w.check(4.0) is None
    assert w.check(4.5).startswith("rank 1 (process 11) ended during bcast 16 B")   # the lowest rank named
    assert set(asked) == {(11, None), (12, "7")}                 # each peer asked with its own start time


def test_the_watchdog_thread_never_holds_the_process_open():
    """A daemon thread: a rank whose run ends without stop() still exits at once."""
    code = "from ccbench.measure.session import Watchdog\nw = Watchdog(60, 2, 0)\nassert w.running\n"
    done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_watchdog_s_line_is_out_before_the_process_ends(tmp_path, monkeypatch):
    """os._exit flushes nothing: the line is flushed by hand, even into a block-buffered stderr."""
    held = _Held(monkeypatch, "stderr")
    w = Watchdog(0, 2, 0, RunWriter(tmp_path, {}))
    w.seconds = 1.0
    assert _run_watch(monkeypatch, w, 103.5) == 3
    assert held.text() == ("ccbench: error: watchdog: gather 4 KiB at 2 ranks did not finish within 1 s past its "
                           "budget; ending the job\n")


def test_a_session_without_a_watchdog_starts_no_thread(tmp_path, stand_in_mpi):
    s = Session(_Ranks(), RunWriter(tmp_path, {}), watchdog_s=0)
    assert not s.watchdog.running and s.watchdog.seconds == 0
    s.close()


# -- the progress display --------------------------------------------------------------------


def _terminal(width=80):
    out = io.StringIO()
    return out, Console(file=out, force_terminal=True, width=width, color_system="standard", highlight=False)


def _screens(text):
    """The lines the terminal was given, control codes taken out (a redraw starts after a carriage return)."""
    return [x for x in re.split(r"[\r\n]", ANSI.sub("", text)) if x.strip()]


def test_the_bar_shows_what_runs_how_many_are_done_of_how_many_the_time_elapsed_and_left():
    out, console = _terminal()
    p = Progress(3, console)  # a sweep's, unless told
    try:
        first = _screens(out.getvalue())  # drawn at once
        # elapsed, then the time left (unknown before the first item)
        assert re.fullmatch(r"sweep ━{40} 0/3 \d:\d\d:\d\d left -:--:--", first[0]), first
        p.done("allreduce 8 B", "allreduce 8 B: ok", True)
        p.bar.refresh()
        assert any(re.fullmatch(r"allreduce 8 B [━╸╺]{40} 1/3 \d:\d\d:\d\d left (\d:\d\d:\d\d|-:--:--)", x)
                   for x in _screens(out.getvalue()))
    finally:
        p.stop()


def test_the_bar_is_taken_off_the_terminal_when_it_stops():
    out, console = _terminal()
    p = Progress(1, console)
    p.done("x", "x: ok", True)
    p.stop()
    # a transient bar: the cursor goes back up over its line and the line is erased
    assert out.getvalue().endswith("\x1b[1A\x1b[2K")


def test_a_failure_beside_the_bar_is_red_and_a_note_has_its_style_or_none():
    out, console = _terminal()
    p = Progress(2, console)
    p.done("a", "a: WRONG 2", False)
    p.note("skipped b", style="yellow")
    p.note("plain note")
    p.stop()
    text = out.getvalue()
    assert f"{RED}[1/2] a: WRONG 2{RESET}\n" in text
    assert f"{YELLOW}skipped b{RESET}\n" in text
    assert "\x1b[2Kplain note\n" in text  # printed over the bar's line, without a colour


def test_plain_progress_lines_reach_a_batch_job_s_log_at_once(monkeypatch):
    held = _Held(monkeypatch)
    p = Progress(2)
    p.done("a", "a: ok", True)
    assert held.text() == "[1/2] a: ok\n"
    p.note("skipped b")
    assert held.text() == "[1/2] a: ok\nskipped b\n"
    p.stop()


def test_a_note_goes_to_the_progress_console_when_there_is_one(monkeypatch):
    out = io.StringIO()
    p = Progress(1, Console(file=out, force_terminal=False))
    held = _Held(monkeypatch)
    p.note("to the console")
    assert out.getvalue() == "to the console\n" and held.text() == ""


# -- reopening a run for --resume ------------------------------------------------------------


def _workload_run(path, rows):
    meta = {"kind": KIND, "nranks": 2, "mpi_library": "MPICH 5", "config": {"workload": "ddp"}}
    w = RunWriter(path, meta, columns=WORKLOAD_COLUMNS)
    for r in rows:
        w.append(r)
    w.update(status="interrupted", signal="SIGINT")
    w.close()


def _resume(comm, path, row_cls, keep=None, prov=None):
    prov = prov or {"nranks": 2, "mpi_library": "MPICH 5", "start_time": "T2"}
    return session.open_run_dir(comm, lambda: pytest.fail("a resumed run makes no new directory"), path,
                                prov=prov, argv=["ccbench", "workload", "--resume"], same_config=lambda c: True,
                                summary=lambda r: r, row_cls=row_cls, keep=keep)


def test_a_resumed_workload_run_appends_its_rows_under_its_own_columns(tmp_path, stand_in_mpi):
    rows = [workload_row("a", -1), workload_row("a", 0), workload_row("b", -1)]
    _workload_run(tmp_path, rows[:2])
    writer, finished = _resume(_Ranks(), tmp_path, WorkloadRow)
    assert finished == rows[:2] and writer.rows == 2
    writer.append(rows[2])
    writer.close()
    with open(tmp_path / "cases.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == WORKLOAD_COLUMNS and len(table) == 4
    assert table[3][:3] == ["ddp", "b", "m"]
    loaded = open_run(tmp_path, kinds=("workload",)).rows
    assert loaded == rows


def test_a_resumed_sweep_run_appends_under_the_sweep_columns(tmp_path, stand_in_mpi):
    w = RunWriter(tmp_path, {"nranks": 2, "mpi_library": "MPICH 5", "config": {}})
    w.append(_row(0))
    w.close()
    writer, finished = _resume(_Ranks(), tmp_path, Row)
    writer.append(_row(1))
    writer.close()
    with open(tmp_path / "cases.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == CSV_COLUMNS and len(table) == 3
    assert [dict(zip(CSV_COLUMNS, line, strict=True))["nbytes"] for line in table[1:]] == [
        str(_row(0).nbytes), str(_row(1).nbytes)]
    assert finished == [_row(0)]


def test_each_resume_is_added_to_the_run_s_record_of_resumes(tmp_path, stand_in_mpi):
    _workload_run(tmp_path, [workload_row("a", -1), workload_row("a", 0)])
    writer, _ = _resume(_Ranks(), tmp_path, WorkloadRow, keep=lambda rows: rows[:1])
    writer.update(status="failed", failure="watchdog")
    writer.close()
    writer, finished = _resume(_Ranks(), tmp_path, WorkloadRow,
                               prov={"nranks": 2, "mpi_library": "MPICH 5", "start_time": "T3"})
    writer.close()
    assert finished == [workload_row("a", -1)]
    meta = json.loads((tmp_path / "run.json").read_text())
    argv = ["ccbench", "workload", "--resume"]
    assert meta["resumed"] == [
        {"time": "T2", "argv": argv, "finished_before": 1, "status_before": "interrupted", "failure_before": None,
         "signal_before": "SIGINT"},
        {"time": "T3", "argv": argv, "finished_before": 1, "status_before": "failed", "failure_before": "watchdog",
         "signal_before": None}]
    assert meta["status"] == "running" and meta["kind"] == KIND and meta["config"] == {"workload": "ddp"}


def test_a_resumed_run_without_rows_gets_its_csv_back(tmp_path, stand_in_mpi):
    _workload_run(tmp_path, [])
    (tmp_path / "cases.csv").unlink()
    writer, finished = _resume(_Ranks(), tmp_path, WorkloadRow)
    writer.append(workload_row("a", -1))
    writer.close()
    assert finished == [] and (tmp_path / "cases.csv").read_text().splitlines()[0].split(",") == WORKLOAD_COLUMNS
    assert open_run(tmp_path, kinds=("workload",)).rows == [workload_row("a", -1)]


def test_a_run_whose_rows_file_is_lost_is_not_resumed_as_if_it_had_none(tmp_path, stand_in_mpi):
    _workload_run(tmp_path, [workload_row("a", -1)])
    (tmp_path / "cases.jsonl").unlink()
    with pytest.raises(UsageError, match="has no cases.jsonl: the run's rows are missing"):
        _resume(_Ranks(), tmp_path, WorkloadRow)


# -- reading a slow fault --------------------------------------------------------------------


def _read(monkeypatch, spec):
    monkeypatch.setenv("CCBENCH_FAULT", spec)
    return read_fault()


def test_an_unset_or_empty_fault_is_none(monkeypatch):
    monkeypatch.delenv("CCBENCH_FAULT", raising=False)
    assert read_fault() is None
    assert _read(monkeypatch, "") is None


def test_a_fault_of_an_unknown_kind_is_refused_with_the_usage(monkeypatch):
    with pytest.raises(UsageError) as e:
        _read(monkeypatch, "nap:0:ddp:1")
    assert str(e.value) == ("CCBENCH_FAULT='nap:0:ddp:1': expected KIND:RANK:ITEM with KIND one of hang, exit, "
                            "term, slow and RANK a rank or all")


def test_a_fault_aimed_at_rank_all_is_on_every_rank():
    assert Fault("hang", None, "x").on(5) and Fault("hang", 2, "x").on(2) and not Fault("hang", 2, "x").on(0)


def test_a_slow_fault_of_a_variant_is_no_size(monkeypatch):
    """``native:ring`` ends in an algorithm's part, not a size: every size of that variant, and nothing else."""
    fault = _read(monkeypatch, "slow:0:allreduce/native:ring:5us")
    assert fault.slows("allreduce", "native:ring", 64) and fault.slows("allreduce", "native:ring", 8)
    assert not fault.slows("allreduce", "native", 64) and not fault.slows("allreduce", "ring", 64)


def test_a_share_of_0_percent_is_a_slow_fault_that_adds_nothing(monkeypatch):
    assert _read(monkeypatch, "slow:1:bcast/native:0%") == Fault("slow", 1, "bcast/native", fraction=0.0)


def _refusal(monkeypatch, spec):
    with pytest.raises(UsageError) as e:
        _read(monkeypatch, spec)
    text = str(e.value)
    prefix = f"CCBENCH_FAULT={spec!r}: "
    assert text.startswith(prefix)
    return text[len(prefix):]


def test_an_unknown_collective_is_refused_with_the_list_of_known_ones(monkeypatch):
    from ccbench.algorithms import REGISTRY

    why = _refusal(monkeypatch, "slow:1:allgatherw/ring:5us")
    head, known = why.split(" (one of ")
    assert head == "unknown collective 'allgatherw'" and known.endswith(")")
    assert known[:-1].split(", ") == list(REGISTRY) and "allreduce" in REGISTRY


def test_the_algorithm_is_everything_after_the_first_slash(monkeypatch):
    assert _refusal(monkeypatch, "slow:1:allreduce/ring/2:5us") == "allreduce has no algorithm 'ring/2'"


def test_a_delay_ending_in_a_point_is_a_number_without_its_unit(monkeypatch):
    assert _refusal(monkeypatch, "slow:1:allreduce/ring:5.") == (
        "bad delay '5.': give a time with its unit (5us, 1ms) or a share (20%)")


class _Stop(BaseException):
    """Raised by a stand-in to end an endless loop."""


def test_a_hang_fault_sleeps_for_ever_before_its_item(monkeypatch):
    slept = []

    def sleep(s):
        slept.append(s)
        if len(slept) == 3:
            raise _Stop

    monkeypatch.setattr(session.time, "sleep", sleep)
    Fault("hang", 1, "ddp:2").fire(_Ranks(rank=0), "ddp:2")  # another rank's fault
    Fault("hang", 1, "ddp:2").fire(_Ranks(rank=1), "ddp:1")  # another item
    assert slept == []
    with pytest.raises(_Stop):
        Fault("hang", 1, "ddp:2").fire(_Ranks(rank=1), "ddp:2")
    assert len(slept) == 3 and all(isinstance(s, int | float) and s >= 60 for s in slept)


def test_an_exit_fault_ends_the_process_with_code_3_after_flushing_stdout(monkeypatch):
    held = _Held(monkeypatch)
    catch_exit(monkeypatch)
    print("[1/4] ddp:1 ok", end="")
    Fault("exit", None, "ddp:2").fire(_Ranks(rank=1), "ddp:1")
    assert held.text() == ""  # not this item: nothing happens, nothing flushed
    with pytest.raises(Exit) as e:
        Fault("exit", None, "ddp:2").fire(_Ranks(rank=1), "ddp:2")
    assert e.value.args == (3,) and held.text() == "[1/4] ddp:1 ok"


# -- the order of a launch's items -----------------------------------------------------------


class _Rank1:
    """Rank 1 of 2 for `launch_order`: a broadcast gives what the root rank sent (rank 0 sent `sent`)."""

    def __init__(self, sent):
        self.sent = sent

    def Get_rank(self):
        return 1

    def bcast(self, obj, root=0):
        return {0: self.sent, 1: obj}[root]


class _Root(_Rank1):
    """Rank 0: what it broadcasts is its own."""

    def __init__(self):
        super().__init__(None)

    def Get_rank(self):
        return 0

    def bcast(self, obj, root=0):
        assert root == 0
        return obj


def test_launch_order_on_another_rank_takes_rank_0_s_seed():
    import numpy as np

    items = list(range(10))
    order, rec = session.launch_order(_Rank1(1234), items, "shuffled", None, 3)
    assert rec == {"order": "shuffled", "order_seed": 1236, "launch": 3}
    assert order == [items[i] for i in np.random.default_rng(1236).permutation(10)]


def test_a_drawn_seed_spans_32_bits_and_a_launch_s_seed_wraps_around(monkeypatch):
    import secrets

    monkeypatch.setattr(secrets, "randbelow", lambda n: n - 1)  # the largest seed it may draw
    items = list(range(6))
    assert session.launch_order(_Root(), items, "shuffled", 2**32 - 1, 2)[1]["order_seed"] == 0
    assert session.launch_order(_Root(), items, "shuffled", 2**32 - 1, 3)[1]["order_seed"] == 1
    assert session.launch_order(_Root(), items, "shuffled", None, 1)[1]["order_seed"] == 2**32 - 1


def test_a_launch_without_a_number_is_launch_1():
    items = list(range(6))
    assert session.launch_order(_Root(), items, "planned", 4, None) == (items, {"order": "planned", "launch": 1})
    assert session.launch_order(_Root(), items, "shuffled", 4, None)[1] == {
        "order": "shuffled", "order_seed": 4, "launch": 1}
    assert session.launch_order(_Root(), items, "shuffled", 4, 0, block=lambda i: i // 2)[1] == {
        "order": "shuffled", "order_seed": 4, "order_blocks": True, "launch": 1}


def test_a_blocked_order_records_its_launch():
    _, rec = session.launch_order(_Root(), list(range(6)), "shuffled", 9, 2, block=lambda i: i // 3)
    assert rec == {"order": "shuffled", "order_seed": 10, "order_blocks": True, "launch": 2}


def test_rounds_of_an_unblocked_shuffled_launch_are_drawn_from_the_seed_and_the_round():
    import numpy as np

    items = list(range(8))
    rec = {"order": "shuffled", "order_seed": 77, "launch": 1}
    rounds = session.round_orders(items, rec, 3)
    assert rounds == [items] + [[items[i] for i in np.random.default_rng([77, r]).permutation(8)] for r in (2, 3)]


def test_every_round_of_a_planned_launch_repeats_its_order():
    items = ["a", "b", "c"]
    assert session.round_orders(items, {"order": "planned", "launch": 1}, 4) == [items] * 4


# -- the watchdog's own thread, in this process ------------------------------------------------------------------


def test_the_watchdog_thread_checks_at_every_wake_asks_peers_every_few_and_ends_the_job_once(monkeypatch, capsys):
    """Its daemon thread (named ``ccbench-watchdog``) checks at every wake, asks about peers at every
    ``PEER_CHECK_TICKS``-th, and ends the job the first time a check says why (here its os._exit only notes it)."""
    monkeypatch.setattr(session, "WAKE_S", 0.01)
    monkeypatch.setattr(session, "PEER_CHECK_TICKS", 4)
    calls, ended, holder = [], [], []
    real = Watchdog.check

    def check(self, now, peers=True):
        calls.append((now, peers))
        if len(calls) == 9:  # the item starts late, its deadline long past: this check ends the job
            self.start("scatter 1 MiB", 0.0, now=-100.0)
        return real(self, now, peers)

    def exit_(code):
        ended.append(code)
        holder[0].stop()

    monkeypatch.setattr(Watchdog, "check", check)
    monkeypatch.setattr(session.os, "_exit", exit_)
    w = Watchdog(60, 2, 0)
    holder.append(w)
    (thread,) = [t for t in threading.enumerate() if t.name == "ccbench-watchdog"]
    assert thread.daemon and w.running
    w.join(30)
    assert not w.running and ended == [3] and len(calls) == 9
    assert capsys.readouterr().err == ("ccbench: error: watchdog: scatter 1 MiB at 2 ranks did not finish within "
                                       "60 s past its budget; ending the job\n")
    assert [p for _, p in calls] == [(i + 1) % 4 == 0 for i in range(9)]
    assert all(a <= b for (a, _), (b, _) in zip(calls, calls[1:], strict=False))  # the clock at each wake
