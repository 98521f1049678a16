"""Terminal tables (rich) of stored runs; every number shown comes from a stored row."""

from collections import defaultdict

from rich.markup import escape

from ccbench.core.collectives import COLLECTIVES
from ccbench.core.units import fmt_time
from ccbench.measure.hardware import summary as hardware_summary
from ccbench.present.table import Column, Styled, Table, render
from ccbench.store.results import Row

__all__ = ["algorithms_table", "run_header", "rows_tables", "show_sweep"]




def run_header(meta: dict, path) -> str:
    """One paragraph of provenance for the top of a table."""
    status = meta.get("status", "?")
    if status == "failed" and meta.get("failure"):
        status += f": {meta['failure']}"
    elif status == "running":
        status += " (no final status: still running, or its job died unrecorded; --resume continues it)"
    hardware = hardware_summary(meta.get("hardware"))
    return (
        f"[bold]{path}[/]  {status}\n"
        f"{meta.get('mpi_library', '?')} | {meta.get('nranks', '?')} ranks on {meta.get('nodes', '?')} "
        f"node(s), {meta.get('ranks_per_node', '?')} per node"
        f"{' (oversubscribed)' if meta.get('oversubscribed') else ''} | thread level "
        f"{meta.get('thread_level', '?')} | mpi4py {meta.get('mpi4py', '?')}, "
        f"ccbench {meta.get('ccbench', '?')} | {meta.get('start_time', '')}"
        + (f"\nhardware: {escape(hardware)}" if hardware else "")
    )


def _ci_text(ci) -> str:
    return f"{fmt_time(ci[0])} - {fmt_time(ci[1])}"


def rows_tables(rows: list[Row]) -> list[Table]:
    """One table per collective: median with 95% CI, min, bus bandwidth, samples, flags, check."""
    by_coll: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_coll[r.collective].append(r)
    tables = []
    for coll in [c for c in COLLECTIVES if c in by_coll]:
        group = by_coll[coll]
        vary = [k for k in ("dtype", "op", "in_place", "root") if len({getattr(r, k) for r in group}) > 1]
        P = group[0].nranks
        factor = COLLECTIVES[coll].busbw_factor(P)
        t = Table(f"{coll} at {P} ranks - size: {COLLECTIVES[coll].size_definition}; busbw = algbw x {factor:.3g}",
                  [Column("algorithm"), Column("size", "size"), *[Column(k.replace("_", " ")) for k in vary],
                   Column("median", "time"), Column("95% CI", fmt=_ci_text, align="right"), Column("min", "time"),
                   Column("busbw GB/s", fmt=lambda v: f"{v:.3f}", align="right"), Column("n", "count"),
                   Column("stop"), Column("flags"), Column("check")])
        for r in sorted(group, key=lambda r: (r.algorithm != "native", r.algorithm, r.dtype, r.op,
                                              r.in_place, r.root, r.nbytes)):
            t.add_row(r.algorithm, r.nbytes, *[getattr(r, k) for k in vary], r.median_s, (r.ci_low_s, r.ci_high_s),
                      r.min_s, r.busbw_gbs if coll != "barrier" else None, r.samples, r.stop_reason,
                      ",".join(r.flags), "ok" if r.ok else Styled(f"FAILED ({r.nwrong} wrong)", "red bold"))
        tables.append(t)
    return tables


def show_sweep(run, console, show_table: bool = True) -> None:
    """Print a stored collective sweep (a `Run`): provenance, tables per collective, warnings, a summary line."""
    path, meta, rows = run.path, run.meta, run.rows
    if show_table:
        console.print(run_header(meta, path))
        render(rows_tables(rows), console)
    for w in run.warnings:
        console.print(f"[yellow]warning: {w}[/]")
    bad = [r for r in rows if not r.ok]
    skipped = meta.get("skipped", [])
    console.print(f"{len(rows)} cases in {path}" + (f", {len(skipped)} skipped" if skipped else "")
                  + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct"))


def algorithms_table() -> Table:
    """`ccbench list`: every collective and its algorithms, kind, cost formula and summary (the registry)."""
    from ccbench.algorithms import REGISTRY

    t = Table("collectives and algorithms (a = latency, b = s/byte, g = reduction s/byte; n = size in bytes, "
              "P = ranks)",
              [Column(c, overflow="fold") for c in ("collective", "algorithm", "kind", "cost", "summary")])
    for coll, algs in REGISTRY.items():
        for i, (name, alg) in enumerate(algs.items()):
            t.add_row(coll if i == 0 else "", name, "native" if alg.native else "hand-written",
                      alg.formula or ("forced (" + ", ".join(alg.settings) + ")" if alg.settings
                                      else "library's choice" if alg.native else "-"), alg.summary,
                      end_section=i == len(algs) - 1)
        if not algs:
            t.add_row(coll, "-", "", "", COLLECTIVES[coll].summary, end_section=True)
    return t
