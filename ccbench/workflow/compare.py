"""``ccbench compare`` as a workflow: the comparison's files written where derived files go."""

from pathlib import Path

from ccbench.analysis.compare import SIGNIFICANCE, Comparison, check_settings, compare_runs
from ccbench.store.derived import output_dir, write_new_set
from ccbench.store.results import free_stem
from ccbench.store.run import Run, open_run

__all__ = ["compare", "write_comparison"]


def compare(runs, results_dir="results", *, level: float = SIGNIFICANCE, min_effect: float = 0.0,
            launch_cv: float | None = None) -> Comparison:
    """Open the runs (`Run` objects, paths, names under `results_dir`, ``latest``) and compare every one after the
    first with the first (`ccbench.analysis.compare.compare_runs`); the settings are checked before any is read."""
    check_settings(level, min_effect, launch_cv)
    return compare_runs([r if isinstance(r, Run) else open_run(r, results_dir) for r in runs], level=level,
                        min_effect=min_effect, launch_cv=launch_cv)


def write_comparison(cmp: Comparison, out=None, *, plot: bool = True) -> dict[str, Path]:
    """Write compare.csv, compare.md (and compare.png) into `out`, by default the derived tree of the first run
    (``results-derived/RUN_A``); the runs are only read.  An existing set is never replaced: the next free
    ``compare-2``, ``compare-3`` ... is used.  Returns {"csv" | "md" | "png": path}.
    """
    from ccbench.present.compare import comparison_files  # rich: only when files are written, not for the API

    folder = output_dir(cmp.runs[0][1], out)
    stem = free_stem(folder, "compare", (".csv", ".md", ".png"))
    written = write_new_set(folder, stem, comparison_files(cmp, stem, plot=plot))
    return {suffix.lstrip("."): path for suffix, path in written.items()}
