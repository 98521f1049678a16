"""PNG figures of stored runs and comparisons: latency, bus bandwidth, predicted vs measured, ratios.

matplotlib is an optional dependency (the ``report`` extra), imported inside the functions
only; figures are drawn on a bare ``matplotlib.figure.Figure`` with the Agg canvas, so no
global pyplot state or interactive backend is touched.  Every point drawn is a stored
row's number (median, CI bounds, bus bandwidth) or a fitted/predicted value from
``ccbench.analysis.fit``/``ccbench.analysis.predict``; axes carry units, sizes are ticked in human units
(8 B, 4 KiB, 1 MiB) and times in ns/µs/ms/s.  Files are created exclusively: an existing
file is never replaced.
"""

import io
import math
from collections.abc import Mapping, Sequence

from ccbench.analysis.fastest import algorithm_order
from ccbench.core.errors import CCBenchError
from ccbench.core.units import format_size, human_time

__all__ = [
    "bar_panels_figure",
    "busbw_figure",
    "ci_label",
    "compare_figure",
    "latency_figure",
    "predicted_figure",
    "ADD_FIGURES",
    "have_matplotlib",
    "print_no_figures",
    "require_matplotlib",
    "png_bytes",
    "size_label",
]

DPI = 110
#: Most x ticks on a size axis before ticks are thinned to every 2nd, 3rd, ... power of two.
MAX_SIZE_TICKS = 9


#: How to add figures to an install without them (matplotlib is the ``report`` extra).
ADD_FIGURES = "pip install 'ccbench[report]' (in a clone: pip install -e '.[report]') adds them"


def print_no_figures(console) -> None:
    """The line a command that wrote its tables without figures ends with: why, and how to add them."""
    console.print(f"note: no figures (matplotlib is not installed): {ADD_FIGURES}", style="yellow", markup=False,
                  highlight=False)


def have_matplotlib() -> bool:
    """Whether figures can be drawn here (matplotlib importable)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib():
    """The matplotlib module, or a one-line error saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise CCBenchError(f"plots need matplotlib, which is not installed: {ADD_FIGURES}") from None
    return matplotlib




def _new_figure(width: float, height: float):
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """`fig` as a PNG file's bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


# --------------------------------------------------------------------------- axes


def _size_axis(ax, sizes: Sequence[float], label: str) -> None:
    """Log2 size axis ticked at powers of two in human units (at most MAX_SIZE_TICKS ticks)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    pos = [s for s in sizes if s and s > 0]
    ax.set_xscale("log", base=2)
    if not pos:
        return
    lo, hi = math.floor(math.log2(min(pos))), math.ceil(math.log2(max(pos)))
    measured = sorted(set(pos))
    if len(measured) <= MAX_SIZE_TICKS:
        ticks = measured  # tick exactly the measured sizes
    else:
        step = max(1, math.ceil((hi - lo + 1) / MAX_SIZE_TICKS))
        ticks = [2.0**e for e in range(lo, hi + 1, step)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(round(v)))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(pos) / 1.4, max(pos) * 1.4)
    ax.set_xlabel(label)


def _log_axis(axis, values: Sequence[float], fmt, max_ticks: int = 9) -> None:
    """A log10 axis labelled by `fmt`: ticks at 1-2-...-9, 1-2-5, 1-3 or 1 per decade, the densest
    that keeps at most `max_ticks` labels over the range of `values`."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    pos = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    decades = math.log10(max(pos) / min(pos)) + 0.35 if pos else 3.0  # + the axis margins
    for subs in (tuple(float(k) for k in range(1, 10)), (1.0, 2.0, 5.0), (1.0, 3.0), (1.0,)):
        if decades * len(subs) + 1 <= max_ticks:
            break
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=max_ticks + 4))
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))
    axis.set_minor_formatter(NullFormatter())


def _time_fmt(v: float) -> str:
    return human_time(v, 3)



def _colors(names: Sequence[str]) -> dict[str, str]:
    """A colour per name, the same for the same set of names in every figure; native in black."""
    from matplotlib import colormaps

    tab = list(colormaps["tab10"].colors) + list(colormaps["tab20"].colors[1::2])
    out, i = {}, 0
    for n in sorted(names, key=algorithm_order):
        if n == "native":
            out[n] = "black"
        else:
            out[n] = tab[i % len(tab)]
            i += 1
    return out


def _legend(ax, n_entries: int) -> None:
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              title=None if n_entries else None, frameon=False)


# --------------------------------------------------------------------------- figures


def size_label(collective: str) -> str:
    """The x-axis label of a collective: its size definition (nccl-tests')."""
    from ccbench.core.collectives import COLLECTIVES

    c = COLLECTIVES.get(collective)
    return f"size: {c.size_definition}" if c is not None else "size"


def ci_label(rows: Sequence) -> str:
    """What the stored intervals of `rows` are, for a legend: over launches when a row has several."""
    return "95% CI over launches" if any(r.n_launches > 1 for r in rows) else "95% CI of median"


def latency_figure(curves: Mapping[str, Sequence], fits: Mapping[str, Sequence], title: str,
                   xlabel: str = "size"):
    """Median time vs size (log-log) per algorithm, 95% CI bands, fitted alpha + beta n dashed.

    `curves`: {algorithm: rows (``ccbench.store.results.Row``) sorted by size}; `fits`:
    {algorithm: segments (``ccbench.analysis.fit.Segment``: nbytes_lo, nbytes_hi, alpha_s, beta_s_per_byte)} from
    ``ccbench.analysis.fit`` (Hockney's model, segmented at protocol changes).  The bands are the
    stored intervals: over launches for rows of several launches (the legend says which, ``ci_label``).
    """
    import numpy as np

    fig = _new_figure(9.0, 5.2)
    ax = fig.add_subplot()
    colors = _colors(list(curves))
    sizes, times = [], []
    for name, rows in curves.items():
        x = [r.nbytes for r in rows]
        ax.fill_between(x, [r.ci_low_s for r in rows], [r.ci_high_s for r in rows], color=colors[name],
                        alpha=0.18, linewidth=0)
        ax.plot(x, [r.median_s for r in rows], marker="o", markersize=4, color=colors[name], label=name,
                linewidth=1.6 if name == "native" else 1.2)
        sizes += x
        times += [r.ci_low_s for r in rows] + [r.ci_high_s for r in rows]
        for seg in fits.get(name, ()):
            lo, hi = max(seg.nbytes_lo, 1), max(seg.nbytes_hi, 1)
            n = np.geomspace(lo, hi, 32) if hi > lo else np.array([lo])
            t = seg.alpha_s + seg.beta_s_per_byte * n
            ax.plot(n, t, linestyle="--", linewidth=1.0, color=colors[name], alpha=0.9)
    if fits:
        ax.plot([], [], linestyle="--", color="grey", label="fitted α + β·n")
    ax.plot([], [], marker="s", linestyle="none", color="grey", alpha=0.3, markersize=9,
            label=ci_label([r for rows in curves.values() for r in rows]))
    ax.set_yscale("log")
    _size_axis(ax, sizes, xlabel)
    _log_axis(ax.yaxis, times, _time_fmt)
    ax.set_ylabel("time per call (median)")
    ax.set_title(title, fontsize="medium", loc="left")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, len(curves))
    return fig


def busbw_figure(curves: Mapping[str, Sequence], title: str, xlabel: str = "size"):
    """Bus bandwidth (GB/s, nccl-tests' definition, stored per row) vs size per algorithm."""
    fig = _new_figure(9.0, 5.2)
    ax = fig.add_subplot()
    colors = _colors(list(curves))
    sizes, vals = [], []
    for name, rows in curves.items():
        pts = [(r.nbytes, r.busbw_gbs) for r in rows if r.busbw_gbs and r.busbw_gbs > 0]
        if not pts:
            continue
        ax.plot(*zip(*pts, strict=True), marker="o", markersize=4, color=colors[name], label=name,
                linewidth=1.6 if name == "native" else 1.2)
        sizes += [p[0] for p in pts]
        vals += [p[1] for p in pts]
    ax.set_yscale("log")
    _size_axis(ax, sizes, xlabel)
    _log_axis(ax.yaxis, vals, lambda v: f"{v:g}")
    ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 10⁹ B)")
    ax.set_title(title, fontsize="medium", loc="left")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, len(curves))
    return fig


def predicted_figure(checks: Sequence, title: str, tolerance: float):
    """Measured vs predicted time per modelled case (``ccbench.analysis.predict.ModelCheck``).

    The diagonal is a perfect model; the band is +-`tolerance` around it.
    """
    import numpy as np

    fig = _new_figure(7.6, 6.0)
    ax = fig.add_subplot()
    names = sorted(dict.fromkeys(c.algorithm for c in checks), key=algorithm_order)
    colors = _colors(names)
    allv = []
    for name in names:
        pts = [(c.predicted_s, c.measured_s) for c in checks
               if c.algorithm == name and c.predicted_s and c.predicted_s > 0]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=22, color=colors[name], label=name, zorder=3)
            allv += [v for p in pts for v in p]
    if allv:
        lo, hi = min(allv) / 1.5, max(allv) * 1.5
        d = np.geomspace(lo, hi, 8)
        ax.fill_between(d, d * (1 - tolerance), d * (1 + tolerance), color="grey", alpha=0.15, linewidth=0,
                        label=f"within ±{tolerance:.0%}")
        ax.plot(d, d, color="grey", linewidth=1.0, label="measured = predicted")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axis(ax.xaxis, allv, _time_fmt, max_ticks=7)
    _log_axis(ax.yaxis, allv, _time_fmt)
    ax.set_xlabel("predicted time (α-β-γ model)")
    ax.set_ylabel("measured time (median)")
    ax.set_title(title, fontsize="medium", loc="left")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, len(names))
    return fig


def compare_figure(panels: Mapping[str, Sequence[Mapping]], title: str):
    """Time ratios (other / baseline) vs size, one panel per collective, one line per curve and run.

    `panels`: {collective: pairs}, each pair a dict with label (the curve: algorithm and
    variant), nbytes, ratio, significant and other (the other run's label).  Colour: the
    curve; line style: the other run; filled markers: called faster or slower; hollow:
    noise or undetermined.
    """
    from matplotlib.lines import Line2D

    n = len(panels)
    cols = 1 if n == 1 else 2
    rows_n = math.ceil(n / cols)
    fig = _new_figure(7.4 * cols + 1.8, 3.6 * rows_n + 0.6)
    axes = fig.subplots(rows_n, cols, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    runs = list(dict.fromkeys(p["other"] for pairs in panels.values() for p in pairs))
    styles = dict(zip(runs, ("-", "--", ":", "-."), strict=False))
    for ax, (coll, pairs) in zip(axes.flat, panels.items(), strict=False):
        labels = sorted(dict.fromkeys(p["label"] for p in pairs), key=algorithm_order)
        colors = _colors(labels)
        sizes, ratios = [], []
        for lab in labels:
            for run in runs:
                pts = sorted((p for p in pairs if p["label"] == lab and p["other"] == run
                              and p["ratio"] and p["ratio"] > 0 and math.isfinite(p["ratio"])),
                             key=lambda p: p["nbytes"])
                if not pts:
                    continue
                c = colors[lab]
                x, y = [p["nbytes"] for p in pts], [p["ratio"] for p in pts]
                ax.plot(x, y, color=c, linestyle=styles.get(run, "-"), linewidth=1.1)
                sig = [(a, b) for a, b, p in zip(x, y, pts, strict=True) if p["significant"]]
                non = [(a, b) for a, b, p in zip(x, y, pts, strict=True) if not p["significant"]]
                if sig:
                    ax.scatter(*zip(*sig, strict=True), color=c, s=26, zorder=3)
                if non:
                    ax.scatter(*zip(*non, strict=True), facecolors="white", edgecolors=c, s=26, zorder=3)
                sizes += x
                ratios += y
        ax.axhline(1.0, color="grey", linewidth=1.0)
        ax.set_yscale("log")
        _size_axis(ax, sizes, size_label(coll))
        _log_axis(ax.yaxis, ratios + [1.0], lambda v: f"{v:g}×")
        ax.set_ylabel("time ratio (other / baseline)")
        ax.set_title(coll, fontsize="medium", loc="left")
        ax.grid(True, which="major", alpha=0.3)
        handles = [Line2D([], [], color=colors[lab], label=lab) for lab in labels]
        if len(runs) > 1:
            handles += [Line2D([], [], color="grey", linestyle=styles[r], label=f"run {r}") for r in runs]
        handles += [Line2D([], [], color="grey", marker="o", linestyle="none", label="faster or slower"),
                    Line2D([], [], color="grey", marker="o", markerfacecolor="white", linestyle="none",
                           label="noise or undetermined")]
        ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, frameon=False)
    fig.suptitle(title, fontsize="medium")
    return fig


def bar_panels_figure(panels: Mapping[str, Mapping[str, Mapping[str, Mapping]]], title: str, xlabel: str,
                      fmt=_time_fmt, *, log: bool = False, ref: float | None = None, ref_label: str | None = None,
                      legend_title: str | None = None, hollow_label: str | None = None,
                      whisker_label: str = "95% CI"):
    """Horizontal grouped bars, one panel per key of `panels`, for values that have no size axis.

    `panels`: {panel title: {group (a y label): {series (a colour): bar}}}, each bar a dict
    with ``value`` and optionally ``lo``/``hi`` (drawn as a whisker, e.g. a 95% CI, named
    `whisker_label` in the legend) and ``hollow`` (drawn as an outline, e.g. a difference
    within noise).  The value axis is
    labelled by `fmt` (times in ns/µs/ms/s by default), linear from 0 unless `log`; `ref`
    draws a vertical reference line (e.g. a ratio of 1), where bars on a log axis start.
    """
    from matplotlib.patches import Patch

    series = list(dict.fromkeys(s for groups in panels.values() for bars in groups.values() for s in bars))
    colors = _colors(series)
    heights = [sum(max(len(b), 1) + 0.8 for b in groups.values()) for groups in panels.values()]
    fig = _new_figure(10.0, min(1.2 + 0.26 * sum(heights) + 0.5 * len(panels), 60.0))
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=[max(h, 2.0) for h in heights])[:, 0]
    values = [v for groups in panels.values() for bars in groups.values() for b in bars.values()
              for v in (b["value"], b.get("lo"), b.get("hi")) if v is not None and math.isfinite(v)]
    positive = [v for v in values if v > 0]
    # log axis: bars start at the reference (a ratio of 1) when there is one, else below the smallest value
    floor = min(positive + ([ref] if ref else [])) / 1.5 if positive else 1.0
    base = ref if log and ref else floor
    hollow_seen = False
    for ax, (panel, groups) in zip(axes, panels.items(), strict=True):
        y, ticks, labels = 0.0, [], []
        for group, bars in groups.items():
            n = len(bars)
            for i, (name, b) in enumerate(bars.items()):
                pos = y + i
                v = b["value"]
                if v is None or not math.isfinite(v) or (log and v <= 0):
                    continue
                hollow = bool(b.get("hollow"))
                hollow_seen |= hollow
                left = base if log else 0.0
                ax.barh(pos, v - left, left=left, height=0.8, color="white" if hollow else colors[name],
                        edgecolor=colors[name], linewidth=1.2)
                lo, hi = b.get("lo"), b.get("hi")
                end = v
                if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
                    ax.errorbar(v, pos, xerr=[[max(v - lo, 0.0)], [max(hi - v, 0.0)]], fmt="none",
                                ecolor="#444", elinewidth=1.0, capsize=3)
                    end = max(v, hi)
                if v < left:  # a bar to the left of the reference: its value on its left
                    ax.text(min(v, lo if lo is not None else v), pos, fmt(v) + " ", va="center", ha="right",
                            fontsize="x-small", color="#333")
                else:
                    ax.text(end, pos, " " + fmt(v), va="center", ha="left", fontsize="x-small", color="#333")
            ticks.append(y + (n - 1) / 2)
            labels.append(group)
            y += n + 0.8
        ax.set_yticks(ticks, labels, fontsize="small")
        ax.set_ylim(y - 0.8 - 0.4, -0.6)  # the bars' extent, first group at the top
        if ref is not None:
            ax.axvline(ref, color="grey", linewidth=1.0, linestyle="--")
        if log:
            ax.set_xscale("log")
            _log_axis(ax.xaxis, positive + ([ref] if ref else []), fmt)
            lo_v, hi_v = min(positive + ([ref] if ref else [])), max(positive + ([ref] if ref else []))
            room = (hi_v / lo_v) ** 0.25 * 1.1  # room for the values beside the bars
            ax.set_xlim(lo_v / room if ref else floor, hi_v * room)
        else:
            from matplotlib.ticker import FuncFormatter

            ax.set_xlim(0, max(values + [ref or 0.0]) * 1.15 if values else 1.0)  # room for the values
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v) if v else "0"))
        ax.grid(True, axis="x", which="major", alpha=0.3)
        ax.set_title(panel, fontsize="medium", loc="left")
        ax.set_xlabel(xlabel)
    handles = [Patch(facecolor=colors[s], edgecolor=colors[s], label=s) for s in series]
    if hollow_seen and hollow_label:
        handles.append(Patch(facecolor="white", edgecolor="grey", label=hollow_label))
    if ref is not None and ref_label:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="grey", linestyle="--", label=ref_label))
    if any(b.get("lo") is not None for groups in panels.values() for bars in groups.values() for b in bars.values()):
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color="#444", marker="|", linestyle="-", markersize=8, label=whisker_label))
    axes[0].legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                   borderaxespad=0.0, frameon=False, title=legend_title, title_fontsize="small")
    fig.suptitle(title, fontsize="medium")
    return fig
