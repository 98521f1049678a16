"""Training workloads built from the registry's collectives: DDP, ZeRO/FSDP, MoE, overlap, stragglers.

`models` holds the parameter size lists (shipped and user-given), `schedule` the pure
schedules and measures, `engine` and `run` execute them under MPI, `record` is the row
stored per step and per call, `predict` prices a step at any scale, `views` shows a run.
Importing this package imports no MPI.
"""

from ccbench.store.workload_rows import WorkloadRow
from ccbench.workloads.models import Model, Tensor, load_model
from ccbench.workloads.schedule import (
    Call,
    Schedule,
    ddp_buckets,
    ddp_schedule,
    moe_schedule,
    overlap_pct,
    predict_step_s,
    straggler_slowdown,
    zero_schedule,
)

__all__ = ["Call", "Model", "Schedule", "Tensor", "WorkloadRow", "ddp_buckets", "ddp_schedule", "load_model",
           "moe_schedule", "overlap_pct", "predict_step_s", "straggler_slowdown", "zero_schedule"]
