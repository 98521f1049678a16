"""The ccbench command line: the ``ccbench`` group and its entry point.

The commands live in ``ccbench.commands`` (one module per family); nothing imports this module
but the entry point and ``python -m ccbench``.
"""

import click

from ccbench.commands.common import print_error
from ccbench.core.errors import CCBenchError
from ccbench.core.version import __version__

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ccbench")
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
