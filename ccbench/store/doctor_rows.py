"""The result record of a diagnosis run (``ccbench doctor``): one row per pair, node, group, rank and size."""

from dataclasses import dataclass, field
from typing import ClassVar

from ccbench.store.results import StoredRow

__all__ = ["KIND", "LINK", "TESTS", "DoctorRow"]

KIND = "doctor"  # run.json "kind" of a diagnosis
#: What a row measured: a pair's ping-pong, a node's own collective, a group's, all ranks', one rank's share of it.
TESTS = ("pair", "node", "group", "all", "rank")
#: How a pair's two ends are joined in its subject ("ccb-h0:0 <> ccb-h1:0"); host names hold no spaces.
LINK = " <> "


@dataclass(frozen=True)
class DoctorRow(StoredRow):
    """One measurement of a diagnosis.  `subject` names what was measured by host and node-local rank: a pair
    ``HOST:L <> HOST:L`` (one-way time: half a ping-pong), a node ``HOST``, a group ``HOST+HOST`` (or ``HOST:0,1``
    for part of a node), ``all``, a rank ``HOST:L`` (its own time in the all-ranks collective); `ranks` the world
    ranks, comma separated.  Times are seconds; a pair's sample is the slower end's, a collective's the maximum
    over its ranks (a rank's row: that rank's own call times)."""

    KIND: ClassVar[str] = KIND

    test: str
    subject: str
    nbytes: int
    ranks: str
    nranks: int
    samples: int
    median_s: float
    min_s: float
    mean_s: float
    ci_low_s: float
    ci_high_s: float
    nwrong: int = 0
    stop_reason: str = ""
    flags: tuple[str, ...] = ()
    samples_s: tuple[float, ...] = field(default=(), repr=False)
    launches: tuple[int, ...] = ()
    launch_samples: tuple[int, ...] = ()

    def __post_init__(self):
        if self.test not in TESTS:
            raise ValueError(f"unknown diagnosis test {self.test!r}")
        if self.nbytes < 1 or self.samples != len(self.samples_s):
            raise ValueError("nbytes must be >= 1 and samples the number of samples_s")
