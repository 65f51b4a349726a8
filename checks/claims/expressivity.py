"""Claims ``expressivity.*``: Gibbs' inequality and identity (Prop. A.2), the top-1 witness at D >= 2
(Prop. A.4), the D = 1 contrast with a bias, and argmaxable tokens against the convex hull.

How each is decided (docs/expressivity.md has the details):

- ``gibbs``: the bound CE(Ñ) <= CE(P) (``bound='lower'``: the empirical distribution is the
  minimum), the two cross-entropies computed separately with a rounding bound each, and, as a
  conclusion, the identity CE(P) - CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c) between the two sides that
  :func:`rankwall.theory.expressivity.kl_gap` computes separately. An identity off by more than its rounding
  bound is a violation (two-sided); a bound inside its rounding band is re-decided in balls, on Ñ
  and f exactly from the counts and P the exact softmax of the logits (or Ñ itself). It follows
  ``--backend`` (``array_api=True``): counts and logits rounded to the backend's dtype, CE, log P (the
  log-sum-exp form of :func:`rankwall.theory.expressivity.log_softmax`) and kl_gap computed in its
  namespace, every γ at its u with an underflow term at its smallest normal; a count the dtype does not
  hold exactly, or a side or bound that is not finite, leaves the float route undecided (NaN sides), and
  the judge re-decides in NumPy float64 and balls. The other claims compute in NumPy float64.
- ``top1-witness`` and ``d1-bias-argmax``: the number of contexts (tokens) where the witness fails,
  an identity "failures = 0". A strict argmax is certified by :meth:`rankwall.theory.expressivity.Head.winners`
  (float logits with a rigorous rounding bound, exact integers for the close rivals); a top-1
  probability by an interval that encloses the exact softmax, re-decided in balls where it straddles
  ε. A failure is confirmed exactly before it is reported; a failure that the exact check clears
  means the two routes disagree, which is inconclusive. A D = 1 loss that only the rounding of the
  biases -w^2/2 explains (the exact tangent head wins) is a float finding, and the claim holds.
- ``argmaxable-vs-hull``: the tokens where the certified answer of
  :func:`rankwall.theory.expressivity.argmaxable` (each certificate re-checked exactly here) and qhull's
  vertices disagree, plus the certificates that fail their re-check: an identity "0". A token the
  pipeline leaves undecided is inconclusive, not a disagreement.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "ArgmaxHeadCase",
    "GibbsCase",
    "TangentCase",
    "Top1Case",
    "argmax_heads",
    "cross_entropy_empirical",
    "cross_entropy_model",
    "gibbs_cases",
    "head_size",
    "unargmaxable_tokens",
]

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import array_api_compat
import flint
import mpmath
import numpy as np
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance
from rankwall.checks.backends import Backend, float64_copy
from rankwall.checks.quantities import Context, Measured, quantity
from rankwall.checks.statements import Kind, Statement
from rankwall.checks.toolkit import Cases, Family, Reference, left_to_the_exact_route, numpy_float64, planted_side
from rankwall.checks.verdict import Case, Certification, Judgement, Measurement, RankInterval, Relation
from rankwall.theory import error_rank as er
from rankwall.theory import expressivity as ex
from rankwall.theory.validation import InputError

# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class GibbsCase(Case):
    """A Zipfian language of ``contexts`` x ``V`` counts (its ``seed``) and Gaussian logits of standard
    deviation ``scale`` (seed + 1), or P = Ñ itself when ``exact_fit``."""

    KIND: ClassVar[str] = "gibbs"
    V: int
    contexts: int = 64
    seed: int = 0
    scale: float = 1.0
    exact_fit: bool = False


@dataclass(frozen=True)
class Top1Case(Case):
    """The circle witness in dimension ``D`` for ``contexts`` targets and top-1 probabilities drawn
    from ``seed``, reached to within ``eps``; with ``at_edges``, the probabilities sit at the ends of
    the reachable (1/V + ε, 1 − ε), alternately."""

    KIND: ClassVar[str] = "top1"
    V: int
    D: int = 2
    contexts: int = 16
    seed: int = 0
    eps: float = 1e-6
    at_edges: bool = False


@dataclass(frozen=True)
class TangentCase(Case):
    """The D = 1 tangent head of :func:`rankwall.theory.expressivity.tangent_head` (V weights, ``seed``)."""

    KIND: ClassVar[str] = "tangent"
    V: int
    seed: int = 0


@dataclass(frozen=True)
class ArgmaxHeadCase(Case):
    """A Gaussian V x D head without bias (``seed``), ``interior`` rows planted inside its hull and
    ``twins`` exact copies of its first rows (ties: a row shared by two tokens is the strict argmax of
    neither). V >= D + 1 (qhull needs a full-dimensional hull; V = D + 1 is a simplex)."""

    KIND: ClassVar[str] = "argmax-head"
    V: int
    D: int = 2
    seed: int = 0
    interior: int = 0
    twins: int = 0


# --------------------------------------------------------------------------- strategies


#: The smallest vocabularies, drawn apart so that every strategy reaches them often.
SMALLEST = (2, 3)


@st.composite
def expressivity_instances(draw: Any, tangent: bool = False) -> Top1Case | TangentCase:
    """Circle witnesses (V up to 8,192 here; the witnesses go to 131,072) or D = 1 tangent heads: the
    smallest V, one context, D = 2, probabilities at the ends of (1/V, 1), large V (nearly equal
    tangent weights) all drawn often."""
    if tangent:
        V = draw(st.one_of(st.sampled_from(SMALLEST), st.integers(2, 2000), st.sampled_from([1024, 4096])))
        return TangentCase(V=V, seed=draw(st.integers(0, 2**16)))
    return Top1Case(
        V=draw(st.one_of(st.sampled_from(SMALLEST), st.integers(2, 64), st.sampled_from([1024, 8192]))),
        D=draw(st.one_of(st.just(2), st.integers(2, 16))),
        contexts=draw(st.one_of(st.just(1), st.integers(1, 8))),
        seed=draw(st.integers(0, 2**16)),
        eps=draw(st.sampled_from([1e-3, 1e-6, 1e-9])),
        at_edges=draw(st.booleans()),
    )


@st.composite
def gibbs_instances(draw: Any) -> GibbsCase:
    """Zipfian languages against softmax models (or the exact fit P = Ñ): the smallest V, one to three
    contexts (often every row one-hot, CE(Ñ) = 0), and logits wide enough (scale 400) that model
    probabilities fall below the normal range, all drawn often."""
    return GibbsCase(
        V=draw(st.one_of(st.sampled_from(SMALLEST), st.integers(2, 200))),
        contexts=draw(st.one_of(st.integers(1, 3), st.integers(1, 60))),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([0.1, 1.0, 10.0, 400.0])),
        exact_fit=draw(st.booleans()),
    )


@st.composite
def argmax_instances(draw: Any) -> ArgmaxHeadCase:
    """Heads without bias for the argmaxable-token checks (small D, so qhull can cross-check): simplices
    (V = D + 1), planted interior rows and duplicated rows drawn often."""
    D = draw(st.integers(2, 5))
    return ArgmaxHeadCase(
        V=draw(st.one_of(st.integers(D + 1, D + 3), st.integers(D + 1, 60))),
        D=D,
        seed=draw(st.integers(0, 2**16)),
        interior=draw(st.one_of(st.just(0), st.integers(0, 4))),
        twins=draw(st.one_of(st.just(0), st.integers(0, 2))),
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = 2.0**-53
#: Accuracy assumed of NumPy's ``exp`` and ``log`` (glibc and NumPy's SIMD loops stay within 4 ulps),
#: as roundings in the gamma_n of every bound below: one ulp is 2u.
LIBM_ROUNDINGS = 8
#: The smallest positive float64: a result that underflows is off by at most this.
TINY = 2.0**-1074
#: Failures confirmed one by one in exact integers before a violation is reported (one suffices).
CONFIRMED_FAILURES = 16
NAN = math.nan

# --------------------------------------------------------------------------- Gibbs (Prop. A.2)


def gibbs_instance(case: GibbsCase) -> tuple[np.ndarray, np.ndarray]:
    """The integer counts (C x V) of a Zipfian language and the model's logits z (C x V), in NumPy
    float64: P is the softmax of z, or Ñ itself when ``exact_fit``."""
    counts = er.construct_zipf_language(case.V, case.contexts, case.seed).toarray()
    z = np.random.default_rng(case.seed + 1).standard_normal(counts.shape) * case.scale
    return counts, z


@dataclass(frozen=True)
class GibbsArrays:
    """A Gibbs instance in a backend: the counts and the logits rounded to its dtype (the exact
    instance of the measurement), Ñ = n_cv / n_c, f and the weights f_c Ñ_cv computed there, the row
    maxima m and log P = log softmax(z) (or log Ñ at P = Ñ), with u and the smallest normal of the
    dtype, and ``terms``, the number of observed (c, v)."""

    counts: Any
    z: Any
    N: Any
    f: Any
    weights: Any
    log_N: Any
    log_P: Any
    top: Any
    u: float
    tiny: float
    terms: int


def gibbs_arrays(counts: np.ndarray, z: np.ndarray, exact_fit: bool, backend: Backend) -> GibbsArrays:
    """Counts and logits rounded to the backend's dtype (the counts exactly, see
    :func:`counts_exact_in`), everything else computed in its namespace; log P by
    :func:`rankwall.theory.expressivity.log_softmax` (the log-sum-exp form: no observed log P is -inf)."""
    xp = backend.xp
    counts_b, z_b = backend.asarray(counts), backend.asarray(z)
    totals = xp.sum(counts_b, axis=1, keepdims=True)
    N = counts_b / totals
    f = totals[:, 0] / xp.sum(counts_b)
    weights = (totals / xp.sum(counts_b)) * N  # f_c Ñ_cv
    log_N = xp.log(xp.where(N > 0, N, xp.ones_like(N)))
    log_P = log_N if exact_fit else ex.log_softmax(z_b)
    top = xp.max(z_b, axis=1, keepdims=True)
    u, tiny = tolerance.unit_roundoff(backend.dtype), tolerance.smallest_normal(backend.dtype)
    return GibbsArrays(counts_b, z_b, N, f, weights, log_N, log_P, top, u, tiny, int(np.count_nonzero(counts)))


def counts_exact_in(counts: np.ndarray, u: float) -> bool:
    """Whether every count, row total and the grand total is an integer the dtype of unit roundoff u
    holds exactly (at most 1/u = 2^24 in float32): the bounds below assume Ñ = n_cv / n_c and
    f_c Ñ_cv = (n_c / n) Ñ_cv cost one and three roundings."""
    return float(counts.sum()) <= 1 / u


def weighted_sum(
    weights: Any, values: Any, value_error: np.ndarray, terms: int, u: float, tiny: float
) -> tuple[float, float]:
    """``Σ w x`` in the arrays' namespace (entries with w = 0 add exactly 0), and a bound on its
    distance to ``Σ w* x*``, where each weight is within γ_3 of the exact w* (two roundings from the
    counts and a product) and each value within ``value_error`` of the exact x*: γ_{n+4} Σ|w x| for the
    products and the sum of the n = ``terms`` observed entries (any order), (1 + γ_3) Σ w ``value_error``,
    and the underflow term n λ (λ the dtype's smallest normal: a product that falls below the normal
    range is off by at most λ in absolute terms, not relatively), the whole times (1 + γ_{n+4}) for the
    rounding of the bound. Every γ at u, the backend dtype's unit roundoff; the bound is computed in
    float64 from exact float64 copies."""
    xp = array_api_compat.array_namespace(weights, values)
    g = tolerance.gamma(terms + 4, u)
    total = float(xp.sum(weights * values))
    w, x = float64_copy(weights), float64_copy(values)
    bound = g * float(np.sum(np.abs(w * x))) + (1 + tolerance.gamma(3, u)) * float(np.sum(w * value_error))
    return total, (bound + terms * tiny) * (1 + g)


def log_error(logs: np.ndarray, inputs: int, u: float) -> np.ndarray:
    """Bound on the error of a computed log whose argument carries ``inputs`` roundings:
    γ_inputs for the argument (|log(1 + δ)| <= γ) and ``LIBM_ROUNDINGS`` relative to the result."""
    return tolerance.gamma(inputs + 1, u) + tolerance.gamma(LIBM_ROUNDINGS, u) * np.abs(logs)


def log_softmax_error(a: GibbsArrays) -> np.ndarray:
    """Per entry, a bound on the error of log P = z - m - log Σ e^{z - m} as computed: γ_{V+4+LIBM}
    (1 + |z| + |m| + |log P|) (the log of a sum of V terms with relative error γ_{V+LIBM}), plus the
    underflow term 2Vλ: each e^{z - m} below the normal range λ is off by at most λ, and the sum is at
    least 1 (its largest term is e^0), so its log moves by at most Vλ/(1 - Vλ)."""
    z, top, log_P = float64_copy(a.z), float64_copy(a.top), float64_copy(a.log_P)
    V = z.shape[1]
    scale = 1 + np.abs(z) + np.abs(top) + np.abs(log_P)
    return tolerance.gamma(V + 4 + LIBM_ROUNDINGS, a.u) * scale + 2 * V * a.tiny


def cross_entropies(a: GibbsArrays, exact_fit: bool) -> dict[str, Any]:
    """CE(Ñ) = -Σ f Ñ log Ñ and CE(P) = -Σ f Ñ log P, each from its definition in the backend with a
    rounding bound (:func:`weighted_sum`): log Ñ from Ñ = n_cv / n_c (one rounding), log P from
    :func:`log_softmax_error`. Also the per-entry errors of the two logs (``errors``, for the identity)."""
    log_N = float64_copy(a.log_N)
    error_N = log_error(log_N, 1, a.u)
    ce_N, err_N = weighted_sum(a.weights, -a.log_N, error_N, a.terms, a.u, a.tiny)
    if exact_fit:
        ce_P, err_P, error_P = ce_N, err_N, error_N
    else:
        error_P = log_softmax_error(a)
        ce_P, err_P = weighted_sum(a.weights, -a.log_P, error_P, a.terms, a.u, a.tiny)
    return {"ce_N": ce_N, "ce_N_error": err_N, "ce_P": ce_P, "ce_P_error": err_P, "errors": (error_N, error_P)}


def identity_residuals(a: GibbsArrays, unweighted: bool, ce: dict[str, Any]) -> dict[str, float]:
    """Gibbs' identity, checked twice with the sides from :func:`rankwall.theory.expressivity.kl_gap` on the
    backend's P = e^{log P}, Ñ, f and log P: (a) its CE difference against its Σ_c f_c KL(Ñ_c ‖ P_c) (or
    the unweighted Σ_c KL, for the mutant); (b) its CE difference against CE(P) - CE(Ñ) from
    :func:`cross_entropies`. Each residual (shrunk by its own rounding, u of float64) comes with a bound
    at the backend's u. Each kl_gap side is a sum of n = CV products f Ñ log x with
    ``LIBM_ROUNDINGS`` in the log and three more in the products and the subtraction: within
    γ_{n+LIBM+4} S + nλ of its exact value on the float instance, S = Σ f Ñ (|log Ñ| + |log P|), λ the
    smallest normal (a is exact there: the same sum regrouped). For (b), the float instance is within
    γ_3 S + (1 + γ_3) Σ f Ñ (e_Ñ + e_P) of the exact one (the weights within γ_3, the logs within the
    per-entry bounds of :func:`cross_entropies`), and CE(P) - CE(Ñ) within the two bounds of
    :func:`cross_entropies`. Every bound is multiplied by 1 + γ for its own rounding."""
    u, xp = a.u, array_api_compat.array_namespace(a.N)
    P = xp.exp(a.log_P)
    gap, kl = ex.kl_gap(P, a.N, a.f, log_P=a.log_P)
    if unweighted:
        kl = ex.kl_gap(P, a.N, xp.ones_like(a.f), log_P=a.log_P)[1]
    N, f, w = float64_copy(a.N), float64_copy(a.f), float64_copy(a.weights)
    support = N > 0
    logs = np.where(support, np.abs(float64_copy(a.log_N)) + np.abs(float64_copy(a.log_P)), 0.0)
    g = tolerance.gamma(a.N.shape[0] * a.N.shape[1] + LIBM_ROUNDINGS + 4, u)
    size = float(np.sum(f[:, None] * N * logs))
    kl_size = float(np.sum(N * logs)) if unweighted else size
    gap_error = g * size + a.terms * a.tiny + U * abs(gap)
    difference = ce["ce_P"] - ce["ce_N"]
    error_N, error_P = ce["errors"]
    g3 = tolerance.gamma(3, u)
    instance_error = g3 * size + (1 + g3) * float(np.sum(np.where(support, w * (error_N + error_P), 0.0)))
    cross_error = ce["ce_P_error"] + ce["ce_N_error"] + U * abs(difference)
    return {
        "gap": gap,
        "kl": kl,
        "ce_difference": difference,
        "kl_residual": (gap - kl) * (1 - U),
        "kl_bound": (gap_error + g * kl_size + a.terms * a.tiny) * (1 + g),
        "ce_residual": (gap - difference) * (1 - U),
        "ce_bound": (gap_error + instance_error + cross_error) * (1 + g),
    }


def gibbs_decision(
    case: GibbsCase,
    factor: Fraction,
    uniform: bool = False,
    unweighted: bool = False,
    backend: Backend | None = None,
) -> tuple[Measurement, Callable[[], Judgement]]:
    """F CE(Q) <= CE(P) with Q = Ñ (the claim; Q uniform for a mutant, CE = log V), after the identity
    (:func:`identity_residuals`), computed in ``backend`` (NumPy float64 by default) on the instance
    rounded to its dtype. An identity off by more than its bound is violated (two-sided, the rounding
    model); the bound inside its rounding band goes to :func:`gibbs_in_balls` (on the float64 logits).
    Where the backend's dtype cannot bound a side (a count it does not hold exactly, a side or a bound
    that is not finite), the measurement is left to the exact route (NaN sides)."""
    backend = numpy_float64() if backend is None else backend
    where = f"{backend.name} {backend.dtype_name}"
    counts, z = gibbs_instance(case)
    u = tolerance.unit_roundoff(backend.dtype)
    if not counts_exact_in(counts, u):
        measured = left_to_the_exact_route(f"{where} cross-entropies", "a count beyond the dtype's integers")
        return measured, lambda: gibbs_decision(case, factor, uniform, unweighted)[1]()
    a = gibbs_arrays(counts, z, case.exact_fit, backend)
    ce = cross_entropies(a, case.exact_fit)
    identity = identity_residuals(a, unweighted, ce)
    ce.pop("errors")
    certificate = {**identity, **ce, "backend": backend.name, "dtype": backend.dtype_name}
    if not all(math.isfinite(x) for x in certificate.values() if isinstance(x, float)):
        measured = left_to_the_exact_route(f"{where} cross-entropies", "a side or a bound not finite", certificate)
        return measured, lambda: gibbs_decision(case, factor, uniform, unweighted)[1]()
    for side, what in (("kl", "Σ f KL"), ("ce", "CE(P) - CE(Ñ) computed apart")):
        if abs(identity[f"{side}_residual"]) > identity[f"{side}_bound"]:
            method = f"identity fails: kl_gap's CE difference and {what} differ by more than their rounding bound"
            # The sides of the failed conclusion: |residual| <= its rounding bound.
            residual, bound = abs(identity[f"{side}_residual"]), identity[f"{side}_bound"]
            judgement = Judgement(residual, bound, -1, method, 0.0, certificate, Certification.TWO_SIDED)
            return Measurement(NAN, NAN, NAN, method, certificate), lambda judgement=judgement: judgement
    if case.exact_fit and not uniform and (factor == 1 or bool(np.all(counts.max(axis=1) == counts.sum(axis=1)))):
        # P is Ñ by construction: CE(P) and F CE(Ñ) are the same number (F = 1), or CE(Ñ) = 0 (one-hot
        # rows, where the computed logs are log 1 = 0 exactly), whatever the dtype.
        method = f"P = Ñ exactly, and F = 1 or CE(Ñ) = 0 ({where})"
        lhs = float(factor) * ce["ce_N"]
        # the margin is exact; each side is the float CE(Ñ), within its rounding bound of the exact one
        measured = Measurement(
            lhs, ce["ce_N"], ce["ce_N_error"], method, certificate, exact_sides=True, certified_by=Certification.EXACT
        )
        return measured, lambda: gibbs_in_balls(counts, z, case.exact_fit, factor, uniform, certificate)
    ce_Q, err_Q = ce["ce_N"], ce["ce_N_error"]
    if uniform:
        ce_Q = math.log(case.V)
        err_Q = tolerance.gamma(LIBM_ROUNDINGS, U) * ce_Q
    F = float(factor)
    lhs = F * ce_Q
    # F CE(Q) and the comparison in float64 (Python floats): three roundings at float64's u.
    tol = ce["ce_P_error"] + F * err_Q + tolerance.gamma(3, U) * (abs(lhs) + abs(ce["ce_P"]))
    measured = Measurement(lhs, ce["ce_P"], tol, f"{where} cross-entropies, rounding-bounded", certificate)
    return measured, lambda: gibbs_in_balls(counts, z, case.exact_fit, factor, uniform, certificate)


def gibbs_in_balls(
    counts: np.ndarray, z: np.ndarray, exact_fit: bool, factor: Fraction, uniform: bool, certificate: dict[str, Any]
) -> Judgement:
    """F CE(Q) <= CE(P) re-decided with f_c Ñ_cv = n_cv / n exactly and log Ñ_cv = log n_cv - log n_c,
    log P_cv = z_cv - log Σ_w e^{z_cw} in balls (``exact.BALL_PRECISIONS``). When P = Q = Ñ
    (``exact_fit``) the margin is (1 - F) CE(Ñ): zero exactly when F = 1 or every observed row is
    one-hot (CE(Ñ) = 0), else of the sign of 1 - F (the ball of CE(Ñ) is positive)."""
    rows, cols = np.nonzero(counts)
    n = [int(x) for x in counts[rows, cols]]
    row_totals = [int(x) for x in counts.sum(axis=1)]
    F = flint.fmpq(factor.numerator, factor.denominator)
    if exact_fit and not uniform and (F == 1 or all(k == row_totals[c] for k, c in zip(n, rows, strict=True))):
        ce = certificate["ce_N"]
        method = "P = Ñ exactly, and F = 1 or CE(Ñ) = 0"
        return Judgement(float(F) * ce, ce, 0, method, 0.0, certificate, Certification.EXACT)
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            terms = (k * (flint.arb(k).log() - flint.arb(row_totals[c]).log()) for k, c in zip(n, rows, strict=True))
            ce_N = -sum(terms, flint.arb(0)) / sum(row_totals)
            ce_Q = flint.arb(counts.shape[1]).log() if uniform else ce_N
            if exact_fit:
                ce_P = ce_N
            else:
                lse = {c: sum((exact.ball(x).exp() for x in z[c]), flint.arb(0)).log() for c in set(rows.tolist())}
                terms = (k * (exact.ball(z[c, v]) - lse[c]) for k, c, v in zip(n, rows, cols, strict=True))
                ce_P = -sum(terms, flint.arb(0)) / sum(row_totals)
            margin = (1 - F) * ce_N if exact_fit and not uniform else ce_P - F * ce_Q
            sign = exact.sign(margin)
            if sign is not None:
                lhs, rhs = exact.to_float(F * ce_Q), exact.to_float(ce_P)
                radius = exact.radius(margin)
                return Judgement(lhs, rhs, sign, f"balls at {bits} bits", radius, certificate, Certification.TWO_SIDED)
    return Judgement(NAN, NAN, None, "undecided in balls", certificate=certificate)


# --------------------------------------------------------------------------- strict argmaxes, exactly


def certified_wins(head: ex.Head, H: np.ndarray, tokens: np.ndarray, block: int = 256) -> np.ndarray:
    """Whether ``tokens[k]`` is the strict argmax of W h_k + b, by :meth:`rankwall.theory.expressivity.Head.winners`
    (float logits with a rigorous rounding bound, exact integers for the rivals within it), in blocks
    of ``block`` rows so that the V x block logits stay small."""
    return np.concatenate(
        [head.winners(H[s : s + block], tokens[s : s + block]) for s in range(0, len(tokens), block)]
        or [np.zeros(0, dtype=bool)]
    )


def confirm_losses(head: ex.Head, H: np.ndarray, tokens: np.ndarray) -> tuple[list[int], list[int]]:
    """Re-check, in exact integers against every rival (:func:`rankwall.theory.expressivity.wins_exactly`), up to
    ``CONFIRMED_FAILURES`` of the rows reported lost. Returns the rows confirmed lost and the rows that
    win after all (the two routes disagree there)."""
    lost, won = [], []
    V = head.W.shape[0]
    for k in range(min(len(tokens), CONFIRMED_FAILURES)):
        t = int(tokens[k])
        rivals = np.delete(np.arange(V), t)
        (won if ex.wins_exactly(head, H[k], t, rivals) else lost).append(k)
    return lost, won


def confirmed_misses(
    head: ex.Head, H: np.ndarray, tokens: np.ndarray, method: str, certificate: dict[str, Any]
) -> Judgement:
    """The judgement of an identity "failures = 0" whose screen reported the rows of H lost: violated
    (exact) once a loss is confirmed in integers (:func:`confirm_losses`); inconclusive when the exact
    check clears a reported loss (the two routes disagree) or none of the checked ones is confirmed."""
    lost, won = confirm_losses(head, H, tokens)
    certificate = {**certificate, "confirmed": [int(tokens[k]) for k in lost], "cleared": [int(tokens[k]) for k in won]}
    if lost:
        how = f"{method}; losses confirmed in exact integers"
        return Judgement(float(len(lost)), 0.0, -1, how, 0.0, certificate, Certification.EXACT)
    return Judgement(NAN, 0.0, None, f"{method}; undecided: the screen and the exact check disagree", 0.0, certificate)


# --------------------------------------------------------------------------- D = 1 with a bias


def tangent_head_wins(W: np.ndarray, t: int) -> bool:
    """Whether t is the strict argmax at h = w_t of the exact tangent head z_v(h) = w_v h - w_v^2/2 (the
    biases exact, not rounded), in integers: with w_v = n_v / Q, 2 Q^2 z_v(w_t) = 2 n_v n_t - n_v^2."""
    ratios = [float(w).as_integer_ratio() for w in W.ravel()]
    Q = max(q for _, q in ratios)
    n = [p * (Q // q) for p, q in ratios]
    scores = [2 * m * n[t] - m * m for m in n]
    return all(scores[t] > score for v, score in enumerate(scores) if v != t)


def biases_round_the_tangent(W: np.ndarray, b: np.ndarray) -> bool:
    """Whether every constructed bias is -w_v^2/2 to within one rounding, |b_v + w_v^2/2| <= u w_v^2/2,
    in Fractions."""
    u = Fraction(U)
    squares = [Fraction(float(w)) ** 2 / 2 for w in W.ravel()]
    return all(abs(Fraction(float(bias)) + sq) <= u * sq for bias, sq in zip(b, squares, strict=True))


def tangent_judgement(
    head: ex.Head, W: np.ndarray, b: np.ndarray, missed: np.ndarray, method: str, certificate: dict[str, Any]
) -> Judgement:
    """The judge of the D = 1 claim, for the tokens that the float64 head (as constructed) was reported
    to lose. A loss confirmed in integers (:func:`confirm_losses`) is a failure of the construction
    unless its biases are -w^2/2 to within one rounding and the exact tangent head makes the token win
    (:func:`tangent_head_wins`): then it is a float finding, recorded, and the claim holds (exact).
    A reported loss that the exact check clears leaves the instance inconclusive."""
    lost, won = confirm_losses(head, W[missed], missed)
    rounded = biases_round_the_tangent(W, b)
    findings = [int(missed[k]) for k in lost if rounded and tangent_head_wins(W, int(missed[k]))]
    failures = [int(missed[k]) for k in lost if int(missed[k]) not in findings]
    certificate = {
        **certificate,
        "confirmed": failures,
        "float_findings": findings,
        "cleared": [int(missed[k]) for k in won],
        "biases_rounded": rounded,
    }
    if failures:
        how = f"{method}; losses confirmed in exact integers"
        return Judgement(float(len(failures)), 0.0, -1, how, 0.0, certificate, Certification.EXACT)
    if won or len(missed) > CONFIRMED_FAILURES:
        return Judgement(
            NAN, 0.0, None, f"{method}; undecided: the screen and the exact check disagree", 0.0, certificate
        )
    how = f"{method}; the exact tangent head wins where the float64 biases lose (a float finding)"
    return Judgement(0.0, 0.0, 0, how, 0.0, certificate, Certification.EXACT)


def tangent_closeness(W: np.ndarray) -> float:
    """How near the tangent head comes to a lost token (for the search's target()): token t beats its
    nearest neighbour at h = w_t by (Δw)²/2, against biases of size w²/2 rounded at u; minus the
    smallest (Δw)² over u·max w² (a loss needs it near 1 or below)."""
    w = np.sort(W.ravel())
    smallest = float(np.min(np.diff(w)) ** 2) if len(w) > 1 else math.inf
    return -smallest / (U * max(float(np.max(w * w)), TINY))


def tangent_decision(case: TangentCase, bias: bool = True) -> tuple[Measurement, Callable[[], Judgement]]:
    """Tokens t that are not the strict argmax of z(h) = w h + b at their witness h = w_t, for the
    tangent head b = -w^2/2 as constructed in float64 (without its bias for the mutant, whose head is
    then exact). Each token is certified by :func:`certified_wins`; a miss is confirmed exactly, and
    for the claim checked against the exact tangent head (:func:`tangent_judgement`)."""
    W, b = ex.tangent_head(case.V, case.seed)
    head = ex.Head.of(W, b if bias else None)
    tokens = np.arange(len(W))
    missed = np.flatnonzero(~certified_wins(head, W, tokens))
    method = "strict argmax at h = w_t, certified" + ("" if bias else " (no bias)")
    certificate = {"missed": len(missed), "first_missed": missed[:8].tolist(), "closeness": tangent_closeness(W)}
    measured = Measurement(float(len(missed)), 0.0, 0.0, method, certificate, True, Certification.TWO_SIDED)
    if bias:
        return measured, lambda: tangent_judgement(head, W, b, missed, method, certificate)
    return measured, lambda: confirmed_misses(head, W[missed], missed, method, certificate)


def interior_decision(case: TangentCase) -> tuple[Measurement, Callable[[], Judgement]]:
    """D = 1 without a bias: the tokens whose weight lies strictly between the extremes never win (for
    any h, h w_t < max(h min w, h max w) unless h = 0, a tie of all). Float comparisons are exact."""
    W, _ = ex.tangent_head(case.V, case.seed)
    interior = len(ex.interior_tokens(W))
    method = "interior weights (D = 1, no bias), exact comparisons"
    measured = Measurement(float(interior), 0.0, 0.0, method, {"interior": interior}, True, Certification.EXACT)
    return measured, lambda: Judgement(
        float(interior), 0.0, -1 if interior else 0, method, 0.0, None, Certification.EXACT
    )


# --------------------------------------------------------------------------- the top-1 witness (Prop. A.4)


def witness(case: Top1Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(H, W, targets, probabilities) of the circle witness for the case's drawn targets."""
    rng = np.random.default_rng(case.seed)
    targets = rng.integers(0, case.V, size=case.contexts)
    probs = rng.uniform(1.0 / case.V, 1.0, size=case.contexts)
    probs = np.clip(probs, 1.0 / case.V + case.eps, 1.0 - case.eps)
    if case.at_edges:
        probs[0::2], probs[1::2] = 1.0 / case.V + case.eps, 1.0 - case.eps
    H, W = ex.construct_top1_witness(targets, probs, case.D, case.eps, case.V)
    return H, W, targets, probs


def top1_interval(H: np.ndarray, W: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""An interval [q_lo, q_hi] around the exact probability q_c = 1/Σ_v e^{d_v} of the target,
    d_v = (w_v - w_t)·h_c. The difference is taken before the product, so no large logit cancels:
    the computed d_v is within a_v = γ_{D+4} Σ_k |w_vk - w_tk||h_k| + D 2^-1074 of the exact one (γ_D for
    the product, one rounding per difference, the rest for the rounding of a_v itself). Since
    exp is increasing, S lies between Σ e^{d̂ - a} and Σ e^{d̂ + a}, each computed with γ_{V+LIBM+2}
    relative error plus 2u Σ|x|e^x (the rounding of the argument x) and V 2^-1074 (underflow); the
    target's own term is e^0 = 1 exactly. Inverting costs one more rounding."""
    V, D = W.shape
    g = tolerance.gamma(V + LIBM_ROUNDINGS + 2, U)
    low, high = np.empty(len(targets)), np.empty(len(targets))

    def enclosed_sum(x: np.ndarray, direction: int) -> float:
        with np.errstate(over="ignore", under="ignore"):  # an infinite upper sum is still a bound
            terms = np.exp(x)
        slack = 2 * U * float(np.sum(np.abs(x) * terms)) + V * TINY
        total = float(terms.sum())
        return total * (1 + g) + slack if direction > 0 else total * (1 - g) - slack

    for c, (h, t) in enumerate(zip(H, targets, strict=True)):
        difference = W - W[t]
        d = difference @ h
        a = tolerance.gamma(D + 4, U) * (np.abs(difference) @ np.abs(h)) + D * TINY
        high[c] = enclosed_sum(d + a, 1)
        low[c] = max(enclosed_sum(d - a, -1), 1.0)
    return (1 / high) * (1 - 2 * U), (1 / low) * (1 + 2 * U)


def top1_in_balls(W: np.ndarray, h: np.ndarray, t: int, p: float, eps: float) -> int | None:
    """The sign of ε - |q - p| for the exact q = 1/Σ_v e^{(w_v - w_t)·h}, in balls
    (``exact.BALL_PRECISIONS``): 1 or 0 when the witness is within ε, -1 when it is not, None undecided."""
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            hb = [exact.ball(x) for x in h]
            own = sum((exact.ball(w) * x for w, x in zip(W[t], hb, strict=True)), flint.arb(0))
            total = flint.arb(0)
            for row in W:
                total += (sum((exact.ball(w) * x for w, x in zip(row, hb, strict=True)), flint.arb(0)) - own).exp()
            sign = exact.sign(exact.ball(eps) - abs(1 / total - exact.ball(p)))
            if sign is not None:
                return sign
    return None


def top1_decision(case: Top1Case, eps: float | None = None) -> tuple[Measurement, Callable[[], Judgement]]:
    """Contexts where the circle witness fails: t_c is not the certified strict argmax, or the top-1
    probability is not within ε of p_c (``eps`` overrides ε for a mutant). Each context is certified
    ok, certified failed, or undecided (an interval that straddles ε, logits that overflow). The judge
    confirms argmax failures in exact integers and decides the undecided contexts in balls."""
    H, W, targets, probs = witness(case)
    eps = float(case.eps) if eps is None else eps
    head = ex.Head.of(W)
    wins = certified_wins(head, H, targets)
    finite = np.all(np.isfinite(H @ W.T), axis=1)
    low, high = top1_interval(H, W, targets)
    far = np.maximum(high - probs, probs - low) * (1 + 4 * U)
    near = np.maximum(low - probs, probs - high) * (1 - 4 * U)
    ok = wins & (far <= eps)
    lost_mask = ~wins & finite  # a certified loss (Head.winners is exact on finite logits)
    off_mask = wins & (near > eps)  # the whole interval is farther than ε from p
    lost, off, undecided = (np.flatnonzero(m) for m in (lost_mask, off_mask, ~ok & ~lost_mask & ~off_mask))
    method = "strict argmax certified, top-1 probability in a rounding-bounded interval"
    certificate = {
        "wrong_argmax": len(lost),
        "probability_off": len(off),
        "undecided": len(undecided),
        "largest_distance": float(far.max()),
        # for the search's target(): the worst context's distance bound in units of ε (1 is the edge)
        "closeness": float(far.max() / eps) if eps > 0 else math.inf,
    }
    failures = len(lost) + len(off)
    lhs = float(failures) if failures or len(undecided) == 0 else NAN
    measured = Measurement(lhs, 0.0, 0.0, method, certificate, True, Certification.TWO_SIDED)

    def judge() -> Judgement:
        if len(lost):
            return confirmed_misses(head, H[lost], targets[lost], method, certificate)
        if len(off):
            return Judgement(
                float(len(off)), 0.0, -1, f"{method}; |top-1 - p| > ε", 0.0, certificate, Certification.TWO_SIDED
            )
        signs = []
        for c in undecided:
            t = int(targets[c])
            if not wins[c] and not ex.wins_exactly(head, H[c], t, np.delete(np.arange(len(W)), t)):
                how = f"{method}; overflowing logits: argmax lost, exactly"
                return Judgement(1.0, 0.0, -1, how, 0.0, certificate, Certification.EXACT)
            signs.append(top1_in_balls(W, H[c], t, float(probs[c]), eps))
        if -1 in signs:
            return Judgement(
                float(signs.count(-1)),
                0.0,
                -1,
                f"{method}; |top-1 - p| > ε in balls",
                0.0,
                certificate,
                Certification.TWO_SIDED,
            )
        if None in signs:
            return Judgement(NAN, 0.0, None, f"{method}; undecided in balls", 0.0, certificate)
        return Judgement(
            0.0, 0.0, 0, f"{method}; undecided contexts within ε in balls", 0.0, certificate, Certification.TWO_SIDED
        )

    return measured, judge


# --------------------------------------------------------------------------- argmaxable tokens vs the hull


def argmax_head(case: ArgmaxHeadCase) -> np.ndarray:
    """A random head (rows Gaussian), optionally with interior rows planted at convex combinations."""
    if case.V < case.D + 1:
        raise InputError(f"argmax-head: V = {case.V} rows do not span D = {case.D} dimensions (V >= D + 1)")
    rng = np.random.default_rng(case.seed)
    W = rng.standard_normal((case.V, case.D))
    if case.interior:
        weights = rng.dirichlet(np.ones(case.V), size=case.interior)
        W = np.vstack([W, weights @ W])  # convex combinations: never the strict argmax
    if case.twins:
        W = np.vstack([W, W[: case.twins]])  # exact copies: ties, the strict argmax of neither
    return W


def combination_holds(W: np.ndarray, token: int, rows: np.ndarray, weights: tuple[Fraction, ...]) -> bool:
    """λ > 0 over rows other than the token, Σ λ = 1 and Σ λ_j w_j = w_i, in Fractions (every float is
    exact there): then w_i h = Σ λ_j w_j h <= max_j w_j h for every h (no bias)."""
    if token in rows.tolist() or any(w <= 0 for w in weights) or sum(weights) != 1:
        return False
    mixed = [sum(w * Fraction(float(W[j, d])) for w, j in zip(weights, rows, strict=True)) for d in range(W.shape[1])]
    return mixed == [Fraction(float(x)) for x in W[token]]


def certified_answers(W: np.ndarray) -> dict[str, np.ndarray]:
    """The answers of :func:`rankwall.theory.expressivity.argmaxable`, each certificate re-checked here: a
    witness h by :func:`certified_wins`, convex weights by :func:`combination_holds`. Returns boolean
    masks ``argmaxable`` and ``never`` (certified), ``bad`` (an answer whose certificate fails) and
    ``undecided`` (no answer)."""
    result = ex.argmaxable(W)
    claimed = np.flatnonzero(result["argmaxable"])
    argmaxable = np.zeros(len(W), dtype=bool)
    argmaxable[claimed] = certified_wins(ex.Head.of(W), result["witness"][claimed], claimed)
    never = np.zeros(len(W), dtype=bool)
    for token in np.flatnonzero(result["never"]):
        rows, weights = result["combination"].get(int(token), (np.zeros(0, dtype=np.int64), ()))
        never[token] = combination_holds(W, int(token), np.asarray(rows), tuple(weights))
    bad = (result["argmaxable"] & ~argmaxable) | (result["never"] & ~never) | (result["argmaxable"] & result["never"])
    return {
        "argmaxable": argmaxable & ~bad,
        "never": never & ~bad,
        "bad": bad,
        "undecided": ~result["argmaxable"] & ~result["never"],
    }


def counted_decision(
    count: int, undecided: int, method: str, certificate: dict[str, Any], certified_by: Certification
) -> tuple[Measurement, Callable[[], Judgement]]:
    """An identity "count = 0" over certified tokens: 0 holds when nothing is undecided; a positive
    count is violated; no count with undecided tokens is inconclusive. ``certified_by``: how the
    tokens were certified."""
    lhs = float(count) if count or not undecided else NAN
    measured = Measurement(lhs, 0.0, 0.0, method, certificate, True, certified_by)
    if count or not undecided:
        return measured, lambda: Judgement(lhs, 0.0, -1 if count else 0, method, 0.0, certificate, certified_by)
    return measured, lambda: Judgement(lhs, 0.0, None, f"{method}; undecided tokens", 0.0, certificate)


def shared_rows(W: np.ndarray) -> np.ndarray:
    """The rows of W equal (exactly) to another row."""
    _, inverse, counts = np.unique(W, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)] > 1


def hull_decision(case: ArgmaxHeadCase) -> tuple[Measurement, Callable[[], Judgement]]:
    """Tokens where the certified answer and qhull's vertex set disagree, plus answers whose certificate
    fails its re-check: 0 is the claim (without a bias, argmaxable ⇔ a vertex of conv{w_v} that no
    other token shares: a duplicated row ties with its twin wherever it is largest)."""
    from scipy.spatial import ConvexHull

    W = argmax_head(case)
    answers = certified_answers(W)
    vertices = np.zeros(len(W), dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    vertices &= ~shared_rows(W)
    disagree = (answers["argmaxable"] & ~vertices) | (answers["never"] & vertices)
    certificate = {
        "argmaxable": int(answers["argmaxable"].sum()),
        "never": int(answers["never"].sum()),
        "undecided": int(answers["undecided"].sum()),
        "hull_vertices": int(vertices.sum()),
        "disagree": np.flatnonzero(disagree)[:8].tolist(),
        "bad_certificates": np.flatnonzero(answers["bad"])[:8].tolist(),
    }
    count = int(disagree.sum() + answers["bad"].sum())
    # a witness h is certified by a rigorous rounding bound and exact integers; convex weights exactly
    method = "certified LP pipeline vs qhull"
    return counted_decision(count, int(answers["undecided"].sum()), method, certificate, Certification.TWO_SIDED)


def never_decision(case: ArgmaxHeadCase) -> tuple[Measurement, Callable[[], Judgement]]:
    """For the mutant "every token is argmaxable": the tokens certified never to win (re-checked
    convex weights), which must be 0."""
    answers = certified_answers(argmax_head(case))
    certificate = {"never": int(answers["never"].sum()), "first_never": np.flatnonzero(answers["never"])[:8].tolist()}
    undecided = int(answers["undecided"].sum() + answers["bad"].sum())
    method = "convex weights re-checked in Fractions"
    return counted_decision(int(answers["never"].sum()), undecided, method, certificate, Certification.EXACT)


# --------------------------------------------------------------------------- the claims


Decision = Callable[..., tuple[Measurement, Callable[[], Judgement]]]


def bound_claim(decision: Decision, **options: Any) -> dict[str, Any]:
    """``measure`` (in the backend asked for; None is NumPy float64) and ``judge_exactly`` (NumPy
    float64, then balls) of a claim whose decision takes the tightening factor and a backend."""
    return {
        "measure": lambda i, backend, F: decision(i, F, backend=backend, **options)[0],
        "judge_exactly": lambda i, F: decision(i, F, **options)[1](),
    }


def count_claim(decision: Decision, **options: Any) -> dict[str, Any]:
    """``measure`` and ``judge_exactly`` of an identity "failures = 0". ``F`` (the meta-tests' hook)
    moves the expected count to :func:`planted_side` (0, F) = F − 1: the counted failures, measured
    as before, are then compared with that count in both routes."""
    return {
        "measure": lambda i, backend, F: expecting(decision(i, **options)[0], F),
        "judge_exactly": lambda i, F: expecting(decision(i, **options)[1](), F),
    }


def expecting(decided: Measurement | Judgement, factor: Fraction) -> Measurement | Judgement:
    """A count's measurement or judgement against the expected count F − 1 in place of 0: the sign of
    ``expected − count`` where the count is known (an undecided judgement stays undecided)."""
    expected = planted_side(0, factor)
    if factor == 1:
        return decided
    if isinstance(decided, Measurement):
        return replace(decided, rhs=float(expected))
    known = decided.sign is not None and math.isfinite(decided.lhs)
    sign = ((expected > decided.lhs) - (expected < decided.lhs)) if known else None
    return replace(decided, rhs=float(expected), sign=sign)


# --------------------------------------------------------------------------- quantities (the public API)


def _cross_entropies_in(ctx: Context) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        counts, z = gibbs_instance(ctx.case)
        if not counts_exact_in(counts, tolerance.unit_roundoff(ctx.backend.dtype)):
            raise InputError(f"gibbs: a count beyond the integers {ctx.backend.dtype_name} holds exactly")
        return cross_entropies(gibbs_arrays(counts, z, ctx.case.exact_fit, ctx.backend), ctx.case.exact_fit)

    return ctx.once("cross-entropies", compute)


def _exact_cross_entropy(ctx: Context, model: bool) -> Any:
    """CE(Ñ) = −Σ (n_cv/n) log(n_cv/n_c), or CE(P) with log P_cv = z_cv − log Σ_w e^{z_cw}, in balls."""
    counts, z = gibbs_instance(ctx.case)
    rows, cols = np.nonzero(counts)
    totals = counts.sum(axis=1)
    n = float(counts.sum())
    if model and not ctx.case.exact_fit:
        lse = {c: sum((exact.ball(x).exp() for x in z[c]), flint.arb(0)).log() for c in set(rows.tolist())}
        logs = (exact.ball(z[c, v]) - lse[c] for c, v in zip(rows, cols, strict=True))
    else:
        logs = (
            flint.arb(int(counts[c, v])).log() - flint.arb(int(totals[c])).log()
            for c, v in zip(rows, cols, strict=True)
        )
    weights = (int(counts[c, v]) for c, v in zip(rows, cols, strict=True))
    return -sum((k * x for k, x in zip(weights, logs, strict=True)), flint.arb(0)) / int(n)


def _certified_counts(ctx: Context) -> dict[str, np.ndarray]:
    return ctx.once("answers", lambda: certified_answers(argmax_head(ctx.case)))


def _never_tokens(ctx: Context) -> RankInterval:
    """The tokens no h makes the strict argmax: at least those certified never (convex weights), at most
    those not certified argmaxable (a winning h)."""
    answers = _certified_counts(ctx)
    V = len(answers["never"])
    lo, hi = int(answers["never"].sum()), V - int(answers["argmaxable"].sum())
    return RankInterval(lo, hi, "convex weights re-checked in Fractions", "winning h re-checked exactly", exact=True)


cross_entropy_model = quantity(
    "CE(P)",
    lambda ctx: Measured(_cross_entropies_in(ctx)["ce_P"], _cross_entropies_in(ctx)["ce_P_error"]),
    lambda ctx: _exact_cross_entropy(ctx, model=True),
    doc="the cross-entropy −Σ_c f_c Σ_v Ñ_cv log P_cv of the model P = softmax(z) on a Gibbs case",
)
cross_entropy_empirical = quantity(
    "CE(Ñ)",
    lambda ctx: Measured(_cross_entropies_in(ctx)["ce_N"], _cross_entropies_in(ctx)["ce_N_error"]),
    lambda ctx: _exact_cross_entropy(ctx, model=False),
    doc="the cross-entropy of the empirical distribution Ñ itself (its entropy, frequency-weighted)",
)
unargmaxable_tokens = quantity(
    "#{never the argmax}",
    lambda ctx: _never_tokens(ctx),
    lambda ctx: _never_tokens(ctx),
    integer=True,
    follows_backend=False,
    doc="the tokens of an argmax head that no hidden state makes the strict argmax, certified both ways",
)
head_size = quantity(
    "V",
    lambda ctx: RankInterval(len(argmax_head(ctx.case)), len(argmax_head(ctx.case)), "the head", "the head", True),
    lambda ctx: RankInterval(len(argmax_head(ctx.case)), len(argmax_head(ctx.case)), "the head", "the head", True),
    integer=True,
    doc="the number of rows of an argmax head (planted interior rows included)",
)


def _gibbs_witnesses(V: int) -> list[GibbsCase]:
    """Zipfian languages at min(V, 512), and the edges at any V: the smallest sizes (V = 2, 3; one or
    three contexts), every row one-hot (CE(Ñ) = 0, seed 2), P = Ñ, and logits of scale 400, whose
    model probabilities fall below the normal range."""
    return [
        GibbsCase(V=min(V, 512), contexts=64, seed=s, scale=sc, exact_fit=e)
        for s in (0, 1)
        for sc in (0.5, 5.0)
        for e in (False, True)
    ] + [
        GibbsCase(V=2, contexts=1, seed=2, exact_fit=True),
        GibbsCase(V=2, contexts=3, seed=2, scale=5.0),
        GibbsCase(V=3, contexts=3, seed=1, scale=0.5),
        GibbsCase(V=3, contexts=3, seed=1, exact_fit=True),
        GibbsCase(V=min(V, 512), contexts=64, seed=0, scale=400.0),
    ]


def _random_gibbs(V: int, n: int, seed: int) -> list[GibbsCase]:
    """``n`` seeded draws at min(V, 4096): contexts, seeds, logit scales over three decades, P = Ñ a
    quarter of the time."""
    rng = np.random.default_rng(seed)
    return [
        GibbsCase(
            V=min(V, 4096),
            contexts=int(rng.integers(1, 65)),
            seed=int(rng.integers(2**31)),
            scale=float(10 ** rng.uniform(-1, 2)),
            exact_fit=bool(rng.random() < 0.25),
        )
        for _ in range(n)
    ]


def _argmax_witnesses(V: int) -> list[ArgmaxHeadCase]:
    """Gaussian heads at min(V, 300) rows, with and without interior rows, and the edges: a simplex
    (V = D + 1: every row a vertex) and heads with duplicated rows (ties)."""
    return (
        [
            ArgmaxHeadCase(V=max(min(V, 300), D + 3), D=D, seed=s, interior=k)
            for D in (2, 3, 5)
            for s in (0, 1)
            for k in (0, 3)
        ]
        + [ArgmaxHeadCase(V=D + 1, D=D, seed=0) for D in (2, 3, 5)]
        + [ArgmaxHeadCase(V=max(min(V, 300), D + 3), D=D, seed=2, interior=1, twins=2) for D in (2, 3)]
    )


def _top1_witnesses(V: int) -> list[Top1Case]:
    """Circle witnesses at min(V, 16), min(V, 1024) and V, and the edges: the smallest V = 2, 3 with
    one context, and probabilities at both ends of (1/V + ε, 1 − ε) at V (ε = 10⁻⁹)."""
    return [
        Top1Case(V=v, D=D, contexts=16, seed=s, eps=1e-6)
        for v in sorted({min(V, 16), min(V, 1024), V})
        for D in (2, 8)
        for s in (0, 1)
        if v >= 2
    ] + [
        Top1Case(V=2, D=2, contexts=1, seed=0, eps=1e-6),
        Top1Case(V=3, D=2, contexts=4, seed=0, eps=1e-6, at_edges=True),
        Top1Case(V=V, D=2, contexts=4, seed=1, eps=1e-9, at_edges=True),
    ]


def _tangent_witnesses(V: int) -> list[TangentCase]:
    return [TangentCase(V=v, seed=s) for v in sorted({2, 3, min(V, 4096)}) for s in (0, 1)]


def all_rows_one_hot(case: GibbsCase) -> bool:
    """Every observed row of Ñ is one-hot (CE(Ñ) = 0)."""
    counts, _ = gibbs_instance(case)
    return bool(np.all(counts.max(axis=1) == counts.sum(axis=1)))


def model_underflows(case: GibbsCase) -> bool:
    """Some model probability softmax(z) falls below float64's normal range (a logit gap past 708)."""
    _, z = gibbs_instance(case)
    return not case.exact_fit and float(np.max(z.max(axis=1) - z.min(axis=1))) > 708


#: The boundary classes of each kind of case (docs/expressivity.md, "Where the search looks").
GIBBS_BOUNDARY = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "one to three contexts": lambda c: c.contexts <= 3,
    "P = Ñ (equality)": lambda c: c.exact_fit,
    "every row one-hot (CE(Ñ) = 0)": all_rows_one_hot,
    "model probabilities below the normal range": model_underflows,
}
TOP1_BOUNDARY = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "one context": lambda c: c.contexts == 1,
    "D = 2": lambda c: c.D == 2,
    "probabilities at the ends of (1/V, 1)": lambda c: c.at_edges,
    "V >= 1024": lambda c: c.V >= 1024,
}
TANGENT_BOUNDARY = {
    "V = 2": lambda c: c.V == 2,
    "V = 3": lambda c: c.V == 3,
    "V >= 1000 (nearly equal weights)": lambda c: c.V >= 1000,
}
ARGMAX_BOUNDARY = {
    "a simplex (V = D + 1)": lambda c: c.V == c.D + 1,
    "at most D + 3 Gaussian rows": lambda c: c.V <= c.D + 3,
    "planted interior rows": lambda c: c.interior > 0,
    "duplicated rows (ties)": lambda c: c.twins > 0,
    "D = 2": lambda c: c.D == 2,
}

#: Where the claims of this family range (the public API): Gibbs cases (counts and model logits) and
#: Gaussian heads without bias for the argmax claims; and the circle witnesses and D = 1 tangent heads.
gibbs_cases = Cases(gibbs_instances, _gibbs_witnesses, _random_gibbs, GIBBS_BOUNDARY)
argmax_heads = Cases(lambda: argmax_instances(), _argmax_witnesses, boundary=ARGMAX_BOUNDARY)
top1_cases = Cases(expressivity_instances, _top1_witnesses, boundary=TOP1_BOUNDARY)
tangent_cases = Cases(lambda: expressivity_instances(tangent=True), _tangent_witnesses, boundary=TANGENT_BOUNDARY)


FAMILY = Family("expressivity", array_api=False, random_instances=lambda V, n, seed: [])


# --------------------------------------------------------------------------- references (issue 18)
#
# Both sides of every claim the slow, obviously right way, sharing nothing with the measures but the
# instance: counts as integers, floats read exactly as Fractions, logarithms and exponentials in 200-bit
# mpmath (the caller sets the precision), strict argmaxes compared in Fractions, and the vertices of a
# head's convex hull by exhaustive enumeration of its facets (D <= 3) in exact orientation predicates.


def _mp(q: Fraction) -> Any:
    return mpmath.mpf(q.numerator) / q.denominator


def gibbs_reference(case: GibbsCase, backend: Backend | None) -> Reference:
    """CE(Ñ) = −Σ (n_cv/n) log(n_cv/n_c) and CE(P) = −Σ (n_cv/n)(z_cv − log Σ_w e^{z_cw}) (or CE(Ñ) at
    P = Ñ), on the logits as the backend holds them (rounded to its dtype), in mpmath."""
    counts, z = gibbs_instance(case)
    z = float64_copy((numpy_float64() if backend is None else backend).asarray(z))
    n = int(counts.sum())
    rows, cols = np.nonzero(counts)
    totals = counts.sum(axis=1)
    observed = [(int(counts[c, v]), int(totals[c]), c, v) for c, v in zip(rows, cols, strict=True)]
    ce_N = -mpmath.fsum(mpmath.mpf(k) / n * mpmath.log(mpmath.mpf(k) / t) for k, t, _, _ in observed)
    if case.exact_fit:
        return Reference(ce_N, ce_N, "CE(Ñ) from the counts in mpmath; P = Ñ")
    log_sums = {c: mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(x))) for x in z[c])) for c in set(rows.tolist())}
    ce_P = -mpmath.fsum(mpmath.mpf(k) / n * (mpmath.mpf(float(z[c, v])) - log_sums[c]) for k, _, c, v in observed)
    return Reference(ce_N, ce_P, "both cross-entropies from the counts and the built logits in mpmath")


def _exact_logits(W: np.ndarray, h: np.ndarray, bias: np.ndarray | None = None) -> list[Fraction]:
    """W h + b with every float read exactly (Fractions)."""
    hq = [Fraction(float(x)) for x in h]
    b = [Fraction(0)] * len(W) if bias is None else [Fraction(float(x)) for x in bias]
    return [sum((Fraction(float(w)) * x for w, x in zip(row, hq, strict=True)), b[v]) for v, row in enumerate(W)]


def _strict_argmax(z: list[Fraction], token: int) -> bool:
    return all(z[token] > x for v, x in enumerate(z) if v != token)


def top1_reference(case: Top1Case, backend: Backend | None) -> Reference:
    """The contexts where the circle witness fails, counted from its exact logits (Fractions): t_c not
    the strict argmax, or |1/Σ_v e^{z_v − z_t} − p_c| > ε with the exponentials in mpmath."""
    H, W, targets, probs = witness(case)
    failures = 0
    for h, t, p in zip(H, targets, probs, strict=True):
        z = _exact_logits(W, h)
        if not _strict_argmax(z, int(t)):
            failures += 1
            continue
        top1 = 1 / mpmath.fsum(mpmath.exp(_mp(x - z[int(t)])) for x in z)
        failures += int(abs(top1 - mpmath.mpf(float(p))) > mpmath.mpf(case.eps))
    return Reference(failures, 0, "the witness's logits in Fractions, its top-1 probabilities in mpmath")


def tangent_reference(case: TangentCase, backend: Backend | None) -> Reference:
    """The tokens t of the tangent head as constructed (slopes and biases read exactly) that are not the
    strict argmax of w_v w_t + b_v, in Fractions."""
    W, b = ex.tangent_head(case.V, case.seed)
    failures = sum(not _strict_argmax(_exact_logits(W, W[t], b), t) for t in range(case.V))
    return Reference(failures, 0, "every logit at h = w_t in Fractions")


def _hyperplanes(P: np.ndarray, subsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each subset s of D points (D = 2 or 3) the normal n of its hyperplane, with
    det[p_{s_1} − p_{s_0}, …, p − p_{s_0}] = n·(p − p_{s_0}) (n = (−r_y, r_x), or the cross product
    r_1 × r_2, of the spans r_k = p_{s_k} − p_{s_0}), and the sign of that determinant for every point p,
    exactly: in float64 with Higham's bound γ_{D+D!}·Σ|terms| on the error of the explicit formula (each
    of its D! terms a product of D rounded differences; γ_4 covers D = 2 and γ_9 the 8 roundings at
    D = 3), recomputed in Fractions wherever the float value lies within it. The subset's own points
    have sign 0."""
    D = P.shape[1]
    base = P[subsets[:, 0]]
    spans = [P[subsets[:, k]] - base for k in range(1, D)]
    if D == 2:
        (r,) = spans
        normal = np.c_[-r[:, 1], r[:, 0]]
        size_of = np.abs(normal)  # each term |r_a d_b|
    else:
        r, q = spans
        normal = np.cross(r, q)
        size_of = np.abs(r[:, [1, 2, 0]] * q[:, [2, 0, 1]]) + np.abs(r[:, [2, 0, 1]] * q[:, [1, 2, 0]])
    points = P[None, :, :] - base[:, None, :]  # (subsets, V, D)
    value = np.einsum("sd,svd->sv", normal, points)
    size = np.einsum("sd,svd->sv", size_of, np.abs(points))
    signs = np.sign(value).astype(int)
    own = np.zeros(signs.shape, dtype=bool)
    own[np.arange(len(subsets))[:, None], subsets] = True
    signs[own] = 0
    unsure = np.argwhere((np.abs(value) <= tolerance.gamma(D + math.factorial(D), U) * size) & ~own)
    for s, j in unsure:
        origin, *ends = ([Fraction(float(x)) for x in P[k]] for k in [*subsets[s], j])
        signs[s, j] = _fraction_sign(_fraction_det([[a - o for a, o in zip(e, origin, strict=True)] for e in ends]))
    return normal, signs


def _fraction_det(M: list[list[Fraction]]) -> Fraction:
    """The determinant by Laplace expansion (D <= 3 here)."""
    if len(M) == 1:
        return M[0][0]
    return sum(
        ((-1) ** k * M[0][k] * _fraction_det([row[:k] + row[k + 1 :] for row in M[1:]]) for k in range(len(M))),
        Fraction(0),
    )


def _fraction_sign(x: Fraction) -> int:
    return (x > 0) - (x < 0)


def exhaustive_facets(P: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The facets of conv(P), distinct rows in general position, D = 2 or 3: every D-subset whose
    hyperplane has all other points strictly on one side (exact signs, :func:`_hyperplanes`), with its
    outward unit normal (in float64: a direction, checked exactly where it is used). ``None`` when some
    D + 1 points are exactly coplanar (no general position)."""
    V, D = P.shape
    subsets = np.array(list(itertools.combinations(range(V), D)))
    normal, signs = _hyperplanes(P, subsets)
    in_subset = np.zeros(signs.shape, dtype=bool)
    in_subset[np.arange(len(subsets))[:, None], subsets] = True
    if np.any((signs == 0) & ~in_subset):
        return None
    below, above = np.all(signs <= 0, axis=1), np.all(signs >= 0, axis=1)
    facets = below | above
    outward = normal[facets] * np.where(below[facets], 1.0, -1.0)[:, None]
    return subsets[facets], outward / np.linalg.norm(outward, axis=1, keepdims=True)


def certified_vertex(W: np.ndarray, token: int) -> bool:
    """Whether row ``token`` is a strict vertex of conv(W), certified exactly either way from a HiGHS
    guess: a winning h (every logit in Fractions), or convex weights over other rows (the support's
    square system solved in exact rationals, the weights checked positive). Raises where neither
    certifies (a degenerate head the reference cannot decide)."""
    from scipy.optimize import linprog

    V, D = W.shape
    rivals = np.delete(np.arange(V), token)
    difference = W[rivals] - W[token]
    # max t subject to (w_j − w_i)·h + t <= 0, |h_k| <= 1
    found = linprog(
        np.r_[np.zeros(D), -1.0],
        A_ub=np.c_[difference, np.ones(len(rivals))],
        b_ub=np.zeros(len(rivals)),
        bounds=[(-1, 1)] * D + [(None, 1)],
        method="highs",
    )
    if found.status == 0 and -found.fun > 0 and _strict_argmax(_exact_logits(W, found.x[:D]), token):
        return True
    combination = linprog(
        np.zeros(len(rivals)), A_eq=np.r_[W[rivals].T, np.ones((1, len(rivals)))], b_eq=np.r_[W[token], 1.0]
    )
    if combination.status == 0:
        support = rivals[np.argsort(-combination.x)[: D + 1]]
        system = flint.fmpq_mat(
            D + 1, D + 1, [exact.rational(float(x)) for x in np.r_[W[support].T, np.ones((1, D + 1))].ravel()]
        )
        target = flint.fmpq_mat(D + 1, 1, [exact.rational(float(x)) for x in np.r_[W[token], 1.0]])
        if system.rank() == D + 1 and all(x >= 0 for x in system.solve(target).entries()):
            return False
    raise RuntimeError(f"reference: row {token} of a {V} x {D} head is certified neither a vertex nor inside")


def hull_reference(case: ArgmaxHeadCase, backend: Backend | None) -> Reference:
    """Tokens where "argmaxable" and "a vertex that no other token shares" differ, both decided exactly.
    At D <= 3, by exhaustive facet enumeration on the distinct rows (:func:`exhaustive_facets`): the
    vertices are the facets' points, and a vertex is argmaxable when the sum of its facets' outward
    normals makes it the strict argmax in Fractions. Above (or without general position), HiGHS guesses
    certified exactly either way (:func:`certified_vertex`). A row shared by two tokens is never the
    strict argmax, and a row inside the hull of the others never is."""
    W = argmax_head(case)
    distinct, first, inverse = np.unique(W, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    shared = np.bincount(inverse)[inverse] > 1
    facets = exhaustive_facets(distinct) if case.D <= 3 else None
    if facets is None:
        how = "HiGHS guesses certified exactly (a winning h in Fractions, convex weights in rationals)"
        vertices = np.array([certified_vertex(distinct, k) for k in range(len(distinct))])
        argmaxable = vertices[inverse] & ~shared
    else:
        how = "exhaustive facet enumeration in exact orientations; outward normals checked in Fractions"
        subsets, normals = facets
        vertices = np.zeros(len(distinct), dtype=bool)
        vertices[np.unique(subsets)] = True
        argmaxable = np.zeros(len(W), dtype=bool)
        for k in np.flatnonzero(vertices):
            token = int(first[k])
            h = normals[np.any(subsets == k, axis=1)].sum(axis=0)
            argmaxable[token] = not shared[token] and _strict_argmax(_exact_logits(W, h), token)
    vertex = vertices[inverse] & ~shared
    return Reference(int(np.sum(argmaxable != vertex)), 0, how)


gibbs = FAMILY.claim(
    "gibbs",
    source=f"{SEED_000}, Prop. A.2 (App. A.2)",
    title="The cross-entropy is minimised exactly at the empirical distribution",
    statement="CE(Ñ) ≤ CE(P), the excess being CE(P) − CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c) ≥ 0, with equality at P = Ñ",
    domain="Zipfian count matrices, P a softmax of Gaussian logits (or Ñ itself)",
    relation=Relation.AT_MOST,
    direction="lower",
    array_api=True,
    **bound_claim(gibbs_decision),
    cases=gibbs_cases,
    reference=gibbs_reference,
)
gibbs.with_mutant(
    "uniform-minimises",
    "CE(U) ≤ CE(P): the uniform distribution minimises the cross-entropy  (false: CE(Ñ) < log V = CE(U))",
    **bound_claim(gibbs_decision, uniform=True),
)
gibbs.with_mutant(
    "unweighted-kl",
    "CE(P) − CE(Ñ) = Σ_c KL(Ñ_c ‖ P_c), the contexts unweighted  (false: the frequencies f_c weigh each KL)",
    **bound_claim(gibbs_decision, unweighted=True),
)
top1_witness = FAMILY.claim(
    "top1-witness",
    source=f"{SEED_000}, Prop. A.4 (App. A.2; proof in B.1)",
    title="At D ≥ 2 any argmax and any top-1 probability are reachable without a bias",
    statement="for targets t_c and probabilities p_c ∈ (1/V, 1), the circle witness (H, W) fails in 0 contexts: "
    "t_c is the strict argmax and |top-1 − p_c| ≤ ε in every one",
    domain="float64, V up to 131,072 (float32 loses the argmax near V ≈ 49,152: docs/expressivity.md)",
    relation=Relation.EQUAL,
    **count_claim(top1_decision),
    cases=top1_cases,
    reference=top1_reference,
)
top1_witness.with_mutant(
    "exact-probability",
    "the circle witness reaches every top-1 probability p_c exactly (ε = 0)  (false: the exact top-1 probability "
    "is transcendental, the bisection gets within ε)",
    **count_claim(top1_decision, eps=0.0),
    witnesses=lambda V: [Top1Case(V=v, D=2, contexts=4, seed=0, eps=1e-6) for v in (3, min(V, 64))],
)
top1_witness.with_mutant(
    "d1-without-bias",
    "every token is the strict argmax of some h at D = 1 without a bias  (false for V ≥ 3: interior weights never win)",
    **count_claim(interior_decision),
    cases=replace(tangent_cases, witnesses=lambda V: [TangentCase(V=v, seed=0) for v in sorted({3, min(V, 64)})]),
    reference=None,  # its quantity (interior weights) is not the parent's
)
d1_bias = FAMILY.claim(
    "d1-bias-argmax",
    source=f"{SEED_000}, App. B.1 (the D ≥ 2 requirement); rankwall (the bias case)",
    title="With a bias, D = 1 makes every token the argmax",
    statement="for the tangent head z_v(h) = w_v h − w_v²/2, 0 tokens t fail to be the strict argmax at h = w_t",
    domain="distinct weights w_v, V ≥ 2, the head as constructed in float64",
    relation=Relation.EQUAL,
    **count_claim(tangent_decision),
    cases=tangent_cases,
    reference=tangent_reference,
)
d1_bias.with_mutant(
    "without-bias",
    "the tangent slopes alone, z_v(h) = w_v h, make every token t the strict argmax at h = w_t  (false: only "
    "the extreme weights win)",
    **count_claim(tangent_decision, bias=False),
    witnesses=lambda V: [TangentCase(V=v, seed=0) for v in sorted({3, min(V, 64)})],
)
argmax_vs_hull = FAMILY.claim(
    "argmaxable-vs-hull",
    default_V=32,  # an exact certificate per token (an LP each); --V runs any size
    source="seed 001 ('Stolen Probability', Demeter et al. 2020; Grivas et al. 2022)",
    title="Without a bias, a token is argmaxable exactly when it is a vertex of the convex hull",
    statement="the LP pipeline's certified answers disagree with the vertices of conv{w_v} (qhull) on 0 tokens, "
    "a row that two tokens share being a vertex of neither (they tie wherever it is largest)",
    domain="Gaussian heads without bias, D = 2..6, V ≥ D + 1, with or without planted interior and duplicated rows",
    relation=Relation.EQUAL,
    **count_claim(hull_decision),
    cases=argmax_heads,
    reference=hull_reference,
)
argmax_vs_hull.with_mutant(
    "every-token-argmaxable",
    "every token of every head is argmaxable  (false: a row inside the convex hull never wins)",
    **count_claim(never_decision),
    witnesses=lambda V: [ArgmaxHeadCase(V=50, D=3, seed=0, interior=2)],
)

#: The theorems and lemmas of ``docs/expressivity.md`` (collected by ``checks/fidelity.py``).
_TESTS = "tests/test_expressivity.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-gibbs", "EX.1", "expressivity", "seed 000, Prop. A.2 (statement lost)", Kind.RECONSTRUCTED,
              ("expressivity.gibbs",), (_TESTS + "TestGibbs", _TESTS + "TestGibbsCanFail")),
    Statement("thm-top1", "EX.2", "expressivity", "seed 000, §2.1, Prop. A.4 (statement lost), B.1",
              Kind.RECONSTRUCTED, ("expressivity.top1-witness",),
              (_TESTS + "TestCircleWitness", _TESTS + "TestTop1WitnessCanFail"),
              "exact top-1 probability on (1/V, 1); epsilon only at 1"),
    Statement("thm-d1", "EX.3", "expressivity", "seed 000, §2.1 (\"when D >= 2\")", Kind.NEW,
              ("expressivity.d1-bias-argmax",),
              (_TESTS + "TestDimensionOne", _TESTS + "TestD1BiasArgmaxCanFail", _TESTS + "TestDimensionOneTopOneRange"),
              "V = 2 needs D = 1; for V >= 3, D = 1 fails with or without a bias: at most two tokens reach both 3/4 "
              "and 1/V + 1/(4V^2)"),
    Statement("thm-argmaxable", "EX.4", "expressivity", "seed 001, \"What happened to the idea\"", Kind.NEW,
              ("expressivity.argmaxable-vs-hull",),
              (_TESTS + "TestArgmaxableTokens", _TESTS + "TestCertifiedArgmax",
               _TESTS + "TestArgmaxableVsHullCanFail")),
)
