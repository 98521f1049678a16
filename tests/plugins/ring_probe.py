"""A small run kind a third party could write: a ring exchange (each rank sends to the next, receives from the
previous), timed per size.  It lives only in tests/, registers itself through the plug-in hook, and uses nothing
of ccbench but its public plug-in interface (``ccbench.store.kinds``, ``ccbench.measure.kind_run``)."""

from dataclasses import dataclass, field
from typing import ClassVar

import click

from ccbench.core.errors import UsageError
from ccbench.core.units import parse_sizes
from ccbench.store.kinds import RunKind
from ccbench.store.results import StoredRow


@dataclass(frozen=True)
class RingRow(StoredRow):
    """One size of the ring exchange: statistics of its samples (seconds, each the maximum over ranks)."""

    KIND: ClassVar[str] = "ringprobe"

    exchange: str
    nbytes: int
    nranks: int
    samples: int
    median_s: float
    min_s: float
    mean_s: float
    ci_low_s: float
    ci_high_s: float
    nwrong: int
    stop_reason: str
    flags: tuple[str, ...] = ()
    samples_s: tuple[float, ...] = field(default=(), repr=False)
    launches: tuple[int, ...] = ()
    launch_samples: tuple[int, ...] = ()


def check(params: dict) -> dict:
    """The sizes as a list of byte counts (refused: none, or one below 1 byte)."""
    try:
        sizes = parse_sizes(params.get("sizes", "8,4K"))
    except UsageError as exc:
        raise UsageError(f"--sizes: {exc}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError("--sizes: every size must be at least 1 byte")
    return {"sizes": ",".join(str(n) for n in sizes)}


@dataclass
class _Visit:
    samples: object
    stop: str
    nwrong: int


def plan(ctx) -> list:
    """One item per size: a Sendrecv to the next rank from the previous one, then checked element by element."""
    import numpy as np
    from mpi4py import MPI

    from ccbench.measure.kind_run import common_stop

    comm = ctx.comm
    rank, size = comm.Get_rank(), comm.Get_size()
    nxt, prv = (rank + 1) % size, (rank - 1) % size

    def visit(nbytes):
        send = np.full(nbytes, rank % 251, dtype=np.uint8)
        recv = np.zeros(nbytes, dtype=np.uint8)
        samples, stop = ctx.measure(lambda: comm.Sendrecv(send, nxt, 0, recv, prv, 0))
        recv[:] = 0
        comm.Sendrecv(send, nxt, 0, recv, prv, 0)
        wrong = comm.allreduce(int(np.count_nonzero(recv != prv % 251)), MPI.SUM)
        return _Visit(samples, stop, wrong)

    def rows(nbytes, visits):
        return [RingRow(exchange="ring", nbytes=nbytes, nranks=size, nwrong=sum(v.nwrong for v in visits),
                        stop_reason=common_stop([v.stop for v in visits]),
                        **ctx.stats(np.concatenate([v.samples for v in visits])))]

    return [ctx.item(("ring", n), f"ring {n} B", lambda n=n: visit(n), lambda visits, n=n: rows(n, visits))
            for n in (int(x) for x in ctx.params["sizes"].split(","))]


KIND = RunKind("ringprobe", RingRow, "exchange", "ring-exchange probe", "probe", "exchange",
               key_fields=("exchange", "nbytes"), summary="Time a ring exchange per size (a test plug-in).",
               options=[click.option("-s", "--sizes", help="Sizes in bytes, e.g. 8,4K (default 8,4K).")],
               check=check, plan=plan)
