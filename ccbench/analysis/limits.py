"""The node's physical limit: rates, per-node aggregates and per-rank shares of its memory copy bandwidth.

Pure arithmetic over the ``memory_bandwidth`` record of run.json (``ccbench.measure.membw``:
McCalpin's STREAM copy with numpy).  Rates are in GB/s (1e9 bytes per second) of *counted*
bytes, read + written, as STREAM counts its Copy kernel: a copy of n bytes counts 2n.

What a collective within a node can at best reach (``MemoryLimit.copy_gbs``): each rank
moves a message by copying it once through shared memory -- read once, written once, so
n message bytes cost 2n counted bytes -- and the ranks of a node copy at the same time, so
they share the node's aggregate.  The per-rank limit, in message bytes per second, is
therefore (the node's all-ranks aggregate / its ranks) / 2, and its inverse is the
intra-node beta of the two-level model (``intra_node_beta_s_per_byte``).  Bus bandwidth
(nccl-tests' busbw, doc/PERFORMANCE.md) is per-rank message bytes per second by construction,
so busbw / ``copy_gbs`` is the share of that limit; above 1 means the data stayed in cache.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MemoryLimit", "NodeCopy", "best_rate_gbs", "best_shares", "intra_node_beta_s_per_byte",
           "memory_limit", "node_aggregate_gbs", "share_of_limit"]


def best_rate_gbs(counted_bytes: float, seconds: Sequence[float]) -> float:
    """The best (STREAM: shortest-time) rate of repeated copies, counted bytes / min(seconds), in GB/s."""
    times = [s for s in seconds if s > 0]
    if counted_bytes <= 0 or not times:
        raise ValueError("a rate needs a positive byte count and at least one positive time")
    return counted_bytes / min(times) / 1e9


def node_aggregate_gbs(counted_bytes_per_rank: float, ranks: int, seconds: Sequence[float]) -> float:
    """A node's aggregate copy bandwidth: all its ranks' counted bytes / the repetition's time from the first rank's
    start to the last rank's end, best repetition (STREAM's wall clock around all its threads), in GB/s."""
    if ranks < 1:
        raise ValueError("a node has at least one rank")
    return best_rate_gbs(ranks * counted_bytes_per_rank, seconds)


def intra_node_beta_s_per_byte(node_copy_gbs: float, ranks_on_node: int) -> float:
    """Intra-node beta per rank, seconds per message byte, from the node's all-ranks copy bandwidth (counted GB/s).

    Model (module docstring): a message copied through shared memory is read and written
    once (2 counted bytes per message byte) and the `ranks_on_node` ranks copy at the same
    time, sharing the node's aggregate: beta = 2 * ranks_on_node / node_copy_bandwidth.
    """
    if node_copy_gbs <= 0 or ranks_on_node < 1:
        raise ValueError("need a positive bandwidth and at least one rank on the node")
    return 2.0 * ranks_on_node / (node_copy_gbs * 1e9)


def node_copy_gbs_at(one_core_gbs: float, aggregate_gbs: float, ranks: int) -> float:
    """A node's copy bandwidth (counted GB/s) when `ranks` ranks copy at once: min(ranks x one core, the aggregate).

    Memory bandwidth grows with the cores copying until the memory system saturates (McCalpin's
    STREAM scaling; Hager & Wellein, "Introduction to High Performance Computing for Scientists
    and Engineers", 2010, sec. 3.1): one core's rate times the ranks, capped at the aggregate
    measured with all of the run's ranks copying -- taken as the saturated rate, which
    understates it where the measuring run had fewer ranks than the node has cores.
    """
    if one_core_gbs <= 0 or aggregate_gbs <= 0 or ranks < 1:
        raise ValueError("need positive bandwidths and at least one rank")
    return min(ranks * one_core_gbs, aggregate_gbs)


def share_of_limit(busbw_gbs: float, limit_gbs: float) -> float:
    """Bus bandwidth as a fraction of the per-rank limit (1.0 = at the limit; above 1: the data stayed in cache)."""
    if limit_gbs <= 0:
        raise ValueError("the limit must be positive")
    return busbw_gbs / limit_gbs


@dataclass(frozen=True)
class NodeCopy:
    """One node's all-ranks copy: its ranks, aggregate and per-rank share (counted GB/s)."""

    host: str
    ranks: int
    aggregate_gbs: float
    per_rank_gbs: float


@dataclass(frozen=True)
class MemoryLimit:
    """The figures of a ``memory_bandwidth`` record (module docstring for the units and the model)."""

    one_core_gbs: float
    one_core_host: str
    nodes: tuple[NodeCopy, ...]
    method: str
    repetitions: int
    one_core_nbytes: int
    per_rank_nbytes: tuple[int, ...]

    @property
    def limiting(self) -> NodeCopy:
        """The node whose ranks get the smallest share: the one that bounds a collective across the nodes."""
        return min(self.nodes, key=lambda n: n.per_rank_gbs)

    @property
    def copy_gbs(self) -> float:
        """The per-rank limit in message bytes per second (GB/s): the smallest per-rank share / 2 (read + written)."""
        return self.limiting.per_rank_gbs / 2.0

    def intra_node_beta_at(self, ranks_per_node: int) -> float:
        """Intra-node beta per rank, `ranks_per_node` ranks copying at once on the limiting node.

        The node's bandwidth at that many ranks is ``node_copy_gbs_at``; beta is ``intra_node_beta_s_per_byte``.
        """
        node = node_copy_gbs_at(self.one_core_gbs, self.limiting.aggregate_gbs, ranks_per_node)
        return intra_node_beta_s_per_byte(node, ranks_per_node)

    @property
    def intra_node_beta_s_per_byte(self) -> float:
        """The limiting node's intra-node beta per rank (``intra_node_beta_s_per_byte``)."""
        n = self.limiting
        return intra_node_beta_s_per_byte(n.aggregate_gbs, n.ranks)


def memory_limit(record: Mapping | None) -> MemoryLimit | None:
    """The figures of run.json's ``memory_bandwidth`` record; None for runs without one (or an incomplete one)."""
    if not record or not record.get("one_core") or not record.get("all_ranks"):
        return None
    one = record["one_core"]
    nodes = []
    for n in record["all_ranks"]:
        agg = node_aggregate_gbs(n["counted_bytes"], n["ranks"], n["seconds"])
        nodes.append(NodeCopy(n["host"], n["ranks"], agg, agg / n["ranks"]))
    return MemoryLimit(best_rate_gbs(one["counted_bytes"], one["seconds"]), one["host"], tuple(nodes),
                       record.get("method", ""), int(record.get("repetitions") or len(one["seconds"])),
                       int(one["nbytes"]), tuple(int(n["nbytes"]) for n in record["all_ranks"]))


def best_shares(busbw_gbs: Mapping[str, float], limit_gbs: float) -> dict[str, tuple[str, float]]:
    """Of {algorithm: busbw at one size}, the best hand-written and the best native (``native``, ``native:<alg>``)
    as {"hand-written" | "native": (algorithm, share of `limit_gbs`)}; a side with no algorithm is left out."""
    out = {}
    for side, pick in (("hand-written", lambda a: not a.startswith("native")),
                       ("native", lambda a: a.startswith("native"))):
        cands = {a: bw for a, bw in busbw_gbs.items() if pick(a)}
        if cands:
            best = max(cands, key=lambda a: cands[a])
            out[side] = (best, share_of_limit(cands[best], limit_gbs))
    return out
