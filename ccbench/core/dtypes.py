"""The element types and reduction operations the suite offers (pure, no MPI).

Half precision: ``float16`` is numpy's own; ``bfloat16`` comes from the ``ml_dtypes`` package
(maintained by the JAX team; the optional extra ``half``), imported on first use only, so
``pip install ccbench`` stays small and naming the dtype without the package is one clear
error.  A reduction over a half type widens each pair of operands to float32, combines them
and rounds the result back to 16 bits, as the training frameworks do; the messages stay 16-bit.
Its result is then no longer exact: `unit_roundoff` gives u, and a sum whose longest chain of
sequential additions has k steps is within k u sum|x_i| of the exact sum, to first order in u
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002, ch. 4, section 4.2).
"""

from collections.abc import Iterator, Mapping

import numpy as np

from ccbench.core.errors import UsageError

__all__ = ["DTYPES", "HALF", "HALF_INSTALL", "OPS", "dtype_of", "half_available", "is_half", "itemsize_of",
           "require", "ufunc_of", "unit_roundoff"]

#: the 16-bit floating types, name -> unit roundoff u = 2^-p for p significand bits (Higham, ch. 2):
#: float16 (IEEE binary16) p = 11, bfloat16 p = 8.
HALF: dict[str, float] = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

#: what to run when bfloat16 is asked for and ml_dtypes is missing.
HALF_INSTALL = "pip install 'ccbench[half]'  (or: pip install 'ml_dtypes>=0.4')"

_NUMPY = ("uint8", "int32", "int64", "float32", "float64", "float16")
_NAMES = (*_NUMPY, "bfloat16")
_FIXED = {name: np.dtype(name) for name in _NUMPY}


def _bfloat16() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        raise UsageError(f"dtype bfloat16 needs the ml_dtypes package: {HALF_INSTALL}") from None
    return np.dtype(ml_dtypes.bfloat16)


class _Dtypes(Mapping):
    """name -> numpy dtype; bfloat16 resolved on first lookup (ml_dtypes imported then, or a UsageError).

    Iterating gives the names and loads nothing."""

    def __getitem__(self, name: str) -> np.dtype:
        if name == "bfloat16":
            return _bfloat16()
        return _FIXED[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)

    def __contains__(self, name) -> bool:
        return name in _NAMES

    def __repr__(self) -> str:
        return f"DTYPES({', '.join(_NAMES)})"


#: name -> numpy dtype; every collective supports every one of these.
DTYPES: Mapping[str, np.dtype] = _Dtypes()

#: name -> numpy ufunc applied elementwise by a reduction (MPI_SUM, MPI_PROD, ...).
OPS: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
}


def dtype_of(name: str) -> np.dtype:
    """Return the numpy dtype called `name`, or raise a UsageError naming the choices."""
    if name not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    return DTYPES[name]


def itemsize_of(name: str) -> int:
    """Bytes per element of dtype `name`, without loading ml_dtypes (reading stored rows needs no bfloat16 type)."""
    if name == "bfloat16":
        return 2
    return _FIXED[name].itemsize


def half_available() -> bool:
    """Whether bfloat16 can be used here (ml_dtypes importable)."""
    try:
        _bfloat16()
    except UsageError:
        return False
    return True


def require(names) -> None:
    """Raise the one-line UsageError of the first dtype in `names` this installation cannot make (bfloat16
    without ml_dtypes); unknown names are the caller's to refuse."""
    for name in names:
        if name in DTYPES:
            DTYPES[name]


def is_half(dtype) -> bool:
    """Whether `dtype` (a numpy dtype or its name) is one of the 16-bit floating types of `HALF`."""
    if isinstance(dtype, str):
        return dtype in HALF
    dtype = np.dtype(dtype)
    return dtype.itemsize == 2 and dtype.name in HALF


def unit_roundoff(dtype) -> float:
    """u of a half type (a dtype or its name): each rounding to it has relative error at most u; 0.0 for the
    other dtypes, whose reductions in the suite's checks are exact."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return HALF.get(name, 0.0)


def ufunc_of(name: str) -> np.ufunc:
    """Return the numpy ufunc of reduction `name`, or raise a UsageError naming the choices."""
    try:
        return OPS[name]
    except KeyError:
        raise UsageError(f"unknown op {name!r}; choose from {', '.join(OPS)}") from None
