"""Entering MPI: the one place a command starts MPI, at the thread level it chose."""

__all__ = ["enter_mpi"]

_LEVELS = {"single": "THREAD_SINGLE", "funneled": "THREAD_FUNNELED", "serialized": "THREAD_SERIALIZED",
           "multiple": "THREAD_MULTIPLE"}


def enter_mpi(requested: str) -> tuple:
    """(the MPI module, (thread level, why)) with MPI initialised at the level chosen for `requested`.

    `requested` is a configuration's thread level (``auto`` picks by oversubscription,
    ``ccbench.measure.provenance.choose_thread_level``).  mpi4py initialises MPI when ``MPI`` is
    first imported, at ``mpi4py.rc.thread_level``; when something imported it earlier without
    initialising (``mpi4py.rc.initialize = False``, as reading the library's version does), MPI is
    initialised here, at the same level, and ``mpi4py.rc`` is left as the caller found it.
    """
    import mpi4py

    from ccbench.measure.provenance import choose_thread_level

    thread = choose_thread_level(requested)
    mpi4py.rc.thread_level = thread[0]
    from mpi4py import MPI

    if not MPI.Is_initialized():
        MPI.Init_thread(getattr(MPI, _LEVELS[thread[0]]))
    return MPI, thread
