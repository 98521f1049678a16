"""What the commands share: the error line, the console, the sweep options, the launcher call."""

import os
import re

import click

from ccbench.commands.options import OUT_OPTION, PLACEMENT_OPTION, run_options
from ccbench.core.errors import UsageError

__all__ = ["CONFIG_KEYS", "OUT_OPTION", "new_console", "nothing_to_resume",
           "print_error", "resolve_sweep", "resolve_with_resume", "run_launcher",
           "show_run", "sweep_options", "to_argv"]


def print_error(msg: str) -> None:
    """One line on stderr, from rank 0 only (or outside any launcher): a message of several lines (click lists a
    choice's values one per line) is joined into one."""
    from ccbench.measure.provenance import env_rank

    if env_rank() in (None, 0):
        click.echo("ccbench: error: " + re.sub(r"\s*\n\s*", " ", msg.strip()), err=True)


def new_console():
    """A rich console: a terminal's (progress bar, colours) only when a person is watching, plain lines otherwise.

    ``CCBENCH_TERMINAL`` decides when it is 1 or 0: `ccbench launch` sets it for its ranks from
    its own stdout, since a launcher's pipes hide the terminal (1) and Open MPI gives the ranks a
    pseudo-terminal even when the job writes to a file (0).  Without it, a Slurm job (``SLURM_JOB_ID``:
    a bare mpirun or srun in a batch script) prints plain lines, and elsewhere rich asks stdout.
    A plain console is wide enough for the tables when output goes to a file or a pipe.
    """
    from rich.console import Console

    told = os.environ.get("CCBENCH_TERMINAL")
    force = {"1": True, "0": False}.get(told) if told else (False if os.environ.get("SLURM_JOB_ID") else None)
    console = Console(force_terminal=force)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(force_terminal=force, width=160)
    return console


# -- the options of a sweep, shared by `run` and `launch` ---------------------------------
_RUN = run_options("case", "MPI thread level; auto = multiple when ranks oversubscribe the cores, else single.",
                   "Continue an interrupted run in its directory, skipping its finished cases "
                   "(same configuration, ranks and MPI library; sweep options may be left out).")
SWEEP_OPTIONS = [
    click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False),
                 help="TOML sweep file (see configs/); flags override its keys."),
    click.option("-C", "--collective", "collectives", help="Collectives, comma separated, or all."),
    click.option("-a", "--algorithm", "algorithms", help="Algorithms, comma separated (native, ring, ...) or all."),
    click.option("-s", "--sizes", help="Sizes in bytes: 8:1M (x2 sweep), 8:1M:4, or a list 8,4K,1M."),
    click.option("-t", "--dtype", "dtypes", help="Element types: uint8,int32,int64,float16,bfloat16,float32,float64 "
                                                   "or all (bfloat16 needs ccbench[half]; it is timed in Python)."),
    click.option("--op", "ops", help="Reduction ops: sum,prod,min,max or all."),
    click.option("--in-place", "in_place", type=click.Choice(["no", "yes", "both"]),
                 help="Out-of-place (no), in-place (yes) or both."),
    click.option("--root", help="Root rank of rooted collectives, or rotate (every root in turn)."),
    click.option("-x", "--warmup", "--skip", "warmup", type=int,
                 help="Untimed calls before sampling (default 5; OSU's -x)."),
    click.option("-i", "--iterations", type=int,
                 help="Exactly N samples per case, no adaptive stop (OSU's -i; default: adaptive)."),
    click.option("--timing", help="per-call (default: one synchronised call per sample) or batched[:K] "
                                  "(K back-to-back calls per sample, time / K; IMB, nccl-tests style; K=10)."),
    click.option("--loop", type=click.Choice(["python", "compiled", "auto"]),
                 help="What times the native collectives: auto (default: the compiled loop where it builds, unless "
                      "hand-written algorithms share the run, then every case in Python so they compare alike), "
                      "python, or compiled (a C loop built with the MPI's mpicc on first use; an error without one)."),
    click.option("--buffers", type=click.Choice(["warm", "cold"]),
                 help="warm (default): every call on the same buffers, in cache when they fit; cold: each call on the "
                      "next of several buffer sets together twice the last-level cache, so none is in cache (IMB's "
                      "-off_cache; timed in the Python loop)."),
    click.option("--counts", help="Block sizes of the v-collectives (allgatherv, alltoallv, gatherv, scatterv, "
                      "reduce_scatterv): uniform (default), heavy[:F] (rank 0's block F times the others'), zipf[:S], "
                      "moe[:E,K,CF[,T]][@SEED] (mixture-of-experts routing) or weights:W0,W1,..."),
    click.option("--min-reps", "min_reps", type=int, help="Samples before the RSE rule may stop (default 20)."),
    click.option("--max-reps", "max_reps", type=int, help="Most samples per case (default 1000)."),
    click.option("--target-rse", "target_rse", type=float,
                 help="Stop when the relative standard error of the mean is below this (default 0.05)."),
    click.option("--budget", "budget_s", type=float, help="Time budget per case in seconds (default 1)."),
    _RUN["watchdog"],
    click.option("--sync", type=click.Choice(["barrier", "window"]),
                 help="Synchronisation before each sample (default barrier)."),
    _RUN["thread_level"],
    _RUN["results_dir"],
    _RUN["tag"],
    _RUN["resume"],
    click.option("--launches", type=int,
                 help="Separate launches of the whole plan, merged into one run (default 1; ccbench launch). "
                      "The launch is the unit of replication: comparisons need 3 or more."),
    click.option("--rounds", type=int,
                 help="Visits of every case within each launch, each round in a fresh shuffled order with 1/R of "
                      "the samples (default 1). Averages out drift within a launch: use 4 or more to compare "
                      "algorithms inside one run."),
    click.option("--order", type=click.Choice(["shuffled", "planned"]),
                 help="Case order within a launch: shuffled (default, seeded, recorded) or as planned."),
    click.option("--seed", type=int, help="Seed of the shuffled case order (default: drawn and recorded)."),
    _RUN["bind"],
    PLACEMENT_OPTION,
    click.option("--launch-index", "launch_index", type=click.IntRange(1), hidden=True,
                 help="Which of the launches this is (set by ccbench launch)."),
    click.option("--show/--no-show", default=True, help="Print the results table at the end."),
]
CONFIG_KEYS = ("collectives", "algorithms", "sizes", "dtypes", "ops", "in_place", "root", "warmup",
                "min_reps", "max_reps", "target_rse", "budget_s", "sync", "thread_level", "results_dir",
                "watchdog_s", "launches", "rounds", "order", "seed", "timing", "iterations", "bind", "loop",
                "buffers", "placement", "counts")


def sweep_options(fn):
    for opt in reversed(SWEEP_OPTIONS):
        fn = opt(fn)
    return fn


def resolve_sweep(kw: dict):
    from ccbench.measure.config import load_config

    return load_config(kw.get("config_file"), {k: kw.get(k) for k in CONFIG_KEYS})



def resolve_with_resume(kw: dict):
    """(config, run directory to resume or None); a resumed run keeps its own configuration."""
    if not kw.get("resume"):
        return resolve_sweep(kw), None
    import dataclasses

    from ccbench.measure.config import resolve
    from ccbench.store.results import resolve_run
    from ccbench.store.run import SWEEP, open_run

    path = resolve_run(kw["resume"], kw.get("results_dir") or "results")
    meta = open_run(path, kinds=(SWEEP,), what="--resume of a sweep").meta
    stored = resolve(meta.get("config", {}))
    flags = {k: kw.get(k) for k in CONFIG_KEYS if k != "results_dir" and kw.get(k) is not None}
    if kw.get("config_file") or flags:
        # a config file restates the whole sweep; bare flags restate only themselves
        mine = (resolve_sweep(kw) if kw.get("config_file") else resolve({**meta.get("config", {}), **flags}))
        mine = dataclasses.replace(mine, results_dir=stored.results_dir)
        if mine != stored:
            diff = [f.name for f in dataclasses.fields(stored) if getattr(mine, f.name) != getattr(stored, f.name)]
            raise UsageError(f"cannot resume {path}: its configuration differs in {', '.join(diff)}; "
                             "resume with the same options, or with none")
    nothing_to_resume(path, meta)
    return stored, path


def nothing_to_resume(path, meta: dict) -> None:
    """End a ``--resume`` of a complete run at once, exit code 0, its files as they are (rank 0 says so)."""
    if meta.get("status") != "complete":
        return
    from ccbench.measure.provenance import env_rank

    if env_rank() in (None, 0):
        click.echo(f"{path} is complete: nothing to resume (start a new run to measure again)")
    raise SystemExit(0)


def show_run(path, console, show_table=True, brief: bool = False) -> None:
    """Print a stored run of any kind (``ccbench.present.kinds.show_run``)."""
    from ccbench.present.kinds import show_run as show

    show(path, console, show_table, brief=brief)


def to_argv(ctx: click.Context, kw: dict) -> list[str]:
    """Turn parsed sweep options back into `ccbench run` arguments."""
    out: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in ("n", "launcher", "oversubscribe"):
            continue
        value = kw.get(param.name)
        if value is None or param.name in ("help",):
            continue
        if param.is_flag and param.secondary_opts:
            out.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.name == "tag" and not value:
            continue
        else:
            out += [param.opts[-1], str(value)]
    return out


def run_launcher(cmd: list[str], env: dict, merged=None) -> int:
    """Run one launcher command (`ccbench.measure.launcher.run_job`); say how to continue a run it left failed
    (the `merged` run of several launches it is one launch of, when it is one).  The exit code is 128 + the
    signal when this process was told to stop during the job, whatever the launcher's own code was."""
    from ccbench.measure.launcher import run_job
    from ccbench.store.run import open_run

    job = run_job(cmd, env)
    run = open_run(job.run_dir) if job.code and job.run_dir is not None else None
    if run is not None and run.meta.get("status") == "failed":  # whoever marked it: the ranks, or run_job
        n, spec = len(run.rows), run.spec
        kept = f"{n} finished {spec.item}" + ("" if n == 1 else "s")
        how = f"continue it with --resume {job.run_dir}" if merged is None else \
            f"continue the whole run with --resume {merged}"
        if job.marked_failed:
            print_error(f"the job ended with {job.why} before the {spec.noun} finished; {kept} kept in "
                        f"{job.run_dir}, marked failed; {how}")
        else:  # the ranks said why (the watchdog, a rank gone)
            print_error(f"{kept} kept in {job.run_dir}, marked failed; {how}")
    if job.signal is not None:  # stopped by the user or the batch system: 128 + the signal, as a shell says it
        return 128 + job.signal
    return job.code



OVERSUBSCRIBE = click.option("--oversubscribe", is_flag=True,
                             help="Start more ranks than this node has usable cores (refused without it: the "
                                  "timings would measure the scheduler, not the network).")


def launching_options(what: str, unit: str) -> list:
    """The options of a measuring command that can start its own launcher (workloads, plug-in kinds): --launch N,
    --launcher, --oversubscribe, --launches, --rounds, --seed, the hidden --launch-index and --show; `what` is what
    one launch runs ("the whole workload"), `unit` what a visit's share is counted in ("steps")."""
    return [
        click.option("--launch", "launch", type=click.IntRange(1), metavar="N",
                     help="Start the MPI launcher with N ranks for you (as ccbench launch does)."),
        click.option("--launcher", help="Launcher for --launch (default: mpiexec beside this Python, then PATH)."),
        click.option("--oversubscribe", is_flag=True,
                     help="With --launch: more ranks than this node has usable cores (refused without it: the "
                          "timings would measure the scheduler, not the network)."),
        click.option("--launches", type=int,
                     help=f"Separate launches of {what}, merged into one run (default 1; needs --launch). Each gets "
                          f"1/K of the budget and {unit} and its items in a seeded shuffled order."),
        click.option("--rounds", type=int,
                     help=f"Visits of every item within each launch, each with 1/R of the {unit} and budget (default "
                          "1); the samples of its visits make its rows. Averages out drift within a launch."),
        click.option("--seed", type=int, help="Seed of the shuffled item order (default: drawn and recorded)."),
        click.option("--launch-index", "launch_index", type=click.IntRange(1), hidden=True,
                     help="Which of the launches this is (set by --launch)."),
        click.option("--show/--no-show", default=True, help="Print the results tables at the end."),
    ]


def ranks_to_start(n, resume, oversubscribe: bool, launcher_args=(), option: str = "-n") -> int:
    """The rank count of a job ccbench starts (``ccbench.measure.launcher.rank_count``): -n, else a resumed run's
    own, else one per usable core; said on stdout first (with why, when it was not given)."""
    from ccbench.measure.launcher import rank_count

    stored = None
    if resume is not None:
        from ccbench.store.run import open_run

        stored = open_run(resume).meta.get("nranks")
        stored = stored if isinstance(stored, int) and stored > 0 else None
    count, why = rank_count(n, stored=stored, oversubscribe=oversubscribe, launcher_args=launcher_args,
                            option=option)
    click.echo(f"starting {count} ranks: {why}" if n is None else
               f"starting {count} ranks ({option} {n}); the first {'case' if option == '-n' else 'item'} follows "
               "the start of MPI and the run's calibration (a few seconds)")
    return count


def _continue_line(path, code: int, how: str) -> str:
    """The last line of a job stopped by a signal: how to continue its run."""
    import signal

    name = signal.Signals(code - 128).name if code - 128 in signal.valid_signals() else f"signal {code - 128}"
    return f"ccbench: stopped by {name}; continue it with: {how} --resume {path}"


def measure_here(cfg, *, launch_index, start_with: str, add_launcher: str, measure, show: bool,
                 resume_with: tuple[str, str] = ("", ""), item: str = "item") -> None:
    """The ranks' side of every measuring command (sweeps, workloads): refuse a launch index or a missing
    launcher, enter MPI, run ``measure(thread=..., console=...) -> (code, run dir)`` on every rank, show the run
    on rank 0, leave MPI quietly on an error every rank agreed on, exit with the run's code.

    `start_with` says how a replicated run is started (``... --launches K`` follows it); `add_launcher` how
    to start this one under a launcher; `resume_with` the command that continues a stopped run (``--resume RUN``
    follows it) when ccbench started the launcher and when another launcher did ({P}: the rank count): the
    last line a stopped job prints, after its tables.  `item`: what one unit of the run is called.
    """
    if cfg.launches > 1 and launch_index is None:
        raise UsageError(f"launches = {cfg.launches} needs one job per launch: {start_with} --launches "
                         f"{cfg.launches} (it merges them into one run)")
    if launch_index is not None and launch_index > cfg.launches:
        raise UsageError(f"--launch-index {launch_index} is beyond --launches {cfg.launches}")
    from ccbench.measure.launcher import require_launched, require_launcher

    require_launcher(add_launcher)
    require_launched(cfg.bind, add_launcher)
    from ccbench.measure.mpi import enter_mpi
    from ccbench.measure.session import startup_reached, watch_startup

    # a rank stuck before its first item (starting MPI, planning) ends the job, as a stuck item does
    watch_startup(cfg.watchdog_s, item)
    try:
        code = _measure_in_mpi(measure, launch_index, show, resume_with, enter_mpi(cfg.thread_level))
    finally:  # whatever ended it (an error before the first item too): the watcher leaves with the command
        startup_reached()
    if code:
        raise SystemExit(code)


def _measure_in_mpi(measure, launch_index, show: bool, resume_with: tuple[str, str], entered) -> int:
    """`measure_here` once MPI has started (`entered`: the MPI module and the thread level): its exit code."""
    from ccbench.core.errors import CCBenchError

    MPI, thread = entered
    rank = MPI.COMM_WORLD.Get_rank()
    console = new_console() if rank == 0 else None
    try:
        code, path = measure(thread=thread, console=console)
    except CCBenchError as exc:
        if rank == 0:
            click.echo(f"ccbench: error: {exc}", err=True)
        MPI.Finalize()  # every rank got here: leave quietly instead of aborting the job
        raise SystemExit(exc.exit_code) from None
    if rank == 0 and path is not None:
        show_run(path, console, show_table=show, brief=True)
        if code > 128 and launch_index is None:  # a launch of several says it for the whole run (start_jobs)
            from ccbench.measure.provenance import launch_binding

            how = resume_with[0 if launch_binding() is not None else 1].format(P=MPI.COMM_WORLD.Get_size())
            click.echo(_continue_line(path, code, how), err=True)
    MPI.Finalize()
    return code


def start_jobs(head: list[str], argv_of, env: dict, *, replication, kw: dict, nranks: int, resume,
               resume_with: str = "", outcome=None) -> None:
    """The launcher's side of every measuring command: one job (``head`` + ``argv_of(kw)``), or, given a
    `replication` (`ccbench.measure.multilaunch.Replication`, None for one job), one job per launch merged into
    one run, shown at the end, then -- stopped by a signal -- how to continue it (`resume_with` ``--resume
    RUN``); exits with the job's code (a merged run's, when all went well: ``outcome(run dir)``, if given)."""
    import sys

    if replication is not None:
        from ccbench.measure.multilaunch import launch_parts

        code, merged = launch_parts(replication, kw, lambda part_kw: [*head, *argv_of(part_kw)], env, run_launcher,
                                    nranks, sys.argv, say=new_console().print, resume=resume)
        show_run(merged, new_console(), show_table=kw.get("show", True), brief=True)
        code = code or (outcome(merged) if outcome is not None else 0)
        if code > 128:
            click.echo(_continue_line(merged, code, resume_with), err=True)
        raise SystemExit(code)
    code = run_launcher([*head, *argv_of(kw)], env)
    if code:
        raise SystemExit(code if code > 0 else 128 - code)


def measure_or_launch(ctx: click.Context, kw: dict, cfg, resume, *, command: list[str], replication, measure,
                      item: str = "item", outcome=None) -> None:
    """The body of a measuring command that takes ``--launch N`` (workloads, plug-in kinds): with it, start
    LAUNCHER -n N python -m mpi4py -m ccbench COMMAND ... (`start_jobs`; ``replication(n)`` gives the launches
    of a replicated run, or of the replicated run being resumed); without it, measure here on every rank
    (`measure_here`, ``measure(thread=, console=)``).  `command`: the words after ``ccbench``; `outcome(run dir)`:
    the exit code of a merged run of several launches that went well (a kind's ``exit_code``)."""
    import sys

    name = " ".join(command)
    launch_index = kw.get("launch_index")
    if not kw.get("launch"):
        measure_here(cfg, launch_index=launch_index, start_with=f"start it with ccbench {name} ... --launch N",
                     add_launcher=f"add --launch N to ccbench {name}", measure=measure, show=kw.get("show", True),
                     resume_with=(f"ccbench {name} --launch {{P}}",
                                  f"mpiexec -n {{P}} python -m mpi4py -m ccbench {name}"), item=item)
        return
    if launch_index is not None:
        raise UsageError("--launch-index is set by --launch for each of its launches")
    from ccbench.measure.launcher import prepare_launcher

    n = ranks_to_start(kw["launch"], resume, kw.get("oversubscribe", False), option="--launch")
    exe, _, env, extra = prepare_launcher(kw.get("launcher"), n, cfg.bind)  # extra: the binding too
    head = [exe, "-n", str(n), *extra, sys.executable, "-m", "mpi4py", "-m", "ccbench", *command]
    # several launches: replicates, or an overlap run's launch with MPICH's progress thread (its own environment)
    several = (cfg.launches > 1 or getattr(cfg, "async_progress", "off") != "off"
               or (resume is not None and (resume / "parts").is_dir()))
    start_jobs(head, lambda part_kw: to_argv(ctx, dict(part_kw, launch=None, launcher=None)), env,
               replication=replication(n) if several else None, kw=kw, nranks=n, resume=resume,
               resume_with=f"ccbench {name} --launch {n}", outcome=outcome)
