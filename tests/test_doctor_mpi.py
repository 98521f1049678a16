"""The diagnosis under MPI: a rank slowed by CCBENCH_FAULT is named (as a rank: one host), a healthy run names nobody.

Run as ``mpiexec -n N python -m mpi4py -m pytest --only-mpi tests/test_doctor_mpi.py`` (N >= 3: with 2 ranks there
is one pair and nothing to compare it with).  Each test measures 3 launches (one after the other in the job,
pooled as ``--launches 3`` pools them: a suspect must be seen in most), one size, few samples: seconds.
"""

import pytest

from ccbench.analysis.doctor import SUSPECTS_FOUND, diagnose, exit_code

pytestmark = pytest.mark.mpi

QUICK = {"warmup": 1, "min_reps": 5, "max_reps": 20, "budget_s": 0.3}


def _diagnose(tmp_path_factory, monkeypatch, fault: str | None, launches: int = 3, directory: bool = False):
    """Measure a diagnosis `launches` times on every rank (in this job, one after the other) and pool the launches
    as ``--launches`` does; (its Diagnosis, its exit code) on rank 0, None elsewhere (`directory`: the last
    run's directory instead)."""
    from mpi4py import MPI

    from ccbench.measure.kind_run import resolve_kind_config, run_kind
    from ccbench.store.kinds import kind_named
    from ccbench.store.launches import pool_rows
    from ccbench.store.run import open_run

    comm = MPI.COMM_WORLD
    results = comm.bcast(str(tmp_path_factory.mktemp("doctor")) if comm.Get_rank() == 0 else None, root=0)
    if fault:
        monkeypatch.setenv("CCBENCH_FAULT", fault)
    else:
        monkeypatch.delenv("CCBENCH_FAULT", raising=False)
    kind = kind_named("doctor")
    # allow_load 1: decided whatever else runs on the machine (the load rule has its own test, on synthetic runs)
    cfg = resolve_kind_config(kind, {**QUICK, "results_dir": results}, {"sizes": "8", "allow_load": 1.0})
    runs = []
    for launch in range(1, launches + 1):
        code, path = run_kind(kind, cfg, thread=("auto", "test"), argv=["test"], launch=launch)
        assert code == 0
        runs.append(path)
    if comm.Get_rank() != 0 or directory:
        return runs[-1]
    opened = [open_run(p) for p in runs]
    rows = pool_rows([(i, r) for i, run in enumerate(opened, 1) for r in run.rows], kind.key_of)
    assert all(r.ok for r in rows) and all(r.n_launches == launches for r in rows)
    run = type(opened[0])(opened[0].path, opened[0].meta, rows, [], "doctor")
    return diagnose(rows, run.meta), exit_code(run)


@pytest.mark.mpi(min_size=3)
def test_a_slowed_rank_is_named_and_nobody_else(tmp_path_factory, monkeypatch):
    from mpi4py import MPI

    slow = MPI.COMM_WORLD.Get_size() - 1
    got = _diagnose(tmp_path_factory, monkeypatch, f"slow:{slow}:doctor:2ms")
    if got is not None:
        d, code = got
        host = d.hosts[0]
        assert [(s.kind, s.name) for s in d.suspects] == [("rank", f"{host}:{slow}")], d.suspects
        assert d.suspects[0].launches >= 2 and code == SUSPECTS_FOUND
        assert any("injected" in n for n in d.notes)


@pytest.mark.mpi(min_size=3)
def test_a_healthy_run_names_nobody(tmp_path_factory, monkeypatch):
    got = _diagnose(tmp_path_factory, monkeypatch, None)
    if got is not None:
        d, code = got
        assert d.suspects == [] and code == 0


@pytest.mark.mpi(min_size=3)
def test_a_slowed_link_slows_that_pair_only(tmp_path_factory, monkeypatch):
    """``slow:1:doctor/2:2ms``: every exchange of ranks 1 and 2 sleeps 2 ms first, so each of that pair's samples
    (half a round trip) is at least 1 ms; no other pair, and no collective, is touched."""
    from mpi4py import MPI

    from ccbench.store.run import open_run

    got = _diagnose(tmp_path_factory, monkeypatch, "slow:1:doctor/2:2ms", launches=1, directory=True)
    if MPI.COMM_WORLD.Get_rank() == 0:
        rows = open_run(got).rows
        slowed = [(r.test, r.ranks) for r in rows if "injected_slow" in r.flags]
        assert slowed == [("pair", "1,2")]
        assert next(r for r in rows if r.ranks == "1,2").min_s >= 1e-3
