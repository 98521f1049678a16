"""Collective hooks: busbw factors, size definitions, and the exact expected results."""

import numpy as np
import pytest

from ccbench.core.collectives import COLLECTIVES, _red_expected, _red_input
from ccbench.core.dtypes import DTYPES, OPS


def test_busbw_factors_follow_nccl_tests():
    P = 8
    assert COLLECTIVES["allreduce"].busbw_factor(P) == pytest.approx(2 * 7 / 8)
    for c in ("allgather", "reduce_scatter", "alltoall", "gather", "scatter"):
        assert COLLECTIVES[c].busbw_factor(P) == pytest.approx(7 / 8)
    for c in ("bcast", "reduce", "pingpong"):
        assert COLLECTIVES[c].busbw_factor(P) == 1.0


def test_count_and_nbytes():
    ag = COLLECTIVES["allgather"]
    assert ag.count_for(64, 4, 4) == 4 and ag.nbytes_for(4, 4, 4) == 64
    assert ag.count_for(8, 4, 4) == 1  # at least one element per block
    assert ag.count_for(0, 4, 4) == 0
    ar = COLLECTIVES["allreduce"]
    assert ar.count_for(64, 8, 4) == 8 and ar.nbytes_for(8, 8, 4) == 64


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("P", [1, 2, 3, 7, 9, 300])
def test_closed_form_reduction_equals_brute_force(op, dtype, P):
    n = 500
    acc = _red_input(op, 0, P, 3, n, dtype)
    for r in range(1, P):
        acc = OPS[op](acc, _red_input(op, r, P, 3, n, dtype))
    np.testing.assert_array_equal(acc, _red_expected(op, P, 3, n, dtype))


@pytest.mark.parametrize("name", list(COLLECTIVES))
def test_serial_buffers_check_themselves(name):
    """At P = 1 every collective is a copy (or nothing): filling + copying gives nwrong 0."""
    coll = COLLECTIVES[name]
    if coll.min_ranks > 1:
        pytest.skip("needs two ranks")
    bufs = coll.make_buffers(10, 1, 0, np.dtype("int32"), "sum", 0, False, None)
    bufs.fill()
    if len(bufs.args) == 2 and bufs.args[0] is not None and bufs.args[1] is not None:
        bufs.args[1][...] = bufs.args[0]
    assert bufs.nwrong() == 0
    for out, _ in bufs.outputs:
        out[...] = 0
    if bufs.outputs:
        assert bufs.nwrong() > 0
