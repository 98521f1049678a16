"""ccbench: MPI collective benchmarks, native and hand-written, with cost models."""

__version__ = "0.1.0"

__all__ = ["__version__"]
