"""Claims ``logprob-rank.*``: ranks of log-probabilities (seed 000, Cor. A.3; seed 001, Property 2 and
Corollary 1), declared over this family's quantities. The theorem is ER.6 of ``docs/error_rank.md``.

The exact object. Every quantity of a context measures, evaluates exactly and references the same
object, which each kind of case fixes:

- a *low-rank* case: the integer matrix A = HWᵀ of the constructor times its integer scale (the
  backend must hold it exactly: a dtype that cannot is outside the domain), and
  L = log softmax(A) = A − lse(A)1ᵀ, exactly (transcendental entries);
- a *factors* case: the Gaussian factors H (times the scale) and W as the context's backend holds
  them (rounded to its dtype), read exactly, the logits Z = HWᵀ of those factors and
  L = log softmax(Z), exactly. The exact route reads the same rounded factors (never the float64
  draw);
- a *row-shift* case: the integer matrix A and the integer shifts λ, μ; every quantity is an exact
  rank over the rationals (python-flint).

Ranks are certified as intervals (:class:`~rankwall.checks.engine.quantities.Interval`). For L, the float
measure's lower end is the number of singular values of the computed L above a Weyl margin (the rounding
of the log softmax and of the products, and the SVD's backward error: a rounding-model certificate), its
upper end the factorization L = [A, −z][I, 1]ᵀ (or [H, −z][W, 1]ᵀ): rank L ≤ rank_Q of the right factor,
exact, once the computed L passes a factorization residual check against its rounding bound (an L that
fails it is not trusted at either end). The exact route evaluates the exact L itself: the same
factorization bound (exact, with nothing to check), and from below a minor of L whose determinant, in
balls at 128 then 512 bits, excludes 0 (the float L only chooses which minor: column-pivoted QR).

Each rank carries a continuous ``closeness`` for the search's ``target()``: σ_{b+1}/σ_1 − 1 of the
computed L at the theorem's bound b (rank A + 1, or d + 1), and for the shift gap, the gap minus 1 minus
the relative gap σ_r/σ_1 of the lower-ranked shift.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "Factors",
    "LowRank",
    "RowShift",
    "bottleneck_rank",
    "factors",
    "hidden_size",
    "log_softmax_rank",
    "logit_rank",
    "low_rank_matrices",
    "row_shifts",
    "second_shifted_rank",
    "shift_rank_gap",
    "shifted_rank",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import array_api_compat
import flint
import numpy as np
import scipy.linalg
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.claims.error_rank import (
    REFERENCE_BITS,
    ball_rank,
    built_factors,
    exact_logits,
    integer_quantity,
    integer_rows,
    label,
    pinned,
    rational_rank,
    sizes,
    tiered,
    uniform,
    with_closeness,
)
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import float64_copy
from rankwall.checks.engine.quantities import Context, declare
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases
from rankwall.checks.engine.verdict import Case, OutsideDomain, RankInterval
from rankwall.theory import error_rank as er

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "logprob-rank"
#: The docs page that states the family's theorem (ER.6) and decides its claims.
PAGE = "error_rank"

SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
SEED_001 = "seed 001"  # "Breaking the softmax bottleneck: your output layer is a rank-d wall"

# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class LowRank(Case):
    """An integer rows x columns matrix HWᵀ of the given rank (entries of H, W up to ``spread``), times
    ``scale``; with ``ones_column`` W's first column is all ones, so 1 is in the row space of A."""

    KIND: ClassVar[str] = "low-rank"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    spread: int = 3
    scale: int = 1
    ones_column: bool = False


@dataclass(frozen=True)
class Factors(Case):
    """Gaussian factors H (rows x rank, times ``scale``) and W (columns x rank) of logits HWᵀ."""

    KIND: ClassVar[str] = "factors"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    scale: float = 1.0


@dataclass(frozen=True)
class RowShift(Case):
    """A low-rank integer matrix A = HWᵀ and two integer row shifts λ, μ (μ times ``second``: 0 or 1).
    With ``cancelling``, W's first column is all ones and λ = −H[:, 0], which removes that rank-one
    term: A + λ1ᵀ = H[:, 1:]W[:, 1:]ᵀ (:func:`row_shift_instance`)."""

    KIND: ClassVar[str] = "row-shift"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    spread: int = 2
    shift_seed: int = 0
    shift_spread: int = 5
    second: int = 1
    cancelling: bool = False


# --------------------------------------------------------------------------- strategies


def ranks(draw: Any, low: int, full: int) -> int:
    """A rank: ``low`` or ``full`` (= min(rows, columns)) in a quarter of the draws each, else between."""
    return tiered(draw, [(1, st.just(low)), (1, st.just(full)), (2, uniform(low, full))])


@st.composite
def low_rank_instances(draw: Any, factors: bool = False) -> LowRank | Factors:
    """Integer matrices of chosen rank, or (``factors``) Gaussian factors of chosen rank: 1 to 3 rows
    or 2 or 3 columns in about half the draws; rank 0 (A = 0; for factors rank 1) or full (rank =
    min(rows, columns)) in a quarter each; for integer matrices a ones column in W (1 in the row space
    of A) in a quarter."""
    rows, columns = sizes(draw, 1, 40), sizes(draw, 2, 60)
    rank = ranks(draw, int(factors), min(rows, columns))
    if factors:
        scale = draw(st.sampled_from([0.1, 1.0, 30.0]))
        return Factors(rows=rows, columns=columns, rank=rank, seed=draw(st.integers(0, 2**16)), scale=scale)
    return LowRank(
        rows=rows,
        columns=columns,
        rank=rank,
        seed=draw(st.integers(0, 2**16)),
        spread=draw(uniform(1, 5)),
        scale=draw(st.sampled_from([1, 3, 50])),
        ones_column=draw(uniform(0, 3)) == 0,
    )


@st.composite
def row_shift_instances(draw: Any) -> RowShift:
    """Low-rank integer matrices (1 to 3 rows or 2 or 3 columns in about half the draws; rank 0 or full
    in a quarter each) and two row shifts: the first cancelling a rank-one term of A in a quarter, the
    second zero (μ = 0) in half."""
    rows, columns = sizes(draw, 1, 30), sizes(draw, 2, 40)
    return RowShift(
        rows=rows,
        columns=columns,
        rank=ranks(draw, 0, min(rows, columns)),
        seed=draw(st.integers(0, 2**16)),
        spread=draw(uniform(1, 4)),
        shift_seed=draw(st.integers(0, 2**16)),
        shift_spread=draw(uniform(0, 6)),
        second=draw(uniform(0, 1)),
        cancelling=draw(uniform(0, 3)) == 0,
    )


# --------------------------------------------------------------------------- instances


def low_rank_matrix(case: LowRank) -> np.ndarray:
    """The integer matrix A of the case's rank, before its scale (python-flint certifies the rank exactly)."""
    return er.construct_low_rank_integers(
        case.rows, case.columns, case.rank, case.seed, spread=case.spread, ones_column=case.ones_column
    )


def row_shift_instance(case: RowShift) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, λ, μ): the integer matrix A = HWᵀ and its two row shifts, drawn from ``shift_seed`` (μ times
    ``second``); with ``cancelling`` (and rank >= 1), W's first column is all ones and λ = −H[:, 0]."""
    H, W = er.construct_low_rank_factors(
        case.rows, case.columns, case.rank, case.seed, spread=case.spread, ones_column=case.cancelling
    )
    rng = np.random.default_rng(case.shift_seed)
    spread = case.shift_spread
    first = rng.integers(-spread, spread + 1, size=case.rows)
    second = rng.integers(-spread, spread + 1, size=case.rows) * case.second
    if case.cancelling and case.rank:
        first = -H[:, 0]
    return (H @ W.T).astype(np.int64), first, second


def factor_matrices(case: Factors) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian factors (H times the case's scale, W) of a Factors case, in float64."""
    rng = np.random.default_rng(case.seed)
    return case.scale * rng.standard_normal((case.rows, case.rank)), rng.standard_normal((case.columns, case.rank))


# --------------------------------------------------------------------------- certified ranks of log-probabilities


def factorization_residual(Z: Any, L: Any) -> tuple[float, float]:
    """``(‖L - Z - c1ᵀ‖_F, bound)`` with c = -lse(Z) recomputed in Z's namespace and dtype (unit roundoff
    u of L's dtype): zero in exact arithmetic (L = Z - lse(Z)1ᵀ). The bound adds the computed L's error
    (:func:`tolerance.log_softmax_error`), the recomputed lse's (γ_{V+4}(1 + max|Z_i| + |c_i|) per row) and
    the two subtractions (γ_2 (|L| + |Z| + |c|) per entry)."""
    xp = array_api_compat.array_namespace(Z, L)
    u = tolerance.unit_roundoff(L.dtype)
    top = xp.max(Z, axis=1, keepdims=True)
    c = -(top + xp.log(xp.sum(xp.exp(Z - top), axis=1, keepdims=True)))
    V = Z.shape[1]
    residual = float(xp.linalg.vector_norm(L - Z - c))
    Z, L, c = float64_copy(Z), float64_copy(L), float64_copy(c)[:, 0]
    per_row = tolerance.gamma(V + 4, u) * (1 + np.abs(Z).max(axis=1) + np.abs(c))
    per_entry = tolerance.gamma(2, u) * (np.abs(L) + np.abs(Z) + np.abs(c)[:, None])
    bound = tolerance.log_softmax_error(Z, L, u) + math.sqrt(V) * float(np.linalg.norm(per_row))
    return residual, bound + float(np.linalg.norm(per_entry))


def log_probability_bounds(Z: Any, L: Any, entry_error: float, right: np.ndarray) -> tuple[RankInterval, np.ndarray]:
    """rank(log softmax Z) for the real Z, and the computed singular values of L. Lower: SVD + Weyl
    margin in L's namespace and dtype (``entry_error`` bounds the computed L's error). Upper: L = [·, -z]
    ``right``ᵀ, so rank <= min(rows, rank_Q ``right``) (an integer matrix, exact), once the computed L
    passes the factorization residual check; an L that fails it is not within its rounding bound of the
    real one, so neither end is trusted."""
    lo, margin, sigma = exact.weyl_rank_lower_bound(L, tolerance.unit_roundoff(L.dtype), entry_error=entry_error)
    residual, bound = factorization_residual(Z, L)
    certificate = {"weyl_margin": margin, "factorization_residual": residual, "residual_bound": bound}
    if not residual <= bound:
        untrusted = "nothing (the computed L fails the factorization check: its SVD is not trusted)"
        return RankInterval(0, min(L.shape), untrusted, "the shape", False, certificate), sigma
    rank_right, how = exact.exact_rank(right)
    upper = f"the factorization through {right.shape[1]} columns (residual within rounding; {how} {rank_right})"
    lower = f"SVD + Weyl margin ({label(L)})"
    return RankInterval(lo, min(L.shape[0], rank_right), lower, upper, False, certificate), sigma


def singular_value_closeness(sigma: np.ndarray, bound: int) -> float:
    """For "rank <= b": σ_{b+1}/σ_1 − 1, from the computed singular values (in [−1, 0]; −1 where the
    shape has no (b + 1)-th value or the matrix is zero, 0 for a bound below 0, which every rank
    violates): the value that must vanish, relative to the largest."""
    if bound < 0 or bound >= len(sigma) or not sigma[0] > 0:
        return 0.0 if bound < 0 else -1.0
    return float(sigma[bound] / sigma[0]) - 1.0


def log_softmax_interval(case: LowRank, backend: Any, rank_A: int) -> RankInterval:
    """rank(log softmax A) enclosed, with log softmax A computed in the backend; ``closeness`` at the
    theorem's bound rank(A) + 1. The right factor is [Aᵀ, 1]: L = A - z1ᵀ = [A, -z][I, 1]ᵀ has rows in
    rowspace(A) + span(1). An A that the backend's dtype cannot hold exactly is no integer instance
    (:class:`OutsideDomain`)."""
    A = low_rank_matrix(case) * case.scale
    Z = backend.asarray(A)
    if not np.array_equal(float64_copy(Z), A):
        raise OutsideDomain(f"instance: A has an integer that {backend.dtype_name} cannot hold exactly")
    L = er.log_softmax(Z)
    right = np.vstack([A, np.ones((1, A.shape[1]), dtype=np.int64)]).T
    u = tolerance.unit_roundoff(backend.dtype)
    error = tolerance.log_softmax_error(float64_copy(Z), float64_copy(L), u)
    bounds, sigma = log_probability_bounds(Z, L, error, right)
    return with_closeness(bounds, singular_value_closeness(sigma, rank_A + 1))


def bottleneck_interval(H: Any, W: Any, d: int) -> RankInterval:
    """rank(log softmax(HWᵀ)) enclosed for the factors as given (arrays of one backend), with Z and L
    computed there; ``closeness`` at the theorem's bound d + 1. The right factor is [W, 1] read exactly
    (rows of dyadic rationals, scaled to integers)."""
    Z = H @ W.T
    L = er.log_softmax(Z)
    u = tolerance.unit_roundoff(H.dtype)
    H_np, W_np = float64_copy(H), float64_copy(W)
    product = tolerance.gamma(d + 2, u) * (np.abs(H_np) @ np.abs(W_np).T)  # |fl(z_ij) - z_ij|
    through = product + product.max(axis=1, keepdims=True)  # an error in z_i moves L_ij and lse(z_i)
    entry_error = tolerance.log_softmax_error(float64_copy(Z), float64_copy(L), u) + float(np.linalg.norm(through))
    right = integer_rows(np.hstack([W_np, np.ones((W_np.shape[0], 1))]))
    bounds, sigma = log_probability_bounds(Z, L, entry_error, right)
    return with_closeness(bounds, singular_value_closeness(sigma, d + 1))


# --------------------------------------------------------------------------- the exact route: a nonzero minor in balls


def pivots(L: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of an r x r submatrix of L likely to be well conditioned, chosen on the float L by
    column-pivoted QR (of L for the columns, of the chosen columns' transpose for the rows). Only a choice:
    what certifies is the determinant in balls (:func:`minor_rank`)."""
    columns = scipy.linalg.qr(L, mode="r", pivoting=True)[1][:r]
    rows = scipy.linalg.qr(L[:, columns].T, mode="r", pivoting=True)[1][:r]
    return rows, columns


def ball_log_softmax(Z: flint.arb_mat) -> list[list[flint.arb]]:
    """L = Z − lse(Z)1ᵀ row by row in balls at the working precision, lse(z) = s + log Σ_j e^{z_j − s} for
    s the midpoint of the row's largest entry (any real s gives the same lse; this one keeps e^{z_j − s} <= ~1)."""
    rows = []
    for i in range(Z.nrows()):
        z = [Z[i, j] for j in range(Z.ncols())]
        s = flint.arb(max(x.mid() for x in z))
        lse = s + sum(((x - s).exp() for x in z), flint.arb(0)).log()
        rows.append([x - lse for x in z])
    return rows


def minor_rank(L: np.ndarray, logits_rows: Callable[[np.ndarray], flint.arb_mat], upper: int) -> tuple[int, str]:
    """A lower bound on rank L for the exact L = log softmax(Z): the largest r <= ``upper`` whose r x r minor
    (at :func:`pivots` of the float L) has a determinant ball excluding 0, at 128 bits, then 512 (a nonzero
    minor of the exact matrix, so rank L >= r). ``logits_rows(rows)`` gives those rows of the exact Z in balls
    at the working precision."""
    for r in range(min(upper, *L.shape), 0, -1):
        rows, columns = pivots(L, r)
        for bits in exact.BALL_PRECISIONS[:2]:
            with exact.precision(bits):
                full = ball_log_softmax(logits_rows(rows))
                minor = flint.arb_mat(r, r, [full[i][j] for i in range(r) for j in columns])
                determinant = minor.det()
                if determinant > 0 or determinant < 0:
                    return r, f"a nonzero {r} x {r} minor of the exact L in {bits}-bit balls"
    return 0, "nothing (no minor certified nonzero)"


def exact_log_probability_rank(
    L: np.ndarray, logits_rows: Callable[[np.ndarray], flint.arb_mat], right: np.ndarray
) -> RankInterval:
    """rank L of the exact L = log softmax(Z) = [·, −z]·``right``ᵀ: the upper end min(rows, rank_Q right)
    from the factorization, exactly (it holds in exact arithmetic, with no residual to check); the lower end
    from a nonzero minor in balls (:func:`minor_rank`), never from a float SVD."""
    rank_right, how = exact.exact_rank(right)
    upper = min(L.shape[0], rank_right)
    lower, certified = minor_rank(L, logits_rows, upper)
    factorization = f"the factorization through {right.shape[1]} columns ({how} {rank_right})"
    return RankInterval(lower, upper, certified, factorization, False, {})


def _logit_rank(ctx: Context) -> RankInterval:
    """rank A exactly (python-flint), once per context."""
    return ctx.once("rank A", lambda: _exact_rank_of(_logit_matrix(ctx.case)))


def _measure_log_softmax_rank(ctx: Context) -> RankInterval:
    """rank(log softmax A), the log softmax computed in the backend (:func:`log_softmax_interval`)."""
    return log_softmax_interval(ctx.case, ctx.backend, _logit_rank(ctx).lo)


def _exact_log_softmax_rank(ctx: Context) -> RankInterval:
    """rank(log softmax A) of the exact L = A − lse(A)1ᵀ (:func:`exact_log_probability_rank`): the integer A
    in balls, the right factor [Aᵀ, 1]; ``closeness`` from the float L, at rank A + 1."""
    A = low_rank_matrix(ctx.case) * ctx.case.scale
    L = er.log_softmax(A.astype(np.float64))
    right = np.vstack([A, np.ones((1, A.shape[1]), dtype=np.int64)]).T

    def logits_rows(rows: np.ndarray) -> flint.arb_mat:
        return flint.arb_mat(len(rows), A.shape[1], [int(x) for x in A[rows].ravel()])

    bounds = exact_log_probability_rank(L, logits_rows, right)
    sigma = np.linalg.svd(L, compute_uv=False)
    return with_closeness(bounds, singular_value_closeness(sigma, _logit_rank(ctx).lo + 1))


def built_factor_matrices(ctx: Context) -> tuple[Any, Any]:
    """The case's factors as the context's backend holds them (rounded to its dtype)."""
    return ctx.once("built factors", lambda: tuple(ctx.backend.asarray(x) for x in factor_matrices(ctx.case)))


def _measure_bottleneck_rank(ctx: Context) -> RankInterval:
    """rank(log softmax(HWᵀ)) with Z and L computed in the backend from its rounded factors."""
    return bottleneck_interval(*built_factor_matrices(ctx), ctx.case.rank)


def _exact_bottleneck_rank(ctx: Context) -> RankInterval:
    """rank(log softmax(HWᵀ)) of the exact L for the factors as the backend holds them, read exactly
    (:func:`exact_log_probability_rank`): HWᵀ in balls, the right factor [W, 1] read exactly."""
    H, W = (float64_copy(x) for x in built_factor_matrices(ctx))
    L = er.log_softmax(H @ W.T)
    right = integer_rows(np.hstack([W, np.ones((W.shape[0], 1))]))
    transposed = flint.arb_mat(W.shape[1], W.shape[0], [float(x) for x in W.T.ravel()])

    def logits_rows(rows: np.ndarray) -> flint.arb_mat:
        return flint.arb_mat(len(rows), H.shape[1], [float(x) for x in H[rows].ravel()]) * transposed

    bounds = exact_log_probability_rank(L, logits_rows, right)
    sigma = np.linalg.svd(L, compute_uv=False)
    return with_closeness(bounds, singular_value_closeness(sigma, ctx.case.rank + 1))


def _logit_matrix(case: LowRank | RowShift) -> np.ndarray:
    """The integer matrix A of a LowRank case (times its scale) or of a RowShift case."""
    return row_shift_instance(case)[0] if isinstance(case, RowShift) else low_rank_matrix(case) * case.scale


def _exact_rank_of(M: np.ndarray, certificate: dict[str, Any] | None = None) -> RankInterval:
    rank, how = exact.exact_rank(M)
    return RankInterval(int(rank), int(rank), how, how, True, dict(certificate or {}))


def _shifted(ctx: Context, which: int) -> np.ndarray:
    """A + λ1ᵀ (``which`` 1) or A + μ1ᵀ (2), exactly (Python ints where int64 would overflow)."""
    A, lam, mu = row_shift_instance(ctx.case)
    return er.row_shift(A, lam if which == 1 else mu)


def row_shift_bounds(case: RowShift) -> tuple[RankInterval, float]:
    """|rank(A + λ1ᵀ) - rank(A + μ1ᵀ)| from two exact ranks over the integers (python-flint), and the
    relative gap of the lower-ranked shift: its smallest nonzero singular value over its largest (1 for
    rank 0), how near it is to losing a rank."""
    A, lam, mu = row_shift_instance(case)
    shifted = [er.row_shift(A, shift) for shift in (lam, mu)]
    (r1, method), (r2, _) = (exact.exact_rank(M) for M in shifted)
    gap = abs(r1 - r2)
    lower, r = (shifted[0], r1) if r1 <= r2 else (shifted[1], r2)
    sigma = np.linalg.svd(lower.astype(np.float64), compute_uv=False)
    relative_gap = float(sigma[r - 1] / sigma[0]) if r else 1.0
    return RankInterval(gap, gap, method, method, True, {"rank_first": r1, "rank_second": r2}), relative_gap


def _shift_rank_gap(ctx: Context) -> RankInterval:
    """The gap, with ``closeness`` = gap − 1 − the relative gap (at the theorem's bound 1: minus how far
    the lower-ranked shift is from losing a rank)."""
    bounds, relative_gap = ctx.once("row shift", lambda: row_shift_bounds(ctx.case))
    return with_closeness(bounds, bounds.lo - 1 - relative_gap)


# --------------------------------------------------------------------------- references
#
# Each quantity the slow, obviously right way: the logits formed exactly from the built factors (rational
# products) or the integer A, log softmax in REFERENCE_BITS-bit balls, the rank by Gaussian elimination in
# balls (ball_rank); integer ranks over the rationals (fmpq_mat) from Python ints.


@functools.lru_cache(maxsize=512)
def _log_softmax_rank_in_balls(Z: tuple[tuple[flint.fmpq, ...], ...]) -> int:
    """rank(log softmax Z) for exact rational logits, L = Z − lse(Z)1ᵀ in balls, cached (every backend
    builds the same integer A, and the float64 ones the same factors)."""
    with exact.precision(REFERENCE_BITS):
        rows = []
        for z in Z:
            top = max(z)
            lse = flint.arb(top) + sum((flint.arb(x - top).exp() for x in z), flint.arb(0)).log()
            rows.append([flint.arb(x) - lse for x in z])
        return ball_rank(rows)


def reference_log_softmax_rank(ctx: Context) -> int:
    """rank(log softmax A) in balls (every backend holds the integer A exactly, or the case is outside the
    domain and never measured)."""
    A = low_rank_matrix(ctx.case) * ctx.case.scale
    return _log_softmax_rank_in_balls(tuple(tuple(flint.fmpq(int(x)) for x in row) for row in A))


def reference_bottleneck_rank(ctx: Context) -> int:
    """rank(log softmax(HWᵀ)) in balls, HWᵀ exact from the built factors."""
    H, W = built_factors(*factor_matrices(ctx.case), ctx.backend)
    return _log_softmax_rank_in_balls(tuple(tuple(row) for row in exact_logits(H, W)))


def _python_ints(case: LowRank | RowShift) -> list[list[int]]:
    return [[int(x) for x in row] for row in _logit_matrix(case)]


def reference_shifted_rank(ctx: Context, which: int) -> int:
    """rank(A + s1ᵀ) over the rationals, the shift s added in Python ints."""
    A, lam, mu = row_shift_instance(ctx.case)
    shift = lam if which == 1 else mu
    return rational_rank([[int(a) + int(s) for a in row] for row, s in zip(A, shift, strict=True)])


# --------------------------------------------------------------------------- the quantities


def _quantity(
    reads: tuple[type, ...], name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **kw: Any
) -> Any:
    return integer_quantity(FAMILY, reads, name, measure, exact_fn, **kw)


log_softmax_rank = _quantity(
    (LowRank,),
    "rank(log softmax A)",
    _measure_log_softmax_rank,
    _exact_log_softmax_rank,
    reference=reference_log_softmax_rank,
    doc="the rank of log softmax(A) for an integer matrix A of chosen rank (a LowRank case)",
    exact_doc="the exact L = A − lse(A)1ᵀ: a nonzero minor in balls from below, the factorization through "
    "[Aᵀ, 1] (its exact rank) from above",
)
logit_rank = _quantity(
    (LowRank, RowShift),
    "rank A",
    _logit_rank,
    _logit_rank,
    reference=lambda ctx: rational_rank(_python_ints(ctx.case)),
    doc="the exact rank of the integer matrix A of a LowRank or RowShift case",
    exact_doc="python-flint's rank over the rationals",
)
shifted_rank = _quantity(
    (RowShift,),
    "rank(A + λ1ᵀ)",
    lambda ctx: _exact_rank_of(_shifted(ctx, 1)),
    lambda ctx: _exact_rank_of(_shifted(ctx, 1)),
    follows_backend=False,
    reference=lambda ctx: reference_shifted_rank(ctx, 1),
    doc="the exact rank of A shifted by its first row shift λ (a RowShift case)",
    exact_doc="python-flint's rank over the rationals",
)
second_shifted_rank = _quantity(
    (RowShift,),
    "rank(A + μ1ᵀ)",
    lambda ctx: _exact_rank_of(_shifted(ctx, 2)),
    lambda ctx: _exact_rank_of(_shifted(ctx, 2)),
    follows_backend=False,
    reference=lambda ctx: reference_shifted_rank(ctx, 2),
    doc="the exact rank of A shifted by its second row shift μ (a RowShift case)",
    exact_doc="python-flint's rank over the rationals",
)
shift_rank_gap = _quantity(
    (RowShift,),
    "|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)|",
    _shift_rank_gap,
    _shift_rank_gap,
    follows_backend=False,
    reference=lambda ctx: abs(reference_shifted_rank(ctx, 1) - reference_shifted_rank(ctx, 2)),
    doc="the gap between the exact ranks of two row shifts of A (a RowShift case)",
    exact_doc="two ranks by python-flint",
)
bottleneck_rank = _quantity(
    (Factors,),
    "rank(log softmax(HWᵀ))",
    _measure_bottleneck_rank,
    _exact_bottleneck_rank,
    reference=reference_bottleneck_rank,
    doc="the rank of the log-probabilities of rank-d logits HWᵀ (a Factors case)",
    exact_doc="the exact L for the factors as the backend holds them: a nonzero minor of HWᵀ − lse in balls from "
    "below, the factorization through [W, 1] read exactly (its exact rank) from above",
)
hidden_size = _quantity(
    (Factors,),
    "d",
    lambda ctx: pinned(ctx.case.rank, "the case"),
    lambda ctx: pinned(ctx.case.rank, "the case"),
    reference=lambda ctx: factor_matrices(ctx.case)[0].shape[1],
    doc="the inner dimension d of a Factors case",
    exact_doc="the case's rank",
)


# --------------------------------------------------------------------------- witnesses and random instances


def _low_rank_witnesses(V: int) -> list[LowRank]:
    """Ranks 0 (A = 0), 1, 5 and 39 at two scales; full rank (rank(A) + 1 exceeds the shape); a ones
    column (1 in the row space: rank(log softmax A) <= rank A); one row, and three rows of two columns;
    beyond 80 columns, rank 5 at V columns itself (40 rows: the rank, not V, is the claim's content)."""
    columns = min(V, 80)
    at_V = [LowRank(rows=40, columns=V, rank=5, seed=5, spread=3, scale=1)] if V > 80 else []
    return [
        *(
            LowRank(rows=40, columns=columns, rank=r, seed=0, spread=3, scale=s)
            for r in (0, 1, 5, min(V, 39))
            for s in (1, 7)
            if r <= min(V, 40)
        ),
        LowRank(rows=40, columns=columns, rank=min(40, columns), seed=1),
        LowRank(rows=40, columns=columns, rank=min(5, columns), seed=2, ones_column=True),
        LowRank(rows=1, columns=min(V, 3), rank=1, seed=3),
        LowRank(rows=3, columns=2, rank=2, seed=4, spread=1),
        *at_V,
    ]


def _low_rank_random(V: int, n: int, seed: int) -> list[LowRank]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        rows, columns = int(rng.integers(1, 41)), min(V, 256)
        cases.append(
            LowRank(
                rows=rows,
                columns=columns,
                rank=int(rng.integers(0, min(rows, columns) + 1)),
                seed=int(rng.integers(2**31)),
                spread=int(rng.integers(1, 6)),
                scale=int(rng.choice([1, 3, 50])),
                ones_column=bool(rng.random() < 0.25),
            )
        )
    return cases


def _row_shift_witnesses(V: int) -> list[RowShift]:
    """Ranks 0, 3 and 29 with two shift seeds, μ = 0 or not; λ cancelling a rank-one term of A (rank 3);
    two rows and two columns, and three rows, with a cancelling shift; beyond 50 columns, rank 3 at V
    columns itself."""
    at_V = [RowShift(rows=30, columns=V, rank=3, seed=4, spread=2, shift_seed=0, shift_spread=5, second=1)]
    return [
        *(
            RowShift(rows=30, columns=min(V, 50), rank=r, seed=0, spread=2, shift_seed=s, shift_spread=5, second=w)
            for r in sorted({0, min(3, V), min(V, 29)})
            for s in (0, 1)
            for w in (0, 1)
        ),
        *(RowShift(rows=30, columns=min(V, 50), rank=min(3, V), seed=1, second=w, cancelling=True) for w in (0, 1)),
        RowShift(rows=2, columns=2, rank=1, seed=2, spread=1, shift_spread=2, cancelling=True),
        RowShift(rows=3, columns=min(V, 3), rank=2, seed=3, spread=1, shift_spread=1, second=0, cancelling=True),
        *(at_V if V > 50 else []),
    ]


def _factor_witnesses(V: int) -> list[Factors]:
    """d = 1, 4, 16 at two scales; d = min(60, columns) (d + 1 exceeds the shape); two rows; beyond 120
    columns, d = 4 at V columns itself."""
    at_V = [Factors(rows=60, columns=V, rank=4, seed=3, scale=3.0)] if V > 120 else []
    return [
        *(
            Factors(rows=60, columns=min(V, 120), rank=d, seed=0, scale=s)
            for d in (1, 4, 16)
            for s in (0.1, 3.0)
            if d < min(V, 60)
        ),
        Factors(rows=60, columns=min(V, 120), rank=min(V, 60), seed=1, scale=1.0),
        Factors(rows=2, columns=min(V, 3), rank=1, seed=2, scale=30.0),
        *at_V,
    ]


def _factor_random(V: int, n: int, seed: int) -> list[Factors]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        rows, columns = int(rng.integers(1, 61)), min(V, 256)
        cases.append(
            Factors(
                rows=rows,
                columns=columns,
                rank=int(rng.integers(1, min(rows, columns) + 1)),
                seed=int(rng.integers(2**31)),
                scale=float(10 ** rng.uniform(-1, math.log10(30))),
            )
        )
    return cases


def _small(case: LowRank | Factors) -> bool:
    return case.rows <= 3 or case.columns <= 3


#: Where the claims of this family range (the public API): integer matrices of chosen rank, row shifts
#: of them, and Gaussian factors H, W; each with the boundary classes its strategy reaches
#: (``docs/error_rank.md``, "Where the search looks").
#: Measured 4,656 (bottleneck) bytes per entry at V = 131,072, rounded up by a quarter.
BYTES_PER_ENTRY = 6_000
low_rank_matrices = Cases(
    low_rank_instances,
    _low_rank_witnesses,
    _low_rank_random,
    boundary={
        "1 to 3 rows or 2 or 3 columns": _small,
        "A = 0 (rank 0)": lambda c: c.rank == 0,
        "full rank (rank A + 1 exceeds the shape)": lambda c: c.rank == min(c.rows, c.columns),
        "1 in the row space of A (a ones column)": lambda c: c.ones_column and c.rank >= 1,
        "scale 50": lambda c: c.scale == 50,
    },
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
row_shifts = Cases(
    row_shift_instances,
    _row_shift_witnesses,
    boundary={
        "1 to 3 rows and 2 or 3 columns": lambda c: c.rows <= 3 and c.columns <= 3,
        "A = 0 (rank 0)": lambda c: c.rank == 0,
        "full rank": lambda c: c.rank == min(c.rows, c.columns),
        "μ = 0": lambda c: c.second == 0 or c.shift_spread == 0,
        "λ cancels a rank-one term of A": lambda c: c.cancelling and c.rank >= 1,
    },
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
factors = Cases(
    lambda: low_rank_instances(factors=True),
    _factor_witnesses,
    _factor_random,
    boundary={
        "1 to 3 rows or 2 or 3 columns": _small,
        "d = 1": lambda c: c.rank == 1,
        "d >= min(rows, columns) (d + 1 exceeds the shape)": lambda c: c.rank >= min(c.rows, c.columns),
        "scale 30": lambda c: c.scale == 30,
    },
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)

# --------------------------------------------------------------------------- the claims

log_softmax_claim = declare(
    "logprob-rank.log-softmax",
    title="log softmax adds at most one to the rank",
    source=f"{SEED_000}, Cor. A.3 (App. A.2)",
    statement="rank(log softmax(A)) ≤ rank(A) + 1",
    domain="integer matrices A of chosen rank (exact rank by python-flint), times an integer scale",
    lhs=log_softmax_rank,
    relation="<=",
    rhs=logit_rank + 1,
    cases=low_rank_matrices,
)
row_shift_claim = declare(
    "logprob-rank.row-shift",
    title="Row shifts change the rank by at most one",
    source=f"{SEED_001}, Property 2",
    statement="|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)| ≤ 1 for all vectors λ, μ",
    domain="integer A of chosen rank, integer shifts (exact ranks by python-flint)",
    lhs=shift_rank_gap,
    relation="<=",
    rhs=1,
    cases=row_shifts,
)
bottleneck_claim = declare(
    "logprob-rank.bottleneck",
    title="Rank-d logits give log-probabilities of rank at most d + 1",
    source=f"{SEED_001}, Corollary 1 (the softmax bottleneck)",
    statement="rank(log softmax(HWᵀ)) ≤ d + 1 for H ∈ ℝ^{N×d}, W ∈ ℝ^{V×d}",
    domain="Gaussian factors, scales 0.1 to 30",
    lhs=bottleneck_rank,
    relation="<=",
    rhs=hidden_size + 1,
    cases=factors,
)

row_shift_claim.with_mutant(
    "preserves-rank",
    statement="rank(A + λ1ᵀ) = rank(A + μ1ᵀ)  (false: a shift can add the direction 1)",
    rhs=0,
)
log_softmax_claim.with_mutant(
    "no-extra-rank",
    statement="rank(log softmax(A)) ≤ rank(A)  (false: the normaliser adds a direction)",
    rhs=logit_rank,
)
bottleneck_claim.with_mutant(
    "at-most-d",
    statement="rank(log softmax(HWᵀ)) ≤ d  (false: the normaliser adds the direction 1)",
    rhs=hidden_size,
)

#: ER.6 of ``docs/error_rank.md`` (collected by ``checks/companion/fidelity.py``), the theorem these claims check.
_TESTS = "tests/test_logprob_rank.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "thm-logprob",
        "ER.6",
        "error_rank",
        "seed 000, Cor. A.3 (statement lost, proof kept); seed 001, Property 2 and Corollary 1",
        Kind.CORRECTED,
        ("logprob-rank.log-softmax", "logprob-rank.row-shift", "logprob-rank.bottleneck"),
        (_TESTS + "TestLogProbabilities", _TESTS + "TestRowShiftIsExactOnIntegers"),
        "d + 1 without an output bias, d + 2 with one; P* > 0",
    ),
)
