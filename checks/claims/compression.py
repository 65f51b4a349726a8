"""Claims ``compression.*``: Eq. 1 (the share of the logit gradient destroyed by the head), its
Ky Fan ceiling, and the first-order efficiency of the update that reaches the logits (§3.4).

Every side is measured on its own, never through the statement or its hypotheses, and comes
with an :class:`Enclosure`: the float64 value and an interval that holds the exact quantity,
built from the rounding model of ``checks/tolerance.py`` (Higham's gamma for sums and products,
the backward error of a dense SVD with Weyl's inequality for singular values). The tolerance of
a measurement is the sum of the two radii, so a margin beyond it decides in either direction:
``rhs - lhs > tol`` holds, ``rhs - lhs < -tol`` is a certified violation (the exact sides lie in
disjoint intervals), anything in between is undecided. The exact quantities are those of the
stored float64 G and of the projector Pi on the span of the computed basis Q (of dimension
``rank W``), which is orthonormal only up to a measured defect eta.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from rankwall.checks import tolerance
from rankwall.checks.verdict import Case, Certification, Family, Judgement, Measurement, Relation, planted_side
from rankwall.theory import compression as cp

# --------------------------------------------------------------------------- cases and strategies


@dataclass(frozen=True)
class BatchGradient(Case):
    """The logit gradient of a batch of ``tokens`` hidden states through a head of V x D (of rank
    ``rank``, full when ``None``), drawn from ``seed``, with logits scaled by ``scale``; an
    ``aligned`` head is replaced by G's top D right singular vectors."""

    FAMILY: ClassVar[str] = "batch-gradient"
    V: int
    D: int
    rank: int | None = None
    tokens: int = 96
    seed: int = 0
    scale: float = 1.0
    aligned: bool = False


@st.composite
def compression_instances(draw: Any, aligned: bool = False) -> BatchGradient:
    """A batch gradient through a random or low-rank head (or one aligned with the gradient)."""
    V = draw(st.integers(2, 600))
    D = draw(st.integers(1, min(V, 64)))
    low = draw(st.booleans())
    return BatchGradient(
        V=V,
        D=D,
        rank=draw(st.integers(1, D)) if low else None,
        tokens=draw(st.integers(1, 64)),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([0.1, 1.0, 10.0])),
        aligned=aligned,
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = tolerance.unit_roundoff(np.float64)
#: Each endpoint of an enclosure is computed in at most two roundings, pushed outwards by gamma_2.
ENDPOINT = tolerance.gamma(2, U)


@dataclass(frozen=True)
class Enclosure:
    """A value computed in float64 and an interval ``[lo, hi]`` that holds the exact quantity."""

    value: float
    lo: float
    hi: float

    @classmethod
    def relative(cls, value: float, error: float) -> Enclosure:
        """A nonnegative value computed as (exact)(1 + theta), |theta| <= error < 1."""
        return cls(value, value * (1 - error) * (1 - ENDPOINT), value / (1 - error) * (1 + ENDPOINT))

    @classmethod
    def outward(cls, value: float, lo: float, hi: float) -> Enclosure:
        """Endpoints computed in a few roundings, pushed outwards by gamma_2 of their size."""
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


def gradient(case: BatchGradient) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(G, W, Q): the frequency-weighted logit gradient of a batch, the head, a basis of col W.
    The head is random, low rank, or (``aligned``) spanned by G's top right singular vectors."""
    W = cp.construct_head(case.V, case.D, case.seed, rank=case.rank)
    H, targets = cp.construct_batch(case.tokens, W.shape[1], case.V, case.seed + 1, scale=case.scale)
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    if case.aligned:
        W = np.linalg.svd(G, full_matrices=False)[2][: case.D].T
    Q, _ = cp.column_basis(W)
    return G, W, Q


def frobenius(X: np.ndarray) -> Enclosure:
    """||X||_F as the root of a sum of row norms squared: each square passes through at most
    n + m + 4 roundings, so the value is (exact)(1 + theta), |theta| <= gamma_{n+m+4}."""
    rows = np.linalg.norm(X, axis=1)
    return Enclosure.relative(float(np.sqrt(rows @ rows)), tolerance.gamma(sum(X.shape) + 4, U))


def orthogonality_defect(Q: np.ndarray) -> float:
    """eta >= ||Q^T Q - I||_2: the Frobenius norm of the computed defect plus the rounding of each
    entry of Q^T Q, gamma_{V+1} |q_i|^T |q_j| <= gamma_{V+1} (1 + eta), solved for eta."""
    V, k = Q.shape
    g = k * tolerance.gamma(V + 1, U)
    return (frobenius(Q.T @ Q - np.eye(k)).hi + g) / (1 - g)


def eq1_shares(G: np.ndarray, Q: np.ndarray) -> tuple[Enclosure, Enclosure]:
    """Enclosures of c = ||G Pi||_F / ||G||_F and r = ||G - G Pi||_F / ||G||_F, their values from
    :func:`rankwall.theory.compression.compression`. With C = GQ and R = G - CQ^T as computed there:
    ||C^ - GQ||_F <= gamma_V ||G||_F ||Q||_F, ||R^ - (G - GQQ^T)||_F <= gamma_k ||C^||_F ||Q||_F +
    ||C^ - GQ||_F ||Q||_2 + u ||R^||_F; then ||GQ||_F^2 is ||G Pi||_F^2 (1 +- eta), and GQQ^T differs
    from G Pi by at most eta ||G Pi||_F (QQ^T = Pi + Q_o(SS^T - I)Q_o^T for Q = Q_o S)."""
    (T, V), k = G.shape, Q.shape[1]
    result = cp.compression([G], Q)
    eta = orthogonality_defect(Q)
    if eta >= 1:
        unbounded = (0.0, math.inf)
        return Enclosure(result.cosine, *unbounded), Enclosure(result.destroyed, *unbounded)
    norm_G = frobenius(G)
    q2, qF = math.sqrt(1 + eta), math.sqrt(k * (1 + eta))
    # ||C^||_F and ||R^||_F from c, r and ||G||_F: three sums of squares of at most V + T + 4 roundings
    # each (kept, or lost, and two totals), then a quotient, a root and a product.
    relayed = tolerance.gamma(3 * (V + T + 4) + 3, U)
    C = Enclosure.relative(result.cosine * norm_G.value, relayed)
    R = Enclosure.relative(result.destroyed * norm_G.value, relayed)
    dC = tolerance.gamma(V, U) * norm_G.hi * qF
    dR = tolerance.gamma(k, U) * C.hi * qF + dC * q2 + U * R.hi
    kept_lo, kept_hi = max(C.lo - dC, 0.0) / math.sqrt(1 + eta), (C.hi + dC) / math.sqrt(1 - eta)
    lost_lo, lost_hi = max(R.lo - dR - eta * kept_hi, 0.0), R.hi + dR + eta * kept_hi
    c = Enclosure.outward(result.cosine, kept_lo / norm_G.hi, kept_hi / norm_G.lo)
    r = Enclosure.outward(result.destroyed, lost_lo / norm_G.hi, lost_hi / norm_G.lo)
    return c, r


def top_share(G: np.ndarray, k: int) -> Enclosure:
    """sum_{i <= k} sigma_i(G)^2 / ||G||_F^2 from a dense SVD. Weyl: each computed sigma is within
    ``svd_rank_margin`` (backward error, with ||G||_F >= sigma_1) of the exact one; the top sum A
    and the tail sum B are enclosed apart, and the share A / (A + B) is monotone in both."""
    sigma = np.linalg.svd(G, compute_uv=False)
    if k <= 0:
        return Enclosure(0.0, 0.0, 0.0)
    weyl = tolerance.svd_rank_margin(G.shape, U, 0.0, frobenius(G).hi)
    g = tolerance.gamma(len(sigma) + 2, U)
    top, tail = sigma[:k], sigma[k:]
    top_lo = float(np.sum(np.maximum(top - weyl, 0.0) ** 2)) * (1 - g)
    top_hi = float(np.sum((top + weyl) ** 2)) / (1 - g)
    tail_lo = float(np.sum(np.maximum(tail - weyl, 0.0) ** 2)) * (1 - g)
    tail_hi = float(np.sum((tail + weyl) ** 2)) / (1 - g)
    value = float(np.sum(top**2) / np.sum(sigma**2))
    lo = top_lo / (top_lo + tail_hi) if top_lo > 0 else 0.0
    return Enclosure.outward(value, lo, top_hi / (top_hi + tail_lo))


def dimension_share(G: np.ndarray, k: int) -> Enclosure:
    """k / V, one rounding."""
    value = k / G.shape[1]
    return Enclosure.outward(value, value, value)


def alignment_slack(G: np.ndarray, W: np.ndarray, Q: np.ndarray) -> float:
    """How far below the top-k share c^2 may lie when W holds the top k right singular vectors of
    G as computed by a dense SVD. Backward stability: W is within theta = svd_rank_margin(., 1) of
    the exact top singular vectors V' of G + E, ||E||_2 <= eps = theta ||G||_F. Then
    ||G Pi||_F >= ||G V'||_F - ||G||_2 ||(I - Pi) V'||_F >= sqrt(A) - 3 sqrt(k) eps - ||G||_F rho,
    with A the top-k sum of sigma_i(G)^2 and rho >= ||(I - Pi) W||_F (measured, with the rounding of
    W - Q(Q^T W) and the defect eta of Q), so c^2 >= share - 2 (3 sqrt(k) eps + ||G||_F rho) / ||G||_F."""
    (V, k), norm_G = Q.shape, frobenius(G)
    eta = orthogonality_defect(Q)
    theta = tolerance.svd_rank_margin(G.shape, U, 0.0, 1.0)
    q2, qF = math.sqrt(1 + eta), math.sqrt(k * (1 + eta))
    norm_W = frobenius(W).hi
    outside = frobenius(W - Q @ (Q.T @ W)).hi
    rho = outside * (1 + U) + tolerance.gamma(V + k + 1, U) * qF * norm_W * (2 * q2 + qF) + eta * norm_W
    slack = 3 * math.sqrt(k) * theta * norm_G.hi + norm_G.hi * rho
    return 2 * slack / norm_G.lo * (1 + ENDPOINT)


def descent_rates(G: np.ndarray, W: np.ndarray) -> tuple[Enclosure, Enclosure]:
    """Enclosures of <G, GWW^T> / ||GWW^T||_F and ||G||_F. N = (GW)W^T is computed with
    ||N^ - N||_F <= gamma_{V+D} || |G||W||W|^T ||_F <= gamma_{V+D} ||G||_F ||W||_F^2; the inner
    product (row sums, then their sum) adds gamma_{V+T+1} <|G|, |N^|> <= gamma_{V+T+1} ||G||_F ||N^||_F;
    the quotient a/b of a = a^ +- alpha, b in [b_lo, b_hi] is within
    (alpha + |a^| max|b - b^| / b^) / b_lo of a^/b^, plus u for the division."""
    (T, V), D = G.shape, W.shape[1]
    induced = G @ W @ W.T
    norm_G, norm_N = frobenius(G), frobenius(induced)
    dN = tolerance.gamma(V + D, U) * norm_G.hi * frobenius(W).hi ** 2
    inner = float(np.sum(np.sum(G * induced, axis=1)))
    d_inner = tolerance.gamma(V + T + 1, U) * norm_G.hi * norm_N.hi + norm_G.hi * dN
    b_lo, b_hi = norm_N.lo - dN, norm_N.hi + dN
    value = inner / norm_N.value if norm_N.value > 0 else 0.0
    if b_lo <= 0:
        return Enclosure(value, -math.inf, math.inf), norm_G
    spread = max(norm_N.value - b_lo, b_hi - norm_N.value)
    radius = (d_inner + abs(inner) * spread / norm_N.value) / b_lo + U * abs(value)
    return Enclosure.outward(value, value - radius, value + radius), norm_G


def _measurement(lhs: Enclosure, rhs: Enclosure, method: str, slack: float = 0.0, **certificate: Any) -> Measurement:
    """Both sides and the tolerance: their radii plus any slack the hypotheses leave."""
    certificate = {"lhs_enclosure": lhs.to_json(), "rhs_enclosure": rhs.to_json(), **certificate}
    tol = lhs.radius + rhs.radius + slack
    return Measurement(lhs.value, rhs.value, tol, method, certificate, certified_by=Certification.TWO_SIDED)


def two_sided(m: Measurement, relation: Relation) -> Judgement:
    """The sign of rhs - lhs where the measured margin is beyond the tolerance in either direction
    (the exact sides then lie in disjoint intervals: for an identity, a violation), else undecided."""
    margin = m.rhs - m.lhs
    if abs(margin) <= m.tolerance:
        return Judgement(m.lhs, m.rhs, None, f"{m.method} (inside its bound: undecided)", m.tolerance, m.certificate)
    sign = 1 if margin > 0 and relation is Relation.AT_MOST else -1
    method = f"{m.method}; two-sided rounding-model margin"
    return Judgement(m.lhs, m.rhs, sign, method, m.tolerance, m.certificate, Certification.TWO_SIDED)


def measure_pythagoras(case: BatchGradient, backend: Any, factor: Fraction, power: int = 2) -> Measurement:
    """r^power + c^power, enclosed from the two shares, against 1."""
    G, _, Q = gradient(case)
    c, r = eq1_shares(G, Q)
    lhs = c.squared() + r.squared() if power == 2 else c + r
    one = Enclosure(1.0, 1.0, 1.0).planted(factor)
    return _measurement(lhs, one, "float64 QR projection, lost and kept enclosed apart", rank_W=Q.shape[1])


def judge_pythagoras(case: BatchGradient, factor: Fraction, power: int = 2) -> Judgement:
    """r^2 + c^2 and r + c against 1, two-sided: the rounding model of the two sums certifies a
    discrepancy beyond their bound (r + c > 1 once both shares are clear of 0)."""
    return two_sided(measure_pythagoras(case, None, factor, power), Relation.EQUAL)


Ceiling = Callable[[np.ndarray, int], Enclosure]


def measure_ky_fan(case: BatchGradient, backend: Any, factor: Fraction, ceiling: Ceiling | None = None) -> Measurement:
    """c^2 from the QR projection against factor x the ceiling: by default the top rank-W share
    from the singular values (:func:`top_share`), a mutant's otherwise."""
    G, _, Q = gradient(case)
    c2 = eq1_shares(G, Q)[0].squared()
    bound = (ceiling or top_share)(G, Q.shape[1]).scaled(float(factor))
    return _measurement(c2, bound, "float64 QR projection vs SVD share (Weyl)", rank_W=Q.shape[1])


def judge_ky_fan(case: BatchGradient, factor: Fraction, ceiling: Ceiling | None = None) -> Judgement:
    """A basis Q of V columns spans R^V, so Pi = I and c^2 = 1 = share exactly: the sign is that of
    factor - 1. Otherwise (or for a mutant's ceiling) the two-sided margin of the measurement."""
    m = measure_ky_fan(case, None, factor, ceiling)
    if m.certificate["rank_W"] == case.V and ceiling is None:
        method = "structural (rank W = V, so the projector is the identity)"
        return Judgement(1.0, float(factor), (factor > 1) - (factor < 1), method, certified_by=Certification.EXACT)
    return two_sided(m, Relation.AT_MOST)


def measure_ky_fan_attained(case: BatchGradient, backend: Any, factor: Fraction, drop: int = 0) -> Measurement:
    """c^2 from the QR projection against the top (rank W - drop) share, with the slack that the
    head's alignment, true only to the SVD's backward error, leaves (:func:`alignment_slack`)."""
    G, W, Q = gradient(case)
    c2 = eq1_shares(G, Q)[0].squared()
    share = top_share(G, Q.shape[1] - drop).planted(factor)
    slack = alignment_slack(G, W, Q)
    method = "float64 QR projection vs SVD share (Weyl), aligned to backward error"
    return _measurement(c2, share, method, slack, rank_W=Q.shape[1], alignment_slack=slack)


def judge_ky_fan_attained(case: BatchGradient, factor: Fraction, drop: int = 0) -> Judgement:
    """The two-sided margin of :func:`measure_ky_fan_attained` (an identity)."""
    return two_sided(measure_ky_fan_attained(case, None, factor, drop), Relation.EQUAL)


def measure_efficiency(case: BatchGradient, backend: Any, factor: Fraction, reverse: bool = False) -> Measurement:
    """First-order loss decrease rates, per unit of logit-update norm: along -G it is ||G||_F
    (steepest descent); along the direction the H-update produces, -GWW^T, it is
    <G, GWW^T> / ||GWW^T||_F (Cauchy-Schwarz bounds it by ||G||_F). ``reverse`` swaps the sides."""
    G, W, _ = gradient(case)
    along_induced, along_gradient = descent_rates(G, W)
    lhs, rhs = (along_gradient, along_induced) if reverse else (along_induced, along_gradient)
    efficiency = along_induced.value / along_gradient.value
    return _measurement(lhs, rhs.scaled(float(factor)), "float64 directional derivatives", efficiency=efficiency)


def judge_efficiency(case: BatchGradient, factor: Fraction, reverse: bool = False) -> Judgement:
    """The two-sided margin of :func:`measure_efficiency`."""
    return two_sided(measure_efficiency(case, None, factor, reverse), Relation.AT_MOST)


def _witnesses(V: int, aligned: bool = False) -> list[BatchGradient]:
    """Random and low-rank heads (aligned ones for the attained claim) at vocabulary size V."""
    V = min(V, 4096)
    heads = ((min(32, V - 1) or 1, None), (min(128, V - 1) or 1, min(16, V - 1) or 1), (min(8, V - 1) or 1, None))
    return [
        BatchGradient(V=V, D=D, rank=rank, tokens=96, seed=D + s, scale=scale, aligned=aligned)
        for D, rank in heads
        for s, scale in ((0, 1.0), (1, 10.0))
    ]


def _aligned_witnesses(V: int) -> list[BatchGradient]:
    return _witnesses(V, aligned=True)


def _aligned_instances() -> Any:
    return compression_instances(aligned=True)


FAMILY = Family(
    "compression",
    array_api=False,
    random_instances=lambda V, n, seed: [],
    witnesses=_witnesses,
    strategy=compression_instances,
)


pythagoras = FAMILY.claim(
    "pythagoras",
    source=f"{SEED_000}, Eq. 1 (§2.4, §3.3)",
    title="What the head destroys and what survives add up in squares",
    statement="r² + c² = 1 for r = ‖G − GΠ‖_F/‖G‖_F (destroyed in ker Wᵀ) and c = ‖GΠ‖_F/‖G‖_F (surviving)",
    domain="G the frequency-weighted cross-entropy logit gradient of a batch; W random, low rank, or aligned",
    relation=Relation.EQUAL,
    bound=None,
    measure=measure_pythagoras,
    judge_exactly=judge_pythagoras,
)
ky_fan_attained = FAMILY.claim(
    "ky-fan-attained",
    source="rankwall (equality case of compression.ky-fan)",
    title="A head aligned with the gradient's top singular subspace keeps the best share",
    statement="c² = Σ_{i ≤ D} σ_i(G)² / ‖G‖_F² when col W is spanned by G's top D right singular vectors",
    domain="aligned heads W = (top D right singular vectors of G)",
    relation=Relation.EQUAL,
    bound=None,
    measure=measure_ky_fan_attained,
    judge_exactly=judge_ky_fan_attained,
    witnesses=_aligned_witnesses,
    strategy=_aligned_instances,
)
ky_fan = FAMILY.claim(
    "ky-fan",
    source="rankwall (links Eq. 1 to Prop. A.6 through Ky Fan's maximum principle)",
    title="No head keeps more than the best rank-D share of the gradient",
    statement="c² ≤ Σ_{i ≤ rank W} σ_i(G)² / ‖G‖_F², with equality when col W is G's top right singular subspace",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    bound="upper",
    measure=measure_ky_fan,
    judge_exactly=judge_ky_fan,
)
efficiency = FAMILY.claim(
    "update-efficiency",
    source=f"{SEED_000}, §3.4 (Figure 6, to first order)",
    title="The update that reaches the logits descends no faster than the logit gradient",
    statement="⟨G, GWWᵀ⟩/‖GWWᵀ‖_F ≤ ‖G‖_F: per unit of logit-update norm, the H-update's loss decrease is at most "
    "that along −G",
    domain="as for compression.pythagoras",
    relation=Relation.AT_MOST,
    bound="upper",
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
    witnesses=_aligned_witnesses,
    strategy=_aligned_instances,
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
)
