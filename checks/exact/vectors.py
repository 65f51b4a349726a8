r"""Exact arithmetic on whole float vectors, for the softmax rows' exact re-decisions at large V.

A float vector is a list of dyadic rationals, and over one common power of two they are integers:
:math:`x_i = n_i 2^e`. Sums and products of such vectors are then integer sums and products, which
NumPy runs elementwise on arrays of Python integers (object dtype, in C loops) instead of on a
Python list of python-flint rationals with one normalisation per entry; only the few totals become
:class:`flint.fmpq` rationals. The exactly normalised row is :math:`\hat p = n/N`, :math:`N = \sum n_i`.

Each function computes the same rationals as the list-based routes of
:mod:`rankwall.checks.claims.softmax_jacobian` (tested against them at small V): exact arithmetic
does not depend on the order of its operations. Rows from logits are not rational: their
probabilities are balls, one per distinct logit, and :func:`logit_quadratic_moments` groups the
direction's exact integers by distinct logit, so that only a few ball operations remain (tested to
enclose what the list of balls encloses).
"""

from __future__ import annotations

from dataclasses import dataclass

import flint
import numpy as np

from rankwall.checks import exact


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


def logit_quadratic_moments(z: np.ndarray, u: np.ndarray) -> tuple[flint.arb, flint.arb, flint.arb]:
    r"""``(uᵀJu, Var_p(u), E_p[u²])`` for :math:`p = \operatorname{softmax}(z)` of the float logits z and
    the float direction u, as balls at the current working precision, each side by its own
    expression as :func:`quadratic_moments` has it. p takes one value per distinct logit c,
    :math:`P_c = w_c / \sum_d n_d w_d` with :math:`w_c = e^{z_c - \max z}` and :math:`n_c` entries (the
    balls of :func:`rankwall.checks.claims.softmax_jacobian.exact_entries`), so each sum over the row
    is a sum over the distinct logits of :math:`P_c` times exact integer sums over their entries.
    With :math:`u_i = m_i 2^b`, the mean :math:`\mu = \sum_c P_c \sum_{i \in c} m_i` (in units of
    :math:`2^b`), each logit's entries are centred on an integer :math:`\kappa_c` next to their own
    mean: :math:`e_i = m_i - \kappa_c`, :math:`E_c = \sum_{i \in c} e_i`, :math:`F_c = \sum_{i \in c}
    e_i^2`, :math:`\Delta_c = \kappa_c - \mu`, so that :math:`u_i - \mu = (e_i + \Delta_c) 2^b` and no
    large terms cancel. Times :math:`2^{2b}`, the sides are the matrix form :math:`\sum_c P_c \sum_{i
    \in c} u_i (u_i - \mu) = \sum_c P_c (\kappa_c E_c + \kappa_c n_c \Delta_c + F_c + \Delta_c E_c)`,
    the two-pass :math:`\sum_c P_c \sum_{i \in c} (u_i - \mu)^2 = \sum_c P_c (F_c + 2 \Delta_c E_c +
    n_c \Delta_c^2)` and :math:`\sum_c P_c \sum_{i \in c} m_i^2`."""
    values, inverse, counts = np.unique(np.asarray(z, dtype=np.float64), return_inverse=True, return_counts=True)
    top = exact.ball(float(values[-1]))
    w = [(exact.ball(float(v)) - top).exp() for v in values]
    total = sum((wc * int(n) for wc, n in zip(w, counts, strict=True)), start=flint.arb(0))
    shares = [wc / total for wc in w]
    direction = Dyadic.of(u)
    m = direction.integers[np.argsort(inverse.reshape(-1), kind="stable")]  # grouped by distinct logit
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    def by_logit(x: np.ndarray) -> list[int]:
        return [int(v) for v in np.add.reduceat(x, starts)]

    n = [int(k) for k in counts]
    zero = flint.arb(0)
    sums = by_logit(m)
    mean = sum((share * s for share, s in zip(shares, sums, strict=True)), start=zero)
    centres = [s // k for s, k in zip(sums, n, strict=True)]
    e = m - np.repeat(np.array(centres, dtype=object), counts)
    offsets, spreads = by_logit(e), by_logit(e * e)
    gaps = [c - mean for c in centres]
    form = sum(
        (
            share * (c * o + c * k * g + f + g * o)
            for share, c, o, f, g, k in zip(shares, centres, offsets, spreads, gaps, n, strict=True)
        ),
        start=zero,
    )
    centred = [f + 2 * g * o + k * g * g for o, f, g, k in zip(offsets, spreads, gaps, n, strict=True)]
    variance = sum((share * c for share, c in zip(shares, centred, strict=True)), start=zero)
    second = sum((share * q for share, q in zip(shares, by_logit(m * m), strict=True)), start=zero)
    scale = direction.rational(1, scale=2)
    return form * scale, variance * scale, second * scale
