"""Regression gates for CI jobs: a comparison that fails on a slowdown, and a run checked against reference values.

``compare --fail-on slower[:X%]`` fails when some case of another run is *decided* slower at the
launch level (``ccbench.analysis.compare``: Welch's t over per-launch log-medians, Benjamini-
Hochberg over the cases, so an A/A pair of runs fails with probability at most the level: BH
controls the family-wise error when no case differs, Benjamini & Hochberg, JRSS B 57, 1995)
and the lower end of its ratio interval is at least 1 + X: slower by more than X with the
interval's confidence -- a superiority-by-a-margin test (e.g. Wellek, "Testing Statistical
Hypotheses of Equivalence and Noninferiority", 2nd ed. 2010, ch. 2).  ``faster[:X%]`` and
``different[:X%]`` mirror it.

``ccbench check RUN --reference FILE`` compares a run's typical times with reference values the
way ReFrame's performance references do: per case a value and relative lower and upper bounds
(``(value, lower, upper)`` with lower <= 0 <= upper, ``None`` for no bound; ReFrame,
"Performance references", reframe-hpc.readthedocs.io), and fails when a measured median lies
outside ``value * (1 + lower) .. value * (1 + upper)``.

Pure: no MPI, no terminal.
"""

import csv
import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ccbench.core.errors import UsageError
from ccbench.core.units import MAX_TIME_S, MIN_TIME_S, format_size, parse_size, parse_time
from ccbench.core.units import is_time as _is_time

__all__ = ["FAIL_ON", "NOT_A_TIME", "Failure", "Reference", "RefResult", "check_references", "gate_failures",
           "pair_label", "parse_fail_on", "read_references"]

FAIL_ON = ("slower", "faster", "different")
#: The verdict of a pair or reference without a usable time (`ccbench.core.units.is_time`: NaN, infinite, zero,
#: negative or beyond a day): it fails the gate.
NOT_A_TIME = "not a time"
NOT_A_TIME_TEXT = f"is not a time (a finite number of seconds from {MIN_TIME_S:g} to {MAX_TIME_S:g})"




def parse_fail_on(text: str) -> tuple[str, float]:
    """``slower``, ``slower:5%``, ``faster:0.1``, ``different`` -> (what, margin as a fraction)."""
    from ccbench.analysis.compare import parse_fraction

    what, _, margin = str(text).partition(":")
    if what not in FAIL_ON:
        raise UsageError(f"--fail-on {text!r}: give slower, faster or different, optionally :MARGIN (slower:5%)")
    x = parse_fraction(margin, "--fail-on margin") if margin else 0.0
    if not 0 <= x < 10:
        raise UsageError(f"--fail-on {text!r}: the margin must be between 0 and 1000%")
    return what, x


@dataclass(frozen=True)
class Failure:
    """What trips the gate: a pair decided beyond the margin, a pair that could not be compared ("not a time":
    a median that is not a finite positive time) or cases of run A that another run lacks ("missing")."""

    other: str
    case: str
    verdict: str
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None


def pair_label(p) -> str:
    """A compared case as a person names it: collective/algorithm size dtype op, a workload row, or a key."""
    if hasattr(p, "workload"):
        return f"{p.workload} {p.variant} {p.algorithm} {p.label}"
    if hasattr(p, "collective") and hasattr(p, "nbytes"):
        return f"{p.collective}/{p.algorithm} {format_size(p.nbytes)} {p.dtype} {p.op}"
    names = [f.name for f in dataclasses.fields(p)]  # another kind's pair: its key, between "other" and "nranks_a"
    return " ".join(str(getattr(p, n)) for n in names[names.index("other") + 1:names.index("nranks_a")])


def gate_failures(pairs: Iterable, what: str, margin: float, unmatched=None, withheld=None) -> list[Failure]:
    """The pairs whose launch-level verdict is `what` beyond `margin` (module docstring), in order; then every
    pair it could not compare, from `unmatched` ({run: (cases only in A, only in the run)}) each run that lacks
    cases of A, and from `withheld` ({run: [why]}, ``Comparison.withheld``) each run whose verdicts compare
    withheld (measured under load, or on a machine whose calibration changed).  A gate never passes what it
    could not compare."""
    out = []
    for other, why in (withheld or {}).items():
        out.append(Failure(other, "every case (" + "; ".join(why) + ")", "withheld", None, None, None))
    for p in pairs:
        if not (_is_time(p.median_a_s) and _is_time(p.median_b_s)):
            out.append(Failure(p.other, pair_label(p), NOT_A_TIME, None, None, None))
            continue
        if p.verdict not in ("slower", "faster") or p.ratio_low is None or p.ratio_high is None:
            continue
        slower = p.verdict == "slower" and p.ratio_low >= 1.0 + margin
        faster = p.verdict == "faster" and p.ratio_high <= 1.0 / (1.0 + margin)
        if (what == "slower" and slower) or (what == "faster" and faster) or (what == "different" and
                                                                               (slower or faster)):
            out.append(Failure(p.other, pair_label(p), p.verdict, p.ratio, p.ratio_low, p.ratio_high))
    for other, (only_a, _) in (unmatched or {}).items():
        if only_a:
            out.append(Failure(other, f"{only_a} case(s) of run A", "missing", None, None, None))
    return out


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class Reference:
    """A reference time for one case, with relative bounds (ReFrame style)."""

    collective: str
    algorithm: str
    nbytes: int
    value_s: float
    lower: float | None
    upper: float | None
    dtype: str | None = None   # None: any
    op: str | None = None


@dataclass(frozen=True)
class RefResult:
    """One reference against the run: the measured median and interval, the bounds, and whether it holds."""

    ref: Reference
    measured_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    low_s: float | None
    high_s: float | None
    status: str   # "ok", "slower" (above the upper bound), "faster" (below the lower), "missing", "not a time"


def _bound(value, what: str, where: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(str(value).rstrip("%")) / (100.0 if str(value).endswith("%") else 1.0)
    except ValueError:
        raise UsageError(f"{where}: {what} {value!r} is not a number") from None
    if not math.isfinite(x):
        raise UsageError(f"{where}: {what} {value!r} is not finite")
    return x


def _reference(d: dict, where: str) -> Reference:
    missing = [k for k in ("collective", "algorithm", "nbytes", "value") if d.get(k) in (None, "")]
    if missing:
        raise UsageError(f"{where}: missing {', '.join(missing)} (each reference needs collective, algorithm, "
                         "nbytes, value; lower and upper are relative bounds, e.g. -0.1 and 0.1)")
    try:
        nbytes = parse_size(str(d["nbytes"]))
        if isinstance(d["value"], bool):  # JSON's true is no number of seconds
            raise ValueError(f"value {d['value']!r} is not a number")
        value = parse_time(str(d["value"])) if isinstance(d["value"], str) else float(d["value"])
    except (UsageError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}") from None
    lower, upper = _bound(d.get("lower"), "lower", where), _bound(d.get("upper"), "upper", where)
    if not _is_time(value):
        raise UsageError(f"{where}: value {d['value']!r} {NOT_A_TIME_TEXT}")
    if (lower is not None and lower > 0) or (upper is not None and upper < 0) or (lower is not None and lower <= -1):
        raise UsageError(f"{where}: need -1 < lower <= 0 <= upper (relative bounds)")
    return Reference(str(d["collective"]), str(d["algorithm"]), nbytes, value, lower, upper,
                     d.get("dtype") or None, d.get("op") or None)


def read_references(path: str | Path) -> list[Reference]:
    """References from a CSV (header collective,algorithm,nbytes,value[,lower,upper,dtype,op]) or JSON (a list)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"reference file {str(p)!r} cannot be read: {exc.strerror}") from None
    if p.suffix == ".json":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"reference file {str(p)!r} is not valid JSON: {exc}") from None
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise UsageError(f"reference file {str(p)!r}: expected a list of objects")
        refs = [_reference(x, f"{p.name} item {i + 1}") for i, x in enumerate(items)]
    else:
        rows = list(csv.DictReader(text.splitlines()))
        refs = [_reference(x, f"{p.name} line {i + 2}") for i, x in enumerate(rows)]
    if not refs:
        raise UsageError(f"reference file {str(p)!r} holds no references")
    first: dict[tuple, int] = {}
    for i, ref in enumerate(refs):  # two values for one case: which one the run is held to would be a guess
        key = (ref.collective, ref.algorithm, ref.nbytes, ref.dtype, ref.op)
        if key in first:
            at, was = (("item", 1) if p.suffix == ".json" else ("line", 2))
            raise UsageError(f"{p.name} {at} {i + was}: a second reference for {ref.collective}/{ref.algorithm} "
                             f"{format_size(ref.nbytes)}" + (f" {ref.dtype}" if ref.dtype else "")
                             + (f" {ref.op}" if ref.op else "") + f" (the first: {at} {first[key] + was}); give "
                             "each case one")
        first[key] = i
    return refs


def check_references(rows: Sequence, refs: Sequence[Reference]) -> list[RefResult]:
    """Each reference against the run's matching row (the first of a dtype/op, when the reference names none).

    Only "ok" holds: a case that is missing, or whose median is not a finite positive time, fails
    (every comparison with NaN is false, so a NaN would otherwise lie within any bounds).
    """
    out = []
    for ref in refs:
        match = next((r for r in rows if r.collective == ref.collective and r.algorithm == ref.algorithm
                      and r.nbytes == ref.nbytes and (ref.dtype is None or r.dtype == ref.dtype)
                      and (ref.op is None or r.op == ref.op) and r.ok), None)
        lo = None if ref.lower is None else ref.value_s * (1 + ref.lower)
        hi = None if ref.upper is None else ref.value_s * (1 + ref.upper)
        if match is None:
            out.append(RefResult(ref, None, None, None, lo, hi, "missing"))
            continue
        m = match.median_s
        if not _is_time(m):  # NaN, infinite, zero or negative: nothing to hold against the bounds
            out.append(RefResult(ref, None, None, None, lo, hi, NOT_A_TIME))
            continue
        status = "slower" if hi is not None and m > hi else "faster" if lo is not None and m < lo else "ok"
        out.append(RefResult(ref, m, match.ci_low_s, match.ci_high_s, lo, hi, status))
    return out
