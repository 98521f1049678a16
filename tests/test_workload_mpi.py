"""Workloads under MPI: every workload runs with zero wrong elements; overlap and straggler known answers.

Run as ``mpiexec -n N python -m mpi4py -m pytest --only-mpi tests/test_workload_mpi.py``.
Small custom models and few repetitions: the MPI tier must stay fast on oversubscribed cores.
"""

import threading
import time

import numpy as np
import pytest

from ccbench.measure.timing import TimingSettings
from ccbench.measure.workload_config import resolve_workload

pytestmark = pytest.mark.mpi

FAST = {"warmup": 1, "min_reps": 3, "max_reps": 5, "budget_s": 0.5}


def _shared_dir(tmp_path_factory):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    path = str(tmp_path_factory.mktemp("wl")) if comm.Get_rank() == 0 else None
    return comm.bcast(path, root=0)


@pytest.fixture
def results(tmp_path_factory):
    return _shared_dir(tmp_path_factory)


@pytest.fixture
def model_file(tmp_path_factory):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    path = None
    if comm.Get_rank() == 0:
        path = tmp_path_factory.mktemp("m") / "model.txt"
        path.write_text("1000 a\n30 a\n7000 b\n5 b\n20000 c\n64 c\n3 d\n")
        path = str(path)
    return comm.bcast(path, root=0)


def _run(kind, results, **values):
    from mpi4py import MPI

    from ccbench.measure.workload import run_workload
    from ccbench.store.run import open_run

    cfg = resolve_workload(kind, dict(FAST, results_dir=results, **values))
    code, path = run_workload(cfg, thread=("multiple", "test"), argv=["test"], quiet=True)
    comm = MPI.COMM_WORLD
    rows = None
    if comm.Get_rank() == 0:
        opened = open_run(path, kinds=("workload",))
        meta, rows = opened.meta, opened.rows
        assert meta["kind"] == "workload" and meta["workload"] == kind and meta["status"] == "complete"
        assert meta["nranks"] == comm.Get_size() and meta["mpi_library"]
    return code, comm.bcast(rows, root=0)


@pytest.mark.mpi(min_size=2)
def test_ddp_every_mode_zero_wrong(results, model_file):
    code, rows = _run("ddp", results, model=model_file, algorithms="native,ring",
                      bucket_mb=0.05, first_bucket_mb=0.005)
    assert code == 0
    steps = [r for r in rows if r.part == -1]
    assert {r.variant.split()[0] for r in steps} == {"bucketed", "per_tensor"}
    assert all(r.nwrong == 0 for r in rows)
    per_tensor = [r for r in rows if r.variant == "per_tensor" and r.part >= 0]
    assert len(per_tensor) == 2 * 7  # one row per tensor per algorithm
    P = steps[0].nranks
    ring = [r for r in steps if r.algorithm == "allreduce=ring"]
    assert all(r.bytes_sent_total == 2 * (P - 1) * r.payload_elems * 4 for r in ring)
    assert all(r.bytes_sent_total is None for r in steps if r.algorithm == "allreduce=native")


@pytest.mark.mpi(min_size=2)
def test_zero_every_variant_zero_wrong(results, model_file):
    code, rows = _run("zero", results, model=model_file, rs_algorithms="native,pairwise",
                      ag_algorithms="ring", algorithms="native")
    assert code == 0
    steps = [r for r in rows if r.part == -1]
    assert {r.variant for r in steps} == {"zero2", "zero3", "ddp_flat", "ddp_layer"}
    assert all(r.nwrong == 0 for r in rows) and all(r.samples >= 1 for r in rows)


@pytest.mark.mpi(min_size=2)
def test_a_bfloat16_step_holds_each_sum_to_its_algorithms_own_additions(results, model_file, monkeypatch):
    """bfloat16 ddp and zero: every row correct (a sum of 3 or more ranks rounds), each hand-written sum held to its
    algorithm's chain of additions, the library's own to P - 1; a data-moving call (allgather) exactly."""
    pytest.importorskip("ml_dtypes")
    from mpi4py import MPI

    from ccbench.algorithms import REGISTRY
    from ccbench.core.collectives import CaseBuffers

    held, check = [], CaseBuffers.wrong_in

    def spy(self, out, exp):
        held.append((self.unit_roundoff > 0, self.steps))
        return check(self, out, exp)

    monkeypatch.setattr(CaseBuffers, "wrong_in", spy)
    P = MPI.COMM_WORLD.Get_size()
    code, rows = _run("ddp", results, model=model_file, algorithms="native,recursive_doubling", modes="per_tensor",
                      dtype="bfloat16")
    assert code == 0 and all(r.nwrong == 0 for r in rows)
    rd = REGISTRY["allreduce"]["recursive_doubling"].additions_at(P)
    assert sorted(set(held)) == sorted({(True, P - 1), (True, rd)})  # native's calls, then recursive doubling's
    held.clear()
    code, rows = _run("zero", results, model=model_file, rs_algorithms="pairwise", ag_algorithms="ring",
                      algorithms="native", dtype="bfloat16")
    assert code == 0 and all(r.nwrong == 0 for r in rows)
    assert set(held) == {(True, P - 1), (False, 0)}  # pairwise and native sums: P - 1; allgather moves bytes


@pytest.mark.mpi(min_size=2)
def test_moe_every_degree_zero_wrong(results):
    from mpi4py import MPI

    P = MPI.COMM_WORLD.Get_size()
    code, rows = _run("moe", results, tokens=64, hidden=32, algorithms="native,pairwise,bruck")
    assert code == 0
    steps = [r for r in rows if r.part == -1]
    assert {r.group_ranks for r in steps} == {d for d in range(2, P + 1) if P % d == 0}
    assert {r.algorithm for r in steps if r.variant.endswith(" routed")} == {"alltoallv=native", "alltoallv=pairwise"}
    assert all(r.nwrong == 0 for r in rows)


@pytest.mark.mpi(min_size=2)
def test_overlap_and_straggler_runs_zero_wrong(results):
    code, rows = _run("overlap", results, sizes="4K,64K", collectives="allreduce,alltoall", compute_s="200us")
    assert code == 0 and len(rows) == 4
    assert all(r.nwrong == 0 and 0 <= r.overlap_pct <= 100 and r.compute_s > 0 for r in rows)
    code, rows = _run("straggler", results, collectives="allreduce", algorithms="native,ring",
                      sizes="1K", delay_s="2ms")
    assert code == 0 and len(rows) == 2
    assert all(r.nwrong == 0 and r.delay_s == 0.002 and r.baseline_s > 0 for r in rows)


# -- constructed cases with known answers -------------------------------------------


class _BackgroundRequest:
    """A request whose 'communication' runs in a thread: it progresses during compute."""

    def __init__(self, seconds):
        self.t = threading.Thread(target=time.sleep, args=(seconds,))
        self.t.start()

    def Test(self):
        return not self.t.is_alive()

    def Wait(self):
        self.t.join()


class _LazyRequest:
    """A request that does all its 'communication' inside Wait: nothing can overlap."""

    def __init__(self, seconds):
        self.seconds = seconds

    def Test(self):
        return False

    def Wait(self):
        time.sleep(self.seconds)


class _SleepKernel:
    """Compute of a known duration (sleep: no CPU taken from the other ranks)."""

    iter_s = 1e-3

    def iterations(self, seconds):
        return max(1, round(seconds / self.iter_s))

    def run(self, iters, poll=None, polls=0):
        time.sleep(iters * self.iter_s)
        return 0.0


@pytest.mark.mpi(min_size=1)
def test_overlap_known_answers():
    from mpi4py import MPI

    from ccbench.measure.workload_engine import measure_overlap
    from ccbench.workloads.overlap import imb_overlap_pct, osu_overlap_pct

    comm = MPI.COMM_WORLD
    s = TimingSettings(warmup=1, min_reps=3, max_reps=5, budget_s=1.0)
    # compute (80 ms) far longer than the communication (20 ms), which progresses alone; the
    # times are long beside the few ms a barrier can take on oversubscribed cores
    _, _, _, t = measure_overlap(comm, lambda: _BackgroundRequest(20e-3), _SleepKernel(), 80e-3, s)
    assert osu_overlap_pct(t.overall_s, t.cpu_s, t.test_s, t.comm_s) > 60
    assert imb_overlap_pct(t.overall_s, t.comm_s, t.cpu_s) > 60
    # communication that only happens in Wait: no overlap at all
    _, _, _, t = measure_overlap(comm, lambda: _LazyRequest(20e-3), _SleepKernel(), 20e-3, s)
    assert osu_overlap_pct(t.overall_s, t.cpu_s, t.test_s, t.comm_s) < 40
    assert imb_overlap_pct(t.overall_s, t.comm_s, t.cpu_s) < 40


@pytest.mark.mpi(min_size=2)
def test_straggler_known_answers():
    from mpi4py import MPI

    from ccbench.measure.timing import measure
    from ccbench.measure.workload_engine import DelayedSync
    from ccbench.workloads.schedule import straggler_slowdown

    comm = MPI.COMM_WORLD
    late = comm.Get_rank() == comm.Get_size() - 1
    s = TimingSettings(warmup=1, min_reps=3, max_reps=5, budget_s=1.0)
    delay = 20e-3

    def slowdown(call):
        base, _ = measure(comm, call, s)
        delayed, _ = measure(DelayedSync(comm, delay, late), call, s)
        return straggler_slowdown(float(np.median(delayed)), float(np.median(base)), delay)

    # a call that waits for nobody passes none of the delay on
    assert slowdown(lambda: None) < 0.3
    # a barrier makes everyone wait for the late rank: the whole delay
    assert 0.6 < slowdown(comm.Barrier) < 1.6


# -- the session layer: SIGTERM between items, --resume ------------------------------


def _attempt(kind, results, resume=None, **values):
    """Run (or resume) a workload; (exit code, run.json, rows) on every rank, whatever the status."""
    from mpi4py import MPI

    from ccbench.measure.workload import run_workload
    from ccbench.store.run import open_run

    cfg = resolve_workload(kind, dict(FAST, results_dir=results, **values))
    code, path = run_workload(cfg, thread=("multiple", "test"), argv=["test"], quiet=True, resume=resume)
    comm = MPI.COMM_WORLD
    got = None
    if comm.Get_rank() == 0:
        opened = open_run(path, kinds=("workload",))
        meta, rows = opened.meta, opened.rows
        got = (path, meta, rows)
    path, meta, rows = comm.bcast(got, root=0)
    return code, path, meta, rows


def _on_rank0(fn):
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        fn()
    comm.Barrier()


def _items(rows):
    return [(r.variant, r.algorithm, r.part, r.label, r.collective, r.nbytes) for r in rows]


@pytest.mark.mpi(min_size=1)
def test_sigterm_stops_a_workload_between_items_and_resume_completes_it(results, model_file, monkeypatch):
    import json
    import signal
    from pathlib import Path

    from mpi4py import MPI

    from ccbench.core.errors import UsageError

    P = MPI.COMM_WORLD.Get_size()
    values = dict(model=model_file, algorithms="native,ring", bucket_mb=0.05, first_bucket_mb=0.005)
    code, _, _, whole = _attempt("ddp", results, **values)
    assert code == 0

    # the last rank is sent SIGTERM before the second item: the run stops after it, on every rank
    monkeypatch.setenv("CCBENCH_FAULT", f"term:{P - 1}:ddp:2")
    code, run, meta, rows = _attempt("ddp", results, **values)
    assert code == 128 + signal.SIGTERM
    assert meta["status"] == "interrupted" and meta["signal"] == "SIGTERM" and meta["finished_cases"] == len(rows)
    steps = [r for r in rows if r.part == -1]
    assert len(steps) == 2 and _items(rows) == _items(whole)[:len(rows)]
    monkeypatch.delenv("CCBENCH_FAULT")

    # a crash between the rows of the second item, tearing the last line: resume measures it again
    jsonl, meta_path = Path(run) / "cases.jsonl", Path(run) / "run.json"
    first = 1 + steps[0].ncalls
    _on_rank0(lambda: jsonl.write_text("".join(jsonl.read_text().splitlines(keepends=True)[:first + 1])
                                       + '{"workload": "dd'))
    torn = jsonl.read_text()
    # another configuration, rank count or MPI library: refused, nothing touched
    with pytest.raises(UsageError, match="it was made with another configuration"):
        _attempt("ddp", results, resume=run, **dict(values, budget_s=0.4))
    for key, value, why in (("nranks", P + 1, f"its rank count was {P + 1}, now {P}"),
                            ("mpi_library", "Other MPI 1.0", "its MPI library was 'Other MPI 1.0'")):
        saved = meta_path.read_text()
        _on_rank0(lambda k=key, v=value, s=saved: meta_path.write_text(json.dumps({**json.loads(s), k: v})))
        with pytest.raises(UsageError, match=why):
            _attempt("ddp", results, resume=run, **values)
        _on_rank0(lambda s=saved: meta_path.write_text(s))
    assert jsonl.read_text() == torn

    code, path, meta, rows = _attempt("ddp", results, resume=run, **values)
    assert code == 0 and path == run
    assert meta["status"] == "complete" and "signal" not in meta and meta["finished_cases"] == len(rows)
    assert meta["resumed"] == [dict(meta["resumed"][0], finished_before=first, status_before="interrupted",
                                    signal_before="SIGTERM", failure_before=None)]
    assert len(set(_items(rows))) == len(rows) and sorted(_items(rows)) == sorted(_items(whole))
    assert all(r.ok for r in rows) and meta["failed_cases"] == 0
    assert (Path(run) / "cases.csv").read_text().count("\n") == len(rows) + 1


@pytest.mark.mpi(min_size=2)
def test_an_interrupted_straggler_run_resumes_with_its_parts_in_order(results, monkeypatch):
    values = dict(collectives="allreduce", algorithms="native,ring", sizes="1K,4K", delay_s="1ms")
    monkeypatch.setenv("CCBENCH_FAULT", "term:0:straggler:1")
    code, run, meta, rows = _attempt("straggler", results, **values)
    assert code == 128 + 15 and meta["status"] == "interrupted" and len(rows) == 1
    monkeypatch.delenv("CCBENCH_FAULT")
    code, _, meta, rows = _attempt("straggler", results, resume=run, **values)
    assert code == 0 and meta["status"] == "complete"
    assert [(r.algorithm, r.label, r.part) for r in rows] == [
        ("allreduce=native", "1 KiB", 0), ("allreduce=native", "4 KiB", 1),
        ("allreduce=ring", "1 KiB", 2), ("allreduce=ring", "4 KiB", 3)]
