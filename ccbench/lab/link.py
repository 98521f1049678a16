"""An emulated link: its release-time schedule, and delay and rate as users write them (pure).

The schedule is the store-and-forward link of the alpha-beta (Hockney 1994) model, as
netem's rate option applies it (tc-netem(8): a packet waits for the previous one to
leave, then takes ``len * 8 / rate`` to serialise, then ``delay`` to propagate):

    busy_until = max(arrival, busy_until) + len * 8 / rate
    release    = busy_until + delay

Rates are written as tc writes them (tc(8), "RATES"): bits per second with decimal
prefixes ``kbit``, ``mbit``, ``gbit``, ``tbit`` (1e3, 1e6, 1e9, 1e12), binary ones ``kibit``
... ``tibit``, or ``bps``-style bytes per second (``kbps``, ``mbps``, ``gbps`` = 8e3, 8e6, 8e9
bit/s); a bare number is bits per second.  Delays are times: ``500us``, ``2ms``, ``0``.

Which link a packet crosses (`link_params`, `host_queues`): a packet to host J from host I
takes the link of the pair (I, J) where ``lab set --pair I,J`` gave that pair one (both
directions, a link of its own: its own serialiser, shared by nothing else), otherwise J's
ingress link (J's own ``lab set --host J`` setting, else the lab's), which every other
packet to J shares.
"""

import re

from ccbench.core.errors import UsageError

__all__ = ["Link", "format_delay", "format_rate", "host_queues", "link_params", "pair_key", "pair_links",
           "parse_delay", "parse_rate"]

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_RATE_UNITS = {"": 1.0, "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
               "kibit": 2.0**10, "mibit": 2.0**20, "gibit": 2.0**30, "tibit": 2.0**40,
               "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12}
_DELAY_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
#: A delay above this is refused: MPI start-up and TCP time-outs would misbehave.
MAX_DELAY_S = 1.0


def parse_rate(text) -> float:
    """Bits per second from ``1gbit``, ``200mbit``, ``1e9``, ``125mbps`` (tc's units)."""
    m = re.fullmatch(_NUM + r"\s*([a-z]*)", str(text).strip().lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise UsageError(f"bad rate {text!r}: expected e.g. 1gbit, 200mbit, 10mbit or bits per second "
                         f"(units {', '.join(u for u in _RATE_UNITS if u)})")
    rate = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if not rate > 0:
        raise UsageError(f"bad rate {text!r}: a rate must be positive")
    return rate


def parse_delay(text) -> float:
    """Seconds from ``500us``, ``2ms``, ``0``; between 0 and one second."""
    m = re.fullmatch(_NUM + r"\s*([a-zµ]*)", str(text).strip().lower())
    if not m or m.group(2) not in _DELAY_UNITS:
        raise UsageError(f"bad delay {text!r}: expected e.g. 500us, 2ms or 0 "
                         f"(units {', '.join(u for u in _DELAY_UNITS if u)})")
    delay = float(m.group(1)) * _DELAY_UNITS[m.group(2)]
    if delay > MAX_DELAY_S:
        raise UsageError(f"bad delay {text!r}: at most {MAX_DELAY_S:g} s")
    return delay


def format_rate(rate_bps: float) -> str:
    """``1gbit``, ``200mbit``, ``1.5kbit`` (tc's units, decimal)."""
    for unit, mult in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate_bps >= mult:
            return f"{rate_bps / mult:.4g}{unit}"
    return f"{rate_bps:.4g}bit"


def format_delay(delay_s: float) -> str:
    """``500us``, ``2ms``, ``0``."""
    if delay_s == 0:
        return "0"
    if delay_s < 1e-3:
        return f"{delay_s * 1e6:.6g}us"
    if delay_s < 1:
        return f"{delay_s * 1e3:.6g}ms"
    return f"{delay_s:.6g}s"


def pair_key(a: str, b: str) -> str:
    """The key of the link between hosts `a` and `b` in a lab's ``pairs`` (``lab set --pair``): ``"a,b"``."""
    return f"{a},{b}"


def _pair(state: dict, a: str, b: str) -> dict | None:
    pairs = state.get("pairs") or {}
    return pairs.get(pair_key(a, b)) or pairs.get(pair_key(b, a))


def link_params(state: dict, host: str, src: str | None = None) -> tuple[float, float]:
    """(delay_s, rate_bps) of the link a packet to `host` crosses in a lab's state: the pair (`src`, `host`)'s own
    link where it has one, else `host`'s ingress (its own setting, else the lab's)."""
    own = (_pair(state, src, host) if src is not None else None) or (state.get("links") or {}).get(host) or {}
    return float(own.get("delay_s", state["delay_s"])), float(own.get("rate_bps", state["rate_bps"]))


def pair_links(state: dict, hosts: list[str]) -> dict:
    """The pairs among `hosts` with links of their own: ``{"a,b": {"delay_s", "rate_bps"}}`` (a before b in
    `hosts`' order)."""
    return {pair_key(a, b): dict(zip(("delay_s", "rate_bps"), link_params(state, b, a), strict=True))
            for i, a in enumerate(hosts) for b in hosts[i + 1:] if _pair(state, a, b)}


def host_queues(state: dict, host: str, queue: int = 0) -> list[tuple[int, str | None]]:
    """The NFQUEUE queues of `host`'s ingress, in the order its rules match: ``(queue + 1 + I, host I)`` for each
    host I whose pair with `host` has a link of its own, then ``(queue, None)``, every other packet."""
    hosts = list(state["namespaces"])
    return [(queue + 1 + i, h) for i, h in enumerate(hosts) if h != host and _pair(state, h, host)] + [(queue, None)]


class Link:
    """One direction of a link: a FIFO that serialises at `rate_bps`, then adds `delay_s`.

    `release` gives each packet's release time in the caller's clock (seconds); packets
    must be given in arrival order.  Release times never decrease, so a FIFO of pending
    packets is released in order (one batch verdict covers every due packet).
    """

    __slots__ = ("busy_until", "delay_s", "rate_bps", "_s_per_byte")

    def __init__(self, delay_s: float, rate_bps: float) -> None:
        if delay_s < 0 or not rate_bps > 0:
            raise ValueError(f"bad link: delay {delay_s} s, rate {rate_bps} bit/s")
        self.delay_s = float(delay_s)
        self.rate_bps = float(rate_bps)
        self._s_per_byte = 8.0 / self.rate_bps
        self.busy_until = float("-inf")

    def release(self, arrival_s: float, length_bytes: int) -> float:
        """Release time of a packet of `length_bytes` arriving at `arrival_s`."""
        start = arrival_s if arrival_s > self.busy_until else self.busy_until
        self.busy_until = start + length_bytes * self._s_per_byte
        return self.busy_until + self.delay_s
