"""Contracts of the measuring core on a scripted stand-in for MPI and the clock (plain pytest, no MPI)."""

# Every rank of a `World` runs the real timing loop (or the real `run_case`) in a thread of
# its own.  Time is virtual, counted in whole ticks of 2**-20 s, so every reading and every
# difference is exact in floating point.  A rank's clock moves only as the script says: a call
# takes what `work(rank, k)` gives for the rank's k-th call (warm-up included); a collective
# ends for everyone when the last rank has arrived, plus its cost; a message arrives `latency`
# ticks after it was sent; and a clock reading right after another reading, with nothing in
# between, moves the clock one tick (a rank spinning on its clock).  Each rank may read its
# clock with an offset to the others.  Every expected value below is derived from the script.

import dataclasses
import functools
import sys
import threading
import types
from collections import deque

import numpy as np
import pytest

from ccbench.measure import sweep
from ccbench.measure.config import Case
from ccbench.measure.session import SLOWED, Fault
from ccbench.measure.timing import TimingSettings, measure

TICK = 2.0 ** -20        # seconds per tick
BASE = 1 << 20           # every clock starts at 1 s (in ticks)
TIMEOUT_S = 30.0         # a rank that waits this long on the others is a failed test, not a hang


class StuckError(AssertionError):
    """A rank waits for ranks that have finished or failed: the ranks disagree on what to do."""


class _Op:
    """A reduction of the stand-in MPI: its name and the numpy ufunc that does it."""

    def __init__(self, name: str, ufunc) -> None:
        self.name, self.ufunc = name, ufunc

    def __repr__(self) -> str:
        return f"MPI.{self.name}"


MPI = types.ModuleType("mpi4py.MPI")
MPI.IN_PLACE = object()
MPI.SUM, MPI.PROD, MPI.MIN, MPI.MAX = (_Op(n, u) for n, u in (("SUM", np.add), ("PROD", np.multiply),
                                                              ("MIN", np.minimum), ("MAX", np.maximum)))
MPI.COMM_TYPE_SHARED = "shared"
MPI.UNDEFINED = -32766


@pytest.fixture(autouse=True)
def no_real_mpi(monkeypatch):
    """`from mpi4py import MPI` in the code under test gives the stand-in's constants."""
    pkg = types.ModuleType("mpi4py")
    pkg.MPI = MPI
    monkeypatch.setitem(sys.modules, "mpi4py", pkg)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", MPI)


class World:
    """`size` ranks with scripted calls, collectives, messages and clocks; `tamper` may change or lose a message."""

    # tamper(source, dest, data) -> the data delivered, or None: lost (the receive buffer keeps what it had)

    def __init__(self, size, work=None, *, offsets=None, latency=40, barrier=3, reduce=5, bcast=2,
                 tamper=None) -> None:
        self.size, self.work, self.latency, self.tamper = size, work, latency, tamper
        self.t = [BASE] * size                     # each rank's time, in global ticks
        self.offsets = list(offsets or [0] * size)  # each rank's clock = global time + offset
        self.reading = [False] * size               # the rank's last act was a clock reading
        self.starts = [[] for _ in range(size)]     # global tick at which each of its calls began
        self.agreed = []                            # the values rank 0 broadcast (window starts)
        self.cost = {"Barrier": barrier, "Allreduce": reduce, "Bcast": bcast}
        self._cond = threading.Condition()
        self._rounds: list[dict] = []      # per collective, in order: rank -> (kind, value, arrival)
        self._mail: dict = {}
        self._gone: set[int] = set()       # ranks that have returned or raised

    def call(self, rank: int) -> None:
        """One scripted call on `rank`: it takes work(rank, k) ticks, k counting its calls so far."""
        self.starts[rank].append(self.t[rank])
        self.t[rank] += self.work(rank, len(self.starts[rank]) - 1)
        self.reading[rank] = False

    def leave(self, rank: int) -> None:
        """`rank` has returned or raised: whoever still waits for it is stuck."""
        with self._cond:
            self._gone.add(rank)
            self._cond.notify_all()

    def wait_for(self, rank: int, ready, what: str, needs=None) -> None:
        """Block (holding the lock) until ready(); raise StuckError once a rank in `needs` (default: any) has left."""
        needs = set(range(self.size)) if needs is None else set(needs)
        if not self._cond.wait_for(lambda: ready() or needs & self._gone, timeout=TIMEOUT_S) or not ready():
            raise StuckError(f"rank {rank} waits for {what}, but ranks {sorted(self._gone)} have left")


class Comm:
    """One rank of a World, with the mpi4py methods the measuring core calls."""

    def __init__(self, world: World, rank: int) -> None:
        self.world, self.rank = world, rank
        self.collectives = 0  # how many this rank has entered

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.world.size

    def Wtime(self) -> float:
        """This rank's clock in seconds; a reading right after a reading moves it one tick."""
        w, r = self.world, self.rank
        if w.reading[r]:
            w.t[r] += 1
        w.reading[r] = True
        return (w.t[r] + w.offsets[r]) * TICK

    def _collective(self, kind: str, value) -> list:
        """Every rank's `value`; everyone leaves when the last rank has arrived, plus the cost."""
        w = self.world
        with w._cond:
            self.collectives += 1
            if len(w._rounds) < self.collectives:
                w._rounds.append({})
            entries = w._rounds[self.collectives - 1]
            entries[self.rank] = (kind, value, w.t[self.rank])
            w._cond.notify_all()
            w.wait_for(self.rank, lambda: len(entries) == w.size, f"the others in {kind}")
        entries = [entries[r] for r in range(w.size)]
        kinds = sorted({e[0] for e in entries})
        assert len(kinds) == 1, f"ranks in different collectives: {kinds}"
        w.t[self.rank] = max(e[2] for e in entries) + w.cost[kind]
        w.reading[self.rank] = False
        return [e[1] for e in entries]

    def Barrier(self) -> None:
        self._collective("Barrier", None)

    def Allreduce(self, sendbuf, recvbuf, op) -> None:
        assert isinstance(op, _Op), f"not an MPI op: {op!r}"
        mine = np.array(recvbuf if sendbuf is MPI.IN_PLACE else sendbuf, copy=True)
        recvbuf[...] = functools.reduce(op.ufunc, self._collective("Allreduce", mine))

    def allreduce(self, value, op):
        """mpi4py's lowercase allreduce of a Python number (it costs an Allreduce)."""
        assert isinstance(op, _Op), f"not an MPI op: {op!r}"
        return functools.reduce(lambda a, b: op.ufunc(a, b).item(), self._collective("Allreduce", np.float64(value)))

    def Bcast(self, buf, root: int = 0) -> None:
        if self.rank == root:
            self.world.agreed.append(float(buf[0]) if buf.size else None)
        buf[...] = self._collective("Bcast", buf.copy())[root]

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        w = self.world
        with w._cond:
            w._mail.setdefault((self.rank, dest, tag), deque()).append(
                (np.array(buf, copy=True), w.t[self.rank] + w.latency))
            w._cond.notify_all()
        w.reading[self.rank] = False

    def Recv(self, buf, source: int, tag: int = 0) -> None:
        w = self.world
        key = (source, self.rank, tag)
        with w._cond:
            w.wait_for(self.rank, lambda: w._mail.get(key), f"a message from {source} (tag {tag})", [source])
            data, arrival = w._mail[key].popleft()
        if w.tamper is not None:
            data = w.tamper(source, self.rank, data)
        if data is not None:
            buf[...] = data
        w.t[self.rank] = max(w.t[self.rank], arrival)
        w.reading[self.rank] = False

    def Sendrecv(self, sendbuf, dest: int, sendtag: int = 0, recvbuf=None, source: int = 0, recvtag: int = 0) -> None:
        self.Send(sendbuf, dest, sendtag)
        self.Recv(recvbuf, source, recvtag)

    def Isend(self, buf, dest: int, tag: int = 0):
        self.Send(buf, dest, tag)  # the stand-in copies the data at once: nothing left to wait for
        return None

    def Irecv(self, buf, source: int, tag: int = 0):
        return (buf, source, tag)

    def Waitall(self, requests) -> None:
        for req in requests:
            if req is not None:
                self.Recv(*req)


def run(world: World, fn) -> list:
    """fn(comm) on every rank of `world`, each in its own thread; the results, or the first error."""
    results: list = [None] * world.size
    errors: list = [None] * world.size

    def body(rank: int) -> None:
        try:
            results[rank] = fn(Comm(world, rank))
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[rank] = exc
        world.leave(rank)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world.size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * TIMEOUT_S)
        assert not t.is_alive(), "a rank never finished"
    first = next((e for e in errors if e is not None and not isinstance(e, StuckError)),
                 next((e for e in errors if e is not None), None))
    if first is not None:
        raise first
    return results


def measure_world(world: World, settings: TimingSettings) -> tuple[list[float], str]:
    """The timing loop on every rank of `world`: (samples in ticks, stop reason), checked equal on all ranks."""

    def body(comm):
        samples, stop = measure(comm, functools.partial(world.call, comm.rank), settings, clock=comm.Wtime)
        return (samples / TICK).tolist(), stop

    results = run(world, body)
    assert all(r == results[0] for r in results), "ranks disagree on the samples or the stop"
    return results[0]


def scripted(table):
    """work(rank, k) from a table of per-rank call times in ticks (warm-up calls first)."""
    return lambda rank, k: table[rank][k]


def settings(**kw) -> TimingSettings:
    """Timing settings with a budget (1 s = 2**20 ticks) that no test below reaches unless it says so."""
    return TimingSettings(**{"warmup": 2, "min_reps": 6, "max_reps": 6, "target_rse": 0.05, "budget_s": 1.0,
                             "sync": "barrier", **kw})


# -- a sample is the slowest rank's time -------------------------------------------------

# two warm-up calls of 50 ticks, then six samples in which the slowest rank changes
SPREAD = [
    [50, 50, 10, 70, 30, 90, 20, 40],
    [50, 50, 60, 20, 80, 10, 45, 40],
    [50, 50, 30, 40, 20, 60, 70, 40],
]


def test_a_sample_is_the_maximum_over_ranks():
    """Each sample is the slowest rank's call time, not the fastest's nor an average."""
    world = World(3, scripted(SPREAD))
    samples, stop = measure_world(world, settings())
    assert samples == [60, 70, 80, 90, 70, 40]  # column maxima of SPREAD[:, 2:]
    assert stop == "max_reps"


def test_every_sample_starts_together_on_every_rank():
    """After the synchronisation every rank begins the timed call at the same instant."""
    world = World(3, scripted(SPREAD))
    measure_world(world, settings())
    for k in range(2, 8):  # the six timed calls
        assert len({world.starts[r][k] for r in range(3)}) == 1, f"call {k}"


# -- the synchronisation is outside the timed region -------------------------------------

def test_barrier_is_outside_the_timed_region():
    """Every rank does the same work, so any reduction gives it; a barrier (7 ticks) inside would add to it."""
    work = [100, 100, 100, 140, 100, 180, 100, 120]
    world = World(2, lambda rank, k: work[k], barrier=7)
    samples, _ = measure_world(world, settings())
    assert samples == work[2:]


def test_window_sync_is_outside_the_timed_region():
    """Window sync: a sample runs from the agreed instant to the end, without the broadcast or the wait."""
    world = World(2, lambda rank, k: [64, 64, 40, 90, 55, 70, 64, 80][k], offsets=[0, 999], bcast=11)
    samples, _ = measure_world(world, settings(sync="window"))
    assert samples == [40, 90, 55, 70, 64, 80]


# -- window synchronisation starts every rank at the agreed instant -------------------------

def test_window_starts_every_rank_at_the_agreed_instant():
    """Clocks offset by hundreds to thousands of ticks: every rank begins each call at rank 0's agreed instant."""
    # Ping-pong offsets are exact here (symmetric 40-tick latency), so rank r's start on its own
    # clock is rank 0's broadcast value + (offset_r - offset_0): on the common time line, the
    # broadcast value - offset_0 for every rank.
    offsets = [300, -4000, 2500]
    table = [[64, 64, 40, 90, 55, 70, 20, 80],
             [64, 64, 90, 40, 55, 30, 64, 80],
             [64, 64, 60, 60, 90, 70, 50, 20]]
    world = World(3, scripted(table), offsets=offsets)
    samples, _ = measure_world(world, settings(sync="window"))
    assert samples == [90, 90, 90, 70, 64, 80]
    agreed = [round(v / TICK) - offsets[0] for v in world.agreed]  # rank 0's start values, common time
    assert len(agreed) == 6
    for rank in range(3):
        assert world.starts[rank][2:] == agreed, f"rank {rank}"


# -- stop rules ---------------------------------------------------------------------------

def test_target_rse_stops_at_min_reps_when_samples_agree():
    """Identical samples (RSE 0) stop at exactly min_reps, by the target rule."""
    world = World(2, lambda rank, k: 100)
    samples, stop = measure_world(world, settings(min_reps=7, max_reps=50))
    assert (len(samples), stop) == (7, "target_rse")


def test_target_rse_never_stops_before_min_reps():
    """A budget of 5.5 calls checks first at 5 identical samples (RSE 0), under min_reps 10: the budget stops at 6."""
    # Warm-up calls of 1000 ticks: the budget (5500 ticks) holds int(5500 / 1000) = 5 calls, so
    # the first check is at 5 samples.  Their RSE is 0, but 5 < min_reps, so only the budget may
    # stop the loop: 5 samples took 5 x (3 + 1000) = 5015 ticks (+1 of clock reading), under the
    # budget; the 6th ends past it.
    world = World(2, lambda rank, k: 1000)
    samples, stop = measure_world(world, settings(min_reps=10, max_reps=50, budget_s=5500 * TICK))
    assert (len(samples), stop) == (6, "budget")


def test_target_rse_stops_at_the_first_check_below_target():
    """Samples 1 3 1 3 then 2s (x100 ticks): RSE = 1/sqrt(n (n - 1)) first reaches 0.14 at n = 8; it stops there."""
    # For every prefix from n = 4 on, the mean is 2 and the squared deviations sum to 4, so
    # s = 2/sqrt(n - 1) and RSE = s / sqrt(n) / 2 = 1/sqrt(n (n - 1)): 0.289 at n = 4, 0.154 at
    # n = 7, 0.134 at n = 8.  Below 8 samples a batch is one sample, so every n is checked.
    work = [200, 100, 300, 100, 300] + [200] * 20
    world = World(2, lambda rank, k: work[k])
    samples, stop = measure_world(world, settings(warmup=1, min_reps=4, max_reps=50, target_rse=0.14))
    assert samples == [100, 300, 100, 300, 200, 200, 200, 200]
    assert stop == "target_rse"


def test_max_reps_stops_a_spread_that_never_settles():
    """Samples alternating 100/300 ticks never reach a 1% RSE: exactly max_reps samples, all kept."""
    world = World(2, lambda rank, k: 100 if k % 2 else 300)
    samples, stop = measure_world(world, settings(min_reps=4, max_reps=9, target_rse=0.01))
    assert samples == [300, 100, 300, 100, 300, 100, 300, 100, 300]
    assert stop == "max_reps"


def test_max_reps_wins_over_a_larger_min_reps():
    """max_reps 5 below min_reps 20: 5 samples, "max_reps"."""
    world = World(2, lambda rank, k: 100)
    samples, stop = measure_world(world, settings(min_reps=20, max_reps=5))
    assert (len(samples), stop) == (5, "max_reps")


def test_budget_stops_at_the_first_sample_past_it():
    """A budget of 1000 ticks, samples of 3 + 100 ticks on the slower rank: the 10th is the first to end past it."""
    # 9 samples take 9 x 103 = 927 ticks, plus under 30 of checking (a clock reading and a 5-tick
    # reduction per check); 10 take over 1030.  The faster rank (10-tick calls) is still under
    # 1000 by then: the budget is the slowest rank's.  min_reps is out of reach, so neither
    # the target nor max_reps can stop the loop.  Warm-up calls of 200 ticks put the first check
    # at int(1000 / 200) = 5 samples; each later batch ends where the loop's estimate puts the
    # budget (6, 7, 8, then 10).
    table = [[200, 200] + [100] * 30, [20, 20] + [10] * 30]
    world = World(2, scripted(table))
    samples, stop = measure_world(world, settings(min_reps=1000, max_reps=1000, budget_s=1000 * TICK))
    assert (len(samples), stop) == (10, "budget")
    assert samples == [100] * 10


# -- ping-pong: half the round trip, both ranks checked ----------------------------------

def _pingpong(world: World, count: int = 4):
    """run_case on every rank of `world` for a ping-pong of `count` float64s; the rows."""
    case = Case("pingpong", "native", 8 * count, count, "float64", "none", False, 0)
    rows = run(world, lambda comm: sweep.run_case(comm, case, settings(min_reps=5, max_reps=5), clock=comm.Wtime))
    assert all(r == rows[0] for r in rows)
    return rows[0]


@pytest.mark.parametrize("nranks", [2, 3])
def test_pingpong_reports_half_the_round_trip(nranks):
    """Latency 50 ticks: rank 1 has the message at 50, rank 0 the reply at 100; the row says 50."""
    row = _pingpong(World(nranks, latency=50))
    assert row.samples_s == (50 * TICK,) * 5
    assert row.median_s == row.min_s == row.max_s == 50 * TICK
    assert row.nwrong == 0 and row.stop_reason == "max_reps"


def test_pingpong_check_catches_a_wrong_reply_on_rank_0():
    """Rank 1 has the right data, the reply is corrupted on its way: rank 0's 4 elements are wrong."""

    def corrupt_reply(source, dest, data):
        return data + 1 if (source, dest) == (1, 0) else data

    assert _pingpong(World(2, tamper=corrupt_reply)).nwrong == 4


def test_pingpong_check_catches_a_wrong_message_on_rank_1():
    """The first message is corrupted: rank 1 holds 4 wrong elements and echoes them to rank 0 (8 in all)."""

    def corrupt_ping(source, dest, data):
        return data + 1 if (source, dest) == (0, 1) else data

    assert _pingpong(World(2, tamper=corrupt_ping)).nwrong == 8


def test_pingpong_check_catches_a_lost_reply_on_rank_0():
    """The reply never lands in rank 0's receive buffer: it keeps its poison, 4 elements wrong."""

    def lose_reply(source, dest, data):
        return None if (source, dest) == (1, 0) else data

    assert _pingpong(World(2, tamper=lose_reply)).nwrong == 4


# -- an injected slowdown (CCBENCH_FAULT=slow:...) enters the samples as specified ---------

# A slowed call is the call, then a spin on the rank's clock until the delay has passed.  On the
# stand-in's clock the spin ends exactly at the delay (its readings move one tick each), and a
# reading right after another reading costs one tick: the loop's closing reading follows the
# spin's last one (+1 tick), and a share first reads the clock right after the loop's opening
# reading (+1 more).  Shares below are powers of two (25%, 50%), so every product is exact.

def _measure_with(world: World, fault: Fault, s: TimingSettings) -> list[float]:
    """The timing loop on every rank of `world`, the fault's ranks timing the slowed call; samples in ticks."""

    def body(comm):
        call = functools.partial(world.call, comm.rank)
        timed = fault.slowed(call, comm.Wtime) if fault.on(comm.rank) else call
        samples, _ = measure(comm, timed, s, clock=comm.Wtime)
        return (samples / TICK).tolist()

    results = run(world, body)
    assert all(r == results[0] for r in results)
    return results[0]


# rank 0 is the slower rank by 10 ticks in every timed call; the first two calls are the warm-up
UNEVEN = [[50, 50, 100, 200, 40, 100, 100, 100],
          [50, 50, 90, 190, 30, 90, 90, 90]]


@pytest.mark.parametrize(("rank", "expected"), [
    (0, [100 + 32 + 1, 200 + 32 + 1, 40 + 32 + 1, 133, 133, 133]),  # the slowest rank made slower
    (1, [90 + 32 + 1, 190 + 32 + 1, 30 + 32 + 1, 123, 123, 123]),   # rank 1 now the slowest
    (None, [133, 233, 73, 133, 133, 133]),                         # every rank: the slowest's + 32
])
def test_a_fixed_delay_is_added_to_every_call_of_its_rank(rank, expected):
    """slow by 32 ticks: each sample is the slowed rank's call + 32 (+1 tick of reading), when it is the slowest."""
    fault = Fault("slow", rank, "allreduce/native", delay_s=32 * TICK)
    assert _measure_with(World(2, scripted(UNEVEN)), fault, settings()) == expected


def test_without_the_fault_the_same_script_gives_the_slowest_call():
    world = World(2, scripted(UNEVEN))
    assert measure_world(world, settings())[0] == [100, 200, 40, 100, 100, 100]


@pytest.mark.parametrize(("fraction", "expected"), [
    (0.25, [1 + 100 + 25 + 1, 1 + 200 + 50 + 1, 1 + 40 + 10 + 1, 127, 127, 127]),
    (0.5, [1 + 100 + 50 + 1, 1 + 200 + 100 + 1, 1 + 40 + 20 + 1, 152, 152, 152]),
])
def test_a_share_spins_that_share_of_each_call_s_own_duration(fraction, expected):
    """slow by a share on rank 0: each sample grows by that share of rank 0's own call (100, 200, 40 ticks)."""
    fault = Fault("slow", 0, "allreduce/native", fraction=fraction)
    assert _measure_with(World(2, scripted(UNEVEN)), fault, settings()) == expected


def _allreduce_rows(world: World, fault: Fault | None, nbytes: int = 64):
    """run_case of allreduce/native (float32 sum) on every rank of `world` under `fault`; the row."""
    case = Case("allreduce", "native", nbytes, nbytes // 4, "float32", "sum", False, 0)
    rows = run(world, lambda comm: sweep.run_case(comm, case, settings(), fault=fault, clock=comm.Wtime))
    assert all(r == rows[0] for r in rows)
    return rows[0]


@pytest.fixture
def stand_in_ops(monkeypatch):
    """The native algorithms look their reduction ops up afresh (in the stand-in MPI)."""
    from ccbench.algorithms import native

    monkeypatch.setattr(native, "_MPI_OPS", {})


@pytest.mark.parametrize(("spec", "slowed"), [
    ("allreduce/native", True),       # every size
    ("allreduce/native:64", True),    # this size
    ("allreduce/native:128", False),  # another size
    ("allreduce/ring", False),        # another algorithm
    ("bcast/native", False),          # another collective
])
def test_run_case_slows_the_matching_case_only(spec, slowed, stand_in_ops):
    """An allreduce of 40 ticks: 40 + 32 + 1 when the fault names the case, 40 and no flag otherwise."""
    row = _allreduce_rows(World(2, reduce=40), Fault("slow", None, spec, delay_s=32 * TICK))
    assert row.samples_s == ((73 if slowed else 40) * TICK,) * 6
    assert (SLOWED in row.flags) is slowed
    assert row.nwrong == 0  # the validation call is the plain call


def test_run_case_without_a_fault_is_unflagged(stand_in_ops):
    row = _allreduce_rows(World(2, reduce=40), None)
    assert row.samples_s == (40 * TICK,) * 6 and SLOWED not in row.flags


@pytest.mark.parametrize(("rank", "one_way"), [(0, (100 + 32 + 1) / 2), (1, 100 / 2), (None, (100 + 32 + 1) / 2)])
def test_run_case_slows_the_named_rank_only(rank, one_way):
    """Ping-pong, latency 50: rank 0's call takes 100 ticks, rank 1's 50; slowing rank 1 by 32 leaves it under 100.

    The row reports half the round trip, so a fixed delay on rank 0 adds half of it (plus half a tick of reading).
    """
    case = Case("pingpong", "native", 32, 4, "float64", "none", False, 0)
    fault = Fault("slow", rank, "pingpong/native:32", delay_s=32 * TICK)
    rows = run(World(2, latency=50), lambda comm: sweep.run_case(comm, case, settings(min_reps=5, max_reps=5),
                                                                 fault=fault, clock=comm.Wtime))
    assert all(r == rows[0] for r in rows)
    assert rows[0].samples_s == (one_way * TICK,) * 5
    assert SLOWED in rows[0].flags  # the case was slowed, whether or not it shows in the maximum over ranks


def test_a_share_of_a_ping_pong_is_a_share_of_the_one_way_time():
    """25% on rank 0: its round trip of 100 ticks (+1 of reading) gets 25 more, +1 of reading; halved."""
    case = Case("pingpong", "native", 32, 4, "float64", "none", False, 0)
    fault = Fault("slow", 0, "pingpong/native", fraction=0.25)
    rows = run(World(2, latency=50), lambda comm: sweep.run_case(comm, case, settings(min_reps=5, max_reps=5),
                                                                 fault=fault, clock=comm.Wtime))
    assert rows[0].samples_s == ((1 + 100 + 25 + 1) / 2 * TICK,) * 5


# -- pinned by mutation testing (tests/mutation/run.sh) ----------------------------------

def _reduction_sizes(world: World) -> list[int]:
    """The element counts of the Allreduce calls, in order (rank 0's buffers)."""
    return [len(r[0][1]) for r in world._rounds if r[0][0] == "Allreduce"]


def test_each_check_reduces_only_the_new_samples():
    """min_reps 4, max_reps 20, never settling: checks at 4 5 6 7 8 10 12 15 18 20 (~25% more each time)."""
    # n // 4 more samples after a check at n (at least 1): 4+1, 5+1, 6+1, 7+1, 8+2, 10+2, 12+3,
    # 15+3, 18+4 capped at 20.  Each batch reduces its new samples plus the elapsed time;
    # the warm-up's one-element estimate comes first.
    world = World(2, lambda rank, k: 100 if k % 2 else 300)
    samples, stop = measure_world(world, settings(min_reps=4, max_reps=20, target_rse=0.01))
    assert (len(samples), stop) == (20, "max_reps")
    assert _reduction_sizes(world)[1:] == [5, 2, 2, 2, 2, 3, 3, 4, 4, 3]


def test_first_check_comes_after_the_samples_the_budget_holds():
    """Warm-up calls of 1000 ticks, budget 5500: the first check is at int(5.5) = 5 samples."""
    # The timed calls take 2000 ticks, so the five samples are already past the budget at that
    # first check: the loop stops there with 5 (a check at 2 would have stopped it at 3).
    work = [1000, 1000] + [2000] * 20
    world = World(2, lambda rank, k: work[k])
    samples, stop = measure_world(world, settings(min_reps=10, max_reps=50, budget_s=5500 * TICK))
    assert (samples, stop) == ([2000] * 5, "budget")


def test_first_check_is_at_two_samples_at_least():
    """Warm-up calls of 1000 ticks, budget 2500: int(2.5) = 2 samples, past the budget at once (3000 ticks)."""
    work = [1000, 1000] + [1500] * 20
    world = World(2, lambda rank, k: work[k])
    samples, stop = measure_world(world, settings(min_reps=10, max_reps=50, budget_s=2500 * TICK))
    assert (samples, stop) == ([1500] * 2, "budget")


def test_window_start_is_four_call_estimates_ahead():
    """Window sync, warm-up calls of 64 ticks: rank 0 sets each start 4 x 64 = 256 ticks after its reading."""
    # Rank 0 reads its clock right after the previous sample's reading (one tick later), so
    # consecutive starts are that sample's call time + 1 + 256 ticks apart (one check, at the end).
    work = [64, 64, 40, 90, 55, 70, 64, 80]
    world = World(2, lambda rank, k: work[k])
    measure_world(world, settings(sync="window"))
    agreed = [round(v / TICK) for v in world.agreed]
    assert [b - a for a, b in zip(agreed[:-1], agreed[1:], strict=True)] == [w + 1 + 256 for w in work[2:7]]


def test_measure_reads_perf_counter_without_a_clock():
    """No clock given: the loop runs on time.perf_counter (real time), here to max_reps."""
    world = World(2, lambda rank, k: 100)

    def body(comm):
        return measure(comm, functools.partial(world.call, comm.rank), settings(min_reps=3, max_reps=3))

    for samples, stop in run(world, body):
        assert (len(samples), stop) == (3, "max_reps")


def test_timing_settings_from_config_takes_the_six_fields():
    cfg = types.SimpleNamespace(warmup=1, min_reps=2, max_reps=3, target_rse=0.5, budget_s=4.0, sync="window",
                                nranks=8)
    assert TimingSettings.from_config(cfg) == TimingSettings(1, 2, 3, 0.5, 4.0, "window")
    cfg.timing, cfg.iterations = "batched:4", 9
    assert TimingSettings.from_config(cfg) == TimingSettings(1, 2, 3, 0.5, 4.0, "window", batch=4, iterations=9)


# -- batched timing and a fixed count -----------------------------------------------------

def test_a_batched_sample_is_k_back_to_back_calls_divided_by_k():
    """batch 3: a sample is 3 calls back to back, no barrier between them; their sum / 3, max over ranks."""
    # two warm-up calls, then 2 samples x 3 calls; rank 1's calls are slower in the first sample
    table = [[50, 50, 30, 30, 30, 60, 60, 60], [50, 50, 90, 30, 30, 60, 30, 30]]
    world = World(2, scripted(table))
    samples, stop = measure_world(world, settings(min_reps=2, max_reps=2, batch=3))
    assert samples == [150 / 3, 180 / 3] and stop == "max_reps"
    # a barrier only before each batch: the second and third calls start right after the one before
    for r in range(2):
        starts = world.starts[r]
        assert starts[3] - starts[2] == table[r][2] and starts[4] - starts[3] == table[r][3]


def test_batched_window_sync_spans_from_the_agreed_instant_to_the_kth_call():
    world = World(2, lambda rank, k: [64, 64, 40, 20, 90, 10][k], offsets=[0, 999], bcast=11)
    samples, _ = measure_world(world, settings(sync="window", min_reps=2, max_reps=2, batch=2))
    assert samples == [30, 50]


def test_a_fixed_count_takes_exactly_that_many_samples_whatever_the_spread_or_budget():
    """iterations 7: spread that never settles, identical samples, or a budget of 3 samples -- 7 samples each."""
    for work, budget in ((lambda rank, k: 100 if k % 2 else 300, 1.0), (lambda rank, k: 100, 1.0),
                         (lambda rank, k: 100, 330 * TICK)):
        world = World(2, work)
        samples, stop = measure_world(world, settings(min_reps=2, max_reps=3, budget_s=budget, iterations=7))
        assert (len(samples), stop) == (7, "iterations")


def test_rank_means_are_each_rank_s_mean_then_min_avg_max_over_ranks():
    """OSU/IMB statistics: per-rank means of SPREAD's six samples, then their min, average and max."""
    world = World(3, scripted(SPREAD))
    out = [None] * 3

    def body(comm):
        per = {}
        measure(comm, functools.partial(world.call, comm.rank), settings(), clock=comm.Wtime, per_rank=per)
        out[comm.rank] = {k: v / TICK for k, v in per.items()}

    run(world, body)
    means = [np.mean(row[2:]) for row in SPREAD]   # 45, 45, 43.33 ticks
    want = {"rank_mean_min_s": min(means), "rank_mean_avg_s": np.mean(means), "rank_mean_max_s": max(means)}
    for got in out:
        assert got == pytest.approx(want)
    # the maximum over ranks per sample (ccbench's sample) has a larger mean than any rank's own
    assert np.mean([60, 70, 80, 90, 70, 40]) > max(means)


def test_batch_of_reads_the_timing_modes():
    from ccbench.measure.timing import DEFAULT_BATCH, batch_of

    assert batch_of("per-call") == 1 and batch_of("batched") == DEFAULT_BATCH == 10 and batch_of("batched:16") == 16
    for bad in ("batched:0", "batched:x", "perCall", "batched:", "per-call:2"):
        with pytest.raises(ValueError):
            batch_of(bad)
    with pytest.raises(ValueError):
        TimingSettings(batch=0)
    with pytest.raises(ValueError):
        TimingSettings(iterations=0)


def _scripted_clock(monkeypatch, readings):
    """timing's clock reads `readings` (in ticks) in order; the count of readings taken."""
    from ccbench.measure import timing

    it = iter(readings)
    taken = [0]

    def clock():
        taken[0] += 1
        return next(it) * TICK

    monkeypatch.setattr(timing, "_now", clock)
    return timing, taken


def test_timer_resolution_is_the_smallest_step_seen(monkeypatch):
    # trial 1: 0 then 0 (no step yet) then 8: a step of 8; trial 2: 10 then 12: 2; trial 3: 20 then 25: 5
    timing, _ = _scripted_clock(monkeypatch, [0, 0, 8, 10, 12, 20, 25])
    monkeypatch.setattr(timing.time, "get_clock_info",
                        lambda name: types.SimpleNamespace(resolution={"perf_counter": TICK / 4}[name]))
    assert timing.timer_resolution_s(3) == 2 * TICK


def test_timer_resolution_is_at_least_the_clock_s_own(monkeypatch):
    timing, _ = _scripted_clock(monkeypatch, [0, 1, 2, 3])
    monkeypatch.setattr(timing.time, "get_clock_info",
                        lambda name: types.SimpleNamespace(resolution={"perf_counter": 4 * TICK}[name]))
    assert timing.timer_resolution_s(2) == 4 * TICK


def test_timer_resolution_takes_200_trials_by_default(monkeypatch):
    timing, taken = _scripted_clock(monkeypatch, range(1000))
    assert timing.timer_resolution_s() >= TICK
    assert taken[0] == 400


def test_target_rse_of_zero_is_reached_by_identical_samples():
    """The target is inclusive: identical samples (RSE exactly 0) meet target_rse 0 at min_reps."""
    world = World(2, lambda rank, k: 100)
    samples, stop = measure_world(world, settings(min_reps=5, max_reps=50, target_rse=0.0))
    assert (samples, stop) == ([100] * 5, "target_rse")


# -- rounds: a case visited several times is one row of all its visits' samples ----------------

def test_a_case_visited_in_two_rounds_is_one_row_of_both_visits(stand_in_ops):
    """An allreduce of 40 ticks, visited twice; the second visit is slowed by 32 ticks on rank 0 (its calls
    take 40 + 32 + 1, rank 1's 40): the row holds both visits' samples in order, OSU's per-rank means span
    both visits, the row is flagged slowed, and the stop reason is the visits' own."""
    world = World(2, reduce=40)
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    fault = Fault("slow", 0, "allreduce/native", delay_s=32 * TICK)

    def body(comm):
        s = settings(min_reps=6, max_reps=6)
        visits = [sweep.visit_case(comm, case, s, fault=f, clock=comm.Wtime) for f in (None, fault)]
        return visits, sweep.case_row(comm, case, visits, s, min_reps=12)

    out = run(world, body)
    rows = [row for _, row in out]
    assert all(r == rows[0] for r in rows)
    row = rows[0]
    assert [x / TICK for x in row.samples_s] == [40] * 6 + [73] * 6
    assert row.samples == 12 and row.median_s == 56.5 * TICK and row.stop_reason == "max_reps"
    # each rank's own mean over its 12 calls: rank 0 (40 x 6 + 73 x 6) / 12 = 56.5, rank 1 40
    assert (row.rank_mean_min_s / TICK, row.rank_mean_avg_s / TICK, row.rank_mean_max_s / TICK) == (40, 48.25, 56.5)
    assert [len(v.local) for v in out[0][0]] == [6, 6] and row.nwrong == 0 and SLOWED in row.flags
    assert [v.slow for v in out[0][0]] == [False, True]
    # one visit made into a row is what run_case gives
    one = _allreduce_rows(World(2, reduce=40), None)
    assert one.samples_s == (40 * TICK,) * 6 and one.rank_mean_max_s == 40 * TICK


def test_the_stop_reason_of_several_visits_is_the_most_common_the_last_on_a_tie():
    from ccbench.measure.driver import common_stop

    assert common_stop(["budget", "max_reps", "budget"]) == "budget"
    assert common_stop(["budget", "target_rse"]) == "target_rse"
    assert common_stop(["max_reps"]) == "max_reps"


# -- a case's row: traffic, bandwidth, validation, the compiled loop -----------------------

@pytest.mark.parametrize(("collective", "algorithm", "op", "traffic"), [
    # linear gather of 96 B at 3 ranks: ranks 1 and 2 send their 32 B to the root, which receives both
    ("gather", "linear", "none", (2, 64, 1, 32, 2, 64, 0)),
    # ring allreduce of 96 B (24 float32) at 3 ranks: 2 (P - 1) Sendrecv steps of 32 B blocks on each rank
    ("allreduce", "ring", "sum", (12, 384, 4, 128, 4, 128, 64)),
])
def test_the_row_counts_the_traffic_of_one_validating_call(collective, algorithm, op, traffic):
    """msgs_total bytes_total msgs_max bytes_max steps_max step_bytes_max reduced_bytes_max: one call's, not the
    timed calls' (the counters start again before the validating call)."""
    nbytes = 96 if collective == "allreduce" else 32
    case = Case(collective, algorithm, nbytes * (3 if collective == "gather" else 1), nbytes // 4, "float32", op,
                False, 0)
    rows = run(World(3), lambda comm: sweep.run_case(comm, case, settings(min_reps=3, max_reps=3), clock=comm.Wtime))
    assert all(r == rows[0] for r in rows)
    row = rows[0]
    got = (row.msgs_total, row.bytes_total, row.msgs_max, row.bytes_max, row.steps_max, row.step_bytes_max,
           row.reduced_bytes_max)
    assert got == traffic
    assert row.nwrong == 0 and row.samples == 3 and row.stop_reason == "max_reps" and row.loop == "python"


def test_a_hand_written_algorithm_s_wrong_result_is_counted():
    """A linear gather at 3 ranks whose block from rank 2 reaches the root with 1 added: its 8 elements are wrong."""
    case = Case("gather", "linear", 96, 8, "float32", "none", False, 0)

    def corrupt(source, dest, data):
        return data + 1 if source == 2 else data

    rows = run(World(3, tamper=corrupt), lambda comm: sweep.run_case(comm, case, settings(min_reps=3, max_reps=3),
                                                                       clock=comm.Wtime))
    assert rows[0].nwrong == 8 and not rows[0].ok
    assert rows[0].msgs_total == 2  # the traffic is counted all the same


def test_a_native_row_has_no_traffic_and_its_bandwidths(stand_in_ops):
    """allreduce of 64 B at 3 ranks taking 40 ticks: algbw = 64 B / 40 ticks, busbw = algbw x 2 (P - 1) / P."""
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    rows = run(World(3, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime))
    row = rows[0]
    assert (row.msgs_total, row.bytes_total, row.msgs_max, row.bytes_max, row.steps_max, row.step_bytes_max,
            row.reduced_bytes_max) == (None,) * 7
    assert row.algbw_gbs == pytest.approx(64 / (40 * TICK) / 1e9, rel=1e-12)
    assert row.busbw_gbs == pytest.approx(row.algbw_gbs * 4 / 3, rel=1e-12)
    assert (row.collective, row.algorithm, row.nbytes, row.count, row.dtype, row.op, row.in_place, row.root,
            row.nranks) == ("allreduce", "native", 64, 16, "float32", "sum", False, 0, 3)
    assert row.sync == "barrier" and row.timing == "per-call" and row.settings == {} and row.loop == "python"
    assert row.p90_s == 40 * TICK and row.flags == ()


def _visit(samples, stop="max_reps", local=None, nwrong=0, traffic=(0,) * 7, slow=False, compiled=False,
           settings_=None):
    return sweep.Visit(np.array(samples, dtype=float) * TICK, stop,
                       np.array(local if local is not None else samples, dtype=float) * TICK, nwrong, traffic, slow,
                       compiled, settings_ or {})


def test_a_row_of_several_visits_takes_the_last_visit_s_traffic_loop_and_settings_and_all_their_wrongs():
    case = Case("allreduce", "ring", 64, 16, "float32", "sum", False, 0)
    visits = [_visit([10, 30, 20], stop="budget", nwrong=2, traffic=(1, 2, 3, 4, 5, 6, 7), compiled=True,
                     settings_={"A": "1"}),
              _visit([20, 40, 50, 30], stop="budget", local=[20, 40, 50, 5], nwrong=3,
                     traffic=(8, 9, 10, 11, 12, 13, 14), settings_={"B": "2"})]
    row = run(World(1), lambda comm: sweep.case_row(comm, case, visits, settings(min_reps=8, batch=4)))[0]
    assert [x / TICK for x in row.samples_s] == [10, 30, 20, 20, 40, 50, 30] and row.samples == 7
    assert (row.msgs_total, row.bytes_total, row.msgs_max, row.bytes_max, row.steps_max, row.step_bytes_max,
            row.reduced_bytes_max) == (8, 9, 10, 11, 12, 13, 14)
    assert row.nwrong == 5 and row.loop == "python" and row.settings == {"B": "2"} and row.stop_reason == "budget"
    assert row.timing == "batched:4" and row.p90_s == 44 * TICK and SLOWED not in row.flags
    assert row.median_s == 30 * TICK and row.rank_mean_max_s == 25 * TICK  # the locals' mean: 175 / 7
    from ccbench.core.stats import summarize

    want = summarize(np.array([10, 30, 20, 20, 40, 50, 30]) * TICK, min_samples=8)
    assert (row.min_s, row.mean_s, row.p95_s, row.p99_s, row.max_s, row.stddev_s, row.ci_low_s, row.ci_high_s) == (
        want.min_s, want.mean_s, want.p95_s, want.p99_s, want.max_s, want.stddev_s, want.ci_low_s, want.ci_high_s)
    # fewer samples than settings.min_reps (8) unless the case's own minimum says otherwise
    assert "few_samples" in row.flags
    enough = run(World(1), lambda comm: sweep.case_row(comm, case, visits, settings(min_reps=8), min_reps=7))[0]
    assert "few_samples" not in enough.flags and enough.timing == "per-call"
    last_compiled = [visits[1], visits[0]]
    row = run(World(1), lambda comm: sweep.case_row(comm, case, last_compiled, settings(min_reps=7)))[0]
    assert row.loop == "compiled" and row.settings == {"A": "1"} and "few_samples" not in row.flags
    assert row.msgs_total == 1 and SLOWED not in row.flags
    slowed = [visits[0], dataclasses.replace(visits[1], slow=True)]
    assert SLOWED in run(World(1), lambda comm: sweep.case_row(comm, case, slowed, settings()))[0].flags


def test_a_row_of_zero_samples_has_zero_bandwidth():
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    row = run(World(2), lambda comm: sweep.case_row(comm, case, [_visit([0, 0, 0])], settings()))[0]
    assert row.median_s == 0 and row.algbw_gbs == 0.0 and row.busbw_gbs == 0.0


def test_a_ping_pong_row_halves_each_rank_s_mean_too():
    """Latency 50: rank 0's round trip takes 100 ticks; rank 1 waits 50 for the ping, then replies at once."""
    row = _pingpong(World(2, latency=50))
    assert row.rank_mean_max_s == 50 * TICK and row.rank_mean_min_s == 25 * TICK
    assert row.rank_mean_avg_s == 37.5 * TICK


class _Kernel:
    """A compiled loop's kernel of a native allreduce: the call plus a barrier (3 ticks), so its samples show."""

    def __init__(self, comm, args, validate_right):
        self.comm, self.args, self.validate_right, self.timed = comm, args, validate_right, 0

    def __call__(self):
        self.timed += 1
        self.comm.Allreduce(self.args[0], self.args[1], MPI.SUM)
        self.comm.Barrier()

    def call(self):
        if self.validate_right:
            self.comm.Allreduce(self.args[0], self.args[1], MPI.SUM)


class _Loop:
    def __init__(self, validate_right=True):
        self.validate_right, self.asked, self.kernels = validate_right, [], []

    def kernel(self, comm, collective, count, args, kwargs):
        self.asked.append((comm.rank, collective, count, kwargs))
        self.kernels.append(_Kernel(comm, args, self.validate_right))
        return self.kernels[-1]


def test_the_compiled_loop_times_and_validates_a_native_case(stand_in_ops):
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    loop = _Loop()
    rows = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime, loop=loop))
    assert rows[0].samples_s == (43 * TICK,) * 6 and rows[0].loop == "compiled" and rows[0].nwrong == 0
    assert sorted(loop.asked) == [(0, "allreduce", 16, {"op": "sum"}), (1, "allreduce", 16, {"op": "sum"})]
    assert [k.timed for k in loop.kernels] == [8, 8]  # 2 warm-up calls and 6 samples
    # what is validated is the kernel's call: one that does nothing leaves the poison in both ranks' 16 elements
    bad = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime,
                                                              loop=_Loop(validate_right=False)))
    assert bad[0].nwrong == 32 and bad[0].loop == "compiled"


def test_the_compiled_loop_leaves_slowed_and_hand_written_cases_to_python(stand_in_ops):
    loop = _Loop()
    native = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    fault = Fault("slow", 1, "allreduce/native", delay_s=32 * TICK)
    rows = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, native, settings(), fault=fault,
                                                                clock=comm.Wtime, loop=loop))
    assert rows[0].loop == "python" and rows[0].samples_s == (73 * TICK,) * 6 and SLOWED in rows[0].flags
    ring = Case("allreduce", "ring", 64, 16, "float32", "sum", False, 0)
    rows = run(World(2), lambda comm: sweep.run_case(comm, ring, settings(), clock=comm.Wtime, loop=loop))
    assert rows[0].loop == "python" and rows[0].nwrong == 0 and loop.asked == []


def test_a_forced_variant_is_probed_and_its_settings_recorded(stand_in_ops, monkeypatch):
    probed = []
    monkeypatch.setattr(sweep, "current_library", lambda: "mpich")
    monkeypatch.setattr(sweep, "probe", lambda comm, call, library: probed.append((comm.rank, library)))
    case = Case("allreduce", "native:recursive_doubling", 64, 16, "float32", "sum", False, 0)
    rows = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime))
    assert rows[0].settings == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "recursive_doubling"}
    assert sorted(probed) == [(0, "mpich"), (1, "mpich")] and rows[0].nwrong == 0
    visits = run(World(2, reduce=40), lambda comm: sweep.visit_case(comm, case, settings(), clock=comm.Wtime))
    assert visits[0].traffic == (0,) * 7  # a native call's traffic is not counted
    probed.clear()
    plain = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    assert run(World(2, reduce=40), lambda comm: sweep.run_case(comm, plain, settings(),
                                                                clock=comm.Wtime))[0].settings == {}
    assert probed == []


def test_a_forced_variant_the_library_refuses_is_not_timed(stand_in_ops, monkeypatch):
    from ccbench.algorithms.native_variants import NotApplicableError

    def refuse(comm, call, library):
        raise NotApplicableError("MPICH fell back")

    monkeypatch.setattr(sweep, "current_library", lambda: "mpich")
    monkeypatch.setattr(sweep, "probe", refuse)
    case = Case("allreduce", "native:recursive_doubling", 64, 16, "float32", "sum", False, 0)
    world = World(2, reduce=40)
    with pytest.raises(NotApplicableError):
        run(world, lambda comm: sweep.visit_case(comm, case, settings(), clock=comm.Wtime))
    assert world._rounds == []  # no collective: nothing was timed


# -- the sweep's helpers ----------------------------------------------------------------------

def test_the_memory_a_case_needs_is_what_its_buffers_hold():
    """Counted from the buffers themselves: a bcast holds its buffer and the data it checks against (2 buffers),
    an out-of-place allreduce send, receive, input and expected (4), a hand-written one its scratch too (5);
    generating and checking them adds temporaries of a bounded size, not of the buffer's."""
    from ccbench.core.collectives import CHUNK

    big = 1 << 31  # 2 GiB of uint8: the buffer sizes scale from a small probe, nothing this large is allocated
    temps = 24 * CHUNK
    assert sweep.case_bytes(Case("bcast", "native", big + 8, big + 8, "uint8", "none", False, 0), 2) == \
        2 * (big + 8) + temps
    n = 1 << 20
    assert sweep.case_bytes(Case("allreduce", "native", 4 * n, n, "float32", "sum", False, 0), 4) == 4 * 4 * n + temps
    assert sweep.case_bytes(Case("allreduce", "ring", 4 * n, n, "float32", "sum", False, 0), 4) == 5 * 4 * n + temps
    assert sweep.case_bytes(Case("allreduce", "native", 4 * n, n, "float32", "sum", True, 0), 4) == 3 * 4 * n + temps
    assert sweep.case_bytes(Case("barrier", "native", 0, 0, "uint8", "none", False, 0), 4) == 0


def test_check_memory_asks_for_the_largest_case_per_local_rank(monkeypatch):
    asked = []
    monkeypatch.setattr(sweep, "require_memory", lambda *a: asked.append(a))
    small = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    big = Case("bcast", "native", 4096, 512, "float64", "none", False, 0)
    sweep._check_memory([small, big, small], 3, 4)
    assert asked == [(sweep.case_bytes(big, 4) * 3, 3, big.label(), "lower the sizes")]
    sweep._check_memory([], 3, 4)
    assert len(asked) == 1


@pytest.mark.parametrize(("sync", "ranks", "refused"), [("window", 5, True), ("window", 4, False),
                                                       ("barrier", 5, False)])
def test_window_sync_needs_a_core_per_rank(monkeypatch, sync, ranks, refused):
    from ccbench.core.errors import UsageError
    from ccbench.measure import provenance

    monkeypatch.setattr(provenance, "usable_cores", lambda: 4)
    if refused:
        with pytest.raises(UsageError, match=r"^--sync window needs a core per rank \(5 ranks on 4 cores here\); "
                                             "use --sync barrier$"):
            sweep._check_sync(sync, ranks)
    else:
        sweep._check_sync(sync, ranks)


def test_the_selection_record_is_mpich_s_tree_or_nothing(monkeypatch):
    from ccbench.core.errors import CCBenchError
    from ccbench.measure import library

    monkeypatch.setattr(library, "mpich_default_tree", lambda: ({"allreduce": []}, "4.2.0"))
    assert sweep._selection_record("mpich") == {"mpich_selection": {"version": "4.2.0", "tree": {"allreduce": []}}}
    assert sweep._selection_record("openmpi") == {} and sweep._selection_record(None) == {}
    for exc in (CCBenchError("no tree"), OSError("unreadable"), ValueError("bad json")):
        def broken(exc=exc):
            raise exc

        monkeypatch.setattr(library, "mpich_default_tree", broken)
        assert sweep._selection_record("mpich") == {}


def test_a_refused_case_is_a_skip_in_run_json_and_a_note(tmp_path, capsys):
    from ccbench.measure.session import Progress
    from ccbench.store.results import RunWriter

    (tmp_path / "first").mkdir()
    first = RunWriter(tmp_path / "first", {})
    case0 = Case("allreduce", "native", 8, 2, "float32", "sum", False, 0)
    sweep._not_applicable(first, None, case0, "no", 2)  # the first skip of a run.json without any
    assert [e["why"] for e in first.meta["skipped"]] == ["not applicable: no"]
    writer = RunWriter(tmp_path, {"skipped": [{"what": "earlier", "why": "x"}]})
    case = Case("allreduce", "native:recursive_doubling", 64, 16, "float32", "sum", True, 0)
    sweep._not_applicable(writer, Progress(1), case, "MPICH fell back", 4)
    import json

    meta = json.loads((tmp_path / "run.json").read_text())
    assert meta["skipped"] == [{"what": "earlier", "why": "x"}, {
        "what": case.label(), "why": "not applicable: MPICH fell back", "not_applicable": True,
        "collective": "allreduce", "algorithm": "native:recursive_doubling", "nbytes": 64, "dtype": "float32",
        "op": "sum", "in_place": True, "nranks": 4}]
    assert capsys.readouterr().out == f"{case.label()}: not applicable (MPICH fell back)\n"
    sweep._not_applicable(None, None, case, "again", 4)  # another rank: nothing to write or say
    assert capsys.readouterr().out == ""


def test_the_progress_line_of_a_case(stand_in_ops):
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    row = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime))[0]
    us = 40 * TICK * 1e6
    assert sweep._progress_line(case, row) == (
        f"{case.label()}: median {us:.2f} us, busbw {row.busbw_gbs:.3f} GB/s, 6 samples (max_reps), ok")
    wrong = type(row).from_dict({**row.to_dict(), "nwrong": 7})
    assert sweep._progress_line(case, wrong).endswith(", 6 samples (max_reps), WRONG 7")


def test_a_case_and_its_stored_row_have_the_same_key(stand_in_ops):
    case = Case("allreduce", "native", 64, 16, "float32", "sum", False, 0)
    row = run(World(2, reduce=40), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime))[0]
    assert sweep._case_key(case) == sweep._case_key(row) == ("allreduce", "native", 64, "float32", "sum", False, 0)
    assert sweep._case_key(Case("bcast", "native", 8, 1, "float64", "none", 1, 2)) == (
        "bcast", "native", 8, "float64", "none", True, 2)


def test_the_next_check_is_not_set_past_the_budget_s_estimate():
    """Samples of 30000 and 10000 ticks by turns (20000 a sample on average), budget 250000 ticks.

    Checks at 4 5 6 7 8 10 12 as usual (n // 4 more); at 12 the elapsed 240000 ticks leave room
    for int(10000 / 20000) + 1 = 1 more sample, not 3, so the next check is at 13, where the
    elapsed 270000 ticks are past the budget.  (The harness's own ticks, a few per sample, move
    none of these quotients across an integer.)
    """
    world = World(2, lambda rank, k: 10000 if k % 2 else 30000)
    samples, stop = measure_world(world, settings(min_reps=4, max_reps=50, target_rse=0.0, budget_s=250000 * TICK))
    assert (len(samples), stop) == (13, "budget")
    assert _reduction_sizes(world)[1:] == [5, 2, 2, 2, 2, 3, 3, 2]


# -- the compiled loop's sampler: what measure asks of it ----------------------------------------


class _OneRankComm:
    """One rank: a barrier does nothing, a reduction leaves the buffer as it is (MPI.IN_PLACE)."""

    def Barrier(self):
        pass

    def Allreduce(self, sendbuf, recvbuf, op):
        pass


class _ScriptedSampler:
    """A stand-in for ``ccbench.measure.compiled.Sampler``: each clock reading is one second after the last; `take`
    records its arguments and writes sample i as (i + 1) microseconds (the warm-up estimate: 1 us)."""

    def __init__(self):
        self.t, self.calls = 0.0, []

    def now(self):
        self.t += 1.0
        return self.t

    def take(self, local, start, stop, batch, window, gap_s, offset_s):
        self.calls.append(("est" if local.size == 1 else "local", start, stop, batch, window, gap_s, offset_s))
        local[start:stop] = [(i + 1) * 1e-6 for i in range(start, stop)]


def test_a_compiled_sampler_takes_the_warm_up_and_each_batch_and_its_clock_times_the_budget():
    """No Python call is timed: the warm-up is one take of `warmup` calls into the estimate, then one take per batch
    (start, stop, batch size, no window, gap and offset 0); the budget is judged on the sampler's own clock.

    Budget 2.5 s on a clock that moves 1 s a reading: checks at 2 (1 s elapsed), 3 (2 s), 4 (3 s: past the budget)."""
    sampler = _ScriptedSampler()
    samples, stop = measure(_OneRankComm(), sampler, settings(warmup=3, min_reps=2, max_reps=50, target_rse=0.0,
                                                               budget_s=2.5, batch=5))
    assert (samples.tolist(), stop) == ([1e-6, 2e-6, 3e-6, 4e-6], "budget")
    assert sampler.calls == [("est", 0, 1, 3, False, 0.0, 0.0), ("local", 0, 2, 5, False, 0.0, 0.0),
                             ("local", 2, 3, 5, False, 0.0, 0.0), ("local", 3, 4, 5, False, 0.0, 0.0)]


def test_batches_and_fixed_counts_of_one_call_are_allowed_and_below_one_refused():
    from ccbench.measure.timing import batch_of

    assert TimingSettings(batch=1, iterations=1).iterations == 1
    for kw in ({"batch": 0}, {"iterations": 0}):
        with pytest.raises(ValueError, match=r"^batch and iterations must be >= 1$"):
            TimingSettings(**kw)
    assert (batch_of("per-call"), batch_of("batched:1"), batch_of("batched:12")) == (1, 1, 12)
    for bad in ("batched:0", "batched:", "batched:x", "batch:4", "batched:1:2"):
        with pytest.raises(ValueError) as err:
            batch_of(bad)
        assert str(err.value) == f"timing {bad!r}: per-call, batched or batched:K (K >= 1)"


def test_cold_buffers_cycle_through_sets_twice_the_cache_and_validate_like_warm_ones(stand_in_ops, monkeypatch):
    """--buffers cold: each timed call takes the next buffer set (views into one pool per buffer, inputs copied
    from the filled ones), validation runs as for warm buffers; a size whose sets fit in the cache is flagged."""
    llc = 32 << 20
    assert sweep.cold_sets(Case("allreduce", "native", 64 << 20, 16 << 20, "float32", "sum", False, 0), llc) == 2
    assert sweep.cold_sets(Case("allreduce", "native", 4 << 20, 1 << 20, "float32", "sum", False, 0), llc) == 16
    assert sweep.cold_sets(Case("allreduce", "native", 8, 2, "float32", "sum", False, 0), llc) == sweep.MAX_COLD_SETS
    seen = []
    real = sweep.call_of

    def recording(collective, fn, target, *args, **kw):
        call = real(collective, fn, target, *args, **kw)

        def wrapped():
            seen.append(id(args[0]))
            return call()
        return wrapped

    monkeypatch.setattr(sweep, "call_of", recording)
    case = Case("allreduce", "ring", 64, 16, "float32", "sum", False, 0)
    row = run(World(2), lambda comm: sweep.run_case(comm, case, settings(), clock=comm.Wtime))[0]
    assert row.buffers == "warm" and "partly_cached" not in row.flags
    seen.clear()
    visits = run(World(2), lambda comm: sweep.visit_case(comm, case, settings(), clock=comm.Wtime, cold=3,
                                                         llc_bytes=llc))
    assert visits[0].nwrong == 0 and visits[0].cold == 3 and visits[0].partly_cached
    assert len(set(seen)) == 2 * 4  # on each of the two ranks: three sets timed, the case's own buffers validated
    row = run(World(2), lambda comm: sweep.case_row(comm, case, [sweep.visit_case(
        comm, case, settings(), clock=comm.Wtime, cold=3, llc_bytes=llc)], settings()))[0]
    assert row.buffers == "cold" and "partly_cached" in row.flags
    big = run(World(2), lambda comm: sweep.visit_case(comm, case, settings(), clock=comm.Wtime, cold=3,
                                                      llc_bytes=64))[0]
    assert not big.partly_cached  # 3 sets of 64 B are twice a 64 B cache and more
