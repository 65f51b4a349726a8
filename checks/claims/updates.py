"""Claims ``updates.*``: the rank of logit updates (Eq. 7) and the Eckart-Young residual (Prop. A.6).

Ranks (``updates.first-order-rank``, ``updates.exact-step-rank``: rank ≤ 2D). An integer instance
is decided exactly: the update is scaled to integers (q times the first-order update, q² times the
exact step, for η = p/q) and its rank computed over the integers with python-flint
(``Certification.EXACT``). A Gaussian instance is decided from a certified interval lo ≤ rank ≤ hi:

- hi: the update factors through 2D inner columns,
  −η(GWWᵀ + HHᵀG) = [−ηGW, −ηH][W, GᵀH]ᵀ and H'W'ᵀ − HWᵀ = [H', −H][W', W]ᵀ, so once the residual
  of the computed update against the computed product is within its rounding bound (both are
  within γ_n‖B‖_F of the exact update, B the magnitudes they are summed from), rank ≤ min(2D, C, V);
  a residual beyond the bound leaves only the shape, min(C, V). An upper bound proves "rank ≤ b"
  and nothing else (``ONE_SIDED``, ``proves=HOLDS``);
- lo: the singular values of the computed update above a Weyl margin (its rounding bound plus the
  SVD's backward error). A lower bound proves only that "rank ≤ b" is violated (``ONE_SIDED``,
  ``proves=VIOLATED``).

An interval that straddles b is ``inconclusive``.

Residuals (``updates.eckart-young``, ``.eckart-young-attained``) are compared in the backend's
dtype with a named tolerance at its unit roundoff (two-sided) and re-decided with 50-digit SVDs
(mpmath) when the margin is inside it; the mpmath judgement is a rounding-model margin at 50 digits
(two-sided).

Backends: every claim follows ``--backend``. A Gaussian step is rounded to the backend's dtype and its
update, factorization, residuals and singular values are computed there (margins at that dtype's unit
roundoff); an interval left open is re-decided in NumPy float64 and the residuals in mpmath, from the
case's float64 definition. Integer steps are exact (python-flint) whatever the backend.

Tightening (``--tighten F``, :func:`rankwall.checks.verdict.tightened_integer_bound`). An integer upper
bound b tightened by F < 1 asks rank ≤ ⌈F·b⌉ − 1, strictly below F·b (so F = 1/2 asks rank < D);
an integer lower bound b tightened by F > 1 would ask rank ≥ ⌊F·b⌋ + 1 (no claim here has one).
The Eckart-Young tail, a real lower bound on the residual, is multiplied by F as it is.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "Step",
    "candidate_steps",
    "contexts_count",
    "exact_step_rank",
    "exact_steps",
    "first_order_rank",
    "first_order_steps",
    "hidden_size",
    "truncated_steps",
    "vocabulary",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar, Literal

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance, toolkit
from rankwall.checks.backends import Backend, float64_copy
from rankwall.checks.quantities import quantity
from rankwall.checks.statements import Kind, Statement
from rankwall.checks.toolkit import Cases, Family, Reference, numpy_float64
from rankwall.checks.verdict import (
    Case,
    Certification,
    Judgement,
    Measurement,
    RankInterval,
    Relation,
    tightened_integer_bound,
)
from rankwall.theory import updates as up

# --------------------------------------------------------------------------- cases and strategies

#: The candidate Δ of the Eckart-Young claims: the first-order update, the exact step, a random matrix of
#: rank 2D, G's truncated SVD (the equality case), the truncated SVD moved within its own column space by
#: :data:`NEAR_SVD_EPSILON` (rank 2D still, its residual above the tail by a second-order amount), and
#: (``rank-D-svd``) the rank-D truncation of the mutant.
DeltaKind = Literal["first-order", "exact-step", "random-rank", "truncated-svd", "near-truncated-svd", "rank-D-svd"]

#: How far the ``near-truncated-svd`` candidate moves from G's truncated SVD: Δ = (P + εPEP)G for P the
#: projector on the top left singular vectors and E a seeded Gaussian matrix, so that its residual exceeds
#: the tail by about ε² (relatively): far below any float tolerance, far above the balls' radius.
NEAR_SVD_EPSILON = 2.0**-30


@dataclass(frozen=True)
class Step(Case):
    """A gradient step: ``up.construct_step(contexts, V, D, seed, integers=integers)`` with
    η = eta_num/eta_den, and the candidate update ``delta`` of the Eckart-Young claims."""

    KIND: ClassVar[str] = "step"
    contexts: int
    V: int
    D: int
    seed: int = 0
    integers: bool = False
    eta_num: int = 1
    eta_den: int = 3
    delta: DeltaKind = "first-order"


#: Vocabulary sizes the search reaches beyond 48 (two tiers of twelve): the margins grow with V.
LARGE_VOCABULARIES = (256, 1024)


@st.composite
def step_instances(draw: Any, delta: DeltaKind | Literal["any"]) -> Step:
    """A gradient step (H, W, G, eta = p/q), integer or Gaussian, and which rank-2D update to use. The
    edges come with real probability: V = 2 or 3, one to three contexts, D = 1, a full head (D = V), 2D at
    or beyond min(C, V) (the bound reaches the shape, the tail is zero), and V of 256 or 1,024."""
    tier = draw(st.integers(0, 11))
    if tier < 3:
        V = draw(st.sampled_from((2, 3)))
    elif tier < 10:
        V = draw(st.integers(2, 48))
    else:
        V = draw(st.sampled_from(LARGE_VOCABULARIES))
    top = max(1, min(V, 12))
    kinds: tuple[DeltaKind, ...] = ("first-order", "exact-step", "random-rank", "truncated-svd", "near-truncated-svd")
    return Step(
        contexts=draw(st.one_of(st.integers(1, 3), st.integers(1, 40))),
        V=V,
        D=draw(st.one_of(st.just(1), st.integers(1, top), st.just(top))),
        seed=draw(st.integers(0, 2**16)),
        integers=draw(st.booleans()),
        eta_num=draw(st.integers(1, 5)),
        eta_den=draw(st.integers(1, 7)),
        delta=draw(st.sampled_from(kinds)) if delta == "any" else delta,
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"

#: Digits of the mpmath escalation, and the relative margin below which it stays undecided.
MP_DIGITS = 50
MP_UNDECIDED = 1e-40


def step(case: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    """The step's matrices (H, W, G) and its step size η = p/q."""
    H, W, G = up.construct_step(case.contexts, case.V, case.D, case.seed, integers=case.integers)
    return H, W, G, Fraction(case.eta_num, case.eta_den)


@dataclass(frozen=True)
class Built(toolkit.Built):
    """A Gaussian step in a backend: H, W, G rounded to its dtype and η as a float."""

    H: Any
    W: Any
    G: Any
    eta: float


def built_step(case: Step, backend: Backend | None = None) -> Built:
    """The case's matrices in the backend's namespace, dtype and device (NumPy float64 by default)."""
    backend = numpy_float64() if backend is None else backend
    H, W, G, eta = step(case)
    H, W, G = (backend.asarray(m) for m in (H, W, G))
    return Built(backend, H, W, G, float(eta))


def update_matrix(case: Step, kind: str, backend: Backend | None = None) -> tuple[Any, bool]:
    """The first-order update or the exact step, in the backend; for integer instances scaled to integers
    (q * first order, q^2 * exact step, for eta = p/q), with Python ints (no overflow, no backend)."""
    if not case.integers:
        b = built_step(case, backend)
        call = up.first_order_update if kind == "first-order" else up.exact_step
        return call(b.H, b.W, b.G, b.eta), False
    H, W, G, eta = step(case)
    H, W, G = (m.astype(object) for m in (H, W, G))
    p, q = eta.numerator, eta.denominator
    if kind == "first-order":
        return up.first_order_update(H, W, G, p), True
    return (q * H - p * (G @ W)) @ (q * W - p * (G.T @ H)).T - q * q * (H @ W.T), True


# --------------------------------------------------------------------------- certified ranks


def factorization(H: Any, W: Any, G: Any, eta: float, kind: str) -> tuple[Any, Any, Any]:
    """``(L, R, B)`` in the inputs' namespace: the update is L Rᵀ with 2D inner columns,
    −η(GWWᵀ + HHᵀG) = [−ηGW, −ηH][W, GᵀH]ᵀ or H'W'ᵀ − HWᵀ = [H', −H][W', W]ᵀ; B ≥ 0 bounds, entrywise,
    the magnitudes that every entry of the update and of L Rᵀ is summed from (|η|(|G||W||W|ᵀ + |H||H|ᵀ|G|),
    or A_H A_Wᵀ + |H||W|ᵀ with A_H = |H| + |η||G||W| and A_W = |W| + |η||G|ᵀ|H|)."""
    xp = array_api_compat.array_namespace(H, W, G)
    aH, aW, aG, a_eta = xp.abs(H), xp.abs(W), xp.abs(G), abs(eta)
    if kind == "first-order":
        L = xp.concat([-eta * (G @ W), -eta * H], axis=1)
        R = xp.concat([W, G.T @ H], axis=1)
        return L, R, a_eta * ((aG @ aW) @ aW.T + aH @ (aH.T @ aG))
    L = xp.concat([H - eta * (G @ W), -H], axis=1)
    R = xp.concat([W - eta * (G.T @ H), W], axis=1)
    return L, R, (aH + a_eta * (aG @ aW)) @ (aW + a_eta * (aG.T @ aH)).T + aH @ aW.T


def frobenius(A: Any) -> float:
    """‖A‖_F, computed in A's namespace."""
    return float(array_api_compat.array_namespace(A).linalg.vector_norm(A))


def update_error(B: Any, D: int, u: float) -> float:
    """γ_n‖B‖_F with n = C + V + 2D + 8 at unit roundoff u: a Frobenius bound on the distance from the exact
    update of the rounded inputs to the computed update, and to the computed product L Rᵀ (each entry is
    a product of depth at most C + V + 2D plus a few scalings, additions and the rounding of B)."""
    C, V = B.shape
    return tolerance.gamma(C + V + 2 * D + 8, u) * frobenius(B)


def rank_interval(case: Step, kind: str, backend: Backend | None = None) -> RankInterval:
    """The rank of the update: exact for integer instances, else the interval of the module docstring,
    computed in the backend (NumPy float64 by default)."""
    return spectral_rank_interval(case, kind, backend)[0]


def spectral_rank_interval(case: Step, kind: str, backend: Backend | None = None) -> tuple[RankInterval, np.ndarray]:
    """:func:`rank_interval` and the singular values of the update it read (float64 NumPy, descending;
    of the integer update read as floats, for an integer instance), for :func:`rank_closeness`."""
    matrix, is_integer = update_matrix(case, kind, backend)
    if is_integer:
        rank, method = exact.exact_rank(matrix)
        sigma = np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False)
        return RankInterval(rank, rank, method, method, exact=True, certificate={"rank": rank}), sigma
    b = built_step(case, backend)
    D = case.D
    L, R, B = factorization(b.H, b.W, b.G, b.eta, kind)
    error = update_error(B, D, b.u)
    residual = frobenius(matrix - L @ R.T)
    shape = min(matrix.shape)
    factored = residual <= 2 * error
    hi = min(2 * D, shape) if factored else shape
    lo, margin, sigma = exact.weyl_rank_lower_bound(matrix, b.u, entry_error=error)
    upper = f"the factorization through {2 * D} columns" if factored else "the shape (residual beyond its bound)"
    certificate = {"factorization_residual": residual, "residual_bound": 2 * error, "weyl_margin": margin}
    return RankInterval(lo, hi, f"SVD + Weyl ({b.label})", upper, exact=False, certificate=certificate), sigma


def rank_closeness(sigma: np.ndarray, bound: int) -> float:
    """How near "rank ≤ bound" comes to failing, for the search's ``target()``: log10 σ_{b+1}/σ_1, the
    relative size of the first singular value the bound excludes (0 when it is as large as the first;
    -400 when the matrix has no (b+1)-th singular value, or is zero)."""
    if bound < 0 or bound >= len(sigma) or sigma[0] <= 0:
        return 0.0 if bound < 0 else -400.0
    return max(math.log10(max(float(sigma[bound]), 1e-300) / float(sigma[0])), -400.0)


def two_d(D: int) -> int:
    """The bound of Eq. 7."""
    return 2 * D


def rank_sides(
    case: Step, factor: Fraction, kind: str, claimed: Callable[[int], int], backend: Backend | None = None
) -> tuple[Measurement, Judgement]:
    """``rank <= b`` with b = claimed(D) tightened by F, decided from the certified interval
    (:meth:`RankInterval.sides`): the upper end proves it holds, the lower end that it is violated. The
    certificate carries ``closeness`` (:func:`rank_closeness`), a continuous target for the search."""
    bound = tightened_integer_bound(claimed(case.D), factor, "upper")
    interval, sigma = spectral_rank_interval(case, kind, backend)
    interval = replace(interval, certificate={**interval.certificate, "closeness": rank_closeness(sigma, bound)})
    return interval.sides(bound, "upper")


def measure_rank(
    case: Step, backend: Backend, factor: Fraction, kind: str, claimed: Callable[[int], int] = two_d
) -> Measurement:
    """rank of the update, computed in the backend, against claimed(D) tightened by F (see :func:`rank_sides`)."""
    return rank_sides(case, factor, kind, claimed, backend)[0]


def judge_rank(case: Step, factor: Fraction, kind: str, claimed: Callable[[int], int] = two_d) -> Judgement:
    """The same comparison as a judgement, re-computed in NumPy float64 (:meth:`RankInterval.sides`)."""
    return rank_sides(case, factor, kind, claimed)[1]


# --------------------------------------------------------------------------- Eckart-Young


def truncation_rank(case: Step, shape: tuple[int, int], kind: DeltaKind) -> int:
    """The rank of the candidate: 2D (capped by the shape), or D for the ``rank-D-svd`` mutant."""
    D = case.D
    return min(D if kind == "rank-D-svd" else 2 * D, *shape)


def delta_for(case: Step, backend: Backend | None = None) -> tuple[Any, Any]:
    """(Delta, G) in the backend (NumPy float64 by default): the candidate update of rank <= 2D and the
    gradient it should follow."""
    b = built_step(case, backend)
    kind = case.delta
    rank = truncation_rank(case, tuple(b.G.shape), kind)
    if kind == "first-order":
        return up.first_order_update(b.H, b.W, b.G, b.eta), b.G
    if kind == "exact-step":
        return up.exact_step(b.H, b.W, b.G, b.eta), b.G
    if kind in ("truncated-svd", "rank-D-svd"):
        return up.truncated_svd(b.G, rank), b.G
    xp = array_api_compat.array_namespace(b.G)
    on = functools.partial(xp.asarray, dtype=b.G.dtype, device=array_api_compat.device(b.G))
    if kind == "near-truncated-svd":
        left, _, right = xp.linalg.svd(b.G, full_matrices=False)
        wide = b.G.shape[0] <= b.G.shape[1]
        basis = left[:, :rank] if wide else right[:rank, :].T
        P = basis @ basis.T
        moved = P + NEAR_SVD_EPSILON * (P @ on(near_svd_perturbation(case, P.shape[0])) @ P)
        return (moved @ b.G if wide else b.G @ moved), b.G
    rng = np.random.default_rng(case.seed + 1)
    left, right = rng.standard_normal((b.G.shape[0], rank)), rng.standard_normal((rank, b.G.shape[1]))
    return on(left) @ on(right), b.G


def near_svd_perturbation(case: Step, n: int) -> np.ndarray:
    """The seeded Gaussian n x n matrix E of the ``near-truncated-svd`` candidate (n = min(C, V))."""
    return np.random.default_rng(case.seed + 2).standard_normal((n, n))


def measure_eckart_young(case: Step, backend: Backend, factor: Fraction, extra: int = 0) -> Measurement:
    """F·(tail beyond the rank-r truncation) against the residual of Delta at its best scale, both computed
    in the backend, with the SVD's margin at its unit roundoff."""
    delta, G = delta_for(case, backend)
    u = tolerance.unit_roundoff(G.dtype)
    r = max(min(2 * case.D, *G.shape) - extra, 0)
    tail = float(factor) * up.tail_norm(G, r)
    fit = up.residual(delta, G)
    norm = frobenius(G)
    margin = tolerance.svd_rank_margin(tuple(G.shape), u, norm, norm)
    certificate = {"best_scale": up.best_scale(delta, G), "tail_rank": r}
    method = f"{backend.name} {backend.dtype_name} SVD tail vs least-squares residual"
    return Measurement(tail, fit, 2 * (float(factor) + 1) * margin, method, certificate)


def exact_delta(case: Step, Gm: Any) -> Any:
    """Delta rebuilt at the working mpmath precision *from its definition*, so that its rank is
    at most 2D up to 10^-50 (the float Delta is not: rounding fills in the other singular values,
    and a rounded G_2D can beat the tail by an ulp without refuting anything)."""
    H, W, _, eta = step(case)
    kind = case.delta
    if kind in ("truncated-svd", "rank-D-svd"):
        r = truncation_rank(case, (Gm.rows, Gm.cols), kind)
        left, sigma, right = mpmath.svd_r(Gm)
        return sum((sigma[i] * left[:, i] * right[i, :] for i in range(r)), mpmath.zeros(Gm.rows, Gm.cols))
    if kind == "near-truncated-svd":
        r = truncation_rank(case, (Gm.rows, Gm.cols), kind)
        left, _, right = mpmath.svd_r(Gm)
        wide = Gm.rows <= Gm.cols
        n = min(Gm.rows, Gm.cols)
        basis = mpmath.matrix([[(left[i, j] if wide else right[j, i]) for j in range(r)] for i in range(n)])
        P = basis * basis.T
        moved = P + mpmath.mpf(NEAR_SVD_EPSILON) * (P * mpmath.matrix(near_svd_perturbation(case, n).tolist()) * P)
        return moved * Gm if wide else Gm * moved
    if kind == "random-rank":
        rng = np.random.default_rng(case.seed + 1)
        rank = min(2 * case.D, Gm.rows, Gm.cols)
        A = mpmath.matrix(rng.standard_normal((Gm.rows, rank)).tolist())
        return A * mpmath.matrix(rng.standard_normal((rank, Gm.cols)).tolist())
    Hm, Wm, e = (
        mpmath.matrix(H.astype(float).tolist()),
        mpmath.matrix(W.astype(float).tolist()),
        mpmath.mpf(eta.numerator) / eta.denominator,
    )
    first = -e * (Gm * Wm * Wm.T + Hm * (Hm.T * Gm))
    if kind == "first-order":
        return first
    return first + e * e * (Gm * Wm * Hm.T * Gm)


def judge_eckart_young(case: Step, factor: Fraction, extra: int = 0) -> Judgement:
    """Both sides in balls at :data:`BALL_BITS` on the float64 instance: F times the tail of G's singular
    values (from the eigenvalues of its smaller Gram matrix, each enclosed by a certified eigensolver) and
    the residual of Delta rebuilt from its definition (:func:`ball_delta`) at the best c, compared in
    squares: decided (two-sided) where the difference excludes 0, else undecided with its radius (an
    identity then holds within rounding). Where the tail is zero (r at least min(C, V)) and Δ is rational,
    exactly (:func:`judge_zero_tail`). Where the eigenvalues cannot be isolated (tied singular values), the
    50-digit mpmath judgement (:func:`judge_eckart_young_mpmath`)."""
    G = step(case)[2].astype(np.float64)
    r = max(min(2 * case.D, *G.shape) - extra, 0)
    if r >= min(G.shape):
        exactly = judge_zero_tail(case, G)
        if exactly is not None:
            return exactly
    with exact.precision(BALL_BITS):
        Gb = ball_matrix(G)
        delta, values = ball_delta(case, G, Gb), gram_eigenvalues(Gb, G.shape)
        if delta is None or values is None:
            return judge_eckart_young_mpmath(case, factor, extra)
        total = squares(Gb)
        tail2 = flint.arb(0) if r >= min(G.shape) else total - top_sum(values, r)
        inner = sum((d * g for d, g in zip(delta.entries(), Gb.entries(), strict=True)), flint.arb(0))
        norm2 = squares(delta)
        fit2 = total - inner * inner / norm2 if norm2 > 0 else total
        F = exact.fmpq_of(factor)
        sign = exact.sign(fit2 - F * F * tail2)
        tail, fit = F * nonnegative_root(tail2), nonnegative_root(fit2)
        radius = exact.radius(fit - tail)
    method = f"{BALL_BITS}-bit balls on the float64 instance, Δ rebuilt from its definition"
    return Judgement(exact.to_float(tail), exact.to_float(fit), sign, method, radius)


def rational_delta(case: Step, G: np.ndarray) -> Any:
    """Δ as an exact rational matrix on the float64 instance, where its definition is rational: the update
    formulas (η = p/q), the random factors, and a truncated SVD of rank at least min(C, V) (G itself, or
    (I + εE)G for the moved candidate); ``None`` for a truncation below the shape (irrational)."""
    H, W, _, eta = step(case)
    kind, n = case.delta, min(G.shape)
    Gq = exact_matrix(G)
    if kind in ("truncated-svd", "rank-D-svd", "near-truncated-svd"):
        if truncation_rank(case, G.shape, kind) < n:
            return None
        P = flint.fmpq_mat(n, n, [int(i == j) for i in range(n) for j in range(n)])
        if kind == "near-truncated-svd":
            P += exact.rational(NEAR_SVD_EPSILON) * exact_matrix(near_svd_perturbation(case, n))
        return P * Gq if G.shape[0] <= G.shape[1] else Gq * P
    if kind == "random-rank":
        rng = np.random.default_rng(case.seed + 1)
        rank = min(2 * case.D, *G.shape)
        left, right = rng.standard_normal((G.shape[0], rank)), rng.standard_normal((rank, G.shape[1]))
        return exact_matrix(left) * exact_matrix(right)
    Hq, Wq, e = exact_matrix(H), exact_matrix(W), exact.fmpq_of(eta)
    first = -e * (Gq * Wq * Wq.transpose() + Hq * (Hq.transpose() * Gq))
    return first if kind == "first-order" else first + e * e * (Gq * Wq * Hq.transpose() * Gq)


def exact_matrix(X: Any) -> Any:
    """A float (or integer) array read exactly as a python-flint rational matrix."""
    X = np.asarray(X)
    return flint.fmpq_mat(*X.shape, [exact.rational(x) for x in X.ravel().tolist()])


def judge_zero_tail(case: Step, G: np.ndarray) -> Judgement | None:
    """Where r ≥ min(C, V) the tail is exactly 0 and the squared residual ‖G‖² − ⟨Δ, G⟩²/‖Δ‖² is rational:
    decided exactly (sign 0 only for a residual that is exactly 0); ``None`` where Δ is not rational."""
    delta = rational_delta(case, G)
    if delta is None:
        return None
    Gq = exact_matrix(G)
    total = sum((g * g for g in Gq.entries()), flint.fmpq(0))
    inner = sum((d * g for d, g in zip(delta.entries(), Gq.entries(), strict=True)), flint.fmpq(0))
    norm2 = sum((d * d for d in delta.entries()), flint.fmpq(0))
    fit2 = total - inner * inner / norm2 if norm2 != 0 else total
    sign = (fit2 > 0) - (fit2 < 0)
    fit = math.sqrt(float(Fraction(int(fit2.p), int(fit2.q))))
    return Judgement(0.0, fit, sign, "exact rationals (the tail is zero: 2D ≥ min(C, V)), Δ from its definition")


def judge_eckart_young_mpmath(case: Step, factor: Fraction, extra: int = 0) -> Judgement:
    """Both sides at 50 digits (mpmath): F times the tail of G's singular values, and the residual of
    Delta rebuilt from its definition at the best c (a rounding-model margin: two-sided)."""
    G = step(case)[2].astype(np.float64)
    r = max(min(2 * case.D, *G.shape) - extra, 0)
    with mpmath.workdps(MP_DIGITS):
        Gm = mpmath.matrix(G.tolist())
        Dm = exact_delta(case, Gm)
        sigma = mpmath.svd_r(Gm, compute_uv=False)
        tail = mpmath.mpf(factor.numerator) / factor.denominator * mpmath.sqrt(sum(s**2 for s in list(sigma)[r:]))
        entries = [(i, j) for i in range(Gm.rows) for j in range(Gm.cols)]
        inner = sum(Dm[i, j] * Gm[i, j] for i, j in entries)
        norm2 = sum(Dm[i, j] ** 2 for i, j in entries)
        c = inner / norm2 if norm2 else 0
        fit = mpmath.sqrt(sum((c * Dm[i, j] - Gm[i, j]) ** 2 for i, j in entries))
        margin = fit - tail
        # the residual and the tail are errors of G's size: 50-digit rounding moves them by ~1e-50 ‖G‖_F
        scale = max(abs(fit), abs(tail), mpmath.sqrt(sum(Gm[i, j] ** 2 for i, j in entries)), mpmath.mpf(1e-300))
        sign = None if abs(margin) <= MP_UNDECIDED * scale else (1 if margin > 0 else -1)
        method, radius = f"mpmath {MP_DIGITS}-digit SVD", float(MP_UNDECIDED * scale)
        kind = None if sign is None else Certification.TWO_SIDED
        return Judgement(float(tail), float(fit), sign, method, radius, certified_by=kind)


# --------------------------------------------------------------------------- the re-decision in balls

#: Precision (bits) of the ball re-decision of the residual claims.
BALL_BITS = 128


def ball_matrix(X: Any) -> Any:
    """A matrix of exact balls (python-flint ``arb_mat``): a float array read as the rationals it holds."""
    return flint.arb_mat(np.asarray(X, dtype=np.float64).tolist())


def squares(M: Any) -> Any:
    """The sum of the squares of a ball matrix's entries."""
    return sum((x * x for x in M.entries()), flint.arb(0))


def nonnegative_root(x: Any) -> Any:
    """√x for a ball whose exact value is nonnegative (its lower end may dip below 0 by rounding)."""
    if x > 0:
        return x.sqrt()
    top = x.upper()
    return flint.arb(0).union(top.sqrt()) if top > 0 else flint.arb(0)


def top_sum(values: list[Any], k: int) -> Any:
    """Σ of the k largest of the exact numbers that ``values`` (balls) enclose: the i-th largest lies between
    the i-th largest lower end and the i-th largest upper end, whatever the order of the balls."""
    lows = sorted((v.lower() for v in values), key=lambda x: x.mid(), reverse=True)[:k]
    highs = sorted((v.upper() for v in values), key=lambda x: x.mid(), reverse=True)[:k]
    return sum(lows, flint.arb(0)).union(sum(highs, flint.arb(0)))


def smaller_gram(Gb: Any, shape: tuple[int, int]) -> Any:
    """GGᵀ (C ≤ V) or GᵀG: the Gram matrix of G of order min(C, V)."""
    return Gb * Gb.transpose() if shape[0] <= shape[1] else Gb.transpose() * Gb


def gram_eigenvalues(Gb: Any, shape: tuple[int, int]) -> list[Any] | None:
    """The eigenvalues of G's smaller Gram matrix (the squared singular values), with multiplicity, from
    python-flint's certified eigensolver (clusters allowed); ``None`` where it cannot enclose them."""
    try:
        return [e.real for e in flint.acb_mat(smaller_gram(Gb, shape)).eig(multiple=True)]
    except ValueError:
        return None


def spectral_projector(Gb: Any, shape: tuple[int, int], r: int) -> Any:
    """The orthogonal projector (real balls) on G's top-r left singular subspace (C ≤ V) or top-r right one,
    R(RᴴR)⁻¹Rᴴ for R the certified eigenvectors of the r largest eigenvalues of the smaller Gram matrix;
    the identity for r at least its order; ``None`` where the eigenvalues cannot be isolated (ties)."""
    n = min(shape)
    if r >= n:
        return flint.arb_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    try:
        values, vectors = flint.acb_mat(smaller_gram(Gb, shape)).eig(right=True)
        top = sorted(range(n), key=lambda i: values[i].real.mid(), reverse=True)[:r]
        R = flint.acb_mat([[vectors[i, j] for j in top] for i in range(n)])
        Rh = R.conjugate().transpose()
        return (R * (Rh * R).inv() * Rh).real
    except (ValueError, ZeroDivisionError):
        return None


def ball_delta(case: Step, G: np.ndarray, Gb: Any) -> Any:
    """Δ in balls at the working precision, rebuilt *from its definition* on the float64 instance (η = p/q
    exactly; the truncated SVD from :func:`spectral_projector`), so that its rank is at most 2D exactly,
    as the rounded float Δ's is not; ``None`` where the singular vectors cannot be isolated."""
    H, W, _, eta = step(case)
    kind = case.delta
    wide = G.shape[0] <= G.shape[1]
    if kind in ("truncated-svd", "rank-D-svd", "near-truncated-svd"):
        P = spectral_projector(Gb, G.shape, truncation_rank(case, G.shape, kind))
        if P is None:
            return None
        if kind == "near-truncated-svd":
            E = ball_matrix(near_svd_perturbation(case, P.nrows()))
            P = P + flint.arb(NEAR_SVD_EPSILON) * (P * E * P)
        return P * Gb if wide else Gb * P
    if kind == "random-rank":
        rng = np.random.default_rng(case.seed + 1)
        rank = min(2 * case.D, *G.shape)
        left, right = rng.standard_normal((G.shape[0], rank)), rng.standard_normal((rank, G.shape[1]))
        return ball_matrix(left) * ball_matrix(right)
    Hb, Wb, e = ball_matrix(H), ball_matrix(W), flint.arb(eta.numerator) / eta.denominator
    first = -e * (Gb * Wb * Wb.transpose() + Hb * (Hb.transpose() * Gb))
    return first if kind == "first-order" else first + e * e * (Gb * Wb * Hb.transpose() * Gb)


def measure_attained(case: Step, backend: Backend, factor: Fraction, delta: DeltaKind = "truncated-svd") -> Measurement:
    """The tail against the residual of the truncated SVD (``delta``: its rank-D version for the mutant)."""
    return measure_eckart_young(replace(case, delta=delta), backend, factor)


def judge_attained(case: Step, factor: Fraction, delta: DeltaKind = "truncated-svd") -> Judgement:
    """As :func:`judge_eckart_young`. Sides that agree to the balls' radius are left undecided with it: the
    identity then holds within rounding (:func:`rankwall.checks.verdict.decide`)."""
    return judge_eckart_young(replace(case, delta=delta), factor)


def _witnesses(V: int, deltas: tuple[DeltaKind, ...]) -> list[Step]:
    """The constructed steps at vocabulary size V (capped at 48): integer and Gaussian, three (D, C), then
    the edges: one context and one column, 2D = C (the bound reaches the shape, the tail is zero), a full
    head (D = V, where V ≤ 12), and one step at V itself up to 1,024 (the margins grow with V)."""
    small = min(V, 48)
    sizes = [(small, D, C) for D, C in ((1, 12), (2, 30), (max(1, small // 4), 40), (1, 1), (1, 2))]
    if small <= 12:
        sizes.append((small, small, 40))
    if V > 48:
        sizes.append((min(V, 1024), 2, 30))
    rows = [
        Step(contexts, size, D, seed=D, integers=integers, eta_num=1, eta_den=3, delta=delta)
        for integers in (True, False)
        for size, D, contexts in sizes
        if D <= size
        for delta in deltas
    ]
    return list(dict.fromkeys(rows))


def random_steps(V: int, n: int, seed: int, deltas: tuple[DeltaKind, ...]) -> list[Step]:
    """``n`` drawn steps at vocabulary size V (capped at 48), seeded NumPy draws: 1 to 40 contexts, D from 1
    to min(V, 12), integer or Gaussian, η = p/q with p ≤ 5 and q ≤ 7, Δ one of ``deltas``."""
    V, rng = min(V, 48), np.random.default_rng(seed)
    return [
        Step(
            contexts=int(rng.integers(1, 41)),
            V=V,
            D=int(rng.integers(1, max(1, min(V, 12)) + 1)),
            seed=int(rng.integers(2**16)),
            integers=bool(rng.integers(2)),
            eta_num=int(rng.integers(1, 6)),
            eta_den=int(rng.integers(1, 8)),
            delta=deltas[int(rng.integers(len(deltas)))],
        )
        for _ in range(n)
    ]


def _boundary(residual: bool) -> dict[str, Callable[[Step], bool]]:
    """The boundary classes of the steps (``residual``: with those of the Eckart-Young candidates)."""
    classes: dict[str, Callable[[Step], bool]] = {
        "V = 2 or 3": lambda c: c.V <= 3,
        "one to three contexts": lambda c: c.contexts <= 3,
        "D = 1": lambda c: c.D == 1,
        "a full head (D = V)": lambda c: c.D == c.V,
        "2D ≥ min(C, V): the bound reaches the shape, the tail is zero": lambda c: 2 * c.D >= min(c.contexts, c.V),
        "2D < min(C, V): the rank 2D attained": lambda c: 2 * c.D < min(c.contexts, c.V),
        "integer steps (exact ranks)": lambda c: c.integers,
        "large V (256 or 1,024)": lambda c: c.V >= 256,
    }
    if residual:
        classes["Δ at or near G's truncated SVD (the equality case)"] = lambda c: c.delta.endswith("truncated-svd")
    return classes


# --------------------------------------------------------------------------- references
#
# Both sides the slow, obviously right way on the instance as the backend built it (H, W, G and the random
# factors rounded to its dtype, read exactly), sharing no code with the measures or the judges: the update
# formed in exact rationals (python-flint ``fmpq_mat``) from its formula, and its exact rank; the tail from
# the real roots of the exact characteristic polynomial of G's smaller Gram matrix; Δ from its definition
# (exactly, or the truncated SVD from unit eigenvectors of that Gram matrix in balls) and its residual at
# the best scale, ‖G‖² − ⟨Δ, G⟩²/‖Δ‖².

REFERENCE_BITS = 128


def rationals(X: Any) -> Any:
    """A float array (any backend) read exactly as a python-flint rational matrix."""
    X = float64_copy(X) if not isinstance(X, np.ndarray) or X.dtype != object else X
    rows, columns = X.shape
    return flint.fmpq_mat(rows, columns, [flint.fmpq(*Fraction(v).as_integer_ratio()) for v in X.ravel().tolist()])


def reference_inputs(case: Step, backend: Backend) -> tuple[Any, Any, Any, Any]:
    """(H, W, G, η) as exact rationals: the backend's rounded Gaussian arrays, or the integer step itself;
    η = p/q exactly (a float η changes no rank, and moves a residual far below its tolerance)."""
    eta = flint.fmpq(case.eta_num, case.eta_den)
    if case.integers:
        return (*(rationals(M.astype(object)) for M in step(case)[:3]), eta)
    b = built_step(case, backend)
    return rationals(b.H), rationals(b.W), rationals(b.G), eta


def reference_rank(case: Step, backend: Backend, kind: str) -> int:
    """The exact rank of −η(GWWᵀ + HHᵀG) or (H − ηGW)(W − ηGᵀH)ᵀ − HWᵀ on the built inputs."""
    H, W, G, eta = reference_inputs(case, backend)
    if kind == "first-order":
        update = -eta * (G * W * W.transpose() + H * H.transpose() * G)
    else:
        update = (H - eta * G * W) * (W - eta * G.transpose() * H).transpose() - H * W.transpose()
    return update.rank()


def _rank_reference(kind: str) -> Callable[[Step, Backend], Reference]:
    def reference(case: Step, backend: Backend) -> Reference:
        method = f"exact rank over Q of the {kind} update formed in rationals from the built H, W, G"
        return Reference(reference_rank(case, backend, kind), 2 * case.D, method)

    return reference


#: References already computed, by case and the bytes of what the backend built (float64 backends agree).
_RESIDUAL_REFERENCES: dict[tuple[Step, bytes], tuple[Any, Any]] = {}


def reference_residual(case: Step, backend: Backend) -> tuple[Any, Any]:
    """(tail, residual) of the Eckart-Young claims on the built instance, as balls (see the section's
    comment); computed once per case and built values (:func:`_built_bytes`)."""
    key = (case, _built_bytes(case, backend))
    if key not in _RESIDUAL_REFERENCES:
        if len(_RESIDUAL_REFERENCES) >= 1024:
            _RESIDUAL_REFERENCES.clear()
        _RESIDUAL_REFERENCES[key] = _reference_residual(case, backend)
    return _RESIDUAL_REFERENCES[key]


def _built_bytes(case: Step, backend: Backend) -> bytes:
    """Everything :func:`_reference_residual` reads from the backend, as float64 bytes (nothing for an
    integer step, which no backend rounds)."""
    if case.integers:
        return b""
    b = built_step(case, backend)
    arrays = [b.H, b.W, b.G]
    if case.delta == "random-rank":
        rng = np.random.default_rng(case.seed + 1)
        r = min(2 * case.D, *b.G.shape)
        arrays += [
            backend.asarray(rng.standard_normal((b.G.shape[0], r))),
            backend.asarray(rng.standard_normal((r, b.G.shape[1]))),
        ]
    return b"|".join(float64_copy(M).tobytes() for M in arrays)


def _reference_residual(case: Step, backend: Backend) -> tuple[Any, Any]:
    H, W, G, eta = reference_inputs(case, backend)
    C, V = G.nrows(), G.ncols()
    r = min(2 * case.D, C, V)
    gram = G * G.transpose() if C <= V else G.transpose() * G
    with exact.precision(REFERENCE_BITS):
        roots = [x.real for x, m in gram.charpoly().complex_roots() for _ in range(m)]
        bottom = len(roots) - r
        low = sum(sorted((x.lower() for x in roots), key=lambda x: x.mid())[:bottom], flint.arb(0))
        high = sum(sorted((x.upper() for x in roots), key=lambda x: x.mid())[:bottom], flint.arb(0))
        tail = low.union(high) if bottom > 0 else flint.arb(0)
        Gb = flint.arb_mat(G)
        if case.delta in ("truncated-svd", "near-truncated-svd"):
            delta = _reference_truncation(case, Gb, gram, r)
        elif case.delta == "random-rank":
            rng = np.random.default_rng(case.seed + 1)
            left, right = rng.standard_normal((C, r)), rng.standard_normal((r, V))
            if not case.integers:
                left, right = (float64_copy(backend.asarray(M)) for M in (left, right))
            delta = flint.arb_mat(rationals(left) * rationals(right))
        elif case.delta == "first-order":
            delta = flint.arb_mat(-eta * (G * W * W.transpose() + H * H.transpose() * G))
        else:
            step_update = (H - eta * G * W) * (W - eta * G.transpose() * H).transpose() - H * W.transpose()
            delta = flint.arb_mat(step_update)
        pairs = list(zip(delta.entries(), Gb.entries(), strict=True))
        inner = sum((d * g for d, g in pairs), flint.arb(0))
        size = sum((d * d for d, _ in pairs), flint.arb(0))
        total = sum((g * g for _, g in pairs), flint.arb(0))
        residual = total - inner * inner / size if size > 0 else total
        return _root(tail), _root(residual)


def _root(x: Any) -> Any:
    top = x.upper()
    return x.sqrt() if x > 0 else flint.arb(0).union(top.sqrt()) if top > 0 else flint.arb(0)


def _reference_truncation(case: Step, Gb: Any, gram: Any, r: int) -> Any:
    """G's truncated SVD U_r U_rᵀ G (or G V_r V_rᵀ) from unit eigenvectors of the exact Gram matrix in balls
    (mpmath's symmetric eigensolver where they cannot be isolated), moved by (I + εE) within its column space
    for the ``near-truncated-svd`` candidate."""
    n = gram.nrows()
    wide = Gb.nrows() <= Gb.ncols()
    if r >= n:
        basis = flint.arb_mat(n, n, [1 if i == j else 0 for i in range(n) for j in range(n)])
    else:
        try:
            values, vectors = flint.acb_mat(flint.arb_mat(gram)).eig(right=True)
            order = sorted(range(n), key=lambda i: -values[i].real.mid())[:r]
            columns = []
            for j in order:
                v = [vectors[i, j] for i in range(n)]
                length = sum((x * x.conjugate() for x in v), flint.acb(0)).real.sqrt()
                phase = v[max(range(n), key=lambda i: abs(v[i]).mid())]
                unit = phase.conjugate() / abs(phase)
                columns.append([(x * unit / length).real for x in v])
            basis = flint.arb_mat([[columns[j][i] for j in range(r)] for i in range(n)])
        except ValueError:
            with mpmath.workprec(REFERENCE_BITS):
                entries = [[mpmath.mpf(int(x.p)) / int(x.q) for x in row] for row in gram.tolist()]
                _, Q = mpmath.eigsy(mpmath.matrix(entries))
                values = mpmath.eigsy(mpmath.matrix(entries), eigvals_only=True)
                order = sorted(range(n), key=lambda i: -values[i])[:r]
                basis = flint.arb_mat([[flint.arb(mpmath.nstr(Q[i, j], 40)) for j in order] for i in range(n)])
    P = basis * basis.transpose()
    if case.delta == "near-truncated-svd":
        E = flint.arb_mat(near_svd_perturbation(case, n).tolist())
        P = P + flint.arb(NEAR_SVD_EPSILON) * (P * E * P)
    return P * Gb if wide else Gb * P


def _residual_reference(case: Step, backend: Backend) -> Reference:
    tail, residual = reference_residual(case, backend)
    method = "tail from the roots of the exact Gram's characteristic polynomial, residual of Δ from its definition"
    return Reference(_number(tail), _number(residual), method)


def _number(x: Any) -> Fraction:
    mantissa, exponent = x.mid().man_exp()
    return Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


# --------------------------------------------------------------------------- quantities (the public API)


def _pinned(n: int) -> RankInterval:
    return RankInterval(n, n, "the case", "the case", exact=True)


first_order_rank = quantity(
    "rank(−η(GWWᵀ + HHᵀG))",
    lambda ctx: rank_interval(ctx.case, "first-order", ctx.backend),
    lambda ctx: rank_interval(ctx.case, "first-order"),
    integer=True,
    doc="the rank of the first-order logit update of a step: exact for integer steps, else a certified interval",
)
exact_step_rank = quantity(
    "rank(H'W'ᵀ − HWᵀ)",
    lambda ctx: rank_interval(ctx.case, "exact-step", ctx.backend),
    lambda ctx: rank_interval(ctx.case, "exact-step"),
    integer=True,
    doc="the rank of the exact logit change of a gradient step",
)
hidden_size = quantity(
    "D", lambda ctx: _pinned(ctx.case.D), lambda ctx: _pinned(ctx.case.D), integer=True, doc="the hidden size D"
)
contexts_count = quantity(
    "C",
    lambda ctx: _pinned(ctx.case.contexts),
    lambda ctx: _pinned(ctx.case.contexts),
    integer=True,
    doc="the contexts C (rows of G)",
)
vocabulary = quantity(
    "V", lambda ctx: _pinned(ctx.case.V), lambda ctx: _pinned(ctx.case.V), integer=True, doc="the vocabulary V"
)

#: Where the claims of this family range: gradient steps with a first-order update, with an exact
#: step, and with any of the rank-2D candidates of the Eckart-Young claims (the truncated SVD itself only
#: for the identity: at exact equality no finite precision shows an inequality, so the inequality's
#: witnesses take the candidate moved within its column space, :data:`NEAR_SVD_EPSILON`).
CANDIDATES: tuple[DeltaKind, ...] = ("first-order", "exact-step", "random-rank", "near-truncated-svd")
first_order_steps = Cases(
    lambda: step_instances("first-order"),
    lambda V: _witnesses(V, ("first-order",)),
    lambda V, n, seed: random_steps(V, n, seed, ("first-order",)),
    _boundary(residual=False),
)
exact_steps = Cases(
    lambda: step_instances("exact-step"),
    lambda V: _witnesses(V, ("exact-step",)),
    lambda V, n, seed: random_steps(V, n, seed, ("exact-step",)),
    _boundary(residual=False),
)
candidate_steps = Cases(
    lambda: step_instances("any"),
    lambda V: _witnesses(V, CANDIDATES),
    lambda V, n, seed: random_steps(V, n, seed, CANDIDATES),
    _boundary(residual=True),
)
truncated_steps = Cases(
    lambda: step_instances("truncated-svd"),
    lambda V: _witnesses(V, ("truncated-svd",)),
    lambda V, n, seed: random_steps(V, n, seed, ("truncated-svd",)),
    _boundary(residual=False),
)


FAMILY = Family("updates", source=f"{SEED_000}, Eq. 7 (§2.2)")


first_order_rank_claim = FAMILY.claim(
    "first-order-rank",
    title="The first-order logit update has rank at most 2D",
    statement="rank(−η(G W Wᵀ + H Hᵀ G)) ≤ 2D",
    domain="H: C × D, W: V × D, G: C × V; integer (exact rank) or Gaussian (certified rank interval)",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=lambda i, b, f: measure_rank(i, b, f, "first-order"),
    judge_exactly=lambda i, f: judge_rank(i, f, "first-order"),
    cases=first_order_steps,
    reference=_rank_reference("first-order"),
)
exact_step_rank_claim = FAMILY.claim(
    "exact-step-rank",
    title="The exact logit change of a gradient step has rank at most 2D",
    statement="rank(H'W'ᵀ − HWᵀ) ≤ 2D for H' = H − ηGW, W' = W − ηGᵀH",
    domain="as for updates.first-order-rank; η = p/q rational",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=lambda i, b, f: measure_rank(i, b, f, "exact-step"),
    judge_exactly=lambda i, f: judge_rank(i, f, "exact-step"),
    cases=exact_steps,
    reference=_rank_reference("exact-step"),
)
eckart_young = FAMILY.claim(
    "eckart-young",
    source=f"{SEED_000}, Prop. A.6 (App. A.3)",
    title="No rank-2D update follows the logit gradient beyond its tail",
    statement="‖cΔ − G‖_F ≥ (Σ_{i>2D} σ_i(G)²)^{1/2} for every Δ of rank ≤ 2D and every scalar c",
    domain="Δ = the first-order update, the exact step, a random rank-2D matrix, or G's truncated SVD",
    relation=Relation.AT_MOST,
    direction="lower",
    measure=measure_eckart_young,
    judge_exactly=judge_eckart_young,
    cases=candidate_steps,
    reference=_residual_reference,
)
eckart_young_attained = FAMILY.claim(
    "eckart-young-attained",
    source=f"{SEED_000}, Prop. A.6 (equality case, Eckart-Young-Mirsky)",
    title="The truncated SVD attains the residual bound",
    statement="min_c ‖cG_{2D} − G‖_F = (Σ_{i>2D} σ_i(G)²)^{1/2} (at c = 1)",
    domain="G Gaussian or integer, any shape",
    relation=Relation.EQUAL,
    measure=measure_attained,
    judge_exactly=judge_attained,
    cases=truncated_steps,
    reference=_residual_reference,
)

first_order_rank_claim.with_mutant(
    "at-most-2D-minus-1",
    statement="rank of the first-order update ≤ 2D − 1  (false: generically it is 2D)",
    measure=lambda i, b, f: measure_rank(i, b, f, "first-order", lambda D: 2 * D - 1),
    judge_exactly=lambda i, f: judge_rank(i, f, "first-order", lambda D: 2 * D - 1),
)
exact_step_rank_claim.with_mutant(
    "at-most-D",
    statement="rank(H'W'ᵀ − HWᵀ) ≤ D  (false: H'W'ᵀ and HWᵀ have rank D each, their difference generically 2D)",
    measure=lambda i, b, f: measure_rank(i, b, f, "exact-step", lambda D: D),
    judge_exactly=lambda i, f: judge_rank(i, f, "exact-step", lambda D: D),
)
eckart_young.with_mutant(
    "one-more-tail-value",
    statement="‖cΔ − G‖_F ≥ (Σ_{i≥2D} σ_i(G)²)^{1/2}  (false: the truncated SVD misses only i > 2D)",
    measure=lambda i, b, f: measure_eckart_young(i, b, f, extra=1),
    judge_exactly=lambda i, f: judge_eckart_young(i, f, extra=1),
    cases=truncated_steps,
)
eckart_young_attained.with_mutant(
    "rank-D-truncation",
    statement="min_c ‖cG_D − G‖_F = (Σ_{i>2D} σ_i(G)²)^{1/2}  (false: G_D also misses σ_{D+1}, …, σ_{2D})",
    measure=lambda i, b, f: measure_attained(i, b, f, "rank-D-svd"),
    judge_exactly=lambda i, f: judge_attained(i, f, "rank-D-svd"),
)

#: The theorems and lemmas of ``docs/updates.md`` (collected by ``checks/fidelity.py``).
_TESTS = "tests/test_updates.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-update-rank", "UP.1", "updates", "seed 000, §2.2, Eq. 7", Kind.SEED,
              ("updates.first-order-rank", "updates.exact-step-rank"),
              (_TESTS + "TestRankAtMost2D", _TESTS + "TestRankClaimsAreCertified")),
    Statement("thm-logit-gradient", "UP.2", "updates", "seed 000, §2.2 (\"may have a rank up to V\"), Result 1",
              Kind.CORRECTED, ("error-rank.unique-continuation",), (_TESTS + "TestTheLogitGradient",),
              "rank <= min(C, V - 1); the bridge from P - Ñ to diag(f)(P - Ñ)"),
    Statement("thm-eckart-young", "UP.3", "updates", "seed 000, Prop. A.6 (statement lost, proof kept)",
              Kind.RECONSTRUCTED, ("updates.eckart-young", "updates.eckart-young-attained"),
              (_TESTS + "TestEckartYoung", _TESTS + "TestEckartYoungClaims")),
)
