r"""Claims ``compression.*``: Eq. 1 (the share of the logit gradient destroyed by the head), its Ky Fan
ceiling, and the first-order efficiency of the update that reaches the logits (§3.4), declared over this
family's quantities.

The exact object. A case is a batch gradient through a head, :class:`BatchGradient`. The context's backend
builds G (T x V, the frequency-weighted cross-entropy logit gradient, computed in float64 and rounded to the
backend's dtype) and a head, and every quantity of the context measures, evaluates exactly and references the
same pair (G, W*): G is the built G read exactly (a matrix of dyadic rationals), and W* is the head the case
names, which for two of the three kinds of head is an ideal object that the built floats only approximate:

- a *random* head: W* is the built head W (V x D, a float64 Gaussian draw rounded to the backend's dtype),
  read exactly, of rank D (certified when the case is built);
- a *low-rank* head W = AB (``rank`` r < D): W* = A B / √(rD), the product of the constructor's float64
  factors A (V x r) and B (r x D) read exactly, of rank r (both factors certified of rank r when the case
  is built), not the float product the backend holds; col W* = col A;
- an *aligned* head: W* is an orthonormal basis of the top-k right singular subspace of G, k = min(D, T, V)
  (any such basis: every quantity below depends on W* through W*W*ᵀ = P_k, the spectral projector of GᵀG on
  its k largest eigenvalues), not the float singular vectors the backend's SVD returns.

Π is the orthogonal projector on col W* (Π = P_k for an aligned head). With g = ‖G‖_F² (a rational):

- c² = ‖GΠ‖_F²/g and r² = ‖G − GΠ‖_F²/g. For a random or low-rank head, ‖GΠ‖_F² = tr(GΠGᵀ) = K, one *atom*
  of the instance (a symbol in a :class:`~rankwall.checks.engine.reals.Form`, its ball tr(M(BᵀB)⁻¹Mᵀ) at the working
  precision, B the exact columns spanning col W*, M = GB), and ‖G − GΠ‖_F² = tr(G(I − Π)Gᵀ) = g − K (I − Π
  is the orthogonal projector on ker W*ᵀ); for an aligned head K = S_k, the sum of the k largest
  eigenvalues of GᵀG (tr(P_k GᵀG) = S_k). So r² + c² = 1 is an identity in the atoms: exact;
- the Ky Fan share Σ_{i ≤ k} σ_i(G)²/g = S_k/g, S_k an atom for k = rank W* (the same atom as an aligned
  head's K, so c² equals the share exactly there), its ball certified from float64 eigenvectors refined in
  balls (:func:`eigenvalue_sum`); S_k = g exactly for k ≥ min(T, V);
- the rates ⟨G, GW*W*ᵀ⟩/‖GW*W*ᵀ‖_F (invariant under W* → sW*) and ‖G‖_F: square roots of exact rationals
  (integers of G and W* read exactly, :func:`exact_rates`), or √S_k for an aligned head, compared through
  their radicands.

A float measurement counts only where its error bound covers the distance to that object. The backend
computes Eq. 1 through a basis Q of its float head (the pivoted QR of
:func:`rankwall.theory.compression.column_basis` on NumPy float64, the SVD basis of
:func:`rankwall.theory.compression.svd_column_basis` elsewhere), so c and r are measured on span Q with the
rounding model (:func:`eq1_shares`) and then moved to col W*: by ‖Π_Q − Π‖₂ ≤ ‖(I − Π_Q)B‖₂/σ_min(B) for
a random or low-rank head (:func:`subspace_gap`), by the alignment slack for an aligned one
(:func:`alignment_slack`); the rates add the distance of the float head from W* (:func:`descent_rates`,
:func:`aligned_rate`). A float route that cannot bound that distance (a basis of another dimension, a
defect η ≥ 1) returns an infinite error and leaves the decision to the exact route. Underflow (float32's
normal range ends at 2^-126) is outside the relative model: each bound adds an absolute λ per product that
may underflow (:func:`underflow`).
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "BatchGradient",
    "aligned_heads",
    "batch_gradients",
    "best_share",
    "descent_along_gradient",
    "descent_along_update",
    "destroyed",
    "rank_W",
    "singular_share",
    "surviving",
    "vocabulary",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.engine import tolerance, toolkit
from rankwall.checks.engine.backends import Backend, float64_copy, singular_values
from rankwall.checks.engine.quantities import (
    Approximately,
    Combination,
    Compared,
    Constant,
    Context,
    Measured,
    Quantity,
    declare,
    quantity,
)
from rankwall.checks.engine.reals import EXACT_HOWS, Form, Real, difference_sign
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases, numpy_float64
from rankwall.checks.engine.verdict import Case, OutsideDomain, RankInterval
from rankwall.theory import compression as cp

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "compression"

# --------------------------------------------------------------------------- cases and strategies


@dataclass(frozen=True)
class BatchGradient(Case):
    """The logit gradient of a batch of ``tokens`` hidden states through a head of V x D (of rank
    ``rank``, full when ``None``), drawn from ``seed``, with logits scaled by ``scale``; an
    ``aligned`` head is replaced by G's top D right singular vectors."""

    KIND: ClassVar[str] = "batch-gradient"
    V: int
    D: int
    rank: int | None = None
    tokens: int = 96
    seed: int = 0
    scale: float = 1.0
    aligned: bool = False


#: Vocabulary sizes the search reaches beyond the small ones: the tolerances grow with V.
LARGE_VOCABULARIES = (1024, 8192, 32768)
#: Logit scales: 0.1 to 10, 0 (every softmax row uniform, so the singular values of G tie in groups) and
#: 100 (rows near one-hot, with tiny or subnormal entries). The search shrinks towards the first.
SCALES = (0.1, 1.0, 10.0, 0.0, 100.0)
#: The heads a batch gradient goes through (``low-rank``: W = AB of a drawn rank).
HEADS = ("random", "low-rank", "aligned")


def vocabularies() -> st.SearchStrategy[int]:
    """V = 2 or 3 a quarter of the time, up to 64 or 600 most of the time, 1,024 to 32,768 one draw in twelve."""
    tiers = [st.sampled_from((2, 3))] * 3 + [st.integers(2, 64)] * 4 + [st.integers(2, 600)] * 4
    tiers.append(st.sampled_from(LARGE_VOCABULARIES))
    return st.integers(0, 11).flatmap(lambda t: tiers[t])


@st.composite
def compression_instances(draw: Any, aligned: bool | None = False) -> BatchGradient:
    """A batch gradient through a random or low-rank head, or one aligned with the gradient (always,
    never, or a third of the time for ``aligned=None``). The edges come with real probability: V = 2
    or 3, one to three tokens or head columns, a full head (D = V), logit scale 0 (tied singular
    values) or 100 (saturated rows), and large V (:data:`LARGE_VOCABULARIES`)."""
    V = draw(vocabularies())
    D = draw(st.one_of(st.integers(1, min(V, 3)), st.integers(1, min(V, 64)), st.just(min(V, 64))))
    if aligned is None:
        head = draw(st.sampled_from(HEADS))
    else:
        head = "aligned" if aligned else draw(st.sampled_from(HEADS[:2]))
    return BatchGradient(
        V=V,
        D=D,
        rank=draw(st.integers(1, D)) if head == "low-rank" else None,
        tokens=draw(st.one_of(st.integers(1, 3), st.integers(1, 64))),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from(SCALES)),
        aligned=head == "aligned",
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
#: Unit roundoff of Python floats: the endpoints of an :class:`Enclosure` are computed in float64
#: whatever backend computed the value (a float32 result is read into float64 exactly).
U64 = tolerance.unit_roundoff(np.float64)
#: Each endpoint of an enclosure is computed in at most two float64 roundings, pushed outwards by gamma_2.
ENDPOINT = tolerance.gamma(2, U64)
#: The exact routes need no largest vocabulary: every exact quantity reads G and the head over V only through
#: the integer Gram matrices of :func:`row_gram` (of order at most T + D), so they run at every V.
#: The vocabulary size the witnesses and random batches spread over; beyond it two witnesses run at V
#: itself (:func:`_witnesses`), so that ``--V 131072`` decides the claims there at a cost of seconds.
SPREAD_V = 4096
#: The largest Gram matrix of G, of order min(T, V), whose eigenvalue sums the exact route encloses.
GRAM_LIMIT = 256


# --------------------------------------------------------------------------- building a case


@dataclass(frozen=True)
class Built(toolkit.Built):
    """A case built in a backend (see the module docstring): G and the float head W in the backend, a basis Q
    of col W there, and what defines the exact head W*: ``span``, the float64 matrix whose columns span col W*
    exactly (W for a random head, A for a low-rank one; ``None`` for an aligned head), its copy in the backend
    ``span_b`` within ``span_error`` of it (Frobenius), the factors (A, B) of a low-rank head, the bound
    ``head_error`` on ‖W − W*‖_F, and the certified rank of W*."""

    G: Any
    W: Any
    Q: Any
    span: np.ndarray | None
    span_b: Any
    span_error: float
    factors: tuple[np.ndarray, np.ndarray] | None
    head_error: float
    rank: RankInterval
    aligned: bool
    #: What the routes derive from the built case (integers, Gram matrices, balls at each precision): computed
    #: once and shared by every context of the case.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def k(self) -> int:
        """rank W*."""
        return self.rank.lo


def head_factors(case: BatchGradient) -> tuple[np.ndarray, np.ndarray]:
    """The factors A (V x r) and B (r x D) that :func:`rankwall.theory.compression.construct_head` draws for a
    low-rank head W = AB/√(rD) (the same generator, the same draws, in the same order)."""
    rng = np.random.default_rng(case.seed)
    return rng.standard_normal((case.V, case.rank)), rng.standard_normal((case.rank, case.D))


def label(backend: Backend | None) -> str:
    """Where a measurement ran: backend name and dtype."""
    b = numpy_float64() if backend is None else backend
    return f"{b.name} {b.dtype_name}"


def build(case: BatchGradient, backend: Backend | None = None) -> Built:
    """The case in the backend (NumPy float64 by default): G and W computed in float64 and rounded to the
    backend's dtype (an aligned head: G's top right singular vectors from the backend's SVD), a basis Q of
    col W in the backend, and the exact head W* with its certified rank (see the module docstring).

    The constructor guarantees a nonzero G and a head W* of its stated rank (D, the drawn ``rank`` of a
    low-rank head, k = min(D, T, V) for an aligned one); built values that break either (every softmax row
    saturated at its target, a factor of lower rank) are :class:`OutsideDomain`."""
    backend = numpy_float64() if backend is None else backend
    W64 = cp.construct_head(case.V, case.D, case.seed, rank=case.rank)
    H, targets = cp.construct_batch(case.tokens, W64.shape[1], case.V, case.seed + 1, scale=case.scale)
    G = backend.asarray(np.concatenate(list(cp.logit_gradient_blocks(H, W64, targets))))
    where = f"batch-gradient (V = {case.V}, D = {case.D}) in {label(backend)}"
    if not bool(backend.xp.any(G != 0)):
        raise OutsideDomain(f"{where}: the logit gradient is zero (every softmax row saturated at its target)")
    u = tolerance.unit_roundoff(backend.dtype)
    if case.aligned:
        right = backend.xp.linalg.svd(G, full_matrices=False)[2]  # min(tokens, V) rows: at most D of them
        W = right[: min(case.D, right.shape[0]), :].T
        k = W.shape[1]
        rank = RankInterval(k, k, "the ideal head's k orthonormal columns", "its k columns", exact=True)
        span, span_b, span_error, factors, head_error = None, None, 0.0, None, 0.0
    else:
        W = backend.asarray(W64)
        if case.rank is None:
            span, factors, head_error = float64_copy(W), None, 0.0
            rank = certified_rank(span, case.D, "W")
        else:
            factors = head_factors(case)
            A, B = factors
            if not np.array_equal((A @ B) / np.sqrt(case.rank * case.D), W64):
                raise RuntimeError(f"{where}: the head's factors do not reproduce construct_head's W")
            span, head_error = A, product_error(A, B, W64, backend)
            rank = factor_rank(A, B)
        span_b = backend.asarray(span)
        span_error = 0.0 if backend.dtype_name == "float64" else u * float(np.linalg.norm(span)) * (1 + 4 * U64)
        expected = case.D if case.rank is None else case.rank
        if not rank.pinned or rank.lo != expected:
            raise OutsideDomain(f"{where}: the head W* has rank in [{rank.lo}, {rank.hi}], not {expected}")
    Q = (
        cp.column_basis(W)[0]
        if (backend.name, backend.dtype_name) == ("numpy", "float64")
        else cp.svd_column_basis(W)[0]
    )
    return Built(backend, G, W, Q, span, span_b, span_error, factors, head_error, rank, case.aligned)


def certified_rank(M: np.ndarray, columns: int, name: str) -> RankInterval:
    """rank M for a float64 matrix read exactly: its columns above, the singular values above a Weyl margin
    below (:func:`rankwall.checks.exact.weyl_rank_lower_bound`, two-sided); where they do not meet, the exact rank
    over the integers of its Gram matrix Z_Mᵀ Z_M (:func:`row_gram`, of order ``columns``), which is rank M."""
    lower, _, _ = exact.weyl_rank_lower_bound(M, U64)
    if lower == columns:
        return RankInterval(lower, columns, f"singular values of {name} above a Weyl margin", "its columns")
    value = fmpz_block(row_gram([np.asarray(M, dtype=np.float64).T])).rank()
    how = f"the exact rank of {name} over the integers (of its Gram matrix)"
    return RankInterval(value, value, how, how, exact=True)


def factor_rank(A: np.ndarray, B: np.ndarray) -> RankInterval:
    """rank AB for A (V x r) and B (r x D): at most r, and at least rank A + rank B − r (Sylvester), so r
    exactly when both factors have rank r (A injective, B onto)."""
    r = A.shape[1]
    a, b = certified_rank(A, r, "A"), certified_rank(B.T, r, "B")
    lower = max(a.lo + b.lo - r, 0)
    how = f"Sylvester's inequality on A ({a.lower}) and B ({b.lower})"
    return RankInterval(lower, r, how, "the inner dimension r", a.exact and b.exact)


def product_error(A: np.ndarray, B: np.ndarray, W64: np.ndarray, backend: Backend) -> float:
    """A bound on ‖W − AB/√(rD)‖_F for the head W the backend holds: W64 = fl(fl(AB)/fl(√(rD))) is within
    gamma_{r+3} |A||B|/√(rD) of the exact product (entrywise, ‖|A||B|‖_F ≤ ‖A‖_F‖B‖_F), and rounding W64 to
    the backend's dtype adds u‖W64‖_F."""
    r, D = B.shape
    scale = 1 / math.sqrt(r * D) * (1 + 4 * U64)
    product = tolerance.gamma(r + 3, U64) * scale * float(np.linalg.norm(A)) * float(np.linalg.norm(B))
    rounding = (
        0.0 if backend.dtype_name == "float64" else tolerance.unit_roundoff(backend.dtype) * float(np.linalg.norm(W64))
    )
    return (product + rounding) * (1 + 8 * U64)


#: The largest vocabulary whose built cases are kept for the next context of the same case and backend (the
#: claims of the default run share their instances).
SHARED_V = 256


@functools.lru_cache(maxsize=64)
def _shared_build(case: BatchGradient, backend: Backend) -> Built:
    return build(case, backend)


def built_in(ctx: Context) -> Built:
    """The case built in the context's backend and dtype, once (every quantity of the context reads it, and,
    up to V = :data:`SHARED_V`, every later context of the same case and backend)."""
    shared = ctx.case.V <= SHARED_V
    return ctx.once("built", lambda: _shared_build(ctx.case, ctx.backend) if shared else build(ctx.case, ctx.backend))


def clear_caches() -> None:
    """Forget the shared built cases (after a test replaces a function they were computed with)."""
    _shared_build.cache_clear()
    _gram_eigenvalues.cache_clear()


def gradient(case: BatchGradient, backend: Backend | None = None) -> tuple[Any, Any, Any]:
    """(G, W, Q) of :func:`build`: the built gradient, the float head and its basis, in the backend."""
    built = build(case, backend)
    return built.G, built.W, built.Q


# --------------------------------------------------------------------------- float routes: the rounding model


@dataclass(frozen=True)
class Enclosure:
    """A value computed in the backend and an interval ``[lo, hi]`` that holds the exact quantity."""

    value: float
    lo: float
    hi: float

    @classmethod
    def relative(cls, value: float, error: float) -> Enclosure:
        """A nonnegative value computed as (exact)(1 + theta), |theta| <= error < 1."""
        return cls(value, value * (1 - error) * (1 - ENDPOINT), value / (1 - error) * (1 + ENDPOINT))

    @classmethod
    def outward(cls, value: float, lo: float, hi: float) -> Enclosure:
        """Endpoints computed in a few float64 roundings, pushed outwards by gamma_2 of their size."""
        return cls(value, lo - ENDPOINT * abs(lo), hi + ENDPOINT * abs(hi))

    @property
    def radius(self) -> float:
        """The largest distance from the computed value to the exact one."""
        return max(self.value - self.lo, self.hi - self.value)

    def measured(self) -> Measured:
        """The enclosure as a quantity's measurement: its value within its radius (unbounded: infinite)."""
        radius = self.radius
        return Measured(self.value, radius if math.isfinite(radius) else math.inf)

    def squared(self) -> Enclosure:
        """The square of a nonnegative quantity."""
        return Enclosure.outward(self.value**2, max(self.lo, 0.0) ** 2, self.hi**2)

    def to_json(self) -> list[float]:
        return [self.value, self.lo, self.hi]


UNBOUNDED = (-math.inf, math.inf)


def unit(X: Any) -> float:
    """The unit roundoff u of the dtype X was computed in (float32's for a float32 backend)."""
    return tolerance.unit_roundoff(X.dtype)


def underflow(X: Any) -> float:
    """lambda, the smallest normal number of X's dtype: a rounded product below it may lose up to lambda
    in absolute terms (gradual underflow loses u lambda, flush-to-zero lambda), which the relative model
    gamma_n does not cover; each bound below adds (number of products) x lambda for it."""
    return tolerance.smallest_normal(X.dtype)


def widened(e: Enclosure, absolute: float) -> Enclosure:
    """A norm whose square carries an extra absolute error ``absolute`` (underflowed squares)."""
    if absolute == 0:
        return e
    return Enclosure.outward(e.value, math.sqrt(max(e.lo**2 - absolute, 0.0)), math.sqrt(e.hi**2 + absolute))


def frobenius(X: Any) -> Enclosure:
    """||X||_F, in X's namespace, as the root of a sum of row norms squared: each square passes through
    at most n + m + 4 roundings at X's unit roundoff, so the value is (exact)(1 + theta),
    |theta| <= gamma_{n+m+4}, but for the n m + n squares that may underflow (2 lambda each on the square)."""
    xp = array_api_compat.array_namespace(X)
    n, m = X.shape
    rows = xp.linalg.vector_norm(X, axis=1)
    e = Enclosure.relative(float(xp.sqrt(xp.sum(rows * rows))), tolerance.gamma(n + m + 4, unit(X)))
    return widened(e, 2 * (n * m + n) * underflow(X))


def orthogonality_defect(Q: Any) -> float:
    """eta >= ||Q^T Q - I||_2: the Frobenius norm of the computed defect plus the rounding of each
    entry of Q^T Q, gamma_{V+1} |q_i|^T |q_j| <= gamma_{V+1} (1 + eta), solved for eta (u of Q's dtype)."""
    xp = array_api_compat.array_namespace(Q)
    V, k = Q.shape
    g = k * tolerance.gamma(V + 1, unit(Q)) + k * V * underflow(Q)
    eye = xp.eye(k, dtype=Q.dtype, device=array_api_compat.device(Q))
    return (frobenius(Q.T @ Q - eye).hi + g) / (1 - g)


#: The largest power of two one rescaling step multiplies by (2^100 is finite in float32 too).
RESCALE_STEP = 100


def rescaled_up(G: Any) -> Any:
    """G times the power of two 2^s that brings its largest magnitude into [1/2, 1) when it lies below,
    exactly (each step multiplies by at most 2^100, and a product of a float and a power of two that stays
    below the overflow threshold is exact, subnormals included). The shares c and r, and the alignment slack,
    are ratios of norms of G: unchanged by the scaling, but no longer lost to underflow (a gradient of
    subnormal entries has sums of squares that round to 0)."""
    xp = array_api_compat.array_namespace(G)
    largest = float(xp.max(xp.abs(G)))
    if not 0 < largest < 0.5:
        return G
    steps = -math.frexp(largest)[1]
    while steps > 0:
        step = min(steps, RESCALE_STEP)
        G = G * xp.asarray(2.0**step, dtype=G.dtype, device=array_api_compat.device(G))
        steps -= step
    return G


def eq1_norms(G: Any, Q: Any) -> tuple[float, float]:
    """(c, r) in G's namespace, as :func:`rankwall.theory.compression.compression` computes them:
    row norms of G, C = GQ and R = G - CQ^T, their sums of squares, two quotients and two roots."""
    xp = array_api_compat.array_namespace(G, Q)
    C = G @ Q
    norms, kept, lost = (xp.linalg.vector_norm(X, axis=1) for X in (G, C, G - C @ Q.T))
    total = xp.sum(norms * norms)
    return float(xp.sqrt(xp.sum(kept * kept) / total)), float(xp.sqrt(xp.sum(lost * lost) / total))


def eq1_shares(G: Any, Q: Any) -> tuple[Enclosure, Enclosure]:
    """Enclosures of c_Q = ||G Pi_Q||_F / ||G||_F and r_Q = ||G - G Pi_Q||_F / ||G||_F for the orthogonal
    projector Pi_Q on span Q, their values from :func:`eq1_norms` in G's namespace, every gamma at its unit
    roundoff u. With C = GQ and R = G - CQ^T as computed there: ||C^ - GQ||_F <= gamma_V ||G||_F ||Q||_F,
    ||R^ - (G - GQQ^T)||_F <= gamma_k ||C^||_F ||Q||_F + ||C^ - GQ||_F ||Q||_2 + u ||R^||_F; then ||GQ||_F^2 is
    ||G Pi_Q||_F^2 (1 +- eta), and GQQ^T differs from G Pi_Q by at most eta ||G Pi_Q||_F (QQ^T = Pi_Q +
    Q_o(SS^T - I)Q_o^T for Q = Q_o S)."""
    (T, V), k = G.shape, Q.shape[1]
    u, G = unit(G), rescaled_up(G)  # ratios of norms of G: the exact scaling changes none
    cosine, destroyed = eq1_norms(G, Q)
    eta = orthogonality_defect(Q)
    if eta >= 1:
        return Enclosure(cosine, *UNBOUNDED), Enclosure(destroyed, *UNBOUNDED)
    norm_G = frobenius(G)
    q2, qF = math.sqrt(1 + eta), math.sqrt(k * (1 + eta))
    # ||C^||_F and ||R^||_F from c, r and ||G||_F: three sums of squares of at most V + T + 4 roundings
    # each (kept, or lost, and two totals), then a quotient, a root and a product.
    relayed = tolerance.gamma(3 * (V + T + 4) + 3, u)
    lam = underflow(G)
    C = widened(Enclosure.relative(cosine * norm_G.value, relayed), 2 * T * (k + V + 2) * lam)
    R = widened(Enclosure.relative(destroyed * norm_G.value, relayed), 2 * T * (2 * V + 2) * lam)
    dC = tolerance.gamma(V, u) * norm_G.hi * qF + math.sqrt(T * k) * V * lam
    dR = tolerance.gamma(k, u) * C.hi * qF + dC * q2 + u * R.hi + math.sqrt(T * V) * (k + 1) * lam
    kept_lo, kept_hi = max(C.lo - dC, 0.0) / math.sqrt(1 + eta), (C.hi + dC) / math.sqrt(1 - eta)
    lost_lo, lost_hi = max(R.lo - dR - eta * kept_hi, 0.0), R.hi + dR + eta * kept_hi
    c = Enclosure.outward(cosine, kept_lo / norm_G.hi, kept_hi / norm_G.lo)
    r = Enclosure.outward(destroyed, lost_lo / norm_G.hi, lost_hi / norm_G.lo)
    return c, r


def residual_bound(S: Any, Q: Any, eta: float) -> float:
    """rho >= ||(I - Pi_Q) S||_F for the orthogonal projector Pi_Q on span Q (defect eta), from the computed
    S - Q(Q^T S): its norm, the rounding of Q^T S (gamma_V ||Q||_F ||S||_F), of Q times it (gamma_k) and of the
    difference (u), QQ^T within eta of Pi_Q, and the underflow of the products (u of S's dtype)."""
    (V, k), u = Q.shape, unit(Q)
    q2, qF = math.sqrt(1 + eta), math.sqrt(k * (1 + eta))
    norm_S = frobenius(S).hi
    outside = frobenius(S - Q @ (Q.T @ S)).hi
    rho = outside * (1 + u) + tolerance.gamma(V + k + 1, u) * qF * norm_S * (2 * q2 + qF) + eta * norm_S
    return rho + math.sqrt(V * S.shape[1]) * (V + k + 1) * underflow(S)


def subspace_gap(built: Built) -> float:
    """delta >= ||Pi_Q - Pi||_2 for the projectors on span Q and on col W* = col B (B = ``span``, of the same
    dimension k): ||(I - Pi_Q) Pi||_2 <= ||(I - Pi_Q) B||_F / sigma_k(B), with sigma_k(B) above that of the
    backend's copy (:func:`smallest_singular_value`) less its distance from B; infinite where no bound holds
    (a basis of another dimension, a defect eta >= 1, sigma_k(B) not bounded away from 0)."""
    Q, S, k = built.Q, built.span_b, built.k
    if Q.shape[1] != k or S.shape[1] != k:
        return math.inf
    eta = orthogonality_defect(Q)
    if eta >= 1:
        return math.inf
    rho = residual_bound(S, Q, eta) + built.span_error
    low = smallest_singular_value(S) - built.span_error
    gap = rho / low * (1 + ENDPOINT) if low > 0 else math.inf
    return gap if gap < 1 else math.inf


def smallest_singular_value(S: Any) -> float:
    """A lower bound on σ_min(S) for a tall S (V x k, its entries read exactly), in S's namespace: the least
    eigenvalue of the computed Gram matrix fl(SᵀS) less its error (Weyl:
    :func:`rankwall.checks.engine.tolerance.gram_eigenvalue_error`, and k V λ for products below the normal range),
    square-rooted. Cheaper than an SVD of S (V k² flops, then a k x k eigenproblem)."""
    xp = array_api_compat.array_namespace(S)
    V, k = S.shape
    least = float(xp.min(xp.linalg.eigvalsh(S.T @ S)))
    squared = frobenius(S).hi ** 2
    error = tolerance.gram_eigenvalue_error((k, V), unit(S), squared) + k * V * underflow(S)
    return math.sqrt(least - error) * (1 - ENDPOINT) if least > error else 0.0


def top_share(G: Any, k: int) -> Enclosure:
    """sum_{i <= k} sigma_i(G)^2 / ||G||_F^2 from the singular values computed in G's namespace. Weyl: each
    computed sigma is within ``svd_rank_margin`` (backward error at G's u, with ||G||_F >= sigma_1) of the
    exact one; the top sum A and the tail sum B are enclosed apart (summed in float64: gamma at float64's
    u), and the share A / (A + B) is monotone in both."""
    if k <= 0:
        return Enclosure(0.0, 0.0, 0.0)
    G = rescaled_up(G)  # a ratio of sums of squares of G: the exact scaling changes none
    sigma = singular_values(G)
    weyl = tolerance.svd_rank_margin(tuple(G.shape), unit(G), 0.0, frobenius(G).hi)
    g = tolerance.gamma(len(sigma) + 2, U64)
    top, tail = sigma[:k], sigma[k:]
    top_lo = float(np.sum(np.maximum(top - weyl, 0.0) ** 2)) * (1 - g)
    top_hi = float(np.sum((top + weyl) ** 2)) / (1 - g)
    tail_lo = float(np.sum(np.maximum(tail - weyl, 0.0) ** 2)) * (1 - g)
    tail_hi = float(np.sum((tail + weyl) ** 2)) / (1 - g)
    value = float(np.sum(top**2) / np.sum(sigma**2))
    lo = top_lo / (top_lo + tail_hi) if top_lo > 0 else 0.0
    return Enclosure.outward(value, lo, top_hi / (top_hi + tail_lo))


def alignment_slack(G: Any, W: Any, Q: Any) -> float:
    """How far below the top-k share c_Q^2 may lie, for span Q of a head W that holds the top k right
    singular vectors of G as computed by a dense SVD in G's namespace (unit roundoff u). Backward stability:
    W is within theta = svd_rank_margin(., 1) of the exact top singular vectors V' of G + E, ||E||_2 <= eps =
    theta ||G||_F. Then ||G Pi_Q||_F >= ||G V'||_F - ||G||_2 ||(I - Pi_Q) V'||_F >= sqrt(A) - 3 sqrt(k) eps -
    ||G||_F rho, with A the top-k sum of sigma_i(G)^2 and rho >= ||(I - Pi_Q) W||_F (:func:`residual_bound`),
    so c_Q^2 >= share - 2 (3 sqrt(k) eps + ||G||_F rho) / ||G||_F."""
    G = rescaled_up(G)  # a ratio of norms of G: the exact scaling changes none
    k, norm_G, u = Q.shape[1], frobenius(G), unit(G)
    eta = orthogonality_defect(Q)
    if eta >= 1:
        return math.inf
    theta = tolerance.svd_rank_margin(tuple(G.shape), u, 0.0, 1.0)
    slack = 3 * math.sqrt(k) * theta * norm_G.hi + norm_G.hi * residual_bound(W, Q, eta)
    return 2 * slack / norm_G.lo * (1 + ENDPOINT)


def exact_object_shares(built: Built) -> tuple[Enclosure, Enclosure]:
    """Enclosures of c and r of the exact object (G, W*), from those of span Q (:func:`eq1_shares`): moved
    by delta = :func:`subspace_gap` (|c_Q − c| ≤ ‖G(Π_Q − Π)‖_F/‖G‖_F ≤ δ, and so for r); for an aligned head,
    c_Q² ≤ c² = S_k/g (Ky Fan) and c² ≤ c_Q² + slack (:func:`alignment_slack`), r² = 1 − c²."""
    c, r = eq1_shares(built.G, built.Q)
    if built.aligned:
        slack = alignment_slack(built.G, built.W, built.Q)
        if not math.isfinite(slack):
            return Enclosure(c.value, *UNBOUNDED), Enclosure(r.value, *UNBOUNDED)
        hi = math.sqrt(c.hi**2 + slack)
        lo = math.sqrt(max(r.lo**2 - slack, 0.0))
        return Enclosure.outward(c.value, c.lo, min(hi, 1.0)), Enclosure.outward(r.value, lo, r.hi)
    delta = subspace_gap(built)
    moved = [Enclosure.outward(e.value, max(e.lo - delta, 0.0), e.hi + delta) for e in (c, r)]
    return moved[0], moved[1]


def descent_rates(G: Any, W: Any, head_error: float = 0.0) -> tuple[Enclosure, Enclosure]:
    """Enclosures of <G, GW*W*^T> / ||GW*W*^T||_F and ||G||_F, computed in G's namespace at its u from the head W
    the backend holds, within ``head_error`` (Frobenius) of W*. N = (GW)W^T is computed with ||N^ - N||_F <=
    gamma_{V+D} || |G||W||W|^T ||_F <= gamma_{V+D} ||G||_F ||W||_F^2, and N differs from N* = GW*W*^T by at most
    ||G||_F (2 ||W||_F e + e^2) for e = head_error; the inner product (row sums, then their sum) adds
    gamma_{V+T+1} <|G|, |N^|> <= gamma_{V+T+1} ||G||_F ||N^||_F; the quotient a/b of a = a^ +- alpha,
    b in [b_lo, b_hi] is within (alpha + |a^| max|b - b^| / b^) / b_lo of a^/b^, plus float64's u."""
    xp = array_api_compat.array_namespace(G, W)
    (T, V), D, u = G.shape, W.shape[1], unit(G)
    induced = G @ W @ W.T
    norm_G, norm_N, norm_W = frobenius(G), frobenius(induced), frobenius(W)
    lam = underflow(G)
    dN = tolerance.gamma(V + D, u) * norm_G.hi * norm_W.hi**2 + math.sqrt(T * V) * (V + D) * lam
    dN += norm_G.hi * (2 * norm_W.hi * head_error + head_error**2)
    inner = float(xp.sum(xp.sum(G * induced, axis=1)))
    d_inner = tolerance.gamma(V + T + 1, u) * norm_G.hi * norm_N.hi + norm_G.hi * dN + T * (V + 1) * lam
    b_lo, b_hi = norm_N.lo - dN, norm_N.hi + dN
    value = inner / norm_N.value if norm_N.value > 0 else 0.0
    if b_lo <= 0:
        return Enclosure(value, *UNBOUNDED), norm_G
    spread = max(norm_N.value - b_lo, b_hi - norm_N.value)
    radius = (d_inner + abs(inner) * spread / norm_N.value) / b_lo + U64 * abs(value)
    return Enclosure.outward(value, value - radius, value + radius), norm_G


def aligned_rate(G: Any, W: Any, rate: Enclosure, norm_G: Enclosure) -> Enclosure:
    """The rate of the ideal aligned head, √S_k = c‖G‖_F, from the rate of the float head W (``rate``):
    with W = U diag(s) Yᵀ, s_i² within eta of 1 (eta >= ||WᵀW − I||_2), ⟨G, GWWᵀ⟩/‖GWWᵀ‖_F = θ‖GΠ_W‖_F for a
    θ in [(1 − η)/(1 + η), (1 + η)/(1 − η)], and ‖GΠ_W‖_F lies within the alignment slack of span W below
    c‖G‖_F (:func:`alignment_slack` with span W itself): √S_k ≥ rate/θ_max and
    √S_k ≤ √((rate/θ_min)² + slack ‖G‖_F²)."""
    eta = orthogonality_defect(W)
    slack = alignment_slack(G, W, W)
    if eta >= 1 or not math.isfinite(slack) or not math.isfinite(rate.hi):
        return Enclosure(rate.value, *UNBOUNDED)
    theta_max, theta_min = (1 + eta) / (1 - eta), (1 - eta) / (1 + eta)
    lo = max(rate.lo, 0.0) / theta_max
    hi = math.sqrt((rate.hi / theta_min) ** 2 + slack * norm_G.hi**2)
    return Enclosure.outward(rate.value, lo, hi)


# --------------------------------------------------------------------------- exact routes
#
# On the exact object of the context (see the module docstring), at the working precision: G and the head's
# exact columns as integers over one power of two; g = ‖G‖_F² as a rational; K = ‖GΠ‖_F² in balls from the
# integer Gram matrix of the head's columns; the eigenvalue sums S_k of GᵀG enclosed from integer products;
# the rates from integers. Each is computed once per built case (:data:`Built.memo`).

#: The rings whose one generator stands for an atom of the instance: K = ‖GΠ‖_F² (random and low-rank
#: heads) and S = the sum of the rank-W largest eigenvalues of GᵀG (the Ky Fan share, and K of an aligned head).
PROJECTED = flint.fmpq_mpoly_ctx.get(("K",), "lex")
SPECTRAL = flint.fmpq_mpoly_ctx.get(("S",), "lex")


def remembered(built: Built, key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per built case and ``key`` (every context of that case shares it)."""
    if key not in built.memo:
        built.memo[key] = compute()
    return built.memo[key]


#: Bits of a machine word that an integer entry may fill (python-flint reads word-size Python ints fast).
WORD_BITS = 62


def dyadic_parts(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``(m, t, e)`` with X = m 2^(t + e) exactly, entry by entry: m the signed 53-bit mantissas (int64), t ≥ 0
    the shifts (0 where m = 0) and e one power of two, the least exponent of a nonzero entry; so X = Z 2^e for
    the integer matrix Z = m 2^t (:func:`integer_matrix`, :func:`row_gram`)."""
    mantissa, exponent = np.frexp(np.asarray(X, dtype=np.float64))
    m = (mantissa * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
    nonzero = m != 0
    shift = exponent.astype(np.int64) - 53
    low = int(shift[nonzero].min()) if np.any(nonzero) else 0
    return m, np.where(nonzero, shift - low, 0), low


def integer_matrix(X: np.ndarray) -> tuple[Any, int]:
    """``(Z, e)`` with X = Z 2^e exactly (:func:`dyadic_parts`): a float64 matrix as an integer matrix
    (python-flint ``fmpz_mat``) and one power of two. Entries within 2^9 of the largest binary exponent fit a
    machine word; up to 2^71, two words (Z = H 2^62 + L, H and L formed in NumPy); beyond, Python integers.
    A matrix of T x V or V x D entries as Python integers costs seconds and gigabytes at V = 131,072: the
    exact routes read G and the head through :func:`row_gram` instead."""
    m, shift, low = dyadic_parts(X)
    rows, columns = X.shape
    top = int(shift.max(initial=0))
    if top <= WORD_BITS - 53:
        return flint.fmpz_mat(rows, columns, (m << shift).ravel().tolist()), low
    if top <= 2 * WORD_BITS - 53:
        magnitude, sign = np.abs(m), np.sign(m)
        high_part = np.where(
            shift >= WORD_BITS,
            magnitude << np.maximum(shift - WORD_BITS, 0),
            magnitude >> np.clip(WORD_BITS - shift, 0, 63),
        )
        kept_bits = np.clip(WORD_BITS - shift, 0, 63)
        low_part = np.where(
            shift >= WORD_BITS, 0, (magnitude & ((np.int64(1) << kept_bits) - 1)) << np.minimum(shift, WORD_BITS)
        )
        high = flint.fmpz_mat(rows, columns, (sign * high_part).ravel().tolist())
        low_matrix = flint.fmpz_mat(rows, columns, (sign * low_part).ravel().tolist())
        return high * (1 << WORD_BITS) + low_matrix, low
    entries = (m.astype(object) << shift.astype(object)).ravel().tolist()
    return flint.fmpz_mat(rows, columns, entries), low


def dyadic(integer: Any, exponent: int) -> flint.fmpq:
    """integer · 2^exponent as a rational."""
    integer = int(integer)
    return flint.fmpq(integer << exponent) if exponent >= 0 else flint.fmpq(integer, 1 << -exponent)


#: The primes of :func:`row_gram` lie below 2^PRIME_BITS: a residue r has |r| < 2^18 and a product of two
#: below 2^36, so :data:`GRAM_CHUNK` = 2^17 of them sum below 2^53, where float64 arithmetic is exact.
PRIME_BITS = 18
GRAM_CHUNK = 1 << (53 - 2 * PRIME_BITS)
#: Columns reduced at a time by :func:`row_gram` (their residues for every prime stay in cache).
REDUCE_CHUNK = 4096


@functools.cache
def _primes(count: int) -> tuple[int, ...]:
    """The ``count`` largest primes below 2^PRIME_BITS, largest first."""
    found, n = [], (1 << PRIME_BITS) - 1
    while len(found) < count:
        if flint.fmpz(n).is_prime():
            found.append(n)
        n -= 2
    return tuple(found)


def _exponent_range(X: np.ndarray) -> tuple[int, int]:
    """(least, largest) binary exponent t − 53 of X's nonzero entries x = m 2^(t − 53) (:func:`dyadic_parts`),
    (0, 0) for a zero X; in column chunks."""
    least, largest = None, None
    for begin in range(0, X.shape[1], REDUCE_CHUNK):
        mantissa, exponent = np.frexp(X[:, begin : begin + REDUCE_CHUNK])
        exponent = exponent[mantissa != 0]
        if exponent.size:
            lo, hi = int(exponent.min()) - 53, int(exponent.max()) - 53
            least, largest = (lo, hi) if least is None else (min(least, lo), max(largest, hi))
    return (0, 0) if least is None else (least, largest)


def row_gram(blocks: list[np.ndarray]) -> np.ndarray:
    """Γ = Z Zᵀ exactly, as a NumPy array of Python integers, for Z the rows of the float64 ``blocks`` stacked
    (each n_i x V, read exactly as Z_i 2^(e_i) with its own power of two, :func:`dyadic_parts`): the integer
    Gram matrix of all their rows, Γ_ij = Σ_v Z_iv Z_jv, of order Σ n_i, with no integer matrix over V and no
    Python loop over its entries.

    Multi-modular. An entry z = m 2^t (|m| < 2^53, t ≥ 0) is m = h 2^27 + l (h = m >> 27, 0 ≤ l < 2^27), so
    z ≡ h a_t + l b_t (mod p) for a_t = 2^(t+27) mod p and b_t = 2^t mod p: an integer below 2^46 in
    magnitude, formed exactly in float64, and r = x − rint(x/p) p (the quotient's rounding leaves |r| < p) a
    residue of z with |r| < 2^18. For each prime p < 2^PRIME_BITS, Γ mod p is then a float64 product of the
    residues over chunks of at most :data:`GRAM_CHUNK` columns: every product of two residues is an integer
    below 2^36 in magnitude and every partial sum of a chunk one below 2^53, so a float64 product computed
    by additions and multiplications (BLAS's, in any order, fused or not) makes no rounding error. The residues
    for enough primes that their product exceeds 2 V max|Z|² ≥ 2 max|Γ_ij| determine Γ (Chinese remainders,
    Garner's mixed radix, then the symmetric residue)."""
    blocks = [np.asarray(b, dtype=np.float64) for b in blocks]
    n, V = sum(b.shape[0] for b in blocks), blocks[0].shape[1]
    if n == 0 or V == 0:
        return np.zeros((n, n), dtype=object)
    ranges = [_exponent_range(b) for b in blocks]
    top = max(hi - lo for lo, hi in ranges)  # the largest shift t
    bound = 2 * V * (1 << (53 + top)) ** 2
    count, product = 0, 1
    while product <= bound:
        count += 1
        product *= _primes(count)[-1]
    primes = _primes(count)
    t = np.arange(top + 1)
    a = np.array([[pow(2, int(s) + 27, p) for s in t] for p in primes], dtype=np.float64)
    b = np.array([[pow(2, int(s), p) for s in t] for p in primes], dtype=np.float64)
    grams = np.zeros((count, n, n))
    buffers = np.empty((3, n, min(REDUCE_CHUNK, V)))
    for begin in range(0, V, REDUCE_CHUNK):
        parts = [np.frexp(block[:, begin : begin + REDUCE_CHUNK]) for block in blocks]
        mantissa = np.concatenate([part[0] for part in parts])
        m = (mantissa * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
        shift = np.concatenate([part[1] - 53 - lo for part, (lo, _) in zip(parts, ranges, strict=True)])
        shift = np.where(m != 0, shift, 0)
        high, low = (m >> 27).astype(np.float64), (m & ((1 << 27) - 1)).astype(np.float64)
        r, x, y = (buffer[:, : m.shape[1]] for buffer in buffers)
        for i, p in enumerate(primes):
            np.multiply(np.take(a[i], shift, out=x, mode="clip"), high, out=x)
            np.multiply(np.take(b[i], shift, out=y, mode="clip"), low, out=y)
            np.add(x, y, out=r)
            np.rint(np.multiply(r, 1.0 / p, out=x), out=x)
            r -= np.multiply(x, p, out=x)
            grams[i] += r @ r.T
        if (begin + REDUCE_CHUNK) % GRAM_CHUNK == 0:  # GRAM_CHUNK columns summed: reduce before the next
            grams = np.fmod(grams, np.array(primes, dtype=np.float64)[:, None, None])
    x, modulus = None, 1
    for gram, p in zip(grams, primes, strict=True):
        residue = gram.astype(np.int64) % p
        if x is None:
            x, modulus = residue.astype(object), p
            continue
        inverse = pow(modulus % p, -1, p)
        x = x + modulus * ((((residue - (x % p).astype(np.int64)) % p) * inverse % p).astype(object))
        modulus *= p
    return np.where(x > modulus // 2, x - modulus, x)


def fmpz_block(gram: np.ndarray, rows: slice = slice(None), columns: slice = slice(None)) -> Any:
    """A block of an integer array (:func:`row_gram`) as a python-flint ``fmpz_mat``."""
    block = gram[rows, columns]
    return flint.fmpz_mat(block.shape[0], block.shape[1], [int(x) for x in block.ravel().tolist()])


def float64_gradient(built: Built) -> np.ndarray:
    """The built G read exactly into float64 (every float32 is a float64)."""
    return remembered(built, "G64", lambda: float64_copy(built.G))


def integer_gradient(built: Built) -> tuple[Any, int]:
    """(Z_G, e) with G = Z_G 2^e, the whole T x V integer matrix: for the tests, which compare the exact routes
    (:func:`row_gram`, over V without it) with the products of Z_G at small V."""
    return remembered(built, "ZG", lambda: integer_matrix(float64_gradient(built)))


def gradient_exponent(built: Built) -> int:
    """e with G = Z_G 2^e (:func:`dyadic_parts`)."""
    return remembered(built, "e", lambda: _exponent_range(float64_gradient(built))[0])


def _stacked_gram(built: Built) -> np.ndarray:
    """The integer Gram matrix (:func:`row_gram`) of Z_G's rows stacked on the head's exact columns Z_B
    (random and low-rank heads), over V: [[Z_G Z_Gᵀ, Z_G Z_B], [Z_Bᵀ Z_Gᵀ, Z_Bᵀ Z_B]]."""
    return remembered(built, "stacked gram", lambda: row_gram([float64_gradient(built), built.span.T]))


def integer_gram(built: Built) -> Any:
    """Γ_Z, the smaller Gram matrix of Z_G (Z_G Z_Gᵀ or Z_Gᵀ Z_G, of order min(T, V)): GGᵀ or GᵀG is Γ_Z 4^e,
    from :func:`row_gram` (the corner of the stacked Gram matrix where the head's is already there)."""

    def compute() -> Any:
        G = float64_gradient(built)
        T, V = G.shape
        if T > V:
            return fmpz_block(row_gram([G.T]))
        if built.span is not None:  # the head's integers need the stacked one
            return fmpz_block(_stacked_gram(built), slice(0, T), slice(0, T))
        return fmpz_block(row_gram([G]))

    return remembered(built, "gram", compute)


def _underflows(G: np.ndarray) -> bool:
    """Whether G has entries so small (below 2^-400) that float64 products of them leave the normal range."""
    nonzero = np.abs(G[G != 0])
    return bool(nonzero.size) and float(nonzero.min()) < 2.0**-400


def approximate_gram(built: Built) -> np.ndarray:
    """The smaller Gram matrix of G in float64 (for a float eigensolver's trial eigenvectors); from the exact
    integers scaled to floats where G's entries are so small that float64 products would underflow."""
    G = float64_gradient(built)
    if _underflows(G):
        return _scaled_float(integer_gram(built))
    return G @ G.T if G.shape[0] <= G.shape[1] else G.T @ G


def exact_total(built: Built) -> flint.fmpq:
    """g = ‖G‖_F², exactly: tr Γ_Z 4^e for the integer Gram matrix of :func:`integer_gram` (either one: both
    traces are Σ z² over Z_G's entries)."""

    def compute() -> flint.fmpq:
        gram = integer_gram(built)
        return dyadic(sum((int(gram[i, i]) for i in range(gram.nrows())), 0), 2 * gradient_exponent(built))

    return remembered(built, "g", compute)


def _atom(ring: Any, ball: Any) -> Real:
    """A number of the instance that is an atom of ``ring`` (its only generator), with its ball."""
    one = ring.from_dict({(0,): 1})
    return Real(ball, Form(ring.gens()[0], one, (ball,)))


def _between(ball: Any, low: Any, high: Any) -> Any:
    """A ball that holds a number known to lie in [low, high], narrowed to that interval."""
    lo, hi = max(ball.lower(), flint.arb(low).lower()), min(ball.upper(), flint.arb(high).upper())
    return flint.arb(lo).union(flint.arb(hi)) if lo <= hi else ball


def head_integers(built: Built) -> tuple[Any, Any]:
    """(A, M) for the exact columns B = Z_B 2^f of a random or low-rank head (W, or the factor A): the Gram
    matrix A = Z_Bᵀ Z_B and M = Z_G Z_B, integers, both blocks of one :func:`row_gram` over V."""

    def compute() -> tuple[Any, Any]:
        gram, T = _stacked_gram(built), built.G.shape[0]
        return fmpz_block(gram, slice(T, None), slice(T, None)), fmpz_block(gram, slice(0, T), slice(T, None))

    return remembered(built, "head integers", compute)


def projected_energy(built: Built) -> Real | None:
    """K = ‖GΠ‖_F² = tr(GΠGᵀ) on the exact object at the working precision: an atom (ring :data:`PROJECTED`)
    whose ball is tr(A⁻¹ MᵀM) 4^e (:func:`head_integers`; Π = Z_B A⁻¹ Z_Bᵀ), solved in balls; S_k for an
    aligned head (tr(P_k GᵀG) = S_k); g exactly where Π = I (rank W* = V), 0 where GB = 0. ``None`` where the
    balls cannot show A invertible."""

    def compute() -> Real | None:
        if built.aligned:
            return spectral_sum(built, built.k)
        V = built.G.shape[1]
        g = exact_total(built)
        if built.k == V:
            return Real.of(g)
        A, M = head_integers(built)
        C = M.transpose() * M
        if C.is_zero():
            return Real.of(0)
        try:
            trace = flint.arb_mat(A).solve(flint.arb_mat(C)).trace()
        except ZeroDivisionError:
            return None
        return _atom(PROJECTED, _between(trace * flint.arb(dyadic(1, 2 * gradient_exponent(built))), 0, g))

    return remembered(built, ("K", flint.ctx.prec), compute)


#: Up to this working precision an eigenvalue sum's ball is the Weyl enclosure of a float64 SVD
#: (:func:`weyl_sum`, the rounding model: about 2^-50 of the sum); beyond it, :func:`eigenvalue_sum`.
WEYL_BITS = 128


def float64_singular_values(built: Built) -> np.ndarray:
    """The singular values of the built G read into float64, from a float64 SVD (largest first)."""
    return remembered(built, "sigma64", lambda: np.linalg.svd(float64_gradient(built), compute_uv=False))


def weyl_margin(built: Built) -> float:
    """m ≥ |σ̂_i − σ_i(G)| for :func:`float64_singular_values` (Weyl: svd_rank_margin, the SVD's backward error
    at float64's u, with σ₁ ≤ ‖G‖_F = √g)."""
    norm = math.sqrt(float(exact_total(built))) * (1 + 4 * U64)
    return tolerance.svd_rank_margin(tuple(built.G.shape), U64, 0.0, norm)


def weyl_sum(built: Built, k: int) -> Any:
    """A ball holding S_k = Σ_{i ≤ k} σ_i(G)², from the float64 singular values of G, each within the Weyl
    margin m (:func:`weyl_margin`) of the exact one, squared and summed in float64 (gamma_{k+2} of the sum)."""
    sigma, margin = float64_singular_values(built)[:k], weyl_margin(built)
    g = tolerance.gamma(k + 2, U64)
    low = float(np.sum(np.maximum(sigma - margin, 0.0) ** 2)) * (1 - g)
    high = float(np.sum((sigma + margin) ** 2)) / (1 - g)
    return flint.arb(low).union(flint.arb(high))


def rank_exceeds(built: Built, k: int) -> bool:
    """Whether rank G > k: more than k float64 singular values above the Weyl margin prove it (two-sided); else
    rank G = rank Γ_Z for the smaller integer Gram matrix (:func:`integer_gram`; a real matrix and its Gram
    matrix have the same kernel), of order min(T, V): a rank of Γ_Z mod a prime above k proves it (reduction
    only loses rank), else the rank over the integers (fraction-free elimination) decides."""

    def compute() -> bool:
        if int(np.sum(float64_singular_values(built) > weyl_margin(built))) > k:  # certified nonzero (Weyl)
            return True
        gram = integer_gram(built)
        if flint.nmod_mat(gram, exact.RANK_PRIME).rank() > k:
            return True
        return gram.rank() > k

    return remembered(built, ("rank exceeds", k), compute)


def spectral_sum(built: Built, k: int) -> Real | None:
    """S_k, the sum of the k largest eigenvalues of GᵀG, at the working precision: 0 for k ≤ 0; g exactly for
    k ≥ min(T, V) (the trace) or k ≥ rank G (:func:`rank_exceeds`), so that a ball means S_k < g; ``None``
    beyond :data:`GRAM_LIMIT`; else a ball, an atom of :data:`SPECTRAL` for k = rank W*: up
    to :data:`WEYL_BITS` of working precision the Weyl enclosure of a float64 SVD (:func:`weyl_sum`), beyond
    it the certificate of :func:`eigenvalue_sum` in integers (Ostrowski, Ky Fan, the block bound)."""

    def compute() -> Real | None:
        T, V = built.G.shape
        if k <= 0:
            return Real.of(0)
        g = exact_total(built)
        if k >= min(T, V):
            return Real.of(g)
        if min(T, V) > GRAM_LIMIT:
            return None
        if not rank_exceeds(built, k):  # the k largest eigenvalues are all there are
            return Real.of(g)
        weyl = flint.ctx.prec <= WEYL_BITS and not _underflows(float64_gradient(built))
        if weyl:
            ball = weyl_sum(built, k)
        else:
            ball = eigenvalue_sum(integer_gram(built), approximate_gram(built), k)
        if ball is None:
            return None
        if not weyl:
            ball = ball * flint.arb(dyadic(1, 2 * gradient_exponent(built)))
        ball = _between(ball, 0, g)
        return _atom(SPECTRAL, ball) if k == built.k else Real(ball)

    return remembered(built, ("S", k, flint.ctx.prec), compute)


def _scaled_float(Z: Any) -> np.ndarray:
    """An integer matrix times one power of two as floats of magnitude at most about 1 (for a float
    eigensolver: the eigenvectors do not depend on the scale)."""
    entries = [int(x) for x in Z.entries()]
    drop = max(max((abs(x).bit_length() for x in entries), default=0) - 60, 0)
    return np.array([x >> drop if x >= 0 else -((-x) >> drop) for x in entries], dtype=np.float64).reshape(
        Z.nrows(), Z.ncols()
    )


def _refined(gram: Any, X: Any) -> Any:
    """One step of Ogita and Aishima's refinement of the eigenvectors X of a symmetric matrix (2018), in balls:
    with R = I − XᵀX and S = XᵀΓX, λ_i = s_ii/(1 − r_ii) and E_ij = (s_ij + λ_j r_ij)/(λ_j − λ_i) for eigenvalues
    further apart than δ = 2(‖S − diag λ‖_F + max|λ| ‖R‖_F), r_ij/2 within a cluster; X + XE (its midpoints) is
    accurate to the square of X's error, between clusters."""
    n = X.nrows()
    identity = flint.arb_mat([[1 if i == j else 0 for j in range(n)] for i in range(n)])
    R, S = identity - X.transpose() * X, X.transpose() * gram * X
    r, s = [x.mid() for x in R.entries()], [x.mid() for x in S.entries()]
    lam = [s[i * n + i] / (1 - r[i * n + i]) for i in range(n)]
    off = math.sqrt(sum(float(s[i * n + j]) ** 2 for i in range(n) for j in range(n) if i != j))
    delta = 2 * (off + max(abs(float(x)) for x in lam) * math.sqrt(sum(float(x) ** 2 for x in r)))
    E = []
    for i in range(n):
        for j in range(n):
            gap = lam[j] - lam[i]
            far = i != j and abs(float(gap)) > delta
            E.append((s[i * n + j] + lam[j] * r[i * n + j]) / gap if far else r[i * n + j] / 2)
    step = X + X * flint.arb_mat(n, n, E)
    return flint.arb_mat(n, n, [x.mid() for x in step.entries()])


#: Bits after the binary point of the trial eigenvectors (fixed point): finer than float64's own error.
TRIAL_BITS = 60


def _fixed_point(values: list[Any], bits: int) -> list[int]:
    """Numbers (arb midpoints) rounded to integers times 2^-bits."""
    out = []
    for x in values:
        mantissa, exponent = (int(v) for v in x.mid().man_exp())
        shift = exponent + bits
        out.append(
            mantissa << shift if shift >= 0 else -((-mantissa) >> -shift) if mantissa < 0 else mantissa >> -shift
        )
    return out


def trial_basis(gram: Any, approximate: np.ndarray) -> tuple[Any, int]:
    """(Z_X, s): a trial basis of eigenvectors X = Z_X 2^s of the integer Gram matrix Γ, largest eigenvalue
    first: those of its float64 copy ``approximate`` in fixed point, refined in balls beyond 128 bits
    (:func:`_refined` on Γ, one step per doubling of the 45 bits a float start gives). Any X serves: the
    bounds of :func:`eigenvalue_sum` hold for every nonsingular one, and only their width depends on it."""
    values, vectors = np.linalg.eigh(approximate)
    X = vectors[:, np.argsort(values)[::-1]]
    steps = math.ceil(math.log2(flint.ctx.prec / 45)) - 1 if flint.ctx.prec > 128 else 0
    if steps <= 0:
        fixed = np.rint(X * 2.0**TRIAL_BITS).astype(np.int64)
        return flint.fmpz_mat(X.shape[0], X.shape[1], fixed.ravel().tolist()), -TRIAL_BITS
    drop = max(max(abs(int(x)).bit_length() for x in gram.entries()) - 60, 0)
    scaled = flint.arb_mat(gram) * flint.arb(dyadic(1, -drop))  # the exact Γ, at the working precision
    Xb = flint.arb_mat(X.tolist())
    for _ in range(steps):
        Xb = _refined(scaled, Xb)
    bits = flint.ctx.prec
    return flint.fmpz_mat(Xb.nrows(), Xb.ncols(), _fixed_point(Xb.entries(), bits)), -bits


def _trace(M: Any) -> int:
    return sum((int(M[i, i]) for i in range(M.nrows())), 0)


def _block(entries: list[Any], n: int, rows: range, columns: range) -> Any:
    return flint.fmpz_mat([[entries[i * n + j] for j in columns] for i in rows])


def eigenvalue_sum(gram: Any, approximate: np.ndarray, k: int) -> Any:
    """A ball at the working precision holding S_k(Γ), the sum of the k largest eigenvalues of the symmetric
    positive semidefinite integer matrix Γ (1 ≤ k < its order n), from a trial basis X (:func:`trial_basis`)
    made orthonormal to second order, X₁ = X + X(I − XᵀX)/2 rounded to fixed point, all in integers; then,
    for S = X₁ᵀΓX₁ and e ≥ ‖X₁ᵀX₁ − I‖_F (so e < 1):

    - Ostrowski: λ_i(S) = θ_i λ_i(Γ) with θ_i ∈ [1 − e, 1 + e], so S_k(Γ) ∈ [S_k(S)/(1 + e), S_k(S)/(1 − e)];
    - Ky Fan: S_k(S) ≥ the sum of any k diagonal entries of S;
    - with S split into blocks H₁ (the first k), H₂ and the coupling C, and η = λ_min(H₁) − λ_max(H₂) > 0
      (each bounded by Weyl from the blocks' diagonals and off-diagonal norms), S_k(S) ≤ tr H₁ + ‖C‖_F²/η: for
      orthonormal U = [U₁; U₂], t = ‖U₂‖_F², tr(UᵀSU) ≤ tr H₁ − ηt + 2‖C‖_F√t ≤ tr H₁ + ‖C‖_F²/η;
    - where η ≤ 0 (a cluster across the k-th eigenvalue), Ky Fan and Weyl: S_k(S) ≤ the sum of the k largest
      diagonal entries plus k‖S − diag S‖_F.

    ``None`` where e ≥ 1."""
    n = gram.nrows()
    ZX, s = trial_basis(gram, approximate)
    q = -2 * s  # XᵀX = N 2^-q
    N = ZX.transpose() * ZX
    residual = flint.fmpz_mat([[(1 << q if i == j else 0) for j in range(n)] for i in range(n)]) - N
    bits = q  # X₁ = (2 Z_X 2^q + Z_X R) 2^(s - q - 1), rounded to 2^-bits
    Z1 = ZX * (2 << q) + ZX * residual
    Z1 = flint.fmpz_mat(n, n, [int(x) >> (q + 1 - s - bits) for x in Z1.entries()])  # floor to 2^-bits
    s1 = -bits
    defect = Z1.transpose() * Z1 - flint.fmpz_mat(
        [[(1 << (-2 * s1) if i == j else 0) for j in range(n)] for i in range(n)]
    )
    e = (flint.arb(_trace(defect * defect)) * flint.arb(dyadic(1, 4 * s1))).sqrt()  # X₁ᵀX₁ − I = defect 4^s1
    if not e < 1:
        return None
    S = Z1.transpose() * gram * Z1  # X₁ᵀΓX₁ = S 4^s1
    entries = S.entries()
    diagonal = [int(entries[i * n + i]) for i in range(n)]
    ranked = sorted(diagonal, reverse=True)
    diagonal_squares = [d * d for d in diagonal]
    top, bottom = range(k), range(k, n)
    head_block, tail_block = _block(entries, n, top, top), _block(entries, n, bottom, bottom)
    coupling_block = _block(entries, n, top, bottom)
    head = _trace(head_block * head_block) - sum(diagonal_squares[:k])
    tail = _trace(tail_block * tail_block) - sum(diagonal_squares[k:])
    coupling = _trace(coupling_block * coupling_block.transpose())
    eta = flint.arb(min(diagonal[:k])) - flint.arb(head).sqrt() - flint.arb(max(diagonal[k:])) - flint.arb(tail).sqrt()
    if eta > 0:
        upper = flint.arb(sum(diagonal[:k])) + flint.arb(coupling) / eta
    else:
        upper = flint.arb(sum(ranked[:k])) + k * flint.arb(head + tail + 2 * coupling).sqrt()
    scale = flint.arb(dyadic(1, 2 * s1))
    low = (flint.arb(max(sum(diagonal[:k]), sum(ranked[:k]))) * scale / (1 + e)).lower()
    high = (upper * scale / (1 - e)).upper()
    return flint.arb(max(low, flint.arb(0).lower())).union(flint.arb(high))


def exact_rates(built: Built) -> tuple[Real, Real] | None:
    """(⟨G, GW*W*ᵀ⟩/‖GW*W*ᵀ‖_F, ‖G‖_F) on the exact object. For a random or low-rank head, in integers: with
    G = Z_G 2^e and W* ∝ Z_W (Z_A Z_B for a low-rank head; the rate is invariant under W* → sW*), M = Z_G Z_W,
    a = ‖M‖_F² and b = tr(M (Z_Wᵀ Z_W) Mᵀ), the rate is √(a²/b · 4^e) (0 where b = 0: no update reaches the
    logits) and ‖G‖_F = √g; both square roots of rationals, compared through their radicands. For an aligned
    head, W*W*ᵀ = P_k: the rate is √S_k."""
    norm = Real.of(exact_total(built)).sqrt()
    if built.aligned:
        S = spectral_sum(built, built.k)
        return None if S is None else (S.sqrt(), norm)

    def rate() -> Real:
        A, M = head_integers(built)
        if built.factors is not None:  # W* ∝ Z_A Z_B: M Z_B and Z_Bᵀ A Z_B
            ZB = integer_matrix(built.factors[1])[0]
            A, M = ZB.transpose() * A * ZB, M * ZB
        a = sum(int(x) ** 2 for x in M.entries())
        product = M * A * M.transpose()
        b = sum(int(product[i, i]) for i in range(product.nrows()))
        e = gradient_exponent(built)
        return Real.of(0) if b == 0 else Real.of(Fraction(a * a, b) * Fraction(4) ** e).sqrt()

    return remembered(built, "rate", rate), norm


def _scaled_root(expression: Quantity, ctx: Context) -> tuple[Fraction, Real] | None:
    """``(c, x)`` with the exact value of ``expression`` equal to c·√x, c ≥ 0 rational: a rate quantity (its
    exact value a square root), a nonnegative rational constant times one, or a nonnegative constant (x = 1)."""
    if isinstance(expression, Constant):
        return (expression.value, Real.of(1)) if expression.value >= 0 else None
    if isinstance(expression, Combination) and expression.op == "*":
        a, b = expression.operands
        constant, other = (a, b) if isinstance(a, Constant) else (b, a) if isinstance(b, Constant) else (None, None)
        if constant is None or other is None or constant.value < 0:
            return None
        inner = _scaled_root(other, ctx)
        return None if inner is None else (constant.value * inner[0], inner[1])
    if any(expression is q for q in (descent_along_update, descent_along_gradient)):
        value = expression.exact(ctx)
        if value is None:
            return None
        return (Fraction(1), value.radicand) if value.radicand is not None else (Fraction(1), value * value)
    return None


def _against_trace(y: Real, x: Real, c2: Fraction, built: Built) -> int | None:
    """sign(y − c²x) where one of y, x is S_k of an aligned head (a ball: then rank G > k, so 0 ≤ S_k < g) and
    the other is g: decided by that structure where c² is on the side it settles, else ``None``."""
    if not built.aligned:
        return None
    S = spectral_sum(built, built.k)
    g = exact_total(built)
    if S is None or S.rational:
        return None
    if y is S and x.rational and x.value == g:  # sign(S − c²g): S < g ≤ c²g for c² ≥ 1
        return -1 if c2 >= 1 else None
    if x is S and y.rational and y.value == g:  # sign(g − c²S): g > S ≥ c²S for c² ≤ 1
        return 1 if c2 <= 1 else None
    return None


def _compare_rates(base: Any) -> Callable[[Context, Real, Quantity], Compared | None]:
    """The comparison hook of a rate quantity: sign(√y − c√x) = sign(y − c²x) for its exact value √y and a
    bound c·√x (:func:`_scaled_root`), decided on the radicands: exactly where they are rationals, or by the
    trace bound S_k < g of an aligned head (:func:`_against_trace`), else in balls."""

    def compare(ctx: Context, t: Real, expression: Quantity) -> Compared | None:
        own, other = base.exact(ctx), _scaled_root(expression, ctx)
        if own is None or other is None:
            return None
        y = own.radicand if own.radicand is not None else own * own
        c, x = other
        structural = _against_trace(y, x, c * c, built_in(ctx))
        if structural is not None:
            return Compared(structural, "the trace bound S_k < ‖G‖_F² (rank G > k), exactly", True)
        found, how = difference_sign(Real.of(c * c) * x, y)
        if found is None:
            return None
        exactly = how in EXACT_HOWS
        return Compared(found, "square roots compared exactly" if exactly else f"radicands, {how}", exactly)

    return compare


# --------------------------------------------------------------------------- references
#
# Every quantity the slow, obviously right way on the context's exact object, sharing nothing with the float
# and exact routes but the built arrays (small V only: the tests run them at V <= 64): ‖G‖_F² summed entry by
# entry in rationals; the exact head as a dense rational matrix (W, or the product A·B), its rank and a column
# basis from its reduced row echelon form; the V x V projector Π = B(BᵀB)⁻¹Bᵀ formed in balls at
# REFERENCE_BITS + 64 bits, and GΠ, G − GΠ and GW*W*ᵀ summed entry by entry; the eigenvalues of the smaller
# Gram matrix of G from Arb's certified eigensolver at REFERENCE_BITS (the exact characteristic polynomial's
# roots where it cannot isolate them), for the Ky Fan shares and an aligned head (whose projector is the
# top-k spectral one).

#: Guard bits of the reference's ball products beyond mpmath's working precision.
REFERENCE_GUARD = 64


def _mp(x: Any) -> Any:
    """A ball's midpoint (or a rational) as an mpmath number."""
    if isinstance(x, flint.fmpq):
        return mpmath.mpf(int(x.p)) / int(x.q)
    mantissa, exponent = x.mid().man_exp()
    return mpmath.mpf((int(mantissa), int(exponent)))


def _rational_matrix(X: np.ndarray) -> Any:
    return flint.fmpq_mat(X.shape[0], X.shape[1], [flint.fmpq(*x.as_integer_ratio()) for x in X.ravel().tolist()])


def _squares(M: Any) -> Any:
    return sum((x * x for x in M.entries()), flint.arb(0))


def dense_total(built: Built) -> Fraction:
    """‖G‖_F², entry by entry in rationals."""

    def compute() -> Fraction:
        total = sum(
            (flint.fmpq(*x.as_integer_ratio()) ** 2 for x in float64_gradient(built).ravel().tolist()), flint.fmpq(0)
        )
        return Fraction(int(total.p), int(total.q))

    return remembered(built, "dense total", compute)


def dense_head(built: Built) -> tuple[Any, int, list[int]]:
    """The exact head of a random or low-rank case as a dense rational matrix (W, or the product A·B), its
    rank and the pivot columns of its reduced row echelon form (a basis of its column space)."""

    def compute() -> tuple[Any, int, list[int]]:
        if built.factors is None:
            head = _rational_matrix(built.span)
        else:
            head = _rational_matrix(built.factors[0]) * _rational_matrix(built.factors[1])
        echelon, rank = head.rref()
        pivots = [next(j for j in range(head.ncols()) if echelon[i, j] != 0) for i in range(rank)]
        return head, rank, pivots

    return remembered(built, "dense head", compute)


def dense_shares(built: Built) -> tuple[Any, Any]:
    """(‖GΠ‖_F², ‖G − GΠ‖_F²): for an aligned head S_k and ‖G‖_F² − S_k (the reference's eigenvalues); else
    the V x V projector Π = B(BᵀB)⁻¹Bᵀ on the pivot columns B of the dense head, formed in balls, and GΠ,
    G − GΠ summed entry by entry (Π = I where the head has rank V)."""

    def compute() -> tuple[Any, Any]:
        total = dense_total(built)
        if built.aligned:  # Π = P_k: GΠ keeps the k largest eigenvalues of GᵀG, G − GΠ the others
            if built.k >= min(built.G.shape):
                return total, Fraction(0)
            return _eigenvalue_sum(built, slice(0, built.k)), _eigenvalue_sum(built, slice(built.k, None))
        head, rank, pivots = dense_head(built)
        if rank == head.nrows():  # col W* is all of R^V: Π = I
            return total, Fraction(0)
        with exact.precision(mpmath.mp.prec + REFERENCE_GUARD):
            Gm = ball_matrix(float64_gradient(built))
            B = flint.arb_mat([[flint.arb(head[i, j]) for j in pivots] for i in range(head.nrows())])
            kept_part = Gm * (B * (B.transpose() * B).inv() * B.transpose())
            return _mp(_squares(kept_part)), _mp(_squares(Gm - kept_part))

    return remembered(built, ("dense shares", mpmath.mp.prec), compute)


def dense_rate(built: Built) -> Any:
    """⟨G, GW*W*ᵀ⟩/‖GW*W*ᵀ‖_F: √S_k for an aligned head (W*W*ᵀ = P_k), else from the dense GW*W*ᵀ in balls,
    entry by entry (0 where GW* = 0)."""

    def compute() -> Any:
        if built.aligned:
            return _root(dense_shares(built)[0])
        head = dense_head(built)[0]
        with exact.precision(mpmath.mp.prec + REFERENCE_GUARD):
            Gm = ball_matrix(float64_gradient(built))
            Wm = flint.arb_mat([[flint.arb(head[i, j]) for j in range(head.ncols())] for i in range(head.nrows())])
            induced = Gm * Wm * Wm.transpose()
            inner = sum((a * b for a, b in zip(Gm.entries(), induced.entries(), strict=True)), flint.arb(0))
            size = _squares(induced)
            return _mp(inner / size.sqrt()) if size != 0 else Fraction(0)

    return remembered(built, ("dense rate", mpmath.mp.prec), compute)


def dense_rank(built: Built) -> int:
    """rank W*: the dense head's (k for an aligned head, the ideal head's k orthonormal columns)."""
    return built.W.shape[1] if built.aligned else dense_head(built)[1]


def ball_matrix(X: np.ndarray) -> Any:
    """A float64 matrix as a python-flint ball matrix, its entries exact."""
    return flint.arb_mat(X.tolist())


@functools.lru_cache(maxsize=64)
def _gram_eigenvalues(data: bytes, shape: tuple[int, int], bits: int) -> tuple[tuple[Any, Any], ...]:
    """The eigenvalues of the smaller Gram matrix of G (GGᵀ or GᵀG) at ``bits``, largest first, each as its
    ball's (midpoint, radius): Arb's certified eigensolver, or, where it cannot isolate them (tied singular
    values), the real roots of the exact characteristic polynomial with their multiplicities."""
    G = np.frombuffer(data, dtype=np.float64).reshape(shape)
    T, V = shape
    with exact.precision(bits):
        Gm = ball_matrix(G)
        try:
            gram = Gm.transpose() * Gm if V <= T else Gm * Gm.transpose()
            values = [e.real for e in flint.acb_mat(gram).eig(multiple=True)]
        except ValueError:
            Gq = _rational_matrix(G)
            polynomial = (Gq.transpose() * Gq if V <= T else Gq * Gq.transpose()).charpoly()
            values = [root.real for root, multiplicity in polynomial.complex_roots() for _ in range(multiplicity)]
        pairs = [(_mp(v), _mp(flint.arb(v.rad()))) for v in values]
        return tuple(sorted(pairs, key=lambda pair: pair[0], reverse=True))


def _eigenvalue_sum(built: Built, indices: slice) -> Any:
    """The sum of the reference's eigenvalues in ``indices`` (largest first), with the sum of their radii:
    an :class:`~rankwall.checks.engine.quantities.Approximately` (exact zeros come out as balls around 0)."""
    G = float64_gradient(built)
    chosen = _gram_eigenvalues(G.tobytes(), G.shape, mpmath.mp.prec)[indices]
    value = mpmath.fsum(mid for mid, _ in chosen)
    error = mpmath.fsum(rad for _, rad in chosen) + abs(value) * mpmath.mpf(2) ** (8 - mpmath.mp.prec)
    return Approximately(max(value, mpmath.mpf(0)), error)


def dense_share(built: Built, k: int) -> Any:
    """Σ_{i ≤ k} σ_i(G)²/‖G‖_F² from the reference's eigenvalues (1 for k ≥ min(T, V), 0 for k ≤ 0)."""
    G = float64_gradient(built)
    if k >= min(G.shape):
        return Fraction(1)
    if k <= 0:
        return Fraction(0)
    return _ratio(_eigenvalue_sum(built, slice(0, k)), dense_total(built))


def _number(x: Any) -> Any:
    """A Fraction as an mpmath number at the working precision (an mpmath number as it is)."""
    return mpmath.mpf(x.numerator) / x.denominator if isinstance(x, Fraction) else x


def _root(x: Any) -> Any:
    """√x at mpmath's working precision (a Fraction read exactly); for x known within e, √x within
    max(√(x + e) − √x, √x − √(max(x − e, 0)))."""
    if isinstance(x, Approximately):
        value, error = _number(x.value), _number(x.error)
        root = mpmath.sqrt(value)
        return Approximately(root, max(mpmath.sqrt(value + error) - root, root - mpmath.sqrt(max(value - error, 0))))
    return mpmath.sqrt(_number(x))


def _ratio(a: Any, b: Any) -> Any:
    """a/b for b > 0 exact: a Fraction where both are, else at mpmath's working precision (a's error over b)."""
    if isinstance(a, Approximately):
        return Approximately(_number(a.value) / _number(b), _number(a.error) / _number(b))
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a / b
    return _number(a) / _number(b)


# --------------------------------------------------------------------------- the quantities


def _quantity(name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **options: Any) -> Any:
    return quantity(name, measure, exact_fn, family=FAMILY, **options)


def _shares(ctx: Context) -> tuple[Enclosure, Enclosure]:
    built = built_in(ctx)
    return remembered(built, "shares", lambda: exact_object_shares(built))


def _rates(ctx: Context) -> tuple[Enclosure, Enclosure]:
    built = built_in(ctx)

    def compute() -> tuple[Enclosure, Enclosure]:
        rate, norm = descent_rates(built.G, built.W, built.head_error)
        return (aligned_rate(built.G, built.W, rate, norm) if built.aligned else rate), norm

    return remembered(built, "rates", compute)


def _exact_share(ctx: Context, kept: bool) -> Real | None:
    """c = √(K/g) or r = √((g − K)/g) (:func:`projected_energy`)."""
    built = built_in(ctx)
    K = projected_energy(built)
    if K is None:
        return None
    g = Real.of(exact_total(built))
    return ((K if kept else g - K) / g).sqrt()


def _pinned(value: Any) -> int | None:
    return value.lo if isinstance(value, RankInterval) and value.pinned else None


def singular_share(count: Quantity) -> Any:
    """The quantity Σ_{i ≤ n} σ_i(G)²/‖G‖_F² for the integer quantity n = ``count`` (rank W for the Ky Fan
    share, :data:`best_share`): measured from the backend's singular values of G with Weyl margins
    (:func:`top_share`), exactly as S_n/g (:func:`spectral_sum`; an atom for n = rank W*)."""

    def measure(ctx: Context) -> Measured:
        n, built = _pinned(count.measure(ctx)), built_in(ctx)
        if n is None:
            return Measured(math.nan, math.inf)
        return remembered(built, ("top share", n), lambda: top_share(built.G, n)).measured()

    def exact_value(ctx: Context) -> Real | None:
        n, built = _pinned(count.exact(ctx)), built_in(ctx)
        S = None if n is None else spectral_sum(built, n)
        return None if S is None else S / Real.of(exact_total(built))

    return _quantity(
        f"Σ_{{i ≤ {count}}} σ_i(G)²/‖G‖_F²",
        measure,
        exact_value,
        reference=lambda ctx: dense_share(built_in(ctx), int(count.reference(ctx))),
        doc=f"the share of ‖G‖_F² in G's {count} largest singular values",
        exact_doc="S_n/g, S_n the sum of the n largest eigenvalues of GᵀG certified in balls (an atom for n = rank W)",
    )


surviving = _quantity(
    "c",
    lambda ctx: _shares(ctx)[0].measured(),
    lambda ctx: _exact_share(ctx, kept=True),
    reference=lambda ctx: _root(_ratio(dense_shares(built_in(ctx))[0], dense_total(built_in(ctx)))),
    doc="c = ‖GΠ‖_F/‖G‖_F, the share of the logit gradient kept (Π the projector on col W)",
    exact_doc="√(K/g), K = ‖GΠ‖_F² an atom (S_k for an aligned head)",
)
destroyed = _quantity(
    "r",
    lambda ctx: _shares(ctx)[1].measured(),
    lambda ctx: _exact_share(ctx, kept=False),
    reference=lambda ctx: _root(_ratio(dense_shares(built_in(ctx))[1], dense_total(built_in(ctx)))),
    doc="r = ‖G − GΠ‖_F/‖G‖_F, the share destroyed in ker Wᵀ",
    exact_doc="√((g − K)/g): ‖G − GΠ‖_F² = tr(G(I − Π)Gᵀ) = g − K",
)
rank_W = _quantity(
    "rank W",
    lambda ctx: built_in(ctx).rank,
    lambda ctx: built_in(ctx).rank,
    reference=lambda ctx: dense_rank(built_in(ctx)),
    integer=True,
    doc="the dimension of col W",
    exact_doc="certified when the case is built: singular values above a Weyl margin, or structure",
)
vocabulary = _quantity(
    "V",
    lambda ctx: RankInterval(ctx.case.V, ctx.case.V, "the case", "the case", exact=True),
    lambda ctx: RankInterval(ctx.case.V, ctx.case.V, "the case", "the case", exact=True),
    reference=lambda ctx: ctx.case.V,
    integer=True,
    doc="the vocabulary size V",
    exact_doc="the case's V",
)
best_share = singular_share(rank_W)
descent_along_update = _quantity(
    "⟨G, GWWᵀ⟩/‖GWWᵀ‖_F",
    lambda ctx: _rates(ctx)[0].measured(),
    lambda ctx: None if exact_rates(built_in(ctx)) is None else exact_rates(built_in(ctx))[0],
    reference=lambda ctx: dense_rate(built_in(ctx)),
    doc="the first-order loss decrease per unit of logit-update norm along the H-update's direction −GWWᵀ",
    exact_doc="√(a²/b · 4^e) in integers of G and W (√S_k for an aligned head)",
)
descent_along_gradient = _quantity(
    "‖G‖_F",
    lambda ctx: _rates(ctx)[1].measured(),
    lambda ctx: Real.of(exact_total(built_in(ctx))).sqrt(),
    reference=lambda ctx: _root(dense_total(built_in(ctx))),
    doc="the steepest first-order decrease, along −G",
    exact_doc="√g",
)
descent_along_update.compare_fn = _compare_rates(descent_along_update)
descent_along_gradient.compare_fn = _compare_rates(descent_along_gradient)


# --------------------------------------------------------------------------- witnesses, drawn cases, boundary classes


def _witnesses(V: int, aligned: bool = False) -> list[BatchGradient]:
    """Random and low-rank heads (aligned ones for the attained claim) at vocabulary size V, then the edges of
    the statements: an aligned head of rank below V (Ky Fan's equality), one spanning G's rows (GWWᵀ = G: the
    equality of Cauchy-Schwarz, and c² = 1), tied singular values (logit scale 0), saturated rows (scale 30), a
    single token through a single column, and a full head (D = V, so Π = I, where V ≤ 64). Beyond
    :data:`SPREAD_V` they run at that size, and two at V itself (the first random head and the aligned edge):
    the exact routes read V only through small Gram matrices, but each case at V = 131,072 costs seconds."""
    at_V = (
        [
            BatchGradient(V=V, D=32, tokens=96, seed=32, scale=1.0, aligned=aligned),
            BatchGradient(V=V, D=8, tokens=24, seed=3, aligned=True),
        ]
        if V > SPREAD_V
        else []
    )
    V = min(V, SPREAD_V)
    heads = ((min(32, V - 1) or 1, None), (min(128, V - 1) or 1, min(16, V - 1) or 1), (min(8, V - 1) or 1, None))
    cases = [
        BatchGradient(V=V, D=D, rank=rank, tokens=96, seed=D + s, scale=scale, aligned=aligned)
        for D, rank in heads
        for s, scale in ((0, 1.0), (1, 10.0))
    ]
    small = min(8, V - 1) or 1
    cases += [
        BatchGradient(V=V, D=small, tokens=24, seed=3, aligned=True),
        BatchGradient(V=V, D=min(8, V), tokens=3, seed=4, aligned=True),
        BatchGradient(V=V, D=small, tokens=24, seed=6, scale=0.0, aligned=aligned),
        BatchGradient(V=V, D=small, tokens=24, seed=7, scale=30.0, aligned=aligned),
        BatchGradient(V=V, D=1, tokens=1, seed=8, aligned=aligned),
    ]
    if not aligned:
        cases.append(BatchGradient(V=V, D=min(V, 64), tokens=24, seed=5))
    return list(dict.fromkeys(cases + at_V))


def _aligned_witnesses(V: int) -> list[BatchGradient]:
    return _witnesses(V, aligned=True)


def _mixed_instances() -> Any:
    return compression_instances(aligned=None)


def _aligned_instances() -> Any:
    return compression_instances(aligned=True)


def random_batches(V: int, n: int, seed: int, aligned: bool = False) -> list[BatchGradient]:
    """``n`` drawn batch gradients at vocabulary size min(V, :data:`SPREAD_V`), seeded NumPy draws: D from 1 to
    min(V/2, 64), a low-rank head half the time (an aligned one for ``aligned``), 1 to 64 tokens, logit
    scale 0.1 to 10."""
    V, rng = min(V, SPREAD_V), np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        D = int(rng.integers(1, max(1, min(V // 2, 64)) + 1))
        low = not aligned and bool(rng.integers(2))
        cases.append(
            BatchGradient(
                V=V,
                D=D,
                rank=int(rng.integers(1, D + 1)) if low else None,
                tokens=int(rng.integers(1, 65)),
                seed=int(rng.integers(2**16)),
                scale=float(rng.choice((0.1, 1.0, 10.0))),
                aligned=aligned,
            )
        )
    return cases


def _boundary(aligned: bool) -> dict[str, Callable[[BatchGradient], bool]]:
    """The boundary classes of the family's cases (``aligned``: of the aligned heads alone)."""
    classes: dict[str, Callable[[BatchGradient], bool]] = {
        "V = 2 or 3": lambda c: c.V <= 3,
        "one to three tokens": lambda c: c.tokens <= 3,
        "one to three head columns": lambda c: c.D <= 3,
        "an aligned head spanning G's rows (D ≥ min(tokens, V))": lambda c: c.aligned and c.D >= min(c.tokens, c.V),
        "tied singular values (logit scale 0)": lambda c: c.scale == 0,
        "saturated rows (logit scale 100)": lambda c: c.scale == 100,
        "large V (at least 1,024)": lambda c: c.V >= 1024,
    }
    if not aligned:
        classes |= {
            "a full head (D = V, Π = I)": lambda c: c.D == c.V and not c.aligned and c.rank in (None, c.D),
            "a low-rank head (rank < D)": lambda c: c.rank is not None and c.rank < c.D,
            "an aligned head (Ky Fan's equality)": lambda c: c.aligned,
        }
    return classes


#: Where the claims of this family range: batch gradients through random, low-rank or aligned heads, and
#: through heads aligned with the gradient's top singular subspace alone.
#: Measured 5,682 bytes per entry at V = 131,072 (ky-fan-attained), rounded up by a quarter.
BYTES_PER_ENTRY = 7_200
batch_gradients = Cases(
    _mixed_instances,
    _witnesses,
    random_batches,
    _boundary(aligned=False),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
aligned_heads = Cases(
    _aligned_instances,
    _aligned_witnesses,
    lambda V, n, seed: random_batches(V, n, seed, aligned=True),
    _boundary(aligned=True),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)


# --------------------------------------------------------------------------- the claims
#
# The exact re-decisions (integer Gram matrices over V by residues, then balls and eigenvalue sums on matrices of
# order at most T + D) cost O(V (T + D)²) per prime; the default verify runs at V = 64 and --V runs any size.

DEFAULT_V = 64

pythagoras = declare(
    "compression.pythagoras",
    source=f"{SEED_000}, Eq. 1 (§2.4, §3.3)",
    title="What the head destroys and what survives add up in squares",
    statement="r² + c² = 1 for r = ‖G − GΠ‖_F/‖G‖_F (destroyed in ker Wᵀ) and c = ‖GΠ‖_F/‖G‖_F (surviving)",
    domain="G the frequency-weighted cross-entropy logit gradient of a batch; W random, low rank, or aligned",
    lhs=destroyed**2 + surviving**2,
    relation="==",
    rhs=1,
    cases=batch_gradients,
    default_V=DEFAULT_V,
)
ky_fan_attained = declare(
    "compression.ky-fan-attained",
    source="rankwall (equality case of compression.ky-fan)",
    title="A head aligned with the gradient's top singular subspace keeps the best share",
    statement="c² = Σ_{i ≤ D} σ_i(G)² / ‖G‖_F² when col W is spanned by G's top D right singular vectors",
    domain="aligned heads W = (top D right singular vectors of G)",
    lhs=surviving**2,
    relation="==",
    rhs=best_share,
    cases=aligned_heads,
    default_V=DEFAULT_V,
)
ky_fan = declare(
    "compression.ky-fan",
    source="rankwall (links Eq. 1 to Prop. A.6 through Ky Fan's maximum principle)",
    title="No head keeps more than the best rank-D share of the gradient",
    statement="c² ≤ Σ_{i ≤ rank W} σ_i(G)² / ‖G‖_F², with equality when col W is G's top right singular subspace",
    domain="as for compression.pythagoras",
    lhs=surviving**2,
    relation="<=",
    rhs=best_share,
    cases=batch_gradients,
    default_V=DEFAULT_V,
)
efficiency = declare(
    "compression.update-efficiency",
    source=f"{SEED_000}, §3.4 (Figure 6, to first order)",
    title="The update that reaches the logits descends no faster than the logit gradient",
    statement="⟨G, GWWᵀ⟩/‖GWWᵀ‖_F ≤ ‖G‖_F: per unit of logit-update norm, the H-update's loss decrease is at most "
    "that along −G",
    domain="as for compression.pythagoras",
    lhs=descent_along_update,
    relation="<=",
    rhs=descent_along_gradient,
    cases=batch_gradients,
    default_V=DEFAULT_V,
)
pythagoras.with_mutant(
    "r-plus-c-is-1",
    statement="r + c = 1  (false: r² + c² = 1, so r + c > 1 whenever both are positive)",
    lhs=destroyed + surviving,
)
ky_fan.with_mutant(
    "one-value-fewer",
    statement="c² ≤ Σ_{i < rank W} σ_i(G)² / ‖G‖_F²  (false: an aligned head keeps the rank-W-th value too)",
    rhs=singular_share(rank_W - 1),
    cases=aligned_heads,
)
ky_fan.with_mutant(
    "dimension-share",
    statement="c² ≤ rank W / V  (false: that is only what a random head keeps on average)",
    rhs=rank_W / vocabulary,
)
ky_fan_attained.with_mutant(
    "top-D-minus-1",
    statement="c² = Σ_{i < D} σ_i(G)² / ‖G‖_F² for aligned heads  (false: the D-th value is kept too)",
    rhs=singular_share(rank_W - 1),
)
efficiency.with_mutant(
    "update-beats-gradient",
    statement="‖G‖_F ≤ ⟨G, GWWᵀ⟩/‖GWWᵀ‖_F: the H-update descends at least as fast as −G  (false: Cauchy–Schwarz)",
    lhs=descent_along_gradient,
    rhs=descent_along_update,
    # Where the head spans G's rows (k ≥ min(T, V)) the ideal aligned head makes GW*W*ᵀ = G: the two rates are
    # equal and the mutant holds there, so its witnesses are the others.
    witnesses=lambda V: [i for i in _witnesses(V) if not (i.aligned and i.D >= min(i.tokens, i.V))],
)

#: The theorems and lemmas of ``docs/compression.md`` (collected by ``checks/companion/fidelity.py``).
_TESTS = "tests/test_compression.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-compression", "CO.1", "compression", "seed 000, Eq. 1 (lost), §3.3, §3.4", Kind.NEW,
              ("compression.pythagoras", "compression.ky-fan", "compression.ky-fan-attained",
               "compression.update-efficiency"),
              (_TESTS + "TestProjection", _TESTS + "TestEquationOne", _TESTS + "TestEnclosuresHoldTheExactQuantities",
               "tests/test_efficiency_anatomy.py::test_kernel_times_anisotropy_is_the_total"),
              "(c) in its strongest form, e_H <= c||G||_F"),
)  # fmt: skip
