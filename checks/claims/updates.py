r"""Claims ``updates.*``: the rank of logit updates (Eq. 7), the Eckart-Young residual (Prop. A.6) and the
logit gradient (Theorem UP.2), declared over this family's quantities.

The exact object. A context is a case built in its backend and dtype; every quantity of the context
measures, evaluates exactly and references the same object, that build read exactly:

- a gradient step (:class:`Step`): H (C x D), W (V x D) and G (C x V) as the backend holds them (Gaussian
  entries rounded to its dtype, or small integers, which every dtype holds exactly), read as the dyadic
  rationals they are, and the step size η = p/q exactly (the backend multiplies by η rounded to its
  dtype; the float bounds carry that rounding). n = min(C, V), and M = GGᵀ or GᵀG, whichever is n x n,
  with eigenvalues λ_1 ≥ … ≥ λ_n (the squared singular values of G) and spectral projectors P_k on the
  top k. The candidate Δ of the Eckart-Young claims (the case's ``delta``):

  - ``first-order``: −η(GWWᵀ + HHᵀG); ``exact-step``: (H − ηGW)(W − ηGᵀH)ᵀ − HWᵀ, formed exactly;
  - ``random-rank``: L R, for seeded Gaussian factors L (C x 2D) and R (2D x V) as the backend built them;
  - ``truncated-svd`` (``rank-D-svd``): the *ideal* truncated SVD G_r, r = min(2D, n) (min(D, n)), the
    projection of G on its top r singular vectors, which a float SVD only approximates. It is evaluated
    through the lemma tr(P_r M) = λ_1 + … + λ_r = S_r: ⟨G_r, G⟩ = ‖G_r‖² = S_r, so its best scale is 1 and
    its residual is (‖G‖² − S_r)^{1/2}, the tail itself;
  - ``near-truncated-svd``: the ideal G_r moved within its column space, (P_r + εP_rEP_r)G (or
    G(P_r + εP_rEP_r) for C > V), ε = 2^-30, E a seeded Gaussian n x n matrix as the backend built it;
    ⟨Δ, G⟩ = tr(P_ε M) and ‖Δ‖² = tr(P_εᵀP_ε M) (tr(P_εP_εᵀM) for C > V) in balls from P_r's certified
    eigenvectors. For r ≥ n, P_r = I, and the truncated candidates are rational (G, or G moved by εEG).

  Exactly: the ranks of the updates are ranks over the rationals (the update scaled to integers:
  GWWᵀ + HHᵀG, or q² times the exact step); a residual min_c ‖cΔ − G‖_F is
  (‖G‖² − ⟨Δ, G⟩²/‖Δ‖²)^{1/2}, a rational under a root where Δ is rational; the tail
  (Σ_{i>2D} σ_i(G)²)^{1/2} is (‖G‖² − S_{2D})^{1/2}. S_k is a :class:`~rankwall.checks.engine.reals.Form` in the
  atoms λ_1, …, λ_{ρ−1} (ρ = rank G, exact over the rationals; λ_ρ = ‖G‖² − S_{ρ−1}, and λ_i = 0 for
  i > ρ), each a ball from python-flint's certified eigensolver, so the tail and the truncated SVD's
  residual are the same number exactly, not to rounding.

- a logit gradient (:class:`Gradient`): P, the float softmax rows as the backend holds them, each row
  read exactly and normalised exactly (a genuine probability row, whatever rounding did); Ñ the integer
  next-token counts normalised; f the integer context frequencies. G = diag(f)(P − Ñ), X = (P − Ñ)₊ (its
  rows on the C₊ contexts with f_c > 0). Scaled to integers, row c of P − Ñ is K_c/(A_c n_c), with A_c the
  row's sum over one power of two and n_c its count: ranks are exact ranks of K over the rationals, and
  σ_i(G), σ_i(X) square roots of certified eigenvalues of exact Gram matrices (0 beyond the rank). Where
  f is constant on the active contexts, G₊ = fX exactly, so σ_i(G) is f·σ_i(X) as a form in one atom,
  and the equality case of UP.2 (3) is decided exactly.

Float measurements bound their distance to that object (the rounding model, :mod:`rankwall.checks.engine.tolerance`
and :func:`rankwall.theory._rounding.gamma`): an update, a candidate and a logit gradient within a
Frobenius bound of the exact one (the η and softmax normalisation errors included); singular values by
Weyl's (2-norm) and Mirsky's (Frobenius) inequalities from the SVD's backward error; a residual by the
angle its candidate can turn. The truncated SVD's residual is measured through the same lemma, as the
float tail; the moved truncation has no float bound (an infinite error): its float SVD cannot bound its
distance from the ideal P_r, and the exact route decides.

Ranks (``updates.first-order-rank``, ``.exact-step-rank``, ``.gradient-rank``) are measured as certified
intervals lo ≤ rank ≤ hi: lo from the singular values above a Weyl margin, hi from structure checked on
the instance (the update's factorization through 2D inner columns, its residual against the computed
product within its bound; a logit gradient's zero rows and its kernel vector 1, counted exactly). An
integer step's rank is exact in both routes. An interval that straddles the bound goes to the exact rank.

Tightening (``--tighten F``, :func:`rankwall.checks.engine.verdict.tightened_integer_bound`): an integer upper
bound b becomes ⌈F·b⌉ − 1; the Eckart-Young tail (a real lower bound) and the half-width of UP.2 (3) are
multiplied by F.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "Gradient",
    "Step",
    "active_contexts",
    "candidate_steps",
    "contexts_count",
    "error_singular_value",
    "exact_step_rank",
    "exact_steps",
    "first_order_rank",
    "first_order_steps",
    "gradient_norm",
    "gradient_rank",
    "gradient_singular_value",
    "hidden_size",
    "largest_frequency",
    "least_frequency",
    "logit_gradients",
    "rank_D_residual",
    "residual",
    "sigma_2D",
    "tail",
    "truncated_steps",
    "vocabulary",
]

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar, Literal

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.engine import tolerance, toolkit
from rankwall.checks.engine.backends import Backend, float64_copy, singular_values
from rankwall.checks.engine.quantities import U64, Context, Measured, declare, minimum, quantity, sqrt
from rankwall.checks.engine.reals import Form, Real
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases, numpy_float64
from rankwall.checks.engine.verdict import Case, RankInterval
from rankwall.checks.exact import vectors as exact_vectors
from rankwall.theory import updates as up
from rankwall.theory.validation import InputError

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "updates"
SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"

# --------------------------------------------------------------------------- cases and strategies

#: The candidate Δ of the Eckart-Young claims: the first-order update, the exact step, a random matrix of
#: rank 2D, G's truncated SVD (the equality case), the truncated SVD moved within its own column space by
#: :data:`NEAR_SVD_EPSILON` (rank 2D still, its residual above the tail by a second-order amount), and
#: (``rank-D-svd``) the rank-D truncation.
DeltaKind = Literal["first-order", "exact-step", "random-rank", "truncated-svd", "near-truncated-svd", "rank-D-svd"]
#: The candidates whose Δ is a truncation of G's SVD (ideal: evaluated exactly through the spectrum).
TRUNCATIONS = ("truncated-svd", "rank-D-svd", "near-truncated-svd")

#: How far the ``near-truncated-svd`` candidate moves from G's truncated SVD: Δ = (P + εPEP)G for P the
#: projector on the top left singular vectors and E a seeded Gaussian matrix, so that its residual exceeds
#: the tail by about ε² (relatively): far below any float tolerance, far above the balls' radius.
NEAR_SVD_EPSILON = 2.0**-30
#: log2 of :data:`NEAR_SVD_EPSILON`, for the exact routes.
NEAR_SVD_EXPONENT = -30


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


@dataclass(frozen=True)
class Gradient(Case):
    """A logit gradient diag(f)(P − Ñ): ``up.construct_logit_gradient(contexts, V, seed, idle=idle,
    scale=scale, spread=spread, observed=observed)`` (the last ``idle`` contexts have f_c = 0; ``spread =
    1`` makes f constant), and the index i (from 1) of the singular values σ_i that UP.2 (3) compares."""

    KIND: ClassVar[str] = "logit-gradient"
    contexts: int
    V: int
    seed: int = 0
    idle: int = 0
    scale: float = 1.0
    spread: int = 5
    observed: int = 3
    index: int = 1


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


@st.composite
def gradient_instances(draw: Any) -> Gradient:
    """A logit gradient and an index i, at V ≤ 16 (the references form exact Gram matrices and their
    characteristic polynomials). The edges come with real probability: V = 2 or 3, one active context,
    idle contexts, C₊ ≥ V − 1 (the kernel vector caps the rank), constant frequencies (the equality case
    of UP.2 (3)), σ_i beyond the rank, and peaked rows."""
    V = draw(st.one_of(st.sampled_from((2, 3)), st.integers(2, 16), st.integers(2, 16)))
    contexts = draw(st.one_of(st.integers(1, 3), st.integers(1, 24), st.integers(max(1, V - 1), V + 4)))
    idle = draw(st.one_of(st.just(0), st.integers(0, contexts - 1)))
    active = contexts - idle
    return Gradient(
        contexts=contexts,
        V=V,
        seed=draw(st.integers(0, 2**16)),
        idle=idle,
        scale=draw(st.sampled_from((0.5, 1.0, 4.0, 16.0))),
        spread=draw(st.sampled_from((1, 2, 5, 20))),
        observed=draw(st.integers(1, 4)),
        index=draw(st.one_of(st.just(1), st.integers(1, min(active, V)), st.just(min(active, V)))),
    )


def _witnesses(V: int, deltas: tuple[DeltaKind, ...]) -> list[Step]:
    """The constructed steps at vocabulary size V (capped at 48): integer and Gaussian, three (D, C), then
    the edges: one context and one column, 2D = C (the bound reaches the shape, the tail is zero), a full
    head (D = V, where V ≤ 12), and one step at V itself (the margins grow with V)."""
    small = min(V, 48)
    sizes = [(small, D, C) for D, C in ((1, 12), (2, 30), (max(1, small // 4), 40), (1, 1), (1, 2))]
    if small <= 12:
        sizes.append((small, small, 40))
    if V > 48:
        sizes.append((V, 2, 30))
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


def gradient_witnesses(V: int) -> list[Gradient]:
    """Constructed logit gradients at vocabulary size V (capped at 16, and one at V itself): more
    active contexts than tokens (rank V − 1, and σ_V = 0 beyond it), fewer, one active context, idle
    contexts, constant frequencies (UP.2 (3) with equality), spread frequencies and peaked rows."""
    small = min(V, 16)
    rows = [
        Gradient(12, small, seed=1, idle=0, spread=5, index=1),
        Gradient(small + 3, small, seed=2, idle=2, spread=5, index=1),
        Gradient(small + 3, small, seed=2, idle=2, spread=5, index=small),
        Gradient(5, small, seed=3, idle=4, spread=5, index=1),
        Gradient(8, small, seed=4, idle=0, spread=1, index=min(2, small)),
        Gradient(10, small, seed=5, idle=3, scale=8.0, spread=20, index=min(3, small)),
    ]
    if V > 16:
        rows.append(Gradient(20, V, seed=6, idle=2, spread=5, index=1))
    return rows


def random_gradients(V: int, n: int, seed: int) -> list[Gradient]:
    """``n`` drawn logit gradients at vocabulary size V (capped at 16), seeded NumPy draws."""
    V, rng = min(V, 16), np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        contexts = int(rng.integers(1, 25))
        idle = int(rng.integers(0, contexts))
        cases.append(
            Gradient(
                contexts=contexts,
                V=V,
                seed=int(rng.integers(2**16)),
                idle=idle,
                scale=float(rng.choice([0.5, 1.0, 4.0, 16.0])),
                spread=int(rng.choice([1, 2, 5, 20])),
                observed=int(rng.integers(1, 5)),
                index=int(rng.integers(1, min(contexts - idle, V) + 1)),
            )
        )
    return cases


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


GRADIENT_BOUNDARY: dict[str, Callable[[Gradient], bool]] = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "one active context": lambda c: c.contexts - c.idle == 1,
    "idle contexts (f_c = 0)": lambda c: c.idle > 0,
    "C₊ ≥ V − 1: the kernel vector caps the rank": lambda c: c.contexts - c.idle >= c.V - 1,
    "constant frequencies (UP.2 (3) with equality)": lambda c: c.spread == 1,
    "σ_i beyond the rank (i > min(C₊, V − 1))": lambda c: c.index > min(c.contexts - c.idle, c.V - 1),
    "peaked rows (scale ≥ 8)": lambda c: c.scale >= 8,
}


# --------------------------------------------------------------------------- a step as the backend built it


@dataclass(frozen=True)
class Built(toolkit.Built):
    """A step in a backend: H, W, G rounded to its dtype and η as a float."""

    H: Any
    W: Any
    G: Any
    eta: float


def step(case: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    """The step's matrices (H, W, G) and its step size η = p/q."""
    H, W, G = up.construct_step(case.contexts, case.V, case.D, case.seed, integers=case.integers)
    return H, W, G, Fraction(case.eta_num, case.eta_den)


def built_step(case: Step, backend: Backend | None = None) -> Built:
    """The case's matrices in the backend's namespace, dtype and device (NumPy float64 by default)."""
    backend = numpy_float64() if backend is None else backend
    H, W, G, eta = step(case)
    H, W, G = (backend.asarray(m) for m in (H, W, G))
    return Built(backend, H, W, G, float(eta))


def _step_case(ctx: Context) -> Step:
    if not isinstance(ctx.case, Step):
        raise InputError(f"{ctx.case.KIND}: this quantity reads a gradient step (updates' step cases)")
    return ctx.case


def step_in(ctx: Context) -> Built:
    """The step built once per context, in its backend and dtype (every quantity of the context reads it)."""
    return ctx.once("step", lambda: built_step(_step_case(ctx), ctx.backend))


def sizes(case: Step) -> tuple[int, int]:
    """(n, r): n = min(C, V), the order of G's smaller Gram matrix, and r = min(2D, n)."""
    n = min(case.contexts, case.V)
    return n, min(2 * case.D, n)


def truncation_rank(case: Step, kind: DeltaKind) -> int:
    """The rank of a truncated candidate: 2D (capped by min(C, V)), or D for the ``rank-D-svd`` one."""
    n = min(case.contexts, case.V)
    return min(case.D if kind == "rank-D-svd" else 2 * case.D, n)


def random_factors(ctx: Context) -> tuple[Any, Any]:
    """The seeded Gaussian factors L (C x r) and R (r x V) of the ``random-rank`` candidate, in the backend."""
    case, b = ctx.case, step_in(ctx)
    rng = np.random.default_rng(case.seed + 1)
    rank = sizes(case)[1]
    left, right = rng.standard_normal((case.contexts, rank)), rng.standard_normal((rank, case.V))
    return ctx.once("factors", lambda: (b.backend.asarray(left), b.backend.asarray(right)))


def near_svd_perturbation(case: Step, n: int) -> np.ndarray:
    """The seeded Gaussian n x n matrix E of the ``near-truncated-svd`` candidate (n = min(C, V))."""
    return np.random.default_rng(case.seed + 2).standard_normal((n, n))


def perturbation(ctx: Context) -> Any:
    """E, in the backend."""
    case = ctx.case
    return ctx.once("E", lambda: step_in(ctx).backend.asarray(near_svd_perturbation(case, sizes(case)[0])))


# --------------------------------------------------------------------------- float routes: the error model


def frobenius(A: Any) -> float:
    """‖A‖_F, computed in A's namespace."""
    return float(array_api_compat.array_namespace(A).linalg.vector_norm(A))


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


def update_error(B: Any, D: int, u: float) -> float:
    """γ_n‖B‖_F with n = C + V + 2D + 10 at unit roundoff u: a Frobenius bound on the distance from the exact
    update (η = p/q) to the computed update, and to the computed product L Rᵀ. Each entry is a product of
    depth at most C + V + 2D plus a few scalings, additions and the rounding of B; η rounded to the dtype
    moves the update by at most 2u B entrywise (its derivative in η is bounded by B/|η| twice over)."""
    C, V = B.shape
    return tolerance.gamma(C + V + 2 * D + 10, u) * frobenius(B)


def svd_frobenius_error(shape: tuple[int, int], u: float, sigma_1: float) -> float:
    """A Frobenius bound on the SVD's backward error E (the computed singular values are those of G + E):
    √min(m, n) times the 2-norm bound :func:`rankwall.checks.engine.tolerance.svd_rank_margin`, with σ_1 read from
    the computed σ̂_1 (‖G‖₂ ≤ σ̂_1/(1 − γ√min(m, n)))."""
    margin = tolerance.svd_rank_margin(shape, u, 0.0, 1.0)
    return min(shape) ** 0.5 * margin * sigma_1 / (1 - margin)


def svd_value_error(shape: tuple[int, int], u: float, sigma_1: float) -> float:
    """Weyl: each computed singular value is within ‖E‖₂ of the exact one (the 2-norm bound of
    :func:`rankwall.checks.engine.tolerance.svd_rank_margin`, σ_1 read from σ̂_1 as in :func:`svd_frobenius_error`)."""
    margin = tolerance.svd_rank_margin(shape, u, 0.0, 1.0)
    return margin * sigma_1 / (1 - margin)


#: The bound on an error is itself computed in float64: a few roundings, pushed outward.
OUTWARD = 1 + 16 * U64


def rank_closeness(sigma: np.ndarray, bound: int) -> float:
    """How near "rank ≤ bound" comes to failing, for the search's ``target()``: log10 σ_{b+1}/σ_1, the
    relative size of the first singular value the bound excludes (0 when it is as large as the first;
    -400 when the matrix has no (b+1)-th singular value, or is zero)."""
    if bound < 0 or bound >= len(sigma) or sigma[0] <= 0:
        return 0.0 if bound < 0 else -400.0
    return max(math.log10(max(float(sigma[bound]), 1e-300) / float(sigma[0])), -400.0)


def float_update(ctx: Context, kind: str) -> tuple[Any, float, Any, Any]:
    """(the update computed in the backend, a Frobenius bound on its distance from the exact update, and the
    computed factors L, R of :func:`factorization`)."""

    def compute() -> tuple[Any, float, Any, Any]:
        b = step_in(ctx)
        call = up.first_order_update if kind == "first-order" else up.exact_step
        L, R, B = factorization(b.H, b.W, b.G, b.eta, kind)
        return call(b.H, b.W, b.G, b.eta), update_error(B, ctx.case.D, b.u), L, R

    return ctx.once(("update", kind), compute)


def float_singular_values(ctx: Context) -> np.ndarray:
    """The singular values of G computed in the backend (float64 NumPy, descending)."""
    return ctx.once("sigma", lambda: singular_values(step_in(ctx).G))


def measured_tail(ctx: Context, r: int) -> Measured:
    """(Σ_{i>r} σ̂_i²)^{1/2} from the backend's SVD of G: within Mirsky's ‖E‖_F of the exact tail
    (:func:`svd_frobenius_error`), plus the float64 norm's rounding; exactly 0 beyond the shape."""
    sigma, b = float_singular_values(ctx), step_in(ctx)
    if r >= len(sigma):
        return Measured(0.0, 0.0)
    value = float(np.linalg.norm(sigma[r:]))
    error = svd_frobenius_error(tuple(b.G.shape), b.u, float(sigma[0])) + tolerance.gamma(len(sigma) + 2, U64) * value
    return Measured(value, error * OUTWARD)


def residual_measurement(delta: Any, error: float, G: Any, u: float) -> Measured:
    """min_c ‖cΔ̂ − G‖_F of the computed candidate (:func:`rankwall.theory.updates.residual`), within a bound
    of the exact candidate's residual: with g = vec G, the residual is ‖g‖ sin θ for θ the angle between g
    and the line of Δ, and Δ̂, within ``error`` of Δ, turns that line by ψ with sin ψ ≤ error/‖Δ̂‖, moving the
    residual by at most ‖g‖ sin ψ; the computed best scale, its product and the norm add γ_{N+4} terms
    (N = C·V entries), and entries below the normal range their absolute loss."""
    N = G.shape[0] * G.shape[1]
    value = up.residual(delta, G)
    norm_g = frobenius(G) * (1 + tolerance.gamma(N + 2, u))
    norm_d = frobenius(delta) * (1 - tolerance.gamma(N + 2, u))
    turn = 1.0 if norm_d <= error else min(1.0, error / norm_d)
    tiny = tolerance.smallest_normal(G.dtype)
    bound = norm_g * (turn + 8 * tolerance.gamma(N + 4, u)) + tolerance.gamma(N + 2, u) * value + 4 * N * tiny
    return Measured(value, bound * OUTWARD)


def float_candidate(ctx: Context) -> tuple[Any, float]:
    """(Δ̂, e): a rational candidate computed in the backend and a Frobenius bound on its distance from the
    exact Δ (the updates: :func:`update_error`; L R: γ_{r+2}‖|L||R|‖_F; (I + εE)G: γ_{n+3}(‖G‖ + ε‖|E||G|‖))."""
    case, b = _step_case(ctx), step_in(ctx)
    xp = array_api_compat.array_namespace(b.G)
    n, r = sizes(case)
    if case.delta in ("first-order", "exact-step"):
        matrix, error = float_update(ctx, case.delta)[:2]
        return matrix, error
    if case.delta == "random-rank":
        L, R = random_factors(ctx)
        return L @ R, tolerance.gamma(r + 2, b.u) * frobenius(xp.abs(L) @ xp.abs(R))
    if case.delta == "near-truncated-svd":
        E = perturbation(ctx)
        wide = case.contexts <= case.V
        moved = b.G + NEAR_SVD_EPSILON * (E @ b.G if wide else b.G @ E)
        spread = xp.abs(E) @ xp.abs(b.G) if wide else xp.abs(b.G) @ xp.abs(E)
        return moved, tolerance.gamma(n + 3, b.u) * (frobenius(b.G) + NEAR_SVD_EPSILON * frobenius(spread))
    return b.G, 0.0  # the truncated SVD of rank min(C, V) is G


def float_near_truncation(ctx: Context, r: int) -> Any:
    """The moved truncation (P̂ + εP̂EP̂)G from the backend's SVD (P̂ its top r singular vectors' projector):
    a float value with no bound on its distance from the ideal."""
    case, b = ctx.case, step_in(ctx)
    xp = array_api_compat.array_namespace(b.G)
    left, _, right = xp.linalg.svd(b.G, full_matrices=False)
    wide = case.contexts <= case.V
    basis = left[:, :r] if wide else right[:r, :].T
    P = basis @ basis.T
    moved = P + NEAR_SVD_EPSILON * (P @ perturbation(ctx) @ P)
    return moved @ b.G if wide else b.G @ moved


# --------------------------------------------------------------------------- exact routes: a step read exactly


@dataclass(frozen=True)
class ExactMatrix:
    """A matrix of dyadic rationals held exactly: ``integers`` (python-flint ``fmpz_mat``) times
    2^``exponent``. A float array of any backend is one, read exactly."""

    integers: Any
    exponent: int

    @classmethod
    def of(cls, X: Any) -> ExactMatrix:
        array = float64_copy(X)
        rows, columns = array.shape
        dyadic = exact_vectors.Dyadic.of(array.ravel())
        integers = [int(v) for v in dyadic.integers]
        shift = min(((v & -v).bit_length() - 1 for v in integers if v), default=0)  # common factors of 2
        return cls(flint.fmpz_mat(rows, columns, [v >> shift for v in integers]), dyadic.exponent + shift)

    @property
    def T(self) -> ExactMatrix:  # NumPy's spelling
        return ExactMatrix(self.integers.transpose(), self.exponent)

    def __matmul__(self, other: ExactMatrix) -> ExactMatrix:
        return ExactMatrix(self.integers * other.integers, self.exponent + other.exponent)

    def times(self, k: int) -> ExactMatrix:
        return ExactMatrix(k * self.integers, self.exponent)

    def shifted(self, k: int) -> ExactMatrix:
        """Times 2^k."""
        return ExactMatrix(self.integers, self.exponent + k)

    def __add__(self, other: ExactMatrix) -> ExactMatrix:
        low = min(self.exponent, other.exponent)
        return ExactMatrix(
            self.integers * 2 ** (self.exponent - low) + other.integers * 2 ** (other.exponent - low), low
        )

    def __sub__(self, other: ExactMatrix) -> ExactMatrix:
        return self + other.times(-1)

    def values(self) -> np.ndarray:
        """The integers as a flat object array of Python ints."""
        return np.array([int(x) for x in self.integers.entries()], dtype=object)


def integer_rank(M: Any) -> tuple[int, str]:
    """The rank of an integer matrix (``fmpz_mat``) over the rationals: full rank mod a prime settles it,
    else a fraction-free elimination over the integers."""
    full = min(M.nrows(), M.ncols())
    if full == 0:
        return 0, "exact rank (an empty matrix)"
    if flint.nmod_mat(M, exact.RANK_PRIME).rank() == full:
        return full, "exact rank (full rank mod p)"
    return M.rank(), "exact rank (fraction-free elimination)"


def exact_inputs(ctx: Context) -> tuple[ExactMatrix, ExactMatrix, ExactMatrix]:
    """H, W, G as the backend built them, read exactly."""
    b = step_in(ctx)
    return ctx.once("exact inputs", lambda: tuple(ExactMatrix.of(m) for m in (b.H, b.W, b.G)))


def exact_update(ctx: Context, kind: str) -> ExactMatrix:
    """A nonzero multiple of the exact update, as integers over a power of two (its rank and its residual
    are those of the update): GWWᵀ + HHᵀG, the first-order update over −η (zero for η = 0), or q² times
    the exact step, (qH − pGW)(qW − pGᵀH)ᵀ − q²HWᵀ, for η = p/q."""

    def compute() -> ExactMatrix:
        H, W, G = exact_inputs(ctx)
        p, q = ctx.case.eta_num, ctx.case.eta_den
        if kind == "first-order":
            update = G @ W @ W.T + H @ (H.T @ G)
            return update if p != 0 else update.times(0)
        left = H.times(q) - (G @ W).times(p)
        right = W.times(q) - (G.T @ H).times(p)
        return left @ right.T - (H @ W.T).times(q * q)

    return ctx.once(("exact update", kind), compute)


def exact_update_rank(ctx: Context, kind: str) -> RankInterval:
    """The exact rank over the rationals of the update (:func:`exact_update`)."""

    def compute() -> RankInterval:
        rank, how = integer_rank(exact_update(ctx, kind).integers)
        return RankInterval(rank, rank, how, how, exact=True, certificate={"rank": rank})

    return ctx.once(("exact rank", kind), compute)


def exact_candidate(ctx: Context, kind: DeltaKind) -> ExactMatrix | None:
    """Δ exactly where it is rational (a multiple of it: the residual does not see the scale): the updates,
    L R, and the truncations of rank min(C, V) (G, or G + εEG); ``None`` for a truncation below the shape."""
    case = _step_case(ctx)
    G = exact_inputs(ctx)[2]
    if kind in ("first-order", "exact-step"):
        return exact_update(ctx, kind)
    if kind == "random-rank":
        L, R = (ExactMatrix.of(m) for m in random_factors(ctx))
        return L @ R
    if truncation_rank(case, kind) < sizes(case)[0]:
        return None
    if kind == "near-truncated-svd":
        E = ExactMatrix.of(perturbation(ctx))
        wide = case.contexts <= case.V
        return G + (E @ G if wide else G @ E).shifted(NEAR_SVD_EXPONENT)
    return G


def _power_of_two(k: int) -> Any:
    return flint.fmpq(2**k) if k >= 0 else flint.fmpq(1, 2**-k)


def rational_residual_square(ctx: Context, delta: ExactMatrix) -> Any:
    """min_c ‖cΔ − G‖_F² = ‖G‖² − ⟨Δ, G⟩²/‖Δ‖² (‖G‖² for Δ = 0), an exact rational."""
    G = exact_inputs(ctx)[2]
    d, g = delta.values(), G.values()
    total, inner, size = int((g * g).sum()), int((d * g).sum()), int((d * d).sum())
    integer = flint.fmpq(total) - (flint.fmpq(inner * inner, size) if size else 0)
    return integer * _power_of_two(2 * G.exponent)


# --------------------------------------------------------------------------- exact routes: G's spectrum


@dataclass(frozen=True)
class Spectrum:
    """The exact spectrum of M (G's smaller Gram matrix), as far as the claims need it: ‖G‖² = tr M (a
    rational), rank G (exact), and enclosures of λ_1 ≥ … ≥ λ_ρ (ρ = rank G; λ_i = 0 beyond it), the first
    ρ − 1 of them the atoms of ``ring``'s forms."""

    total: Any
    rank: int
    eigenvalues: tuple[Any, ...]
    ring: Any

    def partial_sum(self, k: int) -> Real:
        """S_k = λ_1 + … + λ_k: 0 for k ≤ 0, ‖G‖² for k ≥ ρ, else a form in the atoms."""
        if k <= 0:
            return Real.of(0)
        if k >= self.rank:
            return Real.of(self.total)
        value = sum(self.eigenvalues[:k], flint.arb(0))
        return Real(value, Form(sum(self.ring.gens()[:k]), self._one, self.eigenvalues[: self.rank - 1]))

    def eigenvalue(self, i: int) -> Real:
        """λ_i (from 1): an atom below ρ, ‖G‖² − S_{ρ−1} at ρ, exactly 0 beyond."""
        if i > self.rank:
            return Real.of(0)
        return self.partial_sum(i) - self.partial_sum(i - 1)

    @property
    def _one(self) -> Any:
        return self.ring.from_dict({(0,) * self.ring.nvars(): 1})


def gram(G: ExactMatrix) -> tuple[Any, int]:
    """(N, e): M = N·2^e for G's smaller Gram matrix, GGᵀ (C ≤ V) or GᵀG."""
    N = G.integers * G.integers.transpose() if G.integers.nrows() <= G.integers.ncols() else G.T.integers * G.integers
    return N, 2 * G.exponent


def sorted_enclosures(values: list[Any]) -> list[Any]:
    """Enclosures of the i-th largest of the real numbers that ``values`` (balls, one per number) enclose:
    between the i-th largest lower end and the i-th largest upper end, whatever the order of the balls;
    nonnegative (they are eigenvalues of a positive semidefinite matrix)."""
    lows = sorted((v.lower() for v in values), key=lambda x: x.mid(), reverse=True)
    highs = sorted((v.upper() for v in values), key=lambda x: x.mid(), reverse=True)
    return [flint.arb(0).union(high) if not low > 0 else low.union(high) for low, high in zip(lows, highs, strict=True)]


def certified_eigenvalues(N: Any, scale: Any, trace: Any) -> list[Any]:
    """The eigenvalues of the symmetric positive semidefinite integer matrix N times ``scale``, largest first,
    each enclosed from python-flint's certified eigensolver (clusters allowed); where it cannot enclose them,
    [0, tr] for each."""
    try:
        values = [e.real for e in flint.acb_mat(flint.arb_mat(N)).eig(multiple=True)]
    except ValueError:
        values = [flint.arb(0).union(flint.arb(trace))] * N.nrows()
    return [x * scale for x in sorted_enclosures(values)]


#: Spectra already computed, by the bytes of G as built and the working precision.
_SPECTRA: dict[Hashable, Spectrum] = {}


def spectrum(ctx: Context) -> Spectrum:
    """G's :class:`Spectrum` at the working precision (computed once per built G)."""
    key = ("spectrum", float64_copy(step_in(ctx).G).tobytes(), flint.ctx.prec)
    return ctx.once(key, lambda: _remembered(_SPECTRA, key, lambda: _spectrum(exact_inputs(ctx)[2])))


def _remembered(store: dict[Hashable, Any], key: Hashable, compute: Callable[[], Any]) -> Any:
    if key not in store:
        if len(store) >= 512:
            store.clear()
        store[key] = compute()
    return store[key]


def _spectrum(G: ExactMatrix) -> Spectrum:
    N, e = gram(G)
    trace = N.trace() if hasattr(N, "trace") else sum(N[i, i] for i in range(N.nrows()))
    total = flint.fmpq(int(trace)) * _power_of_two(e)
    rank, _ = integer_rank(G.integers)
    if rank == 0:
        return Spectrum(total, 0, (), None)
    values = certified_eigenvalues(N, flint.arb(_power_of_two(e)), int(trace))[:rank]
    ring = flint.fmpq_mpoly_ctx.get(tuple(f"l{i}" for i in range(1, rank)), "lex") if rank >= 2 else None
    return Spectrum(total, rank, tuple(values), ring)


def spectral_projector(N: Any, r: int) -> Any | None:
    """The orthogonal projector (real balls) on the top-r eigenvectors of the symmetric matrix N,
    R(RᴴR)⁻¹Rᴴ for R the certified eigenvectors of the r largest eigenvalues; ``None`` where they cannot be
    isolated or their order is not certain (ties)."""
    n = N.nrows()
    try:
        values, vectors = flint.acb_mat(flint.arb_mat(N)).eig(right=True)
        order = sorted(range(n), key=lambda i: values[i].real.mid(), reverse=True)
        top, rest = order[:r], order[r:]
        if rest and not min(values[i].real.lower() for i in top) > max(values[i].real.upper() for i in rest):
            return None
        R = flint.acb_mat([[vectors[i, j] for j in top] for i in range(n)])
        Rh = R.conjugate().transpose()
        return (R * (Rh * R).inv() * Rh).real
    except (ValueError, ZeroDivisionError):
        return None


def near_residual_square(ctx: Context, r: int) -> Real:
    """‖G‖² − ⟨Δ, G⟩²/‖Δ‖² for Δ = (P_r + εP_rEP_r)G (G(...) for C > V): ⟨Δ, G⟩ = tr(P_ε M) and ‖Δ‖² =
    tr(P_εᵀP_ε M) (tr(P_εP_εᵀM)), in balls from P_r's certified eigenvectors; an unbounded ball where they
    cannot be isolated."""
    case, G = ctx.case, exact_inputs(ctx)[2]
    N, e = gram(G)
    P = spectral_projector(N, r)
    if P is None:
        return Real(flint.arb(0, math.inf))
    E = ExactMatrix.of(perturbation(ctx))
    E_ball = flint.arb_mat(E.integers) * flint.arb(_power_of_two(E.exponent))
    moved = P + flint.arb(_power_of_two(NEAR_SVD_EXPONENT)) * (P * E_ball * P)
    M = flint.arb_mat(N) * flint.arb(_power_of_two(e))
    inner = (moved * M).trace()
    wide = case.contexts <= case.V
    size = ((moved.transpose() * moved if wide else moved * moved.transpose()) * M).trace()
    return Real(flint.arb(spectrum(ctx).total) - inner * inner / size)


def exact_residual(ctx: Context, kind: DeltaKind) -> Real:
    """min_c ‖cΔ − G‖_F on the exact instance (see the module docstring)."""
    case = _step_case(ctx)
    rank = truncation_rank(case, kind) if kind in TRUNCATIONS else 0
    if kind in TRUNCATIONS and rank < sizes(case)[0]:
        if kind == "near-truncated-svd":
            return near_residual_square(ctx, rank).sqrt()
        spec = spectrum(ctx)
        return (Real.of(spec.total) - spec.partial_sum(rank)).sqrt()
    delta = exact_candidate(ctx, kind)
    return Real.of(rational_residual_square(ctx, delta)).sqrt()


def exact_tail(ctx: Context, r: int) -> Real:
    """(Σ_{i>r} λ_i)^{1/2} = (‖G‖² − S_r)^{1/2}."""
    spec = spectrum(ctx)
    return (Real.of(spec.total) - spec.partial_sum(r)).sqrt()


# --------------------------------------------------------------------------- a logit gradient


@dataclass(frozen=True)
class BuiltGradient(toolkit.Built):
    """A logit gradient in a backend: P's rows rounded to its dtype, Ñ and f, G = diag(f)(P − Ñ) and
    X = (P − Ñ)₊ computed there, and the float bounds on their distance from the exact G and X."""

    raw: np.ndarray
    counts: np.ndarray
    f: np.ndarray
    G: Any
    X: Any
    G_error: float
    X_error: float


def _gradient_case(ctx: Context) -> Gradient:
    case = ctx.case
    if not isinstance(case, Gradient):
        raise InputError(f"{case.KIND}: this quantity reads a logit gradient (updates.logit_gradients)")
    if not 0 <= case.idle < case.contexts:
        raise InputError(f"idle: {case.idle} is out of range (need 0 <= idle < contexts = {case.contexts})")
    active = case.contexts - case.idle
    if not 1 <= case.index <= min(active, case.V):
        raise InputError(f"index: {case.index} is out of range (need 1 <= index <= min(C₊, V) = {min(active, case.V)})")
    return case


def gradient_error(raw: np.ndarray, normalised: np.ndarray, weights: np.ndarray, u: float, tiny: float) -> float:
    """A Frobenius bound on |diag(w)(P − Ñ) computed − exact|: the built row p sums to s with
    |s − 1| ≤ γ_{V+1} + Vη (a float64 softmax, then the dtype's rounding; η its smallest normal number, for
    entries flushed in rounding), so |p − p/s| ≤ p|s − 1|/s; Ñ, the subtraction and the product round once
    each. In all γ_{V+6}(p + ñ) + 2Vη per entry, times w, and 2ηw for subnormal results."""
    C, V = raw.shape
    rho = tolerance.gamma(V + 6, u) + 2 * V * tiny
    magnitude = weights[:, None] * (raw + normalised)
    bound = rho * float(np.linalg.norm(magnitude)) + 2 * tiny * float(np.linalg.norm(weights)) * V**0.5
    return bound * (1 + tolerance.gamma(C * V + 4, U64)) * OUTWARD


def build_gradient(case: Gradient, backend: Backend) -> BuiltGradient:
    """The case in a backend: P rounded to its dtype, G and X computed there (the first C₊ rows are the
    active ones: the constructor puts the idle contexts last)."""
    P, counts, f = up.construct_logit_gradient(
        case.contexts, case.V, case.seed, idle=case.idle, scale=case.scale, spread=case.spread, observed=case.observed
    )
    active = case.contexts - case.idle
    P_b = backend.asarray(P)
    normalised = counts / counts.sum(axis=1, keepdims=True)
    difference = P_b - backend.asarray(normalised)
    G = backend.asarray(f)[:, None] * difference
    X = difference[:active, :]
    raw = float64_copy(P_b)
    u = tolerance.unit_roundoff(backend.dtype)
    tiny = tolerance.smallest_normal(backend.dtype)
    weights = f.astype(np.float64)
    G_error = gradient_error(raw, normalised, weights, u, tiny)
    X_error = gradient_error(raw[:active], normalised[:active], np.ones(active), u, tiny)
    return BuiltGradient(backend, raw, counts, f, G, X, G_error, X_error)


def gradient_in(ctx: Context) -> BuiltGradient:
    """The logit gradient built once per context."""
    return ctx.once("gradient", lambda: build_gradient(_gradient_case(ctx), ctx.backend))


@dataclass(frozen=True)
class ExactGradient:
    """The exact logit gradient on its active rows: K (integers, ``fmpz_mat``) with row c of (P − Ñ)₊ equal
    to K_c/(A_c n_c) (``scales``, rationals), the active frequencies, rank G = rank K, and the structure the
    float rank's upper end reads: the nonzero rows, and whether every row sums to 0 exactly."""

    K: Any
    scales: list[Any]
    frequencies: list[int]
    rank: int
    how: str
    nonzero_rows: int
    kernel: bool


def exact_gradient(ctx: Context) -> ExactGradient:
    def compute() -> ExactGradient:
        built, case = gradient_in(ctx), ctx.case
        active = case.contexts - case.idle
        a = exact_vectors.Dyadic.of(built.raw[:active].ravel()).integers.reshape(active, case.V)
        A = a.sum(axis=1)
        counts = built.counts[:active].astype(object)
        n = counts.sum(axis=1)
        K = n[:, None] * a - A[:, None] * counts
        sums = K.sum(axis=1)
        nonzero = int(sum(1 for row in K if any(x != 0 for x in row)))
        K_mat = flint.fmpz_mat(active, case.V, [int(x) for x in K.ravel()])
        rank, how = integer_rank(K_mat)
        scales = [flint.fmpq(1, int(A[c]) * int(n[c])) for c in range(active)]
        frequencies = [int(x) for x in built.f[:active]]
        return ExactGradient(K_mat, scales, frequencies, rank, how, nonzero, all(s == 0 for s in sums))

    return ctx.once("exact gradient", compute)


def gradient_matrix(exact_g: ExactGradient, weighted: bool) -> Any:
    """G₊ (``weighted``) or X as an exact rational matrix (``fmpq_mat``)."""
    rows, columns = exact_g.K.nrows(), exact_g.K.ncols()
    entries = []
    for c in range(rows):
        factor = exact_g.scales[c] * (exact_g.frequencies[c] if weighted else 1)
        entries += [factor * exact_g.K[c, v] for v in range(columns)]
    return flint.fmpq_mat(rows, columns, entries)


def _gram_of(matrix: Any) -> Any:
    return matrix * matrix.transpose() if matrix.nrows() <= matrix.ncols() else matrix.transpose() * matrix


def constant_frequency(exact_g: ExactGradient) -> int | None:
    """The frequency shared by every active context, or ``None`` where they differ."""
    return exact_g.frequencies[0] if len(set(exact_g.frequencies)) == 1 else None


def exact_singular_value(ctx: Context, weighted: bool) -> Real:
    """σ_i(G) (``weighted``) or σ_i(X) for the case's i: 0 beyond the exact rank; else the square root of the
    i-th eigenvalue of the exact Gram matrix, enclosed by the certified eigensolver. σ_i(X) is the atom of
    a one-atom form, and σ_i(G) = f·σ_i(X) where f is constant on the active contexts (G₊ = fX)."""

    def compute() -> Real:
        exact_g, i = exact_gradient(ctx), ctx.case.index
        if i > exact_g.rank:
            return Real.of(0)
        f = constant_frequency(exact_g)
        if weighted and f is not None:
            return Real.of(f) * exact_singular_value(ctx, weighted=False)
        gram_matrix = _gram_of(gradient_matrix(exact_g, weighted))
        numerators, denominator = gram_matrix.numer_denom()
        scale = flint.arb(flint.fmpq(1, int(denominator)))
        trace = sum(int(numerators[j, j]) for j in range(numerators.nrows()))
        value = certified_eigenvalues(numerators, scale, trace)[i - 1]
        root = value.sqrt() if value > 0 else flint.arb(0).union(value.upper().sqrt())
        if weighted:
            return Real(root)
        ring = flint.fmpq_mpoly_ctx.get(("s",), "lex")
        return Real(root, Form(ring.gens()[0], ring.from_dict({(0,): 1}), (root,)))

    return ctx.once(("singular value", weighted, flint.ctx.prec), compute)


# --------------------------------------------------------------------------- quantities: measured


def _pinned(n: int) -> RankInterval:
    return RankInterval(n, n, "the case", "the case", exact=True)


def _measure_update_rank(ctx: Context, kind: str) -> RankInterval:
    """rank of the update, computed in the backend: exact for an integer step; else lo from the singular
    values above a Weyl margin, hi = min(2D, C, V) where the computed update and the computed product
    L Rᵀ agree within twice their bound (each is within it of the exact update), else the shape. The
    certificate carries ``closeness`` (:func:`rank_closeness` against 2D), a continuous target for the search."""
    case, b = _step_case(ctx), step_in(ctx)
    matrix, error, L, R = float_update(ctx, kind)
    if case.integers:
        interval = exact_update_rank(ctx, kind)
        closeness = rank_closeness(singular_values(matrix), 2 * case.D)
        return replace(interval, certificate={**interval.certificate, "closeness": closeness})
    residual = frobenius(matrix - L @ R.T)
    factored = residual <= 2 * error
    shape = min(matrix.shape)
    hi = min(2 * case.D, shape) if factored else shape
    lo, margin, sigma = exact.weyl_rank_lower_bound(matrix, b.u, entry_error=error)
    upper = f"the factorization through {2 * case.D} columns" if factored else "the shape (residual beyond its bound)"
    certificate = {
        "factorization_residual": residual,
        "residual_bound": 2 * error,
        "weyl_margin": margin,
        "closeness": rank_closeness(sigma, 2 * case.D),
    }
    return RankInterval(lo, hi, f"SVD + Weyl ({b.label})", upper, exact=False, certificate=certificate)


def _float_candidate(ctx: Context, kind: DeltaKind) -> tuple[Any, float]:
    return float_candidate(ctx) if kind == ctx.case.delta else (step_in(ctx).G, 0.0)


def _measure_residual(ctx: Context, kind: DeltaKind | None = None) -> Measured:
    """min_c ‖cΔ − G‖_F: a rational candidate's by :func:`residual_measurement`; a truncation's by the lemma,
    as the float tail beyond its rank; the moved truncation's (below the shape) with no bound."""
    case, b = _step_case(ctx), step_in(ctx)
    kind = kind or case.delta
    rank = truncation_rank(case, kind) if kind in TRUNCATIONS else 0
    if kind in TRUNCATIONS and rank < sizes(case)[0]:
        if kind == "near-truncated-svd":
            return Measured(up.residual(float_near_truncation(ctx, rank), b.G), math.inf)
        return measured_tail(ctx, rank)
    delta, error = _float_candidate(ctx, kind)
    return residual_measurement(delta, error, b.G, b.u)


def _measure_sigma(ctx: Context, k: int) -> Measured:
    """σ̂_k(G) within Weyl's bound (0 exactly beyond the shape)."""
    sigma, b = float_singular_values(ctx), step_in(ctx)
    if k > len(sigma):
        return Measured(0.0, 0.0)
    return Measured(float(sigma[k - 1]), svd_value_error(tuple(b.G.shape), b.u, float(sigma[0])) * OUTWARD)


def _measure_gradient_norm(ctx: Context) -> Measured:
    b = step_in(ctx)
    N = b.G.shape[0] * b.G.shape[1]
    value = frobenius(b.G)
    error = tolerance.gamma(N + 2, b.u) * value + N * tolerance.smallest_normal(b.G.dtype)
    return Measured(value, error * OUTWARD)


def _measure_gradient_rank(ctx: Context) -> RankInterval:
    """rank G: lo from G's singular values in the backend above a Weyl margin (its entry error and the SVD's);
    hi from the exact instance's structure, counted exactly: its nonzero rows, less one where every active
    row sums to 0 (the kernel vector 1)."""
    built, exact_g, case = gradient_in(ctx), exact_gradient(ctx), ctx.case
    lo, margin, sigma = exact.weyl_rank_lower_bound(built.G, built.u, entry_error=built.G_error)
    hi = min(exact_g.nonzero_rows, case.V - 1 if exact_g.kernel else case.V)
    upper = "the nonzero rows and the kernel vector 1, counted exactly" if exact_g.kernel else "the nonzero rows"
    bound = min(case.contexts - case.idle, case.V - 1)
    certificate = {"weyl_margin": margin, "closeness": rank_closeness(sigma, bound)}
    return RankInterval(lo, hi, f"SVD + Weyl ({built.label})", upper, exact=False, certificate=certificate)


def _measure_singular_value(ctx: Context, weighted: bool) -> Measured:
    """σ̂_i of G (``weighted``) or X in the backend: within their entry error plus the SVD's (Weyl)."""
    built, i = gradient_in(ctx), ctx.case.index
    matrix, error = (built.G, built.G_error) if weighted else (built.X, built.X_error)
    sigma = ctx.once(("sigma", weighted), lambda: singular_values(matrix))
    value_error = svd_value_error(tuple(matrix.shape), built.u, float(sigma[0]))
    return Measured(float(sigma[i - 1]), (error + value_error) * OUTWARD)


def _active_frequencies(ctx: Context) -> np.ndarray:
    case = _gradient_case(ctx)
    return gradient_in(ctx).f[: case.contexts - case.idle]


# --------------------------------------------------------------------------- references
#
# Every quantity the slow, obviously right way on the instance as the backend built it, read exactly, sharing
# no code with the measures and the exact routes: the updates and candidates formed in exact rationals
# (python-flint ``fmpq_mat``) from their formulas, ranked by ``fmpq_mat.rank``; eigenvalues as the real roots
# of the exact Gram matrix's characteristic polynomial (python-flint, at twice the reference precision),
# eigenvectors by inverse iteration at them (arb solves), the truncated SVD formed from them, and residuals
# as Σ (cΔ − G)² entry by entry at the best scale; a logit gradient from Python Fractions (each float row
# normalised exactly). Results are mpmath numbers, or ints and Fractions where exact.


def rationals(X: Any) -> Any:
    """A float array (any backend) read exactly as a python-flint rational matrix."""
    X = float64_copy(X)
    rows, columns = X.shape
    return flint.fmpq_mat(rows, columns, [flint.fmpq(*v.as_integer_ratio()) for v in X.ravel().tolist()])


#: References already computed, by what they read: the case and the bytes of its built arrays.
_REFERENCES: dict[Hashable, Any] = {}


def _reference_key(ctx: Context, what: Hashable, of_G: bool) -> Hashable:
    """What a reference reads: G as built (``of_G``: the spectrum, whatever else the case says), or the
    case and its built arrays."""
    if isinstance(ctx.case, Step):
        b = step_in(ctx)
        arrays = [b.G] if of_G else [b.H, b.W, b.G]
    else:
        arrays = [gradient_in(ctx).raw]
    case = None if of_G else ctx.case
    return (what, case, b"|".join(float64_copy(m).tobytes() for m in arrays), mpmath.mp.prec)


def _cached_reference(ctx: Context, what: Hashable, compute: Callable[[], Any], of_G: bool = False) -> Any:
    return _remembered(_REFERENCES, _reference_key(ctx, what, of_G), compute)


def reference_inputs(ctx: Context) -> tuple[Any, Any, Any, Any]:
    """(H, W, G, η) as exact rationals: the backend's built arrays, and η = p/q."""
    b = step_in(ctx)
    eta = flint.fmpq(ctx.case.eta_num, ctx.case.eta_den)
    return ctx.once("reference inputs", lambda: (rationals(b.H), rationals(b.W), rationals(b.G), eta))


def reference_update(ctx: Context, kind: str) -> Any:
    """−η(GWWᵀ + HHᵀG) or (H − ηGW)(W − ηGᵀH)ᵀ − HWᵀ, in rationals."""
    H, W, G, eta = reference_inputs(ctx)
    if kind == "first-order":
        return -eta * (G * W * W.transpose() + H * H.transpose() * G)
    return (H - eta * G * W) * (W - eta * G.transpose() * H).transpose() - H * W.transpose()


def reference_rank(ctx: Context, kind: str) -> int:
    """The exact rank over Q of the update formed in rationals from its formula."""
    _step_case(ctx)
    return _cached_reference(ctx, ("rank", kind), lambda: int(reference_update(ctx, kind).rank()))


def _reference_bits() -> int:
    return mpmath.mp.prec + 64


def _mpf(x: Any) -> Any:
    """The midpoint of a ball as an mpmath number, exactly."""
    man, exp = x.mid().man_exp()
    return mpmath.mpf((int(man), int(exp)))


def reference_eigenvalues(gram_q: Any) -> list[Any]:
    """The eigenvalues of a symmetric rational matrix, largest first with multiplicity: the real parts of
    the roots of its characteristic polynomial, enclosed at twice the reference precision (balls)."""
    with exact.precision(_reference_bits()):
        roots = gram_q.charpoly().complex_roots()
        values = [x.real for x, m in roots for _ in range(m)]
    return sorted(values, key=lambda x: x.mid(), reverse=True)


def _reference_gram(ctx: Context) -> Any:
    G = reference_inputs(ctx)[2]
    return G * G.transpose() if G.nrows() <= G.ncols() else G.transpose() * G


def reference_spectrum(ctx: Context) -> list[Any]:
    """The eigenvalues of G's smaller Gram matrix (:func:`reference_eigenvalues`)."""
    _step_case(ctx)
    return _cached_reference(ctx, "spectrum", lambda: reference_eigenvalues(_reference_gram(ctx)), of_G=True)


def reference_tail(ctx: Context, r: int) -> Any:
    """(Σ_{i>r} λ_i)^{1/2}, the sum of the smallest eigenvalues; exactly 0 beyond the shape."""
    values = reference_spectrum(ctx)
    if r >= len(values):
        return 0
    return mpmath.sqrt(max(mpmath.fsum(_mpf(x) for x in values[r:]), mpmath.mpf(0)))


def reference_vectors(gram_q: Any, r: int) -> Any:
    """An orthonormal basis (columns, balls at twice the reference precision) of the top-r eigenvectors of a
    symmetric rational matrix: two steps of inverse iteration at each eigenvalue, just beside it, from
    seeded starts (as many as its multiplicity needs), orthonormalised (Gram-Schmidt)."""
    bits = _reference_bits()
    n = gram_q.nrows()
    with exact.precision(bits):
        roots = sorted(
            ((x.real, m) for x, m in gram_q.charpoly().complex_roots()), key=lambda p: p[0].mid(), reverse=True
        )
        A0 = flint.arb_mat(gram_q)
        basis: list[list[Any]] = []
        for root, multiplicity in roots:
            need = min(multiplicity, r - len(basis))
            if need <= 0:
                break
            shift = root.mid() * (1 + flint.arb(2) ** -(bits // 2)) + flint.arb(2) ** -(bits // 2)
            A = A0 - flint.arb_mat(n, n, [shift if i == j else 0 for i in range(n) for j in range(n)])
            start = np.random.default_rng(len(basis)).standard_normal((n, need))
            X = flint.arb_mat(start.tolist())
            for _ in range(2):
                X = A.solve(X, algorithm="approx").mid()
            for j in range(need):
                v = [X[i, j] for i in range(n)]
                for w in basis:
                    dot = sum((a * b for a, b in zip(v, w, strict=True)), flint.arb(0))
                    v = [a - dot * b for a, b in zip(v, w, strict=True)]
                length = sum((a * a for a in v), flint.arb(0)).sqrt()
                basis.append([(a / length).mid() for a in v])
        return flint.arb_mat([[basis[j][i] for j in range(r)] for i in range(n)])


def reference_residual(ctx: Context, kind: DeltaKind) -> Any:
    """min_c ‖cΔ − G‖_F as Σ (cΔ − G)² at c = ⟨Δ, G⟩/‖Δ‖², Δ from its definition: in exact rationals where
    it is rational (a Fraction, or its square root in mpmath), else in balls from :func:`reference_vectors`."""
    case = _step_case(ctx)
    return _cached_reference(ctx, ("residual", kind), lambda: _reference_residual(ctx, case, kind))


def _reference_residual(ctx: Context, case: Step, kind: DeltaKind) -> Any:
    G = reference_inputs(ctx)[2]
    n, wide = min(case.contexts, case.V), case.contexts <= case.V
    rank = truncation_rank(case, kind) if kind in TRUNCATIONS else 0
    if kind in TRUNCATIONS and rank < n:
        with exact.precision(_reference_bits()):
            U = _cached_reference(ctx, ("vectors", rank), lambda: reference_vectors(_reference_gram(ctx), rank), True)
            P = U * U.transpose()
            if kind == "near-truncated-svd":
                eps = flint.arb(flint.fmpq(1, 2**-NEAR_SVD_EXPONENT))
                P = P + eps * (P * flint.arb_mat(rationals(perturbation(ctx))) * P)
            Gb = flint.arb_mat(G)
            delta = P * Gb if wide else Gb * P
            pairs = list(zip(delta.entries(), Gb.entries(), strict=True))
            size = sum((d * d for d, _ in pairs), flint.arb(0))
            c = sum((d * g for d, g in pairs), flint.arb(0)) / size
            square = sum(((c * d - g) * (c * d - g) for d, g in pairs), flint.arb(0))
            return mpmath.sqrt(max(_mpf(square), mpmath.mpf(0)))
    if kind in TRUNCATIONS:
        P = flint.fmpq_mat(n, n, [int(i == j) for i in range(n) for j in range(n)])
        if kind == "near-truncated-svd":
            P = P + flint.fmpq(1, 2**-NEAR_SVD_EXPONENT) * rationals(perturbation(ctx))
        delta = P * G if wide else G * P
    elif kind == "random-rank":
        L, R = random_factors(ctx)
        delta = rationals(L) * rationals(R)
    else:
        delta = reference_update(ctx, kind)
    return _rational_residual(delta, G)


def _rational_residual(delta: Any, G: Any) -> Any:
    """Σ (cΔ − G)² at c = ⟨Δ, G⟩/‖Δ‖², exactly: with Δ = A/a and G = B/b over common denominators,
    cΔ_i − G_i = (s A_i − t B_i)/(b t) for s = Σ A_i B_i and t = Σ A_i² (Python integers)."""
    A, _ = delta.numer_denom()
    B, b = G.numer_denom()
    A = np.array([int(x) for x in A.entries()], dtype=object)
    B = np.array([int(x) for x in B.entries()], dtype=object)
    s, t = int((A * B).sum()), int((A * A).sum())
    if t == 0:
        value = Fraction(int((B * B).sum()), int(b) ** 2)
    else:
        terms = s * A - t * B
        value = Fraction(int((terms * terms).sum()), (int(b) * t) ** 2)
    root = _rational_root(value)
    return root if root is not None else mpmath.sqrt(mpmath.mpf(value.numerator) / value.denominator)


def _rational_root(q: Fraction) -> Fraction | None:
    n, d = math.isqrt(q.numerator), math.isqrt(q.denominator)
    return Fraction(n, d) if n * n == q.numerator and d * d == q.denominator else None


def reference_sigma(ctx: Context, k: int) -> Any:
    """σ_k(G) = λ_k^{1/2} (0 beyond the shape)."""
    values = reference_spectrum(ctx)
    return 0 if k > len(values) else mpmath.sqrt(max(_mpf(values[k - 1]), mpmath.mpf(0)))


def reference_gradient_norm(ctx: Context) -> Any:
    G = reference_inputs(ctx)[2]
    square = sum((g * g for g in G.entries()), flint.fmpq(0))
    value = Fraction(int(square.p), int(square.q))
    root = _rational_root(value)
    return root if root is not None else mpmath.sqrt(mpmath.mpf(value.numerator) / value.denominator)


def reference_gradient(ctx: Context) -> tuple[list[list[Fraction]], list[int]]:
    """(the rows of P − Ñ in Fractions, each float row of P normalised exactly; the frequencies f)."""
    built = gradient_in(ctx)
    rows = []
    for p, n in zip(built.raw, built.counts, strict=True):
        exact_p = [Fraction(float(x)) for x in p]
        mass, total = sum(exact_p), int(n.sum())
        rows.append([x / mass - Fraction(int(k), total) for x, k in zip(exact_p, n, strict=True)])
    return rows, [int(x) for x in built.f]


def refined_eigenvalues(gram_q: Any) -> list[Any]:
    """The eigenvalues of a symmetric rational matrix, largest first: each from a float64 eigenvector
    refined by Rayleigh quotient iteration (arb solves at twice the reference precision), accepted where
    their sum and the sum of their squares are tr M and ‖M‖_F², exact rationals, to that precision (no
    eigenvalue lost or found twice); else the roots of the characteristic polynomial
    (:func:`reference_eigenvalues`), exact but slow for the large denominators of a normalised row."""
    n, bits = gram_q.nrows(), _reference_bits()
    start = np.linalg.eigh(np.array([[int(x.p) / int(x.q) for x in row] for row in gram_q.tolist()]))[1]
    with exact.precision(bits):
        M = flint.arb_mat(gram_q)
        values = []
        for j in range(n):
            v = flint.arb_mat([[float(x)] for x in start[:, j]])
            for _ in range(3):
                shift = ((v.transpose() * M * v)[0, 0] / (v.transpose() * v)[0, 0]).mid()
                try:
                    identity = flint.arb_mat(n, n, [shift if i == k else 0 for i in range(n) for k in range(n)])
                    w = (M - identity).solve(v, algorithm="approx")
                except (ValueError, ZeroDivisionError):
                    break
                length = sum((w[i, 0] * w[i, 0] for i in range(n)), flint.arb(0)).sqrt()
                v = flint.arb_mat([[(w[i, 0] / length).mid()] for i in range(n)])
            values.append(((v.transpose() * M * v)[0, 0] / (v.transpose() * v)[0, 0]).mid())
        trace = sum((flint.arb(gram_q[i, i]) for i in range(n)), flint.arb(0))
        squares = sum((flint.arb(x) * flint.arb(x) for x in gram_q.entries()), flint.arb(0))
        scale = squares.sqrt() + 1
        slack = scale * flint.arb(2) ** -(bits // 2)
        found = sum(values, flint.arb(0)), sum((x * x for x in values), flint.arb(0))
        if not (abs(found[0] - trace) < slack and abs(found[1] - squares) < slack * scale):
            return reference_eigenvalues(gram_q)
    return sorted(values, key=lambda x: x.mid(), reverse=True)


def _fraction_matrix(rows: list[list[Fraction]]) -> Any:
    return flint.fmpq_mat([[flint.fmpq(x.numerator, x.denominator) for x in row] for row in rows])


def reference_gradient_rank(ctx: Context) -> int:
    """rank diag(f)(P − Ñ), over Q."""
    _gradient_case(ctx)

    def compute() -> int:
        rows, f = reference_gradient(ctx)
        return int(_fraction_matrix([[w * x for x in row] for row, w in zip(rows, f, strict=True)]).rank())

    return _cached_reference(ctx, "gradient rank", compute)


def reference_singular_value(ctx: Context, weighted: bool) -> Any:
    """σ_i(G) or σ_i(X) from the eigenvalues of the Gram matrix in rationals; 0 beyond the rank."""
    case = _gradient_case(ctx)

    def compute() -> Any:
        rows, f = reference_gradient(ctx)
        active = case.contexts - case.idle
        chosen = [[w * x for x in row] if weighted else row for row, w in zip(rows[:active], f[:active], strict=True)]
        if case.index > reference_gradient_rank(ctx):
            return 0
        matrix = _fraction_matrix(chosen)
        gram_q = matrix * matrix.transpose() if matrix.nrows() <= matrix.ncols() else matrix.transpose() * matrix
        return mpmath.sqrt(max(_mpf(refined_eigenvalues(gram_q)[case.index - 1]), mpmath.mpf(0)))

    return _cached_reference(ctx, ("singular value", weighted), compute)


# --------------------------------------------------------------------------- the quantities


def _quantity(name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **options: Any) -> Any:
    return quantity(name, measure, exact_fn, family=FAMILY, **options)


def _case_count(name: str, read: Callable[[Any], int], doc: str, kind: Callable[[Context], Any]) -> Any:
    def value(ctx: Context) -> RankInterval:
        return _pinned(read(kind(ctx)))

    return _quantity(name, value, value, reference=lambda ctx: read(kind(ctx)), integer=True, doc=doc,
                     exact_doc="the case's own")  # fmt: skip


first_order_rank = _quantity(
    "rank(−η(GWWᵀ + HHᵀG))",
    lambda ctx: _measure_update_rank(ctx, "first-order"),
    lambda ctx: exact_update_rank(ctx, "first-order"),
    reference=lambda ctx: reference_rank(ctx, "first-order"),
    integer=True,
    doc="the rank of the first-order logit update of a step: exact for an integer step, else a certified "
    "interval (SVD + Weyl below, the factorization through 2D columns above)",
    exact_doc="the rank over Q of GWWᵀ + HHᵀG, scaled to integers",
)
exact_step_rank = _quantity(
    "rank(H'W'ᵀ − HWᵀ)",
    lambda ctx: _measure_update_rank(ctx, "exact-step"),
    lambda ctx: exact_update_rank(ctx, "exact-step"),
    reference=lambda ctx: reference_rank(ctx, "exact-step"),
    integer=True,
    doc="the rank of the exact logit change of a gradient step",
    exact_doc="the rank over Q of q² times the step, scaled to integers",
)
hidden_size = _case_count("D", lambda c: c.D, "the hidden size D", _step_case)
contexts_count = _case_count("C", lambda c: c.contexts, "the contexts C (rows of G)", _step_case)
vocabulary = _case_count("V", lambda c: c.V, "the vocabulary V", lambda ctx: ctx.case)
residual = _quantity(
    "min_c ‖cΔ − G‖_F",
    _measure_residual,
    lambda ctx: exact_residual(ctx, _step_case(ctx).delta),
    reference=lambda ctx: reference_residual(ctx, _step_case(ctx).delta),
    doc="the residual of the case's candidate Δ at its best scale c = ⟨Δ, G⟩/‖Δ‖²",
    exact_doc="(‖G‖² − ⟨Δ, G⟩²/‖Δ‖²)^{1/2}: a rational under a root for a rational Δ; (‖G‖² − S_r)^{1/2} for "
    "the ideal truncated SVD (the lemma tr(P_r M) = S_r); balls from certified eigenvectors for the moved one",
)
tail = _quantity(
    "(Σ_{i>2D} σ_i(G)²)^{1/2}",
    lambda ctx: measured_tail(ctx, sizes(_step_case(ctx))[1]),
    lambda ctx: exact_tail(ctx, sizes(_step_case(ctx))[1]),
    reference=lambda ctx: reference_tail(ctx, sizes(_step_case(ctx))[1]),
    doc="the Eckart-Young tail of G beyond rank 2D",
    exact_doc="(‖G‖² − S_{2D})^{1/2}, S_{2D} a form in G's certified eigenvalues (0 for 2D ≥ min(C, V))",
)
sigma_2D = _quantity(
    "σ_2D(G)",
    lambda ctx: _measure_sigma(ctx, 2 * _step_case(ctx).D),
    lambda ctx: spectrum(ctx).eigenvalue(2 * _step_case(ctx).D).sqrt(),
    reference=lambda ctx: reference_sigma(ctx, 2 * _step_case(ctx).D),
    doc="the 2D-th singular value of G (0 for 2D > min(C, V))",
    exact_doc="the square root of λ_2D, an atom of the spectrum's forms",
)
rank_D_residual = _quantity(
    "min_c ‖cG_D − G‖_F",
    lambda ctx: _measure_residual(ctx, "rank-D-svd"),
    lambda ctx: exact_residual(ctx, "rank-D-svd"),
    reference=lambda ctx: reference_residual(ctx, "rank-D-svd"),
    doc="the residual of G's (ideal) rank-D truncated SVD at its best scale",
    exact_doc="(‖G‖² − S_D)^{1/2} (the lemma tr(P_D M) = S_D)",
)
gradient_norm = _quantity(
    "‖G‖_F",
    _measure_gradient_norm,
    lambda ctx: Real.of(spectrum(ctx).total).sqrt(),
    reference=reference_gradient_norm,
    doc="the Frobenius norm of the step's gradient G",
    exact_doc="the square root of Σ G_ij², a rational",
)
gradient_rank = _quantity(
    "rank G",
    _measure_gradient_rank,
    lambda ctx: (lambda e: RankInterval(e.rank, e.rank, e.how, e.how, exact=True))(exact_gradient(ctx)),
    reference=reference_gradient_rank,
    integer=True,
    doc="the rank of the logit gradient G = diag(f)(P − Ñ)",
    exact_doc="the rank over Q of K (row c of (P − Ñ)₊ is K_c/(A_c n_c)), scaled to integers",
)
active_contexts = _case_count(
    "C₊", lambda c: c.contexts - c.idle, "the contexts with f_c > 0 (rows of X = (P − Ñ)₊)", _gradient_case
)
least_frequency = _quantity(
    "f_min",
    lambda ctx: Measured(float(_active_frequencies(ctx).min()), 0.0),
    lambda ctx: Real.of(int(_active_frequencies(ctx).min())),
    reference=lambda ctx: int(_active_frequencies(ctx).min()),
    doc="the least frequency of an active context",
    exact_doc="the integer frequency",
)
largest_frequency = _quantity(
    "f_max",
    lambda ctx: Measured(float(_active_frequencies(ctx).max()), 0.0),
    lambda ctx: Real.of(int(_active_frequencies(ctx).max())),
    reference=lambda ctx: int(_active_frequencies(ctx).max()),
    doc="the largest frequency",
    exact_doc="the integer frequency",
)
gradient_singular_value = _quantity(
    "σ_i(G)",
    lambda ctx: _measure_singular_value(ctx, weighted=True),
    lambda ctx: exact_singular_value(ctx, weighted=True),
    reference=lambda ctx: reference_singular_value(ctx, weighted=True),
    doc="the i-th singular value of the logit gradient G = diag(f)(P − Ñ), i the case's index",
    exact_doc="the square root of a certified eigenvalue of the exact Gram matrix (0 beyond the rank); "
    "f·σ_i(X) as a form where f is constant",
)
error_singular_value = _quantity(
    "σ_i((P − Ñ)₊)",
    lambda ctx: _measure_singular_value(ctx, weighted=False),
    lambda ctx: exact_singular_value(ctx, weighted=False),
    reference=lambda ctx: reference_singular_value(ctx, weighted=False),
    doc="the i-th singular value of X = (P − Ñ)₊, the rows of P − Ñ on the active contexts",
    exact_doc="the square root of a certified eigenvalue of the exact Gram matrix (0 beyond the rank), "
    "the atom of a one-atom form",
)

#: Where the claims of this family range: gradient steps with a first-order update, with an exact
#: step, and with any of the rank-2D candidates of the Eckart-Young claims (the truncated SVD itself only
#: for the identity: at exact equality no finite precision shows an inequality, so the inequality's
#: witnesses take the candidate moved within its column space, :data:`NEAR_SVD_EPSILON`); logit gradients.
CANDIDATES: tuple[DeltaKind, ...] = ("first-order", "exact-step", "random-rank", "near-truncated-svd")


#: Measured 6,538 bytes per entry at V = 131,072 (eckart-young-attained), rounded up by a quarter.
BYTES_PER_ENTRY = 8_200


def _steps(strategy: DeltaKind | Literal["any"], deltas: tuple[DeltaKind, ...], residual_classes: bool) -> Cases:
    return Cases(
        lambda: step_instances(strategy),
        lambda V: _witnesses(V, deltas),
        lambda V, n, seed: random_steps(V, n, seed, deltas),
        _boundary(residual=residual_classes),
        family=FAMILY,
        bytes_per_entry=BYTES_PER_ENTRY,
    )


first_order_steps = _steps("first-order", ("first-order",), False)
exact_steps = _steps("exact-step", ("exact-step",), False)
candidate_steps = _steps("any", CANDIDATES, True)
truncated_steps = _steps("truncated-svd", ("truncated-svd",), False)
logit_gradients = Cases(
    gradient_instances,
    gradient_witnesses,
    random_gradients,
    GRADIENT_BOUNDARY,
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)


# --------------------------------------------------------------------------- the claims

first_order_rank_claim = declare(
    "updates.first-order-rank",
    source=f"{SEED_000}, Eq. 7 (§2.2)",
    title="The first-order logit update has rank at most 2D",
    statement="rank(−η(G W Wᵀ + H Hᵀ G)) ≤ 2D",
    domain="H: C × D, W: V × D, G: C × V; integer (exact rank) or Gaussian (certified rank interval)",
    lhs=first_order_rank,
    relation="<=",
    rhs=2 * hidden_size,
    cases=first_order_steps,
)
exact_step_rank_claim = declare(
    "updates.exact-step-rank",
    source=f"{SEED_000}, Eq. 7 (§2.2)",
    title="The exact logit change of a gradient step has rank at most 2D",
    statement="rank(H'W'ᵀ − HWᵀ) ≤ 2D for H' = H − ηGW, W' = W − ηGᵀH",
    domain="as for updates.first-order-rank; η = p/q rational",
    lhs=exact_step_rank,
    relation="<=",
    rhs=2 * hidden_size,
    cases=exact_steps,
)
eckart_young = declare(
    "updates.eckart-young",
    source=f"{SEED_000}, Prop. A.6 (App. A.3)",
    title="No rank-2D update follows the logit gradient beyond its tail",
    statement="‖cΔ − G‖_F ≥ (Σ_{i>2D} σ_i(G)²)^{1/2} for every Δ of rank ≤ 2D and every scalar c",
    domain="Δ = the first-order update, the exact step, a random rank-2D matrix, or G's truncated SVD",
    lhs=residual,
    relation=">=",
    rhs=tail,
    cases=candidate_steps,
)
eckart_young_attained = declare(
    "updates.eckart-young-attained",
    source=f"{SEED_000}, Prop. A.6 (equality case, Eckart-Young-Mirsky)",
    title="The truncated SVD attains the residual bound",
    statement="min_c ‖cG_{2D} − G‖_F = (Σ_{i>2D} σ_i(G)²)^{1/2} (at c = 1)",
    domain="G Gaussian or integer, any shape",
    lhs=residual,
    relation="==",
    rhs=tail,
    cases=truncated_steps,
)
gradient_rank_claim = declare(
    "updates.gradient-rank",
    source=f"{SEED_000}, §2.2 ('may have a rank up to V'), Result 1 ('full rank V'), corrected: Theorem UP.2 (1)",
    title="A logit gradient has rank at most min(C₊, V − 1)",
    statement="rank(diag(f)(P − Ñ)) ≤ min(C₊, V − 1) for row-stochastic P and Ñ, C₊ the contexts with f_c > 0",
    domain="P: the softmax of Gaussian logits (each float row normalised exactly), Ñ: observed next-token "
    "counts normalised, f: integer frequencies, zero on the idle contexts",
    lhs=gradient_rank,
    relation="<=",
    rhs=minimum(active_contexts, vocabulary - 1),
    cases=logit_gradients,
)
gradient_spectrum_claim = declare(
    "updates.gradient-singular-values",
    source="rankwall (Theorem UP.2 (3): the bridge from the tail of P − Ñ, which seed 000 §2.2 bounds, to G's)",
    title="The singular values of a logit gradient lie between f_min and f_max times those of (P − Ñ)₊",
    statement="f_min·σ_i(X) ≤ σ_i(G) ≤ f_max·σ_i(X) for G = diag(f)(P − Ñ) and X = (P − Ñ)₊, "
    "i.e. |σ_i(G) − ½(f_max + f_min)·σ_i(X)| ≤ ½(f_max − f_min)·σ_i(X)",
    domain="as for updates.gradient-rank, with at least one active context; f_min and f_max over the "
    "active contexts; every i (the case's index)",
    lhs=abs(gradient_singular_value - (largest_frequency + least_frequency) / 2 * error_singular_value),
    relation="<=",
    rhs=(largest_frequency - least_frequency) / 2 * error_singular_value,
    cases=logit_gradients,
)

first_order_rank_claim.with_mutant(
    "at-most-2D-minus-1",
    statement="rank of the first-order update ≤ 2D − 1  (false: generically it is 2D)",
    rhs=2 * hidden_size - 1,
)
exact_step_rank_claim.with_mutant(
    "at-most-D",
    statement="rank(H'W'ᵀ − HWᵀ) ≤ D  (false: H'W'ᵀ and HWᵀ have rank D each, their difference generically 2D)",
    rhs=hidden_size,
)
eckart_young.with_mutant(
    "one-more-tail-value",
    statement="‖cΔ − G‖_F ≥ (Σ_{i≥2D} σ_i(G)²)^{1/2}  (false: the truncated SVD misses only i > 2D)",
    rhs=sqrt(tail**2 + sigma_2D**2),
    cases=truncated_steps,
)
eckart_young_attained.with_mutant(
    "rank-D-truncation",
    statement="min_c ‖cG_D − G‖_F = (Σ_{i>2D} σ_i(G)²)^{1/2}  (false: G_D also misses σ_{D+1}, …, σ_{2D})",
    lhs=rank_D_residual,
)
gradient_rank_claim.with_mutant(
    "at-most-V-minus-2",
    statement="rank(diag(f)(P − Ñ)) ≤ min(C₊, V − 2)  (false: 1 is the only kernel vector every P and Ñ "
    "share; with C₊ ≥ V − 1 the rank is V − 1)",
    rhs=minimum(active_contexts, vocabulary - 2),
)
gradient_spectrum_claim.with_mutant(
    "at-most-the-least-frequency",
    statement="σ_i(G) ≤ f_min·σ_i((P − Ñ)₊)  (false: f_min is the band's lower end; with spread "
    "frequencies σ_i(G) exceeds it)",
    lhs=gradient_singular_value,
    rhs=least_frequency * error_singular_value,
)

#: The theorems and lemmas of ``docs/updates.md`` (collected by ``checks/companion/fidelity.py``).
_TESTS = "tests/test_updates.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-update-rank", "UP.1", "updates", "seed 000, §2.2, Eq. 7", Kind.SEED,
              ("updates.first-order-rank", "updates.exact-step-rank"),
              (_TESTS + "TestRankAtMost2D", _TESTS + "TestRankClaimsAreCertified")),
    Statement("thm-logit-gradient", "UP.2", "updates", "seed 000, §2.2 (\"may have a rank up to V\"), Result 1",
              Kind.CORRECTED,
              ("updates.gradient-rank", "error-rank.unique-continuation", "updates.gradient-singular-values"),
              (_TESTS + "TestTheLogitGradient", _TESTS + "TestTheLogitGradientClaims"),
              "rank <= min(C, V - 1); the bridge from P - Ñ to diag(f)(P - Ñ)"),
    Statement("thm-eckart-young", "UP.3", "updates", "seed 000, Prop. A.6 (statement lost, proof kept)",
              Kind.RECONSTRUCTED, ("updates.eckart-young", "updates.eckart-young-attained"),
              (_TESTS + "TestEckartYoung", _TESTS + "TestEckartYoungClaims")),
)  # fmt: skip
