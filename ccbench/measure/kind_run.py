"""Measure a run of a plug-in kind: its configuration, its context, its launches, through the one driver.

A kind registered with a ``plan`` (``ccbench.store.kinds.RunKind``) gets a command of its own
(``ccbench NAME``); its ranks call `run_kind`, which does what every run does -- provenance, the
timer's resolution, ``CCBENCH_FAULT``, the run directory, ``--resume``, rounds, the shuffled and
recorded order, the watchdog, signals, progress and the exit code (``ccbench.measure.driver.drive``)
-- and asks the kind only for its items: ``plan(ctx) -> [Item]``, each item measured by
``visit()`` on every rank and turned into its one row by ``rows(visits)``.  `KindContext` gives a
plan what measuring needs: the communicator, the kind's parameters, the timing settings of one
visit and the timing loop itself (``ctx.measure(call)``: the synchronised, adaptive loop of
``ccbench.measure.timing``, each sample the maximum over ranks), and the statistics columns every
row has (``ctx.stats(samples)``).
"""

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.core.errors import UsageError
from ccbench.measure.config import RUN_KEYS, split_launches, split_rounds
from ccbench.measure.driver import Item, Plan, common_stop, drive
from ccbench.store.kinds import RunKind

__all__ = ["SETTINGS", "KindConfig", "KindContext", "Item", "common_stop", "kind_replication", "resolve_kind_config",
           "run_kind"]


@dataclass(frozen=True)
class KindConfig:
    """A validated run of a plug-in kind: its own parameters and the settings every run has."""

    kind: str
    params: dict = field(default_factory=dict)  # the kind's own options, as its `check` returned them
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 200
    target_rse: float = 0.05
    budget_s: float = 1.0
    watchdog_s: float = 300.0
    thread_level: str = "auto"
    results_dir: str = "results"
    launches: int = 1
    rounds: int = 1
    seed: int | None = None
    bind: str = "auto"

    def to_dict(self) -> dict:
        """As run.json stores it (``config``)."""
        return {f.name: (dict(self.params) if f.name == "params" else getattr(self, f.name))
                for f in dataclasses.fields(self)}

    def per_launch(self) -> "KindConfig":
        """What one of K launches runs: budget_s / K and ceil(max_reps / K) samples, never below min_reps (as a
        sweep's launches share its samples: ``ccbench.measure.config.Config.per_launch``)."""
        return split_launches(self)

    def per_round(self) -> "KindConfig":
        """What one visit of an item runs when a launch visits it R times (``Config.per_round``)."""
        return split_rounds(self)


#: The settings every run of a plug-in kind has, by key, with their bounds.
SETTINGS = {k: RUN_KEYS[k] for k in ("warmup", "min_reps", "max_reps", "target_rse", "budget_s", "watchdog_s",
                                    "thread_level", "results_dir", "launches", "rounds", "seed", "bind")}


def resolve_kind_config(kind: RunKind, settings: dict, params: dict) -> KindConfig:
    """Validate a run of `kind`: the common `settings` (None: the kind's default, else the default), and its own
    `params` through its ``check`` (which refuses bad values with a ``UsageError`` and returns them as they are
    stored)."""
    given = {**kind.settings, **{k: v for k, v in settings.items() if v is not None}}
    out = {k: SETTINGS[k](v) for k, v in given.items()}
    unknown = set(given) - set(SETTINGS)
    if unknown:
        raise UsageError(f"unknown {kind.name} settings: {', '.join(sorted(unknown))}")
    check = kind.get("check")
    params = dict(check(dict(params)) if check is not None else params)
    try:
        params = json.loads(json.dumps(params, allow_nan=False))  # stored in run.json: plain JSON only
    except (TypeError, ValueError) as exc:
        raise UsageError(f"the {kind.name} options cannot be stored as JSON: {exc}") from None
    cfg = KindConfig(kind.name, params, **out)
    if cfg.max_reps < cfg.min_reps:
        raise UsageError(f"max_reps ({cfg.max_reps}) is below min_reps ({cfg.min_reps})")
    return cfg


def stored_config(kind: RunKind, config: dict | None) -> KindConfig:
    """The configuration a stored run of `kind` was made with (run.json's ``config``)."""
    config = dict(config or {})
    if config.get("kind") != kind.name:
        raise UsageError(f"the stored configuration is of kind {config.get('kind')!r}, not {kind.name!r}")
    params = config.pop("params", None) or {}
    config.pop("kind")
    return resolve_kind_config(kind, config, params)


@dataclass
class KindContext:
    """What a plug-in kind's plan measures with (one per launch)."""

    comm: object
    cfg: KindConfig
    settings: object      # ``ccbench.measure.timing.TimingSettings`` of one visit (rounds share a launch's samples)
    min_reps: int         # the launch's: what a row's statistics need, whatever its visits took
    timer_res: float
    kind: RunKind
    _items: int = 0

    @property
    def params(self) -> dict:
        """The kind's own options, as its ``check`` returned them."""
        return self.cfg.params

    def measure(self, call: Callable[[], object]):
        """Time `call` on every rank: (samples, each the maximum over ranks in seconds; the stop reason)."""
        from ccbench.measure.timing import measure

        return measure(self.comm, call, self.settings)

    def stats(self, samples) -> dict:
        """The statistics columns of a row of these samples (``samples``, ``median_s``, ``min_s``, ``mean_s``,
        ``ci_low_s``, ``ci_high_s``, ``flags``, ``samples_s``)."""
        from ccbench.core.stats import summarize

        s = summarize(samples, timer_resolution_s=self.timer_res, min_samples=self.min_reps)
        return dict(samples=len(samples), median_s=s.median_s, min_s=s.min_s, mean_s=s.mean_s, ci_low_s=s.ci_low_s,
                    ci_high_s=s.ci_high_s, flags=tuple(s.flags), samples_s=tuple(float(x) for x in samples))

    def item(self, key: tuple, label: str, visit: Callable[[], object], rows: Callable[[list], list]) -> Item:
        """One item of the plan: `key` is its row's values of the kind's ``key_fields`` (what --resume skips),
        `label` what the watchdog and progress call it, ``visit()`` measures it once on every rank, ``rows(visits)``
        makes its row from its visits (one, or one per round)."""
        self._items += 1
        return Item(tuple(key), label, f"{self.kind.name}:{self._items}", self.settings.budget_s, visit, rows)


def _progress(kind: RunKind, row) -> str:
    """A row's plain-log line: its key (a size written as one: ``nbytes``), median, samples, correct or not."""
    from ccbench.core.units import fmt_time, format_size

    key = " ".join(format_size(v) if f == "nbytes" else str(v) for f, v in zip(kind.key_fields, kind.key_of(row),
                                                                                 strict=True))
    return f"{key}: median {fmt_time(row.median_s)}, {row.samples} samples, " + ("ok" if row.ok else
                                                                                 f"WRONG {row.nwrong}")


def _columns(kind: RunKind) -> list[str]:
    return [f.name for f in dataclasses.fields(kind.rows) if f.name != "samples_s"]


def run_kind(kind: RunKind, cfg: KindConfig, *, thread: tuple[str, str], argv: list[str], tag: str = "",
             resume: Path | None = None, console=None, launch: int | None = None) -> tuple[int, Path | None]:
    """Run a plug-in kind on MPI.COMM_WORLD; return (exit code, the run directory on rank 0, None elsewhere)."""
    from mpi4py import MPI

    from ccbench.measure.provenance import collect
    from ccbench.measure.session import agree, check_launch, read_fault
    from ccbench.measure.timing import TimingSettings, timer_resolution_s

    comm = MPI.COMM_WORLD
    check_launch(comm)
    fault = agree(comm, lambda: read_fault(comm.Get_size()))
    prov = collect(comm, cfg.to_dict(), thread, argv)
    timer_res = comm.allreduce(timer_resolution_s(), MPI.MAX)
    launch_cfg = cfg.per_launch()
    visit = launch_cfg.per_round()
    settings = TimingSettings(warmup=visit.warmup, min_reps=visit.min_reps, max_reps=visit.max_reps,
                              target_rse=visit.target_rse, budget_s=visit.budget_s)
    ctx = KindContext(comm, cfg, settings, launch_cfg.min_reps, timer_res, kind)
    items = agree(comm, lambda: list(kind.get("plan")(ctx)))
    if not items:
        raise UsageError(f"the {kind.name} plan has nothing to run at {comm.Get_size()} ranks")
    stored = json.loads(json.dumps(cfg.to_dict()))

    def same_config(theirs) -> bool:
        return json.loads(json.dumps(theirs)) == stored

    firsts = {it.key for it in items}  # an item of several rows: progress counts it once, by its first row

    run_plan = Plan(items, meta=dict(kind=kind.name, timer_resolution_s=timer_res, planned_items=len(items)),
                    same_config=same_config, summary=lambda r: (kind.key_of(r), not r.ok),
                    progress_line=lambda r: _progress(kind, r) if kind.key_of(r) in firsts else None,
                    visit_ok=lambda v: getattr(v, "nwrong", 0) == 0,
                    row_cls=kind.rows, columns=_columns(kind), order="shuffled", seed=cfg.seed, rounds=cfg.rounds,
                    watchdog_s=cfg.watchdog_s, fault=fault, noun=kind.noun, what=kind.item + "s")
    return drive(comm, run_plan, prov=prov, argv=argv, results_dir=cfg.results_dir, tag=tag, resume=resume,
                 launch=launch, console=console, progress=console is not None)


def kind_replication(kind: RunKind, cfg: KindConfig, options: Callable):
    """The launches of a replicated run of a plug-in kind (``ccbench.measure.multilaunch.Replication``): every launch
    runs the whole plan in its own shuffled order; rows are pooled on the kind's ``key_fields``."""
    from ccbench.measure.multilaunch import Replication, replicated

    return Replication(cfg.to_dict(), cfg.launches, "shuffled", cfg.seed, cfg.results_dir, replicated(cfg.launches),
                       [], options, kind.key_of, kind.rows, _columns(kind))
