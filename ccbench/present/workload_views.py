"""Terminal tables of stored workload runs; every number shown comes from a stored row.

A run of several launches shows, per measurement (a step, an overlap or straggler row), its
launches and the coefficients of variation between and within them (``LAUNCH_COLUMNS``).
"""

from collections.abc import Sequence

from ccbench.core.units import fmt_time
from ccbench.present.table import Column, Styled, Table, render
from ccbench.present.views import LAUNCH_COLUMNS, flag_legend, launch_cells, launch_notes, run_header
from ccbench.store.launches import LAUNCH_SPREAD
from ccbench.store.run import Run, open_run
from ccbench.store.workload_rows import KIND, WorkloadRow

__all__ = ["show_workload", "workload_tables"]

MAX_PART_ROWS = 40  # a step with more calls gets a one-line summary instead of a parts table


def _check(r: WorkloadRow):
    return "ok" if r.ok else Styled(f"FAILED ({r.nwrong} wrong)", "red bold")


def _gbs(nbytes: int, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.3f}" if seconds > 0 else "-"


def _ci(ci) -> str:
    return f"{fmt_time(ci[0])}-{fmt_time(ci[1])}"


_TAIL = [Column("n", "count"), Column("flags"), Column("check")]


def _several(rows: Sequence[WorkloadRow]) -> bool:
    return any(r.n_launches > 1 for r in rows)


def _tail(several: bool) -> list[Column]:
    """The last columns: samples, (launches, CV between and within,) flags, check."""
    return [_TAIL[0], *(LAUNCH_COLUMNS if several else ()), *_TAIL[1:]]


def _tail_cells(r: WorkloadRow, several: bool, columns: bool = True) -> list:
    """Values of `_tail`: with several launches the launch columns (unless not `columns`) and flags that wrap."""
    return [r.samples, *(launch_cells(r) if several and columns else ()), (", " if several else ",").join(r.flags),
            _check(r)]


def _steps_table(meta: dict, steps: list[WorkloadRow]) -> Table:
    """One step's collectives per variant and algorithm (the launches of a run of several: `_steps_launch_table`)."""
    several = _several(steps)
    w = steps[0].workload
    t = Table(f"{w} at {steps[0].nranks} ranks: one step's collectives "
              f"(size = the calls' buffers, nccl-tests definitions; algbw = size / median)",
              [Column("variant"), Column("algorithm", no_wrap=True),
               Column("ranks/comm" if w == "moe" else "tensors", "count"), Column("calls", "count"),
               Column("size", "size", no_wrap=True), Column("median", "time", no_wrap=True),
               Column("95% CI", fmt=_ci), Column("algbw GB/s", align="right"), Column("sent (counted)", "size"),
               *_TAIL])
    for r in steps:
        t.add_row(r.variant, r.algorithm.replace(",", "\n"), r.group_ranks if w == "moe" else r.ntensors, r.ncalls,
                  r.nbytes, r.median_s, (r.ci_low_s, r.ci_high_s), _gbs(r.nbytes, r.median_s), r.bytes_sent_total,
                  *_tail_cells(r, several, columns=False))
    return t


def _steps_launch_table(steps: list[WorkloadRow]) -> Table:
    """A step's launches (a run of several): median and 95% CI over launches, launches, CV between and within."""
    t = Table(f"{steps[0].workload} at {steps[0].nranks} ranks: launch to launch",
              [Column("variant"), Column("algorithm", no_wrap=True), Column("median", "time"),
               Column("95% CI", fmt=_ci), *LAUNCH_COLUMNS, Column("flag")])
    for r in steps:
        t.add_row(r.variant, r.algorithm.replace(",", "\n"), r.median_s, (r.ci_low_s, r.ci_high_s), *launch_cells(r),
                  LAUNCH_SPREAD if LAUNCH_SPREAD in r.flags else "")
    return t


def _parts_table(step: WorkloadRow, parts: list[WorkloadRow]) -> Table:
    total = sum(p.median_s for p in parts)
    t = Table(f"{step.variant}, {step.algorithm}: per call (median of its time within the timed steps; "
              "share = of the calls' sum)",
              [Column("#", "count"), Column("part"), Column("collective"), Column("tensors", "count"),
               Column("size", "size"), Column("median", "time"), Column("share", "share"),
               Column("algbw GB/s", align="right"), Column("check")])
    for p in parts:
        t.add_row(p.part, p.label, p.collective, p.ntensors, p.nbytes, p.median_s,
                  p.median_s / total if total > 0 else None, _gbs(p.nbytes, p.median_s), _check(p))
    return t


def _overlap_table(rows: list[WorkloadRow]) -> Table:
    several = _several(rows)
    t = Table(f"overlap at {rows[0].nranks} ranks (times: medians): OSU = max(0, 100 - (overall - (cpu - test)) / "
              "comm x 100) on the ranks' means; IMB = 100 max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, "
              "t_CPU))) on the slowest rank's",
              [Column("algorithm"), Column("variant"), Column("size", "size"), Column("comm alone", "time"),
               Column("compute", "time"), Column("total", "time"), Column("OSU", "share"), Column("IMB", "share"),
               *_tail(several)])
    for r in rows:
        imb = None if r.overlap_imb_pct is None else r.overlap_imb_pct / 100
        t.add_row(r.algorithm.partition("=")[2], r.variant, r.nbytes, r.comm_s, r.compute_s, r.total_s,
                  r.overlap_pct / 100, imb, *_tail_cells(r, several))
    return t


def _straggler_table(rows: list[WorkloadRow]) -> Table:
    several = _several(rows)
    r0 = rows[0]
    t = Table(f"straggler at {r0.nranks} ranks: {r0.variant} before each {r0.collective}; "
              "slowdown = (median late - median on time) / delay",
              [Column("algorithm"), Column("size", "size"), Column("on time", "time"),
               Column("one rank late", "time"), Column("slowdown", "slowdown"),
               *_tail(several)])
    for r in rows:
        t.add_row(r.algorithm, r.nbytes, r.baseline_s, r.median_s, r.slowdown, *_tail_cells(r, several))
    return t


def workload_tables(meta: dict, rows: list[WorkloadRow], calls: bool = True) -> list:
    """The tables (and one-line notes) of a workload run (`Table`s and strings); without `calls`, not those of
    each step's calls (what a brief view leaves to ``ccbench show``)."""
    if not rows:
        return []
    if rows[0].workload in ("overlap", "straggler"):
        table = (_overlap_table if rows[0].workload == "overlap" else _straggler_table)(rows)
        return [table, *(launch_notes(rows) if _several(rows) else [])]
    steps, parts, out = [], {}, []
    for r in rows:
        if r.part == -1:
            steps.append(r)
            parts[len(steps) - 1] = []
        elif steps:
            parts[len(steps) - 1].append(r)
    out.append(_steps_table(meta, steps))
    if _several(steps):
        out += [_steps_launch_table(steps), *launch_notes(steps)]
    for i, step in enumerate(steps if calls else ()):
        ps = parts[i]
        if len(ps) <= MAX_PART_ROWS:
            out.append(_parts_table(step, ps))
        else:
            med = sorted(p.median_s for p in ps)
            out.append(f"{step.variant}, {step.algorithm}: {len(ps)} calls, per call median "
                       f"{fmt_time(med[len(med) // 2])} (fastest {fmt_time(med[0])}, slowest {fmt_time(med[-1])}); "
                       "every call's row is in cases.csv")
    return out


def show_workload(run, console, show_table: bool = True, brief: bool = False) -> None:
    """Print a stored workload run (a `Run`, or a path opened here); `brief` (what a run prints when it ends): the
    per-call tables left to ``ccbench show``."""
    if not isinstance(run, Run):
        run = open_run(run, kinds=(KIND,))
    path, meta, rows, warnings = run.path, run.meta, run.rows, run.warnings
    if show_table:
        console.print(run_header(meta, path, rows))
        m = meta.get("model")
        if m:
            console.print(f"model {m['name']}: {m['tensors']} tensors, {m['params']:,} parameters "
                          f"({m['source']})")
        render(workload_tables(meta, rows, calls=not brief), console)
        legend = flag_legend(rows)
        if legend:
            console.print(legend, markup=False, highlight=False)
    for w in warnings:
        console.print(f"[yellow]warning: {w}[/]")
    for s in meta.get("skipped", []):
        console.print(f"skipped {s['what']}: {s['why']}")
    _print_bucketing(rows, console)
    bad = [r for r in rows if not r.ok]
    console.print(f"{len(rows)} rows in {path}" + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct")
                  + (f"; every call as tables: ccbench show {path}" if brief and show_table else ""))


def _print_bucketing(rows: Sequence[WorkloadRow], console) -> None:
    """A DDP run of several bucketings (caps, one call per tensor): the fastest per algorithm, the answer to
    "which bucket size is best?", decided against its runner-up at the launch level."""
    from ccbench.analysis.fastest import fastest_per_variant
    from ccbench.present.report import fastest_table
    from ccbench.present.table import to_rich

    if not rows or rows[0].workload != "ddp":
        return
    entries = [e for e in fastest_per_variant(rows) if e.what.endswith(": bucketing")]
    if entries:
        console.print(to_rich(fastest_table("fastest bucketing per algorithm (runner-up compared at the launch "
                                            "level)", entries, Column("algorithm"),
                                            lambda e: e.what.removesuffix(": bucketing"))))
