"""`ccbench tune`'s view: what the file names per size of each selection, and the verification."""

import math
from collections import Counter
from pathlib import Path

from ccbench.analysis.tune import TuningFile, Verification, file_env
from ccbench.core.errors import UsageError
from ccbench.core.units import format_size
from ccbench.present.table import Column, Styled, Table, to_rich

__all__ = ["fmt_ratio_ci", "print_selections", "print_verification", "selection_table", "verification_table"]


def fmt_ratio_ci(ratio, low=None, high=None) -> str:
    """A ratio with its interval: ``1.25 (0.98-1.59)``; without a finite interval only the ratio."""
    if ratio is None:
        return "-"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{ratio:.3g}"
    return f"{ratio:.3g} ({low:.3g}-{high:.3g})"


def _cmp_cell(c):
    return None if c is None else fmt_ratio_ci(c.ratio, c.ratio_low, c.ratio_high)


def _note(c) -> str:
    notes = []
    if c.within_noise:
        notes.append("toss-up, undetermined" if c.undetermined else "toss-up")
    if c.kept_default:
        notes.append("default kept")
    if c.fastest_any != c.winner and c.fastest_any not in c.times_s:
        notes.append(f"{c.fastest_any} faster, not writable")
    return "; ".join(notes)


def selection_table(s) -> Table:
    """One `ccbench.analysis.tune.Selection`: per size what the file names, the runner-up, the default, the tests."""
    where = f" on {s.shape}" if s.shape is not None and s.shape.nodes > 1 else ""
    t = Table(f"{s.collective} at {s.nranks} ranks{where} ({s.dtype}{'/' + s.op if s.op != 'none' else ''}) "
              f"from run {s.run}: what the file names per size",
              [Column("size", "size"), Column("file names", overflow="fold"), Column("time", "time"),
               Column("runner-up", overflow="fold"), Column("time ", "time"), Column("ratio", align="right"),
               Column("native", "time"), Column("vs native", align="right"), Column("q", "p"),
               Column("K", align="right"), Column("note")],
              caption="time: geometric mean of the launches' medians; ratio: runner-up / what the file names, with "
                      "its 95% interval over launches (Welch on per-launch log-medians, separate jobs); vs native: "
                      "the variant named (or the fastest, where the default stays) / native, and q its p adjusted "
                      "over the collective's variant-against-default comparisons (Benjamini-Hochberg); K: launches "
                      "of what the file names / of the runner-up")
    for c in s.choices:
        note = _note(c)
        t.add_row(c.nbytes, c.winner, c.winner_s, c.runner_up or "-", c.runner_up_s, _cmp_cell(c.vs_runner_up),
                  c.default_s, _cmp_cell(c.vs_default), c.default_q,
                  " / ".join(str(c.launches[a]) for a in (c.winner, c.runner_up) if a in c.launches) or None,
                  Styled(note, "yellow") if c.within_noise else note)
    return t


def print_selections(doc: TuningFile, console) -> None:
    """Every selection of `tune_runs`' `TuningFile`, its size ranges and notes, and where the file went."""
    for s in doc.choice.selections:
        console.print(to_rich(selection_table(s)))
        console.print("  ranges: " + "; ".join(
            f"{format_size(r.lo)}-{format_size(r.hi) if r.hi is not None else 'up'}: {r.algorithm}" for r in s.ranges),
            markup=False, highlight=False)
        for n in s.notes:
            console.print(f"  note: {n}", style="yellow", markup=False, highlight=False)
    for n in doc.choice.notes:
        console.print(f"note: {n}", style="yellow", markup=False, highlight=False)
    for line in answer_lines(doc):
        console.print(line, markup=False, highlight=False)
    side = f" (where it came from: {doc.path}.source.json)" if doc.side else ""
    console.print(f"wrote {doc.path}{side}", markup=False, highlight=False)


def answer_lines(doc: TuningFile) -> list[str]:
    """What the written `TuningFile` changes, per collective and rank count, why each default stayed and what
    would decide it, and the line that makes the library read the file: the answer ``ccbench tune`` ends with."""
    out = []
    for s in doc.choice.selections:
        head = f"{s.collective} at {s.nranks} ranks:"
        changed = [r for r in s.ranges if r.algorithm != "native"]
        if changed:
            out.append(f"{head} the file names " + "; ".join(
                f"{r.algorithm} for {format_size(r.lo)}-{format_size(r.hi) if r.hi is not None else 'up'}"
                for r in changed))
        kept = [c for c in s.choices if c.kept_default and c.vs_default is not None]
        if not kept:
            if not changed:
                out.append(f"{head} the default stays at every size (it was the fastest measured)")
            continue
        best = min(kept, key=lambda c: c.vs_default.ratio)
        k = best.launches_to_decide
        launches = max(best.launches.values(), default=1)
        decide = (f"about {k} launches a side would decide it (this run has {launches})" if k is not None
                  else "no number of launches would decide so small a difference")
        out.append(f"{head} the default stays at {', '.join(format_size(c.nbytes) for c in kept)} "
                   f"(closest: {best.challenger} {1 / best.vs_default.ratio:.3g}x faster at {format_size(best.nbytes)},"
                   f" not decided: q {best.default_q:.2g}); {decide}")
    try:
        env = file_env(doc)
    except UsageError:  # a file this library cannot read (Open MPI's JSON rules before 6.0): its note says so
        env = {}
    if env:
        out.append("use it: export " + " ".join(f"{k}={v}" for k, v in env.items()))
    return out


_BAD = ("worse", "wrong results")
_ODD = ("did not move", "faster, same selection", "undetermined", "not measured")


def verification_table(result: Verification) -> Table:
    """A `ccbench.analysis.tune.Verification`: per size the default without and with the file, the ratio, verdict."""
    t = Table(f"verification of {result.tuning_file}: the library's default without and with the file, "
              f"{result.launches} launches a side alternating (without, with, ...), compared pair by pair; "
              "q: p adjusted over the sizes (Benjamini-Hochberg)",
              [Column("collective"), Column("P", "count"), Column("size", "size"), Column("file names"),
               Column("without", "time"), Column("with file", "time"), Column("with / without", align="right"),
               Column("q", "p"), Column("pairs", "count"), Column("verdict")])
    for r in result.rows:
        style = "red" if r.verdict in _BAD else "yellow" if r.verdict in _ODD else ""
        t.add_row(r.collective, r.nranks, r.nbytes, r.file_choice, r.without_s, r.with_file_s,
                  None if r.ratio is None else fmt_ratio_ci(r.ratio, r.ratio_low, r.ratio_high),
                  r.q_value, r.pairs, Styled(r.verdict, style) if style else r.verdict)
    return t


def print_verification(result: Verification, console) -> None:
    """The `Verification`'s table, the count of each verdict, and the runs and record it wrote."""
    console.print(to_rich(verification_table(result)))
    counts = Counter(r.verdict for r in result.rows)
    console.print(f"{len(result.rows)} sizes: " + ", ".join(f"{n} {v}" for v, n in counts.items()),
                  markup=False, highlight=False)
    for run in result.runs:
        names = [Path(x.run).name for k in range(len(run.without)) for x in (run.without[k], run.with_file[k])
                 if x.run]
        console.print(f"verification runs of {run.source} in {run.dir} (in the order run): " + ", ".join(names),
                      markup=False, highlight=False)
    for record in result.records:
        console.print(f"record: {record}", markup=False, highlight=False)
