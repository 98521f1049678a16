"""``ccbench check``: a stored run against reference times with tolerances (a regression gate for CI)."""

import click

from ccbench.commands.common import new_console

__all__ = ["COMMANDS"]


@click.command()
@click.argument("run_path", metavar="RUN")
@click.option("--reference", "reference", required=True, type=click.Path(dir_okay=False),
              help="CSV (collective,algorithm,nbytes,value[,lower,upper,dtype,op]) or JSON list of references.")
@click.option("--results-dir", default="results", help="Where to look for RUN by name or 'latest'.")
def check(run_path, reference, results_dir):
    """Check a run's medians against reference values with relative bounds (ReFrame style).

    Each reference names a case, a time (`value`: seconds or `12us`) and relative bounds
    (`lower` -0.1, `upper` 0.1: within -10%..+10%; empty: unbounded).  Exit 1 when a median
    lies outside its bounds or a referenced case is missing, with a table of every case.
    """
    from ccbench.analysis.gate import check_references, read_references
    from ccbench.present.gate import references_table
    from ccbench.present.table import to_rich
    from ccbench.store.run import open_run

    refs = read_references(reference)
    run = open_run(run_path, results_dir, kinds=("sweep",), need_rows=True, what="check")
    results = check_references(run.rows, refs)
    console = new_console()
    console.print(to_rich(references_table(results, run.path.name)))
    bad = [r for r in results if r.status != "ok"]
    console.print(f"{len(results) - len(bad)} of {len(results)} references hold"
                  + (f"; {len(bad)} do not" if bad else ""))
    if bad:
        raise SystemExit(1)


COMMANDS = [check]
