"""One table model: built once (columns with their quantity, rows of values), rendered many ways.

A `Table` is data: a title, `Column`s that say which quantity they hold (and so how a value is
formatted: ``ccbench.core.units``' one formatter per quantity) and how they align, and rows of
raw values.  `to_rich` renders it for the terminal, `to_block` for the report pages (Markdown
and HTML, ``ccbench.present.report.render_markdown`` / ``render_html``).  The renderers know
nothing about benchmarks; the code that builds a table knows nothing about rendering.
After hyperfine's ``export`` module (one table, several renderers).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ccbench.core.units import fmt_time, format_size

__all__ = ["DECIDED", "QUANTITIES", "SIGNIFICANT", "Column", "Styled", "Table", "fmt_cv", "fmt_margin",
           "fmt_margin_ci", "fmt_p", "fmt_percent", "fmt_ratio", "fmt_time_ci", "render", "to_block", "to_rich"]


def fmt_p(p) -> str:
    """A p-value with two significant digits ("-" when there is none)."""
    return "-" if p is None else f"{p:.2g}"


def fmt_ratio(r) -> str:
    """A ratio (or any dimensionless number) with three significant digits."""
    return f"{r:.3g}"


def fmt_percent(v) -> str:
    """A fraction as a percentage with one decimal (0.243 -> "24.3%")."""
    return f"{v:.1%}"


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
    """An interval of times (low, high): "1.2 us - 3.4 us"."""
    return f"{fmt_time(ci[0])} - {fmt_time(ci[1])}"


#: How a significance verdict (True, False, or None without a test) is worded.
SIGNIFICANT = {None: "-", True: "yes", False: "no (noise)"}

#: How a launch-level verdict of the fastest against its runner-up (``ccbench.analysis.fastest``) is worded.
DECIDED = {None: "-", "faster": "yes", "noise": "no (noise)", "undetermined": "undetermined",
           "slower": "no (launches disagree)"}

#: The formatter of each quantity a column can hold (None is shown as "-").
QUANTITIES: dict[str, Callable] = {
    "text": str,
    "count": str,
    "time": fmt_time,
    "size": format_size,
    "p": fmt_p,
    "ratio": fmt_ratio,
    "percent": fmt_percent,
    "cv": fmt_cv,
    "margin_ci": fmt_margin_ci,
    "time_ci": fmt_time_ci,
}


@dataclass(frozen=True)
class Styled:
    """A cell value shown with a style in the terminal (e.g. "red"), plain elsewhere."""

    value: object
    style: str


@dataclass(frozen=True)
class Column:
    """A column: its header, the quantity it holds (or a formatter of its own), its layout."""

    header: str
    quantity: str = "text"
    fmt: Callable | None = None
    align: str | None = None  # "left" or "right"; default: right for numbers (or a fmt), left for text
    no_wrap: bool = False
    min_width: int | None = None
    overflow: str | None = None

    @property
    def right(self) -> bool:
        """True when the column is right-aligned."""
        return self.align == "right" if self.align else (self.quantity != "text" or self.fmt is not None)

    def format(self, value, quantities: Mapping[str, Callable] | None = None) -> str:
        """The text of one cell (`quantities` overrides some of ``QUANTITIES``' formatters)."""
        if isinstance(value, Styled):
            value = value.value
        if value is None or (self.fmt is None and isinstance(value, tuple) and any(v is None for v in value)):
            return "-"  # no value, or an interval of a quantity without a bound
        if isinstance(value, str) and self.fmt is None and self.quantity != "text":
            return value  # already formatted (e.g. "-", "inf")
        return (self.fmt or {**QUANTITIES, **(quantities or {})}[self.quantity])(value)


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

    `with_title` / `with_caption` add the title before and the caption after it as paragraphs;
    `quantities` overrides formatters of ``QUANTITIES`` (e.g. "µs" for the pages' times).
    """
    right = {i for i, c in enumerate(table.columns) if c.right}
    blocks: list = [("p", table.title)] if with_title and table.title else []
    blocks.append(("table", [c.header for c in table.columns], table.cells(quantities), right))
    if with_caption and table.caption:
        blocks.append(("p", table.caption))
    return blocks


def render(tables: Sequence, console) -> None:
    """Print tables (and plain lines of text between them) to a rich console."""
    for t in tables:
        console.print(to_rich(t) if isinstance(t, Table) else t)
