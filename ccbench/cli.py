"""The ccbench command line: the ``ccbench`` group and its entry point.

The commands live in ``ccbench.commands`` (one module per family); nothing imports this module
but the entry point and ``python -m ccbench``.
"""

import click

from ccbench.commands.common import print_error
from ccbench.core.errors import CCBenchError
from ccbench.core.version import __version__

__all__ = ["cli", "main"]


class _Group(click.Group):
    """The ``ccbench`` group: its commands, and the command of every run kind a plug-in adds (built on first need)."""

    def get_command(self, ctx, cmd_name):
        found = super().get_command(ctx, cmd_name)
        if found is None:
            from ccbench.commands.kinds import kind_command_named

            found = kind_command_named(cmd_name)
        return found

    def list_commands(self, ctx):
        from ccbench.commands.kinds import kind_command_names

        return sorted({*super().list_commands(ctx), *kind_command_names()})


def _load_plugins(ctx, param, values) -> None:
    from ccbench.store.kinds import add_plugin

    for value in values:
        add_plugin(value)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ccbench")
@click.option("--plugin", multiple=True, expose_value=False, is_eager=True, callback=_load_plugins,
              metavar="MODULE", help="Load a plug-in (a module name or a .py file) that adds run kinds; the jobs "
                                     "ccbench starts load it too (also: CCBENCH_PLUGINS).")
def cli():
    """ccbench: MPI collectives, native and hand-written, measured, checked and modelled.

    Run a sweep under a launcher (mpiexec -n 4 python -m mpi4py -m ccbench run ...) or let
    `ccbench launch -n 4 ...` start the launcher for you.
    """



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
        print_error("aborted")
        raise SystemExit(130) from None
    except click.ClickException as exc:
        print_error(exc.format_message())
        raise SystemExit(exc.exit_code) from None
    except CCBenchError as exc:
        print_error(str(exc))
        raise SystemExit(exc.exit_code) from None
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code) from None
