"""The one log softmax of ``theory``: shared by :mod:`~rankwall.theory.error_rank`,
:mod:`~rankwall.theory.expressivity` and :mod:`~rankwall.theory.heads`, which export it under their own
names (``er.log_softmax``, ``ex.log_softmax``, ``hd.log_softmax`` are this function)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rankwall.theory.validation import InputError, as_array, as_floating_array, check_finite, check_real_floating


def log_softmax_rows(xp: Any, z: Any) -> Any:
    """The unchecked kernel of :func:`log_softmax`, for arrays a module has already validated or computed:
    :math:`(z - m) - \\log\\sum_j e^{z_j - m}` along the last axis, m the maximum, in namespace ``xp``."""
    shifted = z - xp.max(z, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))


def log_softmax(z: Any) -> Any:
    """Row-wise log softmax over the last axis,
    :math:`\\log\\operatorname{softmax}(z)_i = z_i - \\max z - \\log\\sum_j e^{z_j - \\max z}`,
    in z's namespace, dtype and device. The shift by the maximum makes the sum at least 1: no entry
    overflows, and none underflows to -inf as the log of a plain softmax does.

    Validates ``z``: an array of any array-API namespace (Python sequences, NumPy integer and object
    arrays are read as NumPy float64), of a real floating dtype of at least 32 bits, at least 1-D with a
    non-empty last axis, every entry finite. Refusals are :class:`InputError` naming ``z``."""
    xp, z = as_array(z, "z")
    if isinstance(z, np.ndarray):
        z = as_floating_array(z, "z")
    check_real_floating(xp, z, "z")
    if z.ndim < 1 or z.shape[-1] == 0:
        raise InputError(f"z: expected at least one axis with at least one entry, got shape {tuple(z.shape)}")
    check_finite(xp, z, "z")
    return log_softmax_rows(xp, z)
