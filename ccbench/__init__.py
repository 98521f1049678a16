"""ccbench: MPI collective benchmarks, native and hand-written, with cost models.

From Python, ``ccbench.open_run``, ``fit``, ``network_params``, ``predict``, ``compare`` and
``fastest`` read stored runs and model them (`ccbench.api`), and ``ccbench.algorithms.get``
returns one algorithm to call in your own mpi4py program.  Both are loaded on first use:
``import ccbench`` itself imports neither numpy nor MPI.
"""

import importlib
import sys

from ccbench.core.version import __version__

if sys.version_info < (3, 11):  # noqa: UP036 -- tomllib and the typing used need 3.11 (as pyproject says)
    raise SystemExit(f"ccbench {__version__} needs Python 3.11 or newer; this is Python "
                     f"{sys.version_info.major}.{sys.version_info.minor}")

#: The names `ccbench.api` exports, reached as ``ccbench.NAME`` (tests/test_api.py keeps the two lists equal).
_API = ("CCBenchError", "Comparison", "NetworkParams", "Run", "TwoLevelParams", "UsageError", "compare", "fastest",
        "fit", "network_params", "open_run", "predict")

__all__ = ["__version__", "algorithms", *_API]


def __getattr__(name: str):
    """Load the API on first use (PEP 562).  By name, so that importing the package does not load the
    API and everything under it."""
    if name == "algorithms":
        return importlib.import_module("ccbench.algorithms")
    if name in _API:
        value = getattr(importlib.import_module("ccbench.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ccbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
