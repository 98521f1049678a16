"""The result record of a workload run: one row per measured step (part = -1) or per part of it."""

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from ccbench.store.results import StoredRow, check_launches

__all__ = ["KIND", "WORKLOADS", "WORKLOAD_COLUMNS", "WorkloadRow"]

KIND = "workload"  # run.json "kind" of a workload run
WORKLOADS = ("ddp", "zero", "moe", "overlap", "straggler")


@dataclass(frozen=True)
class WorkloadRow(StoredRow):
    """One measured step of a workload, or one part of it (a bucket, a layer's collective).

    Times are seconds, each sample the maximum over ranks (docs/measuring.md, "How it times").
    ``part`` is -1 for the whole step and the call's index within the step otherwise;
    a part's samples are its own call's times within the timed steps.  Overlap rows
    carry three medians (``comm_s`` = non-blocking call alone, ``compute_s`` = the compute
    alone, ``total_s``), the times each definition takes (``osu_*``, ``imb_*``) and both
    figures (``overlap_pct``: OSU's, ``overlap_imb_pct``: IMB-NBC's); straggler rows ``delay_s``, ``delayed_rank``,
    ``baseline_s`` (the same call undelayed) and ``slowdown``.
    """

    KIND: ClassVar[str] = KIND

    workload: str             # ddp | zero | moe | overlap | straggler
    variant: str              # bucketed 25 MiB, per_tensor, zero3, ep=4, ...
    model: str
    algorithm: str            # collective=algorithm pairs, comma separated
    nranks: int
    group_ranks: int          # ranks of the communicator the calls run on (EP degree for MoE)
    dtype: str
    part: int                 # -1: the whole step; else the index of the call within the step
    label: str                # what the part is: "step", "bucket 3", "h.5 gradients", a size
    collective: str           # the part's collective, or "step"
    ncalls: int
    ntensors: int
    payload_elems: int        # model elements carried (before padding)
    nbytes: int               # bytes of the calls' buffers (nccl-tests definitions), summed
    samples: int
    median_s: float
    min_s: float
    mean_s: float
    ci_low_s: float
    ci_high_s: float
    comm_s: float | None = None       # overlap: the non-blocking collective alone (OSU t_pure)
    compute_s: float | None = None    # overlap: the compute kernel alone
    total_s: float | None = None      # overlap: start + compute + wait
    overlap_pct: float | None = None  # overlap: OSU's figure (ccbench.workloads.overlap), from the osu_* times
    # overlap, what each definition takes (rows stored before them have None): OSU's four times, each rank's mean
    # averaged over the ranks; IMB-NBC's three, those of the rank with the largest t_ovrl, and its figure
    osu_comm_s: float | None = None
    osu_overall_s: float | None = None
    osu_cpu_s: float | None = None    # the compute inside start + compute + wait, test calls included
    osu_test_s: float | None = None   # the test calls inside the compute
    imb_pure_s: float | None = None
    imb_ovrl_s: float | None = None
    imb_cpu_s: float | None = None
    overlap_imb_pct: float | None = None
    delay_s: float | None = None
    delayed_rank: int | None = None
    baseline_s: float | None = None   # straggler: median without the delay
    slowdown: float | None = None     # straggler: (median - baseline) / delay
    bytes_sent_total: int | None = None  # counted, all ranks (hand-written algorithms only)
    nwrong: int = 0
    stop_reason: str = ""
    flags: tuple[str, ...] = ()
    samples_s: tuple[float, ...] = field(default=(), repr=False)
    launches: tuple[int, ...] = ()        # launch numbers and their sample counts (StoredRow)
    launch_samples: tuple[int, ...] = ()

    def __post_init__(self):
        if self.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {self.workload!r}")
        if self.nranks < 1 or self.group_ranks < 1 or self.part < -1:
            raise ValueError("nranks and group_ranks must be >= 1 and part >= -1")
        for name in ("ncalls", "ntensors", "payload_elems", "nbytes", "nwrong", "samples"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("median_s", "min_s", "mean_s", "ci_low_s", "ci_high_s", "comm_s", "compute_s", "total_s",
                     "delay_s", "baseline_s", "osu_comm_s", "osu_overall_s", "osu_cpu_s", "osu_test_s", "imb_pure_s",
                     "imb_ovrl_s", "imb_cpu_s"):
            v = getattr(self, name)
            if v is not None and not v >= 0:
                raise ValueError(f"{name} must be a time >= 0, got {v}")
        for name in ("overlap_pct", "overlap_imb_pct"):
            v = getattr(self, name)
            if v is not None and not 0 <= v <= 100:
                raise ValueError(f"{name} {v} is outside 0..100")
        if self.samples != len(self.samples_s):
            raise ValueError("samples does not match the raw samples kept")
        check_launches(self)


WORKLOAD_COLUMNS = [f.name for f in dataclasses.fields(WorkloadRow) if f.name != "samples_s"]
