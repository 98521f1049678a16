"""Which allreduce algorithm ran, told from float32 rounding (run under mpiexec with 4 ranks).

Each element's sum has a +1e8 on one rank, a -1e8 on another and 1 elsewhere: in float32
the result depends on the order of the additions, which differs between ring
(position-dependent: "0101...") and recursive doubling ("0000...") at 4 ranks.  Rank 0
prints the first 16 results as digits.  Used by tests/test_tune.py (MPICH) and
tests/openmpi/check_openmpi.py (Open MPI).
"""

import numpy as np
from mpi4py import MPI

c = MPI.COMM_WORLD
P, r = c.Get_size(), c.Get_rank()
i = np.arange(64)
a = np.ones(64, np.float32)
a[(i % P) == r] = 1e8
a[((i + 2) % P) == r] = -1e8
b = np.empty_like(a)
c.Allreduce(a, b, MPI.SUM)
if r == 0:
    print("".join(str(int(v)) for v in b[:16]))
