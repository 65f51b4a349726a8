"""Claims ``compression.*``: Eq. 1 (the share of the logit gradient destroyed by the head), its
Ky Fan ceiling, and the first-order efficiency of the update that reaches the logits (§3.4).

Every side is measured on its own, never through the statement or its hypotheses, and comes
with an :class:`Enclosure`: the value computed in the backend and an interval that holds the exact
quantity, built from the rounding model of ``checks/tolerance.py`` (Higham's gamma for sums and
products, the backward error of a dense SVD with Weyl's inequality for singular values) at the unit
roundoff of the backend's dtype; the endpoints themselves are computed in Python floats, so their
own outward push (``ENDPOINT``) is float64's. The tolerance of
a measurement is the sum of the two radii, so a margin beyond it decides in either direction:
``rhs - lhs > tol`` holds, ``rhs - lhs < -tol`` is a certified violation (the exact sides lie in
disjoint intervals), anything in between is undecided. The exact quantities are those of the
stored G (computed in float64, rounded to the backend's dtype) and of the projector Pi on the span
of the computed basis Q (of dimension ``rank W``), which is orthonormal only up to a measured defect eta.

Backends: every claim follows ``--backend``. G and W are rounded to the backend's dtype, and the
projection, norms, singular values and products are computed in its namespace. The basis of col W
is the pivoted QR of :func:`rankwall.theory.compression.column_basis` on NumPy float64 and the SVD's
left singular vectors above a Weyl margin (:func:`rankwall.theory.compression.svd_column_basis`)
elsewhere, since the array API's QR has no pivoting; no enclosure assumes more of Q than its measured
defect eta, and Ky Fan's principle holds for every subspace, so the substitute changes no bound.
Underflow (float32's normal range ends at 2^-126) is outside the relative model: each bound adds an
absolute lambda per product that may underflow (:func:`underflow`). A
margin inside its tolerance is re-decided by the judges from a NumPy float64 measurement.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "BatchGradient",
    "aligned_heads",
    "batch_gradients",
    "best_share",
    "descent_along_gradient",
    "descent_along_update",
    "destroyed",
    "rank_W",
    "surviving",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance
from rankwall.checks.backends import Backend, float64_copy, singular_values
from rankwall.checks.quantities import Context, Measured, quantity
from rankwall.checks.toolkit import Cases, Family, Reference, numpy_float64, planted_exactly, planted_side, two_sided
from rankwall.checks.verdict import (
    EXACT_IDENTITY_V,
    Case,
    Certification,
    Judgement,
    Measurement,
    OutsideDomain,
    RankInterval,
    Relation,
)
from rankwall.theory import compression as cp

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

    def __add__(self, other: Enclosure) -> Enclosure:
        return Enclosure.outward(self.value + other.value, self.lo + other.lo, self.hi + other.hi)

    def scaled(self, factor: float) -> Enclosure:
        """Times a nonnegative factor."""
        return Enclosure.outward(self.value * factor, self.lo * factor, self.hi * factor)

    def planted(self, factor: Fraction) -> Enclosure:
        """The enclosed side of an identity moved by ``factor`` (:func:`planted_side`, monotone in v)."""
        if factor == 1:
            return self
        return Enclosure.outward(*(planted_side(x, factor) for x in (self.value, self.lo, self.hi)))

    def squared(self) -> Enclosure:
        """The square of a nonnegative quantity."""
        return Enclosure.outward(self.value**2, max(self.lo, 0.0) ** 2, self.hi**2)

    def to_json(self) -> list[float]:
        return [self.value, self.lo, self.hi]


def unit(X: Any) -> float:
    """The unit roundoff u of the dtype X was computed in (float32's for a float32 backend)."""
    return tolerance.unit_roundoff(X.dtype)


def label(backend: Backend | None) -> str:
    """Where a measurement ran: backend name and dtype."""
    b = numpy_float64() if backend is None else backend
    return f"{b.name} {b.dtype_name}"


def gradient(case: BatchGradient, backend: Backend | None = None) -> tuple[Any, Any, Any]:
    """(G, W, Q) in the backend (NumPy float64 by default): the frequency-weighted logit gradient of a
    batch and the head, computed in float64 and rounded to the backend's dtype (the exact quantities
    are those of the rounded arrays), and a basis of col W. An ``aligned`` head is G's top D right
    singular vectors from the backend's SVD. The basis is the pivoted QR of
    :func:`rankwall.theory.compression.column_basis` on NumPy float64 (the route the experiments use),
    elsewhere the SVD basis of :func:`rankwall.theory.compression.svd_column_basis` (the array API has no
    pivoted QR): either way the claims are about the span of the computed Q, orthonormal to a measured eta.

    The constructor guarantees a nonzero G and a head of its stated rank (D, the drawn ``rank`` of a
    low-rank head, or the columns of an aligned one); built values that break either (every softmax row
    saturated at its target, a basis of another dimension) are :class:`OutsideDomain`."""
    backend = numpy_float64() if backend is None else backend
    W = cp.construct_head(case.V, case.D, case.seed, rank=case.rank)
    H, targets = cp.construct_batch(case.tokens, W.shape[1], case.V, case.seed + 1, scale=case.scale)
    G = backend.asarray(np.concatenate(list(cp.logit_gradient_blocks(H, W, targets))))
    if case.aligned:
        right = backend.xp.linalg.svd(G, full_matrices=False)[2]  # min(tokens, V) rows: at most D of them
        W = right[: min(case.D, right.shape[0]), :].T
    else:
        W = backend.asarray(W)
    if backend.name == "numpy" and backend.dtype_name == "float64":
        Q = cp.column_basis(W)[0]
    else:
        Q = cp.svd_column_basis(W)[0]
    violation = domain_violation(case, G, W, Q)
    if violation is not None:
        raise OutsideDomain(f"batch-gradient (V = {case.V}, D = {case.D}) in {label(backend)}: {violation}")
    return G, W, Q


def head_rank(case: BatchGradient, columns: int) -> int:
    """The rank the constructor guarantees for the head: its columns (D, or fewer for an aligned head
    of a batch with fewer tokens or V), or the drawn rank of a low-rank head W = AB."""
    return columns if case.rank is None or case.aligned else min(case.rank, columns)


def domain_violation(case: BatchGradient, G: Any, W: Any, Q: Any) -> str | None:
    """Why the built G, W and basis Q leave the domain the constructor guarantees, or ``None``."""
    xp = array_api_compat.array_namespace(G)
    if not bool(xp.any(G != 0)):
        return "the logit gradient is zero (every softmax row saturated at its target): no share is defined"
    expected = head_rank(case, W.shape[1])
    if Q.shape[1] != expected:
        return f"the built head has numerical rank {Q.shape[1]}, not the {expected} its constructor guarantees"
    return None


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


def eq1_norms(G: Any, Q: Any) -> tuple[float, float]:
    """(c, r) in G's namespace, as :func:`rankwall.theory.compression.compression` computes them:
    row norms of G, C = GQ and R = G - CQ^T, their sums of squares, two quotients and two roots."""
    xp = array_api_compat.array_namespace(G, Q)
    C = G @ Q
    norms, kept, lost = (xp.linalg.vector_norm(X, axis=1) for X in (G, C, G - C @ Q.T))
    total = xp.sum(norms * norms)
    return float(xp.sqrt(xp.sum(kept * kept) / total)), float(xp.sqrt(xp.sum(lost * lost) / total))


def eq1_shares(G: Any, Q: Any) -> tuple[Enclosure, Enclosure]:
    """Enclosures of c = ||G Pi||_F / ||G||_F and r = ||G - G Pi||_F / ||G||_F, their values from
    :func:`eq1_norms` in G's namespace, every gamma at its unit roundoff u. With C = GQ and R = G - CQ^T as
    computed there: ||C^ - GQ||_F <= gamma_V ||G||_F ||Q||_F, ||R^ - (G - GQQ^T)||_F <= gamma_k ||C^||_F ||Q||_F +
    ||C^ - GQ||_F ||Q||_2 + u ||R^||_F; then ||GQ||_F^2 is ||G Pi||_F^2 (1 +- eta), and GQQ^T differs
    from G Pi by at most eta ||G Pi||_F (QQ^T = Pi + Q_o(SS^T - I)Q_o^T for Q = Q_o S)."""
    (T, V), k = G.shape, Q.shape[1]
    u = unit(G)
    cosine, destroyed = eq1_norms(G, Q)
    eta = orthogonality_defect(Q)
    if eta >= 1:
        unbounded = (0.0, math.inf)
        return Enclosure(cosine, *unbounded), Enclosure(destroyed, *unbounded)
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


def top_share(G: Any, k: int) -> Enclosure:
    """sum_{i <= k} sigma_i(G)^2 / ||G||_F^2 from the singular values computed in G's namespace. Weyl: each
    computed sigma is within ``svd_rank_margin`` (backward error at G's u, with ||G||_F >= sigma_1) of the
    exact one; the top sum A and the tail sum B are enclosed apart (summed in float64: gamma at float64's
    u), and the share A / (A + B) is monotone in both."""
    sigma = singular_values(G)
    if k <= 0:
        return Enclosure(0.0, 0.0, 0.0)
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


def dimension_share(G: Any, k: int) -> Enclosure:
    """k / V, one rounding."""
    value = k / G.shape[1]
    return Enclosure.outward(value, value, value)


def alignment_slack(G: Any, W: Any, Q: Any) -> float:
    """How far below the top-k share c^2 may lie when W holds the top k right singular vectors of
    G as computed by a dense SVD in G's namespace (unit roundoff u). Backward stability: W is within
    theta = svd_rank_margin(., 1) of the exact top singular vectors V' of G + E, ||E||_2 <= eps =
    theta ||G||_F. Then ||G Pi||_F >= ||G V'||_F - ||G||_2 ||(I - Pi) V'||_F >= sqrt(A) - 3 sqrt(k) eps -
    ||G||_F rho, with A the top-k sum of sigma_i(G)^2 and rho >= ||(I - Pi) W||_F (measured, with the
    rounding of W - Q(Q^T W) and the defect eta of Q), so c^2 >= share - 2 (3 sqrt(k) eps + ||G||_F rho) / ||G||_F."""
    (V, k), norm_G, u = Q.shape, frobenius(G), unit(G)
    eta = orthogonality_defect(Q)
    theta = tolerance.svd_rank_margin(tuple(G.shape), u, 0.0, 1.0)
    q2, qF = math.sqrt(1 + eta), math.sqrt(k * (1 + eta))
    norm_W = frobenius(W).hi
    outside = frobenius(W - Q @ (Q.T @ W)).hi
    rho = outside * (1 + u) + tolerance.gamma(V + k + 1, u) * qF * norm_W * (2 * q2 + qF) + eta * norm_W
    rho += math.sqrt(V * W.shape[1]) * (V + k + 1) * underflow(W)
    slack = 3 * math.sqrt(k) * theta * norm_G.hi + norm_G.hi * rho
    return 2 * slack / norm_G.lo * (1 + ENDPOINT)


def descent_rates(G: Any, W: Any) -> tuple[Enclosure, Enclosure]:
    """Enclosures of <G, GWW^T> / ||GWW^T||_F and ||G||_F, computed in G's namespace at its u.
    N = (GW)W^T is computed with ||N^ - N||_F <= gamma_{V+D} || |G||W||W|^T ||_F <= gamma_{V+D} ||G||_F ||W||_F^2;
    the inner product (row sums, then their sum) adds gamma_{V+T+1} <|G|, |N^|> <= gamma_{V+T+1} ||G||_F ||N^||_F;
    the quotient a/b of a = a^ +- alpha, b in [b_lo, b_hi] is within
    (alpha + |a^| max|b - b^| / b^) / b_lo of a^/b^, plus float64's u for the division."""
    xp = array_api_compat.array_namespace(G, W)
    (T, V), D, u = G.shape, W.shape[1], unit(G)
    induced = G @ W @ W.T
    norm_G, norm_N = frobenius(G), frobenius(induced)
    lam = underflow(G)
    dN = tolerance.gamma(V + D, u) * norm_G.hi * frobenius(W).hi ** 2 + math.sqrt(T * V) * (V + D) * lam
    inner = float(xp.sum(xp.sum(G * induced, axis=1)))
    d_inner = tolerance.gamma(V + T + 1, u) * norm_G.hi * norm_N.hi + norm_G.hi * dN + T * (V + 1) * lam
    b_lo, b_hi = norm_N.lo - dN, norm_N.hi + dN
    value = inner / norm_N.value if norm_N.value > 0 else 0.0
    if b_lo <= 0:
        return Enclosure(value, -math.inf, math.inf), norm_G
    spread = max(norm_N.value - b_lo, b_hi - norm_N.value)
    radius = (d_inner + abs(inner) * spread / norm_N.value) / b_lo + U64 * abs(value)
    return Enclosure.outward(value, value - radius, value + radius), norm_G


# --------------------------------------------------------------------------- exact routes
#
# A margin inside its tolerance is re-decided on the NumPy float64 instance, its stored G, W and Q read
# exactly: the shares in balls (python-flint ``arb``) with Π = Q(QᵀQ)⁻¹Qᵀ, which is exactly the
# orthogonal projector on span Q (Q is orthonormal only up to its defect η); the Ky Fan share from a
# certified eigensolver on the Gram matrix of G; the descent rates exactly, in integers.

#: Precisions (bits) of the ball re-decisions; an identity that the first leaves undecided holds within it.
BALL_PRECISIONS = (128, 512)
#: Largest Gram matrix of G, of order min(tokens, V), whose eigenvalues a re-decision encloses: the
#: certified dense eigensolver is O(n³), about three seconds at this order.
BALL_GRAM_LIMIT = 96


def ball_affordable(case: BatchGradient) -> bool:
    """Whether the ball re-decision of the Ky Fan share runs on this case (see :data:`BALL_GRAM_LIMIT`)."""
    return case.V <= EXACT_IDENTITY_V and min(case.tokens, case.V) <= BALL_GRAM_LIMIT


@functools.lru_cache(maxsize=16)
def float64_gradient(case: BatchGradient) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`gradient` on NumPy float64, once per case: the instance every exact route reads."""
    return gradient(case)


def ball_matrix(X: Any) -> Any:
    """A matrix of exact balls (python-flint ``arb_mat``): a float array read as the rationals it holds."""
    return flint.arb_mat(float64_copy(X).tolist())


def squares(M: Any) -> Any:
    """The sum of the squares of a ball matrix's entries."""
    return sum((x * x for x in M.entries()), flint.arb(0))


def trace(M: Any) -> Any:
    """The sum of a square ball matrix's diagonal."""
    return sum((M[i, i] for i in range(M.nrows())), flint.arb(0))


def nonnegative_root(x: Any) -> Any:
    """√x for a ball whose exact value is nonnegative (its lower end may dip below 0 by rounding)."""
    if x > 0:
        return x.sqrt()
    top = x.upper()
    return flint.arb(0).union(top.sqrt()) if top > 0 else flint.arb(0)


@functools.lru_cache(maxsize=32)
def ball_shares(case: BatchGradient, bits: int) -> tuple[Any, Any, Any]:
    """(‖GΠ‖_F², ‖G − GΠ‖_F², ‖G‖_F²) in balls at ``bits`` on the float64 instance, Π = Q(QᵀQ)⁻¹Qᵀ: the kept
    part as tr(C(QᵀQ)⁻¹Cᵀ) with C = GQ, the lost part summed entry by entry from G − C(QᵀQ)⁻¹Qᵀ."""
    G, _, Q = float64_gradient(case)
    with exact.precision(bits):
        Gb, Qb = ball_matrix(G), ball_matrix(Q)
        C = Gb * Qb
        X = (Qb.transpose() * Qb).solve(C.transpose())
        return trace(C * X), squares(Gb - X.transpose() * Qb.transpose()), squares(Gb)


def top_sum(values: list[Any], k: int) -> Any:
    """Σ of the k largest of the exact numbers that ``values`` (balls) enclose: the i-th largest lies between
    the i-th largest lower end and the i-th largest upper end, whatever the order of the balls."""
    lows = sorted((v.lower() for v in values), key=lambda x: x.mid(), reverse=True)[:k]
    highs = sorted((v.upper() for v in values), key=lambda x: x.mid(), reverse=True)[:k]
    return sum(lows, flint.arb(0)).union(sum(highs, flint.arb(0)))


@functools.lru_cache(maxsize=32)
def ball_top_share(case: BatchGradient, k: int, bits: int) -> Any:
    """Σ_{i ≤ k} σ_i(G)² / ‖G‖_F² in balls at ``bits`` on the float64 instance, from python-flint's certified
    eigensolver (clusters allowed) on the smaller Gram matrix of G (:func:`top_sum`); 1 exactly when k is
    at least its order; ``None`` where the eigensolver cannot enclose the eigenvalues."""
    G = float64_gradient(case)[0]
    if k >= min(G.shape):
        return flint.fmpq(1)
    with exact.precision(bits):
        Gb = ball_matrix(G)
        gram = Gb * Gb.transpose() if G.shape[0] <= G.shape[1] else Gb.transpose() * Gb
        try:
            values = [e.real for e in flint.acb_mat(gram).eig(multiple=True)]
        except ValueError:
            return None
        return top_sum(values, k) / squares(Gb)


def integer_matrix(X: np.ndarray) -> tuple[Any, int]:
    """``(Z, e)`` with X = Z 2^e exactly: a float64 matrix as an integer matrix (python-flint ``fmpz_mat``)
    and one power of two."""
    mantissa, exponent = np.frexp(np.asarray(X, dtype=np.float64))
    m = (mantissa * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
    shift = exponent.astype(np.int64) - 53
    low = int(shift[m != 0].min()) if np.any(m != 0) else 0
    entries = [a << (b - low) if a else 0 for a, b in zip(m.ravel().tolist(), shift.ravel().tolist(), strict=True)]
    return flint.fmpz_mat(X.shape[0], X.shape[1], entries), low


def ball_judgement(lhs: Any, rhs: Any, sign: int | None, method: str) -> Judgement:
    """The judgement of two balls: decided (two-sided) where their difference excludes 0, else undecided
    with the radius of the difference (an identity then holds within it, never by fiat)."""
    kind = None if sign is None else Certification.TWO_SIDED
    radius = exact.radius(rhs - lhs)
    return Judgement(exact.to_float(lhs), exact.to_float(rhs), sign, method, radius, certified_by=kind)


@functools.lru_cache(maxsize=16)
def exact_rates(case: BatchGradient) -> tuple[int, int, int, int]:
    """(a, b, g, e) in integers on the float64 instance, G = Z_G 2^e and W = Z_W 2^f: a = ‖Z_G Z_W‖_F²
    (⟨G, GWWᵀ⟩ = ‖GW‖_F² = a 2^(2e+2f)), b = tr(Z_G Z_W (Z_Wᵀ Z_W) Z_Wᵀ Z_Gᵀ) (‖GWWᵀ‖_F² = b 2^(2e+4f)) and
    g = ‖Z_G‖_F² (‖G‖_F² = g 2^(2e)); so ⟨G, GWWᵀ⟩/‖GWWᵀ‖_F = (a/√b) 2^e and ‖G‖_F = √g 2^e."""
    G, W, _ = float64_gradient(case)
    (ZG, e), (ZW, _) = integer_matrix(G), integer_matrix(W)
    M = ZG * ZW
    a = sum(int(x) ** 2 for x in M.entries())
    product = M * (ZW.transpose() * ZW) * M.transpose()
    b = sum(int(product[i, i]) for i in range(product.nrows()))
    return a, b, sum(int(x) ** 2 for x in ZG.entries()), e


def _measurement(lhs: Enclosure, rhs: Enclosure, method: str, slack: float = 0.0, **certificate: Any) -> Measurement:
    """Both sides and the tolerance: their radii plus any slack the hypotheses leave."""
    certificate = {"lhs_enclosure": lhs.to_json(), "rhs_enclosure": rhs.to_json(), **certificate}
    tol = lhs.radius + rhs.radius + slack
    return Measurement(lhs.value, rhs.value, tol, method, certificate, certified_by=Certification.TWO_SIDED)


def basis(backend: Backend | None) -> str:
    """The route to the basis of col W on this backend (see :func:`gradient`)."""
    b = numpy_float64() if backend is None else backend
    return "pivoted-QR" if b.name == "numpy" and b.dtype_name == "float64" else "SVD-basis"


def measure_pythagoras(case: BatchGradient, backend: Backend | None, factor: Fraction, power: int = 2) -> Measurement:
    """r^power + c^power, enclosed from the two shares, against 1."""
    G, _, Q = gradient(case, backend)
    c, r = eq1_shares(G, Q)
    lhs = c.squared() + r.squared() if power == 2 else c + r
    one = Enclosure(1.0, 1.0, 1.0).planted(factor)
    method = f"{label(backend)} {basis(backend)} projection, lost and kept enclosed apart"
    return _measurement(lhs, one, method, rank_W=Q.shape[1])


def judge_pythagoras(case: BatchGradient, factor: Fraction, power: int = 2) -> Judgement:
    """r^2 + c^2 (or r + c) against 1 in balls on the float64 instance (:func:`ball_shares`): sides that
    differ are decided (two-sided); sides that agree to the balls' radius stay undecided with that radius,
    so that the identity holds within rounding (about 2^-128 of the sides), never by fiat."""
    bits = BALL_PRECISIONS[0]
    kept, lost, total = ball_shares(case, bits)
    with exact.precision(bits):
        c2, r2 = kept / total, lost / total
        lhs = c2 + r2 if power == 2 else nonnegative_root(c2) + nonnegative_root(r2)
        rhs = planted_exactly(flint.fmpq(1), factor)
        sign = exact.sign(rhs - lhs)
    return ball_judgement(lhs, rhs, sign, f"{bits}-bit balls on the float64 instance, Π = Q(QᵀQ)⁻¹Qᵀ, r² and c² apart")


Ceiling = Callable[[Any, int], Enclosure]


def measure_ky_fan(
    case: BatchGradient, backend: Backend | None, factor: Fraction, ceiling: Ceiling | None = None
) -> Measurement:
    """c^2 from the QR projection against factor x the ceiling: by default the top rank-W share
    from the singular values (:func:`top_share`), a mutant's otherwise."""
    G, _, Q = gradient(case, backend)
    c2 = eq1_shares(G, Q)[0].squared()
    bound = (ceiling or top_share)(G, Q.shape[1]).scaled(float(factor))
    method = f"{label(backend)} {basis(backend)} projection vs SVD share (Weyl)"
    return _measurement(c2, bound, method, rank_W=Q.shape[1])


def judge_ky_fan(case: BatchGradient, factor: Fraction, ceiling: Ceiling | None = None) -> Judgement:
    """A basis Q of V columns spans R^V, so Pi = I and c^2 = 1 = share exactly: the sign is that of
    factor - 1. Otherwise the two-sided margin of the float64 measurement where it decides (always, for
    a mutant's ceiling), else c^2 (:func:`ball_shares`) against factor x the top rank-W share
    (:func:`ball_top_share`) in balls at rising precision, for a Gram matrix of G of order at most
    :data:`BALL_GRAM_LIMIT` and V up to :data:`rankwall.checks.verdict.EXACT_IDENTITY_V` (an aligned head
    keeps the share to second order in its alignment error, far below the float tolerance)."""
    m = measure_ky_fan(case, None, factor, ceiling)
    k = m.certificate["rank_W"]
    if k == case.V and ceiling is None:
        method = "structural (rank W = V, so the projector is the identity)"
        return Judgement(1.0, float(factor), (factor > 1) - (factor < 1), method, certified_by=Certification.EXACT)
    float_margin = two_sided(m, Relation.AT_MOST)
    if float_margin.sign is not None or ceiling is not None or not ball_affordable(case):
        return float_margin
    for bits in BALL_PRECISIONS:
        share = ball_top_share(case, k, bits)
        if share is None:
            return float_margin
        kept, _, total = ball_shares(case, bits)
        with exact.precision(bits):
            lhs, rhs = kept / total, exact.fmpq_of(factor) * share
            sign = exact.sign(rhs - lhs)
        if sign is not None:
            break
    method = f"{bits}-bit balls on the float64 instance: c² with Π = Q(QᵀQ)⁻¹Qᵀ, the share by a certified eigensolver"
    return ball_judgement(lhs, rhs, sign, method)


def measure_ky_fan_attained(
    case: BatchGradient, backend: Backend | None, factor: Fraction, drop: int = 0
) -> Measurement:
    """c^2 from the QR projection against the top (rank W - drop) share, with the slack that the
    head's alignment, true only to the SVD's backward error, leaves (:func:`alignment_slack`)."""
    G, W, Q = gradient(case, backend)
    c2 = eq1_shares(G, Q)[0].squared()
    share = top_share(G, Q.shape[1] - drop).planted(factor)
    slack = alignment_slack(G, W, Q)
    method = f"{label(backend)} {basis(backend)} projection vs SVD share (Weyl), aligned to backward error"
    return _measurement(c2, share, method, slack, rank_W=Q.shape[1], alignment_slack=slack)


def judge_ky_fan_attained(case: BatchGradient, factor: Fraction, drop: int = 0) -> Judgement:
    """The two-sided margin of :func:`measure_ky_fan_attained` (an identity)."""
    return two_sided(measure_ky_fan_attained(case, None, factor, drop), Relation.EQUAL)


def measure_efficiency(
    case: BatchGradient, backend: Backend | None, factor: Fraction, reverse: bool = False
) -> Measurement:
    """First-order loss decrease rates, per unit of logit-update norm: along -G it is ||G||_F
    (steepest descent); along the direction the H-update produces, -GWW^T, it is
    <G, GWW^T> / ||GWW^T||_F (Cauchy-Schwarz bounds it by ||G||_F). ``reverse`` swaps the sides."""
    G, W, _ = gradient(case, backend)
    along_induced, along_gradient = descent_rates(G, W)
    lhs, rhs = (along_gradient, along_induced) if reverse else (along_induced, along_gradient)
    efficiency = along_induced.value / along_gradient.value
    method = f"{label(backend)} directional derivatives"
    return _measurement(lhs, rhs.scaled(float(factor)), method, efficiency=efficiency)


def judge_efficiency(case: BatchGradient, factor: Fraction, reverse: bool = False) -> Judgement:
    """The two-sided margin of :func:`measure_efficiency` where it decides; otherwise (an update that
    nearly follows G, as through an aligned head spanning G's rows) exactly, in integers, for V up to
    :data:`rankwall.checks.verdict.EXACT_IDENTITY_V`: with a = ⟨G, GWWᵀ⟩ = ‖GW‖_F² ≥ 0, b = ‖GWWᵀ‖_F² and
    g = ‖G‖_F², "a/√b ≤ F√g" is "a² ≤ F² g b" (``reverse``: "F² a² ≥ g b")."""
    m = measure_efficiency(case, None, factor, reverse)
    float_margin = two_sided(m, Relation.AT_MOST)
    if float_margin.sign is not None or case.V > EXACT_IDENTITY_V:
        return float_margin
    inner, induced, total, exponent = exact_rates(case)
    p, q = factor.numerator, factor.denominator
    if induced == 0:  # GW = 0: no update reaches the logits, the rate is 0
        rate_squared, sign = Fraction(0), (1 if not reverse else -1)
    else:
        rate_squared = Fraction(int(inner) ** 2, int(induced))
        gap = p * p * total * induced - q * q * inner**2 if not reverse else p * p * inner**2 - q * q * total * induced
        sign = (gap > 0) - (gap < 0)
    with mpmath.workdps(30):
        scale = mpmath.mpf(2) ** exponent
        rate = float(mpmath.sqrt(mpmath.mpf(rate_squared.numerator) / rate_squared.denominator) * scale)
        norm = float(mpmath.sqrt(mpmath.mpf(int(total))) * scale)
    lhs, rhs = (norm, float(factor) * rate) if reverse else (rate, float(factor) * norm)
    method = "exact integers on the float64 instance: ⟨G, GWWᵀ⟩² against F²‖G‖_F²‖GWWᵀ‖_F²"
    return Judgement(lhs, rhs, sign, method, certified_by=Certification.EXACT)


def _witnesses(V: int, aligned: bool = False) -> list[BatchGradient]:
    """Random and low-rank heads (aligned ones for the attained claim) at vocabulary size V (capped at
    4,096), then the edges of the statements: an aligned head of rank below V (Ky Fan's equality), one
    spanning G's rows (GWWᵀ = G: the equality of Cauchy-Schwarz, and c² = 1), tied singular values (logit
    scale 0), saturated rows (scale 30), a single token through a single column, and a full head (D = V,
    so Π = I, where V ≤ 64)."""
    V = min(V, 4096)
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
    return list(dict.fromkeys(cases))


def _aligned_witnesses(V: int) -> list[BatchGradient]:
    return _witnesses(V, aligned=True)


def _mixed_instances() -> Any:
    return compression_instances(aligned=None)


def _aligned_instances() -> Any:
    return compression_instances(aligned=True)


def random_batches(V: int, n: int, seed: int, aligned: bool = False) -> list[BatchGradient]:
    """``n`` drawn batch gradients at vocabulary size V (capped at 4,096), seeded NumPy draws: D from 1 to
    min(V/2, 64), a low-rank head half the time (an aligned one for ``aligned``), 1 to 64 tokens, logit
    scale 0.1 to 10."""
    V, rng = min(V, 4096), np.random.default_rng(seed)
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


# --------------------------------------------------------------------------- references
#
# Both sides the slow, obviously right way on the instance as the backend built it (its G, W and Q read
# exactly), at V <= 64, sharing no code with the measure or the judges: python-flint balls at 128 bits
# on the dense matrices, the V x V projector Π = Q(QᵀQ)⁻¹Qᵀ formed and GΠ, G − GΠ summed entry by entry,
# the head's rank exactly over the integers (the constructor's for a low-rank head W = AB), the Ky Fan
# share from a certified dense eigensolver on GᵀG or GGᵀ, the rates from the dense GWWᵀ. The reference
# also requires span Q to hold the head's columns to √u of the backend's dtype (a wrong basis misses by
# O(1)), and to have the head's dimension.

REFERENCE_BITS = 128


@dataclass(frozen=True)
class DenseBatch:
    """The reference quantities of a case, balls at :data:`REFERENCE_BITS`."""

    kept: Any  # ‖GΠ‖_F²
    lost: Any  # ‖G − GΠ‖_F²
    total: Any  # ‖G‖_F²
    rate: Any  # ⟨G, GWWᵀ⟩ / ‖GWWᵀ‖_F
    rank: int  # of the head
    G: tuple[bytes, tuple[int, ...]]  # the built G, for the share

    @property
    def share(self) -> Any:
        """Σ_{i ≤ rank W} σ_i(G)² / ‖G‖_F²."""
        return dense_share(self.G, self.rank)


def dense_batch(case: BatchGradient, backend: Backend) -> DenseBatch:
    """The reference quantities of ``case`` as ``backend`` built it (see the section's comment)."""
    G, W, Q = (float64_copy(X) for X in gradient(case, backend))
    u = tolerance.unit_roundoff(backend.dtype)
    return _dense_batch(case, u, *((X.tobytes(), X.shape) for X in (G, W, Q)))


def _array(data: tuple[bytes, tuple[int, ...]]) -> np.ndarray:
    return np.frombuffer(data[0], dtype=np.float64).reshape(data[1])


@functools.lru_cache(maxsize=64)
def _dense_batch(case: BatchGradient, u: float, *arrays: tuple[bytes, tuple[int, ...]]) -> DenseBatch:
    G, W, Q = (_array(a) for a in arrays)
    V, columns = G.shape[1], W.shape[1]
    if case.rank is None or case.aligned:
        scaled = [int(x) for x in (np.frexp(W)[0] * 2.0**53).astype(np.int64).ravel().tolist()]
        exponents = np.frexp(W)[1].ravel().tolist()
        low = min(exponents)
        rank = flint.fmpz_mat(V, columns, [m << (e - low) for m, e in zip(scaled, exponents, strict=True)]).rank()
    else:
        rank = case.rank
    with exact.precision(REFERENCE_BITS):
        Gm, Wm, Qm = (flint.arb_mat(X.tolist()) for X in (G, W, Q))
        projector = Qm * (Qm.transpose() * Qm).inv() * Qm.transpose()
        kept_part = Gm * projector
        lost_part = Gm - kept_part
        kept = sum((x * x for x in kept_part.entries()), flint.arb(0))
        lost = sum((x * x for x in lost_part.entries()), flint.arb(0))
        total = sum((x * x for x in Gm.entries()), flint.arb(0))
        outside = sum((x * x for x in (Wm - projector * Wm).entries()), flint.arb(0))
        inside = sum((x * x for x in Wm.entries()), flint.arb(0))
        if Q.shape[1] != rank or not outside < u * inside:
            raise ValueError(
                f"reference: span Q (dimension {Q.shape[1]}) is not the column space of the head (rank {rank})"
            )
        induced = Gm * Wm * Wm.transpose()
        inner = sum((g * n for g, n in zip(Gm.entries(), induced.entries(), strict=True)), flint.arb(0))
        induced_norm = sum((x * x for x in induced.entries()), flint.arb(0))
        rate = inner / induced_norm.sqrt() if induced_norm > 0 else flint.arb(0)
        return DenseBatch(kept, lost, total, rate, rank, arrays[0])


@functools.lru_cache(maxsize=64)
def dense_share(G_data: tuple[bytes, tuple[int, ...]], rank: int) -> Any:
    """The top-``rank`` share of G from the eigenvalues of its Gram matrix (:func:`gram_eigenvalues`): the
    i-th largest eigenvalue lies between the i-th largest lower and upper ends of the enclosures."""
    G = _array(G_data)
    if rank >= min(G.shape):
        return flint.arb(1)
    with exact.precision(REFERENCE_BITS):
        eigenvalues = gram_eigenvalues(G)
        low_sum = sum(sorted((e.lower() for e in eigenvalues), key=lambda x: -x.mid())[:rank], flint.arb(0))
        high_sum = sum(sorted((e.upper() for e in eigenvalues), key=lambda x: -x.mid())[:rank], flint.arb(0))
        return low_sum.union(high_sum) / sum((x * x for x in G.ravel().tolist()), flint.arb(0))


def gram_eigenvalues(G: np.ndarray) -> list[Any]:
    """The eigenvalues of the smaller Gram matrix of G (GᵀG or GGᵀ), with multiplicity, as balls at the
    working precision: python-flint's certified eigensolver, or, where it cannot isolate them (tied
    singular values, as from repeated rows of G), the real roots of the exact characteristic polynomial."""
    T, V = G.shape
    Gm = flint.arb_mat(G.tolist())
    try:
        gram = Gm.transpose() * Gm if V <= T else Gm * Gm.transpose()
        return [e.real for e in flint.acb_mat(gram).eig(multiple=True)]
    except ValueError:
        Gq = flint.fmpq_mat(T, V, [flint.fmpq(*x.as_integer_ratio()) for x in G.ravel().tolist()])
        polynomial = (Gq.transpose() * Gq if V <= T else Gq * Gq.transpose()).charpoly()
        return [root.real for root, multiplicity in polynomial.complex_roots() for _ in range(multiplicity)]


def ball_value(x: Any) -> Fraction:
    """The midpoint of a ball (or a rational) as an exact Fraction."""
    if isinstance(x, flint.fmpq):
        return Fraction(int(x.p), int(x.q))
    mantissa, exponent = x.mid().man_exp()
    return Fraction(int(mantissa)) * Fraction(2) ** int(exponent)


def _reference(
    sides: Callable[[DenseBatch], tuple[Any, Any]], what: str
) -> Callable[[BatchGradient, Backend], Reference]:
    def reference(case: BatchGradient, backend: Backend) -> Reference:
        lhs, rhs = sides(dense_batch(case, backend))
        method = f"dense {what}, {REFERENCE_BITS}-bit balls on the built G, W and Q"
        return Reference(ball_value(lhs), ball_value(rhs), method)

    return reference


REFERENCES: dict[str, Callable[[BatchGradient, Backend], Reference]] = {
    "pythagoras": _reference(lambda d: ((d.lost + d.kept) / d.total, flint.arb(1)), "GΠ and G − GΠ, entry by entry"),
    "ky-fan": _reference(lambda d: (d.kept / d.total, d.share), "GΠ against the eigenvalues of the Gram matrix"),
    "update-efficiency": _reference(lambda d: (d.rate, d.total.sqrt()), "GWWᵀ and G, entry by entry"),
}
REFERENCES["ky-fan-attained"] = REFERENCES["ky-fan"]


# --------------------------------------------------------------------------- quantities (the public API)
#
# Each is measured as a two-sided enclosure (:class:`Enclosure`) from the rounding model, in the backend,
# and has an exact route on the float64 instance (balls at the working precision, or exact integers for
# the rates, up to V = EXACT_IDENTITY_V), which a declared claim's re-decision reads.


def _gradient_in(ctx: Context) -> tuple[Any, Any, Any]:
    return ctx.once("gradient", lambda: gradient(ctx.case, ctx.backend))


def _enclosed(e: Enclosure) -> Measured:
    return Measured(e.value, e.radius)


def _shares(ctx: Context) -> tuple[Enclosure, Enclosure]:
    G, _, Q = _gradient_in(ctx)
    return ctx.once("shares", lambda: eq1_shares(G, Q))


def _rates(ctx: Context) -> tuple[Enclosure, Enclosure]:
    G, W, _ = _gradient_in(ctx)
    return ctx.once("rates", lambda: descent_rates(G, W))


def _basis_rank(ctx: Context) -> RankInterval:
    rank = _gradient_in(ctx)[2].shape[1]
    return RankInterval(rank, rank, "the computed basis of col W", "the computed basis of col W", exact=True)


def _exact_share(ctx: Context, part: int) -> Any:
    """c (``part`` 0) or r (1) in balls at the working precision (:func:`ball_shares`)."""
    if ctx.case.V > EXACT_IDENTITY_V:
        return None
    kept, lost, total = ball_shares(ctx.case, flint.ctx.prec)
    return nonnegative_root((kept, lost)[part] / total)


def _exact_top_share(ctx: Context) -> Any:
    if not ball_affordable(ctx.case):
        return None
    return ball_top_share(ctx.case, float64_gradient(ctx.case)[2].shape[1], flint.ctx.prec)


def _exact_rate(ctx: Context, along_gradient: bool) -> Any:
    """⟨G, GWWᵀ⟩/‖GWWᵀ‖_F or ‖G‖_F in balls from the exact integers of :func:`exact_rates`."""
    if ctx.case.V > EXACT_IDENTITY_V:
        return None
    a, b, g, e = exact_rates(ctx.case)
    scale = flint.arb(2) ** e
    if along_gradient:
        return flint.arb(g).sqrt() * scale
    return flint.arb(a) / flint.arb(b).sqrt() * scale if b > 0 else flint.arb(0)


surviving = quantity(
    "c",
    lambda ctx: _enclosed(_shares(ctx)[0]),
    lambda ctx: _exact_share(ctx, 0),
    doc="c = ‖GΠ‖_F/‖G‖_F, the share of the logit gradient kept",
)
destroyed = quantity(
    "r",
    lambda ctx: _enclosed(_shares(ctx)[1]),
    lambda ctx: _exact_share(ctx, 1),
    doc="r = ‖G − GΠ‖_F/‖G‖_F, the share destroyed in ker Wᵀ",
)
best_share = quantity(
    "Σ_{i ≤ rank W} σ_i(G)²/‖G‖_F²",
    lambda ctx: _enclosed(top_share(_gradient_in(ctx)[0], _gradient_in(ctx)[2].shape[1])),
    _exact_top_share,
    doc="the Ky Fan share: the largest c² any head of the same rank can keep",
)
rank_W = quantity("rank W", _basis_rank, _basis_rank, integer=True, doc="the dimension of col W")
descent_along_update = quantity(
    "⟨G, GWWᵀ⟩/‖GWWᵀ‖_F",
    lambda ctx: _enclosed(_rates(ctx)[0]),
    lambda ctx: _exact_rate(ctx, along_gradient=False),
    doc="the first-order loss decrease per unit of logit-update norm along the H-update's direction −GWWᵀ",
)
descent_along_gradient = quantity(
    "‖G‖_F",
    lambda ctx: _enclosed(_rates(ctx)[1]),
    lambda ctx: _exact_rate(ctx, along_gradient=True),
    doc="the steepest first-order decrease, along −G",
)

#: Where the claims of this family range: batch gradients through random or low-rank heads, and
#: through heads aligned with the gradient's top singular subspace.
batch_gradients = Cases(_mixed_instances, _witnesses, random_batches, _boundary(aligned=False))
aligned_heads = Cases(
    _aligned_instances,
    _aligned_witnesses,
    lambda V, n, seed: random_batches(V, n, seed, aligned=True),
    _boundary(aligned=True),
)


FAMILY = Family("compression", batch_gradients)


pythagoras = FAMILY.claim(
    "pythagoras",
    reference=REFERENCES["pythagoras"],
    source=f"{SEED_000}, Eq. 1 (§2.4, §3.3)",
    title="What the head destroys and what survives add up in squares",
    statement="r² + c² = 1 for r = ‖G − GΠ‖_F/‖G‖_F (destroyed in ker Wᵀ) and c = ‖GΠ‖_F/‖G‖_F (surviving)",
    domain="G the frequency-weighted cross-entropy logit gradient of a batch; W random, low rank, or aligned",
    relation=Relation.EQUAL,
    measure=measure_pythagoras,
    judge_exactly=judge_pythagoras,
)
ky_fan_attained = FAMILY.claim(
    "ky-fan-attained",
    reference=REFERENCES["ky-fan-attained"],
    source="rankwall (equality case of compression.ky-fan)",
    title="A head aligned with the gradient's top singular subspace keeps the best share",
    statement="c² = Σ_{i ≤ D} σ_i(G)² / ‖G‖_F² when col W is spanned by G's top D right singular vectors",
    domain="aligned heads W = (top D right singular vectors of G)",
    relation=Relation.EQUAL,
    measure=measure_ky_fan_attained,
    judge_exactly=judge_ky_fan_attained,
    cases=aligned_heads,
)
ky_fan = FAMILY.claim(
    "ky-fan",
    reference=REFERENCES["ky-fan"],
    source="rankwall (links Eq. 1 to Prop. A.6 through Ky Fan's maximum principle)",
    title="No head keeps more than the best rank-D share of the gradient",
    statement="c² ≤ Σ_{i ≤ rank W} σ_i(G)² / ‖G‖_F², with equality when col W is G's top right singular subspace",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=measure_ky_fan,
    judge_exactly=judge_ky_fan,
)
efficiency = FAMILY.claim(
    "update-efficiency",
    reference=REFERENCES["update-efficiency"],
    source=f"{SEED_000}, §3.4 (Figure 6, to first order)",
    title="The update that reaches the logits descends no faster than the logit gradient",
    statement="⟨G, GWWᵀ⟩/‖GWWᵀ‖_F ≤ ‖G‖_F: per unit of logit-update norm, the H-update's loss decrease is at most "
    "that along −G",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=measure_efficiency,
    judge_exactly=judge_efficiency,
)
pythagoras.with_mutant(
    "r-plus-c-is-1",
    statement="r + c = 1  (false: r² + c² = 1, so r + c > 1 whenever both are positive)",
    measure=lambda i, b, f: measure_pythagoras(i, b, f, power=1),
    judge_exactly=lambda i, f: judge_pythagoras(i, f, power=1),
)
ky_fan.with_mutant(
    "one-value-fewer",
    statement="c² ≤ Σ_{i < rank W} σ_i(G)² / ‖G‖_F²  (false: an aligned head keeps the rank-W-th value too)",
    measure=lambda i, b, f: measure_ky_fan(i, b, f, ceiling=lambda G, k: top_share(G, k - 1)),
    judge_exactly=lambda i, f: judge_ky_fan(i, f, ceiling=lambda G, k: top_share(G, k - 1)),
    cases=aligned_heads,
)
ky_fan.with_mutant(
    "dimension-share",
    statement="c² ≤ rank W / V  (false: that is only what a random head keeps on average)",
    measure=lambda i, b, f: measure_ky_fan(i, b, f, ceiling=dimension_share),
    judge_exactly=lambda i, f: judge_ky_fan(i, f, ceiling=dimension_share),
)
ky_fan_attained.with_mutant(
    "top-D-minus-1",
    statement="c² = Σ_{i < D} σ_i(G)² / ‖G‖_F² for aligned heads  (false: the D-th value is kept too)",
    measure=lambda i, b, f: measure_ky_fan_attained(i, b, f, drop=1),
    judge_exactly=lambda i, f: judge_ky_fan_attained(i, f, drop=1),
)
efficiency.with_mutant(
    "update-beats-gradient",
    statement="‖G‖_F ≤ ⟨G, GWWᵀ⟩/‖GWWᵀ‖_F: the H-update descends at least as fast as −G  (false: Cauchy–Schwarz)",
    measure=lambda i, b, f: measure_efficiency(i, b, f, reverse=True),
    judge_exactly=lambda i, f: judge_efficiency(i, f, reverse=True),
    # Where the head spans G's rows the mutant fails only to second order in the alignment (about 1e-32):
    # certified exactly, but no float side could show it, so its witnesses are the others.
    witnesses=lambda V: [i for i in _witnesses(V) if not (i.aligned and i.D >= min(i.tokens, i.V))],
)
