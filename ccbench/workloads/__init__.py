"""Training workloads built from the registry's collectives: DDP, ZeRO/FSDP, MoE, overlap, stragglers.

The domain, pure: `models` holds the parameter size lists (shipped and user-given),
`schedule` the schedules (DDP buckets, ZeRO shards, MoE dispatch), the straggler measure and
the step's price from the algorithms' cost models, `overlap` the overlap figures of OSU and
IMB-NBC.  They are run under MPI by
``ccbench.measure.workload``, stored as ``ccbench.store.workload_rows.WorkloadRow``, predicted at
scale by ``ccbench.analysis.workload_predict`` and shown by ``ccbench.present``.

May import: core, store, algorithms.  Importing this package imports no MPI.
"""

from ccbench.store.workload_rows import WorkloadRow
from ccbench.workloads.models import Model, Tensor, load_model
from ccbench.workloads.overlap import imb_overlap_pct, osu_overlap_pct
from ccbench.workloads.schedule import (
    Call,
    Schedule,
    ddp_buckets,
    ddp_schedule,
    moe_schedule,
    predict_step_s,
    straggler_slowdown,
    zero_schedule,
)

__all__ = ["Call", "Model", "Schedule", "Tensor", "WorkloadRow", "ddp_buckets", "ddp_schedule", "imb_overlap_pct",
           "load_model", "moe_schedule", "osu_overlap_pct", "predict_step_s", "straggler_slowdown", "zero_schedule"]
