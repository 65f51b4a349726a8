r"""Gradient compression through the LM head (seed 000, §2.4 and §3.3, Eq. 1).

Backpropagation through :math:`L = HW^\top` sends the logit gradient G (one row per token, in
:math:`\mathbb R^V`) to :math:`\nabla_H = GW`: only the component of each row in the column space
of W survives, the component in :math:`\ker W^\top = (\operatorname{col} W)^\perp` is destroyed.
With :math:`\Pi = QQ^\top` the orthogonal projector on :math:`\operatorname{col} W` (Q from a QR
factor of W), the paper's Eq. 1 measures

.. math:: r = \frac{\lVert G - G\Pi \rVert_F}{\lVert G \rVert_F},\qquad
          c = \frac{\lVert G\Pi \rVert_F}{\lVert G \rVert_F},\qquad r^2 + c^2 = 1,

the share of the gradient norm destroyed and the cosine between G and what survives (for the
Frobenius inner product :math:`\langle G, G\Pi\rangle = \lVert G\Pi\rVert_F^2`). The paper weights
contexts by frequency (each token's row counted once); we also report the per-token mean of the
row-wise shares, and the squared-norm share :math:`r^2`, each labelled.

The projection goes through a rank-revealing QR factor of W (float64, column pivoting), so a
rank-deficient W (a low-rank head :math:`W = AB`) is answered on its actual column space, and
rows of G are streamed in blocks: memory is O(VD + block V), never :math:`V^2`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import scipy.linalg
import scipy.special

from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory.validation import (
    InputError,
    as_floating_array,
    as_index_array,
    as_real_array,
    check_integer_in,
    check_real_in,
)

#: Rows of G processed at once (memory: block x V floats).
BLOCK_ROWS = 256


def column_basis(W: Any) -> tuple[np.ndarray, int]:
    """An orthonormal basis Q (V x r) of col W from a column-pivoted QR, and the numerical rank r:
    diagonal entries of R below :math:`\\max(V, D)\\,u\\,|R_{11}|` count as zero."""
    W = as_real_array(W, "W")
    if W.ndim != 2:
        raise InputError(f"W: expected a 2-D (V x D) head, got ndim={W.ndim}")
    V, D = W.shape
    if V < 2 or D < 1:
        raise InputError(f"W: shape {W.shape} is out of range (need V >= 2 and D >= 1)")
    if D > V:
        raise InputError(f"W: hidden size D={D} exceeds the vocabulary V={V}")
    if not np.all(np.isfinite(W)):
        raise InputError("W: non-finite value")
    Q, R, _ = scipy.linalg.qr(W, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    if diagonal.size == 0 or diagonal[0] == 0:
        return Q[:, :0], 0
    rank = int(np.sum(diagonal > max(V, D) * np.finfo(np.float64).eps * diagonal[0]))
    return Q[:, :rank], rank


def svd_column_basis(W: Any) -> tuple[Any, int, float]:
    r"""``(Q, k, m)`` for a head W (V x D) of any array-API namespace, computed there: Q = the first k
    left singular vectors of W's thin SVD, k = #{\hat\sigma_i > m}, m = :math:`\gamma_{V+2}\sqrt D\,\hat\sigma_1`
    at the unit roundoff of W's dtype (the array API's ``linalg.qr`` has no column pivoting).

    A backward-stable SVD returns the exact SVD of W + E, :math:`\lVert E\rVert_2 \le m`, so by Weyl
    :math:`|\hat\sigma_i - \sigma_i| \le m` and each kept value belongs to a nonzero singular value of W:
    k <= rank W, never more. Q spans the top-k left singular subspace of W + E; by Wedin,
    :math:`\lVert\sin\Theta(\operatorname{span} Q, U_k(W))\rVert_2 \le m / (\hat\sigma_k - m)`, and Q is
    orthonormal only to the SVD's backward error (callers measure that defect)."""
    xp = array_api_compat.array_namespace(W)
    if W.ndim != 2:
        raise InputError(f"W: expected a 2-D (V x D) head, got ndim={W.ndim}")
    V, D = W.shape
    if V < 2 or D < 1 or D > V:
        raise InputError(f"W: shape {tuple(W.shape)} is out of range (need V >= 2 and 1 <= D <= V)")
    if not bool(xp.all(xp.isfinite(W))):
        raise InputError("W: non-finite value")
    U, sigma, _ = xp.linalg.svd(W, full_matrices=False)
    margin = gamma(max(V, D) + 2, unit_roundoff(W.dtype)) * D**0.5 * float(sigma[0])
    k = int(xp.sum(xp.astype(sigma > margin, xp.int32))) if float(sigma[0]) > 0 else 0
    return U[:, :k], k, margin


@dataclass(frozen=True)
class Compression:
    """Eq. 1 in its three labelled variants, with the norms it was computed from."""

    destroyed: float  # r: frequency-weighted (Frobenius) share of the norm in ker W^T
    cosine: float  # c: Frobenius cosine between G and its projection on col W
    destroyed_squared: float  # r^2: share of the squared norm
    destroyed_per_token: float  # mean over rows of ||g_i - Pi g_i|| / ||g_i||
    cosine_per_token: float  # mean over rows of ||Pi g_i|| / ||g_i||
    rank: int  # dimension of col W
    rows: int

    @property
    def pythagoras_residual(self) -> float:
        """r² + c² − 1, which is 0 in exact arithmetic: how far rounding moved the two shares."""
        return self.destroyed**2 + self.cosine**2 - 1

    def to_json(self) -> dict[str, float | int]:
        return {
            "rank_W": self.rank,
            "rows": self.rows,
            "destroyed_frequency_weighted": self.destroyed,
            "cosine_frequency_weighted": self.cosine,
            "destroyed_squared_norm": self.destroyed_squared,
            "destroyed_per_token_mean": self.destroyed_per_token,
            "cosine_per_token_mean": self.cosine_per_token,
            "pythagoras_residual": self.pythagoras_residual,
        }


def compression(G_rows: Any, Q: np.ndarray) -> Compression:
    """Eq. 1 for an iterable of row blocks of G (each r x V), projecting through Q."""
    total = kept = lost = 0.0
    per_token_lost: list[np.ndarray] = []
    per_token_kept: list[np.ndarray] = []
    rows = 0
    for block in G_rows:
        block = as_real_array(block, "G")
        if block.ndim != 2 or block.shape[1] != Q.shape[0]:
            raise InputError(f"G: rows of length {block.shape[-1]} do not match V={Q.shape[0]}")
        if not np.all(np.isfinite(block)):
            raise InputError("G: non-finite gradient")
        coefficients = block @ Q
        residual = block - coefficients @ Q.T
        norms = np.linalg.norm(block, axis=1)
        kept_norms = np.linalg.norm(coefficients, axis=1)
        lost_norms = np.linalg.norm(residual, axis=1)
        total += float(norms @ norms)
        kept += float(kept_norms @ kept_norms)
        lost += float(lost_norms @ lost_norms)
        nonzero = norms > 0
        per_token_lost.append(lost_norms[nonzero] / norms[nonzero])
        per_token_kept.append(kept_norms[nonzero] / norms[nonzero])
        rows += block.shape[0]
    if total == 0:
        raise InputError("G: the gradient is zero, no share of it is defined")
    lost_share = np.concatenate(per_token_lost)
    kept_share = np.concatenate(per_token_kept)
    return Compression(
        destroyed=float(np.sqrt(lost / total)),
        cosine=float(np.sqrt(kept / total)),
        destroyed_squared=float(lost / total),
        destroyed_per_token=float(lost_share.mean()),
        cosine_per_token=float(kept_share.mean()),
        rank=Q.shape[1],
        rows=rows,
    )


def _batch(H: Any, W: Any, targets: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated hidden states H (T x D), head W (V x D), floating (float dtypes kept, integers
    read as float64), and target ids in [0, V)."""
    H, W = as_floating_array(H, "H", ndim=2), as_floating_array(W, "W", ndim=2)
    if H.shape[1] != W.shape[1]:
        raise InputError(f"W: hidden size {W.shape[1]} differs from H's {H.shape[1]}")
    return H, W, _targets(targets, H.shape[0], W.shape[0])


def _targets(targets: Any, T: int, V: int) -> np.ndarray:
    """Target ids: T integers in [0, V)."""
    targets = as_index_array(targets, "targets", V)
    if len(targets) != T:
        raise InputError(f"targets: {len(targets)} ids for {T} rows")
    return targets


def logit_gradient_blocks(H: Any, W: Any, targets: Any, block: int = BLOCK_ROWS) -> Iterator[np.ndarray]:
    """Rows :math:`(\\operatorname{softmax}(Wh_i) - e_{t_i})/T` of the cross-entropy logit
    gradient of T tokens, in blocks (the 1/T is the frequency weight of each token). The
    arguments are validated at the call, before the first block."""
    H, W, targets = _batch(H, W, targets)
    return _gradient_blocks(H, W, targets, check_integer_in(block, "block", 1))


def _gradient_blocks(H: np.ndarray, W: np.ndarray, targets: np.ndarray, block: int) -> Iterator[np.ndarray]:
    T = len(targets)
    for start in range(0, T, block):
        p = scipy.special.softmax(H[start : start + block] @ W.T, axis=1)
        p[np.arange(p.shape[0]), targets[start : start + block]] -= 1
        yield p / T


def construct_head(V: int, D: int, seed: int, *, rank: int | None = None, width: int | None = None) -> np.ndarray:
    """A random head W (V x width): full rank D (width = D), or low rank W = AB with A: V x rank,
    B: rank x width (the paper's constrained heads)."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 1, V)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    if rank is None:
        return rng.standard_normal((V, D)) / np.sqrt(D)
    rank = check_integer_in(rank, "rank", 1, D)
    width = D if width is None else check_integer_in(width, "width", rank, V)
    return (rng.standard_normal((V, rank)) @ rng.standard_normal((rank, width))) / np.sqrt(rank * width)


def construct_batch(tokens: int, D: int, V: int, seed: int, *, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Hidden states (tokens x D, Gaussian times ``scale``) and Zipfian next-token targets."""
    tokens = check_integer_in(tokens, "tokens", 1, 10_000_000)
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 1, 1 << 16)
    scale = check_real_in(scale, "scale", 0.0, 1e6)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    weights = 1.0 / np.arange(1, V + 1) ** 1.1
    targets = rng.choice(V, size=tokens, p=weights / weights.sum())
    return scale * rng.standard_normal((tokens, D)), targets


def cross_entropy(Z: Any, targets: Any) -> float:
    """Mean cross-entropy of logits Z (T x V) against targets (log-sum-exp stabilised)."""
    Z = as_floating_array(Z, "Z", ndim=2)
    targets = _targets(targets, Z.shape[0], Z.shape[1])
    lse = scipy.special.logsumexp(Z, axis=1)
    return float(np.mean(lse - Z[np.arange(len(targets)), targets]))


def loss_change_along(H: Any, W: Any, targets: Any, fractions: Any) -> dict[str, list[float]]:
    """Section 3.4 (Figure 6): the change of the batch loss when the logits move by a fraction of
    their norm along -G (the logit gradient) and along -GWW^T (the move that a step on H makes),
    both directions normalised to the same logit-update norm."""
    H, W, targets = _batch(H, W, targets)
    fractions = as_real_array(fractions, "fractions", ndim=1)
    Z = H @ W.T
    G = np.concatenate(list(logit_gradient_blocks(H, W, targets)))
    induced = G @ W @ W.T
    base, norm = cross_entropy(Z, targets), float(np.linalg.norm(Z))
    directions = {"logit gradient": G / np.linalg.norm(G), "hidden-state update": induced / np.linalg.norm(induced)}
    return {
        name: [cross_entropy(Z - t * norm * d, targets) - base for t in fractions] for name, d in directions.items()
    }


def compression_memory_bytes(V: int, D: int, tokens: int) -> int:
    """Peak memory of :func:`random_head_compression`, estimated: the head W, its pivoted-QR
    basis and the QR workspace (four V x D float64 arrays), the hidden states, and a block of
    logit-gradient rows with its temporaries (four BLOCK_ROWS x V arrays). At V = 131,072,
    D = 576 and 4,096 tokens this gives 3.3 GiB against 2.9 GB measured."""
    return 8 * (4 * V * D + tokens * D + 4 * min(BLOCK_ROWS, tokens) * V)


def random_head_compression(
    V: int, D: int, tokens: int, seed: int, *, rank: int | None = None, on_block: Callable[[], None] | None = None
) -> Compression:
    """Eq. 1 for a random head (of rank ``rank`` if given) and ``tokens`` synthetic tokens:
    W from :func:`construct_head` (``seed``), hidden states and Zipfian targets from
    :func:`construct_batch` (``seed + 1``), the logit gradient streamed in blocks of
    :data:`BLOCK_ROWS` rows and projected through a basis of col W, never a V x V projector."""
    W = construct_head(V, D, seed, rank=rank)
    Q, _ = column_basis(W)
    H, targets = construct_batch(tokens, W.shape[1], V, seed + 1)

    def streamed() -> Iterator[np.ndarray]:
        for block in logit_gradient_blocks(H, W, targets):
            yield block
            if on_block is not None:
                on_block()

    return compression(streamed(), Q)


@dataclass(frozen=True, eq=False)
class EfficiencySplit:
    r"""Figure 6 to first order, split in two: ``total = kernel * anisotropy``.

    Per unit of logit-update norm, the loss decreases at rate :math:`e_G = \lVert G\rVert_F` along
    :math:`-G` and :math:`e_H = \lVert GW\rVert_F^2 / \lVert GWW^\top\rVert_F` along
    :math:`-GWW^\top`; ``total`` is :math:`e_G / e_H`. With the thin SVD
    :math:`W = \sum_i \sigma_i u_i r_i^\top` of rank r, :math:`\Pi = \sum_i u_i u_i^\top` and the
    energies :math:`w_i = \lVert G u_i\rVert^2`, ``kernel`` is
    :math:`\lVert G\rVert_F / \lVert G\Pi\rVert_F = 1/c` and ``anisotropy`` is
    :math:`\lVert G\Pi\rVert_F \lVert GWW^\top\rVert_F / \lVert GW\rVert_F^2
    = \sqrt{\textstyle\sum_i w_i \sigma_i^4 \sum_i w_i} / \sum_i w_i \sigma_i^2 \ge 1`."""

    logit_gradient: float  # e_G = ||G||_F
    hidden_state_update: float  # e_H = ||GW||_F^2 / ||GWW^T||_F
    total: float  # e_G / e_H, from G, GW and GWW^T directly
    kernel: float  # 1/c, from a pivoted-QR basis of col W
    anisotropy: float  # from the singular values of W and the energies of G along them
    rank: int  # numerical rank of W
    singular_values: np.ndarray  # sigma_1 >= ... >= sigma_r > 0
    energies: np.ndarray  # w_i = ||G u_i||^2, summing to ||G Pi||_F^2
    top_direction: np.ndarray  # u_1, the left singular vector of sigma_1 (V entries)


def efficiency_split(G: Any, W: Any) -> EfficiencySplit:
    r"""Split the first-order update-efficiency ratio of logit gradient G (T x V) through head W
    (V x D) into the kernel part 1/c and the anisotropy part (equal to 1 iff the :math:`\sigma_i`
    with :math:`w_i > 0` are all equal). The three factors come from three routes (dense products,
    a pivoted QR, an SVD), so ``kernel * anisotropy == total`` is a check, not a definition."""
    G = as_floating_array(G, "G", ndim=2).astype(np.float64, copy=False)
    Q, rank = column_basis(W)
    W = as_real_array(W, "W")
    if G.shape[1] != W.shape[0]:
        raise InputError(f"G: rows of length {G.shape[1]} do not match V={W.shape[0]}")
    if not np.all(np.isfinite(G)):
        raise InputError("G: non-finite gradient")
    U, sigma, _ = np.linalg.svd(W, full_matrices=False)
    U, sigma = U[:, :rank], sigma[:rank]
    total = through_head = hidden_squared = 0.0
    energies = np.zeros(rank)
    for start in range(0, G.shape[0], BLOCK_ROWS):
        block = G[start : start + BLOCK_ROWS]
        GW = block @ W
        total += float(np.sum(block * block))
        through_head += float(np.sum(GW * GW))
        hidden_squared += float(np.sum((GW @ W.T) ** 2))
        energies += np.sum((block @ U) ** 2, axis=0)
    top = U[:, 0].copy()
    del U
    if total == 0:
        raise InputError("G: the gradient is zero, no update efficiency is defined")
    if through_head == 0:
        raise InputError("G: no component of the gradient reaches col W, the hidden-state update is zero")
    e_G, e_H = np.sqrt(total), through_head / np.sqrt(hidden_squared)
    kept = compression([G], Q).cosine
    s2 = sigma**2
    anisotropy = np.sqrt(float(energies @ s2**2) * float(energies.sum())) / float(energies @ s2)
    return EfficiencySplit(
        logit_gradient=float(e_G),
        hidden_state_update=float(e_H),
        total=float(e_G / e_H),
        kernel=1.0 / kept,
        anisotropy=float(anisotropy),
        rank=rank,
        singular_values=sigma,
        energies=energies,
        top_direction=top,
    )
