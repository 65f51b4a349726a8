"""Claims ``updates.*``: the rank of logit updates (Eq. 7) and the Eckart-Young residual (Prop. A.6).

Ranks are certified as in ``checks/claims/error_rank.py``: exactly over the integers for integer
instances (python-flint; a rational step size p/q is cleared by scaling with q^2), and as a
certified lower bound (SVD + Weyl margin) for Gaussian ones. Residuals are compared in float64
with a named tolerance and re-decided with 50-digit SVDs (mpmath) when the margin is inside it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from checks import exact, tolerance
from checks.strategies import step_instances
from checks.verdict import REGISTRY, Claim, Instance, Judgement, Measurement, Relation
from theory import updates as up

SEED_000 = "seed 000"  # "Lost in Backpropagation: The LM Head is a Gradient Bottleneck"
U = 2.0**-53

#: Digits of the mpmath escalation, and the relative margin below which it stays undecided.
MP_DIGITS = 50
MP_UNDECIDED = 1e-40


def step(instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    p = instance.params
    H, W, G = up.construct_step(p["contexts"], p["V"], p["D"], p["seed"], integers=p["integers"])
    return H, W, G, Fraction(p["eta_num"], p["eta_den"])


def update_matrix(instance: Instance, kind: str) -> tuple[np.ndarray, bool]:
    """The first-order update or the exact step; for integer instances scaled to integers
    (q * first order, q^2 * exact step, for eta = p/q), with Python ints (no overflow)."""
    H, W, G, eta = step(instance)
    if not instance.params["integers"]:
        call = up.first_order_update if kind == "first-order" else up.exact_step
        return call(H, W, G, float(eta)), False
    H, W, G = (m.astype(object) for m in (H, W, G))
    p, q = eta.numerator, eta.denominator
    if kind == "first-order":
        return up.first_order_update(H, W, G, p), True
    return (q * H - p * (G @ W)) @ (q * W - p * (G.T @ H)).T - q * q * (H @ W.T), True


def measure_rank(instance: Instance, backend: Any, factor: Fraction, kind: str, drop: int = 0) -> Measurement:
    matrix, is_integer = update_matrix(instance, kind)
    bound = 2 * instance.params["D"] - drop
    if is_integer:
        rank, method = exact.exact_rank(matrix)
        return Measurement(float(rank), float(bound), 0.0, method, {"rank": rank}, exact_sides=True)
    sigma = np.linalg.svd(matrix, compute_uv=False)
    margin = tolerance.svd_rank_margin(matrix.shape, U, float(np.linalg.norm(matrix)), float(sigma[0]))
    lower = int(np.sum(sigma > margin))
    certificate = {"weyl_margin": margin, "certified_rank_lower_bound": lower}
    return Measurement(float(lower), float(bound), 0.0, "certified rank lower bound (SVD + Weyl)", certificate, True)


def judge_rank(instance: Instance, factor: Fraction, kind: str, drop: int = 0) -> Judgement:
    m = measure_rank(instance, None, factor, kind, drop)
    exact_rank = m.method.startswith("exact")
    if m.lhs > m.rhs:  # an exact rank, or a certified lower bound, above the claimed bound
        return Judgement(m.lhs, m.rhs, -1, m.method, certificate=m.certificate)
    return Judgement(m.lhs, m.rhs, 1 if m.rhs > m.lhs else 0 if exact_rank else None, m.method)


def delta_for(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """(Delta, G): the candidate update of rank <= 2D and the gradient it should follow."""
    H, W, G, eta = step(instance)
    G = G.astype(np.float64)
    kind, D = instance.params["delta"], instance.params["D"]
    rank = min(2 * D, *G.shape)
    if kind == "first-order":
        return up.first_order_update(H.astype(float), W.astype(float), G, float(eta)), G
    if kind == "exact-step":
        return up.exact_step(H.astype(float), W.astype(float), G, float(eta)), G
    if kind == "truncated-svd":
        return up.truncated_svd(G, rank), G
    rng = np.random.default_rng(instance.params["seed"] + 1)
    return rng.standard_normal((G.shape[0], rank)) @ rng.standard_normal((rank, G.shape[1])), G


def measure_eckart_young(instance: Instance, backend: Any, factor: Fraction, extra: int = 0) -> Measurement:
    delta, G = delta_for(instance)
    r = max(min(2 * instance.params["D"], *G.shape) - extra, 0)
    tail = up.tail_norm(G, r)
    fit = up.residual(delta, G)
    tol = tolerance.svd_rank_margin(G.shape, U, float(np.linalg.norm(G)), float(np.linalg.norm(G))) * 4
    certificate = {"best_scale": up.best_scale(delta, G), "tail_rank": r}
    return Measurement(tail, fit, tol, "float64 SVD tail vs least-squares residual", certificate)


def exact_delta(instance: Instance, Gm: Any, r: int) -> Any:
    """Delta rebuilt at the working mpmath precision *from its definition*, so that its rank is
    at most 2D up to 10^-50 (the float Delta is not: rounding fills in the other singular values,
    and a rounded G_2D can beat the tail by an ulp without refuting anything)."""
    H, W, _, eta = step(instance)
    kind = instance.params["delta"]
    if kind == "truncated-svd":
        left, sigma, right = mpmath.svd_r(Gm)
        return sum((sigma[i] * left[:, i] * right[i, :] for i in range(r)), mpmath.zeros(Gm.rows, Gm.cols))
    if kind == "random-rank":
        rng = np.random.default_rng(instance.params["seed"] + 1)
        rank = min(2 * instance.params["D"], Gm.rows, Gm.cols)
        A = mpmath.matrix(rng.standard_normal((Gm.rows, rank)).tolist())
        return A * mpmath.matrix(rng.standard_normal((rank, Gm.cols)).tolist())
    Hm, Wm, e = (
        mpmath.matrix(H.astype(float).tolist()),
        mpmath.matrix(W.astype(float).tolist()),
        mpmath.mpf(eta.numerator) / eta.denominator,
    )
    first = -e * (Gm * Wm * Wm.T + Hm * (Hm.T * Gm))
    if kind == "first-order":
        return first
    return first + e * e * (Gm * Wm * Hm.T * Gm)


def judge_eckart_young(instance: Instance, factor: Fraction, extra: int = 0) -> Judgement:
    """Both sides at 50 digits (mpmath): the singular values of G, and the residual of Delta
    rebuilt from its definition at the best c."""
    _, G = delta_for(instance)
    r = max(min(2 * instance.params["D"], *G.shape) - extra, 0)
    with mpmath.workdps(MP_DIGITS):
        Gm = mpmath.matrix(G.tolist())
        Dm = exact_delta(instance, Gm, min(2 * instance.params["D"], *G.shape))
        sigma = mpmath.svd_r(Gm, compute_uv=False)
        tail = mpmath.sqrt(sum(s**2 for s in list(sigma)[r:]))
        entries = [(i, j) for i in range(Gm.rows) for j in range(Gm.cols)]
        inner = sum(Dm[i, j] * Gm[i, j] for i, j in entries)
        norm2 = sum(Dm[i, j] ** 2 for i, j in entries)
        c = inner / norm2 if norm2 else 0
        fit = mpmath.sqrt(sum((c * Dm[i, j] - Gm[i, j]) ** 2 for i, j in entries))
        margin = fit - tail
        scale = max(abs(fit), abs(tail), mpmath.mpf(1e-300))
        sign = None if abs(margin) <= MP_UNDECIDED * scale else (1 if margin > 0 else -1)
        return Judgement(float(tail), float(fit), sign, f"mpmath {MP_DIGITS}-digit SVD", float(MP_UNDECIDED * scale))


def measure_attained(instance: Instance, backend: Any, factor: Fraction) -> Measurement:
    m = measure_eckart_young(Instance(instance.family, {**instance.params, "delta": "truncated-svd"}), backend, factor)
    return Measurement(m.lhs, m.rhs, m.tolerance, m.method, m.certificate)


def judge_attained(instance: Instance, factor: Fraction) -> Judgement:
    j = judge_eckart_young(Instance(instance.family, {**instance.params, "delta": "truncated-svd"}), factor)
    return Judgement(j.lhs, j.rhs, 0 if j.sign is None else j.sign, j.method + " (equal to its precision)", j.radius)


def _witnesses(V: int, deltas: tuple[str, ...]) -> list[Instance]:
    V = min(V, 48)
    rows = []
    for integers in (True, False):
        for D, contexts in ((1, 12), (2, 30), (max(1, V // 4), 40)):
            if D > V:
                continue
            for delta in deltas:
                rows.append(
                    Instance(
                        "step",
                        {
                            "contexts": contexts,
                            "V": V,
                            "D": D,
                            "seed": D,
                            "integers": integers,
                            "eta_num": 1,
                            "eta_den": 3,
                            "delta": delta,
                        },
                    )
                )
    return rows


def _claim(name: str, **fields: Any) -> Claim:
    fields.setdefault("bound", None)
    fields.setdefault("array_api", False)
    fields.setdefault("random_instances", lambda V, n, seed: [])
    fields.setdefault("source", f"{SEED_000}, Eq. 7 (§2.2)")
    return Claim(id=name, **fields)


first_order_rank = _claim(
    "updates.first-order-rank",
    title="The first-order logit update has rank at most 2D",
    statement="rank(−η(G W Wᵀ + H Hᵀ G)) ≤ 2D",
    domain="H: C × D, W: V × D, G: C × V; integer (exact rank) or Gaussian (certified lower bound)",
    relation=Relation.AT_MOST,
    measure=lambda i, b, f: measure_rank(i, b, f, "first-order"),
    judge_exactly=lambda i, f: judge_rank(i, f, "first-order"),
    witnesses=lambda V: _witnesses(V, ("first-order",)),
    strategy=lambda: step_instances("first-order"),
)
exact_step_rank = _claim(
    "updates.exact-step-rank",
    title="The exact logit change of a gradient step has rank at most 2D",
    statement="rank(H'W'ᵀ − HWᵀ) ≤ 2D for H' = H − ηGW, W' = W − ηGᵀH",
    domain="as for updates.first-order-rank; η = p/q rational",
    relation=Relation.AT_MOST,
    measure=lambda i, b, f: measure_rank(i, b, f, "exact-step"),
    judge_exactly=lambda i, f: judge_rank(i, f, "exact-step"),
    witnesses=lambda V: _witnesses(V, ("exact-step",)),
    strategy=lambda: step_instances("exact-step"),
)
eckart_young = _claim(
    "updates.eckart-young",
    source=f"{SEED_000}, Prop. A.6 (App. A.3)",
    title="No rank-2D update follows the logit gradient beyond its tail",
    statement="‖cΔ − G‖_F ≥ (Σ_{i>2D} σ_i(G)²)^{1/2} for every Δ of rank ≤ 2D and every scalar c",
    domain="Δ = the first-order update, the exact step, a random rank-2D matrix, or G's truncated SVD",
    relation=Relation.AT_MOST,
    measure=measure_eckart_young,
    judge_exactly=judge_eckart_young,
    witnesses=lambda V: _witnesses(V, ("first-order", "exact-step", "random-rank")),
    strategy=lambda: step_instances("any"),
)
eckart_young_attained = _claim(
    "updates.eckart-young-attained",
    source=f"{SEED_000}, Prop. A.6 (equality case, Eckart-Young-Mirsky)",
    title="The truncated SVD attains the residual bound",
    statement="min_c ‖cG_{2D} − G‖_F = (Σ_{i>2D} σ_i(G)²)^{1/2} (at c = 1)",
    domain="G Gaussian or integer, any shape",
    relation=Relation.EQUAL,
    measure=measure_attained,
    judge_exactly=judge_attained,
    witnesses=lambda V: _witnesses(V, ("truncated-svd",)),
    strategy=lambda: step_instances("truncated-svd"),
)

first_order_rank.with_mutant(
    "at-most-2D-minus-1",
    statement="rank of the first-order update ≤ 2D − 1  (false: generically it is 2D)",
    measure=lambda i, b, f: measure_rank(i, b, f, "first-order", drop=1),
    judge_exactly=lambda i, f: judge_rank(i, f, "first-order", drop=1),
)
eckart_young.with_mutant(
    "one-more-tail-value",
    statement="‖cΔ − G‖_F ≥ (Σ_{i≥2D} σ_i(G)²)^{1/2}  (false: the truncated SVD misses only i > 2D)",
    measure=lambda i, b, f: measure_eckart_young(i, b, f, extra=1),
    judge_exactly=lambda i, f: judge_eckart_young(i, f, extra=1),
    witnesses=lambda V: _witnesses(V, ("truncated-svd",)),
    strategy=lambda: step_instances("truncated-svd"),
)

for _claim_object in (first_order_rank, exact_step_rank, eckart_young, eckart_young_attained):
    REGISTRY.register(_claim_object)
