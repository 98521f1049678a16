"""Units: parse and format the quantities ccbench reads and prints (sizes, times, rates, rank counts).

One parser and one formatter per quantity, used by every stage.  Pure; imports nothing of ccbench
but its errors.
"""

import math
import re

from ccbench.core.errors import UsageError

__all__ = ["MAX_SIZE", "MAX_TIME_S", "MIN_TIME_S", "fmt_time", "format_size", "human_time", "is_time",
           "parse_inverse_rate", "parse_ranks", "parse_size", "parse_sizes", "parse_time"]

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
          "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
MAX_SIZE = 1 << 40  # 1 TiB: anything larger is a typo
#: The range a time of one call may take, in seconds: below a picosecond or above a day it is no call's time
#: (NaN, infinite, zero and negative values are outside it too).
MIN_TIME_S, MAX_TIME_S = 1e-12, 86400.0


def is_time(t) -> bool:
    """Whether `t` is a finite number of seconds within [MIN_TIME_S, MAX_TIME_S]: what any stored or imported
    time must be (a gate, an import)."""
    return (isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
            and MIN_TIME_S <= t <= MAX_TIME_S)


def parse_size(text) -> int:
    """Bytes in a human size such as ``8``, ``4K``, ``1M``, ``1.5K`` (must be whole bytes)."""
    if isinstance(text, bool):
        raise UsageError(f"bad size {text!r}: expected a number of bytes such as 8, 4K or 1M")
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(2).upper() if m else None
        if m is None or unit not in _UNITS:
            raise UsageError(f"bad size {text!r}: expected a number of bytes such as 8, 4K or 1M")
        exact = float(m.group(1)) * _UNITS[unit]
        if exact < 0:
            raise UsageError(f"bad size {text!r}: sizes cannot be negative")
        if exact != int(exact):
            raise UsageError(f"bad size {text!r}: not a whole number of bytes")
        value = int(exact)
    if value < 0:
        raise UsageError(f"bad size {text!r}: sizes cannot be negative")
    if value > MAX_SIZE:
        raise UsageError(f"bad size {text!r}: larger than {format_size(MAX_SIZE)}")
    return value


def parse_sizes(spec) -> list[int]:
    """Sizes from a list, a comma list ``8,64,4K`` or a range ``MIN:MAX[:FACTOR]``."""
    if isinstance(spec, (list, tuple)):
        sizes = [parse_size(s) for s in spec]
    elif isinstance(spec, str) and ":" in spec:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"bad size range {spec!r}: expected MIN:MAX or MIN:MAX:FACTOR")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        try:
            factor = int(parts[2]) if len(parts) == 3 else 2
        except ValueError:
            raise UsageError(f"bad size range {spec!r}: the factor must be an integer >= 2") from None
        if factor < 2:
            raise UsageError(f"bad size range {spec!r}: the factor must be an integer >= 2")
        if hi < lo:
            raise UsageError(f"bad size range {spec!r}: the maximum is below the minimum")
        sizes, s = [], lo
        if s == 0:
            sizes.append(0)
            s = 1
        while s <= hi:
            sizes.append(s)
            s *= factor
    elif isinstance(spec, (str, int)):
        items = str(spec).split(",")
        if len(items) > 1 and not all(s.strip() for s in items):
            raise UsageError(f"bad size list {spec!r}: an empty item between commas")
        sizes = [parse_size(s) for s in items if s.strip()]
    else:
        raise UsageError(f"bad sizes {spec!r}: expected a list, 8,64,4K or MIN:MAX")
    if not sizes:
        raise UsageError("no sizes given")
    return sorted(set(sizes))


def format_size(nbytes: int) -> str:
    """A compact human size: 8 B, 4 KiB, 1.5 MiB."""
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= mult:
            v = nbytes / mult
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{nbytes} B"



def fmt_time(seconds: float, digits: int = 3, *, micro: str = "us") -> str:
    """Seconds in ns, µs (written `micro`: "us" in the terminal, "µs" on pages), ms or s, with `digits`
    significant digits; "-" for NaN/None.  The one time formatter: rounded first, so 999.9 us shows
    as 1 ms, never as 1e+03 us."""
    if seconds is None or seconds != seconds:
        return "-"
    a = abs(float(f"{seconds:.{digits}g}"))
    for unit, mult, below in (("ns", 1e-9, 1e-6), (micro, 1e-6, 1e-3), ("ms", 1e-3, 1.0)):
        if a < below:
            return f"{seconds / mult:.{digits}g} {unit}"
    return f"{seconds:.{digits}g} s"


def human_time(seconds: float, digits: int = 3) -> str:
    """`fmt_time` for report pages and figures (µs written as such)."""
    return fmt_time(seconds, digits, micro="µs")


_NUM = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_RATE_UNITS = {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
               "KiB/s": 2.0**10, "MiB/s": 2.0**20, "GiB/s": 2.0**30, "TiB/s": 2.0**40}
def parse_time(text: str, what: str = "time") -> float:
    """Seconds from ``2us``, ``1.5ms``, ``3e-6`` (bare numbers are seconds); >= 0."""
    m = re.fullmatch(_NUM + r"\s*([a-zµ]*)", str(text).strip())
    if not m or m.group(2) not in _TIME_UNITS:
        raise UsageError(f"bad {what} {text!r}: expected a time such as 2us, 1.5ms or 3e-6 "
                         f"(units {', '.join(u for u in _TIME_UNITS if u)})")
    value = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if value < 0:
        raise UsageError(f"bad {what} {text!r}: a time must be >= 0")
    return value


def parse_inverse_rate(text: str, what: str = "beta") -> float:
    """Seconds per byte from ``1e-10`` or ``1e-10s/B`` (s/byte), or a rate ``10GB/s``.

    Rates are bytes per second with decimal (KB, MB, GB, TB = 1e3 ...) or binary (KiB,
    MiB, GiB, TiB) prefixes, turned into their inverse; a zero rate is refused.
    """
    s = str(text).strip()
    m = re.fullmatch(_NUM + r"\s*(s/B|s/byte)?", s)
    if m:
        if float(m.group(1)) < 0:
            raise UsageError(f"bad {what} {text!r}: seconds per byte must be >= 0")
        return float(m.group(1))
    m = re.fullmatch(_NUM + r"\s*([KMGT]?i?B/s)", s)
    if not m or m.group(2) not in _RATE_UNITS:
        raise UsageError(f"bad {what} {text!r}: give seconds per byte (1e-10) or a rate "
                         "in bytes per second (10GB/s, 800MiB/s)")
    rate = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if rate <= 0:
        raise UsageError(f"bad {what} {text!r}: a rate must be positive")
    return 1.0 / rate


def parse_ranks(text: str) -> list[int]:
    """Rank counts from ``1024,4096`` or a range ``64:65536:4`` (as sizes are written)."""
    try:
        ranks = parse_sizes(text)
    except UsageError:
        raise UsageError(f"bad rank counts {text!r}: expected counts such as 1024,4096 or a range "
                         "MIN:MAX[:FACTOR] such as 64:65536:4") from None
    if min(ranks) < 1:
        raise UsageError(f"bad rank counts {text!r}: every count must be at least 1")
    return ranks


