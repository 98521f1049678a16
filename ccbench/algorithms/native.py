"""The MPI library's own collectives, through mpi4py's buffer (upper-case) interface.

Registered as algorithm ``native`` of every collective.  mpi4py is imported lazily so
that the thread level can be chosen before MPI is initialised.
"""

import functools
import inspect

from ccbench.algorithms.registry import register

__all__ = ["call_of", "direct_call"]

_MPI_OPS: dict = {}


def _op(op):
    """An MPI.Op for a name like "sum" (an MPI.Op passes through)."""
    if not isinstance(op, str):
        return op
    if not _MPI_OPS:
        from mpi4py import MPI

        _MPI_OPS.update(sum=MPI.SUM, prod=MPI.PROD, min=MPI.MIN, max=MPI.MAX)
    return _MPI_OPS[op]


_SRC = "the MPI library (mpi4py buffer interface)"


@register("barrier", "native", source=_SRC, native=True)
def barrier(comm) -> None:
    """MPI_Barrier."""
    comm.Barrier()


@register("pingpong", "native", source=_SRC, native=True)
def pingpong(comm, sendbuf, recvbuf) -> None:
    """MPI_Send/MPI_Recv round trip between ranks 0 and 1 (other ranks idle); rank 1 echoes what it received."""
    rank = comm.Get_rank()
    if rank == 0:
        comm.Send(sendbuf, 1, 7)
        comm.Recv(recvbuf, 1, 7)
    elif rank == 1:
        comm.Recv(recvbuf, 0, 7)
        comm.Send(recvbuf, 0, 7)


@register("bcast", "native", source=_SRC, native=True)
def bcast(comm, buf, root: int = 0) -> None:
    """MPI_Bcast."""
    comm.Bcast(buf, root)


@register("scatter", "native", source=_SRC, native=True)
def scatter(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """MPI_Scatter."""
    comm.Scatter(sendbuf, recvbuf, root)


@register("gather", "native", source=_SRC, native=True)
def gather(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """MPI_Gather."""
    comm.Gather(sendbuf, recvbuf, root)


@register("allgather", "native", source=_SRC, native=True)
def allgather(comm, sendbuf, recvbuf) -> None:
    """MPI_Allgather."""
    comm.Allgather(sendbuf, recvbuf)


@register("reduce", "native", source=_SRC, native=True)
def reduce(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> None:
    """MPI_Reduce."""
    comm.Reduce(sendbuf, recvbuf, _op(op), root)


@register("reduce_scatter", "native", source=_SRC, native=True)
def reduce_scatter(comm, sendbuf, recvbuf, op="sum") -> None:
    """MPI_Reduce_scatter_block."""
    comm.Reduce_scatter_block(sendbuf, recvbuf, _op(op))


@register("allreduce", "native", source=_SRC, native=True)
def allreduce(comm, sendbuf, recvbuf, op="sum") -> None:
    """MPI_Allreduce."""
    comm.Allreduce(sendbuf, recvbuf, _op(op))


@register("alltoall", "native", source=_SRC, native=True)
def alltoall(comm, sendbuf, recvbuf) -> None:
    """MPI_Alltoall."""
    comm.Alltoall(sendbuf, recvbuf)


# collective -> (mpi4py method, the wrapper's parameters it takes in order; "op" resolved to an MPI.Op)
_DIRECT = {
    "barrier": ("Barrier", ()),
    "bcast": ("Bcast", ("buf", "root")),
    "scatter": ("Scatter", ("sendbuf", "recvbuf", "root")),
    "gather": ("Gather", ("sendbuf", "recvbuf", "root")),
    "allgather": ("Allgather", ("sendbuf", "recvbuf")),
    "reduce": ("Reduce", ("sendbuf", "recvbuf", "op", "root")),
    "reduce_scatter": ("Reduce_scatter_block", ("sendbuf", "recvbuf", "op")),
    "allreduce": ("Allreduce", ("sendbuf", "recvbuf", "op")),
    "alltoall": ("Alltoall", ("sendbuf", "recvbuf")),
}
_WRAPPERS = {"barrier": barrier, "bcast": bcast, "scatter": scatter, "gather": gather, "allgather": allgather,
             "reduce": reduce, "reduce_scatter": reduce_scatter, "allreduce": allreduce, "alltoall": alltoall}


def direct_call(collective: str, fn, comm, *args, **kwargs):
    """The call ``fn(comm, *args, **kwargs)`` makes, as one bound mpi4py method (None where there is none).

    `fn` must be this module's wrapper of `collective` (the function ``native`` registers, or a
    ``native:<alg>`` variant's, which wraps it: ``__wrapped__``); the result is ``functools.partial`` of the
    communicator's method with the same arguments, the op name already an ``MPI.Op``, so no
    Python frame stands between a timing loop and mpi4py -- the loop then pays what a bare
    mpi4py loop pays (OSU's and OMB-Py's method).  Ping-pong keeps its wrapper (it branches on
    the rank).
    """
    fn = inspect.unwrap(fn)  # a native:<alg> variant wraps the same function (its settings act at MPI_Init)
    if collective not in _DIRECT or fn is not _WRAPPERS[collective]:
        return None
    method, names = _DIRECT[collective]
    bound = inspect.signature(fn).bind(comm, *args, **kwargs)
    bound.apply_defaults()
    values = [_op(bound.arguments[n]) if n == "op" else bound.arguments[n] for n in names]
    return functools.partial(getattr(comm, method), *values) if values else getattr(comm, method)


def call_of(collective: str, fn, comm, *args, **kwargs):
    """What a timing loop calls for `fn(comm, *args, **kwargs)`: the bound mpi4py method (``direct_call``)
    where there is one, else the function with its arguments bound (hand-written algorithms, ping-pong).

    The sweep times it and the harness floor (``ccbench.measure.gamma.harness_floor``) times its
    zero-count form, so the floor is the cost of the very path the cases pay.
    """
    return direct_call(collective, fn, comm, *args, **kwargs) or functools.partial(fn, comm, *args, **kwargs)
