"""What each kind of run shows: its terminal view and its report, in one table keyed by run kind.

The commands open a run once (``ccbench.store.run.open_run``) and hand it here; nothing
downstream asks run.json again which kind it is.
"""

from dataclasses import dataclass
from typing import Callable

from ccbench.present.report import build_sweep_report
from ccbench.present.views import show_sweep
from ccbench.present.workload_report import build_workload_report
from ccbench.present.workload_views import show_workload
from ccbench.store.run import SWEEP, WORKLOAD, open_run

__all__ = ["VIEWS", "KindView", "build_report", "show_run"]


@dataclass(frozen=True)
class KindView:
    """How a kind of run is shown: ``show(run, console, show_table)`` and ``report(run) -> dict``."""

    show: Callable
    report: Callable


VIEWS = {
    SWEEP: KindView(show_sweep, build_sweep_report),
    WORKLOAD: KindView(show_workload, build_workload_report),
}


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
