r"""Logit updates of a gradient step on the LM head are rank-constrained.

Source: seed 000 ("Lost in Backpropagation"), §2.2, Eq. 7 and Prop. A.6 (Appendix A.3). With
logits :math:`L = HW^\top` (H: C x D hidden states, W: V x D head) and a logit gradient
:math:`G = \nabla_L \mathcal L` (C x V), the gradients are :math:`\nabla_H = GW` and
:math:`\nabla_W = G^\top H`. A step of size :math:`\eta` on both gives

.. math:: H'W'^\top - HW^\top = -\eta\,(GWW^\top + HH^\top G) + \eta^2\, GWH^\top G.

1. *Eq. 7.* The first-order update :math:`-\eta(GWW^\top + HH^\top G)` has rank at most 2D (each
   term factors through a D-dimensional space), and so does the exact step (a difference of two
   matrices of rank at most D).
2. *Prop. A.6 (Eckart-Young-Mirsky).* For every :math:`\Delta` of rank at most 2D and every
   scalar c, :math:`\lVert c\Delta - G \rVert_F \ge (\sum_{i > 2D} \sigma_i(G)^2)^{1/2}`, with
   equality for :math:`c\Delta` the truncated SVD :math:`G_{2D}`. So no step through a rank-D head
   can follow the logit gradient once G has rank above 2D.

Arithmetic. Integer matrices (any integer dtype, or object arrays of Python ints) and object
arrays of Fractions are computed *exactly*, with python-flint's ``fmpz_mat`` / ``fmpq_mat``
products, and returned as object arrays of Python ints (Fractions when a matrix or the step size
is a non-integer rational): an int8 or int64 input never wraps around. An integer or Fraction
step size keeps exact inputs exact; a float step size, or any float matrix, takes the float path
(exact matrices are then read as float64, float matrices keep their dtype). Booleans, strings,
ragged lists and non-finite values are refused with :class:`InputError`. A float matrix of another
array-API namespace (PyTorch, CuPy, array-api-strict) is computed in its own namespace, dtype and
device, and so are the singular values, truncations and residuals below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import array_api_compat
import numpy as np

from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory.validation import (
    InputError,
    as_array,
    as_numeric_array,
    as_real_scalar,
    check_finite,
    check_integer_in,
    check_real_floating,
    is_exact,
)


def _foreign(x: Any) -> bool:
    """Whether ``x`` is an array of an array-API namespace other than NumPy's."""
    return array_api_compat.is_array_api_obj(x) and not isinstance(x, np.ndarray | np.generic)


def _matrix(x: Any, name: str) -> Any:
    """A finite, non-empty 2-D real array; integers, and object arrays of Python ints or
    Fractions, are kept as they are, for exact arithmetic; a float array of another array-API
    namespace stays in that namespace."""
    if _foreign(x):
        xp, array = as_array(x, name)
        check_real_floating(xp, array, name)
        if array.ndim != 2:
            raise InputError(f"{name}: expected a 2-D array, got ndim={array.ndim}")
        if 0 in array.shape:
            raise InputError(f"{name}: the array is empty (shape {tuple(array.shape)})")
        check_finite(xp, array, name)
        return array
    array = as_numeric_array(x, name, ndim=2)
    if array.size == 0:
        raise InputError(f"{name}: the array is empty (shape {array.shape})")
    if not is_exact(array) and not np.all(np.isfinite(array)):
        raise InputError(f"{name}: non-finite value")
    return array


def _step_size(eta: Any) -> int | Fraction | float:
    """:math:`\\eta` as an int, a Fraction (exact) or a finite float."""
    value = as_real_scalar(eta, "eta")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"eta: non-finite step size {value!r}")
    return value


class _Exact:
    """A python-flint matrix (``fmpz_mat`` or ``fmpq_mat``) spelled like a NumPy one (``@``,
    ``.T``, ``+``, ``-``, scalar ``*``), so that each formula is written once for both."""

    def __init__(self, matrix: Any) -> None:
        self.matrix = matrix

    @classmethod
    def of(cls, array: np.ndarray, rational: bool) -> _Exact:
        import flint  # the exact evaluation only: theory/ imports python-flint nowhere at module level

        rows, columns = array.shape
        if rational:
            entries = [Fraction(v) for v in array.ravel().tolist()]
            return cls(flint.fmpq_mat(rows, columns, [flint.fmpq(f.numerator, f.denominator) for f in entries]))
        return cls(flint.fmpz_mat(rows, columns, [int(v) for v in array.ravel().tolist()]))

    def to_numpy(self, rational: bool) -> np.ndarray:
        """An object array of Python ints (or Fractions)."""
        entries = self.matrix.entries()
        out = np.empty(len(entries), dtype=object)
        out[:] = [Fraction(int(e.p), int(e.q)) for e in entries] if rational else [int(e) for e in entries]
        return out.reshape(self.matrix.nrows(), self.matrix.ncols())

    @property
    def T(self) -> _Exact:  # NumPy's spelling
        return _Exact(self.matrix.transpose())

    def __matmul__(self, other: _Exact) -> _Exact:
        return _Exact(self.matrix * other.matrix)

    def __add__(self, other: _Exact) -> _Exact:
        return _Exact(self.matrix + other.matrix)

    def __sub__(self, other: _Exact) -> _Exact:
        return _Exact(self.matrix - other.matrix)

    def __rmul__(self, scalar: Any) -> _Exact:
        return _Exact(scalar * self.matrix)


def _exact_input(m: Any) -> bool:
    return not _foreign(m) and is_exact(m)


def _float_matrix(m: Any) -> Any:
    """An exact NumPy matrix read as float64; a float matrix as it is (any namespace)."""
    return m.astype(np.float64) if _exact_input(m) else m


def _evaluate(formula: Callable[..., Any], H: Any, W: Any, G: Any, eta: Any) -> Any:
    """``formula(H, W, G, eta)`` exactly (python-flint) when every input is exact, else in floats
    (in the inputs' namespace)."""
    if _exact_input(H) and _exact_input(W) and _exact_input(G) and not isinstance(eta, float):
        rational = isinstance(eta, Fraction) or any(
            m.dtype == object and any(isinstance(v, Fraction) for v in m.flat) for m in (H, W, G)
        )
        import flint

        scalar = flint.fmpq(eta.numerator, eta.denominator) if rational else flint.fmpz(eta)
        return formula(*(_Exact.of(m, rational) for m in (H, W, G)), scalar).to_numpy(rational)
    return formula(*(_float_matrix(m) for m in (H, W, G)), float(eta))


def validated_step(H: Any, W: Any, G: Any) -> tuple[Any, Any, Any]:
    """Check that H (C x D), W (V x D) and G (C x V) fit together, with D <= V."""
    H, W, G = _matrix(H, "H"), _matrix(W, "W"), _matrix(G, "G")
    if H.shape[1] != W.shape[1]:
        raise InputError(f"W: hidden size {W.shape[1]} differs from H's {H.shape[1]}")
    if G.shape != (H.shape[0], W.shape[0]):
        raise InputError(f"G: shape {G.shape} does not match (contexts, V) = {(H.shape[0], W.shape[0])}")
    if W.shape[1] > W.shape[0]:
        raise InputError(f"W: hidden size D={W.shape[1]} exceeds the vocabulary V={W.shape[0]}")
    return H, W, G


def first_order_update(H: Any, W: Any, G: Any, eta: Any = 1) -> Any:
    """:math:`-\\eta\\,(GWW^\\top + HH^\\top G)`, the logit change to first order in :math:`\\eta`."""
    return _evaluate(_first_order, *validated_step(H, W, G), _step_size(eta))


def _first_order(H: Any, W: Any, G: Any, eta: Any) -> Any:
    return -eta * (G @ W @ W.T + H @ (H.T @ G))


def exact_step(H: Any, W: Any, G: Any, eta: Any = 1) -> Any:
    """:math:`H'W'^\\top - HW^\\top` for :math:`H' = H - \\eta GW`, :math:`W' = W - \\eta G^\\top H`."""
    return _evaluate(_step, *validated_step(H, W, G), _step_size(eta))


def _step(H: Any, W: Any, G: Any, eta: Any) -> Any:
    H_next, W_next = H - eta * (G @ W), W - eta * (G.T @ H)
    return H_next @ W_next.T - H @ W.T


def _float_namespace(x: Any, name: str) -> tuple[Any, Any]:
    """``(xp, x)``: a validated matrix as floats (exact NumPy ones read as float64) and its namespace."""
    x = _float_matrix(_matrix(x, name))
    return array_api_compat.array_namespace(x), x


def tail_norm(G: Any, rank: int) -> float:
    """:math:`(\\sum_{i > r} \\sigma_i(G)^2)^{1/2}`: the Eckart-Young residual of the best rank-r fit."""
    xp, G = _float_namespace(G, "G")
    rank = check_integer_in(rank, "rank", 0, min(G.shape))
    sigma = xp.linalg.svdvals(G)
    return float(xp.linalg.vector_norm(sigma[rank:]))


def truncated_svd(G: Any, rank: int) -> Any:
    """:math:`G_r`, the best approximation of rank at most r (the witness that attains Prop. A.6)."""
    xp, G = _float_namespace(G, "G")
    rank = check_integer_in(rank, "rank", 0, min(G.shape))
    U, sigma, Vt = xp.linalg.svd(G, full_matrices=False)
    return (U[:, :rank] * sigma[None, :rank]) @ Vt[:rank, :]


def best_scale(delta: Any, G: Any) -> float:
    """The scalar c minimising :math:`\\lVert c\\Delta - G\\rVert_F`:
    :math:`\\langle\\Delta, G\\rangle / \\lVert\\Delta\\rVert_F^2` (0 for :math:`\\Delta = 0`)."""
    xp, delta = _float_namespace(delta, "delta")
    _, G = _float_namespace(G, "G")
    if delta.shape != G.shape:
        raise InputError(f"delta: shape {tuple(delta.shape)} differs from G's {tuple(G.shape)}")
    norm2 = float(xp.sum(delta * delta))
    return float(xp.sum(delta * G)) / norm2 if norm2 > 0 else 0.0


def residual(delta: Any, G: Any) -> float:
    """:math:`\\min_c \\lVert c\\Delta - G\\rVert_F` at the best scale."""
    c = best_scale(delta, G)
    xp, delta = _float_namespace(delta, "delta")
    return float(xp.linalg.vector_norm(c * delta - _float_namespace(G, "G")[1]))


def construct_step(
    contexts: int, V: int, D: int, seed: int, *, integers: bool = False, spread: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random (H, W, G): Gaussian, or integer entries in [-spread, spread] for exact checks.
    G is a generic dense gradient of full rank min(contexts, V)."""
    contexts = check_integer_in(contexts, "contexts", 1, 100_000)
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 1, V)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    if integers:
        spread = check_integer_in(spread, "spread", 1, 1000)
        draw = lambda *shape: rng.integers(-spread, spread + 1, size=shape)  # noqa: E731
    else:
        draw = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    return draw(contexts, D), draw(V, D), draw(contexts, V)


# --------------------------------------------------------------------------- the logit gradient (Theorem UP.2)


def construct_logit_gradient(
    contexts: int, V: int, seed: int, *, idle: int = 0, scale: float = 1.0, spread: int = 5, observed: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ingredients of a logit gradient :math:`\\operatorname{diag}(f)(P - \\tilde N)`: P (C x V), the
    float64 softmax of Gaussian logits times ``scale``; integer next-token counts (C x V, 1 to
    ``observed`` distinct tokens per context, each seen 1 to 3 times), whose rows normalised are
    :math:`\\tilde N`; and integer frequencies f in [1, ``spread``], the last ``idle`` of them 0 (contexts
    that drop out of G). ``spread = 1`` makes f constant on the active contexts, the equality case of
    UP.2 (3)."""
    contexts = check_integer_in(contexts, "contexts", 1, 100_000)
    V = check_integer_in(V, "V", 2, 1 << 20)
    idle = check_integer_in(idle, "idle", 0, contexts)
    spread = check_integer_in(spread, "spread", 1, 1000)
    observed = min(check_integer_in(observed, "observed", 1), V)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    z = scale * rng.standard_normal((contexts, V))
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    counts = np.zeros((contexts, V), dtype=np.int64)
    for c in range(contexts):
        tokens = rng.choice(V, size=rng.integers(1, observed + 1), replace=False)
        counts[c, tokens] = rng.integers(1, 4, size=len(tokens))
    f = rng.integers(1, spread + 1, size=contexts)
    f[contexts - idle :] = 0
    return P, counts, f


def logit_gradient(P: Any, counts: Any, f: Any, *, exact: bool = False) -> np.ndarray:
    """:math:`G = \\operatorname{diag}(f)(P - \\tilde N)` with :math:`\\tilde N` the rows of ``counts``
    normalised. With ``exact``, every float of P is read as the rational it is and each row normalised
    exactly (a genuine probability row), f and the counts as rationals: an object array of Fractions,
    whose rows sum to 0 exactly (Theorem UP.2 (1)). Otherwise float64."""
    P, counts = np.asarray(P, dtype=np.float64), np.asarray(counts)
    f = np.asarray(f)
    if P.ndim != 2 or counts.shape != P.shape or f.shape != (P.shape[0],):
        raise InputError(f"P {P.shape}, counts {counts.shape} and f {f.shape}: need C x V, C x V and C")
    totals = counts.sum(axis=1)
    if (counts < 0).any() or (totals <= 0).any():
        raise InputError("counts: need non-negative counts with at least one observed token per context")
    if not exact:
        return f[:, None] * (P - counts / totals[:, None])
    rows = []
    for p, n, total, weight in zip(P, counts, totals, f, strict=True):
        exact_p = [Fraction(x) for x in p]
        mass = sum(exact_p)
        weight, total = Fraction(int(weight)), int(total)
        rows.append([weight * (x / mass - Fraction(int(k), total)) for x, k in zip(exact_p, n, strict=True)])
    return np.array(rows, dtype=object)


def frequency_ratios(G: Any, X: Any) -> tuple[float, float]:
    r"""``(min, max)`` of :math:`\sigma_i(G)/\sigma_i(X)` for G a row scaling of X, over the i whose
    float :math:`\sigma_i(X)` exceeds the SVD's backward error :math:`\gamma_{n+2}\sqrt{m}\,\sigma_1(X)`
    (an m x n X; the others may be rounding of a zero): Theorem UP.2 (3) puts both in
    :math:`[f_{\min}, f_{\max}]` up to that error. Float64, no certificate."""
    G, X = np.asarray(G, dtype=np.float64), np.asarray(X, dtype=np.float64)
    if G.shape != X.shape:
        raise InputError(f"G: shape {G.shape} differs from X's {X.shape}")
    s_G, s_X = np.linalg.svd(G, compute_uv=False), np.linalg.svd(X, compute_uv=False)
    u = unit_roundoff(np.float64)
    kept = s_X > gamma(max(X.shape) + 2, u) * min(X.shape) ** 0.5 * s_X[0]
    ratios = s_G[kept] / s_X[kept]
    return float(ratios.min()), float(ratios.max())
