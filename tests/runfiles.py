"""Finished runs on disk for the tests of the commands that read them (tune, verify)."""
from ccbench.store.results import RunWriter

#: A run's provenance when a test says nothing else: Open MPI 5.0.11 (the library with the most tuning formats).
OPEN_MPI = {"mpi_vendor": "Open MPI 5.0.11", "mpi_library": "Open MPI v5.0.11",
            "start_time": "2026-01-01T00:00:00", "skipped": [], "config": {}}


def write_run(path, rows, **meta):
    """A complete run of `rows` at `path` written as a sweep writes it; `meta` replaces or adds provenance
    (the rank count is the first row's unless `nranks` is given)."""
    path.mkdir(parents=True)
    w = RunWriter(path, {**OPEN_MPI, "nranks": rows[0].nranks, **meta})
    for r in rows:
        w.append(r)
    w.update(status="complete")
    w.close()
    return path
