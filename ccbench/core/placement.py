"""Placement: which rank of the launch becomes which rank of the measured communicator, and node hierarchies (pure).

``--placement`` re-ranks the communicator before a sweep (``MPI_Comm_split`` with one color
and the new rank as the key: MPI-4.0 sec. 7.4.2 orders the new ranks by key), so that the
same launch can put a ring's neighbours inside a node or across the slow links.  An order
lists the launch's ranks in their new order: ``order[k]`` is the launch rank that becomes
rank k.  The nodes are the launch's node map (``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``),
numbered in the order of their first rank:

- ``block``: each node's ranks consecutive, nodes in order (what ``-ppn`` / ``--map-by node:block`` give);
- ``cyclic``: dealt one node at a time, the first rank of every node, then the second ...
  (rank k on node k mod N when the nodes are equal; MPICH hydra's round robin, Open MPI's ``--map-by node``);
- ``random`` or ``random:SEED``: a uniformly random permutation from numpy's PCG64 with that seed
  (drawn and recorded when not given);
- a permutation of 0..P-1: a file with one rank per line or comma separated, or the list itself (``0,2,1,3``).
"""

import re
from pathlib import Path

from ccbench.core.errors import UsageError

__all__ = ["PLACEMENTS", "check_order", "hierarchy_missing", "node_aware", "parse_placement", "placement_order",
           "placement_text"]

PLACEMENTS = ("block", "cyclic", "random")
_LIST = re.compile(r"\s*\d+(\s*[,\n]\s*\d+)*\s*,?\s*")


def _as_order(text: str, where: str) -> tuple[int, ...]:
    if not _LIST.fullmatch(text):
        raise UsageError(f"placement {where}: expected ranks, one per line or comma separated (e.g. 0,2,1,3)")
    return check_order(tuple(int(x) for x in re.split(r"[,\s]+", text.strip().rstrip(",")) if x), where)


def check_order(order, where: str = "", nranks: int | None = None) -> tuple[int, ...]:
    """`order` as a tuple when it is a permutation of 0..len-1 (and has `nranks` entries when given), else one line
    saying what is wrong."""
    order = tuple(order)
    name = f"placement {where}" if where else "placement"
    if nranks is not None and len(order) != nranks:
        raise UsageError(f"{name} lists {len(order)} rank{'s' if len(order) != 1 else ''}, the run has {nranks}: "
                         f"give a permutation of 0..{nranks - 1}")
    n = len(order)
    twice = sorted({r for r in order if order.count(r) > 1})
    outside = sorted(r for r in set(order) if not 0 <= r < n)
    missing = sorted(set(range(n)) - set(order))
    if not n or twice or missing:
        why = ([f"{twice[0]} appears twice"] if twice else []) + ([f"{outside[0]} is not below {n}"] if outside else [])
        why += [f"{missing[0]} is missing"] if missing else []
        raise UsageError(f"{name} is not a permutation of 0..{max(n - 1, 0)}: " + (", ".join(why) or "no ranks"))
    return order


def parse_placement(value) -> str | tuple[int, ...] | None:
    """What a ``placement`` value asks for: None (the launch's order), ``block``, ``cyclic``, ``random``,
    ``random:SEED``, or a permutation (a TOML list, a comma list, or the path of a file of ranks)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
            raise UsageError(f"placement {list(value)!r}: expected ranks (integers)")
        return check_order(value)
    text = str(value).strip()
    if text in PLACEMENTS:
        return text
    m = re.fullmatch(r"random:(\d+)", text)
    if m:
        if int(m.group(1)) >= 2**32:
            raise UsageError(f"placement {text}: the seed must be below 2**32")
        return text
    if re.fullmatch(r"[\d,\s]+", text) and "," in text:
        return _as_order(text, text)
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"placement {text!r}: neither block, cyclic, random[:SEED], a comma list of ranks nor a file")
    try:
        return _as_order(path.read_text(), f"file {text!r}")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"placement file {text!r} cannot be read: {exc}") from None


def placement_order(placement, node_of_rank: list[int], seed: int | None = None) -> list[int]:
    """The launch ranks in their new order for `placement` (`parse_placement`'s value) on a launch whose rank r is on
    node ``node_of_rank[r]``; ``random`` needs `seed` (``random:SEED`` carries its own)."""
    n = len(node_of_rank)
    if isinstance(placement, tuple):
        return list(check_order(placement, nranks=n))
    nodes: dict[int, list[int]] = {}
    for r, node in enumerate(node_of_rank):
        nodes.setdefault(node, []).append(r)
    groups = [nodes[k] for k in sorted(nodes, key=lambda k: nodes[k][0])]
    if placement == "block":
        return [r for g in groups for r in g]
    if placement == "cyclic":
        return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]
    if placement == "random" or str(placement).startswith("random:"):
        import numpy as np

        s = seed if placement == "random" else int(str(placement).split(":", 1)[1])
        if s is None:
            raise ValueError("a random placement needs a seed")
        return [int(r) for r in np.random.default_rng(s).permutation(n)]
    raise UsageError(f"unknown placement {placement!r}; choose block, cyclic, random[:SEED] or a permutation")


def placement_text(record: dict | None) -> str:
    """What a run's placement record (``topology.placement``) did, in words; "" for the launch's own order."""
    kind = (record or {}).get("placement")
    if not kind or kind == "launch":
        return ""
    if kind == "given":
        order = [str(r) for r in record.get("original_rank") or []]
        return f"--placement {','.join(order if len(order) <= 16 else order[:12] + ['...'])}"
    return f"--placement {kind}" + (f" (seed {record['seed']})" if record.get("seed") is not None else "")


def node_aware(alg) -> bool:
    """Whether an algorithm is hierarchical: its cost takes ``ranks_per_node`` (``ccbench.analysis.predict`` prices
    it on nodes of that many ranks; it splits off its node's ranks with ``Split_type(COMM_TYPE_SHARED)``)."""
    import inspect

    try:
        return getattr(alg, "cost", None) is not None and "ranks_per_node" in inspect.signature(alg.cost).parameters
    except (TypeError, ValueError):
        return False


def hierarchy_missing(node_of_rank: list[int] | None) -> str | None:
    """Why ranks laid on nodes as `node_of_rank` say have no two levels for a hierarchical algorithm, or None when
    they have (at least two nodes, one of them with two ranks or more)."""
    if not node_of_rank:
        return "no node map (the run did not record each rank's node)"
    n, nodes = len(node_of_rank), len(set(node_of_rank))
    if nodes == 1:
        return f"no node hierarchy: all {n} ranks on one node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED))"
    if nodes == n:
        return f"no node hierarchy: one rank on each of the {n} nodes"
    return None
