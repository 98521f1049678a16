"""Command families that live in their own modules (report, compare, tune, lab, workload, ...).

Each command module here defines ``COMMANDS``, a list of click commands (helper modules such as
``options`` define none); ``ccbench.cli`` adds them all to
the ``ccbench`` group. A module must import nothing heavy at import time (mpi4py, matplotlib):
``ccbench --help`` imports every one of them.
"""

import importlib
import pkgutil

__all__ = ["load"]


def load() -> list:
    """The click commands of every module in this package, in module-name order."""
    commands = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        commands.extend(getattr(module, "COMMANDS", ()))
    return commands
