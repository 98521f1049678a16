"""``ccbench predict --against`` as a workflow: open the runs, cross-validate, write the table the user asked for."""

from pathlib import Path

from ccbench.analysis.crossval import cross_validate, crossval_text
from ccbench.analysis.fit import N_BOOT
from ccbench.store.derived import write_new_file
from ccbench.store.run import open_run

__all__ = ["cross_validation"]


def cross_validation(from_runs, against, results_dir="results", *, which: str = "auto", collectives=None,
                     output: str | None = None, n_boot: int = N_BOOT) -> tuple[dict, Path | None]:
    """Fit on `from_runs`, predict `against` (`ccbench.analysis.crossval.cross_validate`); with `output`, write
    its cases as CSV (a ``.csv`` name) or the whole document as JSON, never over a file.  (document, file or None)"""
    doc = cross_validate([open_run(r, results_dir) for r in from_runs], open_run(against, results_dir),
                         which=which, collectives=collectives, n_boot=n_boot)
    written = write_new_file(output, crossval_text(doc, output.lower().endswith(".csv"))) if output else None
    return doc, written
