"""What each kind of run shows: its terminal view and its report, in one table keyed by run kind.

The commands open a run once (``ccbench.store.run.open_run``) and hand it here; nothing
downstream asks run.json again which kind it is.
"""

from collections.abc import Callable
from dataclasses import dataclass

from ccbench.present.report import build_sweep_report
from ccbench.present.table import SIGNIFICANT, Column, Table, render, to_rich
from ccbench.present.views import run_header, show_sweep
from ccbench.present.workload_report import build_workload_report
from ccbench.present.workload_views import show_workload, workload_tables
from ccbench.store.run import SWEEP, WORKLOAD, open_run

__all__ = ["VIEWS", "KindView", "build_report", "fastest_table", "print_report", "show_run"]


def fastest_table(title: str, entries: list[dict], key: Column, key_of) -> Table:
    """The fastest against its runner-up (``fastest_of`` entries), one row per entry keyed by `key_of(entry)`."""
    t = Table(title, [key, Column("fastest"), Column("median", "time"), Column("runner-up"),
                      Column("its median", "time"), Column("margin", fmt=lambda v: f"{v:.1%}"), Column("p", "p"),
                      Column("significant")])
    for r in entries:
        t.add_row(key_of(r), r["fastest"], r["median_s"], r["runner_up"] or "-", r["runner_up_s"], r["margin"],
                  r["p_value"], SIGNIFICANT[r["significant"]])
    return t


def _sweep_summary(res: dict, console) -> None:
    for label, rows in res["fastest"].items():
        if rows and any(r["runner_up"] is not None for r in rows):
            console.print(to_rich(fastest_table(
                f"fastest per size: {label} (runner-up by Mann-Whitney U on the raw samples)", rows,
                Column("size", "size"), lambda r: r["nbytes"])))
    for note in res["doc"].get("notes", []):
        console.print(f"[yellow]note: {note}[/]")
    pngs = [f for f in res["files"] if f.endswith(".png")]
    console.print(f"wrote {res['dir'] / 'report.md'}, {res['dir'] / 'report.html'} (figures embedded), "
                  f"{len(pngs)} PNG figures and fits.json in {res['dir']}")


def _workload_summary(res: dict, console) -> None:
    render([t for t in workload_tables(res["meta"], res["rows"])  # the per-call tables are in the report
            if isinstance(t, str) or "per call" not in t.title], console)
    for w, rows in res["fastest"].items():
        if rows and any(r["runner_up"] is not None for r in rows):
            console.print(to_rich(fastest_table(f"fastest: {w} (runner-up by Mann-Whitney U on the raw samples)",
                                                rows, Column("among"), lambda r: r["what"])))
    pngs = [f for f in res["files"] if f.endswith(".png")]
    console.print(f"wrote {res['dir'] / 'report.md'}, {res['dir'] / 'report.html'} (figures embedded) and "
                  f"{len(pngs)} PNG figures in {res['dir']}")


@dataclass(frozen=True)
class KindView:
    """How a kind of run is shown: ``show(run, console, show_table)``, ``report(run) -> dict`` and
    ``summary(report dict, console)`` (what ``ccbench report`` prints)."""

    show: Callable
    report: Callable
    summary: Callable


VIEWS = {
    SWEEP: KindView(show_sweep, build_sweep_report, _sweep_summary),
    WORKLOAD: KindView(show_workload, build_workload_report, _workload_summary),
}


def print_report(res: dict, console) -> None:
    """What ``ccbench report`` prints about the report it wrote (`build_report`'s result)."""
    console.print(run_header(res["meta"], res["path"]))
    VIEWS[res["kind"]].summary(res, console)


def show_run(run, console, show_table: bool = True, results_dir="results") -> None:
    """Print a stored run of any kind (a path, a name under `results_dir`, or ``latest``)."""
    r = open_run(run, results_dir)
    VIEWS[r.kind].show(r, console, show_table)


def build_report(run, results_dir="results", *, n_boot: int | None = None) -> dict:
    """Write the report of a stored run of any kind into a new ``report[-k]`` directory beside it.

    The returned dict has ``"kind"`` (the run's kind) and what that kind's report builder returns.
    """
    r = open_run(run, results_dir, need_rows=True)
    kw = {"n_boot": n_boot} if n_boot is not None and r.kind == SWEEP else {}
    return {"kind": r.kind, **VIEWS[r.kind].report(r, **kw)}
