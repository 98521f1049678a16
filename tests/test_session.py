"""The session layer shared by sweeps and workloads, pure tier: faults, agreement, progress, reopening tables.

The MPI side (signals between items, --resume, the watchdog) is exercised by whole runs:
tests/test_cli.py for sweeps, tests/test_workload.py and tests/test_workload_mpi.py for workloads.
"""

import json
import signal
from pathlib import Path

import pytest

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.measure import session
from ccbench.measure.session import Fault, Progress, Watchdog, agree, read_fault, require_memory
from ccbench.store.results import Row, RunWriter
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
    if session._mem_available_bytes() is not None:
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
    assert not w._thread.is_alive()
    w.stop()


def _wrow(variant, part):
    return WorkloadRow(workload="ddp", variant=variant, model="m", algorithm="allreduce=ring", nranks=2,
                       group_ranks=2, dtype="float32", part=part, label="step" if part < 0 else f"bucket {part}",
                       collective="step" if part < 0 else "allreduce", ncalls=1, ntensors=1, payload_elems=4,
                       nbytes=16, samples=1, median_s=1e-3, min_s=1e-3, mean_s=1e-3, ci_low_s=1e-3, ci_high_s=1e-3,
                       samples_s=(1e-3,))


def test_reopen_cuts_unfinished_rows_and_rebuilds_the_csv_with_the_run_s_columns(tmp_path):
    w = RunWriter(tmp_path, {"kind": "workload"}, columns=WORKLOAD_COLUMNS)
    rows = [_wrow("a", -1), _wrow("a", 0), _wrow("b", -1)]
    for r in rows:
        w.append(r)
    w.close()
    with open(tmp_path / "cases.jsonl", "a") as f:
        f.write('{"workload": "dd')  # torn by a crash
    with open(tmp_path / "cases.csv", "a") as f:
        f.write("ddp,b,")
    session._reopen_tables(tmp_path, rows[:2], WorkloadRow)  # item b unfinished: its row goes too
    lines = (tmp_path / "cases.jsonl").read_text().splitlines(keepends=True)
    assert [WorkloadRow.from_dict(json.loads(x)) for x in lines] == rows[:2] and lines[-1].endswith("\n")
    csv = (tmp_path / "cases.csv").read_text().splitlines()
    assert csv[0].split(",") == WORKLOAD_COLUMNS and len(csv) == 3


def test_reopen_keeps_a_whole_last_row_without_its_newline(tmp_path):
    w = RunWriter(tmp_path, {})
    w.close()
    row = Row.from_dict(json.loads((DATA / "run-np2" / "cases.jsonl").read_text().splitlines()[0]))
    (tmp_path / "cases.jsonl").write_text(json.dumps(row.to_dict()))
    session._reopen_tables(tmp_path, [row], Row)
    assert (tmp_path / "cases.jsonl").read_text() == json.dumps(row.to_dict()) + "\n"
    assert (tmp_path / "cases.csv").read_text().count("\n") == 2
