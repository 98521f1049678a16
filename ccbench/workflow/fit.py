"""``ccbench fit`` as a workflow: open the run, fit it, write fits.json and fits.csv where derived files go."""

from dataclasses import dataclass
from pathlib import Path

from ccbench.analysis.fit import N_BOOT
from ccbench.analysis.predict import TOLERANCE
from ccbench.analysis.runs import RunFit, fit_files
from ccbench.store.derived import output_dir, write_new_set
from ccbench.store.run import Run, open_run

__all__ = ["FitWritten", "fit"]


@dataclass(frozen=True)
class FitWritten:
    """A fitted run (`RunFit`) and the files that keep it (fits.json, fits.csv)."""

    fit: RunFit
    files: tuple[Path, ...]


def fit(run, results_dir="results", out=None, *, n_boot: int = N_BOOT, tolerance: float = TOLERANCE) -> FitWritten:
    """Fit a stored run (a `Run`, a path, a name, ``latest``); write fits.json + fits.csv into `out` or the
    derived tree.

    The run itself is only read (`ccbench.store.derived`): its files and their times stay as they were.
    """
    r = run if isinstance(run, Run) else open_run(run, results_dir)
    result, texts = fit_files(r, n_boot=n_boot, tolerance=tolerance)
    written = write_new_set(output_dir(r.path, out), "fits", texts)
    return FitWritten(result, (written[".json"], written[".csv"]))
