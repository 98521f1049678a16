"""How a diagnosis (``ccbench doctor``) is shown: a one-screen summary that ends with the suspects, and a report
with the pair matrix as a heatmap, a per-host bar chart, suspects.json and every measurement.

The decision is ``ccbench.analysis.doctor.diagnose``'s; this module only lays it out through the
table model (``ccbench.present.table``) and the report's figure machinery (``ccbench.present.report``).
"""

import json
import math

from ccbench.analysis.doctor import Diagnosis, diagnose
from ccbench.analysis.levels import Levels, pair_levels
from ccbench.core.units import format_size, human_time
from ccbench.present.generic import rows_table
from ccbench.present.kinds import KindView
from ccbench.present.table import Column, Styled, Table, render, to_block

__all__ = ["DOCTOR_VIEW", "answer_line", "heatmap_figure", "host_table", "levels_table", "suspects_table"]

#: Most hosts the terminal's per-host table lists (the slowest between nodes); the report lists all.
SCREEN_HOSTS = 12


def suspects_table(d: Diagnosis) -> Table:
    """The suspects, slowest first: what, how much slower than its peers, in how many launches, where it showed."""
    t = Table("suspects (out of line with their peers)", [Column("what"), Column("name"), Column("effect", "ratio"),
                                                          Column("launches"), Column("evidence")])
    for s in d.suspects:
        t.add_row(s.kind, Styled(s.name, "red bold"), s.effect, f"{s.launches} of {s.of}", "; ".join(s.evidence))
    return t


def levels_table(lv: Levels) -> Table:
    """The link levels found from the pair times alone (``ccbench.analysis.levels``), fastest first, with where the
    node map puts their pairs and each level's two-point alpha and bandwidth."""
    small, large = lv.sizes
    t = Table(f"link levels found from the pair times alone (each pair's fastest {format_size(small)} time; alpha and "
              f"bandwidth through {format_size(small)} and {format_size(large)}, median over the level's pairs)",
              [Column("level", "count"), Column("node map says"), Column("pairs", "count"),
               Column(f"{format_size(small)} one-way, fastest"), Column("alpha", "time"),
               Column("bandwidth GB/s", "bandwidth")])
    for i, v in enumerate(lv.levels, 1):
        lo, hi = v.range_s
        t.add_row(i, v.where, v.pairs, human_time(lo) if lo == hi else f"{human_time(lo)}-{human_time(hi)}",
                  v.alpha_s, v.bandwidth_gbs)
    return t


def _level_notes(lv: Levels | None) -> list[str]:
    if lv is None:
        return []
    out = [f"the node map disagrees with the pair times: {x}" for x in lv.disagree[:5]]
    if len(lv.disagree) > 5:
        out.append(f"... and {len(lv.disagree) - 5} more pairs (the report lists them)")
    return out


def host_table(d: Diagnosis, limit: int | None = None) -> Table:
    """Each host's median time per measurement (``Diagnosis.per_host``); with `limit`, the slowest hosts only."""
    whats = list(d.per_host)
    hosts = sorted({h for got in d.per_host.values() for h in got}, key=_order)
    if limit is not None and len(hosts) > limit and whats:
        first = d.per_host[whats[0]]
        hosts = sorted(hosts, key=lambda h: -first.get(h, 0.0))[:limit]
    named = {s.name for s in d.suspects if s.kind in ("host", "rank")}
    by = "host" if len(d.hosts) > 1 else "rank"
    t = Table(f"per {by}: median one-way time of its pairs, and of its allreduce",
              [Column(by), *(Column(w, "time") for w in whats)])
    for h in hosts:
        t.add_row(Styled(h, "red bold") if h in named else h, *(d.per_host[w].get(h) for w in whats))
    return t


def _order(label: str) -> tuple:
    """Hosts by name, a host's ranks ("host:l") by number."""
    host, colon, local = label.rpartition(":")
    return (host, int(local)) if colon and local.isdigit() else (label, -1)


def answer_line(d: Diagnosis) -> str:
    """The last line: who is out of line (and the host list for ``sbatch --exclude``), or nobody (``ccbench doctor``
    exits with ``SUSPECTS_FOUND`` when it names anyone, ``WITHHELD`` when the machine was loaded)."""
    if d.withheld:
        return f"no decision: {d.withheld}"
    if not d.suspects:
        return (f"no suspects: no host, link or rank out of line ({len(d.hosts)} host(s), {d.launches} "
                f"launch{'es' if d.launches > 1 else ''})")
    named = ", ".join(f"{s.kind} {s.name} ({s.effect:.2f}x)" for s in d.suspects)
    exclude = f"; exclude them: sbatch --exclude={','.join(d.exclude)}" if d.exclude else ""
    return f"suspects: {named}{exclude}"


def _show(run, console, show_table: bool = True, brief: bool = False) -> None:
    from ccbench.present.views import run_header

    d = diagnose(run.rows, run.meta)
    lv = pair_levels(run.rows)
    console.print(run_header(run.meta, run.path, run.rows))
    tables: list = []
    if show_table and not brief:
        tables.append(rows_table(run.spec, run.rows))
    if lv is not None:
        tables.append(levels_table(lv))
    if d.per_host:
        tables.append(host_table(d, SCREEN_HOSTS))
    if d.suspects:
        tables.append(suspects_table(d))
    render(tables, console)
    for s in d.suspects:
        console.print(f"confirm {s.name}: {s.confirm}", markup=False, highlight=False)
    bad = sum(not r.ok for r in run.rows)
    if bad:
        console.print(f"[red bold]{bad} measurement(s) with WRONG data[/]")
    for line in [*run.warnings, *d.notes, *_level_notes(lv)]:
        console.print(f"note: {line}", style="yellow", markup=False, highlight=False)
    console.print(answer_line(d), style="red bold" if d.suspects else "yellow" if d.withheld else "green",
                  markup=False, highlight=False)


def heatmap_figure(labels: list[str], matrix, title: str):
    """A pair matrix as a heatmap (log colour scale, each cell's time written in it; blank: not measured)."""
    import numpy as np
    from matplotlib.colors import LogNorm

    from ccbench.present.plots import _new_figure

    n = len(labels)
    side = min(3.0 + 0.45 * n, 14.0)
    fig = _new_figure(side + 1.5, side)
    ax = fig.subplots()
    finite = matrix[np.isfinite(matrix)]
    norm = LogNorm(vmin=float(finite.min()), vmax=float(max(finite.max(), finite.min() * 1.01))) if finite.size \
        else None
    img = ax.imshow(np.ma.masked_invalid(matrix), cmap="viridis", norm=norm)
    step = max(1, n // 48)  # at most 48 labels an axis
    ax.set_xticks(range(0, n, step), labels[::step], rotation=90, fontsize="x-small")
    ax.set_yticks(range(0, n, step), labels[::step], fontsize="x-small")
    if n <= 24:
        for i in range(n):
            for j in range(n):
                if math.isfinite(matrix[i, j]):
                    ax.text(j, i, human_time(matrix[i, j]), ha="center", va="center", fontsize="xx-small",
                            color="white")
    fig.colorbar(img, ax=ax, label="one-way time (median)")
    ax.set_title(title, fontsize="medium")
    return fig


def _report(run):
    from ccbench.present import report as page
    from ccbench.present.plots import bar_panels_figure, have_matplotlib

    kind, path, meta, rows = run.spec, run.path, run.meta, run.rows
    d = diagnose(rows, meta)
    lv = pair_levels(rows)
    plots = have_matplotlib()
    images: dict[str, bytes] = {}
    blocks: list = [("h", 1, f"ccbench diagnosis: {path.name}"),
                    ("p", f"{meta.get('mpi_library', '?')}; {meta.get('nranks', '?')} ranks on {len(d.hosts)} "
                          f"host(s); {len(rows)} measurements. " + page.launch_sentence(meta, rows)),
                    ("p", answer_line(d))]
    if d.suspects:
        blocks += [("h", 2, "Suspects"), *to_block(suspects_table(d)),
                   ("ul", [f"confirm {s.name}: {s.confirm}" for s in d.suspects])]
    if d.notes:
        blocks += [("ul", d.notes)]
    blocks += [("p", "How it decides: a launch's time of a measurement is the lower quartile of its samples; a value "
                     "is named when it is at least 1.3x the median of its peers at the same level and its modified "
                     "z-score (Iglewicz & Hoaglin) is at least 3.5, the MAD of the log times floored at 5%, by the "
                     "same test in most launches. A slow host slows every one of its links, a slow link only itself: "
                     "the pair matrix tells them apart (a two-way additive model of the log times).")]
    blocks += page.provenance_blocks(path, meta, rows, run.warnings, [], settings=[],
                                cases=f"{len(rows)} measurements", describe=lambda r: f"{r.test} {r.subject}")
    blocks += page.no_figures_blocks(plots)
    if lv is not None:
        blocks += [("h", 2, "Link levels"), *to_block(levels_table(lv))]
        if lv.disagree:
            blocks += [("p", "Pairs the node map places otherwise than their times:"), ("ul", lv.disagree)]
    for n, (labels, matrix) in d.pair_matrix.items() if plots else ():
        if len(labels) > 1:
            name = page.add_figure(heatmap_figure(labels, matrix, f"pair matrix, {format_size(n)}: one-way time"),
                              f"pairs-{n}.png", images)
            blocks += [("h", 2, f"Pair matrix, {format_size(n)}"), ("img", name, f"pair matrix {format_size(n)}")]
    if d.per_host:
        blocks += [("h", 2, "Per host" if len(d.hosts) > 1 else "Per rank")]
        if plots:
            panels = {w: {h: {w.split(",")[0]: {"value": t}} for h, t in got.items() if t > 0 and math.isfinite(t)}
                      for w, got in d.per_host.items()}
            by = "host" if len(d.hosts) > 1 else "rank"
            fig = bar_panels_figure(panels, f"per {by}: median time", "time (median; log scale)", log=True)
            blocks.append(("img", page.add_figure(fig, "hosts.png", images), f"per {by}"))
        blocks += to_block(host_table(d))
    blocks += [("h", 2, "Every measurement"), *to_block(rows_table(kind, rows))]
    files = page.page_files(blocks, f"ccbench diagnosis: {path.name}", images)
    files["suspects.json"] = json.dumps({**d.to_dict(), "levels": lv.to_dict() if lv else None}, indent=2) + "\n"
    return page.Report(run, files, plots, diagnosis=d)


def _summary(res, console) -> None:
    from ccbench.present.generic import no_figures_line, png_count

    no_figures_line(res, console)
    console.print(answer_line(res.diagnosis), markup=False, highlight=False)
    console.print(f"wrote report.md, report.html (figures embedded), {png_count(res)} PNG figure(s) and suspects.json "
                  f"in {res.dir}")


DOCTOR_VIEW = KindView(_show, _report, _summary)
