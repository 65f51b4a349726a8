"""Input validation shared by every theory module.

Every public function of :mod:`theory` validates its array arguments here, so that bad input
(non-finite values, negative or unnormalised probabilities, wrong shapes or dtypes, vocabularies
that are too small, ragged nested lists, booleans or strings among numbers, ids that are not
integers in range, counts that are not non-negative whole numbers) is reported as an
:class:`InputError` that names the argument, the problem and, where there is one, the offending
index -- never as a wrong answer or a traceback from deep inside an array library.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import array_api_compat
import numpy as np
import scipy.sparse as sparse

from rankwall.errors import InputError

__all__ = ["InputError"]  # re-exported: the one class lives in rankwall.errors


def check_sequence(x: Any, name: str) -> tuple[int, ...] | None:
    """The shape of a nested list/tuple of numbers, refusing what NumPy would silently accept
    or turn into an error from deep inside: ragged rows, booleans and strings among the numbers.
    ``None`` when ``x`` is not a Python sequence."""
    if not isinstance(x, (list, tuple)):
        return None
    return _sequence_shape(x, name, ())


def _sequence_shape(x: Any, name: str, index: tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(x, np.ndarray):
        return tuple(x.shape)  # its dtype is checked once the whole is converted
    if not isinstance(x, (list, tuple)):
        if isinstance(x, (bool, np.bool_)):
            raise InputError(f"{name}: boolean {x!r} at index {index} where a number is expected")
        if isinstance(x, (str, bytes)):
            raise InputError(f"{name}: string {x!r} at index {index} where a number is expected")
        return ()
    if not any(isinstance(item, (list, tuple, np.ndarray)) for item in x):  # fast path: a flat row
        for i, item in enumerate(x):
            if isinstance(item, (bool, np.bool_, str, bytes)):
                _sequence_shape(item, name, (*index, i))
        return (len(x),)
    shapes = [_sequence_shape(item, name, (*index, i)) for i, item in enumerate(x)]
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            raise InputError(
                f"{name}: ragged nested sequence: the entry at index {(*index, i)} has shape {shape}, "
                f"the one at index {(*index, 0)} has shape {shapes[0]}"
            )
    return (len(x), *shapes[0])


def _from_sequence(x: Any, name: str) -> Any:
    """``x`` with Python sequences (checked by :func:`check_sequence`) read as NumPy arrays."""
    if isinstance(x, (list, tuple)):
        check_sequence(x, name)
        return np.asarray(x)
    if isinstance(x, (float, int)):
        return np.asarray(x)
    return x


def namespace_of(x: Any, name: str) -> Any:
    """The array-API namespace of ``x``; plain Python sequences are read as NumPy arrays. An array
    without values (a PyTorch tensor on the ``meta`` device) is refused: nothing can be checked on it."""
    x = _from_sequence(x, name)
    try:
        xp = array_api_compat.array_namespace(x)
    except TypeError:
        raise InputError(f"{name}: expected an array, got {type(x).__name__}") from None
    if array_api_compat.is_torch_array(x) and x.device.type == "meta":
        raise InputError(f"{name}: a tensor on the meta device has no values to check")
    return xp


def as_array(x: Any, name: str) -> tuple[Any, Any]:
    """``(xp, array)`` for ``x``, converting Python sequences to NumPy (ragged ones, and ones
    holding booleans or strings, are refused)."""
    x = _from_sequence(x, name)
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
    """Require every entry to be finite, naming the first one that is not. Two reductions decide the
    common case without a temporary mask: max and min propagate NaN, and catch ±inf."""
    if math.prod(x.shape) and bool(xp.isfinite(xp.max(x)) & xp.isfinite(xp.min(x))):
        return
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
        check_sequence(u, name)
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


def check_integer_in(value: Any, name: str, low: int, high: int | None = None) -> int:
    """Require an integer in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError(f"{name}: expected an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise InputError(f"{name}: {value} is out of range (need >= {low}{upper})")
    return int(value)


def as_real_scalar(value: Any, name: str) -> int | Fraction | float:
    """A real number kept exact where it is: an ``int`` for integers, a ``Fraction`` for
    rationals, a ``float`` otherwise. Booleans and strings are refused (``float("0.5")`` and
    ``float(True)`` would read them as numbers)."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise InputError(f"{name}: expected a real number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, Fraction):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a real number, got {value!r}") from None


def check_real_in(value: Any, name: str, low: float, high: float, closed: bool = True) -> float:
    """Require a finite real in ``[low, high]`` (or ``(low, high)`` when ``closed`` is false)."""
    try:
        v = float(as_real_scalar(value, name))
    except OverflowError:  # an integer beyond the float range
        v = math.inf
    inside = low <= v <= high if closed else low < v < high
    if not math.isfinite(v) or not inside:
        interval = f"[{low}, {high}]" if closed else f"({low}, {high})"
        raise InputError(f"{name}: {value!r} is outside {interval}")
    return v


# --------------------------------------------------------------------------- NumPy arrays of numbers


def _check_numeric_dtype(dtype: Any, name: str) -> None:
    """Require integers, floats or an object dtype (whose entries are checked one by one)."""
    if dtype == np.bool_:
        raise InputError(f"{name}: boolean entries (dtype bool) where numbers are expected")
    if dtype.kind not in "iufO":
        raise InputError(f"{name}: expected a real dtype (integers or floats), got {dtype}")


def _is_exact_number(v: Any) -> bool:
    return isinstance(v, (int, np.integer, Fraction)) and not isinstance(v, (bool, np.bool_))


def as_numeric_array(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """``x`` as a NumPy array of real numbers, its dtype kept: integers, floats, or an object
    array of exact numbers (Python ints, NumPy integers, Fractions). Ragged sequences,
    booleans, strings, complex numbers and other objects are refused, and so is a dimension
    other than ``ndim`` when it is given."""
    array = np.asarray(_from_sequence(x, name))
    _check_numeric_dtype(array.dtype, name)
    if array.dtype == object:
        for i, v in enumerate(array.flat):
            if not _is_exact_number(v):
                index = tuple(int(k) for k in np.unravel_index(i, array.shape))
                raise InputError(
                    f"{name}: entry {v!r} at index {index} of an object array is not an int or a Fraction "
                    "(pass floats as a float array)"
                )
    if ndim is not None and array.ndim != ndim:
        raise InputError(f"{name}: expected a {ndim}-D array, got ndim={array.ndim}")
    return array


def as_real_array(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """``x`` as a float64 array (see :func:`as_numeric_array` for what is refused)."""
    return as_numeric_array(x, name, ndim).astype(np.float64)


def as_floating_array(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """``x`` as a floating array: float arrays keep their dtype, exact numbers (integers,
    Fractions) become float64 -- for float computations that must not run in a narrow integer
    type (see :func:`as_numeric_array` for what is refused)."""
    array = as_numeric_array(x, name, ndim)
    return array.astype(np.float64) if is_exact(array) else array


def is_exact(array: np.ndarray) -> bool:
    """Whether an array from :func:`as_numeric_array` holds exact numbers (integers or objects)."""
    return array.dtype.kind in "iuO"


def as_integer_array(x: Any, name: str, ndim: int | None = None, what: str = "integer entries") -> np.ndarray:
    """``x`` as an array of integers (an integer dtype, or an object array of Python ints);
    floats are refused even when whole, and Fractions too."""
    array = as_numeric_array(x, name, ndim)
    if array.dtype.kind == "f":
        raise InputError(f"{name}: expected {what}, got dtype {array.dtype}")
    if array.dtype == object:
        for i, v in enumerate(array.flat):
            if not isinstance(v, (int, np.integer)):
                index = tuple(int(k) for k in np.unravel_index(i, array.shape))
                raise InputError(f"{name}: expected {what}, got {v!r} at index {index}")
    return array


def as_index_array(x: Any, name: str, upper: int, ndim: int = 1) -> np.ndarray:
    """Integer ids in ``[0, upper)`` (token ids, for instance) as an int64 array."""
    ids = as_integer_array(x, name, ndim, what="integer ids")
    if ids.size:
        bad = np.asarray((ids < 0) | (ids >= upper), dtype=bool)
        if bool(np.any(bad)):
            index = tuple(int(k) for k in np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape))
            raise InputError(f"{name}: ids must lie in [0, {upper}), got {int(ids[index])} at index {index}")
    return ids.astype(np.int64)


#: Largest count that float64 holds exactly (every integer up to 2^53 is a float64).
#: Largest vocabulary (and context count) a constructor builds, shared by every family and command
#: (memory sanity: 2**24 float64 entries = 128 MiB).
MAX_VOCABULARY = 1 << 24

MAX_EXACT_COUNT = 2**53


def as_count_array(x: Any, name: str, ndim: int | None = None) -> Any:
    """Counts: finite, non-negative whole numbers (at most 2^53, so float64 holds them
    exactly), returned as float64 -- a NumPy array, or a CSR matrix for a SciPy sparse input."""
    if sparse.issparse(x):
        _check_numeric_dtype(x.dtype, name)
        coo = sparse.coo_matrix(x)
        values = np.asarray(coo.data, dtype=np.float64)
        _check_counts(values, name, lambda i: (int(coo.row[i]), int(coo.col[i])))
        return sparse.csr_matrix(x, dtype=np.float64)
    array = as_numeric_array(x, name, ndim)
    values = array.astype(np.float64)
    _check_counts(values.ravel(), name, lambda i: tuple(int(k) for k in np.unravel_index(i, array.shape)))
    return values


def _check_counts(values: np.ndarray, name: str, index_of: Any) -> None:
    """Refuse the first non-finite, negative, fractional or too large count."""
    problems = (
        (~np.isfinite(values), "non-finite count {v!r} at index {i}"),
        (values < 0, "negative count {v!r} at index {i}"),
        (values != np.round(values), "fractional count {v!r} at index {i} (counts are whole)"),
        (values > MAX_EXACT_COUNT, "count {v!r} at index {i} exceeds 2**53 (float64 sums of counts are inexact)"),
    )
    for bad, message in problems:
        if bool(np.any(bad)):
            position = int(np.flatnonzero(bad)[0])
            raise InputError(f"{name}: " + message.format(v=float(values[position]), i=index_of(position)))
