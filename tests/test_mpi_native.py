"""MPI tier: every native collective for every dtype/op, in and out of place, several roots.

Run as ``mpiexec -n N python -m mpi4py -m pytest --with-mpi --only-mpi`` (N = 1..5).
"""

from pathlib import Path

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import DTYPES, OPS
from ccbench.measure.config import Case, load_config
from ccbench.measure.timing import TimingSettings

pytestmark = pytest.mark.mpi

TINY = TimingSettings(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=0.5)


def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.mark.parametrize("coll", list(COLLECTIVES))
def test_native_every_dtype_op_place_root(coll):
    from ccbench.measure.sweep import run_case

    comm = _comm()
    P = comm.Get_size()
    spec = COLLECTIVES[coll]
    if P < spec.min_ranks:
        pytest.skip(f"{coll} needs {spec.min_ranks} ranks")
    ops = list(OPS) if spec.reduction else ["none"]
    roots = sorted({0, P - 1}) if spec.rooted else [0]
    places = [False] if coll in ("barrier", "pingpong", "bcast") else [False, True]
    for dtype in DTYPES:
        for op in ops:
            for in_place in places:
                for root in roots:
                    for count in (0, 1, 37) if coll != "barrier" else (0,):
                        nbytes = spec.nbytes_for(count, DTYPES[dtype].itemsize, P)
                        case = Case(coll, "native", nbytes, count, dtype, op, in_place, root)
                        row = run_case(comm, case, TINY)
                        assert row.nwrong == 0, case.label()
                        assert row.samples >= 2 and row.median_s >= 0
                        assert row.ci_low_s <= row.median_s <= row.ci_high_s
                        assert row.msgs_max is None  # native traffic is not counted


def test_sweep_writes_a_complete_run(tmp_path):
    from ccbench.measure.sweep import run_sweep
    from ccbench.store.run import open_run

    comm = _comm()
    root_dir = comm.bcast(str(tmp_path), root=0)  # rank 0 owns the run directory
    cfg = load_config(None, {"collectives": "allreduce,bcast,alltoall,barrier", "sizes": "8:1K:4",
                             "min_reps": 3, "max_reps": 5, "budget_s": 0.2,
                             "results_dir": root_dir})
    code, path = run_sweep(cfg, thread=("multiple", "test"), argv=["test"], console=None)
    assert code == 0
    if comm.Get_rank() == 0:
        opened = open_run(path)
        meta, rows, warnings = opened.meta, opened.rows, opened.warnings
        assert meta["status"] == "complete" and not warnings
        assert meta["nranks"] == comm.Get_size() and meta["finished_cases"] == len(rows)
        assert meta["planned_cases"] == len(rows)
        assert all(r.ok for r in rows)
        assert {r.collective for r in rows} == {"allreduce", "bcast", "alltoall", "barrier"}
        assert (Path(path) / "cases.csv").read_text().count("\n") == len(rows) + 1
        assert meta["mpi_library"] and meta["thread_level"] == "multiple"


def test_hand_written_algorithms_under_mpi():
    """Every hand-written algorithm under a real MPI: exact for counts 0, 1, P-1, P, P+1, 1001."""
    import numpy as np
    from mpi4py import MPI

    comm = _comm()
    P, rank = comm.Get_size(), comm.Get_rank()
    for coll, algs in REGISTRY.items():
        spec = COLLECTIVES[coll]
        for name, alg in algs.items():
            if alg.native or alg.unsupported(P, "sum"):
                continue
            roots = sorted({0, P - 1}) if spec.rooted else [0]
            for count in sorted({0, 1, max(P - 1, 0), P, P + 1, 1001}):
                for in_place in (False, True):
                    for root in roots:
                        for dtype, op in (("float64", "sum"), ("int32", "max"), ("uint8", "prod")):
                            bufs = spec.make_buffers(count, P, rank, np.dtype(dtype), op, root,
                                                     in_place, MPI.IN_PLACE)
                            bufs.fill()
                            alg(comm, *bufs.args, **bufs.kwargs)
                            wrong = comm.allreduce(bufs.nwrong())
                            assert wrong == 0, (coll, name, count, in_place, root, dtype, op)


def test_window_sync_when_ranks_fit_the_cores():
    from ccbench.measure.provenance import usable_cores
    from ccbench.measure.sweep import run_case

    comm = _comm()
    P = comm.Get_size()
    if P > usable_cores():
        pytest.skip("window sync is refused on oversubscribed cores")
    settings = TimingSettings(warmup=2, min_reps=5, max_reps=10, target_rse=0.5, budget_s=0.5, sync="window")
    row = run_case(comm, Case("allreduce", "native", 64, 16, "float32", "sum", False, 0), settings)
    assert row.nwrong == 0 and row.sync == "window" and row.samples >= 5 and row.median_s > 0
