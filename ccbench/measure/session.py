"""What every measuring run shares, sweeps and workloads alike: opening (or resuming) its run
directory, SIGINT/SIGTERM, the watchdog, fault injection, progress, the memory check, `agree`.

A run is a list of items (a sweep's cases, a workload's measurements) measured one after
the other by every rank.  Rank 0 owns the run directory; every decision that could differ
between ranks (errors, stop requests) is agreed on collectively first, so no rank is ever
left waiting.
"""

import dataclasses
import math
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.units import format_size, parse_size, parse_time
from ccbench.measure.hardware import memory_available
from ccbench.store.results import Row, RunWriter, WriteError, reopen_tables

__all__ = ["FAULT_KINDS", "SLOWED", "Fault", "Progress", "Session", "Watchdog", "agree", "check_launch",
           "launch_order", "local_ranks", "open_run_dir", "read_fault", "require_memory"]


# -- agreement, the launch, memory --------------------------------------------------------


def agree(comm, fn):
    """Run fn() on every rank; if it raises a CCBenchError anywhere, raise it everywhere."""
    err = None
    try:
        result = fn()
    except CCBenchError as exc:
        err, result = exc, None
    errs = comm.allgather(None if err is None else (type(err).__name__, str(err)))
    first = next((e for e in errs if e is not None), None)
    if first is not None:
        raise (UsageError if first[0] == "UsageError" else CCBenchError)(first[1])
    return result


def launch_order(comm, items: list, order: str, seed: int | None, launch: int | None,
                 stored: dict | None = None, block=None) -> tuple[list, dict]:
    """(items in this launch's order, the order's record for run.json), the same on every rank.

    ``order == "shuffled"``: a permutation drawn from numpy's PCG64 with seed ``seed + launch - 1``
    (``seed`` drawn on rank 0 when None), so that drift within a launch and the launch's own
    effect do not line up with algorithms or sizes (Hunold & Carpen-Amarie, "Reproducible MPI
    benchmarking is still not as easy as you think", IEEE TPDS 2016: randomise the order of the
    measurements); the seed is recorded, so an order can be reproduced.  `stored` (a resumed
    run's record) gives its seed back, so a resumed launch continues in its own order.

    `block(item)`, when given, groups the items that are compared with each other (a sweep's
    algorithms at one size): the blocks run in a random order and the items of a block back to
    back, in a random order within it -- a randomised complete block design (Montgomery,
    Design and Analysis of Experiments, ch. 4), so that a comparison inside one launch is not
    blurred by drift between two distant moments of the launch.
    """
    launch = launch or 1
    if order == "planned":
        return list(items), {"order": "planned", "launch": launch}
    if stored and stored.get("order") == "shuffled" and "order_seed" in stored:
        chosen = int(stored["order_seed"])
    else:
        import secrets

        base = seed if seed is not None else (secrets.randbelow(2**32) if comm.Get_rank() == 0 else None)
        chosen = (comm.bcast(base, root=0) + launch - 1) % 2**32
    rng = np.random.default_rng(chosen)
    if block is None:
        return [items[i] for i in rng.permutation(len(items))], {"order": "shuffled", "order_seed": chosen,
                                                                 "launch": launch}
    return _block_permutation(rng, items, block), {"order": "shuffled", "order_seed": chosen, "order_blocks": True,
                                                   "launch": launch}


def _block_permutation(rng, items: list, block) -> list:
    """The blocks of `items` in a random order, the items of each block back to back in a random order."""
    groups: dict = {}
    for it in items:
        groups.setdefault(block(it), []).append(it)
    blocks = list(groups.values())
    return [blk[i] for b in rng.permutation(len(blocks)) for blk in (blocks[b],) for i in rng.permutation(len(blk))]


def round_orders(items: list, record: dict, rounds: int, block=None) -> list[list]:
    """The order of each of `rounds` visits of `items` within one launch; the first is `items` itself.

    `items` is the launch's order and `record` its ``launch_order`` record.  A planned order
    repeats each round; a shuffled one draws round r's permutation (blocks kept, as
    ``launch_order``) from PCG64 seeded with (the launch's seed, r), so the rounds of every
    launch differ and a resumed launch repeats them.  Randomised rounds are what Abedi &
    Brecht's "randomized multiple interleaved trials" prescribe (ICPE 2017).
    """
    out = [list(items)]
    for r in range(2, rounds + 1):
        if record.get("order") != "shuffled":
            out.append(list(items))
            continue
        rng = np.random.default_rng([int(record["order_seed"]), r])
        out.append([items[i] for i in rng.permutation(len(items))] if block is None
                   else _block_permutation(rng, items, block))
    return out


def check_launch(comm) -> None:
    """Refuse a job step of several tasks whose launcher did not wire up MPI (each task alone at rank 0)."""
    ntasks = os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS")
    if comm.Get_size() == 1 and ntasks and ntasks.isdigit() and int(ntasks) > 1:
        raise UsageError(f"this job step has {ntasks} tasks but MPI sees 1 rank each: the launcher "
                         "did not wire up MPI (with srun use --mpi=pmi2 for MPICH, --mpi=pmix for Open MPI)")


def local_ranks(comm) -> int:
    """How many ranks of `comm` share this node (and its memory)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    n = node.Get_size()
    node.Free()
    return n


def run_load(comm, start) -> dict | None:
    """The machine's load over the span since `start` (``ccbench.measure.hardware.cpu_times`` taken on every rank):
    rank 0's node's CPU time, and its ranks' own CPU seconds summed (a collective: every rank calls it).  The
    record (``load_record``) on rank 0, None elsewhere.  Ranks share a node's CPU time by their kernel
    (``machine_id``): the emulated lab's hosts are nodes with names of their own on one machine, whose link
    emulator's CPU time (``CpuTimes.helper``) is the run's own too."""
    from ccbench.measure.hardware import cpu_times, load_record
    from ccbench.measure.provenance import machine_id

    end = cpu_times()
    own = (end.own - start.own) if start is not None and end is not None else 0.0
    mine = comm.allgather((machine_id(), own))
    if comm.Get_rank() != 0:
        return None
    emulator = (end.helper - start.helper) if start is not None and end is not None else 0.0  # once, not per rank
    return load_record(start, end, sum(s for h, s in mine if h == mine[0][0]) + emulator)


def require_memory(need: int, local_ranks: int, what: str, hint: str, root: Path = Path("/")) -> None:
    """Refuse, before allocating, `need` bytes on this node that would not fit in 80% of its free memory.

    Free memory is min(MemAvailable, the cgroup's limit less its usage): a Slurm job's limit counts.
    """
    avail, source = memory_available(root)
    if avail is not None and need > 0.8 * avail:
        raise UsageError(f"{what} needs about {format_size(need)} on this node ({local_ranks} ranks) but only "
                         f"{format_size(avail)} is available"
                         + (f" under {source}" if source != "MemAvailable" else "") + f"; {hint}")


# -- fault injection (for the tests) ------------------------------------------------------

FAULT_KINDS = ("hang", "exit", "term", "slow")

#: Flag of a row measured under a ``slow`` fault (on every rank's copy of the row).
SLOWED = "injected_slow"


@dataclass(frozen=True)
class Fault:
    """A fault injected for the tests: CCBENCH_FAULT="KIND:RANK:ITEM" (RANK a rank number or ``all``).

    Before item ITEM, rank RANK sleeps forever (KIND ``hang``, as a deadlocked algorithm
    or a stuck process would), dies at once without finalising MPI (``exit``, as a
    crashed or OOM-killed process would) or sends itself SIGTERM (``term``, as a batch
    system at its time limit would: the run stops after that item).  ITEM is a sweep
    case as ``COLLECTIVE/ALGORITHM:NBYTES`` (``allreduce/native:64``), a workload
    item as ``WORKLOAD:N``, its number in the run's plan from 1 (``ddp:2``), or ``start``:
    after the run directory is opened, before the first item (what `StartupWatch` guards).

    KIND ``slow`` (sweep cases and diagnoses): ``slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY`` makes
    every timed call of the matching cases (every size without SIZE) longer on rank RANK:
    after the call the rank busy-waits, inside the timed region, for DELAY, a fixed time
    (``5us``, ``delay_s``) or a share of the call's own duration (``20%``: the call is timed,
    then 0.2 x that is spun; ``fraction``); a ping-pong's sample is half its round trip, so
    half a fixed delay shows in it.  The known slowdown is what a comparison must find (the
    benchmarks' power figures); the rows it touches carry the flag ``SLOWED``.  Workload
    items are never slowed.  In a diagnosis (``ccbench doctor``), ``slow:RANK:doctor:DELAY`` makes
    every exchange and collective call of rank RANK longer (a slow rank or host), and
    ``slow:RANK:doctor/PEER:DELAY`` only its pair exchanges with rank PEER (a slow link); there the rank
    sleeps instead of spinning (``ccbench.measure.doctor``).
    """

    kind: str
    rank: int | None  # None: every rank
    item: str         # slow: COLLECTIVE/ALGORITHM or COLLECTIVE/ALGORITHM:NBYTES
    delay_s: float = 0.0
    fraction: float = 0.0
    spec: str = field(default="", compare=False)  # the value of CCBENCH_FAULT, as given

    def on(self, rank: int) -> bool:
        """True when the fault is aimed at `rank`."""
        return self.rank is None or self.rank == rank

    def fire(self, comm, item: str) -> None:
        """Inject a hang/exit/term fault if this is its rank and `item` its item; nothing otherwise."""
        if self.kind == "slow" or not self.on(comm.Get_rank()) or item != self.item:
            return
        if self.kind == "hang":
            while True:
                time.sleep(3600)
        if self.kind == "exit":
            sys.stdout.flush()
            os._exit(3)
        if self.kind == "term":
            signal.raise_signal(signal.SIGTERM)

    def slows(self, collective: str, algorithm: str, nbytes: int) -> bool:
        """True when this is a slow fault aimed at that sweep case (on some rank)."""
        if self.kind != "slow":
            return False
        head, _, last = self.item.rpartition(":")
        if head and last.isdigit():
            return head == f"{collective}/{algorithm}" and int(last) == nbytes
        return self.item == f"{collective}/{algorithm}"

    def slows_exchange(self, rank: int, peer: int | None) -> bool:
        """True when this is a diagnosis's slow fault aimed at `rank`'s exchanges with `peer` (None: a collective)."""
        head, _, who = self.item.partition("/")
        return (self.kind == "slow" and self.on(rank) and head == "doctor"
                and (not who or (peer is not None and int(who) == peer)))

    def slowed(self, call: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> Callable[[], None]:
        """`call` followed by the busy wait, both in one call: what the timing loop times instead of `call`.

        `clock` reads this rank's time in seconds (the timing loop's clock).  A fixed delay
        spins from the end of the call to end + delay_s; a share times the call (a clock
        reading before and after it) and spins fraction x its duration from its end.
        """
        delay_s, fraction = self.delay_s, self.fraction

        def spin_until(end: float) -> None:
            while clock() < end:
                pass

        if fraction:
            def call_then_spin() -> None:
                t0 = clock()
                call()
                t1 = clock()
                spin_until(t1 + fraction * (t1 - t0))
        else:
            def call_then_spin() -> None:
                call()
                spin_until(clock() + delay_s)
        return call_then_spin

    def record(self) -> dict:
        """The fault as run.json records it (provenance: the run was measured under it)."""
        out = {"spec": self.spec, "kind": self.kind, "rank": "all" if self.rank is None else self.rank,
               "item": self.item}
        if self.kind == "slow":
            out.update(delay_s=self.delay_s, fraction=self.fraction)
        return out


_FAULT_USAGE = "expected KIND:RANK:ITEM with KIND one of " + ", ".join(FAULT_KINDS) + " and RANK a rank or all"
_SLOW_USAGE = ("expected slow:RANK:COLLECTIVE/ALGORITHM[:SIZE]:DELAY with DELAY a time (5us) "
               "or a share of each call (20%)")


def _slow_fault(spec: str, rank: int | None, item: str) -> Fault:
    """The slow fault of CCBENCH_FAULT=`spec` (RANK already read; `item` is the rest); bad values refused."""
    from ccbench.algorithms import REGISTRY

    def bad(why: str) -> UsageError:
        return UsageError(f"CCBENCH_FAULT={spec!r}: {why}")

    target, _, delay = item.rpartition(":")
    if not target or not delay:
        raise bad(_SLOW_USAGE)
    name, nbytes = target, None
    head, _, last = target.rpartition(":")
    if head and last[:1].isdigit():  # no algorithm name has a part that starts with a digit
        try:
            name, nbytes = head, parse_size(last)
        except UsageError as exc:
            raise bad(str(exc)) from None
    collective, slash, algorithm = name.partition("/")
    if collective == "doctor" and nbytes is None and (not slash or algorithm.isdigit()):
        pass  # a diagnosis: every exchange of RANK, or those with rank PEER (doctor/PEER)
    elif not slash or not collective or not algorithm:
        raise bad(_SLOW_USAGE)
    elif collective not in REGISTRY:
        raise bad(f"unknown collective {collective!r} (one of {', '.join(REGISTRY)})")
    elif algorithm not in REGISTRY[collective]:
        raise bad(f"{collective} has no algorithm {algorithm!r}")
    delay_s = fraction = 0.0
    if delay.endswith("%"):
        try:
            pct = float(delay[:-1])
        except ValueError:
            raise bad(f"bad share {delay!r}: expected a percentage such as 20%") from None
        if not math.isfinite(pct) or pct < 0:
            raise bad(f"bad share {delay!r}: a share must be a finite percentage >= 0")
        fraction = pct / 100
    else:
        if delay[-1].isdigit() or delay[-1] == ".":  # slow:1:allreduce/ring:64 is a size without a delay
            raise bad(f"bad delay {delay!r}: give a time with its unit (5us, 1ms) or a share (20%)")
        try:
            delay_s = parse_time(delay, "delay")
        except UsageError as exc:
            raise bad(str(exc)) from None
        if not math.isfinite(delay_s):
            raise bad(f"bad delay {delay!r}: a delay must be finite")
    return Fault("slow", rank, name if nbytes is None else f"{name}:{nbytes}", delay_s, fraction, spec)


def read_fault(nranks: int | None = None) -> Fault | None:
    """The fault CCBENCH_FAULT asks for, None when it is unset; a malformed value, or one aimed at a rank the
    job of `nranks` ranks does not have (it would never fire), is refused."""
    spec = os.environ.get("CCBENCH_FAULT")
    if not spec:
        return None
    kind, _, rest = spec.partition(":")
    rank, _, item = rest.partition(":")
    if kind not in FAULT_KINDS or not (rank.isdigit() or rank == "all") or not item:
        raise UsageError(f"CCBENCH_FAULT={spec!r}: {_FAULT_USAGE}")
    which = None if rank == "all" else int(rank)
    if which is not None and nranks is not None and which >= nranks:
        raise UsageError(f"CCBENCH_FAULT={spec!r}: rank {which} does not exist with {nranks} ranks, so it would "
                         "never fire")
    if kind == "slow":
        return _slow_fault(spec, which, item)
    return Fault(kind, which, item, spec=spec)


# -- signals ------------------------------------------------------------------------------

_SIGNALLED: list[int] = []
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    _SIGNALLED.append(signum)


# -- the watchdog -------------------------------------------------------------------------


def process_start(pid: int) -> str | None:
    """Process `pid`'s start time as this host's /proc gives it (field 22 of /proc/PID/stat, clock ticks after
    boot): with the id, what tells one process from a later one with the same id, or from a process of another
    PID namespace (a container) that has that number here.  None where it cannot be read or has ended (a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) ": state, ppid, ... starttime is the 20th
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return fields[19].decode()


def process_gone(pid: int, start: str | None = None) -> bool:
    """Whether process `pid` of this host has ended: gone, a zombie its parent has not reaped yet, or (given its
    `start`, `process_start`) replaced by another process with the same id."""
    now = process_start(pid)
    if now is None:
        return True
    return start is not None and now != start


#: How often a rank's watchdog reads /proc for the other ranks of its node: each read takes the interpreter lock
#: from a timing loop for tens of microseconds per peer, so not at every half-second wake-up (a dead peer is then
#: found within two checks, 2-4 s).
PEER_CHECK_S = 2.0
#: How often a watchdog wakes to look at the clock.
WAKE_S = 0.5
PEER_CHECK_TICKS = int(PEER_CHECK_S / WAKE_S)


class Watchdog:
    """Ends the job when an item outlives its deadline, naming the item, instead of hanging -- or when a rank
    of this node has ended while the others measure.

    A daemon thread on every rank.  When the item in progress passes its deadline it
    prints one line, marks the run failed (rank 0, which owns run.json; finished rows
    are already on disk) and leaves the process with exit code 3 without finalising
    MPI, so the launcher tears the whole job down.  0 seconds: no watchdog.

    Peers (`watch_peers`: the other ranks of this node, by process id) are checked every
    ``PEER_CHECK_S`` while an item is in progress: a rank that crashed or was killed leaves the others
    waiting inside a collective for ever where the launcher does not end them (MPICH's
    hydra did not, now and then, here; srun without --kill-on-bad-exit never does).  Seen
    gone at two checks in a row, the job is ended the same way, naming the rank.
    """

    def __init__(self, seconds: float, nranks: int, rank: int, writer=None) -> None:
        self.seconds, self.nranks, self.writer = seconds, nranks, writer
        # rank 0 speaks and records the failure; the others follow a little later, in
        # case rank 0 itself cannot (then they end the job silently)
        self.grace = 0.0 if rank == 0 else 5.0
        self.rank = rank
        self.label: str | None = None
        self.deadline = float("inf")
        self.peers: dict[int, tuple[int, str | None]] = {}  # rank -> (process id, start), other ranks of this node
        self._busy = False  # an item is in progress (peers are checked only then)
        self._gone: set[int] = set()  # peers seen gone at the last peer check
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ccbench-watchdog", daemon=True)
        if seconds > 0:
            self._thread.start()

    def watch_peers(self, peers: dict[int, tuple[int, str | None]]) -> None:
        """Check these ranks (rank -> (process id, its `process_start`), on this node) while items are in
        progress."""
        self.peers = dict(peers)

    def start(self, label: str, budget_s: float, now: float | None = None) -> None:
        """Arm the deadline for the item `label`: the watchdog time plus the item's own budget, from `now` (monotonic
        seconds; by default the clock's)."""
        now = time.monotonic() if now is None else now
        self.label, self.deadline, self._busy = label, now + self.seconds + budget_s, True

    def idle(self) -> None:
        """The item is done on this rank (its rows are written): peers may leave from here on."""
        self._busy = False

    def stop(self) -> None:
        """End the watch (the run is over)."""
        self._busy = False
        self._stop.set()

    @property
    def running(self) -> bool:
        """Whether the watch's thread is alive (a watchdog of 0 seconds never starts one)."""
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the watch's thread to end after `stop` (at most `timeout` seconds)."""
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def check(self, now: float, peers: bool = True) -> str | None:
        """Why the job must end at monotonic time `now`, or None.

        The item in progress is past its deadline (plus the grace of a rank other than 0); or, where `peers` (a peer
        check is due: every ``PEER_CHECK_S``) and an item is in progress, a peer was seen gone at this check and
        at the one before.
        """
        if now > self.deadline + self.grace and self.label is not None:
            return (f"watchdog: {self.label} at {self.nranks} ranks did not finish within {self.seconds:g} s past its "
                    "budget; ending the job")
        if not peers:
            return None
        gone = {r for r, (pid, start) in self.peers.items() if process_gone(pid, start)} if self._busy else set()
        seen, self._gone = self._gone, gone
        for r in sorted(gone & seen):
            return (f"rank {r} (process {self.peers[r][0]}) ended during {self.label}: a rank crashed, was killed or "
                    "aborted, leaving the others waiting; ending the job")
        return None

    def end(self, why: str) -> None:
        """End the job: say `why` (rank 0, flushed: ``os._exit`` flushes nothing), mark the run failed (rank 0,
        which owns run.json; finished rows are on disk already), leave with exit code 3 without finalising MPI."""
        if self.rank != 0:
            os._exit(3)
        print(f"ccbench: error: {why}", file=sys.stderr, flush=True)
        if self.writer is not None:
            try:
                self.writer.update(status="failed", failure=why, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                   finished_cases=self.writer.rows)
            except OSError:
                pass
        os._exit(3)

    def _watch(self) -> None:
        ticks = 0
        while not self._stop.wait(WAKE_S):
            ticks += 1
            why = self.check(time.monotonic(), peers=ticks % PEER_CHECK_TICKS == 0)
            if why:
                self.end(why)


class StartupWatch:
    """Ends a rank that has not begun its first item within `seconds` of starting (MPI start-up, planning,
    provenance, calibration), instead of hanging the job before the per-item `Watchdog` is armed.

    A thread cannot do it: MPI_Init runs inside the import of mpi4py.MPI with the interpreter
    lock held, and a rank stuck there runs no Python.  So a watcher process is forked before
    MPI starts (one thread, nothing of MPI's yet): it waits on a pipe whose writing end only
    this rank holds.  The rank closes it when its first item begins (`reached`), or by
    exiting; the watcher sees end of file and leaves.  If the deadline passes first, the
    watcher of rank 0 (or of a rank whose number the launcher did not say) prints one line;
    every watcher, the others 5 s later (rank 0 speaks first), kills its rank with SIGKILL,
    and the launcher ends the job (its run, if one was opened, is marked failed).
    0 seconds: no watcher.
    """

    def __init__(self, seconds: float, rank: int | None, what: str = "item") -> None:
        self._w: int | None = None
        if not seconds > 0:
            return
        r, w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the watcher: nothing of the parent's Python state is used, and it leaves by os._exit
            try:
                os.close(w)
                grace = 0.0 if rank in (None, 0) else 5.0
                ready, _, _ = select.select([r], [], [], seconds + grace)
                if not ready:
                    if rank in (None, 0):
                        who = "rank 0" if rank == 0 else "a rank"
                        os.write(2, (f"ccbench: error: watchdog: {who} did not begin its first {what} within "
                                     f"{seconds:g} s of starting (stuck starting MPI or planning); ending the job\n")
                                 .encode())
                    os.kill(parent, signal.SIGKILL)
            finally:
                os._exit(0)
        os.close(r)
        self._w = w

    def reached(self) -> None:
        """The first item begins: the watcher leaves (a second call does nothing)."""
        if self._w is not None:
            w, self._w = self._w, None
            os.close(w)


#: The start-up watch of this process (`watch_startup`), released by the first `Session.start`.
_STARTUP: list[StartupWatch] = []


#: The least time a rank gets to begin its first item (MPI start-up at scale, building the compiled loop and the
#: calibrations take tens of seconds): a small --watchdog, meant for items, does not cut start-up short.
STARTUP_MIN_S = 60.0

#: Environment variable that sets the start-up limit in seconds instead (0: no start-up watch).
STARTUP_ENV = "CCBENCH_STARTUP_WATCHDOG"


def watch_startup(watchdog_s: float, what: str = "item") -> StartupWatch:
    """Start this rank's `StartupWatch` (before MPI starts); the session releases it at its first item.

    Its limit: ``CCBENCH_STARTUP_WATCHDOG`` seconds when set, else the run's watchdog time but at
    least ``STARTUP_MIN_S``; none when the watchdog is off (0).
    """
    from ccbench.measure.provenance import env_rank

    seconds = max(watchdog_s, STARTUP_MIN_S) if watchdog_s > 0 else 0.0
    given = os.environ.get(STARTUP_ENV)
    if given:
        try:
            seconds = float(given)
        except ValueError:
            raise UsageError(f"{STARTUP_ENV}={given!r}: expected seconds, e.g. 600") from None
        if not (math.isfinite(seconds) and seconds >= 0):
            raise UsageError(f"{STARTUP_ENV}={given!r}: expected seconds >= 0")
    watch = StartupWatch(seconds, env_rank(), what)
    _STARTUP.append(watch)
    return watch


def startup_reached() -> None:
    """Release this process's start-up watch, if any (the first item begins, or a command needs none)."""
    while _STARTUP:
        _STARTUP.pop().reached()


# -- progress -----------------------------------------------------------------------------


class Progress:
    """A rich progress bar on a terminal, one plain line per item otherwise (batch jobs)."""

    def __init__(self, total: int, console=None, what: str = "sweep") -> None:
        self.console, self.total, self.i = console, total, 0
        self.bar = None
        if console is not None and console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            # elapsed, then the time left at the pace so far (rich's estimate over the recent items)
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("left"),
                                TimeRemainingColumn(), console=console, transient=True)
            self.task = self.bar.add_task(what, total=total)
            self.bar.start()

    def done(self, label: str, line: str, ok: bool) -> None:
        """Item `label` finished: `line` says how it went (shown beside the bar only when not `ok`)."""
        self.i += 1
        line = f"[{self.i}/{self.total}] {line}"
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=label)
            if not ok:
                self.console.print(line, style="red")
        else:
            print(line, flush=True)

    def note(self, text: str, style: str = "") -> None:
        """A line beside the progress (an item skipped, ...)."""
        if self.console is not None:
            self.console.print(text, style=style or None)
        else:
            print(text, flush=True)

    def stop(self) -> None:
        """Take the bar off the terminal."""
        if self.bar is not None:
            self.bar.stop()


# -- the run directory: new or resumed ----------------------------------------------------


def _columns(row_cls) -> list[str]:
    return [f.name for f in dataclasses.fields(row_cls) if f.name != "samples_s"]


def _reopen(path: Path, *, prov: dict, argv: list[str], same_config: Callable[[dict], bool], row_cls,
            keep: Callable[[list], list] | None) -> tuple[RunWriter, list]:
    """Rank 0: take the run's lock, check that `path` may be continued here, then reopen it for appending."""
    from ccbench.store.lock import RunLock
    from ccbench.store.run import open_run

    kinds = (getattr(row_cls, "KIND", "sweep"),)
    if not (path / "run.json").is_file():  # not a run: say so before a lock file is made in it
        open_run(path, kinds=kinds, what="--resume")
    lock = RunLock(path).acquire()  # no other writer: a second --resume, or the job still running it
    try:
        run = open_run(path, kinds=kinds, what="--resume")  # read as the lock's holder
        writer, rows = _reopen_locked(path, run.meta, run.rows, lock, prov=prov, argv=argv,
                                      same_config=same_config, row_cls=row_cls, keep=keep)
    except BaseException:
        lock.release()
        raise
    return writer, rows


def _reopen_locked(path: Path, meta: dict, rows: list, lock, *, prov: dict, argv: list[str],
                   same_config: Callable[[dict], bool], row_cls, keep) -> tuple[RunWriter, list]:
    if meta.get("status") == "complete":  # nothing to continue: left exactly as it is
        raise UsageError(f"{path} is complete: nothing to resume (start a new run to measure again)")
    for what, old, new in (("rank count", meta.get("nranks"), prov["nranks"]),
                           ("MPI library", meta.get("mpi_library"), prov["mpi_library"])):
        if old != new:
            raise UsageError(f"cannot resume {path}: its {what} was {old!r}, now {new!r}")
    if not same_config(meta.get("config")):
        raise UsageError(f"cannot resume {path}: it was made with another configuration")
    if keep is not None:
        rows = keep(rows)
    reopen_tables(path, rows, _columns(row_cls))
    meta["resumed"] = meta.get("resumed", []) + [{"time": prov["start_time"], "argv": argv,
                                                  "finished_before": len(rows),
                                                  "status_before": meta.get("status"),
                                                  "failure_before": meta.pop("failure", None),
                                                  "signal_before": meta.pop("signal", None)}]
    columns = None if row_cls is Row else _columns(row_cls)
    return RunWriter(path, meta, rows=len(rows), columns=columns, lock=lock), rows


def open_run_dir(comm, new: Callable[[], RunWriter], resume: Path | None, *, prov: dict, argv: list[str],
                 same_config: Callable[[dict], bool], summary: Callable, row_cls=Row,
                 keep: Callable[[list], list] | None = None) -> tuple[RunWriter | None, list]:
    """Open the run's directory on rank 0, agreed by every rank: a new one, or `resume` continued.

    `new()` makes a new run directory.  With `resume`, that run is continued instead: it
    must have been made with the same rank count and MPI library (`prov`) and a
    configuration `same_config` accepts; `keep(rows)` may cut unfinished rows off its
    end (a torn last line always is).  Returns (the writer on rank 0, None elsewhere;
    on every rank `summary(row)` of each row the run already has).
    """
    rank = comm.Get_rank()
    if resume is None:
        return (agree(comm, new) if rank == 0 else agree(comm, lambda: None)), []

    def reopen():
        writer, rows = _reopen(Path(resume), prov=prov, argv=argv, same_config=same_config, row_cls=row_cls,
                               keep=keep)
        return writer, [summary(r) for r in rows]

    opened = agree(comm, reopen) if rank == 0 else agree(comm, lambda: None)
    finished = comm.bcast(None if opened is None else opened[1], root=0)
    return (opened[0] if opened is not None else None), finished


# -- the loop over items ------------------------------------------------------------------


class Session:
    """The loop of one run over its items, on every rank: stop requests, watchdog, faults, final status.

    ::

        session = Session(comm, writer, watchdog_s=..., progress=..., fault=...)
        try:
            for item in items:
                if session.stop_requested():
                    break
                session.start(label, budget_s, fault_name)
                ...  # measure, append its rows, session.progress.done(...)
            session.finished()
        finally:
            session.close(failed_cases=...)
        return session.exit_code(failed, "cases")

    SIGINT and SIGTERM stop the run between items: every finished row stays and run.json
    says ``interrupted`` (with the signal); an exception leaves it ``failed``.
    """

    def __init__(self, comm, writer: RunWriter | None, *, watchdog_s: float, progress: Progress | None = None,
                 fault: Fault | None = None) -> None:
        self.comm, self.writer, self.progress, self.fault = comm, writer, progress, fault
        self.stopped = 0
        self.status = "failed"
        self._flag = np.zeros(1, dtype=np.int64)
        _SIGNALLED.clear()
        self._handlers = {s: signal.signal(s, _on_signal) for s in _STOP_SIGNALS}
        self.watchdog = Watchdog(watchdog_s, comm.Get_size(), comm.Get_rank(), writer)
        if writer is not None and fault is not None:  # provenance: the run was measured under it
            writer.update(fault=fault.record())

    def watch_peers(self) -> None:
        """Have the watchdog check the other ranks of this node while items run (`Watchdog.watch_peers`); a
        collective: every rank calls it.  Only peers this rank can see as themselves are watched: same host
        name, and the process of that id here started when the peer says it did (ranks in containers of their
        own, or without /proc, are left to the launcher)."""
        if self.comm.Get_size() > 1:
            here = (socket.gethostname(), os.getpid(), process_start(os.getpid()))
            self.watchdog.watch_peers({r: (pid, start) for r, (host, pid, start) in enumerate(self.comm.allgather(here))
                                       if host == here[0] and r != self.comm.Get_rank() and start is not None
                                       and process_start(pid) == start})

    def stop_requested(self) -> bool:
        """True on every rank at once when any rank has received SIGINT or SIGTERM."""
        from mpi4py import MPI

        self._flag[0] = _SIGNALLED[0] if _SIGNALLED else 0
        self.comm.Allreduce(MPI.IN_PLACE, self._flag, MPI.MAX)
        if self._flag[0]:
            self.stopped = int(self._flag[0])
        return bool(self.stopped)

    def start(self, label: str, budget_s: float, fault_name: str) -> None:
        """An item begins: release the start-up watch, arm the watchdog with its budget; inject the fault aimed at
        it, if any."""
        startup_reached()
        self.watchdog.start(label, budget_s)
        if self.fault is not None:
            self.fault.fire(self.comm, fault_name)

    def item_done(self) -> None:
        """The item is over on this rank (measured and written, or refused): peers may end from here on."""
        self.watchdog.idle()

    def finished(self) -> None:
        """The loop is over without an error: the run is complete, or interrupted if a stop was requested."""
        self.status = "interrupted" if self.stopped else "complete"

    def close(self, **fields) -> None:
        """Stop the watchdog and the progress, restore the signal handlers, write the final status (rank 0)."""
        self.watchdog.stop()
        if self.progress is not None:
            self.progress.stop()
        for s, h in self._handlers.items():
            signal.signal(s, h)
        if self.writer is not None:
            try:  # a full disk may refuse run.json too: it keeps its last state, the lock is given back all the same
                self.writer.update(status=self.status, end_time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                   finished_cases=self.writer.rows, **fields,
                                   **({"signal": signal.Signals(self.stopped).name} if self.stopped else {}))
            except WriteError:
                if self.status != "failed":  # the loop ended well: this is the error to report
                    raise
                # failed: the error that ended the loop is on its way out and says more than this one
            finally:
                self.writer.close()

    def exit_code(self, failed: int, what: str = "cases") -> int:
        """128 + the signal when stopped (rank 0 says how many `what` it kept), 1 when `failed` were wrong, else 0."""
        if self.stopped:
            if self.writer is not None:
                n = self.writer.rows
                print(f"ccbench: stopped by {signal.Signals(self.stopped).name}; {n} finished "
                      f"{what[:-1] if n == 1 else what} kept in {self.writer.path}", file=sys.stderr)
            return 128 + self.stopped
        return 1 if failed else 0
