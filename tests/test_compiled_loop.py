"""The compiled timing loop (``--loop``): option parsing, the C build and its cache, the fallback, and (MPI tier)
every supported native collective timed and validated by it at 2 ranks and more."""

import dataclasses
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from ccbench.core.errors import UsageError
from ccbench.measure import compiled
from ccbench.measure.config import LOOPS, load_config, resolve
from ccbench.measure.timing import TimingSettings, measure
from ccbench.store.results import Row

MPICC = compiled.find_mpicc()
needs_mpicc = pytest.mark.skipif(MPICC is None, reason="no MPI compiler wrapper (mpicc) here")


# -- options ---------------------------------------------------------------------------------


def test_loop_defaults_to_auto_and_takes_each_choice():
    assert load_config(None, {}).loop == "auto"
    for value in LOOPS:
        assert resolve({"loop": value}).loop == value


def test_a_bad_loop_is_one_usage_error():
    with pytest.raises(UsageError, match="'loop'.*python, compiled, auto"):
        resolve({"loop": "numba"})


def test_the_cli_offers_the_loop_next_to_timing():
    from click.testing import CliRunner

    from ccbench.cli import cli

    r = CliRunner().invoke(cli, ["run", "--help"], env={"COLUMNS": "200"})
    assert "--loop [python|compiled|auto]" in r.output
    bad = CliRunner().invoke(cli, ["run", "--loop", "numba"])
    assert bad.exit_code == 2 and "numba" in bad.output


def test_rows_written_before_the_field_load_as_python():
    row = Row(collective="allreduce", algorithm="native", nbytes=8, count=2, dtype="float32", op="sum",
              in_place=False, root=0, nranks=2, samples=1, min_s=1.0, median_s=1.0, mean_s=1.0, p95_s=1.0,
              p99_s=1.0, max_s=1.0, stddev_s=0.0, ci_low_s=1.0, ci_high_s=1.0, algbw_gbs=0.0, busbw_gbs=0.0,
              msgs_max=None, bytes_max=None, msgs_total=None, bytes_total=None, steps_max=None,
              step_bytes_max=None, reduced_bytes_max=None, nwrong=0, stop_reason="max_reps", sync="barrier",
              samples_s=(1.0,), loop="compiled")
    stored = row.to_dict()
    assert Row.from_dict(stored).loop == "compiled"
    del stored["loop"]
    assert Row.from_dict(stored).loop == "python"


# -- the timing loop drives a sampler as it drives a Python call -----------------------------


class _Sampler:
    """Records what the timing loop asks of a compiled kernel; writes sample i as 1 + i ms."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def now(self) -> float:
        return 0.0

    def take(self, local, start, stop, batch, window, gap_s, offset_s) -> None:
        self.asked.append((start, stop, batch, window))
        local[start:stop] = 1e-3 * (1 + np.arange(start, stop))


class _OneRank:
    """A communicator of one rank: a barrier does nothing, a reduction over ranks leaves the data as it is."""

    def Barrier(self) -> None:
        pass

    def Allreduce(self, sendbuf, recvbuf, op) -> None:
        pass

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def allreduce(self, value, op):
        return value


@pytest.fixture
def stand_in_mpi(monkeypatch):
    mpi = types.ModuleType("mpi4py.MPI")
    mpi.IN_PLACE, mpi.MAX, mpi.MIN, mpi.SUM = object(), "max", "min", "sum"
    pkg = types.ModuleType("mpi4py")
    pkg.MPI = mpi
    monkeypatch.setitem(sys.modules, "mpi4py", pkg)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)


def test_a_sampler_takes_the_warm_up_then_every_sample_up_to_each_check_in_one_call(stand_in_mpi):
    s = _Sampler()
    samples, stop = measure(_OneRank(), s, TimingSettings(warmup=4, batch=3, iterations=7))
    # the warm-up: one sample of 4 back-to-back calls (its time / 4 sizes the first check); then the 7 samples
    assert s.asked == [(0, 1, 4, False), (0, 7, 3, False)]
    assert stop == "iterations" and samples.tolist() == pytest.approx([1e-3 * (1 + i) for i in range(7)])


def test_a_sampler_is_checked_as_the_python_loop_is(stand_in_mpi):
    s = _Sampler()
    samples, stop = measure(_OneRank(), s, TimingSettings(warmup=0, min_reps=4, max_reps=10, target_rse=1e-9,
                                                          budget_s=100.0))
    # checks at 4, then 25% more each time (at least one), up to max_reps -- the Python loop's schedule
    assert [(a, b) for a, b, _, _ in s.asked] == [(0, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 10)]
    assert stop == "max_reps" and len(samples) == 10


# -- building ---------------------------------------------------------------------------------


def test_python_needs_no_build(monkeypatch):
    monkeypatch.setenv("MPICC", "/nonexistent/mpicc")
    assert compiled.choose(None, "python") == (None, {"requested": "python", "used": "python"})


def test_no_compiler_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("MPICC", str(tmp_path / "no-such-mpicc"))
    with pytest.raises(compiled.LoopUnavailableError, match="mpicc.*none found"):
        compiled.build(where=tmp_path / "cache")


def test_a_failing_compiler_says_why_and_leaves_nothing(tmp_path):
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\necho 'fatal: no mpi.h' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(compiled.LoopUnavailableError, match="cannot build the compiled loop with .*: fatal: no mpi.h"):
        compiled.build(str(fake), tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.so"))


@needs_mpicc
def test_build_is_cached_by_source_and_compiler(tmp_path):
    first = compiled.build(MPICC, tmp_path)
    assert first.exists() and first.parent == tmp_path and first.name.startswith("ccbench_loop-")
    made = first.stat().st_mtime_ns
    assert compiled.build(MPICC, tmp_path) == first and first.stat().st_mtime_ns == made  # not rebuilt
    # the library exports the loop's entry points
    names = subprocess.run(["nm", "-D", "--defined-only", str(first)], capture_output=True, text=True).stdout
    for sym in ("ccb_abi", "ccb_now", "ccb_take", "ccb_call", "ccb_library_version"):
        assert sym in names


@needs_mpicc
def test_concurrent_builds_make_one_library(tmp_path):
    code = ("import sys; from ccbench.measure import compiled; "
            "print(compiled.build(sys.argv[1], __import__('pathlib').Path(sys.argv[2])))")
    procs = [subprocess.Popen([sys.executable, "-c", code, MPICC, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = {p.communicate(timeout=300)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(outs) == 1
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".so"] == [os.path.basename(outs.pop())]


def test_the_source_is_package_data():
    import tomllib
    from pathlib import Path

    assert compiled.source().is_file()
    data = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert "measure/csrc/*.c" in data["tool"]["setuptools"]["package-data"]["ccbench"]


def test_the_c_enum_follows_the_codes():
    text = compiled.source().read_text()
    enum = text[text.index("enum { CCB_BARRIER"):].split("}")[0]
    names = [w.strip().removeprefix("CCB_").lower() for w in enum.split("{")[1].split(",")]
    assert names == list(compiled.CODES)


# -- MPI tier: every supported native collective through the compiled loop --------------------

SETTINGS = TimingSettings(warmup=2, min_reps=3, max_reps=6, target_rse=0.5, budget_s=0.5)


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
    os.environ["CCBENCH_CACHE_DIR"] = where
    try:
        yield compiled.load(comm)
    finally:
        if old is None:
            os.environ.pop("CCBENCH_CACHE_DIR")
        else:
            os.environ["CCBENCH_CACHE_DIR"] = old


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("coll", list(compiled.CODES))
def test_every_native_collective_is_timed_and_validated_by_the_compiled_loop(loop, coll):
    from ccbench.core.collectives import COLLECTIVES
    from ccbench.core.dtypes import DTYPES, OPS
    from ccbench.measure.config import Case
    from ccbench.measure.sweep import run_case

    comm = _world()
    P = comm.Get_size()
    spec = COLLECTIVES[coll]
    places = [False] if coll in ("barrier", "pingpong", "bcast") else [False, True]
    ops = list(OPS) if spec.reduction else ["sum"]
    for dtype in ("uint8", "float64"):
        for op in ops:
            for in_place in places:
                for root in sorted({0, P - 1}) if spec.rooted else [0]:
                    for count in (0, 37) if coll != "barrier" else (0,):
                        nbytes = spec.nbytes_for(count, DTYPES[dtype].itemsize, P)
                        case = Case(coll, "native", nbytes, count, dtype, op, in_place, root)
                        row = run_case(comm, case, SETTINGS, loop=loop)
                        assert row.loop == "compiled", case.label()
                        assert row.nwrong == 0, case.label()
                        assert 3 <= row.samples <= 6 and len(row.samples_s) == row.samples
                        assert all(s > 0 for s in row.samples_s) or count == 0
                        assert row.rank_mean_min_s <= row.rank_mean_avg_s <= row.rank_mean_max_s


@pytest.mark.mpi(min_size=2)
def test_a_wrong_compiled_result_is_caught(loop):
    """The validation runs the compiled call: outputs it leaves poisoned are counted wrong."""
    from mpi4py import MPI

    from ccbench.core.collectives import COLLECTIVES
    from ccbench.core.dtypes import DTYPES

    comm = _world()
    P, rank = comm.Get_size(), comm.Get_rank()
    bufs = COLLECTIVES["allreduce"].make_buffers(16, P, rank, DTYPES["int32"], "sum", 0, False, MPI.IN_PLACE)
    kernel = loop.kernel(comm, "allreduce", 16, bufs.args, bufs.kwargs)
    bufs.fill()
    kernel.call()
    assert bufs.nwrong() == 0
    bufs.fill()
    assert bufs.nwrong() == 16  # poisoned, not called
    # a kernel over 8 of the 16 elements leaves the other 8 poisoned
    half = loop.kernel(comm, "allreduce", 8, bufs.args, bufs.kwargs)
    half.call()
    assert bufs.nwrong() == 8


@pytest.mark.mpi(min_size=2)
def test_batched_and_window_samples_come_from_the_compiled_loop(loop):
    from ccbench.measure.config import Case
    from ccbench.measure.sweep import run_case

    comm = _world()
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    for settings in (dataclasses.replace(SETTINGS, batch=4), dataclasses.replace(SETTINGS, sync="window"),
                     dataclasses.replace(SETTINGS, iterations=5)):
        row = run_case(comm, case, settings, loop=loop)
        assert row.loop == "compiled" and row.nwrong == 0
        assert row.timing == ("per-call" if settings.batch == 1 else "batched:4")
        assert row.samples == (5 if settings.iterations else row.samples) and row.median_s > 0


@pytest.mark.mpi(min_size=2)
def test_hand_written_algorithms_stay_in_python(loop):
    from ccbench.measure.config import Case
    from ccbench.measure.sweep import run_case

    row = run_case(_world(), Case("allreduce", "ring", 64, 16, "float32", "sum", False, 0), SETTINGS, loop=loop)
    assert row.loop == "python" and row.nwrong == 0 and row.msgs_max is not None


@pytest.mark.mpi(min_size=2)
def test_auto_falls_back_and_compiled_refuses_without_a_compiler(monkeypatch, tmp_path_factory):
    comm = _world()
    monkeypatch.setenv("MPICC", "/nonexistent/mpicc")
    monkeypatch.setenv("CCBENCH_CACHE_DIR", comm.bcast(str(tmp_path_factory.mktemp("empty")), root=0))
    used, record = compiled.choose(comm, "auto")
    assert used is None and record["used"] == "python" and "mpicc" in record["why"]
    with pytest.raises(UsageError, match="--loop compiled: .*mpicc"):
        compiled.choose(comm, "compiled")


def test_auto_times_a_run_with_hand_written_algorithms_in_python_and_says_why():
    """Native alone: the C loop where it builds (OSU-comparable small-message figures).  Beside hand-written
    algorithms, which only the Python loop can time: Python for every case, so fastest-per-size compares like with
    like; --loop compiled keeps native in C.  Decided before the library is touched (no communicator needed)."""
    from ccbench.present.views import sampling_line

    used, record = compiled.choose(None, "auto", hand_written=True)
    assert used is None and record == {"requested": "auto", "used": "python", "why": compiled.MIXED,
                                        "mixed": True}
    assert sampling_line({}, record) == f"every case timed in Python: {compiled.MIXED}"
    assert resolve({"dtypes": "bfloat16"}).loop == "auto"  # its cases go to the Python loop (no MPI datatype)
    with pytest.raises(UsageError, match="bfloat16 cannot be timed by the compiled loop"):
        resolve({"dtypes": "bfloat16", "loop": "compiled"})


def test_show_says_which_loop_timed_the_native_cases():
    from ccbench.present.views import sampling_line

    assert sampling_line({}, {"requested": "python", "used": "python"}) == ""
    assert sampling_line({}, None) == ""
    used = sampling_line({}, {"requested": "compiled", "used": "compiled", "library": "x.so"})
    assert used == "native cases timed by the compiled loop (C, --loop); hand-written algorithms in Python"
    from types import SimpleNamespace as Row

    rows = [Row(algorithm="native", loop="compiled"), Row(algorithm="native", loop="python"),
            Row(algorithm="ring", loop="python")]
    assert sampling_line({}, {"requested": "auto", "used": "compiled"}, rows).startswith(
        "1 of 2 native cases timed by the compiled loop (C, --loop); the others in Python")
    assert sampling_line({}, {"requested": "auto", "used": "compiled"}, rows[::2]) == used  # every native case in C
    fell = sampling_line({"timing": "batched:5"}, {"requested": "auto", "used": "python", "why": "no mpicc"})
    assert fell.startswith("--loop auto: timed in Python, the compiled loop was not available (no mpicc); ")
    assert fell.endswith("timing batched:5: each sample is 5 back-to-back calls between synchronisations, "
                         "their time / 5 (IMB, nccl-tests style)")


def test_a_count_the_c_loop_cannot_hold_is_left_to_the_python_loop():
    """The C loop's count is an int: 2 GiB of uint8 became -2147483648 elements and 4 GiB became 0 (issue 26, item 8).
    Such a case gets no kernel -- the Python loop times it with mpi4py's large-count calls -- decided at the edge."""
    assert compiled.fits_c_int(2**31 - 1) and compiled.fits_c_int(0)
    assert not compiled.fits_c_int(2**31) and not compiled.fits_c_int(2**32) and not compiled.fits_c_int(-1)
    loop = object.__new__(compiled.CompiledLoop)  # no library needed: the count is refused before it is touched
    assert loop.kernel(None, "bcast", 2**31, (np.zeros(1, dtype=np.uint8),), {}) is None
    assert loop.kernel(None, "bcast", 2**32, (np.zeros(1, dtype=np.uint8),), {}) is None
