"""`ccbench trace`: the step-by-step schedule and traffic of a hand-written algorithm.

The algorithm runs once on the simulated communicator (`ccbench.algorithms.simcomm`), so no MPI
launcher is needed.  `trace` returns the delivered messages grouped by logical step, the
per-rank counters of the counted point-to-point layer (`ccbench.algorithms.p2p`), the
exact-result check of the collective's buffers, and the algorithm's closed-form cost
beside the counted maximum; `render` prints them with rich.
"""

import inspect
import math
from dataclasses import dataclass

from rich.markup import escape

from ccbench.algorithms import REGISTRY, Cost
from ccbench.algorithms.p2p import CountedComm, Counts, critical_path
from ccbench.algorithms.simcomm import Message, simulate
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.dtypes import dtype_of, ufunc_of
from ccbench.core.errors import UsageError

__all__ = ["MAX_RANKS", "RankCounts", "Trace", "render", "schedule_lines", "trace"]

#: One thread per simulated rank; beyond this a trace is unreadable anyway.
MAX_RANKS = 1024


@dataclass(frozen=True)
class RankCounts:
    """The counters of one rank after the call (see `ccbench.algorithms.p2p.Counts`)."""

    msgs_sent: int
    bytes_sent: int
    msgs_recv: int
    bytes_recv: int
    steps: int
    step_bytes: int
    reduced_bytes: int


@dataclass(frozen=True)
class Trace:
    """One simulated call: its messages, per-rank counts, result check and cost."""

    collective: str
    algorithm: str
    nranks: int
    count: int
    dtype: str
    op: str
    root: int
    in_place: bool
    ranks_per_node: int | None          # simulated nodes for Split_type; None: one node
    nbytes: int                         # the collective's size (nccl-tests definition)
    messages: tuple[Message, ...]       # sorted by (step, source, dest)
    counts: tuple[RankCounts, ...]      # one per rank
    counted: Cost                       # max over ranks of (steps, step_bytes, reduced_bytes)
    critical_path: tuple[int, int]      # (steps, bytes) of the schedule's longest dependent chain
    cost: Cost | None                   # closed form at (nranks, nbytes), if registered
    formula: str
    summary: str
    source: str
    nwrong_per_rank: tuple[int, ...]

    @property
    def nwrong(self) -> int:
        """Output elements differing from the exact result, over all ranks."""
        return sum(self.nwrong_per_rank)

    @property
    def nsteps(self) -> int:
        """The number of logical steps in the schedule (the last message's step)."""
        return max((m.step for m in self.messages), default=0)

    @property
    def agrees(self) -> bool | None:
        """Whether the closed form equals the counted maximum (None without a closed form)."""
        if self.cost is None:
            return None
        return all(math.isclose(c, k, rel_tol=1e-9, abs_tol=1e-9)
                   for c, k in zip(self.cost[:3], self.counted[:3], strict=True))

    def steps(self) -> dict[int, list[Message]]:
        """The messages grouped by logical step, in step order."""
        groups: dict[int, list[Message]] = {}
        for m in self.messages:
            groups.setdefault(m.step, []).append(m)
        return groups


def _handwritten(collective: str) -> list[str]:
    return [name for name, alg in REGISTRY.get(collective, {}).items() if not alg.native]


def _all_choices() -> str:
    parts = [f"{c} ({', '.join(_handwritten(c))})" for c in REGISTRY if _handwritten(c)]
    if not parts:
        return "no hand-written algorithms are registered"
    return "hand-written algorithms: " + "; ".join(parts)


def _resolve(collective: str, algorithm: str):
    """The registered hand-written Algorithm, or a UsageError naming the valid choices."""
    if collective not in REGISTRY:
        raise UsageError(f"unknown collective {collective!r}; {_all_choices()}")
    names = _handwritten(collective)
    alg = REGISTRY[collective].get(algorithm)
    if alg is not None and not alg.native:
        return alg
    if not names:
        raise UsageError(f"{collective} has no hand-written algorithm to trace; {_all_choices()}")
    if alg is not None:
        why = f"{collective}/{algorithm} is the MPI library's own and cannot be simulated"
    else:
        why = f"unknown algorithm {algorithm!r} for {collective}"
    raise UsageError(f"{why}; hand-written choices: {', '.join(names)}")


def _closed_form(alg, nranks: int, nbytes: int, ranks_per_node: int | None) -> Cost | None:
    """alg.cost at (nranks, nbytes); node-aware costs also get `ranks_per_node` when set."""
    if alg.cost is None:
        return None
    if ranks_per_node is not None:
        try:
            params = inspect.signature(alg.cost).parameters
        except (TypeError, ValueError):  # a builtin or C callable: no keyword to pass
            params = {}
        if "ranks_per_node" in params:
            return alg.cost(nranks, nbytes, ranks_per_node=ranks_per_node)
    return alg.cost(nranks, nbytes)


def trace(
    collective: str,
    algorithm: str,
    nranks: int,
    count: int,
    dtype: str = "float32",
    op: str = "sum",
    root: int = 0,
    in_place: bool = False,
    ranks_per_node: int | None = None,
) -> Trace:
    """Run `algorithm` of `collective` once on `nranks` simulated ranks and record it.

    `count` is in elements as the collective's buffers define it (per block for the
    blocked collectives).  `ranks_per_node` groups consecutive ranks into simulated nodes
    for the node-aware algorithms (None: all on one node); it is passed on to a cost
    function that takes a ``ranks_per_node`` keyword.  Bad input raises UsageError;
    a bug in the algorithm (a deadlock, a size mismatch) propagates as the simulator
    raises it.
    """
    alg = _resolve(collective, algorithm)
    coll = COLLECTIVES[collective]
    if not isinstance(nranks, int) or not 1 <= nranks <= MAX_RANKS:
        raise UsageError(f"ranks must be an integer from 1 to {MAX_RANKS}, got {nranks!r}")
    if not isinstance(count, int) or count < 0:
        raise UsageError(f"count must be a non-negative integer, got {count!r}")
    if ranks_per_node is not None and (not isinstance(ranks_per_node, int) or ranks_per_node < 1):
        raise UsageError(f"ranks per node must be a positive integer, got {ranks_per_node!r}")
    dt = dtype_of(dtype)
    ufunc_of(op)
    if coll.rooted:
        if not 0 <= root < nranks:
            raise UsageError(f"root {root} outside 0..{nranks - 1}")
    else:
        root = 0
    why = alg.unsupported(nranks, op)
    if why:
        raise UsageError(f"{collective}/{algorithm} cannot run here: {why}")

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.make_buffers(count, nranks, comm.rank, dt, op, root, in_place, None)
        bufs.fill()
        alg(cc, *bufs.args, **bufs.kwargs)
        return bufs.nwrong(), RankCounts(**{f: getattr(cc.counts, f) for f in Counts.__slots__})

    batches: list = []
    results, messages = simulate(nranks, body, ranks_per_node=ranks_per_node, batches=batches)
    counts = tuple(r[1] for r in results)
    path_steps, path_bytes = critical_path(batches)
    nbytes = coll.nbytes_for(count, dt.itemsize, nranks)
    counted = Cost(
        max(c.steps for c in counts),
        max(c.step_bytes for c in counts),
        max(c.reduced_bytes for c in counts),
    )
    return Trace(
        collective=collective,
        algorithm=algorithm,
        nranks=nranks,
        count=count,
        dtype=dt.name,
        op=op,
        root=root,
        in_place=in_place,
        ranks_per_node=ranks_per_node,
        nbytes=nbytes,
        messages=tuple(messages),
        counts=counts,
        counted=counted,
        critical_path=(path_steps, path_bytes),
        cost=_closed_form(alg, nranks, nbytes, ranks_per_node),
        formula=alg.formula,
        summary=alg.summary,
        source=alg.source,
        nwrong_per_rank=tuple(r[0] for r in results),
    )


# -- rendering ---------------------------------------------------------------------------


def _num(x: float) -> str:
    """An integer-valued number without decimals, others with two; thousands separated."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.2f}"


def _rng(r: tuple[int, int]) -> str:
    return f"[{r[0]}:{r[1]})"


def schedule_lines(
    t: Trace, *, max_lines: int | None = 64, max_messages_per_step: int | None = 16
) -> list[str]:
    """The schedule as text lines, one per message, grouped by step; long ones summarised.

    Whole steps are shown until `max_lines` message lines are used (at least one step);
    within a step at most `max_messages_per_step` messages.  What is left out is counted
    in a closing line.  None means no limit.
    """
    groups = t.steps()
    if not groups:
        return ["no messages (nothing to communicate)"]
    # choose what to show: whole steps (each capped) while the line budget lasts
    shown: list[tuple[int, list[Message], list[Message]]] = []  # step, shown, hidden
    used = 0
    for step, msgs in groups.items():
        cap = len(msgs) if max_messages_per_step is None else min(len(msgs), max_messages_per_step)
        if max_lines is not None and shown and used + cap > max_lines:
            break
        shown.append((step, msgs[:cap], msgs[cap:]))
        used += cap
    vis = [m for _, ms, _ in shown for m in ms]
    w_rank = len(str(t.nranks - 1))
    w_send = max(len(_rng(m.send_range)) for m in vis)
    w_recv = max(len(_rng(m.recv_range)) for m in vis)
    w_bytes = max(len(f"{m.nbytes:,}") for m in vis)
    w_label = len(f"step {shown[-1][0]}:")
    lines: list[str] = []
    for step, msgs, hidden in shown:
        for i, m in enumerate(msgs):
            label = f"step {step}:" if i == 0 else ""
            lines.append(
                f"{label:<{w_label}} rank {m.source:>{w_rank}} -> rank {m.dest:<{w_rank}}  "
                f"elements {_rng(m.send_range):>{w_send}} -> {_rng(m.recv_range):<{w_recv}}  "
                f"{m.nbytes:>{w_bytes},} B"
            )
        if hidden:
            lines.append(f"{'':<{w_label}} ... {len(hidden)} more messages in step {step}, "
                         f"{sum(m.nbytes for m in hidden):,} B")
    left = list(groups)[len(shown):]
    if left:
        rest = [m for s in left for m in groups[s]]
        span = f"step {left[0]}" if len(left) == 1 else f"steps {left[0]}-{left[-1]}"
        lines.append(f"... {span} omitted: {len(left)} steps, {len(rest):,} messages, "
                     f"{sum(m.nbytes for m in rest):,} B")
    return lines


def _counts_table(t: Trace, max_rank_rows: int | None):
    from rich.table import Table

    cols = ("msgs sent", "bytes sent", "msgs recv", "bytes recv", "steps", "step bytes",
            "reduced bytes")
    table = Table(title="per-rank traffic (counted)", title_justify="left")
    table.add_column("rank", justify="right")
    for c in cols:
        table.add_column(c, justify="right")
    shown = t.counts if max_rank_rows is None else t.counts[:max_rank_rows]
    for rank, c in enumerate(shown):
        table.add_row(str(rank), *(f"{v:,}" for v in
                                   (c.msgs_sent, c.bytes_sent, c.msgs_recv, c.bytes_recv,
                                    c.steps, c.step_bytes, c.reduced_bytes)))
    if len(shown) < len(t.counts):
        table.add_row("...", f"{len(t.counts) - len(shown)} more ranks", *[""] * (len(cols) - 1))
    table.add_section()
    mx = [max(getattr(c, f) for c in t.counts) for f in RankCounts.__dataclass_fields__]
    table.add_row("max", *(f"{v:,}" for v in mx), style="bold")
    return table


def _cost_table(t: Trace):
    from rich.table import Table

    table = Table(title="cost per call: closed form vs counted maximum over ranks",
                  title_justify="left")
    for name, just in (("term", "left"), ("closed form", "right"), ("counted max", "right"),
                       ("", "center")):
        table.add_column(name, justify=just)
    terms = ("alpha: steps", "beta: step bytes", "gamma: reduced bytes")
    for i, term in enumerate(terms):
        if t.cost is None:
            table.add_row(term, "-", _num(t.counted[i]), "")
            continue
        ok = math.isclose(t.cost[i], t.counted[i], rel_tol=1e-9, abs_tol=1e-9)
        table.add_row(term, _num(t.cost[i]), _num(t.counted[i]),
                      "[green]ok[/]" if ok else "[red]differs[/]")
    return table


def render(
    t: Trace,
    console,
    *,
    max_lines: int | None = 64,
    max_messages_per_step: int | None = 16,
    max_rank_rows: int | None = 64,
) -> None:
    """Print a Trace on a rich Console: header, schedule, per-rank table, cost, check."""
    coll = COLLECTIVES[t.collective]
    place = "in place" if t.in_place else "out of place"
    extra = [f"root {t.root}"] if coll.rooted else []
    if coll.reduction:
        extra.append(f"op {t.op}")
    if t.ranks_per_node is not None:
        extra.append(f"{t.ranks_per_node} ranks per node")
    console.print(f"[bold]{escape(t.collective)} / {escape(t.algorithm)}[/]: {escape(t.summary)}",
                  highlight=False)
    console.print(
        f"{t.nranks} ranks, count {t.count:,} x {t.dtype}, nbytes {t.nbytes:,} B "
        f"({coll.size_definition}), " + ", ".join([*extra, place]),
        markup=False, highlight=False,
    )
    if t.source:
        console.print(f"source: {t.source}", markup=False, highlight=False)
    console.print()
    console.print(f"[bold]schedule[/]: {t.nsteps} steps, {len(t.messages):,} messages, "
                  f"{sum(m.nbytes for m in t.messages):,} B", highlight=False)
    for line in schedule_lines(t, max_lines=max_lines,
                               max_messages_per_step=max_messages_per_step):
        console.print(line, markup=False, highlight=False)
    console.print()
    console.print(_counts_table(t, max_rank_rows))
    console.print()
    console.print(_cost_table(t))
    if t.cost is None:
        console.print("no closed form registered for this algorithm", highlight=False)
    else:
        console.print(f"formula: {t.formula or '(none given)'}", markup=False, highlight=False)
        if t.agrees:
            console.print("[green]the closed form agrees with the counted traffic[/]")
        else:
            console.print(
                "[yellow]the closed form differs from the counted traffic[/] (closed forms "
                "assume even block splits: try a count divisible by every block count, e.g. "
                "5040 = 7!)", highlight=False,
            )
    steps, nbytes = t.critical_path
    console.print(f"critical path of this schedule (longest chain of dependent steps): {_num(steps)} alpha, "
                  f"{_num(nbytes)} B beta", markup=False, highlight=False)
    if t.cost is not None and t.cost.critical is not None:
        c = t.cost.critical
        console.print(f"closed-form critical path (what predictions use; longer than the busiest rank's own "
                      f"work): {_num(c.alpha)} alpha, {_num(c.beta)} B beta, {_num(c.gamma)} B gamma",
                      markup=False, highlight=False)
    if t.nwrong == 0:
        console.print(f"[green]result exact on all {t.nranks} ranks[/]")
    else:
        bad = [r for r, w in enumerate(t.nwrong_per_rank) if w]
        console.print(f"[red]result wrong: {t.nwrong:,} elements on ranks "
                      f"{', '.join(map(str, bad))}[/]", highlight=False)
