"""Workload configuration: TOML files plus flags, validated as strictly as sweep configs.

Pure: no MPI.  Each workload accepts its own keys (`KEYS`); any other key is refused by
name, with the closest valid one suggested, as `ccbench.measure.config` does for sweeps.
"""

import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path

from ccbench.core.dtypes import DTYPES
from ccbench.core.errors import UsageError
from ccbench.core.units import parse_sizes
from ccbench.measure.config import (
    RUN_KEYS,
    _as_list,
    _check_choices,
    _number,
    read_toml,
    resolve_config_path,
    split_launches,
    split_rounds,
)
from ccbench.store.workload_rows import WORKLOADS
from ccbench.workloads.schedule import DDP_BUCKET_MB, DDP_FIRST_BUCKET_MB, DISPATCHES

__all__ = ["KEYS", "NONBLOCKING", "WorkloadConfig", "load_workload_config", "resolve_workload", "resume_workload",
           "stored_workload"]

#: collectives the overlap workload measures (each has MPI_I<coll>: the registry's native-nonblocking)
NONBLOCKING = ("allreduce", "reduce_scatter", "allgather", "alltoall", "bcast", "reduce", "gather", "scatter")
#: MPICH's asynchronous progress: off, on (every launch with MPIR_CVAR_ASYNC_PROGRESS=1), both (a launch of each)
ASYNC_PROGRESS = ("off", "on", "both")
ZERO_VARIANTS = ("zero2", "ddp_flat", "zero3", "ddp_layer")
DDP_MODES = ("bucketed", "per_tensor")


@dataclass(frozen=True)
class WorkloadConfig:
    """A validated workload configuration; a key left out keeps this default."""

    workload: str = "ddp"
    model: str = "resnet50"
    dtype: str = "float32"
    algorithms: tuple[str, ...] = ("native",)     # allreduce (ddp, zero's ddp_*), alltoall (moe), any (straggler)
    modes: tuple[str, ...] = DDP_MODES
    bucket_mb: tuple[float, ...] = (DDP_BUCKET_MB,)  # DDP bucket caps, each a bucketed variant of its own
    first_bucket_mb: float = DDP_FIRST_BUCKET_MB  # 0: no smaller first bucket
    variants: tuple[str, ...] = ZERO_VARIANTS
    rs_algorithms: tuple[str, ...] = ("native",)
    ag_algorithms: tuple[str, ...] = ("native",)
    ep: tuple[int, ...] = ()                      # expert-parallel degrees; empty: every divisor of P >= 2
    tokens: int = 1024
    hidden: int = 1024
    experts_per_rank: int = 2
    top_k: int = 2
    capacity_factor: float = 1.0
    dispatch: tuple[str, ...] = DISPATCHES        # moe: padded alltoalls and/or routed alltoallvs (moe counts)
    collectives: tuple[str, ...] = ("allreduce",)  # overlap: non-blocking natives; straggler: one
    sizes: tuple[int, ...] = ()                    # overlap/straggler sizes; overlap: empty = the model's buckets
    compute_s: float = 0.0                         # overlap: 0 = compute_factor x the collective alone
    compute_factor: float = 1.0                    # overlap: the compute as a multiple of the collective (OSU: 1)
    async_progress: str = "off"                    # overlap: ASYNC_PROGRESS
    test_calls: int = 0                            # overlap: MPI_Test calls spread over the compute
    delay_s: float = 1e-3
    delayed_rank: int = -1                         # -1: the last rank
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 200
    target_rse: float = 0.05
    budget_s: float = 2.0
    watchdog_s: float = 300.0                      # an item may run this long past its budget; 0 = no watchdog
    thread_level: str = "auto"
    results_dir: str = "results"
    # replication (`ccbench.measure.multilaunch`): separate launches merged into one run, the seed of the
    # shuffled order of the items within each launch (None: drawn per run), and how the launcher binds the ranks
    launches: int = 1
    seed: int | None = None
    bind: str = "auto"
    # rounds within each launch: every item is visited this many times, each round in its own order (a
    # shuffled one when the run has several launches), each visit with 1/rounds of the steps and budget
    rounds: int = 1
    # what times the native blocking calls (LOOPS): python, compiled (the C loop of `ccbench.measure.compiled`,
    # an error where it cannot be built) or auto; hand-written algorithms and non-blocking calls stay in Python
    loop: str = "python"

    def to_dict(self) -> dict:
        """The keys of this workload (and `workload`), as stored in run.json."""
        d = dataclasses.asdict(self)
        return {k: d[k] for k in ("workload", *KEYS[self.workload])}

    def per_launch(self) -> "WorkloadConfig":
        """What one of `launches` launches runs: budget_s / K and ceil(max_reps / K) steps (never below min_reps).

        As a sweep's launches share its samples (`ccbench.measure.config.Config.per_launch`, which
        gives the reasons): K launches cost about what one did.
        """
        return split_launches(self)

    def per_round(self) -> "WorkloadConfig":
        """What one visit of an item runs when a launch visits every item `rounds` times: budget_s / R and
        ceil(min_reps / R), ceil(max_reps / R) steps, each visit with its own warm-up (as a sweep's rounds,
        `ccbench.measure.config.Config.per_round`, which gives the reasons)."""
        return split_rounds(self)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype].itemsize


_TIMING = ("warmup", "min_reps", "max_reps", "target_rse", "budget_s", "watchdog_s", "thread_level", "results_dir",
           "launches", "seed", "bind", "rounds", "loop")
KEYS: dict[str, tuple[str, ...]] = {
    "ddp": ("model", "dtype", "algorithms", "modes", "bucket_mb", "first_bucket_mb", *_TIMING),
    "zero": ("model", "dtype", "variants", "rs_algorithms", "ag_algorithms", "algorithms", *_TIMING),
    "moe": ("dtype", "algorithms", "ep", "tokens", "hidden", "experts_per_rank", "top_k", "capacity_factor",
            "dispatch", *_TIMING),
    "overlap": ("model", "dtype", "collectives", "algorithms", "sizes", "bucket_mb", "first_bucket_mb", "compute_s",
                "compute_factor", "test_calls", "async_progress", *_TIMING),
    "straggler": ("dtype", "collectives", "algorithms", "sizes", "delay_s", "delayed_rank", *_TIMING),
}
_NAMES = ("algorithms", "rs_algorithms", "ag_algorithms", "collectives")


def _choices(key, items, choices) -> tuple[str, ...]:
    return _check_choices(key, items, tuple(choices), allow_all=False)


def _time(key, value) -> float:
    from ccbench.core.units import parse_time

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise UsageError(f"config key {key!r}: expected a time such as 1ms, got {value!r}")
    return parse_time(value, key)


def _algorithms(key: str, names: tuple[str, ...], collectives: list[str]) -> tuple[str, ...]:
    from ccbench.algorithms import REGISTRY

    valid = sorted({a for c in collectives for a in REGISTRY[c]})
    # forced native variants (native:<alg>) are chosen by environment variables read at MPI_Init:
    # they need a launch of their own, so a workload, one launch, cannot mix them
    forced = {a for c in collectives for a, alg in REGISTRY[c].items() if getattr(alg, "settings", None)}
    # persistent algorithms make their requests once per buffers: a step's calls, each on buffers of its own,
    # would time that set-up on every call
    persistent = {a for c in collectives for a, alg in REGISTRY[c].items() if getattr(alg, "setup", None)}
    # the non-blocking forms are the overlap workload's (``all`` stays the set a stored run was planned with)
    nonblocking = {a for c in collectives for a, alg in REGISTRY[c].items() if getattr(alg, "nonblocking", None)}
    if names == ("all",):
        return tuple(a for a in valid if a not in forced | persistent | nonblocking)
    bad = [a for a in names if a in forced]
    if bad:
        raise UsageError(f"{key}: {bad[0]!r} is forced through the MPI library's environment at start-up; "
                         "set its variables yourself and measure it as native")
    bad = [a for a in names if a in persistent]
    if bad:
        raise UsageError(f"{key}: {bad[0]!r} is persistent (set up once per case, started per call): a workload "
                         "would time its set-up in every call; measure it with ccbench run")
    bad = [a for a in names if a in nonblocking]
    if bad:
        raise UsageError(f"{key}: {bad[0]!r} is non-blocking: the overlap workload times it against a compute "
                         f"(ccbench workload overlap -a {bad[0].removesuffix('-nonblocking')})")
    return _choices(key, names, valid)


def _overlap_algorithms(names: tuple[str, ...], collectives: tuple[str, ...]) -> tuple[str, ...]:
    """The non-blocking algorithms an overlap run names, by their blocking names (native = MPI_I<coll>; ring, binomial:
    the hand-written schedules, ``<name>-nonblocking`` in the registry), or all of them."""
    from ccbench.algorithms import REGISTRY

    valid = sorted({a.removesuffix("-nonblocking") for c in collectives for a, x in REGISTRY[c].items()
                    if x.nonblocking})
    if names == ("all",):
        return tuple(valid)
    return _choices("algorithms", tuple(dict.fromkeys(n.removesuffix("-nonblocking") for n in names)), valid)


def _bucket_caps(value) -> tuple[float, ...]:
    """DDP bucket caps in MiB: a number, "5,25" or a list; each above 0 and at most 1e6, each once, in order."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]
    caps = []
    for v in items:
        if isinstance(v, str):
            try:
                v = float(v.strip())
            except ValueError:
                raise UsageError(f"config key 'bucket_mb': expected caps in MiB such as 25 or 5,25, got {value!r}") \
                    from None
        caps.append(_number("bucket_mb", v, float, 1e-6, 1e6))
    if not caps:
        raise UsageError("config key 'bucket_mb': empty list")
    return tuple(dict.fromkeys(caps))


def resolve_workload(workload: str, values: dict) -> WorkloadConfig:
    """Validate raw key/values (from TOML and flags) of `workload` into a WorkloadConfig."""
    if workload not in WORKLOADS:
        raise UsageError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    allowed = KEYS[workload]
    out: dict = {"workload": workload}
    for key, value in values.items():
        if key == "workload":
            if value != workload:
                raise UsageError(f"this configuration is for workload {value!r}, not {workload!r}")
            continue
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UsageError(f"unknown {workload} key {key!r}{hint}; valid keys: {', '.join(sorted(allowed))}")
        if key in _NAMES or key in ("modes", "variants", "dispatch"):
            out[key] = _as_list(key, value)
        elif key == "model":
            if not isinstance(value, str) or not value:
                raise UsageError(f"config key 'model': expected a model name or file, got {value!r}")
            out[key] = value
        elif key == "dtype":
            if value not in DTYPES:
                raise UsageError(f"config key 'dtype': {value!r}; choose from {', '.join(DTYPES)}")
            out[key] = value
        elif key == "sizes":
            try:
                out[key] = tuple(parse_sizes(value))
            except UsageError as exc:
                raise UsageError(f"sizes: {exc}") from None
            if min(out[key]) < 1:
                raise UsageError("sizes: every size must be at least 1 byte")
        elif key == "ep":
            items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
            try:
                eps = tuple(sorted({int(v) for v in items}))
            except (TypeError, ValueError):
                raise UsageError(f"config key 'ep': expected expert-parallel degrees such as 2,4, got {value!r}") \
                    from None
            if not eps or min(eps) < 1:
                raise UsageError(f"config key 'ep': degrees must be >= 1, got {value!r}")
            out[key] = eps
        elif key == "bucket_mb":
            out[key] = _bucket_caps(value)
        elif key == "first_bucket_mb":
            out[key] = _number(key, value, float, 0.0, 1e6)
        elif key == "capacity_factor":
            out[key] = _number(key, value, float, 1e-3, 1e3)
        elif key in ("tokens", "hidden", "experts_per_rank", "top_k"):
            out[key] = _number(key, value, int, 1, 1 << 30)
        elif key == "test_calls":
            out[key] = _number(key, value, int, 0, 10_000_000)
        elif key in RUN_KEYS:
            out[key] = RUN_KEYS[key](value)
        elif key == "delayed_rank":
            out[key] = _number(key, value, int, -1, 1 << 30)
        elif key == "compute_factor":
            out[key] = _number(key, value, float, 1e-3, 1e3)
        elif key == "async_progress":
            out[key] = _choices(key, (value,) if isinstance(value, str) else value, ASYNC_PROGRESS)[0]
        elif key in ("compute_s", "delay_s"):
            out[key] = _time(key, value)
            if out[key] > 60:
                raise UsageError(f"config key {key!r}: {out[key]} s is longer than a minute")
    if out.get("modes") == ("both",):
        out["modes"] = DDP_MODES
    cfg = WorkloadConfig(**out)
    _choices("modes", cfg.modes, DDP_MODES)
    _choices("variants", cfg.variants, ZERO_VARIANTS)
    _choices("dispatch", cfg.dispatch, DISPATCHES)
    if workload == "straggler":
        from ccbench.core.collectives import COLLECTIVES

        _choices("collectives", cfg.collectives, [c for c in COLLECTIVES if c != "pingpong"])
        if len(cfg.collectives) != 1:
            raise UsageError("straggler measures one collective at a time")
        if cfg.delay_s <= 0:
            raise UsageError("straggler needs a delay > 0 (the slowdown is relative to it)")
        cfg = dataclasses.replace(cfg, algorithms=_algorithms("algorithms", cfg.algorithms, list(cfg.collectives)),
                                  sizes=cfg.sizes or (1 << 20,))
    elif workload == "overlap":
        _choices("collectives", cfg.collectives, NONBLOCKING)
        cfg = dataclasses.replace(cfg, algorithms=_overlap_algorithms(cfg.algorithms, cfg.collectives))
        if cfg.sizes and "model" in values:
            raise UsageError("overlap takes sizes or a model (its DDP bucket sizes), not both")
    elif workload == "ddp":
        cfg = dataclasses.replace(cfg, algorithms=_algorithms("algorithms", cfg.algorithms, ["allreduce"]))
    elif workload == "zero":
        cfg = dataclasses.replace(
            cfg, algorithms=_algorithms("algorithms", cfg.algorithms, ["allreduce"]),
            rs_algorithms=_algorithms("rs_algorithms", cfg.rs_algorithms, ["reduce_scatter"]),
            ag_algorithms=_algorithms("ag_algorithms", cfg.ag_algorithms, ["allgather"]))
    elif workload == "moe":
        cfg = dataclasses.replace(cfg, algorithms=_algorithms("algorithms", cfg.algorithms, ["alltoall"]))
    if workload in ("ddp", "zero") or (workload == "overlap" and not cfg.sizes):
        from ccbench.workloads.models import load_model

        load_model(cfg.model)  # an unknown name or a bad file is refused before anything starts
    if cfg.max_reps < cfg.min_reps:
        raise UsageError(f"max_reps ({cfg.max_reps}) is below min_reps ({cfg.min_reps})")
    return cfg


def load_workload_config(workload: str, path: str | Path | None = None,
                         overrides: dict | None = None) -> WorkloadConfig:
    """Read a TOML workload file or shipped config by name (optional), apply flag overrides, validate."""
    values: dict = read_toml(resolve_config_path(path, "workload")) if path is not None else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return resolve_workload(workload, values)


def _stored_values(workload: str, config: dict | None) -> dict:
    values = {k: v for k, v in (config or {}).items() if v != []}  # [] is the default an empty tuple wrote
    if workload == "overlap" and values.get("sizes"):
        values.pop("model", None)  # overlap with sizes stored the default model, unused
    return values


def stored_workload(workload: str, config: dict | None) -> WorkloadConfig:
    """The configuration a workload run stored in run.json (``config``), validated again.

    A key the run did not store (one added since) keeps its default.
    """
    return resolve_workload(workload, _stored_values(workload, config))


def resume_workload(workload: str, meta: dict, path, config_file=None, overrides: dict | None = None) -> WorkloadConfig:
    """The configuration of the workload run `meta` to continue: its own, checked against a file or flags given.

    A config file restates the whole workload, bare flags only themselves; either must
    agree with the run's configuration (``results_dir`` aside), else the run is refused.
    """
    kind = meta.get("workload")
    if kind != workload:
        raise UsageError(f"cannot resume {path}: it is a {kind} workload run, not {workload}")
    stored = stored_workload(workload, meta.get("config"))
    flags = {k: v for k, v in (overrides or {}).items() if k != "results_dir" and v is not None}
    if config_file or flags:
        if config_file:
            mine = load_workload_config(workload, config_file, overrides)
        else:
            values = _stored_values(workload, meta.get("config"))
            if workload == "overlap" and "sizes" in flags:
                values.pop("model", None)
            mine = resolve_workload(workload, {**values, **flags})
        mine = dataclasses.replace(mine, results_dir=stored.results_dir)
        if mine != stored:
            diff = [f.name for f in dataclasses.fields(stored) if getattr(mine, f.name) != getattr(stored, f.name)]
            raise UsageError(f"cannot resume {path}: its configuration differs in {', '.join(diff)}; "
                             "resume with the same options, or with none")
    return stored
