"""``ccbench report``: a self-contained Markdown + HTML report of a stored run, with PNG figures.

The report is written into a new directory beside the run's files (``RUN/report``, then
``report-2``, ...; never an existing one): ``report.md`` (figures as PNG files next to
it), ``report.html`` (the same page with the figures embedded as data URIs, so it opens
from disk on its own), the PNGs, and ``fits.json``, the fit document the parameter
tables were taken from (``ccbench.analysis.runs.fit_run``, not written into the run itself).
Every time, bandwidth and interval in the tables is a stored row's value; the fitted
parameters, predictions and who-wins come from ``ccbench.analysis.fit`` / ``ccbench.analysis.predict``.
"""

import base64
import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

from ccbench.analysis.fastest import ONE_LAUNCH, SIGNIFICANCE, Curves, algorithm_order, fastest_per_size, group_rows
from ccbench.analysis.limits import MemoryLimit, best_shares, memory_limit, share_of_limit
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.hardware import summary as hardware_summary
from ccbench.core.replication import DEFAULT_PRIOR_BETWEEN_CV, log_sd_from_cv
from ccbench.core.units import format_size, human_time
from ccbench.present.model_tables import gbs_of_beta
from ccbench.present.table import (
    DECIDED,
    PAGE_QUANTITIES,
    Cell,
    Column,
    Noted,
    Table,
    fmt_bandwidth,
    fmt_cv,
    fmt_time_per_byte,
    to_block,
)
from ccbench.present.views import LAUNCH_COLUMNS, launch_cells, launch_count, launch_line, topology_line
from ccbench.store.launches import LAUNCH_SPREAD
from ccbench.store.run import Run, lab_block

__all__ = [
    "PAGE_QUANTITIES",
    "Report",
    "build_sweep_report",
    "fastest_blocks",
    "fastest_table",
    "launch_blocks",
    "launch_sentence",
    "median_ci",
    "group_figure",
    "group_slug",
    "limit_blocks",
    "provenance_blocks",
    "add_figure",
    "page_files",
    "variant_label",
]

# --------------------------------------------------------------------------- what a report is


@dataclass(frozen=True)
class Report:
    """A run's report page: the files to write (``name -> text or PNG bytes``) and what the page found.

    `figures`: whether the page has figures (they need matplotlib); `fastest`: per group label, the entries of
    ``fastest_per_size`` / ``fastest_per_variant`` (empty where the kind has none); `fit`: the ``RunFit`` (sweeps);
    `groups`: the sweep's ``Curves``; `diagnosis`: the ``Diagnosis`` (doctor runs); `dir`: the folder the page
    was written to (``ccbench.workflow.report`` sets it; None while unwritten).
    """

    run: Run
    files: Mapping[str, str | bytes]
    figures: bool = True
    fastest: Mapping[str, Sequence] = field(default_factory=dict)
    fit: object = None
    groups: Sequence = ()
    diagnosis: object = None
    dir: Path | None = None

    @property
    def kind(self) -> str:
        return self.run.kind

    def at(self, where: Path) -> "Report":
        """The same report, written to `where`."""
        return dataclasses.replace(self, dir=Path(where))


# --------------------------------------------------------------------------- grouping



def variant_label(g: Curves) -> str:
    """"allreduce at 4 ranks, float32 sum" (+ in place, root k where they apply)."""
    parts = [f"{g.collective} at {g.nranks} ranks", g.dtype + (f" {g.op}" if g.op and g.op != "none" else "")]
    if g.in_place:
        parts.append("in place")
    coll = COLLECTIVES.get(g.collective)
    if coll is not None and coll.rooted:
        parts.append(f"root {g.root}")
    return ", ".join(parts)


def group_slug(g: Curves, several: bool) -> str:
    """A file-name stem for a group: the collective, plus its variant when it has `several`."""
    if not several:
        return g.collective
    return "-".join([g.collective, f"np{g.nranks}", g.dtype, g.op, "inplace" if g.in_place else "out",
                     f"root{g.root}"])


# --------------------------------------------------------------------------- the fastest against its runner-up

def _method_text(method: str) -> str:
    """What a ``fastest_of`` method means, in one sentence."""
    if method.startswith("paired by launch"):
        return (f"{method}: the two shared their launches, so the verdict is a paired t test of the per-launch "
                "log ratios of their medians (Student 1908; the launch effect they share cancels)")
    if method.startswith("separate launches"):
        return (f"{method}: the two ran in different jobs, so the verdict is Welch's t test of their per-launch "
                "log medians (Welch 1947)")
    if method == ONE_LAUNCH:
        z = NormalDist().inv_cdf(1 - SIGNIFICANCE / 2)
        resolvable = math.exp(z * math.sqrt(2.0) * log_sd_from_cv(DEFAULT_PRIOR_BETWEEN_CV))
        return (f"{ONE_LAUNCH}, so a between-launch CV of {fmt_cv(DEFAULT_PRIOR_BETWEEN_CV)} is assumed and a "
                f"difference under about {resolvable:.2g}x stays undetermined (ccbench launch --launches 3 or more "
                "decides smaller ones)")
    return method


def fastest_table(title: str, entries: Sequence, key: Column, key_of) -> Table:
    """The fastest against its runner-up (`ccbench.analysis.fastest.Fastest` records), one row per entry keyed by
    `key_of(entry)`.

    "decided" is the launch-level verdict (``ccbench.present.table.DECIDED``); how it was reached
    is the caption when every row was decided the same way, else a column of its own.
    """
    methods = list(dict.fromkeys(e.method for e in entries if e.method))
    per_row = len(methods) > 1
    t = Table(title, [key, Column("fastest"), Column("median", "time"), Column("runner-up"),
                      Column("its median", "time"), Column("margin", "percent"),
                      Column("95% CI", "margin_ci", no_wrap=True), Column("p", "p"), Column("decided"),
                      *([Column("how")] if per_row else [])],
              caption="; ".join(_method_text(m) for m in methods) + ("." if methods else ""))
    for e in entries:
        t.add_row(key_of(e), e.fastest, e.median_s, e.runner_up or "-", e.runner_up_s, e.margin,
                  (e.ratio_low, e.ratio_high), e.p_value, DECIDED[e.verdict], *([e.method or "-"] if per_row else []))
    return t


def fastest_blocks(heading: str, what: str, entries: Sequence, key: Column, key_of) -> list:
    """The report page's section of a ``fastest_table``: heading, what was compared, table, how it was decided."""
    return [("h", 3, heading),
            ("p", f"Smallest stored median among correct {what}; margin = the runner-up's median over the "
                  f"fastest's, minus 1, with its 95% CI; decided at the launch level (two-sided, p < {SIGNIFICANCE})."),
            *to_block(fastest_table("", entries, key, key_of), with_caption=True)]


# --------------------------------------------------------------------------- launches


def launch_sentence(meta: Mapping, rows: Sequence) -> str:
    """``ccbench.present.views.launch_line`` as a sentence of the page."""
    line = launch_line(dict(meta), rows)
    return line[0].upper() + line[1:] + "."


def launch_blocks(rows: Sequence, name) -> list:
    """For rows of several launches: each case's launches and CVs between and within them, as one page table.

    `name(row)` labels a row; a case flagged ``launch_spread`` says so.  Nothing for one launch.
    """
    if not any(r.n_launches > 1 for r in rows):
        return []
    t = Table("", [Column("case"), *LAUNCH_COLUMNS, Column("flag")])
    for r in rows:
        t.add_row(name(r), *launch_cells(r), LAUNCH_SPREAD if LAUNCH_SPREAD in r.flags else "-")
    return [("h", 3, "Launch to launch"),
            ("p", "Between / within: coefficient of variation of the launches' typical times / of the calls "
                  "within one launch (one-way random effects on log times; Searle, Casella & McCulloch 1992). "
                  f"{LAUNCH_SPREAD}: the launches differ more than the calls within one launch, so only the "
                  "intervals over launches are to be trusted."),
            *to_block(t)]


# --------------------------------------------------------------------------- analyses


def _curves(fit, g: Curves) -> list:
    """The fitted curves (`CurveFit`) of the group `g` in a `RunFit` (none without one)."""
    return [c for c in (fit.curves if fit else ())
            if (c.collective, c.nranks, c.dtype, c.op, c.in_place, c.root) == g.key]


def _checks(fit, g: Curves) -> list:
    """The model checks (`ModelCheck`) of the group `g` in a `RunFit` (none without one)."""
    return [c for c in (fit.model_checks if fit else ())
            if (c.collective, c.nranks, c.dtype, c.op) == (g.collective, g.nranks, g.dtype, g.op)
            and c.algorithm in g.by_algorithm]


# --------------------------------------------------------------------------- page model
# A page is a list of blocks rendered twice, as Markdown (GitHub-flavoured tables) and as
# HTML: ("h", level, text), ("p", text), ("ul", [items]), ("table", headers, rows, right),
# ("img", file name, alt text).  Every table is a ``ccbench.present.table.Table`` of raw
# values, made blocks by ``to_block``.


def _interval(ci) -> tuple | None:
    """A stored interval (low, high) as a cell's value; None when it has no finite bounds."""
    if not ci or any(v is None or (isinstance(v, float) and not math.isfinite(v)) for v in ci):
        return None
    return tuple(ci)


def _bw_interval(ci) -> tuple | None:
    """The interval of 1/beta in GB/s of an interval of beta (the bounds swap); None without one."""
    if not ci or any(v is None for v in ci):
        return None
    return gbs_of_beta(ci[1]), gbs_of_beta(ci[0])


def _what_value(rows) -> Table:
    """A table of (what, value) text pairs."""
    return Table("", [Column("what"), Column("value")], [[k, str(v)] for k, v in rows])


def _gbs(gbs: float) -> str:
    """A bandwidth in a sentence of the page: "4.43 GB/s"."""
    return f"{fmt_bandwidth(gbs)} GB/s"


def median_ci(r) -> Noted | tuple | None:
    """A stored row's median with its interval as a "median_ci" cell, a wrong row's with "WRONG (n)" after it."""
    if r is None:
        return None
    v = (r.median_s, r.ci_low_s, r.ci_high_s)
    return v if r.ok else Noted(v, f"WRONG ({r.nwrong})")


def provenance_blocks(path: Path, meta: Mapping, rows: Sequence, warnings: Sequence[str],
                      notes: Sequence[str], settings: Sequence[tuple[str, str]] | None = None,
                      cases: str | None = None, describe=None) -> list:
    """The "Provenance" section: one table of the run's provenance, then warnings and failures.

    `settings` replaces the sweep's rows (synchronisation, timer resolution, sizes,
    repetitions) and `cases` its count of cases; `describe(row)` names a failed row.
    """
    cfg = meta.get("config") or {}
    hosts = meta.get("hosts") or {}
    thread = meta.get("thread_level", "?")
    if meta.get("thread_level_reason"):
        thread += f" ({meta['thread_level_reason']})"
    sizes = cfg.get("sizes") or []
    if settings is None:
        settings = [
            ("synchronisation", str(cfg.get("sync", "?"))),
            ("timer resolution", human_time(meta["timer_resolution_s"]) if meta.get("timer_resolution_s") else "?"),
            ("sizes", ", ".join(format_size(s) for s in sizes) if sizes else "?"),
            ("repetitions", f"warm-up {cfg.get('warmup', '?')}, {cfg.get('min_reps', '?')} to "
                            f"{cfg.get('max_reps', '?')} samples, target RSE {cfg.get('target_rse', '?')}, "
                            f"budget {cfg.get('budget_s', '?')} s per case"),
        ]
    kv = [
        ("run", f"{path.name} ({meta.get('status', '?')})"),
        ("MPI library", meta.get("mpi_library", "?")),
        ("MPI vendor / standard", f"{meta.get('mpi_vendor', '?')} / MPI {meta.get('mpi_standard', '?')}"),
        ("ranks", f"{meta.get('nranks', '?')} on {meta.get('nodes', '?')} node(s), "
                  f"{meta.get('ranks_per_node', '?')} per node"
                  + (" (oversubscribed: more ranks than cores)" if meta.get("oversubscribed") else "")),
        ("hosts (ranks)", ", ".join(f"{h} ({n})" for h, n in hosts.items()) or "?"),
        *((("node map", topology_line(meta)),) if topology_line(meta) else ()),
        ("cores per node", ", ".join(f"{h}: {n}" for h, n in (meta.get("cores_per_node") or {}).items()) or "?"),
        ("thread level", thread),
        *settings,
        ("versions", f"ccbench {meta.get('ccbench', '?')} (git {meta.get('git_commit') or '-'}), "
                     f"Python {meta.get('python', '?')}, numpy {meta.get('numpy', '?')}, "
                     f"mpi4py {meta.get('mpi4py', '?')}"),
        ("platform", f"{meta.get('platform', '?')}, {meta.get('cpu', '?')}"),
        *([("hardware", hardware_summary(meta.get("hardware")))] if hardware_summary(meta.get("hardware")) else []),
        *([("launches", f"{launch_count(dict(meta), rows)}, each a separate job with its own case order (seed "
                        f"{meta.get('order_seed', '?')}); the parts are under parts/")]
          if launch_count(dict(meta), rows) > 1 else []),
        ("started / ended", f"{meta.get('start_time', '?')} / {meta.get('end_time', '-')}"),
        ("command", " ".join(str(a) for a in meta.get("argv") or []) or "?"),
    ]
    env = meta.get("mpi_env") or {}
    if env:
        kv.append(("MPI environment", ", ".join(f"{k}={v}" for k, v in env.items())))
    slurm = meta.get("slurm") or {}
    if slurm.get("SLURM_JOB_ID"):
        kv.append(("Slurm job", f"{slurm['SLURM_JOB_ID']} ({slurm.get('SLURM_JOB_NUM_NODES', '?')} nodes)"))
    lab = lab_block(meta)
    if lab:
        kv.append(("emulated lab", ", ".join(f"{k}={v}" for k, v in lab.items() if not isinstance(v, (dict, list)))))
    bad = [r for r in rows if not r.ok]
    kv.append(("cases", cases if cases is not None else
               f"{len(rows)} finished of {meta.get('planned_cases', '?')} planned, "
               f"{len(meta.get('skipped') or [])} skipped, {len(bad)} wrong"))
    if describe is None:
        def describe(r):
            return f"{r.collective}/{r.algorithm} {format_size(r.nbytes)}"
    blocks: list = [("h", 2, "Provenance"), *to_block(_what_value(kv))]
    items = [f"warning: {w}" for w in warnings]
    items += [f"FAILED: {describe(r)}: {r.nwrong} wrong elements" for r in bad]
    items += [f"skipped: {s.get('what')}: {s.get('why')}" for s in meta.get("skipped") or []][:20]
    items += [f"fit note: {n}" for n in notes]
    if items:
        blocks.append(("ul", items))
    return blocks


def _network_blocks(fit, meta: Mapping) -> list:
    net = fit.network
    pp, jt = net.pingpong, net.joint
    if not pp and not jt:
        return []
    t = Table("", [Column("parameter"), *[Column(h, align="right") for h in (
        "ping-pong + local reduction", "95% CI", "joint (counted traffic)", "95% CI")]])
    for label, key, ci_key, quantity, value, interval in (
        ("α (latency)", "alpha_s", "alpha_ci_s", "time", lambda v: v, _interval),
        ("bandwidth 1/β (GB/s)", "beta_s_per_byte", "beta_ci_s_per_byte", "bandwidth", gbs_of_beta, _bw_interval),
        ("γ (reduction, per byte)", "gamma_s_per_byte", "gamma_ci_s_per_byte", "time_per_byte", lambda v: v,
         _interval),
    ):
        cells = [label]
        for est in (pp, jt):
            v = getattr(est, key) if est else None
            ci = interval(getattr(est, ci_key)) if est else None
            cells += [None if v is None else Cell(value(v), quantity),
                      None if ci is None else Cell(ci, quantity + "_ci")]
        t.add_row(*cells)
    blocks = [("h", 2, "Network parameters"),
              ("p", "Hockney's model T(n) = α + β·n with γ per reduced byte (Thakur, Rabenseifner & Gropp, "
                    "IJHPCA 2005), fitted by `ccbench fit`'s library (relative-weighted least squares, 95% "
                    "bootstrap intervals over the raw samples). Predictions below use: "
                    f"{net.used_for_predictions or 'none'}."),
              *to_block(t)]
    lab = lab_block(meta)
    if lab:
        blocks += _lab_blocks(lab, pp, fit.lab)
    return blocks


def _lab_blocks(lab: Mapping, pp, block: Mapping | None) -> list:
    """Injected (emulated lab) vs fitted one-way delay and bandwidth.

    ``delay_s`` is the one-way delay the lab adds to every message and ``rate_bps`` its
    link rate in bits per second, so the injected bandwidth is rate_bps / 8 bytes/s.  When
    the fit document carries the lab's own comparison (``block``: fitted from a low
    statistic per size, delay = alpha minus a zero-delay baseline's alpha), it is shown;
    otherwise the run's ping-pong fit `pp` (medians; its alpha includes the hosts' own
    latency).
    """
    t = Table("", [Column("quantity"), *[Column(h, align="right") for h in (
        "injected", "fitted", "95% CI", "fitted / injected")]])

    def time_row(label: str, delay: float, fitted, ci) -> None:
        t.add_row(label, Cell(delay, "time"), None if fitted is None else Cell(fitted, "time"),
                  None if ci is None else Cell(ci, "time_ci"),
                  Cell(fitted / delay, "ratio") if fitted is not None and delay > 0 else None)

    delay, rate = lab.get("delay_s"), lab.get("rate_bps")
    fit = (block or {}).get("fitted")
    if fit:
        what = f"the lab's fit (each size's {fit.get('statistic', '?')}"
        what += "; delay = α − the zero-delay baseline's α)" if (block.get("baseline") or {}).get("alpha_s") \
            is not None else "; no zero-delay baseline: the fitted α includes the hosts' own latency)"
        d = block.get("fitted_delay_s")
        if isinstance(delay, (int, float)):
            time_row("one-way delay" if d is not None else "one-way latency α", delay,
                     d if d is not None else fit.get("alpha_s"),
                     _interval(fit.get("alpha_ci_s")) if d is None else None)
        r = fit.get("rate_bps")
        fitted_gbs = r / 8e9 if isinstance(r, (int, float)) and math.isfinite(r) and r > 0 else None
        ci = fit.get("rate_ci_bps") or []
        bw_ci = (ci[0] / 8e9, ci[1] / 8e9) if len(ci) == 2 and _interval(ci) else None
    elif pp:
        what = "the run's ping-pong fit (medians; α includes the hosts' own latency)"
        if isinstance(delay, (int, float)):
            time_row("one-way latency α", delay, pp.alpha_s, _interval(pp.alpha_ci_s))
        beta = pp.beta_s_per_byte
        fitted_gbs = 1e-9 / beta if beta and beta > 0 else None
        bw_ci = _bw_interval(pp.beta_ci_s_per_byte)
    else:
        return []
    if isinstance(rate, (int, float)) and rate > 0:
        injected = rate / 8e9
        t.add_row("bandwidth (GB/s)", Cell(injected, "bandwidth"),
                  Cell(fitted_gbs, "bandwidth") if fitted_gbs else None,
                  None if bw_ci is None else Cell(bw_ci, "bandwidth_ci"),
                  Cell(fitted_gbs / injected, "ratio") if fitted_gbs else None)
    if not t.rows:
        return []
    return [("h", 3, "Injected vs fitted (emulated lab)"),
            ("p", f"What the lab injected (rate_bps in bits per second, so bandwidth = rate_bps / 8) against "
                  f"{what}."),
            *to_block(t)]


# --------------------------------------------------------------------------- the node's limit

#: The collectives whose bus bandwidth is held against the memory copy limit, and at how many of the largest sizes.
LIMIT_COLLECTIVES = ("allreduce", "allgather")
LIMIT_SIZES = 3


def _limit_text(lim: MemoryLimit) -> str:
    """What the limit is, in one sentence of the page."""
    n = lim.limiting
    shared = (f"the {n.ranks} ranks of a node copy at once and share its {_gbs(n.aggregate_gbs)}, "
              f"{_gbs(n.per_rank_gbs)} each" if n.ranks > 1 else
              f"one rank per node copies at {_gbs(n.aggregate_gbs)}")
    return (f"The limit is the per-rank share of the node's memory copy bandwidth: {shared}"
            f"{f' (on {n.host}, the node with the least per rank)' if len(lim.nodes) > 1 else ''}; "
            f"a message byte is read and written once, so the limit is {_gbs(lim.copy_gbs)} of bytes copied "
            "per rank (ccbench.analysis.limits). Bus bandwidth is per-rank bytes per second by construction; "
            "above 100% the data stayed in cache.")


def _largest_cells(g: Curves) -> dict[int, dict[str, float]]:
    """{size: {algorithm: busbw GB/s}} of the group's correct rows at its largest (up to LIMIT_SIZES) sizes."""
    sizes = [n for n in g.sizes if n > 0][-LIMIT_SIZES:]
    return {n: {a: r.busbw_gbs for a, rs in g.by_algorithm.items() for r in rs if r.nbytes == n and r.ok}
            for n in sizes}


def limit_blocks(lim: MemoryLimit | None, groups: Sequence[Curves]) -> list:
    """The page's section on the node's limit: the memory copy figures, and the best hand-written and native
    allreduce/allgather at the largest size as a share of the limit; nothing for a run without the record."""
    if lim is None:
        return []
    rows = [("method", lim.method),
            ("one core (the others idle)", f"{_gbs(lim.one_core_gbs)} on {lim.one_core_host}, "
                                           f"{format_size(lim.one_core_nbytes)} buffers")]
    rows += [(f"all ranks at once, {n.host}", f"{_gbs(n.aggregate_gbs)} over {n.ranks} ranks, "
                                              f"{_gbs(n.per_rank_gbs)} each, {format_size(b)} buffers per rank")
             for n, b in zip(lim.nodes, lim.per_rank_nbytes, strict=True)]
    rows += [("per-rank limit (bytes copied)", _gbs(lim.copy_gbs)),
             ("intra-node β per rank", fmt_time_per_byte(lim.intra_node_beta_s_per_byte)),
             ("repetitions", f"best of {lim.repetitions}")]
    blocks: list = [("h", 2, "How close to the node's limit"),
                    ("p", "Memory copy bandwidth measured at the start of the sweep, like STREAM copy (McCalpin "
                          "1995) with numpy; bandwidths count bytes read + written, as STREAM does. "
                          + _limit_text(lim)),
                    *to_block(_what_value(rows))]
    best = Table("", [Column("collective"), Column("size", "size"), Column("best"), Column("algorithm"),
                      Column("busbw GB/s", "bandwidth"), Column("% of limit", "share")])
    for g in groups:
        if g.collective not in LIMIT_COLLECTIVES or not (cells := _largest_cells(g)):
            continue
        n = max(cells)
        for side, (alg, share) in best_shares(cells[n], lim.copy_gbs).items():
            best.add_row(variant_label(g), n, side, alg, cells[n][alg], share)
    if best.rows:
        blocks += to_block(best)
    return blocks


def _limit_table(g: Curves, lim: MemoryLimit) -> list:
    """A group's busbw as a share of the limit per algorithm at its largest sizes (allreduce, allgather only)."""
    if g.collective not in LIMIT_COLLECTIVES or not (cells := _largest_cells(g)):
        return []
    algs = list(g.by_algorithm)
    t = Table("", [Column("size", "size"), *[Column(a, "share") for a in algs]])
    for n, c in cells.items():
        t.add_row(n, *[share_of_limit(c[a], lim.copy_gbs) if a in c else None for a in algs])
    return [("h", 3, f"Bus bandwidth as % of memory copy bandwidth (limit {_gbs(lim.copy_gbs)} per rank)"),
            *to_block(t)]


def _collective_blocks(g: Curves, fit, figures: Mapping[str, str], tolerance: float,
                       limit: MemoryLimit | None = None) -> list:
    coll = COLLECTIVES.get(g.collective)
    algs = list(g.by_algorithm)
    blocks: list = [("h", 2, variant_label(g))]
    if coll is not None:
        factor = coll.busbw_factor(g.nranks)
        bw = (f" Bus bandwidth = size / time × {factor:.3g} (nccl-tests, doc/PERFORMANCE.md)."
              if g.collective != "barrier" else "")
        k = max(r.n_launches for a in algs for r in g.by_algorithm[a])
        blocks.append(("p", f"Size: {coll.size_definition}.{bw} " + (
            "Times are the median over samples, each sample the slowest rank's time of one call; brackets: "
            "distribution-free 95% CI of the median." if k < 2 else
            f"Times are the geometric mean of the {k} launches' medians, each the median of one launch's "
            "samples, each sample the slowest rank's time of one call; brackets: 95% CI over launches "
            "(two-stage bootstrap: launches, then samples within them).")))
    cell = {(r.algorithm, r.nbytes): r for a in algs for r in g.by_algorithm[a]}
    latency = Table("", [Column("size", "size"), *[Column(a, "median_ci") for a in algs]])
    busbw = Table("", [Column("size", "size"), *[Column(a, "bandwidth") for a in algs]])
    for n in g.sizes:
        latency.add_row(n, *[median_ci(cell.get((a, n))) for a in algs])
        busbw.add_row(n, *[cell[(a, n)].busbw_gbs if (a, n) in cell else None for a in algs])
    blocks += [("h", 3, "Latency (median [95% CI])"), *to_block(latency)]
    blocks += launch_blocks([r for a in algs for r in g.by_algorithm[a]],
                            lambda r: f"{r.algorithm} {format_size(r.nbytes)}")
    if g.collective != "barrier":
        blocks += [("h", 3, "Bus bandwidth (GB/s)"), *to_block(busbw)]
    if limit is not None:
        blocks += _limit_table(g, limit)
    fast = fastest_per_size(g)
    if len(algs) > 1 and fast:
        blocks += fastest_blocks("Fastest algorithm per size", "cases", fast, Column("size", "size"),
                                 lambda f: f.nbytes)
    curves = _curves(fit, g)
    if curves:
        t = Table("", [Column("algorithm"), Column("sizes", "size_range", align="left"), Column("α", "time"),
                       Column("95% CI", "time_ci"), Column("1/β GB/s", "bandwidth"), Column("95% CI", "bandwidth_ci"),
                       Column("R²", "r2"), Column("max rel. resid.", "share"), Column("flags")])
        for c in sorted(curves, key=lambda c: algorithm_order(c.algorithm)):
            seg = c.segmented
            for s in seg.segments:
                t.add_row(c.algorithm, (s.nbytes_lo, s.nbytes_hi), s.alpha_s, _interval(s.alpha_ci_s),
                          gbs_of_beta(s.beta_s_per_byte), _bw_interval(s.beta_ci_s_per_byte), seg.r2,
                          seg.max_rel_residual, ", ".join(c.flags) or "-")
        blocks += [("h", 3, "Fitted parameters"),
                   ("p", "T(n) = α + β·n per curve, segmented at protocol changes (number of segments by "
                         "BIC), 95% bootstrap CIs; bandwidth = 1/β in GB/s."),
                   *to_block(t)]
    checks = _checks(fit, g)
    if checks:
        off = [c for c in checks if c.off]
        line = (f"Predicted vs measured ({fit.network.used_for_predictions} parameters): "
                f"{len(checks) - len(off)} of {len(checks)} modelled cases within ±{tolerance:.0%}.")
        ww = next((w for w in fit.who_wins if w.collective == g.collective), None)
        if ww and ww.agreement is not None:
            line += f" The predicted fastest algorithm matches the measured one at {ww.agreement:.0%} of sizes."
        blocks += [("h", 3, "Model check"), ("p", line)]
        if off:
            t = Table("", [Column("algorithm"), Column("size", "size"), Column("measured", "time"),
                           Column("predicted", "time"), Column("measured / predicted", "model_ratio"),
                           Column("likely reason")])
            for c in off:
                t.add_row(c.algorithm, c.nbytes, c.measured_s, c.predicted_s, c.ratio,
                          ", ".join(c.reasons) or "unknown")
            blocks += to_block(t)
    flagged = [f"{r.algorithm} {format_size(r.nbytes)}: {', '.join(r.flags)}"
               for a in algs for r in g.by_algorithm[a] if r.flags]
    if flagged:
        blocks += [("p", f"Flagged cases ({len(flagged)} of {len(cell)}; see `ccbench show` for the definitions):"),
                   ("ul", flagged)]
    if figures:
        blocks.append(("h", 3, "Figures"))
        for name, alt in figures.items():
            blocks.append(("img", name, alt))
    return blocks


def group_figure(g: Curves, fit, kind: str):
    """One figure of a variant group: "latency", "busbw" or "predicted"; None when there is nothing to draw.

    Only sizes above 0 B with a positive median are drawn, and only groups with two or
    more such sizes; "latency" adds the fitted segments of `fit` (a `RunFit`, or None) and
    its bands are the stored intervals (over launches for a run of several, as its legend says),
    "predicted" needs its model checks.
    """
    from ccbench.present.plots import busbw_figure, latency_figure, predicted_figure, size_label

    curves = {a: [r for r in rs if r.nbytes > 0 and r.median_s > 0] for a, rs in g.by_algorithm.items()}
    curves = {a: rs for a, rs in curves.items() if rs}
    if not curves or len({r.nbytes for rs in curves.values() for r in rs}) < 2:
        return None
    label = variant_label(g)
    if kind == "latency":
        k = max(r.n_launches for rs in curves.values() for r in rs)
        over = f" (geometric mean of {k} launches' medians)" if k > 1 else ""
        segments = {c.algorithm: list(c.segmented.segments) for c in _curves(fit, g)}
        return latency_figure(curves, segments, f"{label}: median time per call{over}",
                              size_label(g.collective))
    if kind == "busbw":
        if g.collective in ("barrier",):
            return None
        return busbw_figure(curves, f"{label}: bus bandwidth", size_label(g.collective))
    if kind == "predicted":
        checks = _checks(fit, g)
        if not checks:
            return None
        return predicted_figure(checks, f"{label}: measured vs predicted (parameters from "
                                f"{fit.network.used_for_predictions})", fit.tolerance)
    raise ValueError(f"unknown figure kind {kind!r}")


# --------------------------------------------------------------------------- rendering


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence) -> str:
    """Blocks as Markdown (GitHub-flavoured pipe tables)."""
    out = []
    for b in blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + b[2])
        elif b[0] == "p":
            out.append(b[1])
        elif b[0] == "ul":
            out.append("\n".join(f"- {_md_cell(i)}" for i in b[1]))
        elif b[0] == "table":
            _, head, rows, right = b
            lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |",
                     "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
            out.append("\n".join(lines))
        elif b[0] == "img":
            out.append(f"![{b[2]}]({b[1]})")
    return "\n\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.2em;font-size:0.9em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em}th{background:#f3f3f3}td.r{text-align:right}
img{max-width:100%;display:block;margin:0.5em 0 1.5em}h2{border-bottom:1px solid #ddd;margin-top:2em}
code{background:#f3f3f3;padding:0 0.2em}"""


def render_html(blocks: Sequence, title: str, images: Mapping[str, bytes]) -> str:
    """Blocks as one HTML page; images (name -> PNG bytes) embedded as data URIs."""
    e = html.escape
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">", f"<title>{e(title)}</title>",
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            out.append(f"<p>{e(b[1])}</p>")
        elif b[0] == "ul":
            out.append("<ul>" + "".join(f"<li>{e(str(i))}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            _, head, rows, right = b
            out.append("<table><thead><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in head) + "</tr></thead><tbody>")
            for r in rows:
                out.append("<tr>" + "".join(f"<td class=\"r\">{e(str(c))}</td>" if i in right else
                                            f"<td>{e(str(c))}</td>" for i, c in enumerate(r)) + "</tr>")
            out.append("</tbody></table>")
        elif b[0] == "img":
            data = base64.b64encode(images[b[1]]).decode("ascii")
            out.append(f"<img alt=\"{e(b[2])}\" src=\"data:image/png;base64,{data}\">")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def page_files(blocks: Sequence, title: str, images: Mapping[str, bytes]) -> dict[str, str | bytes]:
    """The files of a report page: ``report.md``, the self-contained ``report.html`` and the PNG `images`."""
    return {"report.md": render_markdown(blocks), "report.html": render_html(blocks, title, images), **images}


def add_figure(fig, name: str, images: dict[str, bytes]) -> str:
    """Keep `fig` as the PNG `name` of the page (`images`: name -> bytes); return `name`."""
    from ccbench.present.plots import png_bytes

    images[name] = png_bytes(fig)
    return name


# --------------------------------------------------------------------------- the report


def build_sweep_report(run: Run, *, n_boot: int | None = None) -> Report:
    """The `Report` of a stored collective sweep, its files unwritten (``ccbench.workflow.report`` writes them),
    with its groups, fastest per size and fit.  Figures need matplotlib (the ``report`` extra); without it the
    page says how to add them and holds every table.
    """
    from ccbench.analysis.runs import fit_files
    from ccbench.present.plots import have_matplotlib

    plots = have_matplotlib()
    path, meta, rows, warnings = run.path, run.meta, run.rows, run.warnings
    kw = {} if n_boot is None else {"n_boot": n_boot}
    fit, fit_texts = fit_files(run, **kw)  # fits.json as `ccbench fit` writes it
    groups = group_rows(rows)
    per_coll: dict[str, int] = {}
    for g in groups:
        per_coll[g.collective] = per_coll.get(g.collective, 0) + 1

    images: dict[str, bytes] = {}
    blocks: list = [("h", 1, f"ccbench report: {path.name}"),
                    ("p", f"{meta.get('mpi_library', '?')}; {meta.get('nranks', '?')} ranks on "
                          f"{meta.get('nodes', '?')} node(s); thread level {meta.get('thread_level', '?')}; "
                          f"{len(rows)} cases. Every time, interval and bandwidth below is a stored row of "
                          "cases.jsonl; fitted values are in fits.json beside this page. "
                          + launch_sentence(meta, rows))]
    blocks += provenance_blocks(path, meta, rows, warnings, fit.notes)
    blocks += no_figures_blocks(plots)
    blocks += _network_blocks(fit, meta)
    limit = memory_limit(meta.get("memory_bandwidth"))
    blocks += limit_blocks(limit, groups)
    fastest = {}
    for g in groups:
        label = variant_label(g)
        slug = group_slug(g, per_coll[g.collective] > 1)
        figures: dict[str, str] = {}
        for kind, alt in (("latency", "latency vs size"), ("busbw", "bus bandwidth vs size"),
                          ("predicted", "predicted vs measured")) if plots else ():
            fig = group_figure(g, fit, kind)
            if fig is not None:
                figures[add_figure(fig, f"{slug}-{kind}.png", images)] = f"{label}: {alt}"
        blocks += _collective_blocks(g, fit, figures, fit.tolerance, limit)
        fastest[label] = fastest_per_size(g)
    files = page_files(blocks, f"ccbench report: {path.name}", images)
    files["fits.json"] = fit_texts[".json"]
    return Report(run, files, plots, fastest, fit, groups)


def no_figures_blocks(plots: bool) -> list:
    """The page's line where it has no figures (matplotlib not installed): what is missing and how to add it."""
    from ccbench.present.plots import ADD_FIGURES

    return [] if plots else [("p", f"No figures: matplotlib is not installed; {ADD_FIGURES}.")]
