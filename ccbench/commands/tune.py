"""``ccbench tune``: the tuning file that makes the MPI library pick its fastest measured algorithm."""

import click

__all__ = ["COMMANDS"]


@click.command("tune")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", required=True, type=click.Choice(["mpich-json", "openmpi-rules", "openmpi-json"]),
              help="MPICH's selection JSON, Open MPI's classic rules file, or Open MPI's JSON rules (6.0+).")
@click.option("-o", "--output", metavar="FILE", help="Where to write it (default: tuning.* in the first run; "
              "never overwritten).")
@click.option("--results-dir", default="results", show_default=True, help="Where to look for RUN by name or latest.")
@click.option("--verify", is_flag=True, help="Relaunch the library's default selection with the file and show, "
              "per size, whether its time moved to the best variant's.")
def tune(runs, fmt, output, results_dir, verify):
    """Write the MPI library's tuning file from the native:<alg> variants measured in RUN(s).

    Per collective, rank count (one run per rank count) and size range, the fastest
    measured variant; boundaries at the measured crossovers.  Measure the variants with
    e.g. ccbench launch -n 4 -C allreduce,bcast -a native,native:all.
    """
    from ccbench.analysis.tune import tune_runs
    from ccbench.analysis.tune import verify as do_verify
    from ccbench.commands.common import new_console
    from ccbench.present.tune import print_selections, print_verification

    console = new_console()
    doc = tune_runs(runs, fmt, output, results_dir)
    print_selections(doc, console)
    if verify:
        print_verification(doc["path"], do_verify(doc, say=console.print), console)


COMMANDS = [tune]
