"""Collective hooks: busbw factors, size definitions, and the exact expected results."""

import numpy as np
import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES, POISON, pattern, red_expected, red_input
from ccbench.core.dtypes import DTYPES, HALF, OPS


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
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in HALF])  # half: test_half_precision.py
@pytest.mark.parametrize("P", [1, 2, 3, 7, 9, 300])
def test_closed_form_reduction_equals_brute_force(op, dtype, P):
    n = 500
    acc = red_input(op, 0, P, 3, n, dtype)
    for r in range(1, P):
        acc = OPS[op](acc, red_input(op, r, P, 3, n, dtype))
    np.testing.assert_array_equal(acc, red_expected(op, P, 3, n, dtype))


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


# -- ping-pong: both ranks' buffers are checked -------------------------------------------

def _pingpong_buffers(P: int, rank: int, count: int = 10):
    return COLLECTIVES["pingpong"].make_buffers(count, P, rank, np.dtype("int32"), "none", 0, False, None)


def test_pingpong_buffers_before_the_round_trip():
    """Rank 0 sends its pattern; both receive buffers hold poison (10 wrong each until the data lands); rank 2 idles."""
    b0, b1, b2 = (_pingpong_buffers(3, r) for r in range(3))
    for b in (b0, b1, b2):
        b.fill()
    np.testing.assert_array_equal(b0.args[0], pattern(0, 0, 10, np.int32))
    assert (b0.args[1] == POISON).all() and b0.nwrong() == 10
    assert (b1.args[1] == POISON).all() and b1.nwrong() == 10
    assert b2.outputs == []


def _round_trip(fn, count: int = 10) -> list[int]:
    """Run the ping-pong `fn` on 2 simulated ranks over the ping-pong buffers; each rank's wrong elements."""

    def body(comm):
        bufs = _pingpong_buffers(comm.Get_size(), comm.Get_rank(), count)
        bufs.fill()
        fn(comm, *bufs.args, **bufs.kwargs)
        return bufs.nwrong()

    return simulate(2, body)[0]


def test_pingpong_round_trip_is_exact_on_both_ranks():
    """The native ping-pong on the simulator: rank 1 has rank 0's data, rank 0 has it back."""
    assert _round_trip(REGISTRY["pingpong"]["native"].fn) == [0, 0]


def test_pingpong_check_catches_a_message_that_missed_rank_1():
    """Rank 1 receives into scratch and echoes it: rank 0 gets the right data, rank 1's own 10 elements are wrong."""

    def echo_from_scratch(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            comm.Send(sendbuf, 1, 7)
            comm.Recv(recvbuf, 1, 7)
        else:
            scratch = np.empty_like(recvbuf)
            comm.Recv(scratch, 0, 7)
            comm.Send(scratch, 0, 7)

    assert _round_trip(echo_from_scratch) == [0, 10]


def test_pingpong_check_catches_a_wrong_reply_on_rank_0():
    """Rank 1 replies with its buffer as it was before the message came (poison): rank 0's 10 elements are wrong."""

    def reply_too_early(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            comm.Send(sendbuf, 1, 7)
            comm.Recv(recvbuf, 1, 7)
        else:
            comm.Sendrecv(recvbuf.copy(), 0, 7, recvbuf, 0, 7)

    assert _round_trip(reply_too_early) == [10, 0]


def test_pingpong_check_catches_a_reply_that_missed_rank_0():
    """Rank 0 receives the reply into scratch: its own buffer never got the reply, so its 10 elements count as wrong."""

    def reply_to_scratch(comm, sendbuf, recvbuf):
        if comm.Get_rank() == 0:
            comm.Send(sendbuf, 1, 7)
            comm.Recv(np.empty_like(recvbuf), 1, 7)
        else:
            comm.Recv(recvbuf, 0, 7)
            comm.Send(recvbuf, 0, 7)

    assert _round_trip(reply_to_scratch) == [10, 0]
