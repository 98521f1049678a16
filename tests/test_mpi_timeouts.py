"""A hung MPI test fails fast with its stack: per-test timeouts (pytest-timeout) in every tier of tests/run.sh, and a
timeout around each mpiexec, so a rank that fails while the others wait in a collective cannot hold CI to its limit."""

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_every_tier_of_the_suite_is_bounded_in_time():
    lines = [ln.strip() for ln in (REPO / "tests" / "run.sh").read_text().splitlines()]
    runs = [i for i, ln in enumerate(lines) if re.search(r"\bpytest\b", ln) and not ln.startswith("#")]
    assert len(runs) == 2, "the plain tier and the MPI tier"
    for i in runs:
        assert "--timeout" in lines[i], f"tests/run.sh line {i + 1} runs pytest without a per-test timeout"
    # a rank blocked in MPI never runs a signal handler: the MPI tier's timeout is a watcher thread
    assert "--timeout-method thread" in lines[runs[1]]
    mpi = [i for i, ln in enumerate(lines) if "mpiexec" in ln and not ln.startswith("#")]
    assert mpi and all(lines[i - 1].startswith("timeout ") and lines[i - 1].endswith("\\") for i in mpi), (
        "every mpiexec of tests/run.sh runs under timeout")


HUNG = '''
import pytest
from mpi4py import MPI


@pytest.mark.mpi(min_size=2)
def test_two_ranks_wait_for_each_other():
    comm = MPI.COMM_WORLD
    comm.recv(source=1 - comm.Get_rank())  # each waits for a message the other never sends: a deadlock
'''


@pytest.mark.skipif(shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists(),
                    reason="needs mpiexec")
def test_a_deadlocked_mpi_test_fails_with_its_stack_instead_of_hanging(tmp_path):
    test = tmp_path / "test_hung.py"
    test.write_text(HUNG)
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    start = time.monotonic()
    r = subprocess.run(["timeout", "120", mpiexec, "-n", "2", sys.executable, "-m", "mpi4py", "-m", "pytest", "-q",
                        "-p", "no:cacheprovider", "--with-mpi", "--timeout", "5", "--timeout-method", "thread",
                        str(test)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=150)
    took = time.monotonic() - start
    out = r.stdout + r.stderr
    assert r.returncode not in (0, 124), out[-3000:]  # failed, and not by the outer timeout
    assert took < 90, f"took {took:.0f} s"
    assert "Timeout" in out and "comm.recv(" in out, out[-3000:]  # the stack names where it hung
