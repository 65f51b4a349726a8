"""The rounding-error model: every tolerance in rankwall is one of the functions below.

Notation follows Higham, *Accuracy and Stability of Numerical Algorithms* (2nd ed.):
:math:`u` is the unit roundoff of the working dtype (half its machine epsilon) and
:math:`\\gamma_n = nu/(1 - nu)` bounds the relative error of a product of n rounded
operations. A sum of n terms in any order has error at most :math:`\\gamma_{n-1}\\sum|x_i|`
(Higham, eq. 4.4); we use that worst case, not the :math:`\\log_2 n` of pairwise summation,
so a tolerance holds whichever order a backend sums in.

The primitives (:math:`u` per dtype and :math:`\\gamma_n`) live in :mod:`rankwall.theory._rounding`, so that
``theory`` uses the same model without importing ``checks``.

A float margin inside its tolerance is never read as a verdict: the checker escalates to
exact or ball arithmetic (:mod:`rankwall.checks.exact`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rankwall.theory._rounding import dtype_name, gamma, smallest_normal, unit_roundoff

__all__ = [
    "dense_eigenvalue_error",
    "dtype_name",
    "eigenvalue_shift",
    "gamma",
    "gram_eigenvalue_error",
    "head_log_probability_error",
    "log_softmax_error",
    "quadratic_form_tolerance",
    "row_centring_error",
    "smallest_normal",
    "softmax_gradient_error",
    "softmax_relative_error",
    "spectral_norm_tolerance",
    "sum_tolerance",
    "svd_rank_margin",
    "unit_roundoff",
]


def sum_tolerance(n_terms: int, u: float, absolute_sum: float, extra_operations: int = 0) -> float:
    """Error bound of a sum of ``n_terms`` computed terms, each carrying
    ``extra_operations`` roundings: :math:`\\gamma_{n + k}\\sum |x_i|`."""
    return gamma(n_terms + extra_operations, u) * absolute_sum


def spectral_norm_tolerance(V: int, u: float, value: float) -> float:
    """Error of :func:`rankwall.theory.softmax_jacobian.spectral_norm` and of the bounds it is compared
    with: the secular function is a sum of V terms of a few roundings each, its root inherits
    that relative error, and normalising the row costs two more: :math:`\\gamma_{V+8}|\\lambda|`.
    (Measured: at most 8 ulps against certified enclosures; see the tests.)"""
    return gamma(V + 8, u) * abs(value)


def eigenvalue_shift(relative: float, absolute: float) -> float:
    r"""How far any eigenvalue of :math:`J(p) = \operatorname{diag}(p) - pp^\top` (sorted, with multiplicity)
    can move from the exact row :math:`\hat p` to the computed row p normalised exactly,
    :math:`\tilde p = p/S`, :math:`S = \sum_i p_i`, when every entry satisfies
    :math:`|p_i - \hat p_i| \le \varepsilon\hat p_i + \eta_i` with :math:`\varepsilon` = ``relative`` and
    :math:`\sum_i \eta_i` = ``absolute`` (the underflow of the entries).

    With :math:`d = p - \hat p`, :math:`\lVert d\rVert_1 \le \varepsilon + \sum\eta_i = \sigma` and
    :math:`|S - 1| \le \sigma`, so :math:`\delta = \tilde p - \hat p = (d - (S - 1)\hat p)/S` has
    :math:`\lVert\delta\rVert_1 \le 2\sigma/(1 - \sigma)`. Then
    :math:`J(\tilde p) - J(\hat p) = \operatorname{diag}(\delta) - \delta\tilde p^\top - \hat p\delta^\top`
    has spectral norm at most :math:`\max_i|\delta_i| + \lVert\delta\rVert_2(\lVert\tilde p\rVert_2 +
    \lVert\hat p\rVert_2) \le 3\lVert\delta\rVert_1` (both rows are probability vectors), and Weyl's
    inequality moves each eigenvalue by at most that: :math:`6\sigma/(1 - \sigma)`, absolute (infinite
    for :math:`\sigma \ge 1`)."""
    sigma = relative + absolute
    return math.inf if sigma >= 1 else 6 * sigma / (1 - sigma)


def quadratic_form_tolerance(V: int, u: float, second_moment: float) -> float:
    """Both :math:`\\sum_i u_i (Ju)_i` and :math:`\\sum_i p_i(u_i - \\mu)^2` are sums of V
    terms of at most five roundings each, bounded by :math:`E_p[u^2] + E_p[u]^2 \\le 2E_p[u^2]`
    (after the mean is removed); the two differ by at most twice that bound."""
    return 2 * sum_tolerance(V, u, 2 * second_moment, extra_operations=5)


def dense_eigenvalue_error(V: int, u: float, norm: float, top: float) -> float:
    """Error of each eigenvalue of :math:`J = \\operatorname{diag}(p) - pp^\\top` computed by a
    dense symmetric eigensolver (Weyl's inequality): forming J costs
    :math:`\\lVert E \\rVert_2 \\le 3u\\sqrt{m}` (the diagonal :math:`p_i - p_i^2` has absolute
    error :math:`2up_i`, and :math:`\\sum p_i^2 \\le m`), and a backward-stable eigensolver adds
    :math:`\\gamma_{V+2}\\sqrt V \\lVert J \\rVert_2`. Near a one-hot row the first term dominates:
    there the dense route cannot see eigenvalues below about u."""
    return gamma(V + 2, u) * V**0.5 * norm + 3 * u * top**0.5


def svd_rank_margin(shape: tuple[int, int], u: float, forming_norm: float, sigma_max: float) -> float:
    """Weyl margin for ranks read from a dense SVD: a singular value above it is certainly
    nonzero. The SVD is backward stable (:math:`\\gamma_{\\max(m,n)+2}\\sqrt{\\min(m,n)}\\,\\sigma_1`)
    and forming the matrix entrywise with relative error :math:`\\gamma_{n+4}` adds at most
    :math:`\\gamma_{n+4}` times the Frobenius norm of what was formed."""
    m, n = shape
    return gamma(max(m, n) + 2, u) * min(m, n) ** 0.5 * sigma_max + gamma(n + 4, u) * forming_norm


def gram_eigenvalue_error(shape: tuple[int, int], u: float, frobenius_squared: float) -> float:
    r"""Bound on :math:`|\hat\lambda_i - \sigma_i(M)^2|` for the eigenvalues :math:`\hat\lambda` of the
    computed Gram matrix :math:`\hat G = fl(MM^\top)` of an m x n matrix M (m <= n, its entries read
    exactly), found by a backward-stable symmetric eigensolver. Each entry of :math:`\hat G` is a dot
    product of n terms, so :math:`|\hat G - MM^\top| \le \gamma_n |M||M|^\top` entrywise (Higham eq. 3.5)
    and :math:`\lVert \hat G - MM^\top\rVert_2 \le \gamma_n\lVert M\rVert_F^2`; the eigensolver adds
    :math:`\gamma_{m+2}\sqrt m\,\lVert\hat G\rVert_2 \le \gamma_{m+2}\sqrt m(1 + \gamma_n)\lVert M\rVert_F^2`
    (as in :func:`dense_eigenvalue_error`); Weyl's inequality adds the two. ``frobenius_squared`` is the
    computed :math:`\lVert M\rVert_F^2`, a sum of mn rounded squares: the real one is at most
    :math:`1/(1 - \gamma_{mn})` times it."""
    m, n = shape
    squared = frobenius_squared / (1 - gamma(m * n, u))
    return (gamma(n, u) + gamma(m + 2, u) * m**0.5 * (1 + gamma(n, u))) * squared


def log_softmax_error(A: Any, L: Any, u: float) -> float:
    """Frobenius bound on the error of a computed :math:`L = \\log\\operatorname{softmax}(A)`:
    each entry :math:`A_{ij} - m_i - \\log\\sum_j e^{A_{ij} - m_i}` carries at most
    :math:`\\gamma_{V+4}(1 + |A_{ij}| + |m_i| + |L_{ij}|)` (the log of a sum with relative error
    :math:`\\gamma_V` is off by at most that much in absolute terms)."""
    A = np.asarray(A, dtype=np.float64)
    L = np.asarray(L, dtype=np.float64)
    top = np.abs(A).max(axis=1, keepdims=True)
    scale = 1 + np.abs(A) + top + np.abs(L)
    return gamma(A.shape[1] + 4, u) * float(np.sqrt(np.sum(scale * scale)))


def head_log_probability_error(L: Any, logit_bound: float, K: int, u: float) -> float:
    """Frobenius bound on the error of computed head log-probabilities: each entry passes through
    at most two log-sum-exps over V and K terms and a few elementwise maps, so it carries at most
    :math:`\\gamma_{V+K+16}(1 + |L_{ij}| + 2R)` with R a bound on the logits' magnitude."""
    L = np.asarray(L, dtype=np.float64)
    scale = 1 + np.abs(L) + 2 * logit_bound
    return gamma(L.shape[1] + K + 16, u) * float(np.sqrt(np.sum(scale * scale)))


def row_centring_error(L: Any, u: float) -> float:
    r"""Frobenius bound on the error of centring each row of L over its V entries,
    :math:`fl(L_{ij} - fl(\bar L_i))` with :math:`\bar L_i` the row mean: the mean, a sum of V terms and
    one division, is off by at most :math:`e_i = \gamma_V \operatorname{mean}_j |L_{ij}|` (Higham eq. 4.4),
    the same for every entry of the row, and the subtraction adds u times the computed entry, which is
    at most :math:`|L_{ij} - \bar L_i| + e_i`; centring is an orthogonal projection, so
    :math:`\lVert L - \bar L\mathbf 1^\top\rVert_F \le \lVert L\rVert_F`. In all,
    :math:`(1 + u)\sqrt{V\sum_i e_i^2} + u\lVert L\rVert_F`, computed in row blocks (no N x V temporary)."""
    L = np.asarray(L)
    V = L.shape[1]
    rows = max(1, (1 << 22) // max(V, 1))
    blocks = [np.abs(L[i : i + rows], dtype=np.float64) for i in range(0, len(L), rows)]
    mean_abs = np.concatenate([block.mean(axis=1) for block in blocks]) if blocks else np.zeros(0)
    norm = math.sqrt(sum(float(np.sum(block * block)) for block in blocks))
    return (1 + u) * float(np.sqrt(V * np.sum((gamma(V, u) * mean_abs) ** 2))) + u * norm


def softmax_relative_error(shifted: Any, V: int, u: float) -> Any:
    r"""Entrywise bound on the relative error of a softmax row computed in a dtype of unit roundoff u,
    from its shifted logits :math:`x_i = z_i - \max z \le 0` (read exactly): the rounded subtraction
    moves :math:`x_i` by :math:`u|x_i|`, which exp turns into a relative error :math:`u|x_i|`; exp itself
    (to one ulp, 2u), the row sum (:math:`\gamma_{V-1}` relative to the exponentials, whose own errors
    average to at most :math:`(2 + V/e)u` since :math:`\sum_i |x_i| e^{x_i} \le V/e`) and the division
    add at most :math:`\gamma_{2V+8}`. In all :math:`\varepsilon_i = u|x_i| + \gamma_{2V+8}(u)`
    (first order; masked entries, :math:`x_i = -\infty`, are exactly 0 and pass ``shifted`` = 0)."""
    return u * np.abs(np.asarray(shifted, dtype=np.float64)) + gamma(2 * V + 8, u)


def softmax_gradient_error(p: Any, shifted: Any, g: Any, u_model: float, tiny_model: float) -> Any:
    r"""Entrywise bound on :math:`|\hat g_z - J(p)g|` for the logit gradient :math:`\hat g_z` that autograd
    forms in the model's dtype (unit roundoff ``u_model``, smallest normal number ``tiny_model``) as
    :math:`fl(\hat p \odot (g - \hat s))`, :math:`\hat s = fl(\sum_j \hat p_j g_j)`, against
    :math:`J(p)g = p \odot (g - s)` for the float64 row p of the same shifted logits (``shifted``, (R, V))
    and the same incoming gradient g.

    Each probability is off by :math:`|\hat p_i - p_i| \le a_i = \varepsilon_i p_i + 2\eta` with
    :math:`\varepsilon_i` of :func:`softmax_relative_error` in both dtypes and :math:`\eta = 2u\,`
    ``tiny_model``, the spacing of the subnormal numbers (an entry that underflows, in exp or in the
    division, loses at most that much, whatever its relative error). Then
    :math:`|\hat s - s| \le \Delta = \sum_j a_j|g_j| + \gamma_V\sum_j (p_j + a_j)|g_j| + V\eta` (a sum of V
    rounded products, Higham eq. 3.5, each product underflowing by at most :math:`\eta`), and the
    subtraction and product round twice more:

    .. math:: |\hat g_{z,i} - p_i(g_i - s)| \le a_i|g_i - s| + (p_i + a_i)\Delta
              + \gamma_2 (p_i + a_i)(|g_i - s| + \Delta) + \eta,

    with :math:`\gamma` at ``u_model``; the bound is evaluated in float64 and widened by
    :math:`1 + \gamma_{2V+16}` for that evaluation. Since :math:`\mathbf 1^\top J(p) = 0`, its 1-norm also
    bounds the row sum of :math:`\hat g_z`. (Rows so near one-hot that :math:`s \lesssim \gamma_V` have a
    true gradient below this bound: float32 autograd cannot resolve them.)"""
    p = np.asarray(p, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    V = p.shape[-1]
    u64 = unit_roundoff(np.float64)
    eta = 2 * u_model * tiny_model + 2 * u64 * smallest_normal(np.float64)
    # a_i: softmax_relative_error in both dtypes, summed (one pass over |x| instead of two), times p, plus 2 eta
    a = np.abs(np.asarray(shifted, dtype=np.float64))
    a *= u_model + u64
    a += gamma(2 * V + 8, u_model) + gamma(2 * V + 8, u64)
    a *= p
    a += 2 * eta
    magnitude = np.abs(g)
    gV, g2 = gamma(V, u_model), gamma(2, u_model)
    delta = np.sum(a * magnitude + gV * (p + a) * magnitude, axis=-1, keepdims=True) + V * eta
    centred = np.abs(g - np.sum(p * g, axis=-1, keepdims=True))
    bound = (a + g2 * (p + a)) * centred
    bound += (1 + g2) * (p + a) * delta
    bound += eta
    bound *= 1 + gamma(2 * V + 16, u64)
    return bound
