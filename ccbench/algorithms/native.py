"""The MPI library's own collectives, through mpi4py's buffer (upper-case) interface.

Registered as algorithm ``native`` of every collective.  mpi4py is imported lazily so
that the thread level can be chosen before MPI is initialised.

Half precision.  float16 travels as the library's own type where mpi4py finds one
(``MPI.FLOAT16_T``; MPICH 5.0: ``MPIX_C_FLOAT16``, whose reductions MPICH computes in float32
and rounds back -- at 2 ranks bit for bit what `ccbench.algorithms.p2p.reduce_half` gives, as
the MPI tier checks).  MPI has no bfloat16 (``MPI.BFLOAT16_T`` is null in MPICH 5.0), so
bfloat16 -- and float16 on a library without a float16 type -- travels as a user-defined
datatype (2 contiguous ``MPI_BYTE``, named ``ccbench_bfloat16``) and is reduced by a
user-defined op (``MPI.Op.Create``) that widens to float32, combines and rounds back in
numpy: a native bfloat16 reduction times the library's algorithm with a Python callback as
its reduction.  A library that has ``MPI.BFLOAT16_T`` gets it passed, with its own ops.
`half_path` says which path a dtype takes.
"""

import functools
import inspect

import numpy as np

from ccbench.algorithms.p2p import reduce_half
from ccbench.algorithms.registry import register
from ccbench.core.dtypes import OPS

__all__ = ["call_of", "direct_call", "half_path", "nonblocking_begin", "persistent_call", "reduce_local_of"]

_MPI_OPS: dict = {}
# numpy dtype -> _Wire, or None where mpi4py passes the array as it is; made on first use (after MPI_Init)
_WIRES: dict = {}


class _Wire:
    """How MPI carries one 16-bit float type: the datatype to pass, the op of each name, whether both are
    user-defined (created here) or the library's own."""

    __slots__ = ("datatype", "ops", "user")

    def __init__(self, datatype, ops: dict, user: bool) -> None:
        self.datatype, self.ops, self.user = datatype, ops, user


def _library_type(MPI, attr: str, code: str | None):
    """The library's predefined datatype for a half type, or None where it has none."""
    dt = getattr(MPI, attr, MPI.DATATYPE_NULL)
    if dt == MPI.DATATYPE_NULL:
        return None
    if code is not None:  # mpi4py must also map the numpy typecode to it (buffers passed as they are)
        try:
            if MPI.Datatype.fromcode(code) != dt:
                return None
        except (KeyError, ValueError):
            return None
    return dt


def _user_op(MPI, ufunc, dtype):
    """An MPI.Op for `ufunc` on a 16-bit float type: inoutbuf = inbuf (op) inoutbuf, widened to float32 and rounded
    back (`reduce_half`), every op the suite offers being commutative."""

    def combine(inbuf, inoutbuf, datatype):
        reduce_half(ufunc, np.frombuffer(inbuf, dtype=dtype), np.frombuffer(inoutbuf, dtype=dtype))

    return MPI.Op.Create(combine, commute=True)


def _wire(dtype):
    """The `_Wire` of a numpy dtype, or None for one mpi4py passes as it is (every type but the 16-bit floats
    the library lacks, and bfloat16, which a numpy array cannot export through the buffer protocol)."""
    if dtype.itemsize != 2 or dtype.kind not in "fV":
        return None
    if dtype in _WIRES:
        return _WIRES[dtype]
    from mpi4py import MPI

    if dtype.kind == "f":  # float16: the library's own, where mpi4py knows it
        own = _library_type(MPI, "FLOAT16_T", dtype.char)
        wire = None if own is not None else _user_wire(MPI, dtype)
    else:
        own = _library_type(MPI, "BFLOAT16_T", None)
        library_ops = dict(sum=MPI.SUM, prod=MPI.PROD, min=MPI.MIN, max=MPI.MAX)
        wire = _Wire(own, library_ops, False) if own is not None else _user_wire(MPI, dtype)
    _WIRES[dtype] = wire
    return wire


def _user_wire(MPI, dtype) -> _Wire:
    """A committed datatype of 2 contiguous MPI_BYTE named ccbench_<dtype> and a user-defined op per op name."""
    dt = MPI.BYTE.Create_contiguous(2)
    dt.Set_name(f"ccbench_{dtype.name}")
    dt.Commit()
    return _Wire(dt, {op: _user_op(MPI, ufunc, dtype) for op, ufunc in OPS.items()}, True)


def half_path(dtype) -> str | None:
    """How the library's own collectives carry and reduce `dtype` (a numpy dtype), in words, for the 16-bit float
    types (the library's own datatype, or a user-defined datatype and op); None for the others.  Needs MPI."""
    dtype = np.dtype(dtype)
    if dtype.itemsize != 2 or dtype.kind not in "fV":
        return None
    wire = _wire(dtype)
    if wire is None or not wire.user:
        from mpi4py import MPI

        name = (MPI.FLOAT16_T if wire is None else wire.datatype).Get_name()
        return f"{dtype.name}: the library's own datatype {name} and reduction"
    return (f"{dtype.name}: MPI has no such type; a user-defined datatype ({wire.datatype.Get_name()}, "
            "2 contiguous MPI_BYTE) and user-defined op (float32 widening in Python) are timed")


def _array_dtype(values):
    """The dtype of the first numpy array among `values` (None if there is none)."""
    for v in values:
        if isinstance(v, np.ndarray):
            return v.dtype
    return None


def _typed(values, op=None):
    """(`values` with every numpy array of a 16-bit float type MPI needs told about as ``[bytes, datatype]``,
    the MPI.Op for `op`): the arguments of one mpi4py call.  Other arrays and markers pass unchanged."""
    dtype = _array_dtype(values)
    wire = _wire(dtype) if dtype is not None else None
    if wire is None:
        return values, (None if op is None else _op(op))
    bufs = [[v.view(np.uint8), wire.datatype] if isinstance(v, np.ndarray) else v for v in values]
    if op is None:
        return bufs, None
    return bufs, (wire.ops[op] if isinstance(op, str) else wire.ops[_name_of(op)])


def _name_of(op) -> str:
    """The name ("sum", ...) of a predefined MPI.Op."""
    from mpi4py import MPI

    for name, mpi_op in dict(sum=MPI.SUM, prod=MPI.PROD, min=MPI.MIN, max=MPI.MAX).items():
        if op == mpi_op:
            return name
    raise ValueError(f"unsupported reduction op {op!r} for a half type")


def reduce_local_of(op: str, dtype):
    """call(inbuf, inoutbuf) doing the library's local reduction (MPI_Reduce_local) of `op` on arrays of `dtype`:
    a user-defined op where `half_path` says so -- the reduction a native call of that type pays."""
    wire = _wire(np.dtype(dtype))
    if wire is None:
        mpi_op = _op(op)
        return lambda a, b: mpi_op.Reduce_local(a, b)
    mpi_op, dt = wire.ops[op], wire.datatype
    return lambda a, b: mpi_op.Reduce_local([a.view(np.uint8), dt], [b.view(np.uint8), dt])


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
    (buf,), _ = _typed((buf,))
    comm.Bcast(buf, root)


@register("scatter", "native", source=_SRC, native=True)
def scatter(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """MPI_Scatter."""
    (sendbuf, recvbuf), _ = _typed((sendbuf, recvbuf))
    comm.Scatter(sendbuf, recvbuf, root)


@register("gather", "native", source=_SRC, native=True)
def gather(comm, sendbuf, recvbuf, root: int = 0) -> None:
    """MPI_Gather."""
    (sendbuf, recvbuf), _ = _typed((sendbuf, recvbuf))
    comm.Gather(sendbuf, recvbuf, root)


@register("allgather", "native", source=_SRC, native=True)
def allgather(comm, sendbuf, recvbuf) -> None:
    """MPI_Allgather."""
    (sendbuf, recvbuf), _ = _typed((sendbuf, recvbuf))
    comm.Allgather(sendbuf, recvbuf)


@register("reduce", "native", source=_SRC, native=True)
def reduce(comm, sendbuf, recvbuf, op="sum", root: int = 0) -> None:
    """MPI_Reduce."""
    (sendbuf, recvbuf), op = _typed((sendbuf, recvbuf), op)
    comm.Reduce(sendbuf, recvbuf, op, root)


@register("reduce_scatter", "native", source=_SRC, native=True)
def reduce_scatter(comm, sendbuf, recvbuf, op="sum") -> None:
    """MPI_Reduce_scatter_block."""
    (sendbuf, recvbuf), op = _typed((sendbuf, recvbuf), op)
    comm.Reduce_scatter_block(sendbuf, recvbuf, op)


@register("allreduce", "native", source=_SRC, native=True)
def allreduce(comm, sendbuf, recvbuf, op="sum") -> None:
    """MPI_Allreduce."""
    (sendbuf, recvbuf), op = _typed((sendbuf, recvbuf), op)
    comm.Allreduce(sendbuf, recvbuf, op)


@register("alltoall", "native", source=_SRC, native=True)
def alltoall(comm, sendbuf, recvbuf) -> None:
    """MPI_Alltoall."""
    (sendbuf, recvbuf), _ = _typed((sendbuf, recvbuf))
    comm.Alltoall(sendbuf, recvbuf)


# -- the v-collectives: the counts travel with the buffers as mpi4py's [buffer, (counts, None)] (no displacements:
# the blocks lie one after another), or [bytes, (counts, None), datatype] for a half type MPI needs told about.
# Not [buffer, counts]: with two ranks mpi4py would read the pair of counts as (count, displacement).


def _vspec(buf, counts):
    """A buffer (as `_typed` left it) with its block counts, as mpi4py's vector collectives take it."""
    if isinstance(buf, np.ndarray):
        return [buf, (counts, None)]
    if isinstance(buf, list):
        return [buf[0], (counts, None), buf[1]]
    return buf  # None (a rank the buffer means nothing to) or MPI.IN_PLACE


def _vector_call(collective: str, sendbuf, recvbuf, op=None, root: int = 0, counts=None, sendcounts=None,
                 recvcounts=None) -> tuple[str, tuple]:
    """(mpi4py method, its arguments) of one v-collective call (the counts the same on every rank)."""
    (sendbuf, recvbuf), op = _typed((sendbuf, recvbuf), op)
    if collective == "allgatherv":
        return "Allgatherv", (sendbuf, _vspec(recvbuf, counts))
    if collective == "gatherv":
        return "Gatherv", (sendbuf, _vspec(recvbuf, counts), root)
    if collective == "scatterv":
        return "Scatterv", (_vspec(sendbuf, counts), recvbuf, root)
    if collective == "reduce_scatterv":
        return "Reduce_scatter", (sendbuf, recvbuf, counts, op)
    return "Alltoallv", (_vspec(sendbuf, sendcounts), _vspec(recvbuf, recvcounts))


def _vector(comm, collective: str, *args, **kwargs) -> None:
    method, values = _vector_call(collective, *args, **kwargs)
    getattr(comm, method)(*values)


@register("allgatherv", "native", source=_SRC, native=True)
def allgatherv(comm, sendbuf, recvbuf, counts) -> None:
    """MPI_Allgatherv."""
    _vector(comm, "allgatherv", sendbuf, recvbuf, counts=counts)


@register("gatherv", "native", source=_SRC, native=True)
def gatherv(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """MPI_Gatherv."""
    _vector(comm, "gatherv", sendbuf, recvbuf, root=root, counts=counts)


@register("scatterv", "native", source=_SRC, native=True)
def scatterv(comm, sendbuf, recvbuf, counts, root: int = 0) -> None:
    """MPI_Scatterv."""
    _vector(comm, "scatterv", sendbuf, recvbuf, root=root, counts=counts)


@register("reduce_scatterv", "native", source=_SRC, native=True)
def reduce_scatterv(comm, sendbuf, recvbuf, counts, op="sum") -> None:
    """MPI_Reduce_scatter."""
    _vector(comm, "reduce_scatterv", sendbuf, recvbuf, op=op, counts=counts)


@register("alltoallv", "native", source=_SRC, native=True)
def alltoallv(comm, sendbuf, recvbuf, sendcounts, recvcounts) -> None:
    """MPI_Alltoallv."""
    _vector(comm, "alltoallv", sendbuf, recvbuf, sendcounts=sendcounts, recvcounts=recvcounts)


_VECTOR = {"allgatherv": allgatherv, "gatherv": gatherv, "scatterv": scatterv, "reduce_scatterv": reduce_scatterv,
           "alltoallv": alltoallv}

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
    if _VECTOR.get(collective) is fn:
        bound = inspect.signature(fn).bind(comm, *args, **kwargs)
        bound.apply_defaults()
        method, values = _vector_call(collective, **{k: v for k, v in bound.arguments.items() if k != "comm"})
        return functools.partial(getattr(comm, method), *values)
    if collective not in _DIRECT or fn is not _WRAPPERS[collective]:
        return None
    method, names = _DIRECT[collective]
    bound = inspect.signature(fn).bind(comm, *args, **kwargs)
    bound.apply_defaults()
    bufs, op = _typed([bound.arguments[n] for n in names if n not in ("op", "root")], bound.arguments.get("op"))
    it = iter(bufs)
    values = [op if n == "op" else bound.arguments[n] if n == "root" else next(it) for n in names]
    return functools.partial(getattr(comm, method), *values) if values else getattr(comm, method)


def call_of(collective: str, fn, comm, *args, **kwargs):
    """What a timing loop calls for `fn(comm, *args, **kwargs)`: the bound mpi4py method (``direct_call``)
    where there is one, else the function with its arguments bound (hand-written algorithms, ping-pong).

    The sweep times it and the harness floor (``ccbench.measure.gamma.harness_floor``) times its
    zero-count form, so the floor is the cost of the very path the cases pay.
    """
    direct = direct_call(collective, fn, comm, *args, **kwargs)
    if direct is not None:
        return direct
    if collective == "pingpong" and inspect.unwrap(fn) is pingpong:  # its wrapper stays as lean as a bare loop
        args = tuple(a.view(np.uint16) if isinstance(a, np.ndarray) and _wire(a.dtype) else a for a in args)
    return functools.partial(fn, comm, *args, **kwargs)


# -- MPI-4 persistent collectives (MPI 4.0, section 6.13): the same call as ``native``, made once as a persistent
# request by ``<Method>_init`` with the same arguments, then started and completed per call.


def _method_of(collective: str) -> str:
    """The mpi4py method the library's own `collective` calls ("Allreduce", "Allgatherv", ...)."""
    return _DIRECT[collective][0] if collective in _DIRECT else _vector_call(collective, None, None)[0]


def _persistent_missing(collective: str) -> str | None:
    """Why the installed library has no persistent form of `collective` (None: it has, or MPI is not loaded yet)."""
    import sys

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized():
        return None
    method = _method_of(collective)
    if mpi.Get_version() < (4, 0) or not hasattr(mpi.Comm, f"{method}_init"):
        return f"the MPI library (MPI {'.'.join(map(str, mpi.Get_version()))}) has no MPI_{method}_init"
    return None


def persistent_call(collective: str, comm, *args, **kwargs):
    """(call, free): the persistent request of what ``native`` calls for these arguments, made here by
    ``<Method>_init`` (the set-up); ``call()`` is one Start and Wait of it, ``free()`` releases it."""
    direct = direct_call(collective, _VECTOR.get(collective) or _WRAPPERS[collective], comm, *args, **kwargs)
    values = direct.args if isinstance(direct, functools.partial) else ()
    request = getattr(comm, f"{_method_of(collective)}_init")(*values)
    start, wait = request.Start, request.Wait

    def call() -> None:
        start()
        wait()

    return call, request.Free


def _register_persistent() -> None:
    for coll in (*_DIRECT, *_VECTOR):
        name = _method_of(coll)

        def setup(comm, *args, _coll=coll, **kwargs):
            return persistent_call(_coll, comm, *args, **kwargs)

        def once(comm, *args, _setup=setup, **kwargs) -> None:
            call, free = _setup(comm, *args, **kwargs)
            call()
            free()

        once.__doc__ = f"MPI_{name}_init once per case, then MPI_Start + MPI_Wait per call (MPI-4 persistent)."
        register(coll, "native-persistent", source="the MPI library, MPI-4 persistent collectives (MPI 4.0, 6.13)",
                 native=True, setup=setup, supports=lambda P, op, _c=coll: _persistent_missing(_c))(once)


_register_persistent()


# -- MPI-3 non-blocking collectives (MPI 3.0, section 5.12): the same call as ``native`` as ``I<Method>``, started per
# call and completed by MPI_Wait (a sweep), or by test calls and the wait spread over a compute (the overlap workload).


def _nonblocking_missing(collective: str) -> str | None:
    """Why the installed library has no non-blocking form of `collective` (None: it has, or MPI is not loaded yet)."""
    import sys

    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not mpi.Is_initialized():
        return None
    if mpi.Get_version() < (3, 0) or not hasattr(mpi.Comm, _i_method(collective)):
        version = ".".join(map(str, mpi.Get_version()))
        return f"the MPI library (MPI {version}) has no MPI_I{_method_of(collective).lower()}"
    return None


def _i_method(collective: str) -> str:
    """The mpi4py method of the non-blocking form ("Iallreduce", "Ibarrier", ...)."""
    method = _method_of(collective)
    return f"I{method[0].lower()}{method[1:]}"


def nonblocking_begin(collective: str, comm, *args, **kwargs):
    """``begin``: the non-blocking form of what ``native`` calls for these arguments, bound once; ``begin()`` starts
    one call (``I<Method>``) and returns its MPI.Request."""
    direct = direct_call(collective, _VECTOR.get(collective) or _WRAPPERS[collective], comm, *args, **kwargs)
    values = direct.args if isinstance(direct, functools.partial) else ()
    return functools.partial(getattr(comm, _i_method(collective)), *values)


def _register_nonblocking() -> None:
    for coll in (*_DIRECT, *_VECTOR):

        def bind(comm, *args, _coll=coll, **kwargs):
            return nonblocking_begin(_coll, comm, *args, **kwargs)

        def once(comm, *args, _bind=bind, **kwargs) -> None:
            _bind(comm, *args, **kwargs)().Wait()

        once.__doc__ = f"MPI_I{_method_of(coll).lower()} started per call, then MPI_Wait (MPI-3 non-blocking)."
        register(coll, "native-nonblocking", source="the MPI library, MPI-3 non-blocking collectives (MPI 3.0, 5.12)",
                 native=True, nonblocking=bind, supports=lambda P, op, _c=coll: _nonblocking_missing(_c))(once)


_register_nonblocking()
