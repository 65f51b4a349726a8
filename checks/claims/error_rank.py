"""Claims ``error-rank.*``: the rank of the prediction error P − Ñ (seed 000, App. A.3), declared over
this family's quantities. The log-probability ranks (``logprob-rank.*``) are
:mod:`rankwall.checks.claims.logprob_rank`.

The exact object. Every quantity of a context measures, evaluates exactly and references the same
object, which each kind of case fixes:

- a *unique-continuation* case (synthetic, or the n-gram contexts of a shipped corpus): the factors H
  and W as the context's backend holds them (rounded to its dtype), read exactly; the logits
  Z = HWᵀ of those factors, exactly; P = softmax(Z), exactly (positive everywhere, each row summing
  to 1, whatever underflows in floating point); the k unique rows c_j, with Ñ_{c_j} = e_{t_j}. The
  float route measures rank(P − Ñ) over those rows in the backend, with error bounds that include
  the backend's rounding of the products HWᵀ; the exact route re-decides the same P from the same
  factors without factorizing anything: the dominance margins (or the positivity floor) in float64
  arithmetic with their own error bounds, then the margins in 256-bit balls. The mutant ``float-rows``
  is about another object, on purpose, and says so: P̂, the NumPy float64 softmax of the factors as
  computed, read exactly and normalised exactly (its zeros are the underflowed entries);
- a *stochastic pattern*: the integer weights w of the constructor; P_T = w normalised by its row
  totals (rationals), the graph of its positive entries, its attracting and strongly connected
  components;
- a *weakly chained diagonally dominant pattern*: the integer matrix M = diag(w·1 + leak) − W of the
  constructor (a substochastic pattern whose leaking rows lose mass), and the same pattern with no
  leaking row, diag(w·1) − W;
- a *mini-batch*: the integer counts of the Zipfian language and of its batch, δ read exactly (a
  dyadic rational), Ñ and Ñ^B the rows of counts over their totals, P = (1 − δ)Ñ + δ/V, C^u_B (one
  context per distinct token that is the only batch continuation of a context with several tokens in
  the data) and T_B its batch tokens: all rationals, so every quantity is exact (integer rows scaled
  by d·V·T_c, δ = n/d).

Every rank is an integer quantity, certified as an interval lo <= rank <= hi
(:class:`~rankwall.checks.engine.quantities.Interval`), never read off a thresholded SVD alone. Lower ends:
strict diagonal dominance (margins streamed from the logits, O(V) per row, with a relative error
below 1), positivity of a stochastic matrix, singular values above a Weyl margin, a rank mod p
(exact), margins in balls. Upper ends: structure (the number of rows; the kernel vector 1 of
P − Ñ, whose rows sum to 0 exactly), or an exact rank over the rationals (python-flint). A verdict
is ``exact`` when the rank is pinned by ends free of rounding, ``two-sided`` when one end comes from
the rounding model or balls, ``one-sided`` when one end decides alone.

Domains. A case outside a claim's hypothesis is no instance of it: the claim's ``domain=``
predicate (a weakly chained diagonally dominant M; a batch with C^u_B nonempty and 0 < δ <= 1; for
the sign pattern, max|P − Ñ| < ν_B; for the limit, L weakly chained diagonally dominant with
‖E‖_F·‖L⁻¹‖_F < 1) names why, the search rejects it and ``verify`` counts it apart.

Each rank carries a continuous ``closeness`` in its certificate, for the search's ``target()``: how
near the certificate comes to losing the rank (larger is nearer, at most 0).
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "CorpusContinuations",
    "MiniBatch",
    "StochasticPattern",
    "UniqueContinuation",
    "WcddPattern",
    "attracting_classes",
    "batch_error_rank",
    "batch_unique_contexts",
    "closed_batches",
    "complete_continuations",
    "converged_batches",
    "defect_rank",
    "float_rows_error_rank",
    "limit_batches",
    "limit_block_rank",
    "mini_batches",
    "no_leak_rank",
    "order",
    "prediction_error_rank",
    "sign_flips",
    "sign_flips_everywhere",
    "stochastic_patterns",
    "strong_components",
    "unique_continuations",
    "unique_tokens",
    "vocabulary",
    "wcdd_patterns",
    "wcdd_rank",
]

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar

import array_api_compat
import flint
import numpy as np
import scipy.sparse as sparse
from hypothesis import strategies as st

from rankwall.checks import exact
from rankwall.checks.companion.data import characters, read_corpus, words
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import float64_copy
from rankwall.checks.engine.quantities import Context, declare, minimum, quantity
from rankwall.checks.engine.statements import Kind, Statement
from rankwall.checks.engine.toolkit import Cases
from rankwall.checks.engine.verdict import Case, OutsideDomain, RankInterval
from rankwall.theory import error_rank as er
from rankwall.theory.validation import InputError, check_integer_in

#: The family's name: the prefix of its claim ids, and what its quantities and cases belong to.
FAMILY = "error-rank"

# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class UniqueContinuation(Case):
    """k contexts with distinct unique continuations among V tokens, logits HWᵀ of rank D
    (:func:`rankwall.theory.error_rank.construct_unique_continuation`)."""

    KIND: ClassVar[str] = "unique-continuation"
    V: int
    k: int
    D: int
    seed: int = 0
    scale: float = 1.0


@dataclass(frozen=True)
class CorpusContinuations(Case):
    """The unique continuations of the n-gram contexts of a shipped corpus, logits of rank D."""

    KIND: ClassVar[str] = "corpus"
    corpus: str = "tinyshakespeare.txt"
    level: str = "char"
    order: int = 3
    D: int = 16
    seed: int = 0
    scale: float = 1.0

    @property
    def vocabulary(self) -> int:
        """The corpus's vocabulary size (65 for tinyshakespeare's characters), read once per process."""
        return corpus_unique_tokens(self.corpus, self.level, self.order)[0]


@dataclass(frozen=True)
class StochasticPattern(Case):
    """A row-stochastic n x n pattern with ``closed`` attracting classes (integer weights), holding
    ``recurrent`` states (0: a drawn number, dense weights; else sparse weights, any n up to 2^24)."""

    KIND: ClassVar[str] = "stochastic"
    n: int
    closed: int = 1
    seed: int = 0
    density: float = 0.2
    recurrent: int = 0


@dataclass(frozen=True)
class WcddPattern(Case):
    """diag(w) - W of an n x n pattern with one closed class, ``leaks`` of whose rows leak mass; the
    class holds ``recurrent`` states (0: a drawn number, as :class:`StochasticPattern`)."""

    KIND: ClassVar[str] = "wcdd"
    n: int
    leaks: int = 1
    seed: int = 0
    density: float = 0.1
    recurrent: int = 0


@dataclass(frozen=True)
class MiniBatch(Case):
    """A Zipfian language over V tokens and ``contexts`` contexts, a batch of ``batch_tokens``
    drawn without replacement, and P = (1 - δ)Ñ + δ/V (δ near 0: near convergence; δ = 1: P uniform)."""

    KIND: ClassVar[str] = "batch"
    V: int
    contexts: int
    seed: int = 0
    unique_share: float = 0.3
    batch_tokens: int = 400
    delta: float = 1e-3


#: The cases of the unique-continuation claim: synthetic, or from a corpus.
UniqueCase = UniqueContinuation | CorpusContinuations

# --------------------------------------------------------------------------- strategies


# The strategies choose among tiers uniformly (st.integers favours its low end, and st.one_of of
# st.just values their first, far beyond a fair share): the smallest sizes, the edges of a statement
# (k = V, every state closed, a batch far from convergence) and the bulk each get the share their
# weight gives them, the boundary classes that ``tests/test_boundaries.py`` measures. Hypothesis
# shrinks a tier choice towards the first tier, and values within a tier towards its low end.


def uniform(low: int, high: int) -> st.SearchStrategy[int]:
    """An integer in [low, high], uniformly."""
    return st.sampled_from(range(low, high + 1))


def tiered(draw: Any, tiers: list[tuple[int, st.SearchStrategy[Any]]]) -> Any:
    """A value drawn from one of ``tiers`` = [(weight, strategy)] (weights of 0 skipped), chosen with
    probability proportional to its weight."""
    choice = draw(uniform(0, sum(weight for weight, _ in tiers) - 1))
    for weight, strategy in tiers:
        if choice < weight:
            return draw(strategy)
        choice -= weight
    raise AssertionError("unreachable: the choice lies below the total weight")


def sizes(draw: Any, low: int, largest: int) -> int:
    """An order, a number of rows or of columns: ``low`` to 3 in a third of the draws, else up to ``largest``."""
    return tiered(draw, [(1, uniform(low, 3)), (2, uniform(4, largest))])


@st.composite
def unique_continuation_instances(draw: Any, k_equals_V: bool = False) -> UniqueContinuation:
    """k contexts with distinct unique continuations, logits of rank D, scales up to 1000 (large scales
    underflow the float64 margins). V = 2 or 3 in 3 draws of 20, up to 40 in 11, up to 600 in 5 (mostly
    small: the dense route costs), 4096 or 131,072 in 1; k = 1, V − 1 (where min(k, V − 1) = k = V − 1)
    or V (no mass outside T; V <= 600) in a sixth each; D = 1 in a tenth."""
    if k_equals_V:
        V = k = tiered(draw, [(1, uniform(2, 3)), (4, st.integers(4, 600))])
    else:
        large = st.sampled_from([4096, 131072])
        V = tiered(draw, [(3, uniform(2, 3)), (11, uniform(4, 40)), (5, st.integers(41, 600)), (1, large)])
        top = min(V, 256)
        k = tiered(
            draw, [(1, st.just(1)), (1, st.just(min(V - 1, top))), (int(V <= 600), st.just(V)), (3, uniform(1, top))]
        )
    return UniqueContinuation(
        V=V,
        k=k,
        D=tiered(draw, [(1, st.just(1)), (9, uniform(1, 32))]),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([0.1, 1.0, 10.0, 100.0, 1000.0])),
    )


@st.composite
def corpus_instances(draw: Any) -> CorpusContinuations:
    """Unique continuations of n-gram contexts in tinyshakespeare (character level)."""
    return CorpusContinuations(
        corpus="tinyshakespeare.txt",
        level="char",
        order=draw(uniform(1, 4)),
        D=draw(uniform(1, 16)),
        seed=draw(st.integers(0, 2**16)),
        scale=draw(st.sampled_from([0.5, 5.0])),
    )


@st.composite
def stochastic_instances(draw: Any) -> StochasticPattern:
    """Stochastic patterns of order up to 40 (1 to 3 in a third) with one closed class, every state
    closed (in a quarter each), or any number in between; density 0 (cycles and chains only) in a quarter;
    sparse weights (a number of recurrent states given, the route of the patterns at n = V) in a quarter."""
    n = sizes(draw, 1, 40)
    closed = tiered(draw, [(1, st.just(1)), (1, st.just(n)), (2, uniform(1, n))])
    return StochasticPattern(
        n=n,
        closed=closed,
        seed=draw(st.integers(0, 2**16)),
        density=tiered(draw, [(1, st.just(0.0)), (3, st.floats(0, 0.6))]),
        recurrent=tiered(draw, [(3, st.just(0)), (1, uniform(closed, n))]),
    )


@st.composite
def wcdd_instances(draw: Any) -> WcddPattern:
    """Weakly chained diagonally dominant patterns of order up to 40 (1 to 3 in a third): one leaking
    row (the longest chains), every closed row leaking (in a quarter each), or in between; density 0 in
    a quarter; sparse weights (the closed class's size given) in a quarter."""
    n = sizes(draw, 1, 40)
    return WcddPattern(
        n=n,
        leaks=tiered(draw, [(1, st.just(1)), (1, st.just(n)), (2, uniform(1, n))]),
        seed=draw(st.integers(0, 2**16)),
        density=tiered(draw, [(1, st.just(0.0)), (3, st.floats(0, 0.5))]),
        recurrent=tiered(draw, [(3, st.just(0)), (1, uniform(1, n))]),
    )


#: δ near convergence (P close to Ñ) and far from it (P = uniform at δ = 1).
NEAR_DELTAS, FAR_DELTAS = (1e-2, 1e-4, 1e-8), (0.25, 0.9, 1.0)


@st.composite
def batch_instances(draw: Any, far: bool = True) -> MiniBatch:
    """Zipfian languages over 2 to 400 tokens (2 or 3 in a quarter, up to 16 in another), 20 to 300
    contexts, batches of 1 to 5 tokens (few contexts in C^u_B) in a quarter, else up to twice as many
    tokens as contexts; δ near convergence (1e-2, 1e-4, 1e-8), and with ``far`` as often far from it
    (1/4, 0.9, 1: P uniform)."""
    V = tiered(draw, [(1, uniform(2, 3)), (1, uniform(4, 16)), (2, uniform(17, 400))])
    contexts = draw(uniform(20, 300))
    delta = tiered(draw, [(1, st.sampled_from(NEAR_DELTAS)), (int(far), st.sampled_from(FAR_DELTAS))])
    return MiniBatch(
        V=V,
        contexts=contexts,
        seed=draw(st.integers(0, 2**16)),
        unique_share=draw(st.floats(0, 0.6)),
        batch_tokens=tiered(draw, [(1, uniform(1, 5)), (3, uniform(10, 2 * contexts))]),
        delta=delta,
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"

#: Largest k x V for which the dense SVD route (route 3) runs.
DENSE_ENTRIES = 1 << 18

#: Largest k x V for which the exact rank of the float rows P̂ − Ñ (the float-rows mutant) is computed.
EXACT_ENTRIES = 1 << 14


# --------------------------------------------------------------------------- certified ranks


def with_closeness(bounds: RankInterval, closeness: float) -> RankInterval:
    """``bounds`` with ``closeness`` in its certificate: a continuous measure of how near the instance
    is to a violation (larger is nearer; the search's ``target()`` for an integer bound)."""
    return replace(bounds, certificate={**bounds.certificate, "closeness": float(closeness)})


def pinned(n: int, how: str) -> RankInterval:
    """An integer known exactly (a count, a size): the interval [n, n]."""
    return RankInterval(int(n), int(n), how, how, exact=True)


def exact_rank_interval(M: np.ndarray, certificate: dict[str, Any] | None = None) -> RankInterval:
    """The exact rank of an integer matrix over the rationals (python-flint), as a pinned interval."""
    rank, how = exact.exact_rank(M)
    return RankInterval(int(rank), int(rank), how, how, True, dict(certificate or {}))


def integer_rows(M: np.ndarray) -> np.ndarray:
    """Each row of a float matrix times a power of two that makes it integral (Python ints): an
    exact rescaling of the rows of the dyadic rationals the floats are, so the rank is unchanged."""
    mantissa, exponent = np.frexp(np.asarray(M, dtype=np.float64))
    digits = (mantissa * 2.0**53).astype(np.int64).astype(object)
    exponent = np.where(mantissa == 0, np.iinfo(np.int32).max, exponent - 53)
    shifts = exponent - exponent.min(axis=1, keepdims=True)
    shifts = np.where(mantissa == 0, 0, shifts).astype(object)
    return digits << shifts


def label(x: Any) -> str:
    """Where an array was computed: its namespace's library and its dtype (``numpy float64``)."""
    library = array_api_compat.array_namespace(x).__name__.split(".")[-1].replace("_", "-")
    return f"{library} {tolerance.dtype_name(x.dtype)}"


# --------------------------------------------------------------------------- unique continuations


def unique_instance(case: UniqueCase) -> tuple[er.LogitRows, np.ndarray]:
    """(logits, tokens) of a unique-continuation case, synthetic or from a corpus (NumPy float64)."""
    match case:
        case UniqueContinuation():
            logits, tokens = er.construct_unique_continuation(case.V, case.k, case.D, case.seed, scale=case.scale)
        case CorpusContinuations():
            V, tokens = corpus_unique_tokens(case.corpus, case.level, case.order)
            logits, _ = er.construct_unique_continuation(V, len(tokens), case.D, case.seed, scale=case.scale)
        case _:
            raise InputError(f"instance: not a unique-continuation case: {case!r}")
    return logits, tokens


_STREAMS: dict[tuple[str, str], Any] = {}


@functools.cache
def corpus_unique_tokens(corpus: str, level: str, order: int) -> tuple[int, np.ndarray]:
    """(V, tokens): the vocabulary of a corpus and the tokens that are each the only continuation of some
    context of ``order`` tokens, counted once per process (read-only)."""
    stream = corpus_stream(corpus, level)
    _, tokens = er.unique_continuations(er.ngram_counts(stream.ids, order, stream.V)[0])
    tokens.flags.writeable = False
    return stream.V, tokens


def corpus_stream(corpus: str, level: str) -> Any:
    """A corpus read once per process (hash-verified) as characters or words."""
    key = (corpus, level)
    if key not in _STREAMS:
        text = read_corpus(corpus)
        _STREAMS[key] = characters(text) if level == "char" else words(text)
    return _STREAMS[key]


def built_logits(ctx: Context) -> tuple[er.LogitRows, np.ndarray]:
    """The case's factors as the context's backend holds them (rounded to its dtype), and its tokens."""

    def compute() -> tuple[er.LogitRows, np.ndarray]:
        logits, tokens = unique_instance(ctx.case)
        return er.LogitRows(ctx.backend.asarray(logits.H), ctx.backend.asarray(logits.W)), tokens

    return ctx.once("built logits", compute)


def exact_factors(ctx: Context) -> tuple[er.LogitRows, np.ndarray]:
    """The same factors read exactly, as NumPy float64 arrays (every float32 is a float64): the exact
    route computes from these, so it evaluates the backend's instance, not the float64 draw."""

    def compute() -> tuple[er.LogitRows, np.ndarray]:
        built, tokens = built_logits(ctx)
        return er.LogitRows(float64_copy(built.H), float64_copy(built.W)), tokens

    return ctx.once("exact factors", compute)


def logit_error(logits: er.LogitRows) -> np.ndarray:
    """Per context, a bound E_c on the error of the computed z_cv - max_v z_cv over v: γ_D S_c for
    the product and 2u(1 + γ_D) S_c for the subtraction, so γ_{D+3} S_c at the factors' unit roundoff u,
    with S_c = Σ_i |h_ci| max_v |w_vi| >= max_v |h_c|·|w_v| (O((k + V) D), never k x V)."""
    H, W = float64_copy(logits.H), float64_copy(logits.W)
    return tolerance.gamma(H.shape[1] + 3, tolerance.unit_roundoff(logits.H.dtype)) * (
        np.abs(H) @ np.abs(W).max(axis=0)
    )


def dense_rank_lower(logits: er.LogitRows, tokens: np.ndarray) -> tuple[int, float]:
    """Route 3: singular values of the computed P - Ñ (in the factors' namespace and dtype, unit roundoff
    u) above a Weyl margin. Each logit is off by E_c at most, which moves log P_cv by 2E_c; exp, the sum
    and the division add γ = γ_{V+4}; so a computed entry differs from the real one by at most
    e^{4E_c + 3γ} - 1 times itself (the real entry is at most e^{2E_c + 2γ} times the computed one).
    The SVD adds its backward error."""
    P = logits.probabilities(slice(None))
    xp = array_api_compat.array_namespace(P)
    k, V = P.shape
    chosen = np.zeros((k, V))
    chosen[np.arange(k), tokens] = 1
    M = P - xp.asarray(chosen, dtype=P.dtype, device=array_api_compat.device(P))
    u = tolerance.unit_roundoff(P.dtype)
    relative = np.expm1(4 * logit_error(logits) + 3 * tolerance.gamma(V + 4, u))
    entry_error = float(np.linalg.norm(relative[:, None] * float64_copy(P))) + u * float(
        np.linalg.norm(float64_copy(M))
    )
    return exact.weyl_rank_lower_bound(M, u, entry_error=entry_error)[:2]


def float_bounds(logits: er.LogitRows, tokens: np.ndarray, dense: bool = True) -> RankInterval:
    """rank(P - Ñ) over the k unique rows, for the real P = softmax(HWᵀ) of the given factors, from
    floats computed in the factors' namespace and dtype (unit roundoff u).

    Upper (exact): k rows, and (P - Ñ)1 = 0, so rank <= min(k, V - 1). Lower: route 1, k < V:
    the k x k submatrix is strictly diagonally dominant with margins α_j (the mass outside T),
    computed with relative error γ_{V+D+8} < 1, so a positive computed margin is a positive real
    one; k = V: every entry of P is at least exp(floor) > 0, so P_T is a positive stochastic matrix
    and rank(I - P_T) = V - 1. Route 3 when k V is small (and ``dense``): the SVD with a Weyl margin. ``closeness``
    is minus the smallest margin (k < V) or minus exp(floor) (k = V): how near the rows come to
    losing the positivity the lower end rests on."""
    k, V = len(tokens), logits.shape[1]
    u = tolerance.unit_roundoff(logits.H.dtype)
    upper = min(k, V - 1)
    routes: dict[str, Any] = {}
    if k < V:
        margins = float64_copy(er.dominance_margins(logits, tokens))
        certified = bool(np.all(margins > 0)) and tolerance.gamma(V + logits.H.shape[1] + 8, u) < 1
        routes["dominance"] = k if certified else 0
        routes["smallest_margin"] = float(margins.min())
        routes["varah_sigma_min_bound"] = er.varah_bound(margins)
        routes["closeness"] = -float(margins.min())
    else:
        floor = er.log_probability_floor(er.LogitRows(float64_copy(logits.H), float64_copy(logits.W)))
        routes["positivity"] = V - 1 if math.isfinite(floor) else 0
        routes["log_probability_floor"] = floor
        routes["closeness"] = -math.exp(floor) if math.isfinite(floor) else 0.0
    names = ["strict diagonal dominance" if k < V else "positivity (one attracting class)"]
    lower = routes.get("dominance", routes.get("positivity", 0))
    if dense and k * V <= DENSE_ENTRIES:
        routes["svd_weyl"], routes["weyl_margin"] = dense_rank_lower(logits, tokens)
        names.append("SVD + Weyl margin")
        lower = max(lower, routes["svd_weyl"])
    how = f"{' / '.join(names)} ({label(logits.H)})"
    return RankInterval(lower, upper, how, "rows and (P - Ñ)1 = 0", False, routes)


def ball_bounds(logits: er.LogitRows, tokens: np.ndarray) -> RankInterval:
    """Route 1 in 256-bit balls, for margins that underflowed float64 (k < V): α_j is at least
    exp(z_o - z_max - 2E_j - log V), z_o the largest logit outside T and E_j the logit error, which
    is a positive real number however far below 2^-1074 it lies."""
    k, V = len(tokens), logits.shape[1]
    outside = np.ones(V, dtype=bool)
    outside[tokens] = False
    error = logit_error(logits)
    smallest = math.inf
    with exact.precision(256):
        for j in range(k):
            z = logits.block(slice(j, j + 1))[0]
            exponent = exact.ball(float(z[outside].max())) - exact.ball(float(z.max())) - 2 * exact.ball(error[j])
            bound = (exponent - exact.ball(float(V)).log()).exp()
            if exact.sign(bound) != 1:
                return RankInterval(0, min(k, V - 1), "interval-256 (undecided)", "rows and (P - Ñ)1 = 0", False, {})
            smallest = min(smallest, float((bound.log() / exact.ball(math.log(10))).mid()))
    certificate = {"log10_smallest_margin_bound": smallest}
    return RankInterval(k, k, "interval-256 dominance margins", "rows and (P - Ñ)1 = 0", False, certificate)


def _measure_prediction_error_rank(ctx: Context) -> RankInterval:
    """rank(P − Ñ) from the float routes in the backend (:func:`float_bounds`)."""
    return float_bounds(*built_logits(ctx))


def _exact_prediction_error_rank(ctx: Context) -> RankInterval:
    """rank(P − Ñ) of the same P, from the factors read exactly and no factorization of anything: the
    dominance margins (k < V) or the positivity floor (k = V) in float64, each with its error bound, and
    where the margins underflow, the margins in 256-bit balls."""
    logits, tokens = exact_factors(ctx)
    bounds = float_bounds(logits, tokens, dense=False)
    if bounds.pinned or len(tokens) >= logits.shape[1]:
        return bounds
    return with_closeness(ball_bounds(logits, tokens), bounds.certificate["closeness"])


def float_rows_bounds(logits: er.LogitRows, tokens: np.ndarray) -> RankInterval:
    """The exact rank over Q of P̂ - Ñ, where P̂ is the computed float P read as dyadic rationals and
    normalised exactly (row c scaled by its total: the integer row p - (Σp) e_t). A rank mod p is a lower
    bound, the structure an upper one; fraction-free elimination settles a gap."""
    k, V = len(tokens), logits.shape[1]
    P = logits.probabilities(slice(None))
    rows = integer_rows(P)
    rows[np.arange(k), tokens] -= rows.sum(axis=1)
    upper = min(k, V - 1)
    certificate = {"zeros_in_float_P": int(np.sum(P == 0))}
    lower = exact.rank_mod_prime(rows)
    if lower == upper:
        return RankInterval(lower, upper, "rank mod p of P̂ - Ñ", "rows and (P̂ - Ñ)1 = 0", True, certificate)
    rank, how = exact.exact_rank(rows)
    return RankInterval(rank, rank, f"{how} of P̂ - Ñ", f"{how} of P̂ - Ñ", True, certificate)


def _float_rows_rank(ctx: Context) -> RankInterval:
    """rank(P̂ − Ñ) for the NumPy float64 rows P̂ of the case (its own object: see the module docstring)."""
    return ctx.once("float rows", lambda: float_rows_bounds(*unique_instance(ctx.case)))


def small_enough_for_float_rows(case: UniqueCase) -> str | None:
    """The float-rows mutant's domain: k V <= 2^14 (the exact rank of a dense k x V matrix)."""
    logits, tokens = unique_instance(case)
    if len(tokens) * logits.shape[1] > EXACT_ENTRIES:
        return (
            f"k x V = {len(tokens) * logits.shape[1]} is above {EXACT_ENTRIES}, too large for the exact rank of P̂ − Ñ"
        )
    return None


def _unique_counts(ctx: Context) -> tuple[int, int]:
    """(k, V) of a unique-continuation case, without building its factors."""
    case = ctx.case
    if isinstance(case, UniqueContinuation):
        return case.k, case.V
    V, tokens = corpus_unique_tokens(case.corpus, case.level, case.order)
    return len(tokens), V


# --------------------------------------------------------------------------- beyond positivity


def stochastic_weights(case: StochasticPattern) -> Any:
    """Integer weights whose row normalisation is P_T, with the instance's number of closed classes:
    a dense array, or a SciPy CSR array for a case with ``recurrent`` states given."""
    return er.construct_stochastic_with_classes(
        case.n, case.closed, case.seed, density=case.density, recurrent=case.recurrent
    )


def _weights(ctx: Context) -> Any:
    return ctx.once("weights", lambda: stochastic_weights(ctx.case))


def with_totals(weights: Any, extra: Any = 0) -> sparse.csr_array:
    """diag(w·1 + extra) − w, sparse int64: the rows of I − P_T times their totals (``extra``: mass
    that leaves the pattern)."""
    weights = sparse.csr_array(weights, dtype=np.int64)
    totals = np.asarray(weights.sum(axis=1)).ravel() + extra
    return (sparse.diags_array(totals, dtype=np.int64) - weights).tocsr()


def sparse_rank_interval(M: sparse.csr_array, certificate: dict[str, Any] | None = None) -> RankInterval:
    """The rank of a square integer matrix over the rationals through its block triangular form
    (:func:`rankwall.checks.exact.block_triangular_rank`): exact at both ends, pinned where every
    component left by a nonzero has a nonsingular diagonal block; below
    :data:`rankwall.checks.exact.DENSE_BLOCK_ORDER` states an unpinned interval is settled densely."""
    lower, upper, how = exact.block_triangular_rank(M)
    if lower != upper and M.shape[0] <= exact.DENSE_BLOCK_ORDER:
        return exact_rank_interval(M.toarray(), certificate)
    return RankInterval(lower, upper, how, how, True, dict(certificate or {}))


def _defect_rank(ctx: Context) -> RankInterval:
    """rank(I − P_T) exactly: its rows times their totals are the integer matrix diag(w·1) − w."""
    return sparse_rank_interval(with_totals(_weights(ctx)))


def _components(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    return ctx.once("components", lambda: er.graph_components(_weights(ctx)))


def _attracting_classes(ctx: Context) -> RankInterval:
    return pinned(int(_components(ctx)[1].sum()), "SciPy's strong components, the closed ones")


def _strong_components(ctx: Context) -> RankInterval:
    return pinned(len(_components(ctx)[1]), "SciPy's strong components")


def wcdd_matrix(case: WcddPattern, leaks: int | None = None) -> sparse.csr_array:
    """diag(w) - W (sparse int64) for a pattern with one closed class, some of whose rows leak mass
    (become strictly dominant): every row reaches the closed class, and inside it every row reaches
    a leak, so the matrix is weakly chained diagonally dominant. ``leaks`` overrides the
    instance's number of leaking rows (0: no row is strictly dominant)."""
    weights = er.construct_stochastic_with_classes(case.n, 1, case.seed, density=case.density, recurrent=case.recurrent)
    labels, closed_components = er.graph_components(weights)
    closed = np.flatnonzero(closed_components[labels])
    count = check_integer_in(case.leaks if leaks is None else leaks, "leaks", 0)
    leaking = np.random.default_rng(case.seed).choice(closed, size=min(count, len(closed)), replace=False)
    extra = np.zeros(case.n, dtype=np.int64)
    extra[leaking] = 1  # mass that leaves the token set: those rows become strictly dominant
    return with_totals(weights, extra)


def excess_closeness(M: Any) -> float:
    """Minus the smallest relative excess (|m_ii| − Σ_j≠i |m_ij|)/|m_ii| of a strictly dominant row (0
    where there is none): how near the chain's strict rows come to losing their dominance."""
    diagonal, off = er.row_dominance(M)
    strict = diagonal > off
    return -float(((diagonal - off)[strict] / diagonal[strict]).min()) if strict.any() else 0.0


def _matrix_rank(ctx: Context, leaks: int | None) -> RankInterval:
    M = ctx.once(("wcdd matrix", leaks), lambda: wcdd_matrix(ctx.case, leaks))
    return sparse_rank_interval(M, {"closeness": excess_closeness(M)})


def wcdd_case(case: Any) -> WcddPattern:
    """``case``, refused as input unless it is a WCDD pattern (the domain checks read its leaks)."""
    if not isinstance(case, WcddPattern):
        raise InputError(f"case: the WCDD claims read {WcddPattern.KIND} cases, not {type(case).__name__}")
    return case


def wcdd_hypothesis(case: WcddPattern) -> str | None:
    """The claim's domain, checked exactly on the integer matrix: M is weakly chained diagonally dominant."""
    case = wcdd_case(case)
    if not er.is_weakly_chained_diagonally_dominant(wcdd_matrix(case)):
        return "the matrix is not weakly chained diagonally dominant"
    return None


def no_leak_hypothesis(case: WcddPattern) -> str | None:
    """The mutant's domain: diag(w·1) − W weakly diagonally dominant, with no strictly dominant row."""
    case = wcdd_case(case)
    diagonal, off = er.row_dominance(wcdd_matrix(case, leaks=0))
    if not np.all(diagonal == off):
        return "the matrix without leaks is not weakly diagonally dominant with every row tight"
    return None


# --------------------------------------------------------------------------- mini-batches


@dataclass(frozen=True)
class BatchRows:
    """The rows of Prop. A.7 on C^u_B, as exact integers: ``error`` is (P - Ñ^B)[C^u_B] with row c
    scaled by d V T_c (P = (1 - δ)Ñ + δ/V, δ = n/d, T_c the count total), ``limit`` is
    (Ñ - Ñ^B)[C^u_B] scaled by T_c, ``support`` marks Ñ > 0; ``counts`` and ``totals`` are the data
    counts of those rows, ``tokens`` their batch tokens T_B."""

    error: np.ndarray
    limit: np.ndarray
    support: np.ndarray
    tokens: np.ndarray
    counts: np.ndarray
    totals: np.ndarray
    delta: Fraction


@functools.lru_cache(maxsize=1024)
def _language(V: int, contexts: int, seed: int, unique_share: float) -> Any:
    return er.construct_zipf_language(V, contexts, seed, unique_share=unique_share)


@functools.lru_cache(maxsize=1024)
def _batch_language(case: MiniBatch) -> tuple[Any, Any]:
    counts = _language(case.V, case.contexts, case.seed, case.unique_share)
    return counts, er.sample_batch(counts, case.batch_tokens, case.seed)


def batch_language(case: MiniBatch) -> tuple[Any, Any]:
    """The counts of the case's Zipfian language and of its batch (SciPy CSR; fresh copies of a per-process
    cache: the language is drawn by a loop over its contexts)."""
    counts, batch = _batch_language(case)
    return counts.copy(), batch.copy()


def batch_unique_count(case: MiniBatch) -> int:
    """|C^u_B| of the case."""
    return len(er.batch_unique_continuations(*batch_language(case))[1])


def batch_domain(case: MiniBatch) -> str | None:
    """Where every mini-batch claim ranges: C^u_B nonempty and 0 < δ <= 1 (so P > 0)."""
    if not 0 < Fraction(case.delta) <= 1:
        return f"δ = {case.delta} leaves P = (1 − δ)Ñ + δ/V outside the positive stochastic rows (0 < δ <= 1)"
    if batch_unique_count(case) == 0:
        return "C^u_B is empty (no context with one batch token and several data tokens)"
    return None


def batch_rows(case: MiniBatch) -> BatchRows:
    """The exact rows of a batch inside :func:`batch_domain` (else :class:`OutsideDomain`): fresh copies of
    a per-process cache (the three mini-batch claims read the same rows; a caller may change its copy)."""
    parts = _built_batch_rows(case)
    fresh = {f: getattr(parts, f).copy() for f in ("error", "limit", "support", "tokens", "counts", "totals")}
    return replace(parts, **fresh)


@functools.lru_cache(maxsize=8)
def _built_batch_rows(case: MiniBatch) -> BatchRows:
    why = batch_domain(case)
    if why is not None:
        raise OutsideDomain(f"instance: {why}")
    counts, batch = batch_language(case)
    rows, tokens = er.batch_unique_continuations(counts, batch)
    V, delta = case.V, Fraction(case.delta)
    n = counts[rows].toarray().astype(np.int64)
    totals = n.sum(axis=1)
    k = len(tokens)
    num, den = delta.numerator, delta.denominator
    scale = den * V * totals.astype(object)
    error = (den - num) * V * n.astype(object) + (num * totals.astype(object))[:, None]
    error[np.arange(k), tokens] -= scale
    limit = n.astype(object)
    limit[np.arange(k), tokens] -= totals.astype(object)
    return BatchRows(error, limit, n > 0, tokens, n, totals, delta)


def _batch(ctx: Context) -> BatchRows:
    return ctx.once("batch rows", lambda: batch_rows(ctx.case))


@functools.lru_cache(maxsize=1024)
def closeness_radius(case: MiniBatch) -> tuple[Fraction, Fraction]:
    """(ν_B, max|P − Ñ|) on C^u_B, exactly: ν_B the smallest positive entry of Ñ there, and
    |P − Ñ| = δ |1/V − Ñ_cv| over the values each row takes."""
    parts = batch_rows(case)
    nu = min(
        Fraction(int(row[row > 0].min()), int(total)) for row, total in zip(parts.counts, parts.totals, strict=True)
    )
    largest = Fraction(0)
    for row, total in zip(parts.counts, parts.totals, strict=True):
        values = {Fraction(int(x), int(total)) for x in np.unique(row)}
        largest = max(largest, *(parts.delta * abs(Fraction(1, case.V) - x) for x in values))
    return nu, largest


def sign_hypothesis(case: MiniBatch) -> str | None:
    """The sign claim's domain: the batch's, and max|P − Ñ| < ν_B on C^u_B (checked exactly)."""
    why = batch_domain(case)
    if why is not None:
        return why
    nu, largest = closeness_radius(case)
    if not largest < nu:
        return f"max|P − Ñ| = {float(largest):.3g} >= ν_B = {float(nu):.3g} (not close to convergence)"
    return None


@functools.lru_cache(maxsize=1024)
def limit_certificate(case: MiniBatch) -> tuple[bool, Fraction | None]:
    """(L weakly chained diagonally dominant, ‖E‖_F² ‖L⁻¹‖_F² or ``None``), exactly, for
    L = (Ñ − Ñ^B)[C^u_B, T_B] and E = (P − Ñ)[C^u_B, T_B] = δ(1/V − Ñ) there. Row scaling keeps the
    chain condition, so it is read off the integer rows; L⁻¹ is computed over the rationals."""
    parts = batch_rows(case)
    square = parts.limit[:, parts.tokens]
    if not er.is_weakly_chained_diagonally_dominant(square.astype(np.int64)):
        return False, None
    k = len(parts.tokens)
    totals = [int(t) for t in parts.totals]
    L = flint.fmpq_mat(k, k, [flint.fmpq(int(square[i, j]), totals[i]) for i in range(k) for j in range(k)])
    inverse = L.inv()
    inverse_squared = sum((x * x for x in inverse.entries()), flint.fmpq(0))
    # E_ij = δ(T_i − V n_ij)/(V T_i): ‖E‖_F² = (δ/V)² Σ_i s_i/T_i², s_i = Σ_j (T_i − V n_ij)² (integers)
    deviations = parts.totals.astype(object)[:, None] - case.V * parts.counts[:, parts.tokens].astype(object)
    row_sums = (deviations * deviations).sum(axis=1)
    e_squared = (parts.delta / case.V) ** 2 * sum(
        Fraction(int(s), t * t) for s, t in zip(row_sums, totals, strict=True)
    )
    product = Fraction(int(inverse_squared.p), int(inverse_squared.q)) * e_squared
    return True, product


def limit_hypothesis(case: MiniBatch) -> str | None:
    """The limit claim's domain: the batch's; L weakly chained diagonally dominant; ‖E‖_F ‖L⁻¹‖_F < 1,
    which gives ‖E‖₂ < σ_min(L) (both checked exactly)."""
    why = batch_domain(case)
    if why is not None:
        return why
    chained, product = limit_certificate(case)
    if not chained:
        return "the limit L = (Ñ − Ñ^B)[C^u_B, T_B] is not weakly chained diagonally dominant"
    if not product < 1:
        return f"‖E‖_F ‖L⁻¹‖_F = {math.sqrt(product):.3g} >= 1 (P not close enough to Ñ for the Weyl step)"
    return None


def closed_hypothesis(case: MiniBatch) -> str | None:
    """The no-chain mutant's domain: the sign claim's (closeness to convergence), and no chain condition."""
    return sign_hypothesis(case)


def _outside_mass(parts: BatchRows) -> np.ndarray:
    """α_c = Σ_{v ∉ T_B} P_cv on each row of C^u_B (float64: for the search's closeness only)."""
    outside = np.ones(parts.counts.shape[1], dtype=bool)
    outside[parts.tokens] = False
    delta = float(parts.delta)
    data = parts.counts[:, outside].sum(axis=1) / parts.totals
    return (1 - delta) * data + delta * outside.sum() / parts.counts.shape[1]


#: The prime of the batch rows' residues: below 2^31, so a residue times a count stays inside int64.
BATCH_PRIME = 2**31 - 1


def error_residues(parts: BatchRows, prime: int = BATCH_PRIME) -> np.ndarray:
    """The integer rows of P − Ñ^B (:class:`BatchRows`) reduced mod ``prime``, from the counts in int64:
    (d − n)V·n_cv + n·T_c, less d·V·T_c at the batch token (every residue and count below 2^31)."""
    num, den = parts.delta.numerator, parts.delta.denominator
    k, V = parts.counts.shape
    per_count = (den - num) * V % prime
    per_row = (num % prime) * (parts.totals % prime) % prime
    rows = (per_count * (parts.counts % prime) + per_row[:, None]) % prime
    at_token = (den * V % prime) * (parts.totals % prime) % prime
    rows[np.arange(k), parts.tokens] = (rows[np.arange(k), parts.tokens] - at_token) % prime
    return rows.astype(np.int64)


def _batch_error_rank(ctx: Context) -> RankInterval:
    """rank(P − Ñ^B) on C^u_B exactly: the rank mod a prime of the integer rows from below (a rank mod p is
    at most the rank), the rows and (P − Ñ^B)1 = 0 from above (P's rows sum to 1 exactly), fraction-free
    elimination for a gap. ``closeness``: minus the smallest mass of P outside T_B (0 where k_B = V)."""
    parts = _batch(ctx)
    k, V = parts.error.shape
    upper = min(k, V - 1)
    certificate = {"closeness": -float(_outside_mass(parts).min())}
    lower = exact.rank_mod_prime(error_residues(parts), BATCH_PRIME)
    if lower == upper:
        return RankInterval(lower, upper, "rank mod p", "rows and (P - Ñ^B)1 = 0", True, certificate)
    return exact_rank_interval(parts.error, certificate)


def _sign_flips(ctx: Context, everywhere: bool) -> RankInterval:
    """The entries of C^u_B's rows (where Ñ > 0, or ``everywhere``) at which the sign of P − Ñ^B differs
    from that of Ñ − Ñ^B, counted on the exact integer rows. ``closeness``: minus the relative margin
    (ν_B − max|P − Ñ|)/ν_B of the closeness hypothesis."""
    parts = _batch(ctx)
    mask = np.ones_like(parts.support) if everywhere else parts.support
    signs = np.sign(parts.error.astype(float)) != np.sign(parts.limit.astype(float))
    flips = np.argwhere(signs & mask)
    nu, largest = closeness_radius(ctx.case)
    certificate: dict[str, Any] = {"nu_B": float(nu), "max_abs_P_minus_N": float(largest)}
    certificate["closeness"] = -float((nu - largest) / nu)
    if len(flips):
        certificate["first_flip"] = [int(x) for x in flips[0]]
    return RankInterval(len(flips), len(flips), "sign count", "sign count", True, certificate)


def _limit_block_rank(ctx: Context) -> RankInterval:
    """rank((P − Ñ^B)[C^u_B, T_B]) exactly (the k_B x k_B block of the integer rows). ``closeness``:
    ‖E‖_F ‖L⁻¹‖_F − 1 where the limit is chained (the Weyl step's margin), else 0."""
    parts = _batch(ctx)
    chained, product = limit_certificate(ctx.case)
    closeness = math.sqrt(product) - 1 if chained and product is not None else 0.0
    return exact_rank_interval(parts.error[:, parts.tokens], {"closeness": closeness, "limit_is_wcdd": chained})


# --------------------------------------------------------------------------- references
#
# Each quantity the slow, obviously right way, on the instance as the backend built it and sharing
# nothing with the measures beyond it: dense matrices and exact ranks over the rationals (python-flint's
# fmpq_mat) for the integer and rational quantities; for P − Ñ the logits HWᵀ formed exactly from the
# built factors (rational products), P in REFERENCE_BITS-bit balls, the entry P_ct − 1 as minus the sum
# of the row's other entries (no cancellation), and the rank by Gaussian elimination in balls
# (ball_rank). Counts (k, the attracting classes, C^u_B, the sign flips) are recounted in plain Python.
# Small sizes only (the tests run them at V <= 64).

#: Working precision (bits) of the ball references.
REFERENCE_BITS = 256


def ball_rank(rows: list[list[flint.arb]]) -> int:
    """The rank of a dense matrix of balls from below: Gaussian elimination with complete pivoting on the
    entry whose ball lies farthest from 0, until every remaining ball contains 0. Each pivot taken is
    certified nonzero, so the pivots index a nonsingular submatrix: the count never exceeds the rank of
    any matrix inside the balls, and equals it once the precision resolves the smallest nonzero pivot."""
    M = np.array(rows, dtype=object).reshape(len(rows), -1)
    rank = 0
    while M.size:
        lowest = np.frompyfunc(lambda x: x.abs_lower(), 1, 1)(M)
        i, j = divmod(max(range(M.size), key=lambda n: lowest.flat[n]), M.shape[1])
        if not lowest[i, j] > 0:
            break
        rest = np.delete(M, i, axis=0)
        rest = rest - np.outer(rest[:, j] / M[i, j], M[i])
        M = np.delete(rest, j, axis=1)
        rank += 1
    return rank


def rational_rank(rows: list[list[Any]]) -> int:
    """The exact rank of a dense matrix of integers or Fractions, over the rationals (fmpq_mat)."""
    if not rows or not rows[0]:
        return 0
    entries = [flint.fmpq(Fraction(x).numerator, Fraction(x).denominator) for row in rows for x in row]
    return int(flint.fmpq_mat(len(rows), len(rows[0]), entries).rank())


def rational_matrix(floats: np.ndarray) -> flint.fmpq_mat:
    """A float matrix as the exact rationals it holds."""
    entries = [flint.fmpq(*float(x).as_integer_ratio()) for x in floats.ravel()]
    return flint.fmpq_mat(floats.shape[0], floats.shape[1], entries)


def exact_logits(H: np.ndarray, W: np.ndarray) -> list[list[flint.fmpq]]:
    """HWᵀ exactly, from the factors as the backend holds them (read as rationals)."""
    Z = rational_matrix(H) * rational_matrix(W).transpose()
    return [[Z[i, j] for j in range(Z.ncols())] for i in range(Z.nrows())]


def built_factors(H: np.ndarray, W: np.ndarray, backend: Any) -> tuple[np.ndarray, np.ndarray]:
    """H and W as the backend holds them (rounded to its dtype), read exactly as float64."""
    return float64_copy(backend.asarray(H)), float64_copy(backend.asarray(W))


@functools.lru_cache(maxsize=512)
def _ball_prediction_error_rank(H: bytes, W: bytes, D: int, tokens: tuple[int, ...]) -> int:
    """rank(P − Ñ) for P = softmax(HWᵀ) in balls (the factors as float64 bytes, D columns each), cached:
    the float64 backends build the same factors."""
    H_np, W_np = (np.frombuffer(b, dtype=np.float64).reshape(-1, D) for b in (H, W))
    rows = []
    with exact.precision(REFERENCE_BITS):
        for z, t in zip(exact_logits(H_np, W_np), tokens, strict=True):
            top = max(z)
            weights = [flint.arb(x - top).exp() for x in z]
            total = sum(weights, flint.arb(0))
            p = [w / total for w in weights]
            off_token = sum((x for v, x in enumerate(p) if v != t), flint.arb(0))
            rows.append([-off_token if v == t else x for v, x in enumerate(p)])
        return ball_rank(rows)


def reference_prediction_error_rank(ctx: Context) -> int:
    """rank(P − Ñ) of the dense P = softmax(HWᵀ) in balls, HWᵀ exact from the built factors."""
    logits, tokens = unique_instance(ctx.case)
    H, W = built_factors(logits.H, logits.W, ctx.backend)
    return _ball_prediction_error_rank(H.tobytes(), W.tobytes(), H.shape[1], tuple(int(t) for t in tokens))


def unique_token_count(case: UniqueCase) -> int:
    """k recounted from the case: its ``k``, or for a corpus the distinct tokens that are each the only
    observed continuation of some context, read off the count matrix row by row."""
    if isinstance(case, UniqueContinuation):
        return case.k
    stream = corpus_stream(case.corpus, case.level)
    counts = er.ngram_counts(stream.ids, case.order, stream.V)[0].tocsr()
    starts, ends = counts.indptr[:-1], counts.indptr[1:]
    return len({int(counts.indices[s]) for s, e in zip(starts, ends, strict=True) if e - s == 1})


def reference_float_rows_rank(ctx: Context) -> int:
    """rank(P̂ − Ñ) in Fractions: the float64 rows P̂ (the object the quantity names) read exactly, each
    normalised by its exact sum."""
    logits, tokens = unique_instance(ctx.case)
    rows = []
    for p, t in zip(logits.probabilities(slice(None)), tokens, strict=True):
        exact_row = [Fraction(float(x)) for x in p]
        total = sum(exact_row)
        rows.append([x / total - (v == t) for v, x in enumerate(exact_row)])
    return rational_rank(rows)


def dense(weights: Any) -> np.ndarray:
    """A pattern's weights as a dense array (the references read small patterns entry by entry)."""
    return weights.toarray() if sparse.issparse(weights) else np.asarray(weights)


def _reachable(weights: list[list[int]]) -> list[frozenset[int]]:
    """The states each state reaches along positive weights (itself included), by search."""
    reach = []
    for i in range(len(weights)):
        seen, frontier = {i}, [i]
        while frontier:
            state = frontier.pop()
            for j, w in enumerate(weights[state]):
                if w > 0 and j not in seen:
                    seen.add(j)
                    frontier.append(j)
        reach.append(frozenset(seen))
    return reach


def reference_defect_rank(ctx: Context) -> int:
    """rank(I − P_T) over the rationals, P_T the weights over their row totals as Fractions."""
    weights = dense(stochastic_weights(ctx.case)).tolist()
    return rational_rank(
        [[int(i == j) - Fraction(w, sum(row)) for j, w in enumerate(row)] for i, row in enumerate(weights)]
    )


def reference_attracting_classes(ctx: Context) -> int:
    """The closed classes, by reachability: i is in a closed class when every state it reaches reaches it
    back, and the classes are the distinct sets of states the recurrent ones reach."""
    reach = _reachable(dense(stochastic_weights(ctx.case)).tolist())
    return len({reach[i] for i in range(len(reach)) if all(i in reach[j] for j in reach[i])})


def reference_strong_components(ctx: Context) -> int:
    """The classes of mutual reachability."""
    reach = _reachable(dense(stochastic_weights(ctx.case)).tolist())
    return len({frozenset(j for j in reach[i] if i in reach[j]) for i in range(len(reach))})


def reference_wcdd_rank(ctx: Context, leaks: int | None) -> int:
    """The rank of the dense integer matrix over the rationals."""
    return rational_rank(wcdd_matrix(ctx.case, leaks).toarray().tolist())


@dataclass(frozen=True)
class ReferenceBatch:
    """A batch recounted in Fractions (:func:`reference_batch`): C^u_B's batch tokens and, for each of
    its rows, Ñ_c (the data counts over their total)."""

    tokens: list[int]
    empirical: list[list[Fraction]]
    delta: Fraction
    V: int

    def error(self, i: int) -> list[Fraction]:
        """Row i of P − Ñ^B, P = (1 − δ)Ñ + δ/V."""
        t, row = self.tokens[i], self.empirical[i]
        return [(1 - self.delta) * x + self.delta / self.V - (v == t) for v, x in enumerate(row)]

    def limit(self, i: int) -> list[Fraction]:
        """Row i of Ñ − Ñ^B."""
        return [x - (v == self.tokens[i]) for v, x in enumerate(self.empirical[i])]


def reference_batch(case: MiniBatch) -> ReferenceBatch:
    """C^u_B recounted row by row (one distinct batch token and several data tokens; the first such
    context for each batch token), with Ñ on those rows in Fractions."""
    counts, batch_counts = batch_language(case)
    full, batch = counts.toarray(), batch_counts.toarray()
    V = case.V
    chosen: dict[int, int] = {}
    for c in range(full.shape[0]):
        in_batch = [v for v in range(V) if batch[c, v] > 0]
        if len(in_batch) == 1 and sum(1 for v in range(V) if full[c, v] > 0) >= 2:
            chosen.setdefault(in_batch[0], c)
    empirical = [[Fraction(int(x), int(full[c].sum())) for x in full[c]] for c in chosen.values()]
    return ReferenceBatch(list(chosen), empirical, Fraction(case.delta), V)


def _sign(x: Fraction) -> int:
    return (x > 0) - (x < 0)


def reference_sign_flips(ctx: Context, everywhere: bool) -> int:
    """The entries (where Ñ > 0, or every entry) at which P − Ñ^B and Ñ − Ñ^B differ in sign, in Fractions."""
    ref = reference_batch(ctx.case)
    flips = 0
    for i, row in enumerate(ref.empirical):
        for v, (e, lim) in enumerate(zip(ref.error(i), ref.limit(i), strict=True)):
            flips += (everywhere or row[v] > 0) and _sign(e) != _sign(lim)
    return flips


def reference_batch_error_rank(ctx: Context) -> int:
    """rank(P − Ñ^B) on the recounted C^u_B, dense in Fractions."""
    ref = reference_batch(ctx.case)
    return rational_rank([ref.error(i) for i in range(len(ref.tokens))])


def reference_limit_block_rank(ctx: Context) -> int:
    """rank of the square block (P − Ñ^B)[C^u_B, T_B], dense in Fractions."""
    ref = reference_batch(ctx.case)
    return rational_rank([[ref.error(i)[t] for t in ref.tokens] for i in range(len(ref.tokens))])


def reference_vocabulary(ctx: Context) -> int:
    """V: the case's, or a corpus's vocabulary."""
    case = ctx.case
    if isinstance(case, CorpusContinuations):
        return corpus_stream(case.corpus, case.level).V
    return case.V


# --------------------------------------------------------------------------- the quantities


def reading(kinds: tuple[type, ...], name: str, route: Callable[[Context], Any]) -> Callable[[Context], Any]:
    """``route`` on the cases of ``kinds`` only: a case of another kind is refused as input, naming the
    quantity and the kinds it reads (a statement over it is undefined there)."""

    def guarded(ctx: Context) -> Any:
        if not isinstance(ctx.case, kinds):
            known = ", ".join(kind.KIND for kind in kinds)
            raise InputError(f"case: {name} reads {known} cases, not {type(ctx.case).__name__}")
        return route(ctx)

    return guarded


def integer_quantity(
    family: str,
    reads: tuple[type, ...],
    name: str,
    measure: Callable[[Context], Any],
    exact_fn: Callable[[Context], Any],
    **options: Any,
) -> Any:
    """An integer quantity of ``family`` on the cases of ``reads`` (every route guarded by :func:`reading`)."""
    if options.get("reference") is not None:
        options["reference"] = reading(reads, name, options["reference"])
    measure, exact_fn = reading(reads, name, measure), reading(reads, name, exact_fn)
    return quantity(name, measure, exact_fn, family=family, integer=True, reads=reads, **options)


#: The kinds of case the unique-continuation quantities read, and those with a vocabulary size V.
UNIQUE = (UniqueContinuation, CorpusContinuations)
WITH_V = (UniqueContinuation, CorpusContinuations, MiniBatch)


def _quantity(
    reads: tuple[type, ...], name: str, measure: Callable[[Context], Any], exact_fn: Callable[[Context], Any], **kw: Any
) -> Any:
    return integer_quantity(FAMILY, reads, name, measure, exact_fn, **kw)


def _same(compute: Callable[[Context], Any]) -> tuple[Callable[[Context], Any], Callable[[Context], Any]]:
    """(measure, exact) of an integer quantity computed exactly (one implementation, both routes)."""
    return compute, compute


prediction_error_rank = _quantity(
    UNIQUE,
    "rank(P − Ñ)",
    _measure_prediction_error_rank,
    _exact_prediction_error_rank,
    reference=reference_prediction_error_rank,
    doc="the rank of the prediction error P − Ñ over the k unique rows of a unique-continuation case",
    exact_doc="the dominance margins (or the positivity floor) in float64 on the built factors read exactly, "
    "then in 256-bit balls; the upper end min(k, V − 1) from the rows and (P − Ñ)1 = 0",
)
unique_tokens = _quantity(
    UNIQUE,
    "k",
    *_same(lambda ctx: pinned(_unique_counts(ctx)[0], "the case")),
    reference=lambda ctx: unique_token_count(ctx.case),
    doc="the number of distinct tokens that are each the only observed continuation of some context",
    exact_doc="the case's k, or the count in the corpus",
)
vocabulary = _quantity(
    WITH_V,
    "V",
    *_same(lambda ctx: pinned(ctx.case.V if isinstance(ctx.case, MiniBatch) else _unique_counts(ctx)[1], "the case")),
    reference=reference_vocabulary,
    doc="the vocabulary size V of a unique-continuation case or a mini-batch",
    exact_doc="the case's V, or the corpus's",
)
float_rows_error_rank = _quantity(
    UNIQUE,
    "rank(P̂ − Ñ)",
    *_same(_float_rows_rank),
    follows_backend=False,
    reference=reference_float_rows_rank,
    doc="the rank of P̂ − Ñ for the NumPy float64 rows P̂ as computed, zeros from underflow included "
    "(another object than P, on purpose: the float-rows mutant)",
    exact_doc="the integer rows of P̂ − Ñ (each scaled by a power of two): rank mod p, then fraction-free elimination",
)
#: How the exact routes of the pattern ranks work (:func:`sparse_rank_interval`).
BLOCK_TRIANGULAR_DOC = (
    "the block triangular form of the sparse integer matrix {matrix} (SciPy's strong components), with "
    "python-flint's exact rank of each diagonal block"
)
defect_rank = _quantity(
    (StochasticPattern,),
    "rank(I − P_T)",
    *_same(_defect_rank),
    follows_backend=False,
    reference=reference_defect_rank,
    doc="the rank of I − P_T for the row-stochastic P_T of a stochastic pattern",
    exact_doc=BLOCK_TRIANGULAR_DOC.format(matrix="diag(w·1) − w"),
)
order = _quantity(
    (StochasticPattern, WcddPattern),
    "n",
    *_same(lambda ctx: pinned(ctx.case.n, "the case")),
    reference=lambda ctx: (
        stochastic_weights(ctx.case) if isinstance(ctx.case, StochasticPattern) else wcdd_matrix(ctx.case)
    ).shape[0],
    doc="the order n of a stochastic or weakly chained diagonally dominant pattern",
    exact_doc="the case's n",
)
attracting_classes = _quantity(
    (StochasticPattern,),
    "a",
    *_same(_attracting_classes),
    follows_backend=False,
    reference=reference_attracting_classes,
    doc="the number of attracting (closed) components of the graph of P_T's positive entries",
    exact_doc="SciPy's strongly connected components of the graph, those no edge leaves",
)
strong_components = _quantity(
    (StochasticPattern,),
    "#strongly connected components",
    *_same(_strong_components),
    follows_backend=False,
    reference=reference_strong_components,
    doc="the number of strongly connected components of the graph of P_T's positive entries, closed or not",
    exact_doc="SciPy's strongly connected components of the graph",
)
wcdd_rank = _quantity(
    (WcddPattern,),
    "rank M",
    *_same(lambda ctx: _matrix_rank(ctx, None)),
    follows_backend=False,
    reference=lambda ctx: reference_wcdd_rank(ctx, None),
    doc="the rank of the integer matrix M = diag(w·1 + leak) − W of a weakly chained pattern",
    exact_doc=BLOCK_TRIANGULAR_DOC.format(matrix="M"),
)
no_leak_rank = _quantity(
    (WcddPattern,),
    "rank(diag(w·1) − W)",
    *_same(lambda ctx: _matrix_rank(ctx, 0)),
    follows_backend=False,
    reference=lambda ctx: reference_wcdd_rank(ctx, 0),
    doc="the rank of the same pattern's matrix with no leaking row (every row weakly dominant, none strictly)",
    exact_doc=BLOCK_TRIANGULAR_DOC.format(matrix="M"),
)
batch_error_rank = _quantity(
    (MiniBatch,),
    "rank(P − Ñ^B)",
    *_same(_batch_error_rank),
    follows_backend=False,
    reference=reference_batch_error_rank,
    doc="the rank of P − Ñ^B on C^u_B, for P = (1 − δ)Ñ + δ/V",
    exact_doc="the integer rows (scaled by d V T_c): rank mod p, the rows and (P − Ñ^B)1 = 0, fraction-free "
    "elimination",
)
batch_unique_contexts = _quantity(
    (MiniBatch,),
    "|C^u_B|",
    *_same(lambda ctx: pinned(len(_batch(ctx).tokens), "the count of C^u_B")),
    follows_backend=False,
    reference=lambda ctx: len(reference_batch(ctx.case).tokens),
    doc="|C^u_B|: the distinct tokens that are the only batch continuation of a context with several data tokens",
    exact_doc="counted on the sparse counts",
)
sign_flips = _quantity(
    (MiniBatch,),
    "#sign flips of P − Ñ^B where Ñ > 0",
    *_same(lambda ctx: _sign_flips(ctx, everywhere=False)),
    follows_backend=False,
    reference=lambda ctx: reference_sign_flips(ctx, everywhere=False),
    doc="the entries of C^u_B's rows with Ñ > 0 where the sign of P − Ñ^B is not that of Ñ − Ñ^B",
    exact_doc="the signs of the integer rows",
)
sign_flips_everywhere = _quantity(
    (MiniBatch,),
    "#sign flips of P − Ñ^B",
    *_same(lambda ctx: _sign_flips(ctx, everywhere=True)),
    follows_backend=False,
    reference=lambda ctx: reference_sign_flips(ctx, everywhere=True),
    doc="the entries of C^u_B's rows where the sign of P − Ñ^B is not that of Ñ − Ñ^B",
    exact_doc="the signs of the integer rows",
)
limit_block_rank = _quantity(
    (MiniBatch,),
    "rank((P − Ñ^B)[C^u_B, T_B])",
    *_same(_limit_block_rank),
    follows_backend=False,
    reference=reference_limit_block_rank,
    doc="the rank of the square block of P − Ñ^B on C^u_B and its batch tokens T_B (L + E)",
    exact_doc="python-flint's rank of the k_B x k_B integer block",
)


# --------------------------------------------------------------------------- witnesses and random instances


def _unique_witnesses(V: int) -> list[UniqueCase]:
    """k = 1, 2, 64, V − 1 (the bounds meet) and V (no mass outside T), logits of rank 1 with k = V − 1,
    a scale that underflows the float64 margins, and the corpus contexts (V <= 4096)."""
    ks = sorted({1, min(V, 2), min(V - 1, 64), V - 1, V} if V <= 4096 else {1, 64, 1024, V})
    rows: list[UniqueCase] = [UniqueContinuation(V=V, k=k, D=8, seed=0, scale=1.0) for k in ks if k >= 1]
    rows.append(UniqueContinuation(V=V, k=min(V - 1, 16) or 1, D=4, seed=1, scale=300.0))
    rows.append(UniqueContinuation(V=V, k=(V - 1 if V <= 4096 else 64) or 1, D=1, seed=2, scale=10.0))
    if V <= 4096:
        rows.append(CorpusContinuations(corpus="tinyshakespeare.txt", level="char", order=3, D=16, seed=0, scale=1.0))
    return rows


def _unique_random(V: int, n: int, seed: int) -> list[UniqueContinuation]:
    rng = np.random.default_rng(seed)
    return [
        UniqueContinuation(
            V=V,
            k=int(rng.integers(1, min(V, 512) + 1)),
            D=int(rng.integers(1, 33)),
            seed=int(rng.integers(2**31)),
            scale=float(10 ** rng.uniform(-1, 2)),
        )
        for _ in range(n)
    ]


#: Largest order of the dense witnesses; beyond it the witnesses at n = V are sparse.
DENSE_WITNESS_ORDER = 60


def _stochastic_witnesses(V: int) -> list[StochasticPattern]:
    """1, 2 and n/3 closed classes; every state closed (P_T = I, rank 0); density 0 (cycles and chains
    only); one state; at n = min(V, 60), dense. Beyond 60, four sparse patterns at n = V
    (:func:`_full_size_stochastic_witnesses`)."""
    n = min(V, DENSE_WITNESS_ORDER)
    return [
        *(StochasticPattern(n=n, closed=c, seed=s, density=0.2) for c in (1, 2, n // 3 or 1) for s in (0, 1)),
        StochasticPattern(n=n, closed=n, seed=2, density=0.2),
        StochasticPattern(n=n, closed=1, seed=3, density=0.0),
        StochasticPattern(n=1, closed=1, seed=4),
        *(_full_size_stochastic_witnesses(V) if V > DENSE_WITNESS_ORDER else []),
    ]


def _full_size_stochastic_witnesses(V: int) -> list[StochasticPattern]:
    """Patterns of order V whose strong components stay small enough for exact ranks (the route's
    blocks, :data:`rankwall.checks.exact.DENSE_BLOCK_ORDER`): one closed class of 256 states and the
    rest transient; V/64 classes of 32 states over half the states; every state closed; V/256 bare
    cycles (density 0) over half the states."""
    half = V // 2
    return [
        StochasticPattern(n=V, closed=1, seed=5, density=0.02, recurrent=min(256, V)),
        StochasticPattern(n=V, closed=max(1, V // 64), seed=6, density=0.2, recurrent=half),
        StochasticPattern(n=V, closed=V, seed=7, density=0.2, recurrent=V),
        StochasticPattern(n=V, closed=max(1, V // 256), seed=8, density=0.0, recurrent=half),
    ]


def _wcdd_witnesses(V: int) -> list[WcddPattern]:
    """One leaking row (four seeds); every closed row leaking; density 0 (a single cycle, the longest
    chains); one state; at n = min(V, 60), dense. Beyond 60, three sparse patterns at n = V whose
    closed class holds 256 states (one leaking row, every row leaking) or 1,024 on a bare cycle."""
    n = min(V, DENSE_WITNESS_ORDER)
    return [
        *(WcddPattern(n=n, leaks=1, seed=s, density=0.1) for s in range(4)),
        WcddPattern(n=n, leaks=n, seed=4, density=0.1),
        WcddPattern(n=n, leaks=1, seed=5, density=0.0),
        WcddPattern(n=1, leaks=1, seed=6),
        *(
            [
                WcddPattern(n=V, leaks=1, seed=7, density=0.02, recurrent=min(256, V)),
                WcddPattern(n=V, leaks=V, seed=8, density=0.02, recurrent=min(256, V)),
                WcddPattern(n=V, leaks=1, seed=9, density=0.0, recurrent=min(1024, V)),
            ]
            if V > DENSE_WITNESS_ORDER
            else []
        ),
    ]


def _converged_batch_witnesses(V: int) -> list[MiniBatch]:
    """Three Zipfian languages over min(V, 2048) tokens near convergence (δ = 1e-3), one over three
    tokens (|C^u_B| >= V − 1: the bound min(|C^u_B|, V − 1) is V − 1), and, beyond 2,048, one at V itself
    (the same 600 contexts: the batch's content, not V, sets the cost)."""
    cases = [
        *(
            MiniBatch(V=min(V, 2048), contexts=600, seed=s, unique_share=0.3, batch_tokens=400, delta=1e-3)
            for s in range(3)
        ),
        MiniBatch(V=min(V, 3), contexts=60, seed=0, unique_share=0.3, batch_tokens=40, delta=1e-3),
    ]
    if V > 2048:
        cases.append(MiniBatch(V=V, contexts=600, seed=0, unique_share=0.3, batch_tokens=400, delta=1e-3))
    return cases


def _batch_witnesses(V: int) -> list[MiniBatch]:
    """The converged witnesses, and the same languages far from convergence: δ = 0.9, and δ = 1 (P uniform)."""
    near = _converged_batch_witnesses(V)
    return [*near, replace(near[0], delta=0.9), replace(near[-1], delta=1.0)]


def _limit_witnesses(V: int) -> list[MiniBatch]:
    """The converged witnesses, and the first with batches of 40 and 3 tokens (|C^u_B| < V even at small
    V), inside the limit claim's domain (a chained limit, ‖E‖_F ‖L⁻¹‖_F < 1)."""
    near = _converged_batch_witnesses(V)
    candidates = [*near, replace(near[0], batch_tokens=40), replace(near[0], batch_tokens=3)]
    return [case for case in candidates if limit_hypothesis(case) is None]


#: Batches whose every token is a unique batch continuation (k_B = V): the limit is never chained there.
def _closed_witnesses(V: int) -> list[MiniBatch]:
    """Near-converged batches over two and three tokens with |C^u_B| = V (the no-chain mutant's witnesses)."""
    return [c for c in _converged_batch_witnesses(V) + _small_batches() if _every_token_unique(c)]


def _small_batches() -> list[MiniBatch]:
    return [
        MiniBatch(V=V, contexts=60, seed=s, unique_share=0.3, batch_tokens=40, delta=1e-3)
        for V in (2, 3)
        for s in range(4)
    ]


def _every_token_unique(case: MiniBatch) -> bool:
    return batch_domain(case) is None and batch_unique_count(case) == case.V and sign_hypothesis(case) is None


# --------------------------------------------------------------------------- boundary classes


def _with_instance(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """A boundary predicate that builds the instance: false where the build refuses it."""

    def predicate(case: Any) -> bool:
        try:
            return test(case)
        except InputError:
            return False

    return predicate


def _transient_states(case: StochasticPattern) -> bool:
    labels, closed = er.graph_components(stochastic_weights(case))
    return not closed[labels].all()


#: The boundary classes of the mini-batch strategies.
BATCH_BOUNDARY: dict[str, Callable[[Any], bool]] = {
    "V = 2 or 3": lambda c: c.V <= 3,
    "|C^u_B| >= V − 1 (the bound is V − 1)": _with_instance(lambda c: batch_unique_count(c) >= c.V - 1),
    "|C^u_B| = 1": _with_instance(lambda c: batch_unique_count(c) == 1),
    "δ = 1e-8": lambda c: c.delta == 1e-8,
}

#: Where the claims of this family range (the public API): unique continuations (and corpus contexts),
#: stochastic and WCDD patterns, mini-batches (near convergence or far from it); each with the boundary
#: classes its strategy reaches (``docs/error_rank.md``, "Where the search looks").
unique_continuations = Cases(
    lambda: st.one_of(
        unique_continuation_instances(),
        unique_continuation_instances(),
        unique_continuation_instances(),
        corpus_instances(),
    ),
    _unique_witnesses,
    _unique_random,
    boundary={
        "V = 2 or 3": lambda c: isinstance(c, UniqueContinuation) and c.V <= 3,
        "k = 1": lambda c: isinstance(c, UniqueContinuation) and c.k == 1,
        "k = V − 1 (the two bounds meet)": lambda c: isinstance(c, UniqueContinuation) and c.k == c.V - 1,
        "k = V (no mass outside T)": lambda c: isinstance(c, UniqueContinuation) and c.k == c.V,
        "D = 1": lambda c: c.D == 1,
        "scale 1000 (float64 margins underflow)": lambda c: c.scale >= 1000,
        "V >= 4096": lambda c: isinstance(c, UniqueContinuation) and c.V >= 4096,
        "corpus contexts": lambda c: isinstance(c, CorpusContinuations),
    },
    family=FAMILY,
)
#: Measured 841 bytes per entry at n = 131,072 (attracting-components; wcdd 523), rounded up by a quarter:
#: ``python benchmarks/sweep.py 'error-rank.[aw]*' --V 131072 --serial --each``.
PATTERN_BYTES_PER_ENTRY = 1_100
stochastic_patterns = Cases(
    stochastic_instances,
    _stochastic_witnesses,
    boundary={
        "n <= 3": lambda c: c.n <= 3,
        "one closed class": lambda c: c.closed == 1,
        "every state closed (P_T = I)": lambda c: c.closed == c.n,
        "density 0 (cycles and chains only)": lambda c: c.density == 0,
        "transient states": _with_instance(_transient_states),
        "sparse weights (recurrent given)": lambda c: c.recurrent > 0,
    },
    family=FAMILY,
    bytes_per_entry=PATTERN_BYTES_PER_ENTRY,
)
wcdd_patterns = Cases(
    wcdd_instances,
    _wcdd_witnesses,
    boundary={
        "n <= 3": lambda c: c.n <= 3,
        "one leaking row": lambda c: c.leaks == 1,
        "every row may leak (leaks = n)": lambda c: c.leaks == c.n,
        "density 0 (a single cycle)": lambda c: c.density == 0,
        "sparse weights (recurrent given)": lambda c: c.recurrent > 0,
    },
    family=FAMILY,
    bytes_per_entry=PATTERN_BYTES_PER_ENTRY,
)
#: Measured 19,776 bytes per entry at V = 131,072 (mini-batch: 600 contexts x V dense), rounded up by a quarter.
BATCH_BYTES_PER_ENTRY = 25_000
mini_batches = Cases(
    batch_instances,
    _batch_witnesses,
    boundary={**BATCH_BOUNDARY, "far from convergence (δ >= 1/4)": lambda c: c.delta >= 0.25},
    family=FAMILY,
    bytes_per_entry=BATCH_BYTES_PER_ENTRY,
)
converged_batches = Cases(
    lambda: batch_instances(far=False),
    _converged_batch_witnesses,
    boundary=BATCH_BOUNDARY,
    family=FAMILY,
    bytes_per_entry=BATCH_BYTES_PER_ENTRY,
)
limit_batches = Cases(
    lambda: batch_instances(far=False),
    _limit_witnesses,
    boundary=BATCH_BOUNDARY,
    family=FAMILY,
    bytes_per_entry=BATCH_BYTES_PER_ENTRY,
)
closed_batches = Cases(
    lambda: batch_instances(far=False),
    _closed_witnesses,
    boundary=BATCH_BOUNDARY,
    family=FAMILY,
    bytes_per_entry=BATCH_BYTES_PER_ENTRY,
)
#: Unique continuations with k = V (every token the only continuation of a context), logits that underflow
#: float64 on the witness: the cases of the float-rows mutant.
complete_continuations = Cases(
    lambda: unique_continuation_instances(k_equals_V=True),
    lambda V: [UniqueContinuation(V=min(V, 6), k=min(V, 6), D=2, seed=0, scale=1e4)],
    boundary={"V = 2 or 3": lambda c: c.V <= 3, "scale 1000 (float64 margins underflow)": lambda c: c.scale >= 1000},
    family=FAMILY,
)

# --------------------------------------------------------------------------- the claims

unique_continuation_claim = declare(
    "error-rank.unique-continuation",
    title="Unique continuations force a high-rank prediction error",
    source=f"{SEED_000}, Prop. A.5 (App. A.3; proof in B.2)",
    statement="rank(P − Ñ) ≥ min(k, V − 1) for every strictly positive P, where k distinct tokens are "
    "each the only observed continuation of some context",
    domain="P = softmax(HWᵀ) (strictly positive in exact arithmetic); any V, k, D",
    lhs=prediction_error_rank,
    relation=">=",
    rhs=minimum(unique_tokens, vocabulary - 1),
    cases=unique_continuations,
)
attracting_claim = declare(
    "error-rank.attracting-components",
    title="Beyond positivity: the rank of I − P_T counts attracting classes",
    source="rankwall (replaces Prop. A.5's k = V case when P has zeros)",
    statement="rank(I − P_T) = n − a for a row-stochastic n × n matrix P_T, a = number of attracting "
    "components of the graph of its positive entries",
    domain="row-stochastic P_T with rational entries (zeros allowed)",
    lhs=defect_rank,
    relation="==",
    rhs=order - attracting_classes,
    cases=stochastic_patterns,
)
wcdd_claim = declare(
    "error-rank.wcdd",
    title="Weakly chained diagonally dominant submatrices are nonsingular",
    source="rankwall (replaces Prop. A.5's dominance argument when P has zeros)",
    statement="rank(M) ≥ n for a weakly chained diagonally dominant n × n matrix M (so rank n)",
    domain="integer matrices diag(w) − W built from a substochastic pattern with leaking rows",
    hypothesis=wcdd_hypothesis,
    lhs=wcdd_rank,
    relation=">=",
    rhs=order,
    cases=wcdd_patterns,
)
mini_batch_claim = declare(
    "error-rank.mini-batch",
    title="Mini-batch prediction errors are high-rank, near convergence or far from it",
    source=f"{SEED_000}, Prop. A.7 and Cor. A.8 (App. A.3.1; proof in B.3)",
    statement="rank(P − Ñ^B) ≥ min(|C^u_B|, V − 1) for every strictly positive P, with no closeness to Ñ "
    "(C^u_B: one context for each distinct token that is the only batch continuation of a context with several "
    "tokens in the data)",
    domain="Zipfian languages, batches drawn without replacement, P = (1 − δ)Ñ + δ/V with 0 < δ ≤ 1 (exact "
    "rationals), δ near 0 (near convergence) or up to 1 (P uniform)",
    hypothesis=batch_domain,
    lhs=batch_error_rank,
    relation=">=",
    rhs=minimum(batch_unique_contexts, vocabulary - 1),
    cases=mini_batches,
)
mini_batch_signs_claim = declare(
    "error-rank.mini-batch-signs",
    title="Near convergence the batch error keeps the sign pattern of Ñ − Ñ^B on the support of Ñ",
    source=f"{SEED_000}, Prop. A.7, B.3 (the sign pattern, under the lost condition (9))",
    statement="if max|P − Ñ| < ν_B (the smallest positive entry of Ñ on C^u_B), the sign pattern of P − Ñ^B "
    "where Ñ > 0 is that of Ñ − Ñ^B",
    domain="the mini-batches of error-rank.mini-batch with max|P − Ñ| < ν_B on C^u_B (checked exactly)",
    hypothesis=sign_hypothesis,
    lhs=sign_flips,
    relation="==",
    rhs=0,
    cases=converged_batches,
)
mini_batch_limit_claim = declare(
    "error-rank.mini-batch-limit",
    title="A weakly chained dominant limit keeps the batch block nonsingular",
    source="rankwall (Prop. A.7 (3): the Weyl step that lets zeros into P when |C^u_B| < V)",
    statement="if L = (Ñ − Ñ^B)[C^u_B, T_B] is weakly chained diagonally dominant and ‖E‖₂ < σ_min(L) for "
    "E = (P − Ñ)[C^u_B, T_B], then the block (P − Ñ^B)[C^u_B, T_B] = L + E is nonsingular: rank ≥ |C^u_B|",
    domain="the mini-batches of error-rank.mini-batch near convergence whose limit is weakly chained diagonally "
    "dominant with ‖E‖_F ‖L⁻¹‖_F < 1 (which gives ‖E‖₂ < σ_min(L); both checked exactly)",
    hypothesis=limit_hypothesis,
    lhs=limit_block_rank,
    relation=">=",
    rhs=batch_unique_contexts,
    cases=limit_batches,
)

unique_continuation_claim.with_mutant(
    "at-least-k-plus-1",
    statement="rank(P − Ñ) ≥ min(k + 1, V)  (false: only k rows, and (P − Ñ)1 = 0)",
    rhs=minimum(unique_tokens + 1, vocabulary),
)
unique_continuation_claim.with_mutant(
    "float-rows",
    statement="rank(P̂ − Ñ) ≥ min(k, V − 1) for the computed float rows P̂, zeros from underflow included  "
    "(false: underflow splits the graph of P̂_T into several attracting classes)",
    domain="P̂ = the float64 softmax(HWᵀ) read exactly, k V ≤ 2^14",
    hypothesis=small_enough_for_float_rows,
    lhs=float_rows_error_rank,
    cases=complete_continuations,
)
attracting_claim.with_mutant(
    "all-components",
    statement="rank(I − P_T) = n − (number of strongly connected components)  (false: transient classes "
    "add no kernel vector)",
    rhs=order - strong_components,
)
wcdd_claim.with_mutant(
    "weak-dominance-suffices",
    statement="rank(M) ≥ n for a weakly diagonally dominant M with no strictly dominant row  (false: "
    "diag(w) − W has the kernel vector 1)",
    domain="integer matrices diag(w) − W of a stochastic pattern, no leaking row",
    hypothesis=no_leak_hypothesis,
    lhs=no_leak_rank,
)
mini_batch_claim.with_mutant(
    "at-least-k-plus-1",
    statement="rank(P − Ñ^B) ≥ min(|C^u_B| + 1, V)  (false: only |C^u_B| rows, and (P − Ñ^B)1 = 0)",
    rhs=minimum(batch_unique_contexts + 1, vocabulary),
)
mini_batch_signs_claim.with_mutant(
    "signs-everywhere",
    statement="(i) on every entry, not only where Ñ > 0  (false: off the support P − Ñ^B = P > 0 = Ñ − Ñ^B)",
    lhs=sign_flips_everywhere,
)
mini_batch_limit_claim.with_mutant(
    "no-chain-condition",
    statement="(P − Ñ^B)[C^u_B, T_B] is nonsingular whenever max|P − Ñ| < ν_B, chained limit or not  (false: "
    "where |C^u_B| = V the block is P_T − I, and (P_T − I)1 = 0)",
    domain="the mini-batches near convergence, max|P − Ñ| < ν_B, any limit",
    hypothesis=closed_hypothesis,
    cases=closed_batches,
)

#: The theorems and lemmas of ``docs/error_rank.md`` (collected by ``checks/companion/fidelity.py``); ER.6, on the
#: same page, is stated beside its claims in :mod:`rankwall.checks.claims.logprob_rank`.
_TESTS = "tests/test_error_rank.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "thm-unique",
        "ER.1",
        "error_rank",
        "seed 000, Prop. A.5 (statement lost, proof B.2 empty; §2.2 sketch)",
        Kind.RECONSTRUCTED,
        ("error-rank.unique-continuation",),
        (_TESTS + "TestUniqueContinuationsForceRank",),
        "positivity of P named; the proof is ours",
    ),
    Statement(
        "thm-attracting",
        "ER.2",
        "error_rank",
        'seed 000, B.3 ("Laplacian of a connected graph")',
        Kind.NEW,
        ("error-rank.attracting-components",),
        (_TESTS + "TestWhereTheSeedsStatementStops",),
        "the precise form of the case k = V",
    ),
    Statement(
        "thm-wcdd",
        "ER.3",
        "error_rank",
        "none (Shivakumar and Chew 1974)",
        Kind.NEW,
        ("error-rank.wcdd",),
        (_TESTS + "TestWhereTheSeedsStatementStops", _TESTS + "TestMutantsAreRefutedThroughTheirMeasurement"),
        "both directions proved for S - I, S substochastic",
    ),
    Statement(
        "thm-batch",
        "ER.4",
        "error_rank",
        "seed 000, Prop. A.7 (statement lost; proof B.3; condition (9) lost)",
        Kind.CORRECTED,
        ("error-rank.mini-batch", "error-rank.mini-batch-signs", "error-rank.mini-batch-limit"),
        (_TESTS + "TestMiniBatches", _TESTS + "TestMiniBatchHypothesisAndConclusions"),
        "signs only on the support of Ñ; the rank part needs no closeness",
    ),
    Statement(
        "thm-batch-corollary",
        "ER.5",
        "error_rank",
        "seed 000, Cor. A.8 (statement lost, only cited)",
        Kind.RECONSTRUCTED,
        ("error-rank.mini-batch", "updates.eckart-young"),
        (),
        "checked through its two ingredients, not as one claim",
    ),
)
