"""Shared test helpers."""

import contextlib
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

import pytest

from ccbench.algorithms import REGISTRY

HANDWRITTEN = [
    (coll, name) for coll, algs in REGISTRY.items() for name, alg in algs.items() if not alg.native
]


def handwritten_params():
    """pytest params for every hand-written algorithm, skipped cleanly when none exist yet."""
    return [pytest.param(c, n, id=f"{c}-{n}") for c, n in HANDWRITTEN]


@pytest.fixture
def stand_in_mpi(monkeypatch):
    """`from mpi4py import MPI` in the session gives a stand-in's constants (no MPI_Init in the plain tier).

    A test module may define its own, with the constants it needs."""
    mpi = types.ModuleType("mpi4py.MPI")
    mpi.IN_PLACE, mpi.MAX = object(), "MAX"
    pkg = types.ModuleType("mpi4py")
    pkg.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", pkg)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
    return mpi


_OWN_BASETEMP, _PASSED = pytest.StashKey[bool](), pytest.StashKey[bool]()


def _mpi_rank() -> str | None:
    """This process's rank where mpiexec started it (MPICH's Hydra, Open MPI), else None."""
    return os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")


def pytest_configure(config):
    """Under mpiexec every rank is a pytest of its own: each gets its own temporary root (one folder per job,
    named by the launcher's process, one per rank), so the ranks do not race to prune each other's numbered
    folders (a "(rm_rf) error removing" warning at 5 ranks)."""
    rank = _mpi_rank()
    if rank is not None and config.option.basetemp is None:
        job = Path(tempfile.gettempdir()) / f"ccbench-pytest-{os.getppid()}"
        job.mkdir(mode=0o700, exist_ok=True)
        config.option.basetemp = job / f"rank{rank}"
        config.stash[_OWN_BASETEMP] = True


def pytest_unconfigure(config):
    """A rank's temporary root goes when its tests passed (kept for a look where one failed)."""
    if config.stash.get(_OWN_BASETEMP, False) and config.stash.get(_PASSED, False):
        shutil.rmtree(config.option.basetemp, ignore_errors=True)
        with contextlib.suppress(OSError):
            Path(config.option.basetemp).parent.rmdir()  # the job's folder, once the last rank's is gone


def pytest_sessionfinish(session, exitstatus):
    session.config.stash[_PASSED] = exitstatus == 0
