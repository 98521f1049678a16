"""Run a registered algorithm on the simulated communicator and check it exactly."""

import numpy as np

from ccbench.algorithms import get
from ccbench.algorithms.p2p import CountedComm
from ccbench.algorithms.simcomm import simulate
from ccbench.core.collectives import COLLECTIVES


def run_sim(collective, algorithm, nranks, count, dtype="float64", op="sum", in_place=False, root=0,
            batches=None, counts="uniform"):
    """Return (nwrong per rank, counts tuple per rank, messages) of one simulated call.

    A list given as `batches` receives each rank's completed batches (see `simulate`); `counts` is a
    v-collective's count distribution."""
    alg = get(collective, algorithm)
    coll = COLLECTIVES[collective]

    def body(comm):
        cc = CountedComm(comm)
        bufs = coll.buffers(count, nranks, comm.rank, np.dtype(dtype), op, root, in_place, None, counts)
        bufs.fill()
        alg(cc, *bufs.args, **bufs.kwargs)
        return bufs.nwrong(), cc.counts

    results, messages = simulate(nranks, body, batches=batches)
    return [r[0] for r in results], [r[1] for r in results], messages
