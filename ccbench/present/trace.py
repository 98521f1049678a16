"""`ccbench trace`'s view: a simulated schedule and its traffic (``ccbench.analysis.trace``) as text and tables."""

import math

from rich.markup import escape

from ccbench.algorithms.simcomm import Message
from ccbench.analysis.trace import RankCounts, Trace
from ccbench.core.collectives import COLLECTIVES

__all__ = ["render", "schedule_lines"]


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
    if coll.uneven:
        extra.append(f"counts {t.distribution} (count = the mean block)")
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
