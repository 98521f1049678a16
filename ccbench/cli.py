"""The ccbench command line: thin click commands over the library."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from ccbench.errors import CCBenchError, UsageError

__all__ = ["cli", "main"]


def _print_error(msg: str) -> None:
    """One line on stderr, from rank 0 only (or outside any launcher)."""
    from ccbench.provenance import env_rank

    if env_rank() in (None, 0):
        click.echo(f"ccbench: error: {msg}", err=True)


def _console():
    """A rich console; wide enough for the tables when output goes to a file or a pipe."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=160)
    return console


# -- the options of a sweep, shared by `run` and `launch` ---------------------------------
_SWEEP_OPTIONS = [
    click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False),
                 help="TOML sweep file (see configs/); flags override its keys."),
    click.option("-C", "--collective", "collectives", help="Collectives, comma separated, or all."),
    click.option("-a", "--algorithm", "algorithms", help="Algorithms, comma separated (native, ring, ...) or all."),
    click.option("-s", "--sizes", help="Sizes in bytes: 8:1M (x2 sweep), 8:1M:4, or a list 8,4K,1M."),
    click.option("-t", "--dtype", "dtypes", help="Element types: uint8,int32,int64,float32,float64 or all."),
    click.option("--op", "ops", help="Reduction ops: sum,prod,min,max or all."),
    click.option("--in-place", "in_place", type=click.Choice(["no", "yes", "both"]),
                 help="Out-of-place (no), in-place (yes) or both."),
    click.option("--root", help="Root rank of rooted collectives, or rotate (every root in turn)."),
    click.option("--warmup", type=int, help="Untimed calls before sampling (default 5)."),
    click.option("--min-reps", "min_reps", type=int, help="Samples before the RSE rule may stop (default 20)."),
    click.option("--max-reps", "max_reps", type=int, help="Most samples per case (default 1000)."),
    click.option("--target-rse", "target_rse", type=float,
                 help="Stop when the relative standard error of the mean is below this (default 0.05)."),
    click.option("--budget", "budget_s", type=float, help="Time budget per case in seconds (default 1)."),
    click.option("--sync", type=click.Choice(["barrier", "window"]),
                 help="Synchronisation before each sample (default barrier)."),
    click.option("--thread-level", "thread_level",
                 type=click.Choice(["auto", "single", "funneled", "serialized", "multiple"]),
                 help="MPI thread level; auto = multiple when ranks oversubscribe the cores, else single."),
    click.option("--results-dir", "results_dir", help="Where run directories are created (default results/)."),
    click.option("--tag", default="", help="Appended to the run directory's name."),
    click.option("--show/--no-show", default=True, help="Print the results table at the end."),
]
_CONFIG_KEYS = ("collectives", "algorithms", "sizes", "dtypes", "ops", "in_place", "root", "warmup",
                "min_reps", "max_reps", "target_rse", "budget_s", "sync", "thread_level", "results_dir")


def sweep_options(fn):
    for opt in reversed(_SWEEP_OPTIONS):
        fn = opt(fn)
    return fn


def _resolve(kw: dict):
    from ccbench.config import load_config

    return load_config(kw.get("config_file"), {k: kw.get(k) for k in _CONFIG_KEYS})


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ccbench")
def cli():
    """ccbench: MPI collectives, native and hand-written, measured, checked and modelled.

    Run a sweep under a launcher (mpiexec -n 4 python -m mpi4py -m ccbench run ...) or let
    `ccbench launch -n 4 ...` start the launcher for you.
    """


@cli.command()
@sweep_options
def run(**kw):
    """Run a sweep on every rank of MPI_COMM_WORLD (start it under an MPI launcher)."""
    cfg = _resolve(kw)
    from ccbench.provenance import choose_thread_level

    thread = choose_thread_level(cfg.thread_level)
    import mpi4py

    mpi4py.rc.thread_level = thread[0]
    from mpi4py import MPI

    from ccbench.runner import run_sweep

    rank = MPI.COMM_WORLD.Get_rank()
    console = _console() if rank == 0 else None
    try:
        code, path = run_sweep(cfg, thread=thread, argv=sys.argv, console=console, tag=kw["tag"])
    except CCBenchError as exc:
        if rank == 0:
            click.echo(f"ccbench: error: {exc}", err=True)
        MPI.Finalize()  # every rank got here: leave quietly instead of aborting the job
        raise SystemExit(exc.exit_code) from None
    if rank == 0 and path is not None:
        _show(path, console, show_table=kw["show"])
    MPI.Finalize()
    if code:
        raise SystemExit(code)


def _show(path, console, show_table=True) -> None:
    from ccbench.results import load_run
    from ccbench.views import rows_tables, run_header

    meta, rows, warnings = load_run(path)
    if show_table:
        console.print(run_header(meta, path))
        for t in rows_tables(rows):
            console.print(t)
    for w in warnings:
        console.print(f"[yellow]warning: {w}[/]")
    bad = [r for r in rows if not r.ok]
    skipped = meta.get("skipped", [])
    console.print(f"{len(rows)} cases in {path}" + (f", {len(skipped)} skipped" if skipped else "")
                  + (f", [red bold]{len(bad)} FAILED[/]" if bad else ", all correct"))


def _find_launcher(explicit: str | None) -> str:
    if explicit:
        found = shutil.which(explicit)
        if not found:
            raise UsageError(f"MPI launcher {explicit!r} not found")
        return found
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpirun"):
        cand = here / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name)
        if found:
            return found
    raise CCBenchError("no MPI launcher (mpiexec or mpirun) found; install one with "
                       "pip install 'ccbench[mpich]' or load your site's MPI module")


def _to_argv(ctx: click.Context, kw: dict) -> list[str]:
    """Turn parsed sweep options back into `ccbench run` arguments."""
    out: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in ("n", "launcher"):
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


@cli.command(context_settings={"ignore_unknown_options": False})
@click.option("-n", "n", type=click.IntRange(1), required=True, help="Number of ranks.")
@click.option("--launcher", help="Launcher to use (default: mpiexec beside this Python, then PATH).")
@sweep_options
@click.argument("launcher_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def launch(ctx, n, launcher, launcher_args, **kw):
    """Start the MPI launcher for you: LAUNCHER -n N python -m mpi4py -m ccbench run ...

    Options after `--` go to the launcher itself.
    """
    _resolve(kw)  # refuse bad input before starting anything
    exe = _find_launcher(launcher)
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    env = dict(os.environ)
    extra: list[str] = []
    if "Open MPI" in version or "OpenRTE" in version:
        if os.geteuid() == 0:
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        extra.append("--oversubscribe")
    cmd = [exe, "-n", str(n), *extra, *launcher_args, sys.executable, "-m", "mpi4py", "-m",
           "ccbench", "run", *_to_argv(ctx, kw)]
    try:
        proc = subprocess.run(cmd, env=env)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if proc.returncode:
        raise SystemExit(proc.returncode)


@cli.command("list")
def list_cmd():
    """Collectives and their algorithms, with constraints and cost formulas."""
    from rich.table import Table

    from ccbench.algorithms import REGISTRY
    from ccbench.collectives import COLLECTIVES

    t = Table(title="collectives and algorithms (a = latency, b = s/byte, g = reduction s/byte; "
                    "n = size in bytes, P = ranks)", title_justify="left", header_style="bold")
    for col in ("collective", "algorithm", "kind", "cost", "summary"):
        t.add_column(col, overflow="fold")
    for coll, algs in REGISTRY.items():
        for i, (name, alg) in enumerate(algs.items()):
            t.add_row(coll if i == 0 else "", name, "native" if alg.native else "hand-written",
                      alg.formula or ("library's choice" if alg.native else "-"), alg.summary,
                      end_section=i == len(algs) - 1)
        if not algs:
            t.add_row(coll, "-", "", "", COLLECTIVES[coll].summary, end_section=True)
    _console().print(t)


@cli.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
def show(run_path, results_dir):
    """Print a stored run as tables (median, CI, bus bandwidth, flags, failures)."""
    from ccbench.results import resolve_run

    _show(resolve_run(run_path, results_dir), _console())


@cli.command()
@click.argument("collective")
@click.argument("algorithm")
@click.option("-n", "nranks", type=click.IntRange(1, 256), default=4, show_default=True, help="Ranks.")
@click.option("--count", type=click.IntRange(0, 10_000_000), default=None,
              help="Elements per buffer (per block for blocked collectives); default 2P.")
@click.option("-t", "--dtype", default="float32", show_default=True)
@click.option("--op", default="sum", show_default=True)
@click.option("--root", type=click.IntRange(0), default=0, show_default=True)
@click.option("--in-place", is_flag=True, help="Run the in-place variant.")
def trace(collective, algorithm, nranks, count, dtype, op, root, in_place):
    """Print an algorithm's step-by-step schedule and traffic, simulated (no MPI needed)."""
    from ccbench.dtypes import dtype_of, ufunc_of
    from ccbench.trace import render
    from ccbench.trace import trace as do_trace

    dtype_of(dtype)
    ufunc_of(op)
    if root >= nranks:
        raise UsageError(f"root {root} does not exist with {nranks} ranks")
    t = do_trace(collective, algorithm, nranks, 2 * nranks if count is None else count,
                 dtype=dtype, op=op, root=root, in_place=in_place)
    render(t, _console())


def main(argv=None) -> None:
    """Entry point: run the CLI, turning expected errors into one line and an exit code."""
    try:
        cli.main(args=argv, prog_name="ccbench", standalone_mode=False)
    except click.exceptions.Abort:
        _print_error("aborted")
        raise SystemExit(130) from None
    except click.ClickException as exc:
        _print_error(exc.format_message())
        raise SystemExit(exc.exit_code) from None
    except CCBenchError as exc:
        _print_error(str(exc))
        raise SystemExit(exc.exit_code) from None
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code) from None
