"""`ccbench tune`'s view: the fastest variant per size of each selection, and the verification."""

from ccbench.core.units import format_size
from ccbench.present.table import Column, Styled, Table, to_rich

__all__ = ["print_selections", "print_verification", "selection_table", "verification_table"]


def selection_table(s) -> Table:
    """One `ccbench.analysis.tune.Selection`: per size the fastest variant, its runner-up, the default."""
    t = Table(f"{s.collective} at {s.nranks} ranks ({s.dtype}{'/' + s.op if s.op != 'none' else ''}) "
              f"from run {s.run}: fastest variant per size",
              [Column("size", "size"), Column("fastest"), Column("time", "time"), Column("runner-up"),
               Column("time ", "time"), Column("margin", fmt=lambda v: f"{v:.0%}"),
               Column("default (native)", "time"), Column("note")])
    for c in s.choices:
        t.add_row(c.nbytes, c.winner, c.winner_s, c.runner_up or "-", c.runner_up_s or None,
                  c.runner_up_s / c.winner_s - 1 if c.runner_up_s else None, c.default_s or None,
                  "toss-up (CIs overlap)" if c.within_noise else
                  (f"{c.fastest_any} faster, not writable" if c.fastest_any != c.winner else ""))
    return t


def print_selections(doc: dict, console) -> None:
    """Every selection of `tune_runs`' result, its size ranges and notes, and where the file went."""
    for s in doc["selections"]:
        console.print(to_rich(selection_table(s)))
        console.print("  ranges: " + "; ".join(
            f"{format_size(r.lo)}-{format_size(r.hi) if r.hi is not None else 'up'}: {r.algorithm}" for r in s.ranges))
        for n in s.notes:
            console.print(f"  [yellow]note: {n}[/]")
    for n in doc["notes"]:
        console.print(f"[yellow]note: {n}[/]")
    console.print(f"wrote {doc['path']}")


def verification_table(path, rows: list[dict]) -> Table:
    """`ccbench.analysis.tune.verify`'s rows: the default before, the best variant, the default with the file."""
    t = Table(f"verification of {path}: the library's default selection before, the best variant, "
              "and the default with the file",
              [Column("collective"), Column("P", "count"), Column("size", "size"), Column("default before", "time"),
               Column("best variant"), Column("best", "time"), Column("with file", "time"), Column("verdict")])
    for r in rows:
        bad = r["verdict"] in ("did not move", "worse")
        t.add_row(r["collective"], r["nranks"], r["nbytes"], r["default_before_s"] or None, r["best"], r["best_s"],
                  r["with_file_s"] or None, Styled(r["verdict"], "red") if bad else r["verdict"])
    return t


def print_verification(path, rows: list[dict], console) -> None:
    """The verification table and its one-line summary."""
    console.print(to_rich(verification_table(path, rows)))
    stuck = [r for r in rows if r["verdict"] in ("did not move", "worse", "not measured")]
    console.print(f"{len(rows) - len(stuck)} of {len(rows)} sizes at the best variant's time (or already there); "
                  f"verification run: {rows[0]['verify_run'] if rows else '-'}")
