"""Drive a planned sweep under MPI: buffers, timing, validation, traffic counts, storage.

The run directory, signals, --resume, the watchdog, fault injection and progress are the
session layer's (`ccbench.measure.session`), shared with the workload driver.
"""

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ccbench.algorithms import REGISTRY
from ccbench.algorithms.native import call_of, half_path
from ccbench.algorithms.native_variants import (
    check_environment,
    current_library,
    probe,
    variant_settings,
)
from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import CHUNK, COLLECTIVES
from ccbench.core.dtypes import DTYPES, is_half
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.stats import summarize
from ccbench.measure import compiled
from ccbench.measure.config import Case, Config, all_algorithms, plan
from ccbench.measure.driver import Item, Plan, common_stop, drive
from ccbench.measure.gamma import harness_floor, last_level_cache_bytes, reduction_rates
from ccbench.measure.membw import memory_bandwidth
from ccbench.measure.session import (
    SLOWED,
    Fault,
    agree,
    check_launch,
    local_ranks,
    read_fault,
    require_memory,
)
from ccbench.measure.timing import TimingSettings, measure, rank_means, timer_resolution_s
from ccbench.store.results import Row

__all__ = ["Visit", "case_bytes", "case_row", "run_case", "run_sweep", "visit_case"]


def case_bytes(case: Case, nranks: int, sets: int = 0) -> int:
    """The most memory one rank holds for `case`: its buffers, input templates and expected results (measured on
    the buffers of a small count, scaled to the case's), a hand-written algorithm's scratch (one more buffer),
    the temporaries of making and checking them (``ccbench.core.collectives.CHUNK`` elements at a time), and
    with cold buffers `sets` more copies of the buffers the call takes (`cold_sets`)."""
    coll = COLLECTIVES[case.collective]
    if coll.make_buffers is None or case.count == 0:
        return 0
    probe, dtype = 1024, DTYPES[case.dtype]
    bufs = [coll.buffers(probe, nranks, r, dtype, case.op, case.root, case.in_place, None, case.counts)
            for r in {case.root % nranks, (case.root + 1) % nranks}]
    held = max(b.bytes_held() for b in bufs)
    args = max(sum(a.nbytes for a in b.args if isinstance(a, np.ndarray)) for b in bufs)
    scratch = 0 if REGISTRY[case.collective][case.algorithm].native else case.nbytes
    return (held + sets * args) * case.count // probe + scratch + 24 * CHUNK


def _check_memory(cases: list[Case], local_ranks: int, nranks: int, sets=lambda case: 0) -> None:
    """Refuse, before allocating, a sweep whose largest case would not fit in memory (`sets(case)`: its cold
    buffer sets)."""
    if not cases:
        return
    big = max(cases, key=lambda c: case_bytes(c, nranks, sets(c)))
    require_memory(case_bytes(big, nranks, sets(big)) * local_ranks, local_ranks, big.label(), "lower the sizes")


def _check_sync(sync: str, local_ranks: int) -> None:
    """Refuse window synchronisation on oversubscribed cores.

    Ranks waiting for the common start instant spin on the clock; with more ranks than
    cores they take the CPU from the ranks doing the work and every sample measures the
    scheduler instead of the collective.
    """
    from ccbench.measure.provenance import usable_cores

    cores = usable_cores()
    if sync == "window" and local_ranks > cores:
        raise UsageError(f"--sync window needs a core per rank ({local_ranks} ranks on {cores} cores here); "
                         "use --sync barrier")


@dataclass
class Visit:
    """One visit of a case: its samples and what its validation found (the same on every rank but `local`)."""

    samples: np.ndarray             # per-sample maximum over ranks, seconds
    stop: str                       # what ended the sampling
    local: np.ndarray               # this rank's own call times (OSU's and IMB's per-rank statistics)
    nwrong: int                     # wrong elements over all ranks in the validating call
    traffic: tuple                  # msgs_total, bytes_total, msgs_max, bytes_max, steps_max, step_bytes_max,
    #                                 reduced_bytes_max (hand-written algorithms; zeros for native)
    slow: bool                      # a ``slow`` fault was aimed at the case
    compiled: bool                  # timed and validated by the compiled loop
    settings: dict                  # the forced variant's settings (``variant_settings``)
    cold: int = 0                   # buffer sets the timed calls cycled through (``--buffers cold``; 0: warm)
    partly_cached: bool = False     # cold, but its sets together fit in the last-level cache
    setup_s: float | None = None    # a persistent algorithm's set-up time, the maximum over ranks (seconds)


#: The most buffer sets a cold case cycles through (each a call object of its own).
MAX_COLD_SETS = 64


def cold_sets(case: Case, llc_bytes: int) -> int:
    """How many sets of buffers a case with cold buffers cycles through: enough that together they are twice the
    last-level cache, so that a set is out of cache when its turn comes again (IMB's -off_cache shifts its buffers
    through a region larger than the cache for the same reason: Intel MPI Benchmarks User Guide, "-off_cache"); at
    least 2, at most ``MAX_COLD_SETS`` (small messages: 64 sets of them may still fit in cache, and the row is
    flagged ``partly_cached``)."""
    per = max(case.nbytes, 1)
    return max(2, min(MAX_COLD_SETS, -(-2 * llc_bytes // per)))


def _call(case: Case, alg, target, args, kwargs, frees: list) -> Callable[[], object]:
    """What the timing loop calls for `alg` on these buffers (``call_of``); a persistent algorithm's set-up is made
    here, once (its ``free`` appended to `frees`); a non-blocking one's buffers are bound here, each call one start and
    its wait."""
    if alg.nonblocking is not None:
        begin = alg.nonblocking(target, *args, **kwargs)
        return lambda: begin().Wait()
    if alg.setup is None:
        return call_of(case.collective, alg.fn, target, *args, **kwargs)
    call, free = alg.setup(target, *args, **kwargs)
    frees.append(free)
    return call


def _cold_calls(case: Case, bufs, alg, target, sets: int, frees: list) -> tuple[Callable[[], object], list]:
    """A callable that runs the case on the next of `sets` buffer sets at each call (views into one pool per
    buffer, each set's inputs copied from `bufs`' filled ones), and the pools (to keep them alive)."""
    arrays = [(i, a) for i, a in enumerate(bufs.args) if isinstance(a, np.ndarray)]
    pools = [np.empty((sets,) + a.shape, dtype=a.dtype) for _, a in arrays]
    calls = []
    for j in range(sets):
        args = list(bufs.args)
        for (i, a), pool in zip(arrays, pools, strict=True):
            np.copyto(pool[j], a)
            args[i] = pool[j]
        calls.append(_call(case, alg, target, args, bufs.kwargs, frees))
    turn = itertools.cycle(calls).__next__  # the next set's call: one C-level step inside the timed region

    def call() -> None:
        turn()()

    return call, pools


def visit_case(comm, case: Case, settings: TimingSettings, *, fault: Fault | None = None,
               clock: Callable[[], float] | None = None, loop=None, cold: int = 0,
               llc_bytes: int = 32 << 20) -> Visit:
    """Measure and validate one case on every rank of `comm`, once: a `Visit` (``run_case`` makes the row).

    A ``slow`` `fault` aimed at the case makes its timed calls longer on the fault's ranks
    (``Fault.slowed``; validation runs the plain call) and flags the row ``SLOWED``.
    `clock` reads this rank's time in seconds (default: the timing loop's, time.perf_counter).
    With `loop` (a `ccbench.measure.compiled.CompiledLoop`) a native case is timed and validated
    by the compiled loop (the row's ``loop``: "compiled"); hand-written, persistent, non-blocking and slowed cases
    stay in Python.
    With `cold` > 1 (``--buffers cold``: `cold_sets`) each timed call runs on the next of that many buffer sets,
    in the Python loop; validation runs on the first.
    """
    from mpi4py import MPI

    P, rank = comm.Get_size(), comm.Get_rank()
    coll = COLLECTIVES[case.collective]
    alg = REGISTRY[case.collective][case.algorithm]
    bufs = coll.buffers(case.count, P, rank, DTYPES[case.dtype], case.op, case.root,
                        case.in_place, MPI.IN_PLACE, case.counts)
    # one counting wrapper per communicator for the whole sweep: its scratch arrays and
    # node communicators (hierarchical) are made once, not once per case
    target = comm if alg.native else counted(comm)
    if is_half(case.dtype):  # on every rank alike (the node layout is collective): the algorithm's own additions
        bufs.hold_to(alg.additions_on(comm))
    # native: the bound mpi4py method itself (no Python frame inside the timed region); a persistent algorithm's
    # set-up (``<coll>_init``) made once here and timed apart, the maximum over ranks as for a sample
    frees: list = []
    if alg.setup:
        comm.Barrier()
    start = time.perf_counter()
    call = _call(case, alg, target, bufs.args, bufs.kwargs, frees)
    setup_s = comm.allreduce(time.perf_counter() - start, op=MPI.MAX) if alg.setup else None
    bufs.fill()
    library = current_library() if alg.settings else None
    if alg.settings:  # a forced algorithm of the library: NotApplicableError where it refuses the call
        probe(comm, call, library)
    slow = fault is not None and fault.slows(case.collective, case.algorithm, case.nbytes)
    pools = None
    timed = call
    if cold > 1:
        timed, pools = _cold_calls(case, bufs, alg, target, cold, frees)
    timed = fault.slowed(timed, clock or time.perf_counter) if slow and fault.on(rank) else timed
    kernel = (loop.kernel(comm, case.collective, case.count, bufs.args, bufs.kwargs)
              if loop is not None and alg.native and alg.setup is None and alg.nonblocking is None and not slow
              and cold <= 1 else None)
    local: list = []
    samples, stop = measure(comm, timed if kernel is None else kernel, settings, clock=clock, local_out=local)
    # validation: fresh inputs, poisoned outputs, one more call, exact comparison;
    # the traffic of that call is the traffic of one call
    bufs.fill()
    if not alg.native:
        target.counts.reset()
    comm.Barrier()
    (call if kernel is None else kernel.call)()  # validate what was timed
    c = target.counts.as_tuple() if not alg.native else (0,) * 7
    # c: msgs_sent, bytes_sent, msgs_recv, bytes_recv, steps, step_bytes, reduced_bytes
    total = np.array([bufs.nwrong(), c[0], c[1]], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, total, MPI.SUM)
    mx = np.array([c[0], c[1], c[4], c[5], c[6]], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, mx, MPI.MAX)
    for free in frees:
        free()
    del pools
    return Visit(samples, stop, local[0], int(total[0]), (int(total[1]), int(total[2]), *(int(v) for v in mx)),
                 slow, kernel is not None, variant_settings(alg, library), cold if cold > 1 else 0,
                 cold > 1 and cold * case.nbytes < 2 * llc_bytes, setup_s)


def case_row(comm, case: Case, visits: list[Visit], settings: TimingSettings, timer_res_s: float = 1e-9, *,
             min_reps: int | None = None) -> Row:
    """The row of a case from its visits (one, or one per round), on every rank.

    The samples of the visits are taken together, in the order they were taken; each rank's
    own call times likewise for OSU's per-rank means (``rank_means``: one collective, so every
    rank calls this at the same point).  `settings` are the visits' timing settings; `min_reps`
    the case's minimum over all its visits (default: ``settings.min_reps``).
    """
    P = comm.Get_size()
    coll = COLLECTIVES[case.collective]
    native = REGISTRY[case.collective][case.algorithm].native
    samples = np.concatenate([v.samples for v in visits])
    per_rank = rank_means(comm, np.concatenate([v.local for v in visits]))
    if case.collective == "pingpong":
        samples = samples / 2  # one-way time is half the round trip
        per_rank = {k: v / 2 for k, v in per_rank.items()}
    last = visits[-1]
    s = summarize(samples, timer_resolution_s=timer_res_s,
                  min_samples=settings.min_reps if min_reps is None else min_reps)
    algbw = case.nbytes / s.median_s / 1e9 if s.median_s > 0 else 0.0
    # traffic is counted for hand-written algorithms only; every visit validates the same call
    msgs_total, bytes_total, msgs_max, bytes_max, steps_max, step_bytes_max, reduced_max = (
        (None,) * 7 if native else last.traffic)
    slow = any(v.slow for v in visits)
    return Row(
        collective=case.collective, algorithm=case.algorithm, nbytes=case.nbytes,
        count=case.count, dtype=case.dtype, op=case.op, in_place=case.in_place, root=case.root,
        nranks=P, samples=len(samples), min_s=s.min_s, median_s=s.median_s, mean_s=s.mean_s,
        p95_s=s.p95_s, p99_s=s.p99_s, max_s=s.max_s, stddev_s=s.stddev_s,
        ci_low_s=s.ci_low_s, ci_high_s=s.ci_high_s, algbw_gbs=algbw,
        busbw_gbs=algbw * coll.busbw_factor(P),
        msgs_max=msgs_max, bytes_max=bytes_max, msgs_total=msgs_total, bytes_total=bytes_total,
        steps_max=steps_max, step_bytes_max=step_bytes_max, reduced_bytes_max=reduced_max,
        nwrong=sum(v.nwrong for v in visits), stop_reason=common_stop([v.stop for v in visits]), sync=settings.sync,
        flags=tuple(s.flags) + ((SLOWED,) if slow else ()) + (("partly_cached",) if last.partly_cached else ()),
        settings=last.settings, buffers="cold" if last.cold else "warm", counts=case.counts,
        samples_s=tuple(float(x) for x in samples),
        timing="per-call" if settings.batch == 1 else f"batched:{settings.batch}",
        p90_s=float(np.percentile(samples, 90)), **per_rank, loop="compiled" if last.compiled else "python",
        setup_s=None if last.setup_s is None else max(v.setup_s for v in visits),  # the slowest visit's set-up
    )


def run_case(comm, case: Case, settings: TimingSettings, timer_res_s: float = 1e-9, *, fault: Fault | None = None,
             clock: Callable[[], float] | None = None, loop=None) -> Row:
    """Measure and validate one case on every rank of `comm`; return its row (same on all ranks).

    One ``visit_case`` made into a row (``case_row``); see ``visit_case`` for `fault`, `clock` and `loop`.
    """
    visit = visit_case(comm, case, settings, fault=fault, clock=clock, loop=loop)
    return case_row(comm, case, [visit], settings, timer_res_s)


def _selection_record(library: str | None) -> dict:
    """``{"mpich_selection": {"version", "tree"}}``: the selection tree compiled into the MPICH this run uses.

    Stored with the run so that ``ccbench fit`` and ``predict`` price the unforced ``native``
    rows as this library chose, wherever they run later (``ccbench.analysis.runs``); {} for
    other libraries or where the tree cannot be read.
    """
    if library != "mpich":
        return {}
    from ccbench.measure.library import mpich_default_tree

    try:
        tree, version = mpich_default_tree()
    except (CCBenchError, OSError, ValueError):
        return {}
    return {"mpich_selection": {"version": version, "tree": tree}}


def _not_applicable(writer, progress, case: Case, why: str, nranks: int) -> None:
    """Record a case whose forced algorithm the library refused: a skip in run.json, never a row."""
    if writer is not None:
        entry = {"what": case.label(), "why": f"not applicable: {why}", "not_applicable": True,
                 "collective": case.collective, "algorithm": case.algorithm, "nbytes": case.nbytes,
                 "dtype": case.dtype, "op": case.op, "in_place": case.in_place, "nranks": nranks}
        writer.update(skipped=writer.meta.get("skipped", []) + [entry])
    if progress is not None:
        progress.note(f"{case.label()}: not applicable ({why})", style="yellow")


def _progress_line(case: Case, row: Row) -> str:
    status = "ok" if row.ok else f"WRONG {row.nwrong}"
    return (f"{case.label()}: median {row.median_s * 1e6:.2f} us, busbw {row.busbw_gbs:.3f} GB/s, "
            f"{row.samples} samples ({row.stop_reason}), {status}")


def _case_key(c) -> tuple:
    """What identifies a case (a Case or a stored Row) within one run."""
    return (c.collective, c.algorithm, c.nbytes, c.dtype, c.op, bool(c.in_place), c.root)


def _what_all_stands_for(comm, cfg: Config, resume: Path | None) -> dict | None:
    """The algorithms ``all`` means in this run: those a resumed run was planned with (run.json
    ``all_algorithms``; a run made before it was stored: today's), else today's (`all_algorithms`); None without
    ``all``."""
    if "all" not in cfg.algorithms:
        return None
    from ccbench.store.run import open_run

    def read() -> dict | None:
        if resume is None or comm.Get_rank() != 0:
            return None
        got = open_run(resume).meta.get("all_algorithms")
        if got is not None and not (isinstance(got, dict) and all(
                isinstance(v, list) and all(isinstance(a, str) for a in v) for v in got.values())):
            raise UsageError(f"{resume}/run.json: all_algorithms is not a list of algorithm names per collective")
        return got

    stored = comm.bcast(agree(comm, read), root=0)
    return stored if stored is not None else all_algorithms(cfg.collectives)


def run_sweep(cfg: Config, *, thread: tuple[str, str], argv: list[str], console=None,
              tag: str = "", resume: Path | None = None, launch: int | None = None) -> tuple[int, Path | None]:
    """Run a whole sweep on MPI.COMM_WORLD; return (exit code, run directory on rank 0).

    With `resume`, continue that run directory instead: its finished cases are skipped and
    new rows are appended; it must have been made with the same configuration, rank count
    and MPI library.  `launch` is which of ``cfg.launches`` launches this is (``ccbench
    launch`` merges them): it runs ``cfg.per_launch()``'s share of the samples, in its own
    order (``launch_order``).  With ``cfg.rounds`` R > 1 the launch visits every case R times,
    each round in its own order (``round_orders``) with ``per_round()``'s share of the samples,
    and stores a case's row when its last visit is done: an interrupted launch keeps the cases
    whose every round finished, and ``--resume`` measures the others again, every round
    (`ccbench.measure.driver.drive`).
    """
    from mpi4py import MPI

    from ccbench.core.placement import hierarchy_missing
    from ccbench.measure.provenance import collect, placed

    comm = MPI.COMM_WORLD
    P = comm.Get_size()
    check_launch(comm)
    if cfg.placement == "random":  # its seed drawn once, on rank 0, and kept in the configuration (--resume reuses it)
        import dataclasses
        import secrets

        seed = comm.bcast(secrets.randbelow(2**32) if comm.Get_rank() == 0 else None, root=0)
        cfg = dataclasses.replace(cfg, placement=f"random:{seed}")
    comm, placement = placed(comm, cfg.placement)  # the sweep runs on the re-ranked communicator
    fault = agree(comm, lambda: read_fault(comm.Get_size()))
    prov = collect(comm, cfg.to_dict(), thread, argv)
    topology = prov.get("topology")
    if topology is not None:  # the re-ranked communicator's node map, and how it was re-ranked
        topology["placement"] = placement
    no_hierarchy = hierarchy_missing((topology or {}).get("node_of_rank"))
    every = _what_all_stands_for(comm, cfg, resume)
    cases, skipped = agree(comm, lambda: plan(cfg, P, no_hierarchy, every))
    library = current_library()  # forced variants need their variables set at MPI_Init
    cases, forced_skips = agree(comm, lambda: check_environment(cases, library))
    skipped = skipped + forced_skips
    nlocal = local_ranks(comm)
    llc = last_level_cache_bytes() or (32 << 20)

    def sets(case: Case) -> int:  # --buffers cold: the buffer sets a case's timed calls cycle through
        return cold_sets(case, llc) if cfg.buffers == "cold" else 0

    agree(comm, lambda: _check_memory(cases, nlocal, P, sets))
    agree(comm, lambda: _check_sync(cfg.sync, nlocal))
    settings = TimingSettings.from_config(cfg.per_launch())
    visit_settings = TimingSettings.from_config(cfg.per_launch().per_round())
    timer_res = comm.allreduce(timer_resolution_s(), MPI.MAX)
    # before the run directory: --loop compiled may fail
    loop, loop_record = compiled.choose(comm, cfg.loop,
                                        hand_written=any(not (a := REGISTRY[c.collective][c.algorithm]).native
                                                         or a.setup or a.nonblocking for c in cases))
    pairs = sorted({(c.dtype, c.op) for c in cases if COLLECTIVES[c.collective].reduction})

    def item(case: Case) -> Item:
        return Item(_case_key(case), case.label(), f"{case.collective}/{case.algorithm}:{case.nbytes}",
                    visit_settings.budget_s,
                    lambda: visit_case(comm, case, visit_settings, fault=fault, loop=loop,
                                       **({"cold": sets(case), "llc_bytes": llc} if sets(case) else {})),
                    lambda visits: [case_row(comm, case, visits, visit_settings, timer_res,
                                             min_reps=settings.min_reps)],
                    # the algorithms of one size run back to back (in a random order), sizes in a random order
                    block=(case.collective, case.nbytes, case.dtype, case.op, case.in_place, case.root))

    def before(writer) -> None:
        # the local reduction on each path (the library's, numpy's), warm and cold, and the
        # harness floor, timed on every rank at once before the first case -- with the run
        # directory already made and SIGTERM already turned into a stop between items (a
        # resumed run keeps what it stored); then the node's memory copy bandwidth (STREAM copy),
        # the limit the report holds bus bandwidths against
        extra = {"reduce_local": reduction_rates(comm, pairs),
                 "harness_floor": harness_floor(comm, cfg.collectives, settings),
                 "memory_bandwidth": memory_bandwidth(comm)}
        if writer is not None:
            writer.update(**extra, **_selection_record(library))

    def same_config(stored) -> bool:
        """The stored configuration, with defaults for keys added since it was written, is this one."""
        import json

        from ccbench.measure.config import resolve

        try:
            theirs = resolve(stored).to_dict()
        except UsageError:
            return False
        return json.loads(json.dumps(theirs)) == json.loads(json.dumps(cfg.to_dict()))

    def not_applicable(writer, progress, it: Item, why: str) -> None:
        _not_applicable(writer, progress, by_key[it.key], why, P)

    by_key = {_case_key(c): c for c in cases}
    run_plan = Plan(
        [item(c) for c in cases],
        meta=dict(size_definitions={c: COLLECTIVES[c].size_definition for c in cfg.collectives},
                  timer_resolution_s=timer_res, planned_cases=len(cases),
                  reduce_local=[], harness_floor=None, memory_bandwidth=None,
                  **({"all_algorithms": every} if every is not None else {}),
                  **({"half_types": half} if (half := {d: half_path(DTYPES[d]) for d in cfg.dtypes if is_half(d)})
                     else {})),
        same_config=same_config, summary=lambda r: (_case_key(r), not r.ok),
        progress_line=lambda row: _progress_line(by_key[_case_key(row)], row),
        visit_ok=lambda v: v.nwrong == 0, row_cls=Row, order=cfg.order, seed=cfg.seed, rounds=cfg.rounds,
        watchdog_s=cfg.watchdog_s, fault=fault, before=before,
        # what the plan left out is said again by a resumed run (one planned by `all` may name an algorithm gone since)
        opened={"loop": loop_record, "skipped": [{"what": w, "why": y} for w, y in skipped]},
        not_applicable=not_applicable)
    return drive(comm, run_plan, prov=prov, argv=argv, results_dir=cfg.results_dir, tag=tag, resume=resume,
                 launch=launch, console=console, progress=console is not None)
