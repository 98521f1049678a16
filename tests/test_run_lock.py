"""One writer of a run at a time (issue 26, item 4): two --resume of one run started together left 50 rows for 28
planned cases at e066e41, both 'all correct'.  Now the second is refused in one line naming the holder; a lock left
by a dead process of this host is taken over; one left from another host is refused with how to take it over."""

import json
import os
import subprocess
import sys

import pytest
from runfiles import workload_row

from ccbench.core.errors import UsageError
from ccbench.measure import session
from ccbench.store.lock import LOCK_NAME, RunLock
from ccbench.store.results import RunWriter
from ccbench.store.run import open_run
from ccbench.store.workload_rows import WORKLOAD_COLUMNS, WorkloadRow


class _Rank0:
    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def allreduce(self, value, op=None):
        return value

    def bcast(self, value, root=0):
        return value

    def allgather(self, value):
        return [value]


def _workload_run(path, rows):
    w = RunWriter(path, {"kind": "workload", "nranks": 1, "mpi_library": "MPICH 5", "config": {}},
                  columns=WORKLOAD_COLUMNS)
    for r in rows:
        w.append(r)
    w.update(status="interrupted")
    w.close()
    return path


def _resume(path):
    prov = {"nranks": 1, "mpi_library": "MPICH 5", "start_time": "T2"}
    return session.open_run_dir(_Rank0(), lambda: pytest.fail("no new directory"), path, prov=prov,
                                argv=["ccbench", "workload", "--resume"], same_config=lambda c: True,
                                summary=lambda r: r, row_cls=WorkloadRow)


def test_a_second_resume_is_refused_while_the_first_writes_and_takes_over_after(tmp_path, stand_in_mpi):
    run = _workload_run(tmp_path, [workload_row("a", -1)])
    assert not (run / LOCK_NAME).exists()  # given back when the writer closed
    first, finished = _resume(run)
    held = json.loads((run / LOCK_NAME).read_text())
    assert held["pid"] == os.getpid() and finished == [workload_row("a", -1)]
    before = (run / "cases.jsonl").read_bytes()
    with pytest.raises(UsageError, match=rf"is in use by process {os.getpid()} on .*: wait for it to end"):
        _resume(run)
    assert (run / "cases.jsonl").read_bytes() == before  # the refused resume cut nothing
    first.append(workload_row("a", 0))
    first.close()
    assert not (run / LOCK_NAME).exists()
    second, finished = _resume(run)
    second.close()
    assert len(finished) == 2 and len(open_run(run).rows) == 2


def test_a_lock_left_by_a_dead_process_of_this_host_is_taken_over(tmp_path, stand_in_mpi):
    run = _workload_run(tmp_path, [workload_row("a", -1)])
    # a process that took the lock and was killed: the kernel gave the lock back, its file stayed
    code = (f"from ccbench.store.lock import RunLock; import os; RunLock({str(run)!r}).acquire(); os._exit(9)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 9
    assert json.loads((run / LOCK_NAME).read_text())["pid"] != os.getpid()
    writer, _ = _resume(run)
    writer.close()


def test_a_lock_left_from_another_host_is_refused_with_how_to_take_it_over(tmp_path, stand_in_mpi):
    run = _workload_run(tmp_path, [workload_row("a", -1)])
    (run / LOCK_NAME).write_text(json.dumps({"host": "node-elsewhere", "pid": 4242, "since": "T0"}))
    with pytest.raises(UsageError, match=r"taken by process 4242 on node-elsewhere .* take the run over by removing "):
        _resume(run)
    with pytest.raises(UsageError, match="node-elsewhere"):
        RunLock(run).acquire()
    (run / LOCK_NAME).unlink()  # the user takes it over
    writer, _ = _resume(run)
    writer.close()


def test_the_lock_is_a_context_manager_and_releasing_twice_is_harmless(tmp_path):
    with RunLock(tmp_path) as lock:
        with pytest.raises(UsageError, match="is in use"):
            RunLock(tmp_path).acquire()
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()
