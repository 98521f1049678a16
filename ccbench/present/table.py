"""One table model: built once (columns with their quantity, rows of values), rendered many ways.

A `Table` is data: a title, `Column`s that say which quantity they hold (and so how a value is
formatted: one formatter per quantity, ``QUANTITIES``) and how they align, and rows of raw values.
`to_rich` renders it for the terminal, `to_block` for the report pages (Markdown and HTML,
``ccbench.present.report.render_markdown`` / ``render_html``); each renderer picks the spelling
of the units (``QUANTITIES``: "us" in the terminal; ``PAGE_QUANTITIES``: "µs" on the pages, and
intervals of times in brackets as the pages' prose calls them).  A cell may hold a value of
another quantity than its column's (`Cell`: a table of parameters, one quantity per row), a note
after its value (`Noted`) or a style for the terminal (`Styled`).  The renderers know nothing
about benchmarks; the code that builds a table knows nothing about rendering.
After hyperfine's ``export`` module (one table, several renderers).
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ccbench.core.units import fmt_time, format_size, human_time

__all__ = ["DECIDED", "PAGE_QUANTITIES", "QUANTITIES", "SIGNIFICANT", "Cell", "Column", "Noted", "Styled", "Table",
           "fmt_bandwidth", "fmt_cv", "fmt_margin", "fmt_margin_ci", "fmt_model_ratio", "fmt_p", "fmt_percent",
           "fmt_ratio", "fmt_ratio_interval", "fmt_share", "fmt_slowdown", "fmt_time_ci", "fmt_time_per_byte",
           "render", "to_block", "to_rich"]


def _sig3(x) -> str:
    """Three significant digits, whole numbers from 1000 up (never an exponent there)."""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def fmt_p(p) -> str:
    """A p-value with two significant digits ("-" when there is none)."""
    return "-" if p is None else f"{p:.2g}"


def fmt_ratio(r) -> str:
    """A ratio (or any dimensionless number) with three significant digits, whole numbers from 1000 up."""
    return _sig3(r)


def fmt_ratio_interval(ci) -> str:
    """An interval of a ratio (low, high) as "low-high": "0.158-1.25"."""
    return f"{_sig3(ci[0])}-{_sig3(ci[1])}"


def fmt_bandwidth(gbs) -> str:
    """A bandwidth in GB/s (1e9 bytes per second; the unit is the column's) with three significant digits, whole
    numbers from 1000 up; "inf" for an infinite one (a fitted beta of 0), "-" for NaN."""
    if gbs != gbs:
        return "-"
    return "inf" if math.isinf(gbs) else _sig3(gbs)


def fmt_time_per_byte(s_per_byte) -> str:
    """A time per byte (a reduction's gamma, a copy's beta) with three significant digits, in ps/B below 1 ns/B
    ("14.7 ps/B"), in ns/B from there ("1 ns/B"); "-" for NaN."""
    if s_per_byte != s_per_byte:
        return "-"
    ps = s_per_byte * 1e12
    return f"{ps:.3g} ps/B" if abs(float(f"{ps:.3g}")) < 1000 else f"{_sig3(ps / 1000)} ns/B"


def fmt_slowdown(v) -> str:
    """A straggler's slowdown (the fraction of the delay passed on) with two decimals, never "-0.00"."""
    return f"{v:.2f}".replace("-0.00", "0.00")


def fmt_percent(v) -> str:
    """A fraction as a percentage with one decimal (0.243 -> "24.3%"): a margin between two times."""
    return f"{v:.1%}"


def fmt_share(v) -> str:
    """A share of a whole (a call's part of a step, of a limit; a relative residual; an overlap) as a whole
    percentage: 0.243 -> "24%"."""
    return f"{v:.0%}"


def fmt_model_ratio(v) -> str:
    """A measured time over a model's prediction, with two decimals: "0.49"."""
    return f"{v:.2f}"


def fmt_cv(v) -> str:
    """A coefficient of variation as a percentage with two significant digits (0.034 -> "3.4%", 0.12 -> "12%")."""
    pct = 100.0 * v
    return f"{pct:.2g}%" if pct < 9.95 else f"{pct:.0f}%"


def fmt_margin(m) -> str:
    """A relative difference with its sign, two significant digits under 10% ("+3.4%", "-12%", "+480%")."""
    pct = 100.0 * m
    return f"{pct:+.2g}%" if abs(pct) < 9.95 else f"{pct:+.0f}%"


def fmt_margin_ci(ci) -> str:
    """An interval of a ratio (low, high) as relative differences: "+12% to +31%"."""
    return f"{fmt_margin(ci[0] - 1.0)} to {fmt_margin(ci[1] - 1.0)}"


def fmt_time_ci(ci) -> str:
    """An interval of times (low, high) as the terminal's tables write it: "1.2 us - 3.4 us"."""
    return f"{fmt_time(ci[0])} - {fmt_time(ci[1])}"


def _brackets(fmt: Callable) -> Callable:
    """The formatter of an interval (low, high) of a quantity formatted by `fmt`: "[low, high]"."""
    return lambda ci: f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _with_interval(fmt: Callable) -> Callable:
    """The formatter of a value with its interval (value, low, high): "value [low, high]"."""
    return lambda v: f"{fmt(v[0])} [{fmt(v[1])}, {fmt(v[2])}]"


def _quantities(time: Callable, time_ci: Callable) -> dict[str, Callable]:
    """Every quantity's formatter, times written by `time` and intervals of times by `time_ci`."""
    return {
        "text": str,
        "count": str,
        "time": time,
        "size": format_size,
        "p": fmt_p,
        "ratio": fmt_ratio,
        "ratio_ci": fmt_ratio_interval,
        "percent": fmt_percent,
        "share": fmt_share,
        "model_ratio": fmt_model_ratio,
        "cv": fmt_cv,
        "margin_ci": fmt_margin_ci,
        "time_ci": time_ci,
        "median_ci": _with_interval(time),
        "bandwidth": fmt_bandwidth,
        "bandwidth_ci": _brackets(fmt_bandwidth),
        "time_per_byte": fmt_time_per_byte,
        "time_per_byte_ci": _brackets(fmt_time_per_byte),
        "size_range": lambda r: f"{format_size(r[0])} - {format_size(r[1])}",
        "r2": lambda v: f"{v:.3f}",
        "slowdown": fmt_slowdown,
    }


#: How a significance verdict (True, False, or None without a test) is worded.
SIGNIFICANT = {None: "-", True: "yes", False: "no (noise)"}

#: How a launch-level verdict of the fastest against its runner-up (``ccbench.analysis.fastest``) is worded.
DECIDED = {None: "-", "faster": "yes", "noise": "no (noise)", "undetermined": "undetermined",
           "slower": "no (launches disagree)"}

#: The formatter of each quantity a column can hold, as the terminal writes it (None is shown as "-"): "time" in
#: s, ms, us or ns; "time_ci" an interval of times ("1.2 us - 3.4 us"); "median_ci" a median with its interval
#: (median, low, high: "2 us [1.9 us, 2.2 us]"); "ratio" and "ratio_ci" ("0.158-1.25"); "model_ratio" measured /
#: predicted ("0.49"); "percent" a margin ("12.4%"), "share" a part of a whole ("12%"); "bandwidth" in GB/s and
#: "bandwidth_ci" ("[3.47, 4.63]"); "time_per_byte" in ps/B or ns/B and "time_per_byte_ci"; "size_range" (low, high) in
#: bytes; "r2" a coefficient of determination; "slowdown" a straggler's.
QUANTITIES: dict[str, Callable] = _quantities(fmt_time, fmt_time_ci)

#: The formatters of the report pages (``to_block``): times with "µs", intervals of times in brackets.
PAGE_QUANTITIES: dict[str, Callable] = _quantities(human_time, _brackets(human_time))


@dataclass(frozen=True)
class Styled:
    """A cell value shown with a style in the terminal (e.g. "red"), plain elsewhere."""

    value: object
    style: str


@dataclass(frozen=True)
class Noted:
    """A cell value followed by a note in every renderer ("2 us [1.9 us, 2.2 us] WRONG (3)")."""

    value: object
    note: str


@dataclass(frozen=True)
class Cell:
    """A cell value of another quantity than its column's (in a table whose rows are different quantities)."""

    value: object
    quantity: str


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


@dataclass(frozen=True)
class Column:
    """A column: its header (and, where the pages spell it out, its `page_header`), the quantity it holds (or a
    formatter of its own), its layout."""

    header: str
    quantity: str = "text"
    fmt: Callable | None = None
    align: str | None = None  # "left" or "right"; default: right for numbers (or a fmt), left for text
    no_wrap: bool = False
    min_width: int | None = None
    overflow: str | None = None
    page_header: str | None = None

    @property
    def right(self) -> bool:
        """True when the column is right-aligned."""
        return self.align == "right" if self.align else (self.quantity != "text" or self.fmt is not None)

    def format(self, value, quantities: Mapping[str, Callable] | None = None) -> str:
        """The text of one cell (`quantities` overrides some of ``QUANTITIES``' formatters)."""
        if isinstance(value, Styled):
            value = value.value
        note = ""
        if isinstance(value, Noted):
            value, note = value.value, " " + value.note
        fmt, quantity = self.fmt, self.quantity
        if isinstance(value, Cell):
            value, fmt, quantity = value.value, None, value.quantity
        if value is None or (fmt is None and isinstance(value, tuple) and any(_missing(v) for v in value)):
            return "-" + note  # no value, or an interval of a quantity without a bound
        if isinstance(value, str) and fmt is None and quantity != "text":
            return value + note  # already formatted (e.g. "-", "too few launches")
        return (fmt or {**QUANTITIES, **(quantities or {})}[quantity])(value) + note


@dataclass
class Table:
    """A titled table of raw values, formatted per column."""

    title: str
    columns: list[Column]
    rows: list[list] = field(default_factory=list)
    caption: str = ""
    section_ends: set[int] = field(default_factory=set)

    def add_row(self, *values, end_section: bool = False) -> None:
        """Append one row (one value per column); `end_section` draws a rule below it in the terminal."""
        if len(values) != len(self.columns):
            raise ValueError(f"{len(values)} values for {len(self.columns)} columns in table {self.title!r}")
        self.rows.append(list(values))
        if end_section:
            self.section_ends.add(len(self.rows) - 1)

    def cells(self, quantities: Mapping[str, Callable] | None = None) -> list[list[str]]:
        """Every row as formatted text (no styles); `quantities` overrides some formatters."""
        return [[c.format(v, quantities) for c, v in zip(self.columns, row, strict=True)] for row in self.rows]


def to_rich(table: Table):
    """The table as a ``rich.table.Table`` (title left, bold header; styled cells coloured)."""
    from rich.table import Table as RichTable

    t = RichTable(title=table.title, title_justify="left", header_style="bold")
    for c in table.columns:
        kw = {"justify": "right" if c.right else "left"}
        if c.no_wrap:
            kw["no_wrap"] = True
        if c.min_width is not None:
            kw["min_width"] = c.min_width
        if c.overflow is not None:
            kw["overflow"] = c.overflow
        t.add_column(c.header, **kw)
    for i, row in enumerate(table.rows):
        cells = []
        for c, v in zip(table.columns, row, strict=True):
            text = c.format(v)
            cells.append(f"[{v.style}]{text}[/]" if isinstance(v, Styled) and v.style else text)
        t.add_row(*cells, end_section=i in table.section_ends)
    if table.caption:
        t.caption = table.caption
        t.caption_justify = "left"
    return t


def to_block(table: Table, *, with_title: bool = False, with_caption: bool = False,
             quantities: Mapping[str, Callable] | None = None) -> list:
    """The table as report-page blocks: ``("table", headers, rows, right-aligned column indexes)``.

    Values are written as the pages write them (``PAGE_QUANTITIES``: "µs", intervals of times in
    brackets), headers too (a column's `page_header`); `quantities` overrides some of those
    formatters.  `with_title` / `with_caption` add the title before and the caption after it as
    paragraphs.
    """
    right = {i for i, c in enumerate(table.columns) if c.right}
    blocks: list = [("p", table.title)] if with_title and table.title else []
    blocks.append(("table", [c.page_header or c.header for c in table.columns],
                   table.cells({**PAGE_QUANTITIES, **(quantities or {})}), right))
    if with_caption and table.caption:
        blocks.append(("p", table.caption))
    return blocks


def render(tables: Sequence, console) -> None:
    """Print tables (and plain lines of text between them) to a rich console."""
    for t in tables:
        console.print(to_rich(t) if isinstance(t, Table) else t)
