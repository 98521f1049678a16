"""The registry: a plain dict {collective: {algorithm: Algorithm}} filled by a decorator."""

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from ccbench.algorithms.p2p import counted
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.errors import UsageError

__all__ = ["REGISTRY", "Algorithm", "Cost", "cost_at", "get", "register", "row_keywords"]


class Cost(NamedTuple):
    """Closed-form cost of one call: alpha-count (steps), beta-bytes, gamma-bytes.

    Time = alpha * a + beta * b + gamma * g for network latency a (s), inverse
    bandwidth b (s/byte) and reduction cost g (s/byte).  ``alpha``, ``beta`` and
    ``gamma`` are per rank, maximised over ranks, under the full-duplex model of
    `ccbench.algorithms.p2p`: what the busiest rank does, and what the traffic tests
    count.

    ``critical`` is the cost along the schedule's longest chain of dependent steps
    (`ccbench.algorithms.p2p.critical_path`) where that is longer than the busiest
    rank's own work: in pipelines, where a rank idles while the pipeline fills (a chain
    broadcast's last rank waits P-2 rounds for its first segment), and in the forwarding
    steps of non-power-of-two schedules.  For the double binary tree's lock-step rounds
    it is the sum over rounds of the costliest rank's round, an upper bound.  None means
    the busiest rank's cost covers the critical path (trees, rings; the tests check this
    on the executed schedules).  Predictions use `timing_cost`.
    """

    alpha: float
    beta: float
    gamma: float = 0.0
    critical: "Cost | None" = None

    @property
    def timing_cost(self) -> "Cost":
        """The cost that sets the time of a call: the critical path where given, else the busiest rank's."""
        return self if self.critical is None else self.critical

    def time_s(self, alpha_s: float, beta_s_per_byte: float, gamma_s_per_byte: float = 0.0) -> float:
        """Predicted time in seconds from network parameters (along `timing_cost`)."""
        c = self.timing_cost
        return c.alpha * alpha_s + c.beta * beta_s_per_byte + c.gamma * gamma_s_per_byte


@dataclass(frozen=True)
class Algorithm:
    """One way to perform a collective.

    `fn` mirrors mpi4py's argument order: ``fn(comm, sendbuf, recvbuf, op=..., root=...)``
    (``fn(comm, buf, root=...)`` for bcast, ``fn(comm)`` for barrier).  Hand-written
    algorithms receive a counting communicator; calling the Algorithm wraps a plain
    mpi4py communicator for them.
    """

    collective: str
    name: str
    fn: Callable
    summary: str
    native: bool = False
    # (nranks, nbytes) -> Cost; a cost may also take keywords of the case (`cost_at`): ranks_per_node (the
    # node-aware algorithms), counts, itemsize and root (the v-collectives, whose blocks a distribution sizes)
    cost: Callable[[int, int], Cost] | None = None
    formula: str = ""                                # the cost, for people
    source: str = ""                                 # where the algorithm comes from
    supports: Callable[[int, str], str | None] | None = field(default=None, repr=False)
    # a forced variant of the library's own collective (``native:<alg>``): per MPI library
    # ("mpich", "openmpi"), the environment variables that force it, read at MPI_Init
    settings: dict[str, dict[str, str]] | None = field(default=None, repr=False)
    # a reduction: P -> the most sequential additions (roundings) any result element goes through, the
    # "steps" of its error bound in half precision (steps x u x sum|x|; Higham, Accuracy and Stability
    # of Numerical Algorithms, ch. 4); see `additions_at`
    additions: Callable[[int], int] | None = field(default=None, repr=False)
    # a persistent algorithm (MPI-4 ``<coll>_init``, or persistent point-to-point requests): ``setup(comm, *args,
    # **kwargs) -> (call, free)`` does the set-up once per case (timed apart, the row's ``setup_s``); each ``call()``
    # is one Start+Wait; ``free()`` releases the requests.  `fn` does the three in one go
    setup: Callable | None = field(default=None, repr=False)
    # a non-blocking algorithm (MPI-3 ``I<coll>``, or a hand-written schedule of Isend/Irecv steps):
    # ``nonblocking(comm, *args, **kwargs) -> begin`` binds the buffers once per case; each ``begin()`` starts one call
    # and returns its request (``Test() -> bool`` advances it, ``Wait()`` completes it); `fn` is begin + Wait
    nonblocking: Callable | None = field(default=None, repr=False)

    @property
    def in_all(self) -> bool:
        """Whether ``-a all`` takes it: every algorithm but the library's forced variants (``native:all``), the
        persistent and the non-blocking forms (named on their own: the set of ``all`` stays the one a stored run was
        planned with)."""
        return not self.settings and self.setup is None and self.nonblocking is None

    def __call__(self, comm, *args, **kwargs):
        if not self.native:
            comm = counted(comm)
        return self.fn(comm, *args, **kwargs)

    def unsupported(self, nranks: int, op: str | None = None) -> str | None:
        """Why this algorithm cannot run with `nranks` ranks and `op`, or None if it can."""
        need = COLLECTIVES[self.collective].min_ranks
        if nranks < need:
            return f"{self.collective} needs at least {need} ranks"
        return self.supports(nranks, op) if self.supports else None

    def additions_at(self, nranks: int, **layout) -> int:
        """The longest chain of sequential additions (each one rounding) behind any element of the result
        with `nranks` ranks: the steps of the half-precision bound steps x u x sum|x|.  0 for a collective that
        reduces nothing; P - 1 where the algorithm does not say (the library's own: any order of P terms).
        `layout` (``ranks_per_node``: the largest node's ranks, ``nodes``) reaches a count that takes it (a
        node-aware algorithm's); None, or no layout: one node."""
        if not COLLECTIVES[self.collective].reduction or nranks <= 1:
            return 0
        if not self.additions:
            return nranks - 1
        take = _keywords(self.additions, 1)
        return self.additions(nranks, **{k: v for k, v in layout.items()
                                         if v is not None and (take is None or k in take)})

    def additions_on(self, comm) -> int:
        """`additions_at` on a communicator: its size, and for a hand-written reduction the node layout it splits
        into (`CountedComm.node_layout`: collective, so every rank of `comm` calls this or none does)."""
        if self.native or not COLLECTIVES[self.collective].reduction:
            return self.additions_at(comm.Get_size())
        target = counted(comm)
        return self.additions_at(target.size, **target.node_layout())


REGISTRY: dict[str, dict[str, Algorithm]] = {name: {} for name in COLLECTIVES}


@lru_cache(maxsize=1024)
def _keywords(fn, positional: int = 2) -> frozenset | None:
    """The keyword parameters a function takes after its `positional` ones (a cost's nranks, nbytes; an additions
    count's nranks): none for a builtin or C callable, None for one that takes any (``**case``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[positional:]
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params)


def cost_at(fn: Callable, nranks: int, nbytes: int, **case) -> Cost:
    """``fn(nranks, nbytes, ...)`` with those of the case's keywords (`case`: ranks_per_node, counts, itemsize,
    root; None = not known) that `fn` takes: the one way every stage prices a case."""
    take = _keywords(fn)
    given = {k: v for k, v in case.items() if v is not None and (take is None or k in take)}
    return fn(int(nranks), int(nbytes), **given)


def row_keywords(row: Mapping) -> dict:
    """The cost keywords a result row (a mapping) gives: its count distribution, element size and root."""
    from ccbench.core.dtypes import itemsize_of

    dtype = row.get("dtype")
    try:
        itemsize = itemsize_of(dtype) if dtype else None
    except KeyError:  # a dtype of an imported result this suite does not know
        itemsize = None
    return {"counts": row.get("counts"), "itemsize": itemsize, "root": row.get("root")}


def register(
    collective: str,
    name: str,
    *,
    cost: Callable[[int, int], Cost] | None = None,
    formula: str = "",
    source: str = "",
    supports: Callable[[int, str], str | None] | None = None,
    native: bool = False,
    settings: dict[str, dict[str, str]] | None = None,
    additions: Callable[[int], int] | None = None,
    setup: Callable | None = None,
    nonblocking: Callable | None = None,
):
    """Decorator: add `fn` to the registry as algorithm `name` of `collective`.

    The summary shown by ``ccbench list`` is the first line of the function's docstring.
    `additions` (reductions): P -> the most sequential additions on any element's path
    (`Algorithm.additions_at`); `setup`: a persistent algorithm's set-up (`Algorithm.setup`); `nonblocking`: a
    non-blocking algorithm's binding of its buffers (`Algorithm.nonblocking`).
    """

    def deco(fn):
        if name in REGISTRY[collective]:
            raise ValueError(f"{collective}/{name} registered twice")
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else name
        REGISTRY[collective][name] = Algorithm(
            collective, name, fn, summary, native, cost, formula, source, supports, settings, additions, setup,
            nonblocking)
        return fn

    return deco


def get(collective: str, name: str) -> Algorithm:
    """The algorithm `name` of `collective`, or a UsageError listing the valid names."""
    algs = REGISTRY.get(collective)
    if algs is None:
        raise UsageError(f"unknown collective {collective!r}; choose from {', '.join(REGISTRY)}")
    try:
        return algs[name]
    except KeyError:
        raise UsageError(
            f"unknown algorithm {name!r} for {collective}; choose from {', '.join(algs)}"
        ) from None
