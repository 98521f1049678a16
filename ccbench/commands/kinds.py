"""``ccbench NAME`` for a run kind a plug-in adds: one command skeleton, built from the kind's own options.

A kind registered with a ``plan`` (``ccbench.store.kinds``) gets a command named after it, with
its own options and every option a measuring command has (repetitions, watchdog, thread level,
results directory, tag, ``--resume``, binding, ``--launch N`` to start the launcher,
``--launches``, ``--rounds``, ``--seed``); run under a launcher it measures on every rank
(``ccbench.measure.kind_run.run_kind``), with ``--launch N`` it starts the launcher itself, one
job per launch when there are several, merged into one run.  The commands are built on first
need (``ccbench.cli`` asks `kind_command` for a name it does not know).
"""

import sys

import click

from ccbench.commands.common import launching_options
from ccbench.commands.options import run_options
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS", "kind_command", "kind_command_names"]

COMMANDS: list = []  # built per kind, on first need (`kind_command`)

_RUN = run_options("item", "MPI thread level; auto = multiple when ranks oversubscribe the cores, else single.",
                   "Continue an interrupted or failed run in its directory, skipping its finished items (same "
                   "options, ranks and MPI library; its options may be left out).")
_COMMON = [
    click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False),
                 help="TOML file of this kind's options and settings; flags override its keys."),
    click.option("--warmup", type=int, help="Untimed calls before sampling (default 3)."),
    click.option("--min-reps", "min_reps", type=int, help="Samples before the RSE rule may stop (default 10)."),
    click.option("--max-reps", "max_reps", type=int, help="Most samples per item (default 200)."),
    click.option("--target-rse", "target_rse", type=float, help="Stop when the RSE of the mean is below this."),
    click.option("--budget", "budget_s", type=float, help="Time budget per item in seconds (default 1)."),
    *_RUN.values(),
    *launching_options("the whole plan", "samples"),
]
_SETTING_PARAMS = ("warmup", "min_reps", "max_reps", "target_rse", "budget_s", "watchdog_s", "thread_level",
                   "results_dir", "launches", "rounds", "seed", "bind")


def _param_names(kind) -> list[str]:
    """The parameter names of the kind's own options."""
    names = []
    for opt in kind.get("options") or ():
        probe = opt(lambda: None)
        names.append(probe.__click_params__[-1].name)
    return names


def _resolve(kind, kw: dict):
    """(configuration, run directory to resume or None); a resumed run keeps its own configuration."""
    from ccbench.measure.kind_run import resolve_kind_config, stored_config

    own = _param_names(kind)
    settings = {k: kw.get(k) for k in _SETTING_PARAMS}
    params = {k: kw[k] for k in own if kw.get(k) is not None}
    if kw.get("config_file"):
        from ccbench.measure.config import read_toml

        doc = read_toml(kw["config_file"])
        unknown = sorted(set(doc) - set(own) - set(_SETTING_PARAMS))
        if unknown:
            raise UsageError(f"{kw['config_file']}: unknown {kind.name} keys {', '.join(unknown)}; valid keys: "
                             f"{', '.join(sorted([*own, *_SETTING_PARAMS]))}")
        settings = {k: settings[k] if settings[k] is not None else doc.get(k) for k in _SETTING_PARAMS}
        params = {**{k: v for k, v in doc.items() if k in own}, **params}
    if not kw.get("resume"):
        return resolve_kind_config(kind, settings, params), None
    from ccbench.commands.common import nothing_to_resume
    from ccbench.store.results import resolve_run
    from ccbench.store.run import open_run

    path = resolve_run(kw["resume"], kw.get("results_dir") or "results")
    meta = open_run(path, kinds=(kind.name,), what=f"{kind.name} --resume").meta
    stored = stored_config(kind, meta.get("config"))
    given = {k: v for k, v in settings.items() if v is not None and k != "results_dir"}
    differ = [k for k, v in given.items() if getattr(stored, k) != v]
    differ += [k for k, v in params.items() if stored.params.get(k) != v]
    if differ:
        raise UsageError(f"cannot resume {path}: its configuration differs in {', '.join(differ)}; resume with the "
                         "same options, or with none")
    nothing_to_resume(path, meta)
    return stored, path


def _launch_options(cfg) -> dict:
    """The options that restate `cfg` on each launch's command line (``multilaunch.Replication``)."""
    return {**{k: getattr(cfg, k) for k in _SETTING_PARAMS if k != "results_dir"}, **cfg.params}


def kind_command(kind) -> click.Command:
    """The command of a plug-in kind (`kind`: a ``RunKind`` with a ``plan``)."""

    def run(**kw):
        from ccbench.commands.common import measure_or_launch

        cfg, resume = _resolve(kind, kw)  # refuse bad input first

        def replication(n: int):
            from ccbench.measure.kind_run import kind_replication

            return kind_replication(kind, cfg, lambda part: _launch_options(cfg))

        def measure(thread, console):
            from ccbench.measure.kind_run import run_kind

            code, path = run_kind(kind, cfg, thread=thread, argv=sys.argv, tag=kw.get("tag") or "", resume=resume,
                                  console=console, launch=kw.get("launch_index"))
            return code or _exit_code(kind, path, kw.get("launch_index")), path

        measure_or_launch(click.get_current_context(), kw, cfg, resume, command=[kind.name],
                          replication=replication, measure=measure, item=kind.item,
                          outcome=_outcome(kind))

    for opt in reversed([*(kind.get("options") or ()), *_COMMON]):
        run = opt(run)
    return click.command(kind.name, help=kind.summary or f"Measure a {kind.label} (a plug-in's run kind).")(run)


def _outcome(kind):
    """The kind's ``exit_code`` as a function of a run directory; None when it declares none."""
    judge = kind.get("exit_code")
    if judge is None:
        return None

    def of(path) -> int:
        from ccbench.store.run import open_run

        return judge(open_run(path))
    return of


def _exit_code(kind, path, launch_index) -> int:
    """The kind's ``exit_code`` of the run just measured, the same on every rank (0: none, or one launch of several,
    whose merged run the launching process judges)."""
    judge = _outcome(kind)
    if judge is None or launch_index is not None:
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.bcast(judge(path) if path is not None else None, root=0)


def kind_command_names() -> list[str]:
    """The names of the commands of every registered kind that has a plan (plug-ins loaded first)."""
    from ccbench.store.kinds import known_kinds

    return sorted(name for name, k in known_kinds(load=True).items() if k.plan is not None)


def kind_command_named(name: str) -> click.Command | None:
    """The command of the kind called `name` (plug-ins loaded first); None when there is no such kind."""
    from ccbench.store.kinds import kind_named

    kind = kind_named(name)
    return kind_command(kind) if kind is not None and kind.plan is not None else None
