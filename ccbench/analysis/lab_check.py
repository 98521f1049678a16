"""Fitted against injected: the lab run's ping-pong fit beside the delay and rate put on its links (pure).

The model of a ping-pong one way over the emulated link (store-and-forward, tc-netem(8)'s
``delay`` + ``rate``, Hockney's alpha-beta form) is

    T(n) = alpha_0 + delay + n * 8 / rate

where alpha_0 is the cost of the software (MPI, TCP, the emulator's own ~45 us) measured
by a zero-delay baseline run.  So the fitted alpha minus the baseline's alpha estimates
the injected delay, and 8 / beta (beta in s/B) the injected rate in bit/s.  The lines
(`fit_link`) go through each size's minimum -- or a low percentile -- instead of its
median: on a machine whose cores the ranks share with the emulator, the upper part of each
size's distribution measures CPU contention (and, from 256 B on, a second mode one link
delay higher, which the median may land in), not the link.
"""

import math
import re
from collections.abc import Iterable, Mapping

import numpy as np

from ccbench.analysis.fit import N_BOOT, fit_line
from ccbench.core.errors import CCBenchError, UsageError

__all__ = ["DEFAULT_STATISTIC", "baseline_fit", "fit_link", "fitted_vs_injected", "low_statistic_rows"]

#: The per-size statistic lab fits use.
DEFAULT_STATISTIC = "min"
#: alpha from sizes up to this (one small packet), beta from sizes from this up.
SMALL_MAX_BYTES = 128
LARGE_MIN_BYTES = 512 << 10


def _statistic_value(row: Mapping, statistic: str) -> float:
    if statistic == "median":
        return row["median_s"]
    if statistic == "min":
        return row["min_s"]
    m = re.fullmatch(r"p(\d{1,2}(?:\.\d+)?)", statistic)
    if not m:
        raise UsageError(f"bad statistic {statistic!r}: use min, median or a percentile such as p10")
    samples = row.get("samples_s")
    if not samples:
        raise CCBenchError(f"statistic {statistic} needs the raw samples, and a row has none")
    return float(np.percentile(np.asarray(samples, dtype=float), float(m.group(1))))


def low_statistic_rows(rows: Iterable[Mapping], statistic: str = DEFAULT_STATISTIC) -> list[dict]:
    """Copies of `rows` whose ``median_s`` is replaced by the chosen statistic per size.

    The raw samples are dropped from the copies (the fit's bootstrap would otherwise
    resample medians); its intervals then come from the residual bootstrap.
    """
    out = []
    for r in rows:
        value = _statistic_value(r, statistic)
        out.append(dict(r, median_s=value, samples_s=None))
    return out


def _pick(sizes: list[int], keep, fallback: list[int]) -> list[int]:
    chosen = [n for n in sizes if keep(n)]
    return chosen if len(chosen) >= 2 else fallback


def fit_link(rows: Iterable[Mapping], statistic: str = DEFAULT_STATISTIC, *, n_boot: int = N_BOOT) -> dict:
    """alpha (s), beta (s/B) and the rate 8/beta (bit/s) from a run's ping-pong rows.

    alpha is the intercept of the line (`ccbench.analysis.fit.fit_line`) through the small messages
    (<= SMALL_MAX_BYTES, 128 B: one packet, the n-term negligible), beta the slope of the line
    through the large ones (>= LARGE_MIN_BYTES, 512 KiB: the TCP window is open, so per-message
    start-up costs are small against the transfer).  Mid sizes pay protocol switches and
    window growth, which belong to neither parameter.  Without two sizes in a range, the
    two smallest (three largest) sizes are used; the ranges used are returned.
    """
    pp = [r for r in rows if r.get("collective") == "pingpong"]
    if not pp:
        raise CCBenchError("no ping-pong rows: run -C pingpong on the lab to compare fitted and injected")
    low = low_statistic_rows(pp, statistic)
    by_size: dict[int, list[float]] = {}
    for r in low:
        if r["median_s"] and r["median_s"] > 0:
            by_size.setdefault(int(r["nbytes"]), []).append(float(r["median_s"]))
    sizes = sorted(by_size)
    if len(sizes) < 2:
        raise CCBenchError("a lab fit needs ping-pong at two sizes or more")
    small = _pick(sizes, lambda n: n <= SMALL_MAX_BYTES, sizes[:2])
    large = _pick(sizes, lambda n: n >= LARGE_MIN_BYTES, sizes[-3:])

    def line(chosen):
        return fit_line(chosen, [min(by_size[n]) for n in chosen], n_boot=n_boot)

    a, b = line(small), line(large)
    beta = b.beta_s_per_byte
    lo, hi = b.beta_ci_s_per_byte

    def rate(v):
        return 8.0 / v if v and v > 0 and math.isfinite(v) else math.nan

    return {"statistic": statistic, "alpha_s": a.alpha_s, "alpha_ci_s": list(a.alpha_ci_s),
            "alpha_sizes": [small[0], small[-1]], "beta_s_per_byte": beta, "rate_bps": rate(beta),
            "rate_ci_bps": [rate(hi), rate(lo)], "beta_sizes": [large[0], large[-1]], "sizes": sizes}


def baseline_fit(rows: Iterable[Mapping]) -> dict:
    """The lab's zero-delay baseline: `fit_link` of a ping-pong run on the default statistic."""
    return {**fit_link(rows, DEFAULT_STATISTIC), "statistic": DEFAULT_STATISTIC}


def fitted_vs_injected(rows: Iterable[Mapping], lab: Mapping, statistic: str = DEFAULT_STATISTIC, *,
                       n_boot: int = N_BOOT) -> dict:
    """The lab block of ``ccbench fit``: injected delay and rate, fitted ones, their errors.

    ``delay_s`` fitted = alpha - the baseline's alpha (None without a baseline, e.g. the
    baseline run itself: its alpha *is* the baseline).  ``rate_error`` = fitted / injected - 1.
    """
    rows = list(rows)
    base = lab.get("baseline") or {}
    out: dict = {"injected": {"delay_s": lab.get("delay_s"), "rate_bps": lab.get("rate_bps")},
                 "role": lab.get("role"), "hosts": lab.get("hosts"), "emulator": lab.get("emulator"),
                 "baseline": base or None}
    try:
        fit = fit_link(rows, statistic, n_boot=n_boot)
    except CCBenchError as exc:
        out["note"] = str(exc)
        return out
    out["fitted"] = fit
    b_alpha = base.get("alpha_s")
    delay = fit["alpha_s"] - b_alpha if b_alpha is not None else None
    inj_d, inj_r = lab.get("delay_s"), lab.get("rate_bps")
    out["fitted_delay_s"] = delay
    out["delay_error_s"] = delay - inj_d if delay is not None and inj_d is not None else None
    out["rate_error"] = (fit["rate_bps"] / inj_r - 1.0) if inj_r and math.isfinite(fit["rate_bps"]) else None
    return out


