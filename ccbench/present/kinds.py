"""What each kind of run shows: its terminal view and its report (a `KindView`, named by its ``RunKind``).

The commands open a run once (``ccbench.store.run.open_run``) and hand it here; nothing
downstream asks run.json again which kind it is.
"""

from collections.abc import Callable
from dataclasses import dataclass

from ccbench.present.generic import generic_report, no_figures_line, png_count, report_summary, show_generic
from ccbench.present.report import build_sweep_report, fastest_table
from ccbench.present.table import Column, render, to_rich
from ccbench.present.views import launch_notes, launch_tables, run_header, show_sweep
from ccbench.present.workload_report import build_workload_report
from ccbench.present.workload_views import show_workload, workload_tables
from ccbench.store.kinds import kind_named
from ccbench.store.run import open_run

__all__ = ["SWEEP_VIEW", "WORKLOAD_VIEW", "KindView", "view_of", "fastest_table", "print_report", "show_run"]


def _sweep_summary(res, console) -> None:
    rows = res.run.rows or []
    if any(r.n_launches > 1 for r in rows):
        render([*launch_tables(rows), *launch_notes(rows)], console)
    for label, entries in res.fastest.items():
        if entries and any(e.runner_up is not None for e in entries):
            console.print(to_rich(fastest_table(
                f"fastest per size: {label} (runner-up compared at the launch level)", entries,
                Column("size", "size"), lambda e: e.nbytes)))
    for note in res.fit.notes:
        console.print(f"[yellow]note: {note}[/]")
    no_figures_line(res, console)
    console.print(f"wrote report.md, report.html (figures embedded), {png_count(res)} PNG figures and fits.json "
                  f"in {res.dir}")


def _workload_summary(res, console) -> None:
    render(workload_tables(res.run.meta, res.run.rows, calls=False), console)  # the per-call tables are in the report
    for w, entries in res.fastest.items():
        if entries and any(e.runner_up is not None for e in entries):
            console.print(to_rich(fastest_table(f"fastest: {w} (runner-up compared at the launch level)",
                                                entries, Column("among"), lambda e: e.what)))
    no_figures_line(res, console)
    console.print(f"wrote report.md, report.html (figures embedded) and {png_count(res)} PNG figures in {res.dir}")


@dataclass(frozen=True)
class KindView:
    """How a kind of run is shown: ``show(run, console, show_table, brief=...)``, ``report(run) -> Report`` (the
    page's files, unwritten) and ``summary(report, console)`` (what ``ccbench report`` prints once written)."""

    show: Callable
    report: Callable
    summary: Callable


SWEEP_VIEW = KindView(show_sweep, build_sweep_report, _sweep_summary)
WORKLOAD_VIEW = KindView(show_workload, build_workload_report, _workload_summary)


def view_of(kind: str) -> KindView:
    """How runs of `kind` are shown and reported: its ``RunKind.view``, else the generic view (its rows as one
    table, ``ccbench.present.generic``)."""
    return kind_named(kind).get("view") or KindView(show_generic, generic_report, report_summary)


def print_report(res, console) -> None:
    """What ``ccbench report`` prints about the `Report` it wrote (``ccbench.workflow.report.report``'s result)."""
    console.print(run_header(res.run.meta, res.run.path, res.run.rows or ()))
    view_of(res.kind).summary(res, console)


def show_run(run, console, show_table: bool = True, results_dir="results", brief: bool = False) -> None:
    """Print a stored run of any kind (a path, a name under `results_dir`, or ``latest``); `brief`: what it found,
    its long tables left to ``ccbench show`` (what a measuring command prints when it ends)."""
    r = open_run(run, results_dir)
    view_of(r.kind).show(r, console, show_table, brief=brief)
