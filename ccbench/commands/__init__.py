"""Command families that live in their own modules (report, compare, tune, lab, workload, ...).

Each command module here defines ``COMMANDS``, a list of click commands (helper modules such as
``options`` define none); ``ccbench.cli`` adds them all to
the ``ccbench`` group. A module must import nothing heavy at import time (mpi4py, matplotlib):
``ccbench --help`` imports every one of them.

May import: every stage (present, analysis, measure, store, core, ...); nothing imports this
package but ``ccbench.cli``.  A command parses its options, calls an analysis or measure function
and a present function, and imports no other command module (``common`` and ``options`` are shared
helpers, not commands).
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
