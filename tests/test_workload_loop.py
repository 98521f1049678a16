"""``ccbench workload ... --loop python|compiled|auto``: the option and its key, which items the compiled loop
times, the run's record of it, and (MPI tier) the compiled step: its calls back to back in C, correct outputs, the
per-call times the Python step timer keeps, the straggler's delay.

The end-to-end runs start their own 2-rank job (``--launch 2``: ``mpiexec -n 2 python -m mpi4py ...``, under a
timeout) and skip where no MPI compiler wrapper is found, as the compiled-loop tests do.  No test asserts a speed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ccbench.algorithms import get
from ccbench.commands.workload import launch_options, overrides
from ccbench.core.errors import UsageError
from ccbench.measure import compiled
from ccbench.measure.config import LOOPS
from ccbench.measure.workload import loop_items, plan_items
from ccbench.measure.workload_config import load_workload_config, resolve_workload, resume_workload, stored_workload
from ccbench.store.run import open_run
from ccbench.store.workload_rows import WORKLOADS
from ccbench.workloads.models import load_model

ROOT = Path(__file__).resolve().parent.parent
MLP = ROOT / "tests" / "data" / "mlp-sizes.txt"
MPICC = compiled.find_mpicc()
needs_mpicc = pytest.mark.skipif(MPICC is None, reason="no MPI compiler wrapper (mpicc) here")


# -- the option and its key ------------------------------------------------------------------


@pytest.mark.parametrize("kind", WORKLOADS)
def test_every_workload_takes_each_loop_and_defaults_to_python(kind):
    assert resolve_workload(kind, {}).loop == "python"
    for value in LOOPS:
        cfg = resolve_workload(kind, {"loop": value})
        assert cfg.loop == value and cfg.to_dict()["loop"] == value


def test_a_bad_loop_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError, match="config key 'loop': 'numba'; choose from python, compiled, auto"):
        resolve_workload("ddp", {"loop": "numba"})
    toml = tmp_path / "w.toml"
    toml.write_text('loop = "compiled"\n')
    assert load_workload_config("moe", toml).loop == "compiled"
    assert load_workload_config("moe", toml, {"loop": "auto"}).loop == "auto"  # a flag overrides the file


def _workload(cwd, *args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "ccbench", "workload", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_the_cli_refuses_a_bad_loop_in_one_line(tmp_path):
    r = _workload(tmp_path, "ddp", "--loop", "numba")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ccbench: error: Invalid value for '--loop': 'numba' is not one of 'python', 'compiled', 'auto'."]
    toml = tmp_path / "w.toml"
    toml.write_text('loop = "numba"\n')
    r = _workload(tmp_path, "straggler", "-c", str(toml))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "ccbench: error: config key 'loop': 'numba'; choose from python, compiled, auto"]
    assert not (tmp_path / "results").exists()
    r = _workload(tmp_path, "overlap", "--help")
    assert r.returncode == 0 and "--loop [python|compiled|auto]" in r.stdout


def test_resume_compares_the_loop_and_old_runs_read_as_python():
    cfg = resolve_workload("ddp", {"model": str(MLP), "loop": "compiled"})
    meta = {"workload": "ddp", "config": json.loads(json.dumps(cfg.to_dict()))}
    assert resume_workload("ddp", meta, "RUN") == cfg
    assert resume_workload("ddp", meta, "RUN", None, {"loop": "compiled"}) == cfg
    with pytest.raises(UsageError, match="its configuration differs in loop; resume with the same"):
        resume_workload("ddp", meta, "RUN", None, {"loop": "python"})
    # a run stored before the key existed was timed in Python
    old = {k: v for k, v in meta["config"].items() if k != "loop"}
    assert stored_workload("ddp", old).loop == "python"


@pytest.mark.parametrize("kind, values", [
    ("ddp", {"model": str(MLP), "loop": "compiled", "launches": 2}), ("moe", {"loop": "auto"}),
    ("straggler", {"loop": "compiled", "algorithms": "native,ring"}), ("overlap", {"sizes": "4K", "loop": "auto"}),
])
def test_each_launch_is_given_the_loop(kind, values):
    """--launches K: every launch's command line restates the loop (the run's configuration)."""
    cfg = resolve_workload(kind, values)
    options = launch_options(cfg)
    assert options["loop"] == values["loop"]
    assert resolve_workload(kind, overrides(options)) == cfg


# -- which items the compiled loop can time ----------------------------------------------------


def test_native_blocking_items_can_be_compiled_the_others_say_why():
    model = load_model(str(MLP))
    items, _, _ = plan_items(resolve_workload("ddp", {"model": str(MLP), "algorithms": "native,ring"}), 2, model)
    assert [(it.label.split()[-1], it.python_why) for it in items] == [
        ("allreduce=native", None), ("allreduce=ring", "allreduce=ring is hand-written (Python)")] * 2
    zero = resolve_workload("zero", {"model": str(MLP), "variants": "zero2,zero3", "rs_algorithms": "native,pairwise"})
    items, _, _ = plan_items(zero, 2, model)
    assert [it.python_why for it in items] == [None, "reduce_scatter=pairwise is hand-written (Python)"] * 2
    items, _, _ = plan_items(resolve_workload("moe", {"algorithms": "native,bruck", "ep": "2"}), 4, None)
    assert [it.python_why for it in items] == [None, "alltoall=bruck is hand-written (Python)",
                                               "the compiled loop has no alltoallv"]  # routed: alltoallv, no bruck
    items, _, _ = plan_items(resolve_workload("overlap", {"sizes": "4K,64K"}), 2, None)
    assert all(it.python_why.startswith("non-blocking calls overlapped with compute") for it in items)
    items, _, _ = plan_items(resolve_workload("straggler", {"algorithms": "native,ring", "sizes": "1K"}), 2, None)
    assert [it.python_why for it in items] == [None, "allreduce=ring is hand-written (Python)"]


def test_a_count_the_c_loop_cannot_hold_keeps_the_step_in_python(tmp_path):
    """A native step whose second call has 2**31 elements (more than the C loop's int holds) stays in Python, said
    by that call; without it the step can be compiled (planned only: nothing is allocated)."""
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text(f"8 a\n{2**31} b\n")
    small.write_text("8 a\n")
    for model, why in ((big, "t1: 2147483648 elements, more than the compiled loop's int holds"), (small, None)):
        cfg = resolve_workload("ddp", {"model": str(model), "modes": "per_tensor"})
        (item,), _, _ = plan_items(cfg, 2, load_model(str(model)))
        assert item.label == "ddp per_tensor allreduce=native" and item.python_why == why


def test_the_record_names_the_loop_of_each_item():
    items, _, _ = plan_items(resolve_workload("straggler", {"algorithms": "native,ring", "sizes": "1K"}), 2, None)
    assert loop_items(items, True) == [
        {"what": "straggler allreduce/native 1 KiB", "loop": "compiled"},
        {"what": "straggler allreduce/ring 1 KiB", "loop": "python", "why": "allreduce=ring is hand-written (Python)"}]
    assert loop_items(items, False) == [{"what": "straggler allreduce/native 1 KiB", "loop": "python"},
                                         {"what": "straggler allreduce/ring 1 KiB", "loop": "python"}]


# -- end to end: a 2-rank job of its own ---------------------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A compiled-loop cache of this module's own (built once by the first run)."""
    return str(tmp_path_factory.mktemp("loop-cache"))


def _ddp_args(tmp_path):
    model = tmp_path / "m.txt"
    model.write_text("300 a\n20 a\n5000 b\n")
    return ["ddp", "-m", str(model), "-a", "native,ring", "--bucket-mb", "0.01", "--first-bucket-mb", "0",
            "--warmup", "1", "--min-reps", "2", "--max-reps", "6", "--budget", "0.2", "--results-dir", "res"]


def test_compiled_without_a_compiler_is_one_error_before_the_run_directory(tmp_path):
    env = {"MPICC": str(tmp_path / "no-such-mpicc"), "CCBENCH_CACHE_DIR": str(tmp_path / "empty")}
    r = _workload(tmp_path, *_ddp_args(tmp_path), "--loop", "compiled", "--launch", "2", env=env)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench: error:")]
    assert r.returncode == 2 and len(errors) == 1 and errors[0].startswith("ccbench: error: --loop compiled: ")
    assert "mpicc" in errors[0]
    assert not (tmp_path / "res").exists() or not list((tmp_path / "res").iterdir())


@needs_mpicc
def test_a_ddp_run_timed_by_the_compiled_loop(tmp_path, cache):
    r = _workload(tmp_path, *_ddp_args(tmp_path), "--loop", "compiled", "--launch", "2", "--no-show",
                  env={"CCBENCH_CACHE_DIR": cache})
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    opened = open_run(run, kinds=("workload",))
    meta, rows = opened.meta, opened.rows
    assert meta["status"] == "complete" and meta["config"]["loop"] == "compiled"
    loop = meta["loop"]
    assert loop["requested"] == "compiled" and loop["used"] == "compiled" and loop["library"].startswith(cache)
    assert [(i["what"], i["loop"], i.get("why")) for i in loop["items"]] == [
        ("ddp bucketed 0.01 MiB allreduce=native", "compiled", None),
        ("ddp bucketed 0.01 MiB allreduce=ring", "python", "allreduce=ring is hand-written (Python)"),
        ("ddp per_tensor allreduce=native", "compiled", None),
        ("ddp per_tensor allreduce=ring", "python", "allreduce=ring is hand-written (Python)")]
    # every step and every call stored, validated (the Python pass), with its samples
    steps = [x for x in rows if x.part == -1]
    assert [(x.variant, x.algorithm) for x in steps] == [(v, a) for v in ("bucketed 0.01 MiB", "per_tensor")
                                                         for a in ("allreduce=native", "allreduce=ring")]
    assert len(rows) == sum(1 + x.ncalls for x in steps) and all(x.ok and x.nwrong == 0 for x in rows)
    assert all(2 <= x.samples <= 6 and len(x.samples_s) == x.samples and x.median_s > 0 for x in rows)
    # one note on stderr: the hand-written items stayed in Python
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("ccbench: note: --loop compiled:")]
    assert len(notes) == 1 and "2 of 4 items timed in Python" in notes[0]


@needs_mpicc
def test_each_launch_of_a_replicated_run_uses_the_compiled_loop(tmp_path, cache):
    r = _workload(tmp_path, *_ddp_args(tmp_path), "-a", "native", "--mode", "bucketed", "--loop", "compiled",
                  "--launch", "2", "--launches", "2", "--no-show", env={"CCBENCH_CACHE_DIR": cache})
    assert r.returncode == 0, r.stderr
    (run,) = (tmp_path / "res").iterdir()
    opened = open_run(run, kinds=("workload",))
    assert opened.meta["config"]["loop"] == "compiled" and opened.meta["loop"]["used"] == "compiled"
    for p in opened.meta["parts"]:
        part = open_run(run / p["dir"], kinds=("workload",)).meta
        assert part["config"]["loop"] == "compiled"
        assert [i["loop"] for i in part["loop"]["items"]] == ["compiled"]
    assert opened.rows and all(x.ok and x.launches == (1, 2) for x in opened.rows)


# -- MPI tier: the compiled step itself --------------------------------------------------------

FAST = {"warmup": 1, "min_reps": 3, "max_reps": 5, "budget_s": 0.5}


def _world():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    if MPICC is None:
        pytest.skip("no MPI compiler wrapper (mpicc) here")
    comm = _world()
    where = comm.bcast(str(tmp_path_factory.mktemp("cache")) if comm.Get_rank() == 0 else None, root=0)
    old = os.environ.get("CCBENCH_CACHE_DIR")
    os.environ["CCBENCH_CACHE_DIR"] = where  # run_workload's own build finds this one
    try:
        yield compiled.load(comm)
    finally:
        if old is None:
            os.environ.pop("CCBENCH_CACHE_DIR")
        else:
            os.environ["CCBENCH_CACHE_DIR"] = old


def _schedules(P: int):
    from ccbench.workloads.schedule import ddp_schedule, moe_schedule, zero_schedule

    model = load_model(str(MLP))
    native = {c: get(c, "native") for c in ("allreduce", "reduce_scatter", "allgather", "alltoall")}
    out = [ddp_schedule(model, 4, "bucketed", 0.2, 0.05), ddp_schedule(model, 4, "per_tensor"),
           zero_schedule(model, P, "zero2"), zero_schedule(model, P, "zero3")]
    ep = next(d for d in range(2, P + 1) if P % d == 0)
    out.append(moe_schedule(16, 8, 2, ep, 2))  # on expert-parallel groups of `ep` ranks
    return [(s, native) for s in out]


@pytest.mark.mpi(min_size=2)
def test_a_compiled_step_computes_every_call_and_keeps_its_per_call_times(loop):
    from ccbench.measure.timing import TimingSettings, measure
    from ccbench.measure.workload import step_sequence
    from ccbench.measure.workload_engine import StepBuffers

    comm = _world()
    P, rank = comm.Get_size(), comm.Get_rank()
    settings = TimingSettings(warmup=2, min_reps=3, max_reps=6, target_rse=0.5, budget_s=0.5)
    rows = settings.warmup + settings.max_reps + 1
    for schedule, algs in _schedules(P):
        G = schedule.group_ranks or P
        sub = comm if G == P else comm.Split(rank // G, rank)
        bufs = StepBuffers(schedule, G, sub.Get_rank(), "float32")
        seq = step_sequence(loop, comm, sub, schedule, algs, bufs, rows)
        assert seq is not None and seq.times.shape == (rows, len(schedule.calls))
        bufs.fill()
        assert bufs.nwrong() > 0  # poisoned outputs
        samples, _ = measure(comm, seq, settings)
        n = len(samples)
        assert 3 <= n <= 6 and all(s > 0 for s in samples)
        # the C loop ran every call of every step on the right buffers: the outputs are exact
        assert bufs.nwrong() == 0, schedule.variant
        # one row of per-call times per step run, warm-up steps first, as the Python step timer keeps them
        assert seq.runs == settings.warmup + n
        assert (seq.times[:seq.runs] >= 0).all() and (seq.times[:seq.runs].sum(axis=1) > 0).all()
        assert not seq.times[seq.runs:].any()
        # and a step's time (its maximum over ranks) holds this rank's times of its calls
        assert (seq.times[settings.warmup:seq.runs].sum(axis=1) <= samples).all()
        if sub is not comm:
            sub.Free()


@pytest.mark.mpi(min_size=2)
def test_the_compiled_straggler_sleeps_between_the_barrier_and_the_timer(loop):
    """The late rank's delay comes after the barrier, before its timer: the others wait for it inside the call."""
    from mpi4py import MPI

    from ccbench.core.collectives import COLLECTIVES
    from ccbench.measure.timing import TimingSettings, measure

    comm = _world()
    P, rank = comm.Get_size(), comm.Get_rank()
    late = rank == P - 1
    cb = COLLECTIVES["allreduce"].make_buffers(4, P, rank, np.dtype("float32"), "sum", 0, False, MPI.IN_PLACE)
    kernel = loop.kernel(comm, "allreduce", 4, cb.args, cb.kwargs)
    s = TimingSettings(warmup=1, min_reps=3, max_reps=5, budget_s=1.0)
    delay = 20e-3
    delayed, _ = measure(comm, loop.sequence(comm, [kernel], delay_s=delay if late else 0.0), s)
    # every sample waited for the late rank: the others' calls cannot end before it joins them
    assert float(np.min(delayed)) >= 0.5 * delay
    cb.fill()
    comm.Barrier()
    kernel.call()
    assert comm.allreduce(cb.nwrong(), MPI.SUM) == 0


def _run(kind, results, **values):
    from ccbench.measure.workload import run_workload

    cfg = resolve_workload(kind, dict(FAST, results_dir=results, **values))
    code, path = run_workload(cfg, thread=("multiple", "test"), argv=["test"], quiet=True)
    comm = _world()
    got = None
    if comm.Get_rank() == 0:
        opened = open_run(path, kinds=("workload",))
        got = (opened.meta, opened.rows)
    meta, rows = comm.bcast(got, root=0)
    return code, meta, rows


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("kind, values, want", [
    ("zero", {"model": str(MLP), "variants": "zero2,zero3", "rs_algorithms": "native,pairwise"},
     ["compiled", "python"] * 2),
    # the routed alltoallv: the C loop has no v-collective, so only the padded alltoall's native is compiled
    ("moe", {"tokens": 16, "hidden": 8, "algorithms": "native,pairwise"}, None),
    ("straggler", {"algorithms": "native,ring", "sizes": "1K", "delay_s": "2ms"}, ["compiled", "python"]),
    ("overlap", {"sizes": "4K", "compute_s": "200us"}, ["python"]),
])
def test_every_workload_runs_with_the_compiled_loop_and_records_it(loop, tmp_path_factory, kind, values, want):
    comm = _world()
    results = comm.bcast(str(tmp_path_factory.mktemp("wl")) if comm.Get_rank() == 0 else None, root=0)
    code, meta, rows = _run(kind, results, loop="compiled", **values)
    assert code == 0 and rows and all(r.nwrong == 0 for r in rows)
    record = meta["loop"]
    assert record["requested"] == "compiled" and record["used"] == "compiled"
    got = [i["loop"] for i in record["items"]]
    if want is None:  # moe: per expert-parallel size, padded native, padded pairwise, routed native, routed pairwise
        want = ["compiled", "python", "python", "python"] * (len(got) // 4)
        assert [i["why"] for i in record["items"][2::4]] == ["the compiled loop has no alltoallv"] * (len(got) // 4)
    assert got == want
    assert all(("why" in i) == (i["loop"] == "python") for i in record["items"])
