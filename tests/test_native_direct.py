"""The timing loop calls native collectives as bound mpi4py methods: the very call the registered wrapper makes."""

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.native import direct_call


class _Recorder:
    """A stand-in communicator: each method records (name, args) instead of communicating."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args: self.calls.append((name, args))

    def Get_rank(self):  # noqa: N802 - mpi4py's name
        return 0


ARGS = {  # collective: (positional buffers, keyword arguments as the sweep passes them)
    "barrier": ((), {}),
    "bcast": (("B",), {"root": 1}),
    "scatter": (("S", "R"), {"root": 2}),
    "gather": (("S", "R"), {"root": 0}),
    "allgather": (("S", "R"), {}),
    "reduce": (("S", "R"), {"op": "max", "root": 1}),
    "reduce_scatter": (("S", "R"), {"op": "sum"}),
    "allreduce": (("S", "R"), {"op": "prod"}),
    "alltoall": (("S", "R"), {}),
}


@pytest.fixture(autouse=True)
def _ops(monkeypatch):
    """MPI.Op names without MPI: the wrapper and the direct call resolve op names through the same table."""
    from ccbench.algorithms import native

    monkeypatch.setattr(native, "_MPI_OPS", {"sum": "MPI.SUM", "prod": "MPI.PROD", "min": "MPI.MIN",
                                             "max": "MPI.MAX"})


@pytest.mark.parametrize("coll", sorted(ARGS))
def test_the_direct_call_is_the_wrappers_call(coll):
    args, kwargs = ARGS[coll]
    for name, alg in REGISTRY[coll].items():
        if not alg.native or alg.setup or alg.nonblocking:  # the persistent and non-blocking forms: their own tests
            continue
        via_wrapper, direct = _Recorder(), _Recorder()
        alg.fn(via_wrapper, *args, **kwargs)
        bound = direct_call(coll, alg.fn, direct, *args, **kwargs)
        assert bound is not None, name
        bound()
        assert direct.calls == via_wrapper.calls and len(direct.calls) == 1, name


def test_defaults_are_the_wrappers_and_op_names_become_ops():
    rec = _Recorder()
    direct_call("bcast", REGISTRY["bcast"]["native"].fn, rec, "B")()
    direct_call("allreduce", REGISTRY["allreduce"]["native"].fn, rec, "S", "R")()
    assert rec.calls == [("Bcast", ("B", 0)), ("Allreduce", ("S", "R", "MPI.SUM"))]


def test_no_direct_call_for_ping_pong_or_a_hand_written_algorithm():
    rec = _Recorder()
    assert direct_call("pingpong", REGISTRY["pingpong"]["native"].fn, rec, "S", "R") is None
    assert direct_call("allreduce", REGISTRY["allreduce"]["ring"].fn, rec, "S", "R") is None
    assert rec.calls == []


class _Request:
    """A stand-in persistent request: records its starts, waits and release."""

    def __init__(self, log):
        self.Start, self.Wait, self.Free = (lambda: log.append("Start"), lambda: log.append("Wait"),
                                            lambda: log.append("Free"))


@pytest.mark.parametrize("coll", sorted(ARGS))
def test_the_persistent_request_is_made_from_the_same_call(coll):
    """native-persistent makes <Method>_init with the arguments the blocking call takes, once; each call starts and
    waits on it; the one-shot function makes, runs and frees it."""
    args, kwargs = ARGS[coll]
    alg, plain = REGISTRY[coll]["native-persistent"], _Recorder()
    direct_call(coll, REGISTRY[coll]["native"].fn, plain, *args, **kwargs)()
    (method, values), = plain.calls
    made, log = [], []

    class Comm(_Recorder):
        def __getattr__(self, name):
            return lambda *a: made.append((name, a)) or _Request(log)

    call, free = alg.setup(Comm(), *args, **kwargs)
    call()
    call()
    free()
    assert made == [(method + "_init", values)] and log == ["Start", "Wait", "Start", "Wait", "Free"]
    log.clear()
    alg.fn(Comm(), *args, **kwargs)
    assert log == ["Start", "Wait", "Free"] and alg.native and "native-persistent" not in REGISTRY["pingpong"]
