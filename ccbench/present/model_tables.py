"""Tables of fits and predictions (``ccbench fit``, ``ccbench predict``, ``ccbench workload predict``, the lab check)."""

import math
from collections.abc import Mapping

__all__ = ["curves_table", "lab_table", "network_table", "off_table", "prediction_tables", "who_wins_tables"]


def _ci(ci, fmt) -> str:
    """An interval as [lo, hi] with `fmt` applied, or - when unknown."""
    if not ci or any(v is None or v != v for v in ci):
        return "-"
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def gbs(beta) -> str:
    return "-" if beta is None or beta != beta else ("inf" if beta <= 0 else f"{1e-9 / beta:.3g}")


def gamma_text(g) -> str:
    return "-" if g is None or g != g else f"{g * 1e12:.3g} ps/B"


def network_table(net: dict):
    from rich.table import Table

    from ccbench.core.units import fmt_time

    pp, jt = net.get("pingpong"), net.get("joint")
    ratios = {c["parameter"]: c for c in net.get("comparison", [])}
    t = Table(title="network parameters (95% CI): alpha latency, bandwidth = 1/beta (GB/s = 1e9 B/s), "
                    f"gamma time per reduced byte; predictions use: {net.get('used_for_predictions')}",
              title_justify="left", header_style="bold")
    for col in ("parameter", "ping-pong + reduce_local", "95% CI", "joint (counted traffic)", "95% CI",
                "joint / ping-pong", "CIs overlap"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    fmts = {"alpha_s": ("alpha", fmt_time, "alpha_ci_s"),
            "beta_s_per_byte": ("bandwidth GB/s", gbs, "beta_ci_s_per_byte"),
            "gamma_s_per_byte": ("gamma", gamma_text, "gamma_ci_s_per_byte")}
    for key, (label, fmt, ci_key) in fmts.items():
        cells = [label]
        for est in (pp, jt):
            v = est.get(key) if est else None
            cells += [fmt(v) if v is not None else "-",
                      _ci(est.get(ci_key) if est else None, fmt)]
            if key == "beta_s_per_byte" and cells[-1] != "-":  # bandwidth bounds swap
                lo, hi = est[ci_key]
                cells[-1] = f"[{gbs(hi)}, {gbs(lo)}]"
        c = ratios.get(key)
        cells += [f"{c['ratio']:.3g}" + (" (of beta)" if key == "beta_s_per_byte" else "")
                  if c and c.get("ratio") is not None else "-",
                  "-" if not c or c.get("cis_overlap") is None else ("yes" if c["cis_overlap"] else "no")]
        t.add_row(*cells)
    return t


def curves_table(curves: list):
    from rich.table import Table

    from ccbench.core.units import fmt_time, format_size

    t = Table(title="per-curve fits T(n) = alpha + beta n (segments chosen by BIC; 95% bootstrap CIs)",
              title_justify="left", header_style="bold")
    for col in ("collective", "algorithm", "P", "dtype/op", "segments: sizes  alpha [CI]  GB/s [CI]",
                "breakpoints", "R2", "max rel resid", "flags"):
        t.add_column(col, justify="right" if col in ("P", "R2", "max rel resid") else "left")
    for c in curves:
        seg = c["segmented"]
        lines = [f"{format_size(s['nbytes_lo'])}-{format_size(s['nbytes_hi'])}  "
                 f"{fmt_time(s['alpha_s'])} {_ci(s['alpha_ci_s'], fmt_time)}  "
                 f"{gbs(s['beta_s_per_byte'])} [{gbs(s['beta_ci_s_per_byte'][1])}, "
                 f"{gbs(s['beta_ci_s_per_byte'][0])}]" for s in seg["segments"]]
        t.add_row(c["collective"], c["algorithm"], str(c["nranks"]),
                  f"{c['dtype']}/{c['op']}" if c["op"] else str(c["dtype"]), "\n".join(lines),
                  ", ".join(format_size(b) for b in seg["breakpoints_bytes"]) or "-",
                  f"{seg['r2']:.3f}", f"{seg['max_rel_residual']:.0%}", ",".join(c["flags"]))
    return t


def who_wins_tables(who: list):
    from rich.table import Table

    from ccbench.core.units import format_size

    out = []
    for w in who:
        t = Table(title=f"who wins: {w['collective']} (agreement "
                        + ("-" if w["agreement"] is None else f"{w['agreement']:.0%}") + ")",
                  title_justify="left", header_style="bold")
        for col in ("P", "size", "measured fastest", "fastest modelled", "predicted", "agree", "margin"):
            t.add_column(col, justify="right" if col in ("P", "size", "margin") else "left")
        for r in w["rows"]:
            t.add_row(str(r["nranks"]), format_size(r["nbytes"]), r["measured_winner"],
                      r["measured_winner_modelled"] or "-", r["predicted_winner"] or "-",
                      "-" if r["agree"] is None else ("yes" if r["agree"] else "[red]no[/]"),
                      "-" if r["margin"] is None else f"{r['margin']:.0%}")
        xs = [f"{x['faster_below']} -> {x['faster_above']} at {format_size(round(x['nbytes']))} (P={x['nranks']})"
              for x in w["crossovers"]]
        t.caption = "predicted crossovers: " + ("; ".join(xs) if xs else "none in the measured range")
        t.caption_justify = "left"
        out.append(t)
    return out


def off_table(checks: list, tolerance: float):
    from rich.table import Table

    from ccbench.core.units import fmt_time, format_size

    off = [c for c in checks if c["off"]]
    t = Table(title=f"predicted vs measured: {len(off)} of {len(checks)} modelled cases off by more "
                    f"than {tolerance:.0%} (ratio = measured / predicted)",
              title_justify="left", header_style="bold")
    for col in ("collective", "algorithm", "P", "size", "measured", "predicted", "ratio", "likely reason"):
        t.add_column(col, justify="right" if col in ("P", "size", "measured", "predicted", "ratio") else "left")
    for c in off:
        t.add_row(c["collective"], c["algorithm"], str(c["nranks"]), format_size(c["nbytes"]),
                  fmt_time(c["measured_s"]), fmt_time(c["predicted_s"]),
                  "-" if c["ratio"] is None else f"{c['ratio']:.2f}", ", ".join(c["reasons"]) or "unknown")
    return t


def lab_table(block: Mapping):
    """A rich table: injected, fitted, error, for the delay and the rate."""
    from rich.table import Table

    from ccbench.core.units import fmt_time, format_size
    from ccbench.lab.link import format_rate

    fit = block.get("fitted")
    inj = block["injected"]
    base = block.get("baseline") or {}
    title = (f"lab: injected vs fitted (ping-pong, {fit['statistic'] if fit else '-'} per size; "
             f"{block.get('hosts')} hosts; {block.get('emulator') or 'emulator unknown'})")
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in ("parameter", "injected", "fitted", "95% CI", "error"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
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


def prediction_tables(rows: list[dict]) -> list:
    """One table per rank count, fastest first within each variant."""
    from rich.table import Table

    from ccbench.core.units import fmt_time, format_size

    tables = []
    for P in dict.fromkeys(r["nranks"] for r in rows):
        mine = [r for r in rows if r["nranks"] == P]
        best = min(r["time_s"] for r in mine)
        t = Table(title=f"predicted step communication at {P} ranks (sum of the calls' modelled times, "
                        "nothing overlapped)", title_justify="left", header_style="bold")
        for col in ("variant", "algorithms", "ranks/comm", "calls", "size", "predicted", "vs best"):
            t.add_column(col, justify="left" if col in ("variant", "algorithms") else "right")
        for variant in dict.fromkeys(r["variant"] for r in mine):
            for r in sorted((r for r in mine if r["variant"] == variant), key=lambda r: r["time_s"]):
                t.add_row(r["variant"], r["algorithm"], str(r["group_ranks"]), str(r["ncalls"]),
                          format_size(r["nbytes"]), fmt_time(r["time_s"]), f"{r['time_s'] / best:.2f}x")
        tables.append(t)
    return tables

