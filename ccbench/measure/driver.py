"""One driver for every kind of run: order, rounds, the run directory, --resume, the loop over items.

A kind of run (a collective sweep, a training workload) plans its items and says how one is
visited and how its visits make rows (a `Plan`); `drive` does the rest the same way for
every kind: the launch's order (``launch_order``: planned, or shuffled in blocks), its rounds
(``round_orders``: each item visited R times, each round in its own order, the row stored
after the last visit), the run directory (new, or a ``--resume``d one with its finished items
skipped), the session (SIGINT/SIGTERM between items, the watchdog, CCBENCH_FAULT, progress,
the machine's load while it measured: run.json's ``load``),
a case the library refuses (``NotApplicableError``: recorded, never a row), a full disk
(every rank stops), and the exit code.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.algorithms.native_variants import NotApplicableError
from ccbench.measure.hardware import cpu_times
from ccbench.measure.session import (
    Fault,
    Progress,
    Session,
    agree,
    launch_order,
    open_run_dir,
    round_orders,
    run_load,
)
from ccbench.store.results import RunWriter, new_run_dir

__all__ = ["Item", "Plan", "common_stop", "drive"]


@dataclass(frozen=True)
class Item:
    """One measured item of a run: what --resume skips, the watchdog names, a fault picks.

    ``visit()`` measures it once on every rank (it may raise ``NotApplicableError``);
    ``rows(visits)`` makes its rows from its visits (one, or one per round), on every rank.
    Items with the same `block` run back to back in a shuffled order.
    """

    key: tuple
    label: str
    fault_name: str
    budget_s: float
    visit: Callable[[], object]
    rows: Callable[[list], list]
    block: tuple | None = None


@dataclass
class Plan:
    """What a kind of run gives `drive`: its items and how its run directory is made and read back."""

    items: list[Item]
    meta: dict                                   # run.json fields of a new run, beyond provenance and order
    same_config: Callable[[dict], bool]          # a stored configuration this run may resume
    summary: Callable[[object], tuple]           # a row -> (its item's key, whether it counts as wrong)
    progress_line: Callable[[object], str | None]  # what progress says of a row (None: nothing)
    visit_ok: Callable[[object], bool]           # a visit validated (rounds before the last)
    row_cls: type
    columns: tuple | None = None
    order: str | None = "planned"                # None: the plan's order, none recorded
    seed: int | None = None
    rounds: int = 1
    watchdog_s: float = 300.0
    fault: Fault | None = None                   # CCBENCH_FAULT, read by every rank (`read_fault`)
    keep: Callable[[list], list] | None = None   # a resumed run's rows to keep (whole items)
    before: Callable[[RunWriter | None], None] | None = None  # measured once, before a new run's first item
    opened: dict = field(default_factory=dict)   # run.json fields set whenever the run is opened
    not_applicable: Callable | None = None       # (writer, progress, item, why): a refused item recorded
    noun: str = "sweep"                          # what the progress bar calls the run
    what: str = "cases"                          # what the exit line calls its rows


def drive(comm, plan: Plan, *, prov: dict, argv: list[str], results_dir, tag: str = "",
          resume: Path | None = None, launch: int | None = None, console=None,
          progress: bool = True) -> tuple[int, Path | None]:
    """Run `plan` on every rank of `comm`; return (exit code, the run directory on rank 0, None elsewhere).

    `launch` is which launch of a replicated run this is (its order's seed); `resume` a run
    directory to continue.  Progress (rank 0, when `progress`) goes to `console`, plain
    lines without one.
    """
    from ccbench.store.run import open_run

    rank, P = comm.Get_rank(), comm.Get_size()
    items, order = list(plan.items), {}
    block = (lambda it: it.block) if any(it.block is not None for it in items) else None
    if plan.order is not None:
        stored = agree(comm, lambda: open_run(resume).meta if resume is not None and rank == 0 else None)
        items, order = launch_order(comm, items, plan.order, plan.seed, launch, comm.bcast(stored, root=0),
                                    block=block)
    rounds = round_orders(items, order, plan.rounds, block)
    if plan.rounds > 1:
        order["rounds"] = plan.rounds

    def start() -> RunWriter:
        return RunWriter(new_run_dir(results_dir, P, tag), dict(prov, **order, **plan.meta), columns=plan.columns)

    writer, finished = open_run_dir(comm, start, resume, prov=prov, argv=argv, same_config=plan.same_config,
                                    row_cls=plan.row_cls, keep=plan.keep, summary=plan.summary)
    if writer is not None and plan.opened:
        writer.update(**plan.opened)
    done = {tuple(key) for key, _ in finished}
    nbad = sum(bool(bad) for _, bad in finished)
    visits = [(r, it) for r, round_items in enumerate(rounds, 1) for it in round_items if it.key not in done]
    bar = Progress(len(visits), console, plan.noun) if writer is not None and progress else None
    session = Session(comm, writer, watchdog_s=plan.watchdog_s, progress=bar, fault=plan.fault)
    session.watch_peers()
    if plan.fault is not None:  # CCBENCH_FAULT's item "start": the run open, its stop signals caught, no item begun
        plan.fault.fire(comm, "start")
    start, end_fields = cpu_times(), {}
    try:
        if resume is None and plan.before is not None:
            plan.before(writer)
        taken: dict[tuple, list] = {}  # the visits of each item so far (rounds > 1)
        refused: set[tuple] = set()
        for r, item in visits:
            if item.key in refused:
                continue
            if session.stop_requested():
                break
            label = item.label + (f" (round {r}/{plan.rounds})" if plan.rounds > 1 else "")
            session.start(label, item.budget_s, item.fault_name)
            try:
                visit = item.visit()
            except NotApplicableError as exc:  # the library refused a forced algorithm: no timing
                session.item_done()
                if plan.not_applicable is not None:
                    plan.not_applicable(writer, bar, item, str(exc))
                refused.add(item.key)
                continue
            taken.setdefault(item.key, []).append(visit)
            if r < plan.rounds:
                session.item_done()
                if bar is not None:  # its figures are the rows', printed after the last round
                    ok = plan.visit_ok(visit)
                    bar.done(label, f"{label}: done" + ("" if ok else ", WRONG"), ok)
                continue
            rows = item.rows(taken.pop(item.key))
            agree(comm, lambda rows=rows: writer.extend(rows) if writer is not None else None)  # a full disk: all stop
            session.item_done()
            for row in rows:
                nbad += bool(plan.summary(row)[1])
                line = plan.progress_line(row) if bar is not None else None
                if line is not None:
                    bar.done(label, line, row.ok)
        session.finished()
        # what else ran on the machine meanwhile (compare withholds verdicts of a run measured under load)
        load = run_load(comm, start)
        end_fields = {"load": load} if load is not None else {}
    finally:
        session.close(failed_cases=nbad, **end_fields)
    return session.exit_code(nbad, plan.what), (writer.path if writer is not None else None)


def common_stop(stops: list[str]) -> str:
    """What ended the sampling of an item visited several times: the reason most of its visits ended on (the last
    of those on a tie)."""
    counts = Counter(stops)
    top = max(counts.values())
    return next(s for s in reversed(stops) if counts[s] == top)
