"""A whole sweep (`run_sweep`) run in-process on a one-rank stand-in for MPI and a virtual clock (no mpiexec).

The stand-in is MPI.COMM_WORLD of a one-rank job, in the test's own (main) thread, so the
session's signal handlers work as in a real run.  Time is virtual, in ticks of 2**-20 s: every
clock reading moves the clock one tick, and the timed call of a case costs as many ticks as the
case has bytes (an Allreduce that is not in place, a Bcast); nothing else costs time.  A sample
of a native allreduce or bcast of B bytes is therefore exactly B + 1 ticks (the call and the
closing reading).  What the run measures around its cases (the local reduction rates, the
harness floor, the memory bandwidth, the timer resolution, the provenance) is replaced by
recorders, so every expected value below is derived from the configuration and this model.
"""

import json
import sys
import types

import numpy as np
import pytest

from ccbench.algorithms import native as native_module
from ccbench.algorithms.native_variants import NotApplicableError
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError
from ccbench.measure import compiled, driver, provenance, sweep, timing
from ccbench.measure.config import Case, plan, resolve
from ccbench.measure.session import SLOWED
from ccbench.measure.timing import TimingSettings
from ccbench.store.run import open_run

TICK = 2.0 ** -20
BUDGET_TICKS = 1000


class _Op:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"MPI.{self.name}"


class _Node:
    """The node communicator of ``Split_type``: `size` ranks share the node."""

    def __init__(self, size):
        self.size = size

    def Get_size(self):
        return self.size

    def Free(self):
        pass


class OneRank:
    """MPI.COMM_WORLD of a one-rank job on a virtual clock (module docstring)."""

    def __init__(self, mpi, node_ranks=1, wrong=(), others_resolution=None):
        self.mpi, self.node_ranks, self.wrong = mpi, node_ranks, set(wrong)
        self.others_resolution = others_resolution  # what the (imagined) other ranks' timers resolve
        self.t = 0
        self.reductions = []  # the ops of the lowercase allreduce

    def now(self):
        self.t += 1
        return self.t * TICK

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def allgather(self, x):
        return [x]

    def bcast(self, obj, root=0):
        assert root == 0, "MPI refuses a root that is no rank"
        return obj

    def allreduce(self, value, op):
        self.reductions.append(op)
        if self.others_resolution is None:
            return value
        return {"MAX": max, "MIN": min}.get(op.name, lambda a, b: a + b)(value, self.others_resolution)

    def Barrier(self):
        pass

    def Allreduce(self, sendbuf, recvbuf, op):
        if sendbuf is self.mpi.IN_PLACE:  # the timing loop's and the validation's own reductions: free
            return
        recvbuf[...] = sendbuf
        self.t += recvbuf.nbytes
        if recvbuf.nbytes in self.wrong:
            recvbuf.flat[0] += 1

    def Bcast(self, buf, root=0):
        assert root == 0, "MPI refuses a root that is no rank"
        self.t += buf.nbytes

    def Waitall(self, requests):
        assert not requests  # one rank sends nothing

    def Split_type(self, kind, key=0):
        assert kind == self.mpi.COMM_TYPE_SHARED
        return _Node(self.node_ranks)


class Console:
    """A console that is no terminal: what the progress notes say, with their style."""

    is_terminal = False

    def __init__(self):
        self.lines = []

    def print(self, text, style=None):
        self.lines.append((text, style))


class Here:
    """The stand-in world of one test: its MPI module, the recorders, and a way to run a sweep."""

    def __init__(self, monkeypatch, tmp_path):
        self.monkeypatch, self.tmp_path = monkeypatch, tmp_path
        mpi = types.ModuleType("mpi4py.MPI")
        mpi.IN_PLACE = object()
        mpi.SUM, mpi.PROD, mpi.MIN, mpi.MAX = (_Op(n) for n in ("SUM", "PROD", "MIN", "MAX"))
        mpi.COMM_TYPE_SHARED = "shared"
        pkg = types.ModuleType("mpi4py")
        pkg.MPI = mpi
        monkeypatch.setitem(sys.modules, "mpi4py", pkg)
        monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)
        monkeypatch.setattr(native_module, "_MPI_OPS", {})  # the ops of this stand-in, not an earlier one's
        self.mpi = mpi
        self.use(OneRank(mpi))
        for var in ("CCBENCH_FAULT", "CCBENCH_RUN_RECORD", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
            monkeypatch.delenv(var, raising=False)
        self.collected, self.rates, self.floors, self.bandwidths, self.memory = [], [], [], [], []
        self.visits, self.starts, self.sessions = [], [], []

        def collect(comm, cfg_dict, thread, argv):
            self.collected.append((comm, cfg_dict, thread, argv))
            return {"nranks": comm.Get_size(), "mpi_library": "stand-in MPI", "config": cfg_dict,
                    "start_time": "2026-11-27T00:00:00+0000", "argv": argv, "thread_level_requested": thread[0]}

        monkeypatch.setattr(provenance, "collect", collect)
        monkeypatch.setattr(sweep, "timer_resolution_s", lambda: 4 * TICK)
        monkeypatch.setattr(sweep, "reduction_rates",
                            lambda comm, pairs: self.rates.append((comm, pairs)) or [{"pairs": len(pairs)}])
        monkeypatch.setattr(sweep, "harness_floor",
                            lambda comm, colls, s: self.floors.append((comm, colls, s)) or {"empty_s": 5e-8})
        monkeypatch.setattr(sweep, "memory_bandwidth",
                            lambda comm: self.bandwidths.append(comm) or {"copy_gbs": 12.5})
        monkeypatch.setattr(sweep, "require_memory", lambda *a: self.memory.append(a))
        monkeypatch.setattr(sweep, "current_library", lambda: None)
        real_visit = sweep.visit_case

        def visit_case(comm, case, s, **kw):
            self.visits.append((case, s, kw))
            return real_visit(comm, case, s, **kw)

        monkeypatch.setattr(sweep, "visit_case", visit_case)
        here = self

        class Session(driver.Session):
            def __init__(self, *a, **kw):
                here.sessions.append(kw)
                super().__init__(*a, **kw)

            def start(self, label, budget_s, fault_name):
                here.starts.append((label, budget_s, fault_name))
                super().start(label, budget_s, fault_name)

        monkeypatch.setattr(driver, "Session", Session)

    def use(self, comm):
        """Make `comm` MPI.COMM_WORLD, its clock the timing loop's."""
        self.comm = comm
        self.mpi.COMM_WORLD = comm
        self.monkeypatch.setattr(timing, "_now", comm.now)

    def config(self, **kw):
        values = {"collectives": ["allreduce"], "algorithms": ["native"], "sizes": "8,64", "warmup": 1,
                  "min_reps": 4, "max_reps": 6, "target_rse": 0.05, "budget_s": BUDGET_TICKS * TICK,
                  "watchdog_s": 0.0, "order": "planned", "results_dir": str(self.tmp_path / "results"),
                  "loop": "python", **kw}  # the stand-in MPI has no library for the C loop to call
        return resolve(values)

    def sweep(self, cfg, **kw):
        kw.setdefault("thread", ("single", "asked"))
        kw.setdefault("argv", ["ccbench", "run", "-c", "test"])
        return sweep.run_sweep(cfg, **kw)


@pytest.fixture
def here(monkeypatch, tmp_path):
    return Here(monkeypatch, tmp_path)


def _key(c):
    return (c.collective, c.algorithm, c.nbytes, c.dtype, c.op, bool(c.in_place), c.root)


def _run(path):
    opened = open_run(path)
    meta, rows, warnings = opened.meta, opened.rows, opened.warnings
    assert warnings == []
    return meta, rows


def _ticks(seconds):
    return [round(s / TICK, 9) for s in seconds]


# -- one sweep, its rows and its run.json -------------------------------------------------------


def test_a_sweep_stores_one_row_per_planned_case_in_the_planned_order(here):
    """allreduce (native) and bcast (native) at 8, 64 and 4K bytes; ping-pong needs two ranks.

    A sample of B bytes is B + 1 ticks.  8 and 64 bytes: the warm-up estimate (9 or 65 ticks)
    lets the first check come at min_reps = 4 identical samples, whose spread is 0: target_rse.
    4K: one call (4097 ticks) is past the budget (1000 ticks), so the first check comes at two
    samples, already past the budget: budget, with two samples.
    """
    cfg = here.config(collectives=["allreduce", "bcast", "pingpong"], sizes="8,64,4K")
    code, path = here.sweep(cfg, tag="mytag")
    assert code == 0
    assert path.parent == here.tmp_path / "results" and path.name.endswith("_np1_mytag")
    _, untagged = here.sweep(here.config(sizes="8"))
    assert untagged.name.endswith("_np1")
    meta, rows = _run(path)
    want = [(c, b) for c in ("allreduce", "bcast") for b in (8, 64, 4096)]
    assert [(r.collective, r.nbytes) for r in rows] == want
    assert [r.algorithm for r in rows] == ["native"] * 6
    assert [r.samples for r in rows] == [4, 4, 2] * 2
    assert [r.stop_reason for r in rows] == ["target_rse", "target_rse", "budget"] * 2
    for r in rows:
        assert _ticks(r.samples_s) == [r.nbytes + 1] * r.samples
        assert r.median_s == (r.nbytes + 1) * TICK
        assert (r.nranks, r.nwrong, r.sync, r.timing, r.loop, r.dtype) == (1, 0, "barrier", "per-call", "python",
                                                                           "float32")
        assert r.msgs_total is None and r.settings == {}
    assert meta["status"] == "complete" and meta["finished_cases"] == 6 and meta["failed_cases"] == 0
    assert meta["planned_cases"] == 6
    assert meta["skipped"] == [{"what": "pingpong/native", "why": "pingpong needs at least 2 ranks"}]
    assert meta["size_definitions"] == {c: COLLECTIVES[c].size_definition for c in ("allreduce", "bcast", "pingpong")}
    assert meta["timer_resolution_s"] == 4 * TICK
    assert meta["order"] == "planned" and meta["launch"] == 1 and "rounds" not in meta
    assert meta["loop"] == {"requested": "python", "used": "python"}
    assert meta["reduce_local"] == [{"pairs": 1}] and meta["harness_floor"] == {"empty_s": 5e-8}
    assert meta["memory_bandwidth"] == {"copy_gbs": 12.5}
    assert "mpich_selection" not in meta and "signal" not in meta and "resumed" not in meta
    assert meta["argv"] == ["ccbench", "run", "-c", "test"] and meta["config"] == json.loads(json.dumps(cfg.to_dict()))
    assert (path / "cases.csv").read_text().count("\n") == 7  # the header and six rows


def test_the_sweep_measures_the_local_reductions_floor_and_bandwidth_once_before_its_cases(here):
    """Its reductions are the (dtype, op) pairs of its reduction cases, sorted; the floor is timed with the
    launch's settings over the configured collectives; the provenance is collected with the run's thread
    level, command line and configuration."""
    cfg = here.config(collectives=["bcast", "allreduce"], dtypes="float64,float32", ops="sum,max")
    code, path = here.sweep(cfg, thread=("funneled", "because"), argv=["x", "y"])
    assert code == 0
    assert here.rates == [(here.comm, [("float32", "max"), ("float32", "sum"), ("float64", "max"),
                                       ("float64", "sum")])]
    assert here.floors == [(here.comm, ("bcast", "allreduce"), TimingSettings.from_config(cfg))]
    assert here.bandwidths == [here.comm]
    assert [(c[0], c[1], c[2], c[3]) for c in here.collected] == [(here.comm, cfg.to_dict(), ("funneled", "because"),
                                                                    ["x", "y"])]
    meta, rows = _run(path)
    assert meta["reduce_local"] == [{"pairs": 4}]
    # bcast has no op: one case per dtype and size; allreduce one per dtype, op and size
    assert len(rows) == meta["planned_cases"] == 2 * 2 + 2 * 2 * 2


def test_the_largest_case_s_memory_is_checked_for_the_node_s_ranks(here):
    here.use(OneRank(here.mpi, node_ranks=3))
    cfg = here.config(collectives=["allreduce", "bcast"], sizes="8,4K,64", dtypes="float32,float64")
    here.sweep(cfg)
    big = Case("allreduce", "native", 4096, 1024, "float32", "sum", False, 0)  # the first of the largest
    from ccbench.measure.sweep import case_bytes

    assert here.memory == [(case_bytes(big, 1) * 3, 3, big.label(), "lower the sizes")]


def test_window_sync_with_more_ranks_on_the_node_than_cores_is_refused_before_the_run_starts(here, monkeypatch):
    monkeypatch.setattr(provenance, "usable_cores", lambda: 2)
    here.use(OneRank(here.mpi, node_ranks=3))
    with pytest.raises(UsageError, match=r"^--sync window needs a core per rank \(3 ranks on 2 cores here\)"):
        here.sweep(here.config(sync="window"))
    assert not (here.tmp_path / "results").exists()
    here.use(OneRank(here.mpi, node_ranks=2))
    code, path = here.sweep(here.config(sync="window", sizes="8"))
    assert code == 0 and [r.sync for r in _run(path)[1]] == ["window"]


def test_the_timer_resolution_stored_is_the_coarsest_over_the_ranks(here):
    here.use(OneRank(here.mpi, others_resolution=9 * TICK))
    code, path = here.sweep(here.config(sizes="8"))
    assert _run(path)[0]["timer_resolution_s"] == 9 * TICK


def test_the_progress_says_each_case_with_its_figures_in_order(here, capsys):
    """One plain line per case (no terminal): [i/N], label, median in us, busbw, samples, stop, ok.

    At one rank an allreduce moves no bus bytes (busbw factor 2(P-1)/P = 0); a bcast's busbw is
    its algbw, B bytes / (B + 1) ticks."""
    cfg = here.config(collectives=["allreduce", "bcast"], sizes="8,4K")
    code, _ = here.sweep(cfg, console=Console())
    lines = capsys.readouterr().out.splitlines()
    cases = [Case("allreduce", "native", b, b // 4, "float32", "sum", False, 0) for b in (8, 4096)] + [
        Case("bcast", "native", b, b // 4, "float32", "none", False, 0) for b in (8, 4096)]
    stops = ["4 samples (target_rse)", "2 samples (budget)"] * 2
    bus = [0.0, 0.0, 8 / (9 * TICK) / 1e9, 4096 / (4097 * TICK) / 1e9]
    assert lines == [f"[{i}/4] {c.label()}: median {(c.nbytes + 1) * TICK * 1e6:.2f} us, busbw {b:.3f} GB/s, "
                     f"{s}, ok" for i, (c, b, s) in enumerate(zip(cases, bus, stops, strict=True), 1)]
    assert code == 0


def test_without_a_console_the_sweep_prints_nothing(here, capsys):
    code, _ = here.sweep(here.config())
    assert code == 0 and capsys.readouterr().out == ""


def test_a_wrong_result_fails_the_sweep_and_is_said(here, capsys):
    """The stand-in corrupts the 8-byte allreduce's result: its row counts one wrong element (the
    validating call's), the progress says WRONG 1, run.json counts one failed case (the 64-byte case
    after it is right), the exit code is 1."""
    here.use(OneRank(here.mpi, wrong={8}))
    code, path = here.sweep(here.config(), console=Console())
    meta, rows = _run(path)
    assert [r.nwrong for r in rows] == [1, 0]
    assert code == 1 and meta["failed_cases"] == 1 and meta["status"] == "complete"
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("4 samples (target_rse), WRONG 1") and out[1].endswith(", ok")


def test_each_case_is_announced_to_the_session_with_its_budget_and_fault_name(here):
    cfg = here.config(collectives=["allreduce", "bcast"], sizes="8,64")
    here.sweep(cfg)
    budget = BUDGET_TICKS * TICK
    assert here.starts == [(f"{c.label()}", budget, f"{c.collective}/native:{c.nbytes}") for c in plan(cfg, 1)[0]]
    assert here.sessions == [{"watchdog_s": 0.0, "progress": None, "fault": None}]
    assert [(v[0], v[1], v[2]) for v in here.visits] == [(c, TimingSettings.from_config(cfg),
                                                          {"fault": None, "loop": None}) for c in plan(cfg, 1)[0]]


class _Loop:
    """A compiled loop that has no kernel for any case (so the Python loop times them): who asked for which."""

    def __init__(self):
        self.asked = []

    def kernel(self, comm, collective, count, args, kwargs):
        self.asked.append((collective, count))


def test_the_loop_chosen_is_recorded_and_asked_for_every_native_case(here, monkeypatch):
    asked, loop = [], _Loop()
    record = {"requested": "auto", "used": "compiled", "library": "stand-in"}
    monkeypatch.setattr(compiled, "choose", lambda comm, requested, hand_written=False:
                        asked.append((comm, requested, hand_written)) or (loop, record))
    code, path = here.sweep(here.config(loop="compiled", algorithms=["native", "ring"]))
    assert code == 0 and asked == [(here.comm, "compiled", True)] and _run(path)[0]["loop"] == record
    assert loop.asked == [("allreduce", 2), ("allreduce", 16)]  # the native cases' counts; ring is Python's
    assert [v[2]["loop"] for v in here.visits] == [loop] * 4


def test_max_reps_stops_a_case_whose_minimum_is_its_maximum(here):
    code, path = here.sweep(here.config(min_reps=5, max_reps=5, sizes="8"))
    assert [(r.samples, r.stop_reason) for r in _run(path)[1]] == [(5, "max_reps")]


# -- launches and rounds ------------------------------------------------------------------------


def test_a_launch_of_several_runs_its_share_in_its_own_seeded_order(here):
    """Launch 2 of 3 with seed 7: the order's seed is 7 + 2 - 1; budget / 3 and ceil(max_reps / 3) samples
    (never under min_reps) per case; the algorithms of one size run back to back."""
    cfg = here.config(launches=3, order="shuffled", seed=7, algorithms=["native", "ring", "linear"],
                      sizes="8,64,256", min_reps=2, max_reps=9)
    code, path = here.sweep(cfg, launch=2)
    meta, rows = _run(path)
    assert (meta["order"], meta["order_seed"], meta["launch"], meta["order_blocks"]) == ("shuffled", 8, 2, True)
    s = here.floors[0][2]
    assert (s.budget_s, s.max_reps, s.min_reps) == (BUDGET_TICKS * TICK / 3, 3, 2)
    assert all(v[1] == s for v in here.visits)
    sizes = [r.nbytes for r in rows]
    assert sorted(map(_key, rows)) == sorted(map(_key, plan(cfg, 1)[0]))
    assert list(map(_key, rows)) != list(map(_key, plan(cfg, 1)[0]))  # this seed's order is not the plan's
    for i in range(0, 9, 3):  # blocks of one size, three algorithms each
        assert len({sizes[i], sizes[i + 1], sizes[i + 2]}) == 1
        assert {r.algorithm for r in rows[i:i + 3]} == {"native", "ring", "linear"}


def test_a_shuffled_order_keeps_every_block_of_compared_cases_together(here):
    """Blocks are the cases that differ only by algorithm: one collective, size, dtype, op, in-place, root."""
    cfg = here.config(order="shuffled", seed=11, algorithms=["native", "ring"], sizes="8,64", dtypes="float32,float64",
                      ops="sum,max", in_place="both", collectives=["allreduce", "bcast"], min_reps=2, max_reps=2)
    code, path = here.sweep(cfg)
    rows = _run(path)[1]
    blocks = [(r.collective, r.nbytes, r.dtype, r.op, r.in_place, r.root) for r in rows]
    want = {(c.collective, c.nbytes, c.dtype, c.op, c.in_place, c.root) for c in plan(cfg, 1)[0]}
    assert set(blocks) == want
    runs = [b for i, b in enumerate(blocks) if i == 0 or blocks[i - 1] != b]
    assert len(runs) == len(want)  # each block is met once, its cases back to back
    assert sorted(map(_key, rows)) == sorted(map(_key, plan(cfg, 1)[0]))


def test_rounds_visit_every_case_each_round_and_store_it_after_the_last(here, capsys):
    """Two rounds, planned order: each visit takes ceil(4 / 2) = 2 identical samples (target_rse at its
    minimum) within budget / 2; the row holds both visits' four samples, stored after round 2."""
    cfg = here.config(rounds=2, collectives=["allreduce", "bcast"], sizes="8")
    code, path = here.sweep(cfg, console=Console())
    meta, rows = _run(path)
    assert code == 0 and meta["rounds"] == 2
    assert [(r.collective, r.samples, r.stop_reason) for r in rows] == [("allreduce", 4, "target_rse"),
                                                                         ("bcast", 4, "target_rse")]
    cases = plan(cfg, 1)[0]
    labels = [f"{c.label()} (round {r}/2)" for r in (1, 2) for c in cases]
    budget = BUDGET_TICKS * TICK / 2
    assert here.starts == [(lab, budget, f"{c.collective}/native:8") for lab, c in zip(labels, cases * 2, strict=True)]
    per_round = TimingSettings.from_config(cfg.per_round())
    assert (per_round.min_reps, per_round.max_reps) == (2, 3)
    assert [v[1] for v in here.visits] == [per_round] * 4
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"[1/4] {labels[0]}: done", f"[2/4] {labels[1]}: done"]
    # the last round's lines are the rows' own (the case's label, without the round)
    assert lines[2].startswith(f"[3/4] {cases[0].label()}: median {9 * TICK * 1e6:.2f} us")
    assert lines[3].startswith(f"[4/4] {cases[1].label()}: median") and lines[3].endswith("4 samples (target_rse), ok")


def test_a_round_with_a_wrong_result_says_so_and_the_row_counts_every_round(here, capsys):
    here.use(OneRank(here.mpi, wrong={8}))
    code, path = here.sweep(here.config(rounds=2, sizes="8"), console=Console())
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("(round 1/2): done, WRONG")
    assert lines[1].endswith("WRONG 2")
    assert code == 1 and [r.nwrong for r in _run(path)[1]] == [2]


def test_a_row_of_rounds_is_judged_by_the_launch_s_minimum_sample_count(here):
    """Three rounds of min_reps 9 (3 a visit): a case past the budget stops each visit at two samples; its
    six samples are under the launch's 9, so the row is flagged few_samples, though each visit had its 3's
    worth of a minimum.  A case within the budget takes its 3 a visit, 9 in all: not flagged."""
    cfg = here.config(rounds=3, min_reps=9, max_reps=12, sizes="8,4K")
    code, path = here.sweep(cfg)
    rows = _run(path)[1]
    assert [(r.samples, r.stop_reason) for r in rows] == [(9, "target_rse"), (6, "budget")]
    assert "few_samples" not in rows[0].flags and "few_samples" in rows[1].flags


# -- interruption and --resume ------------------------------------------------------------------


def _interrupted(here, monkeypatch, cfg, item, capsys):
    """A run that SIGTERM (a term fault before `item`) stopped after that item."""
    monkeypatch.setenv("CCBENCH_FAULT", f"term:0:{item}")
    code, path = here.sweep(cfg, console=Console())
    monkeypatch.delenv("CCBENCH_FAULT")
    return code, path


def test_a_stopped_sweep_keeps_its_finished_cases_and_resume_measures_the_rest(here, monkeypatch, capsys):
    cfg = here.config(collectives=["allreduce", "bcast"], sizes="8,64")
    code, path = _interrupted(here, monkeypatch, cfg, "allreduce/native:64", capsys)
    assert code == 128 + 15
    meta, rows = _run(path)
    assert meta["status"] == "interrupted" and meta["signal"] == "SIGTERM" and meta["finished_cases"] == 2
    assert meta["fault"]["kind"] == "term"
    err = capsys.readouterr().err
    assert f"stopped by SIGTERM; 2 finished cases kept in {path}" in err
    assert [(r.collective, r.nbytes) for r in rows] == [("allreduce", 8), ("allreduce", 64)]
    measured = (len(here.rates), len(here.floors), len(here.bandwidths))
    here.starts.clear()

    code, again = here.sweep(cfg, resume=path, console=Console(), argv=["resume"])
    assert code == 0 and again == path
    meta, rows = _run(path)
    assert [(r.collective, r.nbytes) for r in rows] == [(c, b) for c in ("allreduce", "bcast") for b in (8, 64)]
    assert meta["status"] == "complete" and meta["finished_cases"] == 4 and "signal" not in meta
    assert [(e["finished_before"], e["argv"]) for e in meta["resumed"]] == [(2, ["resume"])]
    assert (len(here.rates), len(here.floors), len(here.bandwidths)) == measured  # not measured again
    assert [s[0] for s in here.starts] == [c.label() for c in plan(cfg, 1)[0][2:]]
    out = capsys.readouterr().out.splitlines()
    assert [ln.split("]")[0] for ln in out] == ["[1/2", "[2/2"]


def test_a_resumed_sweep_counts_the_wrong_cases_it_had(here, monkeypatch, capsys):
    here.use(OneRank(here.mpi, wrong={8}))
    cfg = here.config(sizes="8,64")
    code, path = _interrupted(here, monkeypatch, cfg, "allreduce/native:8", capsys)
    assert code == 128 + 15 and _run(path)[0]["failed_cases"] == 1
    here.use(OneRank(here.mpi))
    code, _ = here.sweep(cfg, resume=path)
    assert code == 1 and _run(path)[0]["failed_cases"] == 1


def test_a_resumed_shuffled_sweep_continues_in_its_own_order(here, monkeypatch, capsys):
    """The first run draws its seed (1234 here); the resumed one reads it back instead of drawing another
    (98765), so the run ends with the rows an uninterrupted run with seed 1234 has, in its order."""
    import secrets

    drawn = iter([1234, 98765])
    monkeypatch.setattr(secrets, "randbelow", lambda n: next(drawn))
    cfg = here.config(order="shuffled", sizes="8,16,32,64,128,256", algorithms=["native", "ring"])
    code, path = _interrupted(here, monkeypatch, cfg, "allreduce/ring:64", capsys)
    meta, rows = _run(path)
    assert code == 128 + 15 and meta["order_seed"] == 1234
    assert 0 < len(rows) < 12 and (rows[-1].algorithm, rows[-1].nbytes) == ("ring", 64)
    code, _ = here.sweep(cfg, resume=path)
    assert code == 0
    _, ref = here.sweep(here.config(order="shuffled", seed=1234, sizes="8,16,32,64,128,256",
                                    algorithms=["native", "ring"]))
    assert [_key(r) for r in _run(path)[1]] == [_key(r) for r in _run(ref)[1]]
    assert _run(path)[0]["order_seed"] == 1234


def test_resume_refuses_a_run_made_with_another_configuration(here, monkeypatch, capsys):
    cfg = here.config(sizes="8,64")
    _, path = _interrupted(here, monkeypatch, cfg, "allreduce/native:8", capsys)
    with pytest.raises(UsageError, match="it was made with another configuration"):
        here.sweep(here.config(sizes="8,128"), resume=path)
    code, _ = here.sweep(cfg, resume=path)
    assert code == 0


# -- faults, forced variants, the library's record -----------------------------------------------


def test_a_slow_fault_flags_the_cases_it_slows(here, monkeypatch):
    monkeypatch.setenv("CCBENCH_FAULT", "slow:0:allreduce/native:64:1us")
    code, path = here.sweep(here.config(sizes="8,64"))
    meta, rows = _run(path)
    assert [SLOWED in r.flags for r in rows] == [False, True]
    assert meta["fault"]["spec"] == "slow:0:allreduce/native:64:1us"
    assert here.visits[1][2]["fault"] is not None and here.visits[1][2]["fault"].kind == "slow"


_RING = "native:ring"


def _mpich_ring(monkeypatch):
    from ccbench.algorithms import REGISTRY

    for k, v in REGISTRY["allreduce"][_RING].settings["mpich"].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sweep, "current_library", lambda: "mpich")


def test_a_forced_algorithm_the_library_refuses_is_skipped_in_every_round(here, monkeypatch, capsys):
    """The library refuses the forced ring at 8 bytes: no row, one skip in run.json, one note, and
    the case is not visited again in round 2; the 64-byte case is measured in both rounds."""
    _mpich_ring(monkeypatch)
    probed = []

    def probe(comm, call, library):
        nbytes = call.args[1].nbytes
        probed.append((nbytes, library))
        if nbytes == 8:
            raise NotApplicableError("MPICH fell back")

    monkeypatch.setattr(sweep, "probe", probe)
    from ccbench.measure import library as library_module

    monkeypatch.setattr(library_module, "mpich_default_tree", lambda: ({"allreduce": ["ring"]}, "4.2.0"))
    console = Console()
    cfg = here.config(algorithms=[_RING], rounds=2)
    code, path = here.sweep(cfg, console=console)
    meta, rows = _run(path)
    assert code == 0 and [(r.algorithm, r.nbytes) for r in rows] == [(_RING, 64)]
    assert rows[0].settings == dict(sweep.REGISTRY["allreduce"][_RING].settings["mpich"])
    assert probed == [(8, "mpich"), (64, "mpich"), (64, "mpich")]
    refused = Case("allreduce", _RING, 8, 2, "float32", "sum", False, 0)
    assert meta["skipped"] == [{"what": refused.label(), "why": "not applicable: MPICH fell back",
                                "not_applicable": True, "collective": "allreduce", "algorithm": _RING,
                                "nbytes": 8, "dtype": "float32", "op": "sum", "in_place": False, "nranks": 1}]
    assert console.lines == [(f"{refused.label()}: not applicable (MPICH fell back)", "yellow")]
    assert meta["mpich_selection"] == {"version": "4.2.0", "tree": {"allreduce": ["ring"]}}
    out = capsys.readouterr().out.splitlines()
    assert [ln.split("]")[0] for ln in out] == ["[1/4", "[2/4"]


def test_forced_algorithms_another_library_lacks_are_skipped_with_the_plan_s_skips(here, monkeypatch):
    monkeypatch.setattr(sweep, "current_library", lambda: "openmpi")
    from ccbench.algorithms import REGISTRY

    mpich_only = next(a for a, x in REGISTRY["allreduce"].items() if x.settings and "openmpi" not in x.settings)
    cfg = here.config(collectives=["allreduce", "pingpong"], algorithms=["native", mpich_only])
    code, path = here.sweep(cfg)
    meta, rows = _run(path)
    assert [r.algorithm for r in rows] == ["native", "native"]
    assert [s["what"] for s in meta["skipped"]] == ["pingpong/native", f"allreduce/{mpich_only}"]
    assert meta["skipped"][1]["why"] == "not an algorithm of Open MPI"
    assert meta["planned_cases"] == 2 and "mpich_selection" not in meta



# -- more of the loop's bookkeeping -------------------------------------------------------------


def test_rows_are_judged_against_the_timer_resolution_the_run_measured(here):
    """near_resolution flags a median under 100 timer steps: with a 4-tick timer, the 8-byte case's
    9 ticks are, the 4K case's 4097 ticks are not."""
    code, path = here.sweep(here.config(sizes="8,4K"))
    rows = _run(path)[1]
    assert ["near_resolution" in r.flags for r in rows] == [True, False]


def test_the_progress_is_told_each_case_s_label_line_and_verdict(here, monkeypatch):
    """Progress.done(label, line, ok): the round's label, 'done' (', WRONG') after an early round, the
    row's line after the last; ok is whether the visit or the row was right."""
    done = []

    class Progress(driver.Progress):
        def __init__(self, total, console=None, what="sweep"):
            done.append(("total", total))
            super().__init__(total, console, what)

        def done(self, label, line, ok):
            done.append((label, line, ok))
            super().done(label, line, ok)

        def stop(self):
            done.append("stop")
            super().stop()

    monkeypatch.setattr(driver, "Progress", Progress)
    here.use(OneRank(here.mpi, wrong={8}))
    cfg = here.config(rounds=2)
    here.sweep(cfg, console=Console())
    c8, c64 = plan(cfg, 1)[0]
    r1 = [f"{c.label()} (round 1/2)" for c in (c8, c64)]
    r2 = [f"{c.label()} (round 2/2)" for c in (c8, c64)]
    assert done[:3] == [("total", 4), (r1[0], f"{r1[0]}: done, WRONG", False), (r1[1], f"{r1[1]}: done", True)]
    assert [(d[0], d[2]) for d in done[3:5]] == [(r2[0], False), (r2[1], True)]
    assert done[3][1].startswith(f"{c8.label()}: median") and done[3][1].endswith("WRONG 2")
    assert done[4][1].startswith(f"{c64.label()}: median") and done[4][1].endswith(", ok")
    assert done[5:] == ["stop"]  # the session takes the progress off the terminal at the end


def test_a_sweep_that_fails_before_its_cases_is_left_failed_with_nothing_measured(here, monkeypatch):
    """The memory bandwidth (measured last, after the reductions and the floor) fails: run.json is
    left failed with the slots of those measurements as the run started them, and no case ran."""
    def broken(comm):
        raise RuntimeError("no memory bandwidth")

    monkeypatch.setattr(sweep, "memory_bandwidth", broken)
    with pytest.raises(RuntimeError, match="no memory bandwidth"):
        here.sweep(here.config())
    (path,) = (here.tmp_path / "results").iterdir()
    meta, rows = _run(path)
    assert rows == [] and here.visits == []
    assert (meta["status"], meta["reduce_local"], meta["harness_floor"], meta["memory_bandwidth"]) == (
        "failed", [], None, None)
    assert meta["finished_cases"] == 0 and meta["failed_cases"] == 0


def test_resume_refuses_a_run_whose_stored_configuration_is_no_longer_valid(here, monkeypatch, capsys):
    cfg = here.config(sizes="8,64")
    _, path = _interrupted(here, monkeypatch, cfg, "allreduce/native:8", capsys)
    meta = json.loads((path / "run.json").read_text())
    meta["config"]["no_such_key"] = 1
    (path / "run.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match="it was made with another configuration"):
        here.sweep(cfg, resume=path)


def test_shuffled_rounds_each_draw_their_own_blocked_order(here):
    """Round 1 runs the launch's order, round 2 one of its own (seeded from the launch's seed), and in both
    the cases of one block (one size, every algorithm) run back to back; the row of each case is stored
    after its second visit, in round 2's order."""
    cfg = here.config(rounds=2, order="shuffled", seed=5, sizes="8,16,32,64,128", algorithms=["native", "ring"],
                      min_reps=2, max_reps=2)
    code, path = here.sweep(cfg)
    rows = _run(path)[1]
    visited = [v[0] for v in here.visits]
    first, second = visited[:10], visited[10:]
    assert sorted(map(_key, first)) == sorted(map(_key, second)) == sorted(map(_key, plan(cfg, 1)[0]))
    assert first != second
    for order in (first, second):
        sizes = [c.nbytes for c in order]
        assert all(sizes[i] == sizes[i + 1] for i in range(0, 10, 2))
    assert [_key(r) for r in rows] == [_key(c) for c in second]


def test_a_native_case_times_the_communicator_s_own_method_with_its_buffers_and_op(here, monkeypatch):
    """No Python frame between the timing loop and the library: the timed call of a native allreduce is
    the communicator's bound Allreduce, given MPI.IN_PLACE for an in-place case and the case's op."""
    timed = []
    real = sweep.measure
    monkeypatch.setattr(sweep, "measure", lambda comm, call, s, **kw: timed.append(call) or real(comm, call, s, **kw))
    case = Case("allreduce", "native", 64, 16, "float32", "max", True, 0)
    visit = sweep.visit_case(here.comm, case, TimingSettings(warmup=1, min_reps=2, max_reps=2))
    (call,) = timed
    assert call.func == here.comm.Allreduce
    assert call.args[0] is here.mpi.IN_PLACE and call.args[2] is here.mpi.MAX
    assert call.args[1].nbytes == 64 and call.args[1].dtype == np.float32
    assert visit.nwrong == 0 and visit.stop == "max_reps"


def test_a_row_is_judged_against_the_timer_resolution_it_is_given(here):
    """near_resolution: a median under 100 timer steps.  The 8-byte case's 9 ticks are under 100 steps of 4
    ticks; under 100 of the default 1 ns (about 0.1 us) they are not."""
    case = Case("allreduce", "native", 8, 2, "float32", "sum", False, 0)
    s = TimingSettings(warmup=1, min_reps=6, max_reps=6)
    assert "near_resolution" in sweep.run_case(here.comm, case, s, 4 * TICK).flags
    assert "near_resolution" not in sweep.run_case(here.comm, case, s).flags
    visit = sweep.Visit(np.full(6, 2e-7), "max_reps", np.full(6, 2e-7), 0, (0,) * 7, False, False, {})
    assert "near_resolution" not in sweep.case_row(here.comm, case, [visit], s).flags  # 0.2 us >= 100 x 1 ns
    assert "near_resolution" in sweep.case_row(here.comm, case, [visit], s, 4e-9).flags


class _SecondRank(OneRank):
    """Rank 1 of two, every collective's result what this rank brought (a barrier-only sweep needs no more)."""

    def Get_rank(self):
        return 1

    def Get_size(self):
        return 2

    def allgather(self, x):
        return [x, x]


def test_a_rank_other_than_0_measures_but_writes_and_says_nothing(here, capsys):
    here.use(_SecondRank(here.mpi))
    console = Console()
    code, path = here.sweep(here.config(collectives=["barrier"]), console=console)
    assert (code, path) == (0, None)
    assert not (here.tmp_path / "results").exists()
    assert console.lines == [] and capsys.readouterr().out == ""
    assert [v[0].collective for v in here.visits] == ["barrier"]
