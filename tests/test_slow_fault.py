"""CCBENCH_FAULT=slow:...: reading it, refusing bad values, recording it, and a whole run under it.

How the delay enters the samples (exactly, on the named rank and case only) is pinned on the
scripted stand-in for MPI and the clock: tests/test_measure_contract.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccbench.core.errors import UsageError
from ccbench.measure.session import SLOWED, Fault, Session, read_fault
from ccbench.store.results import RunWriter

REPO = Path(__file__).resolve().parent.parent


def _read(monkeypatch, spec: str) -> Fault:
    monkeypatch.setenv("CCBENCH_FAULT", spec)
    return read_fault()


@pytest.mark.parametrize(("spec", "expected"), [
    ("slow:1:allreduce/ring:5us", Fault("slow", 1, "allreduce/ring", delay_s=5 * 1e-6)),  # as parse_time makes it
    ("slow:all:allreduce/ring:20%", Fault("slow", None, "allreduce/ring", fraction=0.2)),
    ("slow:0:allreduce/ring:1K:1.5ms", Fault("slow", 0, "allreduce/ring:1024", delay_s=1.5e-3)),
    ("slow:0:allreduce/native:ring:20%", Fault("slow", 0, "allreduce/native:ring", fraction=0.2)),
    ("slow:all:allreduce/native:ring:64:0.5%", Fault("slow", None, "allreduce/native:ring:64", fraction=0.005)),
    ("slow:3:bcast/native:0us", Fault("slow", 3, "bcast/native")),
])
def test_read_a_slow_fault(monkeypatch, spec, expected):
    fault = _read(monkeypatch, spec)
    assert fault == expected
    assert fault.spec == spec


def test_which_cases_a_slow_fault_slows(monkeypatch):
    every_size = _read(monkeypatch, "slow:all:allreduce/ring:20%")
    assert every_size.slows("allreduce", "ring", 8) and every_size.slows("allreduce", "ring", 1 << 20)
    assert not every_size.slows("allreduce", "native", 8) and not every_size.slows("bcast", "ring", 8)
    one_size = _read(monkeypatch, "slow:all:allreduce/ring:1K:20%")
    assert one_size.slows("allreduce", "ring", 1024) and not one_size.slows("allreduce", "ring", 1023)
    variant = _read(monkeypatch, "slow:all:allreduce/native:ring:64:5us")
    assert variant.slows("allreduce", "native:ring", 64)
    assert not variant.slows("allreduce", "native", 64) and not variant.slows("allreduce", "native:ring", 8)
    assert not Fault("hang", None, "allreduce/ring:8").slows("allreduce", "ring", 8)


def test_which_ranks_a_fault_is_aimed_at(monkeypatch):
    assert [_read(monkeypatch, "slow:1:allreduce/ring:5us").on(r) for r in range(3)] == [False, True, False]
    assert all(_read(monkeypatch, "slow:all:allreduce/ring:5us").on(r) for r in range(3))


@pytest.mark.parametrize(("spec", "why"), [
    ("slow:1:allreduce/ring", "expected slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY"),
    ("slow:1:allreduce:5us", "expected slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY"),
    ("slow:1:allreduce/ring:", "expected slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY"),
    ("slow:1:/ring:5us", "expected slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY"),
    ("slow:1:allreduc/ring:5us", "unknown collective 'allreduc'"),
    ("slow:1:allreduce/warp:5us", "allreduce has no algorithm 'warp'"),
    ("slow:1:allreduce/ring:64", "bad delay '64': give a time with its unit"),
    ("slow:1:allreduce/ring:fast", "bad delay 'fast'"),
    ("slow:1:allreduce/ring:-5us", "a time must be >= 0"),
    ("slow:1:allreduce/ring:1e999s", "a delay must be finite"),
    ("slow:1:allreduce/ring:-20%", "a share must be a finite percentage >= 0"),
    ("slow:1:allreduce/ring:inf%", "a share must be a finite percentage >= 0"),
    ("slow:1:allreduce/ring:x%", "bad share 'x%'"),
    ("slow:1:allreduce/ring:1Q:5us", "bad size '1Q'"),
    ("slow:1:allreduce/ring:1.5:5us", "not a whole number of bytes"),
    ("slow:one:allreduce/ring:5us", "expected KIND:RANK:ITEM"),
    ("slow:all", "expected KIND:RANK:ITEM"),
])
def test_a_bad_slow_fault_is_refused_in_one_line(monkeypatch, spec, why):
    with pytest.raises(UsageError) as exc:
        _read(monkeypatch, spec)
    text = str(exc.value)
    assert text.startswith(f"CCBENCH_FAULT={spec!r}: ") and why in text and "\n" not in text


def test_the_fault_is_recorded_in_run_json(tmp_path, monkeypatch):
    """Provenance: the run says which fault it was measured under (a slow one with its delay)."""

    class Alone:
        def Get_rank(self):
            return 0

        def Get_size(self):
            return 1

    fault = _read(monkeypatch, "slow:all:allreduce/ring:1K:20%")
    session = Session(Alone(), RunWriter(tmp_path, {"nranks": 1}), watchdog_s=0, fault=fault)
    assert json.loads((tmp_path / "run.json").read_text())["fault"] == {
        "spec": "slow:all:allreduce/ring:1K:20%", "kind": "slow", "rank": "all", "item": "allreduce/ring:1024",
        "delay_s": 0.0, "fraction": 0.2}
    session.finished()
    session.close()
    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["status"] == "complete" and meta["fault"]["fraction"] == 0.2
    assert Fault("hang", 1, "ddp:2", spec="hang:1:ddp:2").record() == {
        "spec": "hang:1:ddp:2", "kind": "hang", "rank": 1, "item": "ddp:2"}


def _launch(tmp_path: Path, fault: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CCBENCH_FAULT=fault, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", *args,
                           "--results-dir", str(tmp_path), "--no-show"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=240)


def test_a_replicated_run_under_a_slow_fault(tmp_path):
    """2 ms after each call of allreduce/native at 64 B on rank 1, in both launches of a run.

    Every sample of that case is at least the delay (it is spun inside the timed region); its
    row, and only its, is flagged; each launch's run.json and the merged one record the fault.
    """
    spec = "slow:1:allreduce/native:64:2ms"
    r = _launch(tmp_path, spec, "-C", "allreduce,bcast", "-s", "8,64", "--launches", "2", "--min-reps", "5",
                "--budget", "0.2")
    assert r.returncode == 0, r.stderr
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    rows = [json.loads(x) for x in (run / "cases.jsonl").read_text().splitlines()]
    slowed = [(x["collective"], x["nbytes"]) for x in rows if SLOWED in x["flags"]]
    assert slowed == [("allreduce", 64)] and len(rows) == 4
    (row,) = [x for x in rows if SLOWED in x["flags"]]
    assert row["launches"] == [1, 2] and min(row["samples_s"]) >= 2e-3
    record = {"spec": spec, "kind": "slow", "rank": 1, "item": "allreduce/native:64", "delay_s": 2e-3,
              "fraction": 0.0}
    assert json.loads((run / "run.json").read_text())["fault"] == record
    parts = sorted((run / "parts").iterdir())
    assert len(parts) == 2 and all(json.loads((p / "run.json").read_text())["fault"] == record for p in parts)


def test_a_bad_slow_fault_stops_the_launch_with_one_line(tmp_path):
    r = _launch(tmp_path, "slow:all:allreduce/ring:fast", "-C", "allreduce", "-s", "8")
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench:")]
    assert lines == ["ccbench: error: CCBENCH_FAULT='slow:all:allreduce/ring:fast': bad delay 'fast': expected a "
                     "time such as 2us, 1.5ms or 3e-6 (units s, ms, us, µs, ns)"], r.stderr
    assert not any(d.is_dir() for d in tmp_path.iterdir())
