"""Pure collective schedules of training steps: DDP buckets, ZeRO/FSDP shards, MoE all-to-all.

A schedule is the ordered list of collective calls one training step makes, built from a
model's parameter sizes.  Nothing here imports MPI: the engine (`ccbench.measure.workload_engine`)
runs a schedule with any registered algorithm, and `predict_step_s` prices it with the
registry's closed-form costs.

Sizes follow nccl-tests (`ccbench.core.collectives`): a call's ``count`` is elements per buffer
for allreduce and elements per block for the blocked collectives (reduce-scatter,
allgather, all-to-all), so a call moves ``Collective.nbytes_for(count, itemsize, P)`` bytes.  A routed MoE
dispatch is an alltoallv whose blocks follow the gate's routing (``Call.counts``, `ccbench.core.counts`); its
``count`` is then the mean block.
"""

import math
from dataclasses import dataclass, field

from ccbench.algorithms.registry import cost_at
from ccbench.core.collectives import COLLECTIVES
from ccbench.core.counts import MAX_LOGITS, parse_counts, weights
from ccbench.core.errors import UsageError
from ccbench.workloads.models import Model

__all__ = ["DDP_FIRST_BUCKET_MB", "DDP_BUCKET_MB", "DISPATCHES", "Call", "Schedule", "ddp_buckets", "ddp_schedule",
           "moe_block_tokens", "moe_schedule", "predict_step_s", "straggler_slowdown",
           "zero_schedule"]

MIB = 1 << 20
#: torch.nn.parallel.DistributedDataParallel's ``bucket_cap_mb`` default (MiB).
DDP_BUCKET_MB = 25.0
#: ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB: the first bucket's cap.
DDP_FIRST_BUCKET_MB = 1.0


@dataclass(frozen=True)
class Call:
    """One collective call of a step."""

    collective: str          # allreduce | reduce_scatter | allgather | alltoall | alltoallv
    count: int               # elements per buffer (allreduce) or per block (blocked collectives; v: the mean)
    label: str               # what it is: "bucket 3", "h.5 backward reduce-scatter", ...
    tensors: tuple[int, ...] = ()  # indices of the model tensors it carries
    payload: int = 0         # elements of model data it carries (before FSDP's padding)
    counts: str = "uniform"  # a v-collective's count distribution (`ccbench.core.counts`)

    def nbytes(self, itemsize: int, nranks: int) -> int:
        """Bytes as nccl-tests defines them for this collective (`Collective.nbytes_for`)."""
        return COLLECTIVES[self.collective].nbytes_for(self.count, itemsize, nranks)


@dataclass(frozen=True)
class Schedule:
    """The collective calls of one step, on communicators of `group_ranks` ranks (0 = all ranks)."""

    workload: str
    variant: str
    calls: tuple[Call, ...]
    group_ranks: int = 0
    notes: tuple[str, ...] = field(default=())

    def collectives(self) -> list[str]:
        """The collectives used, in first-use order."""
        return list(dict.fromkeys(c.collective for c in self.calls))

    def nbytes(self, itemsize: int, nranks: int) -> int:
        """Sum of the calls' sizes (nccl-tests definition) on communicators of `nranks` ranks."""
        return sum(c.nbytes(itemsize, nranks) for c in self.calls)


# -- DDP -----------------------------------------------------------------------------


def ddp_buckets(nbytes: list[int], cap_bytes: int, first_cap_bytes: int | None = None) -> list[list[int]]:
    """Group tensors into gradient buckets as PyTorch DDP does, in reverse parameter order.

    `nbytes` are the tensors' sizes in parameter (registration) order.  PyTorch's
    ``compute_bucket_assignment_by_size`` (torch/csrc/distributed/c10d/reducer.cpp) walks
    the tensors in the order their gradients become ready -- the reverse of registration
    order, after DDP's first-iteration bucket rebuild -- appends each to the open bucket
    and closes the bucket as soon as its size reaches the current limit; the limits are
    ``[first_bucket_bytes, bucket_cap]`` (the first bucket's cap is
    ``_DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB, later ones ``bucket_cap_mb``, default 25 MiB,
    per the DistributedDataParallel documentation), so a bucket may exceed its limit by
    its last tensor.  Returns lists of tensor indices, in reduction order.
    """
    if cap_bytes <= 0 or (first_cap_bytes is not None and first_cap_bytes <= 0):
        raise ValueError("bucket caps must be positive")
    limits = [first_cap_bytes, cap_bytes] if first_cap_bytes is not None else [cap_bytes]
    li = 0
    out: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in reversed(range(len(nbytes))):
        cur.append(i)
        size += nbytes[i]
        if size >= limits[li]:
            out.append(cur)
            cur, size = [], 0
            li = min(li + 1, len(limits) - 1)
    if cur:
        out.append(cur)
    return out


def ddp_schedule(model: Model, itemsize: int, mode: str = "bucketed", bucket_mb: float = DDP_BUCKET_MB,
                 first_bucket_mb: float | None = DDP_FIRST_BUCKET_MB) -> Schedule:
    """DDP's gradient allreduces of one step: per bucket (``bucketed``) or per tensor (``per_tensor``)."""
    if mode == "per_tensor":
        calls = tuple(Call("allreduce", t.numel, t.name, (i,), t.numel)
                      for i, t in reversed(list(enumerate(model.tensors))))
        return Schedule("ddp", "per_tensor", calls)
    if mode != "bucketed":
        raise UsageError(f"unknown DDP mode {mode!r}; choose from bucketed, per_tensor")
    sizes = [t.numel * itemsize for t in model.tensors]
    first = None if first_bucket_mb is None else max(1, round(first_bucket_mb * MIB))
    groups = ddp_buckets(sizes, max(1, round(bucket_mb * MIB)), first)
    calls = []
    for b, idx in enumerate(groups):
        n = sum(model.tensors[i].numel for i in idx)
        calls.append(Call("allreduce", n, f"bucket {b}", tuple(idx), n))
    variant = f"bucketed {bucket_mb:g}" + (f"/{first_bucket_mb:g}" if first_bucket_mb else "") + " MiB"
    return Schedule("ddp", variant, tuple(calls))


# -- ZeRO / FSDP ---------------------------------------------------------------------


def _shard(numel: int, nranks: int) -> int:
    """Elements per rank of a flat buffer padded to a multiple of P (FSDP's FlatParameter padding)."""
    return -(-numel // nranks)


def zero_schedule(model: Model, nranks: int, variant: str) -> Schedule:
    """One step of sharded data parallelism, or DDP's allreduce of the same padded buffers.

    * ``zero2`` -- the whole model is one flat buffer padded to a multiple of P (as
      PyTorch FSDP pads its FlatParameter): the gradients are reduce-scattered and the
      updated parameter shards all-gathered once per step (ZeRO stage 2 / FSDP
      SHARD_GRAD_OP with one unit; Rajbhandari et al., "ZeRO", SC 2020).
    * ``zero3`` -- one flat buffer per layer unit (FSDP FULL_SHARD with a per-block
      auto-wrap policy): all-gather before each unit's forward, again before its backward
      (parameters are freed after use), and a reduce-scatter of its gradients, units
      visited forward then backward (PyTorch FSDP documentation, "FullyShardedDataParallel").
      Every unit is treated alike: FSDP's root unit, which it keeps gathered from forward
      to backward, would skip its second all-gather.
    * ``ddp_flat`` / ``ddp_layer`` -- one allreduce of the same padded buffer(s): the DDP
      baseline that moves the same data.
    """
    if nranks < 1:
        raise ValueError("nranks must be >= 1")
    if variant in ("zero2", "ddp_flat"):
        n = model.numel
        s = _shard(n, nranks)
        everything = tuple(range(len(model.tensors)))
        if variant == "ddp_flat":
            return Schedule("zero", variant, (Call("allreduce", s * nranks, "model", everything, n),))
        return Schedule("zero", variant, (Call("reduce_scatter", s, "model gradients", everything, n),
                                          Call("allgather", s, "model parameters", everything, n)))
    if variant not in ("zero3", "ddp_layer"):
        raise UsageError(f"unknown ZeRO variant {variant!r}; choose from zero2, zero3, ddp_flat, ddp_layer")
    units = model.layers()
    calls: list[Call] = []
    if variant == "ddp_layer":
        for name, idx in reversed(units):
            n = sum(model.tensors[i].numel for i in idx)
            calls.append(Call("allreduce", _shard(n, nranks) * nranks, name, tuple(idx), n))
        return Schedule("zero", variant, tuple(calls))
    for name, idx in units:
        n = sum(model.tensors[i].numel for i in idx)
        calls.append(Call("allgather", _shard(n, nranks), f"{name} forward", tuple(idx), n))
    for name, idx in reversed(units):
        n = sum(model.tensors[i].numel for i in idx)
        calls.append(Call("allgather", _shard(n, nranks), f"{name} backward", tuple(idx), n))
        calls.append(Call("reduce_scatter", _shard(n, nranks), f"{name} gradients", tuple(idx), n))
    return Schedule("zero", variant, tuple(calls))


# -- mixture of experts --------------------------------------------------------------


def moe_block_tokens(tokens: int, experts_per_rank: int, ep: int, top_k: int = 1,
                     capacity_factor: float = 1.0) -> int:
    """Tokens a rank sends to each rank of its expert-parallel group (one all-to-all block).

    Each of a rank's `tokens` goes to `top_k` of the E x EP experts; every expert takes
    at most its capacity ``ceil(capacity_factor x tokens x top_k / (E x EP))`` tokens from
    each rank and buffers are padded to it (GShard, Lepikhin et al. 2020; Switch
    Transformer, Fedus et al. 2021), so the block for one destination rank holds E x
    capacity tokens.
    """
    if min(tokens, experts_per_rank, ep, top_k) < 1 or capacity_factor <= 0:
        raise ValueError("tokens, experts per rank, EP degree and top-k must be >= 1; capacity factor > 0")
    cap = math.ceil(capacity_factor * tokens * top_k / (experts_per_rank * ep))
    return experts_per_rank * cap


#: How a MoE layer moves its tokens: padded (all-to-alls of capacity-padded blocks) or routed (all-to-allvs of the
#: tokens the gate routes)
DISPATCHES = ("padded", "routed")


def moe_schedule(tokens: int, hidden: int, experts_per_rank: int, ep: int, top_k: int = 1,
                 capacity_factor: float = 1.0, dispatch: str = "padded") -> Schedule:
    """One MoE layer's dispatch and combine on an expert-parallel group of `ep` ranks.

    ``padded`` (variant ``ep=N``): all-to-alls of blocks padded to the experts' capacity, as GShard and
    DeepSpeed-MoE send them (`moe_block_tokens`).  ``routed`` (``ep=N routed``): all-to-allvs of the tokens the
    gate routes -- the ``moe`` count distribution of `ccbench.core.counts` with E = experts_per_rank x ep,
    top_k, capacity_factor and `tokens` per rank, tokens over capacity dropped, none padded -- as dispatchers
    that exchange per-rank split sizes do (Megatron-Core's all-to-all token dispatcher); the combine sends them
    back (the distribution reversed, ``~moe``).  Each call's mean block is the routed tokens x hidden over ep^2,
    rounded up.  Where drawing the routing would take more than ``MAX_LOGITS`` gate logits, it is drawn for
    fewer tokens per rank (its shape; the bytes are still the routed share of `tokens`).
    """
    if dispatch == "padded":
        block = moe_block_tokens(tokens, experts_per_rank, ep, top_k, capacity_factor) * hidden
        calls = (Call("alltoall", block, "dispatch", (), tokens * top_k * hidden),
                 Call("alltoall", block, "combine", (), tokens * top_k * hidden))
        return Schedule("moe", f"ep={ep}", calls, group_ranks=ep)
    if dispatch != "routed":
        raise UsageError(f"unknown MoE dispatch {dispatch!r}; choose from {', '.join(DISPATCHES)}")
    moe_block_tokens(tokens, experts_per_rank, ep, top_k, capacity_factor)  # the same checks
    experts = experts_per_rank * ep
    drawn = max(1, min(tokens, MAX_LOGITS // (ep * experts)))
    spec = parse_counts(f"moe:{experts},{top_k},{capacity_factor:g},{drawn}").text
    routed = int(weights(parse_counts(spec), ep, matrix=True).sum()) * tokens / drawn  # tokens sent, all ranks
    mean = math.ceil(routed * hidden / (ep * ep))
    payload = round(routed / ep) * hidden
    calls = (Call("alltoallv", mean, "dispatch", (), payload, spec),
             Call("alltoallv", mean, "combine", (), payload, "~" + spec))
    return Schedule("moe", f"ep={ep} routed", calls, group_ranks=ep)


# -- measures and predictions --------------------------------------------------------


def straggler_slowdown(t_delayed_s: float, t_base_s: float, delay_s: float) -> float:
    """How much of one rank's delay the collective passes on: (t with delay - t without) / delay.

    ~1: everyone waits for the late rank (a ring); ~0: the others finish regardless.
    """
    if delay_s <= 0:
        raise ValueError("the delay must be positive")
    return (t_delayed_s - t_base_s) / delay_s


def predict_step_s(schedule: Schedule, algorithms: dict, nranks: int, itemsize: int, params) -> float:
    """Predicted communication time of one step: the sum of each call's modelled time.

    `algorithms` maps each collective of the schedule to an Algorithm with a cost model;
    calls run on communicators of ``schedule.group_ranks`` ranks (all `nranks` when 0).
    """
    P = schedule.group_ranks or nranks
    gamma = float(getattr(params, "gamma_s_per_byte", None) or 0.0)
    total = 0.0
    for c in schedule.calls:  # Cost(P, n) . (alpha, beta, gamma), as ccbench.analysis.predict.predict
        cost = cost_at(algorithms[c.collective].cost, P, c.nbytes(itemsize, P), counts=c.counts, itemsize=itemsize)
        total += cost.time_s(float(params.alpha_s), float(params.beta_s_per_byte), gamma)
    return total
