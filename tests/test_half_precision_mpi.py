"""MPI tier: float16 and bfloat16 under a real MPI library, native and hand-written.

Run as ``mpiexec -n N python -m mpi4py -m pytest --only-mpi`` (N = 1..5).  The plain tier
(test_half_precision.py) holds the bound at P = 2-64 on the simulated communicator; here the same
checks run through the library: bfloat16 (and float16 where the library lacks it) as a
user-defined datatype and op, float16 as the library's own type where it has one.
"""

import numpy as np
import pytest

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.p2p import reduce_half
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS
from ccbench.measure.config import Case
from ccbench.measure.timing import TimingSettings

pytestmark = pytest.mark.mpi
ml_dtypes = pytest.importorskip("ml_dtypes")

HALVES = ("float16", "bfloat16")
TINY = TimingSettings(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=0.5)
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter")


def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def test_every_reduction_algorithm_stays_within_its_own_bound_under_mpi():
    """Hand-written algorithms held to their own additions (not P - 1); native to P - 1 (any order)."""
    from mpi4py import MPI

    comm = _comm()
    P, rank = comm.Get_size(), comm.Get_rank()
    for coll in REDUCTIONS:
        spec = COLLECTIVES[coll]
        for name, alg in REGISTRY[coll].items():
            if alg.settings or alg.unsupported(P, "sum"):
                continue  # the forced variants run in launches of their own
            for dtype in HALVES:
                for op in OPS:
                    for in_place in (False, True):
                        for count in ((0, 1, P + 1, 1001) if op == "sum" else (37,)):
                            root = P - 1 if spec.rooted else 0
                            bufs = spec.make_buffers(count, P, rank, DTYPES[dtype], op, root, in_place,
                                                     MPI.IN_PLACE)
                            if op not in ("min", "max"):
                                bufs.steps = alg.additions_at(P)
                            bufs.fill()
                            alg(comm, *bufs.args, **bufs.kwargs)
                            wrong = comm.allreduce(bufs.nwrong())
                            assert wrong == 0, (coll, name, dtype, op, in_place, count)


@pytest.mark.parametrize("coll", [c for c in COLLECTIVES if c != "barrier"])
def test_the_sweep_times_and_checks_half_types_native_and_hand_written(coll):
    """What a sweep's case does (sweep.run_case: buffers, the bound call, validation) for both types."""
    from ccbench.measure.sweep import run_case

    comm = _comm()
    P = comm.Get_size()
    spec = COLLECTIVES[coll]
    if P < spec.min_ranks:
        pytest.skip(f"{coll} needs {spec.min_ranks} ranks")
    algs = ["native"] + [n for n, a in REGISTRY[coll].items() if not a.native][:1]
    for name in algs:
        for dtype in HALVES:
            for count in (0, 37):
                nbytes = spec.nbytes_for(count, 2, P)
                case = Case(coll, name, nbytes, count, dtype, "sum" if spec.reduction else "none", False, 0)
                row = run_case(comm, case, TINY)
                assert row.nwrong == 0 and row.samples >= 2, case.label()
                if name != "native" and count:
                    assert row.bytes_total % 2 == 0  # 16-bit messages


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", list(OPS))
def test_at_two_ranks_native_and_ring_round_as_the_frameworks_do(dtype, op):
    """One combining step: the library's reduction (its own float16 type, or the user-defined op) and the
    hand-written ring both give float32-widened, rounded-back results, bit for bit."""
    from mpi4py import MPI

    world = _comm()
    comm = world.Split(0 if world.Get_rank() < 2 else MPI.UNDEFINED, world.Get_rank())
    if comm == MPI.COMM_NULL:
        return
    try:
        dt = DTYPES[dtype]
        rng = np.random.default_rng(11 + comm.Get_rank())
        scale = 30 if op == "prod" else 1000
        mine = (rng.standard_normal(4099) * scale).astype(dt)
        both = comm.allgather(mine)
        want = both[1].copy()
        reduce_half(OPS[op], both[0], want)
        for name in ("native", "ring"):
            got = np.empty_like(mine)
            REGISTRY["allreduce"][name](comm, mine, got, op=op)
            assert (got.view(np.uint16) == want.view(np.uint16)).all(), name
    finally:
        comm.Free()


def test_the_library_path_of_each_half_type_is_said_and_its_local_reduction_works():
    from mpi4py import MPI

    from ccbench.algorithms.native import half_path, reduce_local_of

    bf16 = half_path(DTYPES["bfloat16"])
    if MPI.BFLOAT16_T == MPI.DATATYPE_NULL:
        assert "user-defined datatype (ccbench_bfloat16, 2 contiguous MPI_BYTE)" in bf16
    f16 = half_path(DTYPES["float16"])
    if MPI.FLOAT16_T != MPI.DATATYPE_NULL:
        assert f"library's own datatype {MPI.FLOAT16_T.Get_name()}" in f16
    assert half_path(DTYPES["float32"]) is None
    for dtype in HALVES:
        a = np.arange(100).astype(DTYPES[dtype])
        b = np.full(100, 3).astype(DTYPES[dtype])
        reduce_local_of("sum", DTYPES[dtype])(a, b)
        assert (b.astype(np.float64) == np.arange(100) + 3).all()


def test_float16_on_a_library_without_its_type_takes_the_user_defined_path(monkeypatch):
    """As on a library that has no float16 datatype: the same user-defined datatype and op as bfloat16."""
    from mpi4py import MPI

    from ccbench.algorithms import native

    monkeypatch.setattr(native, "_WIRES", {})
    monkeypatch.setattr(native, "_library_type", lambda *_: None)
    assert "user-defined datatype (ccbench_float16" in native.half_path(np.float16)
    comm = _comm()
    P, rank = comm.Get_size(), comm.Get_rank()
    for coll in REDUCTIONS:
        for op in OPS:
            bufs = COLLECTIVES[coll].make_buffers(101, P, rank, DTYPES["float16"], op, 0, False, MPI.IN_PLACE)
            bufs.fill()
            REGISTRY[coll]["native"](comm, *bufs.args, **bufs.kwargs)
            assert comm.allreduce(bufs.nwrong()) == 0, (coll, op)


def test_a_sweep_holds_each_hand_written_sum_to_its_own_additions_on_the_node_layout_it_finds(monkeypatch):
    """The library's own sum to P - 1 (any order); a hand-written one to its count, which for hierarchical
    depends on the layout: here one node of P ranks, so ceil(lg P) and no leaders' step."""
    from ccbench.algorithms.p2p import counted
    from ccbench.core.collectives import CaseBuffers
    from ccbench.measure.sweep import run_case

    comm = _comm()
    P = comm.Get_size()
    assert counted(comm).node_layout() == {"ranks_per_node": P, "nodes": 1}
    held, check = [], CaseBuffers.nwrong

    def spy(self):
        held.append(self.steps)
        return check(self)

    monkeypatch.setattr(CaseBuffers, "nwrong", spy)
    names = ("native", "ring", "recursive_doubling", "hierarchical")
    for name in names:
        case = Case("allreduce", name, 2 * 37, 37, "float16", "sum", False, 0)
        assert run_case(comm, case, TINY).nwrong == 0
    assert held == [REGISTRY["allreduce"][n].additions_at(P, ranks_per_node=P, nodes=1) for n in names]
    # recursive doubling: lg p' steps of the power-of-two group, +1 for the fold; hierarchical: ceil(lg P)
    folds = {1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 3, 8: 3}
    assert held == [P - 1, P - 1, folds[P], (P - 1).bit_length()]
