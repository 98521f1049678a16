"""ccbench from Python (notebooks, scripts): open stored runs, fit them, predict at scale, compare runs.

What the commands ``show``, ``fit``, ``predict``, ``compare`` and ``report`` compute, as data: the
same functions, no printing, no MPI (``ccbench.algorithms`` runs an algorithm in your own mpi4py
program).  Every name here is also an attribute of the ``ccbench`` package, loaded on first use, so
that ``import ccbench`` stays light.  Expected failures (a run that does not exist, a bad size)
raise `UsageError` (a `CCBenchError`) with the one line the command would print.
"""

from collections.abc import Iterable

from ccbench.analysis.compare import Comparison
from ccbench.analysis.fastest import fastest_per_size, fastest_per_variant, group_rows
from ccbench.analysis.fit import NetworkParams
from ccbench.analysis.predict import TOLERANCE, TwoLevelParams
from ccbench.analysis.runs import PredictionGrid, RunFit, fit_run, params_from_run, predict_table
from ccbench.core.errors import CCBenchError, UsageError
from ccbench.core.units import parse_inverse_rate, parse_ranks, parse_sizes, parse_time
from ccbench.store.run import WORKLOAD, Run
from ccbench.store.run import open_run as _open_run
from ccbench.workflow.compare import compare as compare_and_open

__all__ = ["CCBenchError", "Comparison", "NetworkParams", "Run", "TwoLevelParams", "UsageError", "compare",
           "fastest", "fit", "network_params", "open_run", "predict"]


def open_run(run, results_dir="results") -> Run:
    """A stored run (a path, a name under `results_dir`, or ``"latest"``): ``meta`` (run.json), ``rows``, ``kind``.

    A `Run` stands for itself: it is returned as it is, not read again.
    """
    return run if isinstance(run, Run) else _open_run(run, results_dir)


def fit(run, results_dir="results", *, write: bool = False, out=None, tolerance: float = TOLERANCE) -> RunFit:
    """What ``ccbench fit`` computes for a run, as a `RunFit` (``to_dict()`` is ``fits.json``, ``ccbench.fits/1``).

    Its fields: ``network`` (``pingpong`` and ``joint`` alpha-beta-gamma with their 95% bootstrap
    intervals, their ``comparison``, ``step_overhead``, ``reduction_paths``), ``curves`` (every
    curve's segmented alpha + beta n fit), ``model_checks`` (each modelled case against its
    prediction; ``off`` beyond `tolerance`), ``who_wins``.  With `write`, ``fits.json`` and
    ``fits.csv`` are also written, as the command does: into `out`, by default the derived tree
    beside the results tree (never over earlier ones; the run itself is never written).
    """
    if write:
        from ccbench.workflow.fit import fit as fit_and_write

        return fit_and_write(run, results_dir, out, tolerance=tolerance).fit
    return fit_run(open_run(run, results_dir), tolerance=tolerance)


def _seconds(value, what: str, parse) -> float:
    """A number (seconds, seconds per byte) or text with a unit, checked as the command line's are."""
    return parse(str(value), what)


def network_params(run=None, *, alpha=None, beta=None, gamma=None, results_dir="results") -> NetworkParams:
    """The alpha-beta-gamma parameters to predict with: a run's, or the values given.

    From `run`: its ping-pong alpha and beta and the gamma of its local reduction benchmark (the
    "ping-pong" column of ``ccbench fit``).  Otherwise `alpha` (seconds, or text with a unit:
    ``"2us"``) and `beta` (seconds per byte, or a rate: ``"10GB/s"``), optionally `gamma` (as
    `beta`), as ``ccbench predict --alpha --beta --gamma`` takes them.
    """
    if run is not None:
        if alpha is not None or beta is not None or gamma is not None:
            raise UsageError("give either a run or alpha/beta/gamma, not both")
        return params_from_run(open_run(run, results_dir))
    if alpha is None or beta is None:
        raise UsageError("network parameters need a run, or both alpha and beta")
    return NetworkParams(_seconds(alpha, "alpha", parse_time), _seconds(beta, "beta", parse_inverse_rate),
                         None if gamma is None else _seconds(gamma, "gamma", parse_inverse_rate))


def _ints(value, parse) -> list[int]:
    if isinstance(value, str):
        return parse(value)
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def predict(params, ranks, sizes="8:64M:8", collectives=None, *, ranks_per_node: int | None = None,
            two_level: TwoLevelParams | None = None, counts: str | None = None) -> list[PredictionGrid]:
    """Every modelled algorithm's predicted time per size, and the winner, as ``ccbench predict`` prints them.

    `params`: a `NetworkParams` (`network_params`) or a run to take them from.  `ranks`: an int, a
    list, or text (``"1024,4096"``, ``"64:65536:4"``); `sizes`: a list of bytes or text (``"8:64M"``,
    ``"8,4K,1M"``); `collectives`: a name, a list, or None for every modelled one but the v-collectives;
    `counts`: the v-collectives' count distribution (``"zipf:1.2"``; default uniform).  One `PredictionGrid`
    per (collective, nranks): ``sizes``, ``times_s`` {algorithm: seconds per size}, ``winners`` and ``counts``.
    `ranks_per_node` places the ranks on nodes for the hierarchical allreduce; `two_level` adds
    the two-level allreduce (``two-level/ring``, ``two-level/rabenseifner``).
    """
    if not isinstance(params, NetworkParams):
        params = network_params(params)
    if isinstance(collectives, str):
        collectives = [c.strip() for c in collectives.split(",") if c.strip()]
    return predict_table(params, _ints(ranks, parse_ranks), _ints(sizes, parse_sizes), collectives,
                         two_level=two_level, ranks_per_node=ranks_per_node, counts=counts)


def compare(runs: Iterable, results_dir="results", *, level: float = 0.05, min_effect: float = 0.0,
            launch_cv: float | None = None) -> Comparison:
    """What ``ccbench compare`` decides: every run against the first, case by case, at the launch level.

    ``.pairs`` holds one entry per matched case and run (medians, ``ratio`` run / first with its
    interval, ``p_value``, ``p_adjusted``, ``verdict``: faster, slower, noise or undetermined),
    ``.summary()`` the geometric means and verdict counts, ``.warnings`` the provenance that differs.
    `min_effect` and `launch_cv` are fractions (0.05, 0.2), as ``--min-effect`` and ``--launch-cv``.
    """
    return compare_and_open(runs, results_dir, level=level, min_effect=min_effect, launch_cv=launch_cv)


def fastest(run, results_dir="results") -> list:
    """The fastest algorithm against its runner-up, decided at the launch level, as ``ccbench report`` lists it.

    For a sweep, one `SizeFastest` per size of every collective and variant (``collective``, ``nranks``,
    ``dtype``, ``op``, ``in_place``, ``root``, ``nbytes``, then ``fastest``, ``median_s``,
    ``runner_up``, ``runner_up_s``, ``margin``, ``p_value``, ``verdict``, ...); for a training-workload
    run, a `VariantFastest` per variant and one over all (``what``).  ``to_dict()`` gives each as a dict.
    """
    r = open_run(run, results_dir)
    if r.kind == WORKLOAD:
        return fastest_per_variant(r.rows)
    return [entry for g in group_rows(r.rows) for entry in fastest_per_size(g)]
