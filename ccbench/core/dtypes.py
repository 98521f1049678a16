"""The element types and reduction operations the suite offers (pure, no MPI)."""

import numpy as np

from ccbench.core.errors import UsageError

__all__ = ["DTYPES", "OPS", "dtype_of", "ufunc_of"]

#: name -> numpy dtype; every collective supports every one of these.
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name) for name in ("uint8", "int32", "int64", "float32", "float64")
}

#: name -> numpy ufunc applied elementwise by a reduction (MPI_SUM, MPI_PROD, ...).
OPS: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
}


def dtype_of(name: str) -> np.dtype:
    """Return the numpy dtype called `name`, or raise a UsageError naming the choices."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UsageError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}") from None


def ufunc_of(name: str) -> np.ufunc:
    """Return the numpy ufunc of reduction `name`, or raise a UsageError naming the choices."""
    try:
        return OPS[name]
    except KeyError:
        raise UsageError(f"unknown op {name!r}; choose from {', '.join(OPS)}") from None
