"""Shared test helpers."""

import sys
import types

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
