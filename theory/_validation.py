"""Input validation shared by every theory module.

Every public function of :mod:`theory` validates its array arguments here, so that bad input
(non-finite values, negative or unnormalised probabilities, wrong shapes or dtypes, vocabularies
that are too small) is reported as an :class:`InputError` that names the argument, the problem
and, where there is one, the offending index -- never as a wrong answer or a traceback from deep
inside an array library.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat
import numpy as np


class InputError(ValueError):
    """An argument that a function of rankwall cannot accept, with the reason."""


def namespace_of(x: Any, name: str) -> Any:
    """The array-API namespace of ``x``; plain Python sequences are read as NumPy arrays."""
    if isinstance(x, (list, tuple, float, int)):
        x = np.asarray(x)
    try:
        return array_api_compat.array_namespace(x)
    except TypeError:
        raise InputError(f"{name}: expected an array, got {type(x).__name__}") from None


def as_array(x: Any, name: str) -> tuple[Any, Any]:
    """``(xp, array)`` for ``x``, converting Python sequences to NumPy."""
    if isinstance(x, (list, tuple, float, int)):
        x = np.asarray(x)
    return namespace_of(x, name), x


def _first_index(xp: Any, mask: Any) -> tuple[int, ...]:
    """The index of the first ``True`` entry of ``mask``, as a tuple of Python ints."""
    flat = xp.reshape(mask, (-1,))
    position = int(xp.argmax(xp.astype(flat, xp.int32)))
    return tuple(int(i) for i in np.unravel_index(position, tuple(mask.shape)))


def check_real_floating(xp: Any, x: Any, name: str) -> None:
    """Require a real floating dtype (float32 or float64; float16/bfloat16 are refused)."""
    if not xp.isdtype(x.dtype, "real floating"):
        raise InputError(f"{name}: expected a real floating dtype (float32 or float64), got {x.dtype}")
    if xp.finfo(x.dtype).bits < 32:
        raise InputError(f"{name}: dtype {x.dtype} has too few bits for a certified check; cast to float32 or float64")


def check_finite(xp: Any, x: Any, name: str) -> None:
    """Require every entry to be finite, naming the first one that is not."""
    bad = ~xp.isfinite(x)
    if bool(xp.any(bad)):
        index = _first_index(xp, bad)
        raise InputError(f"{name}: non-finite value {float(x[index])} at index {index}")


def check_rows(xp: Any, x: Any, name: str, min_columns: int = 2) -> None:
    """Require a vector or a batch of rows (ndim 1 or 2), non-empty, with enough columns."""
    if x.ndim not in (1, 2):
        raise InputError(f"{name}: expected a vector or a 2-D batch of rows, got ndim={x.ndim}")
    if x.ndim == 2 and x.shape[0] == 0:
        raise InputError(f"{name}: the batch is empty (shape {tuple(x.shape)})")
    if x.shape[-1] < min_columns:
        raise InputError(f"{name}: vocabulary size V={x.shape[-1]} is out of range (need V >= {min_columns})")


def normalization_tolerance(V: int, dtype_eps: float) -> float:
    """How far from one a probability row may sum: ``V * u``, the worst-case error of
    forming and summing a softmax row of length ``V`` in a dtype with unit roundoff ``u``."""
    return max(V, 2) * dtype_eps / 2


def validated_probabilities(p: Any, name: str = "p") -> tuple[Any, Any]:
    """Validate probability rows and return ``(xp, p)`` with ``p`` two-dimensional.

    Each row must be finite, non-negative and sum to one within
    :func:`normalization_tolerance`."""
    xp, p = as_array(p, name)
    check_real_floating(xp, p, name)
    check_rows(xp, p, name)
    check_finite(xp, p, name)
    negative = p < 0
    if bool(xp.any(negative)):
        index = _first_index(xp, negative)
        raise InputError(f"{name}: negative probability {float(p[index])} at index {index}")
    rows = p if p.ndim == 2 else xp.reshape(p, (1, -1))
    sums = xp.sum(rows, axis=-1)
    tolerance = normalization_tolerance(rows.shape[-1], float(xp.finfo(p.dtype).eps))
    off = xp.abs(sums - 1) > tolerance
    if bool(xp.any(off)):
        row = _first_index(xp, off)[0]
        raise InputError(
            f"{name}: row {row} sums to {float(sums[row])!r}, not 1 (tolerance {tolerance:.2e} for V={rows.shape[-1]})"
        )
    return xp, rows


def validated_logits(z: Any, name: str = "z") -> tuple[Any, Any]:
    """Validate logit rows (finite, real floating, V >= 2) and return ``(xp, z)`` as 2-D."""
    xp, z = as_array(z, name)
    check_real_floating(xp, z, name)
    check_rows(xp, z, name)
    check_finite(xp, z, name)
    return xp, (z if z.ndim == 2 else xp.reshape(z, (1, -1)))


def validated_like(xp: Any, u: Any, reference: Any, name: str) -> Any:
    """Validate ``u`` as an array of the same namespace, shape and dtype as ``reference``."""
    if isinstance(u, (list, tuple)):
        u = xp.asarray(u, dtype=reference.dtype)
    if namespace_of(u, name) is not xp:
        raise InputError(f"{name}: array library differs from that of the probabilities")
    check_real_floating(xp, u, name)
    if u.ndim == 1 and reference.shape[0] == 1:
        u = xp.reshape(u, (1, -1))
    if tuple(u.shape) != tuple(reference.shape):
        raise InputError(f"{name}: shape {tuple(u.shape)} does not match the probabilities' {tuple(reference.shape)}")
    if u.dtype != reference.dtype:
        raise InputError(f"{name}: dtype {u.dtype} differs from the probabilities' {reference.dtype}")
    check_finite(xp, u, name)
    return u


def check_size(value: Any, name: str, low: int, high: int | None = None) -> int:
    """Require an integer in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name}: expected an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise InputError(f"{name}: {value} is out of range (need >= {low}{upper})")
    return int(value)


def check_probability(value: Any, name: str, low: float, high: float, closed: bool = True) -> float:
    """Require a finite real in ``[low, high]`` (or ``(low, high)`` when ``closed`` is false)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a real number, got {value!r}") from None
    inside = low <= v <= high if closed else low < v < high
    if not math.isfinite(v) or not inside:
        interval = f"[{low}, {high}]" if closed else f"({low}, {high})"
        raise InputError(f"{name}: {value!r} is outside {interval}")
    return v
