"""Which ranks exchange with which, round by round: every pair once, in about P - 1 rounds of disjoint pairs.

Measuring every rank pair one after the other takes P(P-1)/2 tests; measuring disjoint pairs
at the same time takes P - 1 rounds, the rounds of a round-robin tournament -- a
1-factorization of the complete graph K_P (P even; P odd: K_{P+1} with a bye, P rounds).
`round_robin` builds it with the circle method (rank P-1 fixed, the others turning one place
a round; Dinitz, Froncek, Lamken & Wallis, "Scheduling a tournament", Handbook of
Combinatorial Designs, 2nd ed., 2007, VI.51; the "Berger tables" of chess tournaments).

Concurrent pairs must not share what they measure: two pairs of the same two nodes would share
the nodes' network links, so `pair_rounds` is node-aware.  Between nodes it plays a
tournament of the nodes, one rank per node (its node-local rank l, for each l in turn):
every round pairs distinct nodes; inside each node it plays a tournament of the node's ranks,
all nodes at once (pairs of different nodes share nothing).  N nodes of k ranks take
k(N-1) + k-1 = P-1 rounds when N and k are even.  `rank_groups` splits the ranks into equal
groups of consecutive nodes.  Pure: numpy only (the topology and diagnosis measurements use it).
"""

from dataclasses import dataclass

import numpy as np

from ccbench.core.errors import UsageError

__all__ = ["Round", "node_ranks", "pair_rounds", "rank_groups", "round_robin"]


def round_robin(n: int) -> list[np.ndarray]:
    """The rounds of a round-robin tournament of players 0..n-1 (the circle method), each an array of pairs
    (k x 2, the lower player first): every pair in exactly one round, no player twice in a round; n - 1 rounds
    for even n, n for odd n (each player sits out one)."""
    if n < 2:
        return []
    m = n + n % 2  # odd n: a phantom player m-1; its partner sits the round out
    k = np.arange(1, m // 2)
    out = []
    for r in range(m - 1):  # round r: r against the fixed player, (r+k) against (r-k) around the circle
        a = np.concatenate(([r], (r + k) % (m - 1)))
        b = np.concatenate(([m - 1], (r - k) % (m - 1)))
        keep = (a < n) & (b < n)
        out.append(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1))
    return out


@dataclass(frozen=True)
class Round:
    """One round of concurrent pair exchanges: `between` nodes (one rank per node) or inside nodes; `pairs` an array
    of world ranks (k x 2, the lower first)."""

    between: bool
    pairs: np.ndarray


def node_ranks(node_of_rank) -> list[list[int]]:
    """The ranks of each node (nodes numbered 0..N-1 as in `node_of_rank`), in rank order."""
    nodes = np.asarray(node_of_rank, dtype=int)
    if nodes.size and (nodes.min() < 0 or set(np.unique(nodes)) != set(range(int(nodes.max()) + 1))):
        raise ValueError("node numbers must be 0..N-1, each with a rank")
    return [np.flatnonzero(nodes == i).tolist() for i in range(int(nodes.max()) + 1 if nodes.size else 0)]


def pair_rounds(node_of_rank) -> list[Round]:
    """The node-aware schedule (module docstring): first the rounds between nodes (for each node-local rank l, a
    tournament of the nodes that have one), then the rounds inside nodes (each node's tournament, all at once)."""
    ranks = node_ranks(node_of_rank)
    out = []
    for local in range(max((len(r) for r in ranks), default=0)):
        having = np.array([r[local] for r in ranks if len(r) > local])
        out += [Round(True, np.sort(having[pairs], axis=1)) for pairs in round_robin(len(having))]
    inside = [[np.asarray(r)[pairs] for pairs in round_robin(len(r))] for r in ranks]
    for i in range(max((len(t) for t in inside), default=0)):
        out.append(Round(False, np.concatenate([t[i] for t in inside if i < len(t)])))
    return out


def rank_groups(node_of_rank, groups: int) -> list[list[int]]:
    """The ranks split into `groups` equal groups, ranks ordered by node then rank (so whole nodes stay together
    when the group size is a multiple of their rank count); refused when `groups` does not divide the ranks."""
    order = [r for node in node_ranks(node_of_rank) for r in node]
    n = len(order)
    if not 1 <= groups <= n or n % groups:
        raise UsageError(f"--groups {groups}: the {n} ranks cannot be split into {groups} equal groups (give a "
                         f"divisor of {n})")
    size = n // groups
    return [sorted(order[i:i + size]) for i in range(0, n, size)]
