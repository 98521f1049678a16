"""``ccbench report`` as a workflow: open the run, build its kind's page, write it where derived files go."""

from ccbench.present.kinds import view_of
from ccbench.store.derived import output_dir, write_new_dir
from ccbench.store.run import SWEEP, Run, open_run

__all__ = ["report"]


def report(run, results_dir="results", out=None, *, n_boot: int | None = None) -> dict:
    """Write the report of a stored run of any kind into a new ``report`` (``report-2`` ...) folder of `out`,
    by default of the derived tree beside the results tree; the run itself is only read.

    Returns what the kind's report builder returns, with ``kind``, ``dir`` (the folder written) and
    ``files`` (the names written in it).
    """
    r = run if isinstance(run, Run) else open_run(run, results_dir, need_rows=True)
    kw = {"n_boot": n_boot} if n_boot is not None and r.kind == SWEEP else {}
    built = view_of(r.kind).report(r, **kw)
    where = write_new_dir(output_dir(r.path, out), "report", built["files"])
    return {**built, "kind": r.kind, "dir": where, "files": list(built["files"])}
