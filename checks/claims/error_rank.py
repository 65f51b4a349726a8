"""Claims ``error-rank.*`` and ``logprob-rank.*``: ranks of P - Ñ and of log-probabilities.

Every rank is certified as an interval ``lo <= rank <= hi`` (:class:`RankInterval`), never read off
a thresholded SVD alone. Lower ends: strict diagonal dominance (margins streamed from the logits,
O(V) per row), positivity of a stochastic matrix, singular values above a Weyl margin, a rank mod
p (exact). Upper ends: structure (the number of rows; the kernel vector 1 of P - Ñ, whose rows sum
to 0), an explicit factorization whose residual is measured against a rounding bound, or an exact
rank over the rationals (python-flint).

Verdicts. "rank <= b" holds when hi <= b and is violated when lo > b; "b <= rank" holds when
lo >= b and is violated when hi < b; "rank == r" holds when lo == hi == r. Anything else, or ends
that contradict each other (lo > hi), is inconclusive and says why. The certification names what
the verdict rests on: ``exact`` when the rank is pinned (lo == hi) by ends free of rounding
(integers, rationals, structure); ``two-sided`` when it is pinned and one end comes from the
rounding model; ``one-sided`` when one end decides alone (a lower end can refute an upper bound or
prove a lower one, an upper end the reverse).

Tightening. ``--tighten F`` on an integer bound b is strict
(:func:`rankwall.checks.verdict.tightened_integer_bound`): a lower bound b becomes rank >= ⌊F b⌋ + 1 (F > 1),
an upper bound b becomes rank <= ⌈F b⌉ - 1 (F < 1), so that F = 1.0001 already asks for more than
b; F = 1 leaves b as it is.

Backends. ``unique-continuation`` (its dominance margins, positivity floor and dense SVD), ``log-softmax``
and ``bottleneck`` (log softmax, factorization residual, SVD) follow ``--backend``: the float factors are
rounded to its dtype and every float route runs there, with margins at its unit roundoff; the exact and
ball escalations re-decide on the float64 instance. ``attracting-components``, ``wcdd``, ``mini-batch``
and ``row-shift`` have no float route to port (exact ranks with python-flint, networkx graphs, sparse
counts and exact rationals) and keep ``array_api=False``, as does the ``float-rows`` mutant, whose
domain is the float64 P̂ itself.

Domains. An instance outside a proposition's hypothesis is not an instance of it: measuring one
raises :class:`~rankwall.checks.verdict.OutsideDomain` naming the hypothesis that fails on the built
values (an integer A that the backend's dtype cannot hold, a matrix that is not weakly chained
diagonally dominant, a batch outside A.7's radius or with C^u_B empty): the search rejects it,
``verify`` counts it apart, and no witness is one. Conclusions are measured, never assumed.

Issue 18. Each claim has a reference (:data:`REFERENCES`: dense matrices, exact ranks over the
rationals, softmax and log softmax in 256-bit balls ranked by elimination in balls), boundary classes
that its strategy draws with real probability (the Cases bundles' ``boundary``), and, for an integer
bound, a continuous ``closeness`` in its certificate for the search's ``target()``.
"""

from __future__ import annotations

#: The public API of the family: its case types, the Cases bundles its claims range over, its quantities.
__all__ = [
    "STATEMENTS",
    "CorpusContinuations",
    "Factors",
    "LowRank",
    "MiniBatch",
    "RowShift",
    "StochasticPattern",
    "UniqueContinuation",
    "WcddPattern",
    "bottleneck_rank",
    "factors",
    "hidden_size",
    "log_softmax_rank",
    "logit_rank",
    "low_rank_matrices",
    "mini_batches",
    "prediction_error_rank",
    "row_shifts",
    "shift_rank_gap",
    "shifted_rank",
    "stochastic_patterns",
    "unique_continuations",
    "unique_tokens",
    "vocabulary",
    "wcdd_patterns",
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
from hypothesis import strategies as st

from rankwall.checks import exact, tolerance
from rankwall.checks.backends import Backend, float64_copy
from rankwall.checks.data import characters, read_corpus, words
from rankwall.checks.quantities import Context, quantity
from rankwall.checks.statements import Kind, Statement
from rankwall.checks.toolkit import Cases, Family, Reference, numpy_float64, planted_side
from rankwall.checks.verdict import (
    Case,
    Certification,
    Judgement,
    Measurement,
    OutsideDomain,
    RankInterval,
    Relation,
    tightened_integer_bound,
)
from rankwall.theory import error_rank as er
from rankwall.theory.validation import InputError

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


@dataclass(frozen=True)
class StochasticPattern(Case):
    """A row-stochastic n x n pattern with ``closed`` attracting classes (integer weights)."""

    KIND: ClassVar[str] = "stochastic"
    n: int
    closed: int = 1
    seed: int = 0
    density: float = 0.2


@dataclass(frozen=True)
class WcddPattern(Case):
    """diag(w) - W of an n x n pattern with one closed class, ``leaks`` of whose rows leak mass."""

    KIND: ClassVar[str] = "wcdd"
    n: int
    leaks: int = 1
    seed: int = 0
    density: float = 0.1


@dataclass(frozen=True)
class MiniBatch(Case):
    """A Zipfian language over V tokens and ``contexts`` contexts, a batch of ``batch_tokens``
    drawn without replacement, and P = (1 - δ)Ñ + δ/V."""

    KIND: ClassVar[str] = "batch"
    V: int
    contexts: int
    seed: int = 0
    unique_share: float = 0.3
    batch_tokens: int = 400
    delta: float = 1e-3


@dataclass(frozen=True)
class LowRank(Case):
    """An integer rows x columns matrix HWᵀ of the given rank (entries of H, W up to ``spread``), times
    ``scale``; with ``ones_column`` W's first column is all ones, so 1 is in the row space of A."""

    KIND: ClassVar[str] = "low-rank"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    spread: int = 3
    scale: int = 1
    ones_column: bool = False


@dataclass(frozen=True)
class Factors(Case):
    """Gaussian factors H (rows x rank, times ``scale``) and W (columns x rank) of logits HWᵀ."""

    KIND: ClassVar[str] = "factors"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    scale: float = 1.0


@dataclass(frozen=True)
class RowShift(Case):
    """A low-rank integer matrix A = HWᵀ and two integer row shifts λ, μ (μ times ``second``: 0 or 1).
    With ``cancelling``, W's first column is all ones and λ = −H[:, 0], which removes that rank-one
    term: A + λ1ᵀ = H[:, 1:]W[:, 1:]ᵀ (:func:`row_shift_instance`)."""

    KIND: ClassVar[str] = "row-shift"
    rows: int
    columns: int
    rank: int
    seed: int = 0
    spread: int = 2
    shift_seed: int = 0
    shift_spread: int = 5
    second: int = 1
    cancelling: bool = False


#: The cases of the unique-continuation claim: synthetic, or from a corpus.
UniqueCase = UniqueContinuation | CorpusContinuations

# --------------------------------------------------------------------------- strategies


# The strategies choose among tiers uniformly (st.integers favours its low end, and st.one_of of
# st.just values their first, far beyond a fair share): the smallest sizes, the edges of a statement
# (k = V, a rank-zero or full-rank matrix, a shift that cancels a direction) and the bulk each get the
# share their weight gives them, the boundary classes that ``tests/test_boundaries.py`` measures.
# Hypothesis shrinks a tier choice towards the first tier, and values within a tier towards its low end.


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
    closed (in a quarter each), or any number in between; density 0 (cycles and chains only) in a quarter."""
    n = sizes(draw, 1, 40)
    return StochasticPattern(
        n=n,
        closed=tiered(draw, [(1, st.just(1)), (1, st.just(n)), (2, uniform(1, n))]),
        seed=draw(st.integers(0, 2**16)),
        density=tiered(draw, [(1, st.just(0.0)), (3, st.floats(0, 0.6))]),
    )


@st.composite
def wcdd_instances(draw: Any) -> WcddPattern:
    """Weakly chained diagonally dominant patterns of order up to 40 (1 to 3 in a third): one leaking
    row (the longest chains), every closed row leaking (in a quarter each), or in between; density 0 in
    a quarter."""
    n = sizes(draw, 1, 40)
    return WcddPattern(
        n=n,
        leaks=tiered(draw, [(1, st.just(1)), (1, st.just(n)), (2, uniform(1, n))]),
        seed=draw(st.integers(0, 2**16)),
        density=tiered(draw, [(1, st.just(0.0)), (3, st.floats(0, 0.5))]),
    )


@st.composite
def batch_instances(draw: Any) -> MiniBatch:
    """Zipfian languages over 2 to 400 tokens (2 or 3 in a quarter, up to 16 in another), 20 to 300
    contexts, batches of 1 to 5 tokens (few contexts in C^u_B) in a quarter, else up to twice as many
    tokens as contexts."""
    V = tiered(draw, [(1, uniform(2, 3)), (1, uniform(4, 16)), (2, uniform(17, 400))])
    contexts = draw(uniform(20, 300))
    return MiniBatch(
        V=V,
        contexts=contexts,
        seed=draw(st.integers(0, 2**16)),
        unique_share=draw(st.floats(0, 0.6)),
        batch_tokens=tiered(draw, [(1, uniform(1, 5)), (3, uniform(10, 2 * contexts))]),
        delta=draw(st.sampled_from([1e-2, 1e-4, 1e-8])),
    )


def ranks(draw: Any, low: int, full: int) -> int:
    """A rank: ``low`` or ``full`` (= min(rows, columns)) in a quarter of the draws each, else between."""
    return tiered(draw, [(1, st.just(low)), (1, st.just(full)), (2, uniform(low, full))])


@st.composite
def low_rank_instances(draw: Any, factors: bool = False) -> LowRank | Factors:
    """Integer matrices of chosen rank, or (``factors``) Gaussian factors of chosen rank: 1 to 3 rows
    or 2 or 3 columns in about half the draws; rank 0 (A = 0; for factors rank 1) or full (rank =
    min(rows, columns)) in a quarter each; for integer matrices a ones column in W (1 in the row space
    of A) in a quarter."""
    rows, columns = sizes(draw, 1, 40), sizes(draw, 2, 60)
    rank = ranks(draw, int(factors), min(rows, columns))
    if factors:
        scale = draw(st.sampled_from([0.1, 1.0, 30.0]))
        return Factors(rows=rows, columns=columns, rank=rank, seed=draw(st.integers(0, 2**16)), scale=scale)
    return LowRank(
        rows=rows,
        columns=columns,
        rank=rank,
        seed=draw(st.integers(0, 2**16)),
        spread=draw(uniform(1, 5)),
        scale=draw(st.sampled_from([1, 3, 50])),
        ones_column=draw(uniform(0, 3)) == 0,
    )


@st.composite
def row_shift_instances(draw: Any) -> RowShift:
    """Low-rank integer matrices (1 to 3 rows or 2 or 3 columns in about half the draws; rank 0 or full
    in a quarter each) and two row shifts: the first cancelling a rank-one term of A in a quarter, the
    second zero (μ = 0) in half."""
    rows, columns = sizes(draw, 1, 30), sizes(draw, 2, 40)
    return RowShift(
        rows=rows,
        columns=columns,
        rank=ranks(draw, 0, min(rows, columns)),
        seed=draw(st.integers(0, 2**16)),
        spread=draw(uniform(1, 4)),
        shift_seed=draw(st.integers(0, 2**16)),
        shift_spread=draw(uniform(0, 6)),
        second=draw(uniform(0, 1)),
        cancelling=draw(uniform(0, 3)) == 0,
    )


SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
SEED_001 = "seed 001"  # "Breaking the softmax bottleneck: your output layer is a rank-d wall"

#: Largest k x V for which the dense SVD route (route 3) runs.
DENSE_ENTRIES = 1 << 18

#: Largest k x V for which the exact route (route 2, python-flint on a rationalized matrix) runs.
EXACT_ENTRIES = 1 << 14


# --------------------------------------------------------------------------- certified ranks


def with_closeness(bounds: RankInterval, closeness: float) -> RankInterval:
    """``bounds`` with ``closeness`` in its certificate: a continuous measure of how near the instance
    is to a violation (larger is nearer; the search's ``target()`` for an integer bound)."""
    return replace(bounds, certificate={**bounds.certificate, "closeness": float(closeness)})


def measurement(bounds: RankInterval, bound: int, direction: str) -> Measurement:
    """The measurement of a claim on the enclosed value (:meth:`RankInterval.sides`)."""
    return bounds.sides(bound, direction)[0]


def judgement(bounds: RankInterval, bound: int, direction: str) -> Judgement:
    """The judgement of a claim on the enclosed value (:meth:`RankInterval.sides`)."""
    return bounds.sides(bound, direction)[1]


def integer_rows(M: np.ndarray) -> np.ndarray:
    """Each row of a float matrix times a power of two that makes it integral (Python ints): an
    exact rescaling of the rows of the dyadic rationals the floats are, so the rank is unchanged."""
    mantissa, exponent = np.frexp(np.asarray(M, dtype=np.float64))
    digits = (mantissa * 2.0**53).astype(np.int64).astype(object)
    exponent = np.where(mantissa == 0, np.iinfo(np.int32).max, exponent - 53)
    shifts = exponent - exponent.min(axis=1, keepdims=True)
    shifts = np.where(mantissa == 0, 0, shifts).astype(object)
    return digits << shifts


# --------------------------------------------------------------------------- instances


def unique_instance(case: UniqueCase) -> tuple[er.LogitRows, np.ndarray]:
    """(logits, tokens) of a unique-continuation case, synthetic or from a corpus (NumPy float64)."""
    match case:
        case UniqueContinuation():
            logits, tokens = er.construct_unique_continuation(case.V, case.k, case.D, case.seed, scale=case.scale)
        case CorpusContinuations():
            V, tokens = corpus_unique_tokens(case.corpus, case.level, case.order)
            logits, _ = er.construct_unique_continuation(V, len(tokens), case.D, case.seed, scale=case.scale)
        case _:
            raise InputError(f"instance: unknown family {case.family!r}")
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


# --------------------------------------------------------------------------- unique continuation


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


def float_bounds(logits: er.LogitRows, tokens: np.ndarray) -> RankInterval:
    """rank(P - Ñ) over the k unique rows, for the real P = softmax(HWᵀ), from floats computed in the
    factors' namespace and dtype (unit roundoff u).

    Upper (exact): k rows, and (P - Ñ)1 = 0, so rank <= min(k, V - 1). Lower: route 1, k < V:
    the k x k submatrix is strictly diagonally dominant with margins α_j (the mass outside T),
    computed with relative error γ_{V+D+8} < 1, so a positive computed margin is a positive real
    one; k = V: every entry of P is at least exp(floor) > 0, so P_T is a positive stochastic matrix
    and rank(I - P_T) = V - 1. Route 3 when k V is small: the SVD with a Weyl margin. ``closeness``
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
    if k * V <= DENSE_ENTRIES:
        routes["svd_weyl"], routes["weyl_margin"] = dense_rank_lower(logits, tokens)
        names.append("SVD + Weyl margin")
        lower = max(lower, routes["svd_weyl"])
    how = f"{' / '.join(names)} ({_label(logits.H)})"
    return RankInterval(lower, upper, how, "rows and (P - Ñ)1 = 0", False, routes)


def float_rows_bounds(logits: er.LogitRows, tokens: np.ndarray) -> RankInterval | None:
    """Route 2: the exact rank over Q of P̂ - Ñ, where P̂ is the computed float P read as dyadic
    rationals and normalised exactly (row c scaled by its total: the integer row p - (Σp) e_t).
    A rank mod p is a lower bound, the structure an upper one; fraction-free elimination settles
    a gap. ``None`` when k V is too large."""
    k, V = len(tokens), logits.shape[1]
    if k * V > EXACT_ENTRIES:
        return None
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


def ball_bounds(logits: er.LogitRows, tokens: np.ndarray) -> RankInterval:
    """Route 1 in 256-bit balls, for margins that underflowed float64: α_j is at least
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


def unique_bound(case: UniqueCase, factor: Fraction, extra: int) -> int:
    """The claimed lower bound min(k, V - 1) (plus ``extra`` for a mutant), tightened."""
    logits, tokens = unique_instance(case)
    k, V = len(tokens), logits.shape[1]
    return tightened_integer_bound(min(k + extra, V - 1 + extra), factor, "lower")


def unique_bounds(case: UniqueCase, bound: int, escalate: bool, backend: Backend | None = None) -> RankInterval:
    """rank(P - Ñ) from the float routes in the backend (NumPy float64 by default); with ``escalate``,
    when they leave ``bound`` undecided, from the exact instance P̂ (route 2, when it is strictly
    positive, so inside the domain, and small) and then from the margins in ball arithmetic (route 1
    for underflowed rows, k < V), both on the float64 instance."""
    logits, tokens = unique_instance(case)
    on = logits if backend is None else er.LogitRows(backend.asarray(logits.H), backend.asarray(logits.W))
    bounds = float_bounds(on, tokens)
    if not escalate or bounds.lo >= bound or bounds.hi < bound:
        return bounds
    small = len(tokens) * logits.shape[1] <= EXACT_ENTRIES
    if small and bool(np.all(logits.probabilities(slice(None)) > 0)):
        return with_closeness(exact_float_rows(case), bounds.certificate["closeness"])
    if len(tokens) < logits.shape[1]:
        return with_closeness(ball_bounds(logits, tokens), bounds.certificate["closeness"])
    return bounds


def measure_unique(case: UniqueCase, backend: Backend, factor: Fraction, extra: int = 0) -> Measurement:
    """b <= rank(P - Ñ), b = min(k, V - 1) tightened, from the float routes in the backend."""
    bound = unique_bound(case, factor, extra)
    return measurement(unique_bounds(case, bound, escalate=False, backend=backend), bound, "lower")


def judge_unique(case: UniqueCase, factor: Fraction, extra: int = 0) -> Judgement:
    """The same bound, re-decided with the exact and ball routes (see :func:`unique_bounds`)."""
    bound = unique_bound(case, factor, extra)
    return judgement(unique_bounds(case, bound, escalate=True), bound, "lower")


def exact_float_rows(case: UniqueCase) -> RankInterval:
    """Route 2 on a case: the exact rank of P̂ - Ñ, refused as input when k V is too large."""
    bounds = float_rows_bounds(*unique_instance(case))
    if bounds is None:
        raise InputError(f"instance: k x V above {EXACT_ENTRIES}, too large for the exact rank of P̂ - Ñ")
    return bounds


def measure_float_rows(case: UniqueCase, backend: Any, factor: Fraction) -> Measurement:
    """The mutant: b <= rank(P̂ - Ñ) for the float rows P̂ (zeros included), exactly."""
    return measurement(exact_float_rows(case), unique_bound(case, factor, 0), "lower")


def judge_float_rows(case: UniqueCase, factor: Fraction) -> Judgement:
    """The mutant, re-decided on the same exact rank."""
    return judgement(exact_float_rows(case), unique_bound(case, factor, 0), "lower")


# --------------------------------------------------------------------------- beyond positivity


def stochastic_weights(case: StochasticPattern) -> np.ndarray:
    """Integer weights whose row normalisation is P_T, with the instance's number of closed classes."""
    return er.construct_stochastic_with_classes(case.n, case.closed, case.seed, density=case.density)


def attracting_bounds(case: StochasticPattern) -> RankInterval:
    """rank(I - P_T) exactly: its rows times their totals are integers (python-flint)."""
    weights = stochastic_weights(case)
    rank, method = exact.exact_rank(np.diag(weights.sum(axis=1)) - weights)
    return RankInterval(rank, rank, method, method, True, {})


def all_components_rank(weights: np.ndarray) -> int:
    """The mutant's value: n minus every strongly connected component, closed or not."""
    return weights.shape[0] - er.nx.number_strongly_connected_components(er.positive_graph(weights))


def predicted_rank(case: StochasticPattern, mutant: bool) -> int:
    """n - a, a the attracting components (n minus all components for the mutant)."""
    weights = stochastic_weights(case)
    return all_components_rank(weights) if mutant else er.stochastic_defect_rank(weights)


def measure_attracting(case: StochasticPattern, backend: Any, factor: Fraction, mutant: bool = False) -> Measurement:
    """rank(I - P_T) == n - a, both sides exact."""
    return measurement(attracting_bounds(case), planted_side(predicted_rank(case, mutant), factor), "equal")


def judge_attracting(case: StochasticPattern, factor: Fraction, mutant: bool = False) -> Judgement:
    """rank(I - P_T) == n - a, re-decided on the same exact sides."""
    return judgement(attracting_bounds(case), planted_side(predicted_rank(case, mutant), factor), "equal")


def wcdd_matrix(case: WcddPattern, leaks: int | None = None) -> np.ndarray:
    """diag(w) - W for a pattern with one closed class, some of whose rows leak mass (become
    strictly dominant): every row reaches the closed class, and inside it every row reaches
    a leak, so the matrix is weakly chained diagonally dominant. ``leaks`` overrides the
    instance's number of leaking rows (0: no row is strictly dominant)."""
    weights = er.construct_stochastic_with_classes(case.n, 1, case.seed, density=case.density)
    closed = np.array(sorted(next(iter(er.nx.attracting_components(er.positive_graph(weights))))))
    count = case.leaks if leaks is None else leaks
    leaking = np.random.default_rng(case.seed).choice(closed, size=min(count, len(closed)), replace=False)
    totals = weights.sum(axis=1)
    totals[leaking] += 1  # mass that leaves the token set: those rows become strictly dominant
    return np.diag(totals) - weights


def wcdd_bounds(case: WcddPattern, chained: bool) -> tuple[RankInterval, int]:
    """The exact rank of the instance's matrix and its order n. Hypothesis (checked on integers,
    exactly; :class:`OutsideDomain` where it fails): weakly chained diagonally dominant, or for the
    mutant (``chained=False``) only weakly diagonally dominant with no leaking row. ``closeness`` is
    minus the smallest relative excess (|m_ii| − Σ_j≠i |m_ij|)/|m_ii| of a strictly dominant row (0
    where there is none)."""
    M = wcdd_matrix(case) if chained else wcdd_matrix(case, leaks=0)
    diagonal = np.abs(np.diag(M))
    off = np.abs(M).sum(axis=1) - diagonal
    if chained and not er.is_weakly_chained_diagonally_dominant(M):
        raise OutsideDomain("instance: the matrix is not weakly chained diagonally dominant (outside the domain)")
    if not chained and not np.all(diagonal >= off):
        raise OutsideDomain("instance: the matrix is not weakly diagonally dominant (outside the domain)")
    strict = diagonal > off
    closeness = -float(((diagonal - off)[strict] / diagonal[strict]).min()) if strict.any() else 0.0
    rank, method = exact.exact_rank(M)
    certificate = {"n": M.shape[0], "closeness": closeness}
    return RankInterval(rank, rank, method, method, True, certificate), M.shape[0]


def measure_wcdd(case: WcddPattern, backend: Any, factor: Fraction, chained: bool = True) -> Measurement:
    """n <= rank(M) (n tightened), the rank exact."""
    bounds, n = wcdd_bounds(case, chained)
    return measurement(bounds, tightened_integer_bound(n, factor, "lower"), "lower")


def judge_wcdd(case: WcddPattern, factor: Fraction, chained: bool = True) -> Judgement:
    """n <= rank(M), re-decided on the same exact rank."""
    bounds, n = wcdd_bounds(case, chained)
    return judgement(bounds, tightened_integer_bound(n, factor, "lower"), "lower")


# --------------------------------------------------------------------------- mini-batches


@dataclass(frozen=True)
class BatchRows:
    """The rows of Prop. A.7, as exact integers: ``error`` is (P - Ñ^B)[C^u_B] with row c scaled
    by d V T_c (P = (1 - δ)Ñ + δ/V, δ = n/d, T_c the count total), ``limit`` is
    (Ñ - Ñ^B)[C^u_B] scaled by T_c, ``support`` marks Ñ > 0."""

    error: np.ndarray
    limit: np.ndarray
    support: np.ndarray
    tokens: np.ndarray
    hypothesis: dict[str, Any]


@functools.lru_cache(maxsize=1024)
def _batch_language(case: MiniBatch) -> tuple[Any, Any]:
    counts = er.construct_zipf_language(case.V, case.contexts, case.seed, unique_share=case.unique_share)
    return counts, er.sample_batch(counts, case.batch_tokens, case.seed)


def batch_language(case: MiniBatch) -> tuple[Any, Any]:
    """The counts of the case's Zipfian language and of its batch (SciPy CSR; fresh copies of a per-process
    cache: the language is drawn by a loop over its contexts)."""
    counts, batch = _batch_language(case)
    return counts.copy(), batch.copy()


def batch_unique_count(case: MiniBatch) -> int:
    """|C^u_B| of the case (before its hypothesis is checked)."""
    return len(er.batch_unique_continuations(*batch_language(case))[1])


def batch_rows(case: MiniBatch) -> BatchRows:
    """Build the exact rows and check the hypothesis max|P - Ñ| < ε_B exactly (ε_B the smallest
    positive entry of Ñ on C^u_B): |P - Ñ| = δ |1/V - Ñ_cv|; an instance where it fails, or where
    C^u_B is empty, is :class:`OutsideDomain`. ``closeness`` is minus the hypothesis's relative
    margin (ε_B − max|P − Ñ|)/ε_B."""
    counts, batch = batch_language(case)
    rows, tokens = er.batch_unique_continuations(counts, batch)
    if len(tokens) == 0:
        raise OutsideDomain("instance: C^u_B is empty (no context with one batch token and several data tokens)")
    V = case.V
    delta = Fraction(case.delta)
    if not 0 < delta < 1:
        raise OutsideDomain(f"instance: δ = {case.delta} leaves P = (1 - δ)Ñ + δ/V non-positive (outside A.7)")
    n = counts[rows].toarray().astype(np.int64)
    totals = n.sum(axis=1)
    k = len(tokens)
    support = n > 0
    epsilon = min(Fraction(int(n[c][support[c]].min()), int(totals[c])) for c in range(k))
    largest = Fraction(0)
    for c in range(k):
        values = {Fraction(int(x), int(totals[c])) for x in np.unique(n[c])}
        largest = max(largest, *(delta * abs(Fraction(1, V) - x) for x in values))
    closeness = -float((epsilon - largest) / epsilon)
    hypothesis = {"epsilon_B": float(epsilon), "max_abs_P_minus_N": float(largest), "closeness": closeness}
    if not largest < epsilon:
        raise OutsideDomain(f"instance: max|P - Ñ| = {float(largest):.3g} >= ε_B = {float(epsilon):.3g} (outside A.7)")
    num, den = delta.numerator, delta.denominator
    scale = den * V * totals.astype(object)
    error = (den - num) * V * n.astype(object) + (num * totals.astype(object))[:, None]
    error[np.arange(k), tokens] -= scale
    limit = n.astype(object)
    limit[np.arange(k), tokens] -= totals.astype(object)
    return BatchRows(error, limit, support, tokens, hypothesis)


def batch_conclusions(parts: BatchRows, everywhere: bool) -> tuple[str, int, dict[str, Any]]:
    """Conclusions (i) and (iii) of Prop. A.7, exactly, as a count that must be 0: (i) the sign of
    P - Ñ^B is that of Ñ - Ñ^B where Ñ > 0 (everywhere, for the mutant), counting the flips; (iii)
    if the limit (Ñ - Ñ^B)[C^u_B, T_B] is weakly chained diagonally dominant, k - its exact rank.
    Returns what was counted, the first nonzero count (or 0), and the certificate."""
    mask = np.ones_like(parts.support) if everywhere else parts.support
    signs = np.sign(parts.error.astype(float)) != np.sign(parts.limit.astype(float))
    flips = np.argwhere(signs & mask)
    certificate: dict[str, Any] = {**parts.hypothesis, "k": len(parts.tokens), "sign_flips": len(flips)}
    if len(flips):
        c, v = (int(x) for x in flips[0])
        return (
            f"(i) fails: sign flips of P - Ñ^B against Ñ - Ñ^B (first at row {c}, token {v})",
            len(flips),
            certificate,
        )
    square = parts.limit[:, parts.tokens]
    wcdd = er.is_weakly_chained_diagonally_dominant(square.astype(np.int64))
    certificate["limit_is_wcdd"] = wcdd
    if not wcdd:
        return "(iii) vacuous: the limit is not weakly chained diagonally dominant", 0, certificate
    rank, how = exact.exact_rank(square)
    certificate["limit_rank"] = rank
    return (
        f"(iii) fails: k - rank of the weakly chained diagonally dominant limit ({how})",
        len(parts.tokens) - rank,
        certificate,
    )


def batch_bounds(parts: BatchRows) -> RankInterval:
    """rank(P - Ñ^B) on C^u_B exactly: a rank mod p of the integer rows from below, the rows and
    (P - Ñ^B)1 = 0 from above (P's rows sum to 1 exactly), fraction-free elimination for a gap."""
    k, V = parts.error.shape
    upper = min(k, V - 1)
    lower = exact.rank_mod_prime(parts.error)
    if lower == upper:
        return RankInterval(lower, upper, "rank mod p", "rows and (P - Ñ^B)1 = 0", True, {})
    rank, how = exact.exact_rank(parts.error)
    return RankInterval(rank, rank, how, how, True, {})


def batch_decision(case: MiniBatch, factor: Fraction, everywhere: bool = False) -> tuple[Measurement, Judgement]:
    """b <= rank(P - Ñ^B), b = min(|C^u_B|, V - 1) tightened, together with conclusions (i) and
    (iii). A failed conclusion is a violation (exact); the rank is then not compared."""
    parts = batch_rows(case)
    counted, failures, certificate = batch_conclusions(parts, everywhere)
    k, V = parts.error.shape
    bound = tightened_integer_bound(min(k, V - 1), factor, "lower")
    if failures:  # counted exactly: "failures <= 0" is violated, and the rank is not compared
        undecided = Measurement(math.nan, math.nan, math.nan, counted, certificate)
        exactly = Certification.EXACT
        return undecided, Judgement(float(failures), 0.0, -1, counted, certificate=certificate, certified_by=exactly)
    bounds = batch_bounds(parts)
    bounds = replace(bounds, certificate={**bounds.certificate, **certificate})
    return measurement(bounds, bound, "lower"), judgement(bounds, bound, "lower")


def measure_batch(case: MiniBatch, backend: Any, factor: Fraction, everywhere: bool = False) -> Measurement:
    """Prop. A.7 on one case, exactly (see :func:`batch_decision`)."""
    return batch_decision(case, factor, everywhere)[0]


def judge_batch(case: MiniBatch, factor: Fraction, everywhere: bool = False) -> Judgement:
    """Prop. A.7 on one instance, re-decided (see :func:`batch_decision`)."""
    return batch_decision(case, factor, everywhere)[1]


# --------------------------------------------------------------------------- log-probabilities


def low_rank_matrix(case: LowRank) -> np.ndarray:
    """The integer matrix A of the case's rank, before its scale (python-flint certifies the rank exactly)."""
    return er.construct_low_rank_integers(
        case.rows, case.columns, case.rank, case.seed, spread=case.spread, ones_column=case.ones_column
    )


def row_shift_instance(case: RowShift) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, λ, μ): the integer matrix A = HWᵀ and its two row shifts, drawn from ``shift_seed`` (μ times
    ``second``); with ``cancelling`` (and rank >= 1), W's first column is all ones and λ = −H[:, 0]."""
    H, W = er.construct_low_rank_factors(
        case.rows, case.columns, case.rank, case.seed, spread=case.spread, ones_column=case.cancelling
    )
    rng = np.random.default_rng(case.shift_seed)
    spread = case.shift_spread
    first = rng.integers(-spread, spread + 1, size=case.rows)
    second = rng.integers(-spread, spread + 1, size=case.rows) * case.second
    if case.cancelling and case.rank:
        first = -H[:, 0]
    return (H @ W.T).astype(np.int64), first, second


def factorization_residual(Z: Any, L: Any) -> tuple[float, float]:
    """``(‖L - Z - c1ᵀ‖_F, bound)`` with c = -lse(Z) recomputed in Z's namespace and dtype (unit roundoff
    u of L's dtype): zero in exact arithmetic (L = Z - lse(Z)1ᵀ). The bound adds the computed L's error
    (:func:`tolerance.log_softmax_error`), the recomputed lse's (γ_{V+4}(1 + max|Z_i| + |c_i|) per row) and
    the two subtractions (γ_2 (|L| + |Z| + |c|) per entry)."""
    xp = array_api_compat.array_namespace(Z, L)
    u = tolerance.unit_roundoff(L.dtype)
    top = xp.max(Z, axis=1, keepdims=True)
    c = -(top + xp.log(xp.sum(xp.exp(Z - top), axis=1, keepdims=True)))
    V = Z.shape[1]
    residual = float(xp.linalg.vector_norm(L - Z - c))
    Z, L, c = float64_copy(Z), float64_copy(L), float64_copy(c)[:, 0]
    per_row = tolerance.gamma(V + 4, u) * (1 + np.abs(Z).max(axis=1) + np.abs(c))
    per_entry = tolerance.gamma(2, u) * (np.abs(L) + np.abs(Z) + np.abs(c)[:, None])
    bound = tolerance.log_softmax_error(Z, L, u) + math.sqrt(V) * float(np.linalg.norm(per_row))
    return residual, bound + float(np.linalg.norm(per_entry))


def log_probability_bounds(Z: Any, L: Any, entry_error: float, right: np.ndarray) -> tuple[RankInterval, np.ndarray]:
    """rank(log softmax Z) for the real Z, and the computed singular values of L. Lower: SVD + Weyl
    margin in L's namespace and dtype (``entry_error`` bounds the computed L's error). Upper: L = [·, -z]
    ``right``ᵀ, so rank <= min(rows, rank_Q ``right``) (an integer matrix, exact), once the computed L
    passes the factorization residual check; an L that fails it is not within its rounding bound of the
    real one, so neither end is trusted."""
    lo, margin, sigma = exact.weyl_rank_lower_bound(L, tolerance.unit_roundoff(L.dtype), entry_error=entry_error)
    residual, bound = factorization_residual(Z, L)
    certificate = {"weyl_margin": margin, "factorization_residual": residual, "residual_bound": bound}
    if not residual <= bound:
        untrusted = "nothing (the computed L fails the factorization check: its SVD is not trusted)"
        return RankInterval(0, min(L.shape), untrusted, "the shape", False, certificate), sigma
    rank_right, how = exact.exact_rank(right)
    upper = f"the factorization through {right.shape[1]} columns (residual within rounding; {how} {rank_right})"
    lower = f"SVD + Weyl margin ({_label(L)})"
    return RankInterval(lo, min(L.shape[0], rank_right), lower, upper, False, certificate), sigma


def singular_value_closeness(sigma: np.ndarray, bound: int) -> float:
    """For "rank <= b": σ_{b+1}/σ_1 − 1, from the computed singular values (in [−1, 0]; −1 where the
    shape has no (b + 1)-th value or the matrix is zero, 0 for a bound below 0, which every rank
    violates): the value that must vanish, relative to the largest."""
    if bound < 0 or bound >= len(sigma) or not sigma[0] > 0:
        return 0.0 if bound < 0 else -1.0
    return float(sigma[bound] / sigma[0]) - 1.0


def _label(x: Any) -> str:
    """Where an array was computed: its namespace's library and its dtype (``numpy float64``)."""
    library = array_api_compat.array_namespace(x).__name__.split(".")[-1].replace("_", "-")
    return f"{library} {tolerance.dtype_name(x.dtype)}"


def log_softmax_interval(case: LowRank, backend: Backend | None = None) -> tuple[RankInterval, int, np.ndarray]:
    """rank(log softmax A) enclosed, with log softmax A computed in the backend (NumPy float64 by
    default), rank(A) exactly, and the computed singular values of log softmax A. The right factor is
    [Aᵀ, 1]: L = A - z1ᵀ = [A, -z][I, 1]ᵀ has rows in rowspace(A) + span(1). An A that the backend's
    dtype cannot hold exactly is no integer instance (:class:`OutsideDomain`)."""
    backend = numpy_float64() if backend is None else backend
    A = low_rank_matrix(case) * case.scale
    rank_A, _ = exact.exact_rank(A)
    Z = backend.asarray(A)
    if not np.array_equal(float64_copy(Z), A):
        raise OutsideDomain(f"instance: A has an integer that {backend.dtype_name} cannot hold exactly")
    L = er.log_softmax(Z)
    right = np.vstack([A, np.ones((1, A.shape[1]), dtype=np.int64)]).T
    u = tolerance.unit_roundoff(backend.dtype)
    error = tolerance.log_softmax_error(float64_copy(Z), float64_copy(L), u)
    bounds, sigma = log_probability_bounds(Z, L, error, right)
    return replace(bounds, certificate={**bounds.certificate, "rank_A": rank_A}), rank_A, sigma


def log_softmax_decision(
    case: LowRank, factor: Fraction, drop: int, backend: Backend | None = None
) -> tuple[Measurement, Judgement]:
    """rank(log softmax A) <= rank(A) + 1 (minus ``drop`` for the mutant), tightened
    (:func:`log_softmax_interval`); ``closeness`` from the singular values
    (:func:`singular_value_closeness`)."""
    bounds, rank_A, sigma = log_softmax_interval(case, backend)
    bound = tightened_integer_bound(rank_A + 1 - drop, factor, "upper")
    return with_closeness(bounds, singular_value_closeness(sigma, bound)).sides(bound, "upper")


def measure_log_softmax(case: LowRank, backend: Backend, factor: Fraction, drop: int = 0) -> Measurement:
    """rank(log softmax A) <= rank(A) + 1, computed in the backend (see :func:`log_softmax_decision`)."""
    return log_softmax_decision(case, factor, drop, backend)[0]


def judge_log_softmax(case: LowRank, factor: Fraction, drop: int = 0) -> Judgement:
    """rank(log softmax A) <= rank(A) + 1, re-decided in NumPy float64 (see :func:`log_softmax_decision`)."""
    return log_softmax_decision(case, factor, drop)[1]


def factor_matrices(case: Factors) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian factors (H times the case's scale, W) of a Factors case, in float64."""
    rng = np.random.default_rng(case.seed)
    return case.scale * rng.standard_normal((case.rows, case.rank)), rng.standard_normal((case.columns, case.rank))


def bottleneck_interval(case: Factors, backend: Backend | None = None) -> tuple[RankInterval, np.ndarray]:
    """rank(log softmax(HWᵀ)) enclosed, with H and W rounded to the backend's dtype and Z, L computed
    there (NumPy float64 by default), and the computed singular values of L. The right factor is the
    rounded [W, 1] read exactly (rows of dyadic rationals, scaled to integers)."""
    backend = numpy_float64() if backend is None else backend
    H, W = (backend.asarray(x) for x in factor_matrices(case))
    Z = H @ W.T
    L = er.log_softmax(Z)
    u = tolerance.unit_roundoff(backend.dtype)
    H_np, W_np = float64_copy(H), float64_copy(W)
    product = tolerance.gamma(case.rank + 2, u) * (np.abs(H_np) @ np.abs(W_np).T)  # |fl(z_ij) - z_ij|
    through = product + product.max(axis=1, keepdims=True)  # an error in z_i moves L_ij and lse(z_i)
    entry_error = tolerance.log_softmax_error(float64_copy(Z), float64_copy(L), u) + float(np.linalg.norm(through))
    right = integer_rows(np.hstack([W_np, np.ones((W_np.shape[0], 1))]))
    return log_probability_bounds(Z, L, entry_error, right)


def bottleneck_decision(
    case: Factors, factor: Fraction, extra: int, backend: Backend | None = None
) -> tuple[Measurement, Judgement]:
    """rank(log softmax(HWᵀ)) <= d + 1 (plus ``extra``: negative for the mutant), tightened
    (:func:`bottleneck_interval`); ``closeness`` from the singular values (:func:`singular_value_closeness`)."""
    bounds, sigma = bottleneck_interval(case, backend)
    bound = tightened_integer_bound(case.rank + 1 + extra, factor, "upper")
    return with_closeness(bounds, singular_value_closeness(sigma, bound)).sides(bound, "upper")


def measure_bottleneck(case: Factors, backend: Backend, factor: Fraction, extra: int = 0) -> Measurement:
    """rank(log softmax(HWᵀ)) <= d + 1, computed in the backend (see :func:`bottleneck_decision`)."""
    return bottleneck_decision(case, factor, extra, backend)[0]


def judge_bottleneck(case: Factors, factor: Fraction, extra: int = 0) -> Judgement:
    """rank(log softmax(HWᵀ)) <= d + 1, re-decided in NumPy float64 (see :func:`bottleneck_decision`)."""
    return bottleneck_decision(case, factor, extra)[1]


def row_shift_bounds(case: RowShift) -> tuple[RankInterval, float]:
    """|rank(A + λ1ᵀ) - rank(A + μ1ᵀ)| from two exact ranks over the integers (python-flint), and the
    relative gap of the lower-ranked shift: its smallest nonzero singular value over its largest (1 for
    rank 0), how near it is to losing a rank."""
    A, lam, mu = row_shift_instance(case)
    shifted = [er.row_shift(A, shift) for shift in (lam, mu)]
    (r1, method), (r2, _) = (exact.exact_rank(M) for M in shifted)
    gap = abs(r1 - r2)
    lower, r = (shifted[0], r1) if r1 <= r2 else (shifted[1], r2)
    sigma = np.linalg.svd(lower.astype(np.float64), compute_uv=False)
    relative_gap = float(sigma[r - 1] / sigma[0]) if r else 1.0
    return RankInterval(gap, gap, method, method, True, {"rank_first": r1, "rank_second": r2}), relative_gap


def row_shift_decision(case: RowShift, factor: Fraction, allowed: int) -> tuple[Measurement, Judgement]:
    """|rank(A + λ1ᵀ) - rank(A + μ1ᵀ)| <= ``allowed`` (tightened); ``closeness`` = gap − bound − relative
    gap (at gap = bound, minus how far the lower-ranked shift is from losing a rank)."""
    bounds, relative_gap = row_shift_bounds(case)
    bound = tightened_integer_bound(allowed, factor, "upper")
    closeness = bounds.lo - bound - relative_gap
    return with_closeness(bounds, closeness).sides(bound, "upper")


def measure_row_shift(case: RowShift, backend: Any, factor: Fraction, allowed: int = 1) -> Measurement:
    """|rank(A + λ1ᵀ) - rank(A + μ1ᵀ)| <= ``allowed`` (tightened), both ranks exact."""
    return row_shift_decision(case, factor, allowed)[0]


def judge_row_shift(case: RowShift, factor: Fraction, allowed: int = 1) -> Judgement:
    """|rank(A + λ1ᵀ) - rank(A + μ1ᵀ)| <= ``allowed``, re-decided on the same exact ranks."""
    return row_shift_decision(case, factor, allowed)[1]


# --------------------------------------------------------------------------- quantities (the public API)


def _pinned(n: int, how: str) -> RankInterval:
    return RankInterval(n, n, how, how, exact=True)


def _unique_counts(ctx: Context) -> tuple[int, int]:
    """(k, V) of a unique-continuation case."""
    logits, tokens = ctx.once("unique instance", lambda: unique_instance(ctx.case))
    return len(tokens), logits.shape[1]


def _prediction_error_rank(ctx: Context, escalate: bool) -> RankInterval:
    """rank(P − Ñ) from the float routes in the backend, or (``escalate``) with the exact and ball
    routes that settle min(k, V − 1) (see :func:`unique_bounds`)."""
    bound = unique_bound(ctx.case, Fraction(1), 0)
    return unique_bounds(ctx.case, bound, escalate=escalate, backend=None if escalate else ctx.backend)


prediction_error_rank = quantity(
    "rank(P − Ñ)",
    lambda ctx: _prediction_error_rank(ctx, escalate=False),
    lambda ctx: _prediction_error_rank(ctx, escalate=True),
    integer=True,
    doc="the rank of the prediction error P − Ñ of a unique-continuation case, certified at both ends",
)
unique_tokens = quantity(
    "k",
    lambda ctx: _pinned(_unique_counts(ctx)[0], "the case"),
    lambda ctx: _pinned(_unique_counts(ctx)[0], "the case"),
    integer=True,
    doc="the number of distinct tokens that are each the only observed continuation of some context",
)
vocabulary = quantity(
    "V",
    lambda ctx: _pinned(_unique_counts(ctx)[1], "the case"),
    lambda ctx: _pinned(_unique_counts(ctx)[1], "the case"),
    integer=True,
    doc="the vocabulary size V of a unique-continuation case",
)
log_softmax_rank = quantity(
    "rank(log softmax A)",
    lambda ctx: log_softmax_interval(ctx.case, ctx.backend)[0],
    lambda ctx: log_softmax_interval(ctx.case)[0],
    integer=True,
    doc="the rank of log softmax(A) for an integer matrix A of chosen rank (a LowRank case)",
)


def _logit_matrix(case: LowRank | RowShift) -> np.ndarray:
    """The integer matrix A of a LowRank case (times its scale) or of a RowShift case."""
    return row_shift_instance(case)[0] if isinstance(case, RowShift) else low_rank_matrix(case) * case.scale


def _exact_rank_of(M: np.ndarray) -> RankInterval:
    rank, how = exact.exact_rank(M)
    return _pinned(int(rank), how)


logit_rank = quantity(
    "rank A",
    lambda ctx: _exact_rank_of(_logit_matrix(ctx.case)),
    lambda ctx: _exact_rank_of(_logit_matrix(ctx.case)),
    integer=True,
    doc="the exact rank of the integer matrix A of a LowRank or RowShift case (python-flint)",
)
shifted_rank = quantity(
    "rank(A + λ1ᵀ)",
    lambda ctx: _exact_rank_of(er.row_shift(*row_shift_instance(ctx.case)[:2])),
    lambda ctx: _exact_rank_of(er.row_shift(*row_shift_instance(ctx.case)[:2])),
    integer=True,
    doc="the exact rank of A shifted by its first row shift λ (a RowShift case; python-flint)",
)
bottleneck_rank = quantity(
    "rank(log softmax(HWᵀ))",
    lambda ctx: bottleneck_interval(ctx.case, ctx.backend)[0],
    lambda ctx: bottleneck_interval(ctx.case)[0],
    integer=True,
    doc="the rank of the log-probabilities of rank-d logits HWᵀ (a Factors case)",
)
hidden_size = quantity(
    "d",
    lambda ctx: _pinned(ctx.case.rank, "the case"),
    lambda ctx: _pinned(ctx.case.rank, "the case"),
    integer=True,
    doc="the inner dimension d of a Factors case",
)
shift_rank_gap = quantity(
    "|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)|",
    lambda ctx: row_shift_bounds(ctx.case)[0],
    lambda ctx: row_shift_bounds(ctx.case)[0],
    integer=True,
    doc="the gap between the exact ranks of two row shifts of A (a RowShift case)",
)

# --------------------------------------------------------------------------- references (issue 18)
#
# Both sides of every claim the slow, obviously right way, on the instance as the backend built it
# and sharing nothing with the measures and judges beyond it: dense matrices, exact ranks over the
# rationals (python-flint's fmpq_mat) for the integer and rational claims; for the softmax claims the
# logits HWᵀ formed exactly from the built factors (rational products), P or log softmax in
# REFERENCE_BITS-bit balls, the entry P_ct − 1 of P − Ñ as minus the sum of the row's other entries
# (no cancellation), and the rank by Gaussian elimination in balls (ball_rank). Counts (k, the
# attracting classes, C^u_B) are recounted in plain Python. Small sizes only (the tests run them at
# V <= 64).

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
    """The exact rank of a dense nonempty matrix of integers or Fractions, over the rationals (fmpq_mat)."""
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


def built_factors(H: np.ndarray, W: np.ndarray, backend: Backend) -> tuple[np.ndarray, np.ndarray]:
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


def unique_token_count(case: UniqueCase) -> int:
    """k recounted from the case: its ``k``, or for a corpus the distinct tokens that are each the only
    observed continuation of some context, read off the count matrix row by row."""
    if isinstance(case, UniqueContinuation):
        return case.k
    stream = corpus_stream(case.corpus, case.level)
    counts = er.ngram_counts(stream.ids, case.order, stream.V)[0].tocsr()
    starts, ends = counts.indptr[:-1], counts.indptr[1:]
    return len({int(counts.indices[s]) for s, e in zip(starts, ends, strict=True) if e - s == 1})


def reference_unique(case: UniqueCase, backend: Backend) -> Reference:
    """min(k, V − 1) (k recounted) against rank(P − Ñ) of the dense P = softmax(HWᵀ) in balls."""
    logits, tokens = unique_instance(case)
    H, W = built_factors(logits.H, logits.W, backend)
    rank = _ball_prediction_error_rank(H.tobytes(), W.tobytes(), H.shape[1], tuple(int(t) for t in tokens))
    bound = min(unique_token_count(case), W.shape[0] - 1)
    return Reference(bound, rank, f"dense P − Ñ in {REFERENCE_BITS}-bit balls, rank by elimination in balls")


def reference_attracting(case: StochasticPattern, backend: Backend) -> Reference:
    """rank(I − P_T) over the rationals (P_T = the weights over their row totals, as Fractions) against n
    minus the closed classes, found by reachability: i is in a closed class when every state it reaches
    reaches it back, and the classes are the distinct sets of states the recurrent ones reach."""
    weights = stochastic_weights(case).tolist()
    n = len(weights)
    I_minus_P = [[int(i == j) - Fraction(w, sum(row)) for j, w in enumerate(row)] for i, row in enumerate(weights)]
    reach = []
    for i in range(n):
        seen, frontier = {i}, [i]
        while frontier:
            state = frontier.pop()
            for j, w in enumerate(weights[state]):
                if w > 0 and j not in seen:
                    seen.add(j)
                    frontier.append(j)
        reach.append(frozenset(seen))
    closed = {reach[i] for i in range(n) if all(i in reach[j] for j in reach[i])}
    method = "dense I − P_T in Fractions; closed classes by reachability"
    return Reference(rational_rank(I_minus_P), n - len(closed), method)


def reference_wcdd(case: WcddPattern, backend: Backend) -> Reference:
    """n against the rank of the dense integer matrix over the rationals."""
    M = wcdd_matrix(case).tolist()
    return Reference(len(M), rational_rank(M), "dense diag(w) − W, rank over the rationals")


def reference_batch(case: MiniBatch, backend: Backend) -> Reference:
    """min(|C^u_B|, V − 1) against rank(P − Ñ^B) on C^u_B, in Fractions: C^u_B recounted row by row (one
    distinct batch token and several data tokens; the first such context for each batch token),
    P = (1 − δ) n/T + δ/V from the counts."""
    counts, batch_counts = batch_language(case)
    full, batch = counts.toarray(), batch_counts.toarray()
    delta, V = Fraction(case.delta), case.V
    chosen: dict[int, int] = {}
    for c in range(full.shape[0]):
        in_batch = [v for v in range(V) if batch[c, v] > 0]
        if len(in_batch) == 1 and sum(1 for v in range(V) if full[c, v] > 0) >= 2:
            chosen.setdefault(in_batch[0], c)
    rows = []
    for t, c in chosen.items():
        total = int(full[c].sum())
        rows.append([(1 - delta) * Fraction(int(full[c, v]), total) + delta / V - (v == t) for v in range(V)])
    return Reference(min(len(chosen), V - 1), rational_rank(rows), "dense P − Ñ^B in Fractions, C^u_B recounted")


@functools.lru_cache(maxsize=512)
def _log_softmax_rank(Z: tuple[tuple[flint.fmpq, ...], ...]) -> int:
    """rank(log softmax Z) for exact rational logits, L = Z − lse(Z)1ᵀ in balls, cached (every backend
    builds the same integer A, and the float64 ones the same factors)."""
    with exact.precision(REFERENCE_BITS):
        rows = []
        for z in Z:
            top = max(z)
            lse = flint.arb(top) + sum((flint.arb(x - top).exp() for x in z), flint.arb(0)).log()
            rows.append([flint.arb(x) - lse for x in z])
        return ball_rank(rows)


def reference_log_softmax(case: LowRank, backend: Backend) -> Reference:
    """rank(log softmax A) in balls against rank(A) + 1, rank(A) over the rationals (every backend holds
    the integer A exactly, or the case is outside the domain and never measured)."""
    A = low_rank_matrix(case) * case.scale
    Z = tuple(tuple(flint.fmpq(int(x)) for x in row) for row in A)
    rank = _log_softmax_rank(Z)
    return Reference(rank, rational_rank(A.tolist()) + 1, f"dense log softmax A in {REFERENCE_BITS}-bit balls")


def reference_bottleneck(case: Factors, backend: Backend) -> Reference:
    """rank(log softmax(HWᵀ)) in balls, HWᵀ exact from the built factors, against d + 1."""
    H, W = built_factors(*factor_matrices(case), backend)
    rank = _log_softmax_rank(tuple(tuple(row) for row in exact_logits(H, W)))
    return Reference(rank, case.rank + 1, f"dense log softmax(HWᵀ) in {REFERENCE_BITS}-bit balls")


def reference_row_shift(case: RowShift, backend: Backend) -> Reference:
    """|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)| from two exact ranks of the shifted matrices (Python ints) against 1."""
    A, lam, mu = row_shift_instance(case)
    ranks = [
        rational_rank([[int(a) + int(s) for a in row] for row, s in zip(A, shift, strict=True)]) for shift in (lam, mu)
    ]
    return Reference(abs(ranks[0] - ranks[1]), 1, "two dense shifted matrices, ranks over the rationals")


REFERENCES: dict[str, Callable[[Any, Backend], Reference]] = {
    "unique-continuation": reference_unique,
    "attracting-components": reference_attracting,
    "wcdd": reference_wcdd,
    "mini-batch": reference_batch,
    "log-softmax": reference_log_softmax,
    "row-shift": reference_row_shift,
    "bottleneck": reference_bottleneck,
}


# --------------------------------------------------------------------------- registration


#: NumPy only by default: sparse counts, graphs and exact ranks (the log-softmax ranks opt in).
_SHARED = {"array_api": False, "random_instances": lambda V, n, seed: []}
ERROR_RANK = Family("error-rank", **_SHARED)
LOGPROB_RANK = Family("logprob-rank", **_SHARED)


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


def _low_rank_witnesses(V: int) -> list[LowRank]:
    """Ranks 0 (A = 0), 1, 5 and 39 at two scales; full rank (rank(A) + 1 exceeds the shape); a ones
    column (1 in the row space: rank(log softmax A) <= rank A); one row, and three rows of two columns."""
    columns = min(V, 80)
    return [
        *(
            LowRank(rows=40, columns=columns, rank=r, seed=0, spread=3, scale=s)
            for r in (0, 1, 5, min(V, 39))
            for s in (1, 7)
            if r <= min(V, 40)
        ),
        LowRank(rows=40, columns=columns, rank=min(40, columns), seed=1),
        LowRank(rows=40, columns=columns, rank=min(5, columns), seed=2, ones_column=True),
        LowRank(rows=1, columns=min(V, 3), rank=1, seed=3),
        LowRank(rows=3, columns=2, rank=2, seed=4, spread=1),
    ]


def _low_rank_random(V: int, n: int, seed: int) -> list[LowRank]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        rows, columns = int(rng.integers(1, 41)), min(V, 256)
        cases.append(
            LowRank(
                rows=rows,
                columns=columns,
                rank=int(rng.integers(0, min(rows, columns) + 1)),
                seed=int(rng.integers(2**31)),
                spread=int(rng.integers(1, 6)),
                scale=int(rng.choice([1, 3, 50])),
                ones_column=bool(rng.random() < 0.25),
            )
        )
    return cases


def _row_shift_witnesses(V: int) -> list[RowShift]:
    """Ranks 0, 3 and 29 with two shift seeds, μ = 0 or not; λ cancelling a rank-one term of A (rank 3);
    two rows and two columns, and three rows, with a cancelling shift."""
    return [
        *(
            RowShift(rows=30, columns=min(V, 50), rank=r, seed=0, spread=2, shift_seed=s, shift_spread=5, second=w)
            for r in sorted({0, min(3, V), min(V, 29)})
            for s in (0, 1)
            for w in (0, 1)
        ),
        *(RowShift(rows=30, columns=min(V, 50), rank=min(3, V), seed=1, second=w, cancelling=True) for w in (0, 1)),
        RowShift(rows=2, columns=2, rank=1, seed=2, spread=1, shift_spread=2, cancelling=True),
        RowShift(rows=3, columns=min(V, 3), rank=2, seed=3, spread=1, shift_spread=1, second=0, cancelling=True),
    ]


def _factor_witnesses(V: int) -> list[Factors]:
    """d = 1, 4, 16 at two scales; d = min(60, columns) (d + 1 exceeds the shape); two rows."""
    return [
        *(
            Factors(rows=60, columns=min(V, 120), rank=d, seed=0, scale=s)
            for d in (1, 4, 16)
            for s in (0.1, 3.0)
            if d < min(V, 60)
        ),
        Factors(rows=60, columns=min(V, 120), rank=min(V, 60), seed=1, scale=1.0),
        Factors(rows=2, columns=min(V, 3), rank=1, seed=2, scale=30.0),
    ]


def _factor_random(V: int, n: int, seed: int) -> list[Factors]:
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        rows, columns = int(rng.integers(1, 61)), min(V, 256)
        cases.append(
            Factors(
                rows=rows,
                columns=columns,
                rank=int(rng.integers(1, min(rows, columns) + 1)),
                seed=int(rng.integers(2**31)),
                scale=float(10 ** rng.uniform(-1, math.log10(30))),
            )
        )
    return cases


def _stochastic_witnesses(V: int) -> list[StochasticPattern]:
    """1, 2 and n/3 closed classes; every state closed (P_T = I, rank 0); density 0 (cycles and chains
    only); one state."""
    n = min(V, 60)
    return [
        *(StochasticPattern(n=n, closed=c, seed=s, density=0.2) for c in (1, 2, n // 3 or 1) for s in (0, 1)),
        StochasticPattern(n=n, closed=n, seed=2, density=0.2),
        StochasticPattern(n=n, closed=1, seed=3, density=0.0),
        StochasticPattern(n=1, closed=1, seed=4),
    ]


def _wcdd_witnesses(V: int) -> list[WcddPattern]:
    """One leaking row (four seeds); every closed row leaking; density 0 (a single cycle, the longest
    chains); one state."""
    n = min(V, 60)
    return [
        *(WcddPattern(n=n, leaks=1, seed=s, density=0.1) for s in range(4)),
        WcddPattern(n=n, leaks=n, seed=4, density=0.1),
        WcddPattern(n=n, leaks=1, seed=5, density=0.0),
        WcddPattern(n=1, leaks=1, seed=6),
    ]


def _batch_witnesses(V: int) -> list[MiniBatch]:
    """Three Zipfian languages over min(V, 2048) tokens, and one over three tokens (|C^u_B| >= V − 1:
    the bound min(|C^u_B|, V − 1) is V − 1)."""
    return [
        *(
            MiniBatch(V=min(V, 2048), contexts=600, seed=s, unique_share=0.3, batch_tokens=400, delta=1e-3)
            for s in range(3)
        ),
        MiniBatch(V=min(V, 3), contexts=60, seed=0, unique_share=0.3, batch_tokens=40, delta=1e-3),
    ]


def _small(case: LowRank | Factors) -> bool:
    return case.rows <= 3 or case.columns <= 3


def _with_instance(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """A boundary predicate that builds the instance: false where the build refuses it."""

    def predicate(case: Any) -> bool:
        try:
            return test(case)
        except InputError:
            return False

    return predicate


def _transient_states(case: StochasticPattern) -> bool:
    weights = stochastic_weights(case)
    closed = sum(len(c) for c in er.nx.attracting_components(er.positive_graph(weights)))
    return closed < case.n


#: Where the claims of these families range (the public API): unique continuations (and corpus
#: contexts), stochastic and WCDD patterns, mini-batches, integer matrices of chosen rank, row shifts
#: of them, and Gaussian factors H, W; each with the boundary classes its strategy reaches
#: (``docs/error_rank.md``, "Where the search looks").
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
)
stochastic_patterns = Cases(
    stochastic_instances,
    _stochastic_witnesses,
    boundary={
        "n <= 3": lambda c: c.n <= 3,
        "one closed class": lambda c: c.closed == 1,
        "every state closed (P_T = I)": lambda c: c.closed == c.n,
        "density 0 (cycles and chains only)": lambda c: c.density == 0,
        "transient states": _with_instance(_transient_states),
    },
)
wcdd_patterns = Cases(
    wcdd_instances,
    _wcdd_witnesses,
    boundary={
        "n <= 3": lambda c: c.n <= 3,
        "one leaking row": lambda c: c.leaks == 1,
        "every row may leak (leaks = n)": lambda c: c.leaks == c.n,
        "density 0 (a single cycle)": lambda c: c.density == 0,
    },
)
mini_batches = Cases(
    batch_instances,
    _batch_witnesses,
    boundary={
        "V = 2 or 3": lambda c: c.V <= 3,
        "|C^u_B| >= V − 1 (the bound is V − 1)": _with_instance(lambda c: batch_unique_count(c) >= c.V - 1),
        "|C^u_B| = 1": _with_instance(lambda c: batch_unique_count(c) == 1),
        "δ = 1e-8": lambda c: c.delta == 1e-8,
    },
)
low_rank_matrices = Cases(
    low_rank_instances,
    _low_rank_witnesses,
    _low_rank_random,
    boundary={
        "1 to 3 rows or 2 or 3 columns": _small,
        "A = 0 (rank 0)": lambda c: c.rank == 0,
        "full rank (rank A + 1 exceeds the shape)": lambda c: c.rank == min(c.rows, c.columns),
        "1 in the row space of A (a ones column)": lambda c: c.ones_column and c.rank >= 1,
        "scale 50": lambda c: c.scale == 50,
    },
)
row_shifts = Cases(
    row_shift_instances,
    _row_shift_witnesses,
    boundary={
        "1 to 3 rows and 2 or 3 columns": lambda c: c.rows <= 3 and c.columns <= 3,
        "A = 0 (rank 0)": lambda c: c.rank == 0,
        "full rank": lambda c: c.rank == min(c.rows, c.columns),
        "μ = 0": lambda c: c.second == 0 or c.shift_spread == 0,
        "λ cancels a rank-one term of A": lambda c: c.cancelling and c.rank >= 1,
    },
)
factors = Cases(
    lambda: low_rank_instances(factors=True),
    _factor_witnesses,
    _factor_random,
    boundary={
        "1 to 3 rows or 2 or 3 columns": _small,
        "d = 1": lambda c: c.rank == 1,
        "d >= min(rows, columns) (d + 1 exceeds the shape)": lambda c: c.rank >= min(c.rows, c.columns),
        "scale 30": lambda c: c.scale == 30,
    },
)


unique_continuation = ERROR_RANK.claim(
    "unique-continuation",
    title="Unique continuations force a high-rank prediction error",
    source=f"{SEED_000}, Prop. A.5 (App. A.3; proof in B.2)",
    statement="rank(P − Ñ) ≥ min(k, V − 1) for every strictly positive P, where k distinct tokens are "
    "each the only observed continuation of some context",
    domain="P = softmax(HWᵀ) (strictly positive in exact arithmetic); any V, k, D",
    relation=Relation.AT_MOST,
    direction="lower",
    array_api=True,
    measure=measure_unique,
    judge_exactly=judge_unique,
    cases=unique_continuations,
    reference=REFERENCES["unique-continuation"],
)
attracting = ERROR_RANK.claim(
    "attracting-components",
    title="Beyond positivity: the rank of I − P_T counts attracting classes",
    source="rankwall (replaces Prop. A.5's k = V case when P has zeros)",
    statement="rank(I − P_T) = n − a for a row-stochastic n × n matrix P_T, a = number of attracting "
    "components of the graph of its positive entries",
    domain="row-stochastic P_T with rational entries (zeros allowed)",
    relation=Relation.EQUAL,
    measure=measure_attracting,
    judge_exactly=judge_attracting,
    cases=stochastic_patterns,
    reference=REFERENCES["attracting-components"],
)
wcdd = ERROR_RANK.claim(
    "wcdd",
    title="Weakly chained diagonally dominant submatrices are nonsingular",
    source="rankwall (replaces Prop. A.5's dominance argument when P has zeros)",
    statement="rank(M) ≥ n for a weakly chained diagonally dominant n × n matrix M (so rank n)",
    domain="integer matrices diag(w) − W built from a substochastic pattern with leaking rows",
    relation=Relation.AT_MOST,
    direction="lower",
    measure=measure_wcdd,
    judge_exactly=judge_wcdd,
    cases=wcdd_patterns,
    reference=REFERENCES["wcdd"],
)
mini_batch = ERROR_RANK.claim(
    "mini-batch",
    title="Mini-batch prediction errors stay high-rank near convergence",
    source=f"{SEED_000}, Prop. A.7 and Cor. A.8 (App. A.3.1; proof in B.3)",
    statement="if max|P − Ñ| < ν_B (the smallest positive entry of Ñ on C^u_B) and P > 0, then (i) the sign "
    "pattern of P − Ñ^B where Ñ > 0 is that of Ñ − Ñ^B, (ii) rank(P − Ñ^B) ≥ min(|C^u_B|, V − 1), and (iii) a "
    "weakly chained diagonally dominant limit (Ñ − Ñ^B)[C^u_B, T_B] is nonsingular",
    domain="Zipfian languages, batches drawn without replacement, P = (1 − δ)Ñ + δ/V with δ > 0 (exact rationals)",
    relation=Relation.AT_MOST,
    direction="lower",
    measure=measure_batch,
    judge_exactly=judge_batch,
    cases=mini_batches,
    reference=REFERENCES["mini-batch"],
)
log_softmax_claim = LOGPROB_RANK.claim(
    "log-softmax",
    title="log softmax adds at most one to the rank",
    source=f"{SEED_000}, Cor. A.3 (App. A.2)",
    statement="rank(log softmax(A)) ≤ rank(A) + 1",
    domain="integer matrices A of chosen rank (exact rank by python-flint), times an integer scale",
    relation=Relation.AT_MOST,
    direction="upper",
    array_api=True,
    measure=measure_log_softmax,
    judge_exactly=judge_log_softmax,
    cases=low_rank_matrices,
    reference=REFERENCES["log-softmax"],
)
row_shift = LOGPROB_RANK.claim(
    "row-shift",
    title="Row shifts change the rank by at most one",
    source=f"{SEED_001}, Property 2",
    statement="|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)| ≤ 1 for all vectors λ, μ",
    domain="integer A of chosen rank, integer shifts (exact ranks by python-flint)",
    relation=Relation.AT_MOST,
    direction="upper",
    measure=measure_row_shift,
    judge_exactly=judge_row_shift,
    cases=row_shifts,
    reference=REFERENCES["row-shift"],
)
bottleneck = LOGPROB_RANK.claim(
    "bottleneck",
    title="Rank-d logits give log-probabilities of rank at most d + 1",
    source=f"{SEED_001}, Corollary 1 (the softmax bottleneck)",
    statement="rank(log softmax(HWᵀ)) ≤ d + 1 for H ∈ ℝ^{N×d}, W ∈ ℝ^{V×d}",
    domain="Gaussian factors, scales 0.1 to 30",
    relation=Relation.AT_MOST,
    direction="upper",
    array_api=True,
    measure=measure_bottleneck,
    judge_exactly=judge_bottleneck,
    cases=factors,
    reference=REFERENCES["bottleneck"],
)

unique_continuation.with_mutant(
    "at-least-k-plus-1",
    statement="rank(P − Ñ) ≥ min(k + 1, V)  (false: only k rows, and (P − Ñ)1 = 0)",
    measure=lambda i, b, f: measure_unique(i, b, f, extra=1),
    judge_exactly=lambda i, f: judge_unique(i, f, extra=1),
)
unique_continuation.with_mutant(
    "float-rows",
    statement="rank(P̂ − Ñ) ≥ min(k, V − 1) for the computed float rows P̂, zeros from underflow included  "
    "(false: underflow splits the graph of P̂_T into several attracting classes)",
    domain="P̂ = the float64 softmax(HWᵀ) read exactly, k V ≤ 2^14",
    array_api=False,
    measure=measure_float_rows,
    judge_exactly=judge_float_rows,
    witnesses=lambda V: [UniqueContinuation(V=min(V, 6), k=min(V, 6), D=2, seed=0, scale=1e4)],
    strategy=lambda: unique_continuation_instances(k_equals_V=True),
)
attracting.with_mutant(
    "all-components",
    statement="rank(I − P_T) = n − (number of strongly connected components)  (false: transient classes "
    "add no kernel vector)",
    measure=lambda i, b, f: measure_attracting(i, b, f, mutant=True),
    judge_exactly=lambda i, f: judge_attracting(i, f, mutant=True),
)
wcdd.with_mutant(
    "weak-dominance-suffices",
    statement="rank(M) ≥ n for a weakly diagonally dominant M with no strictly dominant row  (false: "
    "diag(w) − W has the kernel vector 1)",
    domain="integer matrices diag(w) − W of a stochastic pattern, no leaking row",
    measure=lambda i, b, f: measure_wcdd(i, b, f, chained=False),
    judge_exactly=lambda i, f: judge_wcdd(i, f, chained=False),
)
mini_batch.with_mutant(
    "signs-everywhere",
    statement="(i) on every entry, not only where Ñ > 0  (false: off the support P − Ñ^B = δ/V > 0 = Ñ − Ñ^B)",
    measure=lambda i, b, f: measure_batch(i, b, f, everywhere=True),
    judge_exactly=lambda i, f: judge_batch(i, f, everywhere=True),
)
row_shift.with_mutant(
    "preserves-rank",
    statement="rank(A + λ1ᵀ) = rank(A + μ1ᵀ)  (false: a shift can add the direction 1)",
    measure=lambda i, b, f: measure_row_shift(i, b, f, allowed=0),
    judge_exactly=lambda i, f: judge_row_shift(i, f, allowed=0),
)
log_softmax_claim.with_mutant(
    "no-extra-rank",
    statement="rank(log softmax(A)) ≤ rank(A)  (false: the normaliser adds a direction)",
    measure=lambda i, b, f: measure_log_softmax(i, b, f, drop=1),
    judge_exactly=lambda i, f: judge_log_softmax(i, f, drop=1),
)
bottleneck.with_mutant(
    "at-most-d",
    statement="rank(log softmax(HWᵀ)) ≤ d  (false: the normaliser adds the direction 1)",
    measure=lambda i, b, f: measure_bottleneck(i, b, f, extra=-1),
    judge_exactly=lambda i, f: judge_bottleneck(i, f, extra=-1),
)

#: The theorems and lemmas of ``docs/error_rank.md`` (collected by ``checks/fidelity.py``).
_TESTS = "tests/test_error_rank.py::"
STATEMENTS: tuple[Statement, ...] = (
    Statement("thm-unique", "ER.1", "error_rank", "seed 000, Prop. A.5 (statement lost, proof B.2 empty; §2.2 sketch)",
              Kind.RECONSTRUCTED, ("error-rank.unique-continuation",), (_TESTS + "TestUniqueContinuationsForceRank",),
              "positivity of P named; the proof is ours"),
    Statement("thm-attracting", "ER.2", "error_rank", "seed 000, B.3 (\"Laplacian of a connected graph\")",
              Kind.NEW, ("error-rank.attracting-components",), (_TESTS + "TestWhereTheSeedsStatementStops",),
              "the precise form of the case k = V"),
    Statement("thm-wcdd", "ER.3", "error_rank", "none (Shivakumar and Chew 1974)", Kind.NEW, ("error-rank.wcdd",),
              (_TESTS + "TestWhereTheSeedsStatementStops", _TESTS + "TestMutantsAreRefutedThroughTheirMeasurement"),
              "both directions proved for S - I, S substochastic"),
    Statement("thm-batch", "ER.4", "error_rank", "seed 000, Prop. A.7 (statement lost; proof B.3; condition (9) lost)",
              Kind.CORRECTED, ("error-rank.mini-batch",),
              (_TESTS + "TestMiniBatches", _TESTS + "TestMiniBatchHypothesisAndConclusions"),
              "signs only on the support of Ñ; the rank part needs no closeness"),
    Statement("thm-batch-corollary", "ER.5", "error_rank", "seed 000, Cor. A.8 (statement lost, only cited)",
              Kind.RECONSTRUCTED, ("error-rank.mini-batch", "updates.eckart-young"), (),
              "checked through its two ingredients, not as one claim"),
    Statement("thm-logprob", "ER.6", "error_rank",
              "seed 000, Cor. A.3 (statement lost, proof kept); seed 001, Property 2 and Corollary 1", Kind.CORRECTED,
              ("logprob-rank.log-softmax", "logprob-rank.row-shift", "logprob-rank.bottleneck"),
              (_TESTS + "TestLogProbabilities", _TESTS + "TestRowShiftIsExactOnIntegers"),
              "d + 1 without an output bias, d + 2 with one; P* > 0"),
)
