"""Terminal tables (rich) of stored runs; every number shown comes from a stored row."""

from collections import defaultdict

from rich.table import Table

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.units import fmt_time, format_size
from ccbench.store.results import Row

__all__ = ["run_header", "rows_tables", "show_sweep"]




def run_header(meta: dict, path) -> str:
    """One paragraph of provenance for the top of a table."""
    status = meta.get("status", "?")
    if status == "failed" and meta.get("failure"):
        status += f": {meta['failure']}"
    elif status == "running":
        status += " (no final status: still running, or its job died unrecorded; --resume continues it)"
    return (
        f"[bold]{path}[/]  {status}\n"
        f"{meta.get('mpi_library', '?')} | {meta.get('nranks', '?')} ranks on {meta.get('nodes', '?')} "
        f"node(s), {meta.get('ranks_per_node', '?')} per node"
        f"{' (oversubscribed)' if meta.get('oversubscribed') else ''} | thread level "
        f"{meta.get('thread_level', '?')} | mpi4py {meta.get('mpi4py', '?')}, "
        f"ccbench {meta.get('ccbench', '?')} | {meta.get('start_time', '')}"
    )


def rows_tables(rows: list[Row]) -> list[Table]:
    """One table per collective: median with 95% CI, min, bus bandwidth, samples, flags, check."""
    by_coll: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_coll[r.collective].append(r)
    tables = []
    for coll in [c for c in COLLECTIVES if c in by_coll]:
        group = by_coll[coll]
        vary = {k: len({getattr(r, k) for r in group}) > 1 for k in ("dtype", "op", "in_place", "root")}
        P = group[0].nranks
        factor = COLLECTIVES[coll].busbw_factor(P)
        t = Table(title=f"{coll} at {P} ranks - size: {COLLECTIVES[coll].size_definition}; "
                        f"busbw = algbw x {factor:.3g}",
                  title_justify="left", header_style="bold")
        t.add_column("algorithm")
        t.add_column("size", justify="right")
        for k in ("dtype", "op", "in_place", "root"):
            if vary[k]:
                t.add_column(k.replace("_", " "))
        for name in ("median", "95% CI", "min", "busbw GB/s", "n"):
            t.add_column(name, justify="right")
        t.add_column("stop")
        t.add_column("flags")
        t.add_column("check")
        for r in sorted(group, key=lambda r: (r.algorithm != "native", r.algorithm, r.dtype, r.op,
                                              r.in_place, r.root, r.nbytes)):
            cells = [r.algorithm, format_size(r.nbytes)]
            cells += [str(getattr(r, k)) for k in ("dtype", "op", "in_place", "root") if vary[k]]
            cells += [fmt_time(r.median_s), f"{fmt_time(r.ci_low_s)} - {fmt_time(r.ci_high_s)}",
                      fmt_time(r.min_s), f"{r.busbw_gbs:.3f}" if coll != "barrier" else "-",
                      str(r.samples), r.stop_reason, ",".join(r.flags),
                      "ok" if r.ok else f"[red bold]FAILED ({r.nwrong} wrong)[/]"]
            t.add_row(*cells)
        tables.append(t)
    return tables


def show_sweep(run, console, show_table: bool = True) -> None:
    """Print a stored collective sweep (a `Run`): provenance, tables per collective, warnings, a summary line."""
    path, meta, rows = run.path, run.meta, run.rows
    if show_table:
        console.print(run_header(meta, path))
        for t in rows_tables(rows):
            console.print(t)
    for w in run.warnings:
        console.print(f"[yellow]warning: {w}[/]")
    bad = [r for r in rows if not r.ok]
    skipped = meta.get("skipped", [])
    console.print(f"{len(rows)} cases in {path}" + (f", {len(skipped)} skipped" if skipped else "")
                  + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct"))
