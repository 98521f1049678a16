"""``ccbench plot`` as a workflow: one PNG figure per collective of a stored sweep, written where derived files go."""

from pathlib import Path

from ccbench.analysis.fastest import group_rows
from ccbench.analysis.runs import fit_run
from ccbench.core.errors import UsageError
from ccbench.present.plots import png_bytes, require_matplotlib
from ccbench.present.report import group_figure, group_slug
from ccbench.store.derived import output_dir, write_new_file, write_new_set
from ccbench.store.run import SWEEP, open_run

__all__ = ["plot_run"]


def plot_run(run, results_dir="results", collectives: str | None = None, kind: str = "latency",
             output: Path | None = None, out=None) -> list[Path]:
    """Draw `kind` (latency, busbw, predicted) per collective and variant of a stored sweep; return the files.

    Each figure goes to `output` (one figure only) or, numbered, into `out`, by default the derived
    tree beside the results tree; the run itself is only read, and no file is ever replaced.
    """
    require_matplotlib()
    r = open_run(run, results_dir, kinds=(SWEEP,), need_rows=True, what="ccbench plot")
    path = r.path
    groups = group_rows(r.rows)
    present = list(dict.fromkeys(g.collective for g in groups))
    if collectives:
        wanted = [c.strip() for c in collectives.split(",") if c.strip()]
        missing = [c for c in wanted if c not in present]
        if missing:
            raise UsageError(f"collective {missing[0]!r} is not in run {path.name} (it has {', '.join(present)})")
        groups = [g for g in groups if g.collective in wanted]
    groups = [g for g in groups if len([n for n in g.sizes if n > 0]) > 1]
    if not groups:
        raise UsageError(f"nothing to plot in run {path.name}: a figure needs at least two sizes above 0 B")
    if output is not None and len(groups) > 1:
        raise UsageError(f"-o names one file but {len(groups)} figures would be drawn; pick one collective "
                         "with -C (and one variant)")
    if output is not None and output.exists():
        raise UsageError(f"{str(output)!r} exists; it is never overwritten (choose another name)")
    fit = fit_run(r) if kind in ("latency", "predicted") else None
    per_coll: dict[str, int] = {}
    for g in groups:
        per_coll[g.collective] = per_coll.get(g.collective, 0) + 1
    figs = [(g, group_figure(g, fit, kind)) for g in groups]
    figs = [(g, f) for g, f in figs if f is not None]
    if not figs:
        raise UsageError(f"no {kind} figure to draw for {', '.join(dict.fromkeys(g.collective for g in groups))} "
                         f"in run {path.name}" + (": no algorithm with a cost model, or no network parameters"
                                                  if kind == "predicted" else ""))
    if output is not None:
        return [write_new_file(output, png_bytes(figs[0][1]), what="files", make_parents=True)]
    folder = output_dir(path, out)
    return [write_new_set(folder, f"plot-{group_slug(g, per_coll[g.collective] > 1)}-{kind}", {".png": png_bytes(f)})
            [".png"] for g, f in figs]
