"""``ccbench report`` of a training-workload run: the sweep report's page, tables and figures for workload rows.

The report goes where a sweep's does (a new ``RUN/report``, ``report-2`` ... directory;
``report.md``, the self-contained ``report.html`` and PNG figures, written with
``ccbench.present.report``'s page writer).  It starts with the run's provenance, then shows what
``ccbench show`` prints: for ddp, zero and moe the step time per variant and algorithm
(median and distribution-free 95% CI of the median, each sample the slowest rank's
step), the fastest algorithm per variant and overall against the runner-up, decided at the
launch level (``ccbench.analysis.fastest.fastest_of``), and per variant every call of the
step (bucket, layer collective, dispatch/combine); for overlap the OSU times and overlap
percentage per size; for stragglers the on-time and delayed medians and the slowdown.  A run
of several launches adds each measurement's launches and their spread (``launch_blocks``) and
says that its medians and intervals are over launches.
Every number is a stored row's value or a test of its launches.
"""

from collections.abc import Mapping, Sequence

from ccbench.analysis.fastest import fastest_per_variant, step_rows
from ccbench.core.units import format_size, human_time
from ccbench.present.report import (
    Report,
    add_figure,
    fastest_blocks,
    launch_blocks,
    launch_sentence,
    page_files,
    provenance_blocks,
)
from ccbench.present.table import Column, Noted, Table, fmt_share, to_block
from ccbench.store.run import Run
from ccbench.store.workload_rows import WorkloadRow

__all__ = ["MAX_PART_ROWS", "build_workload_report", "short_algorithm", "workload_blocks"]

#: A step with more calls than this gets a one-line summary instead of a per-call table.
MAX_PART_ROWS = 40
#: Most calls of a variant drawn in the per-call figure (more: that variant is left out).
MAX_PART_BARS = 24


def short_algorithm(algorithm: str) -> str:
    """"allreduce=ring" -> "ring"; several collective=algorithm pairs are kept as they are."""
    pairs = algorithm.split(",")
    return pairs[0].split("=", 1)[-1] if len(pairs) == 1 else algorithm.replace(",", ", ")



def _parts(rows: Sequence[WorkloadRow]) -> list[tuple[WorkloadRow, list[WorkloadRow]]]:
    """(step row, its part rows) in stored order (a step's parts follow it)."""
    out: list[tuple[WorkloadRow, list[WorkloadRow]]] = []
    for r in rows:
        if r.part == -1:
            out.append((r, []))
        elif out and (r.variant, r.algorithm) == (out[-1][0].variant, out[-1][0].algorithm):
            out[-1][1].append(r)
    return out



# --------------------------------------------------------------------------- tables


def _ci(r: WorkloadRow) -> tuple:
    """A row's median with its interval, a "median_ci" cell."""
    return r.median_s, r.ci_low_s, r.ci_high_s


def _check(r: WorkloadRow) -> str:
    return "ok" if r.ok else f"FAILED ({r.nwrong} wrong)"


def _gbs(nbytes: int, seconds: float) -> float | None:
    """The algorithm bandwidth in GB/s of `nbytes` in `seconds` (None for no time)."""
    return nbytes / seconds / 1e9 if seconds > 0 else None


#: The last columns of a workload table: samples, flags, the check of the results.
_TAIL = (Column("n", "count"), Column("flags"), Column("check"))


def _tail(r: WorkloadRow) -> tuple:
    return r.samples, ", ".join(r.flags) or "-", _check(r)


def _fastest_block(fast: Sequence) -> list:
    if not fast or all(f.runner_up is None for f in fast):
        return []
    return fastest_blocks("Fastest", "rows", fast, Column("among"), lambda f: f.what)


def _times(rows: Sequence[WorkloadRow], one: str, what: str) -> str:
    """What the times and brackets of `rows` are: `one` for a run of one launch; for several, the geometric mean
    over launches of each launch's `what` and a CI over launches."""
    k = max(r.n_launches for r in rows)
    if k < 2:
        return one
    return (f"geometric mean over {k} launches of each launch's {what}; brackets: 95% CI over launches "
            "(two-stage bootstrap: launches, then samples within them)")


def _whiskers(rows: Sequence[WorkloadRow]) -> str:
    return "95% CI over launches" if any(r.n_launches > 1 for r in rows) else "95% CI"


def _share_cell(p: WorkloadRow | None, total: float):
    """A call's median with its interval, its share of the calls' summed medians after it (a wrong one says so)."""
    if p is None:
        return None
    notes = ([f"({fmt_share(p.median_s / total)})"] if total > 0 else []) + ([] if p.ok else [f"WRONG ({p.nwrong})"])
    return Noted(_ci(p), " ".join(notes)) if notes else _ci(p)


def _step_blocks(rows: Sequence[WorkloadRow], figures: Mapping[str, str]) -> list:
    steps = step_rows(rows)
    w = steps[0].workload
    per = "ranks/comm" if w == "moe" else "tensors"
    t = Table("", [Column("variant"), Column("algorithm"), Column(per, "count"), Column("calls", "count"),
                   Column("size", "size"), Column("step time (median [95% CI])", "median_ci"),
                   Column("algbw GB/s", "bandwidth"), Column("sent (counted)", "size"), *_TAIL],
              [[r.variant, r.algorithm, r.group_ranks if w == "moe" else r.ntensors, r.ncalls, r.nbytes, _ci(r),
                _gbs(r.nbytes, r.median_s), r.bytes_sent_total, *_tail(r)] for r in steps])
    blocks: list = [
        ("h", 3, "Step time"),
        ("p", "One step's collectives, called one after another. Size: the calls' buffers summed (nccl-tests "
              "definitions); time: " + _times(
                  steps, "median over timed steps, each sample the slowest rank's step; brackets: distribution-free "
                         "95% CI of the median", "median over timed steps, each sample the slowest rank's step")
              + "; algbw = size / median; sent: bytes counted on the wire by all ranks (hand-written algorithms "
                "only)."),
        *to_block(t)]
    blocks += launch_blocks(steps, lambda r: f"{r.variant}, {r.algorithm}")
    blocks += _fastest_block(fastest_per_variant(rows))
    blocks += [("h", 3, "Per call"),
               ("p", "Each call's median over the timed steps (its own time within the step) and 95% CI, per "
                     "algorithm; share = the call's part of the calls' summed medians.")]
    by_variant: dict[str, list[tuple[WorkloadRow, list[WorkloadRow]]]] = {}
    for step, parts in _parts(rows):
        by_variant.setdefault(step.variant, []).append((step, parts))
    for variant, items in by_variant.items():
        n = max(len(p) for _, p in items)
        if n > MAX_PART_ROWS:
            for step, parts in items:
                med = sorted(p.median_s for p in parts)
                blocks.append(("p", f"{variant}, {step.algorithm}: {len(parts)} calls, per call median "
                                    f"{human_time(med[len(med) // 2])} (fastest {human_time(med[0])}, slowest "
                                    f"{human_time(med[-1])}); every call's row is in cases.csv."))
            continue
        algs = [short_algorithm(s.algorithm) for s, _ in items]
        totals = [sum(p.median_s for p in parts) for _, parts in items]
        t = Table("", [Column("#", "count"), Column("call"), Column("collective"), Column("tensors", "count"),
                       Column("size", "size"), *[Column(f"{a}: median [95% CI] (share)", "median_ci") for a in algs]])
        for j, p0 in enumerate(items[0][1]):
            t.add_row(p0.part, p0.label, p0.collective, p0.ntensors, p0.nbytes,
                      *[_share_cell(parts[j] if j < len(parts) else None, total)
                        for (_, parts), total in zip(items, totals, strict=True)])
        blocks += [("h", 4, variant), *to_block(t)]
    return blocks + _figure_blocks(figures)


def _overlap_blocks(rows: Sequence[WorkloadRow], figures: Mapping[str, str]) -> list:
    t = Table("", [Column("collective"), Column("algorithm"), Column("variant"), Column("size", "size"),
                   Column("comm alone", "time"), Column("compute", "time"),
                   Column("total (median [95% CI])", "median_ci"), Column("OSU overlap", "share"),
                   Column("IMB overlap", "share"), *_TAIL],
              [[r.collective, r.algorithm.partition("=")[2], r.variant, r.nbytes, r.comm_s, r.compute_s, _ci(r),
                r.overlap_pct / 100, None if r.overlap_imb_pct is None else r.overlap_imb_pct / 100, *_tail(r)]
               for r in rows])
    return [("h", 3, "Overlap"),
            ("p", "A non-blocking collective started before a compute kernel and waited for after it (OSU's and "
                  "IMB-NBC's non-blocking benchmarks): comm alone = the call by itself, compute = the kernel by "
                  "itself, total = start + compute + wait (" + _times(
                      rows, "median [95% CI] over samples, each the slowest rank's",
                      "median over samples, each the slowest rank's")
                  + "). OSU overlap = max(0, 100 - (overall - (cpu - test)) / comm x 100) on each rank's mean times "
                    "averaged over the ranks (cpu: the compute inside start + compute + wait, its test calls "
                    "included; test: those calls); IMB overlap = 100 max(0, min(1, (t_pure + t_CPU - t_ovrl) / "
                    "min(t_pure, t_CPU))) on the mean times of the rank with the largest t_ovrl."),
            *to_block(t)] + launch_blocks(
                  rows, lambda r: f"{r.collective} {format_size(r.nbytes)}") + _figure_blocks(figures)


def _straggler_blocks(rows: Sequence[WorkloadRow], figures: Mapping[str, str]) -> list:
    r0 = rows[0]
    t = Table("", [Column("algorithm"), Column("size", "size"), Column("on time", "time"),
                   Column("one rank late (median [95% CI])", "median_ci"), Column("slowdown", "slowdown"), *_TAIL],
              [[r.algorithm, r.nbytes, r.baseline_s, _ci(r), r.slowdown, *_tail(r)] for r in rows])
    return [("h", 3, "Straggler"),
            ("p", f"{r0.variant} before each {r0.collective}: on time = median without the delay, one rank late = "
                  "median [95% CI] with it (" + _times(
                      rows, "each sample the slowest rank's call", "median over samples, each the slowest rank's call")
                  + "); slowdown = (late - on time) / delay: 1 when every rank waits for the late one, 0 when none "
                    "does."),
            *to_block(t)] + launch_blocks(
                  rows, lambda r: f"{r.algorithm} {format_size(r.nbytes)}") + _fastest_block(
                  fastest_per_variant(rows)) + _figure_blocks(figures)


def _figure_blocks(figures: Mapping[str, str]) -> list:
    if not figures:
        return []
    return [("h", 3, "Figures"), *[("img", name, alt) for name, alt in figures.items()]]


def workload_blocks(meta: Mapping, rows: Sequence[WorkloadRow], figures: Mapping[str, str]) -> list:
    """The report section of one workload (`rows` all of one workload) as page blocks."""
    w = rows[0].workload
    head = f"{w} at {rows[0].nranks} ranks, {rows[0].dtype}"
    m = meta.get("model")
    intro = (f"Model {m['name']}: {m['tensors']} tensors, {m['params']:,} parameters ({m['source']})."
             if isinstance(m, Mapping) and m.get("name") else "")
    blocks: list = [("h", 2, head)] + ([("p", intro)] if intro else [])
    if w == "overlap":
        k = meta.get("compute_kernel") or {}
        if k:
            blocks.append(("p", f"Compute kernel: {k.get('what', '?')}, one iteration "
                                f"{human_time(k.get('iteration_s_max_over_ranks'))} (slowest rank)."))
        return blocks + _overlap_blocks(rows, figures)
    if w == "straggler":
        return blocks + _straggler_blocks(rows, figures)
    return blocks + _step_blocks(rows, figures)


# --------------------------------------------------------------------------- figures


def _bar(r: WorkloadRow, value=None, ci: bool = True) -> dict:
    v = r.median_s if value is None else value
    return {"value": v, "lo": r.ci_low_s if ci else None, "hi": r.ci_high_s if ci else None}


def workload_figures(rows: Sequence[WorkloadRow]) -> list[tuple[str, object, str]]:
    """[(file name, figure, alt text)]: one or two figures of a workload run's rows."""
    from ccbench.present.plots import bar_panels_figure

    w, P = rows[0].workload, rows[0].nranks
    ci = _whiskers(rows)
    out = []
    if w in ("ddp", "zero", "moe"):
        steps: dict[str, dict[str, dict]] = {}
        for r in step_rows(rows):
            steps.setdefault(r.variant, {})[short_algorithm(r.algorithm)] = _bar(r)
        out.append(("steps.png", bar_panels_figure(
            {f"{w}, {rows[0].model}": steps}, f"{w} at {P} ranks: step time per variant and algorithm "
            f"(median over steps, each the slowest rank's; whiskers: {ci})", "step time (median)",
            legend_title="algorithm", whisker_label=ci), f"{w}: step time per variant and algorithm"))
        panels: dict[str, dict[str, dict]] = {}
        for step, parts in _parts(rows):
            if not parts or len(parts) > MAX_PART_BARS:
                continue
            panel = panels.setdefault(f"{step.variant}: {len(parts)} call{'s' if len(parts) > 1 else ''}", {})
            for p in parts:
                panel.setdefault(f"{p.label} ({format_size(p.nbytes)})", {})[short_algorithm(step.algorithm)] = \
                    _bar(p)
        if panels:
            out.append(("calls.png", bar_panels_figure(
                panels, f"{w} at {P} ranks: each call's time within the step (median; whiskers: {ci})",
                "time per call (median)", legend_title="algorithm", whisker_label=ci),
                f"{w}: time of each call of the step"))
    elif w == "overlap":
        pct: dict[str, dict[str, dict]] = {}
        imb: dict[str, dict[str, dict]] = {}
        times: dict[str, dict[str, dict]] = {}
        for r in rows:
            call = f"{r.variant} {r.algorithm.partition('=')[2]}"
            pct.setdefault(format_size(r.nbytes), {})[call] = {"value": r.overlap_pct}
            if r.overlap_imb_pct is not None:  # runs made before IMB's figure was recorded have OSU's alone
                imb.setdefault(format_size(r.nbytes), {})[call] = {"value": r.overlap_imb_pct}
            g = times.setdefault(f"{call} {format_size(r.nbytes)}", {})
            g["comm alone"] = {"value": r.comm_s}
            g["compute"] = {"value": r.compute_s}
            g["total"] = _bar(r)
        out.append(("overlap.png", bar_panels_figure(
            {"OSU: max(0, 100 - (overall - (cpu - test)) / comm x 100)": pct,
             **({"IMB-NBC: 100 max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, t_CPU)))": imb} if imb else {})},
            f"overlap of non-blocking collectives with compute at {P} ranks", "overlap (% of the call hidden)",
            fmt=lambda v: f"{v:.0f}%", ref=100.0, ref_label="full overlap", legend_title="call"),
            "overlap per size and collective"))
        out.append(("overlap-times.png", bar_panels_figure(
            {f"medians: the call alone, the compute alone, both together (whiskers: {ci} of total)": times},
            f"overlap at {P} ranks: the three OSU times", "time (median)", legend_title="time", whisker_label=ci),
            "overlap: the call alone, the compute alone and both"))
    else:
        late: dict[str, dict[str, dict]] = {}
        slow: dict[str, dict[str, dict]] = {}
        for r in rows:
            late.setdefault(format_size(r.nbytes), {})[short_algorithm(r.algorithm)] = _bar(r)
            slow.setdefault(format_size(r.nbytes), {})[short_algorithm(r.algorithm)] = {"value": r.slowdown}
        r0 = rows[0]
        out.append(("straggler-time.png", bar_panels_figure(
            {f"{r0.collective} with {r0.variant}": late},
            f"straggler at {P} ranks: time per call with one rank late (median; whiskers: {ci})",
            "time per call (median)", legend_title="algorithm", whisker_label=ci),
            "straggler: time per call with one rank late"))
        out.append(("straggler-slowdown.png", bar_panels_figure(
            {f"{r0.collective} with {r0.variant}": slow},
            f"straggler at {P} ranks: slowdown = (late - on time) / delay", "slowdown (fraction of the delay "
            "passed on)", fmt=lambda v: f"{v:.2g}", ref=1.0, ref_label="the whole delay",
            legend_title="algorithm"), "straggler: slowdown per algorithm and size"))
    return out


# --------------------------------------------------------------------------- the report


def build_workload_report(run: Run) -> Report:
    """The `Report` of a stored workload run, its files unwritten (``ccbench.workflow.report`` writes them), with
    the fastest variant per workload (figures need matplotlib; without it the page says how to add them).
    """
    from ccbench.present.plots import have_matplotlib
    from ccbench.present.report import no_figures_blocks

    plots = have_matplotlib()
    path, meta, rows, warnings = run.path, run.meta, run.rows, run.warnings
    images: dict[str, bytes] = {}
    cfg = meta.get("config") or {}
    m = meta.get("model")
    settings = [
        ("timer resolution", human_time(meta["timer_resolution_s"]) if meta.get("timer_resolution_s") else "?"),
        ("workload", ", ".join(f"{k}={v}" for k, v in cfg.items()
                               if k not in ("warmup", "min_reps", "max_reps", "target_rse", "budget_s",
                                            "thread_level", "results_dir", "watchdog_s"))),
        ("model", f"{m['name']}: {m['tensors']} tensors, {m['params']:,} parameters ({m['source']})"
         if isinstance(m, Mapping) else "-"),
        ("repetitions", f"warm-up {cfg.get('warmup', '?')}, {cfg.get('min_reps', '?')} to "
                        f"{cfg.get('max_reps', '?')} samples, target RSE {cfg.get('target_rse', '?')}, budget "
                        f"{cfg.get('budget_s', '?')} s per measurement"),
    ]
    bad = [r for r in rows if not r.ok]
    cases = (f"{len(step_rows(rows))} measurements, {len(rows)} rows (steps and their calls), "
             f"{len(meta.get('skipped') or [])} skipped, {len(bad)} wrong")
    blocks: list = [("h", 1, f"ccbench report: {path.name}"),
                    ("p", f"Training workload {meta.get('workload', rows[0].workload)}: "
                          f"{meta.get('mpi_library', '?')}; {meta.get('nranks', '?')} ranks on "
                          f"{meta.get('nodes', '?')} node(s); thread level {meta.get('thread_level', '?')}. Every "
                          "time and interval below is a stored row of cases.jsonl. " + launch_sentence(meta, rows))]
    blocks += provenance_blocks(path, meta, rows, warnings, [], settings=settings, cases=cases,
                                describe=lambda r: f"{r.variant} {r.algorithm} {r.label}")
    blocks += no_figures_blocks(plots)
    fastest = {}
    for w in dict.fromkeys(r.workload for r in rows):
        rs = [r for r in rows if r.workload == w]
        figures = {}
        for name, fig, alt in workload_figures(rs) if plots else ():
            figures[add_figure(fig, name, images)] = alt
        blocks += workload_blocks(meta, rs, figures)
        fastest[w] = fastest_per_variant(rs)
    return Report(run, page_files(blocks, f"ccbench report: {path.name}", images), plots, fastest)
