r"""The certified rank of a real model's log-probabilities, and its hidden size read off them (issue 21).

Seed 001, Corollary 1: a softmax head's log-probabilities :math:`\log P = HW^\top - \operatorname{lse}(HW^\top)
\mathbf 1^\top = [H, -\operatorname{lse}]\,[W, \mathbf 1]^\top` have rank at most D + 1 whatever computes H.
Here :math:`L^* = \log\operatorname{softmax}(HW^\top + \mathbf 1 b^\top)` is that matrix in exact arithmetic, for
the model's own final hidden states H (N contexts, the float32 values its forward produced) and its head W
(and bias b, if it has one), read exactly; :math:`\hat L` is the model's own float32 log P on those contexts
(its head and ``torch.log_softmax``, as the forward computes them). Both ends of rank L* are certified:

- *Upper end*: the factorization through D + 1 columns (D + 2 with a bias), once the model's
  :math:`\hat L` is shown to be that factorization's value to within the rounding of the float32 forward
  pass: :math:`\lVert \hat L - \tilde L\rVert_F` (measured, :math:`\tilde L` the float64 recomputation) is at
  most the float32 bound on :math:`\lVert\hat L - L^*\rVert_F` plus the float64 bound on
  :math:`\lVert\tilde L - L^*\rVert_F`. A head with an unmodelled bias, a soft cap or a temperature fails
  the check, and the upper end falls back to the shape (and no end is trusted).
- *Lower end*: the singular values of :math:`\hat L` itself (the outputs, read exactly in float64) above a
  Weyl margin (:func:`rankwall.checks.exact.gram_rank_lower_bound`, the Gram route: the N x V SVD costs
  minutes on two cores), with the entry error :math:`\lVert\hat L - L^*\rVert_F \le \lVert\hat L - \tilde
  L\rVert_F + \lVert\tilde L - L^*\rVert_F` (the measured distance, rounded up, plus the float64 bound).

The rounding model, per entry (:mod:`rankwall.checks.engine.tolerance`; u is float32's or float64's unit roundoff):
the logit :math:`h\cdot w_j + b_j` is a sum of D + 1 rounded terms, off by at most
:math:`e_{ij} = \gamma_{D+2}(|h_i|\cdot|w_j| + |b_j|)` (Higham eq. 3.5; the + 1 covers the float64
evaluation of the bound); through the log-softmax an entry moves by at most
:math:`e_{ij} + \max_j e_{ij}` (lse is 1-Lipschitz in the max norm); the log-softmax of the computed logits
adds :func:`~rankwall.checks.engine.tolerance.log_softmax_error` (:math:`\gamma_{V+4}`); the measured residual is
a norm of NV rounded differences, at most :math:`1 + \gamma_{NV+2}` times too small.

*Hidden size from the outputs alone* (as an API user would, after Finlayson et al. 2024): centring each
row over the vocabulary, :math:`L^*C` with :math:`C = I - \mathbf 1\mathbf 1^\top/V`, removes the lse column:
:math:`L^*C = H(CW)^\top + \mathbf 1(Cb)^\top`, of rank at most D (D + 1 with a bias). Its lower end comes
from the centred outputs' singular values, with the centring's rounding added
(:func:`~rankwall.checks.engine.tolerance.row_centring_error`); when both ends meet, that rank is the hidden size
*recovered*, certified. Beside the model: a random Gaussian head of the same shape and scale on the same
H (rank D + 1, centred D), and the model's head with a random bias (rank D + 2, centred D + 1: an API user
reading the centred rank of a biased head gets D + 1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special

from rankwall.checks import exact
from rankwall.checks.claims.logprob_rank import factorization_residual
from rankwall.checks.engine import tolerance
from rankwall.theory.validation import InputError

U32, U64 = tolerance.unit_roundoff(np.float32), tolerance.unit_roundoff(np.float64)
#: Entries of one row block of an N x V matrix (the blocks stream the bounds without N x V temporaries).
BLOCK_ENTRIES = 1 << 22
#: Seed of the random head and of the random bias set beside the model.
COMPARISON_SEED = 0


@dataclass(frozen=True)
class RankEnds:
    """Both certified ends of one rank, what certifies each, and the computed singular values around
    the gap: ``last_above`` is the smallest one above the Weyl ``margin`` (the lower end's), ``next`` the
    one after it (a computed value below the margin says nothing about the exact one)."""

    lower: int
    upper: int
    lower_method: str
    upper_method: str
    margin: float
    entry_error: float
    last_above: float | None
    next: float | None

    @property
    def pinned(self) -> int | None:
        """The rank when both ends meet, else None."""
        return self.lower if self.lower == self.upper else None

    def to_json(self) -> dict[str, Any]:
        gap = {"index": self.lower, "last_above": self.last_above, "next": self.next, "margin": self.margin}
        return {
            "lower": self.lower,
            "upper": self.upper,
            "lower_method": self.lower_method,
            "upper_method": self.upper_method,
            "singular_value_gap": gap,
            "entry_error": self.entry_error,
        }


@dataclass(frozen=True)
class HeadRank:
    """rank L* and rank L*C for one head on the contexts, with the factorization check behind the upper
    ends (``residual`` against ``residual_bound``) and the number of columns of the factorization."""

    head: str
    columns: int
    log_probability: RankEnds
    centred: RankEnds
    residual: float
    residual_bound: float

    contexts: int

    @property
    def hidden_size_recovered(self) -> int | None:
        """The certified rank of the centred log-probabilities, when both ends meet below the number of
        contexts (a rank capped by the contexts says nothing about the hidden size); else None."""
        rank = self.centred.pinned
        return rank if rank is not None and rank < self.contexts else None

    def to_json(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "factorization_columns": self.columns,
            **self.log_probability.to_json(),
            "factorization_residual": self.residual,
            "residual_bound": self.residual_bound,
            "hidden_size_recovered": self.hidden_size_recovered,
            "centred": self.centred.to_json(),
        }


@dataclass(frozen=True)
class LogProbabilityRank:
    """The model's certified rank of log P, with a random head and the biased head beside it."""

    contexts: int
    V: int
    D: int
    model: HeadRank
    random_head: HeadRank
    with_bias: HeadRank
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The record of ``rankwall spot --json`` under ``log_probability_rank``: the model's ends at the
        top level, the two comparison heads under ``random_head`` and ``head_with_bias``."""
        return {
            "contexts": self.contexts,
            "V": self.V,
            "D": self.D,
            **self.model.to_json(),
            "random_head": self.random_head.to_json(),
            "head_with_bias": self.with_bias.to_json(),
            "seconds": self.seconds,
        }


def row_blocks(rows: int, columns: int) -> Iterator[slice]:
    """Consecutive row slices of about :data:`BLOCK_ENTRIES` entries."""
    step = max(1, BLOCK_ENTRIES // max(columns, 1))
    for start in range(0, rows, step):
        yield slice(start, min(start + step, rows))


def through_logits(H: np.ndarray, W: np.ndarray, b: np.ndarray | None, u: float) -> np.ndarray:
    r"""Per entry, how far the log-softmax moves when its logits carry their rounding:
    :math:`e_{ij} + \max_j e_{ij}` with :math:`e_{ij} = \gamma_{D+2}(|h_i|\cdot|w_j| + |b_j|)`."""
    e = np.abs(H) @ np.abs(W).T
    if b is not None:
        e += np.abs(b)
    e *= tolerance.gamma(W.shape[1] + 2, u)
    return e + e.max(axis=1, keepdims=True)


def log_softmax_rows(Z: np.ndarray) -> np.ndarray:
    """``Z - lse(Z)`` row by row in float64, shifted by the row maximum (the form
    :func:`~rankwall.checks.engine.tolerance.log_softmax_error` models)."""
    return scipy.special.log_softmax(Z, axis=1)


def centred_ends(M: np.ndarray, entry_error: float, upper: int, upper_method: str, trusted: bool) -> RankEnds:
    """The ends of rank(M* C) from the row-centred M (M* within ``entry_error`` of M). A float64 M is
    centred in place (its caller needs it no more), a float32 one in a float64 copy."""
    error = entry_error + tolerance.row_centring_error(M, U64)
    centred = M if M.dtype == np.float64 else M.astype(np.float64)
    centred -= centred.mean(axis=1, keepdims=True)
    return lower_ends(centred, error, upper, upper_method, trusted, "centred ")


def lower_ends(
    M: np.ndarray, entry_error: float, upper: int, upper_method: str, trusted: bool, what: str = ""
) -> RankEnds:
    """:class:`RankEnds` with the lower end from M's Gram eigenvalues (float64) above the Weyl margin;
    when the factorization check failed (``trusted`` false) neither end is kept."""
    lower, margin, sigma = exact.gram_rank_lower_bound(M, entry_error=entry_error)
    last = float(sigma[lower - 1]) if lower else None
    following = float(sigma[lower]) if lower < len(sigma) else None
    method = f"Gram eigenvalues of the {what}outputs above a Weyl margin (float64; entry error {entry_error:.3g})"
    if not trusted:
        return RankEnds(
            0,
            min(M.shape),
            "nothing (the factorization check failed)",
            upper_method,
            margin,
            entry_error,
            last,
            following,
        )
    return RankEnds(lower, upper, method, upper_method, margin, entry_error, last, following)


def model_rank(H: np.ndarray, W: np.ndarray, b: np.ndarray | None, served: np.ndarray, logits: np.ndarray) -> HeadRank:
    """rank L* and rank L*C for the model: ``served`` is its float32 log P (N x V), ``logits`` the float32
    logits it was computed from, H (N x D) and W (V x D) the float32 values the forward used (any float
    dtype; read exactly), b the head's bias or None."""
    H, W = np.asarray(H, dtype=np.float64), np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    N, V = served.shape
    if served.dtype != np.float32 or logits.dtype != np.float32 or logits.shape != served.shape:
        raise InputError(
            f"served: expected float32 log-probabilities and logits of one shape, got {served.dtype} "
            f"{served.shape} and {logits.dtype} {logits.shape}"
        )
    if H.shape[0] != N or W.shape[0] != V or H.shape[1] != W.shape[1]:
        raise InputError(f"H: shape {H.shape} and W {W.shape} do not fit log P {served.shape}")
    residual2 = error32 = error64 = 0.0
    for rows in row_blocks(N, V):
        Z = H[rows] @ W.T
        if b is not None:
            Z += b
        recomputed = log_softmax_rows(Z)
        residual2 += float(np.sum((served[rows] - recomputed) ** 2))
        through = through_logits(H[rows], W, b, U64)
        error64 += (tolerance.log_softmax_error(Z, recomputed, U64) + float(np.linalg.norm(through))) ** 2
        through *= tolerance.gamma(W.shape[1] + 2, U32) / tolerance.gamma(W.shape[1] + 2, U64)
        error32 += (tolerance.log_softmax_error(logits[rows], served[rows], U32) + float(np.linalg.norm(through))) ** 2
    residual = math.sqrt(residual2) * (1 + tolerance.gamma(N * V + 2, U64))
    float64_bound, float32_bound = math.sqrt(error64), math.sqrt(error32)
    bound = float32_bound + float64_bound
    columns = W.shape[1] + (1 if b is None else 2)
    trusted = residual <= bound
    form = "[H, -lse][W, 1]ᵀ" if b is None else "[H, 1, -lse][W, b, 1]ᵀ"
    if trusted:
        upper_method = (
            f"the factorization {form} through {columns} columns: the model's float32 log P lies "
            f"within its float32 rounding bound of it"
        )
        centred_method = f"the factorization H(CW)ᵀ{'' if b is None else ' + 1(Cb)ᵀ'} through {columns - 1} columns"
        upper, centred_upper = min(N, columns), min(N, columns - 1)
    else:
        upper_method = centred_method = "the shape (the model's log P is not within rounding of the factorization)"
        upper, centred_upper = min(N, V), min(N, V - 1)
    entry_error = residual + float64_bound
    return HeadRank(
        "the model's head",
        columns,
        lower_ends(served, entry_error, upper, upper_method, trusted),
        centred_ends(served, entry_error, centred_upper, centred_method, trusted),
        residual,
        bound,
        N,
    )


def synthetic_rank(name: str, H: np.ndarray, W: np.ndarray, b: np.ndarray | None) -> HeadRank:
    """rank L* and rank L*C for a head computed here in float64 (no float32 forward to check): the
    upper end once :func:`rankwall.checks.claims.logprob_rank.factorization_residual` finds the computed
    L = Z - lse(Z)1ᵀ within rounding, the lower end from L's Gram eigenvalues with L's rounding bound."""
    N, V = H.shape[0], W.shape[0]
    L = np.empty((N, V))
    residual2 = bound2 = error2 = 0.0
    for rows in row_blocks(N, V):
        Z = H[rows] @ W.T
        if b is not None:
            Z += b
        L[rows] = log_softmax_rows(Z)
        block_residual, block_bound = factorization_residual(Z, L[rows])
        residual2, bound2 = residual2 + block_residual**2, bound2 + block_bound**2
        through = through_logits(H[rows], W, b, U64)
        error2 += (tolerance.log_softmax_error(Z, L[rows], U64) + float(np.linalg.norm(through))) ** 2
    residual, bound = math.sqrt(residual2), math.sqrt(bound2)
    columns = W.shape[1] + (1 if b is None else 2)
    trusted = residual <= bound
    form = "[H, -lse][W, 1]ᵀ" if b is None else "[H, 1, -lse][W, b, 1]ᵀ"
    upper_method = f"the factorization {form} through {columns} columns (residual within rounding)"
    centred_method = f"the factorization H(CW)ᵀ{'' if b is None else ' + 1(Cb)ᵀ'} through {columns - 1} columns"
    error = math.sqrt(error2)
    ends = lower_ends(L, error, min(N, columns), upper_method, trusted)
    centred = centred_ends(L, error, min(N, columns - 1), centred_method, trusted)
    return HeadRank(name, columns, ends, centred, residual, bound, N)


def log_probability_rank(
    H: np.ndarray, W: np.ndarray, b: np.ndarray | None, logits: np.ndarray, seed: int = COMPARISON_SEED
) -> LogProbabilityRank:
    """The model's certified rank of log P from its float32 ``logits`` (N x V, from the forward that
    produced H), and beside it a random Gaussian head with W's shape and root-mean-square entry, and the
    model's head with a standard normal bias, both on the same H (seeded by ``seed``)."""
    import torch

    started = time.perf_counter()
    logits = np.asarray(logits)
    served = torch.log_softmax(torch.from_numpy(logits), dim=-1).numpy()
    model = model_rank(H, W, b, served, logits)
    del served
    H64, W64 = np.asarray(H, dtype=np.float64), np.asarray(W, dtype=np.float64)
    rng = np.random.default_rng(seed)
    scale = float(np.sqrt(np.mean(W64**2)))
    random_W = scale * rng.standard_normal(W64.shape)
    random_head = synthetic_rank("a random Gaussian head of the same shape", H64, random_W, None)
    bias = rng.standard_normal(W64.shape[0]) + (0.0 if b is None else np.asarray(b, dtype=np.float64))
    with_bias = synthetic_rank("the model's head with a standard normal bias added", H64, W64, bias)
    return LogProbabilityRank(
        H64.shape[0], W64.shape[0], W64.shape[1], model, random_head, with_bias, time.perf_counter() - started
    )
