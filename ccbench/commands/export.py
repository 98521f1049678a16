"""``ccbench export``: stored runs as one tidy CSV (any kind); sweeps also as OSU blocks or an nccl-tests table."""

import click

__all__ = ["COMMANDS"]


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("--format", "fmt", type=click.Choice(["osu", "nccl-tests", "csv"]), required=True,
              help="osu: OSU Micro-Benchmarks' blocks (ReFrame's OSU checks read them); nccl-tests: its table (both "
                   "for sweeps); csv: every row of every run in one file (runs of any kind).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="File to write (never replaced); default stdout.")
@click.option("--results-dir", default="results", help="Where to look for runs given by name or 'latest'.")
def export(runs, fmt, output, results_dir):
    """Write stored runs in another tool's format, for parsers and dashboards written for it."""
    from ccbench.core.errors import UsageError
    from ccbench.present.export import exporter
    from ccbench.store.run import open_run

    opened = [open_run(r, results_dir, need_rows=True, what="export") for r in runs]
    kinds = list(dict.fromkeys(r.kind for r in opened))
    if len(kinds) > 1:
        raise UsageError(f"export takes runs of one kind ({', '.join(kinds)} given)")
    write = exporter(opened[0].spec, fmt)
    if write is None:
        raise UsageError(f"--format {fmt} writes collective sweeps; {opened[0].path} is a {opened[0].spec.label} "
                         "(use --format csv)")
    text = write([(r.path.name, r.meta, r.rows) for r in opened])
    if output is None:
        click.echo(text, nl=False)
        return
    from ccbench.store.derived import write_new_file

    click.echo(f"wrote {write_new_file(output, text, what='files')}")


COMMANDS = [export]
