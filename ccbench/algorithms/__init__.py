"""Every algorithm of every collective, native and hand-written, in one registry.

Use one in your own mpi4py program::

    from ccbench import algorithms
    ring = algorithms.get("allreduce", "ring")
    ring(comm, sendbuf, recvbuf, op="sum")   # or op=MPI.SUM; sendbuf=MPI.IN_PLACE works

Importing this package imports no MPI: native algorithms load mpi4py on first use.
"""

from ccbench.algorithms import (
    allgather,  # noqa: F401 - registers
    allreduce,  # noqa: F401 - registers
    alltoall,  # noqa: F401 - registers
    barrier,  # noqa: F401 - registers
    bcast,  # noqa: F401 - registers
    gather,  # noqa: F401 - registers
    native,  # noqa: F401 - registers
    native_variants,  # noqa: F401 - registers (after native: each variant wraps its function)
    reduce,  # noqa: F401 - registers
    reduce_scatter,  # noqa: F401 - registers
    scatter,  # noqa: F401 - registers
    uneven,  # noqa: F401 - registers (the v-collectives)
)
from ccbench.algorithms.registry import REGISTRY, Algorithm, Cost, get, register

__all__ = ["REGISTRY", "Algorithm", "Cost", "get", "register"]
