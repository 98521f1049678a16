"""The node's memory copy bandwidth (ccbench.measure.membw): buffer sizes (plain) and the measurement (MPI tier).

Run the MPI tests as ``mpiexec -n N python -m mpi4py -m pytest --with-mpi --only-mpi tests/test_membw.py``.
"""

import pytest

from ccbench.analysis.limits import memory_limit
from ccbench.measure.membw import buffer_bytes


def test_buffers_are_beyond_the_last_level_cache_and_bounded():
    mib = 1 << 20
    # one core: each buffer 2 x the cache (the pair 4 x, STREAM's footprint), between 8 and 64 MiB
    assert buffer_bytes(32 * mib, 1) == (64 * mib, 64 * mib)
    assert buffer_bytes(1 * mib, 1) == (8 * mib, 4 * mib)
    assert buffer_bytes(256 * mib, 1)[0] == 64 * mib
    # all ranks: the node's pairs together 4 x the cache, at least 4 MiB per buffer, at most the one-core size
    assert buffer_bytes(32 * mib, 2) == (64 * mib, 32 * mib)
    assert buffer_bytes(32 * mib, 4) == (64 * mib, 16 * mib)
    assert buffer_bytes(32 * mib, 64) == (64 * mib, 4 * mib)
    one, per_rank = buffer_bytes(10_000_001, 3)
    assert one % 8 == 0 and per_rank % 8 == 0  # whole float64 elements


def _sane(rec: dict, nranks: int, reps: int) -> None:
    assert "STREAM" in rec["method"] and rec["repetitions"] == reps
    one = rec["one_core"]
    assert one["counted_bytes"] == 2 * one["nbytes"] and len(one["seconds"]) == reps
    assert sum(n["ranks"] for n in rec["all_ranks"]) == nranks
    for n in rec["all_ranks"]:
        assert n["counted_bytes"] == 2 * n["nbytes"] and len(n["seconds"]) == reps and min(n["seconds"]) > 0
    lim = memory_limit(rec)
    # between a slow shared VM and the fastest memory there is (orders of magnitude, not a benchmark)
    assert 0.1 < lim.one_core_gbs < 2000
    assert all(0.1 < n.aggregate_gbs < 20000 for n in lim.nodes)
    assert lim.copy_gbs == pytest.approx(min(n.per_rank_gbs for n in lim.nodes) / 2)


@pytest.mark.mpi
def test_memory_bandwidth_one_core_and_all_ranks_the_same_on_every_rank():
    from mpi4py import MPI

    from ccbench.measure.membw import memory_bandwidth

    comm = MPI.COMM_WORLD
    rec = memory_bandwidth(comm, reps=2, llc_bytes=1 << 20)
    _sane(rec, comm.Get_size(), 2)
    assert rec["one_core"]["nbytes"] == 8 << 20  # the 8 MiB floor for a 1 MiB cache
    assert comm.allgather(rec) == [rec] * comm.Get_size()


@pytest.mark.mpi
def test_a_sweep_stores_the_memory_bandwidth_record(tmp_path):
    from mpi4py import MPI

    from ccbench.measure.config import load_config
    from ccbench.measure.sweep import run_sweep
    from ccbench.store.run import open_run

    comm = MPI.COMM_WORLD
    root_dir = comm.bcast(str(tmp_path), root=0)  # rank 0 owns the run directory
    cfg = load_config(None, {"collectives": "allreduce", "algorithms": "native", "sizes": "8:64:2",
                             "min_reps": 3, "max_reps": 5, "budget_s": 0.2, "results_dir": root_dir})
    code, path = run_sweep(cfg, thread=("multiple", "test"), argv=["test"], console=None)
    assert code == 0
    if comm.Get_rank() == 0:
        meta = open_run(path).meta
        _sane(meta["memory_bandwidth"], comm.Get_size(), meta["memory_bandwidth"]["repetitions"])
