"""``ccbench tune``: the tuning file that makes the MPI library pick its fastest measured algorithm."""

import functools

import click

from ccbench.commands.options import OUT_OPTION

__all__ = ["COMMANDS"]


@click.command("tune")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", required=True, type=click.Choice(["mpich-json", "openmpi-rules", "openmpi-json"]),
              help="MPICH's selection JSON, Open MPI's classic rules file, or Open MPI's JSON rules (6.0+).")
@click.option("-o", "--output", metavar="FILE", help="Where to write it (default: tuning.* in --out; never "
              "overwritten).")
@OUT_OPTION
@click.option("--results-dir", default="results", show_default=True, help="Where to look for RUN by name or latest.")
@click.option("--verify", is_flag=True, help="Measure the library's default selection without and with the file "
              "in alternating launches and say, per size, whether the file moved its time (launch-level test).")
@click.option("--verify-launches", "verify_launches", type=int, default=None, metavar="K",
              help="Launches a side of --verify (default 3; at least 3): A B A B ..., each 1/K of the budget.")
def tune(runs, fmt, output, out, results_dir, verify, verify_launches):
    """Write the MPI library's tuning file from the native:<alg> variants measured in RUN(s).

    Per collective, rank count (one run per rank count) and size range, the fastest
    measured variant that is faster than the library's default at the launch level, else the
    default; boundaries at the measured crossovers.  Measure the variants with e.g.
    ccbench launch -n 4 -C allreduce,bcast -a native,native:all --launches 3.
    """
    from ccbench.analysis.tune import check_verify_launches
    from ccbench.commands.common import new_console
    from ccbench.present.tune import print_selections, print_verification
    from ccbench.workflow.tune import tune_runs
    from ccbench.workflow.tune import verify as do_verify

    launches = check_verify_launches(verify, verify_launches)
    console = new_console()
    doc = tune_runs(runs, fmt, output, results_dir, out)
    print_selections(doc, console)
    if verify:
        say = functools.partial(console.print, markup=False, highlight=False)
        print_verification(do_verify(doc, say=say, launches=launches), console)


COMMANDS = [tune]
