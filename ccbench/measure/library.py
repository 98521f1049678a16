"""What the installed MPI library itself holds, read without starting MPI (MPICH's compiled-in selection tree)."""

import json
import re
from pathlib import Path

from ccbench.core.errors import CCBenchError

__all__ = ["mpich_default_tree"]


def mpich_default_tree() -> tuple[dict, str]:
    """(MPICH's compiled-in MPIR selection tree, library version) of the MPICH mpi4py uses.

    MPICH compiles ``maint/tuning/coll/mpir/generic.json`` into the library as a string;
    it is the tree whose containers are ``algorithm=MPIR_...``.  Read from the installed
    library so that the collectives not tuned keep exactly this version's defaults.
    """
    import mpi4py

    initialize = mpi4py.rc.initialize
    mpi4py.rc.initialize = False  # load the library without starting MPI
    try:
        from mpi4py import MPI
    finally:
        mpi4py.rc.initialize = initialize  # a later `ccbench run` in this process still starts MPI

    version = MPI.Get_library_version().strip().splitlines()[0]
    path = next((line.split()[-1] for line in open("/proc/self/maps")
                 if "/libmpi" in line and ".so" in line), None)
    if path is None or "MPICH" not in version:
        raise CCBenchError(f"mpich-json needs the MPICH library the run used, to keep its default selection "
                           f"for the collectives not tuned; mpi4py here uses {version!r}")
    data = Path(path).read_bytes()
    for m in re.finditer(rb'\{"collective=', data):
        end = data.index(b"\0", m.start())
        text = data[m.start():end]
        if b'"algorithm=MPIR_' in text:
            return json.loads(text), version
    raise CCBenchError(f"no MPIR selection tree found in {path}")

