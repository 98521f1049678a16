"""``ccbench configs`` and ``ccbench init``: the configs and batch scripts shipped inside the package."""

import click

__all__ = ["COMMANDS"]


@click.command("configs")
def configs_cmd():
    """List the shipped configs (give one by name: -c quick) with the first line of each."""
    from ccbench.measure.config import config_description, shipped_configs

    shipped = shipped_configs()
    width = max((len(n) for n in shipped), default=0)
    for name, path in shipped.items():
        click.echo(f"{name:<{width}}  {config_description(path)}".rstrip())


@click.command("init")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
def init_cmd(directory):
    """Copy the shipped configs/ and slurm/ into DIR for a site to edit (never overwrites a file)."""
    from ccbench.measure.config import copy_shipped

    written = copy_shipped(directory)
    dirs = sorted({str(p.parent) for p in written})
    click.echo(f"wrote {len(written)} files into {', '.join(dirs)}")


COMMANDS = [configs_cmd, init_cmd]
