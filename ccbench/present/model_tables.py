"""Tables of fits and predictions (`ccbench fit`, `ccbench predict`, `ccbench workload predict`, the lab check)."""

import math
from collections.abc import Mapping

from ccbench.core.units import fmt_time, format_size
from ccbench.present.table import Column, Styled, Table, fmt_bandwidth, fmt_time_per_byte, render, to_rich

__all__ = ["checks_table", "curves_table", "effective_table", "gamma_line", "gamma_text", "gbs", "gbs_of_beta",
           "lab_table", "native_table", "network_table", "off_table", "params_line", "prediction_grid_table",
           "prediction_tables", "print_fit", "print_predictions", "who_wins_tables"]


def _ci(ci, fmt) -> str:
    """An interval as [lo, hi] with `fmt` applied, or - when unknown."""
    if not ci or any(v is None or v != v for v in ci):
        return "-"
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def gbs_of_beta(beta) -> float | None:
    """The bandwidth in GB/s (1e9 B/s) of an inverse bandwidth in s/byte: infinite for 0 or less, None for none."""
    if beta is None or beta != beta:
        return None
    return math.inf if beta <= 0 else 1e-9 / beta


def gbs(beta) -> str:
    """Bandwidth in GB/s (1e9 B/s) of an inverse bandwidth in s/byte, as the "bandwidth" quantity writes it."""
    v = gbs_of_beta(beta)
    return "-" if v is None else fmt_bandwidth(v)


def gamma_text(g) -> str:
    """A reduction cost per byte, in ps/B (ns/B from 1 ns/B on): the "time_per_byte" quantity."""
    return "-" if g is None or g != g else fmt_time_per_byte(g)


def _get(params, key):
    return params.get(key) if isinstance(params, Mapping) else getattr(params, key, None)


def gamma_line(params) -> str:
    """gamma per path and temperature of a parameter set (NetworkParams or its dict), and where cold begins."""
    def g(key):
        v = _get(params, key)
        return gamma_text(v) if v is not None else "-"

    above = _get(params, "cold_above_bytes")
    text = (f"gamma: hand-written (numpy) {g('gamma_s_per_byte')} warm, {g('gamma_cold_s_per_byte')} cold; "
            f"native (MPI_Reduce_local) {g('library_gamma_s_per_byte')} warm, "
            f"{g('library_gamma_cold_s_per_byte')} cold; ")
    return text + (f"cold above {format_size(round(above))} per rank" if above is not None
                   else "every size warm (no cold timings)")


def oversubscribed_note(run) -> str | None:
    """What a prediction from an oversubscribed run (more ranks than cores) must say; None for any other source."""
    if run is None or not run.meta.get("oversubscribed"):
        return None
    return (f"note: {run.path.name} was measured with more ranks than cores (oversubscribed): its times include "
            "waits for the scheduler, so predictions from it overstate every latency-bound time")


def params_line(params, source: str) -> str:
    """The network parameters a prediction uses, one line, the same for ``predict`` and ``workload predict``."""
    paths = getattr(params, "numpy", None), getattr(params, "mpi", None)
    if paths[0] is not None:  # parameters per path
        return (f"parameters {source}: hand-written: alpha = {fmt_time(paths[0].alpha_s)}, beta = "
                f"{paths[0].beta_s_per_byte:.4g} s/B ({gbs(paths[0].beta_s_per_byte)} GB/s); native: alpha = "
                f"{fmt_time(paths[1].alpha_s)}, beta = {paths[1].beta_s_per_byte:.4g} s/B "
                f"({gbs(paths[1].beta_s_per_byte)} GB/s); " + gamma_line(paths[0]))
    g = params.gamma_s_per_byte
    line = (f"parameters {source}: alpha = {fmt_time(params.alpha_s)}, "
            f"beta = {params.beta_s_per_byte:.4g} s/B ({gbs(params.beta_s_per_byte)} GB/s), "
            f"gamma = {gamma_text(g) if g is not None else '0 (not given)'}")
    if any(getattr(params, k, None) is not None for k in ("library_gamma_s_per_byte", "gamma_cold_s_per_byte")):
        line += "; " + gamma_line(params)
    return line


def effective_table(eff) -> Table:
    """Effective parameters per path (a `PathParams`): alpha and bandwidth with CIs, fit quality."""
    t = Table("effective parameters per path (fitted to the run's collectives at the measured gamma; 95% CI)",
              [Column("path"), Column("alpha", align="right"), Column("95% CI", align="right"),
               Column("bandwidth GB/s", align="right"), Column("95% CI ", align="right"), Column("rows", "count"),
               Column("R2", "r2"), Column("max rel resid", "share")])
    for label, key in (("hand-written (numpy)", "numpy"), ("native (MPI library)", "mpi")):
        p = getattr(eff, key)
        b = p.beta_ci_s_per_byte
        t.add_row(label, fmt_time(p.alpha_s), _ci(p.alpha_ci_s, fmt_time), gbs(p.beta_s_per_byte),
                  _ci(b[::-1], gbs) if b else "-", p.n_points, p.r2, p.max_rel_residual)
    t.caption = "; ".join(eff.notes)
    return t


def checks_table(by_params: Mapping, used: str | None) -> Table:
    """The model checks under each parameter set (`ParamChecks` by name): per collective and kind, median and
    worst measured / predicted."""
    big = next((x.large_bytes for xs in by_params.values() for x in xs.summary), 0)
    t = Table(f"model checks under each parameter set (ratio = measured / predicted; worst = farthest from 1); "
              f"predictions use: {used}",
              [Column("parameters"), Column("collective"), Column("kind"), Column("cases", "count"),
               Column("off", "count"), Column("median", "model_ratio"),
               Column("worst", "model_ratio"), Column(f"median >= {format_size(big)}", "model_ratio"),
               Column(f"worst >= {format_size(big)}", "model_ratio")])
    for name, block in by_params.items():
        for x in block.summary:
            t.add_row(name + (" (used)" if name == used else ""), x.collective, x.kind, x.cases, x.off,
                      x.median_ratio, x.worst_ratio, x.median_ratio_large, x.worst_ratio_large)
    return t


def native_table(models: list) -> Table:
    """How each measured native algorithm is priced: its textbook algorithm(s) and on what premise, or why not."""
    t = Table("native algorithms modelled (priced as their textbook algorithm, with the library's gamma)",
              [Column("collective"), Column("algorithm"), Column("priced as"), Column("note")])
    for m in models:
        if m.modelled_as is None:
            t.add_row(m.collective, m.algorithm, "-", m.reason)
            continue
        as_ = "; ".join(x.text + ("" if len(m.modelled_as) == 1 else
                                  f" at {', '.join(format_size(n) for _, n in x.points)}")
                        for x in m.modelled_as)
        t.add_row(m.collective, m.algorithm, as_, m.reason or "")
    return t


def network_table(net) -> Table:
    """Network parameters (`NetworkFits`): ping-pong + local reduction against the joint fit, with CIs and ratio."""
    pp, jt = net.pingpong, net.joint
    ratios = {c.parameter: c for c in net.comparison}
    t = Table("network parameters (95% CI): alpha latency, bandwidth = 1/beta (GB/s = 1e9 B/s), "
              f"gamma time per reduced byte; predictions use: {net.used_for_predictions}",
              [Column("parameter"), *[Column(h, align="right") for h in (
                  "ping-pong + reduce_local", "95% CI", "joint (counted traffic)", "95% CI", "joint / ping-pong",
                  "CIs overlap")]])
    fmts = {"alpha_s": ("alpha", fmt_time, "alpha_ci_s"),
            "beta_s_per_byte": ("bandwidth GB/s", gbs, "beta_ci_s_per_byte"),
            "gamma_s_per_byte": ("gamma", gamma_text, "gamma_ci_s_per_byte")}
    for key, (label, fmt, ci_key) in fmts.items():
        cells = [label]
        for est in (pp, jt):
            v, ci = (getattr(est, key), getattr(est, ci_key)) if est else (None, None)
            if key == "beta_s_per_byte" and ci:  # bandwidth bounds swap
                ci = ci[::-1]
            cells += [fmt(v) if v is not None else "-", _ci(ci, fmt)]
        c = ratios.get(key)
        cells += [f"{c.ratio:.3g}" + (" (of beta)" if key == "beta_s_per_byte" else "")
                  if c and c.ratio is not None else "-",
                  "-" if not c or c.cis_overlap is None else ("yes" if c.cis_overlap else "no")]
        t.add_row(*cells)
    return t


def reduction_table(paths: list[dict]) -> Table | None:
    """gamma per path and temperature (``ccbench.analysis.fit.gamma_per_path``): numpy's, MPI's, their ratio.

    None when the run timed one path only (runs made before the paths were told apart).
    """
    if not any(p.get("path") == "mpi" for p in paths):
        return None
    t = Table("local reduction per path: gamma (time per reduced byte) [95% CI]; hand-written algorithms reduce "
              "with numpy, the library's own collectives with MPI_Reduce_local; warm = in cache, cold = operands "
              "evicted first",
              [Column("dtype/op"), Column("buffers"), Column("numpy", align="right"), Column("GB/s", align="right"),
               Column("MPI_Reduce_local", align="right"), Column("GB/s ", align="right"),
               Column("MPI / numpy", align="right")])
    by = {(p["dtype"], p["op"], p["temperature"], p["path"]): p for p in paths}
    for dtype, op, temp in dict.fromkeys((p["dtype"], p["op"], p["temperature"]) for p in paths):
        sizes = sorted({n for path in ("numpy", "mpi")
                        for n in (by.get((dtype, op, temp, path)) or {}).get("sizes", ())})
        cells = [f"{dtype}/{op}", f"{temp} ({', '.join(format_size(n) for n in sizes)})"]
        gam = {}
        for path in ("numpy", "mpi"):
            p = by.get((dtype, op, temp, path)) or {}
            g = p.get("gamma_s_per_byte")
            gam[path] = g
            cells += [(gamma_text(g) + " " + _ci(p.get("gamma_ci_s_per_byte"), gamma_text)) if g is not None
                      else p.get("error", "-"), gbs(g) if g is not None else "-"]
        ratio = (gam["mpi"] / gam["numpy"]) if gam["mpi"] and gam["numpy"] else None
        cells.append(f"{ratio:.3g}" if ratio is not None else "-")
        t.add_row(*cells)
    return t


def _segments_text(seg) -> str:
    return "\n".join(f"{format_size(s.nbytes_lo)}-{format_size(s.nbytes_hi)}  "
                     f"{fmt_time(s.alpha_s)} {_ci(s.alpha_ci_s, fmt_time)}  "
                     f"{gbs(s.beta_s_per_byte)} [{gbs(s.beta_ci_s_per_byte[1])}, "
                     f"{gbs(s.beta_ci_s_per_byte[0])}]" for s in seg.segments)


def curves_table(curves: list) -> Table:
    """Per-curve segmented fits: per segment its sizes, alpha and bandwidth with CIs; breakpoints; fit quality."""
    t = Table("per-curve fits T(n) = alpha + beta n (segments chosen by BIC; 95% bootstrap CIs)",
              [Column("collective"), Column("algorithm"), Column("P", "count"), Column("dtype/op"),
               Column("segments: sizes  alpha [CI]  GB/s [CI]"), Column("breakpoints"),
               Column("R2", "r2"), Column("max rel resid", "share"),
               Column("flags")])
    for c in curves:
        seg = c.segmented
        t.add_row(c.collective, c.algorithm, c.nranks, f"{c.dtype}/{c.op}" if c.op else str(c.dtype),
                  _segments_text(seg), ", ".join(format_size(b) for b in seg.breakpoints_bytes) or "-", seg.r2,
                  seg.max_rel_residual, ",".join(c.flags))
    return t


def who_wins_tables(who: list) -> list[Table]:
    """Per collective: the measured fastest against the predicted winner per size, and predicted crossovers."""
    out = []
    for w in who:
        t = Table(f"who wins: {w.collective} (agreement "
                  + ("-" if w.agreement is None else f"{w.agreement:.0%}") + ")",
                  [Column("P", "count"), Column("size", "size"), Column("measured fastest"),
                   Column("fastest modelled"), Column("predicted"), Column("agree"),
                   Column("margin", "percent")])
        for r in w.rows:
            t.add_row(r.nranks, r.nbytes, r.measured_winner, r.measured_winner_modelled, r.predicted_winner,
                      None if r.agree is None else ("yes" if r.agree else Styled("no", "red")), r.margin)
        xs = [f"{x.faster_below} -> {x.faster_above} at {format_size(round(x.nbytes))} (P={x.nranks})"
              for x in w.crossovers]
        t.caption = "predicted crossovers: " + ("; ".join(xs) if xs else "none in the measured range")
        out.append(t)
    return out


def off_table(checks: list, tolerance: float) -> Table:
    """The modelled cases whose measurement is off the prediction by more than `tolerance`, with likely reasons."""
    off = [c for c in checks if c.off]
    t = Table(f"predicted vs measured: {len(off)} of {len(checks)} modelled cases off by more "
              f"than {tolerance:.0%} (ratio = measured / predicted)",
              [Column("collective"), Column("algorithm"), Column("P", "count"), Column("size", "size"),
               Column("measured", "time"), Column("predicted", "time"), Column("ratio", "model_ratio"),
               Column("priced as"), Column("likely reason")])
    for c in off:
        t.add_row(c.collective, c.algorithm, c.nranks, c.nbytes, c.measured_s, c.predicted_s, c.ratio,
                  c.modelled_as or "-", ", ".join(c.reasons) or "unknown")
    return t


def lab_table(block: Mapping) -> Table:
    """The lab check: injected, fitted, error, for the delay and the rate."""
    from ccbench.lab.link import format_rate

    fit = block.get("fitted")
    inj = block["injected"]
    base = block.get("baseline") or {}
    t = Table(f"lab: injected vs fitted (ping-pong, {fit['statistic'] if fit else '-'} per size; "
              f"{block.get('hosts')} hosts; {block.get('emulator') or 'emulator unknown'})",
              [Column("parameter"), *[Column(h, align="right") for h in ("injected", "fitted", "95% CI", "error")]])
    if not fit:
        t.add_row("-", "-", "-", "-", block.get("note", "no fit"))
        return t
    t.add_row(f"alpha (software + delay), {format_size(fit['alpha_sizes'][0])}-{format_size(fit['alpha_sizes'][1])}",
              "-", fmt_time(fit["alpha_s"]),
              f"[{fmt_time(fit['alpha_ci_s'][0])}, {fmt_time(fit['alpha_ci_s'][1])}]", "")
    if base.get("alpha_s") is not None:
        t.add_row("zero-delay baseline alpha", "-", fmt_time(base["alpha_s"]), "",
                  f"run {base.get('run', '?')}")
    d = block.get("fitted_delay_s")
    t.add_row("delay = alpha - baseline", fmt_time(inj["delay_s"]) if inj["delay_s"] is not None else "-",
              fmt_time(d) if d is not None else "- (no baseline)", "",
              f"{block['delay_error_s'] * 1e6:+.1f} us" if block.get("delay_error_s") is not None else "")
    lo, hi = fit["rate_ci_bps"]
    ci = f"[{format_rate(lo)}, {format_rate(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "-"
    t.add_row(f"rate = 8 / beta, {format_size(fit['beta_sizes'][0])}-{format_size(fit['beta_sizes'][1])}",
              format_rate(inj["rate_bps"]) if inj["rate_bps"] else "-",
              format_rate(fit["rate_bps"]) if math.isfinite(fit["rate_bps"]) else "-", ci,
              f"{block['rate_error']:+.1%}" if block.get("rate_error") is not None else "")
    return t


def prediction_tables(rows: list[dict]) -> list[Table]:
    """`ccbench workload predict`: one table per rank count, fastest first within each variant."""
    tables = []
    for P in dict.fromkeys(r["nranks"] for r in rows):
        mine = [r for r in rows if r["nranks"] == P]
        best = min(r["time_s"] for r in mine)
        t = Table(f"predicted step communication at {P} ranks (sum of the calls' modelled times, nothing overlapped)",
                  [Column("variant"), Column("algorithms"), Column("ranks/comm", "count"), Column("calls", "count"),
                   Column("size", "size"), Column("predicted", "time"), Column("vs best (x)", "ratio")])
        for variant in dict.fromkeys(r["variant"] for r in mine):
            for r in sorted((r for r in mine if r["variant"] == variant), key=lambda r: r["time_s"]):
                t.add_row(r["variant"], r["algorithm"], r["group_ranks"], r["ncalls"], r["nbytes"], r["time_s"],
                          r["time_s"] / best)
        tables.append(t)
    return tables


def print_fit(fit, console, files=()) -> None:
    """`ccbench fit`'s view of a `RunFit` (``ccbench.analysis.runs.fit_run``), ending with the `files` written."""
    src = fit.source_provenance
    console.print(f"[bold]fits of {fit.source_path}[/] ({src.get('mpi_library', '?')}, "
                  f"{src.get('nranks', '?')} ranks{', oversubscribed' if src.get('oversubscribed') else ''})")
    for w in fit.warnings + fit.notes:
        console.print(f"[yellow]note: {w}[/]")
    net = fit.network
    console.print(to_rich(network_table(net)))
    if net.effective:
        console.print(to_rich(effective_table(net.effective)))
    paths = reduction_table(net.reduction_paths)
    if paths is not None:
        console.print(to_rich(paths))
    used = net.used_for_predictions
    if used:
        console.print(f"model checks and who-wins use the {used} parameters ({net.why}); "
                      + gamma_line(getattr(net.used, "numpy", net.used)))
    floor = net.harness_floor
    if floor and floor.alpha_without_floor_s is not None:
        rest = floor.alpha_without_floor_s
        console.print(f"harness floor: a zero-byte ping-pong takes {fmt_time(floor.zero_count_s['pingpong'])} one "
                      "way through this loop; "
                      + (f"ping-pong alpha without it: {fmt_time(rest)} (the transport's latency; the rest is the "
                         "Python path, mpi4py and the library's entry)" if rest > 0 else
                         f"alpha is {fmt_time(-rest)} below it: the transport's latency is hidden beneath the "
                         "Python path here (alpha is a fitted intercept, the floor a measured zero-byte call)"))
    over = net.step_overhead
    if over:
        console.print(f"software overhead per step of the hand-written algorithms, beyond alpha: "
                      f"{fmt_time(over.seconds)} (median over {over.cases} cases <= {over.max_bytes} B)"
                      + ("; negative: they pay less per step than this alpha, which is itself inflated "
                         "(ping-pong on oversubscribed cores?), so it explains no case" if over.seconds < 0 else ""))
    if fit.lab:
        console.print(to_rich(lab_table(fit.lab)))
    console.print(to_rich(curves_table(fit.curves)))
    if fit.native_models:
        console.print(to_rich(native_table(fit.native_models)))
    render(who_wins_tables(fit.who_wins), console)
    if fit.checks_by_params:
        console.print(to_rich(checks_table(fit.checks_by_params, used)))
    if fit.model_checks:
        console.print(to_rich(off_table(fit.model_checks, fit.tolerance)))
    if files:
        console.print("wrote " + " and ".join(str(f) for f in files))


def prediction_grid_table(tab) -> Table:
    """One (collective, rank count) of ``ccbench.analysis.runs.predict_table`` (a `PredictionGrid`): every algorithm
    per size, the winner."""
    def head(name: str) -> str:  # long names break after their first / or _
        return (name.replace("/", "/\n", 1) if "/" in name else name.replace("_", "_\n", 1)) if len(name) > 12 else name

    t = Table(f"predicted {tab.collective} at {tab.nranks} ranks",
              [Column("size", "size", no_wrap=True), *[Column(head(a), "time", no_wrap=True) for a in tab.times_s],
               Column("winner", no_wrap=True, min_width=max(map(len, tab.winners)))])
    for i, n in enumerate(tab.sizes):
        t.add_row(n, *[None if v[i] != v[i] else v[i] for v in tab.times_s.values()], tab.winners[i])
    if tab.counts:
        t.caption = f"blocks: --counts {tab.counts}"
    return t


def print_predictions(params, source: str, two, ppn, tables: list[dict], console) -> None:
    """`ccbench predict`'s view: the parameters used (two-level ones too), a table per collective and rank count."""
    console.print(params_line(params, source)
                  + (f"; two-level: intra alpha = {fmt_time(two.intra_alpha_s)}, intra beta = "
                     f"{two.intra_beta_s_per_byte:.4g} s/B, {two.ranks_per_node} ranks per node, "
                     "inter = the parameters above" if two else
                     f"; {ppn} ranks per node (hierarchical allreduce)" if ppn else ""))
    render([prediction_grid_table(tab) for tab in tables], console)


def placed_tables(rows: list) -> list[Table]:
    """`ccbench predict --placement`: per collective and rank count, each algorithm's time under each placement and
    the levels its critical path crosses, step by step; the caption names the fastest per size."""
    tables = []
    for coll, P in dict.fromkeys((r.collective, r.nranks) for r in rows):
        mine = [r for r in rows if (r.collective, r.nranks) == (coll, P)]
        places = list(dict.fromkeys(r.placement for r in mine))
        cols = [Column("size", "size"), Column("algorithm")]
        for p in places:
            cols += [Column(p, "time"), Column(f"{p} path")]
        if len(places) > 1:
            cols.append(Column(f"{places[1]} / {places[0]}", "ratio"))
        t = Table(f"{coll} at {P} ranks, {mine[0].ranks_per_node} per node, placed schedules; path: the messages "
                  "that decided the time, in order (i inside a node, B between nodes, R a round trip between nodes "
                  "for an acknowledged send)", cols)
        by = {(r.nbytes, r.algorithm, r.placement): r for r in mine}
        best = []
        for n in dict.fromkeys(r.nbytes for r in mine):
            for alg in dict.fromkeys(r.algorithm for r in mine):
                got = [by[(n, alg, p)] for p in places]
                cells = [x for r in got for x in (r.time_s, r.levels)]
                t.add_row(n, alg, *cells, *([got[1].time_s / got[0].time_s] if len(got) > 1 and got[0].time_s > 0
                                            else [None] if len(got) > 1 else []))
            win = min((r for r in mine if r.nbytes == n), key=lambda r: r.time_s)
            best.append(f"{format_size(n)} {win.algorithm} ({win.placement})")
        t.caption = "fastest: " + "; ".join(best)
        tables.append(t)
    return tables
