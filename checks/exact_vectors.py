r"""Exact arithmetic on whole float vectors, for the softmax rows' exact re-decisions at large V.

A float vector is a list of dyadic rationals, and over one common power of two they are integers:
:math:`x_i = n_i 2^e`. Sums and products of such vectors are then integer sums and products, which
NumPy runs elementwise on arrays of Python integers (object dtype, in C loops) instead of on a
Python list of python-flint rationals with one normalisation per entry; only the few totals become
:class:`flint.fmpq` rationals. The exactly normalised row is :math:`\hat p = n/N`, :math:`N = \sum n_i`.

Each function computes the same rationals as the list-based routes of
:mod:`rankwall.checks.claims.softmax_jacobian` (tested against them at small V): exact arithmetic
does not depend on the order of its operations. Rows from logits are not rational, and stay on
those routes (balls).
"""

from __future__ import annotations

from dataclasses import dataclass

import flint
import numpy as np


@dataclass(frozen=True)
class Dyadic:
    """A float64 vector held exactly: ``integers[i] * 2**exponent`` (Python integers, object dtype)."""

    integers: np.ndarray
    exponent: int

    @classmethod
    def of(cls, x: np.ndarray) -> Dyadic:
        """The float vector ``x`` read exactly (every finite float64 is a 53-bit integer times 2^e)."""
        x = np.asarray(x, dtype=np.float64)
        mantissa, exponent = np.frexp(x)
        digits = (mantissa * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
        exponent = exponent.astype(np.int64) - 53
        nonzero = digits != 0
        low = int(exponent[nonzero].min()) if nonzero.any() else 0
        shift = np.where(nonzero, exponent - low, 0)
        return cls(digits.astype(object) << shift.astype(object), low)

    def rational(self, integer: int, scale: int = 1) -> flint.fmpq:
        """``integer * 2**(scale * exponent)`` as an exact rational."""
        e = scale * self.exponent
        return flint.fmpq(integer * 2**e) if e >= 0 else flint.fmpq(integer, 2**-e)


def quadratic_moments(p: np.ndarray, u: np.ndarray) -> tuple[flint.fmpq, flint.fmpq, flint.fmpq]:
    r"""``(uᵀJu, Var_p̂(u), E_p̂[u²])`` for the exactly normalised float row p̂ and the float direction
    u, each side by its own expression as the list-based route has it: the matrix form
    :math:`\sum_i u_i (Ju)_i` with :math:`(Ju)_i = \hat p_i(u_i - \mu)`, the two-pass
    :math:`\sum_i \hat p_i (u_i - \mu)^2`, and :math:`\sum_i \hat p_i u_i^2`. With :math:`u_i = m_i 2^b`,
    :math:`A = \sum n_i m_i` and :math:`d_i = m_i N - A` (so :math:`u_i - \mu = d_i 2^b/N`) they are
    :math:`\sum m_i n_i d_i/N^2`, :math:`\sum n_i d_i^2/N^3` and :math:`\sum n_i m_i^2/N`, times
    :math:`2^{2b}`."""
    direction = Dyadic.of(u)
    scale = direction.rational(1, scale=2)
    m = direction.integers
    n = Dyadic.of(p).integers
    N = int(n.sum())
    d = m * N - int((n * m).sum())
    form = flint.fmpq(int((m * (n * d)).sum()), N * N) * scale
    variance = flint.fmpq(int((n * (d * d)).sum()), N**3) * scale
    second = flint.fmpq(int((n * (m * m)).sum()), N) * scale
    return form, variance, second


def trace_sides(p: np.ndarray) -> tuple[flint.fmpq, flint.fmpq]:
    r"""``(Σ p̂_i(1 − p̂_i), 1 − Σ p̂_i²)``: tr J from its diagonal, and the collision complement, each
    by its own expression: :math:`\sum n_i(N - n_i)/N^2` and :math:`1 - \sum n_i^2/N^2`."""
    n = Dyadic.of(p).integers
    N = int(n.sum())
    return flint.fmpq(int((n * (N - n)).sum()), N * N), 1 - flint.fmpq(int((n * n).sum()), N * N)


def jvp_numerators(n: np.ndarray, v: np.ndarray) -> np.ndarray:
    r""":math:`n_i(v_i N - \langle n, v\rangle)`: the product :math:`(Jv)_i = \hat p_i(v_i - \langle
    \hat p, v\rangle)` times :math:`N^2`, for :math:`\hat p = n/N` and an integer vector v (object
    arrays of Python integers)."""
    return n * (v * int(n.sum()) - int((n * v).sum()))


def kernel_residual(p: np.ndarray, direction: str) -> flint.fmpq:
    r""":math:`\max_i |(Jv)_i|` for v = 1 (``"ones"``) or v = p̂ (``"p"``), from the product entry by
    entry (not from :math:`1 - \sum \hat p`): :func:`jvp_numerators` over :math:`N^2` with
    :math:`v_i = 1`, or over :math:`N^3` with :math:`v_i = n_i` (as :math:`\hat p N = n`)."""
    n = Dyadic.of(p).integers
    N = int(n.sum())
    if direction == "ones":
        numerators, denominator = jvp_numerators(n, np.ones_like(n)), N * N
    else:
        numerators, denominator = jvp_numerators(n, n), N**3
    return flint.fmpq(max(abs(int(numerators.max())), abs(int(numerators.min()))), denominator)
