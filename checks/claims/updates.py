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
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar, Literal

import array_api_compat
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance, toolkit
from rankwall.checks.backends import Backend
from rankwall.checks.quantities import quantity
from rankwall.checks.toolkit import Cases, Family, numpy_float64
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

#: The candidate Δ of the Eckart-Young claims (``rank-D-svd``: the rank-D truncation of the mutant).
DeltaKind = Literal["first-order", "exact-step", "random-rank", "truncated-svd", "rank-D-svd"]


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


@st.composite
def step_instances(draw: Any, delta: DeltaKind | Literal["any"]) -> Step:
    """A gradient step (H, W, G, eta = p/q), integer or Gaussian, and which rank-2D update to use."""
    V = draw(st.integers(2, 48))
    kinds: tuple[DeltaKind, ...] = ("first-order", "exact-step", "random-rank", "truncated-svd")
    return Step(
        contexts=draw(st.integers(1, 40)),
        V=V,
        D=draw(st.integers(1, max(1, min(V, 12)))),
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
    matrix, is_integer = update_matrix(case, kind, backend)
    if is_integer:
        rank, method = exact.exact_rank(matrix)
        return RankInterval(rank, rank, method, method, exact=True, certificate={"rank": rank})
    b = built_step(case, backend)
    D = case.D
    L, R, B = factorization(b.H, b.W, b.G, b.eta, kind)
    error = update_error(B, D, b.u)
    residual = frobenius(matrix - L @ R.T)
    shape = min(matrix.shape)
    factored = residual <= 2 * error
    hi = min(2 * D, shape) if factored else shape
    lo, margin, _ = exact.weyl_rank_lower_bound(matrix, b.u, entry_error=error)
    upper = f"the factorization through {2 * D} columns" if factored else "the shape (residual beyond its bound)"
    certificate = {"factorization_residual": residual, "residual_bound": 2 * error, "weyl_margin": margin}
    return RankInterval(lo, hi, f"SVD + Weyl ({b.label})", upper, exact=False, certificate=certificate)


def two_d(D: int) -> int:
    """The bound of Eq. 7."""
    return 2 * D


def rank_sides(
    case: Step, factor: Fraction, kind: str, claimed: Callable[[int], int], backend: Backend | None = None
) -> tuple[Measurement, Judgement]:
    """``rank <= b`` with b = claimed(D) tightened by F, decided from the certified interval
    (:meth:`RankInterval.sides`): the upper end proves it holds, the lower end that it is violated."""
    bound = tightened_integer_bound(claimed(case.D), factor, "upper")
    return rank_interval(case, kind, backend).sides(bound, "upper")


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
    rng = np.random.default_rng(case.seed + 1)
    left, right = rng.standard_normal((b.G.shape[0], rank)), rng.standard_normal((rank, b.G.shape[1]))
    xp = array_api_compat.array_namespace(b.G)
    on = functools.partial(xp.asarray, dtype=b.G.dtype, device=array_api_compat.device(b.G))
    return on(left) @ on(right), b.G


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


def measure_attained(case: Step, backend: Backend, factor: Fraction, delta: DeltaKind = "truncated-svd") -> Measurement:
    """The tail against the residual of the truncated SVD (``delta``: its rank-D version for the mutant)."""
    return measure_eckart_young(replace(case, delta=delta), backend, factor)


def judge_attained(case: Step, factor: Fraction, delta: DeltaKind = "truncated-svd") -> Judgement:
    """As :func:`judge_eckart_young`. Sides that agree to the 50-digit precision are left undecided with
    that radius: the identity then holds within rounding (:func:`rankwall.checks.verdict.decide`)."""
    return judge_eckart_young(replace(case, delta=delta), factor)


def _witnesses(V: int, deltas: tuple[DeltaKind, ...]) -> list[Step]:
    """The constructed steps at vocabulary size V (capped at 48): integer and Gaussian, three (D, C)."""
    V = min(V, 48)
    rows = []
    for integers in (True, False):
        for D, contexts in ((1, 12), (2, 30), (max(1, V // 4), 40)):
            if D > V:
                continue
            for delta in deltas:
                rows.append(Step(contexts, V, D, seed=D, integers=integers, eta_num=1, eta_den=3, delta=delta))
    return rows


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
#: step, and with any of the rank-2D candidates of the Eckart-Young claims.
first_order_steps = Cases(lambda: step_instances("first-order"), lambda V: _witnesses(V, ("first-order",)))
exact_steps = Cases(lambda: step_instances("exact-step"), lambda V: _witnesses(V, ("exact-step",)))
candidate_steps = Cases(
    lambda: step_instances("any"), lambda V: _witnesses(V, ("first-order", "exact-step", "random-rank"))
)
truncated_steps = Cases(lambda: step_instances("truncated-svd"), lambda V: _witnesses(V, ("truncated-svd",)))


FAMILY = Family("updates", random_instances=lambda V, n, seed: [], source=f"{SEED_000}, Eq. 7 (§2.2)")


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
