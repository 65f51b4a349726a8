r"""Claims ``heads.*``: log-probability rank of alternative heads, and the rank of their Jacobian
with respect to the hidden state (seed 001; seed 000 §2.3, Eq. 10), declared over this family's
quantities.

The exact object. There is one kind of case, :class:`HeadCase`: a head (softmax, MoS, MoC,
sigsoftmax, piecewise-linear) with Gaussian parameters θ = (W, P, U) drawn from its seed and N Gaussian
contexts H (with ``constant_column``, the first column of W set to the constant ``scale``, so that 1 ∈ col
W exactly). No case names an ideal object that floats approximate: the drawn floats *are* the instance.
Every quantity of a context measures, evaluates exactly and references one object:

- for the quantities that follow the backend (``log_probability_rank``, ``rank_with_ones``,
  ``weight_rank``, ``hidden_size``, ``contexts_count``, ``vocabulary``): θ and H as the context's
  backend rounded them (float64, or float32 entries), read exactly as rationals; log P is the N × V
  matrix of the head's log-probabilities at those exact θ and H, by the head's definition (real
  numbers, transcendental in general; the float log-probabilities only approximate it);
- for the Jacobian quantities (``jacobian_rank``, ``stated_jacobian_rank``, ``positive_rank``), which
  compute in NumPy float64 whatever backend is asked (torch's forward-mode autograd, which
  array-api-strict and CuPy lack): θ and h = H[0] in float64, read exactly, and J = ∂ log p/∂h at them.
  A claim that uses one of them has ``array_api = False`` and runs on NumPy float64, where both lists
  read the same θ;
- exact ranks over Q (python-flint) of W, [W, 1] and W_S are of those rational W and of the logits
  z = W h computed exactly from them (S = {i : z_i > 0}), never of a float factorization.

Every rank is certified as an interval ``lo <= rank <= hi`` (:class:`rankwall.checks.engine.verdict.RankInterval`,
with ``trust_lower``): the lower end from the singular values of the computed matrix above a Weyl
margin (the rounding model's bound on its distance from the exact matrix, plus the SVD's backward
error), the upper end from structure: for log P of a head that is a softmax of one state, the
factorization log P = [H_eff, −z][W, 1]ᵀ (Theorem HD.1(a), an identity of the exact object; its residual on
the computed matrix is checked against the rounding bound), giving min(N, rank_Q [W, 1]); for J, the
factorizations of Theorem HD.3 with exact ranks over Q: for a softmax of one state, the rank of
(I − 1p̂ᵀ)W with p̂ the float probabilities normalised exactly, which by Lemma HD.2 is that of
(I − 1pᵀ)W for the exact p (a structural lemma: no ball separates it); for the piecewise-linear head,
the exact rational Jacobian itself. Where the two ends contradict (``lo > hi``) only ``lo`` can still refute. A
verdict that rests on one end is ``Certification.ONE_SIDED``; one on a rank pinned by both ends is
``TWO_SIDED`` (the lower end is a rounding-model certificate). The exact route of ``log_probability_rank``
recomputes the interval in NumPy float64 from the parameters *as the backend rounded them* (on a float64
backend it is the measurement itself), so both routes certify the same object. ``--tighten F`` follows
:func:`rankwall.checks.engine.verdict.tightened_integer_bound`.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "HeadCase",
    "contexts_count",
    "every_head",
    "hidden_size",
    "jacobian_rank",
    "log_probability_rank",
    "mixtures_of_contexts",
    "nonlinear_heads",
    "positive_rank",
    "rank_with_ones",
    "single_latent_mixtures",
    "softmax_heads",
    "stated_jacobian_rank",
    "vocabulary",
    "weight_rank",
]

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import flint
import numpy as np
import scipy.special
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.engine import tolerance, toolkit
from rankwall.checks.engine.backends import Backend, float64_copy
from rankwall.checks.engine.quantities import Context, declare, minimum, quantity
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases, numpy_float64
from rankwall.checks.engine.verdict import Case, OutsideDomain, RankInterval, Relation
from rankwall.theory import heads as hd

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "heads"

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


#: Vocabulary sizes the search reaches beyond 150 (one draw in twelve): the margins grow with V.
LARGE_VOCABULARIES = (512, 2048)
#: The logit scales (the nonlinear heads' domain starts at 1).
SCALES = (0.3, 1.0, 3.0, 10.0)


@st.composite
def head_instances(
    draw: Any, heads: tuple[str, ...], K_min: int = 1, scale_min: float = 0.3, V_min: int | None = None
) -> HeadCase:
    """A head, its sizes (N contexts, V tokens, hidden size d, K latents) and logit scale. The edges come
    with real probability: d = 1, N = d + 2 and V = d + 2 (the least at which rank d + 2 is possible; from
    ``V_min`` instead where a claim has no such floor), the least K, both ends of the scales, and V of 512
    or 2,048."""
    d = draw(st.one_of(st.just(1), st.integers(1, 10)))
    low = d + 2 if V_min is None else V_min
    tier = draw(st.integers(0, 11))
    if tier < 2:
        V = draw(st.integers(low, d + 2))
    elif tier < 11:
        V = draw(st.integers(low, 150))
    else:
        V = draw(st.sampled_from(LARGE_VOCABULARIES))
    return HeadCase(
        head=draw(st.sampled_from(heads)),
        N=draw(st.one_of(st.just(d + 2), st.integers(d + 2, 80))),
        V=V,
        d=d,
        K=draw(st.one_of(st.just(K_min), st.integers(K_min, 8))),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([s for s in SCALES if s >= scale_min])),
    )


SEED_000, SEED_001 = "seed 000", "seed 001"
U = tolerance.unit_roundoff(np.float64)


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


def in_float64(case: HeadCase, built: Built) -> Built:
    """The same instance (the parameters and contexts as ``built``'s backend rounded them, read exactly)
    with its log-probabilities recomputed in NumPy float64: the exact route's rank interval of a float32
    measurement. A float64 build is returned as it is."""
    if built.backend.dtype_name == "float64":
        return built
    H = float64_copy(built.H)
    return Built(numpy_float64(), built.theta_np, H, hd.log_probabilities(case.head, built.theta_np, H), built.theta_np)


def built_in(ctx: Context) -> Built:
    """The context's case built once in its backend (every backend-following quantity reads this)."""
    return ctx.once("built", lambda: build(ctx.case, ctx.backend))


def rounded_parameters(ctx: Context) -> tuple[np.ndarray, ...]:
    """W, P, U and the contexts H as the context's backend rounded them, in float64 NumPy (exactly),
    without computing the head."""
    return ctx.once("rounded parameters", lambda: reference_parameters(ctx.case, ctx.backend))


def float64_parameters(ctx: Context) -> tuple[hd.HeadParameters, np.ndarray]:
    """θ and H in float64 (what the Jacobian quantities read, whatever the backend)."""
    return ctx.once("float64 parameters", lambda: contexts(ctx.case))


# --------------------------------------------------------------------------- certified rank intervals


def certified_lower_rank(A: Any, entry_error: float, u: float) -> tuple[int, float, np.ndarray]:
    """A certified lower bound on rank A, its Weyl margin and the singular values it read, from A's singular
    values computed in its namespace (:func:`rankwall.checks.exact.weyl_rank_lower_bound`)."""
    return exact.weyl_rank_lower_bound(A, u, entry_error=entry_error)


def exact_rank(rows: Sequence[Sequence[Any]], columns: int) -> int:
    """Rank over Q of a matrix of rationals (``flint.fmpq`` or floats, read exactly)."""
    entries = [x if isinstance(x, flint.fmpq) else exact.rational(x) for row in rows for x in row]
    if not entries:
        return 0
    return flint.fmpq_mat(len(rows), columns, entries).rank()


def with_ones(W: np.ndarray) -> np.ndarray:
    """``[W, 1]``: the right factor of every softmax log-probability matrix."""
    return np.hstack([W, np.ones((W.shape[0], 1))])


def pinned(n: int, how: str) -> RankInterval:
    """An integer known exactly (a count, or an exact rank over Q)."""
    return RankInterval(n, n, how, how, exact=True)


# --------------------------------------------------------------------------- rank of log P


def single_state(head: str, theta: hd.HeadParameters) -> bool:
    """Whether a mixture head is a softmax of one state h_eff(h) through W: MoC, and MoS with K = 1
    (its prior is log 1 = 0, so it is the softmax of its single latent tanh(P_1 h))."""
    return head == "moc" or (head == "mos" and theta.P.shape[0] == 1)


def one_state(case: HeadCase) -> bool:
    """Whether the case's head is a softmax of one state (softmax, MoC, MoS with K = 1): its log P has
    rank at most d + 1 (Theorem HD.1(a)), the other heads' generically more."""
    return case.head in ("softmax", "moc") or (case.head == "mos" and case.K == 1)


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
    (:func:`rankwall.checks.engine.tolerance.head_log_probability_error`) and that of the recomputation: the
    product's γ_{d+2}|H_eff||W|^T, through the log-softmax (Lipschitz: an entry moves by its own error
    plus at most the row's largest), and :func:`rankwall.checks.engine.tolerance.log_softmax_error`."""
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


def log_probability_lower(case: HeadCase, built: Built) -> tuple[int, float, np.ndarray]:
    """Certified lower bound on rank(log P): the backend's SVD + Weyl margin, with the head's rounding
    bound at the backend's unit roundoff; with the margin and the singular values it read."""
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


def rank_closeness(sigma: np.ndarray, bound: int, relation: Relation) -> float:
    """How near a rank bound comes to failing, for the search's ``target()``, from the relative singular
    values s_i = σ_i/σ_1 of the matrix: "rank ≤ b" fails as s_{b+1} grows, so log10 s_{b+1} (-400 where
    there is none); "b ≤ rank" fails as s_b vanishes, so -log10 s_b (400 where b exceeds the shape); an
    identity "rank = b", the larger of log10 s_{b+1} and -16 - log10 s_b (the second from a float64 unit
    roundoff's sixteen decades, where a vanishing s_b is first seen)."""
    relative = np.asarray(sigma, dtype=np.float64) / float(sigma[0]) if len(sigma) and sigma[0] > 0 else np.zeros(0)

    def logs(i: int, missing: float) -> float:
        return math.log10(max(float(relative[i]), 1e-300)) if 0 <= i < len(relative) else missing

    if relation is Relation.AT_MOST:
        return max(logs(bound, -400.0), -400.0)
    if relation is Relation.AT_LEAST:
        return 0.0 if bound <= 0 else min(-logs(bound - 1, -400.0), 400.0)
    return max(logs(bound, -400.0), -16.0 - logs(bound - 1, -400.0) if bound > 0 else -400.0)


def ceiling_closeness(case: HeadCase, sigma: np.ndarray) -> float:
    """How near log P comes to the other side of the d + 1 ceiling (larger is nearer), for the search's
    ``target()``: for a softmax of one state, whose rank is at most d + 1, how near it comes to exceeding it
    (log10 s_{d+2}); for the other heads, whose rank generically exceeds it, how near it comes to falling to
    it (−log10 s_{d+2}). The quantity does not know the bound a statement compares it with, so it measures
    against the family's own landmark (the shipped claims' bounds, d + 1 and d + 2)."""
    if one_state(case):
        return rank_closeness(sigma, case.d + 1, Relation.AT_MOST)
    return rank_closeness(sigma, case.d + 2, Relation.AT_LEAST)


def interval_of(case: HeadCase, built: Built) -> tuple[RankInterval, np.ndarray]:
    """Both certified ends of rank(log P) over the built case's N contexts, and the singular values of the
    computed log P that the lower end read."""
    lo, margin, sigma = log_probability_lower(case, built)
    hi, how, certificate = log_probability_upper(case, built)
    lower = f"SVD + Weyl margin ({built.label})"
    certificate = {"weyl_margin": margin, **certificate, "closeness": ceiling_closeness(case, sigma)}
    return RankInterval(lo, hi, lower, how, certificate=certificate, trust_lower=True), sigma


def log_probability_interval(case: HeadCase, backend: Backend | None = None) -> RankInterval:
    """Both certified ends of rank(log P) over the case's N contexts, computed in the backend (NumPy
    float64 by default)."""
    return interval_of(case, build(case, numpy_float64() if backend is None else backend))[0]


def _measure_log_probability_rank(ctx: Context) -> RankInterval:
    """rank(log P) in the context's backend and dtype (:func:`interval_of`)."""
    return ctx.once("log P rank", lambda: interval_of(ctx.case, built_in(ctx))[0])


def _exact_log_probability_rank(ctx: Context) -> RankInterval:
    """rank(log P) of the same parameters, recomputed in NumPy float64 (:func:`in_float64`): the
    measurement itself on a float64 backend."""
    built = built_in(ctx)
    if built.backend.dtype_name == "float64":
        return _measure_log_probability_rank(ctx)
    return ctx.once("log P rank, float64", lambda: interval_of(ctx.case, in_float64(ctx.case, built))[0])


def _rank_with_ones(ctx: Context) -> RankInterval:
    W = rounded_parameters(ctx)[0]
    return ctx.once("rank [W, 1]", lambda: pinned(exact_rank(with_ones(W).tolist(), W.shape[1] + 1), "rank_Q [W, 1]"))


def _weight_rank(ctx: Context) -> RankInterval:
    W = rounded_parameters(ctx)[0]
    return ctx.once("rank W", lambda: pinned(exact_rank(W.tolist(), W.shape[1]), "rank_Q W"))


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


def exact_logits(theta: hd.HeadParameters, h: np.ndarray) -> tuple[list[list[Any]], list[Any], list[Any]]:
    """``(W, h, z = W h)`` in exact rationals, for the float W and h read exactly."""
    Wq = [[exact.rational(x) for x in row] for row in theta.W]
    hq = [exact.rational(x) for x in h]
    z = [sum((w * x for w, x in zip(row, hq, strict=True)), flint.fmpq(0)) for row in Wq]
    return Wq, hq, z


@dataclass(frozen=True)
class PiecewiseJacobian:
    """The piecewise-linear head's Jacobian in exact rationals at float W and h: with z = Wh,
    w = ε + max(z, 0), S = {i : z_i > 0} and g_i = 1[i ∈ S]/(ε + z_i), J = (I - 1p^T) diag(g) W,
    entrywise J_ij = g_i W_ij - Σ_{k∈S} W_kj / Σ w (since p_k g_k = 1/Σ w on S). A logit within
    rounding of the kink at 0 is refused (:class:`~rankwall.checks.engine.verdict.OutsideDomain`: the float
    logit's sign, hence autograd's derivative, is not certain there)."""

    rows: list[list[Any]]
    positive: list[int]
    g: list[Any]
    W: list[list[Any]]

    @classmethod
    def at(cls, theta: hd.HeadParameters, h: np.ndarray) -> PiecewiseJacobian:
        d = theta.d
        Wq, _, z = exact_logits(theta, h)
        rounding = tolerance.gamma(d + 2, U) * (np.abs(theta.W) @ np.abs(h))  # of a float z_i
        near = [i for i, zi in enumerate(z) if abs(float(zi)) <= rounding[i]]
        if near:
            raise OutsideDomain(
                f"instance: logit {near[0]} is within rounding of the piecewise-linear head's kink at 0"
            )
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
    """The exact value of rank ∂ log p/∂h that Theorem HD.3 states for each head (docs/heads.md):
    rank_Q [W, 1] - 1 for softmax, MoC and MoS with K = 1; rank_Q W_S (S ≠ all) or rank_Q [GW, 1] - 1 (S = all)
    for the piecewise-linear head; min(rank_Q W, V - 1) for sigsoftmax; min(d, V - 1) for MoS with K ≥ 2."""
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


def jacobian_interval(case: HeadCase) -> RankInterval:
    """Certified ends of rank ∂ log p/∂h at the first context: lower from the SVD of the autograd
    Jacobian above its Weyl margin (forming error γ_{V+K(d+2)+32} times the magnitude bound of
    :func:`jacobian_magnitude`), upper from :func:`jacobian_upper`."""
    return spectral_jacobian_interval(case)[0]


def spectral_jacobian_interval(case: HeadCase) -> tuple[RankInterval, np.ndarray]:
    """:func:`jacobian_interval` and the singular values of the autograd Jacobian it read. Its
    ``closeness`` (for the search's ``target()``) is that of the identity "rank = upper end": how near
    the autograd Jacobian comes to a rank other than the one its structure allows."""
    theta, H = contexts(case)
    h = H[0]
    J = autograd_jacobian(case.head, theta, h)
    forming = tolerance.gamma(case.V + case.K * (case.d + 2) + 32, U)
    error = forming * float(np.linalg.norm(jacobian_magnitude(case.head, theta, h)))
    lo, margin, sigma = certified_lower_rank(J, error, U)
    hi, how = jacobian_upper(case.head, theta, h, np.asarray(hd.log_probabilities(case.head, theta, h)))
    interval = RankInterval(
        lo,
        hi,
        "SVD of the float64 autograd Jacobian + Weyl margin",
        how,
        certificate={"weyl_margin": margin, "closeness": rank_closeness(sigma, hi, Relation.EQUAL)},
        trust_lower=True,
    )
    return interval, sigma


def _jacobian_rank(ctx: Context) -> RankInterval:
    """rank ∂ log p/∂h at the first context (:func:`jacobian_interval`, NumPy float64): the measurement and
    the exact route alike (its upper end is an exact rank over Q)."""
    return ctx.once("jacobian rank", lambda: jacobian_interval(ctx.case))


def _stated_jacobian_rank(ctx: Context) -> RankInterval:
    def stated() -> RankInterval:
        theta, H = float64_parameters(ctx)
        value, how = claimed_jacobian_rank(ctx.case.head, theta, H[0])
        return pinned(value, how)

    return ctx.once("stated jacobian rank", stated)


def _positive_rank(ctx: Context) -> RankInterval:
    def rank_of_positive_rows() -> RankInterval:
        theta, H = float64_parameters(ctx)
        Wq, _, z = exact_logits(theta, H[0])
        rows = [row for row, zi in zip(Wq, z, strict=True) if zi > 0]
        return pinned(exact_rank(rows, theta.d) if rows else 0, "rank_Q W_S, S = {i : z_i > 0} exactly")

    return ctx.once("rank W_S", rank_of_positive_rows)


# --------------------------------------------------------------------------- references
#
# Every quantity the slow, obviously right way, sharing no code with its measure and exact route: the heads written out
# again, entry by entry, in python-flint balls at 256 bits on the parameters and contexts as the backend
# rounded them (read exactly); a rank as the number of pivots of a complete-pivoting elimination of the
# dense matrix in balls that stay above 2^-60 of the first (the exact log-probabilities of a softmax have
# rank d + 1 exactly, so their further pivots are rounding noise near 2^-256; a generic nonlinear head's
# are of order one); the Jacobian by central differences of the ball log-probabilities with a step of
# 2^-80 (truncation error near 2^-160); the stated Jacobian ranks from the statement's formulas, and the
# ranks of W, [W, 1] and W_S, by Gaussian elimination in Python Fractions (no python-flint).

REFERENCE_BITS = 256
#: A pivot below this fraction of the first counts as zero in a reference rank.
REFERENCE_PIVOT = 2.0**-60
#: The step of the reference's central differences.
REFERENCE_STEP = 2.0**-80


def _balls(values: Any) -> list[Any]:
    return [flint.arb(float(v)) for v in np.asarray(values, dtype=np.float64).ravel()]


def _lse(values: list[Any]) -> Any:
    top = max(values, key=lambda x: x.mid())
    return top + sum(((v - top).exp() for v in values), flint.arb(0)).log()


def _dot(row: list[Any], h: list[Any]) -> Any:
    return sum((a * b for a, b in zip(row, h, strict=True)), flint.arb(0))


def reference_log_probabilities(head: str, W: list[list[Any]], P: Any, U: Any, h: list[Any]) -> list[Any]:
    """log p(h) of one head in balls, written out from its definition (see :mod:`rankwall.theory.heads`)."""
    K = len(P)
    if head in ("softmax", "sigsoftmax", "piecewise-linear"):
        z = [_dot(row, h) for row in W]
        if head == "softmax":
            total = _lse(z)
            return [x - total for x in z]
        if head == "sigsoftmax":
            scores = [x - (1 + (-x).exp()).log() for x in z]  # z + log σ(z)
            total = _lse(scores)
            return [x - total for x in scores]
        floor = flint.arb(hd.PIECEWISE_FLOOR)
        weights = [floor + (x if x > 0 else flint.arb(0) if x < 0 else flint.arb(0).union(x.upper())) for x in z]
        total = sum(weights, flint.arb(0)).log()
        return [w.log() - total for w in weights]
    latent = [[_dot(row, h).tanh() for row in P[k]] for k in range(K)]
    prior_scores = [_dot(U[k], h) for k in range(K)]
    prior_total = _lse(prior_scores)
    log_prior = [x - prior_total for x in prior_scores]
    if head == "moc":
        mixed = [sum((log_prior[k].exp() * latent[k][j] for k in range(K)), flint.arb(0)) for j in range(len(h))]
        z = [_dot(row, mixed) for row in W]
        total = _lse(z)
        return [x - total for x in z]
    components = []
    for k in range(K):
        z = [_dot(row, latent[k]) for row in W]
        total = _lse(z)
        components.append([log_prior[k] + x - total for x in z])
    return [_lse([components[k][i] for k in range(K)]) for i in range(len(W))]


def reference_rank(rows: list[list[Any]]) -> int:
    """The rank of a ball matrix M as the number of diagonal pivots of a pivoted Cholesky elimination of its
    smaller Gram matrix (MMᵀ or MᵀM, of the same rank) that stay above :data:`REFERENCE_PIVOT`² of the first."""
    M = flint.arb_mat(rows)
    gram = M.transpose() * M if M.ncols() <= M.nrows() else M * M.transpose()
    n = gram.nrows()
    A = [[gram[i, j] for j in range(n)] for i in range(n)]
    active, rank, first = list(range(n)), 0, None
    while active:
        k = max(active, key=lambda i: A[i][i].mid())
        pivot = A[k][k]
        first = pivot.mid() if first is None else first
        if not pivot.mid() > REFERENCE_PIVOT**2 * first:
            break
        rank += 1
        active.remove(k)
        for i in active:
            ratio = A[i][k] / pivot
            for j in active:
                A[i][j] -= ratio * A[k][j]
    return rank


def reference_parameters(case: HeadCase, backend: Backend) -> tuple[np.ndarray, ...]:
    """W, P, U and the contexts H as the backend rounded them, in float64 NumPy (exactly)."""
    theta, H = contexts(case)
    return tuple(float64_copy(backend.asarray(M)) for M in (theta.W, theta.P, theta.U, H))


def _ball_parameters(W: np.ndarray, P: np.ndarray, U: np.ndarray) -> tuple[list[list[Any]], Any, Any]:
    return [_balls(row) for row in W], [[_balls(row) for row in Pk] for Pk in P], [_balls(row) for row in U]


def _log_probability_reference(case: HeadCase, backend: Backend) -> int:
    return _log_probability_rank(case.head, *((M.tobytes(), M.shape) for M in reference_parameters(case, backend)))


@functools.lru_cache(maxsize=256)
def _log_probability_rank(head: str, *arrays: tuple[bytes, tuple[int, ...]]) -> int:
    W, P, U, H = (np.frombuffer(data, dtype=np.float64).reshape(shape) for data, shape in arrays)
    with exact.precision(REFERENCE_BITS):
        Wb, Pb, Ub = _ball_parameters(W, P, U)
        return reference_rank([reference_log_probabilities(head, Wb, Pb, Ub, _balls(h)) for h in H])


def fraction_rank(rows: list[list[Fraction]]) -> int:
    """Rank over Q by Gaussian elimination in Python Fractions (the references' exact rank)."""
    remaining = [list(row) for row in rows if any(row)]
    rank = 0
    for j in range(len(rows[0]) if rows else 0):
        pivot = next((row for row in remaining if row[j] != 0), None)
        if pivot is None:
            continue
        remaining.remove(pivot)
        remaining = [[a - row[j] / pivot[j] * b for a, b in zip(row, pivot, strict=True)] for row in remaining]
        rank += 1
    return rank


def _fractions(M: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(x)) for x in row] for row in np.atleast_2d(M)]


def _reference_rank_with_ones(ctx: Context) -> int:
    W = reference_parameters(ctx.case, ctx.backend)[0]
    return fraction_rank([[*row, Fraction(1)] for row in _fractions(W)])


def _reference_weight_rank(ctx: Context) -> int:
    return fraction_rank(_fractions(reference_parameters(ctx.case, ctx.backend)[0]))


def _reference_logits(ctx: Context) -> tuple[list[list[Fraction]], list[Fraction]]:
    """W in Fractions and the exact logits z = W h at the first context (float64 θ and h)."""
    theta, H = contexts(ctx.case)
    W, h = _fractions(theta.W), [Fraction(float(x)) for x in H[0]]
    return W, [sum((a * b for a, b in zip(row, h, strict=True)), Fraction(0)) for row in W]


def _reference_positive_rank(ctx: Context) -> int:
    W, z = _reference_logits(ctx)
    return fraction_rank([row for row, zi in zip(W, z, strict=True) if zi > 0])


def _reference_stated_jacobian_rank(ctx: Context) -> int:
    """Theorem HD.3's rank from its formulas, in Fractions: rank [W, 1] − 1 for softmax, MoC and MoS with
    K = 1; rank W_S for the piecewise-linear head (S the positive logits), rank [GW, 1] − 1 with
    G = diag(1/(ε + z_i)) when every logit is positive; min(rank W, V − 1) for sigsoftmax; min(d, V − 1)
    for MoS with K ≥ 2."""
    case = ctx.case
    W, z = _reference_logits(ctx)
    if case.head in ("softmax", "moc") or (case.head == "mos" and case.K == 1):
        return fraction_rank([[*row, Fraction(1)] for row in W]) - 1
    if case.head == "piecewise-linear":
        if not all(zi > 0 for zi in z):
            return fraction_rank([row for row, zi in zip(W, z, strict=True) if zi > 0])
        floor = Fraction(hd.PIECEWISE_FLOOR)
        return (
            fraction_rank([[x / (floor + zi) for x in row] + [Fraction(1)] for row, zi in zip(W, z, strict=True)]) - 1
        )
    if case.head == "sigsoftmax":
        return min(fraction_rank(W), case.V - 1)
    return min(case.d, case.V - 1)


def _reference_jacobian_rank(ctx: Context) -> int:
    """rank ∂ log p/∂h at the first context by central differences of the ball log-probabilities (step
    :data:`REFERENCE_STEP`), its rank by :func:`reference_rank`."""
    theta, H = contexts(ctx.case)
    V, d = theta.W.shape
    with exact.precision(REFERENCE_BITS):
        W, P, U_ = _ball_parameters(theta.W, theta.P, theta.U)
        h = _balls(H[0])
        step = flint.arb(REFERENCE_STEP)
        columns = []
        for j in range(d):
            ahead = [x + step if i == j else x for i, x in enumerate(h)]
            behind = [x - step if i == j else x for i, x in enumerate(h)]
            upper = reference_log_probabilities(ctx.case.head, W, P, U_, ahead)
            lower = reference_log_probabilities(ctx.case.head, W, P, U_, behind)
            columns.append([(a - b) / (2 * step) for a, b in zip(upper, lower, strict=True)])
        return reference_rank([[columns[j][i] for j in range(d)] for i in range(V)])


# --------------------------------------------------------------------------- quantities (the public API)


def _quantity(name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **options: Any) -> Any:
    return quantity(name, measure, exact_fn, family=FAMILY, integer=True, **options)


def _case_field(name: str) -> Callable[[Context], RankInterval]:
    return lambda ctx: pinned(getattr(ctx.case, name), "the case")


log_probability_rank = _quantity(
    "rank(log P)",
    _measure_log_probability_rank,
    _exact_log_probability_rank,
    reference=lambda ctx: _log_probability_reference(ctx.case, ctx.backend),
    doc="the rank of the N x V log-probabilities of a head over its contexts, certified at both ends",
    exact_doc="the same interval recomputed in NumPy float64 from the parameters as the backend rounded them: "
    "lower end from the SVD above a Weyl margin, upper end min(N, rank_Q [W, 1]) through the factorization "
    "[H_eff, −z][W, 1]ᵀ for a softmax of one state, else the shape",
)
jacobian_rank = _quantity(
    "rank ∂log p/∂h",
    _jacobian_rank,
    _jacobian_rank,
    reference=_reference_jacobian_rank,
    follows_backend=False,
    doc="the rank of the Jacobian of log p with respect to h at the first context (torch autograd, NumPy float64)",
    exact_doc="lower end from the SVD of the autograd Jacobian above a Weyl margin, upper end from each head's "
    "factorization with exact ranks over Q (Theorem HD.3)",
)
stated_jacobian_rank = _quantity(
    "HD.3 rank",
    _stated_jacobian_rank,
    _stated_jacobian_rank,
    reference=_reference_stated_jacobian_rank,
    follows_backend=False,
    doc="the rank Theorem HD.3 states for the head's Jacobian at the first context: rank [W, 1] − 1 (softmax, "
    "MoC, MoS with K = 1), rank W_S or rank [GW, 1] − 1 (piecewise-linear), min(rank W, V − 1) (sigsoftmax), "
    "min(d, V − 1) (MoS with K ≥ 2)",
    exact_doc="exact ranks over Q of the float64 W, its positive rows and G W (python-flint)",
)
rank_with_ones = _quantity(
    "rank [W, 1]",
    _rank_with_ones,
    _rank_with_ones,
    reference=_reference_rank_with_ones,
    doc="the rank of W with the all-ones column appended (d + 1, or d when 1 ∈ col W, for W of full column rank)",
    exact_doc="python-flint's rank over Q of W as the backend rounded it",
)
weight_rank = _quantity(
    "rank W",
    _weight_rank,
    _weight_rank,
    reference=_reference_weight_rank,
    doc="the rank of the embedding matrix W",
    exact_doc="python-flint's rank over Q of W as the backend rounded it",
)
positive_rank = _quantity(
    "rank W_S",
    _positive_rank,
    _positive_rank,
    reference=_reference_positive_rank,
    follows_backend=False,
    doc="the rank of the rows of W whose logits z = W h are positive at the first context (float64 θ and h)",
    exact_doc="python-flint's rank over Q of those rows, S from the logits computed exactly",
)
hidden_size = _quantity(
    "d", _case_field("d"), _case_field("d"), reference=lambda ctx: ctx.case.d, doc="the hidden size d"
)
contexts_count = _quantity(
    "N", _case_field("N"), _case_field("N"), reference=lambda ctx: ctx.case.N, doc="the number of contexts N"
)
vocabulary = _quantity(
    "V", _case_field("V"), _case_field("V"), reference=lambda ctx: ctx.case.V, doc="the vocabulary size V"
)


# --------------------------------------------------------------------------- witnesses and strategies


def _witnesses(
    V: int, heads: tuple[str, ...], Ks: tuple[int, ...], *, gap: int | None, constant: bool = False
) -> list[HeadCase]:
    """Gaussian heads at d = 1, 2, 8 (with d + gap ≤ V unless ``gap`` is None), V capped at 400, N = 120
    contexts; with ``constant``, also W with a constant column (d ≥ 2: at d = 1 all logits would be equal).
    Then the edges, one per head at d = 2 (d = 1 where V is too small): N = d + gap contexts (the least at
    which the rank can exceed d + 1), logit scale 1 and 10, V itself (40 contexts), and a hidden size as
    large as V allows (V = d + gap; for the Jacobian, d = 8 whatever V, so that V ≤ d at small V)."""
    small = min(V, 400)
    cases = [
        HeadCase(head=head, N=120, V=small, d=d, K=K, seed=d + K, scale=3.0, constant_column=c)
        for head in heads
        for d in (1, 2, 8)
        for K in Ks
        for c in ((False, True) if constant and d >= 2 else (False,))
        if gap is None or d + gap <= small
    ]
    least = 2 if gap is None else gap
    edge_d = 2 if gap is None or 2 + gap <= small else 1
    widest = 8 if gap is None else min(8, small - gap)
    for head in heads:
        K = Ks[0]
        if gap is not None and edge_d + gap > small:
            continue
        cases += [
            HeadCase(head=head, N=edge_d + least, V=small, d=edge_d, K=K, seed=11),
            HeadCase(head=head, N=40, V=small, d=edge_d, K=K, seed=12, scale=1.0),
            HeadCase(head=head, N=40, V=small, d=edge_d, K=K, seed=13, scale=10.0),
            HeadCase(head=head, N=40, V=V, d=edge_d, K=K, seed=14, scale=3.0),
        ]
        if widest >= 1:
            cases.append(HeadCase(head=head, N=widest + least, V=small, d=widest, K=K, seed=15, scale=3.0))
    return list(dict.fromkeys(cases))


def random_heads(
    V: int, n: int, seed: int, heads: tuple[str, ...], K_min: int = 1, gap: int = 1, scale_min: float = 0.3
) -> list[HeadCase]:
    """``n`` drawn heads at vocabulary size V (capped at 400), seeded NumPy draws: d from 1 to
    min(8, V - gap), N from d + 2 to 80 contexts, K from ``K_min`` to 8, a logit scale of :data:`SCALES` from
    ``scale_min``, a constant column half the time at d ≥ 2. None where V leaves no d."""
    V, rng = min(V, 400), np.random.default_rng(seed)
    if V - gap < 1:
        return []
    scales = [x for x in SCALES if x >= scale_min]
    cases = []
    for _ in range(n):
        d = int(rng.integers(1, min(8, V - gap) + 1))
        cases.append(
            HeadCase(
                head=heads[int(rng.integers(len(heads)))],
                N=int(rng.integers(d + 2, 81)),
                V=V,
                d=d,
                K=int(rng.integers(K_min, 9)),
                seed=int(rng.integers(2**16)),
                scale=float(scales[int(rng.integers(len(scales)))]),
                constant_column=d >= 2 and bool(rng.integers(2)),
            )
        )
    return cases


def _with_constant_column(instances: Any) -> Any:
    """Instances drawn by ``instances``, half of those with d ≥ 2 with a constant first column in W
    (at d = 1 W would be a multiple of 1: every logit equal, every head uniform, J = 0)."""
    return st.tuples(instances, st.booleans()).map(
        lambda drawn: replace(drawn[0], constant_column=drawn[1] and drawn[0].d >= 2)
    )


def _with_single_latent(instances: Any) -> Any:
    """Instances drawn by ``instances`` with a single latent (K = 1)."""
    return instances.map(lambda drawn: replace(drawn, K=1))


def _boundary(heads: tuple[str, ...], K_least: int, scale_least: float, jacobian: bool = False) -> dict[str, Any]:
    """The boundary classes of a Cases bundle: the least sizes, the least K, both ends of the scales, a
    constant column, large V, each head; for the Jacobian, V ≤ d (the min(·, V − 1) branches)."""
    classes: dict[str, Callable[[HeadCase], bool]] = {
        "d = 1": lambda c: c.d == 1,
        "N = d + 2 contexts": lambda c: c.N == c.d + 2,
        f"K = {K_least} (the least)": lambda c: c.K == K_least,
        f"logit scale {scale_least:g} (the least)": lambda c: c.scale == scale_least,
        "logit scale 10": lambda c: c.scale == 10.0,
        "large V (512 or 2,048)": lambda c: c.V >= 512,
        **{f"the {head} head": (lambda h: lambda c: c.head == h)(head) for head in heads},
    }
    if jacobian:
        classes["V ≤ d (rank V − 1 at most)"] = lambda c: c.V <= c.d
    else:
        classes["V = d + 2 tokens"] = lambda c: c.V == c.d + 2
    if "softmax" in heads:
        classes["a constant column (1 ∈ col W)"] = lambda c: c.constant_column
    return classes


SOFTMAX_HEADS, NONLINEAR_HEADS = ("softmax", "moc"), ("mos", "sigsoftmax", "piecewise-linear")

#: Where the claims of this family range (the public API): softmax and mixture-of-contexts heads;
#: the nonlinear heads (MoS with K >= 2, sigsoftmax, piecewise-linear); every head, for its Jacobian;
#: and, for the planted false variants, MoC heads alone and MoS heads with a single latent.
#: Measured 3,481 (jacobian-rank) bytes per entry at V = 131,072, rounded up by a quarter.
BYTES_PER_ENTRY = 4_400
softmax_heads = Cases(
    lambda: _with_constant_column(head_instances(SOFTMAX_HEADS)),
    lambda V: _witnesses(V, SOFTMAX_HEADS, (1, 3), gap=1, constant=True),
    lambda V, n, seed: random_heads(V, n, seed, SOFTMAX_HEADS),
    _boundary(SOFTMAX_HEADS, 1, 0.3),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
nonlinear_heads = Cases(
    lambda: head_instances(NONLINEAR_HEADS, K_min=2, scale_min=1.0),
    lambda V: [i for i in _witnesses(V, NONLINEAR_HEADS, (2, 4), gap=2) if i.head == "mos" or i.K == 2],
    lambda V, n, seed: [
        replace(i, constant_column=False) for i in random_heads(V, n, seed, NONLINEAR_HEADS, 2, 2, 1.0)
    ],
    _boundary(NONLINEAR_HEADS, 2, 1.0),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
every_head = Cases(
    lambda: _with_constant_column(head_instances(hd.HEADS, V_min=2)),
    lambda V: _witnesses(V, hd.HEADS, (3,), gap=None, constant=True),
    lambda V, n, seed: random_heads(V, n, seed, hd.HEADS, gap=0),
    _boundary(hd.HEADS, 1, 0.3, jacobian=True),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
mixtures_of_contexts = Cases(
    lambda: head_instances(("moc",)),
    lambda V: _witnesses(V, ("moc",), (1, 3), gap=2),
    lambda V, n, seed: random_heads(V, n, seed, ("moc",), gap=2),
    _boundary(("moc",), 1, 0.3),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)
single_latent_mixtures = Cases(
    lambda: _with_single_latent(head_instances(("mos",))),
    lambda V: _witnesses(V, ("mos",), (1,), gap=2),
    lambda V, n, seed: [replace(i, K=1, constant_column=False) for i in random_heads(V, n, seed, ("mos",), gap=2)],
    _boundary(("mos",), 1, 0.3),
    family=FAMILY,
    bytes_per_entry=BYTES_PER_ENTRY,
)


# --------------------------------------------------------------------------- the claims

bottleneck = declare(
    "heads.softmax-moc-rank",
    source=f"{SEED_001}, 'The trap' (mixture of contexts) and Corollary 1",
    title="Softmax and mixture-of-contexts heads cannot exceed rank d + 1",
    statement="rank(log P) ≤ d + 1 over any set of contexts, for P = softmax(W h) and P = softmax(W Σ_k π_k h_k)",
    domain="Gaussian heads, K = 1..8 latents, logit scale 0.3 to 10, W with or without a constant column",
    lhs=log_probability_rank,
    relation="<=",
    rhs=hidden_size + 1,
    cases=softmax_heads,
    default_V=64,  # the exact ranks of the heads cost O(V³); --V runs any size
)
mos = declare(
    "heads.nonlinear-heads-exceed",
    source=f"{SEED_001}, 'Mixture of softmaxes' (MoS has no rank ceiling); Kanai et al. (sigsoftmax)",
    title="Mixtures of softmaxes and nonlinear heads break the d + 1 ceiling",
    statement="rank(log P) ≥ d + 2 for MoS (K ≥ 2), sigsoftmax and the monotone piecewise-linear head",
    domain="generic Gaussian heads, N, V ≥ d + 2, logit scale 1 to 10 (a generic statement, not a universal one)",
    lhs=log_probability_rank,
    relation=">=",
    rhs=hidden_size + 2,
    cases=nonlinear_heads,
    default_V=64,  # the exact ranks of the heads cost O(V³); --V runs any size
)
jacobian = declare(
    "heads.jacobian-rank",
    source=f"{SEED_000}, §2.3 and Eq. 10",
    title="The gradient a head sends to the backbone has an exact, at most d-dimensional, rank",
    statement=(
        "rank(∂ log p/∂h) = rank[W, 1] − 1 (for W of full column rank: d, or d − 1 when 1 ∈ col W) for softmax, "
        "MoC and MoS with K = 1; "
        "rank W_S for the piecewise-linear head (S the positive logits, rank [GW, 1] − 1 when all are); "
        "min(rank W, V − 1) for sigsoftmax; min(d, V − 1) for MoS with K ≥ 2"
    ),
    domain=(
        "all five heads, W with or without a constant column (d ≥ 2); exact for softmax and piecewise-linear, "
        "generic for MoC (∂h_eff/∂h invertible), sigsoftmax and MoS"
    ),
    lhs=jacobian_rank,
    relation="==",
    rhs=stated_jacobian_rank,
    cases=every_head,
)
bottleneck.with_mutant(
    "moc-exceeds-d-plus-1",
    statement="MoC log-probabilities reach rank ≥ d + 2  (false: MoC is a softmax of one mixed state)",
    relation=">=",
    rhs=hidden_size + 2,
    cases=mixtures_of_contexts,
)
mos.with_mutant(
    "mos-k1-exceeds",
    statement="MoS with K = 1 reaches rank ≥ d + 2  (false: with one component MoS is a softmax)",
    cases=single_latent_mixtures,
)
jacobian.with_mutant(
    "always-full",
    statement="rank(∂ log p/∂h) = min(d, V − 1) for every head  (false: d − 1 for softmax when 1 ∈ col W)",
    rhs=minimum(hidden_size, vocabulary - 1),
)

#: The theorems and lemmas of ``docs/heads.md`` (collected by ``checks/companion/fidelity.py``).
_TESTS = "tests/test_heads.py::"
# fmt: off
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-heads", "HD.1", "heads", "seed 001, the argument, MoC and MoS", Kind.CORRECTED,
              ("heads.softmax-moc-rank", "heads.nonlinear-heads-exceed"),
              (_TESTS + "test_rank_of_log_probabilities",
               "tests/test_mos_rank.py::test_moc_never_exceeds_D_plus_one_and_mos_breaks_it"),
              "d + 1, not d; genericity proved from one certified witness, needs min(N, V) >= d + 2"),
    Statement("lem-projection", "HD.2", "heads", "none", Kind.NEW, ("heads.jacobian-rank",),
              (_TESTS + "test_lemma_rank_of_a_projected_matrix_is_rank_with_ones_minus_one",)),
    Statement("thm-heads-jacobian", "HD.3", "heads", "seed 000, §2.3, Eq. 10 (rank <= D)", Kind.NEW,
              ("heads.jacobian-rank",),
              (_TESTS + "test_jacobian_matches_finite_differences_and_has_rank_d",
               _TESTS + "test_jacobian_rank_is_d_minus_1_when_the_ones_vector_is_in_col_w",
               _TESTS + "test_sigsoftmax_jacobian_rank_is_min_of_rank_w_and_v_minus_1"),
              "the exact rank of d log p / dh, not the seed's Jacobian of the logits"),
)
# fmt: on
