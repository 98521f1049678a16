"""Terminal tables (rich) of stored runs; every number shown comes from a stored row.

A run of several launches shows per case its launches and the coefficients of variation between
and within them (``variance_components`` of the row's launches, ``launch_cells``), and its header
says that medians and intervals are over launches; a run of one launch says that they are within it.
"""

from collections import defaultdict
from collections.abc import Sequence

from rich.markup import escape

from ccbench.analysis.fastest import launch_variation
from ccbench.analysis.limits import memory_limit
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.hardware import cpu_list
from ccbench.core.hardware import summary as hardware_summary
from ccbench.core.stats import FLAG_DESCRIPTIONS
from ccbench.core.units import fmt_time
from ccbench.present.export import OSU_PER_RANK
from ccbench.present.table import Column, Styled, Table, render
from ccbench.store.launches import LAUNCH_SPREAD
from ccbench.store.results import Row

__all__ = ["LAUNCH_COLUMNS", "algorithms_table", "launch_cells", "launch_count", "launch_line", "launch_notes",
           "launch_tables", "run_header", "rows_tables", "show_sweep"]

#: The columns a run of several launches adds per case: its launches, and the spread between and within them.
LAUNCH_COLUMNS = (Column("launches", "count"), Column("between", "cv"), Column("within", "cv"))


def launch_count(meta: dict, rows: Sequence = ()) -> int:
    """How many launches a run has: run.json's ``launches``, else the most any of its rows has (1 for none)."""
    return int(meta.get("launches") or max((r.n_launches for r in rows), default=1))


def launch_line(meta: dict, rows: Sequence = ()) -> str:
    """What a run's medians and intervals are: over launches (several), or within one launch."""
    k = launch_count(meta, rows)
    if k < 2:
        return "one launch: launch variation is not measured; 95% CIs are within that launch (over its samples)"
    seed = meta.get("order_seed")
    return (f"{k} launches" + (f", case order seed {seed}" if seed is not None else "")
            + ": medians are geometric means of the launches' medians; 95% CIs are over launches "
              "(two-stage bootstrap)")


def launch_cells(row) -> list:
    """A row's values for ``LAUNCH_COLUMNS``: launches, between- and within-launch CV (log scale).

    The CVs come from ``ccbench.core.replication.variance_components`` of the row's launches
    (None with one launch); a row flagged ``launch_spread`` shows its between-launch CV in yellow.
    """
    vc = launch_variation(row)
    if vc is None:
        return [row.n_launches, None, None]
    between = Styled(vc.between_cv, "yellow bold") if LAUNCH_SPREAD in row.flags else vc.between_cv
    return [vc.n_launches, between, vc.within_cv]


def launch_notes(rows: Sequence) -> list[str]:
    """One line about the CV columns and the cases flagged ``launch_spread`` (for a run of several launches)."""
    spread = sum(LAUNCH_SPREAD in r.flags for r in rows)
    return [f"between / within: coefficient of variation of the launches' typical times / of the calls within a "
            f"launch (one-way random effects on log times); {spread} of {len(rows)} "
            f"{'case' if len(rows) == 1 else 'cases'} flagged {LAUNCH_SPREAD}: {FLAG_DESCRIPTIONS[LAUNCH_SPREAD]}"]


def run_header(meta: dict, path, rows: Sequence = ()) -> str:
    """One paragraph of provenance for the top of a table, and what its medians and intervals are over."""
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
        + f"\n{launch_line(meta, rows)}"
        + (f"\n{sampling}" if (sampling := sampling_line(meta.get("config") or {}, meta.get("loop"), rows)) else "")
        + (f"\n{floor}" if (floor := floor_line(meta.get("harness_floor"))) else "")
        + (f"\n{memory}" if (memory := memory_line(meta.get("memory_bandwidth"))) else "")
        + (f"\n{escape(topo)}" if (topo := topology_line(meta)) else "")
        + (f"\n[yellow]{load}[/]" if (load := load_line(meta.get("load"))) else "")
        + "".join(f"\n{escape(str(v))}" for v in (meta.get("half_types") or {}).values() if v)
        + ("\nimported from " + "; ".join(f"{escape(d['version'])} ({escape(d['path'])}, sha256 {d['sha256'][:12]})"
                                          for d in meta["imported"])
           + ": the tool's own statistics (no raw samples; compare leaves these cases untested)"
           if meta.get("imported") else "")
    )


def topology_line(meta: dict) -> str:
    """The node map of a run on more than one node (the MPI library's shared-memory split): each node's ranks, the
    rank order and the ``--placement`` that re-ranked the launch; and where the hostnames disagree with it.  "" for
    one node in the launch's order, or a run without the record."""
    from ccbench.core.placement import placement_text

    topo = meta.get("topology") or {}
    names, ranks = topo.get("node_names") or [], topo.get("ranks_of_node") or []
    placed = placement_text(topo.get("placement"))
    if len(ranks) < 2 and topo.get("hostnames_agree", True) and not placed:
        return ""
    nodes = "; ".join(f"{n}: ranks {cpu_list(r).replace(',', ', ')}" for n, r in zip(names, ranks, strict=False))
    launched = (topo.get("placement") or {}).get("launch_order")
    how = (f"; {placed} re-ranked the launch" + (f"'s {launched} order" if launched else "")) if placed else ""
    return (f"node map (the MPI library's shared-memory split): {nodes} ({topo.get('order', '?')} order{how})"
            + ("" if topo.get("hostnames_agree", True) else "; the hostnames do not say the same (a wrong hostname, "
               "or ranks that cannot share memory)"))


def load_line(load: dict | None) -> str:
    """A line where other processes took a noticeable share of the machine while the run measured ("" otherwise)."""
    from ccbench.analysis.compare import MAX_OTHER_LOAD

    other = (load or {}).get("other_fraction")
    if not isinstance(other, (int, float)) or other <= MAX_OTHER_LOAD / 2:
        return ""
    return (f"measured under load: other processes used {other:.0%} of the machine's CPU time meanwhile"
            + ("; compare withholds verdicts involving this run" if other > MAX_OTHER_LOAD else ""))


def floor_line(floor: dict | None) -> str:
    """The run's harness floor (``ccbench.measure.gamma.harness_floor``) in one line; "" for runs without it."""
    if not floor:
        return ""
    calls = ", ".join(f"{c} {fmt_time(s)}" for c, s in (floor.get("zero_count_s") or {}).items())
    k = len(floor.get("launches") or {})
    return (f"harness floor: an empty call costs {fmt_time(floor['empty_s'])} through the timing loop"
            + (f"; zero-count native calls: {calls} (what a small message pays before a byte moves)" if calls else "")
            + (f"; medians of {k} launches" if k > 1 else ""))


def memory_line(record: dict | None) -> str:
    """The node's memory copy bandwidth (``ccbench.measure.membw``) and the per-rank limit in one line; "" without."""
    lim = memory_limit(record)
    if lim is None:
        return ""
    nodes = lim.nodes
    if len(nodes) == 1:
        nodes_text = f"{nodes[0].aggregate_gbs:.3g} GB/s ({nodes[0].ranks} ranks, {nodes[0].per_rank_gbs:.3g} each)"
    else:
        aggs = [n.aggregate_gbs for n in nodes]
        nodes_text = (f"{min(aggs):.3g}-{max(aggs):.3g} GB/s per node over {len(nodes)} nodes (least per rank "
                      f"{lim.limiting.per_rank_gbs:.3g} on {escape(lim.limiting.host)})")
    return (f"memory copy bandwidth (STREAM copy, bytes read + written): one core {lim.one_core_gbs:.3g} GB/s; all "
            f"ranks of a node at once {nodes_text}; per-rank limit of a collective {lim.copy_gbs:.3g} GB/s of bytes "
            "copied (the report holds bus bandwidth against it)"
            + (f"; best of {k} launches" if (k := len((record or {}).get("launches") or [])) > 1 else ""))


def sampling_line(cfg: dict, loop: dict | None = None, rows=None) -> str:
    """How samples were taken, when not the default (one synchronised call each in Python, adaptive count); else "".

    With the sweep's `rows`, a compiled loop is said of the native cases it timed (each row names its loop): the C
    loop has no kernel for some calls (v-collectives, persistent requests), which the Python loop times."""
    parts = []
    loop = loop or {}
    items = loop.get("items")
    if loop.get("used") == "compiled" and isinstance(items, list):  # a workload: which items the C loop timed
        n = sum(isinstance(it, dict) and it.get("loop") == "compiled" for it in items)
        parts.append(f"{n} of {len(items)} items timed by the compiled loop (C, --loop)"
                     + ("; the others in Python (hand-written algorithms, non-blocking calls)" if n < len(items)
                        else ""))
    elif loop.get("used") == "compiled":
        native = [r for r in rows or () if r.algorithm.startswith("native")]
        n = sum(r.loop == "compiled" for r in native)
        if not native or n == len(native):
            parts.append("native cases timed by the compiled loop (C, --loop); hand-written algorithms in Python")
        else:
            parts.append(f"{n} of {len(native)} native cases timed by the compiled loop (C, --loop); the others in "
                         "Python (calls it has no kernel for), as are hand-written algorithms")
    elif loop.get("mixed"):  # auto, beside algorithms only Python times
        parts.append(f"every case timed in Python: {escape(str(loop['why']))}")
    elif loop.get("requested", "python") != "python":
        parts.append(f"--loop {loop['requested']}: timed in Python, the compiled loop was not available"
                     + (f" ({escape(str(loop['why']))})" if loop.get("why") else ""))
    if cfg.get("buffers") == "cold":
        parts.append("cold buffers: each call on the next of several buffer sets, together twice the last-level "
                     "cache, so none is in cache (IMB's -off_cache); timed in the Python loop")
    if (cfg.get("counts") or "uniform") != "uniform":
        parts.append(f"the v-collectives' blocks sized by {escape(str(cfg['counts']))} (--counts); their size is "
                     "that of the even form of the same total")
    timing = cfg.get("timing") or "per-call"
    if timing != "per-call":
        k = timing.partition(":")[2] or "10"
        parts.append(f"timing {timing}: each sample is {k} back-to-back calls between synchronisations, "
                     f"their time / {k} (IMB, nccl-tests style)")
    rounds = cfg.get("rounds") or 1
    if rounds > 1:
        parts.append(f"each launch visited every case in {rounds} rounds, each in its own shuffled order "
                     "(--rounds): a row's samples span the launch, not one stretch of it")
    if cfg.get("iterations"):
        parts.append(f"{cfg['iterations']} samples per case, fixed (OSU's -i), after {cfg.get('warmup', '?')} "
                     "untimed calls (-x)")
    return "; ".join(parts)


def _order(r: Row) -> tuple:
    base = r.algorithm.removesuffix("-persistent")  # a persistent algorithm next to its blocking twin
    return (base != "native", base, r.algorithm, r.dtype, r.op, r.in_place, r.root, r.nbytes)


def _by_collective(rows: Sequence[Row]) -> list[tuple[str, list[Row], list[str]]]:
    """[(collective, its rows, the row parameters that vary)] in registry order."""
    by_coll: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_coll[r.collective].append(r)
    return [(c, by_coll[c], [k for k in ("dtype", "op", "in_place", "root")
                             if len({getattr(r, k) for r in by_coll[c]}) > 1])
            for c in COLLECTIVES if c in by_coll]


def _size(r: Row, per_rank: bool) -> int:
    """The row's size, or one rank's block of it (`per_rank`) where OSU counts that way (``OSU_PER_RANK``)."""
    return r.nbytes // r.nranks if per_rank and r.collective in OSU_PER_RANK else r.nbytes


def _size_title(coll: str, per_rank: bool) -> str:
    return "one rank's block (as OSU)" if per_rank and coll in OSU_PER_RANK else COLLECTIVES[coll].size_definition


def osu_tables(rows: list[Row], per_rank: bool = True) -> list[Table]:
    """One table per collective in OSU's and IMB's terms: each rank's mean, then min/avg/max over ranks; percentiles.

    "avg", "min", "max" are OSU's "Avg/Min/Max Latency" (IMB's t_avg/t_min/t_max): each rank's mean
    call time, averaged / minimised / maximised over ranks (``ccbench.measure.timing.rank_means``);
    p50/p90/p99 are percentiles of ccbench's samples (each the per-call maximum over ranks), as
    OSU's ``-z`` prints them.  Sizes are one rank's block where OSU's and IMB's are (`per_rank`).
    Rows recorded before the per-rank means were kept show "-".
    """
    tables = []
    for coll, group, vary in _by_collective(rows):
        t = Table(f"{coll} at {group[0].nranks} ranks, OSU/IMB statistics - size: {_size_title(coll, per_rank)}",
                  [Column("algorithm"), Column("size", "size"), *[Column(k.replace("_", " ")) for k in vary],
                   Column("avg", "time"), Column("min", "time"), Column("max", "time"), Column("p50", "time"),
                   Column("p90", "time"), Column("p99", "time"), Column("n", "count")])
        for r in sorted(group, key=_order):
            t.add_row(r.algorithm, _size(r, per_rank), *[getattr(r, k) for k in vary], r.rank_mean_avg_s,
                      r.rank_mean_min_s, r.rank_mean_max_s, r.median_s, r.p90_s, r.p99_s, r.samples)
        t.caption = ("avg/min/max: each rank's mean time, then over ranks (OSU's Avg/Min/Max Latency, IMB's "
                     "t_avg/t_min/t_max); p50/p90/p99: of the per-call maximum over ranks (ccbench's sample)")
        tables.append(t)
    return tables


def rows_tables(rows: list[Row], launches: bool | None = None, per_rank: bool = False) -> list[Table]:
    """One table per collective: median with 95% CI, min, bus bandwidth, samples, flags, check.

    With `launches` (default: when a row has several launches) each case also shows
    ``LAUNCH_COLUMNS`` and its flags wrap at commas; `per_rank` shows one rank's block as the
    size where the size covers P blocks (OSU's and IMB's size).
    """
    if launches is None:
        launches = any(r.n_launches > 1 for r in rows)
    sep = ", " if launches else ","
    tables = []
    for coll, group, vary in _by_collective(rows):
        P = group[0].nranks
        factor = COLLECTIVES[coll].busbw_factor(P)
        setup = any(r.setup_s is not None for r in group)  # persistent algorithms: their set-up beside the calls
        t = Table(f"{coll} at {P} ranks - size: {_size_title(coll, per_rank)}; busbw = algbw x {factor:.3g}",
                  [Column("algorithm"), Column("size", "size"), *[Column(k.replace("_", " ")) for k in vary],
                   Column("median", "time"), Column("95% CI", "time_ci", no_wrap=True), Column("min", "time"),
                   Column("busbw GB/s", "bandwidth"), Column("n", "count"),
                   *((Column("set-up", "time"),) if setup else ()),
                   *(LAUNCH_COLUMNS if launches else ()), Column("stop"), Column("flags"), Column("check")])
        if setup:
            t.caption = ("set-up: a persistent algorithm's requests (MPI_<coll>_init, or MPI_Send_init/MPI_Recv_init), "
                         "made once per case outside the timed calls, the slowest rank's time; median: one "
                         "MPI_Start + MPI_Wait of them")
        for r in sorted(group, key=_order):
            t.add_row(r.algorithm, _size(r, per_rank), *[getattr(r, k) for k in vary], r.median_s,
                      (r.ci_low_s, r.ci_high_s), r.min_s, r.busbw_gbs if coll != "barrier" else None, r.samples,
                      *((r.setup_s,) if setup else ()),
                      *(launch_cells(r) if launches else ()), r.stop_reason.replace(";", sep.replace(",", ";")),
                      sep.join(r.flags), "ok" if r.ok else Styled(f"FAILED ({r.nwrong} wrong)", "red bold"))
        tables.append(t)
    return tables


def launch_tables(rows: Sequence[Row]) -> list[Table]:
    """Per collective, each case's launches: median and 95% CI over launches, launches, between / within CV, flag."""
    tables = []
    for coll, group, vary in _by_collective(rows):
        t = Table(f"{coll} at {group[0].nranks} ranks: launch to launch",
                  [Column("algorithm"), Column("size", "size"), *[Column(k.replace("_", " ")) for k in vary],
                   Column("median", "time"), Column("95% CI", "time_ci"), *LAUNCH_COLUMNS, Column("flag")])
        for r in sorted(group, key=_order):
            t.add_row(r.algorithm, r.nbytes, *[getattr(r, k) for k in vary], r.median_s, (r.ci_low_s, r.ci_high_s),
                      *launch_cells(r), LAUNCH_SPREAD if LAUNCH_SPREAD in r.flags else "")
        tables.append(t)
    return tables


def flag_legend(rows: Sequence) -> str | None:
    """What each flag shown in `rows` means (``FLAG_DESCRIPTIONS``), one line; None when no row is flagged.

    ``launch_spread`` is left to `launch_notes`, which every view of a run of several launches prints (the only
    runs whose rows carry it), so that no flag is defined twice on one screen.
    """
    several = any(r.n_launches > 1 for r in rows)
    shown = dict.fromkeys(f for r in rows for f in (r.flags or ()) if not (several and f == LAUNCH_SPREAD))
    if not shown:
        return None
    return "flags: " + "; ".join(f"{f} = {FLAG_DESCRIPTIONS.get(f, 'see the manual')}" for f in shown)


def answer_lines(rows: Sequence, meta: dict) -> list[str]:
    """What a sweep found, a line per collective and variant: the fastest algorithm per band of sizes (and how many
    sizes that was decided at the launch level), the peak bus bandwidth and its share of the node's limit."""
    from ccbench.analysis.fastest import fastest_per_size, group_rows, size_bands
    from ccbench.analysis.limits import memory_limit, share_of_limit
    from ccbench.core.units import format_size

    limit = memory_limit(meta.get("memory_bandwidth"))
    out = []
    for g in group_rows(rows):
        label = g.collective + ("" if not g.op or g.op == "none" else f" ({g.dtype} {g.op})")
        parts = []
        if len(g.by_algorithm) > 1:
            entries = fastest_per_size(g)
            if entries:
                decided = sum(1 for e in entries if e.verdict == "faster")
                apart = sorted({a for e in entries for a in e.other_loop})
                parts.append("fastest " + ", ".join(
                    f"{alg} {format_size(lo)}" + ("" if lo == hi else f"-{format_size(hi)}")
                    for lo, hi, alg in size_bands(entries))
                    + f" ({decided} of {len(entries)} sizes decided at the launch level"
                    + (f"; {', '.join(apart)} not compared: timed by another loop)" if apart else ")"))
        ok = [r for r in (x for rs in g.by_algorithm.values() for x in rs) if r.ok and r.busbw_gbs > 0]
        if ok and g.collective not in ("barrier", "pingpong"):
            top = max(ok, key=lambda r: r.busbw_gbs)
            share = ""
            if limit is not None:
                frac = share_of_limit(top.busbw_gbs, limit.copy_gbs)
                share = (f", {frac:.0%} of the node's memory copy limit"
                         + (": above it, the data stayed in cache" if frac > 1 else ""))
            parts.append(f"peak bus bandwidth {top.busbw_gbs:.3g} GB/s ({top.algorithm}, {format_size(top.nbytes)}"
                         f"{share})")
        if parts:
            out.append(f"{label}: " + "; ".join(parts))
    return out


def show_sweep(run, console, show_table: bool = True, *, osu: bool = False, per_rank: bool = False,
               brief: bool = False) -> None:
    """Print a stored collective sweep (a `Run`): provenance, tables per collective, what it found, warnings, a
    summary line.

    `osu`: the OSU/IMB statistics (``osu_tables``) instead of ccbench's; `per_rank`: sizes as one
    rank's block where OSU and IMB count that way; `brief` (what a sweep prints when it ends): what
    it found and every wrong case, the tables left to ``ccbench show``.
    """
    path, meta, rows = run.path, run.meta, run.rows
    if brief:
        console.print(run_header(meta, path, rows))
        for r in rows:
            if not r.ok:
                console.print(f"WRONG: {r.collective}/{r.algorithm} {r.nbytes} B {r.dtype} {r.op}: {r.nwrong} wrong "
                              "elements", style="red", markup=False, highlight=False)
    elif show_table:
        console.print(run_header(meta, path, rows))
        render(osu_tables(rows, per_rank) if osu else rows_tables(rows, per_rank=per_rank), console)
        if any(r.n_launches > 1 for r in rows):
            render(launch_notes(rows), console)
        legend = flag_legend(rows)
        if legend:
            console.print(legend, markup=False, highlight=False)
    for line in answer_lines(rows, meta):
        console.print(line, markup=False, highlight=False)
    for w in run.warnings:
        console.print(f"[yellow]warning: {w}[/]")
    bad = [r for r in rows if not r.ok]
    skipped = meta.get("skipped", [])
    console.print(f"{len(rows)} cases in {path}" + (f", {len(skipped)} skipped" if skipped else "")
                  + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct")
                  + (f"; every case as tables: ccbench show {path}" if brief and show_table else ""))


def algorithms_table(only: Sequence[str] | None = None, library: str | None = None) -> Table:
    """`ccbench list`: every collective (or those in `only`) and its algorithms, kind, cost formula and summary
    (the registry): per collective the library's own choice, then the forced variants `library` (the installed MPI:
    "mpich", "openmpi") has, the hand-written algorithms, and last the variants only other libraries have."""
    from ccbench.algorithms import REGISTRY
    from ccbench.algorithms.native_variants import LIBRARIES

    def rank(item) -> int:
        _, alg = item
        if alg.native and not alg.settings:
            return 0
        if alg.settings:
            return 1 if library is None or library in alg.settings else 3
        return 2

    t = Table("collectives and algorithms (a = latency, b = s/byte, g = reduction s/byte; n = size in bytes, "
              "P = ranks; v-collectives: c_r = bytes of rank r's block, m(i,j) = bytes rank i sends rank j)",
              [Column(c, overflow="fold") for c in ("collective", "algorithm", "kind", "cost", "summary")],
              caption=(f"native:<alg>: the library's own algorithms, forced; {LIBRARIES[library]}'s (installed here) "
                       "first, other libraries' last" if library in LIBRARIES else ""))
    for coll, algs in REGISTRY.items():
        if only is not None and coll not in only:
            continue
        ordered = sorted(algs.items(), key=rank)  # stable: the registry's order within each group
        for i, (name, alg) in enumerate(ordered):
            other = alg.settings and library is not None and library not in alg.settings
            kind = "native" if alg.native else "hand-written"
            if other:
                kind += " (" + ", ".join(LIBRARIES.get(x, x) for x in alg.settings) + " only)"
            t.add_row(coll if i == 0 else "", name, kind,
                      alg.formula or ("forced (" + ", ".join(alg.settings) + ")" if alg.settings
                                      else "library's choice" if alg.native else "-"), alg.summary,
                      end_section=i == len(ordered) - 1)
        if not algs:
            t.add_row(coll, "-", "", "", COLLECTIVES[coll].summary, end_section=True)
    return t
