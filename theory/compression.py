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

The projection goes through a rank-revealing QR factor of W (float64): a Householder QR
:math:`W = Q_1 R` (blocked, BLAS-3), then a column-pivoted QR of the D x D factor,
:math:`R P = Q_2 R_2`, so that :math:`W P = (Q_1 Q_2) R_2` is a column-pivoted QR of W, and a
rank-deficient W (a low-rank head :math:`W = AB`) is answered on its actual column space. Rows of
G are streamed in blocks: memory is O(VD + block V), never :math:`V^2`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.special

from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory.validation import (
    InputError,
    as_floating_array,
    as_index_array,
    as_numeric_array,
    as_real_array,
    check_integer_in,
    check_real_in,
)

#: Rows of G processed at once (memory: block x V floats).
BLOCK_ROWS = 256

#: Heads of at least this many entries are factored by PyTorch's ``linalg.qr`` where PyTorch is
#: installed (its LAPACK, MKL on x86, took half the CPU time of the OpenBLAS that NumPy and SciPy
#: ship on a 131,072 x 576 head: 10.5 against 19.5 CPU-s for SciPy's ``geqrf`` alone); smaller heads,
#: and every head where PyTorch is missing, by SciPy's. Either is a backward-stable Householder QR.
TORCH_QR_MIN_ENTRIES = 1 << 20


def _float64_matrix(X: Any, name: str) -> np.ndarray:
    """``X`` as a float64 array, refused as :func:`as_real_array` refuses, without a copy when it
    already is one (a head of V = 131,072 rows is 0.6 GB)."""
    return as_numeric_array(X, name).astype(np.float64, copy=False)


def _householder_qr(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The thin QR factors Q (V x D) and R (D x D, upper triangular) of a float64 W (V >= D),
    unpivoted (see :data:`TORCH_QR_MIN_ENTRIES` for which library computes them)."""
    if W.size >= TORCH_QR_MIN_ENTRIES:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            Q, R = torch.linalg.qr(torch.from_numpy(np.ascontiguousarray(W)))
            return Q.numpy(), R.numpy()
    # Fortran order lets LAPACK factor the copy in place and form Q over it (one V x D buffer).
    return scipy.linalg.qr(np.asfortranarray(W), mode="economic", overwrite_a=True, check_finite=False)


def column_basis(W: Any) -> tuple[np.ndarray, int]:
    """An orthonormal basis Q (V x r) of col W from a column-pivoted QR, and the numerical rank r:
    diagonal entries of the pivoted triangular factor below :math:`\\max(V, D)\\,u\\,|R_{11}|` count
    as zero.

    The pivoted QR is computed in two steps: a Householder QR :math:`W = Q_1 R` (blocked, BLAS-3),
    then a column-pivoted QR of the D x D factor, :math:`RP = Q_2 R_2`. Then :math:`WP = (Q_1 Q_2)
    R_2`; as :math:`Q_1` preserves the norms and inner products of W's columns, the pivots and
    :math:`R_2` are, in exact arithmetic, those of a pivoted QR of W itself (LAPACK's ``geqp3``, a
    BLAS-2 factorization of the V x D matrix), and both steps are backward stable, so the rank is
    read off :math:`R_2` with the same threshold. Q is :math:`Q_1 Q_2` restricted to the first r
    columns; for r = D it spans what :math:`Q_1` spans, and :math:`Q_1` is returned."""
    W = _float64_matrix(W, "W")
    if W.ndim != 2:
        raise InputError(f"W: expected a 2-D (V x D) head, got ndim={W.ndim}")
    V, D = W.shape
    if V < 2 or D < 1:
        raise InputError(f"W: shape {W.shape} is out of range (need V >= 2 and D >= 1)")
    if D > V:
        raise InputError(f"W: hidden size D={D} exceeds the vocabulary V={V}")
    if not np.all(np.isfinite(W)):
        raise InputError("W: non-finite value")
    Q, R = _householder_qr(W)
    rotation, R_pivoted, _ = scipy.linalg.qr(R, pivoting=True)
    diagonal = np.abs(np.diag(R_pivoted))
    if diagonal[0] == 0:
        return Q[:, :0], 0
    rank = int(np.sum(diagonal > max(V, D) * np.finfo(np.float64).eps * diagonal[0]))
    return (Q, D) if rank == D else (Q @ rotation[:, :rank], rank)


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


class _Eq1Sums:
    """The running sums of Eq. 1 over row blocks of G, projected through Q (V x k): per block of at
    most :data:`BLOCK_ROWS` rows, the row norms of G, of C = GQ and of the residual G - CQᵀ, the
    residual formed in one buffer of the block's size by one BLAS call (``dgemm``, beta = 1), so no
    block-sized temporary is allocated after the first block."""

    def __init__(self, Q: np.ndarray) -> None:
        Q = _float64_matrix(Q, "Q")
        self.Q = Q if Q.flags.c_contiguous or Q.flags.f_contiguous else np.ascontiguousarray(Q)
        self.total = self.kept = self.lost = 0.0
        self.lost_shares: list[np.ndarray] = []
        self.kept_shares: list[np.ndarray] = []
        self.rows = 0
        self.scratch: np.ndarray | None = None

    def add(self, G_rows: Any) -> None:
        """Add a block of rows of G (any number of rows; read, never written)."""
        block = _float64_matrix(G_rows, "G")
        V = self.Q.shape[0]
        if block.ndim != 2 or block.shape[1] != V:
            raise InputError(f"G: rows of length {block.shape[-1]} do not match V={V}")
        if not np.all(np.isfinite(block)):
            raise InputError("G: non-finite gradient")
        for start in range(0, block.shape[0], BLOCK_ROWS):
            piece = block[start : start + BLOCK_ROWS]
            if self.scratch is None or self.scratch.shape[0] < piece.shape[0]:
                self.scratch = np.empty((piece.shape[0], V))
            residual = self.scratch[: piece.shape[0]]
            np.copyto(residual, piece)
            self.add_owned(residual)

    def add_owned(self, block: np.ndarray) -> None:
        """Add a C-contiguous float64 block of finite rows of G, overwriting it with its residual."""
        norms = _row_norms(block)
        coefficients = (self.Q.T @ block.T).T  # C = GQ; OpenBLAS runs this form ~3x faster than block @ Q
        residual = _subtract_projection(block, coefficients, self.Q)
        kept_norms, lost_norms = _row_norms(coefficients), _row_norms(residual)
        self.total += float(norms @ norms)
        self.kept += float(kept_norms @ kept_norms)
        self.lost += float(lost_norms @ lost_norms)
        nonzero = norms > 0
        self.lost_shares.append(lost_norms[nonzero] / norms[nonzero])
        self.kept_shares.append(kept_norms[nonzero] / norms[nonzero])
        self.rows += block.shape[0]

    def result(self) -> Compression:
        if self.total == 0:
            raise InputError("G: the gradient is zero, no share of it is defined")
        lost_share = np.concatenate(self.lost_shares)
        kept_share = np.concatenate(self.kept_shares)
        return Compression(
            destroyed=float(np.sqrt(self.lost / self.total)),
            cosine=float(np.sqrt(self.kept / self.total)),
            destroyed_squared=float(self.lost / self.total),
            destroyed_per_token=float(lost_share.mean()),
            cosine_per_token=float(kept_share.mean()),
            rank=self.Q.shape[1],
            rows=self.rows,
        )


def _row_norms(X: np.ndarray) -> np.ndarray:
    r"""Euclidean norms of the rows of X, :math:`\sqrt{\sum_j x_{ij}^2}`, with no temporary of X's size."""
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def _subtract_projection(block: np.ndarray, coefficients: np.ndarray, Q: np.ndarray) -> np.ndarray:
    r"""``block - coefficients @ Q.T``, written over ``block`` (C-contiguous float64) by one ``dgemm``
    on the transposes, :math:`B^\top \leftarrow B^\top - Q C^\top` (each entry the rounded difference
    of the entry and its rounded product, as the expression computes it)."""
    if Q.shape[1] == 0:
        return block
    a, trans_a = (Q, False) if Q.flags.f_contiguous else (Q.T, True)
    c = scipy.linalg.blas.dgemm(
        -1.0, a, np.ascontiguousarray(coefficients).T, beta=1.0, c=block.T, trans_a=trans_a, overwrite_c=True
    )
    return c.T


def compression(G_rows: Any, Q: np.ndarray) -> Compression:
    """Eq. 1 for an iterable of row blocks of G (each r x V), projecting through Q."""
    sums = _Eq1Sums(Q)
    for block in G_rows:
        sums.add(block)
    return sums.result()


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


def _gradient_blocks(
    H: np.ndarray, W: np.ndarray, targets: np.ndarray, block: int, reuse: bool = False
) -> Iterator[np.ndarray]:
    """The blocks of :func:`logit_gradient_blocks`, each in a new array, or (``reuse``) all in one
    buffer, overwritten by the next block."""
    T = len(targets)
    buffer = None
    for start in range(0, T, block):
        h = H[start : start + block]
        if buffer is None or not reuse:
            buffer = np.empty((h.shape[0], W.shape[0]), dtype=np.result_type(H, W))
        yield _logit_gradient_into(h, W, targets[start : start + block], T, buffer[: h.shape[0]])


def _logit_gradient_into(h: np.ndarray, W: np.ndarray, targets: np.ndarray, T: int, out: np.ndarray) -> np.ndarray:
    r"""``(softmax(h Wᵀ) - e_t) / T`` row by row, in ``out``: the logits, then the softmax in place by
    the operations of ``scipy.special.softmax`` (:math:`e^{z - \max z} / \sum e^{z - \max z}`),
    then the target's 1 subtracted and the division by T, each entry rounded as before."""
    np.matmul(h, W.T, out=out)
    out -= out.max(axis=1, keepdims=True)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)
    out[np.arange(out.shape[0]), targets] -= 1
    out /= T
    return out


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
    """Peak memory of :func:`random_head_compression`, estimated: the head W, the copy its QR factors
    in place and Q (three V x D float64 arrays), the hidden states, and the one block of
    logit-gradient rows the stream reuses (BLOCK_ROWS x V). At V = 131,072, D = 576 and 4,096 tokens
    this gives 2.0 GiB against a peak resident size of 1.7 GiB measured (the interpreter and its
    libraries included; ``python benchmarks/compression.py``)."""
    return 8 * (3 * V * D + tokens * D + min(BLOCK_ROWS, tokens) * V)


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
    sums = _Eq1Sums(Q)
    for block in _gradient_blocks(H, W, targets, BLOCK_ROWS, reuse=True):  # one buffer, overwritten in place
        sums.add_owned(block)
        if on_block is not None:
            on_block()
    return sums.result()


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
