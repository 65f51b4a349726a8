"""The primitives of the rounding-error model, shared by ``theory`` and ``rankwall.checks.engine.tolerance``.

Notation follows Higham, *Accuracy and Stability of Numerical Algorithms* (2nd ed.):
:math:`u` is the unit roundoff of the working dtype (half its machine epsilon) and
:math:`\\gamma_n = nu/(1 - nu)` bounds the relative error of a product of n rounded operations.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def dtype_name(dtype: Any) -> str:
    """``"float64"`` or ``"float32"`` for a NumPy, PyTorch, CuPy or array-API floating dtype."""
    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype).rsplit(".", 1)[-1]


def unit_roundoff(dtype: Any) -> float:
    """:math:`u = \\varepsilon/2` for a NumPy, PyTorch, CuPy or array-API floating dtype."""
    return float(np.finfo(np.dtype(dtype_name(dtype))).eps) / 2


def smallest_normal(dtype: Any) -> float:
    """The least positive normal number of the dtype: below it relative precision is lost, so the
    model's relative bounds no longer hold (2^-1022 in float64, 2^-126 in float32)."""
    return float(np.finfo(np.dtype(dtype_name(dtype))).smallest_normal)


def gamma(n: int, u: float) -> float:
    """:math:`\\gamma_n = nu/(1 - nu)`; infinite once :math:`nu \\ge 1` (no bound left)."""
    nu = n * u
    return nu / (1 - nu) if nu < 1 else float("inf")
