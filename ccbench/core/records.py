"""The result records of the analyses: frozen dataclasses that write themselves as strict JSON.

Every analysis returns such records (fits, model checks, fastest-per-size, predictions, ...); JSON appears only
where one is written, through its ``to_dict()``.
"""

import math
from collections.abc import Mapping
from dataclasses import fields

import numpy as np

__all__ = ["Record", "jsonable"]


def jsonable(x):
    """`x` as strict JSON: tuples to lists, numpy scalars to Python, non-finite to None."""
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in x]
    return x


class Record:
    """Mixin of the result dataclasses: ``to_dict()`` = fields plus derived properties."""

    _derived: tuple = ()

    def to_dict(self) -> dict:
        """This record as a strict-JSON dict (non-finite numbers become None)."""
        d = {f.name: jsonable(getattr(self, f.name)) for f in fields(self)}
        d.update({k: jsonable(getattr(self, k)) for k in self._derived})
        return d
