"""Shared test helpers."""

import pytest

from ccbench.algorithms import REGISTRY

HANDWRITTEN = [
    (coll, name) for coll, algs in REGISTRY.items() for name, alg in algs.items() if not alg.native
]


def handwritten_params():
    """pytest params for every hand-written algorithm, skipped cleanly when none exist yet."""
    return [pytest.param(c, n, id=f"{c}-{n}") for c, n in HANDWRITTEN]
