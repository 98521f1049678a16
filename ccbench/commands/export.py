"""``ccbench export``: stored sweeps as OSU-style blocks, an nccl-tests-style table or one tidy CSV."""

import click

__all__ = ["COMMANDS"]


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", type=click.Choice(["osu", "nccl-tests", "csv"]), required=True,
              help="osu: OSU Micro-Benchmarks' blocks (ReFrame's OSU checks read them); nccl-tests: its table; "
                   "csv: every row of every run in one file.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write (never replaced); default stdout.")
@click.option("--results-dir", default="results", help="Where to look for runs given by name or 'latest'.")
def export(runs, fmt, output, results_dir):
    """Write stored sweeps in another tool's format, for parsers and dashboards written for it."""

    from ccbench.present.export import export_csv, export_nccl_tests, export_osu
    from ccbench.store.run import open_run

    opened = [open_run(r, results_dir, kinds=("sweep",), need_rows=True, what="export") for r in runs]
    text = {"osu": export_osu, "nccl-tests": export_nccl_tests, "csv": export_csv}[fmt](
        [(r.path.name, r.meta, r.rows) for r in opened])
    if output is None:
        click.echo(text, nl=False)
        return
    from ccbench.store.derived import write_new_file

    click.echo(f"wrote {write_new_file(output, text, what='files')}")


COMMANDS = [export]
