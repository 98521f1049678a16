"""The link levels of a machine, found from its pair matrix alone, and their alpha and beta: pure.

A diagnosis (``ccbench doctor``) times every rank pair at a small and a large size.  `find_levels` sorts the
pairs by their small-message time (each pair's fastest sample: a busy core only adds time) and cuts the sorted
list where one time is at least ``GAP`` (2x) the one before it and that gap is at least the square root of the
largest one (half of it on the log scale): shared memory inside a node and a network between nodes differ by an
order of magnitude, while a pair of one level waiting for a busy core can look 5x slower than its peers, which
must not make a level of its own.  Cutting a one-dimensional sample at its largest gaps is the single-linkage
clustering of the values (Gower & Ross, "Minimum spanning trees and single linkage cluster analysis", Applied
Statistics 18, 1969), here on the log scale with a gap instead of a number of clusters, so that one level gives
one cluster.

Each level gets the two-point alpha-beta fit of its pairs, T(n) = alpha + beta n through the small and the large
size (Hockney, "The communication challenge for MPP", Parallel Computing 20, 1994), the median over its pairs.
The node map (the MPI library's shared-memory split, in each pair's subject ``HOST:L <> HOST:L``) then names each
level by where its pairs lie -- inside nodes, between nodes, or mixed -- and says where the two disagree: a pair
of one node timed like the pairs between nodes has no shared-memory path; pairs of two "nodes" timed like the
pairs inside one are one machine under two names.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ccbench.store.doctor_rows import LINK

__all__ = ["GAP", "Level", "Levels", "find_levels", "pair_levels"]

#: Consecutive pairs whose small-message times differ by this factor or more lie on different levels.
GAP = 2.0


@dataclass(frozen=True)
class Level:
    """One level of links: where its pairs lie by the node map, their count, and the median two-point fit."""

    where: str            # "inside nodes", "between nodes" or "mixed"
    pairs: int
    alpha_s: float        # median over the level's pairs
    beta_s_per_byte: float
    small_s: float        # the median small-message time
    range_s: tuple[float, float]  # the level's fastest and slowest small-message time

    @property
    def bandwidth_gbs(self) -> float:
        return 1e-9 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf


@dataclass(frozen=True)
class Levels:
    """The levels found, fastest first, and the pairs whose level disagrees with the node map."""

    levels: list[Level]
    sizes: tuple[int, int]
    disagree: list[str] = field(default_factory=list)  # "pair: why"

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "disagree": list(self.disagree),
                "levels": [{"where": v.where, "pairs": v.pairs, "alpha_s": v.alpha_s,
                            "beta_s_per_byte": v.beta_s_per_byte, "small_s": v.small_s, "range_s": list(v.range_s)}
                           for v in self.levels]}


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def find_levels(small: dict, large: dict, sizes: tuple[int, int], same_node: dict, gap: float = GAP) -> Levels:
    """The levels of the pairs: `small` / `large` {pair: one-way seconds} at ``sizes`` (small, large bytes),
    `same_node` {pair: whether the node map puts both ends on one node}.  Pairs without both times are left out."""
    n_small, n_large = sizes
    pairs = sorted((p for p in small if p in large and small[p] > 0 and large[p] > 0), key=lambda p: small[p])
    widest = max((small[b] / small[a] for a, b in itertools.pairwise(pairs)), default=1.0)
    cut = max(gap, math.sqrt(widest))
    groups: list[list] = []
    for p in pairs:
        if groups and small[p] < cut * small[groups[-1][-1]]:
            groups[-1].append(p)
        else:
            groups.append([p])
    levels = []
    for g in groups:
        betas = [(large[p] - small[p]) / (n_large - n_small) for p in g]
        alphas = [small[p] - n_small * b for p, b in zip(g, betas, strict=True)]
        inside = sum(bool(same_node.get(p)) for p in g)
        where = "inside nodes" if inside == len(g) else "between nodes" if inside == 0 else "mixed"
        levels.append(Level(where, len(g), _median(alphas), _median(betas), _median([small[p] for p in g]),
                            (small[g[0]], small[g[-1]])))
    return Levels(levels, (n_small, n_large), _disagreements(groups, same_node))


def _disagreements(groups: list[list], same_node: dict) -> list[str]:
    """Pairs the node map places otherwise than their times: a pair of one node slower than the level most pairs
    inside nodes share; a pair between nodes on that level while most pairs between nodes are not."""
    level = {p: i for i, g in enumerate(groups) for p in g}
    inside = [level[p] for p in level if same_node.get(p)]
    between = [level[p] for p in level if not same_node.get(p)]
    if not inside:
        return []
    home = max(set(inside), key=inside.count)
    out = [f"{p}: on one node, but as slow as pairs between nodes (no shared-memory path?)"
           for p in level if same_node.get(p) and level[p] > home]
    if between and between.count(home) * 2 < len(between):
        out += [f"{p}: on two nodes, but as fast as pairs inside one (one machine under two names?)"
                for p in level if not same_node.get(p) and level[p] == home]
    return out


def _host(end: str) -> str:
    return end.rpartition(":")[0]


def pair_levels(rows: Sequence) -> Levels | None:
    """`find_levels` of a diagnosis run's pair rows (``ccbench.store.doctor_rows.DoctorRow``, test "pair"): the
    smallest and the largest size measured, each pair's fastest one-way time (interference only adds time: the
    minimum is what the link can do; Chen & Revels, "Robust benchmarking in noisy environments", 2016); None with
    fewer than two sizes or no pair."""
    pair_rows = [r for r in rows if r.test == "pair" and r.ok and math.isfinite(r.min_s)]
    sizes = sorted({r.nbytes for r in pair_rows})
    if len(sizes) < 2:
        return None
    small = {r.subject: r.min_s for r in pair_rows if r.nbytes == sizes[0]}
    large = {r.subject: r.min_s for r in pair_rows if r.nbytes == sizes[-1]}
    same = {s: _host(s.split(LINK)[0]) == _host(s.split(LINK)[1]) for s in small}
    return find_levels(small, large, (sizes[0], sizes[-1]), same) if small else None
