"""MPI tier: the v-collectives with uneven counts, the library's own and hand-written, exact at every rank count the
tier runs; a sweep records the distribution; counts the ranks cannot hold are refused on every rank, nothing written.

Run as ``mpiexec -n N python -m mpi4py -m pytest --with-mpi --only-mpi tests/test_uneven_mpi.py`` (N = 1..5).
"""

import numpy as np
import pytest

from ccbench.algorithms import REGISTRY
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import symmetric
from ccbench.core.dtypes import half_available
from ccbench.core.errors import UsageError
from ccbench.measure.config import Case, load_config
from ccbench.measure.timing import TimingSettings

pytestmark = pytest.mark.mpi

TINY = TimingSettings(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=0.2)
V = [c for c, x in COLLECTIVES.items() if x.uneven]


def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _mixes(P: int) -> list[tuple[str, int, str, str]]:
    """(counts, count, dtype, op): every distribution once, with the dtypes and ops spread over them."""
    moe = f"moe:{max(P, 2) * 2},2,1.25,32"
    out = [("uniform", 0, "float64", "sum"), ("heavy:5", 13, "int32", "max"), ("zipf:1.5", 7, "float64", "sum"),
           (moe, 11, "float32", "sum"), ("~" + moe, 5, "uint8", "prod"), ("zipf:2", 9, "float16", "sum"),
           ("weights:" + ",".join(str(r % 3) for r in range(P)) if P > 1 else "weights:1", 6, "int64", "min")]
    if half_available():
        out.append(("heavy:3", 10, "bfloat16", "sum"))
    return out


@pytest.mark.parametrize("coll", V)
def test_native_and_hand_written_exact_with_uneven_counts(coll):
    """Every algorithm of every v-collective, every distribution, in and out of place, roots 0 and P-1."""
    from mpi4py import MPI

    comm = _comm()
    P, rank = comm.Get_size(), comm.Get_rank()
    spec = COLLECTIVES[coll]
    roots = sorted({0, P - 1}) if spec.rooted else [0]
    for name, alg in REGISTRY[coll].items():
        if alg.settings or alg.unsupported(P, "sum"):
            continue
        for counts, count, dtype, op in _mixes(P):
            for in_place in (False, True):
                if in_place and coll == "alltoallv" and not symmetric(counts, P):
                    continue
                for root in roots:
                    bufs = spec.buffers(count, P, rank, np.dtype(dtype) if dtype != "bfloat16" else _bf16(),
                                        op if spec.reduction else "sum", root, in_place, MPI.IN_PLACE, counts)
                    bufs.fill()
                    alg(comm, *bufs.args, **bufs.kwargs)
                    wrong = comm.allreduce(bufs.nwrong())
                    assert wrong == 0, (coll, name, counts, count, dtype, op, in_place, root)


def _bf16():
    from ccbench.core.dtypes import DTYPES

    return DTYPES["bfloat16"]


def test_a_case_is_timed_counted_and_recorded_with_its_counts():
    """run_case (the sweep's path) on the routed MoE distribution: exact, the row names the distribution, and the
    hand-written algorithm's counted traffic is its cost (busiest rank)."""
    from ccbench.measure.sweep import run_case

    comm = _comm()
    P = comm.Get_size()
    counts = f"moe:{max(P, 2) * 2},2,2,32"
    nbytes = COLLECTIVES["alltoallv"].nbytes_for(64, 4, P)
    for name in ("native", "pairwise", "linear"):
        case = Case("alltoallv", name, nbytes, 64, "float32", "none", False, 0, counts)
        row = run_case(comm, case, TINY)
        assert row.nwrong == 0 and row.counts == counts and row.samples >= 2, name
        if name != "native":
            cost = REGISTRY["alltoallv"][name].cost(P, nbytes, counts=counts, itemsize=4)
            assert (row.steps_max, row.step_bytes_max) == (cost.alpha, cost.beta), name
    row = run_case(comm, Case("gatherv", "binomial", COLLECTIVES["gatherv"].nbytes_for(10, 8, P), 10, "float64",
                              "none", False, P - 1, "heavy:7"), TINY)
    assert row.nwrong == 0 and row.counts == "heavy:7"


def test_native_v_collectives_bind_straight_to_mpi4py():
    """The timed call of a native v-collective is mpi4py's own method with its counts bound (no Python frame)."""
    import functools

    from mpi4py import MPI

    from ccbench.algorithms.native import direct_call

    comm = _comm()
    P, rank = comm.Get_size(), comm.Get_rank()
    for coll in V:
        bufs = COLLECTIVES[coll].buffers(5, P, rank, np.dtype("float64"), "sum", 0, False, MPI.IN_PLACE, "zipf:1")
        call = direct_call(coll, REGISTRY[coll]["native"].fn, comm, *bufs.args, **bufs.kwargs)
        assert isinstance(call, functools.partial), coll
        bufs.fill()
        call()
        assert comm.allreduce(bufs.nwrong()) == 0, coll


def test_a_sweep_records_the_distribution_and_refuses_what_the_ranks_cannot_hold(tmp_path):
    from ccbench.measure.sweep import run_sweep
    from ccbench.store.run import open_run

    comm = _comm()
    P = comm.Get_size()
    root_dir = comm.bcast(str(tmp_path), root=0)
    cfg = load_config(None, {"collectives": "alltoall,alltoallv,reduce_scatterv", "algorithms": "native,pairwise",
                             "counts": "zipf:1.5", "sizes": "64,4K", "min_reps": 2, "max_reps": 3, "budget_s": 0.1,
                             "results_dir": root_dir})
    code, path = run_sweep(cfg, thread=("multiple", "test"), argv=["test"], console=None)
    assert code == 0
    if comm.Get_rank() == 0:
        run = open_run(path)
        assert run.meta["config"]["counts"] == "zipf:1.5" and all(r.ok for r in run.rows)
        assert {r.counts for r in run.rows if r.collective != "alltoall"} == {"zipf:1.5"}
        assert {r.counts for r in run.rows if r.collective == "alltoall"} == {"uniform"}
    comm.Barrier()
    before = sorted(p.name for p in tmp_path.iterdir()) if comm.Get_rank() == 0 else None
    bad = load_config(None, {"collectives": "gatherv", "counts": "weights:" + ",".join(["1"] * (P + 1)),
                             "sizes": "64", "results_dir": root_dir})
    with pytest.raises(UsageError, match=f"gives {P + 1} weights for {P} ranks"):
        run_sweep(bad, thread=("multiple", "test"), argv=["test"], console=None)
    if comm.Get_rank() == 0:
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
