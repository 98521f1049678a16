"""``ccbench report`` as a workflow: open the run, build its kind's page, write it where derived files go."""

from ccbench.present.kinds import view_of
from ccbench.present.report import Report
from ccbench.store.derived import output_dir, write_new_dir
from ccbench.store.run import SWEEP, Run, open_run

__all__ = ["report"]


def report(run, results_dir="results", out=None, *, n_boot: int | None = None) -> Report:
    """Write the report of a stored run of any kind into a new ``report`` (``report-2`` ...) folder of `out`,
    by default of the derived tree beside the results tree; the run itself is only read.

    Returns the kind's `Report`, its ``dir`` the folder written.
    """
    r = run if isinstance(run, Run) else open_run(run, results_dir, need_rows=True)
    kw = {"n_boot": n_boot} if n_boot is not None and r.kind == SWEEP else {}
    built = view_of(r.kind).report(r, **kw)
    return built.at(write_new_dir(output_dir(r.path, out), "report", built.files))
