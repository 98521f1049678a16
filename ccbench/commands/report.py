"""``ccbench report``, ``ccbench compare`` and ``ccbench plot``: views of stored runs.

Thin click commands over `ccbench.present.report`, `ccbench.analysis.compare` and `ccbench.present.plots`; what
they print are rich tables of stored rows (medians, CIs, bandwidths) and of numbers
derived from them (ratios, tests, fits).  Nothing heavy is imported at module level.
"""

import click

from ccbench.commands.options import OUT_OPTION
from ccbench.core.errors import UsageError

__all__ = ["COMMANDS"]

KINDS = ("latency", "busbw", "predicted")


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
@OUT_OPTION
def report(run_path, results_dir, out):
    """Write a report of a stored run: Markdown + HTML page, PNG figures, the fits used.

    Per collective: latency (median with 95% CI) and bus-bandwidth tables per algorithm and
    size, the fastest algorithm per size, fitted alpha-beta parameters, and figures
    (latency with CI bands and fitted lines, bus bandwidth, predicted vs measured).  Goes
    into a new folder report (report-2, ...) of --out DIR, by default RESULTS-derived/RUN
    beside the results tree; the run is only read.  A training-workload run gets its step
    times, per-call rows, overlap or straggler tables, the fastest algorithm per variant,
    and bar figures.
    """
    from ccbench.commands.common import new_console
    from ccbench.present.kinds import print_report
    from ccbench.workflow.report import report as write_report

    print_report(write_report(run_path, results_dir, out), new_console())


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN_A RUN_B [RUN ...]")
@click.option("--results-dir", default="results", help="Where to look for runs given by name or 'latest'.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Folder for compare.csv / compare.md / compare.png (default: RESULTS-derived/RUN_A beside the "
                   "results tree; the runs are never written).")
@click.option("--level", type=float, default=0.05, show_default=True,
              help="Significance level of the adjusted launch-level tests (and 1 - confidence of the intervals).")
@click.option("--min-effect", metavar="FRACTION",
              help="Practical threshold, e.g. 5% or 0.05: a difference whose whole interval lies within +- it is "
                   "noise.")
@click.option("--launch-cv", metavar="CV",
              help="Between-launch CV to assume where a run has a single launch, e.g. 20% or 0.2: one measured "
                   "earlier on the same machine (compare prints it for runs of --launches K); default 35%.")
@click.option("--no-plot", is_flag=True, help="Write no figure (no matplotlib needed).")
@click.option("--fail-on", "fail_on", metavar="slower[:X%]",
              help="Exit 1 when a case is decided slower (faster, different) at the launch level by more than X "
                   "(the ratio's interval beyond 1 + X): a regression gate for CI.")
def compare(runs, results_dir, out_dir, level, min_effect, launch_cv, no_plot, fail_on):
    """Compare runs case by case against the first: medians, ratios, launch-level verdicts, summary.

    Cases match on collective, algorithm, size, dtype, op, in place and root.  Ratio =
    run / RUN_A (> 1: slower), with its interval at the launch level.  The launch is the
    unit: runs of 2 or more launches (ccbench launch --launches K) are compared by Welch's
    t test of the per-launch log-medians; with a single launch on a side the launch-to-launch
    variation cannot be estimated, a between-launch CV is assumed (--launch-cv, default 35%)
    and a difference it cannot resolve is "undetermined".  p-values are adjusted over all
    cases (Benjamini-Hochberg); below --level a case is faster or slower.  Provenance that
    changes what is measured (MPI library, ranks, nodes, ranks per node, dtypes, thread
    level, ...) is warned about.  Training-workload runs match on workload, variant, model,
    algorithm, call, size and delay; a workload run and a sweep are refused.
    """
    from ccbench.analysis.compare import parse_fraction
    from ccbench.commands.common import new_console
    from ccbench.present.compare import print_comparison
    from ccbench.workflow.compare import compare as compare_runs
    from ccbench.workflow.compare import write_comparison

    if len(runs) < 2:
        raise UsageError("compare needs at least two runs: RUN_A RUN_B [RUN ...]")
    effect = 0.0 if min_effect is None else parse_fraction(min_effect, "--min-effect")
    from ccbench.analysis.gate import gate_failures, parse_fail_on

    gate = None if fail_on is None else parse_fail_on(fail_on)
    cv = None if launch_cv is None else parse_fraction(launch_cv, "--launch-cv")
    from ccbench.present.plots import have_matplotlib, print_no_figures

    missing = not no_plot and not have_matplotlib()  # the tables all the same, and how to add the figure
    cmp = compare_runs(runs, results_dir, level=level, min_effect=effect, launch_cv=cv)
    console = new_console()
    print_comparison(cmp, console)
    files = write_comparison(cmp, out_dir, plot=not (no_plot or missing))
    if missing:
        print_no_figures(console)
    console.print("wrote " + ", ".join(str(p) for p in files.values()))
    if gate is not None:
        from ccbench.present.gate import failures_table
        from ccbench.present.table import to_rich

        failures = gate_failures(cmp.pairs, *gate, unmatched=cmp.unmatched, withheld=cmp.withheld)
        if failures:
            console.print(to_rich(failures_table(failures, *gate)))
            raise SystemExit(1)
        console.print(f"--fail-on {fail_on}: no case decided {gate[0]} beyond the margin")


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
@click.option("-C", "--collective", "collectives", help="Collectives, comma separated (default: all in the run).")
@click.option("--kind", type=click.Choice(KINDS), default="latency", show_default=True,
              help="latency (with CI bands and fitted lines), busbw, or predicted (measured vs model).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="PNG file to write (one collective only); default plot-COLLECTIVE-KIND.png, numbered, in --out.")
@OUT_OPTION
def plot(run_path, results_dir, collectives, kind, output, out):
    """Write single PNG figures of a stored run, one per collective (never overwriting a file)."""
    from pathlib import Path

    from ccbench.commands.common import new_console
    from ccbench.workflow.plot import plot_run

    written = plot_run(run_path, results_dir, collectives, kind, Path(output) if output else None, out)
    new_console().print("wrote " + ", ".join(str(p) for p in written))


COMMANDS = [report, compare, plot]
