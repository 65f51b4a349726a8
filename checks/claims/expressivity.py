"""Claims ``expressivity.*``: Gibbs' inequality (Prop. A.2), the top-1 witness at D >= 2
(Prop. A.4), and the D = 1 contrast, with and without a bias."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from checks import exact, tolerance
from checks.strategies import argmax_instances, expressivity_instances, gibbs_instances
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import error_rank as er
from theory import expressivity as ex

SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = 2.0**-53


def measure_gibbs(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    p = instance.params
    counts = er.construct_zipf_language(p["V"], p["contexts"], p["seed"]).toarray()
    N_tilde = counts / counts.sum(axis=1, keepdims=True)
    f = counts.sum(axis=1) / counts.sum()
    z = np.random.default_rng(p["seed"] + 1).standard_normal(counts.shape) * p["scale"]
    P = np.exp(z - z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    if p["exact_fit"]:
        P = N_tilde.copy()
    gap, kl = ex.kl_gap(P, N_tilde, f)
    tol = tolerance.gamma(p["V"] * p["contexts"] + 8, U) * (1 + abs(gap) + abs(kl)) * 8
    certificate = {"kl": kl, "identity_residual": gap - kl}
    return Measurement(0.0, gap, tol, "float64 cross-entropies", certificate)


def judge_gibbs(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_gibbs(instance, None, factor)
    zero_gap = instance.params["exact_fit"]
    return Judgement(0.0, m.rhs, 0 if zero_gap else None, "P = Ñ exactly" if zero_gap else "float64 (undecided)")


def witness(instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    p = instance.params
    rng = np.random.default_rng(p["seed"])
    targets = rng.integers(0, p["V"], size=p["contexts"])
    probs = rng.uniform(1.0 / p["V"], 1.0, size=p["contexts"])
    probs = np.clip(probs, 1.0 / p["V"] + p["eps"], 1.0 - p["eps"])
    H, W = ex.construct_top1_witness(targets, probs, p["D"], p["eps"], p["V"])
    return H, W, targets, probs


def measure_top1(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    H, W, targets, probs = witness(instance)
    argmax, top, ties = ex.top1(H, W)
    wrong = int(np.sum((argmax != targets) | (ties > 1)))
    error = float(np.abs(top - probs).max()) if wrong == 0 else float("inf")
    certificate = {"wrong_argmax": wrong, "largest_probability_error": error}
    return Measurement(
        error, float(instance.params["eps"]) * float(factor), 0.0, "float64 softmax of the witness", certificate
    )


def judge_top1(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_top1(instance, None, factor)
    return Judgement(m.lhs, m.rhs, None if m.lhs > m.rhs else 1, m.method, certificate=m.certificate)


def measure_d1(instance: Instance, backend: Any, factor: Fraction, bias: bool = True) -> Measurement:
    """Tokens that are never the strict argmax: the tangent head (with bias) evaluated at h = w_t;
    without a bias, the interior weights (never the argmax, whatever h)."""
    W, b = ex.tangent_head(instance.params["V"], instance.params["seed"])
    if not bias:
        return Measurement(float(len(ex.interior_tokens(W))), 0.0, 0.0, "interior weights (D = 1, no bias)", None, True)
    argmax, _, ties = ex.top1(W, W, b)
    missed = int(np.sum((argmax != np.arange(len(W))) | (ties > 1)))
    return Measurement(float(missed), 0.0, 0.0, "tangent head at h = w_t", {"missed": missed}, True)


def judge_d1(instance: Instance, factor: Fraction, bias: bool = True) -> Judgement:
    """Exactly: for h = w_t the margin of token t over v is (w_v - w_t)^2 / 2 > 0 (with bias);
    without a bias, an interior w_t satisfies min w < w_t < max w in exact arithmetic, so for any h
    one of the extremes beats it (h w_t < max(h min w, h max w) unless h = 0, a tie of all)."""
    W, _ = ex.tangent_head(instance.params["V"], instance.params["seed"])
    weights = sorted({exact.rational(x) for x in W.ravel()})
    if bias:
        return Judgement(0.0, 0.0, 0, "exact: margins (w_v - w_t)^2 / 2 > 0 for distinct weights")
    interior = max(len(weights) - 2, 0)
    return Judgement(float(interior), 0.0, -1 if interior else 0, "exact comparison of rational weights")


def _witnesses(V: int) -> list[Instance]:
    return [
        Instance("top1", {"V": v, "D": D, "contexts": 16, "seed": s, "eps": 1e-6})
        for v in sorted({min(V, 16), min(V, 1024), V})
        for D in (2, 8)
        for s in (0, 1)
        if v >= 2
    ]


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("array_api", False)
    fields.setdefault("bound", None)
    fields.setdefault("random_instances", lambda V, n, seed: [])
    return Claim(id=name, **fields)


gibbs = _claim(
    "expressivity.gibbs",
    source=f"{SEED_000}, Prop. A.2 (App. A.2)",
    title="The cross-entropy is minimised exactly at the empirical distribution",
    statement="CE(P) − CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c) ≥ 0, with equality at P = Ñ",
    domain="Zipfian count matrices, P a softmax of Gaussian logits (or Ñ itself)",
    relation=Relation.AT_MOST,
    measure=measure_gibbs,
    judge_exactly=judge_gibbs,
    witnesses=lambda V: [
        Instance("gibbs", {"V": min(V, 512), "contexts": 64, "seed": s, "scale": sc, "exact_fit": e})
        for s in (0, 1)
        for sc in (0.5, 5.0)
        for e in (False, True)
    ],
    strategy=gibbs_instances,
)
top1_witness = _claim(
    "expressivity.top1-witness",
    source=f"{SEED_000}, Prop. A.4 (App. A.2; proof in B.1)",
    title="At D ≥ 2 any argmax and any top-1 probability are reachable without a bias",
    statement="for targets t_c and probabilities p_c ∈ (1/V, 1), the circle witness (H, W) has argmax t_c and "
    "|top-1 − p_c| ≤ ε for every context",
    domain="float64, V up to 131,072 (float32 loses the argmax near V ≈ 49,152: docs/expressivity.md)",
    relation=Relation.AT_MOST,
    measure=measure_top1,
    judge_exactly=judge_top1,
    witnesses=_witnesses,
    strategy=expressivity_instances,
)
d1_bias = _claim(
    "expressivity.d1-bias-argmax",
    source=f"{SEED_000}, App. B.1 (the D ≥ 2 requirement); rankwall (the bias case)",
    title="With a bias, D = 1 makes every token the argmax",
    statement="for the tangent head z_v(h) = w_v h − w_v²/2, token t is the strict argmax at h = w_t",
    domain="distinct weights w_v, V ≥ 2",
    relation=Relation.AT_MOST,
    measure=measure_d1,
    judge_exactly=judge_d1,
    witnesses=lambda V: [
        Instance("tangent", {"V": v, "seed": s}) for v in sorted({2, 3, min(V, 4096)}) for s in (0, 1)
    ],
    strategy=lambda: expressivity_instances(tangent=True),
)
top1_witness.with_mutant(
    "d1-without-bias",
    "every token is the strict argmax of some h at D = 1 without a bias  (false for V ≥ 3: interior weights never win)",
    measure=lambda i, b, f: measure_d1(i, b, f, bias=False),
    judge_exactly=lambda i, f: judge_d1(i, f, bias=False),
    witnesses=lambda V: [Instance("tangent", {"V": v, "seed": 0}) for v in sorted({3, min(V, 64)})],
    strategy=lambda: expressivity_instances(tangent=True),
)

for _claim_object in (gibbs, top1_witness, d1_bias):
    REGISTRY.register(_claim_object)


def argmax_head(instance: Instance) -> np.ndarray:
    """A random head (rows Gaussian), optionally with interior rows planted at convex combinations."""
    p = instance.params
    rng = np.random.default_rng(p["seed"])
    W = rng.standard_normal((p["V"], p["D"]))
    if p["interior"]:
        weights = rng.dirichlet(np.ones(p["V"]), size=p["interior"])
        W = np.vstack([W, weights @ W])  # convex combinations: never the strict argmax
    return W


def measure_hull(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    """Tokens where the LP pipeline and the convex hull (qhull) disagree: 0 is the claim."""
    from scipy.spatial import ConvexHull

    W = argmax_head(instance)
    result = ex.argmaxable(W)
    vertices = np.zeros(len(W), dtype=bool)
    vertices[ConvexHull(W).vertices] = True
    agree = (result["argmaxable"] & vertices) | (result["never"] & ~vertices)  # undecided never agrees
    disagree = int(np.sum(~agree))
    certificate = {"argmaxable": int(result["argmaxable"].sum()), "hull_vertices": int(vertices.sum())}
    return Measurement(float(disagree), 0.0, 0.0, "HiGHS LP pipeline vs qhull", certificate, True)


def judge_hull(instance: Instance, factor: Fraction) -> Judgement:
    m = measure_hull(instance, None, factor)
    return Judgement(m.lhs, 0.0, None if m.lhs else 0, m.method, certificate=m.certificate)


def measure_all_argmaxable(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    W = argmax_head(instance)
    result = ex.argmaxable(W)
    never = int(np.sum(result["never"]))
    return Measurement(float(never), 0.0, 0.0, "HiGHS LP pipeline", {"unargmaxable": never}, True)


def judge_all_argmaxable(instance: Instance, factor: Fraction) -> Judgement:
    """An unargmaxable planted row is a convex combination of the others: for any h its logit is
    the same combination of theirs, so it cannot exceed all of them (exact, whatever the LP says)."""
    m = measure_all_argmaxable(instance, None, factor)
    planted = instance.params["interior"]
    if planted:
        return Judgement(m.lhs, 0.0, -1, "exact: a planted row is a convex combination of the others")
    return Judgement(m.lhs, 0.0, None if m.lhs else 0, m.method)


argmax_vs_hull = _claim(
    "expressivity.argmaxable-vs-hull",
    source="seed 001 ('Stolen Probability', Demeter et al. 2020; Grivas et al. 2022)",
    title="Without a bias, a token is argmaxable exactly when it is a vertex of the convex hull",
    statement="the LP pipeline's argmaxable tokens are the vertices of conv{w_v} (qhull)",
    domain="Gaussian heads without bias, D = 2..6, with or without planted interior rows",
    relation=Relation.AT_MOST,
    measure=measure_hull,
    judge_exactly=judge_hull,
    witnesses=lambda V: [
        Instance("argmax-head", {"V": max(min(V, 300), D + 3), "D": D, "seed": s, "interior": k})
        for D in (2, 3, 5)
        for s in (0, 1)
        for k in (0, 3)
    ],
    strategy=lambda: argmax_instances(),
)
argmax_vs_hull.with_mutant(
    "every-token-argmaxable",
    "every token of every head is argmaxable  (false: a row inside the convex hull never wins)",
    measure=measure_all_argmaxable,
    judge_exactly=judge_all_argmaxable,
    witnesses=lambda V: [Instance("argmax-head", {"V": 50, "D": 3, "seed": 0, "interior": 2})],
)
REGISTRY.register(argmax_vs_hull)
