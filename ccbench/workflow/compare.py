"""``ccbench compare`` as a workflow: the comparison's files written where derived files go."""

from pathlib import Path

from ccbench.analysis.compare import Comparison
from ccbench.present.compare import comparison_files
from ccbench.store.derived import output_dir, write_new_set
from ccbench.store.results import free_stem

__all__ = ["write_comparison"]


def write_comparison(cmp: Comparison, out=None, *, plot: bool = True) -> dict[str, Path]:
    """Write compare.csv, compare.md (and compare.png) into `out`, by default the derived tree of the first run
    (``results-derived/RUN_A``); the runs are only read.  An existing set is never replaced: the next free
    ``compare-2``, ``compare-3`` ... is used.  Returns {"csv" | "md" | "png": path}.
    """
    folder = output_dir(cmp.runs[0][1], out)
    stem = free_stem(folder, "compare", (".csv", ".md", ".png"))
    written = write_new_set(folder, stem, comparison_files(cmp, stem, plot=plot))
    return {suffix.lstrip("."): path for suffix, path in written.items()}
