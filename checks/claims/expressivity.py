r"""Claims ``expressivity.*``: Gibbs' inequality (Prop. A.2), the top-1 witness at D >= 2 (Prop. A.4), one
hidden dimension with and without a bias (EX.3), and argmaxable tokens against the convex hull (EX.4),
declared over this family's quantities.

The exact object. Every quantity of a context measures, evaluates exactly and references the same object,
built once per context:

- a Gibbs case (``gibbs``): the integer counts :math:`n_{cv}` and the logits z as the context's backend holds
  them (rounded to its dtype), read exactly; :math:`\tilde N_{cv} = n_{cv}/n_c`, :math:`f_c = n_c/n` and the
  model :math:`P = \mathrm{softmax}(z)` (or P = Ñ itself, ``exact_fit``) are defined from them exactly. The
  cross-entropies and KL sums are linear, with rational coefficients, in the logarithms log k of the counts
  and row totals and in the log-sum-exps :math:`L_c = \log\sum_w e^{z_{cw}}`, which enter only as
  :math:`A = \sum_c f_c L_c` and :math:`B = \sum_c L_c`; their exact values are balls with that form
  (:class:`~rankwall.checks.engine.reals.Form`, one atom per log k, one for A and one for B), so
  :math:`\mathrm{CE}(P) - \mathrm{CE}(\tilde N) = \sum_c f_c \mathrm{KL}(\tilde N_c \| P_c)`, and
  CE(P) = CE(Ñ) at P = Ñ, are identities in the atoms, shown exactly. A count the dtype does not hold
  exactly, or a side that is not finite, leaves the float route without a bound (an infinite error).
- a circle witness (``top1``): H and W as :func:`~rankwall.theory.expressivity.construct_top1_witness` builds
  them in NumPy float64 (whatever the backend), the targets :math:`t_c`, the probabilities :math:`p_c` and ε,
  read exactly; :math:`q_c = \mathrm{softmax}(W h_c)_{t_c}` exactly.
- a D = 1 tangent head (``tangent``): the slopes w and the biases b as
  :func:`~rankwall.theory.expressivity.tangent_head` builds them (float64), read exactly. The case names an
  ideal object that floats only approximate: the exact tangent head :math:`z_v(h) = w_v h - w_v^2/2`, its
  biases the rationals :math:`-w_v^2/2` of the built slopes. ``tangent_losses`` is of that head (its float
  route rounds :math:`-w_v^2/2` and carries the rounding in its bound); ``built_head_losses`` is of the
  head as built (the float biases b); ``slope_losses`` and ``never_argmax_without_bias`` are of the slopes
  alone, without a bias.
- an argmax head (``argmax-head``): the V x D head as built in float64 (planted rows included), read exactly,
  and qhull's vertex set of it (floating point: the claim compares the certified answers with it, and the
  reference decides the vertices exactly).
- a D = 1 head with a bias (``line-head``): w and b as :func:`~rankwall.theory.expressivity.line_head` builds
  them, read exactly, and the case's token t, of a slope strictly between two others
  (:math:`w_0 < w_t < w_{V-1}`; the median by default). Token t is the strict argmax exactly on the open
  interval (L, U) whose ends are the rationals where it ties a neighbour; its top-1 probability there is
  :math:`q_t(h) = 1/g(h)`, :math:`g(h) = \sum_x e^{(w_x - w_t)h + (b_x - b_t)}`, which is convex. So
  :math:`\inf q_t = \min(q_t(L), q_t(U))`, and :math:`\sup q_t = 1/\min g` where :math:`g'(L) < 0 < g'(U)`,
  else the value at the nearer end (0 and 1 when the interval is empty). The minimum of g is enclosed by
  two tangents: :math:`g'(h_1) < 0 < g'(h_2)` puts the minimiser in :math:`(h_1, h_2)`, where
  :math:`g \ge \min(g(h_1), g(h_2)) - (h_2 - h_1)\min(|g'(h_1)|, g'(h_2))`.

Counts (of failing contexts or tokens) are certified intervals (``rankwall.Interval``): a float screen (a
rounding bound, exact integers for the close calls) pins what it can, and the exact route decides the rest
in exact integers and in balls at rising precision. A loss the screen reports is confirmed in exact integers
before it is counted; where the confirmation clears it, the two routes disagree, and the interval's ends
contradict (nothing is decided).
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "ArgmaxHeadCase",
    "GibbsCase",
    "LineHeadCase",
    "TangentCase",
    "Top1Case",
    "argmax_heads",
    "built_head_losses",
    "cross_entropy_empirical",
    "cross_entropy_model",
    "epsilon",
    "gibbs_cases",
    "head_size",
    "hull_disagreements",
    "line_heads",
    "middle_top1_inf",
    "middle_top1_sup",
    "never_argmax_without_bias",
    "slope_losses",
    "tangent_cases",
    "tangent_losses",
    "top1_cases",
    "top1_error",
    "unargmaxable_tokens",
    "unweighted_kl",
    "vocabulary",
    "weighted_kl",
    "witness_failures",
    "wrong_argmaxes",
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

from rankwall.checks import exact
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import Backend, float64_copy
from rankwall.checks.engine.quantities import Context, Interval, Measured, declare, log, maximum, quantity
from rankwall.checks.engine.reals import Form, Real
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases
from rankwall.checks.engine.verdict import Case, OutsideDomain
from rankwall.theory import error_rank as er
from rankwall.theory import expressivity as ex
from rankwall.theory.validation import InputError

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "expressivity"

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


@dataclass(frozen=True)
class LineHeadCase(Case):
    """A D = 1 head with a bias, :func:`rankwall.theory.expressivity.line_head` (V slopes, its ``shape``:
    tangent, concurrent or Gaussian lines, ``seed``, ``scale`` of the slopes, ``jitter`` on the biases),
    and a token t of a slope strictly between two others: ``token`` in the slopes' sorted order (the
    median when ``None``), 0 < t < V - 1 (V >= 3)."""

    KIND: ClassVar[str] = "line-head"
    V: int
    shape: str = "tangent"
    seed: int = 0
    scale: float = 1.0
    jitter: float = 0.0
    token: int | None = None


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


#: The scales of the slopes a line head is drawn at: 10 and above spread the tangent lines far enough
#: apart that a token between two others reaches top-1 probabilities near 1.
LINE_SCALES = (0.1, 1.0, 10.0, 100.0)


@st.composite
def line_head_instances(draw: Any) -> LineHeadCase:
    """D = 1 heads with a bias: the smallest V = 3 drawn apart, tangent lines spread wide (the middle
    token reaches 3/4), concurrent lines (all tied at one h) with and without a small jitter (the middle
    token nearly tied, near 1/V), Gaussian biases, and the tokens next to an extreme slope."""
    V = draw(st.one_of(st.just(3), st.integers(3, 64), st.sampled_from([128, 256])))
    return LineHeadCase(
        V=V,
        shape=draw(st.sampled_from(ex.LINE_SHAPES)),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from(LINE_SCALES)),
        jitter=draw(st.one_of(st.just(0.0), st.sampled_from([1e-9, 1e-3]))),
        token=draw(st.one_of(st.none(), st.sampled_from([1, V - 2]), st.integers(1, V - 2))),
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = 2.0**-53
#: Accuracy assumed of NumPy's ``exp`` and ``log`` (glibc and NumPy's SIMD loops stay within 4 ulps),
#: as roundings in the gamma_n of every bound below: one ulp is 2u.
LIBM_ROUNDINGS = 8
#: The smallest positive float64: a result that underflows is off by at most this.
TINY = 2.0**-1074
#: Failures confirmed one by one in exact integers before a count includes them.
CONFIRMED_FAILURES = 16
NAN = math.nan
#: A float route that cannot bound its distance from the exact value (the exact route decides).
UNBOUNDED = Measured(math.nan, math.inf)


def _quantity(
    name: str,
    measure: Callable[[Context], Any],
    exact_fn: Callable[[Context], Any],
    *,
    reads: tuple[type[Case], ...],
    reference: Callable[[Context], Any],
    **options: Any,
) -> Any:
    """A quantity of this family that reads the case types ``reads``: a case of another kind is refused
    by name (an :class:`InputError`) in each of its three routes."""

    def guarded(route: Callable[[Context], Any]) -> Callable[[Context], Any]:
        def on(ctx: Context) -> Any:
            if not isinstance(ctx.case, reads):
                kinds = " or ".join(kind.KIND for kind in reads)
                raise InputError(f"{name}: reads {kinds} cases, not {getattr(ctx.case, 'KIND', ctx.case)!r}")
            return route(ctx)

        return on

    return quantity(name, guarded(measure), guarded(exact_fn), reference=guarded(reference), family=FAMILY, **options)


def _count(lo: int, hi: int, lower: str, upper: str, exact_ends: bool, **certificate: Any) -> Interval:
    """A certified count lo <= count <= hi, with what certifies each end."""
    return Interval(int(lo), int(hi), lower, upper, exact=exact_ends, certificate=certificate)


def _disagreeing(what: str, **certificate: Any) -> Interval:
    """The screen reported a loss that exact integers clear: the two routes disagree, and the interval's
    ends contradict, so nothing is decided."""
    why = f"{what}: the screen and the exact check disagree"
    return Interval(1, 0, why, why, certificate=certificate)


def exp_sum_enclosure(d: np.ndarray, a: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float]:
    r"""[low, high] around :math:`\sum_x c_x e^{d^*_x}` for arguments d computed within a of the exact
    :math:`d^*` and weights :math:`c \ge 0`, each within one rounding of its exact value (1 when ``None``).
    Since exp is increasing, the sum lies between :math:`\sum c\,e^{d - a}` and :math:`\sum c\,e^{d + a}`,
    each computed with :math:`\gamma_{n+\mathrm{LIBM}+4}` relative error (the exponentials, the weights, the
    products, the sum of n terms), plus :math:`2u\sum c|x|e^x` for the rounding of the argument x = d ± a
    itself and :math:`n\lambda\max c` for terms below the normal range."""
    n = len(d)
    c = np.ones(n) if weights is None else weights
    g = tolerance.gamma(n + LIBM_ROUNDINGS + 4, U)
    largest = float(np.max(c)) if n else 0.0

    def end(x: np.ndarray, direction: int) -> float:
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # an infinite upper sum is still a bound
            terms = c * np.exp(x)
            slack = 2 * U * float(np.sum(np.abs(x) * terms)) + n * TINY * largest
        total = float(terms.sum())
        return total * (1 + g) + slack if direction > 0 else total * (1 - g) - slack

    return max(end(d - a, -1), 0.0), end(d + a, 1)


# --------------------------------------------------------------------------- Gibbs (Prop. A.2)


def gibbs_instance(case: GibbsCase) -> tuple[np.ndarray, np.ndarray]:
    """The integer counts (C x V) of a Zipfian language and the model's logits z (C x V), in NumPy
    float64: P is the softmax of z, or Ñ itself when ``exact_fit``."""
    counts = er.construct_zipf_language(case.V, case.contexts, case.seed).toarray()
    z = np.random.default_rng(case.seed + 1).standard_normal(counts.shape) * case.scale
    return counts, z


def gibbs_exact_instance(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The context's exact instance: the counts, and the logits as its backend holds them (rounded to its
    dtype), read exactly into float64."""

    def compute() -> tuple[np.ndarray, np.ndarray]:
        counts, z = gibbs_instance(ctx.case)
        return counts, float64_copy(ctx.backend.asarray(z))

    return ctx.once("gibbs instance", compute)


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


def weighted_sum_bound(weights: Any, values: Any, value_error: np.ndarray, terms: int, u: float, tiny: float) -> float:
    """A bound on the distance of the computed ``Σ w x`` to ``Σ w* x*``, where each weight is within γ_3 of
    the exact w* (two roundings from the counts and a product) and each value within ``value_error`` of
    the exact x*: γ_{n+4} Σ|w x| for the products and the sum of the n = ``terms`` observed entries (any
    order), (1 + γ_3) Σ w ``value_error``, and the underflow term n λ (λ the dtype's smallest normal: a
    product that falls below the normal range is off by at most λ in absolute terms, not relatively), the
    whole times (1 + γ_{n+4}) for the rounding of the bound. Every γ at u, the backend dtype's unit
    roundoff; the bound is computed in float64 from exact float64 copies."""
    g = tolerance.gamma(terms + 4, u)
    w, x = float64_copy(weights), float64_copy(values)
    bound = g * float(np.sum(np.abs(w * x))) + (1 + tolerance.gamma(3, u)) * float(np.sum(w * value_error))
    return (bound + terms * tiny) * (1 + g)


def weighted_sum(
    weights: Any, values: Any, value_error: np.ndarray, terms: int, u: float, tiny: float
) -> tuple[float, float]:
    """``Σ w x`` in the arrays' namespace (entries with w = 0 add exactly 0), and
    :func:`weighted_sum_bound` on its distance to the exact sum."""
    xp = array_api_compat.array_namespace(weights, values)
    total = float(xp.sum(weights * values))
    return total, weighted_sum_bound(weights, values, value_error, terms, u, tiny)


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
    :func:`log_softmax_error`. Also the per-entry errors of the two logs (``errors``, for the KL sums)."""
    log_N = float64_copy(a.log_N)
    error_N = log_error(log_N, 1, a.u)
    ce_N, err_N = weighted_sum(a.weights, -a.log_N, error_N, a.terms, a.u, a.tiny)
    if exact_fit:
        ce_P, err_P, error_P = ce_N, err_N, error_N
    else:
        error_P = log_softmax_error(a)
        ce_P, err_P = weighted_sum(a.weights, -a.log_P, error_P, a.terms, a.u, a.tiny)
    return {"ce_N": ce_N, "ce_N_error": err_N, "ce_P": ce_P, "ce_P_error": err_P, "errors": (error_N, error_P)}


def kl_sum(a: GibbsArrays, errors: tuple[np.ndarray, np.ndarray], unweighted: bool) -> tuple[float, float]:
    """Σ_c f_c KL(Ñ_c ‖ P_c) (Σ_c KL(Ñ_c ‖ P_c) when ``unweighted``) as
    :func:`rankwall.theory.expressivity.kl_gap` computes it in the backend, Σ w (log Ñ − log P) with
    w = f Ñ (or Ñ), and a bound on its distance to the exact sum (:func:`weighted_sum_bound`): each
    difference log Ñ − log P is within the two logs' errors plus one rounding of its own."""
    xp = array_api_compat.array_namespace(a.N)
    f = xp.ones_like(a.f) if unweighted else a.f
    kl = ex.kl_gap(xp.exp(a.log_P), a.N, f, log_P=a.log_P)[1]
    error_N, error_P = errors
    difference = float64_copy(a.log_N) - float64_copy(a.log_P)
    value_error = error_N + error_P + a.u * np.abs(difference)
    weights = a.N if unweighted else a.weights
    return kl, weighted_sum_bound(weights, a.log_N - a.log_P, value_error, a.terms, a.u, a.tiny)


def _gibbs_measured(ctx: Context) -> tuple[GibbsArrays, dict[str, Any]] | None:
    """The context's arrays in its backend and both cross-entropies with their bounds, computed once;
    ``None`` where the dtype does not hold the counts exactly."""

    def compute() -> tuple[GibbsArrays, dict[str, Any]] | None:
        counts, z = gibbs_instance(ctx.case)
        if not counts_exact_in(counts, tolerance.unit_roundoff(ctx.backend.dtype)):
            return None
        a = gibbs_arrays(counts, z, ctx.case.exact_fit, ctx.backend)
        return a, cross_entropies(a, ctx.case.exact_fit)

    return ctx.once("gibbs measured", compute)


def gibbs_float(ctx: Context, key: str) -> Measured:
    """One of the context's four Gibbs quantities measured in its backend (``"ce_N"``, ``"ce_P"``, the
    weighted and the unweighted KL sums ``"kl"`` and ``"kl_unweighted"``), within its rounding bound of
    the exact value; unbounded where the dtype does not hold the counts exactly or a value or a bound is
    not finite."""
    measured = _gibbs_measured(ctx)
    if measured is None:
        return UNBOUNDED
    a, ce = measured
    if key.startswith("ce"):
        found = Measured(ce[key], ce[f"{key}_error"])
    else:
        found = Measured(*kl_sum(a, ce["errors"], unweighted=key == "kl_unweighted"))
    return found if found.bounded else UNBOUNDED


@dataclass(frozen=True)
class GibbsSymbols:
    r"""The atoms of a Gibbs case's exact values: one generator of ``ring`` for log k (each count or row
    total k >= 2; log 1 = 0 is no atom) and, unless P = Ñ, two for the log-sum-exps
    :math:`L_c = \log\sum_w e^{z_{cw}}` of the observed contexts, :math:`A = \sum_c f_c L_c` and
    :math:`B = \sum_c L_c` (the only combinations of them the four quantities take: a form in a few
    atoms stays small under the products a statement may take). ``observed`` lists (c, v, n_cv, n_c),
    ``total`` is n."""

    ring: Any
    logs: dict[int, int]
    log_sums: tuple[int, int] | None
    observed: list[tuple[int, int, int, int]]
    total: int


def gibbs_symbols(ctx: Context) -> GibbsSymbols:
    def compute() -> GibbsSymbols:
        counts, _ = gibbs_exact_instance(ctx)
        rows, cols = np.nonzero(counts)
        totals = counts.sum(axis=1)
        observed = [(int(c), int(v), int(counts[c, v]), int(totals[c])) for c, v in zip(rows, cols, strict=True)]
        values = sorted({k for _, _, n, t in observed for k in (n, t) if k >= 2})
        sums = () if ctx.case.exact_fit else ("A", "B")
        names = tuple(f"log{k}" for k in values) + sums
        ring = flint.fmpq_mpoly_ctx.get(names, "lex") if names else None
        logs = {k: i for i, k in enumerate(values)}
        log_sums = None if ctx.case.exact_fit else (len(values), len(values) + 1)
        return GibbsSymbols(ring, logs, log_sums, observed, int(counts.sum()))

    return ctx.once("gibbs symbols", compute)


def gibbs_atoms(ctx: Context) -> tuple[Any, ...]:
    """The atoms' balls at the working precision: log k, and A and B from the balls of
    :math:`L_c = \\log\\sum_w e^{z_{cw}}` of the context's logits."""
    symbols = gibbs_symbols(ctx)

    def compute() -> tuple[Any, ...]:
        logs = [flint.arb(k).log() for k in symbols.logs]
        if symbols.log_sums is None:
            return tuple(logs)
        _, z = gibbs_exact_instance(ctx)
        totals = {c: t for c, _, _, t in symbols.observed}
        L = {c: sum((exact.ball(x).exp() for x in z[c]), flint.arb(0)).log() for c in totals}
        A = sum((flint.arb(flint.fmpq(totals[c], symbols.total)) * L[c] for c in totals), flint.arb(0))
        B = sum(L.values(), flint.arb(0))
        return (*logs, A, B)

    return ctx.once(("gibbs atoms", flint.ctx.prec), compute)


#: A linear form: a rational constant and rational coefficients of the atoms (by generator index).
Linear = tuple[Any, dict[int, Any]]


def _log_empirical(symbols: GibbsSymbols, n: int, t: int) -> Linear:
    """log Ñ_cv = log n_cv − log n_c."""
    coefficients: dict[int, Any] = {}
    for k, sign in ((n, 1), (t, -1)):
        if k >= 2:
            coefficients[symbols.logs[k]] = coefficients.get(symbols.logs[k], 0) + sign
    return flint.fmpq(0), coefficients


def _combined(terms: list[tuple[Any, Linear]]) -> Linear:
    """Σ weight·form over (weight, form) pairs, exactly."""
    constant, coefficients = flint.fmpq(0), {}
    for weight, (c0, cs) in terms:
        constant += weight * c0
        for i, c in cs.items():
            coefficients[i] = coefficients.get(i, 0) + weight * c
    return constant, coefficients


def _real_of(ctx: Context, symbols: GibbsSymbols, linear: Linear) -> Real:
    """The linear form as a Real: a rational where no atom is left, else its ball with its form."""
    constant, coefficients = linear
    coefficients = {i: flint.fmpq(c) for i, c in coefficients.items() if c != 0}
    if not coefficients:
        return Real.of(flint.fmpq(constant))
    n = symbols.ring.nvars()
    terms = {(0,) * n: constant} if constant != 0 else {}
    for i, c in coefficients.items():
        terms[tuple(int(j == i) for j in range(n))] = c
    form = Form(symbols.ring.from_dict(terms), symbols.ring.from_dict({(0,) * n: 1}), gibbs_atoms(ctx))
    return Real(form.evaluate(), form)


def _exact_gibbs(ctx: Context, which: str) -> Real:
    r"""Each quantity from its own definition, expanded in the atoms: with log Ñ_cv = log n_cv − log n_c and
    log P_cv = z_cv − L_c (log Ñ_cv at P = Ñ),

    - CE(Ñ) = −Σ (n_cv/n) log Ñ_cv;
    - CE(P) = −Σ (n_cv/n) log P_cv = −Σ (n_cv/n) z_cv + A, since Σ_v n_cv/n = f_c;
    - Σ_c f_c KL(Ñ_c ‖ P_c) = Σ (n_cv/n)(log Ñ_cv − log P_cv) = Σ (n_cv/n)(log Ñ_cv − z_cv) + A;
    - Σ_c KL(Ñ_c ‖ P_c) = Σ (n_cv/n_c)(log Ñ_cv − log P_cv) = Σ (n_cv/n_c)(log Ñ_cv − z_cv) + B, since
      Σ_v n_cv/n_c = 1."""
    s = gibbs_symbols(ctx)
    _, z = gibbs_exact_instance(ctx)
    fit = ctx.case.exact_fit
    terms: list[tuple[Any, Linear]] = []
    for c, v, n, t in s.observed:
        weight = flint.fmpq(n, t) if which == "kl_unweighted" else flint.fmpq(n, s.total)
        log_N = _log_empirical(s, n, t)
        model = log_N if fit else (exact.rational(float(z[c, v])), {})  # log P_cv without its −L_c
        if which == "ce_N":
            terms.append((-weight, log_N))
        elif which == "ce_P":
            terms.append((-weight, model))
        elif not fit:
            terms += [(weight, log_N), (-weight, model)]
    constant, coefficients = _combined(terms)
    if not fit and which != "ce_N":  # the L_c terms: A (weights n_cv/n) or B (weights n_cv/n_c)
        index = s.log_sums[1] if which == "kl_unweighted" else s.log_sums[0]
        coefficients[index] = coefficients.get(index, 0) + 1
    return _real_of(ctx, s, (constant, coefficients))


def _reference_log_sums(ctx: Context) -> dict[int, Any]:
    """log Σ_w e^{z_cw} of each observed context, in mpmath at the working precision."""

    def compute() -> dict[int, Any]:
        counts, z = gibbs_exact_instance(ctx)
        rows = sorted(set(np.nonzero(counts)[0].tolist()))
        return {c: mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(float(x))) for x in z[c])) for c in rows}

    return ctx.once(("gibbs log-sum-exps", mpmath.mp.prec), compute)


def _reference_gibbs(ctx: Context, key: str) -> Any:
    """One of the four quantities from the counts and the context's logits in mpmath, from its definition:
    log Ñ_cv = log(n_cv/n_c), log P_cv = z_cv − log Σ_w e^{z_cw} (log Ñ_cv at P = Ñ)."""
    counts, z = gibbs_exact_instance(ctx)
    n = int(counts.sum())
    totals = counts.sum(axis=1)
    rows, cols = np.nonzero(counts)
    log_sums = None if ctx.case.exact_fit or key == "ce_N" else _reference_log_sums(ctx)
    terms = []
    for c, v in zip(rows, cols, strict=True):
        k, t = int(counts[c, v]), int(totals[c])
        log_N = mpmath.log(mpmath.mpf(k) / t)
        log_P = log_N if log_sums is None else mpmath.mpf(float(z[c, v])) - log_sums[c]
        weight = mpmath.mpf(k) / (t if key == "kl_unweighted" else n)
        terms.append(
            -weight * (log_N if key == "ce_N" else log_P) if key.startswith("ce") else weight * (log_N - log_P)
        )
    return mpmath.fsum(terms)


def _gibbs_quantity(name: str, key: str, doc: str, exact_doc: str) -> Any:
    return _quantity(
        name,
        lambda ctx: gibbs_float(ctx, key),
        lambda ctx: _exact_gibbs(ctx, key),
        reads=(GibbsCase,),
        reference=lambda ctx: _reference_gibbs(ctx, key),
        doc=doc,
        exact_doc=exact_doc,
    )


cross_entropy_model = _gibbs_quantity(
    "CE(P)",
    "ce_P",
    "the cross-entropy −Σ_c f_c Σ_v Ñ_cv log P_cv of the model P = softmax(z) (or Ñ) on a Gibbs case",
    "a ball with its form in the log-sum-exps L_c of the logits: −Σ (n_cv/n)(z_cv − L_c)",
)
cross_entropy_empirical = _gibbs_quantity(
    "CE(Ñ)",
    "ce_N",
    "the cross-entropy of the empirical distribution Ñ itself (its entropy, frequency-weighted)",
    "a ball with its form in the logarithms of the counts: −Σ (n_cv/n)(log n_cv − log n_c)",
)
weighted_kl = _gibbs_quantity(
    "Σ_c f_c KL(Ñ_c ‖ P_c)",
    "kl",
    "the frequency-weighted KL divergence of the model from the empirical distribution (kl_gap)",
    "a ball with its form in the atoms: Σ (n_cv/n)(log n_cv − log n_c − z_cv + L_c)",
)
unweighted_kl = _gibbs_quantity(
    "Σ_c KL(Ñ_c ‖ P_c)",
    "kl_unweighted",
    "the KL divergences of the contexts summed without their frequencies",
    "a ball with its form in the atoms: Σ Ñ_cv (log n_cv − log n_c − z_cv + L_c)",
)


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


def _exact_logits(W: np.ndarray, h: np.ndarray, bias: Any = None) -> list[Fraction]:
    """W h + b with every float read exactly (Fractions; a bias may be given as Fractions)."""
    hq = [Fraction(float(x)) for x in h]
    b = (
        [Fraction(0)] * len(W)
        if bias is None
        else [Fraction(x) if isinstance(x, Fraction) else Fraction(float(x)) for x in bias]
    )
    return [sum((Fraction(float(w)) * x for w, x in zip(row, hq, strict=True)), b[v]) for v, row in enumerate(W)]


def _strict_argmax(z: list[Fraction], token: int) -> bool:
    return all(z[token] > x for v, x in enumerate(z) if v != token)


def _mp(q: Fraction) -> Any:
    return mpmath.mpf(q.numerator) / q.denominator


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
    the product, one rounding per difference, the rest for the rounding of a_v itself); the sum is
    enclosed by :func:`exp_sum_enclosure`, and it is at least 1 (the target's own term is e^0 = 1 exactly).
    Inverting costs one more rounding."""
    D = W.shape[1]
    low, high = np.empty(len(targets)), np.empty(len(targets))
    for c, (h, t) in enumerate(zip(H, targets, strict=True)):
        difference = W - W[t]
        d = difference @ h
        a = tolerance.gamma(D + 4, U) * (np.abs(difference) @ np.abs(h)) + D * TINY
        lower_sum, upper_sum = exp_sum_enclosure(d, a)
        high[c], low[c] = upper_sum, max(lower_sum, 1.0)
    return (1 / high) * (1 - 2 * U), (1 / low) * (1 + 2 * U)


def top1_ball(W: np.ndarray, h: np.ndarray, t: int, p: float) -> Any:
    """|q − p| for the exact q = 1/Σ_v e^{(w_v − w_t)·h}, in balls at the working precision."""
    hb = [exact.ball(x) for x in h]
    own = sum((exact.ball(w) * x for w, x in zip(W[t], hb, strict=True)), flint.arb(0))
    total = flint.arb(0)
    for row in W:
        total += (sum((exact.ball(w) * x for w, x in zip(row, hb, strict=True)), flint.arb(0)) - own).exp()
    return abs(1 / total - exact.ball(p))


def top1_in_balls(W: np.ndarray, h: np.ndarray, t: int, p: float, eps: float) -> int | None:
    """The sign of ε - |q - p| for the exact q, in balls at rising precision (``exact.BALL_PRECISIONS``):
    1 or 0 when the witness is within ε, -1 when it is not, None undecided."""
    for bits in exact.BALL_PRECISIONS:
        with exact.precision(bits):
            sign = exact.sign(exact.ball(eps) - top1_ball(W, h, t, p))
            if sign is not None:
                return sign
    return None


@dataclass(frozen=True)
class Top1Screen:
    """The float screen of a circle witness: the instance, the contexts whose target is certified the
    strict argmax (``wins``) or certified not (``lost``, finite logits), an enclosure [``far_low``,
    ``far_high``] of |q_c − p_c| per context, and the screen's losses that exact integers confirmed or
    cleared."""

    H: np.ndarray
    W: np.ndarray
    targets: np.ndarray
    probs: np.ndarray
    head: ex.Head
    wins: np.ndarray
    lost: np.ndarray
    far_low: np.ndarray
    far_high: np.ndarray
    confirmed: list[int]
    cleared: list[int]


def top1_screen(ctx: Context) -> Top1Screen:
    def compute() -> Top1Screen:
        H, W, targets, probs = witness(ctx.case)
        head = ex.Head.of(W)
        wins = certified_wins(head, H, targets)
        finite = np.all(np.isfinite(H @ W.T), axis=1)
        low, high = top1_interval(H, W, targets)
        far_high = np.maximum(high - probs, probs - low) * (1 + 4 * U)
        far_low = np.maximum(np.maximum(low - probs, probs - high) * (1 - 4 * U), 0.0)
        lost = ~wins & finite  # a certified loss (Head.winners is exact on finite logits)
        where = np.flatnonzero(lost)
        confirmed, cleared = confirm_losses(head, H[where], targets[where])
        return Top1Screen(
            H,
            W,
            targets,
            probs,
            head,
            wins,
            lost,
            far_low,
            far_high,
            [int(where[k]) for k in confirmed],
            [int(where[k]) for k in cleared],
        )

    return ctx.once("top1 screen", compute)


def _top1_certificate(s: Top1Screen, eps: float, undecided: int) -> dict[str, Any]:
    largest = float(s.far_high.max())
    return {
        "wrong_argmax": int(s.lost.sum()),
        "probability_off": int((s.wins & (s.far_low > eps)).sum()),
        "undecided": undecided,
        "largest_distance": largest,
        # for the search's target(): the worst context's distance bound in units of ε (1 is the edge)
        "closeness": largest / eps if eps > 0 else math.inf,
        "confirmed": s.confirmed,
        "cleared": s.cleared,
    }


#: What certifies the ends of the count of failing contexts.
TOP1_LOWER = "contexts failing: argmax lost (exact integers) or |top-1 − p| > ε (a rounding-bounded interval)"
TOP1_UPPER = "contexts passing: strict argmax (Head.winners) and |top-1 − p| <= ε (a rounding-bounded interval)"


def _measure_failures(ctx: Context) -> Interval:
    """Failing contexts as the screen certifies them; the contexts it leaves open widen the interval."""
    s, eps = top1_screen(ctx), float(ctx.case.eps)
    failed = s.lost | (s.wins & (s.far_low > eps))
    passed = s.wins & (s.far_high <= eps)
    undecided = int((~failed & ~passed).sum())
    certificate = _top1_certificate(s, eps, undecided)
    if s.cleared:
        return _disagreeing("strict argmax", **certificate)
    exact_ends = len(s.confirmed) == len(s.targets)  # every context lost, confirmed in integers
    return _count(failed.sum(), failed.sum() + undecided, TOP1_LOWER, TOP1_UPPER, exact_ends, **certificate)


def _exact_failures(ctx: Context) -> Interval:
    """The screen's open contexts decided: the argmax in exact integers against every rival where the
    logits overflow, |top-1 − p| against ε in balls at rising precision."""
    s, eps = top1_screen(ctx), float(ctx.case.eps)
    failed = s.lost | (s.wins & (s.far_low > eps))
    passed = s.wins & (s.far_high <= eps)
    open_contexts = np.flatnonzero(~failed & ~passed)
    certificate = _top1_certificate(s, eps, len(open_contexts))
    if s.cleared:
        return _disagreeing("strict argmax", **certificate)
    still_open = 0
    V = len(s.W)
    for c in open_contexts:
        t = int(s.targets[c])
        if not s.wins[c] and not ex.wins_exactly(s.head, s.H[c], t, np.delete(np.arange(V), t)):
            failed[c] = True
            continue
        sign = top1_in_balls(s.W, s.H[c], t, float(s.probs[c]), eps)
        failed[c], still_open = sign == -1, still_open + (sign is None)
    lo = int(failed.sum())
    decided = "; the screen's open contexts decided in exact integers and in balls at rising precision"
    exact_ends = len(s.confirmed) == len(s.targets)
    return _count(lo, lo + still_open, TOP1_LOWER + decided, TOP1_UPPER + decided, exact_ends, **certificate)


def _measure_wrong_argmaxes(ctx: Context) -> Interval:
    s = top1_screen(ctx)
    if s.cleared:
        return _disagreeing("strict argmax", confirmed=s.confirmed, cleared=s.cleared)
    undecided = int((~s.wins & ~s.lost).sum())  # logits that overflow
    exact_ends = len(s.confirmed) == int(s.lost.sum()) == len(s.targets)
    lo = int(s.lost.sum())
    return _count(lo, lo + undecided, "losses (exact integers)", "wins (Head.winners)", exact_ends)


def _exact_wrong_argmaxes(ctx: Context) -> Interval:
    s = top1_screen(ctx)
    if s.cleared:
        return _disagreeing("strict argmax", confirmed=s.confirmed, cleared=s.cleared)
    V = len(s.W)
    lost = s.lost.copy()
    for c in np.flatnonzero(~s.wins & ~s.lost):
        t = int(s.targets[c])
        lost[c] = not ex.wins_exactly(s.head, s.H[c], t, np.delete(np.arange(V), t))
    return _count(lost.sum(), lost.sum(), "losses (exact integers)", "wins (Head.winners, exact integers)", False)


def _measure_top1_error(ctx: Context) -> Measured:
    """max_c |q_c − p_c| from the per-context enclosures: the midpoint of [max low, max high]."""
    s = top1_screen(ctx)
    low, high = float(s.far_low.max()), float(s.far_high.max())
    if not (math.isfinite(low) and math.isfinite(high)):
        return UNBOUNDED
    middle = (low + high) / 2
    return Measured(middle, ((high - low) / 2 + U * abs(middle)) * (1 + 4 * U))


def _exact_top1_error(ctx: Context) -> Real:
    """max_c |q_c − p_c| in balls at the working precision (the hull of the largest ends)."""
    H, W, targets, probs = witness(ctx.case)
    balls = [top1_ball(W, h, int(t), float(p)) for h, t, p in zip(H, targets, probs, strict=True)]
    lower, upper = max(b.lower() for b in balls), max(b.upper() for b in balls)
    return Real(flint.arb(lower).union(flint.arb(upper)))


def _reference_top1(ctx: Context) -> dict[str, Any]:
    """The witness's logits in Fractions, its top-1 probabilities in mpmath: the failing contexts, the
    wrong argmaxes and the largest |top-1 − p|."""

    def compute() -> dict[str, Any]:
        H, W, targets, probs = witness(ctx.case)
        failures, wrong, largest = 0, 0, mpmath.mpf(0)
        for h, t, p in zip(H, targets, probs, strict=True):
            z = _exact_logits(W, h)
            top1 = 1 / mpmath.fsum(mpmath.exp(_mp(x - z[int(t)])) for x in z)
            distance = abs(top1 - mpmath.mpf(float(p)))
            largest = max(largest, distance)
            lost = not _strict_argmax(z, int(t))
            wrong += lost
            failures += lost or distance > mpmath.mpf(ctx.case.eps)
        return {"failures": failures, "wrong": wrong, "error": largest}

    return ctx.once(("top1 reference", mpmath.mp.prec), compute)


witness_failures = _quantity(
    "#{contexts the witness fails}",
    _measure_failures,
    _exact_failures,
    reads=(Top1Case,),
    reference=lambda ctx: _reference_top1(ctx)["failures"],
    integer=True,
    follows_backend=False,
    doc="the contexts c of a circle witness where t_c is not the strict argmax or |top-1 − p_c| > ε",
    exact_doc="the screen's certified contexts, and the rest decided in exact integers and in balls",
)
wrong_argmaxes = _quantity(
    "#{t_c not the strict argmax}",
    _measure_wrong_argmaxes,
    _exact_wrong_argmaxes,
    reads=(Top1Case,),
    reference=lambda ctx: _reference_top1(ctx)["wrong"],
    integer=True,
    follows_backend=False,
    doc="the contexts of a circle witness whose target is not the strict argmax",
    exact_doc="Head.winners, and exact integers against every rival where the logits overflow",
)
top1_error = _quantity(
    "max_c |top-1 − p_c|",
    _measure_top1_error,
    _exact_top1_error,
    reads=(Top1Case,),
    reference=lambda ctx: _reference_top1(ctx)["error"],
    follows_backend=False,
    doc="the largest distance of a circle witness's top-1 probability from its target p_c",
    exact_doc="balls: 1/Σ_v e^{(w_v − w_t)·h} from the witness's floats read exactly",
)
epsilon = _quantity(
    "ε",
    lambda ctx: Measured(float(ctx.case.eps), 0.0),
    lambda ctx: Real.of(Fraction(float(ctx.case.eps))),
    reads=(Top1Case,),
    reference=lambda ctx: Fraction(float(ctx.case.eps)),
    follows_backend=False,
    doc="the precision ε a circle witness is built to",
    exact_doc="the float ε read exactly",
)


# --------------------------------------------------------------------------- D = 1, the tangent head


def tangent_instance(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """The context's tangent head as built: slopes W (V x 1) and float biases b."""
    return ctx.once("tangent head", lambda: ex.tangent_head(ctx.case.V, ctx.case.seed))


def tangent_logits(rivals: np.ndarray, at: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """The tangent head's logits z_v(h) = w_v h + fl(−w_v²/2) at h = ``at`` computed in float64, and the
    bound γ₄(|w_v h| + w_v²/2) + 4·2^-1074 on their distance to the exact w_v h − w_v²/2 (the square, the
    product and the sum rounded once each, one more for the bound itself; the halving is exact above the
    subnormals), for the weights ``rivals``, elementwise against ``at``."""
    product = rivals * at
    squares = rivals * rivals / 2
    return product - squares, tolerance.gamma(4, U) * (np.abs(product) + squares) + 4 * TINY


def tangent_head_wins(W: np.ndarray, t: int) -> bool:
    """Whether t is the strict argmax at h = w_t of the exact tangent head z_v(h) = w_v h - w_v^2/2 (the
    biases exact, not rounded): a rival whose float logit's upper end (the rounding bound of
    :func:`tangent_screen_all_rivals`) is below t's lower end is settled by that bound; every other rival
    is compared with t in rationals (the floats read exactly). O(V) float work and a few rationals per
    token, where :func:`tangent_head_wins_in_integers` (the reference) does O(V) big-integer work."""
    w = W[:, 0]
    t = int(t)
    z, error = tangent_logits(w, w[t])
    own_lower = z[t] - error[t]
    rivals = np.flatnonzero(~(z + error < own_lower))  # NaN (an overflow) keeps a rival open
    wt = Fraction(float(w[t]))
    own = wt * wt / 2
    return all(Fraction(float(w[v])) * wt - Fraction(float(w[v])) ** 2 / 2 < own for v in rivals if v != t)


def tangent_head_wins_in_integers(W: np.ndarray, t: int) -> bool:
    """:func:`tangent_head_wins` in integers against every rival: with w_v = n_v / Q,
    2 Q^2 z_v(w_t) = 2 n_v n_t - n_v^2 (the reference, O(V) big integers per token)."""
    ratios = [float(w).as_integer_ratio() for w in W.ravel()]
    Q = max(q for _, q in ratios)
    n = [p * (Q // q) for p, q in ratios]
    scores = [2 * m * n[t] - m * m for m in n]
    return all(scores[t] > score for v, score in enumerate(scores) if v != t)


#: Rivals on each side of a token (in the order of the weights) whose logits the screen computes; the
#: others are bounded together (:func:`tangent_screen`).
TANGENT_WINDOW = 8


def tangent_screen(W: np.ndarray, window: int = TANGENT_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    r"""Tokens t certified to win, and to lose, at h = w_t on the exact tangent head, in O(V window) work
    after a sort. Exactly, :math:`z_v(w_t) = w_t^2/2 - (w_v - w_t)^2/2`, so the rivals that can come near
    t are its neighbours in the order of the weights: the ``window`` nearest on each side are screened as
    :func:`tangent_screen_all_rivals` screens every rival; every other rival v is at least :math:`D_t` from
    :math:`w_t` (the distance to the nearest weight outside the window), so its logit's upper end is at
    most :math:`w_t^2/2 - D_t^2/2 + 2E_t` with :math:`E_t = \gamma_4(M|w_t| + M^2/2) + 4\cdot 2^{-1074}`
    (M = max |w|: the rounding bound of any rival's logit), evaluated rounded upward (:func:`_far_rivals_upper`).
    A win needs t's lower end above both; a loss is read from the window only (a subset of the rivals
    proves a loss as well as all of them), so the screen answers a subset of what the dense screen does,
    never more; what it leaves open the exact route decides."""
    w = W[:, 0]
    V = len(w)
    if V <= 2 * window + 1:
        return tangent_screen_all_rivals(W)
    order = np.argsort(w, kind="stable")
    x = w[order]
    own, own_error = tangent_logits(x, x)
    upper = np.full(V, -np.inf)
    lower = np.full(V, -np.inf)
    positions = np.arange(V)
    for offset in (*range(-window, 0), *range(1, window + 1)):
        rivals = positions + offset
        valid = (rivals >= 0) & (rivals < V)
        i, j = positions[valid], rivals[valid]
        z, error = tangent_logits(x[j], x[i])
        np.maximum.at(upper, i, z + error)
        np.maximum.at(lower, i, z - error)
    left = np.where(positions - window - 1 >= 0, x - x[np.maximum(positions - window - 1, 0)], np.inf)
    right = np.where(positions + window + 1 < V, x[np.minimum(positions + window + 1, V - 1)] - x, np.inf)
    far = _far_rivals_upper(x, np.minimum(left, right), float(np.max(np.abs(x))), tolerance.gamma(4, U))
    won_sorted = own - own_error > np.maximum(upper, far)
    lost_sorted = lower > own + own_error
    won, lost = np.zeros(V, dtype=bool), np.zeros(V, dtype=bool)
    won[order], lost[order] = won_sorted, lost_sorted
    return won, lost


def _far_rivals_upper(x: np.ndarray, distance: np.ndarray, largest: float, g: float) -> np.ndarray:
    """An upper bound of :math:`x^2/2 - D^2/2 + 2E` (:func:`tangent_screen`) computed in float64: the
    positive part A = x²/2 + 2E (at most ten roundings of positive terms) raised by 2γ₁₀ and 8 subnormal
    units, the subtracted part D²/2 (D itself one rounded subtraction) lowered by γ₄, and the difference's
    own rounding covered by γ₂ of both parts. Where D is infinite (no rival outside the window) the bound is
    −∞; an overflow gives +∞ or NaN, which certifies no win."""
    E = g * (largest * np.abs(x) + largest * largest / 2) + 4 * TINY
    A = (x * x / 2 + 2 * E) * (1 + 2 * tolerance.gamma(10, U)) + 8 * TINY
    finite = np.isfinite(distance)
    D = np.where(finite, distance, 0.0)
    B = D * D / 2 * (1 - tolerance.gamma(4, U))
    bound = A - B + tolerance.gamma(2, U) * (A + B)
    return np.where(finite, bound, -np.inf)


def tangent_screen_all_rivals(W: np.ndarray, block_entries: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    r"""Tokens t certified to win, and to lose, at h = w_t on the exact tangent head, against every rival
    (O(V²): the reference of :func:`tangent_screen`): the logits
    :math:`z_v = w_v w_t + \hat b_v` with :math:`\hat b_v = \mathrm{fl}(-w_v^2/2)` are computed in float64,
    within :math:`\gamma_4(|w_v w_t| + w_v^2/2) + 4\cdot 2^{-1074}` of the exact :math:`w_v w_t - w_v^2/2`
    (the square, the product and the sum rounded once each, one more for the bound itself; the halving is
    exact above the subnormals). A token wins where its lower end clears every rival's upper end, and loses
    where some rival's lower end clears its upper end."""
    w = W[:, 0]
    V = len(w)
    squares = w * w / 2
    won, lost = np.zeros(V, dtype=bool), np.zeros(V, dtype=bool)
    g = tolerance.gamma(4, U)
    block = max(1, block_entries // V)
    for start in range(0, V, block):
        tokens = np.arange(start, min(V, start + block))
        columns = np.arange(len(tokens))
        error = np.multiply.outer(w, w[tokens])
        z = error - squares[:, None]
        np.abs(error, out=error)
        error += squares[:, None]
        error *= g
        error += 4 * TINY
        own, own_error = z[tokens, columns], error[tokens, columns]
        z[tokens, columns] = -np.inf  # the rivals only
        upper = (z + error).max(axis=0)
        z -= error
        lower = z.max(axis=0)
        won[tokens] = own - own_error > upper
        lost[tokens] = lower > own + own_error
    return won, lost


def tangent_closeness(W: np.ndarray) -> float:
    """How near the tangent head comes to a lost token (for the search's target()): token t beats its
    nearest neighbour at h = w_t by (Δw)²/2, against biases of size w²/2 rounded at u; minus the
    smallest (Δw)² over u·max w² (a loss needs it near 1 or below)."""
    w = np.sort(W.ravel())
    smallest = float(np.min(np.diff(w)) ** 2) if len(w) > 1 else math.inf
    return -smallest / (U * max(float(np.max(w * w)), TINY))


def _tangent_screened(ctx: Context) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """The screen's winners and losers, and its first ``CONFIRMED_FAILURES`` losses re-checked exactly
    on the exact tangent head (:func:`tangent_head_wins`): (won, lost, confirmed, cleared)."""

    def compute() -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
        W, _ = tangent_instance(ctx)
        won, lost = tangent_screen(W)
        checked = [int(t) for t in np.flatnonzero(lost)[:CONFIRMED_FAILURES]]
        cleared = [t for t in checked if tangent_head_wins(W, t)]
        return won, lost, [t for t in checked if t not in cleared], cleared

    return ctx.once("tangent screen", compute)


TANGENT_LOWER = "tokens losing at h = w_t (a rounding-bounded screen of the exact tangent head, confirmed exactly)"
TANGENT_UPPER = "tokens winning at h = w_t (the same screen; open rivals in rationals)"


def _tangent_certificate(ctx: Context, missed: np.ndarray, undecided: int) -> dict[str, Any]:
    W, _ = tangent_instance(ctx)
    _, _, confirmed, cleared = _tangent_screened(ctx)
    return {
        "missed": len(missed),
        "first_missed": missed[:8].tolist(),
        "undecided": undecided,
        "confirmed": confirmed,
        "cleared": cleared,
        "closeness": tangent_closeness(W),
    }


def _measure_tangent_losses(ctx: Context) -> Interval:
    won, lost, _, cleared = _tangent_screened(ctx)
    missed, undecided = np.flatnonzero(lost), int((~won & ~lost).sum())
    certificate = _tangent_certificate(ctx, missed, undecided)
    if cleared:
        return _disagreeing("strict argmax at h = w_t", **certificate)
    return _count(len(missed), len(missed) + undecided, TANGENT_LOWER, TANGENT_UPPER, False, **certificate)


def _exact_tangent_losses(ctx: Context) -> Interval:
    """The screen's open tokens decided exactly on the exact tangent head (:func:`tangent_head_wins`)."""
    W, _ = tangent_instance(ctx)
    won, lost, _, cleared = _tangent_screened(ctx)
    open_tokens = np.flatnonzero(~won & ~lost)
    lost = lost.copy()
    for t in open_tokens:
        lost[t] = not tangent_head_wins(W, int(t))
    certificate = _tangent_certificate(ctx, np.flatnonzero(lost), 0)
    certificate["decided_in_integers"] = open_tokens[:8].tolist()
    if cleared:
        return _disagreeing("strict argmax at h = w_t", **certificate)
    return _count(lost.sum(), lost.sum(), TANGENT_LOWER, TANGENT_UPPER, False, **certificate)


def _head_losses(ctx: Context, bias: bool) -> Interval:
    """The tokens t that are not the strict argmax at h = w_t of the head as built (``bias``: the float
    biases b, read exactly) or of the slopes alone, by Head.winners (rounding bound, exact integers for the
    close rivals), the first losses confirmed in integers against every rival."""

    def compute() -> Interval:
        W, b = tangent_instance(ctx)
        head = ex.Head.of(W, b if bias else None)
        tokens = np.arange(len(W))
        missed = np.flatnonzero(~certified_wins(head, W, tokens))
        confirmed, cleared = confirm_losses(head, W[missed], missed)
        certificate = {
            "missed": len(missed),
            "first_missed": missed[:8].tolist(),
            "confirmed": [int(missed[k]) for k in confirmed],
            "cleared": [int(missed[k]) for k in cleared],
        }
        if cleared:
            return _disagreeing("strict argmax at h = w_t", **certificate)
        how = "Head.winners (rounding bound, exact integers for close rivals)"
        return _count(len(missed), len(missed), f"losses by {how}", f"wins by {how}", False, **certificate)

    return ctx.once(("head losses", bias), compute)


def _reference_head_losses(ctx: Context, bias: str) -> int:
    """The tokens t that are not the strict argmax of w_v w_t + b_v, in Fractions: b the built biases
    (``"built"``), exactly −w_v²/2 (``"tangent"``), or none (``"none"``)."""
    W, b = tangent_instance(ctx)
    w = [Fraction(float(x)) for x in W[:, 0]]
    biases = {"built": [Fraction(float(x)) for x in b], "tangent": [-x * x / 2 for x in w], "none": None}[bias]
    return sum(not _strict_argmax(_exact_logits(W, W[t], biases), t) for t in range(len(W)))


def _never_without_bias(ctx: Context) -> Interval:
    """D = 1 without a bias: for h > 0 the strict argmax of h w is the unique largest slope, for h < 0 the
    unique smallest, and at h = 0 every token ties; so the tokens strictly inside (ex.interior_tokens),
    and the tied extremes, never win. Float comparisons are exact."""
    w = tangent_instance(ctx)[0][:, 0]
    if w.min() == w.max():
        never = len(w)
    else:
        extremes = [int((w == w.max()).sum()), int((w == w.min()).sum())]
        never = len(ex.interior_tokens(w)) + sum(k for k in extremes if k > 1)
    how = "float comparisons of the slopes (exact)"
    return _count(never, never, how, how, True, interior=len(ex.interior_tokens(w)))


def _reference_never_without_bias(ctx: Context) -> int:
    """The tokens that are neither the unique largest nor the unique smallest slope, in Fractions."""
    w = [Fraction(float(x)) for x in tangent_instance(ctx)[0][:, 0]]
    unique = [x for x in (max(w), min(w)) if w.count(x) == 1] if max(w) != min(w) else []
    return sum(1 for x in w if x not in unique)


tangent_losses = _quantity(
    "#{t not the strict argmax at h = w_t}",
    _measure_tangent_losses,
    _exact_tangent_losses,
    reads=(TangentCase,),
    reference=lambda ctx: _reference_head_losses(ctx, "tangent"),
    integer=True,
    follows_backend=False,
    doc="the tokens t of the exact tangent head z_v(h) = w_v h − w_v²/2 that are not the strict argmax at h = w_t",
    exact_doc="a rounding-bounded screen, and where it is open each rival it cannot settle compared in rationals",
)
built_head_losses = _quantity(
    "#{t not the strict argmax at h = w_t, biases as built}",
    lambda ctx: _head_losses(ctx, bias=True),
    lambda ctx: _head_losses(ctx, bias=True),
    reads=(TangentCase,),
    reference=lambda ctx: _reference_head_losses(ctx, "built"),
    integer=True,
    follows_backend=False,
    doc="the same count on the tangent head as built in float64 (each bias −w_v²/2 rounded)",
    exact_doc="Head.winners: exact integers for the rivals within its rounding bound",
)
slope_losses = _quantity(
    "#{t not the strict argmax of w_v w_t}",
    lambda ctx: _head_losses(ctx, bias=False),
    lambda ctx: _head_losses(ctx, bias=False),
    reads=(TangentCase,),
    reference=lambda ctx: _reference_head_losses(ctx, "none"),
    integer=True,
    follows_backend=False,
    doc="the same count on the tangent head's slopes alone, z_v(h) = w_v h",
    exact_doc="Head.winners: exact integers for the rivals within its rounding bound",
)
never_argmax_without_bias = _quantity(
    "#{never the strict argmax, D = 1, no bias}",
    _never_without_bias,
    _never_without_bias,
    reads=(TangentCase,),
    reference=_reference_never_without_bias,
    integer=True,
    follows_backend=False,
    doc="the tokens no h makes the strict argmax of z_v = w_v h (the tangent head's slopes, without a bias)",
    exact_doc="exact comparisons of the slopes: all but the unique largest and the unique smallest",
)


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


def shared_rows(W: np.ndarray) -> np.ndarray:
    """The rows of W equal (exactly) to another row."""
    _, inverse, counts = np.unique(W, axis=0, return_inverse=True, return_counts=True)
    return counts[inverse.reshape(-1)] > 1


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


def hull_truth(W: np.ndarray, D: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Per token, whether it is argmaxable and whether it is a vertex of conv{w_v} that no other token
    shares, both decided exactly, and how. At D <= 3, by exhaustive facet enumeration on the distinct rows
    (:func:`exhaustive_facets`): the vertices are the facets' points, and a vertex is argmaxable when the
    sum of its facets' outward normals makes it the strict argmax in Fractions. Above (or without general
    position), HiGHS guesses certified exactly either way (:func:`certified_vertex`). A row shared by two
    tokens is never the strict argmax, and a row inside the hull of the others never is."""
    distinct, first, inverse = np.unique(W, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    shared = np.bincount(inverse)[inverse] > 1
    facets = exhaustive_facets(distinct) if D <= 3 else None
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
    return argmaxable, vertices[inverse] & ~shared, how


def _reference_hull(ctx: Context) -> tuple[np.ndarray, np.ndarray, str]:
    return ctx.once("hull truth", lambda: hull_truth(argmax_head(ctx.case), ctx.case.D))


@dataclass(frozen=True)
class HullComparison:
    """The pipeline's certified answers on an argmax head (:func:`certified_answers`) and qhull's
    vertices that no other token shares, per token."""

    answers: dict[str, np.ndarray]
    vertices: np.ndarray

    @property
    def disagree(self) -> np.ndarray:
        a = self.answers
        return (a["argmaxable"] & ~self.vertices) | (a["never"] & self.vertices)

    def certificate(self) -> dict[str, Any]:
        a = self.answers
        return {
            "argmaxable": int(a["argmaxable"].sum()),
            "never": int(a["never"].sum()),
            "undecided": int(a["undecided"].sum()),
            "hull_vertices": int(self.vertices.sum()),
            "disagree": np.flatnonzero(self.disagree)[:8].tolist(),
            "bad_certificates": np.flatnonzero(a["bad"])[:8].tolist(),
        }


def hull_comparison(ctx: Context) -> HullComparison:
    def compute() -> HullComparison:
        from scipy.spatial import ConvexHull

        W = argmax_head(ctx.case)
        vertices = np.zeros(len(W), dtype=bool)
        vertices[ConvexHull(W).vertices] = True
        return HullComparison(certified_answers(W), vertices & ~shared_rows(W))

    return ctx.once("hull comparison", compute)


def _hull_disagreements(ctx: Context) -> Interval:
    """The tokens where a certified answer and qhull's unshared vertices disagree, plus the answers whose
    certificate fails its re-check; an undecided token may be either, so it widens the interval."""
    comparison = hull_comparison(ctx)
    answers = comparison.answers
    count = int(comparison.disagree.sum() + answers["bad"].sum())
    undecided = int(answers["undecided"].sum())
    # a witness h rests on a rigorous rounding bound and exact integers; convex weights are exact
    lower = "certified answers (a winning h re-checked, convex weights in Fractions) against qhull"
    return _count(count, count + undecided, lower, lower, False, **comparison.certificate())


def _never_tokens(ctx: Context) -> Interval:
    """The tokens no h makes the strict argmax: at least those certified never (convex weights), at most
    those not certified argmaxable (a winning h)."""
    answers = hull_comparison(ctx).answers
    V = len(answers["never"])
    lo, hi = int(answers["never"].sum()), V - int(answers["argmaxable"].sum())
    return _count(
        lo,
        hi,
        "convex weights re-checked in Fractions",
        "winning h re-checked exactly",
        True,
        never=lo,
        first_never=np.flatnonzero(answers["never"])[:8].tolist(),
    )


hull_disagreements = _quantity(
    "#{certified answer ≠ unshared hull vertex}",
    _hull_disagreements,
    _hull_disagreements,
    reads=(ArgmaxHeadCase,),
    reference=lambda ctx: int(np.sum(_reference_hull(ctx)[0] != _reference_hull(ctx)[1])),
    integer=True,
    follows_backend=False,
    doc="the tokens of an argmax head where the LP pipeline's certified answer and qhull's vertices that no "
    "other token shares disagree, plus the answers whose certificate fails its re-check",
    exact_doc="the certificates re-checked exactly (a winning h by Head.winners, convex weights in Fractions)",
)
unargmaxable_tokens = _quantity(
    "#{never the strict argmax}",
    _never_tokens,
    _never_tokens,
    reads=(ArgmaxHeadCase,),
    reference=lambda ctx: int(len(_reference_hull(ctx)[0]) - _reference_hull(ctx)[0].sum()),
    integer=True,
    follows_backend=False,
    doc="the tokens of an argmax head that no hidden state makes the strict argmax, certified both ways",
    exact_doc="[certified never, V − certified argmaxable]: convex weights in Fractions, a winning h exactly",
)


# --------------------------------------------------------------------------- D = 1 with a bias (EX.3 item 4)


@dataclass(frozen=True)
class LineHead:
    """A line head as built: slopes w and biases b (float64), and the token t (a slope strictly inside)."""

    w: np.ndarray
    b: np.ndarray
    t: int


def line_instance(ctx: Context) -> LineHead:
    """The context's line head; a token that is not strictly between two slopes (an extreme one, V < 3,
    or tied slopes) is no instance (:class:`~rankwall.checks.engine.verdict.OutsideDomain`)."""

    def compute() -> LineHead:
        c = ctx.case
        W, b = ex.line_head(c.V, c.shape, c.seed, c.scale, c.jitter)
        w, t = W[:, 0], c.V // 2 if c.token is None else c.token
        if not (isinstance(t, int) and 0 < t < c.V - 1 and w[0] < w[t] < w[-1]):
            raise OutsideDomain(f"line-head (V = {c.V}): token {t!r} does not lie strictly between two slopes")
        return LineHead(w, b, t)

    return ctx.once("line head", compute)


@dataclass(frozen=True)
class LineEnds:
    """The token's gaps to the others, α_x = w_x − w_t and β_x = b_x − b_t, and the ends L < U of the open
    interval of h where it is the strict argmax (``None`` when it is empty), all exact rationals."""

    alpha: list[Any]
    beta: list[Any]
    ends: tuple[Any, Any] | None


def line_ends(ctx: Context) -> LineEnds:
    """The gaps read exactly, and the interval by :func:`rankwall.theory.expressivity.d1_argmax_interval`
    (exact, from the floats: t beats x where α_x h + β_x < 0)."""

    def compute() -> LineEnds:
        head = line_instance(ctx)
        w = [exact.rational(float(x)) for x in head.w]
        b = [exact.rational(float(x)) for x in head.b]
        alpha = [x - w[head.t] for x in w]
        beta = [x - b[head.t] for x in b]
        interval = ex.d1_argmax_interval(head.w, head.b, head.t)
        ends = None if interval is None else tuple(exact.fmpq_of(end) for end in interval)
        return LineEnds(alpha, beta, ends)

    return ctx.once("line ends", compute)


# ..................................................................... the float route


def _line_sums(head: LineHead, h: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """Enclosures of g(h) = Σ_x e^{α_x h + β_x} and of g'(h) = Σ_x α_x e^{α_x h + β_x} at a float h:
    α and β computed in float64 (one rounding each), the arguments d = α h + β within
    γ_4(|α h| + |β|) + 2·2^-1074 of the exact ones, the sums by :func:`exp_sum_enclosure` (g' as its
    positive part minus its negative part, weighted by |α|)."""
    alpha, beta = head.w - head.w[head.t], head.b - head.b[head.t]
    with np.errstate(over="ignore", invalid="ignore"):
        d = alpha * h + beta
        a = tolerance.gamma(4, U) * (np.abs(alpha * h) + np.abs(beta)) + 2 * TINY
    g = exp_sum_enclosure(d, a)
    up, down = alpha > 0, alpha < 0
    plus = exp_sum_enclosure(d[up], a[up], alpha[up])
    minus = exp_sum_enclosure(d[down], a[down], -alpha[down])
    slope = (_down(plus[0] - minus[1]), _up(plus[1] - minus[0]))
    return g, slope


def _down(x: float) -> float:
    """x pushed below the rounding of the operation that gave it (two ulps and the smallest subnormal)."""
    return x - 2 * U * abs(x) - TINY


def _up(x: float) -> float:
    return x + 2 * U * abs(x) + TINY


def _q_of(g: tuple[float, float]) -> tuple[float, float]:
    """q = 1/g from an enclosure of g (g >= 1: the token's own term is e^0)."""
    low, high = max(g[0], 1.0), g[1]
    return max(_down(1 / high), 0.0) if math.isfinite(high) else 0.0, min(_up(1 / low), 1.0)


def _line_float_ends(head: LineHead) -> tuple[float, float, float, float] | str | None:
    """The ends L, U of the token's interval as floats with their errors (L̂, e_L, Û, e_U): each
    −β/α costs three roundings (γ_4 with the bound's own), and the largest (smallest) of such values is
    within the largest of their errors. ``"empty"`` where the interval is certainly empty, ``None`` where
    the floats cannot tell."""
    alpha, beta = head.w - head.w[head.t], head.b - head.b[head.t]
    others = np.arange(len(alpha)) != head.t
    tied = others & (alpha == 0)
    if np.any(head.b[tied] >= head.b[head.t]):
        return "empty"
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -beta / alpha
    e = tolerance.gamma(4, U) * np.abs(r) + TINY
    low, high = alpha < 0, alpha > 0
    L, e_L = float(r[low].max()), float(e[low].max())
    U_, e_U = float(r[high].min()), float(e[high].max())
    if L - e_L >= U_ + e_U:
        return "empty"
    if not L + e_L < U_ - e_U:
        return None
    return L, e_L, U_, e_U


def _min_g_float(head: LineHead, low: float, high: float) -> tuple[float, float] | None:
    """An enclosure of min g where g'(low) < 0 < g'(high): the minimiser by bisection on the computed
    g', then two floats h₁ < h₂ around it with g'(h₁) < 0 < g'(h₂) certified, and
    min g ∈ [min(g(h₁), g(h₂)) − (h₂ − h₁) min(|g'(h₁)|, g'(h₂)), g(ĥ)]."""
    alpha, beta = head.w - head.w[head.t], head.b - head.b[head.t]
    for _ in range(1100):
        middle = (low + high) / 2
        if not low < middle < high:
            break
        with np.errstate(over="ignore"):
            value = float(np.sum(alpha * np.exp(alpha * middle + beta)))
        low, high = (middle, high) if value < 0 else (low, middle)
    h_hat = (low + high) / 2
    delta = 2.0**-26 * max(1.0, abs(h_hat))
    for _ in range(24):
        h1, h2 = h_hat - delta, h_hat + delta
        (g1, s1), (g2, s2) = _line_sums(head, h1), _line_sums(head, h2)
        if s1[1] < 0 < s2[0]:
            slope = min(-s1[0], s2[1])
            lower = _down(min(g1[0], g2[0]) - _up(_up(h2 - h1) * slope))
            return max(lower, 1.0), _line_sums(head, h_hat)[0][1]
        delta *= 4
    return None


def line_float(ctx: Context) -> dict[str, Measured]:
    """sup q_t and inf q_t of the token t in float64 with rigorous bounds: q_t at the float ends L̂, Û
    (from :func:`_line_sums`), moved by max|α|·e_L (q_t is max|α|-Lipschitz: |q'| = q|g'/g| <= max|α|);
    where the minimiser of g lies (the sign of g' at the ends, g' increasing, at floats bracketing each end);
    and the minimum of g (:func:`_min_g_float`). Unbounded where the floats cannot tell."""

    def compute() -> dict[str, Measured]:
        head = line_instance(ctx)
        ends = _line_float_ends(head)
        if ends == "empty":
            return {"sup": Measured(0.0, 0.0), "inf": Measured(1.0, 0.0)}
        if ends is None:
            return {"sup": UNBOUNDED, "inf": UNBOUNDED}
        L, e_L, U_, e_U = ends
        lipschitz = _up(float(np.abs(head.w - head.w[head.t]).max()))
        q = {}
        for name, h, e in (("L", L, e_L), ("U", U_, e_U)):
            low, high = _q_of(_line_sums(head, h)[0])
            q[name] = (max(_down(low - lipschitz * e), 0.0), min(_up(high + lipschitz * e), 1.0))
        inf = (min(q["L"][0], q["U"][0]), min(q["L"][1], q["U"][1]))
        below_L, above_L = np.nextafter(_down(L - e_L), -np.inf), np.nextafter(_up(L + e_L), np.inf)
        below_U, above_U = np.nextafter(_down(U_ - e_U), -np.inf), np.nextafter(_up(U_ + e_U), np.inf)
        sup = None
        if _line_sums(head, below_L)[1][0] >= 0:  # g' >= 0 from L on: q_t falls, its largest value at L
            sup = q["L"]
        elif _line_sums(head, above_U)[1][1] <= 0:  # g' <= 0 up to U
            sup = q["U"]
        elif _line_sums(head, above_L)[1][1] < 0 < _line_sums(head, below_U)[1][0]:
            found = _min_g_float(head, float(above_L), float(below_U))
            if found is not None:
                sup = _q_of(found)
        measured = {"inf": _enclosed(inf), "sup": _enclosed(sup) if sup is not None else UNBOUNDED}
        return {k: m if m.bounded else UNBOUNDED for k, m in measured.items()}

    return ctx.once("line float", compute)


def _enclosed(interval: tuple[float, float]) -> Measured:
    """The midpoint of [low, high] within half its width (and the rounding of both)."""
    low, high = interval
    middle = (low + high) / 2
    return Measured(middle, _up((high - low) / 2 + 2 * U * abs(middle)))


# ..................................................................... the exact route


def _ball_between(low: Any, high: Any) -> Any:
    return flint.arb(low).union(flint.arb(high))


def line_exact(ctx: Context) -> tuple[Real, Real]:
    """(sup q_t, inf q_t) in balls at the working precision, from the exact ends (:func:`line_ends`): q_t at
    the ends, the sign of g' there, and the minimum of g between two tangents around a minimiser found by
    Newton's method in mpmath (the tangents' slopes certified in balls)."""

    def compute() -> tuple[Real, Real]:
        ends = line_ends(ctx)
        if ends.ends is None:
            return Real.of(0), Real.of(1)
        alpha, beta = ends.alpha, ends.beta
        A = [flint.arb(a) for a in alpha]

        def terms(h: Any) -> list[Any]:
            return [flint.arb(a * h + b).exp() for a, b in zip(alpha, beta, strict=True)]

        def g(h: Any) -> Any:
            return sum(terms(h), flint.arb(0))

        def slope(h: Any) -> Any:
            return sum((a * e for a, e in zip(A, terms(h), strict=True)), flint.arb(0))

        L, U_ = ends.ends
        qL, qU = 1 / g(L), 1 / g(U_)
        inf = _ball_between(min(qL.lower(), qU.lower()), min(qL.upper(), qU.upper()))
        sL, sU = slope(L), slope(U_)
        if sL >= 0:
            sup = qL
        elif sU <= 0:
            sup = qU
        elif sL < 0 and sU > 0:
            sup = _interior_sup(alpha, beta, L, U_, g, slope)
        else:
            sup = None
        if sup is None:  # where the minimiser lies is undecided here: at least the ends, at most 1
            sup = _ball_between(max(qL.lower(), qU.lower()), flint.arb(1))
        return Real(sup), Real(inf)

    return ctx.once(("line exact", flint.ctx.prec), compute)


def _interior_sup(
    alpha: list[Any], beta: list[Any], L: Any, U_: Any, g: Callable[[Any], Any], slope: Callable[[Any], Any]
) -> Any:
    """1/min g for a minimiser certified inside (L, U): Newton's method on g' in mpmath at the working
    precision (safeguarded by bisection), then h₁ < ĥ < h₂ with g'(h₁) < 0 < g'(h₂) in balls, and
    min g between min(g(h₁), g(h₂)) − (h₂ − h₁) min(|g'(h₁)|, g'(h₂)) and g(ĥ). ``None`` where no bracket
    is certified."""
    bits = flint.ctx.prec
    with mpmath.workprec(bits + 32):
        a = [mpmath.mpf(int(x.p)) / int(x.q) for x in alpha]
        b = [mpmath.mpf(int(x.p)) / int(x.q) for x in beta]
        low, high = mpmath.mpf(int(L.p)) / int(L.q), mpmath.mpf(int(U_.p)) / int(U_.q)
        h = (low + high) / 2
        for _ in range(bits + 64):
            e = [mpmath.exp(ai * h + bi) for ai, bi in zip(a, b, strict=True)]
            f = mpmath.fsum(ai * ei for ai, ei in zip(a, e, strict=True))
            fp = mpmath.fsum(ai * ai * ei for ai, ei in zip(a, e, strict=True))
            low, high = (h, high) if f < 0 else (low, h)
            step = h - f / fp
            if not low < step < high:
                step = (low + high) / 2
            if abs(step - h) <= mpmath.mpf(2) ** -(bits + 8) * (1 + abs(h)) or high - low <= mpmath.eps * abs(h):
                h = step
                break
            h = step
        sign, man, exponent, _ = mpmath.mpf(h)._mpf_  # (man_exp drops the sign)
    h_hat = (-1) ** sign * flint.fmpq(int(man)) * flint.fmpq(2) ** int(exponent)
    delta = flint.fmpq(1, 2 ** (bits // 2 + 8)) * max(flint.fmpq(1), abs(h_hat))
    for _ in range(40):
        h1, h2 = h_hat - delta, h_hat + delta
        s1, s2 = slope(h1), slope(h2)
        if s1 < 0 and s2 > 0:
            g1, g2 = g(h1), g(h2)
            steepness = min((-s1).upper(), s2.upper())
            lower = (flint.arb(min(g1.lower(), g2.lower())) - flint.arb(h2 - h1) * flint.arb(steepness)).lower()
            return 1 / _ball_between(max(lower, flint.arb(1).lower()), g(h_hat).upper())
        delta *= 4
    return None


def _reference_line(ctx: Context) -> tuple[Any, Any]:
    """(sup q_t, inf q_t) the slow way: the ends in Fractions, q_t in mpmath at the ends and, when g' changes
    sign between them, at its root found by bisection."""

    def compute() -> tuple[Any, Any]:
        head = line_instance(ctx)
        w = [Fraction(float(x)) for x in head.w]
        b = [Fraction(float(x)) for x in head.b]
        t = head.t
        pairs = [(w[x] - w[t], b[x] - b[t]) for x in range(len(w)) if x != t]
        if any(a == 0 and c >= 0 for a, c in pairs):
            return mpmath.mpf(0), mpmath.mpf(1)
        L = max(-c / a for a, c in pairs if a < 0)
        U_ = min(-c / a for a, c in pairs if a > 0)
        if L >= U_:
            return mpmath.mpf(0), mpmath.mpf(1)
        everything = [(mpmath.mpf(0), mpmath.mpf(0))] + [(_mp(a), _mp(c)) for a, c in pairs]

        def q(h: Any) -> Any:
            return 1 / mpmath.fsum(mpmath.exp(a * h + c) for a, c in everything)

        def derivative(h: Any) -> Any:
            return mpmath.fsum(a * mpmath.exp(a * h + c) for a, c in everything)

        low, high = _mp(L), _mp(U_)
        ends = min(q(low), q(high))
        if derivative(low) >= 0:
            return q(low), ends
        if derivative(high) <= 0:
            return q(high), ends
        # bisection on g' to within 2^-(p/2 + 8) of the root: q is flat there, off by its square
        while high - low > mpmath.mpf(2) ** -(mpmath.mp.prec // 2 + 8) * (1 + abs(low)):
            middle = (low + high) / 2
            low, high = (middle, high) if derivative(middle) < 0 else (low, middle)
        return q((low + high) / 2), ends

    return ctx.once(("line reference", mpmath.mp.prec), compute)


middle_top1_sup = _quantity(
    "sup q_t",
    lambda ctx: line_float(ctx)["sup"],
    lambda ctx: line_exact(ctx)[0],
    reads=(LineHeadCase,),
    reference=lambda ctx: _reference_line(ctx)[0],
    follows_backend=False,
    doc="the largest top-1 probability a token t of a slope strictly between two others (a D = 1 head with a "
    "bias) has where it is the "
    "strict argmax (0 where it never is)",
    exact_doc="1/min g between two certified tangents where the minimiser of g lies inside (L, U), else q_t at "
    "the nearer end; balls from the exact ends",
)
middle_top1_inf = _quantity(
    "inf q_t",
    lambda ctx: line_float(ctx)["inf"],
    lambda ctx: line_exact(ctx)[1],
    reads=(LineHeadCase,),
    reference=lambda ctx: _reference_line(ctx)[1],
    follows_backend=False,
    doc="the smallest top-1 probability the token t approaches where it is the strict argmax (1 where "
    "it never is): min(q_t(L), q_t(U)), approached, not attained",
    exact_doc="balls of q_t at the exact rational ends L and U",
)


# --------------------------------------------------------------------------- the vocabulary


def _vocabulary(ctx: Context) -> Interval:
    """The tokens of the case's head or model: the rows of an argmax head (planted rows included), else V."""
    V = len(argmax_head(ctx.case)) if isinstance(ctx.case, ArgmaxHeadCase) else int(ctx.case.V)
    return _count(V, V, "the case", "the case", True)


vocabulary = _quantity(
    "V",
    _vocabulary,
    _vocabulary,
    reads=(GibbsCase, Top1Case, TangentCase, ArgmaxHeadCase, LineHeadCase),
    reference=lambda ctx: len(argmax_head(ctx.case)) if isinstance(ctx.case, ArgmaxHeadCase) else int(ctx.case.V),
    integer=True,
    doc="the number of tokens: V, or the rows of an argmax head (planted interior and duplicated rows included)",
    exact_doc="the case's V, or the head's rows",
)
#: The number of rows of an argmax head (the same quantity as :data:`vocabulary`).
head_size = vocabulary


# --------------------------------------------------------------------------- where the claims range


def _line_witnesses(V: int) -> list[LineHeadCase]:
    """The smallest V = 3 in each shape (tangent lines spread wide, concurrent lines with and without a
    jitter, Gaussian biases), and the same at n = min(V, 256) (at least 3), with the tokens next to the
    extreme slopes; beyond 256, one tangent head at V itself."""
    n = max(3, min(V, 256))
    at_V = [LineHeadCase(V=V, shape="tangent", seed=4, scale=100.0)] if V > 256 else []
    return [
        LineHeadCase(V=3, shape="tangent", seed=0, scale=10.0),
        LineHeadCase(V=3, shape="concurrent", seed=0),
        LineHeadCase(V=3, shape="concurrent", seed=1, jitter=1e-9),
        LineHeadCase(V=3, shape="gaussian", seed=2),
        LineHeadCase(V=n, shape="tangent", seed=0, scale=100.0),
        LineHeadCase(V=n, shape="tangent", seed=1, token=1),
        LineHeadCase(V=n, shape="concurrent", seed=2, jitter=1e-3, token=n - 2),
        LineHeadCase(V=n, shape="gaussian", seed=3, scale=10.0),
        *at_V,
    ]


def _gibbs_witnesses(V: int) -> list[GibbsCase]:
    """Zipfian languages at min(V, 512), and the edges at any V: the smallest sizes (V = 2, 3; one or
    three contexts), every row one-hot (CE(Ñ) = 0, seed 2), P = Ñ, and logits of scale 400, whose
    model probabilities fall below the normal range; beyond 512, one language at V itself."""
    at_V = [GibbsCase(V=V, contexts=64, seed=3, scale=5.0)] if V > 512 else []
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
        *at_V,
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
    (V = D + 1: every row a vertex) and heads with duplicated rows (ties); beyond 300, one head of V rows
    in the plane (qhull's hull, each answer re-checked exactly)."""
    at_V = [ArgmaxHeadCase(V=V, D=2, seed=3, interior=3)] if V > 300 else []
    return (
        [
            ArgmaxHeadCase(V=max(min(V, 300), D + 3), D=D, seed=s, interior=k)
            for D in (2, 3, 5)
            for s in (0, 1)
            for k in (0, 3)
        ]
        + [ArgmaxHeadCase(V=D + 1, D=D, seed=0) for D in (2, 3, 5)]
        + [ArgmaxHeadCase(V=max(min(V, 300), D + 3), D=D, seed=2, interior=1, twins=2) for D in (2, 3)]
        + at_V
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
    """Tangent heads at V = 2, 3 and V itself, two seeds each (the windowed screen is O(V) after a sort)."""
    return [TangentCase(V=v, seed=s) for v in sorted({2, 3, V}) for s in (0, 1)]


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

LINE_BOUNDARY = {
    "V = 3": lambda c: c.V == 3,
    "tangent lines spread wide (slopes of scale >= 10)": lambda c: c.shape == "tangent" and c.scale >= 10,
    "concurrent lines (every token tied at one h)": lambda c: c.shape == "concurrent" and c.jitter == 0,
    "concurrent lines jittered (the token nearly tied)": lambda c: c.shape == "concurrent" and c.jitter > 0,
    "Gaussian biases": lambda c: c.shape == "gaussian",
    "a token next to an extreme slope": lambda c: c.token in (1, c.V - 2),
}

#: Where the claims of this family range (the public API): Gibbs cases (counts and model logits), circle
#: witnesses, D = 1 tangent heads, Gaussian heads without bias for the argmax claims, and D = 1 heads
#: with a bias for the negative result.
#: Measured 7,008 and 1,340 bytes per entry at V = 131,072 (gibbs, argmaxable-vs-hull), rounded up by a quarter.
gibbs_cases = Cases(
    gibbs_instances, _gibbs_witnesses, _random_gibbs, GIBBS_BOUNDARY, family=FAMILY, bytes_per_entry=9_000
)
top1_cases = Cases(expressivity_instances, _top1_witnesses, boundary=TOP1_BOUNDARY, family=FAMILY)
tangent_cases = Cases(
    lambda: expressivity_instances(tangent=True), _tangent_witnesses, boundary=TANGENT_BOUNDARY, family=FAMILY
)
argmax_heads = Cases(
    lambda: argmax_instances(), _argmax_witnesses, boundary=ARGMAX_BOUNDARY, family=FAMILY, bytes_per_entry=1_700
)
line_heads = Cases(line_head_instances, _line_witnesses, boundary=LINE_BOUNDARY, family=FAMILY)


# --------------------------------------------------------------------------- the claims

gibbs = declare(
    "expressivity.gibbs",
    source=f"{SEED_000}, Prop. A.2 (App. A.2)",
    title="The cross-entropy is minimised exactly at the empirical distribution",
    statement="CE(Ñ) ≤ CE(P), the excess being CE(P) − CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c) ≥ 0, with equality at P = Ñ",
    domain="Zipfian count matrices, P a softmax of Gaussian logits (or Ñ itself)",
    lhs=cross_entropy_model,
    relation=">=",
    rhs=cross_entropy_empirical,
    cases=gibbs_cases,
)
gibbs.with_mutant(
    "uniform-minimises",
    statement="CE(U) ≤ CE(P): the uniform distribution minimises the cross-entropy  (false: CE(Ñ) < log V = CE(U))",
    rhs=log(vocabulary),
)
gibbs.with_mutant(
    "unweighted-kl",
    statement="CE(P) − CE(Ñ) = Σ_c KL(Ñ_c ‖ P_c), the contexts unweighted  (false: the frequencies f_c weigh each KL)",
    lhs=cross_entropy_model - cross_entropy_empirical,
    relation="==",
    rhs=unweighted_kl,
)
top1_witness = declare(
    "expressivity.top1-witness",
    source=f"{SEED_000}, Prop. A.4 (App. A.2; proof in B.1)",
    title="At D ≥ 2 any argmax and any top-1 probability are reachable without a bias",
    statement="for targets t_c and probabilities p_c ∈ (1/V, 1), the circle witness (H, W) fails in 0 contexts: "
    "t_c is the strict argmax and |top-1 − p_c| ≤ ε in every one",
    domain="float64, V up to 131,072 (float32 loses the argmax near V ≈ 49,152: docs/expressivity.md)",
    lhs=witness_failures,
    relation="==",
    rhs=0,
    cases=top1_cases,
)
top1_witness.with_mutant(
    "exact-probability",
    statement="the circle witness reaches every top-1 probability p_c exactly (ε = 0)  (false: the exact top-1 "
    "probability is transcendental, the bisection gets within ε)",
    lhs=top1_error,
    witnesses=lambda V: [Top1Case(V=v, D=2, contexts=4, seed=0, eps=1e-6) for v in (3, min(V, 64))],
)
top1_witness.with_mutant(
    "d1-without-bias",
    statement="every token is the strict argmax of some h at D = 1 without a bias  (false for V ≥ 3: interior "
    "weights never win)",
    lhs=never_argmax_without_bias,
    cases=replace(tangent_cases, witnesses=lambda V: [TangentCase(V=v, seed=0) for v in sorted({3, min(V, 64)})]),
)
d1_bias = declare(
    "expressivity.d1-bias-argmax",
    source=f"{SEED_000}, App. B.1 (the D ≥ 2 requirement); rankwall (the bias case)",
    title="With a bias, D = 1 makes every token the argmax",
    statement="for the tangent head z_v(h) = w_v h − w_v²/2, 0 tokens t fail to be the strict argmax at h = w_t",
    domain="distinct weights w_v, V ≥ 2, the head as constructed in float64",
    lhs=tangent_losses,
    relation="==",
    rhs=0,
    cases=tangent_cases,
)
d1_bias.with_mutant(
    "without-bias",
    statement="the tangent slopes alone, z_v(h) = w_v h, make every token t the strict argmax at h = w_t  (false: "
    "only the extreme weights win)",
    lhs=slope_losses,
    witnesses=lambda V: [TangentCase(V=v, seed=0) for v in sorted({3, min(V, 64)})],
)
#: The threshold 1/V + 1/(4V²) of EX.3 item 4, as a quantity of the case.
LOW_TOP1 = 1 / vocabulary + 1 / (4 * vocabulary**2)
d1_top1_fails = declare(
    "expressivity.d1-top1-fails",
    source="rankwall (Theorem EX.3 item 4: why seed 000 §2.1 asks for D ≥ 2, even with a bias)",
    title="At D = 1 the top-1 probabilities of Prop. A.4 are out of reach, even with a bias",
    statement="for a D = 1 head with a bias and V ≥ 3, a token t of a weight strictly between two others "
    "(w_u < w_t < w_v) is not the strict argmax both with a top-1 probability ≥ 3/4 and with one ≤ "
    "1/V + 1/(4V²): sup q_t < 3/4 or inf q_t ≥ 1/V + 1/(4V²), over the h where t is the strict argmax "
    "(stated as max(inf q_t, 1/V + 1/(4V²) + 3/4 − sup q_t) ≥ 1/V + 1/(4V²))",
    domain="D = 1 heads with a bias (tangent, concurrent and Gaussian lines), V ≥ 3, a token of a weight "
    "strictly between two others",
    lhs=maximum(middle_top1_inf, LOW_TOP1 + Fraction(3, 4) - middle_top1_sup),
    relation=">=",
    rhs=LOW_TOP1,
    cases=line_heads,
)
d1_top1_fails.with_mutant(
    "reaches-3/4-and-1/2",
    statement="a token of a weight strictly between two others is not the strict argmax both with a top-1 "
    "probability ≥ 3/4 and with one ≤ 1/2  (false: on tangent lines spread wide it reaches nearly 1 at "
    "h = w_t, and less than 1/2 near a tie)",
    lhs=maximum(middle_top1_inf, Fraction(1, 2) + Fraction(3, 4) - middle_top1_sup),
    rhs=Fraction(1, 2),
)
argmax_vs_hull = declare(
    "expressivity.argmaxable-vs-hull",
    default_V=32,  # an exact certificate per token (an LP each); --V runs any size
    source="seed 001 ('Stolen Probability', Demeter et al. 2020; Grivas et al. 2022)",
    title="Without a bias, a token is argmaxable exactly when it is a vertex of the convex hull",
    statement="the LP pipeline's certified answers disagree with the vertices of conv{w_v} (qhull) on 0 tokens, "
    "a row that two tokens share being a vertex of neither (they tie wherever it is largest)",
    domain="Gaussian heads without bias, D = 2..6, V ≥ D + 1, with or without planted interior and duplicated rows",
    lhs=hull_disagreements,
    relation="==",
    rhs=0,
    cases=argmax_heads,
)
argmax_vs_hull.with_mutant(
    "every-token-argmaxable",
    statement="every token of every head is argmaxable  (false: a row inside the convex hull never wins)",
    lhs=unargmaxable_tokens,
    witnesses=lambda V: [ArgmaxHeadCase(V=50, D=3, seed=0, interior=2)],
)

#: The theorems and lemmas of ``docs/expressivity.md`` (collected by ``checks/companion/fidelity.py``).
_TESTS = "tests/test_expressivity.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "thm-gibbs",
        "EX.1",
        "expressivity",
        "seed 000, Prop. A.2 (statement lost)",
        Kind.RECONSTRUCTED,
        ("expressivity.gibbs",),
        (_TESTS + "TestGibbs", _TESTS + "TestGibbsCanFail"),
    ),
    Statement(
        "thm-top1",
        "EX.2",
        "expressivity",
        "seed 000, §2.1, Prop. A.4 (statement lost), B.1",
        Kind.RECONSTRUCTED,
        ("expressivity.top1-witness",),
        (_TESTS + "TestCircleWitness", _TESTS + "TestTop1WitnessCanFail"),
        "exact top-1 probability on (1/V, 1); epsilon only at 1",
    ),
    Statement(
        "thm-d1",
        "EX.3",
        "expressivity",
        'seed 000, §2.1 ("when D >= 2")',
        Kind.NEW,
        ("expressivity.d1-bias-argmax", "expressivity.d1-top1-fails"),
        (
            _TESTS + "TestDimensionOne",
            _TESTS + "TestD1BiasArgmaxCanFail",
            _TESTS + "TestDimensionOneTopOneRange",
            _TESTS + "TestD1Top1Fails",
        ),
        "V = 2 needs D = 1; for V >= 3, D = 1 fails with or without a bias: at most two tokens reach both 3/4 "
        "and 1/V + 1/(4V^2)",
    ),
    Statement(
        "thm-argmaxable",
        "EX.4",
        "expressivity",
        'seed 001, "What happened to the idea"',
        Kind.NEW,
        ("expressivity.argmaxable-vs-hull",),
        (_TESTS + "TestArgmaxableTokens", _TESTS + "TestCertifiedArgmax", _TESTS + "TestArgmaxableVsHullCanFail"),
    ),
)
