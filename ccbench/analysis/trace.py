"""`ccbench trace`: the step-by-step schedule and traffic of a hand-written algorithm.

The algorithm runs once on the simulated communicator (`ccbench.algorithms.simcomm`), so no MPI
launcher is needed.  `trace` returns the delivered messages grouped by logical step, the
per-rank counters of the counted point-to-point layer (`ccbench.algorithms.p2p`), the
exact-result check of the collective's buffers, and the algorithm's closed-form cost
beside the counted maximum; ``ccbench.present.trace`` prints them.
"""

import math
from dataclasses import dataclass

from ccbench.algorithms import REGISTRY, Cost
from ccbench.algorithms.p2p import CountedComm, Counts, critical_path
from ccbench.algorithms.registry import cost_at
from ccbench.algorithms.simcomm import Message, simulate
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import check_ranks, parse_counts, symmetric
from ccbench.core.dtypes import dtype_of, ufunc_of
from ccbench.core.errors import UsageError

__all__ = ["MAX_RANKS", "RankCounts", "Trace", "trace"]

#: One thread per simulated rank; beyond this a trace is unreadable anyway.
MAX_RANKS = 1024


@dataclass(frozen=True)
class RankCounts:
    """The counters of one rank after the call (see `ccbench.algorithms.p2p.Counts`)."""

    msgs_sent: int
    bytes_sent: int
    msgs_recv: int
    bytes_recv: int
    steps: int
    step_bytes: int
    reduced_bytes: int


@dataclass(frozen=True)
class Trace:
    """One simulated call: its messages, per-rank counts, result check and cost."""

    collective: str
    algorithm: str
    nranks: int
    count: int
    dtype: str
    op: str
    root: int
    in_place: bool
    ranks_per_node: int | None          # simulated nodes for Split_type; None: one node
    distribution: str                   # the count distribution of a v-collective's blocks ("uniform" otherwise)
    nbytes: int                         # the collective's size (nccl-tests definition)
    messages: tuple[Message, ...]       # sorted by (step, source, dest)
    counts: tuple[RankCounts, ...]      # one per rank
    counted: Cost                       # max over ranks of (steps, step_bytes, reduced_bytes)
    critical_path: tuple[int, int]      # (steps, bytes) of the schedule's longest dependent chain
    cost: Cost | None                   # closed form at (nranks, nbytes), if registered
    formula: str
    summary: str
    source: str
    nwrong_per_rank: tuple[int, ...]

    @property
    def nwrong(self) -> int:
        """Output elements differing from the exact result, over all ranks."""
        return sum(self.nwrong_per_rank)

    @property
    def nsteps(self) -> int:
        """The number of logical steps in the schedule (the last message's step)."""
        return max((m.step for m in self.messages), default=0)

    @property
    def agrees(self) -> bool | None:
        """Whether the closed form equals the counted maximum (None without a closed form)."""
        if self.cost is None:
            return None
        return all(math.isclose(c, k, rel_tol=1e-9, abs_tol=1e-9)
                   for c, k in zip(self.cost[:3], self.counted[:3], strict=True))

    def steps(self) -> dict[int, list[Message]]:
        """The messages grouped by logical step, in step order."""
        groups: dict[int, list[Message]] = {}
        for m in self.messages:
            groups.setdefault(m.step, []).append(m)
        return groups


def _handwritten(collective: str) -> list[str]:
    return [name for name, alg in REGISTRY.get(collective, {}).items() if not alg.native]


def _all_choices() -> str:
    parts = [f"{c} ({', '.join(_handwritten(c))})" for c in REGISTRY if _handwritten(c)]
    if not parts:
        return "no hand-written algorithms are registered"
    return "hand-written algorithms: " + "; ".join(parts)


def _resolve(collective: str, algorithm: str):
    """The registered hand-written Algorithm, or a UsageError naming the valid choices."""
    if collective not in REGISTRY:
        raise UsageError(f"unknown collective {collective!r}; {_all_choices()}")
    names = _handwritten(collective)
    alg = REGISTRY[collective].get(algorithm)
    if alg is not None and not alg.native:
        return alg
    if not names:
        raise UsageError(f"{collective} has no hand-written algorithm to trace; {_all_choices()}")
    if alg is not None:
        why = f"{collective}/{algorithm} is the MPI library's own and cannot be simulated"
    else:
        why = f"unknown algorithm {algorithm!r} for {collective}"
    raise UsageError(f"{why}; hand-written choices: {', '.join(names)}")


def trace(
    collective: str,
    algorithm: str,
    nranks: int,
    count: int,
    dtype: str = "float32",
    op: str = "sum",
    root: int = 0,
    in_place: bool = False,
    ranks_per_node: int | None = None,
    counts: str = "uniform",
) -> Trace:
    """Run `algorithm` of `collective` once on `nranks` simulated ranks and record it.

    `count` is in elements as the collective's buffers define it (per block for the
    blocked collectives).  `ranks_per_node` groups consecutive ranks into simulated nodes
    for the node-aware algorithms (None: all on one node); it is passed on to a cost
    function that takes a ``ranks_per_node`` keyword.  `counts` is the count distribution of a
    v-collective's blocks (`ccbench.core.counts`; `count` is then the mean block).  Bad input raises UsageError;
    a bug in the algorithm (a deadlock, a size mismatch) propagates as the simulator
    raises it.
    """
    alg = _resolve(collective, algorithm)
    coll = COLLECTIVES[collective]
    if not isinstance(nranks, int) or not 1 <= nranks <= MAX_RANKS:
        raise UsageError(f"ranks must be an integer from 1 to {MAX_RANKS}, got {nranks!r}")
    if not isinstance(count, int) or count < 0:
        raise UsageError(f"count must be a non-negative integer, got {count!r}")
    if ranks_per_node is not None and (not isinstance(ranks_per_node, int) or ranks_per_node < 1):
        raise UsageError(f"ranks per node must be a positive integer, got {ranks_per_node!r}")
    dt = dtype_of(dtype)
    ufunc_of(op)
    if coll.rooted:
        if not 0 <= root < nranks:
            raise UsageError(f"root {root} outside 0..{nranks - 1}")
    else:
        root = 0
    why = alg.unsupported(nranks, op)
    if why:
        raise UsageError(f"{collective}/{algorithm} cannot run here: {why}")
    dist = parse_counts(counts).text if coll.uneven else "uniform"
    check_ranks(parse_counts(dist), nranks)
    if in_place and collective == "alltoallv" and not symmetric(dist, nranks):
        raise UsageError(f"alltoallv in place sends and receives the same counts (MPI_IN_PLACE), which {dist} "
                         "does not")

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.buffers(count, nranks, comm.rank, dt, op, root, in_place, None, dist)
        bufs.fill()
        alg(cc, *bufs.args, **bufs.kwargs)
        return bufs.nwrong(), RankCounts(**{f: getattr(cc.counts, f) for f in Counts.__slots__})

    batches: list = []
    results, messages = simulate(nranks, body, ranks_per_node=ranks_per_node, batches=batches)
    counts = tuple(r[1] for r in results)
    path_steps, path_bytes = critical_path(batches)
    nbytes = coll.nbytes_for(count, dt.itemsize, nranks)
    counted = Cost(
        max(c.steps for c in counts),
        max(c.step_bytes for c in counts),
        max(c.reduced_bytes for c in counts),
    )
    return Trace(
        collective=collective,
        algorithm=algorithm,
        nranks=nranks,
        count=count,
        dtype=dt.name,
        op=op,
        root=root,
        in_place=in_place,
        ranks_per_node=ranks_per_node,
        distribution=dist,
        nbytes=nbytes,
        messages=tuple(messages),
        counts=counts,
        counted=counted,
        critical_path=(path_steps, path_bytes),
        cost=None if alg.cost is None else cost_at(alg.cost, nranks, nbytes, ranks_per_node=ranks_per_node,
                                                   counts=dist, itemsize=dt.itemsize, root=root),
        formula=alg.formula,
        summary=alg.summary,
        source=alg.source,
        nwrong_per_rank=tuple(r[0] for r in results),
    )
