"""No hand-written algorithm writes into its send buffer (MPI: the send buffer is input only)."""

import numpy as np
import pytest
from conftest import HANDWRITTEN

from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES


def _untouched(coll: str, name: str, P: int, count: int, root: int) -> list[bool]:
    """Per rank: whether every send buffer (an input that is no output) still holds its input."""
    alg, hooks = get(coll, name), COLLECTIVES[coll]

    def body(comm):
        bufs = hooks.make_buffers(count, P, comm.rank, np.dtype("int32"), "sum", root, False, None)
        bufs.fill()
        alg(CountedComm(comm), *bufs.args, **bufs.kwargs)
        send = [(a, t) for a, t in bufs.inputs if not any(np.shares_memory(a, o) for o, _ in bufs.outputs)]
        return all(np.array_equal(a, t) for a, t in send)

    results, _ = simulate(P, body)
    return results


@pytest.mark.parametrize("coll,name", [pytest.param(c, n, id=f"{c}-{n}") for c, n in HANDWRITTEN
                                       if c not in ("barrier", "bcast")])
def test_send_buffers_are_input_only(coll, name):
    """Out of place, at 2 to 9 ranks and every root: each rank's send buffer ends as it began.

    The binomial reduce accumulates on the inner ranks of its tree (even relative ranks with a
    child); they must work on a copy, never on the caller's send buffer.
    """
    rooted = COLLECTIVES[coll].rooted
    for P in range(2, 10):
        if get(coll, name).unsupported(P, "sum"):
            continue
        for root in range(P) if rooted else (0,):
            ok = _untouched(coll, name, P, 5, root)
            assert all(ok), f"P={P} root={root}: send buffer changed on ranks {[r for r, v in enumerate(ok) if not v]}"
