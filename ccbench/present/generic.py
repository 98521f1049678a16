"""How a run of a kind that declares no views of its own is shown and reported (its comparison: the generic
view of ``ccbench.present.compare``).

A plug-in kind (``ccbench.store.kinds``) gets these from its rows alone: one column per
``key_fields`` entry, then the statistics every stored row has (samples, median, 95% interval,
launches, the check).  Everything goes through the table model (``ccbench.present.table``), so
the terminal and the page show the same cells.
"""

import math
from collections.abc import Sequence

from ccbench.present.table import Column, Styled, Table, render, to_block
from ccbench.store.kinds import RunKind

__all__ = ["key_columns", "row_label", "generic_report", "report_summary", "rows_table", "show_generic"]


def _title(field: str) -> str:
    return field.replace("_", " ")


def key_columns(kind: RunKind) -> list[Column]:
    """One column per key field: sizes as sizes (a field called nbytes), times as times (a field ending in _s)."""
    return [Column("size", "size") if f == "nbytes" else Column(_title(f), "time") if f.endswith("_s")
            else Column(_title(f)) for f in kind.key_fields]


def rows_table(kind: RunKind, rows: Sequence) -> Table:
    """Every row of a run: its key, samples, median and 95% interval, launches, and its check."""
    t = Table(f"{kind.label}: every {kind.item}", [*key_columns(kind), Column("samples", "count"),
                                                   Column("median", "time"), Column("95% CI", "time_ci"),
                                                   Column("launches", "count"), Column("check")])
    for r in rows:
        t.add_row(*kind.key_of(r), r.samples, r.median_s, (r.ci_low_s, r.ci_high_s), r.n_launches,
                  Styled("ok", "green") if r.ok else Styled(f"WRONG {r.nwrong}", "red bold"))
    return t


def _counts_line(kind: RunKind, run, brief: bool, show_table: bool) -> str:
    bad = sum(not r.ok for r in run.rows)
    n = len(run.rows)
    return (f"{n} {kind.item}{'' if n == 1 else 's'} in {run.path}"
            + (f", [red bold]{bad} FAILED[/]" if bad else ", all correct")
            + (f"; every {kind.item} as a table: ccbench show {run.path}" if brief and show_table else ""))


def show_generic(run, console, show_table: bool = True, brief: bool = False) -> None:
    """Print a stored run of a kind without a view of its own: provenance, its rows as one table, a summary line."""
    from ccbench.present.views import run_header

    kind = run.spec
    console.print(run_header(run.meta, run.path, run.rows))
    if show_table and not brief:
        render([rows_table(kind, run.rows)], console)
    for r in run.rows:
        if not r.ok and brief:
            console.print(f"WRONG: {row_label(kind, r)}: {r.nwrong} wrong elements",
                          style="red", markup=False, highlight=False)
    for w in run.warnings:
        console.print(f"[yellow]warning: {w}[/]")
    console.print(_counts_line(kind, run, brief, show_table))


def _figure(kind: RunKind, rows: Sequence):
    """Median and 95% interval of every row as horizontal bars; None without matplotlib or rows to draw."""
    from ccbench.present.plots import bar_panels_figure, have_matplotlib

    bars = {row_label(kind, r): {"median": {"value": r.median_s, "lo": r.ci_low_s, "hi": r.ci_high_s}}
            for r in rows if r.median_s > 0 and math.isfinite(r.median_s)}
    if not bars or not have_matplotlib():
        return None
    return bar_panels_figure({f"median time per {kind.item}": bars}, f"{kind.label}",
                             "time (median, 95% CI; log scale)", log=True)


def row_label(kind: RunKind, row) -> str:
    """A row's key as a person reads it: sizes as sizes (a field called nbytes), times as times."""
    from ccbench.core.units import fmt_time, format_size

    return " ".join(format_size(v) if f == "nbytes" else fmt_time(v) if f.endswith("_s") and v is not None
                    else str(v) for f, v in zip(kind.key_fields, kind.key_of(row), strict=True))


def generic_report(run):
    """The report page (a ``Report``) of a run of a kind without one of its own: provenance, a figure, every row."""
    from ccbench.present.plots import have_matplotlib
    from ccbench.present.report import (
        Report,
        add_figure,
        launch_sentence,
        no_figures_blocks,
        page_files,
        provenance_blocks,
    )

    kind, path, meta, rows = run.spec, run.path, run.meta, run.rows
    images: dict[str, bytes] = {}
    blocks: list = [("h", 1, f"ccbench report: {path.name}"),
                    ("p", f"A {kind.label}: {meta.get('mpi_library', '?')}; {meta.get('nranks', '?')} ranks on "
                          f"{meta.get('nodes', '?')} node(s); {len(rows)} {kind.item}s. Every time below is a stored "
                          "row of cases.jsonl. " + launch_sentence(meta, rows))]
    blocks += provenance_blocks(path, meta, rows, run.warnings, [], settings=[],
                                cases=f"{len(rows)} {kind.item}s",
                                describe=lambda r: row_label(kind, r))
    blocks += no_figures_blocks(have_matplotlib())
    fig = _figure(kind, rows)
    if fig is not None:
        blocks.append(("img", add_figure(fig, "rows.png", images), f"median time per {kind.item}"))
    blocks += [("h", 2, f"Every {kind.item}"), *to_block(rows_table(kind, rows))]
    return Report(run, page_files(blocks, f"ccbench report: {path.name}", images), have_matplotlib())


def no_figures_line(res, console) -> None:
    """Say, before a report's last line, that it has no figures and how to add them."""
    if not res.figures:
        from ccbench.present.plots import print_no_figures

        print_no_figures(console)


def png_count(res) -> int:
    """How many PNG figures a written ``Report`` holds."""
    return sum(f.endswith(".png") for f in res.files)


def report_summary(res, console) -> None:
    """What ``ccbench report`` prints once the page of a run without a view of its own is written."""
    no_figures_line(res, console)
    console.print(f"wrote report.md, report.html (figures embedded) and {png_count(res)} PNG figure(s) in {res.dir}")
