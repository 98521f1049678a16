"""Finished runs on disk for the tests of the commands that read them (tune, verify), and what reading leaves."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench.store.derived import derived_root
from ccbench.store.results import RunWriter
from ccbench.store.workload_rows import WorkloadRow

#: A run's provenance when a test says nothing else: Open MPI 5.0.11 (the library with the most tuning formats).
OPEN_MPI = {"mpi_vendor": "Open MPI 5.0.11", "mpi_library": "Open MPI v5.0.11",
            "start_time": "2026-01-01T00:00:00", "skipped": [], "config": {}}


def write_run(path, rows, **meta):
    """A complete run of `rows` at `path` written as a sweep writes it; `meta` replaces or adds provenance
    (the rank count is the first row's unless `nranks` is given)."""
    path.mkdir(parents=True)
    w = RunWriter(path, {**OPEN_MPI, "nranks": rows[0].nranks, **meta})
    for r in rows:
        w.append(r)
    w.update(status="complete")
    w.close()
    return path


def workload_row(variant, part):
    """A DDP workload row of `variant`: its step (part -1) or one bucket's allreduce, one sample of 1 ms."""
    return WorkloadRow(workload="ddp", variant=variant, model="m", algorithm="allreduce=ring", nranks=2,
                       group_ranks=2, dtype="float32", part=part, label="step" if part < 0 else f"bucket {part}",
                       collective="step" if part < 0 else "allreduce", ncalls=1, ntensors=1, payload_elems=4,
                       nbytes=16, samples=1, median_s=1e-3, min_s=1e-3, mean_s=1e-3, ci_low_s=1e-3, ci_high_s=1e-3,
                       samples_s=(1e-3,))


def tree_state(root) -> dict:
    """Every file and folder under `root` (itself included): its bytes (files) and its modification time, in ns.

    Equal before and after a command: the command left the tree as it found it.
    """
    root = Path(root)
    out = {".": ("dir", os.stat(root).st_mtime_ns)}
    for p in sorted(root.rglob("*")):
        st = os.stat(p)
        out[str(p.relative_to(root))] = (p.read_bytes() if p.is_file() else "dir", st.st_mtime_ns)
    return out


def derived(run) -> Path:
    """Where a command that reads `run` writes by default (``RESULTS-derived/RUN``)."""
    return derived_root(run)


def _mount_namespaces() -> bool:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


#: A test that mounts in a namespace of its own (unshare -m): needs root; CI has it, so there it never skips.
needs_mount_namespace = pytest.mark.skipif(not _mount_namespaces() and os.environ.get("CI") != "true",
                                           reason="needs root and mount namespaces (unshare -m); CI has both")
