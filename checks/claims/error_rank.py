"""Claims ``error-rank.*`` and ``logprob-rank.*``: ranks of P - Ñ and of log-probabilities.

Ranks are certified, never read off a thresholded SVD alone. A lower bound comes from a
certificate: strict diagonal dominance (O(V) per row, streamed from the logits), positivity
of a stochastic matrix (the Laplacian case), an SVD with a Weyl margin, or a rank mod p. An
upper bound comes from structure: the number of rows, the kernel vector 1 of P - Ñ, or an
exact rank over the integers (python-flint).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from checks import exact, tolerance
from checks.data import characters, read_corpus, words
from checks.strategies import (
    batch_instances,
    corpus_instances,
    low_rank_instances,
    row_shift_instances,
    stochastic_instances,
    unique_continuation_instances,
    wcdd_instances,
)
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import error_rank as er
from theory._validation import InputError

SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
SEED_001 = "seed 001"  # "Breaking the softmax bottleneck: your output layer is a rank-d wall"
U = 2.0**-53

#: Largest k x V for which the dense SVD route cross-checks the dominance certificate.
DENSE_ENTRIES = 1 << 18


# --------------------------------------------------------------------------- instances


def unique_instance(instance: Instance) -> tuple[er.LogitRows, np.ndarray]:
    """(logits, tokens) of a unique-continuation instance, synthetic or from a corpus."""
    p = instance.params
    if instance.family == "unique-continuation":
        return er.construct_unique_continuation(p["V"], p["k"], p["D"], p["seed"], scale=p.get("scale", 1.0))
    if instance.family == "corpus":
        stream = corpus_stream(p["corpus"], p["level"])
        counts, _ = er.ngram_counts(stream.ids, p["order"], stream.V)
        _, tokens = er.unique_continuations(counts)
        logits, _ = er.construct_unique_continuation(stream.V, len(tokens), p["D"], p["seed"], scale=p["scale"])
        return logits, tokens
    raise InputError(f"instance: unknown family {instance.family!r}")


_STREAMS: dict[tuple[str, str], Any] = {}


def corpus_stream(corpus: str, level: str) -> Any:
    """A corpus read once per process (hash-verified) as characters or words."""
    key = (corpus, level)
    if key not in _STREAMS:
        text = read_corpus(corpus)
        _STREAMS[key] = characters(text) if level == "char" else words(text)
    return _STREAMS[key]


def rank_interval(logits: er.LogitRows, tokens: np.ndarray) -> tuple[int, int, str, dict[str, Any]]:
    """Certified ``(lower, upper)`` bounds on rank(P - Ñ) over the unique-continuation rows.

    Upper: the rows are k, and (P - Ñ)1 = 0, so rank <= min(k, V - 1). Lower, k < V: the
    k x k submatrix is strictly diagonally dominant with margins alpha_j (the mass outside T),
    computed with relative error gamma_{V+D+8} < 1, so a positive computed margin is a positive
    real one. Lower, k = V: every entry of P is at least exp(floor) > 0, so P_T is an
    irreducible stochastic matrix and rank(I - P_T) = V - 1."""
    k, V = len(tokens), logits.shape[1]
    upper = min(k, V - 1)
    if k < V:
        margins = er.dominance_margins(logits, tokens)
        certified = bool(np.all(margins > 0)) and tolerance.gamma(V + logits.H.shape[1] + 8, U) < 1
        certificate = {
            "route": "strict diagonal dominance",
            "smallest_margin": float(margins.min()),
            "varah_sigma_min_bound": er.varah_bound(margins),
        }
        return (k if certified else 0), upper, "dominance certificate", certificate
    floor = er.log_probability_floor(logits)
    certificate = {"route": "positive stochastic matrix (Laplacian)", "log_probability_floor": floor}
    return (V - 1 if math.isfinite(floor) else 0), upper, "positivity certificate", certificate


def dense_rank_lower(logits: er.LogitRows, tokens: np.ndarray) -> int:
    """Lower bound on rank(P - Ñ) from a dense SVD: singular values above the Weyl margin
    (error of forming P - Ñ plus the SVD's backward error)."""
    P = logits.probabilities(slice(None))
    M = P.copy()
    M[np.arange(len(tokens)), tokens] -= 1
    sigma = np.linalg.svd(M, compute_uv=False)
    margin = tolerance.svd_rank_margin(M.shape, U, float(np.linalg.norm(P)), float(sigma[0]))
    return int(np.sum(sigma > margin))


# --------------------------------------------------------------------------- unique continuation


def measure_unique(instance: Instance, backend: Any, factor: Fraction, extra: int = 0) -> Measurement:
    logits, tokens = unique_instance(instance)
    lower, upper, method, certificate = rank_interval(logits, tokens)
    k, V = len(tokens), logits.shape[1]
    if k * V <= DENSE_ENTRIES:
        certificate["dense_svd_lower_bound"] = dense_rank_lower(logits, tokens)
    certificate["rank_upper_bound"] = upper
    claimed = min(k + extra, V - 1 + extra)
    return Measurement(float(claimed), float(lower), 0.0, method, certificate, exact_sides=True)


def judge_unique(instance: Instance, factor: Fraction, extra: int = 0) -> Judgement:
    """Re-decide in ball arithmetic: the margins alpha_j of a softmax are positive reals, so a
    margin that underflowed in float64 is recomputed at 256 bits; the upper bound is exact."""
    logits, tokens = unique_instance(instance)
    k, V = len(tokens), logits.shape[1]
    claimed, upper = min(k + extra, V - 1 + extra), min(k, V - 1)
    if claimed > upper:
        return Judgement(float(claimed), float(upper), -1, "structural upper bound (rows; (P - Ñ)1 = 0)")
    if k == V:
        return Judgement(float(claimed), float(V - 1), 0, "positivity of softmax (exact reals)")
    outside = np.ones(V, dtype=bool)
    outside[tokens] = False
    with exact.precision(256):
        for j in range(k):
            z = logits.block(slice(j, j + 1))[0]
            top = exact.ball(float(z.max()))
            mass = sum(((exact.ball(float(x)) - top).exp() for x in z[outside]), start=exact.ball(0.0))
            if exact.sign(mass) != 1:
                return Judgement(float(claimed), 0.0, None, "interval-256")
    return Judgement(float(claimed), float(k), 1 if claimed < k else 0, "interval-256 dominance margins")


# --------------------------------------------------------------------------- beyond positivity


def stochastic_weights(instance: Instance) -> np.ndarray:
    p = instance.params
    return er.construct_stochastic_with_classes(p["n"], p["closed"], p["seed"], density=p["density"])


def measure_attracting(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    weights = stochastic_weights(instance)
    scaled = np.diag(weights.sum(axis=1)) - weights  # rows of I - P_T times their totals
    rank, method = exact.exact_rank(scaled)
    predicted = er.stochastic_defect_rank(weights)
    certificate = {"attracting_components": weights.shape[0] - predicted}
    return Measurement(float(rank), float(predicted), 0.0, method, certificate, exact_sides=True)


def judge_attracting(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_attracting(instance, None, factor)
    return Judgement(m.lhs, m.rhs, (m.rhs > m.lhs) - (m.rhs < m.lhs), m.method)


def wcdd_matrix(instance: Instance) -> np.ndarray:
    """diag(w) - W for a pattern with one closed class, some of whose rows leak mass (become
    strictly dominant): every row reaches the closed class, and inside it every row reaches
    a leak, so the matrix is weakly chained diagonally dominant."""
    p = instance.params
    weights = er.construct_stochastic_with_classes(p["n"], 1, p["seed"], density=p["density"])
    closed = np.array(sorted(next(iter(er.nx.attracting_components(er.positive_graph(weights))))))
    leaks = np.random.default_rng(p["seed"]).choice(closed, size=min(p["leaks"], len(closed)), replace=False)
    totals = weights.sum(axis=1)
    totals[leaks] += 1  # mass that leaves the token set: those rows become strictly dominant
    return np.diag(totals) - weights


def measure_wcdd(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    M = wcdd_matrix(instance)
    if not er.is_weakly_chained_diagonally_dominant(M):
        raise InputError("instance: the matrix is not weakly chained diagonally dominant")
    rank, method = exact.exact_rank(M)
    return Measurement(float(M.shape[0]), float(rank), 0.0, method, {"wcdd": True}, exact_sides=True)


def judge_wcdd(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_wcdd(instance, None, factor)
    return Judgement(m.lhs, m.rhs, (m.rhs > m.lhs) - (m.rhs < m.lhs), m.method)


# --------------------------------------------------------------------------- mini-batches


def batch_parts(instance: Instance) -> dict[str, Any]:
    """The full counts, a batch, a model P within delta of Ñ, and the set C^u_B."""
    p = instance.params
    counts = er.construct_zipf_language(p["V"], p["contexts"], p["seed"], unique_share=p["unique_share"])
    batch = er.sample_batch(counts, p["batch_tokens"], p["seed"])
    rows, tokens = er.batch_unique_continuations(counts, batch)
    full = er.empirical_distribution(counts)[rows].toarray()
    delta = p["delta"]
    P = (1 - delta) * full + delta / p["V"]
    return {"rows": rows, "tokens": tokens, "full": full, "P": P, "delta": delta, "V": p["V"]}


def measure_batch(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    parts = batch_parts(instance)
    tokens, full, P, V = parts["tokens"], parts["full"], parts["P"], parts["V"]
    k = len(tokens)
    if k == 0:
        raise InputError("instance: the batch has no context with one batch token and several data tokens")
    epsilon = float(full[full > 0].min())  # epsilon_B: the smallest positive entry of Ñ on C^u_B
    batch_rows = np.zeros_like(full)
    batch_rows[np.arange(k), tokens] = 1
    same_signs = bool(np.all(np.sign(P - batch_rows)[full > 0] == np.sign(full - batch_rows)[full > 0]))
    limit = (full - batch_rows)[:, tokens]
    outside = np.ones(V, dtype=bool)
    outside[tokens] = False
    margins = P[:, outside].sum(axis=1)
    lower = k if (k < V and np.all(margins > 0)) or (k == V and P.min() > 0) else 0
    certificate = {
        "k": k,
        "epsilon_B": epsilon,
        "max_abs_P_minus_N": float(np.abs(P - full).max()),
        "sign_pattern_preserved": same_signs,
        "limit_is_wcdd": er.is_weakly_chained_diagonally_dominant(limit) if k < V else None,
        "smallest_margin": float(margins.min()) if k < V else None,
    }
    if not (certificate["max_abs_P_minus_N"] < epsilon and same_signs):
        raise InputError("instance: P is not within epsilon_B of Ñ (outside Prop. A.7's domain)")
    claimed = min(k, V - 1)
    return Measurement(float(claimed), float(min(lower, claimed)), 0.0, "dominance certificate", certificate, True)


def judge_batch(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_batch(instance, None, factor)
    return Judgement(m.lhs, m.rhs, None if m.rhs < m.lhs else 1, m.method)


# --------------------------------------------------------------------------- log-probabilities


def low_rank_matrix(instance: Instance) -> np.ndarray:
    p = instance.params
    return er.construct_low_rank_integers(p["rows"], p["columns"], p["rank"], p["seed"], spread=p["spread"])


def certified_rank_lower(L: np.ndarray, entry_error: float) -> tuple[int, float]:
    """Singular values of L above its error bound: a certified lower bound on rank(L)."""
    sigma = np.linalg.svd(L, compute_uv=False)
    margin = entry_error + tolerance.svd_rank_margin(L.shape, U, 0.0, float(sigma[0]))
    return int(np.sum(sigma > margin)), margin


def measure_log_softmax(instance: Instance, backend: Any, factor: Fraction, drop: int = 0) -> Measurement:
    A = low_rank_matrix(instance) * instance.params.get("scale", 1)
    rank_A, method = exact.exact_rank(A)
    L = er.log_softmax(A)
    entry_error = tolerance.log_softmax_error(A, L, U)
    lower, margin = certified_rank_lower(L, entry_error)
    certificate = {"rank_A": rank_A, "rank_A_method": method, "weyl_margin": margin}
    bound = rank_A + 1 - drop
    return Measurement(float(lower), float(bound), 0.0, "certified rank lower bound (SVD + Weyl)", certificate, True)


def judge_log_softmax(instance: Instance, factor: Fraction, drop: int = 0) -> Judgement:
    m = measure_log_softmax(instance, None, factor, drop)
    return Judgement(m.lhs, m.rhs, -1 if m.lhs > m.rhs else None, m.method, certificate=m.certificate)


def measure_row_shift(instance: Instance, backend: Any, factor: Fraction, allowed: int = 1) -> Measurement:
    A = low_rank_matrix(instance)
    rng = np.random.default_rng(instance.params["shift_seed"])
    spread = instance.params["shift_spread"]
    first = er.row_shift(A, rng.integers(-spread, spread + 1, size=A.shape[0]))
    second = er.row_shift(A, rng.integers(-spread, spread + 1, size=A.shape[0]) * instance.params["second"])
    r1, method = exact.exact_rank(first)
    r2, _ = exact.exact_rank(second)
    certificate = {"rank_first": r1, "rank_second": r2}
    return Measurement(float(abs(r1 - r2)), float(allowed), 0.0, method, certificate, exact_sides=True)


def judge_row_shift(instance: Instance, factor: Fraction, allowed: int = 1) -> Judgement:
    m = measure_row_shift(instance, None, factor, allowed)
    return Judgement(m.lhs, m.rhs, (m.rhs > m.lhs) - (m.rhs < m.lhs), m.method, certificate=m.certificate)


def measure_bottleneck(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    p = instance.params
    rng = np.random.default_rng(p["seed"])
    H = p["scale"] * rng.standard_normal((p["rows"], p["rank"]))
    W = rng.standard_normal((p["columns"], p["rank"]))
    L = er.log_softmax(H @ W.T)
    entry_error = tolerance.log_softmax_error(H @ W.T, L, U) + tolerance.gamma(p["rank"] + 2, U) * float(
        np.abs(H).max() * np.abs(W).max() * p["rank"]
    )
    lower, margin = certified_rank_lower(L, entry_error)
    certificate = {"d": p["rank"], "weyl_margin": margin}
    return Measurement(
        float(lower), float(p["rank"] + 1), 0.0, "certified rank lower bound (SVD + Weyl)", certificate, True
    )


def judge_bottleneck(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_bottleneck(instance, None, factor)
    return Judgement(m.lhs, m.rhs, -1 if m.lhs > m.rhs else None, m.method)


# --------------------------------------------------------------------------- registration


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("bound", None)
    fields.setdefault("array_api", False)  # sparse counts and graphs: NumPy only
    fields.setdefault("random_instances", lambda V, n, seed: [])
    return Claim(id=name, **fields)


def _unique_witnesses(V: int) -> list[Instance]:
    ks = sorted({1, min(V, 2), min(V - 1, 64), V - 1, V} if V <= 4096 else {1, 64, 1024, V})
    rows = [Instance("unique-continuation", {"V": V, "k": k, "D": 8, "seed": 0, "scale": 1.0}) for k in ks if k >= 1]
    rows.append(Instance("unique-continuation", {"V": V, "k": min(V - 1, 16) or 1, "D": 4, "seed": 1, "scale": 300.0}))
    if V <= 4096:
        rows.append(
            Instance(
                "corpus",
                {
                    "corpus": "tinyshakespeare.txt",
                    "level": "char",
                    "order": 3,
                    "D": 16,
                    "seed": 0,
                    "scale": 1.0,
                },
            )
        )
    return rows


def _unique_random(V: int, n: int, seed: int) -> list[Instance]:
    rng = np.random.default_rng(seed)
    return [
        Instance(
            "unique-continuation",
            {
                "V": V,
                "k": int(rng.integers(1, min(V, 512) + 1)),
                "D": int(rng.integers(1, 33)),
                "seed": int(rng.integers(2**31)),
                "scale": float(10 ** rng.uniform(-1, 2)),
            },
        )
        for _ in range(n)
    ]


unique_continuation = _claim(
    "error-rank.unique-continuation",
    title="Unique continuations force a high-rank prediction error",
    source=f"{SEED_000}, Prop. A.5 (App. A.3; proof in B.2)",
    statement="rank(P − Ñ) ≥ min(k, V − 1) for every strictly positive P, where k distinct tokens are "
    "each the only observed continuation of some context",
    domain="P = softmax(HWᵀ) (strictly positive in exact arithmetic); any V, k, D",
    relation=Relation.AT_MOST,
    measure=measure_unique,
    judge_exactly=judge_unique,
    witnesses=_unique_witnesses,
    random_instances=_unique_random,
    strategy=lambda: st.one_of(unique_continuation_instances(), corpus_instances()),
)
attracting = _claim(
    "error-rank.attracting-components",
    title="Beyond positivity: the rank of I − P_T counts attracting classes",
    source="rankwall (replaces Prop. A.5's k = V case when P has zeros)",
    statement="rank(I − P_T) = n − a for a row-stochastic n × n matrix P_T, a = number of attracting "
    "components of the graph of its positive entries",
    domain="row-stochastic P_T with rational entries (zeros allowed)",
    relation=Relation.EQUAL,
    measure=measure_attracting,
    judge_exactly=judge_attracting,
    witnesses=lambda V: [
        Instance("stochastic", {"n": min(V, 60), "closed": c, "seed": s, "density": 0.2})
        for c in (1, 2, min(V, 60) // 3 or 1)
        for s in (0, 1)
    ],
    strategy=stochastic_instances,
)
wcdd = _claim(
    "error-rank.wcdd",
    title="Weakly chained diagonally dominant submatrices are nonsingular",
    source="rankwall (replaces Prop. A.5's dominance argument when P has zeros)",
    statement="a weakly chained diagonally dominant n × n matrix has rank n",
    domain="integer matrices diag(w) − W built from a substochastic pattern with leaking rows",
    relation=Relation.AT_MOST,
    measure=measure_wcdd,
    judge_exactly=judge_wcdd,
    witnesses=lambda V: [Instance("wcdd", {"n": min(V, 60), "leaks": 1, "seed": s, "density": 0.1}) for s in range(4)],
    strategy=wcdd_instances,
)
mini_batch = _claim(
    "error-rank.mini-batch",
    title="Mini-batch prediction errors stay high-rank near convergence",
    source=f"{SEED_000}, Prop. A.7 and Cor. A.8 (App. A.3.1; proof in B.3)",
    statement="if max|P − Ñ| < ε_B (the smallest positive entry of Ñ on C^u_B), the sign pattern of "
    "P − Ñ^B on C^u_B is that of Ñ − Ñ^B, and rank(P − Ñ^B) ≥ min(|C^u_B|, V − 1)",
    domain="Zipfian languages, batches drawn without replacement, P = (1 − δ)Ñ + δ/V",
    relation=Relation.AT_MOST,
    measure=measure_batch,
    judge_exactly=judge_batch,
    witnesses=lambda V: [
        Instance(
            "batch",
            {
                "V": min(V, 2048),
                "contexts": 600,
                "seed": s,
                "unique_share": 0.3,
                "batch_tokens": 400,
                "delta": 1e-3,
            },
        )
        for s in range(3)
    ],
    strategy=batch_instances,
)
log_softmax_rank = _claim(
    "logprob-rank.log-softmax",
    title="log softmax adds at most one to the rank",
    source=f"{SEED_000}, Cor. A.3 (App. A.2)",
    statement="rank(log softmax(A)) ≤ rank(A) + 1",
    domain="integer matrices A of chosen rank (exact rank by python-flint), times an integer scale",
    relation=Relation.AT_MOST,
    measure=measure_log_softmax,
    judge_exactly=judge_log_softmax,
    witnesses=lambda V: [
        Instance("low-rank", {"rows": 40, "columns": min(V, 80), "rank": r, "seed": 0, "spread": 3, "scale": s})
        for r in (0, 1, 5, min(V, 39))
        for s in (1, 7)
        if r <= min(V, 40)
    ],
    strategy=low_rank_instances,
)
row_shift = _claim(
    "logprob-rank.row-shift",
    title="Row shifts change the rank by at most one",
    source=f"{SEED_001}, Property 2",
    statement="|rank(A + λ1ᵀ) − rank(A + μ1ᵀ)| ≤ 1 for all vectors λ, μ",
    domain="integer A of chosen rank, integer shifts (exact ranks by python-flint)",
    relation=Relation.AT_MOST,
    measure=measure_row_shift,
    judge_exactly=judge_row_shift,
    witnesses=lambda V: [
        Instance(
            "row-shift",
            {
                "rows": 30,
                "columns": min(V, 50),
                "rank": r,
                "seed": 0,
                "spread": 2,
                "shift_seed": s,
                "shift_spread": 5,
                "second": w,
            },
        )
        for r in sorted({0, min(3, V), min(V, 29)})
        for s in (0, 1)
        for w in (0, 1)
    ],
    strategy=row_shift_instances,
)
bottleneck = _claim(
    "logprob-rank.bottleneck",
    title="Rank-d logits give log-probabilities of rank at most d + 1",
    source=f"{SEED_001}, Corollary 1 (the softmax bottleneck)",
    statement="rank(log softmax(HWᵀ)) ≤ d + 1 for H ∈ ℝ^{N×d}, W ∈ ℝ^{V×d}",
    domain="Gaussian factors, scales 0.1 to 30",
    relation=Relation.AT_MOST,
    measure=measure_bottleneck,
    judge_exactly=judge_bottleneck,
    witnesses=lambda V: [
        Instance("factors", {"rows": 60, "columns": min(V, 120), "rank": d, "seed": 0, "scale": s})
        for d in (1, 4, 16)
        for s in (0.1, 3.0)
        if d < min(V, 60)
    ],
    strategy=lambda: low_rank_instances(factors=True),
)

unique_continuation.with_mutant(
    "at-least-k-plus-1",
    statement="rank(P − Ñ) ≥ min(k + 1, V)  (false: only k rows, and (P − Ñ)1 = 0)",
    measure=lambda i, b, f: measure_unique(i, b, f, extra=1),
    judge_exactly=lambda i, f: judge_unique(i, f, extra=1),
)
unique_continuation.with_mutant(
    "full-rank-when-k-is-V",
    statement="rank(P − Ñ) = V when k = V  (false: (P − Ñ)1 = 0)",
    measure=lambda i, b, f: measure_unique(i, b, f, extra=1),
    judge_exactly=lambda i, f: judge_unique(i, f, extra=1),
    witnesses=lambda V: [Instance("unique-continuation", {"V": V, "k": V, "D": 4, "seed": 0, "scale": 1.0})],
    strategy=lambda: unique_continuation_instances(k_equals_V=True),
)
row_shift.with_mutant(
    "preserves-rank",
    statement="rank(A + λ1ᵀ) = rank(A + μ1ᵀ)  (false: a shift can add the direction 1)",
    measure=lambda i, b, f: measure_row_shift(i, b, f, allowed=0),
    judge_exactly=lambda i, f: judge_row_shift(i, f, allowed=0),
)
log_softmax_rank.with_mutant(
    "no-extra-rank",
    statement="rank(log softmax(A)) ≤ rank(A)  (false: the normaliser adds a direction)",
    measure=lambda i, b, f: measure_log_softmax(i, b, f, drop=1),
    judge_exactly=lambda i, f: judge_log_softmax(i, f, drop=1),
)

for _claim_object in (
    unique_continuation,
    attracting,
    wcdd,
    mini_batch,
    log_softmax_rank,
    row_shift,
    bottleneck,
):
    REGISTRY.register(_claim_object)
