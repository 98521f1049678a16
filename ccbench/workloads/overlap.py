"""Overlap of a non-blocking collective with computation, as OSU and as IMB-NBC define it (pure: no MPI).

Both benchmarks time three things per size: the collective alone (start + wait), and start +
compute + wait, inside which they also time the compute (and OSU the test calls made inside it).
They differ in how they reduce those times to a percentage, and over which ranks.

OSU Micro-Benchmarks 7.x (``c/util/osu_util.c``, ``calculate_and_print_stats`` and
``print_stats_nbc``; the loop of ``c/mpi/collective/non_blocking/osu_iallreduce.c``): each rank
averages its iterations; ``calculate_and_print_stats`` averages those means over the ranks
(MPI_Reduce with MPI_SUM, divided by numprocs); then

    overlap = max(0, 100 - ((overall - (cpu - test)) / comm) * 100)

with overall the time of start + compute + wait, cpu the compute inside it (test calls
included), test the time spent in those test calls, comm the collective alone.

IMB-NBC (Intel MPI Benchmarks User Guide, "Measuring Communication and Computation Overlap"):
the timings of the process with the largest t_ovrl, and

    overlap = 100 * max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, t_CPU)))

with t_pure the collective alone, t_CPU the compute run concurrently with it, t_ovrl start +
compute + wait.  Perfect overlap: t_ovrl = max(t_pure, t_CPU); none: t_ovrl = t_pure + t_CPU.
"""

from typing import NamedTuple

import numpy as np

__all__ = ["RankTimes", "imb_overlap_pct", "imb_times", "osu_overlap_pct", "osu_times"]


class RankTimes(NamedTuple):
    """One rank's mean times of an overlap measurement, in seconds."""

    comm_s: float     # the collective alone (start + wait): OSU's comm, IMB's t_pure
    overall_s: float  # start + compute + wait: OSU's overall, IMB's t_ovrl
    cpu_s: float      # the compute inside it, test calls included: OSU's cpu, IMB's t_CPU
    test_s: float     # the test calls inside the compute: OSU's test (0 without test calls)


def osu_overlap_pct(overall_s: float, cpu_s: float, test_s: float, comm_s: float) -> float:
    """OSU 7.x's overlap in percent: max(0, 100 - (overall - (cpu - test)) / comm * 100) (``print_stats_nbc``).

    No upper cap, as in OSU; times measured together (cpu inside overall) keep it at most 100.
    """
    if not comm_s > 0:
        raise ValueError("the pure communication time must be positive")
    return max(0.0, 100.0 - ((overall_s - (cpu_s - test_s)) / comm_s) * 100.0)


def imb_overlap_pct(t_ovrl_s: float, t_pure_s: float, t_cpu_s: float) -> float:
    """IMB-NBC's overlap in percent: 100 max(0, min(1, (t_pure + t_CPU - t_ovrl) / min(t_pure, t_CPU)))."""
    if not min(t_pure_s, t_cpu_s) > 0:
        raise ValueError("the pure communication and compute times must be positive")
    return 100.0 * max(0.0, min(1.0, (t_pure_s + t_cpu_s - t_ovrl_s) / min(t_pure_s, t_cpu_s)))


def osu_times(ranks: list[RankTimes]) -> RankTimes:
    """The times OSU's formula takes: each rank's means averaged over the ranks (``calculate_and_print_stats``)."""
    return RankTimes(*(float(v) for v in np.mean(np.asarray(ranks, dtype=np.float64), axis=0)))


def imb_times(ranks: list[RankTimes]) -> RankTimes:
    """The times IMB's formula takes: those of the rank with the largest start + compute + wait (t_ovrl)."""
    return max(ranks, key=lambda r: r.overall_s)
