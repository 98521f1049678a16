"""Persistent collectives: the library's own (MPI-4 ``<coll>_init``), their set-up timed apart (``setup_s``)."""

import dataclasses

import pytest

from ccbench.algorithms import REGISTRY
from ccbench.core.collectives import COLLECTIVES
from ccbench.measure.config import Case, load_config
from ccbench.measure.timing import TimingSettings
from ccbench.store.results import Row

TINY = TimingSettings(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=0.5)


def test_rows_written_before_the_set_up_field_load_without_one():
    from test_results import make_row

    stored = make_row().to_dict()
    del stored["setup_s"]
    assert Row.from_dict(stored).setup_s is None
    assert Row.from_dict({**stored, "setup_s": 2e-4}).setup_s == 2e-4


class _NoKernel:
    """A compiled loop that must not be asked: persistent calls are timed by the Python loop."""

    def kernel(self, *args):
        raise AssertionError("the compiled loop was asked to time a persistent call")


@pytest.mark.mpi
@pytest.mark.parametrize("coll", [c for c in COLLECTIVES if "native-persistent" in REGISTRY[c]])
def test_native_persistent_is_validated_and_its_set_up_timed_apart(coll):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_case

    comm = MPI.COMM_WORLD
    P, spec = comm.Get_size(), COLLECTIVES[coll]
    why_not = REGISTRY[coll]["native-persistent"].unsupported(P, "sum" if spec.reduction else None)
    assert (why_not is None) == (MPI.Get_version() >= (4, 0))  # the installed library's own
    places = [False] if coll in ("barrier", "bcast") else [False, True]
    for in_place in places:
        for root in sorted({0, P - 1}) if spec.rooted else [0]:
            for count in (0, 37) if coll != "barrier" else (0,):
                nbytes = spec.nbytes_for(count, 4, P)
                case = Case(coll, "native-persistent", nbytes, count, "float32", "sum" if spec.reduction else "none",
                            in_place, root)
                row = run_case(comm, case, TINY, loop=_NoKernel())
                assert row.nwrong == 0, case.label()
                assert row.setup_s > 0 and row.loop == "python" and row.msgs_max is None
                plain = run_case(comm, dataclasses.replace(case, algorithm="native"), TINY)
                assert plain.setup_s is None and plain.nwrong == 0


@pytest.mark.parametrize("coll,name,blocking", [("allreduce", "ring-persistent", "ring"),
                                                ("bcast", "binomial-persistent", "binomial")])
@pytest.mark.parametrize("P", [1, 2, 3, 5])
def test_a_persistent_schedule_made_once_runs_every_call_as_its_blocking_twin(coll, name, blocking, P):
    """Set up once, called three times on fresh inputs: right every time, each call counting and sending what one
    call of the blocking algorithm does (the same messages, so the same textbook cost)."""
    import numpy as np

    from ccbench.algorithms import get
    from ccbench.algorithms.p2p import CountedComm
    from ccbench.algorithms.simcomm import simulate

    alg, spec = get(coll, name), COLLECTIVES[coll]

    def body(comm, persistent=True):
        cc = CountedComm(comm)
        bufs = spec.buffers(37, P, comm.rank, np.dtype("float32"), "sum", P - 1, False, None)
        if not persistent:
            bufs.fill()
            get(coll, blocking)(cc, *bufs.args, **bufs.kwargs)
            return [bufs.nwrong()], [cc.counts.as_tuple()]
        call, free = alg.setup(cc, *bufs.args, **bufs.kwargs)
        wrong, counts = [], []
        for _ in range(3):
            bufs.fill()
            cc.counts.reset()
            call()
            wrong.append(bufs.nwrong())
            counts.append(cc.counts.as_tuple())
        free()
        return wrong, counts

    made, messages = simulate(P, body)
    once, once_messages = simulate(P, lambda comm: body(comm, False))
    assert all(w == [0, 0, 0] for w, _ in made)
    assert all(c == [o[1][0]] * 3 for (_, c), o in zip(made, once, strict=True))
    key = [(m.source, m.dest, m.nbytes, m.send_range, m.recv_range) for m in once_messages]
    assert sorted((m.source, m.dest, m.nbytes, m.send_range, m.recv_range) for m in messages) == sorted(key * 3)


@pytest.mark.mpi
@pytest.mark.parametrize("coll,name,blocking", [("allreduce", "ring-persistent", "ring"),
                                                ("bcast", "binomial-persistent", "binomial")])
def test_a_hand_written_persistent_schedule_is_validated_counted_and_its_set_up_timed(coll, name, blocking):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_case

    comm = MPI.COMM_WORLD
    P, spec = comm.Get_size(), COLLECTIVES[coll]
    for count in (0, 37):
        for dtype in ("float32", "float16"):
            nbytes = spec.nbytes_for(count, 4 if dtype == "float32" else 2, P)
            case = Case(coll, name, nbytes, count, dtype, "sum" if spec.reduction else "none", coll != "bcast",
                        P - 1 if spec.rooted else 0)
            row = run_case(comm, case, TINY)
            twin = run_case(comm, dataclasses.replace(case, algorithm=blocking), TINY)
            assert row.nwrong == 0 and row.setup_s > 0 and twin.setup_s is None, case.label()
            assert (row.msgs_max, row.bytes_total, row.steps_max, row.step_bytes_max, row.reduced_bytes_max) == (
                twin.msgs_max, twin.bytes_total, twin.steps_max, twin.step_bytes_max, twin.reduced_bytes_max)


def test_show_puts_each_persistent_algorithm_beside_its_blocking_twin_with_its_set_up():
    from test_results import make_row

    from ccbench.present.views import rows_tables

    rows = [make_row(algorithm=a, setup_s=s) for a, s in
            (("ring-persistent", 4e-5), ("native-persistent", 1e-4), ("ring", None), ("native", None))]
    (t,) = rows_tables(rows)
    names = [c.header for c in t.columns]
    at = names.index("set-up")
    assert [r[0] for r in t.rows] == ["native", "native-persistent", "ring", "ring-persistent"]
    assert [r[at] for r in t.rows] == [None, 1e-4, None, 4e-5] and "made once per case" in t.caption
    (plain,) = rows_tables([make_row()])
    assert "set-up" not in [c.header for c in plain.columns]


@pytest.mark.mpi
def test_native_native_persistent_and_hand_written_persistent_share_one_sweep_and_loop(tmp_path):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_sweep
    from ccbench.store.run import open_run

    comm = MPI.COMM_WORLD
    root_dir = comm.bcast(str(tmp_path), root=0)
    cfg = load_config(None, {
        "collectives": "allreduce,bcast", "algorithms": "native,native-persistent,ring-persistent,binomial-persistent",
        "sizes": "8,4K", "min_reps": 3, "max_reps": 5, "budget_s": 0.2, "results_dir": root_dir, "loop": "auto"})
    code, path = run_sweep(cfg, thread=("multiple", "test"), argv=["test"], console=None)
    assert code == 0
    if comm.Get_rank() == 0:
        run = open_run(path)
        assert {(r.collective, r.algorithm) for r in run.rows} == {
            ("allreduce", "native"), ("allreduce", "native-persistent"), ("allreduce", "ring-persistent"),
            ("bcast", "native"), ("bcast", "native-persistent"), ("bcast", "binomial-persistent")}
        assert all(r.ok and r.loop == "python" for r in run.rows)
        assert all((r.setup_s is not None) == r.algorithm.endswith("-persistent") for r in run.rows)


def test_launches_pool_the_set_up_as_the_median_of_theirs():
    from test_results import make_row

    from ccbench.store.launches import pool_launches

    rows = [(n, make_row(setup_s=s)) for n, s in ((1, 3e-4), (2, 1e-4), (3, 2e-4))]
    assert pool_launches(rows).setup_s == 2e-4
    assert pool_launches([(1, make_row()), (2, make_row())]).setup_s is None


def test_a_workload_refuses_a_persistent_algorithm_and_all_leaves_them_out():
    from ccbench.core.errors import UsageError
    from ccbench.measure.workload_config import resolve_workload

    with pytest.raises(UsageError, match="'ring-persistent' is persistent .* ccbench run"):
        resolve_workload("ddp", {"algorithms": ["ring", "ring-persistent"]})
    algs = resolve_workload("ddp", {"algorithms": ["all"]}).algorithms
    assert "ring" in algs and not any(a.endswith("-persistent") for a in algs)
