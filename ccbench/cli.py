"""The ccbench command line: thin click commands over the library."""

import os
import sys
from pathlib import Path

import click

from ccbench.errors import CCBenchError, UsageError
from ccbench.options import network_options

__all__ = ["cli", "main"]


def _print_error(msg: str) -> None:
    """One line on stderr, from rank 0 only (or outside any launcher)."""
    from ccbench.provenance import env_rank

    if env_rank() in (None, 0):
        click.echo(f"ccbench: error: {msg}", err=True)


def _console():
    """A rich console; wide enough for the tables when output goes to a file or a pipe."""
    from rich.console import Console

    # under `ccbench launch` from a terminal, rank 0's output reaches that terminal
    # through the launcher's pipes: keep the progress bar and colours
    console = Console(force_terminal=True) if os.environ.get("CCBENCH_TERMINAL") == "1" else Console()
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
    click.option("--watchdog", "watchdog_s", type=float,
                 help="End the job when a case runs this many seconds past its budget (default 300; 0 = off)."),
    click.option("--sync", type=click.Choice(["barrier", "window"]),
                 help="Synchronisation before each sample (default barrier)."),
    click.option("--thread-level", "thread_level",
                 type=click.Choice(["auto", "single", "funneled", "serialized", "multiple"]),
                 help="MPI thread level; auto = multiple when ranks oversubscribe the cores, else single."),
    click.option("--results-dir", "results_dir", help="Where run directories are created (default results/)."),
    click.option("--tag", default="", help="Appended to the run directory's name."),
    click.option("--resume", "resume", metavar="RUN",
                 help="Continue an interrupted run in its directory, skipping its finished cases "
                      "(same configuration, ranks and MPI library; sweep options may be left out)."),
    click.option("--show/--no-show", default=True, help="Print the results table at the end."),
]
_CONFIG_KEYS = ("collectives", "algorithms", "sizes", "dtypes", "ops", "in_place", "root", "warmup",
                "min_reps", "max_reps", "target_rse", "budget_s", "sync", "thread_level", "results_dir",
                "watchdog_s")


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
    cfg, resume = _resolve_with_resume(kw)
    from ccbench.provenance import choose_thread_level

    thread = choose_thread_level(cfg.thread_level)
    import mpi4py

    mpi4py.rc.thread_level = thread[0]
    from mpi4py import MPI

    from ccbench.runner import run_sweep

    rank = MPI.COMM_WORLD.Get_rank()
    console = _console() if rank == 0 else None
    try:
        code, path = run_sweep(cfg, thread=thread, argv=sys.argv, console=console, tag=kw["tag"],
                               resume=resume)
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


def _resolve_with_resume(kw: dict):
    """(config, run directory to resume or None); a resumed run keeps its own configuration."""
    if not kw.get("resume"):
        return _resolve(kw), None
    import dataclasses

    from ccbench.config import resolve
    from ccbench.results import load_run, resolve_run

    path = resolve_run(kw["resume"], kw.get("results_dir") or "results")
    meta, _, _ = load_run(path)
    stored = resolve(meta.get("config", {}))
    flags = {k: kw.get(k) for k in _CONFIG_KEYS if k != "results_dir" and kw.get(k) is not None}
    if kw.get("config_file") or flags:
        # a config file restates the whole sweep; bare flags restate only themselves
        mine = (_resolve(kw) if kw.get("config_file") else resolve({**meta.get("config", {}), **flags}))
        mine = dataclasses.replace(mine, results_dir=stored.results_dir)
        if mine != stored:
            diff = [f.name for f in dataclasses.fields(stored) if getattr(mine, f.name) != getattr(stored, f.name)]
            raise UsageError(f"cannot resume {path}: its configuration differs in {', '.join(diff)}; "
                             "resume with the same options, or with none")
    return stored, path


def _show(path, console, show_table=True) -> None:
    from ccbench.results import load_run
    from ccbench.views import rows_tables, run_header
    from ccbench.workloads.views import is_workload_run, show_workload

    if is_workload_run(path):
        show_workload(path, console, show_table)
        return
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
    cfg, _ = _resolve_with_resume(kw)  # refuse bad input before starting anything
    from ccbench.launcher import prepare_launcher

    exe, version, env, extra = prepare_launcher(launcher)
    head = [exe, "-n", str(n), *extra, *launcher_args, sys.executable, "-m", "mpi4py", "-m", "ccbench", "run"]
    cmd = [*head, *_to_argv(ctx, kw)]
    from ccbench.multilaunch import has_variants, launch_parts

    if has_variants(cfg):  # forced native:<alg> variants: one launch each, merged into one run
        from ccbench.algorithms.native_variants import library_of_launcher

        code, merged = launch_parts(cfg, kw, library_of_launcher(version),
                                    lambda part_kw: [*head, *_to_argv(ctx, part_kw)], env, _run_launcher, n,
                                    sys.argv, say=_console().print)
        _show(merged, _console(), show_table=kw["show"])
        raise SystemExit(code)
    code = _run_launcher(cmd, env)
    if code:
        raise SystemExit(code if code > 0 else 128 - code)


def _run_launcher(cmd: list[str], env: dict) -> int:
    """Run one launcher command (`ccbench.launcher.run_job`); say how to continue a run it left failed."""
    from ccbench.launcher import run_job
    from ccbench.results import load_run

    job = run_job(cmd, env)
    if job.marked_failed:
        _, rows, _ = load_run(job.run_dir)
        _print_error(f"the job ended with {job.why} before the sweep finished; {len(rows)} finished cases kept "
                     f"in {job.run_dir}, marked failed; continue it with --resume {job.run_dir}")
    return job.code


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
                      alg.formula or ("forced (" + ", ".join(alg.settings) + ")" if alg.settings
                                      else "library's choice" if alg.native else "-"), alg.summary,
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



# -- fitting and predicting (issue 4) -----------------------------------------------------


def _ci(ci, fmt) -> str:
    """An interval as [lo, hi] with `fmt` applied, or - when unknown."""
    if not ci or any(v is None or v != v for v in ci):
        return "-"
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _gbs(beta) -> str:
    return "-" if beta is None or beta != beta else ("inf" if beta <= 0 else f"{1e-9 / beta:.3g}")


def _gamma(g) -> str:
    return "-" if g is None or g != g else f"{g * 1e12:.3g} ps/B"


def _network_table(net: dict):
    from rich.table import Table

    from ccbench.views import fmt_time

    pp, jt = net.get("pingpong"), net.get("joint")
    ratios = {c["parameter"]: c for c in net.get("comparison", [])}
    t = Table(title="network parameters (95% CI): alpha latency, bandwidth = 1/beta (GB/s = 1e9 B/s), "
                    f"gamma time per reduced byte; predictions use: {net.get('used_for_predictions')}",
              title_justify="left", header_style="bold")
    for col in ("parameter", "ping-pong + reduce_local", "95% CI", "joint (counted traffic)", "95% CI",
                "joint / ping-pong", "CIs overlap"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    fmts = {"alpha_s": ("alpha", fmt_time, "alpha_ci_s"),
            "beta_s_per_byte": ("bandwidth GB/s", _gbs, "beta_ci_s_per_byte"),
            "gamma_s_per_byte": ("gamma", _gamma, "gamma_ci_s_per_byte")}
    for key, (label, fmt, ci_key) in fmts.items():
        cells = [label]
        for est in (pp, jt):
            v = est.get(key) if est else None
            cells += [fmt(v) if v is not None else "-",
                      _ci(est.get(ci_key) if est else None, fmt)]
            if key == "beta_s_per_byte" and cells[-1] != "-":  # bandwidth bounds swap
                lo, hi = est[ci_key]
                cells[-1] = f"[{_gbs(hi)}, {_gbs(lo)}]"
        c = ratios.get(key)
        cells += [f"{c['ratio']:.3g}" + (" (of beta)" if key == "beta_s_per_byte" else "")
                  if c and c.get("ratio") is not None else "-",
                  "-" if not c or c.get("cis_overlap") is None else ("yes" if c["cis_overlap"] else "no")]
        t.add_row(*cells)
    return t


def _curves_table(curves: list):
    from rich.table import Table

    from ccbench.config import format_size
    from ccbench.views import fmt_time

    t = Table(title="per-curve fits T(n) = alpha + beta n (segments chosen by BIC; 95% bootstrap CIs)",
              title_justify="left", header_style="bold")
    for col in ("collective", "algorithm", "P", "dtype/op", "segments: sizes  alpha [CI]  GB/s [CI]",
                "breakpoints", "R2", "max rel resid", "flags"):
        t.add_column(col, justify="right" if col in ("P", "R2", "max rel resid") else "left")
    for c in curves:
        seg = c["segmented"]
        lines = [f"{format_size(s['nbytes_lo'])}-{format_size(s['nbytes_hi'])}  "
                 f"{fmt_time(s['alpha_s'])} {_ci(s['alpha_ci_s'], fmt_time)}  "
                 f"{_gbs(s['beta_s_per_byte'])} [{_gbs(s['beta_ci_s_per_byte'][1])}, "
                 f"{_gbs(s['beta_ci_s_per_byte'][0])}]" for s in seg["segments"]]
        t.add_row(c["collective"], c["algorithm"], str(c["nranks"]),
                  f"{c['dtype']}/{c['op']}" if c["op"] else str(c["dtype"]), "\n".join(lines),
                  ", ".join(format_size(b) for b in seg["breakpoints_bytes"]) or "-",
                  f"{seg['r2']:.3f}", f"{seg['max_rel_residual']:.0%}", ",".join(c["flags"]))
    return t


def _who_wins_tables(who: list):
    from rich.table import Table

    from ccbench.config import format_size

    out = []
    for w in who:
        t = Table(title=f"who wins: {w['collective']} (agreement "
                        + ("-" if w["agreement"] is None else f"{w['agreement']:.0%}") + ")",
                  title_justify="left", header_style="bold")
        for col in ("P", "size", "measured fastest", "fastest modelled", "predicted", "agree", "margin"):
            t.add_column(col, justify="right" if col in ("P", "size", "margin") else "left")
        for r in w["rows"]:
            t.add_row(str(r["nranks"]), format_size(r["nbytes"]), r["measured_winner"],
                      r["measured_winner_modelled"] or "-", r["predicted_winner"] or "-",
                      "-" if r["agree"] is None else ("yes" if r["agree"] else "[red]no[/]"),
                      "-" if r["margin"] is None else f"{r['margin']:.0%}")
        xs = [f"{x['faster_below']} -> {x['faster_above']} at {format_size(round(x['nbytes']))} (P={x['nranks']})"
              for x in w["crossovers"]]
        t.caption = "predicted crossovers: " + ("; ".join(xs) if xs else "none in the measured range")
        t.caption_justify = "left"
        out.append(t)
    return out


def _off_table(checks: list, tolerance: float):
    from rich.table import Table

    from ccbench.config import format_size
    from ccbench.views import fmt_time

    off = [c for c in checks if c["off"]]
    t = Table(title=f"predicted vs measured: {len(off)} of {len(checks)} modelled cases off by more "
                    f"than {tolerance:.0%} (ratio = measured / predicted)",
              title_justify="left", header_style="bold")
    for col in ("collective", "algorithm", "P", "size", "measured", "predicted", "ratio", "likely reason"):
        t.add_column(col, justify="right" if col in ("P", "size", "measured", "predicted", "ratio") else "left")
    for c in off:
        t.add_row(c["collective"], c["algorithm"], str(c["nranks"]), format_size(c["nbytes"]),
                  fmt_time(c["measured_s"]), fmt_time(c["predicted_s"]),
                  "-" if c["ratio"] is None else f"{c['ratio']:.2f}", ", ".join(c["reasons"]) or "unknown")
    return t


@cli.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
def fit(run_path, results_dir):
    """Fit cost models to a stored run; write fits.json and fits.csv beside it and print tables.

    Fits every curve (alpha + beta n, segmented at protocol changes), the network
    parameters from ping-pong + the local reduction benchmark and jointly over the
    hand-written algorithms, checks predictions against the measurements and says who
    wins where.  The run's own files are never modified; earlier fits are never overwritten.
    """
    from ccbench.analysis import fit_run
    from ccbench.views import fmt_time

    doc = fit_run(run_path, results_dir)
    console = _console()
    console.print(f"[bold]fits of {doc['source_path']}[/] ({doc['source_provenance'].get('mpi_library', '?')}, "
                  f"{doc['source_provenance'].get('nranks', '?')} ranks"
                  f"{', oversubscribed' if doc['source_provenance'].get('oversubscribed') else ''})")
    for w in doc["warnings"] + doc["notes"]:
        console.print(f"[yellow]note: {w}[/]")
    console.print(_network_table(doc["network"]))
    over = doc["network"].get("step_overhead")
    if over:
        console.print(f"software overhead per step of the hand-written algorithms, beyond alpha: "
                      f"{fmt_time(over['seconds'])} (median over {over['cases']} cases <= {over['max_bytes']} B)"
                      + ("; negative: they pay less per step than this alpha, which is itself inflated "
                         "(ping-pong on oversubscribed cores?), so it explains no case" if over["seconds"] < 0 else ""))
    if doc.get("lab"):
        from ccbench.lab.check import lab_table

        console.print(lab_table(doc["lab"]))
    console.print(_curves_table(doc["curves"]))
    for t in _who_wins_tables(doc["who_wins"]):
        console.print(t)
    if doc["model_checks"]:
        console.print(_off_table(doc["model_checks"], doc["provenance"]["tolerance"]))
    run_dir = Path(doc["source_path"])
    console.print(f"wrote {run_dir / doc['files']['json']} and {run_dir / doc['files']['csv']}")


@cli.command("predict")
@network_options
@click.option("--intra-alpha", "intra_alpha", help="Intra-node latency for the two-level allreduce.")
@click.option("--intra-beta", "intra_beta", help="Intra-node s/byte or bandwidth, as --beta.")
@click.option("--ppn", type=int, help="Ranks per node for the two-level allreduce.")
@click.option("-n", "ranks", required=True, help="Rank counts: 1024,4096 or a range 64:65536:4.")
@click.option("-s", "--sizes", default="8:64M:8", show_default=True, help="Sizes in bytes: 8:64M[:FACTOR] or 8,4K,1M.")
@click.option("-C", "--collective", "collectives", help="Collectives, comma separated (default: every modelled one).")
def predict_cmd(from_run, results_dir, alpha, beta, gamma, intra_alpha, intra_beta, ppn, ranks, sizes,
                collectives):
    """Predict every modelled algorithm's time at any rank count and size, and the winner per size."""
    from rich.table import Table

    from ccbench.analysis import given_params, parse_inverse_rate, parse_ranks, parse_time, predict_table
    from ccbench.config import format_size, parse_sizes
    from ccbench.predict import TwoLevelParams
    from ccbench.views import fmt_time

    params, source = given_params(from_run, results_dir, alpha, beta, gamma)
    rank_list, size_list = parse_ranks(ranks), parse_sizes(sizes)
    colls = [c.strip() for c in collectives.split(",") if c.strip()] if collectives else None
    two = None
    intra = (intra_alpha, intra_beta, ppn)
    if any(v is not None for v in intra):
        if any(v is None for v in intra):
            raise UsageError("the two-level model needs all of --intra-alpha, --intra-beta and --ppn")
        if ppn < 1:
            raise UsageError(f"--ppn must be at least 1, got {ppn}")
        ia, ib = parse_time(intra_alpha, "--intra-alpha"), parse_inverse_rate(intra_beta, "--intra-beta")
        if ia < 0 or ib < 0:
            raise UsageError("--intra-alpha and --intra-beta must be >= 0")
        two = TwoLevelParams(ia, ib, params.alpha_s, params.beta_s_per_byte, ppn,
                             params.gamma_s_per_byte or 0.0)
    tables = predict_table(params, rank_list, size_list, colls, two_level=two)
    console = _console()
    g = params.gamma_s_per_byte
    console.print(f"parameters {source}: alpha = {fmt_time(params.alpha_s)}, "
                  f"beta = {params.beta_s_per_byte:.4g} s/B ({_gbs(params.beta_s_per_byte)} GB/s), "
                  f"gamma = {_gamma(g) if g is not None else '0 (not given)'}"
                  + (f"; two-level: intra alpha = {fmt_time(two.intra_alpha_s)}, intra beta = "
                     f"{two.intra_beta_s_per_byte:.4g} s/B, {two.ranks_per_node} ranks per node, "
                     "inter = the parameters above" if two else ""))
    for tab in tables:
        t = Table(title=f"predicted {tab['collective']} at {tab['nranks']} ranks", title_justify="left",
                  header_style="bold")
        t.add_column("size", justify="right", no_wrap=True)
        for name in tab["times_s"]:
            head = name.replace("/", "/\n", 1) if "/" in name else name.replace("_", "_\n", 1)
            t.add_column(head if len(name) > 12 else name, justify="right", no_wrap=True)
        t.add_column("winner", no_wrap=True, min_width=max(map(len, tab["winners"])))
        for i, n in enumerate(tab["sizes"]):
            t.add_row(format_size(n), *[fmt_time(v[i]) for v in tab["times_s"].values()], tab["winners"][i])
        console.print(t)

def _add_module_commands() -> None:
    from ccbench import commands

    for command in commands.load():
        cli.add_command(command)


_add_module_commands()


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
