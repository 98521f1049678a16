"""One real case above 2^31 elements: a uint8 bcast of 2 GiB + 8 bytes at 2 ranks, timed, checked element by element
and stored with its exact count (MPI's classic int count would have wrapped; mpi4py passes it with MPI-4's large-count
calls).  Skipped where the node lacks the memory (it needs about 9 GiB: each rank's buffer and the data it is
checked against)."""

import json
import os
import subprocess
import sys

import pytest

from ccbench.measure.hardware import memory_available

NBYTES = 2**31 + 8


@pytest.mark.skipif((memory_available()[0] or 0) < 12 * 2**30, reason="needs about 12 GiB of free memory")
def test_a_two_gib_uint8_bcast_is_measured_checked_and_stored_with_its_exact_count(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ccbench", "launch", "-n", "2", "-C", "bcast", "-a", "native",
                        "-s", str(NBYTES), "-t", "uint8", "-i", "2", "-x", "0", "--loop", "auto",
                        "--results-dir", "res", "--no-show"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    (row,) = [json.loads(line) for line in (run / "cases.jsonl").read_text().splitlines()]
    assert row["nbytes"] == row["count"] == NBYTES and row["nwrong"] == 0 and row["samples"] == 2
    assert row["loop"] == "python"  # the C loop's int count cannot hold it: the Python loop timed it
    assert row["median_s"] > 0
