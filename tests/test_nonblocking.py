"""Non-blocking collectives: the library's own (MPI_I<coll>), hand-written schedules progressed by test calls, and
the overlap figures of OSU and IMB-NBC."""

import dataclasses

import numpy as np
import pytest

from ccbench.algorithms import REGISTRY, get
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError
from ccbench.measure.config import Case
from ccbench.measure.timing import TimingSettings
from ccbench.measure.workload_config import resolve_workload
from ccbench.workloads.overlap import RankTimes, imb_overlap_pct, imb_times, osu_overlap_pct, osu_times

TINY = TimingSettings(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=0.5)
HAND_WRITTEN = [("allreduce", "ring"), ("bcast", "binomial"), ("allgather", "ring"), ("barrier", "dissemination"),
                ("reduce", "binomial"), ("reduce_scatter", "pairwise"), ("alltoall", "pairwise"), ("gather", "linear"),
                ("scatter", "linear"), ("allgatherv", "ring"), ("alltoallv", "pairwise"), ("gatherv", "linear"),
                ("scatterv", "linear"), ("reduce_scatterv", "pairwise"), ("reduce_scatterv", "ring")]

# -- the two definitions, on recorded times, against the arithmetic done by hand ----------------------------------


def test_osu_overlap_on_recorded_times_by_hand():
    # recorded by a 2-rank run (allreduce ring-nonblocking, 64 KiB, compute 2x the call, 10 test calls), in us:
    # overall 1435.5, cpu 1365.4 of which 164.4 in the tests, comm alone 471.5.  By hand: cpu - test = 1201.0;
    # overall - 1201.0 = 234.5; 234.5 / 471.5 = 0.497349; 100 - 49.7349 = 50.2651
    assert osu_overlap_pct(1435.5e-6, 1365.4e-6, 164.4e-6, 471.5e-6) == pytest.approx(50.2651, abs=1e-4)
    # the test calls are overhead: not subtracting them would read 100 - 70.1 / 471.5 x 100 = 85.1326
    assert osu_overlap_pct(1435.5e-6, 1365.4e-6, 0.0, 471.5e-6) == pytest.approx(85.1326, abs=1e-4)
    assert osu_overlap_pct(12.0, 10.0, 0.0, 2.0) == 0.0      # nothing hidden
    assert osu_overlap_pct(15.0, 10.0, 0.0, 2.0) == 0.0      # worse than serial: max(0, ...) as OSU
    assert osu_overlap_pct(10.0, 10.0, 0.0, 2.0) == 100.0    # all hidden
    with pytest.raises(ValueError):
        osu_overlap_pct(1.0, 1.0, 0.0, 0.0)


def test_imb_overlap_on_recorded_times_by_hand():
    # the same run, IMB's times (its slowest rank), in us: t_ovrl 1589.0, t_pure 462.1, t_CPU 1519.5.  By hand:
    # 462.1 + 1519.5 - 1589.0 = 392.6; / min(462.1, 1519.5) = 0.849600 -> 84.9600 %
    assert imb_overlap_pct(1589.0e-6, 462.1e-6, 1519.5e-6) == pytest.approx(84.9600, abs=1e-4)
    assert imb_overlap_pct(1519.5e-6, 462.1e-6, 1519.5e-6) == pytest.approx(100.0)  # t_ovrl = max: perfect
    assert imb_overlap_pct(1981.6e-6, 462.1e-6, 1519.5e-6) == pytest.approx(0.0, abs=1e-9)  # t_ovrl = sum: none
    assert imb_overlap_pct(1000e-6, 462.1e-6, 1519.5e-6) == 100.0  # below the maximum: min(1, ...) caps it
    assert imb_overlap_pct(3000e-6, 462.1e-6, 1519.5e-6) == 0.0
    with pytest.raises(ValueError):
        imb_overlap_pct(1.0, 0.0, 1.0)


def test_osu_averages_the_ranks_means_and_imb_takes_the_slowest_rank():
    ranks = [RankTimes(1.0, 4.0, 3.0, 1.0), RankTimes(3.0, 6.0, 5.0, 0.0)]
    assert osu_times(ranks) == RankTimes(2.0, 5.0, 4.0, 0.5)
    assert imb_times(ranks) == ranks[1]
    o = osu_times(ranks)
    assert osu_overlap_pct(o.overall_s, o.cpu_s, o.test_s, o.comm_s) == 25.0  # 100 - (5 - 3.5) / 2 x 100


# -- the registry -------------------------------------------------------------------------------------------------


def test_every_collective_with_an_i_form_has_native_nonblocking_and_all_leaves_them_out():
    have = {c for c in COLLECTIVES if "native-nonblocking" in REGISTRY[c]}
    assert have == set(COLLECTIVES) - {"pingpong"}
    names = [(c, a) for c in REGISTRY for a, x in REGISTRY[c].items() if x.nonblocking]
    assert set(HAND_WRITTEN) <= {(c, a.removesuffix("-nonblocking")) for c, a in names}
    assert not any(REGISTRY[c][a].in_all for c, a in names)
    for coll, name in HAND_WRITTEN:  # the blocking twin's cost, listed
        alg = get(coll, f"{name}-nonblocking")
        assert alg.formula and alg.cost is get(coll, name).cost


# -- hand-written schedules on the simulated communicator ---------------------------------------------------------


def _in_place(coll: str) -> list[bool]:
    return [False] if coll in ("barrier", "bcast") else [False, True]


@pytest.mark.parametrize("coll,name", HAND_WRITTEN)
@pytest.mark.parametrize("P", [1, 2, 3, 4, 5])
def test_a_schedule_made_once_is_right_and_sends_its_blocking_twins_messages(coll, name, P):
    """Bound once, called three times on fresh inputs, out of place and in place: the non-blocking form advanced by
    Test only (no Wait), the persistent form started and waited for; right every time, counting and sending what one
    call of the blocking algorithm does."""
    for in_place in _in_place(coll):
        for form in ("nonblocking", "persistent"):
            _check_made_once(coll, name, P, in_place, form)


def _check_made_once(coll, name, P, in_place, form):
    from ccbench.algorithms.p2p import CountedComm
    from ccbench.algorithms.simcomm import simulate

    alg, spec = get(coll, f"{name}-{form}"), COLLECTIVES[coll]

    def body(comm, made_once=True):
        cc = CountedComm(comm)
        bufs = spec.buffers(0 if coll == "barrier" else 37, P, comm.rank, np.dtype("float32"), "sum", P - 1,
                            in_place, None, "uniform" if in_place and coll == "alltoallv" else "zipf")  # uneven blocks
        if not made_once:
            bufs.fill()
            get(coll, name)(cc, *bufs.args, **bufs.kwargs)
            return [bufs.nwrong()], [cc.counts.as_tuple()]
        if form == "persistent":
            call, free = alg.setup(cc, *bufs.args, **bufs.kwargs)
        else:
            begin, free = alg.nonblocking(cc, *bufs.args, **bufs.kwargs), lambda: None

            def call():
                req = begin()
                while not req.Test():
                    pass
                req.Wait()  # done already: nothing left to count

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
    assert all(w == [0, 0, 0] for w, _ in made), (form, in_place)
    assert all(c == [o[1][0]] * 3 for (_, c), o in zip(made, once, strict=True)), (form, in_place)
    key = [(m.source, m.dest, m.nbytes, m.send_range, m.recv_range) for m in once_messages]
    assert sorted((m.source, m.dest, m.nbytes, m.send_range, m.recv_range) for m in messages) == sorted(key * 3)


def test_a_test_advances_only_the_steps_whose_messages_arrived():
    """Rank 1 of a 3-rank ring waits in Test for rank 0, which has not started: nothing completes and rank 1's first
    step stays posted; once rank 0 starts, tests carry rank 1 through to the end."""
    import threading

    from ccbench.algorithms.p2p import CountedComm
    from ccbench.algorithms.simcomm import simulate

    go = threading.Event()

    def body(comm):
        cc = CountedComm(comm)
        buf = np.full(6, comm.rank + 1.0, dtype=np.float64)
        begin = get("allreduce", "ring-nonblocking").nonblocking(cc, None, buf, "sum")
        if comm.rank == 0:
            go.wait(10)
        req = begin()
        early = None
        if comm.rank == 1:
            early = (req.Test(), req.i)
            go.set()
        while not req.Test():
            pass
        return early, buf.tolist()

    results, _ = simulate(3, body)
    assert results[1][0] == (False, 0)
    assert all(r[1] == [6.0] * 6 for r in results)


# -- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values,match", [
    ({"test_calls": -1}, "test_calls': -1 is outside"),
    ({"compute_factor": 0}, "compute_factor': 0 is outside"),
    ({"async_progress": "always"}, "async_progress: unknown 'always'"),
    ({"algorithms": "rabenseifner"}, "algorithms: unknown 'rabenseifner'"),
])
def test_overlap_refuses_bad_input_in_one_line(values, match):
    with pytest.raises(UsageError, match=match):
        resolve_workload("overlap", {"sizes": "64K", **values})


def test_a_step_workload_sends_a_non_blocking_form_to_the_overlap_workload():
    with pytest.raises(UsageError, match="'ring-nonblocking' is non-blocking: .* overlap -a ring"):
        resolve_workload("ddp", {"algorithms": ["ring", "ring-nonblocking"]})
    assert "ring-nonblocking" not in resolve_workload("straggler", {"algorithms": ["all"]}).algorithms


def test_async_progress_both_needs_its_launches_and_plans_one_of_each(tmp_path):
    """Started as one job (a singleton rank, vouched for as launched), ``--async-progress both`` is refused in one line,
    nothing written: it needs the launches ``--launch N`` starts, one of each."""
    import os
    import subprocess
    import sys

    from ccbench.measure.workload import workload_replication

    r = subprocess.run([sys.executable, "-m", "ccbench", "workload", "overlap", "-s", "64K", "--async-progress", "both",
                        "--results-dir", str(tmp_path / "results")], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CCBENCH_LAUNCHED": "1"})
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ccbench: error: async_progress both measures a launch with MPICH's progress thread and one without: start "
        "it with --launch N"], r.stderr
    assert not (tmp_path / "results").exists()
    cfg = resolve_workload("overlap", {"sizes": "64K", "async_progress": "both", "launches": 2})
    rep = workload_replication(cfg, 2, lambda part: {})
    assert [(k, p.label, p.env) for k, p in rep.plan] == [
        (1, "default", {}), (1, "async-progress", {"MPIR_CVAR_ASYNC_PROGRESS": "1"}),
        (2, "default", {}), (2, "async-progress", {"MPIR_CVAR_ASYNC_PROGRESS": "1"})]


# -- under MPI ----------------------------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("coll", [c for c in COLLECTIVES if "native-nonblocking" in REGISTRY[c]])
def test_native_nonblocking_is_validated_in_a_sweep(coll):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_case

    comm = MPI.COMM_WORLD
    P, spec = comm.Get_size(), COLLECTIVES[coll]
    for in_place in [False] if coll in ("barrier", "bcast") else [False, True]:
        for dtype in ("float32", "bfloat16"):
            count = 0 if coll == "barrier" else 37
            case = Case(coll, "native-nonblocking", spec.nbytes_for(count, 4 if dtype == "float32" else 2, P), count,
                        dtype, "sum" if spec.reduction else "none", in_place, P - 1 if spec.rooted else 0)
            row = run_case(comm, case, TINY)
            assert row.nwrong == 0 and row.loop == "python" and row.msgs_max is None, case.label()


@pytest.mark.mpi
@pytest.mark.parametrize("coll,name", HAND_WRITTEN)
def test_a_hand_written_schedule_is_validated_and_counts_its_blocking_twins_traffic(coll, name):
    from mpi4py import MPI

    from ccbench.measure.sweep import run_case

    comm = MPI.COMM_WORLD
    P, spec = comm.Get_size(), COLLECTIVES[coll]
    for count in (0,) if coll == "barrier" else (0, 37):
        for form in ("nonblocking", "persistent"):
            case = Case(coll, f"{name}-{form}", spec.nbytes_for(count, 4, P), count, "float32",
                        "sum" if spec.reduction else "none", coll not in ("barrier", "bcast"),
                        P - 1 if spec.rooted else 0)
            row = run_case(comm, case, TINY)
            twin = run_case(comm, dataclasses.replace(case, algorithm=name), TINY)
            assert row.nwrong == 0, case.label()
            assert (row.msgs_max, row.bytes_total, row.steps_max, row.step_bytes_max, row.reduced_bytes_max) == (
                twin.msgs_max, twin.bytes_total, twin.steps_max, twin.step_bytes_max, twin.reduced_bytes_max)


@pytest.mark.mpi(min_size=2)
def test_overlap_run_stores_both_definitions_and_osus_figure_is_its_formula_on_the_stored_times(tmp_path):
    from mpi4py import MPI

    from ccbench.measure.workload import run_workload
    from ccbench.store.run import open_run

    comm = MPI.COMM_WORLD
    root = comm.bcast(str(tmp_path), root=0)
    cfg = resolve_workload("overlap", {"sizes": "64K", "collectives": "allreduce,bcast", "algorithms": "all",
                                       "compute_factor": 2.0, "test_calls": 3, "min_reps": 3, "max_reps": 5,
                                       "budget_s": 0.3, "results_dir": root})
    code, path = run_workload(cfg, thread=("multiple", "test"), argv=["test"], quiet=True)
    assert code == 0
    if comm.Get_rank() == 0:
        rows = open_run(path).rows
        assert {r.algorithm for r in rows} == {"allreduce=native", "allreduce=ring", "bcast=native",
                                               "bcast=binomial"}
        for r in rows:
            assert r.nwrong == 0 and r.osu_test_s > 0 and r.osu_cpu_s > r.osu_test_s
            assert r.overlap_pct == osu_overlap_pct(r.osu_overall_s, r.osu_cpu_s, r.osu_test_s, r.osu_comm_s)
            assert r.overlap_imb_pct == imb_overlap_pct(r.imb_ovrl_s, r.imb_pure_s, r.imb_cpu_s)


@pytest.mark.mpi
def test_a_compute_too_short_to_calibrate_is_refused_and_nothing_written(tmp_path):
    from mpi4py import MPI

    from ccbench.measure.workload import run_workload

    comm = MPI.COMM_WORLD
    root = comm.bcast(str(tmp_path / "results"), root=0)
    cfg = resolve_workload("overlap", {"sizes": "8", "compute_s": "1ns", "results_dir": root})
    with pytest.raises(UsageError, match="cannot be calibrated"):
        run_workload(cfg, thread=("multiple", "test"), argv=["test"], quiet=True)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("flags", [["--test-calls", "-1"], ["--compute-factor", "0"], ["-a", "rabenseifner"]])
def test_the_overlap_command_refuses_bad_input_in_one_line_exit_2_nothing_written(tmp_path, flags):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ccbench", "workload", "overlap", "-s", "1K", "--results-dir",
                          str(tmp_path / "results"), *flags], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "results").exists()


def test_a_library_without_the_i_form_is_refused_by_name_in_a_sweep_and_in_the_overlap_workload(monkeypatch):
    """What `_nonblocking_missing` says under an MPI-2 library, given to the planners of both kinds of run."""
    from ccbench.measure.config import load_config, plan
    from ccbench.measure.workload import plan_items

    why = "the MPI library (MPI 2.2) has no MPI_Iallreduce"
    old = REGISTRY["allreduce"]["native-nonblocking"]
    monkeypatch.setitem(REGISTRY["allreduce"], "native-nonblocking",
                        dataclasses.replace(old, supports=lambda P, op: why))
    cfg = load_config(None, {"collectives": "allreduce", "algorithms": "native-nonblocking", "sizes": "8"})
    with pytest.raises(UsageError, match="allreduce/native-nonblocking cannot run here: the MPI library"):
        plan(cfg, 2)
    with pytest.raises(UsageError, match="overlap allreduce/native cannot run here: the MPI library"):
        plan_items(resolve_workload("overlap", {"sizes": "8"}), 2, None)
