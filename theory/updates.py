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
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from theory._validation import InputError, check_size


def _matrix(x: Any, name: str) -> np.ndarray:
    """A finite 2-D real array; integers, and object arrays of Python ints or Fractions, are kept
    as they are, for exact arithmetic."""
    array = np.asarray(x)
    if array.ndim != 2:
        raise InputError(f"{name}: expected a 2-D array, got ndim={array.ndim}")
    exact_entries = array.dtype == object and all(isinstance(x, (int, Fraction)) for x in array.ravel())
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating) or exact_entries):
        raise InputError(f"{name}: expected a real dtype (or exact ints / Fractions), got {array.dtype}")
    if array.size == 0:
        raise InputError(f"{name}: the array is empty (shape {array.shape})")
    if np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        raise InputError(f"{name}: non-finite value")
    return array


def validated_step(H: Any, W: Any, G: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check that H (C x D), W (V x D) and G (C x V) fit together, with D <= V."""
    H, W, G = _matrix(H, "H"), _matrix(W, "W"), _matrix(G, "G")
    if H.shape[1] != W.shape[1]:
        raise InputError(f"W: hidden size {W.shape[1]} differs from H's {H.shape[1]}")
    if G.shape != (H.shape[0], W.shape[0]):
        raise InputError(f"G: shape {G.shape} does not match (contexts, V) = {(H.shape[0], W.shape[0])}")
    if W.shape[1] > W.shape[0]:
        raise InputError(f"W: hidden size D={W.shape[1]} exceeds the vocabulary V={W.shape[0]}")
    return H, W, G


def first_order_update(H: Any, W: Any, G: Any, eta: Any = 1) -> np.ndarray:
    """:math:`-\\eta\\,(GWW^\\top + HH^\\top G)`, the logit change to first order in :math:`\\eta`."""
    H, W, G = validated_step(H, W, G)
    return -eta * (G @ W @ W.T + H @ (H.T @ G))


def exact_step(H: Any, W: Any, G: Any, eta: Any = 1) -> np.ndarray:
    """:math:`H'W'^\\top - HW^\\top` for :math:`H' = H - \\eta GW`, :math:`W' = W - \\eta G^\\top H`."""
    H, W, G = validated_step(H, W, G)
    H_next, W_next = H - eta * (G @ W), W - eta * (G.T @ H)
    return H_next @ W_next.T - H @ W.T


def tail_norm(G: Any, rank: int) -> float:
    """:math:`(\\sum_{i > r} \\sigma_i(G)^2)^{1/2}`: the Eckart-Young residual of the best rank-r fit."""
    G = _matrix(G, "G").astype(np.float64)
    rank = check_size(rank, "rank", 0, min(G.shape))
    sigma = np.linalg.svd(G, compute_uv=False)
    return float(np.sqrt(np.sum(sigma[rank:] ** 2)))


def truncated_svd(G: Any, rank: int) -> np.ndarray:
    """:math:`G_r`, the best approximation of rank at most r (the witness that attains Prop. A.6)."""
    G = _matrix(G, "G").astype(np.float64)
    rank = check_size(rank, "rank", 0, min(G.shape))
    U, sigma, Vt = np.linalg.svd(G, full_matrices=False)
    return (U[:, :rank] * sigma[:rank]) @ Vt[:rank]


def best_scale(delta: Any, G: Any) -> float:
    """The scalar c minimising :math:`\\lVert c\\Delta - G\\rVert_F`:
    :math:`\\langle\\Delta, G\\rangle / \\lVert\\Delta\\rVert_F^2` (0 for :math:`\\Delta = 0`)."""
    delta, G = _matrix(delta, "delta").astype(np.float64), _matrix(G, "G").astype(np.float64)
    if delta.shape != G.shape:
        raise InputError(f"delta: shape {delta.shape} differs from G's {G.shape}")
    norm2 = float(np.sum(delta * delta))
    return float(np.sum(delta * G) / norm2) if norm2 > 0 else 0.0


def residual(delta: Any, G: Any) -> float:
    """:math:`\\min_c \\lVert c\\Delta - G\\rVert_F` at the best scale."""
    c = best_scale(delta, G)
    return float(np.linalg.norm(c * np.asarray(delta, dtype=np.float64) - np.asarray(G, dtype=np.float64)))


def construct_step(
    contexts: int, V: int, D: int, seed: int, *, integers: bool = False, spread: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random (H, W, G): Gaussian, or integer entries in [-spread, spread] for exact checks.
    G is a generic dense gradient of full rank min(contexts, V)."""
    contexts = check_size(contexts, "contexts", 1, 100_000)
    V = check_size(V, "V", 2, 1 << 24)
    D = check_size(D, "D", 1, V)
    rng = np.random.default_rng(check_size(seed, "seed", 0))
    if integers:
        spread = check_size(spread, "spread", 1, 1000)
        draw = lambda *shape: rng.integers(-spread, spread + 1, size=shape)  # noqa: E731
    else:
        draw = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    return draw(contexts, D), draw(V, D), draw(contexts, V)
