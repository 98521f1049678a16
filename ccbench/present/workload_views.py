"""Terminal tables of stored workload runs; every number shown comes from a stored row."""


from rich.table import Table

from ccbench.core.units import fmt_time, format_size
from ccbench.present.views import run_header
from ccbench.store.run import Run, open_run
from ccbench.store.workload_rows import KIND, WorkloadRow

__all__ = ["show_workload", "workload_tables"]

MAX_PART_ROWS = 40  # a step with more calls gets a one-line summary instead of a parts table


def _check(r: WorkloadRow) -> str:
    return "ok" if r.ok else f"[red bold]FAILED ({r.nwrong} wrong)[/]"


def _gbs(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.3f}" if seconds > 0 else "-"


def _steps_table(meta: dict, steps: list[WorkloadRow]) -> Table:
    w = steps[0].workload
    t = Table(title=f"{w} at {steps[0].nranks} ranks: one step's collectives "
                    f"(size = the calls' buffers, nccl-tests definitions; algbw = size / median)",
              title_justify="left", header_style="bold")
    cols = ["variant", "algorithm"] + (["ranks/comm"] if w == "moe" else ["tensors"])
    cols += ["calls", "size", "median", "95% CI", "algbw GB/s", "sent (counted)", "n", "flags", "check"]
    for col in cols:
        left = col in ("variant", "algorithm", "flags", "check")
        t.add_column(col, justify="left" if left else "right", no_wrap=col in ("algorithm", "median", "size"))
    for r in steps:
        t.add_row(r.variant, r.algorithm.replace(",", "\n"), str(r.group_ranks if w == "moe" else r.ntensors),
                  str(r.ncalls), format_size(r.nbytes), fmt_time(r.median_s),
                  f"{fmt_time(r.ci_low_s)}-{fmt_time(r.ci_high_s)}", _gbs(r.nbytes, r.median_s),
                  "-" if r.bytes_sent_total is None else format_size(r.bytes_sent_total),
                  str(r.samples), ",".join(r.flags), _check(r))
    return t


def _parts_table(step: WorkloadRow, parts: list[WorkloadRow]) -> Table:
    total = sum(p.median_s for p in parts)
    t = Table(title=f"{step.variant}, {step.algorithm}: per call (median of its time within the timed steps; "
                    "share = of the calls' sum)",
              title_justify="left", header_style="bold")
    for col in ("#", "part", "collective", "tensors", "size", "median", "share", "algbw GB/s", "check"):
        t.add_column(col, justify="left" if col in ("part", "collective", "check") else "right")
    for p in parts:
        t.add_row(str(p.part), p.label, p.collective, str(p.ntensors), format_size(p.nbytes), fmt_time(p.median_s),
                  f"{p.median_s / total:.0%}" if total > 0 else "-", _gbs(p.nbytes, p.median_s), _check(p))
    return t


def _overlap_table(rows: list[WorkloadRow]) -> Table:
    t = Table(title=f"overlap at {rows[0].nranks} ranks: non-blocking collective + compute (OSU definition: "
                    "overlap = 100 (1 - (total - compute) / comm alone))", title_justify="left", header_style="bold")
    for col in ("collective", "variant", "size", "comm alone", "compute", "total", "overlap", "n", "flags", "check"):
        t.add_column(col, justify="left" if col in ("collective", "variant", "flags", "check") else "right")
    for r in rows:
        t.add_row(r.collective, r.variant, format_size(r.nbytes), fmt_time(r.comm_s), fmt_time(r.compute_s),
                  fmt_time(r.total_s), f"{r.overlap_pct:.0f}%", str(r.samples), ",".join(r.flags), _check(r))
    return t


def _straggler_table(rows: list[WorkloadRow]) -> Table:
    r0 = rows[0]
    t = Table(title=f"straggler at {r0.nranks} ranks: {r0.variant} before each {r0.collective}; "
                    "slowdown = (median late - median on time) / delay", title_justify="left", header_style="bold")
    for col in ("algorithm", "size", "on time", "one rank late", "slowdown", "n", "flags", "check"):
        t.add_column(col, justify="left" if col in ("algorithm", "flags", "check") else "right")
    for r in rows:
        t.add_row(r.algorithm, format_size(r.nbytes), fmt_time(r.baseline_s), fmt_time(r.median_s),
                  f"{r.slowdown:.2f}".replace("-0.00", "0.00"), str(r.samples), ",".join(r.flags), _check(r))
    return t


def workload_tables(meta: dict, rows: list[WorkloadRow]) -> list:
    """The tables (and one-line notes) of a workload run."""
    if not rows:
        return []
    if rows[0].workload == "overlap":
        return [_overlap_table(rows)]
    if rows[0].workload == "straggler":
        return [_straggler_table(rows)]
    steps, parts, out = [], {}, []
    for r in rows:
        if r.part == -1:
            steps.append(r)
            parts[len(steps) - 1] = []
        elif steps:
            parts[len(steps) - 1].append(r)
    out.append(_steps_table(meta, steps))
    for i, step in enumerate(steps):
        ps = parts[i]
        if len(ps) <= MAX_PART_ROWS:
            out.append(_parts_table(step, ps))
        else:
            med = sorted(p.median_s for p in ps)
            out.append(f"{step.variant}, {step.algorithm}: {len(ps)} calls, per call median "
                       f"{fmt_time(med[len(med) // 2])} (fastest {fmt_time(med[0])}, slowest {fmt_time(med[-1])}); "
                       "every call's row is in cases.csv")
    return out


def show_workload(run, console, show_table: bool = True) -> None:
    """Print a stored workload run (a `Run`, or a path opened here)."""
    if not isinstance(run, Run):
        run = open_run(run, kinds=(KIND,))
    path, meta, rows, warnings = run.path, run.meta, run.rows, run.warnings
    if show_table:
        console.print(run_header(meta, path))
        m = meta.get("model")
        if m:
            console.print(f"model {m['name']}: {m['tensors']} tensors, {m['params']:,} parameters "
                          f"({m['source']})")
        for t in workload_tables(meta, rows):
            console.print(t)
    for w in warnings:
        console.print(f"[yellow]warning: {w}[/]")
    for s in meta.get("skipped", []):
        console.print(f"skipped {s['what']}: {s['why']}")
    bad = [r for r in rows if not r.ok]
    console.print(f"{len(rows)} rows in {path}" + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct"))
