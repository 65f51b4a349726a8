"""Claims ``heads.*``: log-probability rank of alternative heads, and the rank of their Jacobian
with respect to the hidden state (seed 001; seed 000 §2.3, Eq. 10).

Every rank here is certified as an interval ``lo <= rank <= hi``
(:class:`rankwall.checks.verdict.RankInterval`, with ``trust_lower``): the lower
end from the singular values above a Weyl margin (rounding of the matrix plus the SVD's backward
error), the upper end from structure (a factorization whose residual is checked against a rounding
bound, or an exact rank over the rationals, python-flint). A claim holds only when the interval
settles it; it is violated when the interval excludes it; otherwise it is inconclusive. When the two
ends contradict each other (``lo > hi``) the upper end is not trusted: only ``lo`` can still refute.
A verdict that rests on one end is ``Certification.ONE_SIDED``; one on a rank pinned by both ends is
``TWO_SIDED`` (the lower end is a rounding-model certificate). ``--tighten F`` follows
:func:`rankwall.checks.verdict.tightened_integer_bound`.

Backends: the two rank(log P) claims follow ``--backend``: the parameters and contexts are rounded to
the backend's dtype, the log-probabilities, the factorization residual and the singular values are
computed there, and every margin uses that dtype's unit roundoff; the exact ranks read the rounded
parameters back as rationals, and an interval the measurement leaves open is re-decided in NumPy
float64. ``jacobian-rank`` stays NumPy float64 (``array_api=False``): its Jacobian comes from torch's
forward-mode autograd, which array-api-strict and CuPy lack, and its magnitude bound is NumPy.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "HeadCase",
    "contexts_count",
    "every_head",
    "hidden_size",
    "jacobian_rank",
    "log_probability_rank",
    "nonlinear_heads",
    "softmax_heads",
    "vocabulary",
]

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import flint
import numpy as np
import scipy.special
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance, toolkit
from rankwall.checks.backends import Backend, float64_copy
from rankwall.checks.quantities import quantity
from rankwall.checks.toolkit import Cases, Family, numpy_float64, planted_side
from rankwall.checks.verdict import Case, Judgement, Measurement, RankInterval, Relation, tightened_integer_bound
from rankwall.theory import heads as hd
from rankwall.theory.validation import InputError

# --------------------------------------------------------------------------- cases and strategies


@dataclass(frozen=True)
class HeadCase(Case):
    """A head (one of :data:`rankwall.theory.heads.HEADS`) with Gaussian parameters from ``seed`` at
    logit scale ``scale``, over N contexts; V tokens, hidden size d, K latents. With
    ``constant_column`` the first column of W is the constant ``scale`` (see :func:`contexts`)."""

    KIND: ClassVar[str] = "head"

    head: str
    N: int
    V: int
    d: int
    K: int = 1
    seed: int = 0
    scale: float = 1.0
    constant_column: bool = False


@st.composite
def head_instances(draw: Any, heads: tuple[str, ...], K_min: int = 1, scale_min: float = 0.3) -> HeadCase:
    """A head, its sizes (N contexts, V tokens, hidden size d, K latents) and logit scale."""
    d = draw(st.integers(1, 10))
    return HeadCase(
        head=draw(st.sampled_from(heads)),
        N=draw(st.integers(d + 2, 80)),
        V=draw(st.integers(d + 2, 150)),
        d=d,
        K=draw(st.integers(K_min, 8)),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([s for s in (0.3, 1.0, 3.0, 10.0) if s >= scale_min])),
    )


SEED_000, SEED_001 = "seed 000", "seed 001"
U = tolerance.unit_roundoff(np.float64)

#: A claimed exact Jacobian rank: ``(value, how it was computed)`` from the head, its parameters and h.
ClaimedRank = Callable[[str, hd.HeadParameters, np.ndarray], tuple[int, str]]

# --------------------------------------------------------------------------- instances


def contexts(case: HeadCase) -> tuple[hd.HeadParameters, np.ndarray]:
    """Head parameters and N Gaussian contexts; with ``constant_column`` the first column of W is
    the constant ``scale``, so that the all-ones vector lies in col W exactly."""
    theta = hd.construct_head_parameters(case.V, case.d, case.K, case.seed, scale=case.scale)
    if case.constant_column:
        W = theta.W.copy()
        W[:, 0] = float(case.scale)
        theta = hd.HeadParameters(W, theta.P, theta.U)
    H = np.random.default_rng(case.seed + 1).standard_normal((case.N, case.d))
    return theta, H


@dataclass(frozen=True)
class Built(toolkit.Built):
    """A case computed in a backend: the parameters and contexts rounded to its dtype (``theta``, ``H``,
    backend arrays), the log-probabilities ``L`` computed there, and the same parameters read back as
    float64 NumPy (``theta_np``: what the exact ranks read)."""

    theta: hd.HeadParameters
    H: Any
    L: Any
    theta_np: hd.HeadParameters


def build(case: HeadCase, backend: Backend) -> Built:
    """The case's parameters, contexts and log-probabilities in the backend's namespace, dtype and device."""
    theta, H = contexts(case)
    on = hd.HeadParameters(backend.asarray(theta.W), backend.asarray(theta.P), backend.asarray(theta.U))
    H_on = backend.asarray(H)
    L = hd.log_probabilities(case.head, on, H_on)
    used = hd.HeadParameters(float64_copy(on.W), float64_copy(on.P), float64_copy(on.U))
    return Built(backend, on, H_on, L, used)


# --------------------------------------------------------------------------- certified rank intervals


def certified_lower_rank(A: Any, entry_error: float, u: float) -> tuple[int, float]:
    """A certified lower bound on rank A and its Weyl margin, from A's singular values computed in its
    namespace (:func:`rankwall.checks.exact.weyl_rank_lower_bound`)."""
    return exact.weyl_rank_lower_bound(A, u, entry_error=entry_error)[:2]


def exact_rank(rows: Sequence[Sequence[Any]], columns: int) -> int:
    """Rank over Q of a matrix of rationals (``flint.fmpq`` or floats, read exactly)."""
    entries = [x if isinstance(x, flint.fmpq) else exact.rational(x) for row in rows for x in row]
    if not entries:
        return 0
    return flint.fmpq_mat(len(rows), columns, entries).rank()


def with_ones(W: np.ndarray) -> np.ndarray:
    """``[W, 1]``: the right factor of every softmax log-probability matrix."""
    return np.hstack([W, np.ones((W.shape[0], 1))])


# --------------------------------------------------------------------------- rank of log P


def single_state(head: str, theta: hd.HeadParameters) -> bool:
    """Whether a mixture head is a softmax of one state h_eff(h) through W: MoC, and MoS with K = 1
    (its prior is log 1 = 0, so it is the softmax of its single latent tanh(P_1 h))."""
    return head == "moc" or (head == "mos" and theta.P.shape[0] == 1)


def effective_states(head: str, theta: hd.HeadParameters, H: Any) -> Any:
    """The states whose logits ``W h_eff`` the head is a softmax of, in H's namespace: H for softmax, the
    mixed state for MoC, the single latent for MoS with K = 1 (its prior is log 1 = 0); ``None`` for the
    other heads."""
    if head in ("softmax", "moc"):
        return hd.effective_hidden(head, theta, H)
    if single_state(head, theta):  # MoS with K = 1
        return hd.latents(theta, H)[0][:, 0, :]
    return None


def log_softmax_rows(Z: np.ndarray) -> np.ndarray:
    """``Z - lse(Z)`` row by row (``scipy.special.log_softmax``: shifted by the row maximum)."""
    return scipy.special.log_softmax(Z, axis=1)


def logit_magnitude(W: np.ndarray, H: np.ndarray) -> float:
    """R = max_i Σ_j |W_ij| · max(max |H|, 1), a bound on |logit| for states bounded by max(max |H|, 1)."""
    return float(np.abs(W).sum(axis=1).max()) * max(float(np.abs(H).max()), 1.0)


def factorization_residual(L: Any, H_eff: Any, W: Any, K: int, u: float) -> tuple[float, float]:
    """``(‖L - [H_eff, -z][W, 1]^T‖_F, bound)``, z = lse(H_eff W^T) recomputed in L's namespace and dtype
    (unit roundoff u). The bound adds the error of the computed L
    (:func:`rankwall.checks.tolerance.head_log_probability_error`) and that of the recomputation: the
    product's γ_{d+2}|H_eff||W|^T, through the log-softmax (Lipschitz: an entry moves by its own error
    plus at most the row's largest), and :func:`rankwall.checks.tolerance.log_softmax_error`."""
    Z = H_eff @ W.T
    recomputed = hd.log_softmax(Z)
    H_np, W_np, L_np = float64_copy(H_eff), float64_copy(W), float64_copy(L)
    product_error = tolerance.gamma(W_np.shape[1] + 2, u) * (np.abs(H_np) @ np.abs(W_np).T)
    through = product_error + product_error.max(axis=1, keepdims=True)
    bound = (
        tolerance.head_log_probability_error(L_np, logit_magnitude(W_np, H_np), K, u)
        + tolerance.log_softmax_error(float64_copy(Z), float64_copy(recomputed), u)
        + float(np.linalg.norm(through))
    )
    return float(np.linalg.norm(float64_copy(L - recomputed))), bound


def log_probability_lower(case: HeadCase, built: Built) -> tuple[int, float]:
    """Certified lower bound on rank(log P): the backend's SVD + Weyl margin, with the head's rounding
    bound at the backend's unit roundoff."""
    logit_bound = logit_magnitude(built.theta_np.W, float64_copy(built.H))
    entry_error = tolerance.head_log_probability_error(float64_copy(built.L), logit_bound, case.K, built.u)
    return certified_lower_rank(built.L, entry_error, built.u)


def log_probability_upper(case: HeadCase, built: Built) -> tuple[int, str, dict[str, Any]]:
    """Certified upper bound on rank(log P). For a head that is a softmax of one state, log P =
    [H_eff, -z][W, 1]^T, of rank at most min(N, rank_Q [W, 1]) ≤ d + 1 (exact rank over Q of the W the
    backend used), once the residual of that factorization is within its rounding bound; otherwise the
    shape, min(N, V)."""
    N, V = built.L.shape
    H_eff = effective_states(case.head, built.theta, built.H)
    if H_eff is not None:
        residual, bound = factorization_residual(built.L, H_eff, built.theta.W, case.K, built.u)
        certificate = {"factorization_residual": residual, "residual_bound": bound}
        if residual <= bound:
            rank_w1 = exact_rank(with_ones(built.theta_np.W).tolist(), case.d + 1)
            how = f"the factorization [H_eff, -z][W, 1]^T (residual within rounding; exact rank [W, 1] = {rank_w1})"
            return min(N, rank_w1), how, certificate
        return min(N, V), "the shape (the factorization residual exceeds its rounding bound)", certificate
    return min(N, V), "the shape (no factorization through d + 1 columns)", {}


def log_probability_interval(case: HeadCase, backend: Backend | None = None) -> RankInterval:
    """Both certified ends of rank(log P) over the case's N contexts, computed in the backend (NumPy
    float64 by default)."""
    built = build(case, numpy_float64() if backend is None else backend)
    lo, margin = log_probability_lower(case, built)
    hi, how, certificate = log_probability_upper(case, built)
    lower = f"SVD + Weyl margin ({built.label})"
    return RankInterval(lo, hi, lower, how, certificate={"weyl_margin": margin, **certificate}, trust_lower=True)


def measure_bottleneck(case: HeadCase, backend: Backend, factor: Fraction) -> Measurement:
    """rank(log P) ≤ d + 1 for softmax and MoC (tightened: ≤ ⌈F (d + 1)⌉ - 1)."""
    bound = tightened_integer_bound(case.d + 1, factor, "upper")
    return log_probability_interval(case, backend).sides(bound, "upper")[0]


def judge_bottleneck(case: HeadCase, factor: Fraction) -> Judgement:
    """The same interval re-computed in NumPy float64."""
    bound = tightened_integer_bound(case.d + 1, factor, "upper")
    return log_probability_interval(case).sides(bound, "upper")[1]


def measure_exceeds(case: HeadCase, backend: Backend, factor: Fraction) -> Measurement:
    """d + 2 ≤ rank(log P) for the nonlinear heads (tightened: ⌊F (d + 2)⌋ + 1 ≤ rank)."""
    bound = tightened_integer_bound(case.d + 2, factor, "lower")
    return log_probability_interval(case, backend).sides(bound, "lower")[0]


def judge_exceeds(case: HeadCase, factor: Fraction) -> Judgement:
    """The same interval re-computed in NumPy float64."""
    bound = tightened_integer_bound(case.d + 2, factor, "lower")
    return log_probability_interval(case).sides(bound, "lower")[1]


# --------------------------------------------------------------------------- rank of the Jacobian


def autograd_jacobian(head: str, theta: hd.HeadParameters, h: np.ndarray) -> np.ndarray:
    """∂ log p / ∂h (V × d) by forward-mode torch autograd in float64."""
    import torch

    x = torch.tensor(h, dtype=torch.float64)
    J = torch.autograd.functional.jacobian(
        lambda y: hd.log_probabilities(head, theta, y), x, vectorize=True, strategy="forward-mode"
    )
    return J.numpy()


def jacobian_magnitude(head: str, theta: hd.HeadParameters, h: np.ndarray) -> np.ndarray:
    """A V × d matrix bounding the magnitudes each Jacobian entry is summed from. Apart from MoS,
    J = (I - 1p^T) G W M (G diagonal, M = ∂h_eff/∂h) and the bound is B + 1 p^T B with B = |G||W| M̄,
    M̄ ≥ |M| entrywise; for MoS, J_i = Σ_k r_ik [(W M_k)_i - p_k^T W M_k + (U_k - π^T U)], with
    posteriors r_ik = π_k p_ik / p_i and M_k = diag(1 - h_k^2) P_k."""
    W, absW = theta.W, np.abs(theta.W)
    hk, log_pi = (np.asarray(x) for x in hd.latents(theta, h))
    pi, absU = np.exp(log_pi), np.abs(theta.U)
    prior = absU + pi @ absU  # bounds |∂ log π_k / ∂h| = |U_k - π^T U|
    latent = (1 - hk**2)[:, :, None] * np.abs(theta.P)  # |M_k|
    log_p = np.asarray(hd.log_probabilities(head, theta, h))
    if head == "mos":
        total = np.zeros_like(W)
        for k in range(len(pi)):
            component = log_softmax_rows((W @ hk[k])[None, :])[0]
            B = absW @ latent[k]
            total += np.exp(log_pi[k] + component - log_p)[:, None] * (B + np.exp(component) @ B + prior[k])
        return total
    M, state = np.eye(theta.d), h
    if head == "moc":
        M = np.tensordot(pi, latent, axes=1) + np.einsum("k,ki,kj->ij", pi, np.abs(hk), prior)
        state = np.asarray(hd.effective_hidden(head, theta, h))
    z = W @ state
    if head == "sigsoftmax":
        g = 1.5 - 0.5 * np.tanh(z / 2)  # d/dz (z + log σ(z)) = 2 - σ(z), in (1, 2)
    elif head == "piecewise-linear":
        g = np.where(z > 0, 1 / (hd.PIECEWISE_FLOOR + np.maximum(z, 0)), 0.0)
    else:
        g = np.ones_like(z)
    B = (g[:, None] * absW) @ M
    return B + np.exp(log_p) @ B


def rational_softmax_jacobian_rank(W: np.ndarray, log_p: np.ndarray) -> int:
    """Exact rank over Q of (I - 1 p̂^T) W, with p̂ the float probabilities normalised exactly. By the
    lemma rank((I - 1q^T)B) = rank[B, 1] - 1 for every q with 1^T q = 1, this is the rank of
    (I - 1p^T) W for the true p too."""
    d = W.shape[1]
    Wq = [[exact.rational(x) for x in row] for row in W]
    pq = [exact.rational(x) for x in np.exp(log_p)]
    total = sum(pq, flint.fmpq(0))
    mean = [sum((pk * row[j] for pk, row in zip(pq, Wq, strict=True)), flint.fmpq(0)) / total for j in range(d)]
    return exact_rank([[row[j] - mean[j] for j in range(d)] for row in Wq], d)


@dataclass(frozen=True)
class PiecewiseJacobian:
    """The piecewise-linear head's Jacobian in exact rationals at float W and h: with z = Wh,
    w = ε + max(z, 0), S = {i : z_i > 0} and g_i = 1[i ∈ S]/(ε + z_i), J = (I - 1p^T) diag(g) W,
    entrywise J_ij = g_i W_ij - Σ_{k∈S} W_kj / Σ w (since p_k g_k = 1/Σ w on S). A logit within
    rounding of the kink at 0 is refused (outside the claim's domain)."""

    rows: list[list[Any]]
    positive: list[int]
    g: list[Any]
    W: list[list[Any]]

    @classmethod
    def at(cls, theta: hd.HeadParameters, h: np.ndarray) -> PiecewiseJacobian:
        d = theta.d
        Wq = [[exact.rational(x) for x in row] for row in theta.W]
        hq = [exact.rational(x) for x in h]
        z = [sum((w * x for w, x in zip(row, hq, strict=True)), flint.fmpq(0)) for row in Wq]
        rounding = tolerance.gamma(d + 2, U) * (np.abs(theta.W) @ np.abs(h))  # of a float z_i
        near = [i for i, zi in enumerate(z) if abs(float(zi)) <= rounding[i]]
        if near:  # the float logit's sign, hence autograd's derivative, is not certain there
            raise InputError(f"instance: logit {near[0]} is within rounding of the piecewise-linear head's kink at 0")
        eps = exact.rational(hd.PIECEWISE_FLOOR)
        total = sum((eps + max(zi, flint.fmpq(0)) for zi in z), flint.fmpq(0))
        positive = [i for i, zi in enumerate(z) if zi > 0]
        g = [1 / (eps + zi) if zi > 0 else flint.fmpq(0) for zi in z]
        shift = [sum((Wq[k][j] for k in positive), flint.fmpq(0)) / total for j in range(d)]
        rows = [[g[i] * Wq[i][j] - shift[j] for j in range(d)] for i in range(len(z))]
        return cls(rows, positive, g, Wq)


def jacobian_upper(head: str, theta: hd.HeadParameters, h: np.ndarray, log_p: np.ndarray) -> tuple[int, str]:
    """Certified upper bound on rank ∂ log p/∂h from each head's factorization (and p^T J = 0, so
    rank ≤ V - 1, and the shape, rank ≤ d)."""
    V, d = theta.W.shape
    if head == "softmax" or single_state(head, theta):
        rank = rational_softmax_jacobian_rank(theta.W, log_p)
        what = "= rank J" if head == "softmax" else "≥ rank (I - 1p^T) W M"
        return rank, f"the exact rank over Q of (I - 1p̂^T) W ({what})"
    if head == "piecewise-linear":
        return exact_rank(PiecewiseJacobian.at(theta, h).rows, d), "the exact rank over Q of the exact Jacobian"
    if head == "sigsoftmax":
        rank_w = exact_rank(theta.W.tolist(), d)
        return min(rank_w, V - 1), f"J = (I - 1p^T) G W: min(rank_Q W = {rank_w}, V - 1)"
    return min(d, V - 1), "the shape and p^T J = 0: min(d, V - 1)"


def claimed_jacobian_rank(head: str, theta: hd.HeadParameters, h: np.ndarray) -> tuple[int, str]:
    """The exact value of rank ∂ log p/∂h claimed for each head (docs/heads.md, Theorem 2):
    rank_Q [W, 1] - 1 for softmax, MoC and MoS with K = 1; rank_Q W_S (S ≠ all) or rank_Q [GW, 1] - 1 (S = all) for
    the piecewise-linear head; min(rank_Q W, V - 1) for sigsoftmax; min(d, V - 1) for MoS with K ≥ 2."""
    V, d = theta.W.shape
    if head == "softmax" or single_state(head, theta):
        return exact_rank(with_ones(theta.W).tolist(), d + 1) - 1, "rank_Q [W, 1] - 1"
    if head == "piecewise-linear":
        exact_jacobian = PiecewiseJacobian.at(theta, h)
        S = exact_jacobian.positive
        if len(S) < V:
            return exact_rank([exact_jacobian.W[i] for i in S], d), f"rank_Q W_S, |S| = {len(S)} positive logits"
        scaled = [
            [gi * x for x in row] + [flint.fmpq(1)] for gi, row in zip(exact_jacobian.g, exact_jacobian.W, strict=True)
        ]
        return exact_rank(scaled, d + 1) - 1, "rank_Q [GW, 1] - 1 (every logit positive)"
    if head == "sigsoftmax":
        return min(exact_rank(theta.W.tolist(), d), V - 1), "min(rank_Q W, V - 1)"
    return min(d, V - 1), "min(d, V - 1)"


def always_full(head: str, theta: hd.HeadParameters, h: np.ndarray) -> tuple[int, str]:
    """The mutant's value: min(d, V - 1) for every head."""
    V, d = theta.W.shape
    return min(d, V - 1), "min(d, V - 1) for every head"


def jacobian_interval(case: HeadCase) -> RankInterval:
    """Certified ends of rank ∂ log p/∂h at the first context: lower from the SVD of the autograd
    Jacobian above its Weyl margin (forming error γ_{V+K(d+2)+32} times the magnitude bound of
    :func:`jacobian_magnitude`), upper from :func:`jacobian_upper`."""
    theta, H = contexts(case)
    h = H[0]
    J = autograd_jacobian(case.head, theta, h)
    forming = tolerance.gamma(case.V + case.K * (case.d + 2) + 32, U)
    lo, margin = certified_lower_rank(J, forming * float(np.linalg.norm(jacobian_magnitude(case.head, theta, h))), U)
    hi, how = jacobian_upper(case.head, theta, h, np.asarray(hd.log_probabilities(case.head, theta, h)))
    return RankInterval(
        lo,
        hi,
        "SVD of the float64 autograd Jacobian + Weyl margin",
        how,
        certificate={"weyl_margin": margin},
        trust_lower=True,
    )


def _jacobian_decision(case: HeadCase, claimed: ClaimedRank, factor: Fraction) -> tuple[Measurement, Judgement]:
    theta, H = contexts(case)
    value, how = claimed(case.head, theta, H[0])
    interval = jacobian_interval(case)
    interval = replace(interval, certificate={**interval.certificate, "claimed": how})
    return interval.sides(planted_side(value, factor), "equal")


def measure_jacobian(
    case: HeadCase, backend: Any, factor: Fraction, claimed: ClaimedRank = claimed_jacobian_rank
) -> Measurement:
    """rank ∂ log p/∂h against its claimed exact value (``factor``: the meta-tests' planted value)."""
    return _jacobian_decision(case, claimed, factor)[0]


def judge_jacobian(case: HeadCase, factor: Fraction, claimed: ClaimedRank = claimed_jacobian_rank) -> Judgement:
    return _jacobian_decision(case, claimed, factor)[1]


# --------------------------------------------------------------------------- quantities (the public API)


def _pinned(n: int) -> RankInterval:
    return RankInterval(n, n, "the case", "the case", exact=True)


log_probability_rank = quantity(
    "rank(log P)",
    lambda ctx: log_probability_interval(ctx.case, ctx.backend),
    lambda ctx: log_probability_interval(ctx.case),
    integer=True,
    doc="the rank of the N x V log-probabilities of a head over its contexts, certified at both ends",
)
jacobian_rank = quantity(
    "rank ∂log p/∂h",
    lambda ctx: jacobian_interval(ctx.case),
    lambda ctx: jacobian_interval(ctx.case),
    integer=True,
    follows_backend=False,
    doc="the rank of the Jacobian of log p with respect to h at the first context (torch autograd, NumPy float64)",
)
hidden_size = quantity(
    "d", lambda ctx: _pinned(ctx.case.d), lambda ctx: _pinned(ctx.case.d), integer=True, doc="the hidden size d"
)
contexts_count = quantity(
    "N", lambda ctx: _pinned(ctx.case.N), lambda ctx: _pinned(ctx.case.N), integer=True, doc="the contexts N"
)
vocabulary = quantity(
    "V", lambda ctx: _pinned(ctx.case.V), lambda ctx: _pinned(ctx.case.V), integer=True, doc="the vocabulary V"
)


# --------------------------------------------------------------------------- witnesses and strategies


def _witnesses(
    V: int, heads: tuple[str, ...], Ks: tuple[int, ...], *, gap: int | None, constant: bool = False
) -> list[HeadCase]:
    """Gaussian heads at d = 1, 2, 8 (with d + gap ≤ V unless ``gap`` is None), V capped at 400, N = 120
    contexts; with ``constant``, also W with a constant column (d ≥ 2: at d = 1 all logits would be equal)."""
    V = min(V, 400)
    return [
        HeadCase(head=head, N=120, V=V, d=d, K=K, seed=d + K, scale=3.0, constant_column=c)
        for head in heads
        for d in (1, 2, 8)
        for K in Ks
        for c in ((False, True) if constant and d >= 2 else (False,))
        if gap is None or d + gap <= V
    ]


def _with_constant_column(instances: Any) -> Any:
    """Instances drawn by ``instances``, half of those with d ≥ 2 with a constant first column in W
    (at d = 1 W would be a multiple of 1: every logit equal, every head uniform, J = 0)."""
    return st.tuples(instances, st.booleans()).map(
        lambda drawn: replace(drawn[0], constant_column=drawn[1] and drawn[0].d >= 2)
    )


def _with_single_latent(instances: Any) -> Any:
    """Instances drawn by ``instances`` with a single latent (K = 1)."""
    return instances.map(lambda drawn: replace(drawn, K=1))


#: Where the claims of this family range (the public API): softmax and mixture-of-contexts heads;
#: the nonlinear heads (MoS with K >= 2, sigsoftmax, piecewise-linear); every head, for its Jacobian.
softmax_heads = Cases(
    lambda: _with_constant_column(head_instances(("softmax", "moc"))),
    lambda V: _witnesses(V, ("softmax", "moc"), (1, 3), gap=1, constant=True),
)
nonlinear_heads = Cases(
    lambda: head_instances(("mos", "sigsoftmax", "piecewise-linear"), K_min=2, scale_min=1.0),
    lambda V: [
        i
        for i in _witnesses(V, ("mos", "sigsoftmax", "piecewise-linear"), (2, 4), gap=2)
        if i.head == "mos" or i.K == 2
    ],
)
every_head = Cases(
    lambda: _with_constant_column(head_instances(hd.HEADS)),
    lambda V: _witnesses(V, hd.HEADS, (3,), gap=None, constant=True),
)

FAMILY = Family("heads", array_api=False, random_instances=lambda V, n, seed: [])


bottleneck = FAMILY.claim(
    "softmax-moc-rank",
    source=f"{SEED_001}, 'The trap' (mixture of contexts) and Corollary 1",
    title="Softmax and mixture-of-contexts heads cannot exceed rank d + 1",
    statement="rank(log P) ≤ d + 1 over any set of contexts, for P = softmax(W h) and P = softmax(W Σ_k π_k h_k)",
    domain="Gaussian heads, K = 1..8 latents, logit scale 0.3 to 10, W with or without a constant column",
    relation=Relation.AT_MOST,
    direction="upper",
    array_api=True,
    measure=measure_bottleneck,
    judge_exactly=judge_bottleneck,
    cases=softmax_heads,
)
mos = FAMILY.claim(
    "nonlinear-heads-exceed",
    source=f"{SEED_001}, 'Mixture of softmaxes' (MoS has no rank ceiling); Kanai et al. (sigsoftmax)",
    title="Mixtures of softmaxes and nonlinear heads break the d + 1 ceiling",
    statement="rank(log P) ≥ d + 2 for MoS (K ≥ 2), sigsoftmax and the monotone piecewise-linear head",
    domain="generic Gaussian heads, N, V ≥ d + 2, logit scale 1 to 10 (a generic statement, not a universal one)",
    relation=Relation.AT_MOST,
    direction="lower",
    array_api=True,
    measure=measure_exceeds,
    judge_exactly=judge_exceeds,
    cases=nonlinear_heads,
)
jacobian = FAMILY.claim(
    "jacobian-rank",
    source=f"{SEED_000}, §2.3 and Eq. 10",
    title="The gradient a head sends to the backbone has an exact, at most d-dimensional, rank",
    statement=(
        "rank(∂ log p/∂h) = rank[W, 1] − 1 (d, or d − 1 when 1 ∈ col W) for softmax, MoC and MoS with K = 1; "
        "rank W_S for the piecewise-linear head (S the positive logits, rank [GW, 1] − 1 when all are); "
        "min(rank W, V − 1) for sigsoftmax; min(d, V − 1) for MoS with K ≥ 2"
    ),
    domain=(
        "all five heads, W with or without a constant column (d ≥ 2); exact for softmax and piecewise-linear, "
        "generic for MoC (∂h_eff/∂h invertible), sigsoftmax and MoS"
    ),
    relation=Relation.EQUAL,
    measure=measure_jacobian,
    judge_exactly=judge_jacobian,
    cases=every_head,
)
bottleneck.with_mutant(
    "moc-exceeds-d-plus-1",
    statement="MoC log-probabilities reach rank ≥ d + 2  (false: MoC is a softmax of one mixed state)",
    direction="lower",
    measure=measure_exceeds,
    judge_exactly=judge_exceeds,
    witnesses=lambda V: _witnesses(V, ("moc",), (1, 3), gap=2),
    strategy=lambda: head_instances(("moc",)),
)
mos.with_mutant(
    "mos-k1-exceeds",
    statement="MoS with K = 1 reaches rank ≥ d + 2  (false: with one component MoS is a softmax)",
    witnesses=lambda V: _witnesses(V, ("mos",), (1,), gap=2),
    strategy=lambda: _with_single_latent(head_instances(("mos",))),
)
jacobian.with_mutant(
    "always-full",
    statement="rank(∂ log p/∂h) = min(d, V − 1) for every head  (false: d − 1 for softmax when 1 ∈ col W)",
    measure=lambda i, b, f: measure_jacobian(i, b, f, claimed=always_full),
    judge_exactly=lambda i, f: judge_jacobian(i, f, claimed=always_full),
)
