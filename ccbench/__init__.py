"""ccbench: MPI collective benchmarks, native and hand-written, with cost models."""

import sys

__version__ = "0.1.0"

__all__ = ["__version__"]

if sys.version_info < (3, 11):  # noqa: UP036 -- tomllib and the typing used need 3.11 (as pyproject says)
    raise SystemExit(f"ccbench {__version__} needs Python 3.11 or newer; this is Python "
                     f"{sys.version_info.major}.{sys.version_info.minor}")
