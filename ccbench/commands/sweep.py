"""``ccbench run``, ``launch``, ``list``, ``show`` and ``trace``: measure, list and look at sweeps."""

import sys

import click

from ccbench.commands.common import (
    OVERSUBSCRIBE,
    measure_here,
    new_console,
    ranks_to_start,
    resolve_with_resume,
    show_run,
    start_jobs,
    sweep_options,
    to_argv,
)
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS"]


@click.command()
@sweep_options
def run(**kw):
    """Run a sweep on every rank of MPI_COMM_WORLD (start it under an MPI launcher)."""
    cfg, resume = resolve_with_resume(kw)
    launch_index = kw.get("launch_index")

    def measure(thread, console):
        from ccbench.measure.sweep import run_sweep

        return run_sweep(cfg, thread=thread, argv=sys.argv, console=console, tag=kw["tag"], resume=resume,
                         launch=launch_index)

    measure_here(cfg, launch_index=launch_index, start_with="start the sweep with ccbench launch -n N",
                 add_launcher="start the sweep with ccbench launch -n N", measure=measure, show=kw["show"],
                 resume_with=("ccbench launch", "mpiexec -n {P} python -m mpi4py -m ccbench run"), item="case")


@click.command(context_settings={"ignore_unknown_options": False})
@click.option("-n", "n", type=click.IntRange(1),
              help="Number of ranks (default: one per usable core of this node; a resumed run's own).")
@OVERSUBSCRIBE
@click.option("--launcher", help="Launcher to use (default: mpiexec beside this Python, then PATH).")
@sweep_options
@click.argument("launcher_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def launch(ctx, n, oversubscribe, launcher, launcher_args, **kw):
    """Start the MPI launcher for you: LAUNCHER -n N python -m mpi4py -m ccbench run ...

    Options after `--` go to the launcher itself.
    """
    cfg, resume = resolve_with_resume(kw)  # refuse bad input before starting anything
    if kw.get("launch_index") is not None:
        raise UsageError("--launch-index is set by ccbench launch for each of its launches")
    n = ranks_to_start(n, resume, oversubscribe, launcher_args)
    from ccbench.measure.launcher import prepare_launcher
    from ccbench.measure.multilaunch import needs_launches, sweep_replication

    exe, version, env, extra = prepare_launcher(launcher, n, cfg.bind, launcher_args)  # extra: binding too
    note = _all_note(cfg, version)
    if note:
        click.echo(note)
    head = [exe, "-n", str(n), *extra, *launcher_args, sys.executable, "-m", "mpi4py", "-m", "ccbench", "run"]
    replication = None
    if needs_launches(cfg) or (resume is not None and (resume / "parts").is_dir()):
        # replicated launches, forced native:<alg> variants (one launch each): merged into one run
        from ccbench.algorithms.native_variants import library_of_launcher

        replication = sweep_replication(cfg, library_of_launcher(version))
    start_jobs(head, lambda part_kw: to_argv(ctx, part_kw), env, replication=replication, kw=kw, nranks=n,
               resume=resume, resume_with="ccbench launch")


def _all_note(cfg, launcher_version: str) -> str | None:
    """What ``-a all`` chose, and how to add the library's own variants it leaves out (None without ``all``)."""
    if "all" not in cfg.algorithms:
        return None
    from ccbench.algorithms import REGISTRY
    from ccbench.algorithms.native_variants import LIBRARIES, library_of_launcher, variant_names

    chosen = {c: [a for a, x in REGISTRY[c].items() if x.in_all] for c in cfg.collectives}
    n = sum(len(v) for v in chosen.values())
    line = (f"-a all: {n} algorithms over {len(chosen)} collective(s), the library's own (native) and every "
            "hand-written one")
    library = library_of_launcher(launcher_version)
    left = [v for c in cfg.collectives for v in variant_names(c, library) if v not in cfg.algorithms]
    if left and library:
        line += (f"; {len(left)} forced variants of {LIBRARIES[library]}'s own algorithms left out (add native:all "
                 "to time them, one launch per variant)")
    persistent = sorted({a for c in cfg.collectives for a, x in REGISTRY[c].items()
                         if x.setup is not None and a not in cfg.algorithms})
    if persistent:
        line += f"; the persistent forms left out (name them: {', '.join(persistent)})"
    nonblocking = sorted({a for c in cfg.collectives for a, x in REGISTRY[c].items()
                          if x.nonblocking is not None and a not in cfg.algorithms})
    if nonblocking:
        line += f"; the non-blocking forms left out (name them: {', '.join(nonblocking)})"
    return line


def _installed_library() -> str | None:
    """The MPI library of the launcher beside this Python ("mpich", "openmpi"; None when none answers), without
    starting MPI."""
    import subprocess

    from ccbench.algorithms.native_variants import library_of_launcher
    from ccbench.measure.launcher import find_launcher

    try:
        exe = find_launcher(None)
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (UsageError, OSError, subprocess.SubprocessError):
        return None
    return library_of_launcher(version)


@click.command("list")
@click.argument("collectives", nargs=-1, metavar="[COLLECTIVE...]")
def list_cmd(collectives):
    """Collectives and their algorithms, with constraints and cost formulas (all, or the COLLECTIVEs named)."""
    from ccbench.present.table import to_rich
    from ccbench.present.views import algorithms_table

    only = None
    if collectives:
        from ccbench.measure.config import collectives_named

        only = collectives_named(",".join(collectives))
    new_console().print(to_rich(algorithms_table(only, _installed_library())))


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
@click.option("--osu", is_flag=True,
              help="OSU/IMB statistics: each rank's mean, then avg/min/max over ranks; p50/p90/p99 (sweeps).")
@click.option("--size-per-rank", "per_rank", is_flag=True,
              help="Sizes as one rank's block for scatter, gather, allgather and alltoall (as OSU counts them).")
@click.option("-C", "--collective", "collectives", help="Only these collectives, comma separated (sweeps).")
def show(run_path, results_dir, osu, per_rank, collectives):
    """Print a stored run as tables (median, CI, bus bandwidth, flags, failures)."""
    from ccbench.store.results import resolve_run

    path = resolve_run(run_path, results_dir)
    if not (osu or per_rank or collectives):
        show_run(path, new_console())
        return
    import dataclasses

    from ccbench.present.views import show_sweep
    from ccbench.store.run import open_run

    run = open_run(path, results_dir, kinds=("sweep",), what="show --osu/--size-per-rank/-C")
    if collectives:
        from ccbench.measure.config import collectives_named

        only = collectives_named(collectives)
        rows = [r for r in run.rows if r.collective in only]
        if not rows:
            raise UsageError(f"{path} has no {' or '.join(only)} cases (it has "
                             f"{', '.join(dict.fromkeys(r.collective for r in run.rows)) or 'none'})")
        run = dataclasses.replace(run, rows=rows)
    show_sweep(run, new_console(), osu=osu, per_rank=per_rank)


@click.command()
@click.argument("collective")
@click.argument("algorithm")
@click.option("-n", "nranks", type=click.IntRange(1, 256), default=4, show_default=True, help="Ranks.")
@click.option("--count", type=click.IntRange(0, 10_000_000), default=None,
              help="Elements per buffer (per block for blocked collectives); default 2P.")
@click.option("-t", "--dtype", default="float32", show_default=True)
@click.option("--op", default="sum", show_default=True)
@click.option("--root", type=click.IntRange(0), default=0, show_default=True)
@click.option("--in-place", is_flag=True, help="Run the in-place variant.")
@click.option("--counts", default="uniform", show_default=True,
              help="Block sizes of a v-collective: uniform, heavy[:F], zipf[:S], moe[:E,K,CF[,T]][@SEED], weights:...")
def trace(collective, algorithm, nranks, count, dtype, op, root, in_place, counts):
    """Print an algorithm's step-by-step schedule and traffic, simulated (no MPI needed)."""
    from ccbench.analysis.trace import trace as do_trace
    from ccbench.core.dtypes import dtype_of, ufunc_of
    from ccbench.present.trace import render

    dtype_of(dtype)
    ufunc_of(op)
    if root >= nranks:
        raise UsageError(f"root {root} does not exist with {nranks} ranks")
    t = do_trace(collective, algorithm, nranks, 2 * nranks if count is None else count,
                 dtype=dtype, op=op, root=root, in_place=in_place, counts=counts)
    render(t, new_console())




COMMANDS = [run, launch, list_cmd, show, trace]
